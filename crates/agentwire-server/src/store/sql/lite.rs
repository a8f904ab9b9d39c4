//! The SQLite task store's own driver: one writer thread that commits the
//! writes of concurrent requests together (group commit), and a few reader
//! threads, each with a synchronous connection (`rusqlite`).
//!
//! Why not the async driver: it runs every statement on a thread of its own
//! connection and wakes the caller's task when the statement is done, so a
//! task write of three statements costs several thread hand-offs, and every
//! write is a transaction with its own commit. Here a whole store operation
//! (read the task, apply the update, write it back) is one job, run on the
//! writer thread inside the transaction of its batch: a request costs two
//! hand-offs (to the thread, and the answer back), and a commit is shared by
//! every job queued while the previous batch ran.
//!
//! The statements are those of [`Tables`], executed through [`Conn`] on a
//! connection the thread owns: they complete without waiting, so the
//! thread polls the operation's future once ([`now`]).
//!
//! A write is answered only after the commit of its batch: if the commit
//! fails, every job of the batch gets the error, and none of them is
//! acknowledged.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentwire_types::{A2aError, A2aResult};
use futures::FutureExt as _;
use parking_lot::{Mutex, RwLock};
use rusqlite::types::Value;
use rusqlite::{Connection, ErrorCode, OpenFlags};
use tokio::sync::{mpsc, oneshot};

use super::Tables;
use super::driver::{self, Arg, Conn, Dialect, SqlRow, Stmt};
use super::fault;
use crate::store::{StorageFault, storage_error, storage_fault};

/// How many prepared statements each connection keeps (the store has a
/// few dozen distinct texts: listings build theirs from their filters).
const STATEMENT_CACHE: usize = 96;

/// How often the checkpointer copies the write-ahead log into the
/// database, when something was committed since its last pass.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);

/// When the write-ahead log is started over, and what the writer does if
/// the checkpointer falls behind (see [`checkpoint_loop`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct WalLimits {
    /// A log of this many pages or more is to be started over: the
    /// checkpointer copies it in passes without pause until a pass has
    /// little left to copy, then has the writer copy the rest (4,096 pages,
    /// about 16 MB).
    pub restart_pages: u32,
    /// "Little left": a pass that copied at most this many pages (512).
    pub finish_pages: u32,
    /// The writer's own checkpoint, should the checkpointer fall behind
    /// all the same: at this many pages in the log (16,384, about 64 MB),
    /// the commit that reaches it copies the log itself. (SQLite's default
    /// is 1,000 pages, which made every few dozen commits of a busy server
    /// wait for a copy and an fsync.)
    pub writer_pages: u32,
}

impl Default for WalLimits {
    fn default() -> Self {
        Self {
            restart_pages: 4_096,
            finish_pages: 512,
            writer_pages: 16_384,
        }
    }
}

/// What the writer and the checkpointer tell each other.
#[derive(Debug, Default)]
struct WalState {
    /// Transactions committed by the writer.
    commits: AtomicU64,
    /// Set by the checkpointer: the log is long and nearly all of it is in
    /// the database; the writer copies the rest between two batches.
    finish: AtomicBool,
}

/// Bytes of the database file each connection maps into memory: reads
/// of pages are then memory reads, not `pread` calls.
const MMAP_BYTES: u64 = 256 << 20;

/// What a commit waits for: `Normal` survives a crash of the process (the
/// operating system has the write-ahead log); `Full` also survives a power
/// loss (each commit waits for the disk).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// `PRAGMA synchronous = NORMAL` (the default).
    #[default]
    Normal,
    /// `PRAGMA synchronous = FULL`.
    Full,
}

/// How the writer batches writes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Batching {
    /// At most this many store operations share one transaction.
    pub max_batch: usize,
    /// After the first operation of a batch, how long the writer waits for
    /// more before committing (zero: it takes only what is already queued,
    /// so a lone request never waits).
    pub max_wait: Duration,
}

/// A connection, owned by one thread and lent to the operations it runs.
/// (The lock is never contended: only its thread uses it; it is there
/// because the statements' futures must be `Send`.)
#[derive(Clone)]
pub(crate) struct LiteDb(Arc<Mutex<Connection>>);

impl std::fmt::Debug for LiteDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiteDb")
    }
}

impl LiteDb {
    fn new(conn: Connection) -> Self {
        Self(Arc::new(Mutex::new(conn)))
    }

    fn batch(&self, sql: &str) -> rusqlite::Result<()> {
        self.0.lock().execute_batch(sql)
    }

    /// One statement of the transactions' own (`BEGIN`, `SAVEPOINT`, ...),
    /// prepared once: every operation runs two and every batch two more,
    /// and parsing them each time was a tenth of the writer's instructions.
    fn control(&self, sql: &str) -> rusqlite::Result<()> {
        self.0.lock().prepare_cached(sql)?.execute([]).map(|_| ())
    }

    fn is_autocommit(&self) -> bool {
        self.0.lock().is_autocommit()
    }
}

/// A row of an answer, read out of the statement (column names shared by
/// the rows of one answer).
#[derive(Debug)]
pub(crate) struct LiteRow {
    names: Arc<[String]>,
    values: Vec<Value>,
}

