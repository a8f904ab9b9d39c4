//! Shared helpers of the server's end-to-end tests (`bindings.rs`,
//! `wire.rs`, `cluster.rs`, `push_delivery.rs`, `push_configs.rs`): real
//! servers on ephemeral loopback ports running the small agents of
//! [`agents`], real clients restricted to one binding, raw HTTP and gRPC
//! requests, bounded waits and error assertions.
//!
//! Every wait that could hang goes through [`within`] (10 s).

// Each test binary uses a different subset of the helpers.
#![allow(dead_code)]

pub mod agents;

use std::fmt::Display;
use std::future::IntoFuture;
use std::time::Duration;

use agentwire_client::{
    Binding, CallOptions, Client, ClientError, ClientResult, EventStream, Transport,
};
use agentwire_server::{A2aServer, AgentExecutor, ServerHandle};
use agentwire_types::proto::a2a_service_client::A2aServiceClient;
use agentwire_types::{
    A2aError, AgentCard, ERROR_DOMAIN, ERROR_INFO_TYPE, ErrorKind, GetTaskRequest, Message,
    SendMessageConfiguration, SendMessageRequest, SendMessageResponse, StreamResponse, Task,
    TaskState, new_id,
};
use futures::StreamExt;
use prost::Message as _;
use serde_json::Value;

/// No per-call options (a static, so futures may borrow it freely).
pub static NO_OPTS: CallOptions = CallOptions {
    service_params: Vec::new(),
    extensions: Vec::new(),
    timeout: None,
};

/// Bound on every single wait of the suite.
pub const WAIT: Duration = Duration::from_secs(10);

/// Half of how long the long work of [`long_running_server`] would last
/// if nobody canceled it (it is always canceled well before).
pub const LONG_RUN: Duration = Duration::from_secs(30);

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

// ----- SQLite files -------------------------------------------------------

/// A new SQLite file's path in the temporary directory (not created).
pub fn temp_db(prefix: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("{prefix}-{}.db", new_id()))
}

