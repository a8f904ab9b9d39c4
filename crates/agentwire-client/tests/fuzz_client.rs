//! Fuzzing of the client's network decoders: the Server-Sent Events parser
//! (any bytes, any split into chunks; generated events round trip), the
//! gRPC framing of answers (the length-prefixed frames of a response body,
//! served by a hostile HTTP/2 server on 127.0.0.1), and the agent card
//! parser and card URL handling. The properties: no panic, a bounded
//! answer, a clear error for what is malformed, round trips where they
//! exist. See `fuzz_support` (shared with agentwire-types) for the case
//! counts and the corpus.

#[path = "../../agentwire-types/tests/fuzz_support/mod.rs"]
mod fuzz_support;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use agentwire_client::card::{agent_card_url, card_location, parse_agent_card};
use agentwire_client::sse::{SseEvent, SseParser};
use agentwire_client::{CallOptions, GrpcTransport, Transport};
use agentwire_types::{GetTaskRequest, SubscribeToTaskRequest, Task};
use bytes::Bytes;
use futures::StreamExt;
use fuzz_support::{config, corpus, mutated, seeds};
use proptest::prelude::*;

// Server-Sent Events.

fn parse(chunks: &[&[u8]], max: usize) -> (Vec<SseEvent>, Option<String>) {
    let mut parser = SseParser::new(max);
    let mut out = VecDeque::new();
    for chunk in chunks {
        if let Err(e) = parser.push(chunk, &mut out) {
            return (out.into(), Some(e));
        }
    }
    (out.into(), None)
}

/// Splits `bytes` at the given cut points (empty chunks included).
fn split<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut chunks = Vec::new();
    let mut from = 0;
    for p in points {
        chunks.push(&bytes[from..p]);
        from = p;
    }
    chunks.push(&bytes[from..]);
    chunks
}

/// However a stream is cut into chunks, the same events come out.
fn check_sse(bytes: &[u8], cuts: &[usize]) -> Result<(), TestCaseError> {
    let (whole, whole_err) = parse(&[bytes], usize::MAX);
    prop_assert!(whole_err.is_none());
    let (chunked, chunked_err) = parse(&split(bytes, cuts), usize::MAX);
    prop_assert!(chunked_err.is_none());
    prop_assert_eq!(&chunked, &whole, "cut at {:?}", cuts);
    // A small limit fails cleanly, never panics.
    let _ = parse(&split(bytes, cuts), 16);
    Ok(())
}

const SSE_SEEDS: &[&[u8]] = &[
    b"data: {\"a\":1}\n\ndata: {\"b\":2}\n\n",
    b"\xEF\xBB\xBFevent: update\r\nid: 7\r\ndata: h\xC3\xA9llo\r\ndata: w\r\n\r\n",
    b": keep-alive\n\nretry: 10\nfoo: bar\ndata: x\r\rdata:y\rid\n\n",
    b"data: a\r\n\r\ndata: b\r\rdata: c\n\nid: \x00\ndata\n\n",
];

/// Generated events and how they are written: every line end, comments,
/// optional spaces; parsing gives the events back.
/// One event: its type (none: `message`), data lines and id.
type GenEvent = (Option<String>, Vec<String>, Option<String>);

fn sse_events() -> impl Strategy<Value = (Vec<GenEvent>, Vec<u8>)> {
    let line_text = "[^\r\n\u{0}]{0,12}";
    let event = (
        prop::option::of("[a-z]{1,8}"),
        prop::collection::vec(line_text, 1..4),
        prop::option::of("[a-zA-Z0-9-]{0,6}"),
    );
    // A CR then a LF is one line end, so a stream ends its lines with CR
    // alone, or with a mix of LF and CRLF.
    let ends = prop_oneof![
        Just(vec!["\r"]),
        prop::collection::vec(prop::sample::select(vec!["\n", "\r\n"]), 64),
    ];
    (
        prop::collection::vec(event, 0..5),
        ends,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(events, ends, bom, comments)| {
            let mut out = Vec::new();
            if bom {
                out.extend_from_slice(b"\xEF\xBB\xBF");
            }
            let mut e = 0;
            let mut end = |out: &mut Vec<u8>| {
                out.extend_from_slice(ends[e % ends.len()].as_bytes());
                e += 1;
            };
            for (name, data, id) in &events {
                if comments {
                    out.extend_from_slice(b": ping");
                    end(&mut out);
                }
                if let Some(name) = name {
                    out.extend_from_slice(format!("event: {name}").as_bytes());
                    end(&mut out);
                }
                if let Some(id) = id {
                    out.extend_from_slice(format!("id:{id}").as_bytes());
                    end(&mut out);
                }
                for line in data {
                    out.extend_from_slice(format!("data: {line}").as_bytes());
                    end(&mut out);
                }
                end(&mut out);
            }
            (events, out)
        })
}

