//! The streams of the `a2a` command and task generations (A2A v1.1 draft,
//! docs/generation.md), against real `a2a serve --agent echo` processes on
//! loopback:
//!
//! - an agent whose card declares A2A 1.1 for the interface in use: `a2a
//!   send --stream` opens its stream with `A2A-Version: 1.1`, its events
//!   carry generations (checked), and it prints the same events and the
//!   same artifact as against the same agent declaring 1.0 only;
//! - a gap is healed: an HTTP proxy in front of the agent drops one SSE
//!   event of the stream (an artifact chunk); the command says so on
//!   stderr and its output still assembles the complete artifact (the
//!   same drop with a 1.0 card assembles a wrong one: the proxy does break
//!   the stream);
//! - an agent whose card declares 1.0 only sees exactly the calls it saw
//!   before: every call `A2A-Version: 1.0`, no generation printed; and
//!   `--a2a-version 1.0` keeps 1.0 even with a 1.1 card.
//!
//! JSON-RPC and HTTP+JSON go through an HTTP proxy that drops one SSE
//! event; gRPC through a gRPC proxy (a tonic channel) that drops one
//! message of the stream, with card files naming it (declaring 1.0 only,
//! or 1.1 too).

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use common::{Env, Out, Serving};
use futures::StreamExt;
use serde_json::Value;

/// What the echo agent is sent: streamed back one word a chunk.
const TEXT: &str = "alpha bravo charlie delta";
/// The bytes of the one SSE event the proxy drops: the chunk `charlie `
/// (the message itself, in the task's history, has no quote before it).
const MARKER: &[u8] = b"\"charlie ";

/// The proxy's state.
struct Proxy {
    upstream: String,
    http: reqwest::Client,
    /// Serve the card with a 1.1 twin of each interface.
    declare_1_1: AtomicBool,
    /// Drop the next SSE event carrying the marker ([`MARKER`] at first).
    armed: AtomicBool,
    marker: Mutex<Vec<u8>>,
    dropped: AtomicUsize,
    /// Each call: (JSON-RPC method or HTTP method and path, A2A-Version).
    calls: Mutex<Vec<(String, String)>>,
}

impl Proxy {
    fn set_marker(&self, m: &[u8]) {
        *self.marker.lock().expect("marker") = m.to_vec();
    }

    fn calls(&self) -> Vec<(String, String)> {
        std::mem::take(&mut *self.calls.lock().expect("calls"))
    }
}

async fn forward(State(p): State<Arc<Proxy>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20)
        .await
        .expect("the request body");
    let path = parts
        .uri
        .path_and_query()
        .map(|pq| pq.as_str().to_owned())
        .unwrap_or_default();
    let version = parts
        .headers
        .get("a2a-version")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let is_card = path.starts_with("/.well-known/");
    if !is_card {
        let what = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v["method"].as_str().map(str::to_owned))
            .unwrap_or_else(|| format!("{} {}", parts.method, parts.uri.path()));
        p.calls.lock().expect("calls").push((what, version));
    }
    let mut up = p
        .http
        .request(parts.method.clone(), format!("{}{path}", p.upstream))
        .body(body.to_vec());
    for (k, v) in &parts.headers {
        if k != http::header::HOST && k != http::header::CONTENT_LENGTH {
            up = up.header(k, v);
        }
    }
    let res = up.send().await.expect("the agent answers");
    let mut out = Response::builder().status(res.status());
    for (k, v) in res.headers() {
        if k != http::header::CONTENT_LENGTH
            && k != http::header::TRANSFER_ENCODING
            && k != http::header::CONNECTION
            && k != http::header::ETAG
        {
            out = out.header(k, v);
        }
    }
    if is_card && p.declare_1_1.load(Ordering::SeqCst) {
        let mut card: Value = res.json().await.expect("a card");
        let twins: Vec<Value> = card["supportedInterfaces"]
            .as_array()
            .expect("interfaces")
            .iter()
            .map(|i| {
                let mut t = i.clone();
                t["protocolVersion"] = "1.1".into();
                t
            })
            .collect();
        card["supportedInterfaces"]
            .as_array_mut()
            .expect("interfaces")
            .extend(twins);
        return out.body(Body::from(card.to_string())).expect("a response");
    }
    let sse = res
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if !sse {
        return out
            .body(Body::from_stream(res.bytes_stream()))
            .expect("a response");
    }
    // Event by event (an event ends at a blank line), the marked one
    // dropped once when armed.
    let p2 = Arc::clone(&p);
    let events = futures::stream::unfold(
        (res.bytes_stream(), Vec::<u8>::new(), false),
        move |(mut s, mut buf, mut ended)| {
            let p = Arc::clone(&p2);
            async move {
                loop {
                    if let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
                        let event: Vec<u8> = buf.drain(..end + 2).collect();
                        let marked = {
                            let m = p.marker.lock().expect("marker");
                            event.windows(m.len()).any(|w| w == m.as_slice())
                        };
                        if marked && p.armed.swap(false, Ordering::SeqCst) {
                            p.dropped.fetch_add(1, Ordering::SeqCst);
                            continue;
                        }
                        return Some((Ok::<_, std::io::Error>(event), (s, buf, ended)));
                    }
                    if ended {
                        return (!buf.is_empty())
                            .then(|| (Ok(std::mem::take(&mut buf)), (s, Vec::new(), true)));
                    }
                    match s.next().await {
                        Some(Ok(b)) => buf.extend_from_slice(&b),
                        _ => ended = true,
                    }
                }
            }
        },
    );
    out.body(Body::from_stream(events)).expect("a response")
}

