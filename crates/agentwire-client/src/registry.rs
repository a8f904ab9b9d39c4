//! A client for agent registries that implement the Agentic Resource
//! Discovery (ARD) API and the AI Catalog format: search, list, explore,
//! routing by skill examples, resolving a registry reference to an agent
//! card, and publishing (feature `registry`).
//!
//! The wire types here are the JSON objects of the ARD API (`POST /search`,
//! `GET /agents`, `POST /explore`, catalog entries) and of the registry's own
//! extensions of it (`POST /route`, the publishing API); the registry
//! service (`agentwire-registry`) uses the same types, so both sides agree.
//!
//! ```no_run
//! # async fn demo() -> Result<(), agentwire_client::registry::RegistryError> {
//! use agentwire_client::card::CardResolver;
//! use agentwire_client::registry::Registry;
//!
//! let registry = Registry::new("http://127.0.0.1:9000")?;
//! let found = registry.search_text("check my lockfile against Node 24").await?;
//! for r in &found.results {
//!     println!("{} {} ({})", r.score, r.entry.display_name, r.entry.identifier);
//! }
//! let routed = registry.route("is payment-service ready for Node 24?", None).await?;
//! if routed.no_fit {
//!     println!("no skill fits: {}", routed.reason.unwrap_or_default());
//! }
//! // `registry:NAME` references resolve to the agent's own card.
//! let card = registry.resolve_card("Dependency Compatibility Agent", &CardResolver::new()).await?;
//! println!("{}", card.card.name);
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::card::{CardOrigin, CardResolver, ResolvedCard};
use crate::error::ClientError;
use crate::http::{
    DEFAULT_MAX_RESPONSE_BYTES, default_http_client, map_reqwest_error, read_body_max,
};

/// Where a host publishes its ARD manifest (ARD v0.91 5.1): the path a
/// consumer reads first.
pub const ARD_PATH: &str = "/.well-known/ard.json";
/// The link relation of an ARD manifest (`Link: <...>; rel="ard"`, ARD
/// v0.91 5.1).
pub const ARD_REL: &str = "ard";
/// The ARD base JSON-LD context (ARD v0.91 4.1).
pub const ARD_CONTEXT: &str = "https://agenticresourcediscovery.org/context/v1";
/// The default namespace of the ARD base context: the IRIs of the core
/// terms (`{ARD_NAMESPACE}tags`...).
pub const ARD_NAMESPACE: &str = "https://agenticresourcediscovery.org/ns#";
/// Where a host publishes its catalog in ARD v0.9 (the predecessor of
/// [`ARD_PATH`]; still served and read, after it).
pub const CATALOG_PATH: &str = "/.well-known/ai-catalog.json";
/// The link relation of the predecessor (ARD v0.9).
pub const CATALOG_REL: &str = "ai-catalog";
/// The media type of an AI catalog document.
pub const CATALOG_MEDIA_TYPE: &str = "application/ai-catalog+json";
/// The entry type of an A2A agent card.
pub const A2A_CARD_TYPE: &str = "application/a2a-agent-card+json";
/// The entry type of a registry (an ARD search endpoint).
pub const REGISTRY_TYPE: &str = "application/ai-registry+json";
/// The prefix of a registry reference where an agent card is expected
/// (`registry:NAME`).
pub const REFERENCE_PREFIX: &str = "registry:";

/// One catalog entry (ARD 4.2): an agent card by reference (`url`) or by
/// value (`data`), never both.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogEntry {
    /// The JSON-LD context (ARD v0.91 4.1): absent in manifests and
    /// search results (the consumer applies the ARD base context), the
    /// base context ([`ARD_CONTEXT`]) in a Retrieve answer.
    #[serde(rename = "@context", default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// The domain-anchored URN (`urn:air:<publisher>:<namespace>:<name>`).
    pub identifier: String,
    /// Human-readable name (required in an entry; a search or list result
    /// of ARD v0.91 may carry only `identifier`, then this is empty).
    #[serde(default)]
    pub display_name: String,
    /// The artifact's media type (`application/a2a-agent-card+json`);
    /// empty when a result leaves it out.
    #[serde(rename = "type", default)]
    pub media_type: String,
    /// Where the artifact is (by reference).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The artifact itself (by value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// Short description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Keywords for filtering.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Skills or tools (for an A2A agent: its skill ids).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    /// Sample requests (2 to 5).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub representative_queries: Vec<String>,
    /// The artifact's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// When the entry last changed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    /// Flat key-value pairs (strings, numbers, booleans).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
    /// Identity and trust metadata, as published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust_manifest: Option<Value>,
}

impl CatalogEntry {
    /// A metadata value as a string.
    pub fn meta_str(&self, key: &str) -> Option<&str> {
        self.metadata.get(key).and_then(Value::as_str)
    }
}

