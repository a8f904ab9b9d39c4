//! The client side of task generations (A2A v1.1 draft) against the
//! project's server on loopback, on every binding: a stream that lost an
//! event (a faulty link, simulated by dropping one event between the
//! transport and `follow`) is healed from `GetTask`; `wait_for_change`
//! long-polls (answered on change, and on timeout); two racing messages
//! with the same `ifGenerationMatch`: exactly one wins, the other gets the
//! typed mismatch.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentwire_client::follow::{ArtifactAssembler, FollowOptions, GenerationGap, TaskView, follow};
use agentwire_client::generation::{WaitMode, WaitOptions, wait_for_change};
use agentwire_client::{Binding, CallOptions, Client, EventStream, Transport};
use agentwire_server::{
    A2aResult, A2aServer, AgentExecutor, RequestContext, ServerHandle, TaskUpdater,
};
use agentwire_types::{
    AgentCard, Artifact, Message, SendMessageConfiguration, SendMessageRequest, StreamResponse,
    Task, TaskState, stream_response,
};
use futures::StreamExt;

/// Bound on every exchange.
const LIMIT: Duration = Duration::from_secs(30);

/// "ask": input required; an answer to it: an artifact, completed;
/// anything else: an artifact in three chunks.
struct Agent;

impl AgentExecutor for Agent {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        if let Some(prev) = &ctx.task
            && prev.state().is_interrupted()
        {
            task.add_artifact(Artifact::text("answer", "ok")).await?;
            return task.complete().await;
        }
        if ctx.text().starts_with("ask") {
            return task.require_input("Which one?").await;
        }
        task.start_work().await?;
        let id = agentwire_types::new_id();
        for (i, w) in ["alpha ", "beta ", "gamma"].iter().enumerate() {
            task.artifact_chunk(Artifact::text("story", *w).with_id(&id), i > 0, i == 2)
                .await?;
        }
        task.complete().await
    }
}

async fn server() -> ServerHandle {
    let card = AgentCard::new("Gen", "generations", "1.0.0").with_streaming(true);
    A2aServer::new(card, Agent)
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

fn v11() -> CallOptions {
    CallOptions::new()
        .with_service_param("A2A-Version", "1.1")
        .with_timeout(LIMIT)
}

fn request(text: &str) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(Message::user_text(text)),
        ..Default::default()
    }
}

/// A task waiting for input, with its generation.
async fn waiting(c: &Client, b: Binding) -> Task {
    let resp = c
        .send_message(request("ask"), &v11())
        .await
        .unwrap_or_else(|e| panic!("[{b}] send: {e}"));
    let task = resp.task().expect("a task").clone();
    assert_eq!(task.state(), TaskState::InputRequired, "[{b}]");
    assert!(task.generation >= 1, "[{b}] no generation: {task:?}");
    task
}

fn is_middle_chunk(e: &StreamResponse) -> bool {
    matches!(&e.payload, Some(stream_response::Payload::ArtifactUpdate(u))
        if u.append && !u.last_chunk)
}

