//! The wire tap: what a transport actually sent and received, call by call.
//!
//! A [`Tap`] set on a [`crate::ClientBuilder`] (or on one transport with
//! `with_tap`) receives, for every exchange with the agent, [`TapEvent`]s
//! describing it as it went on the wire:
//!
//! - **JSON-RPC and HTTP+JSON**: the method and URL, the request headers the
//!   transport set, the exact request body bytes, the response status and
//!   headers, the exact response body, and for a Server-Sent Events answer
//!   each frame as received (its `data:` text, event type and id).
//! - **gRPC**: the method path, the request metadata, the request message,
//!   the response metadata and each response message. Protobuf is not
//!   readable, so messages are shown decoded to JSON with the ProtoJSON
//!   mapping the project uses everywhere else.
//!
//! Credentials are redacted *before* the observer sees anything:
//! `Authorization` (its scheme word is kept: `Bearer <redacted>`),
//! `Proxy-Authorization`, `Cookie`, `Set-Cookie`, `X-API-Key`, and the
//! API-key headers and query parameters the agent card's security schemes
//! name (the client adds those itself). Bodies are passed as they were
//! sent: they are what the agent received, byte for byte.
//!
//! What the tap passes is bounded ([`TapLimits`]): a body (or a frame, or
//! a gRPC message as JSON) longer than the limit is cut and marked
//! truncated with its full length; a stream's frames beyond the limit are
//! counted, not passed. The headers listed are those the transport set;
//! the HTTP client adds `Host`, `Content-Length`, `User-Agent` and the
//! like when it writes the request, and tonic the gRPC framing headers.
//!
//! Without a tap, a transport pays one branch per call. The 0.3
//! compatibility transports are not tapped.
//!
//! [`WireLog`] is a ready-made observer keeping the last exchanges,
//! assembled. To match exchanges with your own calls, run a call inside
//! [`scope`]: its exchanges carry the label.
//!
//! ```no_run
//! # async fn demo() -> Result<(), agentwire_client::ClientError> {
//! use std::sync::Arc;
//! use agentwire_client::Client;
//! use agentwire_client::tap::{self, Tap, WireLog};
//!
//! let log = Arc::new(WireLog::new(100));
//! let client = Client::builder()
//!     .tap(Tap::new(log.clone()))
//!     .connect("http://127.0.0.1:8080")
//!     .await?;
//! tap::scope("first call", client.send_text("hello")).await?;
//! for x in log.with_label("first call") {
//!     println!("{} {} -> {:?}", x.method, x.url, x.status);
//!     if let Some(body) = &x.request_body {
//!         println!("sent: {}", body.text());
//!     }
//! }
//! # Ok(()) }
//! ```

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde::Serialize;
use serde::ser::SerializeStruct;

use crate::sse::SseEvent;
use crate::transport::Binding;

/// What a redacted value is replaced with.
pub const REDACTED: &str = "<redacted>";

/// Headers (and gRPC metadata keys) always redacted, lowercase.
pub const SECRET_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
];

/// How much the tap passes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TapLimits {
    /// Bytes of one body kept (request, response, one stream frame, one
    /// gRPC message as JSON); the rest is dropped and the body marked
    /// truncated.
    pub max_body_bytes: usize,
    /// Frames of one stream passed on; later ones are only counted
    /// ([`TapEnd::frames_dropped`]).
    pub max_frames: usize,
}

impl Default for TapLimits {
    /// 256 KiB a body, 1,000 frames a stream.
    fn default() -> Self {
        Self {
            max_body_bytes: 256 * 1024,
            max_frames: 1000,
        }
    }
}

/// A body as captured: its first bytes (up to the limit) and its length.
#[derive(Clone, PartialEq, Eq)]
pub struct TapBody {
    bytes: Bytes,
    len: usize,
}

impl TapBody {
    /// Captures `bytes`, keeping at most `max` of them.
    pub fn capture(bytes: &[u8], max: usize) -> Self {
        Self {
            bytes: Bytes::copy_from_slice(&bytes[..bytes.len().min(max)]),
            len: bytes.len(),
        }
    }

