//! The registry service: publishing, search, listing, explore, routing,
//! the catalog, and the background work (refreshing cards, keeping the
//! index in step with a shared store).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Weak};
use std::time::Duration;

use agentwire_client::registry::{
    A2A_CARD_TYPE, ARD_PATH, Bucket, CATALOG_MEDIA_TYPE, CATALOG_PATH, CatalogEntry,
    ExploreRequest, ExploreResponse, FacetResult, Federation, IngestResponse, ListRequest,
    ListResponse, PublishRequest, PublishResponse, REGISTRY_TYPE, Referral, RouteRequest,
    RouteResponse, SearchRequest, SearchResponse, SearchResult, Skipped,
};
use agentwire_server::push::{UrlPolicy, refusal_in};
use base64::Engine;
use parking_lot::{Mutex, RwLock};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::card::{
    NoVerifier, SignatureVerifier, check_identifier, derive_identifier, domain_of, read_card, slug,
};
use crate::error::ApiError;
use crate::filter::{CompiledFilter, Dates, ListFilter, QueryContext, count_facet, known_key};
use crate::index::{Embedding, Index, Indexed};
use crate::model::{FetchState, Record, Source, Status, now_ms, now_rfc3339};
use crate::route::{Embedder, REQUEST_VECTORS, RequestVectors, RouterConfig};
use crate::store::{RegistryStore, StoreResult};
use crate::text::Analyzer;

/// How registered cards are kept fresh.
#[derive(Debug, Clone)]
pub struct RefreshPolicy {
    /// A card is never re-fetched more often than this (also the interval
    /// of a card served with `Cache-Control: no-cache` or `max-age=0`).
    pub min_interval: Duration,
    /// Nor less often than this.
    pub max_interval: Duration,
    /// The interval of a card served without `Cache-Control`.
    pub default_interval: Duration,
    /// Most fetches at once.
    pub concurrency: usize,
    /// Failed fetches in a row after which an agent is unreachable.
    pub unreachable_after: u32,
    /// Bound on one fetch.
    pub timeout: Duration,
    /// How often the schedule is looked at.
    pub tick: Duration,
    /// How often a shared store is read for other replicas' changes.
    pub sync_interval: Duration,
}

impl Default for RefreshPolicy {
    fn default() -> Self {
        Self {
            min_interval: Duration::from_secs(30),
            max_interval: Duration::from_secs(24 * 3600),
            default_interval: Duration::from_secs(300),
            concurrency: 8,
            unreachable_after: 3,
            timeout: Duration::from_secs(10),
            tick: Duration::from_millis(500),
            sync_interval: Duration::from_secs(2),
        }
    }
}

/// The registry's settings.
#[derive(Debug, Clone)]
pub struct RegistryConfig {
    /// Its name (catalog host, own entries, own agent card).
    pub name: String,
    /// Refreshes.
    pub refresh: RefreshPolicy,
    /// Routing weights and thresholds.
    pub router: RouterConfig,
    /// Registries queried in `auto` federation and offered as referrals.
    pub upstreams: Vec<String>,
    /// The largest card (or ingested catalog) accepted: a fetch stops
    /// reading at this many bytes and fails.
    pub max_card_bytes: usize,
    /// The largest answer accepted from an upstream registry (federated
    /// search); reading stops there and the upstream's results are left
    /// out.
    pub max_upstream_bytes: usize,
    /// Which addresses the registry fetches from (agent cards at publish
    /// and refresh, ingested catalogs): the push notifications' SSRF
    /// policy ([`UrlPolicy`]). By default only globally routable addresses:
    /// loopback, private, link-local (the cloud metadata address
    /// 169.254.169.254 among them) and other special-purpose addresses
    /// are refused, for the URL's literal address, for the addresses a
    /// name resolves to (checked when connecting) and for each redirect
    /// (at most 3). Open exceptions with [`UrlPolicy::allow_net`],
    /// [`UrlPolicy::allow_host`] or [`UrlPolicy::allow_loopback`] (agents
    /// on a private network, tests). The hosts of [`Self::upstreams`] are
    /// allowed for the federated searches sent to them (the operator chose
    /// them), not for card fetches.
    pub url_policy: UrlPolicy,
}

/// [`RegistryConfig::max_card_bytes`] by default: 1 MiB.
pub const DEFAULT_MAX_CARD_BYTES: usize = 1 << 20;

/// [`RegistryConfig::max_upstream_bytes`] by default: 16 MiB.
pub const DEFAULT_MAX_UPSTREAM_BYTES: usize = 16 << 20;

impl Default for RegistryConfig {
    fn default() -> Self {
        Self {
            name: "Agent Registry".into(),
            refresh: RefreshPolicy::default(),
            router: RouterConfig::default(),
            upstreams: Vec::new(),
            max_card_bytes: DEFAULT_MAX_CARD_BYTES,
            max_upstream_bytes: DEFAULT_MAX_UPSTREAM_BYTES,
            url_policy: UrlPolicy::new(),
        }
    }
}

/// Redirects a card fetch follows at most (each one checked by the URL
/// policy).
const MAX_REDIRECTS: usize = 3;

/// How long a search or route request waits for a busy embedder (one
/// request embeds in tens of milliseconds) before it is routed by its
/// words instead: under a flood of requests, callers get lexical answers
/// in time rather than all queueing for the model. Indexing a card waits.
pub const ROUTE_EMBED_WAIT: Duration = Duration::from_secs(1);

/// The registry: cheap to clone (clones share everything).
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn RegistryStore>,
    index: RwLock<Index>,
    analyzer: Arc<Analyzer>,
    config: RegistryConfig,
    base_url: RwLock<String>,
    /// Fetches cards and catalogs: guarded by the URL policy.
    http: reqwest::Client,
    /// Searches the upstream registries: the URL policy with the
    /// upstreams' hosts allowed.
    upstream_http: reqwest::Client,
    /// The URL policy of `http`, for the literal address of each URL.
    policy: Arc<UrlPolicy>,
    verifier: Arc<dyn SignatureVerifier>,
    embedder: Option<Arc<dyn Embedder>>,
    /// The vectors of the requests routed last.
    request_vectors: Mutex<RequestVectors>,
    /// The embedder's [`Embedder::model_id`], asked once (empty: unknown,
    /// or no embedder).
    model_id: String,
    /// Entries whose skills are embedded in the background (read from the
    /// store without vectors of this model), and whether a task is on it.
    backlog: Mutex<Backlog>,
    /// How many entries of the backlog are not done yet.
    pending: tokio::sync::watch::Sender<usize>,
    inflight: Mutex<HashSet<String>>,
    /// When each by-reference entry is next due (Unix ms), this process's
    /// own schedule.
    schedule: Mutex<HashMap<String, i64>>,
    permits: Arc<Semaphore>,
    catalog: Mutex<Option<CachedCatalog>>,
}

#[derive(Default)]
struct Backlog {
    queue: VecDeque<String>,
    running: bool,
}

/// The catalog as last served: for the index revision and base URL it was
/// built for, its body and `ETag`.
#[derive(Clone)]
struct CachedCatalog {
    revision: i64,
    base: String,
    body: Arc<Vec<u8>>,
    etag: String,
    /// The same entries as the ARD v0.91 manifest (`/.well-known/ard.json`).
    ard_body: Arc<Vec<u8>>,
    ard_etag: String,
}

