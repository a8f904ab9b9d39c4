//! The in-memory task store: sharded maps, a lock per task, bounded size.
//!
//! The store is bounded in tasks and in bytes. Every task carries an
//! estimate of the memory it takes (`Slot::bytes`): a finished task, kept
//! as its protobuf encoding, counts that encoding's length; an open one
//! counts twice its encoding (the decoded structures take about that much
//! more), each update adding twice the size of what it adds. Work that
//! would pass a bound is refused (`Unavailable`) after the oldest finished
//! tasks were evicted to make room; the update that finishes a task is
//! never refused, so no task is left open by the bound.
//!
//! Tasks expire: finished ones after `terminal_ttl`, open ones (interrupted
//! or still working) after `idle_ttl` without a change. Expiry runs on
//! every write that finishes a task and on a timer the store starts on the
//! first task it holds (in the tokio runtime that stores it), so an idle
//! store empties too.

mod packed;
mod task_table;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use agentwire_types::{A2aError, A2aResult, Task, TaskState};
use async_trait::async_trait;
use dashmap::DashMap;
use parking_lot::Mutex;
use prost::Message as _;

use self::task_table::{Held, Slot, TaskTable};
use super::{
    Cursor, ExpiredTasks, ImmediateStore, LogSpan, Owner, StoredPushConfig, StoredTask, TaskPage,
    TaskQuery, TaskStore, TaskUpdate, Updated, apply_update, check_open, closed_error,
};

/// The most finished tasks one write evicts (a sweep has no limit).
const EVICT_PER_WRITE: usize = 64;

/// Bytes accounted to every task besides its contents: its slot, the
/// structures that hold it and its place in the eviction queue.
const TASK_OVERHEAD: usize = 64;

/// Limits of the in-memory store. Finished tasks leave memory after
/// `terminal_ttl`, open ones after `idle_ttl` without a change; when the
/// store is full (`max_tasks` or `max_bytes`) the oldest finished tasks
/// leave first, and new work is refused when none is left to evict.
#[derive(Debug, Clone)]
pub struct MemoryStoreConfig {
    /// How long a task in a terminal state is kept.
    pub terminal_ttl: Duration,
    /// How long a task that is not in a terminal state (interrupted, as
    /// input-required or auth-required, or still submitted or working) is
    /// kept after its last change. A client continuing it later gets
    /// `TaskNotFoundError`. Default: one hour.
    pub idle_ttl: Duration,
    /// How many tasks are held at most: a new task beyond it is refused
    /// when no finished task can make room.
    pub max_tasks: usize,
    /// How many bytes the tasks held may take, by the store's estimate (see
    /// [`MemoryStore::accounted_bytes`]): a new task, or an update that
    /// adds to a task, is refused beyond it when no finished task can make
    /// room. Default: 256 MiB.
    pub max_bytes: usize,
}

impl Default for MemoryStoreConfig {
    fn default() -> Self {
        Self {
            terminal_ttl: Duration::from_secs(600),
            idle_ttl: Duration::from_secs(3600),
            max_tasks: 10_000,
            max_bytes: 256 * 1024 * 1024,
        }
    }
}

type Map<V> = DashMap<String, V, ahash::RandomState>;

/// Finished tasks with the time they finished, oldest first: the hash of
/// each one's id and its token (see [`PackedTask`]), with which eviction
/// finds the task's slot without reading the task.
///
/// [`PackedTask`]: super::packed::PackedTask
/// The time is in the store's ticks (see `now_ticks`): one clock read per
/// finished task, and comparisons of integers.
type FinishedQueue = VecDeque<(u32, u64, usize)>;

/// A [`TaskStore`] in process memory. Nothing survives a restart.
pub struct MemoryStore {
    /// Shared with the store's expiry timer, which holds it weakly.
    shared: Arc<Shared>,
}

/// What a room check asks for: this many more tasks and bytes.
#[derive(Clone, Copy)]
struct Room {
    tasks: usize,
    bytes: usize,
}

impl Room {
    const NONE: Room = Room { tasks: 0, bytes: 0 };
}

struct Shared {
    /// Tasks are updated under their shard's lock: an update is short, and
    /// a lock per task would cost every task an allocation.
    tasks: TaskTable,
    push: Map<Vec<StoredPushConfig>>,
    /// Whether a push config was ever stored (eviction skips the push map
    /// otherwise).
    any_push: AtomicBool,
    /// Finished tasks in the order they finished, one queue per group of
    /// threads: eviction pops the fronts (see [`home_queue`]).
    finished: Box<[Mutex<FinishedQueue>]>,
    /// Number of tasks held (counting would lock every shard).
    count: AtomicUsize,
    /// Bytes accounted to the tasks held (the sum of their `Slot::bytes`).
    bytes: AtomicUsize,
    /// When the store started: `Slot::touched` counts ticks from it.
    epoch: Instant,
    /// Whether the expiry timer runs.
    timer: AtomicBool,
    /// The tasks the store removed on its own, by why (see
    /// [`TaskStore::expired_tasks`]).
    expired: ExpiryCounters,
    config: MemoryStoreConfig,
}

/// What [`Shared::expire`] counts a removed task as.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Count {
    /// Expired or evicted on the store's own account: counted.
    Own,
    /// Removed by [`TaskStore::purge_terminal_older_than`], whose caller
    /// counts what it returns.
    Purge,
}

/// The counters behind [`TaskStore::expired_tasks`].
#[derive(Default)]
struct ExpiryCounters {
    finished_ttl: AtomicU64,
    open_ttl: AtomicU64,
    evicted: AtomicU64,
}

/// One tick of `Slot::touched`: 10 ms (a `u32` of them lasts 497 days).
const TICK_MS: u128 = 10;

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new(MemoryStoreConfig::default())
    }
}

