//! Two `a2a serve` processes (replicas) sharing one PostgreSQL database: a
//! task started on one is followed, continued and canceled on the other,
//! and every subscriber sees exactly the events of the task, once, in
//! order. (`crates/agentwire-server/tests/cluster.rs` has the same with two
//! servers in one process, and more.)
//!
//! Runs when `A2A_TEST_POSTGRES_URL` names a database (`bash .ci/postgres
//! start` prints one); each test gets a schema of its own. The tests are
//! ignored (`cargo test` lists them as such); `-- --include-ignored` runs them,
//! and without the variable they fail, saying so.

use std::future::IntoFuture;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use agentwire_client::{Binding, Client, ClientError, EventStream, Transport};
use agentwire_server::store::postgres::testing::TestSchema;
use agentwire_types::{
    ErrorKind, Message, SendMessageConfiguration, SendMessageRequest, StreamResponse, Task,
    TaskState, new_id, stream_response,
};
use futures::StreamExt;

/// Bound on every wait.
const WAIT: Duration = Duration::from_secs(20);

async fn within<F: IntoFuture>(what: &str, f: F) -> F::Output {
    match tokio::time::timeout(WAIT, f.into_future()).await {
        Ok(out) => out,
        Err(_) => panic!("timed out after {WAIT:?}: {what}"),
    }
}

/// An `a2a serve` process, killed when dropped.
struct Replica {
    child: Child,
    url: String,
}

impl Replica {
    /// Starts `a2a serve --agent AGENT --store URL` on a free loopback port.
    fn start(agent: &str, store: &str) -> Self {
        Self::start_with(agent, store, &[])
    }

    /// The same, with more options.
    fn start_with(agent: &str, store: &str, extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_a2a"))
            .args([
                "serve",
                "--agent",
                agent,
                "--host",
                "127.0.0.1",
                "--port",
                "0",
            ])
            .args(["--tck-streaming-timeout-ms", "600000", "--store", store])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a2a serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        reader
            .read_line(&mut line)
            .expect("read the server's first line");
        std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://127.0.0.1:"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .to_owned();
        Self { child, url }
    }

