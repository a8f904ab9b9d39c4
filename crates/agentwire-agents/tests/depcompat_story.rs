//! The release coordination story end to end, over each binding: the release coordinator
//! discovers the Dependency Compatibility Agent by its card, gets a Message
//! for a quick question, a Task for the analysis that stops in
//! input-required, resumes it with the answer, follows the streamed report,
//! refines it in a new task (which asks which artifact is meant), and keeps
//! both versions of the report in the client ledger. Plus the other paths of
//! the agent: a refinement that names its artifact, missing or unreadable
//! inputs, a Cargo project.

#[macro_use]
mod common;

use agentwire_agents::coordinator::{ReleaseCoordinator, StoryEvent, payment_service_files};
use agentwire_agents::depcompat::{self, DepCompatAgent, JSON_REPORT, MARKDOWN_REPORT};
use agentwire_client::ledger::Ledger;
use agentwire_client::{Binding, Transport};
use agentwire_server::ServerHandle;
use agentwire_types::{
    ErrorKind, Message, Part, Role, SendMessageConfiguration, SendMessageRequest, StreamResponse,
    Task, TaskState, stream_response,
};
use common::*;
use serde_json::{Value, json};

over_all_bindings!(
    whole_story,
    refinement_naming_its_artifact_asks_nothing,
    missing_and_unreadable_inputs,
    cargo_project,
    streamed_answer_follows_to_the_end,
    accepted_output_modes,
);

async fn depcompat_server() -> ServerHandle {
    start(depcompat::card(), DepCompatAgent).await
}

fn file(name: &str, body: &str) -> Part {
    Part::file(body.as_bytes().to_vec(), name, "application/json")
}

fn npm_files() -> Vec<Part> {
    payment_service_files()
        .into_iter()
        .map(|f| Part::file(f.bytes, f.name, "application/json"))
        .collect()
}

fn report_of(task: &Task, name: &str) -> Value {
    let a = task
        .artifacts
        .iter()
        .find(|a| a.name == name)
        .unwrap_or_else(|| panic!("no {name} in task {}", task.id));
    match name {
        JSON_REPORT => a
            .parts
            .iter()
            .find_map(|p| p.as_data())
            .expect("a data part"),
        _ => agentwire_types::json::from_value(
            a.metadata
                .as_ref()
                .and_then(|m| m.fields.get(depcompat::REPORT_KEY))
                .expect("the report in the Markdown artifact's metadata"),
        ),
    }
}

