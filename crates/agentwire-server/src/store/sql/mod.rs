//! What the SQL stores share: how a task is laid out in a row, the
//! statements of the store and the order of their steps ([`Tables`]),
//! written once for SQLite and PostgreSQL; what differs between the two is
//! in their [`driver::Dialect`] (`sqlite.rs`, `postgres/mod.rs`).
//!
//! A task is kept as three protobuf blobs so that reads load only what the
//! answer needs:
//!
//! - `head`: the task without its history and artifacts (id, context,
//!   status, metadata, and any field a later version of the proto adds);
//! - `history`: a `Task` holding only the history (field 5);
//! - `artifacts`: a `Task` holding only the artifacts (field 4).
//!
//! Protobuf is compact and exact (bytes, `Struct` values and timestamps come
//! back as they went in). Next to the blobs, the columns a query filters or
//! sorts on are kept in plain SQL types: owner, context, state, and the status
//! timestamp in milliseconds (the listing order and cursor of [`Cursor`]).

pub(crate) mod driver;
pub(crate) mod fault;
#[cfg(feature = "sqlite")]
pub(crate) mod lite;
#[cfg(test)]
mod plans;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite;

use std::time::{SystemTime, UNIX_EPOCH};

use agentwire_types::{A2aError, A2aResult, Task, TaskPushNotificationConfig};
use prost::Message as _;

use self::driver::{Conn, Dialect, SqlRow, Stmt};
use super::{
    Cursor, LogSpan, Owner, StoredTask, TaskPage, TaskQuery, TaskUpdate, Updated, apply_update,
};

/// The terminal states, as SQL (`TaskState` numbers). The migrations' partial
/// index on terminal tasks uses the same list; a unit test checks it against
/// [`agentwire_types::TaskState::is_terminal`].
pub(crate) const TERMINAL_STATES_SQL: &str = "(3, 4, 5, 7)";

/// How many tasks one purge transaction deletes at most, so a large purge
/// never holds the write lock for long.
pub(crate) const PURGE_BATCH: i64 = 500;

/// A task as the columns of its row.
pub(crate) struct TaskRow {
    pub id: String,
    pub context_id: String,
    pub state: i32,
    pub status_millis: i64,
    pub has_status_time: bool,
    pub head: Vec<u8>,
    pub history: Vec<u8>,
    pub artifacts: Vec<u8>,
}

impl TaskRow {
    /// Splits a task into its row.
    pub fn encode(mut task: Task) -> Self {
        let history = Task {
            history: std::mem::take(&mut task.history),
            ..Default::default()
        }
        .encode_to_vec();
        let artifacts = Task {
            artifacts: std::mem::take(&mut task.artifacts),
            ..Default::default()
        }
        .encode_to_vec();
        let ts = task.status_timestamp();
        Self {
            state: task.state() as i32,
            status_millis: ts.map_or(0, |t| t.as_millis()),
            has_status_time: ts.is_some(),
            head: task.encode_to_vec(),
            id: task.id,
            context_id: task.context_id,
            history,
            artifacts,
        }
    }
}

/// Rebuilds a task from its blobs. `history` and `artifacts` are `None` when
/// the query did not load them (the task then has none); `history_length`
/// keeps only the most recent messages (spec 3.2.4).
pub(crate) fn decode_task(
    id: &str,
    head: &[u8],
    history: Option<&[u8]>,
    artifacts: Option<&[u8]>,
    history_length: Option<usize>,
) -> A2aResult<Task> {
    let mut task = Task::decode(head).map_err(|e| corrupt(id, "head", e))?;
    if task.id != id {
        return Err(A2aError::internal(format!(
            "task store: the row of task {id} holds task {:?}",
            task.id
        )));
    }
    if let Some(bytes) = history {
        task.history = Task::decode(bytes)
            .map_err(|e| corrupt(id, "history", e))?
            .history;
        task.truncate_history(history_length);
    }
    if let Some(bytes) = artifacts {
        task.artifacts = Task::decode(bytes)
            .map_err(|e| corrupt(id, "artifacts", e))?
            .artifacts;
    }
    Ok(task)
}

fn corrupt(id: &str, column: &str, e: prost::DecodeError) -> A2aError {
    A2aError::internal(format!(
        "task store: the stored {column} of task {id} cannot be decoded: {e}"
    ))
}

/// Encodes a push-notification config.
pub(crate) fn encode_push(config: &TaskPushNotificationConfig) -> Vec<u8> {
    config.encode_to_vec()
}

