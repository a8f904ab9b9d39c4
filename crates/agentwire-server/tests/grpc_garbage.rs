//! Garbage request messages sent over HTTP/2 by a real gRPC client to every
//! gRPC service of a server on 127.0.0.1: the 1.0 A2A service, the 0.3 one,
//! `grpc.health.v1.Health` and server reflection (v1 and v1alpha). Each
//! answers `INVALID_ARGUMENT` with an A2A `ErrorInfo` (reason
//! `PARSE_ERROR`), never `INTERNAL`, and goes on serving good requests.

use std::time::Duration;

use agentwire_server::types::{A2aError, ErrorKind};
use agentwire_server::{
    A2aResult, A2aServer, AgentCard, AgentExecutor, RequestContext, ServerHandle, TaskUpdater,
};
use bytes::{Buf, BufMut};
use prost::Message as _;
use tonic::Code;

/// The bound of every wait in these tests.
const WAIT: Duration = Duration::from_secs(10);

/// Bytes that are no protobuf message: a varint that never ends.
const GARBAGE: &[u8] = &[
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f,
];

struct Echo;

impl AgentExecutor for Echo {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.add_artifact(agentwire_server::types::Artifact::text("echo", ctx.text()))
            .await?;
        task.complete().await
    }
}

async fn server() -> ServerHandle {
    A2aServer::new(AgentCard::new("Echo", "Repeats", "1.0.0"), Echo)
        .bind("127.0.0.1:0")
        .await
        .expect("bind")
        .spawn()
}

/// Request and response messages as raw bytes.
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

async fn grpc(server: &ServerHandle) -> tonic::client::Grpc<tonic::transport::Channel> {
    let channel = tokio::time::timeout(
        WAIT,
        tonic::transport::Channel::from_shared(server.base_url())
            .unwrap()
            .connect(),
    )
    .await
    .expect("connect within the wait")
    .expect("gRPC connect");
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.expect("ready");
    grpc
}

fn request<T>(message: T, version: Option<&'static str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(v) = version {
        request.metadata_mut().insert(
            "a2a-version",
            tonic::metadata::MetadataValue::from_static(v),
        );
    }
    request
}

/// A unary call of `path` with `payload`: its answer.
async fn unary(
    server: &ServerHandle,
    path: &'static str,
    payload: &[u8],
    version: Option<&'static str>,
) -> Result<Vec<u8>, tonic::Status> {
    let mut grpc = grpc(server).await;
    let path = http::uri::PathAndQuery::from_static(path);
    let call = grpc.unary(request(payload.to_vec(), version), path, Raw);
    tokio::time::timeout(WAIT, call)
        .await
        .expect("an answer")
        .map(tonic::Response::into_inner)
}

/// A server-streaming call of `path` with `payload`: the messages, then
/// the final status.
async fn server_streaming(
    server: &ServerHandle,
    path: &'static str,
    payload: &[u8],
) -> (Vec<Vec<u8>>, tonic::Status) {
    let mut grpc = grpc(server).await;
    let path = http::uri::PathAndQuery::from_static(path);
    tokio::time::timeout(WAIT, async {
        let mut stream = match grpc
            .server_streaming(request(payload.to_vec(), None), path, Raw)
            .await
        {
            Ok(r) => r.into_inner(),
            Err(status) => return (vec![], status),
        };
        let mut messages = vec![];
        loop {
            match stream.message().await {
                Ok(Some(m)) => messages.push(m),
                Ok(None) => return (messages, tonic::Status::ok("")),
                Err(status) => return (messages, status),
            }
        }
    })
    .await
    .expect("an answer")
}

/// A bidirectional call of `path` sending `messages` then closing: what
/// came back, and the final status.
async fn bidi(
    server: &ServerHandle,
    path: &'static str,
    messages: Vec<Vec<u8>>,
) -> (Vec<Vec<u8>>, tonic::Status) {
    let mut grpc = grpc(server).await;
    let path = http::uri::PathAndQuery::from_static(path);
    tokio::time::timeout(WAIT, async {
        let outbound = futures::stream::iter(messages);
        let mut stream = match grpc.streaming(request(outbound, None), path, Raw).await {
            Ok(r) => r.into_inner(),
            Err(status) => return (vec![], status),
        };
        let mut received = vec![];
        loop {
            match stream.message().await {
                Ok(Some(m)) => received.push(m),
                Ok(None) => return (received, tonic::Status::ok("")),
                Err(status) => return (received, status),
            }
        }
    })
    .await
    .expect("an answer")
}

