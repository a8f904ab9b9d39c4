//! The write path: every change to a task goes through here, under the
//! task's order lock. A task is created in the store when its first event
//! comes, each update is stored and then published (to the subscribers that
//! want it, and to the push sender), in the order it was applied.

use std::sync::Arc;

use agentwire_types::{
    A2aError, A2aResult, Artifact, ErrorKind, Message, StreamResponse, Task,
    TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent,
};
use futures::future::BoxFuture;

use super::TaskManager;
use super::live::{LiveState, LiveTask};
use super::storage::OnFailure;
use super::subscribers::Subscriber;
use crate::store::{ImmediateStore, TaskUpdate, Updated};

/// A task about to be created, with its first event (see
/// [`TaskManager::new_task`]).
pub(super) struct NewTask {
    task: Task,
    inline_push: Option<crate::store::StoredPushConfig>,
    event: Option<Arc<StreamResponse>>,
    wanted: bool,
}

/// What an applied update publishes.
pub(super) enum Publish {
    /// Its event, to every subscriber that wants it.
    Event(Arc<StreamResponse>),
    /// A status that ends the turn, wanted only by requests waiting for
    /// the end of the turn: they are told the turn ended (and read the
    /// task), and no event is built.
    Settled,
    /// Nothing: nobody wants it.
    Nothing,
}

impl Publish {
    /// Stamps the task's generation after the update (as the store
    /// assigned it) on the update's event: built before the write, it is
    /// not shared yet, so this copies nothing. 0 (not known) leaves it.
    pub(super) fn stamp(&mut self, generation: i64) {
        use agentwire_types::stream_response::Payload;
        let Publish::Event(event) = self else {
            return;
        };
        if generation == 0 {
            return;
        }
        match Arc::make_mut(event).payload.as_mut() {
            Some(Payload::StatusUpdate(u)) => u.generation = generation,
            Some(Payload::ArtifactUpdate(u)) => u.generation = generation,
            _ => {}
        }
    }

    pub(super) fn event(&self) -> Option<&Arc<StreamResponse>> {
        match self {
            Publish::Event(e) => Some(e),
            _ => None,
        }
    }
}

/// The future of [`TaskManager::emit`]: applied already, or to be.
pub(crate) enum Emit<'a> {
    /// The error boxed: this future lives inside agents' futures.
    Done(Option<Result<(), Box<A2aError>>>),
    Later(BoxFuture<'a, A2aResult<()>>),
}

impl std::future::Future for Emit<'_> {
    type Output = A2aResult<()>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<A2aResult<()>> {
        // Both variants are Unpin (the future is pinned in its box).
        match self.get_mut() {
            Emit::Done(done) => std::task::Poll::Ready(match done.take() {
                Some(result) => result.map_err(|e| *e),
                None => Err(A2aError::internal("an event was awaited twice")),
            }),
            Emit::Later(f) => f.as_mut().poll(cx),
        }
    }
}

impl TaskManager {
    /// The task to create for a live task not created yet (`None` when it
    /// exists), with its first event when a subscriber or the push sender
    /// wants it; the caller holds `order`. The task is submitted when the
    /// first event that needs it comes: at that event's time, when it has
    /// one (now otherwise).
    pub(super) fn new_task(
        &self,
        live: &LiveTask,
        trigger: Option<&TaskUpdate>,
    ) -> A2aResult<Option<NewTask>> {
        let (first, inline_push) = {
            let mut st = live.state.lock();
            if st.created {
                return Ok(None);
            }
            if st.replied {
                return Err(A2aError::unsupported(
                    "the agent already answered this request with a message; no task can follow",
                ));
            }
            (st.first_message.take(), st.inline_push.take())
        };
        let at = match trigger {
            Some(TaskUpdate::Status { status, .. }) => status.timestamp,
            _ => None,
        };
        let mut status = TaskStatus::new(TaskState::Submitted);
        if at.is_some() {
            status.timestamp = at;
        }
        let task = Task {
            // A2A v1.1 draft, section 3.2.7: 1 at creation.
            generation: 1,
            id: live.id.clone(),
            context_id: live.context_id.clone(),
            status: Some(status),
            artifacts: Vec::new(),
            history: first.into_iter().collect(),
            metadata: None,
        };
        let wanted = live.state.lock().wants(false);
        // The event is built before the task moves into the store (and
        // shared: a future holds a pointer across the store's await).
        let event =
            (wanted || inline_push.is_some()).then(|| Arc::new(StreamResponse::from(task.clone())));
        Ok(Some(NewTask {
            task,
            inline_push,
            event,
            wanted,
        }))
    }

