//! PostgreSQL group commit: the task writes of concurrent requests share
//! transactions, as the SQLite store's writer thread does.
//!
//! Two writer tasks (each with a connection of the pool for the length of
//! a batch) take what is queued and run it in one transaction: the new
//! tasks first, all in one statement (arrays: one text whatever their
//! number), then each other store operation whole (read the task, apply
//! the update, write it back, and its event in the event log), then the
//! batch's changes to the task counters (arrays again, a statement a
//! table); they commit, and only then answer every operation and announce
//! their events to the other replicas. One commit (one WAL flush) serves a
//! batch, and the counters' rows are written once per batch, in key order
//! (two batches take them in the same order, so they cannot deadlock on
//! them). A blocking `SendMessage` writes its task once, when its turn ends
//! (`manager/held.rs`), so under load a batch is mostly new tasks; a batch
//! of new tasks alone is one statement and no explicit transaction
//! ([`INSERT_NEW_TASKS_COUNTED`]: the tasks and their counters) instead of
//! five (`BEGIN`, the tasks, two of counters, `COMMIT`).
//!
//! Why sqlx's pool, not pipelining (`tokio-postgres`): the updates read
//! before they write (the version a write checks, the context of an event),
//! so their statements depend on one another and a pipeline would not
//! shorten a batch much; the new tasks already go in one statement, the
//! two writers overlap one batch's statements with the other's commit, and
//! the pool is the one the rest of the store (reads, the event bus, the
//! push outbox) uses.
//!
//! A statement that fails aborts PostgreSQL's transaction: the batch is then
//! rolled back and every operation of it is answered with a storage error
//! (the fault of the failing statement, I/O when it has none), so the task
//! manager retries each like any transient failure of the storage; nothing
//! of the batch was written and none of it is acknowledged. (Creating a task
//! whose id exists is not a failing statement: `ON CONFLICT DO NOTHING`.)

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentwire_types::{A2aError, A2aResult, Task};
use futures::future::BoxFuture;
use parking_lot::Mutex;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnection, PgPool, PgRow};
use tokio::sync::{mpsc, oneshot};

use super::{Announcer, bind};
use crate::store::sql::driver::{Conn, Dialect, Stmt};
use crate::store::sql::{
    CountRows, EventLog, Stored, Tables, TaskRow, duplicate, next_count_shard, now_millis,
};
use crate::store::{LogSpan, Owner, StorageFault, TaskUpdate, storage_error, storage_fault};

/// Writer tasks of a store (batches in flight at once): two, so that one
/// batch runs its statements while the other waits for its commit's WAL
/// flush. More writers make smaller batches (more statements and commits
/// per write) for little more throughput: at c=64 with the echo agent on
/// the 2-core machine, four writers made batches of 9.5 new tasks against
/// 17 with two, cost 70 instead of 55 us of PostgreSQL's CPU and 59
/// instead of 53 of the server's per SendMessage, and two replicas loaded
/// together ran 7,500 SendMessage/s against 9,100 (one replica: 5,400
/// against 5,000, the runs alternating, others' builds on the machine).
const WRITERS: usize = 2;
/// Store operations per transaction, at most.
const MAX_BATCH: usize = 128;

/// PostgreSQL through a writer's connection, inside its batch's transaction:
/// an operation's own transaction is a savepoint.
#[derive(Debug, Clone)]
pub(crate) struct PgBatch;

/// The connection of a batch, lent to the operations it runs.
#[derive(Clone)]
pub(crate) struct BatchConn(Arc<BatchInner>);

struct BatchInner {
    conn: tokio::sync::Mutex<PoolConnection<sqlx::Postgres>>,
    /// A statement failed: PostgreSQL aborted the transaction (unless a
    /// savepoint rolled back takes it back); its fault.
    failed: Mutex<Option<Option<StorageFault>>>,
    /// An operation's savepoint was dropped without being released.
    rollback: AtomicBool,
}

impl std::fmt::Debug for BatchConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BatchConn")
    }
}

impl BatchConn {
    fn note<T>(&self, r: Result<T, sqlx::Error>) -> Result<T, sqlx::Error> {
        if let Err(e) = &r {
            *self.0.failed.lock() = Some(super::super::fault::fault_of(e));
        }
        r
    }

    async fn raw(&self, sql: &'static str) -> Result<(), sqlx::Error> {
        let mut c = self.0.conn.lock().await;
        let r = run_raw(&mut c, sql).await;
        drop(c);
        self.note(r)
    }
}

// The statements' futures, boxed where their connection is borrowed: the
// compiler cannot prove `Send` for sqlx's executor futures inside the
// store's generic async functions otherwise (it asks for it at every
// lifetime at once); a boxed `Send` future is checked here, once.

