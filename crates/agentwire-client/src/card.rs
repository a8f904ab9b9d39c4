//! Finding an Agent Card (spec 8.2): from the well-known URI of a host or
//! origin, from a direct card URL, or from a file (direct configuration).
//!
//! - [`fetch_agent_card`]: one GET, no cache.
//! - [`CardResolver`]: resolves any reference (`localhost:8080`,
//!   `https://agent.example`, `https://x/card.json`, `./card.json`,
//!   `file:///etc/agent.json`), honours HTTP caching (spec 8.6:
//!   `Cache-Control: max-age`, `no-cache`, `no-store`; a stale card is
//!   revalidated with `If-None-Match` / `If-Modified-Since`), optionally
//!   keeps its cache on disk between processes, and replaces a cached
//!   public card by the agent's extended card once fetched with credentials
//!   ([`CardResolver::fetch_extended`]). [`CacheMode`] bypasses the cache
//!   ([`CacheMode::Reload`]) or revalidates even a fresh card
//!   ([`CacheMode::Revalidate`], [`CardResolver::revalidate`]).
//!
//! A 0.x card (top-level `url`, no `supportedInterfaces`) is recognised and
//! refused with a clear [`ClientError::NoCompatibleInterface`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentwire_types::jws;
use agentwire_types::{AGENT_CARD_PATH, AgentCard, GetExtendedAgentCardRequest};
use serde_json::Value;

use crate::error::{ClientError, ClientResult, truncate_body};
use crate::http::{
    MAX_ERROR_BODY, default_http_client, map_reqwest_error, read_body, read_body_max,
    service_headers,
};

/// The largest agent card accepted by default: 1 MiB, as the registry
/// (`agentwire-registry`) accepts. A card lists interfaces, skills and
/// security schemes: a large one is tens of kilobytes. Reading stops at
/// the limit with [`ClientError::ResponseTooLarge`]; set it with
/// [`CardResolver::with_max_card_bytes`] or
/// [`crate::ClientBuilder::max_card_bytes`].
pub const DEFAULT_MAX_CARD_BYTES: usize = 1 << 20;
use crate::transport::{Binding, CallOptions};

/// The URL to fetch a card from, given what a user typed:
///
/// - a URL whose path ends in `.json` is used as it is;
/// - otherwise the well-known path is appended to the URL's path (an origin
///   gives `{origin}/.well-known/agent-card.json`; an agent mounted under a
///   prefix gives `{origin}/{prefix}/.well-known/agent-card.json`);
/// - without a scheme (`localhost:8080`, `10.0.0.5:9000/agent`), `http://`
///   is assumed.
///
/// ```
/// use agentwire_client::card::agent_card_url;
/// assert_eq!(
///     agent_card_url("localhost:8080").unwrap(),
///     "http://localhost:8080/.well-known/agent-card.json"
/// );
/// assert_eq!(
///     agent_card_url("https://agents.example.com/cards/echo.json").unwrap(),
///     "https://agents.example.com/cards/echo.json"
/// );
/// ```
pub fn agent_card_url(input: &str) -> ClientResult<String> {
    let input = input.trim();
    if input.is_empty() {
        return Err(ClientError::InvalidRequest("empty agent URL".into()));
    }
    let with_scheme = if input.contains("://") {
        input.to_owned()
    } else {
        format!("http://{input}")
    };
    let mut url = reqwest::Url::parse(&with_scheme)
        .map_err(|e| ClientError::InvalidRequest(format!("invalid agent URL {input:?}: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ClientError::InvalidRequest(format!(
            "agent URL {input:?} must be http:// or https://"
        )));
    }
    if url.path().ends_with(".json") {
        return Ok(url.into());
    }
    url.set_fragment(None);
    url.set_query(None);
    let path = format!("{}{AGENT_CARD_PATH}", url.path().trim_end_matches('/'));
    url.set_path(&path);
    Ok(url.into())
}

/// Fetches and decodes an agent card with the default HTTP client.
///
/// `url` is an origin, a base URL or a card URL (see [`agent_card_url`]).
/// A card of an A2A 0.x agent (a top-level `url`, no `supportedInterfaces`)
/// is refused with [`ClientError::NoCompatibleInterface`].
///
/// ```no_run
/// # async fn demo() -> Result<(), agentwire_client::ClientError> {
/// let card = agentwire_client::fetch_agent_card("http://127.0.0.1:8080").await?;
/// println!("{} {}", card.name, card.version);
/// # Ok(()) }
/// ```
pub async fn fetch_agent_card(url: &str) -> ClientResult<AgentCard> {
    fetch_agent_card_with(&default_http_client(), url, &CallOptions::new()).await
}

/// Fetches a card with a given HTTP client and options (service parameters
/// such as `Authorization` are sent as headers; the timeout bounds the GET).
/// A card larger than [`DEFAULT_MAX_CARD_BYTES`] is refused.
pub async fn fetch_agent_card_with(
    http: &reqwest::Client,
    url: &str,
    options: &CallOptions,
) -> ClientResult<AgentCard> {
    fetch_agent_card_max(http, url, options, DEFAULT_MAX_CARD_BYTES).await
}

/// [`fetch_agent_card_with`], refusing a card larger than `max_bytes`.
pub async fn fetch_agent_card_max(
    http: &reqwest::Client,
    url: &str,
    options: &CallOptions,
    max_bytes: usize,
) -> ClientResult<AgentCard> {
    let card_url = agent_card_url(url)?;
    let mut rb = http
        .get(&card_url)
        .headers(service_headers(options)?)
        .header(http::header::ACCEPT, "application/json");
    if let Some(t) = options.timeout {
        rb = rb.timeout(t);
    }
    let resp = rb
        .send()
        .await
        .map_err(|e| map_reqwest_error(e, &card_url))?;
    let status = resp.status();
    let body = read_body_max(resp, &card_url, max_bytes, "the agent card").await?;
    if !status.is_success() {
        return Err(card_http_error(&card_url, status.as_u16(), &body));
    }
    parse_card_at(&card_url, &body)
}

fn card_http_error(card_url: &str, status: u16, body: &[u8]) -> ClientError {
    if matches!(status, 404 | 410) {
        return ClientError::CardNotFound {
            location: card_url.to_owned(),
            message: format!("HTTP {status}"),
        };
    }
    ClientError::Http {
        status,
        body: truncate_body(body, MAX_ERROR_BODY),
    }
}

fn parse_card_at(location: &str, body: &[u8]) -> ClientResult<AgentCard> {
    parse_agent_card(body).map_err(|e| match e {
        ClientError::InvalidResponse(m) => {
            ClientError::InvalidResponse(format!("agent card at {location}: {m}"))
        }
        other => other,
    })
}

/// Where an agent card reference points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CardLocation {
    /// An HTTP(S) URL to GET (the well-known path already appended).
    Url(String),
    /// A local file.
    File(PathBuf),
}

