//! Durable task throughput of the task stores.
//!
//! Each task goes through the life of a short agent run, through the
//! `TaskStore` API: create (submitted) -> working -> one artifact ->
//! completed, i.e. four writes. N tasks are run by C concurrent tokio tasks,
//! on the memory store, SQLite (a file in the temp directory) and PostgreSQL
//! (when `A2A_TEST_POSTGRES_URL` names a database; a schema is created for
//! the run and dropped after it), plain and with the event log of several
//! replicas (`pg+log`).
//!
//! ```sh
//! cargo bench -p agentwire-server --bench store_throughput
//! cargo bench -p agentwire-server --bench store_throughput -- --tasks 5000 --concurrency 1,16,64
//! A2A_TEST_POSTGRES_URL=$(bash .ci/postgres start) cargo bench -p agentwire-server --bench store_throughput
//! ```
//!
//! Prints one line per store and concurrency: tasks/s, writes/s, the
//! median and p99 time of one whole task, and the context switches of the
//! process's threads per write (from `/proc/self/task/*/status`, on Linux).
//! SQLite runs with `synchronous = NORMAL` (`sqlite`, the default) and
//! `FULL` (`sqlite+full`, every commit waits for the disk).
//!
//! The `.../send` rows run the same task life through the request handler
//! instead (a blocking `SendMessage` to an agent that starts work, answers
//! with one artifact and completes, as the echo agent does): there the task
//! manager decides what is written, and the row says how many writes
//! (creates and updates reaching the store) one task cost.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentwire_server::store::{MemoryStore, MemoryStoreConfig, Owner, TaskStore, TaskUpdate};
use agentwire_server::types::{Artifact, Message, Task, TaskState, TaskStatus, Timestamp};

struct Args {
    tasks: usize,
    concurrency: Vec<usize>,
    only: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        tasks: 2000,
        concurrency: vec![1, 16],
        only: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--tasks" => {
                args.tasks = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|n| *n > 0)
                    .ok_or("--tasks takes a positive number")?;
            }
            "--concurrency" => {
                let list = it.next().ok_or("--concurrency takes a list such as 1,16")?;
                args.concurrency = list
                    .split(',')
                    .map(|c| c.trim().parse::<usize>().ok().filter(|n| *n > 0))
                    .collect::<Option<Vec<_>>>()
                    .ok_or("--concurrency takes positive numbers, e.g. 1,16,64")?;
            }
            "--store" => {
                args.only = Some(
                    it.next()
                        .ok_or("--store takes memory, sqlite or postgres")?,
                );
            }
            "--help" | "-h" => {
                println!(
                    "store_throughput [--tasks N] [--concurrency C1,C2,...] \
                     [--store memory|sqlite|postgres]"
                );
                std::process::exit(0);
            }
            // `cargo bench` passes `--bench`; libtest filters do not apply.
            _ => {}
        }
    }
    Ok(args)
}

fn status(state: TaskState) -> TaskStatus {
    TaskStatus {
        state: state as i32,
        message: None,
        timestamp: Some(Timestamp::now()),
    }
}

/// One task's life; returns how long it took.
async fn one_task(store: &dyn TaskStore, owner: &Owner, id: String) -> Duration {
    let start = Instant::now();
    let task = Task {
        id: id.clone(),
        context_id: format!("ctx-{id}"),
        status: Some(status(TaskState::Submitted)),
        history: vec![Message::user_text(
            "analyse the dependencies of payment-service",
        )],
        ..Default::default()
    };
    store.create(owner, task).await.expect("create");
    let update = |state| TaskUpdate::Status {
        status: status(state),
        metadata: None,
    };
    store
        .update(&id, update(TaskState::Working))
        .await
        .expect("working");
    store
        .update(
            &id,
            TaskUpdate::Artifact {
                artifact: Artifact::text(
                    "report",
                    "payment-service: 3 of 42 dependencies need Node.js 22; risk medium",
                ),
                append: false,
                last_chunk: true,
                metadata: None,
            },
        )
        .await
        .expect("artifact");
    let state = store
        .update(&id, update(TaskState::Completed))
        .await
        .expect("completed");
    assert_eq!(state.state, TaskState::Completed);
    start.elapsed()
}

/// The bench's agent: starts work, answers with one artifact, completes
/// (what the echo agent does with a message of one word).
struct Echo;

impl agentwire_server::AgentExecutor for Echo {
    async fn execute(
        &self,
        ctx: agentwire_server::RequestContext,
        task: agentwire_server::TaskUpdater,
    ) -> agentwire_server::A2aResult<()> {
        task.start_work().await?;
        task.add_artifact(Artifact::text("echo", ctx.text()))
            .await?;
        task.complete().await
    }
}

