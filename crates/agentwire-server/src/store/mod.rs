//! Task persistence.
//!
//! A [`TaskStore`] keeps tasks (with their owner), applies updates to them and
//! answers queries. The rules of how an update changes a task live once, in
//! [`apply_update`]; every store calls it, so the in-memory store and the
//! database stores cannot disagree on artifact merging, history or the
//! terminal-state rule.
//!
//! A store reports a failure of its storage (locked, full, I/O, damaged)
//! with [`storage_error`], so that the task manager retries it
//! ([`StoreRetry`]) and never reports it as a task-state error.

mod fault;
#[cfg(test)]
pub(crate) mod marked;
mod memory;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) mod sql;
mod unreadable;

pub use fault::{STORAGE_FAULT, StorageFault, StoreRetry, storage_error, storage_fault};
pub use memory::{MemoryStore, MemoryStoreConfig};
/// The SQLite driver of [`SqliteStore::with_writer`]'s connection.
#[cfg(feature = "sqlite")]
pub use rusqlite;
#[cfg(feature = "sqlite")]
pub use sql::lock::{HOLDER_PID, holder_pid};
#[cfg(feature = "postgres")]
pub use sql::postgres;
#[cfg(feature = "postgres")]
pub use sql::postgres::{PgEventBus, PostgresStore};
#[cfg(feature = "sqlite")]
pub use sql::sqlite::{SqliteOptions, SqliteStore, Synchronous};
pub use unreadable::{RecoveryScan, SetAside, UNREADABLE, is_unreadable, unreadable_error};

use agentwire_types::{
    A2aError, A2aResult, Artifact, Message, Struct, Task, TaskPushNotificationConfig, TaskState,
    TaskStatus, Timestamp,
};
use async_trait::async_trait;
use std::sync::Arc;

/// Who may see a task: the authenticated principal and the tenant it was
/// created under. Anonymous callers share the empty owner.
///
/// The principals of [`crate::AuthSchemes`] are namespaced by the scheme
/// that authenticated them, so that one name in two schemes is two owners:
/// `apikey:NAME` (an API key), `jwt:ISSUER#NAME` (a JWT: its `iss` claim,
/// empty without one, and the claim naming the caller, `sub` by default),
/// `mtls:NAME` (a client certificate). Before namespaces, the bare name
/// was the principal: a task stored under a bare name is still seen by
/// every principal of that name (see [`Owner::sees`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Owner {
    /// The tenant (routing identifier) of the request, or empty.
    pub tenant: String,
    /// The authenticated principal, or empty for anonymous callers.
    pub principal: String,
}

/// The namespace of the principals authenticated by an API key.
pub const API_KEY_NAMESPACE: &str = "apikey:";
/// The namespace of the principals authenticated by a JWT.
pub const JWT_NAMESPACE: &str = "jwt:";
/// The namespace of the principals authenticated by a client certificate.
pub const MTLS_NAMESPACE: &str = "mtls:";

impl Owner {
    /// The bare name of a namespaced principal (`alice` for
    /// `apikey:alice` or `jwt:https://id.example#alice`): how tasks were
    /// owned before principals had namespaces. `None` for anonymous
    /// callers and for principals without a namespace (those of a custom
    /// [`crate::Authenticator`]).
    pub fn bare_name(&self) -> Option<&str> {
        let p = &self.principal;
        if let Some(name) = p.strip_prefix(API_KEY_NAMESPACE) {
            return Some(name);
        }
        if let Some(name) = p.strip_prefix(MTLS_NAMESPACE) {
            return Some(name);
        }
        // The issuer is a URL, which has no fragment: the name starts
        // after the first `#`.
        p.strip_prefix(JWT_NAMESPACE)
            .and_then(|rest| rest.split_once('#'))
            .map(|(_, name)| name)
    }

    /// The owner of the tasks this caller created before principals had
    /// namespaces: the same tenant, the bare name (see [`Self::bare_name`]).
    pub fn legacy(&self) -> Option<Owner> {
        let name = self.bare_name().filter(|n| !n.is_empty())?;
        let legacy = Owner {
            tenant: self.tenant.clone(),
            principal: name.to_owned(),
        };
        // A name that looks namespaced (a JWT whose `sub` is
        // `apikey:alice`) is another principal's, never a bare one.
        legacy.bare_name().is_none().then_some(legacy)
    }

