//! SQLite: its [`Dialect`] (connection settings, transactions, the few
//! pieces of SQL that differ, the mapping of errors) and the SQLite task
//! store: tasks survive restarts, in one file.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentwire_types::{A2aError, A2aResult};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};

use agentwire_types::Task;
use sqlx::ConnectOptions as _;
use sqlx::Connection as _;

use crate::store::sql::driver::{self, Dialect};
use crate::store::sql::fault;
pub use crate::store::sql::lite::Synchronous;
use crate::store::sql::lite::{Batching, Target, Threads, WalLimits, Weight, now};
use crate::store::sql::lock::FileLock;
use crate::store::sql::{NoLog, PURGE_BATCH, TaskRow, purge_cutoff};
use crate::store::{
    LogSpan, Owner, QueuedDone, QueuedStore, RecoveryScan, SetAside, StoredPushConfig, StoredTask,
    TaskPage, TaskQuery, TaskStore, TaskUpdate, Updated,
};

/// The schema, embedded in the binary and applied by [`SqliteStore::open`].
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// How long a statement waits for another connection's write lock (another
/// process on the same file, or this one's readers during a checkpoint).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Reader threads of a file database (WAL lets them read while the writer
/// writes).
const READERS: usize = 4;

/// The SQLite dialect.
#[derive(Debug, Clone)]
pub(crate) struct Sqlite;

driver::sqlx_driver!(sqlx::Sqlite, SqliteRow, SqlitePool);

impl Dialect for Sqlite {
    type Row = SqliteRow;
    type Error = sqlx::Error;
    type Pool = SqlitePool;
    type On<'p> = &'p SqlitePool;
    type Tx = sqlx::Transaction<'static, sqlx::Sqlite>;

    // One writer at a time: `BEGIN IMMEDIATE` takes the database's write
    // lock, so there are no row locks to take or skip.
    const LOCK_ROWS: &'static str = "";
    const SKIP_LOCKED: &'static str = "";
    const NULL_BLOB: &'static str = "NULL";
    const FALSE: &'static str = "0";
    const TERMINAL: &'static str = super::lite::Lite::TERMINAL;
    const OPEN: &'static str = super::lite::Lite::OPEN;
    const TASK_TABLES: &'static [&'static str] = &["a2a_push_configs", "a2a_artifact_chunks"];
    // The async driver writes statement by statement (files of an earlier
    // version): no counters.
    const COUNTED: bool = false;
    const COUNT_SHARDS: u32 = 1;

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
        driver::internal_error(area, what, &e, fault::fault_of(&e))
    }

    fn is_unique_violation(e: &sqlx::Error) -> bool {
        driver::is_sqlx_unique_violation(e)
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
        .map_err(|e| open_failed(area, path, &e))
}

/// The error of opening the database file `path` with the async driver.
fn open_failed(area: &str, path: &Path, e: &sqlx::Error) -> A2aError {
    let what = format!("opening {}", path.display());
    fault::open_error(area, path, &what, e, fault::fault_of(e))
}

/// A [`TaskStore`](crate::store::TaskStore) in an SQLite database.
///
/// The file uses write-ahead logging (readers never block the writer) with
/// `synchronous = NORMAL` by default: a committed update survives a crash
/// of the process; a power loss may lose the last few commits, never the
/// database's consistency ([`SqliteOptions::synchronous`] with
/// [`Synchronous::Full`] makes every commit wait for the disk). The schema
/// is created or upgraded by [`SqliteStore::open`] (migrations embedded in
/// the binary).
///
/// Writes go through one thread with its own connection (SQLite has one
/// writer at a time), which runs each store operation whole (read the task,
/// apply [`apply_update`](crate::store::apply_update), write it back) and
/// commits together the operations that were queued while it worked (group
/// commit): throughput grows with the number of concurrent tasks instead of
/// waiting on one commit per write. An operation is answered only after its
/// transaction committed. Reads go to a few reader threads. One process
/// at a time uses a file (the lock of [`SqliteStore::open`]); a batch holds
/// the file's write lock (`BEGIN IMMEDIATE`) and an update reads the task
/// inside it, so no update is lost even to a program that writes the file
/// without that lock.
///
/// ```
/// use agentwire_server::store::{Owner, SqliteStore, TaskStore};
/// use agentwire_server::types::{Task, TaskState, TaskStatus};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> agentwire_server::A2aResult<()> {
/// // `SqliteStore::open("tasks.db")` for a file that survives restarts.
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
    threads: Threads,
    /// Unreadable task rows met (`TaskStore::unreadable_rows`).
    unreadable: Arc<AtomicU64>,
    /// The file's lock (`None` in memory, or once closed).
    lock: Arc<parking_lot::Mutex<Option<Arc<FileLock>>>>,
    /// Where rows set aside are kept, for the operator.
    kept: Arc<str>,
    /// How large the open tasks' rows are: which writes are heavy.
    sizes: Arc<Sizes>,
}

