//! `a2a serve` admission (project issue 40): a caller flooding tasks that
//! wait for input hits `--max-open-tasks-per-caller` while another caller
//! goes on, and a reply with a message is never refused, not even with the
//! store full; the refusals are counted in `/metrics`. Calls without
//! credentials do not count towards the failed-authentication throttle;
//! wrong keys do. One name in two schemes is two owners.

mod common;

use common::*;
use serde_json::{Value, json};

const KEYS: &str = "alice:alice-key-0123456789\nbob:bob-key-0123456789\n";

/// A JSON-RPC `SendMessage` to the conformance agent (its behaviour
/// follows the message id's prefix), with an optional API key.
async fn send(http: &reqwest::Client, base: &str, message_id: &str, key: Option<&str>) -> Value {
    let key: Vec<(&str, &str)> = key.map(|k| ("X-API-Key", k)).into_iter().collect();
    send_hello(http, base, message_id, &key).await
}

/// A JSON-RPC `CancelTask` of `task` from `http`: the answer.
async fn cancel(http: &reqwest::Client, base: &str, task: &str) -> Value {
    http.post(format!("{base}/"))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": task}}))
        .send()
        .await
        .expect("cancel")
        .json::<Value>()
        .await
        .expect("an answer")
}

fn state(answer: &Value) -> &str {
    answer["result"]["task"]["status"]["state"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_callers_flood_hits_its_bound_and_others_go_on() {
    let env = Env::new();
    std::fs::write(env.cwd().join("keys.txt"), KEYS).unwrap();
    let serving = Serving::start(
        &env,
        &[
            "--agent",
            "conformance",
            "--api-key-file",
            "keys.txt",
            "--max-tasks",
            "6",
            "--max-open-tasks-per-caller",
            "3",
            "--metrics",
        ],
    );
    let base = serving.base();
    agentwire_client::install_crypto_provider();
    let http = reqwest::Client::new();
    let alice = Some("alice-key-0123456789");
    let bob = Some("bob-key-0123456789");
    for i in 0..3 {
        let a = send(&http, &base, &format!("tck-input-required-{i}"), alice).await;
        assert_eq!(state(&a), "TASK_STATE_INPUT_REQUIRED", "{a}");
    }
    // Alice's flood is refused, naming the bound.
    for i in 3..6 {
        let a = send(&http, &base, &format!("tck-input-required-{i}"), alice).await;
        assert_eq!(a["error"]["code"], -32603, "{a}");
        let m = a["error"]["message"].as_str().unwrap_or_default();
        assert!(
            m.contains("open tasks") && m.contains("try again later"),
            "{a}"
        );
    }
    // Her message-only replies go on.
    let a = send(&http, &base, "tck-message-response-1", alice).await;
    assert!(a["result"]["message"].is_object(), "{a}");
    // Bob's work goes on, until the store (6 tasks) is full.
    for i in 0..3 {
        let b = send(&http, &base, &format!("tck-input-required-b{i}"), bob).await;
        assert_eq!(state(&b), "TASK_STATE_INPUT_REQUIRED", "{b}");
    }
    // The store is full of open tasks: a new task is refused...
    let b = send(&http, &base, "tck-complete-task-b", bob).await;
    assert_eq!(b["error"]["code"], -32603, "{b}");
    // ...and a reply that stores nothing is not.
    let b = send(&http, &base, "tck-message-response-b", bob).await;
    assert!(b["result"]["message"].is_object(), "{b}");
    let metrics = metrics_text(&http, &base).await;
    assert!(
        metrics.contains(r#"a2a_admission_refused_total{reason="caller_open_tasks"} 3"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"a2a_admission_refused_total{reason="store_full"} 1"#),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_without_credentials_do_not_lock_out_a_valid_key() {
    let env = Env::new();
    std::fs::write(env.cwd().join("keys.txt"), KEYS).unwrap();
    let serving = Serving::start(
        &env,
        &["--agent", "conformance", "--api-key-file", "keys.txt"],
    );
    let base = serving.base();
    agentwire_client::install_crypto_provider();
    let http = reqwest::Client::new();
    let alice = Some("alice-key-0123456789");
    for _ in 0..30 {
        let a = send(&http, &base, "tck-complete-task", None).await;
        assert!(a["error"].is_object(), "{a}");
    }
    let a = send(&http, &base, "tck-complete-task", alice).await;
    assert_eq!(state(&a), "TASK_STATE_COMPLETED", "{a}");
    // Wrong keys still count.
    for _ in 0..30 {
        let a = send(
            &http,
            &base,
            "tck-complete-task",
            Some("wrong-key-0123456789"),
        )
        .await;
        assert!(a["error"].is_object(), "{a}");
    }
    let a = send(&http, &base, "tck-complete-task", alice).await;
    let m = a["error"]["message"].as_str().unwrap_or_default();
    assert!(m.contains("too many failed"), "{a}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_expiry_moves_the_purge_counter() {
    let env = Env::new();
    let serving = Serving::start(
        &env,
        &[
            "--agent",
            "conformance",
            "--open-task-ttl",
            "200ms",
            "--metrics",
        ],
    );
    let base = serving.base();
    agentwire_client::install_crypto_provider();
    let http = reqwest::Client::new();
    let a = send(&http, &base, "tck-input-required-1", None).await;
    assert_eq!(state(&a), "TASK_STATE_INPUT_REQUIRED", "{a}");
    let mut seen = String::new();
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        seen = metrics_text(&http, &base).await;
        if seen.contains(r#"a2a_tasks_purged_total{reason="open_task_ttl"} 1"#) {
            return;
        }
    }
    panic!("the idle task's expiry is not counted:\n{seen}");
}

/// An HTTP+JSON `SendMessage` (`POST /message:send`) to the conformance
/// agent: the status and the JSON body.
async fn send_rest(
    http: &reqwest::Client,
    base: &str,
    message_id: &str,
    key: Option<&str>,
) -> (u16, Value) {
    let body = json!({"message": {
        "messageId": message_id,
        "role": "ROLE_USER",
        "parts": [{"text": "hello"}],
    }});
    let mut r = http
        .post(format!("{base}/message:send"))
        .header("A2A-Version", "1.0")
        .json(&body);
    if let Some(k) = key {
        r = r.header("X-API-Key", k);
    }
    let answer = r.send().await.expect("send");
    let status = answer.status().as_u16();
    (status, answer.json().await.expect("a JSON body"))
}

/// A gRPC client of the server at `addr` (connecting from 127.0.0.1),
/// sending messages of up to 16 MiB.
async fn grpc(
    addr: &str,
) -> agentwire_types::proto::a2a_service_client::A2aServiceClient<tonic::transport::Channel> {
    agentwire_types::proto::a2a_service_client::A2aServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("gRPC connect")
        .max_encoding_message_size(16 << 20)
}

/// `message` as an A2A 1.0 gRPC request, with an optional API key.
fn v1<T>(message: T, key: Option<&str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("a2a-version", "1.0".parse().expect("metadata"));
    if let Some(k) = key {
        request
            .metadata_mut()
            .insert("x-api-key", k.parse().expect("metadata"));
    }
    request
}

/// A gRPC `SendMessage` of `text` (the conformance agent follows the
/// message id's prefix).
async fn send_grpc(
    addr: &str,
    text: &str,
    message_id: &str,
    key: Option<&str>,
) -> Result<agentwire_types::SendMessageResponse, tonic::Status> {
    let request = agentwire_types::SendMessageRequest {
        message: Some(agentwire_types::Message::user_text(text).with_message_id(message_id)),
        ..Default::default()
    };
    grpc(addr)
        .await
        .send_message(v1(request, key))
        .await
        .map(|r| r.into_inner())
}

/// The bound's refusal on each binding: JSON-RPC -32603, HTTP 503, gRPC
/// UNAVAILABLE, each saying to try again later; a message-only reply goes
/// on, on each binding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bound_refuses_on_every_binding() {
    let env = Env::new();
    std::fs::write(env.cwd().join("keys.txt"), KEYS).unwrap();
    let serving = Serving::start(
        &env,
        &[
            "--agent",
            "conformance",
            "--api-key-file",
            "keys.txt",
            "--max-open-tasks-per-caller",
            "2",
            "--metrics",
        ],
    );
    let (base, addr) = (serving.base(), serving.addr());
    agentwire_client::install_crypto_provider();
    let http = reqwest::Client::new();
    let alice = Some("alice-key-0123456789");
    // Her two open tasks: one by JSON-RPC, one by HTTP+JSON.
    let a = send(&http, &base, "tck-input-required-0", alice).await;
    assert_eq!(state(&a), "TASK_STATE_INPUT_REQUIRED", "{a}");
    let (status, a) = send_rest(&http, &base, "tck-input-required-1", alice).await;
    assert_eq!(status, 200, "{a}");
    assert_eq!(
        a["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{a}"
    );
    // JSON-RPC.
    let a = send(&http, &base, "tck-input-required-2", alice).await;
    assert_eq!(a["error"]["code"], -32603, "{a}");
    assert!(a.to_string().contains("try again later"), "{a}");
    // HTTP+JSON.
    let (status, a) = send_rest(&http, &base, "tck-input-required-3", alice).await;
    assert_eq!(status, 503, "{a}");
    assert!(a.to_string().contains("try again later"), "{a}");
    // gRPC.
    let e = send_grpc(&addr, "hello", "tck-input-required-4", alice)
        .await
        .expect_err("refused");
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    assert!(e.message().contains("try again later"), "{e:?}");
    // Message-only replies go on, on every binding.
    let a = send(&http, &base, "tck-message-response-0", alice).await;
    assert!(a["result"]["message"].is_object(), "{a}");
    let (status, a) = send_rest(&http, &base, "tck-message-response-1", alice).await;
    assert_eq!(status, 200, "{a}");
    assert!(a["message"].is_object(), "{a}");
    let r = send_grpc(&addr, "hello", "tck-message-response-2", alice)
        .await
        .expect("a message");
    assert!(
        matches!(
            r.payload,
            Some(agentwire_types::send_message_response::Payload::Message(_))
        ),
        "{r:?}"
    );
    // Bob's work goes on over gRPC.
    let r = send_grpc(
        &addr,
        "hello",
        "tck-input-required-b",
        Some("bob-key-0123456789"),
    )
    .await
    .expect("bob's task");
    assert!(
        matches!(
            r.payload,
            Some(agentwire_types::send_message_response::Payload::Task(_))
        ),
        "{r:?}"
    );
    let metrics = metrics_text(&http, &base).await;
    assert!(
        metrics.contains(r#"a2a_admission_refused_total{reason="caller_open_tasks"} 3"#),
        "{metrics}"
    );
}

/// Anonymous callers are bounded by address: a flood from 127.0.0.1 is
/// refused while an anonymous caller from 127.0.0.2 (another loopback
/// address, to the same server) still gets new tasks, and the flooder's
/// message-only replies go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_callers_are_bounded_by_address() {
    let env = Env::new();
    let serving = Serving::start(
        &env,
        &["--agent", "conformance", "--max-open-tasks-per-caller", "3"],
    );
    let base = serving.base();
    agentwire_client::install_crypto_provider();
    let (flooder, other) = (client_from("127.0.0.1"), client_from("127.0.0.2"));
    for i in 0..3 {
        let a = send(&flooder, &base, &format!("tck-input-required-{i}"), None).await;
        assert_eq!(state(&a), "TASK_STATE_INPUT_REQUIRED", "{a}");
    }
    for i in 3..10 {
        let a = send(&flooder, &base, &format!("tck-input-required-{i}"), None).await;
        assert_eq!(a["error"]["code"], -32603, "{a}");
        let m = a["error"]["message"].as_str().unwrap_or_default();
        assert!(
            m.contains("127.0.0.1") && m.contains("try again later"),
            "{a}"
        );
    }
    let a = send(&flooder, &base, "tck-message-response-1", None).await;
    assert!(a["result"]["message"].is_object(), "{a}");
    for i in 0..3 {
        let b = send(&other, &base, &format!("tck-input-required-o{i}"), None).await;
        assert_eq!(state(&b), "TASK_STATE_INPUT_REQUIRED", "{b}");
    }
    let b = send(&other, &base, "tck-input-required-o3", None).await;
    assert_eq!(b["error"]["code"], -32603, "{b}");
}

/// The open tasks of a previous run (a SQLite store, the server killed and
/// started again) count toward their caller's bound: a restart does not
/// give the flooder its whole bound again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_tasks_of_a_previous_run_count_after_a_restart() {
    let env = Env::new();
    std::fs::write(env.cwd().join("keys.txt"), KEYS).unwrap();
    let args = [
        "--agent",
        "conformance",
        "--api-key-file",
        "keys.txt",
        "--max-open-tasks-per-caller",
        "2",
    ];
    agentwire_client::install_crypto_provider();
    let http = reqwest::Client::new();
    let alice = Some("alice-key-0123456789");
    let serving = Serving::start_on(&env, "sqlite:tasks.db", &args);
    let base = serving.base();
    let mut open = Vec::new();
    for i in 0..2 {
        let a = send(&http, &base, &format!("tck-input-required-{i}"), alice).await;
        assert_eq!(state(&a), "TASK_STATE_INPUT_REQUIRED", "{a}");
        open.push(
            a["result"]["task"]["id"]
                .as_str()
                .expect("an id")
                .to_owned(),
        );
    }
    // Killed (SIGKILL), started again on the same file.
    serving.stop();
    let serving = Serving::start_on(&env, "sqlite:tasks.db", &args);
    let base = serving.base();
    let a = send(&http, &base, "tck-input-required-2", alice).await;
    assert_eq!(a["error"]["code"], -32603, "after the restart: {a}");
    let m = a["error"]["message"].as_str().unwrap_or_default();
    assert!(
        m.contains("apikey:alice") && m.contains("try again later"),
        "{a}"
    );
    // Others go on.
    let b = send(
        &http,
        &base,
        "tck-input-required-b",
        Some("bob-key-0123456789"),
    )
    .await;
    assert_eq!(state(&b), "TASK_STATE_INPUT_REQUIRED", "{b}");
    // One of her tasks of the previous run ends (canceled): room again.
    let cancel = json!({"jsonrpc": "2.0", "id": 2, "method": "CancelTask",
        "params": {"id": open[0]}});
    let c: Value = http
        .post(format!("{base}/"))
        .header("A2A-Version", "1.0")
        .header("X-API-Key", "alice-key-0123456789")
        .json(&cancel)
        .send()
        .await
        .expect("cancel")
        .json()
        .await
        .expect("JSON");
    assert_eq!(c["result"]["status"]["state"], "TASK_STATE_CANCELED", "{c}");
    let a = send(&http, &base, "tck-input-required-3", alice).await;
    assert_eq!(state(&a), "TASK_STATE_INPUT_REQUIRED", "{a}");
}

/// A send of `text` to the echo agent over JSON-RPC, returning at once
/// (`returnImmediately`), from `http`.
async fn send_text(http: &reqwest::Client, base: &str, text: &str) -> Value {
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {"messageId": agentwire_types::new_id(), "role": "ROLE_USER", "parts": [{"text": text}]},
            "configuration": {"returnImmediately": true},
        },
    });
    http.post(format!("{base}/"))
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("a JSON-RPC answer")
}