    /// The bytes kept (all of them unless [`is_truncated`](Self::is_truncated)).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The length of the whole body.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the body was empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether bytes were dropped (the body was longer than the limit).
    pub fn is_truncated(&self) -> bool {
        self.bytes.len() < self.len
    }

    /// The bytes kept as text (invalid UTF-8 replaced by U+FFFD).
    pub fn text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.bytes)
    }
}

impl fmt::Debug for TapBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TapBody")
            .field("text", &self.text())
            .field("len", &self.len)
            .field("truncated", &self.is_truncated())
            .finish()
    }
}

/// `{"text": ..., "length": N, "truncated": bool}`.
impl Serialize for TapBody {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("TapBody", 3)?;
        st.serialize_field("text", &self.text())?;
        st.serialize_field("length", &self.len)?;
        st.serialize_field("truncated", &self.is_truncated())?;
        st.end()
    }
}

/// One frame of a stream: a Server-Sent Event, or a gRPC stream message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TapFrame {
    /// Its position in the stream, from 0.
    pub index: u64,
    /// Time since the request was sent.
    #[serde(rename = "offsetMs", serialize_with = "ser_ms")]
    pub elapsed: Duration,
    /// The SSE event type (`message` when the event names none; `message`
    /// for gRPC).
    pub event: String,
    /// The event id: the SSE `id:` last seen, or on gRPC the id the
    /// stream's numbering gives the message.
    pub id: Option<String>,
    /// The SSE `data:` lines joined with `\n`, exactly as received; on gRPC
    /// the message as JSON.
    pub data: TapBody,
}

/// How an exchange ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TapEnd {
    /// Time since the request was sent.
    #[serde(rename = "durationMs", serialize_with = "ser_ms")]
    pub elapsed: Duration,
    /// Why it failed, when it did at the transport level (unreachable,
    /// timeout, connection reset, a gRPC status other than OK, the caller
    /// dropping a stream before its end). An answer with an error status
    /// and body is not a failure here: the answer is in the exchange.
    pub error: Option<String>,
    /// Frames received (passed on or not).
    pub frames: u64,
    /// Frames received beyond [`TapLimits::max_frames`], not passed on.
    pub frames_dropped: u64,
}

/// What an observer is told, in this order for one exchange: one
/// `Request`, at most one `Response`, any `Frame`s, one `End`.
#[derive(Debug, Clone)]
pub enum TapEvent {
    /// The request went out: the exchange with its request parts.
    Request(Box<Exchange>),
    /// The response head arrived (and, for a unary call, its whole body).
    Response {
        /// The exchange id.
        exchange: u64,
        /// The HTTP status (`None` on gRPC).
        status: Option<u16>,
        /// Response headers / gRPC response metadata, redacted.
        headers: Vec<(String, String)>,
        /// The whole body of a unary answer (on gRPC, the message as JSON);
        /// `None` for a stream.
        body: Option<TapBody>,
        /// Time since the request was sent.
        elapsed: Duration,
    },
    /// A frame of a stream.
    Frame {
        /// The exchange id.
        exchange: u64,
        /// The frame.
        frame: TapFrame,
    },
    /// The exchange ended.
    End {
        /// The exchange id.
        exchange: u64,
        /// How.
        end: TapEnd,
    },
}

impl TapEvent {
    /// The id of the exchange the event belongs to.
    pub fn exchange_id(&self) -> u64 {
        match self {
            TapEvent::Request(x) => x.id,
            TapEvent::Response { exchange, .. }
            | TapEvent::Frame { exchange, .. }
            | TapEvent::End { exchange, .. } => *exchange,
        }
    }
}