    /// Whether this caller sees a task owned by `stored`: its own, or one
    /// stored under its bare name by a version before namespaces (such a
    /// task does not say which scheme authenticated its creator, so every
    /// principal of that name sees it, as before).
    pub fn sees(&self, stored: &Owner) -> bool {
        if self == stored {
            return true;
        }
        self.legacy().is_some_and(|legacy| legacy == *stored)
    }
}

/// The tasks a store removed on its own account, by why, since it started
/// (see [`TaskStore::expired_tasks`]). The tasks removed by
/// [`TaskStore::purge_terminal_older_than`] are not in it: its caller
/// counts what it returns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExpiredTasks {
    /// Finished tasks removed after their time to live.
    pub finished_ttl: u64,
    /// Open tasks removed after going unchanged for their time to live.
    pub open_ttl: u64,
    /// Finished tasks removed before their time to make room.
    pub evicted: u64,
}

/// One change to a task, as produced by an agent or by the runtime.
#[derive(Debug, Clone)]
pub enum TaskUpdate {
    /// A new status. Its message, if any, is also appended to the history.
    Status {
        /// The new status.
        status: TaskStatus,
        /// Event metadata.
        metadata: Option<Struct>,
    },
    /// A whole artifact or a chunk of one.
    Artifact {
        /// The artifact (or chunk).
        artifact: Artifact,
        /// Append the parts to the artifact with the same id.
        append: bool,
        /// This is the last chunk of the artifact.
        last_chunk: bool,
        /// Event metadata.
        metadata: Option<Struct>,
    },
    /// A message from the client continuing the task (history only).
    UserMessage(Message),
}

/// Applies an update to a task: the task state machine.
///
/// - Nothing changes a task in a terminal state (`UnsupportedOperation`).
/// - A status replaces the status; its message joins the history.
/// - An artifact with `append` adds its parts to the artifact with the same
///   id (or starts it); without `append` it replaces (or adds) the artifact.
///
/// Every status and every artifact update is one step of the task's
/// generation (A2A v1.1 draft, section 3.2.7): `generation` grows by one;
/// a message from the client (history only, no event) leaves it.
pub fn apply_update(task: &mut Task, update: TaskUpdate) -> A2aResult<()> {
    check_open(task)?;
    let step = !matches!(update, TaskUpdate::UserMessage(_));
    match update {
        TaskUpdate::Status { status, .. } => {
            if status.state() == TaskState::Unspecified {
                return Err(A2aError::invalid_params(
                    "status.state",
                    "must not be TASK_STATE_UNSPECIFIED",
                ));
            }
            if let Some(m) = &status.message {
                task.history.push(Message::clone(m));
            }
            task.status = Some(status);
        }
        TaskUpdate::Artifact {
            artifact, append, ..
        } => apply_artifact(task, artifact, append),
        TaskUpdate::UserMessage(m) => task.history.push(m),
    }
    if step {
        task.generation += 1;
    }
    Ok(())
}

/// The artifact step of [`apply_update`], without the check that the task
/// is open: an artifact with `append` adds its parts to the artifact with
/// the same id (or starts it); without it, it replaces (or adds) the
/// artifact. (The SQL stores replay the artifact updates they logged,
/// each checked when it was written, with it.)
pub(crate) fn apply_artifact(task: &mut Task, artifact: Artifact, append: bool) {
    let existing = task
        .artifacts
        .iter_mut()
        .find(|a| a.artifact_id == artifact.artifact_id);
    match (existing, append) {
        (Some(a), true) => merge_chunk(a, artifact),
        (Some(a), false) => *a = artifact,
        (None, _) => {
            // Most tasks have one artifact: no room for four.
            if task.artifacts.capacity() == 0 {
                task.artifacts.reserve_exact(1);
            }
            task.artifacts.push(artifact);
        }
    }
}

/// Refuses any change to a task in a terminal state.
pub(crate) fn check_open(task: &Task) -> A2aResult<()> {
    let current = task.state();
    if current.is_terminal() {
        return Err(closed_error(&task.id, current));
    }
    Ok(())
}

/// The error for an update to a task in the terminal state `state`.
pub(crate) fn closed_error(id: &str, state: TaskState) -> A2aError {
    A2aError::unsupported(format!(
        "Task {id} is {} and can no longer change",
        state.short_name()
    ))
    .with_metadata("taskId", id.to_owned())
}

