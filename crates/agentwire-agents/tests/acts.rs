//! The conformance agent's ACTS behaviour contract (acts/sut-behaviors.yaml,
//! the A2A Conformance Test Specification section 11): each behaviour
//! selected by the first word of the first text part, through the project's
//! client, on each binding, against the agent served on loopback; and the
//! spec rules those behaviours touch (a client-chosen contextId, the reply
//! Message's contextId, a multi-turn task's history, a part's media type
//! outside the agent's input modes).

#[macro_use]
mod common;

use std::time::Duration;

use agentwire_agents::conformance::{self, ConformanceAgent};
use agentwire_client::{Binding, Client, Transport};
use agentwire_server::ServerHandle;
use agentwire_types::{
    CancelTaskRequest, ErrorKind, GetTaskRequest, Message, Part, Role, SendMessageConfiguration,
    StreamResponse, Task, TaskState, new_id, part, stream_response,
};
use common::*;

/// The agent with a short streaming timeout (tck-long-running completes
/// after twice that).
async fn server() -> ServerHandle {
    start(
        conformance::card(),
        ConformanceAgent {
            streaming_timeout: Duration::from_millis(300),
        },
    )
    .await
}

/// A user message whose first word is `text`'s; its id is a plain uuid (no
/// TCK prefix), as an ACTS runner generates.
fn acts(text: &str) -> Message {
    Message::user_text(text).with_message_id(new_id())
}

async fn setup(b: Binding) -> (ServerHandle, Client) {
    let s = server().await;
    let c = client(&s, b).await;
    (s, c)
}

fn texts(parts: &[Part]) -> Vec<String> {
    parts
        .iter()
        .filter_map(|p| p.as_text().map(str::to_owned))
        .collect()
}

fn artifact_texts(t: &Task) -> Vec<String> {
    t.artifacts.iter().flat_map(|a| texts(&a.parts)).collect()
}

async fn get(c: &Client, b: Binding, id: &str) -> Task {
    let req = GetTaskRequest {
        id: id.into(),
        ..Default::default()
    };
    within(
        format!("[{b}] GetTask"),
        Transport::get_task(c, req, &NO_OPTS),
    )
    .await
    .unwrap_or_else(|e| panic!("[{b}] GetTask: {e:?}"))
}

async fn complete_task(b: Binding) {
    let (_s, c) = setup(b).await;
    let t = send_task(&c, b, acts("tck-complete-task hello")).await;
    assert_eq!(t.state(), TaskState::Completed, "[{b}] {t:?}");
    let status = t.status.as_ref().and_then(|s| s.message.as_ref());
    assert_eq!(
        status.map(|m| m.text()).as_deref(),
        Some("Hello from TCK"),
        "[{b}]"
    );
    assert_eq!(
        get(&c, b, &t.id).await.state(),
        TaskState::Completed,
        "[{b}]"
    );
}

async fn message_response(b: Binding) {
    let (_s, c) = setup(b).await;
    // Spec 3.4.1: an agent MAY accept a client-provided contextId; this one
    // does, and the reply Message carries it.
    let context = new_id();
    let res = send(
        &c,
        b,
        request(acts("tck-message-response hello").with_context_id(&context)),
    )
    .await;
    let m = res
        .message()
        .unwrap_or_else(|| panic!("[{b}] expected a Message, got {res:?}"));
    assert_eq!(m.role, Role::Agent as i32, "[{b}]");
    assert_eq!(texts(&m.parts), ["Direct message response"], "[{b}]");
    assert_eq!(
        m.context_id, context,
        "[{b}] the reply keeps the client's contextId"
    );
    // Without one, the agent generates a contextId and the reply carries it.
    let res = send(&c, b, request(acts("tck-message-response"))).await;
    let m = res.message().expect("a Message");
    assert!(
        !m.context_id.is_empty(),
        "[{b}] a generated contextId: {m:?}"
    );
}

async fn task_failure(b: Binding) {
    let (_s, c) = setup(b).await;
    let t = send_task(&c, b, acts("tck-task-failure please")).await;
    assert_eq!(t.state(), TaskState::Failed, "[{b}] {t:?}");
    let why = t.status.as_ref().and_then(|s| s.message.as_ref());
    assert!(
        why.is_some_and(|m| !m.text().is_empty()),
        "[{b}] an error message: {t:?}"
    );
}

