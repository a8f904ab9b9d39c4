//! The A2A protocol version 0.3 data model and its conversions to and
//! from the 1.0 model (feature `v0_3`).
//!
//! One conversion layer for both sides: the server's compatibility module
//! serves 0.3 clients through it, and the client calls 0.3 agents through
//! it, so the rules (what 0.3 cannot carry, what a `historyLength` of 0
//! means...) are written once.
//!
//! - [`types`]: the 0.3 JSON-RPC objects (`kind` discriminators,
//!   text/file/data parts, lower-case kebab-case states, `final` on status
//!   updates);
//! - [`convert`]: 0.3 to 1.0 and back, by move;
//! - [`rest`]: the 0.3 HTTP+JSON bodies (the ProtoJSON form of the 0.3
//!   protobuf messages) and their conversions to the JSON-RPC objects;
//! - `grpc` (with the `grpc` feature): the 0.3 gRPC service
//!   `a2a.v1.A2AService` (generated messages, client and server) and the
//!   bridge from its messages to the [`rest`] forms.
//!
//! What is converted: every object of the 0.3 operations (messages and
//! their text/file/data parts, tasks, statuses, artifacts, the four stream
//! events, push configs, the send/get/cancel/resubscribe parameters), both
//! ways, by move.
//!
//! What is lost, because 0.3 has no place for it (each loss is written at
//! its conversion): tenants; the `mediaType` and `filename` of text and
//! data parts; an unspecified role (read as the agent's); a 1.0
//! `historyLength` of 0 (0.3 reads 0 as "all", so 1 is asked); page tokens
//! of push config lists; `ListTasks`, which 0.3 has not. From 0.3 to 1.0,
//! `final` on status updates is dropped (1.0 implies it from the state) and
//! the `unknown` state becomes the unspecified one. Agent cards are not
//! converted here: the server adds the 0.3 members to its 1.0 card, and the
//! client reads a 0.3 card (interfaces, security schemes and requirements)
//! into the 1.0 model.
//!
//! The 0.3 specification: <https://a2a-protocol.org/v0.3.0/specification/>.

pub mod convert;
#[cfg(feature = "grpc")]
pub mod grpc;
// The structs mirror the 0.3 schema (and protobuf messages) member for
// member; the 0.3 specification documents each member, so they carry no
// doc comment of their own.
#[allow(missing_docs)]
pub mod rest;
#[allow(missing_docs)]
pub mod types;

/// The protocol version string a 0.3 agent card carries.
pub const PROTOCOL_VERSION: &str = "0.3.0";
