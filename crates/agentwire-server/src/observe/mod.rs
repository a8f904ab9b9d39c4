//! Observability and operations: what a server tells about itself.
//!
//! - Request ids and the request log ([`layers`]): tower-http's request-id
//!   and trace layers around every connection's service, so every request
//!   (every binding, the agent card, the health endpoints) gets an
//!   `X-Request-Id` (the caller's when it is sane, else a new UUID) in its
//!   response, and one `info` line in the log, target
//!   `agentwire_server::request`, when it is answered.
//! - What a binding tells the log about a call ([`CallInfo`]): the
//!   operation, the task, and the error if the call failed. Each binding
//!   puts it in the response's extensions in one place; the log (and the
//!   metrics) read it from there. No header and no body is ever logged, so
//!   credentials (`Authorization`, API keys, push notification tokens)
//!   cannot end up in the log.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Request, Response};
use tracing::Span;

pub(crate) mod health;
pub mod metrics;
#[cfg(feature = "otel")]
pub mod otel;
#[cfg(feature = "otel")]
mod otlp_http;
pub mod request_log;
pub(crate) mod store_timing;

pub use metrics::Metrics;

/// The log target of the request lines (and of the span every request
/// runs in): `RUST_LOG=agentwire_server::request=info` keeps them alone.
pub const REQUEST_LOG_TARGET: &str = "agentwire_server::request";

/// The header carrying a request's id, in the request and in its response.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The longest request id taken from a caller; a longer one is replaced.
const MAX_REQUEST_ID_LEN: usize = 128;

/// [`REQUEST_ID_HEADER`] as a header name made once: one made from the
/// text at every response is an allocation.
static REQUEST_ID_NAME: http::HeaderName = http::HeaderName::from_static(REQUEST_ID_HEADER);

/// W3C trace context's header as a header name made once (a `&str` name
/// is parsed and hashed again for every request: about 360 instructions of
/// the request line's cost).
static TRACEPARENT_NAME: http::HeaderName = http::HeaderName::from_static("traceparent");

/// What a binding tells the log and the metrics about the call it answered.
///
/// Noted where the binding makes its answer, inside the poll of the
/// request's service, into the call of the request being answered on this
/// thread ([`ObservedFuture`] moves its call in for each poll and out
/// again). In the response's extensions, it cost about 550 instructions a
/// request (their map, its table and the boxed value made and dropped:
/// a sixth of the request line's cost).
#[derive(Debug, Clone, Default)]
pub(crate) struct CallInfo {
    /// `jsonrpc`, `rest` or `grpc`; empty when no binding answered (the
    /// agent card, the health endpoints).
    pub(crate) binding: &'static str,
    /// The operation's name in the specification (`SendMessage`...), or
    /// empty when the request named none that exists.
    pub(crate) operation: &'static str,
    /// The task the call was about, when the path or the answer names it.
    pub(crate) task_id: Option<Box<str>>,
    /// The error's reason (`TASK_NOT_FOUND`...), when the call failed.
    pub(crate) error: Option<&'static str>,
}

thread_local! {
    /// Whether the request being answered on this thread is observed (its
    /// line logged, its metrics counted, its span traced): set by
    /// [`ObservedFuture`] while it polls the request's service.
    static WANTED: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
    /// The call of the request being answered on this thread, while
    /// [`ObservedFuture`] polls its service.
    static CALL: std::cell::RefCell<CallInfo> = const { std::cell::RefCell::new(CallInfo::NONE) };
}

impl CallInfo {
    /// Nothing noted.
    const NONE: CallInfo = CallInfo {
        binding: "",
        operation: "",
        task_id: None,
        error: None,
    };

    /// Whether anyone reads the call info of the request being answered:
    /// when nobody does, the bindings note nothing.
    pub(crate) fn wanted() -> bool {
        WANTED.get()
    }

    /// Notes into the call of the request being answered, when wanted.
    fn note(f: impl FnOnce(&mut CallInfo)) {
        if Self::wanted() {
            CALL.with_borrow_mut(f);
        }
    }

    /// Notes the binding and operation of the call.
    pub(crate) fn operation(binding: &'static str, operation: &'static str) {
        Self::note(|info| {
            info.binding = binding;
            info.operation = operation;
        });
    }

