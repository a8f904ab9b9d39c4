//! The registry's benchmark: routing accuracy on the labelled set, search
//! latency with 10,000 registered cards, and publish throughput.
//!
//! ```text
//! cargo bench -p agentwire-registry --bench registry
//! cargo bench -p agentwire-registry --bench registry -- --cards 2000 --queries 200
//! cargo bench -p agentwire-registry --bench registry -- --tune   # coordinate search on the training half
//! cargo bench -p agentwire-registry --bench registry -- --accuracy   # routing accuracy only
//! cargo bench -p agentwire-registry --features semantic --bench registry -- --accuracy --embedder DIR
//! cargo bench -p agentwire-registry --features semantic --bench registry -- --tune --embedder DIR
//! cargo bench -p agentwire-registry --bench registry -- --embedder DIR --sidecar target/release/a2a-embed
//! ```
//!
//! With `--embedder DIR` (a sentence-embedding model's directory, feature
//! `semantic`), the tables are those of the router with the model, and
//! `--tune` searches its knobs (`semanticWeight`, `semanticFitThreshold`,
//! `minSemantic`) on the training half, the lexical ones kept. With
//! `--sidecar PROGRAM` too (`a2a-embed`, the package agentwire-embed; no
//! feature needed), the model runs there, as `a2a registry serve` runs it:
//! the latencies are those of the shipped arrangement (in this bench's
//! process, the model's code is optimised like agentwire-registry, for
//! size).
//!
//! The labelled set (`tests/data/routing-cards.json`,
//! `tests/data/routing-requests.json`) is split by position: requests at
//! even positions are the training half (the router's defaults were chosen
//! on it, with `--tune`), those at odd positions the held-out half. Both
//! are reported.
//!
//! Accuracy: top-1 counts a request as right only when the router chooses
//! (neither "no fit" nor "ambiguous") the labelled agent and skill; top-3
//! and MRR look at the ranking whatever the decision; "none fits" recall is
//! the share of requests labelled "none" answered with `noFit`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use agentwire_client::registry::{
    PublishRequest, Query, RouteRequest, RouteResponse, SearchRequest,
};
use agentwire_registry::store::{MemoryRegistryStore, RegistryStore, SqliteRegistryStore};
use agentwire_registry::{EmbedError, Embedder, Registry, RegistryServer, RouterConfig};
use serde_json::{Value, json};

const CARDS: &str = include_str!("../tests/data/routing-cards.json");
const REQUESTS: &str = include_str!("../tests/data/routing-requests.json");

struct Args {
    cards: usize,
    queries: usize,
    tune: bool,
    /// Only the routing accuracy (no latency or throughput runs).
    accuracy_only: bool,
    /// A sentence-embedding model's directory (feature `semantic`, or
    /// with `sidecar`).
    embedder: Option<String>,
    /// `a2a-embed`, to run the model of `embedder` in.
    sidecar: Option<String>,
    /// Another model's directory, of vectors of the same length, that
    /// embeds the generated cards' skills in the latency part (e.g. the
    /// model with `num_hidden_layers` 0: the same work for the router,
    /// publishing in minutes instead of hours on two cores).
    card_embedder: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        cards: 10_000,
        queries: 500,
        tune: false,
        accuracy_only: false,
        embedder: None,
        sidecar: None,
        card_embedder: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        match x.as_str() {
            "--cards" => a.cards = it.next().and_then(|v| v.parse().ok()).unwrap_or(a.cards),
            "--queries" => {
                a.queries = it.next().and_then(|v| v.parse().ok()).unwrap_or(a.queries);
            }
            "--tune" => a.tune = true,
            "--accuracy" => a.accuracy_only = true,
            "--embedder" => a.embedder = it.next(),
            "--sidecar" => a.sidecar = it.next(),
            "--card-embedder" => a.card_embedder = it.next(),
            _ => {} // cargo bench passes --bench
        }
    }
    a
}

#[derive(Debug, Clone)]
struct Labelled {
    text: String,
    /// (agent name, skill id); None: no skill fits.
    label: Option<(String, String)>,
}

fn labelled() -> Vec<Labelled> {
    let v: Vec<Value> = serde_json::from_str(REQUESTS).expect("routing-requests.json");
    v.into_iter()
        .map(|r| Labelled {
            text: r["text"].as_str().unwrap_or_default().to_owned(),
            label: match (r["agent"].as_str(), r["skill"].as_str()) {
                (Some(a), Some(s)) => Some((a.to_owned(), s.to_owned())),
                _ => None,
            },
        })
        .collect()
}