/// Classifies a card reference as the `a2a` command's `--agent-card` does:
///
/// - `file://...` is a file; so is anything that exists on disk, and a
///   path starting with `/`, `./`, `../` or `~/`;
/// - anything else is a host, an origin or a URL (see [`agent_card_url`]).
///
/// ```
/// use agentwire_client::card::{CardLocation, card_location};
/// assert_eq!(
///     card_location("localhost:9999").unwrap(),
///     CardLocation::Url("http://localhost:9999/.well-known/agent-card.json".into())
/// );
/// assert!(matches!(card_location("file:///tmp/card.json").unwrap(), CardLocation::File(_)));
/// assert!(matches!(card_location("./card.json").unwrap(), CardLocation::File(_)));
/// ```
pub fn card_location(reference: &str) -> ClientResult<CardLocation> {
    let r = reference.trim();
    if r.is_empty() {
        return Err(ClientError::InvalidRequest(
            "empty agent card reference".into(),
        ));
    }
    if let Some(path) = r.strip_prefix("file://") {
        return Ok(CardLocation::File(PathBuf::from(path)));
    }
    if !r.contains("://") {
        let looks_like_path = r.starts_with('/')
            || r.starts_with("./")
            || r.starts_with("../")
            || r.starts_with("~/")
            || r.starts_with('.');
        if looks_like_path || Path::new(r).is_file() {
            let path = match r.strip_prefix("~/") {
                Some(rest) => std::env::var_os("HOME")
                    .map_or_else(|| PathBuf::from(r), |h| PathBuf::from(h).join(rest)),
                None => PathBuf::from(r),
            };
            return Ok(CardLocation::File(path));
        }
    }
    agent_card_url(r).map(CardLocation::Url)
}

/// Reads an agent card from a file (direct configuration, spec 8.2).
pub fn read_agent_card_file(path: &Path) -> ClientResult<AgentCard> {
    let location = path.display().to_string();
    let body = std::fs::read(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            ClientError::CardNotFound {
                location: location.clone(),
                message: "no such file".into(),
            }
        } else {
            ClientError::InvalidRequest(format!("cannot read agent card {location}: {e}"))
        }
    })?;
    parse_card_at(&location, &body)
}

/// How [`CardResolver::resolve`] obtained a card.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CardOrigin {
    /// Fetched over HTTP (no usable cache entry).
    Fetched,
    /// Served from the cache, still fresh (`max-age`).
    Cached,
    /// The cache entry was revalidated (`304 Not Modified`).
    Revalidated,
    /// Read from a file.
    File,
    /// The extended card fetched with credentials, kept in memory.
    Extended,
}

/// A resolved card and where it came from.
#[derive(Debug, Clone)]
pub struct ResolvedCard {
    /// The card.
    pub card: AgentCard,
    /// The URL it was fetched from, or the file it was read from.
    pub location: String,
    /// How it was obtained.
    pub origin: CardOrigin,
}

/// How [`CardResolver`] uses its cache for one resolution (the modes of
/// the same names in HTTP caching).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CacheMode {
    /// A fresh cached card (within its `max-age`) is used without a
    /// request; a stale one is revalidated with a conditional request
    /// (`If-None-Match` with its `ETag`, `If-Modified-Since` with its
    /// `Last-Modified`), which a `304 Not Modified` confirms.
    #[default]
    Default,
    /// Even a fresh cached card is revalidated with a conditional request
    /// before use: one round trip, no download while it is unchanged. An
    /// extended card is kept when the public card is unchanged.
    Revalidate,
    /// The cache is not read: the card is fetched with an unconditional
    /// request, and the answer replaces what was cached (an extended card
    /// too).
    Reload,
}

#[derive(Debug, Clone)]
struct CacheEntry {
    card: AgentCard,
    /// The raw body (persisted in the disk cache).
    body: Option<Value>,
    /// Validators of the public card (for an extended card: of the public
    /// card it was fetched beside).
    etag: Option<String>,
    last_modified: Option<String>,
    /// Fresh until then (`None`: revalidate every time).
    fresh_until: Option<SystemTime>,
    extended: bool,
}

/// What `Cache-Control` allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CachePolicy {
    store: bool,
    max_age: Option<Duration>,
}

fn cache_policy(headers: &http::HeaderMap) -> CachePolicy {
    let mut policy = CachePolicy {
        store: true,
        max_age: None,
    };
    for value in headers.get_all(http::header::CACHE_CONTROL) {
        let Ok(value) = value.to_str() else { continue };
        for directive in value.split(',') {
            let d = directive.trim().to_ascii_lowercase();
            if d == "no-store" {
                policy.store = false;
            } else if d == "no-cache" {
                policy.max_age = Some(Duration::ZERO);
            } else if let Some(n) = d.strip_prefix("max-age=") {
                if let Ok(secs) = n.trim_matches('"').parse::<u64>() {
                    policy.max_age = Some(policy.max_age.map_or(Duration::from_secs(secs), |m| {
                        m.min(Duration::from_secs(secs))
                    }));
                }
            }
        }
    }
    policy
}

/// Resolves card references with an HTTP cache (spec 8.6).
///
/// Cheap to clone; clones share the cache.
///
/// ```no_run
/// # async fn demo() -> Result<(), agentwire_client::ClientError> {
/// use agentwire_client::card::{CacheMode, CardOrigin, CardResolver};
/// let resolver = CardResolver::new();
/// let first = resolver.resolve("localhost:8080").await?;
/// assert_eq!(first.origin, CardOrigin::Fetched);
/// // Within the card's max-age no request is made at all; after it (or
/// // at once with `Cache-Control: no-cache`), the card is revalidated
/// // with If-None-Match / If-Modified-Since.
/// let again = resolver.resolve("localhost:8080").await?;
/// println!("{} ({:?})", again.card.name, again.origin);
/// // Before acting on what a cached card lacks: make sure it is current.
/// if !again.card.supports_streaming() && again.origin == CardOrigin::Cached {
///     let current = resolver.revalidate("localhost:8080").await?;
///     println!("streaming: {}", current.card.supports_streaming());
/// }
/// // Or ignore the cache altogether.
/// let fresh = resolver.resolve_with("localhost:8080", CacheMode::Reload).await?;
/// assert_eq!(fresh.origin, CardOrigin::Fetched);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct CardResolver {
    http: reqwest::Client,
    entries: Arc<Mutex<HashMap<String, CacheEntry>>>,
    cache_dir: Option<PathBuf>,
    timeout: Option<Duration>,
    mode: CacheMode,
    max_card_bytes: usize,
}

impl Default for CardResolver {
    fn default() -> Self {
        Self::new()
    }
}

impl CardResolver {
    /// A resolver with the default HTTP client and an in-memory cache.
    pub fn new() -> Self {
        Self {
            http: default_http_client(),
            entries: Arc::default(),
            cache_dir: None,
            timeout: None,
            mode: CacheMode::Default,
            max_card_bytes: DEFAULT_MAX_CARD_BYTES,
        }
    }

    /// The largest card accepted (default [`DEFAULT_MAX_CARD_BYTES`],
    /// 1 MiB): the body is read as it arrives and reading stops with
    /// [`ClientError::ResponseTooLarge`] once it passes the limit (at once
    /// when its `Content-Length` does).
    pub fn with_max_card_bytes(mut self, max: usize) -> Self {
        self.max_card_bytes = max;
        self
    }

    /// Uses this HTTP client.
    pub fn with_http_client(mut self, http: reqwest::Client) -> Self {
        self.http = http;
        self
    }

    /// Also keeps public cards (with their `ETag` and freshness) as files in
    /// `dir`, so separate processes share the cache. Extended cards are
    /// never written to disk.
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Bounds each card request.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// How [`Self::resolve`] and [`Self::fetch_url`] use the cache (default
    /// [`CacheMode::Default`]); [`CacheMode::Reload`] bypasses it.
    pub fn with_cache_mode(mut self, mode: CacheMode) -> Self {
        self.mode = mode;
        self
    }

    /// Resolves a reference (see [`card_location`]).
    pub async fn resolve(&self, reference: &str) -> ClientResult<ResolvedCard> {
        self.resolve_with(reference, self.mode).await
    }

    /// Resolves a reference, using the cache as `mode` says (a file is
    /// read in every mode).
    pub async fn resolve_with(
        &self,
        reference: &str,
        mode: CacheMode,
    ) -> ClientResult<ResolvedCard> {
        match card_location(reference)? {
            CardLocation::File(path) => Ok(ResolvedCard {
                card: read_agent_card_file(&path)?,
                location: path.display().to_string(),
                origin: CardOrigin::File,
            }),
            CardLocation::Url(url) => self.fetch_url_with(&url, mode).await,
        }
    }

