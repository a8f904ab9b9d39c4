//! What an agent author implements ([`AgentExecutor`]) and what the agent
//! receives: the [`RequestContext`] and the [`TaskUpdater`] through which it
//! answers.

use std::future::Future;
use std::sync::Arc;

use agentwire_types::{
    A2aError, A2aResult, Artifact, Message, Part, Role, SendMessageConfiguration, Struct, Task,
    TaskState, TaskStatus,
};
use tokio_util::sync::CancellationToken;

use crate::manager::{Emit, LiveTask, TaskManager};
use crate::store::TaskUpdate;

/// The agent: turns incoming messages into a reply or a task's progress.
///
/// `execute` is called once per message sent to the agent (a new request or
/// a message continuing an interrupted task). It answers through the
/// [`TaskUpdater`]: either one plain [`Message`] with
/// [`TaskUpdater::reply`], or task events (`start_work`, `add_artifact`,
/// `complete`, `require_input`...). It should return once the task is in a
/// terminal or interrupted state; a task left unfinished when `execute`
/// returns is marked failed, and an error returned after the task exists
/// fails the task with that error's message. An error returned before any
/// answer goes back to the client as that error.
///
/// ```
/// use agentwire_server::{AgentExecutor, RequestContext, TaskUpdater};
/// use agentwire_types::{A2aResult, Artifact};
///
/// struct Echo;
///
/// impl AgentExecutor for Echo {
///     async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
///         task.start_work().await?;
///         task.add_artifact(Artifact::text("echo", ctx.text())).await?;
///         task.complete().await
///     }
/// }
/// ```
///
/// `execute` may be an `async fn` or return any `Send` future. (The
/// project's `docs/performance.md` says how a very busy agent can keep its
/// per-request future small.)
pub trait AgentExecutor: Send + Sync + 'static {
    /// Handles one incoming message.
    fn execute(
        &self,
        ctx: RequestContext,
        task: TaskUpdater,
    ) -> impl Future<Output = A2aResult<()>> + Send;

    /// Called when a client cancels the task, after the cancellation token
    /// seen by `execute` has fired. The runtime marks the task canceled
    /// afterwards if the agent did not, so the default does nothing.
    fn cancel(
        &self,
        ctx: RequestContext,
        task: TaskUpdater,
    ) -> impl Future<Output = A2aResult<()>> + Send {
        let _ = (ctx, task);
        async { Ok(()) }
    }
}

/// Object-safe form of [`AgentExecutor`] used inside the runtime.
pub(crate) trait DynExecutor: Send + Sync + 'static {
    fn execute_boxed(
        &self,
        ctx: RequestContext,
        task: TaskUpdater,
    ) -> futures::future::BoxFuture<'_, A2aResult<()>>;
    fn cancel_boxed(
        &self,
        ctx: RequestContext,
        task: TaskUpdater,
    ) -> futures::future::BoxFuture<'_, A2aResult<()>>;
}

impl<E: AgentExecutor> DynExecutor for E {
    fn execute_boxed(
        &self,
        ctx: RequestContext,
        task: TaskUpdater,
    ) -> futures::future::BoxFuture<'_, A2aResult<()>> {
        Box::pin(self.execute(ctx, task))
    }
    fn cancel_boxed(
        &self,
        ctx: RequestContext,
        task: TaskUpdater,
    ) -> futures::future::BoxFuture<'_, A2aResult<()>> {
        Box::pin(self.cancel(ctx, task))
    }
}

/// Everything the agent knows about one incoming request.
#[derive(Debug, Clone)]
pub struct RequestContext {
    /// The message the client sent (with `taskId` and `contextId` filled in).
    pub message: Message,
    /// The task this message continues, as it was before the message
    /// arrived (`None` for a new request).
    pub task: Option<Box<Task>>,
    /// The id of the task (new or continued). A new task only comes into
    /// existence with the agent's first task event.
    pub task_id: String,
    /// The context id (the client's, or a fresh one).
    pub context_id: String,
    /// The tasks named in `referenceTaskIds` that exist and are visible to
    /// the caller.
    pub reference_tasks: Vec<Task>,
    /// Extensions the client asked for (`A2A-Extensions`) that the agent
    /// declares in its card.
    pub extensions: Vec<String>,
    /// The authenticated caller, if any.
    pub caller: Option<String>,
    /// The request's metadata.
    pub metadata: Option<Struct>,
    /// The request's configuration (accepted output modes...).
    pub configuration: Option<Box<SendMessageConfiguration>>,
    /// Whether the client follows the request as a stream.
    pub streaming: bool,
    pub(crate) cancel: CancellationToken,
}

