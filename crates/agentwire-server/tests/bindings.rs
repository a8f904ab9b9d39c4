//! Functional equivalence of the three protocol bindings (spec 5.1): one
//! table of scenarios, each run over JSON-RPC, HTTP+JSON and gRPC against a
//! real server on an ephemeral loopback port, with the real client
//! restricted to the binding under test.
//!
//! Every scenario is an `async fn name(b: Binding)`; `over_all_bindings!`
//! turns it into the tests `name::jsonrpc`, `name::http_json` and
//! `name::grpc`. Assertion messages start with the binding.

#[macro_use]
mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use agentwire_client::{
    Binding, CallOptions, Client, GrpcTransport, JsonRpcTransport, RestTransport, Transport,
};
use agentwire_server::{AgentExecutor, RequestContext, ServerHandle, TaskUpdater};
use agentwire_types::stream_response::Payload;
use agentwire_types::{
    A2aResult, AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, ErrorKind,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTasksRequest, ListTasksResponse, Message, Role,
    SendMessageConfiguration, SendMessageRequest, StreamResponse, SubscribeToTaskRequest, Task,
    TaskPushNotificationConfig, TaskState, new_id,
};
use common::*;
use serde_json::{Value, json};

over_all_bindings!(
    card_discovery,
    send_message_completes_a_task,
    send_message_answers_with_a_message,
    send_message_artifacts,
    streaming_event_order,
    streaming_message_and_status_only,
    streaming_chunked_artifact,
    streaming_echo_of_100_words,
    input_required_continues,
    streamed_continuation_of_an_interrupted_task,
    terminal_tasks_are_immutable,
    task_and_context_checks,
    cancel_input_required_task,
    cancel_running_task,
    cancel_running_task_repeatedly,
    cancel_with_a_slow_cancel_hook,
    two_subscribers_see_the_same_events,
    subscribe_to_input_required_task,
    list_tasks,
    get_task_history_length,
    push_configs_and_extended_card_unsupported,
    tenant_isolation,
);

// ----- 1. card discovery ----------------------------------------------------

async fn card_discovery(b: Binding) {
    let server = scripted_server().await;
    let base = server.base_url();
    let card = within(
        format!("[{b}] card"),
        agentwire_client::fetch_agent_card(&base),
    )
    .await
    .unwrap_or_else(|e| panic!("[{b}] fetch_agent_card: {e}"));
    let expected = [
        ("JSONRPC", format!("{base}/")),
        ("HTTP+JSON", base.clone()),
        ("GRPC", server.local_addr().to_string()),
    ];
    assert_eq!(
        card.supported_interfaces.len(),
        3,
        "[{b}] {:?}",
        card.supported_interfaces
    );
    for (binding, url) in expected {
        let iface = card
            .supported_interfaces
            .iter()
            .find(|i| i.protocol_binding == binding)
            .unwrap_or_else(|| panic!("[{b}] no {binding} interface in the card"));
        assert_eq!(iface.protocol_version, "1.0", "[{b}] {binding}");
        assert_eq!(iface.url, url, "[{b}] {binding}");
    }
    assert!(card.supports_streaming(), "[{b}] streaming declared");
    assert!(
        !card.supports_push_notifications(),
        "[{b}] push notifications are not declared"
    );

    // The interface of the binding under test works as the card says.
    let c = client(&server, b).await;
    let task = send_task(&c, b, msg("tck-complete-task")).await;
    assert_eq!(task.state(), TaskState::Completed, "[{b}]");

    // HTTP caching of the card (spec 8.6).
    let url = format!("{base}/.well-known/agent-card.json");
    let first = raw_send(raw_http().get(&url)).await;
    assert_eq!(first.status, 200, "[{b}] card");
    let served: AgentCard = serde_json::from_slice(&first.body).expect("a card");
    assert_eq!(served, card, "[{b}] the same card twice");
    let etag = first
        .headers
        .get("etag")
        .unwrap_or_else(|| panic!("[{b}] no ETag"))
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        first.headers.contains_key("cache-control"),
        "[{b}] no Cache-Control"
    );
    let again = raw_send(raw_http().get(&url).header("If-None-Match", &etag)).await;
    assert_eq!(again.status, 304, "[{b}] If-None-Match with the ETag");
    assert!(again.body.is_empty(), "[{b}] a 304 has no body");
    let other = raw_send(raw_http().get(&url).header("If-None-Match", "\"other\"")).await;
    assert_eq!(other.status, 200, "[{b}] If-None-Match with another ETag");
}

// ----- 2. SendMessage ---------------------------------------------------------

async fn send_message_completes_a_task(b: Binding) {
    let server = scripted_server().await;
    let c = client(&server, b).await;
    let sent = msg("tck-complete-task");
    let task = send_task(&c, b, sent.clone()).await;
    assert!(!task.id.is_empty(), "[{b}] task id");
    assert!(!task.context_id.is_empty(), "[{b}] context id");
    assert_eq!(task.state(), TaskState::Completed, "[{b}]");
    let status_message = task
        .status
        .as_ref()
        .and_then(|s| s.message.as_deref())
        .unwrap_or_else(|| panic!("[{b}] no status message"));
    assert_eq!(status_message.text(), "Hello from TCK", "[{b}]");
    assert_eq!(status_message.role(), Role::Agent, "[{b}]");
    let user = task
        .history
        .iter()
        .find(|m| m.message_id == sent.message_id)
        .unwrap_or_else(|| panic!("[{b}] the user message is not in the history"));
    assert_eq!(user.role(), Role::User, "[{b}]");
    assert_eq!(user.text(), sent.text(), "[{b}]");
    assert_eq!(
        user.task_id, task.id,
        "[{b}] the stored message names its task"
    );
    assert_eq!(user.context_id, task.context_id, "[{b}]");

    // GetTask sees exactly what SendMessage returned.
    assert_eq!(get_task(&c, b, &task.id).await, task, "[{b}] GetTask");

    // A repeated messageId is not a duplicate (conformance runs reuse one).
    let again = send_task(&c, b, sent).await;
    assert_ne!(again.id, task.id, "[{b}] a new task for the same messageId");
    assert_eq!(again.state(), TaskState::Completed, "[{b}]");
}