fn run_raw<'a>(
    c: &'a mut PgConnection,
    sql: &'static str,
) -> BoxFuture<'a, Result<(), sqlx::Error>> {
    Box::pin(async move { sqlx::Executor::execute(c, sql).await.map(|_| ()) })
}

fn run_execute<'a, 'b: 'a>(
    c: &'a mut PgConnection,
    s: &'a Stmt<'b>,
) -> BoxFuture<'a, Result<u64, sqlx::Error>> {
    Box::pin(async move { bind(s).execute(c).await.map(|r| r.rows_affected()) })
}

fn run_optional<'a, 'b: 'a>(
    c: &'a mut PgConnection,
    s: &'a Stmt<'b>,
) -> BoxFuture<'a, Result<Option<PgRow>, sqlx::Error>> {
    Box::pin(async move { bind(s).fetch_optional(c).await })
}

fn run_all<'a, 'b: 'a>(
    c: &'a mut PgConnection,
    s: &'a Stmt<'b>,
) -> BoxFuture<'a, Result<Vec<PgRow>, sqlx::Error>> {
    Box::pin(async move { bind(s).fetch_all(c).await })
}

impl Conn for &BatchConn {
    type Row = PgRow;
    type Error = sqlx::Error;

    async fn execute(&mut self, s: Stmt<'_>) -> Result<u64, sqlx::Error> {
        let mut c = self.0.conn.lock().await;
        let r = run_execute(&mut c, &s).await;
        drop(c);
        self.note(r)
    }

    async fn fetch_optional(&mut self, s: Stmt<'_>) -> Result<Option<PgRow>, sqlx::Error> {
        let mut c = self.0.conn.lock().await;
        let r = run_optional(&mut c, &s).await;
        drop(c);
        self.note(r)
    }

    async fn fetch_all(&mut self, s: Stmt<'_>) -> Result<Vec<PgRow>, sqlx::Error> {
        let mut c = self.0.conn.lock().await;
        let r = run_all(&mut c, &s).await;
        drop(c);
        self.note(r)
    }
}

/// An operation's transaction inside the batch: a savepoint, rolled back
/// (by the writer, after the operation) if it is dropped unreleased.
pub(crate) struct BatchTx {
    db: BatchConn,
    open: bool,
}

impl Drop for BatchTx {
    fn drop(&mut self) {
        if self.open {
            self.db.0.rollback.store(true, Ordering::Release);
        }
    }
}

impl Conn for BatchTx {
    type Row = PgRow;
    type Error = sqlx::Error;

    async fn execute(&mut self, s: Stmt<'_>) -> Result<u64, sqlx::Error> {
        (&self.db).execute(s).await
    }

    async fn fetch_optional(&mut self, s: Stmt<'_>) -> Result<Option<PgRow>, sqlx::Error> {
        (&self.db).fetch_optional(s).await
    }

    async fn fetch_all(&mut self, s: Stmt<'_>) -> Result<Vec<PgRow>, sqlx::Error> {
        (&self.db).fetch_all(s).await
    }
}

impl Dialect for PgBatch {
    type Row = PgRow;
    type Error = sqlx::Error;
    type Pool = BatchConn;
    type On<'p> = &'p BatchConn;
    type Tx = BatchTx;

    const LOCK_ROWS: &'static str = super::Pg::LOCK_ROWS;
    const SKIP_LOCKED: &'static str = super::Pg::SKIP_LOCKED;
    const NULL_BLOB: &'static str = super::Pg::NULL_BLOB;
    const FALSE: &'static str = super::Pg::FALSE;
    const TERMINAL: &'static str = super::Pg::TERMINAL;
    const OPEN: &'static str = super::Pg::OPEN;
    const TASK_TABLES: &'static [&'static str] = super::Pg::TASK_TABLES;
    const COUNTED: bool = super::Pg::COUNTED;
    const COUNT_SHARDS: u32 = super::Pg::COUNT_SHARDS;

    fn on(pool: &BatchConn) -> &BatchConn {
        pool
    }

    async fn begin(pool: &BatchConn) -> Result<BatchTx, sqlx::Error> {
        pool.raw("SAVEPOINT a2a_tx").await?;
        Ok(BatchTx {
            db: pool.clone(),
            open: true,
        })
    }

    async fn commit(mut tx: BatchTx) -> Result<(), sqlx::Error> {
        tx.open = false;
        tx.db.raw("RELEASE SAVEPOINT a2a_tx").await
    }

    fn error(area: &str, what: &str, e: sqlx::Error) -> A2aError {
        super::Pg::error(area, what, e)
    }

    #[cfg(any(feature = "sqlite", test))]
    fn is_unique_violation(e: &sqlx::Error) -> bool {
        super::Pg::is_unique_violation(e)
    }
}

