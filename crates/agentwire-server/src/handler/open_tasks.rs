//! Fair admission of new tasks: each caller may hold at most
//! [`HandlerConfig::max_open_tasks_per_caller`] open tasks (submitted,
//! working, input-required, auth-required) at once, so that one caller's
//! flood cannot fill the store and keep the others out.
//!
//! The caller is its principal when it authenticated (whatever the tenant
//! of its requests: a tenant is the caller's to choose), and its address
//! when it is anonymous (an IPv6 address by its /64 prefix, which one
//! machine commonly has whole). Behind a reverse proxy every anonymous
//! caller comes from the proxy's address, and so shares one bound.
//!
//! The count is kept by a wrapper around the task store ([`Admitting`]),
//! which sees every task the server creates and every change of state:
//! a task is counted when it is created open, and no more once an update
//! leaves it terminal (completed, failed, canceled, rejected) or finds it
//! gone. A task can also leave the open states without this process
//! writing it: expired by the in-memory store's open-task TTL, finished by
//! another replica sharing the store, or failed by crash recovery. So
//! before a caller is refused, its tasks are looked up in the store (at
//! most once a second per caller), and those no longer open are not
//! counted: the refusal is decided on the store's state. The count is per
//! process; a process that starts on a store of a previous run (and runs
//! its crash recovery) counts the open tasks the store holds for their
//! principals first ([`OpenTasks::count_stored`]), so a restart gives no
//! caller its whole bound again. The tasks of anonymous callers from
//! before the restart are not counted: their address is not stored.
//!
//! The bound applies when a task is created, not when a message arrives:
//! an agent that answers a message with a message creates no task, and
//! such a reply is never refused by it (nor by a full store). The agent's
//! write that would create the task is refused instead, and the caller
//! gets that error: `Unavailable` (JSON-RPC -32603, HTTP 503, gRPC
//! UNAVAILABLE), naming the bound.
//!
//! The same wrapper counts what the metrics report of admission: the new
//! work refused (by the bound, by a full store) and the tasks the store
//! purged for retention.
//!
//! A second bound, on the bytes of each caller's running work
//! ([`HandlerConfig::max_running_bytes_per_caller`]): a send counts its
//! message's (and metadata's) protobuf size from when it is admitted until
//! the agent's run it starts has ended (an agent holds its input while it
//! works, and a stream's agent may wait for slow readers), so that one
//! caller's large messages to slow work cannot fill the server's memory.
//! A send that would take its caller over the bound is refused at once,
//! before the agent starts (`Unavailable`, "try again later"), unless the
//! caller has nothing running; sends under [`SMALL_SEND_BYTES`] are not
//! counted (the bound on requests at once covers them). The bytes of all
//! callers' running work together are bounded the same way
//! ([`HandlerConfig::max_running_bytes`]), so that many callers (many
//! addresses) cannot do together what one may not.
//!
//! A third, on each caller's open event streams
//! ([`HandlerConfig::max_streams_per_caller`]): a stream
//! (`SendStreamingMessage`, `SubscribeToTask`) counts from when it is
//! admitted until its reader goes away or it ends, as each holds a queue,
//! a subscription to its task and a connection's buffers (about 15 KB
//! measured). One more is refused before anything starts (`Unavailable`,
//! "try again later"): one caller subscribing to its one task again and
//! again cannot hold the server's memory.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentwire_types::{A2aError, A2aResult, ErrorKind, Task};
use async_trait::async_trait;
use dashmap::DashMap;
use parking_lot::Mutex;

use crate::store::{
    ExpiredTasks, ImmediateStore, LogSpan, Owner, QueuedStore, StoredPushConfig, StoredTask,
    TaskPage, TaskQuery, TaskStore, TaskUpdate, Updated, storage_fault,
};

/// How often at most a caller at its bound has its tasks looked up again.
const RECHECK_EVERY: Duration = Duration::from_secs(1);

/// Sends smaller than this (their message and metadata, protobuf-encoded)
/// do not count toward their caller's running bytes.
pub(crate) const SMALL_SEND_BYTES: usize = 16 * 1024;

/// Who a bound applies to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Caller {
    /// An authenticated principal.
    Principal(String),
    /// An anonymous caller, by its address (IPv6 by its /64 prefix).
    Address(IpAddr),
    /// An anonymous caller whose address is not known (an in-process
    /// call): they share one bound.
    Anonymous,
}

impl Caller {
    /// The caller of a call by `owner`, from `peer`.
    pub(crate) fn of(owner: &Owner, peer: Option<std::net::SocketAddr>) -> Self {
        if !owner.principal.is_empty() {
            return Self::Principal(owner.principal.clone());
        }
        match peer {
            Some(p) => Self::Address(address_of(p.ip())),
            None => Self::Anonymous,
        }
    }

    /// How the refusal names the caller.
    pub(super) fn describe(&self) -> String {
        match self {
            Self::Principal(p) => format!("principal {p}"),
            Self::Address(IpAddr::V6(a)) => format!("anonymous callers from {a}/64"),
            Self::Address(a) => format!("anonymous callers from {a}"),
            Self::Anonymous => "anonymous callers".to_owned(),
        }
    }
}

