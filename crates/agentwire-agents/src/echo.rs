//! The echo agent: the smallest useful agent.

use agentwire_server::{A2aResult, AgentExecutor, RequestContext, TaskUpdater};
use agentwire_types::{AgentCard, AgentSkill, Artifact, new_id};

/// Completes a task whose one artifact repeats the text it was sent. When
/// the client streams, the artifact arrives word by word as chunks
/// (`append`, `lastChunk`).
#[derive(Debug, Clone, Copy, Default)]
pub struct EchoAgent;

impl AgentExecutor for EchoAgent {
    // Not an `async fn`: the future keeps only what the agent uses (the
    // text, and whether to stream), not the request context (an async fn
    // keeps its arguments twice).
    fn execute(
        &self,
        ctx: RequestContext,
        task: TaskUpdater,
    ) -> impl Future<Output = A2aResult<()>> + Send {
        let (text, streaming) = (ctx.text(), ctx.streaming);
        async move {
            task.start_work().await?;
            let words: Vec<&str> = text.split_inclusive(' ').collect();
            if streaming && words.len() > 1 {
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
}

/// The echo agent's card.
pub fn card() -> AgentCard {
    AgentCard::new(
        "Echo Agent",
        "Repeats the text it is sent as an artifact.",
        env!("CARGO_PKG_VERSION"),
    )
    .with_streaming(true)
    .with_skill(
        AgentSkill::new(
            "echo",
            "Echo",
            "Returns the text of the message as an artifact",
            ["echo", "test"],
        )
        .with_example("hello world"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_server::{CallContext, RequestHandler};
    use agentwire_types::{Message, SendMessageRequest, TaskState};
    use futures::StreamExt;

    fn send(text: &str) -> SendMessageRequest {
        SendMessageRequest {
            message: Some(Message::user_text(text)),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn echoes_as_one_artifact() {
        let h = RequestHandler::builder(card(), EchoAgent).build();
        let r = h
            .send_message(&CallContext::v1(), send("hello there"))
            .await
            .unwrap();
        let task = r.task().unwrap();
        assert_eq!(task.state(), TaskState::Completed);
        assert_eq!(task.artifacts.len(), 1);
        assert_eq!(task.artifacts[0].text_content(), "hello there");
    }

    #[tokio::test]
    async fn streams_word_chunks_that_merge() {
        let h = RequestHandler::builder(card(), EchoAgent).build();
        let words: Vec<String> = (0..100).map(|i| format!("w{i}")).collect();
        let text = words.join(" ");
        let events: Vec<_> = h
            .send_streaming_message(&CallContext::v1(), send(&text))
            .await
            .unwrap()
            .collect()
            .await;
        // Task, working, 100 chunks, completed.
        assert_eq!(events.len(), 103);
        let id = events[0].as_ref().unwrap().task_id().unwrap().to_owned();
        let task = h
            .get_task(
                &CallContext::v1(),
                agentwire_types::GetTaskRequest {
                    id,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(task.artifacts.len(), 1);
        assert_eq!(task.artifacts[0].text_content(), text);
    }
}
