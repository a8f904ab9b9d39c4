//! The task generation of the A2A v1.1 draft (section 3.2.7), end to end
//! on the three bindings against real servers on loopback: the sequence of
//! generations through a streamed, interrupted and resumed task (each
//! event's generation, no gap, no repeat, the final task's generation the
//! last event's), `GetTask` with `currentGeneration` (answered on a change
//! and on the wait's end), `ifGenerationMatch` (two racing writers: exactly
//! one wins), and a 1.0 caller that sees none of it. See
//! `docs/generation.md`.

#[allow(unused_macros)]
mod common;

use std::time::{Duration, Instant};

use agentwire_server::{
    A2aResult, A2aServer, AgentExecutor, HandlerConfig, RequestContext, ServerHandle, TaskUpdater,
};
use agentwire_types::proto::a2a_service_client::A2aServiceClient;
use agentwire_types::{
    Artifact, ErrorKind, GetTaskRequest, Message, SendMessageConfiguration, SendMessageRequest,
    StreamResponse, Task, TaskState, new_id, stream_response::Payload,
};
use common::*;
use futures::StreamExt;
use serde_json::{Value, json};

/// The agent: the first turn works, streams an artifact in two chunks and
/// asks for input; the turn after that adds an artifact and completes.
struct TwoTurns;

impl AgentExecutor for TwoTurns {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.start_work().await?;
        if ctx.task.is_none() {
            let id = new_id();
            task.artifact_chunk(Artifact::text("out", "one ").with_id(&id), false, false)
                .await?;
            task.artifact_chunk(Artifact::text("out", "two").with_id(&id), true, true)
                .await?;
            task.require_input("more?").await
        } else {
            task.add_artifact(Artifact::text("final", "done")).await?;
            task.complete().await
        }
    }
}

/// The generations of the first turn's events: the task (1), working,
/// two chunks, input-required.
const FIRST_TURN: [i64; 5] = [1, 2, 3, 4, 5];

async fn server_with(config: HandlerConfig) -> ServerHandle {
    start_server(A2aServer::new(agents::echo_card(), TwoTurns).config(config)).await
}

async fn server() -> ServerHandle {
    server_with(HandlerConfig::default()).await
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Wire {
    JsonRpc,
    Rest,
    Grpc,
}

const WIRES: [Wire; 3] = [Wire::JsonRpc, Wire::Rest, Wire::Grpc];

fn message(task_id: Option<&str>) -> Message {
    let mut m = Message::user_text("go").with_message_id(new_id());
    if let Some(id) = task_id {
        m.task_id = id.to_owned();
    }
    m
}

fn send_request(task_id: Option<&str>, if_match: Option<i64>) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(message(task_id)),
        configuration: if_match.map(|g| SendMessageConfiguration {
            if_generation_match: Some(g),
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn grpc(server: &ServerHandle) -> A2aServiceClient<tonic::transport::Channel> {
    grpc_raw(server).await
}

fn grpc_request<T>(message: T, version: &'static str) -> tonic::Request<T> {
    let mut req = tonic::Request::new(message);
    req.metadata_mut().insert(
        "a2a-version",
        tonic::metadata::MetadataValue::from_static(version),
    );
    req
}

/// The events of an SSE body (JSON-RPC: the `result` of each).
fn sse_events(wire: Wire, body: &[u8]) -> Vec<StreamResponse> {
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|data| {
            let v: Value = serde_json::from_str(data.trim()).expect("an event is JSON");
            let v = if wire == Wire::JsonRpc {
                v.get("result")
                    .cloned()
                    .unwrap_or_else(|| panic!("not a result: {v}"))
            } else {
                v
            };
            serde_json::from_value(v).expect("a StreamResponse")
        })
        .collect()
}

/// Streams a message with `A2A-Version: version`; every event until the
/// stream ends.
async fn stream(
    server: &ServerHandle,
    wire: Wire,
    req: SendMessageRequest,
    version: &'static str,
) -> (Vec<StreamResponse>, String) {
    match wire {
        Wire::JsonRpc | Wire::Rest => {
            let body = if wire == Wire::JsonRpc {
                json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
                       "params": serde_json::to_value(&req).unwrap()})
            } else {
                serde_json::to_value(&req).unwrap()
            };
            let path = if wire == Wire::JsonRpc {
                "/"
            } else {
                "/message:stream"
            };
            let rb = raw_http()
                .post(format!("{}{path}", server.base_url()))
                .header("content-type", "application/json")
                .header("A2A-Version", version)
                .body(body.to_string());
            let resp = raw_send(rb).await;
            assert_eq!(resp.status, 200, "[{wire:?}] stream");
            let text = String::from_utf8_lossy(&resp.body).into_owned();
            (sse_events(wire, &resp.body), text)
        }
        Wire::Grpc => {
            let mut c = grpc(server).await;
            let mut s = within(
                "gRPC stream",
                c.send_streaming_message(grpc_request(req, version)),
            )
            .await
            .expect("gRPC stream")
            .into_inner();
            let mut out = Vec::new();
            while let Some(e) = within("gRPC event", s.next()).await {
                out.push(e.expect("gRPC event"));
            }
            let text = format!("{out:?}");
            (out, text)
        }
    }
}