/// Builds a [`Registry`].
pub struct RegistryBuilder {
    store: Arc<dyn RegistryStore>,
    config: RegistryConfig,
    verifier: Arc<dyn SignatureVerifier>,
    embedder: Option<Arc<dyn Embedder>>,
    http: Option<HttpSettings>,
    base_url: String,
}

/// Makes the settings of the registry's HTTP clients.
type HttpSettings = Box<dyn Fn() -> reqwest::ClientBuilder + Send + Sync>;

impl RegistryBuilder {
    /// Settings.
    pub fn config(mut self, config: RegistryConfig) -> Self {
        self.config = config;
        self
    }

    /// The card signature verifier (default: none, signed cards are
    /// recorded as not verified).
    pub fn verifier(mut self, verifier: Arc<dyn SignatureVerifier>) -> Self {
        self.verifier = verifier;
        self
    }

    /// A semantic model mixed into routing.
    pub fn embedder(mut self, embedder: Arc<dyn Embedder>) -> Self {
        self.embedder = Some(embedder);
        self
    }

    /// The settings of the HTTP clients that fetch cards and search the
    /// upstream registries (TLS roots, timeouts...), made by `settings`.
    /// The registry adds the URL policy of [`RegistryConfig::url_policy`]
    /// to them: its DNS resolver, its redirect rule and no proxy.
    pub fn http_client_builder(
        mut self,
        settings: impl Fn() -> reqwest::ClientBuilder + Send + Sync + 'static,
    ) -> Self {
        self.http = Some(Box::new(settings));
        self
    }

    /// The registry's own base URL (set by the server when it binds).
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// Opens the registry: the index is built from the store.
    pub async fn build(self) -> StoreResult<Registry> {
        // reqwest is built without a TLS crypto provider of its own:
        // without this, building the client panics.
        agentwire_client::install_crypto_provider();
        let base = || match &self.http {
            Some(settings) => settings(),
            None => reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(5))
                .user_agent(concat!("agentwire-registry/", env!("CARGO_PKG_VERSION"))),
        };
        let build = |policy: &Arc<UrlPolicy>| {
            policy
                .guard(base(), MAX_REDIRECTS)
                .build()
                .map_err(|e| crate::store::StoreError(format!("cannot build the HTTP client: {e}")))
        };
        let policy = Arc::new(self.config.url_policy.clone());
        let http = build(&policy)?;
        let upstream_http = build(&Arc::new(upstream_policy(
            &self.config.url_policy,
            &self.config.upstreams,
        )))?;
        let analyzer = Arc::new(Analyzer::new());
        let model_id = self
            .embedder
            .as_ref()
            .map(|e| e.model_id())
            .unwrap_or_default();
        if self.embedder.is_some() && model_id.is_empty() {
            tracing::info!(
                "the embedder does not say which model it is (Embedder::model_id): the skills' \
                 vectors are not stored, and every card is embedded again at each start"
            );
        }
        let concurrency = self.config.refresh.concurrency.max(1);
        let registry = Registry {
            inner: Arc::new(Inner {
                store: self.store,
                index: RwLock::new(Index::new(Arc::clone(&analyzer))),
                analyzer,
                config: self.config,
                base_url: RwLock::new(self.base_url),
                http,
                upstream_http,
                policy,
                verifier: self.verifier,
                embedder: self.embedder,
                request_vectors: Mutex::new(RequestVectors::new(REQUEST_VECTORS)),
                model_id,
                backlog: Mutex::new(Backlog::default()),
                pending: tokio::sync::watch::Sender::new(0),
                inflight: Mutex::new(HashSet::new()),
                schedule: Mutex::new(HashMap::new()),
                permits: Arc::new(Semaphore::new(concurrency)),
                catalog: Mutex::new(None),
            }),
        };
        registry.sync().await?;
        let backlog = registry.embedding_backlog();
        if backlog > 0 {
            tracing::info!(
                agents = backlog,
                "agents without stored vectors of this model: their skills are embedded in the \
                 background (routed by their words meanwhile)"
            );
        }
        Ok(registry)
    }
}

/// `policy` with the hosts of the upstream registries allowed.
fn upstream_policy(policy: &UrlPolicy, upstreams: &[String]) -> UrlPolicy {
    let mut policy = policy.clone();
    for u in upstreams {
        let with_scheme = if u.contains("://") {
            u.clone()
        } else {
            format!("http://{u}")
        };
        let Ok(url) = reqwest::Url::parse(&with_scheme) else {
            continue;
        };
        let Some(host) = url.host_str() else {
            continue;
        };
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        policy = match bare.parse::<std::net::IpAddr>() {
            Ok(ip) => policy.allow_net(&ip.to_string()),
            Err(_) => policy.allow_host(host),
        };
    }
    policy
}

/// A failed request, in words: the URL policy's refusal when it stopped
/// the request, else the error and its sources.
fn request_error(url: &str, e: &reqwest::Error) -> String {
    if let Some(r) = refusal_in(e) {
        return refused(url, &r.0);
    }
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg = format!("{msg}: {s}");
        src = s.source();
    }
    msg
}

/// Why the registry does not fetch `url`.
fn refused(url: &str, why: &str) -> String {
    format!(
        "{url} is refused by the registry's address policy ({why}): the registry only fetches \
         public addresses unless its operator allows others (a2a registry serve --fetch-allow)"
    )
}

/// What a card fetch gave.
enum Fetched {
    NotModified {
        ttl: Duration,
    },
    Card {
        card: Value,
        etag: Option<String>,
        last_modified: Option<String>,
        ttl: Duration,
    },
}

/// A page token: where the next page starts, and which query it belongs to.
fn encode_token(offset: usize, query_hash: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"o": offset, "q": query_hash}).to_string())
}

fn decode_token(token: &str, query_hash: &str) -> Result<usize, ApiError> {
    let bad = || {
        ApiError::invalid(
            "invalid pageToken: pass the pageToken of the previous answer, with the same query",
        )
    };
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim())
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    if v["q"].as_str() != Some(query_hash) {
        return Err(bad());
    }
    v["o"]
        .as_u64()
        .and_then(|o| usize::try_from(o).ok())
        .ok_or_else(bad)
}