async fn gap_is_healed(b: Binding) {
    let server = server().await;
    let c = client(&server, b).await;
    let stream = c
        .send_streaming_message(request("write"), &v11())
        .await
        .unwrap_or_else(|e| panic!("[{b}] stream: {e}"));
    // The faulty link: the middle chunk ("beta ") never arrives.
    let dropped = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&dropped);
    // What gets through, assembled as a client without the check would.
    let naive = Arc::new(Mutex::new(ArtifactAssembler::new()));
    let kept = Arc::clone(&naive);
    let lossy = stream.wrap(move |s| {
        s.filter(move |e| {
            let drop = e.as_ref().is_ok_and(is_middle_chunk);
            if drop {
                seen.lock().unwrap().push(e.as_ref().ok().cloned());
            } else if let Ok(StreamResponse {
                payload: Some(stream_response::Payload::ArtifactUpdate(u)),
            }) = e
            {
                kept.lock().unwrap().push(u);
            }
            futures::future::ready(!drop)
        })
    });
    let gaps = Arc::new(Mutex::new(Vec::<GenerationGap>::new()));
    let hook = Arc::clone(&gaps);
    let opts = FollowOptions {
        generations: true,
        call: v11(),
        on_gap: Some(Arc::new(move |g: &GenerationGap| {
            hook.lock().unwrap().push(g.clone())
        })),
        ..Default::default()
    };
    let mut events = follow(c.clone(), Some(lossy), None, opts);
    let mut view = TaskView::new();
    let mut kinds = Vec::new();
    while let Some(e) = tokio::time::timeout(LIMIT, events.next())
        .await
        .unwrap_or_else(|_| panic!("[{b}] stuck"))
    {
        let e = e.unwrap_or_else(|e| panic!("[{b}] event: {e}"));
        kinds.push(agentwire_client::generation::event_generation(&e));
        view.apply(&e);
    }
    assert_eq!(dropped.lock().unwrap().len(), 1, "[{b}] one chunk dropped");
    // Assembled from the stream alone, the artifact would lack the chunk.
    assert_eq!(
        naive.lock().unwrap().artifacts()[0].text_content(),
        "alpha gamma",
        "[{b}]"
    );
    let task = view.task().expect("a task");
    assert_eq!(task.state(), TaskState::Completed, "[{b}] {kinds:?}");
    assert_eq!(task.artifacts.len(), 1, "[{b}]");
    assert_eq!(
        task.artifacts[0].text_content(),
        "alpha beta gamma",
        "[{b}] healed from GetTask: {kinds:?}"
    );
    let gaps = gaps.lock().unwrap().clone();
    assert_eq!(gaps.len(), 1, "[{b}] {gaps:?}");
    assert_eq!(gaps[0].got, gaps[0].after + 2, "[{b}] {gaps:?}");
    assert!(gaps[0].healed_at >= Some(gaps[0].got), "[{b}] {gaps:?}");
}

async fn long_poll_answers_on_change(b: Binding) {
    let server = server().await;
    let c = client(&server, b).await;
    let task = waiting(&c, b).await;
    let g = task.generation;
    let opts = WaitOptions {
        after: Some(g),
        timeout: Some(LIMIT),
        ..Default::default()
    };
    let (waiter_c, id) = (c.clone(), task.id.clone());
    let waiter = tokio::spawn(async move {
        wait_for_change(&waiter_c, &id, &opts, &CallOptions::new(), |_, _| {}).await
    });
    // The long-poll is held: nothing changes until the answer is sent.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "[{b}] answered before any change");
    let mut answer = Message::user_text("the red one");
    answer.task_id.clone_from(&task.id);
    answer.context_id.clone_from(&task.context_id);
    c.send_message(
        SendMessageRequest {
            message: Some(answer),
            ..Default::default()
        },
        &CallOptions::new().with_timeout(LIMIT),
    )
    .await
    .unwrap_or_else(|e| panic!("[{b}] answer: {e}"));
    let (after, mode) = tokio::time::timeout(LIMIT, waiter)
        .await
        .expect("the long-poll answers")
        .expect("joined")
        .unwrap_or_else(|e| panic!("[{b}] wait: {e}"));
    assert_eq!(mode, WaitMode::LongPoll, "[{b}]");
    assert!(after.generation > g, "[{b}] {} <= {g}", after.generation);
}

async fn long_poll_times_out(b: Binding) {
    let server = server().await;
    let c = client(&server, b).await;
    let task = waiting(&c, b).await;
    let opts = WaitOptions {
        after: Some(task.generation),
        timeout: Some(Duration::from_millis(800)),
        ..Default::default()
    };
    let started = std::time::Instant::now();
    let res = wait_for_change(&c, &task.id, &opts, &CallOptions::new(), |_, _| {}).await;
    match res {
        Err(agentwire_client::ClientError::WaitTimeout { task_id, .. }) => {
            assert_eq!(task_id, task.id, "[{b}]")
        }
        other => panic!("[{b}] expected a timeout, got {other:?}"),
    }
    assert!(started.elapsed() >= Duration::from_millis(700), "[{b}]");
}

