//! Writes held back: a task whose turn may end inside the request that
//! started it is written once, when the turn ends, instead of once per
//! update (submitted, working, each artifact, completed).
//!
//! Only when nobody can have been told about the task before its turn
//! ends: a blocking `SendMessage` (no stream, no `returnImmediately`)
//! starting a new task, without an inline push config. A store that does
//! I/O saves its round trips (on PostgreSQL, three of a SendMessage's four
//! writes with their events in the replicas' log); the in-memory store
//! saves re-indexing the task for `ListTasks` at every status change. Its
//! caller is answered only after that one write is committed, so nothing
//! is acknowledged before it is durable; a crash before it loses a task
//! nobody was told about (the request fails with the connection).
//!
//! Meanwhile the task lives in its [`LiveState`](super::LiveState) as the
//! store would hold it (`held`, every update applied with
//! [`apply_update`]). Anyone who asks this process for it by id anyway
//! (the agent may have said its id: `GetTask`, `CancelTask`,
//! `SubscribeToTask`, a push config, a repeated message id) first has it
//! written as it is ([`TaskManager::stored_or_revealed`]); from then on its
//! writes are the usual ones. A task is held for [`HOLD_LIMIT`] at most: a
//! turn that lasts longer has its task written then ([`sweep_held`]), so
//! that a long task is listed, can be canceled and followed from any
//! replica, and is failed by the others if its replica dies, as any task
//! is.
//!
//! What is not seen while a task is held (at most [`HOLD_LIMIT`], and only
//! while its turn goes on): `ListTasks` does not show it, on any replica;
//! another replica sharing the store (which cannot see this process's
//! memory) answers a request about it by id with `TaskNotFound`, as it
//! would for a task whose creation is not committed yet, and so does the
//! duplicate detection of message ids there, which is per process anyway;
//! the replicas' event log has nothing of it, and nothing can follow it
//! (following starts from a stored task). If its replica stops before the
//! task is written, nothing of it is left to recover: its caller got no
//! answer.
//!
//! A held write that the store refuses is retried and, past the budget,
//! fails the task like any other write (`storage.rs`); the failure is then
//! recorded by creating the task failed, without the artifacts the store
//! refused ([`failed_record`]).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use agentwire_types::{A2aResult, Message, Task, TaskState, TaskStatus};
use tokio::time::Instant;

use super::TaskManager;
use super::live::LiveTask;
use super::storage::OnFailure;
use crate::store::{ImmediateStore, Owner, StoredTask, TaskUpdate, Updated, apply_update};

/// The longest a task is held: a turn that goes on longer has its task
/// written then (see the module's documentation).
pub(crate) const HOLD_LIMIT: Duration = Duration::from_secs(1);
/// How often the held tasks are checked against [`HOLD_LIMIT`] (a task is
/// written between the limit and the limit and this).
const SWEEP_EVERY: Duration = Duration::from_millis(250);

/// What an update did to a held task.
enum Held {
    /// Still held, in this state, at this generation.
    Kept(TaskState, i64),
    /// To be written now, in this state.
    Write(TaskState),
}

impl TaskManager {
    /// Whether a new task's writes may be held back until its turn ends
    /// (see the module's documentation): `finals_only` is a blocking
    /// request's subscription.
    pub(super) fn may_hold(&self, finals_only: bool, inline_push: bool) -> bool {
        finals_only && !inline_push
    }