// gRPC framing: a server whose answer is the case's bytes.

/// What the hostile server answers next: the body of the response (the
/// frames) and the grpc-status of its trailers.
#[derive(Clone, Default)]
struct Reply {
    body: Vec<u8>,
    status: Option<&'static str>,
}

struct Hostile {
    addr: std::net::SocketAddr,
    reply: Arc<Mutex<Reply>>,
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime")
    })
}

fn hostile() -> &'static Hostile {
    static SERVER: OnceLock<Hostile> = OnceLock::new();
    SERVER.get_or_init(|| {
        let reply = Arc::new(Mutex::new(Reply::default()));
        let listener = runtime()
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("a port");
        let addr = listener.local_addr().expect("an address");
        let shared = reply.clone();
        runtime().spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let shared = shared.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |_req: http::Request<hyper::body::Incoming>| {
                            let reply = shared.lock().map(|r| r.clone()).unwrap_or_default();
                            async move { Ok::<_, Infallible>(grpc_response(reply)) }
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
        Hostile { addr, reply }
    })
}

type Frames = http_body_util::StreamBody<
    futures::stream::Iter<std::vec::IntoIter<Result<hyper::body::Frame<Bytes>, Infallible>>>,
>;

fn grpc_response(reply: Reply) -> http::Response<Frames> {
    let mut frames = Vec::new();
    // The body in two pieces, so a frame is split across data frames.
    let mid = reply.body.len() / 2;
    for piece in [&reply.body[..mid], &reply.body[mid..]] {
        frames.push(Ok(hyper::body::Frame::data(Bytes::copy_from_slice(piece))));
    }
    if let Some(status) = reply.status {
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static(status));
        frames.push(Ok(hyper::body::Frame::trailers(trailers)));
    }
    http::Response::builder()
        .header("content-type", "application/grpc")
        .body(http_body_util::StreamBody::new(futures::stream::iter(
            frames,
        )))
        .expect("a response with a constant header")
}

