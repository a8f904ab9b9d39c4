//! PostgreSQL: its [`Dialect`] (connections, transactions, row locks, the
//! few pieces of SQL that differ, the mapping of errors), the PostgreSQL
//! task store, durable tasks shared by several replicas, with its event
//! log, and the event bus that lets the replicas follow each other's tasks
//! ([`PgEventBus`], [`connect_cluster`]).

use std::sync::Arc;
use std::time::Duration;

use agentwire_types::{
    A2aError, A2aResult, StreamResponse, Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent,
};
use prost::Message as _;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};

use crate::store::sql::driver::{self, Dialect, Stmt};
use crate::store::sql::{self, EventLog, Stored, Tables, TaskRow};
use crate::store::{Owner, TaskUpdate};

mod batch;
#[doc(hidden)]
pub mod testing;
pub use crate::cluster::postgres::{PgEventBus, connect_cluster};

/// The `NOTIFY` channel announcing new events (`task_id seq origin`).
pub const EVENTS_CHANNEL: &str = "a2a_events";
/// The `NOTIFY` channel asking for a task's agent to stop (`task_id`).
pub const CANCEL_CHANNEL: &str = "a2a_cancel";
/// The `NOTIFY` channel saying a task's push notification configs changed
/// (`task_id`).
pub const PUSH_CONFIGS_CHANNEL: &str = "a2a_push_configs";
/// `NOTIFY` payloads must stay under 8000 bytes; a longer one is not sent.
pub(crate) const MAX_PAYLOAD: usize = 7900;
/// Longest replica id.
const MAX_REPLICA_ID: usize = 128;

/// Connections of the pool made by [`PostgresStore::connect`].
const DEFAULT_CONNECTIONS: u32 = 16;

/// The PostgreSQL dialect.
#[derive(Debug, Clone)]
pub(crate) struct Pg;

driver::sqlx_driver!(sqlx::Postgres, PgRow, PgPool);

impl Dialect for Pg {
    type Row = PgRow;
    type Error = sqlx::Error;
    type Pool = PgPool;
    type On<'p> = &'p PgPool;
    type Tx = sqlx::Transaction<'static, sqlx::Postgres>;

    // Several replicas write at once: a transaction locks the rows it goes
    // on to update, and a purge or a claim skips the rows another one holds.
    const LOCK_ROWS: &'static str = " FOR UPDATE";
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    const NULL_BLOB: &'static str = "NULL::bytea";
    const FALSE: &'static str = "false";
    const TERMINAL: &'static str = "state IN (3, 4, 5, 7)";
    const OPEN: &'static str = "state IN (1, 2, 6, 8)";
    const TASK_TABLES: &'static [&'static str] =
        &["a2a_push_configs", "a2a_task_events", "a2a_artifact_chunks"];
    // Every write goes through the batches of `batch.rs`, which keep them.
    const COUNTED: bool = true;
    const COUNT_SHARDS: u32 = 64;

    fn on(pool: &PgPool) -> &PgPool {
        pool
    }

    async fn begin(pool: &PgPool) -> Result<Self::Tx, sqlx::Error> {
        pool.begin().await
    }

    async fn commit(tx: Self::Tx) -> Result<(), sqlx::Error> {
        tx.commit().await
    }

    fn error(area: &str, what: &str, e: sqlx::Error) -> A2aError {
        driver::internal_error(area, what, &e, super::fault::fault_of(&e))
    }

    #[cfg(any(feature = "sqlite", test))]
    fn is_unique_violation(e: &sqlx::Error) -> bool {
        driver::is_sqlx_unique_violation(e)
    }
}

/// The error of a failed task store statement (for the event bus).
pub(crate) fn db_error(what: &str, e: sqlx::Error) -> A2aError {
    Pg::error("task store", what, e)
}

