//! A scripted JSON-RPC agent for what our own server cannot show:
//! streams that break (the `a2a` command reconciles with GetTask /
//! resubscribes instead of losing the final state), a stream that ends with
//! an error, and push-notification configs that are stored.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use common::Env;
use serde_json::{Value, json};

#[derive(Default)]
struct Script {
    /// GetTask calls so far; the task completes at the second one.
    gets: AtomicUsize,
    subscribes: AtomicUsize,
}

fn task(state: &str, with_artifact: bool) -> Value {
    let mut t = json!({
        "id": "t-1", "contextId": "c-1",
        "status": {"state": state, "timestamp": "2026-01-01T00:00:00Z"},
    });
    if with_artifact {
        t["artifacts"] =
            json!([{"artifactId": "a-1", "name": "result", "parts": [{"text": "survived"}]}]);
    }
    t
}

/// An SSE body sending one event, then failing (the connection is cut).
fn broken_stream(id: &Value, first: Value) -> Response {
    let event = json!({"jsonrpc": "2.0", "id": id, "result": first});
    use futures::StreamExt;
    let first = Bytes::from(format!("data: {event}\n\n"));
    // The event goes out, then the connection is cut.
    let chunks = futures::stream::once(async move { Ok::<_, std::io::Error>(first) }).chain(
        futures::stream::once(async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Err(std::io::Error::other("cut"))
        }),
    );
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(chunks))
        .expect("response")
}

async fn rpc(State(s): State<Arc<Script>>, body: String) -> Response {
    let Ok(req) = serde_json::from_str::<Value>(&body) else {
        return (axum::http::StatusCode::BAD_REQUEST, "bad json").into_response();
    };
    let id = req["id"].clone();
    match req["method"].as_str().unwrap_or_default() {
        "SendStreamingMessage" => {
            broken_stream(&id, json!({"task": task("TASK_STATE_WORKING", false)}))
        }
        "SubscribeToTask" if req["params"]["id"] == "t-err" => {
            let task = json!({"jsonrpc": "2.0", "id": id, "result": {"task": task("TASK_STATE_WORKING", false)}});
            let err = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": "the agent crashed"}});
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from(format!("data: {task}\n\ndata: {err}\n\n")))
                .expect("response")
        }
        "SubscribeToTask" => {
            s.subscribes.fetch_add(1, Ordering::SeqCst);
            broken_stream(&id, json!({"task": task("TASK_STATE_WORKING", false)}))
        }
        "CreateTaskPushNotificationConfig" => {
            let mut c = req["params"].clone();
            c["id"] = json!("cfg-1");
            axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": c})).into_response()
        }
        "GetTaskPushNotificationConfig" => axum::Json(json!({"jsonrpc": "2.0", "id": id,
            "result": {"id": req["params"]["id"], "taskId": req["params"]["taskId"], "url": "https://hooks.example.com/a2a"}}))
        .into_response(),
        "ListTaskPushNotificationConfigs" => axum::Json(json!({"jsonrpc": "2.0", "id": id,
            "result": {"configs": [{"id": "cfg-1", "taskId": req["params"]["taskId"], "url": "https://hooks.example.com/a2a"}]}}))
        .into_response(),
        "DeleteTaskPushNotificationConfig" => {
            axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": {}})).into_response()
        }
        "GetTask" => {
            let n = s.gets.fetch_add(1, Ordering::SeqCst);
            let t = if n >= 1 {
                task("TASK_STATE_COMPLETED", true)
            } else {
                task("TASK_STATE_WORKING", false)
            };
            axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": t})).into_response()
        }
        _ => axum::Json(json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32601, "message": "not scripted"}}))
        .into_response(),
    }
}