fn hash_hex(bytes: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    d.as_ref()
        .iter()
        .take(12)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The freshness lifetime of a card answer (Cache-Control), bounded by the
/// policy.
fn ttl_of(headers: &http::HeaderMap, policy: &RefreshPolicy) -> Duration {
    let mut max_age: Option<u64> = None;
    let mut no_cache = false;
    for v in headers.get_all(http::header::CACHE_CONTROL) {
        let Ok(v) = v.to_str() else { continue };
        for d in v.split(',') {
            let d = d.trim().to_ascii_lowercase();
            if d == "no-cache" || d == "no-store" {
                no_cache = true;
            } else if let Some(n) = d
                .strip_prefix("s-maxage=")
                .or_else(|| d.strip_prefix("max-age="))
            {
                if let Ok(n) = n.trim_matches('"').parse::<u64>() {
                    max_age = Some(max_age.map_or(n, |m| m.min(n)));
                }
            }
        }
    }
    let ttl = if no_cache {
        policy.min_interval
    } else {
        max_age.map_or(policy.default_interval, Duration::from_secs)
    };
    ttl.clamp(
        policy.min_interval,
        policy.max_interval.max(policy.min_interval),
    )
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Registry {
    /// A builder over a store.
    pub fn builder(store: Arc<dyn RegistryStore>) -> RegistryBuilder {
        RegistryBuilder {
            store,
            config: RegistryConfig::default(),
            verifier: Arc::new(NoVerifier),
            embedder: None,
            http: None,
            base_url: "http://127.0.0.1/".into(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &RegistryConfig {
        &self.inner.config
    }

    /// The registry's base URL (ends with `/`).
    pub fn base_url(&self) -> String {
        self.inner.base_url.read().clone()
    }

    /// Sets the base URL (once the server knows its address).
    pub fn set_base_url(&self, url: &str) {
        let mut u = url.trim_end_matches('/').to_owned();
        u.push('/');
        *self.inner.base_url.write() = u;
        *self.inner.catalog.lock() = None;
    }

    /// How many entries are indexed.
    pub fn len(&self) -> usize {
        self.inner.index.read().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The indexed form of `record`. With an embedder, a skill whose texts
    /// did not change keeps its vector (a refresh re-indexes the card), or
    /// takes the one stored with the record (same model); the others are
    /// embedded if `embed_now`.
    fn build_indexed(&self, record: Record, revision: i64, embed_now: bool) -> Indexed {
        let previous = match self.inner.embedder {
            Some(_) => self.inner.index.read().get(&record.identifier),
            None => None,
        };
        Indexed::build(
            record,
            revision,
            &self.inner.analyzer,
            self.embedding(embed_now),
            previous.as_deref(),
        )
    }

    fn embedding(&self, embed_now: bool) -> Option<Embedding<'_>> {
        self.inner.embedder.as_deref().map(|embedder| Embedding {
            embedder,
            model: &self.inner.model_id,
            embed_now,
        })
    }

    /// Puts an entry in the index, and its next refresh in the schedule;
    /// `false` when the index has a newer revision of it.
    fn put_indexed(&self, indexed: Indexed) -> bool {
        let record = &indexed.record;
        let id = record.identifier.clone();
        let due = if matches!(record.source, Source::Url(_)) {
            Some(if record.fetch.next_check_ms > 0 {
                record.fetch.next_check_ms
            } else {
                now_ms()
            })
        } else {
            None
        };
        if !self.inner.index.write().put(indexed) {
            return false;
        }
        let mut s = self.inner.schedule.lock();
        match due {
            Some(t) => {
                s.insert(id, t);
            }
            None => {
                s.remove(&id);
            }
        }
        true
    }

    /// A change read from the store: indexed with the vectors it has
    /// (kept with it, or of the entry as indexed before); skills without
    /// one are embedded in the background, so that a registry starting
    /// with many cards serves at once (routing those skills by their
    /// words until their vectors are there).
    fn apply(&self, record: Record, revision: i64) {
        let indexed = self.build_indexed(record, revision, false);
        let later = self.inner.embedder.is_some() && indexed.needs_vectors();
        let id = indexed.record.identifier.clone();
        if self.put_indexed(indexed) && later {
            self.embed_later(id);
        }
    }

    /// How many entries wait for their skills' vectors (read from the
    /// store without vectors of this model; see [`Embedder::model_id`]).
    pub fn embedding_backlog(&self) -> usize {
        *self.inner.pending.borrow()
    }

    /// Waits until no entry waits for its skills' vectors.
    pub async fn embedded(&self) {
        let mut rx = self.inner.pending.subscribe();
        // The sender lives as long as `self`: this cannot fail.
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    fn embed_later(&self, id: String) {
        let start = {
            let mut b = self.inner.backlog.lock();
            b.queue.push_back(id);
            let was_running = std::mem::replace(&mut b.running, true);
            self.inner
                .pending
                .send_replace(b.queue.len() + usize::from(was_running));
            !was_running
        };
        if start {
            tokio::spawn(embed_backlog(Arc::downgrade(&self.inner)));
        }
    }

    /// Embeds the skills of one entry of the backlog (on a blocking thread:
    /// a model takes milliseconds of CPU a text), stores the vectors with
    /// its record (unless it changed meanwhile) and puts it in the index
    /// again.
    async fn embed_one(&self, id: &str) {
        let Some(current) = self.inner.index.read().get(id) else {
            return;
        };
        if !current.needs_vectors() {
            return;
        }
        let me = self.clone();
        let built = tokio::task::spawn_blocking(move || {
            Indexed::build(
                current.record.clone(),
                current.revision,
                &me.inner.analyzer,
                me.embedding(true),
                Some(&current),
            )
        })
        .await;
        let indexed = match built {
            Ok(i) => i,
            Err(e) => {
                tracing::warn!(identifier = id, "embedding the agent's skills failed: {e}");
                return;
            }
        };
        if let Some(v) = indexed
            .record
            .vectors
            .as_ref()
            .filter(|v| !self.inner.model_id.is_empty() && v.model == self.inner.model_id)
        {
            if let Err(e) = self.inner.store.put_vectors(id, indexed.revision, v).await {
                tracing::warn!(identifier = id, error = %e, "cannot store the skills' vectors");
            }
        }
        self.inner.index.write().refill(indexed);
    }

    /// Reads what changed in the store since the index was last in step
    /// (other replicas' writes). A window of recent revisions is read
    /// again, because concurrent writers may commit out of order.
    pub async fn sync(&self) -> StoreResult<usize> {
        const WINDOW: i64 = 256;
        let from = (self.inner.index.read().revision - WINDOW).max(0);
        let changes = self.inner.store.changes_since(from).await?;
        let mut applied = 0;
        for c in changes {
            match c.record {
                Some(r) => {
                    let newer = self
                        .inner
                        .index
                        .read()
                        .get(&c.identifier)
                        .is_none_or(|e| e.revision < c.revision);
                    if newer {
                        self.apply(r, c.revision);
                        applied += 1;
                    }
                }
                None => {
                    if self.inner.index.write().remove(&c.identifier, c.revision) {
                        self.inner.schedule.lock().remove(&c.identifier);
                        applied += 1;
                    }
                }
            }
        }
        Ok(applied)
    }

    async fn fetch(
        &self,
        url: &str,
        etag: Option<&str>,
        last_modified: Option<&str>,
    ) -> Result<Fetched, String> {
        // The literal address here; the addresses of a name when connecting,
        // and each redirect, in the HTTP client (`UrlPolicy::guard`).
        self.inner
            .policy
            .check_url(url)
            .map_err(|r| refused(url, &r.0))?;
        let policy = &self.inner.config.refresh;
        let mut rb = self
            .inner
            .http
            .get(url)
            .timeout(policy.timeout)
            .header(http::header::ACCEPT, "application/json");
        if let Some(e) = etag {
            rb = rb.header(http::header::IF_NONE_MATCH, e);
        }
        if let Some(d) = last_modified {
            rb = rb.header(http::header::IF_MODIFIED_SINCE, d);
        }
        let resp = rb.send().await.map_err(|e| request_error(url, &e))?;
        let status = resp.status();
        let ttl = ttl_of(resp.headers(), policy);
        if status == reqwest::StatusCode::NOT_MODIFIED
            && (etag.is_some() || last_modified.is_some())
        {
            return Ok(Fetched::NotModified { ttl });
        }
        if !status.is_success() {
            return Err(format!("HTTP {status} from {url}"));
        }
        let header = |n: http::header::HeaderName| {
            resp.headers()
                .get(n)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let etag = header(http::header::ETAG);
        let last_modified = header(http::header::LAST_MODIFIED);
        // Read as it arrives, never more than the limit (a body without
        // Content-Length is cut off there too).
        let max = self.inner.config.max_card_bytes;
        let body = agentwire_client::read_body_limited(resp, max)
            .await
            .map_err(|e| match e {
                agentwire_client::ClientError::ResponseTooLarge { .. } => {
                    format!("the card at {url} is larger than {max} bytes")
                }
                e => format!("reading {url}: {e}"),
            })?;
        let card: Value =
            serde_json::from_slice(&body).map_err(|e| format!("{url} is not JSON: {e}"))?;
        Ok(Fetched::Card {
            card,
            etag,
            last_modified,
            ttl,
        })
    }

    /// Publishes (or, for its owner, updates) an agent.
    pub async fn publish(
        &self,
        principal: &str,
        request: PublishRequest,
        identifier_in_path: Option<&str>,
    ) -> Result<PublishResponse, ApiError> {
        let (card, source, fetch) = match (&request.url, &request.card) {
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid(
                    "give the agent card's url or the card itself, not both",
                ));
            }
            (None, None) => {
                return Err(ApiError::invalid(
                    "give the agent card's url (or a host) or the card itself",
                ));
            }
            (Some(url), None) => {
                let card_url = agentwire_client::card::agent_card_url(url)
                    .map_err(|e| ApiError::invalid(e.to_string()))?;
                match self.fetch(&card_url, None, None).await {
                    Ok(Fetched::Card {
                        card,
                        etag,
                        last_modified,
                        ttl,
                    }) => {
                        let fetch = FetchState {
                            etag,
                            last_modified,
                            checked_at: Some(now_rfc3339()),
                            next_check_ms: now_ms() + ms(ttl),
                            ..Default::default()
                        };
                        (card, Source::Url(card_url), fetch)
                    }
                    Ok(Fetched::NotModified { .. }) => {
                        return Err(ApiError::invalid(format!(
                            "{card_url} answered 304 to an unconditional request"
                        )));
                    }
                    Err(e) => {
                        return Err(ApiError::invalid(format!(
                            "cannot fetch the agent card: {e}"
                        )));
                    }
                }
            }
            (None, Some(card)) => (card.clone(), Source::Value, FetchState::default()),
        };
        let (facts, warnings) = read_card(&card)
            .map_err(|p| ApiError::invalid(format!("the agent card is not valid: {p}")))?;
        let identifier = match (identifier_in_path, &request.identifier) {
            (Some(p), Some(b)) if p != b => {
                return Err(ApiError::invalid(format!(
                    "the identifier in the body ({b}) is not the one in the path ({p})"
                )));
            }
            (Some(p), _) => p.to_owned(),
            (None, Some(b)) => b.clone(),
            (None, None) => derive_identifier(&facts, source_url(&source)),
        };
        check_identifier(&identifier).map_err(ApiError::invalid)?;
        if let Some(q) = &request.representative_queries {
            if !(2..=5).contains(&q.len()) {
                return Err(ApiError::invalid(
                    "representativeQueries takes 2 to 5 sample requests",
                ));
            }
        }
        let existing = self.inner.store.get(&identifier).await?;
        if let Some(e) = &existing {
            if e.owner != principal {
                return Err(ApiError::forbidden(format!(
                    "{identifier} was published by another publisher; only they can change it \
                     (publish under another identifier with --id)"
                )));
            }
        } else if identifier_in_path.is_some() {
            return Err(ApiError::not_found(format!(
                "no entry {identifier}: publish it first (POST /agents)"
            )));
        }
        let now = now_rfc3339();
        let record = Record {
            identifier: identifier.clone(),
            owner: principal.to_owned(),
            source,
            signature: self.inner.verifier.verify(&card).describe(),
            card,
            representative_queries: request.representative_queries,
            extra_tags: request.tags.unwrap_or_default(),
            trust_manifest: request.trust_manifest,
            created_at: existing
                .as_ref()
                .map_or_else(|| now.clone(), |e| e.created_at.clone()),
            updated_at: now,
            warnings: warnings.clone(),
            fetch,
            vectors: None,
        };
        // Embedded before it is stored: the vectors are stored with it.
        let mut indexed = self.build_indexed(record, 0, true);
        let revision = self.inner.store.put(&indexed.record).await?;
        indexed.revision = revision;
        let entry = indexed.entry.clone();
        self.put_indexed(indexed);
        tracing::info!(%identifier, publisher = principal, "published");
        Ok(PublishResponse {
            entry,
            created: existing.is_none(),
            warnings,
        })
    }

    /// Registers, for `principal`, the A2A agents that the AI catalog at
    /// `url` lists (ARD 6.2, web ingestion): entries of type
    /// `application/a2a-agent-card+json` by reference or by value, with
    /// their identifiers, tags, representative queries and trust manifests;
    /// nested catalogs (by value or by reference) are followed a few levels
    /// deep. Other types are reported as skipped.
    pub async fn ingest(&self, principal: &str, url: &str) -> Result<IngestResponse, ApiError> {
        const MAX_DEPTH: usize = 3;
        const MAX_ENTRIES: usize = 500;
        let candidates = catalog_urls(url)?;
        let mut out = IngestResponse::default();
        let mut pending: Vec<(Value, usize)> = Vec::new();
        // A host's ARD manifest (`ard.json`), else its predecessor
        // (`ai-catalog.json`); the first that reads as a manifest.
        let mut failure = String::new();
        for first in &candidates {
            match self.fetch_json(first).await {
                Ok(doc) if doc.get("entries").and_then(Value::as_array).is_some() => {
                    pending.push((doc, 0));
                    break;
                }
                Ok(_) => {
                    failure = format!("{first} is not an ARD manifest (no \"entries\" list)");
                }
                Err(e) => failure = format!("cannot fetch the catalog at {first}: {e}"),
            }
        }
        if pending.is_empty() {
            return Err(ApiError::invalid(failure));
        }
        let mut seen = 0;
        while let Some((catalog, depth)) = pending.pop() {
            for e in catalog["entries"].as_array().into_iter().flatten() {
                seen += 1;
                if seen > MAX_ENTRIES {
                    out.skipped.push(Skipped {
                        identifier: None,
                        reason: format!("more than {MAX_ENTRIES} entries: the rest is left out"),
                    });
                    return Ok(out);
                }
                let identifier = e["identifier"].as_str().map(str::to_owned);
                let kind = e["type"].as_str().unwrap_or_default();
                let skip = |reason: String| Skipped {
                    identifier: identifier.clone(),
                    reason,
                };
                if kind.starts_with(CATALOG_MEDIA_TYPE) {
                    if depth + 1 > MAX_DEPTH {
                        out.skipped.push(skip("nested too deep".into()));
                    } else if e["data"].is_object() {
                        pending.push((e["data"].clone(), depth + 1));
                    } else if let Some(u) = e["url"].as_str() {
                        match self.fetch_json(u).await {
                            Ok(d) if d["entries"].is_array() => pending.push((d, depth + 1)),
                            Ok(_) => out.skipped.push(skip(format!("{u} is not an AI catalog"))),
                            Err(err) => out.skipped.push(skip(err)),
                        }
                    }
                    continue;
                }
                if kind != A2A_CARD_TYPE {
                    out.skipped.push(skip(format!(
                        "type {kind} is not indexed here (A2A agent cards only)"
                    )));
                    continue;
                }
                let strings = |k: &str| -> Option<Vec<String>> {
                    e[k].as_array().map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                };
                let request = PublishRequest {
                    url: e["url"].as_str().map(str::to_owned),
                    card: e.get("data").filter(|d| d.is_object()).cloned(),
                    identifier: identifier.clone(),
                    representative_queries: strings("representativeQueries")
                        .filter(|q| (2..=5).contains(&q.len())),
                    tags: strings("tags"),
                    trust_manifest: e.get("trustManifest").cloned(),
                };
                match self.publish(principal, request, None).await {
                    Ok(p) => out.published.push(p.entry),
                    Err(err) => out.skipped.push(skip(err.message)),
                }
            }
        }
        Ok(out)
    }

    async fn fetch_json(&self, url: &str) -> Result<Value, String> {
        match self.fetch(url, None, None).await? {
            Fetched::Card { card, .. } => Ok(card),
            Fetched::NotModified { .. } => Err(format!("{url} answered 304 Not Modified")),
        }
    }

    /// Withdraws an entry of `principal`.
    pub async fn withdraw(&self, principal: &str, identifier: &str) -> Result<(), ApiError> {
        let Some(existing) = self.inner.store.get(identifier).await? else {
            return Err(ApiError::not_found(format!("no entry {identifier}")));
        };
        if existing.owner != principal {
            return Err(ApiError::forbidden(format!(
                "{identifier} was published by another publisher; only they can withdraw it"
            )));
        }
        if let Some(rev) = self.inner.store.delete(identifier).await? {
            self.inner.index.write().remove(identifier, rev);
            self.inner.schedule.lock().remove(identifier);
        }
        tracing::info!(%identifier, publisher = principal, "withdrawn");
        Ok(())
    }

    /// The entry of an identifier, or of a unique display name or agent
    /// name (the URN's last segment).
    pub fn get(&self, reference: &str) -> Result<Arc<Indexed>, ApiError> {
        if let Some(e) = self.inner.index.read().get(reference) {
            return Ok(e);
        }
        let mut found = self.named(reference);
        match found.len() {
            0 => Err(ApiError::not_found(format!(
                "no agent {reference:?} in this registry (search for it with a2a registry search)"
            ))),
            1 => Ok(found.remove(0)),
            _ => {
                let mut ids: Vec<&str> =
                    found.iter().map(|e| e.record.identifier.as_str()).collect();
                ids.sort_unstable();
                Err(ApiError::ambiguous(format!(
                    "{reference:?} names several agents: {}; use the identifier",
                    ids.join(", ")
                )))
            }
        }
    }

    /// ARD v0.91 Retrieve (`GET /agents/{identifier}`): the entry of
    /// exactly this identifier (after one percent-decoding, done by the
    /// caller), from this registry's index only. An identifier that is not
    /// an ARD URN is refused (`400 INVALID_ARGUMENT`); none found is `404
    /// NOT_FOUND`.
    pub fn retrieve(&self, identifier: &str) -> Result<Arc<Indexed>, ApiError> {
        check_identifier(identifier).map_err(ApiError::invalid)?;
        self.inner
            .index
            .read()
            .get(identifier)
            .ok_or_else(|| ApiError::not_found(format!("no entry {identifier} in this registry")))
    }

    /// The entries a name designates: the display name (case aside, or as
    /// a slug) or the identifier's last segment (case aside), sorted by
    /// identifier.
    pub fn named(&self, reference: &str) -> Vec<Arc<Indexed>> {
        let wanted = slug(reference);
        let index = self.inner.index.read();
        let mut found: Vec<Arc<Indexed>> = index
            .all()
            .filter(|e| {
                e.record.identifier == reference.trim()
                    || e.facts.name.eq_ignore_ascii_case(reference.trim())
                    || slug(&e.facts.name) == wanted
                    || e.record
                        .identifier
                        .rsplit(':')
                        .next()
                        .is_some_and(|last| last.eq_ignore_ascii_case(reference.trim()))
            })
            .cloned()
            .collect();
        found.sort_by(|a, b| a.record.identifier.cmp(&b.record.identifier));
        found
    }

    fn referrals(&self) -> Vec<Referral> {
        self.inner
            .config
            .upstreams
            .iter()
            .map(|u| {
                let base = format!("{}/", u.trim_end_matches('/'));
                let host = reqwest::Url::parse(&base)
                    .ok()
                    .and_then(|x| x.host_str().map(str::to_owned))
                    .unwrap_or_default();
                Referral {
                    identifier: format!("urn:air:{}:registry:{}", domain_of(&base), slug(&host)),
                    display_name: format!("Registry at {base}"),
                    media_type: REGISTRY_TYPE.into(),
                    url: format!("{base}search"),
                }
            })
            .collect()
    }

    /// `POST /search`.
    pub async fn search(&self, request: SearchRequest) -> Result<SearchResponse, ApiError> {
        let text = request
            .query
            .text
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                ApiError::invalid("query.text is required: say what you are looking for")
            })?
            .to_owned();
        let page_size = page_size(request.page_size, 10)?;
        let context =
            QueryContext::parse(request.query.context.as_ref()).map_err(ApiError::invalid)?;
        let filter = CompiledFilter::with_context(request.query.filter.as_ref(), &context)
            .map_err(ApiError::invalid)?;
        let federation = request.federation.unwrap_or_default();
        let query_hash = hash_hex(
            serde_json::to_string(&(&request.query, federation))
                .unwrap_or_default()
                .as_bytes(),
        );
        let offset = match &request.page_token {
            Some(t) => decode_token(t, &query_hash)?,
            None => 0,
        };
        let source = self.base_url();
        // Own hits stay references until the page is cut: only the entries
        // of the page are copied.
        enum Item {
            Own(Arc<Indexed>, u8),
            Upstream(Box<SearchResult>),
        }
        impl Item {
            fn score(&self) -> u8 {
                match self {
                    Item::Own(_, s) => *s,
                    Item::Upstream(r) => r.score,
                }
            }
            fn identifier(&self) -> &str {
                match self {
                    Item::Own(e, _) => &e.record.identifier,
                    Item::Upstream(r) => &r.entry.identifier,
                }
            }
        }
        let mut results: Vec<Item> = self
            .inner
            .index
            .read()
            .search(&text, &filter, |e| e.record.fetch.status == Status::Active)
            .into_iter()
            .map(|h| Item::Own(h.entry, h.score))
            .collect();
        if federation == Federation::Auto && !self.inner.config.upstreams.is_empty() {
            let wanted = u32::try_from((offset + page_size).min(100)).unwrap_or(100);
            for upstream in &self.inner.config.upstreams {
                let Ok(client) = agentwire_client::registry::Registry::new(upstream) else {
                    continue;
                };
                let client = client
                    .with_http_client(self.inner.upstream_http.clone())
                    .with_timeout(self.inner.config.refresh.timeout)
                    .with_max_response_bytes(self.inner.config.max_upstream_bytes);
                let req = SearchRequest {
                    query: request.query.clone(),
                    federation: Some(Federation::None),
                    page_size: Some(wanted),
                    page_token: None,
                };
                match client.search(&req).await {
                    Ok(r) => {
                        for x in r.results {
                            if !results.iter().any(|y| y.identifier() == x.entry.identifier) {
                                results.push(Item::Upstream(Box::new(x)));
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(%upstream, error = %e, "upstream registry search failed")
                    }
                }
            }
            results.sort_by_key(|r| std::cmp::Reverse(r.score()));
        }
        let total = results.len();
        let page: Vec<SearchResult> = results
            .into_iter()
            .skip(offset)
            .take(page_size)
            .map(|i| match i {
                // The representative queries serve indexing, not the
                // choice among results (ARD v0.91 5.3.2): left out.
                Item::Own(e, score) => SearchResult {
                    entry: CatalogEntry {
                        representative_queries: Vec::new(),
                        ..e.entry.clone()
                    },
                    score,
                    source: source.clone(),
                },
                Item::Upstream(r) => *r,
            })
            .collect();
        let next = offset + page.len();
        Ok(SearchResponse {
            results: page,
            referrals: (federation == Federation::Referrals).then(|| self.referrals()),
            page_token: (next < total).then(|| encode_token(next, &query_hash)),
        })
    }

    /// `GET /agents`.
    pub fn list(&self, request: &ListRequest) -> Result<ListResponse, ApiError> {
        let filter = ListFilter::parse(request.filter.as_deref().unwrap_or(""))
            .map_err(|e| ApiError::invalid(format!("invalid filter: {e}")))?;
        let order = parse_order(request.order_by.as_deref().unwrap_or(""))?;
        let page_size = page_size(request.page_size, 20)?;
        let query_hash = hash_hex(
            format!(
                "{:?}|{:?}",
                request.filter.as_deref().unwrap_or(""),
                request.order_by.as_deref().unwrap_or("")
            )
            .as_bytes(),
        );
        let offset = match &request.page_token {
            Some(t) => decode_token(t, &query_hash)?,
            None => 0,
        };
        let index = self.inner.index.read();
        let mut items: Vec<&Arc<Indexed>> = index
            .all()
            .filter(|e| {
                filter.matches(
                    &e.entry,
                    &e.view,
                    &Dates {
                        created: e.created,
                        updated: e.updated,
                    },
                )
            })
            .collect();
        items.sort_by(|a, b| {
            for (key, desc) in &order {
                let o = match key.as_str() {
                    "displayName" => a
                        .entry
                        .display_name
                        .to_lowercase()
                        .cmp(&b.entry.display_name.to_lowercase()),
                    "createdAt" => a.created.cmp(&b.created),
                    "updatedAt" => a.updated.cmp(&b.updated),
                    "version" => a.facts.version.cmp(&b.facts.version),
                    _ => a.record.identifier.cmp(&b.record.identifier),
                };
                let o = if *desc { o.reverse() } else { o };
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
            }
            a.record.identifier.cmp(&b.record.identifier)
        });
        let total = items.len();
        let page: Vec<CatalogEntry> = items
            .into_iter()
            .skip(offset)
            .take(page_size)
            .map(|e| e.entry.clone())
            .collect();
        let next = offset + page.len();
        Ok(ListResponse {
            items: page,
            total: Some(total as u64),
            page_token: (next < total).then(|| encode_token(next, &query_hash)),
        })
    }

    /// `POST /explore`.
    pub fn explore(&self, request: &ExploreRequest) -> Result<ExploreResponse, ApiError> {
        let query = request.query.clone().unwrap_or_default();
        if let Some(shape) = request.result_type.other.keys().next() {
            return Err(ApiError::not_implemented(format!(
                "resultType.{shape} is not implemented by this registry; resultType.facets is"
            )));
        }
        if request.result_type.facets.is_empty() {
            return Err(ApiError::invalid(
                "resultType.facets is required: the fields to count, e.g. [{\"field\": \"type\"}]",
            ));
        }
        let context = QueryContext::parse(query.context.as_ref()).map_err(ApiError::invalid)?;
        let filter = CompiledFilter::with_context(query.filter.as_ref(), &context)
            .map_err(ApiError::invalid)?;
        // Each facet's field resolved like a filter key; `None`: a term of
        // another namespace, which no entry here carries (no buckets).
        let mut fields: Vec<Option<String>> = Vec::new();
        for f in &request.result_type.facets {
            let field = context.resolve(&f.field).map_err(ApiError::invalid)?;
            if let Some(k) = &field {
                if !known_key(k) {
                    return Err(ApiError::invalid(format!(
                        "unsupported facet field {:?}",
                        f.field
                    )));
                }
            }
            fields.push(field);
        }
        let index = self.inner.index.read();
        let matched: Vec<Arc<Indexed>> = match query.text.as_deref().map(str::trim) {
            Some(t) if !t.is_empty() => index
                .search(t, &filter, |e| e.record.fetch.status == Status::Active)
                .into_iter()
                .map(|h| h.entry)
                .collect(),
            _ => index
                .all()
                .filter(|e| e.record.fetch.status == Status::Active && filter.matches(&e.view))
                .cloned()
                .collect(),
        };
        let mut facets = BTreeMap::new();
        for (f, field) in request.result_type.facets.iter().zip(&fields) {
            let Some(field) = field else { continue };
            let counts = count_facet(field, matched.iter().map(|e| &e.view));
            let min = f.min_count.unwrap_or(1);
            let mut buckets: Vec<Bucket> = counts
                .into_iter()
                .filter(|(_, c)| *c >= min)
                .map(|(value, count)| Bucket { value, count })
                .collect();
            buckets.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.value.cmp(&b.value)));
            let limit = f.limit.map_or(20, |l| l as usize);
            let other: u64 = buckets.iter().skip(limit).map(|b| b.count).sum();
            buckets.truncate(limit);
            // A facet with no bucket is left out (the ARD grammar has a
            // facet carry one bucket at least).
            if buckets.is_empty() {
                continue;
            }
            facets.insert(
                f.field.clone(),
                FacetResult {
                    buckets,
                    other_count: (other > 0).then_some(other),
                },
            );
        }
        Ok(ExploreResponse {
            result_type: "facets".into(),
            facets,
        })
    }

    /// `POST /route`.
    pub fn route(&self, request: &RouteRequest) -> Result<RouteResponse, ApiError> {
        self.route_with(request, &self.inner.config.router)
    }

    /// [`Self::route`] for async code: with an embedder, the model runs on
    /// a thread of the blocking pool, not on the caller's runtime worker
    /// (embedding a request takes milliseconds of CPU).
    pub async fn route_async(&self, request: RouteRequest) -> Result<RouteResponse, ApiError> {
        if self.inner.embedder.is_none() {
            return self.route(&request);
        }
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.route(&request))
            .await
            .map_err(|e| ApiError::internal(format!("routing stopped: {e}")))?
    }

    /// Routes with other weights and thresholds than the registry's (to
    /// evaluate or tune them).
    pub fn route_with(
        &self,
        request: &RouteRequest,
        config: &RouterConfig,
    ) -> Result<RouteResponse, ApiError> {
        if request.text.trim().is_empty() {
            return Err(ApiError::invalid("text is required: the request to route"));
        }
        let limit = request.limit.map_or(3, |l| l as usize);
        if !(1..=20).contains(&limit) {
            return Err(ApiError::invalid("limit takes 1 to 20"));
        }
        let filter = CompiledFilter::new(request.filter.as_ref()).map_err(ApiError::invalid)?;
        // The request is embedded before the index is locked (a model takes
        // milliseconds), unless it was routed lately. If it cannot be, the
        // request is routed by its words, with the lexical threshold.
        let text = request.text.as_str();
        let query_vec = self.inner.embedder.as_ref().and_then(|e| {
            if let Some(v) = self.inner.request_vectors.lock().get(text) {
                return Some(v);
            }
            match e.embed_within(&[text], ROUTE_EMBED_WAIT) {
                Ok(mut v) if v.len() == 1 => {
                    let v = v.pop();
                    if let Some(v) = &v {
                        self.inner.request_vectors.lock().put(text, v.clone());
                    }
                    v
                }
                Ok(v) => {
                    tracing::warn!(
                        "the embedder gave {} vectors for one request; routed by its words",
                        v.len()
                    );
                    None
                }
                Err(e) => {
                    tracing::warn!("cannot embed the request ({e}); routed by its words");
                    None
                }
            }
        });
        Ok(self.inner.index.read().route(
            &request.text,
            &filter,
            config,
            query_vec.as_deref(),
            limit,
        ))
    }

    /// The identifier of the registry itself in its catalog.
    pub fn own_identifier(&self) -> String {
        format!(
            "urn:air:{}:registry:{}",
            domain_of(&self.base_url()),
            slug(&self.inner.config.name)
        )
    }

    /// The catalog (`/.well-known/ai-catalog.json`, ARD v0.9): the
    /// registry itself, its own agent card, and the reachable agents.
    /// Returns the body and its `ETag`.
    pub fn catalog(&self) -> (Arc<Vec<u8>>, String) {
        let c = self.documents();
        (c.body, c.etag)
    }

    /// The ARD v0.91 manifest (`/.well-known/ard.json`): the same entries
    /// as [`Self::catalog`], in an object with just `entries` (ARD v0.91
    /// 5.1). Entries carry no `@context`: a consumer of the manifest
    /// applies the ARD base context (4.1); the Retrieve answer, a
    /// standalone entry, carries it. Returns the body and its `ETag`.
    pub fn ard_manifest(&self) -> (Arc<Vec<u8>>, String) {
        let c = self.documents();
        (c.ard_body, c.ard_etag)
    }

    fn documents(&self) -> CachedCatalog {
        let base = self.base_url();
        let index = self.inner.index.read();
        if let Some(c) = self.inner.catalog.lock().as_ref() {
            if c.revision == index.revision && c.base == base {
                return c.clone();
            }
        }
        let domain = domain_of(&base);
        let name = &self.inner.config.name;
        let examples: Vec<String> = crate::agent::card(name)
            .skills
            .iter()
            .flat_map(|s| s.examples.iter().cloned())
            .take(5)
            .collect();
        let mut entries = vec![
            json!({
                "identifier": self.own_identifier(),
                "displayName": name,
                "type": REGISTRY_TYPE,
                "url": base,
                "description": "Search, list and explore the A2A agents registered here (the ARD API), and route a request to the skill that fits it.",
                "tags": ["registry", "search", "a2a"],
                "representativeQueries": examples,
            }),
            json!({
                "identifier": format!("urn:air:{domain}:agent:{}", slug(name)),
                "displayName": name,
                "type": A2A_CARD_TYPE,
                "url": format!("{}{}", base.trim_end_matches('/'), agentwire_types::AGENT_CARD_PATH),
                "description": "The registry as an A2A agent: ask it in words which agent can do something (skill find-agent).",
                "capabilities": [crate::agent::FIND_AGENT],
                "representativeQueries": examples,
            }),
        ];
        let mut live: Vec<&Arc<Indexed>> = index
            .all()
            .filter(|e| e.record.fetch.status == Status::Active)
            .collect();
        live.sort_by(|a, b| a.record.identifier.cmp(&b.record.identifier));
        for e in live {
            entries.push(serde_json::to_value(&e.entry).unwrap_or_default());
        }
        let ard = serde_json::to_vec(&json!({ "entries": entries })).unwrap_or_default();
        let doc = json!({
            "specVersion": "1.0",
            "host": {"displayName": name},
            "entries": entries,
        });
        let body = Arc::new(serde_json::to_vec(&doc).unwrap_or_default());
        let etag = format!("\"{}\"", hash_hex(&body));
        let ard_etag = format!("\"{}\"", hash_hex(&ard));
        let cached = CachedCatalog {
            revision: index.revision,
            base,
            body,
            etag,
            ard_body: Arc::new(ard),
            ard_etag,
        };
        *self.inner.catalog.lock() = Some(cached.clone());
        cached
    }

    /// Runs the background work until the returned handle is dropped:
    /// refreshing due cards and reading other replicas' changes.
    pub fn spawn_background(&self) -> BackgroundHandle {
        let me = self.clone();
        let task = tokio::spawn(async move {
            let policy = me.inner.config.refresh.clone();
            let mut tick = tokio::time::interval(policy.tick);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut last_sync = tokio::time::Instant::now();
            loop {
                tick.tick().await;
                if last_sync.elapsed() >= policy.sync_interval {
                    last_sync = tokio::time::Instant::now();
                    if let Err(e) = me.sync().await {
                        tracing::warn!(error = %e, "reading the store's changes failed");
                    }
                }
                me.refresh_due();
            }
        });
        BackgroundHandle { task }
    }

    /// Starts a refresh of every by-reference entry that is due and not
    /// being fetched already (at most one fetch per agent at a time, at
    /// most `concurrency` at once).
    pub fn refresh_due(&self) {
        let now = now_ms();
        let due: Vec<String> = self
            .inner
            .schedule
            .lock()
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            if !self.inner.inflight.lock().insert(id.clone()) {
                continue;
            }
            let me = self.clone();
            tokio::spawn(async move {
                me.refresh_one(&id).await;
                me.inner.inflight.lock().remove(&id);
            });
        }
    }

    /// Refreshes one entry now (whether due or not), unless a fetch of it
    /// is under way (here or, with a shared store, on another replica).
    pub async fn refresh_one(&self, id: &str) {
        let Ok(_permit) = Arc::clone(&self.inner.permits).acquire_owned().await else {
            return;
        };
        let policy = self.inner.config.refresh.clone();
        let Some(current) = self.inner.index.read().get(id) else {
            self.inner.schedule.lock().remove(id);
            return;
        };
        let Source::Url(url) = &current.record.source else {
            self.inner.schedule.lock().remove(id);
            return;
        };
        let now = now_ms();
        let lease = now + ms(policy.timeout) + 5_000;
        match self.inner.store.claim_fetch(id, now, lease).await {
            Ok(true) => {}
            Ok(false) => {
                // Another replica is fetching it: look again later.
                self.inner
                    .schedule
                    .lock()
                    .insert(id.to_owned(), now + ms(policy.min_interval));
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot claim a card refresh");
                self.inner
                    .schedule
                    .lock()
                    .insert(id.to_owned(), now + ms(policy.min_interval));
                return;
            }
        }
        let old = &current.record;
        let result = self
            .fetch(
                url,
                old.fetch.etag.as_deref(),
                old.fetch.last_modified.as_deref(),
            )
            .await;
        let mut rec = old.clone();
        let now = now_ms();
        let mut changed = false;
        let next;
        match result {
            Ok(Fetched::NotModified { ttl }) => {
                next = now + ms(ttl);
                changed |= rec.fetch.status != Status::Active || rec.fetch.failures != 0;
                rec.fetch.status = Status::Active;
                rec.fetch.failures = 0;
                rec.fetch.last_error = None;
            }
            Ok(Fetched::Card {
                card,
                etag,
                last_modified,
                ttl,
            }) => match read_card(&card) {
                Ok((_, warnings)) => {
                    next = now + ms(ttl);
                    changed |= rec.fetch.status != Status::Active
                        || rec.fetch.failures != 0
                        || card != rec.card
                        || etag != rec.fetch.etag;
                    if card != rec.card {
                        tracing::info!(identifier = %id, "the agent card changed: re-indexed");
                        rec.signature = self.inner.verifier.verify(&card).describe();
                        rec.card = card;
                        rec.warnings = warnings;
                        rec.updated_at = now_rfc3339();
                    }
                    rec.fetch.etag = etag;
                    rec.fetch.last_modified = last_modified;
                    rec.fetch.status = Status::Active;
                    rec.fetch.failures = 0;
                    rec.fetch.last_error = None;
                }
                Err(p) => {
                    next = self.fail(
                        &mut rec,
                        &format!("the agent card is no longer valid: {p}"),
                        &policy,
                    );
                    changed = true;
                }
            },
            Err(e) => {
                next = self.fail(&mut rec, &e, &policy);
                changed = true;
            }
        }
        rec.fetch.next_check_ms = next;
        if changed {
            rec.fetch.checked_at = Some(now_rfc3339());
            let mut indexed = self.build_indexed(rec, 0, true);
            match self
                .inner
                .store
                .update(&indexed.record, current.revision)
                .await
            {
                Ok(Some(rev)) => {
                    indexed.revision = rev;
                    self.put_indexed(indexed);
                }
                Ok(None) => {} // withdrawn or republished meanwhile
                Err(e) => tracing::warn!(error = %e, "cannot store a refreshed card"),
            }
        }
        if self.inner.index.read().get(id).is_some() {
            self.inner.schedule.lock().insert(id.to_owned(), next);
        }
        if let Err(e) = self.inner.store.release_fetch(id).await {
            tracing::warn!(error = %e, "cannot release a card refresh claim");
        }
    }

    /// Records a failed fetch; returns when to try again (backing off).
    fn fail(&self, rec: &mut Record, error: &str, policy: &RefreshPolicy) -> i64 {
        rec.fetch.failures = rec.fetch.failures.saturating_add(1);
        rec.fetch.last_error = Some(error.to_owned());
        if rec.fetch.failures >= policy.unreachable_after.max(1) {
            if rec.fetch.status != Status::Unreachable {
                tracing::warn!(identifier = %rec.identifier, error, "agent unreachable: left out of search");
            }
            rec.fetch.status = Status::Unreachable;
        }
        let factor = 1u32 << rec.fetch.failures.min(10);
        let wait = policy
            .min_interval
            .saturating_mul(factor)
            .min(policy.max_interval.max(policy.min_interval));
        now_ms() + ms(wait)
    }
}

/// The URLs of a manifest, from what a user typed: a URL ending in `.json`
/// as it is, otherwise its `/.well-known/ard.json` (ARD v0.91) then its
/// `/.well-known/ai-catalog.json` (v0.9).
fn catalog_urls(input: &str) -> Result<Vec<String>, ApiError> {
    let input = input.trim();
    let with_scheme = if input.contains("://") {
        input.to_owned()
    } else {
        format!("http://{input}")
    };
    let mut url = reqwest::Url::parse(&with_scheme)
        .map_err(|e| ApiError::invalid(format!("invalid catalog URL {input:?}: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ApiError::invalid(format!(
            "catalog URL {input:?} must be http(s)"
        )));
    }
    if url.path().ends_with(".json") {
        return Ok(vec![url.into()]);
    }
    let dir = url.path().trim_end_matches('/').to_owned();
    let mut urls = Vec::new();
    for well_known in [ARD_PATH, CATALOG_PATH] {
        url.set_path(&format!("{dir}{well_known}"));
        urls.push(url.to_string());
    }
    Ok(urls)
}