/// `a2a serve --agent echo FLAG VALUE --metrics`, and HTTP clients from
/// 127.0.0.1 (the flooder) and 127.0.0.2 (another anonymous caller).
struct Bounded {
    /// Kept for the test's time: the server stops when it is dropped.
    _serving: Serving,
    base: String,
    addr: String,
    flooder: reqwest::Client,
    other: reqwest::Client,
}

impl Bounded {
    /// Sends `text` from the flooder until it is admitted (at most 10 s).
    async fn admits_again(&self, text: &str) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let a = send_text(&self.flooder, &self.base, text).await;
            if a["result"]["task"]["id"].is_string() {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "no room made: {a}");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Waits (10 s at most) until `/metrics` shows `sample` at `n` or more.
    async fn metric_reaches(&self, sample: &str, n: f64) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let metrics = metrics_text(&self.other, &self.base).await;
            if metric_value(&metrics, sample) >= n {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{sample} < {n}: {metrics}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Checks that `/metrics` counts at least `n` refusals for `reason`.
    async fn refused_at_least(&self, reason: &str, n: f64) {
        let metrics = metrics_text(&self.other, &self.base).await;
        let sample = format!("a2a_admission_refused_total{{reason=\"{reason}\"}}");
        assert!(metric_value(&metrics, &sample) >= n, "{metrics}");
    }

    fn start(env: &Env, flag: &str, value: &str) -> Self {
        let serving = Serving::start(env, &["--agent", "echo", flag, value, "--metrics"]);
        agentwire_client::install_crypto_provider();
        Self {
            base: serving.base(),
            addr: serving.addr(),
            _serving: serving,
            flooder: client_from("127.0.0.1"),
            other: client_from("127.0.0.2"),
        }
    }
}

/// The bytes of a caller's running work are bounded
/// (`--max-running-bytes-per-caller`): an anonymous caller's large
/// messages to slow work (the echo agent's `slow 30`) are refused past the
/// bound on every binding, while its small sends, another address's large
/// ones and, once one of its tasks is canceled (its run over), its next
/// large one go on; the refusals are counted in `/metrics`. Without the
/// bound, 40 such sends of 8 MB held about 400 MB of the server's memory
/// for as long as they ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_bytes_are_bounded_per_caller_on_every_binding() {
    let env = Env::new();
    let bounded = Bounded::start(&env, "--max-running-bytes-per-caller", "3000000");
    let (base, addr) = (bounded.base.clone(), bounded.addr.clone());
    let (flooder, other) = (bounded.flooder.clone(), bounded.other.clone());
    let large = format!("slow 30 {}", "a".repeat(900_000));
    let mut running = Vec::new();
    for _ in 0..3 {
        let a = send_text(&flooder, &base, &large).await;
        let id = a["result"]["task"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(!id.is_empty(), "{a}");
        running.push(id);
    }
    // JSON-RPC.
    let a = send_text(&flooder, &base, &large).await;
    assert_eq!(a["error"]["code"], -32603, "{a}");
    let m = a["error"]["message"].as_str().unwrap_or_default();
    assert!(
        m.contains("127.0.0.1") && m.contains("max running bytes") && m.contains("try again later"),
        "{a}"
    );
    // HTTP+JSON.
    let r = flooder
        .post(format!("{base}/message:send"))
        .header("A2A-Version", "1.0")
        .json(&json!({"message": {"messageId": "rest-large", "role": "ROLE_USER", "parts": [{"text": large}]}}))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status().as_u16(), 503);
    let text = r.text().await.expect("a body");
    assert!(text.contains("try again later"), "{text}");
    // gRPC (from 127.0.0.1 too: tonic's channel connects from there).
    let e = send_grpc(&addr, &large, "grpc-large", None)
        .await
        .expect_err("refused");
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    assert!(e.message().contains("try again later"), "{e:?}");
    // Its small sends go on (not counted), and so does another address.
    let a = send(&flooder, &base, "small-one", None).await;
    assert_eq!(state(&a), "TASK_STATE_COMPLETED", "{a}");
    let b = send_text(&other, &base, &large).await;
    assert!(b["result"]["task"]["id"].is_string(), "{b}");
    // One of its tasks canceled: its run ends, and room is made.
    let c = cancel(&flooder, &base, &running[0]).await;
    assert_eq!(c["result"]["status"]["state"], "TASK_STATE_CANCELED", "{c}");
    bounded.admits_again(&large).await;
    bounded.refused_at_least("caller_running_bytes", 3.0).await;
}