/// Removes an SQLite file with its write-ahead log, shared memory and the
/// lock file the task store takes beside it.
pub fn remove_db(path: &std::path::Path) {
    for suffix in ["", "-wal", "-shm", ".lock"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
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

/// The scripted agent ([`agents::Scripted`]) with its short long work.
pub async fn scripted_server() -> ServerHandle {
    start(agents::scripted_card(), agents::Scripted::default()).await
}

/// The scripted agent whose long work lasts `2 * LONG_RUN`.
pub async fn long_running_server() -> ServerHandle {
    start(
        agents::scripted_card(),
        agents::Scripted {
            long_work: 2 * LONG_RUN,
        },
    )
    .await
}

/// The echo agent ([`agents::Echo`]).
pub async fn echo_server() -> ServerHandle {
    start(agents::echo_card(), agents::Echo).await
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

/// A user message whose id starts with `prefix` (the scripted agent's
/// behaviour).
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

/// A send request that returns as soon as the task exists.
pub fn immediate(message: Message) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(message),
        configuration: Some(SendMessageConfiguration {
            return_immediately: true,
            ..Default::default()
        }),
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

/// `GetTask` with the full history.
pub async fn get_task(c: &Client, b: Binding, id: &str) -> Task {
    get_task_with(c, b, id, None).await
}

/// `GetTask` with a history length.
pub async fn get_task_with(c: &Client, b: Binding, id: &str, history: Option<i32>) -> Task {
    let req = GetTaskRequest {
        id: id.to_owned(),
        history_length: history,
        ..Default::default()
    };
    within(
        format!("[{b}] GetTask {id}"),
        Transport::get_task(c, req, &NO_OPTS),
    )
    .await
    .unwrap_or_else(|e| panic!("[{b}] GetTask {id} failed: {e:?}"))
}

/// Polls `GetTask` until the task is in `state` (bounded by [`WAIT`]).
pub async fn wait_for_state(c: &Client, b: Binding, id: &str, state: TaskState) -> Task {
    within(format!("[{b}] task {id} reaching {state:?}"), async {
        loop {
            let t = get_task(c, b, id).await;
            if t.state() == state {
                return t;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
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

/// The next event of a stream (which must not end or fail here).
pub async fn next_event(b: Binding, what: &str, stream: &mut EventStream) -> StreamResponse {
    within(format!("[{b}] {what}: next event"), stream.next())
        .await
        .unwrap_or_else(|| panic!("[{b}] {what}: the stream ended early"))
        .unwrap_or_else(|e| panic!("[{b}] {what}: stream error {e:?}"))
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

// ----- raw HTTP ---------------------------------------------------------------

/// A plain HTTP client that adds no A2A headers.
pub fn raw_http() -> reqwest::Client {
    agentwire_client::install_crypto_provider();
    reqwest::Client::builder()
        .timeout(WAIT)
        .build()
        .expect("reqwest client")
}

/// A raw HTTP answer.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: bytes::Bytes,
}

impl RawResponse {
    /// The body as JSON.
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// Sends a prepared request and reads the whole answer.
pub async fn raw_send(rb: reqwest::RequestBuilder) -> RawResponse {
    within("raw HTTP request", async {
        let resp = rb.send().await.expect("raw HTTP request");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.bytes().await.expect("raw HTTP body");
        RawResponse {
            status,
            headers,
            body,
        }
    })
    .await
}

/// `POST /` (JSON-RPC) with a raw body; `A2A-Version: 1.0` when `version`.
pub async fn rpc_raw(
    server: &ServerHandle,
    body: impl Into<reqwest::Body>,
    version: bool,
) -> RawResponse {
    rpc_raw_at(server, "/", body, version).await
}

/// A JSON-RPC POST to `path` (which may carry a query).
pub async fn rpc_raw_at(
    server: &ServerHandle,
    path: &str,
    body: impl Into<reqwest::Body>,
    version: bool,
) -> RawResponse {
    let mut rb = raw_http()
        .post(format!("{}{path}", server.base_url()))
        .header("content-type", "application/json")
        .body(body);
    if version {
        rb = rb.header("A2A-Version", "1.0");
    }
    raw_send(rb).await
}

/// A JSON-RPC call of `method` with `params`.
pub async fn rpc_call(server: &ServerHandle, method: &str, params: Value) -> RawResponse {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    rpc_raw(server, body.to_string(), true).await
}

/// A REST request; `A2A-Version: 1.0` when `version`.
pub async fn rest_raw(
    server: &ServerHandle,
    method: reqwest::Method,
    path: &str,
    body: Option<Vec<u8>>,
    version: bool,
) -> RawResponse {
    let mut rb = raw_http().request(method, format!("{}{path}", server.base_url()));
    if let Some(body) = body {
        rb = rb.header("content-type", "application/a2a+json").body(body);
    }
    if version {
        rb = rb.header("A2A-Version", "1.0");
    }
    raw_send(rb).await
}

/// Checks a JSON-RPC error answer: HTTP 200, `jsonrpc: "2.0"`, the `id`,
/// the code, a message, and for A2A-specific errors an ErrorInfo detail
/// with the reason and the A2A domain. Returns the error object.
#[track_caller]
pub fn assert_rpc_error(resp: &RawResponse, id: Value, kind: ErrorKind, what: &str) -> Value {
    assert_eq!(
        resp.status, 200,
        "{what}: JSON-RPC errors come with HTTP 200"
    );
    let body = resp.json();
    assert_eq!(body["jsonrpc"], "2.0", "{what}: {body}");
    assert_eq!(body["id"], id, "{what}: id of {body}");
    assert!(body.get("result").is_none(), "{what}: {body}");
    let error = &body["error"];
    assert_eq!(
        error["code"].as_i64(),
        Some(kind.jsonrpc_code()),
        "{what}: code of {body}"
    );
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: message of {body}"
    );
    if kind.is_a2a_specific() {
        let info = error["data"]
            .as_array()
            .and_then(|d| d.iter().find(|d| d["@type"] == ERROR_INFO_TYPE))
            .unwrap_or_else(|| panic!("{what}: no ErrorInfo in {body}"));
        assert_eq!(info["reason"], kind.reason(), "{what}: {body}");
        assert_eq!(info["domain"], ERROR_DOMAIN, "{what}: {body}");
    }
    error.clone()
}

/// Checks an HTTP+JSON error answer: the HTTP status, and the body
/// `{"error": {code, status, message, details: [ErrorInfo...]}}` with the
/// ErrorInfo reason and domain. Returns the `error` object.
#[track_caller]
pub fn assert_rest_error(
    resp: &RawResponse,
    http_status: u16,
    kind: ErrorKind,
    what: &str,
) -> Value {
    let body = resp.json();
    assert_eq!(resp.status, http_status, "{what}: HTTP status ({body})");
    let error = body
        .get("error")
        .unwrap_or_else(|| panic!("{what}: no error object in {body}"));
    assert_eq!(
        error["code"].as_u64(),
        Some(u64::from(http_status)),
        "{what}: {body}"
    );
    assert_eq!(error["status"], kind.grpc_status_name(), "{what}: {body}");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: message of {body}"
    );
    let info = error["details"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["@type"] == ERROR_INFO_TYPE))
        .unwrap_or_else(|| panic!("{what}: no ErrorInfo in {body}"));
    assert_eq!(info["reason"], kind.reason(), "{what}: {body}");
    assert_eq!(info["domain"], ERROR_DOMAIN, "{what}: {body}");
    error.clone()
}

// ----- raw gRPC ---------------------------------------------------------------

/// The generated gRPC client on a fresh channel (adds no metadata).
pub async fn grpc_raw(server: &ServerHandle) -> A2aServiceClient<tonic::transport::Channel> {
    within("gRPC connect", A2aServiceClient::connect(server.base_url()))
        .await
        .expect("gRPC connect")
}

/// A gRPC request carrying `a2a-version: 1.0`.
pub fn grpc_v1<T>(message: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(message);
    req.metadata_mut().insert(
        "a2a-version",
        tonic::metadata::MetadataValue::from_static("1.0"),
    );
    req
}

/// The wire form of `google.rpc.Status` and `google.rpc.ErrorInfo`.
pub mod rpc {
    use std::collections::HashMap;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Status {
        #[prost(int32, tag = "1")]
        pub code: i32,
        #[prost(string, tag = "2")]
        pub message: String,
        #[prost(message, repeated, tag = "3")]
        pub details: Vec<Any>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Any {
        #[prost(string, tag = "1")]
        pub type_url: String,
        #[prost(bytes = "vec", tag = "2")]
        pub value: Vec<u8>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ErrorInfo {
        #[prost(string, tag = "1")]
        pub reason: String,
        #[prost(string, tag = "2")]
        pub domain: String,
        #[prost(map = "string, string", tag = "3")]
        pub metadata: HashMap<String, String>,
    }
}

/// Checks a gRPC error status: the code, and details holding a
/// `google.rpc.Status` with an ErrorInfo of `kind`'s reason in the A2A
/// domain. Returns the decoded error.
#[track_caller]
pub fn assert_grpc_error(
    status: &tonic::Status,
    code: tonic::Code,
    kind: ErrorKind,
    what: &str,
) -> A2aError {
    assert_eq!(status.code(), code, "{what}: {status:?}");
    let rpc = rpc::Status::decode(status.details()).unwrap_or_else(|e| {
        panic!("{what}: details are not a google.rpc.Status ({e}): {status:?}")
    });
    assert_eq!(rpc.code, code as i32, "{what}");
    let info = rpc
        .details
        .iter()
        .find(|d| d.type_url == ERROR_INFO_TYPE)
        .unwrap_or_else(|| panic!("{what}: no ErrorInfo detail in {status:?}"));
    let info = rpc::ErrorInfo::decode(info.value.as_slice()).expect("an ErrorInfo");
    assert_eq!(info.reason, kind.reason(), "{what}");
    assert_eq!(info.domain, ERROR_DOMAIN, "{what}");
    let err = A2aError::from_grpc_status(status);
    assert_eq!(err.kind, kind, "{what}");
    err
}

/// A gRPC call answered before any message ("trailers-only"): the status
/// code and message read from the response headers.
#[derive(Debug)]
pub struct GrpcWire {
    pub http_status: u16,
    pub grpc_status: Option<i32>,
    pub grpc_message: String,
    pub details: Option<Vec<u8>>,
}

/// Sends one raw gRPC frame holding `payload` (not necessarily a valid
/// message) to `method` over HTTP/2 cleartext.
pub async fn grpc_wire(
    server: &ServerHandle,
    method: &str,
    payload: &[u8],
    version: bool,
) -> GrpcWire {
    agentwire_client::install_crypto_provider();
    let http = reqwest::Client::builder()
        .http2_prior_knowledge()
        .timeout(WAIT)
        .build()
        .expect("h2c client");
    let mut frame = Vec::with_capacity(payload.len() + 5);
    frame.push(0);
    frame.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_be_bytes());
    frame.extend_from_slice(payload);
    let mut rb = http
        .post(format!(
            "{}/lf.a2a.v1.A2AService/{method}",
            server.base_url()
        ))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(frame);
    if version {
        rb = rb.header("a2a-version", "1.0");
    }
    let resp = raw_send(rb).await;
    let header = |name: &str| {
        resp.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let details = header("grpc-status-details-bin").map(|b64| {
        use base64::Engine as _;
        // gRPC writes binary metadata as standard base64, usually unpadded.
        base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(b64.trim_end_matches('='))
            .expect("base64 grpc-status-details-bin")
    });
    GrpcWire {
        http_status: resp.status,
        grpc_status: header("grpc-status").and_then(|s| s.parse().ok()),
        grpc_message: header("grpc-message").unwrap_or_default(),
        details,
    }
}

/// The Task of a stream event, if it is one.
pub fn as_task(ev: &StreamResponse) -> Option<&Task> {
    match ev.payload.as_ref()? {
        agentwire_types::stream_response::Payload::Task(t) => Some(t),
        _ => None,
    }
}
