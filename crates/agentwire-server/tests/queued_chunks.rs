//! Artifact chunks queued to SQLite without waiting for each commit
//! (`manager/queued.rs`): each chunk's event is published once it is
//! committed, in order; a subscriber that joins meanwhile gets every chunk
//! once (in its snapshot or as an event, never both, never neither); and
//! chunks the database refuses (here: full) are written again, in order,
//! before the task goes on, so the stream and the stored task hold every
//! chunk once, in order.
//!
//! Every wait is bounded ([`WAIT`]).

#[allow(unused_macros)]
mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentwire_server::store::{SqliteStore, StoreRetry, TaskStore};
use agentwire_server::types::stream_response::Payload;
use agentwire_server::types::{
    A2aResult, AgentCard, Artifact, Message, Part, SendMessageRequest, StreamResponse,
    SubscribeToTaskRequest, Task, TaskState,
};
use agentwire_server::types::{TaskArtifactUpdateEvent, TaskStatusUpdateEvent};
use agentwire_server::{
    AgentExecutor, CallContext, HandlerConfig, RequestContext, RequestHandler, TaskUpdater,
};
use common::{remove_db, temp_db};
use futures::StreamExt;
use tokio::sync::mpsc;

fn as_task(ev: &StreamResponse) -> Option<&Task> {
    match ev.payload.as_ref()? {
        Payload::Task(t) => Some(t),
        _ => None,
    }
}

fn as_artifact(ev: &StreamResponse) -> Option<&TaskArtifactUpdateEvent> {
    match ev.payload.as_ref()? {
        Payload::ArtifactUpdate(a) => Some(a),
        _ => None,
    }
}

fn as_status(ev: &StreamResponse) -> Option<&TaskStatusUpdateEvent> {
    match ev.payload.as_ref()? {
        Payload::StatusUpdate(s) => Some(s),
        _ => None,
    }
}

const WAIT: Duration = Duration::from_secs(20);

/// How many chunks are queued after the refused one while the database is
/// full.
const AFTER: usize = 6;

/// The text of chunk `i` (`size` bytes, its number first): every chunk
/// differs, so a chunk repeated, lost or out of place shows in the whole.
fn chunk_text(i: usize, size: usize) -> String {
    let head = format!("[{i:04}]");
    let fill = char::from(b'a' + (i % 26) as u8);
    let mut s = head;
    while s.len() < size {
        s.push(fill);
    }
    s
}

fn whole(n: usize, size: usize) -> String {
    (0..n).map(|i| chunk_text(i, size)).collect()
}

/// The size of chunk `i` when chunk `big` is larger than a page (the
/// others are `size`).
fn size_of(i: usize, size: usize, big: Option<usize>) -> usize {
    if big == Some(i) { BIG } else { size }
}

/// A chunk larger than a page: a full database cannot take it.
const BIG: usize = 16 * 1024;

/// Streams `n` chunks of `size` bytes of artifact "out", then completes.
/// With `full_after: Some(k)`, after queuing `k` chunks it holds the
/// writer and has it make the database full (its writer's
/// `max_page_count`), queues chunk `k`, larger than a page, and [`AFTER`]
/// small ones behind that, checks that the database was full when they
/// were written (a write of its own behind them fails, reported on
/// `probe`), lets the database grow again after a pause, and goes on.
struct Chunker {
    n: usize,
    size: usize,
    full_after: Option<usize>,
    store: SqliteStore,
    probe: mpsc::UnboundedSender<bool>,
}

impl AgentExecutor for Chunker {
    async fn execute(&self, _ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.start_work().await?;
        for i in 0..self.n {
            if self.full_after == Some(i) {
                self.hold_writer_then_fill().await;
            }
            let size = size_of(i, self.size, self.full_after);
            let chunk = Artifact::text("out", chunk_text(i, size)).with_id("out");
            task.artifact_chunk(chunk, i > 0, i + 1 == self.n).await?;
            if self.full_after.is_some_and(|k| i == k + AFTER) {
                self.probe_then_grow();
            }
            if i % 16 == 15 {
                tokio::task::yield_now().await;
            }
        }
        task.complete().await
    }
}

