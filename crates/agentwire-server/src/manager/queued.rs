//! Artifact chunks queued to the store without waiting for each commit.
//!
//! An agent that streams an artifact in chunks would otherwise wait for
//! one commit a chunk: on SQLite two thread hand-offs and a transaction
//! each, which dominates a streamed answer. With a store that has the
//! [`QueuedStore`] capability (its writes run in the order they are sent),
//! a chunk is queued under the task's order lock and the agent goes on at
//! once; the store commits the queued chunks of all tasks together, and
//! each chunk's event is published from the store's answer, once that
//! chunk is committed: nothing is published before it is durable, and the
//! events come in the order the chunks were queued.
//!
//! Everything else of the task waits for its queued chunks
//! ([`TaskManager::settle_queued`]): every other write of the task (a
//! status, a message, a cancellation) and every snapshot a subscriber
//! starts from, so a subscriber never gets a chunk both in its snapshot and
//! as an event, and a status never overtakes a chunk.
//!
//! A chunk the store fails to take fences the task in the store: its later
//! queued chunks are refused too. They are kept (with their events), and
//! written again, in order, by the usual awaited path (retried, then the
//! task failed: `storage.rs`) before the task's next write of any kind;
//! their events are published then. An agent learns of such a failure at
//! its next update, as it would have at the chunk's own.
//!
//! Used when the task is not held (`held.rs`), runs in one process (no
//! bus: the replicas' event log orders writes differently) and has no push
//! config (push deliveries go with the awaited path). At most
//! [`QUEUE_DEPTH`] chunks of a task are in flight: an agent faster than the
//! store waits for room.

use std::sync::Arc;

use agentwire_types::{A2aError, A2aResult};
use parking_lot::Mutex;
use tokio::sync::Semaphore;

use super::TaskManager;
use super::live::LiveTask;
use super::storage::OnFailure;
use super::write::Publish;
use crate::store::{TaskUpdate, Updated};

/// The most chunks of one task in flight (queued, not yet answered).
const QUEUE_DEPTH: u32 = 256;

/// A task's queued chunks: room for more, and those the store refused.
pub(crate) struct Queue {
    /// One permit a chunk in flight; all of them: none in flight.
    room: Arc<Semaphore>,
    /// Refused chunks, in the order they were queued, with their events.
    refused: Mutex<Vec<(TaskUpdate, Publish)>>,
}

impl Queue {
    fn new() -> Self {
        Self {
            room: Arc::new(Semaphore::new(QUEUE_DEPTH as usize)),
            refused: Mutex::new(Vec::new()),
        }
    }
}

impl TaskManager {
    /// Whether artifact chunks may be queued at all (the store has the
    /// capability, one process); a task may still not be (see the module).
    pub(super) fn queues_chunks(&self) -> bool {
        self.cluster.is_none() && self.store.queued().is_some()
    }

    /// Applies an artifact chunk (creating the task first if needed) by
    /// queuing it when the task allows (see the module), the usual way
    /// otherwise. Resolves once it is queued.
    pub(super) async fn emit_queued(
        &self,
        live: &Arc<LiveTask>,
        update: Box<TaskUpdate>,
    ) -> A2aResult<()> {
        let _guard = live.order.lock().await;
        if !live.state.lock().created {
            Box::pin(self.create_locked(live, Some(&update))).await?;
        }
        let queued = {
            let st = live.state.lock();
            // After the turn ended the store may refuse the chunk: the
            // agent is told so by the usual path.
            !st.hold && !st.last_state.ends_turn()
        };
        let store = match self.store.queued() {
            Some(store) if queued && self.push_targets(live).await.is_none() => store,
            _ => return self.apply_locked(live, update).await,
        };
        let queue = {
            let mut st = live.state.lock();
            Arc::clone(st.queue.get_or_insert_with(|| Arc::new(Queue::new())))
        };
        if !queue.refused.lock().is_empty() {
            self.settle_queued(live).await?;
        }
        Self::check_storage(live)?;
        let permit = Arc::clone(&queue.room)
            .acquire_owned()
            .await
            .map_err(|_| A2aError::internal("a task's queue was closed"))?;
        let mut publish = Self::event_of(live, &update, false);
        let kept = TaskUpdate::clone(&update);
        let task = Arc::clone(live);
        store.queue_update(
            &live.id,
            *update,
            Box::new(move |answer: A2aResult<Updated>| {
                match answer {
                    Ok(updated) => {
                        publish.stamp(updated.generation);
                        let mut st = task.state.lock();
                        st.last_state = updated.state;
                        if let Publish::Event(event) = publish {
                            task.publish(&mut st, Ok(event));
                        }
                    }
                    Err(_) => queue.refused.lock().push((kept, publish)),
                }
                drop(permit);
            }),
        )
    }

    /// Waits until none of the task's chunks is in flight, then writes
    /// those the store refused, in order, the usual way (publishing their
    /// events); the caller holds `order`. Every write and snapshot of a
    /// task that may have queued chunks comes after this.
    pub(crate) async fn settle_queued(&self, live: &LiveTask) -> A2aResult<()> {
        let Some(queue) = live.state.lock().queue.clone() else {
            return Ok(());
        };
        // All the permits: nothing in flight (none is added meanwhile,
        // since the caller holds `order`).
        match queue.room.acquire_many(QUEUE_DEPTH).await {
            Ok(all) => drop(all),
            Err(_) => return Err(A2aError::internal("a task's queue was closed")),
        }
        let refused = std::mem::take(&mut *queue.refused.lock());
        for (update, mut publish) in refused {
            let updated = self
                .write_stored_update(live, &update, OnFailure::FailTask)
                .await?;
            self.publish_applied(live, updated, &mut publish);
        }
        Ok(())
    }
}
