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
use agentwire_server::types::proto::a2a_service_client::A2aServiceClient;
use agentwire_server::types::{
    A2aError, Artifact, ErrorKind, GetTaskRequest, ListTasksRequest, Message, Part,
    SendMessageRequest,
};
use agentwire_server::{
    A2aResult, A2aServer, AgentCard, AgentExecutor, HandlerConfig, RequestContext, ServerHandle,
    TaskUpdater,
};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tonic::Code;

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

/// Completes with the text it was sent (so that its history holds it).
struct Done;

impl AgentExecutor for Done {
    async fn execute(&self, _ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.complete().await
    }
}

fn v1<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "a2a-version",
        tonic::metadata::MetadataValue::from_static("1.0"),
    );
    request
}

async fn grpc(server: &ServerHandle) -> A2aServiceClient<tonic::transport::Channel> {
    let channel = tokio::time::timeout(
        WAIT,
        tonic::transport::Channel::from_shared(server.base_url())
            .expect("a URL")
            .connect(),
    )
    .await
    .expect("connect within the wait")
    .expect("gRPC connect");
    A2aServiceClient::new(channel)
}

async fn jsonrpc(
    client: &reqwest::Client,
    server: &ServerHandle,
    method: &str,
    params: Value,
) -> Value {
    client
        .post(server.base_url())
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .expect("answered")
        .json()
        .await
        .expect("a JSON answer")
}

/// `ListTasks` without parameters over tasks whose histories are large:
/// each page stops at the byte budget (16 KiB here) with a page token, on
/// every binding, and following the tokens lists every task once.
#[tokio::test]
async fn list_tasks_pages_stop_at_the_byte_budget_on_every_binding() {
    const BUDGET: usize = 16 * 1024;
    let config = HandlerConfig {
        max_list_bytes: BUDGET,
        ..HandlerConfig::default()
    };
    let server = start(A2aServer::new(card(), Done).config(config)).await;
    let client = http();
    for _ in 0..10 {
        let answer = jsonrpc_send(&client, &server, 5000).await;
        assert_eq!(
            answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{answer}"
        );
    }
    // JSON-RPC: every page within the budget, all ten tasks in the end.
    let (mut seen, mut token, mut pages) = (Vec::new(), String::new(), 0);
    loop {
        let answer = jsonrpc(&client, &server, "ListTasks", json!({"pageToken": token})).await;
        let result = &answer["result"];
        let tasks = result["tasks"].as_array().expect("tasks").clone();
        assert!(
            !tasks.is_empty() && tasks.len() < 10,
            "{} tasks in a page",
            tasks.len()
        );
        assert!(
            answer.to_string().len() < 2 * BUDGET,
            "a page of {} bytes",
            answer.to_string().len()
        );
        seen.extend(
            tasks
                .iter()
                .map(|t| t["id"].as_str().unwrap_or_default().to_owned()),
        );
        pages += 1;
        token = result["nextPageToken"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if token.is_empty() || pages > 10 {
            break;
        }
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 10, "every task once, in {pages} pages");
    // HTTP+JSON: the same first page.
    let rest: Value = client
        .get(format!("{}/tasks", server.base_url()))
        .header("A2A-Version", "1.0")
        .send()
        .await
        .expect("answered")
        .json()
        .await
        .expect("JSON");
    let n = rest["tasks"].as_array().map_or(0, Vec::len);
    assert!((1..10).contains(&n), "{n} tasks over HTTP+JSON");
    assert!(
        !rest["nextPageToken"]
            .as_str()
            .unwrap_or_default()
            .is_empty()
    );
    // gRPC: the same.
    let page = grpc(&server)
        .await
        .list_tasks(v1(ListTasksRequest::default()))
        .await
        .expect("a page")
        .into_inner();
    assert!(
        (1..10).contains(&page.tasks.len()),
        "{} tasks over gRPC",
        page.tasks.len()
    );
    assert!(!page.next_page_token.is_empty());
    let _ = server.shutdown().await;
}

/// A message of more parts than the bound (1,000 by default) is refused
/// with the spec's invalid-parameters error on every binding, before the
/// agent runs.
#[tokio::test]
async fn a_message_of_too_many_parts_is_refused_on_every_binding() {
    let server = start(A2aServer::new(card(), Done)).await;
    let client = http();
    let parts: Vec<Value> = (0..1001).map(|_| json!({"text": ""})).collect();
    let message = json!({"messageId": uuid(), "role": "ROLE_USER", "parts": parts});
    let answer = jsonrpc(&client, &server, "SendMessage", json!({"message": message})).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("at most 1000 parts"),
        "{answer}"
    );
    let rest = client
        .post(format!("{}/message:send", server.base_url()))
        .header("A2A-Version", "1.0")
        .json(&json!({"message": message}))
        .send()
        .await
        .expect("answered");
    assert_eq!(rest.status().as_u16(), 400);
    let mut m = Message::user_text("x");
    m.parts = vec![Part::text(""); 1001];
    let status = grpc(&server)
        .await
        .send_message(v1(SendMessageRequest {
            message: Some(m),
            ..Default::default()
        }))
        .await
        .expect_err("refused");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    // No task was started.
    let listed = jsonrpc(&client, &server, "ListTasks", json!({})).await;
    assert_eq!(listed["result"]["totalSize"], 0, "{listed}");
    let _ = server.shutdown().await;
}