    /// The task exists now: its first event (the task) goes to the
    /// subscribers that want it.
    pub(super) fn mark_created(live: &LiveTask, event: Option<&Arc<StreamResponse>>, wanted: bool) {
        let mut st = live.state.lock();
        st.created = true;
        st.last_state = TaskState::Submitted;
        if let Some(event) = event.filter(|_| wanted) {
            live.publish(&mut st, Ok(Arc::clone(event)));
        }
    }

    pub(super) async fn create_locked(
        &self,
        live: &LiveTask,
        trigger: Option<&TaskUpdate>,
    ) -> A2aResult<()> {
        let Some(NewTask {
            task,
            inline_push,
            event,
            wanted,
        }) = self.new_task(live, trigger)?
        else {
            return Ok(());
        };
        self.write_create(live, task).await?;
        // The rarer paths are boxed: the future of every new task would
        // otherwise carry their state.
        let targets = match inline_push {
            Some(config) => Box::pin(self.save_inline_push(live, config)).await,
            None => None,
        };
        Self::mark_created(live, event.as_ref(), wanted);
        if let (Some(targets), Some(event)) = (targets, event) {
            Box::pin(self.push_event(live, &targets, &event)).await;
        }
        Ok(())
    }

    /// Creates the task (in `SUBMITTED`) if it does not exist yet.
    pub(super) async fn ensure_created_inner(&self, live: &LiveTask) -> A2aResult<()> {
        let _guard = live.order.lock().await;
        self.create_locked(live, None).await
    }

    /// Applies an update to the task (creating it first if needed) and
    /// publishes the matching event.
    pub(super) async fn emit_inner(
        &self,
        live: &LiveTask,
        update: Box<TaskUpdate>,
    ) -> A2aResult<()> {
        let _guard = live.order.lock().await;
        if !live.state.lock().created {
            // Once per task: boxed, so that the future of every event does
            // not carry the creation's state.
            if Box::pin(self.create_applying(live, &update)).await? {
                return Ok(());
            }
        }
        self.apply_locked(live, update).await
    }

    /// Creates the task (the caller holds `order`), with `update`, its
    /// first event, applied in the same write when that changes nothing
    /// anyone sees: a status that does not end the turn, in one process,
    /// on a store that does I/O, for a task neither held nor given an
    /// inline push config. The subscribers get the task (submitted) and
    /// then the update's event, as when they are written one after the
    /// other; only the store never holds the submitted task (nobody was
    /// told of it before the write). One commit fewer for a task that is
    /// streamed or answered before it ends. Returns whether `update` was
    /// applied; otherwise the task is created as usual and `update` is not.
    async fn create_applying(&self, live: &LiveTask, update: &TaskUpdate) -> A2aResult<bool> {
        let with_update = self.cluster.is_none()
            && self.store.immediate().is_none()
            && matches!(update, TaskUpdate::Status { status, .. } if !status.state().ends_turn())
            && {
                let st = live.state.lock();
                !st.hold && st.inline_push.is_none()
            };
        if !with_update {
            self.create_locked(live, Some(update)).await?;
            return Ok(false);
        }
        let Some(NewTask {
            mut task,
            event,
            wanted,
            ..
        }) = self.new_task(live, Some(update))?
        else {
            return Ok(false);
        };
        let mut publish = Self::event_of(live, update, false);
        crate::store::apply_update(&mut task, TaskUpdate::clone(update))?;
        let state = task.state();
        let generation = task.generation;
        self.write_create(live, task).await?;
        Self::mark_created(live, event.as_ref(), wanted);
        self.publish_applied(
            live,
            Updated::new(state).at_generation(generation),
            &mut publish,
        );
        Ok(true)
    }