impl LiteRow {
    fn get(&self, col: &str) -> A2aResult<&Value> {
        self.names
            .iter()
            .position(|n| n == col)
            .and_then(|i| self.values.get(i))
            .ok_or_else(|| driver::column_error(col, "no such column"))
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "NULL",
        Value::Integer(_) => "an integer",
        Value::Real(_) => "a real",
        Value::Text(_) => "text",
        Value::Blob(_) => "a blob",
    }
}

impl SqlRow for LiteRow {
    fn text(&self, col: &str) -> A2aResult<String> {
        match self.get(col)? {
            Value::Text(s) => Ok(s.clone()),
            v => Err(driver::column_error(
                col,
                format!("{} is not text", kind(v)),
            )),
        }
    }
    fn i64(&self, col: &str) -> A2aResult<i64> {
        match self.get(col)? {
            Value::Integer(n) => Ok(*n),
            v => Err(driver::column_error(
                col,
                format!("{} is not an integer", kind(v)),
            )),
        }
    }
    fn opt_i64(&self, col: &str) -> A2aResult<Option<i64>> {
        match self.get(col)? {
            Value::Null => Ok(None),
            _ => self.i64(col).map(Some),
        }
    }
    fn i32(&self, col: &str) -> A2aResult<i32> {
        let n = self.i64(col)?;
        i32::try_from(n).map_err(|e| driver::column_error(col, e))
    }
    fn flag(&self, col: &str) -> A2aResult<bool> {
        Ok(self.i64(col)? != 0)
    }
    fn blob(&self, col: &str) -> A2aResult<Vec<u8>> {
        match self.get(col)? {
            Value::Blob(b) => Ok(b.clone()),
            v => Err(driver::column_error(
                col,
                format!("{} is not a blob", kind(v)),
            )),
        }
    }
    fn opt_blob(&self, col: &str) -> A2aResult<Option<Vec<u8>>> {
        match self.get(col)? {
            Value::Null => Ok(None),
            _ => self.blob(col).map(Some),
        }
    }
}

/// Prepares (from the connection's cache) and binds a statement. The
/// placeholders `$n` are SQLite's named parameters, numbered in order of
/// first appearance, so binding by position matches (see `driver.rs`).
pub(crate) fn prepared<'c>(
    conn: &'c Connection,
    s: &Stmt<'_>,
) -> rusqlite::Result<rusqlite::CachedStatement<'c>> {
    let mut st = conn.prepare_cached(s.sql())?;
    for (i, a) in s.args().iter().enumerate() {
        let i = i + 1;
        match *a {
            Arg::Text(v) => st.raw_bind_parameter(i, v)?,
            Arg::I64(v) => st.raw_bind_parameter(i, v)?,
            Arg::I32(v) => st.raw_bind_parameter(i, v)?,
            // Flags are integers in SQLite (as the async driver stores them).
            Arg::Bool(v) => st.raw_bind_parameter(i, i64::from(v))?,
            Arg::Blob(v) => st.raw_bind_parameter(i, v)?,
        }
    }
    Ok(st)
}

/// Runs a statement and reads up to `limit` rows of its answer.
fn query(conn: &Connection, s: &Stmt<'_>, limit: usize) -> rusqlite::Result<Vec<LiteRow>> {
    let mut st = prepared(conn, s)?;
    let names: Arc<[String]> = st.column_names().into_iter().map(String::from).collect();
    let width = names.len();
    let mut rows = st.raw_query();
    let mut out = Vec::new();
    while out.len() < limit {
        let Some(row) = rows.next()? else { break };
        let mut values = Vec::with_capacity(width);
        for i in 0..width {
            values.push(row.get::<_, Value>(i)?);
        }
        out.push(LiteRow {
            names: Arc::clone(&names),
            values,
        });
    }
    Ok(out)
}

impl Conn for &LiteDb {
    type Row = LiteRow;
    type Error = rusqlite::Error;

    async fn execute(&mut self, s: Stmt<'_>) -> rusqlite::Result<u64> {
        let conn = self.0.lock();
        let n = prepared(&conn, &s)?.raw_execute()?;
        Ok(n as u64)
    }

    async fn fetch_optional(&mut self, s: Stmt<'_>) -> rusqlite::Result<Option<LiteRow>> {
        let conn = self.0.lock();
        Ok(query(&conn, &s, 1)?.pop())
    }

    async fn fetch_all(&mut self, s: Stmt<'_>) -> rusqlite::Result<Vec<LiteRow>> {
        let conn = self.0.lock();
        query(&conn, &s, usize::MAX)
    }
}

/// A transaction inside the writer's batch: a savepoint, rolled back if it
/// is dropped without [`Dialect::commit`].
pub(crate) struct LiteTx {
    db: LiteDb,
    open: bool,
}

impl Drop for LiteTx {
    fn drop(&mut self) {
        if self.open {
            // A failed rollback leaves the batch's transaction in doubt: the
            // writer then sees it ended (autocommit) and fails the batch.
            let _ = self.db.batch("ROLLBACK TO a2a_tx; RELEASE a2a_tx");
        }
    }
}

impl Conn for LiteTx {
    type Row = LiteRow;
    type Error = rusqlite::Error;

    async fn execute(&mut self, s: Stmt<'_>) -> rusqlite::Result<u64> {
        (&self.db).execute(s).await
    }

