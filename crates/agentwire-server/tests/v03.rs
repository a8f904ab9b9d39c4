//! Clients of protocol version 0.3 served beside 1.0 on the same endpoints,
//! with raw requests in the 0.3 wire forms: JSON-RPC method names
//! (`message/send`...), `kind`-tagged objects, kebab-case states, `final` on
//! status updates, 0.3 error objects; the version rules (no `A2A-Version`
//! means 0.3); the agent card's 0.3 fields; and turning 0.3 off.

#[allow(unused_macros)]
mod common;

use agentwire_server::{A2aServer, HandlerConfig, PushConfig, ServerHandle};
use agentwire_types::new_id;
use common::agents::{Echo, Scripted, echo_card, scripted_card};
use common::*;
use serde_json::{Value, json};

/// A 0.3 JSON-RPC request: no `A2A-Version` (0.3 clients send none).
async fn call03(server: &ServerHandle, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": "r-1", "method": method, "params": params});
    let r = rpc_raw(server, body.to_string(), false).await;
    assert_eq!(r.status, 200, "{method}: {:?}", r.body);
    let v = r.json();
    assert_eq!(v["jsonrpc"], "2.0");
    assert_eq!(v["id"], "r-1");
    v
}

fn result(v: &Value) -> &Value {
    assert!(v.get("error").is_none(), "unexpected error: {v}");
    &v["result"]
}

/// The 0.3 error object: code, message, data with the reason.
#[track_caller]
fn error03(v: &Value, code: i64, reason: &str) {
    let e = &v["error"];
    assert_eq!(e["code"], code, "{v}");
    assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    assert_eq!(e["data"]["reason"], reason, "{v}");
}

fn message03(prefix: &str) -> Value {
    json!({
        "kind": "message",
        "messageId": format!("{prefix}-{}", new_id()),
        "role": "user",
        "parts": [{"kind": "text", "text": "hello"}],
    })
}

/// SSE `data:` payloads of a response body.
fn sse_data(body: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).expect("SSE data is JSON"))
        .collect()
}

async fn stream03(server: &ServerHandle, method: &str, params: Value) -> Vec<Value> {
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": method, "params": params});
    let r = raw_send(
        raw_http()
            .post(format!("{}/", server.base_url()))
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .body(body.to_string()),
    )
    .await;
    assert_eq!(r.status, 200);
    sse_data(&r.body)
}

#[tokio::test]
async fn send_get_cancel_and_errors_in_the_0_3_forms() {
    let server = scripted_server().await;
    // message/send: a completed task, kind-tagged, kebab-case state.
    let v = call03(
        &server,
        "message/send",
        json!({"message": message03("tck-artifact-text")}),
    )
    .await;
    let task = result(&v);
    assert_eq!(task["kind"], "task", "{v}");
    assert_eq!(task["status"]["state"], "completed");
    assert_eq!(task["artifacts"][0]["parts"][0]["kind"], "text");
    assert_eq!(
        task["artifacts"][0]["parts"][0]["text"],
        "Generated text content"
    );
    assert_eq!(task["history"][0]["kind"], "message");
    assert_eq!(task["history"][0]["role"], "user");
    let id = task["id"].as_str().unwrap().to_owned();

    // A file artifact: FilePart with base64 bytes.
    let v = call03(
        &server,
        "message/send",
        json!({"message": message03("tck-artifact-file")}),
    )
    .await;
    let file = &result(&v)["artifacts"][0]["parts"][0];
    assert_eq!(file["kind"], "file", "{v}");
    assert_eq!(file["file"]["name"], "output.txt");
    assert_eq!(file["file"]["mimeType"], "text/plain");
    assert!(file["file"]["bytes"].is_string());

    // A direct message answer.
    let v = call03(
        &server,
        "message/send",
        json!({"message": message03("tck-message-response")}),
    )
    .await;
    assert_eq!(result(&v)["kind"], "message", "{v}");
    assert_eq!(result(&v)["role"], "agent");

    // tasks/get, with historyLength.
    let v = call03(&server, "tasks/get", json!({"id": id, "historyLength": 1})).await;
    assert_eq!(result(&v)["id"], id.as_str());
    assert_eq!(result(&v)["kind"], "task");

    // Errors: task not found, not cancelable, invalid params, unknown method.
    let v = call03(&server, "tasks/get", json!({"id": "no-such-task"})).await;
    error03(&v, -32001, "TASK_NOT_FOUND");
    let v = call03(&server, "tasks/cancel", json!({"id": id})).await;
    error03(&v, -32002, "TASK_NOT_CANCELABLE");
    let v = call03(
        &server,
        "message/send",
        json!({"message": {"role": "user"}}),
    )
    .await;
    error03(&v, -32602, "INVALID_PARAMS");
    let v = call03(&server, "tasks/list", json!({})).await;
    error03(&v, -32601, "METHOD_NOT_FOUND");
    // A message to a terminal task.
    let mut m = message03("again");
    m["taskId"] = json!(id);
    let v = call03(&server, "message/send", json!({"message": m})).await;
    error03(&v, -32004, "UNSUPPORTED_OPERATION");
    // Push notifications are off on this agent.
    let v = call03(
        &server,
        "tasks/pushNotificationConfig/get",
        json!({"id": id}),
    )
    .await;
    error03(&v, -32003, "PUSH_NOTIFICATION_NOT_SUPPORTED");
}

