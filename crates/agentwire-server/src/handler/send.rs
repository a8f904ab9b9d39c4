//! `SendMessage`: validating a send, starting (or continuing) a task and
//! the agent's run on it, and answering once the run's turn ends.

use std::sync::Arc;

use agentwire_types::{
    A2aError, A2aResult, Message, SendMessageRequest, SendMessageResponse, Task, stream_response,
};
use futures::FutureExt;

use super::*;
use crate::executor::{RequestContext, TaskUpdater};
use crate::manager::{LiveTask, Subscription};
use crate::store::{Owner, PushFormat, StoredPushConfig};

impl RequestHandler {
    /// Validates a send request, resolves the task it continues (if any),
    /// registers the live state and starts the agent. Returns the
    /// subscription that carries the agent's answer.
    ///
    /// With a store that answers at once (an
    /// [`ImmediateStore`](crate::store::ImmediateStore)), a message starting
    /// a new task with nothing to look up (no inline push config, no
    /// referenced tasks) starts without awaiting anything: the caller's
    /// future then holds no state of the other cases, which are in a boxed
    /// future of their own ([`Self::start_with_lookups`], which gives the
    /// same result for such a message).
    pub(super) fn start<'a>(
        &'a self,
        ctx: &'a CallContext,
        req: SendMessageRequest,
        streaming: bool,
        finals_only: bool,
    ) -> Started<'a> {
        let owner = match self.admit_now(ctx, &req.tenant) {
            Admitted::Now(Ok(owner)) => owner,
            Admitted::Now(Err(e)) => return Started::Now(Err(e)),
            Admitted::Later(admitting) => {
                // The authenticator has to wait (keys to fetch): the rest
                // waits with it.
                return Started::Later(Box::pin(async move {
                    let owner = admitting.await?;
                    let extensions = self.check_send(ctx, &req, streaming)?;
                    self.start_with_lookups(
                        owner,
                        extensions,
                        req,
                        (streaming, finals_only),
                        (ctx.push_format, ctx.peer),
                    )
                    .await
                }));
            }
        };
        let extensions = match self.check_send(ctx, &req, streaming) {
            Ok(checked) => checked,
            Err(e) => return Started::Now(Err(e)),
        };
        let plain = self.store().immediate().is_some()
            && req
                .configuration
                .as_ref()
                .is_none_or(|c| c.task_push_notification_config.is_none())
            && req
                .message
                .as_ref()
                .is_some_and(|m| m.task_id.is_empty() && m.reference_task_ids.is_empty());
        if !plain {
            return Started::Later(Box::pin(self.start_with_lookups(
                owner,
                extensions,
                req,
                (streaming, finals_only),
                (ctx.push_format, ctx.peer),
            )));
        }
        let SendMessageRequest {
            message,
            metadata,
            configuration,
            ..
        } = req;
        let Some(message) = message else {
            return Started::Now(Err(A2aError::invalid_params(
                "message",
                "a message is required",
            )));
        };
        let (running, stream) =
            match self.count_work(&owner, ctx.peer, &message, metadata.as_ref(), streaming) {
                Ok(counted) => counted,
                Err(e) => return Started::Now(Err(e)),
            };
        Started::Now(Ok(self.launch_new(
            owner,
            extensions,
            message,
            RunInputs {
                metadata,
                configuration,
                inline_push: None,
                reference_tasks: Vec::new(),
                streaming,
                finals_only,
                peer: ctx.peer,
                pending: None,
                running,
                stream,
            },
        )))
    }

    /// The checks of a send that need nothing but the request, once the
    /// caller is admitted: streaming capability, extensions, message and
    /// history length. Returns the extensions in use.
    pub(super) fn check_send(
        &self,
        ctx: &CallContext,
        req: &SendMessageRequest,
        streaming: bool,
    ) -> A2aResult<Vec<String>> {
        if streaming && !self.caps_streaming() {
            return Err(A2aError::unsupported(
                "streaming is not supported by this agent (capabilities.streaming)",
            ));
        }
        let extensions = self.extensions(ctx)?;
        self.validate_message(req.message.as_ref())?;
        self.validate_content(req)?;
        if let Some(c) = &req.configuration {
            history_length(c.history_length, "configuration.historyLength")?;
        }
        if let Some(m) = &req.message
            && !m.task_id.is_empty()
        {
            // A full store refuses a message continuing a task here,
            // before the agent starts. A message starting a task needs no
            // room: the agent may answer it with a message, which stores
            // nothing; a task it makes is refused when it is created (by a
            // full store, or by the bound on the caller's open tasks: see
            // `open_tasks.rs`).
            use prost::Message as _;
            self.store().check_room(m.encoded_len(), false)?;
        }
        Ok(extensions)
    }

    /// [`RequestHandler::start`] with an inline push config, referenced
    /// tasks or a task to continue.
    pub(super) async fn start_with_lookups(
        &self,
        owner: Owner,
        extensions: Vec<String>,
        req: SendMessageRequest,
        (streaming, finals_only): (bool, bool),
        (push_format, peer): (PushFormat, Option<std::net::SocketAddr>),
    ) -> A2aResult<(Subscription, Run)> {
        let mut inline_push = None;
        if let Some(config) = req
            .configuration
            .as_ref()
            .and_then(|c| c.task_push_notification_config.as_ref())
        {
            let push = self.push()?;
            // The task id is the task's: filled in when it is known.
            let task_id = req
                .message
                .as_ref()
                .map(|m| m.task_id.clone())
                .unwrap_or_default();
            inline_push = Some(
                self.prepare_push_config(
                    push,
                    config.clone(),
                    &task_id,
                    "configuration.taskPushNotificationConfig.",
                    push_format,
                )
                .await?,
            );
        }
        let SendMessageRequest {
            message,
            metadata,
            configuration,
            ..
        } = req;
        let Some(mut message) = message else {
            return Err(A2aError::invalid_params("message", "a message is required"));
        };
        let (running, stream) =
            self.count_work(&owner, peer, &message, metadata.as_ref(), streaming)?;
        let mut reference_tasks = Vec::new();
        for id in &message.reference_task_ids {
            // A task the caller cannot see is refused like a missing one
            // (spec 13.1): referring to it must not give its contents to
            // the agent working for this caller.
            reference_tasks.push(self.visible_task(&owner, id, None).await?.task);
        }
        let launch = RunInputs {
            metadata,
            configuration,
            inline_push,
            reference_tasks,
            streaming,
            finals_only,
            peer,
            pending: None,
            running,
            stream,
        };
        if message.task_id.is_empty() {
            return Ok(self.launch_new(owner, extensions, message, launch));
        }
        let stored = self.visible_task(&owner, &message.task_id, None).await?;
        let task = &stored.task;
        if !message.context_id.is_empty() && message.context_id != task.context_id {
            return Err(A2aError::invalid_params(
                "message.contextId",
                format!(
                    "context {} does not match the context {} of task {}",
                    message.context_id, task.context_id, task.id
                ),
            ));
        }
        let if_match = launch
            .configuration
            .as_ref()
            .and_then(|c| c.if_generation_match);
        // A generation only grows: one already past what the writer saw is
        // a mismatch, whatever happened since (checked again, under the
        // task's order lock, in `continue_task`).
        if let Some(expected) = if_match
            && task.generation != expected
        {
            return Err(A2aError::generation_mismatch(
                &task.id,
                expected,
                task.generation,
            ));
        }
        if task.state().is_terminal() {
            return Err(A2aError::unsupported(format!(
                "task {} is {}: a terminal task accepts no more messages; start a new task in the same context (referenceTaskIds) instead",
                task.id,
                task.state().short_name()
            ))
            .with_metadata("taskId", task.id.clone()));
        }
        message.context_id.clone_from(&task.context_id);
        if let (Some(config), Some(push)) = (launch.inline_push.as_ref(), self.push_sender()) {
            // A config sent with a message continuing a task applies to
            // that task from now on.
            self.save_push_config(push, config).await?;
        }
        let (live, sub) = self
            .inner
            .manager
            .continue_task(&stored, message.clone(), finals_only, if_match)
            .await?;
        Ok(self.launch(live, sub, message, Some(stored.task), extensions, launch))
    }

    /// Counts a send toward its caller's bounds (see `open_tasks.rs`): its
    /// bytes toward the running bytes, and a stream (`streaming`) toward
    /// the open streams; refused when it would take the caller over
    /// [`crate::HandlerConfig::max_running_bytes_per_caller`] or
    /// [`crate::HandlerConfig::max_streams_per_caller`].
    fn count_work(
        &self,
        owner: &Owner,
        peer: Option<std::net::SocketAddr>,
        message: &Message,
        metadata: Option<&agentwire_types::Struct>,
        streaming: bool,
    ) -> A2aResult<(
        Option<super::open_tasks::Running>,
        Option<super::open_tasks::StreamSlot>,
    )> {
        use prost::Message as _;
        let open = &self.inner.open_tasks;
        let stream = if streaming {
            open.stream(owner, peer)?
        } else {
            None
        };
        let running = open.run(owner, peer, || {
            message.encoded_len() + metadata.map_or(0, |m| m.encoded_len())
        })?;
        Ok((running, stream))
    }

    /// Registers a new task's live state (ids assigned) and starts its
    /// agent.
    pub(super) fn launch_new(
        &self,
        owner: Owner,
        extensions: Vec<String>,
        mut message: Message,
        mut launch: RunInputs,
    ) -> (Subscription, Run) {
        let context_id = if message.context_id.is_empty() {
            agentwire_types::new_id()
        } else {
            message.context_id.clone()
        };
        let task_id = agentwire_types::new_id();
        if let Some(idem) = &self.inner.idempotency {
            idem.record(&owner, &message.message_id, &task_id);
        }
        // An anonymous caller's task counts for its address (see
        // `open_tasks.rs`), known here only.
        if owner.principal.is_empty() {
            let caller = super::open_tasks::Caller::of(&owner, launch.peer);
            launch.pending = self.inner.open_tasks.expect(&task_id, caller);
        }
        message.context_id.clone_from(&context_id);
        message.task_id.clone_from(&task_id);
        let (live, sub) = self.inner.manager.start_new(
            task_id,
            context_id,
            owner,
            message.clone(),
            launch.inline_push.take(),
            launch.finals_only,
        );
        self.launch(live, sub, message, None, extensions, launch)
    }

    /// The agent's run on a live task, with the request's context.
    pub(super) fn launch(
        &self,
        live: Arc<LiveTask>,
        sub: Subscription,
        message: Message,
        existing: Option<Task>,
        extensions: Vec<String>,
        launch: RunInputs,
    ) -> (Subscription, Run) {
        let mut sub = sub;
        if let Some(slot) = launch.stream {
            sub.hold(slot);
        }
        let manager = &self.inner.manager;
        #[cfg(feature = "otel")]
        let (task_id, context_id) = (live.id.clone(), live.context_id.clone());
        let rctx = RequestContext {
            message,
            task: existing.map(Box::new),
            task_id: live.id.clone(),
            context_id: live.context_id.clone(),
            reference_tasks: launch.reference_tasks,
            extensions,
            caller: (!live.owner.principal.is_empty()).then(|| live.owner.principal.clone()),
            metadata: launch.metadata,
            configuration: launch.configuration.map(Box::new),
            streaming: launch.streaming,
            cancel: live.cancel.clone(),
        };
        let updater = TaskUpdater {
            manager: Arc::clone(manager),
            live: Arc::clone(&live),
        };
        let executor = Arc::clone(&self.inner.executor);
        let manager = Arc::clone(manager);
        let pending = launch.pending;
        let running = launch.running;
        let run: Run = Box::pin(async move {
            let outcome = std::panic::AssertUnwindSafe(executor.execute_boxed(rctx, updater))
                .catch_unwind()
                .await
                .map_err(|p| panic_text(&*p));
            if let Some(finishing) = manager.finish_run(&live, outcome) {
                finishing.await;
            }
            // The task was created by now, or never will be.
            drop(pending);
            // The agent holds the message no more.
            drop(running);
        });
        // The turn in a span of its own, current while the agent works, so
        // the calls it makes carry the trace on.
        #[cfg(feature = "otel")]
        let run: Run = if crate::observe::otel::enabled() {
            use tracing::Instrument as _;
            let span = crate::observe::otel::turn_span(&task_id, &context_id);
            Box::pin(run.instrument(span))
        } else {
            run
        };
        (sub, run)
    }

    /// With idempotency on: the task an earlier message with the same id
    /// (from the same caller) started, if it still exists.
    pub(super) async fn replay(
        &self,
        ctx: &CallContext,
        req: &SendMessageRequest,
    ) -> A2aResult<Option<Task>> {
        let (Some(idem), Some(m)) = (&self.inner.idempotency, &req.message) else {
            return Ok(None);
        };
        if !m.task_id.is_empty() || m.message_id.is_empty() {
            return Ok(None);
        }
        let owner = self.admit(ctx, &req.tenant).await?;
        let Some(task_id) = idem.lookup(&owner, &m.message_id) else {
            return Ok(None);
        };
        let history = req.configuration.as_ref().map_or(Ok(None), |c| {
            history_length(c.history_length, "configuration.historyLength")
        })?;
        Ok(self
            .visible_task(&owner, &task_id, history)
            .await
            .ok()
            .map(|s| s.task))
    }

    /// `SendMessage`: blocks until the task is terminal or interrupted
    /// (unless `returnImmediately`), or returns the agent's message.
    #[allow(clippy::manual_async_fn)]
    pub fn send_message<'a>(
        &'a self,
        ctx: &'a CallContext,
        req: SendMessageRequest,
    ) -> impl Future<Output = A2aResult<SendMessageResponse>> + Send + 'a {
        self.send_answer(ctx, req)
            .map(|answer| answer.map(SendAnswer::into_response))
    }

    /// [`Self::send_message`] as the bindings call it: a task of the
    /// in-memory store comes back shared with the store, not copied.
    // Not an `async fn`: an async function keeps its arguments twice in its
    // future (as passed, and as bound in the body); the block below keeps
    // the request once, which keeps the future (boxed by the bindings) under
    // the allocator's small-size limit. It does nothing until polled.
    #[allow(clippy::manual_async_fn)]
    pub(crate) fn send_answer<'a>(
        &'a self,
        ctx: &'a CallContext,
        req: SendMessageRequest,
    ) -> impl Future<Output = A2aResult<SendAnswer>> + Send + 'a {
        async move {
            // Counted until the answer (see `HandlerConfig::max_in_flight`).
            let _flight = self.begin()?;
            let (immediate, history) = match &req.configuration {
                Some(c) => (
                    c.return_immediately,
                    history_length(c.history_length, "configuration.historyLength")?,
                ),
                None => (false, None),
            };
            let started = if self.inner.idempotency.is_some() {
                match Box::pin(self.replay_or_start(ctx, req, !immediate)).await {
                    Ok(Replayed::Task(task)) => {
                        let task = super::generation::task_for(ctx, *task);
                        return Ok(SendAnswer::Response(task.into()));
                    }
                    Ok(Replayed::Started(started)) => Started::Now(Ok(started)),
                    Err(e) => return Err(e),
                }
            } else {
                self.start(ctx, req, false, !immediate)
            };
            let (sub, run) = match started {
                Started::Now(started) => started?,
                Started::Later(started) => started.await?,
            };
            // Boxed: this future then holds the request or the answer's
            // state, not both.
            let answer = Box::pin(self.answer_send(sub, run, immediate, history)).await?;
            Ok(answer.for_caller(ctx))
        }
    }

    /// With idempotency on: the task of an earlier message with the same
    /// id, or the run of this one.
    pub(super) async fn replay_or_start(
        &self,
        ctx: &CallContext,
        req: SendMessageRequest,
        finals_only: bool,
    ) -> A2aResult<Replayed> {
        if let Some(task) = self.replay(ctx, &req).await? {
            return Ok(Replayed::Task(Box::new(task)));
        }
        match self.start(ctx, req, false, finals_only) {
            Started::Now(started) => started.map(Replayed::Started),
            Started::Later(started) => started.await.map(Replayed::Started),
        }
    }

    /// The answer to `SendMessage` once the agent runs: its first event
    /// (`returnImmediately`), or the task at the end of its turn.
    pub(super) async fn answer_send(
        &self,
        mut sub: Subscription,
        run: Run,
        immediate: bool,
        history: Option<usize>,
    ) -> A2aResult<SendAnswer> {
        let mut last_task: Option<Box<Task>> = None;
        if immediate {
            tokio::spawn(run);
            // The first event settles it: the task as created, or a message.
            match sub.recv().await {
                Some(item) => {
                    let event = item.map_err(|e| *e)?;
                    match event.payload.as_ref() {
                        Some(stream_response::Payload::Message(m)) => {
                            return Ok(SendAnswer::Response(m.clone().into()));
                        }
                        Some(stream_response::Payload::Task(t)) => {
                            let mut t = t.clone();
                            t.truncate_history(history);
                            return Ok(SendAnswer::Response(t.into()));
                        }
                        _ => {}
                    }
                }
                None => return Err(A2aError::internal("the agent ended without answering")),
            }
        } else {
            // Run the agent on this request's task until its turn ends: no
            // hand-over to another task, no extra wake-ups. If the turn ends
            // while the agent still runs (or this request is dropped), the
            // rest of the run continues in the background.
            let mut run = Detached(Some(run));
            let item = std::future::poll_fn(|cx| {
                run.poll_run(cx);
                sub.poll_recv(cx)
            })
            .await;
            drop(run);
            if let Some(item) = item {
                let event = item.map_err(|e| *e)?;
                // A status (or the bare signal that the turn ended) says to
                // read the task; a message or a task is the answer itself.
                if let Some(
                    stream_response::Payload::Message(_) | stream_response::Payload::Task(_),
                ) = &event.payload
                {
                    match Arc::unwrap_or_clone(event).payload {
                        Some(stream_response::Payload::Message(m)) => {
                            return Ok(SendAnswer::Response(m.into()));
                        }
                        Some(stream_response::Payload::Task(t)) => last_task = Some(Box::new(t)),
                        _ => {}
                    }
                }
            }
        }
        let stored = match sub.take_turn_task() {
            Some(task) if history.is_none_or(|n| n >= task.history.len()) => Ok(Some(task)),
            Some(task) => {
                let mut task = Task::clone(&task);
                task.truncate_history(history);
                Ok(Some(Arc::new(task)))
            }
            None => self.inner.manager.shared_task(sub.task_id(), history).await,
        };
        drop(sub);
        match stored? {
            Some(task) => Ok(SendAnswer::Task(task)),
            None => match last_task {
                Some(t) => Ok(SendAnswer::Response((*t).into())),
                None => Err(A2aError::internal("the task ended without being stored")),
            },
        }
    }
}

