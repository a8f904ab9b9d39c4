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
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {
            "messageId": message_id,
            "role": "ROLE_USER",
            "parts": [{"text": "hello"}],
        }},
    });
    let mut r = http
        .post(format!("{base}/"))
        .header("A2A-Version", "1.0")
        .json(&body);
    if let Some(k) = key {
        r = r.header("X-API-Key", k);
    }
    r.send()
        .await
        .expect("send")
        .json()
        .await
        .expect("a JSON-RPC answer")
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
    let metrics = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("/metrics")
        .text()
        .await
        .expect("text");
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
        seen = http
            .get(format!("{base}/metrics"))
            .send()
            .await
            .expect("/metrics")
            .text()
            .await
            .expect("text");
        if seen.contains(r#"a2a_tasks_purged_total{reason="open_task_ttl"} 1"#) {
            return;
        }
    }
    panic!("the idle task's expiry is not counted:\n{seen}");
}