    /// Resolves a reference and makes sure the card is current: a cached
    /// card is revalidated even when still fresh ([`CacheMode::Revalidate`]).
    /// Use it before refusing an operation because a cached card does not
    /// declare it: the agent may have changed since.
    pub async fn revalidate(&self, reference: &str) -> ClientResult<ResolvedCard> {
        self.resolve_with(reference, CacheMode::Revalidate).await
    }

    /// The card at a card URL, from the cache when it allows.
    pub async fn fetch_url(&self, url: &str) -> ClientResult<ResolvedCard> {
        self.fetch_url_with(url, self.mode).await
    }

    /// The card at a card URL, using the cache as `mode` says.
    pub async fn fetch_url_with(&self, url: &str, mode: CacheMode) -> ClientResult<ResolvedCard> {
        let cached = match mode {
            CacheMode::Reload => None,
            CacheMode::Default | CacheMode::Revalidate => self.entry(url),
        };
        if let (Some(e), CacheMode::Default) = (&cached, mode) {
            let fresh = e.extended || e.fresh_until.is_some_and(|t| SystemTime::now() < t);
            if fresh {
                return Ok(ResolvedCard {
                    card: e.card.clone(),
                    location: url.to_owned(),
                    origin: if e.extended {
                        CardOrigin::Extended
                    } else {
                        CardOrigin::Cached
                    },
                });
            }
        }
        // The version (spec 3.6.1): an agent that also serves 0.3 clients
        // answers a request without one with its card for them.
        let mut rb = self
            .http
            .get(url)
            .header(http::header::ACCEPT, "application/json")
            .header("a2a-version", agentwire_types::PROTOCOL_VERSION);
        if let Some(etag) = cached.as_ref().and_then(|e| e.etag.as_deref()) {
            rb = rb.header(http::header::IF_NONE_MATCH, etag);
        }
        if let Some(date) = cached.as_ref().and_then(|e| e.last_modified.as_deref()) {
            rb = rb.header(http::header::IF_MODIFIED_SINCE, date);
        }
        if let Some(t) = self.timeout {
            rb = rb.timeout(t);
        }
        let resp = rb.send().await.map_err(|e| map_reqwest_error(e, url))?;
        let status = resp.status();
        let policy = cache_policy(resp.headers());
        let header = |name: http::header::HeaderName| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let etag = header(http::header::ETAG);
        let last_modified = header(http::header::LAST_MODIFIED);
        let fresh_until = policy.max_age.map(|a| SystemTime::now() + a);
        if status == reqwest::StatusCode::NOT_MODIFIED {
            if let Some(mut e) = cached {
                e.fresh_until = fresh_until;
                if etag.is_some() {
                    e.etag = etag;
                }
                if last_modified.is_some() {
                    e.last_modified = last_modified;
                }
                let card = e.card.clone();
                let origin = if e.extended {
                    CardOrigin::Extended
                } else {
                    CardOrigin::Revalidated
                };
                self.store(url, e, policy.store);
                return Ok(ResolvedCard {
                    card,
                    location: url.to_owned(),
                    origin,
                });
            }
            return Err(ClientError::invalid_response(format!(
                "{url} answered 304 Not Modified to a request that was not conditional"
            )));
        }
        let body = read_body_max(resp, url, self.max_card_bytes, "the agent card").await?;
        if !status.is_success() {
            return Err(card_http_error(url, status.as_u16(), &body));
        }
        let card = parse_card_at(url, &body)?;
        let entry = CacheEntry {
            card: card.clone(),
            body: serde_json::from_slice(&body).ok(),
            etag,
            last_modified,
            fresh_until,
            extended: false,
        };
        self.store(url, entry, policy.store);
        Ok(ResolvedCard {
            card,
            location: url.to_owned(),
            origin: CardOrigin::Fetched,
        })
    }

    /// Fetches the extended card through `transport` (spec 3.1.11; the
    /// caller passes the credentials in `options`) and caches it in memory
    /// in place of the public card of `reference`, so later resolutions of
    /// that reference in this process see the extended card.
    pub async fn fetch_extended<T: crate::Transport + ?Sized>(
        &self,
        reference: &str,
        transport: &T,
        options: &CallOptions,
    ) -> ClientResult<AgentCard> {
        let card = transport
            .get_extended_agent_card(GetExtendedAgentCardRequest::default(), options)
            .await?;
        if let Ok(CardLocation::Url(url)) = card_location(reference) {
            // The public card's validators stay: revalidating them tells
            // whether the agent (and so its extended card) changed.
            let public = self.entry(&url);
            if let Ok(mut map) = self.entries.lock() {
                map.insert(
                    url,
                    CacheEntry {
                        card: card.clone(),
                        body: None,
                        etag: public.as_ref().and_then(|e| e.etag.clone()),
                        last_modified: public.and_then(|e| e.last_modified),
                        fresh_until: None,
                        extended: true,
                    },
                );
            }
        }
        Ok(card)
    }

    /// Forgets what is cached for a reference (memory and disk).
    pub fn invalidate(&self, reference: &str) {
        if let Ok(CardLocation::Url(url)) = card_location(reference) {
            if let Ok(mut map) = self.entries.lock() {
                map.remove(&url);
            }
            if let Some(path) = self.disk_path(&url) {
                let _ = std::fs::remove_file(path);
            }
        }
    }

    fn entry(&self, url: &str) -> Option<CacheEntry> {
        if let Some(e) = self.entries.lock().ok()?.get(url) {
            return Some(e.clone());
        }
        let e = self.read_disk(url)?;
        if let Ok(mut map) = self.entries.lock() {
            map.insert(url.to_owned(), e.clone());
        }
        Some(e)
    }

    fn store(&self, url: &str, entry: CacheEntry, allowed: bool) {
        if !allowed {
            if let Ok(mut map) = self.entries.lock() {
                map.remove(url);
            }
            if let Some(path) = self.disk_path(url) {
                let _ = std::fs::remove_file(path);
            }
            return;
        }
        self.write_disk(url, &entry);
        if let Ok(mut map) = self.entries.lock() {
            map.insert(url.to_owned(), entry);
        }
    }

    fn disk_path(&self, url: &str) -> Option<PathBuf> {
        let dir = self.cache_dir.as_ref()?;
        let name: String = url
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        Some(dir.join(format!("{name}.json")))
    }

    fn read_disk(&self, url: &str) -> Option<CacheEntry> {
        let path = self.disk_path(url)?;
        let raw: Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
        if raw.get("url")?.as_str()? != url {
            return None;
        }
        let body = raw.get("card")?.clone();
        let card = parse_agent_card(&serde_json::to_vec(&body).ok()?).ok()?;
        Some(CacheEntry {
            card,
            body: Some(body),
            etag: raw.get("etag").and_then(Value::as_str).map(str::to_owned),
            last_modified: raw
                .get("lastModified")
                .and_then(Value::as_str)
                .map(str::to_owned),
            fresh_until: raw
                .get("freshUntil")
                .and_then(Value::as_u64)
                .map(|s| UNIX_EPOCH + Duration::from_secs(s)),
            extended: false,
        })
    }

