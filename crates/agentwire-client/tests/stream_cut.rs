//! Streams cut on the wire, on every binding: a TCP proxy between the
//! client and a real server closes the connection in the middle of an
//! event; `follow` reconnects with the id of the last event received
//! (`Last-Event-ID`, or the gRPC metadata key) and must yield exactly the
//! events of an uninterrupted run: the same kinds, states and artifact
//! chunks, in order, none twice, none missing, with consecutive event ids.
//! When the server no longer holds the events missed, the stream goes on
//! from a snapshot of the task, and `follow` says so.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentwire_client::follow::{FollowOptions, Reconnected, TaskView, follow};
use agentwire_client::{
    Binding, CallOptions, EventStream, GrpcTransport, JsonRpcTransport, RestTransport, Transport,
};
use agentwire_server::{
    A2aResult, A2aServer, AgentExecutor, HandlerConfig, RequestContext, ServerHandle, TaskUpdater,
};
use agentwire_types::{
    AgentCard, Artifact, ListTasksRequest, Message, SendMessageRequest, StreamResponse, TaskState,
    stream_response,
};
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Bound on every run.
const LIMIT: Duration = Duration::from_secs(30);

/// Chunks the agent streams.
const CHUNKS: usize = 8;

/// Streams a status, then `CHUNKS` artifact chunks `piece-01 `... with a
/// progress status between them and small pauses, then completes.
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

fn card() -> AgentCard {
    AgentCard::new("Chunky", "Streams a story in pieces", "1.0.0").with_streaming(true)
}

async fn server(config: HandlerConfig) -> ServerHandle {
    A2aServer::new(card(), Chunky)
        .config(config)
        .bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0")
        .spawn()
}

/// A TCP proxy to `upstream` that cuts the first connection on which the
/// server sends `marker`: the bytes before the marker reach the client,
/// then both sides are closed (the event holding the marker arrives
/// truncated). Later connections pass through untouched, once the gate is
/// open.
struct Proxy {
    addr: SocketAddr,
    cuts: Arc<AtomicUsize>,
    connections: Arc<AtomicUsize>,
    gate: tokio::sync::watch::Sender<bool>,
}

impl Proxy {
    /// A proxy whose connections after the cut wait for [`Proxy::open`]
    /// when `gated`.
    async fn start(upstream: SocketAddr, marker: &'static [u8], gated: bool) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        let cuts = Arc::new(AtomicUsize::new(0));
        let connections = Arc::new(AtomicUsize::new(0));
        let (gate, opened) = tokio::sync::watch::channel(!gated);
        let (c, n) = (Arc::clone(&cuts), Arc::clone(&connections));
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                n.fetch_add(1, Ordering::SeqCst);
                let cuts = Arc::clone(&c);
                let mut opened = opened.clone();
                tokio::spawn(async move {
                    if cuts.load(Ordering::SeqCst) > 0 {
                        let _ = opened.wait_for(|open| *open).await;
                    }
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        pipe(client, server, marker, cuts).await;
                    }
                });
            }
        });
        Self {
            addr,
            cuts,
            connections,
            gate,
        }
    }

    /// Lets the connections after the cut through.
    fn open(&self) {
        let _ = self.gate.send(true);
    }

    fn cuts(&self) -> usize {
        self.cuts.load(Ordering::SeqCst)
    }
}