    /// Applies an update to an existing task and publishes its event; the
    /// caller holds `order`. The event is only built when a subscriber
    /// wants it.
    // The update travels boxed: the futures of every event hold a pointer,
    // not three copies of it.
    pub(super) async fn apply_locked(
        &self,
        live: &LiveTask,
        update: Box<TaskUpdate>,
    ) -> A2aResult<()> {
        self.apply_locked_at(live, update).await.map(|_| ())
    }

    /// [`Self::apply_locked`], answering the task's generation after the
    /// update (0: the store did not say).
    pub(super) async fn apply_locked_at(
        &self,
        live: &LiveTask,
        update: Box<TaskUpdate>,
    ) -> A2aResult<i64> {
        let targets = match &*update {
            TaskUpdate::UserMessage(_) => None,
            _ => self.push_targets(live).await,
        };
        // Built before the update moves into the store; shared (and small
        // across the store's await) from the start.
        let mut publish = Self::event_of(live, &update, targets.is_some());
        let updated = self.write_update(live, update).await?;
        let generation = updated.generation;
        self.publish_applied(live, updated, &mut publish);
        if let (Some(targets), Some(event)) = (targets, publish.event()) {
            Box::pin(self.push_event(live, &targets, event)).await;
        }
        Ok(generation)
    }

    /// What an update publishes: its event when a subscriber (or the push
    /// sender) wants it.
    pub(super) fn event_of(live: &LiveTask, update: &TaskUpdate, pushed: bool) -> Publish {
        match update {
            TaskUpdate::UserMessage(_) => Publish::Nothing,
            _ if pushed => Self::event_for(live, None, update),
            _ => Self::event_for(live, Some(&live.state.lock()), update),
        }
    }

    /// [`Self::event_of`] with the live state of the task locked already
    /// (`None` when the push sender wants every event).
    pub(super) fn event_for(
        live: &LiveTask,
        st: Option<&LiveState>,
        update: &TaskUpdate,
    ) -> Publish {
        let event = match update {
            TaskUpdate::Status { status, metadata } => {
                let is_final = status.state().ends_turn();
                if let Some(st) = st {
                    if !st.wants(is_final) {
                        return Publish::Nothing;
                    }
                    if !st.streaming() {
                        return Publish::Settled;
                    }
                }
                StreamResponse::from(TaskStatusUpdateEvent {
                    generation: 0,
                    task_id: live.id.clone(),
                    context_id: live.context_id.clone(),
                    status: Some(status.clone()),
                    metadata: metadata.clone(),
                })
            }
            TaskUpdate::Artifact {
                artifact,
                append,
                last_chunk,
                metadata,
            } => {
                if st.is_some_and(|f| !f.wants(false)) {
                    return Publish::Nothing;
                }
                StreamResponse::from(TaskArtifactUpdateEvent {
                    generation: 0,
                    task_id: live.id.clone(),
                    context_id: live.context_id.clone(),
                    artifact: Some(artifact.clone()),
                    append: *append,
                    last_chunk: *last_chunk,
                    metadata: metadata.clone(),
                })
            }
            TaskUpdate::UserMessage(_) => return Publish::Nothing,
        };
        Publish::Event(Arc::new(event))
    }

