//! The push notification config operations (create, get, list, delete),
//! the checks of a config (webhook URL policy, authentication header
//! text), and the page tokens of a config listing.

use agentwire_types::{
    A2aError, A2aResult, DeleteTaskPushNotificationConfigRequest, ErrorKind,
    GetTaskPushNotificationConfigRequest, ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse, TaskPushNotificationConfig,
};

use crate::store::{PushFormat, StoredPushConfig};

use super::*;
use crate::push::PushSender;

impl RequestHandler {
    /// The push sender, or `PushNotificationNotSupportedError` when the card
    /// does not declare push notifications (spec 3.3.4).
    pub(super) fn push(&self) -> A2aResult<&PushSender> {
        let declared = self
            .inner
            .card
            .capabilities
            .as_ref()
            .and_then(|c| c.push_notifications)
            .unwrap_or(false);
        match self.push_sender() {
            Some(p) if declared => Ok(p),
            _ => Err(A2aError::push_not_supported()),
        }
    }

    /// Validates a config to be stored for `task_id`: URL policy, id.
    pub(super) async fn prepare_push_config(
        &self,
        push: &PushSender,
        mut config: TaskPushNotificationConfig,
        task_id: &str,
        field: &str,
        format: PushFormat,
    ) -> A2aResult<StoredPushConfig> {
        push.check_url(&config.url, &format!("{field}url")).await?;
        if let Some(auth) = &config.authentication {
            if auth.scheme.trim().is_empty() {
                return Err(A2aError::invalid_params(
                    format!("{field}authentication.scheme"),
                    "an authentication scheme is required (e.g. Bearer)",
                ));
            }
            let value = format!("{} {}", auth.scheme, auth.credentials);
            if http::HeaderValue::from_str(&value).is_err() {
                return Err(A2aError::invalid_params(
                    format!("{field}authentication"),
                    "scheme and credentials must be valid HTTP header text",
                ));
            }
        }
        if !config.token.is_empty() && http::HeaderValue::from_str(&config.token).is_err() {
            return Err(A2aError::invalid_params(
                format!("{field}token"),
                "the token must be valid HTTP header text",
            ));
        }
        if config.id.is_empty() {
            config.id = agentwire_types::new_id();
        } else if let Some(why) = agentwire_types::limits::id_problem(&config.id) {
            return Err(A2aError::invalid_params(format!("{field}id"), why));
        }
        task_id.clone_into(&mut config.task_id);
        Ok(StoredPushConfig { config, format })
    }

    pub(super) async fn save_push_config(
        &self,
        push: &PushSender,
        stored: &StoredPushConfig,
    ) -> A2aResult<()> {
        let manager = &self.inner.manager;
        let config = &stored.config;
        // Each config of a task is sent every update of it: their number
        // is bounded, so that one task cannot make the server a source of
        // thousands of requests an update. Checked and stored under the
        // task's write lock, so that creations at once cannot each pass the
        // check (in this process: replicas sharing a store each check on
        // their own).
        let writes = &self.inner.push_config_writes;
        let lock = {
            let hash = ahash::RandomState::with_seeds(1, 2, 3, 4).hash_one(&config.task_id);
            &writes[(hash as usize) % writes.len()]
        };
        let _writing = lock.lock().await;
        let max = self.inner.config.max_push_configs_per_task;
        let existing = manager.store.list_push_configs(&config.task_id).await?;
        if existing.len() >= max && !existing.iter().any(|c| c.config.id == config.id) {
            return Err(A2aError::invalid_params(
                "pushNotificationConfig",
                format!(
                    "task {} has {} push notification configs, as many as a task may have \
                     (the server's max push configs per task): delete one, or replace one \
                     by its id",
                    config.task_id,
                    existing.len()
                ),
            )
            .with_metadata("limit", "maxPushConfigsPerTask")
            .with_metadata("max", max.to_string()));
        }
        manager.store.put_push_config(stored).await?;
        manager.push_configs_changed(&config.task_id).await;
        manager
            .push_configs_changed_elsewhere(&config.task_id)
            .await;
        push.config_saved(config).await
    }

    /// `CreateTaskPushNotificationConfig`: stores a webhook for a task (a
    /// new id when none is given; an existing id is replaced).
    pub async fn create_task_push_notification_config(
        &self,
        ctx: &CallContext,
        req: TaskPushNotificationConfig,
    ) -> A2aResult<TaskPushNotificationConfig> {
        let _flight = self.begin()?;
        let owner = self.admit(ctx, &req.tenant).await?;
        let push = self.push()?;
        if req.task_id.is_empty() {
            return Err(A2aError::invalid_params("taskId", "a task id is required"));
        }
        let task = self.visible_task(&owner, &req.task_id, Some(0)).await?;
        let stored = self
            .prepare_push_config(push, req, &task.task.id, "", ctx.push_format)
            .await?;
        self.save_push_config(push, &stored).await?;
        Ok(stored.config)
    }

