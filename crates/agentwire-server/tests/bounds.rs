//! Bounds that keep an anonymous caller from exhausting the server, against
//! a real server on 127.0.0.1: the memory store's byte bound under a flood
//! of tasks left waiting for input, and the per-request bounds (the
//! ListTasks response budget, parts per message, artifact size, requests in
//! flight), each answered with the spec's error on every binding.
//!
//! Every wait is bounded ([`WAIT`]); the assertions are about what the
//! server answers, not about how fast.

use std::sync::Arc;
use std::time::Duration;

use agentwire_server::store::{MemoryStore, MemoryStoreConfig};
use agentwire_server::{
    A2aResult, A2aServer, AgentCard, AgentExecutor, RequestContext, ServerHandle, TaskUpdater,
};
use serde_json::{Value, json};

/// The bound of every wait in these tests.
const WAIT: Duration = Duration::from_secs(20);

/// Asks for more input, every time: each task stays open.
struct Asks;

impl AgentExecutor for Asks {
    async fn execute(&self, _ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.require_input("and then?").await
    }
}

async fn start(server: A2aServer) -> ServerHandle {
    server.bind("127.0.0.1:0").await.expect("bind").spawn()
}

fn card() -> AgentCard {
    AgentCard::new("Bounded", "Tests the server's bounds", "1.0.0")
}

fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(WAIT)
        .build()
        .expect("client")
}

/// A `SendMessage` over JSON-RPC with a text of `len` bytes: the answer.
async fn jsonrpc_send(client: &reqwest::Client, server: &ServerHandle, len: usize) -> Value {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": {
            "messageId": uuid(), "role": "ROLE_USER",
            "parts": [{"text": "x".repeat(len)}]
        }}
    });
    client
        .post(server.base_url())
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await
        .expect("answered")
        .json()
        .await
        .expect("a JSON answer")
}

fn uuid() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("m-{}", N.fetch_add(1, Ordering::Relaxed))
}

/// A flood of tasks that each stop at input-required and are never
/// continued: the store's accounted bytes stay under its bound (256 KiB
/// here), and the tasks beyond it are refused with the spec's error for a
/// temporary failure (JSON-RPC -32603, HTTP 503) rather than held.
#[tokio::test]
async fn an_input_required_flood_stays_under_the_stores_byte_bound() {
    const BOUND: usize = 256 * 1024;
    let store = Arc::new(MemoryStore::new(MemoryStoreConfig {
        max_bytes: BOUND,
        ..MemoryStoreConfig::default()
    }));
    let server = start(A2aServer::new(card(), Asks).store(store.clone())).await;
    let client = http();
    let (mut held, mut refused) = (0, 0);
    for _ in 0..400 {
        let answer = jsonrpc_send(&client, &server, 1000).await;
        if answer["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" {
            held += 1;
        } else {
            assert_eq!(answer["error"]["code"], -32603, "{answer}");
            let message = answer["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("try again later"), "{answer}");
            refused += 1;
        }
        assert!(
            store.accounted_bytes() <= BOUND,
            "{} bytes accounted",
            store.accounted_bytes()
        );
    }
    assert!(held > 10, "{held} held");
    assert!(refused > 100, "{refused} refused");
    // Over HTTP+JSON the refusal is a 503.
    let rest = client
        .post(format!("{}/message:send", server.base_url()))
        .header("A2A-Version", "1.0")
        .json(&json!({"message": {
            "messageId": uuid(), "role": "ROLE_USER", "parts": [{"text": "x".repeat(1000)}]
        }}))
        .send()
        .await
        .expect("answered");
    assert_eq!(rest.status().as_u16(), 503);
    let _ = server.shutdown().await;
}
