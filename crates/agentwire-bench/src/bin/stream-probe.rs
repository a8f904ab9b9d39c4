//! `stream-probe`: SSE measurements against a running A2A server (JSON-RPC
//! binding, loopback only).
//!
//! Modes (exactly one):
//! * `--first-event N`: N sequential `SendStreamingMessage` calls on a warm
//!   connection; time from request start to the first complete SSE event.
//! * `--stream N`: N sequential streamed tasks (default body: 100 words with
//!   `metadata: {"chunks": 100}`); time from request start to the event whose
//!   `result.statusUpdate.status.state` is `TASK_STATE_COMPLETED`, and the
//!   number of events received.
//! * `--hold N`: opens N concurrent SSE streams (body from `--body-file`,
//!   with `{{i}}` and `{{taskId}}` placeholders), holds them `--hold-secs`
//!   seconds and reports how many are open (and the server's VmRSS with
//!   `--server-pid`).
//!
//! Every loop is bounded in count and time.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentwire_bench::{EventKind, Stats, check_loopback, classify, fill_template, stats};
// The client library's SSE decoder, so the probe reads streams as clients do.
use agentwire_client::sse::SseParser;
use anyhow::{Context, bail};
use clap::Parser;
use futures::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde_json::json;

const MAX_SEQUENTIAL: usize = 100_000;
const MAX_HOLD: usize = 50_000;
const MAX_HOLD_SECS: u64 = 600;
const MAX_TIMEOUT_SECS: u64 = 120;
/// How long a stream may stay open after its final event before it is
/// dropped (and counted as "not closed by the server").
const CLOSE_GRACE: Duration = Duration::from_secs(1);

#[derive(Parser, Debug)]
#[command(
    about = "Measure SSE streaming of a running A2A server (JSON-RPC binding, loopback only)",
    group(clap::ArgGroup::new("mode").required(true).args(["first_event", "stream", "hold"]))
)]
struct Args {
    /// JSON-RPC endpoint of the server (127.0.0.1, localhost or ::1 only).
    #[arg(long, default_value = "http://127.0.0.1:8080/")]
    url: String,

    /// Mode (a): N sequential SendStreamingMessage calls; time to the first event.
    #[arg(long, value_name = "N")]
    first_event: Option<usize>,

    /// Mode (b): N sequential chunked streams; time to the COMPLETED event and event count.
    #[arg(long, value_name = "N")]
    stream: Option<usize>,

    /// Mode (c): open N concurrent SSE streams and hold them.
    #[arg(long, value_name = "N")]
    hold: Option<usize>,

    /// Request body (a JSON-RPC request) instead of the mode's default. `{{i}}`
    /// is replaced by the request index and `{{taskId}}` by the task id that
    /// `--setup-body-file` created. Required for --hold.
    #[arg(long, value_name = "FILE")]
    body_file: Option<PathBuf>,

    /// A JSON-RPC request (e.g. a SendMessage that leaves a task open) sent once
    /// before the measured requests; its result.task.id fills `{{taskId}}`.
    #[arg(long, value_name = "FILE")]
    setup_body_file: Option<PathBuf>,

    /// Unmeasured warm-up requests before modes (a) and (b).
    #[arg(long, default_value_t = 20)]
    warmup: usize,

    /// Seconds the streams are held in --hold mode (after all are opened).
    #[arg(long, default_value_t = 10)]
    hold_secs: u64,

    /// Streams being opened at the same time in --hold mode.
    #[arg(long, default_value_t = 200)]
    open_concurrency: usize,

    /// Per-request time limit in seconds (opening + reading one stream).
    #[arg(long, default_value_t = 10)]
    timeout: u64,

    /// PID of the server: its VmRSS is sampled while the streams are held.
    #[arg(long)]
    server_pid: Option<u32>,

    /// Print one JSON summary line on stdout (the human summary goes to stderr).
    #[arg(long)]
    json: bool,
}

fn main() {
    let args = Args::parse();
    match run(args) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("stream-probe: error: {e:#}");
            std::process::exit(2);
        }
    }
}

