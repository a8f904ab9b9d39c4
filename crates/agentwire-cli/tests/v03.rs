//! The `a2a` command against an agent that speaks only A2A 0.3: our own
//! server on loopback (it serves the 0.3 JSON-RPC methods and HTTP+JSON
//! routes beside 1.0), reached through a 0.3 card, which has a top-level
//! `url` and no `supportedInterfaces`.

mod common;

use agentwire_server::ServerHandle;
use common::*;
use serde_json::{Value, json};

type T = Result<(), Box<dyn std::error::Error>>;

/// A 0.3 card for `url` with `transport` as its preferred transport.
fn v03_card(env: &Env, name: &str, url: &str, transport: &str) -> String {
    let card = json!({
        "name": "Lab 0.3", "description": "the lab agent as a 0.3 agent", "version": "1.0.0",
        "protocolVersion": "0.3.0", "url": url, "preferredTransport": transport,
        "capabilities": {"streaming": true}, "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"], "skills": []
    });
    std::fs::write(env.cwd().join(name), card.to_string()).expect("write card");
    format!("./{name}")
}

/// The URL the server's own card gives a binding.
async fn interface_url(server: &ServerHandle, binding: &str) -> String {
    let card: Value = agentwire_client::default_http_client()
        .get(format!("{}/.well-known/agent-card.json", server.base_url()))
        .send()
        .await
        .expect("card")
        .json()
        .await
        .expect("card JSON");
    card["supportedInterfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .find(|i| i["protocolBinding"] == binding)
        .and_then(|i| i["url"].as_str())
        .expect("binding offered")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v03_agent_is_refused_without_allow_v03_naming_the_flag() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let card = v03_card(
        &env,
        "old.json",
        &interface_url(&server, "JSONRPC").await,
        "JSONRPC",
    );
    let out = env.run(&["send", "-a", &card, "hi", "-o", "json"]);
    out.expect(1);
    let e = out.json();
    assert_eq!(e["error"]["code"], "VersionNotSupportedError");
    let msg = e["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("--allow-v03") && msg.contains("0.3"), "{msg}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_get_stream_cancel_against_a_v03_agent() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    for (binding, name) in [("JSONRPC", "rpc.json"), ("HTTP+JSON", "rest.json")] {
        let url = interface_url(&server, binding).await;
        let card = v03_card(&env, name, &url, binding);
        // send: the answer is the 1.0 model.
        let out = env.run(&["send", "--allow-v03", "-a", &card, "-o", "json", "hello"]);
        out.expect(0);
        let v = out.json();
        assert_eq!(
            v["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{binding}: {v}"
        );
        assert_eq!(
            v["task"]["artifacts"][0]["parts"][0]["text"], "hello",
            "{binding}"
        );
        let id = v["task"]["id"].as_str().unwrap_or_default().to_owned();
        // task get
        let out = env.run(&["task", "get", "--allow-v03", "-a", &card, "-o", "json", &id]);
        out.expect(0);
        assert_eq!(
            out.json()["status"]["state"],
            "TASK_STATE_COMPLETED",
            "{binding}"
        );
        // stream: 1.0 events, the last one the completed status.
        let out = env.run(&[
            "send",
            "--allow-v03",
            "-a",
            &card,
            "--stream",
            "-o",
            "json",
            "chunks",
        ]);
        out.expect(0);
        let lines = out.jsonl();
        let chunks = lines
            .iter()
            .filter(|l| l.get("artifactUpdate").is_some())
            .count();
        assert_eq!(chunks, 3, "{binding}: {}", out.stdout);
        let last = lines.last().cloned().unwrap_or_default();
        assert_eq!(
            last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{binding}: {}",
            out.stdout
        );
        // cancel a running task
        let out = env.run(&[
            "send",
            "--allow-v03",
            "-a",
            &card,
            "--async",
            "-o",
            "json",
            "slow 20000",
        ]);
        out.expect(0);
        let id = out.json()["task"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let out = env.run(&[
            "task",
            "cancel",
            "--allow-v03",
            "-a",
            &card,
            "-o",
            "json",
            &id,
        ]);
        out.expect(0);
        assert_eq!(
            out.json()["status"]["state"],
            "TASK_STATE_CANCELED",
            "{binding}"
        );
        // an unknown task: the 0.3 error comes back as the A2A error.
        let out = env.run(&[
            "task",
            "get",
            "--allow-v03",
            "-a",
            &card,
            "-o",
            "json",
            "nope",
        ]);
        out.expect(1);
        assert_eq!(
            out.json()["error"]["code"],
            "TaskNotFoundError",
            "{binding}"
        );
    }
    // (The server refuses a 0.3 method sent with `A2A-Version: 1.x`, so
    // the answers above show the calls went out as 0.3 calls.)
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_with_a_v1_interface_is_never_downgraded() -> T {
    // Our server's card carries the 0.3 members (top-level url...) beside
    // the 1.0 interfaces: with --allow-v03 the client still speaks 1.0.
    let (server, rec) = lab().await;
    let env = Env::new();
    let out = env.run(&[
        "send",
        "--allow-v03",
        "-a",
        &host(&server),
        "-o",
        "json",
        "hi",
    ]);
    out.expect(0);
    let headers = rec.headers();
    assert!(!headers.is_empty());
    for h in headers {
        assert_eq!(
            h.get("a2a-version").and_then(|v| v.to_str().ok()),
            Some("1.0")
        );
    }
    Ok(())
}
