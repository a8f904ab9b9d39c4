//! The client's response limits found by generated answers (issue 40): a
//! hostile server on 127.0.0.1 answers with bodies, events, gRPC messages
//! and agent cards around the client's size limit (with and without a
//! `Content-Length`), and with tasks and cards whose metadata, data and
//! extension params are nested at, just over and far over the nesting
//! limit (up to a million levels). The properties: within the size limit
//! an answer is read whole; over it, `ClientError::ResponseTooLarge`;
//! content nested past the limit is an error of the client (never a panic
//! nor a stack overflow, which would end this process), content within it
//! reads back equal; every call ends within a bound.
//!
//! Case counts: see `fuzz_support` (`PROPTEST_CASES` raises them).

#[path = "../../agentwire-types/tests/fuzz_support/mod.rs"]
mod fuzz_support;

use std::convert::Infallible;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use agentwire_client::card::CardResolver;
use agentwire_client::{
    CallOptions, ClientError, GrpcTransport, JsonRpcTransport, RestTransport, Transport,
};
use agentwire_types::limits::MAX_STRUCT_DEPTH;
use agentwire_types::{GetTaskRequest, SubscribeToTaskRequest, Task};
use bytes::Bytes;
use futures::StreamExt;
use fuzz_support::config;
use fuzz_support::hostile::{
    DEPTH_LIMIT, Nest, depth, field, grpc_frame, nested_json, nested_struct_proto,
    nested_value_proto, struct_nest, value_nest,
};
use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        // The servers' tasks share these workers with the tests that run
        // at once (each reading megabytes of nested content): two workers
        // were starved on a loaded machine until a connection timed out.
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(6)
            .enable_all()
            .build()
            .expect("a runtime")
    })
}

/// The client's limit in these tests.
const LIMIT: usize = 16 * 1024;

// ----- an HTTP/1.1 server answering what the case says ----------------------

/// Makes an answer's body from the request's body.
type MakeBody = Arc<dyn Fn(&[u8]) -> Vec<u8> + Send + Sync>;

/// What the HTTP/1.1 server answers next.
#[derive(Clone, Default)]
struct Reply {
    content_type: &'static str,
    /// Makes the body from the request's body (a JSON-RPC answer echoes
    /// the request's id).
    body: Option<MakeBody>,
    /// Without a `Content-Length` (chunked, in pieces).
    chunked: bool,
}

struct Http1 {
    port: u16,
    reply: Arc<Mutex<Reply>>,
}

/// One call at a time (each test sets the reply of the next).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn http1() -> &'static Http1 {
    static SERVER: OnceLock<Http1> = OnceLock::new();
    SERVER.get_or_init(|| {
        let reply = Arc::new(Mutex::new(Reply::default()));
        let listener = runtime()
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("a port");
        let port = listener.local_addr().expect("an address").port();
        let shared = reply.clone();
        runtime().spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let reply = shared.lock().map(|r| r.clone()).unwrap_or_default();
                tokio::spawn(serve_one(tcp, reply));
            }
        });
        Http1 { port, reply }
    })
}

/// Reads one request and answers it, then closes the connection.
async fn serve_one(mut tcp: tokio::net::TcpStream, reply: Reply) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let (head_end, length) = loop {
        let Ok(n) = tcp.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (end + 4, length);
        }
    };
    while buf.len() < head_end + length {
        match tcp.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let request_body = &buf[head_end..head_end + length];
    let body = reply
        .body
        .as_ref()
        .map(|f| f(request_body))
        .unwrap_or_default();
    let mut out = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {}\r\nconnection: close\r\n",
        reply.content_type
    )
    .into_bytes();
    if reply.chunked {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n");
        for piece in body.chunks(4096) {
            out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            out.extend_from_slice(piece);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"0\r\n\r\n");
    } else {
        out.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
        out.extend_from_slice(&body);
    }
    // The client may stop reading (a body over its limit): errors ignored.
    let _ = tcp.write_all(&out).await;
    let _ = tcp.shutdown().await;
}

/// The id of a JSON-RPC request (echoed in the answer).
fn request_id(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .map(|v| v["id"].to_string())
        .unwrap_or_else(|| "null".into())
}

