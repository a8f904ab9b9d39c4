//! A store that fails to take a task's updates, against a real server on
//! 127.0.0.1 with a real SQLite file: the database locked by another
//! connection (`BEGIN EXCLUSIVE`), and the database full (`PRAGMA
//! max_page_count`, SQLite's own "database or disk is full").
//!
//! Past the retry budget (short here), no caller is left waiting: a
//! blocking `SendMessage` answers with the storage error, a stream gets it
//! and ends, a `CancelTask` gets it (never `TaskNotCancelable`), and once
//! the store takes writes again every task ends `TASK_STATE_FAILED` with a
//! status message saying why, none left working. Within the budget the
//! updates wait and go through: the task completes with nothing lost.
//! Each scenario runs over JSON-RPC and over gRPC.
//!
//! Every wait is bounded ([`WAIT`]); the assertions are about what the
//! server answers, not about how fast.

#[allow(unused_macros)]
mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentwire_server::store::{SqliteStore, StoreRetry};
use agentwire_server::types::proto::a2a_service_client::A2aServiceClient;
use agentwire_server::types::{
    Artifact, CancelTaskRequest, GetTaskRequest, Message, SendMessageConfiguration,
    SendMessageRequest, StreamResponse, Task,
};
use agentwire_server::{
    A2aResult, A2aServer, AgentCard, AgentExecutor, HandlerConfig, RequestContext, ServerHandle,
    TaskUpdater,
};
use common::{remove_db, temp_db};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};
use sqlx::Connection;
use tokio::sync::{Semaphore, mpsc};

/// The bound of every wait in these tests.
const WAIT: Duration = Duration::from_secs(20);

/// The artifact each task writes once let through: large enough that the
/// database must grow to hold it.
const ARTIFACT_BYTES: usize = 256 * 1024;

/// Works and says it started; then waits to be let through (or for its
/// cancellation), says it writes, writes a large artifact and completes.
/// Sent "idle", it only waits for its cancellation.
struct Gated {
    events: mpsc::UnboundedSender<(String, &'static str)>,
    gate: Arc<Semaphore>,
}

impl AgentExecutor for Gated {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.start_work().await?;
        let _ = self.events.send((ctx.task_id.clone(), "started"));
        if ctx.text() == "idle" {
            ctx.canceled().await;
            return Ok(());
        }
        tokio::select! {
            biased;
            permit = self.gate.acquire() => {
                if let Ok(p) = permit {
                    p.forget();
                }
            }
            () = ctx.canceled() => return Ok(()),
        }
        let _ = self.events.send((ctx.task_id.clone(), "writing"));
        let text = "x".repeat(ARTIFACT_BYTES);
        task.add_artifact(Artifact::text("out", text).with_id("out"))
            .await?;
        task.complete().await
    }
}

/// The binding a scenario runs over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bind {
    JsonRpc,
    Grpc,
}

/// An error answer, whatever the binding: the JSON-RPC code or the gRPC
/// status code (as a number), and the message.
#[derive(Debug)]
struct Failure {
    code: i64,
    message: String,
}

impl Failure {
    /// The storage error: JSON-RPC's internal error (-32603) or gRPC
    /// `UNAVAILABLE`, saying the task store failed. Never a task-state
    /// error (TaskNotFound -32001 / NOT_FOUND, TaskNotCancelable -32002 /
    /// FAILED_PRECONDITION).
    fn assert_storage(&self, bind: Bind, what: &str) {
        let expected = match bind {
            Bind::JsonRpc => -32603,
            Bind::Grpc => tonic::Code::Unavailable as i64,
        };
        assert_eq!(
            self.code, expected,
            "[{bind:?}] {what}: not the storage error: {self:?}"
        );
        assert!(
            self.message.contains("task store"),
            "[{bind:?}] {what}: the error does not say storage failed: {self:?}"
        );
    }
}

type Answer = Result<Value, Failure>;

