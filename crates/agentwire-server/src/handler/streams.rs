//! The streaming calls: `SendStreamingMessage` and `SubscribeToTask`, and
//! how a subscription to a task becomes the event stream a binding sends.

use std::sync::Arc;

use agentwire_types::{
    A2aError, A2aResult, SendMessageRequest, StreamResponse, SubscribeToTaskRequest, TaskState,
    stream_response,
};
use futures::StreamExt;

use super::*;
use crate::manager::events::{EventId, LAST_EVENT_ID};
use crate::manager::{Opening, Subscription};

/// A stream of protocol events, each with its event id when it has one
/// (what the SSE bindings send as `id:`).
pub(crate) type IdEventStream =
    Pin<Box<dyn Stream<Item = (Option<EventId>, A2aResult<StreamResponse>)> + Send>>;

fn without_ids(s: IdEventStream) -> EventStream {
    Box::pin(s.map(|(_, item)| item))
}

impl RequestHandler {
    /// `SendStreamingMessage`: the agent's message, or the task followed by
    /// its events until it is terminal or interrupted.
    pub async fn send_streaming_message(
        &self,
        ctx: &CallContext,
        req: SendMessageRequest,
    ) -> A2aResult<EventStream> {
        self.send_streaming_message_with_ids(ctx, req)
            .await
            .map(without_ids)
    }

    /// `SubscribeToTask`: the current task, then its events until it is
    /// terminal. Refused for terminal tasks.
    ///
    /// With a `last-event-id` header (or gRPC metadata key), the id of the
    /// last event a client received on an earlier stream of this task, the
    /// stream starts with the events after it instead, when the server
    /// still holds all of them; otherwise it starts with the task as it is
    /// now, as without the header. A task that ended since is then not
    /// refused: the stream sends what was missed (or the final task) and
    /// closes.
    pub async fn subscribe_to_task(
        &self,
        ctx: &CallContext,
        req: SubscribeToTaskRequest,
    ) -> A2aResult<EventStream> {
        self.subscribe_to_task_with_ids(ctx, req)
            .await
            .map(without_ids)
    }

