//! `soak`: floods a real `a2a serve` with what one caller can send, while a
//! second, well-behaved client measures its blocking `SendMessage`, then
//! kills a SQLite-backed server with SIGKILL in the middle of a load and
//! counts the acknowledged tasks lost. Driven by `scripts/soak.sh`; see
//! `benches/README.md`, "Soak".
//!
//! Everything runs on loopback, bounded in time and count, and stops by
//! itself: the server listens on 127.0.0.1, the flood connects from
//! 127.0.0.1 and the well-behaved client from 127.0.0.2 (another caller to
//! the server's per-address bounds: the open tasks of anonymous callers,
//! the failed-authentication lockout). Each flood gets a fresh server (so its peak memory, VmHWM, is
//! the flood's); the table shows, per store and flood, the well-behaved
//! client's p50/p99 and errors, what the flood sent, and the server's peak
//! resident memory. Exit status: 0, or 1 when the server crashed (exited
//! during a flood) or an acknowledged task was lost; 2 on a setup error.

use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Parser;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[path = "soak/steady.rs"]
mod steady;

#[derive(Parser, Debug)]
#[command(about = "Floods a2a serve on 127.0.0.1 and measures a well-behaved client meanwhile")]
struct Args {
    /// The `a2a` binary (a release build).
    #[arg(long, default_value = "target/release/a2a")]
    a2a: PathBuf,
    /// Short floods (about 4 s each): the whole run in under 2 minutes.
    #[arg(long)]
    quick: bool,
    /// Seconds each flood lasts [default: 30, or 4 with --quick].
    #[arg(long)]
    flood_secs: Option<u64>,
    /// The loopback port of the servers.
    #[arg(long, default_value_t = 18300)]
    port: u16,
    /// Where the SQLite files and the servers' logs go (a fresh temporary
    /// directory by default, removed at the end).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Only these floods (comma-separated names; see the table).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Only this store (`memory` or `sqlite`; with --steady also
    /// `sqlite:FILE` or a `postgres://` URL, default memory).
    #[arg(long)]
    store: Option<String>,
    /// Skip the kill -9 test.
    #[arg(long)]
    no_kill_test: bool,
    /// Instead of the floods: steady SendMessage load on one store, the
    /// server's resident memory sampled; fails when it grows after the
    /// warm-up (see benches/README.md, "Memory under steady load").
    #[arg(long)]
    steady: bool,
    /// --steady: concurrent clients (one keep-alive connection each).
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// --steady: length of the run, warm-up included.
    #[arg(long, default_value_t = 10.0)]
    minutes: f64,
    /// --steady: seconds of warm-up, whose samples are not judged.
    #[arg(long, default_value_t = 60)]
    warmup_secs: u64,
    /// --steady: seconds between two samples of the server's VmRSS.
    #[arg(long, default_value_t = 10)]
    sample_secs: u64,
    /// --steady: the growth allowed, in percent, from the average of the
    /// first third of the samples after the warm-up to that of the last.
    #[arg(long, default_value_t = 10.0)]
    max_growth: f64,
    /// --steady: one more argument of `a2a serve` (repeat it), e.g.
    /// `--serve-arg=--retention --serve-arg=2m`.
    #[arg(long, allow_hyphen_values = true)]
    serve_arg: Vec<String>,
}

/// The API key of the failed-auth flood's server (the well-behaved
/// client's).
const GOOD_KEY: &str = "soak-good-key-0123456789";

/// The floods, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Flood {
    /// No flood: the well-behaved client alone (the reference).
    None,
    /// SendMessage whose metadata is nested 200,000 levels deep.
    Nested,
    /// 32 anonymous clients leaving tasks in input-required.
    InputRequired,
    /// 9.8 MB bodies of 700,000 parts.
    HugeParts,
    /// 20 clients streaming 1 MB chunks that stop reading.
    SlowSubscribers,
    /// HTTP/2 streams opened and reset at once.
    RapidReset,
    /// 32 clients with a wrong API key.
    FailedAuth,
}