/// A server over a real SQLite file, with its store kept to reach the
/// database the way an operator (or the disk) would.
struct Setup {
    server: ServerHandle,
    store: SqliteStore,
    path: PathBuf,
    events: tokio::sync::Mutex<mpsc::UnboundedReceiver<(String, &'static str)>>,
    gate: Arc<Semaphore>,
    http: reqwest::Client,
    bind: Bind,
}

async fn setup(bind: Bind, budget: Duration) -> Setup {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let path = temp_db("a2a-store-failure");
    let store = SqliteStore::open(&path).await.expect("open the store");
    // A write waiting for the lock gives up quickly (the store's own wait
    // is 10 s), so that the retries, not that wait, are what is tested.
    store
        .with_writer(|c| c.busy_timeout(Duration::from_millis(50)))
        .await
        .expect("set the writer's busy timeout");
    let (tx, events) = mpsc::unbounded_channel();
    let gate = Arc::new(Semaphore::new(0));
    let agent = Gated {
        events: tx,
        gate: gate.clone(),
    };
    let config = HandlerConfig {
        store_retry: StoreRetry {
            budget,
            first_pause: Duration::from_millis(20),
            max_pause: Duration::from_millis(100),
        },
        ..HandlerConfig::default()
    };
    let card = AgentCard::new("Stored", "Tests a failing store", "1.0.0").with_streaming(true);
    let server = A2aServer::new(card, agent)
        .store(Arc::new(store.clone()))
        .config(config)
        .bind("127.0.0.1:0")
        .await
        .expect("bind")
        .spawn();
    let http = reqwest::Client::builder()
        .timeout(WAIT)
        .build()
        .expect("client");
    Setup {
        server,
        store,
        path,
        events: tokio::sync::Mutex::new(events),
        gate,
        http,
        bind,
    }
}

/// What blocks the store's writes, and how it is lifted.
enum Outage {
    /// Another connection holds the database's write lock.
    Locked(sqlx::sqlite::SqliteConnection),
    /// The database may not grow (its writer's `max_page_count`).
    Full,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Locked,
    Full,
}

impl Setup {
    async fn outage(&self, kind: Kind) -> Outage {
        match kind {
            Kind::Locked => {
                let options = sqlx::sqlite::SqliteConnectOptions::new().filename(&self.path);
                let mut conn = sqlx::sqlite::SqliteConnection::connect_with(&options)
                    .await
                    .expect("a second connection");
                sqlx::query("BEGIN EXCLUSIVE")
                    .execute(&mut conn)
                    .await
                    .expect("take the write lock");
                Outage::Locked(conn)
            }
            Kind::Full => {
                // Cannot go below the current size: the database stays as
                // large as it is.
                self.store
                    .with_writer(|c| {
                        c.pragma_update_and_check(None, "max_page_count", 1, |r| r.get::<_, i64>(0))
                    })
                    .await
                    .expect("limit the database's size");
                Outage::Full
            }
        }
    }

    async fn end(&self, outage: Outage) {
        match outage {
            Outage::Locked(mut conn) => {
                sqlx::query("COMMIT")
                    .execute(&mut conn)
                    .await
                    .expect("release the write lock");
                let _ = conn.close().await;
            }
            Outage::Full => {
                self.store
                    .with_writer(|c| {
                        c.pragma_update_and_check(None, "max_page_count", 1_073_741_823, |r| {
                            r.get::<_, i64>(0)
                        })
                    })
                    .await
                    .expect("let the database grow");
            }
        }
    }

    /// The next thing an agent says: its task's id and what it does.
    async fn next_event(&self) -> (String, &'static str) {
        within("an agent says what it does", async {
            self.events.lock().await.recv().await
        })
        .await
        .expect("the agent runs")
    }

    /// Waits until the agent of `id` has started.
    async fn started(&self, id: &str) {
        assert_eq!(self.next_event().await, (id.to_owned(), "started"));
    }

    async fn grpc(&self) -> A2aServiceClient<tonic::transport::Channel> {
        let channel = within(
            "gRPC connect",
            tonic::transport::Channel::from_shared(self.server.base_url())
                .expect("a URL")
                .connect(),
        )
        .await
        .expect("gRPC connect");
        A2aServiceClient::new(channel)
    }