    /// Notes the task the call is about.
    pub(crate) fn task(task_id: &str) {
        if !task_id.is_empty() {
            Self::note(|info| info.task_id = Some(task_id.into()));
        }
    }

    /// Notes the error the call answered with.
    pub(crate) fn error(kind: agentwire_types::ErrorKind) {
        Self::note(|info| info.error = Some(kind.reason()));
    }

    /// Notes the error the call answered with, by its reason.
    pub(crate) fn error_reason(reason: &'static str) {
        Self::note(|info| info.error = Some(reason));
    }

    /// The outcome of the call: `ok`, or the error's reason.
    pub(crate) fn outcome(&self) -> &'static str {
        self.error.unwrap_or("ok")
    }

    /// Runs `poll` with `call` as the call of the request being answered
    /// on this thread, and puts back what was there before.
    fn polling<T>(call: &mut CallInfo, poll: impl FnOnce() -> T) -> T {
        let before = CALL.replace(std::mem::take(call));
        let polled = poll();
        *call = CALL.replace(before);
        polled
    }
}

/// The service of a connection with the request-id and log layer around
/// it, and CORS inside it when configured.
pub(crate) struct Observed<S> {
    inner: tower::util::Either<tower_http::cors::Cors<S>, S>,
    metrics: Option<Arc<Metrics>>,
    peer: Peer,
}

/// Where a connection's requests come from, for their log line: its peer,
/// or, when the peer is a trusted reverse proxy, the client each request
/// is forwarded for (`serving/proxies.rs`).
#[derive(Clone, Default)]
pub(crate) struct Peer {
    pub(crate) addr: Option<std::net::SocketAddr>,
    pub(crate) proxies: Option<crate::serving::proxies::TrustedProxies>,
}

impl Peer {
    /// The client of a request with `headers`.
    fn client(&self, headers: &http::HeaderMap) -> Option<std::net::IpAddr> {
        let addr = self.addr?;
        Some(match &self.proxies {
            Some(proxies) => proxies.client(addr, headers).ip(),
            None => addr.ip(),
        })
    }
}

/// Wraps a connection's service in the request-id and log layer (which
/// counts the requests in `metrics` too, when there are metrics), and
/// tower-http's CORS layer when `cors` is given (inside the log:
/// preflights are logged too).
///
/// One layer written here instead of tower-http's request-id, propagation
/// and trace layers: those three cost about 4,500 instructions a request
/// (three boxed services' futures, the request id stored in the request's
/// extensions, which allocates their map, the span's fields evaluated for
/// the `log` fallback even when nothing listens), a sixth of a whole
/// `SendMessage` on the in-memory store. Here a request whose span and line
/// nobody wants pays for its id and its response header only.
pub(crate) fn layers<S>(
    service: S,
    metrics: Option<Arc<Metrics>>,
    cors: Option<&tower_http::cors::CorsLayer>,
    peer: Peer,
) -> Observed<S> {
    use tower::Layer;
    let inner = match cors {
        Some(cors) => tower::util::Either::Left(cors.layer(service)),
        None => tower::util::Either::Right(service),
    };
    Observed {
        inner,
        metrics,
        peer,
    }
}

impl<S: Clone> Clone for Observed<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            metrics: self.metrics.clone(),
            peer: self.peer.clone(),
        }
    }
}

/// A service that is always ready and answers through a shared
/// reference, so that [`Observed`] serves it to hyper directly: without
/// hyper-util's tower adapter (a clone of the service, its readiness
/// poll and the request moved through a `Oneshot` for every request, about
/// 800 instructions of a `SendMessage`).
pub(crate) trait Answers<Req>: tower::Service<Req> + Clone {
    /// What `tower::Service::call` answers; the service never needs
    /// `poll_ready` first.
    fn answer(&self, request: Req) -> Self::Future;
}