// ----- an HTTP/2 server for gRPC ----------------------------------------------

struct Http2 {
    port: u16,
    body: Arc<Mutex<Vec<u8>>>,
}

fn http2() -> &'static Http2 {
    static SERVER: OnceLock<Http2> = OnceLock::new();
    SERVER.get_or_init(|| {
        let body = Arc::new(Mutex::new(Vec::new()));
        let listener = runtime()
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("a port");
        let port = listener.local_addr().expect("an address").port();
        let shared = body.clone();
        runtime().spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let shared = shared.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |_req: http::Request<hyper::body::Incoming>| {
                            let body = shared.lock().map(|b| b.clone()).unwrap_or_default();
                            async move { Ok::<_, Infallible>(grpc_response(body)) }
                        },
                    );
                    let _ = hyper::server::conn::http2::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                    .await;
                });
            }
        });
        Http2 { port, body }
    })
}

type Frames = http_body_util::StreamBody<
    futures::stream::Iter<std::vec::IntoIter<Result<hyper::body::Frame<Bytes>, Infallible>>>,
>;

fn grpc_response(body: Vec<u8>) -> http::Response<Frames> {
    let mut frames: Vec<Result<hyper::body::Frame<Bytes>, Infallible>> = body
        .chunks(16 * 1024)
        .map(|c| Ok(hyper::body::Frame::data(Bytes::copy_from_slice(c))))
        .collect();
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    frames.push(Ok(hyper::body::Frame::trailers(trailers)));
    http::Response::builder()
        .header("content-type", "application/grpc")
        .body(http_body_util::StreamBody::new(futures::stream::iter(
            frames,
        )))
        .expect("a response with a constant header")
}

// ----- calls ------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    /// JSON-RPC `GetTask`.
    JsonRpc,
    /// HTTP+JSON `GET /tasks/{id}`.
    Rest,
    /// JSON-RPC `SubscribeToTask`: one event.
    Sse,
    /// gRPC `GetTask`.
    Grpc,
}

fn options() -> CallOptions {
    CallOptions::new().with_timeout(Duration::from_secs(20))
}

