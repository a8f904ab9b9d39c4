//! A webhook receiver for push notifications (spec 4.3.3, 13.2).
//!
//! [`WebhookReceiver`] is an axum [`Router`] (mount it in an application,
//! or run it on its own with [`WebhookReceiver::bind`]) that accepts the
//! agent's POSTs of `StreamResponse` events and, before answering 2xx:
//!
//! 1. checks the proof of origin it was told to expect: the config's token
//!    (`X-A2A-Notification-Token`), the exact `Authorization` value, and/or
//!    the signed JWT in `X-A2A-Notification-Signature`, verified against
//!    the agent's JWKS (fetched from [`JWKS_PATH`] and cached; refetched
//!    when an unknown key id shows up) with the body's SHA-256, the task id
//!    and the times checked;
//! 2. checks that the task is one it expects ([`WebhookReceiver::expect_task`],
//!    [`WebhookReceiver::expect_context`], a task the [`Ledger`] knows, or
//!    any task when built with [`WebhookBuilder::accept_any_task`]);
//! 3. drops duplicates (a retry of a notification already recorded, by task
//!    id and `X-A2A-Notification-Id`) with a 2xx;
//! 4. records the event: in the ledger when one is attached, and in the
//!    [`Notifications`] stream. Only then does it answer 200; when the
//!    stream's reader is too far behind it answers 503 and the agent
//!    retries later.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use agentwire_client::webhook::WebhookReceiver;
//! use futures::StreamExt;
//!
//! let (receiver, mut notifications) = WebhookReceiver::builder()
//!     .token("a-unique-secret-for-this-config")
//!     .agent_url("https://agent.example.com")
//!     .accept_any_task(true)
//!     .build();
//! let running = receiver.bind("127.0.0.1:0").await?;
//! println!("webhook at {}", running.url());
//! while let Some(n) = notifications.next().await {
//!     println!("task {}: {:?}", n.task_id, n.event.state());
//! }
//! # Ok(()) }
//! ```

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use agentwire_types::StreamResponse;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::Stream;
use http::{HeaderMap, StatusCode};
use parking_lot::Mutex;
use tokio::sync::mpsc;

use agentwire_types::jws::{self, JwsError, KeySet, VerifyingKey};

use crate::ledger::Ledger;

/// Where an agent of this SDK publishes the keys of its push signatures.
pub const JWKS_PATH: &str = "/.well-known/a2a-push-jwks.json";
/// Header carrying the config's token.
pub const TOKEN_HEADER: &str = "x-a2a-notification-token";
/// Header carrying the notification's unique id.
pub const ID_HEADER: &str = "x-a2a-notification-id";
/// Header carrying the notification's position in its stream.
pub const SEQUENCE_HEADER: &str = "x-a2a-notification-sequence";
/// Header carrying the signed JWT.
pub const SIGNATURE_HEADER: &str = "x-a2a-notification-signature";

/// One verified push notification.
#[derive(Debug, Clone, PartialEq)]
pub struct PushNotification {
    /// The task it is about.
    pub task_id: String,
    /// The notification id (`X-A2A-Notification-Id`), if the agent sent one.
    pub id: Option<String>,
    /// Its position in the config's stream (`X-A2A-Notification-Sequence`).
    pub sequence: Option<u64>,
    /// The event.
    pub event: StreamResponse,
    /// The key id of the verified signature, if it was signed.
    pub signed_by: Option<String>,
    /// A token or `Authorization` value was checked.
    pub authenticated: bool,
}

/// Counters of a receiver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WebhookStats {
    /// Notifications recorded.
    pub accepted: u64,
    /// Retries of recorded notifications (answered 2xx, not recorded again).
    pub duplicates: u64,
    /// Refused: bad token, authorization or signature.
    pub unauthenticated: u64,
    /// Refused: a task nobody expects.
    pub unknown_task: u64,
    /// Refused: not a `StreamResponse`.
    pub malformed: u64,
    /// Answered 503 (reader behind, ledger error).
    pub busy: u64,
    /// Answered 429: over the rate limit ([`WebhookBuilder::rate_limit`]).
    pub rate_limited: u64,
}