fn assert_parse_error(status: &tonic::Status, what: &str) {
    assert_eq!(status.code(), Code::InvalidArgument, "{what}: {status:?}");
    let err = A2aError::from_grpc_status(status);
    assert_eq!(err.kind, ErrorKind::ParseError, "{what}: {err:?}");
}

#[tokio::test]
async fn garbage_to_the_a2a_services_is_invalid_argument() {
    let server = server().await;
    for (what, path, version) in [
        ("1.0", "/lf.a2a.v1.A2AService/SendMessage", Some("1.0")),
        ("0.3", "/a2a.v1.A2AService/SendMessage", Some("0.3")),
        ("0.3 without a version", "/a2a.v1.A2AService/GetTask", None),
    ] {
        let status = unary(&server, path, GARBAGE, version).await.unwrap_err();
        assert_parse_error(&status, what);
    }
    // A streaming method's request is refused alike.
    let mut grpc = grpc(&server).await;
    let path = http::uri::PathAndQuery::from_static("/a2a.v1.A2AService/SendStreamingMessage");
    let call = grpc.server_streaming(request(GARBAGE.to_vec(), Some("0.3")), path, Raw);
    let status = tokio::time::timeout(WAIT, call)
        .await
        .expect("an answer")
        .unwrap_err();
    assert_parse_error(&status, "0.3 streaming");

    // Good requests are still served.
    let get = agentwire_server::types::v0_3::grpc::proto::GetTaskRequest {
        name: "tasks/nope".into(),
        ..Default::default()
    };
    let status = unary(
        &server,
        "/a2a.v1.A2AService/GetTask",
        &get.encode_to_vec(),
        Some("0.3"),
    )
    .await
    .unwrap_err();
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
}

#[tokio::test]
async fn garbage_to_the_health_service_is_invalid_argument() {
    let server = server().await;
    let status = unary(&server, "/grpc.health.v1.Health/Check", GARBAGE, None)
        .await
        .unwrap_err();
    assert_parse_error(&status, "Check");
    let (messages, status) =
        server_streaming(&server, "/grpc.health.v1.Health/Watch", GARBAGE).await;
    assert!(messages.is_empty());
    assert_parse_error(&status, "Watch");

    // Too big for a health check: RESOURCE_EXHAUSTED, not OUT_OF_RANGE.
    let big = tonic_health::pb::HealthCheckRequest {
        service: "x".repeat(100_000),
    };
    let status = unary(
        &server,
        "/grpc.health.v1.Health/Check",
        &big.encode_to_vec(),
        None,
    )
    .await
    .unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");

    // A real check is answered.
    let check = tonic_health::pb::HealthCheckRequest {
        service: String::new(),
    };
    let answer = unary(
        &server,
        "/grpc.health.v1.Health/Check",
        &check.encode_to_vec(),
        None,
    )
    .await
    .expect("a health answer");
    tonic_health::pb::HealthCheckResponse::decode(answer.as_slice()).expect("a health response");
}

#[tokio::test]
async fn garbage_to_server_reflection_is_invalid_argument() {
    let server = server().await;
    let list = tonic_reflection::pb::v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(
            tonic_reflection::pb::v1::server_reflection_request::MessageRequest::ListServices(
                String::new(),
            ),
        ),
    }
    .encode_to_vec();
    for path in [
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
    ] {
        // Garbage: the refusal (tonic alone ends with OK, as if nothing
        // were wrong).
        let (received, status) = bidi(&server, path, vec![GARBAGE.to_vec()]).await;
        assert!(received.is_empty(), "{path}: {received:?}");
        assert_parse_error(&status, path);

        let (received, status) = bidi(&server, path, vec![list.clone()]).await;
        assert_eq!(received.len(), 1, "{path}");
        assert_eq!(status.code(), Code::Ok, "{path}: {status:?}");
    }
}