/// The model of `--embedder DIR`, run by `--sidecar PROGRAM`.
fn start_sidecar(program: &str, dir: &str) -> Arc<dyn Embedder> {
    use agentwire_registry::embed::SubprocessEmbedder;
    use agentwire_registry::embed::subprocess::{
        DEFAULT_START_TIMEOUT, DEFAULT_TIMEOUT, SidecarCommand,
    };
    let command = SidecarCommand::serve(program, std::path::Path::new(dir));
    match SubprocessEmbedder::start(command, DEFAULT_TIMEOUT, DEFAULT_START_TIMEOUT) {
        Ok(m) => {
            println!("Model: {m:?}");
            Arc::new(m)
        }
        Err(e) => {
            eprintln!("--sidecar {program} --embedder {dir}: {e}");
            std::process::exit(2);
        }
    }
}

/// The model of `--embedder DIR`.
#[cfg(feature = "semantic")]
fn load_model(dir: &str) -> Arc<dyn Embedder> {
    match agentwire_registry::embed::SentenceEmbedder::load(dir) {
        Ok(m) => {
            println!("Model: {m:?}");
            Arc::new(m)
        }
        Err(e) => {
            eprintln!("--embedder {dir}: {e}");
            std::process::exit(2);
        }
    }
}

#[cfg(not(feature = "semantic"))]
fn load_model(_dir: &str) -> Arc<dyn Embedder> {
    eprintln!(
        "--embedder needs the feature `semantic`: cargo bench -p agentwire-registry --features semantic --bench registry -- ..."
    );
    std::process::exit(2);
}

/// An embedder that remembers the vectors it gave (the accuracy and the
/// tuning route the same requests again and again; latency is measured
/// with the model itself).
struct Remembering {
    model: Arc<dyn Embedder>,
    seen: Mutex<HashMap<String, Vec<f32>>>,
}

impl Remembering {
    fn seen(&self) -> Result<MutexGuard<'_, HashMap<String, Vec<f32>>>, EmbedError> {
        self.seen.lock().map_err(|_| EmbedError("poisoned".into()))
    }
}

impl Embedder for Remembering {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let missing: Vec<&str> = {
            let seen = self.seen()?;
            texts
                .iter()
                .copied()
                .filter(|t| !seen.contains_key(*t))
                .collect()
        };
        if !missing.is_empty() {
            let vectors = self.model.embed(&missing)?;
            let mut seen = self.seen()?;
            for (t, v) in missing.iter().zip(vectors) {
                seen.insert((*t).to_owned(), v);
            }
        }
        let seen = self.seen()?;
        texts
            .iter()
            .map(|t| {
                seen.get(*t)
                    .cloned()
                    .ok_or_else(|| EmbedError(format!("no vector for {t:?}")))
            })
            .collect()
    }
}

/// Two models: `requests` embeds single texts (the requests routed),
/// `cards` the batches (a card's skills), for `--card-embedder`.
struct Split {
    requests: Arc<dyn Embedder>,
    cards: Arc<dyn Embedder>,
}

impl Embedder for Split {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        match texts {
            [_] => self.requests.embed(texts),
            _ => self.cards.embed(texts),
        }
    }
}

/// A memory registry of `cards`, embedded with `model` as they are
/// published, and how long publishing them took.
async fn publish_embedding(cards: &[Value], model: &Arc<dyn Embedder>) -> (Registry, Duration) {
    let started = Instant::now();
    let reg = registry_embedding(
        Arc::new(MemoryRegistryStore::new()),
        cards,
        Some(Arc::clone(model)),
    )
    .await;
    (reg, started.elapsed())
}

async fn registry_with(store: Arc<dyn RegistryStore>, cards: &[Value]) -> Registry {
    registry_embedding(store, cards, None).await
}

async fn registry_embedding(
    store: Arc<dyn RegistryStore>,
    cards: &[Value],
    embedder: Option<Arc<dyn Embedder>>,
) -> Registry {
    let mut b = Registry::builder(store);
    if let Some(e) = embedder {
        b = b.embedder(e);
    }
    let r = b.build().await.expect("registry");
    for c in cards {
        r.publish(
            "bench",
            PublishRequest {
                card: Some(c.clone()),
                ..Default::default()
            },
            None,
        )
        .await
        .expect("publish");
    }
    r
}

#[derive(Debug, Default, Clone, Copy)]
struct Scores {
    n: usize,
    top1: usize,
    top3: usize,
    rr: f64,
    none: usize,
    none_flagged: usize,
    /// In-domain requests answered "no fit" (or ambiguous).
    refused: usize,
}

impl Scores {
    fn add(&mut self, l: &Labelled, r: &RouteResponse) {
        match &l.label {
            None => {
                self.none += 1;
                if r.no_fit {
                    self.none_flagged += 1;
                }
            }
            Some((agent, skill)) => {
                self.n += 1;
                let is = |m: &agentwire_client::registry::RouteMatch| {
                    &m.agent_name == agent && &m.skill_id == skill
                };
                if r.chosen().is_some_and(is) {
                    self.top1 += 1;
                }
                if r.chosen().is_none() {
                    self.refused += 1;
                }
                if let Some(rank) = r.matches.iter().position(is) {
                    if rank < 3 {
                        self.top3 += 1;
                    }
                    self.rr += 1.0 / (rank as f64 + 1.0);
                }
            }
        }
    }