/// The `query` object of search and explore (ARD v0.91 5.3.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Query {
    /// Binds the prefixes of the filter keys (a JSON-LD context: an
    /// object of prefix to namespace IRI, the ARD base context's URL, or a
    /// list of those), layered on the ARD base context.
    #[serde(rename = "@context", default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// What is needed, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Field path to accepted values (OR within a key, AND across keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Filter>,
}

/// A filter object: field path to one value or several.
pub type Filter = BTreeMap<String, FilterValue>;

/// One filter value: a string or a list of strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FilterValue {
    /// A single value.
    One(String),
    /// Several values, any of which matches.
    Any(Vec<String>),
}

impl FilterValue {
    /// The values as a slice-like list.
    pub fn values(&self) -> Vec<&str> {
        match self {
            FilterValue::One(s) => vec![s.as_str()],
            FilterValue::Any(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

/// Federation mode of a search (ARD 8).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Federation {
    /// Upstream registries are queried and their results merged.
    #[default]
    Auto,
    /// Own results plus the registries the client may query.
    Referrals,
    /// Own index only.
    None,
}

/// `POST /search` (ARD 7.2).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchRequest {
    /// The query (`text` required).
    pub query: Query,
    /// Federation mode (default `auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub federation: Option<Federation>,
    /// Results per page (default 10, at most 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<u32>,
    /// The token of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
}

/// One search result: the entry, its relevance (0-100) and the registry it
/// comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    /// The entry.
    #[serde(flatten)]
    pub entry: CatalogEntry,
    /// Relevance to the query text, 0 to 100 (not a trust rating).
    pub score: u8,
    /// The registry where the entry was indexed.
    pub source: String,
}

/// A registry the client may query (referrals mode).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Referral {
    /// The registry's URN.
    pub identifier: String,
    /// Its name.
    pub display_name: String,
    /// `application/ai-registry+json`.
    #[serde(rename = "type")]
    pub media_type: String,
    /// Its search endpoint.
    pub url: String,
}

/// The answer to `POST /search`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchResponse {
    /// Best first.
    pub results: Vec<SearchResult>,
    /// Other registries (referrals mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub referrals: Option<Vec<Referral>>,
    /// The token of the next page, if there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
}

/// The answer to `GET /agents`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListResponse {
    /// One page of entries.
    pub items: Vec<CatalogEntry>,
    /// How many entries match in all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// The token of the next page, if there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
}

/// Parameters of `GET /agents`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListRequest {
    /// A filter expression (`type = 'application/a2a-agent-card+json' AND
    /// updatedAfter > '2026-01-01'`).
    pub filter: Option<String>,
    /// Sort keys (`displayName`, `updatedAt DESC`).
    pub order_by: Option<String>,
    /// Entries per page (default 20, at most 100).
    pub page_size: Option<u32>,
    /// The token of the next page.
    pub page_token: Option<String>,
}

/// One facet asked of `POST /explore`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FacetRequest {
    /// The field to count (same paths as filter keys).
    pub field: String,
    /// Most buckets returned (default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Buckets with fewer entries are left out (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_count: Option<u64>,
}

/// What `POST /explore` computes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResultType {
    /// The facets (the one shape ARD v0.91 defines).
    #[serde(default)]
    pub facets: Vec<FacetRequest>,
    /// Other result shapes (ARD leaves room for `counts`, `sample`...): a
    /// registry that does not compute them answers `501 Not Implemented`.
    #[serde(flatten, default, skip_serializing_if = "Map::is_empty")]
    pub other: Map<String, Value>,
}

/// `POST /explore` (ARD 7.3).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExploreRequest {
    /// Narrows the set counted (both members optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<Query>,
    /// The facets to compute.
    pub result_type: ResultType,
}

/// One bucket of a facet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    /// The value.
    pub value: String,
    /// How many matching entries have it.
    pub count: u64,
}

/// One computed facet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FacetResult {
    /// Most frequent first.
    pub buckets: Vec<Bucket>,
    /// Matching entries in the buckets beyond `limit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_count: Option<u64>,
}

/// The answer to `POST /explore`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExploreResponse {
    /// Always `facets`.
    pub result_type: String,
    /// Field to its buckets.
    pub facets: BTreeMap<String, FacetResult>,
}

/// `POST /route`: which agent and skill should handle a request (an
/// extension of this registry, not part of ARD).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteRequest {
    /// The request, in words.
    pub text: String,
    /// The same filter keys as search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Filter>,
    /// Most matches returned (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// One candidate skill for a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteMatch {
    /// The agent's name.
    pub agent_name: String,
    /// The agent's catalog identifier.
    pub identifier: String,
    /// The skill's id in the agent card.
    pub skill_id: String,
    /// The skill's name.
    #[serde(default)]
    pub skill_name: String,
    /// How well the skill fits, 0 to 100.
    pub score: u8,
    /// Why: the example or words that matched.
    pub why: String,
    /// The agent card's URL, when the entry is a reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// The answer to `POST /route`: best first; `noFit` when no skill fits
