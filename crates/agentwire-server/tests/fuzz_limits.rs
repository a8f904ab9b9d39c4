//! The read limits found by generated requests (issue 40): hostile content
//! (metadata and data nested at, just over and far over the nesting limit,
//! up to a million levels; lists, parts and values around their counts;
//! bodies and messages around their size limit; query parameters around
//! their bounds) placed in every `Struct` location and counted field of the
//! requests that carry them, sent through the real router (tower's
//! `oneshot`, no socket) on every binding of both protocol versions:
//! JSON-RPC, HTTP+JSON and gRPC of 1.0, and the 0.3 layer's three.
//!
//! The properties: within a limit, the request is accepted (or refused for
//! another reason); over it, it gets the binding's invalid-parameters error
//! naming the limit (JSON-RPC -32602, HTTP+JSON 400 `INVALID_ARGUMENT`, 0.3
//! HTTP+JSON 422, gRPC `INVALID_ARGUMENT`) or, for what is over the size of
//! a body, the size error (HTTP 413, gRPC `RESOURCE_EXHAUSTED`); never a panic, a
//! stack overflow (the test process would die), a 5xx or a gRPC
//! `INTERNAL`/`UNKNOWN`, and always an answer within 20 s.
//!
//! Case counts: see `fuzz_support` (`PROPTEST_CASES` raises them).

#[path = "../../agentwire-types/tests/fuzz_support/mod.rs"]
mod fuzz_support;

use std::sync::OnceLock;
use std::time::Duration;

use agentwire_server::{
    A2aResult, AgentExecutor, RequestContext, RequestHandler, RouterOptions, TaskUpdater, router,
};
use agentwire_types::limits::MAX_STRUCT_VALUES;
use agentwire_types::limits::{DEFAULT_MAX_PARTS, MAX_ID_BYTES, MAX_LIST_ITEMS, MAX_STRUCT_DEPTH};
use agentwire_types::{AgentCard, Artifact};
use axum::Router;
use axum::body::Body;
use fuzz_support::config;
use fuzz_support::hostile::{
    DEPTH_LIMIT, Nest, count_around, depth, field, grpc_frame, nested_json, nested_struct_proto,
    nested_value_proto, strings_json, struct_nest, value_nest, varint_field, wide_json,
    wide_struct_proto,
};
use http::{Method, Request};
use http_body_util::BodyExt;
use proptest::prelude::*;
use serde_json::Value;
use tower::ServiceExt;

struct Echo;

impl AgentExecutor for Echo {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.add_artifact(Artifact::text("echo", ctx.text()))
            .await?;
        task.complete().await
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        // The default stack of a worker (2 MiB), as in a server: a reader
        // that recursed on a million levels would overflow it.
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime")
    })
}

/// The largest body of the small app (the size properties).
const SMALL_BODY: usize = 64 * 1024;

/// The router of an echo agent, with the default options or with bodies of
/// at most [`SMALL_BODY`] bytes.
fn app(small: bool) -> Router {
    static APPS: OnceLock<(Router, Router)> = OnceLock::new();
    let (default, small_app) = APPS.get_or_init(|| {
        runtime().block_on(async {
            let make = |options: &RouterOptions| {
                let card = AgentCard::new("Echo", "echoes", "1.0.0");
                router(RequestHandler::builder(card, Echo).build(), options)
            };
            (
                make(&RouterOptions::default()),
                make(&RouterOptions {
                    max_body_bytes: SMALL_BODY,
                    ..RouterOptions::default()
                }),
            )
        })
    });
    if small { small_app } else { default }.clone()
}

/// An answer: status, headers, body and trailers.
struct Answer {
    status: u16,
    headers: http::HeaderMap,
    body: Vec<u8>,
    trailers: Option<http::HeaderMap>,
}

fn call(small: bool, request: Request<Body>) -> Result<Answer, TestCaseError> {
    let app = app(small);
    runtime().block_on(async {
        let fut = async {
            let response = app
                .oneshot(request)
                .await
                .map_err(|e| TestCaseError::fail(format!("router error: {e}")))?;
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            let collected = response
                .into_body()
                .collect()
                .await
                .map_err(|e| TestCaseError::fail(format!("body error: {e}")))?;
            let trailers = collected.trailers().cloned();
            Ok(Answer {
                status,
                headers,
                body: collected.to_bytes().to_vec(),
                trailers,
            })
        };
        tokio::time::timeout(Duration::from_secs(20), fut)
            .await
            .map_err(|_| TestCaseError::fail("no complete answer within 20 s"))?
    })
}

// ----- bindings and what they answered ---------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Binding {
    JsonRpc,
    Rest,
    Grpc,
    JsonRpc03,
    Rest03,
    Grpc03,
}