    fn top1(&self) -> f64 {
        self.top1 as f64 / self.n.max(1) as f64
    }

    fn recall(&self) -> f64 {
        self.none_flagged as f64 / self.none.max(1) as f64
    }

    fn line(&self, name: &str) -> String {
        format!(
            "{name:<10} {:>4} labelled {:>3} none | top-1 {:.3}  top-3 {:.3}  MRR {:.3} | none-fits recall {:.3} | in-domain refused {}",
            self.n,
            self.none,
            self.top1(),
            self.top3 as f64 / self.n.max(1) as f64,
            self.rr / self.n.max(1) as f64,
            self.recall(),
            self.refused
        )
    }
}

fn evaluate(r: &Registry, set: &[Labelled], config: &RouterConfig) -> (Scores, Scores) {
    evaluate_halves(r, set, config, true)
}

/// [`evaluate`], the held-out half left out (empty) unless `held_out`: the
/// tuning reads the training half only, in half the time.
fn evaluate_halves(
    r: &Registry,
    set: &[Labelled],
    config: &RouterConfig,
    held_out: bool,
) -> (Scores, Scores) {
    let (mut train, mut test) = (Scores::default(), Scores::default());
    for (i, l) in set.iter().enumerate() {
        if i % 2 == 1 && !held_out {
            continue;
        }
        let routed = route_with(r, &l.text, 10, config);
        if i % 2 == 0 {
            train.add(l, &routed);
        } else {
            test.add(l, &routed);
        }
    }
    (train, test)
}

/// The scores of the requests whose position passes `keep`.
fn evaluate_where(
    r: &Registry,
    set: &[Labelled],
    config: &RouterConfig,
    keep: impl Fn(usize) -> bool,
) -> Scores {
    let mut s = Scores::default();
    for (_, l) in set.iter().enumerate().filter(|(i, _)| keep(*i)) {
        let routed = route_with(r, &l.text, 10, config);
        s.add(l, &routed);
    }
    s
}

/// The requests written from the cards alone start here (see
/// benches/README.md).
const INDEPENDENT_FROM: usize = 198;

/// The table of the README: both halves, the whole set, and the requests
/// written from the cards alone.
fn report(r: &Registry, set: &[Labelled], config: &RouterConfig) -> (Scores, Scores) {
    let (train, test) = evaluate(r, set, config);
    let mut all = train;
    all.n += test.n;
    all.top1 += test.top1;
    all.top3 += test.top3;
    all.rr += test.rr;
    all.none += test.none;
    all.none_flagged += test.none_flagged;
    all.refused += test.refused;
    println!("{}", train.line("train"));
    println!("{}", test.line("held-out"));
    println!("{}", all.line("all"));
    let later = evaluate_where(r, set, config, |i| i >= INDEPENDENT_FROM);
    println!("{}", later.line("last 157"));
    let later_held = evaluate_where(r, set, config, |i| i >= INDEPENDENT_FROM && i % 2 == 1);
    println!("{}", later_held.line("157 held"));
    let first_held = evaluate_where(r, set, config, |i| i < INDEPENDENT_FROM && i % 2 == 1);
    println!("{}", first_held.line("198 held"));
    (train, test)
}

/// `--tune --embedder DIR`: the model's knobs searched on the training
/// half (every combination of the lists), the lexical ones kept.
fn tune_semantic(r: &Registry, set: &[Labelled], start: RouterConfig) -> RouterConfig {
    let weights = [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];
    let thresholds: Vec<f64> = (0..=25).map(|k| f64::from(k) * 0.02).collect();
    let minimums: Vec<f64> = (0..=30).map(|k| f64::from(k) * 0.02).collect();
    let targets = std::env::var("TUNE_OBJECTIVE").as_deref() == Ok("targets");
    let mut best = (f64::MIN, start);
    let mut tried = 0usize;
    for w in weights {
        for th in &thresholds {
            for min in &minimums {
                let c = RouterConfig {
                    semantic_weight: w,
                    semantic_fit_threshold: *th,
                    min_semantic: *min,
                    ..start
                };
                let (train, _) = evaluate_halves(r, set, &c, false);
                tried += 1;
                let o = if targets {
                    (train.top1() - 0.85).min(train.recall() - 0.8)
                        + 0.01 * (train.top1() + train.recall())
                } else {
                    train.top1() + train.recall()
                };
                if o > best.0 + 1e-9 {
                    best = (o, c);
                    println!(
                        "  weight {w}, threshold {th:.2}, min semantic {min:.2} -> {o:.3} (top-1 {:.3}, recall {:.3})",
                        train.top1(),
                        train.recall()
                    );
                }
            }
        }
    }
    println!("{tried} configurations tried");
    best.1
}

/// A small deterministic generator (xorshift), so runs are comparable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[(self.next() % v.len() as u64) as usize]
    }
}