/// Copies both ways; cuts the connection before the marker while no cut
/// was made yet.
async fn pipe(client: TcpStream, server: TcpStream, marker: &[u8], cuts: Arc<AtomicUsize>) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_rd, mut client_wr) = client.into_split();
    let (mut server_rd, mut server_wr) = server.into_split();
    let upstream = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut client_rd, &mut server_wr).await;
        let _ = server_wr.shutdown().await;
    });
    let mut buf = vec![0u8; 16 * 1024];
    // The last bytes sent, so that a marker split between reads is found.
    let mut tail: Vec<u8> = Vec::new();
    loop {
        let n = match server_rd.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        if cuts.load(Ordering::SeqCst) == 0 {
            let mut window = tail.clone();
            window.extend_from_slice(chunk);
            if let Some(at) = window.windows(marker.len()).position(|w| w == marker) {
                // Send what precedes the marker, then close both sides.
                let before = at.saturating_sub(tail.len());
                if cuts.fetch_add(1, Ordering::SeqCst) == 0 {
                    let _ = client_wr.write_all(&chunk[..before]).await;
                    let _ = client_wr.flush().await;
                    let _ = client_wr.shutdown().await;
                    upstream.abort();
                    return;
                }
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

/// A transport of binding `b` to the server (or proxy) at `addr`.
fn transport(b: Binding, addr: SocketAddr) -> Arc<dyn Transport> {
    match b {
        Binding::JsonRpc => {
            Arc::new(JsonRpcTransport::new(format!("http://{addr}/")).expect("JSON-RPC transport"))
        }
        Binding::HttpJson => {
            Arc::new(RestTransport::new(format!("http://{addr}")).expect("HTTP+JSON transport"))
        }
        Binding::Grpc => Arc::new(GrpcTransport::new(addr.to_string()).expect("gRPC transport")),
    }
}

fn request() -> SendMessageRequest {
    SendMessageRequest {
        message: Some(Message::user_text("tell the story")),
        ..Default::default()
    }
}

/// What a run yields: the events, the event id after each, and the
/// reconnections reported.
struct Run {
    events: Vec<StreamResponse>,
    ids: Vec<Option<String>>,
    reconnections: Vec<Reconnected>,
}

/// Streams the request over `t` and follows it to the end.
async fn run(b: Binding, t: Arc<dyn Transport>) -> Run {
    let reconnections = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&reconnections);
    let opts = FollowOptions {
        backoff: Duration::from_millis(50),
        call: CallOptions::new().with_timeout(LIMIT),
        on_reconnect: Some(Arc::new(move |r: &Reconnected| {
            seen.lock().expect("reconnections").push(r.clone());
        })),
        ..Default::default()
    };
    let work = async {
        let first = t
            .send_streaming_message(request(), &opts.call)
            .await
            .unwrap_or_else(|e| panic!("[{b}] open the stream: {e}"));
        let mut events: EventStream = follow(Arc::clone(&t), Some(first), None, opts);
        let mut out = Vec::new();
        let mut ids = Vec::new();
        while let Some(ev) = events.next().await {
            out.push(ev.unwrap_or_else(|e| panic!("[{b}] stream error: {e}")));
            ids.push(events.last_event_id());
        }
        (out, ids)
    };
    let (events, ids) = tokio::time::timeout(LIMIT, work)
        .await
        .unwrap_or_else(|_| panic!("[{b}] the run did not end within {LIMIT:?}"));
    let reconnections = reconnections.lock().expect("reconnections").clone();
    Run {
        events,
        ids,
        reconnections,
    }
}

/// An event without what differs between two runs (ids, timestamps).
fn summary(e: &StreamResponse) -> String {
    match &e.payload {
        Some(stream_response::Payload::Task(t)) => format!("task {:?}", t.state()),
        Some(stream_response::Payload::Message(m)) => format!("message {}", m.text()),
        Some(stream_response::Payload::StatusUpdate(s)) => {
            let status = s.status.as_ref();
            let text = status
                .and_then(|s| s.message.as_ref())
                .map(|m| m.text())
                .unwrap_or_default();
            format!("status {:?} {text}", e.state().unwrap_or_default())
        }
        Some(stream_response::Payload::ArtifactUpdate(a)) => {
            let artifact = a.artifact.as_ref();
            format!(
                "artifact {} {:?} append={} last={}",
                artifact.map(|a| a.name.as_str()).unwrap_or_default(),
                artifact.map(Artifact::text_content).unwrap_or_default(),
                a.append,
                a.last_chunk
            )
        }
        None => "empty".into(),
    }
}

fn summaries(events: &[StreamResponse]) -> Vec<String> {
    events.iter().map(summary).collect()
}

/// The position of an event id `<log>-<position>` of this server.
fn position(b: Binding, id: &Option<String>) -> (String, u64) {
    let id = id
        .as_deref()
        .unwrap_or_else(|| panic!("[{b}] an event without id"));
    let (log, pos) = id
        .rsplit_once('-')
        .unwrap_or_else(|| panic!("[{b}] id {id:?}"));
    (
        log.to_owned(),
        pos.parse()
            .unwrap_or_else(|_| panic!("[{b}] id {id:?} has no position")),
    )
}

/// Every event has an id, all in one log, each one after the other.
fn assert_consecutive(b: Binding, ids: &[Option<String>]) {
    let positions: Vec<_> = ids.iter().map(|id| position(b, id)).collect();
    for pair in positions.windows(2) {
        assert_eq!(pair[0].0, pair[1].0, "[{b}] one log: {ids:?}");
        assert_eq!(pair[0].1 + 1, pair[1].1, "[{b}] consecutive ids: {ids:?}");
    }
}

fn story(events: &[StreamResponse]) -> (TaskState, String) {
    let mut view = TaskView::new();
    for e in events {
        view.apply(e);
    }
    let task = view.task().expect("a task");
    let text = task
        .artifacts
        .iter()
        .find(|a| a.name == "story")
        .map(Artifact::text_content)
        .unwrap_or_default();
    (task.state(), text)
}

fn whole_story() -> String {
    (1..=CHUNKS).map(|i| format!("piece-{i:02} ")).collect()
}

async fn a_cut_stream_resumes_where_it_was_cut(b: Binding) {
    let server = server(HandlerConfig::default()).await;
    let reference = run(b, transport(b, server.local_addr())).await;
    assert!(reference.reconnections.is_empty(), "[{b}]");
    assert_consecutive(b, &reference.ids);
    assert_eq!(
        story(&reference.events),
        (TaskState::Completed, whole_story()),
        "[{b}]"
    );

    // The connection is closed in the middle of the fourth chunk.
    let proxy = Proxy::start(server.local_addr(), b"piece-04", false).await;
    let cut = run(b, transport(b, proxy.addr)).await;
    assert_eq!(proxy.cuts(), 1, "[{b}] the proxy cut the stream");
    assert!(
        proxy.connections.load(Ordering::SeqCst) >= 2,
        "[{b}] the client reconnected"
    );
    assert_eq!(
        summaries(&cut.events),
        summaries(&reference.events),
        "[{b}] the events of the cut run are those of the uninterrupted one"
    );
    assert_consecutive(b, &cut.ids);
    assert!(
        matches!(cut.reconnections.as_slice(), [Reconnected::Resumed { .. }]),
        "[{b}] {:?}",
        cut.reconnections
    );
    if let [Reconnected::Resumed { last_event_id }] = cut.reconnections.as_slice() {
        // The stream was resumed after the last event received before the
        // cut: the next one is the chunk whose bytes were cut.
        let at = cut
            .ids
            .iter()
            .position(|id| id.as_deref() == Some(last_event_id.as_str()))
            .unwrap_or_else(|| panic!("[{b}] {last_event_id} is among the ids"));
        let next = cut.events.get(at + 1).map(summary).unwrap_or_default();
        assert!(next.contains("piece-04"), "[{b}] {next}");
    }
    assert_eq!(
        story(&cut.events),
        (TaskState::Completed, whole_story()),
        "[{b}]"
    );
}

async fn events_no_longer_held_give_a_snapshot(b: Binding) {
    // The server keeps only the last two events of a task, and the client
    // reconnects once the task has ended: the events it missed are gone.
    let server = server(HandlerConfig {
        resume_events: 2,
        ..Default::default()
    })
    .await;
    let proxy = Proxy::start(server.local_addr(), b"piece-02", true).await;
    let t = transport(b, proxy.addr);
    let reconnections = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&reconnections);
    let opts = FollowOptions {
        backoff: Duration::from_millis(50),
        call: CallOptions::new().with_timeout(LIMIT),
        on_reconnect: Some(Arc::new(move |r: &Reconnected| {
            seen.lock().expect("reconnections").push(r.clone());
        })),
        ..Default::default()
    };
    let first = t
        .send_streaming_message(request(), &opts.call)
        .await
        .unwrap_or_else(|e| panic!("[{b}] open the stream: {e}"));
    let following =
        tokio::spawn(follow(Arc::clone(&t), Some(first), None, opts).collect::<Vec<_>>());
    // Wait for the end of the task, read directly from the server.
    let direct = transport(b, server.local_addr());
    tokio::time::timeout(LIMIT, async {
        loop {
            let list = direct
                .list_tasks(ListTasksRequest::default(), &CallOptions::new())
                .await
                .unwrap_or_else(|e| panic!("[{b}] list: {e}"));
            if list.tasks.iter().any(|t| t.state().is_terminal()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("[{b}] the task did not end within {LIMIT:?}"));
    assert_eq!(proxy.cuts(), 1, "[{b}]");
    proxy.open();
    let events: Vec<StreamResponse> = tokio::time::timeout(LIMIT, following)
        .await
        .unwrap_or_else(|_| panic!("[{b}] the run did not end within {LIMIT:?}"))
        .expect("follow ran")
        .into_iter()
        .map(|e| e.unwrap_or_else(|e| panic!("[{b}] stream error: {e}")))
        .collect();
    let reconnections = reconnections.lock().expect("reconnections").clone();
    assert!(
        matches!(
            reconnections.as_slice(),
            [Reconnected::Snapshot {
                last_event_id: Some(_)
            }]
        ),
        "[{b}] {reconnections:?}"
    );
    // The snapshot, the completed task, is the last event, and the story
    // is whole all the same.
    let tasks = events
        .iter()
        .filter(|e| matches!(e.payload, Some(stream_response::Payload::Task(_))))
        .count();
    assert_eq!(tasks, 2, "[{b}] {:?}", summaries(&events));
    assert!(
        matches!(
            events.last().map(|e| &e.payload),
            Some(Some(stream_response::Payload::Task(_)))
        ),
        "[{b}] {:?}",
        summaries(&events)
    );
    assert_eq!(
        story(&events),
        (TaskState::Completed, whole_story()),
        "[{b}]"
    );
}

macro_rules! over_all_bindings {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                use super::*;

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn jsonrpc() {
                    super::$name(Binding::JsonRpc).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn http_json() {
                    super::$name(Binding::HttpJson).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn grpc() {
                    super::$name(Binding::Grpc).await;
                }
            }
        )*
    };
}

over_all_bindings!(
    a_cut_stream_resumes_where_it_was_cut,
    events_no_longer_held_give_a_snapshot,
);