/// The address a bound counts a peer's calls for: an IPv4 address (also
/// when mapped into IPv6), an IPv6 address by its /64 prefix, which one
/// machine commonly has whole.
pub(crate) fn address_of(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

/// The open tasks of one caller.
#[derive(Default)]
struct Held {
    tasks: HashSet<String>,
    /// When its tasks were last looked up in the store.
    checked: Option<Instant>,
}

#[derive(Default)]
struct Ledger {
    /// The caller of each open task counted.
    by_task: HashMap<String, Caller>,
    by_caller: HashMap<Caller, Held>,
}

impl Ledger {
    fn forget(&mut self, task_id: &str) {
        if let Some(caller) = self.by_task.remove(task_id)
            && let Some(held) = self.by_caller.get_mut(&caller)
        {
            held.tasks.remove(task_id);
            if held.tasks.is_empty() {
                self.by_caller.remove(&caller);
            }
        }
    }
}

/// Refusals and purges, read by the metrics when scraped.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct AdmissionStats {
    /// New tasks refused by the bound on a caller's open tasks.
    pub(crate) refused_caller_bound: u64,
    /// Sends refused by the bound on a caller's running bytes.
    pub(crate) refused_running_bytes: u64,
    /// Sends refused by the bound on all callers' running bytes.
    pub(crate) refused_running_total: u64,
    /// Streams refused by the bound on a caller's open streams.
    pub(crate) refused_streams: u64,
    /// Request bodies refused by the bounds on the bytes being received.
    pub(crate) refused_incoming: u64,
    /// The bytes of request bodies being received and counted now.
    pub(crate) incoming_bytes: u64,
    /// Work refused because the store was full.
    pub(crate) refused_store_full: u64,
    /// Requests refused because the server handled as many as it may.
    pub(crate) refused_in_flight: u64,
    /// Tasks purged by retention ([`TaskStore::purge_terminal_older_than`]).
    pub(crate) purged_retention: u64,
    /// What the store removed on its own.
    pub(crate) expired: ExpiredTasks,
}

/// The open tasks of every caller, and the admission counters.
pub(crate) struct OpenTasks {
    /// The bound (`usize::MAX`: none, and nothing is counted).
    max: usize,
    ledger: Mutex<Ledger>,
    /// The callers of anonymous tasks started and not created yet, by
    /// task id (an authenticated caller is known from the task's owner).
    pending: DashMap<String, Caller, ahash::RandomState>,
    /// The bound on a caller's running bytes (`usize::MAX`: none).
    max_running: usize,
    /// The bound on all callers' running bytes (`usize::MAX`: none).
    max_running_total: usize,
    /// The bytes of running sends, by caller and in all (see [`Running`]).
    running: Mutex<RunningBytes>,
    /// The bound on a caller's open streams (`usize::MAX`: none).
    max_streams: usize,
    /// The open streams of each caller (see [`StreamSlot`]).
    streams: Mutex<HashMap<Caller, usize>>,
    /// The bytes of request bodies being received (`incoming.rs`; `None`:
    /// no bound).
    pub(super) incoming: Option<Arc<super::incoming::IncomingBytes>>,
    refused_caller_bound: AtomicU64,
    refused_running_bytes: AtomicU64,
    refused_running_total: AtomicU64,
    refused_streams: AtomicU64,
    refused_store_full: AtomicU64,
    pub(crate) refused_in_flight: AtomicU64,
    purged_retention: AtomicU64,
}

/// What [`OpenTasks::try_admit`] decided.
enum Admit {
    Yes,
    No(A2aError),
    /// At the bound: these tasks of the caller are to be looked up first.
    Check(Vec<String>),
}

impl OpenTasks {
    pub(crate) fn new(bounds: CallerBounds) -> Self {
        Self {
            max: bounds.open_tasks.unwrap_or(usize::MAX),
            ledger: Mutex::default(),
            pending: DashMap::default(),
            max_running: bounds.running_bytes.unwrap_or(usize::MAX),
            max_running_total: bounds.running_total.unwrap_or(usize::MAX),
            running: Mutex::default(),
            max_streams: bounds.streams.unwrap_or(usize::MAX),
            streams: Mutex::default(),
            incoming: super::incoming::IncomingBytes::new(bounds.incoming, bounds.incoming_total),
            refused_caller_bound: AtomicU64::new(0),
            refused_running_bytes: AtomicU64::new(0),
            refused_running_total: AtomicU64::new(0),
            refused_streams: AtomicU64::new(0),
            refused_store_full: AtomicU64::new(0),
            refused_in_flight: AtomicU64::new(0),
            purged_retention: AtomicU64::new(0),
        }
    }

    /// A new task of an anonymous caller is being started: its creation
    /// counts for `caller` (until the returned guard is dropped, at the
    /// end of the agent's run). `None` when the task's owner says who its
    /// caller is.
    pub(crate) fn expect(self: &Arc<Self>, task_id: &str, caller: Caller) -> Option<Pending> {
        if self.max == usize::MAX || matches!(caller, Caller::Principal(_) | Caller::Anonymous) {
            return None;
        }
        self.pending.insert(task_id.to_owned(), caller);
        Some(Pending {
            open: Arc::clone(self),
            task_id: task_id.to_owned(),
        })
    }