impl MemoryStore {
    /// A store with the given limits.
    pub fn new(config: MemoryStoreConfig) -> Self {
        Self {
            shared: Arc::new(Shared {
                tasks: TaskTable::default(),
                push: Map::default(),
                any_push: AtomicBool::new(false),
                finished: (0..FINISHED_QUEUES)
                    .map(|_| Mutex::new(VecDeque::new()))
                    .collect(),
                count: AtomicUsize::new(0),
                bytes: AtomicUsize::new(0),
                epoch: Instant::now(),
                timer: AtomicBool::new(false),
                expired: ExpiryCounters::default(),
                config,
            }),
        }
    }

    /// How many tasks are held.
    pub fn len(&self) -> usize {
        self.shared.len()
    }

    /// Whether no task is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes the tasks held take, by the store's estimate: what
    /// [`MemoryStoreConfig::max_bytes`] bounds.
    pub fn accounted_bytes(&self) -> usize {
        self.shared.bytes.load(Ordering::Relaxed)
    }

    /// Evicts expired tasks (finished ones older than the TTL, open ones
    /// idle for longer than theirs), and the oldest finished ones while the
    /// store is over its limits. The store's timer calls it; so may anyone.
    pub fn sweep(&self) {
        self.shared.sweep();
    }

    /// Starts the expiry timer, once, when there is a tokio runtime to run
    /// it (a later write tries again when there is none).
    fn start_timer(&self) {
        if self.shared.timer.load(Ordering::Relaxed) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.shared.timer.swap(true, Ordering::AcqRel) {
            return;
        }
        let every = self.shared.sweep_every();
        let weak: Weak<Shared> = Arc::downgrade(&self.shared);
        runtime.spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                // The store is gone: so is its timer.
                let Some(shared) = weak.upgrade() else { break };
                shared.sweep();
            }
        });
    }
}

impl Shared {
    fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// The current time in ticks.
    fn now_ticks(&self) -> u32 {
        u32::try_from(self.epoch.elapsed().as_millis() / TICK_MS).unwrap_or(u32::MAX)
    }

    /// How often the timer sweeps: a quarter of the shorter lifetime,
    /// between 50 ms and 30 s.
    fn sweep_every(&self) -> Duration {
        let shortest = self.config.terminal_ttl.min(self.config.idle_ttl);
        (shortest / 4).clamp(Duration::from_millis(50), Duration::from_secs(30))
    }

    /// Whether `room` more would pass a limit.
    fn crowded(&self, room: Room) -> bool {
        self.len() + room.tasks > self.config.max_tasks
            || self.bytes.load(Ordering::Relaxed) + room.bytes > self.config.max_bytes
    }

    /// Whether `room` fits now, after the oldest finished tasks left to
    /// make it (nothing is taken: see [`Shared::reserve`]).
    fn check_free(&self, room: Room) -> A2aResult<()> {
        if self.crowded(room) {
            self.make_room(room);
            if self.crowded(room) {
                return Err(self.full_error(room));
            }
        }
        Ok(())
    }

    /// Accounts `room` to the store, evicting the oldest finished tasks
    /// first when it does not fit; refuses when it still does not. The
    /// room is taken before it is checked, so concurrent writers never pass
    /// a limit together.
    fn reserve(&self, room: Room) -> A2aResult<()> {
        if room.tasks == 0 && room.bytes == 0 {
            return Ok(());
        }
        for attempt in 0..2 {
            // An update takes no task: reading the count spares a write to
            // a counter every thread of the server updates.
            let tasks = if room.tasks == 0 {
                self.count.load(Ordering::Acquire)
            } else {
                self.count.fetch_add(room.tasks, Ordering::AcqRel) + room.tasks
            };
            let bytes = self.bytes.fetch_add(room.bytes, Ordering::AcqRel) + room.bytes;
            if tasks <= self.config.max_tasks && bytes <= self.config.max_bytes {
                return Ok(());
            }
            self.release(room);
            if attempt == 0 {
                self.make_room(room);
            }
        }
        Err(self.full_error(room))
    }

    /// Gives back what [`Shared::reserve`] took.
    fn release(&self, room: Room) {
        if room.tasks > 0 {
            self.count.fetch_sub(room.tasks, Ordering::AcqRel);
        }
        if room.bytes > 0 {
            self.bytes.fetch_sub(room.bytes, Ordering::AcqRel);
        }
    }

    /// The refusal when the store is full (the spec's system error for a
    /// temporary failure: JSON-RPC -32603, HTTP 503, gRPC UNAVAILABLE).
    fn full_error(&self, room: Room) -> A2aError {
        let limit = if self.len() + room.tasks > self.config.max_tasks {
            format!("{} tasks", self.config.max_tasks)
        } else {
            format!("{} bytes of tasks", self.config.max_bytes)
        };
        A2aError::unavailable(format!(
            "the server holds as many tasks as it may ({limit}, none of them finished long \
             enough to make room): try again later, once older tasks have expired"
        ))
    }

    /// Evicts the oldest finished tasks, from every queue, until `room`
    /// fits or none is left.
    fn make_room(&self, room: Room) {
        self.evict_oldest(home_queue().0, room, None);
    }

    /// A task just reached a terminal state: it joins this thread's queue,
    /// and the finished tasks of that queue past their TTL leave. While the
    /// store is over its limits the oldest finished tasks of all queues
    /// leave (never the one just finished while an older one is held).
    /// Every [`OTHER_QUEUE_EVERY`] finishes a thread also looks at another
    /// queue, so the tasks finished by threads that went quiet still expire.
    fn finished_now(&self, hash: u64, token: usize, now: u32) {
        let (home, turn) = home_queue();
        let n = self.finished.len();
        self.finished[home % n].lock().push_back((now, hash, token));
        let ttl = self.config.terminal_ttl;
        self.expire(home % n, now, ttl, Some(EVICT_PER_WRITE), Count::Own);
        if turn % OTHER_QUEUE_EVERY == 0 {
            let other = (home + 1 + turn / OTHER_QUEUE_EVERY) % n;
            self.expire(other, now, ttl, Some(EVICT_PER_WRITE), Count::Own);
        }
        // Room for one more task: the next create then fits at once.
        let room = Room { tasks: 1, bytes: 0 };
        if self.crowded(room) {
            self.evict_oldest(home, room, Some(EVICT_PER_WRITE));
        }
    }