    async fn fetch_optional(&mut self, s: Stmt<'_>) -> rusqlite::Result<Option<LiteRow>> {
        (&self.db).fetch_optional(s).await
    }

    async fn fetch_all(&mut self, s: Stmt<'_>) -> rusqlite::Result<Vec<LiteRow>> {
        (&self.db).fetch_all(s).await
    }
}

/// SQLite through the writer thread and reader threads of this module.
#[derive(Debug, Clone)]
pub(crate) struct Lite;

impl Dialect for Lite {
    type Row = LiteRow;
    type Error = rusqlite::Error;
    type Pool = LiteDb;
    type On<'p> = &'p LiteDb;
    type Tx = LiteTx;

    // One writer at a time: the batch's `BEGIN IMMEDIATE` holds the
    // database's write lock, so there are no row locks to take or skip.
    const LOCK_ROWS: &'static str = "";
    const SKIP_LOCKED: &'static str = "";
    const NULL_BLOB: &'static str = "NULL";
    const FALSE: &'static str = "0";
    // Lists of two: SQLite evaluates `x IN (a, b, c, ...)` of more than two
    // constants (a partial index's condition at every insert and update of
    // a task row, the chunk insert's `NOT IN`) by building a temporary
    // B-tree of the list each time the statement runs: two of them made
    // and dropped for every new task, about 45,000 instructions of a
    // SendMessage (a fifth of it). Two values are compared in place.
    const TERMINAL: &'static str = "(state IN (3, 4) OR state IN (5, 7))";
    const OPEN: &'static str = "(state IN (1, 2) OR state IN (6, 8))";
    const TASK_TABLES: &'static [&'static str] = &["a2a_push_configs", "a2a_artifact_chunks"];
    const COUNTED: bool = true;
    const COUNT_SHARDS: u32 = 1;

    fn on(pool: &LiteDb) -> &LiteDb {
        pool
    }

    async fn begin(pool: &LiteDb) -> rusqlite::Result<LiteTx> {
        pool.control("SAVEPOINT a2a_tx")?;
        Ok(LiteTx {
            db: pool.clone(),
            open: true,
        })
    }

    async fn commit(mut tx: LiteTx) -> rusqlite::Result<()> {
        tx.open = false;
        tx.db.control("RELEASE a2a_tx")
    }

    fn error(area: &str, what: &str, e: rusqlite::Error) -> A2aError {
        driver::internal_error(area, what, &e, fault::lite_fault(&e))
    }

    fn is_unique_violation(e: &rusqlite::Error) -> bool {
        matches!(
            e,
            rusqlite::Error::SqliteFailure(f, _)
                if f.code == ErrorCode::ConstraintViolation
                    && (f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
                        || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE)
        )
    }
}

/// The output of an operation whose statements never wait (those of
/// [`Lite`]): its future is ready when first polled.
pub(crate) fn now<T>(f: impl Future<Output = A2aResult<T>>) -> A2aResult<T> {
    f.now_or_never().unwrap_or_else(|| {
        Err(A2aError::internal(
            "task store: an SQLite operation did not complete on its thread",
        ))
    })
}

/// A store operation sent to a thread.
trait Job: Send {
    /// Runs it on the thread's tables; what to answer once the batch is
    /// committed.
    fn run(self: Box<Self>, tables: &Tables<Lite>) -> Box<dyn Done>;
    /// Answers without running it.
    fn fail(self: Box<Self>, e: A2aError);
    /// Not run: answered with `e` once its batch is.
    fn refuse(self: Box<Self>, e: A2aError) -> Box<dyn Done>;
    /// Whether it runs alone on the writer, outside any transaction
    /// ([`Threads::alone`]).
    fn alone(&self) -> bool;
    /// What it has to do with the writer's fences ([`Fences`]).
    fn fence(&self) -> &FenceOf;
    /// What the writer's lanes need to know of it ([`Lanes`]).
    fn weight(&self) -> &Weight;
}

/// The task a write is about (its writes keep their order) and whether it
/// is heavy: it writes or rewrites a large row (see [`Lanes`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Weight {
    pub task: Option<Arc<str>>,
    pub heavy: bool,
}

impl Weight {
    pub(crate) fn of(task: &Arc<str>, heavy: bool) -> Self {
        Self {
            task: Some(Arc::clone(task)),
            heavy,
        }
    }
}

/// The tasks whose queued updates are refused ([`Threads::queue`]): one
/// of their queued updates failed, and the task manager writes it again
/// (lifting the fence) before anything queued later may be applied.
/// Without it a later chunk of an artifact could be stored after an
/// earlier one that was not. Empty but for the tasks of a failed write.
#[derive(Default)]
struct Fences(std::collections::HashSet<Arc<str>>);

impl Fences {
    /// `job` to run, or refused: then what to answer, in its turn with
    /// the batch's other jobs (the task's earlier update may be among
    /// them, answered at the end of the batch).
    fn admit(&mut self, job: Box<dyn Job>) -> Result<Box<dyn Job>, Box<dyn Done>> {
        if self.0.is_empty() {
            return Ok(job);
        }
        match job.fence() {
            FenceOf::Check(task) if self.0.contains(task) => Err(job.refuse(storage_error(
                StorageFault::Io,
                "task store: an earlier update of this task failed; this one is refused \
                 until that one is written again",
            ))),
            FenceOf::Lift(task) => {
                self.0.remove(task);
                Ok(job)
            }
            _ => Ok(job),
        }
    }