/// Decodes a stored push-notification config.
pub(crate) fn decode_push(
    task_id: &str,
    id: &str,
    bytes: &[u8],
) -> A2aResult<TaskPushNotificationConfig> {
    TaskPushNotificationConfig::decode(bytes).map_err(|e| {
        A2aError::internal(format!(
            "task store: push-notification config {id} of task {task_id} cannot be decoded: {e}"
        ))
    })
}

/// The error for creating a task whose id exists (the memory store's).
pub(crate) fn duplicate(id: &str) -> A2aError {
    A2aError::internal(format!("task id {id} already exists"))
}

/// Milliseconds since the Unix epoch, now (the `created_at` / `updated_at`
/// columns).
pub(crate) fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The `updated_at` at or before which a terminal task is purged.
pub(crate) fn purge_cutoff(age: std::time::Duration) -> i64 {
    now_millis().saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX))
}

/// Converts a count read from the database.
pub(crate) fn count(n: i64) -> A2aResult<usize> {
    usize::try_from(n).map_err(|_| A2aError::internal(format!("task store: bad count {n}")))
}

/// Appends the `WHERE` conditions of a listing (owner and filters, not the
/// cursor) to a statement.
fn push_filters<'a>(s: &mut Stmt<'a>, owner: &'a Owner, q: &'a TaskQuery) {
    s.push(" WHERE owner_tenant = ")
        .bind(owner.tenant.as_str())
        .push(" AND owner_principal = ")
        .bind(owner.principal.as_str());
    if let Some(context) = q.context_id.as_deref() {
        s.push(" AND context_id = ").bind(context);
    }
    if let Some(state) = q.state {
        s.push(" AND state = ").bind(state as i32);
    }
    if let Some(after) = q.status_after {
        // A task without a status timestamp is never "at or after" a time.
        s.push(" AND has_status_time AND status_millis >= ")
            .bind(after.as_millis());
    }
}

/// The page query of a listing: the rows after the cursor in listing
/// order, one more than the page size (to know whether a next page exists),
/// each with the total number of matching tasks.
pub(crate) fn page_query<'a, D: Dialect>(owner: &'a Owner, q: &'a TaskQuery) -> Stmt<'a> {
    let history = if q.history_length == Some(0) {
        D::NULL_BLOB
    } else {
        "history"
    };
    let artifacts = if q.include_artifacts {
        "artifacts"
    } else {
        D::NULL_BLOB
    };
    let mut s = Stmt::new(format!(
        "SELECT id, status_millis, head, {history} AS history, {artifacts} AS artifacts, \
         (SELECT COUNT(*) FROM a2a_tasks"
    ));
    push_filters(&mut s, owner, q);
    s.push(") AS total FROM a2a_tasks");
    push_filters(&mut s, owner, q);
    if let Some(Cursor { millis, id }) = &q.cursor {
        s.push(" AND (status_millis, id) < (")
            .bind(*millis)
            .push(", ")
            .bind(id.as_str())
            .push(")");
    }
    let limit = i64::try_from(q.page_size)
        .unwrap_or(i64::MAX)
        .saturating_add(1);
    s.push(" ORDER BY status_millis DESC, id DESC LIMIT ")
        .bind(limit);
    s
}

/// The count query of a listing (used when the page is empty, so the total
/// did not come with it).
fn count_query<'a>(owner: &'a Owner, q: &'a TaskQuery) -> Stmt<'a> {
    let mut s = Stmt::new("SELECT COUNT(*) AS total FROM a2a_tasks");
    push_filters(&mut s, owner, q);
    s
}

/// The blobs and version of a task as read before an update.
pub(crate) struct Stored {
    pub version: i64,
    pub head: Vec<u8>,
    pub history: Vec<u8>,
    pub artifacts: Vec<u8>,
}

impl Stored {
    /// Reads the columns `version, head, history, artifacts` of a row.
    pub fn from_row(row: &impl SqlRow) -> A2aResult<Self> {
        Ok(Self {
            version: row.i64("version")?,
            head: row.blob("head")?,
            history: row.blob("history")?,
            artifacts: row.blob("artifacts")?,
        })
    }

    /// The whole task.
    pub fn task(&self, id: &str) -> A2aResult<Task> {
        decode_task(
            id,
            &self.head,
            Some(&self.history),
            Some(&self.artifacts),
            None,
        )
    }
}