const BINDINGS: [Binding; 6] = [
    Binding::JsonRpc,
    Binding::Rest,
    Binding::Grpc,
    Binding::JsonRpc03,
    Binding::Rest03,
    Binding::Grpc03,
];

impl Binding {
    fn is_grpc(self) -> bool {
        matches!(self, Binding::Grpc | Binding::Grpc03)
    }
    fn is_v03(self) -> bool {
        matches!(self, Binding::JsonRpc03 | Binding::Rest03 | Binding::Grpc03)
    }
}

fn binding() -> impl Strategy<Value = Binding> {
    prop::sample::select(BINDINGS.to_vec())
}

/// What a request got.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// Answered with a result.
    Ok,
    /// The binding's invalid-parameters error.
    InvalidParams(String),
    /// Refused for its size (HTTP 413, gRPC `RESOURCE_EXHAUSTED`).
    TooLarge(String),
    /// Another error (a task not found, a content type...).
    Other(String),
}

impl Outcome {
    /// Whether this is the refusal of a limit whose message says `phrase`.
    fn is_limit(&self, phrase: &str) -> bool {
        matches!(self, Outcome::InvalidParams(m) if m.contains(phrase))
    }
}

/// Sends `body` (JSON text, or a protobuf message for gRPC) as `method` on
/// `binding` (`path` for the HTTP+JSON ones) and classifies the answer,
/// failing the case on a server error.
fn send(
    small: bool,
    binding: Binding,
    rpc_method: &str,
    rest: (Method, &str),
    body: Vec<u8>,
) -> Result<Outcome, TestCaseError> {
    let mut b = Request::builder();
    if !binding.is_v03() {
        b = b.header("a2a-version", "1.0");
    }
    let request = match binding {
        Binding::JsonRpc | Binding::JsonRpc03 => {
            let mut env = Vec::with_capacity(body.len() + 64);
            env.extend_from_slice(
                format!(r#"{{"jsonrpc":"2.0","id":7,"method":"{rpc_method}","params":"#).as_bytes(),
            );
            env.extend_from_slice(&body);
            env.push(b'}');
            b.method(Method::POST)
                .uri("/")
                .header("content-type", "application/json")
                .body(Body::from(env))
        }
        Binding::Rest | Binding::Rest03 => b
            .method(rest.0)
            .uri(rest.1)
            .header("content-type", "application/json")
            .body(Body::from(body)),
        Binding::Grpc | Binding::Grpc03 => {
            let service = if binding == Binding::Grpc {
                "lf.a2a.v1.A2AService"
            } else {
                "a2a.v1.A2AService"
            };
            b.method(Method::POST)
                .uri(format!("/{service}/{rpc_method}"))
                .version(http::Version::HTTP_2)
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(Body::from(grpc_frame(&body)))
        }
    }
    .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let answer = call(small, request)?;
    classify(binding, &answer)
}

fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    text.chars().take(400).collect()
}