const FLOODS: [Flood; 7] = [
    Flood::None,
    Flood::Nested,
    Flood::InputRequired,
    Flood::HugeParts,
    Flood::SlowSubscribers,
    Flood::RapidReset,
    Flood::FailedAuth,
];

impl Flood {
    fn name(self) -> &'static str {
        match self {
            Flood::None => "none",
            Flood::Nested => "nested-metadata",
            Flood::InputRequired => "input-required",
            Flood::HugeParts => "huge-parts",
            Flood::SlowSubscribers => "slow-subscribers",
            Flood::RapidReset => "rapid-reset",
            Flood::FailedAuth => "failed-auth",
        }
    }

    /// The agent the server runs for this flood.
    fn agent(self) -> &'static str {
        match self {
            Flood::InputRequired => "conformance",
            _ => "echo",
        }
    }
}

/// A running `a2a serve`.
struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Server {
    async fn start(
        a2a: &Path,
        port: u16,
        agent: &str,
        store: &str,
        extra: &[&str],
        env: &[(&str, &str)],
        log: PathBuf,
    ) -> anyhow::Result<Self> {
        let out = std::fs::File::create(&log).context("server log")?;
        let mut cmd = Command::new(a2a);
        for (k, _) in std::env::vars() {
            if k.starts_with("A2A_") || k.starts_with("A2ACLI_") || k == "RUST_LOG" {
                cmd.env_remove(k);
            }
        }
        cmd.args([
            "serve",
            "--host",
            "127.0.0.1",
            "--agent",
            agent,
            "--store",
            store,
        ])
        .args(["--port", &port.to_string()])
        .args(extra)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
        let child = cmd
            .spawn()
            .with_context(|| format!("start {}", a2a.display()))?;
        let mut server = Self { child, port, log };
        let deadline = Instant::now() + Duration::from_secs(30);
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()?;
        loop {
            if let Some(status) = server.child.try_wait()? {
                bail!(
                    "a2a serve exited at start ({status}); its log: {}",
                    server.log.display()
                );
            }
            let url = format!("http://127.0.0.1:{port}/healthz");
            if let Ok(r) = http.get(&url).send().await {
                if r.status().is_success() {
                    return Ok(server);
                }
            }
            if Instant::now() > deadline {
                let _ = server.child.kill();
                bail!("a2a serve did not answer within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Whether it still runs.
    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// A line of /proc/PID/status, in KiB (VmHWM: the peak resident set).
    fn status_kib(&self, key: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status
            .lines()
            .find(|l| l.starts_with(key))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    }

    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A JSON-RPC SendMessage body.
fn send_body(message_id: &str, text: &str, return_immediately: bool) -> String {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {
            "message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]},
            "configuration": {"returnImmediately": return_immediately}
        }
    })
    .to_string()
}

/// What the well-behaved client saw.
#[derive(Default)]
struct ProbeStats {
    latencies: Vec<Duration>,
    errors: u64,
}

impl ProbeStats {
    fn percentile(&self, p: f64) -> Option<Duration> {
        if self.latencies.is_empty() {
            return None;
        }
        let mut v = self.latencies.clone();
        v.sort();
        let i = ((v.len() as f64 - 1.0) * p).round() as usize;
        Some(v[i.min(v.len() - 1)])
    }
}

/// The address the well-behaved client connects from: another caller than
/// the flood's (127.0.0.1). Linux routes all of 127/8 to the loopback
/// interface, so a socket bound to 127.0.0.2 reaches the server on
/// 127.0.0.1, which sees a second peer address.
const PROBE_FROM: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

/// The flood's address: the failed-auth flood's second probe comes from
/// it (the right key, refused while the address is locked out).
const FLOOD_FROM: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// The well-behaved client: blocking SendMessage from `from`, one at a
/// time, until `stop`; each must answer a completed task within 10 s.
async fn probe(
    base: String,
    agent: &'static str,
    from: IpAddr,
    stop: Arc<AtomicBool>,
) -> ProbeStats {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .local_address(from)
        .build()
        .expect("client");
    let mut stats = ProbeStats::default();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let id = match agent {
            "conformance" => format!("tck-complete-task-probe-{from}-{n}"),
            _ => format!("probe-{from}-{n}"),
        };
        let body = send_body(&id, "hello from the well-behaved client", false);
        let t = Instant::now();
        let r = http
            .post(&base)
            .header("content-type", "application/json")
            .header("A2A-Version", "1.0")
            .header("X-API-Key", GOOD_KEY)
            .body(body)
            .send()
            .await;
        let ok = match r {
            Ok(r) if r.status().is_success() => match r.json::<Value>().await {
                Ok(v) => v["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED",
                Err(_) => false,
            },
            _ => false,
        };
        if ok {
            stats.latencies.push(t.elapsed());
        } else {
            stats.errors += 1;
            // Not a busy loop against a server that refuses at once.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    stats
}

/// Counts what a flood's clients sent.
#[derive(Default)]
struct Sent {
    requests: AtomicU64,
}

/// Runs `flood` against `server` until `stop`.
async fn flood(kind: Flood, addr: SocketAddr, stop: Arc<AtomicBool>, sent: Arc<Sent>) {
    let base = format!("http://{addr}");
    let mut workers = tokio::task::JoinSet::new();
    match kind {
        Flood::None => {}
        Flood::Nested => {
            let depth = 200_000;
            let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            let body = Arc::new(format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"message":{{"messageId":"nested","role":"ROLE_USER","parts":[{{"text":"x"}}],"metadata":{{"deep":{nested}}}}}}}}}"#
            ));
            for _ in 0..16 {
                workers.spawn(post_loop(
                    base.clone(),
                    Arc::clone(&body),
                    vec![],
                    Arc::clone(&stop),
                    Arc::clone(&sent),
                ));
            }
        }
        Flood::InputRequired => {
            for w in 0..32 {
                let (base, stop, sent) = (base.clone(), Arc::clone(&stop), Arc::clone(&sent));
                workers.spawn(async move {
                    let http = reqwest::Client::builder()
                        .timeout(Duration::from_secs(10))
                        .build()
                        .expect("client");
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        n += 1;
                        let body = send_body(&format!("tck-input-required-{w}-{n}"), "x", false);
                        sent.requests.fetch_add(1, Ordering::Relaxed);
                        let r = http
                            .post(&base)
                            .header("content-type", "application/json")
                            .header("A2A-Version", "1.0")
                            .body(body)
                            .send()
                            .await;
                        if let Ok(r) = r {
                            let _ = r.bytes().await;
                        }
                    }
                });
            }
        }
        Flood::HugeParts => {
            let parts = vec![r#"{"text":"xx"}"#; 700_000].join(",");
            let body = Arc::new(format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"message":{{"messageId":"parts","role":"ROLE_USER","parts":[{parts}]}}}}}}"#
            ));
            for _ in 0..4 {
                workers.spawn(post_loop(
                    base.clone(),
                    Arc::clone(&body),
                    vec![],
                    Arc::clone(&stop),
                    Arc::clone(&sent),
                ));
            }
        }
        Flood::SlowSubscribers => {
            // Eight words of 1 MB: eight 1 MB chunks.
            let word = "a".repeat(1_000_000);
            let text = [word.as_str(); 8].join(" ");
            let body = Arc::new(
                json!({
                    "jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
                    "params": {"message": {
                        "messageId": "slow", "role": "ROLE_USER", "parts": [{"text": text}]
                    }}
                })
                .to_string(),
            );
            for _ in 0..20 {
                let (body, stop, sent) = (Arc::clone(&body), Arc::clone(&stop), Arc::clone(&sent));
                workers.spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        sent.requests.fetch_add(1, Ordering::Relaxed);
                        // Holds a stream it does not read for up to 10 s.
                        let held = tokio::time::timeout(
                            Duration::from_secs(10),
                            slow_subscriber(addr, &body, &stop),
                        )
                        .await;
                        if !matches!(held, Ok(Ok(()))) {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                });
            }
        }
        Flood::RapidReset => {
            for _ in 0..4 {
                let (stop, sent) = (Arc::clone(&stop), Arc::clone(&sent));
                workers.spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        if rapid_resets(addr, &stop, &sent).await.is_err() {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                });
            }
        }
        Flood::FailedAuth => {
            let body = Arc::new(send_body("bad-key", "x", false));
            for w in 0..32 {
                workers.spawn(post_loop(
                    base.clone(),
                    Arc::clone(&body),
                    vec![("X-API-Key", format!("wrong-key-{w}"))],
                    Arc::clone(&stop),
                    Arc::clone(&sent),
                ));
            }
        }
    }
    while workers.join_next().await.is_some() {}
}

