//! `a2a inspect` as real processes on loopback: a bundled agent served by
//! `a2a serve`, the inspector started beside it, and its local API driven
//! as the page drives it, on each of the three bindings: an input-required
//! turn answered in the same task, a streamed chunked artifact, the
//! timeline and the wire log, a cancel, a push delivery, versions
//! accepted, and the guard against requests not addressed to the
//! inspector (another Host, another Origin).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::Env;
use serde_json::{Value, json};

/// A process of the `a2a` binary whose first line names its URL; killed on
/// drop.
struct Running {
    child: Child,
    url: String,
}

impl Running {
    fn start(env: &Env, args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_a2a"))
            .args(args)
            .env("HOME", env.home())
            .env("XDG_CACHE_HOME", env.home().join(".cache"))
            .env("XDG_CONFIG_HOME", env.home().join(".config"))
            .env_remove("RUST_LOG")
            .current_dir(env.cwd())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a2a");
        let stdout = child.stdout.take().expect("its stdout");
        let mut reader = BufReader::new(stdout);
        let mut first = String::new();
        reader.read_line(&mut first).expect("read the first line");
        std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
        let url = first
            .split_whitespace()
            .find(|w| w.starts_with("http://127.0.0.1:") || w.starts_with("https://127.0.0.1:"))
            .unwrap_or_else(|| panic!("no URL in {first:?}"))
            .trim_end_matches('/')
            .to_owned();
        Self { child, url }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http() -> reqwest::Client {
    agentwire_client::install_crypto_provider();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("HTTP client")
}

async fn post(base: &str, path: &str, body: Value) -> Value {
    let r = http()
        .post(format!("{base}{path}"))
        .json(&body)
        .send()
        .await
        .expect("POST");
    let status = r.status();
    let v: Value = r.json().await.expect("JSON answer");
    assert!(status.is_success(), "{path}: {status} {v}");
    v
}

async fn get(base: &str, path: &str) -> Value {
    let r = http()
        .get(format!("{base}{path}"))
        .send()
        .await
        .expect("GET");
    let status = r.status();
    let v: Value = r.json().await.expect("JSON answer");
    assert!(status.is_success(), "{path}: {status} {v}");
    v
}

/// The state of the last event that carries one.
fn last_state(events: &Value) -> String {
    events
        .as_array()
        .expect("events")
        .iter()
        .rev()
        .find_map(|e| {
            e.pointer("/statusUpdate/status/state")
                .or_else(|| e.pointer("/task/status/state"))
                .and_then(Value::as_str)
        })
        .unwrap_or_default()
        .to_owned()
}

fn task_id(events: &Value) -> String {
    events[0]
        .pointer("/task/id")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no task first in {events}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_binding_from_the_inspector() {
    let env = Env::new();
    let agent = Running::start(
        &env,
        &[
            "serve",
            "--agent",
            "conformance",
            "--port",
            "0",
            "--store",
            "memory",
        ],
    );
    let inspector = Running::start(&env, &["inspect", "--port", "0"]);
    let base = &inspector.url;

    for binding in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        let info = post(
            base,
            "/api/connect",
            json!({"agent": agent.url, "binding": binding}),
        )
        .await;
        assert_eq!(info["selected"]["binding"], binding, "{info}");
        assert_eq!(info["valid"], true, "{info}");
        assert_eq!(info["card"]["name"], "A2A Rust Conformance Agent");

        // A turn that asks for input, then the answer in the same task.
        let first = post(
            base,
            "/api/send",
            json!({"text": "start", "messageId": "tck-input-required", "stream": true}),
        )
        .await;
        let events = &first["events"];
        assert_eq!(last_state(events), "TASK_STATE_INPUT_REQUIRED", "{first}");
        let id = task_id(events);
        let second = post(
            base,
            "/api/send",
            json!({"text": "more input", "taskId": id, "stream": true}),
        )
        .await;
        assert_eq!(
            last_state(&second["events"]),
            "TASK_STATE_COMPLETED",
            "{second}"
        );
        assert!(second.to_string().contains(&id), "{second}");

        // The task's timeline: every event, with its offset, the final one marked.
        let tl = get(base, &format!("/api/timeline/{id}")).await;
        let entries = tl["entries"].as_array().expect("entries");
        assert!(entries.len() >= 3, "{tl}");
        assert!(
            entries
                .iter()
                .all(|e| e["offsetMs"].is_u64() && e["at"].is_string())
        );
        let finals: Vec<&Value> = entries.iter().filter(|e| e["final"] == true).collect();
        assert!(
            finals.iter().any(|e| e["state"] == "TASK_STATE_COMPLETED"),
            "{tl}"
        );

        // A streamed artifact in two chunks.
        let chunked = post(
            base,
            "/api/send",
            json!({"text": "chunks", "messageId": "tck-stream-artifact-chunked", "stream": true}),
        )
        .await;
        let chunks: Vec<&Value> = chunked["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e.get("artifactUpdate").is_some())
            .collect();
        assert_eq!(chunks.len(), 2, "{chunked}");
        assert_eq!(chunks[1]["artifactUpdate"]["append"], true, "{chunked}");

        // The wire log: the calls on this binding, the stream's frames.
        let wire = get(base, "/api/wire").await;
        let calls: Vec<&Value> = wire["calls"]
            .as_array()
            .expect("calls")
            .iter()
            .filter(|c| c["binding"] == binding && c["op"] == "SendStreamingMessage")
            .collect();
        assert!(calls.len() >= 3, "{wire}");
        let last = calls.last().expect("a call");
        // The task, working, two chunks, completed.
        assert_eq!(last["frames"].as_array().map(Vec::len), Some(5), "{last}");
        assert!(
            last["a2a"]
                .as_str()
                .is_some_and(|c| c.starts_with("a2a send -a ") && c.contains(binding)),
            "{last}"
        );
        match binding {
            "JSONRPC" => {
                assert_eq!(last["wire"]["body"]["jsonrpc"], "2.0");
                assert!(
                    last["curl"]
                        .as_str()
                        .is_some_and(|c| c.starts_with("curl "))
                );
            }
            "HTTP+JSON" => {
                assert!(
                    last["wire"]["target"]
                        .as_str()
                        .is_some_and(|t| t.ends_with("/message:stream")),
                    "{last}"
                );
            }
            _ => assert!(
                last["wire"]["method"]
                    .as_str()
                    .is_some_and(|m| m.ends_with("/SendStreamingMessage")),
                "{last}"
            ),
        }

        // Get with a history length.
        let task = get(base, &format!("/api/tasks/{id}?historyLength=1")).await;
        assert_eq!(task["id"], id.as_str());
        assert!(
            task["history"].as_array().map_or(0, Vec::len) <= 1,
            "{task}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_push_and_versions_from_the_inspector() {
    let env = Env::new();
    let agent = Running::start(
        &env,
        &[
            "serve",
            "--agent",
            "conformance",
            "--port",
            "0",
            "--store",
            "memory",
        ],
    );
    // Connected at start by -a: the page opens on the agent's card.
    let inspector = Running::start(&env, &["inspect", "-a", &agent.url]);
    let base = inspector.url.clone();
    let session = get(&base, "/api/session").await;
    assert_eq!(
        session["connected"]["card"]["name"], "A2A Rust Conformance Agent",
        "{session}"
    );

    // Cancel: a long task streamed in the background, canceled by id.
    let b = base.clone();
    let long = tokio::spawn(async move {
        post(
            &b,
            "/api/send",
            json!({"text": "long", "messageId": "test-resubscribe-message-id", "stream": true}),
        )
        .await
    });
    let mut id = None;
    for _ in 0..100 {
        let list = get(&base, "/api/tasks?status=working").await;
        if let Some(t) = list["tasks"].as_array().and_then(|t| t.first()) {
            id = t["id"].as_str().map(str::to_owned);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let id = id.expect("the long task listed as working");
    let canceled = post(&base, &format!("/api/tasks/{id}/cancel"), json!({})).await;
    assert_eq!(
        canceled["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    let streamed = tokio::time::timeout(Duration::from_secs(30), long)
        .await
        .expect("the stream ends after the cancel")
        .expect("the streaming call");
    assert_eq!(
        last_state(&streamed["events"]),
        "TASK_STATE_CANCELED",
        "{streamed}"
    );

    // Push: the embedded receiver gets the task's updates, signature checked.
    let hook = post(&base, "/api/webhook", json!({})).await;
    assert!(
        hook["url"]
            .as_str()
            .is_some_and(|u| u.starts_with("http://127.0.0.1:"))
    );
    let sent = post(
        &base,
        "/api/send",
        json!({"text": "push me", "messageId": "tck-complete-task", "push": true}),
    )
    .await;
    let pushed_task = sent["result"]["task"]["id"]
        .as_str()
        .expect("a task")
        .to_owned();
    let mut deliveries = Vec::new();
    for _ in 0..100 {
        let d = get(&base, "/api/webhook").await;
        deliveries = d["deliveries"].as_array().cloned().unwrap_or_default();
        if deliveries
            .iter()
            .any(|d| d["taskId"] == pushed_task.as_str())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mine: Vec<&Value> = deliveries
        .iter()
        .filter(|d| d["taskId"] == pushed_task.as_str())
        .collect();
    assert!(
        !mine.is_empty(),
        "no delivery for {pushed_task}: {deliveries:?}"
    );
    assert!(
        mine.iter().all(|d| d["signature"]
            .as_str()
            .is_some_and(|s| s.starts_with("verified"))),
        "{mine:?}"
    );

    // Versions: an artifact recorded in the ledger, then accepted.
    let art = post(
        &base,
        "/api/send",
        json!({"text": "artifact", "messageId": "tck-artifact-text", "stream": true}),
    )
    .await;
    assert_eq!(last_state(&art["events"]), "TASK_STATE_COMPLETED", "{art}");
    let versions = get(&base, "/api/versions").await;
    let v = versions["contexts"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["versions"].as_array().cloned().unwrap_or_default())
        .find(|v| v["name"] == "result")
        .unwrap_or_else(|| panic!("no version named result: {versions}"));
    assert_eq!(v["accepted"], false);
    let artifact_id = v["artifactId"].as_str().expect("an id").to_owned();
    let accepted = post(
        &base,
        &format!("/api/versions/{artifact_id}/accept"),
        json!({}),
    )
    .await;
    assert_eq!(accepted["accepted"], true, "{accepted}");

    // Credentials never reach the wire log: the header is named, its value redacted.
    post(
        &base,
        "/api/connect",
        json!({"agent": agent.url, "bearer": "s3cret-token-123"}),
    )
    .await;
    post(
        &base,
        "/api/send",
        json!({"text": "with a token", "messageId": "tck-complete-task"}),
    )
    .await;
    let wire = get(&base, "/api/wire").await;
    let text = wire.to_string();
    assert!(!text.contains("s3cret-token-123"), "{text}");
    let last = wire["calls"]
        .as_array()
        .and_then(|c| c.last())
        .expect("a call");
    assert!(last["headers"].to_string().contains("<redacted>"), "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_inspectors_own_page_is_answered() {
    let env = Env::new();
    let inspector = Running::start(&env, &["inspect"]);
    let base = &inspector.url;
    let port = base.rsplit(':').next().expect("a port");

    // The page and its assets, embedded, with a strict content policy.
    let page = http().get(format!("{base}/")).send().await.expect("GET /");
    assert!(page.status().is_success());
    let csp = page
        .headers()
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(csp.contains("default-src 'self'"), "{csp}");
    assert!(page.text().await.expect("body").contains("A2A Inspector"));
    let js = http()
        .get(format!("{base}/app.js"))
        .send()
        .await
        .expect("GET");
    assert!(js.status().is_success());
    assert!(!js.text().await.expect("body").contains("innerHTML"));

    // Another host name (DNS rebinding): refused.
    let r = http()
        .get(format!("{base}/api/session"))
        .header("Host", format!("attacker.example:{port}"))
        .send()
        .await
        .expect("GET");
    assert_eq!(r.status(), 403);
    // Another site's page: refused, even with the right Host.
    let r = http()
        .post(format!("{base}/api/connect"))
        .header("Origin", "http://attacker.example")
        .json(&json!({"agent": "127.0.0.1:1"}))
        .send()
        .await
        .expect("POST");
    assert_eq!(r.status(), 403);
    // Its own page: answered.
    let r = http()
        .get(format!("{base}/api/session"))
        .header("Origin", format!("http://127.0.0.1:{port}"))
        .send()
        .await
        .expect("GET");
    assert_eq!(r.status(), 200);
    // localhost names the same server.
    let r = http()
        .get(format!("{base}/api/session"))
        .header("Host", format!("localhost:{port}"))
        .send()
        .await
        .expect("GET");
    assert_eq!(r.status(), 200);

    // No agent: a call says so; a bad agent: the error is named.
    let r = http()
        .post(format!("{base}/api/send"))
        .json(&json!({"text": "hi"}))
        .send()
        .await
        .expect("POST");
    assert_eq!(r.status(), 409);
    let r = http()
        .post(format!("{base}/api/connect"))
        .json(&json!({"agent": "127.0.0.1:1"}))
        .send()
        .await
        .expect("POST");
    assert!(r.status().is_client_error() || r.status().is_server_error());
    let v: Value = r.json().await.expect("JSON");
    assert!(v["error"]["message"].is_string(), "{v}");

    // A card with problems: connected, each problem named.
    let bad = env.cwd().join("bad-card.json");
    std::fs::write(
        &bad,
        r#"{"name": "", "description": "<script>alert(1)</script>", "version": "1",
            "supportedInterfaces": [{"url": "http://127.0.0.1:1/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]}"#,
    )
    .expect("write the card");
    let v = post(
        base,
        "/api/connect",
        json!({"agent": bad.display().to_string()}),
    )
    .await;
    assert_eq!(v["valid"], false, "{v}");
    let problems = v["problems"].to_string();
    assert!(problems.contains("name is required"), "{v}");
    assert!(problems.contains("capabilities is required"), "{v}");
    // A 0.x card: recognised as such.
    let old = env.cwd().join("old-card.json");
    std::fs::write(
        &old,
        r#"{"name": "Old", "description": "d", "version": "1", "protocolVersion": "0.3.0", "url": "http://127.0.0.1:1/a2a"}"#,
    )
    .expect("write the card");
    let r = http()
        .post(format!("{base}/api/connect"))
        .json(&json!({"agent": old.display().to_string()}))
        .send()
        .await
        .expect("POST");
    let v: Value = r.json().await.expect("JSON");
    assert_eq!(v["legacy"], true, "{v}");
    // Not JSON at all: the error is named.
    let junk = env.cwd().join("junk.json");
    std::fs::write(&junk, "<html>not a card</html>").expect("write");
    let r = http()
        .post(format!("{base}/api/connect"))
        .json(&json!({"agent": junk.display().to_string()}))
        .send()
        .await
        .expect("POST");
    assert!(!r.status().is_success());
    let v: Value = r.json().await.expect("JSON");
    assert!(v["error"]["message"].is_string(), "{v}");
}

/// What the recording agent of [`wire_view_shows_the_bytes_the_agent_received`]
/// received: each request's headers and exact body.
#[derive(Default)]
struct Received {
    requests: std::sync::Mutex<Vec<(axum::http::HeaderMap, bytes::Bytes)>>,
}

/// The recording agent's answer to `SendMessage`: valid JSON-RPC with
/// spacing and member order no serializer would produce.
const ODD_ANSWER: &str = "{ \"result\" :  { \"task\" : {\"status\":{\"state\":\"TASK_STATE_COMPLETED\"},  \"contextId\":\"ctx-odd\" , \"id\" : \"task-odd\"}} ,\n \"id\":1, \"jsonrpc\" : \"2.0\" }";

/// Its stream: two events with ids, odd spacing, a comment line and a
/// multi-line `data:`.
const ODD_FRAMES: [(&str, &str); 2] = [
    (
        "41",
        "{\"jsonrpc\":\"2.0\", \"id\":1,\n\"result\":{ \"task\":{\"id\":\"task-odd\",\"contextId\":\"ctx-odd\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}",
    ),
    (
        "42",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":  {\"statusUpdate\":{\"taskId\":\"task-odd\",\"contextId\":\"ctx-odd\",\"status\":{\"state\":\"TASK_STATE_COMPLETED\"}}}}",
    ),
];

/// A JSON-RPC agent in this process that records what it receives.
async fn recording_agent() -> (String, Arc<Received>) {
    use axum::routing::{get, post};
    let received = Arc::new(Received::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let card = json!({
        "name": "Recorder", "description": "Records what it receives", "version": "1.0.0",
        "supportedInterfaces": [{"url": format!("{base}/rpc"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": true},
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "rec", "name": "Record", "description": "Records", "tags": ["test"]}],
    });
    let rec = received.clone();
    let app = axum::Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(move || {
                let card = card.clone();
                async move { axum::Json(card) }
            }),
        )
        .route(
            "/rpc",
            post(move |headers: axum::http::HeaderMap, body: bytes::Bytes| {
                let rec = rec.clone();
                async move {
                    let streaming = serde_json::from_slice::<Value>(&body)
                        .ok()
                        .and_then(|v| v["method"].as_str().map(str::to_owned))
                        == Some("SendStreamingMessage".into());
                    rec.requests.lock().expect("lock").push((headers, body));
                    if streaming {
                        let mut sse = String::from(": a comment, not a frame\n\n");
                        for (id, data) in ODD_FRAMES {
                            sse.push_str(&format!("id: {id}\n"));
                            for line in data.split('\n') {
                                sse.push_str(&format!("data: {line}\n"));
                            }
                            sse.push('\n');
                        }
                        (
                            [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
                            sse,
                        )
                    } else {
                        (
                            [(axum::http::header::CONTENT_TYPE, "application/json")],
                            ODD_ANSWER.to_owned(),
                        )
                    }
                }
            }),
        );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (base, received)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wire_view_shows_the_bytes_the_agent_received() {
    let env = Env::new();
    let (agent, received) = recording_agent().await;
    let inspector = Running::start(&env, &["inspect", "--port", "0"]);
    let base = &inspector.url;
    let info = post(
        base,
        "/api/connect",
        json!({"agent": agent, "bearer": "s3cret-xyz-789"}),
    )
    .await;
    assert_eq!(info["selected"]["binding"], "JSONRPC", "{info}");

    // A unary call: the request body the agent got, byte for byte, and its
    // odd answer as it was sent.
    let sent = post(
        base,
        "/api/send",
        json!({"text": "  spaced  \"quoted\" ü "}),
    )
    .await;
    assert_eq!(sent["result"]["task"]["id"], "task-odd", "{sent}");
    let wire = get(base, "/api/wire").await;
    let call = wire["calls"]
        .as_array()
        .and_then(|c| c.iter().rev().find(|c| c["op"] == "SendMessage"))
        .cloned()
        .unwrap_or_else(|| panic!("no SendMessage call in {wire}"));
    let exchanges = call["exchanges"].as_array().expect("exchanges");
    assert_eq!(exchanges.len(), 1, "{call}");
    let x = &exchanges[0];
    let (headers, body) = received.requests.lock().expect("lock")[0].clone();
    assert_eq!(
        x["requestBody"]["text"].as_str().map(str::as_bytes),
        Some(&body[..]),
        "{x}"
    );
    assert_eq!(x["requestBody"]["truncated"], false);
    assert_eq!(x["requestBody"]["length"], body.len());
    assert_eq!(x["responseBody"]["text"], ODD_ANSWER, "{x}");
    assert_eq!(x["status"], 200);
    assert_eq!(x["method"], "POST");
    assert_eq!(x["url"], format!("{agent}/rpc"));
    // The credential reached the agent; the wire view shows it redacted.
    assert_eq!(headers["authorization"], "Bearer s3cret-xyz-789");
    assert!(!wire.to_string().contains("s3cret-xyz-789"), "{wire}");
    assert!(
        x["requestHeaders"]
            .as_array()
            .expect("headers")
            .iter()
            .any(|h| h[0] == "authorization" && h[1] == "Bearer <redacted>"),
        "{x}"
    );
    // Every other header the transport set is shown as sent.
    for (name, want) in [("a2a-version", "1.0"), ("content-type", "application/json")] {
        assert_eq!(headers[name], want);
        assert!(
            x["requestHeaders"]
                .as_array()
                .expect("headers")
                .iter()
                .any(|h| h[0] == name && h[1] == want),
            "{name}: {x}"
        );
    }
    // curl repeats that request: its body exactly.
    let curl = call["curl"].as_str().expect("a curl command");
    let words = shlex::split(curl).expect("a shell command");
    let data = words
        .iter()
        .position(|w| w == "--data-binary")
        .map(|i| words[i + 1].clone())
        .expect("--data-binary");
    assert_eq!(data.as_bytes(), &body[..]);
    assert!(words.contains(&format!("{agent}/rpc")), "{curl}");

    // A stream: each frame's data as received, with its id.
    let streamed = post(
        base,
        "/api/send",
        json!({"text": "stream it", "stream": true}),
    )
    .await;
    assert_eq!(
        last_state(&streamed["events"]),
        "TASK_STATE_COMPLETED",
        "{streamed}"
    );
    let wire = get(base, "/api/wire").await;
    let call = wire["calls"]
        .as_array()
        .and_then(|c| c.iter().rev().find(|c| c["op"] == "SendStreamingMessage"))
        .cloned()
        .expect("the streaming call");
    let x = &call["exchanges"][0];
    let body = received.requests.lock().expect("lock")[1].1.clone();
    assert_eq!(
        x["requestBody"]["text"].as_str().map(str::as_bytes),
        Some(&body[..])
    );
    let frames = x["frames"].as_array().expect("frames");
    assert_eq!(frames.len(), 2, "{x}");
    for (f, (id, data)) in frames.iter().zip(ODD_FRAMES) {
        assert_eq!(f["id"], id, "{f}");
        assert_eq!(f["data"]["text"], data, "{f}");
    }
    assert_eq!(x["end"]["error"], Value::Null, "{x}");
    assert_eq!(x["streamed"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auth_required_turn_is_answered_in_the_same_task() {
    let env = Env::new();
    let agent = Running::start(
        &env,
        &[
            "serve",
            "--agent",
            "conformance",
            "--port",
            "0",
            "--store",
            "memory",
        ],
    );
    let inspector = Running::start(&env, &["inspect", "-a", &agent.url]);
    let base = &inspector.url;
    for binding in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        post(
            base,
            "/api/connect",
            json!({"agent": agent.url, "binding": binding}),
        )
        .await;
        let first = post(
            base,
            "/api/send",
            json!({"text": "my account, please", "messageId": "auth-required", "stream": true}),
        )
        .await;
        let events = &first["events"];
        assert_eq!(last_state(events), "TASK_STATE_AUTH_REQUIRED", "{first}");
        assert!(first.to_string().contains("authorize"), "{first}");
        let id = task_id(events);
        // The task waits; the timeline marks it as waiting for the user.
        let tl = get(base, &format!("/api/timeline/{id}")).await;
        assert!(
            tl["entries"]
                .as_array()
                .expect("entries")
                .iter()
                .any(|e| e["interrupted"] == true && e["state"] == "TASK_STATE_AUTH_REQUIRED"),
            "{tl}"
        );
        let second = post(
            base,
            "/api/send",
            json!({"text": "done, I signed in", "taskId": id, "stream": true}),
        )
        .await;
        assert_eq!(
            last_state(&second["events"]),
            "TASK_STATE_COMPLETED",
            "{second}"
        );
        assert!(second.to_string().contains(&id), "{second}");
    }
}

/// A new Ed25519 key pair as PEM files in `dir`: (private, public).
fn key_pair(dir: &std::path::Path, name: &str) -> (String, String) {
    use agentwire_types::jws::{self, SigningKey};
    let der = SigningKey::generate_ed25519_pkcs8().expect("a key");
    let key = SigningKey::from_pkcs8_der(&der).expect("the key");
    let private = dir.join(format!("{name}.pem"));
    let public = dir.join(format!("{name}.pub.pem"));
    std::fs::write(&private, jws::pkcs8_to_pem(&der).expect("PEM")).expect("write");
    std::fs::write(
        &public,
        jws::public_key_pem(key.verifying_key()).expect("PEM"),
    )
    .expect("write");
    (private.display().to_string(), public.display().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cards_signature_status_is_shown() {
    let env = Env::new();
    let (key, public) = key_pair(env.home(), "card-key");
    let signed = Running::start(
        &env,
        &[
            "serve",
            "--agent",
            "echo",
            "--port",
            "0",
            "--store",
            "memory",
            "--sign-card",
            &key,
        ],
    );
    let unsigned = Running::start(
        &env,
        &[
            "serve", "--agent", "echo", "--port", "0", "--store", "memory",
        ],
    );
    // A copy of the signed card, changed after signing.
    let card: Value = http()
        .get(format!("{}/.well-known/agent-card.json", signed.url))
        .send()
        .await
        .expect("GET the card")
        .json()
        .await
        .expect("JSON");
    assert!(card["signatures"].is_array(), "{card}");
    let mut tampered = card.clone();
    tampered["description"] = json!("Not what was signed");
    let tampered_file = env.cwd().join("tampered-card.json");
    std::fs::write(&tampered_file, tampered.to_string()).expect("write");

    let trusting = Running::start(&env, &["inspect", "--trust-key", &public]);
    let status = |v: &Value| {
        (
            v["signatureStatus"].as_str().unwrap_or_default().to_owned(),
            v["signature"].as_str().unwrap_or_default().to_owned(),
        )
    };
    let v = post(&trusting.url, "/api/connect", json!({"agent": signed.url})).await;
    let (st, text) = status(&v);
    assert_eq!(st, "trusted", "{v}");
    assert!(text.starts_with("verified with a trusted key"), "{text}");
    assert!(text.contains(&public), "names the key: {text}");
    let v = post(
        &trusting.url,
        "/api/connect",
        json!({"agent": unsigned.url}),
    )
    .await;
    assert_eq!(status(&v).0, "unsigned", "{v}");
    let v = post(
        &trusting.url,
        "/api/connect",
        json!({"agent": tampered_file.display().to_string()}),
    )
    .await;
    let (st, text) = status(&v);
    assert_eq!(st, "invalid", "{v}");
    assert!(text.contains("changed after it was signed"), "{text}");

    // No trusted key: the agent's own key is over plain HTTP here, so the
    // signature is not taken as verified.
    let plain = Running::start(&env, &["inspect", "-a", &signed.url]);
    let s = get(&plain.url, "/api/session").await;
    let (st, text) = status(&s["connected"]);
    assert_eq!(st, "unverified", "{s}");
    assert!(text.contains("HTTPS"), "{text}");
    // Over HTTPS, without a trusted key: the agent's own published key
    // (same origin as the card) verifies it, and the page says that is all.
    let tls = |f: &str| format!("{}/tests/fixtures/tls/{f}", env!("CARGO_MANIFEST_DIR"));
    let https = Running::start(
        &env,
        &[
            "serve",
            "--agent",
            "echo",
            "--port",
            "0",
            "--store",
            "memory",
            "--sign-card",
            &key,
            "--tls-cert",
            &tls("cert.pem"),
            "--tls-key",
            &tls("key.pem"),
        ],
    );
    assert!(https.url.starts_with("https://"), "{}", https.url);
    let own = Running::start(&env, &["inspect", "--insecure", "-a", &https.url]);
    let s = get(&own.url, "/api/session").await;
    let (st, text) = status(&s["connected"]);
    assert_eq!(st, "agent-key", "{s}");
    assert!(
        text.starts_with("signed with the agent's own published key"),
        "{text}"
    );
    assert!(text.contains("--insecure"), "{text}");
    // A key file that is not a key: refused at start, with the reason.
    let out = env.run(&[
        "inspect",
        "--trust-key",
        &tampered_file.display().to_string(),
    ]);
    out.expect(2);
    assert!(out.stderr.contains("--trust-key"), "{}", out.stderr);
}

/// A streamed turn through the inspector that completes; its task's id.
async fn completed_turn(base: &str, text: &str) -> String {
    let sent = post(base, "/api/send", json!({"text": text, "stream": true})).await;
    assert_eq!(
        last_state(&sent["events"]),
        "TASK_STATE_COMPLETED",
        "{sent}"
    );
    task_id(&sent["events"])
}

/// What the inspector sees goes into the `a2a` ledger like any command's
/// findings: the context (with the agent connected), its task, its state
/// and its artifact, read back with `a2a ledger`; `--no-ledger` writes
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_records_into_the_ledger() {
    let env = Env::new();
    let agent = Running::start(
        &env,
        &[
            "serve", "--agent", "echo", "--port", "0", "--store", "memory",
        ],
    );
    let ledger = env.home().join("inspected").join("ledger.db");
    let l = ledger.to_str().expect("a UTF-8 path");
    let id = {
        let inspector = Running::start(&env, &["inspect", "-a", &agent.url, "--ledger", l]);
        completed_turn(&inspector.url, "hello ledger").await
    };
    let out = env.run(&["ledger", "tasks", "--ledger", l, "-o", "json"]);
    out.expect(0);
    let doc = out.json();
    assert_eq!(doc["agent"], agent.url.as_str(), "{doc}");
    let tasks = doc["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 1, "{doc}");
    assert_eq!(tasks[0]["taskId"], id.as_str(), "{doc}");
    assert_eq!(tasks[0]["state"], "TASK_STATE_COMPLETED", "{doc}");
    let artifacts = env.run(&["ledger", "artifacts", "--ledger", l, "-o", "json"]);
    artifacts.expect(0);
    let doc = artifacts.json();
    let versions = doc["artifacts"][0]["versions"]
        .as_array()
        .expect("versions");
    assert_eq!(versions.len(), 1, "{doc}");
    assert_eq!(versions[0]["taskId"], id.as_str(), "{doc}");

    // --no-ledger: the session keeps its views, the file is never made.
    let off = env.home().join("off").join("ledger.db");
    let o = off.to_str().expect("a UTF-8 path");
    let inspector = Running::start(
        &env,
        &["inspect", "-a", &agent.url, "--ledger", o, "--no-ledger"],
    );
    let id = completed_turn(&inspector.url, "not recorded").await;
    let versions = get(&inspector.url, "/api/versions").await;
    assert!(versions.to_string().contains(&id), "{versions}");
    drop(inspector);
    assert!(std::fs::metadata(&off).is_err(), "the ledger was written");
}