    async fn jsonrpc(&self, method: &str, params: Value) -> Answer {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let answer: Value = self
            .http
            .post(self.server.base_url())
            .header("A2A-Version", "1.0")
            .json(&body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} answered: {e}"))
            .json()
            .await
            .expect("a JSON answer");
        jsonrpc_answer(answer)
    }

    /// A blocking `SendMessage`: the task it answers with.
    async fn send(&self, text: &str) -> Answer {
        self.send_with(text, false).await
    }

    /// A `SendMessage`, answered at once with `immediately`
    /// (`returnImmediately`): the task it answers with.
    async fn send_with(&self, text: &str, immediately: bool) -> Answer {
        match self.bind {
            Bind::JsonRpc => self
                .jsonrpc(
                    "SendMessage",
                    json!({"message": user(text),
                        "configuration": {"returnImmediately": immediately}}),
                )
                .await
                .map(|r| r["task"].clone()),
            Bind::Grpc => {
                let req = SendMessageRequest {
                    message: Some(Message::user_text(text)),
                    configuration: Some(SendMessageConfiguration {
                        return_immediately: immediately,
                        ..Default::default()
                    }),
                    ..Default::default()
                };
                match self.grpc().await.send_message(v1(req)).await {
                    Ok(r) => Ok(serde_json::to_value(r.into_inner().task().cloned())
                        .expect("a task as JSON")),
                    Err(s) => Err(grpc_failure(&s)),
                }
            }
        }
    }