fn source_url(source: &Source) -> Option<&str> {
    match source {
        Source::Url(u) => Some(u),
        Source::Value => None,
    }
}

fn page_size(given: Option<u32>, default: usize) -> Result<usize, ApiError> {
    match given {
        None => Ok(default),
        Some(n) if (1..=100).contains(&n) => Ok(n as usize),
        Some(n) => Err(ApiError::invalid(format!("pageSize {n}: take 1 to 100"))),
    }
}

/// `orderBy`: comma-separated keys, each optionally `ASC` or `DESC`
/// (`displayName`, `createdAt`, `updatedAt`, `identifier`, `version`; also
/// `name`, `created_at`, `updated_at`).
fn parse_order(s: &str) -> Result<Vec<(String, bool)>, ApiError> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let mut words = part.split_whitespace();
        let key = words.next().unwrap_or_default();
        let desc = match words.next().map(str::to_ascii_uppercase).as_deref() {
            None | Some("ASC") => false,
            Some("DESC") => true,
            Some(other) => {
                return Err(ApiError::invalid(format!(
                    "orderBy {part:?}: {other} is neither ASC nor DESC"
                )));
            }
        };
        let key = match key {
            "displayName" | "name" => "displayName",
            "createdAt" | "created_at" => "createdAt",
            "updatedAt" | "updated_at" => "updatedAt",
            "identifier" | "id" => "identifier",
            "version" => "version",
            other => {
                return Err(ApiError::invalid(format!(
                    "orderBy: cannot sort by {other:?} (use displayName, createdAt, updatedAt, identifier or version)"
                )));
            }
        };
        out.push((key.to_owned(), desc));
    }
    Ok(out)
}

