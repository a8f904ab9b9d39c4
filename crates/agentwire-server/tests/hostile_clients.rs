//! Slow and hostile clients against a real server on 127.0.0.1: half a
//! request head, a connection that sends nothing, a body that trickles, a
//! declared body over the limit, a flood of connections over the cap, an
//! idle HTTP/2 connection, and the gRPC codes of requests refused before the
//! handler (undecodable, too large, invalid ListTasks filters).
//!
//! Every wait is bounded ([`WAIT`]); the assertions are about what the
//! server does (answers, refuses, closes), not about how fast.

use std::time::Duration;

use agentwire_server::types::{
    A2aError, ErrorKind, ListTasksRequest, Message, SendMessageRequest, Timestamp,
    proto::a2a_service_client::A2aServiceClient,
};
use agentwire_server::{
    A2aResult, A2aServer, AgentCard, AgentExecutor, RequestContext, ServerHandle, TaskUpdater,
};
use bytes::{Buf, BufMut};
use prost::Message as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::Code;

/// The bound of every wait in these tests.
const WAIT: Duration = Duration::from_secs(10);

/// Answers with the text and completes.
struct Echo;

impl AgentExecutor for Echo {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.add_artifact(agentwire_server::types::Artifact::text("echo", ctx.text()))
            .await?;
        task.complete().await
    }
}

async fn start(server: A2aServer) -> ServerHandle {
    server.bind("127.0.0.1:0").await.expect("bind").spawn()
}

fn echo() -> A2aServer {
    A2aServer::new(
        AgentCard::new("Echo", "Repeats what you say", "1.0.0"),
        Echo,
    )
}

/// An HTTP client (the TLS provider installed, though only plain HTTP is
/// used), with a fresh connection per request.
fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(WAIT)
        .pool_max_idle_per_host(0)
        .build()
        .expect("client")
}

/// A good request, on a connection of its own: the agent card.
async fn good_request(server: &ServerHandle) -> u16 {
    let url = format!(
        "{}{}",
        server.base_url(),
        agentwire_server::types::AGENT_CARD_PATH
    );
    let client = http();
    client
        .get(url)
        .send()
        .await
        .expect("a good request is answered")
        .status()
        .as_u16()
}

/// Reads until the server closes the connection (or resets it), within
/// [`WAIT`]: what it sent. `None` when the connection was still open then.
async fn read_to_close(tcp: &mut TcpStream) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    let read = tokio::time::timeout(WAIT, async {
        let mut buf = [0u8; 4096];
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    read.ok().map(|()| got)
}

/// One HTTP/1.1 `GET` of the agent card on a kept-alive connection: the
/// status.
async fn get_card_on(tcp: &mut TcpStream) -> u16 {
    let head = format!(
        "GET {} HTTP/1.1\r\nhost: test\r\n\r\n",
        agentwire_server::types::AGENT_CARD_PATH
    );
    tcp.write_all(head.as_bytes()).await.expect("write");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(WAIT, async {
        loop {
            let n = tcp.read(&mut buf).await.expect("read");
            assert!(n > 0, "the connection closed before the answer");
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got);
            let Some(end) = text.find("\r\n\r\n") else {
                continue;
            };
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .expect("a content-length");
            if got.len() >= end + 4 + length {
                break;
            }
        }
    })
    .await
    .expect("the card within the wait");
    let text = String::from_utf8_lossy(&got);
    text[9..12].parse().expect("a status")
}

#[tokio::test]
async fn half_a_request_head_or_nothing_is_disconnected_while_others_are_served() {
    let server = start(echo().request_head_timeout(Duration::from_secs(1))).await;
    let addr = server.local_addr();
    let mut half = TcpStream::connect(addr).await.unwrap();
    half.write_all(b"POST / HTTP/1.1\r\nhost: test\r\ncontent-ty")
        .await
        .unwrap();
    let mut silent = TcpStream::connect(addr).await.unwrap();

    // Meanwhile a good request is answered.
    assert_eq!(good_request(&server).await, 200);

    assert!(
        read_to_close(&mut half).await.is_some(),
        "a client that sent half a head is disconnected"
    );
    assert!(
        read_to_close(&mut silent).await.is_some(),
        "a client that sent nothing is disconnected"
    );
    assert_eq!(good_request(&server).await, 200);
}

/// On a kept-alive HTTP/1.1 connection the head timeout starts again
/// after every response: a connection that keeps sending requests, for
/// longer than the timeout in all, is served throughout; once it sends
/// half of the next head (or nothing), it is closed after the timeout.
#[tokio::test]
async fn a_kept_alive_connection_is_served_until_it_stalls_in_a_head() {
    let timeout = Duration::from_millis(600);
    let server = start(echo().request_head_timeout(timeout)).await;
    let addr = server.local_addr();
    let mut busy = TcpStream::connect(addr).await.unwrap();
    let mut stalled = TcpStream::connect(addr).await.unwrap();
    let mut idle = TcpStream::connect(addr).await.unwrap();
    assert_eq!(get_card_on(&mut stalled).await, 200);
    assert_eq!(get_card_on(&mut idle).await, 200);
    stalled
        .write_all(b"GET / HTTP/1.1\r\nhost: te")
        .await
        .unwrap();
    // Requests a fifth of the timeout apart, for three timeouts.
    let started = std::time::Instant::now();
    let mut served = 0;
    while started.elapsed() < 3 * timeout {
        assert_eq!(
            get_card_on(&mut busy).await,
            200,
            "request {served} on the busy connection"
        );
        served += 1;
        tokio::time::sleep(timeout / 5).await;
    }
    assert!(served >= 10, "{served} requests");
    for (name, tcp) in [("stalled in a head", &mut stalled), ("idle", &mut idle)] {
        assert!(
            read_to_close(tcp).await.is_some(),
            "the {name} connection is closed"
        );
    }
    assert_eq!(
        get_card_on(&mut busy).await,
        200,
        "the busy one still served"
    );
}