impl<S, B, R> hyper::service::Service<Request<B>> for Observed<S>
where
    S: Answers<Request<B>, Response = Response<R>, Error = std::convert::Infallible>,
    R: Default,
{
    type Response = Response<R>;
    type Error = std::convert::Infallible;
    type Future = ObservedFuture<
        futures::future::Either<
            <tower_http::cors::Cors<S> as tower::Service<Request<B>>>::Future,
            S::Future,
        >,
    >;

    fn call(&self, request: Request<B>) -> Self::Future {
        use tower::Service as _;
        let (id, made) = request_id(request.headers());
        // The line's facts, for the request log's own writer when it is
        // installed and the line is wanted; the span is then made only
        // for traces.
        let line = (request_log::installed()
            && tracing::enabled!(target: REQUEST_LOG_TARGET, tracing::Level::INFO))
        .then(|| {
            Box::new(request_log::Line {
                time: std::time::UNIX_EPOCH,
                request_id: match made {
                    Some(text) => request_log::RequestId::Made(text),
                    None => request_log::RequestId::Given(id.clone()),
                },
                traceparent: request.headers().get(&TRACEPARENT_NAME).cloned(),
                method: request.method().clone(),
                path: request.uri().path_and_query().cloned(),
                client: self.peer.client(request.headers()),
                call: CallInfo::NONE,
                status: 0,
                duration_us: 0,
            })
        });
        let span = request_span(&request, &id, line.is_none(), &self.peer);
        let logged = self.metrics.is_some() || !span.is_none() || line.is_some();
        let start = logged.then(std::time::Instant::now);
        // Where the bindings note the call: in the line, or on its own
        // when only the metrics or the span want it.
        let call = (logged && line.is_none()).then(|| Box::new(CallInfo::NONE));
        let inner = {
            let _entered = span.enter();
            match &self.inner {
                // tower-http's CORS layer is ready when its service is, and
                // `S` always is.
                tower::util::Either::Left(cors) => {
                    futures::future::Either::Left(cors.clone().call(request))
                }
                tower::util::Either::Right(service) => {
                    futures::future::Either::Right(service.answer(request))
                }
            }
        };
        ObservedFuture {
            inner,
            call,
            id: Some(id),
            span,
            line,
            start,
            metrics: self.metrics.clone(),
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`Observed`]: the inner service's, run in the
    /// request's span; the request id goes into the response and the line
    /// into the log when it is ready.
    pub(crate) struct ObservedFuture<F> {
        #[pin]
        inner: F,
        // What the bindings note about the call, when it is observed and
        // not in the line.
        call: Option<Box<CallInfo>>,
        id: Option<HeaderValue>,
        span: Span,
        line: Option<Box<request_log::Line>>,
        start: Option<std::time::Instant>,
        metrics: Option<Arc<Metrics>>,
    }
}

impl<F, R> Future for ObservedFuture<F>
where
    F: Future<Output = Result<Response<R>, std::convert::Infallible>>,
{
    type Output = Result<Response<R>, std::convert::Infallible>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let this = self.project();
        // The line is logged in the span too.
        let _entered = this.span.enter();
        let wanted = WANTED.replace(this.start.is_some());
        let inner = this.inner;
        let call = match (this.line.as_deref_mut(), this.call.as_deref_mut()) {
            (Some(line), _) => Some(&mut line.call),
            (None, call) => call,
        };
        let answer = match call {
            Some(call) => CallInfo::polling(call, || inner.poll(cx)),
            None => inner.poll(cx),
        };
        WANTED.set(wanted);
        let Ok(mut response) = std::task::ready!(answer);
        if let Some(id) = this.id.take() {
            // The caller's id (or the one made for it), unless the service
            // set one itself.
            response.headers_mut().entry(&REQUEST_ID_NAME).or_insert(id);
        }
        if let Some(start) = this.start.take() {
            answered(
                &response,
                this.call.take(),
                start.elapsed(),
                this.span,
                this.line.take(),
                this.metrics.as_deref(),
            );
        }
        std::task::Poll::Ready(Ok(response))
    }
}

/// The id of a request: the caller's when it sent one sane id, else a new
/// one ([`new_request_id`], also as its text).
fn request_id(headers: &HeaderMap) -> (HeaderValue, Option<[u8; MADE_ID_LEN]>) {
    let mut ids = headers.get_all(&REQUEST_ID_NAME).iter();
    match (ids.next(), ids.next()) {
        (Some(one), None) if sane_request_id(one) => (one.clone(), None),
        _ => {
            let text = new_request_id();
            let value =
                HeaderValue::from_bytes(&text).unwrap_or_else(|_| HeaderValue::from_static("-"));
            (value, Some(text))
        }
    }
}

/// The length of the ids the server makes.
pub(crate) const MADE_ID_LEN: usize = 33;

