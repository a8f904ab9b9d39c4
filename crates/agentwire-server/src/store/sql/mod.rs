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
//!
//! Artifact updates are not written into the `artifacts` blob as they come:
//! each is appended to `a2a_artifact_chunks` (one small row, the update as
//! a `TaskArtifactUpdateEvent`), so a streamed artifact of N chunks costs N
//! small inserts instead of N rewrites of everything streamed so far. Every
//! read of a task's artifacts applies its chunks, in order, after the blob
//! (in the same statement, so from the same snapshot); when the agent's
//! turn ends (a terminal or interrupted state), the status write folds them
//! into the blob and deletes them, in one transaction holding the task.
//! Artifact updates touch nothing but artifacts and status updates nothing
//! but the status and history, so replaying the chunks after the blob gives
//! exactly the task that applying every update in turn would have.
//!
//! The totals of listings (`totalSize`) are not counted row by row: a store
//! whose dialect keeps counters ([`Dialect::COUNTED`]) keeps the number of
//! tasks per owner and state (`a2a_task_counts`) and per owner, context and
//! state (`a2a_context_counts`), changed in the transaction of the writes
//! that change them ([`Counts`], applied once per transaction), so a total
//! costs a few index lookups however many tasks match. Only a listing with a
//! status-time filter still counts its matching rows (through an index).

pub(crate) mod driver;
pub(crate) mod fault;
#[cfg(feature = "sqlite")]
pub(crate) mod lite;
#[cfg(feature = "sqlite")]
pub(crate) mod lock;
#[cfg(test)]
mod plans;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use agentwire_types::{
    A2aError, A2aResult, Artifact, Task, TaskArtifactUpdateEvent, TaskPushNotificationConfig,
    TaskState,
};
use prost::Message as _;

use self::driver::{Conn, Dialect, SqlRow, Stmt};
use super::{
    Cursor, LogSpan, Owner, PushFormat, StoredPushConfig, StoredTask, TaskPage, TaskQuery,
    TaskUpdate, Updated, apply_artifact, apply_update, closed_error, is_unreadable,
    unreadable_error,
};

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
    // A row written before generations were kept (A2A v1.1 draft): its
    // generation starts at 1 here, and counts from there.
    task.generation = task.generation.max(1);
    if task.id != id {
        return Err(unreadable_error(
            id,
            "head",
            format!("the row holds task {:?}", task.id),
        ));
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

/// The error of a stored part of a task that cannot be decoded: the task
/// is unreadable (see `store/unreadable.rs`).
fn corrupt(id: &str, column: &str, e: prost::DecodeError) -> A2aError {
    unreadable_error(id, column, e)
}

/// The row of an artifact update in `a2a_artifact_chunks`: the update as
/// a `TaskArtifactUpdateEvent` without task and context ids (and without
/// the event's metadata, which the task does not keep).
pub(crate) fn encode_chunk(artifact: Artifact, append: bool) -> Vec<u8> {
    TaskArtifactUpdateEvent {
        artifact: Some(artifact),
        append,
        ..Default::default()
    }
    .encode_to_vec()
}

/// Applies a task's logged artifact updates (`(seq, chunk)`, in any order)
/// after the artifacts it was read with, in the order they were written.
/// Each was checked against the task's state when it was written, so none
/// is refused now.
pub(crate) fn fold_chunks(
    id: &str,
    task: &mut Task,
    mut chunks: Vec<(i64, Vec<u8>)>,
) -> A2aResult<()> {
    chunks.sort_unstable_by_key(|(seq, _)| *seq);
    for (_, bytes) in chunks {
        let update = TaskArtifactUpdateEvent::decode(bytes.as_slice())
            .map_err(|e| corrupt(id, "artifact chunk", e))?;
        let artifact = update
            .artifact
            .ok_or_else(|| unreadable_error(id, "artifact chunk", "it has no artifact"))?;
        apply_artifact(task, artifact, update.append);
        // Each chunk was one step of the task's generation.
        task.generation += 1;
    }
    Ok(())
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

/// A push-notification config row (`config`, `format`) as stored.
fn stored_push<R: SqlRow>(r: &R, task_id: &str, id: &str) -> A2aResult<StoredPushConfig> {
    Ok(StoredPushConfig {
        config: decode_push(task_id, id, &r.blob("config")?)?,
        format: PushFormat::from_version(&r.text("format")?),
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
/// each with the total number of matching tasks. With artifacts, the page
/// is a `WITH` clause followed by the artifact chunks of its tasks, in one
/// statement (one snapshot): its rows are then the page's (`seq` 0, in no
/// particular order) and the chunks' ([`read_page`] sorts them out).
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
    let with_chunks = if q.include_artifacts {
        "WITH page AS ("
    } else {
        ""
    };
    let mut s = Stmt::new(format!(
        "{with_chunks}SELECT id, status_millis, head, {history} AS history, \
         {artifacts} AS artifacts, ("
    ));
    push_total::<D>(&mut s, owner, q);
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
    if q.include_artifacts {
        s.push(
            ") SELECT 0 AS seq, id, status_millis, head, history, artifacts, total FROM page \
             UNION ALL SELECT c.seq, c.task_id, NULL, NULL, NULL, c.chunk, NULL \
             FROM a2a_artifact_chunks c WHERE c.task_id IN (SELECT id FROM page)",
        );
    }
    s
}

/// The count query of a listing (used when the page is empty, so the total
/// did not come with it).
pub(crate) fn count_query<'a, D: Dialect>(owner: &'a Owner, q: &'a TaskQuery) -> Stmt<'a> {
    let mut s = Stmt::new("SELECT (");
    push_total::<D>(&mut s, owner, q);
    s.push(") AS total");
    s
}

/// Appends the query of a listing's total: the counters of the owner (and
/// context) where the dialect keeps them and the listing has no time
/// filter, else a count of the matching rows.
fn push_total<'a, D: Dialect>(s: &mut Stmt<'a>, owner: &'a Owner, q: &'a TaskQuery) {
    if !D::COUNTED || q.status_after.is_some() {
        s.push("SELECT COUNT(*) FROM a2a_tasks");
        push_filters(s, owner, q);
        return;
    }
    let table = match q.context_id {
        Some(_) => "a2a_context_counts",
        None => "a2a_task_counts",
    };
    // SUM is a BIGINT in SQLite and a NUMERIC in PostgreSQL.
    s.push(&format!(
        "SELECT CAST(COALESCE(SUM(n), 0) AS BIGINT) FROM {table} WHERE owner_tenant = "
    ))
    .bind(owner.tenant.as_str())
    .push(" AND owner_principal = ")
    .bind(owner.principal.as_str());
    if let Some(context) = q.context_id.as_deref() {
        s.push(" AND context_id = ").bind(context);
    }
    if let Some(state) = q.state {
        s.push(" AND state = ").bind(state as i32);
    }
}

/// The changes to the task counters of a transaction, applied once before
/// it commits ([`Tables::flush_counts`]): by owner, context and state, in
/// key order (two transactions take the counters' rows in the same order).
#[derive(Debug, Default)]
pub(crate) struct Counts {
    by_context: BTreeMap<(String, String, String, i32), i64>,
}

impl Counts {
    fn add(&mut self, owner: &Owner, context: &str, state: i32, n: i64) {
        let key = (
            owner.tenant.clone(),
            owner.principal.clone(),
            context.to_owned(),
            state,
        );
        *self.by_context.entry(key).or_default() += n;
    }

    /// Forgets the changes (their transaction was rolled back).
    #[cfg(any(feature = "sqlite", test))]
    pub fn clear(&mut self) {
        self.by_context.clear();
    }
}

/// The changes of a transaction to the task counters, as the rows to
/// write ([`Tables::take_counts`]): by owner and state, and by owner,
/// context and state, each in key order (two transactions take the rows in
/// the same order, so they cannot deadlock on them), none that adds up to
/// nothing.
pub(crate) struct CountRows {
    pub owners: Vec<((String, String, i32), i64)>,
    pub contexts: Vec<((String, String, String, i32), i64)>,
}

impl CountRows {
    /// The context counters that went down: only they can have reached
    /// zero, and a counter at zero is deleted (a context's counters would
    /// otherwise outlive its tasks).
    pub fn fell(&self) -> impl Iterator<Item = &((String, String, String, i32), i64)> {
        self.contexts.iter().filter(|(_, n)| *n < 0)
    }
}

/// The shard of the task counters that the next batch of this process
/// updates: batches in turn, from a start that differs between processes,
/// so that concurrent batches (of one replica or several) rarely share a
/// row. A task's count may move out of one shard and into another; only
/// their sum means anything.
pub(crate) fn next_count_shard(shards: u32) -> i32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT
        .fetch_add(1, Ordering::Relaxed)
        .wrapping_add(std::process::id());
    // At most COUNT_SHARDS (64): fits an i32.
    i32::try_from(n % shards.max(1)).unwrap_or(0)
}

/// Rows per statement of a counters' flush, largest first. A flush writes
/// every counter a batch changed in a few multi-row statements, one round
/// trip each, instead of one statement a row; a handful of sizes keeps the
/// distinct texts that each connection prepares few. (PostgreSQL's batches
/// write the same rows as arrays, one statement a table: `postgres/batch.rs`.)
#[cfg(any(feature = "sqlite", test))]
const COUNT_CHUNKS: [usize; 4] = [64, 16, 4, 1];

/// The text of a statement for each size of [`COUNT_CHUNKS`], made once.
#[cfg(any(feature = "sqlite", test))]
struct Texts([std::sync::OnceLock<String>; COUNT_CHUNKS.len()]);

#[cfg(any(feature = "sqlite", test))]
impl Texts {
    const fn new() -> Self {
        Self([const { std::sync::OnceLock::new() }; COUNT_CHUNKS.len()])
    }

    /// The text for `size` rows (one of [`COUNT_CHUNKS`]; any other size
    /// is made each time).
    fn get(
        &'static self,
        size: usize,
        make: impl FnOnce() -> String,
    ) -> std::borrow::Cow<'static, str> {
        match COUNT_CHUNKS.iter().position(|&s| s == size) {
            Some(i) => std::borrow::Cow::Borrowed(self.0[i].get_or_init(make).as_str()),
            None => std::borrow::Cow::Owned(make()),
        }
    }
}

/// `n` rows cut into the sizes of [`COUNT_CHUNKS`], largest first.
#[cfg(any(feature = "sqlite", test))]
fn count_chunks(mut n: usize) -> Vec<usize> {
    let mut sizes = Vec::new();
    for size in COUNT_CHUNKS {
        while n >= size {
            sizes.push(size);
            n -= size;
        }
    }
    sizes
}

/// `rows` cut into slices of the sizes of [`count_chunks`], in order.
#[cfg(any(feature = "sqlite", test))]
fn chunked<T>(rows: &[T]) -> Vec<&[T]> {
    let mut rest = rows;
    count_chunks(rows.len())
        .into_iter()
        .map(|size| {
            let (chunk, after) = rest.split_at(size);
            rest = after;
            chunk
        })
        .collect()
}

/// `VALUES` rows of `width` placeholders each, numbered from `$1`.
#[cfg(any(feature = "sqlite", test))]
fn values_rows(rows: usize, width: usize) -> String {
    let mut sql = String::with_capacity(rows * width * 5);
    for r in 0..rows {
        sql.push_str(if r == 0 { "(" } else { ", (" });
        for c in 0..width {
            if c > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&format!("${}", r * width + c + 1));
        }
        sql.push(')');
    }
    sql
}