    /// Evicts finished tasks older than the TTL and the oldest finished
    /// ones while over the limits, and open tasks idle for longer than
    /// `idle_ttl`.
    fn sweep(&self) {
        let now = self.now_ticks();
        for q in 0..self.finished.len() {
            self.expire(q, now, self.config.terminal_ttl, None, Count::Own);
        }
        self.evict_oldest(home_queue().0, Room::NONE, None);
        let idle = self.config.idle_ttl.as_millis() / TICK_MS;
        let idle = u32::try_from(idle).unwrap_or(u32::MAX);
        let ticks = self.now_ticks();
        let stale = self.tasks.remove_where(|slot| {
            matches!(slot.held, Held::Open(_)) && ticks.saturating_sub(slot.touched) >= idle
        });
        for slot in &stale {
            self.forget(slot);
        }
        self.expired
            .open_ttl
            .fetch_add(stale.len() as u64, Ordering::Relaxed);
        if !stale.is_empty() {
            tracing::debug!(
                expired = stale.len(),
                "memory store: open tasks expired after {:?} without a change",
                self.config.idle_ttl
            );
        }
    }

    /// Accounts a slot that left the table.
    fn forget(&self, slot: &Slot) {
        self.release(Room {
            tasks: 1,
            bytes: slot.bytes as usize,
        });
        if self.any_push.load(Ordering::Relaxed) {
            self.push.remove(slot.id());
        }
    }

    /// Removes from queue `q` the finished tasks older than `max_age`; at
    /// most `limit` (and none if someone else is at that queue) when a limit
    /// is given. Returns how many left; `count` says whether the store
    /// counts them itself.
    fn expire(
        &self,
        q: usize,
        now: u32,
        max_age: Duration,
        limit: Option<usize>,
        count: Count,
    ) -> usize {
        let queue = &self.finished[q];
        let max_age = u32::try_from(max_age.as_millis() / TICK_MS).unwrap_or(u32::MAX);
        let mut expired = 0;
        while limit.is_none_or(|l| expired < l) {
            let next = {
                let mut queue = match limit {
                    None => queue.lock(),
                    // Someone else is at this queue: they will get to it.
                    Some(_) => match queue.try_lock() {
                        Some(q) => q,
                        None => break,
                    },
                };
                match queue.front() {
                    Some((at, _, _)) if now.saturating_sub(*at) >= max_age => queue.pop_front(),
                    _ => break,
                }
            };
            // The task is freed outside of the queue's lock.
            let Some((_, hash, token)) = next else {
                break;
            };
            self.remove_finished(hash, token, count, &self.expired.finished_ttl);
            expired += 1;
        }
        expired
    }

    /// Evicts the oldest finished tasks, across every queue, while `room`
    /// does not fit; at most `limit` when a limit is given (and then the
    /// queues someone else holds are passed over). Returns how many left.
    ///
    /// The oldest is found by looking at the front of each queue (a queue
    /// is in finishing order): a few uncontended locks, paid only while
    /// the store is full. Evicting from this thread's queue alone would be
    /// cheaper, but it takes the task this thread just finished while
    /// older ones stay.
    /// `home` is this thread's queue (see [`home_queue`]).
    fn evict_oldest(&self, home: usize, room: Room, limit: Option<usize>) -> usize {
        let n = self.finished.len();
        let mut evicted = 0;
        while limit.is_none_or(|l| evicted < l) && self.crowded(room) {
            // The queue with the oldest front; on a tie, the one nearest
            // this thread's own (what it frees, it allocated).
            let mut oldest: Option<(u32, usize)> = None;
            for i in 0..n {
                let q = (home + i) % n;
                let front = match limit {
                    None => self.finished[q].lock().front().map(|e| e.0),
                    Some(_) => self.finished[q]
                        .try_lock()
                        .and_then(|queue| queue.front().map(|e| e.0)),
                };
                if let Some(at) = front
                    && oldest.is_none_or(|(o, _)| at < o)
                {
                    oldest = Some((at, q));
                }
            }
            let Some((_, q)) = oldest else {
                break;
            };
            // Another thread may have taken that front meanwhile: the next
            // one of that queue is then the oldest left there.
            let Some((_, hash, token)) = self.finished[q].lock().pop_front() else {
                continue;
            };
            self.remove_finished(hash, token, Count::Own, &self.expired.evicted);
            evicted += 1;
        }
        evicted
    }