impl Chunker {
    /// Holds the writer in a job of its own (which then makes the
    /// database full) until the chunks that follow are all queued behind
    /// it: none of them is answered before they all are queued, whatever
    /// the machine's timing.
    async fn hold_writer_then_fill(&self) {
        let inside = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&inside);
        let store = self.store.clone();
        tokio::spawn(async move {
            store
                .with_writer(move |c| {
                    flag.store(true, std::sync::atomic::Ordering::Release);
                    std::thread::sleep(Duration::from_millis(200));
                    let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
                    c.pragma_update_and_check(None, "max_page_count", pages, |r| r.get::<_, i64>(0))
                })
                .await
        });
        let deadline = tokio::time::Instant::now() + WAIT;
        while !inside.load(std::sync::atomic::Ordering::Acquire) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the writer runs the job"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// In a task of its own (the agent's next chunk may wait for the
    /// refused ones to be written again): a write behind the chunks queued
    /// while the database was full, which must fail (they were refused),
    /// reported on `probe`; then the database may grow again.
    fn probe_then_grow(&self) {
        let store = self.store.clone();
        let probe = self.probe.clone();
        tokio::spawn(async move {
            let refused = store
                .with_writer(|c| {
                    c.execute_batch(
                        "CREATE TABLE probe_full(x BLOB); \
                         INSERT INTO probe_full VALUES (zeroblob(262144));",
                    )
                })
                .await
                .is_err();
            let _ = probe.send(refused);
            tokio::time::sleep(Duration::from_millis(300)).await;
            store
                .with_writer(|c| {
                    c.pragma_update_and_check(None, "max_page_count", 1_073_741_823i64, |r| {
                        r.get::<_, i64>(0)
                    })
                })
                .await
                .expect("let the database grow");
        });
    }
}

async fn handler(
    n: usize,
    size: usize,
    full_after: Option<usize>,
) -> (
    RequestHandler,
    SqliteStore,
    PathBuf,
    mpsc::UnboundedReceiver<bool>,
) {
    let path = temp_db("a2a-queued-chunks");
    let store = SqliteStore::open(&path).await.expect("open the store");
    assert!(store.queued().is_some(), "SQLite takes queued chunks");
    let (probe, probed) = mpsc::unbounded_channel();
    let agent = Chunker {
        n,
        size,
        full_after,
        store: store.clone(),
        probe,
    };
    let config = HandlerConfig {
        store_retry: StoreRetry {
            budget: Duration::from_secs(15),
            first_pause: Duration::from_millis(20),
            max_pause: Duration::from_millis(100),
        },
        ..HandlerConfig::default()
    };
    let h = RequestHandler::builder(AgentCard::default().with_streaming(true), agent)
        .store(Arc::new(store.clone()))
        .config(config)
        .build();
    (h, store, path, probed)
}

fn send() -> SendMessageRequest {
    SendMessageRequest {
        message: Some(Message::user_text("go")),
        ..Default::default()
    }
}

/// The text of the artifact "out" of a task.
fn artifact_text(task: &Task) -> String {
    task.artifacts
        .iter()
        .filter(|a| a.artifact_id == "out")
        .flat_map(|a| a.parts.iter())
        .filter_map(Part::as_text)
        .collect()
}

/// The text a chunk event adds (checking it is a chunk of "out": the
/// first replaces, the others append).
fn chunk_of(ev: &StreamResponse, first: bool) -> Option<String> {
    let a = as_artifact(ev)?;
    assert_eq!(a.append, !first, "append on every chunk but the first");
    let artifact = a.artifact.as_ref().expect("an artifact");
    assert_eq!(artifact.artifact_id, "out");
    Some(artifact.parts.iter().filter_map(Part::as_text).collect())
}

