//! A store that fails to take a task's update (the database locked by
//! another process, the disk full, an I/O error, a damaged file).
//!
//! A write that fails with a transient storage fault is tried again, with
//! pauses growing from `StoreRetry::first_pause` to `max_pause`, for
//! `StoreRetry::budget` in all (under the task's order lock: the task's
//! later updates wait, in order; nothing is lost if the store recovers in
//! time). Once the budget is spent (at once for a damaged database), the
//! task fails:
//!
//! - every request waiting for it (a blocking `SendMessage`) and every
//!   stream following it gets the storage error, at once;
//! - the agent is canceled (its token), and its later updates are refused
//!   with the same error;
//! - requests about the task (`GetTask`, `CancelTask`, `SubscribeToTask`,
//!   a message continuing it) get that error too, never a task-state error;
//! - a background task records `TASK_STATE_FAILED`, with a status message
//!   saying storage failed, as soon as the store accepts writes again
//!   (tried every `max_pause`). It holds one status per task, nothing
//!   else: the updates the store refused are not kept.
//!
//! The creation of a new task that nobody has been told about yet (a
//! stream's, or a send answered at once: the write before their first
//! event) is tried for [`NEW_TASK_BUDGET`] at most (2 s, or the budget if
//! it is shorter): its caller is waiting with nothing to show, so it gets
//! the storage error promptly (`Unavailable`: try again later) instead of
//! silence for the whole budget, and no task is left behind. (A blocking
//! send's task, held until its turn ends, is written with the whole
//! budget: by then its agent has done the work.)
//!
//! If the process stops before the failure is recorded, the task is left
//! in the store as it was (submitted or working): the crash recovery of
//! the next start fails it (`RequestHandler::recover_orphaned_tasks`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire_types::{A2aError, A2aResult, Message, Part, Role, TaskState, TaskStatus};
use futures::future::BoxFuture;

use super::TaskManager;
use super::live::LiveTask;
use crate::store::{StorageFault, TaskUpdate, storage_error, storage_fault};

/// The longest a new task's creation is retried when nobody has been told
/// about the task yet (see the module's documentation).
pub(crate) const NEW_TASK_BUDGET: Duration = Duration::from_secs(2);

/// What a write that the store keeps failing does to the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OnFailure {
    /// The task fails (an agent's update, a cancellation).
    FailTask,
    /// Only the write is refused, the task stays as it is (a message
    /// continuing a task: its sender gets the error and may send again).
    Refuse,
}

impl TaskManager {
    /// Refuses any write to a task that failed because of the storage.
    pub(super) fn check_storage(live: &LiveTask) -> A2aResult<()> {
        match &live.state.lock().storage_failed {
            Some(e) => Err(A2aError::clone(e)),
            None => Ok(()),
        }
    }

    /// The error of requests about a task whose failure (because of the
    /// storage) is not recorded yet; `None` for any other task.
    pub(crate) fn storage_failure(&self, task_id: &str) -> Option<A2aError> {
        // A store that answers at once does no I/O, and never fails so.
        if self.store.immediate().is_some() {
            return None;
        }
        let live = self.live.get(task_id).map(|l| Arc::clone(l.value()))?;
        live.state.lock().storage_failed.as_deref().cloned()
    }

    /// A write that failed with `first`: tried again while it fails with a
    /// transient storage fault and the budget (counted from `started`)
    /// lasts. When it still fails with a storage fault, `on_failure` says
    /// whether the task fails (see the module's documentation).
    pub(super) async fn retry_write<'f, T>(
        &self,
        live: &LiveTask,
        started: Instant,
        first: A2aError,
        on_failure: OnFailure,
        again: &mut (dyn FnMut() -> BoxFuture<'f, A2aResult<T>> + Send),
    ) -> A2aResult<T> {
        let mut error = first;
        let mut pause = self.retry.first_pause;
        let mut attempts = 1u32;
        // A task not created yet: nobody was told about it, its caller
        // waits with nothing to show.
        let budget = if live.state.lock().created {
            self.retry.budget
        } else {
            self.retry.budget.min(NEW_TASK_BUDGET)
        };
        while let Some(fault) = storage_fault(&error).filter(|f| f.is_transient()) {
            let left = budget.saturating_sub(started.elapsed());
            if left.is_zero() {
                break;
            }
            if attempts == 1 {
                tracing::warn!(
                    task = %live.id,
                    fault = fault.as_str(),
                    error = %error,
                    "task store: a write failed; retrying"
                );
            }
            tokio::time::sleep(pause.min(left)).await;
            pause = self.retry.next_pause(pause);
            attempts += 1;
            match again().await {
                Ok(done) => {
                    tracing::info!(task = %live.id, attempts, "task store: the write succeeded after retrying");
                    return Ok(done);
                }
                Err(e) => error = e,
            }
        }
        let Some(fault) = storage_fault(&error) else {
            // Not the storage (the update was refused, a conflict...): the
            // caller's error as it was.
            return Err(error);
        };
        match on_failure {
            OnFailure::Refuse => Err(error),
            OnFailure::FailTask => {
                Err(self.fail_for_storage(live, fault, &error, started.elapsed()))
            }
        }
    }

