//! The server examples that need no client library do what their doc
//! comments say (the others are run against the client examples in
//! `agentwire-client`'s `tests/examples.rs`). Each example file is compiled
//! into this test as a module and served on an ephemeral loopback port.

use std::time::Duration;

use serde_json::{Value, json};

/// A plain HTTP client. reqwest is built without a TLS crypto provider of
/// its own (the project uses ring's): one is installed first.
fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

#[allow(dead_code)]
#[path = "../examples/axum_app.rs"]
mod axum_app;

#[allow(dead_code)]
#[path = "../examples/push_notifications.rs"]
mod push_notifications;

/// Bound on each test.
const LIMIT: Duration = Duration::from_secs(30);

async fn rpc(url: &str, method: &str, params: Value) -> Value {
    http()
        .post(url)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("a JSON-RPC response")
}

#[tokio::test]
async fn the_axum_app_serves_its_route_and_the_agent() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = axum_app::app(addr);
    tokio::spawn(async move { axum::serve(listener, app).await });
    let base = format!("http://{addr}");
    let run = async {
        let health = http()
            .get(format!("{base}/health"))
            .send()
            .await
            .expect("health")
            .text()
            .await
            .expect("body");
        assert_eq!(health, "ok");
        let card: Value = http()
            .get(format!("{base}/.well-known/agent-card.json"))
            .send()
            .await
            .expect("card")
            .json()
            .await
            .expect("card JSON");
        let urls: Vec<&str> = card["supportedInterfaces"]
            .as_array()
            .expect("interfaces")
            .iter()
            .filter_map(|i| i["url"].as_str())
            .collect();
        assert_eq!(urls, [format!("{base}/"), base.clone()]);
        let answer = rpc(
            &format!("{base}/"),
            "SendMessage",
            json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
        )
        .await;
        let task = &answer["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{answer}");
        assert_eq!(task["artifacts"][0]["parts"][0]["text"], "hi");
    };
    tokio::time::timeout(LIMIT, run).await.expect("in time");
}

#[tokio::test]
async fn the_push_example_notifies_a_loopback_webhook() {
    // A webhook that hands over every notification it receives.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let hook = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: axum::Json<Value>| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(body.0);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let hook_url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, hook).await });

    let agent = push_notifications::server()
        .bind("127.0.0.1:0")
        .await
        .expect("bind")
        .spawn();
    let card = agent.handler().agent_card();
    assert_eq!(
        card.capabilities
            .as_ref()
            .and_then(|c| c.push_notifications),
        Some(true)
    );
    let run = async {
        let answer = rpc(
            &format!("{}/", agent.base_url()),
            "SendMessage",
            json!({
                "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
                "configuration": {
                    "returnImmediately": true,
                    "taskPushNotificationConfig": {"url": hook_url, "token": "t"}
                }
            }),
        )
        .await;
        let id = answer["result"]["task"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("a task: {answer}"))
            .to_owned();
        // Notifications until the final one: the task, its progress, the
        // artifact, completed.
        let mut seen = Vec::new();
        loop {
            let n = rx.recv().await.expect("the webhook is called");
            let state = n["statusUpdate"]["status"]["state"].clone();
            seen.push(n);
            if state == "TASK_STATE_COMPLETED" {
                break;
            }
        }
        assert_eq!(seen[0]["task"]["id"], id.as_str());
        let progress = seen
            .iter()
            .filter(|n| {
                n["statusUpdate"]["status"]["message"]["parts"][0]["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("step "))
            })
            .count();
        assert_eq!(progress, 3);
        assert!(
            seen.iter()
                .any(|n| n["artifactUpdate"]["artifact"]["parts"][0]["text"] == "done: hi")
        );
    };
    tokio::time::timeout(LIMIT, run).await.expect("in time");
}