/// One run of the agent for one message, ending with the manager's
/// bookkeeping.
pub(super) type Run = futures::future::BoxFuture<'static, ()>;

/// What [`RequestHandler::start`] gives: the run started, or the future
/// that starts it.
/// The answer to `SendMessage` as the bindings get it.
pub(crate) enum SendAnswer {
    /// A message, or a task copied (or cut to the history asked for).
    Response(SendMessageResponse),
    /// A task: as the in-memory store holds it (shared, not copied), or a
    /// copy of its own.
    Task(Arc<Task>),
}

impl SendAnswer {
    /// The answer as this call's version shows it (without the generation
    /// for a 1.0 call; a task shared with the store is copied only then).
    fn for_caller(mut self, ctx: &CallContext) -> Self {
        use agentwire_types::send_message_response::Payload;
        if super::generation::reads_generation(ctx) {
            return self;
        }
        match &mut self {
            SendAnswer::Task(t) if t.generation != 0 => Arc::make_mut(t).generation = 0,
            SendAnswer::Response(r) => {
                if let Some(Payload::Task(t)) = r.payload.as_mut() {
                    t.generation = 0;
                }
            }
            _ => {}
        }
        self
    }

    /// The answer as the protocol's response type.
    pub(crate) fn into_response(self) -> SendMessageResponse {
        match self {
            SendAnswer::Response(r) => r,
            SendAnswer::Task(t) => Arc::unwrap_or_clone(t).into(),
        }
    }
}