async fn whole_story(b: Binding) {
    let server = depcompat_server().await;
    let coordinator = ReleaseCoordinator::new().with_bindings([b]).with_wait(WAIT);
    let mut events = Vec::new();
    let outcome = within(
        format!("[{b}] the story"),
        coordinator.run(
            &server.base_url(),
            "upgrade payment-service to Node 24",
            &payment_service_files(),
            &mut |e| events.push(e),
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("[{b}] the story failed: {e}"));
    assert_eq!(outcome.binding, Some(b));

    // Discovery by card.
    assert!(
        matches!(&events[1], StoryEvent::Card { card, .. } if card.name == "Dependency Compatibility Agent"),
        "[{b}] {:?}",
        events[1]
    );

    // A Message, no task.
    assert!(
        outcome.answer.task_id.is_empty(),
        "[{b}] {:?}",
        outcome.answer
    );
    assert_eq!(outcome.answer.role, Role::Agent as i32);
    assert!(
        outcome
            .answer
            .text()
            .starts_with("Yes: npm 11 writes package-lock.json with lockfileVersion 3"),
        "[{b}] {}",
        outcome.answer.text()
    );
    assert_eq!(outcome.answer.context_id, outcome.context_id);

    // The analysis: asked exactly what is missing, then completed.
    let q = outcome.question.text();
    assert!(
        q.contains("the target Node.js version")
            && q.contains("I have: package.json, package-lock.json"),
        "[{b}] {q}"
    );
    let missing: Vec<Value> = outcome
        .question
        .parts
        .iter()
        .filter_map(|p| p.as_data())
        .map(|d| d["missing"][0]["field"].clone())
        .collect();
    assert_eq!(missing, [json!("targetRuntime.node")], "[{b}]");
    let analysis = &outcome.analysis;
    assert_eq!(analysis.state(), TaskState::Completed, "[{b}]");
    assert_eq!(analysis.context_id, outcome.context_id, "[{b}]");
    // The files of the first message are in the history (the resumed run
    // found them there), followed by the question and the answer.
    let first = &analysis.history[0];
    let names: Vec<&str> = first.parts.iter().map(|p| p.filename.as_str()).collect();
    assert_eq!(names, ["", "package.json", "package-lock.json"], "[{b}]");
    assert!(
        analysis
            .history
            .iter()
            .any(|m| m.role == Role::User as i32
                && m.text().contains("Target environment: Node.js 24")),
        "[{b}] the answer is in the history"
    );
    // Two artifacts; the Markdown one arrived in 4 chunks merged into one.
    let names: Vec<&str> = analysis.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, [JSON_REPORT, MARKDOWN_REPORT], "[{b}]");
    let md = &analysis.artifacts[1];
    assert_eq!(md.parts.len(), 4, "[{b}]");
    assert!(
        md.text_content()
            .starts_with("# Dependency compatibility report: payment-service@3.4.1"),
        "[{b}]"
    );
    let report = report_of(analysis, JSON_REPORT);
    assert_eq!(report["summary"]["verdict"], "blocked", "[{b}]");
    assert_eq!(report["summary"]["high"], 2, "[{b}]");
    assert_eq!(report["target"]["node"], "24", "[{b}]");
    assert_eq!(report["fixOrder"], "found", "[{b}]");
    // 1 JSON chunk + 4 Markdown chunks, then 4 more for the refinement.
    assert_eq!(outcome.chunks, 9, "[{b}]");
    let appended: Vec<(bool, bool)> = events
        .iter()
        .filter_map(|e| match e {
            StoryEvent::Event { event, .. } => match &event.payload {
                Some(stream_response::Payload::ArtifactUpdate(a))
                    if a.artifact
                        .as_ref()
                        .is_some_and(|a| a.name == MARKDOWN_REPORT || a.name.is_empty()) =>
                {
                    Some((a.append, a.last_chunk))
                }
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(
        &appended[..4],
        [(false, false), (true, false), (true, false), (true, true)],
        "[{b}]"
    );

    // The refinement: a new task, same context, which asked which artifact.
    let refinement = &outcome.refinement;
    assert_ne!(refinement.id, analysis.id, "[{b}]");
    assert_eq!(refinement.context_id, outcome.context_id, "[{b}]");
    assert_eq!(refinement.state(), TaskState::Completed, "[{b}]");
    assert_eq!(
        refinement.history[0].reference_task_ids,
        std::slice::from_ref(&analysis.id),
        "[{b}]"
    );
    let asked = outcome
        .refinement_question
        .as_ref()
        .map(Message::text)
        .unwrap_or_default();
    assert!(
        asked.starts_with("Which artifact should I refine?") && asked.contains(JSON_REPORT),
        "[{b}] {asked}"
    );
    assert_eq!(refinement.artifacts.len(), 1, "[{b}]");
    let v2 = &refinement.artifacts[0];
    assert_eq!(v2.name, MARKDOWN_REPORT, "[{b}]");
    assert_ne!(v2.artifact_id, md.artifact_id, "[{b}]");
    assert!(
        v2.text_content()
            .contains("## Fixes (sorted by risk, highest first)"),
        "[{b}]"
    );
    assert_eq!(
        report_of(refinement, MARKDOWN_REPORT)["fixOrder"],
        "risk",
        "[{b}]"
    );

    // The ledger: two chained versions, the second accepted.
    let versions = &outcome.markdown_versions;
    assert_eq!(versions.len(), 2, "[{b}]");
    assert_eq!(versions[0].artifact_id, md.artifact_id, "[{b}]");
    assert_eq!(versions[0].task_id, analysis.id, "[{b}]");
    assert_eq!(versions[1].artifact_id, v2.artifact_id, "[{b}]");
    assert_eq!(versions[1].task_id, refinement.id, "[{b}]");
    assert_eq!(
        versions[1].previous_artifact_id.as_deref(),
        Some(md.artifact_id.as_str()),
        "[{b}]"
    );
    assert!(
        versions[1].accepted_by_user && !versions[0].accepted_by_user,
        "[{b}]"
    );
    assert_eq!(outcome.final_markdown, v2.text_content(), "[{b}]");
    let ctx = outcome
        .ledger
        .context(&outcome.context_id)
        .await
        .expect("ledger")
        .expect("the context");
    assert_eq!(ctx.tasks.len(), 2, "[{b}]");
    assert!(
        outcome.ledger.pending().await.expect("ledger").is_empty(),
        "[{b}]"
    );

    // A completed task takes no more messages: refinement is the way.
    let c = client(&server, b).await;
    let late = Message::user_text("one more thing")
        .with_task_id(&analysis.id)
        .with_context_id(&analysis.context_id);
    expect_kind(
        within(
            format!("[{b}] send to a completed task"),
            Transport::send_message(&c, request(late), &NO_OPTS),
        )
        .await,
        ErrorKind::UnsupportedOperation,
        format!("[{b}] a message to a completed task"),
    );
}

async fn refinement_naming_its_artifact_asks_nothing(b: Binding) {
    let server = depcompat_server().await;
    let c = client(&server, b).await;
    let ledger = Ledger::in_memory();
    // Files and target in one message: no question, straight to the report.
    let mut m = Message::new(
        Role::User,
        vec![Part::text(
            "Check payment-service for Node.js 24 and express@5.1.0",
        )],
    );
    m.parts.extend(npm_files());
    let answer = within(format!("[{b}] analysis"), ledger.send(&c, m))
        .await
        .unwrap_or_else(|e| panic!("[{b}] analysis: {e}"));
    let task = answer.task().expect("a task").clone();
    assert_eq!(task.state(), TaskState::Completed, "[{b}]");
    let report = report_of(&task, JSON_REPORT);
    assert_eq!(report["target"]["packages"]["express"], "5.1.0", "[{b}]");
    assert!(
        report["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .any(|f| f["kind"] == "upgrade-peer" && f["package"] == "@acme/auth-middleware"),
        "[{b}] {report}"
    );
    let json_v1 = task
        .artifacts
        .iter()
        .find(|a| a.name == JSON_REPORT)
        .expect("json")
        .artifact_id
        .clone();

    // The ledger's refinement names the artifact in the part metadata.
    let refined = within(
        format!("[{b}] refine"),
        ledger.refine(
            &c,
            &json_v1,
            Message::user_text("Only high risk, sorted by risk"),
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("[{b}] refine: {e}"));
    let t2 = refined.task().expect("a task").clone();
    assert_eq!(t2.state(), TaskState::Completed, "[{b}] asked nothing");
    assert_ne!(t2.id, task.id, "[{b}]");
    assert_eq!(t2.artifacts.len(), 1, "[{b}]");
    assert_eq!(t2.artifacts[0].name, JSON_REPORT, "[{b}]");
    assert_ne!(t2.artifacts[0].artifact_id, json_v1, "[{b}]");
    let r2 = report_of(&t2, JSON_REPORT);
    assert_eq!(r2["minRisk"], "high", "[{b}]");
    assert_eq!(r2["fixOrder"], "risk", "[{b}]");
    assert!(
        r2["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .all(|f| f["risk"] == "high"),
        "[{b}]"
    );
    let chain = ledger
        .chain(&t2.artifacts[0].artifact_id)
        .await
        .expect("chain");
    let ids: Vec<&str> = chain.iter().map(|v| v.artifact_id.as_str()).collect();
    assert_eq!(
        ids,
        [json_v1.as_str(), t2.artifacts[0].artifact_id.as_str()],
        "[{b}]"
    );

    // A refinement whose instruction the agent cannot apply: it asks.
    let vague = within(
        format!("[{b}] vague refinement"),
        ledger.refine(&c, &json_v1, Message::user_text("make it better")),
    )
    .await
    .unwrap_or_else(|e| panic!("[{b}] refine: {e}"));
    let t3 = vague.task().expect("a task");
    assert_eq!(t3.state(), TaskState::InputRequired, "[{b}]");
    let asked = t3
        .status
        .as_ref()
        .and_then(|s| s.message.as_deref())
        .map(Message::text)
        .unwrap_or_default();
    assert!(asked.contains("sort the fixes by risk"), "[{b}] {asked}");
    // The answer resumes it.
    let done = within(
        format!("[{b}] answer"),
        ledger.continue_task(&c, &t3.id, Message::user_text("sort them by risk")),
    )
    .await
    .unwrap_or_else(|e| panic!("[{b}] answer: {e}"));
    let t3 = done.task().expect("a task");
    assert_eq!(t3.state(), TaskState::Completed, "[{b}]");
    assert_eq!(report_of(t3, JSON_REPORT)["fixOrder"], "risk", "[{b}]");
}

fn status_text(task: &Task) -> String {
    task.status
        .as_ref()
        .and_then(|s| s.message.as_deref())
        .map(Message::text)
        .unwrap_or_default()
}

async fn missing_and_unreadable_inputs(b: Binding) {
    let server = depcompat_server().await;
    let c = client(&server, b).await;

    // A capability question over a stream: one Message, no task.
    let stream = within(
        format!("[{b}] stream"),
        Transport::send_streaming_message(
            &c,
            request(Message::user_text("Do you support pnpm lockfiles?")),
            &NO_OPTS,
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("[{b}] stream: {e}"));
    let events: Vec<StreamResponse> = collect(b, "question", stream).await;
    assert_eq!(events.len(), 1, "[{b}]");
    match &events[0].payload {
        Some(stream_response::Payload::Message(m)) => {
            assert!(m.text().starts_with("No: pnpm"), "[{b}] {}", m.text())
        }
        other => panic!("[{b}] expected a message, got {other:?}"),
    }

    // An analysis request without files: a task asking for them.
    let t = send_task(
        &c,
        b,
        Message::user_text("Please check our dependencies for the Node 24 upgrade"),
    )
    .await;
    assert_eq!(t.state(), TaskState::InputRequired, "[{b}]");
    let asked = status_text(&t);
    assert!(
        asked.contains("package.json and package-lock.json (npm), or Cargo.toml and Cargo.lock"),
        "[{b}] {asked}"
    );
    // The files come in the answer; the target came in the first message.
    let m = Message::new(Role::User, npm_files())
        .with_task_id(&t.id)
        .with_context_id(&t.context_id);
    let res = send(&c, b, request(m)).await;
    let t = res.task().expect("a task");
    assert_eq!(t.state(), TaskState::Completed, "[{b}] {}", status_text(t));
    assert_eq!(report_of(t, JSON_REPORT)["target"]["node"], "24", "[{b}]");

    // A lockfile v1: asked for one the agent can read, saying how.
    let m = Message::new(
        Role::User,
        vec![
            Part::text("Node 22"),
            file(
                "package-lock.json",
                r#"{"name":"x","lockfileVersion":1,"dependencies":{}}"#,
            ),
        ],
    );
    let t = send_task(&c, b, m).await;
    assert_eq!(t.state(), TaskState::InputRequired, "[{b}]");
    let asked = status_text(&t);
    assert!(
        asked.contains("npm install --package-lock-only"),
        "[{b}] {asked}"
    );

    // Not JSON at all, and a bad runtime: both said at once.
    let m = Message::new(
        Role::User,
        vec![
            Part::text("node banana"),
            file("package-lock.json", "{ not json"),
        ],
    );
    let t = send(&c, b, request(m)).await;
    let t = t.task().expect("a task");
    assert_eq!(t.state(), TaskState::InputRequired, "[{b}]");
    let asked = status_text(t);
    assert!(asked.contains("is not valid JSON"), "[{b}] {asked}");
    assert!(
        asked.contains("the target Node.js version"),
        "[{b}] {asked}"
    );
}

async fn cargo_project(b: Binding) {
    let server = depcompat_server().await;
    let c = client(&server, b).await;
    let toml =
        |name: &str, body: &str| Part::file(body.as_bytes().to_vec(), name, "application/toml");
    let m = Message::new(
        Role::User,
        vec![
            Part::text("Can settlement-engine build with Rust 1.80?"),
            toml(
                "Cargo.toml",
                include_str!("../fixtures/cargo/settlement-engine/Cargo.toml"),
            ),
            toml(
                "crates/settlement-core/Cargo.toml",
                include_str!(
                    "../fixtures/cargo/settlement-engine/crates/settlement-core/Cargo.toml"
                ),
            ),
            toml(
                "Cargo.lock",
                include_str!("../fixtures/cargo/settlement-engine/Cargo.lock"),
            ),
        ],
    );
    let t = send_task(&c, b, m).await;
    assert_eq!(t.state(), TaskState::Completed, "[{b}] {}", status_text(&t));
    let r = report_of(&t, JSON_REPORT);
    assert_eq!(r["projects"][0]["ecosystem"], "cargo", "[{b}]");
    assert_eq!(r["projects"][0]["name"], "settlement-engine", "[{b}]");
    assert_eq!(r["target"]["rust"], "1.80", "[{b}]");
    assert_eq!(r["summary"]["high"], 2, "[{b}]");
    // Without vendor/anyhow/Cargo.toml, 14 registry crates are unchecked.
    assert_eq!(r["summary"]["unchecked"], 14, "[{b}]");
    let md = t
        .artifacts
        .iter()
        .find(|a| a.name == MARKDOWN_REPORT)
        .expect("markdown")
        .text_content();
    assert!(md.contains("## Not checked"), "[{b}]");
    assert!(
        md.contains("`anyhow@1.0.82`: Cargo.lock does not record rust-version"),
        "[{b}] {md}"
    );
}

/// A streamed answer to an input-required task starts with the task as it
/// was, then carries the events of the new turn to the end (the snapshot
/// does not close the stream).
async fn streamed_answer_follows_to_the_end(b: Binding) {
    let server = conformance_server().await;
    let c = client(&server, b).await;
    let t = send_task(&c, b, msg("tck-input-required")).await;
    assert_eq!(t.state(), TaskState::InputRequired, "[{b}]");
    let answer = msg("tck-complete-task")
        .with_task_id(&t.id)
        .with_context_id(&t.context_id);
    let stream = within(
        format!("[{b}] stream the answer"),
        Transport::send_streaming_message(&c, request(answer), &NO_OPTS),
    )
    .await
    .unwrap_or_else(|e| panic!("[{b}] stream: {e}"));
    let events = collect(b, "the answer", stream).await;
    let states: Vec<Option<TaskState>> = events.iter().map(StreamResponse::state).collect();
    assert_eq!(
        states.first().copied().flatten(),
        Some(TaskState::InputRequired),
        "[{b}] starts with the task as it was: {events:?}"
    );
    assert_eq!(
        states.last().copied().flatten(),
        Some(TaskState::Completed),
        "[{b}] runs to the end: {events:?}"
    );
}

/// The reports are produced in the output modes the client accepts; none
/// of them accepted is a ContentTypeNotSupported error, before any task.
async fn accepted_output_modes(b: Binding) {
    let server = depcompat_server().await;
    let c = client(&server, b).await;
    let ask = |modes: &[&str]| {
        let mut m = Message::new(Role::User, vec![Part::text("Check for Node.js 24")]);
        m.parts.extend(npm_files());
        SendMessageRequest {
            message: Some(m),
            configuration: Some(SendMessageConfiguration {
                accepted_output_modes: modes.iter().map(|s| (*s).to_owned()).collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    };
    let res = send(&c, b, ask(&["text/markdown"])).await;
    let t = res.task().expect("a task");
    assert_eq!(t.state(), TaskState::Completed, "[{b}]");
    let names: Vec<&str> = t.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, [MARKDOWN_REPORT], "[{b}]");
    let res = send(&c, b, ask(&["application/*"])).await;
    let names: Vec<String> = res
        .task()
        .expect("a task")
        .artifacts
        .iter()
        .map(|a| a.name.clone())
        .collect();
    assert_eq!(names, [JSON_REPORT], "[{b}]");
    let refused = within(
        format!("[{b}] image/png only"),
        Transport::send_message(&c, ask(&["image/png"]), &NO_OPTS),
    )
    .await;
    let e = expect_kind(
        refused,
        ErrorKind::ContentTypeNotSupported,
        format!("[{b}] image/png only"),
    );
    assert!(
        e.message.contains("acceptedOutputModes"),
        "[{b}] {}",
        e.message
    );
}
