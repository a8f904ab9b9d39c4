//! The task operations: `GetTask`, `ListTasks`, `CancelTask`, the owner
//! scoping every one of them applies (a task of another caller is not
//! found), and the crash recovery run when a server starts.

use std::sync::Arc;

use agentwire_types::{
    A2aError, A2aResult, CancelTaskRequest, GetTaskRequest, ListTasksRequest, ListTasksResponse,
    Task, TaskState,
};
use futures::FutureExt;

use super::*;
use crate::executor::{RequestContext, TaskUpdater};
use crate::store::{Owner, StoredTask, is_unreadable, storage_fault};

impl RequestHandler {
    /// A task visible to `owner`, or TaskNotFound (never revealing tasks of
    /// others).
    pub(super) async fn visible_task(
        &self,
        owner: &Owner,
        id: &str,
        history: Option<usize>,
    ) -> A2aResult<StoredTask> {
        if id.is_empty() {
            return Err(A2aError::invalid_params("id", "a task id is required"));
        }
        if let Some(why) = agentwire_types::limits::id_problem(id) {
            return Err(A2aError::invalid_params("id", why));
        }
        // A task held back (never written: see `manager/held.rs`) is
        // written first, so that what is seen is durable.
        let found = match self
            .inner
            .manager
            .stored_or_revealed(owner, id, history)
            .await
        {
            Ok(found) => found,
            // Kept but unreadable: said to its owner only.
            Err(e) if is_unreadable(&e) => {
                return match self.inner.manager.store.owner_of(id).await {
                    Ok(Some(o)) if owner.sees(&o) => Err(e),
                    _ => Err(A2aError::task_not_found(id)),
                };
            }
            Err(e) => return Err(e),
        };
        match found {
            Some(s) if owner.sees(&s.owner) => match self.inner.manager.storage_failure(id) {
                // The task failed because the store did, and its failure is
                // not recorded yet: what is stored is out of date.
                Some(e) => Err(e),
                None => Ok(s),
            },
            _ => Err(A2aError::task_not_found(id)),
        }
    }

    /// Crash recovery: fails every task the store holds as submitted or
    /// working that no agent of this process is running: after a restart,
    /// their agent is gone. Returns the ids of the tasks failed. Called by
    /// [`crate::A2aServer`] when it starts; several replicas sharing one
    /// store must not call it on start (the tasks may be running on another
    /// replica).
    ///
    /// A task the store cannot read never stops it: the store sets its row
    /// aside ([`TaskStore::unfinished_for_recovery`]), and each is logged
    /// at `warn` with its id, why, where it is kept and what to do; the
    /// others are failed as usual.
    ///
    /// The tasks left open (waiting for their callers' input) then count
    /// toward their principals' bound on open tasks
    /// ([`crate::HandlerConfig::max_open_tasks_per_caller`]).
    ///
    /// [`TaskStore::unfinished_for_recovery`]: crate::store::TaskStore::unfinished_for_recovery
    pub async fn recover_orphaned_tasks(&self) -> A2aResult<Vec<String>> {
        let reason = "The agent stopped while working on this task (the server restarted). \
                      Send the request again to retry.";
        let scan = self.inner.manager.store.unfinished_for_recovery().await?;
        for aside in &scan.set_aside {
            tracing::warn!(
                task = %aside.task_id,
                kept = %aside.kept,
                error = %aside.reason,
                "crash recovery: a task left unfinished cannot be read; it is set aside and the \
                 server starts without it (its owner is told it is unreadable; inspect or \
                 delete its row: docs/operations.md, \"Task store files and unreadable tasks\")"
            );
        }
        if !scan.set_aside.is_empty() {
            tracing::warn!(
                count = scan.set_aside.len(),
                "crash recovery: unreadable tasks set aside"
            );
        }
        let mut failed = Vec::new();
        for stored in scan.tasks {
            if self.inner.manager.fail_orphan(&stored, reason).await {
                failed.push(stored.task.id);
            }
        }
        if !failed.is_empty() {
            tracing::warn!(
                count = failed.len(),
                "failed tasks left unfinished by a previous run"
            );
        }
        // The tasks still open (waiting for their callers) count toward
        // their callers' bound, as if this process had created them.
        self.inner
            .open_tasks
            .count_stored(&*self.inner.manager.store)
            .await;
        Ok(failed)
    }