    /// Counts a send of `bytes()` bytes by `owner` (from `peer`) toward
    /// its caller's running bytes and the server's, until the returned
    /// guard is dropped (at the end of the agent's run): refused when the
    /// caller (or any caller) already has work running and this send would
    /// take it (or the server) over its bound. `None` for a small send, or
    /// without a bound (then its size is not computed).
    pub(crate) fn run(
        self: &Arc<Self>,
        owner: &Owner,
        peer: Option<std::net::SocketAddr>,
        bytes: impl FnOnce() -> usize,
    ) -> A2aResult<Option<Running>> {
        if self.max_running == usize::MAX && self.max_running_total == usize::MAX {
            return Ok(None);
        }
        let bytes = bytes();
        if bytes < SMALL_SEND_BYTES {
            return Ok(None);
        }
        let caller = Caller::of(owner, peer);
        let mut running = self.running.lock();
        let total = running.total;
        let held = running.by_caller.get(&caller).copied().unwrap_or(0);
        let over_caller = held > 0 && held.saturating_add(bytes) > self.max_running;
        let over_total = total > 0 && total.saturating_add(bytes) > self.max_running_total;
        if over_caller || over_total {
            drop(running);
            tracing::debug!(
                caller = caller.describe(),
                bytes,
                held,
                total,
                "refused a send: too many bytes of running work"
            );
            let error = if over_caller {
                self.refused_running_bytes.fetch_add(1, Ordering::Relaxed);
                A2aError::unavailable(format!(
                    "{} already have {held} bytes of messages being worked on, and this one of \
                     {bytes} bytes would take them over {} (the server's max running bytes per \
                     caller): try again later, once some of that work has finished",
                    caller.describe(),
                    self.max_running
                ))
                .with_metadata("limit", "maxRunningBytesPerCaller")
                .with_metadata("max", self.max_running.to_string())
            } else {
                self.refused_running_total.fetch_add(1, Ordering::Relaxed);
                A2aError::unavailable(format!(
                    "the server has {total} bytes of messages being worked on, and this one of \
                     {bytes} bytes would take it over {} (its max running bytes): try again \
                     later, once some of that work has finished",
                    self.max_running_total
                ))
                .with_metadata("limit", "maxRunningBytes")
                .with_metadata("max", self.max_running_total.to_string())
            };
            return Err(error);
        }
        running.total += bytes;
        *running.by_caller.entry(caller.clone()).or_default() += bytes;
        Ok(Some(Running {
            open: Arc::clone(self),
            caller,
            bytes,
        }))
    }

    /// Counts a stream of `owner` (from `peer`) toward its caller's open
    /// streams, until the returned slot is dropped (when the stream is):
    /// refused when the caller holds as many as it may. `None` without a
    /// bound.
    pub(crate) fn stream(
        self: &Arc<Self>,
        owner: &Owner,
        peer: Option<std::net::SocketAddr>,
    ) -> A2aResult<Option<StreamSlot>> {
        if self.max_streams == usize::MAX {
            return Ok(None);
        }
        let caller = Caller::of(owner, peer);
        let mut streams = self.streams.lock();
        let held = streams.entry(caller.clone()).or_default();
        if *held >= self.max_streams {
            drop(streams);
            self.refused_streams.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(
                caller = caller.describe(),
                "refused a stream: too many open streams"
            );
            return Err(A2aError::unavailable(format!(
                "{} already have {} event streams open, as many as one caller may (the \
                 server's max streams per caller): try again later, once one of them has \
                 ended or been closed",
                caller.describe(),
                self.max_streams
            ))
            .with_metadata("limit", "maxStreamsPerCaller")
            .with_metadata("max", self.max_streams.to_string()));
        }
        *held += 1;
        Ok(Some(StreamSlot {
            open: Arc::clone(self),
            caller,
        }))
    }

    /// The caller a task created by `owner` counts for.
    fn caller_of(&self, task_id: &str, owner: &Owner) -> Caller {
        if self.max == usize::MAX {
            return Caller::Anonymous;
        }
        if !owner.principal.is_empty() {
            return Caller::Principal(owner.principal.clone());
        }
        self.pending
            .remove(task_id)
            .map_or(Caller::Anonymous, |(_, c)| c)
    }

    /// Counts `task_id` for `caller` if it has room.
    fn try_admit(&self, caller: &Caller, task_id: &str) -> Admit {
        if self.max == usize::MAX {
            return Admit::Yes;
        }
        let mut ledger = self.ledger.lock();
        let held = ledger.by_caller.entry(caller.clone()).or_default();
        if held.tasks.len() < self.max {
            held.tasks.insert(task_id.to_owned());
            ledger.by_task.insert(task_id.to_owned(), caller.clone());
            return Admit::Yes;
        }
        if held.checked.is_some_and(|t| t.elapsed() < RECHECK_EVERY) {
            return Admit::No(self.refuse(caller));
        }
        held.checked = Some(Instant::now());
        Admit::Check(held.tasks.iter().cloned().collect())
    }

