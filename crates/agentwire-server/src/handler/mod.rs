//! The binding-agnostic request handler: the 11 operations of spec 3.1 with
//! every protocol rule (version, capabilities, validation, multi-turn
//! rules, history length, listing, owner scoping). Bindings only decode
//! requests into calls of this handler and encode what it returns.

mod idempotency;

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use agentwire_types::{
    A2aError, A2aResult, AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    ErrorKind, GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, Message, Role, SendMessageRequest, SendMessageResponse,
    StreamResponse, SubscribeToTaskRequest, Task, TaskPushNotificationConfig, TaskState,
    stream_response,
};
use bytes::Bytes;
use futures::{FutureExt, Stream};
use http::{HeaderMap, HeaderName};

use crate::auth::{Authenticator, NoAuth};
use crate::bus::EventBus;
use crate::executor::{DynExecutor, RequestContext, TaskUpdater};
use crate::manager::{LiveTask, Subscription, TaskManager};
use crate::push::{PushConfig, PushSender};
use crate::store::{Cursor, MemoryStore, Owner, StoredTask, TaskQuery, TaskStore};
use idempotency::Idempotency;

/// A stream of protocol events for one streaming call.
pub type EventStream = Pin<Box<dyn Stream<Item = A2aResult<StreamResponse>> + Send>>;

/// What a binding knows about a call besides its request message: the
/// service parameters (HTTP headers or gRPC metadata, names lower-case).
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    /// Service parameters: `A2A-Version`, `A2A-Extensions`,
    /// `Authorization`...
    pub headers: HeaderMap,
}

impl CallContext {
    /// A call context from service parameters.
    pub fn new(headers: HeaderMap) -> Self {
        Self { headers }
    }

