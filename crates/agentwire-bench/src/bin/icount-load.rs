//! `icount-load`: the load driver of the deterministic cost benchmark
//! (`scripts/icount.sh`).
//!
//! The server runs under `valgrind --tool=callgrind`; this driver runs
//! outside it. For each case (binding, scenario, count) it warms the server
//! up, zeroes callgrind's counters (`callgrind_control --zero PID`), sends the
//! requests one after the other (concurrency 1: the same interleaving every
//! run), dumps the counters (`callgrind_control --dump=LABEL PID`), reads the
//! instruction total (`totals:` line) of the dump and prints one line:
//!
//! ```text
//! case LABEL N IR
//! ```
//!
//! Scenarios: `send` (SendMessage "hello", blocking), `stream`
//! (SendStreamingMessage of 100 words: the echo agent streams 100 chunks),
//! `get` (GetTask of one task), `list` (ListTasks, page of 10), and, on
//! JSON-RPC only, `raw` (SendMessage "hello" as fixed bytes, the body the
//! bare server gets) and `rawescaped` (the same with the text written
//! `hell\u006f`: the server's serde-free reader leaves a string with an
//! escape to serde, so this measures the request read by serde). The bare
//! server (`--bare`) answers only JSON-RPC `send`, sent as fixed bytes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use agentwire_client::{Binding, Client};
use agentwire_types::{ListTasksRequest, Message};
use anyhow::{Context, bail};
use clap::Parser;
use futures::StreamExt;

#[derive(Parser, Debug)]
#[command(about = "Load driver of scripts/icount.sh: requests between callgrind zero and dump")]
struct Args {
    /// Base URL of the server (loopback).
    #[arg(long)]
    url: String,
    /// Process id of the valgrind process serving it.
    #[arg(long, required_unless_present = "list_latency")]
    pid: Option<u32>,
    /// The server's --callgrind-out-file (dumps are FILE.1, FILE.2, ...).
    #[arg(long, required_unless_present = "list_latency")]
    out_file: Option<PathBuf>,
    /// Cases, comma separated: BINDING:SCENARIO:N (jsonrpc|rest|grpc,
    /// send|stream|get|list), run in this order.
    #[arg(long, required_unless_present = "list_latency")]
    cases: Option<String>,
    /// Instead of the cases (no valgrind): fills the server with this many
    /// tasks (SendMessage over JSON-RPC), then times `--samples` ListTasks
    /// of each kind (default page; its second page, by pageToken; status
    /// filter; context filter) and prints the median and the 99th
    /// percentile.
    #[arg(long)]
    list_latency: Option<usize>,
    /// ListTasks timed per kind with --list-latency.
    #[arg(long, default_value_t = 1000)]
    samples: usize,
    /// The bare server: JSON-RPC send only, as fixed bytes.
    #[arg(long)]
    bare: bool,
    /// Warm-up requests before each case, in percent of its count (at least 5).
    #[arg(long, default_value_t = 20)]
    warmup_percent: usize,
    /// Keep callgrind's dumps (FILE.1, ...) for callgrind_annotate; by
    /// default each is deleted once its total is read.
    #[arg(long)]
    keep_dumps: bool,
    /// The number of dumps taken before this run (dumps are numbered on).
    #[arg(long, default_value_t = 0)]
    dumps_before: usize,
}

#[derive(Clone, Copy, Debug)]
enum Scenario {
    Send,
    Stream,
    Get,
    List,
    Raw,
    RawEscaped,
}

struct Case {
    binding: Binding,
    binding_name: String,
    scenario: Scenario,
    scenario_name: String,
    n: usize,
}

fn parse_cases(spec: &str) -> anyhow::Result<Vec<Case>> {
    let mut cases = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let parts: Vec<&str> = item.split(':').collect();
        let [b, s, n] = parts[..] else {
            bail!("case {item:?}: expected BINDING:SCENARIO:N");
        };
        let binding = match b {
            "jsonrpc" => Binding::JsonRpc,
            "rest" => Binding::HttpJson,
            "grpc" => Binding::Grpc,
            _ => bail!("case {item:?}: binding is jsonrpc, rest or grpc"),
        };
        let scenario = match s {
            "send" => Scenario::Send,
            "stream" => Scenario::Stream,
            "get" => Scenario::Get,
            "list" => Scenario::List,
            "raw" => Scenario::Raw,
            "rawescaped" => Scenario::RawEscaped,
            _ => bail!("case {item:?}: scenario is send, stream, get, list, raw or rawescaped"),
        };
        let n: usize = n.parse().with_context(|| format!("case {item:?}: count"))?;
        if n == 0 {
            bail!("case {item:?}: count must be positive");
        }
        cases.push(Case {
            binding,
            binding_name: b.to_owned(),
            scenario,
            scenario_name: s.to_owned(),
            n,
        });
    }
    Ok(cases)
}