/// Serialized exactly as the [`SendMessageResponse`] it stands for.
impl serde::Serialize for SendAnswer {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        match self {
            SendAnswer::Response(r) => r.serialize(serializer),
            SendAnswer::Task(t) => {
                let mut s = serializer.serialize_struct("lf.a2a.v1.SendMessageResponse", 1)?;
                s.serialize_field("task", &**t)?;
                s.end()
            }
        }
    }
}

pub(super) enum Started<'a> {
    Now(A2aResult<(Subscription, Run)>),
    Later(futures::future::BoxFuture<'a, A2aResult<(Subscription, Run)>>),
}

/// What [`RequestHandler::replay_or_start`] found or started.
pub(super) enum Replayed {
    Task(Box<Task>),
    Started((Subscription, Run)),
}

/// The parts of a send request the agent's run takes, besides the message.
pub(super) struct RunInputs {
    metadata: Option<agentwire_types::Struct>,
    configuration: Option<agentwire_types::SendMessageConfiguration>,
    inline_push: Option<StoredPushConfig>,
    reference_tasks: Vec<Task>,
    streaming: bool,
    finals_only: bool,
    /// The caller's address (an anonymous caller's tasks count for it).
    peer: Option<std::net::SocketAddr>,
    /// The caller of the task, until it is created (see `open_tasks.rs`).
    pending: Option<super::open_tasks::Pending>,
    /// The send's bytes in its caller's running bytes, until the run ends.
    running: Option<super::open_tasks::Running>,
    /// A stream's place in its caller's open streams, held by its
    /// subscription.
    stream: Option<super::open_tasks::StreamSlot>,
}