/// One exchange with the agent, assembled from its events.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Exchange {
    /// Unique among the exchanges of one [`Tap`] (and its clones).
    pub id: u64,
    /// The label of the [`scope`] the call ran in.
    pub label: Option<String>,
    /// The binding.
    #[serde(serialize_with = "ser_binding")]
    pub binding: Binding,
    /// The A2A operation (`SendMessage`...).
    pub operation: &'static str,
    /// The HTTP method, or on gRPC the method path
    /// (`/lf.a2a.v1.A2AService/SendMessage`).
    pub method: String,
    /// The URL (API-key query parameters redacted); on gRPC the endpoint.
    pub url: String,
    /// When the request went out.
    #[serde(rename = "atMs", serialize_with = "ser_time")]
    pub started: SystemTime,
    /// The request headers / metadata the transport set, redacted.
    pub request_headers: Vec<(String, String)>,
    /// The exact request body (on gRPC, the request message as JSON);
    /// `None` for a request without body (an HTTP+JSON `GET`).
    pub request_body: Option<TapBody>,
    /// The HTTP status of the answer (`None` on gRPC, or before it came).
    pub status: Option<u16>,
    /// Response headers / gRPC response metadata, redacted.
    pub response_headers: Vec<(String, String)>,
    /// The exact body of a unary answer (on gRPC, the message as JSON).
    pub response_body: Option<TapBody>,
    /// Time from the request to the response head.
    #[serde(rename = "responseMs", serialize_with = "ser_opt_ms")]
    pub response_after: Option<Duration>,
    /// The stream's frames (a stream answer).
    pub frames: Vec<TapFrame>,
    /// Whether the answer was a stream.
    pub streamed: bool,
    /// How it ended; `None` while it is still open.
    pub end: Option<TapEnd>,
}

impl Exchange {
    /// Whether the exchange has not ended yet (a stream still open).
    pub fn is_open(&self) -> bool {
        self.end.is_none()
    }

    /// Applies one event of this exchange (a `Request` event is ignored).
    pub fn apply(&mut self, event: &TapEvent) {
        match event {
            TapEvent::Request(_) => {}
            TapEvent::Response {
                status,
                headers,
                body,
                elapsed,
                ..
            } => {
                self.status = *status;
                self.response_headers.clone_from(headers);
                self.response_body.clone_from(body);
                self.response_after = Some(*elapsed);
                self.streamed = body.is_none();
            }
            TapEvent::Frame { frame, .. } => {
                self.streamed = true;
                self.frames.push(frame.clone());
            }
            TapEvent::End { end, .. } => self.end = Some(end.clone()),
        }
    }
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn ser_opt_ms<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => ser_ms(d, s),
        None => s.serialize_none(),
    }
}

fn ser_time<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    ser_ms(&t.duration_since(UNIX_EPOCH).unwrap_or_default(), s)
}

fn ser_binding<S: serde::Serializer>(b: &Binding, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(b.as_str())
}

/// Receives the events of every exchange of a tapped client or transport.
///
/// Called inline, on the task making the call: keep it quick (store,
/// forward to a channel). Any `Fn(TapEvent) + Send + Sync` is one.
pub trait TapObserver: Send + Sync {
    /// One event of one exchange.
    fn on_event(&self, event: TapEvent);
}

impl<F: Fn(TapEvent) + Send + Sync> TapObserver for F {
    fn on_event(&self, event: TapEvent) {
        self(event)
    }
}

impl<T: TapObserver + ?Sized> TapObserver for Arc<T> {
    fn on_event(&self, event: TapEvent) {
        (**self).on_event(event)
    }
}

/// A wire tap: an observer, its limits and what to redact. Cheap to clone
/// (clones share the observer and the exchange numbering).
#[derive(Clone)]
pub struct Tap {
    observer: Arc<dyn TapObserver>,
    next_id: Arc<AtomicU64>,
    limits: TapLimits,
    /// Extra header / metadata names to redact, lowercase.
    headers: Arc<Vec<String>>,
    /// Query parameter names to redact (exact).
    query: Arc<Vec<String>>,
}

impl fmt::Debug for Tap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tap")
            .field("limits", &self.limits)
            .field("redacted_headers", &self.headers)
            .field("redacted_query", &self.query)
            .finish_non_exhaustive()
    }
}

impl Tap {
    /// A tap telling `observer`, with the default limits.
    pub fn new(observer: impl TapObserver + 'static) -> Self {
        Self::from_arc(Arc::new(observer))
    }