    fn write_disk(&self, url: &str, entry: &CacheEntry) {
        let (Some(path), Some(body)) = (self.disk_path(url), &entry.body) else {
            return;
        };
        if entry.extended {
            return;
        }
        let fresh = entry
            .fresh_until
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_secs());
        let doc = serde_json::json!({
            "url": url, "etag": entry.etag, "lastModified": entry.last_modified,
            "freshUntil": fresh, "card": body,
        });
        if let Some(dir) = path.parent() {
            if std::fs::create_dir_all(dir).is_err() {
                return;
            }
        }
        if let Ok(bytes) = serde_json::to_vec(&doc) {
            // Best effort: a cache that cannot be written is only slower.
            let tmp = path.with_extension("tmp");
            if std::fs::write(&tmp, bytes).is_ok() {
                let _ = std::fs::rename(&tmp, &path);
            }
        }
    }
}

/// A 0.3 card (top-level `url`, `preferredTransport`,
/// `additionalInterfaces`) as a 1.0 card document: its interfaces become
/// `supportedInterfaces` with protocol version 0.3 (the preferred one
/// first), which the client uses only when allowed
/// ([`crate::ClientBuilder::allow_v03`]). The security schemes and
/// requirements (card and skills) are converted ([`v03_security_as_v1`]), so
/// credentials are attached as the card says, as for a 1.0 card. The
/// signatures are left out: they sign the 0.3 document, not this one.
fn v03_card_as_v1(mut value: Value) -> Value {
    let Some(obj) = value.as_object_mut() else {
        return value;
    };
    let version = obj
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or("0.3")
        .to_owned();
    let url = obj
        .get("url")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let preferred = obj
        .get("preferredTransport")
        .and_then(Value::as_str)
        .unwrap_or("JSONRPC")
        .to_owned();
    let mut interfaces = vec![serde_json::json!({
        "url": url, "protocolBinding": preferred, "protocolVersion": version,
    })];
    if let Some(extra) = obj.get("additionalInterfaces").and_then(Value::as_array) {
        for i in extra {
            let (Some(u), Some(t)) = (
                i.get("url").and_then(Value::as_str),
                i.get("transport").and_then(Value::as_str),
            ) else {
                continue;
            };
            if u == url && t.eq_ignore_ascii_case(&preferred) {
                continue;
            }
            interfaces.push(serde_json::json!({
                "url": u, "protocolBinding": t, "protocolVersion": version,
            }));
        }
    }
    obj.remove("signatures");
    v03_security_as_v1(obj);
    if let Some(Value::Array(skills)) = obj.get_mut("skills") {
        for skill in skills.iter_mut().filter_map(Value::as_object_mut) {
            v03_security_as_v1(skill);
        }
    }
    obj.insert("supportedInterfaces".into(), Value::Array(interfaces));
    value
}

/// The 0.3 security members of a card (or a skill) in their 1.0 form:
///
/// - `security` (`[{"scheme": ["scope", ...]}]`, or the protobuf form
///   `[{"schemes": {"scheme": {"list": [...]}}}]` a 0.3 gRPC card has)
///   becomes `securityRequirements` (`[{"schemes": {"scheme": {"list":
///   [...]}}}]`);
/// - each of `securitySchemes`, an OpenAPI-style object with a `type`
///   (`apiKey` with `in` and `name`, `http` with `scheme` and
///   `bearerFormat`, `oauth2` with `flows` and `oauth2MetadataUrl`,
///   `openIdConnect` with `openIdConnectUrl`, `mutualTLS`), becomes the 1.0
///   wrapper (`{"apiKeySecurityScheme": {"location", "name"}}`...); a
///   scheme already in the wrapper form (a 0.3 gRPC card, or a card
///   carrying both forms) keeps only the wrapper. 1.0 has one OAuth flow
///   per scheme: the first of `authorizationCode`, `clientCredentials`,
///   `implicit`, `password` is kept. A scheme of an unknown type is left
///   out.
fn v03_security_as_v1(obj: &mut serde_json::Map<String, Value>) {
    if let Some(Value::Array(reqs)) = obj.remove("security") {
        let reqs: Vec<Value> = reqs
            .into_iter()
            .filter_map(|r| match r {
                Value::Object(mut r) => Some(match r.remove("schemes") {
                    Some(schemes @ Value::Object(_)) => serde_json::json!({ "schemes": schemes }),
                    _ => {
                        let schemes: serde_json::Map<String, Value> = r
                            .into_iter()
                            .map(|(name, scopes)| {
                                let list = if scopes.is_array() {
                                    scopes
                                } else {
                                    Value::Array(vec![])
                                };
                                (name, serde_json::json!({ "list": list }))
                            })
                            .collect();
                        serde_json::json!({ "schemes": schemes })
                    }
                }),
                _ => None,
            })
            .collect();
        if !obj.contains_key("securityRequirements") {
            obj.insert("securityRequirements".into(), Value::Array(reqs));
        }
    }
    if let Some(Value::Object(schemes)) = obj.get_mut("securitySchemes") {
        let converted: serde_json::Map<String, Value> = std::mem::take(schemes)
            .into_iter()
            .filter_map(|(name, scheme)| v03_scheme_as_v1(scheme).map(|s| (name, s)))
            .collect();
        *schemes = converted;
    }
}

/// One 0.3 security scheme as the 1.0 `SecurityScheme`; `None` for an
/// unknown type.
fn v03_scheme_as_v1(scheme: Value) -> Option<Value> {
    let Value::Object(mut s) = scheme else {
        return None;
    };
    if let Some((wrapper, inner)) = s
        .iter()
        .find(|(k, v)| k.ends_with("SecurityScheme") && v.is_object())
        .map(|(k, v)| (k.clone(), v.clone()))
    {
        return Some(Value::Object([(wrapper, inner)].into_iter().collect()));
    }
    let kind = s.remove("type")?;
    let mut take = |from: &str, to: &str, into: &mut serde_json::Map<String, Value>| {
        if let Some(v) = s.remove(from) {
            into.insert(to.to_owned(), v);
        }
    };
    let mut inner = serde_json::Map::new();
    take("description", "description", &mut inner);
    let wrapper = match kind.as_str()? {
        "apiKey" => {
            take("in", "location", &mut inner);
            take("name", "name", &mut inner);
            "apiKeySecurityScheme"
        }
        "http" => {
            take("scheme", "scheme", &mut inner);
            take("bearerFormat", "bearerFormat", &mut inner);
            "httpAuthSecurityScheme"
        }
        "oauth2" => {
            take("oauth2MetadataUrl", "oauth2MetadataUrl", &mut inner);
            if let Some(Value::Object(mut flows)) = s.remove("flows") {
                let first = [
                    "authorizationCode",
                    "clientCredentials",
                    "implicit",
                    "password",
                ]
                .into_iter()
                .find_map(|k| flows.remove(k).map(|f| (k.to_owned(), f)));
                if let Some(flow) = first {
                    inner.insert("flows".into(), Value::Object([flow].into_iter().collect()));
                }
            }
            "oauth2SecurityScheme"
        }
        "openIdConnect" => {
            take("openIdConnectUrl", "openIdConnectUrl", &mut inner);
            "openIdConnectSecurityScheme"
        }
        "mutualTLS" => "mtlsSecurityScheme",
        _ => return None,
    };
    Some(Value::Object(
        [(wrapper.to_owned(), Value::Object(inner))]
            .into_iter()
            .collect(),
    ))
}