/// well enough (then the caller should ask rather than guess), `ambiguous`
/// when the best two are too close to choose between.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteResponse {
    /// Candidates, best first (empty when nothing is close).
    pub matches: Vec<RouteMatch>,
    /// No skill fits the request.
    pub no_fit: bool,
    /// The best two candidates fit about equally well.
    #[serde(default)]
    pub ambiguous: bool,
    /// Why no skill was chosen (with `noFit` or `ambiguous`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl RouteResponse {
    /// The chosen match: the best one, unless no skill fits or the best two
    /// tie.
    pub fn chosen(&self) -> Option<&RouteMatch> {
        if self.no_fit || self.ambiguous {
            None
        } else {
            self.matches.first()
        }
    }
}

/// `POST /agents` (publish or update) and `PUT /agents/{identifier}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PublishRequest {
    /// The agent card's URL (the registry fetches it and keeps it fresh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The agent card itself (by value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card: Option<Value>,
    /// The entry's URN; derived from the card's host and name when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identifier: Option<String>,
    /// Sample requests (2 to 5); taken from the skills' examples when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub representative_queries: Option<Vec<String>>,
    /// Extra tags (besides the skills' tags).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// Identity and trust metadata (ARD 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust_manifest: Option<Value>,
}

/// The answer to a publish.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishResponse {
    /// The entry as listed.
    pub entry: CatalogEntry,
    /// Whether it is new (or an update).
    pub created: bool,
    /// What the validation of the card found but did not refuse (a 0.x
    /// card, missing optional fields...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// `POST /catalogs`: registers the A2A agents an AI catalog lists (ARD
/// 6.2, web ingestion).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IngestRequest {
    /// The catalog's URL, or a host (its `/.well-known/ai-catalog.json`).
    pub url: String,
}

/// An entry of an ingested catalog that was not registered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Skipped {
    /// The entry's identifier, if it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identifier: Option<String>,
    /// Why it was not registered.
    pub reason: String,
}

/// The answer to an ingestion.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IngestResponse {
    /// The entries registered (or updated).
    pub published: Vec<CatalogEntry>,
    /// The entries left out, and why.
    pub skipped: Vec<Skipped>,
}

/// An error answer of the registry (ARD Appendix B).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    /// `INVALID_ARGUMENT`, `UNAUTHENTICATED`, `NOT_FOUND`...
    pub error_code: String,
    /// What went wrong.
    pub message: String,
}

/// A failed registry call.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The registry answered with an error.
    #[error("{message} ({code}, HTTP {status})")]
    Api {
        /// The HTTP status.
        status: u16,
        /// The ARD error code.
        code: String,
        /// The registry's message.
        message: String,
    },
    /// The registry could not be reached, or its answer not read.
    #[error(transparent)]
    Client(#[from] ClientError),
}

impl RegistryError {
    /// Whether the registry could not be reached at all.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, RegistryError::Client(e) if e.is_unreachable())
    }

    /// Whether the answer was `404` (no such entry, or no such endpoint).
    pub fn is_not_found(&self) -> bool {
        self.http_status() == Some(404) || self.is_not_an_endpoint()
    }

    /// Whether the URL has no such endpoint (`404` or `405`, with or
    /// without an ARD error body).
    pub fn is_not_an_endpoint(&self) -> bool {
        matches!(self.http_status(), Some(404 | 405))
    }

    fn http_status(&self) -> Option<u16> {
        match self {
            RegistryError::Api { status, .. } => Some(*status),
            RegistryError::Client(ClientError::Http { status, .. }) => Some(*status),
            RegistryError::Client(_) => None,
        }
    }

    /// The ARD error code, for an error answer.
    pub fn code(&self) -> Option<&str> {
        match self {
            RegistryError::Api { code, .. } => Some(code),
            RegistryError::Client(_) => None,
        }
    }
}

/// Shorthand for results of registry calls.
pub type RegistryResult<T> = Result<T, RegistryError>;

/// A client of one registry.
#[derive(Debug, Clone)]
pub struct Registry {
    base: reqwest::Url,
    http: reqwest::Client,
    bearer: Option<String>,
    timeout: Duration,
    max_response_bytes: usize,
}

impl Registry {
    /// A client of the registry at `base` (`http://host:port`, a path
    /// prefix allowed; `http://` is assumed without a scheme).
    pub fn new(base: &str) -> RegistryResult<Self> {
        let base = base.trim();
        let with_scheme = if base.contains("://") {
            base.to_owned()
        } else {
            format!("http://{base}")
        };
        let mut url = reqwest::Url::parse(&with_scheme).map_err(|e| {
            ClientError::InvalidRequest(format!("invalid registry URL {base:?}: {e}"))
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ClientError::InvalidRequest(format!(
                "registry URL {base:?} must be http:// or https://"
            ))
            .into());
        }
        if !url.path().ends_with('/') {
            let p = format!("{}/", url.path());
            url.set_path(&p);
        }
        url.set_query(None);
        url.set_fragment(None);
        Ok(Self {
            base: url,
            http: default_http_client(),
            bearer: None,
            timeout: Duration::from_secs(30),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        })
    }

