//! The bindings on the wire, with raw requests: the `A2A-Version` service
//! parameter, malformed and invalid input, oversized bodies and the exact
//! error encodings of JSON-RPC (HTTP 200 + error object), HTTP+JSON
//! (`{"error": {code, status, message, details}}`) and gRPC (status with
//! `google.rpc.ErrorInfo`). After bad input the server keeps answering and
//! no task is corrupted.

#[macro_use]
mod common;

use agentwire_client::{Binding, Client};
use agentwire_server::{A2aServer, ServerHandle};
use agentwire_types::{
    CancelTaskRequest, ErrorKind, GetTaskPushNotificationConfigRequest, GetTaskRequest, Message,
    Part, Role, SendMessageRequest, SubscribeToTaskRequest, Task, TaskState, new_id,
};
use common::agents::{Scripted, scripted_card};
use common::*;
use prost::Message as _;
use reqwest::Method;
use serde_json::{Value, json};
use tonic::Code;

over_all_bindings!(
    version_is_required,
    error_codes_follow_the_spec_table,
    bad_input_is_refused_cleanly,
);

/// A JSON-RPC request object.
fn rpc(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

/// A `SendMessage` params / REST body around a raw message object.
fn send_params(message: Value) -> Value {
    json!({ "message": message })
}

/// A valid message object with a scripted agent's prefix.
fn message_json(prefix: &str) -> Value {
    json!({
        "messageId": format!("{prefix}-{}", new_id()),
        "role": "ROLE_USER",
        "parts": [{"text": "hello"}],
    })
}

// ----- 12. A2A-Version ------------------------------------------------------------

/// A 1.0 call without a version (which means 0.3), or with 0.3, is not told
/// that 0.3 is not supported (it is served, through the 0.3 methods and
/// paths): it is told to send `A2A-Version: 1.0`.
fn says_to_send_1_0(message: &str, what: &str) {
    assert!(
        message.contains("A2A-Version: 1.0") && !message.contains("not supported"),
        "{what}: {message}"
    );
}

async fn version_is_required(b: Binding) {
    let server = scripted_server().await;
    let send = send_params(message_json("tck-complete-task"));
    match b {
        Binding::JsonRpc => {
            let body = rpc("SendMessage", send.clone()).to_string();
            let r = rpc_raw(&server, body.clone(), false).await;
            let e = assert_rpc_error(&r, json!(1), ErrorKind::VersionNotSupported, "no version");
            assert_eq!(e["data"][0]["metadata"]["supportedVersions"], "1.0,1.1");
            says_to_send_1_0(e["message"].as_str().unwrap_or_default(), "JSON-RPC");
            let get = rpc("GetTask", json!({"id": "x"})).to_string();
            let r = rpc_raw(&server, get, false).await;
            assert_rpc_error(
                &r,
                json!(1),
                ErrorKind::VersionNotSupported,
                "GetTask, no version",
            );
            let stream = rpc("SendStreamingMessage", send.clone()).to_string();
            let r = rpc_raw(&server, stream, false).await;
            assert_rpc_error(
                &r,
                json!(1),
                ErrorKind::VersionNotSupported,
                "stream, no version",
            );
            let r = raw_send(
                raw_http()
                    .post(format!("{}/", server.base_url()))
                    .header("A2A-Version", "0.3")
                    .body(body.clone()),
            )
            .await;
            let e = assert_rpc_error(&r, json!(1), ErrorKind::VersionNotSupported, "version 0.3");
            says_to_send_1_0(e["message"].as_str().unwrap_or_default(), "JSON-RPC, 0.3");

            // The version as a query parameter instead of a header.
            let r = rpc_raw_at(&server, "/?A2A-Version=1.0", body, false).await;
            assert_eq!(r.status, 200);
            let res = r.json();
            assert_eq!(
                res["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
                "{res}"
            );
        }
        Binding::HttpJson => {
            let body = send.to_string().into_bytes();
            let r = rest_raw(
                &server,
                Method::POST,
                "/message:send",
                Some(body.clone()),
                false,
            )
            .await;
            let e = assert_rest_error(&r, 400, ErrorKind::VersionNotSupported, "no version");
            assert_eq!(e["status"], "FAILED_PRECONDITION");
            says_to_send_1_0(e["message"].as_str().unwrap_or_default(), "HTTP+JSON");
            let r = rest_raw(&server, Method::GET, "/tasks/x", None, false).await;
            assert_rest_error(
                &r,
                400,
                ErrorKind::VersionNotSupported,
                "GetTask, no version",
            );
            let r = rest_raw(&server, Method::GET, "/tasks", None, false).await;
            assert_rest_error(
                &r,
                400,
                ErrorKind::VersionNotSupported,
                "ListTasks, no version",
            );
            let r = rest_raw(
                &server,
                Method::POST,
                "/message:stream",
                Some(body.clone()),
                false,
            )
            .await;
            assert_rest_error(
                &r,
                400,
                ErrorKind::VersionNotSupported,
                "stream, no version",
            );

            let r = rest_raw(
                &server,
                Method::POST,
                "/message:send?A2A-Version=1.0",
                Some(body),
                false,
            )
            .await;
            assert_eq!(r.status, 200, "{:?}", r.body);
            let task = r.json()["task"].clone();
            assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
            let id = task["id"].as_str().unwrap();
            let r = rest_raw(
                &server,
                Method::GET,
                &format!("/tasks/{id}?A2A-Version=1.0"),
                None,
                false,
            )
            .await;
            assert_eq!(r.status, 200, "{:?}", r.body);
            assert_eq!(r.json()["id"], id);
        }
        Binding::Grpc => {
            let mut g = grpc_raw(&server).await;
            let req = SendMessageRequest {
                message: Some(msg("tck-complete-task")),
                ..Default::default()
            };
            let status = within("gRPC send", g.send_message(req.clone()))
                .await
                .expect_err("no version must be refused");
            let e = assert_grpc_error(
                &status,
                Code::FailedPrecondition,
                ErrorKind::VersionNotSupported,
                "gRPC without a2a-version",
            );
            assert_eq!(e.metadata["supportedVersions"], "1.0,1.1");
            says_to_send_1_0(status.message(), "gRPC");
            let status = within("gRPC stream", g.send_streaming_message(req.clone()))
                .await
                .expect_err("no version must be refused");
            assert_grpc_error(
                &status,
                Code::FailedPrecondition,
                ErrorKind::VersionNotSupported,
                "gRPC stream without a2a-version",
            );
            let get = GetTaskRequest {
                id: "x".into(),
                ..Default::default()
            };
            let status = within("gRPC get", g.get_task(get))
                .await
                .expect_err("no version must be refused");
            assert_grpc_error(
                &status,
                Code::FailedPrecondition,
                ErrorKind::VersionNotSupported,
                "gRPC GetTask without a2a-version",
            );
            let res = within("gRPC send v1", g.send_message(grpc_v1(req)))
                .await
                .expect("with a2a-version the call works")
                .into_inner();
            assert_eq!(res.task().unwrap().state(), TaskState::Completed);
        }
    }
}

// ----- spec 5.4: the error code table, on the wire -------------------------------

/// How to provoke each A2A error the scripted agent's server can produce.
#[derive(Debug, Clone, Copy)]
enum Provoke {
    GetUnknownTask,
    CancelCompletedTask,
    GetPushConfig,
    MessageToCompletedTask,
    UnacceptedMediaType,
    OldVersion,
}

/// Spec 5.4, written out (not taken from the implementation's mapping):
/// the error, how to provoke it, its JSON-RPC code, gRPC status and HTTP
/// status.
const SPEC_TABLE: [(ErrorKind, Provoke, i64, Code, u16); 6] = [
    (
        ErrorKind::TaskNotFound,
        Provoke::GetUnknownTask,
        -32001,
        Code::NotFound,
        404,
    ),
    (
        ErrorKind::TaskNotCancelable,
        Provoke::CancelCompletedTask,
        -32002,
        Code::FailedPrecondition,
        400,
    ),
    (
        ErrorKind::PushNotificationNotSupported,
        Provoke::GetPushConfig,
        -32003,
        Code::FailedPrecondition,
        400,
    ),
    (
        ErrorKind::UnsupportedOperation,
        Provoke::MessageToCompletedTask,
        -32004,
        Code::FailedPrecondition,
        400,
    ),
    (
        ErrorKind::ContentTypeNotSupported,
        Provoke::UnacceptedMediaType,
        -32005,
        Code::InvalidArgument,
        400,
    ),
    (
        ErrorKind::VersionNotSupported,
        Provoke::OldVersion,
        -32009,
        Code::FailedPrecondition,
        400,
    ),
];

/// The canonical name of a gRPC code, as in HTTP+JSON `error.status`.
fn code_name(code: Code) -> &'static str {
    match code {
        Code::NotFound => "NOT_FOUND",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        other => panic!("not in the table: {other:?}"),
    }
}

async fn error_codes_follow_the_spec_table(b: Binding) {
    let server = scripted_server().await;
    let c = client(&server, b).await;
    let done = send_task(&c, b, msg("tck-complete-task")).await.id;
    let unknown = new_id();
    let png = json!([{"raw": "aGk=", "mediaType": "image/png", "filename": "a.png"}]);
    for (kind, provoke, rpc_code, grpc_code, http_status) in SPEC_TABLE {
        let what = format!("[{b}] {kind:?} ({provoke:?})");
        match b {
            Binding::JsonRpc => {
                let mut version = "1.0";
                let (method, params) = match provoke {
                    Provoke::GetUnknownTask => ("GetTask", json!({"id": unknown})),
                    Provoke::CancelCompletedTask => ("CancelTask", json!({"id": done})),
                    Provoke::GetPushConfig => (
                        "GetTaskPushNotificationConfig",
                        json!({"taskId": done, "id": "c1"}),
                    ),
                    Provoke::MessageToCompletedTask => {
                        let mut m = message_json("tck-complete-task");
                        m["taskId"] = json!(done);
                        ("SendMessage", send_params(m))
                    }
                    Provoke::UnacceptedMediaType => {
                        let mut m = message_json("tck-complete-task");
                        m["parts"] = png.clone();
                        ("SendMessage", send_params(m))
                    }
                    Provoke::OldVersion => {
                        version = "0.3";
                        ("GetTask", json!({"id": done}))
                    }
                };
                let r = raw_send(
                    raw_http()
                        .post(format!("{}/", server.base_url()))
                        .header("A2A-Version", version)
                        .body(rpc(method, params).to_string()),
                )
                .await;
                let e = assert_rpc_error(&r, json!(1), kind, &what);
                assert_eq!(e["code"].as_i64(), Some(rpc_code), "{what}");
            }
            Binding::HttpJson => {
                let mut version = "1.0";
                let (method, path, body) = match provoke {
                    Provoke::GetUnknownTask => (Method::GET, format!("/tasks/{unknown}"), None),
                    Provoke::CancelCompletedTask => (
                        Method::POST,
                        format!("/tasks/{done}:cancel"),
                        Some(json!({})),
                    ),
                    Provoke::GetPushConfig => (
                        Method::GET,
                        format!("/tasks/{done}/pushNotificationConfigs/c1"),
                        None,
                    ),
                    Provoke::MessageToCompletedTask => {
                        let mut m = message_json("tck-complete-task");
                        m["taskId"] = json!(done);
                        (Method::POST, "/message:send".into(), Some(send_params(m)))
                    }
                    Provoke::UnacceptedMediaType => {
                        let mut m = message_json("tck-complete-task");
                        m["parts"] = png.clone();
                        (Method::POST, "/message:send".into(), Some(send_params(m)))
                    }
                    Provoke::OldVersion => {
                        version = "0.3";
                        (Method::GET, format!("/tasks/{done}"), None)
                    }
                };
                let mut rb = raw_http()
                    .request(method, format!("{}{path}", server.base_url()))
                    .header("A2A-Version", version);
                if let Some(body) = body {
                    rb = rb
                        .header("content-type", "application/a2a+json")
                        .body(body.to_string());
                }
                let r = raw_send(rb).await;
                let e = assert_rest_error(&r, http_status, kind, &what);
                assert_eq!(e["status"], code_name(grpc_code), "{what}");
            }
            Binding::Grpc => {
                let mut g = grpc_raw(&server).await;
                let send_to = |message: Message| {
                    grpc_v1(SendMessageRequest {
                        message: Some(message),
                        ..Default::default()
                    })
                };
                let result = match provoke {
                    Provoke::GetUnknownTask => g
                        .get_task(grpc_v1(GetTaskRequest {
                            id: unknown.clone(),
                            ..Default::default()
                        }))
                        .await
                        .map(drop),
                    Provoke::CancelCompletedTask => g
                        .cancel_task(grpc_v1(CancelTaskRequest {
                            id: done.clone(),
                            ..Default::default()
                        }))
                        .await
                        .map(drop),
                    Provoke::GetPushConfig => g
                        .get_task_push_notification_config(grpc_v1(
                            GetTaskPushNotificationConfigRequest {
                                task_id: done.clone(),
                                id: "c1".into(),
                                ..Default::default()
                            },
                        ))
                        .await
                        .map(drop),
                    Provoke::MessageToCompletedTask => g
                        .send_message(send_to(msg("tck-complete-task").with_task_id(&done)))
                        .await
                        .map(drop),
                    Provoke::UnacceptedMediaType => {
                        let mut m = msg("tck-complete-task");
                        m.parts = vec![Part::file(&b"hi"[..], "a.png", "image/png")];
                        g.send_message(send_to(m)).await.map(drop)
                    }
                    Provoke::OldVersion => {
                        let mut req = tonic::Request::new(GetTaskRequest {
                            id: done.clone(),
                            ..Default::default()
                        });
                        req.metadata_mut().insert(
                            "a2a-version",
                            tonic::metadata::MetadataValue::from_static("0.3"),
                        );
                        g.get_task(req).await.map(drop)
                    }
                };
                let status = result.expect_err(&what);
                assert_grpc_error(&status, grpc_code, kind, &what);
            }
        }
    }
}

// ----- 13. bad input ----------------------------------------------------------------

/// The server every bad-input test talks to: small body limit.
async fn small_server() -> ServerHandle {
    start_server(A2aServer::new(scripted_card(), Scripted::default()).max_body_bytes(4096)).await
}

/// Invalid `SendMessage` params, each with what it is (all must be refused
/// as invalid parameters). `task` is the id of an existing task.
fn invalid_sends(task: &str) -> Vec<(&'static str, Value)> {
    let m = |patch: Value| {
        let mut base = message_json("tck-complete-task");
        for (k, v) in patch.as_object().unwrap() {
            if v.is_null() {
                base.as_object_mut().unwrap().remove(k);
            } else {
                base[k] = v.clone();
            }
        }
        send_params(base)
    };
    vec![
        ("missing message", json!({})),
        ("message null", json!({"message": null})),
        ("empty parts", m(json!({"parts": []}))),
        ("no parts", m(json!({"parts": null}))),
        (
            "a part with text and url",
            m(json!({"parts": [{"text": "a", "url": "https://example.com/a"}]})),
        ),
        ("a part without content", m(json!({"parts": [{}]}))),
        ("unknown role ROLE_ROBOT", m(json!({"role": "ROLE_ROBOT"}))),
        ("role agent", m(json!({"role": "ROLE_AGENT"}))),
        ("no role", m(json!({"role": null}))),
        ("parts a string", m(json!({"parts": "hello"}))),
        ("messageId a number", m(json!({"messageId": 5}))),
        ("no messageId", m(json!({"messageId": null}))),
        ("message an array", json!({"message": []})),
        (
            "continuation with empty parts",
            m(json!({"taskId": task, "parts": []})),
        ),
        (
            "continuation with an unknown role",
            m(json!({"taskId": task, "role": "ROLE_ROBOT"})),
        ),
        (
            "continuation with another contextId",
            m(json!({"taskId": task, "contextId": new_id()})),
        ),
        (
            "negative historyLength",
            json!({"message": message_json("tck-complete-task"),
                   "configuration": {"historyLength": -1}}),
        ),
    ]
}

/// A ~10 KB `SendMessage` body.
fn oversized() -> Value {
    let mut m = message_json("tck-complete-task");
    m["parts"][0]["text"] = json!("x".repeat(10 * 1024));
    send_params(m)
}

async fn bad_input_is_refused_cleanly(b: Binding) {
    let server = small_server().await;
    let c: Client = client(&server, b).await;
    // Tasks that exist before the bad input: one interrupted (may still
    // change), one completed.
    let open = send_task(&c, b, msg("tck-input-required")).await;
    let done = send_task(&c, b, msg("tck-artifact-data")).await;
    let open_before = get_task(&c, b, &open.id).await;
    let done_before = get_task(&c, b, &done.id).await;
    let unknown = new_id();

    match b {
        Binding::JsonRpc => jsonrpc_bad_input(&server, &open.id, &unknown).await,
        Binding::HttpJson => rest_bad_input(&server, &open.id, &unknown).await,
        Binding::Grpc => grpc_bad_input(&server, &open.id, &unknown).await,
    }

    // Nothing was corrupted and the server still answers normally.
    assert_eq!(
        get_task(&c, b, &open.id).await,
        open_before,
        "[{b}] the interrupted task is unchanged"
    );
    assert_eq!(
        get_task(&c, b, &done.id).await,
        done_before,
        "[{b}] the completed task is unchanged"
    );
    let fresh = send_task(&c, b, msg("tck-complete-task")).await;
    assert_eq!(fresh.state(), TaskState::Completed, "[{b}] still serving");
    let cont = send_task(&c, b, msg("tck-complete-task").with_task_id(&open.id)).await;
    assert_eq!(
        cont.state(),
        TaskState::Completed,
        "[{b}] the interrupted task can still be continued"
    );
}

async fn jsonrpc_bad_input(server: &ServerHandle, task: &str, unknown: &str) {
    // Envelope problems.
    let get = json!({"id": unknown});
    let envelopes: Vec<(&str, String, Value, ErrorKind)> = vec![
        (
            "malformed JSON",
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"#.into(),
            Value::Null,
            ErrorKind::ParseError,
        ),
        (
            "not JSON",
            "hello there".into(),
            Value::Null,
            ErrorKind::ParseError,
        ),
        (
            "empty body",
            String::new(),
            Value::Null,
            ErrorKind::ParseError,
        ),
        (
            "missing jsonrpc",
            json!({"id": 1, "method": "GetTask", "params": get}).to_string(),
            json!(1),
            ErrorKind::InvalidRequest,
        ),
        (
            "jsonrpc 1.0",
            json!({"jsonrpc": "1.0", "id": 1, "method": "GetTask", "params": get}).to_string(),
            json!(1),
            ErrorKind::InvalidRequest,
        ),
        (
            "jsonrpc a number",
            json!({"jsonrpc": 2.0, "id": 1, "method": "GetTask", "params": get}).to_string(),
            json!(1),
            ErrorKind::InvalidRequest,
        ),
        (
            "missing method",
            json!({"jsonrpc": "2.0", "id": 1, "params": get}).to_string(),
            json!(1),
            ErrorKind::InvalidRequest,
        ),
        (
            "method a number",
            json!({"jsonrpc": "2.0", "id": 1, "method": 5}).to_string(),
            json!(1),
            ErrorKind::InvalidRequest,
        ),
        (
            "id an object",
            json!({"jsonrpc": "2.0", "id": {"a": 1}, "method": "GetTask", "params": get})
                .to_string(),
            Value::Null,
            ErrorKind::InvalidRequest,
        ),
        (
            "id an array",
            json!({"jsonrpc": "2.0", "id": [1], "method": "GetTask", "params": get}).to_string(),
            Value::Null,
            ErrorKind::InvalidRequest,
        ),
        (
            "missing id",
            json!({"jsonrpc": "2.0", "method": "GetTask", "params": get}).to_string(),
            Value::Null,
            ErrorKind::InvalidRequest,
        ),
        (
            "a batch",
            json!([rpc("GetTask", get.clone()), rpc("GetTask", get.clone())]).to_string(),
            Value::Null,
            ErrorKind::InvalidRequest,
        ),
        (
            "an empty batch",
            "[]".into(),
            Value::Null,
            ErrorKind::InvalidRequest,
        ),
        (
            "a string",
            "\"GetTask\"".into(),
            Value::Null,
            ErrorKind::InvalidRequest,
        ),
        (
            "unknown method",
            rpc("DoSomething", json!({})).to_string(),
            json!(1),
            ErrorKind::MethodNotFound,
        ),
        (
            // An escaped method name is the same name.
            "method with an escape",
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"Get\u0054ask","params":{get}}}"#),
            json!(1),
            ErrorKind::TaskNotFound,
        ),
        (
            "method in another case",
            rpc("sendMessage", send_params(message_json("x"))).to_string(),
            json!(1),
            ErrorKind::MethodNotFound,
        ),
        (
            "params an array",
            rpc("GetTask", json!([unknown])).to_string(),
            json!(1),
            ErrorKind::InvalidParams,
        ),
        (
            "params a string",
            rpc("SendMessage", json!("hello")).to_string(),
            json!(1),
            ErrorKind::InvalidParams,
        ),
        (
            "GetTask without id",
            rpc("GetTask", json!({})).to_string(),
            json!(1),
            ErrorKind::InvalidParams,
        ),
        (
            "string id is echoed",
            json!({"jsonrpc": "2.0", "id": "req-9", "method": "GetTask", "params": get})
                .to_string(),
            json!("req-9"),
            ErrorKind::TaskNotFound,
        ),
        (
            "GetTask of an unknown task",
            rpc("GetTask", get.clone()).to_string(),
            json!(1),
            ErrorKind::TaskNotFound,
        ),
        (
            "CancelTask of an unknown task",
            rpc("CancelTask", get.clone()).to_string(),
            json!(1),
            ErrorKind::TaskNotFound,
        ),
        (
            "SubscribeToTask of an unknown task",
            rpc("SubscribeToTask", get.clone()).to_string(),
            json!(1),
            ErrorKind::TaskNotFound,
        ),
        (
            // Params before the method: read by the general path.
            "params before method",
            {
                let mut m = message_json("tck-complete-task");
                m["taskId"] = json!(unknown);
                format!(
                    r#"{{"jsonrpc":"2.0","id":1,"params":{},"method":"SendMessage"}}"#,
                    send_params(m)
                )
            },
            json!(1),
            ErrorKind::TaskNotFound,
        ),
        (
            "SendMessage with params twice",
            {
                let p = send_params(message_json("tck-complete-task"));
                format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{p},"params":{p}}}"#
                )
            },
            Value::Null,
            ErrorKind::InvalidRequest,
        ),
        (
            "SendMessage with jsonrpc 1.0",
            json!({"jsonrpc": "1.0", "id": 1, "method": "SendMessage",
                   "params": send_params(message_json("tck-complete-task"))})
            .to_string(),
            json!(1),
            ErrorKind::InvalidRequest,
        ),
        (
            "message to an unknown task",
            rpc(
                "SendMessage",
                send_params({
                    let mut m = message_json("tck-complete-task");
                    m["taskId"] = json!(unknown);
                    m
                }),
            )
            .to_string(),
            json!(1),
            ErrorKind::TaskNotFound,
        ),
        (
            "ListTasks with pageSize 0",
            rpc("ListTasks", json!({"pageSize": 0})).to_string(),
            json!(1),
            ErrorKind::InvalidParams,
        ),
        (
            "ListTasks with an unknown status",
            rpc("ListTasks", json!({"status": "TASK_STATE_RUNNING"})).to_string(),
            json!(1),
            ErrorKind::InvalidParams,
        ),
    ];
    for (what, body, id, kind) in envelopes {
        let r = rpc_raw(server, body, true).await;
        assert_rpc_error(&r, id, kind, &format!("[JSONRPC] {what}"));
    }
    // A batch is told so (serde alone would read an array of three items
    // as an envelope's first three members, and blame the id).
    for body in [
        json!([rpc("GetTask", get.clone()), rpc("GetTask", get.clone())]).to_string(),
        json!(["2.0", 1, "GetTask"]).to_string(),
        " []".to_owned(),
    ] {
        let r = rpc_raw(server, body.clone(), true).await;
        let error = assert_rpc_error(&r, Value::Null, ErrorKind::InvalidRequest, &body);
        let message = error["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("batch requests are not supported"),
            "[JSONRPC] {body}: {error}"
        );
    }
    for (what, params) in invalid_sends(task) {
        for method in ["SendMessage", "SendStreamingMessage"] {
            let r = rpc_raw(server, rpc(method, params.clone()).to_string(), true).await;
            assert_rpc_error(
                &r,
                json!(1),
                ErrorKind::InvalidParams,
                &format!("[JSONRPC] {method}: {what}"),
            );
        }
    }

    // Oversized: a JSON-RPC error object, with HTTP 413 (refused before
    // the body is read).
    let body = rpc("SendMessage", oversized()).to_string();
    assert!(body.len() > 10_000);
    let r = rpc_raw(server, body, true).await;
    assert_eq!(r.status, 413, "[JSONRPC] oversized body: {r:?}");
    let answer = r.json();
    assert_eq!(
        answer["id"],
        Value::Null,
        "[JSONRPC] oversized body: {answer}"
    );
    let e = answer["error"].clone();
    assert_eq!(
        e["code"].as_i64(),
        Some(ErrorKind::InvalidRequest.jsonrpc_code()),
        "[JSONRPC] oversized body: {answer}"
    );
    assert!(
        e["message"].as_str().unwrap().contains("4096"),
        "[JSONRPC] the error names the limit: {e}"
    );
}