    /// A tap telling a shared observer.
    pub fn from_arc(observer: Arc<dyn TapObserver>) -> Self {
        Self {
            observer,
            next_id: Arc::new(AtomicU64::new(1)),
            limits: TapLimits::default(),
            headers: Arc::default(),
            query: Arc::default(),
        }
    }

    /// Uses these limits.
    pub fn with_limits(mut self, limits: TapLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The limits.
    pub fn limits(&self) -> TapLimits {
        self.limits
    }

    /// Also redacts the header (and gRPC metadata key) `name`
    /// (case-insensitive), besides [`SECRET_HEADERS`].
    pub fn redact_header(mut self, name: impl AsRef<str>) -> Self {
        let name = name.as_ref().to_ascii_lowercase();
        if !self.headers.contains(&name) && !SECRET_HEADERS.contains(&name.as_str()) {
            Arc::make_mut(&mut self.headers).push(name);
        }
        self
    }

    /// Also redacts the value of the URL query parameter `name` (and the
    /// gRPC metadata key of that name, where the client puts it on gRPC).
    pub fn redact_query_param(mut self, name: impl Into<String>) -> Self {
        let name = name.into();
        if !self.query.contains(&name) {
            Arc::make_mut(&mut self.query).push(name.clone());
        }
        self.redact_header(name)
    }

    /// Whether a header's value is redacted.
    pub fn is_secret_header(&self, name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        SECRET_HEADERS.contains(&lower.as_str()) || self.headers.contains(&lower)
    }

    /// The value shown for header `name`: redacted when it is a secret.
    pub fn header_value(&self, name: &str, value: &str) -> String {
        if !self.is_secret_header(name) {
            return value.to_owned();
        }
        let auth = name.eq_ignore_ascii_case("authorization")
            || name.eq_ignore_ascii_case("proxy-authorization");
        match value.split_once(' ') {
            Some((scheme, _)) if auth && !scheme.is_empty() => format!("{scheme} {REDACTED}"),
            _ => REDACTED.to_owned(),
        }
    }

    /// `url` with the values of redacted query parameters replaced.
    pub fn redact_url(&self, url: &str) -> String {
        if self.query.is_empty() {
            return url.to_owned();
        }
        let Some((head, rest)) = url.split_once('?') else {
            return url.to_owned();
        };
        let (query, fragment) = match rest.split_once('#') {
            Some((q, f)) => (q, Some(f)),
            None => (rest, None),
        };
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| {
                let name = pair.split('=').next().unwrap_or_default();
                let decoded = percent_encoding::percent_decode_str(&name.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned();
                if self.query.contains(&decoded) {
                    format!("{name}={REDACTED}")
                } else {
                    pair.to_owned()
                }
            })
            .collect();
        let mut out = format!("{head}?{}", pairs.join("&"));
        if let Some(f) = fragment {
            out.push('#');
            out.push_str(f);
        }
        out
    }

    fn headers_of(&self, map: &http::HeaderMap) -> Vec<(String, String)> {
        map.iter()
            .map(|(k, v)| {
                let value = String::from_utf8_lossy(v.as_bytes());
                (k.as_str().to_owned(), self.header_value(k.as_str(), &value))
            })
            .collect()
    }

    fn start(
        &self,
        binding: Binding,
        operation: &'static str,
        method: String,
        url: String,
        request_headers: Vec<(String, String)>,
        request_body: Option<TapBody>,
    ) -> TapCall {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let exchange = Exchange {
            id,
            label: current_label(),
            binding,
            operation,
            method,
            url,
            started: SystemTime::now(),
            request_headers,
            request_body,
            status: None,
            response_headers: Vec::new(),
            response_body: None,
            response_after: None,
            frames: Vec::new(),
            streamed: false,
            end: None,
        };
        self.observer
            .on_event(TapEvent::Request(Box::new(exchange)));
        TapCall {
            tap: self.clone(),
            id,
            started: Instant::now(),
            head: None,
            frames: 0,
            dropped: 0,
            ended: false,
        }
    }

    /// Starts an exchange for an HTTP request about to be sent.
    pub(crate) fn http_request(
        &self,
        binding: Binding,
        operation: &'static str,
        req: &reqwest::Request,
    ) -> TapCall {
        let body = req
            .body()
            .and_then(reqwest::Body::as_bytes)
            .map(|b| TapBody::capture(b, self.limits.max_body_bytes));
        self.start(
            binding,
            operation,
            req.method().to_string(),
            self.redact_url(req.url().as_str()),
            self.headers_of(req.headers()),
            body,
        )
    }

    /// Starts an exchange for a gRPC request about to be sent.
    #[cfg(feature = "grpc")]
    pub(crate) fn grpc_request<T: Serialize>(
        &self,
        service: &str,
        operation: &'static str,
        url: &str,
        req: &tonic::Request<T>,
    ) -> TapCall {
        let method = format!("/{service}/{operation}");
        let headers = self.metadata_of(req.metadata());
        let body = self.json_body(req.get_ref());
        self.start(
            Binding::Grpc,
            operation,
            method,
            url.to_owned(),
            headers,
            Some(body),
        )
    }

    #[cfg(feature = "grpc")]
    fn metadata_of(&self, md: &tonic::metadata::MetadataMap) -> Vec<(String, String)> {
        self.headers_of(&md.clone().into_headers())
    }

    #[cfg(feature = "grpc")]
    fn json_body<T: Serialize>(&self, message: &T) -> TapBody {
        match serde_json::to_vec(message) {
            Ok(v) => TapBody::capture(&v, self.limits.max_body_bytes),
            Err(e) => TapBody::capture(
                format!("(the message cannot be shown as JSON: {e})").as_bytes(),
                self.limits.max_body_bytes,
            ),
        }
    }
}

tokio::task_local! {
    static LABEL: String;
}

/// Runs `future` with `label` on every exchange it makes (its
/// [`Exchange::label`]), to match exchanges with your own calls. Stream
/// frames and ends carry their exchange's id, so polling a stream outside
/// the scope is fine.
pub async fn scope<F: Future>(label: impl Into<String>, future: F) -> F::Output {
    LABEL.scope(label.into(), future).await
}

/// The label of the current [`scope`], if any.
pub fn current_label() -> Option<String> {
    LABEL.try_with(Clone::clone).ok()
}

/// The response head of an HTTP exchange, kept until its body is read.
struct Head {
    status: Option<u16>,
    headers: Vec<(String, String)>,
    elapsed: Duration,
}

/// One exchange in progress; tells the observer its end when dropped (a
/// stream the caller stopped reading).
pub(crate) struct TapCall {
    tap: Tap,
    id: u64,
    started: Instant,
    head: Option<Head>,
    frames: u64,
    dropped: u64,
    ended: bool,
}

impl TapCall {
    fn emit(&self, event: TapEvent) {
        self.tap.observer.on_event(event);
    }