    /// The most bytes accepted in one answer of the registry (default
    /// [`DEFAULT_MAX_RESPONSE_BYTES`], 64 MiB): reading stops there with
    /// [`ClientError::ResponseTooLarge`].
    pub fn with_max_response_bytes(mut self, max: usize) -> Self {
        self.max_response_bytes = max;
        self
    }

    /// Uses this HTTP client.
    pub fn with_http_client(mut self, http: reqwest::Client) -> Self {
        self.http = http;
        self
    }

    /// Sends `Authorization: Bearer <token>` (needed to publish).
    pub fn with_bearer(mut self, token: impl Into<String>) -> Self {
        self.bearer = Some(token.into());
        self
    }

    /// Bounds each call (default 30 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The registry's base URL.
    pub fn base_url(&self) -> &str {
        self.base.as_str()
    }

    fn url(&self, path: &str) -> RegistryResult<reqwest::Url> {
        self.base.join(path.trim_start_matches('/')).map_err(|e| {
            ClientError::InvalidRequest(format!("bad registry path {path}: {e}")).into()
        })
    }

    async fn call<T: serde::de::DeserializeOwned>(
        &self,
        method: reqwest::Method,
        url: reqwest::Url,
        body: Option<&impl Serialize>,
    ) -> RegistryResult<Option<T>> {
        let shown = url.to_string();
        let mut rb = self
            .http
            .request(method, url)
            .timeout(self.timeout)
            .header(http::header::ACCEPT, "application/json");
        if let Some(t) = &self.bearer {
            rb = rb.bearer_auth(t);
        }
        if let Some(b) = body {
            rb = rb.json(b);
        }
        let resp = rb.send().await.map_err(|e| map_reqwest_error(e, &shown))?;
        let status = resp.status();
        let bytes = read_body_max(
            resp,
            &shown,
            self.max_response_bytes,
            "the registry's answer",
        )
        .await?;
        if !status.is_success() {
            return Err(match serde_json::from_slice::<ErrorBody>(&bytes) {
                Ok(e) => RegistryError::Api {
                    status: status.as_u16(),
                    code: e.error_code,
                    message: e.message,
                },
                Err(_) => ClientError::Http {
                    status: status.as_u16(),
                    body: String::from_utf8_lossy(&bytes).chars().take(500).collect(),
                }
                .into(),
            });
        }
        if bytes.is_empty() || status == reqwest::StatusCode::NO_CONTENT {
            return Ok(None);
        }
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| ClientError::InvalidResponse(format!("{shown}: {e}")).into())
    }

    async fn call_some<T: serde::de::DeserializeOwned>(
        &self,
        method: reqwest::Method,
        url: reqwest::Url,
        body: Option<&impl Serialize>,
    ) -> RegistryResult<T> {
        let shown = url.to_string();
        self.call(method, url, body).await?.ok_or_else(|| {
            ClientError::InvalidResponse(format!("{shown} answered with an empty body")).into()
        })
    }

    /// `POST /search`. When the URL answers `404` or `405` (a host, not a
    /// registry's API), the registry its manifest lists
    /// (`application/ai-registry+json`, see [`Self::manifest`]) is asked
    /// instead.
    pub async fn search(&self, request: &SearchRequest) -> RegistryResult<SearchResponse> {
        let first = self
            .call_some(reqwest::Method::POST, self.url("search")?, Some(request))
            .await;
        match first {
            Err(e) if e.is_not_an_endpoint() => {
                let Ok(manifest) = self.manifest().await else {
                    return Err(e);
                };
                match manifest.registry_url() {
                    Some(api)
                        if api.trim_end_matches('/')
                            != self.base.as_str().trim_end_matches('/') =>
                    {
                        let other = self.at(api)?;
                        other
                            .call_some(reqwest::Method::POST, other.url("search")?, Some(request))
                            .await
                    }
                    _ => Err(e),
                }
            }
            other => other,
        }
    }

    /// `POST /search` with just a text.
    pub async fn search_text(&self, text: &str) -> RegistryResult<SearchResponse> {
        self.search(&SearchRequest {
            query: Query {
                text: Some(text.to_owned()),
                ..Default::default()
            },
            ..Default::default()
        })
        .await
    }

    /// `GET /agents`.
    pub async fn list(&self, request: &ListRequest) -> RegistryResult<ListResponse> {
        let mut url = self.url("agents")?;
        {
            let mut q = url.query_pairs_mut();
            if let Some(f) = &request.filter {
                q.append_pair("filter", f);
            }
            if let Some(o) = &request.order_by {
                q.append_pair("orderBy", o);
            }
            if let Some(n) = request.page_size {
                q.append_pair("pageSize", &n.to_string());
            }
            if let Some(t) = &request.page_token {
                q.append_pair("pageToken", t);
            }
        }
        if url.query() == Some("") {
            url.set_query(None);
        }
        self.call_some(reqwest::Method::GET, url, None::<&()>).await
    }

    /// `POST /explore`.
    pub async fn explore(&self, request: &ExploreRequest) -> RegistryResult<ExploreResponse> {
        self.call_some(reqwest::Method::POST, self.url("explore")?, Some(request))
            .await
    }

    /// `POST /route`: the agent and skill that fit a request best.
    pub async fn route(&self, text: &str, filter: Option<Filter>) -> RegistryResult<RouteResponse> {
        let request = RouteRequest {
            text: text.to_owned(),
            filter,
            limit: None,
        };
        self.route_with(&request).await
    }

    /// `POST /route` with every option.
    pub async fn route_with(&self, request: &RouteRequest) -> RegistryResult<RouteResponse> {
        self.call_some(reqwest::Method::POST, self.url("route")?, Some(request))
            .await
    }

    /// The registry's catalog (`/.well-known/ai-catalog.json`).
    pub async fn catalog(&self) -> RegistryResult<Value> {
        self.call_some(reqwest::Method::GET, self.url(CATALOG_PATH)?, None::<&()>)
            .await
    }

    /// The entry of an identifier (`GET /agents/{identifier}`, ARD v0.91
    /// Retrieve), or of a display name or agent name (the URN's last
    /// segment): `GET /agents?name=NAME`, this registry's extension of
    /// List, the answer checked here too so that a registry ignoring
    /// `name` is read right.
    pub async fn get(&self, reference: &str) -> RegistryResult<CatalogEntry> {
        if is_identifier(reference) {
            self.retrieve(reference).await
        } else {
            self.find_by_name(reference).await
        }
    }

    /// `GET /agents/{identifier}` (ARD v0.91 5.3.4): the complete entry of
    /// an identifier, percent-encoded as one path segment.
    pub async fn retrieve(&self, identifier: &str) -> RegistryResult<CatalogEntry> {
        let encoded = percent_encoding::utf8_percent_encode(identifier, SEGMENT).to_string();
        let url = self.url(&format!("agents/{encoded}"))?;
        self.call_some(reqwest::Method::GET, url, None::<&()>).await
    }

    async fn find_by_name(&self, name: &str) -> RegistryResult<CatalogEntry> {
        let mut url = self.url("agents")?;
        url.query_pairs_mut()
            .append_pair("name", name)
            .append_pair("pageSize", "100");
        let page: ListResponse = self
            .call_some(reqwest::Method::GET, url, None::<&()>)
            .await?;
        one_named(page.items.into_iter(), name)
    }

    /// The entry named by `reference` in the registry's manifest (see
    /// [`Self::manifest`]), or through the registry the manifest lists.
    pub async fn find_in_manifest(&self, reference: &str) -> RegistryResult<CatalogEntry> {
        let manifest = self.manifest().await?;
        let named: Vec<CatalogEntry> = manifest
            .entries
            .iter()
            .filter(|e| names_entry(e, reference))
            .cloned()
            .collect();
        if !named.is_empty() {
            return one_named(named.into_iter(), reference);
        }
        match manifest.registry_url() {
            Some(api) if api.trim_end_matches('/') != self.base.as_str().trim_end_matches('/') => {
                Box::pin(self.at(api)?.get(reference)).await
            }
            _ => Err(not_found(reference)),
        }
    }

    /// The same client for another base URL (a registry a manifest lists).
    fn at(&self, base: &str) -> RegistryResult<Self> {
        let other = Self::new(base)?;
        Ok(Self {
            base: other.base,
            ..self.clone()
        })
    }

    /// Reads the entries a host publishes (ARD v0.91 5.1), in this order:
    /// `/.well-known/ard.json`; the target of a `Link: <...>; rel="ard"`
    /// header on the answer to a `GET` of the base URL; then the
    /// predecessor's names (ARD v0.9: `/.well-known/ai-catalog.json`, then
    /// `rel="ai-catalog"`), which ARD v0.91 lets a consumer consult. The
    /// well-known paths are tried under the base URL, and at the origin's
    /// root when the base has a path. A document counts when it is a JSON
    /// object with an `entries` list; entries that do not read as entries
    /// are left out.
    pub async fn manifest(&self) -> RegistryResult<Manifest> {
        let mut tried: Vec<String> = Vec::new();
        for url in self.well_known(ARD_PATH)? {
            if let Some(m) = self.try_manifest(url, false, &mut tried).await? {
                return Ok(m);
            }
        }
        let links = self.links().await?;
        for (rel, legacy) in [(ARD_REL, false), (CATALOG_REL, true)] {
            if rel == CATALOG_REL {
                for url in self.well_known(CATALOG_PATH)? {
                    if let Some(m) = self.try_manifest(url, true, &mut tried).await? {
                        return Ok(m);
                    }
                }
            }
            // A host may list many targets: the first two of a relation.
            for url in links
                .iter()
                .filter(|(r, _)| r == rel)
                .map(|(_, u)| u)
                .take(MAX_LINKS_PER_REL)
            {
                if let Some(m) = self.try_manifest(url.clone(), legacy, &mut tried).await? {
                    return Ok(m);
                }
            }
        }
        Err(RegistryError::Api {
            status: 404,
            code: "NOT_FOUND".into(),
            message: format!("no ARD manifest found (tried {})", tried.join(", ")),
        })
    }

    fn well_known(&self, path: &str) -> RegistryResult<Vec<reqwest::Url>> {
        let mut urls = vec![self.url(path)?];
        if self.base.path() != "/" {
            let mut root = self.base.clone();
            root.set_path(path);
            urls.push(root);
        }
        Ok(urls)
    }

    async fn get_raw(
        &self,
        url: reqwest::Url,
    ) -> RegistryResult<(reqwest::StatusCode, http::HeaderMap, reqwest::Url, Bytes)> {
        let shown = url.to_string();
        let resp = self
            .http
            .get(url)
            .timeout(self.timeout)
            .header(http::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| map_reqwest_error(e, &shown))?;
        let (status, headers, final_url) =
            (resp.status(), resp.headers().clone(), resp.url().clone());
        let body = read_body_max(resp, &shown, self.max_response_bytes, "the manifest").await?;
        Ok((status, headers, final_url, body))
    }

    async fn try_manifest(
        &self,
        url: reqwest::Url,
        legacy: bool,
        tried: &mut Vec<String>,
    ) -> RegistryResult<Option<Manifest>> {
        let shown = url.to_string();
        if tried.contains(&shown) {
            return Ok(None);
        }
        tried.push(shown.clone());
        let (status, _, _, body) = self.get_raw(url).await?;
        if !status.is_success() {
            return Ok(None);
        }
        Ok(Manifest::parse(&body, &shown, legacy))
    }

    /// The `Link` header targets of the base URL's answer, as (rel, URL).
    async fn links(&self) -> RegistryResult<Vec<(String, reqwest::Url)>> {
        let (_, headers, final_url, _) = self.get_raw(self.base.clone()).await?;
        Ok(headers
            .get_all(http::header::LINK)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(parse_link_header)
            .filter_map(|(target, rels)| {
                let url = final_url.join(&target).ok()?;
                Some(rels.into_iter().map(move |r| (r, url.clone())))
            })
            .flatten()
            .collect())
    }

    /// Resolves a registry reference (`NAME` or `registry:NAME`) to the
    /// agent's card: fetched from the agent through `resolver` (with its
    /// HTTP cache) when the entry is a reference, taken from the entry when
    /// it holds the card by value. The entry is looked up with
    /// [`Self::get`]; when the registry has no such endpoint or no such
    /// entry, in its manifest ([`Self::find_in_manifest`]: a registry of
    /// ARD v0.9, or a host that only publishes a manifest).
    pub async fn resolve_card(
        &self,
        reference: &str,
        resolver: &CardResolver,
    ) -> RegistryResult<ResolvedCard> {
        let name = reference
            .strip_prefix(REFERENCE_PREFIX)
            .unwrap_or(reference);
        let entry = match self.get(name).await {
            Ok(e) => e,
            Err(e) if e.is_not_found() => self.find_in_manifest(name).await.map_err(|m| {
                if m.is_not_found() || m.is_unreachable() {
                    e
                } else {
                    m
                }
            })?,
            Err(e) => return Err(e),
        };
        if entry.media_type != A2A_CARD_TYPE {
            return Err(ClientError::InvalidResponse(format!(
                "{} is a {} entry, not an A2A agent card",
                entry.identifier, entry.media_type
            ))
            .into());
        }
        match (&entry.url, &entry.data) {
            (Some(url), _) => Ok(resolver.fetch_url(url).await?),
            (None, Some(data)) => {
                let bytes = serde_json::to_vec(data)
                    .map_err(|e| ClientError::InvalidResponse(e.to_string()))?;
                Ok(ResolvedCard {
                    card: crate::card::parse_agent_card(&bytes)?,
                    location: format!("{}agents/{}", self.base, entry.identifier),
                    origin: CardOrigin::Fetched,
                })
            }
            (None, None) => Err(ClientError::InvalidResponse(format!(
                "the entry {} has neither url nor data",
                entry.identifier
            ))
            .into()),
        }
    }

    /// Publishes (or updates) an agent: `POST /agents`.
    pub async fn publish(&self, request: &PublishRequest) -> RegistryResult<PublishResponse> {
        self.call_some(reqwest::Method::POST, self.url("agents")?, Some(request))
            .await
    }

    /// Registers the A2A agents of an AI catalog: `POST /catalogs`.
    pub async fn ingest(&self, catalog_url: &str) -> RegistryResult<IngestResponse> {
        let request = IngestRequest {
            url: catalog_url.to_owned(),
        };
        self.call_some(reqwest::Method::POST, self.url("catalogs")?, Some(&request))
            .await
    }

    /// Withdraws an entry: `DELETE /agents/{identifier}`.
    pub async fn withdraw(&self, identifier: &str) -> RegistryResult<()> {
        let mut url = self.url("agents/")?;
        url.path_segments_mut()
            .map_err(|()| ClientError::InvalidRequest("registry URL cannot take a path".into()))?
            .pop_if_empty()
            .push(identifier);
        self.call::<Value>(reqwest::Method::DELETE, url, None::<&()>)
            .await
            .map(|_| ())
    }
}

