//! SQLite: its [`Dialect`] (connection settings, transactions, the few
//! pieces of SQL that differ, the mapping of errors) and the SQLite task
//! store: tasks survive restarts, in one file.

use std::path::Path;
use std::time::Duration;

use agentwire_types::{A2aError, A2aResult};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};

use crate::store::sql::driver::{self, Dialect};
use crate::store::sql::fault;
use crate::store::sql::{NoLog, Tables};

/// The schema, embedded in the binary and applied by [`SqliteStore::open`].
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// How long a statement waits for another connection's write lock (another
/// process on the same file, or this one's readers during a checkpoint).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Read connections of a file database (WAL lets them read while the writer
/// writes).
const READERS: u32 = 4;

/// The SQLite dialect.
#[derive(Debug, Clone)]
pub(crate) struct Sqlite;

driver::sqlx_driver!(sqlx::Sqlite, SqliteRow, SqlitePool);

impl Dialect for Sqlite {
    type Row = SqliteRow;
    type Pool = SqlitePool;
    type On<'p> = &'p SqlitePool;
    type Tx = sqlx::Transaction<'static, sqlx::Sqlite>;

    // One writer at a time: `BEGIN IMMEDIATE` takes the database's write
    // lock, so there are no row locks to take or skip.
    const LOCK_ROWS: &'static str = "";
    const SKIP_LOCKED: &'static str = "";
    const NULL_BLOB: &'static str = "NULL";
    const FALSE: &'static str = "0";
    const TASK_TABLES: &'static [&'static str] = &["a2a_push_configs"];

    fn on(pool: &SqlitePool) -> &SqlitePool {
        pool
    }

    async fn begin(pool: &SqlitePool) -> Result<Self::Tx, sqlx::Error> {
        pool.begin_with("BEGIN IMMEDIATE").await
    }

    async fn commit(tx: Self::Tx) -> Result<(), sqlx::Error> {
        tx.commit().await
    }

    fn error(area: &str, what: &str, e: sqlx::Error) -> A2aError {
        driver::internal_error(area, what, &e)
    }
}

/// The connection settings of a database file: write-ahead logging (readers
/// never block the writer), `synchronous = NORMAL` (a commit survives a
/// crash of the process; a power loss may lose the last few, never the
/// database's consistency), and a wait for another connection's lock.
pub(crate) fn file_options(path: &Path) -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(BUSY_TIMEOUT)
}

/// A private database in memory: one connection, which the pool never
/// closes (the database lives as long as it).
pub(crate) async fn in_memory_pool(area: &str) -> A2aResult<SqlitePool> {
    let options = SqliteConnectOptions::new()
        .in_memory(true)
        .busy_timeout(BUSY_TIMEOUT);
    SqlitePoolOptions::new()
        .max_connections(1)
        .min_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .connect_with(options)
        .await
        .map_err(|e| Sqlite::error(area, "opening an in-memory database", e))
}

/// A pool of `connections` to a database file.
pub(crate) async fn file_pool(area: &str, path: &Path, connections: u32) -> A2aResult<SqlitePool> {
    SqlitePoolOptions::new()
        .max_connections(connections)
        .connect_with(file_options(path))
        .await
        .map_err(|e| fault::open_error(area, path, &format!("opening {}", path.display()), e))
}

/// A [`TaskStore`](crate::store::TaskStore) in an SQLite database.
///
/// The file uses write-ahead logging (readers never block the writer) with
/// `synchronous = NORMAL`: a committed update survives a crash of the
/// process; a power loss may lose the last few commits, never the
/// database's consistency. The schema is created or upgraded by
/// [`SqliteStore::open`] (migrations embedded in the binary).
///
/// Writes go through one connection (SQLite has one writer at a time) and
/// reads through a small pool. An update reads the task, applies
/// [`apply_update`](crate::store::apply_update) and writes it back only if
/// the task's version did not change in between; on a conflict (another
/// process, or a concurrent update of the same task) it redoes the whole
/// step inside a `BEGIN IMMEDIATE` transaction, so no update is ever lost.
/// Several processes may share one file.
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
    tables: Tables<Sqlite>,
}

impl SqliteStore {
    /// Opens (creating it if needed) the database file at `path` and brings
    /// its schema up to date.
    pub async fn open(path: impl AsRef<Path>) -> A2aResult<Self> {
        let path = path.as_ref();
        let writer = file_pool(AREA, path, 1).await?;
        Self::migrate(&writer).await?;
        let reader = file_pool(AREA, path, READERS).await?;
        Ok(Self {
            tables: Tables { writer, reader },
        })
    }

    /// A private database in memory (for tests): one connection, gone when
    /// the store is dropped.
    pub async fn in_memory() -> A2aResult<Self> {
        let pool = in_memory_pool(AREA).await?;
        Self::migrate(&pool).await?;
        Ok(Self {
            tables: Tables::one_pool(pool),
        })
    }

    async fn migrate(pool: &SqlitePool) -> A2aResult<()> {
        MIGRATOR
            .run(pool)
            .await
            .map_err(|e| A2aError::internal(format!("{AREA}: migrating the SQLite schema: {e}")))
    }

    /// The connection pool that writes (one connection), e.g. to run
    /// maintenance such as `VACUUM`.
    pub fn pool(&self) -> &SqlitePool {
        &self.tables.writer
    }
}

const AREA: &str = "task store";

crate::store::sql::task_store_on_tables!(SqliteStore, |_s| None::<&NoLog>);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Owner, TaskQuery, TaskStore, TaskUpdate};
    use agentwire_types::{Artifact, ErrorKind, Task, TaskState, TaskStatus};

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
            s.tables.writer.close().await;
            s.tables.reader.close().await;
        }
        let s = SqliteStore::open(&path).await.unwrap();
        let t = s.get("t1", None).await.unwrap().unwrap().task;
        assert_eq!(t.artifacts[0].text_content(), "kept");
        s.tables.writer.close().await;
        s.tables.reader.close().await;
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