async fn send_message_answers_with_a_message(b: Binding) {
    let server = scripted_server().await;
    let c = client(&server, b).await;
    let res = send(&c, b, request(msg("tck-message-response"))).await;
    assert!(res.task().is_none(), "[{b}] no task: {res:?}");
    let m = res
        .message()
        .unwrap_or_else(|| panic!("[{b}] expected a Message, got {res:?}"));
    assert_eq!(m.text(), "Direct message response", "[{b}]");
    assert_eq!(m.role(), Role::Agent, "[{b}]");
    assert!(m.task_id.is_empty(), "[{b}] a direct message names no task");
    // No task was created.
    let list = list(&c, b, ListTasksRequest::default()).await;
    assert_eq!(list.total_size, 0, "[{b}] {list:?}");
}

async fn send_message_artifacts(b: Binding) {
    let server = scripted_server().await;
    let c = client(&server, b).await;

    let check = |prefix: &'static str, task: &Task| {
        assert_eq!(task.state(), TaskState::Completed, "[{b}] {prefix}");
        assert_eq!(task.artifacts.len(), 1, "[{b}] {prefix}: {task:?}");
        let a = &task.artifacts[0];
        assert!(!a.artifact_id.is_empty(), "[{b}] {prefix}: artifact id");
        assert_eq!(a.parts.len(), 1, "[{b}] {prefix}: {a:?}");
        a.parts[0].clone()
    };

    let task = send_task(&c, b, msg("tck-artifact-text")).await;
    let part = check("tck-artifact-text", &task);
    assert_eq!(part.as_text(), Some("Generated text content"), "[{b}]");

    let task = send_task(&c, b, msg("tck-artifact-file")).await;
    let part = check("tck-artifact-file", &task);
    assert_eq!(
        part.as_raw().map(|r| r.as_ref()),
        Some(&b"Generated file content"[..]),
        "[{b}] raw bytes"
    );
    assert_eq!(part.filename, "output.txt", "[{b}]");
    assert_eq!(part.media_type, "text/plain", "[{b}]");

    let task = send_task(&c, b, msg("tck-artifact-file-url")).await;
    let part = check("tck-artifact-file-url", &task);
    assert_eq!(
        part.as_url(),
        Some("https://example.com/output.txt"),
        "[{b}]"
    );
    assert_eq!(part.filename, "output.txt", "[{b}]");
    assert_eq!(part.media_type, "text/plain", "[{b}]");

    let task = send_task(&c, b, msg("tck-artifact-data")).await;
    let part = check("tck-artifact-data", &task);
    let data = part
        .as_data()
        .unwrap_or_else(|| panic!("[{b}] not a data part: {part:?}"));
    assert_eq!(data, json!({"key": "value", "count": 42}), "[{b}]");
    assert_eq!(
        data["count"].as_i64(),
        Some(42),
        "[{b}] 42 stays an integer"
    );
    assert_eq!(get_task(&c, b, &task.id).await, task, "[{b}] GetTask");

    // On the wire of the HTTP bindings the number is the number 42.
    if b == Binding::HttpJson {
        let r = rest_raw(
            &server,
            reqwest::Method::GET,
            &format!("/tasks/{}", task.id),
            None,
            true,
        )
        .await;
        let count = &r.json()["artifacts"][0]["parts"][0]["data"]["count"];
        assert_eq!(count.as_f64(), Some(42.0), "[{b}] wire form {count}");
    }
}

// ----- 3. streaming -------------------------------------------------------------

fn status_state(ev: &StreamResponse) -> Option<TaskState> {
    match ev.payload.as_ref()? {
        Payload::StatusUpdate(s) => Some(s.state()),
        _ => None,
    }
}

async fn streaming_event_order(b: Binding) {
    let server = scripted_server().await;
    let c = client(&server, b).await;
    let sent = msg("tck-stream-001");
    let stream = within(format!("[{b}] stream"), c.stream(sent.clone()))
        .await
        .unwrap_or_else(|e| panic!("[{b}] SendStreamingMessage: {e:?}"));
    let events = collect(b, "tck-stream-001", stream).await;
    assert_eq!(events.len(), 4, "[{b}] {events:#?}");

    let task = as_task(&events[0]).unwrap_or_else(|| panic!("[{b}] first event: {events:?}"));
    assert_eq!(task.state(), TaskState::Submitted, "[{b}]");
    assert!(
        task.history.iter().any(|m| m.message_id == sent.message_id),
        "[{b}] the submitted task holds the user message"
    );
    for ev in &events {
        assert_eq!(ev.task_id(), Some(task.id.as_str()), "[{b}] {ev:?}");
    }
    assert_eq!(
        status_state(&events[1]),
        Some(TaskState::Working),
        "[{b}] {:?}",
        events[1]
    );
    let Some(Payload::ArtifactUpdate(a)) = &events[2].payload else {
        panic!("[{b}] third event is not an artifact: {:?}", events[2]);
    };
    assert_eq!(a.context_id, task.context_id, "[{b}]");
    let artifact = a.artifact.as_ref().expect("an artifact");
    assert_eq!(artifact.text_content(), "Stream hello from TCK", "[{b}]");
    assert_eq!(
        status_state(&events[3]),
        Some(TaskState::Completed),
        "[{b}] {:?}",
        events[3]
    );

    let stored = get_task(&c, b, &task.id).await;
    assert_eq!(stored.state(), TaskState::Completed, "[{b}]");
    assert_eq!(stored.artifacts, vec![artifact.clone()], "[{b}]");
}

/// A message-only stream is exactly one Message (spec 3.1.2); a task that
/// completes at once streams the Task and the final status.
async fn streaming_message_and_status_only(b: Binding) {
    let server = scripted_server().await;
    let c = client(&server, b).await;
    let stream = within(
        format!("[{b}] stream"),
        c.stream(msg("tck-message-response")),
    )
    .await
    .unwrap_or_else(|e| panic!("[{b}] SendStreamingMessage: {e:?}"));
    let events = collect(b, "message-only stream", stream).await;
    assert_eq!(events.len(), 1, "[{b}] {events:#?}");
    let Some(Payload::Message(m)) = &events[0].payload else {
        panic!("[{b}] not a message: {events:?}");
    };
    assert_eq!(m.text(), "Direct message response", "[{b}]");

    let stream = within(format!("[{b}] stream"), c.stream(msg("tck-stream-002")))
        .await
        .unwrap_or_else(|e| panic!("[{b}] SendStreamingMessage: {e:?}"));
    let events = collect(b, "tck-stream-002", stream).await;
    assert_eq!(events.len(), 2, "[{b}] {events:#?}");
    let task = as_task(&events[0]).unwrap_or_else(|| panic!("[{b}] {events:?}"));
    assert_eq!(task.state(), TaskState::Submitted, "[{b}]");
    assert_eq!(
        status_state(&events[1]),
        Some(TaskState::Completed),
        "[{b}]"
    );
}