    /// [`Self::try_admit`] again, once the tasks in `gone` were found no
    /// longer open.
    fn admit_after_check(&self, caller: &Caller, task_id: &str, gone: &[String]) -> A2aResult<()> {
        let mut ledger = self.ledger.lock();
        for id in gone {
            ledger.forget(id);
        }
        let held = ledger.by_caller.entry(caller.clone()).or_default();
        if held.tasks.len() < self.max {
            held.tasks.insert(task_id.to_owned());
            ledger.by_task.insert(task_id.to_owned(), caller.clone());
            return Ok(());
        }
        Err(self.refuse(caller))
    }

    fn refuse(&self, caller: &Caller) -> A2aError {
        self.refused_caller_bound.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            caller = caller.describe(),
            "refused a task: too many open tasks"
        );
        A2aError::unavailable(format!(
            "{} already hold {} open tasks (submitted, working, or waiting for input), as many \
             as one caller may (the server's max open tasks per caller): try again later, once \
             one of them has finished",
            caller.describe(),
            self.max
        ))
        .with_metadata("limit", "maxOpenTasksPerCaller")
        .with_metadata("max", self.max.to_string())
    }

    /// A task is no longer open (or no longer exists).
    fn finished(&self, task_id: &str) {
        let mut ledger = self.ledger.lock();
        if !ledger.by_task.is_empty() {
            ledger.forget(task_id);
        }
    }

    /// Counts the open tasks `store` already holds (those of a previous
    /// run, at start-up) for their callers, so that a restart does not
    /// give every caller its whole bound again. A task of an anonymous
    /// caller is not counted: its address is not stored. A store that
    /// cannot say is logged and counted as empty.
    pub(crate) async fn count_stored(&self, store: &dyn TaskStore) {
        if self.max == usize::MAX {
            return;
        }
        let tasks = match store.open_task_owners().await {
            Ok(tasks) => tasks,
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "the open tasks of a previous run cannot be read: they do not count toward \
                     their callers' bound on open tasks"
                );
                return;
            }
        };
        let mut ledger = self.ledger.lock();
        let mut counted = 0usize;
        for (id, owner) in tasks {
            if owner.principal.is_empty() || ledger.by_task.contains_key(&id) {
                continue;
            }
            let caller = Caller::Principal(owner.principal);
            ledger
                .by_caller
                .entry(caller.clone())
                .or_default()
                .tasks
                .insert(id.clone());
            ledger.by_task.insert(id, caller);
            counted += 1;
        }
        if counted > 0 {
            tracing::info!(
                tasks = counted,
                "open tasks of a previous run count toward their callers' bound on open tasks"
            );
        }
    }

    /// Counts a refusal of a full store in `result`.
    fn full<T>(&self, result: A2aResult<T>) -> A2aResult<T> {
        if let Err(e) = &result
            && e.kind == ErrorKind::Unavailable
            && storage_fault(e).is_none()
        {
            self.refused_store_full.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    /// The counters now, with what `store` removed on its own.
    pub(crate) fn stats(&self, store: &dyn TaskStore) -> AdmissionStats {
        AdmissionStats {
            refused_caller_bound: self.refused_caller_bound.load(Ordering::Relaxed),
            refused_running_bytes: self.refused_running_bytes.load(Ordering::Relaxed),
            refused_running_total: self.refused_running_total.load(Ordering::Relaxed),
            refused_streams: self.refused_streams.load(Ordering::Relaxed),
            refused_incoming: self
                .incoming
                .as_ref()
                .map_or(0, |i| i.refused.load(Ordering::Relaxed)),
            incoming_bytes: self.incoming.as_ref().map_or(0, |i| i.held_now()),
            refused_store_full: self.refused_store_full.load(Ordering::Relaxed),
            refused_in_flight: self.refused_in_flight.load(Ordering::Relaxed),
            purged_retention: self.purged_retention.load(Ordering::Relaxed),
            expired: store.expired_tasks(),
        }
    }

    /// How many open tasks `caller` is counted for (tests).
    #[cfg(test)]
    fn count(&self, caller: &Caller) -> usize {
        self.ledger
            .lock()
            .by_caller
            .get(caller)
            .map_or(0, |h| h.tasks.len())
    }
}

/// A send's bytes counted toward its caller's running bytes (see
/// [`OpenTasks::run`]); no longer counted when dropped.
pub(crate) struct Running {
    open: Arc<OpenTasks>,
    caller: Caller,
    bytes: usize,
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut running = self.open.running.lock();
        running.total = running.total.saturating_sub(self.bytes);
        give_back(&mut running.by_caller, &self.caller, self.bytes);
    }
}

/// The bytes of running sends (see [`OpenTasks::run`]).
#[derive(Default)]
struct RunningBytes {
    total: usize,
    by_caller: HashMap<Caller, usize>,
}

/// Takes `n` from what `who` holds in `held`, forgetting one that holds
/// nothing any more.
pub(crate) fn give_back<K: std::hash::Hash + Eq>(held: &mut HashMap<K, usize>, who: &K, n: usize) {
    if let Some(h) = held.get_mut(who) {
        *h = h.saturating_sub(n);
        if *h == 0 {
            held.remove(who);
        }
    }
}

