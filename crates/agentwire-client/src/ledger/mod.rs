//! The client-side ledger: contexts, their tasks, and artifact versions.
//!
//! A2A leaves the bookkeeping of an interaction to the client: which
//! `contextId` groups the conversation, which tasks it holds and in what
//! state, which artifacts they produced, how refinements chain artifact
//! versions (the agent keeps the artifact *name* and gives each version a
//! new `artifactId`), which version the user accepted, and which tasks wait
//! for input or authorization. The [`Ledger`] records all of it from the
//! messages sent and the responses and events received, and offers the
//! follow-up calls an application needs:
//!
//! - [`Ledger::send`] / [`Ledger::stream`]: send a message and record what
//!   comes back;
//! - [`Ledger::continue_task`]: answer a task waiting in `input-required`
//!   or `auth-required` (same `taskId`, same `contextId`);
//! - [`Ledger::refine`]: ask for a new version of an artifact: a new task
//!   in the same context, with `referenceTaskIds` naming the artifact's
//!   task and every part's metadata naming the `artifactId` and `taskId`
//!   (the agent does not have to guess which artifact is meant);
//! - [`Ledger::accept`]: mark the version the user accepted;
//! - [`Ledger::pending`]: the tasks waiting for the user.
//!
//! Two stores: [`Ledger::in_memory`], and [`Ledger::open`] (SQLite, one
//! file; feature `sqlite`, on by default) for applications that continue
//! conversations in a later run.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use agentwire_client::Client;
//! use agentwire_client::ledger::Ledger;
//! use agentwire_types::Message;
//!
//! let client = Client::connect("http://127.0.0.1:8080").await?;
//! let ledger = Ledger::open("conversations.db").await?;
//!
//! // First version of the poster.
//! let answer = ledger.send(&client, Message::user_text("a coffee poster")).await?;
//! let task = answer.task().expect("a task");
//! let v1 = ledger.versions_of_task(&task.id).await?.remove(0);
//!
//! // Ask for a refinement of that exact artifact, then accept it.
//! ledger.refine(&client, &v1.artifact_id, Message::user_text("a fancier title")).await?;
//! let latest = ledger.latest_version(&v1.context_id, &v1.artifact_name).await?.expect("v2");
//! assert_eq!(latest.previous_artifact_id.as_deref(), Some(v1.artifact_id.as_str()));
//! ledger.accept(&latest.artifact_id).await?;
//!
//! // Anything waiting for the user?
//! for t in ledger.pending().await? {
//!     println!("task {} waits: {}", t.id, t.state.short_name());
//! }
//! # Ok(()) }
//! ```

mod memory;
#[cfg(feature = "sqlite")]
mod sqlite;

use std::sync::Arc;

use agentwire_types::{
    Artifact, Message, Part, Role, SendMessageConfiguration, SendMessageRequest,
    SendMessageResponse, StreamResponse, Task, TaskState, send_message_response, stream_response,
};
use chrono::{DateTime, Utc};
use futures::StreamExt;

use crate::error::ClientError;
use crate::follow::TaskView;
use crate::transport::{CallOptions, EventStream, Transport};

pub use memory::MemoryStore;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;

/// The part metadata key naming the artifact a refinement targets.
pub const ARTIFACT_ID_KEY: &str = "artifactId";
/// The part metadata key naming the task that produced that artifact.
pub const TASK_ID_KEY: &str = "taskId";

/// What can go wrong with the ledger.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// The call to the agent failed.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The store failed (I/O, SQLite, a corrupt row).
    #[error("ledger storage: {0}")]
    Storage(String),
    /// No such task in the ledger.
    #[error("the ledger has no task {0}")]
    UnknownTask(String),
    /// No such artifact version in the ledger.
    #[error("the ledger has no artifact version {0}")]
    UnknownArtifact(String),
    /// The task cannot take the requested action.
    #[error("{0}")]
    InvalidState(String),
}

/// Shorthand for ledger results.
pub type LedgerResult<T> = Result<T, LedgerError>;

/// A context: the `contextId` grouping a conversation's tasks and messages.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextRecord {
    /// The server-assigned context id.
    pub id: String,
    /// The agent it was opened with (the reference the caller gave, e.g.
    /// a URL), when the application recorded one ([`Ledger::set_agent`]).
    pub agent: Option<String>,
    /// When the ledger first saw it.
    pub created_at: DateTime<Utc>,
    /// When anything in it last changed.
    pub updated_at: DateTime<Utc>,
}

