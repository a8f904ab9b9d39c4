//! The push notification side of the write path: a task's push configs,
//! read once per live state, and the hand-over of each applied event to the
//! push sender.

use std::sync::Arc;

use agentwire_types::{StreamResponse, TaskPushNotificationConfig};

use super::TaskManager;
use super::live::LiveTask;

/// The push-notification configs of a task (shared, read on every event).
pub(super) type PushTargets = Arc<[TaskPushNotificationConfig]>;

impl TaskManager {
    /// The push configs of a task, read from the store once per live state
    /// (the caller holds `order`). `None` when push is off or the task has
    /// no config.
    pub(super) async fn push_targets(&self, live: &LiveTask) -> Option<PushTargets> {
        self.push.as_ref()?;
        let cached = live.state.lock().push_targets.clone();
        let targets = match cached {
            Some(t) => t,
            None => match self.store.list_push_configs(&live.id).await {
                Ok(list) => {
                    let t: PushTargets = list.into();
                    live.state.lock().push_targets = Some(Arc::clone(&t));
                    t
                }
                Err(e) => {
                    tracing::warn!(task = %live.id, error = %e, "push: cannot read the task's configs");
                    return None;
                }
            },
        };
        (!targets.is_empty()).then_some(targets)
    }

    /// Hands an applied event to the push sender (the caller holds
    /// `order`, so notifications are enqueued in event order).
    pub(super) async fn push_event(
        &self,
        live: &LiveTask,
        targets: &PushTargets,
        event: &StreamResponse,
    ) {
        if let Some(push) = &self.push {
            push.enqueue(&live.id, targets, event).await;
        }
    }

    /// The push configs of a task changed in the store: forget the cached
    /// copy (under `order`, so no event in flight keeps a stale one).
    pub(crate) async fn push_configs_changed(&self, task_id: &str) {
        let live = self.live.get(task_id).map(|l| Arc::clone(l.value()));
        if let Some(live) = live {
            let _guard = live.order.lock().await;
            live.state.lock().push_targets = None;
        }
    }

    /// Stores the inline push config of a task just created; returns the
    /// task's push targets.
    pub(super) async fn save_inline_push(
        &self,
        live: &LiveTask,
        mut config: TaskPushNotificationConfig,
    ) -> Option<PushTargets> {
        config.task_id.clone_from(&live.id);
        if let Err(e) = self.store.put_push_config(&config).await {
            tracing::warn!(task = %live.id, error = %e, "push: cannot store the inline config");
            return None;
        }
        if let Some(push) = &self.push {
            if let Err(e) = push.config_saved(&config).await {
                tracing::warn!(task = %live.id, error = %e, "push: cannot register the inline config");
            }
        }
        let targets: PushTargets = Arc::from(vec![config]);
        live.state.lock().push_targets = Some(Arc::clone(&targets));
        Some(targets)
    }
}
