//! The agents of the end-to-end tests: small scripted executors written for
//! the tests, so that the server crate tests its runtime without the
//! bundled agents of `agentwire-agents`. Every protocol rule (errors,
//! capability checks, contextId/taskId semantics) is the runtime's; these
//! agents only produce the events a test needs.

use std::time::Duration;

use agentwire_server::{A2aResult, AgentExecutor, RequestContext, TaskUpdater};
use agentwire_types::{AgentCard, AgentSkill, Artifact, Part, new_id};

// ----- the scripted agent: behaviour chosen by the messageId prefix ------------

/// An agent whose behaviour is chosen by the prefix of the incoming
/// `messageId` (the prefixes of the A2A conformance kit's scenarios, so the
/// tests read like them): complete, artifacts of each kind, a direct message,
/// input-required, reject, streamed artifacts and chunks, and long work that
/// stops when canceled. Any other messageId completes the task.
///
/// A repeated messageId is fine: the runtime does not treat it as a
/// duplicate.
#[derive(Debug, Clone)]
pub struct Scripted {
    /// How long the long work (`test-resubscribe-message-id`) lasts when it
    /// is not canceled.
    pub long_work: Duration,
}

impl Default for Scripted {
    fn default() -> Self {
        Self {
            long_work: Duration::from_secs(4),
        }
    }
}

/// What [`Scripted`] does for a messageId prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Script {
    CompleteTask,
    ArtifactText,
    ArtifactFile,
    ArtifactFileUrl,
    ArtifactData,
    MessageResponse,
    InputRequired,
    Reject,
    /// working, a text artifact, completed.
    StreamText(&'static str),
    StreamCompletedOnly,
    StreamFile,
    StreamChunked,
    LongWork,
}

/// Prefixes in matching order: a prefix that extends a shorter one comes
/// first (`tck-artifact-file-url` before `tck-artifact-file`).
const SCRIPTS: &[(&str, Script)] = &[
    ("tck-complete-task", Script::CompleteTask),
    ("tck-artifact-text", Script::ArtifactText),
    ("tck-artifact-file-url", Script::ArtifactFileUrl),
    ("tck-artifact-file", Script::ArtifactFile),
    ("tck-artifact-data", Script::ArtifactData),
    ("tck-message-response", Script::MessageResponse),
    ("tck-input-required", Script::InputRequired),
    ("tck-reject-task", Script::Reject),
    (
        "tck-stream-001",
        Script::StreamText("Stream hello from TCK"),
    ),
    ("tck-stream-002", Script::StreamCompletedOnly),
    (
        "tck-stream-003",
        Script::StreamText("Stream task lifecycle"),
    ),
    (
        "tck-stream-ordering-001",
        Script::StreamText("Ordered output"),
    ),
    (
        "tck-stream-artifact-text",
        Script::StreamText("Streamed text content"),
    ),
    ("tck-stream-artifact-file", Script::StreamFile),
    ("tck-stream-artifact-chunked", Script::StreamChunked),
    ("test-resubscribe-message-id", Script::LongWork),
];

fn script(message_id: &str) -> Script {
    SCRIPTS
        .iter()
        .find(|(prefix, _)| message_id.starts_with(prefix))
        .map_or(Script::CompleteTask, |(_, s)| *s)
}

fn output_file() -> Part {
    Part::file(&b"Generated file content"[..], "output.txt", "text/plain")
}

