//! Cancellation: the live state a `CancelTask` works on. The agent stops
//! through the task's cancellation token (see `runs.rs` for the run that
//! ends canceled, and `cluster/replicas.rs` for a cancellation on another
//! replica).

use std::sync::Arc;

use super::TaskManager;
use super::live::LiveTask;
use crate::store::StoredTask;

impl TaskManager {
    /// The live state of an existing task for cancellation.
    pub(crate) fn attach_for_cancel(self: &Arc<Self>, stored: &StoredTask) -> Arc<LiveTask> {
        let (live, ()) = self.attach(stored, |_, _, st| st.running += 1);
        live
    }

    /// Ends a cancellation started with [`Self::attach_for_cancel`].
    pub(crate) fn end_cancel(&self, live: &Arc<LiveTask>) {
        live.state.lock().running -= 1;
        self.release(live);
    }
}