async fn streaming_chunked_artifact(b: Binding) {
    let server = scripted_server().await;
    let c = client(&server, b).await;
    let stream = within(
        format!("[{b}] stream"),
        c.stream(msg("tck-stream-artifact-chunked")),
    )
    .await
    .unwrap_or_else(|e| panic!("[{b}] SendStreamingMessage: {e:?}"));
    let events = collect(b, "chunked", stream).await;
    assert_eq!(events.len(), 5, "[{b}] {events:#?}");
    let task = as_task(&events[0]).unwrap_or_else(|| panic!("[{b}] {events:?}"));
    assert_eq!(status_state(&events[1]), Some(TaskState::Working), "[{b}]");
    let chunk = |i: usize| match &events[i].payload {
        Some(Payload::ArtifactUpdate(a)) => a.clone(),
        other => panic!("[{b}] event {i} is not an artifact chunk: {other:?}"),
    };
    let (first, second) = (chunk(2), chunk(3));
    assert!(
        !first.append && !first.last_chunk,
        "[{b}] first chunk flags"
    );
    assert!(second.append && second.last_chunk, "[{b}] last chunk flags");
    let (fa, sa) = (first.artifact.unwrap(), second.artifact.unwrap());
    assert_eq!(fa.artifact_id, sa.artifact_id, "[{b}] one artifact id");
    assert_eq!(fa.text_content(), "chunk-1 ", "[{b}]");
    assert_eq!(sa.text_content(), "chunk-2", "[{b}]");
    assert_eq!(
        status_state(&events[4]),
        Some(TaskState::Completed),
        "[{b}]"
    );

    let stored = get_task(&c, b, &task.id).await;
    assert_eq!(stored.artifacts.len(), 1, "[{b}] merged: {stored:?}");
    let merged = &stored.artifacts[0];
    assert_eq!(merged.artifact_id, fa.artifact_id, "[{b}]");
    assert_eq!(merged.parts.len(), 2, "[{b}] both parts kept");
    assert_eq!(merged.text_content(), "chunk-1 chunk-2", "[{b}]");
}

async fn streaming_echo_of_100_words(b: Binding) {
    let server = echo_server().await;
    let c = client(&server, b).await;
    let text = (0..100)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    let stream = within(format!("[{b}] stream"), c.stream(Message::user_text(&text)))
        .await
        .unwrap_or_else(|e| panic!("[{b}] SendStreamingMessage: {e:?}"));
    let events = collect(b, "echo", stream).await;
    let task = as_task(&events[0]).unwrap_or_else(|| panic!("[{b}] {:?}", events[0]));
    let chunks: Vec<_> = events
        .iter()
        .filter_map(|ev| match &ev.payload {
            Some(Payload::ArtifactUpdate(a)) => Some(a),
            _ => None,
        })
        .collect();
    assert_eq!(chunks.len(), 100, "[{b}] one chunk per word");
    assert_eq!(
        events.len(),
        103,
        "[{b}] task, working, 100 chunks, completed"
    );
    let id = &chunks[0].artifact.as_ref().unwrap().artifact_id;
    let mut streamed = String::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let a = chunk.artifact.as_ref().unwrap();
        assert_eq!(&a.artifact_id, id, "[{b}] chunk {i}: one artifact");
        assert_eq!(chunk.append, i > 0, "[{b}] chunk {i} append");
        assert_eq!(chunk.last_chunk, i == 99, "[{b}] chunk {i} lastChunk");
        streamed.push_str(&a.text_content());
    }
    assert_eq!(streamed, text, "[{b}] the chunks in order");
    assert_eq!(
        events.last().and_then(status_state),
        Some(TaskState::Completed),
        "[{b}]"
    );

    let stored = get_task(&c, b, &task.id).await;
    assert_eq!(stored.artifacts.len(), 1, "[{b}] one merged artifact");
    assert_eq!(&stored.artifacts[0].artifact_id, id, "[{b}]");
    assert_eq!(stored.artifacts[0].text_content(), text, "[{b}]");
}

// ----- 4. multi-turn --------------------------------------------------------

async fn input_required_continues(b: Binding) {
    let server = scripted_server().await;
    let c = client(&server, b).await;
    for with_context in [false, true] {
        let what = format!("[{b}] continuation (contextId given: {with_context})");
        let first = msg("tck-input-required");
        let task = send_task(&c, b, first.clone()).await;
        assert_eq!(task.state(), TaskState::InputRequired, "{what}");
        let question = task.status.as_ref().and_then(|s| s.message.as_deref());
        assert_eq!(
            question.map(Message::text).as_deref(),
            Some("Please provide more input"),
            "{what}"
        );

        let mut second = msg("tck-complete-task").with_task_id(&task.id);
        if with_context {
            second = second.with_context_id(&task.context_id);
        }
        let done = send_task(&c, b, second.clone()).await;
        assert_eq!(done.id, task.id, "{what}: the same task");
        assert_eq!(done.context_id, task.context_id, "{what}");
        assert_eq!(done.state(), TaskState::Completed, "{what}");
        let user_ids: Vec<&str> = done
            .history
            .iter()
            .filter(|m| m.role() == Role::User)
            .map(|m| m.message_id.as_str())
            .collect();
        assert_eq!(
            user_ids,
            [first.message_id.as_str(), second.message_id.as_str()],
            "{what}: both user messages in order"
        );
        assert_eq!(get_task(&c, b, &task.id).await, done, "{what}: GetTask");
    }
}

