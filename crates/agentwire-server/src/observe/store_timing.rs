//! The store operation latency metric,
//! `a2a_store_operation_duration_seconds{store, operation}`.
//!
//! Why a wrapper store ([`TimedStore`]) rather than a hook in the store's
//! callers: the task manager, the handler, the push configs, the crash
//! recovery, the retention timer and the readiness check all call the
//! store, through [`TaskStore`] or its [`ImmediateStore`] fast path; a
//! wrapper sees every one of those calls in one place, and a server without
//! metrics never builds it, so it costs nothing at all when metrics are off
//! (not even a branch). With metrics on, an operation costs two clock reads
//! and two relaxed atomic additions ([`OpHistogram`]: no lock, unlike
//! `prometheus-client`'s own histogram, whose mutex every request of every
//! core would take several times), and the wrapper keeps the store's fast
//! path: it offers [`ImmediateStore`] exactly when the store it wraps does.
//!
//! Labels are bounded: `store` is the store's [`TaskStore::kind`]
//! (`memory`, `sqlite`, `postgres`, or `custom`), `operation` one of
//! [`OPERATIONS`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentwire_types::{A2aResult, Task};
use async_trait::async_trait;
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

use crate::store::{
    ImmediateStore, LogSpan, Owner, QueuedStore, StoredPushConfig, StoredTask, TaskPage, TaskQuery,
    TaskStore, TaskUpdate, Updated,
};

/// The store operations, as the `operation` label names them.
pub(crate) const OPERATIONS: [&str; 10] = [
    "create",
    "update",
    "get",
    "list",
    "put_push_config",
    "get_push_config",
    "list_push_configs",
    "delete_push_config",
    "purge",
    "unfinished",
];

/// An index into [`OPERATIONS`].
#[derive(Clone, Copy)]
enum Op {
    Create,
    Update,
    Get,
    List,
    PutPush,
    GetPush,
    ListPush,
    DeletePush,
    Purge,
    Unfinished,
}

/// The upper bounds of the buckets, in nanoseconds: 10 us to 10 s (a
/// memory store answers in microseconds, a database in milliseconds).
const BOUNDS_NS: [u64; 16] = [
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    1_000_000_000,
    5_000_000_000,
    10_000_000_000,
];

#[derive(Default)]
struct Counts {
    /// Observations per bucket (not cumulative); the last one is `+Inf`.
    buckets: [AtomicU64; BOUNDS_NS.len() + 1],
    /// The sum of the observations, in nanoseconds.
    sum_ns: AtomicU64,
}

/// A latency histogram without a lock: one relaxed atomic addition to a
/// bucket and one to the sum per observation. (The count is the sum of the
/// buckets, read at scrape time; a scrape racing an observation may see
/// its bucket and not yet its time in the sum, never a bucket count that
/// goes down.)
#[derive(Clone, Default)]
pub(crate) struct OpHistogram(Arc<Counts>);

impl std::fmt::Debug for OpHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpHistogram").finish_non_exhaustive()
    }
}

impl OpHistogram {
    fn observe(&self, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let i = BOUNDS_NS.partition_point(|&b| b < ns);
        self.0.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.0.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }
}

impl TypedMetric for OpHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for OpHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        // (The encoder makes the counts cumulative.)
        let mut count = 0u64;
        let mut buckets = Vec::with_capacity(BOUNDS_NS.len() + 1);
        for (i, n) in self.0.buckets.iter().enumerate() {
            let n = n.load(Ordering::Relaxed);
            count += n;
            let bound = BOUNDS_NS.get(i).map_or(f64::INFINITY, |&b| b as f64 / 1e9);
            buckets.push((bound, n));
        }
        let sum = self.0.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// The labels of the metric.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct StoreOpLabels {
    pub(crate) store: &'static str,
    pub(crate) operation: &'static str,
}

