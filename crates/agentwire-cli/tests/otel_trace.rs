//! One trace across two `a2a` processes: the release coordinator of
//! `a2a demo --agent-url URL` (the client) delegating to the Dependency
//! Compatibility Agent that `a2a serve --agent depcompat --otel` runs,
//! both exporting their spans with OTLP to receivers this test starts
//! (the agent over gRPC, the coordinator over HTTP protobuf), decoded with
//! the `opentelemetry-proto` definitions. On each binding, the spans of
//! both processes share one trace id, and the agent's request spans are
//! children of the coordinator's span.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message as _;

/// Bound on every wait.
const LIMIT: Duration = Duration::from_secs(60);

/// A span as received: the service that sent it and the span.
#[derive(Debug, Clone)]
struct Got {
    service: String,
    span: opentelemetry_proto::tonic::trace::v1::Span,
}

impl Got {
    fn trace_id(&self) -> String {
        hex(&self.span.trace_id)
    }
    fn span_id(&self) -> String {
        hex(&self.span.span_id)
    }
    fn parent_id(&self) -> String {
        hex(&self.span.parent_span_id)
    }
    fn attr(&self, key: &str) -> Option<String> {
        attr(&self.span.attributes, key)
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

fn attr(attrs: &[KeyValue], key: &str) -> Option<String> {
    let v = attrs.iter().find(|kv| kv.key == key)?.value.as_ref()?;
    match v.value.as_ref()? {
        AnyValue::StringValue(s) => Some(s.clone()),
        AnyValue::IntValue(i) => Some(i.to_string()),
        AnyValue::BoolValue(b) => Some(b.to_string()),
        other => Some(format!("{other:?}")),
    }
}

/// What the receivers got, from either protocol.
#[derive(Default, Clone)]
struct Sink(Arc<Mutex<Vec<Got>>>, Arc<Mutex<Vec<String>>>);

impl Sink {
    /// The `x-a2a-test` header and content type of an HTTP export.
    fn saw_http(&self, headers: &http::HeaderMap) {
        let get = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-")
                .to_owned()
        };
        self.1.lock().expect("headers").push(format!(
            "{} {}",
            get("x-a2a-test"),
            get("content-type")
        ));
    }
    fn http_exports(&self) -> Vec<String> {
        self.1.lock().expect("headers").clone()
    }
    fn take(&self, request: ExportTraceServiceRequest) {
        let mut got = self.0.lock().expect("spans");
        for rs in request.resource_spans {
            let service = rs
                .resource
                .as_ref()
                .and_then(|r| attr(&r.attributes, "service.name"))
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for span in ss.spans {
                    got.push(Got {
                        service: service.clone(),
                        span,
                    });
                }
            }
        }
    }
    fn spans(&self) -> Vec<Got> {
        self.0.lock().expect("spans").clone()
    }
}

