//! Following the stream of an answer to a task waiting for input, on every
//! binding, against the Dependency Compatibility Agent: the stream opens
//! with the task as it was (input-required) and must be followed past that
//! snapshot to the streamed report and the completed state. A subscription
//! to a task waiting for input, by contrast, ends at its snapshot.

use std::time::Duration;

use agentwire_agents::coordinator::payment_service_files;
use agentwire_agents::depcompat::{self, DepCompatAgent, JSON_REPORT, MARKDOWN_REPORT};
use agentwire_client::follow::{FollowOptions, TaskView, follow};
use agentwire_client::{Binding, CallOptions, Client, Transport};
use agentwire_server::{A2aServer, ServerHandle};
use agentwire_types::{
    Message, Part, Role, SendMessageRequest, StreamResponse, Task, TaskState, stream_response,
};
use futures::StreamExt;

/// Bound on every exchange.
const LIMIT: Duration = Duration::from_secs(30);

async fn server() -> ServerHandle {
    A2aServer::new(depcompat::card(), DepCompatAgent)
        .bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0")
        .spawn()
}

async fn client(server: &ServerHandle, b: Binding) -> Client {
    let c = Client::builder()
        .bindings([b])
        .connect(&server.base_url())
        .await
        .expect("connect");
    assert_eq!(c.binding(), Some(b));
    c
}

/// The project files without the target runtime: the agent asks for it.
fn question_request() -> SendMessageRequest {
    let mut parts = vec![Part::text("Check payment-service")];
    parts.extend(
        payment_service_files()
            .into_iter()
            .map(|f| Part::file(f.bytes, f.name, "application/json")),
    );
    SendMessageRequest {
        message: Some(Message::new(Role::User, parts)),
        ..Default::default()
    }
}

/// A task waiting for the target runtime.
async fn waiting_task(c: &Client, b: Binding) -> Task {
    let opts = CallOptions::new().with_timeout(LIMIT);
    let resp = c
        .send_message(question_request(), &opts)
        .await
        .unwrap_or_else(|e| panic!("[{b}] send: {e}"));
    let task = resp.task().expect("a task").clone();
    assert_eq!(task.state(), TaskState::InputRequired, "[{b}]");
    task
}

async fn collect(b: Binding, events: agentwire_client::EventStream) -> Vec<StreamResponse> {
    tokio::time::timeout(LIMIT, events.collect::<Vec<_>>())
        .await
        .unwrap_or_else(|_| panic!("[{b}] the stream did not end within {LIMIT:?}"))
        .into_iter()
        .map(|e| e.unwrap_or_else(|e| panic!("[{b}] stream error: {e}")))
        .collect()
}

async fn answer_is_followed_to_the_report(b: Binding) {
    let server = server().await;
    let c = client(&server, b).await;
    let task = waiting_task(&c, b).await;
    let answer = Message::user_text("Node.js 24")
        .with_task_id(&task.id)
        .with_context_id(&task.context_id);
    let opts = CallOptions::new().with_timeout(LIMIT);
    let stream = c
        .send_streaming_message(
            SendMessageRequest {
                message: Some(answer),
                ..Default::default()
            },
            &opts,
        )
        .await
        .unwrap_or_else(|e| panic!("[{b}] stream the answer: {e}"));
    let events = collect(
        b,
        follow(
            c.clone(),
            Some(stream),
            None,
            FollowOptions {
                call: opts.clone(),
                ..Default::default()
            },
        ),
    )
    .await;
    // The stream opens with the task as it was when the answer arrived.
    assert!(
        matches!(&events[0].payload, Some(stream_response::Payload::Task(t)) if t.id == task.id),
        "[{b}] {:?}",
        events[0]
    );
    assert_eq!(events[0].state(), Some(TaskState::InputRequired), "[{b}]");
    // ... and is followed to the end: the report chunks, then completed.
    let chunks = events
        .iter()
        .filter(|e| matches!(e.payload, Some(stream_response::Payload::ArtifactUpdate(_))))
        .count();
    assert!(chunks >= 2, "[{b}] {chunks} artifact chunks");
    assert_eq!(
        events.last().and_then(StreamResponse::state),
        Some(TaskState::Completed),
        "[{b}] {events:?}"
    );
    let mut view = TaskView::new();
    for e in &events {
        view.apply(e);
    }
    let done = view.task().expect("a task");
    assert_eq!(done.state(), TaskState::Completed, "[{b}]");
    let names: Vec<&str> = done.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert!(
        names.contains(&JSON_REPORT) && names.contains(&MARKDOWN_REPORT),
        "[{b}] {names:?}"
    );
    let md = done
        .artifacts
        .iter()
        .find(|a| a.name == MARKDOWN_REPORT)
        .expect("the Markdown report");
    assert!(view.artifacts().is_complete(&md.artifact_id), "[{b}]");
    assert!(!md.text_content().is_empty(), "[{b}]");
    // The server agrees.
    let stored = Transport::get_task(
        &c,
        agentwire_types::GetTaskRequest {
            id: task.id.clone(),
            ..Default::default()
        },
        &opts,
    )
    .await
    .unwrap_or_else(|e| panic!("[{b}] get: {e}"));
    assert_eq!(stored.state(), TaskState::Completed, "[{b}]");
}

async fn subscription_to_a_waiting_task_ends_at_its_snapshot(b: Binding) {
    let server = server().await;
    let c = client(&server, b).await;
    let task = waiting_task(&c, b).await;
    // follow subscribes: the first event is the current state, waiting for
    // input, and nothing follows until the caller answers.
    let events = collect(
        b,
        follow(
            c.clone(),
            None,
            Some(task.id.clone()),
            FollowOptions {
                call: CallOptions::new().with_timeout(LIMIT),
                ..Default::default()
            },
        ),
    )
    .await;
    assert_eq!(events.len(), 1, "[{b}] {events:?}");
    assert_eq!(events[0].state(), Some(TaskState::InputRequired), "[{b}]");
}

macro_rules! over_all_bindings {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                use super::*;

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn jsonrpc() {
                    super::$name(Binding::JsonRpc).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn http_json() {
                    super::$name(Binding::HttpJson).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn grpc() {
                    super::$name(Binding::Grpc).await;
                }
            }
        )*
    };
}

over_all_bindings!(
    answer_is_followed_to_the_report,
    subscription_to_a_waiting_task_ends_at_its_snapshot,
);