/// The event log of a batch: the statements of the store's [`Announcer`];
/// the announcements wait for the commit (a replica told about an event it
/// cannot read yet would skip it).
pub(crate) struct Deferred {
    log: Arc<Announcer>,
    pending: Mutex<Vec<(String, i64)>>,
}

impl EventLog<PgBatch> for Deferred {
    fn update_event(
        &self,
        task_id: &str,
        context_id: &str,
        update: &TaskUpdate,
        generation: i64,
    ) -> Option<Vec<u8>> {
        <Announcer as EventLog<PgBatch>>::update_event(
            &self.log, task_id, context_id, update, generation,
        )
    }

    fn write<'a>(
        &'a self,
        new: &'a TaskRow,
        old: &Stored,
        now: i64,
        expected_version: Option<i64>,
        event: Option<&'a [u8]>,
    ) -> Stmt<'a> {
        <Announcer as EventLog<PgBatch>>::write(&self.log, new, old, now, expected_version, event)
    }

    fn append<'a>(
        &'a self,
        task_id: &'a str,
        chunk: &'a [u8],
        now: i64,
        event: &'a [u8],
    ) -> Stmt<'a> {
        <Announcer as EventLog<PgBatch>>::append(&self.log, task_id, chunk, now, event)
    }

    fn announce(&self, task_id: &str, seq: i64) {
        self.pending.lock().push((task_id.to_owned(), seq));
    }
}

/// What an operation of a batch runs on: the batch's tables, and its event
/// log when the store keeps one.
pub(crate) struct Batch {
    pub tables: Tables<PgBatch>,
    log: Option<Deferred>,
}

impl Batch {
    /// The event log, for the operations of [`Tables`].
    pub fn log(&self) -> Option<&Deferred> {
        self.log.as_ref()
    }
}

/// A store operation sent to a writer: run on the batch, or answered with
/// the error of a batch that cannot run it.
type RunJob =
    Box<dyn for<'a> FnOnce(Result<&'a Batch, A2aError>) -> BoxFuture<'a, Box<dyn Done>> + Send>;

/// What a writer is sent.
enum Job {
    /// Any store operation.
    Run(RunJob),
    /// A new task: inserted with the other new tasks of its batch, in one
    /// statement, before the batch's other operations.
    Create(NewTask),
}

/// A new task, encoded, and who waits for it.
struct NewTask {
    owner: Owner,
    row: TaskRow,
    reply: oneshot::Sender<A2aResult<Option<LogSpan>>>,
}

/// An operation that ran, waiting for the commit of its batch.
trait Done: Send {
    fn answer(self: Box<Self>, commit: Result<(), &A2aError>);
    fn fault(&self) -> Option<StorageFault>;
}

struct Ran<T> {
    result: A2aResult<T>,
    reply: oneshot::Sender<A2aResult<T>>,
}

impl<T: Send> Done for Ran<T> {
    fn answer(self: Box<Self>, commit: Result<(), &A2aError>) {
        let answer = match commit {
            Ok(()) => self.result,
            Err(e) => Err(e.clone()),
        };
        let _ = self.reply.send(answer);
    }

    fn fault(&self) -> Option<StorageFault> {
        self.result.as_ref().err().and_then(storage_fault)
    }
}

/// The writers of a store: started with its first write (in the runtime
/// that makes it), again if they went away with their runtime.
#[derive(Debug)]
pub(crate) struct Writers {
    pool: PgPool,
    log: Option<Arc<Announcer>>,
    tx: Mutex<Option<mpsc::UnboundedSender<Job>>>,
}

fn closed() -> A2aError {
    storage_error(
        StorageFault::Io,
        "task store: the PostgreSQL writer stopped before answering",
    )
}

impl Writers {
    pub fn new(pool: PgPool, log: Option<Arc<Announcer>>) -> Self {
        Self {
            pool,
            log,
            tx: Mutex::new(None),
        }
    }