/// A token bucket: `burst` requests at once, refilled at `rate` per second.
#[derive(Debug)]
struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    at: std::time::Instant,
}

impl Bucket {
    fn new(per_second: u32, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            rate: f64::from(per_second),
            burst,
            tokens: burst,
            at: std::time::Instant::now(),
        }
    }

    /// Takes a token, or says how long until one is there.
    fn take(&mut self, now: std::time::Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        if self.rate <= 0.0 {
            return Err(Duration::from_secs(3600));
        }
        Err(Duration::from_secs_f64((1.0 - self.tokens) / self.rate))
    }
}

#[derive(Debug, Clone, Default)]
enum JwksSource {
    #[default]
    None,
    Url(String),
    Static,
}

struct Jwks {
    source: JwksSource,
    keys: KeySet,
    fetched: Option<Instant>,
}

/// Bounded memory of what was recorded (and what is being recorded).
#[derive(Default)]
struct Seen {
    done: HashSet<String>,
    order: VecDeque<String>,
    in_flight: HashSet<String>,
}

struct Inner {
    token: Option<String>,
    authorization: Option<String>,
    require_signature: bool,
    accept_any_task: bool,
    leeway: Duration,
    min_refresh: Duration,
    record_timeout: Duration,
    dedupe_capacity: usize,
    max_body: usize,
    ledger: Option<Ledger>,
    http: reqwest::Client,
    jwks: tokio::sync::Mutex<Jwks>,
    tasks: Mutex<HashMap<String, Option<String>>>,
    contexts: Mutex<HashSet<String>>,
    seen: Mutex<Seen>,
    tx: mpsc::Sender<PushNotification>,
    stats: Mutex<WebhookStats>,
    limit: Option<Mutex<Bucket>>,
    on_refused: Option<RefusedHook>,
}

/// A function told of every refused notification
/// ([`WebhookBuilder::on_refused`]).
pub type RefusedHook = Arc<dyn Fn(&Refused) + Send + Sync>;

/// A notification the receiver refused, given to
/// [`WebhookBuilder::on_refused`]: the HTTP status it answered and why.
/// (Requests refused by the rate limit are only counted.)
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refused {
    /// The HTTP status answered (401, 404, 400, 503).
    pub status: u16,
    /// Why, as the sender is told it (never a secret).
    pub reason: String,
}

/// Receives, verifies and records push notifications. Cheap to clone.
#[derive(Clone)]
pub struct WebhookReceiver {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for WebhookReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookReceiver")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// Builds a [`WebhookReceiver`].
pub struct WebhookBuilder {
    token: Option<String>,
    authorization: Option<String>,
    jwks: JwksSource,
    static_keys: KeySet,
    require_signature: Option<bool>,
    accept_any_task: bool,
    leeway: Duration,
    min_refresh: Duration,
    record_timeout: Duration,
    dedupe_capacity: usize,
    queue_capacity: usize,
    max_body: usize,
    ledger: Option<Ledger>,
    http: Option<reqwest::Client>,
    limit: Option<(u32, u32)>,
    on_refused: Option<RefusedHook>,
}

impl std::fmt::Debug for WebhookBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookBuilder")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("jwks", &self.jwks)
            .finish_non_exhaustive()
    }
}

