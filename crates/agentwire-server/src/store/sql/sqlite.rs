//! The SQLite task store: tasks survive restarts, in one file.

use std::path::Path;
use std::time::Duration;

use agentwire_types::{A2aError, A2aResult, Task, TaskPushNotificationConfig, TaskState};
use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::store::sql::{self, Stored, TaskRow};
use crate::store::{
    LogSpan, Owner, StoredTask, TaskPage, TaskQuery, TaskStore, TaskUpdate, Updated, apply_update,
};

/// The schema, embedded in the binary and applied by [`SqliteStore::open`].
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// How long a statement waits for another connection's write lock (another
/// process on the same file, or this one's readers during a checkpoint).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Read connections of a file database (WAL lets them read while the writer
/// writes).
const READERS: u32 = 4;

/// A [`TaskStore`] in an SQLite database.
///
/// The file uses write-ahead logging (readers never block the writer) with
/// `synchronous = NORMAL`: a committed update survives a crash of the
/// process; a power loss may lose the last few commits, never the
/// database's consistency. The schema is created or upgraded by
/// [`SqliteStore::open`] (migrations embedded in the binary).
///
/// Writes go through one connection (SQLite has one writer at a time) and
/// reads through a small pool. An update reads the task, applies
/// [`apply_update`] and writes it back only if the task's version did not
/// change in between; on a conflict (another process, or a concurrent
/// update of the same task) it redoes the whole step inside a
/// `BEGIN IMMEDIATE` transaction, so no update is ever lost. Several
/// processes may share one file.
///
/// ```
/// use agentwire_server::store::{Owner, SqliteStore, TaskStore};
/// use agentwire_server::types::{Task, TaskState, TaskStatus};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> agentwire_server::A2aResult<()> {
/// // `SqliteStore::open("tasks.db")` for a file that survives restarts.///
/// let store = SqliteStore::in_memory().await?;
/// let task = Task {
///     id: "t1".into(),
///     context_id: "c1".into(),
///     status: Some(TaskStatus::new(TaskState::Submitted)),
///     ..Default::default()
/// };
/// store.create(&Owner::default(), task).await?;
/// assert!(store.get("t1", None).await?.is_some());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating it if needed) the database file at `path` and brings
    /// its schema up to date.
    pub async fn open(path: impl AsRef<Path>) -> A2aResult<Self> {
        let path = path.as_ref();
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT);
        let what = format!("opening {}", path.display());
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await
            .map_err(|e| sql::fault::open_error(path, &what, e))?;
        Self::migrate(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(READERS)
            .connect_with(options)
            .await
            .map_err(|e| sql::fault::open_error(path, &what, e))?;
        Ok(Self { writer, reader })
    }

    /// A private database in memory (for tests): one connection, gone when
    /// the store is dropped.
    pub async fn in_memory() -> A2aResult<Self> {
        let options = SqliteConnectOptions::new()
            .in_memory(true)
            .busy_timeout(BUSY_TIMEOUT);
        // The database lives as long as its only connection: never let the
        // pool close it.
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options)
            .await
            .map_err(|e| sql::db_error("opening an in-memory database", e))?;
        Self::migrate(&pool).await?;
        Ok(Self {
            writer: pool.clone(),
            reader: pool,
        })
    }

    async fn migrate(pool: &SqlitePool) -> A2aResult<()> {
        MIGRATOR.run(pool).await.map_err(|e| {
            A2aError::internal(format!("task store: migrating the SQLite schema: {e}"))
        })
    }

    /// The connection pool that writes (one connection), e.g. to run
    /// maintenance such as `VACUUM`.
    pub fn pool(&self) -> &SqlitePool {
        &self.writer
    }

    /// Applies an update inside a write transaction (the slow path, after a
    /// conflict).
    async fn update_locked(&self, task_id: &str, update: TaskUpdate) -> A2aResult<TaskState> {
        let what = || format!("updating task {task_id}");
        let mut tx = self
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(|e| sql::db_error(&what(), e))?;
        let row = sqlx::query(SELECT_FOR_UPDATE)
            .bind(task_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| sql::db_error(&what(), e))?
            .ok_or_else(|| A2aError::task_not_found(task_id))?;
        let old = Stored::from_row(&row, task_id)?;
        let mut task = old.task(task_id)?;
        apply_update(&mut task, update)?;
        let state = task.state();
        let new = TaskRow::encode(task);
        sql::update_query(&new, &old, sql::now_millis(), None)
            .build()
            .execute(&mut *tx)
            .await
            .map_err(|e| sql::db_error(&what(), e))?;
        tx.commit().await.map_err(|e| sql::db_error(&what(), e))?;
        Ok(state)
    }
}

