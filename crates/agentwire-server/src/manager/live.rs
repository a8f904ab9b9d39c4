//! The live state of a task: what the manager knows of a task that is being
//! worked on or followed (whether it exists yet, its runs, its subscribers,
//! its last state), and how a request attaches to it.

use std::sync::Arc;

use agentwire_types::{A2aError, Message, Task, TaskState};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::push::PushTargets;
use super::subscribers::Subscriber;
use super::{TaskManager, cluster, events, order};
use crate::store::{Owner, StoredTask};

/// What the manager knows of a live task, behind the [`LiveTask`]'s mutex
/// (held briefly, never across an await).
pub(crate) struct LiveState {
    /// The task exists in the store.
    pub(crate) created: bool,
    /// The agent answered with a plain message (no task will exist).
    pub(crate) replied: bool,
    /// Executor runs in progress.
    pub(crate) running: u32,
    /// Removed from the registry; attach to a fresh one instead.
    pub(crate) retired: bool,
    /// Last known state.
    pub(crate) last_state: TaskState,
    /// The user message that starts a new task's history.
    pub(crate) first_message: Option<Message>,
    /// The push config given inline with the message that creates the
    /// task, stored when the task is.
    pub(crate) inline_push: Option<crate::store::StoredPushConfig>,
    /// The task's push configs as last read from the store (`None`: not
    /// read yet, or changed since).
    pub(crate) push_targets: Option<PushTargets>,
    /// Who follows the task.
    pub(crate) subscribers: Vec<Subscriber>,
    /// Several replicas: where the subscribers are in the event log.
    pub(crate) remote: cluster::Remote,
    /// The task as the last update that ended the turn left it, while a
    /// request waiting for the end of the turn has not taken it: a terminal
    /// task is packed in the in-memory store, and this spares the request
    /// decoding it (or any store read).
    pub(crate) turn_task: Option<Arc<Task>>,
    /// The task's recent events, recorded once a stream has followed it
    /// (so a reconnecting stream can be resumed).
    pub(crate) log: Option<events::EventLog>,
    /// The bytes (protobuf size) of each of the task's artifacts, by id:
    /// what bounds an artifact's growth chunk by chunk (see
    /// `HandlerConfig::max_artifact_bytes`).
    pub(crate) artifact_bytes: Vec<(String, usize)>,
    /// The store failed to take one of the task's updates (see
    /// `storage.rs`): the error every request about the task gets until
    /// the task's failure is recorded.
    pub(crate) storage_failed: Option<Box<A2aError>>,
    /// The task's writes are held back until its turn ends (see
    /// `held.rs`): nobody has been told about it.
    pub(crate) hold: bool,
    /// The task as the store would hold it, while its writes are held back
    /// (`None` once it is written).
    pub(crate) held: Option<Box<Task>>,
    /// Since when the task is held (its first event).
    pub(crate) held_since: Option<tokio::time::Instant>,
    /// The server is stopping: the last item of the task's streams (see
    /// `TaskManager::end_streams_at_shutdown`), for a stream subscriber
    /// that was lagging when they were ended.
    pub(crate) closing: Option<super::subscribers::Item>,
    /// The task's artifact chunks queued to the store (see `queued.rs`),
    /// once one was.
    pub(crate) queue: Option<Arc<super::queued::Queue>>,
}

impl LiveState {
    /// Whether a stream subscriber is there (it wants every event).
    pub(super) fn streaming(&self) -> bool {
        // A recorded log wants every event too: a stream may reconnect.
        self.log.is_some()
            || self
                .subscribers
                .iter()
                .any(|s| matches!(s, Subscriber::Stream { .. }))
    }

    /// Whether any subscriber wants an event (final: it ends the turn).
    pub(super) fn wants(&self, is_final: bool) -> bool {
        self.log.is_some()
            || self.subscribers.iter().any(|s| match s {
                Subscriber::Stream { .. } => true,
                Subscriber::Final(tx) => is_final && tx.is_some(),
                Subscriber::Lagging { .. } => false,
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
    pub(crate) state: Mutex<LiveState>,
}

impl TaskManager {
    /// The live state of an existing task, created if needed, with `f`
    /// applied to it atomically (so it cannot be retired in between).
    pub(super) fn attach<R>(
        self: &Arc<Self>,
        stored: &StoredTask,
        f: impl Fn(&Arc<Self>, &Arc<LiveTask>, &mut LiveState) -> R,
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
                        state: Mutex::new(LiveState {
                            created: true,
                            replied: false,
                            running: 0,
                            retired: false,
                            last_state: stored.task.state(),
                            first_message: None,
                            inline_push: None,
                            push_targets: None,
                            subscribers: Vec::new(),
                            remote: cluster::Remote::default(),
                            turn_task: None,
                            // A log kept since the task last had live
                            // state goes on recording.
                            log: self.logs.take_retired(&stored.task.id),
                            artifact_bytes: artifact_sizes(&stored.task),
                            storage_failed: None,
                            hold: false,
                            held: None,
                            held_since: None,
                            closing: None,
                            queue: None,
                        }),
                    })
                })
                .clone();
            let mut st = live.state.lock();
            if st.retired {
                continue;
            }
            let r = f(self, &live, &mut st);
            drop(st);
            return (live, r);
        }
    }
}

/// The size of each artifact of a stored task, for `LiveState::artifact_bytes`.
fn artifact_sizes(task: &Task) -> Vec<(String, usize)> {
    use prost::Message as _;
    task.artifacts
        .iter()
        .map(|a| (a.artifact_id.clone(), a.encoded_len()))
        .collect()
}