/// `SendMessage` (blocking) with `A2A-Version: 1.1`: the task, or the
/// error's kind and its ErrorInfo metadata.
async fn send(
    server: &ServerHandle,
    wire: Wire,
    req: SendMessageRequest,
) -> Result<Task, (ErrorKind, Value)> {
    match wire {
        Wire::JsonRpc => {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                              "params": serde_json::to_value(&req).unwrap()});
            let v = raw_send(
                raw_http()
                    .post(server.base_url())
                    .header("content-type", "application/json")
                    .header("A2A-Version", "1.1")
                    .body(body.to_string()),
            )
            .await
            .json();
            match v.get("error") {
                Some(e) => {
                    let kind = ErrorKind::from_jsonrpc_code(e["code"].as_i64().unwrap_or(0))
                        .unwrap_or(ErrorKind::Internal);
                    Err((kind, e["data"][0]["metadata"].clone()))
                }
                None => Ok(serde_json::from_value(v["result"]["task"].clone()).expect("a task")),
            }
        }
        Wire::Rest => {
            let resp = raw_send(
                raw_http()
                    .post(format!("{}/message:send", server.base_url()))
                    .header("content-type", "application/json")
                    .header("A2A-Version", "1.1")
                    .body(serde_json::to_string(&req).unwrap()),
            )
            .await;
            let v = resp.json();
            match v.get("error") {
                Some(e) => {
                    let kind = ErrorKind::from_reason(
                        e["details"][0]["reason"].as_str().unwrap_or_default(),
                    )
                    .unwrap_or(ErrorKind::Internal);
                    assert_eq!(resp.status, kind.http_status(), "{v}");
                    Err((kind, e["details"][0]["metadata"].clone()))
                }
                None => Ok(serde_json::from_value(v["task"].clone()).expect("a task")),
            }
        }
        Wire::Grpc => {
            let mut c = grpc(server).await;
            match within("gRPC send", c.send_message(grpc_request(req, "1.1"))).await {
                Ok(r) => match r.into_inner().payload {
                    Some(agentwire_types::send_message_response::Payload::Task(t)) => Ok(t),
                    other => panic!("not a task: {other:?}"),
                },
                Err(status) => {
                    let e = agentwire_types::A2aError::from_grpc_status(&status);
                    if e.kind == ErrorKind::TaskGenerationMismatch {
                        assert_grpc_error(&status, tonic::Code::Aborted, e.kind, "mismatch");
                    }
                    let meta = serde_json::to_value(&e.metadata).unwrap_or_default();
                    Err((e.kind, meta))
                }
            }
        }
    }
}

/// `GetTask` with `A2A-Version: 1.1`, long-polling past `current`.
async fn get(server: &ServerHandle, wire: Wire, id: &str, current: Option<i64>) -> Task {
    match wire {
        Wire::JsonRpc => {
            let mut params = json!({"id": id});
            if let Some(g) = current {
                params["currentGeneration"] = json!(g.to_string());
            }
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": params});
            let v = raw_send(
                raw_http()
                    .post(server.base_url())
                    .timeout(Duration::from_secs(60))
                    .header("content-type", "application/json")
                    .header("A2A-Version", "1.1")
                    .body(body.to_string()),
            )
            .await
            .json();
            serde_json::from_value(v["result"].clone()).unwrap_or_else(|e| panic!("{e}: {v}"))
        }
        Wire::Rest => {
            let query = current.map_or(String::new(), |g| format!("?currentGeneration={g}"));
            let v = raw_send(
                raw_http()
                    .get(format!("{}/tasks/{id}{query}", server.base_url()))
                    .timeout(Duration::from_secs(60))
                    .header("A2A-Version", "1.1"),
            )
            .await
            .json();
            serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{e}: {v}"))
        }
        Wire::Grpc => {
            let mut c = grpc(server).await;
            let req = GetTaskRequest {
                id: id.to_owned(),
                current_generation: current,
                ..Default::default()
            };
            tokio::time::timeout(
                Duration::from_secs(60),
                c.get_task(grpc_request(req, "1.1")),
            )
            .await
            .expect("GetTask in time")
            .expect("GetTask")
            .into_inner()
        }
    }
}