    /// A `SendStreamingMessage`: its events (as JSON) and errors, until
    /// the server ends it.
    async fn stream(&self, text: &str) -> std::pin::Pin<Box<dyn Stream<Item = Answer> + Send>> {
        match self.bind {
            Bind::JsonRpc => {
                let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
                    "params": {"message": user(text)}});
                let response = self
                    .http
                    .post(self.server.base_url())
                    .header("A2A-Version", "1.0")
                    .header("Accept", "text/event-stream")
                    .json(&body)
                    .send()
                    .await
                    .expect("the stream opens");
                Box::pin(sse_events(response))
            }
            Bind::Grpc => {
                let req = SendMessageRequest {
                    message: Some(Message::user_text(text)),
                    ..Default::default()
                };
                let stream = self
                    .grpc()
                    .await
                    .send_streaming_message(v1(req))
                    .await
                    .expect("the stream opens")
                    .into_inner();
                Box::pin(futures::stream::unfold(Some(stream), |stream| async move {
                    let mut stream = stream?;
                    match stream.message().await {
                        Ok(Some(event)) => Some((Ok(event_json(&event)), Some(stream))),
                        Ok(None) => None,
                        Err(s) => Some((Err(grpc_failure(&s)), None)),
                    }
                }))
            }
        }
    }

    async fn get(&self, id: &str) -> Answer {
        match self.bind {
            Bind::JsonRpc => self.jsonrpc("GetTask", json!({"id": id})).await,
            Bind::Grpc => {
                let req = GetTaskRequest {
                    id: id.to_owned(),
                    ..Default::default()
                };
                task_answer(self.grpc().await.get_task(v1(req)).await)
            }
        }
    }

    async fn cancel(&self, id: &str) -> Answer {
        match self.bind {
            Bind::JsonRpc => self.jsonrpc("CancelTask", json!({"id": id})).await,
            Bind::Grpc => {
                let req = CancelTaskRequest {
                    id: id.to_owned(),
                    ..Default::default()
                };
                task_answer(self.grpc().await.cancel_task(v1(req)).await)
            }
        }
    }

    /// Polls `GetTask` until the task is terminal: the task.
    async fn terminal(&self, id: &str) -> Value {
        within(format!("task {id} ends"), async {
            loop {
                if let Ok(task) = self.get(id).await {
                    let state = task["status"]["state"].as_str().unwrap_or_default();
                    if matches!(
                        state,
                        "TASK_STATE_COMPLETED"
                            | "TASK_STATE_FAILED"
                            | "TASK_STATE_CANCELED"
                            | "TASK_STATE_REJECTED"
                    ) {
                        return task;
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
    }

    /// How many tasks the store holds as working or submitted.
    async fn unfinished(&self) -> usize {
        use agentwire_server::store::TaskStore;
        self.store.unfinished().await.expect("read the store").len()
    }

    async fn stop(self) {
        let _ = self.server.shutdown().await;
        self.store.close().await;
        remove_db(&self.path);
    }
}

fn user(text: &str) -> Value {
    json!({"messageId": agentwire_server::types::new_id(), "role": "ROLE_USER",
        "parts": [{"text": text}]})
}

fn v1<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "a2a-version",
        tonic::metadata::MetadataValue::from_static("1.0"),
    );
    request
}

fn jsonrpc_answer(answer: Value) -> Answer {
    if let Some(e) = answer.get("error") {
        return Err(Failure {
            code: e["code"].as_i64().unwrap_or_default(),
            message: e["message"].as_str().unwrap_or_default().to_owned(),
        });
    }
    Ok(answer["result"].clone())
}

fn grpc_failure(s: &tonic::Status) -> Failure {
    Failure {
        code: s.code() as i64,
        message: s.message().to_owned(),
    }
}

fn task_answer(r: Result<tonic::Response<Task>, tonic::Status>) -> Answer {
    match r {
        Ok(t) => Ok(serde_json::to_value(t.into_inner()).expect("a task as JSON")),
        Err(s) => Err(grpc_failure(&s)),
    }
}

/// A stream event as its JSON-RPC `result` would be.
fn event_json(event: &StreamResponse) -> Value {
    serde_json::to_value(event).expect("an event as JSON")
}

/// The events of a JSON-RPC SSE response: each `data:` is a JSON-RPC
/// response (a result or an error).
fn sse_events(response: reqwest::Response) -> impl Stream<Item = Answer> + Send {
    let state = (response.bytes_stream(), String::new());
    futures::stream::unfold(Some(state), |state| async move {
        let (mut bytes, mut buffer) = state?;
        loop {
            if let Some(end) = buffer.find("\n\n") {
                let block: String = buffer.drain(..end + 2).collect();
                let data: String = block
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if data.is_empty() {
                    continue; // a keep-alive
                }
                let answer: Value = serde_json::from_str(&data).expect("a JSON-RPC response");
                let item = jsonrpc_answer(answer);
                let next = item.is_ok().then_some((bytes, buffer));
                return Some((item, next));
            }
            match bytes.next().await {
                Some(Ok(chunk)) => buffer.push_str(&String::from_utf8_lossy(&chunk)),
                _ => return None,
            }
        }
    })
}

async fn within<F: std::future::IntoFuture>(what: impl std::fmt::Display, f: F) -> F::Output {
    match tokio::time::timeout(WAIT, f.into_future()).await {
        Ok(out) => out,
        Err(_) => panic!("timed out after {WAIT:?}: {what}"),
    }
}

fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or_default()
}

/// The state a stream event shows (a task or a status update).
fn event_state(event: &Value) -> Option<&str> {
    event["task"]["status"]["state"]
        .as_str()
        .or_else(|| event["statusUpdate"]["status"]["state"].as_str())
}

/// Past the retry budget: every caller gets the storage error, and once the
/// store takes writes again every task ends failed, saying why.
async fn past_the_budget(bind: Bind, kind: Kind) {
    let s = setup(bind, Duration::from_millis(600)).await;
    // A stream, a blocking send and an idle task, each with its agent at
    // work (and its first updates stored).
    let mut stream = s.stream("streamed").await;
    let streamed = first_task(&mut stream).await;
    s.started(&streamed).await;
    let mut send = Box::pin(s.send("blocking"));
    let blocked = tokio::select! {
        event = s.next_event() => event.0,
        answer = &mut send => panic!("[{bind:?}] answered before its agent waited: {answer:?}"),
    };
    let mut idle_stream = s.stream("idle").await;
    let idle = first_task(&mut idle_stream).await;
    drop(idle_stream);
    s.started(&idle).await;

    let outage = s.outage(kind).await;
    // The two agents write their artifacts: the store refuses them.
    s.gate.add_permits(2);
    let mut writing = vec![s.next_event().await, s.next_event().await];
    writing.sort();
    let mut expected = vec![(streamed.clone(), "writing"), (blocked.clone(), "writing")];
    expected.sort();
    assert_eq!(writing, expected);
    // CancelTask while the agent's write is retried: the storage error.
    let canceled = within(format!("[{bind:?}] CancelTask"), s.cancel(&blocked)).await;
    canceled
        .expect_err("the cancellation cannot be stored")
        .assert_storage(bind, "CancelTask during the outage");
    let answer = within(format!("[{bind:?}] the blocking SendMessage"), &mut send).await;
    answer
        .expect_err("the blocking send fails")
        .assert_storage(bind, "the blocking SendMessage");
    // The stream: its events so far, then the storage error, then its end.
    let rest: Vec<Answer> = within(
        format!("[{bind:?}] the stream ends"),
        stream.collect::<Vec<_>>(),
    )
    .await;
    rest.last()
        .expect("the stream gets the error")
        .as_ref()
        .expect_err("the stream ends with an error")
        .assert_storage(bind, "the stream");
    // CancelTask of the idle task: its own write is what fails (a small
    // write, which a full database may still take).
    let idle_canceled = within(format!("[{bind:?}] CancelTask"), s.cancel(&idle)).await;
    match (kind, idle_canceled) {
        (_, Err(e)) => e.assert_storage(bind, "CancelTask of a task at rest"),
        (Kind::Full, Ok(task)) => assert_eq!(state(&task), "TASK_STATE_CANCELED"),
        (Kind::Locked, Ok(task)) => panic!("[{bind:?}] canceled in a locked database: {task}"),
    }
    if let Kind::Locked = kind {
        // While nothing can be written: requests about the failed tasks
        // get the storage error, never a task-state one. (A full database
        // may already have taken their small failure records.)
        s.get(&blocked)
            .await
            .expect_err("GetTask while the store fails")
            .assert_storage(bind, "GetTask");
        s.cancel(&streamed)
            .await
            .expect_err("CancelTask while the store fails")
            .assert_storage(bind, "CancelTask of a failed task");
    }

    s.end(outage).await;
    for id in [&streamed, &blocked] {
        let task = s.terminal(id).await;
        assert_eq!(state(&task), "TASK_STATE_FAILED", "[{bind:?}] {task}");
        assert_says_why(bind, &task);
    }
    let task = s.terminal(&idle).await;
    match kind {
        Kind::Locked => {
            assert_eq!(state(&task), "TASK_STATE_FAILED", "[{bind:?}] {task}");
            assert_says_why(bind, &task);
        }
        Kind::Full => assert!(
            matches!(state(&task), "TASK_STATE_FAILED" | "TASK_STATE_CANCELED"),
            "[{bind:?}] {task}"
        ),
    }
    assert_eq!(s.unfinished().await, 0, "[{bind:?}] no task left working");
    drop(send);
    s.stop().await;
}

/// The id of the task a stream opens with.
async fn first_task(stream: &mut (impl Stream<Item = Answer> + Unpin)) -> String {
    let opening = within("the stream's first event", stream.next())
        .await
        .expect("an event")
        .expect("the task");
    opening["task"]["id"].as_str().expect("a task").to_owned()
}

fn assert_says_why(bind: Bind, task: &Value) {
    let reason = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.contains("could not be saved"),
        "[{bind:?}] the status says why: {task}"
    );
}

