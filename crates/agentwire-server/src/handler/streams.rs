//! The streaming calls: `SendStreamingMessage` and `SubscribeToTask`, and
//! how a subscription to a task becomes the event stream a binding sends.

use std::sync::Arc;

use agentwire_types::{
    A2aError, A2aResult, SendMessageRequest, StreamResponse, SubscribeToTaskRequest, TaskState,
    stream_response,
};

use super::*;
use crate::manager::Subscription;

impl RequestHandler {
    /// `SendStreamingMessage`: the agent's message, or the task followed by
    /// its events until it is terminal or interrupted.
    pub async fn send_streaming_message(
        &self,
        ctx: &CallContext,
        req: SendMessageRequest,
    ) -> A2aResult<EventStream> {
        let _flight = self.begin()?;
        let history = match &req.configuration {
            Some(c) => history_length(c.history_length, "configuration.historyLength")?,
            None => None,
        };
        if let Some(task) = self.replay(ctx, &req).await? {
            // A duplicate: follow the task it started, or just show it when
            // it has finished.
            if task.state().is_terminal() {
                let once = futures::stream::once(async move { Ok(StreamResponse::from(task)) });
                return Ok(Box::pin(once));
            }
            let stored = self
                .visible_task(&self.admit(ctx, &req.tenant)?, &task.id, None)
                .await?;
            let (snapshot, sub) = self.inner.manager.subscribe(&stored, history).await?;
            return Ok(follow(
                sub,
                Some(Arc::new(StreamResponse::from(snapshot))),
                history,
                true,
            ));
        }
        let (mut sub, run) = match self.start(ctx, req, true, false) {
            Started::Now(started) => started?,
            Started::Later(started) => started.await?,
        };
        // The agent runs on this request's task until its first answer, which
        // decides between an error response and a stream; the rest of the
        // run continues in a task of its own. (Answering without a hand-over
        // also lets the connection's read buffer be reused: a request still
        // pending when the server reads again would make it grow.)
        let mut run = Detached(Some(run));
        let first = std::future::poll_fn(|cx| {
            run.poll_run(cx);
            sub.poll_recv(cx)
        })
        .await;
        drop(run);
        let first = match first {
            Some(item) => item.map_err(|e| *e)?,
            None => return Err(A2aError::internal("the agent ended without answering")),
        };
        Ok(follow(sub, Some(first), history, true))
    }

    /// `SubscribeToTask`: the current task, then its events until it is
    /// terminal. Refused for terminal tasks.
    pub async fn subscribe_to_task(
        &self,
        ctx: &CallContext,
        req: SubscribeToTaskRequest,
    ) -> A2aResult<EventStream> {
        let _flight = self.begin()?;
        let owner = self.admit(ctx, &req.tenant)?;
        if !self.caps_streaming() {
            return Err(A2aError::unsupported(
                "streaming is not supported by this agent (capabilities.streaming)",
            ));
        }
        let stored = self.visible_task(&owner, &req.id, Some(0)).await?;
        if stored.task.state().is_terminal() {
            return Err(A2aError::unsupported(format!(
                "task {} is {}: subscriptions are only possible to tasks that are not terminal; use GetTask",
                req.id,
                stored.task.state().short_name()
            ))
            .with_metadata("taskId", req.id.clone()));
        }
        let (snapshot, sub) = self.inner.manager.subscribe(&stored, None).await?;
        if snapshot.state().is_terminal() {
            return Err(A2aError::unsupported(format!(
                "task {} finished meanwhile; use GetTask",
                req.id
            )));
        }
        Ok(follow(
            sub,
            Some(Arc::new(StreamResponse::from(snapshot))),
            None,
            false,
        ))
    }
}