/// The generation an event carries.
fn generation(e: &StreamResponse) -> i64 {
    match e.payload.as_ref() {
        Some(Payload::Task(t)) => t.generation,
        Some(Payload::StatusUpdate(u)) => u.generation,
        Some(Payload::ArtifactUpdate(u)) => u.generation,
        _ => 0,
    }
}

fn task_id(events: &[StreamResponse]) -> String {
    match events.first().and_then(|e| e.payload.as_ref()) {
        Some(Payload::Task(t)) => t.id.clone(),
        other => panic!("the stream starts with the task, not {other:?}"),
    }
}

/// Runs the first turn streamed: the task, input-required, at generation 5.
async fn first_turn(server: &ServerHandle, wire: Wire) -> String {
    let (events, text) = stream(server, wire, send_request(None, None), "1.1").await;
    let gens: Vec<i64> = events.iter().map(generation).collect();
    assert_eq!(gens, FIRST_TURN, "[{wire:?}] first turn: {text}");
    assert_eq!(
        events.last().and_then(StreamResponse::state),
        Some(TaskState::InputRequired),
        "[{wire:?}] {text}"
    );
    task_id(&events)
}

/// The generations through a streamed, interrupted and resumed task, on
/// one server.
async fn sequence_on(server: &ServerHandle) {
    for wire in WIRES {
        let id = first_turn(server, wire).await;
        let (events, text) = stream(server, wire, send_request(Some(&id), None), "1.1").await;
        let gens: Vec<i64> = events.iter().map(generation).collect();
        // The opening snapshot (the task as it is: 5), then one event per
        // step: working, the artifact, completed.
        assert_eq!(gens, [5, 6, 7, 8], "[{wire:?}] second turn: {text}");
        assert_eq!(
            events.last().and_then(StreamResponse::state),
            Some(TaskState::Completed),
            "[{wire:?}] {text}"
        );
        let task = get(server, wire, &id, None).await;
        assert_eq!(task.generation, 8, "[{wire:?}] the final task");
        assert_eq!(task.state(), TaskState::Completed);
    }
}

