//! Reading a task as stored, for the manager and the handler.

use std::sync::Arc;

use agentwire_types::{A2aResult, Task};

use super::TaskManager;
use crate::store::StoredTask;

impl TaskManager {
    /// A task as stored (a store with the [`ImmediateStore`](crate::store::ImmediateStore) capability answers without a
    /// future).
    pub(crate) async fn get_task(
        &self,
        id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<StoredTask>> {
        match self.store.immediate() {
            Some(store) => store.get_now(id, history_length),
            None => self.store.get(id, history_length).await,
        }
    }

    /// A task as stored: shared with the store when it can be (an [`ImmediateStore`](crate::store::ImmediateStore)) and
    /// its whole history is asked for, a copy of its own otherwise.
    pub(crate) async fn shared_task(
        &self,
        id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<Arc<Task>>> {
        Ok(match self.store.immediate() {
            Some(store) if history_length.is_none() => store.get_shared(id)?,
            Some(store) => store.get_now(id, history_length)?.map(|s| Arc::new(s.task)),
            None => (self.store.get(id, history_length).await?).map(|s| Arc::new(s.task)),
        })
    }
}