/// Returns Ok(true) when every request succeeded.
fn run(args: Args) -> anyhow::Result<bool> {
    let url: reqwest::Url = args
        .url
        .parse()
        .with_context(|| format!("bad --url {:?}", args.url))?;
    check_loopback(&url)?;
    if args.timeout == 0 || args.timeout > MAX_TIMEOUT_SECS {
        bail!("--timeout must be 1..={MAX_TIMEOUT_SECS} seconds");
    }
    let body = match &args.body_file {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .with_context(|| format!("cannot read --body-file {}", p.display()))?,
        ),
        None => None,
    };
    let setup = match &args.setup_body_file {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .with_context(|| format!("cannot read --setup-body-file {}", p.display()))?,
        ),
        None => None,
    };

    if let Some(n) = args.hold {
        if n == 0 || n > MAX_HOLD {
            bail!("--hold must be 1..={MAX_HOLD}");
        }
        if args.hold_secs == 0 || args.hold_secs > MAX_HOLD_SECS {
            bail!("--hold-secs must be 1..={MAX_HOLD_SECS}");
        }
        let Some(body) = body else {
            bail!(
                "--hold needs --body-file: a request whose stream stays open (the default hello stream ends at once)"
            );
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        return rt.block_on(hold(&args, url, n, body, setup));
    }

    let (n, default_body, label) = match (args.first_event, args.stream) {
        (Some(n), _) => (
            n,
            agentwire_bench::STREAM_HELLO_BODY.to_string(),
            "first-event",
        ),
        (_, Some(n)) => (n, agentwire_bench::chunked_body(100, 100), "stream"),
        _ => unreachable!("clap requires one mode"),
    };
    if n == 0 || n > MAX_SEQUENTIAL || args.warmup > MAX_SEQUENTIAL {
        bail!("N must be 1..={MAX_SEQUENTIAL} and --warmup at most {MAX_SEQUENTIAL}");
    }
    let body = body.unwrap_or(default_body);
    // Sequential requests: a current-thread runtime keeps wake-up latency low.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(sequential(&args, url, n, body, setup, label))
}

fn client(timeout: Duration) -> anyhow::Result<reqwest::Client> {
    agentwire_client::install_crypto_provider();
    Ok(reqwest::Client::builder()
        .no_proxy()
        .http1_only()
        .tcp_nodelay(true)
        .connect_timeout(timeout)
        .pool_idle_timeout(Duration::from_secs(30))
        .build()?)
}

/// Sends the setup request once and returns the task id it created.
async fn run_setup(
    client: &reqwest::Client,
    url: &reqwest::Url,
    body: String,
) -> anyhow::Result<String> {
    let resp = client
        .post(url.clone())
        .header("A2A-Version", "1.0")
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json")
        .body(body)
        .send()
        .await
        .context("setup request failed")?;
    let status = resp.status();
    let text = resp.text().await?;
    if !status.is_success() {
        bail!("setup request: HTTP {status}: {}", truncate(&text));
    }
    let v: serde_json::Value = serde_json::from_str(&text).context("setup response is not JSON")?;
    if let Some(e) = v.get("error") {
        bail!("setup request: JSON-RPC error {e}");
    }
    v.pointer("/result/task/id")
        .or_else(|| v.pointer("/result/id"))
        .and_then(|t| t.as_str())
        .map(str::to_owned)
        .with_context(|| format!("setup response has no result.task.id: {}", truncate(&text)))
}

fn truncate(s: &str) -> String {
    let mut t: String = s.chars().take(300).collect();
    if t.len() < s.len() {
        t.push('…');
    }
    t
}

/// What one stream delivered.
#[derive(Debug)]
struct Outcome {
    first_event: Duration,
    /// Time and state of the first final (terminal or interrupted) status event.
    final_event: Option<(Duration, String)>,
    events: usize,
    /// The server closed the stream (within the grace period after the final event).
    closed: bool,
}

async fn post_stream(
    client: &reqwest::Client,
    url: &reqwest::Url,
    body: String,
) -> anyhow::Result<reqwest::Response> {
    let resp = client
        .post(url.clone())
        .header("A2A-Version", "1.0")
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "text/event-stream")
        .body(body)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("request failed: {}", error_chain(&e)))?;
    let status = resp.status();
    let is_sse = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !status.is_success() || !is_sse {
        let text = resp.text().await.unwrap_or_default();
        bail!("not an SSE stream: HTTP {status}: {}", truncate(&text));
    }
    Ok(resp)
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

