//! The conformance agent (system under test of the A2A TCK and of ACTS).
//!
//! Two contracts choose its behaviour. The A2A TCK's: the prefix of the
//! incoming `messageId`, as its scenarios (`core_operations.feature`,
//! `streaming.feature`) describe. ACTS's (the A2A Conformance Test
//! Specification, section 11, written down in `acts/sut-behaviors.yaml` at
//! the repository root): the first word of the first text part of the task's
//! first user message (`tck-complete-task hello`). The word wins when both
//! apply. Every protocol rule (errors, capability checks, contextId/taskId
//! semantics, media types) is the runtime's, not the agent's. One prefix is not the
//! TCK's: `auth-required` puts the task in the auth-required state (the
//! agent needs the user to authorize something), to try clients on that
//! turn; the next message in the task completes it. Conformance runs reuse one
//! messageId for many requests, which is fine: the runtime does not treat a
//! repeated messageId as a duplicate.

use std::time::Duration;

use agentwire_server::{A2aResult, AgentExecutor, RequestContext, TaskUpdater};
use agentwire_types::{AgentCard, AgentSkill, Artifact, Message, Part, Role, Task, new_id};

/// The TCK's system under test.
#[derive(Debug, Clone)]
pub struct ConformanceAgent {
    /// The TCK's streaming timeout; the long-running resubscription
    /// scenario waits twice this long before completing.
    pub streaming_timeout: Duration,
}

impl Default for ConformanceAgent {
    fn default() -> Self {
        Self {
            streaming_timeout: Duration::from_secs(2),
        }
    }
}

/// What the agent does for a messageId prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    CompleteTask,
    ArtifactText,
    ArtifactFile,
    ArtifactFileUrl,
    ArtifactData,
    MessageResponse,
    InputRequired,
    AuthRequired,
    Reject,
    /// working, a text artifact, completed.
    StreamText(&'static str),
    StreamCompletedOnly,
    StreamFile,
    StreamChunked,
    LongRunning,
    /// ACTS `tck-task-failure`: the task fails, with a message.
    Failure,
    /// ACTS `tck-multi-turn`: input-required until the user sends `done`.
    MultiTurn,
    /// ACTS `tck-long-running`: working, an artifact, completed after a
    /// while (twice the streaming timeout); cancelable meanwhile.
    LongRunningWithArtifact,
    /// ACTS `tck-cancel`: working until canceled (bounded by
    /// [`CANCEL_WAIT_BOUND`]).
    WorkUntilCanceled,
}

/// ACTS's behaviours (section 11.2, and `tck-auth-required`), by the first
/// word of the first text part; the same words as acts/sut-behaviors.yaml.
const WORDS: &[(&str, Scenario)] = &[
    ("tck-complete-task", Scenario::CompleteTask),
    ("tck-message-response", Scenario::MessageResponse),
    ("tck-input-required", Scenario::InputRequired),
    ("tck-reject-task", Scenario::Reject),
    ("tck-task-failure", Scenario::Failure),
    ("tck-multi-turn", Scenario::MultiTurn),
    ("tck-long-running", Scenario::LongRunningWithArtifact),
    ("tck-cancel", Scenario::WorkUntilCanceled),
    ("tck-auth-required", Scenario::AuthRequired),
    ("tck-stream-basic", Scenario::StreamText(STREAMED_CONTENT)),
    ("tck-stream-chunked", Scenario::StreamChunked),
    ("tck-artifact-text", Scenario::ArtifactText),
    ("tck-artifact-file", Scenario::ArtifactFile),
    ("tck-artifact-file-url", Scenario::ArtifactFileUrl),
    ("tck-artifact-data", Scenario::ArtifactData),
];

/// The text artifact of `tck-stream-basic`.
const STREAMED_CONTENT: &str = "Streamed content";

/// The word that ends a `tck-multi-turn` task.
const DONE: &str = "done";