/// A new request id, unique in the process and across processes: a
/// random 64-bit number per thread, then the thread's count of ids (both in
/// hex, `0123456789abcdef-0000000000000001`). No clock and no random
/// number per request: a request id only needs to be unique.
fn new_request_id() -> [u8; MADE_ID_LEN] {
    use std::hash::BuildHasher;
    thread_local! {
        static NEXT: std::cell::Cell<(u64, u64)> = std::cell::Cell::new((
            // Seeded from the operating system's randomness.
            std::collections::hash_map::RandomState::new().hash_one(std::time::SystemTime::now()),
            0,
        ));
    }
    let (prefix, n) = NEXT.with(|c| {
        let (prefix, n) = c.get();
        c.set((prefix, n.wrapping_add(1)));
        (prefix, n)
    });
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = [b'-'; MADE_ID_LEN];
    for (i, shift) in (0..16).map(|i| (i, 60 - 4 * i)) {
        text[i] = HEX[((prefix >> shift) & 15) as usize];
        text[17 + i] = HEX[((n >> shift) & 15) as usize];
    }
    text
}

/// The CORS layer letting pages from `origins` call the agent from a
/// browser: every method, the headers A2A clients send, and the request
/// id readable by the page.
pub(crate) fn cors_layer(origins: &[HeaderValue]) -> tower_http::cors::CorsLayer {
    use tower_http::cors::{AllowHeaders, AllowMethods, AllowOrigin, CorsLayer, ExposeHeaders};
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins.iter().cloned()))
        .allow_methods(AllowMethods::mirror_request())
        .allow_headers(AllowHeaders::mirror_request())
        .expose_headers(ExposeHeaders::list([REQUEST_ID_NAME.clone()]))
        .max_age(Duration::from_secs(600))
}

/// Whether a caller's request id can be used as it is: 1 to 128 visible
/// ASCII characters (no spaces, no control characters), so that it reads
/// back unchanged in the log and cannot forge a log line.
pub(crate) fn sane_request_id(value: &HeaderValue) -> bool {
    let b = value.as_bytes();
    !b.is_empty() && b.len() <= MAX_REQUEST_ID_LEN && b.iter().all(|c| c.is_ascii_graphic())
}

/// The trace id of a W3C `traceparent` header
/// (`00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`), when there
/// is a valid one.
pub(crate) fn trace_id(headers: &HeaderMap) -> Option<&str> {
    trace_id_of(headers.get(&TRACEPARENT_NAME)?.to_str().ok()?)
}

/// The trace id of a `traceparent` header's value, when it is valid.
pub(crate) fn trace_id_of(value: &str) -> Option<&str> {
    let value = value.trim();
    let mut parts = value.split('-');
    let (version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|c| c.is_ascii_hexdigit());
    let valid = hex(version, 2)
        && version != "ff"
        && hex(trace, 32)
        && trace.bytes().any(|c| c != b'0')
        && hex(parent, 16)
        && hex(flags, 2)
        && (version != "00" || parts.next().is_none());
    valid.then_some(trace)
}

/// The span of a request: its id, the caller's trace id, the method and
/// the path (never the query, which may carry credentials). None (and no
/// field read) when nothing would record it: neither the log at `info` for
/// [`REQUEST_LOG_TARGET`] nor OpenTelemetry. `for_log`: whether the log
/// wants it (false when the request log's own writer writes the line).
fn request_span<B>(request: &Request<B>, id: &HeaderValue, for_log: bool, peer: &Peer) -> Span {
    #[cfg(feature = "otel")]
    let traced = otel::enabled();
    #[cfg(not(feature = "otel"))]
    let traced = false;
    let logged =
        for_log && tracing::span_enabled!(target: REQUEST_LOG_TARGET, tracing::Level::INFO);
    if !traced && !logged {
        return Span::none();
    }
    let headers = request.headers();
    let span = tracing::info_span!(
        target: REQUEST_LOG_TARGET,
        "request",
        request_id = %id.to_str().unwrap_or_default(),
        trace_id = trace_id(headers).map(tracing::field::display),
        method = %request.method(),
        path = %request.uri().path(),
        client = peer.client(headers).map(tracing::field::display),
        // The span's kind for OpenTelemetry, recorded only when traces
        // are on (an empty field is not logged).
        otel.kind = tracing::field::Empty,
    );
    // With the `otel` feature on but `otel::init` never run (no `--otel`,
    // no OTLP endpoint), no OpenTelemetry layer is in the subscriber and
    // no exporter exists, so the span is the log's alone, and this is one
    // relaxed atomic load.
    #[cfg(feature = "otel")]
    if traced {
        otel::adopt(&span, headers);
    }
    span
}

