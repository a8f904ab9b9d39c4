//! The examples do what their doc comments say: each example file is
//! compiled into this test as a module (so the test runs the very code a
//! reader runs, without depending on where cargo puts example binaries),
//! its agent served on an ephemeral loopback port, and the client examples
//! run against them.

use std::time::Duration;

use agentwire_client::Client;
use agentwire_client::ledger::Ledger;
use agentwire_server::{A2aServer, ServerHandle};
use agentwire_types::{Message, TaskState};
use futures::StreamExt;

#[allow(dead_code)]
#[path = "../../agentwire-server/examples/echo.rs"]
mod echo_agent;

#[allow(dead_code)]
#[path = "../../agentwire-server/examples/streamed_artifact.rs"]
mod streamed_artifact;

#[allow(dead_code)]
#[path = "../../agentwire-server/examples/input_required.rs"]
mod input_required;

#[allow(dead_code)]
#[path = "../../agentwire-server/examples/cancellation.rs"]
mod cancellation;

#[allow(dead_code)]
#[path = "../../agentwire-server/examples/extended_card.rs"]
mod extended_card;

#[allow(dead_code)]
#[path = "../examples/hello.rs"]
mod hello;

#[allow(dead_code)]
#[path = "../examples/ledger.rs"]
mod ledger_example;

/// Bound on each test.
const LIMIT: Duration = Duration::from_secs(30);

async fn start(server: A2aServer) -> ServerHandle {
    server
        .bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0")
        .spawn()
}

fn status_text(task: &agentwire_types::Task) -> String {
    task.status
        .as_ref()
        .and_then(|s| s.message.as_deref())
        .map(Message::text)
        .unwrap_or_default()
}

#[tokio::test]
async fn the_hello_client_talks_to_the_hello_agent() {
    let agent = start(echo_agent::server()).await;
    let answer = tokio::time::timeout(LIMIT, hello::hello(&agent.base_url(), "hello there"))
        .await
        .expect("in time")
        .expect("the hello client succeeds");
    let mut lines = answer.lines();
    let head = lines.next().unwrap_or_default();
    assert!(
        head.starts_with("task ") && head.ends_with(": completed"),
        "{answer}"
    );
    assert_eq!(lines.next(), Some("artifact echo: hello there"), "{answer}");
}

#[tokio::test]
async fn the_hello_client_reports_an_unreachable_agent() {
    // A port nobody listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let err = tokio::time::timeout(
        LIMIT,
        hello::hello(&format!("http://127.0.0.1:{port}"), "hi"),
    )
    .await
    .expect("in time")
    .expect_err("nobody answers");
    assert!(err.is_unreachable(), "{err}");
}

#[tokio::test]
async fn the_ledger_example_chains_two_versions_and_accepts_the_second() {
    let agent = start(echo_agent::server()).await;
    let ledger = Ledger::in_memory();
    let outcome = tokio::time::timeout(LIMIT, ledger_example::run(&agent.base_url(), &ledger))
        .await
        .expect("in time")
        .expect("the ledger example succeeds");
    let [v1, v2] = outcome.chain.as_slice() else {
        panic!("two versions expected: {:#?}", outcome.chain);
    };
    assert_eq!(v1.artifact_name, v2.artifact_name);
    assert_eq!(v1.context_id, v2.context_id);
    assert_ne!(v1.task_id, v2.task_id);
    assert_eq!(
        v2.previous_artifact_id.as_deref(),
        Some(v1.artifact_id.as_str())
    );
    assert!(v2.accepted_by_user && !v1.accepted_by_user);
    assert_eq!(v1.artifact.text_content(), "a coffee poster");
    assert_eq!(v2.artifact.text_content(), "a fancier title");
    assert_eq!(outcome.pending, 0);
}

#[tokio::test]
async fn the_streamed_artifact_arrives_in_chunks_and_merges() {
    let agent = start(streamed_artifact::server()).await;
    let client = Client::connect(&agent.base_url()).await.expect("connect");
    let events: Vec<_> = tokio::time::timeout(LIMIT, async {
        client
            .stream(Message::user_text("coffee"))
            .await
            .expect("stream")
            .collect::<Vec<_>>()
            .await
    })
    .await
    .expect("in time");
    let events: Vec<_> = events.into_iter().map(|e| e.expect("an event")).collect();
    let chunks = events
        .iter()
        .filter(|e| {
            matches!(
                e.payload,
                Some(agentwire_types::stream_response::Payload::ArtifactUpdate(_))
            )
        })
        .count();
    assert_eq!(chunks, 3);
    let id = events[0].task_id().expect("a task").to_owned();
    let task = client.get_task(id).await.expect("get");
    assert_eq!(task.state(), TaskState::Completed);
    assert_eq!(task.artifacts.len(), 1);
    let report = task.artifacts[0].text_content();
    assert!(report.starts_with("# A report on coffee\n"), "{report}");
    assert!(report.ends_with("None: this is an example.\n"), "{report}");
}

