//! The task generation of the A2A v1.1 draft (section 3.2.7 of
//! <https://a2a-protocol.org/latest/specification/>, draft `dev-1.1`): who
//! reads it, and `GetTask` with `currentGeneration` (the long-poll).
//!
//! The generation itself is counted where updates are applied (the
//! store's `apply_update`, under the task's order lock) and stamped on the
//! events by the task manager. The `ifGenerationMatch` check of a message
//! continuing a task is in the manager (`continue_task`), under the same
//! lock.
//!
//! Version negotiation (see `docs/generation.md`): the request fields
//! (`currentGeneration`, `ifGenerationMatch`) are honoured whatever 1.x
//! version the call names (a 1.0 client never sends them, and the draft's
//! own example sends them with `A2A-Version: 1.0`). The `generation` fields
//! of answers are written only to a call that names `A2A-Version: 1.1`:
//! the v1.0 JSON schema (which the official TCK validates answers against)
//! allows no other member in a task or an update event.

use std::sync::Arc;

use agentwire_types::{A2aResult, StreamResponse, Task, TaskState, stream_response::Payload};

use super::*;
use crate::manager::Opening;
use crate::store::{Owner, StoredTask};

/// The protocol version whose answers carry the generation.
pub(crate) const GENERATION_VERSION: &str = "1.1";

/// Whether the answers to this call carry the generation (it asked for
/// `A2A-Version: 1.1`).
pub(crate) fn reads_generation(ctx: &CallContext) -> bool {
    admission::requested_version(ctx) == GENERATION_VERSION
}

/// A task as this call's version shows it (without the generation for a
/// 1.0 call).
pub(crate) fn task_for(ctx: &CallContext, mut task: Task) -> Task {
    if !reads_generation(ctx) {
        task.generation = 0;
    }
    task
}

/// Takes the generation off an event (for a call that does not read it).
pub(crate) fn strip_event(event: &mut StreamResponse) {
    match event.payload.as_mut() {
        Some(Payload::Task(t)) => t.generation = 0,
        Some(Payload::StatusUpdate(u)) => u.generation = 0,
        Some(Payload::ArtifactUpdate(u)) => u.generation = 0,
        _ => {}
    }
}

/// The generation an event says the task reached (0: none said).
fn event_generation(event: &StreamResponse) -> i64 {
    match event.payload.as_ref() {
        Some(Payload::Task(t)) => t.generation,
        Some(Payload::StatusUpdate(u)) => u.generation,
        Some(Payload::ArtifactUpdate(u)) => u.generation,
        _ => 0,
    }
}

impl RequestHandler {
    /// `GetTask` with `currentGeneration = after`: the task once its
    /// generation is past `after`, or as it is when
    /// [`HandlerConfig::long_poll_max`] runs out first. Answers at once for
    /// a task already past it, or terminal (it can no longer move). The
    /// wait holds no thread: it is a subscriber of the task (as a stream
    /// is, across replicas through the bus too), and it counts as a request
    /// in flight until it answers ([`HandlerConfig::max_in_flight`]).
    pub(super) async fn long_poll(
        &self,
        owner: &Owner,
        stored: StoredTask,
        after: i64,
        history: Option<usize>,
    ) -> A2aResult<Task> {
        let max = self.inner.config.long_poll_max;
        if stored.task.generation > after || stored.task.state().is_terminal() || max.is_zero() {
            return Ok(stored.task);
        }
        let deadline = tokio::time::sleep(max);
        tokio::pin!(deadline);
        let (opening, mut sub) = self.inner.manager.subscribe(&stored, Some(0), None).await?;
        let moved = match &opening {
            Opening::Snapshot { task, .. } => task.generation > after || task.state().is_terminal(),
            Opening::Missed { .. } => true,
        };
        if !moved {
            loop {
                tokio::select! {
                    event = sub.recv_event() => match event {
                        Some((_, Ok(event))) if !past(&event, after) => {}
                        // Moved, or the subscription ended (the server
                        // stops, the stream was cut): the task as it is.
                        _ => break,
                    },
                    () = &mut deadline => break,
                }
            }
        }
        drop(sub);
        Ok(self
            .visible_task(owner, &stored.task.id, history)
            .await?
            .task)
    }
}

/// Whether an event shows the task past `after` (an event without a
/// generation, or a snapshot, counts as a change: the task is read again).
fn past(event: &Arc<StreamResponse>, after: i64) -> bool {
    let generation = event_generation(event);
    generation == 0
        || generation > after
        || matches!(event.payload, Some(Payload::Task(_)))
        || event.state().is_some_and(TaskState::is_terminal)
}