    /// A context carrying `A2A-Version: 1.0` and nothing else (handy in
    /// tests and in-process calls).
    pub fn v1() -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(
            A2A_VERSION.clone(),
            http::HeaderValue::from_static(agentwire_types::PROTOCOL_VERSION),
        );
        Self { headers }
    }

    fn header(&self, name: &HeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The `A2A-Version` service parameter (header names are lower-case).
/// Looked up by a ready name: a name given as text is parsed on every
/// lookup.
pub(crate) static A2A_VERSION: HeaderName = HeaderName::from_static("a2a-version");
/// The `A2A-Extensions` service parameter.
pub(crate) static A2A_EXTENSIONS: HeaderName = HeaderName::from_static("a2a-extensions");

/// Tunables of the request handler.
#[derive(Debug, Clone)]
pub struct HandlerConfig {
    /// Protocol versions served (`Major.Minor`).
    pub versions: Vec<String>,
    /// Events queued per subscriber before it is resynchronised from a
    /// snapshot.
    pub queue_capacity: usize,
    /// How long a cancellation waits for the agent's `cancel` hook.
    pub cancel_grace: Duration,
    /// Treat a repeated `messageId` (same caller) that started a task as a
    /// duplicate and answer with that task (`Some(n)`: remember the last
    /// `n` message ids). Off by default: conformance runs and many clients
    /// reuse message ids.
    pub idempotency: Option<usize>,
}

impl Default for HandlerConfig {
    fn default() -> Self {
        Self {
            versions: vec![agentwire_types::PROTOCOL_VERSION.to_owned()],
            queue_capacity: 1024,
            cancel_grace: Duration::from_secs(5),
            idempotency: None,
        }
    }
}

struct Inner {
    card: AgentCard,
    card_json: Bytes,
    extended_card: Option<AgentCard>,
    executor: Arc<dyn DynExecutor>,
    manager: Arc<TaskManager>,
    auth: Arc<dyn Authenticator>,
    idempotency: Option<Idempotency>,
    config: HandlerConfig,
}

/// Serves the A2A operations for one agent. Cheap to clone.
#[derive(Clone)]
pub struct RequestHandler {
    inner: Arc<Inner>,
}

/// Builds a [`RequestHandler`].
pub struct HandlerBuilder {
    card: AgentCard,
    executor: Arc<dyn DynExecutor>,
    store: Option<Arc<dyn TaskStore>>,
    extended_card: Option<AgentCard>,
    auth: Arc<dyn Authenticator>,
    config: HandlerConfig,
    push: Option<PushConfig>,
    /// Several replicas: the event bus.
    bus: Option<Arc<dyn EventBus>>,
}

impl HandlerBuilder {
    /// Sends push notifications with this configuration (and declares
    /// `capabilities.pushNotifications`, which is otherwise false).
    pub fn push(mut self, push: PushConfig) -> Self {
        self.push = Some(push);
        self
    }

    /// Follows the tasks of the other replicas sharing the store through
    /// this bus (see [`crate::bus`]): subscriptions here receive the events
    /// applied there, and cancellations reach the replica running the
    /// agent. Without one (the default), the handler is on its own. Each
    /// handler needs a bus (a replica id) of its own.
    pub fn bus(mut self, bus: Arc<dyn EventBus>) -> Self {
        self.bus = Some(bus);
        self
    }

    pub(crate) fn card_mut(&mut self) -> &mut AgentCard {
        &mut self.card
    }

    /// Uses this task store (default: a [`MemoryStore`]).
    pub fn store(mut self, store: Arc<dyn TaskStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Serves an extended card to authenticated callers (and declares
    /// `capabilities.extendedAgentCard`).
    pub fn extended_card(mut self, card: AgentCard) -> Self {
        self.extended_card = Some(card);
        self
    }

    /// Authenticates callers (default: everyone is anonymous).
    pub fn authenticator(mut self, auth: Arc<dyn Authenticator>) -> Self {
        self.auth = auth;
        self
    }

    /// Sets the tunables.
    pub fn config(mut self, config: HandlerConfig) -> Self {
        self.config = config;
        self
    }

    /// The handler. The card's capabilities are made to match what this
    /// handler really does (push notifications on exactly when a push
    /// sender is configured; the extended card flag set when one is
    /// configured).
    pub fn build(self) -> RequestHandler {
        let mut card = self.card;
        let push = match self.push {
            Some(config) => match PushSender::new(config) {
                Ok(sender) => Some(sender),
                Err(e) => {
                    tracing::error!(error = %e, "push notifications disabled");
                    None
                }
            },
            None => None,
        };
        let caps = card.capabilities.get_or_insert_with(Default::default);
        if caps.push_notifications == Some(true) && push.is_none() {
            tracing::warn!(
                "the card declares push notifications but no push sender is configured \
                 (A2aServer::push); declaring false"
            );
        }
        caps.push_notifications = Some(push.is_some());
        caps.extended_agent_card = Some(self.extended_card.is_some());
        let card_json = Bytes::from(serde_json::to_vec(&card).unwrap_or_default());
        let store = self
            .store
            .unwrap_or_else(|| Arc::new(MemoryStore::default()));
        RequestHandler {
            inner: Arc::new(Inner {
                card,
                card_json,
                extended_card: self.extended_card,
                executor: self.executor,
                manager: TaskManager::new(store, self.config.queue_capacity, push)
                    .with_bus(self.bus),
                auth: self.auth,
                idempotency: self.config.idempotency.map(Idempotency::new),
                config: self.config,
            }),
        }
    }
}

/// Reduces a version to `Major.Minor` (`""` means 0.3, spec 3.6.2);
/// borrowed unless the minor is missing.
fn major_minor(v: &str) -> std::borrow::Cow<'_, str> {
    let v = v.trim();
    if v.is_empty() {
        return agentwire_types::DEFAULT_REQUEST_VERSION.into();
    }
    match v.split_once('.') {
        None => format!("{v}.0").into(),
        Some((major, rest)) => {
            let minor = rest.split('.').next().unwrap_or_default();
            v[..major.len() + 1 + minor.len()].into()
        }
    }
}

fn history_length(v: Option<i32>, field: &str) -> A2aResult<Option<usize>> {
    match v {
        None => Ok(None),
        Some(n) if n < 0 => Err(A2aError::invalid_params(
            field,
            format!("must be zero or more, got {n}"),
        )),
        Some(n) => Ok(Some(n as usize)),
    }
}

/// Whether a media type is accepted by a list of modes (with `*/*` and
/// `type/*` wildcards; parameters such as `; charset=utf-8` ignored).
fn mode_accepted(modes: &[String], media_type: &str) -> bool {
    let base = |m: &str| {
        m.split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase()
    };
    let mt = base(media_type);
    modes.iter().any(|m| {
        let m = base(m);
        m == mt
            || m == "*/*"
            || m.strip_suffix("/*")
                .is_some_and(|t| mt.split('/').next() == Some(t))
    })
}

impl RequestHandler {
    /// Starts building a handler for an agent described by `card`.
    pub fn builder<E: crate::AgentExecutor>(card: AgentCard, executor: E) -> HandlerBuilder {
        HandlerBuilder {
            card,
            executor: Arc::new(executor),
            store: None,
            extended_card: None,
            auth: Arc::new(NoAuth),
            config: HandlerConfig::default(),
            push: None,
            bus: None,
        }
    }

    /// The public agent card.
    pub fn agent_card(&self) -> &AgentCard {
        &self.inner.card
    }

    /// The public agent card, serialized once.
    pub fn agent_card_json(&self) -> Bytes {
        self.inner.card_json.clone()
    }

    /// The task store.
    pub fn store(&self) -> &Arc<dyn TaskStore> {
        &self.inner.manager.store
    }

    fn caps_streaming(&self) -> bool {
        self.inner.card.supports_streaming()
    }

    /// The push sender, when push notifications are on.
    pub fn push_sender(&self) -> Option<&PushSender> {
        self.inner.manager.push.as_ref()
    }

    /// The JWKS document of the push signatures, when push notifications
    /// are on and signed.
    pub fn push_jwks_json(&self) -> Option<Bytes> {
        self.push_sender().and_then(PushSender::jwks_json)
    }

    /// The push sender, or `PushNotificationNotSupportedError` when the card
    /// does not declare push notifications (spec 3.3.4).
    fn push(&self) -> A2aResult<&PushSender> {
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
    async fn prepare_push_config(
        &self,
        push: &PushSender,
        mut config: TaskPushNotificationConfig,
        task_id: &str,
        field: &str,
    ) -> A2aResult<TaskPushNotificationConfig> {
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
        }
        task_id.clone_into(&mut config.task_id);
        Ok(config)
    }

    /// Checks the version and authenticates: the preamble of every call.
    fn admit(&self, ctx: &CallContext, tenant: &str) -> A2aResult<Owner> {
        let requested = ctx.header(&A2A_VERSION).unwrap_or_default();
        let mm = major_minor(requested);
        if !self.inner.config.versions.iter().any(|v| *v == mm) {
            let supported: Vec<&str> = self
                .inner
                .config
                .versions
                .iter()
                .map(String::as_str)
                .collect();
            return Err(A2aError::version_not_supported(requested, &supported));
        }
        let principal = self
            .inner
            .auth
            .authenticate(&ctx.headers)?
            .unwrap_or_default();
        Ok(Owner {
            tenant: tenant.to_owned(),
            principal,
        })
    }

    /// Extensions requested by the client, checked against the card: a
    /// required extension the client did not request is an error.
    fn extensions(&self, ctx: &CallContext) -> A2aResult<Vec<String>> {
        let requested: Vec<String> = ctx
            .headers
            .get_all(&A2A_EXTENSIONS)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        let declared = self
            .inner
            .card
            .capabilities
            .as_ref()
            .map(|c| c.extensions.as_slice())
            .unwrap_or_default();
        if let Some(missing) = declared
            .iter()
            .find(|e| e.required && !requested.contains(&e.uri))
        {
            return Err(A2aError::new(
                ErrorKind::ExtensionSupportRequired,
                format!(
                    "this agent requires the extension {}; list it in A2A-Extensions",
                    missing.uri
                ),
            )
            .with_metadata("extension", missing.uri.clone()));
        }
        Ok(requested
            .into_iter()
            .filter(|r| declared.iter().any(|d| d.uri == *r))
            .collect())
    }

    /// A task visible to `owner`, or TaskNotFound (never revealing tasks of
    /// others).
    async fn visible_task(
        &self,
        owner: &Owner,
        id: &str,
        history: Option<usize>,
    ) -> A2aResult<StoredTask> {
        if id.is_empty() {
            return Err(A2aError::invalid_params("id", "a task id is required"));
        }
        match self.inner.manager.get_task(id, history).await? {
            Some(s) if s.owner == *owner => Ok(s),
            _ => Err(A2aError::task_not_found(id)),
        }
    }

    fn validate_message(&self, message: Option<&Message>) -> A2aResult<()> {
        let Some(m) = message else {
            return Err(A2aError::invalid_params("message", "a message is required"));
        };
        if m.message_id.is_empty() {
            return Err(A2aError::invalid_params(
                "message.messageId",
                "a message id is required",
            ));
        }
        match m.role() {
            Role::User => {}
            Role::Unspecified => {
                return Err(A2aError::invalid_params(
                    "message.role",
                    "the role is required (ROLE_USER)",
                ));
            }
            Role::Agent => {
                return Err(A2aError::invalid_params(
                    "message.role",
                    "messages sent to an agent have ROLE_USER",
                ));
            }
        }
        if m.parts.is_empty() {
            return Err(A2aError::invalid_params(
                "message.parts",
                "at least one part is required",
            ));
        }
        let modes = &self.inner.card.default_input_modes;
        for (i, p) in m.parts.iter().enumerate() {
            if p.content.is_none() {
                return Err(A2aError::invalid_params(
                    format!("message.parts[{i}]"),
                    "a part needs exactly one of text, raw, url or data",
                ));
            }
            if !p.media_type.is_empty() && !modes.is_empty() && !mode_accepted(modes, &p.media_type)
            {
                return Err(A2aError::content_type_not_supported(format!(
                    "media type {} is not accepted by this agent (accepted: {})",
                    p.media_type,
                    modes.join(", ")
                ))
                .with_metadata("mediaType", p.media_type.clone()));
            }
        }
        Ok(())
    }

    /// Validates a send request, resolves the task it continues (if any),
    /// registers the live state and starts the agent. Returns the
    /// subscription that carries the agent's answer.
    ///
    /// A message starting a new task with nothing to look up (no inline
    /// push config, no referenced tasks) starts without awaiting anything:
    /// the caller's future then holds no state of the other cases, which
    /// are in a boxed future of their own.
    fn start<'a>(
        &'a self,
        ctx: &'a CallContext,
        req: SendMessageRequest,
        streaming: bool,
        finals_only: bool,
    ) -> Started<'a> {
        let (owner, extensions) = match self.check_send(ctx, &req, streaming) {
            Ok(checked) => checked,
            Err(e) => return Started::Now(Err(e)),
        };
        let plain = req
            .configuration
            .as_ref()
            .is_none_or(|c| c.task_push_notification_config.is_none())
            && req
                .message
                .as_ref()
                .is_some_and(|m| m.task_id.is_empty() && m.reference_task_ids.is_empty());
        if !plain {
            return Started::Later(Box::pin(self.start_slow(
                owner,
                extensions,
                req,
                streaming,
                finals_only,
            )));
        }
        let SendMessageRequest {
            message,
            metadata,
            configuration,
            ..
        } = req;
        let Some(message) = message else {
            return Started::Now(Err(A2aError::invalid_params(
                "message",
                "a message is required",
            )));
        };
        Started::Now(Ok(self.launch_new(
            owner,
            extensions,
            message,
            Launch {
                metadata,
                configuration,
                inline_push: None,
                reference_tasks: Vec::new(),
                streaming,
                finals_only,
            },
        )))
    }

    /// The checks of a send that need nothing but the request: version,
    /// caller, streaming capability, extensions, message and history
    /// length. Returns the owner and the extensions in use.
    fn check_send(
        &self,
        ctx: &CallContext,
        req: &SendMessageRequest,
        streaming: bool,
    ) -> A2aResult<(Owner, Vec<String>)> {
        let owner = self.admit(ctx, &req.tenant)?;
        if streaming && !self.caps_streaming() {
            return Err(A2aError::unsupported(
                "streaming is not supported by this agent (capabilities.streaming)",
            ));
        }
        let extensions = self.extensions(ctx)?;
        self.validate_message(req.message.as_ref())?;
        if let Some(c) = &req.configuration {
            history_length(c.history_length, "configuration.historyLength")?;
        }
        Ok((owner, extensions))
    }

    /// [`RequestHandler::start`] with an inline push config, referenced
    /// tasks or a task to continue.
    async fn start_slow(
        &self,
        owner: Owner,
        extensions: Vec<String>,
        req: SendMessageRequest,
        streaming: bool,
        finals_only: bool,
    ) -> A2aResult<(Subscription, Run)> {
        let mut inline_push = None;
        if let Some(config) = req
            .configuration
            .as_ref()
            .and_then(|c| c.task_push_notification_config.as_ref())
        {
            let push = self.push()?;
            // The task id is the task's: filled in when it is known.
            let task_id = req
                .message
                .as_ref()
                .map(|m| m.task_id.clone())
                .unwrap_or_default();
            inline_push = Some(
                self.prepare_push_config(
                    push,
                    config.clone(),
                    &task_id,
                    "configuration.taskPushNotificationConfig.",
                )
                .await?,
            );
        }
        let SendMessageRequest {
            message,
            metadata,
            configuration,
            ..
        } = req;
        let Some(mut message) = message else {
            return Err(A2aError::invalid_params("message", "a message is required"));
        };
        let mut reference_tasks = Vec::new();
        for id in &message.reference_task_ids {
            if let Ok(t) = self.visible_task(&owner, id, None).await {
                reference_tasks.push(t.task);
            }
        }
        let launch = Launch {
            metadata,
            configuration,
            inline_push,
            reference_tasks,
            streaming,
            finals_only,
        };
        if message.task_id.is_empty() {
            return Ok(self.launch_new(owner, extensions, message, launch));
        }
        let stored = self.visible_task(&owner, &message.task_id, None).await?;
        let task = &stored.task;
        if !message.context_id.is_empty() && message.context_id != task.context_id {
            return Err(A2aError::invalid_params(
                "message.contextId",
                format!(
                    "context {} does not match the context {} of task {}",
                    message.context_id, task.context_id, task.id
                ),
            ));
        }
        if task.state().is_terminal() {
            return Err(A2aError::unsupported(format!(
                "task {} is {}: a terminal task accepts no more messages; start a new task in the same context (referenceTaskIds) instead",
                task.id,
                task.state().short_name()
            ))
            .with_metadata("taskId", task.id.clone()));
        }
        message.context_id.clone_from(&task.context_id);
        if let (Some(config), Some(push)) = (launch.inline_push.as_ref(), self.push_sender()) {
            // A config sent with a message continuing a task applies to
            // that task from now on.
            self.save_push_config(push, config).await?;
        }
        let (live, sub) = self
            .inner
            .manager
            .continue_task(&stored, message.clone(), finals_only)
            .await?;
        Ok(self.launch(live, sub, message, Some(stored.task), extensions, launch))
    }

    /// Registers a new task's live state (ids assigned) and starts its
    /// agent.
    fn launch_new(
        &self,
        owner: Owner,
        extensions: Vec<String>,
        mut message: Message,
        mut launch: Launch,
    ) -> (Subscription, Run) {
        let context_id = if message.context_id.is_empty() {
            agentwire_types::new_id()
        } else {
            message.context_id.clone()
        };
        let task_id = agentwire_types::new_id();
        if let Some(idem) = &self.inner.idempotency {
            idem.record(&owner, &message.message_id, &task_id);
        }
        message.context_id.clone_from(&context_id);
        message.task_id.clone_from(&task_id);
        let (live, sub) = self.inner.manager.start_new(
            task_id,
            context_id,
            owner,
            message.clone(),
            launch.inline_push.take(),
            launch.finals_only,
        );
        self.launch(live, sub, message, None, extensions, launch)
    }

    /// The agent's run on a live task, with the request's context.
    fn launch(
        &self,
        live: Arc<LiveTask>,
        sub: Subscription,
        message: Message,
        existing: Option<Task>,
        extensions: Vec<String>,
        launch: Launch,
    ) -> (Subscription, Run) {
        let manager = &self.inner.manager;
        let rctx = RequestContext {
            message,
            task: existing.map(Box::new),
            task_id: live.id.clone(),
            context_id: live.context_id.clone(),
            reference_tasks: launch.reference_tasks,
            extensions,
            caller: (!live.owner.principal.is_empty()).then(|| live.owner.principal.clone()),
            metadata: launch.metadata,
            configuration: launch.configuration.map(Box::new),
            streaming: launch.streaming,
            cancel: live.cancel.clone(),
        };
        let updater = TaskUpdater {
            manager: Arc::clone(manager),
            live: Arc::clone(&live),
        };
        let executor = Arc::clone(&self.inner.executor);
        let manager = Arc::clone(manager);
        let run: Run = Box::pin(async move {
            let outcome = std::panic::AssertUnwindSafe(executor.execute_boxed(rctx, updater))
                .catch_unwind()
                .await
                .map_err(|p| panic_text(&*p));
            if let Some(finishing) = manager.finish_run(&live, outcome) {
                finishing.await;
            }
        });
        (sub, run)
    }

    /// With idempotency on: the task an earlier message with the same id
    /// (from the same caller) started, if it still exists.
    async fn replay(&self, ctx: &CallContext, req: &SendMessageRequest) -> A2aResult<Option<Task>> {
        let (Some(idem), Some(m)) = (&self.inner.idempotency, &req.message) else {
            return Ok(None);
        };
        if !m.task_id.is_empty() || m.message_id.is_empty() {
            return Ok(None);
        }
        let owner = self.admit(ctx, &req.tenant)?;
        let Some(task_id) = idem.lookup(&owner, &m.message_id) else {
            return Ok(None);
        };
        let history = req.configuration.as_ref().map_or(Ok(None), |c| {
            history_length(c.history_length, "configuration.historyLength")
        })?;
        Ok(self
            .visible_task(&owner, &task_id, history)
            .await
            .ok()
            .map(|s| s.task))
    }

    /// `SendMessage`: blocks until the task is terminal or interrupted
    /// (unless `returnImmediately`), or returns the agent's message.
    #[allow(clippy::manual_async_fn)]
    pub fn send_message<'a>(
        &'a self,
        ctx: &'a CallContext,
        req: SendMessageRequest,
    ) -> impl Future<Output = A2aResult<SendMessageResponse>> + Send + 'a {
        self.send_answer(ctx, req)
            .map(|answer| answer.map(SendAnswer::into_response))
    }

    /// [`Self::send_message`] as the bindings call it: a task of the
    /// in-memory store comes back shared with the store, not copied.
    // Not an `async fn`: an async function keeps its arguments twice in its
    // future (as passed, and as bound in the body); the block below keeps
    // the request once, which keeps the future (boxed by the bindings) under
    // the allocator's small-size limit. It does nothing until polled.
    #[allow(clippy::manual_async_fn)]
    pub(crate) fn send_answer<'a>(
        &'a self,
        ctx: &'a CallContext,
        req: SendMessageRequest,
    ) -> impl Future<Output = A2aResult<SendAnswer>> + Send + 'a {
        async move {
            let (immediate, history) = match &req.configuration {
                Some(c) => (
                    c.return_immediately,
                    history_length(c.history_length, "configuration.historyLength")?,
                ),
                None => (false, None),
            };
            let started = if self.inner.idempotency.is_some() {
                match Box::pin(self.replay_or_start(ctx, req, !immediate)).await {
                    Ok(Replayed::Task(task)) => return Ok(SendAnswer::Response((*task).into())),
                    Ok(Replayed::Started(started)) => Started::Now(Ok(started)),
                    Err(e) => return Err(e),
                }
            } else {
                self.start(ctx, req, false, !immediate)
            };
            let (sub, run) = match started {
                Started::Now(started) => started?,
                Started::Later(started) => started.await?,
            };
            // Boxed: this future then holds the request or the answer's
            // state, not both.
            Box::pin(self.answer_send(sub, run, immediate, history)).await
        }
    }

    /// With idempotency on: the task of an earlier message with the same
    /// id, or the run of this one.
    async fn replay_or_start(
        &self,
        ctx: &CallContext,
        req: SendMessageRequest,
        finals_only: bool,
    ) -> A2aResult<Replayed> {
        if let Some(task) = self.replay(ctx, &req).await? {
            return Ok(Replayed::Task(Box::new(task)));
        }
        match self.start(ctx, req, false, finals_only) {
            Started::Now(started) => started.map(Replayed::Started),
            Started::Later(started) => started.await.map(Replayed::Started),
        }
    }

    /// The answer to `SendMessage` once the agent runs: its first event
    /// (`returnImmediately`), or the task at the end of its turn.
    async fn answer_send(
        &self,
        mut sub: Subscription,
        run: Run,
        immediate: bool,
        history: Option<usize>,
    ) -> A2aResult<SendAnswer> {
        let mut last_task: Option<Box<Task>> = None;
        if immediate {
            tokio::spawn(run);
            // The first event settles it: the task as created, or a message.
            match sub.recv().await {
                Some(item) => {
                    let event = item.map_err(|e| *e)?;
                    match event.payload.as_ref() {
                        Some(stream_response::Payload::Message(m)) => {
                            return Ok(SendAnswer::Response(m.clone().into()));
                        }
                        Some(stream_response::Payload::Task(t)) => {
                            let mut t = t.clone();
                            t.truncate_history(history);
                            return Ok(SendAnswer::Response(t.into()));
                        }
                        _ => {}
                    }
                }
                None => return Err(A2aError::internal("the agent ended without answering")),
            }
        } else {
            // Run the agent on this request's task until its turn ends: no
            // hand-over to another task, no extra wake-ups. If the turn ends
            // while the agent still runs (or this request is dropped), the
            // rest of the run continues in the background.
            let mut run = Detached(Some(run));
            let item = std::future::poll_fn(|cx| {
                run.poll_run(cx);
                sub.poll_recv(cx)
            })
            .await;
            drop(run);
            if let Some(item) = item {
                let event = item.map_err(|e| *e)?;
                // A status (or the bare signal that the turn ended) says to
                // read the task; a message or a task is the answer itself.
                if let Some(
                    stream_response::Payload::Message(_) | stream_response::Payload::Task(_),
                ) = &event.payload
                {
                    match Arc::unwrap_or_clone(event).payload {
                        Some(stream_response::Payload::Message(m)) => {
                            return Ok(SendAnswer::Response(m.into()));
                        }
                        Some(stream_response::Payload::Task(t)) => last_task = Some(Box::new(t)),
                        _ => {}
                    }
                }
            }
        }
        let stored = match sub.take_turn_task() {
            Some(task) if history.is_none_or(|n| n >= task.history.len()) => Ok(Some(task)),
            Some(task) => {
                let mut task = Task::clone(&task);
                task.truncate_history(history);
                Ok(Some(Arc::new(task)))
            }
            None => self.inner.manager.shared_task(sub.task_id(), history).await,
        };
        drop(sub);
        match stored? {
            Some(task) => Ok(SendAnswer::Task(task)),
            None => match last_task {
                Some(t) => Ok(SendAnswer::Response((*t).into())),
                None => Err(A2aError::internal("the task ended without being stored")),
            },
        }
    }

    /// `SendStreamingMessage`: the agent's message, or the task followed by
    /// its events until it is terminal or interrupted.
    pub async fn send_streaming_message(
        &self,
        ctx: &CallContext,
        req: SendMessageRequest,
    ) -> A2aResult<EventStream> {
        let history = match &req.configuration {
            Some(c) => history_length(c.history_length, "configuration.historyLength")?,
            None => None,
        };
        if let Some(task) = self.replay(ctx, &req).await? {
            // A duplicate: follow the task it started, or just show it when
            // it has finished.
            if task.state().is_terminal() {
                let once = futures::stream::once(async move { Ok(StreamResponse::from(task)) });
                return Ok(Box::pin(once));
            }
            let stored = self
                .visible_task(&self.admit(ctx, &req.tenant)?, &task.id, None)
                .await?;
            let (snapshot, sub) = self.inner.manager.subscribe(&stored, history).await?;
            return Ok(follow(
                sub,
                Some(Arc::new(StreamResponse::from(snapshot))),
                history,
                true,
            ));
        }
        let (mut sub, run) = match self.start(ctx, req, true, false) {
            Started::Now(started) => started?,
            Started::Later(started) => started.await?,
        };
        // The agent runs on this request's task until its first answer, which
        // decides between an error response and a stream; the rest of the
        // run continues in a task of its own. (Answering without a hand-over
        // also lets the connection's read buffer be reused: a request still
        // pending when the server reads again would make it grow.)
        let mut run = Detached(Some(run));
        let first = std::future::poll_fn(|cx| {
            run.poll_run(cx);
            sub.poll_recv(cx)
        })
        .await;
        drop(run);
        let first = match first {
            Some(item) => item.map_err(|e| *e)?,
            None => return Err(A2aError::internal("the agent ended without answering")),
        };
        Ok(follow(sub, Some(first), history, true))
    }

    /// Crash recovery: fails every task the store holds as submitted or
    /// working that no agent of this process is running: after a restart,
    /// their agent is gone. Returns the ids of the tasks failed. Called by
    /// [`crate::A2aServer`] when it starts; several replicas sharing one
    /// store must not call it on start (the tasks may be running on another
    /// replica).
    pub async fn recover_orphaned_tasks(&self) -> A2aResult<Vec<String>> {
        let reason = "The agent stopped while working on this task (the server restarted). \
                      Send the request again to retry.";
        let mut failed = Vec::new();
        for stored in self.inner.manager.store.unfinished().await? {
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
        Ok(failed)
    }

    /// `GetTask`.
    pub async fn get_task(&self, ctx: &CallContext, req: GetTaskRequest) -> A2aResult<Task> {
        let owner = self.admit(ctx, &req.tenant)?;
        let history = history_length(req.history_length, "historyLength")?;
        Ok(self.visible_task(&owner, &req.id, history).await?.task)
    }

    /// `ListTasks`.
    pub async fn list_tasks(
        &self,
        ctx: &CallContext,
        req: ListTasksRequest,
    ) -> A2aResult<ListTasksResponse> {
        let owner = self.admit(ctx, &req.tenant)?;
        let page_size = match req.page_size {
            None => 50,
            Some(n @ 1..=100) => n as usize,
            Some(n) => {
                return Err(A2aError::invalid_params(
                    "pageSize",
                    format!("must be between 1 and 100, got {n}"),
                ));
            }
        };
        // The filters are checked here, once for every binding: the JSON
        // ones refuse an unknown state or a bad time while decoding, but a
        // protobuf message carries any number and any time.
        let state = match TaskState::try_from(req.status) {
            Ok(TaskState::Unspecified) => None,
            Ok(s) => Some(s),
            Err(_) => {
                return Err(A2aError::invalid_params(
                    "status",
                    format!("unknown task state {}", req.status),
                ));
            }
        };
        if let Some(t) = &req.status_timestamp_after {
            if t.to_datetime().is_none() {
                return Err(A2aError::invalid_params(
                    "statusTimestampAfter",
                    "not a valid time (seconds and nanoseconds out of range)",
                ));
            }
        }
        let cursor = if req.page_token.is_empty() {
            None
        } else {
            Some(Cursor::decode(&req.page_token).ok_or_else(|| {
                A2aError::invalid_params("pageToken", "not a page token returned by ListTasks")
            })?)
        };
        let query = TaskQuery {
            context_id: (!req.context_id.is_empty()).then_some(req.context_id),
            state,
            status_after: req.status_timestamp_after,
            page_size,
            cursor,
            history_length: history_length(req.history_length, "historyLength")?,
            include_artifacts: req.include_artifacts.unwrap_or(false),
        };
        let page = self.inner.manager.store.list(&owner, &query).await?;
        Ok(ListTasksResponse {
            page_size: page_size as i32,
            tasks: page.tasks,
            next_page_token: page.next.map(|c| c.encode()).unwrap_or_default(),
            total_size: page.total as i32,
        })
    }

    /// `CancelTask`: stops the agent (cooperatively, through its token and
    /// `cancel` hook) and returns the canceled task.
    pub async fn cancel_task(&self, ctx: &CallContext, req: CancelTaskRequest) -> A2aResult<Task> {
        let owner = self.admit(ctx, &req.tenant)?;
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
        let _ = updater.cancel().await;
        // Another replica may be running the agent: it stops it.
        manager.cancel_elsewhere(&live).await;
        manager.end_cancel(&live);
        let task = self.visible_task(&owner, &req.id, None).await?.task;
        match task.state() {
            TaskState::Canceled => Ok(task),
            s => Err(A2aError::task_not_cancelable(&req.id, s)),
        }
    }

    /// `SubscribeToTask`: the current task, then its events until it is
    /// terminal. Refused for terminal tasks.
    pub async fn subscribe_to_task(
        &self,
        ctx: &CallContext,
        req: SubscribeToTaskRequest,
    ) -> A2aResult<EventStream> {
        let owner = self.admit(ctx, &req.tenant)?;
        if !self.caps_streaming() {
            return Err(A2aError::unsupported(
                "streaming is not supported by this agent (capabilities.streaming)",
            ));
        }
        let stored = self.visible_task(&owner, &req.id, Some(0)).await?;
        if stored.task.state().is_terminal() {
            return Err(A2aError::unsupported(format!(
                "task {} is {}: subscriptions are only possible to tasks that are not terminal; use GetTask",
                req.id,
                stored.task.state().short_name()
            ))
            .with_metadata("taskId", req.id.clone()));
        }
        let (snapshot, sub) = self.inner.manager.subscribe(&stored, None).await?;
        if snapshot.state().is_terminal() {
            return Err(A2aError::unsupported(format!(
                "task {} finished meanwhile; use GetTask",
                req.id
            )));
        }
        Ok(follow(
            sub,
            Some(Arc::new(StreamResponse::from(snapshot))),
            None,
            false,
        ))
    }

    async fn save_push_config(
        &self,
        push: &PushSender,
        config: &TaskPushNotificationConfig,
    ) -> A2aResult<()> {
        let manager = &self.inner.manager;
        manager.store.put_push_config(config).await?;
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
        let owner = self.admit(ctx, &req.tenant)?;
        let push = self.push()?;
        if req.task_id.is_empty() {
            return Err(A2aError::invalid_params("taskId", "a task id is required"));
        }
        let task = self.visible_task(&owner, &req.task_id, Some(0)).await?;
        let config = self
            .prepare_push_config(push, req, &task.task.id, "")
            .await?;
        self.save_push_config(push, &config).await?;
        Ok(config)
    }

    /// `GetTaskPushNotificationConfig`.
    pub async fn get_task_push_notification_config(
        &self,
        ctx: &CallContext,
        req: GetTaskPushNotificationConfigRequest,
    ) -> A2aResult<TaskPushNotificationConfig> {
        let owner = self.admit(ctx, &req.tenant)?;
        self.push()?;
        if req.id.is_empty() {
            return Err(A2aError::invalid_params("id", "a config id is required"));
        }
        self.visible_task(&owner, &req.task_id, Some(0)).await?;
        match self
            .inner
            .manager
            .store
            .get_push_config(&req.task_id, &req.id)
            .await?
        {
            Some(c) => Ok(c),
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
        let owner = self.admit(ctx, &req.tenant)?;
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
                .position(|c| c.id == after)
                .map_or(all.len(), |i| i + 1)
        };
        let configs: Vec<_> = all.iter().skip(start).take(page_size).cloned().collect();
        let next_page_token = match configs.last() {
            Some(last) if start + configs.len() < all.len() => config_page_token(&last.id),
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
        let owner = self.admit(ctx, &req.tenant)?;
        let push = self.push()?;
        if req.id.is_empty() {
            return Err(A2aError::invalid_params("id", "a config id is required"));
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

    /// `GetExtendedAgentCard`.
    pub async fn get_extended_agent_card(
        &self,
        ctx: &CallContext,
        req: GetExtendedAgentCardRequest,
    ) -> A2aResult<AgentCard> {
        let owner = self.admit(ctx, &req.tenant)?;
        let Some(card) = &self.inner.extended_card else {
            return Err(A2aError::unsupported(
                "this agent has no extended agent card (capabilities.extendedAgentCard is false)",
            ));
        };
        if owner.principal.is_empty() {
            return Err(A2aError::new(
                ErrorKind::Unauthenticated,
                "the extended agent card requires authentication with one of the card's security schemes",
            ));
        }
        Ok(card.clone())
    }
}

/// The page token of a config listing: the id of the last config shown.
fn config_page_token(last_id: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("cfg:{last_id}"))
}

fn config_page_token_decode(token: &str) -> Option<String> {
    use base64::Engine;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()?;
    String::from_utf8(raw)
        .ok()?
        .strip_prefix("cfg:")
        .map(str::to_owned)
}

/// One run of the agent for one message, ending with the manager's
/// bookkeeping.
type Run = futures::future::BoxFuture<'static, ()>;

/// What [`RequestHandler::start`] gives: the run started, or the future
/// that starts it.
/// The answer to `SendMessage` as the bindings get it.
pub(crate) enum SendAnswer {
    /// A message, or a task copied (or cut to the history asked for).
    Response(SendMessageResponse),
    /// A task: as the in-memory store holds it (shared, not copied), or a
    /// copy of its own.
    Task(Arc<Task>),
}

impl SendAnswer {
    /// The answer as the protocol's response type.
    pub(crate) fn into_response(self) -> SendMessageResponse {
        match self {
            SendAnswer::Response(r) => r,
            SendAnswer::Task(t) => Arc::unwrap_or_clone(t).into(),
        }
    }
}

/// Serialized exactly as the [`SendMessageResponse`] it stands for.
impl serde::Serialize for SendAnswer {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        match self {
            SendAnswer::Response(r) => r.serialize(serializer),
            SendAnswer::Task(t) => {
                let mut s = serializer.serialize_struct("lf.a2a.v1.SendMessageResponse", 1)?;
                s.serialize_field("task", &**t)?;
                s.end()
            }
        }
    }
}

enum Started<'a> {
    Now(A2aResult<(Subscription, Run)>),
    Later(futures::future::BoxFuture<'a, A2aResult<(Subscription, Run)>>),
}

/// What [`RequestHandler::replay_or_start`] found or started.
enum Replayed {
    Task(Box<Task>),
    Started((Subscription, Run)),
}

/// The parts of a send request the agent's run takes, besides the message.
struct Launch {
    metadata: Option<agentwire_types::Struct>,
    configuration: Option<agentwire_types::SendMessageConfiguration>,
    inline_push: Option<TaskPushNotificationConfig>,
    reference_tasks: Vec<Task>,
    streaming: bool,
    finals_only: bool,
}

/// A run polled in place by the request; whatever is left of it when the
/// request stops polling continues in a task of its own.
struct Detached(Option<Run>);

impl Detached {
    fn poll_run(&mut self, cx: &mut std::task::Context<'_>) {
        if let Some(run) = self.0.as_mut() {
            if run.as_mut().poll(cx).is_ready() {
                self.0 = None;
            }
        }
    }
}

impl Drop for Detached {
    fn drop(&mut self) {
        if let Some(run) = self.0.take() {
            tokio::spawn(run);
        }
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_owned()
    }
}

/// Turns a subscription into the event stream of a streaming call. A send
/// stream closes at a terminal or interrupted state (or after a message); a
/// subscription closes at a terminal state only.
fn follow(
    mut sub: Subscription,
    first: Option<Arc<StreamResponse>>,
    history: Option<usize>,
    close_on_interrupt: bool,
) -> EventStream {
    Box::pin(async_stream::stream! {
        let mut next = first.map(Ok);
        // The opening Task snapshot shows where the task stands; when a
        // message continues an interrupted task, that is the interrupted
        // state, which must not end the stream the message just started.
        let mut opening = true;
        loop {
            let item = match next.take() {
                Some(item) => item,
                None => match sub.recv().await {
                    Some(item) => item,
                    None => break,
                },
            };
            let event = match item {
                Ok(event) => event,
                Err(e) => {
                    yield Err(*e);
                    break;
                }
            };
            let opening_snapshot = std::mem::take(&mut opening)
                && matches!(event.payload, Some(stream_response::Payload::Task(_)))
                && !event.state().is_some_and(TaskState::is_terminal);
            let ends = if opening_snapshot {
                false
            } else if close_on_interrupt {
                event.ends_stream()
            } else {
                matches!(event.payload, Some(stream_response::Payload::Message(_)))
                    || event.state().is_some_and(TaskState::is_terminal)
            };
            let mut event = Arc::try_unwrap(event).unwrap_or_else(|shared| (*shared).clone());
            if let Some(stream_response::Payload::Task(t)) = event.payload.as_mut() {
                t.truncate_history(history);
            }
            yield Ok(event);
            if ends {
                break;
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handler_futures_are_send() {
        fn is_send<T: Send>(_: &T) {}
        let h = RequestHandler::builder(AgentCard::default(), crate::executor::tests::Nop).build();
        let ctx = CallContext::v1();
        is_send(&h.send_message(&ctx, Default::default()));
        is_send(&h.send_streaming_message(&ctx, Default::default()));
        is_send(&h.cancel_task(&ctx, Default::default()));
        is_send(&h.subscribe_to_task(&ctx, Default::default()));
        is_send(&h.list_tasks(&ctx, Default::default()));
    }

    #[tokio::test]
    async fn a_shared_task_answers_as_the_response_would() {
        struct Done;
        impl crate::AgentExecutor for Done {
            async fn execute(&self, _: RequestContext, task: TaskUpdater) -> A2aResult<()> {
                task.add_artifact(agentwire_types::Artifact::text("a", "b \"c\""))
                    .await?;
                task.complete().await
            }
        }
        let h = RequestHandler::builder(AgentCard::default(), Done).build();
        let ctx = CallContext::v1();
        let req = SendMessageRequest {
            message: Some(Message::user_text("hi")),
            ..Default::default()
        };
        let answer = h.send_answer(&ctx, req).await.unwrap();
        let SendAnswer::Task(shared) = &answer else {
            panic!("the in-memory store's task is shared");
        };
        // The store packed the finished task: the answer is the task the
        // last update left (handed over, not decoded), equal to what the
        // store gives back.
        assert_eq!(Arc::strong_count(shared), 1);
        let stored = h
            .get_task(
                &ctx,
                agentwire_types::GetTaskRequest {
                    id: shared.id.clone(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(stored, **shared);
        let json = serde_json::to_value(&answer).unwrap();
        let response = answer.into_response();
        assert_eq!(json, serde_json::to_value(&response).unwrap());
        assert_eq!(json["task"]["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(json["task"]["artifacts"][0]["parts"][0]["text"], "b \"c\"");
        // Asked for no history: a copy without it.
        let req = SendMessageRequest {
            message: Some(Message::user_text("again")),
            configuration: Some(agentwire_types::SendMessageConfiguration {
                history_length: Some(0),
                ..Default::default()
            }),
            ..Default::default()
        };
        match h.send_answer(&ctx, req).await.unwrap() {
            SendAnswer::Task(t) => {
                assert!(t.history.is_empty());
                assert_eq!(Arc::strong_count(&t), 1, "a cut history is a copy");
            }
            SendAnswer::Response(_) => panic!("a task is answered"),
        }
    }

    /// Waits for input; on "burst" streams 20 chunks and waits again; on
    /// anything else completes.
    struct Bursty;

    impl crate::AgentExecutor for Bursty {
        async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
            match (ctx.task.is_some(), ctx.text().as_str()) {
                (false, _) => task.require_input("ready").await,
                (true, "burst") => {
                    let id = agentwire_types::new_id();
                    for i in 0..20 {
                        let chunk =
                            agentwire_types::Artifact::text("a", format!("{i} ")).with_id(&id);
                        task.artifact_chunk(chunk, i > 0, i == 19).await?;
                    }
                    task.require_input("again?").await
                }
                (true, _) => task.complete().await,
            }
        }
    }

    #[tokio::test]
    async fn a_lagging_subscriber_keeps_following_the_task() {
        use futures::StreamExt;
        let h = RequestHandler::builder(AgentCard::default().with_streaming(true), Bursty)
            .config(HandlerConfig {
                queue_capacity: 4,
                ..Default::default()
            })
            .build();
        let ctx = CallContext::v1();
        let send = |text: &str, task_id: &str| SendMessageRequest {
            message: Some(Message::user_text(text).with_task_id(task_id)),
            ..Default::default()
        };
        let first = h.send_message(&ctx, send("start", "")).await.unwrap();
        let id = first.task().unwrap().id.clone();
        let sub = SubscribeToTaskRequest {
            id: id.clone(),
            ..Default::default()
        };
        let mut stream = h.subscribe_to_task(&ctx, sub).await.unwrap();
        let opening = stream.next().await.unwrap().unwrap();
        assert!(matches!(
            opening.payload,
            Some(stream_response::Payload::Task(_))
        ));
        // The subscriber does not read while 20 chunks arrive: it falls
        // behind (queue of 4) and the run ends, interrupted.
        h.send_message(&ctx, send("burst", &id)).await.unwrap();
        // It drains, rejoins from a snapshot (the interrupted task)...
        let mut last = None;
        while let Ok(Some(ev)) =
            tokio::time::timeout(std::time::Duration::from_secs(5), stream.next()).await
        {
            let ev = ev.unwrap();
            if ev.state() == Some(TaskState::InputRequired)
                && matches!(ev.payload, Some(stream_response::Payload::Task(_)))
            {
                last = Some(ev);
                break;
            }
        }
        assert!(last.is_some(), "resynchronised from a snapshot");
        // ...and still sees the next turn, to the end.
        h.send_message(&ctx, send("finish", &id)).await.unwrap();
        let rest: Vec<_> = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            stream.collect::<Vec<_>>(),
        )
        .await
        .expect("the stream ends");
        let states: Vec<_> = rest
            .iter()
            .filter_map(|e| e.as_ref().ok()?.state())
            .collect();
        assert_eq!(states.last(), Some(&TaskState::Completed), "{rest:?}");
    }

    #[tokio::test]
    async fn repeated_message_ids_are_duplicates_only_when_asked() {
        let send = |h: &RequestHandler| {
            let h = h.clone();
            async move {
                let req = SendMessageRequest {
                    message: Some(Message::user_text("hi").with_message_id("same")),
                    ..Default::default()
                };
                let r = h.send_message(&CallContext::v1(), req).await.unwrap();
                r.task().unwrap().id.clone()
            }
        };
        let plain =
            RequestHandler::builder(AgentCard::default(), crate::executor::tests::Nop).build();
        assert_ne!(send(&plain).await, send(&plain).await);
        let idem = RequestHandler::builder(AgentCard::default(), crate::executor::tests::Nop)
            .config(HandlerConfig {
                idempotency: Some(100),
                ..Default::default()
            })
            .build();
        let first = send(&idem).await;
        assert_eq!(send(&idem).await, first);
        let page = idem
            .list_tasks(&CallContext::v1(), ListTasksRequest::default())
            .await
            .unwrap();
        assert_eq!(page.total_size, 1);
    }

    #[test]
    fn versions_and_modes() {
        assert_eq!(major_minor(""), "0.3");
        assert_eq!(major_minor("1.0.2"), "1.0");
        assert_eq!(major_minor("1"), "1.0");
        let modes = vec!["text/plain".to_owned(), "image/*".to_owned()];
        assert!(mode_accepted(&modes, "text/plain; charset=utf-8"));
        assert!(mode_accepted(&modes, "image/png"));
        assert!(!mode_accepted(&modes, "application/pdf"));
    }
}