/// Works through the backlog of entries to embed, one at a time, until it
/// is empty (or the registry is dropped).
async fn embed_backlog(inner: Weak<Inner>) {
    let mut done = 0usize;
    let started = std::time::Instant::now();
    loop {
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let me = Registry { inner };
        let next = {
            let mut b = me.inner.backlog.lock();
            let next = b.queue.pop_front();
            b.running = next.is_some();
            me.inner
                .pending
                .send_replace(b.queue.len() + usize::from(next.is_some()));
            next
        };
        let Some(id) = next else {
            tracing::info!(
                agents = done,
                seconds = started.elapsed().as_secs_f64(),
                "the skills' vectors of the backlog are computed"
            );
            return;
        };
        me.embed_one(&id).await;
        done += 1;
    }
}

/// Stops the background work when dropped.
pub struct BackgroundHandle {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for BackgroundHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_control_bounds_the_refresh_interval() {
        let p = RefreshPolicy {
            min_interval: Duration::from_secs(10),
            max_interval: Duration::from_secs(100),
            default_interval: Duration::from_secs(50),
            ..Default::default()
        };
        let mut h = http::HeaderMap::new();
        assert_eq!(ttl_of(&h, &p), Duration::from_secs(50));
        h.insert(
            http::header::CACHE_CONTROL,
            "public, max-age=30".parse().unwrap(),
        );
        assert_eq!(ttl_of(&h, &p), Duration::from_secs(30));
        h.insert(
            http::header::CACHE_CONTROL,
            "max-age=100000".parse().unwrap(),
        );
        assert_eq!(ttl_of(&h, &p), Duration::from_secs(100));
        h.insert(http::header::CACHE_CONTROL, "no-cache".parse().unwrap());
        assert_eq!(ttl_of(&h, &p), Duration::from_secs(10));
    }

    #[test]
    fn page_tokens_belong_to_their_query() {
        let t = encode_token(20, "abc");
        assert_eq!(decode_token(&t, "abc").unwrap(), 20);
        assert!(decode_token(&t, "other").is_err());
        assert!(decode_token("garbage!", "abc").is_err());
    }

    #[test]
    fn orders() {
        assert_eq!(
            parse_order("name, created_at DESC").unwrap(),
            [
                ("displayName".to_owned(), false),
                ("createdAt".to_owned(), true)
            ]
        );
        assert!(parse_order("colour").is_err());
        assert!(parse_order("name UP").is_err());
    }
}