fn classify(binding: Binding, a: &Answer) -> Result<Outcome, TestCaseError> {
    let text = excerpt(&a.body);
    // (0.3's HTTP+JSON answers "unsupported" with 501, as the 0.3 servers
    // do: not a server error.)
    let unsupported03 = binding == Binding::Rest03 && a.status == 501;
    prop_assert!(
        a.status < 500 || unsupported03,
        "{:?}: HTTP {} {}",
        binding,
        a.status,
        text
    );
    match binding {
        Binding::Grpc | Binding::Grpc03 => {
            let get = |name: &str| {
                a.trailers
                    .as_ref()
                    .and_then(|t| t.get(name))
                    .or_else(|| a.headers.get(name))
                    .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            };
            let status = get("grpc-status").and_then(|s| s.parse::<i32>().ok());
            let message = get("grpc-message")
                .map(|m| {
                    percent_encoding::percent_decode_str(&m)
                        .decode_utf8_lossy()
                        .into_owned()
                })
                .unwrap_or_default();
            let Some(status) = status else {
                return Err(TestCaseError::fail(format!(
                    "{binding:?}: no grpc-status (HTTP {})",
                    a.status
                )));
            };
            prop_assert!(
                !matches!(status, 2 | 13),
                "{:?}: grpc-status {} {}",
                binding,
                status,
                message
            );
            Ok(match status {
                0 => Outcome::Ok,
                3 => Outcome::InvalidParams(message),
                // (tonic: RESOURCE_EXHAUSTED for a message over
                // `max_decoding_message_size`.)
                8 | 11 => Outcome::TooLarge(message),
                _ => Outcome::Other(format!("grpc-status {status}: {message}")),
            })
        }
        Binding::JsonRpc | Binding::JsonRpc03 => {
            if a.status == 413 {
                return Ok(Outcome::TooLarge(text));
            }
            prop_assert_eq!(a.status, 200, "{:?}: {}", binding, text);
            let is_sse = a
                .headers
                .get(http::header::CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
            let v: Value = if is_sse {
                let body = String::from_utf8_lossy(&a.body);
                let first = body
                    .lines()
                    .find_map(|l| l.strip_prefix("data:"))
                    .unwrap_or("null");
                serde_json::from_str(first.trim_start())
            } else {
                serde_json::from_slice(&a.body)
            }
            .map_err(|e| TestCaseError::fail(format!("{binding:?}: not JSON ({e}): {text}")))?;
            if v.get("result").is_some() {
                return Ok(Outcome::Ok);
            }
            let code = v["error"]["code"].as_i64();
            let message = v["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            prop_assert!(
                code != Some(-32603),
                "{:?}: internal error {}",
                binding,
                text
            );
            Ok(match code {
                Some(-32602) => Outcome::InvalidParams(message),
                _ => Outcome::Other(format!("{code:?}: {message}")),
            })
        }
        Binding::Rest | Binding::Rest03 => {
            if (200..300).contains(&a.status) {
                return Ok(Outcome::Ok);
            }
            if a.status == 413 {
                return Ok(Outcome::TooLarge(text));
            }
            let v: Value = serde_json::from_slice(&a.body).unwrap_or(Value::Null);
            let message = v["error"]["message"]
                .as_str()
                .or_else(|| v["message"].as_str())
                .unwrap_or(&text)
                .to_owned();
            let invalid = if binding == Binding::Rest {
                a.status == 400 && v["error"]["status"] == "INVALID_ARGUMENT"
            } else {
                a.status == 422 || a.status == 400
            };
            Ok(if invalid {
                Outcome::InvalidParams(message)
            } else {
                Outcome::Other(format!("HTTP {}: {message}", a.status))
            })
        }
    }
}

// ----- requests -------------------------------------------------------------

/// Where hostile content goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The send's own metadata.
    SendMetadata,
    /// The message's metadata.
    MessageMetadata,
    /// A part's metadata.
    PartMetadata,
    /// A data part's content (a `Value` in 1.0, a `Struct` in 0.3).
    Data,
    /// A cancel's metadata.
    CancelMetadata,
}

impl Place {
    /// Whether the requests of `binding` have this place: 0.3's HTTP+JSON
    /// form has no part metadata, and 0.3's cancel (HTTP+JSON and gRPC)
    /// no metadata (what is sent there anyway is not read).
    fn carried_by(self, binding: Binding) -> bool {
        !matches!(
            (binding, self),
            (Binding::Rest03, Place::PartMetadata | Place::CancelMetadata)
                | (Binding::Grpc03, Place::CancelMetadata)
        )
    }

    /// The start of the field path the refusal of content here names (the
    /// JSON bindings name the object or array that is too deep inside it).
    fn field(self, binding: Binding) -> &'static str {
        match (self, binding) {
            (Place::SendMetadata | Place::CancelMetadata, _) => "metadata",
            (Place::MessageMetadata, _) => "message.metadata",
            (Place::PartMetadata, _) => "message.parts[0].metadata",
            (Place::Data, Binding::Rest03) => "message.content[1].data",
            (Place::Data, _) => "message.parts[1].data",
        }
    }

    /// Whether the content must be an object there.
    fn is_struct(self, binding: Binding) -> bool {
        self != Place::Data || binding.is_v03()
    }
}

fn place() -> impl Strategy<Value = Place> {
    prop::sample::select(vec![
        Place::SendMetadata,
        Place::MessageMetadata,
        Place::PartMetadata,
        Place::Data,
        Place::CancelMetadata,
    ])
}

/// Hostile content: JSON text and its protobuf form (a `Struct` or a
/// `Value` as the place needs), made lazily (a million levels are
/// megabytes).
#[derive(Debug, Clone, Copy)]
enum Content {
    Nested(usize, Nest),
    Wide(usize),
}

impl Content {
    fn json(self) -> String {
        match self {
            Content::Nested(d, n) => nested_json(d, n),
            Content::Wide(n) => wide_json(n),
        }
    }
    fn proto_struct(self) -> Vec<u8> {
        match self {
            Content::Nested(d, n) => nested_struct_proto(d, n),
            Content::Wide(n) => wide_struct_proto(n),
        }
    }
    fn proto_value(self) -> Vec<u8> {
        match self {
            Content::Nested(d, n) => nested_value_proto(d, n),
            Content::Wide(n) => field(5, &wide_struct_proto(n)),
        }
    }
}

