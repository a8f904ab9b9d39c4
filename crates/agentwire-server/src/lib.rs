//! The A2A v1.0 agent runtime: implement [`AgentExecutor`], hand it to an
//! [`A2aServer`] with your [`AgentCard`], and it serves JSON-RPC, HTTP+JSON
//! and gRPC on one port, with the agent card at
//! `/.well-known/agent-card.json`.
//!
//! The smallest agent: every message becomes a completed task whose
//! artifact repeats the text.
//!
//! ```no_run
//! use agentwire_server::{A2aServer, AgentExecutor, RequestContext, TaskUpdater};
//! use agentwire_types::{A2aResult, AgentCard, AgentSkill, Artifact};
//!
//! struct Echo;
//!
//! impl AgentExecutor for Echo {
//!     async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
//!         task.start_work().await?;
//!         task.add_artifact(Artifact::text("echo", ctx.text())).await?;
//!         task.complete().await
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> std::io::Result<()> {
//!     let card = AgentCard::new("Echo", "Repeats what you say", "1.0.0")
//!         .with_skill(AgentSkill::new("echo", "Echo", "Repeats the text", ["echo"]));
//!     A2aServer::new(card, Echo).serve("127.0.0.1:8080").await
//! }
//! ```
//!
//! The crate's examples (`cargo run -p agentwire-server --example NAME`;
//! each serves on 127.0.0.1:8080, or on the port given as argument) show
//! one thing each: `echo` (the agent above), `streamed_artifact`
//! ([`TaskUpdater::artifact_chunk`]), `input_required` (a multi-turn
//! agent), `cancellation` (`ctx.canceled()` and the `cancel` hook),
//! `push_notifications` ([`PushConfig`]), `axum_app` ([`router`] in an
//! application of your own) and `extended_card` (an extended card for
//! callers with a bearer token).
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

mod artifact_writer;
pub mod auth;
mod bindings;
pub mod card_signing;
mod cluster;
mod compat;
mod executor;
mod handler;
mod manager;
pub mod observe;
pub mod push;
mod serving;
pub mod store;

pub use agentwire_types as types;
pub use agentwire_types::{A2aError, A2aResult, AgentCard};
pub use artifact_writer::{ArtifactWriter, DEFAULT_WRITER_MAX_WAIT};
pub use auth::{AuthSchemes, Authenticator, BearerTokens, NoAuth};
pub use bindings::grpc;
pub use bindings::http::DEFAULT_MAX_BODY_BYTES;
pub use card_signing::CardSigning;
pub use cluster::bus;
pub use cluster::bus::EventBus;
pub use executor::{
    AUTH_REQUIRED_FIELD, AgentExecutor, AuthRequest, CREDENTIAL_FIELD, IN_TASK_AUTH_EXTENSION,
    RequestContext, TaskUpdater, Update, in_task_auth_extension,
};
pub use handler::{CallContext, EventStream, HandlerBuilder, HandlerConfig, RequestHandler};
/// An address or network, as [`A2aServer::trusted_proxies`] takes them.
pub use ipnet::IpNet;
pub use push::{PushConfig, PushSender, PushSigner, RetryPolicy, UrlPolicy};
pub use serving::accept::{
    ConnectionLimits, DEFAULT_BODY_READ_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_REQUEST_HEAD_TIMEOUT, MAX_HEAD_BYTES,
};
pub use serving::local::{StartError, listen_local};
pub use serving::router::{RouterOptions, router};
pub use serving::server::{
    A2aServer, BoundServer, DEFAULT_SHUTDOWN_GRACE, ServerHandle, advertised_addr, shutdown_signal,
};
pub use serving::tls::{CertificateNames, DEFAULT_TLS_HANDSHAKE_TIMEOUT, TlsConfig};
