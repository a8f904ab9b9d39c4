//! What the SQL stores share: how a task is laid out in a row, how a listing
//! becomes a query, and how database errors become [`A2aError`]s.
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

pub(crate) mod fault;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite;

use std::time::{SystemTime, UNIX_EPOCH};

use agentwire_types::{A2aError, A2aResult, Task, TaskPushNotificationConfig};
use prost::Message as _;
use sqlx::{ColumnIndex, Database, Decode, Encode, QueryBuilder, Row, Type};

use super::{Cursor, Owner, TaskQuery};

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

/// Maps a database error to an internal error saying what was being done.
/// A failure of the storage itself (locked, full, I/O, damaged) is a
/// storage error instead (see [`fault::fault_of`]).
pub(crate) fn db_error(what: &str, e: sqlx::Error) -> A2aError {
    tracing::error!(error = %e, "task store: {what} failed");
    if let Some(storage) = fault::storage_db_error(what, &e) {
        return storage;
    }
    A2aError::internal(format!("task store: {what} failed: {e}"))
}

/// The error for creating a task whose id exists (the memory store's).
pub(crate) fn duplicate(id: &str) -> A2aError {
    A2aError::internal(format!("task id {id} already exists"))
}

/// Whether an error is a unique-key violation.
pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
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
/// cursor) to a query.
pub(crate) fn push_filters<'a, DB>(
    qb: &mut QueryBuilder<'a, DB>,
    owner: &'a Owner,
    q: &'a TaskQuery,
) where
    DB: Database,
    &'a str: Encode<'a, DB> + Type<DB>,
    i64: Encode<'a, DB> + Type<DB>,
    i32: Encode<'a, DB> + Type<DB>,
{
    qb.push(" WHERE owner_tenant = ")
        .push_bind(owner.tenant.as_str())
        .push(" AND owner_principal = ")
        .push_bind(owner.principal.as_str());
    if let Some(context) = q.context_id.as_deref() {
        qb.push(" AND context_id = ").push_bind(context);
    }
    if let Some(state) = q.state {
        qb.push(" AND state = ").push_bind(state as i32);
    }
    if let Some(after) = q.status_after {
        // A task without a status timestamp is never "at or after" a time.
        qb.push(" AND has_status_time AND status_millis >= ")
            .push_bind(after.as_millis());
    }
}

/// Builds the page query of a listing: the rows after the cursor in listing
/// order, one more than the page size (to know whether a next page exists),
/// each with the total number of matching tasks. `null_blob` is the
/// dialect's typed NULL for a blob column that the answer does not need.
pub(crate) fn page_query<'a, DB>(
    owner: &'a Owner,
    q: &'a TaskQuery,
    null_blob: &str,
) -> QueryBuilder<'a, DB>
where
    DB: Database,
    <DB as Database>::Arguments<'a>: Default,
    &'a str: Encode<'a, DB> + Type<DB>,
    i64: Encode<'a, DB> + Type<DB>,
    i32: Encode<'a, DB> + Type<DB>,
{
    let history = if q.history_length == Some(0) {
        null_blob
    } else {
        "history"
    };
    let artifacts = if q.include_artifacts {
        "artifacts"
    } else {
        null_blob
    };
    let mut qb = QueryBuilder::new(format!(
        "SELECT id, status_millis, head, {history} AS history, {artifacts} AS artifacts, \
         (SELECT COUNT(*) FROM a2a_tasks"
    ));
    push_filters(&mut qb, owner, q);
    qb.push(") AS total FROM a2a_tasks");
    push_filters(&mut qb, owner, q);
    if let Some(Cursor { millis, id }) = &q.cursor {
        qb.push(" AND (status_millis, id) < (")
            .push_bind(*millis)
            .push(", ")
            .push_bind(id.as_str())
            .push(")");
    }
    let limit = i64::try_from(q.page_size)
        .unwrap_or(i64::MAX)
        .saturating_add(1);
    qb.push(" ORDER BY status_millis DESC, id DESC LIMIT ")
        .push_bind(limit);
    qb
}

