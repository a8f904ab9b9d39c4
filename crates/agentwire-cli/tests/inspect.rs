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
            .find(|w| w.starts_with("http://127.0.0.1:"))
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