async fn flaky_agent() -> (String, Arc<Script>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let card = json!({
        "name": "Flaky", "description": "streams that break", "version": "1",
        "supportedInterfaces": [{"url": format!("http://{addr}/"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": true, "pushNotifications": true},
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"], "skills": []
    });
    let script = Arc::new(Script::default());
    let app = axum::Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(move || async move { axum::Json(card) }),
        )
        .route("/", post(rpc))
        .with_state(script.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (addr.to_string(), script)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocking_send_survives_a_broken_stream() {
    let (addr, script) = flaky_agent().await;
    let env = Env::new();
    let out = env.run(&[
        "send",
        "-a",
        &addr,
        "--poll-interval",
        "100ms",
        "-o",
        "json",
        "hi",
    ]);
    out.expect(0);
    let v = out.json();
    assert_eq!(v["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(v["task"]["artifacts"][0]["parts"][0]["text"], "survived");
    assert!(script.gets.load(Ordering::SeqCst) >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_send_ends_with_the_reconciled_task() {
    let (addr, script) = flaky_agent().await;
    let env = Env::new();
    let out = env.run(&["send", "-a", &addr, "--stream", "-o", "json", "hi"]);
    out.expect(0);
    let lines = out.jsonl();
    assert_eq!(lines[0]["task"]["status"]["state"], "TASK_STATE_WORKING");
    let last = lines.last().expect("lines");
    assert_eq!(
        last["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{}",
        out.stdout
    );
    // It resubscribed while the task was still working.
    assert!(script.subscribes.load(Ordering::SeqCst) >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_resumes_after_a_disconnect() {
    let (addr, script) = flaky_agent().await;
    let env = Env::new();
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::task::spawn_blocking(move || {
            env.run(&["task", "subscribe", "-a", &addr, "t-1", "--stream"])
        }),
    )
    .await
    .expect("bounded")
    .expect("joined");
    out.expect(0);
    assert!(out.stdout.contains("State: COMPLETED"), "{}", out.stdout);
    assert!(out.stdout.contains("Text:\nsurvived"), "{}", out.stdout);
    assert!(script.subscribes.load(Ordering::SeqCst) >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_ending_in_an_error_ends_with_an_error_line() {
    let (addr, _) = flaky_agent().await;
    let env = Env::new();
    let out = env.run(&[
        "task",
        "subscribe",
        "-a",
        &addr,
        "t-err",
        "--stream",
        "-o",
        "json",
    ]);
    out.expect(1);
    let lines = out.jsonl();
    assert_eq!(lines.len(), 2, "{}", out.stdout);
    assert!(lines[0].get("task").is_some());
    assert_eq!(lines[1]["error"]["code"], "InternalError");
    assert_eq!(lines[1]["error"]["a2aCode"], -32603);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_config_crud_against_an_agent_that_stores_them() {
    let (addr, _) = flaky_agent().await;
    let env = Env::new();
    let a = |args: &[&str]| {
        let mut v = args.to_vec();
        v.extend(["-a", &addr, "-o", "json"]);
        env.run(&v)
    };
    let out = a(&[
        "task",
        "push-config",
        "create",
        "t-1",
        "--url",
        "https://hooks.example.com/a2a",
        "--token",
        "tok",
    ]);
    out.expect(0);
    let c = out.json();
    assert_eq!(c["id"], "cfg-1");
    assert_eq!(c["taskId"], "t-1");
    assert_eq!(c["token"], "tok");
    let out = a(&["task", "push-config", "get", "t-1", "cfg-1"]);
    out.expect(0);
    assert_eq!(out.json()["url"], "https://hooks.example.com/a2a");
    let out = a(&["task", "push-config", "list", "t-1"]);
    out.expect(0);
    assert_eq!(out.json()["configs"][0]["id"], "cfg-1");
    let out = a(&["task", "push-config", "delete", "t-1", "cfg-1"]);
    out.expect(0);
    assert_eq!(out.json(), json!({}));
    // Text form.
    let out = env.run(&["task", "push-config", "list", "t-1", "-a", &addr]);
    out.expect(0);
    common::assert_text_floor(&out.stdout);
    assert!(out.stdout.contains("Config ID: cfg-1"));
}