/// A stream counted toward its caller's open streams (see
/// [`OpenTasks::stream`]); no longer counted when dropped.
pub(crate) struct StreamSlot {
    open: Arc<OpenTasks>,
    caller: Caller,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        give_back(&mut self.open.streams.lock(), &self.caller, 1);
    }
}

/// The bounds per caller of [`OpenTasks`] (`None`: no bound).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CallerBounds {
    /// [`HandlerConfig::max_open_tasks_per_caller`].
    pub(crate) open_tasks: Option<usize>,
    /// [`HandlerConfig::max_running_bytes_per_caller`].
    pub(crate) running_bytes: Option<usize>,
    /// [`HandlerConfig::max_running_bytes`].
    pub(crate) running_total: Option<usize>,
    /// [`HandlerConfig::max_streams_per_caller`].
    pub(crate) streams: Option<usize>,
    /// [`HandlerConfig::max_incoming_bytes_per_caller`].
    pub(crate) incoming: Option<usize>,
    /// [`HandlerConfig::max_incoming_bytes`].
    pub(crate) incoming_total: Option<usize>,
}

/// The caller of an anonymous task not created yet (see
/// [`OpenTasks::expect`]); forgotten when dropped.
pub(crate) struct Pending {
    open: Arc<OpenTasks>,
    task_id: String,
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.open.pending.remove(&self.task_id);
    }
}

/// The task store as the task manager uses it: the store given, with each
/// caller's open tasks counted and bounded (see the module's
/// documentation). It keeps the store's fast paths: it offers
/// [`ImmediateStore`] and [`QueuedStore`] exactly when the store does.
pub(crate) struct Admitting {
    inner: Arc<dyn TaskStore>,
    open: Arc<OpenTasks>,
}

impl Admitting {
    pub(crate) fn wrap(inner: Arc<dyn TaskStore>, open: Arc<OpenTasks>) -> Arc<dyn TaskStore> {
        Arc::new(Self { inner, open })
    }

    /// Whether a task this caller creates may be stored, deciding at the
    /// bound on what the store holds (`open`: whether it is found open).
    fn admit_with(
        &self,
        caller: &Caller,
        task_id: &str,
        open: impl Fn(&str) -> bool,
    ) -> A2aResult<()> {
        match self.open.try_admit(caller, task_id) {
            Admit::Yes => Ok(()),
            Admit::No(e) => Err(e),
            Admit::Check(ids) => {
                let gone: Vec<String> = ids.into_iter().filter(|id| !open(id)).collect();
                self.open.admit_after_check(caller, task_id, &gone)
            }
        }
    }

    /// What an update did, for the count: a task left terminal, or not
    /// found, is no longer open.
    fn updated(&self, task_id: &str, result: A2aResult<Updated>) -> A2aResult<Updated> {
        match &result {
            Ok(u) if u.state.is_terminal() => self.open.finished(task_id),
            Err(e) if e.kind == ErrorKind::TaskNotFound => self.open.finished(task_id),
            _ => {}
        }
        self.open.full(result)
    }

    fn immediate_inner(&self) -> A2aResult<&dyn ImmediateStore> {
        self.inner
            .immediate()
            .ok_or_else(|| A2aError::internal("the store has no immediate operations"))
    }
}

/// Whether a stored task is open.
fn is_open(task: &Task) -> bool {
    !task.state().is_terminal()
}

impl ImmediateStore for Admitting {
    fn create_now(&self, owner: &Owner, task: Task) -> A2aResult<()> {
        self.create_shared_now(owner, &Arc::new(task))
    }

    fn create_shared_now(&self, owner: &Owner, task: &Arc<Task>) -> A2aResult<()> {
        let store = self.immediate_inner()?;
        if !is_open(task) {
            return self.open.full(store.create_shared_now(owner, task));
        }
        let caller = self.open.caller_of(&task.id, owner);
        self.admit_with(
            &caller,
            &task.id,
            |id| matches!(store.get_shared(id), Ok(Some(t)) if is_open(&t)),
        )?;
        let created = store.create_shared_now(owner, task);
        if created.is_err() {
            self.open.finished(&task.id);
        }
        self.open.full(created)
    }

    fn update_now(&self, task_id: &str, update: TaskUpdate) -> A2aResult<Updated> {
        let updated = self.immediate_inner()?.update_now(task_id, update);
        self.updated(task_id, updated)
    }

    fn get_now(
        &self,
        task_id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<StoredTask>> {
        self.immediate_inner()?.get_now(task_id, history_length)
    }

    fn get_shared(&self, task_id: &str) -> A2aResult<Option<Arc<Task>>> {
        self.immediate_inner()?.get_shared(task_id)
    }
}

#[async_trait]
impl TaskStore for Admitting {
    fn immediate(&self) -> Option<&dyn ImmediateStore> {
        self.inner.immediate().map(|_| self as &dyn ImmediateStore)
    }

    fn queued(&self) -> Option<&dyn QueuedStore> {
        // Queued updates are artifact chunks: they change no state.
        self.inner.queued()
    }

    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn check_room(&self, bytes: usize, new_task: bool) -> A2aResult<()> {
        self.open.full(self.inner.check_room(bytes, new_task))
    }

    fn expired_tasks(&self) -> ExpiredTasks {
        self.inner.expired_tasks()
    }