/// The `UPDATE` writing a task back after an update: the indexed columns,
/// the version and `updated_at`, and only the blobs that changed (an
/// artifact chunk rewrites the artifacts, not the history). With
/// `expected_version` the row is written only if nobody else wrote it since
/// it was read (optimistic concurrency): zero rows affected means a
/// conflict. `prefix` is SQL before it (the start of a `WITH` clause) and
/// `writer` the replica that wrote, recorded when given.
pub(crate) fn update_query<'a>(
    prefix: &str,
    new: &'a TaskRow,
    old: &Stored,
    now: i64,
    expected_version: Option<i64>,
    writer: Option<&'a str>,
) -> Stmt<'a> {
    let mut s = Stmt::new(format!("{prefix}UPDATE a2a_tasks SET state = "));
    s.bind(new.state)
        .push(", status_millis = ")
        .bind(new.status_millis)
        .push(", has_status_time = ")
        .bind(new.has_status_time)
        .push(", updated_at = ")
        .bind(now)
        .push(", version = version + 1");
    if let Some(w) = writer {
        s.push(", writer = ").bind(w);
    }
    if new.head != old.head {
        s.push(", head = ").bind(new.head.as_slice());
    }
    if new.history != old.history {
        s.push(", history = ").bind(new.history.as_slice());
    }
    if new.artifacts != old.artifacts {
        s.push(", artifacts = ").bind(new.artifacts.as_slice());
    }
    s.push(" WHERE id = ").bind(new.id.as_str());
    if let Some(v) = expected_version {
        s.push(" AND version = ").bind(v);
    }
    s
}

/// Reads one row of a listing page (`id, status_millis, head, history,
/// artifacts, total`).
fn page_row(row: &impl SqlRow, history_length: Option<usize>) -> A2aResult<PageRow> {
    let id = row.text("id")?;
    let millis = row.i64("status_millis")?;
    let head = row.blob("head")?;
    let history = row.opt_blob("history")?;
    let artifacts = row.opt_blob("artifacts")?;
    let total = row.i64("total")?;
    let task = decode_task(
        &id,
        &head,
        history.as_deref(),
        artifacts.as_deref(),
        history_length,
    )?;
    Ok(PageRow {
        cursor: Cursor { millis, id },
        task,
        total,
    })
}

/// The deletion of the rows of some tasks from a table keyed by `task_id`.
fn delete_of_tasks<'a>(table: &str, task_ids: &'a [String]) -> Stmt<'a> {
    let mut s = Stmt::new(format!("DELETE FROM {table} WHERE task_id IN ("));
    for (i, id) in task_ids.iter().enumerate() {
        if i > 0 {
            s.push(", ");
        }
        s.bind(id.as_str());
    }
    s.push(")");
    s
}

/// Reads a task with its owner from the columns `owner_tenant,
/// owner_principal, head, history, artifacts` of a row.
pub(crate) fn stored_task(
    row: &impl SqlRow,
    id: &str,
    history_length: Option<usize>,
) -> A2aResult<StoredTask> {
    let owner = Owner {
        tenant: row.text("owner_tenant")?,
        principal: row.text("owner_principal")?,
    };
    let head = row.blob("head")?;
    let history = row.blob("history")?;
    let artifacts = row.blob("artifacts")?;
    let task = decode_task(id, &head, Some(&history), Some(&artifacts), history_length)?;
    Ok(StoredTask { owner, task })
}

/// One row of a listing page, decoded.
struct PageRow {
    cursor: Cursor,
    task: Task,
    total: i64,
}

/// Assembles a [`TaskPage`] from the rows of [`page_query`] (at most one
/// more than the page size).
fn assemble_page(mut rows: Vec<PageRow>, page_size: usize, total: usize) -> TaskPage {
    let next = if rows.len() > page_size && page_size > 0 {
        rows.truncate(page_size);
        rows.last().map(|r| r.cursor.clone())
    } else {
        rows.truncate(page_size);
        None
    };
    TaskPage {
        tasks: rows.into_iter().map(|r| r.task).collect(),
        next,
        total,
    }
}

// The statements of the task store. `$n` placeholders (see `driver.rs`).

/// A new task.
const INSERT_TASK: &str = "INSERT INTO a2a_tasks (id, context_id, owner_tenant, owner_principal, \
     state, status_millis, has_status_time, head, history, artifacts, created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)";
/// A task with its owner.
const GET_TASK: &str = "SELECT owner_tenant, owner_principal, head, history, artifacts \
     FROM a2a_tasks WHERE id = $1";
/// A task as an update reads it (followed by the dialect's row lock in a
/// transaction).
const READ_FOR_UPDATE: &str =
    "SELECT version, head, history, artifacts FROM a2a_tasks WHERE id = $1";