#[tokio::test]
async fn generations_through_an_interrupted_and_resumed_task() {
    sequence_on(&server().await).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn generations_on_sqlite() {
    let path = temp_db("generation");
    let store = agentwire_server::store::SqliteStore::open(&path)
        .await
        .expect("open SQLite");
    let server = start_server(
        A2aServer::new(agents::echo_card(), TwoTurns).store(std::sync::Arc::new(store)),
    )
    .await;
    sequence_on(&server).await;
    // A blocking send (written once at the end of its turn) counts alike.
    for wire in WIRES {
        let task = send(&server, wire, send_request(None, None))
            .await
            .expect("a task");
        assert_eq!(task.generation, 5, "[{wire:?}] blocking first turn");
        let task = send(&server, wire, send_request(Some(&task.id), None))
            .await
            .expect("a task");
        assert_eq!(task.generation, 8, "[{wire:?}] blocking second turn");
    }
    drop(server);
    remove_db(&path);
}

#[tokio::test]
async fn a_1_0_caller_sees_no_generation() {
    let server = server().await;
    for wire in [Wire::JsonRpc, Wire::Rest] {
        let (events, text) = stream(&server, wire, send_request(None, None), "1.0").await;
        assert_eq!(events.len(), 5, "{text}");
        assert!(!text.contains("generation"), "[{wire:?}] {text}");
        let id = task_id(&events);
        let r = rest_raw(
            &server,
            reqwest::Method::GET,
            &format!("/tasks/{id}"),
            None,
            true,
        )
        .await;
        assert_eq!(r.status, 200);
        assert!(!String::from_utf8_lossy(&r.body).contains("generation"));
    }
    let (events, _) = stream(&server, Wire::Grpc, send_request(None, None), "1.0").await;
    assert!(events.iter().all(|e| generation(e) == 0), "{events:?}");
}

#[tokio::test]
async fn a_long_poll_answers_when_the_task_moves() {
    let server = server().await;
    for wire in WIRES {
        let id = first_turn(&server, wire).await;
        // Past already: at once.
        let started = Instant::now();
        let task = get(&server, wire, &id, Some(4)).await;
        assert_eq!(task.generation, 5);
        assert!(started.elapsed() < Duration::from_secs(5));
        // At 5: answered when the next message moves the task.
        let poll = {
            let server_url = server.base_url();
            let id = id.clone();
            let server = &server;
            async move {
                let _ = server_url;
                get(server, wire, &id, Some(5)).await
            }
        };
        let started = Instant::now();
        let (task, sent) = tokio::join!(poll, async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            send(&server, wire, send_request(Some(&id), None)).await
        });
        sent.expect("the second turn");
        assert!(task.generation > 5, "[{wire:?}] {task:?}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "[{wire:?}] answered on the change, not at the wait's end"
        );
        // A terminal task: at once.
        let started = Instant::now();
        let task = get(&server, wire, &id, Some(100)).await;
        assert_eq!(task.generation, 8);
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}

#[tokio::test]
async fn a_long_poll_answers_when_its_wait_runs_out() {
    let wait = Duration::from_millis(600);
    let server = server_with(HandlerConfig {
        long_poll_max: wait,
        ..Default::default()
    })
    .await;
    for wire in WIRES {
        let id = first_turn(&server, wire).await;
        let started = Instant::now();
        let task = get(&server, wire, &id, Some(5)).await;
        assert_eq!(task.generation, 5, "[{wire:?}] the task as it is");
        assert_eq!(task.state(), TaskState::InputRequired);
        assert!(
            started.elapsed() >= wait - Duration::from_millis(50),
            "[{wire:?}] answered after {:?}",
            started.elapsed()
        );
    }
}

#[tokio::test]
async fn racing_writers_with_the_same_generation_one_wins() {
    let server = server().await;
    for wire in WIRES {
        let id = first_turn(&server, wire).await;
        // A stale writer is refused, saying both generations.
        let (kind, meta) = send(&server, wire, send_request(Some(&id), Some(3)))
            .await
            .expect_err("a stale generation");
        assert_eq!(kind, ErrorKind::TaskGenerationMismatch, "[{wire:?}]");
        assert_eq!(meta["taskId"], id.as_str(), "[{wire:?}] {meta}");
        assert_eq!(meta["expectedGeneration"], "3", "[{wire:?}] {meta}");
        assert_eq!(meta["currentGeneration"], "5", "[{wire:?}] {meta}");
        // Two writers that both saw 5.
        let (a, b) = tokio::join!(
            send(&server, wire, send_request(Some(&id), Some(5))),
            send(&server, wire, send_request(Some(&id), Some(5))),
        );
        let (won, lost): (Vec<_>, Vec<_>) = [a, b].into_iter().partition(Result::is_ok);
        assert_eq!(
            won.len(),
            1,
            "[{wire:?}] exactly one wins: {won:?} {lost:?}"
        );
        let lost = lost.into_iter().next().and_then(Result::err);
        assert_eq!(
            lost.map(|(k, _)| k),
            Some(ErrorKind::TaskGenerationMismatch),
            "[{wire:?}]"
        );
        // The winner moved the task to working itself (6), then the agent
        // did its turn: working, an artifact, completed.
        let task = get(&server, wire, &id, None).await;
        assert_eq!(task.generation, 9, "[{wire:?}] {task:?}");
        // A new task ignores the check.
        let task = send(&server, wire, send_request(None, Some(42)))
            .await
            .expect("a new task");
        assert_eq!(task.generation, 5, "[{wire:?}]");
    }
}

/// A SQLite file written before generations were kept (every task's head
/// without the field, as the previous releases wrote it): its tasks read
/// at generation 1 (plus one per artifact chunk not folded yet) and count
/// on from there.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn a_sqlite_file_without_generations_counts_on() {
    use agentwire_server::store::{Owner, SqliteStore, TaskStore, TaskUpdate};
    use agentwire_types::TaskStatus;
    let path = temp_db("generation-old");
    let id = new_id();
    {
        let store = SqliteStore::open(&path).await.expect("open SQLite");
        let mut status = TaskStatus::new(TaskState::InputRequired);
        status.message = Some(Box::new(Message::agent_text("more?")));
        let old = Task {
            generation: 0,
            id: id.clone(),
            context_id: new_id(),
            status: Some(status),
            history: vec![Message::user_text("go")],
            ..Default::default()
        };
        store.create(&Owner::default(), old).await.expect("create");
        drop(store);
    }
    let store = SqliteStore::open(&path).await.expect("reopen SQLite");
    let got = store.get(&id, None).await.expect("read").expect("the task");
    assert_eq!(got.task.generation, 1, "an old task reads at 1");
    // One chunk logged after the head: one more.
    store
        .update(
            &id,
            TaskUpdate::Artifact {
                artifact: Artifact::text("log", "x").with_id("a1"),
                append: false,
                last_chunk: false,
                metadata: None,
            },
        )
        .await
        .expect("a chunk");
    let got = store.get(&id, None).await.expect("read").expect("the task");
    assert_eq!(got.task.generation, 2);
    let server = start_server(
        A2aServer::new(agents::echo_card(), TwoTurns).store(std::sync::Arc::new(store)),
    )
    .await;
    let (events, text) = stream(&server, Wire::Rest, send_request(Some(&id), None), "1.1").await;
    let gens: Vec<i64> = events.iter().map(generation).collect();
    assert_eq!(gens, [2, 3, 4, 5], "{text}");
    assert_eq!(get(&server, Wire::Rest, &id, None).await.generation, 5);
    drop(server);
    remove_db(&path);
}