    fn sender(&self) -> mpsc::UnboundedSender<Job> {
        let mut slot = self.tx.lock();
        if let Some(tx) = slot.as_ref().filter(|tx| !tx.is_closed()) {
            return tx.clone();
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        for _ in 0..WRITERS {
            tokio::spawn(write_loop(
                self.pool.clone(),
                Arc::clone(&rx),
                self.log.clone(),
            ));
        }
        slot.insert(tx).clone()
    }

    /// Runs a write in a batch; answers once the batch is committed.
    pub async fn write<T, F>(&self, f: F) -> A2aResult<T>
    where
        T: Send + 'static,
        F: for<'a> FnOnce(&'a Batch) -> BoxFuture<'a, A2aResult<T>> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job: RunJob = Box::new(move |b: Result<&Batch, A2aError>| {
            Box::pin(async move {
                let result = match b {
                    Ok(b) => f(b).await,
                    Err(e) => Err(e),
                };
                Box::new(Ran { result, reply }) as Box<dyn Done>
            })
        });
        self.send(Job::Run(job))?;
        answer.await.map_err(|_| closed())?
    }

    /// Creates a task in a batch (see [`insert_new_tasks`]); answers once
    /// the batch is committed.
    pub async fn create(&self, owner: Owner, task: Task) -> A2aResult<Option<LogSpan>> {
        let (reply, answer) = oneshot::channel();
        // Encoded here, by the request, rather than by the writer.
        let row = TaskRow::encode(task);
        self.send(Job::Create(NewTask { owner, row, reply }))?;
        answer.await.map_err(|_| closed())?
    }

    fn send(&self, job: Job) -> A2aResult<()> {
        if let Err(mpsc::error::SendError(job)) = self.sender().send(job) {
            // The writers went away (their runtime ended): new ones.
            self.sender().send(job).map_err(|_| closed())?;
        }
        Ok(())
    }
}

/// A writer: takes what is queued (up to [`MAX_BATCH`]), runs it in one
/// transaction, commits, answers.
async fn write_loop(
    pool: PgPool,
    rx: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Job>>>,
    log: Option<Arc<Announcer>>,
) {
    loop {
        let mut jobs = Vec::new();
        {
            let mut rx = rx.lock().await;
            match rx.recv().await {
                Some(job) => jobs.push(job),
                None => return,
            }
            while jobs.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(job) => jobs.push(job),
                    Err(_) => break,
                }
            }
        }
        run_batch(&pool, jobs, log.as_ref()).await;
    }
}

/// Answers every job of a batch that cannot run with `e`.
async fn fail_all(jobs: Vec<Job>, e: A2aError) {
    for job in jobs {
        match job {
            Job::Run(job) => job(Err(e.clone())).await.answer(Ok(())),
            Job::Create(new) => {
                let _ = new.reply.send(Err(e.clone()));
            }
        }
    }
}

/// The insert of a batch's new tasks: one row per element of the arrays
/// (`$1` to `$10`), all written at `$11` by `$12` (the replica, with an
/// event log); the ids of those inserted (an id that exists is not, and
/// fails no statement). One text whatever the number of tasks, so one
/// prepared statement.
///
/// No event is logged for a new task: nothing can follow a task before it
/// exists, and whoever follows it from another replica starts from the
/// task as stored (whose position in the log is then that of its first
/// update, or 0), so such an event was never read.
const INSERT_NEW_TASKS: &str = "INSERT INTO a2a_tasks (id, context_id, owner_tenant, \
     owner_principal, state, status_millis, has_status_time, head, history, artifacts, \
     created_at, updated_at, writer) \
     SELECT id, context_id, owner_tenant, owner_principal, state, status_millis, \
     has_status_time, head, history, artifacts, $11, $11, $12 \
     FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int4[], $6::int8[], \
     $7::bool[], $8::bytea[], $9::bytea[], $10::bytea[]) \
     AS n(id, context_id, owner_tenant, owner_principal, state, status_millis, \
     has_status_time, head, history, artifacts) \
     ON CONFLICT (id) DO NOTHING RETURNING id";

/// A batch of new tasks alone, in one statement and no explicit
/// transaction (a statement is its own transaction: one round trip instead
/// of five, `BEGIN`, the tasks, two of counters and `COMMIT`): the rows of
/// [`INSERT_NEW_TASKS`], then the counters of the tasks inserted (those of
/// [`ADD_TASK_COUNTS`] and [`ADD_CONTEXT_COUNTS`], computed by PostgreSQL
/// from what the insert returns, so an id that exists counts nothing), `$13`
/// the shard of the owners' counters. Each part reads the one before it
/// (the owners' counters wait for every task row, the contexts' counters
/// for the owners' through the scalar subquery), and each writes its
/// counter rows in key order (`ORDER BY`, the columns' collation is "C",
/// the byte order of the other batches' `BTreeMap`): counter rows are
/// locked in the order of the other batches, owners first, so the two
/// kinds of batch cannot deadlock on them.
const INSERT_NEW_TASKS_COUNTED: &str = "WITH ins AS (INSERT INTO a2a_tasks (id, context_id, \
     owner_tenant, owner_principal, state, status_millis, has_status_time, head, history, \
     artifacts, created_at, updated_at, writer) \
     SELECT id, context_id, owner_tenant, owner_principal, state, status_millis, \
     has_status_time, head, history, artifacts, $11, $11, $12 \
     FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int4[], $6::int8[], \
     $7::bool[], $8::bytea[], $9::bytea[], $10::bytea[]) \
     AS n(id, context_id, owner_tenant, owner_principal, state, status_millis, \
     has_status_time, head, history, artifacts) \
     ON CONFLICT (id) DO NOTHING \
     RETURNING id, context_id, owner_tenant, owner_principal, state), \
     owners AS (INSERT INTO a2a_task_counts (owner_tenant, owner_principal, state, n, shard) \
     SELECT owner_tenant, owner_principal, state, count(*), $13 FROM ins \
     GROUP BY owner_tenant, owner_principal, state \
     ORDER BY owner_tenant, owner_principal, state \
     ON CONFLICT (owner_tenant, owner_principal, state, shard) \
     DO UPDATE SET n = a2a_task_counts.n + excluded.n RETURNING 1), \
     contexts AS (INSERT INTO a2a_context_counts \
     (owner_tenant, owner_principal, context_id, state, n) \
     SELECT owner_tenant, owner_principal, context_id, state, count(*) FROM ins \
     WHERE (SELECT count(*) FROM owners) >= 0 \
     GROUP BY owner_tenant, owner_principal, context_id, state \
     ORDER BY owner_tenant, owner_principal, context_id, state \
     ON CONFLICT (owner_tenant, owner_principal, context_id, state) \
     DO UPDATE SET n = a2a_context_counts.n + excluded.n RETURNING 1) \
     SELECT id FROM ins WHERE (SELECT count(*) FROM contexts) >= 0";

