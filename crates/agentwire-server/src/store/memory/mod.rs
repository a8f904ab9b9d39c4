//! The in-memory task store: sharded maps, a lock per task, bounded size.

mod packed;
mod task_table;

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentwire_types::{A2aError, A2aResult, Task, TaskPushNotificationConfig, TaskState};
use async_trait::async_trait;
use dashmap::DashMap;
use parking_lot::Mutex;

use self::task_table::{Held, Slot, TaskTable};
use super::{
    Cursor, Owner, StoredTask, TaskPage, TaskQuery, TaskStore, TaskUpdate, apply_update,
    check_open, closed_error,
};

/// The most finished tasks one write evicts (a sweep has no limit).
const EVICT_PER_WRITE: usize = 64;

/// Limits of the in-memory store. Finished tasks leave memory after
/// `terminal_ttl`, and when more than `max_tasks` are held the oldest
/// finished ones go first, so memory stays bounded under sustained load.
#[derive(Debug, Clone)]
pub struct MemoryStoreConfig {
    /// How long a task in a terminal state is kept.
    pub terminal_ttl: Duration,
    /// How many tasks are kept at most (tasks still running are never
    /// evicted, so this is a target, not a hard cap).
    pub max_tasks: usize,
}

impl Default for MemoryStoreConfig {
    fn default() -> Self {
        Self {
            terminal_ttl: Duration::from_secs(600),
            max_tasks: 10_000,
        }
    }
}

type Map<V> = DashMap<String, V, ahash::RandomState>;

/// Finished tasks with the time they finished, oldest first: the hash of
/// each one's id and its token (see [`PackedTask`]), with which eviction
/// finds the task's slot without reading the task.
///
/// [`PackedTask`]: super::packed::PackedTask
type FinishedQueue = VecDeque<(Instant, u64, usize)>;

/// A [`TaskStore`] in process memory. Nothing survives a restart.
pub struct MemoryStore {
    /// Tasks are updated under their shard's lock: an update is short, and
    /// a lock per task would cost every task an allocation.
    tasks: TaskTable,
    push: Map<Vec<TaskPushNotificationConfig>>,
    /// Whether a push config was ever stored (eviction skips the push map
    /// otherwise).
    any_push: AtomicBool,
    /// Finished tasks in the order they finished, one queue per group of
    /// threads: eviction pops the fronts (see [`home_queue`]).
    finished: Box<[Mutex<FinishedQueue>]>,
    /// Number of tasks held (counting would lock every shard).
    count: AtomicUsize,
    config: MemoryStoreConfig,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new(MemoryStoreConfig::default())
    }
}

impl MemoryStore {
    /// A store with the given limits.
    pub fn new(config: MemoryStoreConfig) -> Self {
        Self {
            tasks: TaskTable::default(),
            push: Map::default(),
            any_push: AtomicBool::new(false),
            finished: (0..FINISHED_QUEUES)
                .map(|_| Mutex::new(VecDeque::new()))
                .collect(),
            count: AtomicUsize::new(0),
            config,
        }
    }

    /// How many tasks are held.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Whether no task is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A task just reached a terminal state: it joins this thread's queue,
    /// and the oldest finished tasks of that queue leave while the store is
    /// over its limits. Every [`OTHER_QUEUE_EVERY`] finishes a thread also
    /// looks at another queue, so the tasks finished by threads that went
    /// quiet still expire.
    fn finished_now(&self, hash: u64, token: usize) {
        let now = Instant::now();
        let (home, turn) = home_queue();
        let n = self.finished.len();
        self.finished[home % n].lock().push_back((now, hash, token));
        let ttl = self.config.terminal_ttl;
        self.evict(home % n, now, ttl, Some(EVICT_PER_WRITE));
        if turn % OTHER_QUEUE_EVERY == 0 || self.len() > self.config.max_tasks {
            let other = (home + 1 + turn / OTHER_QUEUE_EVERY) % n;
            self.evict(other, now, ttl, Some(EVICT_PER_WRITE));
        }
    }