/// Two replicas sharing one PostgreSQL database (`A2A_TEST_POSTGRES_URL`;
/// `bash .ci/postgres start`): the first turn on one, the second on the
/// other, one sequence of generations without a gap or a repeat; a
/// long-poll on one answered by a change made on the other.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (A2A_TEST_POSTGRES_URL)"]
async fn generations_across_two_replicas_on_postgres() {
    use agentwire_server::store::postgres::connect_cluster;
    use agentwire_server::store::postgres::testing::TestSchema;
    let Some(schema) = TestSchema::create("a2a_generation", "two replicas on PostgreSQL").await
    else {
        return;
    };
    let replica = |name: &'static str| {
        let url = schema.url.clone();
        async move {
            let (store, bus) = within(
                format!("connect {name}"),
                connect_cluster(&url, &format!("{name}-{}", new_id())),
            )
            .await
            .unwrap_or_else(|e| panic!("connect {name}: {e}"));
            start_server(
                A2aServer::new(agents::echo_card(), TwoTurns)
                    .store(store)
                    .bus(bus),
            )
            .await
        }
    };
    let a = replica("replica-a").await;
    let b = replica("replica-b").await;
    for wire in WIRES {
        let id = first_turn(&a, wire).await;
        assert_eq!(get(&b, wire, &id, None).await.generation, 5, "[{wire:?}]");
        let (events, text) = stream(&b, wire, send_request(Some(&id), None), "1.1").await;
        let gens: Vec<i64> = events.iter().map(generation).collect();
        assert_eq!(gens, [5, 6, 7, 8], "[{wire:?}] second turn on b: {text}");
        assert_eq!(get(&a, wire, &id, None).await.generation, 8, "[{wire:?}]");

        // A long-poll on b, the task moved on a.
        let id = first_turn(&a, wire).await;
        let started = Instant::now();
        let (task, sent) = tokio::join!(get(&b, wire, &id, Some(5)), async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            send(&a, wire, send_request(Some(&id), None)).await
        });
        assert_eq!(sent.expect("the second turn on a").generation, 8);
        assert!(task.generation > 5, "[{wire:?}] {task:?}");
        assert!(started.elapsed() < Duration::from_secs(20), "[{wire:?}]");

        // Two writers that saw 5, one on each replica: exactly one wins.
        let id = first_turn(&a, wire).await;
        let (x, y) = tokio::join!(
            send(&a, wire, send_request(Some(&id), Some(5))),
            send(&b, wire, send_request(Some(&id), Some(5))),
        );
        let (won, lost): (Vec<_>, Vec<_>) = [x, y].into_iter().partition(Result::is_ok);
        assert_eq!(
            won.len(),
            1,
            "[{wire:?}] exactly one wins: {won:?} {lost:?}"
        );
        assert_eq!(
            lost.into_iter()
                .next()
                .and_then(Result::err)
                .map(|(k, _)| k),
            Some(ErrorKind::TaskGenerationMismatch),
            "[{wire:?}]"
        );
    }
}