/// A store whose operations are timed into the metric (see the module's
/// documentation).
pub(crate) struct TimedStore {
    inner: Arc<dyn TaskStore>,
    /// One histogram per operation, in [`OPERATIONS`] order (resolved once:
    /// no label lookup per operation).
    ops: [OpHistogram; OPERATIONS.len()],
}

impl TimedStore {
    /// `inner`, timed into `metrics`.
    pub(crate) fn wrap(inner: Arc<dyn TaskStore>, metrics: &super::Metrics) -> Arc<dyn TaskStore> {
        let store = inner.kind();
        let ops = OPERATIONS.map(|operation| metrics.store_histogram(store, operation));
        Arc::new(Self { inner, ops })
    }

    /// Times `f` as `op`.
    #[inline]
    fn time<T>(&self, op: Op, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.ops[op as usize].observe(start.elapsed());
        out
    }

    /// Times the future `f` as `op`.
    async fn timed<T>(&self, op: Op, f: impl std::future::Future<Output = T>) -> T {
        let start = Instant::now();
        let out = f.await;
        self.ops[op as usize].observe(start.elapsed());
        out
    }

    fn now(&self) -> &dyn ImmediateStore {
        // Only reached through `immediate()`, which is `Some` only when the
        // inner store has the capability.
        self.inner
            .immediate()
            .expect("TimedStore offers ImmediateStore only when its store does")
    }
}

impl ImmediateStore for TimedStore {
    fn create_now(&self, owner: &Owner, task: Task) -> A2aResult<()> {
        self.time(Op::Create, || self.now().create_now(owner, task))
    }

    fn create_shared_now(&self, owner: &Owner, task: &Arc<Task>) -> A2aResult<()> {
        self.time(Op::Create, || self.now().create_shared_now(owner, task))
    }

    fn update_now(&self, task_id: &str, update: TaskUpdate) -> A2aResult<Updated> {
        self.time(Op::Update, || self.now().update_now(task_id, update))
    }

    fn get_now(
        &self,
        task_id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<StoredTask>> {
        self.time(Op::Get, || self.now().get_now(task_id, history_length))
    }

    fn get_shared(&self, task_id: &str) -> A2aResult<Option<Arc<Task>>> {
        self.time(Op::Get, || self.now().get_shared(task_id))
    }
}

#[async_trait]
impl TaskStore for TimedStore {
    fn immediate(&self) -> Option<&dyn ImmediateStore> {
        self.inner.immediate().map(|_| self as &dyn ImmediateStore)
    }

    fn queued(&self) -> Option<&dyn QueuedStore> {
        // Queued updates (artifact chunks) answer through their `done`,
        // after the store's group commit: not timed, the fast path kept.
        self.inner.queued()
    }

    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn check_room(&self, bytes: usize, new_task: bool) -> A2aResult<()> {
        self.inner.check_room(bytes, new_task)
    }

    fn expired_tasks(&self) -> crate::store::ExpiredTasks {
        self.inner.expired_tasks()
    }

    async fn create(&self, owner: &Owner, task: Task) -> A2aResult<Option<LogSpan>> {
        self.timed(Op::Create, self.inner.create(owner, task)).await
    }

    async fn update(&self, task_id: &str, update: TaskUpdate) -> A2aResult<Updated> {
        self.timed(Op::Update, self.inner.update(task_id, update))
            .await
    }