impl RequestContext {
    /// The text parts of the incoming message, joined with newlines.
    pub fn text(&self) -> String {
        self.message.text()
    }

    /// The media types the client accepts for the answer (empty: any).
    pub fn accepted_output_modes(&self) -> &[String] {
        self.configuration
            .as_ref()
            .map_or(&[], |c| c.accepted_output_modes.as_slice())
    }

    /// Whether the client asked for `extension` and the agent supports it.
    pub fn has_extension(&self, uri: &str) -> bool {
        self.extensions.iter().any(|e| e == uri)
    }

    /// Whether the task has been canceled.
    pub fn is_canceled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Completes when the task is canceled; use it in `select!` around long
    /// work.
    pub async fn canceled(&self) {
        self.cancel.cancelled().await;
    }

    /// The credential this message answers an authorization request with
    /// (see [`TaskUpdater::request_auth`]), when the task it continues is in
    /// `TASK_STATE_AUTH_REQUIRED`: the string of a data part
    /// `{"credential": "..."}`, else the message's text when it is one
    /// word (a token pasted as the reply). `None` for anything else: the
    /// agent may treat such a message as the client negotiating or
    /// declining (spec 7.6.1).
    pub fn credential(&self) -> Option<String> {
        let waiting = self
            .task
            .as_ref()
            .is_some_and(|t| t.state() == TaskState::AuthRequired);
        if !waiting {
            return None;
        }
        let from_data = self.message.parts.iter().find_map(|p| {
            p.as_data()
                .and_then(|d| d.get(CREDENTIAL_FIELD)?.as_str().map(str::to_owned))
        });
        if let Some(c) = from_data.filter(|c| !c.trim().is_empty()) {
            return Some(c.trim().to_owned());
        }
        let text = self.text();
        let text = text.trim();
        (!text.is_empty() && !text.contains(char::is_whitespace)).then(|| text.to_owned())
    }
}

/// The URI of the extension by which an agent takes the credential of an
/// in-task authorization in the follow-up message (spec 7.6.1: in-band
/// only when negotiated, e.g. by an extension the card declares). An agent
/// that calls [`TaskUpdater::request_auth`] declares it in its card's
/// `capabilities.extensions` (see [`in_task_auth_extension`]).
pub const IN_TASK_AUTH_EXTENSION: &str = "urn:agentwire:ext:in-task-auth:v1";

/// The data part field naming what an authorization request needs.
pub const AUTH_REQUIRED_FIELD: &str = "authRequired";

/// The data part field of a follow-up message carrying the credential.
pub const CREDENTIAL_FIELD: &str = "credential";

/// The card entry of [`IN_TASK_AUTH_EXTENSION`].
pub fn in_task_auth_extension() -> agentwire_types::AgentExtension {
    agentwire_types::AgentExtension {
        uri: IN_TASK_AUTH_EXTENSION.into(),
        description: "In-task authorization: when a task is auth-required, its status message \
             says what is needed (text, and a data part {\"authRequired\": {...}}); reply in the \
             same task with the credential as a data part {\"credential\": \"...\"} or as the \
             message's only word."
            .into(),
        required: false,
        ..Default::default()
    }
}

/// What an agent needs to go on with a task (spec 7.6): the credential's
/// kind, what it unlocks, and the words shown to the person.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthRequest {
    /// Shown to the person: what the credential is for and how to get it.
    pub description: String,
    /// The kind of credential: `bearer` (a token), `apiKey`, `oauth2`...
    pub scheme: String,
    /// The service or resource it is for (a URL or a name), when known.
    pub resource: Option<String>,
    /// The scopes the credential needs, when it is an OAuth token.
    pub scopes: Vec<String>,
}

