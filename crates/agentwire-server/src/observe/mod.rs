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
use tower::util::MapRequest;
use tower_http::classify::{ServerErrorsAsFailures, SharedClassifier};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestId, SetRequestId};
use tower_http::trace::{MakeSpan, OnResponse, Trace};
use tracing::Span;

pub(crate) mod health;
pub mod metrics;
#[cfg(feature = "otel")]
pub mod otel;
#[cfg(feature = "otel")]
mod otlp_http;
pub(crate) mod store_timing;

pub use metrics::Metrics;

/// The log target of the request lines (and of the span every request
/// runs in): `RUST_LOG=agentwire_server::request=info` keeps them alone.
pub const REQUEST_LOG_TARGET: &str = "agentwire_server::request";

/// The header carrying a request's id, in the request and in its response.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The longest request id taken from a caller; a longer one is replaced.
const MAX_REQUEST_ID_LEN: usize = 128;

/// What a binding tells the log and the metrics about the call it answered,
/// in the response's extensions.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallInfo {
    /// `jsonrpc`, `rest` or `grpc`.
    pub(crate) binding: &'static str,
    /// The operation's name in the specification (`SendMessage`...), or
    /// empty when the request named none that exists.
    pub(crate) operation: &'static str,
    /// The task the call was about, when the path or the answer names it.
    pub(crate) task_id: Option<Box<str>>,
    /// The error's reason (`TASK_NOT_FOUND`...), when the call failed.
    pub(crate) error: Option<&'static str>,
}

impl CallInfo {
    /// The call info of `response`, added when it has none yet.
    pub(crate) fn of<B>(response: &mut Response<B>) -> &mut CallInfo {
        response
            .extensions_mut()
            .get_or_insert_default::<CallInfo>()
    }

    /// Notes the binding and operation of `response`.
    pub(crate) fn operation<B>(
        response: &mut Response<B>,
        binding: &'static str,
        operation: &'static str,
    ) {
        let info = Self::of(response);
        info.binding = binding;
        info.operation = operation;
    }

    /// Notes the task `response` is about.
    pub(crate) fn task<B>(response: &mut Response<B>, task_id: &str) {
        if !task_id.is_empty() {
            Self::of(response).task_id = Some(task_id.into());
        }
    }

    /// Notes the error `response` carries.
    pub(crate) fn error<B>(response: &mut Response<B>, kind: agentwire_types::ErrorKind) {
        Self::of(response).error = Some(kind.reason());
    }

    /// The outcome of the call: `ok`, or the error's reason.
    pub(crate) fn outcome(&self) -> &'static str {
        self.error.unwrap_or("ok")
    }
}

/// The service of a connection with the request-id and log layers around
/// it (outermost first): an insane caller's id dropped, an id set where
/// there is none, the span and log line, the id copied to the response,
/// CORS when configured.
pub(crate) type Observed<S, B> = MapRequest<
    SetRequestId<
        Trace<
            PropagateRequestId<tower::util::Either<tower_http::cors::Cors<S>, S>>,
            SharedClassifier<ServerErrorsAsFailures>,
            RequestSpan,
            (),
            RequestLog,
            (),
            (),
            (),
        >,
        MakeRequestUuid,
    >,
    fn(Request<B>) -> Request<B>,
>;

/// Wraps a connection's service in the request-id and log layers (which
/// count the requests in `metrics` too, when there are metrics), and
/// tower-http's CORS layer when `cors` is given.
pub(crate) fn layers<S, B>(
    service: S,
    metrics: Option<Arc<Metrics>>,
    cors: Option<&tower_http::cors::CorsLayer>,
) -> Observed<S, B> {
    use tower::Layer;
    // CORS inside the log: preflights are logged too.
    let service = match cors {
        Some(cors) => tower::util::Either::Left(cors.layer(service)),
        None => tower::util::Either::Right(service),
    };
    use tower::ServiceBuilder;
    use tower_http::request_id::{PropagateRequestIdLayer, SetRequestIdLayer};
    use tower_http::trace::TraceLayer;
    ServiceBuilder::new()
        .map_request(drop_insane_request_id::<B> as fn(Request<B>) -> Request<B>)
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(RequestSpan)
                .on_request(())
                .on_response(RequestLog { metrics })
                .on_body_chunk(())
                .on_eos(())
                .on_failure(()),
        )
        .layer(PropagateRequestIdLayer::x_request_id())
        .service(service)
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
        .expose_headers(ExposeHeaders::list([http::HeaderName::from_static(
            REQUEST_ID_HEADER,
        )]))
        .max_age(Duration::from_secs(600))
}

