//! Fuzzing of the server's network decoders through the real router (no
//! socket: tower's `oneshot`): JSON-RPC requests (`POST /`), HTTP+JSON
//! paths, query parameters and bodies, and gRPC request frames. The
//! properties: no panic, an answer within a bound, and the spec's errors
//! (JSON-RPC -32700 for what is not JSON, -32600 for what is not a request
//! object, HTTP 4xx with the error's code for bad REST requests, never a
//! 5xx nor a gRPC INTERNAL/UNKNOWN for a malformed request).
//! See `fuzz_support` (shared with agentwire-types) for the case counts
//! and the corpus.

#[path = "../../agentwire-types/tests/fuzz_support/mod.rs"]
mod fuzz_support;

use std::sync::OnceLock;
use std::time::Duration;

use agentwire_server::{
    A2aResult, AgentExecutor, RequestContext, RequestHandler, RouterOptions, TaskUpdater, router,
};
use agentwire_types::{AgentCard, Artifact};
use axum::Router;
use axum::body::Body;
use fuzz_support::{config, corpus, mutated, seeds};
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
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime")
    })
}

fn app() -> Router {
    static APP: OnceLock<Router> = OnceLock::new();
    APP.get_or_init(|| {
        // Built inside the runtime: the handler starts background tasks.
        runtime().block_on(async {
            let card = AgentCard::new("Echo", "echoes", "1.0.0");
            let handler = RequestHandler::builder(card, Echo).build();
            router(handler, &RouterOptions::default())
        })
    })
    .clone()
}

/// An answer: status, headers, body bytes (whole, streams included) and
/// trailers.
struct Answer {
    status: u16,
    headers: http::HeaderMap,
    body: Vec<u8>,
    trailers: Option<http::HeaderMap>,
}

fn call(request: Request<Body>) -> Result<Answer, TestCaseError> {
    let app = app();
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
        tokio::time::timeout(Duration::from_secs(10), fut)
            .await
            .map_err(|_| TestCaseError::fail("no complete answer within 10 s"))?
    })
}

// JSON-RPC.

const RPC_SEEDS: &[&[u8]] = &[
    br#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}}"#,
    br#"{"jsonrpc":"2.0","id":"s","method":"SendStreamingMessage","params":{"message":{"messageId":"m2","role":"ROLE_USER","parts":[{"text":"hi"}]}}}"#,
    br#"{"jsonrpc":"2.0","id":2,"method":"GetTask","params":{"id":"t-1","historyLength":2}}"#,
    br#"{"jsonrpc":"2.0","id":3,"method":"ListTasks","params":{"pageSize":5,"status":"TASK_STATE_COMPLETED"}}"#,
    br#"{"jsonrpc":"2.0","id":4,"method":"CancelTask","params":{"id":"t-1"}}"#,
    br#"{"jsonrpc":"2.0","id":5,"method":"SubscribeToTask","params":{"id":"t-1"}}"#,
    br#"{"jsonrpc":"2.0","id":6,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t-1","url":"https://example.com/hook"}}"#,
    br#"{"jsonrpc":"2.0","id":7,"method":"GetTaskPushNotificationConfig","params":{"taskId":"t-1","id":"c"}}"#,
    br#"{"jsonrpc":"2.0","id":8,"method":"ListTaskPushNotificationConfigs","params":{"taskId":"t-1"}}"#,
    br#"{"jsonrpc":"2.0","id":9,"method":"DeleteTaskPushNotificationConfig","params":{"taskId":"t-1","id":"c"}}"#,
    br#"{"jsonrpc":"2.0","id":10,"method":"GetExtendedAgentCard"}"#,
    br#"{"jsonrpc":"2.0","id":null,"method":"Nope","params":[]}"#,
];

/// The JSON-RPC error codes of the spec: the standard ones and the A2A
/// range.
fn is_spec_code(code: i64) -> bool {
    matches!(code, -32700 | -32600 | -32601 | -32602 | -32603) || (-32099..=-32001).contains(&code)
}