impl AuthRequest {
    /// A request for a bearer token for `resource`, explained by `description`.
    pub fn bearer(resource: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            description: description.into(),
            scheme: "bearer".into(),
            resource: Some(resource.into()),
            scopes: Vec::new(),
        }
    }

    /// Adds the scopes the token needs.
    pub fn with_scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// The data part's value: `{"authRequired": {"scheme", "resource",
    /// "scopes", "description", "reply"}}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut o = serde_json::Map::new();
        o.insert("scheme".into(), self.scheme.clone().into());
        if let Some(r) = &self.resource {
            o.insert("resource".into(), r.clone().into());
        }
        if !self.scopes.is_empty() {
            o.insert("scopes".into(), self.scopes.clone().into());
        }
        o.insert("description".into(), self.description.clone().into());
        o.insert(
            "reply".into(),
            serde_json::json!({ "extension": IN_TASK_AUTH_EXTENSION, "field": CREDENTIAL_FIELD }),
        );
        serde_json::json!({ AUTH_REQUIRED_FIELD: serde_json::Value::Object(o) })
    }

    /// Reads the request back from a status message (a client's view).
    pub fn from_message(message: &Message) -> Option<Self> {
        message.parts.iter().find_map(|p| {
            let d = p.as_data()?;
            let o = d.get(AUTH_REQUIRED_FIELD)?;
            let s = |k: &str| o.get(k).and_then(|v| v.as_str()).map(str::to_owned);
            Some(Self {
                description: s("description").unwrap_or_default(),
                scheme: s("scheme").unwrap_or_default(),
                resource: s("resource"),
                scopes: o
                    .get("scopes")
                    .and_then(|v| v.as_array())
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default(),
            })
        })
    }
}

/// The agent's handle to answer a request: a plain message, or the events
/// of the task. Cheap to clone.
///
/// Every method is checked by the task manager: after a terminal state
/// nothing more is accepted (the call fails), and a reply [`Message`] is
/// only possible before the task exists.
#[derive(Clone)]
pub struct TaskUpdater {
    pub(crate) manager: Arc<TaskManager>,
    pub(crate) live: Arc<LiveTask>,
}

impl std::fmt::Debug for TaskUpdater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskUpdater")
            .field("task_id", &self.live.id)
            .field("context_id", &self.live.context_id)
            .finish()
    }
}

impl TaskUpdater {
    /// The task id.
    pub fn task_id(&self) -> &str {
        &self.live.id
    }

    /// The context id.
    pub fn context_id(&self) -> &str {
        &self.live.context_id
    }

    /// Whether the task has been canceled (stop working when it has).
    pub fn is_canceled(&self) -> bool {
        self.live.cancel.is_cancelled()
    }

    /// A message from the agent in this task's context and task.
    pub fn agent_message(&self, parts: Vec<Part>) -> Message {
        let mut m = Message::new(Role::Agent, parts);
        m.context_id.clone_from(&self.live.context_id);
        m.task_id.clone_from(&self.live.id);
        m
    }

    fn text_message(&self, text: impl Into<String>) -> Message {
        self.agent_message(vec![Part::text(text)])
    }

    /// Answers with a single message instead of a task. Only possible as
    /// the first answer to a new request.
    pub async fn reply(&self, mut message: Message) -> A2aResult<()> {
        message.role = Role::Agent as i32;
        message.context_id.clone_from(&self.live.context_id);
        message.task_id.clear();
        self.manager.reply(&self.live, message).await
    }

    /// Answers with a single text message instead of a task.
    pub async fn reply_text(&self, text: impl Into<String>) -> A2aResult<()> {
        self.reply(Message::agent_text(text)).await
    }

    /// Creates the task in `TASK_STATE_SUBMITTED` if it does not exist yet.
    pub async fn submit(&self) -> A2aResult<()> {
        self.manager.ensure_created(&self.live).await
    }