#[tonic::async_trait]
impl TraceService for Sink {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.take(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// Starts an OTLP receiver on a free loopback port: gRPC
/// (`TraceService/Export`) and HTTP protobuf (`POST /v1/traces`) on the
/// same port. Its base URL.
async fn receiver(sink: Sink) -> String {
    let http_sink = sink.clone();
    let app = axum::Router::new()
        .route(
            "/v1/traces",
            axum::routing::post(move |headers: http::HeaderMap, body: bytes::Bytes| {
                let sink = http_sink.clone();
                async move {
                    sink.saw_http(&headers);
                    match ExportTraceServiceRequest::decode(body) {
                        Ok(request) => {
                            sink.take(request);
                            (
                                http::StatusCode::OK,
                                [(http::header::CONTENT_TYPE, "application/x-protobuf")],
                                ExportTraceServiceResponse::default().encode_to_vec(),
                            )
                        }
                        Err(e) => (
                            http::StatusCode::BAD_REQUEST,
                            [(http::header::CONTENT_TYPE, "text/plain")],
                            format!("not an OTLP trace export: {e}").into_bytes(),
                        ),
                    }
                }
            }),
        )
        .route_service(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            TraceServiceServer::new(sink),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

/// The variables of a process exporting to `endpoint` with `protocol`,
/// every span sampled, the batch sent every 100 ms.
fn otel_env(cmd: &mut Command, endpoint: &str, protocol: &str) {
    for (k, _) in std::env::vars() {
        if k.starts_with("A2ACLI_") || k.starts_with("A2A_") || k.starts_with("OTEL_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        .env("OTEL_TRACES_SAMPLER", "always_on")
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        // Sent with every export (percent-encoded value).
        .env("OTEL_EXPORTER_OTLP_HEADERS", "x-a2a-test=one%20two")
        .env("RUST_LOG", "warn");
}

/// `a2a serve`, killed when dropped.
struct Served {
    child: Child,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_depcompat(endpoint: &str) -> Served {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_a2a"));
    otel_env(&mut cmd, endpoint, "grpc");
    let mut child = cmd
        .args([
            "serve",
            "--agent",
            "depcompat",
            "--store",
            "memory",
            "--port",
            "0",
            "--otel",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start a2a serve");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("the first line");
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_owned();
    Served { child, url }
}

/// Waits until `f` holds of the spans received.
fn wait_for(sink: &Sink, what: &str, f: impl Fn(&[Got]) -> bool) -> Vec<Got> {
    let start = Instant::now();
    loop {
        let spans = sink.spans();
        if f(&spans) {
            return spans;
        }
        assert!(
            start.elapsed() < LIMIT,
            "{what}: not received within {LIMIT:?}; got {:#?}",
            spans
                .iter()
                .map(|g| (&g.service, &g.span.name, g.trace_id()))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinators_trace_continues_in_the_agent_on_every_binding() {
    let sink = Sink::default();
    let endpoint = receiver(sink.clone()).await;
    let agent = serve_depcompat(&endpoint);

    for (transport, binding) in [
        ("JSONRPC", "jsonrpc"),
        ("HTTP+JSON", "rest"),
        ("GRPC", "grpc"),
    ] {
        let before: std::collections::HashSet<String> =
            sink.spans().iter().map(Got::trace_id).collect();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_a2a"));
        otel_env(&mut cmd, &endpoint, "http/protobuf");
        cmd.args(["demo", "--transport", transport, "--agent-url", &agent.url])
            .stdin(Stdio::null());
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .expect("the demo's thread")
            .expect("run a2a demo");
        assert!(
            out.status.success(),
            "a2a demo over {transport}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );

        // The coordinator's span: the root of a new trace (the demo flushes
        // its spans before it exits).
        let spans = wait_for(&sink, "the coordinator's span", |spans| {
            spans.iter().any(|g| {
                g.service == "a2a-demo"
                    && g.span.name == "a2a demo"
                    && !before.contains(&g.trace_id())
            })
        });
        let root = spans
            .iter()
            .find(|g| {
                g.service == "a2a-demo"
                    && g.span.name == "a2a demo"
                    && !before.contains(&g.trace_id())
            })
            .expect("the root")
            .clone();
        assert!(root.span.parent_span_id.is_empty(), "a root span: {root:?}");
        let trace = root.trace_id();

        // The agent's request spans in the same trace, children of the
        // coordinator's span, on the binding asked for; and the executor's
        // turn a child of one of them.
        let spans = wait_for(&sink, "the agent's spans in the trace", |spans| {
            let requests: Vec<&Got> = spans
                .iter()
                .filter(|g| {
                    g.service == "a2a-depcompat"
                        && g.trace_id() == trace
                        && g.attr("a2a.operation").as_deref() == Some("SendMessage")
                })
                .collect();
            // Every agent span of the trace with its parent received too: a
            // turn's span ends (and is exported) before the request span it
            // hangs from, which may come in a later export batch.
            let ids: std::collections::HashSet<String> = spans
                .iter()
                .filter(|g| g.trace_id() == trace)
                .map(Got::span_id)
                .collect();
            !requests.is_empty()
                && spans.iter().any(|g| {
                    g.service == "a2a-depcompat"
                        && g.span.name == "a2a.execute"
                        && requests.iter().any(|r| r.span_id() == g.parent_id())
                })
                && spans
                    .iter()
                    .filter(|g| g.service == "a2a-depcompat" && g.trace_id() == trace)
                    .all(|g| ids.contains(&g.parent_id()))
        });
        let agent_spans: Vec<&Got> = spans
            .iter()
            .filter(|g| g.service == "a2a-depcompat" && g.trace_id() == trace)
            .collect();
        let calls: Vec<&&Got> = agent_spans
            .iter()
            .filter(|g| g.attr("a2a.operation").is_some())
            .collect();
        assert!(
            !calls.is_empty(),
            "A2A calls in the trace: {agent_spans:#?}"
        );
        for call in &calls {
            assert_eq!(
                call.parent_id(),
                root.span_id(),
                "the agent's {} span is a child of the coordinator's span",
                call.span.name
            );
            assert_eq!(
                call.attr("a2a.binding").as_deref(),
                Some(binding),
                "{transport}: {:?}",
                call.span.attributes
            );
            assert_eq!(
                call.span.kind,
                opentelemetry_proto::tonic::trace::v1::span::SpanKind::Server as i32,
                "{}",
                call.span.name
            );
        }
        let operations: std::collections::BTreeSet<String> = calls
            .iter()
            .filter_map(|g| g.attr("a2a.operation"))
            .collect();
        assert!(
            operations.contains("SendMessage"),
            "{transport}: {operations:?}"
        );
        // Every span of the agent in this trace hangs from the
        // coordinator's span or from another span of the trace.
        let ids: std::collections::HashSet<String> = spans
            .iter()
            .filter(|g| g.trace_id() == trace)
            .map(Got::span_id)
            .collect();
        for g in &agent_spans {
            assert!(
                ids.contains(&g.parent_id()),
                "{} ({transport}) has a parent in the trace",
                g.span.name
            );
        }
    }
    // The coordinator exported over HTTP: each export carried the header of
    // OTEL_EXPORTER_OTLP_HEADERS, decoded, as protobuf.
    let exports = sink.http_exports();
    assert!(!exports.is_empty(), "no HTTP export");
    assert!(
        exports
            .iter()
            .all(|e| e == "one two application/x-protobuf"),
        "{exports:?}"
    );
}
