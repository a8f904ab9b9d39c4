//! Writes held back: a task whose turn may end inside the request that
//! started it is written once, when the turn ends, instead of once per
//! update (submitted, working, each artifact, completed).
//!
//! Only when nobody can have been told about the task before its turn
//! ends: a blocking `SendMessage` (no stream, no `returnImmediately`)
//! starting a new task, without an inline push config and without other
//! replicas (whose followers read the event log). A store that does I/O
//! saves its round trips; the in-memory store saves re-indexing the task
//! for `ListTasks` at every status change. Its caller is
//! answered only after that one write is committed, so nothing is
//! acknowledged before it is durable; a crash before it loses a task
//! nobody was told about (the request fails with the connection).
//!
//! Meanwhile the task lives in its [`LiveState`](super::LiveState) as the
//! store would hold it (`held`, every update applied with
//! [`apply_update`]). Anyone who asks for it by id anyway (the agent may
//! have said its id: `GetTask`, `CancelTask`, `SubscribeToTask`, a push
//! config, a repeated message id) first has it written as it is
//! ([`TaskManager::stored_or_revealed`]); from then on its writes are the
//! usual ones. `ListTasks` does not show a held task.
//!
//! A held write that the store refuses is retried and, past the budget,
//! fails the task like any other write (`storage.rs`); the failure is then
//! recorded by creating the task failed, without the artifacts the store
//! refused ([`failed_record`]).

use std::sync::Arc;

use agentwire_types::{A2aResult, Message, Task, TaskState, TaskStatus};

use super::TaskManager;
use super::live::LiveTask;
use super::storage::OnFailure;
use crate::store::{ImmediateStore, Owner, StoredTask, TaskUpdate, Updated, apply_update};

/// What an update did to a held task.
enum Held {
    /// Still held, in this state.
    Kept(TaskState),
    /// To be written now, in this state.
    Write(TaskState),
}

impl TaskManager {
    /// Whether a new task's writes may be held back until its turn ends
    /// (see the module's documentation): `finals_only` is a blocking
    /// request's subscription.
    pub(super) fn may_hold(&self, finals_only: bool, inline_push: bool) -> bool {
        finals_only && !inline_push && self.cluster.is_none()
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
            Ok(Held::Kept(state)) => return Some(Ok(Updated::new(state))),
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
            Ok(Held::Kept(state)) => return Some(Ok(Updated::new(state))),
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
        Some(written.map(|()| Updated::new(state).with_task(task)))
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
            Held::Kept(state)
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
                Box::pin(self.retry_write(live, started, e, on_failure, &mut again)).await?
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
            let _guard = live.order.lock().await;
            let unwritten = {
                let mut st = live.state.lock();
                st.hold = false;
                st.held.is_some()
            };
            if unwritten {
                // A store that keeps failing refuses the request; the task
                // stays unwritten, and its next write tries again.
                self.write_held_task(&live, OnFailure::Refuse).await?;
            }
        }
        self.get_task(id, history_length).await
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

/// A held task as recorded when it failed because the store did: its
/// history and the failed status with `message` (which joins the
/// history), without its artifacts (the updates the store refused are not
/// kept, as for a task written all along).
fn failed_record(task: &Task, message: &Message) -> Task {
    let mut history = task.history.clone();
    history.push(message.clone());
    Task {
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
        A2aResult, AgentCard, Artifact, GetTaskRequest, Message, SendMessageConfiguration,
        SendMessageRequest, Task, TaskState,
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

    async fn stored(s: &Setup, id: &str) -> Option<Task> {
        s.store.inner.get(id, None).await.unwrap().map(|t| t.task)
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
        // Both tasks: created, then working, the artifact, completed.
        for _ in 0..100 {
            if stored(&s, &id).await.unwrap().state() == TaskState::Completed {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(s.store.writes(), (2, 6));
    }

    /// A held task asked for by id (its agent may tell it) is written as
    /// it is first: what is seen is durable; then its writes are the usual
    /// ones.
    #[tokio::test]
    async fn a_held_task_asked_for_is_written_first() {
        let mut s = setup();
        let handler = s.handler.clone();
        let blocking = tokio::spawn(async move {
            handler
                .send_message(&CallContext::v1(), send("wait", false))
                .await
        });
        let id = s.ids.recv().await.expect("the agent says its task");
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
        s.gate.add_permits(1);
        let answer = blocking.await.unwrap().unwrap();
        let task = answer.task().expect("a task").clone();
        assert_eq!(task.state(), TaskState::Completed);
        assert_eq!(stored(&s, &id).await, Some(task));
        assert_eq!(s.store.writes(), (1, 2), "then the artifact and the end");
    }
}