#[tokio::test]
async fn non_blocking_send_then_cancel() {
    let server = long_running_server().await;
    let v = call03(
        &server,
        "message/send",
        json!({"message": message03("test-resubscribe-message-id"),
               "configuration": {"blocking": false}}),
    )
    .await;
    let task = result(&v);
    assert_ne!(task["status"]["state"], "completed", "{v}");
    let id = task["id"].as_str().unwrap().to_owned();
    let v = call03(&server, "tasks/cancel", json!({"id": id})).await;
    assert_eq!(result(&v)["status"]["state"], "canceled", "{v}");
}

#[tokio::test]
async fn streams_end_with_a_final_status_update() {
    let server = scripted_server().await;
    let events = stream03(
        &server,
        "message/stream",
        json!({"message": message03("tck-stream-001")}),
    )
    .await;
    assert!(!events.is_empty());
    for e in &events {
        assert_eq!(e["jsonrpc"], "2.0");
        assert_eq!(e["id"], 5);
    }
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["result"]["kind"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(kinds[0], "task", "{events:?}");
    assert!(kinds.contains(&"artifact-update"), "{kinds:?}");
    let last = &events.last().unwrap()["result"];
    assert_eq!(last["kind"], "status-update");
    assert_eq!(last["status"]["state"], "completed");
    assert_eq!(last["final"], true);
    for e in &events[..events.len() - 1] {
        if e["result"]["kind"] == "status-update" {
            assert_eq!(e["result"]["final"], false, "{e}");
        }
    }
}

#[tokio::test]
async fn resubscribe_follows_a_running_task() {
    let server = scripted_server().await;
    let v = call03(
        &server,
        "message/send",
        json!({"message": message03("test-resubscribe-message-id"),
               "configuration": {"blocking": false}}),
    )
    .await;
    let id = result(&v)["id"].as_str().unwrap().to_owned();
    let events = stream03(&server, "tasks/resubscribe", json!({"id": id})).await;
    assert_eq!(events[0]["result"]["kind"], "task", "{events:?}");
    let last = &events.last().unwrap()["result"];
    assert_eq!(last["final"], true, "{events:?}");
    // A terminal task cannot be resubscribed to.
    let events = stream03(&server, "tasks/resubscribe", json!({"id": id})).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["error"]["code"], -32004, "{events:?}");
}

#[tokio::test]
async fn push_config_crud() {
    let server =
        start_server(A2aServer::new(echo_card(), Echo).push(PushConfig::new().allow_loopback()))
            .await;
    let v = call03(&server, "message/send", json!({"message": message03("p")})).await;
    let id = result(&v)["id"].as_str().unwrap().to_owned();
    let hook = "http://127.0.0.1:9/hook";
    // Without an id: the config is named after the task.
    let v = call03(
        &server,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": id, "pushNotificationConfig": {
            "url": hook, "token": "tok", "authentication": {"schemes": ["Bearer"], "credentials": "c"}}}),
    )
    .await;
    let set = result(&v);
    assert_eq!(set["taskId"], id.as_str(), "{v}");
    assert_eq!(set["pushNotificationConfig"]["id"], id.as_str());
    assert_eq!(
        set["pushNotificationConfig"]["authentication"]["schemes"],
        json!(["Bearer"])
    );
    let v = call03(
        &server,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": id, "pushNotificationConfig": {"id": "second", "url": hook}}),
    )
    .await;
    assert_eq!(result(&v)["pushNotificationConfig"]["id"], "second");
    // get without a config id: the task's own; with one: that one.
    let v = call03(
        &server,
        "tasks/pushNotificationConfig/get",
        json!({"id": id}),
    )
    .await;
    assert_eq!(
        result(&v)["pushNotificationConfig"]["id"],
        id.as_str(),
        "{v}"
    );
    let v = call03(
        &server,
        "tasks/pushNotificationConfig/get",
        json!({"id": id, "pushNotificationConfigId": "second"}),
    )
    .await;
    assert_eq!(result(&v)["pushNotificationConfig"]["url"], hook);
    // list: an array of every config.
    let v = call03(
        &server,
        "tasks/pushNotificationConfig/list",
        json!({"id": id}),
    )
    .await;
    assert_eq!(result(&v).as_array().map(Vec::len), Some(2), "{v}");
    // delete: null.
    let v = call03(
        &server,
        "tasks/pushNotificationConfig/delete",
        json!({"id": id, "pushNotificationConfigId": "second"}),
    )
    .await;
    assert_eq!(result(&v), &Value::Null, "{v}");
    let v = call03(
        &server,
        "tasks/pushNotificationConfig/get",
        json!({"id": id, "pushNotificationConfigId": "second"}),
    )
    .await;
    error03(&v, -32001, "TASK_NOT_FOUND");
    let v = call03(
        &server,
        "tasks/pushNotificationConfig/delete",
        json!({"id": id}),
    )
    .await;
    error03(&v, -32602, "INVALID_PARAMS");
}