/// The bytes of all callers' running work are bounded together
/// (`--max-running-bytes`): large messages to slow work from three
/// addresses, each far under its own bound, are refused once they would
/// take the server over, on every binding, naming the server's bound;
/// small sends go on; once one task is canceled (its run over), a large
/// send goes on again; the refusals are counted in `/metrics`. Without
/// it, callers at many addresses (an IPv6 /48 has 65,536 /64s) could
/// each hold their own 32 MiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_bytes_are_bounded_in_all_on_every_binding() {
    let env = Env::new();
    let bounded = Bounded::start(&env, "--max-running-bytes", "3000000");
    let (base, addr) = (bounded.base.clone(), bounded.addr.clone());
    let third = client_from("127.0.0.3");
    let large = format!("slow 30 {}", "a".repeat(900_000));
    let mut running = Vec::new();
    for http in [&bounded.flooder, &bounded.other, &third] {
        let a = send_text(http, &base, &large).await;
        let id = a["result"]["task"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(!id.is_empty(), "{a}");
        running.push(id);
    }
    let refused = |text: &str| {
        text.contains("the server has")
            && text.contains("(its max running bytes)")
            && text.contains("try again later")
    };
    // JSON-RPC, from a fourth address with nothing running.
    let fourth = client_from("127.0.0.4");
    let a = send_text(&fourth, &base, &large).await;
    assert_eq!(a["error"]["code"], -32603, "{a}");
    assert!(refused(&a.to_string()), "{a}");
    // HTTP+JSON.
    let r = third
        .post(format!("{base}/message:send"))
        .header("A2A-Version", "1.0")
        .json(&json!({"message": {"messageId": "rest-large-all", "role": "ROLE_USER", "parts": [{"text": large}]}}))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status().as_u16(), 503);
    let text = r.text().await.expect("a body");
    assert!(refused(&text), "{text}");
    // gRPC.
    let e = send_grpc(&addr, &large, "grpc-large-all", None)
        .await
        .expect_err("refused");
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    assert!(refused(e.message()), "{e:?}");
    // Small sends go on.
    let a = send(&fourth, &base, "small-one", None).await;
    assert_eq!(state(&a), "TASK_STATE_COMPLETED", "{a}");
    // One task canceled: its run ends, and room is made.
    let c = cancel(&bounded.other, &base, &running[1]).await;
    assert_eq!(c["result"]["status"]["state"], "TASK_STATE_CANCELED", "{c}");
    bounded.admits_again(&large).await;
    bounded.refused_at_least("running_bytes", 3.0).await;
}