    /// Shutdown, once the grace period is over: fails every task an agent
    /// of this process is still working on, with `reason` as the status
    /// message, and writes it to the store before returning; the tasks'
    /// open streams end with that final status update. Returns the ids of
    /// the tasks failed. Called by [`crate::BoundServer::run_until`].
    pub async fn fail_running_tasks(&self, reason: &str) -> Vec<String> {
        self.inner.manager.fail_running_here(reason).await
    }

    /// Shutdown, after [`Self::fail_running_tasks`]: ends the streams
    /// still open with a last event (a task waiting for input: its current
    /// status; see `docs/observability.md`). Returns how many tasks'
    /// streams were ended. Called by [`crate::BoundServer::run_until`].
    pub async fn end_streams(&self) -> usize {
        self.inner.manager.end_streams_at_shutdown().await
    }

    /// What the live tasks of this process are doing now, and the push
    /// counters (for the metrics).
    pub(crate) fn live_stats(&self) -> crate::observe::metrics::LiveStats {
        let mut stats = self.inner.manager.live_stats();
        stats.push = self.push_sender().map(|p| p.metrics().snapshot());
        stats.unreadable_rows = self.inner.manager.store.unreadable_rows();
        stats.admission = self.inner.open_tasks.stats(&**self.store());
        stats
    }