/// The text of the streamed case: 100 words, so 100 artifact chunks.
fn hundred_words() -> String {
    (0..100)
        .map(|i| format!("word{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

struct Driver {
    client: Client,
    raw: Bare,
    text: String,
    task_id: String,
}

impl Driver {
    async fn new(url: &str, binding: Binding) -> anyhow::Result<Self> {
        let client = Client::builder()
            .bindings([binding])
            .connect(url)
            .await
            .with_context(|| format!("connecting to {url}"))?;
        let answer = client.send_text("the task of GetTask").await?;
        let task_id = answer
            .task()
            .map(|t| t.id.clone())
            .context("the echo agent answered SendMessage without a task")?;
        Ok(Self {
            client,
            raw: Bare {
                http: reqwest::Client::new(),
                url: url.to_owned(),
            },
            text: hundred_words(),
            task_id,
        })
    }

    async fn one(&self, scenario: Scenario) -> anyhow::Result<()> {
        match scenario {
            Scenario::Send => {
                let answer = self.client.send_text("hello").await?;
                if answer.task().is_none() {
                    bail!("SendMessage answered without a task");
                }
            }
            Scenario::Stream => {
                let mut events = self.client.stream(Message::user_text(&self.text)).await?;
                let mut count = 0usize;
                while let Some(event) = events.next().await {
                    event?;
                    count += 1;
                }
                // Task, working, 100 chunks, completed.
                if count < 100 {
                    bail!("the stream ended after {count} events (expected 103)");
                }
            }
            Scenario::Get => {
                self.client.get_task(&self.task_id).await?;
            }
            Scenario::Raw => self.raw.one(BODY, true).await?,
            Scenario::RawEscaped => self.raw.one(BODY_ESCAPED, true).await?,
            Scenario::List => {
                let page = self
                    .client
                    .list_tasks(ListTasksRequest {
                        page_size: Some(10),
                        ..Default::default()
                    })
                    .await?;
                if page.tasks.is_empty() {
                    bail!("ListTasks returned no task");
                }
            }
        }
        Ok(())
    }
}

struct Bare {
    http: reqwest::Client,
    url: String,
}

/// The JSON-RPC SendMessage of the `raw` scenario and of the bare server.
const BODY: &str = r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"0196f3a2-7c1e-7d40-9b1a-3c5e8f2d4a13","role":"ROLE_USER","parts":[{"text":"hello"}]}}}"#;
/// The same, "hello" written with an escape.
const BODY_ESCAPED: &str = r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"0196f3a2-7c1e-7d40-9b1a-3c5e8f2d4a13","role":"ROLE_USER","parts":[{"text":"hell\u006f"}]}}}"#;

impl Bare {
    /// Posts `body`; with `check`, the answer must be a completed task.
    async fn one(&self, body: &'static str, check: bool) -> anyhow::Result<()> {
        let resp = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .body(body)
            .send()
            .await?;
        if !resp.status().is_success() {
            bail!("bare server answered {}", resp.status());
        }
        let answer = resp.bytes().await?;
        if check {
            let text = String::from_utf8_lossy(&answer);
            if !text.contains("TASK_STATE_COMPLETED") || !text.contains("hello") {
                bail!("not a completed echo task: {text}");
            }
        }
        Ok(())
    }
}