    /// A job that ran: its task is fenced if it is a queued update that
    /// failed (or whose batch is rolled back: `lost`).
    fn after(&mut self, done: &dyn Done, lost: bool) {
        if let Some(task) = done.queued_task().filter(|_| lost || done.failed()) {
            self.0.insert(task.into());
        }
    }
}

/// A job that ran, waiting for the commit of its batch.
trait Done: Send {
    /// Answers: its own result if the batch committed, else `commit`'s
    /// error.
    fn answer(self: Box<Self>, commit: Result<(), &A2aError>);
    /// The storage fault its own result reports, if any.
    fn fault(&self) -> Option<StorageFault>;
    /// Whether its own result is an error.
    fn failed(&self) -> bool;
    /// The task of a queued update ([`Threads::queue`]).
    fn queued_task(&self) -> Option<&str> {
        None
    }
}

/// A store operation: `f` to run, `done` to answer with its outcome (a
/// waiting caller's one-shot channel, or a queued update's callback).
struct Op<F, D> {
    f: F,
    done: D,
    alone: bool,
    fence: FenceOf,
    weight: Weight,
}

/// What an [`Op`] has to do with the fence of its task ([`Fences`]).
enum FenceOf {
    /// Nothing.
    None,
    /// A queued update of this task ([`Threads::queue`]): refused while
    /// the task is fenced.
    Check(Arc<str>),
    /// A write of this task through [`Threads::write_lifting`]: the task's
    /// fence is lifted before it runs.
    Lift(Arc<str>),
}

/// An operation that ran, waiting for the commit of its batch; `queued`:
/// the task of a queued update.
struct Ran<T, D> {
    result: A2aResult<T>,
    done: D,
    queued: Option<Arc<str>>,
}

impl<T, D> Ran<T, D> {
    fn new(result: A2aResult<T>, done: D, fence: FenceOf) -> Self {
        let queued = match fence {
            FenceOf::Check(task) => Some(task),
            _ => None,
        };
        Self {
            result,
            done,
            queued,
        }
    }
}

impl<F, T, D> Job for Op<F, D>
where
    F: FnOnce(&Tables<Lite>) -> A2aResult<T> + Send,
    T: Send + 'static,
    D: FnOnce(A2aResult<T>) + Send + 'static,
{
    fn run(self: Box<Self>, tables: &Tables<Lite>) -> Box<dyn Done> {
        let Op { f, done, fence, .. } = *self;
        Box::new(Ran::new(f(tables), done, fence))
    }

    fn fail(self: Box<Self>, e: A2aError) {
        (self.done)(Err(e));
    }

    fn refuse(self: Box<Self>, e: A2aError) -> Box<dyn Done> {
        let Op { done, fence, .. } = *self;
        Box::new(Ran::new(Err(e), done, fence))
    }

    fn alone(&self) -> bool {
        self.alone
    }

    fn fence(&self) -> &FenceOf {
        &self.fence
    }

    fn weight(&self) -> &Weight {
        &self.weight
    }
}

impl<T, D> Done for Ran<T, D>
where
    T: Send + 'static,
    D: FnOnce(A2aResult<T>) + Send + 'static,
{
    fn answer(self: Box<Self>, commit: Result<(), &A2aError>) {
        let answer = match commit {
            Ok(()) => self.result,
            Err(e) => Err(e.clone()),
        };
        // The caller may have gone (its request was dropped): the write
        // stands, nobody is told.
        (self.done)(answer);
    }

    fn fault(&self) -> Option<StorageFault> {
        self.result.as_ref().err().and_then(storage_fault)
    }

    fn failed(&self) -> bool {
        self.result.is_err()
    }

    fn queued_task(&self) -> Option<&str> {
        self.queued.as_deref()
    }
}

/// Which thread runs an operation, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum To {
    /// A reader (the writer for a database in memory).
    Reader,
    /// The writer, inside the transaction of a batch.
    Writer,
    /// The writer, alone, outside any transaction.
    Alone,
}

/// Where the store's operations are sent: its writer thread and, for a
/// file, its reader threads (`None` once closed).
#[derive(Debug, Clone)]
pub(crate) struct Threads {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    senders: RwLock<Option<Senders>>,
    /// Ends (`None`) when every thread has closed its connection.
    exited: tokio::sync::Mutex<mpsc::Receiver<()>>,
}

struct Senders {
    writer: flume::Sender<Box<dyn Job>>,
    readers: Option<flume::Sender<Box<dyn Job>>>,
    /// Nothing is sent: the checkpointer stops when it is dropped.
    _checkpointer: Option<flume::Sender<()>>,
}

impl std::fmt::Debug for Senders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Senders")
    }
}

fn closed() -> A2aError {
    A2aError::internal("task store: the SQLite store is closed")
}

/// How a connection of the store is opened.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// The database file.
    File(std::path::PathBuf),
    /// A private database in memory, its schema created by `init`.
    Memory(fn(&Connection) -> rusqlite::Result<()>),
}