async fn streamed_continuation_of_an_interrupted_task(b: Binding) {
    let server = scripted_server().await;
    let c = client(&server, b).await;
    let task = send_task(&c, b, msg("tck-input-required")).await;
    assert_eq!(task.state(), TaskState::InputRequired, "[{b}]");
    let stream = Transport::send_streaming_message(
        &c,
        request(msg("tck-stream-001").with_task_id(&task.id)),
        &NO_OPTS,
    );
    let stream = within(format!("[{b}] streamed continuation"), stream)
        .await
        .expect("stream");
    let events = collect(b, "streamed continuation", stream).await;
    let states: Vec<Option<TaskState>> = events.iter().map(StreamResponse::state).collect();
    // The task as it stood (interrupted) opens the stream, which then
    // follows the new turn to its end instead of closing at once.
    assert_eq!(
        states,
        [
            Some(TaskState::InputRequired),
            Some(TaskState::Working),
            None,
            Some(TaskState::Completed)
        ],
        "[{b}] events: {events:?}"
    );
    assert!(
        matches!(events[0].payload, Some(Payload::Task(ref t)) if t.id == task.id),
        "[{b}] opens with the task"
    );
    assert_eq!(
        get_task(&c, b, &task.id).await.state(),
        TaskState::Completed,
        "[{b}]"
    );
}

// ----- 5. terminal tasks ----------------------------------------------------------

async fn terminal_tasks_are_immutable(b: Binding) {
    let server = scripted_server().await;
    let c = client(&server, b).await;
    let task = send_task(&c, b, msg("tck-complete-task")).await;
    let before = get_task(&c, b, &task.id).await;

    let again = Transport::send_message(
        &c,
        request(msg("tck-complete-task").with_task_id(&task.id)),
        &NO_OPTS,
    );
    expect_kind(
        within(format!("[{b}] message to a completed task"), again).await,
        ErrorKind::UnsupportedOperation,
        format!("[{b}] message to a completed task"),
    );
    let stream = Transport::send_streaming_message(
        &c,
        request(msg("tck-stream-001").with_task_id(&task.id)),
        &NO_OPTS,
    );
    expect_kind(
        within(format!("[{b}] stream to a completed task"), stream).await,
        ErrorKind::UnsupportedOperation,
        format!("[{b}] stream to a completed task"),
    );
    expect_kind(
        within(format!("[{b}] cancel"), c.cancel_task(&task.id)).await,
        ErrorKind::TaskNotCancelable,
        format!("[{b}] cancel of a completed task"),
    );
    expect_kind(
        within(format!("[{b}] subscribe"), c.subscribe(&task.id)).await,
        ErrorKind::UnsupportedOperation,
        format!("[{b}] subscribe to a completed task"),
    );
    assert_eq!(
        get_task(&c, b, &task.id).await,
        before,
        "[{b}] the task is unchanged"
    );
}

// ----- 6. taskId / contextId rules ---------------------------------------------

async fn task_and_context_checks(b: Binding) {
    let server = scripted_server().await;
    let c = client(&server, b).await;
    let task = send_task(&c, b, msg("tck-input-required")).await;
    let before = get_task(&c, b, &task.id).await;

    let mismatch = msg("tck-complete-task")
        .with_task_id(&task.id)
        .with_context_id(new_id());
    let r = within(
        format!("[{b}] mismatch"),
        Transport::send_message(&c, request(mismatch), &NO_OPTS),
    )
    .await;
    expect_kind(
        r,
        ErrorKind::InvalidParams,
        format!("[{b}] contextId mismatch"),
    );
    assert_eq!(
        get_task(&c, b, &task.id).await,
        before,
        "[{b}] a refused message leaves the task unchanged"
    );

    let unknown = msg("tck-complete-task").with_task_id(new_id());
    let r = within(
        format!("[{b}] unknown task"),
        Transport::send_message(&c, request(unknown), &NO_OPTS),
    )
    .await;
    expect_kind(
        r,
        ErrorKind::TaskNotFound,
        format!("[{b}] message to an unknown task"),
    );

    let nope = new_id();
    let get = Transport::get_task(
        &c,
        GetTaskRequest {
            id: nope.clone(),
            ..Default::default()
        },
        &NO_OPTS,
    );
    let e = expect_kind(
        within(format!("[{b}] get"), get).await,
        ErrorKind::TaskNotFound,
        format!("[{b}] GetTask of an unknown id"),
    );
    assert_eq!(
        e.metadata.get("taskId"),
        Some(&nope),
        "[{b}] metadata names the task"
    );
    expect_kind(
        within(format!("[{b}] cancel"), c.cancel_task(&nope)).await,
        ErrorKind::TaskNotFound,
        format!("[{b}] CancelTask of an unknown id"),
    );
    expect_kind(
        within(format!("[{b}] subscribe"), c.subscribe(&nope)).await,
        ErrorKind::TaskNotFound,
        format!("[{b}] SubscribeToTask of an unknown id"),
    );
}

// ----- 7. cancellation ------------------------------------------------------------

async fn cancel_input_required_task(b: Binding) {
    let server = scripted_server().await;
    let c = client(&server, b).await;
    let task = send_task(&c, b, msg("tck-input-required")).await;
    let canceled = within(format!("[{b}] cancel"), c.cancel_task(&task.id))
        .await
        .unwrap_or_else(|e| panic!("[{b}] CancelTask: {e:?}"));
    assert_eq!(canceled.id, task.id, "[{b}]");
    assert_eq!(canceled.state(), TaskState::Canceled, "[{b}]");
    assert_eq!(
        get_task(&c, b, &task.id).await.state(),
        TaskState::Canceled,
        "[{b}] GetTask"
    );
}

/// Starts the long-running scenario and returns the task as first returned.
async fn start_long_task(c: &Client, b: Binding) -> Task {
    let res = send(c, b, immediate(msg("test-resubscribe-message-id"))).await;
    let task = res
        .task()
        .unwrap_or_else(|| panic!("[{b}] expected a task: {res:?}"))
        .clone();
    assert!(
        matches!(task.state(), TaskState::Submitted | TaskState::Working),
        "[{b}] returnImmediately answers before the task ends: {:?}",
        task.state()
    );
    task
}

/// Cancels a running task; returns the canceled task.
async fn cancel_running(c: &Client, b: Binding, id: &str) -> Task {
    let started = Instant::now();
    let canceled = within(format!("[{b}] cancel {id}"), c.cancel_task(id))
        .await
        .unwrap_or_else(|e| panic!("[{b}] CancelTask of a running task: {e:?}"));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "[{b}] cancel took {:?}",
        started.elapsed()
    );
    assert_eq!(canceled.state(), TaskState::Canceled, "[{b}] {canceled:?}");
    canceled
}