/// A task whose row (or one write of it) reaches this many bytes is
/// heavy: its writes go to the writer's heavy lane (`lite::Lanes`), so
/// that the writes of small tasks never queue behind them.
const HEAVY_BYTES: u64 = 1 << 20;

/// Open tasks whose size is tracked, at most (beyond, a new task counts as
/// light until it finishes: only the fairness of the writer's lanes is
/// lost).
const SIZES_TRACKED: usize = 65_536;

/// The approximate size of each open task's row (what its creation and
/// its updates encoded), to tell heavy writes from light ones. A task is
/// forgotten when an update leaves it terminal.
#[derive(Debug, Default)]
struct Sizes(parking_lot::Mutex<std::collections::HashMap<Arc<str>, u64>>);

impl Sizes {
    /// Adds `bytes` written to `task`: whether that write is heavy.
    fn add(&self, task: &Arc<str>, bytes: u64) -> bool {
        let mut sizes = self.0.lock();
        if let Some(n) = sizes.get_mut(task) {
            *n = n.saturating_add(bytes);
            return *n >= HEAVY_BYTES;
        }
        if sizes.len() < SIZES_TRACKED {
            sizes.insert(Arc::clone(task), bytes);
        }
        bytes >= HEAVY_BYTES
    }

    fn forget(&self, task: &str) {
        self.0.lock().remove(task);
    }
}

/// The bytes an update adds to its task's row.
fn update_bytes(update: &TaskUpdate) -> u64 {
    use prost::Message as _;
    let n = match update {
        TaskUpdate::Status { status, .. } => status.encoded_len(),
        TaskUpdate::Artifact { artifact, .. } => artifact.encoded_len(),
        TaskUpdate::UserMessage(m) => m.encoded_len(),
    };
    n as u64
}

/// How a [`SqliteStore`] writes (see [`SqliteStore::open_with`]).
#[derive(Debug, Clone, Copy)]
pub struct SqliteOptions {
    synchronous: Synchronous,
    max_batch: usize,
    max_wait: Duration,
    readers: usize,
    wal: WalLimits,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            synchronous: Synchronous::Normal,
            max_batch: MAX_BATCH,
            max_wait: Duration::ZERO,
            readers: READERS,
            wal: WalLimits::default(),
        }
    }
}

impl SqliteOptions {
    /// What a commit waits for: [`Synchronous::Normal`] (the default)
    /// survives a crash of the process, [`Synchronous::Full`] also a power
    /// loss, at the cost of waiting for the disk at every commit.
    pub fn synchronous(mut self, s: Synchronous) -> Self {
        self.synchronous = s;
        self
    }

    /// At most this many store operations share one transaction (at least
    /// one; 256 by default).
    pub fn max_batch(mut self, n: usize) -> Self {
        self.max_batch = n.max(1);
        self
    }

    /// How long the writer waits for more operations after the first one
    /// of a transaction before committing (zero by default: it commits what
    /// was queued while it worked, so a lone request never waits). A short
    /// wait can help with [`Synchronous::Full`], where a commit is slow.
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.max_wait = wait;
        self
    }

    /// How many reader threads (each with its connection) serve reads (at
    /// least one; 4 by default).
    pub fn readers(mut self, n: usize) -> Self {
        self.readers = n.max(1);
        self
    }
}

/// Store operations per transaction, at most.
const MAX_BATCH: usize = 256;

impl SqliteStore {
    /// Opens (creating it if needed) the database file at `path` and brings
    /// its schema up to date.
    ///
    /// One process at a time: the store takes the operating system's lock
    /// on the side file `PATH.lock` (which holds its process id) before
    /// anything else, and holds it until it is closed or dropped (the
    /// system releases it if the process dies). Opening a file another
    /// process holds fails with a storage error
    /// ([`StorageFault::Busy`](crate::store::StorageFault::Busy)) naming
    /// the file and that process ([`holder_pid`](crate::store::holder_pid)).
    /// Stores and push outboxes of one process share the lock of a file.
    pub async fn open(path: impl AsRef<Path>) -> A2aResult<Self> {
        Self::open_with(path, SqliteOptions::default()).await
    }

    /// [`SqliteStore::open`] with options.
    pub async fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> A2aResult<Self> {
        let path = path.as_ref();
        // First of all: no other process migrates or writes meanwhile.
        let lock = crate::store::sql::lock::lock(AREA, path)?;
        // Before the migrator's connection: SQLite's global settings only
        // take before its first use in the process.
        crate::store::sql::lite::quiet_memory_statistics();
        // The schema is migrated with sqlx's migrator (its bookkeeping table
        // `_sqlx_migrations` is part of the file's format), on a connection
        // closed before the store's own connections open. The whole of it
        // holds the file's write lock (`BEGIN IMMEDIATE`, waiting up to the
        // busy timeout for another connection's): a program that shares
        // the file without taking the side file's lock cannot race it
        // either (the migrator's own transactions nest as savepoints).
        let mut conn = file_options(path)
            .connect()
            .await
            .map_err(|e| open_failed(AREA, path, &e))?;
        let migrated = migrate(&mut conn, path).await;
        let _ = conn.close().await;
        migrated?;
        let store = Self::start(Target::File(path.to_owned()), options).await?;
        *store.lock.lock() = Some(lock);
        Ok(store)
    }