async fn multi_turn(b: Binding) {
    let (_s, c) = setup(b).await;
    let t1 = send_task(&c, b, acts("tck-multi-turn start")).await;
    assert_eq!(t1.state(), TaskState::InputRequired, "[{b}]");
    let follow = |text: &str| {
        acts(text)
            .with_task_id(&t1.id)
            .with_context_id(&t1.context_id)
    };
    let t2 = send_task(&c, b, follow("more input")).await;
    assert_eq!(t2.id, t1.id, "[{b}]");
    assert_eq!(t2.state(), TaskState::InputRequired, "[{b}] not done yet");
    let t3 = send_task(&c, b, follow("done")).await;
    assert_eq!(t3.id, t1.id, "[{b}]");
    assert_eq!(t3.state(), TaskState::Completed, "[{b}]");
    // The history keeps the three user messages and the agent's questions,
    // in order.
    let t = get(&c, b, &t1.id).await;
    let users: Vec<String> = t
        .history
        .iter()
        .filter(|m| m.role == Role::User as i32)
        .map(Message::text)
        .collect();
    assert_eq!(
        users,
        ["tck-multi-turn start", "more input", "done"],
        "[{b}]"
    );
    let agents = t
        .history
        .iter()
        .filter(|m| m.role == Role::Agent as i32)
        .count();
    assert!(
        agents >= 2,
        "[{b}] the agent's two questions: {:?}",
        t.history
    );
}

async fn long_running(b: Binding) {
    let (_s, c) = setup(b).await;
    let mut req = request(acts("tck-long-running start"));
    req.configuration = Some(SendMessageConfiguration {
        return_immediately: true,
        ..Default::default()
    });
    let t = send(&c, b, req).await.task().cloned().expect("a Task");
    assert!(
        matches!(t.state(), TaskState::Submitted | TaskState::Working),
        "[{b}] {t:?}"
    );
    // Polled until it completes, with its artifact.
    let mut last = t.clone();
    for _ in 0..50 {
        last = get(&c, b, &t.id).await;
        if last.state() == TaskState::Completed {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last.state(), TaskState::Completed, "[{b}] {last:?}");
    assert_eq!(
        artifact_texts(&last),
        ["Long-running work started"],
        "[{b}]"
    );
}

async fn cancel_while_working(b: Binding, word: &str) {
    let (_s, c) = setup(b).await;
    let mut req = request(acts(word));
    req.configuration = Some(SendMessageConfiguration {
        return_immediately: true,
        ..Default::default()
    });
    let t = send(&c, b, req).await.task().cloned().expect("a Task");
    assert!(
        matches!(t.state(), TaskState::Submitted | TaskState::Working),
        "[{b}] {t:?}"
    );
    let canceled = within(
        format!("[{b}] CancelTask"),
        Transport::cancel_task(
            &c,
            CancelTaskRequest {
                id: t.id.clone(),
                ..Default::default()
            },
            &NO_OPTS,
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("[{b}] CancelTask: {e:?}"));
    assert_eq!(canceled.state(), TaskState::Canceled, "[{b}] {word}");
    assert_eq!(
        get(&c, b, &t.id).await.state(),
        TaskState::Canceled,
        "[{b}]"
    );
}

async fn cancel(b: Binding) {
    cancel_while_working(b, "tck-cancel start work").await;
}

async fn long_running_cancel(b: Binding) {
    cancel_while_working(b, "tck-long-running start").await;
}

async fn auth_required(b: Binding) {
    let (_s, c) = setup(b).await;
    let t = send_task(&c, b, acts("tck-auth-required")).await;
    assert_eq!(t.state(), TaskState::AuthRequired, "[{b}]");
    let next = acts("authorized")
        .with_task_id(&t.id)
        .with_context_id(&t.context_id);
    assert_eq!(
        send_task(&c, b, next).await.state(),
        TaskState::Completed,
        "[{b}]"
    );
}

async fn input_required_and_reject(b: Binding) {
    let (_s, c) = setup(b).await;
    let t = send_task(&c, b, acts("tck-input-required")).await;
    assert_eq!(t.state(), TaskState::InputRequired, "[{b}]");
    let t = send_task(&c, b, acts("tck-reject-task")).await;
    assert_eq!(t.state(), TaskState::Rejected, "[{b}]");
}

async fn stream(c: &Client, b: Binding, text: &str) -> Vec<StreamResponse> {
    let s = within(
        format!("[{b}] SendStreamingMessage"),
        Transport::send_streaming_message(c, request(acts(text)), &NO_OPTS),
    )
    .await
    .unwrap_or_else(|e| panic!("[{b}] SendStreamingMessage: {e:?}"));
    collect(b, text, s).await
}

fn states(events: &[StreamResponse]) -> Vec<TaskState> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(stream_response::Payload::Task(t)) => Some(t.state()),
            Some(stream_response::Payload::StatusUpdate(u)) => u.status.as_ref().map(|s| s.state()),
            _ => None,
        })
        .collect()
}

