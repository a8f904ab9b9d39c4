//! A client for agents speaking the A2A (Agent2Agent) protocol v1.0.
//!
//! The smallest client: discover the agent by its card, send it a message.
//!
//! ```no_run
//! # async fn hello() -> Result<(), agentwire_client::ClientError> {
//! let client = agentwire_client::Client::connect("http://127.0.0.1:8080").await?;
//! let answer = client.send_text("hello").await?;
//! if let Some(task) = answer.task() {
//!     println!("task {} is {}", task.id, task.state().short_name());
//! }
//! # Ok(()) }
//! ```
//!
//! Runnable: `cargo run -p agentwire-client --example hello --
//! http://127.0.0.1:8080` (and `--example ledger`: the ledger below), e.g.
//! against `cargo run -p agentwire-server --example echo`.
//!
//! Three layers, each usable on its own:
//!
//! 1. **Transports** ([`Transport`]): the eleven A2A operations over one
//!    binding: [`JsonRpcTransport`] (JSON-RPC 2.0 over HTTP, spec 9),
//!    [`RestTransport`] (HTTP+JSON, spec 11) and [`GrpcTransport`] (gRPC,
//!    spec 10). Requests and responses are the protocol types of
//!    [`agentwire_types`]; streams are [`EventStream`]s; every failure is a
//!    [`ClientError`] whose A2A error kind does not depend on the binding.
//! 2. **[`Client`]**: built from an [`agentwire_types::AgentCard`], it picks the
//!    first usable interface (spec 8.3: binding accepted, protocol version
//!    1.x), sets the interface's `tenant` on every request, and falls back to
//!    the next interface only when one cannot be reached. It never downgrades
//!    to an A2A 0.x interface.
//! 3. **Card discovery** ([`fetch_agent_card`], [`card::CardResolver`]):
//!    the agent card from a host, an origin, a card URL or a file, with HTTP
//!    caching (`Cache-Control`, `ETag`), 0.x cards recognised and refused
//!    clearly, and the extended card replacing the public one once fetched.
//! 4. **Interceptors and credentials** (module [`auth`]): code that sees
//!    every call's options, and bearer tokens / API keys placed where the
//!    card's security schemes say.
//! 5. **Streaming helpers** (module [`follow`]): whole artifacts from chunks,
//!    a task view built from events, following a task across dropped
//!    connections (resubscribe + reconcile with `GetTask`), polling with an
//!    interval and a timeout.
//! 6. **The ledger** (module [`ledger`]): contexts, tasks, artifact version
//!    chains, the accepted version and the tasks waiting for the user, in
//!    memory or in SQLite, with `continue_task`, `refine` and `accept`.
//! 7. **Generations** (module [`generation`], A2A v1.1 draft): long-polling
//!    `GetTask` ([`generation::wait_for_change`]), the `ifGenerationMatch`
//!    check and its typed error ([`ClientError::generation_mismatch`]),
//!    gap detection in event streams (healed by [`follow::follow`]).
//! 8. **The wire tap** (module [`tap`]): an optional observer told what
//!    the transports really sent and received (headers, exact bodies, each
//!    stream frame; gRPC messages decoded to JSON), credentials redacted,
//!    bounded; set with [`ClientBuilder::tap`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), agentwire_client::ClientError> {
//! use agentwire_client::{Binding, CallOptions, Client};
//! use agentwire_types::{Message, TaskState};
//! use futures::StreamExt;
//!
//! // Discover the agent and talk to it over the interface it prefers.
//! let client = Client::builder()
//!     .bindings([Binding::JsonRpc, Binding::Grpc])
//!     .options(CallOptions::new().with_bearer_token("s3cret"))
//!     .connect("http://127.0.0.1:8080")
//!     .await?;
//!
//! // Request / response.
//! let answer = client.send_text("What's new in payment-service?").await?;
//! if let Some(task) = answer.task() {
//!     if task.state() == TaskState::InputRequired {
//!         let follow_up = Message::user_text("Node.js 22")
//!             .with_task_id(&task.id)
//!             .with_context_id(&task.context_id);
//!         client.send(follow_up).await?;
//!     }
//! }
//!
//! // Streaming.
//! let mut events = client.stream(Message::user_text("report, please")).await?;
//! while let Some(event) = events.next().await {
//!     let event = event?;
//!     if let Some(state) = event.state() {
//!         println!("now {}", state.short_name());
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! Errors keep the A2A kind whatever the binding:
//!
//! ```no_run
//! # async fn demo(client: agentwire_client::Client) {
//! use agentwire_types::ErrorKind;
//! match client.get_task("no-such-task").await {
//!     Err(e) if e.kind() == Some(ErrorKind::TaskNotFound) => println!("gone"),
//!     Err(e) if e.is_unreachable() => println!("agent down: {e}"),
//!     Err(e) => println!("failed: {e}"),
//!     Ok(task) => println!("{:?}", task.state()),
//! }
//! # }
//! ```
//!
//! # Features
//!
//! | feature | default | what it adds |
//! | --- | --- | --- |
//! | `grpc` | yes | the gRPC transport ([`GrpcTransport`]); without it, `GRPC` interfaces of a card are skipped and the client speaks JSON-RPC and HTTP+JSON only (no tonic) |
//! | `grpc-tls` | no | gRPC over TLS (`https://`, `grpcs://`), with the webpki roots; implies `grpc` |
//! | `sqlite` | no | the SQLite ledger store (`ledger::SqliteStore`, `Ledger::open`), with a bundled SQLite |
//! | `webhook` | no | the push-notification webhook receiver (module `webhook`, an axum router) |
//!
//! # Limits
//!
//! Nothing an agent sends makes the client hold more than a bound: each
//! answer is read as it arrives and reading stops at the limit with
//! [`ClientError::ResponseTooLarge`] (a `Content-Length` above it is
//! refused before reading).
//!
//! | what | default | set with |
//! | --- | --- | --- |
//! | a unary answer (JSON-RPC, HTTP+JSON), one SSE event or line, one gRPC message | [`DEFAULT_MAX_RESPONSE_BYTES`] (64 MiB: a task's artifacts may reach 16 MiB each with the server's defaults) | [`ClientBuilder::max_response_bytes`], `with_max_response_bytes` of each transport |
//! | an agent card | [`card::DEFAULT_MAX_CARD_BYTES`] (1 MiB, as the registry) | [`card::CardResolver::with_max_card_bytes`], [`ClientBuilder::max_card_bytes`] |
//! | a registry's answer | 64 MiB | `registry::Registry::with_max_response_bytes` |
//! | an authorization server's answer | [`oauth::MAX_OAUTH_RESPONSE_BYTES`] (1 MiB) | |
//!
//! [`read_body_limited`] reads any `reqwest` response the same way.
//!
//! HTTP(S) goes through reqwest with rustls and the *ring* crypto provider;
//! certificates are checked against the system's roots.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