/// A [`TaskStore`] in PostgreSQL, for running several replicas of a server
/// behind a load balancer: every replica sees every task.
///
/// The tables (`a2a_tasks`, `a2a_push_configs`) are created or upgraded
/// when the store connects (migrations embedded in the binary, run under
/// PostgreSQL's advisory lock, so replicas starting together are safe). They
/// live in the first schema of the connection's `search_path`; when the
/// database also holds an application that runs its own sqlx migrations,
/// give the store a schema of its own (for example
/// `postgres://.../db?options=-csearch_path%3Da2a` after
/// `CREATE SCHEMA a2a`), as both would share one `_sqlx_migrations` table.
///
/// Two replicas never both apply conflicting updates to one task: an
/// update reads the task with its version, applies [`apply_update`] and
/// writes it back only if the version is unchanged (`UPDATE ... WHERE
/// version = $v`); on a conflict it redoes the whole step in a transaction
/// holding the row lock (`SELECT ... FOR UPDATE`), so it can neither lose
/// the other update nor starve.
///
/// With an event log ([`PostgresStore::with_event_log`], as
/// [`connect_cluster`] sets up), every update also records its event
/// (`StreamResponse`, protobuf) in `a2a_task_events`, in the same
/// statement as the task write, and announces it with `NOTIFY a2a_events`
/// once committed (batched: see the figures in `benches/README.md`);
/// [`PgEventBus`] reads them for the other replicas. A new task records
/// none: nothing can follow a task before it exists.
///
/// ```no_run
/// use agentwire_server::store::PostgresStore;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> agentwire_server::A2aResult<()> {
/// let store = PostgresStore::connect("postgres://a2a:secret@127.0.0.1:5432/a2a").await?;
/// # let _ = store;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PostgresStore {
    tables: Tables<Pg>,
    /// The task writes' batches (group commit, `batch.rs`).
    writers: Arc<batch::Writers>,
    /// With an event log: this replica's id (the events' origin).
    pub(crate) log: Option<Arc<str>>,
    /// With an event log: announces the written events.
    announcer: Option<Arc<Announcer>>,
}

/// Announces written events (`NOTIFY a2a_events`) after their writes
/// committed, several per statement. A `NOTIFY` inside a write would
/// serialise the commits of all writers (PostgreSQL holds a database-wide
/// lock while a notifying transaction commits); batched outside them, the
/// writes commit concurrently and one lock is taken per batch. A notice
/// lost in a crash between a write and its announcement is like any lost
/// notice: the other replicas catch up on the next one or on a resync.
#[derive(Debug)]
struct Announcer {
    pool: PgPool,
    origin: Arc<str>,
    /// Started with the first announcement (a write runs in a runtime), and
    /// again if its task went away with the runtime that ran it.
    tx: parking_lot::Mutex<Option<tokio::sync::mpsc::UnboundedSender<(String, i64)>>>,
}

/// Most announcements in one statement.
const ANNOUNCE_BATCH: usize = 500;

impl Announcer {
    fn announce(&self, task_id: &str, seq: i64) {
        if !notifiable(task_id, &self.origin) {
            return;
        }
        let mut slot = self.tx.lock();
        let tx = match slot.as_ref() {
            Some(tx) if !tx.is_closed() => tx,
            _ => {
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                tokio::spawn(announce_batches(
                    self.pool.clone(),
                    Arc::clone(&self.origin),
                    rx,
                ));
                slot.insert(tx)
            }
        };
        let _ = tx.send((task_id.to_owned(), seq));
    }
}

