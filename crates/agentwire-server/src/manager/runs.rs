//! Running agents: the live state of a new task with its first run, a
//! message continuing a task, the end of a run (a task the agent left
//! unfinished fails), and orphaned tasks whose agent went away.

use std::sync::Arc;

use agentwire_types::{
    A2aError, A2aResult, ErrorKind, Message, Part, Role, StreamResponse, TaskState, TaskStatus,
};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::live::{LiveState, LiveTask};
use super::storage::OnFailure;
use super::subscribers::{Subscriber, Subscription};
use super::{TaskManager, cluster, order};
use crate::store::{Owner, StoredTask, TaskUpdate};

impl TaskManager {
    /// Registers the live state of a task that does not exist yet, with the
    /// request's subscription and one executor run accounted for.
    pub(crate) fn start_new(
        self: &Arc<Self>,
        id: String,
        context_id: String,
        owner: Owner,
        first_message: Message,
        inline_push: Option<crate::store::StoredPushConfig>,
        finals_only: bool,
    ) -> (Arc<LiveTask>, Subscription) {
        let hold = self.may_hold(finals_only, inline_push.is_some());
        let live = Arc::new(LiveTask {
            id: id.clone(),
            context_id,
            owner,
            cancel: CancellationToken::new(),
            order: order::OrderLock::default(),
            state: Mutex::new(LiveState {
                created: false,
                replied: false,
                running: 1,
                retired: false,
                last_state: TaskState::Unspecified,
                first_message: Some(first_message),
                inline_push,
                // A new task has no config in the store yet (and without
                // push, none is ever read).
                push_targets: self.push.as_ref().map(|_| Arc::default()),
                subscribers: Vec::with_capacity(1),
                remote: cluster::Remote::new_task(),
                turn_task: None,
                log: None,
                artifact_bytes: Vec::new(),
                storage_failed: None,
                hold,
                held: None,
                held_since: None,
                closing: None,
                queue: None,
            }),
        });
        let sub = {
            let mut st = live.state.lock();
            self.subscribe_locked(&live, &mut st, finals_only)
        };
        self.live.insert(id, Arc::clone(&live));
        if hold {
            self.sweep_held_soon();
        }
        (live, sub)
    }