#[tokio::test]
async fn a_body_that_does_not_arrive_is_refused() {
    let server = start(echo().body_read_timeout(Duration::from_secs(1))).await;
    for path in ["/", "/message:send"] {
        let mut tcp = TcpStream::connect(server.local_addr()).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\n\
             a2a-version: 1.0\r\ncontent-length: 100\r\n\r\n{{\"jsonrpc\""
        );
        tcp.write_all(head.as_bytes()).await.unwrap();
        let got = read_to_close(&mut tcp)
            .await
            .expect("the server answers and closes");
        let text = String::from_utf8_lossy(&got);
        assert!(
            text.contains("did not arrive within 1s"),
            "{path}: the answer says why: {text}"
        );
    }
}

#[tokio::test]
async fn a_declared_body_over_the_limit_is_refused_before_it_is_read() {
    let server = start(echo().max_body_bytes(4096)).await;
    for path in ["/", "/message:send"] {
        let mut tcp = TcpStream::connect(server.local_addr()).await.unwrap();
        // Only the head: the server must answer without waiting for the
        // gigabyte it announces.
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\n\
             a2a-version: 1.0\r\ncontent-length: 1000000000\r\n\r\n"
        );
        tcp.write_all(head.as_bytes()).await.unwrap();
        let mut buf = vec![0u8; 4096];
        let n = tokio::time::timeout(WAIT, tcp.read(&mut buf))
            .await
            .expect("an answer before the body")
            .unwrap();
        let text = String::from_utf8_lossy(&buf[..n]);
        assert!(
            text.starts_with("HTTP/1.1 413"),
            "{path}: 413 Payload Too Large: {text}"
        );
        assert!(text.contains("4096"), "{path}: the limit is named: {text}");
    }
}