    // Recovery's and the unreadable rows' reads: the wrapped store's (the
    // trait's defaults would hide its unreadable rows).
    async fn unfinished_for_recovery(&self) -> A2aResult<crate::store::RecoveryScan> {
        self.inner.unfinished_for_recovery().await
    }

    async fn owner_of(&self, task_id: &str) -> A2aResult<Option<Owner>> {
        self.inner.owner_of(task_id).await
    }

    fn unreadable_rows(&self) -> u64 {
        self.inner.unreadable_rows()
    }

    async fn open_task_owners(&self) -> A2aResult<Vec<(String, Owner)>> {
        self.inner.open_task_owners().await
    }

    async fn create(&self, owner: &Owner, task: Task) -> A2aResult<Option<LogSpan>> {
        if !is_open(&task) {
            return self.open.full(self.inner.create(owner, task).await);
        }
        let caller = self.open.caller_of(&task.id, owner);
        let id = task.id.clone();
        match self.open.try_admit(&caller, &id) {
            Admit::Yes => {}
            Admit::No(e) => return Err(e),
            Admit::Check(ids) => {
                let mut gone = Vec::new();
                for other in ids {
                    // A read that fails counts the task as open.
                    let open = match self.inner.get(&other, Some(0)).await {
                        Ok(Some(s)) => is_open(&s.task),
                        Ok(None) => false,
                        Err(_) => true,
                    };
                    if !open {
                        gone.push(other);
                    }
                }
                self.open.admit_after_check(&caller, &id, &gone)?;
            }
        }
        let created = self.inner.create(owner, task).await;
        if created.is_err() {
            self.open.finished(&id);
        }
        self.open.full(created)
    }

    async fn update(&self, task_id: &str, update: TaskUpdate) -> A2aResult<Updated> {
        let updated = self.inner.update(task_id, update).await;
        self.updated(task_id, updated)
    }