impl WebhookBuilder {
    /// Requires `X-A2A-Notification-Token` to equal `token` (for tasks
    /// registered without a token of their own).
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Requires the `Authorization` header to equal `value` exactly (e.g.
    /// `"Bearer s3cret"`: the config's `authentication` as the agent sends
    /// it).
    pub fn authorization(mut self, value: impl Into<String>) -> Self {
        self.authorization = Some(value.into());
        self
    }

    /// Verifies signatures with the JWKS at this URL (fetched on first use,
    /// cached, refetched when an unknown key id appears).
    pub fn jwks_url(mut self, url: impl Into<String>) -> Self {
        self.jwks = JwksSource::Url(url.into());
        self
    }

    /// Verifies signatures with the JWKS an agent of this SDK publishes:
    /// `{origin of agent_url}/.well-known/a2a-push-jwks.json`.
    pub fn agent_url(self, agent_url: &str) -> Self {
        let origin = reqwest::Url::parse(agent_url)
            .map(|u| u.origin().ascii_serialization())
            .unwrap_or_else(|_| agent_url.trim_end_matches('/').to_owned());
        self.jwks_url(format!("{origin}{JWKS_PATH}"))
    }

    /// Verifies signatures with the keys of this JWKS document. Keys it
    /// cannot use are ignored.
    pub fn jwks_json(mut self, jwks: &serde_json::Value) -> Self {
        self.jwks = JwksSource::Static;
        if let Ok(keys) = KeySet::from_jwks(jwks) {
            self.static_keys.extend(keys);
        }
        self
    }

    /// Whether an unsigned notification is refused (default: yes when a
    /// JWKS is configured).
    pub fn require_signature(mut self, on: bool) -> Self {
        self.require_signature = Some(on);
        self
    }

    /// Accepts notifications about any task (once authenticated) instead of
    /// only the expected ones. For a receiver dedicated to one config whose
    /// token or signature is checked.
    pub fn accept_any_task(mut self, on: bool) -> Self {
        self.accept_any_task = on;
        self
    }

    /// Records every notification in this ledger (before answering 2xx),
    /// and accepts the tasks it knows.
    pub fn ledger(mut self, ledger: Ledger) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// Clock skew tolerated on `iat` / `exp` (default 60 s).
    pub fn leeway(mut self, d: Duration) -> Self {
        self.leeway = d;
        self
    }

    /// Shortest time between two JWKS fetches (default 2 s).
    pub fn jwks_min_refresh(mut self, d: Duration) -> Self {
        self.min_refresh = d;
        self
    }

    /// Notifications buffered for the reader of [`Notifications`] (default
    /// 1024); when full, the receiver waits up to the record timeout and
    /// then answers 503.
    pub fn queue_capacity(mut self, n: usize) -> Self {
        self.queue_capacity = n.max(1);
        self
    }

    /// How long a notification may wait for room in the queue (default 5 s).
    pub fn record_timeout(mut self, d: Duration) -> Self {
        self.record_timeout = d;
        self
    }

    /// How many notification ids are remembered for deduplication (default
    /// 100,000).
    pub fn dedupe_capacity(mut self, n: usize) -> Self {
        self.dedupe_capacity = n.max(1);
        self
    }

    /// Largest accepted body in bytes (default 10 MiB).
    pub fn max_body_bytes(mut self, n: usize) -> Self {
        self.max_body = n;
        self
    }

    /// The HTTP client used to fetch the JWKS.
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http = Some(client);
        self
    }

    /// Accepts at most `per_second` requests a second, with bursts of up
    /// to `burst`; the others are answered `429 Too Many Requests` with a
    /// `Retry-After`, before any parsing or signature check (the sending
    /// agent retries them later). Off by default.
    pub fn rate_limit(mut self, per_second: u32, burst: u32) -> Self {
        self.limit = Some((per_second, burst));
        self
    }

    /// Calls `hook` for each notification refused (wrong or missing token
    /// or credentials, bad signature, unknown task, malformed body, busy),
    /// so that a refusal is never silent.
    pub fn on_refused(mut self, hook: RefusedHook) -> Self {
        self.on_refused = Some(hook);
        self
    }

    /// The receiver and the stream of the notifications it records.
    pub fn build(self) -> (WebhookReceiver, Notifications) {
        let (tx, rx) = mpsc::channel(self.queue_capacity);
        let has_jwks = !matches!(self.jwks, JwksSource::None);
        let inner = Inner {
            token: self.token,
            authorization: self.authorization,
            require_signature: self.require_signature.unwrap_or(has_jwks),
            accept_any_task: self.accept_any_task,
            leeway: self.leeway,
            min_refresh: self.min_refresh,
            record_timeout: self.record_timeout,
            dedupe_capacity: self.dedupe_capacity,
            max_body: self.max_body,
            ledger: self.ledger,
            http: self.http.unwrap_or_else(crate::default_http_client),
            jwks: tokio::sync::Mutex::new(Jwks {
                source: self.jwks,
                keys: self.static_keys,
                fetched: None,
            }),
            tasks: Mutex::new(HashMap::new()),
            contexts: Mutex::new(HashSet::new()),
            seen: Mutex::new(Seen::default()),
            tx,
            stats: Mutex::new(WebhookStats::default()),
            limit: self
                .limit
                .map(|(rate, burst)| Mutex::new(Bucket::new(rate, burst))),
            on_refused: self.on_refused,
        };
        (
            WebhookReceiver {
                inner: Arc::new(inner),
            },
            Notifications { rx },
        )
    }
}