async fn cancel_running_task(b: Binding) {
    let server = long_running_server().await;
    let c = client(&server, b).await;
    let task = start_long_task(&c, b).await;
    let canceled = cancel_running(&c, b, &task.id).await;
    let after = get_task(&c, b, &task.id).await;
    assert_eq!(after.state(), TaskState::Canceled, "[{b}] GetTask");
    assert_eq!(after, canceled, "[{b}] GetTask shows the canceled task");
    // The agent stopped; nothing changes the task afterwards.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        get_task(&c, b, &task.id).await,
        canceled,
        "[{b}] stays canceled"
    );
    expect_kind(
        within(format!("[{b}] cancel twice"), c.cancel_task(&task.id)).await,
        ErrorKind::TaskNotCancelable,
        format!("[{b}] second cancel"),
    );
}

/// Cancelling a running agent races with the agent's own return: the task
/// must end CANCELED every time (never FAILED).
async fn cancel_running_task_repeatedly(b: Binding) {
    let server = long_running_server().await;
    let c = client(&server, b).await;
    for round in 0..30 {
        let task = start_long_task(&c, b).await;
        wait_for_state(&c, b, &task.id, TaskState::Working).await;
        let canceled = within(format!("[{b}] cancel"), c.cancel_task(&task.id))
            .await
            .unwrap_or_else(|e| {
                panic!("[{b}] round {round}: CancelTask of a running task failed: {e:?}")
            });
        assert_eq!(canceled.state(), TaskState::Canceled, "[{b}] round {round}");
    }
}

/// Works until canceled, then returns; its `cancel` hook takes a moment
/// (cleanup), as hooks may (the runtime gives them a grace period).
struct SlowCancelHook;

impl AgentExecutor for SlowCancelHook {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.start_work().await?;
        tokio::select! {
            () = ctx.canceled() => Ok(()),
            () = tokio::time::sleep(LONG_RUN) => task.complete().await,
        }
    }

    async fn cancel(&self, _ctx: RequestContext, _task: TaskUpdater) -> A2aResult<()> {
        tokio::time::sleep(Duration::from_millis(200)).await;
        Ok(())
    }
}

/// An agent that stops on cancellation and leaves the bookkeeping to the
/// runtime (as the scripted agent does) must end CANCELED even when its
/// run ends before the runtime applies the cancellation.
async fn cancel_with_a_slow_cancel_hook(b: Binding) {
    let card = AgentCard::new("Slow cancel", "Stops on cancel, cleans up slowly", "1.0.0");
    let server = start(card, SlowCancelHook).await;
    let c = client(&server, b).await;
    let res = send(&c, b, immediate(Message::user_text("work"))).await;
    let task = res.task().expect("a task").clone();
    wait_for_state(&c, b, &task.id, TaskState::Working).await;
    let mut sub = within(format!("[{b}] subscribe"), c.subscribe(&task.id))
        .await
        .unwrap_or_else(|e| panic!("[{b}] SubscribeToTask: {e:?}"));
    next_event(b, "subscription", &mut sub).await;

    let canceled = within(format!("[{b}] cancel"), c.cancel_task(&task.id)).await;
    let rest = collect(b, "subscription", sub).await;
    let after = get_task(&c, b, &task.id).await;
    let canceled = canceled.unwrap_or_else(|e| {
        panic!(
            "[{b}] CancelTask failed: {e:?}; the task is now {:?} ({:?})",
            after.state(),
            after
                .status
                .as_ref()
                .and_then(|s| s.message.as_deref())
                .map(Message::text)
        )
    });
    assert_eq!(canceled.state(), TaskState::Canceled, "[{b}]");
    assert_eq!(after.state(), TaskState::Canceled, "[{b}] GetTask");
    assert_eq!(
        rest.last().and_then(status_state),
        Some(TaskState::Canceled),
        "[{b}] subscribers see CANCELED: {rest:#?}"
    );
}

// ----- 8. SubscribeToTask ---------------------------------------------------------

async fn two_subscribers_see_the_same_events(b: Binding) {
    let server = long_running_server().await;
    let c = client(&server, b).await;
    let task = start_long_task(&c, b).await;
    wait_for_state(&c, b, &task.id, TaskState::Working).await;

    let open = |n: u8| {
        let c = c.clone();
        let id = task.id.clone();
        async move {
            within(format!("[{b}] subscribe #{n}"), c.subscribe(id))
                .await
                .unwrap_or_else(|e| panic!("[{b}] SubscribeToTask #{n}: {e:?}"))
        }
    };
    let (mut s1, mut s2) = tokio::join!(open(1), open(2));
    let first1 = next_event(b, "subscriber 1", &mut s1).await;
    let first2 = next_event(b, "subscriber 2", &mut s2).await;
    for first in [&first1, &first2] {
        let t = as_task(first).unwrap_or_else(|| panic!("[{b}] starts with the Task: {first:?}"));
        assert_eq!(t.id, task.id, "[{b}]");
        assert_eq!(t.state(), TaskState::Working, "[{b}]");
    }

    cancel_running(&c, b, &task.id).await;
    let (rest1, rest2) = tokio::join!(
        collect(b, "subscriber 1", s1),
        collect(b, "subscriber 2", s2)
    );
    let all1: Vec<_> = std::iter::once(first1).chain(rest1).collect();
    let all2: Vec<_> = std::iter::once(first2).chain(rest2).collect();
    assert_eq!(all1, all2, "[{b}] both subscribers see the same events");
    assert_eq!(
        all1.len(),
        2,
        "[{b}] the Task, then the cancellation: {all1:#?}"
    );
    assert_eq!(
        status_state(&all1[1]),
        Some(TaskState::Canceled),
        "[{b}] ends with CANCELED: {all1:#?}"
    );
}