/// A store that counts the writes reaching it (creates and updates).
struct Counting {
    inner: Arc<dyn TaskStore>,
    writes: AtomicUsize,
}

#[async_trait::async_trait]
impl TaskStore for Counting {
    async fn create(
        &self,
        owner: &Owner,
        task: Task,
    ) -> agentwire_server::A2aResult<Option<agentwire_server::store::LogSpan>> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.inner.create(owner, task).await
    }
    async fn update(
        &self,
        task_id: &str,
        update: TaskUpdate,
    ) -> agentwire_server::A2aResult<agentwire_server::store::Updated> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.inner.update(task_id, update).await
    }
    async fn get(
        &self,
        task_id: &str,
        history_length: Option<usize>,
    ) -> agentwire_server::A2aResult<Option<agentwire_server::store::StoredTask>> {
        self.inner.get(task_id, history_length).await
    }
    async fn list(
        &self,
        owner: &Owner,
        query: &agentwire_server::store::TaskQuery,
    ) -> agentwire_server::A2aResult<agentwire_server::store::TaskPage> {
        self.inner.list(owner, query).await
    }
    async fn put_push_config(
        &self,
        config: &agentwire_server::store::StoredPushConfig,
    ) -> agentwire_server::A2aResult<()> {
        self.inner.put_push_config(config).await
    }
    async fn get_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> agentwire_server::A2aResult<Option<agentwire_server::store::StoredPushConfig>> {
        self.inner.get_push_config(task_id, id).await
    }
    async fn list_push_configs(
        &self,
        task_id: &str,
    ) -> agentwire_server::A2aResult<Vec<agentwire_server::store::StoredPushConfig>> {
        self.inner.list_push_configs(task_id).await
    }
    async fn delete_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> agentwire_server::A2aResult<bool> {
        self.inner.delete_push_config(task_id, id).await
    }
}

/// Runs `tasks` blocking `SendMessage`s to [`Echo`] through a request
/// handler on `store`, from `concurrency` tokio tasks, and prints a line
/// with the writes one task cost.
async fn measure_send(name: &str, store: Arc<dyn TaskStore>, tasks: usize, concurrency: usize) {
    use agentwire_server::types::SendMessageRequest;
    use agentwire_server::{AgentCard, CallContext, RequestHandler};
    let counting = Arc::new(Counting {
        inner: store,
        writes: AtomicUsize::new(0),
    });
    let handler = RequestHandler::builder(AgentCard::new("bench", "bench", "1.0.0"), Echo)
        .store(Arc::clone(&counting) as Arc<dyn TaskStore>)
        .build();
    let switches = context_switches();
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut workers = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (handler, next) = (handler.clone(), Arc::clone(&next));
        workers.push(tokio::spawn(async move {
            let ctx = CallContext::v1();
            let mut times = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < tasks {
                let begin = Instant::now();
                let req = SendMessageRequest {
                    message: Some(Message::user_text("payment-service")),
                    ..Default::default()
                };
                let answer = handler.send_message(&ctx, req).await.expect("send");
                let task = answer.task().expect("a task");
                assert_eq!(task.state(), TaskState::Completed);
                times.push(begin.elapsed());
            }
            times
        }));
    }
    let mut times = Vec::with_capacity(tasks);
    for w in workers {
        times.extend(w.await.expect("worker"));
    }
    let elapsed = start.elapsed();
    let writes = counting.writes.load(Ordering::Relaxed);
    report(name, concurrency, elapsed, times, switches, writes);
}

/// Prints the line of a run: `times` are those of each task, `writes`
/// how many writes reached the store in all.
fn report(
    name: &str,
    concurrency: usize,
    elapsed: Duration,
    mut times: Vec<Duration>,
    switches: Option<u64>,
    writes: usize,
) {
    let tasks = times.len();
    times.sort_unstable();
    let pct = |p: f64| {
        let i = ((tasks as f64 * p).ceil() as usize).clamp(1, tasks) - 1;
        times[i].as_secs_f64() * 1000.0
    };
    let rate = tasks as f64 / elapsed.as_secs_f64();
    let per_write = match (switches, context_switches()) {
        (Some(a), Some(b)) => format!("{:>6.2}", b.saturating_sub(a) as f64 / writes.max(1) as f64),
        _ => "     -".to_owned(),
    };
    println!(
        "{name:<16} c={concurrency:<3} {tasks:>6} tasks in {:>7.2} s  {rate:>9.0} tasks/s  \
         {:>9.0} writes/s  {:>4.2} writes/task  task p50 {:>7.3} ms  p99 {:>7.3} ms  \
         {per_write} switches/write",
        elapsed.as_secs_f64(),
        writes as f64 / elapsed.as_secs_f64(),
        writes as f64 / tasks as f64,
        pct(0.5),
        pct(0.99),
    );
}