    /// Completes when no agent of this process is working on a task any
    /// more (checked every 50 ms).
    pub async fn tasks_settled(&self) {
        while self.inner.manager.running_here() {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// `GetTask`.
    pub async fn get_task(&self, ctx: &CallContext, req: GetTaskRequest) -> A2aResult<Task> {
        // Counted until the answer (see `HandlerConfig::max_in_flight`).
        let _flight = self.begin()?;
        let owner = self.admit(ctx, &req.tenant).await?;
        let history = history_length(req.history_length, "historyLength")?;
        let stored = self.visible_task(&owner, &req.id, history).await?;
        let task = match req.current_generation {
            None => stored.task,
            Some(after) => self.long_poll(&owner, stored, after, history).await?,
        };
        Ok(generation::task_for(ctx, task))
    }

    /// `ListTasks`.
    pub async fn list_tasks(
        &self,
        ctx: &CallContext,
        req: ListTasksRequest,
    ) -> A2aResult<ListTasksResponse> {
        let _flight = self.begin()?;
        let owner = self.admit(ctx, &req.tenant).await?;
        let query = task_query(req)?;
        let mut page = self.list_owned(&owner, &query).await?;
        if let Some(next) = list_budget(&mut page.tasks, self.inner.config.max_list_bytes) {
            page.next = Some(next);
        }
        let tasks = if generation::reads_generation(ctx) {
            page.tasks
        } else {
            page.tasks
                .into_iter()
                .map(|t| generation::task_for(ctx, t))
                .collect()
        };
        Ok(ListTasksResponse {
            page_size: query.page_size as i32,
            tasks,
            next_page_token: page.next.map(|c| c.encode()).unwrap_or_default(),
            total_size: page.total as i32,
        })
    }

    /// `CancelTask`: stops the agent (cooperatively, through its token and
    /// `cancel` hook) and returns the canceled task.
    pub async fn cancel_task(&self, ctx: &CallContext, req: CancelTaskRequest) -> A2aResult<Task> {
        let _flight = self.begin()?;
        let owner = self.admit(ctx, &req.tenant).await?;
        let stored = self.visible_task(&owner, &req.id, None).await?;
        if stored.task.state().is_terminal() {
            return Err(A2aError::task_not_cancelable(&req.id, stored.task.state()));
        }
        let manager = &self.inner.manager;
        let live = manager.attach_for_cancel(&stored);
        live.cancel.cancel();
        let updater = TaskUpdater {
            manager: Arc::clone(manager),
            live: Arc::clone(&live),
        };
        let rctx = RequestContext {
            message: stored.task.history.last().cloned().unwrap_or_default(),
            task_id: stored.task.id.clone(),
            context_id: stored.task.context_id.clone(),
            task: Some(Box::new(stored.task)),
            reference_tasks: Vec::new(),
            extensions: self.extensions(ctx).unwrap_or_default(),
            caller: (!owner.principal.is_empty()).then(|| owner.principal.clone()),
            metadata: req.metadata,
            configuration: None,
            streaming: false,
            cancel: live.cancel.clone(),
        };
        let hook =
            std::panic::AssertUnwindSafe(self.inner.executor.cancel_boxed(rctx, updater.clone()))
                .catch_unwind();
        match tokio::time::timeout(self.inner.config.cancel_grace, hook).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => {
                tracing::debug!(task = %req.id, error = %e, "agent cancel hook failed")
            }
            Ok(Err(_)) => tracing::warn!(task = %req.id, "agent cancel hook panicked"),
            Err(_) => tracing::warn!(task = %req.id, "agent cancel hook timed out"),
        }
        // Whatever the agent did, the task ends canceled unless it already
        // reached another terminal state.
        let canceled = updater.cancel().await;
        // Another replica may be running the agent: it stops it.
        manager.cancel_elsewhere(&live).await;
        manager.end_cancel(&live);
        // The store failed: its error, not the task's state as stored.
        if let Err(e) = canceled
            && storage_fault(&e).is_some()
        {
            return Err(e);
        }
        let task = self.visible_task(&owner, &req.id, None).await?.task;
        match task.state() {
            TaskState::Canceled => Ok(generation::task_for(ctx, task)),
            s => Err(A2aError::task_not_cancelable(&req.id, s)),
        }
    }
}

impl RequestHandler {
    /// A page of the tasks `owner` sees: its own and, for a namespaced
    /// principal, those stored under its bare name before principals had
    /// namespaces (see [`Owner::sees`]), in one order.
    async fn list_owned(
        &self,
        owner: &Owner,
        query: &crate::store::TaskQuery,
    ) -> A2aResult<crate::store::TaskPage> {
        let store = &self.inner.manager.store;
        let own = store.list(owner, query).await?;
        let Some(legacy) = owner.legacy() else {
            return Ok(own);
        };
        let old = store.list(&legacy, query).await?;
        if old.total == 0 {
            return Ok(own);
        }
        Ok(merge_pages(own, old, query.page_size))
    }
}

/// Two pages of one listing's order, from the same cursor, as one page.
fn merge_pages(
    a: crate::store::TaskPage,
    b: crate::store::TaskPage,
    page_size: usize,
) -> crate::store::TaskPage {
    use crate::store::Cursor;
    let more = a.next.is_some() || b.next.is_some();
    let mut tasks: Vec<(Cursor, Task)> = a
        .tasks
        .into_iter()
        .chain(b.tasks)
        .map(|t| (Cursor::of(&t), t))
        .collect();
    tasks.sort_by(|x, y| y.0.cmp(&x.0));
    let cut = tasks.len() > page_size;
    tasks.truncate(page_size);
    let next = if cut || more {
        tasks.last().map(|(c, _)| c.clone())
    } else {
        None
    };
    crate::store::TaskPage {
        tasks: tasks.into_iter().map(|(_, t)| t).collect(),
        next,
        total: a.total + b.total,
    }
}

/// Keeps the tasks of a page that fit in `budget` bytes (by their protobuf
/// size; the first task always, so that paging moves on): when some are
/// dropped, the cursor after the last one kept, for the next page.
fn list_budget(tasks: &mut Vec<Task>, budget: usize) -> Option<crate::store::Cursor> {
    use prost::Message as _;
    let mut used = 0usize;
    let keep = tasks
        .iter()
        .position(|t| {
            used = used.saturating_add(t.encoded_len());
            used > budget
        })?
        .max(1);
    if keep >= tasks.len() {
        return None;
    }
    tasks.truncate(keep);
    let last = tasks.last()?;
    Some(crate::store::Cursor {
        millis: last.status_timestamp().map_or(0, |t| t.as_millis()),
        id: last.id.clone(),
    })
}