const TOPICS: &[&str] = &[
    "invoice",
    "weather",
    "contract",
    "lockfile",
    "kubernetes",
    "recipe",
    "flight",
    "hotel",
    "ticket",
    "email",
    "calendar",
    "budget",
    "payroll",
    "sensor",
    "shipment",
    "warehouse",
    "insurance",
    "claim",
    "patient",
    "lab",
    "genome",
    "satellite",
    "traffic",
    "parking",
    "energy",
    "solar",
    "battery",
    "crop",
    "soil",
    "fleet",
    "vehicle",
    "route",
    "student",
    "exam",
    "course",
    "library",
    "podcast",
    "video",
    "subtitle",
    "music",
    "playlist",
    "translation",
    "glossary",
    "survey",
    "poll",
    "election",
    "tax",
    "audit",
    "loan",
    "mortgage",
];
const VERBS: &[&str] = &[
    "analyse",
    "summarise",
    "check",
    "forecast",
    "classify",
    "extract",
    "translate",
    "schedule",
    "monitor",
    "optimise",
    "validate",
    "compare",
    "estimate",
    "report",
    "detect",
    "recommend",
];
const THINGS: &[&str] = &[
    "records",
    "documents",
    "trends",
    "anomalies",
    "costs",
    "risks",
    "schedules",
    "reports",
    "alerts",
    "metrics",
    "images",
    "logs",
    "orders",
    "requests",
    "plans",
    "results",
];