/// POSTs `body` again and again until `stop` (each answer read whole).
async fn post_loop(
    base: String,
    body: Arc<String>,
    headers: Vec<(&'static str, String)>,
    stop: Arc<AtomicBool>,
    sent: Arc<Sent>,
) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    while !stop.load(Ordering::Relaxed) {
        sent.requests.fetch_add(1, Ordering::Relaxed);
        let mut rb = http
            .post(&base)
            .header("content-type", "application/json")
            .header("A2A-Version", "1.0")
            .body(body.as_bytes().to_vec());
        for (k, v) in &headers {
            rb = rb.header(*k, v);
        }
        match rb.send().await {
            Ok(r) => {
                let _ = r.bytes().await;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Sends a SendStreamingMessage over HTTP/1.1, reads the response head,
/// then reads nothing more until `stop` (at most the caller's timeout).
async fn slow_subscriber(addr: SocketAddr, body: &str, stop: &AtomicBool) -> anyhow::Result<()> {
    let mut tcp = TcpStream::connect(addr).await?;
    let head = format!(
        "POST / HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         a2a-version: 1.0\r\naccept: text/event-stream\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).await?;
    tcp.write_all(body.as_bytes()).await?;
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tcp.read(&mut buf).await?;
        if n == 0 {
            bail!("closed before the head");
        }
        got.extend_from_slice(&buf[..n]);
    }
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Opens HTTP/2 streams (a SendMessage over gRPC's path with its body) on
/// one connection and resets each at once, until `stop` or the server
/// ends the connection.
async fn rapid_resets(addr: SocketAddr, stop: &AtomicBool, sent: &Sent) -> anyhow::Result<()> {
    let tcp = TcpStream::connect(addr).await?;
    let (mut client, connection) = h2::client::handshake(tcp).await?;
    let conn = tokio::spawn(async move {
        let _ = connection.await;
    });
    let body = bytes::Bytes::from_static(b"\0\0\0\0\0");
    let result = async {
        while !stop.load(Ordering::Relaxed) {
            client = client.ready().await?;
            let request =
                http::Request::post(format!("http://{addr}/lf.a2a.v1.A2AService/GetTask"))
                    .header("content-type", "application/grpc")
                    .header("te", "trailers")
                    .body(())?;
            let (_response, mut stream) = client.send_request(request, false)?;
            let _ = stream.send_data(body.clone(), false);
            stream.send_reset(h2::Reason::CANCEL);
            sent.requests.fetch_add(1, Ordering::Relaxed);
            // ready() is mostly ready at once: without a yield this loop
            // held its worker thread, and the run's timers never fired.
            tokio::task::yield_now().await;
        }
        anyhow::Ok(())
    }
    .await;
    conn.abort();
    result
}

/// One row of the table.
struct Row {
    store: &'static str,
    flood: Flood,
    probe: ProbeStats,
    sent: u64,
    peak_kib: Option<u64>,
    crashed: bool,
    /// The failed-auth flood's: what a client with the right key saw from
    /// the flood's own address.
    flood_address_probe: Option<ProbeStats>,
}

fn ms(d: Option<Duration>) -> String {
    d.map_or("-".into(), |d| format!("{:.1}", d.as_secs_f64() * 1000.0))
}

fn print_row(row: &Row) {
    println!(
        "{:<7} {:<17} {:>7} {:>9} {:>9} {:>7} {:>9} {:>10} {}",
        row.store,
        row.flood.name(),
        row.probe.latencies.len(),
        ms(row.probe.percentile(0.5)),
        ms(row.probe.percentile(0.99)),
        row.probe.errors,
        row.sent,
        row.peak_kib
            .map_or("-".into(), |k| format!("{:.0}", k as f64 / 1024.0)),
        if row.crashed { "CRASHED" } else { "ok" },
    );
    if let Some(p) = &row.flood_address_probe {
        println!(
            "        (from the flood's own address {FLOOD_FROM} with the right key: {} answered, \
             {} refused: the address is locked out, as documented)",
            p.latencies.len(),
            p.errors
        );
    }
    let _ = std::io::stdout().flush();
}

async fn run_flood(
    args: &Args,
    work: &Path,
    store: &'static str,
    kind: Flood,
    secs: u64,
) -> anyhow::Result<Row> {
    let store_arg = match store {
        "sqlite" => format!(
            "sqlite:{}",
            work.join(format!("{}.db", kind.name())).display()
        ),
        _ => "memory".to_owned(),
    };
    let env: Vec<(&str, &str)> = match kind {
        Flood::FailedAuth => vec![("A2A_SERVE_API_KEYS", "soak:soak-good-key-0123456789")],
        _ => vec![],
    };
    let log = work.join(format!("{store}-{}.log", kind.name()));
    let mut server = Server::start(
        &args.a2a,
        args.port,
        kind.agent(),
        &store_arg,
        &[],
        &env,
        log,
    )
    .await?;
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(Sent::default());
    let flooding = tokio::spawn(flood(
        kind,
        server.addr(),
        Arc::clone(&stop),
        Arc::clone(&sent),
    ));
    // The flood gets going first.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let probing = tokio::spawn(probe(
        server.base(),
        kind.agent(),
        PROBE_FROM,
        Arc::clone(&stop),
    ));
    // The failed-auth flood locks its own address out (the documented
    // throttle): a probe from that address with the right key shows it.
    let same_address = (kind == Flood::FailedAuth).then(|| {
        tokio::spawn(probe(
            server.base(),
            kind.agent(),
            FLOOD_FROM,
            Arc::clone(&stop),
        ))
    });
    let end = Instant::now() + Duration::from_secs(secs);
    let mut crashed = false;
    let mut peak = None;
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(200)).await;
        peak = server.status_kib("VmHWM:").or(peak);
        if !server.alive() {
            crashed = true;
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let probe = probing.await.unwrap_or_default();
    let flood_address_probe = match same_address {
        Some(p) => Some(p.await.unwrap_or_default()),
        None => None,
    };
    // The flood's clients stop within their 10 s timeouts.
    let _ = tokio::time::timeout(Duration::from_secs(15), flooding).await;
    if server.alive() {
        peak = server.status_kib("VmHWM:").or(peak);
    } else {
        crashed = true;
    }
    if crashed {
        eprintln!(
            "the server CRASHED during the {} flood on {store}; its log: {}",
            kind.name(),
            server.log.display()
        );
    }
    server.kill9();
    Ok(Row {
        store,
        flood: kind,
        probe,
        sent: sent.requests.load(Ordering::Relaxed),
        peak_kib: peak,
        crashed,
        flood_address_probe,
    })
}

/// Acknowledged SendMessages on SQLite, SIGKILL in the middle, a restart:
/// the acknowledged tasks not found.
async fn kill_test(args: &Args, work: &Path, secs: u64) -> anyhow::Result<(u64, u64)> {
    let db = work.join("kill.db");
    let store = format!("sqlite:{}", db.display());
    let log = work.join("kill-1.log");
    let mut server = Server::start(&args.a2a, args.port, "echo", &store, &[], &[], log).await?;
    let base = server.base();
    let acked = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = tokio::task::JoinSet::new();
    for w in 0..16 {
        let (base, acked, stop) = (base.clone(), Arc::clone(&acked), Arc::clone(&stop));
        clients.spawn(async move {
            let http = reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("client");
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                // Half return at once (a long job goes on), half wait.
                let immediate = w % 2 == 0;
                let text = if immediate { "slow 1" } else { "hello" };
                let body = send_body(&format!("kill-{w}-{n}"), text, immediate);
                let r = http
                    .post(&base)
                    .header("content-type", "application/json")
                    .header("A2A-Version", "1.0")
                    .body(body)
                    .send()
                    .await;
                let Ok(r) = r else { break };
                let Ok(v) = r.json::<Value>().await else {
                    break;
                };
                if let Some(id) = v["result"]["task"]["id"].as_str() {
                    acked.lock().expect("acked").push(id.to_owned());
                }
            }
        });
    }
    tokio::time::sleep(Duration::from_secs(secs)).await;
    server.kill9();
    stop.store(true, Ordering::Relaxed);
    while clients.join_next().await.is_some() {}
    let acked = std::mem::take(&mut *acked.lock().expect("acked"));
    let log = work.join("kill-2.log");
    let server = Server::start(&args.a2a, args.port, "echo", &store, &[], &[], log).await?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
    let mut lost = 0;
    for id in &acked {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": id}});
        let v: Value = http
            .post(server.base())
            .header("A2A-Version", "1.0")
            .json(&body)
            .send()
            .await?
            .json()
            .await?;
        if v["result"]["id"].as_str() != Some(id.as_str()) {
            lost += 1;
            eprintln!("acknowledged task {id} not found after the restart: {v}");
        }
    }
    Ok((acked.len() as u64, lost))
}

#[tokio::main]
async fn main() {
    // reqwest is built without a crypto provider of its own (the workspace's
    // rustls-no-provider): without this, the first client panics.
    agentwire_client::install_crypto_provider();
    let args = Args::parse();
    match run(&args).await {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("soak: {e:#}");
            std::process::exit(2);
        }
    }
}

async fn run(args: &Args) -> anyhow::Result<bool> {
    if !args.a2a.exists() {
        bail!(
            "{} does not exist (cargo build --release -p agentwire-cli)",
            args.a2a.display()
        );
    }
    let _tmp;
    let work = match &args.work_dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            d.clone()
        }
        None => {
            let d = std::env::temp_dir().join(format!("a2a-soak-{}", std::process::id()));
            std::fs::create_dir_all(&d)?;
            _tmp = RemoveOnDrop(d.clone());
            d
        }
    };
    if args.steady {
        return steady::run(args, &work).await;
    }
    let secs = args.flood_secs.unwrap_or(if args.quick { 4 } else { 30 });
    let stores: Vec<&'static str> = match args.store.as_deref() {
        Some("memory") => vec!["memory"],
        Some("sqlite") => vec!["sqlite"],
        Some(other) => bail!("--store: memory or sqlite, not {other}"),
        None => vec!["memory", "sqlite"],
    };
    println!(
        "soak: {} s per flood, a2a serve on 127.0.0.1:{} ({}), flood from {FLOOD_FROM}, \
         well-behaved client from {PROBE_FROM}, work dir {}",
        secs,
        args.port,
        args.a2a.display(),
        work.display()
    );
    println!(
        "{:<7} {:<17} {:>7} {:>9} {:>9} {:>7} {:>9} {:>10} server",
        "store", "flood", "probe n", "p50 ms", "p99 ms", "errors", "sent", "VmHWM MiB"
    );
    let mut ok = true;
    for store in stores {
        for kind in FLOODS {
            if !args.only.is_empty() && !args.only.iter().any(|o| o == kind.name()) {
                continue;
            }
            let row = run_flood(args, &work, store, kind, secs).await?;
            ok &= !row.crashed;
            print_row(&row);
        }
    }
    if !args.no_kill_test {
        let secs = if args.quick { 3 } else { 10 };
        let (acked, lost) = kill_test(args, &work, secs).await?;
        println!(
            "kill -9 on sqlite after {secs} s of load: {acked} acknowledged SendMessages, {lost} \
             tasks not found after the restart"
        );
        ok &= lost == 0;
    }
    println!("soak: {}", if ok { "passed" } else { "FAILED" });
    Ok(ok)
}

/// Removes a directory when dropped.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