/// Adds to `rows` counters of `table` at once: each row gives the key
/// columns of `columns` and `n` (in that order), and its `n` is added to
/// the stored one (keys are distinct within a statement).
#[cfg(any(feature = "sqlite", test))]
fn add_counts_sql(table: &str, columns: &[&str], conflict: &[&str], rows: usize) -> String {
    format!(
        "INSERT INTO {table} ({}) VALUES {} ON CONFLICT ({}) DO UPDATE SET n = {table}.n + excluded.n",
        columns.join(", "),
        values_rows(rows, columns.len()),
        conflict.join(", ")
    )
}

/// The columns of a counter of tasks by owner and state (with its shard
/// where [`Dialect::COUNT_SHARDS`] splits them), `n` among them, and its
/// key.
#[cfg(any(feature = "sqlite", test))]
const TASK_COUNT_COLUMNS: [&str; 4] = ["owner_tenant", "owner_principal", "state", "n"];
#[cfg(any(feature = "sqlite", test))]
const TASK_COUNT_SHARD_COLUMNS: [&str; 5] =
    ["owner_tenant", "owner_principal", "state", "n", "shard"];
#[cfg(any(feature = "sqlite", test))]
const TASK_COUNT_KEY: [&str; 3] = ["owner_tenant", "owner_principal", "state"];
#[cfg(any(feature = "sqlite", test))]
const TASK_COUNT_SHARD_KEY: [&str; 4] = ["owner_tenant", "owner_principal", "state", "shard"];
/// The columns of a counter of tasks by owner, context and state, and its
/// key.
#[cfg(any(feature = "sqlite", test))]
const CONTEXT_COUNT_COLUMNS: [&str; 5] = [
    "owner_tenant",
    "owner_principal",
    "context_id",
    "state",
    "n",
];
#[cfg(any(feature = "sqlite", test))]
const CONTEXT_COUNT_KEY: [&str; 4] = ["owner_tenant", "owner_principal", "context_id", "state"];