    async fn client(&self) -> Client {
        within(
            "connect",
            Client::builder()
                .bindings([Binding::JsonRpc])
                .connect(&self.url),
        )
        .await
        .expect("connect to the replica")
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two replicas of `agent` on a fresh schema.
async fn replicas(agent: &str) -> Option<(Replica, Replica, TestSchema)> {
    let schema =
        TestSchema::create("a2a_cli_cluster", "two a2a serve replicas on PostgreSQL").await?;
    let a = Replica::start(agent, &schema.url);
    let b = Replica::start(agent, &schema.url);
    Some((a, b, schema))
}

fn message(id: &str, text: &str) -> Message {
    Message::user_text(text).with_message_id(id)
}

fn request(message: Message, immediate: bool) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(message),
        configuration: Some(SendMessageConfiguration {
            return_immediately: immediate,
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn send(c: &Client, req: SendMessageRequest) -> Task {
    let r = within(
        "SendMessage",
        Transport::send_message(c, req, &Default::default()),
    )
    .await
    .expect("SendMessage");
    r.task().expect("a task").clone()
}

async fn get(c: &Client, id: &str) -> Task {
    within("GetTask", c.get_task(id)).await.expect("GetTask")
}

async fn wait_for(c: &Client, id: &str, state: TaskState) {
    within("the task's state", async {
        while get(c, id).await.state() != state {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

async fn next(stream: &mut EventStream, what: &str) -> StreamResponse {
    within(what, stream.next())
        .await
        .unwrap_or_else(|| panic!("{what}: the stream ended"))
        .unwrap_or_else(|e| panic!("{what}: {e:?}"))
}

async fn rest(stream: EventStream, what: &str) -> Vec<StreamResponse> {
    within(what, stream.collect::<Vec<_>>())
        .await
        .into_iter()
        .map(|e| e.unwrap_or_else(|e| panic!("{what}: {e:?}")))
        .collect()
}

fn task_of(event: &StreamResponse, what: &str) -> Task {
    match &event.payload {
        Some(stream_response::Payload::Task(t)) => t.clone(),
        other => panic!("{what}: not a Task: {other:?}"),
    }
}

async fn subscribe(c: &Client, id: &str, what: &str) -> (Task, EventStream) {
    let mut stream = within(what, c.subscribe(id))
        .await
        .unwrap_or_else(|e| panic!("{what}: {e:?}"));
    let first = next(&mut stream, what).await;
    (task_of(&first, what), stream)
}

/// (a) and (d): a long-running task started on a, followed on both, canceled
/// on b; then one nobody follows, and one a blocking send waits for on a.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: set A2A_TEST_POSTGRES_URL (bash .ci/postgres start)"]
async fn cancel_on_one_replica_stops_the_agent_on_the_other() {
    let Some((a, b, schema)) = replicas("conformance").await else {
        return;
    };
    let (ca, cb) = (a.client().await, b.client().await);

    let started = send(
        &ca,
        request(message("test-resubscribe-message-id-1", "run long"), true),
    )
    .await;
    let id = started.id.clone();
    wait_for(&ca, &id, TaskState::Working).await;
    let (on_b, follow_b) = subscribe(&cb, &id, "subscriber on b").await;
    let (on_a, follow_a) = subscribe(&ca, &id, "subscriber on a").await;
    assert_eq!(on_b.state(), TaskState::Working);
    assert_eq!(on_a, on_b);
    let canceled = within("cancel on b", cb.cancel_task(&id))
        .await
        .expect("CancelTask on b");
    assert_eq!(canceled.state(), TaskState::Canceled);
    let seen_b = rest(follow_b, "subscriber on b").await;
    let seen_a = rest(follow_a, "subscriber on a").await;
    assert_eq!(seen_b.len(), 1, "{seen_b:?}");
    assert_eq!(seen_b[0].state(), Some(TaskState::Canceled));
    assert!(matches!(
        seen_b[0].payload,
        Some(stream_response::Payload::StatusUpdate(_))
    ));
    assert_eq!(seen_a, seen_b);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(get(&ca, &id).await, canceled, "it stays canceled");

    // Nobody follows it.
    let id = send(
        &ca,
        request(message("test-resubscribe-message-id-2", "long"), true),
    )
    .await
    .id;
    wait_for(&cb, &id, TaskState::Working).await;
    let canceled = within("cancel on b", cb.cancel_task(&id))
        .await
        .expect("CancelTask on b");
    assert_eq!(canceled.state(), TaskState::Canceled);
    assert_eq!(get(&ca, &id).await, canceled);

    // A blocking send on a, canceled from b.
    let blocking = {
        let ca = ca.clone();
        tokio::spawn(async move {
            Transport::send_message(
                &ca,
                request(message("test-resubscribe-message-id-3", "long"), false),
                &Default::default(),
            )
            .await
        })
    };
    let id = within("the blocking send's task", async {
        loop {
            let page = cb.list_tasks(Default::default()).await.expect("ListTasks");
            if let Some(t) = page.tasks.iter().find(|t| t.state() == TaskState::Working) {
                return t.id.clone();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    within("cancel on b", cb.cancel_task(&id))
        .await
        .expect("CancelTask on b");
    let answer = within("the blocking send", blocking)
        .await
        .expect("join")
        .expect("SendMessage on a");
    assert_eq!(answer.task().map(Task::state), Some(TaskState::Canceled));

    drop((a, b));
    schema.drop_schema().await;
}

/// (b): a task waiting for input continues on the other replica, both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: set A2A_TEST_POSTGRES_URL (bash .ci/postgres start)"]
async fn input_required_continues_on_either_replica() {
    let Some((a, b, schema)) = replicas("conformance").await else {
        return;
    };
    let (ca, cb) = (a.client().await, b.client().await);
    for (first, second, what) in [(&ca, &cb, "a then b"), (&cb, &ca, "b then a")] {
        let task = send(first, request(message("tck-input-required-1", "hi"), false)).await;
        assert_eq!(task.state(), TaskState::InputRequired, "{what}");
        let (_, follower) = subscribe(first, &task.id, what).await;
        let done = send(
            second,
            request(
                message(&format!("tck-complete-task-{}", new_id()), "more").with_task_id(&task.id),
                false,
            ),
        )
        .await;
        assert_eq!(done.state(), TaskState::Completed, "{what}");
        assert_eq!(get(first, &task.id).await, done, "{what}");
        let seen = rest(follower, what).await;
        assert_eq!(seen.len(), 1, "{what}: {seen:?}");
        assert_eq!(seen[0].state(), Some(TaskState::Completed), "{what}");
    }
    drop((a, b));
    schema.drop_schema().await;
}

/// (c): the echo agent streams many words on a; b follows from the middle:
/// after its snapshot, b sees exactly the rest of a's stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: set A2A_TEST_POSTGRES_URL (bash .ci/postgres start)"]
async fn a_stream_on_one_replica_is_followed_exactly_from_the_other() {
    let Some((a, b, schema)) = replicas("echo").await else {
        return;
    };
    let (ca, cb) = (a.client().await, b.client().await);
    let mut words = 1500;
    let mut checked = false;
    for _ in 0..3 {
        let text: Vec<String> = (0..words).map(|i| format!("w{i}")).collect();
        let text = text.join(" ");
        let mut stream_a = within("stream on a", ca.stream(Message::user_text(&text)))
            .await
            .expect("SendStreamingMessage on a");
        let mut on_a = Vec::new();
        while on_a.len() < 5 {
            on_a.push(next(&mut stream_a, "a's stream").await);
        }
        let id = task_of(&on_a[0], "a's stream").id;
        let follow_b = match within("subscribe on b", cb.subscribe(&id)).await {
            Ok(s) => s,
            // Finished before b could join: again, longer.
            Err(ClientError::A2a(e)) if e.kind == ErrorKind::UnsupportedOperation => {
                let _ = rest(stream_a, "a's stream").await;
                words *= 2;
                continue;
            }
            Err(e) => panic!("SubscribeToTask on b: {e:?}"),
        };
        let (rest_a, on_b) = tokio::join!(rest(stream_a, "a's stream"), rest(follow_b, "b"));
        on_a.extend(rest_a);
        // Task, working, one chunk per word, completed.
        assert_eq!(on_a.len(), words + 3);
        let snapshot = task_of(&on_b[0], "b's first event");
        if snapshot.state() == TaskState::Completed {
            words *= 2;
            continue;
        }
        let before = snapshot.artifacts.first().map_or(0, |a| a.parts.len());
        eprintln!("b joined after {before} of {words} chunks");
        assert_eq!(
            &on_b[1..],
            &on_a[2 + before..],
            "after its snapshot ({before} chunks), b sees exactly the rest of a's stream"
        );
        assert_eq!(get(&cb, &id).await.artifacts[0].text_content(), text);
        checked = true;
        break;
    }
    assert!(checked, "b never joined a stream in the middle");
    drop((a, b));
    schema.drop_schema().await;
}

/// A replica killed in the middle of a run: the others fail its working
/// task once it stops announcing itself, and not before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: set A2A_TEST_POSTGRES_URL (bash .ci/postgres start)"]
async fn the_tasks_of_a_killed_replica_are_failed_by_the_others() {
    killed_replica(false).await;
}

/// The same for a task that has been quiet longer than the event log keeps
/// events (its logged events purged, as the retention purge does after ten
/// minutes): the row names its writer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: set A2A_TEST_POSTGRES_URL (bash .ci/postgres start)"]
async fn a_quiet_task_of_a_killed_replica_is_failed_too() {
    killed_replica(true).await;
}

async fn killed_replica(purge_events: bool) {
    let Some(mut schema) =
        TestSchema::create("a2a_cli_cluster", "two a2a serve replicas on PostgreSQL").await
    else {
        return;
    };
    let quick = ["--replica-timeout", "3"];
    let mut a = Replica::start_with("conformance", &schema.url, &quick);
    let b = Replica::start_with("conformance", &schema.url, &quick);
    let (ca, cb) = (a.client().await, b.client().await);
    let started = send(
        &ca,
        request(message("test-resubscribe-message-id-k", "run long"), true),
    )
    .await;
    let id = started.id.clone();
    wait_for(&ca, &id, TaskState::Working).await;
    // A is alive (it announces itself several times a second): its task
    // is left alone.
    tokio::time::sleep(Duration::from_millis(4000)).await;
    assert_eq!(get(&cb, &id).await.state(), TaskState::Working);
    if purge_events {
        let q = format!("DELETE FROM {}.a2a_task_events", schema.name);
        let purged = schema.execute(&q).await;
        assert!(purged > 0, "the task had logged events");
    }

    let _ = a.child.kill();
    let _ = a.child.wait();
    wait_for(&cb, &id, TaskState::Failed).await;
    let failed = get(&cb, &id).await;
    let why = failed
        .status
        .as_ref()
        .and_then(|s| s.message.as_deref())
        .map(Message::text)
        .unwrap_or_default();
    assert!(why.contains("replica"), "status message {why:?}");
    drop(b);
    schema.drop_schema().await;
}

/// The conformance agent's replicas sign push notifications with one key:
/// both serve the same JWKS (a receiver may fetch it from either).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: set A2A_TEST_POSTGRES_URL (bash .ci/postgres start)"]
async fn replicas_serve_one_push_signing_key() {
    let Some(schema) =
        TestSchema::create("a2a_cli_cluster", "two a2a serve replicas on PostgreSQL").await
    else {
        return;
    };
    let a = Replica::start("conformance", &schema.url);
    let b = Replica::start("conformance", &schema.url);
    agentwire_client::install_crypto_provider();
    let http = reqwest::Client::new();
    let mut jwks = Vec::new();
    for r in [&a, &b] {
        let url = format!(
            "{}/.well-known/a2a-push-jwks.json",
            r.url.trim_end_matches('/')
        );
        let body = within("JWKS", async { http.get(&url).send().await?.text().await })
            .await
            .expect("the JWKS");
        assert!(body.contains("\"kid\""), "{body}");
        jwks.push(body);
    }
    assert_eq!(jwks[0], jwks[1], "one key for both replicas");
    drop((a, b));
    schema.drop_schema().await;
}