/// Appends a chunk to an artifact: its parts follow the existing ones; a
/// name or description fills an empty one; extensions and metadata merge.
fn merge_chunk(a: &mut Artifact, chunk: Artifact) {
    a.parts.extend(chunk.parts);
    if a.name.is_empty() {
        a.name = chunk.name;
    }
    if a.description.is_empty() {
        a.description = chunk.description;
    }
    for ext in chunk.extensions {
        if !a.extensions.contains(&ext) {
            a.extensions.push(ext);
        }
    }
    if let Some(meta) = chunk.metadata {
        a.metadata
            .get_or_insert_with(Default::default)
            .fields
            .extend(meta.fields);
    }
}

/// Where a write went in a store's event log (stores that keep one: a
/// [`PostgresStore`] built with [`PostgresStore::with_event_log`]).
/// Positions grow with every event; within one task they follow the order
/// in which the writes were applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogSpan {
    /// The position of the task's last event before this write (0: none).
    pub before: i64,
    /// The position of this write's event (`before` when it wrote none, as
    /// for [`TaskUpdate::UserMessage`]).
    pub after: i64,
}

/// What a push notification's body is, as the client that registered the
/// config reads it: the protocol version of the registration, kept with
/// the config.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum PushFormat {
    /// A2A 1.0: each event as a `StreamResponse` (ProtoJSON).
    #[default]
    V1,
    /// A2A 0.3: the whole task after each event, in its 0.3 JSON form
    /// (`kind: "task"`), as the 0.3 specification and SDKs post it.
    V03,
}

impl PushFormat {
    /// The protocol version it names, as the SQL stores keep it
    /// (`"1.0"`, `"0.3"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V1 => "1.0",
            Self::V03 => "0.3",
        }
    }

    /// The format named by [`PushFormat::as_str`]; anything else (a row
    /// written before the format was kept) is 1.0.
    pub fn from_version(v: &str) -> Self {
        match v {
            "0.3" => Self::V03,
            _ => Self::V1,
        }
    }
}

/// A push-notification config as a store keeps it: the config and the
/// form its notifications take.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredPushConfig {
    /// The config (its `taskId` and `id` are the key).
    pub config: TaskPushNotificationConfig,
    /// The body of its notifications.
    pub format: PushFormat,
}

impl StoredPushConfig {
    /// A config whose notifications take the 1.0 form.
    pub fn v1(config: TaskPushNotificationConfig) -> Self {
        Self {
            config,
            format: PushFormat::V1,
        }
    }
}

/// A stored task with its owner.
#[derive(Debug, Clone)]
pub struct StoredTask {
    /// Who may see it.
    pub owner: Owner,
    /// The task.
    pub task: Task,
}

/// Filters and page of a task listing (already validated).
#[derive(Debug, Clone, Default)]
pub struct TaskQuery {
    /// Only tasks of this context.
    pub context_id: Option<String>,
    /// Only tasks in this state.
    pub state: Option<TaskState>,
    /// Only tasks whose status timestamp is at or after this time.
    pub status_after: Option<Timestamp>,
    /// Page size (1..=100).
    pub page_size: usize,
    /// Continue after this cursor.
    pub cursor: Option<Cursor>,
    /// Keep at most this many history messages per task.
    pub history_length: Option<usize>,
    /// Include artifacts.
    pub include_artifacts: bool,
}

/// A position in the listing order (status timestamp descending, then id
/// descending), encoded as an opaque page token.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cursor {
    /// Status timestamp in milliseconds.
    pub millis: i64,
    /// Task id.
    pub id: String,
}

impl Cursor {
    /// The opaque token form.
    pub fn encode(&self) -> String {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(format!("{}:{}", self.millis, self.id))
    }

    /// Parses a token produced by [`Cursor::encode`].
    pub fn decode(token: &str) -> Option<Self> {
        use base64::Engine;
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token)
            .ok()?;
        let raw = String::from_utf8(raw).ok()?;
        let (millis, id) = raw.split_once(':')?;
        // Only an id a task could have (a forged one could hold what a
        // store cannot compare, e.g. U+0000 on PostgreSQL).
        if agentwire_types::limits::id_problem(id).is_some() {
            return None;
        }
        Some(Self {
            millis: millis.parse().ok()?,
            id: id.to_owned(),
        })
    }

    /// The sort key of a task.
    pub fn of(task: &Task) -> Self {
        Self {
            millis: task.status_timestamp().map_or(0, |t| t.as_millis()),
            id: task.id.clone(),
        }
    }
}

/// One page of tasks.
#[derive(Debug, Clone, Default)]
pub struct TaskPage {
    /// The tasks, most recently updated first.
    pub tasks: Vec<Task>,
    /// Where the next page starts, if there is one.
    pub next: Option<Cursor>,
    /// How many tasks match the filters in all.
    pub total: usize,
}

