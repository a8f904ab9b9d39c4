//! OpenTelemetry traces, through the `tracing` bridge
//! (`tracing-opentelemetry`), exported with OTLP.
//!
//! Off until [`init`] runs (`a2a serve` runs it with `--otel` or when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is
//! set). Then:
//!
//! - every request's span takes the caller's W3C trace context
//!   (`traceparent`, `tracestate`, `baggage`) from its HTTP headers, which
//!   for gRPC are its metadata, as its parent, and carries the call's
//!   attributes when it is answered (`rpc.system`, `rpc.method`,
//!   `a2a.binding`, `a2a.task.id`, `error.type`...);
//! - the executor's turn runs in a child span (`a2a.execute`), current
//!   while the agent works, so the calls an agent makes with
//!   `agentwire-client` carry the same trace on to the next agent once the
//!   program installs [`injector`] as the client's trace context injector
//!   (`agentwire_client::trace_context::set_injector`);
//! - each push delivery attempt is a span whose context the webhook
//!   request carries.
//!
//! The exporter follows the standard variables: `OTEL_EXPORTER_OTLP_PROTOCOL`
//! (or `_TRACES_PROTOCOL`: `grpc`, or `http/protobuf`, the default),
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `_TRACES_ENDPOINT`), `_HEADERS`,
//! `_TIMEOUT`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_TRACES_SAMPLER` and `_ARG`; `OTEL_SDK_DISABLED=true` keeps it off.
//!
//! When off, the request path pays one relaxed atomic load per request
//! ([`enabled`]): no span is added, no header read.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::{Extractor, Injector, TextMapCompositePropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// The instrumentation scope of the spans.
const SCOPE: &str = "agentwire";

/// Whether traces are on (after a successful [`init`]).
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Whether the environment asks for traces: an OTLP endpoint is set and
/// `OTEL_SDK_DISABLED` is not `true`.
pub fn wanted_by_env() -> bool {
    let set = |v: &str| std::env::var_os(v).is_some_and(|s| !s.is_empty());
    (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        && !sdk_disabled()
}

fn sdk_disabled() -> bool {
    std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// The running trace exporter: flushes the spans still buffered when it
/// is shut down or dropped.
pub struct Otel {
    provider: SdkTracerProvider,
}

impl std::fmt::Debug for Otel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Otel")
    }
}

impl Otel {
    /// The `tracing` layer turning spans into OpenTelemetry spans, for the
    /// program's subscriber.
    pub fn layer<S>(&self) -> impl tracing_subscriber::Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer(SCOPE))
            .with_location(false)
            .with_threads(false)
            // Busy/idle times cost two clock reads at every enter and exit
            // of a span (a request's spans are entered at each poll); no
            // dashboard of ours reads them.
            .with_tracked_inactivity(false)
            // Nothing here reads `opentelemetry::Context::current()`: the
            // trace context is taken from the `tracing` span itself
            // (`injector`), so a context need not be swapped in at every
            // enter and out at every exit.
            .with_context_activation(false)
    }

    /// Exports the spans still buffered and stops the exporter.
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("warning: cannot flush the last traces: {e}");
        }
    }
}

impl Drop for Otel {
    fn drop(&mut self) {
        let _ = self.provider.force_flush();
    }
}

/// Starts the OTLP trace exporter as the `OTEL_*` variables say, with
/// `service_name` when `OTEL_SERVICE_NAME` does not name the service, and
/// turns the trace context on (extraction on requests, injection on the
/// client's calls). Must run inside a Tokio runtime when the protocol is
/// gRPC.
pub fn init(service_name: &str) -> Result<Otel, String> {
    if sdk_disabled() {
        return Err("OTEL_SDK_DISABLED is true".to_owned());
    }
    let protocol = std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_else(|_| "http/protobuf".to_owned());
    let mut provider = SdkTracerProvider::builder();
    match protocol.trim() {
        "grpc" => {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .build()
                .map_err(|e| format!("cannot start the OTLP trace exporter: {e}"))?;
            provider = provider.with_batch_exporter(exporter);
        }
        "http/protobuf" => {
            let exporter = super::otlp_http::HttpExporter::from_env()
                .map_err(|e| format!("cannot start the OTLP trace exporter: {e}"))?;
            provider = provider.with_batch_exporter(exporter);
        }
        "http/json" => {
            return Err(
                "OTEL_EXPORTER_OTLP_PROTOCOL http/json is not supported: use grpc or http/protobuf"
                    .to_owned(),
            );
        }
        other => {
            return Err(format!(
                "unknown OTEL_EXPORTER_OTLP_PROTOCOL {other:?}: use grpc or http/protobuf"
            ));
        }
    }
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none_or(|v| v.is_empty()) {
        resource = resource.with_service_name(service_name.to_owned());
    }
    let provider = provider.with_resource(resource.build()).build();
    opentelemetry::global::set_text_map_propagator(TextMapCompositePropagator::new(vec![
        Box::new(TraceContextPropagator::new()),
        Box::new(BaggagePropagator::new()),
    ]));
    opentelemetry::global::set_tracer_provider(provider.clone());
    ENABLED.store(true, Ordering::Relaxed);
    Ok(Otel { provider })
}