    /// Removes a finished task that left its queue, counting it in
    /// `counter` when the store counts it itself.
    fn remove_finished(&self, hash: u64, token: usize, count: Count, counter: &AtomicU64) {
        if let Some(slot) = self.tasks.remove_exact(hash, token) {
            self.forget(&slot);
            if count == Count::Own {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
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

/// The bytes accounted to a task as stored: its encoding when it is
/// finished (it is kept packed, and the packed bytes give its length without
/// encoding the task again), twice that when it is open.
fn stored_bytes(held: &Held) -> usize {
    match held {
        Held::Finished(packed) => packed.len() + TASK_OVERHEAD,
        Held::Open(task) => 2 * task.encoded_len() + std::mem::size_of::<Task>() + TASK_OVERHEAD,
    }
}

/// What an update may add to an open task's bytes: twice what it adds (a
/// status's message also joins the history). Replaced content is not
/// subtracted: the estimate only errs upwards, and is exact again once the
/// task is finished and packed.
fn update_bytes(update: &TaskUpdate) -> usize {
    let added = match update {
        TaskUpdate::Status { status, .. } => {
            status.encoded_len() + status.message.as_ref().map_or(0, |m| m.encoded_len())
        }
        TaskUpdate::Artifact { artifact, .. } => artifact.encoded_len(),
        TaskUpdate::UserMessage(m) => m.encoded_len(),
    };
    2 * added
}

/// A slot's byte count (a task over 4 GiB counts 4 GiB).
fn slot_bytes(bytes: usize) -> u32 {
    u32::try_from(bytes).unwrap_or(u32::MAX)
}

/// Listing.
impl MemoryStore {
    /// A page of the owner's tasks from a scan of every task: the tasks
    /// that match are counted, and the newest `page_size + 1` before the
    /// cursor are kept in a heap (their ids copied only when they enter
    /// it); only the page's tasks are decoded. At the default cap (10,000
    /// tasks) a page takes about a millisecond (docs/performance.md, "The
    /// fast paths").
    fn list_now(&self, owner: &Owner, query: &TaskQuery) -> A2aResult<TaskPage> {
        let after = query.status_after.map(|t| t.as_millis());
        let cursor = query.cursor.as_ref().map(|c| (c.millis, c.id.as_str()));
        let want = query.page_size.saturating_add(1);
        let mut total = 0;
        let mut newest: BinaryHeap<Reverse<Listed>> = BinaryHeap::with_capacity(want.min(101));
        self.shared.tasks.for_each(|slot| {
            if !slot.is_owned_by(owner) || query.state.is_some_and(|s| s != slot.state()) {
                return;
            }
            let timestamp = slot.status_timestamp();
            // A task without a time never matches a time.
            if after.is_some_and(|a| timestamp.is_none_or(|t| t.as_millis() < a))
                || query
                    .context_id
                    .as_deref()
                    .is_some_and(|c| c != slot.context_id())
            {
                return;
            }
            total += 1;
            let millis = timestamp.map_or(0, |t| t.as_millis());
            // Older than the oldest kept, or newer than the cursor: the id
            // is not read.
            if newest.len() == want
                && newest
                    .peek()
                    .is_some_and(|Reverse(oldest)| millis < oldest.cursor.millis)
                || cursor.is_some_and(|(m, _)| millis > m)
            {
                return;
            }
            let key = (millis, slot.id());
            if cursor.is_some_and(|c| key >= c) {
                return;
            }
            if newest.len() == want {
                match newest.peek() {
                    Some(Reverse(oldest)) if key > (oldest.cursor.millis, &*oldest.cursor.id) => {
                        newest.pop();
                    }
                    _ => return,
                }
            }
            newest.push(Reverse(Listed {
                cursor: Cursor {
                    millis: key.0,
                    id: key.1.to_owned(),
                },
                held: slot.held.clone(),
            }));
        });
        // Newest first.
        let mut found: Vec<Listed> = newest.into_sorted_vec().into_iter().map(|r| r.0).collect();
        let next = if query.page_size > 0 && found.len() > query.page_size {
            found.truncate(query.page_size);
            found.last().map(|l| l.cursor.clone())
        } else {
            found.truncate(query.page_size);
            None
        };
        let mut tasks = Vec::with_capacity(found.len());
        for l in &found {
            tasks.push(l.held.copy(query.history_length, query.include_artifacts)?);
        }
        Ok(TaskPage { tasks, next, total })
    }
}

/// A task a listing found: its place in the listing order, and the task.
struct Listed {
    cursor: Cursor,
    held: Held,
}

/// Ordered by the place alone.
impl Ord for Listed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.cursor.millis, &self.cursor.id).cmp(&(other.cursor.millis, &other.cursor.id))
    }
}

impl PartialOrd for Listed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Listed {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Listed {}

/// The memory store answers at once: the task manager calls it without a
/// future.
impl ImmediateStore for MemoryStore {
    fn create_now(&self, owner: &Owner, mut task: Task) -> A2aResult<()> {
        // A task exists at generation 1 at least (as the SQL stores read
        // one written without it).
        task.generation = task.generation.max(1);
        self.create_shared_now(owner, &Arc::new(task))
    }

    /// The task is kept as it is, not copied: shared while it is open,
    /// packed at once when it is terminal.
    fn create_shared_now(&self, owner: &Owner, task: &Arc<Task>) -> A2aResult<()> {
        let s = &*self.shared;
        let now = s.now_ticks();
        // A task stored finished is packed first: its size is then known
        // (dropped unstored if the room is refused).
        let mut slot = Slot::new(task, owner, 0, now);
        let bytes = stored_bytes(&slot.held).min(u32::MAX as usize);
        slot.bytes = slot_bytes(bytes);
        let room = Room { tasks: 1, bytes };
        if !task.state().is_terminal() {
            // An open task also needs a sixteenth of `max_bytes` free: that
            // much is kept for the updates of the tasks already open, so
            // that a task let in is not refused its next write.
            s.check_free(Room {
                tasks: 1,
                bytes: bytes + s.config.max_bytes / 16,
            })?;
        }
        s.reserve(room)?;
        self.start_timer();
        let hash = s.tasks.hash(&task.id);
        let token = slot.token();
        if s.tasks.insert(hash, slot, task).is_err() {
            s.release(room);
            return Err(A2aError::internal(format!(
                "task id {} already exists",
                task.id
            )));
        }
        if let Some(token) = token {
            s.finished_now(hash, token, now);
        }
        Ok(())
    }

    /// Also hands over the task when its new state ends the agent's turn
    /// (terminal or interrupted), for the request waiting for that: a task
    /// that reached a terminal state is packed, and the one handed over is
    /// then the only unpacked copy.
    fn update_now(&self, task_id: &str, update: TaskUpdate) -> A2aResult<Updated> {
        let s = &*self.shared;
        // The update that finishes a task is never refused (it frees room).
        let finishes =
            matches!(&update, TaskUpdate::Status { status, .. } if status.state().is_terminal());
        let room = Room {
            tasks: 0,
            bytes: if finishes { 0 } else { update_bytes(&update) },
        };
        s.reserve(room)?;
        let hash = s.tasks.hash(task_id);
        let ticks = s.now_ticks();
        let applied = s.tasks.write(hash, task_id, |slot| {
            let Held::Open(task) = &mut slot.held else {
                return Err(closed_error(slot.id(), slot.state()));
            };
            // Refused before the task is copied for writing.
            check_open(task)?;
            apply_update(Arc::make_mut(task), update)?;
            let state = (task.state(), task.generation);
            let before = slot.bytes as usize;
            slot.touched = ticks;
            if !state.0.is_terminal() {
                slot.bytes = slot_bytes(before + room.bytes);
                let task = state.0.ends_turn().then(|| Arc::clone(task));
                return Ok((state, None, task, before, slot.bytes as usize));
            }
            // Nothing changes a terminal task, so this happens once.
            let (token, task) = slot
                .finish()
                .ok_or_else(|| A2aError::internal("a finished task was packed twice"))?;
            slot.bytes = slot_bytes(stored_bytes(&slot.held));
            Ok((state, Some(token), Some(task), before, slot.bytes as usize))
        });
        match applied {
            None => {
                s.release(room);
                Err(A2aError::task_not_found(task_id))
            }
            Some(Err(e)) => {
                s.release(room);
                Err(e)
            }
            Some(Ok(((state, generation), token, task, before, after))) => {
                // The room taken is what an open task grew by; a finished
                // one's exact size replaces its estimate.
                let taken = before + room.bytes;
                if after > taken {
                    s.bytes.fetch_add(after - taken, Ordering::AcqRel);
                } else if after < taken {
                    s.bytes.fetch_sub(taken - after, Ordering::AcqRel);
                }
                if let Some(token) = token {
                    s.finished_now(hash, token, ticks);
                }
                let updated = Updated::new(state).at_generation(generation);
                Ok(match task {
                    Some(task) => updated.with_task(task),
                    None => updated,
                })
            }
        }
    }