/// Sends what is queued, a batch per statement, until the store is gone.
async fn announce_batches(
    pool: PgPool,
    origin: Arc<str>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<(String, i64)>,
) {
    let mut payloads: Vec<String> = Vec::new();
    while let Some((task_id, seq)) = rx.recv().await {
        payloads.push(format!("{task_id} {seq} {origin}"));
        while payloads.len() < ANNOUNCE_BATCH {
            match rx.try_recv() {
                Ok((task_id, seq)) => payloads.push(format!("{task_id} {seq} {origin}")),
                Err(_) => break,
            }
        }
        let sent = sqlx::query("SELECT count(pg_notify($1, p)) FROM unnest($2::text[]) AS p")
            .bind(EVENTS_CHANNEL)
            .bind(&payloads)
            .execute(&pool)
            .await;
        if let Err(e) = sent {
            tracing::warn!(error = %e, count = payloads.len(), "event log: cannot announce events");
        }
        payloads.clear();
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db`,
    /// with any of libpq's parameters such as `sslmode`) with a pool of 16
    /// connections, and brings the schema up to date.
    pub async fn connect(url: &str) -> A2aResult<Self> {
        let options: PgConnectOptions = url
            .parse()
            .map_err(|e| A2aError::internal(format!("task store: bad PostgreSQL URL: {e}")))?;
        Self::connect_with(
            PgPoolOptions::new().max_connections(DEFAULT_CONNECTIONS),
            options,
        )
        .await
    }

    /// Connects with explicit pool and connection options (pool size,
    /// timeouts, TLS, `search_path`...), and brings the schema up to date.
    pub async fn connect_with(pool: PgPoolOptions, options: PgConnectOptions) -> A2aResult<Self> {
        let pool = pool
            .connect_with(options)
            .await
            .map_err(|e| db_error("connecting to PostgreSQL", e))?;
        Self::from_pool(pool).await
    }

    /// A store on an existing pool; brings the schema up to date.
    pub async fn from_pool(pool: PgPool) -> A2aResult<Self> {
        let mut migrator = sqlx::migrate!("./migrations/postgres");
        // Tolerate other migrations recorded in the same table (an
        // application sharing the schema).
        migrator.set_ignore_missing(true);
        migrator.run(&pool).await.map_err(|e| {
            A2aError::internal(format!("task store: migrating the PostgreSQL schema: {e}"))
        })?;
        Ok(Self {
            writers: Arc::new(batch::Writers::new(pool.clone(), None)),
            tables: Tables::one_pool(pool),
            log: None,
            announcer: None,
        })
    }

    /// The connection pool.
    pub fn pool(&self) -> &PgPool {
        &self.tables.writer
    }

    /// Records every write's event in the event log (`a2a_task_events`),
    /// with `replica_id` as its origin, and announces it to the other
    /// replicas (`NOTIFY a2a_events`). `replica_id` must be unique among
    /// the replicas sharing the database (see [`crate::bus::new_replica_id`])
    /// and made of at most 128 non-blank characters.
    pub fn with_event_log(mut self, replica_id: &str) -> A2aResult<Self> {
        if replica_id.is_empty()
            || replica_id.len() > MAX_REPLICA_ID
            || replica_id.contains(char::is_whitespace)
        {
            return Err(A2aError::invalid_params(
                "replicaId",
                "a replica id is 1 to 128 characters without blanks",
            ));
        }
        let origin: Arc<str> = Arc::from(replica_id);
        let announcer = Arc::new(Announcer {
            pool: self.pool().clone(),
            origin: Arc::clone(&origin),
            tx: parking_lot::Mutex::new(None),
        });
        self.writers = Arc::new(batch::Writers::new(
            self.pool().clone(),
            Some(Arc::clone(&announcer)),
        ));
        self.announcer = Some(announcer);
        self.log = Some(origin);
        Ok(self)
    }

    /// The replica id of the event log, when there is one.
    pub fn replica_id(&self) -> Option<&str> {
        self.log.as_deref()
    }

    /// Deletes the logged events older than `age` (in batches; any task's:
    /// an event is only needed until every replica has fetched it, within
    /// seconds) and returns how many went. [`PgEventBus`] calls it
    /// periodically.
    pub async fn purge_events_older_than(&self, age: Duration) -> A2aResult<u64> {
        let cutoff = sql::purge_cutoff(age);
        let what = "purging logged events";
        let mut purged = 0;
        loop {
            let n = sqlx::query(
                "DELETE FROM a2a_task_events WHERE seq IN (SELECT seq FROM a2a_task_events \
                 WHERE created_at <= $1 ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED)",
            )
            .bind(cutoff)
            .bind(EVENT_PURGE_BATCH)
            .execute(self.pool())
            .await
            .map_err(|e| db_error(what, e))?
            .rows_affected();
            purged += n;
            if n < EVENT_PURGE_BATCH as u64 {
                return Ok(purged);
            }
        }
    }
}

/// The event a write records: the task for a new one, the status or
/// artifact event of an update (a user message has none). The same as the
/// task manager publishes.
fn update_event(
    task_id: &str,
    context_id: &str,
    update: &TaskUpdate,
    generation: i64,
) -> Option<StreamResponse> {
    match update {
        TaskUpdate::Status { status, metadata } => Some(
            TaskStatusUpdateEvent {
                generation,
                task_id: task_id.to_owned(),
                context_id: context_id.to_owned(),
                status: Some(status.clone()),
                metadata: metadata.clone(),
            }
            .into(),
        ),
        TaskUpdate::Artifact {
            artifact,
            append,
            last_chunk,
            metadata,
        } => Some(
            TaskArtifactUpdateEvent {
                generation,
                task_id: task_id.to_owned(),
                context_id: context_id.to_owned(),
                artifact: Some(artifact.clone()),
                append: *append,
                last_chunk: *last_chunk,
                metadata: metadata.clone(),
            }
            .into(),
        ),
        TaskUpdate::UserMessage(_) => None,
    }
}

/// Whether an announcement of this task's events fits a `NOTIFY` payload.
fn notifiable(task_id: &str, origin: &str) -> bool {
    let fits = task_id.len() + origin.len() + 24 <= MAX_PAYLOAD;
    if !fits {
        tracing::warn!(
            task = %task_id.get(..64).unwrap_or(task_id),
            "task id too long to announce its events to other replicas"
        );
    }
    fits
}

/// How many logged events one purge statement deletes at most.
const EVENT_PURGE_BATCH: i64 = 5000;

/// The event log: each task write records its event in the same statement
/// and announces it once committed.
impl<D: Dialect> EventLog<D> for Announcer {
    fn update_event(
        &self,
        task_id: &str,
        context_id: &str,
        update: &TaskUpdate,
        generation: i64,
    ) -> Option<Vec<u8>> {
        update_event(task_id, context_id, update, generation).map(|e| e.encode_to_vec())
    }

    fn append<'a>(
        &'a self,
        task_id: &'a str,
        chunk: &'a [u8],
        now: i64,
        event: &'a [u8],
    ) -> Stmt<'a> {
        // The chunk is inserted holding the task's row (as a task write
        // does), so its event takes its place in the task's order.
        let mut s = Stmt::new(sql::append_query::<D>("WITH c AS ("))
            .arg(chunk)
            .arg(task_id);
        s.push(
            " RETURNING task_id), e AS (INSERT INTO a2a_task_events \
             (task_id, origin, event, created_at) SELECT task_id, ",
        )
        .bind(&*self.origin)
        .push(", ")
        .bind(event)
        .push(", ")
        .bind(now)
        .push(
            " FROM c RETURNING seq) SELECT (SELECT COALESCE(max(s.seq), 0) \
             FROM a2a_task_events s WHERE s.task_id = $2) AS before, e.seq AS after FROM e",
        );
        s
    }

    fn write<'a>(
        &'a self,
        new: &'a TaskRow,
        old: &Stored,
        now: i64,
        expected_version: Option<i64>,
        event: Option<&'a [u8]>,
    ) -> Stmt<'a> {
        let origin = &*self.origin;
        let mut s = sql::update_query("WITH u AS (", new, old, now, expected_version, Some(origin));
        s.push(" RETURNING id)");
        let before = |s: &mut Stmt<'a>| {
            s.push(
                "(SELECT COALESCE(max(s.seq), 0) FROM a2a_task_events s \
                 WHERE s.task_id = ",
            )
            .bind(new.id.as_str())
            .push(") AS before");
        };
        match event {
            Some(bytes) => {
                s.push(
                    ", e AS (INSERT INTO a2a_task_events (task_id, origin, event, created_at) \
                     SELECT id, ",
                )
                .bind(origin)
                .push(", ")
                .bind(bytes)
                .push(", ")
                .bind(now)
                .push(" FROM u RETURNING seq, task_id) SELECT ");
                before(&mut s);
                s.push(", e.seq AS after FROM e");
            }
            None => {
                s.push(" SELECT ");
                before(&mut s);
                s.push(", NULL::bigint AS after FROM u");
            }
        }
        s
    }

    fn announce(&self, task_id: &str, seq: i64) {
        Announcer::announce(self, task_id, seq);
    }
}

/// Reads go to the pool; the task writes (creations, updates, the purge)
/// to the writers' batches ([`batch`]), which share transactions.
#[async_trait::async_trait]
impl crate::store::TaskStore for PostgresStore {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    async fn create(&self, owner: &Owner, task: Task) -> A2aResult<Option<crate::store::LogSpan>> {
        self.writers.create(owner.clone(), task).await
    }

    async fn update(&self, task_id: &str, update: TaskUpdate) -> A2aResult<crate::store::Updated> {
        let id = task_id.to_owned();
        self.writers
            .write(move |b| Box::pin(async move { b.tables.update(&id, update, b.log()).await }))
            .await
    }

    async fn get(
        &self,
        task_id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<crate::store::StoredTask>> {
        self.tables.get(task_id, history_length).await
    }

    async fn list(
        &self,
        owner: &Owner,
        query: &crate::store::TaskQuery,
    ) -> A2aResult<crate::store::TaskPage> {
        self.tables.list(owner, query).await
    }

    async fn put_push_config(&self, config: &crate::store::StoredPushConfig) -> A2aResult<()> {
        self.tables.put_push_config(config).await
    }

    async fn get_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> A2aResult<Option<crate::store::StoredPushConfig>> {
        self.tables.get_push_config(task_id, id).await
    }

    async fn list_push_configs(
        &self,
        task_id: &str,
    ) -> A2aResult<Vec<crate::store::StoredPushConfig>> {
        self.tables.list_push_configs(task_id).await
    }

    async fn delete_push_config(&self, task_id: &str, id: &str) -> A2aResult<bool> {
        self.tables.delete_push_config(task_id, id).await
    }

    async fn unfinished(&self) -> A2aResult<Vec<crate::store::StoredTask>> {
        Ok(self.tables.unfinished().await?.0)
    }

    async fn unfinished_for_recovery(&self) -> A2aResult<crate::store::RecoveryScan> {
        let (tasks, unreadable) = self.tables.unfinished().await?;
        let mut set_aside = Vec::with_capacity(unreadable.len());
        for (owner, e) in unreadable {
            let task_id = e.metadata.get("taskId").cloned().unwrap_or_default();
            let (id, reason) = (task_id.clone(), e.message.clone());
            let moved = self
                .writers
                .write(move |b| Box::pin(async move { b.tables.set_aside(&id, &reason).await }))
                .await;
            let kept = match moved {
                Ok(_) => "table a2a_unreadable_tasks of the PostgreSQL database".to_owned(),
                Err(m) => format!("left in table a2a_tasks (setting it aside failed: {m})"),
            };
            set_aside.push(crate::store::SetAside {
                task_id,
                owner,
                reason: e.message,
                kept,
            });
        }
        Ok(crate::store::RecoveryScan { tasks, set_aside })
    }

    async fn owner_of(&self, task_id: &str) -> A2aResult<Option<Owner>> {
        self.tables.owner_of(task_id).await
    }

    async fn open_task_owners(&self) -> A2aResult<Vec<(String, Owner)>> {
        self.tables.open_task_owners().await
    }

    fn unreadable_rows(&self) -> u64 {
        self.tables
            .unreadable
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Deletes in batches of a few hundred tasks, each batch one store
    /// operation (rows another replica is purging are skipped, not waited
    /// for); `age` is measured by this process's clock against the time a
    /// task last changed (when it became terminal).
    async fn purge_terminal_older_than(&self, age: Duration) -> A2aResult<u64> {
        let cutoff = sql::purge_cutoff(age);
        let mut purged = 0;
        loop {
            let n = self
                .writers
                .write(move |b| Box::pin(async move { b.tables.purge_batch(cutoff).await }))
                .await?;
            purged += n;
            if n < sql::PURGE_BATCH as u64 {
                return Ok(purged);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::TestSchema;
    use super::*;
    use crate::store::{TaskStore, TaskUpdate};
    use agentwire_types::{Artifact, TaskState, TaskStatus};

    /// A schema of earlier migrations (before the task counts) is brought
    /// up to date when the store connects: the later migrations run,
    /// and a task written before it stays readable and writable (an
    /// artifact streams into it).
    #[tokio::test]
    #[ignore = "needs PostgreSQL (A2A_TEST_POSTGRES_URL)"]
    async fn a_schema_of_the_previous_migrations_is_upgraded() {
        let Some(schema) = TestSchema::create("a2a_upgrade", "the schema upgrade test").await
        else {
            return;
        };
        let dir =
            std::env::temp_dir().join(format!("a2a-pg-migrations-{}", agentwire_types::new_id()));
        std::fs::create_dir_all(&dir).unwrap();
        let current = sqlx::migrate!("./migrations/postgres");
        let all: Vec<_> = current.iter().collect();
        assert!(all.len() >= 2, "expected a migration after the first");
        // Every migration but the last, as files (same text, so the same
        // checksum as the embedded ones).
        // Before the task counts (which count the tasks there) and the
        // push configs' format (configs there are 1.0's).
        for m in all.iter().filter(|m| m.version < 20261208000000) {
            let name = format!("{}_{}.sql", m.version, m.description.replace(' ', "_"));
            std::fs::write(dir.join(name), m.sql.as_bytes()).unwrap();
        }
        let old = sqlx::migrate::Migrator::new(dir.as_path()).await.unwrap();
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .connect_with(schema.options.clone())
            .await
            .unwrap();
        old.run(&pool).await.unwrap();
        let tables = Tables::<Pg>::one_pool(pool.clone());
        let task = Task {
            id: "before".into(),
            context_id: "c".into(),
            status: Some(TaskStatus::new(TaskState::Working)),
            ..Default::default()
        };
        tables.create(&Owner::default(), task).await.unwrap();
        sqlx::query(
            "INSERT INTO a2a_push_configs (task_id, id, config) VALUES ('before', 'p', '')",
        )
        .execute(&pool)
        .await
        .unwrap();
        let store = PostgresStore::from_pool(pool.clone()).await.unwrap();
        let configs = store.list_push_configs("before").await.unwrap();
        assert_eq!(configs.len(), 1);
        assert_eq!(configs[0].format, crate::store::PushFormat::V1);
        for (i, text) in ["one ", "two"].into_iter().enumerate() {
            store
                .update(
                    "before",
                    TaskUpdate::Artifact {
                        artifact: Artifact::text("a", text).with_id("a1"),
                        append: i > 0,
                        last_chunk: i == 1,
                        metadata: None,
                    },
                )
                .await
                .unwrap();
        }
        let t = store.get("before", None).await.unwrap().unwrap().task;
        assert_eq!(t.artifacts[0].text_content(), "one two");
        assert_eq!(store.unfinished().await.unwrap().len(), 1);
        // The task stored before the upgrade is counted.
        let q = crate::store::TaskQuery {
            state: Some(TaskState::Working),
            page_size: 10,
            ..Default::default()
        };
        assert_eq!(store.list(&Owner::default(), &q).await.unwrap().total, 1);
        // Connecting again runs nothing new.
        drop(PostgresStore::from_pool(pool.clone()).await.unwrap());
        pool.close().await;
        let _ = std::fs::remove_dir_all(&dir);
        schema.drop_schema().await;
    }

    /// Crash recovery on a real database: a working task that cannot be
    /// read is moved to `a2a_unreadable_tasks` (kept, with its owner and
    /// why) and the readable one is found; a finished unreadable task stays
    /// where it is; a listing skips both, a read says each is unreadable,
    /// their owner is known; the next recovery meets nothing; every one is
    /// counted. The open tasks' owners are read for the admission count.
    #[tokio::test]
    #[ignore = "needs PostgreSQL (A2A_TEST_POSTGRES_URL)"]
    async fn unreadable_rows_are_set_aside_skipped_and_refused() {
        use prost::Message as _;
        let Some(mut schema) = TestSchema::create("a2a_aside", "the set-aside test").await else {
            return;
        };
        let store = schema.store(2).await;
        let owner = Owner {
            tenant: "t".into(),
            principal: "p".into(),
        };
        let task = |id: &str, state: TaskState| Task {
            id: id.into(),
            context_id: "c".into(),
            status: Some(TaskStatus::new(state)),
            ..Default::default()
        };
        for id in ["bad", "good", "done"] {
            store
                .create(&owner, task(id, TaskState::Submitted))
                .await
                .unwrap();
        }
        store
            .create(&owner, task("waiting", TaskState::InputRequired))
            .await
            .unwrap();
        // Metadata nested deeper than the decoder reads, as a version
        // before the nesting limit could store it.
        let mut deep = serde_json::json!(1);
        for _ in 0..120 {
            deep = serde_json::json!({ "a": deep });
        }
        let serde_json::Value::Object(deep) = deep else {
            unreachable!()
        };
        for (id, state) in [("bad", TaskState::Working), ("done", TaskState::Completed)] {
            let mut t = task(id, state);
            t.metadata = Some(agentwire_types::json::to_struct(deep.clone()));
            let update = format!(
                "UPDATE {}.a2a_tasks SET head = $1, state = $2 WHERE id = $3",
                schema.name
            );
            sqlx::query(&update)
                .bind(t.encode_to_vec())
                .bind(state as i32)
                .bind(id)
                .execute(&mut schema.admin)
                .await
                .unwrap();
        }
        let page = store
            .list(
                &owner,
                &crate::store::TaskQuery {
                    page_size: 10,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        let mut ids: Vec<_> = page.tasks.iter().map(|t| t.id.as_str()).collect();
        ids.sort_unstable();
        assert_eq!(ids, ["good", "waiting"]);
        let mut open = store.open_task_owners().await.unwrap();
        open.sort_by(|a, b| a.0.cmp(&b.0));
        let want: Vec<(String, Owner)> = ["bad", "good", "waiting"]
            .into_iter()
            .map(|id| (id.to_owned(), owner.clone()))
            .collect();
        assert_eq!(open, want);
        let scan = store.unfinished_for_recovery().await.unwrap();
        let found: Vec<_> = scan.tasks.iter().map(|t| t.task.id.as_str()).collect();
        assert_eq!(found, ["good"]);
        assert_eq!(scan.set_aside.len(), 1, "{:?}", scan.set_aside);
        assert_eq!(scan.set_aside[0].task_id, "bad");
        assert_eq!(scan.set_aside[0].owner, owner);
        assert!(
            scan.set_aside[0].kept.contains("a2a_unreadable_tasks"),
            "{}",
            scan.set_aside[0].kept
        );
        assert!(
            scan.set_aside[0].reason.contains("decoded"),
            "{:?}",
            scan.set_aside[0]
        );
        for id in ["bad", "done"] {
            let err = store.get(id, None).await.unwrap_err();
            assert!(crate::store::is_unreadable(&err), "{err:?}");
            assert!(err.message.contains(id), "{err:?}");
            assert_eq!(store.owner_of(id).await.unwrap(), Some(owner.clone()));
        }
        assert_eq!(store.owner_of("nobody").await.unwrap(), None);
        assert!(
            store
                .unfinished_for_recovery()
                .await
                .unwrap()
                .set_aside
                .is_empty()
        );
        assert!(store.unreadable_rows() >= 4, "{}", store.unreadable_rows());
        let count = |table: &str| {
            format!(
                "SELECT COUNT(*) FROM {}.{table} WHERE id = 'bad'",
                schema.name
            )
        };
        let (kept,): (i64,) = sqlx::query_as(&count("a2a_unreadable_tasks"))
            .fetch_one(&mut schema.admin)
            .await
            .unwrap();
        assert_eq!(kept, 1, "the row set aside");
        let (left,): (i64,) = sqlx::query_as(&count("a2a_tasks"))
            .fetch_one(&mut schema.admin)
            .await
            .unwrap();
        assert_eq!(left, 0, "the row moved out of a2a_tasks");
        drop(store);
        schema.drop_schema().await;
    }

    /// The counters stay exact when many writes share batches (each batch
    /// then flushes dozens of counter rows in multi-row statements): after
    /// 300 tasks in 120 contexts went through their states concurrently,
    /// every counter equals the tasks it counts, by owner and state and by
    /// context and state, and no counter of zero is left behind.
    #[tokio::test]
    #[ignore = "needs PostgreSQL (A2A_TEST_POSTGRES_URL)"]
    async fn counters_stay_exact_under_concurrent_batches() {
        let Some(schema) = TestSchema::create("a2a_counts", "the counters test").await else {
            return;
        };
        let store = PostgresStore::connect_with(
            PgPoolOptions::new().max_connections(8),
            schema.options.clone(),
        )
        .await
        .unwrap();
        let owners = [
            Owner::default(),
            Owner {
                tenant: "t".into(),
                principal: "alice".into(),
            },
        ];
        let mut runs = Vec::new();
        for i in 0..300usize {
            let store = store.clone();
            let owner = owners[i % 2].clone();
            runs.push(tokio::spawn(async move {
                let id = format!("task-{i}");
                let task = Task {
                    id: id.clone(),
                    context_id: format!("ctx-{}", i % 120),
                    status: Some(TaskStatus::new(TaskState::Submitted)),
                    ..Default::default()
                };
                store.create(&owner, task).await.unwrap();
                // Every task works; then a third completes, a third waits
                // for input, a third fails after it came back.
                let mut states = vec![TaskState::Working];
                states.extend(match i % 3 {
                    0 => vec![TaskState::Completed],
                    1 => vec![TaskState::InputRequired],
                    _ => vec![
                        TaskState::InputRequired,
                        TaskState::Working,
                        TaskState::Failed,
                    ],
                });
                for state in states {
                    let update = TaskUpdate::Status {
                        status: TaskStatus::new(state),
                        metadata: None,
                    };
                    store.update(&id, update).await.unwrap();
                }
            }));
        }
        for run in runs {
            run.await.unwrap();
        }
        let mismatched: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM (SELECT owner_tenant, owner_principal, state, count(*) AS n \
             FROM a2a_tasks GROUP BY 1, 2, 3) t FULL JOIN (SELECT owner_tenant, owner_principal, \
             state, sum(n) AS n FROM a2a_task_counts GROUP BY 1, 2, 3 HAVING sum(n) <> 0) c \
             USING (owner_tenant, owner_principal, state) WHERE t.n IS DISTINCT FROM c.n",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        assert_eq!(mismatched, 0, "counters by owner and state");
        let mismatched: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM (SELECT owner_tenant, owner_principal, context_id, state, \
             count(*) AS n FROM a2a_tasks GROUP BY 1, 2, 3, 4) t FULL JOIN a2a_context_counts c \
             USING (owner_tenant, owner_principal, context_id, state) WHERE t.n IS DISTINCT FROM c.n",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        assert_eq!(
            mismatched, 0,
            "counters by context and state (none of zero)"
        );
        let q = crate::store::TaskQuery {
            state: Some(TaskState::InputRequired),
            page_size: 10,
            ..Default::default()
        };
        assert_eq!(store.list(&owners[1], &q).await.unwrap().total, 50);
        store.pool().close().await;
        schema.drop_schema().await;
    }
}