/// Turns SQLite's memory statistics off, once, before SQLite is first
/// used in the process: with them on (SQLite's default), every allocation
/// of SQLite takes a global mutex to count itself, and a profile of the
/// store's writer showed those locks in about a sixth of its time. Nothing
/// here reads the statistics. When SQLite was already initialised (another
/// user of the library opened a database first) the call is refused and
/// nothing changes.
pub(crate) fn quiet_memory_statistics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: `sqlite3_config` may be called before `sqlite3_initialize`
        // (it then returns SQLITE_MISUSE and changes nothing if SQLite is
        // initialised already); SQLITE_CONFIG_MEMSTATUS takes one int.
        let rc = unsafe {
            rusqlite::ffi::sqlite3_config(
                rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS,
                0 as std::os::raw::c_int,
            )
        };
        tracing::debug!(rc, "task store: SQLite memory statistics off");
    });
}

/// The settings every connection of a file gets.
fn open(
    target: &Target,
    busy: Duration,
    sync: Synchronous,
    read_only: bool,
) -> A2aResult<Connection> {
    let fail = |e: rusqlite::Error| match target {
        Target::File(p) => {
            let what = format!("opening {}", p.display());
            fault::open_error("task store", p, &what, &e, fault::lite_fault(&e))
        }
        Target::Memory(_) => Lite::error("task store", "opening an in-memory database", e),
    };
    quiet_memory_statistics();
    let conn = match target {
        Target::File(path) => Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        ),
        Target::Memory(_) => Connection::open_in_memory(),
    }
    .map_err(fail)?;
    conn.busy_timeout(busy).map_err(fail)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    let sync = match sync {
        Synchronous::Normal => "NORMAL",
        Synchronous::Full => "FULL",
    };
    if let Target::File(_) = target {
        // The file was created in WAL mode by the migrations; a reader must
        // not change it.
        if !read_only {
            conn.pragma_update(None, "journal_mode", "WAL")
                .map_err(fail)?;
        }
        conn.pragma_update(None, "mmap_size", MMAP_BYTES)
            .map_err(fail)?;
    }
    conn.pragma_update(None, "synchronous", sync)
        .map_err(fail)?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(fail)?;
    if read_only {
        conn.pragma_update(None, "query_only", "ON").map_err(fail)?;
    }
    if let Target::Memory(init) = target {
        init(&conn).map_err(fail)?;
    }
    Ok(conn)
}

/// Starts a thread that opens a connection and serves `rx` with it until
/// every sender is gone; `alive` is dropped after the connection is closed.
async fn spawn(
    name: String,
    target: Target,
    settings: (Duration, Synchronous, bool),
    alive: mpsc::Sender<()>,
    serve: impl FnOnce(Connection) + Send + 'static,
) -> A2aResult<()> {
    let (ready_tx, ready) = oneshot::channel();
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            let alive = alive;
            let (busy, sync, read_only) = settings;
            match open(&target, busy, sync, read_only) {
                Ok(conn) => {
                    let _ = ready_tx.send(Ok(()));
                    serve(conn);
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                }
            }
            drop(alive);
        })
        .map_err(|e| A2aError::internal(format!("task store: starting a thread: {e}")))?;
    ready.await.map_err(|_| closed())?
}

impl Threads {
    /// Starts the writer and (for a file) `readers` reader threads.
    pub async fn start(
        target: Target,
        readers: usize,
        busy: Duration,
        sync: Synchronous,
        batching: Batching,
        wal: WalLimits,
        seen: Arc<AtomicU64>,
    ) -> A2aResult<Self> {
        let (alive, exited) = mpsc::channel(1);
        let (writer, rx) = flume::unbounded();
        let settings = (busy, sync, false);
        let name = "a2a-sqlite-writer".to_owned();
        let state = Arc::new(WalState::default());
        let shared = Arc::clone(&state);
        let file = matches!(target, Target::File(_));
        let writer_seen = Arc::clone(&seen);
        spawn(name, target.clone(), settings, alive.clone(), move |conn| {
            if file {
                if let Err(e) = conn.pragma_update(None, "wal_autocheckpoint", wal.writer_pages) {
                    tracing::warn!(error = %e, "task store: setting the writer's checkpoint");
                }
            }
            write_loop(conn, &rx, batching, &shared, &writer_seen);
        })
        .await?;
        let checkpointer = match target {
            Target::Memory(_) => None,
            Target::File(_) => {
                let (tx, stop) = flume::bounded::<()>(1);
                let name = "a2a-sqlite-checkpoint".to_owned();
                spawn(name, target.clone(), settings, alive.clone(), move |conn| {
                    checkpoint_loop(&conn, &stop, &state, wal);
                })
                .await?;
                Some(tx)
            }
        };
        let readers = match target {
            Target::Memory(_) => None,
            Target::File(_) => {
                let (tx, rx) = flume::unbounded();
                for i in 0..readers {
                    let rx: flume::Receiver<Box<dyn Job>> = rx.clone();
                    let settings = (busy, sync, true);
                    let name = format!("a2a-sqlite-reader-{i}");
                    let seen = Arc::clone(&seen);
                    spawn(name, target.clone(), settings, alive.clone(), move |conn| {
                        read_loop(conn, &rx, &seen);
                    })
                    .await?;
                }
                Some(tx)
            }
        };
        Ok(Self {
            inner: Arc::new(Inner {
                senders: RwLock::new(Some(Senders {
                    writer,
                    readers,
                    _checkpointer: checkpointer,
                })),
                exited: tokio::sync::Mutex::new(exited),
            }),
        })
    }