/// A JSON-RPC `SubscribeToTask` to `task` from `http`: the response, whose
/// body is the event stream (read only as far as the caller wants).
async fn subscribe(http: &reqwest::Client, base: &str, task: &str) -> reqwest::Response {
    http.post(format!("{base}/"))
        .header("A2A-Version", "1.0")
        .header("Accept", "text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 3, "method": "SubscribeToTask", "params": {"id": task}}))
        .send()
        .await
        .expect("subscribe")
}

/// Reads `r`'s body until it holds `needle` (at most 10 s).
async fn read_until(r: &mut reqwest::Response, needle: &str) -> String {
    let mut got = String::new();
    let read = async {
        while let Some(chunk) = r.chunk().await.expect("a chunk") {
            got.push_str(&String::from_utf8_lossy(&chunk));
            if got.contains(needle) {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), read).await;
    got
}

/// The open event streams of a caller are bounded
/// (`--max-streams-per-caller`): past the bound, a subscription or a
/// streaming send of the same address is refused on every binding, before
/// the agent starts; its other calls, another address's streams and, once
/// one of its streams is closed, its next stream go on; the refusals are
/// counted in `/metrics`. Without the bound, 5,000 subscriptions to one
/// task from one address held 80 MB of the server's memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_streams_are_bounded_per_caller_on_every_binding() {
    let env = Env::new();
    let bounded = Bounded::start(&env, "--max-streams-per-caller", "3");
    let (base, addr) = (bounded.base.clone(), bounded.addr.clone());
    let (flooder, other) = (bounded.flooder.clone(), bounded.other.clone());
    let a = send_text(&flooder, &base, "slow 60").await;
    let task = a["result"]["task"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!task.is_empty(), "{a}");
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut r = subscribe(&flooder, &base, &task).await;
        assert_eq!(r.status().as_u16(), 200);
        let first = read_until(&mut r, "TASK_STATE_WORKING").await;
        assert!(first.contains("TASK_STATE_WORKING"), "{first}");
        held.push(r);
    }
    // JSON-RPC: a fourth subscription, and a streaming send.
    let refused = |text: &str| {
        text.contains("127.0.0.1")
            && text.contains("max streams per caller")
            && text.contains("try again later")
    };
    let mut r = subscribe(&flooder, &base, &task).await;
    let text = read_until(&mut r, "}").await;
    assert!(text.contains("-32603") && refused(&text), "{text}");
    let r = flooder
        .post(format!("{base}/"))
        .header("A2A-Version", "1.0")
        .header("Accept", "text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 4, "method": "SendStreamingMessage", "params": {"message": {"messageId": "stream-over", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}}))
        .send()
        .await
        .expect("send");
    let text = r.text().await.expect("a body");
    assert!(refused(&text), "{text}");
    // HTTP+JSON.
    let r = flooder
        .get(format!("{base}/tasks/{task}:subscribe"))
        .header("A2A-Version", "1.0")
        .send()
        .await
        .expect("subscribe");
    assert_eq!(r.status().as_u16(), 503);
    let text = r.text().await.expect("a body");
    assert!(refused(&text), "{text}");
    // gRPC (from 127.0.0.1 too: tonic's channel connects from there).
    let request = agentwire_types::SubscribeToTaskRequest {
        id: task.clone(),
        ..Default::default()
    };
    let e = grpc(&addr)
        .await
        .subscribe_to_task(v1(request, None))
        .await
        .expect_err("refused");
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    assert!(refused(e.message()), "{e:?}");
    // Its other calls go on, and so do another address's streams.
    let a = send(&flooder, &base, "not-a-stream", None).await;
    assert_eq!(state(&a), "TASK_STATE_COMPLETED", "{a}");
    let mut r = subscribe(&other, &base, &task).await;
    let first = read_until(&mut r, "TASK_STATE_WORKING").await;
    assert!(first.contains("TASK_STATE_WORKING"), "{first}");
    drop(r);
    // One of its streams closed: room is made.
    drop(held.pop());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let mut r = subscribe(&flooder, &base, &task).await;
        let first = read_until(&mut r, "TASK_STATE_").await;
        if first.contains("TASK_STATE_WORKING") {
            break;
        }
        assert!(refused(&first), "{first}");
        assert!(
            std::time::Instant::now() < deadline,
            "no room made: {first}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    bounded.refused_at_least("caller_streams", 4.0).await;
}

/// Starts a request of `len` declared body bytes to `path` from `from`,
/// sends only its first 100 KB, and keeps the connection (the server is
/// left waiting for the rest).
async fn partial_body(addr: &str, from: &str, path: &str, len: usize) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt as _;
    let mut tcp = connect_from(addr, from).await;
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         a2a-version: 1.0\r\ncontent-length: {len}\r\n\r\n"
    );
    tcp.write_all(head.as_bytes()).await.expect("write");
    tcp.write_all(&vec![b' '; 100_000]).await.expect("write");
    tcp
}