/// The client's injector: the current span's trace context as headers.
pub fn injector(set: &mut dyn FnMut(&str, String)) {
    struct Set<'a>(&'a mut dyn FnMut(&str, String));
    impl Injector for Set<'_> {
        fn set(&mut self, key: &str, value: String) {
            (self.0)(key, value)
        }
    }
    let cx = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&cx, &mut Set(set)));
}

/// Headers as a propagator's carrier.
struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// Marks `span` as a server span and makes the trace context in `headers`
/// (if any) its parent.
pub(crate) fn adopt(span: &tracing::Span, headers: &http::HeaderMap) {
    span.record("otel.kind", "server");
    if headers.get("traceparent").is_none() && headers.get("baggage").is_none() {
        return;
    }
    let cx = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Headers(headers)));
    let _ = span.set_parent(cx);
}

/// Puts what a call was into its span, when it is answered.
pub(crate) fn answered(span: &tracing::Span, info: Option<&super::CallInfo>, status: u16) {
    span.set_attribute("http.response.status_code", i64::from(status));
    let Some(info) = info else {
        return;
    };
    let system = match info.binding {
        "grpc" => "grpc",
        "jsonrpc" => "jsonrpc",
        _ => "http",
    };
    span.set_attribute("rpc.system", system);
    span.set_attribute("a2a.binding", info.binding);
    if !info.operation.is_empty() {
        span.set_attribute("rpc.service", "a2a.v1.A2AService");
        span.set_attribute("rpc.method", info.operation);
        span.set_attribute("a2a.operation", info.operation);
        span.set_attribute("otel.name", format!("a2a {}", info.operation));
    }
    if let Some(task) = &info.task_id {
        span.set_attribute("a2a.task.id", task.to_string());
    }
    if let Some(error) = info.error {
        span.set_attribute("error.type", error);
        span.set_status(opentelemetry::trace::Status::error(error));
    }
}

/// The target of the span of an executor's turn (made only while traces
/// are on): the log leaves it out, so that it reads the same with and
/// without traces.
pub const TURN_TARGET: &str = "agentwire_server::execute";

/// The span of an executor's turn, a child of the current span.
pub(crate) fn turn_span(task_id: &str, context_id: &str) -> tracing::Span {
    tracing::info_span!(
        target: TURN_TARGET,
        "a2a.execute",
        otel.kind = "internal",
        a2a.task.id = %task_id,
        a2a.context.id = %context_id,
        gen_ai.operation.name = "invoke_agent",
    )
}

/// The span of one push delivery attempt.
pub(crate) fn push_span(task_id: &str) -> tracing::Span {
    tracing::info_span!(
        target: "agentwire_server::push",
        "a2a.push.deliver",
        otel.kind = "client",
        a2a.task.id = %task_id,
    )
}

/// The trace context of the current span as headers, for a webhook call.
pub(crate) fn inject_http(mut rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    let mut headers = http::HeaderMap::new();
    injector(&mut |name, value| {
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            headers.insert(n, v);
        }
    });
    rb = rb.headers(headers);
    rb
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_and_injects_w3c_trace_context() {
        use tracing_subscriber::layer::SubscriberExt as _;
        opentelemetry::global::set_text_map_propagator(TextMapCompositePropagator::new(vec![
            Box::new(TraceContextPropagator::new()),
            Box::new(BaggagePropagator::new()),
        ]));
        let provider = SdkTracerProvider::builder().build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        tracing::subscriber::with_default(subscriber, || {
            let mut headers = http::HeaderMap::new();
            headers.insert(
                "traceparent",
                http::HeaderValue::from_static(
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                ),
            );
            headers.insert("baggage", http::HeaderValue::from_static("user=alice"));
            let span = tracing::info_span!("request");
            adopt(&span, &headers);
            let child = span.in_scope(|| turn_span("t1", "c1"));
            let mut out = Vec::new();
            child.in_scope(|| injector(&mut |k, v| out.push((k.to_owned(), v))));
            let tp = out
                .iter()
                .find(|(k, _)| k == "traceparent")
                .map(|(_, v)| v.clone())
                .expect("a traceparent injected");
            assert!(
                tp.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"),
                "{tp}"
            );
            assert!(!tp.contains("00f067aa0ba902b7"), "a new span id: {tp}");
            assert!(
                out.iter()
                    .any(|(k, v)| k == "baggage" && v.contains("user=alice")),
                "{out:?}"
            );
        });
    }
}