/// Streams an artifact of 100 chunks of 1,000 bytes.
struct Grows;

impl AgentExecutor for Grows {
    async fn execute(&self, _ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        for i in 0..100 {
            let chunk = Artifact {
                artifact_id: "big".into(),
                parts: vec![Part::text("z".repeat(1000))],
                ..Default::default()
            };
            task.artifact_chunk(chunk, i > 0, i == 99).await?;
        }
        task.complete().await
    }
}

/// An artifact growing chunk by chunk past the bound (20,000 bytes here):
/// the chunk that would pass it is refused, the agent's run fails the task
/// with the reason, and the artifact kept stays within the bound.
#[tokio::test]
async fn an_artifact_cannot_grow_past_its_bound() {
    const BOUND: usize = 20_000;
    let config = HandlerConfig {
        max_artifact_bytes: BOUND,
        ..HandlerConfig::default()
    };
    let server = start(A2aServer::new(card(), Grows).config(config)).await;
    let client = http();
    let answer = jsonrpc_send(&client, &server, 10).await;
    let task = &answer["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{answer}");
    let reason = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(reason.contains("bytes per artifact"), "{reason}");
    let id = task["id"].as_str().expect("an id");
    let got = jsonrpc(&client, &server, "GetTask", json!({"id": id})).await;
    let kept: usize = got["result"]["artifacts"][0]["parts"]
        .as_array()
        .expect("the artifact's parts")
        .iter()
        .map(|p| p["text"].as_str().map_or(0, str::len))
        .sum();
    assert!(kept > 0 && kept <= BOUND, "{kept} bytes kept");
    let _ = server.shutdown().await;
}

/// Holds every request in the agent until released.
struct Waits {
    entered: Arc<Semaphore>,
    release: Arc<Semaphore>,
}

impl AgentExecutor for Waits {
    async fn execute(&self, _ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        self.entered.add_permits(1);
        if let Ok(permit) = self.release.acquire().await {
            permit.forget();
        }
        task.complete().await
    }
}

/// With as many requests in flight as allowed (2 here), one more is
/// refused at once with the spec's error for a temporary failure (JSON-RPC
/// -32603, HTTP 503, gRPC UNAVAILABLE), not queued; once they are
/// answered, requests are served again.
#[tokio::test]
async fn requests_over_the_in_flight_bound_are_refused_at_once() {
    let entered = Arc::new(Semaphore::new(0));
    let release = Arc::new(Semaphore::new(0));
    let agent = Waits {
        entered: entered.clone(),
        release: release.clone(),
    };
    let config = HandlerConfig {
        max_in_flight: 2,
        ..HandlerConfig::default()
    };
    let server = Arc::new(start(A2aServer::new(card(), agent).config(config)).await);
    let client = http();
    let held: Vec<_> = (0..2)
        .map(|_| {
            let (client, server) = (client.clone(), server.clone());
            tokio::spawn(async move { jsonrpc_send(&client, &server, 10).await })
        })
        .collect();
    let both = tokio::time::timeout(WAIT, entered.acquire_many(2)).await;
    both.expect("both requests reach the agent")
        .expect("open")
        .forget();

    let answer = jsonrpc(&client, &server, "GetTask", json!({"id": "any"})).await;
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("as many requests as it may at once (2)"),
        "{answer}"
    );
    let rest = client
        .get(format!("{}/tasks/any", server.base_url()))
        .header("A2A-Version", "1.0")
        .send()
        .await
        .expect("answered");
    assert_eq!(rest.status().as_u16(), 503);
    let status = grpc(&server)
        .await
        .get_task(v1(GetTaskRequest {
            id: "any".into(),
            ..Default::default()
        }))
        .await
        .expect_err("refused");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(
        A2aError::from_grpc_status(&status).kind,
        ErrorKind::Unavailable
    );

    release.add_permits(2);
    for h in held {
        let answer = tokio::time::timeout(WAIT, h)
            .await
            .expect("answered")
            .expect("joined");
        assert_eq!(
            answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{answer}"
        );
    }
    let answer = jsonrpc(&client, &server, "GetTask", json!({"id": "any"})).await;
    assert_eq!(answer["error"]["code"], -32001, "served again: {answer}");
}