/// The `Link` targets of one relation that [`Registry::manifest`] tries.
pub const MAX_LINKS_PER_REL: usize = 2;

/// The characters percent-encoded in an identifier sent as one path
/// segment (all but RFC 3986's unreserved ones).
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Whether a reference is an identifier (`urn:...`) rather than a name.
pub fn is_identifier(reference: &str) -> bool {
    reference
        .get(..4)
        .is_some_and(|p| p.eq_ignore_ascii_case("urn:"))
}

/// A name as a slug: lower case, runs of other characters than letters and
/// digits as one `-`.
fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.trim().chars() {
        if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_owned()
}

/// Whether `reference` names `entry`: its identifier exactly, or its
/// display name (case aside, or as a slug), or its identifier's last
/// segment (case aside).
pub fn names_entry(entry: &CatalogEntry, reference: &str) -> bool {
    let r = reference.trim();
    entry.identifier == r
        || (!entry.display_name.is_empty()
            && (entry.display_name.eq_ignore_ascii_case(r) || slug(&entry.display_name) == slug(r)))
        || entry
            .identifier
            .rsplit(':')
            .next()
            .is_some_and(|last| last.eq_ignore_ascii_case(r))
}

fn not_found(reference: &str) -> RegistryError {
    RegistryError::Api {
        status: 404,
        code: "NOT_FOUND".into(),
        message: format!(
            "no agent {reference:?} in this registry (search for it with a2a registry search)"
        ),
    }
}