/// What a store's update did: one outcome for every store.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Updated {
    /// The task's state after the update.
    pub state: TaskState,
    /// Where the update's event went in the store's event log, for a store
    /// that keeps one (see [`LogSpan`]); `None` otherwise. The task manager
    /// uses it to order the events of other replicas with its own.
    pub log: Option<LogSpan>,
    /// The task as the update left it, when the update ended the agent's
    /// turn (a terminal or interrupted state) and the store can hand it
    /// over without a copy (the in-memory store does); `None` otherwise.
    /// The request waiting for the end of the turn answers with it instead
    /// of reading the store again.
    pub task: Option<Arc<Task>>,
    /// The task's generation after the update (A2A v1.1 draft): what its
    /// event carries. 0 when the store does not say (the event then
    /// carries none).
    pub generation: i64,
}

impl Updated {
    /// The outcome of an update that left the task in `state`, without an
    /// event log position or a task.
    pub fn new(state: TaskState) -> Self {
        Self {
            state,
            log: None,
            task: None,
            generation: 0,
        }
    }

    /// With the task's generation after the update.
    pub fn at_generation(mut self, generation: i64) -> Self {
        self.generation = generation;
        self
    }

    /// With the position of the update's event in the store's event log.
    pub fn logged(mut self, span: LogSpan) -> Self {
        self.log = Some(span);
        self
    }

    /// With the task as the update left it (see [`Updated::task`]).
    pub fn with_task(mut self, task: Arc<Task>) -> Self {
        if self.generation == 0 {
            self.generation = task.generation;
        }
        self.task = Some(task);
        self
    }
}

/// An optional capability of a [`TaskStore`]: the same operations, answered
/// at once in the calling thread, without a future (no I/O, no waiting).
///
/// A store offers it through [`TaskStore::immediate`]. The task manager
/// then calls these methods instead of the [`TaskStore`] ones; each must
/// give exactly the answer its [`TaskStore`] counterpart would. The
/// in-memory store offers it; stores that do I/O (databases) must not,
/// since these calls block the thread. (Why it exists: the project's
/// `docs/performance.md`.)
pub trait ImmediateStore: Send + Sync {
    /// [`TaskStore::create`], at once.
    fn create_now(&self, owner: &Owner, task: Task) -> A2aResult<()>;

    /// [`Self::create_now`] with a task the caller keeps too (the answer
    /// of the request that wrote it): a store that can share it keeps this
    /// one instead of a copy. The default stores a copy.
    fn create_shared_now(&self, owner: &Owner, task: &Arc<Task>) -> A2aResult<()> {
        self.create_now(owner, Task::clone(task))
    }

    /// [`TaskStore::update`], at once.
    fn update_now(&self, task_id: &str, update: TaskUpdate) -> A2aResult<Updated>;

    /// [`TaskStore::get`], at once.
    fn get_now(
        &self,
        task_id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<StoredTask>>;

    /// The whole task, shared with the store where it can be (a copy
    /// otherwise): [`TaskStore::get`] without a history limit.
    fn get_shared(&self, task_id: &str) -> A2aResult<Option<Arc<Task>>> {
        Ok(self.get_now(task_id, None)?.map(|s| Arc::new(s.task)))
    }
}

/// What a [`QueuedStore`] calls with the outcome of a queued update.
pub type QueuedDone = Box<dyn FnOnce(A2aResult<Updated>) + Send>;

/// An optional capability of a [`TaskStore`]: a task's updates queued
/// without waiting for each to be committed, so that the chunks of an
/// artifact streamed by an agent share commits (group commit) instead of
/// waiting for one commit each.
///
/// A store offers it through [`TaskStore::queued`], when it applies its
/// writes in the order they are sent (one writer). The task manager queues
/// artifact chunks through it and publishes each chunk's event from `done`,
/// once the chunk is committed: nothing is told before it is durable. The
/// store must:
///
/// - apply the queued updates of a task in the order they were queued, and
///   call their `done` in that order, each once, after the commit of the
///   update (with its error if it or its commit failed); `done` is called
///   on whatever thread the store answers on and must not block;
/// - once a queued update of a task failed, refuse that task's later
///   queued updates without applying them (with a storage error), until a
///   [`TaskStore::update`] of the task: the task manager writes the
///   refused updates again that way, in order, before anything else of the
///   task.
pub trait QueuedStore: Send + Sync {
    /// Queues `update` of `task_id`; `done` gets its outcome. An error
    /// here means it was not queued (and `done` is not called).
    fn queue_update(&self, task_id: &str, update: TaskUpdate, done: QueuedDone) -> A2aResult<()>;
}

/// Persistence of tasks and push-notification configs.
///
/// Implementations must apply updates with [`apply_update`] atomically per
/// task and keep tasks visible only to their [`Owner`]. The runtime
/// serialises the updates of one task, so a store needs no ordering of its
/// own beyond atomicity.
#[async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// This store's [`ImmediateStore`] capability, if it has one (it
    /// answers without I/O). The default has none, which is right for any
    /// store that does I/O.
    fn immediate(&self) -> Option<&dyn ImmediateStore> {
        None
    }

