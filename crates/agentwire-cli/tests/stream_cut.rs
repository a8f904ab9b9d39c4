//! `a2a send --stream` through a TCP proxy that cuts the connection in the
//! middle of an event, on every binding: the command reconnects with the
//! id of the last event it received and prints every event of the task
//! once, exactly what an uninterrupted run prints.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentwire_server::{A2aResult, A2aServer, AgentExecutor, RequestContext, TaskUpdater};
use agentwire_types::{AgentCard, Artifact};
use common::{Env, Out};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const BINDINGS: [&str; 3] = ["JSONRPC", "HTTP+JSON", "GRPC"];

/// Chunks the agent streams.
const CHUNKS: usize = 8;

/// Streams `CHUNKS` artifact chunks `piece-01 `... with small pauses and a
/// progress status now and then, then completes.
struct Chunky;

impl AgentExecutor for Chunky {
    async fn execute(&self, _ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.start_work().await?;
        let id = agentwire_types::new_id();
        for i in 1..=CHUNKS {
            tokio::time::sleep(Duration::from_millis(25)).await;
            let chunk = Artifact::text("story", format!("piece-{i:02} ")).with_id(&id);
            task.artifact_chunk(chunk, i > 1, i == CHUNKS).await?;
            if i % 3 == 0 {
                task.progress(format!("{i} of {CHUNKS}")).await?;
            }
        }
        task.complete().await
    }
}

/// A TCP proxy that, once armed, cuts the next connection on which the
/// server sends the marker: the bytes before it reach the client, then
/// both sides are closed.
struct Proxy {
    addr: SocketAddr,
    armed: Arc<AtomicUsize>,
    cuts: Arc<AtomicUsize>,
}

impl Proxy {
    fn serve(listener: TcpListener, upstream: SocketAddr, marker: &'static [u8]) -> Self {
        let addr = listener.local_addr().expect("proxy address");
        let armed = Arc::new(AtomicUsize::new(0));
        let cuts = Arc::new(AtomicUsize::new(0));
        let (a, c) = (Arc::clone(&armed), Arc::clone(&cuts));
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    continue;
                };
                tokio::spawn(pipe(client, server, marker, Arc::clone(&a), Arc::clone(&c)));
            }
        });
        Self { addr, armed, cuts }
    }

    fn arm(&self) {
        self.armed.store(1, Ordering::SeqCst);
    }

    /// The connections cut so far.
    fn cuts(&self) -> usize {
        self.cuts.load(Ordering::SeqCst)
    }
}

async fn pipe(
    client: TcpStream,
    server: TcpStream,
    marker: &[u8],
    armed: Arc<AtomicUsize>,
    cuts: Arc<AtomicUsize>,
) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_rd, mut client_wr) = client.into_split();
    let (mut server_rd, mut server_wr) = server.into_split();
    let upstream = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut client_rd, &mut server_wr).await;
        let _ = server_wr.shutdown().await;
    });
    let mut buf = vec![0u8; 16 * 1024];
    let mut tail: Vec<u8> = Vec::new();
    loop {
        let n = match server_rd.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        if armed.load(Ordering::SeqCst) > 0 {
            let mut window = tail.clone();
            window.extend_from_slice(chunk);
            if let Some(at) = window.windows(marker.len()).position(|w| w == marker)
                && armed
                    .compare_exchange(1, 0, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            {
                cuts.fetch_add(1, Ordering::SeqCst);
                let before = at.saturating_sub(tail.len());
                let _ = client_wr.write_all(&chunk[..before]).await;
                let _ = client_wr.flush().await;
                let _ = client_wr.shutdown().await;
                upstream.abort();
                return;
            }
            let keep = window.len().min(marker.len());
            tail = window[window.len() - keep..].to_vec();
        }
        if client_wr.write_all(chunk).await.is_err() {
            break;
        }
    }
    let _ = client_wr.shutdown().await;
    upstream.abort();
}

/// Runs `a2a` off the async runtime (the agent is served on it).
async fn run(env: &Env, args: Vec<String>) -> Out {
    let cmd = env.cmd();
    tokio::task::spawn_blocking(move || {
        let mut cmd = cmd;
        let o = cmd.args(&args).output().expect("run a2a");
        Out {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    })
    .await
    .expect("joined")
}

fn texts(parts: &Value) -> String {
    parts
        .as_array()
        .map(|ps| ps.iter().filter_map(|p| p["text"].as_str()).collect())
        .unwrap_or_default()
}

/// A printed event without what differs between two runs (ids, times).
fn summary(line: &Value) -> String {
    if let Some(t) = line.get("task") {
        return format!("task {}", t["status"]["state"]);
    }
    if let Some(s) = line.get("statusUpdate") {
        return format!(
            "status {} {}",
            s["status"]["state"],
            texts(&s["status"]["message"]["parts"])
        );
    }
    if let Some(a) = line.get("artifactUpdate") {
        return format!(
            "artifact {} {:?} append={} last={}",
            a["artifact"]["name"],
            texts(&a["artifact"]["parts"]),
            a["append"].as_bool().unwrap_or(false),
            a["lastChunk"].as_bool().unwrap_or(false)
        );
    }
    format!("other {line}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_stream_survives_a_cut_connection() {
    // The proxy's port first: the card advertises it.
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the proxy");
    let proxy_addr = listener.local_addr().expect("proxy address");
    let card = AgentCard::new("Chunky", "Streams a story in pieces", "1.0.0").with_streaming(true);
    let server =
        common::serve(A2aServer::new(card, Chunky).public_url(format!("http://{proxy_addr}")))
            .await;
    let proxy = Proxy::serve(listener, server.local_addr(), b"piece-04");
    assert_eq!(proxy.addr, proxy_addr);
    let host = proxy_addr.to_string();
    let env = Env::new();
    let whole: String = (1..=CHUNKS).map(|i| format!("piece-{i:02} ")).collect();
    for (n, binding) in BINDINGS.into_iter().enumerate() {
        let args: Vec<String> = [
            "send",
            "-a",
            &host,
            "--transport",
            binding,
            "--stream",
            "-o",
            "json",
            "--timeout",
            "60s",
            "tell the story",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let reference = run(&env, args.clone()).await;
        reference.expect(0);
        assert_eq!(
            proxy.cuts(),
            n,
            "[{binding}] the reference run went through"
        );
        proxy.arm();
        let cut = run(&env, args).await;
        assert_eq!(proxy.cuts(), n + 1, "[{binding}] the proxy cut the stream");
        cut.expect(0);
        let expected: Vec<String> = reference.jsonl().iter().map(summary).collect();
        let got: Vec<String> = cut.jsonl().iter().map(summary).collect();
        assert_eq!(
            got, expected,
            "[{binding}] the cut run prints what the uninterrupted one does:\n{}",
            cut.stdout
        );
        let printed: String = cut
            .jsonl()
            .iter()
            .filter_map(|l| l.get("artifactUpdate"))
            .map(|a| texts(&a["artifact"]["parts"]))
            .collect();
        assert_eq!(printed, whole, "[{binding}] every chunk once");
        assert!(
            expected.last().is_some_and(|l| l.contains("COMPLETED")),
            "[{binding}] {expected:?}"
        );
    }
}
