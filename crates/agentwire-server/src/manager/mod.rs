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
//!
//! One job a file:
//!
//! - `live`: [`LiveTask`] and its [`LiveState`] (exists yet, runs,
//!   subscribers, last state), and attaching a request to it;
//! - `order`: the lock that orders a task's updates;
//! - `write`: the write path (create on the first event, store, publish);
//! - `queued`: artifact chunks queued to a store that runs its writes in
//!   order, their events published as each is committed;
//! - `held`: the writes of a task whose turn ends inside the request that
//!   started it, held back and written once when the turn ends;
//! - `storage`: a store that fails: writes retried, then the task failed
//!   and every waiter released (see `docs/architecture.md`);
//! - `push`: a task's push configs and the hand-over of events to the push
//!   sender;
//! - `subscribers`: the subscribers' queues, subscribing, resynchronising a
//!   slow subscriber;
//! - `runs`: running agents (a new task, a continued one, the end of a run,
//!   orphaned tasks);
//! - `cancel`: the live state a cancellation works on;
//! - `reads`: reading a task as stored.
//!
//! Several replicas (an event bus): see `cluster/replicas.rs`.

mod cancel;
pub(crate) mod events;
mod held;
mod live;
mod order;
mod push;
mod queued;
mod reads;
mod runs;
mod storage;
mod subscribers;
mod write;

use std::sync::{Arc, OnceLock, Weak};

use agentwire_types::StreamResponse;
use dashmap::DashMap;

use crate::cluster::replicas as cluster;
use crate::push::PushSender;
use crate::store::{StoreRetry, TaskStore};

pub(crate) use live::{LiveState, LiveTask};
pub(crate) use subscribers::{Opening, Subscriber, Subscription};
pub(crate) use write::Emit;

/// Applies events to tasks and fans them out to subscribers.
pub(crate) struct TaskManager {
    pub(crate) store: Arc<dyn TaskStore>,
    pub(crate) live: DashMap<String, Arc<LiveTask>, ahash::RandomState>,
    queue_capacity: usize,
    /// Bytes of events queued per stream before it is cut.
    queue_bytes: usize,
    /// Bytes of events queued for all streams, and their bound.
    budget: Arc<subscribers::Budget>,
    /// The logs of tasks' recent events (resuming streams).
    pub(crate) logs: events::Logs,
    pub(crate) push: Option<PushSender>,
    /// Several replicas: the event bus (set by `with_bus`).
    pub(crate) cluster: Option<cluster::Cluster>,
    /// The signal of [`Publish::Settled`] (shared: no event is built).
    settled: Arc<StreamResponse>,
    /// The most bytes one artifact may grow to.
    pub(crate) max_artifact_bytes: usize,
    /// How writes that fail because of the storage are retried.
    pub(crate) retry: StoreRetry,
    /// This manager, shared (set by [`TaskManager::share`]): what a
    /// background task recording a storage failure holds.
    me: OnceLock<Weak<TaskManager>>,
    /// The sweep of tasks held too long runs (see `held.rs`).
    sweeping: std::sync::atomic::AtomicBool,
}

impl TaskManager {
    pub(crate) fn new(
        store: Arc<dyn TaskStore>,
        queue_capacity: usize,
        queue_bytes: usize,
        logs: events::LogLimits,
        push: Option<PushSender>,
    ) -> Self {
        Self {
            store,
            live: DashMap::default(),
            queue_capacity: queue_capacity.max(2),
            queue_bytes: queue_bytes.max(1),
            budget: subscribers::Budget::new(usize::MAX),
            logs: events::Logs::new(logs),
            push,
            cluster: None,
            settled: Arc::new(StreamResponse::default()),
            max_artifact_bytes: usize::MAX,
            retry: StoreRetry::default(),
            me: OnceLock::new(),
            sweeping: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Retries writes that fail because of the storage this way.
    pub(crate) fn with_store_retry(mut self, retry: StoreRetry) -> Self {
        self.retry = retry;
        self
    }

    /// Records the shared manager (once it is in its `Arc`).
    pub(crate) fn share(manager: Arc<Self>) -> Arc<Self> {
        let _ = manager.me.set(Arc::downgrade(&manager));
        manager
    }

    /// The shared manager (see [`Self::share`]).
    pub(super) fn shared(&self) -> Option<Arc<Self>> {
        self.me.get()?.upgrade()
    }

    /// Bounds the bytes of events queued for all streams together (see
    /// `subscribers.rs`).
    pub(crate) fn with_max_queued_bytes(mut self, max: usize) -> Self {
        self.budget = subscribers::Budget::new(max);
        self
    }

    /// The bytes queued for streams, and the streams cut (for the
    /// metrics).
    pub(crate) fn queue_stats(&self) -> subscribers::QueueStats {
        self.budget.stats()
    }

    /// Bounds the size of every artifact (appended chunks included).
    pub(crate) fn with_max_artifact_bytes(mut self, max: usize) -> Self {
        self.max_artifact_bytes = max;
        self
    }

    /// Retires the live state of a task nobody works on or follows.
    pub(crate) fn release(&self, live: &LiveTask) {
        let mut st = live.state.lock();
        st.subscribers.retain(|s| !s.is_closed());
        if st.running == 0 && st.subscribers.is_empty() && !st.retired {
            st.retired = true;
            let log = st.log.take();
            drop(st);
            // With other replicas, events can reach the task while this
            // one has no live state: a kept log could miss them.
            if let (Some(log), None) = (log, &self.cluster) {
                self.logs.retire(&live.id, log);
            }
            self.live
                .remove_if(&live.id, |_, v| std::ptr::eq(Arc::as_ptr(v), live));
        }
    }

    /// How many tasks have live state (for tests and metrics).
    #[allow(dead_code)]
    pub(crate) fn live_count(&self) -> usize {
        self.live.len()
    }
}