/// Within the retry budget: the updates wait, then go through; the tasks
/// complete with their artifacts whole.
async fn within_the_budget(bind: Bind, kind: Kind) {
    let s = setup(bind, Duration::from_secs(60)).await;
    let mut stream = s.stream("streamed").await;
    let streamed = first_task(&mut stream).await;
    s.started(&streamed).await;
    let mut send = Box::pin(s.send("blocking"));
    tokio::select! {
        _ = s.next_event() => {}
        answer = &mut send => panic!("[{bind:?}] answered before its agent waited: {answer:?}"),
    }

    let outage = s.outage(kind).await;
    s.gate.add_permits(2);
    s.next_event().await;
    s.next_event().await;
    // The writes fail for a while (a few attempts), then the store
    // recovers. (However short this is, the test holds: it only makes the
    // outage shorter.)
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(400)) => {}
        answer = &mut send => panic!("[{bind:?}] answered during the outage: {answer:?}"),
    }
    s.end(outage).await;

    let task = within(format!("[{bind:?}] the blocking SendMessage"), &mut send)
        .await
        .expect("the blocking send succeeds");
    assert_eq!(state(&task), "TASK_STATE_COMPLETED", "[{bind:?}]");
    let text = task["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(
        text.len(),
        ARTIFACT_BYTES,
        "[{bind:?}] the artifact is whole"
    );
    let events: Vec<Answer> = within(
        format!("[{bind:?}] the stream ends"),
        stream.collect::<Vec<_>>(),
    )
    .await;
    let events: Vec<Value> = events
        .into_iter()
        .map(|e| e.expect("no error on the stream"))
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e["artifactUpdate"]["artifact"]["parts"][0]["text"]
                .as_str()
                .is_some_and(|t| t.len() == ARTIFACT_BYTES)),
        "[{bind:?}] the stream got the artifact"
    );
    assert_eq!(
        events.last().and_then(event_state),
        Some("TASK_STATE_COMPLETED"),
        "[{bind:?}]"
    );
    let stored = s.terminal(&streamed).await;
    assert_eq!(state(&stored), "TASK_STATE_COMPLETED");
    assert_eq!(s.unfinished().await, 0, "[{bind:?}] no task left working");
    drop(send);
    s.stop().await;
}

