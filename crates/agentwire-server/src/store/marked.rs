//! A store for the tests of the store wrappers (the metrics' timing, the
//! admission count): every method a trait gives a default ([`TaskStore`],
//! [`ImmediateStore`]) answers here something the default never would, so
//! that [`assert_forwards`] finds a wrapper that forgets to forward one
//! (and so hides what the store it wraps does, as the default's answer).
//! A method added to the traits with a default belongs here too.

use std::sync::Arc;
use std::time::Duration;

use agentwire_types::{A2aError, A2aResult, Task, TaskState, TaskStatus};
use async_trait::async_trait;

use super::{
    ExpiredTasks, ImmediateStore, LogSpan, Owner, QueuedDone, QueuedStore, RecoveryScan, SetAside,
    StoredPushConfig, StoredTask, TaskPage, TaskQuery, TaskStore, TaskUpdate, Updated,
};

/// The store whose defaulted methods answer recognisably.
#[derive(Debug, Default)]
pub(crate) struct Marked;

fn task(id: &str) -> Task {
    Task {
        id: id.into(),
        context_id: "c".into(),
        status: Some(TaskStatus::new(TaskState::Working)),
        ..Default::default()
    }
}

fn marked_owner(what: &str) -> Owner {
    Owner {
        tenant: "marked".into(),
        principal: what.into(),
    }
}

impl ImmediateStore for Marked {
    fn create_now(&self, _owner: &Owner, _task: Task) -> A2aResult<()> {
        Err(A2aError::internal("marked create_now"))
    }

    fn create_shared_now(&self, _owner: &Owner, _task: &Arc<Task>) -> A2aResult<()> {
        Err(A2aError::internal("marked create_shared_now"))
    }

    fn update_now(&self, _task_id: &str, _update: TaskUpdate) -> A2aResult<Updated> {
        Err(A2aError::internal("marked update_now"))
    }

    fn get_now(&self, _id: &str, _history: Option<usize>) -> A2aResult<Option<StoredTask>> {
        Ok(None)
    }

    fn get_shared(&self, task_id: &str) -> A2aResult<Option<Arc<Task>>> {
        Ok(Some(Arc::new(task(&format!("marked-shared-{task_id}")))))
    }
}

impl QueuedStore for Marked {
    fn queue_update(&self, task_id: &str, _update: TaskUpdate, done: QueuedDone) -> A2aResult<()> {
        done(Err(A2aError::internal(format!("marked queued {task_id}"))));
        Ok(())
    }
}

#[async_trait]
impl TaskStore for Marked {
    fn immediate(&self) -> Option<&dyn ImmediateStore> {
        Some(self)
    }

    fn queued(&self) -> Option<&dyn QueuedStore> {
        Some(self)
    }