    async fn send<T, F>(&self, to: To, f: F, fence: FenceOf, weight: Weight) -> A2aResult<T>
    where
        F: FnOnce(&Tables<Lite>) -> A2aResult<T> + Send + 'static,
        T: Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job: Box<dyn Job> = Box::new(Op {
            f,
            done: move |result| {
                let _ = reply.send(result);
            },
            alone: to == To::Alone,
            fence,
            weight,
        });
        self.enqueue(to, job)?;
        answer.await.map_err(|_| closed())?
    }

    fn enqueue(&self, to: To, job: Box<dyn Job>) -> A2aResult<()> {
        let senders = self.inner.senders.read();
        let senders = senders.as_ref().ok_or_else(closed)?;
        let to = match (&senders.readers, to) {
            (Some(readers), To::Reader) => readers,
            _ => &senders.writer,
        };
        to.send(job).map_err(|_| closed())
    }

    /// Runs a write on the writer thread; answers once it is committed.
    pub async fn write<T, F>(&self, f: F) -> A2aResult<T>
    where
        F: FnOnce(&Tables<Lite>) -> A2aResult<T> + Send + 'static,
        T: Send + 'static,
    {
        self.send(To::Writer, f, FenceOf::None, Weight::default())
            .await
    }

    /// [`Self::write`] of a write about one task (`weight`: which, and
    /// whether the write is heavy; see [`Lanes`]).
    pub async fn write_weighing<T, F>(&self, weight: Weight, f: F) -> A2aResult<T>
    where
        F: FnOnce(&Tables<Lite>) -> A2aResult<T> + Send + 'static,
        T: Send + 'static,
    {
        self.send(To::Writer, f, FenceOf::None, weight).await
    }

    /// [`Self::write`] of a write to `task`, which lifts the task's fence
    /// (see [`Self::queue`]) before it runs; `heavy`: see [`Lanes`].
    pub async fn write_lifting<T, F>(&self, task: Arc<str>, heavy: bool, f: F) -> A2aResult<T>
    where
        F: FnOnce(&Tables<Lite>) -> A2aResult<T> + Send + 'static,
        T: Send + 'static,
    {
        let weight = Weight::of(&task, heavy);
        self.send(To::Writer, f, FenceOf::Lift(task), weight).await
    }

    /// Queues a write of `task` behind those already sent, without
    /// waiting: `done` is called on the writer thread with its outcome once
    /// its batch is committed (or refused). The writes of the writer run
    /// in the order they are sent, and so the `done` of a task's queued
    /// writes are called in the order they were queued. Once a queued
    /// write of a task fails, the task is fenced: its later queued writes
    /// are refused without running, until a [`Self::write_lifting`] of
    /// the task.
    pub fn queue<T, F, D>(&self, task: Arc<str>, heavy: bool, f: F, done: D) -> A2aResult<()>
    where
        F: FnOnce(&Tables<Lite>) -> A2aResult<T> + Send + 'static,
        T: Send + 'static,
        D: FnOnce(A2aResult<T>) + Send + 'static,
    {
        let weight = Weight::of(&task, heavy);
        self.enqueue(
            To::Writer,
            Box::new(Op {
                f,
                done,
                alone: false,
                fence: FenceOf::Check(task),
                weight,
            }),
        )
    }

    /// Runs a read on a reader thread (on the writer for a database in
    /// memory, which has one connection).
    pub async fn read<T, F>(&self, f: F) -> A2aResult<T>
    where
        F: FnOnce(&Tables<Lite>) -> A2aResult<T> + Send + 'static,
        T: Send + 'static,
    {
        self.send(To::Reader, f, FenceOf::None, Weight::default())
            .await
    }

    /// Runs `f` on the writer's connection between two batches, outside
    /// any transaction: nothing else writes while it runs.
    pub async fn alone<T, F>(&self, f: F) -> A2aResult<T>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.send(
            To::Alone,
            move |t: &Tables<Lite>| {
                let conn = t.writer.0.lock();
                f(&conn).map_err(|e| Lite::error("task store", "running on the writer", e))
            },
            FenceOf::None,
            Weight::default(),
        )
        .await
    }

    /// Closes the connections once the operations already sent are done;
    /// later operations fail.
    pub async fn close(&self) {
        // Without senders the threads finish what is queued and stop.
        drop(self.inner.senders.write().take());
        let mut exited = self.inner.exited.lock().await;
        while exited.recv().await.is_some() {}
    }
}

/// A reader thread: each job alone, outside any transaction.
fn read_loop(conn: Connection, rx: &flume::Receiver<Box<dyn Job>>, seen: &Arc<AtomicU64>) {
    let tables = Tables::one_pool(LiteDb::new(conn)).counting_unreadable(seen);
    while let Ok(job) = rx.recv() {
        job.run(&tables).answer(Ok(()));
    }
}

