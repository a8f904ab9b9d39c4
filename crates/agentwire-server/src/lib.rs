//! The A2A v1.0 agent runtime: implement [`AgentExecutor`], hand it to an
//! [`A2aServer`] with your [`AgentCard`], and it serves JSON-RPC, HTTP+JSON
//! and gRPC on one port, with the agent card at
//! `/.well-known/agent-card.json`.
//!
//! # Features
//!
//! | feature | default | what it adds |
//! | --- | --- | --- |
//! | `sqlite` | no | `store::SqliteStore` (tasks in an embedded SQLite database, bundled: no system library) and `push::SqliteOutbox` (push notifications that survive a restart) |
//! | `postgres` | no | `store::PostgresStore` (tasks in PostgreSQL, shared by several replicas; pure Rust driver, rustls) and the PostgreSQL push outbox |
//!
//! Without them tasks live in memory (`store::MemoryStore`, bounded by
//! age and count). The three bindings, gRPC included, and push
//! notifications are always there.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

pub mod auth;
pub mod bus;
mod executor;
pub mod grpc;
mod handler;
mod http_common;
mod idempotency;
mod jsonrpc;
mod manager;
pub mod push;
mod rest;
mod serve;
mod server;
pub mod store;

pub use agentwire_types as types;
pub use agentwire_types::{A2aError, A2aResult, AgentCard};
pub use auth::{Authenticator, BearerTokens, NoAuth};
pub use bus::EventBus;
pub use executor::{AgentExecutor, RequestContext, TaskUpdater, Update};
pub use handler::{CallContext, EventStream, HandlerBuilder, HandlerConfig, RequestHandler};
pub use http_common::DEFAULT_MAX_BODY_BYTES;
pub use push::{PushConfig, PushSender, PushSigner, RetryPolicy, UrlPolicy};
pub use serve::MAX_HEAD_BYTES;
pub use server::{A2aServer, BoundServer, RouterOptions, ServerHandle, router, shutdown_signal};