    /// An update was applied: the task's new state, and its event to the
    /// subscribers. The task handed over by the store (when the update
    /// ended the turn) is kept for the request waiting for that (see
    /// [`Subscription::take_turn_task`]).
    pub(super) fn publish_applied(&self, live: &LiveTask, updated: Updated, publish: &mut Publish) {
        publish.stamp(updated.generation);
        let mut st = live.state.lock();
        st.last_state = updated.state;
        let waited_for = updated.task.is_some()
            && st
                .subscribers
                .iter()
                .any(|s| matches!(s, Subscriber::Final(Some(tx)) if !tx.is_closed()));
        st.turn_task = updated.task.filter(|_| waited_for);
        match publish {
            Publish::Event(event) => live.publish(&mut st, Ok(Arc::clone(event))),
            Publish::Settled => live.settle(&mut st, &self.settled),
            Publish::Nothing => {}
        }
    }

    /// Creates the task in the store (the caller holds `order`). A store
    /// that fails is retried, then the task fails (see `storage.rs`).
    pub(super) async fn write_create(&self, live: &LiveTask, task: Task) -> A2aResult<()> {
        let log = match self.store.immediate() {
            Some(store) => match Self::hold_create(live, task) {
                Some(task) => store.create_now(&live.owner, task).map(|()| None)?,
                None => return Ok(()),
            },
            None => {
                let Some(task) = Self::hold_create(live, task) else {
                    return Ok(());
                };
                Self::check_storage(live)?;
                let started = std::time::Instant::now();
                match self.store.create(&live.owner, task.clone()).await {
                    Ok(log) => log,
                    Err(e) => {
                        let mut again = || self.store.create(&live.owner, task.clone());
                        Box::pin(self.retry_write(
                            live,
                            started,
                            e,
                            OnFailure::FailTask,
                            &mut again,
                        ))
                        .await?
                    }
                }
            }
        };
        if let Some(span) = log {
            self.created_here(live, span);
        }
        Ok(())
    }

    /// Writes an update to the store (the caller holds `order`). With a
    /// bus, the other replicas' events that precede it are published first.
    pub(super) async fn write_update(
        &self,
        live: &LiveTask,
        update: Box<TaskUpdate>,
    ) -> A2aResult<Updated> {
        self.write_update_or(live, update, OnFailure::FailTask)
            .await
    }

    /// [`Self::write_update`], saying what a store that keeps failing
    /// does to the task (see `storage.rs`).
    pub(super) async fn write_update_or(
        &self,
        live: &LiveTask,
        update: Box<TaskUpdate>,
        on_failure: OnFailure,
    ) -> A2aResult<Updated> {
        let written = match self.store.immediate() {
            Some(store) => {
                let mut slot = Some(*update);
                match (Self::write_held_now(store, live, &mut slot), slot) {
                    (Some(held), _) => held,
                    (None, Some(update)) => store.update_now(&live.id, update),
                    (None, None) => Err(A2aError::internal("an update was lost")),
                }
            }
            None => match self.write_held(live, &update, on_failure).await {
                Some(held) => held,
                None => match self.settle_queued(live).await {
                    Ok(()) => self.write_stored_update(live, &update, on_failure).await,
                    Err(e) => Err(e),
                },
            },
        };
        self.after_write(live, &written).await;
        written
    }

    /// [`Self::write_update_or`] of a task in a store that does I/O.
    pub(super) async fn write_stored_update(
        &self,
        live: &LiveTask,
        update: &TaskUpdate,
        on_failure: OnFailure,
    ) -> A2aResult<Updated> {
        Self::check_storage(live)?;
        let started = std::time::Instant::now();
        match self.store.update(&live.id, TaskUpdate::clone(update)).await {
            Err(e) => {
                let mut again = || self.store.update(&live.id, TaskUpdate::clone(update));
                Box::pin(self.retry_write(live, started, e, on_failure, &mut again)).await
            }
            written => written,
        }
    }