/// Decodes an agent card (ProtoJSON). A 0.3 card is read with its
/// interfaces marked as 0.3 (see [`crate::ClientBuilder::allow_v03`]);
/// other 0.x cards are refused with a clear error.
pub fn parse_agent_card(body: &[u8]) -> ClientResult<AgentCard> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ClientError::invalid_response(format!("not JSON: {e}")))?;
    let Some(obj) = value.as_object() else {
        return Err(ClientError::invalid_response("not a JSON object"));
    };
    let has_interfaces = ["supportedInterfaces", "supported_interfaces"]
        .iter()
        .filter_map(|k| obj.get(*k))
        .any(|v| v.as_array().is_some_and(|a| !a.is_empty()));
    let legacy = (!has_interfaces)
        .then(|| obj.get("url").and_then(Value::as_str))
        .flatten()
        .map(|url| {
            let version = obj
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or("0.x");
            (url.to_owned(), version.to_owned())
        });
    let mut value = value;
    if let Some((url, version)) = legacy {
        {
            if !crate::v0_3::is_v03(&version) {
                return Err(ClientError::NoCompatibleInterface(format!(
                    "the agent card is an A2A {version} card (top-level \"url\": {url:?}, no \
                     \"supportedInterfaces\"); this client speaks A2A 1.0 and 0.3, not {version}"
                )));
            }
            value = v03_card_as_v1(value);
        }
    }
    serde_json::from_value(value)
        .map_err(|e| ClientError::invalid_response(format!("invalid agent card: {e}")))
}

/// What is wrong with a card: the fields A2A 1.0 requires (specification
/// section 4.4), interface URLs a client cannot call, and security
/// requirements naming schemes the card does not declare. Empty when the
/// card is valid; each problem is one readable sentence.
pub fn validate_card(card: &AgentCard) -> Vec<String> {
    let mut p = Vec::new();
    let mut need = |ok: bool, what: &str| {
        if !ok {
            p.push(what.to_owned());
        }
    };
    need(!card.name.trim().is_empty(), "name is required");
    need(
        !card.description.trim().is_empty(),
        "description is required",
    );
    need(!card.version.trim().is_empty(), "version is required");
    need(card.capabilities.is_some(), "capabilities is required");
    need(
        !card.supported_interfaces.is_empty(),
        "supportedInterfaces must list at least one interface",
    );
    need(
        !card.default_input_modes.is_empty(),
        "defaultInputModes must not be empty",
    );
    need(
        !card.default_output_modes.is_empty(),
        "defaultOutputModes must not be empty",
    );
    for (n, i) in card.supported_interfaces.iter().enumerate() {
        let at = format!("supportedInterfaces[{n}]");
        if i.url.trim().is_empty() {
            p.push(format!("{at}.url is required"));
        }
        if i.protocol_binding.trim().is_empty() {
            p.push(format!("{at}.protocolBinding is required"));
        }
        if i.protocol_version.trim().is_empty() {
            p.push(format!("{at}.protocolVersion is required"));
        }
        if Binding::parse(&i.protocol_binding) == Some(Binding::Grpc) {
            continue;
        }
        if Binding::parse(&i.protocol_binding).is_some()
            && reqwest::Url::parse(&i.url).map_or(true, |u| !matches!(u.scheme(), "http" | "https"))
        {
            p.push(format!("{at}.url {:?} is not an http(s) URL", i.url));
        }
    }
    for (n, s) in card.skills.iter().enumerate() {
        let at = format!("skills[{n}]");
        if s.id.trim().is_empty() {
            p.push(format!("{at}.id is required"));
        }
        if s.name.trim().is_empty() {
            p.push(format!("{at}.name is required"));
        }
        if s.description.trim().is_empty() {
            p.push(format!("{at}.description is required"));
        }
        if s.tags.is_empty() {
            p.push(format!("{at}.tags must not be empty"));
        }
    }
    for (n, r) in card.security_requirements.iter().enumerate() {
        for name in r.schemes.keys() {
            if !card.security_schemes.contains_key(name) {
                p.push(format!(
                    "securityRequirements[{n}] names {name:?}, which securitySchemes does not declare"
                ));
            }
        }
    }
    for (name, s) in &card.security_schemes {
        if s.scheme.is_none() {
            p.push(format!("securitySchemes.{name} declares no scheme"));
        }
    }
    p
}

// --- Card signatures (spec 8.4.3) -------------------------------------------

/// Where the key that verified a card signature came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A key given to the verifier (e.g. a PEM file), with its label.
    Trusted(String),
    /// A JWKS URL the verifier was told to trust.
    TrustedJwks(String),
    /// The agent's own JWKS (the signature's `jku`, on the HTTPS origin the
    /// card was fetched from).
    AgentJwks(String),
}

impl std::fmt::Display for KeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeySource::Trusted(label) => write!(f, "trusted key {label}"),
            KeySource::TrustedJwks(url) => write!(f, "trusted JWKS {url}"),
            KeySource::AgentJwks(url) => write!(f, "the agent's JWKS {url}"),
        }
    }
}

/// What checking a card's signatures found, and with which key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureReport {
    /// Verified, unverified (with the reason) or absent.
    pub status: jws::CardSignatureStatus,
    /// Where the verifying key came from (when verified).
    pub key_source: Option<KeySource>,
}

impl SignatureReport {
    /// One line for people: `verified (EdDSA, key K, from trusted key
    /// pub.pem)`, `unverified: REASON` or `absent`.
    pub fn describe(&self) -> String {
        match &self.status {
            jws::CardSignatureStatus::Absent => "absent".into(),
            jws::CardSignatureStatus::Verified {
                kid,
                algorithm,
                form,
                ..
            } => {
                // The SDKs' form (null and empty values left out) is named.
                let form = match form {
                    jws::CardSignatureForm::Sdk => ", SDK form",
                    _ => "",
                };
                match &self.key_source {
                    Some(src) => format!("verified ({algorithm}, key {kid}, from {src}{form})"),
                    None => format!("verified ({algorithm}, key {kid}{form})"),
                }
            }
            jws::CardSignatureStatus::Unverified { reason } => format!("unverified: {reason}"),
        }
    }
}

/// Checks the signatures of agent cards (spec 8.4.3) with trusted keys:
/// public keys given to it (PEM files, JWKs), JWKS documents at URLs it
/// is told to trust and, unless turned off, the agent's own JWKS named by a
/// signature's `jku` when that is on the HTTPS origin the card came from
/// (the key is then as trustworthy as that TLS connection; over plain HTTP
/// or from another origin it is not used).
///
/// A card is verified when one of its signatures verifies with one of
/// these keys over the card's canonical form (JCS, without `signatures`,
/// default values left out), or over the form the official SDKs sign (the
/// same without null and empty values; see [`jws::CardSignatureForm`]). The card checked is the one the client
/// parsed: members this version of the protocol does not define, which
/// the client ignores, are not part of it.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use agentwire_client::card::{CardVerifier, fetch_agent_card};
/// let card = fetch_agent_card("https://agent.example").await?;
/// let verifier = CardVerifier::new().trust_key_file("agent-public.pem")?;
/// let report = verifier.verify(&card, Some("https://agent.example/.well-known/agent-card.json")).await;
/// println!("signature: {}", report.describe());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct CardVerifier {
    keys: jws::KeySet,
    sources: HashMap<String, KeySource>,
    jwks_urls: Vec<String>,
    follow_jku: bool,
    http: Option<reqwest::Client>,
    timeout: Duration,
}

impl Default for CardVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl CardVerifier {
    /// A verifier with no trusted key, following same-origin HTTPS `jku`s.
    pub fn new() -> Self {
        Self {
            keys: jws::KeySet::new(),
            sources: HashMap::new(),
            jwks_urls: Vec::new(),
            follow_jku: true,
            http: None,
            timeout: Duration::from_secs(10),
        }
    }

    /// Trusts this public key (`label` says where it came from in reports).
    pub fn trust_key(mut self, key: jws::VerifyingKey, label: impl Into<String>) -> Self {
        self.sources
            .insert(key.kid().to_owned(), KeySource::Trusted(label.into()));
        self.keys.push(key);
        self
    }