fn callgrind_control(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("callgrind_control")
        .args(args)
        .output()
        .context("running callgrind_control (valgrind installed?)")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !stdout.contains("OK") {
        bail!(
            "callgrind_control {} failed: {}{}",
            args.join(" "),
            stdout,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// The `totals:` figure of dump number `k`, waiting for the file to be
/// complete (callgrind writes it after answering the control command).
fn read_total(out_file: &Path, k: usize, keep: bool) -> anyhow::Result<u64> {
    let path = PathBuf::from(format!("{}.{k}", out_file.display()));
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(text) = std::fs::read_to_string(&path)
            && let Some(line) = text.lines().find(|l| l.starts_with("totals:"))
        {
            let total = line["totals:".len()..]
                .split_whitespace()
                .next()
                .context("empty totals line")?
                .parse()
                .with_context(|| format!("totals line of {}", path.display()))?;
            if !keep {
                // The dump's profile is no longer needed (they are large).
                let _ = std::fs::remove_file(&path);
            }
            return Ok(total);
        }
        if Instant::now() > deadline {
            bail!("no totals in {} after 120 s", path.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `--list-latency`: wall-clock ListTasks latency on a filled server.
async fn list_latency(url: &str, fill: usize, samples: usize) -> anyhow::Result<()> {
    let client = Client::builder()
        .bindings([Binding::JsonRpc])
        .connect(url)
        .await
        .with_context(|| format!("connecting to {url}"))?;
    let mut context_id = String::new();
    for i in 0..fill {
        let answer = client.send_text(format!("task {i}")).await?;
        if i == fill / 2
            && let Some(task) = answer.task()
        {
            context_id = task.context_id.clone();
        }
    }
    // The second page of the default listing, by the first page's token.
    let first = client.list_tasks(ListTasksRequest::default()).await?;
    let kinds = [
        ("default page", ListTasksRequest::default()),
        (
            "page 2 (pageToken)",
            ListTasksRequest {
                page_token: first.next_page_token,
                ..Default::default()
            },
        ),
        (
            "status working (no match)",
            ListTasksRequest {
                status: agentwire_types::TaskState::Working as i32,
                ..Default::default()
            },
        ),
        (
            "one context",
            ListTasksRequest {
                context_id,
                ..Default::default()
            },
        ),
    ];
    for (name, request) in kinds {
        let mut times = Vec::with_capacity(samples);
        for _ in 0..samples.max(1) {
            let start = Instant::now();
            client.list_tasks(request.clone()).await?;
            times.push(start.elapsed());
        }
        times.sort();
        let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
        println!(
            "list {name:?} tasks={fill} samples={} p50_ms={:.3} p99_ms={:.3}",
            times.len(),
            at(0.5).as_secs_f64() * 1e3,
            at(0.99).as_secs_f64() * 1e3
        );
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // reqwest clients made here (the raw bodies) need the process's TLS provider.
    agentwire_client::install_crypto_provider();
    if let Some(fill) = args.list_latency {
        return list_latency(&args.url, fill, args.samples).await;
    }
    let (Some(spec), Some(pid), Some(out_file)) = (&args.cases, args.pid, &args.out_file) else {
        bail!("--cases, --pid and --out-file are needed (or --list-latency)");
    };
    let cases = parse_cases(spec)?;
    let pid = pid.to_string();
    let mut dumps = args.dumps_before;
    for case in &cases {
        let label = format!("{}:{}", case.binding_name, case.scenario_name);
        let warmup = (case.n * args.warmup_percent / 100).max(5);
        let run: Box<dyn Fn() -> futures::future::BoxFuture<'static, anyhow::Result<()>>> =
            if args.bare {
                if !matches!(
                    (case.binding, case.scenario),
                    (Binding::JsonRpc, Scenario::Send)
                ) {
                    bail!("the bare server answers jsonrpc:send only (case {label})");
                }
                let bare = std::sync::Arc::new(Bare {
                    http: reqwest::Client::new(),
                    url: args.url.clone(),
                });
                Box::new(move || {
                    let bare = bare.clone();
                    Box::pin(async move { bare.one(BODY, false).await })
                })
            } else {
                let driver = std::sync::Arc::new(Driver::new(&args.url, case.binding).await?);
                let scenario = case.scenario;
                Box::new(move || {
                    let driver = driver.clone();
                    Box::pin(async move { driver.one(scenario).await })
                })
            };
        for _ in 0..warmup {
            run().await.with_context(|| format!("{label}: warm-up"))?;
        }
        callgrind_control(&["--zero", &pid])?;
        for _ in 0..case.n {
            run().await.with_context(|| format!("{label}: request"))?;
        }
        callgrind_control(&[&format!("--dump={label}"), &pid])?;
        dumps += 1;
        let total = read_total(out_file, dumps, args.keep_dumps)?;
        println!("case {label} {} {total}", case.n);
    }
    Ok(())
}