    /// Starts the sweep that writes the tasks held longer than
    /// [`HOLD_LIMIT`] ([`sweep_held`]), unless it runs.
    pub(super) fn sweep_held_soon(self: &Arc<Self>) {
        if self.sweeping.load(Ordering::Acquire) || self.sweeping.swap(true, Ordering::AcqRel) {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn(sweep_held(Arc::downgrade(self)))),
            Err(_) => self.sweeping.store(false, Ordering::Release),
        }
    }

    /// The tasks held for [`HOLD_LIMIT`] whose turn goes on.
    fn held_too_long(&self) -> Vec<Arc<LiveTask>> {
        let now = Instant::now();
        self.live
            .iter()
            .filter(|e| {
                let st = e.value().state.lock();
                st.hold
                    && st.held_since.is_some_and(|t| now - t >= HOLD_LIMIT)
                    && st.held.as_deref().is_some_and(|t| !t.state().ends_turn())
            })
            .map(|e| Arc::clone(e.value()))
            .collect()
    }

    /// Creates a task held back (the caller holds `order`): kept in the
    /// live state, not written. Returns `None` (and keeps `task`) for a task
    /// that is not held.
    pub(super) fn hold_create(live: &LiveTask, task: Task) -> Option<Task> {
        let mut st = live.state.lock();
        if !st.hold {
            return Some(task);
        }
        st.held = Some(Box::new(task));
        st.held_since = Some(Instant::now());
        None
    }

    /// Applies an update to a held task (the caller holds `order`); writes
    /// it when the update ends the turn, or when the task stopped being
    /// held meanwhile. `None` for a task that is not held: the usual write.
    pub(super) async fn write_held(
        &self,
        live: &LiveTask,
        update: &TaskUpdate,
        on_failure: OnFailure,
    ) -> Option<A2aResult<Updated>> {
        let state = match Self::apply_held(live, || Some(update.clone()))? {
            Ok(Held::Kept(state, generation)) => {
                return Some(Ok(Updated::new(state).at_generation(generation)));
            }
            Ok(Held::Write(state)) => state,
            Err(e) => return Some(Err(e)),
        };
        Some(
            self.write_held_task(live, on_failure)
                .await
                .map(|task| Updated::new(state).with_task(Arc::new(task))),
        )
    }

    /// [`Self::write_held`] on a store that answers at once: the same
    /// rule, without a future (a store that refuses the write refuses it
    /// as its other writes are refused, at once). The update is taken from
    /// `slot` (and applied without a copy) only for a held task: otherwise
    /// it stays there for the usual write, and the answer is `None`.
    pub(super) fn write_held_now(
        store: &dyn ImmediateStore,
        live: &LiveTask,
        slot: &mut Option<TaskUpdate>,
    ) -> Option<A2aResult<Updated>> {
        let state = match Self::apply_held(live, || slot.take())? {
            Ok(Held::Kept(state, generation)) => {
                return Some(Ok(Updated::new(state).at_generation(generation)));
            }
            Ok(Held::Write(state)) => state,
            Err(e) => return Some(Err(e)),
        };
        let Some(task) = live.state.lock().held.take() else {
            return Some(Err(agentwire_types::A2aError::internal(
                "a held task was written twice",
            )));
        };
        // Shared with the store, which keeps this task and no copy of it.
        let task = Arc::new(*task);
        let written = store.create_shared_now(&live.owner, &task);
        live.state.lock().hold = false;
        if written.is_err() {
            Self::never_created(live);
        }
        Some(written.map(|()| Updated::new(state).with_task(task)))
    }

    /// The store refused to create a held task (full, or the caller holds
    /// as many open tasks as it may): it was never created, and the
    /// request that started it gets the agent's error, as when a task not
    /// held is refused (nobody was told of the task).
    fn never_created(live: &LiveTask) {
        let mut st = live.state.lock();
        st.held = None;
        st.hold = false;
        st.created = false;
        st.last_state = TaskState::Unspecified;
    }

    /// Applies an update to a held task: whether the task is to be written
    /// now (the update ends the turn, or the task stopped being held);
    /// `None` for a task that is not held, and then `update` is not called
    /// (it gives the update to apply, `None` when there is none).
    fn apply_held(
        live: &LiveTask,
        update: impl FnOnce() -> Option<TaskUpdate>,
    ) -> Option<A2aResult<Held>> {
        live.state.lock().held.as_ref()?;
        // A task that failed because of the storage takes no more updates.
        if let Err(e) = Self::check_storage(live) {
            return Some(Err(e));
        }
        let mut st = live.state.lock();
        let hold = st.hold;
        let task = st.held.as_deref_mut()?;
        if let Err(e) = apply_update(task, update()?) {
            return Some(Err(e));
        }
        let state = task.state();
        Some(Ok(if !hold || state.ends_turn() {
            Held::Write(state)
        } else {
            Held::Kept(state, task.generation)
        }))
    }

    /// Writes the held task as it is now (the caller holds `order`): the
    /// task from then on is an ordinary one. Returns the task written.
    async fn write_held_task(&self, live: &LiveTask, on_failure: OnFailure) -> A2aResult<Task> {
        Self::check_storage(live)?;
        let Some(task) = live.state.lock().held.as_deref().cloned() else {
            return Err(agentwire_types::A2aError::internal(
                "a held task was written twice",
            ));
        };
        let started = std::time::Instant::now();
        let log = match self.store.create(&live.owner, task.clone()).await {
            Ok(log) => log,
            Err(e) => {
                let mut again = || self.store.create(&live.owner, task.clone());
                let retried =
                    Box::pin(self.retry_write(live, started, e, on_failure, &mut again)).await;
                match retried {
                    Ok(log) => log,
                    Err(e) => {
                        // Refused, not failed by the storage, at the end of
                        // the turn (a request revealing the task leaves it
                        // held, for the next write to try again).
                        if on_failure == OnFailure::FailTask
                            && crate::store::storage_fault(&e).is_none()
                        {
                            Self::never_created(live);
                        }
                        return Err(e);
                    }
                }
            }
        };
        {
            let mut st = live.state.lock();
            st.held = None;
            st.hold = false;
        }
        if let Some(span) = log {
            self.created_here(live, span);
        }
        Ok(task)
    }

    /// A task as stored, for a request of `owner` about it by id: a task
    /// of `owner` held back is written first (it is held no longer), so
    /// that what the request sees is durable.
    pub(crate) async fn stored_or_revealed(
        &self,
        owner: &Owner,
        id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<StoredTask>> {
        // Looked up first: a task seen written (or without live state) was
        // written before its live state said so, so the read below finds
        // it.
        let held = self
            .live
            .get(id)
            .map(|l| Arc::clone(l.value()))
            .filter(|l| {
                let st = l.state.lock();
                l.owner == *owner && (st.hold || st.held.is_some())
            });
        if let Some(live) = held {
            // A store that keeps failing refuses the request.
            self.reveal(&live).await?;
        }
        self.get_task(id, history_length).await
    }

    /// Writes a held task as it is now: from then on its writes are the
    /// usual ones. A store that keeps failing refuses it; the task then
    /// stays unwritten, and its next write tries again.
    async fn reveal(&self, live: &LiveTask) -> A2aResult<()> {
        let _guard = live.order.lock().await;
        let unwritten = {
            let mut st = live.state.lock();
            st.hold = false;
            st.held.is_some()
        };
        if unwritten {
            self.write_held_task(live, OnFailure::Refuse).await?;
        }
        Ok(())
    }

    /// The record of a held task that failed because the store did: the
    /// task as held, failed with `reason` (see [`failed_record`]); `None`
    /// for a task not held.
    pub(super) fn held_failure(live: &LiveTask, message: &Message) -> Option<Task> {
        let st = live.state.lock();
        st.held.as_deref().map(|t| failed_record(t, message))
    }

    /// The held task's failure is recorded: it is held no longer.
    pub(super) fn held_recorded(live: &LiveTask) {
        let mut st = live.state.lock();
        st.held = None;
        st.hold = false;
    }
}