    /// What a write the store answered means with a bus: the other
    /// replicas' events that precede it are published first.
    pub(super) async fn after_write(&self, live: &LiveTask, written: &A2aResult<Updated>) {
        match written {
            Ok(Updated {
                log: Some(span), ..
            }) => self.written_here(live, *span).await,
            Err(e) if e.kind == ErrorKind::UnsupportedOperation => self.refused_here(live).await,
            _ => {}
        }
    }

    /// [`Self::emit`] without a future, when nothing has to be awaited: a
    /// store with the [`ImmediateStore`] capability, one process (no bus),
    /// no push notifications, and nobody else holding the task's `order`.
    /// Otherwise `None`, and the update stays in `slot`.
    pub(super) fn emit_now(
        &self,
        live: &LiveTask,
        slot: &mut Option<TaskUpdate>,
    ) -> Option<A2aResult<()>> {
        let store = self
            .store
            .immediate()
            .filter(|_| self.cluster.is_none() && self.push.is_none())?;
        let Ok(_guard) = live.order.try_lock() else {
            return None;
        };
        slot.as_ref()?;
        Some(self.apply_now(store, live, slot))
    }

    /// The steps of [`Self::emit_inner`] and [`Self::apply_locked`], in the
    /// same order, answered at once: without push notifications there is no
    /// inline config to store and no event to hand over, and without a bus
    /// no other replica's events to publish first.
    /// (`slot` holds the update; it is taken from there where it is
    /// applied.)
    fn apply_now(
        &self,
        store: &dyn ImmediateStore,
        live: &LiveTask,
        slot: &mut Option<TaskUpdate>,
    ) -> A2aResult<()> {
        let Some(update) = slot.as_ref() else {
            return Err(A2aError::internal("an update was lost"));
        };
        if let Some(new) = self.new_task(live, Some(update))? {
            if let Some(task) = Self::hold_create(live, new.task) {
                store.create_now(&live.owner, task)?;
            }
            Self::mark_created(live, new.event.as_ref(), new.wanted);
        }
        let mut publish = Self::event_of(live, update, false);
        let updated = match Self::write_held_now(store, live, slot) {
            Some(held) => held?,
            None => match slot.take() {
                Some(update) => store.update_now(&live.id, update)?,
                None => return Err(A2aError::internal("an update was lost")),
            },
        };
        self.publish_applied(live, updated, &mut publish);
        Ok(())
    }

    /// The agent's plain-message answer.
    pub(super) async fn reply_inner(&self, live: &LiveTask, message: Message) -> A2aResult<()> {
        let _guard = live.order.lock().await;
        let mut st = live.state.lock();
        if st.created {
            return Err(A2aError::unsupported(
                "a task exists for this request; answer with status updates and artifacts instead of a message",
            ));
        }
        if st.replied {
            return Err(A2aError::unsupported(
                "the agent already answered this request with a message",
            ));
        }
        st.replied = true;
        live.publish(&mut st, Ok(Arc::new(StreamResponse::from(message))));
        Ok(())
    }

    /// Creates the task (in `SUBMITTED`) if it does not exist yet.
    pub(crate) fn ensure_created<'a>(&'a self, live: &'a LiveTask) -> BoxFuture<'a, A2aResult<()>> {
        Box::pin(self.ensure_created_inner(live))
    }