/// A run polled in place by the request; whatever is left of it when the
/// request stops polling continues in a task of its own.
pub(super) struct Detached(pub(super) Option<Run>);

impl Detached {
    pub(super) fn poll_run(&mut self, cx: &mut std::task::Context<'_>) {
        if let Some(run) = self.0.as_mut() {
            if run.as_mut().poll(cx).is_ready() {
                self.0 = None;
            }
        }
    }
}

impl Drop for Detached {
    fn drop(&mut self) {
        if let Some(run) = self.0.take() {
            tokio::spawn(run);
        }
    }
}

pub(super) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_types::ListTasksRequest;

    #[tokio::test]
    async fn a_shared_task_answers_as_the_response_would() {
        struct Done;
        impl crate::AgentExecutor for Done {
            async fn execute(&self, _: RequestContext, task: TaskUpdater) -> A2aResult<()> {
                task.add_artifact(agentwire_types::Artifact::text("a", "b \"c\""))
                    .await?;
                task.complete().await
            }
        }
        let h = RequestHandler::builder(AgentCard::default(), Done).build();
        let ctx = CallContext::v1();
        let req = SendMessageRequest {
            message: Some(Message::user_text("hi")),
            ..Default::default()
        };
        let answer = h.send_answer(&ctx, req).await.unwrap();
        let SendAnswer::Task(shared) = &answer else {
            panic!("the in-memory store's task is shared");
        };
        // The store packed the finished task: the answer is the task the
        // last update left (handed over, not decoded), equal to what the
        // store gives back.
        assert_eq!(Arc::strong_count(shared), 1);
        let stored = h
            .get_task(
                &ctx,
                agentwire_types::GetTaskRequest {
                    id: shared.id.clone(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(stored, **shared);
        let json = serde_json::to_value(&answer).unwrap();
        let response = answer.into_response();
        assert_eq!(json, serde_json::to_value(&response).unwrap());
        assert_eq!(json["task"]["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(json["task"]["artifacts"][0]["parts"][0]["text"], "b \"c\"");
        // Asked for no history: a copy without it.
        let req = SendMessageRequest {
            message: Some(Message::user_text("again")),
            configuration: Some(agentwire_types::SendMessageConfiguration {
                history_length: Some(0),
                ..Default::default()
            }),
            ..Default::default()
        };
        match h.send_answer(&ctx, req).await.unwrap() {
            SendAnswer::Task(t) => {
                assert!(t.history.is_empty());
                assert_eq!(Arc::strong_count(&t), 1, "a cut history is a copy");
            }
            SendAnswer::Response(_) => panic!("a task is answered"),
        }
    }

    #[tokio::test]
    async fn repeated_message_ids_are_duplicates_only_when_asked() {
        let send = |h: &RequestHandler| {
            let h = h.clone();
            async move {
                let req = SendMessageRequest {
                    message: Some(Message::user_text("hi").with_message_id("same")),
                    ..Default::default()
                };
                let r = h.send_message(&CallContext::v1(), req).await.unwrap();
                r.task().unwrap().id.clone()
            }
        };
        let plain =
            RequestHandler::builder(AgentCard::default(), crate::executor::tests::Nop).build();
        assert_ne!(send(&plain).await, send(&plain).await);
        let idem = RequestHandler::builder(AgentCard::default(), crate::executor::tests::Nop)
            .config(HandlerConfig {
                idempotency: Some(100),
                ..Default::default()
            })
            .build();
        let first = send(&idem).await;
        assert_eq!(send(&idem).await, first);
        let page = idem
            .list_tasks(&CallContext::v1(), ListTasksRequest::default())
            .await
            .unwrap();
        assert_eq!(page.total_size, 1);
    }
}