/// Builds the count query of a listing (used when the page is empty, so the
/// total did not come with it).
pub(crate) fn count_query<'a, DB>(owner: &'a Owner, q: &'a TaskQuery) -> QueryBuilder<'a, DB>
where
    DB: Database,
    <DB as Database>::Arguments<'a>: Default,
    &'a str: Encode<'a, DB> + Type<DB>,
    i64: Encode<'a, DB> + Type<DB>,
    i32: Encode<'a, DB> + Type<DB>,
{
    let mut qb = QueryBuilder::new("SELECT COUNT(*) FROM a2a_tasks");
    push_filters(&mut qb, owner, q);
    qb
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
    pub fn from_row<'r, R>(row: &'r R, id: &str) -> A2aResult<Self>
    where
        R: Row,
        &'static str: ColumnIndex<R>,
        i64: Decode<'r, R::Database> + Type<R::Database>,
        Vec<u8>: Decode<'r, R::Database> + Type<R::Database>,
    {
        let what = || format!("reading task {id}");
        Ok(Self {
            version: row.try_get("version").map_err(|e| db_error(&what(), e))?,
            head: row.try_get("head").map_err(|e| db_error(&what(), e))?,
            history: row.try_get("history").map_err(|e| db_error(&what(), e))?,
            artifacts: row.try_get("artifacts").map_err(|e| db_error(&what(), e))?,
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

/// Builds the `UPDATE` writing a task back after an update: the indexed
/// columns, the version and `updated_at`, and only the blobs that changed
/// (an artifact chunk rewrites the artifacts, not the history). With
/// `expected_version` the row is written only if nobody else wrote it since
/// it was read (optimistic concurrency): zero rows affected means a conflict.
pub(crate) fn update_query<'a, DB>(
    new: &'a TaskRow,
    old: &Stored,
    now: i64,
    expected_version: Option<i64>,
) -> QueryBuilder<'a, DB>
where
    DB: Database,
    <DB as Database>::Arguments<'a>: Default,
    &'a str: Encode<'a, DB> + Type<DB>,
    &'a [u8]: Encode<'a, DB> + Type<DB>,
    i64: Encode<'a, DB> + Type<DB>,
    i32: Encode<'a, DB> + Type<DB>,
    bool: Encode<'a, DB> + Type<DB>,
{
    update_query_after("", new, old, now, expected_version, None)
}

/// [`update_query`] after some SQL (the start of a `WITH` clause), also
/// recording the replica that wrote (`writer`) when given.
pub(crate) fn update_query_after<'a, DB>(
    prefix: &str,
    new: &'a TaskRow,
    old: &Stored,
    now: i64,
    expected_version: Option<i64>,
    writer: Option<&'a str>,
) -> QueryBuilder<'a, DB>
where
    DB: Database,
    <DB as Database>::Arguments<'a>: Default,
    &'a str: Encode<'a, DB> + Type<DB>,
    &'a [u8]: Encode<'a, DB> + Type<DB>,
    i64: Encode<'a, DB> + Type<DB>,
    i32: Encode<'a, DB> + Type<DB>,
    bool: Encode<'a, DB> + Type<DB>,
{
    let mut qb = QueryBuilder::new(format!("{prefix}UPDATE a2a_tasks SET state = "));
    qb.push_bind(new.state)
        .push(", status_millis = ")
        .push_bind(new.status_millis)
        .push(", has_status_time = ")
        .push_bind(new.has_status_time)
        .push(", updated_at = ")
        .push_bind(now)
        .push(", version = version + 1");
    if let Some(w) = writer {
        qb.push(", writer = ").push_bind(w);
    }
    if new.head != old.head {
        qb.push(", head = ").push_bind(new.head.as_slice());
    }
    if new.history != old.history {
        qb.push(", history = ").push_bind(new.history.as_slice());
    }
    if new.artifacts != old.artifacts {
        qb.push(", artifacts = ")
            .push_bind(new.artifacts.as_slice());
    }
    qb.push(" WHERE id = ").push_bind(new.id.as_str());
    if let Some(v) = expected_version {
        qb.push(" AND version = ").push_bind(v);
    }
    qb
}

/// Reads one row of a listing page (`id, status_millis, head, history,
/// artifacts, total`).
pub(crate) fn page_row<'r, R>(row: &'r R, history_length: Option<usize>) -> A2aResult<PageRow>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    Vec<u8>: Decode<'r, R::Database> + Type<R::Database>,
    Option<Vec<u8>>: Decode<'r, R::Database> + Type<R::Database>,
{
    let what = "reading a task listing";
    let id: String = row.try_get("id").map_err(|e| db_error(what, e))?;
    let millis: i64 = row
        .try_get("status_millis")
        .map_err(|e| db_error(what, e))?;
    let head: Vec<u8> = row.try_get("head").map_err(|e| db_error(what, e))?;
    let history: Option<Vec<u8>> = row.try_get("history").map_err(|e| db_error(what, e))?;
    let artifacts: Option<Vec<u8>> = row.try_get("artifacts").map_err(|e| db_error(what, e))?;
    let total: i64 = row.try_get("total").map_err(|e| db_error(what, e))?;
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

/// Builds the deletion of the push-notification configs of some tasks.
pub(crate) fn delete_push_query<'a, DB>(task_ids: &'a [String]) -> QueryBuilder<'a, DB>
where
    DB: Database,
    <DB as Database>::Arguments<'a>: Default,
    &'a str: Encode<'a, DB> + Type<DB>,
{
    let mut qb = QueryBuilder::new("DELETE FROM a2a_push_configs WHERE task_id IN (");
    let mut ids = qb.separated(", ");
    for id in task_ids {
        ids.push_bind(id.as_str());
    }
    qb.push(")");
    qb
}