/// The tasks an agent was at work on (`TASK_STATE_SUBMITTED` = 1,
/// `TASK_STATE_WORKING` = 2), for crash recovery.
const UNFINISHED: &str = "SELECT id, owner_tenant, owner_principal, head, history, artifacts \
     FROM a2a_tasks WHERE state IN (1, 2)";
const PUT_PUSH_CONFIG: &str = "INSERT INTO a2a_push_configs (task_id, id, config) \
     VALUES ($1, $2, $3) ON CONFLICT (task_id, id) DO UPDATE SET config = excluded.config";
const GET_PUSH_CONFIG: &str = "SELECT config FROM a2a_push_configs WHERE task_id = $1 AND id = $2";
/// In the order they were added.
const LIST_PUSH_CONFIGS: &str =
    "SELECT id, config FROM a2a_push_configs WHERE task_id = $1 ORDER BY seq";
const DELETE_PUSH_CONFIG: &str = "DELETE FROM a2a_push_configs WHERE task_id = $1 AND id = $2";

/// The deletion of one batch of a purge: terminal tasks last changed at or
/// before `$1`, at most `$2` of them; their ids.
pub(crate) fn purge_query<D: Dialect>() -> String {
    format!(
        "DELETE FROM a2a_tasks WHERE id IN (SELECT id FROM a2a_tasks \
         WHERE state IN {TERMINAL_STATES_SQL} AND updated_at <= $1 LIMIT $2{}) RETURNING id",
        D::SKIP_LOCKED
    )
}

/// The insert of a new task: [`INSERT_TASK`] with its arguments.
pub(crate) fn insert_task<'a>(
    sql: &'a str,
    row: &'a TaskRow,
    owner: &'a Owner,
    now: i64,
) -> Stmt<'a> {
    Stmt::new(sql)
        .arg(&row.id)
        .arg(&row.context_id)
        .arg(&owner.tenant)
        .arg(&owner.principal)
        .arg(row.state)
        .arg(row.status_millis)
        .arg(row.has_status_time)
        .arg(&row.head)
        .arg(&row.history)
        .arg(&row.artifacts)
        .arg(now)
}

/// What a store records with each task write besides the task, in the same
/// statement (PostgreSQL's event log, for replicas), and announces once the
/// write committed.
pub(crate) trait EventLog<D: Dialect>: Sync {
    /// The recorded form of a new task's first event.
    fn created_event(&self, task: &Task) -> Vec<u8>;
    /// The recorded form of an update's event, if it has one.
    fn update_event(&self, task: &Task, update: &TaskUpdate) -> Option<Vec<u8>>;
    /// The insert of a new task recording `event`: one row (`before`,
    /// `after`).
    fn create<'a>(
        &'a self,
        row: &'a TaskRow,
        owner: &'a Owner,
        now: i64,
        event: &'a [u8],
    ) -> Stmt<'a>;
    /// The write-back of an updated task ([`update_query`]) recording
    /// `event`: one row (`before`, `after`) when the task was written, none
    /// on a version conflict.
    fn write<'a>(
        &'a self,
        new: &'a TaskRow,
        old: &Stored,
        now: i64,
        expected_version: Option<i64>,
        event: Option<&'a [u8]>,
    ) -> Stmt<'a>;
    /// Announces the event recorded at `seq` (after the commit: a replica
    /// told about an event it cannot read yet would skip it).
    fn announce(&self, task_id: &str, seq: i64);
}

/// Where a write went in the log, from its row (`before`, `after`); the
/// event to announce, if it recorded one.
fn logged_span(row: &impl SqlRow) -> A2aResult<(LogSpan, Option<i64>)> {
    let before = row.i64("before")?;
    let after = row.opt_i64("after")?;
    Ok((
        LogSpan {
            before,
            after: after.unwrap_or(before),
        },
        after,
    ))
}

/// A store without an event log (never constructed).
#[cfg(feature = "sqlite")]
pub(crate) enum NoLog {}

#[cfg(feature = "sqlite")]
impl<D: Dialect> EventLog<D> for NoLog {
    fn created_event(&self, _: &Task) -> Vec<u8> {
        match *self {}
    }
    fn update_event(&self, _: &Task, _: &TaskUpdate) -> Option<Vec<u8>> {
        match *self {}
    }
    fn create<'a>(&'a self, _: &'a TaskRow, _: &'a Owner, _: i64, _: &'a [u8]) -> Stmt<'a> {
        match *self {}
    }
    fn write<'a>(
        &'a self,
        _: &'a TaskRow,
        _: &Stored,
        _: i64,
        _: Option<i64>,
        _: Option<&'a [u8]>,
    ) -> Stmt<'a> {
        match *self {}
    }
    fn announce(&self, _: &str, _: i64) {
        match *self {}
    }
}