    /// Prepares an existing task for a continuing message: records the
    /// message in its history and counts one executor run.
    ///
    /// With `if_match` (the message's `ifGenerationMatch`, A2A v1.1
    /// draft), the task's generation is compared with it under the task's
    /// order lock, and a message that passes moves the task to `WORKING`
    /// in the same locked step (one generation, one status event): a
    /// second writer holding the same generation is then refused with
    /// `TaskGenerationMismatchError`, whichever runs first.
    pub(crate) async fn continue_task(
        self: &Arc<Self>,
        stored: &StoredTask,
        message: Message,
        finals_only: bool,
        if_match: Option<i64>,
    ) -> A2aResult<(Arc<LiveTask>, Subscription)> {
        let (live, ()) = self.attach(stored, |_, _, st| st.running += 1);
        let guard = live.order.lock().await;
        let result = async {
            if let Some(expected) = if_match {
                let current = self
                    .snapshot_locked(&live, Some(0))
                    .await?
                    .ok_or_else(|| A2aError::task_not_found(&live.id))?
                    .task;
                if current.generation != expected {
                    return Err(A2aError::generation_mismatch(
                        &live.id,
                        expected,
                        current.generation,
                    ));
                }
                if current.state().is_terminal() {
                    return Err(crate::store::closed_error(&live.id, current.state()));
                }
            }
            // A store that keeps failing refuses the message, and the task
            // stays as it was: its sender may send it again.
            let mut state = self
                .write_update_or(
                    &live,
                    Box::new(TaskUpdate::UserMessage(message)),
                    OnFailure::Refuse,
                )
                .await?
                .state;
            if if_match.is_some() {
                let working = TaskUpdate::Status {
                    status: TaskStatus::new(TaskState::Working),
                    metadata: None,
                };
                let after = self.apply_locked_at(&live, Box::new(working)).await?;
                state = TaskState::Working;
                // Another replica's writer may have passed the same check
                // between the read above and this write (this replica's
                // lock orders only its own writers): the write that took
                // the generation after the expected one is the winner.
                if let Some(expected) = if_match
                    && after != 0
                    && after != expected + 1
                {
                    return Err(A2aError::generation_mismatch(&live.id, expected, after - 1));
                }
            }
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
                let mut st = live.state.lock();
                st.last_state = state;
                let sub = self.subscribe_locked(&live, &mut st, finals_only);
                let at = st.log.as_ref().map(|l| l.last_id());
                if let (Some(snapshot), Some(Subscriber::Stream { tx, .. })) =
                    (snapshot, st.subscribers.last())
                {
                    // Not counted in the queue's bytes: it is the first.
                    let _ = tx.try_send((at, Ok(snapshot), 0));
                }
                Ok((Arc::clone(&live), sub))
            }
            Err(e) => {
                live.state.lock().running -= 1;
                Err(e)
            }
        };
        drop(guard);
        if outcome.is_err() {
            self.release(&live);
        }
        outcome
    }

    /// Fails a task whose agent is gone (the process that ran it died):
    /// applies `TASK_STATE_FAILED` with a message saying why, unless the
    /// task reached another state meanwhile. Returns whether it was failed.
    pub(crate) async fn fail_orphan(self: &Arc<Self>, stored: &StoredTask, reason: &str) -> bool {
        let (live, ()) = self.attach(stored, |_, _, st| st.running += 1);
        let guard = live.order.lock().await;
        let running_here = live.state.lock().running > 1;
        let state = live.state.lock().last_state;
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
        live.state.lock().running -= 1;
        drop(guard);
        self.release(&live);
        failed
    }

    /// What the live tasks of this process are doing now (for the
    /// metrics): one pass over the live map, each task's state locked in
    /// turn.
    pub(crate) fn live_stats(&self) -> crate::observe::metrics::LiveStats {
        use super::subscribers::Subscriber;
        let mut stats = crate::observe::metrics::LiveStats::default();
        let queues = self.queue_stats();
        stats.queued_bytes = queues.bytes;
        stats.streams_cut = [queues.cut_stream, queues.cut_server];
        for e in self.live.iter() {
            let st = e.value().state.lock();
            stats.turns_in_flight += u64::from(st.running);
            for s in st.subscribers.iter().filter(|s| !s.is_closed()) {
                match s {
                    Subscriber::Stream { .. } | Subscriber::Lagging { .. } => stats.streams += 1,
                    Subscriber::Final(_) => stats.waiting += 1,
                }
            }
            if st.created {
                stats.count_state(st.last_state);
            }
        }
        stats
    }

    /// Whether an agent of this process is still working on a task.
    pub(crate) fn running_here(&self) -> bool {
        self.live.iter().any(|e| busy(&e.value().state.lock()))
    }

    /// At shutdown, once the grace period is over: fails every task an
    /// agent of this process is still working on (submitted or working)
    /// with a message saying why, then stops its agent. The failure is
    /// written to the store like any update, and ends the task's open
    /// streams with a final status update. Returns the ids of the tasks
    /// failed.
    pub(crate) async fn fail_running_here(&self, reason: &str) -> Vec<String> {
        let running: Vec<Arc<LiveTask>> = self
            .live
            .iter()
            .filter(|e| busy(&e.value().state.lock()))
            .map(|e| Arc::clone(e.value()))
            .collect();
        let mut failed = Vec::new();
        for live in running {
            let guard = live.order.lock().await;
            if busy(&live.state.lock()) {
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
                    Ok(()) => failed.push(live.id.clone()),
                    Err(e) => {
                        tracing::warn!(task = %live.id, error = %e, "could not fail a task at shutdown");
                    }
                }
            }
            drop(guard);
            // After the failure is recorded, so that the agent's end cannot
            // record a cancelation first.
            live.cancel.cancel();
        }
        failed
    }

    /// Called when an executor run ends: fails a task the agent left
    /// unfinished, turns an early error into the request's answer, and
    /// releases the live state. With a store that answers at once (an
    /// [`ImmediateStore`](crate::store::ImmediateStore)), the usual case is
    /// done without a future; otherwise the returned future does it.
    pub(crate) fn finish_run<'a>(
        &'a self,
        live: &'a LiveTask,
        outcome: Result<A2aResult<()>, String>,
    ) -> Option<BoxFuture<'a, ()>> {
        if self.store.immediate().is_some()
            && matches!(outcome, Ok(Ok(())))
            && self.finish_settled_now(live)
        {
            return None;
        }
        Some(Box::pin(self.finish_run_inner(live, outcome)))
    }

    /// What the end of a run does, decided under `order` from the live
    /// state: the one rule both ways of finishing a run follow.
    fn run_end(live: &LiveTask, st: &LiveState, outcome: Result<A2aResult<()>, String>) -> RunEnd {
        let (created, replied, state) = (st.created, st.replied, st.last_state);
        if st.storage_failed.is_some() {
            // The store failed: the requests were answered with its error,
            // and the task's failure is recorded in the background.
            return RunEnd::Settled;
        }
        if created && !state.is_terminal() && live.cancel.is_cancelled() {
            return RunEnd::Canceled;
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
        match problem {
            None => RunEnd::Settled,
            Some(err) if created && !state.ends_turn() => RunEnd::FailTask(err),
            Some(err) if !created && !replied => RunEnd::Answer(err),
            Some(err) => RunEnd::Late(err),
        }
    }

    /// The usual end of a run, without a future: [`RunEnd::Settled`] (the
    /// agent returned after its turn ended, and the task was not canceled
    /// meanwhile), and nobody else holds `order`. Returns whether the run is
    /// finished; otherwise nothing changed.
    fn finish_settled_now(&self, live: &LiveTask) -> bool {
        let Ok(guard) = live.order.try_lock() else {
            return false;
        };
        {
            let mut st = live.state.lock();
            if !matches!(Self::run_end(live, &st, Ok(Ok(()))), RunEnd::Settled) {
                return false;
            }
            st.running -= 1;
        }
        drop(guard);
        self.release(live);
        true
    }

    async fn finish_run_inner(&self, live: &LiveTask, outcome: Result<A2aResult<()>, String>) {
        let guard = live.order.lock().await;
        let end = Self::run_end(live, &live.state.lock(), outcome);
        match end {
            RunEnd::Settled => {}
            RunEnd::Canceled => {
                // The agent stopped because the task was canceled: whatever
                // it returned, the task ends canceled (CancelTask may be
                // about to record the same; the state machine keeps the
                // first).
                let update = TaskUpdate::Status {
                    status: TaskStatus::new(TaskState::Canceled),
                    metadata: None,
                };
                if let Err(e) = self.apply_locked(live, Box::new(update)).await {
                    tracing::debug!(task = %live.id, error = %e, "cancel already recorded");
                }
            }
            RunEnd::FailTask(err) => {
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
                    // Nobody may be left waiting for a turn that will not
                    // end: the requests get the error (a task ended
                    // meanwhile, on another replica, told them already).
                    if e.kind != ErrorKind::UnsupportedOperation {
                        let mut st = live.state.lock();
                        live.publish(&mut st, Err(Box::new(e)));
                    }
                }
            }
            RunEnd::Answer(err) => {
                let mut st = live.state.lock();
                live.publish(&mut st, Err(Box::new(err)));
            }
            RunEnd::Late(err) => {
                tracing::debug!(task = %live.id, error = %err, "agent error after the task settled");
            }
        }
        live.state.lock().running -= 1;
        drop(guard);
        self.release(live);
    }
}

/// What the end of a run does (see [`TaskManager::run_end`]).
enum RunEnd {
    /// The turn ended as it should: nothing to record.
    Settled,
    /// The task was canceled while the agent ran: it ends canceled.
    Canceled,
    /// The agent left the task unfinished, or failed while it was: the
    /// task fails, with this as its status message.
    FailTask(A2aError),
    /// The agent failed before answering at all: this is the request's
    /// answer.
    Answer(A2aError),
    /// The agent failed after the task settled: only logged.
    Late(A2aError),
}

/// Whether an agent of this process works on the task: a run under way
/// while the task is submitted or working.
fn busy(st: &LiveState) -> bool {
    st.running > 0
        && st.created
        && matches!(st.last_state, TaskState::Submitted | TaskState::Working)
}