const SELECT_FOR_UPDATE: &str =
    "SELECT version, head, history, artifacts FROM a2a_tasks WHERE id = ?";

#[async_trait]
impl TaskStore for SqliteStore {
    async fn create(&self, owner: &Owner, task: Task) -> A2aResult<Option<LogSpan>> {
        let row = TaskRow::encode(task);
        let now = sql::now_millis();
        let result = sqlx::query(
            "INSERT INTO a2a_tasks (id, context_id, owner_tenant, owner_principal, state, \
             status_millis, has_status_time, head, history, artifacts, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
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
        .bind(now)
        .bind(now)
        .execute(&self.writer)
        .await;
        match result {
            Ok(_) => Ok(None),
            Err(e) if sql::is_unique_violation(&e) => Err(sql::duplicate(&row.id)),
            Err(e) => Err(sql::db_error(&format!("creating task {}", row.id), e)),
        }
    }

    async fn update(&self, task_id: &str, update: TaskUpdate) -> A2aResult<Updated> {
        // Fast path: read without a lock, write back if the version is
        // unchanged. The runtime serialises the updates of a task, so a
        // conflict is rare (another process, or a caller of the store that
        // bypasses the runtime); the slow path then redoes the whole step
        // under the write lock.
        let what = || format!("updating task {task_id}");
        let row = sqlx::query(SELECT_FOR_UPDATE)
            .bind(task_id)
            .fetch_optional(&self.reader)
            .await
            .map_err(|e| sql::db_error(&what(), e))?
            .ok_or_else(|| A2aError::task_not_found(task_id))?;
        let old = Stored::from_row(&row, task_id)?;
        let mut task = old.task(task_id)?;
        apply_update(&mut task, update.clone())?;
        let state = task.state();
        let new = TaskRow::encode(task);
        let written = sql::update_query(&new, &old, sql::now_millis(), Some(old.version))
            .build()
            .execute(&self.writer)
            .await
            .map_err(|e| sql::db_error(&what(), e))?
            .rows_affected();
        if written == 1 {
            return Ok(Updated::new(state));
        }
        self.update_locked(task_id, update).await.map(Updated::new)
    }

    async fn get(
        &self,
        task_id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<StoredTask>> {
        let what = || format!("reading task {task_id}");
        let Some(row) = sqlx::query(
            "SELECT owner_tenant, owner_principal, head, history, artifacts \
             FROM a2a_tasks WHERE id = ?",
        )
        .bind(task_id)
        .fetch_optional(&self.reader)
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
        let rows = sql::page_query::<sqlx::Sqlite>(owner, query, "NULL")
            .build()
            .fetch_all(&self.reader)
            .await
            .map_err(|e| sql::db_error(what, e))?;
        let rows = rows
            .iter()
            .map(|r| sql::page_row(r, query.history_length))
            .collect::<A2aResult<Vec<_>>>()?;
        let total = match rows.first() {
            Some(r) => r.total,
            None => sql::count_query::<sqlx::Sqlite>(owner, query)
                .build_query_scalar::<i64>()
                .fetch_one(&self.reader)
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
            "INSERT INTO a2a_push_configs (task_id, id, config) VALUES (?, ?, ?) \
             ON CONFLICT (task_id, id) DO UPDATE SET config = excluded.config",
        )
        .bind(&config.task_id)
        .bind(&config.id)
        .bind(sql::encode_push(config))
        .execute(&self.writer)
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
        let bytes: Option<Vec<u8>> =
            sqlx::query_scalar("SELECT config FROM a2a_push_configs WHERE task_id = ? AND id = ?")
                .bind(task_id)
                .bind(id)
                .fetch_optional(&self.reader)
                .await
                .map_err(|e| sql::db_error(&what(), e))?;
        bytes.map(|b| sql::decode_push(task_id, id, &b)).transpose()
    }

    async fn list_push_configs(&self, task_id: &str) -> A2aResult<Vec<TaskPushNotificationConfig>> {
        let what = || format!("listing push-notification configs of task {task_id}");
        let rows: Vec<(String, Vec<u8>)> = sqlx::query_as(
            "SELECT id, config FROM a2a_push_configs WHERE task_id = ? ORDER BY seq",
        )
        .bind(task_id)
        .fetch_all(&self.reader)
        .await
        .map_err(|e| sql::db_error(&what(), e))?;
        rows.iter()
            .map(|(id, b)| sql::decode_push(task_id, id, b))
            .collect()
    }

    async fn delete_push_config(&self, task_id: &str, id: &str) -> A2aResult<bool> {
        let n = sqlx::query("DELETE FROM a2a_push_configs WHERE task_id = ? AND id = ?")
            .bind(task_id)
            .bind(id)
            .execute(&self.writer)
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
            .fetch_all(&self.reader)
            .await
            .map_err(|e| sql::db_error("reading unfinished tasks", e))?;
        sql::unfinished_tasks(&rows)
    }

    /// Deletes in batches of a few hundred tasks, each batch one
    /// transaction; `age` is measured by the store's clock against the time
    /// a task last changed (when it became terminal).
    async fn purge_terminal_older_than(&self, age: Duration) -> A2aResult<u64> {
        let cutoff = sql::purge_cutoff(age);
        let delete_tasks = format!(
            "DELETE FROM a2a_tasks WHERE id IN (SELECT id FROM a2a_tasks \
             WHERE state IN {} AND updated_at <= ? LIMIT ?) RETURNING id",
            sql::TERMINAL_STATES_SQL
        );
        let what = "purging terminal tasks";
        let mut purged = 0;
        loop {
            let mut tx = self
                .writer
                .begin_with("BEGIN IMMEDIATE")
                .await
                .map_err(|e| sql::db_error(what, e))?;
            let ids: Vec<String> = sqlx::query_scalar(&delete_tasks)
                .bind(cutoff)
                .bind(sql::PURGE_BATCH)
                .fetch_all(&mut *tx)
                .await
                .map_err(|e| sql::db_error(what, e))?;
            if !ids.is_empty() {
                sql::delete_push_query::<sqlx::Sqlite>(&ids)
                    .build()
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

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_types::{Artifact, ErrorKind, TaskStatus};

    fn temp_db() -> std::path::PathBuf {
        std::env::temp_dir().join(format!("a2a-sqlite-unit-{}.db", agentwire_types::new_id()))
    }

    fn remove_db(path: &Path) {
        for suffix in ["", "-wal", "-shm"] {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
    }

    fn task(id: &str) -> Task {
        Task {
            id: id.into(),
            context_id: "c".into(),
            status: Some(TaskStatus::new(TaskState::Submitted)),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn tasks_survive_reopening_the_file() {
        let path = temp_db();
        {
            let s = SqliteStore::open(&path).await.unwrap();
            let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
                .fetch_one(s.pool())
                .await
                .unwrap();
            assert_eq!(mode, "wal");
            s.create(&Owner::default(), task("t1")).await.unwrap();
            s.update(
                "t1",
                TaskUpdate::Artifact {
                    artifact: Artifact::text("a", "kept").with_id("a1"),
                    append: false,
                    last_chunk: true,
                    metadata: None,
                },
            )
            .await
            .unwrap();
            s.writer.close().await;
            s.reader.close().await;
        }
        let s = SqliteStore::open(&path).await.unwrap();
        let t = s.get("t1", None).await.unwrap().unwrap().task;
        assert_eq!(t.artifacts[0].text_content(), "kept");
        s.writer.close().await;
        s.reader.close().await;
        remove_db(&path);
    }

    #[tokio::test]
    async fn corrupt_rows_are_internal_errors() {
        let s = SqliteStore::in_memory().await.unwrap();
        s.create(&Owner::default(), task("t1")).await.unwrap();
        sqlx::query("UPDATE a2a_tasks SET history = x'ffffff' WHERE id = 't1'")
            .execute(s.pool())
            .await
            .unwrap();
        let err = s.get("t1", None).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Internal);
        assert!(err.message.contains("t1"), "{}", err.message);
        let err = s
            .update(
                "t1",
                TaskUpdate::UserMessage(agentwire_types::Message::user_text("x")),
            )
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Internal);
        let err = s
            .list(
                &Owner::default(),
                &TaskQuery {
                    page_size: 10,
                    ..Default::default()
                },
            )
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Internal);
        sqlx::query("INSERT INTO a2a_push_configs (task_id, id, config) VALUES ('t1', 'p', x'ff')")
            .execute(s.pool())
            .await
            .unwrap();
        assert!(s.get_push_config("t1", "p").await.is_err());
        assert!(s.list_push_configs("t1").await.is_err());
    }
}