/// What the server answered on `tcp` (a response head and body, read for
/// at most 10 s).
async fn answer_on(tcp: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt as _;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
            let text = String::from_utf8_lossy(&got);
            if text.contains("try again later") || text.contains("\"result\"") {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), read).await;
    String::from_utf8_lossy(&got).into_owned()
}

/// The bytes of request bodies being received from one address are
/// bounded (`--max-incoming-bytes-per-caller`): while one large body is
/// arriving slowly, another large one from the same address is refused on
/// every binding before it is held (by its Content-Length on JSON-RPC and
/// HTTP+JSON, as its frames arrive on gRPC); small requests from there,
/// and large ones from another address, go on; once the slow body's
/// connection closes, a large send from the address goes on again; the
/// refusals are counted in `/metrics`. Without the bound, twenty 8 MB
/// sends at once from one address held 388 MB of the server's memory
/// before any other bound could refuse them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_being_received_are_bounded_per_caller_on_every_binding() {
    let env = Env::new();
    let bounded = Bounded::start(&env, "--max-incoming-bytes-per-caller", "3000000");
    let (base, addr) = (bounded.base.clone(), bounded.addr.clone());
    let (flooder, other) = (bounded.flooder.clone(), bounded.other.clone());
    let slow = partial_body(&addr, "127.0.0.1", "/", 2_000_000).await;
    // Its bytes are counted once the server reads its body.
    bounded
        .metric_reaches("a2a_incoming_body_bytes", 2_000_000.0)
        .await;
    let refused = |text: &str| {
        text.contains("127.0.0.1")
            && text.contains("max incoming bytes per caller")
            && text.contains("try again later")
    };
    // JSON-RPC, and HTTP+JSON: refused by the length they declare.
    let mut second = partial_body(&addr, "127.0.0.1", "/", 2_000_000).await;
    let text = answer_on(&mut second).await;
    assert!(text.contains("-32603") && refused(&text), "{text}");
    let mut rest = partial_body(&addr, "127.0.0.1", "/message:send", 2_000_000).await;
    let text = answer_on(&mut rest).await;
    assert!(text.starts_with("HTTP/1.1 503") && refused(&text), "{text}");
    // gRPC (from 127.0.0.1: tonic's channel connects from there): refused
    // as its frames arrive.
    let large = "a".repeat(2_000_000);
    let e = send_grpc(&addr, &large, "grpc-large", None)
        .await
        .expect_err("refused");
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    assert!(refused(e.message()), "{e:?}");
    // Small requests from the address go on, and large ones from another.
    let a = send(&flooder, &base, "small-one", None).await;
    assert_eq!(state(&a), "TASK_STATE_COMPLETED", "{a}");
    let b = send_text(&other, &base, &large).await;
    assert!(b["result"]["task"]["id"].is_string(), "{b}");
    // The slow body given up: room is made.
    drop(slow);
    bounded.admits_again(&large).await;
    bounded.refused_at_least("incoming_bytes", 3.0).await;
}