/// The checkpointer thread: every [`CHECKPOINT_EVERY`], if the writer
/// committed since its last pass, copies the write-ahead log into the
/// database (a passive checkpoint: it takes no lock the writer or the
/// readers wait for, and copies each page once however often the log
/// holds it). The writer's commits then never wait for that copy or its
/// fsync. Stops when `stop`'s sender is dropped.
///
/// A log is started over (written again from its start) only by a write
/// transaction that begins when all of the log is in the database, which
/// a busy writer never lets a pass beside it reach: each pass ends behind
/// the commits made while it ran. So once the log has
/// [`WalLimits::restart_pages`], the passes follow one another without
/// pause, each copying what the writer added during the one before, until
/// one copies at most [`WalLimits::finish_pages`]; then the writer, between
/// two batches, copies the few pages left itself (a short stall, two small
/// fsyncs) and its next transaction starts the log over. Without this the
/// log grew until the writer's own checkpoint at
/// [`WalLimits::writer_pages`], a stall of tens of milliseconds.
fn checkpoint_loop(
    conn: &Connection,
    stop: &flume::Receiver<()>,
    state: &WalState,
    wal: WalLimits,
) {
    let mut seen = 0;
    // Pages of the log in the database after the last pass.
    let mut copied = 0;
    let mut behind = false;
    loop {
        let wait = if behind {
            Duration::ZERO
        } else {
            CHECKPOINT_EVERY
        };
        match stop.recv_timeout(wait) {
            Err(flume::RecvTimeoutError::Timeout) => {}
            // Stopping (or a message, which nothing sends).
            _ => return,
        }
        behind = false;
        let now = state.commits.load(Ordering::Relaxed);
        if now == seen {
            continue;
        }
        seen = now;
        // (busy, pages in the log, pages of it in the database)
        let pass = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
            Ok((r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
        });
        let (log, done) = match pass {
            Ok(p) => p,
            // A failure (the disk, a lock held by another process) is left
            // to the next pass and to the writer's own checkpoint.
            Err(e) => {
                tracing::debug!(error = %e, "task store: checkpoint failed");
                continue;
            }
        };
        // Fewer pages than before: the log was started over.
        let this_pass = if done >= copied { done - copied } else { done };
        copied = done;
        if log >= i64::from(wal.restart_pages) && !state.finish.load(Ordering::Relaxed) {
            if done == log && this_pass <= i64::from(wal.finish_pages) {
                state.finish.store(true, Ordering::Relaxed);
            } else {
                behind = true;
            }
        }
    }
}

/// Heavy jobs one batch may hold at most, when no light job waits.
const HEAVY_PER_BATCH: usize = 4;

/// The writer's queue, in two lanes, so that a light write never waits
/// behind a backlog of heavy ones (a task whose row holds megabytes: its
/// creation, its chunks, the rewrites of its row). Light jobs go in
/// batches of their own; a heavy batch holds one heavy job, or a few while
/// no light job waits, and the two kinds of batch take turns. A light write
/// then waits for at most one heavy batch, and heavy writes still progress.
///
/// Order: the writes of one task run in the order they were sent (a job of
/// a task with a job in the heavy lane goes to the heavy lane too, and a
/// heavy job runs only once no earlier job of its task waits in the light
/// lane); a job that runs alone waits, in the heavy lane, behind every job
/// sent before it. Jobs of different tasks and writes of no task (which
/// their callers await) may overtake one another.
#[derive(Default)]
struct Lanes {
    light: std::collections::VecDeque<(u64, Box<dyn Job>)>,
    heavy: std::collections::VecDeque<(u64, Box<dyn Job>)>,
    /// Jobs waiting in each lane, by task.
    in_light: std::collections::HashMap<Arc<str>, usize>,
    in_heavy: std::collections::HashMap<Arc<str>, usize>,
    /// The order jobs were received in.
    received: u64,
    /// The last batch was heavy: the next one is light if it can be.
    heavy_last: bool,
}

impl Lanes {
    fn push(&mut self, job: Box<dyn Job>) {
        self.received += 1;
        let task = job.weight().task.clone();
        let heavy = job.weight().heavy
            || task.as_ref().is_some_and(|t| self.in_heavy.contains_key(t))
            || (job.alone() && !self.heavy.is_empty());
        let (lane, counts) = if heavy {
            (&mut self.heavy, &mut self.in_heavy)
        } else {
            (&mut self.light, &mut self.in_light)
        };
        if let Some(t) = task {
            *counts.entry(t).or_default() += 1;
        }
        lane.push_back((self.received, job));
    }

    /// Moves what the channel holds into the lanes (without waiting).
    fn receive(&mut self, rx: &flume::Receiver<Box<dyn Job>>) {
        while let Ok(job) = rx.try_recv() {
            self.push(job);
        }
    }

    fn is_empty(&self) -> bool {
        self.light.is_empty() && self.heavy.is_empty()
    }

    /// Whether the first heavy job may run: nothing sent before it that it
    /// must follow still waits in the light lane.
    fn heavy_ready(&self) -> bool {
        let Some((seq, job)) = self.heavy.front() else {
            return false;
        };
        match &job.weight().task {
            Some(t) => !self.in_light.contains_key(t),
            None => self.light.front().is_none_or(|(first, _)| first > seq),
        }
    }

    /// Whether the next batch is heavy.
    fn heavy_turn(&mut self) -> bool {
        let heavy = self.heavy_ready() && (self.light.is_empty() || !self.heavy_last);
        self.heavy_last = heavy;
        heavy
    }

