//! `ListTasks` on the memory store as it fills (a scan of every task the
//! store holds), at several store sizes.
//!
//! The store is filled with finished tasks of one owner, four to a
//! conversation, one in ten still working, each newer than the last; its
//! task cap is raised above the fill. Then, for each size:
//!
//! - `page`: the first page of 50 tasks, no filter;
//! - `deep page`: a page of 50 from a cursor in the middle of the listing;
//! - `status`: 50 working tasks (a state);
//! - `filtered`: 50 working tasks updated after a time (state and
//!   `statusTimestampAfter`);
//! - `context`: the tasks of one conversation;
//! - `unknown context`: a conversation the store does not know.
//!
//! ```sh
//! CARGO_PROFILE_BENCH_LTO=false CARGO_PROFILE_BENCH_CODEGEN_UNITS=16 \
//!   cargo bench -p agentwire-server --bench list_tasks
//! cargo bench -p agentwire-server --bench list_tasks -- --sizes 0,10000 --budget-ms 3000
//! ```
//!
//! Prints one line per size and query: the median and the 99th percentile
//! of one call, and the total the page reported.

use std::time::{Duration, Instant};

use agentwire_server::store::{
    Cursor, MemoryStore, MemoryStoreConfig, Owner, TaskPage, TaskQuery, TaskStore,
};
use agentwire_server::types::{Message, Task, TaskState, TaskStatus, Timestamp};

struct Args {
    sizes: Vec<usize>,
    /// How long each query is repeated at most, per variant.
    budget: Duration,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        sizes: vec![0, 10_000, 100_000, 1_000_000],
        budget: Duration::from_millis(300),
    };
    let mut it = std::env::args().skip(1);
    let millis = |v: Option<String>, what: &str| {
        v.and_then(|v| v.parse().ok())
            .map(Duration::from_millis)
            .ok_or(format!("{what} takes a number of milliseconds"))
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--sizes" => {
                let list = it.next().ok_or("--sizes takes a list such as 0,10000")?;
                args.sizes = list
                    .split(',')
                    .map(|c| c.trim().parse::<usize>().ok())
                    .collect::<Option<Vec<_>>>()
                    .ok_or("--sizes takes numbers, e.g. 0,10000,100000")?;
            }
            "--budget-ms" => args.budget = millis(it.next(), "--budget-ms")?,
            "--help" | "-h" => {
                println!("list_tasks [--sizes N1,N2,...] [--budget-ms MS]");
                std::process::exit(0);
            }
            // `cargo bench` passes `--bench`; libtest filters do not apply.
            _ => {}
        }
    }
    Ok(args)
}

/// Status times start here (ms) and grow by one per task.
const T0: i64 = 1_770_000_000_000;

fn task(i: usize) -> Task {
    let state = if i % 10 == 3 {
        TaskState::Working
    } else {
        TaskState::Completed
    };
    Task {
        id: format!("{i:08x}-5e1f-4c2b-9a7d-3c0ffee0{:04x}", i % 0xffff),
        context_id: format!("ctx-{:08x}", i / 4),
        status: Some(TaskStatus {
            state: state as i32,
            message: None,
            timestamp: Some(Timestamp::from_millis(T0 + i as i64)),
        }),
        history: vec![
            Message::user_text("hello there"),
            Message::agent_text("hello there"),
        ],
        ..Default::default()
    }
}

/// The resident memory of the process, in bytes (Linux; 0 elsewhere).
fn rss() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// The median and the 99th percentile of one call, repeated within
/// `budget` (at least three calls), and the last page.
async fn time<F, Fut>(budget: Duration, mut f: F) -> ((Duration, Duration), TaskPage)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = TaskPage>,
{
    let mut times = Vec::new();
    let started = Instant::now();
    let mut page;
    loop {
        let t = Instant::now();
        page = f().await;
        times.push(t.elapsed());
        if times.len() >= 3 && (started.elapsed() >= budget || times.len() >= 10_000) {
            break;
        }
    }
    times.sort();
    let p99 = times[(times.len() * 99 / 100).min(times.len() - 1)];
    ((times[times.len() / 2], p99), page)
}

fn fmt(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.1} us")
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("list_tasks: {e}");
            std::process::exit(2);
        }
    };
    println!(
        "{:>9}  {:<16} {:>11} {:>11} {:>7}",
        "stored", "query", "p50", "p99", "total"
    );
    let me = Owner::default();
    for &n in &args.sizes {
        let before = rss();
        let store = MemoryStore::new(MemoryStoreConfig {
            max_tasks: n + 1000,
            max_bytes: usize::MAX / 2,
            terminal_ttl: Duration::from_secs(24 * 3600),
            idle_ttl: Duration::from_secs(24 * 3600),
        });
        let fill = Instant::now();
        for i in 0..n {
            if let Err(e) = store.create(&me, task(i)).await {
                eprintln!("list_tasks: filling the store failed at task {i}: {e}");
                std::process::exit(1);
            }
        }
        let fill = fill.elapsed();
        let per_task = if n > 0 {
            format!(
                "{:.0} bytes of memory per task",
                rss().saturating_sub(before) as f64 / n as f64
            )
        } else {
            String::new()
        };
        println!(
            "# {n} tasks stored in {:.2} s ({:.0} tasks/s) {per_task}",
            fill.as_secs_f64(),
            n as f64 / fill.as_secs_f64().max(1e-9)
        );
        let page = |q: TaskQuery| TaskQuery { page_size: 50, ..q };
        let middle = (n / 2).min(n.saturating_sub(1));
        let queries: Vec<(&str, TaskQuery)> = vec![
            ("page", page(TaskQuery::default())),
            (
                "deep page",
                page(TaskQuery {
                    cursor: (n > 0).then(|| Cursor::of(&task(middle))),
                    ..Default::default()
                }),
            ),
            (
                "status",
                page(TaskQuery {
                    state: Some(TaskState::Working),
                    ..Default::default()
                }),
            ),
            (
                "filtered",
                page(TaskQuery {
                    state: Some(TaskState::Working),
                    status_after: Some(Timestamp::from_millis(T0 + n as i64 / 4)),
                    ..Default::default()
                }),
            ),
            (
                "context",
                page(TaskQuery {
                    context_id: Some(format!("ctx-{:08x}", middle / 4)),
                    ..Default::default()
                }),
            ),
            (
                "unknown context",
                page(TaskQuery {
                    context_id: Some("ctx-nowhere".into()),
                    ..Default::default()
                }),
            ),
        ];
        for (name, q) in &queries {
            let ((p50, p99), a) = time(args.budget, || async {
                store.list(&me, q).await.unwrap_or_else(|e| {
                    eprintln!("list_tasks: listing failed: {e}");
                    std::process::exit(1)
                })
            })
            .await;
            println!(
                "{n:>9}  {name:<16} {:>11} {:>11} {:>7}",
                fmt(p50),
                fmt(p99),
                a.total
            );
        }
        drop(store);
    }
}