fn streamed_artifacts(events: &[StreamResponse]) -> Vec<(String, bool, bool)> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(stream_response::Payload::ArtifactUpdate(u)) => Some((
                u.artifact
                    .as_ref()
                    .map(|a| texts(&a.parts).concat())
                    .unwrap_or_default(),
                u.append,
                u.last_chunk,
            )),
            _ => None,
        })
        .collect()
}

async fn stream_basic(b: Binding) {
    let (_s, c) = setup(b).await;
    let events = stream(&c, b, "tck-stream-basic hello").await;
    let s = states(&events);
    assert_eq!(s.last(), Some(&TaskState::Completed), "[{b}] {events:?}");
    assert!(s.contains(&TaskState::Working), "[{b}] {s:?}");
    let arts = streamed_artifacts(&events);
    assert_eq!(arts.len(), 1, "[{b}] {arts:?}");
    assert_eq!(arts[0].0, "Streamed content", "[{b}]");
}

async fn stream_chunked(b: Binding) {
    let (_s, c) = setup(b).await;
    let events = stream(&c, b, "tck-stream-chunked hello").await;
    assert_eq!(states(&events).last(), Some(&TaskState::Completed), "[{b}]");
    let arts = streamed_artifacts(&events);
    assert_eq!(
        arts,
        [
            ("chunk-1 ".to_owned(), false, false),
            ("chunk-2".to_owned(), true, true)
        ],
        "[{b}]"
    );
}

async fn artifacts(b: Binding) {
    let (_s, c) = setup(b).await;
    let t = send_task(&c, b, acts("tck-artifact-text")).await;
    assert_eq!(t.state(), TaskState::Completed, "[{b}]");
    assert_eq!(artifact_texts(&t), ["Generated text content"], "[{b}]");

    let t = send_task(&c, b, acts("tck-artifact-file")).await;
    let p = &t.artifacts[0].parts[0];
    assert!(
        matches!(&p.content, Some(part::Content::Raw(bytes)) if &bytes[..] == b"Generated file content"),
        "[{b}] {p:?}"
    );
    assert_eq!(
        (p.filename.as_str(), p.media_type.as_str()),
        ("output.txt", "text/plain"),
        "[{b}]"
    );

    let t = send_task(&c, b, acts("tck-artifact-file-url")).await;
    let p = &t.artifacts[0].parts[0];
    assert!(
        matches!(&p.content, Some(part::Content::Url(u)) if u == "https://example.com/output.txt"),
        "[{b}] {p:?}"
    );
    assert_eq!(
        (p.filename.as_str(), p.media_type.as_str()),
        ("output.txt", "text/plain"),
        "[{b}]"
    );

    let t = send_task(&c, b, acts("tck-artifact-data")).await;
    let p = &t.artifacts[0].parts[0];
    let data = serde_json::to_value(p).expect("a part serializes");
    assert_eq!(
        data["data"],
        serde_json::json!({"key": "value", "count": 42}),
        "[{b}] {data}"
    );
}

/// Spec 3.1.1/3.3.2: a part whose media type the agent does not take (its
/// input modes are text/plain and application/json) is refused with
/// ContentTypeNotSupportedError, whatever the first word says.
async fn unsupported_media_type(b: Binding) {
    let (_s, c) = setup(b).await;
    let mut m = acts("tck-complete-task");
    m.parts.push(Part::file(
        &b"tck"[..],
        "x.bin",
        "application/x-unsupported-tck-type",
    ));
    let r = within(
        format!("[{b}] SendMessage"),
        Transport::send_message(&c, request(m), &NO_OPTS),
    )
    .await;
    expect_kind(
        r,
        ErrorKind::ContentTypeNotSupported,
        format!("[{b}] unsupported media type"),
    );
}

/// The TCK's messageId prefixes still select their scenarios when the
/// first word names none; a first word from the ACTS contract wins.
async fn tck_prefixes_still_hold(b: Binding) {
    let (_s, c) = setup(b).await;
    let t = send_task(&c, b, msg("tck-input-required")).await;
    assert_eq!(t.state(), TaskState::InputRequired, "[{b}]");
    let both = Message::user_text("tck-artifact-text please")
        .with_message_id(format!("tck-input-required-{}", new_id()));
    let t = send_task(&c, b, both).await;
    assert_eq!(t.state(), TaskState::Completed, "[{b}] the word wins");
}

over_all_bindings!(
    complete_task,
    message_response,
    task_failure,
    multi_turn,
    long_running,
    cancel,
    long_running_cancel,
    auth_required,
    input_required_and_reject,
    stream_basic,
    stream_chunked,
    artifacts,
    unsupported_media_type,
    tck_prefixes_still_hold,
);