async fn racing_writers_one_wins(b: Binding) {
    let server = server().await;
    let c = client(&server, b).await;
    let task = waiting(&c, b).await;
    let send = |text: &str| {
        let mut m = Message::user_text(text);
        m.task_id.clone_from(&task.id);
        m.context_id.clone_from(&task.context_id);
        let req = SendMessageRequest {
            message: Some(m),
            configuration: Some(SendMessageConfiguration {
                if_generation_match: Some(task.generation),
                ..Default::default()
            }),
            ..Default::default()
        };
        let c = c.clone();
        async move {
            c.send_message(req, &CallOptions::new().with_timeout(LIMIT))
                .await
        }
    };
    let (a, z) = tokio::join!(send("first"), send("second"));
    let (wins, losses): (Vec<_>, Vec<_>) = [a, z].into_iter().partition(Result::is_ok);
    assert_eq!(wins.len(), 1, "[{b}] exactly one wins: {losses:?}");
    let e = losses.into_iter().next().unwrap().unwrap_err();
    let m = e
        .generation_mismatch()
        .unwrap_or_else(|| panic!("[{b}] not a mismatch: {e:?}"));
    assert_eq!(m.expected, Some(task.generation), "[{b}]");
    assert!(m.current > Some(task.generation), "[{b}] {m:?}");
    assert_eq!(m.task_id.as_deref(), Some(task.id.as_str()), "[{b}]");
}

/// Against a server that serves 1.0 only, `wait_for_change` says it falls
/// back and polls: it still answers once the task ends its turn.
async fn polling_fallback_without_1_1(b: Binding) {
    let card = AgentCard::new("Gen", "generations", "1.0.0").with_streaming(true);
    let config = agentwire_server::HandlerConfig {
        versions: vec!["1.0".to_owned()],
        ..Default::default()
    };
    let server = A2aServer::new(card, Agent)
        .config(config)
        .bind("127.0.0.1:0")
        .await
        .expect("bind")
        .spawn();
    let c = client(&server, b).await;
    let resp = c
        .send_message(request("ask"), &CallOptions::new().with_timeout(LIMIT))
        .await
        .unwrap_or_else(|e| panic!("[{b}] send: {e}"));
    let task = resp.task().expect("a task").clone();
    let opts = WaitOptions {
        timeout: Some(LIMIT),
        poll_interval: Duration::from_millis(50),
        ..Default::default()
    };
    let mut fell_back = Vec::new();
    let (t, mode) = wait_for_change(&c, &task.id, &opts, &CallOptions::new(), |e, _| {
        if let agentwire_client::generation::WaitEvent::FallingBack { reason } = e {
            fell_back.push(reason);
        }
    })
    .await
    .unwrap_or_else(|e| panic!("[{b}] wait: {e}"));
    assert_eq!(mode, WaitMode::Polling, "[{b}]");
    assert_eq!(fell_back.len(), 1, "[{b}] {fell_back:?}");
    assert!(fell_back[0].contains("1.1"), "[{b}] {fell_back:?}");
    assert_eq!(t.state(), TaskState::InputRequired, "[{b}]");
    // And a message with ifGenerationMatch is refused as a version this
    // server does not serve (never silently sent without the check).
    let mut m = Message::user_text("x");
    m.task_id.clone_from(&task.id);
    let e = c
        .send_message(
            SendMessageRequest {
                message: Some(m),
                configuration: Some(SendMessageConfiguration {
                    if_generation_match: Some(1),
                    ..Default::default()
                }),
                ..Default::default()
            },
            &CallOptions::new().with_timeout(LIMIT),
        )
        .await
        .expect_err("1.1 refused");
    assert_eq!(
        e.kind(),
        Some(agentwire_types::ErrorKind::VersionNotSupported),
        "[{b}] {e}"
    );
}

/// A 1.0 call (no `A2A-Version: 1.1`) sees no generation; `follow`
/// checks nothing then and the stream is taken as it is.
async fn v10_stream_is_unchanged(b: Binding) {
    let server = server().await;
    let c = client(&server, b).await;
    let stream: EventStream = c
        .send_streaming_message(request("write"), &CallOptions::new().with_timeout(LIMIT))
        .await
        .unwrap_or_else(|e| panic!("[{b}] stream: {e}"));
    let mut events = follow(c.clone(), Some(stream), None, FollowOptions::default());
    let mut view = TaskView::new();
    while let Some(e) = tokio::time::timeout(LIMIT, events.next())
        .await
        .expect("not stuck")
    {
        let e = e.expect("an event");
        assert_eq!(
            agentwire_client::generation::event_generation(&e).unwrap_or(0),
            0,
            "[{b}] a 1.0 call got a generation"
        );
        view.apply(&e);
    }
    let t = view.task().expect("a task");
    assert_eq!(t.artifacts[0].text_content(), "alpha beta gamma", "[{b}]");
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
    gap_is_healed,
    long_poll_answers_on_change,
    long_poll_times_out,
    racing_writers_one_wins,
    v10_stream_is_unchanged,
    polling_fallback_without_1_1,
);