    async fn get(
        &self,
        task_id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<StoredTask>> {
        self.timed(Op::Get, self.inner.get(task_id, history_length))
            .await
    }

    async fn list(&self, owner: &Owner, query: &TaskQuery) -> A2aResult<TaskPage> {
        self.timed(Op::List, self.inner.list(owner, query)).await
    }

    async fn put_push_config(&self, config: &StoredPushConfig) -> A2aResult<()> {
        self.timed(Op::PutPush, self.inner.put_push_config(config))
            .await
    }

    async fn get_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> A2aResult<Option<StoredPushConfig>> {
        self.timed(Op::GetPush, self.inner.get_push_config(task_id, id))
            .await
    }

    async fn list_push_configs(&self, task_id: &str) -> A2aResult<Vec<StoredPushConfig>> {
        self.timed(Op::ListPush, self.inner.list_push_configs(task_id))
            .await
    }

    async fn delete_push_config(&self, task_id: &str, id: &str) -> A2aResult<bool> {
        self.timed(Op::DeletePush, self.inner.delete_push_config(task_id, id))
            .await
    }

    async fn purge_terminal_older_than(&self, age: Duration) -> A2aResult<u64> {
        self.timed(Op::Purge, self.inner.purge_terminal_older_than(age))
            .await
    }

    async fn unfinished(&self) -> A2aResult<Vec<StoredTask>> {
        self.timed(Op::Unfinished, self.inner.unfinished()).await
    }

    async fn unfinished_for_recovery(&self) -> A2aResult<crate::store::RecoveryScan> {
        self.timed(Op::Unfinished, self.inner.unfinished_for_recovery())
            .await
    }

    async fn owner_of(&self, task_id: &str) -> A2aResult<Option<Owner>> {
        self.timed(Op::Get, self.inner.owner_of(task_id)).await
    }

    fn unreadable_rows(&self) -> u64 {
        self.inner.unreadable_rows()
    }

    async fn open_task_owners(&self) -> A2aResult<Vec<(String, Owner)>> {
        self.timed(Op::Unfinished, self.inner.open_task_owners())
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;
    use agentwire_types::{TaskState, TaskStatus};

    #[tokio::test]
    async fn every_operation_is_timed_and_the_fast_path_kept() {
        let metrics = super::super::Metrics::new();
        let store = TimedStore::wrap(Arc::new(MemoryStore::default()), &metrics);
        assert_eq!(store.kind(), "memory");
        let now = store
            .immediate()
            .expect("the memory store's fast path kept");
        let task = Task {
            id: "t1".into(),
            context_id: "c1".into(),
            status: Some(TaskStatus::new(TaskState::Working)),
            ..Default::default()
        };
        now.create_now(&Owner::default(), task).expect("created");
        now.get_now("t1", None).expect("read");
        store.get("t1", None).await.expect("read");
        let text = metrics.render();
        for part in [
            "# TYPE a2a_store_operation_duration_seconds histogram",
            r#"a2a_store_operation_duration_seconds_count{store="memory",operation="create"} 1"#,
            r#"a2a_store_operation_duration_seconds_count{store="memory",operation="get"} 2"#,
            r#"a2a_store_operation_duration_seconds_bucket{le="+Inf",store="memory",operation="get"} 2"#,
            r#"a2a_store_operation_duration_seconds_bucket{le="10.0",store="memory",operation="get"} 2"#,
            r#"a2a_store_operation_duration_seconds_count{store="memory",operation="list"} 0"#,
        ] {
            assert!(text.contains(part), "{part} in:\n{text}");
        }
    }

    /// Every method the store traits give a default is forwarded (a
    /// default answer would hide the store's: `queued` was not, and a
    /// server with metrics lost the group commit of artifact chunks).
    #[tokio::test]
    async fn every_defaulted_method_is_forwarded() {
        let metrics = super::super::Metrics::new();
        let store = TimedStore::wrap(Arc::new(crate::store::marked::Marked), &metrics);
        crate::store::marked::assert_forwards(&*store).await;
    }

    #[test]
    fn buckets_are_cumulative_and_bounded() {
        let h = OpHistogram::default();
        h.observe(Duration::from_micros(5));
        h.observe(Duration::from_micros(30));
        h.observe(Duration::from_secs(60));
        let b = &h.0.buckets;
        assert_eq!(b[0].load(Ordering::Relaxed), 1);
        assert_eq!(b[2].load(Ordering::Relaxed), 1);
        assert_eq!(b[BOUNDS_NS.len()].load(Ordering::Relaxed), 1);
    }
}
