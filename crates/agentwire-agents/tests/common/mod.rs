//! Shared helpers of the agents' end-to-end tests: the agents on
//! ephemeral loopback ports, real clients restricted to one binding,
//! bounded waits and error assertions. (The server's end-to-end tests have
//! their own, in `crates/agentwire-server/tests/common`.)
//!
//! Every wait that could hang goes through [`within`] (10 s).

// Each test binary uses a different subset of the helpers.
#![allow(dead_code)]

use std::fmt::Display;
use std::future::IntoFuture;
use std::time::Duration;

use agentwire_agents::conformance::{self, ConformanceAgent};
use agentwire_client::{
    Binding, CallOptions, Client, ClientError, ClientResult, EventStream, Transport,
};
use agentwire_server::{A2aServer, AgentExecutor, ServerHandle};
use agentwire_types::{
    A2aError, AgentCard, ErrorKind, Message, SendMessageRequest, SendMessageResponse,
    StreamResponse, Task, new_id,
};
use futures::StreamExt;

/// No per-call options (a static, so futures may borrow it freely).
pub static NO_OPTS: CallOptions = CallOptions {
    service_params: Vec::new(),
    extensions: Vec::new(),
    timeout: None,
};

/// Bound on every single wait of the suite.
pub const WAIT: Duration = Duration::from_secs(10);

/// Awaits `f`, failing the test with `what` if it takes longer than [`WAIT`].
pub async fn within<F: IntoFuture>(what: impl Display, f: F) -> F::Output {
    match tokio::time::timeout(WAIT, f.into_future()).await {
        Ok(out) => out,
        Err(_) => panic!("timed out after {WAIT:?}: {what}"),
    }
}

/// Generates one `#[tokio::test]` per binding for a scenario written as
/// `async fn name(b: Binding)`: `name::jsonrpc`, `name::http_json` and
/// `name::grpc`. Attributes before a name (e.g. `#[ignore = "..."]`) go
/// on its three tests.
macro_rules! over_all_bindings {
    ($($(#[$attr:meta])* $name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                $(#[$attr])*
                async fn jsonrpc() {
                    super::$name(agentwire_client::Binding::JsonRpc).await
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                $(#[$attr])*
                async fn http_json() {
                    super::$name(agentwire_client::Binding::HttpJson).await
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                $(#[$attr])*
                async fn grpc() {
                    super::$name(agentwire_client::Binding::Grpc).await
                }
            }
        )*
    };
}

// ----- servers -------------------------------------------------------------

/// Serves `server` on 127.0.0.1 with an ephemeral port, in the background.
pub async fn start_server(server: A2aServer) -> ServerHandle {
    server
        .bind("127.0.0.1:0")
        .await
        .expect("bind an ephemeral loopback port")
        .spawn()
}

/// Serves an agent with its card.
pub async fn start<E: AgentExecutor>(card: AgentCard, agent: E) -> ServerHandle {
    start_server(A2aServer::new(card, agent)).await
}

/// The conformance agent with its default (short) streaming timeout.
pub async fn conformance_server() -> ServerHandle {
    start(conformance::card(), ConformanceAgent::default()).await
}

/// A client that discovered the agent from its card and may only use
/// `binding`.
pub async fn client(server: &ServerHandle, binding: Binding) -> Client {
    within(
        format!("[{binding}] connect"),
        Client::builder()
            .bindings([binding])
            .connect(&server.base_url()),
    )
    .await
    .unwrap_or_else(|e| panic!("[{binding}] connect: {e}"))
}

// ----- messages and calls ---------------------------------------------------

/// A user message whose id starts with a conformance `prefix`.
pub fn msg(prefix: &str) -> Message {
    Message::user_text(format!("hello for {prefix}"))
        .with_message_id(format!("{prefix}-{}", new_id()))
}

/// A send request around `message`.
pub fn request(message: Message) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(message),
        ..Default::default()
    }
}

/// `SendMessage`, expected to succeed.
pub async fn send(c: &Client, b: Binding, req: SendMessageRequest) -> SendMessageResponse {
    within(
        format!("[{b}] SendMessage"),
        Transport::send_message(c, req, &NO_OPTS),
    )
    .await
    .unwrap_or_else(|e| panic!("[{b}] SendMessage failed: {e:?}"))
}

/// `SendMessage` of `message`, expected to answer with a task.
pub async fn send_task(c: &Client, b: Binding, message: Message) -> Task {
    let res = send(c, b, request(message)).await;
    res.task()
        .unwrap_or_else(|| panic!("[{b}] expected a Task, got {res:?}"))
        .clone()
}

/// Every event of a stream until it ends; an error item fails the test.
pub async fn collect(b: Binding, what: &str, stream: EventStream) -> Vec<StreamResponse> {
    within(
        format!("[{b}] {what}: the stream to end"),
        stream.collect::<Vec<_>>(),
    )
    .await
    .into_iter()
    .map(|item| item.unwrap_or_else(|e| panic!("[{b}] {what}: stream error {e:?}")))
    .collect()
}

/// Asserts that a call failed with an A2A error of `kind`; returns it.
#[track_caller]
pub fn expect_kind<T>(result: ClientResult<T>, kind: ErrorKind, what: impl Display) -> A2aError {
    match result {
        Err(ClientError::A2a(e)) if e.kind == kind => e,
        Err(other) => panic!("{what}: expected {kind:?}, got {other:?}"),
        Ok(_) => panic!("{what}: expected {kind:?}, but the call succeeded"),
    }
}