/// The error of a failed task store statement.
fn fail<D: Dialect>(what: &str, e: D::Error) -> A2aError {
    D::error("task store", what, e)
}

/// The task tables of one database, and the `TaskStore` operations on
/// them, written once for every [`Dialect`]. Writes go to `writer`, reads
/// to `reader` (the same pool for PostgreSQL).
#[derive(Debug, Clone)]
pub(crate) struct Tables<D: Dialect> {
    pub writer: D::Pool,
    pub reader: D::Pool,
}

impl<D: Dialect> Tables<D> {
    /// Both roles on one pool.
    pub fn one_pool(pool: D::Pool) -> Self {
        Self {
            writer: pool.clone(),
            reader: pool,
        }
    }

    /// `TaskStore::create`, recording the task's first event in `log`.
    pub async fn create<L: EventLog<D>>(
        &self,
        owner: &Owner,
        task: Task,
        log: Option<&L>,
    ) -> A2aResult<Option<LogSpan>> {
        let log = log.map(|l| (l, l.created_event(&task)));
        let row = TaskRow::encode(task);
        let now = now_millis();
        let mut conn = D::on(&self.writer);
        let written = match &log {
            None => conn
                .execute(insert_task(INSERT_TASK, &row, owner, now))
                .await
                .map(|_| None),
            Some((l, event)) => conn.fetch_optional(l.create(&row, owner, now, event)).await,
        };
        match written {
            Ok(Some(r)) => {
                let (span, after) = logged_span(&r)?;
                if let (Some((l, _)), Some(seq)) = (&log, after) {
                    l.announce(&row.id, seq);
                }
                Ok(Some(span))
            }
            Ok(None) => Ok(None),
            Err(e) if D::is_unique_violation(&e) => Err(duplicate(&row.id)),
            Err(e) => Err(fail::<D>(&format!("creating task {}", row.id), e)),
        }
    }

    /// `TaskStore::update`: reads the task without a lock, applies the
    /// update and writes it back if its version is unchanged; on a conflict
    /// (another process or replica, or a caller that bypasses the task
    /// manager, which serialises the updates of a task) redoes the whole
    /// step in a write transaction holding the row, so that no update is
    /// lost and none starves.
    pub async fn update<L: EventLog<D>>(
        &self,
        task_id: &str,
        update: TaskUpdate,
        log: Option<&L>,
    ) -> A2aResult<Updated> {
        let what = || format!("updating task {task_id}");
        let row = D::on(&self.reader)
            .fetch_optional(Stmt::new(READ_FOR_UPDATE).arg(task_id))
            .await
            .map_err(|e| fail::<D>(&what(), e))?
            .ok_or_else(|| A2aError::task_not_found(task_id))?;
        let old = Stored::from_row(&row)?;
        let mut task = old.task(task_id)?;
        let event = log.and_then(|l| l.update_event(&task, &update));
        apply_update(&mut task, update.clone())?;
        let state = task.state();
        let new = TaskRow::encode(task);
        let now = now_millis();
        let mut conn = D::on(&self.writer);
        match log {
            None => {
                let written = conn
                    .execute(update_query("", &new, &old, now, Some(old.version), None))
                    .await
                    .map_err(|e| fail::<D>(&what(), e))?;
                if written == 1 {
                    return Ok(Updated::new(state));
                }
            }
            Some(l) => {
                // The event is recorded only if the task is written (one
                // statement: both or neither, committed when it returns).
                let written = conn
                    .fetch_optional(l.write(&new, &old, now, Some(old.version), event.as_deref()))
                    .await
                    .map_err(|e| fail::<D>(&what(), e))?;
                if let Some(r) = written {
                    let (span, after) = logged_span(&r)?;
                    if let Some(seq) = after {
                        l.announce(task_id, seq);
                    }
                    return Ok(Updated::new(state).logged(span));
                }
            }
        }
        self.update_locked(task_id, update, log).await
    }