    /// Evicts finished tasks older than the TTL, and the oldest finished
    /// ones while more than `max_tasks` are held. Amortised O(1) per task:
    /// runs on every write that finishes a task; call it from a timer to
    /// also expire tasks of an idle store.
    pub fn sweep(&self) {
        let now = Instant::now();
        for q in 0..self.finished.len() {
            self.evict(q, now, self.config.terminal_ttl, None);
        }
    }

    /// Evicts from queue `q` the finished tasks older than `max_age` and the
    /// oldest while over the cap; at most `limit` (and none if someone else
    /// is evicting from it) when a limit is given. Returns how many left.
    fn evict(&self, q: usize, now: Instant, max_age: Duration, limit: Option<usize>) -> usize {
        let queue = &self.finished[q];
        let mut evicted = 0;
        while limit.is_none_or(|l| evicted < l) {
            let next = {
                let mut queue = match limit {
                    None => queue.lock(),
                    // Someone else is evicting: they will get to it.
                    Some(_) => match queue.try_lock() {
                        Some(q) => q,
                        None => break,
                    },
                };
                let Some((at, _, _)) = queue.front() else {
                    break;
                };
                let expired = now.saturating_duration_since(*at) >= max_age;
                if !expired && self.len() <= self.config.max_tasks {
                    break;
                }
                queue.pop_front()
            };
            // The task is freed outside of the queue's lock.
            let Some((_, hash, token)) = next else { break };
            if let Some(slot) = self.tasks.remove_exact(hash, token) {
                self.count.fetch_sub(1, Ordering::Relaxed);
                if self.any_push.load(Ordering::Relaxed) {
                    self.push.remove(slot.id());
                }
            }
            evicted += 1;
        }
        evicted
    }
}

/// Queues of finished tasks. A task is queued, and later evicted, by the
/// thread that finished it, which on a multi-thread runtime is the thread
/// that ran the request and allocated the task: glibc's allocator frees
/// memory cheaply on the thread that allocated it, while frees from another
/// thread take the owning arena's lock and fill its bins (measured: with two
/// workers sharing one queue, malloc and free took a third of the server's
/// CPU under load, against a sixth with one worker).
const FINISHED_QUEUES: usize = 16;

/// How often (in finished tasks) a thread also evicts from another queue.
const OTHER_QUEUE_EVERY: usize = 64;

/// This thread's queue number (not yet reduced modulo the number of
/// queues) and how many tasks it finished before.
fn home_queue() -> (usize, usize) {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static HOME: (usize, std::cell::Cell<usize>) =
            (NEXT.fetch_add(1, Ordering::Relaxed), std::cell::Cell::new(0));
    }
    HOME.with(|(home, turn)| {
        let t = turn.get();
        turn.set(t.wrapping_add(1));
        (*home, t)
    })
}