/// How long a `tck-cancel` task waits for its cancellation before it
/// fails: no task is held forever.
pub const CANCEL_WAIT_BOUND: Duration = Duration::from_secs(300);

/// Prefixes in matching order: longer prefixes that extend shorter ones
/// come first (`tck-artifact-file-url` before `tck-artifact-file`).
const PREFIXES: &[(&str, Scenario)] = &[
    ("tck-complete-task", Scenario::CompleteTask),
    ("tck-artifact-text", Scenario::ArtifactText),
    ("tck-artifact-file-url", Scenario::ArtifactFileUrl),
    ("tck-artifact-file", Scenario::ArtifactFile),
    ("tck-artifact-data", Scenario::ArtifactData),
    ("tck-message-response", Scenario::MessageResponse),
    ("tck-input-required", Scenario::InputRequired),
    ("auth-required", Scenario::AuthRequired),
    ("tck-reject-task", Scenario::Reject),
    (
        "tck-stream-001",
        Scenario::StreamText("Stream hello from TCK"),
    ),
    ("tck-stream-002", Scenario::StreamCompletedOnly),
    (
        "tck-stream-003",
        Scenario::StreamText("Stream task lifecycle"),
    ),
    (
        "tck-stream-ordering-001",
        Scenario::StreamText("Ordered output"),
    ),
    (
        "tck-stream-artifact-text",
        Scenario::StreamText("Streamed text content"),
    ),
    ("tck-stream-artifact-file", Scenario::StreamFile),
    ("tck-stream-artifact-chunked", Scenario::StreamChunked),
    ("test-resubscribe-message-id", Scenario::LongRunning),
];

fn scenario(message_id: &str) -> Scenario {
    PREFIXES
        .iter()
        .find(|(prefix, _)| message_id.starts_with(prefix))
        .map_or(Scenario::CompleteTask, |(_, s)| *s)
}

/// The first word of a message's first text part.
fn first_word(message: &Message) -> Option<&str> {
    message
        .parts
        .iter()
        .find_map(Part::as_text)
        .and_then(|t| t.split_whitespace().next())
}

/// ACTS's behaviour for a message, if its first word names one.
fn acts_scenario(message: &Message) -> Option<Scenario> {
    let word = first_word(message)?;
    WORDS.iter().find(|(w, _)| *w == word).map(|(_, s)| *s)
}

/// The behaviour for a message: ACTS's word, else the TCK's messageId prefix.
fn scenario_of(message: &Message) -> Scenario {
    acts_scenario(message).unwrap_or_else(|| scenario(&message.message_id))
}

/// The task's first user message (its history's first entry from the user).
fn first_user_message(task: &Task) -> Option<&Message> {
    task.history.iter().find(|m| m.role == Role::User as i32)
}

fn output_file() -> Part {
    Part::file(&b"Generated file content"[..], "output.txt", "text/plain")
}