impl AgentExecutor for Scripted {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        match script(&ctx.message.message_id) {
            Script::CompleteTask => task.complete_with("Hello from TCK").await,
            Script::ArtifactText => {
                task.add_artifact(Artifact::text("result", "Generated text content"))
                    .await?;
                task.complete().await
            }
            Script::ArtifactFile => {
                task.add_artifact(Artifact::new("output.txt", vec![output_file()]))
                    .await?;
                task.complete().await
            }
            Script::ArtifactFileUrl => {
                let part = Part::url("https://example.com/output.txt")
                    .with_filename("output.txt")
                    .with_media_type("text/plain");
                task.add_artifact(Artifact::new("output.txt", vec![part]))
                    .await?;
                task.complete().await
            }
            Script::ArtifactData => {
                let data = serde_json::json!({"key": "value", "count": 42});
                task.add_artifact(Artifact::new("data", vec![Part::data(data)]))
                    .await?;
                task.complete().await
            }
            Script::MessageResponse => task.reply_text("Direct message response").await,
            Script::InputRequired => task.require_input("Please provide more input").await,
            Script::Reject => task.reject("rejected").await,
            Script::StreamText(text) => {
                task.start_work().await?;
                task.add_artifact(Artifact::text("result", text)).await?;
                task.complete().await
            }
            Script::StreamCompletedOnly => task.complete().await,
            Script::StreamFile => {
                task.start_work().await?;
                task.add_artifact(Artifact::new("output.txt", vec![output_file()]))
                    .await?;
                task.complete().await
            }
            Script::StreamChunked => {
                task.start_work().await?;
                let id = new_id();
                task.artifact_chunk(
                    Artifact::text("result", "chunk-1 ").with_id(&id),
                    false,
                    false,
                )
                .await?;
                task.artifact_chunk(Artifact::text("result", "chunk-2").with_id(&id), true, true)
                    .await?;
                task.complete().await
            }
            Script::LongWork => {
                task.start_work().await?;
                tokio::select! {
                    () = tokio::time::sleep(self.long_work) => task.complete().await,
                    // Canceled meanwhile: the runtime records the cancellation.
                    () = ctx.canceled() => Ok(()),
                }
            }
        }
    }
}

/// The card of [`Scripted`]: streaming, text and JSON in and out, no push
/// notifications.
pub fn scripted_card() -> AgentCard {
    AgentCard::new(
        "Scripted test agent",
        "Behaviour selected by the messageId prefix (tck-complete-task, tck-stream-001, ...)",
        "1.0.0",
    )
    .with_streaming(true)
    .with_input_modes(["text/plain", "application/json"])
    .with_output_modes(["text/plain", "application/json"])
    .with_skill(
        AgentSkill::new(
            "scripted",
            "Scripted scenarios",
            "Completes, rejects, streams or asks for input depending on the messageId prefix",
            ["test"],
        )
        .with_example("tck-complete-task"),
    )
}

// ----- the echo agent: the text back, word chunks when streaming ----------------

/// An agent that repeats the text of the message as one `echo` artifact;
/// when the client streams, word by word as chunks of that artifact
/// (`append` after the first, `lastChunk` on the last).
#[derive(Debug, Clone, Copy, Default)]
pub struct Echo;

impl AgentExecutor for Echo {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        let text = ctx.text();
        task.start_work().await?;
        let words: Vec<&str> = text.split_inclusive(' ').collect();
        if ctx.streaming && words.len() > 1 {
            let id = new_id();
            for (i, word) in words.iter().enumerate() {
                let chunk = Artifact::text("echo", *word).with_id(&id);
                task.artifact_chunk(chunk, i > 0, i + 1 == words.len())
                    .await?;
            }
        } else {
            task.add_artifact(Artifact::text("echo", text)).await?;
        }
        task.complete().await
    }
}

/// The card of [`Echo`]: streaming, text and JSON in and out, no push
/// notifications.
pub fn echo_card() -> AgentCard {
    AgentCard::new(
        "Echo test agent",
        "Repeats the text it is sent as an artifact",
        "1.0.0",
    )
    .with_streaming(true)
    .with_input_modes(["text/plain", "application/json"])
    .with_output_modes(["text/plain", "application/json"])
    .with_skill(
        AgentSkill::new(
            "echo",
            "Echo",
            "Returns the text of the message as an artifact (word by word when streaming)",
            ["test"],
        )
        .with_example("hello world"),
    )
}