/// The notifications a receiver recorded, in the order it recorded them.
#[derive(Debug)]
pub struct Notifications {
    rx: mpsc::Receiver<PushNotification>,
}

impl Notifications {
    /// The next notification (`None` when the receiver is gone).
    pub async fn recv(&mut self) -> Option<PushNotification> {
        self.rx.recv().await
    }
}

impl Stream for Notifications {
    type Item = PushNotification;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

/// Why a notification was refused.
#[derive(Debug)]
enum Reject {
    Unauthenticated(String),
    UnknownTask(String),
    Malformed(String),
    Busy(String),
}

impl Reject {
    fn into_response(self, stats: &Mutex<WebhookStats>, hook: Option<&RefusedHook>) -> Response {
        let (status, msg) = {
            let mut s = stats.lock();
            match self {
                Reject::Unauthenticated(m) => {
                    s.unauthenticated += 1;
                    (StatusCode::UNAUTHORIZED, m)
                }
                Reject::UnknownTask(m) => {
                    s.unknown_task += 1;
                    (StatusCode::NOT_FOUND, m)
                }
                Reject::Malformed(m) => {
                    s.malformed += 1;
                    (StatusCode::BAD_REQUEST, m)
                }
                Reject::Busy(m) => {
                    s.busy += 1;
                    (StatusCode::SERVICE_UNAVAILABLE, m)
                }
            }
        };
        tracing::debug!(status = %status, reason = %msg, "webhook: notification refused");
        if let Some(hook) = hook {
            hook(&Refused {
                status: status.as_u16(),
                reason: msg.clone(),
            });
        }
        (status, msg).into_response()
    }
}

/// Compares secrets in time independent of where they differ.
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn sha256_hex(body: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, body);
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

impl WebhookReceiver {
    /// Starts building a receiver.
    pub fn builder() -> WebhookBuilder {
        WebhookBuilder {
            token: None,
            authorization: None,
            jwks: JwksSource::None,
            static_keys: KeySet::new(),
            require_signature: None,
            accept_any_task: false,
            leeway: Duration::from_secs(60),
            min_refresh: Duration::from_secs(2),
            record_timeout: Duration::from_secs(5),
            dedupe_capacity: 100_000,
            queue_capacity: 1024,
            max_body: 10 * 1024 * 1024,
            ledger: None,
            http: None,
            limit: None,
            on_refused: None,
        }
    }

    /// Expects notifications about `task_id` (checked with the receiver's
    /// token, if any).
    pub fn expect_task(&self, task_id: impl Into<String>) {
        self.inner.tasks.lock().insert(task_id.into(), None);
    }

    /// Expects notifications about `task_id` carrying this token (the one
    /// given in the task's push config).
    pub fn expect_task_with_token(&self, task_id: impl Into<String>, token: impl Into<String>) {
        self.inner
            .tasks
            .lock()
            .insert(task_id.into(), Some(token.into()));
    }

    /// Expects notifications about every task of a context (e.g. one the
    /// client chose for a message with an inline push config, whose task id
    /// it does not know yet).
    pub fn expect_context(&self, context_id: impl Into<String>) {
        self.inner.contexts.lock().insert(context_id.into());
    }

    /// Stops expecting a task.
    pub fn forget_task(&self, task_id: &str) {
        self.inner.tasks.lock().remove(task_id);
    }

    /// The counters.
    pub fn stats(&self) -> WebhookStats {
        *self.inner.stats.lock()
    }

    /// The router: `POST /` receives notifications. Mount it where the
    /// webhook URL points (`Router::nest("/hooks/a2a", receiver.router())`).
    pub fn router(&self) -> Router {
        let max = self.inner.max_body;
        Router::new()
            .route("/", post(receive))
            .layer(DefaultBodyLimit::max(max))
            .with_state(self.clone())
    }