impl MemoryStore {
    /// [`TaskStore::create`], without a future.
    pub(crate) fn create_now(&self, owner: &Owner, task: Task) -> A2aResult<()> {
        let hash = self.tasks.hash(&task.id);
        let slot = Slot::new(Arc::new(task), owner);
        let token = slot.token();
        if let Err(slot) = self.tasks.insert(hash, slot) {
            return Err(A2aError::internal(format!(
                "task id {} already exists",
                slot.id()
            )));
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        if let Some(token) = token {
            self.finished_now(hash, token);
        }
        Ok(())
    }

    /// [`TaskStore::update`], without a future. Also returns the task when
    /// its new state ends the agent's turn (terminal or interrupted), for
    /// the request waiting for that: a task that reached a terminal state
    /// is packed, and the one returned is then the only unpacked copy.
    pub(crate) fn update_now(
        &self,
        task_id: &str,
        update: TaskUpdate,
    ) -> A2aResult<(TaskState, Option<Arc<Task>>)> {
        let hash = self.tasks.hash(task_id);
        let applied = self.tasks.write(hash, task_id, |slot| {
            let Held::Open(task) = &mut slot.held else {
                return Err(closed_error(slot.id(), slot.state()));
            };
            // Refused before the task is copied for writing.
            check_open(task)?;
            apply_update(Arc::make_mut(task), update)?;
            let state = task.state();
            if !state.is_terminal() {
                return Ok((state, None, state.ends_turn().then(|| Arc::clone(task))));
            }
            // Nothing changes a terminal task, so this happens once.
            let (token, task) = slot
                .finish()
                .ok_or_else(|| A2aError::internal("a finished task was packed twice"))?;
            Ok((state, Some(token), Some(task)))
        });
        match applied {
            None => Err(A2aError::task_not_found(task_id)),
            Some(Err(e)) => Err(e),
            Some(Ok((state, token, task))) => {
                if let Some(token) = token {
                    self.finished_now(hash, token);
                }
                Ok((state, task))
            }
        }
    }

    /// [`TaskStore::get`], without a future.
    pub(crate) fn get_now(
        &self,
        task_id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<StoredTask>> {
        self.tasks
            .read(self.tasks.hash(task_id), task_id, |slot| {
                Ok(StoredTask {
                    owner: slot.owner(),
                    task: slot.held.copy(history_length, true)?,
                })
            })
            .transpose()
    }

    /// The stored task: itself (shared, not copied) while it is open.
    pub(crate) fn get_shared(&self, task_id: &str) -> A2aResult<Option<Arc<Task>>> {
        self.tasks
            .read(self.tasks.hash(task_id), task_id, Slot::task)
            .transpose()
    }
}

#[async_trait]
impl TaskStore for MemoryStore {
    fn as_memory(&self) -> Option<&MemoryStore> {
        Some(self)
    }

    async fn create(&self, owner: &Owner, task: Task) -> A2aResult<()> {
        self.create_now(owner, task)
    }

    async fn update(&self, task_id: &str, update: TaskUpdate) -> A2aResult<TaskState> {
        self.update_now(task_id, update).map(|(state, _)| state)
    }

    async fn get(
        &self,
        task_id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<StoredTask>> {
        self.get_now(task_id, history_length)
    }

    async fn list(&self, owner: &Owner, query: &TaskQuery) -> A2aResult<TaskPage> {
        // What the scan found, without decoding packed tasks: only the page
        // is decoded.
        let mut keys: Vec<(Cursor, Held)> = Vec::new();
        self.tasks.for_each(|slot| {
            let timestamp = slot.status_timestamp();
            let skip = !slot.is_owned_by(owner)
                || query
                    .context_id
                    .as_deref()
                    .is_some_and(|c| c != slot.context_id())
                || query.state.is_some_and(|s| s != slot.state())
                || query.status_after.is_some_and(|after| {
                    timestamp.is_none_or(|ts| ts.as_millis() < after.as_millis())
                });
            if !skip {
                let cursor = Cursor {
                    millis: timestamp.map_or(0, |t| t.as_millis()),
                    id: slot.id().to_owned(),
                };
                keys.push((cursor, slot.held.clone()));
            }
        });
        let total = keys.len();
        // Most recently updated first; ties broken by id, descending.
        keys.sort_unstable_by(|a, b| b.0.cmp(&a.0));
        let start = match &query.cursor {
            Some(c) => keys.partition_point(|(k, _)| k >= c),
            None => 0,
        };
        let end = (start + query.page_size).min(keys.len());
        let mut tasks = Vec::with_capacity(end - start);
        for (_, held) in &keys[start..end] {
            tasks.push(held.copy(query.history_length, query.include_artifacts)?);
        }
        let next = (end < keys.len())
            .then(|| keys[end - 1].0.clone())
            .filter(|_| end > start);
        Ok(TaskPage { tasks, next, total })
    }

    async fn unfinished(&self) -> A2aResult<Vec<StoredTask>> {
        let mut out = Vec::new();
        self.tasks.for_each(|slot| {
            if let Held::Open(task) = &slot.held
                && matches!(task.state(), TaskState::Submitted | TaskState::Working)
            {
                out.push(StoredTask {
                    owner: slot.owner(),
                    task: Task::clone(task),
                });
            }
        });
        Ok(out)
    }

    async fn purge_terminal_older_than(&self, age: Duration) -> A2aResult<u64> {
        let now = Instant::now();
        let age = age.min(self.config.terminal_ttl);
        let purged = (0..self.finished.len())
            .map(|q| self.evict(q, now, age, None))
            .sum::<usize>();
        Ok(purged as u64)
    }

    async fn put_push_config(&self, config: &TaskPushNotificationConfig) -> A2aResult<()> {
        self.any_push.store(true, Ordering::Relaxed);
        let mut configs = self.push.entry(config.task_id.clone()).or_default();
        match configs.iter_mut().find(|c| c.id == config.id) {
            Some(existing) => *existing = config.clone(),
            None => configs.push(config.clone()),
        }
        Ok(())
    }

    async fn get_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> A2aResult<Option<TaskPushNotificationConfig>> {
        Ok(self
            .push
            .get(task_id)
            .and_then(|c| c.iter().find(|c| c.id == id).cloned()))
    }

    async fn list_push_configs(&self, task_id: &str) -> A2aResult<Vec<TaskPushNotificationConfig>> {
        Ok(self
            .push
            .get(task_id)
            .map(|c| c.clone())
            .unwrap_or_default())
    }

    async fn delete_push_config(&self, task_id: &str, id: &str) -> A2aResult<bool> {
        let Some(mut configs) = self.push.get_mut(task_id) else {
            return Ok(false);
        };
        let before = configs.len();
        configs.retain(|c| c.id != id);
        Ok(configs.len() != before)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_types::{Message, Part, TaskStatus, Timestamp};

    fn status(state: TaskState, millis: i64) -> TaskStatus {
        TaskStatus {
            state: state as i32,
            message: None,
            timestamp: Some(Timestamp::from_millis(millis)),
        }
    }

    /// A status update to `state` at `millis`.
    fn to(state: TaskState, millis: i64) -> TaskUpdate {
        TaskUpdate::Status {
            status: status(state, millis),
            metadata: None,
        }
    }

    fn task(id: &str, ctx: &str, state: TaskState, millis: i64) -> Task {
        Task {
            id: id.into(),
            context_id: ctx.into(),
            status: Some(status(state, millis)),
            history: vec![Message::user_text("a"), Message::user_text("b")],
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn list_orders_filters_and_pages() {
        let s = MemoryStore::default();
        let me = Owner::default();
        let other = Owner {
            principal: "bob".into(),
            ..Default::default()
        };
        for i in 0..7 {
            let ctx = if i % 2 == 0 { "even" } else { "odd" };
            s.create(
                &me,
                task(&format!("t{i}"), ctx, TaskState::Completed, 1000 + i),
            )
            .await
            .unwrap();
        }
        s.create(&other, task("hidden", "even", TaskState::Completed, 5000))
            .await
            .unwrap();

        let mut q = TaskQuery {
            page_size: 3,
            ..Default::default()
        };
        let mut seen = Vec::new();
        loop {
            let page = s.list(&me, &q).await.unwrap();
            assert_eq!(page.total, 7);
            seen.extend(page.tasks.iter().map(|t| t.id.clone()));
            assert!(page.tasks.iter().all(|t| t.artifacts.is_empty()));
            match page.next {
                Some(c) => q.cursor = Some(c),
                None => break,
            }
        }
        assert_eq!(seen, ["t6", "t5", "t4", "t3", "t2", "t1", "t0"]);

        let q = TaskQuery {
            page_size: 50,
            context_id: Some("odd".into()),
            history_length: Some(1),
            ..Default::default()
        };
        let page = s.list(&me, &q).await.unwrap();
        assert_eq!(page.total, 3);
        assert!(page.tasks.iter().all(|t| t.history.len() == 1));
        assert!(page.next.is_none());
    }

    /// One working task (`open`), then `n` completed ones `t0`, `t1`...
    #[tokio::test]
    async fn open_and_finished_tasks_read_and_list_alike() {
        let s = MemoryStore::default();
        let me = Owner::default();
        let mut done = task("done", "c", TaskState::Working, 2000);
        done.artifacts = vec![agentwire_types::Artifact::new("out", vec![Part::text("x")])];
        s.create(&me, done.clone()).await.unwrap();
        s.create(&me, task("open", "c", TaskState::Working, 1000))
            .await
            .unwrap();
        // The update that finishes a task hands it over, and packs it.
        let (state, finished) = s
            .update_now("done", to(TaskState::Completed, 3000))
            .unwrap();
        assert_eq!(state, TaskState::Completed);
        let finished = finished.expect("the finished task is handed over");
        assert_eq!(finished.artifacts, done.artifacts);
        let read = s.get("done", None).await.unwrap().unwrap().task;
        assert_eq!(read, *finished);
        assert_eq!(*s.get_shared("done").unwrap().unwrap(), *finished);
        // A finished task refuses updates as before.
        let err = s
            .update("done", TaskUpdate::UserMessage(Message::user_text("more")))
            .await
            .unwrap_err();
        assert_eq!(err.kind, agentwire_types::ErrorKind::UnsupportedOperation);
        // An interrupted state is handed over too; a working one is not.
        let (_, handed) = s.update_now("open", to(TaskState::Working, 1200)).unwrap();
        assert!(handed.is_none());
        let (_, handed) = s
            .update_now("open", to(TaskState::InputRequired, 1500))
            .unwrap();
        assert!(handed.is_some());

        let all = TaskQuery {
            page_size: 10,
            include_artifacts: true,
            ..Default::default()
        };
        let page = s.list(&me, &all).await.unwrap();
        let ids: Vec<_> = page.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["done", "open"], "newest status first");
        assert_eq!(page.tasks[0], *finished);
        let completed = TaskQuery {
            state: Some(TaskState::Completed),
            ..all.clone()
        };
        let page = s.list(&me, &completed).await.unwrap();
        assert_eq!(page.total, 1);
        let after = TaskQuery {
            status_after: Some(Timestamp::from_millis(2500)),
            ..all
        };
        assert_eq!(s.list(&me, &after).await.unwrap().total, 1);
        assert!(s.unfinished().await.unwrap().is_empty());
    }

    async fn fill(s: &MemoryStore, open: &str, n: i64) {
        let me = Owner::default();
        s.create(&me, task(open, "c", TaskState::Working, 1))
            .await
            .unwrap();
        for i in 0..n {
            s.create(&me, task(&format!("t{i}"), "c", TaskState::Completed, i))
                .await
                .unwrap();
        }
    }

    #[tokio::test]
    async fn finished_tasks_are_evicted_beyond_the_cap() {
        let s = MemoryStore::new(MemoryStoreConfig {
            terminal_ttl: Duration::from_secs(3600),
            max_tasks: 100,
        });
        fill(&s, "running", 500).await;
        s.sweep();
        assert!(s.len() <= 100, "{} tasks held", s.len());
        assert!(s.get("running", None).await.unwrap().is_some());
        assert!(s.get("t499", None).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn retention_purges_finished_tasks_of_an_idle_store() {
        let s = MemoryStore::default();
        fill(&s, "open", 5).await;
        let purge = |age| s.purge_terminal_older_than(age);
        assert_eq!(purge(Duration::from_secs(60)).await.unwrap(), 0);
        assert_eq!(purge(Duration::ZERO).await.unwrap(), 5);
        assert_eq!(s.len(), 1);
        assert!(s.get("open", None).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn history_length_on_get() {
        let s = MemoryStore::default();
        s.create(&Owner::default(), task("t", "c", TaskState::Working, 1))
            .await
            .unwrap();
        let t = s.get("t", Some(1)).await.unwrap().unwrap().task;
        assert_eq!(t.history.len(), 1);
        assert_eq!(t.history[0].text(), "b");
        let t = s.get("t", Some(0)).await.unwrap().unwrap().task;
        assert!(t.history.is_empty());
        let t = s.get("t", None).await.unwrap().unwrap().task;
        assert_eq!(t.history.len(), 2);
    }
}