impl AgentExecutor for ConformanceAgent {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        // A message that continues a task: ACTS's multi-turn behaviour is
        // the task's first message's; anything else acts on this message.
        let first = ctx.task.as_deref().and_then(first_user_message);
        if first.and_then(acts_scenario) == Some(Scenario::MultiTurn) {
            return if first_word(&ctx.message) == Some(DONE) {
                task.complete_with("Multi-turn conversation done").await
            } else {
                task.require_input("Send more, or \"done\" to finish").await
            };
        }
        match scenario_of(&ctx.message) {
            Scenario::CompleteTask => task.complete_with("Hello from TCK").await,
            Scenario::ArtifactText => {
                task.add_artifact(Artifact::text("result", "Generated text content"))
                    .await?;
                task.complete().await
            }
            Scenario::ArtifactFile => {
                task.add_artifact(Artifact::new("output.txt", vec![output_file()]))
                    .await?;
                task.complete().await
            }
            Scenario::ArtifactFileUrl => {
                let part = Part::url("https://example.com/output.txt")
                    .with_filename("output.txt")
                    .with_media_type("text/plain");
                task.add_artifact(Artifact::new("output.txt", vec![part]))
                    .await?;
                task.complete().await
            }
            Scenario::ArtifactData => {
                let data = serde_json::json!({"key": "value", "count": 42});
                task.add_artifact(Artifact::new("data", vec![Part::data(data)]))
                    .await?;
                task.complete().await
            }
            Scenario::MessageResponse => task.reply_text("Direct message response").await,
            Scenario::InputRequired => task.require_input("Please provide more input").await,
            Scenario::AuthRequired => {
                task.require_auth(
                    "Please authorize access to the example account, then reply in this task",
                )
                .await
            }
            Scenario::Reject => task.reject("rejected").await,
            Scenario::StreamText(text) => {
                task.start_work().await?;
                task.add_artifact(Artifact::text("result", text)).await?;
                task.complete().await
            }
            Scenario::StreamCompletedOnly => task.complete().await,
            Scenario::StreamFile => {
                task.start_work().await?;
                task.add_artifact(Artifact::new("output.txt", vec![output_file()]))
                    .await?;
                task.complete().await
            }
            Scenario::StreamChunked => {
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
            Scenario::LongRunning => {
                task.start_work().await?;
                tokio::select! {
                    () = tokio::time::sleep(self.streaming_timeout * 2) => task.complete().await,
                    // Canceled meanwhile: the runtime records the cancellation.
                    () = ctx.canceled() => Ok(()),
                }
            }
            Scenario::Failure => task.fail("The task failed, as tck-task-failure asks").await,
            Scenario::MultiTurn => task.require_input("Send more, or \"done\" to finish").await,
            Scenario::LongRunningWithArtifact => {
                task.start_work().await?;
                task.add_artifact(Artifact::text("progress", "Long-running work started"))
                    .await?;
                tokio::select! {
                    () = tokio::time::sleep(self.streaming_timeout * 2) => {
                        task.complete_with("Long-running work done").await
                    }
                    () = ctx.canceled() => Ok(()),
                }
            }
            Scenario::WorkUntilCanceled => {
                task.start_work().await?;
                tokio::select! {
                    () = tokio::time::sleep(CANCEL_WAIT_BOUND) => {
                        task.fail("not canceled in time").await
                    }
                    () = ctx.canceled() => Ok(()),
                }
            }
        }
    }
}

/// The conformance agent's card.
pub fn card() -> AgentCard {
    AgentCard::new(
        "A2A Rust Conformance Agent",
        "System under test for the A2A conformance kits: behaviour is selected by the first word of the message (ACTS: tck-complete-task, tck-multi-turn, ...) or by messageId prefixes (the A2A TCK).",
        env!("CARGO_PKG_VERSION"),
    )
    .with_streaming(true)
    .with_input_modes(["text/plain", "application/json"])
    .with_output_modes(["text/plain", "application/json"])
    .with_skill(
        AgentSkill::new(
            "tck",
            "Conformance scenarios",
            "Completes, fails, rejects, streams, works until canceled, asks for input or for authorization depending on the message's first word (tck-complete-task, tck-multi-turn, tck-cancel, tck-stream-basic, ...) or the messageId prefix (tck-complete-task, tck-stream-001, tck-input-required, auth-required, ...)",
            ["conformance", "tck", "test"],
        )
        .with_example("tck-complete-task"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_pick_the_longest_match() {
        assert_eq!(
            scenario("tck-artifact-file-url-1"),
            Scenario::ArtifactFileUrl
        );
        assert_eq!(scenario("tck-artifact-file-9"), Scenario::ArtifactFile);
        assert_eq!(
            scenario("tck-stream-artifact-chunked"),
            Scenario::StreamChunked
        );
        assert_eq!(scenario("auth-required-1"), Scenario::AuthRequired);
        assert_eq!(scenario("anything-else"), Scenario::CompleteTask);
    }
}
