//! In-task authorization grants nothing by itself (A2A spec section 7.6,
//! and the rule of the specification's main branch since v1.0.1): a task
//! waiting in `TASK_STATE_AUTH_REQUIRED` stays its caller's. Another
//! authenticated caller can neither read it, follow it, nor answer it
//! (the credential message), on any binding: the task is not found for it,
//! as any task of another caller is. Its own caller answers it.

#[allow(unused_macros)]
mod common;

use std::sync::Arc;

use agentwire_server::auth::{ApiKeyLocation, ApiKeys, AuthSchemes};
use agentwire_server::{A2aResult, A2aServer, AgentExecutor, RequestContext, TaskUpdater};
use agentwire_types::{
    ErrorKind, GetTaskRequest, Message, SendMessageRequest, SubscribeToTaskRequest, TaskState,
    new_id,
};
use common::*;
use serde_json::{Value, json};

const ALICE: &str = "alice-key-0123456789";
const BOB: &str = "bob-key-01234567890";

/// Asks for a credential on the first turn; completes when it comes.
struct NeedsAuth;

impl AgentExecutor for NeedsAuth {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        if ctx.task.is_none() {
            let request = agentwire_server::AuthRequest::bearer(
                "https://api.example.com",
                "a token for the example API",
            );
            return task.request_auth(&request).await;
        }
        task.complete_with("authorized").await
    }
}

async fn server() -> agentwire_server::ServerHandle {
    let keys = ApiKeys::new(ApiKeyLocation::default_header())
        .parse(&format!("alice:{ALICE}\nbob:{BOB}"))
        .expect("keys");
    start_server(
        A2aServer::new(agents::echo_card(), NeedsAuth)
            .authenticator(Arc::new(AuthSchemes::new().api_keys(keys).throttle(None))),
    )
    .await
}

fn send(task_id: Option<&str>) -> SendMessageRequest {
    let mut m = Message::user_text("my-token").with_message_id(new_id());
    if let Some(id) = task_id {
        m.task_id = id.to_owned();
    }
    SendMessageRequest {
        message: Some(m),
        ..Default::default()
    }
}

async fn rpc(
    server: &agentwire_server::ServerHandle,
    key: &str,
    method: &str,
    params: Value,
) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    raw_send(
        raw_http()
            .post(server.base_url())
            .header("content-type", "application/json")
            .header("A2A-Version", "1.0")
            .header("X-API-Key", key)
            .body(body.to_string()),
    )
    .await
    .json()
}

fn grpc_as<T>(message: T, key: &'static str) -> tonic::Request<T> {
    let mut req = grpc_v1(message);
    req.metadata_mut().insert(
        "x-api-key",
        tonic::metadata::MetadataValue::from_static(key),
    );
    req
}

#[tokio::test]
async fn an_auth_required_task_stays_its_callers() {
    let server = server().await;
    let started = rpc(
        &server,
        ALICE,
        "SendMessage",
        serde_json::to_value(send(None)).unwrap(),
    )
    .await;
    let task = &started["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_AUTH_REQUIRED",
        "{started}"
    );
    let id = task["id"].as_str().expect("a task id").to_owned();
    let not_found = ErrorKind::TaskNotFound.jsonrpc_code();

    // JSON-RPC: Bob cannot read, answer or follow it.
    for (method, params) in [
        ("GetTask", json!({"id": id})),
        (
            "SendMessage",
            serde_json::to_value(send(Some(&id))).unwrap(),
        ),
        ("CancelTask", json!({"id": id})),
    ] {
        let v = rpc(&server, BOB, method, params).await;
        assert_eq!(
            v["error"]["code"], not_found,
            "[JSON-RPC] {method} by Bob: {v}"
        );
    }
    // HTTP+JSON.
    let as_bob =
        |rb: reqwest::RequestBuilder| rb.header("A2A-Version", "1.0").header("X-API-Key", BOB);
    let r = raw_send(as_bob(
        raw_http().get(format!("{}/tasks/{id}", server.base_url())),
    ))
    .await;
    assert_rest_error(&r, 404, ErrorKind::TaskNotFound, "[REST] GetTask by Bob");
    let r = raw_send(as_bob(
        raw_http()
            .post(format!("{}/message:send", server.base_url()))
            .header("content-type", "application/json")
            .body(serde_json::to_string(&send(Some(&id))).unwrap()),
    ))
    .await;
    assert_rest_error(
        &r,
        404,
        ErrorKind::TaskNotFound,
        "[REST] SendMessage by Bob",
    );
    let r = raw_send(as_bob(
        raw_http().post(format!("{}/tasks/{id}:subscribe", server.base_url())),
    ))
    .await;
    assert_rest_error(&r, 404, ErrorKind::TaskNotFound, "[REST] Subscribe by Bob");
    // gRPC.
    let mut c = grpc_raw(&server).await;
    let get = GetTaskRequest {
        id: id.clone(),
        ..Default::default()
    };
    let status = c
        .get_task(grpc_as(get, BOB))
        .await
        .expect_err("Bob's GetTask");
    assert_grpc_error(
        &status,
        tonic::Code::NotFound,
        ErrorKind::TaskNotFound,
        "[gRPC] GetTask",
    );
    let status = c
        .send_message(grpc_as(send(Some(&id)), BOB))
        .await
        .expect_err("Bob's answer");
    assert_grpc_error(
        &status,
        tonic::Code::NotFound,
        ErrorKind::TaskNotFound,
        "[gRPC] SendMessage",
    );
    let sub = SubscribeToTaskRequest {
        id: id.clone(),
        ..Default::default()
    };
    let Err(status) = c.subscribe_to_task(grpc_as(sub, BOB)).await else {
        panic!("Bob's subscription was accepted");
    };
    assert_grpc_error(
        &status,
        tonic::Code::NotFound,
        ErrorKind::TaskNotFound,
        "[gRPC] Subscribe",
    );

    // Still waiting for Alice's answer, which completes it.
    let v = rpc(&server, ALICE, "GetTask", json!({"id": id})).await;
    assert_eq!(
        v["result"]["status"]["state"], "TASK_STATE_AUTH_REQUIRED",
        "{v}"
    );
    let v = rpc(
        &server,
        ALICE,
        "SendMessage",
        serde_json::to_value(send(Some(&id))).unwrap(),
    )
    .await;
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{v}"
    );
    let _ = TaskState::Completed;
}