/// Extra members of a message: (JSON members, 1.0 protobuf fields, 0.3
/// protobuf fields).
#[derive(Default, Clone)]
struct Extra {
    /// Parts beyond the first text part (JSON of each, per form).
    parts: usize,
    extensions: usize,
    references: usize,
    output_modes: usize,
    schemes: usize,
    /// The padding of the first text part (for sizes).
    text: String,
    /// The message's context id (none when empty).
    context_id: String,
}

/// A send (`SendMessage`, `message/send`, `/message:send`,
/// `/v1/message:send`) with `content` at `place` (none when `None`) and
/// `extra` in its message. Returns (JSON-RPC method, REST route, body).
fn send_request(
    binding: Binding,
    place: Option<Place>,
    content: Option<Content>,
    extra: &Extra,
) -> (&'static str, (Method, &'static str), Vec<u8>) {
    let at = |p: Place| place == Some(p);
    let json = |p: Place| {
        if at(p) {
            content.map(Content::json)
        } else {
            None
        }
    };
    let text = if extra.text.is_empty() {
        "hi"
    } else {
        &extra.text
    };
    match binding {
        Binding::JsonRpc | Binding::Rest | Binding::JsonRpc03 | Binding::Rest03 => {
            let v03rpc = binding == Binding::JsonRpc03;
            let v03rest = binding == Binding::Rest03;
            let text_part = |t: &str, meta: Option<String>| {
                let mut p = if v03rpc {
                    format!(r#"{{"kind":"text","text":"{t}""#)
                } else {
                    format!(r#"{{"text":"{t}""#)
                };
                if let Some(m) = meta {
                    p.push_str(&format!(r#","metadata":{m}"#));
                }
                p.push('}');
                p
            };
            let mut parts = vec![text_part(text, json(Place::PartMetadata))];
            if let Some(d) = json(Place::Data) {
                parts.push(if v03rpc {
                    format!(r#"{{"kind":"data","data":{d}}}"#)
                } else if v03rest {
                    format!(r#"{{"data":{{"data":{d}}}}}"#)
                } else {
                    format!(r#"{{"data":{d}}}"#)
                });
            }
            for _ in 0..extra.parts {
                parts.push(text_part("x", None));
            }
            let role = if v03rpc { "user" } else { "ROLE_USER" };
            let parts_name = if v03rest { "content" } else { "parts" };
            let mut m = format!(
                r#"{{"messageId":"m-{}","role":"{role}","{parts_name}":[{}]"#,
                fastrand_id(),
                parts.join(",")
            );
            if v03rpc {
                m.push_str(r#","kind":"message""#);
            }
            if let Some(meta) = json(Place::MessageMetadata) {
                m.push_str(&format!(r#","metadata":{meta}"#));
            }
            if !extra.context_id.is_empty() {
                let id = serde_json::to_string(&extra.context_id).expect("a JSON string");
                m.push_str(&format!(r#","contextId":{id}"#));
            }
            if extra.extensions > 0 {
                m.push_str(&format!(
                    r#","extensions":{}"#,
                    strings_json(extra.extensions, "urn:x:")
                ));
            }
            if extra.references > 0 {
                m.push_str(&format!(
                    r#","referenceTaskIds":{}"#,
                    strings_json(extra.references, "t-")
                ));
            }
            m.push('}');
            let mut req = format!(r#"{{"message":{m}"#);
            if let Some(meta) = json(Place::SendMetadata) {
                req.push_str(&format!(r#","metadata":{meta}"#));
            }
            let mut conf = Vec::new();
            if extra.output_modes > 0 {
                conf.push(format!(
                    r#""acceptedOutputModes":{}"#,
                    strings_json(extra.output_modes, "text/x")
                ));
            }
            if extra.schemes > 0 {
                // (0.3 JSON-RPC names it `pushNotificationConfig`, the 0.3
                // HTTP+JSON form, ProtoJSON, `pushNotification`.)
                let name = if v03rest {
                    "pushNotification"
                } else {
                    "pushNotificationConfig"
                };
                conf.push(format!(
                    r#""{name}":{{"url":"https://example.com/h","authentication":{{"schemes":{}}}}}"#,
                    strings_json(extra.schemes, "S")
                ));
            }
            if !conf.is_empty() {
                req.push_str(&format!(r#","configuration":{{{}}}"#, conf.join(",")));
            }
            req.push('}');
            let (method, path) = match binding {
                Binding::JsonRpc03 | Binding::Rest03 => ("message/send", "/v1/message:send"),
                _ => ("SendMessage", "/message:send"),
            };
            (method, (Method::POST, path), req.into_bytes())
        }
        Binding::Grpc | Binding::Grpc03 => {
            let v03 = binding == Binding::Grpc03;
            let proto = |p: Place, as_struct: bool| {
                if at(p) {
                    content.map(|c| {
                        if as_struct {
                            c.proto_struct()
                        } else {
                            c.proto_value()
                        }
                    })
                } else {
                    None
                }
            };
            // Part: text (1), 1.0 data (4: Value) / 0.3 data (3: DataPart
            // { data (1): Struct }), metadata (1.0: 5, 0.3: 4).
            let mut first = field(1, text.as_bytes());
            if let Some(s) = proto(Place::PartMetadata, true) {
                first.extend(field(if v03 { 4 } else { 5 }, &s));
            }
            let mut message = field(1, format!("m-{}", fastrand_id()).as_bytes());
            if !extra.context_id.is_empty() {
                message.extend(field(2, extra.context_id.as_bytes()));
            }
            message.extend(varint_field(4, 1));
            message.extend(field(5, &first));
            if v03 {
                if let Some(s) = proto(Place::Data, true) {
                    message.extend(field(5, &field(3, &field(1, &s))));
                }
            } else if let Some(v) = proto(Place::Data, false) {
                message.extend(field(5, &field(4, &v)));
            }
            let x = field(1, b"x");
            for _ in 0..extra.parts {
                message.extend(field(5, &x));
            }
            if let Some(s) = proto(Place::MessageMetadata, true) {
                message.extend(field(6, &s));
            }
            for i in 0..extra.extensions {
                message.extend(field(7, format!("urn:x:{i}").as_bytes()));
            }
            if !v03 {
                for i in 0..extra.references {
                    message.extend(field(8, format!("t-{i}").as_bytes()));
                }
            }
            // 1.0: tenant 1, message 2, configuration 3, metadata 4;
            // 0.3: message 1, configuration 2, metadata 3.
            let mut req = field(if v03 { 1 } else { 2 }, &message);
            let mut conf = Vec::new();
            for i in 0..extra.output_modes {
                conf.extend(field(1, format!("text/x{i}").as_bytes()));
            }
            if v03 && extra.schemes > 0 {
                let mut auth = Vec::new();
                for i in 0..extra.schemes {
                    auth.extend(field(1, format!("S{i}").as_bytes()));
                }
                let mut push = field(2, b"https://example.com/h");
                push.extend(field(4, &auth));
                conf.extend(field(2, &push));
            }
            if !conf.is_empty() {
                req.extend(field(if v03 { 2 } else { 3 }, &conf));
            }
            if let Some(s) = proto(Place::SendMetadata, true) {
                req.extend(field(if v03 { 3 } else { 4 }, &s));
            }
            ("SendMessage", (Method::POST, ""), req)
        }
    }
}

/// A cancel of an unknown task with `content` as its metadata.
fn cancel_request(
    binding: Binding,
    content: Content,
) -> (&'static str, (Method, &'static str), Vec<u8>) {
    match binding {
        Binding::JsonRpc => (
            "CancelTask",
            (Method::POST, ""),
            format!(r#"{{"id":"t-none","metadata":{}}}"#, content.json()).into_bytes(),
        ),
        Binding::JsonRpc03 => (
            "tasks/cancel",
            (Method::POST, ""),
            format!(r#"{{"id":"t-none","metadata":{}}}"#, content.json()).into_bytes(),
        ),
        Binding::Rest => (
            "",
            (Method::POST, "/tasks/t-none:cancel"),
            format!(r#"{{"metadata":{}}}"#, content.json()).into_bytes(),
        ),
        Binding::Rest03 => (
            "",
            (Method::POST, "/v1/tasks/t-none:cancel"),
            format!(r#"{{"metadata":{}}}"#, content.json()).into_bytes(),
        ),
        Binding::Grpc | Binding::Grpc03 => {
            let mut req = field(2, b"t-none");
            req.extend(field(3, &content.proto_struct()));
            ("CancelTask", (Method::POST, ""), req)
        }
    }
}

/// A message id of its own for each request.
fn fastrand_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// What a refusal of nesting says.
const DEPTH_PHRASE: &str = "levels deep";

// ----- properties -----------------------------------------------------------

#[test]
fn the_limits_are_those_the_suite_generates_around() {
    assert_eq!(MAX_STRUCT_DEPTH, DEPTH_LIMIT);
}

proptest! {
    #![proptest_config(config(96))]

    /// Content nested at any depth, in every place of a send or a cancel,
    /// on every binding: within the limit, not refused for it; over it, the
    /// invalid-parameters error of nesting (or the size error for a
    /// message too large to read at all).
    #[test]
    fn nesting_in_every_place_on_every_binding(
        binding in binding(),
        place in place(),
        struct_nest in struct_nest(),
        value_nest in value_nest(),
        depth in depth(),
    ) {
        let nest = if place.is_struct(binding) { struct_nest } else { value_nest };
        // A Struct is at least one level (an object).
        let depth = if place.is_struct(binding) { depth.max(1) } else { depth };
        check_nesting(binding, place, nest, depth)?;
    }

    /// The lists of a send (parts, extensions, reference task ids,
    /// accepted output modes, 0.3 authentication schemes) around their
    /// limits: within, not refused for the limit; over, the error naming it.
    #[test]
    fn counts_around_their_limits(
        binding in binding(),
        which in 0usize..5,
        parts in count_around(DEFAULT_MAX_PARTS),
        items in count_around(MAX_LIST_ITEMS),
    ) {
        let mut extra = Extra::default();
        // (The first part is a text part: `parts` counts all of them.)
        // (And the field the refusal names: the list, as a JSON path.)
        let (n, limit, phrase, list) = match which {
            0 => {
                extra.parts = parts.saturating_sub(1);
                // (0.3's HTTP+JSON form names the parts `content`.)
                let list = if binding == Binding::Rest03 { "message.content" } else { "message.parts" };
                (parts.max(1), DEFAULT_MAX_PARTS, format!("at most {DEFAULT_MAX_PARTS} parts"), list)
            }
            1 => {
                extra.extensions = items;
                (items, MAX_LIST_ITEMS, format!("at most {MAX_LIST_ITEMS} items"), "message.extensions")
            }
            2 if !binding.is_v03() => {
                extra.references = items;
                (items, MAX_LIST_ITEMS, format!("at most {MAX_LIST_ITEMS} items"), "message.referenceTaskIds")
            }
            4 if binding.is_v03() => {
                extra.schemes = items;
                let list = if binding == Binding::Rest03 {
                    "configuration.pushNotification.authentication.schemes"
                } else {
                    "configuration.pushNotificationConfig.authentication.schemes"
                };
                (items, MAX_LIST_ITEMS, format!("at most {MAX_LIST_ITEMS} items"), list)
            }
            _ => {
                extra.output_modes = items;
                (items, MAX_LIST_ITEMS, format!("at most {MAX_LIST_ITEMS} items"), "configuration.acceptedOutputModes")
            }
        };
        let (method, rest, body) = send_request(binding, None, None, &extra);
        let got = send(false, binding, method, rest, body)?;
        if n <= limit {
            prop_assert!(
                !got.is_limit("at most") && !matches!(got, Outcome::TooLarge(_)),
                "{:?}: {} items (case {}) were refused: {:?}", binding, n, which, got
            );
        } else {
            prop_assert!(
                got.is_limit(&phrase),
                "{:?}: {} items (case {}) got {:?}", binding, n, which, got
            );
            prop_assert!(
                got.is_limit(&format!("Invalid parameters: {list}: ")),
                "{:?}: {} items (case {}) do not name {}: {:?}", binding, n, which, list, got
            );
        }
    }

    /// Bodies (gRPC: messages) around the size limit of the server, the
    /// padding in the text of a part: within, accepted; over, the size
    /// error.
    #[test]
    fn sizes_around_the_body_limit(
        binding in binding(),
        delta in prop_oneof![Just(0i64), Just(-1), Just(1), -64i64..64, Just(SMALL_BODY as i64)],
    ) {
        let (_, _, base) = send_request(binding, None, None, &Extra { text: "x".into(), ..Extra::default() });
        // JSON-RPC wraps the params in an envelope; gRPC frames have a
        // length prefix outside the limit.
        let overhead = match binding {
            Binding::JsonRpc | Binding::JsonRpc03 => {
                format!(r#"{{"jsonrpc":"2.0","id":7,"method":"{}","params":}}"#,
                    if binding == Binding::JsonRpc { "SendMessage" } else { "message/send" }).len()
            }
            _ => 0,
        };
        let target = (SMALL_BODY as i64 + delta) as usize;
        // The padding that makes the body `target` bytes (a few rounds: in
        // protobuf the varints of the lengths grow with the text).
        let mut pad = target.saturating_sub(base.len() + overhead - 1).max(1);
        let mut made = send_request(binding, None, None, &Extra { text: "y".repeat(pad), ..Extra::default() });
        for _ in 0..3 {
            let size = made.2.len() + overhead;
            if size == target {
                break;
            }
            pad = (pad as i64 + target as i64 - size as i64).max(1) as usize;
            made = send_request(binding, None, None, &Extra { text: "y".repeat(pad), ..Extra::default() });
        }
        let (method, rest, body) = made;
        let size = body.len() + overhead;
        let got = send(true, binding, method, rest, body)?;
        if size <= SMALL_BODY {
            prop_assert_eq!(&got, &Outcome::Ok, "{:?}: {} bytes", binding, size);
        } else {
            prop_assert!(matches!(got, Outcome::TooLarge(_)), "{:?}: {} bytes got {:?}", binding, size, got);
        }
    }

    /// HTTP+JSON listings with query parameters around their bounds
    /// (`pageSize` 1 to 100, `historyLength` zero or more) and long
    /// values: 200 within, 400 naming the parameter beyond, never 5xx.
    #[test]
    fn rest_query_parameters_around_their_bounds(
        page_size in prop_oneof![Just(0i64), Just(1), Just(100), Just(101), Just(-1), Just(i64::from(i32::MAX) + 1), 1i64..=100],
        history in prop_oneof![Just(-1i64), Just(0), Just(1), Just(i64::from(i32::MAX)), Just(i64::from(i32::MAX) + 1)],
        context_len in prop_oneof![Just(0usize), 1usize..64, Just(MAX_ID_BYTES), Just(MAX_ID_BYTES + 1), Just(32 * 1024)],
    ) {
        let uri = format!(
            "/tasks?pageSize={page_size}&historyLength={history}&contextId={}",
            "c".repeat(context_len)
        );
        let request = Request::builder()
            .method(Method::GET)
            .uri(uri)
            .header("a2a-version", "1.0")
            .body(Body::empty())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let a = call(false, request)?;
        let text = excerpt(&a.body);
        let in_range = |n: i64, lo: i64, hi: i64| (lo..=hi).contains(&n);
        let context_ok = context_len <= MAX_ID_BYTES;
        if in_range(page_size, 1, 100) && in_range(history, 0, i64::from(i32::MAX)) && context_ok {
            prop_assert_eq!(a.status, 200, "{}", text);
        } else {
            prop_assert_eq!(a.status, 400, "{}", text);
            let named = (!in_range(page_size, 1, 100) && text.contains("pageSize"))
                || (!in_range(history, 0, i64::from(i32::MAX)) && text.contains("historyLength"))
                || (!context_ok && text.contains("contextId"));
            prop_assert!(named, "{}", text);
        }
    }

    /// A message's context id (an identifier a store keeps in a column of
    /// its own, and indexes) around its bound, and with U+0000, on every
    /// binding: within, not refused for it; beyond, the invalid-parameters
    /// error naming `message.contextId`.
    #[test]
    fn context_ids_around_their_bound(
        binding in binding(),
        len in prop_oneof![Just(1usize), Just(MAX_ID_BYTES), Just(MAX_ID_BYTES + 1), 1usize..2 * MAX_ID_BYTES, Just(64 * 1024)],
        nul_at in prop::option::of(0usize..64),
    ) {
        let mut id: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
        if let Some(at) = nul_at {
            let at = at.min(len - 1);
            id[at] = 0;
        }
        let id = String::from_utf8(id).expect("ASCII");
        let fits = len <= MAX_ID_BYTES && nul_at.is_none();
        let (method, rest, body) = send_request(binding, None, None, &Extra { context_id: id, ..Extra::default() });
        let got = send(false, binding, method, rest, body)?;
        if fits {
            prop_assert_eq!(&got, &Outcome::Ok, "{:?}: {} bytes", binding, len);
        } else {
            prop_assert!(
                got.is_limit("message.contextId") && got.is_limit("an identifier"),
                "{:?}: {} bytes, U+0000 at {:?}: {:?}", binding, len, nul_at, got
            );
        }
    }
}

proptest! {
    // Each case reads up to 200,000 values: fewer cases.
    #![proptest_config(config(4))]

    /// The budget of values of one request, shared by its metadata and
    /// data: split over three places, at and around the limit.
    #[test]
    fn values_shared_by_a_request_around_their_limit(
        binding in binding(),
        total in prop_oneof![Just(MAX_STRUCT_VALUES), Just(MAX_STRUCT_VALUES + 1), Just(MAX_STRUCT_VALUES - 1), Just(1000usize)],
        split in 0usize..=100,
    ) {
        // Request metadata (`a` members) and message metadata (the rest);
        // each object member is one value.
        let a = (total * split / 100).max(1);
        let b = total - a;
        let (method, rest, mut body) = send_request(binding, Some(Place::SendMetadata), Some(Content::Wide(a)), &Extra::default());
        if b > 0 {
            // The message's metadata too: made again with both.
            let (m, r, with_both) = two_places(binding, a, b);
            body = with_both;
            let _ = (m, r);
        }
        let got = send(false, binding, method, rest, body)?;
        if total <= MAX_STRUCT_VALUES {
            prop_assert_eq!(&got, &Outcome::Ok, "{:?}: {} values", binding, total);
        } else {
            prop_assert!(got.is_limit("values"), "{:?}: {} values got {:?}", binding, total, got);
            prop_assert!(
                got.is_limit("Invalid parameters: metadata") || got.is_limit("Invalid parameters: message.metadata"),
                "{:?}: {} values, no field named: {:?}", binding, total, got
            );
        }
    }
}

/// Sends content `depth` levels deep at `place` on `binding`: within the
/// limit, not refused for it; over it, the invalid-parameters error of
/// nesting (or the size error for a message too large to read at all).
fn check_nesting(
    binding: Binding,
    place: Place,
    nest: Nest,
    depth: usize,
) -> Result<(), TestCaseError> {
    let content = Content::Nested(depth, nest);
    let (method, rest, body) = if place == Place::CancelMetadata {
        cancel_request(binding, content)
    } else {
        send_request(binding, Some(place), Some(content), &Extra::default())
    };
    let size = body.len();
    let got = send(false, binding, method, rest, body)?;
    if !place.carried_by(binding) {
        // An unknown member (or body), skipped and never stored: only
        // the answer is checked.
        return Ok(());
    }
    if depth <= DEPTH_LIMIT {
        prop_assert!(
            !matches!(got, Outcome::InvalidParams(_) | Outcome::TooLarge(_)),
            "{:?} {:?} {} levels ({:?}) were refused: {:?}",
            binding,
            place,
            depth,
            nest,
            got
        );
        if place != Place::CancelMetadata {
            prop_assert_eq!(
                &got,
                &Outcome::Ok,
                "{:?} {:?} {} levels",
                binding,
                place,
                depth
            );
        }
    } else {
        let too_large =
            matches!(got, Outcome::TooLarge(_)) && size > agentwire_server::DEFAULT_MAX_BODY_BYTES;
        // The same error however deep (also past serde_json's own limit
        // of 128 levels), naming the field where the content is.
        prop_assert!(
            got.is_limit(DEPTH_PHRASE) || too_large,
            "{:?} {:?} {} levels ({:?}) got {:?}",
            binding,
            place,
            depth,
            nest,
            got
        );
        if !too_large {
            let field = place.field(binding);
            prop_assert!(
                got.is_limit(&format!("Invalid parameters: {field}")),
                "{:?} {:?} {} levels ({:?}): {} not named in {:?}",
                binding,
                place,
                depth,
                nest,
                field,
                got
            );
        }
    }
    Ok(())
}

/// Every binding and place, at one over the limit and just over
/// serde_json's own recursion limit, and a million levels (in a message's
/// metadata and a data part: objects and arrays in turn, arrays alone in a
/// 1.0 data part): each refused with the nesting error (or,
/// for the megabytes of a million levels in protobuf, the size error), and
/// no reader overflows its stack.
#[test]
fn far_over_the_limit_on_every_binding_and_place() {
    let places = [
        Place::SendMetadata,
        Place::MessageMetadata,
        Place::PartMetadata,
        Place::Data,
        Place::CancelMetadata,
    ];
    for depth in [DEPTH_LIMIT + 1, 129, 1_000_000] {
        for binding in BINDINGS {
            for place in places {
                // A million levels are megabytes: two places of each
                // binding (a Struct, a Value) for the time of a run.
                if depth > 129 && !matches!(place, Place::MessageMetadata | Place::Data) {
                    continue;
                }
                let nest = if place.is_struct(binding) {
                    Nest::Mixed
                } else {
                    Nest::Arrays
                };
                if let Err(e) = check_nesting(binding, place, nest, depth) {
                    panic!("{binding:?} {place:?} {depth} levels: {e}");
                }
            }
        }
    }
}

/// A send whose own metadata has `a` members and whose message's has `b`.
fn two_places(
    binding: Binding,
    a: usize,
    b: usize,
) -> (&'static str, (Method, &'static str), Vec<u8>) {
    let (method, rest, body) = send_request(
        binding,
        Some(Place::MessageMetadata),
        Some(Content::Wide(b)),
        &Extra::default(),
    );
    let mut body = body;
    if binding.is_grpc() {
        let n = if binding == Binding::Grpc { 4 } else { 3 };
        body.extend(field(n, &wide_struct_proto(a)));
    } else {
        // Before the final `}` of the request object.
        body.pop();
        body.extend_from_slice(format!(r#","metadata":{}}}"#, wide_json(a)).as_bytes());
    }
    (method, rest, body)
}