async fn subscribe_to_input_required_task(b: Binding) {
    let server = scripted_server().await;
    let c = client(&server, b).await;
    let task = send_task(&c, b, msg("tck-input-required")).await;
    let mut s = within(format!("[{b}] subscribe"), c.subscribe(&task.id))
        .await
        .unwrap_or_else(|e| panic!("[{b}] SubscribeToTask: {e:?}"));
    let first = next_event(b, "subscription", &mut s).await;
    let snapshot = as_task(&first).unwrap_or_else(|| panic!("[{b}] {first:?}"));
    assert_eq!(snapshot.id, task.id, "[{b}]");
    assert_eq!(snapshot.state(), TaskState::InputRequired, "[{b}]");

    let canceled = within(format!("[{b}] cancel"), c.cancel_task(&task.id))
        .await
        .unwrap_or_else(|e| panic!("[{b}] CancelTask: {e:?}"));
    assert_eq!(canceled.state(), TaskState::Canceled, "[{b}]");
    let rest = collect(b, "subscription", s).await;
    assert_eq!(
        rest.last().and_then(status_state),
        Some(TaskState::Canceled),
        "[{b}] the CANCELED status arrives and ends the stream: {rest:#?}"
    );
}

// ----- 9. ListTasks -----------------------------------------------------------------

async fn list(c: &Client, b: Binding, req: ListTasksRequest) -> ListTasksResponse {
    within(format!("[{b}] ListTasks"), c.list_tasks(req.clone()))
        .await
        .unwrap_or_else(|e| panic!("[{b}] ListTasks {req:?}: {e:?}"))
}

/// Raw `ListTasks` on the HTTP bindings: the JSON result object.
async fn list_raw(server: &ServerHandle, b: Binding, query: &[(&str, String)]) -> Value {
    match b {
        Binding::JsonRpc => {
            let mut params = serde_json::Map::new();
            for (k, v) in query {
                let v = match *k {
                    "pageSize" => json!(v.parse::<i32>().unwrap()),
                    "includeArtifacts" => json!(v == "true"),
                    _ => json!(v),
                };
                params.insert((*k).to_owned(), v);
            }
            let r = rpc_call(server, "ListTasks", Value::Object(params)).await;
            assert_eq!(r.status, 200, "[{b}]");
            let body = r.json();
            body.get("result")
                .unwrap_or_else(|| panic!("[{b}] no result: {body}"))
                .clone()
        }
        Binding::HttpJson => {
            let q: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let r = rest_raw(
                server,
                reqwest::Method::GET,
                &format!("/tasks?{}", q.join("&")),
                None,
                true,
            )
            .await;
            assert_eq!(r.status, 200, "[{b}] {:?}", r.body);
            r.json()
        }
        Binding::Grpc => unreachable!("no JSON on gRPC"),
    }
}

async fn list_tasks(b: Binding) {
    let server = scripted_server().await;
    let c = client(&server, b).await;
    let ctx = format!("ctx-{}", new_id());
    let mut created = Vec::new();
    for i in 0..7 {
        let prefix = if i % 2 == 0 {
            "tck-artifact-text"
        } else {
            "tck-input-required"
        };
        let t = send_task(&c, b, msg(prefix).with_context_id(&ctx)).await;
        assert_eq!(t.context_id, ctx, "[{b}] the client's contextId is kept");
        created.push(t);
    }
    // A task in another context must not show up.
    send_task(&c, b, msg("tck-complete-task")).await;
    let by_ctx = |extra: ListTasksRequest| ListTasksRequest {
        context_id: ctx.clone(),
        ..extra
    };

    // Paging through all 7, three at a time.
    let mut seen: Vec<Task> = Vec::new();
    let mut token = String::new();
    let mut sizes = Vec::new();
    for _ in 0..5 {
        let page = list(
            &c,
            b,
            by_ctx(ListTasksRequest {
                page_size: Some(3),
                page_token: token.clone(),
                ..Default::default()
            }),
        )
        .await;
        assert_eq!(page.total_size, 7, "[{b}] totalSize");
        assert_eq!(page.page_size, 3, "[{b}] pageSize");
        sizes.push(page.tasks.len());
        seen.extend(page.tasks);
        token = page.next_page_token;
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(sizes, [3, 3, 1], "[{b}] page sizes");
    let ids: HashSet<&str> = seen.iter().map(|t| t.id.as_str()).collect();
    let want: HashSet<&str> = created.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids.len(), 7, "[{b}] each task exactly once");
    assert_eq!(ids, want, "[{b}] exactly the tasks of the context");
    let key = |t: &Task| {
        (
            t.status_timestamp().map_or(0, |ts| ts.as_millis()),
            t.id.clone(),
        )
    };
    for pair in seen.windows(2) {
        assert!(
            key(&pair[0]) > key(&pair[1]),
            "[{b}] status timestamp descending: {:?} before {:?}",
            key(&pair[0]),
            key(&pair[1])
        );
    }
    for t in &seen {
        assert!(t.artifacts.is_empty(), "[{b}] no artifacts unless asked");
    }

    // Status filter.
    let page = list(
        &c,
        b,
        by_ctx(ListTasksRequest {
            status: TaskState::InputRequired as i32,
            ..Default::default()
        }),
    )
    .await;
    assert_eq!(page.total_size, 3, "[{b}] input-required tasks");
    assert_eq!(page.tasks.len(), 3, "[{b}]");
    assert!(page.next_page_token.is_empty(), "[{b}]");
    for t in &page.tasks {
        assert_eq!(t.state(), TaskState::InputRequired, "[{b}]");
        assert_eq!(t.history.len(), 2, "[{b}] full history by default");
    }

    // historyLength trims the history of every task.
    let page = list(
        &c,
        b,
        by_ctx(ListTasksRequest {
            history_length: Some(1),
            ..Default::default()
        }),
    )
    .await;
    assert_eq!(page.tasks.len(), 7, "[{b}]");
    for t in &page.tasks {
        assert_eq!(t.history.len(), 1, "[{b}] historyLength=1: {t:?}");
        let last = &t.history[0];
        match t.state() {
            TaskState::InputRequired => assert_eq!(last.role(), Role::Agent, "[{b}]"),
            _ => assert_eq!(last.role(), Role::User, "[{b}]"),
        }
    }

    // includeArtifacts.
    let page = list(
        &c,
        b,
        by_ctx(ListTasksRequest {
            include_artifacts: Some(true),
            ..Default::default()
        }),
    )
    .await;
    for t in &page.tasks {
        let want = usize::from(t.state() == TaskState::Completed);
        assert_eq!(t.artifacts.len(), want, "[{b}] includeArtifacts: {t:?}");
    }

    // Invalid parameters.
    for (what, req) in [
        (
            "pageSize 0",
            ListTasksRequest {
                page_size: Some(0),
                ..Default::default()
            },
        ),
        (
            "pageSize 101",
            ListTasksRequest {
                page_size: Some(101),
                ..Default::default()
            },
        ),
        (
            "garbage pageToken",
            ListTasksRequest {
                page_token: "garbage!".into(),
                ..Default::default()
            },
        ),
        (
            "historyLength -1",
            ListTasksRequest {
                history_length: Some(-1),
                ..Default::default()
            },
        ),
    ] {
        expect_kind(
            within(format!("[{b}] {what}"), c.list_tasks(by_ctx(req))).await,
            ErrorKind::InvalidParams,
            format!("[{b}] ListTasks with {what}"),
        );
    }

    // The JSON of the HTTP bindings: nextPageToken always present, artifacts
    // only when asked for.
    if matches!(b, Binding::JsonRpc | Binding::HttpJson) {
        let first = list_raw(
            &server,
            b,
            &[("contextId", ctx.clone()), ("pageSize", "3".into())],
        )
        .await;
        assert!(
            first["nextPageToken"]
                .as_str()
                .is_some_and(|t| !t.is_empty()),
            "[{b}] first page: {first}"
        );
        assert_eq!(first["totalSize"], 7, "[{b}] {first}");
        assert_eq!(first["pageSize"], 3, "[{b}] {first}");
        let all = list_raw(&server, b, &[("contextId", ctx.clone())]).await;
        assert_eq!(all["nextPageToken"], "", "[{b}] last page: {all}");
        let tasks = all["tasks"].as_array().expect("tasks");
        assert_eq!(tasks.len(), 7, "[{b}]");
        for t in tasks {
            assert!(t.get("artifacts").is_none(), "[{b}] artifacts omitted: {t}");
        }
        let with = list_raw(
            &server,
            b,
            &[
                ("contextId", ctx.clone()),
                ("includeArtifacts", "true".into()),
            ],
        )
        .await;
        for t in with["tasks"].as_array().expect("tasks") {
            if t["status"]["state"] == "TASK_STATE_COMPLETED" {
                assert_eq!(
                    t["artifacts"].as_array().map(Vec::len),
                    Some(1),
                    "[{b}] artifacts included: {t}"
                );
            }
        }
    }
}