    /// Keeps the response head (status, headers) of an HTTP answer; it is
    /// passed on with the body ([`TapCall::body`]) or, for a stream, at once
    /// ([`TapCall::flush_head`]).
    pub(crate) fn http_head(&mut self, resp: &reqwest::Response) {
        self.head = Some(Head {
            status: Some(resp.status().as_u16()),
            headers: self.tap.headers_of(resp.headers()),
            elapsed: self.started.elapsed(),
        });
    }

    /// Passes on the head with the whole body of a unary answer.
    pub(crate) fn body(&mut self, body: &[u8]) {
        let head = self.head.take().unwrap_or(Head {
            status: None,
            headers: Vec::new(),
            elapsed: self.started.elapsed(),
        });
        self.emit(TapEvent::Response {
            exchange: self.id,
            status: head.status,
            headers: head.headers,
            body: Some(TapBody::capture(body, self.tap.limits.max_body_bytes)),
            elapsed: head.elapsed,
        });
    }

    /// Passes on the head of a stream answer.
    pub(crate) fn flush_head(&mut self) {
        if let Some(head) = self.head.take() {
            self.emit(TapEvent::Response {
                exchange: self.id,
                status: head.status,
                headers: head.headers,
                body: None,
                elapsed: head.elapsed,
            });
        }
    }