/// Whether a caller's request id can be used as it is: 1 to 128 visible
/// ASCII characters (no spaces, no control characters), so that it reads
/// back unchanged in the log and cannot forge a log line.
pub(crate) fn sane_request_id(value: &HeaderValue) -> bool {
    let b = value.as_bytes();
    !b.is_empty() && b.len() <= MAX_REQUEST_ID_LEN && b.iter().all(|c| c.is_ascii_graphic())
}

/// Removes a request id that is not sane (or several), so that a new one
/// is made.
fn drop_insane_request_id<B>(mut request: Request<B>) -> Request<B> {
    let headers = request.headers_mut();
    let mut ids = headers.get_all(REQUEST_ID_HEADER).iter();
    let keep = match (ids.next(), ids.next()) {
        (Some(one), None) => sane_request_id(one),
        (None, _) => true,
        _ => false,
    };
    if !keep {
        headers.remove(REQUEST_ID_HEADER);
    }
    request
}

/// The trace id of a W3C `traceparent` header
/// (`00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`), when there
/// is a valid one.
pub(crate) fn trace_id(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get("traceparent")?.to_str().ok()?.trim();
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
/// the path (never the query, which may carry credentials).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestSpan;

impl<B> MakeSpan<B> for RequestSpan {
    fn make_span(&mut self, request: &Request<B>) -> Span {
        let headers = request.headers();
        let id = headers
            .get(REQUEST_ID_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let span = tracing::info_span!(
            target: REQUEST_LOG_TARGET,
            "request",
            request_id = %id,
            trace_id = trace_id(headers).map(tracing::field::display),
            method = %request.method(),
            path = %request.uri().path(),
            // The span's kind for OpenTelemetry, recorded only when traces
            // are on (an empty field is not logged).
            otel.kind = tracing::field::Empty,
        );
        // Traces off cost nothing more here: with the `otel` feature off
        // this is not compiled; with it on but `otel::init` never run (no
        // `--otel`, no OTLP endpoint), no OpenTelemetry layer is in the
        // subscriber and no exporter exists, so the span is the log's alone
        // (a disabled one when the log filter drops its target), and this is
        // one relaxed atomic load: no header is read, no field recorded.
        #[cfg(feature = "otel")]
        if otel::enabled() {
            otel::adopt(&span, headers);
        }
        span
    }
}

/// The line logged when a request is answered: binding, operation, task,
/// outcome, status and how long it took (to the response's head; a stream
/// goes on after it).
#[derive(Debug, Clone)]
pub(crate) struct RequestLog {
    metrics: Option<Arc<Metrics>>,
}

impl<B> OnResponse<B> for RequestLog {
    fn on_response(self, response: &Response<B>, latency: Duration, _span: &Span) {
        let status = response.status().as_u16();
        let info = response.extensions().get::<CallInfo>();
        #[cfg(feature = "otel")]
        if otel::enabled() {
            otel::answered(_span, info, status);
        }
        let (binding, operation, outcome) = match info {
            Some(i) => (i.binding, i.operation, i.outcome()),
            None if status >= 400 => ("http", "", "error"),
            None => ("http", "", "ok"),
        };
        if let Some(m) = &self.metrics {
            m.request_answered(binding, operation, outcome, latency);
        }
        if !tracing::enabled!(target: REQUEST_LOG_TARGET, tracing::Level::INFO) {
            return;
        }
        let operation = (!operation.is_empty()).then_some(operation);
        let task_id = info.and_then(|i| i.task_id.as_deref());
        let duration_ms = (latency.as_secs_f64() * 1e6).round() / 1e3;
        tracing::info!(
            target: REQUEST_LOG_TARGET,
            binding = %binding,
            operation = operation.map(tracing::field::display),
            task_id = task_id.map(tracing::field::display),
            outcome = %outcome,
            status,
            duration_ms,
            "answered"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