/// The new tasks of a batch, column by column.
#[derive(Default)]
struct Columns<'a> {
    ids: Vec<&'a str>,
    contexts: Vec<&'a str>,
    tenants: Vec<&'a str>,
    principals: Vec<&'a str>,
    states: Vec<i32>,
    millis: Vec<i64>,
    timed: Vec<bool>,
    heads: Vec<&'a [u8]>,
    histories: Vec<&'a [u8]>,
    artifacts: Vec<&'a [u8]>,
}

/// Runs [`INSERT_NEW_TASKS`], or [`INSERT_NEW_TASKS_COUNTED`] with the
/// owners' counters in shard `counted`.
fn run_insert<'a>(
    c: &'a mut PgConnection,
    cols: &'a Columns<'a>,
    now: i64,
    writer: Option<&'a str>,
    counted: Option<i32>,
) -> BoxFuture<'a, Result<Vec<String>, sqlx::Error>> {
    Box::pin(async move {
        let sql = if counted.is_some() {
            INSERT_NEW_TASKS_COUNTED
        } else {
            INSERT_NEW_TASKS
        };
        let q = sqlx::query_scalar(sql)
            .bind(&cols.ids)
            .bind(&cols.contexts)
            .bind(&cols.tenants)
            .bind(&cols.principals)
            .bind(&cols.states)
            .bind(&cols.millis)
            .bind(&cols.timed)
            .bind(&cols.heads)
            .bind(&cols.histories)
            .bind(&cols.artifacts)
            .bind(now)
            .bind(writer);
        match counted {
            Some(shard) => q.bind(shard).fetch_all(c).await,
            None => q.fetch_all(c).await,
        }
    })
}

/// Inserts the new tasks of a batch in one statement ([`INSERT_NEW_TASKS`]),
/// counts them, and returns their answers (to be sent after the commit).
/// A task whose id exists, or comes twice in the batch, is refused as the
/// store refuses a duplicate; a failed statement fails the batch. `alone`:
/// the batch is these tasks and nothing else, run outside a transaction
/// ([`INSERT_NEW_TASKS_COUNTED`]: the statement writes their counters
/// too, and its end is the batch's commit).
async fn insert_new_tasks(
    db: &BatchConn,
    batch: &Batch,
    new: Vec<NewTask>,
    alone: bool,
) -> Vec<Box<dyn Done>> {
    let mut seen = std::collections::HashSet::with_capacity(new.len());
    let (fresh, twice): (Vec<NewTask>, Vec<NewTask>) =
        new.into_iter().partition(|n| seen.insert(n.row.id.clone()));
    let mut cols = Columns::default();
    for n in &fresh {
        cols.ids.push(&n.row.id);
        cols.contexts.push(&n.row.context_id);
        cols.tenants.push(&n.owner.tenant);
        cols.principals.push(&n.owner.principal);
        cols.states.push(n.row.state);
        cols.millis.push(n.row.status_millis);
        cols.timed.push(n.row.has_status_time);
        cols.heads.push(&n.row.head);
        cols.histories.push(&n.row.history);
        cols.artifacts.push(&n.row.artifacts);
    }
    let writer = batch.log.as_ref().map(|d| &*d.log.origin);
    let inserted = {
        let mut c = db.0.conn.lock().await;
        let counted = alone.then(|| next_count_shard(PgBatch::COUNT_SHARDS));
        let r = run_insert(&mut c, &cols, now_millis(), writer, counted).await;
        drop(c);
        db.note(r)
    };
    drop(cols);
    let inserted: std::collections::HashSet<String> = match inserted {
        Ok(ids) => ids.into_iter().collect(),
        Err(e) => {
            let e = super::db_error("creating tasks", e);
            return fresh
                .into_iter()
                .chain(twice)
                .map(|n| created(n.reply, Err(e.clone())))
                .collect();
        }
    };
    let span = batch.log.as_ref().map(|_| LogSpan {
        before: 0,
        after: 0,
    });
    let mut done = Vec::with_capacity(fresh.len() + twice.len());
    for n in fresh {
        let result = if inserted.contains(&n.row.id) {
            if !alone {
                batch
                    .tables
                    .count(&n.owner, &n.row.context_id, n.row.state, 1);
            }
            Ok(span)
        } else {
            Err(duplicate(&n.row.id))
        };
        done.push(created(n.reply, result));
    }
    for n in twice {
        done.push(created(n.reply, Err(duplicate(&n.row.id))));
    }
    done
}

