//! The PostgreSQL task store: durable tasks shared by several replicas,
//! and the event bus that lets the replicas follow each other's tasks
//! ([`PgEventBus`], [`connect_cluster`]).

use std::sync::Arc;
use std::time::Duration;

use agentwire_types::{
    A2aError, A2aResult, StreamResponse, Task, TaskArtifactUpdateEvent, TaskPushNotificationConfig,
    TaskState, TaskStatusUpdateEvent,
};
use async_trait::async_trait;
use prost::Message as _;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::{Postgres, QueryBuilder, Row};

use crate::store::sql::{self, Stored, TaskRow};
use crate::store::{
    LogSpan, Owner, StoredTask, TaskPage, TaskQuery, TaskStore, TaskUpdate, apply_update,
};

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
/// [`connect_cluster`] sets up), every write also records its event
/// (`StreamResponse`, protobuf) in `a2a_task_events`, in the same
/// statement as the task write, and announces it with `NOTIFY a2a_events`
/// once committed (batched: see the figures in `benches/README.md`);
/// [`PgEventBus`] reads them for the other replicas.
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
    pool: PgPool,
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
            .map_err(|e| sql::db_error("connecting to PostgreSQL", e))?;
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
            pool,
            log: None,
            announcer: None,
        })
    }

    /// The connection pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
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
        self.announcer = Some(Arc::new(Announcer {
            pool: self.pool.clone(),
            origin: Arc::clone(&origin),
            tx: parking_lot::Mutex::new(None),
        }));
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
            .execute(&self.pool)
            .await
            .map_err(|e| sql::db_error(what, e))?
            .rows_affected();
            purged += n;
            if n < EVENT_PURGE_BATCH as u64 {
                return Ok(purged);
            }
        }
    }

    /// The statement writing back an updated task (`expected_version`:
    /// only if unchanged since it was read). It returns one row when the
    /// task was written (none on a version conflict); with an event log it
    /// also records and announces `event`, and the row says where
    /// (`before`, `after`).
    fn write_query<'a>(
        &'a self,
        new: &'a TaskRow,
        old: &Stored,
        expected_version: Option<i64>,
        event: Option<&'a [u8]>,
    ) -> QueryBuilder<'a, Postgres> {
        let now = sql::now_millis();
        let Some(origin) = self.log.as_deref() else {
            let mut qb = sql::update_query(new, old, now, expected_version);
            qb.push(" RETURNING version");
            return qb;
        };
        let mut qb =
            sql::update_query_after("WITH u AS (", new, old, now, expected_version, Some(origin));
        qb.push(" RETURNING id)");
        let before = |qb: &mut QueryBuilder<'a, Postgres>| {
            qb.push(
                "(SELECT COALESCE(max(s.seq), 0) FROM a2a_task_events s \
                 WHERE s.task_id = ",
            )
            .push_bind(new.id.as_str())
            .push(") AS before");
        };
        match event {
            Some(bytes) => {
                qb.push(
                    ", e AS (INSERT INTO a2a_task_events (task_id, origin, event, created_at) \
                     SELECT id, ",
                )
                .push_bind(origin)
                .push(", ")
                .push_bind(bytes)
                .push(", ")
                .push_bind(now)
                .push(" FROM u RETURNING seq, task_id) SELECT ");
                before(&mut qb);
                qb.push(", e.seq AS after FROM e");
            }
            None => {
                qb.push(" SELECT ");
                before(&mut qb);
                qb.push(", NULL::bigint AS after FROM u");
            }
        }
        qb
    }

    /// Where a write went in the log, from a row of [`Self::write_query`].
    fn span(&self, row: &PgRow, task_id: &str) -> A2aResult<Option<LogSpan>> {
        if self.log.is_none() {
            return Ok(None);
        }
        let what = || format!("updating task {task_id}");
        let before: i64 = row
            .try_get("before")
            .map_err(|e| sql::db_error(&what(), e))?;
        let after: Option<i64> = row
            .try_get("after")
            .map_err(|e| sql::db_error(&what(), e))?;
        Ok(Some(LogSpan {
            before,
            after: after.unwrap_or(before),
        }))
    }

    /// Announces the event a row of [`Self::write_query`] recorded, if any.
    /// Only once its transaction committed: a replica told about an event
    /// it cannot read yet would skip it.
    fn announce_written(&self, row: &PgRow, task_id: &str) {
        let Some(a) = &self.announcer else {
            return;
        };
        if let Ok(Some(seq)) = row.try_get::<Option<i64>, _>("after") {
            a.announce(task_id, seq);
        }
    }

    /// The logged form of an update's event (`None` without an event log,
    /// or for an update that has no event).
    fn logged_event(&self, task: &Task, update: &TaskUpdate) -> Option<Vec<u8>> {
        self.log.as_ref()?;
        update_event(task, update).map(|e| e.encode_to_vec())
    }

    /// Applies an update holding the task's row lock (the slow path, after a
    /// conflict).
    async fn update_locked(
        &self,
        task_id: &str,
        update: TaskUpdate,
    ) -> A2aResult<(TaskState, Option<LogSpan>)> {
        let what = || format!("updating task {task_id}");
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(|e| sql::db_error(&what(), e))?;
        let row = sqlx::query(
            "SELECT version, head, history, artifacts FROM a2a_tasks WHERE id = $1 FOR UPDATE",
        )
        .bind(task_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| sql::db_error(&what(), e))?
        .ok_or_else(|| A2aError::task_not_found(task_id))?;
        let old = Stored::from_row(&row, task_id)?;
        let mut task = old.task(task_id)?;
        let event = self.logged_event(&task, &update);
        apply_update(&mut task, update)?;
        let state = task.state();
        let new = TaskRow::encode(task);
        let row = self
            .write_query(&new, &old, None, event.as_deref())
            .build()
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| sql::db_error(&what(), e))?;
        let span = self.span(&row, task_id)?;
        tx.commit().await.map_err(|e| sql::db_error(&what(), e))?;
        self.announce_written(&row, task_id);
        Ok((state, span))
    }
}