pub mod auth;
pub mod card;
mod client;
mod error;
pub mod follow;
pub mod generation;
#[cfg(feature = "grpc")]
mod grpc;
mod http;
mod jsonrpc;
pub mod ledger;
pub mod oauth;
#[cfg(feature = "registry")]
pub mod registry;
mod rest;
#[cfg(feature = "sqlite")]
pub mod sqlite_open;
pub mod sse;
pub mod tap;
pub mod tls;
pub mod trace_context;
mod transport;
pub mod v0_3;
#[cfg(feature = "webhook")]
#[cfg_attr(docsrs, doc(cfg(feature = "webhook")))]
pub mod webhook;

#[cfg(test)]
mod testutil;
#[cfg(test)]
mod wire_tests;

pub use auth::{Credentials, Interceptor, Operation, TokenSource};
pub use card::{CardResolver, fetch_agent_card};
pub use client::{
    ALLOW_V03_HINT, Client, ClientBuilder, select_interfaces, select_interfaces_with,
};
pub use error::{BoxError, ClientError, ClientResult};
#[cfg(feature = "grpc")]
#[cfg_attr(docsrs, doc(cfg(feature = "grpc")))]
pub use grpc::GrpcTransport;
pub use http::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_RESPONSE_BYTES, default_http_client, http_client_builder,
    install_crypto_provider, read_body_limited,
};
pub use jsonrpc::JsonRpcTransport;
pub use rest::RestTransport;
pub use transport::{Binding, CallOptions, EventStream, Transport};
#[cfg(feature = "grpc")]
pub use v0_3::V03GrpcTransport;
pub use v0_3::{V03JsonRpcTransport, V03RestTransport};

/// The data model crate, re-exported for convenience.
pub use agentwire_types;