/// A task as last seen.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    /// The task id.
    pub id: String,
    /// Its context.
    pub context_id: String,
    /// Its state.
    pub state: TaskState,
    /// The latest snapshot (status, artifacts, history).
    pub task: Task,
    /// The artifact this task was asked to refine, if it is a refinement.
    pub refines_artifact_id: Option<String>,
    /// The task's generation (A2A v1.1 draft) when last seen: the highest
    /// one the agent reported, `0` when it reported none (an A2A 1.0
    /// agent, or calls made with `A2A-Version: 1.0`). A snapshot without a
    /// generation keeps the one recorded before.
    pub generation: i64,
    /// When the ledger first saw it.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// One version of an artifact (the version chain a client keeps: name, id, the task it came from).
#[derive(Debug, Clone, PartialEq)]
pub struct ArtifactVersion {
    /// This version's id.
    pub artifact_id: String,
    /// The artifact name shared by the versions of one logical artifact.
    pub artifact_name: String,
    /// The task that produced it.
    pub task_id: String,
    /// The context of that task.
    pub context_id: String,
    /// The version it refines, if any.
    pub previous_artifact_id: Option<String>,
    /// Whether the user accepted this version (at most one per name and
    /// context).
    pub accepted_by_user: bool,
    /// When the ledger first saw it.
    pub created_at: DateTime<Utc>,
    /// The artifact itself (all chunks so far).
    pub artifact: Artifact,
}

/// Where a [`Ledger`] keeps its records. Implemented by [`MemoryStore`]
/// and [`SqliteStore`]; the version-chain logic lives in [`Ledger`], once.
#[async_trait::async_trait]
pub trait LedgerStore: Send + Sync {
    /// Creates the context or updates its `updated_at`.
    async fn touch_context(&self, id: &str, at: DateTime<Utc>) -> LedgerResult<()>;
    /// A context.
    async fn context(&self, id: &str) -> LedgerResult<Option<ContextRecord>>;
    /// All contexts, most recently updated first.
    async fn contexts(&self) -> LedgerResult<Vec<ContextRecord>>;
    /// Adds a message to a context (a message id already there is
    /// replaced).
    async fn add_message(
        &self,
        context_id: &str,
        message: &Message,
        at: DateTime<Utc>,
    ) -> LedgerResult<()>;
    /// The messages of a context, in the order recorded.
    async fn messages(&self, context_id: &str) -> LedgerResult<Vec<Message>>;
    /// Inserts or replaces a task record (its `created_at` and a known
    /// `refines_artifact_id` are kept).
    async fn put_task(&self, record: &TaskRecord) -> LedgerResult<()>;
    /// A task.
    async fn task(&self, id: &str) -> LedgerResult<Option<TaskRecord>>;
    /// The tasks of a context (all tasks with `None`), oldest first.
    async fn tasks(&self, context_id: Option<&str>) -> LedgerResult<Vec<TaskRecord>>;
    /// Inserts a version or updates its artifact (its `created_at`,
    /// `previous_artifact_id` and `accepted_by_user` are kept).
    async fn put_version(&self, version: &ArtifactVersion) -> LedgerResult<()>;
    /// A version.
    async fn version(&self, artifact_id: &str) -> LedgerResult<Option<ArtifactVersion>>;
    /// The versions of a context, oldest first.
    async fn versions(&self, context_id: &str) -> LedgerResult<Vec<ArtifactVersion>>;
    /// Marks `artifact_id` accepted and every other version of the same
    /// name in its context not accepted.
    async fn set_accepted(&self, artifact_id: &str) -> LedgerResult<()>;
    /// Records the agent of a context (the context must exist).
    async fn set_context_agent(&self, id: &str, agent: &str) -> LedgerResult<()>;
    /// Forgets every context but the `keep` most recently updated ones,
    /// with their messages, tasks and versions; returns how many contexts
    /// were forgotten.
    async fn retain_recent_contexts(&self, keep: usize) -> LedgerResult<usize>;
}

/// The ledger: records interactions and offers the follow-up calls.
/// Cheap to clone (clones share the store).
#[derive(Clone)]
pub struct Ledger {
    store: Arc<dyn LedgerStore>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger").finish_non_exhaustive()
    }
}