fn check_rpc_object(v: &Value) -> Result<(), TestCaseError> {
    prop_assert_eq!(&v["jsonrpc"], "2.0", "{}", v);
    let has_result = v.get("result").is_some();
    let error = v.get("error");
    prop_assert!(has_result != error.is_some(), "result xor error: {}", v);
    if let Some(e) = error {
        let code = e["code"].as_i64();
        prop_assert!(code.is_some_and(is_spec_code), "error code: {}", v);
        prop_assert!(e["message"].is_string(), "{}", v);
    }
    Ok(())
}

fn check_jsonrpc(bytes: &[u8]) -> Result<(), TestCaseError> {
    let request = Request::builder()
        .method(Method::POST)
        .uri("/")
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(Body::from(bytes.to_vec()))
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let answer = call(request)?;
    prop_assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    let is_sse = answer
        .headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if is_sse {
        let text = String::from_utf8(answer.body)
            .map_err(|_| TestCaseError::fail("an event stream that is not UTF-8"))?;
        for data in text.lines().filter_map(|l| l.strip_prefix("data:")) {
            let v: Value = serde_json::from_str(data.trim_start())
                .map_err(|e| TestCaseError::fail(format!("event data not JSON ({e}): {data}")))?;
            check_rpc_object(&v)?;
        }
        return Ok(());
    }
    let v: Value = serde_json::from_slice(&answer.body).map_err(|e| {
        TestCaseError::fail(format!(
            "answer not JSON ({e}): {}",
            String::from_utf8_lossy(&answer.body)
        ))
    })?;
    check_rpc_object(&v)?;
    // What the request was decides the error.
    let code = v["error"]["code"].as_i64();
    // JSON by its grammar: a lone surrogate escape (`"\ud800"`) is
    // grammatical JSON (RFC 8259, 8.2) though no string decodes from it,
    // so it is an invalid request (-32600), not a parse error.
    if serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_err() {
        prop_assert_eq!(code, Some(-32700), "not JSON: {}", v);
        return Ok(());
    }
    match serde_json::from_slice::<Value>(bytes) {
        // Grammatical JSON: whatever member holds the bad string decides
        // (an invalid request, an unknown method, invalid params, or none
        // for a member the method ignores), but never a parse error.
        Err(_) => prop_assert!(code != Some(-32700), "grammatical JSON: {}", v),
        Ok(Value::Object(req)) => {
            // A usable id is echoed back (an invalid request, such as one
            // with a member twice, may answer with a null id).
            if code == Some(-32600) {
                return Ok(());
            }
            if let Some(id) = req
                .get("id")
                .filter(|id| id.is_string() || id.is_number() || id.is_null())
            {
                if req.get("jsonrpc") == Some(&Value::from("2.0")) {
                    prop_assert_eq!(&v["id"], id, "{}", v);
                }
            }
        }
        Ok(_) => prop_assert_eq!(code, Some(-32600), "not an object: {}", v),
    }
    Ok(())
}

/// Structure-aware envelopes: each member present or not, of any JSON
/// type, with the real method names.
fn envelope() -> impl Strategy<Value = Vec<u8>> {
    let any_json = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        any::<String>().prop_map(Value::from),
        Just(serde_json::json!([])),
        Just(serde_json::json!({})),
        Just(serde_json::json!({"id": "t-1", "message": {"messageId": "m", "parts": []}})),
        Just(serde_json::json!({"historyLength": -1, "pageSize": 2147483647u32})),
        Just(serde_json::json!({"pageSize": 0, "status": "TASK_STATE_UNSPECIFIED"})),
        Just(serde_json::json!({"message": {"messageId": "", "role": "ROLE_USER", "parts": [{}]}})),
    ];
    let method = prop_oneof![
        prop::sample::select(vec![
            "SendMessage",
            "SendStreamingMessage",
            "GetTask",
            "ListTasks",
            "CancelTask",
            "SubscribeToTask",
            "CreateTaskPushNotificationConfig",
            "GetTaskPushNotificationConfig",
            "ListTaskPushNotificationConfigs",
            "DeleteTaskPushNotificationConfig",
            "GetExtendedAgentCard",
            "message/send",
            "tasks/get",
            "",
        ])
        .prop_map(Value::from),
        any_json.clone(),
    ];
    let version = prop_oneof![Just(Value::from("2.0")), any_json.clone()];
    (
        prop::option::weighted(0.9, version),
        prop::option::weighted(0.9, any_json.clone()),
        prop::option::weighted(0.95, method),
        prop::option::weighted(0.8, any_json),
    )
        .prop_map(|(jsonrpc, id, method, params)| {
            let mut o = serde_json::Map::new();
            for (k, v) in [
                ("jsonrpc", jsonrpc),
                ("id", id),
                ("method", method),
                ("params", params),
            ] {
                if let Some(v) = v {
                    o.insert(k.to_owned(), v);
                }
            }
            serde_json::to_vec(&Value::Object(o)).unwrap_or_default()
        })
}