/// A TCP connection to `addr` from the loopback address `from`.
async fn connect_from(addr: &str, from: &str) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket
        .bind(format!("{from}:0").parse().expect("an address"))
        .expect("bind");
    socket
        .connect(addr.parse().expect("an address"))
        .await
        .expect("connect")
}

/// GETs the agent card on `tcp` and reads the whole answer: its status
/// code, or `None` when the connection is closed without one.
async fn card_status(tcp: &mut tokio::net::TcpStream) -> Option<u16> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    tcp.write_all(b"GET /.well-known/agent-card.json HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .ok()?;
    let read = async {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let text = String::from_utf8_lossy(&got).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length: ")
                            .map(str::to_owned)
                    })
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                if body.len() >= length {
                    return head.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok();
                }
            }
            let n = tcp.read(&mut buf).await.ok()?;
            if n == 0 {
                return None;
            }
            got.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), read)
        .await
        .ok()?
}

/// One address cannot take every connection of the server
/// (`--max-connections-per-address`): past the bound its new connections
/// are answered 503 and closed, while its open ones are still served and
/// other addresses connect; once one of its connections closes, it
/// connects again. Without the bound, one address could hold all 50,000
/// (about 14 KB each) and every other client was refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_bounded_per_address() {
    let env = Env::new();
    let bounded = Bounded::start(&env, "--max-connections-per-address", "3");
    let addr = bounded.addr.clone();
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut tcp = connect_from(&addr, "127.0.0.1").await;
        assert_eq!(card_status(&mut tcp).await, Some(200));
        held.push(tcp);
    }
    for _ in 0..3 {
        let mut extra = connect_from(&addr, "127.0.0.1").await;
        let status = card_status(&mut extra).await;
        assert!(matches!(status, Some(503) | None), "{status:?}");
    }
    // Its open connections are still served; another address connects.
    assert_eq!(card_status(&mut held[0]).await, Some(200));
    let mut other = connect_from(&addr, "127.0.0.2").await;
    assert_eq!(card_status(&mut other).await, Some(200));
    // One closed: room is made.
    drop(held.pop());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let mut tcp = connect_from(&addr, "127.0.0.1").await;
        if card_status(&mut tcp).await == Some(200) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no room made");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A JSON-RPC `SendMessage` to the conformance agent through a proxy that