/// The one entry of `items` that `reference` names.
fn one_named(
    items: impl Iterator<Item = CatalogEntry>,
    reference: &str,
) -> RegistryResult<CatalogEntry> {
    let mut found: Vec<CatalogEntry> = items.filter(|e| names_entry(e, reference)).collect();
    if let Some(i) = found.iter().position(|e| e.identifier == reference.trim()) {
        return Ok(found.swap_remove(i));
    }
    match found.len() {
        0 => Err(not_found(reference)),
        1 => Ok(found.remove(0)),
        _ => {
            let mut ids: Vec<&str> = found.iter().map(|e| e.identifier.as_str()).collect();
            ids.sort_unstable();
            Err(RegistryError::Api {
                status: 409,
                code: "AMBIGUOUS".into(),
                message: format!(
                    "{reference:?} names several agents: {}; use the identifier",
                    ids.join(", ")
                ),
            })
        }
    }
}

/// The targets of a `Link` header value and their relations (RFC 8288):
/// `<url>; rel="a b", <url2>; rel=c`.
pub fn parse_link_header(value: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(open) = rest.find('<') {
        let Some(close) = rest[open..].find('>') else {
            break;
        };
        let target = rest[open + 1..open + close].trim().to_owned();
        rest = &rest[open + close + 1..];
        // The parameters run to the next comma outside quotes.
        let mut end = rest.len();
        let mut quoted = false;
        for (i, c) in rest.char_indices() {
            match c {
                '"' => quoted = !quoted,
                ',' if !quoted => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        let params = &rest[..end];
        rest = &rest[end..];
        let mut rels = Vec::new();
        for p in params.split(';') {
            if let Some((k, v)) = p.split_once('=') {
                if k.trim().eq_ignore_ascii_case("rel") {
                    rels.extend(
                        v.trim()
                            .trim_matches('"')
                            .split_ascii_whitespace()
                            .map(str::to_ascii_lowercase),
                    );
                }
            }
        }
        out.push((target, rels));
    }
    out
}

/// The entries a host publishes (`/.well-known/ard.json`, or its
/// predecessor `/.well-known/ai-catalog.json`): see [`Registry::manifest`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Manifest {
    /// Where it was read.
    pub url: String,
    /// Whether it was found under a predecessor name (ARD v0.9:
    /// `ai-catalog.json` or `rel="ai-catalog"`).
    pub legacy: bool,
    /// Its entries (those that read as entries).
    pub entries: Vec<CatalogEntry>,
}

impl Manifest {
    /// Reads a manifest: a JSON object with an `entries` list (ARD v0.91
    /// 5.1; other members are ignored).
    pub fn parse(body: &[u8], url: &str, legacy: bool) -> Option<Self> {
        let doc: Value = serde_json::from_slice(body).ok()?;
        let entries = doc.get("entries")?.as_array()?;
        Some(Self {
            url: url.to_owned(),
            legacy,
            entries: entries
                .iter()
                .filter_map(|e| serde_json::from_value(e.clone()).ok())
                .collect(),
        })
    }

    /// The URL of the first registry it lists (`application/ai-registry+json`):
    /// the base of its search API.
    pub fn registry_url(&self) -> Option<&str> {
        self.entries
            .iter()
            .filter(|e| e.media_type == REGISTRY_TYPE || e.media_type == "application/ai-registry")
            .find_map(|e| e.url.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn entries_keep_value_or_reference() {
        let e = CatalogEntry {
            identifier: "urn:air:example.com:agent:echo".into(),
            display_name: "Echo".into(),
            media_type: A2A_CARD_TYPE.into(),
            url: Some("https://example.com/.well-known/agent-card.json".into()),
            ..Default::default()
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["type"], A2A_CARD_TYPE);
        assert!(v.get("data").is_none() && v.get("tags").is_none());
        let r = SearchResult {
            entry: e,
            score: 90,
            source: "http://r/".into(),
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["score"], 90);
        assert_eq!(v["displayName"], "Echo");
    }

    #[test]
    fn filters_take_a_value_or_a_list() {
        let q: Query = serde_json::from_value(json!({
            "text": "x", "filter": {"type": "a", "tags": ["b", "c"]}
        }))
        .unwrap();
        let f = q.filter.unwrap();
        assert_eq!(f["type"].values(), ["a"]);
        assert_eq!(f["tags"].values(), ["b", "c"]);
        assert!(serde_json::from_value::<Query>(json!({"text": "x", "other": 1})).is_err());
    }

    #[test]
    fn base_urls() {
        assert_eq!(
            Registry::new("127.0.0.1:9000").unwrap().base_url(),
            "http://127.0.0.1:9000/"
        );
        assert_eq!(
            Registry::new("https://r.example/api/v1")
                .unwrap()
                .base_url(),
            "https://r.example/api/v1/"
        );
        let r = Registry::new("https://r.example/api/v1").unwrap();
        assert_eq!(
            r.url("search").unwrap().as_str(),
            "https://r.example/api/v1/search"
        );
        assert!(Registry::new("ftp://x").is_err());
    }

    #[test]
    fn link_headers_name_their_relations() {
        let links = parse_link_header(
            r#"</.well-known/ard.json>; rel="ard", <https://x.example/a,b.json>; title="a, b"; rel="ai-catalog alternate""#,
        );
        assert_eq!(links.len(), 2);
        assert_eq!(
            links[0],
            ("/.well-known/ard.json".to_owned(), vec!["ard".to_owned()])
        );
        assert_eq!(links[1].0, "https://x.example/a,b.json");
        assert_eq!(links[1].1, ["ai-catalog", "alternate"]);
        assert!(parse_link_header("nothing here").is_empty());
    }

    #[test]
    fn manifests_and_names() {
        let body = json!({
            "entries": [
                {"identifier": "urn:air:a.example:registry:r", "displayName": "R",
                 "type": "application/ai-registry+json", "url": "https://a.example/api/"},
                {"identifier": "urn:air:a.example:agent:echo-agent", "displayName": "Echo Agent",
                 "type": A2A_CARD_TYPE, "url": "https://a.example/card.json", "acme:tier": "gold"},
                {"no": "identifier"}
            ]
        });
        let m = Manifest::parse(body.to_string().as_bytes(), "u", false).unwrap();
        assert_eq!(m.entries.len(), 2);
        assert_eq!(m.registry_url(), Some("https://a.example/api/"));
        let echo = &m.entries[1];
        for name in [
            "Echo Agent",
            "echo agent",
            "echo-agent",
            "urn:air:a.example:agent:echo-agent",
        ] {
            assert!(names_entry(echo, name), "{name}");
        }
        assert!(!names_entry(echo, "echo"));
        assert!(Manifest::parse(b"[]", "u", false).is_none());
        assert!(Manifest::parse(b"{}", "u", false).is_none());
        assert!(is_identifier("urn:air:a.example:agent:x") && !is_identifier("Echo Agent"));
        // A result of ARD v0.91 may carry only its identifier.
        let r: SearchResult = serde_json::from_value(
            json!({"identifier": "urn:air:a.example:agent:x", "score": 5, "source": "s"}),
        )
        .unwrap();
        assert_eq!(r.entry.display_name, "");
        let q: Query = serde_json::from_value(
            json!({"@context": {"okf": "https://okf.example/ns#"}, "text": "t"}),
        )
        .unwrap();
        assert!(q.context.is_some());
        let e: ExploreRequest =
            serde_json::from_value(json!({"resultType": {"counts": {}}})).unwrap();
        assert!(e.result_type.facets.is_empty() && e.result_type.other.contains_key("counts"));
    }
}