/// Gets task `t` the `way` said from a server answering `task_json` (the
/// task's JSON text) or `task_proto`, with the client's limit `limit`.
fn get(
    way: Way,
    limit: usize,
    chunked: bool,
    task_json: Arc<dyn Fn() -> Vec<u8> + Send + Sync>,
    task_proto: impl FnOnce() -> Vec<u8>,
) -> Result<Result<Task, ClientError>, TestCaseError> {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // (Started outside of the runtime's `block_on`, which they use.)
    let (_, _) = (http1(), http2());
    let fut = async {
        match way {
            Way::Grpc => {
                let server = http2();
                *server
                    .body
                    .lock()
                    .map_err(|_| TestCaseError::fail("lock"))? = grpc_frame(&task_proto());
                let transport = GrpcTransport::new(format!("127.0.0.1:{}", server.port))
                    .map_err(|e| TestCaseError::fail(e.to_string()))?
                    .with_max_response_bytes(limit);
                Ok(transport
                    .get_task(
                        GetTaskRequest {
                            id: "t".into(),
                            ..Default::default()
                        },
                        &options(),
                    )
                    .await)
            }
            Way::JsonRpc | Way::Rest | Way::Sse => {
                let server = http1();
                let reply = match way {
                    Way::Rest => Reply {
                        content_type: "application/json",
                        body: Some(Arc::new(move |_: &[u8]| task_json())),
                        chunked,
                    },
                    Way::JsonRpc => Reply {
                        content_type: "application/json",
                        body: Some(Arc::new(move |req: &[u8]| {
                            let mut out =
                                format!(r#"{{"jsonrpc":"2.0","id":{},"result":"#, request_id(req))
                                    .into_bytes();
                            out.extend(task_json());
                            out.push(b'}');
                            out
                        })),
                        chunked,
                    },
                    _ => Reply {
                        content_type: "text/event-stream",
                        body: Some(Arc::new(move |req: &[u8]| {
                            let mut out = format!(
                                r#"data: {{"jsonrpc":"2.0","id":{},"result":{{"task":"#,
                                request_id(req)
                            )
                            .into_bytes();
                            out.extend(task_json());
                            out.extend_from_slice(b"}}\n\n");
                            out
                        })),
                        chunked,
                    },
                };
                *server
                    .reply
                    .lock()
                    .map_err(|_| TestCaseError::fail("lock"))? = reply;
                let base = format!("http://127.0.0.1:{}", server.port);
                if way == Way::Rest {
                    let t = RestTransport::new(base)
                        .map_err(|e| TestCaseError::fail(e.to_string()))?
                        .with_max_response_bytes(limit);
                    return Ok(t
                        .get_task(
                            GetTaskRequest {
                                id: "t".into(),
                                ..Default::default()
                            },
                            &options(),
                        )
                        .await);
                }
                let t = JsonRpcTransport::new(base)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?
                    .with_max_response_bytes(limit);
                if way == Way::JsonRpc {
                    return Ok(t
                        .get_task(
                            GetTaskRequest {
                                id: "t".into(),
                                ..Default::default()
                            },
                            &options(),
                        )
                        .await);
                }
                let stream = t
                    .subscribe_to_task(
                        SubscribeToTaskRequest {
                            id: "t".into(),
                            ..Default::default()
                        },
                        &options(),
                    )
                    .await;
                let mut stream = match stream {
                    Ok(s) => s,
                    Err(e) => return Ok(Err(e)),
                };
                let first = stream.next().await;
                Ok(match first {
                    Some(Ok(agentwire_types::StreamResponse {
                        payload: Some(agentwire_types::proto::stream_response::Payload::Task(t)),
                    })) => Ok(t),
                    Some(Ok(other)) => Err(ClientError::InvalidResponse(format!(
                        "another event: {other:?}"
                    ))),
                    Some(Err(e)) => Err(e),
                    None => Err(ClientError::InvalidResponse("no event".into())),
                })
            }
        }
    };
    runtime().block_on(async {
        tokio::time::timeout(Duration::from_secs(30), fut)
            .await
            .map_err(|_| TestCaseError::fail("no answer within 30 s"))?
    })
}

fn way() -> impl Strategy<Value = Way> {
    prop::sample::select(vec![Way::JsonRpc, Way::Rest, Way::Sse, Way::Grpc])
}

/// A task whose metadata holds a string of `pad` bytes, as JSON and as
/// protobuf.
fn padded_task(pad: usize) -> (Vec<u8>, Vec<u8>, Task) {
    let json = format!(
        r#"{{"id":"t","contextId":"c","metadata":{{"p":"{}"}}}}"#,
        "x".repeat(pad)
    );
    let task: Task = serde_json::from_str(&json).unwrap_or_default();
    let proto = prost::Message::encode_to_vec(&task);
    (json.into_bytes(), proto, task)
}

/// Where nested content goes in a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    TaskMetadata,
    ArtifactMetadata,
    PartMetadata,
    /// A data part of the status message (the deepest place).
    StatusData,
    HistoryMetadata,
}

fn place() -> impl Strategy<Value = Place> {
    prop::sample::select(vec![
        Place::TaskMetadata,
        Place::ArtifactMetadata,
        Place::PartMetadata,
        Place::StatusData,
        Place::HistoryMetadata,
    ])
}