    /// Serves the router on `addr` in the background.
    pub async fn bind(
        &self,
        addr: impl tokio::net::ToSocketAddrs,
    ) -> std::io::Result<RunningWebhook> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        self.serve(listener)
    }

    /// Serves the router in the background on a listener bound earlier
    /// (e.g. before fetching what the receiver needs to be built: the
    /// connections made in between wait in the listener's backlog instead
    /// of being refused).
    pub fn serve(&self, listener: tokio::net::TcpListener) -> std::io::Result<RunningWebhook> {
        let local = listener.local_addr()?;
        let router = self.router();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(RunningWebhook {
            local,
            stop: Some(stop),
            task,
        })
    }

    async fn verify_signature(
        &self,
        jwt: &str,
        body: &[u8],
        task_id: &str,
        notification_id: Option<&str>,
    ) -> Result<String, Reject> {
        let bad = |m: &str| Reject::Unauthenticated(format!("signature: {m}"));
        let h = jwt.trim().split('.').next().unwrap_or_default();
        let (header, _) = jws::decode_protected(h).map_err(|e| bad(&e.to_string()))?;
        let kid = header
            .get("kid")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned();
        let key = self.key(&kid).await.ok_or_else(|| bad("unknown key id"))?;
        let (_, claims) = jws::verify_jwt_with(jwt, &key, self.inner.leeway).map_err(|e| {
            bad(&match e {
                JwsError::BadSignature => "does not verify".to_owned(),
                e => e.to_string(),
            })
        })?;
        let hash = claims
            .get("request_body_sha256")
            .and_then(|v| v.as_str())
            .ok_or_else(|| bad("no request_body_sha256 claim"))?;
        if !ct_eq(
            hash.to_ascii_lowercase().as_bytes(),
            sha256_hex(body).as_bytes(),
        ) {
            return Err(bad("the body does not match the signed hash"));
        }
        if let Some(t) = claims.get("task_id").and_then(|v| v.as_str()) {
            if t != task_id {
                return Err(bad("signed for another task"));
            }
        }
        if let (Some(jti), Some(id)) = (claims.get("jti").and_then(|v| v.as_str()), notification_id)
        {
            if jti != id {
                return Err(bad("signed for another notification id"));
            }
        }
        Ok(kid)
    }

    /// The key `kid` from the JWKS, fetching it (again) when unknown.
    async fn key(&self, kid: &str) -> Option<VerifyingKey> {
        let mut jwks = self.inner.jwks.lock().await;
        let lookup = |j: &Jwks| j.keys.find(kid).cloned();
        if let Some(k) = lookup(&jwks) {
            return Some(k);
        }
        let JwksSource::Url(url) = jwks.source.clone() else {
            return None;
        };
        if jwks
            .fetched
            .is_some_and(|t| t.elapsed() < self.inner.min_refresh)
        {
            return None;
        }
        jwks.fetched = Some(Instant::now());
        let doc: serde_json::Value = match self
            .inner
            .http
            .get(&url)
            .timeout(Duration::from_secs(10))
            .send()
            .await
        {
            Ok(r) if r.status().is_success() => {
                // A JWKS is a few keys: 1 MiB is far above it, and reading
                // stops there.
                match crate::http::read_body_max(r, &url, 1 << 20, "the JWKS").await {
                    Ok(body) => serde_json::from_slice(&body).ok()?,
                    Err(e) => {
                        tracing::warn!(error = %e, url = %url, "webhook: JWKS fetch failed");
                        return None;
                    }
                }
            }
            Ok(r) => {
                tracing::warn!(status = %r.status(), url = %url, "webhook: JWKS fetch refused");
                return None;
            }
            Err(e) => {
                tracing::warn!(error = %e, url = %url, "webhook: JWKS fetch failed");
                return None;
            }
        };
        jwks.keys = match KeySet::from_jwks(&doc) {
            Ok(keys) => keys,
            Err(e) => {
                tracing::warn!(error = %e, url = %url, "webhook: unusable JWKS");
                return None;
            }
        };
        lookup(&jwks)
    }