    fn get_now(
        &self,
        task_id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<StoredTask>> {
        let tasks = &self.shared.tasks;
        tasks
            .read(tasks.hash(task_id), task_id, |slot| {
                Ok(StoredTask {
                    owner: slot.owner(),
                    task: slot.held.copy(history_length, true)?,
                })
            })
            .transpose()
    }

    /// The stored task: itself (shared, not copied) while it is open.
    fn get_shared(&self, task_id: &str) -> A2aResult<Option<Arc<Task>>> {
        let tasks = &self.shared.tasks;
        tasks
            .read(tasks.hash(task_id), task_id, Slot::task)
            .transpose()
    }
}

#[async_trait]
impl TaskStore for MemoryStore {
    fn immediate(&self) -> Option<&dyn ImmediateStore> {
        Some(self)
    }

    fn kind(&self) -> &'static str {
        "memory"
    }

    /// Room for the message a task is sent (it joins the task's history),
    /// by the estimate its write will take, after the oldest finished
    /// tasks left to make it. A message that would start a new task needs
    /// nothing here: the agent may answer it with a message, which stores
    /// nothing; the task, if the agent makes one, is refused when it is
    /// created (see [`ImmediateStore::create_now`]), with the same error.
    fn check_room(&self, bytes: usize, new_task: bool) -> A2aResult<()> {
        if new_task {
            return Ok(());
        }
        self.shared.check_free(Room {
            tasks: 0,
            bytes: 2 * bytes,
        })
    }

    fn expired_tasks(&self) -> ExpiredTasks {
        let e = &self.shared.expired;
        ExpiredTasks {
            finished_ttl: e.finished_ttl.load(Ordering::Relaxed),
            open_ttl: e.open_ttl.load(Ordering::Relaxed),
            evicted: e.evicted.load(Ordering::Relaxed),
        }
    }

    async fn create(&self, owner: &Owner, task: Task) -> A2aResult<Option<LogSpan>> {
        self.create_now(owner, task).map(|()| None)
    }

    async fn update(&self, task_id: &str, update: TaskUpdate) -> A2aResult<Updated> {
        self.update_now(task_id, update)
    }