    /// Applies an update to the task (creating it first if needed) and
    /// publishes the matching event.
    /// Applies the update in `slot` (taken from it).
    pub(crate) fn emit<'a>(
        &'a self,
        live: &'a Arc<LiveTask>,
        slot: &mut Option<TaskUpdate>,
    ) -> Emit<'a> {
        if let Some(e) = slot.as_ref().and_then(|u| agent_content(u).err()) {
            slot.take();
            return Emit::Done(Some(Err(Box::new(e))));
        }
        if let Some(TaskUpdate::Artifact {
            artifact, append, ..
        }) = &*slot
            && let Err(e) = self.count_artifact(live, artifact, *append)
        {
            slot.take();
            return Emit::Done(Some(Err(Box::new(e))));
        }
        if let Some(done) = self.emit_now(live, slot) {
            return Emit::Done(Some(done.map_err(Box::new)));
        }
        match slot.take() {
            Some(update @ TaskUpdate::Artifact { .. }) if self.queues_chunks() => {
                Emit::Later(Box::pin(self.emit_queued(live, Box::new(update))))
            }
            Some(update) => Emit::Later(Box::pin(self.emit_inner(live, Box::new(update)))),
            None => Emit::Done(Some(Err(Box::new(A2aError::internal("an event was lost"))))),
        }
    }

    /// Counts an artifact update against the artifact's bound: refused
    /// when the artifact would grow past `max_artifact_bytes`.
    fn count_artifact(&self, live: &LiveTask, artifact: &Artifact, append: bool) -> A2aResult<()> {
        use prost::Message as _;
        let max = self.max_artifact_bytes;
        if max == usize::MAX {
            return Ok(());
        }
        let size = artifact.encoded_len();
        let mut st = live.state.lock();
        let entry = st
            .artifact_bytes
            .iter_mut()
            .find(|(id, _)| *id == artifact.artifact_id);
        let before = match (&entry, append) {
            (Some((_, n)), true) => *n,
            _ => 0,
        };
        let total = before.saturating_add(size);
        if total > max {
            return Err(A2aError::new(
                ErrorKind::InvalidAgentResponse,
                format!(
                    "artifact {:?} would grow to {total} bytes, over this server's limit of \
                     {max} bytes per artifact",
                    artifact.artifact_id
                ),
            )
            .with_metadata("artifactId", artifact.artifact_id.clone()));
        }
        match entry {
            Some((_, n)) => *n = total,
            None => st
                .artifact_bytes
                .push((artifact.artifact_id.clone(), total)),
        }
        Ok(())
    }

    /// The agent's plain-message answer.
    pub(crate) fn reply<'a>(
        &'a self,
        live: &'a LiveTask,
        message: Message,
    ) -> BoxFuture<'a, A2aResult<()>> {
        if let Err(e) = agent_message(&message, "message") {
            return Box::pin(std::future::ready(Err(e)));
        }
        Box::pin(self.reply_inner(live, message))
    }
}

/// Refuses an agent's update whose metadata or data nest deeper than
/// [`agentwire_types::limits::MAX_STRUCT_DEPTH`]: such content could be
/// stored but not read back (protobuf decoders stop first), nor sent to a
/// gRPC client. The agent gets the error; nothing is stored.
fn agent_content(update: &TaskUpdate) -> A2aResult<()> {
    use agentwire_types::limits::ContentCheck;
    let mut check = ContentCheck::nesting();
    let checked = match update {
        TaskUpdate::Status { status, metadata } => check
            .structure(metadata.as_ref(), "metadata")
            .and_then(|()| match status.message.as_deref() {
                Some(m) => check.message(m, "status.message"),
                None => Ok(()),
            }),
        TaskUpdate::Artifact {
            artifact, metadata, ..
        } => check
            .structure(metadata.as_ref(), "metadata")
            .and_then(|()| check.artifact(artifact, "artifact")),
        TaskUpdate::UserMessage(m) => check.message(m, "message"),
    };
    checked.map_err(refused)
}

/// [`agent_content`] for a reply message.
fn agent_message(message: &Message, field: &str) -> A2aResult<()> {
    agentwire_types::limits::ContentCheck::nesting()
        .message(message, field)
        .map_err(refused)
}

fn refused(e: agentwire_types::limits::LimitError) -> A2aError {
    A2aError::new(
        ErrorKind::InvalidAgentResponse,
        format!("the agent's update was refused: {e}"),
    )
    .with_metadata("field", e.field)
}