/// Everything the ledger knows about one context.
#[derive(Debug, Clone)]
pub struct ContextView {
    /// The context.
    pub context: ContextRecord,
    /// Its messages (user messages sent, direct agent replies).
    pub messages: Vec<Message>,
    /// Its tasks, oldest first.
    pub tasks: Vec<TaskRecord>,
    /// Its artifact versions, oldest first.
    pub versions: Vec<ArtifactVersion>,
}

impl Ledger {
    /// A ledger kept in memory (gone when the process ends).
    pub fn in_memory() -> Self {
        Self::with_store(Arc::new(MemoryStore::new()))
    }

    /// A ledger in an SQLite file (created if missing, migrated to the
    /// current schema).
    #[cfg(feature = "sqlite")]
    pub async fn open(path: impl AsRef<std::path::Path>) -> LedgerResult<Self> {
        Ok(Self::with_store(Arc::new(SqliteStore::open(path).await?)))
    }

    /// A ledger over any store.
    pub fn with_store(store: Arc<dyn LedgerStore>) -> Self {
        Self { store }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn LedgerStore> {
        &self.store
    }

    // ----- recording -----------------------------------------------------

    /// Records a message sent and the agent's answer.
    pub async fn record_exchange(
        &self,
        sent: &Message,
        response: &SendMessageResponse,
    ) -> LedgerResult<()> {
        let now = Utc::now();
        match &response.payload {
            Some(send_message_response::Payload::Task(task)) => {
                self.record_sent(sent, &task.context_id, now).await?;
                self.record_task(task).await?;
            }
            Some(send_message_response::Payload::Message(reply)) => {
                let ctx = if reply.context_id.is_empty() {
                    &sent.context_id
                } else {
                    &reply.context_id
                };
                if !ctx.is_empty() {
                    self.record_sent(sent, ctx, now).await?;
                    self.store.add_message(ctx, reply, now).await?;
                }
            }
            None => {}
        }
        Ok(())
    }

    async fn record_sent(
        &self,
        sent: &Message,
        context_id: &str,
        at: DateTime<Utc>,
    ) -> LedgerResult<()> {
        if context_id.is_empty() {
            return Ok(());
        }
        self.store.touch_context(context_id, at).await?;
        let mut m = sent.clone();
        if m.context_id.is_empty() {
            m.context_id = context_id.to_owned();
        }
        self.store.add_message(context_id, &m, at).await
    }

    /// Records a task snapshot: its state, and a version for each artifact
    /// not seen before (chained to the version it refines).
    pub async fn record_task(&self, task: &Task) -> LedgerResult<TaskRecord> {
        self.record_task_refining(task, None).await
    }

    async fn record_task_refining(
        &self,
        task: &Task,
        refines: Option<&str>,
    ) -> LedgerResult<TaskRecord> {
        if task.id.is_empty() {
            return Err(LedgerError::InvalidState("a task without an id".into()));
        }
        let now = Utc::now();
        let existing = self.store.task(&task.id).await?;
        let context_id = if task.context_id.is_empty() {
            existing
                .as_ref()
                .map(|r| r.context_id.clone())
                .unwrap_or_default()
        } else {
            task.context_id.clone()
        };
        if !context_id.is_empty() {
            self.store.touch_context(&context_id, now).await?;
        }
        let refines_artifact_id = refines.map(str::to_owned).or_else(|| {
            existing
                .as_ref()
                .and_then(|r| r.refines_artifact_id.clone())
        });
        let record = TaskRecord {
            id: task.id.clone(),
            context_id: context_id.clone(),
            state: task.state(),
            task: task.clone(),
            refines_artifact_id: refines_artifact_id.clone(),
            generation: task
                .generation
                .max(existing.as_ref().map_or(0, |r| r.generation)),
            created_at: existing.as_ref().map_or(now, |r| r.created_at),
            updated_at: now,
        };
        self.store.put_task(&record).await?;
        let target = match &refines_artifact_id {
            Some(id) => self.store.version(id).await?,
            None => None,
        };
        let single = task.artifacts.len() == 1;
        for artifact in &task.artifacts {
            if artifact.artifact_id.is_empty() {
                continue;
            }
            if let Some(mut v) = self.store.version(&artifact.artifact_id).await? {
                if v.artifact != *artifact {
                    v.artifact = artifact.clone();
                    self.store.put_version(&v).await?;
                }
                continue;
            }
            let previous = match &target {
                Some(t) if t.artifact_name == artifact.name || single => {
                    Some(t.artifact_id.clone())
                }
                _ if !artifact.name.is_empty() && !context_id.is_empty() => self
                    .latest_version(&context_id, &artifact.name)
                    .await?
                    .filter(|v| v.task_id != task.id)
                    .map(|v| v.artifact_id),
                _ => None,
            };
            let version = ArtifactVersion {
                artifact_id: artifact.artifact_id.clone(),
                artifact_name: artifact.name.clone(),
                task_id: task.id.clone(),
                context_id: context_id.clone(),
                previous_artifact_id: previous,
                accepted_by_user: false,
                created_at: now,
                artifact: artifact.clone(),
            };
            self.store.put_version(&version).await?;
        }
        Ok(record)
    }

    /// Records one streamed event (chunks are merged into the stored
    /// artifact).
    pub async fn record_event(&self, event: &StreamResponse) -> LedgerResult<()> {
        match &event.payload {
            Some(stream_response::Payload::Task(t)) => {
                self.record_task(t).await?;
            }
            Some(stream_response::Payload::Message(m)) if !m.context_id.is_empty() => {
                let now = Utc::now();
                self.store.touch_context(&m.context_id, now).await?;
                self.store.add_message(&m.context_id, m, now).await?;
            }
            Some(stream_response::Payload::Message(_)) => {}
            Some(stream_response::Payload::StatusUpdate(_))
            | Some(stream_response::Payload::ArtifactUpdate(_)) => {
                let Some(task_id) = event.task_id() else {
                    return Ok(());
                };
                let mut view = TaskView::new();
                if let Some(r) = self.store.task(task_id).await? {
                    view.apply(&StreamResponse::from(r.task));
                }
                view.apply(event);
                if let Some(task) = view.task() {
                    self.record_task(&task).await?;
                }
            }
            None => {}
        }
        Ok(())
    }

    /// Records a message the application sent in a context (the messages
    /// [`Ledger::send`] and [`Ledger::stream`] send are recorded already).
    pub async fn record_message_sent(&self, sent: &Message, context_id: &str) -> LedgerResult<()> {
        self.record_sent(sent, context_id, Utc::now()).await
    }

    /// Records which agent a context belongs to (the reference the
    /// application uses to reach it). Creates the context if needed.
    pub async fn set_agent(&self, context_id: &str, agent: &str) -> LedgerResult<()> {
        if context_id.is_empty() {
            return Ok(());
        }
        if self.store.context(context_id).await?.is_none() {
            self.store.touch_context(context_id, Utc::now()).await?;
        }
        self.store.set_context_agent(context_id, agent).await
    }

    /// Keeps the ledger bounded: forgets the least recently updated
    /// contexts beyond `max_contexts` (with their messages, tasks and
    /// artifact versions). Returns how many contexts were forgotten.
    pub async fn prune(&self, max_contexts: usize) -> LedgerResult<usize> {
        self.store.retain_recent_contexts(max_contexts).await
    }

    // ----- calls ---------------------------------------------------------

    /// Sends a message (blocking `SendMessage`) and records the exchange.
    pub async fn send<T: Transport + ?Sized>(
        &self,
        transport: &T,
        message: Message,
    ) -> LedgerResult<SendMessageResponse> {
        self.send_with(transport, message, None, &CallOptions::new())
            .await
    }

    /// [`Ledger::send`] with a configuration and call options.
    pub async fn send_with<T: Transport + ?Sized>(
        &self,
        transport: &T,
        message: Message,
        configuration: Option<SendMessageConfiguration>,
        options: &CallOptions,
    ) -> LedgerResult<SendMessageResponse> {
        self.send_refining(transport, message, configuration, options, None)
            .await
    }

    async fn send_refining<T: Transport + ?Sized>(
        &self,
        transport: &T,
        message: Message,
        configuration: Option<SendMessageConfiguration>,
        options: &CallOptions,
        refines: Option<&str>,
    ) -> LedgerResult<SendMessageResponse> {
        let message = normalized(message);
        let request = SendMessageRequest {
            message: Some(message.clone()),
            configuration,
            ..Default::default()
        };
        let response = transport.send_message(request, options).await?;
        if let (Some(target), Some(task)) = (refines, response.task()) {
            self.record_sent(&message, &task.context_id, Utc::now())
                .await?;
            self.record_task_refining(task, Some(target)).await?;
        } else {
            self.record_exchange(&message, &response).await?;
        }
        Ok(response)
    }

    /// Sends a message as a stream (`SendStreamingMessage`); every event is
    /// recorded as it passes. A recording failure ends the stream with an
    /// error.
    pub async fn stream<T: Transport + ?Sized>(
        &self,
        transport: &T,
        message: Message,
        options: &CallOptions,
    ) -> LedgerResult<EventStream> {
        let message = normalized(message);
        let request = SendMessageRequest {
            message: Some(message.clone()),
            ..Default::default()
        };
        let events = transport.send_streaming_message(request, options).await?;
        Ok(self.recording(events, Some(message)))
    }

    /// Wraps a stream so that each event is recorded as it passes (and the
    /// message sent, once the context id is known).
    pub fn recording(&self, events: EventStream, sent: Option<Message>) -> EventStream {
        let ledger = self.clone();
        let mut sent = sent;
        events.wrap(|events| {
            events.then(move |item| {
                let ledger = ledger.clone();
                let first = sent.take();
                async move {
                    let event = item?;
                    let record = async {
                        if let Some(m) = first {
                            let ctx = match &event.payload {
                                Some(stream_response::Payload::Task(t)) => t.context_id.clone(),
                                Some(stream_response::Payload::Message(r)) => r.context_id.clone(),
                                Some(stream_response::Payload::StatusUpdate(e)) => {
                                    e.context_id.clone()
                                }
                                Some(stream_response::Payload::ArtifactUpdate(e)) => {
                                    e.context_id.clone()
                                }
                                None => String::new(),
                            };
                            ledger.record_sent(&m, &ctx, Utc::now()).await?;
                        }
                        ledger.record_event(&event).await
                    };
                    record
                        .await
                        .map_err(|e| ClientError::InvalidRequest(e.to_string()))?;
                    Ok(event)
                }
            })
        })
    }

    /// Answers a task (typically one waiting in `input-required` or
    /// `auth-required`): the message gets the task's id and context.
    pub async fn continue_task<T: Transport + ?Sized>(
        &self,
        transport: &T,
        task_id: &str,
        message: Message,
    ) -> LedgerResult<SendMessageResponse> {
        let record = self
            .store
            .task(task_id)
            .await?
            .ok_or_else(|| LedgerError::UnknownTask(task_id.to_owned()))?;
        if record.state.is_terminal() {
            return Err(LedgerError::InvalidState(format!(
                "task {task_id} is {} and cannot be continued; refine one of its artifacts \
                 (a new task in the same context) instead",
                record.state.short_name()
            )));
        }
        let message = message
            .with_task_id(task_id)
            .with_context_id(&record.context_id);
        self.send(transport, message).await
    }

    /// The message [`Ledger::refine`] sends: same context, a new task,
    /// `referenceTaskIds` naming the artifact's task, and each part's
    /// metadata naming `artifactId` and `taskId`.
    pub async fn refinement_message(
        &self,
        artifact_id: &str,
        message: Message,
    ) -> LedgerResult<Message> {
        let v = self
            .store
            .version(artifact_id)
            .await?
            .ok_or_else(|| LedgerError::UnknownArtifact(artifact_id.to_owned()))?;
        let mut m = message.with_context_id(&v.context_id);
        m.task_id.clear();
        if !m.reference_task_ids.contains(&v.task_id) {
            m.reference_task_ids.push(v.task_id.clone());
        }
        if m.parts.is_empty() {
            m.parts.push(Part::text(""));
        }
        m.parts = m
            .parts
            .into_iter()
            .map(|p| {
                p.with_metadata(ARTIFACT_ID_KEY, serde_json::json!(v.artifact_id))
                    .with_metadata(TASK_ID_KEY, serde_json::json!(v.task_id))
            })
            .collect();
        Ok(m)
    }

    /// Asks for a new version of an artifact (see
    /// [`Ledger::refinement_message`]); the artifacts of the new task are
    /// chained to it.
    pub async fn refine<T: Transport + ?Sized>(
        &self,
        transport: &T,
        artifact_id: &str,
        message: Message,
    ) -> LedgerResult<SendMessageResponse> {
        let m = self.refinement_message(artifact_id, message).await?;
        self.send_refining(transport, m, None, &CallOptions::new(), Some(artifact_id))
            .await
    }

    /// Marks a version accepted by the user (and no other version of that
    /// artifact in its context).
    pub async fn accept(&self, artifact_id: &str) -> LedgerResult<ArtifactVersion> {
        if self.store.version(artifact_id).await?.is_none() {
            return Err(LedgerError::UnknownArtifact(artifact_id.to_owned()));
        }
        self.store.set_accepted(artifact_id).await?;
        self.store
            .version(artifact_id)
            .await?
            .ok_or_else(|| LedgerError::UnknownArtifact(artifact_id.to_owned()))
    }

    // ----- queries -------------------------------------------------------

    /// The tasks waiting for the user (`input-required`, `auth-required`),
    /// oldest first.
    pub async fn pending(&self) -> LedgerResult<Vec<TaskRecord>> {
        Ok(self
            .store
            .tasks(None)
            .await?
            .into_iter()
            .filter(|t| t.state.is_interrupted())
            .collect())
    }

    /// A task.
    pub async fn task(&self, id: &str) -> LedgerResult<Option<TaskRecord>> {
        self.store.task(id).await
    }

    /// All contexts, most recent first.
    pub async fn contexts(&self) -> LedgerResult<Vec<ContextRecord>> {
        self.store.contexts().await
    }

    /// Everything about one context.
    pub async fn context(&self, id: &str) -> LedgerResult<Option<ContextView>> {
        let Some(context) = self.store.context(id).await? else {
            return Ok(None);
        };
        Ok(Some(ContextView {
            messages: self.store.messages(id).await?,
            tasks: self.store.tasks(Some(id)).await?,
            versions: self.store.versions(id).await?,
            context,
        }))
    }

    /// A version.
    pub async fn version(&self, artifact_id: &str) -> LedgerResult<Option<ArtifactVersion>> {
        self.store.version(artifact_id).await
    }

    /// The versions of an artifact name in a context, oldest first.
    pub async fn versions(
        &self,
        context_id: &str,
        artifact_name: &str,
    ) -> LedgerResult<Vec<ArtifactVersion>> {
        Ok(self
            .store
            .versions(context_id)
            .await?
            .into_iter()
            .filter(|v| v.artifact_name == artifact_name)
            .collect())
    }

    /// The versions a task produced.
    pub async fn versions_of_task(&self, task_id: &str) -> LedgerResult<Vec<ArtifactVersion>> {
        let Some(t) = self.store.task(task_id).await? else {
            return Ok(Vec::new());
        };
        Ok(self
            .store
            .versions(&t.context_id)
            .await?
            .into_iter()
            .filter(|v| v.task_id == task_id)
            .collect())
    }

    /// The chain of versions ending at `artifact_id`, oldest first.
    pub async fn chain(&self, artifact_id: &str) -> LedgerResult<Vec<ArtifactVersion>> {
        let mut out = Vec::new();
        let mut next = Some(artifact_id.to_owned());
        while let Some(id) = next {
            if out.iter().any(|v: &ArtifactVersion| v.artifact_id == id) {
                break; // a cycle in stored data; never loop
            }
            let Some(v) = self.store.version(&id).await? else {
                break;
            };
            next = v.previous_artifact_id.clone();
            out.push(v);
        }
        out.reverse();
        Ok(out)
    }

    /// The newest version of an artifact name in a context.
    pub async fn latest_version(
        &self,
        context_id: &str,
        artifact_name: &str,
    ) -> LedgerResult<Option<ArtifactVersion>> {
        Ok(self.versions(context_id, artifact_name).await?.pop())
    }

    /// The accepted version of an artifact name in a context.
    pub async fn accepted_version(
        &self,
        context_id: &str,
        artifact_name: &str,
    ) -> LedgerResult<Option<ArtifactVersion>> {
        Ok(self
            .versions(context_id, artifact_name)
            .await?
            .into_iter()
            .find(|v| v.accepted_by_user))
    }
}

/// A message ready to send: an id and the user role.
fn normalized(mut m: Message) -> Message {
    if m.message_id.is_empty() {
        m.message_id = agentwire_types::new_id();
    }
    if m.role == Role::Unspecified as i32 {
        m.role = Role::User as i32;
    }
    m
}

#[cfg(test)]
mod tests;