/// says it forwards for `client` (`X-Forwarded-For`).
async fn send_for(http: &reqwest::Client, base: &str, message_id: &str, client: &str) -> Value {
    send_hello(http, base, message_id, &[("X-Forwarded-For", client)]).await
}

/// Behind a reverse proxy (`--trusted-proxy`), each client the proxy
/// forwards for is a caller of its own: one client's flood of open tasks
/// is refused on every binding, naming that client, while another client
/// behind the same proxy goes on; what a client writes itself at the left
/// of `X-Forwarded-For` is not believed; the proxy's connections are not
/// bounded per address. A caller that is not a trusted proxy is its own
/// address whatever it forwards for. Without the option, every client
/// behind the proxy shared one bound (the proxy's address), and more than
/// 1,000 connections from the proxy were refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_behind_a_trusted_proxy_are_callers_of_their_own() {
    let env = Env::new();
    let serving = Serving::start(
        &env,
        &[
            "--agent",
            "conformance",
            "--max-open-tasks-per-caller",
            "2",
            "--max-connections-per-address",
            "2",
            "--trusted-proxy",
            "127.0.0.1",
            "--metrics",
        ],
    );
    let (base, addr) = (serving.base(), serving.addr());
    agentwire_client::install_crypto_provider();
    let (proxy, direct) = (client_from("127.0.0.1"), client_from("127.0.0.2"));
    let refused = |text: &str, caller: &str| {
        text.contains(caller) && text.contains("open tasks") && text.contains("try again later")
    };
    for i in 0..2 {
        let a = send_for(
            &proxy,
            &base,
            &format!("tck-input-required-{i}"),
            "203.0.113.5",
        )
        .await;
        assert_eq!(state(&a), "TASK_STATE_INPUT_REQUIRED", "{a}");
    }
    // JSON-RPC, HTTP+JSON and gRPC: the client is refused, by its name.
    let a = send_for(&proxy, &base, "tck-input-required-2", "203.0.113.5").await;
    assert_eq!(a["error"]["code"], -32603, "{a}");
    assert!(refused(&a.to_string(), "203.0.113.5"), "{a}");
    let r = proxy
        .post(format!("{base}/message:send"))
        .header("A2A-Version", "1.0")
        .header("X-Forwarded-For", "198.51.100.9, 203.0.113.5")
        .json(&json!({"message": {"messageId": "tck-input-required-3", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status().as_u16(), 503);
    let text = r.text().await.expect("a body");
    assert!(refused(&text, "203.0.113.5"), "{text}");
    let mut request = v1(
        agentwire_types::SendMessageRequest {
            message: Some(
                agentwire_types::Message::user_text("hello")
                    .with_message_id("tck-input-required-4"),
            ),
            ..Default::default()
        },
        None,
    );
    request
        .metadata_mut()
        .insert("x-forwarded-for", "203.0.113.5".parse().expect("metadata"));
    let e = grpc(&addr)
        .await
        .send_message(request)
        .await
        .expect_err("refused");
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    assert!(refused(e.message(), "203.0.113.5"), "{e:?}");
    // Another client behind the proxy goes on; what it writes at the left
    // is not believed (it is counted as itself, not as 203.0.113.5).
    for i in 0..2 {
        let b = send_for(
            &proxy,
            &base,
            &format!("tck-input-required-b{i}"),
            "203.0.113.5, 203.0.113.6",
        )
        .await;
        assert_eq!(state(&b), "TASK_STATE_INPUT_REQUIRED", "{b}");
    }
    let b = send_for(&proxy, &base, "tck-input-required-b2", "203.0.113.6").await;
    assert!(refused(&b.to_string(), "203.0.113.6"), "{b}");
    // A caller that is not a trusted proxy is its own address.
    for i in 0..2 {
        let c = send_for(
            &direct,
            &base,
            &format!("tck-input-required-c{i}"),
            "203.0.113.7",
        )
        .await;
        assert_eq!(state(&c), "TASK_STATE_INPUT_REQUIRED", "{c}");
    }
    let c = send_for(&direct, &base, "tck-input-required-c2", "203.0.113.7").await;
    let text = c.to_string();
    assert!(
        refused(&text, "127.0.0.2") && !text.contains("203.0.113.7"),
        "{c}"
    );
    // The proxy's connections are not bounded per address; another
    // address's are.
    let mut held = Vec::new();
    for _ in 0..5 {
        let mut tcp = connect_from(&addr, "127.0.0.1").await;
        assert_eq!(card_status(&mut tcp).await, Some(200));
        held.push(tcp);
    }
    for _ in 0..2 {
        let mut tcp = connect_from(&addr, "127.0.0.3").await;
        assert_eq!(card_status(&mut tcp).await, Some(200));
        held.push(tcp);
    }
    let mut extra = connect_from(&addr, "127.0.0.3").await;
    let status = card_status(&mut extra).await;
    assert!(matches!(status, Some(503) | None), "{status:?}");
    let metrics = metrics_text(&proxy, &base).await;
    assert!(
        metrics.contains(r#"a2a_admission_refused_total{reason="caller_open_tasks"} 5"#),
        "{metrics}"
    );
}