/// What the events of a stream make of the artifact, and the last state.
fn replay(events: &[StreamResponse], mut text: String) -> (String, Option<TaskState>) {
    let mut last = None;
    let mut first = text.is_empty();
    for ev in events {
        if let Some(chunk) = chunk_of(ev, first) {
            text.push_str(&chunk);
            first = false;
        }
        if let Some(s) = as_status(ev) {
            last = Some(s.status.as_ref().expect("a status").state());
        }
    }
    (text, last)
}

async fn collect(stream: agentwire_server::EventStream) -> Vec<StreamResponse> {
    tokio::time::timeout(WAIT, stream.collect::<Vec<_>>())
        .await
        .expect("the stream ends")
        .into_iter()
        .map(|ev| ev.expect("no error on the stream"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_artifact_arrives_whole_and_in_order() {
    let (n, size) = (300, 64);
    let (h, store, path, _) = handler(n, size, None).await;
    let ctx = CallContext::v1();
    let stream = h.send_streaming_message(&ctx, send()).await.unwrap();
    let events = collect(stream).await;
    let task = as_task(&events[0]).expect("the task first").clone();
    let (text, last) = replay(&events, String::new());
    assert_eq!(text, whole(n, size), "the stream's chunks");
    assert_eq!(last, Some(TaskState::Completed));
    let stored = store.get(&task.id, None).await.unwrap().expect("stored");
    assert_eq!(
        artifact_text(&stored.task),
        whole(n, size),
        "the stored artifact"
    );
    store.close().await;
    remove_db(&path);
}

/// A subscriber that joins while chunks are in flight starts from a
/// snapshot that holds the chunks committed before it, and gets the others
/// as events: each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_joining_mid_stream_gets_each_chunk_once() {
    let (n, size) = (400, 32);
    let (h, store, path, _) = handler(n, size, None).await;
    let ctx = CallContext::v1();
    for round in 0..10 {
        let mut stream = h.send_streaming_message(&ctx, send()).await.unwrap();
        let first = tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("the task")
            .expect("an event")
            .expect("no error");
        let id = as_task(&first).expect("the task first").id.clone();
        // Join after a few events of the first stream (chunks in flight).
        for _ in 0..(2 + round * 7) {
            let _ = tokio::time::timeout(WAIT, stream.next()).await;
        }
        let sub = h
            .subscribe_to_task(
                &ctx,
                SubscribeToTaskRequest {
                    id: id.clone(),
                    ..Default::default()
                },
            )
            .await;
        let Ok(sub) = sub else {
            // The task ended before the subscription: nothing to check.
            continue;
        };
        let events = collect(sub).await;
        let snapshot = as_task(&events[0]).expect("the snapshot first");
        let (text, _) = replay(&events[1..], artifact_text(snapshot));
        assert_eq!(
            text,
            whole(n, size),
            "round {round}: the snapshot and the events after it"
        );
        drop(stream);
    }
    store.close().await;
    remove_db(&path);
}

/// Chunks refused by a full database are written again once it grows, in
/// order, before the task completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_refused_by_a_full_database_are_written_again_in_order() {
    let (n, size, k) = (40, 64, 10);
    let (h, store, path, mut probed) = handler(n, size, Some(k)).await;
    let ctx = CallContext::v1();
    let stream = h.send_streaming_message(&ctx, send()).await.unwrap();
    let events = collect(stream).await;
    assert_eq!(
        probed.recv().await,
        Some(true),
        "the database was full while the later chunks were queued"
    );
    let task = as_task(&events[0]).expect("the task first").clone();
    let (text, last) = replay(&events, String::new());
    assert_eq!(last, Some(TaskState::Completed), "the task completes");
    let expected: String = (0..n)
        .map(|i| chunk_text(i, size_of(i, size, Some(k))))
        .collect();
    assert_eq!(text, expected, "the stream's chunks, each once, in order");
    let stored = store.get(&task.id, None).await.unwrap().expect("stored");
    assert_eq!(stored.task.state(), TaskState::Completed);
    assert_eq!(artifact_text(&stored.task), expected, "the stored artifact");
    store.close().await;
    remove_db(&path);
}