/// The artifacts a JSONL stream of `a2a send --stream -o json` adds up to
/// (a task snapshot replaces them; chunks append): name -> text.
fn assembled(lines: &[Value]) -> BTreeMap<String, String> {
    let text = |a: &Value| -> String {
        a["parts"]
            .as_array()
            .map(|ps| ps.iter().filter_map(|p| p["text"].as_str()).collect())
            .unwrap_or_default()
    };
    let mut arts: BTreeMap<String, String> = BTreeMap::new();
    for l in lines {
        if let Some(t) = l.get("task") {
            arts = t["artifacts"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|a| (a["artifactId"].as_str().unwrap_or("").to_owned(), text(a)))
                        .collect()
                })
                .unwrap_or_default();
        }
        if let Some(u) = l.get("artifactUpdate") {
            let a = &u["artifact"];
            let id = a["artifactId"].as_str().unwrap_or("").to_owned();
            if u["append"].as_bool().unwrap_or(false) {
                arts.entry(id).or_default().push_str(&text(a));
            } else {
                arts.insert(id, text(a));
            }
        }
    }
    arts
}

/// The final state a JSONL stream ends with.
fn final_state(lines: &[Value]) -> String {
    let last = lines.last().expect("a line");
    last.pointer("/statusUpdate/status/state")
        .or_else(|| last.pointer("/task/status/state"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Whether an event line carries a generation.
fn has_generation(line: &Value) -> bool {
    ["task", "statusUpdate", "artifactUpdate"]
        .iter()
        .any(|k| line.get(*k).is_some_and(|e| e.get("generation").is_some()))
}

/// A printed event without what differs between two runs (ids, times,
/// generations).
fn summary(line: &Value) -> String {
    if let Some(t) = line.get("task") {
        return format!("task {}", t["status"]["state"]);
    }
    if let Some(s) = line.get("statusUpdate") {
        return format!("status {}", s["status"]["state"]);
    }
    if let Some(a) = line.get("artifactUpdate") {
        return format!(
            "artifact {} append={} last={}",
            a["artifact"]["parts"],
            a["append"].as_bool().unwrap_or(false),
            a["lastChunk"].as_bool().unwrap_or(false)
        );
    }
    format!("other {line}")
}

fn send_stream(env: &Env, agent: &str, binding: &str, extra: &[&str]) -> Out {
    let mut args = vec![
        "send",
        "-a",
        agent,
        "--transport",
        binding,
        "--no-cache",
        "--no-ledger",
        "--stream",
        "-o",
        "json",
        "--timeout",
        "60s",
    ];
    args.extend_from_slice(extra);
    args.push(TEXT);
    let out = env.run(&args);
    out.expect(0);
    out
}

/// Starts a long job of the echo agent (`send --async`): its task id.
fn start_slow(env: &Env, agent: &str, binding: &str, text: &str) -> String {
    let out = env.run(&[
        "send",
        "-a",
        agent,
        "--transport",
        binding,
        "--no-cache",
        "--no-ledger",
        "--async",
        "-o",
        "json",
        text,
    ]);
    out.expect(0);
    out.json()
        .pointer("/task/id")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no task: {}", out.stdout))
        .to_owned()
}

/// `a2a task subscribe ID --stream -o json`.
fn subscribe(env: &Env, agent: &str, binding: &str, id: &str) -> Out {
    let out = env.run(&[
        "task",
        "subscribe",
        id,
        "-a",
        agent,
        "--transport",
        binding,
        "--no-cache",
        "--no-ledger",
        "--stream",
        "-o",
        "json",
        "--timeout",
        "60s",
    ]);
    out.expect(0);
    out
}

/// The whole echo.
fn whole() -> BTreeMap<String, String> {
    BTreeMap::from([(String::new(), TEXT.to_owned())])
}

/// Artifacts by position (their ids differ between runs).
fn texts(a: BTreeMap<String, String>) -> BTreeMap<String, String> {
    a.into_values().map(|v| (String::new(), v)).collect()
}

#[test]
fn send_stream_with_generations_over_http_bindings() {
    agentwire_client::install_crypto_provider();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind the proxy");
    let proxy_addr = listener.local_addr().expect("the proxy's address");
    let env = Env::new();
    let public = format!("http://{proxy_addr}");
    let server = Serving::start(&env, &["--agent", "echo", "--public-url", &public]);
    let proxy = Arc::new(Proxy {
        upstream: server.base(),
        http: reqwest::Client::new(),
        declare_1_1: AtomicBool::new(false),
        armed: AtomicBool::new(false),
        marker: Mutex::new(MARKER.to_vec()),
        dropped: AtomicUsize::new(0),
        calls: Mutex::new(Vec::new()),
    });
    let app = axum::Router::new()
        .fallback(forward)
        .with_state(Arc::clone(&proxy));
    rt.spawn(async move { axum::serve(listener, app).await });
    let agent = proxy_addr.to_string();

    for b in ["JSONRPC", "HTTP+JSON"] {
        // (c) A card declaring 1.0 only: every call 1.0, no generation.
        proxy.declare_1_1.store(false, Ordering::SeqCst);
        let plain = send_stream(&env, &agent, b, &["--verbose"]);
        let lines = plain.jsonl();
        assert!(!lines.iter().any(has_generation), "[{b}] {}", plain.stdout);
        assert_eq!(texts(assembled(&lines)), whole(), "[{b}] {}", plain.stdout);
        assert_eq!(final_state(&lines), "TASK_STATE_COMPLETED", "[{b}]");
        let calls = proxy.calls();
        assert!(!calls.is_empty(), "[{b}] the proxy saw the calls");
        assert!(
            calls.iter().all(|(_, v)| v == "1.0"),
            "[{b}] a 1.0 agent sees 1.0 calls only: {calls:?}"
        );
        assert!(!plain.stderr.contains("A2A 1.1"), "[{b}] {}", plain.stderr);

        // (a) A card declaring 1.1: the stream asks for it, its events
        // carry generations, and the output is the same.
        proxy.declare_1_1.store(true, Ordering::SeqCst);
        let v11 = send_stream(&env, &agent, b, &["--verbose"]);
        let lines11 = v11.jsonl();
        assert!(lines11.iter().all(has_generation), "[{b}] {}", v11.stdout);
        assert_eq!(
            lines11.iter().map(summary).collect::<Vec<_>>(),
            lines.iter().map(summary).collect::<Vec<_>>(),
            "[{b}] the same events as with a 1.0 card"
        );
        assert_eq!(texts(assembled(&lines11)), whole(), "[{b}]");
        assert!(
            v11.stderr.contains("note: the agent declares A2A 1.1"),
            "[{b}] {}",
            v11.stderr
        );
        assert!(
            !v11.stderr.contains("lost on the way"),
            "[{b}] {}",
            v11.stderr
        );
        let calls = proxy.calls();
        let stream_call = calls
            .iter()
            .find(|(w, _)| w == "SendStreamingMessage" || w.ends_with("/message:stream"))
            .unwrap_or_else(|| panic!("[{b}] no stream call: {calls:?}"));
        assert_eq!(stream_call.1, "1.1", "[{b}] {calls:?}");

        // `--a2a-version 1.0` keeps 1.0 on every call, card or not.
        let pinned = send_stream(&env, &agent, b, &["--a2a-version", "1.0"]);
        assert!(!pinned.jsonl().iter().any(has_generation), "[{b}]");
        let calls = proxy.calls();
        assert!(calls.iter().all(|(_, v)| v == "1.0"), "[{b}] {calls:?}");

        // The proxy breaks a stream: one artifact chunk dropped. With a 1.0
        // card the command cannot tell, and assembles a wrong artifact.
        proxy.declare_1_1.store(false, Ordering::SeqCst);
        let before = proxy.dropped.load(Ordering::SeqCst);
        proxy.armed.store(true, Ordering::SeqCst);
        let broken = send_stream(&env, &agent, b, &[]);
        assert_eq!(proxy.dropped.load(Ordering::SeqCst), before + 1, "[{b}]");
        assert_eq!(
            texts(assembled(&broken.jsonl())),
            BTreeMap::from([(String::new(), "alpha bravo delta".to_owned())]),
            "[{b}] {}",
            broken.stdout
        );
        proxy.calls();

        // (b) With a 1.1 card the gap is seen and healed: the task is read
        // again, printed as a task event, and the artifact is complete.
        proxy.declare_1_1.store(true, Ordering::SeqCst);
        proxy.armed.store(true, Ordering::SeqCst);
        let healed = send_stream(&env, &agent, b, &[]);
        assert_eq!(proxy.dropped.load(Ordering::SeqCst), before + 2, "[{b}]");
        let lines = healed.jsonl();
        assert_eq!(texts(assembled(&lines)), whole(), "[{b}] {}", healed.stdout);
        assert_eq!(final_state(&lines), "TASK_STATE_COMPLETED", "[{b}]");
        let gap_lines: Vec<&str> = healed
            .stderr
            .lines()
            .filter(|l| l.contains("lost on the way"))
            .collect();
        assert_eq!(gap_lines.len(), 1, "[{b}] {}", healed.stderr);
        assert!(
            gap_lines[0].starts_with("warning: task ") && gap_lines[0].contains("healed"),
            "[{b}] {}",
            gap_lines[0]
        );
        let calls = proxy.calls();
        assert!(
            calls.iter().any(|(w, v)| (w == "GetTask"
                || (w.starts_with("GET /tasks/") && !w.ends_with(":subscribe")))
                && v == "1.1"),
            "[{b}] the task was read again: {calls:?}"
        );

        // The same in text: the warning, and the task read again printed.
        proxy.armed.store(true, Ordering::SeqCst);
        let out = env.run(&[
            "send",
            "-a",
            &agent,
            "--transport",
            b,
            "--no-cache",
            "--no-ledger",
            "--stream",
            "--timeout",
            "60s",
            TEXT,
        ]);
        out.expect(0);
        assert_eq!(proxy.dropped.load(Ordering::SeqCst), before + 3, "[{b}]");
        assert!(
            out.stderr.contains("lost on the way"),
            "[{b}] {}",
            out.stderr
        );
        assert!(out.stdout.contains("Event: task"), "[{b}] {}", out.stdout);
        assert!(out.stdout.contains("charlie"), "[{b}] {}", out.stdout);
        proxy.calls();

        // `a2a task subscribe --stream`: a status event of a long job
        // dropped (the subscription starts at its first step, the third is
        // dropped), healed the same way.
        let id = start_slow(&env, &agent, b, "slow 4");
        proxy.set_marker(b"step 3 of 4");
        proxy.armed.store(true, Ordering::SeqCst);
        let out = subscribe(&env, &agent, b, &id);
        proxy.set_marker(MARKER);
        assert_eq!(proxy.dropped.load(Ordering::SeqCst), before + 4, "[{b}]");
        let lines = out.jsonl();
        assert!(lines.iter().all(has_generation), "[{b}] {}", out.stdout);
        assert_eq!(final_state(&lines), "TASK_STATE_COMPLETED", "[{b}]");
        assert_eq!(
            texts(assembled(&lines)).into_values().collect::<Vec<_>>(),
            vec!["done after 4 s in 4 steps: slow 4".to_owned()],
            "[{b}] {}",
            out.stdout
        );
        assert_eq!(
            out.stderr.matches("lost on the way").count(),
            1,
            "[{b}] {}",
            out.stderr
        );
        let calls = proxy.calls();
        let sub = calls
            .iter()
            .find(|(w, _)| w == "SubscribeToTask" || w.ends_with(":subscribe"))
            .unwrap_or_else(|| panic!("[{b}] no subscription: {calls:?}"));
        assert_eq!(sub.1, "1.1", "[{b}] {calls:?}");
    }
    drop(server);
}

#[test]
fn send_stream_with_generations_over_grpc() {
    agentwire_client::install_crypto_provider();
    let env = Env::new();
    let server = Serving::start(&env, &["--agent", "echo"]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let card: Value = rt
        .block_on(async {
            reqwest::get(server.card_url())
                .await
                .expect("the card")
                .json()
                .await
        })
        .expect("a JSON card");
    let mut declared = card.clone();
    let twins: Vec<Value> = card["supportedInterfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .map(|i| {
            let mut t = i.clone();
            t["protocolVersion"] = "1.1".into();
            t
        })
        .collect();
    declared["supportedInterfaces"]
        .as_array_mut()
        .expect("interfaces")
        .extend(twins);
    let file = env.home().join("card-1.1.json");
    std::fs::write(&file, declared.to_string()).expect("write the card");
    let file = file.to_str().expect("UTF-8");

    // (c) The agent's own card (1.0): no generation.
    let plain = send_stream(&env, &server.addr(), "GRPC", &[]);
    let lines = plain.jsonl();
    assert!(!lines.iter().any(has_generation), "{}", plain.stdout);
    assert_eq!(texts(assembled(&lines)), whole());
    // (a) A card declaring 1.1: generations, the same events.
    let v11 = send_stream(&env, file, "GRPC", &["--verbose"]);
    let lines11 = v11.jsonl();
    assert!(lines11.iter().all(has_generation), "{}", v11.stdout);
    assert_eq!(
        lines11.iter().map(summary).collect::<Vec<_>>(),
        lines.iter().map(summary).collect::<Vec<_>>()
    );
    assert_eq!(texts(assembled(&lines11)), whole());
    assert!(
        v11.stderr.contains("note: the agent declares A2A 1.1"),
        "{}",
        v11.stderr
    );
    // `--a2a-version 1.0` wins over the card.
    let pinned = send_stream(&env, file, "GRPC", &["--a2a-version", "1.0"]);
    assert!(!pinned.jsonl().iter().any(has_generation));

    // `a2a task subscribe --stream` on a running task: generations with
    // the 1.1 card only.
    for (card, generation) in [(file.to_owned(), true), (server.addr(), false)] {
        let id = start_slow(&env, &server.addr(), "GRPC", "slow 2");
        let out = subscribe(&env, &card, "GRPC", &id);
        let lines = out.jsonl();
        assert_eq!(
            final_state(&lines),
            "TASK_STATE_COMPLETED",
            "{}",
            out.stdout
        );
        assert!(lines.len() > 2, "{}", out.stdout);
        assert_eq!(
            lines.iter().all(has_generation),
            generation,
            "{}",
            out.stdout
        );
        assert_eq!(lines.iter().any(has_generation), generation);
    }
    drop(server);
}

/// A gRPC proxy (HTTP/2 without TLS) to one agent: each call forwarded
/// on a tonic channel, the frames of the answer passed on as they come,
/// trailers included, except, when armed, the one message of a stream that
/// carries the marker.
struct GrpcProxy {
    channel: tonic::transport::Channel,
    marker: &'static [u8],
    armed: AtomicBool,
    dropped: AtomicUsize,
}

type Frame = http_body::Frame<bytes::Bytes>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn grpc_forward(State(p): State<Arc<GrpcProxy>>, req: Request) -> Response {
    use http_body_util::BodyExt;
    use tonic::codegen::Service;
    let (parts, body) = req.into_parts();
    let req = http::Request::from_parts(parts, tonic::body::Body::new(body));
    let mut channel = p.channel.clone();
    let ready = futures::future::poll_fn(|cx| channel.poll_ready(cx)).await;
    let res = match ready.map(|()| channel.call(req)) {
        Ok(call) => call.await,
        Err(e) => Err(e),
    };
    let res = match res {
        Ok(r) => r,
        Err(e) => {
            return Response::builder()
                .status(502)
                .body(Body::from(e.to_string()))
                .expect("a response");
        }
    };
    let (parts, body) = res.into_parts();
    // State: the answer's body, the bytes of an unfinished message, the
    // trailers once read, whether the body ended.
    let frames = futures::stream::unfold(
        (body, Vec::<u8>::new(), None::<Frame>, false),
        move |(mut body, mut buf, mut trailers, mut ended)| {
            let p = Arc::clone(&p);
            async move {
                loop {
                    // A whole message: a flag byte, a 4-byte length, the bytes.
                    if buf.len() >= 5 {
                        let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
                        if buf.len() >= 5 + len {
                            let msg: Vec<u8> = buf.drain(..5 + len).collect();
                            if msg.windows(p.marker.len()).any(|w| w == p.marker)
                                && p.armed.swap(false, Ordering::SeqCst)
                            {
                                p.dropped.fetch_add(1, Ordering::SeqCst);
                                continue;
                            }
                            let f = Frame::data(bytes::Bytes::from(msg));
                            return Some((Ok::<_, BoxError>(f), (body, buf, trailers, ended)));
                        }
                    }
                    if ended {
                        let t = trailers.take()?;
                        return Some((Ok(t), (body, buf, None, true)));
                    }
                    match body.frame().await {
                        Some(Ok(f)) if f.is_data() => {
                            if let Ok(d) = f.into_data() {
                                buf.extend_from_slice(&d);
                            }
                        }
                        Some(Ok(f)) => {
                            trailers = Some(f);
                            ended = true;
                        }
                        Some(Err(e)) => return Some((Err(e.into()), (body, buf, None, true))),
                        None => ended = true,
                    }
                }
            }
        },
    );
    Response::from_parts(parts, Body::new(http_body_util::StreamBody::new(frames)))
}

#[test]
fn a_gap_is_healed_over_grpc() {
    agentwire_client::install_crypto_provider();
    let env = Env::new();
    let server = Serving::start(&env, &["--agent", "echo"]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind the proxy");
    let proxy_addr = listener.local_addr().expect("the proxy's address");
    let channel = rt
        .block_on(
            tonic::transport::Endpoint::from_shared(server.base())
                .expect("an endpoint")
                .connect(),
        )
        .expect("connect to the agent");
    let proxy = Arc::new(GrpcProxy {
        channel,
        // The chunk `charlie ` as protobuf writes it (its length first);
        // the message in the task's history has `bravo ` before it.
        marker: b"\x08charlie ",
        armed: AtomicBool::new(false),
        dropped: AtomicUsize::new(0),
    });
    let app = axum::Router::new()
        .fallback(grpc_forward)
        .with_state(Arc::clone(&proxy));
    rt.spawn(async move { axum::serve(listener, app).await });

    // The agent's card, its gRPC interface moved to the proxy; and the
    // same declaring 1.1 too.
    let card: Value = rt
        .block_on(async {
            reqwest::get(server.card_url())
                .await
                .expect("the card")
                .json()
                .await
        })
        .expect("a JSON card");
    let mut plain = card.clone();
    let ifaces = plain["supportedInterfaces"]
        .as_array_mut()
        .expect("interfaces");
    ifaces.retain(|i| i["protocolBinding"] == "GRPC");
    assert_eq!(ifaces.len(), 1, "{card}");
    ifaces[0]["url"] = proxy_addr.to_string().into();
    let mut declared = plain.clone();
    let mut twin = declared["supportedInterfaces"][0].clone();
    twin["protocolVersion"] = "1.1".into();
    declared["supportedInterfaces"]
        .as_array_mut()
        .expect("interfaces")
        .push(twin);
    let write = |name: &str, card: &Value| {
        let f = env.home().join(name);
        std::fs::write(&f, card.to_string()).expect("write the card");
        f.to_str().expect("UTF-8").to_owned()
    };
    let plain = write("card-grpc-1.0.json", &plain);
    let declared = write("card-grpc-1.1.json", &declared);

    // Through the proxy, nothing dropped: the whole echo.
    let out = send_stream(&env, &plain, "GRPC", &[]);
    assert_eq!(texts(assembled(&out.jsonl())), whole(), "{}", out.stdout);

    // One chunk dropped, a 1.0 card: a wrong artifact (the proxy does
    // break the stream).
    proxy.armed.store(true, Ordering::SeqCst);
    let broken = send_stream(&env, &plain, "GRPC", &[]);
    assert_eq!(proxy.dropped.load(Ordering::SeqCst), 1);
    assert_eq!(
        texts(assembled(&broken.jsonl())),
        BTreeMap::from([(String::new(), "alpha bravo delta".to_owned())]),
        "{}",
        broken.stdout
    );

    // The same with a 1.1 card: healed, the artifact complete, told once.
    proxy.armed.store(true, Ordering::SeqCst);
    let healed = send_stream(&env, &declared, "GRPC", &[]);
    assert_eq!(proxy.dropped.load(Ordering::SeqCst), 2);
    let lines = healed.jsonl();
    assert_eq!(texts(assembled(&lines)), whole(), "{}", healed.stdout);
    assert_eq!(final_state(&lines), "TASK_STATE_COMPLETED");
    assert_eq!(
        healed.stderr.matches("lost on the way").count(),
        1,
        "{}",
        healed.stderr
    );
    drop(server);
}
