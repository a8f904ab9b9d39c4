//! What `a2a serve` tells about itself: one log line per request on every
//! binding (RFC 3339 time, request id, caller's trace id, binding,
//! operation, task, outcome, status, duration), `--log-format json`, an
//! `X-Request-Id` on every response (the caller's when sane), and no
//! credential ever in the log.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentwire_client::{CallOptions, GrpcTransport, JsonRpcTransport, RestTransport, Transport};
use agentwire_types::{GetTaskRequest, Message, SendMessageRequest, TaskPushNotificationConfig};
use serde_json::Value;

/// Bound on every wait.
const LIMIT: Duration = Duration::from_secs(30);

/// A trace id sent in `traceparent`.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// Credentials the calls carry, none of which may reach the log.
const SECRETS: [&str; 3] = ["sekrit-bearer-1", "sekrit-key-2", "sekrit-push-3"];

/// A running `a2a serve` and what it writes on stderr.
pub struct Served {
    child: Child,
    /// `http://127.0.0.1:PORT`
    pub url: String,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Served {
    /// Starts `a2a serve --port 0 ARGS` (with `--store memory` unless ARGS
    /// name a store) with `env`.
    pub fn start(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_a2a"));
        cmd.arg("serve");
        for (k, _) in std::env::vars() {
            if k.starts_with("A2ACLI_") || k.starts_with("A2A_") || k == "RUST_LOG" {
                cmd.env_remove(k);
            }
        }
        if !args.contains(&"--store") {
            cmd.args(["--store", "memory"]);
        }
        let mut child = cmd
            .args(["--port", "0"])
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
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
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let lines = Arc::clone(&stderr);
        let err = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                lines.lock().expect("lines").push(line);
            }
        });
        Self { child, url, stderr }
    }

    /// The lines written on stderr so far.
    pub fn log(&self) -> Vec<String> {
        self.stderr.lock().expect("lines").clone()
    }

    /// Waits until a line of the log satisfies `f`; returns it.
    pub fn wait_for(&self, what: &str, f: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            if let Some(l) = self.log().into_iter().find(|l| f(l)) {
                return l;
            }
            assert!(
                start.elapsed() < LIMIT,
                "no log line {what} within {LIMIT:?}:\n{}",
                self.log().join("\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Call options with credentials, a trace and a request id.
fn options(request_id: &str) -> CallOptions {
    CallOptions::new()
        .with_bearer_token(SECRETS[0])
        .with_service_param("X-API-Key", SECRETS[1])
        .with_service_param("traceparent", format!("00-{TRACE_ID}-00f067aa0ba902b7-01"))
        .with_service_param("X-Request-Id", request_id)
}

/// Whether `s` is an RFC 3339 UTC time as the log writes it
/// (`2026-11-01T10:00:00.123456Z`).
fn rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && s.ends_with('Z')
}

/// The JSON log line of the request `id`.
fn line_of(served: &Served, id: &str) -> Value {
    let needle = format!("\"request_id\":\"{id}\"");
    let line = served.wait_for(&format!("for {id}"), |l| {
        l.contains(&needle) && l.contains("\"answered\"")
    });
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_binding_logs_one_json_line_per_request_without_secrets() {
    // At debug level: not even the debug lines may carry a credential.
    let served = Served::start(&["--log-format", "json"], &[("RUST_LOG", "debug")]);
    let url = served.url.clone();
    let send = SendMessageRequest {
        message: Some(Message::user_text("hello").with_message_id("m-1")),
        ..Default::default()
    };
    let rpc = JsonRpcTransport::new(format!("{url}/")).expect("JSON-RPC");
    let sent = rpc
        .send_message(send, &options("req-jsonrpc-1"))
        .await
        .expect("SendMessage");
    let task = sent.task().expect("a task").id.clone();
    let get = GetTaskRequest {
        id: task.clone(),
        ..Default::default()
    };
    let rest = RestTransport::new(url.clone()).expect("REST");
    rest.get_task(get.clone(), &options("req-rest-1"))
        .await
        .expect("GetTask over REST");
    let grpc = GrpcTransport::connect(url.clone()).await.expect("gRPC");
    grpc.get_task(get, &options("req-grpc-1"))
        .await
        .expect("GetTask over gRPC");
    let missing = GetTaskRequest {
        id: "no-such-task".into(),
        ..Default::default()
    };
    assert!(
        grpc.get_task(missing, &options("req-grpc-2"))
            .await
            .is_err()
    );
    // A push notification token in a request body (accepted or not).
    let _ = rpc
        .create_task_push_notification_config(
            TaskPushNotificationConfig {
                task_id: task.clone(),
                url: "http://127.0.0.1:9/hook".into(),
                token: SECRETS[2].into(),
                ..Default::default()
            },
            &options("req-push-1"),
        )
        .await;

    for (id, binding, operation, with_task) in [
        ("req-jsonrpc-1", "jsonrpc", "SendMessage", true),
        ("req-rest-1", "rest", "GetTask", true),
        ("req-grpc-1", "grpc", "GetTask", true),
        ("req-grpc-2", "grpc", "GetTask", false),
        (
            "req-push-1",
            "jsonrpc",
            "CreateTaskPushNotificationConfig",
            false,
        ),
    ] {
        let line = line_of(&served, id);
        let fields = &line["fields"];
        assert_eq!(fields["binding"], binding, "{line}");
        assert_eq!(fields["operation"], operation, "{line}");
        assert_eq!(line["span"]["trace_id"], TRACE_ID, "{line}");
        assert_eq!(line["span"]["client"], "127.0.0.1", "{line}");
        assert_eq!(line["level"], "INFO", "{line}");
        assert!(
            rfc3339(line["timestamp"].as_str().unwrap_or_default()),
            "{line}"
        );
        assert!(fields["duration_ms"].as_f64().is_some(), "{line}");
        if with_task {
            assert_eq!(fields["task_id"], task.as_str(), "{line}");
            assert_eq!(fields["outcome"], "ok", "{line}");
        }
    }
    let missing = line_of(&served, "req-grpc-2");
    assert_eq!(missing["fields"]["outcome"], "NOT_FOUND", "{missing}");

    let log = served.log().join("\n");
    for secret in SECRETS {
        assert!(!log.contains(secret), "{secret} was logged:\n{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_carry_a_request_id_and_text_lines_a_time() {
    // No RUST_LOG: the default filter logs the requests.
    let served = Served::start(&[], &[]);
    agentwire_client::install_crypto_provider();
    let http = reqwest::Client::new();
    let card = format!("{}/.well-known/agent-card.json", served.url);
    let get = |id: Option<&'static str>| {
        let mut r = http.get(&card);
        if let Some(id) = id {
            r = r.header("X-Request-Id", id);
        }
        r.send()
    };
    let id_of = |r: &reqwest::Response| {
        r.headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .expect("an X-Request-Id")
    };
    // A new id when the caller sends none, or one that is not sane.
    let fresh = id_of(&get(None).await.expect("card"));
    let (random, count) = fresh.split_once('-').expect("two parts");
    assert!(
        random.len() == 16
            && count.len() == 16
            && fresh.bytes().all(|b| b == b'-' || b.is_ascii_hexdigit()),
        "a random number and a count, in hex: {fresh}"
    );
    assert_ne!(id_of(&get(None).await.expect("card")), fresh, "ids differ");
    let replaced = id_of(&get(Some("two words")).await.expect("card"));
    assert_ne!(replaced, "two words");
    let long = "x".repeat(200);
    let r = http
        .get(&card)
        .header("X-Request-Id", long.as_str())
        .send()
        .await
        .expect("card");
    assert_ne!(id_of(&r), long);
    // The caller's otherwise, on errors too.
    assert_eq!(
        id_of(&get(Some("caller-id-7")).await.expect("card")),
        "caller-id-7"
    );
    let r = http
        .post(format!("{}/", served.url))
        .header("X-Request-Id", "caller-id-8")
        .body("not json")
        .send()
        .await
        .expect("a JSON-RPC answer");
    assert_eq!(id_of(&r), "caller-id-8");

    let line = served.wait_for("for caller-id-8", |l| l.contains("request_id=caller-id-8"));
    assert!(
        rfc3339(line.split_whitespace().next().unwrap_or_default()),
        "{line}"
    );
    for part in [
        "INFO",
        "client=127.0.0.1}",
        "binding=jsonrpc",
        "outcome=PARSE_ERROR",
        "status=200",
        "duration_ms=",
    ] {
        assert!(line.contains(part), "{part} in {line}");
    }
    let card_line = served.wait_for("for caller-id-7", |l| l.contains("request_id=caller-id-7"));
    assert!(
        card_line.contains("path=/.well-known/agent-card.json"),
        "{card_line}"
    );
    // A caller that is not a trusted proxy is logged as itself, whatever
    // it forwards for.
    let r = http
        .get(&card)
        .header("X-Request-Id", "caller-id-9")
        .header("X-Forwarded-For", "203.0.113.5")
        .send()
        .await
        .expect("card");
    assert_eq!(id_of(&r), "caller-id-9");
    let line = served.wait_for("for caller-id-9", |l| l.contains("request_id=caller-id-9"));
    assert!(line.contains("client=127.0.0.1}"), "{line}");
}

/// Behind a trusted reverse proxy, the line names the client the proxy
/// forwards for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_name_the_client_behind_a_trusted_proxy() {
    let served = Served::start(&["--trusted-proxy", "127.0.0.1"], &[]);
    agentwire_client::install_crypto_provider();
    let r = reqwest::Client::new()
        .get(format!("{}/.well-known/agent-card.json", served.url))
        .header("X-Request-Id", "proxied-1")
        .header("X-Forwarded-For", "198.51.100.1, 203.0.113.5")
        .send()
        .await
        .expect("card");
    assert_eq!(r.status(), 200);
    let line = served.wait_for("for proxied-1", |l| l.contains("request_id=proxied-1"));
    assert!(line.contains("client=203.0.113.5}"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_endpoints_and_grpc_health_and_reflection() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = format!("sqlite:{}", dir.path().join("tasks.db").display());
    let served = Served::start(&["--store", &store], &[]);
    agentwire_client::install_crypto_provider();
    let http = reqwest::Client::new();
    for (path, status) in [("/healthz", "ok"), ("/readyz", "ready")] {
        let r = http
            .get(format!("{}{path}", served.url))
            .send()
            .await
            .expect(path);
        assert_eq!(r.status(), 200, "{path}");
        let body: Value = r.json().await.expect("JSON");
        assert_eq!(body["status"], status, "{path}: {body}");
    }

    let channel = tonic::transport::Endpoint::from_shared(served.url.clone())
        .expect("endpoint")
        .connect()
        .await
        .expect("connect over gRPC");
    use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus};
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    // The 0.3 service (served beside 1.0 by default) too.
    for service in ["", "lf.a2a.v1.A2AService", "a2a.v1.A2AService"] {
        let answer = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .expect("grpc.health.v1 Check")
            .into_inner();
        assert_eq!(answer.status(), ServingStatus::Serving, "{service:?}");
    }

    // What `grpcurl list` asks: the services, by server reflection; and
    // what `grpcurl describe a2a.v1.A2AService` asks: its file.
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    let names = reflection_services(channel.clone()).await;
    for expected in [
        "lf.a2a.v1.A2AService",
        "a2a.v1.A2AService",
        "grpc.health.v1.Health",
    ] {
        assert!(
            names.contains(&expected.to_owned()),
            "{expected} in {names:?}"
        );
    }
    let answer = reflect(
        channel,
        MessageRequest::FileContainingSymbol("a2a.v1.A2AService".into()),
    )
    .await;
    let Some(MessageResponse::FileDescriptorResponse(files)) = answer.message_response else {
        panic!("no file for the 0.3 service: {answer:?}");
    };
    assert!(!files.file_descriptor_proto.is_empty());

    // Without 0.3, neither names it.
    let served = Served::start(&["--no-v03"], &[]);
    let channel = tonic::transport::Endpoint::from_shared(served.url.clone())
        .expect("endpoint")
        .connect()
        .await
        .expect("connect over gRPC");
    let names = reflection_services(channel.clone()).await;
    assert!(
        names.contains(&"lf.a2a.v1.A2AService".to_owned()),
        "{names:?}"
    );
    assert!(
        !names.contains(&"a2a.v1.A2AService".to_owned()),
        "{names:?}"
    );
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let answer = health
        .check(HealthCheckRequest {
            service: "a2a.v1.A2AService".into(),
        })
        .await;
    assert_eq!(
        answer
            .map(|a| a.into_inner().status())
            .map_err(|s| s.code()),
        Err(tonic::Code::NotFound),
        "the 0.3 service has no health status without 0.3"
    );
}

/// One server reflection (v1) request's answer.
async fn reflect(
    channel: tonic::transport::Channel,
    request: tonic_reflection::pb::v1::server_reflection_request::MessageRequest,
) -> tonic_reflection::pb::v1::ServerReflectionResponse {
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    let mut reflection = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(request),
    };
    let mut answers = reflection
        .server_reflection_info(futures::stream::iter([request]))
        .await
        .expect("server reflection")
        .into_inner();
    answers
        .message()
        .await
        .expect("a reflection answer")
        .expect("one message")
}

/// The services server reflection lists (`grpcurl list`).
async fn reflection_services(channel: tonic::transport::Channel) -> Vec<String> {
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    let answer = reflect(channel, MessageRequest::ListServices(String::new())).await;
    let Some(MessageResponse::ListServicesResponse(list)) = answer.message_response else {
        panic!("not a list of services: {answer:?}");
    };
    list.service.into_iter().map(|s| s.name).collect()
}

/// The text of `/metrics` at `url`.
async fn metrics_text(url: &str) -> String {
    agentwire_client::install_crypto_provider();
    let r = reqwest::get(url).await.expect("/metrics");
    assert_eq!(r.status(), 200, "{url}");
    let kind = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
    r.text().await.expect("text")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_of_the_live_state_streams_turns_tasks_and_push() {
    let served = Served::start(
        &[
            "--agent",
            "conformance",
            "--tck-streaming-timeout",
            "10m",
            "--metrics",
        ],
        &[],
    );
    let gauge = |text: &str, name: &str| -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
    };
    let text = metrics_text(&format!("{}/metrics", served.url)).await;
    for name in [
        "a2a_active_streams",
        "a2a_waiting_calls",
        "a2a_executor_turns_in_flight",
        r#"a2a_live_tasks{state="working"}"#,
        "a2a_push_outbox_pending",
        "a2a_push_enqueued_total",
        "a2a_push_failed_attempts_total",
    ] {
        assert_eq!(gauge(&text, name), Some(0.0), "{name} at 0 in:\n{text}");
    }

    // A task the agent keeps working on, and a stream open on it.
    agentwire_client::install_crypto_provider();
    let mut stream = reqwest::Client::new()
        .post(format!("{}/", served.url))
        .header("A2A-Version", "1.0")
        .header("content-type", "application/json")
        .body(
            serde_json::json!({
                "jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
                "params": {"message": {
                    "messageId": "test-resubscribe-message-id-metrics",
                    "role": "ROLE_USER", "parts": [{"text": "keep working"}]
                }}
            })
            .to_string(),
        )
        .send()
        .await
        .expect("a stream");
    let first = tokio::time::timeout(LIMIT, stream.chunk())
        .await
        .expect("the stream's first event in time")
        .expect("a chunk");
    assert!(first.is_some(), "the stream opened");
    let text = metrics_text(&format!("{}/metrics", served.url)).await;
    for name in [
        "a2a_active_streams",
        "a2a_executor_turns_in_flight",
        r#"a2a_live_tasks{state="working"}"#,
    ] {
        assert_eq!(gauge(&text, name), Some(1.0), "{name} at 1 in:\n{text}");
    }
    // The stream closed: no stream left.
    drop(stream);
    let start = Instant::now();
    loop {
        let text = metrics_text(&format!("{}/metrics", served.url)).await;
        if gauge(&text, "a2a_active_streams") == Some(0.0) {
            break;
        }
        assert!(
            start.elapsed() < LIMIT,
            "the closed stream still counted:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let text = metrics_text(&format!("{}/metrics", served.url)).await;
    assert!(!text.contains("task_id"));
    // Every metric served (once a request was answered) is in docs/observability.md's table, and every
    // metric there is served.
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/observability.md"),
    )
    .expect("docs/observability.md");
    let documented: std::collections::BTreeSet<&str> = docs
        .lines()
        .filter_map(|l| l.strip_prefix("| `a2a_")?.split('`').next())
        .collect();
    let served_names: std::collections::BTreeSet<String> = text
        .lines()
        .filter_map(|l| {
            let name = l.strip_prefix("# TYPE a2a_")?.split(' ').next()?;
            let kind = l.rsplit(' ').next()?;
            // OpenMetrics names a counter's family without its `_total`.
            Some(if kind == "counter" {
                format!("{name}_total")
            } else {
                name.to_owned()
            })
        })
        .collect();
    let served_names: std::collections::BTreeSet<&str> =
        served_names.iter().map(String::as_str).collect();
    assert_eq!(
        served_names, documented,
        "the metrics served (left) and those in docs/observability.md (right)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_on_the_agent_port_and_on_a_port_of_their_own() {
    let served = Served::start(&["--metrics"], &[]);
    let rpc = JsonRpcTransport::new(format!("{}/", served.url)).expect("JSON-RPC");
    let send = SendMessageRequest {
        message: Some(Message::user_text("count me").with_message_id("m-1")),
        ..Default::default()
    };
    rpc.send_message(send, &CallOptions::new())
        .await
        .expect("SendMessage");
    let text = metrics_text(&format!("{}/metrics", served.url)).await;
    for part in [
        r#"a2a_requests_total{binding="jsonrpc",operation="SendMessage",outcome="ok"} 1"#,
        "# TYPE a2a_request_duration_seconds histogram",
        r#"a2a_request_duration_seconds_count{binding="jsonrpc",operation="SendMessage"} 1"#,
    ] {
        assert!(text.contains(part), "{part} in:\n{text}");
    }
    assert!(!text.contains("task_id"), "{text}");

    // Off by default.
    let plain = Served::start(&[], &[]);
    let r = reqwest::get(format!("{}/metrics", plain.url))
        .await
        .expect("an answer");
    assert_eq!(r.status(), 404);

    // On a port of their own: not on the agent's.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let addr = format!("127.0.0.1:{port}");
    let apart = Served::start(&["--metrics-addr", &addr], &[]);
    let rest = RestTransport::new(apart.url.clone()).expect("REST");
    let missing = GetTaskRequest {
        id: "no-such-task".into(),
        ..Default::default()
    };
    assert!(rest.get_task(missing, &CallOptions::new()).await.is_err());
    let text = metrics_text(&format!("http://{addr}/metrics")).await;
    let counted =
        r#"a2a_requests_total{binding="rest",operation="GetTask",outcome="TASK_NOT_FOUND"} 1"#;
    assert!(text.contains(counted), "{counted} in:\n{text}");
    let r = reqwest::get(format!("{}/metrics", apart.url))
        .await
        .expect("an answer");
    assert_eq!(r.status(), 404);
}

/// The count of `a2a_store_operation_duration_seconds` for `store` and
/// `operation` in a scrape (0 when the series is not there yet).
fn store_op_count(text: &str, store: &str, operation: &str) -> u64 {
    let series = format!(
        r#"a2a_store_operation_duration_seconds_count{{store="{store}",operation="{operation}"}} "#
    );
    text.lines()
        .find_map(|l| l.strip_prefix(&series)?.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_operation_latency_on_memory_and_sqlite() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite = format!("sqlite:{}", dir.path().join("tasks.db").display());
    for (store, kind) in [("memory", "memory"), (sqlite.as_str(), "sqlite")] {
        let served = Served::start(&["--metrics", "--store", store], &[]);
        let url = format!("{}/metrics", served.url);
        let before = metrics_text(&url).await;
        assert!(
            before.contains("# TYPE a2a_store_operation_duration_seconds histogram"),
            "{before}"
        );
        let rpc = JsonRpcTransport::new(format!("{}/", served.url)).expect("JSON-RPC");
        let rest = RestTransport::new(served.url.clone()).expect("REST");
        let mut ids = Vec::new();
        for i in 0..3 {
            let send = SendMessageRequest {
                message: Some(
                    Message::user_text("time my store").with_message_id(format!("m-{kind}-{i}")),
                ),
                ..Default::default()
            };
            let answer = rpc
                .send_message(send, &CallOptions::new())
                .await
                .expect("SendMessage");
            ids.push(answer.task().expect("a task").id.clone());
        }
        for id in &ids {
            let get = GetTaskRequest {
                id: id.clone(),
                ..Default::default()
            };
            rest.get_task(get, &CallOptions::new())
                .await
                .expect("GetTask");
        }
        let list = agentwire_types::ListTasksRequest::default();
        rest.list_tasks(list, &CallOptions::new())
            .await
            .expect("ListTasks");
        let after = metrics_text(&url).await;
        // Every task was written, then read three times over, then listed.
        for (operation, at_least) in [("create", 3), ("get", 3), ("list", 1)] {
            let (b, a) = (
                store_op_count(&before, kind, operation),
                store_op_count(&after, kind, operation),
            );
            assert!(
                a >= b + at_least,
                "{kind} {operation}: {b} before, {a} after, in:\n{after}"
            );
        }
        let bucket = format!(
            r#"a2a_store_operation_duration_seconds_bucket{{le="+Inf",store="{kind}",operation="get"}}"#
        );
        assert!(after.contains(&bucket), "{bucket} in:\n{after}");
        assert!(!after.contains("task_id"), "{after}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_preflight_and_answers_for_an_allowed_origin() {
    let origin = "https://app.example.com";
    let served = Served::start(&["--cors-origin", origin], &[]);
    agentwire_client::install_crypto_provider();
    let http = reqwest::Client::new();
    let preflight = http
        .request(reqwest::Method::OPTIONS, format!("{}/", served.url))
        .header("Origin", origin)
        .header("Access-Control-Request-Method", "POST")
        .header(
            "Access-Control-Request-Headers",
            "content-type, a2a-version",
        )
        .send()
        .await
        .expect("a preflight answer");
    assert!(preflight.status().is_success(), "{}", preflight.status());
    let h = preflight.headers();
    assert_eq!(h["access-control-allow-origin"], origin);
    let allowed = h["access-control-allow-headers"]
        .to_str()
        .unwrap_or_default();
    assert!(allowed.contains("a2a-version"), "{allowed}");
    // The call itself (the JSON-RPC fast path) carries the origin too.
    let r = http
        .post(format!("{}/", served.url))
        .header("Origin", origin)
        .body("{}")
        .send()
        .await
        .expect("an answer");
    assert_eq!(r.headers()["access-control-allow-origin"], origin);
    // Another origin is not allowed.
    let r = http
        .post(format!("{}/", served.url))
        .header("Origin", "https://elsewhere.example")
        .body("{}")
        .send()
        .await
        .expect("an answer");
    assert!(r.headers().get("access-control-allow-origin").is_none());
    // Without --cors-origin, no CORS at all.
    let plain = Served::start(&[], &[]);
    let r = http
        .post(format!("{}/", plain.url))
        .header("Origin", origin)
        .body("{}")
        .send()
        .await
        .expect("an answer");
    assert!(r.headers().get("access-control-allow-origin").is_none());
}

impl Served {
    /// Sends SIGTERM and waits (bounded) for the process to end: its exit
    /// status.
    fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill -TERM");
        assert!(sent.success());
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                start.elapsed() < LIMIT,
                "a2a serve did not stop within {LIMIT:?} of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_within_the_grace_period_and_no_task_is_left_working() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = format!("sqlite:{}", dir.path().join("tasks.db").display());
    let args = [
        "--agent",
        "conformance",
        "--tck-streaming-timeout",
        "10m",
        "--shutdown-grace",
        "1s",
        "--store",
        &store,
    ];
    let mut served = Served::start(&args, &[]);
    let rpc = JsonRpcTransport::new(format!("{}/", served.url)).expect("JSON-RPC");
    let send = SendMessageRequest {
        message: Some(
            Message::user_text("still working").with_message_id("test-resubscribe-message-id-1"),
        ),
        configuration: Some(agentwire_types::SendMessageConfiguration {
            return_immediately: true,
            ..Default::default()
        }),
        ..Default::default()
    };
    let task = rpc
        .send_message(send, &CallOptions::new())
        .await
        .expect("SendMessage")
        .task()
        .expect("a task")
        .id
        .clone();
    // A stream open on the working task.
    agentwire_client::install_crypto_provider();
    let mut stream = reqwest::Client::new()
        .post(format!("{}/", served.url))
        .header("A2A-Version", "1.0")
        .header("content-type", "application/json")
        .body(
            serde_json::json!({
                "jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask",
                "params": {"id": task}
            })
            .to_string(),
        )
        .send()
        .await
        .expect("a stream");
    let first = tokio::time::timeout(LIMIT, stream.chunk())
        .await
        .expect("the stream's first event in time")
        .expect("a chunk");
    assert!(first.is_some(), "the stream opened");

    let status = served.terminate();
    assert!(status.success(), "a2a serve stopped with {status}");
    // The stream ended with the server, with the task's failure as its
    // final event.
    let rest = tokio::time::timeout(LIMIT, async {
        let mut text = String::new();
        while let Ok(Some(chunk)) = stream.chunk().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        text
    })
    .await;
    let rest = rest.expect("the stream did not end");
    let last = rest
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .next_back()
        .unwrap_or_else(|| panic!("no event after SIGTERM: {rest:?}"));
    let last: Value = serde_json::from_str(last.trim()).expect("a JSON-RPC event");
    let update = &last["result"]["statusUpdate"];
    assert_eq!(update["status"]["state"], "TASK_STATE_FAILED", "{last}");
    let said = update["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(said.contains("shut down"), "{last}");

    // Restarted on the same store: the task is not left working.
    let again = Served::start(&args, &[]);
    let rpc = JsonRpcTransport::new(format!("{}/", again.url)).expect("JSON-RPC");
    let t = rpc
        .get_task(
            GetTaskRequest {
                id: task.clone(),
                ..Default::default()
            },
            &CallOptions::new(),
        )
        .await
        .expect("the task after the restart");
    assert_eq!(t.state(), agentwire_types::TaskState::Failed, "{t:?}");
    // Failed, and written, by the server that stopped (not by the crash
    // recovery of the new one).
    let said = t
        .status
        .as_ref()
        .and_then(|s| s.message.as_ref())
        .and_then(|m| m.parts.first())
        .and_then(|p| p.as_text())
        .unwrap_or_default();
    assert!(said.contains("shut down"), "{t:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_the_streams_of_waiting_tasks_with_their_status_on_every_binding() {
    use futures::StreamExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let store = format!("sqlite:{}", dir.path().join("tasks.db").display());
    let args = [
        "--agent",
        "conformance",
        "--shutdown-grace",
        "1s",
        "--store",
        &store,
    ];
    let mut served = Served::start(&args, &[]);
    let transports: Vec<(&str, Box<dyn Transport>)> = vec![
        (
            "jsonrpc",
            Box::new(JsonRpcTransport::new(format!("{}/", served.url)).expect("JSON-RPC")),
        ),
        (
            "rest",
            Box::new(RestTransport::new(served.url.clone()).expect("REST")),
        ),
        (
            "grpc",
            Box::new(
                GrpcTransport::connect(served.url.clone())
                    .await
                    .expect("gRPC"),
            ),
        ),
    ];
    // On each binding: a task waiting for input, and a subscription to it
    // (which stays open: only a terminal state ends a subscription).
    let mut open = Vec::new();
    for (binding, t) in &transports {
        let send = SendMessageRequest {
            message: Some(
                Message::user_text("ask me")
                    .with_message_id(format!("tck-input-required-{binding}")),
            ),
            ..Default::default()
        };
        let task = t
            .send_message(send, &CallOptions::new())
            .await
            .expect("SendMessage")
            .task()
            .expect("a task")
            .clone();
        assert_eq!(task.state(), agentwire_types::TaskState::InputRequired);
        let sub = agentwire_types::SubscribeToTaskRequest {
            id: task.id.clone(),
            ..Default::default()
        };
        let mut stream = t
            .subscribe_to_task(sub, &CallOptions::new())
            .await
            .expect("SubscribeToTask");
        let first = tokio::time::timeout(LIMIT, stream.next())
            .await
            .expect("the snapshot in time")
            .expect("an event")
            .expect("not an error");
        assert!(
            matches!(
                first.payload,
                Some(agentwire_types::stream_response::Payload::Task(_))
            ),
            "{binding}: {first:?}"
        );
        open.push((*binding, task, stream));
    }

    let status = served.terminate();
    assert!(status.success(), "a2a serve stopped with {status}");
    for (binding, task, mut stream) in open {
        let mut events = Vec::new();
        let ended = tokio::time::timeout(LIMIT, async {
            while let Some(event) = stream.next().await {
                events.push(event);
            }
        })
        .await;
        assert!(ended.is_ok(), "{binding}: the stream did not end");
        // One last event, the task's status as it is, and a clean end.
        let last = match events.as_slice() {
            [Ok(last)] => last,
            other => panic!("{binding}: not one last event: {other:?}"),
        };
        let update = match &last.payload {
            Some(agentwire_types::stream_response::Payload::StatusUpdate(u)) => u,
            other => panic!("{binding}: not a status update: {other:?}"),
        };
        assert_eq!(update.task_id, task.id, "{binding}");
        assert_eq!(
            update.status.as_ref().map(|s| s.state()),
            Some(agentwire_types::TaskState::InputRequired),
            "{binding}: {update:?}"
        );
    }
    drop(transports);

    // Restarted on the same store: each task still waits for its input,
    // and the answer completes it.
    let again = Served::start(&args, &[]);
    let rpc = JsonRpcTransport::new(format!("{}/", again.url)).expect("JSON-RPC");
    for binding in ["jsonrpc", "rest", "grpc"] {
        let page = rpc
            .list_tasks(
                agentwire_types::ListTasksRequest::default(),
                &CallOptions::new(),
            )
            .await
            .expect("ListTasks");
        assert_eq!(page.tasks.len(), 3, "{page:?}");
        let task = page
            .tasks
            .iter()
            .find(|t| {
                t.history
                    .iter()
                    .any(|m| m.message_id == format!("tck-input-required-{binding}"))
            })
            .unwrap_or_else(|| panic!("the {binding} task in {page:?}"));
        assert_eq!(
            task.state(),
            agentwire_types::TaskState::InputRequired,
            "{task:?}"
        );
        let answer = SendMessageRequest {
            message: Some(
                Message::user_text("here it is")
                    .with_message_id(format!("tck-complete-task-{binding}"))
                    .with_task_id(&task.id),
            ),
            ..Default::default()
        };
        let done = rpc
            .send_message(answer, &CallOptions::new())
            .await
            .expect("the answer")
            .task()
            .expect("a task")
            .clone();
        assert_eq!(
            done.state(),
            agentwire_types::TaskState::Completed,
            "{done:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_line_is_written_before_the_server_exits_and_none_at_warn() {
    // The lines are written by a thread of their own: the last ones too,
    // when SIGTERM comes right after their answers, in the requests' order.
    let mut served = Served::start(&[], &[]);
    let http = reqwest::Client::new();
    let card = format!("{}/.well-known/agent-card.json", served.url);
    for n in 0..500 {
        let r = http
            .get(&card)
            .header("X-Request-Id", format!("exit-line-{n}"))
            .send()
            .await
            .expect("card");
        assert_eq!(r.status(), 200);
    }
    served.terminate();
    served.wait_for("of the last request", |l| {
        l.contains("request_id=exit-line-499 ")
    });
    let ids: Vec<String> = served
        .log()
        .iter()
        .filter_map(|l| l.split("request_id=exit-line-").nth(1))
        .map(|rest| rest.split(' ').next().unwrap_or_default().to_owned())
        .collect();
    let expected: Vec<String> = (0..500).map(|n| n.to_string()).collect();
    assert_eq!(ids, expected);

    // RUST_LOG still chooses: no request line at `warn`.
    let mut served = Served::start(&[], &[("RUST_LOG", "warn")]);
    let r = http
        .get(format!("{}/.well-known/agent-card.json", served.url))
        .send()
        .await
        .expect("card");
    assert_eq!(r.status(), 200);
    served.terminate();
    let log = served.log().join("\n");
    assert!(!log.contains("answered"), "{log}");
}