    fn kind(&self) -> &'static str {
        "marked"
    }

    fn check_room(&self, bytes: usize, new_task: bool) -> A2aResult<()> {
        Err(A2aError::internal(format!(
            "marked check_room {bytes} {new_task}"
        )))
    }

    fn expired_tasks(&self) -> ExpiredTasks {
        ExpiredTasks {
            finished_ttl: 11,
            open_ttl: 12,
            evicted: 13,
        }
    }

    async fn create(&self, _owner: &Owner, _task: Task) -> A2aResult<Option<LogSpan>> {
        Err(A2aError::internal("marked create"))
    }

    async fn update(&self, _task_id: &str, _update: TaskUpdate) -> A2aResult<Updated> {
        Err(A2aError::internal("marked update"))
    }

    async fn get(&self, _id: &str, _history: Option<usize>) -> A2aResult<Option<StoredTask>> {
        Ok(None)
    }

    async fn list(&self, _owner: &Owner, _query: &TaskQuery) -> A2aResult<TaskPage> {
        Err(A2aError::internal("marked list"))
    }

    async fn put_push_config(&self, _config: &StoredPushConfig) -> A2aResult<()> {
        Ok(())
    }

    async fn get_push_config(
        &self,
        _task_id: &str,
        _id: &str,
    ) -> A2aResult<Option<StoredPushConfig>> {
        Ok(None)
    }

    async fn list_push_configs(&self, _task_id: &str) -> A2aResult<Vec<StoredPushConfig>> {
        Ok(Vec::new())
    }

    async fn delete_push_config(&self, _task_id: &str, _id: &str) -> A2aResult<bool> {
        Ok(false)
    }

    async fn purge_terminal_older_than(&self, age: Duration) -> A2aResult<u64> {
        Ok(1000 + age.as_secs())
    }

    async fn unfinished(&self) -> A2aResult<Vec<StoredTask>> {
        Ok(vec![StoredTask {
            owner: marked_owner("unfinished"),
            task: task("marked-unfinished"),
        }])
    }

    async fn unfinished_for_recovery(&self) -> A2aResult<RecoveryScan> {
        Ok(RecoveryScan {
            tasks: vec![StoredTask {
                owner: marked_owner("recovery"),
                task: task("marked-recovery"),
            }],
            set_aside: vec![SetAside {
                task_id: "marked-aside".into(),
                owner: marked_owner("aside"),
                reason: "marked".into(),
                kept: "marked".into(),
            }],
        })
    }

    async fn owner_of(&self, task_id: &str) -> A2aResult<Option<Owner>> {
        Ok(Some(marked_owner(&format!("owner-of-{task_id}"))))
    }

    fn unreadable_rows(&self) -> u64 {
        77
    }

    async fn open_task_owners(&self) -> A2aResult<Vec<(String, Owner)>> {
        Ok(vec![("marked-open".into(), marked_owner("open"))])
    }
}

/// Asserts that `wrapper`, wrapped around a [`Marked`] store, answers every
/// defaulted method with the marked store's answer.
pub(crate) async fn assert_forwards(wrapper: &dyn TaskStore) {
    assert_eq!(wrapper.kind(), "marked", "kind");
    let e = wrapper.check_room(42, true).unwrap_err();
    assert_eq!(e.message, "marked check_room 42 true", "check_room");
    assert_eq!(
        wrapper.expired_tasks(),
        Marked.expired_tasks(),
        "expired_tasks"
    );
    assert_eq!(
        wrapper
            .purge_terminal_older_than(Duration::from_secs(5))
            .await
            .unwrap(),
        1005,
        "purge_terminal_older_than"
    );
    let unfinished = wrapper.unfinished().await.unwrap();
    assert_eq!(unfinished.len(), 1, "unfinished");
    assert_eq!(unfinished[0].task.id, "marked-unfinished", "unfinished");
    let scan = wrapper.unfinished_for_recovery().await.unwrap();
    assert_eq!(scan.tasks[0].task.id, "marked-recovery", "recovery");
    assert_eq!(scan.set_aside[0].task_id, "marked-aside", "recovery");
    assert_eq!(
        wrapper.owner_of("t1").await.unwrap(),
        Some(marked_owner("owner-of-t1")),
        "owner_of"
    );
    assert_eq!(wrapper.unreadable_rows(), 77, "unreadable_rows");
    assert_eq!(
        wrapper.open_task_owners().await.unwrap(),
        vec![("marked-open".to_owned(), marked_owner("open"))],
        "open_task_owners"
    );
    // The capabilities.
    let now = wrapper.immediate().expect("immediate");
    let e = now
        .create_shared_now(&Owner::default(), &Arc::new(task("t1")))
        .unwrap_err();
    assert_eq!(e.message, "marked create_shared_now", "create_shared_now");
    let shared = now.get_shared("t1").unwrap().expect("a task");
    assert_eq!(shared.id, "marked-shared-t1", "get_shared");
    let queued = wrapper.queued().expect("queued");
    let (tx, rx) = std::sync::mpsc::channel();
    queued
        .queue_update(
            "t1",
            TaskUpdate::UserMessage(agentwire_types::Message::user_text("x")),
            Box::new(move |r| {
                let _ = tx.send(r.map(|_| ()).map_err(|e| e.message));
            }),
        )
        .unwrap();
    assert_eq!(
        rx.recv().unwrap(),
        Err("marked queued t1".to_owned()),
        "queue_update"
    );
}