    /// Applies an update in a write transaction holding the task (the slow
    /// path, after a conflict).
    async fn update_locked<L: EventLog<D>>(
        &self,
        task_id: &str,
        update: TaskUpdate,
        log: Option<&L>,
    ) -> A2aResult<Updated> {
        let what = || format!("updating task {task_id}");
        let mut tx = D::begin(&self.writer)
            .await
            .map_err(|e| fail::<D>(&what(), e))?;
        let read = Stmt::new(format!("{READ_FOR_UPDATE}{}", D::LOCK_ROWS)).arg(task_id);
        let row = tx
            .fetch_optional(read)
            .await
            .map_err(|e| fail::<D>(&what(), e))?
            .ok_or_else(|| A2aError::task_not_found(task_id))?;
        let old = Stored::from_row(&row)?;
        let mut task = old.task(task_id)?;
        let event = log.and_then(|l| l.update_event(&task, &update));
        apply_update(&mut task, update)?;
        let state = task.state();
        let new = TaskRow::encode(task);
        let now = now_millis();
        let logged = match log {
            None => {
                tx.execute(update_query("", &new, &old, now, None, None))
                    .await
                    .map_err(|e| fail::<D>(&what(), e))?;
                None
            }
            Some(l) => {
                let r = tx
                    .fetch_optional(l.write(&new, &old, now, None, event.as_deref()))
                    .await
                    .map_err(|e| fail::<D>(&what(), e))?
                    .ok_or_else(|| A2aError::task_not_found(task_id))?;
                Some((l, logged_span(&r)?))
            }
        };
        D::commit(tx).await.map_err(|e| fail::<D>(&what(), e))?;
        Ok(match logged {
            None => Updated::new(state),
            Some((l, (span, after))) => {
                if let Some(seq) = after {
                    l.announce(task_id, seq);
                }
                Updated::new(state).logged(span)
            }
        })
    }