/// Runs one stream to its end (bounded by `timeout`), timing from `t0`.
async fn one_stream(
    client: &reqwest::Client,
    url: &reqwest::Url,
    body: String,
    timeout: Duration,
) -> anyhow::Result<Outcome> {
    let t0 = Instant::now();
    let deadline = tokio::time::Instant::now() + timeout;
    let resp = tokio::time::timeout_at(deadline, post_stream(client, url, body))
        .await
        .map_err(|_| anyhow::anyhow!("timed out waiting for the response headers"))??;
    let mut stream = resp.bytes_stream();
    let mut parser = SseParser::default();
    let mut events = VecDeque::new();
    let mut first_event = None;
    let mut final_event = None;
    let mut count = 0usize;
    loop {
        let until = match &final_event {
            Some((at, _)) => (tokio::time::Instant::from_std(t0) + *at + CLOSE_GRACE).min(deadline),
            None => deadline,
        };
        let chunk = match tokio::time::timeout_at(until, stream.next()).await {
            Err(_) if final_event.is_some() => {
                return Ok(Outcome {
                    first_event: first_event.unwrap(),
                    final_event,
                    events: count,
                    closed: false,
                });
            }
            Err(_) => bail!("timed out after {count} events without a final status"),
            Ok(None) => break,
            Ok(Some(Err(e))) => bail!("stream broken after {count} events: {}", error_chain(&e)),
            Ok(Some(Ok(c))) => c,
        };
        if let Err(e) = parser.push(&chunk, &mut events) {
            bail!("stream broken after {count} events: {e}");
        }
        let now = t0.elapsed();
        for data in events.drain(..).map(|ev| ev.data) {
            count += 1;
            first_event.get_or_insert(now);
            match classify(&data) {
                EventKind::Error(e) => bail!("JSON-RPC error in event {count}: {e}"),
                EventKind::Garbage => bail!("event {count} is not JSON: {}", truncate(&data)),
                EventKind::Final(state) if final_event.is_none() => {
                    final_event = Some((now, state))
                }
                _ => {}
            }
        }
    }
    let Some(first_event) = first_event else {
        bail!("stream closed without any event");
    };
    Ok(Outcome {
        first_event,
        final_event,
        events: count,
        closed: true,
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn stats_json(s: &Option<Stats>) -> serde_json::Value {
    match s {
        Some(s) => json!({
            "n": s.n, "min_ms": ms(s.min), "median_ms": ms(s.median), "p99_ms": ms(s.p99),
            "max_ms": ms(s.max), "mean_ms": ms(s.mean),
        }),
        None => serde_json::Value::Null,
    }
}

fn stats_line(name: &str, s: &Option<Stats>) -> String {
    match s {
        Some(s) => format!(
            "{name}: n={} median={:.3} ms p99={:.3} ms min={:.3} ms max={:.3} ms mean={:.3} ms",
            s.n,
            ms(s.median),
            ms(s.p99),
            ms(s.min),
            ms(s.max),
            ms(s.mean)
        ),
        None => format!("{name}: no successful sample"),
    }
}

fn count_error(errors: &mut BTreeMap<String, usize>, e: &anyhow::Error) {
    let key: String = format!("{e:#}").chars().take(300).collect();
    *errors.entry(key).or_default() += 1;
}

async fn sequential(
    args: &Args,
    url: reqwest::Url,
    n: usize,
    template: String,
    setup: Option<String>,
    label: &str,
) -> anyhow::Result<bool> {
    let timeout = Duration::from_secs(args.timeout);
    let client = client(timeout)?;
    let task_id = match setup {
        Some(b) => Some(run_setup(&client, &url, b).await?),
        None => None,
    };
    let want_completed = label == "stream";

    // Warm-up: the first failure aborts (the server is not there or refuses).
    for i in 0..args.warmup {
        let body = fill_template(&template, i, task_id.as_deref());
        one_stream(&client, &url, body, timeout)
            .await
            .with_context(|| format!("warm-up request {} to {url} failed", i + 1))?;
    }

    let mut first = Vec::with_capacity(n);
    let mut completed = Vec::with_capacity(n);
    let mut event_counts = Vec::with_capacity(n);
    let mut errors = BTreeMap::new();
    let mut not_closed = 0usize;
    let mut not_completed = BTreeMap::<String, usize>::new();
    let started = Instant::now();
    for i in 0..n {
        let body = fill_template(&template, args.warmup + i, task_id.as_deref());
        match one_stream(&client, &url, body, timeout).await {
            Ok(o) => {
                first.push(o.first_event);
                event_counts.push(o.events);
                if !o.closed {
                    not_closed += 1;
                }
                match &o.final_event {
                    Some((at, s)) if s == "TASK_STATE_COMPLETED" => completed.push(*at),
                    Some((_, s)) => *not_completed.entry(s.clone()).or_default() += 1,
                    None => {
                        *not_completed
                            .entry("(no final status event)".into())
                            .or_default() += 1
                    }
                }
            }
            Err(e) => count_error(&mut errors, &e),
        }
    }
    let elapsed = started.elapsed();

    let first_s = stats(&first);
    let completed_s = stats(&completed);
    let failures: usize = errors.values().sum();
    let mut ec = event_counts.clone();
    ec.sort_unstable();
    let ev_median = ec.get(ec.len().saturating_sub(1) / 2).copied().unwrap_or(0);

    eprintln!(
        "stream-probe {label}: {n} requests to {url} in {:.2} s ({} warm-up)",
        elapsed.as_secs_f64(),
        args.warmup
    );
    eprintln!("  {}", stats_line("time to first event", &first_s));
    eprintln!(
        "  {}",
        stats_line("time to TASK_STATE_COMPLETED", &completed_s)
    );
    eprintln!(
        "  events per stream: median={ev_median} min={} max={}",
        ec.first().unwrap_or(&0),
        ec.last().unwrap_or(&0)
    );
    if not_closed > 0 {
        eprintln!(
            "  streams not closed by the server within {CLOSE_GRACE:?} of the final event: {not_closed}"
        );
    }
    for (s, c) in &not_completed {
        eprintln!("  streams ending in {s} instead of TASK_STATE_COMPLETED: {c}");
    }
    for (e, c) in &errors {
        eprintln!("  failed x{c}: {e}");
    }
    if args.json {
        println!(
            "{}",
            json!({
                "mode": label, "url": url.as_str(), "requests": n, "failures": failures,
                "first_event": stats_json(&first_s),
                "completed": stats_json(&completed_s),
                "events_median": ev_median,
                "events_min": ec.first(), "events_max": ec.last(),
                "not_closed": not_closed,
                "not_completed": not_completed,
                "errors": errors,
            })
        );
    }
    let ok = failures == 0 && (!want_completed || completed.len() == n);
    Ok(ok)
}

#[derive(Default)]
struct HoldCounters {
    open_now: AtomicUsize,
    opened: AtomicUsize,
    closed_early: AtomicUsize,
    failed: AtomicUsize,
}

async fn hold(
    args: &Args,
    url: reqwest::Url,
    n: usize,
    template: String,
    setup: Option<String>,
) -> anyhow::Result<bool> {
    let timeout = Duration::from_secs(args.timeout);
    let client = client(timeout)?;
    let task_id = match setup {
        Some(b) => Some(run_setup(&client, &url, b).await?),
        None => None,
    };
    let rss_before = args.server_pid.and_then(agentwire_bench::vm_rss_kib);
    let counters = Arc::new(HoldCounters::default());
    let errors = Arc::new(std::sync::Mutex::new(BTreeMap::<String, usize>::new()));
    let gate = Arc::new(tokio::sync::Semaphore::new(
        args.open_concurrency.clamp(1, 10_000),
    ));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        let (client, url, counters, errors, gate) = (
            client.clone(),
            url.clone(),
            counters.clone(),
            errors.clone(),
            gate.clone(),
        );
        let body = fill_template(&template, i, task_id.as_deref());
        tasks.spawn(async move {
            let permit = gate.acquire_owned().await;
            let opened = tokio::time::timeout(timeout, async {
                let resp = post_stream(&client, &url, body).await?;
                let mut stream = resp.bytes_stream();
                let mut parser = SseParser::default();
                let mut events = VecDeque::new();
                // Open = headers received and the first event (the task snapshot) read.
                while events.is_empty() {
                    match stream.next().await {
                        Some(Ok(c)) => {
                            if let Err(e) = parser.push(&c, &mut events) {
                                bail!("stream broken before the first event: {e}")
                            }
                        }
                        Some(Err(e)) => {
                            bail!("stream broken before the first event: {}", error_chain(&e))
                        }
                        None => bail!("stream closed before the first event"),
                    }
                }
                if let EventKind::Error(e) = classify(&events[0].data) {
                    bail!("JSON-RPC error: {e}");
                }
                Ok((stream, parser))
            })
            .await
            .unwrap_or_else(|_| Err(anyhow::anyhow!("timed out opening the stream")));
            drop(permit);
            let (mut stream, mut parser) = match opened {
                Ok(s) => s,
                Err(e) => {
                    counters.failed.fetch_add(1, Ordering::Relaxed);
                    count_error(&mut errors.lock().unwrap(), &e);
                    return;
                }
            };
            counters.opened.fetch_add(1, Ordering::Relaxed);
            counters.open_now.fetch_add(1, Ordering::Relaxed);
            // Keep reading until the stream ends or the task is aborted.
            let mut sink = VecDeque::new();
            while let Some(Ok(c)) = stream.next().await {
                if parser.push(&c, &mut sink).is_err() {
                    break;
                }
                sink.clear();
            }
            counters.open_now.fetch_sub(1, Ordering::Relaxed);
            counters.closed_early.fetch_add(1, Ordering::Relaxed);
        });
    }

    // Opening phase: bounded by the per-request timeout once every request had
    // its turn at the gate; report progress each second.
    let open_limit = timeout * (n.div_ceil(args.open_concurrency.max(1)) as u32 + 1);
    let open_limit = open_limit.min(Duration::from_secs(300));
    let mut last_report = Instant::now();
    loop {
        let opened = counters.opened.load(Ordering::Relaxed);
        let failed = counters.failed.load(Ordering::Relaxed);
        if opened + failed >= n || started.elapsed() >= open_limit {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        if last_report.elapsed() >= Duration::from_secs(1) {
            last_report = Instant::now();
            eprintln!(
                "  opening: {} open, {failed} failed, {:.1} s",
                counters.open_now.load(Ordering::Relaxed),
                started.elapsed().as_secs_f64()
            );
        }
    }
    let open_time = started.elapsed();
    let open_after_opening = counters.open_now.load(Ordering::Relaxed);
    eprintln!(
        "stream-probe hold: {open_after_opening}/{n} streams open after {:.2} s; holding {} s",
        open_time.as_secs_f64(),
        args.hold_secs
    );

    // Hold phase: sample the open count and the server's RSS each second.
    let mut rss_peak = rss_before.unwrap_or(0);
    let mut min_open = open_after_opening;
    let hold_start = Instant::now();
    let hold = Duration::from_secs(args.hold_secs);
    let mut rss_held = None;
    while hold_start.elapsed() < hold {
        let left = hold - hold_start.elapsed();
        tokio::time::sleep(left.min(Duration::from_secs(1))).await;
        let open = counters.open_now.load(Ordering::Relaxed);
        min_open = min_open.min(open);
        let rss = args.server_pid.and_then(agentwire_bench::vm_rss_kib);
        if let Some(r) = rss {
            rss_peak = rss_peak.max(r);
            rss_held = Some(r);
        }
        eprintln!(
            "  holding: {open} open, t={:.0} s{}",
            hold_start.elapsed().as_secs_f64(),
            rss.map(|r| format!(", server VmRSS {:.1} MiB", r as f64 / 1024.0))
                .unwrap_or_default()
        );
    }
    let open_at_end = counters.open_now.load(Ordering::Relaxed);
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}

    let opened = counters.opened.load(Ordering::Relaxed);
    let failed = counters.failed.load(Ordering::Relaxed);
    let closed_early = counters.closed_early.load(Ordering::Relaxed);
    let errors = std::mem::take(&mut *errors.lock().unwrap());
    eprintln!(
        "  requested {n}, opened {opened}, failed {failed}, closed by the server during the hold {closed_early}, open at end of hold {open_at_end} (min during hold {min_open})"
    );
    if let (Some(b), Some(h)) = (rss_before, rss_held) {
        eprintln!(
            "  server VmRSS: before {:.1} MiB, held {:.1} MiB, peak {:.1} MiB",
            b as f64 / 1024.0,
            h as f64 / 1024.0,
            rss_peak as f64 / 1024.0
        );
    }
    for (e, c) in &errors {
        eprintln!("  failed x{c}: {e}");
    }
    if args.json {
        println!(
            "{}",
            json!({
                "mode": "hold", "url": url.as_str(), "requested": n, "opened": opened, "failed": failed,
                "closed_early": closed_early, "open_at_end": open_at_end, "min_open_during_hold": min_open,
                "open_seconds": open_time.as_secs_f64(), "hold_seconds": args.hold_secs,
                "rss_before_kib": rss_before, "rss_held_kib": rss_held,
                "rss_peak_kib": if args.server_pid.is_some() { Some(rss_peak) } else { None },
                "errors": errors,
            })
        );
    }
    Ok(open_at_end == n)
}
