//! `soak --steady`: memory under steady load. Starts `a2a serve --agent
//! echo` on an ephemeral 127.0.0.1 port, drives blocking JSON-RPC
//! `SendMessage` at a fixed concurrency (one keep-alive HTTP/1.1
//! connection per worker, written and parsed here to keep the loader
//! light), samples the server's resident set (`VmRSS`) at a fixed interval
//! and checks that after the warm-up it stays flat: the average of the last
//! third of the samples may exceed the average of the first third by at
//! most `--max-growth` percent. See `benches/README.md`, "Memory under
//! steady load".

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::{Args, Server, send_body};

/// One sample of the server.
struct Sample {
    at: Duration,
    rss_kib: u64,
    /// `RssAnon`: the heap, without the file pages.
    anon_kib: u64,
    ok: u64,
}

/// What the workers counted.
#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    errors: AtomicU64,
}

/// The steady soak's verdict: `Ok(true)` flat, `Ok(false)` grew past the
/// bound or the server died, `Err` a setup error.
pub async fn run(args: &Args, work: &Path) -> anyhow::Result<bool> {
    let store = args.store.clone().unwrap_or_else(|| "memory".to_owned());
    let store_arg = match store.as_str() {
        "memory" => "memory".to_owned(),
        "sqlite" => format!("sqlite:{}", work.join("steady.db").display()),
        s if s.starts_with("sqlite:")
            || s.starts_with("postgres://")
            || s.starts_with("postgresql://")
            || s.starts_with("postgres:") =>
        {
            s.to_owned()
        }
        other => bail!("--store: memory, sqlite, sqlite:FILE or postgres://URL, not {other}"),
    };
    // What is printed: never a PostgreSQL URL's password.
    let store_name = match store.as_str() {
        s if s.starts_with("postgres") => "postgres",
        s if s.starts_with("sqlite") => "sqlite",
        _ => "memory",
    };
    let total = Duration::from_secs_f64(args.minutes * 60.0);
    let warmup = Duration::from_secs(args.warmup_secs);
    let every = Duration::from_secs(args.sample_secs.max(1));
    if total <= warmup + every * 3 {
        bail!("--minutes must leave at least three samples after the warm-up");
    }
    let port = free_port()?;
    let log = work.join(format!("steady-{store_name}.log"));
    let mut extra = vec!["--metrics"];
    extra.extend(args.serve_arg.iter().map(String::as_str));
    let mut server = Server::start(&args.a2a, port, "echo", &store_arg, &extra, &[], log).await?;
    println!(
        "soak --steady: store {store_name} {:?}, c={}, {:.1} min ({} s warm-up, a sample every {} s), \
         a2a serve pid {} on {} ({})",
        args.serve_arg,
        args.concurrency,
        args.minutes,
        warmup.as_secs(),
        every.as_secs(),
        server.child.id(),
        server.addr(),
        args.a2a.display()
    );
    println!(
        "{:>6} {:>9} {:>9} {:>9} {:>9} {:>8} {:>18}",
        "t s", "RSS MiB", "anon MiB", "file MiB", "req/s", "errors", "load average"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let mut workers = tokio::task::JoinSet::new();
    for w in 0..args.concurrency {
        workers.spawn(worker(
            server.addr(),
            w,
            Arc::clone(&stop),
            Arc::clone(&counts),
        ));
    }
    let start = Instant::now();
    let mut samples: Vec<Sample> = Vec::new();
    let mut crashed = false;
    let (mut last_ok, mut last_at) = (0u64, Duration::ZERO);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        tick.tick().await;
        let at = start.elapsed();
        if !server.alive() {
            crashed = true;
            break;
        }
        let Some(rss_kib) = server.status_kib("VmRSS:") else {
            crashed = true;
            break;
        };
        let ok = counts.ok.load(Ordering::Relaxed);
        let rate = (ok - last_ok) as f64 / (at - last_at).as_secs_f64();
        (last_ok, last_at) = (ok, at);
        // Anonymous memory (the heap) apart from file pages (the binary,
        // and SQLite's memory-mapped database, bounded by its mmap size).
        let part = |key| {
            server
                .status_kib(key)
                .map_or("-".into(), |k| format!("{:.1}", k as f64 / 1024.0))
        };
        println!(
            "{:>6.0} {:>9.1} {:>9} {:>9} {:>9.0} {:>8} {:>18}{}",
            at.as_secs_f64(),
            rss_kib as f64 / 1024.0,
            part("RssAnon:"),
            part("RssFile:"),
            rate,
            counts.errors.load(Ordering::Relaxed),
            loadavg(),
            if at <= warmup { "  (warm-up)" } else { "" }
        );
        let _ = std::io::stdout().flush();
        let anon_kib = server.status_kib("RssAnon:").unwrap_or(0);
        samples.push(Sample {
            at,
            rss_kib,
            anon_kib,
            ok,
        });
        if at >= total {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = tokio::time::timeout(Duration::from_secs(15), async {
        while workers.join_next().await.is_some() {}
    })
    .await;
    workers.abort_all();
    if crashed {
        eprintln!(
            "soak --steady: the server DIED during the run; its log: {}",
            server.log.display()
        );
        return Ok(false);
    }
    print_metrics(&server).await;
    server.kill9();

    let ok_total = counts.ok.load(Ordering::Relaxed);
    let errors = counts.errors.load(Ordering::Relaxed);
    if ok_total == 0 {
        bail!("no SendMessage answered a completed task ({errors} errors)");
    }
    let after: Vec<&Sample> = samples.iter().filter(|s| s.at > warmup).collect();
    if after.len() < 3 {
        bail!("fewer than three samples after the warm-up");
    }
    let third = after.len() / 3;
    let avg = |s: &[&Sample]| s.iter().map(|s| s.rss_kib as f64).sum::<f64>() / s.len() as f64;
    let first = avg(&after[..third]);
    let last = avg(&after[after.len() - third..]);
    let growth = (last - first) / first * 100.0;
    let avg_anon =
        |s: &[&Sample]| s.iter().map(|s| s.anon_kib as f64).sum::<f64>() / s.len() as f64;
    let anon_first = avg_anon(&after[..third]);
    let anon_last = avg_anon(&after[after.len() - third..]);
    let min = after.iter().map(|s| s.rss_kib).min().unwrap_or(0);
    let max = after.iter().map(|s| s.rss_kib).max().unwrap_or(0);
    let end = after.last().map_or(0, |s| s.rss_kib);
    let (w_ok, w_at) = samples
        .iter()
        .rfind(|s| s.at <= warmup)
        .map_or((0, Duration::ZERO), |s| (s.ok, s.at));
    let (l_ok, l_at) = after.last().map_or((0, Duration::ZERO), |s| (s.ok, s.at));
    let rate = (l_ok - w_ok) as f64 / (l_at - w_at).as_secs_f64();
    let mib = |k: u64| k as f64 / 1024.0;
    println!(
        "after warm-up ({} samples): RSS min {:.1} MiB, max {:.1} MiB, last {:.1} MiB; \
         first third {:.1} MiB, last third {:.1} MiB: growth {growth:+.1}% (bound {}%)",
        after.len(),
        mib(min),
        mib(max),
        mib(end),
        first / 1024.0,
        last / 1024.0,
        args.max_growth
    );
    if anon_first > 0.0 {
        println!(
            "anonymous memory (RssAnon, not judged): first third {:.1} MiB, last third {:.1} MiB: \
             {:+.1}%",
            anon_first / 1024.0,
            anon_last / 1024.0,
            (anon_last - anon_first) / anon_first * 100.0
        );
    }
    println!(
        "{ok_total} SendMessages completed, {errors} errors, {rate:.0} req/s after warm-up; \
         load average at the end {}",
        loadavg()
    );
    let flat = growth <= args.max_growth;
    println!(
        "soak --steady {store_name}: {}",
        if flat { "flat" } else { "GREW" }
    );
    Ok(flat)
}

/// A free loopback port (the OS's pick, released for the server).
fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("pick a port")?;
    Ok(l.local_addr()?.port())
}

/// The 1, 5 and 15 minute load averages.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The store's purge counters of the server's `/metrics` (what a bounded
/// store evicted to stay bounded).
async fn print_metrics(server: &Server) {
    let Ok(http) = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
    else {
        return;
    };
    let Ok(r) = http.get(format!("{}/metrics", server.base())).send().await else {
        return;
    };
    let Ok(text) = r.text().await else { return };
    for line in text.lines() {
        if line.starts_with("a2a_tasks_purged_total") {
            println!("  {line}");
        }
    }
}

/// One client: blocking SendMessage on one keep-alive connection, again and
/// again until `stop`; a fresh connection after an error.
async fn worker(addr: SocketAddr, w: usize, stop: Arc<AtomicBool>, counts: Arc<Counts>) {
    let mut n = 0u64;
    let mut buf = Vec::with_capacity(4096);
    while !stop.load(Ordering::Relaxed) {
        let Ok(Ok(mut tcp)) =
            tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(addr)).await
        else {
            counts.errors.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let _ = tcp.set_nodelay(true);
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            let body = send_body(&format!("steady-{w}-{n}"), "hello", false);
            let request = format!(
                "POST / HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
                 a2a-version: 1.0\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            let answer = tokio::time::timeout(
                Duration::from_secs(30),
                exchange(&mut tcp, request.as_bytes(), &mut buf),
            )
            .await;
            match answer {
                Ok(Ok(true)) => {
                    counts.ok.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Ok(false)) => {
                    counts.errors.fetch_add(1, Ordering::Relaxed);
                }
                _ => {
                    counts.errors.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    break;
                }
            }
        }
    }
}

/// Writes one request and reads its answer (a `content-length` body):
/// whether it was a 200 carrying a completed task.
async fn exchange(tcp: &mut TcpStream, request: &[u8], buf: &mut Vec<u8>) -> anyhow::Result<bool> {
    tcp.write_all(request).await?;
    buf.clear();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i + 4;
        }
        let n = tcp.read(&mut chunk).await?;
        if n == 0 {
            bail!("closed before the head");
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buf[..head_end]).context("head not UTF-8")?;
    let status_ok = head.starts_with("HTTP/1.1 200");
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .context("no content-length")?;
    while buf.len() < head_end + len {
        let n = tcp.read(&mut chunk).await?;
        if n == 0 {
            bail!("closed in the body");
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(status_ok && find(&buf[head_end..head_end + len], b"TASK_STATE_COMPLETED").is_some())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
