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

/// `examples/echo` binds its port before it prints its address, and a port
/// in use gets a sentence and a failure status, not the Debug form of the
/// I/O error (issue 42). Runs the example's binary, which `cargo test`
/// builds next to the tests (`target/*/examples/echo`).
#[test]
fn the_echo_example_binds_before_it_prints_its_address() {
    let exe = std::env::current_exe().expect("the test's path");
    let bin = exe
        .parent()
        .and_then(std::path::Path::parent)
        .map(|d| d.join("examples").join("echo"))
        .expect("the target directory");
    assert!(
        bin.is_file(),
        "{} is missing: `cargo test` builds the examples (or `cargo build -p agentwire-server --example echo`)",
        bin.display()
    );
    // A port that is taken.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = busy.local_addr().expect("its address").port().to_string();
    let mut child = std::process::Command::new(&bin)
        .arg(&port)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the echo example");
    let deadline = std::time::Instant::now() + LIMIT;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the echo example did not stop on a port in use");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().expect("its output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!status.success(), "{stdout}{stderr}");
    assert!(
        !stdout.contains("Echo agent on"),
        "the address was printed before the port was bound: {stdout}"
    );
    assert!(
        stderr.contains(&format!("cannot listen on 127.0.0.1:{port}"))
            && stderr.contains("another port"),
        "{stderr}"
    );
    assert!(!stderr.contains("Os {"), "{stderr}");
    drop(busy);
}