fn synthetic(rng: &mut Rng, i: usize) -> Value {
    let topic = rng.pick(TOPICS);
    let topic2 = rng.pick(TOPICS);
    let mut skills = Vec::new();
    for s in 0..(2 + rng.next() % 3) {
        let verb = rng.pick(VERBS);
        let thing = rng.pick(THINGS);
        skills.push(json!({
            "id": format!("{verb}-{topic}-{thing}-{s}"),
            "name": format!("{verb} {topic} {thing}"),
            "description": format!("Helps to {verb} {topic} {thing} and {} {topic2} {}.", rng.pick(VERBS), rng.pick(THINGS)),
            "tags": [topic, verb, thing],
            "examples": [
                format!("{verb} the {topic} {thing} of last week"),
                format!("can you {verb} my {topic2} {thing}?"),
                format!("please {} {topic} {} for the team", rng.pick(VERBS), rng.pick(THINGS)),
            ]
        }));
    }
    json!({
        "name": format!("{} {} Agent {i}", capital(topic), capital(topic2)),
        "description": format!("Works on {topic} and {topic2}: {} and {}.", rng.pick(THINGS), rng.pick(THINGS)),
        "version": "1.0.0",
        "provider": {"organization": "Bench", "url": format!("https://a{i}.bench.example.com")},
        "supportedInterfaces": [{"url": format!("https://a{i}.bench.example.com/a2a"),
                                 "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": i % 2 == 0},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": skills
    })
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// "p50 …  p99 …" of sorted latencies.
fn p50_p99(sorted: &[Duration]) -> String {
    format!(
        "p50 {}  p99 {}",
        ms(percentile(sorted, 0.5)),
        ms(percentile(sorted, 0.99))
    )
}

/// The CPU time of this process so far, all its threads (the sum of
/// `/proc/self/task/*/schedstat`'s first field, in nanoseconds; Linux
/// only: None elsewhere). A figure per request that the load of the
/// machine changes less than wall-clock time.
fn process_cpu() -> Option<Duration> {
    let mut ns = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        ns += stat
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(Duration::from_nanos(ns))
}

/// "CPU … a request" between two readings of [`process_cpu`].
fn cpu_per(before: Option<Duration>, n: usize) -> String {
    match (before, process_cpu()) {
        (Some(b), Some(a)) if n > 0 => format!(
            "process CPU {:.2} ms a request",
            a.saturating_sub(b).as_secs_f64() * 1000.0 / n as f64
        ),
        _ => String::new(),
    }
}

/// With `ROUTE_DUMP=FILE`: every text routed with its best 20 skills,
/// one JSON answer a line, appended to `FILE.NAME` (to compare the
/// router's answers before and after a change of its code).
fn dump_routes<'a>(reg: &Registry, name: &str, texts: impl IntoIterator<Item = &'a str>) {
    let Some(file) = std::env::var_os("ROUTE_DUMP") else {
        return;
    };
    let mut out = String::new();
    for text in texts {
        let routed = route_with(reg, text, 20, &reg.config().router);
        out.push_str(&serde_json::to_string(&(text, routed)).expect("json"));
        out.push('\n');
    }
    let mut path = std::path::PathBuf::from(file);
    path.as_mut_os_string().push(format!(".{name}"));
    std::fs::write(&path, out).expect("ROUTE_DUMP");
    println!("  answers written to {}", path.display());
}

/// How long `run` takes on each item, sorted.
fn latencies<T>(items: impl IntoIterator<Item = T>, mut run: impl FnMut(T)) -> Vec<Duration> {
    let mut lat: Vec<Duration> = items
        .into_iter()
        .map(|item| {
            let t = Instant::now();
            run(item);
            t.elapsed()
        })
        .collect();
    lat.sort();
    lat
}

/// `text` routed with `config`, the best `limit` skills.
fn route_with(r: &Registry, text: &str, limit: u32, config: &RouterConfig) -> RouteResponse {
    r.route_with(
        &RouteRequest {
            text: text.to_owned(),
            filter: None,
            limit: Some(limit),
        },
        config,
    )
    .expect("route")
}

/// How long routing each text takes in process, sorted.
fn route_latencies<'a>(reg: &Registry, texts: impl IntoIterator<Item = &'a str>) -> Vec<Duration> {
    latencies(texts, |text| {
        reg.route(&RouteRequest {
            text: text.to_owned(),
            filter: None,
            limit: Some(3),
        })
        .expect("route");
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = args();
    let cards: Vec<Value> = serde_json::from_str(CARDS).expect("routing-cards.json");
    let set = labelled();
    println!(
        "Routing set: {} cards, {} skills, {} requests ({} labelled \"none fits\")",
        cards.len(),
        cards
            .iter()
            .map(|c| c["skills"].as_array().map_or(0, Vec::len))
            .sum::<usize>(),
        set.len(),
        set.iter().filter(|l| l.label.is_none()).count()
    );
    let model = a.embedder.as_deref().map(|dir| match &a.sidecar {
        Some(program) => start_sidecar(program, dir),
        None => load_model(dir),
    });
    let remembering = model.as_ref().map(|m| {
        Arc::new(Remembering {
            model: Arc::clone(m),
            seen: Mutex::new(HashMap::new()),
        }) as Arc<dyn Embedder>
    });
    let r = registry_embedding(
        Arc::new(MemoryRegistryStore::new()),
        &cards,
        remembering.clone(),
    )
    .await;

    if a.tune && remembering.is_some() {
        let config = tune_semantic(&r, &set, RouterConfig::default());
        println!("Best on the training half: {config:?}");
        report(&r, &set, &config);
        return;
    }

    if a.tune {
        // Coordinate search on the training half only: from the defaults,
        // each knob in turn takes the value of its list that scores best
        // (top-1 plus none-fits recall; a tie keeps the current value),
        // until a whole round changes nothing.
        type Knob = (
            &'static str,
            fn(&mut RouterConfig) -> &mut f64,
            &'static [f64],
        );
        let knobs: &[Knob] = &[
            (
                "coverage_weight",
                |c| &mut c.coverage_weight,
                &[0.1, 0.2, 0.3, 0.4],
            ),
            (
                "example_weight",
                |c| &mut c.example_weight,
                &[0.1, 0.2, 0.3, 0.4],
            ),
            (
                "bm25_weight",
                |c| &mut c.bm25_weight,
                &[0.3, 0.4, 0.5, 0.6, 0.7],
            ),
            (
                "name_weight",
                |c| &mut c.name_weight,
                &[0.0, 0.15, 0.3, 0.45, 0.6],
            ),
            (
                "agent_weight",
                |c| &mut c.agent_weight,
                &[0.0, 0.15, 0.25, 0.35],
            ),
            (
                "agent_words_in_skill",
                |c| &mut c.agent_words_in_skill,
                &[0.0, 0.25, 0.5],
            ),
            (
                "unknown_weight",
                |c| &mut c.unknown_weight,
                &[1.0, 1.25, 1.5, 1.75, 2.0],
            ),
            (
                "common_word_weight",
                |c| &mut c.common_word_weight,
                &[0.25, 0.5, 0.75, 1.0],
            ),
            ("number_weight", |c| &mut c.number_weight, &[0.25, 0.5, 1.0]),
            (
                "temporal_weight",
                |c| &mut c.temporal_weight,
                &[0.0, 0.25, 0.5, 0.75, 1.0],
            ),
            (
                "entity_weight",
                |c| &mut c.entity_weight,
                &[0.0, 0.25, 0.5, 0.75, 1.0],
            ),
            (
                "related_weight",
                |c| &mut c.related_weight,
                &[0.0, 0.25, 0.5, 0.75, 1.0],
            ),
            (
                "phrase_weight",
                |c| &mut c.phrase_weight,
                &[0.0, 0.1, 0.2, 0.3, 0.4],
            ),
            (
                "min_coverage",
                |c| &mut c.min_coverage,
                &[0.0, 0.15, 0.25, 0.35, 0.45],
            ),
            ("tie_margin", |c| &mut c.tie_margin, &[0.0, 0.01, 0.02]),
        ];
        let objective = |c: &RouterConfig| {
            let (train, _) = evaluate_halves(&r, &set, c, false);
            match std::env::var("TUNE_OBJECTIVE").as_deref() {
                // How far the worse of the two is above its target, the sum
                // breaking ties.
                Ok("targets") => {
                    (train.top1() - 0.85).min(train.recall() - 0.8)
                        + 0.01 * (train.top1() + train.recall())
                }
                _ => train.top1() + train.recall(),
            }
        };
        // The fit threshold and the known share decide together: each
        // configuration is scored with the best pair of them.
        let thresholds = [0.12, 0.14, 0.16, 0.18, 0.2, 0.22, 0.24, 0.26, 0.28];
        let shares = [0.0, 0.4, 0.6];
        let contents = [0.0, 0.01, 0.2];
        let objective = |c: &RouterConfig| {
            let mut best = (f64::MIN, *c);
            for th in thresholds {
                for share in shares {
                    for content in contents {
                        let d = RouterConfig {
                            fit_threshold: th,
                            min_known_share: share,
                            min_content_coverage: content,
                            ..*c
                        };
                        let o = objective(&d);
                        if o > best.0 + 1e-9 {
                            best = (o, d);
                        }
                    }
                }
            }
            best
        };
        let mut config = RouterConfig::default();
        let (mut best, c) = objective(&config);
        config = c;
        let mut tried = 1usize;
        // `TUNE_RANDOM=N`: first N configurations drawn at random from the
        // lists (a fixed seed), the best of them the start of the search.
        let random: usize = std::env::var("TUNE_RANDOM")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut rng = Rng(0x7e57_5eed_0000_0001);
        for _ in 0..random {
            let mut c = config;
            for (_, knob, values) in knobs {
                *knob(&mut c) = values[(rng.next() % values.len() as u64) as usize];
            }
            tried += 1;
            let (o, c) = objective(&c);
            if o > best + 1e-9 {
                println!("  random: {o:.3}");
                best = o;
                config = c;
            }
        }
        for round in 1..=6 {
            let mut changed = false;
            for (name, knob, values) in knobs {
                for v in values.iter() {
                    let mut c = config;
                    if (*knob(&mut c) - v).abs() < 1e-12 {
                        continue;
                    }
                    *knob(&mut c) = *v;
                    tried += 1;
                    let (o, c) = objective(&c);
                    if o > best + 1e-9 {
                        println!("  round {round}: {name} = {v} -> {o:.3}");
                        best = o;
                        config = c;
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        println!("{tried} configurations tried");
        println!("Best on the training half: {config:?}");
        let (train, test) = evaluate(&r, &set, &config);
        println!("{}", train.line("train"));
        println!("{}", test.line("held-out"));
        return;
    }

    // `ROUTER_CONFIG='{"fitThreshold": 0.2, ...}'`: another configuration
    // than the defaults (the keys of `RouterConfig`, camelCase).
    let config: RouterConfig = match std::env::var("ROUTER_CONFIG") {
        Ok(v) => serde_json::from_str(&v).expect("ROUTER_CONFIG"),
        Err(_) => RouterConfig::default(),
    };
    if model.is_some() {
        let lexical = registry_with(Arc::new(MemoryRegistryStore::new()), &cards).await;
        println!("Router without the model (lexical): {config:?}");
        report(&lexical, &set, &config);
        println!("Router with the model (words and meaning):");
    } else {
        println!("Default router (lexical): {config:?}");
    }
    let (_, test) = report(&r, &set, &config);

    // Misses of the held-out half, to read.
    let show_train = std::env::var_os("SHOW_TRAIN_MISSES").is_some();
    for (i, l) in set
        .iter()
        .enumerate()
        .filter(|(i, _)| (i % 2 == 1) != show_train)
    {
        let routed = route_with(&r, &l.text, 3, &config);
        let got = routed
            .chosen()
            .map(|m| format!("{} / {}", m.agent_name, m.skill_id));
        let want = l.label.as_ref().map(|(a, s)| format!("{a} / {s}"));
        if got != want {
            println!(
                "  miss #{i}: {:?} -> {} (wanted {}){}",
                l.text,
                got.unwrap_or_else(|| if routed.no_fit {
                    "no fit".into()
                } else {
                    "ambiguous".into()
                }),
                want.unwrap_or_else(|| "no fit".into()),
                routed
                    .matches
                    .first()
                    .map(|m| format!(" [best {} {} {}]", m.agent_name, m.skill_id, m.score))
                    .unwrap_or_default()
            );
        }
    }

    // The requests of the half shown, each routed with its best five skills.
    let shown_routed = || {
        set.iter()
            .enumerate()
            .filter(|(i, _)| (i % 2 == 1) != show_train)
            .map(|(i, l)| (i, l, route_with(&r, &l.text, 5, &config)))
    };
    // `EXPLAIN=1`: the best five skills of every miss, with their scores.
    if std::env::var_os("EXPLAIN").is_some() {
        for (i, l, routed) in shown_routed() {
            let want = l.label.as_ref().map(|(a, s)| (a.clone(), s.clone()));
            let got = routed
                .chosen()
                .map(|m| (m.agent_name.clone(), m.skill_id.clone()));
            if got != want {
                println!("#{i} {:?} wanted {want:?} {:?}", l.text, routed.reason);
                for m in &routed.matches {
                    println!(
                        "    {:>3} {} / {}: {}",
                        m.score, m.agent_name, m.skill_id, m.why
                    );
                }
            }
        }
    }
    // `DUMP=1`: one line per request of the half shown (the training half
    // with SHOW_TRAIN_MISSES), to study the decision.
    if std::env::var_os("DUMP").is_some() {
        for (i, l, routed) in shown_routed() {
            let kind = match &l.label {
                None => "none",
                Some((a, s)) => match routed.matches.first() {
                    Some(m) if &m.agent_name == a && &m.skill_id == s => "right",
                    _ => "wrong",
                },
            };
            let sc: Vec<u8> = routed.matches.iter().map(|m| m.score).collect();
            println!("DUMP {i} {kind} {sc:?} {:?}", l.text);
        }
    }
    if a.accuracy_only {
        return;
    }

    if let Some(model) = &model {
        // The model's own cost: embedding one request, and routing with it
        // (nothing remembered), on the labelled cards.
        println!();
        println!("With the model, on the 30 labelled cards:");
        let (reg, took) = publish_embedding(&cards, model).await;
        println!(
            "  publish with embedding: {} cards in {:.2} s ({:.1} ms a card)",
            cards.len(),
            took.as_secs_f64(),
            took.as_secs_f64() * 1000.0 / cards.len() as f64
        );
        let elat = latencies(&set, |l| {
            model.embed(&[l.text.as_str()]).expect("embed");
        });
        let rlat = route_latencies(&reg, set.iter().map(|l| l.text.as_str()));
        println!("  embedding one request: {}", p50_p99(&elat));
        println!("  route in process with the model: {}", p50_p99(&rlat));
    }

    // Publish throughput and search latency with many cards.
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let generated: Vec<Value> = (0..a.cards.saturating_sub(cards.len()))
        .map(|i| synthetic(&mut rng, i))
        .collect();
    let mut all_cards = cards.clone();
    all_cards.extend(generated);
    println!();
    println!(
        "Publishing {} cards (30 labelled + generated), by value, one at a time:",
        all_cards.len()
    );
    for (name, store) in [
        (
            "memory",
            Arc::new(MemoryRegistryStore::new()) as Arc<dyn RegistryStore>,
        ),
        ("sqlite", {
            let dir =
                std::env::temp_dir().join(format!("registry-bench-{}.db", std::process::id()));
            let _ = std::fs::remove_file(&dir);
            Arc::new(SqliteRegistryStore::open(&dir).await.expect("sqlite"))
                as Arc<dyn RegistryStore>
        }),
    ] {
        let started = Instant::now();
        let reg = registry_with(store, &all_cards).await;
        let took = started.elapsed();
        println!(
            "  {name:<6} {:>6} publishes in {:.2} s: {:.0} publishes/s",
            all_cards.len(),
            took.as_secs_f64(),
            all_cards.len() as f64 / took.as_secs_f64()
        );
        if name != "sqlite" {
            continue;
        }
        // Search latency, in process and over HTTP (loopback).
        let mut queries: Vec<String> = set.iter().map(|l| l.text.clone()).collect();
        while queries.len() < a.queries {
            queries.push(format!(
                "{} the {} {}",
                rng.pick(VERBS),
                rng.pick(TOPICS),
                rng.pick(THINGS)
            ));
        }
        queries.truncate(a.queries);
        let mut lat = Vec::new();
        let mut hits = 0usize;
        for q in &queries {
            let t = Instant::now();
            let res = reg
                .search(SearchRequest {
                    query: Query {
                        text: Some(q.clone()),
                        ..Default::default()
                    },
                    page_size: Some(10),
                    ..Default::default()
                })
                .await
                .expect("search");
            lat.push(t.elapsed());
            hits += res.results.len();
        }
        lat.sort();
        println!(
            "  search in process ({} cards, {} queries, {:.1} results each): p50 {}  p99 {}  max {}",
            reg.len(),
            queries.len(),
            hits as f64 / queries.len() as f64,
            ms(percentile(&lat, 0.5)),
            ms(percentile(&lat, 0.99)),
            ms(*lat.last().unwrap_or(&Duration::ZERO))
        );
        let rlat = route_latencies(&reg, queries.iter().map(String::as_str));
        println!("  route in process: {}", p50_p99(&rlat));
        dump_routes(&reg, "lexical", queries.iter().map(String::as_str));
        let server = RegistryServer::new(reg.clone())
            .background(false)
            .bind("127.0.0.1:0")
            .await
            .expect("bind")
            .spawn();
        let client = agentwire_client::registry::Registry::new(&server.base_url()).expect("client");
        let mut hlat = Vec::new();
        for q in &queries {
            let t = Instant::now();
            client.search_text(q).await.expect("search over HTTP");
            hlat.push(t.elapsed());
        }
        hlat.sort();
        println!(
            "  search over HTTP (loopback, keep-alive, sequential): p50 {}  p99 {}  (target p99 < 20 ms: {})",
            ms(percentile(&hlat, 0.5)),
            ms(percentile(&hlat, 0.99)),
            if percentile(&hlat, 0.99) < Duration::from_millis(20) {
                "met"
            } else {
                "MISSED"
            }
        );
        let _ = server.shutdown().await;
    }
    if let Some(model) = &model {
        // Routing with the model among many cards (memory store): every
        // skill's vector is compared with the request's. The registry
        // keeps the vectors of the last requests routed, so that the
        // second pass shows the route without the request's embedding.
        let requests = Arc::clone(model);
        let requests = match (&a.card_embedder, &a.embedder) {
            (Some(cards_dir), Some(dir)) => {
                println!(
                    "  the generated cards' skills embedded by {cards_dir} (for the router's work only), the requests by {dir}"
                );
                let cards = match &a.sidecar {
                    Some(program) => start_sidecar(program, cards_dir),
                    None => load_model(cards_dir),
                };
                Arc::new(Split { requests, cards }) as Arc<dyn Embedder>
            }
            _ => requests,
        };
        let (reg, took) = publish_embedding(&all_cards, &requests).await;
        println!(
            "  with the model: {} publishes in {:.1} s ({:.0} publishes/s, embedding included)",
            all_cards.len(),
            took.as_secs_f64(),
            all_cards.len() as f64 / took.as_secs_f64()
        );
        // Distinct requests: the labelled ones, then generated ones (the
        // HTTP pass has its own, never routed before).
        let mut texts: Vec<String> = set.iter().map(|l| l.text.clone()).collect();
        let mut generated = |n: usize, tag: &str| -> Vec<String> {
            (0..n)
                .map(|k| {
                    format!(
                        "{} the {} {} {tag}{k}",
                        rng.pick(VERBS),
                        rng.pick(TOPICS),
                        rng.pick(THINGS)
                    )
                })
                .collect()
        };
        texts.extend(generated(a.queries.saturating_sub(texts.len()), "r"));
        texts.truncate(a.queries);
        let rlat = route_latencies(&reg, texts.iter().map(String::as_str));
        println!(
            "  route in process with the model ({} cards, {} distinct requests): {}",
            reg.len(),
            rlat.len(),
            p50_p99(&rlat)
        );
        // `ROUTE_PASSES=N`: N passes (the last one measured), for a
        // profiler to attach to.
        let passes: usize = std::env::var("ROUTE_PASSES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        for _ in 1..passes {
            route_latencies(&reg, texts.iter().map(String::as_str));
        }
        let cpu = process_cpu();
        let clat = route_latencies(&reg, texts.iter().map(String::as_str));
        println!(
            "  the same requests again, their vectors kept by the registry (the route without the model): {}  ({})",
            p50_p99(&clat),
            cpu_per(cpu, clat.len())
        );
        dump_routes(&reg, "model", texts.iter().map(String::as_str));
        let elat = latencies(&texts, |t| {
            model.embed(&[t.as_str()]).expect("embed");
        });
        println!(
            "  embedding one request (the same requests, the model alone): {}",
            p50_p99(&elat)
        );
        let http_texts = generated(a.queries, "h");
        let server = RegistryServer::new(reg.clone())
            .background(false)
            .bind("127.0.0.1:0")
            .await
            .expect("bind");
        let server = server.spawn();
        let client = agentwire_client::registry::Registry::new(&server.base_url()).expect("client");
        let mut hlat = Vec::new();
        let cpu = process_cpu();
        for t in &http_texts {
            let started = Instant::now();
            client.route(t, None).await.expect("route over HTTP");
            hlat.push(started.elapsed());
        }
        hlat.sort();
        println!(
            "  route over HTTP with the model (loopback, keep-alive, sequential, {} distinct requests): {}  ({}, client, server and embedding)  (target p99 < 20 ms: {})",
            hlat.len(),
            p50_p99(&hlat),
            cpu_per(cpu, hlat.len()),
            if percentile(&hlat, 0.99) < Duration::from_millis(20) {
                "met"
            } else {
                "MISSED"
            }
        );
        let _ = server.shutdown().await;
        let mut slat = Vec::new();
        for q in &texts {
            let t = Instant::now();
            reg.search(SearchRequest {
                query: Query {
                    text: Some(q.to_owned()),
                    ..Default::default()
                },
                page_size: Some(10),
                ..Default::default()
            })
            .await
            .expect("search");
            slat.push(t.elapsed());
        }
        slat.sort();
        println!(
            "  search in process with the model's registry ({} cards): {}",
            reg.len(),
            p50_p99(&slat)
        );
    }
    let targets = test.top1() >= 0.85 && test.recall() >= 0.8;
    println!();
    println!(
        "Targets on the held-out half (top-1 >= 0.85, none-fits recall >= 0.8): {}",
        if targets { "met" } else { "MISSED" }
    );
}
