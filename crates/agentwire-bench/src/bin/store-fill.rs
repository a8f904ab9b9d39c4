//! `store-fill`: fills a SQLite task store with finished tasks, so that the
//! benchmark can measure `a2a serve` on a store that already holds many
//! (`scripts/bench.sh`, the durable rows: "flat from 0 to 1,000,000 stored
//! tasks").
//!
//! The tasks go through the store's public API (`TaskStore::create`), as
//! the server writes them: each is an echo-like completed task with one
//! user message, one agent reply and one text artifact, owned by the
//! anonymous caller, ten tasks per context. Existing tasks are kept; the
//! ids are new each run.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use agentwire_server::store::{Owner, SqliteStore, TaskStore};
use agentwire_server::types::{Artifact, Message, Task, TaskState, TaskStatus, Timestamp, new_id};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Fills a SQLite task store with completed tasks (for the benchmark)")]
struct Args {
    /// The database file (created if needed), as `a2a serve --store sqlite:PATH` takes it.
    #[arg(long)]
    sqlite: std::path::PathBuf,
    /// How many tasks to add.
    #[arg(long, default_value_t = 100_000)]
    tasks: usize,
    /// Concurrent writers.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
}

fn finished_task(id: String, context_id: String) -> Task {
    Task {
        id,
        context_id,
        status: Some(TaskStatus {
            state: TaskState::Completed as i32,
            message: None,
            timestamp: Some(Timestamp::now()),
        }),
        history: vec![Message::user_text("hello"), Message::agent_text("hello")],
        artifacts: vec![Artifact::text("echo", "hello")],
        ..Default::default()
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.concurrency > 0, "--concurrency must be at least 1");
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(async {
            let store: Arc<dyn TaskStore> = Arc::new(
                SqliteStore::open(&args.sqlite)
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", args.sqlite.display()))?,
            );
            let next = Arc::new(AtomicUsize::new(0));
            let run = new_id();
            let start = Instant::now();
            let mut workers = Vec::new();
            for _ in 0..args.concurrency {
                let (store, next, run) = (store.clone(), next.clone(), run.clone());
                let total = args.tasks;
                workers.push(tokio::spawn(async move {
                    let owner = Owner::default();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= total {
                            return anyhow::Ok(());
                        }
                        let task = finished_task(
                            format!("fill-{run}-{i}"),
                            format!("fill-{run}-ctx-{}", i / 10),
                        );
                        store
                            .create(&owner, task)
                            .await
                            .map_err(|e| anyhow::anyhow!("task {i}: {e}"))?;
                    }
                }));
            }
            for w in workers {
                w.await??;
            }
            let secs = start.elapsed().as_secs_f64();
            eprintln!(
                "store-fill: {} tasks added to {} in {secs:.1} s ({:.0} tasks/s)",
                args.tasks,
                args.sqlite.display(),
                args.tasks as f64 / secs
            );
            anyhow::Ok(())
        })
}