// ----- 10. historyLength on GetTask -----------------------------------------------

async fn get_task_history_length(b: Binding) {
    let server = scripted_server().await;
    let c = client(&server, b).await;
    let sent = msg("tck-input-required");
    let task = send_task(&c, b, sent.clone()).await;
    let full = get_task_with(&c, b, &task.id, None).await;
    assert_eq!(full.history.len(), 2, "[{b}] user message and question");
    assert_eq!(full.history[0].message_id, sent.message_id, "[{b}]");

    let none = get_task_with(&c, b, &task.id, Some(0)).await;
    assert!(none.history.is_empty(), "[{b}] historyLength=0: {none:?}");
    let one = get_task_with(&c, b, &task.id, Some(1)).await;
    assert_eq!(one.history, full.history[1..], "[{b}] historyLength=1");
    assert_eq!(one.history[0].role(), Role::Agent, "[{b}]");
    let many = get_task_with(&c, b, &task.id, Some(50)).await;
    assert_eq!(many, full, "[{b}] historyLength above the length");

    let negative = Transport::get_task(
        &c,
        GetTaskRequest {
            id: task.id.clone(),
            history_length: Some(-1),
            ..Default::default()
        },
        &NO_OPTS,
    );
    expect_kind(
        within(format!("[{b}] negative"), negative).await,
        ErrorKind::InvalidParams,
        format!("[{b}] historyLength=-1"),
    );

    // The same rule on SendMessage's configuration.
    let res = send(
        &c,
        b,
        SendMessageRequest {
            message: Some(msg("tck-input-required")),
            configuration: Some(SendMessageConfiguration {
                history_length: Some(0),
                ..Default::default()
            }),
            ..Default::default()
        },
    )
    .await;
    let t = res.task().expect("a task");
    assert!(t.history.is_empty(), "[{b}] SendMessage historyLength=0");
}

// ----- 11. unsupported operations -----------------------------------------------

async fn push_configs_and_extended_card_unsupported(b: Binding) {
    let server = scripted_server().await;
    let c = client(&server, b).await;
    let task = send_task(&c, b, msg("tck-input-required")).await;
    let opts = CallOptions::new();
    let push = ErrorKind::PushNotificationNotSupported;
    let config = TaskPushNotificationConfig {
        task_id: task.id.clone(),
        id: "cfg-1".into(),
        url: "https://example.com/hook".into(),
        ..Default::default()
    };
    expect_kind(
        within(
            format!("[{b}] create"),
            c.create_task_push_notification_config(config.clone(), &opts),
        )
        .await,
        push,
        format!("[{b}] CreateTaskPushNotificationConfig"),
    );
    let get = GetTaskPushNotificationConfigRequest {
        task_id: task.id.clone(),
        id: "cfg-1".into(),
        ..Default::default()
    };
    expect_kind(
        within(
            format!("[{b}] get"),
            c.get_task_push_notification_config(get, &opts),
        )
        .await,
        push,
        format!("[{b}] GetTaskPushNotificationConfig"),
    );
    let list = ListTaskPushNotificationConfigsRequest {
        task_id: task.id.clone(),
        ..Default::default()
    };
    expect_kind(
        within(
            format!("[{b}] list"),
            c.list_task_push_notification_configs(list, &opts),
        )
        .await,
        push,
        format!("[{b}] ListTaskPushNotificationConfigs"),
    );
    let delete = DeleteTaskPushNotificationConfigRequest {
        task_id: task.id.clone(),
        id: "cfg-1".into(),
        ..Default::default()
    };
    expect_kind(
        within(
            format!("[{b}] delete"),
            c.delete_task_push_notification_config(delete, &opts),
        )
        .await,
        push,
        format!("[{b}] DeleteTaskPushNotificationConfig"),
    );
    let with_push = SendMessageRequest {
        message: Some(msg("tck-complete-task")),
        configuration: Some(SendMessageConfiguration {
            task_push_notification_config: Some(config),
            ..Default::default()
        }),
        ..Default::default()
    };
    expect_kind(
        within(
            format!("[{b}] send with push config"),
            Transport::send_message(&c, with_push, &opts),
        )
        .await,
        push,
        format!("[{b}] SendMessage with a push config"),
    );
    expect_kind(
        within(
            format!("[{b}] extended card"),
            c.get_extended_agent_card(GetExtendedAgentCardRequest::default(), &opts),
        )
        .await,
        ErrorKind::UnsupportedOperation,
        format!("[{b}] GetExtendedAgentCard"),
    );
    // Nothing of that touched the task.
    assert_eq!(
        get_task(&c, b, &task.id).await.state(),
        TaskState::InputRequired,
        "[{b}]"
    );
}