    /// Sets any status, with an optional message.
    pub fn set_status(&self, state: TaskState, message: Option<Message>) -> Update<'_> {
        let mut status = TaskStatus::new(state);
        status.message = message.map(Box::new);
        self.update(TaskUpdate::Status {
            status,
            metadata: None,
        })
    }

    pub(crate) fn update(&self, update: TaskUpdate) -> Update<'_> {
        Update {
            updater: self,
            update: Some(update),
            step: Step::Ready(None),
        }
    }

    /// Moves the task to `TASK_STATE_WORKING`.
    pub fn start_work(&self) -> Update<'_> {
        self.set_status(TaskState::Working, None)
    }

    /// Stays working, with a progress message.
    pub fn progress(&self, text: impl Into<String>) -> Update<'_> {
        self.set_status(TaskState::Working, Some(self.text_message(text)))
    }

    /// Adds (or replaces) a whole artifact.
    pub fn add_artifact(&self, artifact: Artifact) -> Update<'_> {
        self.artifact_chunk(artifact, false, true)
    }

    /// Sends an artifact chunk: with `append` its parts are added to the
    /// artifact with the same id; `last_chunk` marks the end of it.
    pub fn artifact_chunk(&self, artifact: Artifact, append: bool, last_chunk: bool) -> Update<'_> {
        if artifact.artifact_id.is_empty() {
            return Update {
                updater: self,
                update: None,
                step: Step::Ready(Some(Box::new(A2aError::internal(
                    "an artifact needs an artifactId",
                )))),
            };
        }
        self.update(TaskUpdate::Artifact {
            artifact,
            append,
            last_chunk,
            metadata: None,
        })
    }

    /// Completes the task.
    pub fn complete(&self) -> Update<'_> {
        self.set_status(TaskState::Completed, None)
    }

    /// Completes the task with a final message.
    pub fn complete_with(&self, text: impl Into<String>) -> Update<'_> {
        self.set_status(TaskState::Completed, Some(self.text_message(text)))
    }

    /// Fails the task, saying why.
    pub fn fail(&self, reason: impl Into<String>) -> Update<'_> {
        self.set_status(TaskState::Failed, Some(self.text_message(reason)))
    }

    /// Rejects the task (the agent will not do it), saying why.
    pub fn reject(&self, reason: impl Into<String>) -> Update<'_> {
        self.set_status(TaskState::Rejected, Some(self.text_message(reason)))
    }

    /// Cancels the task.
    pub fn cancel(&self) -> Update<'_> {
        self.set_status(TaskState::Canceled, None)
    }

    /// Asks the client for more input (`TASK_STATE_INPUT_REQUIRED`).
    pub fn require_input(&self, question: impl Into<String>) -> Update<'_> {
        self.set_status(TaskState::InputRequired, Some(self.text_message(question)))
    }

    /// Asks the client for authorization (`TASK_STATE_AUTH_REQUIRED`), in words.
    pub fn require_auth(&self, what: impl Into<String>) -> Update<'_> {
        self.set_status(TaskState::AuthRequired, Some(self.text_message(what)))
    }

    /// The status message of an authorization request: the description as
    /// text, then the request as data (see [`AuthRequest::to_json`]). Add
    /// metadata to it and pass it to [`TaskUpdater::set_status`] with
    /// `TASK_STATE_AUTH_REQUIRED`, or use [`TaskUpdater::request_auth`].
    pub fn auth_request_message(&self, request: &AuthRequest) -> Message {
        self.agent_message(vec![
            Part::text(request.description.clone()),
            Part::data(request.to_json()),
        ])
    }

    /// Moves the task to `TASK_STATE_AUTH_REQUIRED` naming what it needs
    /// (spec 7.6.1). The credential comes back in the next message to the
    /// task: [`RequestContext::credential`] reads it.
    pub fn request_auth(&self, request: &AuthRequest) -> Update<'_> {
        self.set_status(
            TaskState::AuthRequired,
            Some(self.auth_request_message(request)),
        )
    }
}

/// One update of a task by a [`TaskUpdater`]: a future that applies it
/// when polled, and resolves once it is stored and published. Like any
/// future it does nothing unless awaited.
// A named future rather than an `async fn`, to keep agents' futures small
// (docs/performance.md).
#[must_use = "an update does nothing unless awaited"]
pub struct Update<'a> {
    updater: &'a TaskUpdater,
    /// The update until it is applied (taken from here where it is used,
    /// not moved along the way: it is a few hundred bytes).
    update: Option<TaskUpdate>,
    step: Step<'a>,
}

enum Step<'a> {
    /// Not polled yet, or why the update cannot be made.
    Ready(Option<Box<A2aError>>),
    /// Being applied.
    Applying(Emit<'a>),
    /// Applied.
    Done,
}

impl std::fmt::Debug for Update<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Update")
            .field("task_id", &self.updater.live.id)
            .finish_non_exhaustive()
    }
}

impl Future for Update<'_> {
    type Output = A2aResult<()>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<A2aResult<()>> {
        // Every field is Unpin (an update's own future is boxed).
        let this = self.get_mut();
        if let Step::Ready(refused) = &mut this.step {
            if let Some(e) = refused.take() {
                this.step = Step::Done;
                return std::task::Poll::Ready(Err(*e));
            }
            let updater = this.updater;
            this.step = Step::Applying(updater.manager.emit(&updater.live, &mut this.update));
        }
        match &mut this.step {
            Step::Applying(emit) => {
                let done = std::pin::Pin::new(emit).poll(cx);
                if done.is_ready() {
                    this.step = Step::Done;
                }
                done
            }
            Step::Ready(_) | Step::Done => {
                std::task::Poll::Ready(Err(A2aError::internal("an update was awaited twice")))
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An agent that completes every task at once.
    pub(crate) struct Nop;

    impl AgentExecutor for Nop {
        async fn execute(&self, _ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
            task.complete().await
        }
    }
}
