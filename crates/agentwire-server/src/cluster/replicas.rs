//! Several replicas: the task manager's side of an [`EventBus`].
//!
//! The store logs every event it applies with a position (`seq`) that,
//! within one task, follows the order in which the writes were applied.
//! Each live task remembers the position up to which its local subscribers
//! have everything (delivered, or contained in the snapshot they started
//! from). With that one number, under the task's `order` lock:
//!
//! - a subscriber joining reads the snapshot together with its position
//!   `M`; the subscribers already there first receive the other replicas'
//!   events up to `M`, then the newcomer registers: nobody misses or
//!   repeats an event;
//! - a local write learns where it went (`before`, `after`): the other
//!   replicas' events up to `before` are published first, then the local
//!   event, and the position moves to `after`: local and remote events
//!   reach subscribers in the order they were applied;
//! - an announcement from another replica (or a resynchronisation after a
//!   lost connection) makes one delivery task per live task fetch the
//!   events after the position, in order, from other origins only (this
//!   replica's own events were published when they were written).
//!
//! Remote events go through the same `publish` as local ones (streams close
//! at terminal states, slow subscribers resynchronise), but not to the push
//! sender: the replica that applied an event pushes it.
//!
//! A cancellation on another replica arrives as [`Notice::Cancel`] and
//! fires the task's token if its agent runs here.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use agentwire_types::{A2aResult, TaskState};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::bus::{EventBus, Notice, Notices};
use crate::manager::{LiveState, LiveTask, Subscriber, TaskManager};
use crate::store::{LogSpan, StoredTask};

/// Events fetched from the log per query.
const BATCH: usize = 256;
/// Attempts of a delivery before it gives up (its stream subscribers are
/// then resynchronised from a snapshot).
const MAX_ATTEMPTS: u32 = 5;

/// The bus of a task manager, and the guard that stops its listener when
/// the manager goes.
pub(crate) struct Cluster {
    bus: Arc<dyn EventBus>,
    _stop: DropGuard,
}

/// What a live task knows of the event log (in its `LiveState`).
#[derive(Debug, Default)]
pub(crate) struct Remote {
    /// The position up to which the local subscribers have every event;
    /// `None` until someone needs it.
    seq: Option<i64>,
    /// The highest position another replica announced.
    announced: i64,
    /// Notices may have been missed: fetch everything after `seq`.
    resync: bool,
    /// A delivery task runs for this task.
    delivering: bool,
}

impl Remote {
    /// The state of a task this replica is creating: no event precedes it.
    pub(crate) fn new_task() -> Self {
        Self {
            seq: Some(0),
            ..Self::default()
        }
    }
}

/// Resynchronises the stream subscribers from a snapshot (when the events
/// they need cannot be read): their queues close, and each reads a fresh
/// snapshot once it has drained its queue.
fn desync(st: &mut LiveState) {
    // The task's log missed events too: ids from it can no longer resume.
    st.log = None;
    for s in &mut st.subscribers {
        if let Subscriber::Stream { overflow, .. } = s {
            overflow.store(true, Ordering::Release);
            let overflow = Arc::clone(overflow);
            *s = Subscriber::Lagging { overflow };
        }
    }
}