    /// Trusts the key of a PEM file (a public key, or a private key whose
    /// public part is taken).
    pub fn trust_key_file(self, path: impl AsRef<Path>) -> ClientResult<Self> {
        let path = path.as_ref();
        let key = jws::VerifyingKey::from_pem_file(path)
            .map_err(|e| ClientError::InvalidRequest(format!("trusted key: {e}")))?;
        Ok(self.trust_key(key, path.display().to_string()))
    }

    /// Trusts every key of this JWKS document.
    pub fn trust_jwks(mut self, jwks: &Value, label: impl Into<String>) -> ClientResult<Self> {
        let label = label.into();
        let keys = jws::KeySet::from_jwks(jwks)
            .map_err(|e| ClientError::InvalidRequest(format!("trusted JWKS {label}: {e}")))?;
        for k in keys.iter() {
            self.sources
                .insert(k.kid().to_owned(), KeySource::Trusted(label.clone()));
        }
        self.keys.extend(keys);
        Ok(self)
    }

    /// Trusts the keys of the JWKS at this URL (fetched at each
    /// verification).
    pub fn trust_jwks_url(mut self, url: impl Into<String>) -> Self {
        self.jwks_urls.push(url.into());
        self
    }

    /// Whether to use the agent's own JWKS (same-origin HTTPS `jku`); on by
    /// default. Turn it off to accept only the keys given.
    pub fn follow_jku(mut self, on: bool) -> Self {
        self.follow_jku = on;
        self
    }

    /// The HTTP client for JWKS fetches.
    pub fn with_http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    /// Whether keys were given (keys, JWKS documents or URLs).
    pub fn has_trusted_keys(&self) -> bool {
        !self.keys.is_empty() || !self.jwks_urls.is_empty()
    }