#[tokio::test]
async fn connections_over_the_cap_are_refused_while_open_ones_are_served() {
    const CAP: usize = 32;
    let server = start(
        echo()
            .max_connections(CAP)
            // The idle connections of the flood stay open for the test.
            .request_head_timeout(Duration::from_secs(60)),
    )
    .await;
    let addr = server.local_addr();
    let mut good = TcpStream::connect(addr).await.unwrap();
    assert_eq!(get_card_on(&mut good).await, 200);

    // The flood: idle connections up to the cap (the good one holds one
    // place), then more.
    let mut held = Vec::new();
    for _ in 1..CAP {
        held.push(TcpStream::connect(addr).await.unwrap());
    }
    for i in 0..8 {
        let mut extra = TcpStream::connect(addr).await.unwrap();
        let got = read_to_close(&mut extra)
            .await
            .unwrap_or_else(|| panic!("connection {i} over the cap is refused, not held"));
        let text = String::from_utf8_lossy(&got);
        assert!(
            text.is_empty() || text.starts_with("HTTP/1.1 503"),
            "refused with 503 or closed: {text}"
        );
    }
    // The open connection is still served while the cap is reached.
    assert_eq!(get_card_on(&mut good).await, 200);

    // Once the flood ends, new connections are accepted again.
    drop(held);
    let accepted = tokio::time::timeout(WAIT, async {
        loop {
            let mut tcp = TcpStream::connect(addr).await.unwrap();
            let head = format!(
                "GET {} HTTP/1.1\r\nhost: test\r\n\r\n",
                agentwire_server::types::AGENT_CARD_PATH
            );
            tcp.write_all(head.as_bytes()).await.unwrap();
            let mut buf = [0u8; 16];
            if let Ok(n) = tcp.read(&mut buf).await {
                if buf[..n].starts_with(b"HTTP/1.1 200") {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        accepted.is_ok(),
        "a new connection is served after the flood"
    );
}

#[tokio::test]
async fn an_idle_http2_connection_is_closed() {
    let server = start(
        echo()
            .idle_timeout(Duration::from_secs(1))
            .request_head_timeout(Duration::from_secs(1)),
    )
    .await;
    let tcp = TcpStream::connect(server.local_addr()).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .expect("h2c handshake");
    let conn = tokio::spawn(conn);
    let request = http::Request::get(format!(
        "http://{}{}",
        server.local_addr(),
        agentwire_server::types::AGENT_CARD_PATH
    ))
    .body(http_body_util::Empty::<bytes::Bytes>::new())
    .unwrap();
    let response = sender.send_request(request).await.expect("an answer");
    assert_eq!(response.status(), 200);
    drop(response);
    // No more requests: the server closes the connection.
    let ended = tokio::time::timeout(WAIT, conn).await;
    assert!(ended.is_ok(), "an idle HTTP/2 connection is closed");
}

/// Request and response messages as raw bytes, to send what a generated
/// client cannot.
#[derive(Clone, Copy, Default)]
struct Raw;

impl tonic::codec::Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl tonic::codec::Encoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(
        &mut self,
        item: Vec<u8>,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl tonic::codec::Decoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Vec<u8>>, tonic::Status> {
        let mut out = vec![0; src.remaining()];
        src.copy_to_slice(&mut out);
        Ok(Some(out))
    }
}

fn v1<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "a2a-version",
        tonic::metadata::MetadataValue::from_static("1.0"),
    );
    request
}

async fn channel(server: &ServerHandle) -> tonic::transport::Channel {
    tokio::time::timeout(
        WAIT,
        tonic::transport::Channel::from_shared(server.base_url())
            .unwrap()
            .connect(),
    )
    .await
    .expect("connect within the wait")
    .expect("gRPC connect")
}

/// `SendMessage` with `payload` as the request message: the status.
async fn raw_send(server: &ServerHandle, payload: Vec<u8>) -> tonic::Status {
    let mut grpc = tonic::client::Grpc::new(channel(server).await);
    grpc.ready().await.expect("ready");
    let path = http::uri::PathAndQuery::from_static("/lf.a2a.v1.A2AService/SendMessage");
    tokio::time::timeout(WAIT, grpc.unary(v1(payload), path, Raw))
        .await
        .expect("an answer")
        .expect_err("refused")
}

#[tokio::test]
async fn grpc_refusals_before_the_handler_have_the_codes_grpc_prescribes() {
    let server = start(echo().max_body_bytes(1024)).await;

    for (what, payload) in [
        ("garbage bytes", vec![0xff, 0xff, 0xff, 0xff, 0x0f]),
        (
            "a field of the wrong wire type",
            vec![0x12, 0x02, 0x28, 0x01],
        ),
        ("a truncated message", vec![0x12, 0x7f, 0x0a]),
    ] {
        let status = raw_send(&server, payload).await;
        assert_eq!(status.code(), Code::InvalidArgument, "{what}: {status:?}");
        let err = A2aError::from_grpc_status(&status);
        assert_eq!(err.kind, ErrorKind::ParseError, "{what}: {err:?}");
    }

    let big = SendMessageRequest {
        message: Some(Message::user_text("x".repeat(4096))),
        ..Default::default()
    };
    let status = raw_send(&server, big.encode_to_vec()).await;
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    let err = A2aError::from_grpc_status(&status);
    assert_eq!(err.metadata["limitBytes"], "1024", "{err:?}");

    // The handler's own errors keep their codes.
    let status = raw_send(&server, SendMessageRequest::default().encode_to_vec()).await;
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert_eq!(
        A2aError::from_grpc_status(&status).kind,
        ErrorKind::InvalidParams
    );
}

#[tokio::test]
async fn invalid_list_tasks_filters_are_refused_over_grpc_as_over_json() {
    let server = start(echo()).await;
    let mut client = A2aServiceClient::new(channel(&server).await);
    let unknown_state = ListTasksRequest {
        status: 99,
        ..Default::default()
    };
    let bad_time = ListTasksRequest {
        status_timestamp_after: Some(Timestamp {
            seconds: i64::MAX,
            nanos: 0,
        }),
        ..Default::default()
    };
    let negative_nanos = ListTasksRequest {
        status_timestamp_after: Some(Timestamp {
            seconds: 0,
            nanos: -1,
        }),
        ..Default::default()
    };
    for (what, field, request) in [
        ("an unknown state", "status", unknown_state),
        ("a time out of range", "statusTimestampAfter", bad_time),
        (
            "negative nanoseconds",
            "statusTimestampAfter",
            negative_nanos,
        ),
    ] {
        let status = tokio::time::timeout(WAIT, client.list_tasks(v1(request)))
            .await
            .expect("an answer")
            .expect_err(what);
        assert_eq!(status.code(), Code::InvalidArgument, "{what}: {status:?}");
        let err = A2aError::from_grpc_status(&status);
        assert_eq!(err.kind, ErrorKind::InvalidParams, "{what}");
        assert_eq!(err.field_violations[0].field, field, "{what}");
    }

    // The same filters over JSON-RPC are refused with the same error.
    let http = http();
    for params in [
        serde_json::json!({"status": 99}),
        serde_json::json!({"status": "TASK_STATE_BOGUS"}),
    ] {
        let body = serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": params
        });
        let answer: serde_json::Value = http
            .post(format!("{}/", server.base_url()))
            .header("a2a-version", "1.0")
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(answer["error"]["code"], -32602, "{params}: {answer}");
    }
    // A valid listing still works.
    let list = client
        .list_tasks(v1(ListTasksRequest::default()))
        .await
        .expect("a valid listing");
    assert_eq!(list.into_inner().total_size, 0);
}