// HTTP+JSON.

fn check_rest(method: Method, path_and_query: &str, body: Vec<u8>) -> Result<(), TestCaseError> {
    let Ok(uri) = path_and_query.parse::<http::Uri>() else {
        return Ok(());
    };
    let request = Request::builder()
        .method(method.clone())
        .uri(uri)
        .header("content-type", "application/a2a+json")
        .header("a2a-version", "1.0")
        .body(Body::from(body))
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let answer = call(request)?;
    let text = String::from_utf8_lossy(&answer.body).into_owned();
    prop_assert!(
        answer.status == 200 || (400..500).contains(&answer.status),
        "{} {} answered {}: {}",
        method,
        path_and_query,
        answer.status,
        text
    );
    if answer.status >= 400 && !answer.body.is_empty() {
        let v: Value = serde_json::from_slice(&answer.body)
            .map_err(|e| TestCaseError::fail(format!("error body not JSON ({e}): {text}")))?;
        prop_assert_eq!(
            v["error"]["code"].as_u64(),
            Some(u64::from(answer.status)),
            "{} {}: {}",
            method,
            path_and_query,
            text
        );
    }
    Ok(())
}

fn rest_method() -> impl Strategy<Value = Method> {
    prop::sample::select(vec![
        Method::GET,
        Method::POST,
        Method::DELETE,
        Method::PUT,
        Method::PATCH,
        Method::HEAD,
        Method::OPTIONS,
    ])
}

/// Paths made of the binding's own pieces and hostile ones.
fn rest_path() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        4 => prop::sample::select(vec![
            "tasks", "message:send", "message:stream", "extendedAgentCard",
            "pushNotificationConfigs", "t-1", "t-1:cancel", "t-1:subscribe", ":cancel",
            ":subscribe", "acme", "", "%2F", "%25", "%ff", "%00", "a%20b", "..", ".",
            "tasks:cancel", "x:y:z", "%E2%82%AC", "%", "%zz",
        ])
        .prop_map(str::to_owned),
        1 => "[a-zA-Z0-9%:._~!$&'()*+,;=@-]{0,10}",
    ];
    let key = prop::sample::select(vec![
        "pageSize",
        "page_size",
        "pageToken",
        "historyLength",
        "history_length",
        "status",
        "contextId",
        "statusTimestampAfter",
        "includeArtifacts",
        "tenant",
        "",
        "x",
    ]);
    let value = prop_oneof![
        prop::sample::select(vec![
            "",
            "0",
            "-1",
            "1",
            "50",
            "2147483648",
            "-2147483649",
            "1e3",
            "true",
            "false",
            "yes",
            "TASK_STATE_WORKING",
            "TASK_STATE_RUNNING",
            "2025-11-09T10:30:00Z",
            "9999-99-99",
            "%ff",
            "%00",
            "+",
            "%2B1",
        ])
        .prop_map(str::to_owned),
        "[a-zA-Z0-9%+._-]{0,8}",
    ];
    (
        prop::collection::vec(segment, 1..6),
        prop::collection::vec((key, value), 0..4),
        any::<bool>(),
    )
        .prop_map(|(segments, pairs, trailing)| {
            let mut path = format!("/{}", segments.join("/"));
            if trailing {
                path.push('/');
            }
            if !pairs.is_empty() {
                let query: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
                path.push('?');
                path.push_str(&query.join("&"));
            }
            path
        })
}

