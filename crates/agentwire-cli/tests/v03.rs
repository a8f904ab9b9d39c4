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
        "capabilities": {"streaming": true, "pushNotifications": true}, "defaultInputModes": ["text/plain"],
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
    let server = serve(
        agentwire_server::A2aServer::new(lab_card().with_push_notifications(true), Lab)
            .push(agentwire_server::PushConfig::new().allow_loopback()),
    )
    .await;
    let env = Env::new();
    for (binding, name) in [
        ("JSONRPC", "rpc.json"),
        ("HTTP+JSON", "rest.json"),
        ("GRPC", "grpc.json"),
    ] {
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
        // push config CRUD on a running task
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
        let v03 = |args: &[&str]| {
            let mut a = args.to_vec();
            a.extend(["--allow-v03", "-a", &card, "-o", "json"]);
            env.run(&a)
        };
        let hook = "http://127.0.0.1:9/v03-hook";
        let out = v03(&[
            "task",
            "push-config",
            "create",
            &id,
            "--push-url",
            hook,
            "--config-id",
            "cfg-1",
        ]);
        out.expect(0);
        assert_eq!(out.json()["url"], hook, "{binding}: {}", out.stdout);
        let out = v03(&["task", "push-config", "get", &id, "cfg-1"]);
        out.expect(0);
        assert_eq!(out.json()["id"], "cfg-1", "{binding}: {}", out.stdout);
        let out = v03(&["task", "push-config", "list", &id]);
        out.expect(0);
        assert_eq!(
            out.json()["configs"].as_array().map_or(0, Vec::len),
            1,
            "{binding}: {}",
            out.stdout
        );
        v03(&["task", "push-config", "delete", &id, "cfg-1"]).expect(0);
        let out = v03(&["task", "push-config", "list", &id]);
        out.expect(0);
        assert_eq!(
            out.json()["configs"].as_array().map_or(0, Vec::len),
            0,
            "{binding}: {}",
            out.stdout
        );
        v03(&["task", "cancel", &id]).expect(0);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_library_calls_a_v03_agent_over_grpc() -> T {
    use agentwire_client::{CallOptions, Transport, V03GrpcTransport};
    use agentwire_types::{GetTaskRequest, Message, SendMessageRequest, SubscribeToTaskRequest};
    use futures::StreamExt;
    let (server, _) = lab().await;
    let grpc = V03GrpcTransport::new(interface_url(&server, "GRPC").await)?;
    let opts = CallOptions::new();
    let answer = grpc
        .send_message(
            SendMessageRequest {
                message: Some(Message::user_text("hello")),
                ..Default::default()
            },
            &opts,
        )
        .await?;
    let task = answer.task().cloned().ok_or("a task")?;
    assert_eq!(task.state(), agentwire_types::TaskState::Completed);
    let got = grpc
        .get_task(
            GetTaskRequest {
                id: task.id.clone(),
                ..Default::default()
            },
            &opts,
        )
        .await?;
    assert_eq!(got.id, task.id);
    let mut events = grpc
        .send_streaming_message(
            SendMessageRequest {
                message: Some(Message::user_text("chunks")),
                ..Default::default()
            },
            &opts,
        )
        .await?;
    let mut n = 0;
    let mut last = None;
    while let Some(ev) = events.next().await {
        last = Some(ev?);
        n += 1;
    }
    assert!(n >= 4, "{n} events");
    let last = last.ok_or("events")?;
    assert!(
        format!("{:?}", last.payload).contains("StatusUpdate"),
        "{last:?}"
    );
    // A finished task cannot be followed; an unknown one is not found.
    let err = grpc
        .get_task(
            GetTaskRequest {
                id: "nope".into(),
                ..Default::default()
            },
            &opts,
        )
        .await
        .err()
        .ok_or("an error")?;
    assert_eq!(err.kind(), Some(agentwire_types::ErrorKind::TaskNotFound));
    let sub = grpc
        .subscribe_to_task(
            SubscribeToTaskRequest {
                id: "nope".into(),
                ..Default::default()
            },
            &opts,
        )
        .await;
    let err = match sub {
        Err(e) => e,
        Ok(mut s) => match s.next().await {
            Some(Err(e)) => e,
            other => return Err(format!("expected an error, got {other:?}").into()),
        },
    };
    assert_eq!(err.kind(), Some(agentwire_types::ErrorKind::TaskNotFound));
    // (The server's 0.3 service refuses a call with `a2a-version: 1.x`, so
    // the answers above show the calls went out as 0.3 calls.)
    Ok(())
}