    /// `TaskStore::get`.
    pub async fn get(
        &self,
        task_id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<StoredTask>> {
        let row = D::on(&self.reader)
            .fetch_optional(Stmt::new(GET_TASK).arg(task_id))
            .await
            .map_err(|e| fail::<D>(&format!("reading task {task_id}"), e))?;
        row.map(|r| stored_task(&r, task_id, history_length))
            .transpose()
    }

    /// `TaskStore::list`: the page and the total in one statement, so
    /// that they come from one snapshot.
    pub async fn list(&self, owner: &Owner, query: &TaskQuery) -> A2aResult<TaskPage> {
        let what = "listing tasks";
        let mut conn = D::on(&self.reader);
        let rows = conn
            .fetch_all(page_query::<D>(owner, query))
            .await
            .map_err(|e| fail::<D>(what, e))?;
        let rows = rows
            .iter()
            .map(|r| page_row(r, query.history_length))
            .collect::<A2aResult<Vec<_>>>()?;
        let total = match rows.first() {
            Some(r) => r.total,
            None => match conn
                .fetch_optional(count_query(owner, query))
                .await
                .map_err(|e| fail::<D>(what, e))?
            {
                Some(r) => r.i64("total")?,
                None => 0,
            },
        };
        Ok(assemble_page(rows, query.page_size, count(total)?))
    }

    /// `TaskStore::put_push_config`.
    pub async fn put_push_config(&self, config: &TaskPushNotificationConfig) -> A2aResult<()> {
        let blob = encode_push(config);
        let s = Stmt::new(PUT_PUSH_CONFIG)
            .arg(&config.task_id)
            .arg(&config.id)
            .arg(&blob);
        D::on(&self.writer).execute(s).await.map_err(|e| {
            let what = format!(
                "storing push-notification config {} of task {}",
                config.id, config.task_id
            );
            fail::<D>(&what, e)
        })?;
        Ok(())
    }

    /// `TaskStore::get_push_config`.
    pub async fn get_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> A2aResult<Option<TaskPushNotificationConfig>> {
        let row = D::on(&self.reader)
            .fetch_optional(Stmt::new(GET_PUSH_CONFIG).arg(task_id).arg(id))
            .await
            .map_err(|e| {
                let what = format!("reading push-notification config {id} of task {task_id}");
                fail::<D>(&what, e)
            })?;
        row.map(|r| decode_push(task_id, id, &r.blob("config")?))
            .transpose()
    }

    /// `TaskStore::list_push_configs`.
    pub async fn list_push_configs(
        &self,
        task_id: &str,
    ) -> A2aResult<Vec<TaskPushNotificationConfig>> {
        let rows = D::on(&self.reader)
            .fetch_all(Stmt::new(LIST_PUSH_CONFIGS).arg(task_id))
            .await
            .map_err(|e| {
                let what = format!("listing push-notification configs of task {task_id}");
                fail::<D>(&what, e)
            })?;
        rows.iter()
            .map(|r| decode_push(task_id, &r.text("id")?, &r.blob("config")?))
            .collect()
    }

    /// `TaskStore::delete_push_config`.
    pub async fn delete_push_config(&self, task_id: &str, id: &str) -> A2aResult<bool> {
        let n = D::on(&self.writer)
            .execute(Stmt::new(DELETE_PUSH_CONFIG).arg(task_id).arg(id))
            .await
            .map_err(|e| {
                let what = format!("deleting push-notification config {id} of task {task_id}");
                fail::<D>(&what, e)
            })?;
        Ok(n > 0)
    }

    /// `TaskStore::unfinished`.
    pub async fn unfinished(&self) -> A2aResult<Vec<StoredTask>> {
        let rows = D::on(&self.reader)
            .fetch_all(Stmt::new(UNFINISHED))
            .await
            .map_err(|e| fail::<D>("reading unfinished tasks", e))?;
        rows.iter()
            .map(|r| stored_task(r, &r.text("id")?, None))
            .collect()
    }

    /// `TaskStore::purge_terminal_older_than`: in batches of a few hundred
    /// tasks, each batch one transaction (rows another replica is purging
    /// are skipped, not waited for), with the rows of [`Dialect::TASK_TABLES`];
    /// `age` is measured by this process's clock against the time a task
    /// last changed (when it became terminal).
    #[cfg(feature = "postgres")]
    pub async fn purge_terminal_older_than(&self, age: std::time::Duration) -> A2aResult<u64> {
        let cutoff = purge_cutoff(age);
        let mut purged = 0;
        loop {
            let n = self.purge_batch(cutoff).await?;
            purged += n;
            if n < PURGE_BATCH as u64 {
                return Ok(purged);
            }
        }
    }

    /// One transaction of a purge: deletes at most [`PURGE_BATCH`]
    /// terminal tasks last changed at or before `cutoff`, with their rows
    /// in [`Dialect::TASK_TABLES`]; how many.
    pub async fn purge_batch(&self, cutoff: i64) -> A2aResult<u64> {
        let delete_tasks = purge_query::<D>();
        let what = "purging terminal tasks";
        let mut tx = D::begin(&self.writer)
            .await
            .map_err(|e| fail::<D>(what, e))?;
        let rows = tx
            .fetch_all(
                Stmt::new(delete_tasks.as_str())
                    .arg(cutoff)
                    .arg(PURGE_BATCH),
            )
            .await
            .map_err(|e| fail::<D>(what, e))?;
        let ids = rows
            .iter()
            .map(|r| r.text("id"))
            .collect::<A2aResult<Vec<_>>>()?;
        if !ids.is_empty() {
            for table in D::TASK_TABLES {
                tx.execute(delete_of_tasks(table, &ids))
                    .await
                    .map_err(|e| fail::<D>(what, e))?;
            }
        }
        D::commit(tx).await.map_err(|e| fail::<D>(what, e))?;
        Ok(ids.len() as u64)
    }
}

/// Implements `TaskStore` for a store type by calling its `tables` (a
/// [`Tables`]) with its event log `log` (an `Option<&impl EventLog>`).
#[cfg(feature = "postgres")]
macro_rules! task_store_on_tables {
    ($store:ty, |$s:ident| $log:expr) => {
        #[async_trait::async_trait]
        impl $crate::store::TaskStore for $store {
            async fn create(
                &self,
                owner: &$crate::store::Owner,
                task: agentwire_types::Task,
            ) -> agentwire_types::A2aResult<Option<$crate::store::LogSpan>> {
                let $s = self;
                self.tables.create(owner, task, $log).await
            }

            async fn update(
                &self,
                task_id: &str,
                update: $crate::store::TaskUpdate,
            ) -> agentwire_types::A2aResult<$crate::store::Updated> {
                let $s = self;
                self.tables.update(task_id, update, $log).await
            }

            async fn get(
                &self,
                task_id: &str,
                history_length: Option<usize>,
            ) -> agentwire_types::A2aResult<Option<$crate::store::StoredTask>> {
                self.tables.get(task_id, history_length).await
            }

            async fn list(
                &self,
                owner: &$crate::store::Owner,
                query: &$crate::store::TaskQuery,
            ) -> agentwire_types::A2aResult<$crate::store::TaskPage> {
                self.tables.list(owner, query).await
            }

            async fn put_push_config(
                &self,
                config: &agentwire_types::TaskPushNotificationConfig,
            ) -> agentwire_types::A2aResult<()> {
                self.tables.put_push_config(config).await
            }

            async fn get_push_config(
                &self,
                task_id: &str,
                id: &str,
            ) -> agentwire_types::A2aResult<Option<agentwire_types::TaskPushNotificationConfig>>
            {
                self.tables.get_push_config(task_id, id).await
            }

            async fn list_push_configs(
                &self,
                task_id: &str,
            ) -> agentwire_types::A2aResult<Vec<agentwire_types::TaskPushNotificationConfig>> {
                self.tables.list_push_configs(task_id).await
            }

            async fn delete_push_config(
                &self,
                task_id: &str,
                id: &str,
            ) -> agentwire_types::A2aResult<bool> {
                self.tables.delete_push_config(task_id, id).await
            }

            async fn unfinished(
                &self,
            ) -> agentwire_types::A2aResult<Vec<$crate::store::StoredTask>> {
                self.tables.unfinished().await
            }

            /// Deletes in batches of a few hundred tasks, each batch one
            /// transaction (rows another replica is purging are skipped,
            /// not waited for); `age` is measured by this process's clock
            /// against the time a task last changed (when it became
            /// terminal).
            async fn purge_terminal_older_than(
                &self,
                age: std::time::Duration,
            ) -> agentwire_types::A2aResult<u64> {
                self.tables.purge_terminal_older_than(age).await
            }
        }
    };
}
#[cfg(feature = "postgres")]
pub(crate) use task_store_on_tables;

/// The terminal states as SQL, computed from the state machine (for the
/// unit test of [`TERMINAL_STATES_SQL`]).
#[cfg(test)]
fn terminal_list() -> String {
    let states: Vec<String> = (0..=8)
        .filter_map(|n| agentwire_types::TaskState::try_from(n).ok())
        .filter(|s| s.is_terminal())
        .map(|s| (s as i32).to_string())
        .collect();
    format!("({})", states.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_types::{Artifact, Message, TaskState, TaskStatus, Timestamp};

    #[test]
    fn placeholders_first_appear_in_order() {
        for sql in [
            INSERT_TASK,
            GET_TASK,
            READ_FOR_UPDATE,
            UNFINISHED,
            PUT_PUSH_CONFIG,
            GET_PUSH_CONFIG,
            LIST_PUSH_CONFIGS,
            DELETE_PUSH_CONFIG,
        ] {
            driver::assert_placeholders_in_order(sql);
        }
    }

    #[test]
    fn terminal_states_match_the_state_machine() {
        assert_eq!(TERMINAL_STATES_SQL, terminal_list());
    }

    #[test]
    fn a_task_survives_its_row() {
        let mut status = TaskStatus::new(TaskState::Working);
        status.timestamp = Some(Timestamp::from_millis(1_700_000_000_123));
        let task = Task {
            id: "t1".into(),
            context_id: "c1".into(),
            status: Some(status),
            artifacts: vec![Artifact::text("a", "result").with_id("a1")],
            history: vec![Message::user_text("one"), Message::agent_text("two")],
            metadata: Some(agentwire_types::json::to_struct(
                serde_json::json!({"k": [1, "x", null]})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            )),
        };
        let row = TaskRow::encode(task.clone());
        assert_eq!(row.state, TaskState::Working as i32);
        assert_eq!(row.status_millis, 1_700_000_000_123);
        assert!(row.has_status_time);
        let back = decode_task(
            "t1",
            &row.head,
            Some(&row.history),
            Some(&row.artifacts),
            None,
        )
        .unwrap();
        assert_eq!(back, task);
        let slim = decode_task("t1", &row.head, Some(&row.history), None, Some(1)).unwrap();
        assert!(slim.artifacts.is_empty());
        assert_eq!(slim.history.len(), 1);
        assert_eq!(slim.history[0].text(), "two");
    }

    #[test]
    fn corrupt_blobs_are_errors() {
        let row = TaskRow::encode(Task {
            id: "t1".into(),
            ..Default::default()
        });
        let err = decode_task("t1", &[0xff, 0xff, 0xff], None, None, None).unwrap_err();
        assert_eq!(err.kind, agentwire_types::ErrorKind::Internal);
        assert!(err.message.contains("t1"), "{}", err.message);
        let err = decode_task("t1", &row.head, Some(&[0x2a, 0x05, 1]), None, None).unwrap_err();
        assert!(err.message.contains("history"), "{}", err.message);
        let err = decode_task("t2", &row.head, None, None, None).unwrap_err();
        assert_eq!(err.kind, agentwire_types::ErrorKind::Internal);
        assert!(decode_push("t", "p", &[0xff]).is_err());
    }
}