    async fn get(
        &self,
        task_id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<StoredTask>> {
        self.inner.get(task_id, history_length).await
    }

    async fn list(&self, owner: &Owner, query: &TaskQuery) -> A2aResult<TaskPage> {
        self.inner.list(owner, query).await
    }

    async fn put_push_config(&self, config: &StoredPushConfig) -> A2aResult<()> {
        self.inner.put_push_config(config).await
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

    async fn purge_terminal_older_than(&self, age: Duration) -> A2aResult<u64> {
        let purged = self.inner.purge_terminal_older_than(age).await?;
        self.open
            .purged_retention
            .fetch_add(purged, Ordering::Relaxed);
        Ok(purged)
    }

    async fn unfinished(&self) -> A2aResult<Vec<StoredTask>> {
        self.inner.unfinished().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{MemoryStore, MemoryStoreConfig};
    use agentwire_types::{TaskState, TaskStatus};

    fn task(id: &str, state: TaskState) -> Task {
        Task {
            id: id.into(),
            context_id: "c".into(),
            status: Some(TaskStatus::new(state)),
            ..Default::default()
        }
    }

    fn to(state: TaskState) -> TaskUpdate {
        TaskUpdate::Status {
            status: TaskStatus::new(state),
            metadata: None,
        }
    }

    fn alice() -> Owner {
        Owner {
            tenant: String::new(),
            principal: "apikey:alice".into(),
        }
    }

    #[tokio::test]
    async fn a_caller_at_its_bound_is_refused_until_a_task_ends() {
        let open = Arc::new(OpenTasks::new(CallerBounds {
            open_tasks: Some(2),
            ..CallerBounds::default()
        }));
        let store = Admitting::wrap(Arc::new(MemoryStore::default()), Arc::clone(&open));
        let now = store.immediate().unwrap();
        now.create_now(&alice(), task("a1", TaskState::InputRequired))
            .unwrap();
        now.create_now(&alice(), task("a2", TaskState::Working))
            .unwrap();
        // Finished tasks do not count.
        now.create_now(&alice(), task("done", TaskState::Completed))
            .unwrap();
        let e = now
            .create_now(&alice(), task("a3", TaskState::Working))
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unavailable);
        assert!(e.message.contains("apikey:alice"), "{}", e.message);
        // Another caller is not.
        let bob = Owner {
            principal: "apikey:bob".into(),
            ..Default::default()
        };
        now.create_now(&bob, task("b1", TaskState::Working))
            .unwrap();
        // One of alice's tasks ends: room again.
        now.update_now("a2", to(TaskState::Canceled)).unwrap();
        now.create_now(&alice(), task("a3", TaskState::Working))
            .unwrap();
        assert_eq!(open.count(&Caller::Principal("apikey:alice".into())), 2);
        let stats = open.stats(&*store);
        assert_eq!(stats.refused_caller_bound, 1);
    }

    #[tokio::test]
    async fn tasks_gone_from_the_store_are_not_counted_at_the_bound() {
        let open = Arc::new(OpenTasks::new(CallerBounds {
            open_tasks: Some(1),
            ..CallerBounds::default()
        }));
        let memory = Arc::new(MemoryStore::new(MemoryStoreConfig {
            idle_ttl: Duration::from_millis(20),
            ..Default::default()
        }));
        let store = Admitting::wrap(memory.clone(), Arc::clone(&open));
        store
            .create(&alice(), task("a1", TaskState::InputRequired))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(40)).await;
        // Expired by the store's open-task TTL, unseen by the wrapper.
        memory.sweep();
        assert_eq!(store.get("a1", None).await.unwrap().map(|_| ()), None);
        store
            .create(&alice(), task("a2", TaskState::InputRequired))
            .await
            .unwrap();
        assert_eq!(open.count(&Caller::Principal("apikey:alice".into())), 1);
        assert_eq!(store.expired_tasks().open_ttl, 1);
    }

    /// The wrapper answers every defaulted method of the store traits as
    /// the store it wraps, also stacked on the metrics' wrapper as the
    /// server builds them.
    #[tokio::test]
    async fn every_defaulted_method_is_forwarded() {
        use crate::store::marked::{Marked, assert_forwards};
        for max in [None, Some(2)] {
            let store = Admitting::wrap(
                Arc::new(Marked),
                Arc::new(OpenTasks::new(CallerBounds {
                    open_tasks: max,
                    ..CallerBounds::default()
                })),
            );
            assert_forwards(&*store).await;
        }
        let metrics = crate::observe::Metrics::new();
        let timed = crate::observe::store_timing::TimedStore::wrap(Arc::new(Marked), &metrics);
        let store = Admitting::wrap(
            timed,
            Arc::new(OpenTasks::new(CallerBounds {
                open_tasks: Some(2),
                ..CallerBounds::default()
            })),
        );
        assert_forwards(&*store).await;
    }

    /// A store's open tasks from a previous run count at start-up.
    #[tokio::test]
    async fn the_open_tasks_of_a_previous_run_count() {
        struct Previous(MemoryStore);
        #[async_trait]
        impl TaskStore for Previous {
            async fn create(&self, o: &Owner, t: Task) -> A2aResult<Option<LogSpan>> {
                self.0.create(o, t).await
            }
            async fn update(&self, id: &str, u: TaskUpdate) -> A2aResult<Updated> {
                self.0.update(id, u).await
            }
            async fn get(&self, id: &str, h: Option<usize>) -> A2aResult<Option<StoredTask>> {
                self.0.get(id, h).await
            }
            async fn list(&self, o: &Owner, q: &TaskQuery) -> A2aResult<TaskPage> {
                self.0.list(o, q).await
            }
            async fn put_push_config(&self, c: &StoredPushConfig) -> A2aResult<()> {
                self.0.put_push_config(c).await
            }
            async fn get_push_config(
                &self,
                t: &str,
                id: &str,
            ) -> A2aResult<Option<StoredPushConfig>> {
                self.0.get_push_config(t, id).await
            }
            async fn list_push_configs(&self, t: &str) -> A2aResult<Vec<StoredPushConfig>> {
                self.0.list_push_configs(t).await
            }
            async fn delete_push_config(&self, t: &str, id: &str) -> A2aResult<bool> {
                self.0.delete_push_config(t, id).await
            }
            async fn open_task_owners(&self) -> A2aResult<Vec<(String, Owner)>> {
                Ok(vec![
                    ("old1".into(), alice()),
                    ("old2".into(), alice()),
                    ("anon".into(), Owner::default()),
                ])
            }
        }
        let memory = MemoryStore::default();
        for id in ["old1", "old2"] {
            memory
                .create(&alice(), task(id, TaskState::InputRequired))
                .await
                .unwrap();
        }
        let open = Arc::new(OpenTasks::new(CallerBounds {
            open_tasks: Some(2),
            ..CallerBounds::default()
        }));
        let store = Admitting::wrap(Arc::new(Previous(memory)), Arc::clone(&open));
        open.count_stored(&*store).await;
        assert_eq!(open.count(&Caller::Principal("apikey:alice".into())), 2);
        let e = store
            .create(&alice(), task("new", TaskState::Working))
            .await
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unavailable, "{e:?}");
        // Counted once, whatever the number of calls.
        open.count_stored(&*store).await;
        assert_eq!(open.count(&Caller::Principal("apikey:alice".into())), 2);
        // One ends: room again.
        store.update("old1", to(TaskState::Canceled)).await.unwrap();
        store
            .create(&alice(), task("new", TaskState::Working))
            .await
            .unwrap();
    }

    #[test]
    fn anonymous_callers_count_by_address() {
        let anon = Owner::default();
        let v4: std::net::SocketAddr = "127.0.0.2:5000".parse().unwrap();
        assert_eq!(
            Caller::of(&anon, Some(v4)),
            Caller::Address("127.0.0.2".parse().unwrap())
        );
        let a: std::net::SocketAddr = "[2001:db8:1:2:3:4:5:6]:1".parse().unwrap();
        let b: std::net::SocketAddr = "[2001:db8:1:2:ffff::1]:1".parse().unwrap();
        assert_eq!(Caller::of(&anon, Some(a)), Caller::of(&anon, Some(b)));
        let mapped: std::net::SocketAddr = "[::ffff:10.0.0.1]:1".parse().unwrap();
        assert_eq!(
            Caller::of(&anon, Some(mapped)),
            Caller::Address("10.0.0.1".parse().unwrap())
        );
        assert_eq!(Caller::of(&anon, None), Caller::Anonymous);
        assert_eq!(
            Caller::of(&alice(), Some(v4)),
            Caller::Principal("apikey:alice".into())
        );
    }