    /// The next job of the lane: `Some(None)` when it runs alone (left in
    /// place).
    fn pop(&mut self, heavy: bool) -> Option<Box<dyn Job>> {
        let (lane, counts) = if heavy {
            (&mut self.heavy, &mut self.in_heavy)
        } else {
            (&mut self.light, &mut self.in_light)
        };
        let (_, job) = lane.pop_front()?;
        if let Some(t) = &job.weight().task {
            if let Some(n) = counts.get_mut(t) {
                *n -= 1;
                if *n == 0 {
                    counts.remove(t);
                }
            }
        }
        Some(job)
    }

    /// Whether the next job of the lane runs alone.
    fn next_alone(&self, heavy: bool) -> bool {
        let lane = if heavy { &self.heavy } else { &self.light };
        lane.front().is_some_and(|(_, j)| j.alone())
    }
}

/// The writer thread: takes the first job of a batch from its lanes
/// ([`Lanes`]), opens a transaction, runs it and whatever else the batch
/// may take (up to its bounds), commits, and answers them all.
fn write_loop(
    conn: Connection,
    rx: &flume::Receiver<Box<dyn Job>>,
    batching: Batching,
    wal: &WalState,
    seen: &Arc<AtomicU64>,
) {
    let db = LiteDb::new(conn);
    let tables = Tables::counting(db.clone()).counting_unreadable(seen);
    let mut lanes = Lanes::default();
    let mut fences = Fences::default();
    loop {
        if lanes.is_empty() {
            match rx.recv() {
                Ok(job) => lanes.push(job),
                Err(_) => return,
            }
        }
        lanes.receive(rx);
        let heavy = lanes.heavy_turn();
        let Some(first) = lanes.pop(heavy) else {
            continue;
        };
        let first = match fences.admit(first) {
            Ok(job) => job,
            Err(refused) => {
                refused.answer(Ok(()));
                continue;
            }
        };
        if first.alone() {
            first.run(&tables).answer(Ok(()));
            continue;
        }
        if let Err(e) = db.control("BEGIN IMMEDIATE") {
            first.fail(Lite::error("task store", "starting a write transaction", e));
            continue;
        }
        let deadline = Instant::now() + batching.max_wait;
        let mut ran: Vec<Box<dyn Done>> = Vec::new();
        let mut next = Some(first);
        let mut lost = None;
        let mut taken = 0;
        while let Some(job) = next.take() {
            let done = job.run(&tables);
            taken += 1;
            fences.after(&*done, false);
            if db.is_autocommit() {
                // SQLite rolled the transaction back (a full disk, an I/O
                // error): nothing of this batch was written. Every job of
                // the batch gets a storage error (the fault of the write
                // that failed; I/O if it did not say), so the task manager
                // retries them like any transient failure of the storage.
                let fault = done.fault().unwrap_or(StorageFault::Io);
                lost = Some(storage_error(
                    fault,
                    "task store: a write failed and SQLite rolled back its transaction",
                ));
                ran.push(done);
                break;
            }
            ran.push(done);
            if ran.len() >= batching.max_batch {
                break;
            }
            next = loop {
                lanes.receive(rx);
                if heavy {
                    // More heavy jobs only while no light one waits.
                    if taken >= HEAVY_PER_BATCH || !lanes.light.is_empty() || !lanes.heavy_ready() {
                        break None;
                    }
                } else if lanes.light.is_empty() && !batching.max_wait.is_zero() {
                    match rx.recv_deadline(deadline) {
                        Ok(job) => {
                            lanes.push(job);
                            continue;
                        }
                        Err(_) => break None,
                    }
                }
                if lanes.next_alone(heavy) {
                    // It runs once this batch is committed.
                    break None;
                }
                match lanes.pop(heavy) {
                    // Refused (a fenced task's queued write): the next one.
                    Some(job) => match fences.admit(job) {
                        Ok(job) => break Some(job),
                        Err(refused) => {
                            ran.push(refused);
                            continue;
                        }
                    },
                    None => break None,
                }
            };
        }
        // The counters' changes of the batch's writes, in its transaction.
        let lost = lost.or_else(|| now(tables.flush_counts()).err());
        let commit = match lost {
            Some(e) => {
                if !db.is_autocommit() {
                    let _ = db.batch("ROLLBACK");
                }
                Err(e)
            }
            None => db.control("COMMIT").map_err(|e| {
                let _ = db.batch("ROLLBACK");
                Lite::error("task store", "committing writes", e)
            }),
        };
        if commit.is_err() {
            if let Some(c) = &tables.counts {
                c.lock().clear();
            }
        } else {
            wal.commits.fetch_add(1, Ordering::Relaxed);
        }
        for done in ran {
            if commit.is_err() {
                fences.after(&*done, true);
            }
            done.answer(commit.as_ref().map(|_| ()));
        }
        // Nothing else writes while the writer copies the rest of the log:
        // all of it is then in the database, and the next transaction
        // starts it over (see `checkpoint_loop`).
        if wal.finish.swap(false, Ordering::Relaxed) {
            let pass =
                db.0.lock()
                    .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
            if let Err(e) = pass {
                tracing::debug!(error = %e, "task store: the writer's checkpoint failed");
            }
        }
    }
}
