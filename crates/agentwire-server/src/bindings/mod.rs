//! The three protocol bindings, and the HTTP pieces two of them share.
//!
//! A binding only translates: it decodes a request from its wire form
//! (a JSON-RPC envelope, a REST path with its query and body, a gRPC
//! message with its metadata) into a call of the [`RequestHandler`], and
//! encodes what the handler returns (a result, an error, a stream of
//! events). No protocol rule is checked here; they are all the handler's,
//! so the three bindings cannot disagree.
//!
//! - `jsonrpc`: JSON-RPC 2.0 on `POST /` (spec section 9).
//! - `rest`: HTTP+JSON, resource URLs (spec section 11).
//! - `grpc`: the `lf.a2a.v1.A2AService` gRPC service (spec section 10),
//!   public as [`crate::grpc`]; `grpc_refusals`: the same codes for the
//!   requests the other gRPC services cannot read.
//! - `http`: what the two HTTP bindings share: bounded body reading, the
//!   call context from headers, Server-Sent Events, JSON answers, and the
//!   agent card endpoint.
//!
//! [`RequestHandler`]: crate::RequestHandler

pub mod grpc;
pub(crate) mod grpc_refusals;
pub(crate) mod http;
pub(crate) mod jsonrpc;
pub(crate) mod rest;