    /// A private database in memory (for tests): one connection, gone when
    /// the store is closed or dropped.
    pub async fn in_memory() -> A2aResult<Self> {
        Self::start(Target::Memory(create_schema), SqliteOptions::default()).await
    }

    async fn start(target: Target, o: SqliteOptions) -> A2aResult<Self> {
        let batching = Batching {
            max_batch: o.max_batch,
            max_wait: o.max_wait,
        };
        let kept = match &target {
            Target::File(path) => format!("table a2a_unreadable_tasks of {}", path.display()),
            Target::Memory(_) => "table a2a_unreadable_tasks of the database in memory".to_owned(),
        };
        let unreadable = Arc::new(AtomicU64::new(0));
        let threads = Threads::start(
            target,
            o.readers,
            BUSY_TIMEOUT,
            o.synchronous,
            batching,
            o.wal,
            Arc::clone(&unreadable),
        )
        .await?;
        Ok(Self {
            threads,
            unreadable,
            kept: kept.into(),
            lock: Arc::default(),
            sizes: Arc::default(),
        })
    }

    /// Runs `f` on the connection that writes, between two transactions
    /// (no other write runs meanwhile), and answers what it returns: for
    /// maintenance such as `VACUUM`, to change a setting of that connection
    /// (`PRAGMA busy_timeout`, `PRAGMA max_page_count`), or to read one back
    /// (`PRAGMA synchronous`). `f` runs on the writer thread: it should be
    /// short, every write waits for it. Its failure is the store's usual
    /// error (a storage error for a locked, full or damaged database).
    ///
    /// ```
    /// use agentwire_server::store::{SqliteOptions, SqliteStore, Synchronous};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> agentwire_server::A2aResult<()> {
    /// # let path = std::env::temp_dir().join(agentwire_server::types::new_id());
    /// let options = SqliteOptions::default().synchronous(Synchronous::Full);
    /// let store = SqliteStore::open_with(&path, options).await?;
    /// // 2 is FULL (https://www.sqlite.org/pragma.html#pragma_synchronous).
    /// let level: i64 = store
    ///     .with_writer(|c| c.pragma_query_value(None, "synchronous", |r| r.get(0)))
    ///     .await?;
    /// assert_eq!(level, 2);
    /// # store.close().await;
    /// # for s in ["", "-wal", "-shm", ".lock"] {
    /// #     let _ = std::fs::remove_file(format!("{}{s}", path.display()));
    /// # }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn with_writer<T, F>(&self, f: F) -> A2aResult<T>
    where
        F: FnOnce(&rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.threads.alone(f).await
    }

    /// Closes the store's connections once the operations already started
    /// are done (for example before deleting the file); later operations,
    /// through any clone of the store, fail.
    pub async fn close(&self) {
        self.threads.close().await;
        // The file's lock goes with the last store or outbox of this
        // process holding it.
        self.lock.lock().take();
    }
}

/// Brings the schema of the file at `path` up to date on `conn`, in one
/// transaction holding the file's write lock.
async fn migrate(conn: &mut sqlx::SqliteConnection, path: &Path) -> A2aResult<()> {
    let mut tx = conn
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(|e| open_failed(AREA, path, &e))?;
    MIGRATOR.run(&mut *tx).await.map_err(|e| match e {
        sqlx::migrate::MigrateError::Execute(e) => open_failed(AREA, path, &e),
        e => A2aError::internal(format!("{AREA}: migrating the SQLite schema: {e}")),
    })?;
    tx.commit().await.map_err(|e| open_failed(AREA, path, &e))
}

/// The schema of a database in memory: the migrations' statements (no
/// bookkeeping: the database never outlives the store).
pub(crate) fn create_schema(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    for m in MIGRATOR.iter() {
        if !m.migration_type.is_down_migration() {
            conn.execute_batch(&m.sql)?;
        }
    }
    Ok(())
}

const AREA: &str = "task store";

/// The writer runs writes in the order they are sent: a task's updates
/// can be queued (see `Threads::queue`).
impl QueuedStore for SqliteStore {
    fn queue_update(&self, task_id: &str, update: TaskUpdate, done: QueuedDone) -> A2aResult<()> {
        let id: Arc<str> = task_id.into();
        let heavy = self.sizes.add(&id, update_bytes(&update));
        let sizes = Arc::clone(&self.sizes);
        let forget = Arc::clone(&id);
        self.threads.queue(
            Arc::clone(&id),
            heavy,
            move |t| now(t.update(&id, update, None::<&NoLog>)),
            move |r: A2aResult<Updated>| {
                if r.as_ref().is_ok_and(|u| u.state.is_terminal()) {
                    sizes.forget(&forget);
                }
                done(r)
            },
        )
    }
}