const REST_SEEDS: &[&[u8]] = &[
    b"/tasks?pageSize=10&status=TASK_STATE_WORKING&includeArtifacts=true",
    b"/acme/tasks/t-1?historyLength=3",
    b"/tasks/t-1/pushNotificationConfigs/c?pageSize=1",
    b"/message:send",
    b"/tasks/t-1:subscribe",
    b"/tasks?statusTimestampAfter=2025-11-09T10:30:00.5Z&contextId=c&pageToken=p",
];

// gRPC.

/// A gRPC request frame: flag, 4-byte big-endian length, message.
fn frame(message: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

const GRPC_METHODS: &[&str] = &[
    "SendMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "CreateTaskPushNotificationConfig",
    "GetExtendedAgentCard",
];

fn check_grpc(method: &str, body: Vec<u8>) -> Result<(), TestCaseError> {
    let request = Request::builder()
        .method(Method::POST)
        .uri(format!("/lf.a2a.v1.A2AService/{method}"))
        .version(http::Version::HTTP_2)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("a2a-version", "1.0")
        .body(Body::from(body))
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let answer = call(request)?;
    let status = answer
        .trailers
        .as_ref()
        .and_then(|t| t.get("grpc-status"))
        .or_else(|| answer.headers.get("grpc-status"))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok());
    let message = answer
        .trailers
        .as_ref()
        .and_then(|t| t.get("grpc-message"))
        .or_else(|| answer.headers.get("grpc-message"))
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    prop_assert!(
        status.is_some(),
        "{method}: no grpc-status (HTTP {})",
        answer.status
    );
    // INTERNAL (13) and UNKNOWN (2) would blame the server for a bad request.
    prop_assert!(
        !matches!(status, Some(2 | 13)),
        "{method}: grpc-status {:?} {:?}",
        status,
        message
    );
    Ok(())
}

#[test]
fn corpus_replays() {
    for (name, bytes) in corpus("jsonrpc", RPC_SEEDS) {
        if let Err(e) = check_jsonrpc(&bytes) {
            panic!("JSON-RPC corpus input {name}: {e}");
        }
    }
    for (name, bytes) in corpus("rest", REST_SEEDS) {
        let line = String::from_utf8_lossy(&bytes).into_owned();
        for method in [Method::GET, Method::POST, Method::DELETE] {
            if let Err(e) = check_rest(method, line.trim_end(), Vec::new()) {
                panic!("REST corpus input {name}: {e}");
            }
        }
    }
    for (name, bytes) in corpus("grpc", &[b"\x0a\x03t-1", b""]) {
        for method in GRPC_METHODS {
            if let Err(e) = check_grpc(method, frame(&bytes)) {
                panic!("gRPC corpus input {name}: {e}");
            }
        }
    }
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn jsonrpc_mutated_requests(bytes in mutated(seeds(&corpus("jsonrpc", RPC_SEEDS)), 6)) {
        check_jsonrpc(&bytes)?;
    }

    #[test]
    fn jsonrpc_generated_envelopes(bytes in envelope()) {
        check_jsonrpc(&bytes)?;
    }

    #[test]
    fn rest_generated_paths_and_queries(
        method in rest_method(),
        path in rest_path(),
        body in mutated(seeds(&corpus("rest-body", &[
            br#"{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}"#,
            br#"{"url":"https://example.com/hook","token":"t"}"#,
            b"",
        ])), 4),
    ) {
        check_rest(method, &path, body)?;
    }

    #[test]
    fn rest_mutated_paths(
        method in rest_method(),
        line in mutated(seeds(&corpus("rest", REST_SEEDS)), 6),
    ) {
        check_rest(method, &String::from_utf8_lossy(&line), Vec::new())?;
    }

    #[test]
    fn grpc_mutated_frames(
        method in prop::sample::select(GRPC_METHODS),
        message in mutated(seeds(&corpus("grpc", &[b"\x0a\x03t-1", b"\x12\x05hello\x18\x02"])), 6),
        framed in prop::bool::weighted(0.8),
    ) {
        let body = if framed { frame(&message) } else { message };
        check_grpc(method, body)?;
    }
}