/// The context switches (voluntary and not) of all the threads of this
/// process so far; `None` where `/proc` does not tell.
fn context_switches() -> Option<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let status = std::fs::read_to_string(entry.ok()?.path().join("status")).ok()?;
        for line in status.lines() {
            if let Some(v) = line
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                total += v.trim().parse::<u64>().ok()?;
            }
        }
    }
    Some(total)
}

/// Runs `tasks` task lives on `concurrency` tokio tasks and prints a line.
async fn measure(name: &str, store: Arc<dyn TaskStore>, tasks: usize, concurrency: usize) {
    let switches = context_switches();
    let run = agentwire_server::types::new_id();
    let next = Arc::new(AtomicUsize::new(0));
    let owner = Owner {
        tenant: "bench".into(),
        principal: run.clone(),
    };
    let start = Instant::now();
    let mut workers = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (store, next, owner, run) = (
            Arc::clone(&store),
            Arc::clone(&next),
            owner.clone(),
            run.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut times = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= tasks {
                    return times;
                }
                times.push(one_task(store.as_ref(), &owner, format!("{run}-{i}")).await);
            }
        }));
    }
    let mut times = Vec::with_capacity(tasks);
    for w in workers {
        times.extend(w.await.expect("worker"));
    }
    let elapsed = start.elapsed();
    report(name, concurrency, elapsed, times, switches, tasks * 4);
}

async fn bench_postgres(url: &str, args: &Args) {
    use agentwire_server::store::PostgresStore;
    use sqlx::Connection;
    use sqlx::postgres::{PgConnectOptions, PgConnection, PgPoolOptions};

    let schema = format!(
        "agentwire_bench_{}",
        agentwire_server::types::new_id().replace('-', "")
    );
    let mut admin = PgConnection::connect(url)
        .await
        .expect("connect to A2A_TEST_POSTGRES_URL");
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&mut admin)
        .await
        .expect("create the bench schema");
    let options: PgConnectOptions = url.parse().expect("A2A_TEST_POSTGRES_URL");
    let options = options.options([("search_path", schema.as_str())]);
    let store = PostgresStore::connect_with(PgPoolOptions::new().max_connections(16), options)
        .await
        .expect("PostgresStore");
    for &c in &args.concurrency {
        measure("postgres", Arc::new(store.clone()), args.tasks, c).await;
    }
    // With the event log of several replicas (every write also records
    // and announces its event).
    let logged = store.clone().with_event_log("bench").expect("event log");
    for &c in &args.concurrency {
        measure("pg+log", Arc::new(logged.clone()), args.tasks, c).await;
    }
    store.pool().close().await;
    sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&mut admin)
        .await
        .expect("drop the bench schema");
}

#[tokio::main]
async fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("store_throughput: {e}");
            std::process::exit(2);
        }
    };
    let wants = |name: &str| args.only.as_deref().is_none_or(|o| o == name);
    println!(
        "durable task throughput: create -> working -> artifact -> completed ({} tasks per run)",
        args.tasks
    );

    if wants("memory") {
        for &c in &args.concurrency {
            let store = MemoryStore::new(MemoryStoreConfig {
                max_tasks: usize::MAX,
                ..Default::default()
            });
            measure("memory", Arc::new(store), args.tasks, c).await;
        }
    }

    if wants("sqlite") {
        use agentwire_server::store::{SqliteOptions, SqliteStore, Synchronous};
        for (name, sync) in [
            ("sqlite", Synchronous::Normal),
            ("sqlite+full", Synchronous::Full),
        ] {
            let path = std::env::temp_dir().join(format!(
                "a2a-store-bench-{}.db",
                agentwire_server::types::new_id()
            ));
            let store = SqliteStore::open_with(&path, SqliteOptions::default().synchronous(sync))
                .await
                .expect("open SQLite");
            for &c in &args.concurrency {
                measure(name, Arc::new(store.clone()), args.tasks, c).await;
            }
            for &c in &args.concurrency {
                let row = format!("{name}/send");
                measure_send(&row, Arc::new(store.clone()), args.tasks, c).await;
            }
            store.close().await;
            drop(store);
            for suffix in ["", "-wal", "-shm", ".lock"] {
                let mut p = path.clone().into_os_string();
                p.push(suffix);
                let _ = std::fs::remove_file(p);
            }
        }
    }

    if wants("postgres") {
        match std::env::var("A2A_TEST_POSTGRES_URL") {
            Ok(url) if !url.is_empty() => bench_postgres(&url, &args).await,
            _ => println!(
                "postgres   skipped: set A2A_TEST_POSTGRES_URL \
                 (e.g. A2A_TEST_POSTGRES_URL=$(bash .ci/postgres start))"
            ),
        }
    }
}