    async fn get(
        &self,
        task_id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<StoredTask>> {
        self.get_now(task_id, history_length)
    }

    async fn list(&self, owner: &Owner, query: &TaskQuery) -> A2aResult<TaskPage> {
        self.list_now(owner, query)
    }

    async fn unfinished(&self) -> A2aResult<Vec<StoredTask>> {
        let mut out = Vec::new();
        self.shared.tasks.for_each(|slot| {
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
        let now = self.shared.now_ticks();
        let age = age.min(self.shared.config.terminal_ttl);
        let purged = (0..self.shared.finished.len())
            .map(|q| self.shared.expire(q, now, age, None, Count::Purge))
            .sum::<usize>();
        Ok(purged as u64)
    }

    async fn put_push_config(&self, config: &StoredPushConfig) -> A2aResult<()> {
        self.shared.any_push.store(true, Ordering::Relaxed);
        let mut configs = self
            .shared
            .push
            .entry(config.config.task_id.clone())
            .or_default();
        match configs.iter_mut().find(|c| c.config.id == config.config.id) {
            Some(existing) => *existing = config.clone(),
            None => configs.push(config.clone()),
        }
        Ok(())
    }

    async fn get_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> A2aResult<Option<StoredPushConfig>> {
        Ok(self
            .shared
            .push
            .get(task_id)
            .and_then(|c| c.iter().find(|c| c.config.id == id).cloned()))
    }

    async fn list_push_configs(&self, task_id: &str) -> A2aResult<Vec<StoredPushConfig>> {
        Ok(self
            .shared
            .push
            .get(task_id)
            .map(|c| c.clone())
            .unwrap_or_default())
    }

    async fn delete_push_config(&self, task_id: &str, id: &str) -> A2aResult<bool> {
        let Some(mut configs) = self.shared.push.get_mut(task_id) else {
            return Ok(false);
        };
        let before = configs.len();
        configs.retain(|c| c.config.id != id);
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
        let Updated {
            state,
            task: finished,
            ..
        } = s
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
        let handed = s.update_now("open", to(TaskState::Working, 1200)).unwrap();
        assert!(handed.task.is_none());
        let handed = s
            .update_now("open", to(TaskState::InputRequired, 1500))
            .unwrap();
        assert!(handed.task.is_some());

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
            ..MemoryStoreConfig::default()
        });
        fill(&s, "running", 500).await;
        s.sweep();
        assert!(s.len() <= 100, "{} tasks held", s.len());
        assert!(s.get("running", None).await.unwrap().is_some());
        assert!(s.get("t499", None).await.unwrap().is_some());
    }

    /// Tasks finished by two threads in turn (each thread has a queue of
    /// its own): beyond the cap the oldest leave, whichever thread finished
    /// them, and never the newest.
    #[test]
    fn the_oldest_finished_tasks_leave_whichever_thread_finished_them() {
        let s = MemoryStore::new(MemoryStoreConfig {
            terminal_ttl: Duration::from_secs(3600),
            max_tasks: 3,
            ..MemoryStoreConfig::default()
        });
        let finish = |id: String, i: i64| {
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .build()
                        .unwrap();
                    rt.block_on(
                        s.create(&Owner::default(), task(&id, "c", TaskState::Completed, i)),
                    )
                    .unwrap();
                });
            });
        };
        // Two long-lived threads would be closer to a server; a thread per
        // task is the extreme: every task in a queue of its own.
        for i in 0..8 {
            finish(format!("t{i}"), i);
            // Ten-millisecond ticks: each task finishes in a later one.
            std::thread::sleep(Duration::from_millis(25));
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let held: Vec<bool> = (0..8)
            .map(|i| {
                rt.block_on(s.get(&format!("t{i}"), None))
                    .unwrap()
                    .is_some()
            })
            .collect();
        // The newest two: a finish leaves room for the next task at once.
        assert_eq!(
            held,
            [false, false, false, false, false, false, true, true],
            "tasks held"
        );
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

    /// A status update to `state` carrying a message of `len` bytes.
    fn to_with_message(state: TaskState, len: usize) -> TaskUpdate {
        TaskUpdate::Status {
            status: TaskStatus {
                state: state as i32,
                message: Some(Box::new(Message::agent_text("x".repeat(len)))),
                timestamp: Some(Timestamp::from_millis(1)),
            },
            metadata: None,
        }
    }

    /// An anonymous caller starting task after task that each stops at
    /// input-required (and never comes back): the store's accounted bytes
    /// never pass the bound, and the tasks beyond it are refused with the
    /// spec's error for a temporary failure.
    #[tokio::test]
    async fn an_input_required_flood_stays_under_the_byte_bound() {
        const BOUND: usize = 1024 * 1024;
        let s = MemoryStore::new(MemoryStoreConfig {
            max_tasks: usize::MAX,
            max_bytes: BOUND,
            ..MemoryStoreConfig::default()
        });
        let me = Owner::default();
        let (mut held, mut refused) = (0, 0);
        for i in 0..5_000 {
            let id = format!("flood-{i}");
            let mut t = task(&id, "c", TaskState::Submitted, i);
            t.history = vec![Message::user_text("y".repeat(500))];
            let result = match s.create_now(&me, t) {
                Ok(()) => s
                    .update_now(&id, to_with_message(TaskState::InputRequired, 500))
                    .map(|_| ()),
                Err(e) => Err(e),
            };
            match result {
                Ok(()) => held += 1,
                Err(e) => {
                    assert_eq!(e.kind, agentwire_types::ErrorKind::Unavailable, "{e}");
                    assert!(e.message.contains("try again later"), "{e}");
                    refused += 1;
                }
            }
            assert!(
                s.accounted_bytes() <= BOUND,
                "{} bytes accounted after {i} tasks",
                s.accounted_bytes()
            );
        }
        assert!(held > 100, "only {held} tasks were held");
        assert!(refused > 1_000, "only {refused} tasks were refused");
        // Finished tasks make room: the bound refuses only what cannot fit.
        let done = task("done", "c", TaskState::Completed, 1);
        assert!(s.create_now(&me, done).is_err() || s.accounted_bytes() <= BOUND);
    }

    /// The update that finishes a task is taken even when the store is
    /// full (no task is left open by the bound), and what it frees makes
    /// room for new work.
    #[tokio::test]
    async fn a_full_store_still_finishes_tasks_and_then_makes_room() {
        let s = MemoryStore::new(MemoryStoreConfig {
            max_tasks: 2,
            ..MemoryStoreConfig::default()
        });
        let me = Owner::default();
        s.create_now(&me, task("a", "c", TaskState::Working, 1))
            .unwrap();
        s.create_now(&me, task("b", "c", TaskState::Working, 1))
            .unwrap();
        let err = s
            .create_now(&me, task("c", "c", TaskState::Working, 1))
            .unwrap_err();
        assert_eq!(err.kind, agentwire_types::ErrorKind::Unavailable);
        assert!(err.message.contains("2 tasks"), "{err}");
        s.update_now("a", to(TaskState::Completed, 2)).unwrap();
        // "a" is finished: it leaves to make room for "c".
        s.create_now(&me, task("c", "c", TaskState::Working, 1))
            .unwrap();
        assert!(s.get_now("a", None).unwrap().is_none());
        assert_eq!(s.len(), 2);
    }

    /// Nothing is written after the tasks were stored: the store's timer
    /// expires the finished ones and the interrupted ones alike.
    #[tokio::test]
    async fn an_idle_store_drops_expired_tasks() {
        let s = MemoryStore::new(MemoryStoreConfig {
            terminal_ttl: Duration::from_millis(100),
            idle_ttl: Duration::from_millis(300),
            ..MemoryStoreConfig::default()
        });
        let me = Owner::default();
        s.create_now(&me, task("done", "c", TaskState::Completed, 1))
            .unwrap();
        s.create_now(&me, task("asks", "c", TaskState::Working, 1))
            .unwrap();
        s.update_now("asks", to(TaskState::InputRequired, 2))
            .unwrap();
        s.create_now(&me, task("works", "c", TaskState::Working, 1))
            .unwrap();
        assert_eq!(s.len(), 3);
        assert!(s.accounted_bytes() > 0);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !s.is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(s.is_empty(), "{} tasks still held", s.len());
        assert_eq!(s.accounted_bytes(), 0);
    }

    /// The accounting follows the tasks: growing with updates, exact once
    /// a task is packed, and back to zero when they leave.
    #[tokio::test]
    async fn accounted_bytes_follow_the_tasks() {
        let s = MemoryStore::default();
        let me = Owner::default();
        s.create_now(&me, task("t", "c", TaskState::Working, 1))
            .unwrap();
        let open = s.accounted_bytes();
        s.update_now("t", to_with_message(TaskState::Working, 10_000))
            .unwrap();
        assert!(s.accounted_bytes() >= open + 20_000);
        s.update_now("t", to(TaskState::Completed, 2)).unwrap();
        let packed = s.accounted_bytes();
        let task = s.get_now("t", None).unwrap().unwrap().task;
        assert_eq!(packed, task.encoded_len() + TASK_OVERHEAD);
        s.purge_terminal_older_than(Duration::ZERO).await.unwrap();
        assert_eq!(s.accounted_bytes(), 0);
        assert!(s.is_empty());
    }

    fn who(tenant: &str, principal: &str) -> Owner {
        Owner {
            tenant: tenant.into(),
            principal: principal.into(),
        }
    }

    fn q(page_size: usize) -> TaskQuery {
        TaskQuery {
            page_size,
            ..Default::default()
        }
    }

    fn listed(s: &MemoryStore, owner: &Owner, query: &TaskQuery) -> (Vec<String>, usize) {
        let page = s.list_now(owner, query).unwrap();
        (page.tasks.into_iter().map(|t| t.id).collect(), page.total)
    }

    /// A task changing status is listed in its new state, at its new time,
    /// and no longer in its old one.
    #[tokio::test]
    async fn a_status_change_moves_the_task_between_states() {
        let s = MemoryStore::default();
        let me = who("acme", "alice");
        s.create_now(&me, task("a", "c1", TaskState::Working, 100))
            .unwrap();
        s.create_now(&me, task("b", "c1", TaskState::Working, 200))
            .unwrap();
        let in_state = |state, ctx: Option<&str>| TaskQuery {
            state: Some(state),
            context_id: ctx.map(Into::into),
            ..q(10)
        };
        for ctx in [None, Some("c1")] {
            assert_eq!(
                listed(&s, &me, &in_state(TaskState::Working, ctx)),
                (vec!["b".into(), "a".into()], 2)
            );
        }
        s.update_now("a", to(TaskState::InputRequired, 300))
            .unwrap();
        s.update_now("a", to(TaskState::Completed, 400)).unwrap();
        for ctx in [None, Some("c1")] {
            assert_eq!(
                listed(&s, &me, &in_state(TaskState::Working, ctx)),
                (vec!["b".into()], 1)
            );
            assert_eq!(
                listed(&s, &me, &in_state(TaskState::InputRequired, ctx)),
                (vec![], 0)
            );
            assert_eq!(
                listed(&s, &me, &in_state(TaskState::Completed, ctx)),
                (vec!["a".into()], 1)
            );
        }
        // Newest status first: "a" moved ahead of "b".
        assert_eq!(listed(&s, &me, &q(10)), (vec!["a".into(), "b".into()], 2));
        // Updates that leave the status alone do not move a task.
        s.update_now("b", TaskUpdate::UserMessage(Message::user_text("more")))
            .unwrap();
        assert_eq!(listed(&s, &me, &q(10)).0, ["a", "b"]);
    }

    /// Tasks that leave the store (evicted for room, purged, expired while
    /// finished or idle) are no longer listed.
    #[tokio::test]
    async fn evicted_and_expired_tasks_leave_the_listing() {
        let s = MemoryStore::new(MemoryStoreConfig {
            max_tasks: 50,
            terminal_ttl: Duration::from_secs(3600),
            idle_ttl: Duration::from_millis(100),
            ..MemoryStoreConfig::default()
        });
        for i in 0..200i64 {
            let owner = who("t", &format!("p{}", i % 7));
            let ctx = format!("ctx-{}", i % 13);
            s.create_now(
                &owner,
                task(&format!("done-{i}"), &ctx, TaskState::Completed, i),
            )
            .unwrap();
        }
        // The cap evicted the oldest: what is listed is what is held.
        assert!(s.len() <= 50, "{} held", s.len());
        let listed_total: usize = (0..7)
            .map(|p| listed(&s, &who("t", &format!("p{p}")), &q(100)).1)
            .sum();
        assert_eq!(listed_total, s.len());
        // Open tasks too, and an interrupted one.
        s.create_now(
            &who("t", "p0"),
            task("open", "ctx-x", TaskState::Working, 1),
        )
        .unwrap();
        s.create_now(&who("u", ""), task("asks", "ctx-y", TaskState::Working, 1))
            .unwrap();
        s.update_now("asks", to(TaskState::AuthRequired, 2))
            .unwrap();
        assert_eq!(listed(&s, &who("u", ""), &q(10)).1, 1);
        // Finished ones purged, open ones expired after their idle time.
        s.purge_terminal_older_than(Duration::ZERO).await.unwrap();
        assert_eq!(s.len(), 2);
        tokio::time::sleep(Duration::from_millis(150)).await;
        s.sweep();
        assert!(s.is_empty(), "{} held", s.len());
        for owner in [who("t", "p0"), who("u", "")] {
            assert_eq!(listed(&s, &owner, &q(10)), (vec![], 0));
        }
    }

    /// Two owners with the same contexts and states: every listing answers
    /// each with its own tasks only (tenant and principal both count).
    #[tokio::test]
    async fn owners_never_see_each_other_in_a_listing() {
        let s = MemoryStore::default();
        let owners = [
            who("", ""),
            who("acme", ""),
            who("", "acme"),
            who("acme", "bob"),
            who("other", "bob"),
        ];
        for (n, owner) in owners.iter().enumerate() {
            for i in 0..6i64 {
                let state = [TaskState::Working, TaskState::Completed][i as usize % 2];
                s.create_now(owner, task(&format!("o{n}-{i}"), "shared", state, 1000 + i))
                    .unwrap();
            }
        }
        for (n, owner) in owners.iter().enumerate() {
            let mine = |ids: &[String]| ids.iter().all(|id| id.starts_with(&format!("o{n}-")));
            for query in [
                q(100),
                TaskQuery {
                    context_id: Some("shared".into()),
                    ..q(100)
                },
                TaskQuery {
                    state: Some(TaskState::Completed),
                    ..q(100)
                },
                TaskQuery {
                    state: Some(TaskState::Working),
                    context_id: Some("shared".into()),
                    status_after: Some(Timestamp::from_millis(1002)),
                    ..q(100)
                },
            ] {
                let (ids, total) = listed(&s, owner, &query);
                assert!(mine(&ids), "{owner:?} saw {ids:?}");
                assert_eq!(ids.len(), total);
                assert!(total > 0);
            }
        }
        assert_eq!(listed(&s, &who("acme", "alice"), &q(100)), (vec![], 0));
        let unknown = TaskQuery {
            context_id: Some("nowhere".into()),
            ..q(100)
        };
        assert_eq!(listed(&s, &owners[0], &unknown), (vec![], 0));
    }

    /// Paging while tasks are created and updated between pages: every task
    /// that did not change is seen once, in order; none twice.
    #[tokio::test]
    async fn paging_is_stable_while_tasks_come_and_change() {
        let s = MemoryStore::default();
        let me = Owner::default();
        for i in 0..100i64 {
            s.create_now(
                &me,
                task(&format!("t{i:03}"), "c", TaskState::Working, 1000 + i / 4),
            )
            .unwrap();
        }
        let mut query = q(7);
        let mut seen = Vec::new();
        let mut round = 0i64;
        loop {
            let page = s.list_now(&me, &query).unwrap();
            seen.extend(page.tasks.iter().map(|t| t.id.clone()));
            // Between pages: a new task, and an older one updated (it moves
            // ahead of the cursor, where the client has been).
            round += 1;
            s.create_now(
                &me,
                task(
                    &format!("new{round}"),
                    "c",
                    TaskState::Working,
                    5000 + round,
                ),
            )
            .unwrap();
            let moved = format!("t{:03}", 99 - 10 * round);
            if round < 9 {
                s.update_now(&moved, to(TaskState::Working, 6000 + round))
                    .unwrap();
            }
            match page.next {
                Some(c) => query.cursor = Some(c),
                None => break,
            }
        }
        let unique: std::collections::HashSet<_> = seen.iter().collect();
        assert_eq!(unique.len(), seen.len(), "a task twice: {seen:?}");
        // Every original task not moved ahead of the cursor was seen, in
        // the original order.
        let originals: Vec<&String> = seen.iter().filter(|id| id.starts_with('t')).collect();
        let mut sorted = originals.clone();
        sorted.sort_by(|a, b| {
            let key = |id: &str| (1000 + id[1..].parse::<i64>().unwrap() / 4, id.to_owned());
            key(b).cmp(&key(a))
        });
        assert_eq!(originals, sorted);
        for i in 0..100i64 {
            let id = format!("t{i:03}");
            let was_moved = (1..9).any(|r| 99 - 10 * r == i);
            assert!(was_moved || seen.contains(&id), "{id} skipped");
        }
        assert!(
            seen.iter().all(|id| !id.starts_with("new")),
            "new tasks come before the cursor"
        );
    }

    /// The page of a sort of every task that matches (the listing's
    /// definition, written the plain way), to check the listing against.
    fn model_page(s: &MemoryStore, owner: &Owner, query: &TaskQuery) -> TaskPage {
        let mut keys: Vec<(Cursor, Held)> = Vec::new();
        s.shared.tasks.for_each(|slot| {
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
        let tasks = keys[start..end]
            .iter()
            .map(|(_, held)| {
                held.copy(query.history_length, query.include_artifacts)
                    .unwrap()
            })
            .collect();
        let next = (end < keys.len())
            .then(|| keys[end - 1].0.clone())
            .filter(|_| end > start);
        TaskPage { tasks, next, total }
    }

    /// The listing answers every query as a sort of every task does,
    /// through creations, status changes, evictions and paging.
    #[tokio::test]
    async fn the_listing_answers_as_a_sort_of_every_task_does() {
        let s = MemoryStore::new(MemoryStoreConfig {
            max_tasks: 300,
            ..MemoryStoreConfig::default()
        });
        let owners = [Owner::default(), who("a", "x"), who("a", "y")];
        let states = [
            TaskState::Submitted,
            TaskState::Working,
            TaskState::InputRequired,
            TaskState::Completed,
            TaskState::Failed,
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rand = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut open: Vec<String> = Vec::new();
        for i in 0..1500u64 {
            if rand(3) == 0 && !open.is_empty() {
                let id = open.swap_remove(rand(open.len() as u64) as usize);
                let state = states[rand(5) as usize];
                let millis = rand(400) as i64;
                if s.update_now(&id, to(state, millis)).is_ok() && !state.is_terminal() {
                    open.push(id);
                }
                continue;
            }
            let owner = &owners[rand(3) as usize];
            let ctx = format!("c{}", rand(8));
            let state = states[rand(5) as usize];
            let id = format!("t{i}");
            let mut t = task(&id, &ctx, state, rand(400) as i64);
            if rand(20) == 0 {
                t.status.as_mut().unwrap().timestamp = None;
            }
            if s.create_now(owner, t).is_ok() && !state.is_terminal() {
                open.push(id);
            }
        }
        let mut queries = Vec::new();
        for ctx in [None, Some("c1"), Some("c7"), Some("none")] {
            for state in [None, Some(TaskState::Working), Some(TaskState::Completed)] {
                for after in [None, Some(-5), Some(0), Some(200), Some(399)] {
                    for size in [1, 13, 100] {
                        queries.push(TaskQuery {
                            context_id: ctx.map(Into::into),
                            state,
                            status_after: after.map(Timestamp::from_millis),
                            history_length: Some(1),
                            ..q(size)
                        });
                    }
                }
            }
        }
        for owner in &owners {
            for query in &queries {
                let mut query = query.clone();
                for _ in 0..1000 {
                    let a = s.list_now(owner, &query).unwrap();
                    let b = model_page(&s, owner, &query);
                    assert_eq!(a.tasks, b.tasks, "{owner:?} {query:?}");
                    assert_eq!(a.total, b.total, "{owner:?} {query:?}");
                    assert_eq!(a.next, b.next, "{owner:?} {query:?}");
                    match a.next {
                        Some(c) => query.cursor = Some(c),
                        None => break,
                    }
                }
            }
        }
    }
}