/// The batch's changes to the task counters (the rows of
/// [`Tables::take_counts`], in its order), as arrays: at most three
/// statements, each one text whatever the number of rows. `$5` of the
/// first is the shard of the owners' counters this batch updates.
const ADD_TASK_COUNTS: &str = "INSERT INTO a2a_task_counts \
     (owner_tenant, owner_principal, state, n, shard) \
     SELECT t, p, s, n, $5 FROM unnest($1::text[], $2::text[], $3::int4[], $4::int8[]) \
     AS c(t, p, s, n) \
     ON CONFLICT (owner_tenant, owner_principal, state, shard) \
     DO UPDATE SET n = a2a_task_counts.n + excluded.n";
const ADD_CONTEXT_COUNTS: &str = "INSERT INTO a2a_context_counts \
     (owner_tenant, owner_principal, context_id, state, n) \
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int4[], $5::int8[]) \
     ON CONFLICT (owner_tenant, owner_principal, context_id, state) \
     DO UPDATE SET n = a2a_context_counts.n + excluded.n";
/// The context counters that went down and are at zero now.
const DROP_CONTEXT_COUNTS: &str = "DELETE FROM a2a_context_counts WHERE n = 0 \
     AND (owner_tenant, owner_principal, context_id, state) IN \
     (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int4[]))";

/// Applies the batch's changes to the task counters, before its commit.
async fn flush_counts(db: &BatchConn, tables: &Tables<PgBatch>) -> A2aResult<()> {
    let Some(rows) = tables.take_counts() else {
        return Ok(());
    };
    let shard = next_count_shard(PgBatch::COUNT_SHARDS);
    let r = {
        let mut c = db.0.conn.lock().await;
        let r = write_counts(&mut c, &rows, shard).await;
        drop(c);
        db.note(r)
    };
    r.map_err(|e| super::db_error("counting tasks", e))
}

fn write_counts<'a>(
    c: &'a mut PgConnection,
    rows: &'a CountRows,
    shard: i32,
) -> BoxFuture<'a, Result<(), sqlx::Error>> {
    Box::pin(async move {
        if !rows.owners.is_empty() {
            let mut cols = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for ((tenant, principal, state), n) in &rows.owners {
                cols.0.push(tenant.as_str());
                cols.1.push(principal.as_str());
                cols.2.push(*state);
                cols.3.push(*n);
            }
            sqlx::query(ADD_TASK_COUNTS)
                .bind(&cols.0)
                .bind(&cols.1)
                .bind(&cols.2)
                .bind(&cols.3)
                .bind(shard)
                .execute(&mut *c)
                .await?;
        }
        let context_columns =
            |rows: &mut dyn Iterator<Item = &'a ((String, String, String, i32), i64)>| {
                let mut cols = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
                for ((tenant, principal, context, state), n) in rows {
                    cols.0.push(tenant.as_str());
                    cols.1.push(principal.as_str());
                    cols.2.push(context.as_str());
                    cols.3.push(*state);
                    cols.4.push(*n);
                }
                cols
            };
        if !rows.contexts.is_empty() {
            let cols = context_columns(&mut rows.contexts.iter());
            sqlx::query(ADD_CONTEXT_COUNTS)
                .bind(&cols.0)
                .bind(&cols.1)
                .bind(&cols.2)
                .bind(&cols.3)
                .bind(&cols.4)
                .execute(&mut *c)
                .await?;
        }
        let fell = context_columns(&mut rows.fell());
        if !fell.0.is_empty() {
            sqlx::query(DROP_CONTEXT_COUNTS)
                .bind(&fell.0)
                .bind(&fell.1)
                .bind(&fell.2)
                .bind(&fell.3)
                .execute(&mut *c)
                .await?;
        }
        Ok(())
    })
}