    /// A gRPC answer's metadata and, for a unary call, its message.
    #[cfg(feature = "grpc")]
    pub(crate) fn grpc_response<R: Serialize>(
        &mut self,
        md: &tonic::metadata::MetadataMap,
        message: Option<&R>,
    ) {
        let body = message.map(|m| self.tap.json_body(m));
        self.emit(TapEvent::Response {
            exchange: self.id,
            status: None,
            headers: self.tap.metadata_of(md),
            body,
            elapsed: self.started.elapsed(),
        });
    }

    /// A gRPC status other than OK: its metadata as the response head, its
    /// code and message as the end.
    #[cfg(feature = "grpc")]
    pub(crate) fn grpc_status(mut self, status: &tonic::Status) {
        self.grpc_fail(status);
    }

    /// [`TapCall::grpc_status`] for a stream's last item.
    #[cfg(feature = "grpc")]
    pub(crate) fn grpc_fail(&mut self, status: &tonic::Status) {
        if self.ended {
            return;
        }
        if !status.metadata().is_empty() {
            self.emit(TapEvent::Response {
                exchange: self.id,
                status: None,
                headers: self.tap.metadata_of(status.metadata()),
                body: None,
                elapsed: self.started.elapsed(),
            });
        }
        let name = agentwire_types::grpc_status_name(status.code() as i32);
        self.finish(Some(format!("{name}: {}", status.message())));
    }

    fn frame(&mut self, event: &str, id: Option<String>, data: &[u8]) {
        let index = self.frames;
        self.frames += 1;
        if index >= self.tap.limits.max_frames as u64 {
            self.dropped += 1;
            return;
        }
        let frame = TapFrame {
            index,
            elapsed: self.started.elapsed(),
            event: event.to_owned(),
            id,
            data: TapBody::capture(data, self.tap.limits.max_body_bytes),
        };
        self.emit(TapEvent::Frame {
            exchange: self.id,
            frame,
        });
    }

    /// One Server-Sent Event as received.
    pub(crate) fn sse_frame(&mut self, ev: &SseEvent) {
        self.frame(&ev.event, ev.id.clone(), ev.data.as_bytes());
    }

    /// One gRPC stream message.
    #[cfg(feature = "grpc")]
    pub(crate) fn grpc_frame<R: Serialize>(&mut self, message: &R, id: Option<String>) {
        if self.frames >= self.tap.limits.max_frames as u64 {
            self.frames += 1;
            self.dropped += 1;
            return;
        }
        let body = self.tap.json_body(message);
        self.frame("message", id, body.bytes());
    }

    /// Ends the exchange (`error`: a transport-level failure).
    pub(crate) fn end(mut self, error: Option<&dyn fmt::Display>) {
        self.finish(error.map(ToString::to_string));
    }

    /// Ends the exchange with a failure (a stream's last item); later
    /// calls change nothing.
    pub(crate) fn fail(&mut self, error: String) {
        self.finish(Some(error));
    }

