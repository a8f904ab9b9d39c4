//! The task manager: the one place where events reach tasks.
//!
//! Every task that is being worked on or followed has a [`LiveTask`]: a lock
//! that orders its updates, its cancellation token, and the queues of its
//! subscribers. An update is applied to the store and then published to the
//! subscribers while the lock is held, so every subscriber sees the events
//! in the order they were applied, and a subscriber that joins takes its
//! snapshot under the same lock, so it misses nothing and sees nothing
//! twice. Publishing never waits: each subscriber has a bounded queue, and
//! one that falls too far behind is resynchronised from a fresh snapshot.
//! See `docs/concurrency.md`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentwire_types::{
    A2aError, A2aResult, ErrorKind, Message, Part, Role, StreamResponse, Task,
    TaskArtifactUpdateEvent, TaskPushNotificationConfig, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};
use dashmap::DashMap;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::push::PushSender;
use crate::store::{Owner, StoredTask, TaskStore, TaskUpdate};

// Several replicas (an event bus): see `cluster/replicas.rs`.
use crate::cluster::replicas as cluster;
// The lock that orders a task's updates.
mod order;

/// The push-notification configs of a task (shared, read on every event).
type PushTargets = Arc<[TaskPushNotificationConfig]>;

/// What subscribers receive: an event, or an error that ends the request
/// (boxed, to keep queue slots small).
pub(crate) type Item = Result<Arc<StreamResponse>, Box<A2aError>>;

/// What an applied update publishes.
enum Publish {
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
    fn event(&self) -> Option<&Arc<StreamResponse>> {
        match self {
            Publish::Event(e) => Some(e),
            _ => None,
        }
    }
}

pub(crate) enum Sub {
    /// Every event, in a bounded queue.
    Stream {
        tx: mpsc::Sender<Item>,
        overflow: Arc<AtomicBool>,
    },
    /// Only the item that ends the turn (a blocking `SendMessage` waiting
    /// for its answer): a message, an error, a terminal or interrupted
    /// state. Gone once delivered.
    Final(Option<oneshot::Sender<Item>>),
    /// A stream subscriber that fell behind: its queue was dropped and it
    /// will rejoin from a snapshot. It still counts as a follower, so the
    /// task's live state is not retired under it meanwhile.
    Lagging { overflow: Arc<AtomicBool> },
}

impl Sub {
    fn is_closed(&self) -> bool {
        match self {
            Sub::Stream { tx, .. } => tx.is_closed(),
            Sub::Final(Some(tx)) => tx.is_closed(),
            Sub::Final(None) => true,
            // Gone when the subscription holding the other handle is.
            Sub::Lagging { overflow } => Arc::strong_count(overflow) == 1,
        }
    }
}

pub(crate) struct Flags {
    /// The task exists in the store.
    pub(crate) created: bool,
    /// The agent answered with a plain message (no task will exist).
    pub(crate) replied: bool,
    /// Executor runs in progress.
    pub(crate) running: u32,
    /// Removed from the registry; attach to a fresh one instead.
    pub(crate) retired: bool,
    /// Last known state.
    pub(crate) state: TaskState,
    /// The user message that starts a new task's history.
    pub(crate) first_message: Option<Message>,
    /// The push config given inline with the message that creates the
    /// task, stored when the task is.
    pub(crate) inline_push: Option<TaskPushNotificationConfig>,
    /// The task's push configs as last read from the store (`None`: not
    /// read yet, or changed since).
    pub(crate) push_targets: Option<PushTargets>,
    pub(crate) subs: Vec<Sub>,
    /// Several replicas: where the subscribers are in the event log.
    pub(crate) remote: cluster::Remote,
    /// The task as the last update that ended the turn left it, while a
    /// request waiting for the end of the turn has not taken it: a terminal
    /// task is packed in the in-memory store, and this spares the request
    /// decoding it (or any store read).
    pub(crate) turn_task: Option<Arc<Task>>,
}

impl Flags {
    /// Whether a stream subscriber is there (it wants every event).
    fn streaming(&self) -> bool {
        self.subs.iter().any(|s| matches!(s, Sub::Stream { .. }))
    }

    /// Whether any subscriber wants an event (final: it ends the turn).
    fn wants(&self, is_final: bool) -> bool {
        self.subs.iter().any(|s| match s {
            Sub::Stream { .. } => true,
            Sub::Final(tx) => is_final && tx.is_some(),
            Sub::Lagging { .. } => false,
        })
    }
}