    /// Is this task expected, and with which token?
    async fn expected(&self, task_id: &str, context_id: &str) -> Result<Option<String>, Reject> {
        if let Some(token) = self.inner.tasks.lock().get(task_id) {
            return Ok(token.clone().or_else(|| self.inner.token.clone()));
        }
        let known_context =
            !context_id.is_empty() && self.inner.contexts.lock().contains(context_id);
        let in_ledger = match &self.inner.ledger {
            Some(l) if !known_context && !self.inner.accept_any_task => {
                matches!(l.task(task_id).await, Ok(Some(_)))
            }
            _ => false,
        };
        if known_context || in_ledger || self.inner.accept_any_task {
            return Ok(self.inner.token.clone());
        }
        Err(Reject::UnknownTask(format!(
            "task {task_id} is not expected by this receiver"
        )))
    }

    async fn handle(&self, headers: &HeaderMap, body: &Bytes) -> Result<bool, Reject> {
        let event: StreamResponse = serde_json::from_slice(body)
            .map_err(|e| Reject::Malformed(format!("not a StreamResponse: {e}")))?;
        let task_id = event
            .task_id()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| Reject::Malformed("the event names no task".to_owned()))?
            .to_owned();
        let context_id = match &event.payload {
            Some(agentwire_types::stream_response::Payload::Task(t)) => t.context_id.clone(),
            Some(agentwire_types::stream_response::Payload::Message(m)) => m.context_id.clone(),
            Some(agentwire_types::stream_response::Payload::StatusUpdate(u)) => {
                u.context_id.clone()
            }
            Some(agentwire_types::stream_response::Payload::ArtifactUpdate(u)) => {
                u.context_id.clone()
            }
            None => String::new(),
        };
        let notification_id = header(headers, ID_HEADER).map(str::to_owned);

        // Proof of origin first: nothing about expected tasks leaks to an
        // unauthenticated caller.
        let mut authenticated = false;
        if let Some(expected) = &self.inner.authorization {
            let got = header(headers, "authorization").unwrap_or_default();
            if !ct_eq(got.as_bytes(), expected.as_bytes()) {
                return Err(Reject::Unauthenticated(
                    "wrong or missing Authorization".into(),
                ));
            }
            authenticated = true;
        }
        let signed_by = match header(headers, SIGNATURE_HEADER) {
            Some(jwt) if !matches!(self.inner.jwks.lock().await.source, JwksSource::None) => Some(
                self.verify_signature(jwt, body, &task_id, notification_id.as_deref())
                    .await?,
            ),
            _ if self.inner.require_signature => {
                return Err(Reject::Unauthenticated(
                    "the notification is not signed".into(),
                ));
            }
            _ => None,
        };
        let token = self.expected(&task_id, &context_id).await;
        let token = match token {
            Ok(t) => t,
            Err(reject) => {
                // Whether a task is expected is only told to callers who
                // proved who they are.
                let has_proof = authenticated
                    || signed_by.is_some()
                    || self.inner.token.as_ref().is_some_and(|t| {
                        ct_eq(
                            header(headers, TOKEN_HEADER).unwrap_or_default().as_bytes(),
                            t.as_bytes(),
                        )
                    });
                return Err(if has_proof {
                    reject
                } else {
                    Reject::Unauthenticated("unauthenticated notification".into())
                });
            }
        };
        if let Some(expected) = &token {
            let got = header(headers, TOKEN_HEADER).unwrap_or_default();
            if !ct_eq(got.as_bytes(), expected.as_bytes()) {
                return Err(Reject::Unauthenticated(
                    "wrong or missing X-A2A-Notification-Token".into(),
                ));
            }
            authenticated = true;
        }