    fn finish(&mut self, error: Option<String>) {
        if self.ended {
            return;
        }
        self.ended = true;
        self.flush_head();
        let end = TapEnd {
            elapsed: self.started.elapsed(),
            error,
            frames: self.frames,
            frames_dropped: self.dropped,
        };
        self.emit(TapEvent::End {
            exchange: self.id,
            end,
        });
    }
}

impl Drop for TapCall {
    fn drop(&mut self) {
        if !self.ended {
            self.finish(Some(
                "the caller stopped before the exchange ended (a stream closed early, a timeout or a cancellation)".into(),
            ));
        }
    }
}

/// A stream whose items are told to a [`TapCall`] (by `on_item`) and whose
/// end ends the exchange.
pub(crate) struct Tapped<S, F> {
    inner: std::pin::Pin<Box<S>>,
    call: TapCall,
    on_item: F,
}

impl<S, F> Tapped<S, F>
where
    S: futures::Stream,
    F: FnMut(&mut TapCall, &S::Item) + Unpin,
{
    pub(crate) fn new(inner: S, call: TapCall, on_item: F) -> Self {
        Self {
            inner: Box::pin(inner),
            call,
            on_item,
        }
    }
}

impl<S, F> futures::Stream for Tapped<S, F>
where
    S: futures::Stream,
    F: FnMut(&mut TapCall, &S::Item) + Unpin,
{
    type Item = S::Item;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<S::Item>> {
        let this = &mut *self;
        match this.inner.as_mut().poll_next(cx) {
            std::task::Poll::Ready(Some(item)) => {
                (this.on_item)(&mut this.call, &item);
                std::task::Poll::Ready(Some(item))
            }
            std::task::Poll::Ready(None) => {
                this.call.finish(None);
                std::task::Poll::Ready(None)
            }
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    }
}

/// A bounded log of the last exchanges, assembled from their events: a
/// ready-made [`TapObserver`] (share it with an `Arc`).
///
/// ```
/// use std::sync::Arc;
/// use agentwire_client::tap::{Tap, WireLog};
/// let log = Arc::new(WireLog::new(50));
/// let tap = Tap::new(log.clone());
/// # let _ = tap;
/// assert!(log.exchanges().is_empty());
/// ```
#[derive(Debug)]
pub struct WireLog {
    capacity: usize,
    exchanges: Mutex<VecDeque<Exchange>>,
}

impl WireLog {
    /// A log keeping the last `capacity` exchanges (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            exchanges: Mutex::new(VecDeque::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Exchange>> {
        self.exchanges.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The exchanges kept, oldest first.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.lock().iter().cloned().collect()
    }

    /// The exchanges made in the [`scope`] labelled `label`, oldest first.
    pub fn with_label(&self, label: &str) -> Vec<Exchange> {
        self.lock()
            .iter()
            .filter(|x| x.label.as_deref() == Some(label))
            .cloned()
            .collect()
    }

    /// The exchange of this id, if still kept.
    pub fn get(&self, id: u64) -> Option<Exchange> {
        self.lock().iter().rev().find(|x| x.id == id).cloned()
    }

    /// Forgets every exchange.
    pub fn clear(&self) {
        self.lock().clear();
    }
}

impl TapObserver for WireLog {
    fn on_event(&self, event: TapEvent) {
        let mut log = self.lock();
        match event {
            TapEvent::Request(x) => {
                while log.len() >= self.capacity {
                    log.pop_front();
                }
                log.push_back(*x);
            }
            other => {
                let id = other.exchange_id();
                if let Some(x) = log.iter_mut().rev().find(|x| x.id == id) {
                    x.apply(&other);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collecting() -> (Tap, Arc<WireLog>) {
        let log = Arc::new(WireLog::new(10));
        (Tap::new(log.clone()), log)
    }

    #[test]
    fn credentials_are_redacted_before_the_observer_sees_them() {
        let (tap, _) = collecting();
        let tap = tap
            .redact_header("X-Custom-Key")
            .redact_query_param("api_key");
        assert_eq!(
            tap.header_value("Authorization", "Bearer s3cret"),
            "Bearer <redacted>"
        );
        assert_eq!(tap.header_value("authorization", "s3cret"), REDACTED);
        assert_eq!(tap.header_value("Cookie", "sid=s3cret"), REDACTED);
        assert_eq!(tap.header_value("x-custom-key", "s3cret"), REDACTED);
        assert_eq!(tap.header_value("X-API-Key", "s3cret"), REDACTED);
        assert_eq!(tap.header_value("A2A-Version", "1.0"), "1.0");
        assert_eq!(
            tap.redact_url("http://h/rpc?a=1&api_key=s3cret&b=2#f"),
            "http://h/rpc?a=1&api_key=<redacted>&b=2#f"
        );
        assert_eq!(tap.redact_url("http://h/rpc?a=1"), "http://h/rpc?a=1");
        // The query name is a gRPC metadata key too.
        assert!(tap.is_secret_header("API_KEY"));
    }

    #[test]
    fn a_request_is_captured_exactly_and_redacted() {
        let (tap, log) = collecting();
        let body = br#"{ "jsonrpc":"2.0",  "id":1 }"#;
        let mut req = reqwest::Request::new(
            reqwest::Method::POST,
            "http://127.0.0.1:1/rpc".parse().unwrap(),
        );
        req.headers_mut()
            .insert("authorization", "Bearer s3cret".parse().unwrap());
        req.headers_mut()
            .insert("a2a-version", "1.0".parse().unwrap());
        *req.body_mut() = Some(reqwest::Body::from(body.to_vec()));
        let call = scope_sync("mine", || {
            tap.http_request(Binding::JsonRpc, "GetTask", &req)
        });
        call.end(None);
        let x = &log.exchanges()[0];
        assert_eq!(x.label.as_deref(), Some("mine"));
        assert_eq!(x.operation, "GetTask");
        assert_eq!(x.method, "POST");
        assert_eq!(x.request_body.as_ref().unwrap().bytes(), body);
        let text = format!("{:?}", x.request_headers);
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains("Bearer <redacted>"), "{text}");
        assert!(!x.is_open());
        assert_eq!(x.end.as_ref().unwrap().error, None);
    }

    /// Runs `f` inside a label scope on a current-thread runtime.
    fn scope_sync<R>(label: &str, f: impl FnOnce() -> R) -> R {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(scope(label.to_owned(), async move { f() }))
    }

    #[test]
    fn bodies_and_frames_are_bounded() {
        let log = Arc::new(WireLog::new(10));
        let tap = Tap::new(log.clone()).with_limits(TapLimits {
            max_body_bytes: 4,
            max_frames: 2,
        });
        let b = TapBody::capture(b"0123456789", 4);
        assert_eq!(b.bytes(), b"0123");
        assert_eq!(b.len(), 10);
        assert!(b.is_truncated());
        assert_eq!(
            serde_json::to_value(&b).unwrap(),
            serde_json::json!({"text": "0123", "length": 10, "truncated": true})
        );
        let mut call = tap.start(
            Binding::HttpJson,
            "SubscribeToTask",
            "GET".into(),
            "u".into(),
            vec![],
            None,
        );
        for i in 0..5 {
            call.sse_frame(&SseEvent {
                event: "message".into(),
                data: format!("frame number {i}"),
                id: Some(i.to_string()),
            });
        }
        call.end(None);
        let x = &log.exchanges()[0];
        assert_eq!(x.frames.len(), 2);
        assert_eq!(x.frames[1].data.text(), "fram");
        assert!(x.frames[1].data.is_truncated());
        assert_eq!(x.frames[1].id.as_deref(), Some("1"));
        let end = x.end.as_ref().unwrap();
        assert_eq!((end.frames, end.frames_dropped), (5, 3));
        assert!(x.streamed);
    }

    #[test]
    fn a_dropped_call_ends_with_a_reason_and_the_log_is_bounded() {
        let log = Arc::new(WireLog::new(2));
        let tap = Tap::new(log.clone());
        for _ in 0..3 {
            let call = tap.start(
                Binding::Grpc,
                "GetTask",
                "m".into(),
                "u".into(),
                vec![],
                None,
            );
            drop(call);
        }
        let xs = log.exchanges();
        assert_eq!(xs.len(), 2);
        assert_eq!(xs[0].id, 2);
        assert!(
            xs[1]
                .end
                .as_ref()
                .unwrap()
                .error
                .as_deref()
                .unwrap()
                .contains("stopped")
        );
        assert!(log.get(1).is_none());
        assert_eq!(current_label(), None);
    }

    #[test]
    fn events_are_told_in_order_to_a_closure() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let tap = Tap::new(move |e: TapEvent| {
            let kind = match e {
                TapEvent::Request(_) => "request",
                TapEvent::Response { .. } => "response",
                TapEvent::Frame { .. } => "frame",
                TapEvent::End { .. } => "end",
            };
            s.lock().unwrap().push(kind);
        });
        let mut call = tap.start(
            Binding::JsonRpc,
            "SendMessage",
            "POST".into(),
            "u".into(),
            vec![],
            None,
        );
        call.body(b"{}");
        call.end(None);
        assert_eq!(*seen.lock().unwrap(), ["request", "response", "end"]);
    }
}