    /// `GetTaskPushNotificationConfig`.
    pub async fn get_task_push_notification_config(
        &self,
        ctx: &CallContext,
        req: GetTaskPushNotificationConfigRequest,
    ) -> A2aResult<TaskPushNotificationConfig> {
        let _flight = self.begin()?;
        let owner = self.admit(ctx, &req.tenant).await?;
        self.push()?;
        if req.id.is_empty() {
            return Err(A2aError::invalid_params("id", "a config id is required"));
        }
        if let Some(why) = agentwire_types::limits::id_problem(&req.id) {
            return Err(A2aError::invalid_params("id", why));
        }
        self.visible_task(&owner, &req.task_id, Some(0)).await?;
        match self
            .inner
            .manager
            .store
            .get_push_config(&req.task_id, &req.id)
            .await?
        {
            Some(c) => Ok(c.config),
            None => Err(A2aError::new(
                ErrorKind::TaskNotFound,
                format!(
                    "task {} has no push notification config {:?}",
                    req.task_id, req.id
                ),
            )
            .with_metadata("taskId", req.task_id.clone())
            .with_metadata("configId", req.id.clone())),
        }
    }

    /// `ListTaskPushNotificationConfigs`: in creation order, paginated when
    /// `pageSize` is given (1..=100).
    pub async fn list_task_push_notification_configs(
        &self,
        ctx: &CallContext,
        req: ListTaskPushNotificationConfigsRequest,
    ) -> A2aResult<ListTaskPushNotificationConfigsResponse> {
        let _flight = self.begin()?;
        let owner = self.admit(ctx, &req.tenant).await?;
        self.push()?;
        let page_size = match req.page_size {
            0 => usize::MAX,
            n @ 1..=100 => n as usize,
            n => {
                return Err(A2aError::invalid_params(
                    "pageSize",
                    format!("must be between 1 and 100, got {n}"),
                ));
            }
        };
        self.visible_task(&owner, &req.task_id, Some(0)).await?;
        let all = self
            .inner
            .manager
            .store
            .list_push_configs(&req.task_id)
            .await?;
        let start = if req.page_token.is_empty() {
            0
        } else {
            let after = config_page_token_decode(&req.page_token).ok_or_else(|| {
                A2aError::invalid_params(
                    "pageToken",
                    "not a page token returned by ListTaskPushNotificationConfigs",
                )
            })?;
            all.iter()
                .position(|c| c.config.id == after)
                .map_or(all.len(), |i| i + 1)
        };
        let total = all.len();
        let configs: Vec<_> = all
            .into_iter()
            .skip(start)
            .take(page_size)
            .map(|c| c.config)
            .collect();
        let next_page_token = match configs.last() {
            Some(last) if start + configs.len() < total => config_page_token(&last.id),
            _ => String::new(),
        };
        Ok(ListTaskPushNotificationConfigsResponse {
            configs,
            next_page_token,
        })
    }

    /// `DeleteTaskPushNotificationConfig`: idempotent; nothing more is sent
    /// to the config once it returns.
    pub async fn delete_task_push_notification_config(
        &self,
        ctx: &CallContext,
        req: DeleteTaskPushNotificationConfigRequest,
    ) -> A2aResult<()> {
        let _flight = self.begin()?;
        let owner = self.admit(ctx, &req.tenant).await?;
        let push = self.push()?;
        if req.id.is_empty() {
            return Err(A2aError::invalid_params("id", "a config id is required"));
        }
        if let Some(why) = agentwire_types::limits::id_problem(&req.id) {
            return Err(A2aError::invalid_params("id", why));
        }
        self.visible_task(&owner, &req.task_id, Some(0)).await?;
        let manager = &self.inner.manager;
        manager
            .store
            .delete_push_config(&req.task_id, &req.id)
            .await?;
        manager.push_configs_changed(&req.task_id).await;
        manager.push_configs_changed_elsewhere(&req.task_id).await;
        push.config_deleted(&req.task_id, &req.id).await
    }
}

/// The page token of a config listing: the id of the last config shown.
pub(super) fn config_page_token(last_id: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("cfg:{last_id}"))
}

pub(super) fn config_page_token_decode(token: &str) -> Option<String> {
    use base64::Engine;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()?;
    String::from_utf8(raw)
        .ok()?
        .strip_prefix("cfg:")
        .filter(|id| agentwire_types::limits::id_problem(id).is_none())
        .map(str::to_owned)
}