/// Runtime state of a task that is being worked on or followed.
pub(crate) struct LiveTask {
    pub(crate) id: String,
    pub(crate) context_id: String,
    pub(crate) owner: Owner,
    pub(crate) cancel: CancellationToken,
    pub(crate) order: order::OrderLock,
    pub(crate) flags: Mutex<Flags>,
}

impl LiveTask {
    /// Tells the requests waiting for the end of the turn that it ended
    /// (an event without payload: they read the task).
    fn settle(&self, flags: &mut Flags, signal: &Arc<StreamResponse>) {
        flags.subs.retain_mut(|s| match s {
            Sub::Final(slot) => {
                if let Some(tx) = slot.take() {
                    let _ = tx.send(Ok(Arc::clone(signal)));
                }
                false
            }
            _ => true,
        });
    }

    pub(crate) fn publish(&self, flags: &mut Flags, item: Item) {
        let is_final = item.as_ref().map_or(true, |ev| ev.ends_stream());
        flags.subs.retain_mut(|s| {
            let lagging = match s {
                Sub::Stream { tx, overflow } => match tx.try_send(item.clone()) {
                    Ok(()) => return true,
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        overflow.store(true, Ordering::Release);
                        Arc::clone(overflow)
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => return false,
                },
                Sub::Final(slot) if is_final => {
                    if let Some(tx) = slot.take() {
                        let _ = tx.send(item.clone());
                    }
                    return false;
                }
                Sub::Final(slot) => return slot.as_ref().is_some_and(|tx| !tx.is_closed()),
                Sub::Lagging { .. } => return true,
            };
            // Its queue goes (the subscriber drains it, then rejoins from a
            // snapshot); a placeholder keeps it counted as a follower.
            *s = Sub::Lagging { overflow: lagging };
            true
        });
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

/// Applies events to tasks and fans them out to subscribers.
pub(crate) struct TaskManager {
    pub(crate) store: Arc<dyn TaskStore>,
    pub(crate) live: DashMap<String, Arc<LiveTask>, ahash::RandomState>,
    queue_capacity: usize,
    pub(crate) push: Option<PushSender>,
    /// Several replicas: the event bus (set by `with_bus`).
    pub(crate) cluster: Option<cluster::Cluster>,
    /// The signal of [`Publish::Settled`] (shared: no event is built).
    settled: Arc<StreamResponse>,
}

impl TaskManager {
    pub(crate) fn new(
        store: Arc<dyn TaskStore>,
        queue_capacity: usize,
        push: Option<PushSender>,
    ) -> Self {
        Self {
            store,
            live: DashMap::default(),
            queue_capacity: queue_capacity.max(2),
            push,
            cluster: None,
            settled: Arc::new(StreamResponse::default()),
        }
    }

    /// A task as stored (the in-memory store answers without a future).
    pub(crate) async fn get_task(
        &self,
        id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<StoredTask>> {
        match self.store.as_memory() {
            Some(memory) => memory.get_now(id, history_length),
            None => self.store.get(id, history_length).await,
        }
    }

    /// A task as stored: shared with the store when it is in memory and
    /// its whole history is asked for, a copy of its own otherwise.
    pub(crate) async fn shared_task(
        &self,
        id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<Arc<Task>>> {
        Ok(match self.store.as_memory() {
            Some(memory) if history_length.is_none() => memory.get_shared(id)?,
            Some(memory) => memory
                .get_now(id, history_length)?
                .map(|s| Arc::new(s.task)),
            None => (self.store.get(id, history_length).await?).map(|s| Arc::new(s.task)),
        })
    }

    /// The push configs of a task, read from the store once per live state
    /// (the caller holds `order`). `None` when push is off or the task has
    /// no config.
    async fn push_targets(&self, live: &LiveTask) -> Option<PushTargets> {
        self.push.as_ref()?;
        let cached = live.flags.lock().push_targets.clone();
        let targets = match cached {
            Some(t) => t,
            None => match self.store.list_push_configs(&live.id).await {
                Ok(list) => {
                    let t: PushTargets = list.into();
                    live.flags.lock().push_targets = Some(Arc::clone(&t));
                    t
                }
                Err(e) => {
                    tracing::warn!(task = %live.id, error = %e, "push: cannot read the task's configs");
                    return None;
                }
            },
        };
        (!targets.is_empty()).then_some(targets)
    }

    /// Hands an applied event to the push sender (the caller holds
    /// `order`, so notifications are enqueued in event order).
    async fn push_event(&self, live: &LiveTask, targets: &PushTargets, event: &StreamResponse) {
        if let Some(push) = &self.push {
            push.enqueue(&live.id, targets, event).await;
        }
    }

    /// The push configs of a task changed in the store: forget the cached
    /// copy (under `order`, so no event in flight keeps a stale one).
    pub(crate) async fn push_configs_changed(&self, task_id: &str) {
        let live = self.live.get(task_id).map(|l| Arc::clone(l.value()));
        if let Some(live) = live {
            let _guard = live.order.lock().await;
            live.flags.lock().push_targets = None;
        }
    }

    /// Registers the live state of a task that does not exist yet, with the
    /// request's subscription and one executor run accounted for.
    pub(crate) fn start_new(
        self: &Arc<Self>,
        id: String,
        context_id: String,
        owner: Owner,
        first_message: Message,
        inline_push: Option<TaskPushNotificationConfig>,
        finals_only: bool,
    ) -> (Arc<LiveTask>, Subscription) {
        let live = Arc::new(LiveTask {
            id: id.clone(),
            context_id,
            owner,
            cancel: CancellationToken::new(),
            order: order::OrderLock::default(),
            flags: Mutex::new(Flags {
                created: false,
                replied: false,
                running: 1,
                retired: false,
                state: TaskState::Unspecified,
                first_message: Some(first_message),
                inline_push,
                // A new task has no config in the store yet (and without
                // push, none is ever read).
                push_targets: self.push.as_ref().map(|_| Arc::from(Vec::new())),
                subs: Vec::with_capacity(1),
                remote: cluster::Remote::new_task(),
                turn_task: None,
            }),
        });
        let sub = {
            let mut flags = live.flags.lock();
            self.subscribe_locked(&live, &mut flags, finals_only)
        };
        self.live.insert(id, Arc::clone(&live));
        (live, sub)
    }

    fn subscribe_locked(
        self: &Arc<Self>,
        live: &Arc<LiveTask>,
        flags: &mut Flags,
        finals_only: bool,
    ) -> Subscription {
        let rx = if finals_only {
            let (tx, rx) = oneshot::channel();
            flags.subs.push(Sub::Final(Some(tx)));
            Rx::Final(Some(rx))
        } else {
            let (tx, rx) = mpsc::channel(self.queue_capacity);
            let overflow = Arc::new(AtomicBool::new(false));
            flags.subs.push(Sub::Stream {
                tx,
                overflow: Arc::clone(&overflow),
            });
            Rx::Stream { rx, overflow }
        };
        Subscription {
            rx,
            live: Arc::clone(live),
            manager: Arc::clone(self),
        }
    }

    /// The live state of an existing task, created if needed, with `f`
    /// applied to it atomically (so it cannot be retired in between).
    fn attach<R>(
        self: &Arc<Self>,
        stored: &StoredTask,
        f: impl Fn(&Arc<Self>, &Arc<LiveTask>, &mut Flags) -> R,
    ) -> (Arc<LiveTask>, R) {
        loop {
            let live = self
                .live
                .entry(stored.task.id.clone())
                .or_insert_with(|| {
                    Arc::new(LiveTask {
                        id: stored.task.id.clone(),
                        context_id: stored.task.context_id.clone(),
                        owner: stored.owner.clone(),
                        cancel: CancellationToken::new(),
                        order: order::OrderLock::default(),
                        flags: Mutex::new(Flags {
                            created: true,
                            replied: false,
                            running: 0,
                            retired: false,
                            state: stored.task.state(),
                            first_message: None,
                            inline_push: None,
                            push_targets: None,
                            subs: Vec::new(),
                            remote: cluster::Remote::default(),
                            turn_task: None,
                        }),
                    })
                })
                .clone();
            let mut flags = live.flags.lock();
            if flags.retired {
                continue;
            }
            let r = f(self, &live, &mut flags);
            drop(flags);
            return (live, r);
        }
    }

    /// Subscribes to an existing task: returns its current snapshot and a
    /// subscription to everything after it.
    pub(crate) async fn subscribe(
        self: &Arc<Self>,
        stored: &StoredTask,
        history_length: Option<usize>,
    ) -> A2aResult<(Task, Subscription)> {
        loop {
            let (live, ()) = self.attach(stored, |_, _, _| ());
            let guard = live.order.lock().await;
            // The snapshot first, then the subscriber joins (with a bus,
            // reading it may first deliver other replicas' events to the
            // subscribers already there).
            let snapshot = match self.snapshot_locked(&live, history_length).await {
                Ok(Some(s)) => s,
                Ok(None) => {
                    drop(guard);
                    self.release(&live);
                    return Err(A2aError::task_not_found(&live.id));
                }
                Err(e) => {
                    drop(guard);
                    self.release(&live);
                    return Err(e);
                }
            };
            let sub = {
                let mut flags = live.flags.lock();
                // Retired between attach and lock: try again on a fresh one.
                (!flags.retired).then(|| self.subscribe_locked(&live, &mut flags, false))
            };
            let Some(sub) = sub else {
                drop(guard);
                continue;
            };
            drop(guard);
            return Ok((snapshot.task, sub));
        }
    }

    /// Prepares an existing task for a continuing message: records the
    /// message in its history and counts one executor run.
    pub(crate) async fn continue_task(
        self: &Arc<Self>,
        stored: &StoredTask,
        message: Message,
        finals_only: bool,
    ) -> A2aResult<(Arc<LiveTask>, Subscription)> {
        let (live, ()) = self.attach(stored, |_, _, flags| flags.running += 1);
        let guard = live.order.lock().await;
        let result = async {
            let (state, _) = self
                .write_update(&live, Box::new(TaskUpdate::UserMessage(message)))
                .await?;
            // A stream continuing a task starts with the task as it is now.
            let snapshot = if finals_only {
                None
            } else {
                let task = self.snapshot_locked(&live, None).await?.map(|s| s.task);
                task.map(|t| Arc::new(StreamResponse::from(t)))
            };
            Ok::<_, A2aError>((state, snapshot))
        }
        .await;
        let outcome = match result {
            Ok((state, snapshot)) => {
                let mut flags = live.flags.lock();
                flags.state = state;
                let sub = self.subscribe_locked(&live, &mut flags, finals_only);
                if let (Some(snapshot), Some(Sub::Stream { tx, .. })) =
                    (snapshot, flags.subs.last())
                {
                    let _ = tx.try_send(Ok(snapshot));
                }
                Ok((Arc::clone(&live), sub))
            }
            Err(e) => {
                live.flags.lock().running -= 1;
                Err(e)
            }
        };
        drop(guard);
        if outcome.is_err() {
            self.release(&live);
        }
        outcome
    }

    /// The live state of an existing task for cancellation.
    pub(crate) fn attach_for_cancel(self: &Arc<Self>, stored: &StoredTask) -> Arc<LiveTask> {
        let (live, ()) = self.attach(stored, |_, _, flags| flags.running += 1);
        live
    }

    /// Fails a task whose agent is gone (the process that ran it died):
    /// applies `TASK_STATE_FAILED` with a message saying why, unless the
    /// task reached another state meanwhile. Returns whether it was failed.
    pub(crate) async fn fail_orphan(self: &Arc<Self>, stored: &StoredTask, reason: &str) -> bool {
        let (live, ()) = self.attach(stored, |_, _, flags| flags.running += 1);
        let guard = live.order.lock().await;
        let running_here = live.flags.lock().running > 1;
        let state = live.flags.lock().state;
        let failed = if running_here || !matches!(state, TaskState::Submitted | TaskState::Working)
        {
            false
        } else {
            let message = Message {
                message_id: agentwire_types::new_id(),
                context_id: live.context_id.clone(),
                task_id: live.id.clone(),
                role: Role::Agent as i32,
                parts: vec![Part::text(reason)],
                ..Default::default()
            };
            let update = TaskUpdate::Status {
                status: TaskStatus::new(TaskState::Failed).with_message(message),
                metadata: None,
            };
            match self.apply_locked(&live, Box::new(update)).await {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!(task = %live.id, error = %e, "could not fail an orphaned task");
                    false
                }
            }
        };
        live.flags.lock().running -= 1;
        drop(guard);
        self.release(&live);
        failed
    }

    /// Ends a cancellation started with [`Self::attach_for_cancel`].
    pub(crate) fn end_cancel(&self, live: &Arc<LiveTask>) {
        live.flags.lock().running -= 1;
        self.release(live);
    }

    /// The task to create for a live task not created yet (`None` when it
    /// exists), with the inline push config to store with it; the caller
    /// holds `order`. The task is submitted when the first event that
    /// needs it comes: at that event's time, when it has one (now
    /// otherwise).
    fn first_task(
        &self,
        live: &LiveTask,
        trigger: Option<&TaskUpdate>,
    ) -> A2aResult<Option<(Task, Option<TaskPushNotificationConfig>)>> {
        let (first, inline_push) = {
            let mut flags = live.flags.lock();
            if flags.created {
                return Ok(None);
            }
            if flags.replied {
                return Err(A2aError::unsupported(
                    "the agent already answered this request with a message; no task can follow",
                ));
            }
            (flags.first_message.take(), flags.inline_push.take())
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
            id: live.id.clone(),
            context_id: live.context_id.clone(),
            status: Some(status),
            artifacts: Vec::new(),
            history: first.into_iter().collect(),
            metadata: None,
        };
        Ok(Some((task, inline_push)))
    }

    /// The task exists now: its first event (the task) goes to the
    /// subscribers that want it.
    fn mark_created(live: &LiveTask, event: Option<&Arc<StreamResponse>>, wanted: bool) {
        let mut flags = live.flags.lock();
        flags.created = true;
        flags.state = TaskState::Submitted;
        if let Some(event) = event.filter(|_| wanted) {
            live.publish(&mut flags, Ok(Arc::clone(event)));
        }
    }

    async fn create_locked(&self, live: &LiveTask, trigger: Option<&TaskUpdate>) -> A2aResult<()> {
        let Some((task, inline_push)) = self.first_task(live, trigger)? else {
            return Ok(());
        };
        let wanted = live.flags.lock().wants(false);
        // The event is built before the task moves into the store (and
        // shared: this future holds a pointer across the store's await).
        let event =
            (wanted || inline_push.is_some()).then(|| Arc::new(StreamResponse::from(task.clone())));
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

    /// Stores the inline push config of a task just created; returns the
    /// task's push targets.
    async fn save_inline_push(
        &self,
        live: &LiveTask,
        mut config: TaskPushNotificationConfig,
    ) -> Option<PushTargets> {
        config.task_id.clone_from(&live.id);
        if let Err(e) = self.store.put_push_config(&config).await {
            tracing::warn!(task = %live.id, error = %e, "push: cannot store the inline config");
            return None;
        }
        if let Some(push) = &self.push {
            if let Err(e) = push.config_saved(&config).await {
                tracing::warn!(task = %live.id, error = %e, "push: cannot register the inline config");
            }
        }
        let targets: PushTargets = Arc::from(vec![config]);
        live.flags.lock().push_targets = Some(Arc::clone(&targets));
        Some(targets)
    }

    /// Creates the task (in `SUBMITTED`) if it does not exist yet.
    async fn ensure_created_inner(&self, live: &LiveTask) -> A2aResult<()> {
        let _guard = live.order.lock().await;
        self.create_locked(live, None).await
    }

    /// Applies an update to the task (creating it first if needed) and
    /// publishes the matching event.
    async fn emit_inner(&self, live: &LiveTask, update: Box<TaskUpdate>) -> A2aResult<()> {
        let _guard = live.order.lock().await;
        if !live.flags.lock().created {
            // Once per task: boxed, so that the future of every event does
            // not carry the creation's state.
            Box::pin(self.create_locked(live, Some(&update))).await?;
        }
        self.apply_locked(live, update).await
    }

    /// Applies an update to an existing task and publishes its event; the
    /// caller holds `order`. The event is only built when a subscriber
    /// wants it.
    // The update travels boxed: the futures of every event hold a pointer,
    // not three copies of it.
    async fn apply_locked(&self, live: &LiveTask, update: Box<TaskUpdate>) -> A2aResult<()> {
        let targets = match &*update {
            TaskUpdate::UserMessage(_) => None,
            _ => self.push_targets(live).await,
        };
        // Built before the update moves into the store; shared (and small
        // across the store's await) from the start.
        let publish = Self::event_of(live, &update, targets.is_some());
        let (state, task) = self.write_update(live, update).await?;
        self.publish_applied(live, state, &publish, task);
        if let (Some(targets), Some(event)) = (targets, publish.event()) {
            Box::pin(self.push_event(live, &targets, event)).await;
        }
        Ok(())
    }

    /// What an update publishes: its event when a subscriber (or the push
    /// sender) wants it.
    fn event_of(live: &LiveTask, update: &TaskUpdate, pushed: bool) -> Publish {
        match update {
            TaskUpdate::UserMessage(_) => Publish::Nothing,
            _ if pushed => Self::event_for(live, None, update),
            _ => Self::event_for(live, Some(&live.flags.lock()), update),
        }
    }

    /// [`Self::event_of`] with the flags of the task locked already
    /// (`None` when the push sender wants every event).
    fn event_for(live: &LiveTask, flags: Option<&Flags>, update: &TaskUpdate) -> Publish {
        let event = match update {
            TaskUpdate::Status { status, metadata } => {
                let is_final = status.state().ends_turn();
                if let Some(flags) = flags {
                    if !flags.wants(is_final) {
                        return Publish::Nothing;
                    }
                    if !flags.streaming() {
                        return Publish::Settled;
                    }
                }
                StreamResponse::from(TaskStatusUpdateEvent {
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
                if flags.is_some_and(|f| !f.wants(false)) {
                    return Publish::Nothing;
                }
                StreamResponse::from(TaskArtifactUpdateEvent {
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
    /// subscribers. `task` is the task when the update ended the turn (see
    /// [`Subscription::take_turn_task`]).
    fn publish_applied(
        &self,
        live: &LiveTask,
        state: TaskState,
        publish: &Publish,
        task: Option<Arc<Task>>,
    ) {
        self.publish_applied_locked(live, &mut live.flags.lock(), state, publish, task);
    }

    /// [`Self::publish_applied`] with the flags of the task locked already.
    fn publish_applied_locked(
        &self,
        live: &LiveTask,
        flags: &mut Flags,
        state: TaskState,
        publish: &Publish,
        task: Option<Arc<Task>>,
    ) {
        flags.state = state;
        let waited_for = task.is_some()
            && flags
                .subs
                .iter()
                .any(|s| matches!(s, Sub::Final(Some(tx)) if !tx.is_closed()));
        flags.turn_task = task.filter(|_| waited_for);
        match publish {
            Publish::Event(event) => live.publish(flags, Ok(Arc::clone(event))),
            Publish::Settled => live.settle(flags, &self.settled),
            Publish::Nothing => {}
        }
    }

    /// [`Self::emit`] without a future, when nothing has to be awaited: one
    /// process (no bus), the in-memory store, no push notifications, and
    /// nobody else holding the task's `order`. Otherwise `None`, and the
    /// update stays in `slot`.
    fn emit_now(&self, live: &LiveTask, slot: &mut Option<TaskUpdate>) -> Option<A2aResult<()>> {
        let memory = match self.store.as_memory() {
            Some(memory) if self.cluster.is_none() && self.push.is_none() => memory,
            _ => return None,
        };
        let Ok(_guard) = live.order.try_lock() else {
            return None;
        };
        let update = slot.take()?;
        let mut flags = live.flags.lock();
        if !flags.created {
            drop(flags);
            // Without push there is no inline config to store.
            match self.first_task(live, Some(&update)) {
                Err(e) => return Some(Err(e)),
                Ok(None) => {}
                Ok(Some((task, _))) => {
                    let wanted = live.flags.lock().wants(false);
                    let event = wanted.then(|| Arc::new(StreamResponse::from(task.clone())));
                    if let Err(e) = memory.create_now(&live.owner, task) {
                        return Some(Err(e));
                    }
                    Self::mark_created(live, event.as_ref(), wanted);
                }
            }
            flags = live.flags.lock();
        }
        // The flags stay locked through the store's update (which takes
        // the task's shard lock, never the other way round): one lock for
        // deciding the event and publishing it.
        let publish = Self::event_for(live, Some(&flags), &update);
        Some(memory.update_now(&live.id, update).map(|(state, task)| {
            self.publish_applied_locked(live, &mut flags, state, &publish, task);
        }))
    }

    /// The agent's plain-message answer.
    async fn reply_inner(&self, live: &LiveTask, message: Message) -> A2aResult<()> {
        let _guard = live.order.lock().await;
        let mut flags = live.flags.lock();
        if flags.created {
            return Err(A2aError::unsupported(
                "a task exists for this request; answer with status updates and artifacts instead of a message",
            ));
        }
        if flags.replied {
            return Err(A2aError::unsupported(
                "the agent already answered this request with a message",
            ));
        }
        flags.replied = true;
        live.publish(&mut flags, Ok(Arc::new(StreamResponse::from(message))));
        Ok(())
    }

    /// Called when an executor run ends: fails a task the agent left
    /// unfinished, turns an early error into the request's answer, and
    /// releases the live state. Done at once in the usual case; otherwise
    /// the returned future does it.
    pub(crate) fn finish_run<'a>(
        &'a self,
        live: &'a LiveTask,
        outcome: Result<A2aResult<()>, String>,
    ) -> Option<BoxFuture<'a, ()>> {
        if matches!(outcome, Ok(Ok(()))) && self.finish_settled_now(live) {
            return None;
        }
        Some(Box::pin(self.finish_run_inner(live, outcome)))
    }

    /// The usual end of a run, without a future: the agent returned after
    /// its turn ended (a final or interrupted state, or its message), the
    /// task was not canceled meanwhile, and nobody else holds `order`.
    /// Returns whether the run is finished; otherwise nothing changed.
    fn finish_settled_now(&self, live: &LiveTask) -> bool {
        let Ok(guard) = live.order.try_lock() else {
            return false;
        };
        {
            let mut flags = live.flags.lock();
            let settled = if flags.created {
                flags.state.ends_turn()
                    && (flags.state.is_terminal() || !live.cancel.is_cancelled())
            } else {
                flags.replied
            };
            if !settled {
                return false;
            }
            flags.running -= 1;
        }
        drop(guard);
        self.release(live);
        true
    }

    async fn finish_run_inner(&self, live: &LiveTask, outcome: Result<A2aResult<()>, String>) {
        let guard = live.order.lock().await;
        let (created, replied, state) = {
            let f = live.flags.lock();
            (f.created, f.replied, f.state)
        };
        if created && !state.is_terminal() && live.cancel.is_cancelled() {
            // The agent stopped because the task was canceled: whatever it
            // returned, the task ends canceled (CancelTask may be about to
            // record the same; the state machine keeps the first).
            let update = TaskUpdate::Status {
                status: TaskStatus::new(TaskState::Canceled),
                metadata: None,
            };
            if let Err(e) = self.apply_locked(live, Box::new(update)).await {
                tracing::debug!(task = %live.id, error = %e, "cancel already recorded");
            }
            live.flags.lock().running -= 1;
            drop(guard);
            self.release(live);
            return;
        }
        let problem = match outcome {
            Ok(Ok(())) if created && !state.ends_turn() => Some(A2aError::new(
                ErrorKind::InvalidAgentResponse,
                "the agent stopped before the task reached a final or interrupted state",
            )),
            Ok(Ok(())) if !created && !replied => Some(A2aError::new(
                ErrorKind::InvalidAgentResponse,
                "the agent returned without answering (no message and no task)",
            )),
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(panic) => Some(A2aError::internal(format!(
                "the agent failed unexpectedly: {panic}"
            ))),
        };
        if let Some(err) = problem {
            if created && !state.ends_turn() {
                let message = Message {
                    message_id: agentwire_types::new_id(),
                    context_id: live.context_id.clone(),
                    task_id: live.id.clone(),
                    role: Role::Agent as i32,
                    parts: vec![Part::text(err.message.clone())],
                    ..Default::default()
                };
                let status = TaskStatus::new(TaskState::Failed).with_message(message);
                let update = TaskUpdate::Status {
                    status,
                    metadata: None,
                };
                if let Err(e) = self.apply_locked(live, Box::new(update)).await {
                    tracing::warn!(task = %live.id, error = %e, "could not mark task failed");
                }
            } else if !created && !replied {
                let mut flags = live.flags.lock();
                live.publish(&mut flags, Err(Box::new(err)));
            } else {
                tracing::debug!(task = %live.id, error = %err, "agent error after the task settled");
            }
        }
        live.flags.lock().running -= 1;
        drop(guard);
        self.release(live);
    }

    /// Retires the live state of a task nobody works on or follows.
    pub(crate) fn release(&self, live: &LiveTask) {
        let mut flags = live.flags.lock();
        flags.subs.retain(|s| !s.is_closed());
        if flags.running == 0 && flags.subs.is_empty() && !flags.retired {
            flags.retired = true;
            drop(flags);
            self.live
                .remove_if(&live.id, |_, v| std::ptr::eq(Arc::as_ptr(v), live));
        }
    }

    // The agent-facing operations return boxed futures: an agent's own
    // future then holds a pointer instead of the whole update path, which
    // keeps long-running agents (and their held streams) small.

    /// Creates the task (in `SUBMITTED`) if it does not exist yet.
    pub(crate) fn ensure_created<'a>(&'a self, live: &'a LiveTask) -> BoxFuture<'a, A2aResult<()>> {
        Box::pin(self.ensure_created_inner(live))
    }

    /// Applies an update to the task (creating it first if needed) and
    /// publishes the matching event.
    pub(crate) fn emit<'a>(&'a self, live: &'a LiveTask, update: TaskUpdate) -> Emit<'a> {
        let mut slot = Some(update);
        if let Some(done) = self.emit_now(live, &mut slot) {
            return Emit::Done(Some(done.map_err(Box::new)));
        }
        match slot {
            Some(update) => Emit::Later(Box::pin(self.emit_inner(live, Box::new(update)))),
            None => Emit::Done(Some(Err(Box::new(A2aError::internal("an event was lost"))))),
        }
    }

    /// The agent's plain-message answer.
    pub(crate) fn reply<'a>(
        &'a self,
        live: &'a LiveTask,
        message: Message,
    ) -> BoxFuture<'a, A2aResult<()>> {
        Box::pin(self.reply_inner(live, message))
    }

    /// How many tasks have live state (for tests and metrics).
    #[allow(dead_code)]
    pub(crate) fn live_count(&self) -> usize {
        self.live.len()
    }
}

enum Rx {
    Stream {
        rx: mpsc::Receiver<Item>,
        overflow: Arc<AtomicBool>,
    },
    Final(Option<oneshot::Receiver<Item>>),
}

/// A subscriber's queue of events for one task.
pub(crate) struct Subscription {
    rx: Rx,
    live: Arc<LiveTask>,
    manager: Arc<TaskManager>,
}

impl Subscription {
    /// The next event. When the subscriber fell too far behind, its queue is
    /// replaced and the current task snapshot is returned instead of the
    /// events it missed.
    pub(crate) async fn recv(&mut self) -> Option<Item> {
        let overflowed = match &mut self.rx {
            Rx::Final(slot) => {
                let rx = slot.take()?;
                return rx.await.ok();
            }
            Rx::Stream { rx, overflow } => {
                if let Some(item) = rx.recv().await {
                    return Some(item);
                }
                overflow.load(Ordering::Acquire)
            }
        };
        if !overflowed {
            return None;
        }
        let guard = self.live.order.lock().await;
        // The snapshot first, then the new queue (see `subscribe`).
        let snapshot = self.manager.snapshot_locked(&self.live, None).await;
        let (tx, rx) = mpsc::channel(self.manager.queue_capacity);
        let overflow = Arc::new(AtomicBool::new(false));
        {
            let old = match &self.rx {
                Rx::Stream { overflow, .. } => Some(Arc::clone(overflow)),
                Rx::Final(_) => None,
            };
            let mut flags = self.live.flags.lock();
            // The placeholder kept while lagging gives way to the new queue.
            flags.subs.retain(|s| match (s, &old) {
                (Sub::Lagging { overflow }, Some(old)) => !Arc::ptr_eq(overflow, old),
                _ => true,
            });
            flags.subs.push(Sub::Stream {
                tx,
                overflow: Arc::clone(&overflow),
            });
        }
        self.rx = Rx::Stream { rx, overflow };
        drop(guard);
        tracing::debug!(task = %self.live.id, "slow subscriber resynchronised from a snapshot");
        Some(match snapshot {
            Ok(Some(s)) => Ok(Arc::new(StreamResponse::from(s.task))),
            Ok(None) => Err(Box::new(A2aError::task_not_found(&self.live.id))),
            Err(e) => Err(Box::new(e)),
        })
    }

    /// Polls for the next item, without the resynchronisation of
    /// [`Self::recv`] (for subscribers that only wait for the end of a
    /// turn).
    pub(crate) fn poll_recv(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Item>> {
        use std::future::Future;
        match &mut self.rx {
            Rx::Stream { rx, .. } => rx.poll_recv(cx),
            Rx::Final(None) => std::task::Poll::Ready(None),
            Rx::Final(Some(rx)) => {
                let r = std::pin::Pin::new(rx).poll(cx).map(Result::ok);
                if r.is_ready() {
                    self.rx = Rx::Final(None);
                }
                r
            }
        }
    }

    /// The task this subscription follows.
    pub(crate) fn task_id(&self) -> &str {
        &self.live.id
    }

    /// The task as the turn ended, when the store handed it over with the
    /// update that ended it (the in-memory store does) and no other
    /// waiting request took it first. Read the store otherwise.
    pub(crate) fn take_turn_task(&self) -> Option<Arc<Task>> {
        self.live.flags.lock().turn_task.take()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        match &mut self.rx {
            Rx::Stream { rx, .. } => rx.close(),
            Rx::Final(slot) => drop(slot.take()),
        }
        self.manager.release(&self.live);
    }
}