/// The store cannot even create the task: a send answered at once (whose
/// task is written before the answer) and a blocking send (whose task is
/// written once, when its turn ends) are answered with the storage error;
/// no task is left behind.
async fn not_created(bind: Bind) {
    let s = setup(bind, Duration::from_millis(300)).await;
    let outage = s.outage(Kind::Locked).await;
    let answer = within(
        format!("[{bind:?}] SendMessage, returnImmediately"),
        s.send_with("idle", true),
    )
    .await;
    answer
        .expect_err("the task cannot be created")
        .assert_storage(
            bind,
            "SendMessage (returnImmediately) of a task never created",
        );
    // The blocking send's agent goes straight through: its one write, at
    // the end of its turn, is refused.
    s.gate.add_permits(1);
    let answer = within(format!("[{bind:?}] SendMessage"), s.send("never stored")).await;
    answer
        .expect_err("the task cannot be created")
        .assert_storage(bind, "SendMessage of a task never created");
    s.end(outage).await;
    assert_eq!(s.unfinished().await, 0, "[{bind:?}] no task left working");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_cannot_be_created_is_answered_with_the_storage_error() {
    not_created(Bind::JsonRpc).await;
    not_created(Bind::Grpc).await;
}

/// A file that is not a database: opening it says which file, what is
/// wrong and what to do, as a server-side error (not a client's).
#[tokio::test]
async fn a_damaged_database_is_reported_when_opened() {
    use agentwire_server::store::{StorageFault, storage_fault};
    let path = temp_db("a2a-store-failure");
    std::fs::write(&path, vec![0x5a_u8; 8192]).expect("write the file");
    let err = SqliteStore::open(&path).await.expect_err("not a database");
    remove_db(&path);
    assert_eq!(
        err.kind,
        agentwire_server::types::ErrorKind::Internal,
        "{err}"
    );
    assert_eq!(storage_fault(&err), Some(StorageFault::Corrupt), "{err}");
    assert!(err.message.contains(&path.display().to_string()), "{err}");
    assert!(err.message.contains("damaged"), "{err}");
    assert!(err.message.contains("backup"), "{err}");
}

macro_rules! over_both_bindings {
    ($($name:ident($scenario:ident, $kind:ident)),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn jsonrpc() {
                    super::$scenario(super::Bind::JsonRpc, super::Kind::$kind).await
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn grpc() {
                    super::$scenario(super::Bind::Grpc, super::Kind::$kind).await
                }
            }
        )*
    };
}

over_both_bindings!(
    locked_past_the_budget(past_the_budget, Locked),
    locked_within_the_budget(within_the_budget, Locked),
    full_past_the_budget(past_the_budget, Full),
    full_within_the_budget(within_the_budget, Full),
);
