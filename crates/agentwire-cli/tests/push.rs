//! Push notifications from the command line: `a2a send --push-url ...`
//! with `a2a webhook` receiving, verifying (token and signature) and
//! printing the notifications (CLI SPEC 9.2, A2ACLI_PUSH_002), against an
//! in-process agent on loopback.

mod common;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use agentwire_agents::echo::{self, EchoAgent};
use agentwire_server::{A2aServer, PushConfig};
use common::Env;

/// A port that was free a moment ago.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

fn wait_listening(port: u16) {
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the webhook never listened on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The echo agent, pushing to loopback webhooks.
async fn push_echo() -> agentwire_server::ServerHandle {
    A2aServer::new(echo::card(), EchoAgent)
        .push(PushConfig::new().allow_loopback())
        .bind("127.0.0.1:0")
        .await
        .expect("bind")
        .spawn()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_with_push_url_and_webhook_prints_verified_notifications() {
    let server = push_echo().await;
    let base = server.base_url();
    let port = free_port();
    let env = Env::new();

    let mut webhook = env.cmd();
    webhook.args([
        "webhook",
        "--port",
        &port.to_string(),
        "--token",
        "cli-secret",
        "-a",
        &base,
        "--until-final",
        "--timeout",
        "30s",
        "-o",
        "json",
    ]);
    let receiving = std::thread::spawn(move || webhook.output().expect("run a2a webhook"));
    tokio::task::spawn_blocking(move || wait_listening(port))
        .await
        .unwrap();

    let url = format!("http://127.0.0.1:{port}/");
    let sent = env.run(&[
        "send",
        "-a",
        &base,
        "--push-url",
        &url,
        "--push-token",
        "cli-secret",
        "-o",
        "json",
        "hello push",
    ]);
    sent.expect(0);
    let task_id = sent.json()["task"]["id"]
        .as_str()
        .expect("a task id")
        .to_owned();

    let o = tokio::task::spawn_blocking(move || receiving.join().expect("webhook thread"))
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains("verifying: token, signature"),
        "stderr: {stderr}"
    );
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    // The task at creation, working, the echo artifact, completed: the
    // protocol's StreamResponse objects, one per line.
    assert!(events.len() >= 3, "{stdout}");
    assert_eq!(events[0]["task"]["id"], task_id.as_str());
    let last = events.last().unwrap();
    assert_eq!(last["statusUpdate"]["taskId"], task_id.as_str());
    assert_eq!(
        last["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let text: String = events
        .iter()
        .filter_map(|e| e["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(text, "hello push", "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_url_needs_an_agent_declaring_push() {
    let server = A2aServer::new(echo::card(), EchoAgent)
        .bind("127.0.0.1:0")
        .await
        .expect("bind")
        .spawn();
    let env = Env::new();
    let out = env.run(&[
        "send",
        "-a",
        &server.base_url(),
        "--push-url",
        "http://127.0.0.1:9/",
        "-o",
        "json",
        "hi",
    ]);
    out.expect(1);
    assert_eq!(
        out.json()["error"]["code"],
        "PushNotificationNotSupportedError"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_times_out_with_exit_5() {
    let env = Env::new();
    let out = env.run(&[
        "webhook",
        "--token",
        "t",
        "--count",
        "1",
        "--timeout",
        "300ms",
    ]);
    out.expect(5);
    assert!(
        out.stderr.contains("webhook URL: http://127.0.0.1:"),
        "{}",
        out.stderr
    );
}

/// `a2a webhook -a AGENT` listens before it fetches the agent's card (to
/// find its JWKS): `a2a webhook ... &` followed at once by `a2a send
/// --push-url ...` must not see its first notifications refused. The agent
/// here never answers, so the webhook listens while the card is still on
/// its way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_listens_before_fetching_the_agent_card() {
    // Connections to it wait in its backlog: nobody accepts or answers.
    let silent_agent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let agent = format!(
        "http://{}",
        silent_agent.local_addr().expect("the agent's address")
    );
    let port = free_port();
    let env = Env::new();
    let mut webhook = env.cmd();
    webhook.args([
        "webhook",
        "--port",
        &port.to_string(),
        "--token",
        "cli-secret",
        "-a",
        &agent,
        "--until-final",
        "--timeout",
        "20s",
    ]);
    let receiving = std::thread::spawn(move || webhook.output().expect("run a2a webhook"));
    tokio::task::spawn_blocking(move || wait_listening(port))
        .await
        .expect("waiting for the webhook");
    drop(silent_agent);
    // Without its card the webhook cannot verify anything: it gives up.
    let o = tokio::task::spawn_blocking(move || receiving.join().expect("webhook thread"))
        .await
        .expect("the webhook's end");
    assert!(!o.status.success(), "{o:?}");
}

/// Runs `a2a webhook ARGS` on a free port until the task of one `a2a send
/// --push-url` (which records nothing itself) is final; the task's id.
async fn pushed_once(env: &Env, base: &str, args: &[&str]) -> String {
    let port = free_port();
    let mut webhook = env.cmd();
    webhook.args(["webhook", "--port", &port.to_string(), "--token", "t0ken"]);
    webhook.args(["--until-final", "--timeout", "30s", "-o", "json"]);
    webhook.args(args);
    let receiving = std::thread::spawn(move || webhook.output().expect("run a2a webhook"));
    tokio::task::spawn_blocking(move || wait_listening(port))
        .await
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/");
    let sent = env.run(&[
        "send",
        "-a",
        base,
        "--no-ledger",
        "--push-url",
        &url,
        "--push-token",
        "t0ken",
        "-o",
        "json",
        "hello ledger",
    ]);
    sent.expect(0);
    let o = tokio::task::spawn_blocking(move || receiving.join().expect("webhook thread"))
        .await
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    sent.json()["task"]["id"]
        .as_str()
        .expect("a task id")
        .to_owned()
}

/// `a2a webhook` records what the notifications it accepts say (the task,
/// its final state, its artifact) into the `a2a` ledger; `--no-ledger`
/// writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_records_the_notified_tasks_into_the_ledger() {
    let server = push_echo().await;
    let base = server.base_url();
    let env = Env::new();
    let ledger = env.home().join("hook").join("ledger.db");
    let l = ledger.to_str().expect("a UTF-8 path");

    let id = pushed_once(&env, &base, &["--ledger", l]).await;
    let out = env.run(&["ledger", "tasks", "--ledger", l, "-o", "json"]);
    out.expect(0);
    let doc = out.json();
    let tasks = doc["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 1, "{doc}");
    assert_eq!(tasks[0]["taskId"], id.as_str(), "{doc}");
    assert_eq!(tasks[0]["state"], "TASK_STATE_COMPLETED", "{doc}");
    // Without -a the webhook does not know the agent: none is recorded.
    assert_eq!(doc["agent"], serde_json::Value::Null, "{doc}");
    let out = env.run(&["ledger", "artifacts", "--ledger", l, "-o", "json"]);
    out.expect(0);
    let doc = out.json();
    let v = &doc["artifacts"][0]["versions"][0];
    assert_eq!(v["taskId"], id.as_str(), "{doc}");
    let text: String = v["artifact"]["parts"]
        .as_array()
        .expect("parts")
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert_eq!(text, "hello ledger", "{doc}");

    let off = env.home().join("off").join("ledger.db");
    let o = off.to_str().expect("a UTF-8 path");
    pushed_once(&env, &base, &["--ledger", o, "--no-ledger"]).await;
    assert!(std::fs::metadata(&off).is_err(), "the ledger was written");
}