/// The event a write records: the task for a new one, the status or
/// artifact event of an update (a user message has none). The same as the
/// task manager publishes.
fn update_event(task: &Task, update: &TaskUpdate) -> Option<StreamResponse> {
    match update {
        TaskUpdate::Status { status, metadata } => Some(
            TaskStatusUpdateEvent {
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
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
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
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

#[async_trait]
impl TaskStore for PostgresStore {
    async fn create(&self, owner: &Owner, task: Task) -> A2aResult<()> {
        self.create_logged(owner, task).await.map(drop)
    }

    async fn create_logged(&self, owner: &Owner, task: Task) -> A2aResult<Option<LogSpan>> {
        const INSERT: &str = "INSERT INTO a2a_tasks (id, context_id, owner_tenant, \
             owner_principal, state, status_millis, has_status_time, head, history, artifacts, \
             created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)";
        // With the log, the row also names its writer ($12, the origin).
        const INSERT_LOGGED: &str = "INSERT INTO a2a_tasks (id, context_id, owner_tenant, \
             owner_principal, state, status_millis, has_status_time, head, history, artifacts, \
             created_at, updated_at, writer) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12)";
        // With an event log, the task's first event (the task itself) is
        // recorded in the same statement (and announced once committed).
        let logged = self.log.as_deref().map(|origin| {
            let event = StreamResponse::from(task.clone()).encode_to_vec();
            let statement = format!(
                "WITH t AS ({INSERT_LOGGED} RETURNING id), e AS (INSERT INTO a2a_task_events \
                 (task_id, origin, event, created_at) SELECT id, $12, $13, $11 FROM t \
                 RETURNING seq, task_id) SELECT e.seq AS after FROM e"
            );
            (statement, origin, event)
        });
        let row = TaskRow::encode(task);
        let now = sql::now_millis();
        let query = match &logged {
            Some((statement, _, _)) => sqlx::query(statement),
            None => sqlx::query(INSERT),
        };
        let query = query
            .bind(&row.id)
            .bind(&row.context_id)
            .bind(&owner.tenant)
            .bind(&owner.principal)
            .bind(row.state)
            .bind(row.status_millis)
            .bind(row.has_status_time)
            .bind(&row.head)
            .bind(&row.history)
            .bind(&row.artifacts)
            .bind(now);
        let query = match &logged {
            Some((_, origin, event)) => query.bind(*origin).bind(event.as_slice()),
            None => query,
        };
        let what = || format!("creating task {}", row.id);
        let result = match &logged {
            Some(_) => query.fetch_optional(&self.pool).await,
            None => query.execute(&self.pool).await.map(|_| None),
        };
        match result {
            Ok(None) => Ok(None),
            Ok(Some(written)) => {
                let after: i64 = written
                    .try_get("after")
                    .map_err(|e| sql::db_error(&what(), e))?;
                if let Some(a) = &self.announcer {
                    a.announce(&row.id, after);
                }
                Ok(Some(LogSpan { before: 0, after }))
            }
            Err(e) if sql::is_unique_violation(&e) => Err(sql::duplicate(&row.id)),
            Err(e) => Err(sql::db_error(&what(), e)),
        }
    }

    async fn update(&self, task_id: &str, update: TaskUpdate) -> A2aResult<TaskState> {
        self.update_logged(task_id, update)
            .await
            .map(|(state, _)| state)
    }

    async fn update_logged(
        &self,
        task_id: &str,
        update: TaskUpdate,
    ) -> A2aResult<(TaskState, Option<LogSpan>)> {
        // Fast path (two round trips, no transaction): read, apply, write
        // back if the version is unchanged. Within a replica the runtime
        // serialises the updates of a task, so a conflict needs another
        // replica (or a caller bypassing the runtime); the slow path then
        // redoes the step under the row lock.
        let what = || format!("updating task {task_id}");
        let row =
            sqlx::query("SELECT version, head, history, artifacts FROM a2a_tasks WHERE id = $1")
                .bind(task_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(|e| sql::db_error(&what(), e))?
                .ok_or_else(|| A2aError::task_not_found(task_id))?;
        let old = Stored::from_row(&row, task_id)?;
        let mut task = old.task(task_id)?;
        let event = self.logged_event(&task, &update);
        apply_update(&mut task, update.clone())?;
        let state = task.state();
        let new = TaskRow::encode(task);
        // With an event log, the event is recorded only if the task is
        // written (one statement: both or neither).
        let written = self
            .write_query(&new, &old, Some(old.version), event.as_deref())
            .build()
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| sql::db_error(&what(), e))?;
        if let Some(row) = written {
            // One statement: committed when it returns.
            let span = self.span(&row, task_id)?;
            self.announce_written(&row, task_id);
            return Ok((state, span));
        }
        self.update_locked(task_id, update).await
    }

    async fn get(
        &self,
        task_id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<StoredTask>> {
        let what = || format!("reading task {task_id}");
        let Some(row) = sqlx::query(
            "SELECT owner_tenant, owner_principal, head, history, artifacts \
             FROM a2a_tasks WHERE id = $1",
        )
        .bind(task_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| sql::db_error(&what(), e))?
        else {
            return Ok(None);
        };
        sql::stored_task(&row, task_id, history_length).map(Some)
    }

    async fn list(&self, owner: &Owner, query: &TaskQuery) -> A2aResult<TaskPage> {
        let what = "listing tasks";
        // One statement, so the page and the total come from one snapshot.
        let rows = sql::page_query::<sqlx::Postgres>(owner, query, "NULL::bytea")
            .build()
            .fetch_all(&self.pool)
            .await
            .map_err(|e| sql::db_error(what, e))?;
        let rows = rows
            .iter()
            .map(|r| sql::page_row(r, query.history_length))
            .collect::<A2aResult<Vec<_>>>()?;
        let total = match rows.first() {
            Some(r) => r.total,
            None => sql::count_query::<sqlx::Postgres>(owner, query)
                .build_query_scalar::<i64>()
                .fetch_one(&self.pool)
                .await
                .map_err(|e| sql::db_error(what, e))?,
        };
        Ok(sql::assemble_page(
            rows,
            query.page_size,
            sql::count(total)?,
        ))
    }

    async fn put_push_config(&self, config: &TaskPushNotificationConfig) -> A2aResult<()> {
        sqlx::query(
            "INSERT INTO a2a_push_configs (task_id, id, config) VALUES ($1, $2, $3) \
             ON CONFLICT (task_id, id) DO UPDATE SET config = excluded.config",
        )
        .bind(&config.task_id)
        .bind(&config.id)
        .bind(sql::encode_push(config))
        .execute(&self.pool)
        .await
        .map_err(|e| {
            sql::db_error(
                &format!(
                    "storing push-notification config {} of task {}",
                    config.id, config.task_id
                ),
                e,
            )
        })?;
        Ok(())
    }

    async fn get_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> A2aResult<Option<TaskPushNotificationConfig>> {
        let what = || format!("reading push-notification config {id} of task {task_id}");
        let bytes: Option<Vec<u8>> = sqlx::query_scalar(
            "SELECT config FROM a2a_push_configs WHERE task_id = $1 AND id = $2",
        )
        .bind(task_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| sql::db_error(&what(), e))?;
        bytes.map(|b| sql::decode_push(task_id, id, &b)).transpose()
    }

    async fn list_push_configs(&self, task_id: &str) -> A2aResult<Vec<TaskPushNotificationConfig>> {
        let what = || format!("listing push-notification configs of task {task_id}");
        let rows: Vec<(String, Vec<u8>)> = sqlx::query_as(
            "SELECT id, config FROM a2a_push_configs WHERE task_id = $1 ORDER BY seq",
        )
        .bind(task_id)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| sql::db_error(&what(), e))?;
        rows.iter()
            .map(|(id, b)| sql::decode_push(task_id, id, b))
            .collect()
    }

    async fn delete_push_config(&self, task_id: &str, id: &str) -> A2aResult<bool> {
        let n = sqlx::query("DELETE FROM a2a_push_configs WHERE task_id = $1 AND id = $2")
            .bind(task_id)
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(|e| {
                sql::db_error(
                    &format!("deleting push-notification config {id} of task {task_id}"),
                    e,
                )
            })?
            .rows_affected();
        Ok(n > 0)
    }

    async fn unfinished(&self) -> A2aResult<Vec<StoredTask>> {
        let rows = sqlx::query(sql::UNFINISHED_SQL)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| sql::db_error("reading unfinished tasks", e))?;
        sql::unfinished_tasks(&rows)
    }

    /// Deletes in batches of a few hundred tasks, each batch one
    /// transaction (rows another replica is purging are skipped, not
    /// waited for); `age` is measured by this replica's clock against the
    /// time a task last changed (when it became terminal). The tasks'
    /// logged events go with them.
    async fn purge_terminal_older_than(&self, age: Duration) -> A2aResult<u64> {
        let cutoff = sql::purge_cutoff(age);
        let delete_tasks = format!(
            "DELETE FROM a2a_tasks WHERE id IN (SELECT id FROM a2a_tasks \
             WHERE state IN {} AND updated_at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING id",
            sql::TERMINAL_STATES_SQL
        );
        let what = "purging terminal tasks";
        let mut purged = 0;
        loop {
            let mut tx = self
                .pool
                .begin()
                .await
                .map_err(|e| sql::db_error(what, e))?;
            let ids: Vec<String> = sqlx::query_scalar(&delete_tasks)
                .bind(cutoff)
                .bind(sql::PURGE_BATCH)
                .fetch_all(&mut *tx)
                .await
                .map_err(|e| sql::db_error(what, e))?;
            if !ids.is_empty() {
                sql::delete_push_query::<sqlx::Postgres>(&ids)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| sql::db_error(what, e))?;
                sqlx::query("DELETE FROM a2a_task_events WHERE task_id = ANY($1)")
                    .bind(&ids)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| sql::db_error(what, e))?;
            }
            tx.commit().await.map_err(|e| sql::db_error(what, e))?;
            purged += ids.len() as u64;
            if (ids.len() as i64) < sql::PURGE_BATCH {
                return Ok(purged);
            }
        }
    }
}
