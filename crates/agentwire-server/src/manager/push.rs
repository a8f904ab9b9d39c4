//! The push notification side of the write path: a task's push configs,
//! read once per live state, and the hand-over of each applied event to the
//! push sender.

use std::sync::Arc;

use agentwire_types::{StreamResponse, Task, TaskPushNotificationConfig, stream_response};

use super::TaskManager;
use super::live::LiveTask;
use crate::store::{PushFormat, StoredPushConfig};

/// The push-notification configs of a task, by the form of their
/// notifications.
#[derive(Debug, Default)]
pub(crate) struct Targets {
    /// Configs of 1.0 clients: each event as a `StreamResponse`.
    v1: Vec<TaskPushNotificationConfig>,
    /// Configs of 0.3 clients: the task after each event.
    v03: Vec<TaskPushNotificationConfig>,
}

impl Targets {
    fn is_empty(&self) -> bool {
        self.v1.is_empty() && self.v03.is_empty()
    }
}

impl From<Vec<StoredPushConfig>> for Targets {
    fn from(list: Vec<StoredPushConfig>) -> Self {
        let mut t = Self::default();
        for s in list {
            match s.format {
                PushFormat::V1 => t.v1.push(s.config),
                PushFormat::V03 => t.v03.push(s.config),
            }
        }
        t
    }
}

/// The push-notification configs of a task (shared, read on every event).
pub(super) type PushTargets = Arc<Targets>;

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
                    let t: PushTargets = Arc::new(Targets::from(list));
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
        let Some(push) = &self.push else {
            return;
        };
        if !targets.v1.is_empty() {
            // A receiver's version is not known: notifications carry no
            // generation (see `docs/generation.md`).
            let mut plain = event.clone();
            crate::handler::generation::strip_event(&mut plain);
            push.enqueue(&live.id, &targets.v1, &plain).await;
        }
        if !targets.v03.is_empty() {
            let is_final = event.state().is_some_and(|s| s.is_terminal());
            match self.task_for_push(live, event).await {
                Some(task) => {
                    push.enqueue_v03(&live.id, &targets.v03, task, is_final)
                        .await;
                }
                None => tracing::warn!(
                    task = %live.id,
                    "push: cannot read the task for its 0.3 notifications"
                ),
            }
        }
    }

    /// The task as an applied event left it: what a 0.3 push notification
    /// carries (the caller holds `order`, so the store has that state).
    async fn task_for_push(&self, live: &LiveTask, event: &StreamResponse) -> Option<Task> {
        if let Some(stream_response::Payload::Task(t)) = &event.payload {
            return Some(t.clone());
        }
        let read = match self.store.immediate() {
            Some(store) => store
                .get_shared(&live.id)
                .map(|t| t.map(Arc::unwrap_or_clone)),
            None => self
                .store
                .get(&live.id, None)
                .await
                .map(|s| s.map(|s| s.task)),
        };
        read.ok().flatten()
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
        mut stored: StoredPushConfig,
    ) -> Option<PushTargets> {
        stored.config.task_id.clone_from(&live.id);
        if let Err(e) = self.store.put_push_config(&stored).await {
            tracing::warn!(task = %live.id, error = %e, "push: cannot store the inline config");
            return None;
        }
        if let Some(push) = &self.push {
            if let Err(e) = push.config_saved(&stored.config).await {
                tracing::warn!(task = %live.id, error = %e, "push: cannot register the inline config");
            }
        }
        let targets: PushTargets = Arc::new(Targets::from(vec![stored]));
        live.state.lock().push_targets = Some(Arc::clone(&targets));
        Some(targets)
    }
}
