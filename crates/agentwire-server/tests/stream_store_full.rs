//! A stream opened while the task store refuses writes (a full database:
//! SQLite's "database or disk is full", through `max_page_count`), with
//! the default retry budget (30 s): its caller gets the storage error
//! within a few seconds, as the store's creation of a task nobody has
//! been told about is not retried for the whole budget, on each binding
//! (SSE of JSON-RPC and HTTP+JSON, the gRPC stream). Once the store takes
//! writes again, streams work, and no task was left behind.

#[allow(unused_macros)]
#[macro_use]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire_client::Binding;
use agentwire_server::store::{SqliteStore, TaskStore};
use agentwire_server::{A2aServer, HandlerConfig};
use agentwire_types::{ErrorKind, Message};
use common::{client, remove_db, temp_db, within};
use futures::StreamExt;

/// How soon the caller must have its answer: "promptly", with room for a
/// loaded machine (the retry budget is 30 s).
const PROMPT: Duration = Duration::from_secs(10);

/// A message larger than the free room of the database's pages: its task
/// cannot be written without growing the file.
fn large_message() -> Message {
    Message::user_text("x".repeat(256 * 1024))
}

async fn a_stream_opened_on_a_full_store_gets_the_error_promptly(b: Binding) {
    let path = temp_db("a2a-stream-full");
    let store = SqliteStore::open(&path).await.expect("open the store");
    let server = common::start_server(
        A2aServer::new(common::agents::echo_card(), common::agents::Echo)
            .store(Arc::new(store.clone()))
            // The default budget (30 s): what a server runs with.
            .config(HandlerConfig::default()),
    )
    .await;
    let c = client(&server, b).await;
    // The database may not grow.
    store
        .with_writer(|c| {
            c.pragma_update_and_check(None, "max_page_count", 1, |r| r.get::<_, i64>(0))
        })
        .await
        .expect("limit the database's size");
    let started = Instant::now();
    let opened = tokio::time::timeout(PROMPT, c.stream(large_message()))
        .await
        .unwrap_or_else(|_| panic!("[{b}] no answer to the stream within {PROMPT:?}"));
    let error = match opened {
        Err(e) => e,
        Ok(mut events) => {
            let first =
                tokio::time::timeout(PROMPT.saturating_sub(started.elapsed()), events.next())
                    .await
                    .unwrap_or_else(|_| panic!("[{b}] the stream sent nothing within {PROMPT:?}"));
            match first {
                Some(Err(e)) => e,
                other => {
                    panic!("[{b}] the stream's first event is not the storage error: {other:?}")
                }
            }
        }
    };
    let waited = started.elapsed();
    let error = match error {
        agentwire_client::ClientError::A2a(e) => e,
        other => panic!("[{b}] not an A2A error: {other}"),
    };
    assert!(
        matches!(error.kind, ErrorKind::Unavailable | ErrorKind::Internal),
        "[{b}] {error:?}"
    );
    assert!(
        error.message.contains("task store"),
        "[{b}] the error says the store failed: {error:?}"
    );
    eprintln!("[{b}] the storage error came after {waited:?}");
    // The store takes writes again: a stream goes through, and the task
    // refused earlier was never stored.
    store
        .with_writer(|c| {
            c.pragma_update_and_check(None, "max_page_count", 1_073_741_823, |r| {
                r.get::<_, i64>(0)
            })
        })
        .await
        .expect("let the database grow");
    let events = within(
        format!("[{b}] a stream once the store takes writes"),
        c.stream(Message::user_text("again")),
    )
    .await
    .unwrap_or_else(|e| panic!("[{b}] the stream opens: {e}"));
    let all: Vec<_> = within(format!("[{b}] the stream ends"), events.collect()).await;
    assert!(all.iter().all(Result::is_ok), "[{b}] {all:?}");
    assert!(
        store.unfinished().await.expect("read").is_empty(),
        "[{b}] no task left working"
    );
    let _ = server.shutdown().await;
    store.close().await;
    remove_db(&path);
}

over_all_bindings!(a_stream_opened_on_a_full_store_gets_the_error_promptly);
