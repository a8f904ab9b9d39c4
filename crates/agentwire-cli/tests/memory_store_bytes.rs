//! `a2a serve --store memory --max-store-bytes` (project issue 40): the
//! memory store's byte bound against a real server process on loopback.
//! Finished tasks past the bound are evicted, oldest first (per worker
//! thread); when only open
//! tasks are left, a new task that does not fit is refused with the error
//! the task-count bound gives ("try again later", JSON-RPC -32603), and
//! both are counted in `/metrics`.

mod common;

use common::*;
use serde_json::{Value, json};

/// The bound of the server under test, and the text each task carries (a
/// task holds its message in its history: about `TEXT` bytes finished,
/// twice that while open, by the store's estimate).
const BOUND: usize = 4_000_000;
const TEXT: usize = 500_000;

async fn rpc(http: &reqwest::Client, base: &str, method: &str, params: Value) -> Value {
    http.post(format!("{base}/"))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .expect("answered")
        .json()
        .await
        .expect("a JSON-RPC answer")
}

/// A `SendMessage` to the conformance agent (the message id's prefix says
/// what it does) with a text of `TEXT` bytes.
async fn send(http: &reqwest::Client, base: &str, message_id: &str) -> Value {
    let params = json!({"message": {
        "messageId": message_id,
        "role": "ROLE_USER",
        "parts": [{"text": "x".repeat(TEXT)}],
    }});
    rpc(http, base, "SendMessage", params).await
}

/// Whether GetTask finds task `id`.
async fn held(http: &reqwest::Client, base: &str, id: &str) -> bool {
    let a = rpc(http, base, "GetTask", json!({"id": id, "historyLength": 0})).await;
    if a["result"].is_object() {
        return true;
    }
    assert_eq!(a["error"]["code"], -32001, "not TaskNotFound: {a}");
    false
}

fn task_id(answer: &Value) -> String {
    answer["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {answer}"))
        .to_owned()
}

/// The value of the metric line `name` (with its labels) in `metrics`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_byte_bound_evicts_finished_tasks_first_then_refuses_new_ones() {
    let env = Env::new();
    let bound = BOUND.to_string();
    let serving = Serving::start(
        &env,
        &[
            "--agent",
            "conformance",
            "--max-store-bytes",
            &bound,
            "--metrics",
        ],
    );
    let base = serving.base();
    agentwire_client::install_crypto_provider();
    let http = reqwest::Client::new();

    // Twelve finished tasks of 500 KB: 6 MB, past the bound of 4 MB. Every
    // one is taken; the oldest leave to make room, the newest stay.
    let mut finished = Vec::new();
    for i in 0..12 {
        let a = send(&http, &base, &format!("tck-complete-task-{i}")).await;
        assert_eq!(
            a["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{a}"
        );
        finished.push(task_id(&a));
    }
    let mut kept = Vec::new();
    for id in &finished {
        kept.push(held(&http, &base, id).await);
    }
    // (Oldest first within each worker thread's queue: the server's
    // threads each evict the tasks they finished, so the order across
    // threads is only roughly the age.)
    let evicted = kept.iter().filter(|k| !**k).count();
    assert!(evicted >= 3, "too few evicted: {kept:?}");
    assert!(!kept[0] || !kept[1], "the oldest were kept: {kept:?}");
    assert!(
        kept[10] && kept[11],
        "the newest finished tasks left: {kept:?}"
    );

    // Tasks left waiting for input (open: never evicted): the finished
    // tasks leave for them, then a new one that does not fit is refused.
    let (mut open, mut refusal) = (Vec::new(), None);
    for i in 0..10 {
        let a = send(&http, &base, &format!("tck-input-required-{i}")).await;
        if a["result"].is_object() {
            assert_eq!(
                a["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
                "{a}"
            );
            open.push(task_id(&a));
        } else {
            refusal = Some(a);
            break;
        }
    }
    let refusal = refusal.expect("ten open tasks of 1 MB fit in a 4 MB store");
    assert!(
        open.len() >= 2,
        "only {} open tasks were let in",
        open.len()
    );
    assert_eq!(refusal["error"]["code"], -32603, "{refusal}");
    assert_eq!(
        refusal["error"]["data"][0]["reason"], "UNAVAILABLE",
        "{refusal}"
    );
    let message = refusal["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("try again later") && message.contains(&format!("{BOUND} bytes")),
        "{refusal}"
    );
    // Every finished task left before an open one was refused; the open
    // ones are all still there.
    for id in &finished {
        assert!(!held(&http, &base, id).await, "finished task {id} kept");
    }
    for id in &open {
        assert!(held(&http, &base, id).await, "open task {id} lost");
    }
    // A reply that stores nothing still goes through.
    let a = send(&http, &base, "tck-message-response-1").await;
    assert!(a["result"]["message"].is_object(), "{a}");

    let metrics = metrics_text(&http, &base).await;
    assert_eq!(
        metric_value(&metrics, r#"a2a_tasks_purged_total{reason="evicted"}"#),
        12.0,
        "{metrics}"
    );
    assert!(
        metric_value(
            &metrics,
            r#"a2a_admission_refused_total{reason="store_full"}"#
        ) >= 1.0,
        "{metrics}"
    );
}