/// A request was answered: the metrics count it, and the line is logged
/// (binding, operation, task, outcome, status and how long it took, to
/// the response's head; a stream goes on after it): by the request log's
/// own writer when `line` holds its facts, else as a `tracing` event.
fn answered<B>(
    response: &Response<B>,
    mut own: Option<Box<CallInfo>>,
    latency: Duration,
    _span: &Span,
    mut line: Option<Box<request_log::Line>>,
    metrics: Option<&Metrics>,
) {
    let status = response.status().as_u16();
    let Some(call) = line
        .as_deref_mut()
        .map(|l| &mut l.call)
        .or(own.as_deref_mut())
    else {
        return;
    };
    #[cfg(feature = "otel")]
    if otel::enabled() {
        otel::answered(_span, (!call.binding.is_empty()).then_some(&*call), status);
    }
    // An answer no binding made (the agent card, health, a path that is
    // none of them).
    if call.binding.is_empty() {
        call.binding = "http";
        if status >= 400 {
            call.error = Some("error");
        }
    }
    if let Some(m) = metrics {
        m.request_answered(call.binding, call.operation, call.outcome(), latency);
    }
    if let Some(mut line) = line {
        line.time = std::time::SystemTime::now();
        line.status = status;
        line.duration_us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        match request_log::queue(line) {
            Ok(()) => {}
            // No writer any more: the line goes to `tracing`.
            Err(line) => log_answered(&line.call, status, latency, Some(line.request_id.as_str())),
        }
        return;
    }
    if let Some(call) = own.as_deref()
        && tracing::enabled!(target: REQUEST_LOG_TARGET, tracing::Level::INFO)
    {
        log_answered(call, status, latency, None);
    }
}

/// The request's line as a `tracing` event (in the request's span, which
/// has the request id, unless `request_id` is given).
fn log_answered(call: &CallInfo, status: u16, latency: Duration, request_id: Option<&str>) {
    let operation = (!call.operation.is_empty()).then_some(call.operation);
    tracing::info!(
        target: REQUEST_LOG_TARGET,
        request_id = request_id.map(tracing::field::display),
        binding = %call.binding,
        operation = operation.map(tracing::field::display),
        task_id = call.task_id.as_deref().map(tracing::field::display),
        outcome = %call.outcome(),
        status,
        duration_ms = milliseconds(latency),
        "answered"
    );
}

/// A duration in milliseconds, to the microsecond.
fn milliseconds(latency: Duration) -> f64 {
    (latency.as_secs_f64() * 1e6).round() / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_request_ids_differ() {
        let made = || request_id(&HeaderMap::new());
        let ids: std::collections::HashSet<_> = (0..1000).map(|_| made().0).collect();
        assert_eq!(ids.len(), 1000);
        let (other, text) = std::thread::spawn(made).join().expect("a thread");
        assert!(!ids.contains(&other));
        assert_eq!(text.as_ref().map(|t| &t[..]), Some(other.as_bytes()));
        for id in ids.iter().chain([&other]) {
            assert!(sane_request_id(id), "{id:?}");
            assert_eq!(id.len(), 33);
        }
    }

    #[test]
    fn request_ids_from_callers() {
        let ok = |s: &str| sane_request_id(&HeaderValue::from_str(s).expect("a header value"));
        assert!(ok("abc-123"));
        assert!(ok(&"a".repeat(128)));
        assert!(!ok(&"a".repeat(129)));
        assert!(!ok(""));
        assert!(!ok("two words"));
        assert!(!sane_request_id(
            &HeaderValue::from_bytes(b"caf\xc3\xa9").expect("bytes")
        ));
    }

    #[test]
    fn trace_ids_from_traceparent() {
        let of = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert("traceparent", HeaderValue::from_str(v).expect("value"));
            trace_id(&h).map(str::to_owned)
        };
        assert_eq!(
            of("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        assert_eq!(
            of("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
            None
        );
        assert_eq!(
            of("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"),
            None
        );
        assert_eq!(of("garbage"), None);
        assert_eq!(
            of("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"),
            None
        );
    }
}