// ----- 14. tenants --------------------------------------------------------------------

/// The binding's transport (from the card's interface) with a tenant.
fn transport(server: &ServerHandle, b: Binding, tenant: &str) -> Box<dyn Transport> {
    let base = server.base_url();
    match b {
        Binding::JsonRpc => Box::new(
            JsonRpcTransport::new(format!("{base}/"))
                .unwrap()
                .with_tenant(tenant),
        ),
        Binding::HttpJson => Box::new(RestTransport::new(base).unwrap().with_tenant(tenant)),
        Binding::Grpc => Box::new(
            GrpcTransport::new(server.local_addr().to_string())
                .unwrap()
                .with_tenant(tenant),
        ),
    }
}

/// A task created under one tenant is invisible under another (and
/// without a tenant), on every binding.
async fn tenant_isolation(b: Binding) {
    let server = scripted_server().await;
    let opts = CallOptions::new();
    let a = transport(&server, b, "tenant-a");
    let other = transport(&server, b, "tenant-b");
    let none = transport(&server, b, "");
    let res = within(
        format!("[{b}] send under tenant-a"),
        a.send_message(request(msg("tck-input-required")), &opts),
    )
    .await
    .unwrap_or_else(|e| panic!("[{b}] SendMessage under a tenant: {e:?}"));
    let task = res.task().expect("a task").clone();
    let get = |id: &str| GetTaskRequest {
        id: id.to_owned(),
        ..Default::default()
    };
    let seen = within(format!("[{b}] get"), a.get_task(get(&task.id), &opts))
        .await
        .unwrap_or_else(|e| panic!("[{b}] GetTask under the same tenant: {e:?}"));
    assert_eq!(seen, task, "[{b}]");
    for (name, t) in [("tenant-b", &other), ("no tenant", &none)] {
        expect_kind(
            within(format!("[{b}] get"), t.get_task(get(&task.id), &opts)).await,
            ErrorKind::TaskNotFound,
            format!("[{b}] GetTask under {name}"),
        );
        let cancel = CancelTaskRequest {
            id: task.id.clone(),
            ..Default::default()
        };
        expect_kind(
            within(format!("[{b}] cancel"), t.cancel_task(cancel, &opts)).await,
            ErrorKind::TaskNotFound,
            format!("[{b}] CancelTask under {name}"),
        );
        let sub = SubscribeToTaskRequest {
            id: task.id.clone(),
            ..Default::default()
        };
        expect_kind(
            within(format!("[{b}] subscribe"), t.subscribe_to_task(sub, &opts)).await,
            ErrorKind::TaskNotFound,
            format!("[{b}] SubscribeToTask under {name}"),
        );
        let cont = msg("tck-complete-task").with_task_id(&task.id);
        expect_kind(
            within(
                format!("[{b}] continue"),
                t.send_message(request(cont), &opts),
            )
            .await,
            ErrorKind::TaskNotFound,
            format!("[{b}] continuing the task under {name}"),
        );
        let page = within(
            format!("[{b}] list"),
            t.list_tasks(ListTasksRequest::default(), &opts),
        )
        .await
        .unwrap_or_else(|e| panic!("[{b}] ListTasks under {name}: {e:?}"));
        assert_eq!(page.total_size, 0, "[{b}] ListTasks under {name}: {page:?}");
    }
    let page = within(
        format!("[{b}] list"),
        a.list_tasks(ListTasksRequest::default(), &opts),
    )
    .await
    .unwrap();
    assert_eq!(page.total_size, 1, "[{b}] ListTasks under tenant-a");
    assert_eq!(
        within(format!("[{b}] get"), a.get_task(get(&task.id), &opts))
            .await
            .unwrap(),
        task,
        "[{b}] untouched by the other tenants"
    );
}

/// The REST tenant forms `/{tenant}/message:send` and `/{tenant}/tasks/{id}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_tenant_paths() {
    let server = scripted_server().await;
    let send_body = json!({"message": {
        "messageId": format!("tck-complete-task-{}", new_id()),
        "role": "ROLE_USER",
        "parts": [{"text": "hello"}],
    }});
    let r = rest_raw(
        &server,
        reqwest::Method::POST,
        "/tenant-a/message:send",
        Some(send_body.to_string().into_bytes()),
        true,
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let body = r.json();
    let id = body["task"]["id"].as_str().expect("a task id").to_owned();
    assert_eq!(body["task"]["status"]["state"], "TASK_STATE_COMPLETED");

    let r = rest_raw(
        &server,
        reqwest::Method::GET,
        &format!("/tenant-a/tasks/{id}"),
        None,
        true,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["id"], id.as_str());

    for path in [format!("/tenant-b/tasks/{id}"), format!("/tasks/{id}")] {
        let r = rest_raw(&server, reqwest::Method::GET, &path, None, true).await;
        assert_rest_error(&r, 404, ErrorKind::TaskNotFound, &path);
    }
    let path = format!("/tenant-b/tasks/{id}:cancel");
    let r = rest_raw(
        &server,
        reqwest::Method::POST,
        &path,
        Some(b"{}".to_vec()),
        true,
    )
    .await;
    assert_rest_error(&r, 404, ErrorKind::TaskNotFound, &path);

    let r = rest_raw(&server, reqwest::Method::GET, "/tenant-a/tasks", None, true).await;
    assert_eq!(r.json()["totalSize"], 1);
    let r = rest_raw(&server, reqwest::Method::GET, "/tenant-b/tasks", None, true).await;
    assert_eq!(r.json()["totalSize"], 0);
}
