//! The client's token refresh on a refusal: a call the agent answers as
//! unauthenticated is retried once with the token the
//! [`TokenSource`] refreshes, on each binding (the retry lives above the
//! transports); a second refusal is the call's error.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentwire_client::{Binding, CallOptions, Client, ClientResult, TokenSource, Transport};
use agentwire_server::{
    A2aResult, A2aServer, AgentExecutor, BearerTokens, RequestContext, ServerHandle, TaskUpdater,
};
use agentwire_types::{AgentCard, Artifact, ErrorKind, Message, SendMessageRequest, TaskState};
use futures::StreamExt;
use tokio::sync::Mutex;

const LIMIT: Duration = Duration::from_secs(20);

struct Agent;

impl AgentExecutor for Agent {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.add_artifact(Artifact::text("echo", ctx.text()))
            .await?;
        task.complete().await
    }
}

/// An agent that accepts the bearer token `fresh` only.
async fn server() -> ServerHandle {
    let card = AgentCard::new("Guarded", "accepts one token", "1.0.0");
    let auth = BearerTokens::new().with_token("fresh", "alice");
    A2aServer::new(card, Agent)
        .authenticator(Arc::new(auth))
        .bind("127.0.0.1:0")
        .await
        .expect("bind")
        .spawn()
}

/// A token source starting with `first`, whose refreshes give `next` (in
/// order, then nothing); it counts the refreshes.
#[derive(Debug)]
struct Source {
    current: Mutex<String>,
    next: Mutex<Vec<String>>,
    refreshes: AtomicUsize,
}

impl Source {
    fn new(first: &str, next: &[&str]) -> Arc<Self> {
        Arc::new(Self {
            current: Mutex::new(first.into()),
            next: Mutex::new(next.iter().rev().map(|s| s.to_string()).collect()),
            refreshes: AtomicUsize::new(0),
        })
    }
}

#[async_trait::async_trait]
impl TokenSource for Source {
    async fn token(&self) -> ClientResult<Option<String>> {
        Ok(Some(self.current.lock().await.clone()))
    }

    async fn refresh(&self, rejected: &str) -> ClientResult<Option<String>> {
        self.refreshes.fetch_add(1, Ordering::SeqCst);
        let mut cur = self.current.lock().await;
        assert_eq!(*cur, rejected, "the refused token is the one sent");
        let Some(n) = self.next.lock().await.pop() else {
            return Ok(None);
        };
        *cur = n.clone();
        Ok(Some(n))
    }
}

async fn client(server: &ServerHandle, b: Binding, source: Arc<Source>) -> Client {
    Client::builder()
        .bindings([b])
        .token_source(source)
        .connect(&server.base_url())
        .await
        .expect("connect")
}

fn send(text: &str) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(Message::user_text(text)),
        ..Default::default()
    }
}

async fn refresh_then_retry(b: Binding) {
    let server = server().await;
    let o = CallOptions::new().with_timeout(LIMIT);

    // A stale token: refreshed once, the call retried once and answered.
    let source = Source::new("stale", &["fresh"]);
    let c = client(&server, b, source.clone()).await;
    let r = c.send_message(send("hi"), &o).await.expect("retried");
    assert_eq!(
        r.task().map(|t| t.state()),
        Some(TaskState::Completed),
        "{b}"
    );
    assert_eq!(source.refreshes.load(Ordering::SeqCst), 1, "{b}");
    // Later calls use the fresh token without refreshing again.
    let id = r.task().map(|t| t.id.clone()).unwrap_or_default();
    agentwire_client::Client::get_task(&c, id)
        .await
        .expect("get");
    assert_eq!(source.refreshes.load(Ordering::SeqCst), 1, "{b}");

    // A stream opened with a stale token is retried the same way.
    let source = Source::new("stale", &["fresh"]);
    let c = client(&server, b, source.clone()).await;
    let mut events = c
        .send_streaming_message(send("stream"), &o)
        .await
        .expect("the stream opens after a refresh");
    let mut n = 0;
    while let Some(ev) = events.next().await {
        ev.expect("an event");
        n += 1;
    }
    assert!(n > 0, "{b}");
    assert_eq!(source.refreshes.load(Ordering::SeqCst), 1, "{b}");

    // Refused again after the refresh: an authentication failure, after
    // exactly one refresh (no loop).
    let source = Source::new("stale", &["still-stale", "fresh"]);
    let c = client(&server, b, source.clone()).await;
    let e = c
        .send_message(send("hi"), &o)
        .await
        .expect_err("refused twice");
    assert!(e.is_unauthenticated(), "{b}: {e:?}");
    assert_eq!(e.kind(), Some(ErrorKind::Unauthenticated), "{b}: {e:?}");
    assert_eq!(source.refreshes.load(Ordering::SeqCst), 1, "{b}");

    // Nothing to refresh with: the refusal as it came.
    let source = Source::new("stale", &[]);
    let c = client(&server, b, source.clone()).await;
    let e = c.send_message(send("hi"), &o).await.expect_err("refused");
    assert!(e.is_unauthenticated(), "{b}: {e:?}");
    assert_eq!(source.refreshes.load(Ordering::SeqCst), 1, "{b}");

    // A good token: no refresh at all.
    let source = Source::new("fresh", &["other"]);
    let c = client(&server, b, source.clone()).await;
    c.send_message(send("hi"), &o).await.expect("accepted");
    assert_eq!(source.refreshes.load(Ordering::SeqCst), 0, "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_token_is_refreshed_once_over_jsonrpc() {
    tokio::time::timeout(
        Duration::from_secs(60),
        refresh_then_retry(Binding::JsonRpc),
    )
    .await
    .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_token_is_refreshed_once_over_http_json() {
    tokio::time::timeout(
        Duration::from_secs(60),
        refresh_then_retry(Binding::HttpJson),
    )
    .await
    .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_token_is_refreshed_once_over_grpc() {
    tokio::time::timeout(Duration::from_secs(60), refresh_then_retry(Binding::Grpc))
        .await
        .expect("bounded");
}