/// Deletes those of `rows` counters of contexts that fell to zero (a
/// context's counters would otherwise outlive its tasks). The keys are
/// alternatives (`OR`), which both databases look up in the key's index;
/// PostgreSQL scanned the whole table for `(key) IN (VALUES ...)` of 16
/// rows.
#[cfg(any(feature = "sqlite", test))]
fn drop_context_counts_sql(rows: usize) -> String {
    let mut sql = String::from("DELETE FROM a2a_context_counts WHERE n = 0 AND (");
    for r in 0..rows {
        let p = r * 4;
        if r > 0 {
            sql.push_str(" OR ");
        }
        sql.push_str(&format!(
            "(owner_tenant = ${} AND owner_principal = ${} AND context_id = ${} AND state = ${})",
            p + 1,
            p + 2,
            p + 3,
            p + 4
        ));
    }
    sql.push(')');
    sql
}

/// The blobs and version of a task as read before an update.
pub(crate) struct Stored {
    pub version: i64,
    pub owner: Owner,
    pub head: Vec<u8>,
    pub history: Vec<u8>,
    /// `None` when the update did not read them (a status or a message
    /// changes no artifact): they are then not written either.
    pub artifacts: Option<Vec<u8>>,
    /// Whether the task has artifact chunks not folded into `artifacts`
    /// (read by a status update without the artifacts).
    pub chunked: bool,
    /// How many (each one step of the task's generation after its head's).
    pub chunks: i64,
}

impl Stored {
    /// Reads the columns `version, owner_tenant, owner_principal, head,
    /// history, artifacts` of a row.
    pub fn from_row(row: &impl SqlRow) -> A2aResult<Self> {
        Ok(Self {
            version: row.i64("version")?,
            owner: row_owner(row)?,
            head: row.blob("head")?,
            history: row.blob("history")?,
            artifacts: Some(row.blob("artifacts")?),
            chunked: false,
            chunks: 0,
        })
    }

    /// Reads the columns `version, owner_tenant, owner_principal, head,
    /// history, chunked` of a row (of [`READ_STATUS`], or of
    /// [`READ_STATUS_ONLY`]: a history not read is empty).
    fn status_row(row: &impl SqlRow) -> A2aResult<Self> {
        Ok(Self {
            version: row.i64("version")?,
            owner: row_owner(row)?,
            head: row.blob("head")?,
            history: row.opt_blob("history")?.unwrap_or_default(),
            artifacts: None,
            chunked: row.i64("chunks")? > 0,
            chunks: row.i64("chunks")?,
        })
    }

    /// The task as read (without artifacts when they were not).
    pub fn task(&self, id: &str) -> A2aResult<Task> {
        decode_task(
            id,
            &self.head,
            Some(&self.history),
            self.artifacts.as_deref(),
            None,
        )
    }
}