/// The tasks an agent was at work on (`TASK_STATE_SUBMITTED` = 1,
/// `TASK_STATE_WORKING` = 2), for crash recovery; read with
/// [`unfinished_tasks`].
pub(crate) const UNFINISHED_SQL: &str = "SELECT id, owner_tenant, owner_principal, head, \
     history, artifacts FROM a2a_tasks WHERE state IN (1, 2)";

/// Decodes the rows of [`UNFINISHED_SQL`].
pub(crate) fn unfinished_tasks<'r, R>(rows: &'r [R]) -> A2aResult<Vec<super::StoredTask>>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    Vec<u8>: Decode<'r, R::Database> + Type<R::Database>,
{
    rows.iter()
        .map(|row| {
            let id: String = row
                .try_get("id")
                .map_err(|e| db_error("reading unfinished tasks", e))?;
            stored_task(row, &id, None)
        })
        .collect()
}

/// Reads a task with its owner from the columns `owner_tenant,
/// owner_principal, head, history, artifacts` of a row.
pub(crate) fn stored_task<'r, R>(
    row: &'r R,
    id: &str,
    history_length: Option<usize>,
) -> A2aResult<super::StoredTask>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    Vec<u8>: Decode<'r, R::Database> + Type<R::Database>,
{
    let what = || format!("reading task {id}");
    let owner = Owner {
        tenant: row
            .try_get("owner_tenant")
            .map_err(|e| db_error(&what(), e))?,
        principal: row
            .try_get("owner_principal")
            .map_err(|e| db_error(&what(), e))?,
    };
    let head: Vec<u8> = row.try_get("head").map_err(|e| db_error(&what(), e))?;
    let history: Vec<u8> = row.try_get("history").map_err(|e| db_error(&what(), e))?;
    let artifacts: Vec<u8> = row.try_get("artifacts").map_err(|e| db_error(&what(), e))?;
    let task = decode_task(id, &head, Some(&history), Some(&artifacts), history_length)?;
    Ok(super::StoredTask { owner, task })
}

/// One row of a listing page, decoded.
pub(crate) struct PageRow {
    pub cursor: Cursor,
    pub task: Task,
    pub total: i64,
}

/// Assembles a [`super::TaskPage`] from the rows of [`page_query`] (at most
/// one more than the page size).
pub(crate) fn assemble_page(
    mut rows: Vec<PageRow>,
    page_size: usize,
    total: usize,
) -> super::TaskPage {
    let next = if rows.len() > page_size && page_size > 0 {
        rows.truncate(page_size);
        rows.last().map(|r| r.cursor.clone())
    } else {
        rows.truncate(page_size);
        None
    };
    super::TaskPage {
        tasks: rows.into_iter().map(|r| r.task).collect(),
        next,
        total,
    }
}

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