fn created(
    reply: oneshot::Sender<A2aResult<Option<LogSpan>>>,
    result: A2aResult<Option<LogSpan>>,
) -> Box<dyn Done> {
    Box::new(Ran { result, reply })
}

async fn run_batch(pool: &PgPool, jobs: Vec<Job>, log: Option<&Arc<Announcer>>) {
    let conn = match pool.acquire().await {
        Ok(c) => c,
        Err(e) => return fail_all(jobs, super::db_error("starting a batch of writes", e)).await,
    };
    let db = BatchConn(Arc::new(BatchInner {
        conn: tokio::sync::Mutex::new(conn),
        failed: Mutex::new(None),
        rollback: AtomicBool::new(false),
    }));
    let batch = Batch {
        tables: Tables::counting(db.clone()),
        log: log.map(|l| Deferred {
            log: Arc::clone(l),
            pending: Mutex::new(Vec::new()),
        }),
    };
    let mut ran: Vec<Box<dyn Done>> = Vec::with_capacity(jobs.len());
    let mut lost: Option<A2aError> = None;
    let (mut new, mut runs): (Vec<NewTask>, Vec<RunJob>) =
        (Vec::new(), Vec::with_capacity(jobs.len()));
    for job in jobs {
        match job {
            Job::Create(n) => new.push(n),
            Job::Run(r) => runs.push(r),
        }
    }
    if runs.is_empty() {
        // New tasks alone (blocking SendMessage under load): one statement,
        // its own transaction; answered once it has returned, i.e. committed.
        // A failed statement wrote nothing.
        for done in insert_new_tasks(&db, &batch, new, true).await {
            done.answer(Ok(()));
        }
        return;
    }
    if let Err(e) = db.raw("BEGIN").await {
        let jobs = (new.into_iter().map(Job::Create))
            .chain(runs.into_iter().map(Job::Run))
            .collect();
        return fail_all(jobs, super::db_error("starting a batch of writes", e)).await;
    }
    // The new tasks first: an operation of the batch on one of them (from
    // a caller that did not wait for its creation) finds it.
    if !new.is_empty() {
        ran.extend(insert_new_tasks(&db, &batch, new, false).await);
        let failed = *db.0.failed.lock();
        if let Some(fault) = failed {
            lost = Some(storage_error(
                fault.unwrap_or(StorageFault::Io),
                "task store: a write failed and PostgreSQL rolled back its batch",
            ));
        }
    }
    for job in runs {
        if let Some(e) = &lost {
            // The transaction is gone: the rest are not run.
            ran.push(job(Err(e.clone())).await);
            continue;
        }
        let done = job(Ok(&batch)).await;
        if db.0.rollback.swap(false, Ordering::AcqRel) {
            // The operation's savepoint was dropped: undo it (which also
            // takes back a failure inside it).
            if db.raw("ROLLBACK TO SAVEPOINT a2a_tx").await.is_ok() {
                *db.0.failed.lock() = None;
                let _ = db.raw("RELEASE SAVEPOINT a2a_tx").await;
            }
        }
        let failed = *db.0.failed.lock();
        if let Some(fault) = failed {
            let fault = fault.or_else(|| done.fault()).unwrap_or(StorageFault::Io);
            lost = Some(storage_error(
                fault,
                "task store: a write failed and PostgreSQL rolled back its batch",
            ));
        }
        ran.push(done);
    }
    if lost.is_none() {
        if let Err(e) = flush_counts(&db, &batch.tables).await {
            lost = Some(e);
        }
    }
    let commit = match lost {
        Some(e) => {
            let _ = db.raw("ROLLBACK").await;
            Err(e)
        }
        None => db
            .raw("COMMIT")
            .await
            .map_err(|e| super::db_error("committing a batch of writes", e)),
    };
    for done in ran {
        done.answer(commit.as_ref().map(|_| ()));
    }
    if commit.is_ok()
        && let Some(d) = &batch.log
    {
        for (task_id, seq) in d.pending.lock().drain(..) {
            d.log.announce(&task_id, seq);
        }
    }
    // The connection goes back to the pool (a rolled-back one is clean).
    drop(batch);
    drop(db);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::TaskStore as _;
    use crate::store::sql::postgres::testing::TestSchema;
    use agentwire_types::{ErrorKind, TaskState, TaskStatus};

    /// Creations of one id racing each other (they share batches, and
    /// batches race): exactly one is stored, the others are refused as
    /// duplicates, and the task is counted once.
    #[tokio::test]
    #[ignore = "needs PostgreSQL (A2A_TEST_POSTGRES_URL)"]
    async fn one_of_several_creations_of_an_id_wins() {
        let Some(schema) = TestSchema::create("a2a_batch", "the batched creations test").await
        else {
            return;
        };
        let store = Arc::new(schema.store(8).await.with_event_log("replica-a").unwrap());
        for round in 0..5 {
            let id = format!("t{round}");
            let mut runs = Vec::new();
            for _ in 0..16 {
                let (store, id) = (Arc::clone(&store), id.clone());
                runs.push(tokio::spawn(async move {
                    let task = Task {
                        id,
                        context_id: "c".into(),
                        status: Some(TaskStatus::new(TaskState::Completed)),
                        ..Default::default()
                    };
                    store.create(&Owner::default(), task).await
                }));
            }
            let mut created = 0;
            for run in runs {
                match run.await.unwrap() {
                    Ok(span) => {
                        assert_eq!(
                            span,
                            Some(LogSpan {
                                before: 0,
                                after: 0
                            })
                        );
                        created += 1;
                    }
                    Err(e) => assert_eq!(e.kind, ErrorKind::Internal, "{e:?}"),
                }
            }
            assert_eq!(created, 1, "round {round}: one creation wins");
        }
        let q = crate::store::TaskQuery {
            state: Some(TaskState::Completed),
            page_size: 10,
            ..Default::default()
        };
        assert_eq!(store.list(&Owner::default(), &q).await.unwrap().total, 5);
        store.pool().close().await;
        schema.drop_schema().await;
    }

    /// Concurrent creations alone share batches that are one statement
    /// each (no transaction): the counters of owners and of contexts count
    /// every task created, once, and a duplicate of a created id nothing.
    #[tokio::test]
    #[ignore = "needs PostgreSQL (A2A_TEST_POSTGRES_URL)"]
    async fn creations_alone_count_their_tasks_in_one_statement() {
        let Some(schema) = TestSchema::create("a2a_batch", "the counted creations test").await
        else {
            return;
        };
        let store = Arc::new(schema.store(8).await);
        let mut runs = Vec::new();
        for i in 0..60 {
            let store = Arc::clone(&store);
            runs.push(tokio::spawn(async move {
                let state = if i % 3 == 0 {
                    TaskState::Failed
                } else {
                    TaskState::Completed
                };
                let task = Task {
                    id: format!("t{}", i % 50),
                    context_id: format!("c{}", i % 4),
                    status: Some(TaskStatus::new(state)),
                    ..Default::default()
                };
                store.create(&Owner::default(), task).await.is_ok()
            }));
        }
        let mut created = 0;
        for run in runs {
            if run.await.unwrap() {
                created += 1;
            }
        }
        assert_eq!(created, 50, "ids t0..t49 once each");
        let all = crate::store::TaskQuery {
            page_size: 100,
            ..Default::default()
        };
        let listed = store.list(&Owner::default(), &all).await.unwrap();
        assert_eq!(listed.total, 50);
        let mut by_context = 0;
        for c in 0..4 {
            let q = crate::store::TaskQuery {
                context_id: Some(format!("c{c}")),
                page_size: 100,
                ..Default::default()
            };
            let page = store.list(&Owner::default(), &q).await.unwrap();
            assert_eq!(page.total, page.tasks.len(), "context c{c}");
            by_context += page.total;
        }
        assert_eq!(by_context, 50);
        let failed = crate::store::TaskQuery {
            state: Some(TaskState::Failed),
            page_size: 100,
            ..Default::default()
        };
        let page = store.list(&Owner::default(), &failed).await.unwrap();
        assert_eq!(page.total, page.tasks.len());
        store.pool().close().await;
        schema.drop_schema().await;
    }

    /// The deletion of a batch's context counters at zero looks their keys
    /// up in the key's index (sequential scans off: on a small table the
    /// planner prefers one even where an index serves).
    #[tokio::test]
    #[ignore = "needs PostgreSQL (A2A_TEST_POSTGRES_URL)"]
    async fn the_counters_deletion_reads_the_key_index() {
        let Some(schema) = TestSchema::create("a2a_batch", "the counters plan test").await else {
            return;
        };
        let store = schema.store(1).await;
        let mut c = store.pool().acquire().await.unwrap();
        sqlx::Executor::execute(&mut *c, "SET enable_seqscan = off")
            .await
            .unwrap();
        let plan: Vec<String> = sqlx::query_scalar(&format!("EXPLAIN {DROP_CONTEXT_COUNTS}"))
            .bind(vec!["", ""])
            .bind(vec!["", ""])
            .bind(vec!["a", "b"])
            .bind(vec![1i32, 2])
            .fetch_all(&mut *c)
            .await
            .unwrap();
        let plan = plan.join("\n");
        assert!(!plan.contains("Seq Scan on a2a_context_counts"), "{plan}");
        assert!(plan.contains("a2a_context_counts_pkey"), "{plan}");
        drop(c);
        store.pool().close().await;
        schema.drop_schema().await;
    }
}