    /// This store's [`QueuedStore`] capability, if it has one. The default
    /// has none: every update is awaited.
    fn queued(&self) -> Option<&dyn QueuedStore> {
        None
    }

    /// What kind of store this is, as the metrics label it (`store` in
    /// `a2a_store_operation_duration_seconds`): `memory`, `sqlite`,
    /// `postgres`, or `custom`. One of a few fixed names, never data. The
    /// project's stores name themselves; the default, for a store of
    /// yours, is `custom`.
    fn kind(&self) -> &'static str {
        "custom"
    }

    /// Whether the store has room now for a message of about `bytes` bytes
    /// (encoded), starting a new task when `new_task`: a store with bounds
    /// refuses ([`ErrorKind::Unavailable`]) before the agent is started,
    /// rather than fail the task when it is written. The default: always.
    ///
    /// [`ErrorKind::Unavailable`]: agentwire_types::ErrorKind::Unavailable
    fn check_room(&self, bytes: usize, new_task: bool) -> A2aResult<()> {
        let _ = (bytes, new_task);
        Ok(())
    }

    /// The tasks this store removed on its own (expired, or evicted to make
    /// room), for the metrics. The default: none (a store that removes
    /// nothing but what [`Self::purge_terminal_older_than`] is asked to).
    fn expired_tasks(&self) -> ExpiredTasks {
        ExpiredTasks::default()
    }

    /// Stores a new task. Fails if the id exists. For a store that keeps
    /// an event log, where the creation went in it (`None` otherwise): the
    /// PostgreSQL store logs no event for a new task (nothing can follow a
    /// task before it exists), so its span is empty, at 0.
    async fn create(&self, owner: &Owner, task: Task) -> A2aResult<Option<LogSpan>>;

    /// Applies an update (with [`apply_update`]) and says what it did.
    async fn update(&self, task_id: &str, update: TaskUpdate) -> A2aResult<Updated>;

    /// The task with its owner (`None` when unknown). `history_length`
    /// limits the history as in spec 3.2.4.
    async fn get(
        &self,
        task_id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<StoredTask>>;

    /// A page of the owner's tasks.
    async fn list(&self, owner: &Owner, query: &TaskQuery) -> A2aResult<TaskPage>;

    /// Stores (creates or replaces) a push-notification config, with the
    /// form of its notifications.
    async fn put_push_config(&self, config: &StoredPushConfig) -> A2aResult<()>;

    /// A push-notification config of a task.
    async fn get_push_config(&self, task_id: &str, id: &str)
    -> A2aResult<Option<StoredPushConfig>>;

    /// All push-notification configs of a task, in the order they were
    /// first stored.
    async fn list_push_configs(&self, task_id: &str) -> A2aResult<Vec<StoredPushConfig>>;

    /// Deletes a push-notification config; true when it existed.
    async fn delete_push_config(&self, task_id: &str, id: &str) -> A2aResult<bool>;

    /// Retention: deletes the tasks in a terminal state that last changed
    /// more than `age` ago, with their push-notification configs, and
    /// returns how many tasks were deleted. Call it from a timer.
    ///
    /// The durable stores implement it; the default deletes nothing, which
    /// suits stores that expire tasks on their own (the memory store evicts
    /// finished tasks after its TTL).
    async fn purge_terminal_older_than(&self, age: std::time::Duration) -> A2aResult<u64> {
        let _ = age;
        Ok(0)
    }

    /// Tasks whose agent was at work on them (`TASK_STATE_SUBMITTED` or
    /// `TASK_STATE_WORKING`), with their history: what a server finds after
    /// a crash. Interrupted tasks are not included: they wait for the client,
    /// not for an agent. The default finds none, which suits stores that do
    /// not survive the process.
    async fn unfinished(&self) -> A2aResult<Vec<StoredTask>> {
        Ok(Vec::new())
    }

    /// Crash recovery's read: the tasks of [`TaskStore::unfinished`], and
    /// the unfinished rows that cannot be read (damaged, or written by a
    /// program this one cannot read), which the store has set aside so
    /// that they are not met again (see [`SetAside`]). One unreadable row
    /// never fails the whole recovery. The default: `unfinished`, nothing
    /// set aside (a store that decodes nothing it keeps).
    async fn unfinished_for_recovery(&self) -> A2aResult<RecoveryScan> {
        Ok(RecoveryScan {
            tasks: self.unfinished().await?,
            set_aside: Vec::new(),
        })
    }

    /// The owner of a task the store keeps but cannot read (see
    /// [`is_unreadable`]), so that only its owner is told it is
    /// unreadable (anyone else: `TaskNotFound`). `None` when the store has
    /// no such task. The default: `None`.
    async fn owner_of(&self, task_id: &str) -> A2aResult<Option<Owner>> {
        let _ = task_id;
        Ok(None)
    }

    /// How many unreadable task rows the store has met since it was opened
    /// (set aside by crash recovery, skipped in listings, refused to
    /// `GetTask`): the metric `a2a_store_unreadable_rows_total`. The
    /// default: 0.
    fn unreadable_rows(&self) -> u64 {
        0
    }

    /// The id and owner of every open task the store keeps (submitted,
    /// working, input-required, auth-required): what the bound on each
    /// caller's open tasks (`HandlerConfig::max_open_tasks_per_caller`)
    /// counts again when a server starts on a store of a previous run.
    /// The default: none, which suits stores that do not survive the
    /// process.
    async fn open_task_owners(&self) -> A2aResult<Vec<(String, Owner)>> {
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(state: TaskState) -> Task {
        Task {
            id: "t".into(),
            context_id: "c".into(),
            status: Some(TaskStatus::new(state)),
            ..Default::default()
        }
    }

    fn chunk(id: &str, text: &str, append: bool) -> TaskUpdate {
        TaskUpdate::Artifact {
            artifact: Artifact::text("a", text).with_id(id),
            append,
            last_chunk: false,
            metadata: None,
        }
    }

    #[test]
    fn chunks_merge_into_one_artifact() {
        let mut t = task(TaskState::Working);
        apply_update(&mut t, chunk("a1", "one ", false)).unwrap();
        for _ in 0..99 {
            apply_update(&mut t, chunk("a1", "x", true)).unwrap();
        }
        assert_eq!(t.artifacts.len(), 1);
        assert_eq!(t.artifacts[0].parts.len(), 100);
        apply_update(&mut t, chunk("a1", "replaced", false)).unwrap();
        assert_eq!(t.artifacts[0].text_content(), "replaced");
        apply_update(&mut t, chunk("a2", "second", true)).unwrap();
        assert_eq!(t.artifacts.len(), 2);
    }

    #[test]
    fn terminal_tasks_are_immutable() {
        for state in [
            TaskState::Completed,
            TaskState::Failed,
            TaskState::Canceled,
            TaskState::Rejected,
        ] {
            let mut t = task(state);
            let before = t.clone();
            let err = apply_update(
                &mut t,
                TaskUpdate::Status {
                    status: TaskStatus::new(TaskState::Working),
                    metadata: None,
                },
            )
            .unwrap_err();
            assert_eq!(err.kind, agentwire_types::ErrorKind::UnsupportedOperation);
            assert!(apply_update(&mut t, chunk("a", "x", false)).is_err());
            assert_eq!(t, before);
        }
    }

    #[test]
    fn status_messages_join_history() {
        let mut t = task(TaskState::Working);
        let status = TaskStatus::new(TaskState::InputRequired)
            .with_message(Message::agent_text("which version?"));
        apply_update(
            &mut t,
            TaskUpdate::Status {
                status,
                metadata: None,
            },
        )
        .unwrap();
        apply_update(&mut t, TaskUpdate::UserMessage(Message::user_text("22"))).unwrap();
        assert_eq!(t.state(), TaskState::InputRequired);
        assert_eq!(t.history.len(), 2);
    }

    #[test]
    fn cursor_round_trip() {
        let c = Cursor {
            millis: 1234,
            id: "a:b".into(),
        };
        assert_eq!(Cursor::decode(&c.encode()), Some(c));
        assert_eq!(Cursor::decode("!!"), None);
    }
}