#[tokio::test]
async fn the_barista_asks_for_the_size_until_it_gets_one() {
    let agent = start(input_required::server()).await;
    let client = Client::connect(&agent.base_url()).await.expect("connect");
    let run = async {
        let first = client.send_text("a coffee, please").await.expect("send");
        let task = first.task().expect("a task").clone();
        assert_eq!(task.state(), TaskState::InputRequired);
        assert_eq!(status_text(&task), input_required::QUESTION);
        let answer = |text: &str| {
            Message::user_text(text)
                .with_task_id(&task.id)
                .with_context_id(&task.context_id)
        };
        let again = client.send(answer("hmm")).await.expect("send");
        let again = again.task().expect("the same task");
        assert_eq!(again.id, task.id);
        assert_eq!(again.state(), TaskState::InputRequired);
        assert!(status_text(again).starts_with("Sorry"));
        let done = client.send(answer("large")).await.expect("send");
        let done = done.task().expect("the same task");
        assert_eq!(done.state(), TaskState::Completed);
        assert_eq!(done.artifacts[0].text_content(), "one large coffee");
    };
    tokio::time::timeout(LIMIT, run).await.expect("in time");
}

#[tokio::test]
async fn the_countdown_stops_when_canceled() {
    let agent = start(cancellation::server()).await;
    let client = Client::connect(&agent.base_url()).await.expect("connect");
    let run = async {
        let mut events = client
            .stream(Message::user_text("count down"))
            .await
            .expect("stream");
        // The task, then its first progress status: it is working.
        let first = events.next().await.expect("an event").expect("ok");
        let id = first.task_id().expect("a task").to_owned();
        let working = events.next().await.expect("an event").expect("ok");
        assert_eq!(working.state(), Some(TaskState::Working));
        let canceled = client.cancel_task(&id).await.expect("cancel");
        assert_eq!(canceled.state(), TaskState::Canceled);
        // The stream ends with the cancellation, long before the minute.
        let rest: Vec<_> = events.collect().await;
        let last = rest.last().expect("events after the cancel").as_ref();
        assert_eq!(
            last.expect("ok").state(),
            Some(TaskState::Canceled),
            "{rest:?}"
        );
        let task = client.get_task(&id).await.expect("get");
        assert_eq!(task.state(), TaskState::Canceled);
        assert!(!status_text(&task).contains("Liftoff"));
    };
    tokio::time::timeout(LIMIT, run).await.expect("in time");
}

#[tokio::test]
async fn the_extended_card_needs_the_token() {
    let agent = start(extended_card::server("s3cret")).await;
    let client = Client::connect(&agent.base_url()).await.expect("connect");
    let card = client.card().expect("the public card").clone();
    assert!(card.supports_extended_card());
    assert_eq!(card.skills.len(), 1);
    let get = |options: agentwire_client::CallOptions| {
        let client = client.with_options(options);
        async move {
            use agentwire_client::Transport as _;
            client
                .get_extended_agent_card(
                    agentwire_types::GetExtendedAgentCardRequest::default(),
                    &agentwire_client::CallOptions::new(),
                )
                .await
        }
    };
    let run = async {
        let anonymous = get(agentwire_client::CallOptions::new())
            .await
            .expect_err("anonymous callers get no extended card");
        assert_eq!(
            anonymous.kind(),
            Some(agentwire_types::ErrorKind::Unauthenticated),
            "{anonymous}"
        );
        let wrong = get(agentwire_client::CallOptions::new().with_bearer_token("nope"))
            .await
            .expect_err("a wrong token is refused");
        assert_eq!(
            wrong.kind(),
            Some(agentwire_types::ErrorKind::Unauthenticated)
        );
        let extended = get(agentwire_client::CallOptions::new().with_bearer_token("s3cret"))
            .await
            .expect("the extended card");
        assert_eq!(extended.skills.len(), 2);
        // Anonymous callers may still use the agent; members are greeted
        // by name.
        let hello = client.send_text("hi").await.expect("send");
        assert_eq!(
            hello.message().map(Message::text).as_deref(),
            Some("Hello!")
        );
        let member = client
            .with_options(agentwire_client::CallOptions::new().with_bearer_token("s3cret"))
            .send_text("hi")
            .await
            .expect("send");
        assert_eq!(
            member.message().map(Message::text).as_deref(),
            Some("Welcome back, member!")
        );
    };
    tokio::time::timeout(LIMIT, run).await.expect("in time");
}
