//! An agent registry for A2A: the catalog discovery of the A2A
//! specification, as the Agentic Resource Discovery (ARD) API and the AI
//! Catalog format define it.
//!
//! - **Manifest**: `GET /.well-known/ard.json` (ARD v0.91), and the same
//!   entries at `GET /.well-known/ai-catalog.json` (ARD v0.9,
//!   `application/ai-catalog+json`): the registry itself (an
//!   `application/ai-registry+json` entry), its own agent card, and every
//!   reachable registered agent (`application/a2a-agent-card+json`, by
//!   reference or by value), with an `ETag`. Every answer carries `Link:
//!   <.../.well-known/ard.json>; rel="ard"`; `/robots.txt` has an
//!   `Agentmap:` line.
//! - **ARD API**: `POST /search` (BM25 full-text relevance 0-100, filters
//!   resolved through the query's `@context`, federation, page tokens),
//!   `GET /agents/{identifier}` (Retrieve: exact, cached), `GET /agents`
//!   (the filter expressions of ARD Appendix A, ordering, pages), `POST
//!   /explore` (facets).
//! - **Publishing**: `POST /agents`, `PUT` / `DELETE /agents/{identifier}`,
//!   authenticated (any [`agentwire_server::Authenticator`]); only the
//!   publisher of an entry can change it; cards are validated (a 0.x card is
//!   listed as such), signatures recorded ([`card::SignatureVerifier`]).
//! - **Freshness**: cards registered by URL are re-fetched per their
//!   `Cache-Control` with `If-None-Match` / `If-Modified-Since`, one fetch
//!   per agent at a time, a bounded number at once; an agent that stops
//!   answering is left out of search until it answers again.
//! - **Routing** ([`Registry::route`], `POST /route`): a request compared
//!   with every skill's examples, name, tags and description; "no skill
//!   fits" and ties are reported, never guessed ([`route`]).
//! - **Stores**: memory, SQLite, PostgreSQL (replicas keep their index in
//!   step through the store's revisions).
//! - **The registry as an A2A agent**: its card offers the `find-agent`
//!   skill ([`agent`]).
//!
//! ```no_run
//! use std::sync::Arc;
//! use agentwire_registry::{Registry, RegistryServer, store::SqliteRegistryStore};
//! use agentwire_server::BearerTokens;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Arc::new(SqliteRegistryStore::open("registry.db").await?);
//! let registry = Registry::builder(store).build().await?;
//! let publishers = BearerTokens::new().with_token("s3cret-token", "alice");
//! RegistryServer::new(registry)
//!     .authenticator(Arc::new(publishers))
//!     .bind("127.0.0.1:9000")
//!     .await?
//!     .run_until(agentwire_server::shutdown_signal())
//!     .await?;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod agent;
pub mod api;
pub mod auth;
pub mod card;
pub mod embed;
pub mod error;
pub mod filter;
pub mod index;
pub mod model;
mod registry;
pub mod route;
mod server;
pub mod store;
pub mod text;

pub use agentwire_client::registry as wire;
pub use agentwire_server::push::UrlPolicy;
pub use error::ApiError;
pub use registry::{
    BackgroundHandle, DEFAULT_MAX_CARD_BYTES, DEFAULT_MAX_UPSTREAM_BYTES, RefreshPolicy, Registry,
    RegistryBuilder, RegistryConfig,
};
pub use route::{EmbedError, Embedder, RouterConfig};
pub use server::{BoundRegistry, RegistryHandle, RegistryServer};