        // Deduplication: by notification id, else by the body itself.
        let key = format!(
            "{task_id}\u{1f}{}",
            notification_id.clone().unwrap_or_else(|| sha256_hex(body))
        );
        {
            let mut seen = self.inner.seen.lock();
            if seen.done.contains(&key) {
                return Ok(false);
            }
            if !seen.in_flight.insert(key.clone()) {
                return Err(Reject::Busy(
                    "the same notification is being recorded".into(),
                ));
            }
        }
        let result = self
            .record(PushNotification {
                task_id,
                id: notification_id,
                sequence: header(headers, SEQUENCE_HEADER).and_then(|s| s.parse().ok()),
                event,
                signed_by,
                authenticated,
            })
            .await;
        let mut seen = self.inner.seen.lock();
        seen.in_flight.remove(&key);
        result?;
        seen.done.insert(key.clone());
        seen.order.push_back(key);
        while seen.order.len() > self.inner.dedupe_capacity {
            if let Some(old) = seen.order.pop_front() {
                seen.done.remove(&old);
            }
        }
        Ok(true)
    }

    async fn record(&self, n: PushNotification) -> Result<(), Reject> {
        if let Some(ledger) = &self.inner.ledger {
            ledger
                .record_event(&n.event)
                .await
                .map_err(|e| Reject::Busy(format!("cannot record the event: {e}")))?;
        }
        match tokio::time::timeout(self.inner.record_timeout, self.inner.tx.send(n)).await {
            Ok(Ok(())) => Ok(()),
            // Nobody reads the stream: recording in the ledger is enough.
            Ok(Err(_)) => Ok(()),
            Err(_) => Err(Reject::Busy("the reader is behind; retry later".into())),
        }
    }
}

async fn receive(State(r): State<WebhookReceiver>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(limit) = &r.inner.limit {
        let taken = limit.lock().take(std::time::Instant::now());
        if let Err(wait) = taken {
            r.inner.stats.lock().rate_limited += 1;
            let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [(http::header::RETRY_AFTER, secs.to_string())],
                "too many notifications",
            )
                .into_response();
        }
    }
    match r.handle(&headers, &body).await {
        Ok(fresh) => {
            {
                let mut s = r.inner.stats.lock();
                if fresh {
                    s.accepted += 1;
                } else {
                    s.duplicates += 1;
                }
            }
            (
                StatusCode::OK,
                [(http::header::CONTENT_TYPE, "application/json")],
                "{}",
            )
                .into_response()
        }
        Err(reject) => reject.into_response(&r.inner.stats, r.inner.on_refused.as_ref()),
    }
}