/// The `UPDATE` writing a task back after an update: the indexed columns,
/// the version and `updated_at`, and only the blobs that changed (and
/// never the artifacts when they were not read). With
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
    if old.artifacts.as_ref().is_some_and(|a| *a != new.artifacts) {
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
    // An unreadable task is skipped, not the whole page (see
    // `assemble_page`).
    let task = decode_task(
        &id,
        &head,
        history.as_deref(),
        artifacts.as_deref(),
        history_length,
    );
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

/// The owner of a row (`owner_tenant, owner_principal`).
fn row_owner(row: &impl SqlRow) -> A2aResult<Owner> {
    Ok(Owner {
        tenant: row.text("owner_tenant")?,
        principal: row.text("owner_principal")?,
    })
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

/// The rows of [`page_query`], decoded, in listing order (with their
/// artifact chunks applied when the query has them).
fn read_page<R: SqlRow>(rows: &[R], q: &TaskQuery) -> A2aResult<Vec<PageRow>> {
    if !q.include_artifacts {
        return rows.iter().map(|r| page_row(r, q.history_length)).collect();
    }
    let mut page = Vec::new();
    let mut chunks: HashMap<String, Vec<(i64, Vec<u8>)>> = HashMap::new();
    for r in rows {
        match r.i64("seq")? {
            0 => page.push(page_row(r, q.history_length)?),
            seq => chunks
                .entry(r.text("id")?)
                .or_default()
                .push((seq, r.blob("artifacts")?)),
        }
    }
    for p in &mut page {
        if let (Some(c), Ok(task)) = (chunks.remove(&p.cursor.id), &mut p.task)
            && let Err(e) = fold_chunks(&p.cursor.id, task, c)
        {
            p.task = Err(e);
        }
    }
    // Listing order: status timestamp, then id, descending.
    page.sort_unstable_by(|a, b| b.cursor.cmp(&a.cursor));
    Ok(page)
}

/// A task with its owner from the rows of [`GET_TASK`] (or a statement of
/// the same shape): the task's row (`seq` 0), and its artifact chunks. The
/// task's row too, for the caller's other columns.
pub(crate) fn task_from_rows<'r, R: SqlRow>(
    rows: &'r [R],
    id: &str,
    history_length: Option<usize>,
) -> A2aResult<Option<(StoredTask, &'r R)>> {
    let mut found = None;
    let mut chunks = Vec::new();
    for r in rows {
        match r.i64("seq")? {
            0 => found = Some(r),
            seq => chunks.push((seq, r.blob("artifacts")?)),
        }
    }
    let Some(row) = found else {
        return Ok(None);
    };
    let mut stored = stored_task(row, id, history_length)?;
    fold_chunks(id, &mut stored.task, chunks)?;
    Ok(Some((stored, row)))
}

/// One row of a listing page, decoded (or the error of a task that cannot
/// be read).
struct PageRow {
    cursor: Cursor,
    task: A2aResult<Task>,
    total: i64,
}

/// Assembles a [`TaskPage`] from the rows of [`page_query`] (at most one
/// more than the page size). A task that cannot be read is left out of the
/// page (its row still moves the cursor on, so paging goes past it); the
/// errors of those left out come back beside the page.
fn assemble_page(
    mut rows: Vec<PageRow>,
    page_size: usize,
    total: usize,
) -> (TaskPage, Vec<A2aError>) {
    let next = if rows.len() > page_size && page_size > 0 {
        rows.truncate(page_size);
        rows.last().map(|r| r.cursor.clone())
    } else {
        rows.truncate(page_size);
        None
    };
    let mut unreadable = Vec::new();
    let tasks = rows
        .into_iter()
        .filter_map(|r| r.task.map_err(|e| unreadable.push(e)).ok())
        .collect();
    (TaskPage { tasks, next, total }, unreadable)
}

// The statements of the task store. `$n` placeholders (see `driver.rs`).

/// A new task (none when the id exists: no failing statement, which would
/// abort PostgreSQL's transaction of a whole batch).
#[cfg(any(feature = "sqlite", test))]
const INSERT_TASK: &str = "INSERT INTO a2a_tasks (id, context_id, owner_tenant, owner_principal, \
     state, status_millis, has_status_time, head, history, artifacts, created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11) ON CONFLICT (id) DO NOTHING";
/// A task with its owner (`seq` 0), then its artifact chunks (`seq` > 0,
/// the chunk in `artifacts`): one statement, one snapshot.
pub(crate) const GET_TASK: &str = "SELECT 0 AS seq, owner_tenant, owner_principal, head, \
     history, artifacts FROM a2a_tasks WHERE id = $1 \
     UNION ALL SELECT seq, NULL, NULL, NULL, NULL, chunk FROM a2a_artifact_chunks \
     WHERE task_id = $1";
/// A task as a status update or a message reads it: no artifacts (they do
/// not change), whether it has artifact chunks to fold.
const READ_STATUS: &str = "SELECT version, owner_tenant, owner_principal, head, history, \
     (SELECT COUNT(*) FROM a2a_artifact_chunks WHERE task_id = $1) AS chunks \
     FROM a2a_tasks WHERE id = $1";
/// [`READ_STATUS`] for a status update without a message, which leaves
/// the history as it is: the history is not read (it may be megabytes,
/// which would be decoded and encoded again for nothing), and so not
/// written back either (the row's `history` is empty on both sides).
const READ_STATUS_ONLY: &str = "SELECT version, owner_tenant, owner_principal, head, \
     CAST(NULL AS BYTEA) AS history, \
     (SELECT COUNT(*) FROM a2a_artifact_chunks WHERE task_id = $1) AS chunks \
     FROM a2a_tasks WHERE id = $1";
/// A task as an update in a transaction reads it (followed by the
/// dialect's row lock), then its chunks ([`CHUNKS_OF`]).
const READ_FOR_UPDATE: &str = "SELECT version, owner_tenant, owner_principal, head, history, \
     artifacts FROM a2a_tasks WHERE id = $1";
/// The artifact chunks of a task.
const CHUNKS_OF: &str = "SELECT seq, chunk FROM a2a_artifact_chunks WHERE task_id = $1";
/// Deletes the artifact chunks of a task (folded into its artifacts).
const DELETE_CHUNKS: &str = "DELETE FROM a2a_artifact_chunks WHERE task_id = $1";
/// What an artifact update reads of its task.
const STATE_OF: &str = "SELECT state, context_id FROM a2a_tasks WHERE id = $1";
/// What an artifact update reads of its task: its state, context, head
/// (its generation) and how many chunks follow the head (each one
/// generation).
const APPEND_READ: &str = "SELECT state, context_id, head, \
     (SELECT COUNT(*) FROM a2a_artifact_chunks WHERE task_id = $1) AS chunks \
     FROM a2a_tasks WHERE id = $1";
/// The tasks an agent was at work on (`TASK_STATE_SUBMITTED` = 1,
/// `TASK_STATE_WORKING` = 2), for crash recovery (`seq` 0), then their
/// artifact chunks (`seq` > 0, the chunk in `artifacts`).
const UNFINISHED: &str = "SELECT 0 AS seq, id, owner_tenant, owner_principal, head, history, \
     artifacts FROM a2a_tasks WHERE state IN (1, 2) \
     UNION ALL SELECT c.seq, c.task_id, NULL, NULL, NULL, NULL, c.chunk \
     FROM a2a_artifact_chunks c \
     WHERE c.task_id IN (SELECT id FROM a2a_tasks WHERE state IN (1, 2))";
const PUT_PUSH_CONFIG: &str = "INSERT INTO a2a_push_configs (task_id, id, config, format) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (task_id, id) \
     DO UPDATE SET config = excluded.config, format = excluded.format";
const GET_PUSH_CONFIG: &str =
    "SELECT config, format FROM a2a_push_configs WHERE task_id = $1 AND id = $2";
/// In the order they were added.
const LIST_PUSH_CONFIGS: &str =
    "SELECT id, config, format FROM a2a_push_configs WHERE task_id = $1 ORDER BY seq";
const DELETE_PUSH_CONFIG: &str = "DELETE FROM a2a_push_configs WHERE task_id = $1 AND id = $2";
/// Sets a task's row aside (`$3`, with the reason `$1` at `$2`): a copy
/// in `a2a_unreadable_tasks`, as it was (a row set aside before under the
/// same id is replaced).
const SET_ASIDE: &str = "INSERT INTO a2a_unreadable_tasks (id, context_id, owner_tenant, \
     owner_principal, state, head, history, artifacts, created_at, updated_at, reason, \
     set_aside_at) SELECT id, context_id, owner_tenant, owner_principal, state, head, history, \
     artifacts, created_at, updated_at, $1, $2 FROM a2a_tasks WHERE id = $3 \
     ON CONFLICT (id) DO UPDATE SET context_id = excluded.context_id, \
     owner_tenant = excluded.owner_tenant, owner_principal = excluded.owner_principal, \
     state = excluded.state, head = excluded.head, history = excluded.history, \
     artifacts = excluded.artifacts, created_at = excluded.created_at, \
     updated_at = excluded.updated_at, reason = excluded.reason, \
     set_aside_at = excluded.set_aside_at";
/// The task's row, once copied aside (its counters follow it out).
const DELETE_SET_ASIDE: &str = "DELETE FROM a2a_tasks WHERE id = $1 \
     RETURNING owner_tenant, owner_principal, context_id, state";
/// A task set aside: why and when.
const GET_SET_ASIDE: &str = "SELECT reason, set_aside_at FROM a2a_unreadable_tasks WHERE id = $1";
/// The id and owner of every open task ([`Dialect::OPEN`]): the count of each caller's open
/// tasks at start-up, read from the index `a2a_tasks_open` alone.
pub(crate) fn open_task_owners<D: Dialect>() -> String {
    format!(
        "SELECT id, owner_tenant, owner_principal FROM a2a_tasks WHERE {}",
        D::OPEN
    )
}
/// The owner of a task, kept or set aside.
const OWNER_OF: &str = "SELECT owner_tenant, owner_principal FROM a2a_tasks WHERE id = $1 \
     UNION ALL SELECT owner_tenant, owner_principal FROM a2a_unreadable_tasks WHERE id = $1";

/// The deletion of one batch of a purge: terminal tasks last changed at or
/// before `$1`, at most `$2` of them; their ids.
pub(crate) fn purge_query<D: Dialect>() -> String {
    format!(
        "DELETE FROM a2a_tasks WHERE id IN (SELECT id FROM a2a_tasks \
         WHERE {} AND updated_at <= $1 LIMIT $2{}) \
         RETURNING id, owner_tenant, owner_principal, context_id, state",
        D::TERMINAL,
        D::SKIP_LOCKED
    )
}

/// The insert of an artifact update's chunk (`$1`) of task `$2`, made only
/// while the task is not in a terminal state, holding its row (PostgreSQL:
/// the lock orders it with the task's other writes). `prefix` is SQL
/// before it (the start of a `WITH` clause).
pub(crate) fn append_query<D: Dialect>(prefix: &str) -> String {
    format!(
        "{prefix}INSERT INTO a2a_artifact_chunks (task_id, chunk) SELECT id, $1 FROM a2a_tasks \
         WHERE id = $2 AND NOT {}{}",
        D::TERMINAL,
        D::LOCK_ROWS
    )
}

/// The insert of a new task: [`INSERT_TASK`] with its arguments.
#[cfg(any(feature = "sqlite", test))]
fn insert_task<'a>(row: &'a TaskRow, owner: &'a Owner, now: i64) -> Stmt<'a> {
    Stmt::new(INSERT_TASK)
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
    /// The recorded form of an update's event, if it has one, carrying
    /// the task's generation after it.
    fn update_event(
        &self,
        task_id: &str,
        context_id: &str,
        update: &TaskUpdate,
        generation: i64,
    ) -> Option<Vec<u8>>;
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
    /// The append of an artifact update's `chunk` ([`append_query`])
    /// recording `event`: one row (`before`, `after`) when the chunk was
    /// written, none when the task is missing or terminal.
    fn append<'a>(
        &'a self,
        task_id: &'a str,
        chunk: &'a [u8],
        now: i64,
        event: &'a [u8],
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
#[cfg(any(feature = "sqlite", test))]
pub(crate) enum NoLog {}

#[cfg(any(feature = "sqlite", test))]
impl<D: Dialect> EventLog<D> for NoLog {
    fn update_event(&self, _: &str, _: &str, _: &TaskUpdate, _: i64) -> Option<Vec<u8>> {
        match *self {}
    }
    fn append<'a>(&'a self, _: &'a str, _: &'a [u8], _: i64, _: &'a [u8]) -> Stmt<'a> {
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
    /// Where the writes record their changes to the task counters, for a
    /// writer whose transactions apply them before committing
    /// ([`Tables::flush_counts`]); `None` for a reader.
    pub counts: Option<Arc<parking_lot::Mutex<Counts>>>,
    /// Unreadable task rows met (set aside, skipped in listings, refused
    /// to a read): `TaskStore::unreadable_rows`, shared by the store's
    /// tables.
    pub unreadable: Arc<AtomicU64>,
}

impl<D: Dialect> Tables<D> {
    /// Both roles on one pool.
    pub fn one_pool(pool: D::Pool) -> Self {
        Self {
            writer: pool.clone(),
            reader: pool,
            counts: None,
            unreadable: Arc::default(),
        }
    }

    /// Counts the unreadable rows it meets in `seen` (shared with the
    /// store's other tables).
    pub fn counting_unreadable(mut self, seen: &Arc<AtomicU64>) -> Self {
        self.unreadable = Arc::clone(seen);
        self
    }

    /// Counts and logs an unreadable task row met by `what`.
    fn met_unreadable(&self, e: &A2aError, what: &str) {
        self.unreadable.fetch_add(1, Ordering::Relaxed);
        let task = e.metadata.get("taskId").map_or("", String::as_str);
        tracing::warn!(
            task,
            error = %e.message,
            "task store: {what} met a task it cannot read (see docs/operations.md, \
             \"Task store files and unreadable tasks\")"
        );
    }

    /// [`Tables::one_pool`] for a writer that applies the counters' changes
    /// before each commit.
    pub fn counting(pool: D::Pool) -> Self {
        Self {
            counts: D::COUNTED.then(Default::default),
            ..Self::one_pool(pool)
        }
    }

    /// Records a change to the task counters (applied with the
    /// transaction's other writes).
    pub(crate) fn count(&self, owner: &Owner, context: &str, state: i32, n: i64) {
        if let Some(c) = &self.counts {
            c.lock().add(owner, context, state, n);
        }
    }

    /// Records a task leaving state `from` for `to`.
    fn count_move(&self, owner: &Owner, context: &str, from: i32, to: i32) {
        if from != to {
            self.count(owner, context, from, -1);
            self.count(owner, context, to, 1);
        }
    }

    /// Applies the recorded changes to the task counters (in the writer's
    /// transaction, before it commits), in multi-row statements of the
    /// sizes of [`COUNT_CHUNKS`].
    #[cfg(any(feature = "sqlite", test))]
    pub async fn flush_counts(&self) -> A2aResult<()> {
        let Some(rows) = self.take_counts() else {
            return Ok(());
        };
        let what = "counting tasks";
        let mut conn = D::on(&self.writer);
        let shard = (D::COUNT_SHARDS > 1).then(|| next_count_shard(D::COUNT_SHARDS));
        let (columns, key): (&[&str], &[&str]) = if shard.is_some() {
            (&TASK_COUNT_SHARD_COLUMNS, &TASK_COUNT_SHARD_KEY)
        } else {
            (&TASK_COUNT_COLUMNS, &TASK_COUNT_KEY)
        };
        // The statements' text is made once per size (its formatting was
        // about 8,000 instructions of every batch).
        static OWNERS: Texts = Texts::new();
        static OWNERS_SHARDED: Texts = Texts::new();
        static CONTEXTS: Texts = Texts::new();
        static FELL: Texts = Texts::new();
        let owners = if shard.is_some() {
            &OWNERS_SHARDED
        } else {
            &OWNERS
        };
        for chunk in chunked(&rows.owners) {
            let size = chunk.len();
            let sql = owners.get(size, || {
                add_counts_sql("a2a_task_counts", columns, key, size)
            });
            let mut s = Stmt::new(sql);
            for ((tenant, principal, state), n) in chunk {
                s = s.arg(tenant).arg(principal).arg(*state).arg(*n);
                if let Some(shard) = shard {
                    s = s.arg(shard);
                }
            }
            conn.execute(s).await.map_err(|e| fail::<D>(what, e))?;
        }
        for chunk in chunked(&rows.contexts) {
            let size = chunk.len();
            let sql = CONTEXTS.get(size, || {
                add_counts_sql(
                    "a2a_context_counts",
                    &CONTEXT_COUNT_COLUMNS,
                    &CONTEXT_COUNT_KEY,
                    size,
                )
            });
            let mut s = Stmt::new(sql);
            for ((tenant, principal, context, state), n) in chunk {
                s = s
                    .arg(tenant)
                    .arg(principal)
                    .arg(context)
                    .arg(*state)
                    .arg(*n);
            }
            conn.execute(s).await.map_err(|e| fail::<D>(what, e))?;
        }
        let fell: Vec<_> = rows.fell().collect();
        for chunk in chunked(&fell) {
            let size = chunk.len();
            let mut s = Stmt::new(FELL.get(size, || drop_context_counts_sql(size)));
            for ((tenant, principal, context, state), _) in chunk {
                s = s.arg(tenant).arg(principal).arg(context).arg(*state);
            }
            conn.execute(s).await.map_err(|e| fail::<D>(what, e))?;
        }
        Ok(())
    }

    /// Takes the changes to the task counters recorded since the last
    /// flush, as the rows to write (`None`: nothing changed).
    pub(crate) fn take_counts(&self) -> Option<CountRows> {
        let by_context = std::mem::take(&mut self.counts.as_ref()?.lock().by_context);
        if by_context.is_empty() {
            return None;
        }
        let mut by_owner: BTreeMap<(String, String, i32), i64> = BTreeMap::new();
        for ((tenant, principal, _, state), n) in &by_context {
            *by_owner
                .entry((tenant.clone(), principal.clone(), *state))
                .or_default() += n;
        }
        Some(CountRows {
            owners: by_owner.into_iter().filter(|(_, n)| *n != 0).collect(),
            contexts: by_context.into_iter().filter(|(_, n)| *n != 0).collect(),
        })
    }

    /// `TaskStore::create` (a store with an event log records no event for
    /// it: see the PostgreSQL store's batches, which create its tasks).
    #[cfg(test)]
    pub async fn create(&self, owner: &Owner, task: Task) -> A2aResult<()> {
        self.create_row(owner, TaskRow::encode(task)).await
    }

    /// [`Self::create`] of a task encoded already (the SQLite store encodes
    /// it before it is queued for its writer thread, which then only
    /// writes it).
    #[cfg(any(feature = "sqlite", test))]
    pub async fn create_row(&self, owner: &Owner, row: TaskRow) -> A2aResult<()> {
        let written = D::on(&self.writer)
            .execute(insert_task(&row, owner, now_millis()))
            .await;
        match written {
            Ok(n) if n > 0 => {}
            Ok(_) => return Err(duplicate(&row.id)),
            Err(e) if D::is_unique_violation(&e) => return Err(duplicate(&row.id)),
            Err(e) => return Err(fail::<D>(&format!("creating task {}", row.id), e)),
        }
        self.count(owner, &row.context_id, row.state, 1);
        Ok(())
    }

    /// `TaskStore::update`: an artifact update is appended as a chunk
    /// ([`Tables::append`]). A status or a message reads the task (without
    /// its artifacts) without a lock, applies the update and writes it back
    /// if its version is unchanged; on a conflict (another process or
    /// replica, or a caller that bypasses the task manager, which
    /// serialises the updates of a task), or when the update ends the turn
    /// of a task with chunks (they are then folded), it redoes the whole
    /// step in a write transaction holding the row, so that no update is
    /// lost and none starves.
    pub async fn update<L: EventLog<D>>(
        &self,
        task_id: &str,
        update: TaskUpdate,
        log: Option<&L>,
    ) -> A2aResult<Updated> {
        if let TaskUpdate::Artifact { .. } = update {
            return self.append(task_id, update, log).await;
        }
        let what = || format!("updating task {task_id}");
        let read = match &update {
            TaskUpdate::Status { status, .. } if status.message.is_none() => READ_STATUS_ONLY,
            _ => READ_STATUS,
        };
        let row = D::on(&self.reader)
            .fetch_optional(Stmt::new(read).arg(task_id))
            .await
            .map_err(|e| fail::<D>(&what(), e))?
            .ok_or_else(|| A2aError::task_not_found(task_id))?;
        let old = Stored::status_row(&row)?;
        let mut task = old.task(task_id)?;
        let before = task.state() as i32;
        apply_update(&mut task, update.clone())?;
        let state = task.state();
        if old.chunked && state.ends_turn() {
            return self.update_locked(task_id, update, log).await;
        }
        // The head's generation, and one per chunk after it.
        let generation = task.generation + old.chunks;
        let event =
            log.and_then(|l| l.update_event(&task.id, &task.context_id, &update, generation));
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
                    self.count_move(&old.owner, &new.context_id, before, new.state);
                    return Ok(Updated::new(state).at_generation(generation));
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
                    self.count_move(&old.owner, &new.context_id, before, new.state);
                    let (span, after) = logged_span(&r)?;
                    if let Some(seq) = after {
                        l.announce(task_id, seq);
                    }
                    return Ok(Updated::new(state).logged(span).at_generation(generation));
                }
            }
        }
        self.update_locked(task_id, update, log).await
    }

    /// An artifact update: appended to the task's chunks (one small row,
    /// whatever the task holds already), only while the task is open.
    async fn append<L: EventLog<D>>(
        &self,
        task_id: &str,
        update: TaskUpdate,
        log: Option<&L>,
    ) -> A2aResult<Updated> {
        let what = || format!("updating task {task_id}");
        // PostgreSQL: holding the task's row from here to the commit, so
        // the next statement (a new snapshot) sees the task's last event.
        let (state, context_id, generation) = self.append_read(task_id).await?;
        if state.is_terminal() {
            return Err(closed_error(task_id, state));
        }
        let event = log.and_then(|l| l.update_event(task_id, &context_id, &update, generation));
        let TaskUpdate::Artifact {
            artifact, append, ..
        } = update
        else {
            return Err(A2aError::internal("task store: not an artifact update"));
        };
        let chunk = encode_chunk(artifact, append);
        let mut conn = D::on(&self.writer);
        match (log, event) {
            (Some(l), Some(event)) => {
                let written = conn
                    .fetch_optional(l.append(task_id, &chunk, now_millis(), &event))
                    .await
                    .map_err(|e| fail::<D>(&what(), e))?;
                if let Some(r) = written {
                    let (span, after) = logged_span(&r)?;
                    if let Some(seq) = after {
                        l.announce(task_id, seq);
                    }
                    return Ok(Updated::new(state).logged(span).at_generation(generation));
                }
            }
            _ => {
                let sql = append_query::<D>("");
                let written = conn
                    .execute(Stmt::new(sql.as_str()).arg(&chunk).arg(task_id))
                    .await
                    .map_err(|e| fail::<D>(&what(), e))?;
                if written == 1 {
                    return Ok(Updated::new(state).at_generation(generation));
                }
            }
        }
        // The task ended (or went) between the read and the write: another
        // replica, or a caller that bypasses the task manager.
        let (state, _) = self.state_of(task_id, "").await?;
        Err(if state.is_terminal() {
            closed_error(task_id, state)
        } else {
            A2aError::internal(format!(
                "task store: the artifact update of task {task_id} was not written"
            ))
        })
    }

    /// What an artifact update reads (PostgreSQL: holding the task's row
    /// until the commit): the task's state, context, and its generation
    /// once the update is applied (the head's, one per chunk logged after
    /// it, and one for this update).
    async fn append_read(&self, task_id: &str) -> A2aResult<(TaskState, String, i64)> {
        let row = D::on(&self.reader)
            .fetch_optional(Stmt::new(format!("{APPEND_READ}{}", D::LOCK_ROWS)).arg(task_id))
            .await
            .map_err(|e| fail::<D>(&format!("reading task {task_id}"), e))?
            .ok_or_else(|| A2aError::task_not_found(task_id))?;
        let n = row.i32("state")?;
        let state = TaskState::try_from(n).map_err(|_| {
            A2aError::internal(format!("task store: task {task_id} has the bad state {n}"))
        })?;
        let head =
            Task::decode(row.blob("head")?.as_slice()).map_err(|e| corrupt(task_id, "head", e))?;
        let generation = head.generation.max(1) + row.i64("chunks")? + 1;
        Ok((state, row.text("context_id")?, generation))
    }

    /// The state and context of a task (`TaskNotFound` when it is unknown),
    /// read with `lock` (the dialect's row lock, or nothing).
    async fn state_of(&self, task_id: &str, lock: &str) -> A2aResult<(TaskState, String)> {
        let row = D::on(&self.reader)
            .fetch_optional(Stmt::new(format!("{STATE_OF}{lock}")).arg(task_id))
            .await
            .map_err(|e| fail::<D>(&format!("reading task {task_id}"), e))?
            .ok_or_else(|| A2aError::task_not_found(task_id))?;
        let n = row.i32("state")?;
        let state = TaskState::try_from(n).map_err(|_| {
            A2aError::internal(format!("task store: task {task_id} has the bad state {n}"))
        })?;
        Ok((state, row.text("context_id")?))
    }

    /// Applies an update in a write transaction holding the task (the slow
    /// path, after a conflict, and the end of a turn with chunks): the
    /// task's artifact chunks are folded into its artifacts and deleted.
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
        // Holding the row: no chunk can be appended until the commit.
        let chunks = tx
            .fetch_all(Stmt::new(CHUNKS_OF).arg(task_id))
            .await
            .map_err(|e| fail::<D>(&what(), e))?
            .iter()
            .map(|r| Ok((r.i64("seq")?, r.blob("chunk")?)))
            .collect::<A2aResult<Vec<_>>>()?;
        let folded = !chunks.is_empty();
        fold_chunks(task_id, &mut task, chunks)?;
        let before = task.state() as i32;
        let event_update = log.map(|_| update.clone());
        apply_update(&mut task, update)?;
        let state = task.state();
        let generation = task.generation;
        let event = log
            .zip(event_update.as_ref())
            .and_then(|(l, u)| l.update_event(&task.id, &task.context_id, u, generation));
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
        if folded {
            tx.execute(Stmt::new(DELETE_CHUNKS).arg(task_id))
                .await
                .map_err(|e| fail::<D>(&what(), e))?;
        }
        D::commit(tx).await.map_err(|e| fail::<D>(&what(), e))?;
        self.count_move(&old.owner, &new.context_id, before, new.state);
        Ok(match logged {
            None => Updated::new(state).at_generation(generation),
            Some((l, (span, after))) => {
                if let Some(seq) = after {
                    l.announce(task_id, seq);
                }
                Updated::new(state).logged(span).at_generation(generation)
            }
        })
    }

    /// `TaskStore::get`.
    pub async fn get(
        &self,
        task_id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<StoredTask>> {
        let what = || format!("reading task {task_id}");
        let mut conn = D::on(&self.reader);
        let rows = conn
            .fetch_all(Stmt::new(GET_TASK).arg(task_id))
            .await
            .map_err(|e| fail::<D>(&what(), e))?;
        match task_from_rows(&rows, task_id, history_length) {
            Ok(Some((t, _))) => return Ok(Some(t)),
            Ok(None) => {}
            Err(e) => {
                if is_unreadable(&e) {
                    self.met_unreadable(&e, "a read");
                }
                return Err(e);
            }
        }
        // Not there: it may have been set aside (crash recovery).
        let aside = conn
            .fetch_optional(Stmt::new(GET_SET_ASIDE).arg(task_id))
            .await
            .map_err(|e| fail::<D>(&what(), e))?;
        match aside {
            None => Ok(None),
            Some(r) => Err(super::unreadable::set_aside_error(
                task_id,
                &r.text("reason")?,
                r.i64("set_aside_at")?,
            )),
        }
    }

    /// `TaskStore::owner_of`: the owner of a task kept, or set aside.
    pub async fn owner_of(&self, task_id: &str) -> A2aResult<Option<Owner>> {
        let row = D::on(&self.reader)
            .fetch_optional(Stmt::new(OWNER_OF).arg(task_id))
            .await
            .map_err(|e| fail::<D>(&format!("reading the owner of task {task_id}"), e))?;
        row.map(|r| row_owner(&r)).transpose()
    }

    /// `TaskStore::open_task_owners`: the id and owner of every open task.
    pub async fn open_task_owners(&self) -> A2aResult<Vec<(String, Owner)>> {
        let rows = D::on(&self.reader)
            .fetch_all(Stmt::new(open_task_owners::<D>()))
            .await
            .map_err(|e| fail::<D>("reading the owners of the open tasks", e))?;
        rows.iter()
            .map(|r| Ok((r.text("id")?, row_owner(r)?)))
            .collect()
    }

    /// Sets an unreadable task's row aside (crash recovery): moved to
    /// `a2a_unreadable_tasks` as it was, with `reason`, in one
    /// transaction; its artifact chunks and push configs stay where they
    /// are, under its id. Whether a row was moved.
    pub async fn set_aside(&self, task_id: &str, reason: &str) -> A2aResult<bool> {
        let what = format!("setting task {task_id} aside");
        let mut tx = D::begin(&self.writer)
            .await
            .map_err(|e| fail::<D>(&what, e))?;
        tx.execute(
            Stmt::new(SET_ASIDE)
                .arg(reason)
                .arg(now_millis())
                .arg(task_id),
        )
        .await
        .map_err(|e| fail::<D>(&what, e))?;
        let gone = tx
            .fetch_optional(Stmt::new(DELETE_SET_ASIDE).arg(task_id))
            .await
            .map_err(|e| fail::<D>(&what, e))?;
        D::commit(tx).await.map_err(|e| fail::<D>(&what, e))?;
        let Some(r) = gone else {
            return Ok(false);
        };
        self.count(&row_owner(&r)?, &r.text("context_id")?, r.i32("state")?, -1);
        Ok(true)
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
        let rows = read_page(&rows, query)?;
        let total = match rows.first() {
            Some(r) => r.total,
            None => match conn
                .fetch_optional(count_query::<D>(owner, query))
                .await
                .map_err(|e| fail::<D>(what, e))?
            {
                Some(r) => r.i64("total")?,
                None => 0,
            },
        };
        let (page, unreadable) = assemble_page(rows, query.page_size, count(total)?);
        for e in &unreadable {
            self.met_unreadable(e, "a listing");
        }
        Ok(page)
    }

    /// `TaskStore::put_push_config`.
    pub async fn put_push_config(&self, stored: &StoredPushConfig) -> A2aResult<()> {
        let config = &stored.config;
        let blob = encode_push(config);
        let s = Stmt::new(PUT_PUSH_CONFIG)
            .arg(&config.task_id)
            .arg(&config.id)
            .arg(&blob)
            .arg(stored.format.as_str());
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
    ) -> A2aResult<Option<StoredPushConfig>> {
        let row = D::on(&self.reader)
            .fetch_optional(Stmt::new(GET_PUSH_CONFIG).arg(task_id).arg(id))
            .await
            .map_err(|e| {
                let what = format!("reading push-notification config {id} of task {task_id}");
                fail::<D>(&what, e)
            })?;
        row.map(|r| stored_push(&r, task_id, id)).transpose()
    }

    /// `TaskStore::list_push_configs`.
    pub async fn list_push_configs(&self, task_id: &str) -> A2aResult<Vec<StoredPushConfig>> {
        let rows = D::on(&self.reader)
            .fetch_all(Stmt::new(LIST_PUSH_CONFIGS).arg(task_id))
            .await
            .map_err(|e| {
                let what = format!("listing push-notification configs of task {task_id}");
                fail::<D>(&what, e)
            })?;
        rows.iter()
            .map(|r| stored_push(r, task_id, &r.text("id")?))
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

    /// `TaskStore::unfinished`: the unfinished tasks, and those of them
    /// that cannot be read (each with its owner and error), counted and
    /// logged, never failing the others.
    pub async fn unfinished(&self) -> A2aResult<(Vec<StoredTask>, Vec<(Owner, A2aError)>)> {
        let rows = D::on(&self.reader)
            .fetch_all(Stmt::new(UNFINISHED))
            .await
            .map_err(|e| fail::<D>("reading unfinished tasks", e))?;
        let mut tasks = Vec::new();
        let mut unreadable = Vec::new();
        let mut chunks: HashMap<String, Vec<(i64, Vec<u8>)>> = HashMap::new();
        for r in &rows {
            match r.i64("seq")? {
                0 => match stored_task(r, &r.text("id")?, None) {
                    Ok(t) => tasks.push(t),
                    Err(e) if is_unreadable(&e) => unreadable.push((row_owner(r)?, e)),
                    Err(e) => return Err(e),
                },
                seq => chunks
                    .entry(r.text("id")?)
                    .or_default()
                    .push((seq, r.blob("artifacts")?)),
            }
        }
        let mut read = Vec::with_capacity(tasks.len());
        for mut t in tasks {
            if let Some(c) = chunks.remove(&t.task.id)
                && let Err(e) = fold_chunks(&t.task.id.clone(), &mut t.task, c)
            {
                unreadable.push((t.owner, e));
                continue;
            }
            read.push(t);
        }
        for (_, e) in &unreadable {
            self.met_unreadable(e, "crash recovery");
        }
        Ok((read, unreadable))
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
        let mut ids = Vec::with_capacity(rows.len());
        let mut gone = Vec::with_capacity(rows.len());
        for r in &rows {
            ids.push(r.text("id")?);
            gone.push((row_owner(r)?, r.text("context_id")?, r.i32("state")?));
        }
        if !ids.is_empty() {
            for table in D::TASK_TABLES {
                tx.execute(delete_of_tasks(table, &ids))
                    .await
                    .map_err(|e| fail::<D>(what, e))?;
            }
        }
        D::commit(tx).await.map_err(|e| fail::<D>(what, e))?;
        for (owner, context, state) in &gone {
            self.count(owner, context, *state, -1);
        }
        Ok(ids.len() as u64)
    }
}

/// The states (`TaskState` numbers) that are terminal (`true`) or open
/// (`false`), from the state machine (for the unit test of
/// [`Dialect::TERMINAL`] and [`Dialect::OPEN`]).
#[cfg(test)]
fn states_where(terminal: bool) -> Vec<u32> {
    (1..=8)
        .filter_map(|n| agentwire_types::TaskState::try_from(n).ok())
        .filter(|s| s.is_terminal() == terminal)
        .map(|s| s as u32)
        .collect()
}

/// The state numbers an SQL condition names, in order.
#[cfg(test)]
fn numbers_in(sql: &str) -> Vec<u32> {
    sql.split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
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
            READ_STATUS,
            READ_STATUS_ONLY,
            READ_FOR_UPDATE,
            CHUNKS_OF,
            DELETE_CHUNKS,
            STATE_OF,
            APPEND_READ,
            UNFINISHED,
            PUT_PUSH_CONFIG,
            GET_PUSH_CONFIG,
            LIST_PUSH_CONFIGS,
            DELETE_PUSH_CONFIG,
            SET_ASIDE,
            DELETE_SET_ASIDE,
            GET_SET_ASIDE,
            OWNER_OF,
        ] {
            driver::assert_placeholders_in_order(sql);
        }
        #[cfg(feature = "sqlite")]
        driver::assert_placeholders_in_order(&append_query::<lite::Lite>(""));
        for rows in COUNT_CHUNKS {
            driver::assert_placeholders_in_order(&drop_context_counts_sql(rows));
            driver::assert_placeholders_in_order(&add_counts_sql(
                "a2a_context_counts",
                &CONTEXT_COUNT_COLUMNS,
                &CONTEXT_COUNT_KEY,
                rows,
            ));
        }
    }

    #[test]
    fn counters_are_flushed_in_a_few_statements_of_fixed_sizes() {
        assert_eq!(count_chunks(0), Vec::<usize>::new());
        assert_eq!(count_chunks(1), vec![1]);
        assert_eq!(count_chunks(5), vec![4, 1]);
        assert_eq!(count_chunks(40), vec![16, 16, 4, 4]);
        assert_eq!(count_chunks(150), vec![64, 64, 16, 4, 1, 1]);
        for n in 0..300 {
            let sizes = count_chunks(n);
            assert_eq!(sizes.iter().sum::<usize>(), n);
            assert!(sizes.iter().all(|s| COUNT_CHUNKS.contains(s)));
        }
        assert_eq!(values_rows(2, 3), "($1, $2, $3), ($4, $5, $6)");
        assert_eq!(
            add_counts_sql("a2a_task_counts", &TASK_COUNT_COLUMNS, &TASK_COUNT_KEY, 2),
            "INSERT INTO a2a_task_counts (owner_tenant, owner_principal, state, n) \
             VALUES ($1, $2, $3, $4), ($5, $6, $7, $8) \
             ON CONFLICT (owner_tenant, owner_principal, state) \
             DO UPDATE SET n = a2a_task_counts.n + excluded.n"
        );
    }

    #[test]
    fn terminal_and_open_states_match_the_state_machine() {
        fn check<D: Dialect>() {
            assert_eq!(
                numbers_in(D::TERMINAL),
                states_where(true),
                "{}",
                D::TERMINAL
            );
            assert_eq!(numbers_in(D::OPEN), states_where(false), "{}", D::OPEN);
            for (sql, named) in [(D::TERMINAL, "terminal"), (D::OPEN, "open")] {
                assert!(
                    sql.starts_with("(state IN (") || sql.starts_with("state IN ("),
                    "{named}: {sql}"
                );
            }
            driver::assert_placeholders_in_order(&open_task_owners::<D>());
        }
        #[cfg(feature = "sqlite")]
        check::<lite::Lite>();
        #[cfg(feature = "postgres")]
        check::<postgres::Pg>();
    }

    #[test]
    fn a_task_survives_its_row() {
        let mut status = TaskStatus::new(TaskState::Working);
        status.timestamp = Some(Timestamp::from_millis(1_700_000_000_123));
        let task = Task {
            generation: 3,
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