#[tokio::test]
async fn version_rules() {
    let server = scripted_server().await;
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send",
                      "params": {"message": message03("tck-complete-task")}});
    // Version 0.3 named explicitly (header, or query parameter): served.
    for (path, header) in [
        ("/", Some("0.3")),
        ("/", Some("0.3.1")),
        ("/?A2A-Version=0.3", None),
    ] {
        let mut rb = raw_http()
            .post(format!("{}{path}", server.base_url()))
            .body(send.to_string());
        if let Some(h) = header {
            rb = rb.header("A2A-Version", h);
        }
        let v = raw_send(rb).await.json();
        assert_eq!(
            v["result"]["status"]["state"], "completed",
            "{path} {header:?}: {v}"
        );
    }
    // A 0.3 method with another version: VersionNotSupported in the 0.3
    // form, naming both versions.
    for version in ["1.0", "0.2", "2.0"] {
        let r = raw_send(
            raw_http()
                .post(format!("{}/", server.base_url()))
                .header("A2A-Version", version)
                .body(send.to_string()),
        )
        .await;
        let v = r.json();
        error03(&v, -32009, "VERSION_NOT_SUPPORTED");
        assert_eq!(
            v["error"]["data"]["supportedVersions"], "0.3,1.0,1.1",
            "{v}"
        );
    }
    // A 1.0 method without a version is still refused (1.0 form).
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                      "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}}});
    let r = rpc_raw(&server, body.to_string(), false).await;
    let v = r.json();
    assert_eq!(v["error"]["code"], -32009, "{v}");
    assert_eq!(v["error"]["data"][0]["reason"], "VERSION_NOT_SUPPORTED");
    // And served with 1.0, next to the 0.3 calls.
    let r = rpc_raw(&server, body.to_string(), true).await;
    assert_eq!(
        r.json()["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[tokio::test]
async fn turning_0_3_off() {
    let config = HandlerConfig {
        serve_v03: false,
        ..Default::default()
    };
    let server =
        start_server(A2aServer::new(scripted_card(), Scripted::default()).config(config)).await;
    let v = call03(
        &server,
        "message/send",
        json!({"message": message03("tck-complete-task")}),
    )
    .await;
    error03(&v, -32009, "VERSION_NOT_SUPPORTED");
    assert_eq!(v["error"]["data"]["supportedVersions"], "1.0,1.1", "{v}");
    // The card has no 0.3 fields.
    let card =
        raw_send(raw_http().get(format!("{}/.well-known/agent-card.json", server.base_url())))
            .await
            .json();
    assert!(card.get("url").is_none(), "{card}");
    assert!(card.get("protocolVersion").is_none(), "{card}");
}

#[tokio::test]
async fn the_card_has_the_0_3_fields_and_stays_a_1_0_card() {
    let server = scripted_server().await;
    let r = raw_send(raw_http().get(format!("{}/.well-known/agent-card.json", server.base_url())))
        .await;
    let card = r.json();
    let base = server.base_url();
    assert_eq!(card["protocolVersion"], "0.3.0");
    assert_eq!(card["url"], format!("{base}/"));
    assert_eq!(card["preferredTransport"], "JSONRPC");
    let extra = card["additionalInterfaces"].as_array().unwrap();
    assert!(
        extra
            .iter()
            .any(|i| i["transport"] == "HTTP+JSON" && i["url"] == base.as_str()),
        "{card}"
    );
    // The 0.3 gRPC service is at the 1.0 one's address.
    let grpc = base.trim_start_matches("http://");
    assert!(
        extra
            .iter()
            .any(|i| i["transport"] == "GRPC" && i["url"] == grpc),
        "{card}"
    );
    // The 1.0 card as before.
    let one: agentwire_types::AgentCard = serde_json::from_value(card.clone()).unwrap();
    assert_eq!(&one, server.handler().agent_card());
    assert!(
        card["supportedInterfaces"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["protocolVersion"] == "1.0"),
        "{card}"
    );
}

// ----- HTTP+JSON: the /v1/ routes, bodies in the 0.3 ProtoJSON form ----------

async fn rest03(
    server: &ServerHandle,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> RawResponse {
    let mut rb = raw_http().request(method, format!("{}{path}", server.base_url()));
    if let Some(b) = body {
        rb = rb
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    raw_send(rb).await
}

fn rest_message(prefix: &str) -> Value {
    json!({
        "messageId": format!("{prefix}-{}", new_id()),
        "role": "ROLE_USER",
        "content": [{"text": "hello"}],
    })
}

#[tokio::test]
async fn rest_routes_in_the_0_3_form() {
    use reqwest::Method;
    let server = start_server(
        A2aServer::new(scripted_card(), Scripted::default())
            .push(PushConfig::new().allow_loopback()),
    )
    .await;
    let r = rest03(
        &server,
        Method::POST,
        "/v1/message:send",
        Some(json!({"message": rest_message("tck-artifact-file"),
                    "configuration": {"blocking": true}})),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let task = r.json()["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(task["history"][0]["role"], "ROLE_USER");
    assert_eq!(task["history"][0]["content"][0]["text"], "hello");
    let file = &task["artifacts"][0]["parts"][0]["file"];
    assert_eq!(file["mimeType"], "text/plain", "{task}");
    assert!(file["fileWithBytes"].is_string());
    let id = task["id"].as_str().unwrap().to_owned();

    let r = rest03(
        &server,
        Method::GET,
        &format!("/v1/tasks/{id}?historyLength=1"),
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["id"], id.as_str());

    // Errors: 404 unknown task, 409 not cancelable, the 0.3 error body.
    let r = rest03(&server, Method::GET, "/v1/tasks/nope", None).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["code"], -32001);
    let r = rest03(
        &server,
        Method::POST,
        &format!("/v1/tasks/{id}:cancel"),
        Some(json!({"name": format!("tasks/{id}")})),
    )
    .await;
    assert_eq!(r.status, 409, "{:?}", r.body);

    // A message answer.
    let r = rest03(
        &server,
        Method::POST,
        "/v1/message:send",
        Some(json!({"message": rest_message("tck-message-response")})),
    )
    .await;
    assert_eq!(r.json()["message"]["role"], "ROLE_AGENT", "{:?}", r.body);

    // Streaming: StreamResponse objects, the last a final status update.
    let r = rest03(
        &server,
        Method::POST,
        "/v1/message:stream",
        Some(json!({"message": rest_message("tck-stream-001")})),
    )
    .await;
    assert_eq!(r.status, 200);
    let events = sse_data(&r.body);
    assert!(events[0]["task"].is_object(), "{events:?}");
    assert!(events.iter().any(|e| e["artifactUpdate"].is_object()));
    let last = &events.last().unwrap()["statusUpdate"];
    assert_eq!(last["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(last["final"], true);

    // Push configs: create, get, list, delete.
    let name = format!("tasks/{id}/pushNotificationConfigs/c1");
    let r = rest03(
        &server,
        Method::POST,
        &format!("/v1/tasks/{id}/pushNotificationConfigs"),
        Some(json!({"parent": format!("tasks/{id}"), "configId": "c1",
                    "config": {"name": name, "pushNotificationConfig": {
                        "id": "c1", "url": "http://127.0.0.1:9/hook",
                        "authentication": {"schemes": ["Bearer"], "credentials": "x"}}}})),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.json()["name"], name.as_str());
    let r = rest03(
        &server,
        Method::GET,
        &format!("/v1/tasks/{id}/pushNotificationConfigs/c1"),
        None,
    )
    .await;
    assert_eq!(
        r.json()["pushNotificationConfig"]["authentication"]["schemes"],
        json!(["Bearer"])
    );
    let r = rest03(
        &server,
        Method::GET,
        &format!("/v1/tasks/{id}/pushNotificationConfigs"),
        None,
    )
    .await;
    assert_eq!(
        r.json()["configs"].as_array().map(Vec::len),
        Some(1),
        "{:?}",
        r.body
    );
    let r = rest03(
        &server,
        Method::DELETE,
        &format!("/v1/tasks/{id}/pushNotificationConfigs/c1"),
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    let r = rest03(
        &server,
        Method::GET,
        &format!("/v1/tasks/{id}/pushNotificationConfigs/c1"),
        None,
    )
    .await;
    assert_eq!(r.status, 404);

    // With A2A-Version: 1.0, /v1/... is the 1.0 route of the tenant "v1".
    let r = raw_send(
        raw_http()
            .get(format!("{}/v1/tasks/{id}", server.base_url()))
            .header("A2A-Version", "1.0"),
    )
    .await;
    assert_eq!(r.status, 404, "{:?}", r.body);
    assert!(r.json()["error"]["details"].is_array());
    // The extended card is not configured: 404 with -32007.
    let r = rest03(&server, Method::GET, "/v1/card", None).await;
    assert_eq!(r.status, 404, "{:?}", r.body);
    assert_eq!(r.json()["code"], -32007);
}

#[tokio::test]
async fn rest_non_blocking_resubscribe_and_cancel() {
    use reqwest::Method;
    let server = long_running_server().await;
    // A configuration without `blocking` is non-blocking (ProtoJSON leaves
    // out false).
    let r = rest03(
        &server,
        Method::POST,
        "/v1/message:send",
        Some(
            json!({"message": rest_message("test-resubscribe-message-id"),
                    "configuration": {"acceptedOutputModes": ["text/plain"]}}),
        ),
    )
    .await;
    let task = r.json()["task"].clone();
    assert_ne!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    let id = task["id"].as_str().unwrap().to_owned();
    let r = rest03(
        &server,
        Method::POST,
        &format!("/v1/tasks/{id}:cancel"),
        Some(json!({"name": format!("tasks/{id}")})),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.json()["status"]["state"], "TASK_STATE_CANCELLED");
    // Subscribing to the terminal task: refused (501, as 0.3 servers say
    // "unsupported").
    let r = rest03(
        &server,
        Method::GET,
        &format!("/v1/tasks/{id}:subscribe"),
        None,
    )
    .await;
    assert_eq!(r.status, 501, "{:?}", r.body);
}

/// A gRPC call of an unknown method of the 0.3 service, or of any unknown
/// service, gets a gRPC status (UNIMPLEMENTED), not an HTTP 404 with a JSON
/// body.
#[tokio::test]
async fn unknown_grpc_services_get_a_grpc_status() {
    let server = scripted_server().await;
    agentwire_client::install_crypto_provider();
    let http = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .expect("h2c client");
    for path in ["/a2a.v1.A2AService/NoSuchMethod", "/other.Service/Call"] {
        let r = raw_send(
            http.post(format!("{}{path}", server.base_url()))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(vec![0u8, 0, 0, 0, 0]),
        )
        .await;
        assert_eq!(r.status, 200, "{path}");
        let header = |n: &str| r.headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or("");
        assert_eq!(header("grpc-status"), "12", "{path}: {:?}", r.headers);
        assert!(
            header("content-type").starts_with("application/grpc"),
            "{path}"
        );
    }
}

// ------------------------------------------------- the 0.3 gRPC service

use agentwire_types::v0_3::grpc::proto as g03;
use g03::a2a_service_client::A2aServiceClient;

async fn grpc03(server: &ServerHandle) -> A2aServiceClient<tonic::transport::Channel> {
    A2aServiceClient::connect(server.base_url().to_owned())
        .await
        .expect("a gRPC connection")
}

fn grpc_message(prefix: &str) -> g03::Message {
    g03::Message {
        message_id: format!("{prefix}-{}", new_id()),
        role: g03::Role::User as i32,
        content: vec![g03::Part {
            part: Some(g03::part::Part::Text("hello".into())),
            metadata: None,
        }],
        ..Default::default()
    }
}

fn send_request(prefix: &str) -> g03::SendMessageRequest {
    g03::SendMessageRequest {
        request: Some(grpc_message(prefix)),
        configuration: None,
        metadata: None,
    }
}

/// The 0.3 gRPC service beside the 1.0 one: send (task and message), get,
/// cancel, stream, push config CRUD, the card, and the errors as statuses.
#[tokio::test]
async fn grpc_service_in_the_0_3_form() {
    use g03::send_message_response::Payload;
    use g03::stream_response::Payload as Event;
    let server = scripted_server().await;
    let mut c = grpc03(&server).await;

    let r = c
        .send_message(send_request("tck-artifact-text"))
        .await
        .expect("send")
        .into_inner();
    let Some(Payload::Task(task)) = r.payload else {
        panic!("not a task: {r:?}");
    };
    assert_eq!(
        task.status.as_ref().unwrap().state,
        g03::TaskState::Completed as i32
    );
    assert_eq!(
        task.artifacts[0].parts[0].part,
        Some(g03::part::Part::Text("Generated text content".into()))
    );
    let id = task.id.clone();

    let r = c
        .send_message(send_request("tck-message-response"))
        .await
        .expect("send")
        .into_inner();
    assert!(matches!(r.payload, Some(Payload::Msg(_))), "{r:?}");

    let got = c
        .get_task(g03::GetTaskRequest {
            name: format!("tasks/{id}"),
            history_length: 0,
        })
        .await
        .expect("get")
        .into_inner();
    assert_eq!(got.id, id);

    let e = c
        .get_task(g03::GetTaskRequest {
            name: "tasks/no-such-task".into(),
            history_length: 0,
        })
        .await
        .expect_err("not found");
    assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");
    let e = c
        .cancel_task(g03::CancelTaskRequest {
            name: format!("tasks/{id}"),
        })
        .await
        .expect_err("terminal");
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
    // 0.3 carries UnsupportedOperationError as UNIMPLEMENTED (1.0 as
    // FAILED_PRECONDITION): a subscription to a finished task.
    let e = c
        .task_subscription(g03::TaskSubscriptionRequest {
            name: format!("tasks/{id}"),
        })
        .await
        .expect_err("terminal");
    assert_eq!(e.code(), tonic::Code::Unimplemented, "{e:?}");
    let e = c
        .get_task(g03::GetTaskRequest {
            name: "bad-name".into(),
            history_length: 0,
        })
        .await
        .expect_err("bad name");
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");

    // A stream ends with a final status update.
    let mut events = c
        .send_streaming_message(send_request("tck-stream-001"))
        .await
        .expect("stream")
        .into_inner();
    let mut last_final = false;
    let mut n = 0;
    while let Some(ev) = tokio::time::timeout(WAIT, events.message())
        .await
        .expect("an event in time")
        .expect("no error")
    {
        n += 1;
        if let Some(Event::StatusUpdate(u)) = ev.payload {
            last_final = u.r#final;
        }
    }
    assert!(n > 0 && last_final, "{n} events, last final: {last_final}");

    // Push config CRUD (on an agent with push notifications).
    let server =
        start_server(A2aServer::new(echo_card(), Echo).push(PushConfig::new().allow_loopback()))
            .await;
    let mut c = grpc03(&server).await;
    let r = c
        .send_message(send_request("p"))
        .await
        .expect("send")
        .into_inner();
    let Some(Payload::Task(task)) = r.payload else {
        panic!("not a task: {r:?}");
    };
    let id = task.id;
    let created = c
        .create_task_push_notification_config(g03::CreateTaskPushNotificationConfigRequest {
            parent: format!("tasks/{id}"),
            config_id: "cfg-1".into(),
            config: Some(g03::TaskPushNotificationConfig {
                name: String::new(),
                push_notification_config: Some(g03::PushNotificationConfig {
                    id: String::new(),
                    url: "https://example.com/hook".into(),
                    token: "tok".into(),
                    authentication: None,
                }),
            }),
        })
        .await
        .expect("create")
        .into_inner();
    assert_eq!(
        created.name,
        format!("tasks/{id}/pushNotificationConfigs/cfg-1")
    );
    let got = c
        .get_task_push_notification_config(g03::GetTaskPushNotificationConfigRequest {
            name: created.name.clone(),
        })
        .await
        .expect("get config")
        .into_inner();
    assert_eq!(got.push_notification_config.unwrap().token, "tok");
    let all = c
        .list_task_push_notification_config(g03::ListTaskPushNotificationConfigRequest {
            parent: format!("tasks/{id}"),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner();
    assert_eq!(all.configs.len(), 1);
    c.delete_task_push_notification_config(g03::DeleteTaskPushNotificationConfigRequest {
        name: created.name.clone(),
    })
    .await
    .expect("delete");
    let e = c
        .get_task_push_notification_config(g03::GetTaskPushNotificationConfigRequest {
            name: created.name,
        })
        .await
        .expect_err("deleted");
    assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");

    // The card, with the 0.3 fields.
    let card = c
        .get_agent_card(g03::GetAgentCardRequest {})
        .await
        .expect("card")
        .into_inner();
    assert_eq!(card.protocol_version, "0.3.0");
    assert!(!card.url.is_empty());
    assert!(
        card.additional_interfaces
            .iter()
            .any(|i| i.transport == "GRPC"),
        "{card:?}"
    );

    // Another version than 0.3: refused with a status.
    let mut req = tonic::Request::new(send_request("tck-complete-task"));
    req.metadata_mut()
        .insert("a2a-version", "1.0".parse().unwrap());
    let e = c
        .send_message(req)
        .await
        .expect_err("1.0 on the 0.3 service");
    assert_ne!(e.code(), tonic::Code::Ok);
    assert!(e.message().to_lowercase().contains("version"), "{e:?}");
}

/// A signed card as the 0.3 gRPC `GetAgentCard` answers it verifies: read
/// the way a 0.3 client reads it (its protobuf form as JSON), one of its
/// signatures covers it, in every signature form. (Before, it carried only
/// the 1.0 card's signatures, over members the 0.3 protobuf card cannot
/// hold: none could verify.)
#[tokio::test]
async fn grpc_0_3_signed_card_verifies() {
    use agentwire_types::jws::{CardSignatureForm, CardSignatureStatus, SigningKey, verify_card};
    for form in [
        CardSignatureForm::Rfc8785,
        CardSignatureForm::Sdk,
        CardSignatureForm::Both,
    ] {
        let key = SigningKey::from_pkcs8_der(&SigningKey::generate_p256_pkcs8().expect("a key"))
            .expect("a key");
        let signing = agentwire_server::CardSigning::default().key(key).form(form);
        let keys = signing.key_set();
        let server = start_server(A2aServer::new(echo_card(), Echo).sign_card(signing)).await;
        let mut c = grpc03(&server).await;
        let card = c
            .get_agent_card(g03::GetAgentCardRequest {})
            .await
            .expect("card")
            .into_inner();
        assert!(!card.signatures.is_empty(), "{form:?}: {card:?}");
        let doc = serde_json::to_value(&card).expect("the card as JSON");
        let status = verify_card(&doc, &keys);
        assert!(
            matches!(status, CardSignatureStatus::Verified { .. }),
            "{form:?}: {status:?}"
        );
        // A changed card does not verify.
        let mut changed = doc.clone();
        changed["name"] = json!("Someone else");
        assert!(
            !matches!(
                verify_card(&changed, &keys),
                CardSignatureStatus::Verified { .. }
            ),
            "{form:?}"
        );
    }
}

/// With 0.3 turned off, the 0.3 gRPC service answers with a status.
#[tokio::test]
async fn grpc_0_3_turned_off() {
    let config = HandlerConfig {
        serve_v03: false,
        ..Default::default()
    };
    let server =
        start_server(A2aServer::new(scripted_card(), Scripted::default()).config(config)).await;
    let mut c = grpc03(&server).await;
    let e = c
        .send_message(send_request("tck-complete-task"))
        .await
        .expect_err("0.3 is off");
    assert!(e.message().to_lowercase().contains("version"), "{e:?}");
}

// ------------------------------- push notifications of 0.3 clients

/// A webhook on loopback that hands each POSTed body (as JSON) to the
/// test, with the last path segment (which registration it was for).
async fn webhook() -> (
    String,
    tokio::sync::mpsc::UnboundedReceiver<(String, Value)>,
) {
    use axum::extract::{Path, State};
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<(String, Value)>();
    let app = axum::Router::new()
        .route(
            "/hook/{name}",
            axum::routing::post(
                |State(tx): State<tokio::sync::mpsc::UnboundedSender<(String, Value)>>,
                 Path(name): Path<String>,
                 body: axum::body::Bytes| async move {
                    let v = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let _ = tx.send((name, v));
                    "ok"
                },
            ),
        )
        .with_state(tx);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, rx)
}

/// The notifications of `name` until (and with) the one showing the task
/// completed, as `completed` says of a body.
async fn notifications_until(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<(String, Value)>,
    seen: &mut Vec<(String, Value)>,
    name: &str,
    completed: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let mine: Vec<Value> = seen
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .collect();
        if mine.iter().any(&completed) {
            return mine;
        }
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(n)) => seen.push(n),
            _ => panic!("{name}: no completed notification in time; got {seen:?}"),
        }
    }
}

/// Every 0.3 notification is the whole task in its 0.3 JSON form; the
/// last one shows it completed, with the history of both turns.
#[track_caller]
fn is_task03(bodies: &[Value], id: &str) {
    for b in bodies {
        assert_eq!(b["kind"], "task", "a 0.3 push body is a task: {b}");
        assert_eq!(b["id"], id, "{b}");
        assert!(b["contextId"].is_string(), "{b}");
        assert!(
            b.get("statusUpdate").is_none() && b.get("task").is_none(),
            "{b}"
        );
    }
    let last = bodies.last().unwrap();
    assert_eq!(last["status"]["state"], "completed", "{last}");
    let history = last["history"].as_array().expect("history");
    assert!(history.iter().all(|m| m["kind"] == "message"), "{last}");
    assert!(
        history
            .iter()
            .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
            .all(|p| p["kind"] == "text"),
        "{last}"
    );
}

fn completed03(b: &Value) -> bool {
    b["status"]["state"] == "completed"
}

/// A 0.3 client that registers a webhook, on each binding, gets the 0.3
/// notification (the task, `kind: "task"`); a 1.0 registration on the
/// same task still gets 1.0's `StreamResponse`.
#[tokio::test]
async fn push_notifications_of_0_3_clients_take_the_0_3_form() {
    use reqwest::Method;
    let server = start_server(
        A2aServer::new(scripted_card(), Scripted::default())
            .push(PushConfig::new().allow_loopback()),
    )
    .await;
    let (hook, mut rx) = webhook().await;
    let mut seen = Vec::new();

    // JSON-RPC 0.3, with a 1.0 registration beside it.
    let v = call03(
        &server,
        "message/send",
        json!({"message": message03("tck-input-required")}),
    )
    .await;
    let id = result(&v)["id"].as_str().unwrap().to_owned();
    assert_eq!(result(&v)["status"]["state"], "input-required", "{v}");
    let v = call03(
        &server,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": id, "pushNotificationConfig": {"id": "rpc03", "url": format!("{hook}/rpc03"), "token": "t"}}),
    )
    .await;
    result(&v);
    let r = rpc_call(
        &server,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "id": "v1", "url": format!("{hook}/v1")}),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(r.json().get("error").is_none(), "{:?}", r.json());
    let mut answer = message03("tck-complete-task");
    answer["taskId"] = json!(id);
    let v = call03(&server, "message/send", json!({"message": answer})).await;
    assert_eq!(result(&v)["status"]["state"], "completed", "{v}");
    let bodies = notifications_until(&mut rx, &mut seen, "rpc03", completed03).await;
    is_task03(&bodies, &id);
    let v1 = notifications_until(&mut rx, &mut seen, "v1", |b| {
        b["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    })
    .await;
    assert!(
        v1.iter()
            .all(|b| b.get("kind").is_none() && b.as_object().is_some_and(|o| o.len() == 1)),
        "1.0 bodies are StreamResponses: {v1:?}"
    );

    // HTTP+JSON 0.3.
    let r = rest03(
        &server,
        Method::POST,
        "/v1/message:send",
        Some(json!({"message": rest_message("tck-input-required")})),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let id = r.json()["task"]["id"].as_str().unwrap().to_owned();
    let r = rest03(
        &server,
        Method::POST,
        &format!("/v1/tasks/{id}/pushNotificationConfigs"),
        Some(json!({"parent": format!("tasks/{id}"), "configId": "rest03",
                    "config": {"name": format!("tasks/{id}/pushNotificationConfigs/rest03"),
                               "pushNotificationConfig": {"id": "rest03", "url": format!("{hook}/rest03")}}})),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let mut answer = rest_message("tck-complete-task");
    answer["taskId"] = json!(id);
    let r = rest03(
        &server,
        Method::POST,
        "/v1/message:send",
        Some(json!({"message": answer})),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let bodies = notifications_until(&mut rx, &mut seen, "rest03", completed03).await;
    is_task03(&bodies, &id);

    // gRPC 0.3.
    let mut c = grpc03(&server).await;
    let sent = c
        .send_message(send_request("tck-input-required"))
        .await
        .expect("send")
        .into_inner();
    let Some(g03::send_message_response::Payload::Task(task)) = sent.payload else {
        panic!("not a task: {sent:?}");
    };
    let id = task.id;
    c.create_task_push_notification_config(g03::CreateTaskPushNotificationConfigRequest {
        parent: format!("tasks/{id}"),
        config_id: "grpc03".into(),
        config: Some(g03::TaskPushNotificationConfig {
            name: String::new(),
            push_notification_config: Some(g03::PushNotificationConfig {
                id: "grpc03".into(),
                url: format!("{hook}/grpc03"),
                token: String::new(),
                authentication: None,
            }),
        }),
    })
    .await
    .expect("create");
    let mut answer = send_request("tck-complete-task");
    if let Some(m) = answer.request.as_mut() {
        m.task_id.clone_from(&id);
    }
    c.send_message(answer).await.expect("answer");
    let bodies = notifications_until(&mut rx, &mut seen, "grpc03", completed03).await;
    is_task03(&bodies, &id);
}