/// A receiver served in the background; stops when dropped.
#[derive(Debug)]
pub struct RunningWebhook {
    local: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningWebhook {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// `http://{address}/`: the webhook URL to give the agent.
    pub fn url(&self) -> String {
        format!("http://{}/", self.local)
    }

    /// Stops accepting and waits for open requests to end.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

impl Drop for RunningWebhook {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_types::{TaskState, TaskStatus, TaskStatusUpdateEvent};
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;

    fn event(task: &str) -> Bytes {
        let e = StreamResponse::from(TaskStatusUpdateEvent {
            generation: 0,
            task_id: task.into(),
            context_id: "c".into(),
            status: Some(TaskStatus::new(TaskState::Working)),
            metadata: None,
        });
        Bytes::from(serde_json::to_vec(&e).unwrap())
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    /// Over the limit, requests are answered 429 before anything else
    /// (a burst of 5 and, in effect, no refill during the test).
    #[tokio::test]
    async fn rate_limit_answers_429() {
        let (r, mut rx) = WebhookReceiver::builder()
            .token("tok")
            .rate_limit(0, 5)
            .build();
        r.expect_task("t1");
        let hook = r.bind("127.0.0.1:0").await.unwrap();
        crate::install_crypto_provider();
        let http = reqwest::Client::new();
        let mut codes = Vec::new();
        for i in 0..8 {
            let res = http
                .post(hook.url())
                .header(TOKEN_HEADER, "tok")
                .header(ID_HEADER, format!("n{i}"))
                .header("content-type", "application/json")
                .body(event("t1"))
                .send()
                .await
                .unwrap();
            if res.status() == StatusCode::TOO_MANY_REQUESTS {
                assert!(res.headers().contains_key(http::header::RETRY_AFTER));
            }
            codes.push(res.status().as_u16());
        }
        assert_eq!(codes, [200, 200, 200, 200, 200, 429, 429, 429]);
        let stats = r.stats();
        assert_eq!((stats.accepted, stats.rate_limited), (5, 3));
        for _ in 0..5 {
            rx.recv().await.unwrap();
        }
        hook.shutdown().await;
    }

    #[test]
    fn the_bucket_refills_at_its_rate() {
        let start = std::time::Instant::now();
        let mut b = Bucket::new(10, 2);
        b.at = start;
        assert!(b.take(start).is_ok());
        assert!(b.take(start).is_ok());
        let wait = b.take(start).unwrap_err();
        assert!(wait <= Duration::from_millis(100), "{wait:?}");
        // A tenth of a second later, one more.
        let later = start + Duration::from_millis(100);
        assert!(b.take(later).is_ok());
        assert!(b.take(later).is_err());
    }

    #[tokio::test]
    async fn token_task_and_duplicates() {
        let (r, mut rx) = WebhookReceiver::builder().token("tok").build();
        r.expect_task("t1");
        let ok = headers(&[(TOKEN_HEADER, "tok"), (ID_HEADER, "n1")]);
        assert!(r.handle(&ok, &event("t1")).await.unwrap());
        assert!(
            !r.handle(&ok, &event("t1")).await.unwrap(),
            "a retry is a duplicate"
        );
        assert_eq!(rx.recv().await.unwrap().id.as_deref(), Some("n1"));
        let wrong = headers(&[(TOKEN_HEADER, "nope"), (ID_HEADER, "n2")]);
        assert!(matches!(
            r.handle(&wrong, &event("t1")).await,
            Err(Reject::Unauthenticated(_))
        ));
        // An unknown task is only revealed as such to an authenticated caller.
        assert!(matches!(
            r.handle(&ok, &event("t2")).await,
            Err(Reject::UnknownTask(_))
        ));
        assert!(matches!(
            r.handle(&wrong, &event("t2")).await,
            Err(Reject::Unauthenticated(_))
        ));
        assert!(matches!(
            r.handle(&ok, &Bytes::from_static(b"{oops")).await,
            Err(Reject::Malformed(_))
        ));
    }

    #[tokio::test]
    async fn signatures_are_checked_against_the_body() {
        let pkcs8 =
            ring::signature::Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new())
                .unwrap();
        let kp = ring::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        use ring::signature::KeyPair;
        let jwks = serde_json::json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "k1",
            "x": B64.encode(kp.public_key().as_ref())}]});
        let (r, _rx) = WebhookReceiver::builder()
            .jwks_json(&jwks)
            .accept_any_task(true)
            .build();
        let body = event("t1");
        let now = chrono::Utc::now().timestamp();
        let sign = |claims: serde_json::Value| {
            let input = format!(
                "{}.{}",
                B64.encode(r#"{"alg":"EdDSA","kid":"k1"}"#),
                B64.encode(claims.to_string())
            );
            format!("{input}.{}", B64.encode(kp.sign(input.as_bytes()).as_ref()))
        };
        let good = sign(
            serde_json::json!({"iat": now, "exp": now + 60, "task_id": "t1",
            "request_body_sha256": sha256_hex(&body)}),
        );
        let h = headers(&[(SIGNATURE_HEADER, &good)]);
        assert!(r.handle(&h, &body).await.unwrap());
        // The same signature on another (well-formed) body.
        let tampered = String::from_utf8(body.to_vec())
            .unwrap()
            .replace(r#""contextId":"c""#, r#""contextId":"d""#);
        assert_ne!(tampered.as_bytes(), &body[..]);
        assert!(matches!(
            r.handle(&h, &Bytes::from(tampered)).await,
            Err(Reject::Unauthenticated(_))
        ));
        let expired = sign(
            serde_json::json!({"iat": now - 3600, "exp": now - 3000, "task_id": "t1",
            "request_body_sha256": sha256_hex(&body)}),
        );
        assert!(matches!(
            r.handle(
                &headers(&[(SIGNATURE_HEADER, &expired), (ID_HEADER, "x")]),
                &body
            )
            .await,
            Err(Reject::Unauthenticated(_))
        ));
        assert!(matches!(
            r.handle(&headers(&[(ID_HEADER, "y")]), &body).await,
            Err(Reject::Unauthenticated(_))
        ));
    }
}