    /// The task fails because the store failed `cause`: its waiters and
    /// streams get the storage error, the agent is canceled, and its
    /// failure is recorded once the store takes writes again. Returns the
    /// error requests about the task get meanwhile.
    fn fail_for_storage(
        &self,
        live: &LiveTask,
        fault: StorageFault,
        cause: &A2aError,
        after: Duration,
    ) -> A2aError {
        let tried = if fault.is_transient() {
            format!(" (tried for {:.1} s)", after.as_secs_f64())
        } else {
            String::new()
        };
        let error = storage_error(
            fault,
            format!(
                "task {} failed: the task store could not save its update{tried}: {}; the task \
                 is recorded as failed as soon as the store accepts writes again",
                live.id, cause.message
            ),
        )
        .with_metadata("taskId", live.id.clone());
        let created = {
            let mut st = live.state.lock();
            if let Some(e) = &st.storage_failed {
                return A2aError::clone(e);
            }
            st.storage_failed = Some(Box::new(error.clone()));
            // Every waiter and stream: the error ends their request.
            live.publish(&mut st, Err(Box::new(error.clone())));
            st.created
        };
        tracing::error!(task = %live.id, error = %cause, "task store: the task failed because its update could not be stored");
        live.cancel.cancel();
        // A task never created has nothing to record: nobody saw it.
        if created {
            let reason = format!(
                "The task failed because its progress could not be saved (the task store \
                 failed: {}). Send the request again to retry.",
                cause.message
            );
            self.record_failure_later(live, reason);
        }
        error
    }

    /// Starts the background task that records the failure of `live`.
    fn record_failure_later(&self, live: &LiveTask, reason: String) {
        let Some(manager) = self.shared() else {
            tracing::warn!(task = %live.id, "task store: cannot record the task's failure (no shared manager)");
            return;
        };
        let Some(live) = self
            .live
            .get(&live.id)
            .map(|l| Arc::clone(l.value()))
            .filter(|l| std::ptr::eq(Arc::as_ptr(l), live))
        else {
            tracing::warn!(task = %live.id, "task store: cannot record the task's failure (no live state)");
            return;
        };
        {
            let mut st = live.state.lock();
            if st.retired {
                return;
            }
            // Keeps the live state (and its error) until the failure is
            // recorded.
            st.running += 1;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            live.state.lock().running -= 1;
            return;
        };
        rt.spawn(manager.record_failure(live, reason));
    }

    /// Records `TASK_STATE_FAILED` with `reason` once the store takes it,
    /// then lets the live state go.
    async fn record_failure(self: Arc<Self>, live: Arc<LiveTask>, reason: String) {
        let mut pause = self.retry.first_pause;
        let mut attempts = 0u32;
        loop {
            tokio::time::sleep(pause).await;
            pause = self.retry.next_pause(pause);
            attempts += 1;
            let guard = live.order.lock().await;
            let message = Message {
                message_id: agentwire_types::new_id(),
                context_id: live.context_id.clone(),
                task_id: live.id.clone(),
                role: Role::Agent as i32,
                parts: vec![Part::text(reason.clone())],
                ..Default::default()
            };
            if let Some(record) = Self::held_failure(&live, &message) {
                // Never written: created failed.
                match self.store.create(&live.owner, record).await {
                    Ok(_) => {
                        Self::held_recorded(&live);
                        let mut st = live.state.lock();
                        st.last_state = TaskState::Failed;
                        tracing::info!(task = %live.id, attempts, "task store: the task's failure is recorded");
                        break;
                    }
                    Err(e) if storage_fault(&e).is_some() => {
                        tracing::debug!(task = %live.id, error = %e, "task store: still failing");
                        drop(guard);
                        continue;
                    }
                    Err(e) => {
                        tracing::debug!(task = %live.id, error = %e, "task store: the failure is not recorded");
                        break;
                    }
                }
            }
            let update = TaskUpdate::Status {
                status: TaskStatus::new(TaskState::Failed).with_message(message),
                metadata: None,
            };
            let targets = self.push_targets(&live).await;
            let mut publish = Self::event_of(&live, &update, targets.is_some());
            let written = self.store.update(&live.id, update).await;
            self.after_write(&live, &written).await;
            match written {
                Ok(updated) => {
                    self.publish_applied(&live, updated, &mut publish);
                    if let (Some(targets), Some(event)) = (targets, publish.event()) {
                        self.push_event(&live, &targets, event).await;
                    }
                    tracing::info!(task = %live.id, attempts, "task store: the task's failure is recorded");
                    break;
                }
                Err(e) if storage_fault(&e).is_some() => {
                    tracing::debug!(task = %live.id, error = %e, "task store: still failing");
                }
                Err(e) => {
                    // Ended meanwhile (another replica), or gone.
                    tracing::debug!(task = %live.id, error = %e, "task store: the failure is not recorded");
                    break;
                }
            }
            drop(guard);
        }
        {
            let mut st = live.state.lock();
            st.storage_failed = None;
            st.running -= 1;
        }
        self.release(&live);
    }
}
