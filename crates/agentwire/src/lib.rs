//! The A2A (Agent2Agent) protocol v1.0 in Rust, in one dependency.
//!
//! `agentwire` re-exports the project's libraries so that an application
//! adds one crate and picks the sides it needs:
//!
//! | feature | module | what it is |
//! | --- | --- | --- |
//! | (always) | [`types`] | the data model: protocol types with ProtoJSON serde, constructors, [`A2aError`] |
//! | `server` | `server` | the agent runtime: [`AgentExecutor`](server::AgentExecutor), [`A2aServer`](server::A2aServer), stores, the three bindings on one port |
//! | `client` | `client` | the client: card discovery, negotiation, the three transports, streams, the ledger |
//! | `full` | both | |
//!
//! ```toml
//! [dependencies]
//! agentwire = { version = "0.1", features = ["server"] }
//! ```
//!
//! The smallest agent (the echo agent of the `agentwire-server` examples):
//!
//! ```no_run
//! # #[cfg(feature = "server")]
//! # mod agent {
//! use agentwire::server::{A2aServer, AgentExecutor, RequestContext, TaskUpdater};
//! use agentwire::types::{A2aResult, AgentCard, AgentSkill, Artifact};
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
//! // On 127.0.0.1 and the port given as the first argument (8080 without
//! // one); the address is printed once the port is bound.
//! pub async fn serve() -> Result<(), agentwire::server::StartError> {
//!     let card = AgentCard::new("Echo", "Repeats what you say", "1.0.0")
//!         .with_skill(AgentSkill::new("echo", "Echo", "Repeats the text", ["echo"]));
//!     let bound = A2aServer::new(card, Echo).bind_local(8080).await?;
//!     println!("Echo agent on {} (Ctrl-C stops it)", bound.base_url());
//!     Ok(bound.run_until(agentwire::server::shutdown_signal()).await?)
//! }
//! # }
//! # fn main() {}
//! ```
//!
//! The smallest client (feature `client`):
//!
//! ```no_run
//! # #[cfg(feature = "client")]
//! # async fn hello() -> Result<(), agentwire::client::ClientError> {
//! let client = agentwire::client::Client::connect("http://127.0.0.1:8080").await?;
//! let answer = client.send_text("hello").await?;
//! if let Some(task) = answer.task() {
//!     println!("task {} is {}", task.id, task.state().short_name());
//! }
//! # Ok(()) }
//! # fn main() {}
//! ```
//!
//! More, runnable: the examples of `agentwire-server` (an agent each:
//! hello, streamed artifact, multi-turn, cancellation, push notifications,
//! an axum application, an extended card) and of `agentwire-client` (hello,
//! the ledger); the Rust snippets of the README and of `docs/` are
//! compiled as this crate's doctests.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

pub use agentwire_types as types;
pub use agentwire_types::{A2aError, A2aResult};

/// The agent runtime (the `agentwire-server` crate).
#[cfg(feature = "server")]
#[cfg_attr(docsrs, doc(cfg(feature = "server")))]
pub use agentwire_server as server;

/// The client (the `agentwire-client` crate).
#[cfg(feature = "client")]
#[cfg_attr(docsrs, doc(cfg(feature = "client")))]
pub use agentwire_client as client;

/// The project's README, whose Rust snippets ("Install", "Writing an
/// agent", "The client library") are compiled as this crate's doctests,
/// written with this crate's paths (`agentwire::server`...) as an
/// application that depends on `agentwire` writes them, so that they cannot
/// drift from the API. `tests/new_project.rs` checks that every page with
/// Rust code is listed here.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// This crate's own README (its page on crates.io and docs.rs).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctests;

/// The READMEs of the crates this one re-exports (their pages on
/// crates.io and docs.rs), with the crates' own names.
#[cfg(doctest)]
#[doc = include_str!("../../agentwire-types/README.md")]
pub struct TypesReadmeDoctests;

/// `crates/agentwire-server/README.md`.
#[cfg(doctest)]
#[doc = include_str!("../../agentwire-server/README.md")]
pub struct ServerReadmeDoctests;

/// `crates/agentwire-client/README.md`.
#[cfg(doctest)]
#[doc = include_str!("../../agentwire-client/README.md")]
pub struct ClientReadmeDoctests;

/// `docs/push-notifications.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/push-notifications.md")]
pub struct PushNotificationsDoctests;

/// `docs/registry.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/registry.md")]
pub struct RegistryDoctests;

/// `docs/llm-agent.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/llm-agent.md")]
pub struct LlmAgentDoctests;