async fn rest_bad_input(server: &ServerHandle, task: &str, unknown: &str) {
    let post = |path: &str, body: &[u8]| {
        let path = path.to_owned();
        let body = body.to_vec();
        async move { rest_raw(server, Method::POST, &path, Some(body), true).await }
    };
    for (what, body) in [
        ("malformed JSON", &br#"{"message": {"#[..]),
        ("not JSON", &b"hello there"[..]),
    ] {
        for path in ["/message:send", "/message:stream"] {
            let r = post(path, body).await;
            let e = assert_rest_error(
                &r,
                400,
                ErrorKind::ParseError,
                &format!("[REST] {path}: {what}"),
            );
            assert_eq!(e["status"], "INVALID_ARGUMENT", "[REST] {what}");
        }
    }
    for (what, params) in invalid_sends(task) {
        for path in ["/message:send", "/message:stream"] {
            let r = post(path, params.to_string().as_bytes()).await;
            let e = assert_rest_error(
                &r,
                400,
                ErrorKind::InvalidParams,
                &format!("[REST] {path}: {what}"),
            );
            assert_eq!(e["status"], "INVALID_ARGUMENT", "[REST] {what}");
        }
    }
    let r = post("/message:send", b"[1, 2]").await;
    assert_rest_error(&r, 400, ErrorKind::InvalidParams, "[REST] body an array");

    // Unknown tasks.
    for (method, path) in [
        (Method::GET, format!("/tasks/{unknown}")),
        (Method::POST, format!("/tasks/{unknown}:cancel")),
        (Method::GET, format!("/tasks/{unknown}:subscribe")),
        (Method::POST, format!("/tasks/{unknown}:subscribe")),
    ] {
        let body = (method == Method::POST).then(|| b"{}".to_vec());
        let r = rest_raw(server, method.clone(), &path, body, true).await;
        let e = assert_rest_error(
            &r,
            404,
            ErrorKind::TaskNotFound,
            &format!("[REST] {method} {path}"),
        );
        assert_eq!(e["details"][0]["metadata"]["taskId"], unknown);
    }
    let cont = send_params({
        let mut m = message_json("tck-complete-task");
        m["taskId"] = json!(unknown);
        m
    });
    let r = post("/message:send", cont.to_string().as_bytes()).await;
    assert_rest_error(
        &r,
        404,
        ErrorKind::TaskNotFound,
        "[REST] message to an unknown task",
    );

    // Bad query parameters.
    for (what, query) in [
        ("pageSize 0", "pageSize=0"),
        ("pageSize 101", "pageSize=101"),
        ("pageSize not a number", "pageSize=ten"),
        ("unknown status", "status=TASK_STATE_RUNNING"),
        ("garbage pageToken", "pageToken=garbage!"),
        ("bad timestamp", "statusTimestampAfter=yesterday"),
        ("includeArtifacts not a bool", "includeArtifacts=maybe"),
    ] {
        let r = rest_raw(server, Method::GET, &format!("/tasks?{query}"), None, true).await;
        assert_rest_error(
            &r,
            400,
            ErrorKind::InvalidParams,
            &format!("[REST] ListTasks {what}"),
        );
    }
    let r = rest_raw(
        server,
        Method::GET,
        &format!("/tasks/{task}?historyLength=x"),
        None,
        true,
    )
    .await;
    assert_rest_error(&r, 400, ErrorKind::InvalidParams, "[REST] historyLength=x");

    // Unknown routes and methods.
    let r = rest_raw(server, Method::GET, "/no/such/route/here", None, true).await;
    assert_rest_error(&r, 404, ErrorKind::MethodNotFound, "[REST] unknown route");
    let r = rest_raw(server, Method::GET, "/message:send", None, true).await;
    assert_rest_error(
        &r,
        405,
        ErrorKind::MethodNotFound,
        "[REST] GET /message:send",
    );

    // Oversized: 413 with an error body.
    let body = oversized().to_string();
    assert!(body.len() > 10_000);
    let r = post("/message:send", body.as_bytes()).await;
    let e = assert_rest_error(&r, 413, ErrorKind::InvalidRequest, "[REST] oversized body");
    assert!(
        e["message"].as_str().unwrap().contains("4096"),
        "[REST] the error names the limit: {e}"
    );
}

async fn grpc_bad_input(server: &ServerHandle, task: &str, unknown: &str) {
    let mut g = grpc_raw(server).await;
    let send = |message: Message| {
        grpc_v1(SendMessageRequest {
            message: Some(message),
            ..Default::default()
        })
    };
    let valid = || msg("tck-complete-task");
    let with_parts = |parts: Vec<Part>| {
        let mut m = valid();
        m.parts = parts;
        m
    };
    let invalid: Vec<(&str, tonic::Request<SendMessageRequest>)> = vec![
        ("missing message", grpc_v1(SendMessageRequest::default())),
        ("empty parts", send(with_parts(Vec::new()))),
        (
            "a part without content",
            send(with_parts(vec![Part::default()])),
        ),
        (
            "unknown role value 99",
            send(Message {
                role: 99,
                ..valid()
            }),
        ),
        (
            "role agent",
            send(Message {
                role: Role::Agent as i32,
                ..valid()
            }),
        ),
        ("no role", send(Message { role: 0, ..valid() })),
        (
            "no messageId",
            send(Message {
                message_id: String::new(),
                ..valid()
            }),
        ),
        (
            "continuation with empty parts",
            send(Message {
                task_id: task.into(),
                parts: Vec::new(),
                ..valid()
            }),
        ),
        (
            "continuation with an unknown role",
            send(Message {
                task_id: task.into(),
                role: 42,
                ..valid()
            }),
        ),
        (
            "continuation with another contextId",
            send(Message {
                task_id: task.into(),
                context_id: new_id(),
                ..valid()
            }),
        ),
    ];
    for (what, req) in invalid {
        let status = within(format!("[GRPC] {what}"), g.send_message(req))
            .await
            .expect_err(what);
        assert_grpc_error(
            &status,
            Code::InvalidArgument,
            ErrorKind::InvalidParams,
            &format!("[GRPC] SendMessage: {what}"),
        );
    }
    let status = within(
        "[GRPC] stream, empty parts",
        g.send_streaming_message(send(with_parts(Vec::new()))),
    )
    .await
    .expect_err("empty parts");
    assert_grpc_error(
        &status,
        Code::InvalidArgument,
        ErrorKind::InvalidParams,
        "[GRPC] stream, empty parts",
    );

    // Unknown tasks.
    let status = within(
        "[GRPC] get unknown",
        g.get_task(grpc_v1(GetTaskRequest {
            id: unknown.into(),
            ..Default::default()
        })),
    )
    .await
    .expect_err("unknown task");
    let e = assert_grpc_error(
        &status,
        Code::NotFound,
        ErrorKind::TaskNotFound,
        "[GRPC] GetTask unknown",
    );
    assert_eq!(e.metadata["taskId"], unknown);
    let status = within(
        "[GRPC] cancel unknown",
        g.cancel_task(grpc_v1(CancelTaskRequest {
            id: unknown.into(),
            ..Default::default()
        })),
    )
    .await
    .expect_err("unknown task");
    assert_grpc_error(
        &status,
        Code::NotFound,
        ErrorKind::TaskNotFound,
        "[GRPC] CancelTask unknown",
    );
    let status = within(
        "[GRPC] subscribe unknown",
        g.subscribe_to_task(grpc_v1(SubscribeToTaskRequest {
            id: unknown.into(),
            ..Default::default()
        })),
    )
    .await
    .expect_err("unknown task");
    assert_grpc_error(
        &status,
        Code::NotFound,
        ErrorKind::TaskNotFound,
        "[GRPC] SubscribeToTask unknown",
    );
    let status = within(
        "[GRPC] message to unknown",
        g.send_message(send(Message {
            task_id: unknown.into(),
            ..valid()
        })),
    )
    .await
    .expect_err("unknown task");
    assert_grpc_error(
        &status,
        Code::NotFound,
        ErrorKind::TaskNotFound,
        "[GRPC] message to unknown task",
    );

    // Bytes that are not the request message: INVALID_ARGUMENT (the
    // client's fault), with an A2A parse error.
    let wrong_wire_type = [0x12, 0x02, 0x28, 0x01]; // message { parts: varint }
    for (what, payload) in [
        ("garbage bytes", &[0xff_u8, 0xff, 0xff, 0xff, 0x0f][..]),
        ("a field of the wrong wire type", &wrong_wire_type[..]),
        ("a truncated message", &[0x12, 0x7f, 0x0a][..]),
    ] {
        let w = grpc_wire(server, "SendMessage", payload, true).await;
        assert_eq!(w.http_status, 200, "[GRPC] {what}: {w:?}");
        assert_eq!(
            w.grpc_status,
            Some(Code::InvalidArgument as i32),
            "[GRPC] {what}: {w:?}"
        );
    }
    // An unknown method.
    let w = grpc_wire(server, "DoSomething", &[], true).await;
    assert_eq!(
        w.grpc_status,
        Some(Code::Unimplemented as i32),
        "[GRPC] unknown method: {w:?}"
    );
    // The error of a raw call carries the same details as the client sees.
    let empty = SendMessageRequest::default().encode_to_vec();
    let w = grpc_wire(server, "SendMessage", &empty, true).await;
    assert_eq!(
        w.grpc_status,
        Some(Code::InvalidArgument as i32),
        "[GRPC] raw: {w:?}"
    );
    let details = w.details.expect("grpc-status-details-bin");
    let status = tonic::Status::with_details(Code::InvalidArgument, w.grpc_message, details.into());
    assert_grpc_error(
        &status,
        Code::InvalidArgument,
        ErrorKind::InvalidParams,
        "[GRPC] raw details",
    );

    // Oversized: an error status from the message size limit.
    let big = Message::user_text("x".repeat(10 * 1024))
        .with_message_id(format!("tck-complete-task-{}", new_id()));
    let status = within("[GRPC] oversized", g.send_message(send(big)))
        .await
        .expect_err("oversized");
    assert_eq!(
        status.code(),
        Code::ResourceExhausted,
        "[GRPC] oversized: {status:?}"
    );

    // The generated client still works on the same channel.
    let t: Task = within(
        "[GRPC] get",
        g.get_task(grpc_v1(GetTaskRequest {
            id: task.into(),
            ..Default::default()
        })),
    )
    .await
    .expect("GetTask")
    .into_inner();
    assert_eq!(t.id, task);
}

// ----- 14. the HTTP/1 read buffer -------------------------------------------------

/// Each connection reads through one buffer of `MAX_HEAD_BYTES`: a request
/// head larger than that is refused with 431, and the server goes on
/// serving; bodies far larger than the buffer pass through it whole.
#[tokio::test]
async fn request_heads_are_capped_and_bodies_are_not() {
    let server = start_server(A2aServer::new(scripted_card(), Scripted::default())).await;
    let http = raw_http();
    let url = format!("{}/", server.base_url());
    let send = |text: String| {
        let message = json!({
            "messageId": format!("tck-complete-task-{}", new_id()),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        });
        rpc("SendMessage", send_params(message)).to_string()
    };

    let r = within(
        "big head",
        http.post(&url)
            .header("A2A-Version", "1.0")
            .header("Content-Type", "application/json")
            .header(
                "X-Padding",
                "p".repeat(agentwire_server::MAX_HEAD_BYTES + 1),
            )
            .body(send("hi".into()))
            .send(),
    )
    .await
    .expect("answer");
    assert_eq!(r.status().as_u16(), 431, "a head over the cap is refused");

    // 300 KB of text: many buffer-fulls, one message, nothing lost.
    let text = "0123456789".repeat(30_000);
    let r = within(
        "big body",
        http.post(&url)
            .header("A2A-Version", "1.0")
            .header("Content-Type", "application/json")
            .body(send(text.clone()))
            .send(),
    )
    .await
    .expect("answer");
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.expect("JSON");
    let task = &v["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
    assert_eq!(
        task["history"][0]["parts"][0]["text"]
            .as_str()
            .map(str::len),
        Some(text.len()),
        "the whole text arrived"
    );
}