    /// [`Self::send_streaming_message`], with event ids.
    pub(crate) async fn send_streaming_message_with_ids(
        &self,
        ctx: &CallContext,
        req: SendMessageRequest,
    ) -> A2aResult<IdEventStream> {
        let _flight = self.begin()?;
        let history = match &req.configuration {
            Some(c) => history_length(c.history_length, "configuration.historyLength")?,
            None => None,
        };
        if let Some(task) = self.replay(ctx, &req).await? {
            // A duplicate: follow the task it started, or just show it when
            // it has finished.
            if task.state().is_terminal() {
                let task = generation::task_for(ctx, task);
                let once =
                    futures::stream::once(async move { (None, Ok(StreamResponse::from(task))) });
                return Ok(Box::pin(once));
            }
            let owner = self.admit(ctx, &req.tenant).await?;
            let slot = self.inner.open_tasks.stream(&owner, ctx.peer)?;
            let stored = self.visible_task(&owner, &task.id, None).await?;
            let (opening, mut sub) = self.inner.manager.subscribe(&stored, history, None).await?;
            if let Some(slot) = slot {
                sub.hold(slot);
            }
            let first = match opening {
                Opening::Snapshot { task, id } => vec![(id, Arc::new(StreamResponse::from(task)))],
                Opening::Missed { events, .. } => {
                    events.into_iter().map(|(id, e)| (Some(id), e)).collect()
                }
            };
            return Ok(follow(
                sub,
                first,
                history,
                true,
                generation::reads_generation(ctx),
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
            sub.poll_recv_event(cx)
        })
        .await;
        drop(run);
        let first = match first {
            Some((id, item)) => (id, item.map_err(|e| *e)?),
            None => return Err(A2aError::internal("the agent ended without answering")),
        };
        Ok(follow(
            sub,
            vec![first],
            history,
            true,
            generation::reads_generation(ctx),
        ))
    }

    /// [`Self::subscribe_to_task`], with event ids.
    pub(crate) async fn subscribe_to_task_with_ids(
        &self,
        ctx: &CallContext,
        req: SubscribeToTaskRequest,
    ) -> A2aResult<IdEventStream> {
        let _flight = self.begin()?;
        let owner = self.admit(ctx, &req.tenant).await?;
        if !self.caps_streaming() {
            return Err(A2aError::unsupported(
                "streaming is not supported by this agent (capabilities.streaming)",
            ));
        }
        // Counted from here: refused before anything is looked up.
        let slot = self.inner.open_tasks.stream(&owner, ctx.peer)?;
        let resume = match ctx.headers.get(LAST_EVENT_ID).map(|v| v.to_str()) {
            None => None,
            Some(raw) => Some(raw.ok().and_then(EventId::parse).ok_or_else(|| {
                A2aError::invalid_params(
                    "Last-Event-ID",
                    "is not an event id of this server (the `id` of an event it sent)",
                )
            })?),
        };
        let stored = self.visible_task(&owner, &req.id, Some(0)).await?;
        if resume.is_some() {
            let (opening, mut sub) = self.inner.manager.subscribe(&stored, None, resume).await?;
            if let Some(slot) = slot {
                sub.hold(slot);
            }
            let first = match opening {
                // Nothing missed and nothing more to come.
                Opening::Missed { events, state } if events.is_empty() && state.is_terminal() => {
                    return Ok(Box::pin(futures::stream::empty()));
                }
                Opening::Missed { events, .. } => {
                    events.into_iter().map(|(id, e)| (Some(id), e)).collect()
                }
                Opening::Snapshot { task, id } => {
                    vec![(id, Arc::new(StreamResponse::from(task)))]
                }
            };
            return Ok(follow(
                sub,
                first,
                None,
                false,
                generation::reads_generation(ctx),
            ));
        }
        if stored.task.state().is_terminal() {
            return Err(A2aError::unsupported(format!(
                "task {} is {}: subscriptions are only possible to tasks that are not terminal; use GetTask",
                req.id,
                stored.task.state().short_name()
            ))
            .with_metadata("taskId", req.id.clone()));
        }
        let (opening, mut sub) = self.inner.manager.subscribe(&stored, None, None).await?;
        if let Some(slot) = slot {
            sub.hold(slot);
        }
        let (snapshot, id) = match opening {
            Opening::Snapshot { task, id } => (task, id),
            Opening::Missed { .. } => {
                return Err(A2aError::internal("a subscription resumed unasked"));
            }
        };
        if snapshot.state().is_terminal() {
            return Err(A2aError::unsupported(format!(
                "task {} finished meanwhile; use GetTask",
                req.id
            )));
        }
        Ok(follow(
            sub,
            vec![(id, Arc::new(StreamResponse::from(snapshot)))],
            None,
            false,
            generation::reads_generation(ctx),
        ))
    }
}

/// Turns a subscription into the event stream of a streaming call. A send
/// stream closes at a terminal or interrupted state (or after a message); a
/// subscription closes at a terminal state only.
pub(super) fn follow(
    mut sub: Subscription,
    first: Vec<(Option<EventId>, Arc<StreamResponse>)>,
    history: Option<usize>,
    close_on_interrupt: bool,
    reads_generation: bool,
) -> IdEventStream {
    Box::pin(async_stream::stream! {
        let mut pending: std::collections::VecDeque<_> =
            first.into_iter().map(|(id, e)| (id, Ok(e))).collect();
        // The opening Task snapshot shows where the task stands; when a
        // message continues an interrupted task, that is the interrupted
        // state, which must not end the stream the message just started.
        let mut opening = true;
        loop {
            let (id, item) = match pending.pop_front() {
                Some(item) => item,
                None => match sub.recv_event().await {
                    Some(item) => item,
                    None => break,
                },
            };
            let event = match item {
                Ok(event) => event,
                Err(e) => {
                    yield (None, Err(*e));
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
            if !reads_generation {
                super::generation::strip_event(&mut event);
            }
            yield (id, Ok(event));
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

    /// A message to the agent (`task_id` empty: a new task).
    fn send(text: &str, task_id: &str) -> SendMessageRequest {
        SendMessageRequest {
            message: Some(Message::user_text(text).with_task_id(task_id)),
            ..Default::default()
        }
    }

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

    /// A handler whose subscribers hold 4 events, a task of [`Bursty`]
    /// waiting for input, and a subscription to it.
    async fn subscribed_with_a_small_queue() -> (
        RequestHandler,
        CallContext,
        String,
        crate::handler::EventStream,
    ) {
        let h = RequestHandler::builder(AgentCard::default().with_streaming(true), Bursty)
            .config(HandlerConfig {
                queue_capacity: 4,
                ..Default::default()
            })
            .build();
        let ctx = CallContext::v1();
        let first = h.send_message(&ctx, send("start", "")).await.unwrap();
        let id = first.task().unwrap().id.clone();
        let sub = SubscribeToTaskRequest {
            id: id.clone(),
            ..Default::default()
        };
        let stream = h.subscribe_to_task(&ctx, sub).await.unwrap();
        (h, ctx, id, stream)
    }

    #[tokio::test]
    async fn a_lagging_subscriber_keeps_following_the_task() {
        use futures::StreamExt;
        let (h, ctx, id, mut stream) = subscribed_with_a_small_queue().await;
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

    #[tokio::test]
    async fn at_shutdown_a_lagging_subscription_ends_with_the_waiting_status() {
        use futures::StreamExt;
        let (h, ctx, id, mut stream) = subscribed_with_a_small_queue().await;
        stream.next().await.unwrap().unwrap();
        // Unread, it falls behind during the burst (queue of 4).
        h.send_message(&ctx, send("burst", &id)).await.unwrap();
        assert_eq!(h.end_streams().await, 1);
        let rest: Vec<_> = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            stream.collect::<Vec<_>>(),
        )
        .await
        .expect("the stream ends");
        // What was queued, then the last event: the status it waits in.
        let last = rest.last().expect("events").as_ref().expect("not an error");
        assert!(
            matches!(
                last.payload,
                Some(stream_response::Payload::StatusUpdate(_))
            ),
            "{last:?}"
        );
        assert_eq!(last.state(), Some(TaskState::InputRequired));
        // The task still waits for its input.
        h.send_message(&ctx, send("finish", &id)).await.unwrap();
    }

    fn ids(
        events: &[(Option<EventId>, A2aResult<StreamResponse>)],
    ) -> Vec<(Option<EventId>, StreamResponse)> {
        events
            .iter()
            .map(|(id, e)| (*id, e.as_ref().expect("an event").clone()))
            .collect()
    }

    async fn drain(stream: IdEventStream) -> Vec<(Option<EventId>, A2aResult<StreamResponse>)> {
        tokio::time::timeout(std::time::Duration::from_secs(10), stream.collect())
            .await
            .expect("the stream ends")
    }

    #[tokio::test]
    async fn a_stream_resumed_from_its_last_event_id_misses_nothing_and_repeats_nothing() {
        let h = RequestHandler::builder(AgentCard::default().with_streaming(true), Bursty).build();
        let ctx = CallContext::v1();
        let first = h.send_message(&ctx, send("start", "")).await.unwrap();
        let id = first.task().unwrap().id.clone();
        let sub = || SubscribeToTaskRequest {
            id: id.clone(),
            ..Default::default()
        };
        // One stream reads everything; the other is dropped half-way.
        let whole = h.subscribe_to_task_with_ids(&ctx, sub()).await.unwrap();
        let mut cut = h.subscribe_to_task_with_ids(&ctx, sub()).await.unwrap();
        h.send_message(&ctx, send("burst", &id)).await.unwrap();
        let mut received = Vec::new();
        for _ in 0..6 {
            received.push(cut.next().await.expect("an event"));
        }
        drop(cut);
        let last = received.last().and_then(|(id, _)| *id).expect("an id");
        h.send_message(&ctx, send("finish", &id)).await.unwrap();
        let mut again = CallContext::v1();
        again
            .headers
            .insert(LAST_EVENT_ID, last.to_string().parse().unwrap());
        let resumed = h.subscribe_to_task_with_ids(&again, sub()).await.unwrap();
        received.extend(drain(resumed).await);
        let whole = drain(whole).await;
        assert!(whole.len() > 20, "{}", whole.len());
        assert!(
            whole.iter().all(|(id, _)| id.is_some()),
            "every event has an id"
        );
        assert_eq!(ids(&received), ids(&whole));
        // Resuming after the last event: nothing more, and the stream ends.
        let mut at_end = CallContext::v1();
        let end = whole.last().and_then(|(id, _)| *id).unwrap();
        at_end
            .headers
            .insert(LAST_EVENT_ID, end.to_string().parse().unwrap());
        let nothing = h.subscribe_to_task_with_ids(&at_end, sub()).await.unwrap();
        assert!(drain(nothing).await.is_empty());
        // An id the server does not hold: the (final) task instead.
        let mut unknown = CallContext::v1();
        unknown
            .headers
            .insert(LAST_EVENT_ID, "ffff-3".parse().unwrap());
        let snapshot = h.subscribe_to_task_with_ids(&unknown, sub()).await.unwrap();
        let snapshot = drain(snapshot).await;
        assert_eq!(snapshot.len(), 1);
        let task = snapshot[0].1.as_ref().unwrap();
        assert!(matches!(
            task.payload,
            Some(stream_response::Payload::Task(_))
        ));
        assert_eq!(task.state(), Some(TaskState::Completed));
        // Not an id at all: a clear error.
        let mut bad = CallContext::v1();
        bad.headers
            .insert(LAST_EVENT_ID, "yesterday".parse().unwrap());
        let err = h
            .subscribe_to_task_with_ids(&bad, sub())
            .await
            .err()
            .unwrap();
        assert_eq!(err.kind, agentwire_types::ErrorKind::InvalidParams);
    }

    /// Waits for input; on "big" streams 20 chunks of 10 KB and waits again.
    struct BigChunks;

    impl crate::AgentExecutor for BigChunks {
        async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
            if ctx.task.is_some() && ctx.text() == "big" {
                let id = agentwire_types::new_id();
                for i in 0..20 {
                    let chunk =
                        agentwire_types::Artifact::text("a", "x".repeat(10_000)).with_id(&id);
                    task.artifact_chunk(chunk, i > 0, i == 19).await?;
                }
            }
            task.require_input("more?").await
        }
    }

    #[tokio::test]
    async fn a_stream_that_is_not_read_is_cut_at_its_byte_bound() {
        let h = RequestHandler::builder(AgentCard::default().with_streaming(true), BigChunks)
            .config(HandlerConfig {
                queue_bytes: 32_000,
                ..Default::default()
            })
            .build();
        let ctx = CallContext::v1();
        let first = h.send_message(&ctx, send("start", "")).await.unwrap();
        let id = first.task().unwrap().id.clone();
        let sub = SubscribeToTaskRequest {
            id: id.clone(),
            ..Default::default()
        };
        let stream = h.subscribe_to_task_with_ids(&ctx, sub).await.unwrap();
        // 200 KB of chunks while the stream is not read.
        h.send_message(&ctx, send("big", &id)).await.unwrap();
        let events = drain(stream).await;
        let chunks = events
            .iter()
            .filter(|(_, e)| matches!(e, Ok(ev) if matches!(ev.payload, Some(stream_response::Payload::ArtifactUpdate(_)))))
            .count();
        assert!(chunks <= 4, "at most 32 KB queued: {chunks} chunks");
        let err = events
            .last()
            .and_then(|(_, e)| e.as_ref().err())
            .expect("the stream ends with an error");
        assert!(err.message.contains("fell behind"), "{}", err.message);
    }
}