#[async_trait::async_trait]
impl TaskStore for SqliteStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    async fn create(&self, owner: &Owner, task: Task) -> A2aResult<Option<LogSpan>> {
        use prost::Message as _;
        let owner = owner.clone();
        let id: Arc<str> = task.id.as_str().into();
        let heavy = if task.state().is_terminal() {
            task.encoded_len() as u64 >= HEAVY_BYTES
        } else {
            self.sizes.add(&id, task.encoded_len() as u64)
        };
        // Encoded here, not on the writer thread, which every write waits
        // for.
        let row = TaskRow::encode(task);
        let created = self
            .threads
            .write_weighing(Weight::of(&id, heavy), move |t| {
                now(t.create_row(&owner, row)).map(|()| None)
            })
            .await;
        if created.is_err() {
            self.sizes.forget(&id);
        }
        created
    }

    fn queued(&self) -> Option<&dyn QueuedStore> {
        Some(self)
    }

    async fn update(&self, task_id: &str, update: TaskUpdate) -> A2aResult<Updated> {
        // One allocation for the id, shared by the write and its fence.
        let id: Arc<str> = task_id.into();
        let heavy = self.sizes.add(&id, update_bytes(&update));
        let task = Arc::clone(&id);
        let updated = self
            .threads
            .write_lifting(Arc::clone(&id), heavy, move |t| {
                now(t.update(&id, update, None::<&NoLog>))
            })
            .await;
        if updated.as_ref().is_ok_and(|u| u.state.is_terminal()) {
            self.sizes.forget(&task);
        }
        updated
    }

    async fn get(
        &self,
        task_id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<StoredTask>> {
        let id = task_id.to_owned();
        self.threads
            .read(move |t| now(t.get(&id, history_length)))
            .await
    }

    async fn list(&self, owner: &Owner, query: &TaskQuery) -> A2aResult<TaskPage> {
        let (owner, query) = (owner.clone(), query.clone());
        self.threads
            .read(move |t| now(t.list(&owner, &query)))
            .await
    }

    async fn put_push_config(&self, config: &StoredPushConfig) -> A2aResult<()> {
        let config = config.clone();
        self.threads
            .write(move |t| now(t.put_push_config(&config)))
            .await
    }

    async fn get_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> A2aResult<Option<StoredPushConfig>> {
        let (task_id, id) = (task_id.to_owned(), id.to_owned());
        self.threads
            .read(move |t| now(t.get_push_config(&task_id, &id)))
            .await
    }

    async fn list_push_configs(&self, task_id: &str) -> A2aResult<Vec<StoredPushConfig>> {
        let task_id = task_id.to_owned();
        self.threads
            .read(move |t| now(t.list_push_configs(&task_id)))
            .await
    }

    async fn delete_push_config(&self, task_id: &str, id: &str) -> A2aResult<bool> {
        let (task_id, id) = (task_id.to_owned(), id.to_owned());
        self.threads
            .write(move |t| now(t.delete_push_config(&task_id, &id)))
            .await
    }

    async fn unfinished(&self) -> A2aResult<Vec<StoredTask>> {
        Ok(self.threads.read(|t| now(t.unfinished())).await?.0)
    }

    async fn unfinished_for_recovery(&self) -> A2aResult<RecoveryScan> {
        let (tasks, unreadable) = self.threads.read(|t| now(t.unfinished())).await?;
        let mut set_aside = Vec::with_capacity(unreadable.len());
        for (owner, e) in unreadable {
            let task_id = e.metadata.get("taskId").cloned().unwrap_or_default();
            let (id, reason) = (task_id.clone(), e.message.clone());
            let moved = self
                .threads
                .write(move |t| now(t.set_aside(&id, &reason)))
                .await;
            let kept = match moved {
                Ok(_) => self.kept.to_string(),
                Err(m) => format!("left in table a2a_tasks (setting it aside failed: {m})"),
            };
            set_aside.push(SetAside {
                task_id,
                owner,
                reason: e.message,
                kept,
            });
        }
        Ok(RecoveryScan { tasks, set_aside })
    }

    async fn owner_of(&self, task_id: &str) -> A2aResult<Option<Owner>> {
        let id = task_id.to_owned();
        self.threads.read(move |t| now(t.owner_of(&id))).await
    }

    fn unreadable_rows(&self) -> u64 {
        self.unreadable.load(Ordering::Relaxed)
    }

    async fn open_task_owners(&self) -> A2aResult<Vec<(String, Owner)>> {
        self.threads.read(|t| now(t.open_task_owners())).await
    }

    /// Deletes in batches of a few hundred tasks, each batch one store
    /// operation (other writes go between them); `age` is measured by this
    /// process's clock against the time a task last changed (when it became
    /// terminal).
    async fn purge_terminal_older_than(&self, age: Duration) -> A2aResult<u64> {
        let cutoff = purge_cutoff(age);
        let mut purged = 0;
        loop {
            let n = self
                .threads
                .write(move |t| now(t.purge_batch(cutoff)))
                .await?;
            purged += n;
            if n < PURGE_BATCH as u64 {
                return Ok(purged);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Owner, TaskQuery, TaskStore, TaskUpdate};
    use agentwire_types::{Artifact, ErrorKind, Task, TaskState, TaskStatus};

    fn temp_db() -> std::path::PathBuf {
        std::env::temp_dir().join(format!("a2a-sqlite-unit-{}.db", agentwire_types::new_id()))
    }

    fn remove_db(path: &Path) {
        for suffix in ["", "-wal", "-shm", ".lock"] {
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
            let c = rusqlite::Connection::open(&path).unwrap();
            let mode: String = c
                .query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .unwrap();
            assert_eq!(mode, "wal");
            s.close().await;
            let err = s.get("t1", None).await.unwrap_err();
            assert!(err.message.contains("closed"), "{}", err.message);
        }
        let s = SqliteStore::open(&path).await.unwrap();
        let t = s.get("t1", None).await.unwrap().unwrap().task;
        assert_eq!(t.artifacts[0].text_content(), "kept");
        s.close().await;
        remove_db(&path);
    }

    /// The checkpointer copies what was committed into the database file
    /// soon after, though the log is far from the writer's own threshold:
    /// the file read without its log (immutable) holds the tasks.
    #[tokio::test]
    async fn the_log_is_copied_into_the_file_by_the_checkpointer() {
        let path = temp_db();
        let s = SqliteStore::open(&path).await.unwrap();
        for i in 0..50 {
            s.create(&Owner::default(), task(&format!("t{i}")))
                .await
                .unwrap();
        }
        let uri = format!("file:{}?immutable=1", path.display());
        let in_file = || -> i64 {
            let c = rusqlite::Connection::open_with_flags(
                &uri,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
            )
            .unwrap();
            // Before the first checkpoint the file may not hold the table.
            c.query_row("SELECT count(*) FROM a2a_tasks", [], |r| r.get(0))
                .unwrap_or(0)
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while in_file() < 50 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(in_file(), 50, "the tasks reached the database file");
        s.close().await;
        remove_db(&path);
    }

    /// Under writes that never pause, the log is still started over once
    /// it is long (the checkpointer copies it and the writer the last few
    /// pages), not left to grow until the writer's own checkpoint, here
    /// turned off. The log's header counts its restarts; every task is
    /// still there after reopening.
    #[tokio::test]
    async fn a_long_log_is_started_over_under_steady_writes() {
        let path = temp_db();
        let o = SqliteOptions {
            wal: WalLimits {
                restart_pages: 256,
                finish_pages: 128,
                writer_pages: 10_000_000,
            },
            ..SqliteOptions::default()
        };
        let s = SqliteStore::open_with(&path, o).await.unwrap();
        let restarts = || -> u32 {
            // The checkpoint sequence number, bytes 12..16 of the log's header.
            let wal = std::fs::read(format!("{}-wal", path.display())).unwrap_or_default();
            wal.get(12..16)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
                .unwrap_or(0)
        };
        // Sixteen callers at once: the writer is never idle long enough for
        // a pass beside it to copy the whole log.
        let until = std::time::Instant::now() + Duration::from_secs(3);
        let callers: Vec<_> = (0..16)
            .map(|c| {
                let s = s.clone();
                tokio::spawn(async move {
                    let mut n = 0;
                    while std::time::Instant::now() < until {
                        s.create(&Owner::default(), task(&format!("t{c}-{n}")))
                            .await
                            .unwrap();
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let mut n = 0;
        for c in callers {
            n = c.await.unwrap();
        }
        eprintln!(
            "log restarts: {} ({n} writes by the last caller)",
            restarts()
        );
        assert!(
            restarts() >= 2,
            "the log was started over: {} times",
            restarts()
        );
        s.close().await;
        let s = SqliteStore::open(&path).await.unwrap();
        for i in [0, n / 2, n - 1] {
            let id = format!("t15-{i}");
            assert!(s.get(&id, None).await.unwrap().is_some(), "{id}");
        }
        s.close().await;
        remove_db(&path);
    }

    /// A file written by the earlier store (sqlx on every connection) opens
    /// and reads: the schema and the row encoding are the same.
    #[tokio::test]
    async fn a_file_written_by_the_async_driver_opens() {
        let path = temp_db();
        let pool = file_pool(AREA, &path, 1).await.unwrap();
        MIGRATOR.run(&pool).await.unwrap();
        let tables = crate::store::sql::Tables::<Sqlite>::one_pool(pool.clone());
        tables.create(&Owner::default(), task("old")).await.unwrap();
        tables
            .update(
                "old",
                TaskUpdate::Status {
                    status: TaskStatus::new(TaskState::Working),
                    metadata: None,
                },
                None::<&NoLog>,
            )
            .await
            .unwrap();
        pool.close().await;
        let s = SqliteStore::open(&path).await.unwrap();
        let t = s.get("old", None).await.unwrap().unwrap().task;
        assert_eq!(t.state(), TaskState::Working);
        let unfinished = s.unfinished().await.unwrap();
        assert_eq!(unfinished.len(), 1);
        s.update(
            "old",
            TaskUpdate::Status {
                status: TaskStatus::new(TaskState::Completed),
                metadata: None,
            },
        )
        .await
        .unwrap();
        assert!(s.unfinished().await.unwrap().is_empty());
        s.close().await;
        remove_db(&path);
    }

    /// An artifact chunk is one small row: the task's row (its version, its
    /// artifacts) is not rewritten while the artifact streams; the end of
    /// the turn folds the chunks into the row and deletes them.
    #[tokio::test]
    async fn chunks_are_appended_and_folded_when_the_turn_ends() {
        let path = temp_db();
        let s = SqliteStore::open(&path).await.unwrap();
        s.create(&Owner::default(), task("t1")).await.unwrap();
        let working = TaskUpdate::Status {
            status: TaskStatus::new(TaskState::Working),
            metadata: None,
        };
        s.update("t1", working).await.unwrap();
        let c = rusqlite::Connection::open(&path).unwrap();
        let row = |c: &rusqlite::Connection| -> (i64, Vec<u8>, i64) {
            c.query_row(
                "SELECT version, artifacts, \
                 (SELECT COUNT(*) FROM a2a_artifact_chunks WHERE task_id = 't1') \
                 FROM a2a_tasks WHERE id = 't1'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap()
        };
        let before = row(&c);
        assert_eq!(before.2, 0);
        for i in 0..100 {
            s.update(
                "t1",
                TaskUpdate::Artifact {
                    artifact: Artifact::text("a", format!("{i},")).with_id("a1"),
                    append: i > 0,
                    last_chunk: i == 99,
                    metadata: None,
                },
            )
            .await
            .unwrap();
        }
        let streaming = row(&c);
        assert_eq!((streaming.0, &streaming.1), (before.0, &before.1));
        assert_eq!(streaming.2, 100);
        let expected: String = (0..100).map(|i| format!("{i},")).collect();
        let t = s.get("t1", None).await.unwrap().unwrap().task;
        assert_eq!(t.artifacts[0].text_content(), expected);
        let done = TaskUpdate::Status {
            status: TaskStatus::new(TaskState::Completed),
            metadata: None,
        };
        s.update("t1", done).await.unwrap();
        let after = row(&c);
        assert_eq!(after.2, 0, "the chunks were folded into the row");
        assert_eq!(after.0, before.0 + 1);
        let t = s.get("t1", None).await.unwrap().unwrap().task;
        assert_eq!(t.state(), TaskState::Completed);
        assert_eq!(t.artifacts.len(), 1);
        assert_eq!(t.artifacts[0].parts.len(), 100);
        assert_eq!(t.artifacts[0].text_content(), expected);
        drop(c);
        s.close().await;
        remove_db(&path);
    }

    /// A file of an earlier schema (before the task counts) is brought up
    /// to date when opened: the later migrations run, its tasks
    /// stay readable and writable (an artifact streams into one), and the
    /// indexes of every migration exist.
    #[tokio::test]
    async fn a_file_of_the_previous_schema_is_migrated() {
        let path = temp_db();
        let dir =
            std::env::temp_dir().join(format!("a2a-migrations-{}", agentwire_types::new_id()));
        std::fs::create_dir_all(&dir).unwrap();
        let all: Vec<_> = MIGRATOR.iter().collect();
        assert!(all.len() >= 2, "expected a migration after the first");
        // Every migration but the last, as files (same text, so the same
        // checksum as the embedded ones).
        // Before the task counts (which fill in the counts of the tasks
        // there) and the push configs' format (configs there are 1.0's).
        for m in all.iter().filter(|m| m.version < 20261208000000) {
            let name = format!("{}_{}.sql", m.version, m.description.replace(' ', "_"));
            std::fs::write(dir.join(name), m.sql.as_bytes()).unwrap();
        }
        let old = sqlx::migrate::Migrator::new(dir.as_path()).await.unwrap();
        let pool = file_pool(AREA, &path, 1).await.unwrap();
        old.run(&pool).await.unwrap();
        let tables = crate::store::sql::Tables::<Sqlite>::one_pool(pool.clone());
        tables
            .create(&Owner::default(), task("before"))
            .await
            .unwrap();
        sqlx::query(
            "INSERT INTO a2a_push_configs (task_id, id, config) VALUES ('before', 'p', x'')",
        )
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;
        let indexes = |path: &Path| -> Vec<String> {
            let c = rusqlite::Connection::open(path).unwrap();
            let mut st = c
                .prepare("SELECT name FROM sqlite_master WHERE type = 'index' ORDER BY name")
                .unwrap();
            st.query_map([], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        let s = SqliteStore::open(&path).await.unwrap();
        let found = indexes(&path);
        // Crash recovery reads the open tasks' index since
        // 20261231000000_a2a_tasks_partial_index_lists.sql.
        assert!(
            !found.contains(&"a2a_tasks_unfinished".to_owned()),
            "{found:?}"
        );
        for name in [
            "a2a_tasks_owner_state_time",
            "a2a_tasks_owner_context_state_time",
            "a2a_tasks_open",
            "a2a_artifact_chunks_task",
        ] {
            assert!(
                found.contains(&name.to_owned()),
                "{name} missing: {found:?}"
            );
        }
        assert_eq!(s.unfinished().await.unwrap().len(), 1);
        let page = s
            .list(
                &Owner::default(),
                &TaskQuery {
                    state: Some(TaskState::Submitted),
                    page_size: 10,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(page.total, 1);
        assert_eq!(page.tasks[0].id, "before");
        let configs = s.list_push_configs("before").await.unwrap();
        assert_eq!(configs.len(), 1);
        assert_eq!(configs[0].format, crate::store::PushFormat::V1);
        // The task written before the upgrade streams an artifact.
        for (i, text) in ["one ", "two"].into_iter().enumerate() {
            s.update(
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
        let t = s.get("before", None).await.unwrap().unwrap().task;
        assert_eq!(t.artifacts[0].text_content(), "one two");
        s.close().await;
        // Opening again runs nothing new.
        let s = SqliteStore::open(&path).await.unwrap();
        s.close().await;
        let _ = std::fs::remove_dir_all(&dir);
        remove_db(&path);
    }

    /// Concurrent writers share transactions, and each one's write is
    /// there when it is answered.
    /// The writer's lanes: a light write queued behind a backlog of heavy
    /// ones waits for one heavy batch, not for the backlog; the writes of
    /// one task keep their order whatever their weight; a job that runs
    /// alone waits for everything sent before it.
    #[tokio::test]
    async fn light_writes_pass_a_backlog_of_heavy_ones_in_task_order() {
        let s = SqliteStore::in_memory().await.unwrap();
        let order = Arc::new(parking_lot::Mutex::new(Vec::<String>::new()));
        // Holds the writer until everything below is queued.
        let (release, held) = std::sync::mpsc::channel::<()>();
        let blocker = {
            let s = s.clone();
            tokio::spawn(async move {
                s.with_writer(move |_| {
                    let _ = held.recv_timeout(Duration::from_secs(30));
                    Ok(())
                })
                .await
            })
        };
        // Queued in this order (x: one task of every weight).
        let jobs: [(&str, &str, bool); 9] = [
            ("h1", "big1", true),
            ("x-light-1", "x", false),
            ("h2", "big2", true),
            ("x-heavy", "x", true),
            ("x-light-2", "x", false),
            ("h3", "big3", true),
            ("h4", "big4", true),
            ("light", "small", false),
            ("h5", "big5", true),
        ];
        // Sent while the writer is held: wait until it runs the blocker.
        tokio::time::sleep(Duration::from_millis(100)).await;
        for (name, task, heavy) in jobs {
            let order = Arc::clone(&order);
            s.threads
                .queue(
                    task.into(),
                    heavy,
                    |_| Ok(()),
                    move |_: A2aResult<()>| order.lock().push(name.to_owned()),
                )
                .unwrap();
        }
        let order_alone = Arc::clone(&order);
        let alone = {
            let s = s.clone();
            tokio::spawn(async move {
                s.with_writer(move |_| {
                    order_alone.lock().push("alone".to_owned());
                    Ok(())
                })
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        release.send(()).unwrap();
        blocker.await.unwrap().unwrap();
        alone.await.unwrap().unwrap();
        let order = order.lock().clone();
        let at = |name: &str| order.iter().position(|n| n == name).unwrap();
        assert_eq!(order.len(), 10, "{order:?}");
        // The light writes of the backlog's end are not behind it.
        assert!(at("light") < at("h3"), "{order:?}");
        // One task's writes in the order they were sent.
        assert!(at("x-light-1") < at("x-heavy"), "{order:?}");
        assert!(at("x-heavy") < at("x-light-2"), "{order:?}");
        // Heavy writes keep their order among themselves.
        assert!(at("h1") < at("h2") && at("h2") < at("h3") && at("h4") < at("h5"));
        // The job alone comes last: everything was sent before it.
        assert_eq!(at("alone"), 9, "{order:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_are_all_committed() {
        let path = temp_db();
        let s = SqliteStore::open_with(&path, SqliteOptions::default().max_batch(8))
            .await
            .unwrap();
        let mut jobs = Vec::new();
        for i in 0..64 {
            let s = s.clone();
            jobs.push(tokio::spawn(async move {
                let id = format!("t{i}");
                s.create(&Owner::default(), task(&id)).await.unwrap();
                s.update(
                    &id,
                    TaskUpdate::Status {
                        status: TaskStatus::new(TaskState::Completed),
                        metadata: None,
                    },
                )
                .await
                .unwrap();
                let got = s.get(&id, None).await.unwrap().unwrap().task;
                assert_eq!(got.state(), TaskState::Completed);
            }));
        }
        for j in jobs {
            j.await.unwrap();
        }
        // A duplicate in a batch fails alone.
        let owner = Owner::default();
        let (a, b) = tokio::join!(
            s.create(&owner, task("t0")),
            s.create(&owner, task("fresh")),
        );
        assert!(a.unwrap_err().message.contains("already exists"));
        assert!(b.is_ok());
        s.close().await;
        let c = rusqlite::Connection::open(&path).unwrap();
        let n: i64 = c
            .query_row("SELECT COUNT(*) FROM a2a_tasks WHERE state = 3", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(n, 64);
        drop(c);
        remove_db(&path);
    }

    /// Metadata nested `depth` levels deep: past the decoder's recursion
    /// limit (100), a task holding it cannot be read.
    fn nested(depth: usize) -> agentwire_types::Struct {
        let mut v = serde_json::json!(1);
        for _ in 0..depth {
            v = serde_json::json!({ "a": v });
        }
        match v {
            serde_json::Value::Object(m) => agentwire_types::json::to_struct(m),
            _ => unreachable!(),
        }
    }

    /// A working task and a finished one that cannot be read: recovery
    /// sets the working one aside (and finds the readable one), a listing
    /// skips both, a read says each is unreadable, and their owner is
    /// known; every one is counted.
    #[tokio::test]
    async fn unreadable_rows_are_set_aside_skipped_and_refused() {
        use prost::Message as _;
        let path = temp_db();
        let s = SqliteStore::open(&path).await.unwrap();
        let owner = Owner {
            tenant: "t".into(),
            principal: "p".into(),
        };
        for id in ["bad", "good", "done"] {
            s.create(&owner, task(id)).await.unwrap();
        }
        let c = rusqlite::Connection::open(&path).unwrap();
        for id in ["bad", "done"] {
            let mut t = task(id);
            t.metadata = Some(nested(120));
            if id == "done" {
                t.status = Some(TaskStatus::new(TaskState::Completed));
            }
            c.execute(
                "UPDATE a2a_tasks SET head = ?1, state = ?2 WHERE id = ?3",
                rusqlite::params![t.encode_to_vec(), t.state() as i32, id],
            )
            .unwrap();
        }
        let page = s
            .list(
                &owner,
                &TaskQuery {
                    page_size: 10,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        let ids: Vec<_> = page.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["good"]);
        let scan = s.unfinished_for_recovery().await.unwrap();
        assert_eq!(scan.tasks.len(), 1);
        assert_eq!(scan.set_aside.len(), 1);
        assert_eq!(scan.set_aside[0].task_id, "bad");
        assert_eq!(scan.set_aside[0].owner, owner);
        assert!(scan.set_aside[0].kept.contains("a2a_unreadable_tasks"));
        for id in ["bad", "done"] {
            let err = s.get(id, None).await.unwrap_err();
            assert!(crate::store::is_unreadable(&err), "{err:?}");
            assert!(err.message.contains(id), "{err:?}");
            assert_eq!(s.owner_of(id).await.unwrap(), Some(owner.clone()));
        }
        assert_eq!(s.owner_of("nobody").await.unwrap(), None);
        assert!(
            s.unfinished_for_recovery()
                .await
                .unwrap()
                .set_aside
                .is_empty()
        );
        assert!(s.unreadable_rows() >= 4, "{}", s.unreadable_rows());
        let kept: i64 = c
            .query_row("SELECT COUNT(*) FROM a2a_unreadable_tasks", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(kept, 1);
        drop(c);
        s.close().await;
        remove_db(&path);
    }

    #[tokio::test]
    async fn corrupt_rows_are_internal_errors() {
        let path = temp_db();
        let s = SqliteStore::open(&path).await.unwrap();
        s.create(&Owner::default(), task("t1")).await.unwrap();
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute(
            "UPDATE a2a_tasks SET history = x'ffffff' WHERE id = 't1'",
            [],
        )
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
        // A listing skips it (see `unreadable_rows_are_set_aside_...`).
        let page = s
            .list(
                &Owner::default(),
                &TaskQuery {
                    page_size: 10,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert!(page.tasks.is_empty());
        c.execute(
            "INSERT INTO a2a_push_configs (task_id, id, config) VALUES ('t1', 'p', x'ff')",
            [],
        )
        .unwrap();
        assert!(s.get_push_config("t1", "p").await.is_err());
        assert!(s.list_push_configs("t1").await.is_err());
        drop(c);
        s.close().await;
        remove_db(&path);
    }
}