/// A task with content nested `depth` levels at `place`, as JSON text.
fn nested_task_json(place: Place, depth: usize, nest: Nest) -> Vec<u8> {
    let c = nested_json(depth, nest);
    let part = r#"{"text":"x"}"#;
    match place {
        Place::TaskMetadata => format!(r#"{{"id":"t","metadata":{c}}}"#),
        Place::ArtifactMetadata => {
            format!(r#"{{"id":"t","artifacts":[{{"artifactId":"a","parts":[{part}],"metadata":{c}}}]}}"#)
        }
        Place::PartMetadata => {
            format!(r#"{{"id":"t","artifacts":[{{"artifactId":"a","parts":[{{"text":"x","metadata":{c}}}]}}]}}"#)
        }
        Place::StatusData => format!(
            r#"{{"id":"t","status":{{"state":"TASK_STATE_WORKING","message":{{"messageId":"s","role":"ROLE_AGENT","parts":[{{"data":{c}}}]}}}}}}"#
        ),
        Place::HistoryMetadata => format!(
            r#"{{"id":"t","history":[{{"messageId":"h","role":"ROLE_USER","parts":[{part}],"metadata":{c}}}]}}"#
        ),
    }
    .into_bytes()
}

/// The same task as protobuf (built by hand: a million levels).
fn nested_task_proto(place: Place, depth: usize, nest: Nest) -> Vec<u8> {
    // Task: id 1, status 3, artifacts 4, history 5, metadata 6. Message:
    // message_id 1, role 4, parts 5, metadata 6. Part: text 1, data 4,
    // metadata 5. Artifact: artifact_id 1, parts 4, metadata 5. TaskStatus:
    // state 1, message 2.
    let mut task = field(1, b"t");
    let text_part = field(1, b"x");
    match place {
        Place::TaskMetadata => task.extend(field(6, &nested_struct_proto(depth, nest))),
        Place::ArtifactMetadata => {
            let mut a = field(1, b"a");
            a.extend(field(4, &text_part));
            a.extend(field(5, &nested_struct_proto(depth, nest)));
            task.extend(field(4, &a));
        }
        Place::PartMetadata => {
            let mut p = text_part.clone();
            p.extend(field(5, &nested_struct_proto(depth, nest)));
            let mut a = field(1, b"a");
            a.extend(field(4, &p));
            task.extend(field(4, &a));
        }
        Place::StatusData => {
            let mut m = field(1, b"s");
            m.extend(fuzz_support::hostile::varint_field(4, 2));
            m.extend(field(5, &field(4, &nested_value_proto(depth, nest))));
            let mut s = fuzz_support::hostile::varint_field(1, 2);
            s.extend(field(2, &m));
            task.extend(field(3, &s));
        }
        Place::HistoryMetadata => {
            let mut m = field(1, b"h");
            m.extend(fuzz_support::hostile::varint_field(4, 1));
            m.extend(field(5, &text_part));
            m.extend(field(6, &nested_struct_proto(depth, nest)));
            task.extend(field(5, &m));
        }
    }
    task
}

#[test]
fn the_limit_is_the_one_the_suite_generates_around() {
    assert_eq!(MAX_STRUCT_DEPTH, DEPTH_LIMIT);
}

proptest! {
    #![proptest_config(config(96))]

    /// Unary answers, stream events and gRPC messages around the client's
    /// limit: within (with a margin for what frames the content), read
    /// whole and equal; over, `ResponseTooLarge`.
    #[test]
    fn answers_around_the_response_limit(
        way in way(),
        chunked in any::<bool>(),
        delta in prop_oneof![Just(0i64), Just(1), Just(-1), -300i64..300, Just(LIMIT as i64), Just(-(LIMIT as i64) / 2)],
    ) {
        // The bytes the limit counts: the whole body (unary), the event,
        // the gRPC message; the padding makes the task's JSON (or
        // protobuf) that size, and the frame around it adds a little.
        let target = (LIMIT as i64 + delta).max(64) as usize;
        let (json, _, _) = padded_task(0);
        let pad = target.saturating_sub(json.len());
        let (json, proto, task) = padded_task(pad);
        let framing = match way {
            Way::JsonRpc => 40,
            Way::Sse => 60,
            Way::Rest | Way::Grpc => 0,
        };
        let size = if way == Way::Grpc { proto.len() } else { json.len() + framing };
        let got = get(way, LIMIT, chunked, Arc::new(move || json.clone()), || proto)?;
        // Exact where the framing is none; a margin of the framing where
        // the envelope adds bytes.
        if size + framing <= LIMIT {
            prop_assert!(got.as_ref().is_ok_and(|t| *t == task), "{:?} {} bytes: {:?}", way, size, got.err());
        } else if size > LIMIT + framing {
            prop_assert!(
                matches!(got, Err(ClientError::ResponseTooLarge { limit: LIMIT, .. })),
                "{:?} {} bytes: {:?}", way, size, got
            );
        } else {
            prop_assert!(
                got.is_ok() || matches!(got, Err(ClientError::ResponseTooLarge { .. })),
                "{:?} {} bytes: {:?}", way, size, got
            );
        }
    }

    /// Tasks with content nested at any depth in every place: within the
    /// limit, read back; over it, an error of the client (JSON: refused by
    /// the nesting limit or by the JSON reader's; protobuf: by the nesting
    /// limit, or by the decoder's recursion limit when far over), never a
    /// panic.
    #[test]
    fn nested_content_in_answers(
        way in way(),
        place in place(),
        struct_nest in struct_nest(),
        value_nest in value_nest(),
        depth in depth(),
    ) {
        let nest = if place == Place::StatusData { value_nest } else { struct_nest };
        let depth = if place == Place::StatusData { depth } else { depth.max(1) };
        let got = get(
            way,
            64 << 20,
            false,
            Arc::new(move || nested_task_json(place, depth, nest)),
            || nested_task_proto(place, depth, nest),
        )?;
        if depth <= DEPTH_LIMIT {
            prop_assert!(got.is_ok(), "{:?} {:?} {} levels: {:?}", way, place, depth, got.err());
        } else {
            // gRPC too: content just over the limit, which protobuf's own
            // recursion limit (100 levels of messages, three per object
            // level) lets through, is refused by the client's check.
            prop_assert!(got.is_err(), "{:?} {:?} {} levels were accepted", way, place, depth);
            if way == Way::Grpc && depth <= 40 {
                let e = got.err().map(|e| e.to_string()).unwrap_or_default();
                prop_assert!(e.contains("levels deep"), "{:?} {} levels: {}", place, depth, e);
            }
        }
    }

    /// Agent cards around the card limit, and with extension params
    /// nested at any depth.
    #[test]
    fn agent_cards_around_their_limits(
        chunked in any::<bool>(),
        delta in prop_oneof![Just(0i64), Just(1), Just(-1), -200i64..200],
        depth in depth(),
        nest in struct_nest(),
    ) {
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let card = |pad: usize, params: &str| {
            format!(
                r#"{{"name":"E{}","description":"d","version":"1","supportedInterfaces":[{{"url":"http://127.0.0.1:1","protocolBinding":"JSONRPC","protocolVersion":"1.0"}}],"capabilities":{{"extensions":[{{"uri":"urn:x","params":{params}}}]}},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[]}}"#,
                "d".repeat(pad)
            )
        };
        let small = "{}";
        let target = (LIMIT as i64 + delta) as usize;
        let pad = target.saturating_sub(card(0, small).len());
        let sized = card(pad, small).into_bytes();
        let size = sized.len();
        let deep = card(0, &nested_json(depth, nest)).into_bytes();
        let server = http1();
        let base = format!("http://127.0.0.1:{}", server.port);
        for (body, limit) in [(sized, LIMIT), (deep, 64usize << 20)] {
            *server.reply.lock().map_err(|_| TestCaseError::fail("lock"))? = Reply {
                content_type: "application/json",
                body: Some(Arc::new(move |_: &[u8]| body.clone())),
                chunked,
            };
            let resolver = CardResolver::new().with_max_card_bytes(limit);
            let got = runtime().block_on(async {
                tokio::time::timeout(Duration::from_secs(30), resolver.resolve(&base))
                    .await
                    .map_err(|_| TestCaseError::fail("no card within 30 s"))
            })?;
            if limit == LIMIT {
                if size <= LIMIT {
                    prop_assert!(got.is_ok(), "{} bytes: {:?}", size, got.err());
                } else {
                    prop_assert!(
                        matches!(got, Err(ClientError::ResponseTooLarge { limit: LIMIT, .. })),
                        "{} bytes: {:?}", size, got.err()
                    );
                }
            } else if depth <= DEPTH_LIMIT {
                prop_assert!(got.is_ok(), "params {} levels: {:?}", depth, got.err());
            } else {
                prop_assert!(got.is_err(), "params {} levels were accepted", depth);
            }
        }
    }
}