/// Writes the tasks of `manager` held longer than [`HOLD_LIMIT`], every
/// [`SWEEP_EVERY`], until the manager goes (or the runtime: the next held
/// task starts another sweep).
async fn sweep_held(manager: Weak<TaskManager>) {
    /// Says the sweep stopped, however it stops.
    struct Stopped(Weak<TaskManager>);
    impl Drop for Stopped {
        fn drop(&mut self) {
            if let Some(m) = self.0.upgrade() {
                m.sweeping.store(false, Ordering::Release);
            }
        }
    }
    let _stopped = Stopped(Weak::clone(&manager));
    let mut every = tokio::time::interval(SWEEP_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(m) = manager.upgrade() else {
            return;
        };
        for live in m.held_too_long() {
            let m = Arc::clone(&m);
            tokio::spawn(async move {
                if let Err(e) = m.reveal(&live).await {
                    tracing::debug!(task = %live.id, error = %e, "a task held too long could not be written yet");
                }
            });
        }
    }
}

/// A held task as recorded when it failed because the store did: its
/// history and the failed status with `message` (which joins the
/// history), without its artifacts (the updates the store refused are not
/// kept, as for a task written all along).
fn failed_record(task: &Task, message: &Message) -> Task {
    let mut history = task.history.clone();
    history.push(message.clone());
    Task {
        generation: task.generation + 1,
        id: task.id.clone(),
        context_id: task.context_id.clone(),
        status: Some(TaskStatus::new(TaskState::Failed).with_message(message.clone())),
        artifacts: Vec::new(),
        history,
        metadata: task.metadata.clone(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use agentwire_types::{
        A2aResult, AgentCard, Artifact, GetTaskRequest, ListTasksRequest, Message,
        SendMessageConfiguration, SendMessageRequest, Task, TaskState,
    };
    use async_trait::async_trait;
    use futures::StreamExt as _;
    use tokio::sync::{Semaphore, mpsc};

    use crate::executor::{RequestContext, TaskUpdater};
    use crate::handler::{CallContext, RequestHandler};
    use crate::store::{
        LogSpan, MemoryStore, Owner, StoredPushConfig, StoredTask, TaskPage, TaskQuery, TaskStore,
        TaskUpdate, Updated,
    };

    /// A store that does "I/O" (it has no immediate capability) and counts
    /// the creates and updates that reach it.
    #[derive(Default)]
    struct Counting {
        inner: MemoryStore,
        creates: AtomicUsize,
        updates: AtomicUsize,
    }

    impl Counting {
        fn writes(&self) -> (usize, usize) {
            (
                self.creates.load(Ordering::SeqCst),
                self.updates.load(Ordering::SeqCst),
            )
        }
    }

    #[async_trait]
    impl TaskStore for Counting {
        async fn create(&self, owner: &Owner, task: Task) -> A2aResult<Option<LogSpan>> {
            self.creates.fetch_add(1, Ordering::SeqCst);
            self.inner.create(owner, task).await
        }
        async fn update(&self, task_id: &str, update: TaskUpdate) -> A2aResult<Updated> {
            self.updates.fetch_add(1, Ordering::SeqCst);
            self.inner.update(task_id, update).await
        }
        async fn get(&self, id: &str, history: Option<usize>) -> A2aResult<Option<StoredTask>> {
            self.inner.get(id, history).await
        }
        async fn list(&self, owner: &Owner, query: &TaskQuery) -> A2aResult<TaskPage> {
            self.inner.list(owner, query).await
        }
        async fn put_push_config(&self, c: &StoredPushConfig) -> A2aResult<()> {
            self.inner.put_push_config(c).await
        }
        async fn get_push_config(
            &self,
            task_id: &str,
            id: &str,
        ) -> A2aResult<Option<StoredPushConfig>> {
            self.inner.get_push_config(task_id, id).await
        }
        async fn list_push_configs(&self, task_id: &str) -> A2aResult<Vec<StoredPushConfig>> {
            self.inner.list_push_configs(task_id).await
        }
        async fn delete_push_config(&self, task_id: &str, id: &str) -> A2aResult<bool> {
            self.inner.delete_push_config(task_id, id).await
        }
    }

    /// What the echo agent does with a one-word message: starts work,
    /// answers with one artifact, completes. Sent "wait", it first says
    /// its task's id and waits to be let through.
    struct Echo {
        ids: mpsc::UnboundedSender<String>,
        gate: Arc<Semaphore>,
    }

    impl crate::AgentExecutor for Echo {
        async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
            task.start_work().await?;
            if ctx.text() == "wait" {
                let _ = self.ids.send(ctx.task_id.clone());
                if let Ok(p) = self.gate.acquire().await {
                    p.forget();
                }
            }
            task.add_artifact(Artifact::text("echo", ctx.text()))
                .await?;
            task.complete().await
        }
    }

    struct Setup {
        handler: RequestHandler,
        store: Arc<Counting>,
        ids: mpsc::UnboundedReceiver<String>,
        gate: Arc<Semaphore>,
    }

    /// A blocking send of the script "wait" in the background, and its
    /// task's id once the agent says it.
    async fn waiting(
        s: &mut Setup,
    ) -> (
        tokio::task::JoinHandle<A2aResult<agentwire_types::SendMessageResponse>>,
        String,
    ) {
        let handler = s.handler.clone();
        let blocking = tokio::spawn(async move {
            handler
                .send_message(&CallContext::v1(), send("wait", false))
                .await
        });
        let id = s.ids.recv().await.expect("the agent says its task");
        (blocking, id)
    }

    /// Lets the agent of [`waiting`] finish: the task completes, stored
    /// with its artifact and its end written as usual (it was written
    /// once already).
    async fn completes_written(
        s: &Setup,
        blocking: tokio::task::JoinHandle<A2aResult<agentwire_types::SendMessageResponse>>,
        id: &str,
    ) {
        s.gate.add_permits(1);
        let answer = blocking.await.unwrap().unwrap();
        let task = answer.task().expect("a task").clone();
        assert_eq!(task.state(), TaskState::Completed);
        assert_eq!(stored(s, id).await, Some(task));
        assert_eq!(s.store.writes(), (1, 2), "then the artifact and the end");
    }

    fn setup() -> Setup {
        let store = Arc::new(Counting::default());
        let (tx, ids) = mpsc::unbounded_channel();
        let gate = Arc::new(Semaphore::new(0));
        let agent = Echo {
            ids: tx,
            gate: Arc::clone(&gate),
        };
        let card = AgentCard::default().with_streaming(true);
        let handler = RequestHandler::builder(card, agent)
            .store(Arc::clone(&store) as Arc<dyn TaskStore>)
            .build();
        Setup {
            handler,
            store,
            ids,
            gate,
        }
    }

    fn send(text: &str, immediately: bool) -> SendMessageRequest {
        SendMessageRequest {
            message: Some(Message::user_text(text)),
            configuration: Some(SendMessageConfiguration {
                return_immediately: immediately,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The task stored, as a 1.0 call is answered with it (without its
    /// generation: see `handler/generation.rs`).
    async fn stored(s: &Setup, id: &str) -> Option<Task> {
        s.store.inner.get(id, None).await.unwrap().map(|t| Task {
            generation: 0,
            ..t.task
        })
    }

    /// A blocking send whose turn ends inside it: one write (the task as
    /// it ends), before the answer; the task stored is the one answered.
    /// (Written as it went, the same task costs four: submitted, working,
    /// the artifact, completed.)
    #[tokio::test]
    async fn a_blocking_send_is_written_once() {
        let s = setup();
        let answer = s
            .handler
            .send_message(&CallContext::v1(), send("hello", false))
            .await
            .unwrap();
        let task = answer.task().expect("a task").clone();
        assert_eq!(task.state(), TaskState::Completed);
        assert_eq!(task.artifacts[0].text_content(), "hello");
        assert_eq!(s.store.writes(), (1, 0), "one create, no update");
        assert_eq!(stored(&s, &task.id).await, Some(task));
    }

    /// Told before the task ends (`returnImmediately`, a stream): the task
    /// is in the store when the caller hears of it, and every update is
    /// written as it comes.
    #[tokio::test]
    async fn a_task_acknowledged_before_it_ends_is_written_first() {
        let mut s = setup();
        let answer = s
            .handler
            .send_message(&CallContext::v1(), send("wait", true))
            .await
            .unwrap();
        let id = answer.task().expect("a task").id.clone();
        assert!(stored(&s, &id).await.is_some(), "stored before the answer");
        assert_eq!(s.ids.recv().await.as_deref(), Some(id.as_str()));
        s.gate.add_permits(1);

        let mut stream = s
            .handler
            .send_streaming_message(&CallContext::v1(), send("wait", false))
            .await
            .unwrap();
        let first = stream.next().await.unwrap().unwrap();
        let Some(agentwire_types::stream_response::Payload::Task(opening)) = first.payload else {
            panic!("the task first: {first:?}");
        };
        let streamed = opening.id.clone();
        assert!(
            stored(&s, &streamed).await.is_some(),
            "stored before the event"
        );
        assert_eq!(s.ids.recv().await.as_deref(), Some(streamed.as_str()));
        s.gate.add_permits(1);
        while stream.next().await.is_some() {}
        let task = stored(&s, &streamed).await.unwrap();
        assert_eq!(task.state(), TaskState::Completed);
        // Both tasks: created working (the first status is written with
        // the task), then the artifact, completed.
        for _ in 0..100 {
            if stored(&s, &id).await.unwrap().state() == TaskState::Completed {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(s.store.writes(), (2, 4));
    }

    /// A held task asked for by id (its agent may tell it) is written as
    /// it is first: what is seen is durable; then its writes are the usual
    /// ones.
    #[tokio::test]
    async fn a_held_task_asked_for_is_written_first() {
        let mut s = setup();
        let (blocking, id) = waiting(&mut s).await;
        assert_eq!(s.store.writes(), (0, 0), "held while nobody knows it");
        assert!(stored(&s, &id).await.is_none());
        let got = s
            .handler
            .get_task(
                &CallContext::v1(),
                GetTaskRequest {
                    id: id.clone(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(got.state(), TaskState::Working);
        assert_eq!(stored(&s, &id).await, Some(got));
        assert_eq!(s.store.writes(), (1, 0));
        completes_written(&s, blocking, &id).await;
    }

    /// A turn that lasts longer than the hold limit has its task written
    /// then (listed, durable, and written as usual from then on); within
    /// the limit it is held.
    #[tokio::test(start_paused = true)]
    async fn a_task_held_too_long_is_written() {
        let mut s = setup();
        let (blocking, id) = waiting(&mut s).await;
        let listed = || async {
            s.handler
                .list_tasks(&CallContext::v1(), ListTasksRequest::default())
                .await
                .unwrap()
                .tasks
        };
        tokio::time::sleep(super::HOLD_LIMIT / 2).await;
        assert_eq!(s.store.writes(), (0, 0), "held within the limit");
        assert!(listed().await.is_empty());
        tokio::time::sleep(super::HOLD_LIMIT).await;
        assert_eq!(s.store.writes(), (1, 0), "written past the limit");
        let tasks = listed().await;
        assert_eq!(tasks.len(), 1);
        assert_eq!(tasks[0].id, id);
        assert_eq!(tasks[0].state(), TaskState::Working);
        completes_written(&s, blocking, &id).await;
    }
}