    /// All callers' running bytes are bounded together: many addresses
    /// cannot hold what one may not; one send alone always runs.
    #[test]
    fn running_bytes_are_bounded_in_all() {
        let open = Arc::new(OpenTasks::new(CallerBounds {
            open_tasks: None,
            running_total: Some(100_000),
            ..CallerBounds::default()
        }));
        let anon = Owner::default();
        let at = |i: u8| -> std::net::SocketAddr { format!("127.0.0.{i}:1").parse().unwrap() };
        let held: Vec<_> = (1..=4)
            .map(|i| open.run(&anon, Some(at(i)), || 25_000).unwrap())
            .collect();
        let e = open
            .run(&anon, Some(at(9)), || 20_000)
            .err()
            .expect("over the server's bound");
        assert_eq!(e.kind, ErrorKind::Unavailable, "{e}");
        assert!(e.to_string().contains("max running bytes"), "{e}");
        assert_eq!(
            e.metadata.get("limit").map(String::as_str),
            Some("maxRunningBytes")
        );
        // Small sends are not counted.
        assert!(open.run(&anon, Some(at(9)), || 1_000).unwrap().is_none());
        drop(held);
        // Alone, a send larger than the bound runs.
        let big = open.run(&anon, Some(at(9)), || 150_000).unwrap();
        assert!(big.is_some());
        assert!(open.run(&anon, Some(at(8)), || 20_000).is_err());
        drop(big);
        assert_eq!(open.running.lock().total, 0);
        assert_eq!(open.refused_running_total.load(Ordering::Relaxed), 2);
        assert_eq!(open.refused_running_bytes.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn running_bytes_are_bounded_per_caller_and_given_back() {
        let open = Arc::new(OpenTasks::new(CallerBounds {
            open_tasks: None,
            running_bytes: Some(100_000),
            ..CallerBounds::default()
        }));
        let anon = Owner::default();
        let a: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: std::net::SocketAddr = "127.0.0.2:1".parse().unwrap();
        // Small sends are not counted, whatever their number.
        for _ in 0..100 {
            assert!(
                open.run(&anon, Some(a), || SMALL_SEND_BYTES - 1)
                    .unwrap()
                    .is_none()
            );
        }
        // Alone, a send larger than the bound runs.
        let big = open.run(&anon, Some(a), || 150_000).unwrap();
        assert!(big.is_some());
        let e = open
            .run(&anon, Some(a), || 20_000)
            .err()
            .expect("over the bound");
        assert_eq!(e.kind, ErrorKind::Unavailable, "{e}");
        assert!(e.to_string().contains("127.0.0.1"), "{e}");
        // Another address has its own bound.
        let held_b: Vec<_> = (0..5)
            .map(|_| open.run(&anon, Some(b), || 20_000).unwrap())
            .collect();
        assert!(open.run(&anon, Some(b), || 20_001).is_err());
        // What ends gives its bytes back.
        drop(big);
        let again = open.run(&anon, Some(a), || 100_000).unwrap();
        assert!(again.is_some());
        drop(held_b);
        drop(again);
        assert!(open.running.lock().by_caller.is_empty());
        assert_eq!(open.running.lock().total, 0);
        assert_eq!(open.refused_running_bytes.load(Ordering::Relaxed), 2);
        // Without a bound nothing is counted.
        let none = Arc::new(OpenTasks::new(CallerBounds {
            open_tasks: None,
            ..CallerBounds::default()
        }));
        assert!(none.run(&anon, Some(a), || usize::MAX).unwrap().is_none());
    }

    #[test]
    fn streams_are_bounded_per_caller_and_given_back() {
        let open = Arc::new(OpenTasks::new(CallerBounds {
            streams: Some(3),
            ..CallerBounds::default()
        }));
        let anon = Owner::default();
        let a: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: std::net::SocketAddr = "127.0.0.2:1".parse().unwrap();
        let mut held: Vec<_> = (0..3)
            .map(|_| open.stream(&anon, Some(a)).unwrap().unwrap())
            .collect();
        let e = open.stream(&anon, Some(a)).err().expect("over the bound");
        assert_eq!(e.kind, ErrorKind::Unavailable, "{e}");
        assert!(e.to_string().contains("127.0.0.1"), "{e}");
        assert!(e.to_string().contains("3 event streams"), "{e}");
        // Another address, and a principal from the same address, have
        // their own.
        let other = open.stream(&anon, Some(b)).unwrap();
        let named = open.stream(&alice(), Some(a)).unwrap();
        assert!(other.is_some() && named.is_some());
        // A stream that ends gives its place back.
        held.pop();
        held.push(open.stream(&anon, Some(a)).unwrap().unwrap());
        drop((held, other, named));
        assert!(open.streams.lock().is_empty());
        assert_eq!(open.refused_streams.load(Ordering::Relaxed), 1);
        let none = Arc::new(OpenTasks::new(CallerBounds::default()));
        assert!(none.stream(&anon, Some(a)).unwrap().is_none());
    }
}