    async fn fetch_jwks(&self, url: &str) -> Result<jws::KeySet, String> {
        let http = self.http.clone().unwrap_or_else(default_http_client);
        let resp = http
            .get(url)
            .header(
                http::header::ACCEPT,
                "application/jwk-set+json, application/json",
            )
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "cannot fetch the JWKS at {url}: {}",
                    map_reqwest_error(e, url)
                )
            })?;
        if !resp.status().is_success() {
            return Err(format!("the JWKS at {url} answered HTTP {}", resp.status()));
        }
        let body = read_body(resp, url)
            .await
            .map_err(|e| format!("cannot read the JWKS at {url}: {e}"))?;
        let doc: Value = serde_json::from_slice(&body)
            .map_err(|e| format!("the JWKS at {url} is not JSON: {e}"))?;
        jws::KeySet::from_jwks(&doc).map_err(|e| format!("the JWKS at {url}: {e}"))
    }

    /// Checks `card`'s signatures. `card_url` is where the card was
    /// fetched from (for the same-origin rule of `jku`); `None` for a card
    /// read from a file.
    pub async fn verify(&self, card: &AgentCard, card_url: Option<&str>) -> SignatureReport {
        let json = match serde_json::to_value(card) {
            Ok(v) => v,
            Err(e) => {
                return SignatureReport {
                    status: jws::CardSignatureStatus::Unverified {
                        reason: format!("the card cannot be serialized: {e}"),
                    },
                    key_source: None,
                };
            }
        };
        let hints = jws::card_signature_hints(&json);
        if hints.is_empty() {
            return SignatureReport {
                status: jws::CardSignatureStatus::Absent,
                key_source: None,
            };
        }
        let mut keys = self.keys.clone();
        let mut sources = self.sources.clone();
        let mut notes = Vec::new();
        for url in &self.jwks_urls {
            match self.fetch_jwks(url).await {
                Ok(set) => {
                    for k in set.iter() {
                        sources.insert(k.kid().to_owned(), KeySource::TrustedJwks(url.clone()));
                    }
                    keys.extend(set);
                }
                Err(e) => notes.push(e),
            }
        }
        if self.follow_jku {
            let origin = |u: &str| {
                reqwest::Url::parse(u)
                    .ok()
                    .map(|u| (u.scheme().to_owned(), u.origin().ascii_serialization()))
            };
            let card_origin = card_url.and_then(origin);
            let mut seen = Vec::new();
            for jku in hints.iter().filter_map(|h| h.jku.clone()) {
                if seen.contains(&jku) || self.jwks_urls.contains(&jku) {
                    continue;
                }
                seen.push(jku.clone());
                let needed = hints.iter().any(|h| {
                    h.jku.as_deref() == Some(jku.as_str())
                        && keys.find(h.kid.as_deref().unwrap_or_default()).is_none()
                });
                if !needed {
                    continue;
                }
                match (&card_origin, origin(&jku)) {
                    (Some((scheme, card)), Some((_, key))) if scheme == "https" && *card == key => {
                        match self.fetch_jwks(&jku).await {
                            Ok(set) => {
                                for k in set.iter() {
                                    sources
                                        .entry(k.kid().to_owned())
                                        .or_insert_with(|| KeySource::AgentJwks(jku.clone()));
                                }
                                for k in set.iter() {
                                    if keys.find(k.kid()).is_none() {
                                        keys.push(k.clone());
                                    }
                                }
                            }
                            Err(e) => notes.push(e),
                        }
                    }
                    _ => notes.push(format!(
                        "the card names its keys at {jku}, which is not used because the card was not fetched over HTTPS from that origin (to trust it, give that JWKS URL or the agent's public key)"
                    )),
                }
            }
        }
        let status = match jws::verify_card(&json, &keys) {
            jws::CardSignatureStatus::Unverified { reason } if !notes.is_empty() => {
                jws::CardSignatureStatus::Unverified {
                    reason: format!("{reason}; {}", notes.join("; ")),
                }
            }
            other => other,
        };
        let key_source = match &status {
            jws::CardSignatureStatus::Verified { key, .. } => sources.get(key).cloned(),
            _ => None,
        };
        SignatureReport { status, key_source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn card_urls() {
        for (input, want) in [
            (
                "http://127.0.0.1:8080",
                "http://127.0.0.1:8080/.well-known/agent-card.json",
            ),
            (
                "http://127.0.0.1:8080/",
                "http://127.0.0.1:8080/.well-known/agent-card.json",
            ),
            (
                "127.0.0.1:8080",
                "http://127.0.0.1:8080/.well-known/agent-card.json",
            ),
            (
                "localhost:9",
                "http://localhost:9/.well-known/agent-card.json",
            ),
            (
                "https://a.example/agents/echo/",
                "https://a.example/agents/echo/.well-known/agent-card.json",
            ),
            (
                "https://a.example/x?y=1#z",
                "https://a.example/x/.well-known/agent-card.json",
            ),
            ("https://a.example/card.json", "https://a.example/card.json"),
            (
                "https://a.example/card.json?v=2",
                "https://a.example/card.json?v=2",
            ),
            (
                "http://h:1/.well-known/agent-card.json",
                "http://h:1/.well-known/agent-card.json",
            ),
        ] {
            assert_eq!(agent_card_url(input).unwrap(), want, "{input}");
        }
        assert!(agent_card_url("").is_err());
        assert!(agent_card_url("ftp://h/").is_err());
    }

    #[test]
    fn v1_card_parses() {
        let body = json!({
            "name": "Echo", "description": "d", "version": "1.0.0",
            "supportedInterfaces": [{"url": "http://h:1/", "protocolBinding": "JSONRPC",
                                      "protocolVersion": "1.0"}],
            "capabilities": {"streaming": true},
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": [], "futureField": 1
        });
        let card = parse_agent_card(&serde_json::to_vec(&body).unwrap()).unwrap();
        assert_eq!(card.supported_interfaces[0].protocol_binding, "JSONRPC");
        assert!(card.supports_streaming());
    }

    #[test]
    fn v03_card_is_read_as_03_interfaces_and_other_0x_refused() {
        let body = json!({
            "name": "Old", "description": "d", "version": "1", "protocolVersion": "0.3.0",
            "url": "http://h:1/a2a", "preferredTransport": "JSONRPC",
            "additionalInterfaces": [
                {"url": "http://h:1/a2a", "transport": "JSONRPC"},
                {"url": "http://h:1/rest", "transport": "HTTP+JSON"}
            ],
            "capabilities": {}, "defaultInputModes": [], "defaultOutputModes": [], "skills": []
        });
        let card = parse_agent_card(&serde_json::to_vec(&body).unwrap()).unwrap();
        let ifaces: Vec<(&str, &str, &str)> = card
            .supported_interfaces
            .iter()
            .map(|i| {
                (
                    i.url.as_str(),
                    i.protocol_binding.as_str(),
                    i.protocol_version.as_str(),
                )
            })
            .collect();
        assert_eq!(
            ifaces,
            [
                ("http://h:1/a2a", "JSONRPC", "0.3.0"),
                ("http://h:1/rest", "HTTP+JSON", "0.3.0")
            ]
        );
        let mut old = body.clone();
        old["protocolVersion"] = json!("0.2.5");
        let err = parse_agent_card(&serde_json::to_vec(&old).unwrap()).unwrap_err();
        assert!(
            matches!(err, ClientError::NoCompatibleInterface(_)),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("0.2.5") && msg.contains("http://h:1/a2a"),
            "{msg}"
        );
    }

    #[test]
    fn v03_security_schemes_are_read_as_1_0_ones() {
        use agentwire_types::security_scheme::Scheme;
        let body = json!({
            "name": "Old", "description": "d", "version": "1", "protocolVersion": "0.3.0",
            "url": "http://h:1/a2a", "capabilities": {}, "defaultInputModes": [],
            "defaultOutputModes": [],
            "securitySchemes": {
                "key": {"type": "apiKey", "in": "query", "name": "api_key", "description": "k"},
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
                "oauth": {"type": "oauth2", "flows": {"clientCredentials": {
                    "tokenUrl": "https://h/token", "scopes": {"read": "r"}}}},
                "oidc": {"type": "openIdConnect", "openIdConnectUrl": "https://h/.well-known/openid-configuration"},
                "mtls": {"type": "mutualTLS"},
                "odd": {"type": "carrier-pigeon"},
                // A 0.3 gRPC card (protobuf form) or a card with both forms.
                "both": {"type": "http", "scheme": "basic",
                         "httpAuthSecurityScheme": {"scheme": "basic"}}
            },
            "security": [{"key": []}, {"oauth": ["read"], "bearer": []}],
            "skills": [{"id": "s", "name": "s", "description": "d", "tags": [],
                        "security": [{"schemes": {"bearer": {"list": []}}}]}]
        });
        let card = parse_agent_card(&serde_json::to_vec(&body).unwrap()).unwrap();
        let scheme = |n: &str| card.security_schemes.get(n).and_then(|s| s.scheme.clone());
        match scheme("key") {
            Some(Scheme::ApiKeySecurityScheme(k)) => {
                assert_eq!((k.location.as_str(), k.name.as_str()), ("query", "api_key"));
                assert_eq!(k.description, "k");
            }
            other => panic!("key: {other:?}"),
        }
        match scheme("bearer") {
            Some(Scheme::HttpAuthSecurityScheme(h)) => {
                assert_eq!(
                    (h.scheme.as_str(), h.bearer_format.as_str()),
                    ("bearer", "JWT")
                );
            }
            other => panic!("bearer: {other:?}"),
        }
        match scheme("oauth") {
            Some(Scheme::Oauth2SecurityScheme(o)) => {
                let flows = o.flows.expect("flows");
                assert!(
                    format!("{flows:?}").contains("https://h/token"),
                    "{flows:?}"
                );
            }
            other => panic!("oauth: {other:?}"),
        }
        assert!(matches!(
            scheme("oidc"),
            Some(Scheme::OpenIdConnectSecurityScheme(o)) if o.open_id_connect_url.ends_with("openid-configuration")
        ));
        assert!(matches!(
            scheme("mtls"),
            Some(Scheme::MtlsSecurityScheme(_))
        ));
        assert!(
            matches!(scheme("both"), Some(Scheme::HttpAuthSecurityScheme(h)) if h.scheme == "basic")
        );
        assert!(!card.security_schemes.contains_key("odd"));
        assert_eq!(card.security_requirements.len(), 2);
        assert!(card.security_requirements[0].schemes.contains_key("key"));
        assert_eq!(
            card.security_requirements[1].schemes["oauth"].list,
            ["read"]
        );
        assert!(
            card.skills[0].security_requirements[0]
                .schemes
                .contains_key("bearer")
        );
        // Credentials are attached as the card says: the API key in the query.
        assert_eq!(
            crate::auth::api_key_scheme(&card),
            Some(crate::auth::Placement::Query("api_key".into()))
        );
        assert!(crate::auth::accepts_bearer(&card));
    }

    #[test]
    fn garbage_is_an_invalid_response() {
        assert!(matches!(
            parse_agent_card(b"<html>"),
            Err(ClientError::InvalidResponse(_))
        ));
        assert!(matches!(
            parse_agent_card(b"[]"),
            Err(ClientError::InvalidResponse(_))
        ));
    }

    #[test]
    fn cache_control_directives() {
        let mut h = http::HeaderMap::new();
        h.insert(
            http::header::CACHE_CONTROL,
            "public, max-age=300".parse().unwrap(),
        );
        assert_eq!(
            cache_policy(&h),
            CachePolicy {
                store: true,
                max_age: Some(Duration::from_secs(300))
            }
        );
        h.insert(http::header::CACHE_CONTROL, "no-cache".parse().unwrap());
        assert_eq!(cache_policy(&h).max_age, Some(Duration::ZERO));
        h.insert(http::header::CACHE_CONTROL, "no-store".parse().unwrap());
        assert!(!cache_policy(&h).store);
        assert_eq!(cache_policy(&http::HeaderMap::new()).max_age, None);
    }

    #[test]
    fn references_are_classified() {
        assert!(matches!(
            card_location("https://a.example").unwrap(),
            CardLocation::Url(u) if u == "https://a.example/.well-known/agent-card.json"
        ));
        assert_eq!(
            card_location("file:///x/card.json").unwrap(),
            CardLocation::File(PathBuf::from("/x/card.json"))
        );
        assert_eq!(
            card_location("../card.json").unwrap(),
            CardLocation::File(PathBuf::from("../card.json"))
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("agent.json");
        std::fs::write(&file, "{}").unwrap();
        assert_eq!(
            card_location(file.to_str().unwrap()).unwrap(),
            CardLocation::File(file.clone())
        );
        assert!(card_location("  ").is_err());
    }

    #[test]
    fn card_files() {
        let dir = tempfile::tempdir().unwrap();
        let missing = read_agent_card_file(&dir.path().join("nope.json")).unwrap_err();
        assert!(
            matches!(missing, ClientError::CardNotFound { .. }),
            "{missing:?}"
        );
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "not json").unwrap();
        assert!(matches!(
            read_agent_card_file(&bad),
            Err(ClientError::InvalidResponse(_))
        ));
        let good = dir.path().join("good.json");
        let card = AgentCard::new("File Agent", "d", "1").with_interface("http://h:1/", "JSONRPC");
        std::fs::write(&good, serde_json::to_vec(&card).unwrap()).unwrap();
        assert_eq!(read_agent_card_file(&good).unwrap().name, "File Agent");
    }

    /// The echo agent with `Cache-Control: no-cache` (max-age 0).
    async fn echo_server() -> agentwire_server::ServerHandle {
        echo_server_on("127.0.0.1:0", Some(Duration::ZERO), true).await
    }

    /// The echo agent on `addr`, with a card max-age and streaming or not.
    async fn echo_server_on(
        addr: &str,
        max_age: Option<Duration>,
        streaming: bool,
    ) -> agentwire_server::ServerHandle {
        let card = agentwire_agents::echo::card().with_streaming(streaming);
        let mut server = agentwire_server::A2aServer::new(card, agentwire_agents::echo::EchoAgent);
        if let Some(age) = max_age {
            server = server.card_max_age(age);
        }
        server.bind(addr).await.unwrap().spawn()
    }

    fn disk_entry(dir: &Path) -> PathBuf {
        std::fs::read_dir(dir)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
    }

    #[tokio::test]
    async fn resolver_revalidates_a_no_cache_card_every_time() {
        let server = echo_server().await;
        let dir = tempfile::tempdir().unwrap();
        let resolver = CardResolver::new().with_cache_dir(dir.path());
        let host = server.base_url().trim_start_matches("http://").to_owned();
        let first = resolver.resolve(&host).await.unwrap();
        assert_eq!(first.origin, CardOrigin::Fetched);
        assert_eq!(first.card.name, "Echo Agent");
        // `Cache-Control: no-cache`: kept, but confirmed by a 304 first.
        let second = resolver.resolve(&server.base_url()).await.unwrap();
        assert_eq!(second.origin, CardOrigin::Revalidated);
        assert_eq!(second.card, first.card);
        // Another process sharing the disk cache revalidates too, with the
        // ETag, or with Last-Modified alone when there is no ETag.
        let file = disk_entry(dir.path());
        let mut doc: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert!(doc["etag"].is_string(), "{doc}");
        assert!(doc["lastModified"].is_string(), "{doc}");
        let other = CardResolver::new().with_cache_dir(dir.path());
        let third = other.resolve(&server.base_url()).await.unwrap();
        assert_eq!(third.origin, CardOrigin::Revalidated);
        doc["etag"] = Value::Null;
        std::fs::write(&file, serde_json::to_vec(&doc).unwrap()).unwrap();
        let by_date = CardResolver::new().with_cache_dir(dir.path());
        let fourth = by_date.resolve(&server.base_url()).await.unwrap();
        assert_eq!(fourth.origin, CardOrigin::Revalidated);
        assert_eq!(fourth.card, first.card);
        // Reload: no conditional request, a new download.
        let reloaded = resolver
            .resolve_with(&server.base_url(), CacheMode::Reload)
            .await
            .unwrap();
        assert_eq!(reloaded.origin, CardOrigin::Fetched);
        // A card URL that does not exist.
        let err = resolver
            .resolve(&format!("{}/nope/card.json", server.base_url()))
            .await
            .unwrap_err();
        assert!(matches!(err, ClientError::CardNotFound { .. }), "{err:?}");
    }

    #[tokio::test]
    async fn a_fresh_card_is_used_until_revalidated_or_reloaded() {
        // An agent whose card may be kept 10 minutes, without streaming.
        let old = echo_server_on("127.0.0.1:0", Some(Duration::from_secs(600)), false).await;
        let addr = old.local_addr().to_string();
        let dir = tempfile::tempdir().unwrap();
        let resolver = CardResolver::new().with_cache_dir(dir.path());
        let first = resolver.resolve(&addr).await.unwrap();
        assert_eq!(first.origin, CardOrigin::Fetched);
        assert!(!first.card.supports_streaming());
        assert_eq!(
            resolver.resolve(&addr).await.unwrap().origin,
            CardOrigin::Cached
        );
        // Unchanged: revalidation confirms it (304).
        let same = resolver.revalidate(&addr).await.unwrap();
        assert_eq!(same.origin, CardOrigin::Revalidated);
        assert_eq!(same.card, first.card);

        // Another agent takes the address, with streaming.
        old.shutdown().await.unwrap();
        let new = echo_server_on(&addr, Some(Duration::from_secs(600)), true).await;
        // Within max-age the old card is still used, here and in another
        // process sharing the cache...
        let stale = resolver.resolve(&addr).await.unwrap();
        assert_eq!(stale.origin, CardOrigin::Cached);
        assert!(!stale.card.supports_streaming());
        let stale_dir = tempfile::tempdir().unwrap();
        let entry = disk_entry(dir.path());
        std::fs::copy(&entry, stale_dir.path().join(entry.file_name().unwrap())).unwrap();
        let other = CardResolver::new().with_cache_dir(stale_dir.path());
        let stale = other.resolve(&addr).await.unwrap();
        assert_eq!(stale.origin, CardOrigin::Cached);
        assert!(!stale.card.supports_streaming());
        // ... until it is revalidated (the ETag no longer matches: the new
        // card comes back) ...
        let current = resolver.revalidate(&addr).await.unwrap();
        assert_eq!(current.origin, CardOrigin::Fetched);
        assert!(current.card.supports_streaming());
        assert!(
            resolver
                .resolve(&addr)
                .await
                .unwrap()
                .card
                .supports_streaming()
        );
        // ... or the cache is bypassed (and the new card replaces the old).
        let reloading = CardResolver::new()
            .with_cache_dir(stale_dir.path())
            .with_cache_mode(CacheMode::Reload);
        let reloaded = reloading.resolve(&addr).await.unwrap();
        assert_eq!(reloaded.origin, CardOrigin::Fetched);
        assert!(reloaded.card.supports_streaming());
        let after = CardResolver::new().with_cache_dir(stale_dir.path());
        let after = after.resolve(&addr).await.unwrap();
        assert_eq!(after.origin, CardOrigin::Cached);
        assert!(after.card.supports_streaming());
        drop(new);
    }

    #[tokio::test]
    async fn extended_card_replaces_the_public_one() {
        use std::sync::Arc;
        let card = agentwire_agents::echo::card();
        let mut caps = card.capabilities.clone().unwrap_or_default();
        caps.extended_agent_card = Some(true);
        let public = AgentCard {
            capabilities: Some(caps),
            ..card
        };
        let extended = AgentCard {
            description: "the extended card".into(),
            ..public.clone()
        };
        let server = agentwire_server::A2aServer::new(public, agentwire_agents::echo::EchoAgent)
            .extended_card(extended)
            .authenticator(Arc::new(
                agentwire_server::BearerTokens::new().with_token("t0k", "alice"),
            ))
            .bind("127.0.0.1:0")
            .await
            .unwrap()
            .spawn();
        let resolver = CardResolver::new();
        let public = resolver.resolve(&server.base_url()).await.unwrap();
        assert_ne!(public.card.description, "the extended card");
        let client = crate::Client::builder()
            .credentials(crate::Credentials::new().with_bearer("t0k"))
            .build(public.card)
            .unwrap();
        let ext = resolver
            .fetch_extended(&server.base_url(), &client, &CallOptions::new())
            .await
            .unwrap();
        assert_eq!(ext.description, "the extended card");
        let again = resolver.resolve(&server.base_url()).await.unwrap();
        assert_eq!(again.origin, CardOrigin::Extended);
        assert_eq!(again.card.description, "the extended card");
        // Revalidated against the public card's ETag: unchanged, so the
        // extended card stays; a reload gives the public card.
        let checked = resolver.revalidate(&server.base_url()).await.unwrap();
        assert_eq!(checked.origin, CardOrigin::Extended);
        assert_eq!(checked.card.description, "the extended card");
        let reloaded = resolver
            .resolve_with(&server.base_url(), CacheMode::Reload)
            .await
            .unwrap();
        assert_eq!(reloaded.origin, CardOrigin::Fetched);
        assert_ne!(reloaded.card.description, "the extended card");
    }
}