/// Turns a subscription into the event stream of a streaming call. A send
/// stream closes at a terminal or interrupted state (or after a message); a
/// subscription closes at a terminal state only.
pub(super) fn follow(
    mut sub: Subscription,
    first: Option<Arc<StreamResponse>>,
    history: Option<usize>,
    close_on_interrupt: bool,
) -> EventStream {
    Box::pin(async_stream::stream! {
        let mut next = first.map(Ok);
        // The opening Task snapshot shows where the task stands; when a
        // message continues an interrupted task, that is the interrupted
        // state, which must not end the stream the message just started.
        let mut opening = true;
        loop {
            let item = match next.take() {
                Some(item) => item,
                None => match sub.recv().await {
                    Some(item) => item,
                    None => break,
                },
            };
            let event = match item {
                Ok(event) => event,
                Err(e) => {
                    yield Err(*e);
                    break;
                }
            };
            let opening_snapshot = std::mem::take(&mut opening)
                && matches!(event.payload, Some(stream_response::Payload::Task(_)))
                && !event.state().is_some_and(TaskState::is_terminal);
            let ends = if opening_snapshot {
                false
            } else if close_on_interrupt {
                event.ends_stream()
            } else {
                matches!(event.payload, Some(stream_response::Payload::Message(_)))
                    || event.state().is_some_and(TaskState::is_terminal)
            };
            let mut event = Arc::try_unwrap(event).unwrap_or_else(|shared| (*shared).clone());
            if let Some(stream_response::Payload::Task(t)) = event.payload.as_mut() {
                t.truncate_history(history);
            }
            yield Ok(event);
            if ends {
                break;
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::{RequestContext, TaskUpdater};
    use agentwire_types::Message;

    /// Waits for input; on "burst" streams 20 chunks and waits again; on
    /// anything else completes.
    struct Bursty;

    impl crate::AgentExecutor for Bursty {
        async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
            match (ctx.task.is_some(), ctx.text().as_str()) {
                (false, _) => task.require_input("ready").await,
                (true, "burst") => {
                    let id = agentwire_types::new_id();
                    for i in 0..20 {
                        let chunk =
                            agentwire_types::Artifact::text("a", format!("{i} ")).with_id(&id);
                        task.artifact_chunk(chunk, i > 0, i == 19).await?;
                    }
                    task.require_input("again?").await
                }
                (true, _) => task.complete().await,
            }
        }
    }

    #[tokio::test]
    async fn a_lagging_subscriber_keeps_following_the_task() {
        use futures::StreamExt;
        let h = RequestHandler::builder(AgentCard::default().with_streaming(true), Bursty)
            .config(HandlerConfig {
                queue_capacity: 4,
                ..Default::default()
            })
            .build();
        let ctx = CallContext::v1();
        let send = |text: &str, task_id: &str| SendMessageRequest {
            message: Some(Message::user_text(text).with_task_id(task_id)),
            ..Default::default()
        };
        let first = h.send_message(&ctx, send("start", "")).await.unwrap();
        let id = first.task().unwrap().id.clone();
        let sub = SubscribeToTaskRequest {
            id: id.clone(),
            ..Default::default()
        };
        let mut stream = h.subscribe_to_task(&ctx, sub).await.unwrap();
        let opening = stream.next().await.unwrap().unwrap();
        assert!(matches!(
            opening.payload,
            Some(stream_response::Payload::Task(_))
        ));
        // The subscriber does not read while 20 chunks arrive: it falls
        // behind (queue of 4) and the run ends, interrupted.
        h.send_message(&ctx, send("burst", &id)).await.unwrap();
        // It drains, rejoins from a snapshot (the interrupted task)...
        let mut last = None;
        while let Ok(Some(ev)) =
            tokio::time::timeout(std::time::Duration::from_secs(5), stream.next()).await
        {
            let ev = ev.unwrap();
            if ev.state() == Some(TaskState::InputRequired)
                && matches!(ev.payload, Some(stream_response::Payload::Task(_)))
            {
                last = Some(ev);
                break;
            }
        }
        assert!(last.is_some(), "resynchronised from a snapshot");
        // ...and still sees the next turn, to the end.
        h.send_message(&ctx, send("finish", &id)).await.unwrap();
        let rest: Vec<_> = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            stream.collect::<Vec<_>>(),
        )
        .await
        .expect("the stream ends");
        let states: Vec<_> = rest
            .iter()
            .filter_map(|e| e.as_ref().ok()?.state())
            .collect();
        assert_eq!(states.last(), Some(&TaskState::Completed), "{rest:?}");
    }
}