fn framed(message: &[u8], compressed: bool) -> Vec<u8> {
    let mut out = vec![u8::from(compressed)];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// Calls GetTask and SubscribeToTask against the server answering `reply`:
/// every outcome is an answer or an error, in bounded time.
fn check_grpc(reply: Reply) -> Result<(Result<Task, String>, usize), TestCaseError> {
    // One hostile server for the tests running in parallel: one call at a
    // time, so that each gets its own reply.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let server = hostile();
    *server
        .reply
        .lock()
        .map_err(|_| TestCaseError::fail("lock"))? = reply;
    runtime().block_on(async {
        let transport = GrpcTransport::new(format!("127.0.0.1:{}", server.addr.port()))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let options = CallOptions::new().with_timeout(Duration::from_secs(10));
        let task = transport
            .get_task(
                GetTaskRequest {
                    id: "t".into(),
                    ..Default::default()
                },
                &options,
            )
            .await
            .map_err(|e| e.to_string());
        let mut events = 0;
        let sub = transport
            .subscribe_to_task(
                SubscribeToTaskRequest {
                    id: "t".into(),
                    ..Default::default()
                },
                &options,
            )
            .await;
        if let Ok(mut stream) = sub {
            let read = async {
                while let Some(item) = stream.next().await {
                    events += 1;
                    if item.is_err() {
                        break;
                    }
                }
            };
            tokio::time::timeout(Duration::from_secs(10), read)
                .await
                .map_err(|_| TestCaseError::fail("the stream did not end within 10 s"))?;
        }
        Ok((task, events))
    })
}

fn task_bytes(task: &Task) -> Vec<u8> {
    prost::Message::encode_to_vec(task)
}

// Agent cards.

const CARD_SEEDS: &[&[u8]] = &[
    br#"{"name":"Echo","description":"d","version":"1.0.0","supportedInterfaces":[{"url":"http://127.0.0.1:1","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{"streaming":true,"extendedAgentCard":true},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"s","name":"S","description":"d","tags":["t"]}]}"#,
    br#"{"name":"Old","url":"http://127.0.0.1:1","protocolVersion":"0.3.0","version":"1"}"#,
    br#"{"name":"S","supported_interfaces":[{"url":"grpc://h:1","protocol_binding":"GRPC"}],"securitySchemes":{"o":{"oauth2SecurityScheme":{"flows":{"clientCredentials":{"tokenUrl":"https://t","scopes":{"a":"b"}}}}}},"signatures":[{"protected":"x","signature":"y","header":{"k":1}}]}"#,
];

fn check_card(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(card) = parse_agent_card(bytes) {
        // What was accepted is a card this crate can write and read again.
        let json = serde_json::to_vec(&card).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let back = parse_agent_card(&json);
        prop_assert!(back.is_ok(), "{:?}", back.err());
    }
    let text = String::from_utf8_lossy(bytes);
    for reference in [text.as_ref(), text.trim()] {
        if let Ok(url) = agent_card_url(reference) {
            prop_assert!(
                url.starts_with("http://") || url.starts_with("https://"),
                "{url}"
            );
        }
        let _ = card_location(reference);
    }
    Ok(())
}

#[test]
fn corpus_replays() {
    for (name, bytes) in corpus("sse", SSE_SEEDS) {
        let mut cut_sets = vec![vec![], vec![1], vec![0, 0, 3], (0..bytes.len()).collect()];
        // An empty chunk between the CR and the LF of a line end (found by
        // the fuzzing: it made the LF a second, blank line).
        for (i, _) in bytes.iter().enumerate().filter(|(_, b)| **b == b'\r') {
            cut_sets.push(vec![i + 1, i + 1]);
        }
        for cuts in cut_sets {
            if let Err(e) = check_sse(&bytes, &cuts) {
                panic!("SSE corpus input {name}: {e}");
            }
        }
    }
    for (name, bytes) in corpus("card", CARD_SEEDS) {
        if let Err(e) = check_card(&bytes) {
            panic!("card corpus input {name}: {e}");
        }
    }
    for (name, bytes) in corpus("grpc", &[b"\x00\x00\x00\x00\x00", b"\x00\xff\xff\xff\xff"]) {
        for status in [None, Some("0"), Some("13")] {
            if let Err(e) = check_grpc(Reply {
                body: bytes.clone(),
                status,
            }) {
                panic!("gRPC corpus input {name}: {e}");
            }
        }
    }
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn sse_any_bytes_any_chunks(
        bytes in mutated(seeds(&corpus("sse", SSE_SEEDS)), 8),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        check_sse(&bytes, &cuts)?;
    }

    #[test]
    fn sse_generated_events_round_trip(
        (events, bytes) in sse_events(),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let (got, err) = parse(&split(&bytes, &cuts), usize::MAX);
        prop_assert!(err.is_none());
        prop_assert_eq!(got.len(), events.len());
        let mut last_id = None;
        for (ev, (name, data, id)) in got.iter().zip(&events) {
            if id.is_some() {
                last_id = id.clone();
            }
            prop_assert_eq!(&ev.event, name.as_deref().unwrap_or("message"));
            prop_assert_eq!(&ev.data, &data.join("\n"));
            prop_assert_eq!(&ev.id, &last_id);
        }
    }

    #[test]
    fn agent_cards_of_mutated_inputs(bytes in mutated(seeds(&corpus("card", CARD_SEEDS)), 8)) {
        check_card(&bytes)?;
    }
}

proptest! {
    // Each case is two calls over HTTP/2: fewer cases.
    #![proptest_config(config(48))]

    #[test]
    fn grpc_mutated_frames(
        body in mutated(seeds(&corpus("grpc", &[
            b"\x00\x00\x00\x00\x05\x0a\x03t-1",
            b"\x00\x00\x00\x00\x02\x0a\x00\x00\x00\x00\x00\x00",
            b"\x01\x00\x00\x00\x01\x00",
        ])), 6),
        status in prop::sample::select(vec![None, Some("0"), Some("3"), Some("13"), Some("x")]),
    ) {
        let _answer = check_grpc(Reply { body, status })?;
    }

    /// A well-framed task arrives whole, wherever the frame is split.
    #[test]
    fn grpc_framed_task_round_trip(id in "[a-z0-9-]{1,16}", context in "[a-z]{0,8}") {
        let task = Task { id, context_id: context, ..Default::default() };
        let (got, _) = check_grpc(Reply { body: framed(&task_bytes(&task), false), status: Some("0") })?;
        prop_assert_eq!(got, Ok(task));
    }
}