impl TaskManager {
    /// The shared manager, listening to `bus` when there is one.
    pub(crate) fn with_bus(mut self, bus: Option<Arc<dyn EventBus>>) -> Arc<Self> {
        let Some(bus) = bus else {
            return Arc::new(self);
        };
        let stop = CancellationToken::new();
        let notices = bus.listen();
        self.cluster = Some(Cluster {
            bus,
            _stop: stop.clone().drop_guard(),
        });
        let manager = Arc::new(self);
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(follow_notices(Arc::downgrade(&manager), notices, stop));
            }
            Err(_) => tracing::error!(
                "event bus: no tokio runtime; other replicas' events will not be delivered"
            ),
        }
        manager
    }

    fn bus(&self) -> Option<&Arc<dyn EventBus>> {
        self.cluster.as_ref().map(|c| &c.bus)
    }

    /// This replica created a task whose first event went to `span` of the
    /// log (the caller holds `order`): with a bus, the live task's position
    /// moves past it (nothing of another replica precedes it).
    pub(crate) fn created_here(&self, live: &LiveTask, span: LogSpan) {
        if self.bus().is_some() {
            let mut f = live.state.lock();
            f.remote.seq = Some(f.remote.seq.map_or(span.after, |s| s.max(span.after)));
        }
    }

    /// This replica wrote an update whose event went to `span` of the log
    /// (the caller holds `order`, and publishes the event after this): with
    /// a bus, the other replicas' events that precede it are published
    /// first, and the position moves past it.
    pub(crate) async fn written_here(&self, live: &LiveTask, span: LogSpan) {
        if self.bus().is_none() {
            return;
        }
        self.catch_up_locked(live, Some(span.before)).await;
        let mut f = live.state.lock();
        f.remote.seq = Some(f.remote.seq.map_or(span.after, |s| s.max(span.after)));
    }

    /// The state machine refused a write here, typically because the task
    /// ended on another replica: with a bus, the subscribers here learn it
    /// now (the caller holds `order`).
    pub(crate) async fn refused_here(&self, live: &LiveTask) {
        if self.bus().is_some() {
            self.catch_up_locked(live, None).await;
        }
    }

    /// The task as stored, for a subscriber about to join (the caller holds
    /// `order` and registers the subscriber after this returns). With a
    /// bus, the snapshot comes with its position in the log, and the
    /// subscribers already there first receive the events up to it.
    pub(crate) async fn snapshot_locked(
        &self,
        live: &LiveTask,
        history_length: Option<usize>,
    ) -> A2aResult<Option<StoredTask>> {
        let Some(bus) = self.bus() else {
            // Its queued chunks in the store first (`manager/queued.rs`):
            // none is then both in the snapshot and published after it.
            self.settle_queued(live).await?;
            return self.get_task(&live.id, history_length).await;
        };
        let Some((stored, seq)) = bus.snapshot(&live.id, history_length).await? else {
            return Ok(None);
        };
        {
            let mut f = live.state.lock();
            if f.remote.seq.is_none() {
                f.remote.seq = Some(seq);
                return Ok(Some(stored));
            }
        }
        self.catch_up_locked(live, Some(seq)).await;
        Ok(Some(stored))
    }

    /// Publishes the other replicas' events after the live task's position
    /// (up to `upto`, or all there are), in order, and moves the position
    /// (the caller holds `order`). False when the log could not be read:
    /// the stream subscribers are then resynchronised from a snapshot.
    async fn catch_up_locked(&self, live: &LiveTask, upto: Option<i64>) -> bool {
        let Some(bus) = self.bus() else {
            return true;
        };
        loop {
            let after = {
                let mut f = live.state.lock();
                let Some(seq) = f.remote.seq else {
                    return true;
                };
                if upto.is_some_and(|u| seq >= u) {
                    return true;
                }
                if f.subscribers.is_empty() {
                    // Nobody to tell; whoever comes starts from a snapshot.
                    if let Some(u) = upto {
                        f.remote.seq = Some(u);
                    }
                    return true;
                }
                seq
            };
            let batch = match bus.events_after(&live.id, after, upto, BATCH).await {
                Ok(batch) => batch,
                Err(e) => {
                    tracing::warn!(task = %live.id, error = %e, "event bus: cannot read other replicas' events; resynchronising the subscribers");
                    let mut f = live.state.lock();
                    desync(&mut f);
                    if let Some(u) = upto {
                        f.remote.seq = Some(f.remote.seq.map_or(u, |s| s.max(u)));
                    }
                    return false;
                }
            };
            let more = batch.len() >= BATCH;
            let mut f = live.state.lock();
            for remote in batch {
                if let Some(event) = remote.event {
                    if let Some(state) = event.state() {
                        f.last_state = state;
                    }
                    live.publish(&mut f, Ok(event));
                }
                f.remote.seq = Some(f.remote.seq.map_or(remote.seq, |s| s.max(remote.seq)));
            }
            if !more {
                if let Some(u) = upto {
                    f.remote.seq = Some(f.remote.seq.map_or(u, |s| s.max(u)));
                }
                return true;
            }
        }
    }

    /// Tells the other replicas that a task was canceled here (after the
    /// cancellation is recorded), so the one running its agent stops it.
    pub(crate) async fn cancel_elsewhere(&self, live: &LiveTask) {
        if let Some(bus) = self.bus() {
            if let Err(e) = bus.request_cancel(&live.id).await {
                tracing::warn!(task = %live.id, error = %e, "event bus: cannot announce a cancellation");
            }
        }
    }

    /// Tells the other replicas that a task's push configs changed here
    /// (after the change is stored).
    pub(crate) async fn push_configs_changed_elsewhere(&self, task_id: &str) {
        if let Some(bus) = self.bus() {
            if let Err(e) = bus.announce_push_configs(task_id).await {
                tracing::warn!(task = %task_id, error = %e, "event bus: cannot announce a push config change");
            }
        }
    }

    /// Another replica applied event `seq` of a task.
    fn announced(self: &Arc<Self>, task_id: &str, seq: i64) {
        if let Some(live) = self.live.get(task_id).map(|l| Arc::clone(l.value())) {
            self.wake(live, |r| r.announced = r.announced.max(seq), Some(seq));
        }
    }

    /// Notices may have been missed: every followed task catches up.
    fn resync_all(self: &Arc<Self>) {
        let all: Vec<Arc<LiveTask>> = self.live.iter().map(|l| Arc::clone(l.value())).collect();
        // A missed notice may have been a push config change: every cached
        // set is read again.
        let ids: Vec<String> = all.iter().map(|l| l.id.clone()).collect();
        if !ids.is_empty() && self.push.is_some() {
            let manager = Arc::clone(self);
            tokio::spawn(async move {
                for id in ids {
                    manager.push_configs_changed(&id).await;
                }
            });
        }
        for live in all {
            self.wake(live, |r| r.resync = true, None);
        }
    }

    /// Records what a delivery should do and starts one unless one runs.
    fn wake(
        self: &Arc<Self>,
        live: Arc<LiveTask>,
        note: impl FnOnce(&mut Remote),
        seq: Option<i64>,
    ) {
        {
            let mut f = live.state.lock();
            if f.retired || f.subscribers.is_empty() {
                return;
            }
            match (f.remote.seq, seq) {
                (None, _) => return,
                (Some(known), Some(seq)) if known >= seq => return,
                _ => {}
            }
            note(&mut f.remote);
            if f.remote.delivering {
                return;
            }
            f.remote.delivering = true;
        }
        tokio::spawn(Arc::clone(self).deliver(live));
    }

    /// Delivers what was announced for a task, until nothing more is; one
    /// at a time per task.
    async fn deliver(self: Arc<Self>, live: Arc<LiveTask>) {
        let mut failures = 0;
        loop {
            let target = {
                let mut f = live.state.lock();
                let pending = match f.remote.seq {
                    Some(seq) => f.remote.resync || seq < f.remote.announced,
                    None => false,
                };
                if !pending || f.retired || f.subscribers.is_empty() || failures >= MAX_ATTEMPTS {
                    f.remote.delivering = false;
                    f.remote.resync = false;
                    return;
                }
                if std::mem::take(&mut f.remote.resync) {
                    None
                } else {
                    Some(f.remote.announced)
                }
            };
            let delivered = {
                let _guard = live.order.lock().await;
                self.catch_up_locked(&live, target).await
            };
            if delivered {
                failures = 0;
            } else {
                failures += 1;
                if target.is_none() {
                    live.state.lock().remote.resync = true;
                }
                tokio::time::sleep(Duration::from_millis(50 << failures)).await;
            }
        }
    }

    /// `CancelTask` was called on another replica: stop the agent if it
    /// runs here (its later updates are refused: the task is terminal).
    /// The replica running a task's agent stopped: fail the task if it is
    /// still working and not running here.
    async fn orphaned_elsewhere(self: Arc<Self>, task_id: &str) {
        match self.store.get(task_id, None).await {
            Ok(Some(stored))
                if matches!(
                    stored.task.state(),
                    TaskState::Submitted | TaskState::Working
                ) =>
            {
                let reason = "The agent stopped while working on this task (the server \
                              replica running it went away). Send the request again to retry.";
                if self.fail_orphan(&stored, reason).await {
                    tracing::warn!(task = %task_id, "failed a task whose replica stopped");
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(task = %task_id, error = %e, "cannot read an orphaned task"),
        }
    }

    fn canceled_elsewhere(&self, task_id: &str) {
        if let Some(live) = self.live.get(task_id).map(|l| Arc::clone(l.value())) {
            if live.state.lock().running > 0 && !live.cancel.is_cancelled() {
                tracing::debug!(task = %task_id, "canceled on another replica");
                live.cancel.cancel();
            }
        }
    }
}

/// Hands the bus's notices to the manager until either goes away.
async fn follow_notices(manager: Weak<TaskManager>, mut notices: Notices, stop: CancellationToken) {
    loop {
        let notice = tokio::select! {
            () = stop.cancelled() => return,
            n = notices.recv() => match n {
                Some(n) => n,
                None => return,
            },
        };
        let Some(manager) = manager.upgrade() else {
            return;
        };
        match notice {
            Notice::Event { task_id, seq } => manager.announced(&task_id, seq),
            Notice::Cancel { task_id } => manager.canceled_elsewhere(&task_id),
            Notice::Resync => manager.resync_all(),
            Notice::Orphaned { task_id } => {
                tokio::spawn(async move { manager.orphaned_elsewhere(&task_id).await });
            }
            Notice::PushConfigs { task_id } => {
                tokio::spawn(async move { manager.push_configs_changed(&task_id).await });
            }
        }
    }
}
