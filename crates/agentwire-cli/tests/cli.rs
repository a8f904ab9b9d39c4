//! The `a2a` command against real agents on loopback: each command, each
//! output mode and each exit status. Test names are cited by
//! docs/cli-compliance-report.yaml.

mod common;

use std::time::Duration;

use agentwire_types::{
    AgentCard, SecurityRequirement, SecurityScheme, StringList, security_scheme,
};
use common::*;
use serde_json::Value;

type T = Result<(), Box<dyn std::error::Error>>;

// ----- card get --------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn card_get_from_host_url_and_file() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    for reference in [
        h.clone(),
        server.base_url(),
        format!("{}/.well-known/agent-card.json", server.base_url()),
    ] {
        let out = env.run(&["card", "get", "-a", &reference]);
        out.expect(0);
        assert_eq!(out.field("Name").as_deref(), Some("Lab"));
        assert!(
            out.field("Selected Interface")
                .unwrap()
                .starts_with("JSONRPC http://"),
            "{}",
            out.stdout
        );
        assert_text_floor(&out.stdout);
    }
    // JSON: the AgentCard itself.
    let card = env.run(&["card", "get", "-a", &h, "-o", "json"]).json();
    assert_eq!(card["name"], "Lab");
    assert_eq!(card["supportedInterfaces"].as_array().unwrap().len(), 3);
    // From a file (direct configuration), plain path and file://.
    let path = env.cwd().join("lab.json");
    std::fs::write(&path, serde_json::to_vec(&card)?)?;
    let out = env.run(&["card", "get", "-a", "./lab.json"]);
    out.expect(0);
    assert_eq!(out.field("Source").unwrap(), "./lab.json");
    let file_url = format!("file://{}", path.display());
    env.run(&["card", "get", "-a", &file_url]).expect(0);
    // The card from a file also drives calls.
    let out = env.run(&["send", "-a", "./lab.json", "hello from a file card"]);
    out.expect(0);
    assert_eq!(out.field("State").as_deref(), Some("COMPLETED"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn card_get_validate() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let out = env.run(&["card", "get", "--validate", "-a", &host(&server)]);
    out.expect(0);
    assert_eq!(out.field("Valid").as_deref(), Some("yes"));
    // An invalid card: no interfaces' versions, a skill without tags, a
    // requirement naming an undeclared scheme.
    let bad = serde_json::json!({
        "name": "Bad", "description": "d", "version": "1",
        "supportedInterfaces": [{"url": "http://127.0.0.1:1/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {}, "defaultInputModes": [], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "s", "name": "S", "description": "d", "tags": []}],
        "securityRequirements": [{"schemes": {"ghost": {"list": []}}}]
    });
    std::fs::write(env.cwd().join("bad.json"), bad.to_string())?;
    let out = env.run(&[
        "card",
        "get",
        "--validate",
        "-a",
        "./bad.json",
        "-o",
        "json",
    ]);
    out.expect(1);
    let e = out.json();
    assert_eq!(e["error"]["code"], "A2ACLI_ERR_CARD_INVALID");
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("defaultInputModes") && msg.contains("tags") && msg.contains("ghost"),
        "{msg}"
    );
    // Not JSON at all.
    std::fs::write(env.cwd().join("junk.json"), "<html>")?;
    let out = env.run(&["card", "get", "-a", "./junk.json", "-o", "json"]);
    out.expect(1);
    assert_eq!(out.json()["error"]["code"], "A2ACLI_ERR_CARD_INVALID");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_agent_and_missing_card_exit_3() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    // Nothing listens there.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    let out = env.run(&[
        "send",
        "-a",
        &format!("127.0.0.1:{dead}"),
        "hi",
        "-o",
        "json",
    ]);
    out.expect(3);
    let e = out.json();
    assert_eq!(e["error"]["code"], "A2ACLI_ERR_UNREACHABLE");
    assert!(e["error"]["hint"].as_str().unwrap().contains("running"));
    assert!(
        out.stderr.contains("Connection refused") || out.stderr.contains("refused"),
        "{}",
        out.stderr
    );
    // A server without a card at that URL.
    let out = env.run(&[
        "card",
        "get",
        "-a",
        &format!("{}/nope/card.json", server.base_url()),
        "-o",
        "json",
    ]);
    out.expect(3);
    assert_eq!(out.json()["error"]["code"], "A2ACLI_ERR_CARD_NOT_FOUND");
    // A card file that does not exist.
    let out = env.run(&["card", "get", "-a", "./missing.json", "-o", "json"]);
    out.expect(3);
    assert_eq!(out.json()["error"]["code"], "A2ACLI_ERR_CARD_NOT_FOUND");
    // Text mode says the same on stderr, stdout stays empty.
    let out = env.run(&["card", "get", "-a", "./missing.json"]);
    out.expect(3);
    assert!(out.stdout.is_empty());
    assert!(out.stderr.contains("A2ACLI_ERR_CARD_NOT_FOUND") && out.stderr.contains("hint:"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v0_card_is_refused_never_downgraded() -> T {
    let env = Env::new();
    let old = serde_json::json!({
        "name": "Old", "description": "d", "version": "1", "protocolVersion": "0.3.0",
        "url": "http://127.0.0.1:9/a2a", "preferredTransport": "JSONRPC",
        "capabilities": {}, "defaultInputModes": [], "defaultOutputModes": [], "skills": []
    });
    std::fs::write(env.cwd().join("old.json"), old.to_string())?;
    let out = env.run(&["send", "-a", "./old.json", "hi", "-o", "json"]);
    out.expect(1);
    let e = out.json();
    assert_eq!(e["error"]["code"], "VersionNotSupportedError");
    assert!(e["error"]["message"].as_str().unwrap().contains("0.3.0"));
    // Asking for a 0.x version explicitly is refused too.
    let out = env.run(&["send", "-a", "./old.json", "--a2a-version", "0.3", "hi"]);
    out.expect(2);
    assert!(out.stderr.contains("A2ACLI_ERR_USAGE"));
    Ok(())
}

// ----- send ------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_blocks_until_done_and_json_is_one_document() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let out = env.run(&["send", "-a", &h, "slow 300"]);
    out.expect(0);
    assert_eq!(out.field("State").as_deref(), Some("COMPLETED"));
    assert!(out.field("Task ID").is_some() && out.field("Context ID").is_some());
    assert_text_floor(&out.stdout);
    // The same over each transport, as one SendMessageResponse document.
    for t in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        let out = env.run(&["send", "-a", &h, "--transport", t, "-o", "json", "slow 200"]);
        out.expect(0);
        let v = out.json();
        assert_eq!(v["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{t}");
        assert_eq!(v["task"]["artifacts"][0]["parts"][0]["text"], "done");
        assert!(out.stderr.is_empty(), "{t}: {}", out.stderr);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_async_returns_identifiers_then_poll() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let started = std::time::Instant::now();
    let out = env.run(&["send", "-a", &h, "--async", "-o", "json", "slow 1500"]);
    out.expect(0);
    assert!(
        started.elapsed() < Duration::from_millis(1400),
        "--async waited"
    );
    let v = out.json();
    let id = v["task"]["id"].as_str().unwrap().to_owned();
    assert!(
        v["task"]["contextId"]
            .as_str()
            .is_some_and(|c| !c.is_empty())
    );
    assert_ne!(v["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    // Text form names the command to follow it.
    let out = env.run(&["send", "-a", &h, "--no-wait", "slow 100"]);
    out.expect(0);
    assert!(
        out.field("Next").unwrap().contains("task get"),
        "{}",
        out.stdout
    );
    // Poll the first task to its end.
    let out = env.run(&[
        "task",
        "get",
        "-a",
        &h,
        "--wait",
        "--poll-interval",
        "100ms",
        &id,
        "-o",
        "json",
    ]);
    out.expect(0);
    let t = out.json();
    assert_eq!(t["id"], id.as_str());
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED");
    // One-shot get, text.
    let out = env.run(&["task", "get", "-a", &h, &id]);
    out.expect(0);
    assert_eq!(out.field("Task ID").as_deref(), Some(id.as_str()));
    assert_eq!(out.field("State").as_deref(), Some("COMPLETED"));
    assert!(out.stdout.contains("Text:\ndone\n"), "{}", out.stdout);
    // History on request.
    let full = env
        .run(&["task", "get", "-a", &h, &id, "-o", "json"])
        .json();
    assert!(!full["history"].as_array().unwrap().is_empty());
    let none = env
        .run(&["task", "get", "-a", &h, &id, "--history", "0", "-o", "json"])
        .json();
    assert!(
        none["history"].as_array().is_none_or(|h| h.is_empty()),
        "{none}"
    );
    let out = env.run(&["task", "get", "-a", &h, &id, "--history", "1", "--verbose"]);
    assert!(out.stdout.contains("History Entry: 1"), "{}", out.stdout);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_stream_jsonl_and_text() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    for t in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        let out = env.run(&[
            "send",
            "-a",
            &h,
            "--transport",
            t,
            "--stream",
            "-o",
            "json",
            "chunks",
        ]);
        out.expect(0);
        let lines = out.jsonl();
        assert!(lines.len() >= 5, "{t}: {}", out.stdout);
        assert!(
            lines[0].get("task").is_some(),
            "{t}: first event is the Task"
        );
        let chunks: Vec<&Value> = lines
            .iter()
            .filter_map(|l| l.get("artifactUpdate"))
            .collect();
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks[2]["lastChunk"], true);
        let last = lines.last().unwrap();
        assert_eq!(
            last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{t}"
        );
        assert!(
            last["statusUpdate"]["taskId"].is_string()
                && last["statusUpdate"]["contextId"].is_string()
        );
    }
    // Text: each event labelled, the tail restates the identifiers.
    let out = env.run(&["send", "-a", &h, "--stream", "chunks"]);
    out.expect(0);
    assert_text_floor(&out.stdout);
    assert!(out.stdout.contains("Event: artifact-update"));
    let tail: Vec<&str> = out.stdout.lines().rev().take(4).collect();
    assert!(
        tail.iter().any(|l| l.starts_with("State: COMPLETED")),
        "{}",
        out.stdout
    );
    assert!(tail.iter().any(|l| l.starts_with("Task ID: ")));
    assert!(tail.iter().any(|l| l.starts_with("Context ID: ")));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_message_only_response_exits_cleanly() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let out = env.run(&["send", "-a", &h, "--stream", "-o", "json", "message"]);
    out.expect(0);
    let lines = out.jsonl();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["message"]["parts"][0]["text"], "just a message");
    let out = env.run(&["send", "-a", &h, "-o", "json", "message"]);
    out.expect(0);
    assert!(out.json().get("message").is_some());
    let out = env.run(&["send", "-a", &h, "message"]);
    out.expect(0);
    assert!(out.stdout.contains("Text:\njust a message"));
    assert_text_floor(&out.stdout);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_without_streaming_capability_falls_back() -> T {
    let card = lab_card().with_streaming(false);
    let (server, _) = lab_with(card, Recorder::default()).await;
    let env = Env::new();
    let h = host(&server);
    let out = env.run(&["send", "-a", &h, "--stream", "-o", "json", "hello"]);
    out.expect(0);
    let lines = out.jsonl();
    assert_eq!(lines.len(), 1, "{}", out.stdout);
    assert_eq!(lines[0]["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert!(out.stderr.contains("does not declare streaming"));
    // The blocking default works without streaming too.
    env.run(&["send", "-a", &h, "slow 100"]).expect(0);
    // Subscribing is refused before calling (capability checked on the card).
    let out = env.run(&["task", "subscribe", "-a", &h, "some-task", "-o", "json"]);
    out.expect(1);
    assert_eq!(out.json()["error"]["code"], "UnsupportedOperationError");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts_are_rendered_never_dropped() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let out = env.run(&["send", "-a", &h, "file"]);
    out.expect(0);
    assert_text_floor(&out.stdout);
    let s = &out.stdout;
    assert!(s.contains("Artifacts: 2"), "{s}");
    assert!(
        s.contains("File: report.bin\nMedia Type: application/octet-stream\nSize: 15 bytes"),
        "{s}"
    );
    assert!(
        s.contains("Data:\n{\n  \"ok\": true,\n  \"rows\": 3\n}\n\n"),
        "{s}"
    );
    assert!(
        s.contains("File: big.csv\nURL: https://example.com/big.csv"),
        "{s}"
    );
    assert!(
        s.contains("Artifact: notes.md") && s.contains("Text:\n# Notes\nline two\n\n"),
        "{s}"
    );
    // task get shows the same artifacts; JSON keeps every part.
    let id = out.field("Task ID").unwrap();
    let t = env
        .run(&["task", "get", "-a", &h, &id, "-o", "json"])
        .json();
    assert_eq!(t["artifacts"][0]["parts"].as_array().unwrap().len(), 3);
    let out = env.run(&["task", "get", "-a", &h, &id]);
    assert!(out.stdout.contains("File: report.bin") && out.stdout.contains("Data:"));
    // Escape sequences from the agent never reach the terminal.
    let out = env.run(&["send", "-a", &h, "escape"]);
    out.expect(0);
    assert_text_floor(&out.stdout);
    assert!(!out.stdout.contains('\u{1b}'));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parts_keep_order_and_media_types() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    std::fs::write(env.cwd().join("a.bin"), b"12345")?;
    std::fs::write(env.cwd().join("table.csv"), b"a,b\n1,2\n")?;
    std::fs::write(env.cwd().join("d.json"), br#"{"k": [1, 2]}"#)?;
    let out = env.run_stdin(
        &[
            "send",
            "-a",
            &h,
            "-o",
            "json",
            "--text",
            "parts",
            "--file",
            "a.bin",
            "--media-type",
            "application/pdf",
            "--data",
            "-",
            "--file",
            "table.csv",
            "--data",
            "d.json",
            "--text",
            "last",
            "--media-type",
            "text/markdown",
            "--file",
            "https://example.com/x/report.pdf",
        ],
        r#"{"from": "stdin"}"#,
    );
    out.expect(0);
    let v = out.json();
    let parts = v["task"]["artifacts"][0]["parts"][0]["data"]
        .as_array()
        .unwrap()
        .clone();
    let kinds: Vec<&str> = parts.iter().map(|p| p["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["text", "raw", "data", "raw", "data", "text", "url"]);
    assert_eq!(parts[1]["mediaType"], "application/pdf"); // explicit
    assert_eq!(parts[1]["filename"], "a.bin");
    assert_eq!(parts[1]["size"], 5);
    assert_eq!(parts[2]["data"]["from"], "stdin");
    assert_eq!(parts[3]["mediaType"], "text/csv"); // inferred
    assert_eq!(parts[4]["data"]["k"][1], 2);
    assert_eq!(parts[5]["mediaType"], "text/markdown");
    assert_eq!(parts[6]["mediaType"], "application/pdf"); // inferred from the URL
    // --media-type with nothing before it is a usage error.
    let out = env.run(&[
        "send",
        "-a",
        &h,
        "--media-type",
        "text/plain",
        "--text",
        "x",
        "-o",
        "json",
    ]);
    out.expect(2);
    assert_eq!(out.json()["error"]["code"], "A2ACLI_ERR_USAGE");
    // A missing file too.
    env.run(&["send", "-a", &h, "--file", "nope.bin"]).expect(2);
    // Invalid JSON data.
    std::fs::write(env.cwd().join("bad.json"), b"{nope")?;
    env.run(&["send", "-a", &h, "--data", "bad.json"]).expect(2);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_travels_in_the_payload() -> T {
    let (server, rec) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let out = env.run(&[
        "send",
        "-a",
        &h,
        "-o",
        "json",
        "--metadata",
        r#"{"tenant":"acme","n":2}"#,
        "--svc-param",
        "x-trace-id:abc123",
        "meta",
    ]);
    out.expect(0);
    let v = out.json();
    assert_eq!(
        v["task"]["artifacts"][0]["parts"][0]["data"],
        serde_json::json!({"tenant": "acme", "n": 2})
    );
    // The service parameter went as a header, not in the payload.
    assert!(
        rec.headers()
            .iter()
            .any(|h| h.get("x-trace-id").is_some_and(|v| v == "abc123"))
    );
    // A service parameter A2A-Version replaces the version's own header:
    // one A2A-Version on the wire, the one given.
    let before = rec.headers().len();
    env.run(&["send", "-a", &h, "--svc-param", "A2A-Version:1.0", "meta"])
        .expect(0);
    let sent = rec.headers();
    assert!(sent.len() > before);
    let versioned: Vec<Vec<_>> = sent[before..]
        .iter()
        .map(|h| h.get_all("a2a-version").iter().collect::<Vec<_>>())
        .filter(|v| !v.is_empty())
        .collect();
    assert!(!versioned.is_empty(), "no A2A-Version sent");
    for versions in versioned {
        assert_eq!(versions, ["1.0"]);
    }
    let out = env.run(&["send", "-a", &h, "--metadata", "[1]", "meta"]);
    out.expect(2);
    let out = env.run(&["send", "-a", &h, "--svc-param", "novalue", "meta"]);
    out.expect(2);
    Ok(())
}

// ----- interaction state ---------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_required_round_trip_with_task_id() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    for t in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        let out = env.run(&["send", "-a", &h, "--transport", t, "ask me"]);
        out.expect(0); // a paused task is not a CLI failure
        assert_eq!(out.field("State").as_deref(), Some("INPUT_REQUIRED"), "{t}");
        assert_eq!(out.field("Status Message").as_deref(), Some("What size?"));
        let id = out.field("Task ID").unwrap();
        let ctx = out.field("Context ID").unwrap();
        let next = out.field("Next").unwrap();
        assert!(
            next.contains(&format!("--task-id {id}")) && next.starts_with("a2a send -a "),
            "{next}"
        );
        assert!(out.stderr.contains("waiting for input"), "{}", out.stderr);
        // Answer it (without --context-id: the server resolves it).
        let out = env.run(&[
            "send",
            "-a",
            &h,
            "--transport",
            t,
            "--task-id",
            &id,
            "-o",
            "json",
            "large",
        ]);
        out.expect(0);
        let v = out.json();
        assert_eq!(v["task"]["id"], id.as_str());
        assert_eq!(v["task"]["contextId"], ctx.as_str());
        assert_eq!(v["task"]["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(
            v["task"]["artifacts"][0]["parts"][0]["text"],
            "you said: large"
        );
    }
    // With a matching --context-id too, in JSON from the start.
    let v = env.run(&["send", "-a", &h, "-o", "json", "ask"]).json();
    let id = v["task"]["id"].as_str().unwrap();
    let ctx = v["task"]["contextId"].as_str().unwrap();
    assert_eq!(v["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let v = env
        .run(&[
            "send",
            "-a",
            &h,
            "-o",
            "json",
            "--task-id",
            id,
            "--context-id",
            ctx,
            "small",
        ])
        .json();
    assert_eq!(v["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_task_id_fails_and_starts_no_task() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let count = |env: &Env| -> usize {
        env.run(&["task", "list", "-a", &h, "-o", "json"]).json()["tasks"]
            .as_array()
            .unwrap()
            .len()
    };
    let done = env.run(&["send", "-a", &h, "-o", "json", "hello"]).json();
    let done_id = done["task"]["id"].as_str().unwrap().to_owned();
    let before = count(&env);
    // Unknown task.
    let out = env.run(&[
        "send",
        "-a",
        &h,
        "--task-id",
        "no-such-task",
        "-o",
        "json",
        "hi",
    ]);
    out.expect(1);
    let e = out.json();
    assert_eq!(e["error"]["code"], "TaskNotFoundError");
    assert!(e["error"]["hint"].as_str().unwrap().contains("--debug"));
    // A terminal task.
    let out = env.run(&[
        "send",
        "-a",
        &h,
        "--task-id",
        &done_id,
        "-o",
        "json",
        "again",
    ]);
    out.expect(1);
    assert_eq!(out.json()["error"]["code"], "UnsupportedOperationError");
    // A context that does not match the task.
    let ask = env.run(&["send", "-a", &h, "-o", "json", "ask"]).json();
    let ask_id = ask["task"]["id"].as_str().unwrap();
    let out = env.run(&[
        "send",
        "-a",
        &h,
        "--task-id",
        ask_id,
        "--context-id",
        "other-context",
        "-o",
        "json",
        "x",
    ]);
    out.expect(1);
    assert!(
        out.json()["error"]["code"]
            .as_str()
            .unwrap()
            .ends_with("Error")
    );
    assert!(out.stderr.contains("--debug"));
    // No task was created by the refused calls (only the `ask` one).
    assert_eq!(count(&env), before + 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_id_groups_a_new_task() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let first = env.run(&["send", "-a", &h, "-o", "json", "one"]).json();
    let ctx = first["task"]["contextId"].as_str().unwrap();
    let second = env
        .run(&["send", "-a", &h, "-o", "json", "--context-id", ctx, "two"])
        .json();
    assert_eq!(second["task"]["contextId"], ctx);
    assert_ne!(second["task"]["id"], first["task"]["id"]);
    let list = env
        .run(&["task", "list", "-a", &h, "--context-id", ctx, "-o", "json"])
        .json();
    assert_eq!(list["tasks"].as_array().unwrap().len(), 2);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_invents_identifiers_and_keeps_no_state() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let out = env.run(&["send", "-a", &h, "--debug", "hello"]);
    out.expect(0);
    let id = out.field("Task ID").unwrap();
    let ctx = out.field("Context ID").unwrap();
    let request = out
        .stderr
        .lines()
        .find(|l| l.contains("--> SendStreamingMessage") || l.contains("--> SendMessage"))
        .unwrap();
    assert!(
        !request.contains("\"taskId\"") && !request.contains("\"contextId\""),
        "{request}"
    );
    // Nothing under HOME (configuration, cache) mentions the task or
    // context, but the ledger (docs/ledger.md): a record the caller reads
    // and names ids from explicitly (`--context-id last`), never a state
    // the tool resumes by itself (below).
    let ledger = env.home().join(".local/share/a2a-cli");
    assert!(ledger.join("ledger.db").exists(), "the ledger records");
    let mut stack = vec![env.home().to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let p = e?.path();
            if p == ledger {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                let body = std::fs::read_to_string(&p).unwrap_or_default();
                assert!(
                    !body.contains(&id) && !body.contains(&ctx),
                    "{} keeps session state",
                    p.display()
                );
            }
        }
    }
    // And a later run does not continue anything by itself.
    let v = env.run(&["send", "-a", &h, "-o", "json", "again"]).json();
    assert_ne!(v["task"]["contextId"], ctx.as_str());
    let help = env.run(&["send", "--help"]);
    assert!(!help.stdout.contains("--continue"));
    Ok(())
}

// ----- outcomes and exit statuses -------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_outcomes_exit_zero_with_a_warning() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    for (word, state) in [
        ("fail", "FAILED"),
        ("reject", "REJECTED"),
        ("auth", "AUTH_REQUIRED"),
        ("ask", "INPUT_REQUIRED"),
    ] {
        let out = env.run(&["send", "-a", &h, word]);
        out.expect(0);
        assert_eq!(out.field("State").as_deref(), Some(state));
        assert!(
            out.stderr.starts_with("warning: "),
            "{word}: {}",
            out.stderr
        );
        assert!(out.stderr.contains(state), "{}", out.stderr);
        let v = env.run(&["send", "-a", &h, "-o", "json", word]);
        v.expect(0);
        assert_eq!(
            v.json()["task"]["status"]["state"],
            format!("TASK_STATE_{state}")
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_exits_5_and_names_the_task() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let started = std::time::Instant::now();
    let out = env.run(&[
        "send",
        "-a",
        &h,
        "--timeout",
        "500ms",
        "-o",
        "json",
        "slow 20000",
    ]);
    out.expect(5);
    assert!(started.elapsed() < Duration::from_secs(10));
    let e = out.json();
    assert_eq!(e["error"]["code"], "A2ACLI_ERR_TIMEOUT");
    let hint = e["error"]["hint"].as_str().unwrap();
    assert!(hint.contains(&format!("task get -a {h} --wait ")), "{hint}");
    // Polling honours --timeout and --poll-interval.
    let v = env
        .run(&["send", "-a", &h, "--async", "-o", "json", "slow 20000"])
        .json();
    let id = v["task"]["id"].as_str().unwrap();
    let started = std::time::Instant::now();
    let out = env.run(&[
        "task",
        "get",
        "-a",
        &h,
        "--wait",
        "--poll-interval",
        "100ms",
        "--timeout",
        "700ms",
        "--debug",
        id,
    ]);
    out.expect(5);
    let polls = out.stderr.matches("--> GetTask").count();
    assert!((2..=8).contains(&polls), "{polls} polls:\n{}", out.stderr);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(out.stderr.contains("A2ACLI_ERR_TIMEOUT"));
    // Clean up the long task.
    env.run(&["task", "cancel", "-a", &h, id]).expect(0);
    Ok(())
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupting_a_wait_keeps_the_task_id() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let bin = assert_cmd::cargo::cargo_bin("a2a");
    let child = std::process::Command::new(bin)
        .args(["send", "-a", &h, "slow 20000"])
        .env("HOME", env.home())
        .env("XDG_CACHE_HOME", env.home().join(".cache"))
        .current_dir(env.cwd())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let pid = child.id().to_string();
    std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()?;
    let out = tokio::task::spawn_blocking(move || child.wait_with_output()).await??;
    // 130: the status of a command stopped by SIGINT (issue 42).
    assert_eq!(out.status.code(), Some(130));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("interrupted") && err.contains(&format!("task get -a {h} --wait")),
        "{err}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_errors_exit_2() -> T {
    let env = Env::new();
    for args in [
        vec!["send"],
        vec!["send", "-a", "127.0.0.1:9", "--async", "--wait", "x"],
        vec!["send", "-a", "127.0.0.1:9", "--stream", "--async", "x"],
        vec!["frobnicate"],
        vec!["task", "get", "-a", "127.0.0.1:9"],
        vec!["send", "-a", "127.0.0.1:9", "--transport", "SOAP", "x"],
        vec!["send", "-a", "127.0.0.1:9", "--timeout", "soon", "x"],
    ] {
        let mut json_args = args.clone();
        json_args.extend(["-o", "json"]);
        let out = env.run(&json_args);
        out.expect(2);
        assert_eq!(out.json()["error"]["code"], "A2ACLI_ERR_USAGE", "{args:?}");
        env.run(&args).expect(2);
    }
    Ok(())
}

// ----- tasks -------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_cancel_is_idempotent() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let v = env
        .run(&["send", "-a", &h, "--async", "-o", "json", "slow 20000"])
        .json();
    let id = v["task"]["id"].as_str().unwrap();
    let out = env.run(&["task", "cancel", "-a", &h, id]);
    out.expect(0);
    assert_eq!(out.field("State").as_deref(), Some("CANCELED"));
    assert_eq!(out.field("Task ID").as_deref(), Some(id));
    assert!(out.field("Context ID").is_some());
    // Again: still canceled, still success.
    let t = env
        .run(&["task", "cancel", "-a", &h, id, "-o", "json"])
        .json();
    assert_eq!(t["status"]["state"], "TASK_STATE_CANCELED");
    // A completed task cannot be canceled.
    let done = env.run(&["send", "-a", &h, "-o", "json", "hi"]).json();
    let out = env.run(&[
        "task",
        "cancel",
        "-a",
        &h,
        done["task"]["id"].as_str().unwrap(),
        "-o",
        "json",
    ]);
    out.expect(1);
    assert_eq!(out.json()["error"]["code"], "TaskNotCancelableError");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_list_filters_and_pages() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let a = env.run(&["send", "-a", &h, "-o", "json", "one"]).json();
    let ctx = a["task"]["contextId"].as_str().unwrap();
    env.run(&["send", "-a", &h, "--context-id", ctx, "ask"])
        .expect(0);
    env.run(&["send", "-a", &h, "three"]).expect(0);
    let all = env.run(&["task", "list", "-a", &h, "-o", "json"]).json();
    assert_eq!(all["tasks"].as_array().unwrap().len(), 3);
    let by_ctx = env
        .run(&["task", "list", "-a", &h, "--context-id", ctx, "-o", "json"])
        .json();
    assert_eq!(by_ctx["tasks"].as_array().unwrap().len(), 2);
    let waiting = env
        .run(&[
            "task",
            "list",
            "-a",
            &h,
            "--status",
            "input-required",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(waiting["tasks"].as_array().unwrap().len(), 1);
    // Pages of one, by token.
    let p1 = env
        .run(&["task", "list", "-a", &h, "--page-size", "1", "-o", "json"])
        .json();
    let token = p1["nextPageToken"].as_str().unwrap();
    assert!(!token.is_empty());
    let p2 = env
        .run(&[
            "task",
            "list",
            "-a",
            &h,
            "--page-size",
            "1",
            "--page-token",
            token,
            "-o",
            "json",
        ])
        .json();
    assert_ne!(p1["tasks"][0]["id"], p2["tasks"][0]["id"]);
    // --all follows the tokens; --stream gives one Task per line.
    let out = env.run(&[
        "task",
        "list",
        "-a",
        &h,
        "--page-size",
        "1",
        "--all",
        "-o",
        "json",
        "--stream",
    ]);
    out.expect(0);
    let lines = out.jsonl();
    assert_eq!(lines.len(), 3);
    assert!(
        lines
            .iter()
            .all(|t| t["id"].is_string() && t["status"]["state"].is_string())
    );
    let out = env.run(&["task", "list", "-a", &h]);
    out.expect(0);
    assert_text_floor(&out.stdout);
    assert_eq!(out.field("Tasks").as_deref(), Some("3"));
    env.run(&["task", "list", "-a", &h, "--status", "sleeping"])
        .expect(2);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_subscribe_follows_to_the_end() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    for t in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        // Long enough for the next `a2a` process to start and subscribe on
        // a loaded machine (at 800 ms it sometimes found the task finished).
        let v = env
            .run(&["send", "-a", &h, "--async", "-o", "json", "slow 2500"])
            .json();
        let id = v["task"]["id"].as_str().unwrap();
        let out = env.run(&[
            "task",
            "subscribe",
            "-a",
            &h,
            "--transport",
            t,
            "--stream",
            "-o",
            "json",
            id,
        ]);
        out.expect(0);
        let lines = out.jsonl();
        assert!(
            lines[0].get("task").is_some(),
            "{t}: the first event is the Task"
        );
        assert_eq!(
            lines.last().unwrap()["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
    }
    // Without --stream: the terminal Task.
    let v = env
        .run(&["send", "-a", &h, "--async", "-o", "json", "slow 500"])
        .json();
    let id = v["task"]["id"].as_str().unwrap();
    let t = env
        .run(&["task", "subscribe", "-a", &h, "-o", "json", id])
        .json();
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(t["artifacts"][0]["parts"][0]["text"], "done");
    // A waiting task can be followed too (the stream ends at the interrupt).
    let v = env.run(&["send", "-a", &h, "-o", "json", "ask"]).json();
    let id = v["task"]["id"].as_str().unwrap();
    let out = env.run(&["task", "subscribe", "-a", &h, id]);
    out.expect(0);
    assert_eq!(out.field("State").as_deref(), Some("INPUT_REQUIRED"));
    // Unknown task.
    let out = env.run(&["task", "subscribe", "-a", &h, "nope", "-o", "json"]);
    out.expect(1);
    assert_eq!(out.json()["error"]["code"], "TaskNotFoundError");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_download_saves_artifacts() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let v = env.run(&["send", "-a", &h, "-o", "json", "file"]).json();
    let id = v["task"]["id"].as_str().unwrap();
    let out = env.run(&["task", "download", "-a", &h, id, "--dir", "out"]);
    out.expect(0);
    assert_text_floor(&out.stdout);
    let dir = env.cwd().join("out");
    // Distinct parts of one artifact: the artifact's name, then the part's
    // file name or its position.
    assert_eq!(
        std::fs::read(dir.join("bundle-report.bin"))?,
        b"\x00\x01binary-report"
    );
    let data: Value = serde_json::from_slice(&std::fs::read(dir.join("bundle-part2.json"))?)?;
    assert_eq!(data["rows"], 3);
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.md"))?,
        "# Notes\nline two"
    );
    assert!(
        out.stdout
            .contains("Not Downloaded: https://example.com/big.csv")
    );
    // No silent overwrite; a file in the way is a usage error (the caller
    // chooses --force or another --dir; issue 42), named, with the way out,
    // and nothing is written.
    let out = env.run(&[
        "task", "download", "-a", &h, id, "--dir", "out", "-o", "json",
    ]);
    out.expect(2);
    let e = &out.json()["error"];
    assert_eq!(e["code"], "A2ACLI_ERR_USAGE");
    assert!(e["message"].as_str().unwrap().contains("notes.md"), "{e}");
    assert!(e["hint"].as_str().unwrap().contains("--force"), "{e}");
    std::fs::create_dir_all(env.cwd().join("out3"))?;
    std::fs::write(env.cwd().join("out3/notes.md"), "mine")?;
    env.run(&["task", "download", "-a", &h, id, "--dir", "out3"])
        .expect(2);
    assert!(!env.cwd().join("out3/bundle-report.bin").exists());
    assert_eq!(
        std::fs::read_to_string(env.cwd().join("out3/notes.md"))?,
        "mine"
    );
    env.run(&["task", "download", "-a", &h, id, "--dir", "out", "--force"])
        .expect(0);
    // JSON: the Task on stdout, the files on stderr.
    let out = env.run(&[
        "task", "download", "-a", &h, id, "--dir", "out2", "-o", "json",
    ]);
    out.expect(0);
    assert_eq!(out.json()["id"], id);
    assert!(out.stderr.contains("saved "));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_download_writes_one_file_per_streamed_artifact() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    // An artifact streamed in three chunks, and two artifacts of one name.
    let v = env.run(&["send", "-a", &h, "-o", "json", "chunks"]).json();
    let id = v["task"]["id"].as_str().unwrap();
    assert_eq!(
        v["task"]["artifacts"][0]["parts"].as_array().map(Vec::len),
        Some(3)
    );
    let out = env.run(&["task", "download", "-a", &h, id, "--dir", "out"]);
    out.expect(0);
    assert_text_floor(&out.stdout);
    let dir = env.cwd().join("out");
    let names: Vec<String> = std::fs::read_dir(&dir)?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()?;
    assert_eq!(names, vec!["story.txt".to_owned()], "{}", out.stdout);
    assert_eq!(
        std::fs::read_to_string(dir.join("story.txt"))?,
        "alpha beta gamma"
    );
    assert!(out.stdout.contains("3 parts joined"), "{}", out.stdout);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_config_commands_report_push_not_supported() -> T {
    // A card (from a file) that declares push notifications for our
    // agent, which does not support them yet: the agent itself refuses.
    let (server, _) = lab().await;
    let env = Env::new();
    let mut card: Value = env
        .run(&["card", "get", "-a", &host(&server), "-o", "json"])
        .json();
    card["capabilities"]["pushNotifications"] = Value::Bool(true);
    std::fs::write(env.cwd().join("push.json"), card.to_string())?;
    let h = "./push.json".to_owned();
    let v = env.run(&["send", "-a", &h, "-o", "json", "ask"]).json();
    let id = v["task"]["id"].as_str().unwrap();
    let mut envelopes = Vec::new();
    for t in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        for args in [
            vec![
                "task",
                "push-config",
                "create",
                id,
                "--url",
                "https://hooks.example.com/a2a",
                "--token",
                "tok",
            ],
            vec!["task", "push-config", "get", id, "cfg-1"],
            vec!["task", "push-config", "list", id],
            vec!["task", "push-config", "delete", id, "cfg-1"],
        ] {
            let mut a = args.clone();
            a.extend(["-a", &h, "--transport", t, "-o", "json"]);
            let out = env.run(&a);
            out.expect(1);
            let e = out.json();
            assert_eq!(
                e["error"]["code"], "PushNotificationNotSupportedError",
                "{t} {args:?}"
            );
            assert_eq!(e["error"]["a2aCode"], -32003);
            envelopes.push(e["error"]["code"].clone());
        }
    }
    assert!(envelopes.windows(2).all(|w| w[0] == w[1]));
    // A card without the capability: refused before any call, same error.
    let (plain, rec) = lab().await;
    let before = rec.headers().len();
    let out = env.run(&[
        "task",
        "push-config",
        "list",
        "t-1",
        "-a",
        &host(&plain),
        "-o",
        "json",
    ]);
    out.expect(1);
    assert_eq!(
        out.json()["error"]["code"],
        "PushNotificationNotSupportedError"
    );
    assert_eq!(rec.headers().len(), before, "no call was made");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_the_same_over_every_transport() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let mut seen = Vec::new();
    for t in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        let out = env.run(&[
            "task",
            "get",
            "-a",
            &h,
            "--transport",
            t,
            "missing-task",
            "-o",
            "json",
        ]);
        out.expect(1);
        let mut e = out.json();
        assert_eq!(e["error"]["code"], "TaskNotFoundError");
        assert_eq!(e["error"]["a2aCode"], -32001);
        e["error"]["message"] = Value::Null; // the wording is the server's
        seen.push(e);
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
    Ok(())
}

// ----- transports, versions, credentials --------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transport_follows_card_order_and_preference() -> T {
    let (server, rec) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let selected = |out: &Out| -> String {
        out.stderr
            .lines()
            .find(|l| l.contains("<- selected"))
            .unwrap_or_else(|| panic!("no selection in:\n{}", out.stderr))
            .to_owned()
    };
    // The card's first interface by default.
    let out = env.run(&["send", "-a", &h, "--debug", "hi"]);
    out.expect(0);
    assert!(selected(&out).contains("JSONRPC"), "{}", selected(&out));
    // A preference, repeatable and ordered.
    let out = env.run(&[
        "send",
        "-a",
        &h,
        "--debug",
        "--transport",
        "GRPC",
        "--transport",
        "JSONRPC",
        "hi",
    ]);
    out.expect(0);
    assert!(selected(&out).contains("GRPC"));
    let out = env.run(&[
        "send",
        "-a",
        &h,
        "--debug",
        "--transport",
        "HTTP+JSON",
        "hi",
    ]);
    assert!(selected(&out).contains("HTTP+JSON"));
    // A card that prefers HTTP+JSON, from a file.
    let mut card: Value = env.run(&["card", "get", "-a", &h, "-o", "json"]).json();
    let ifaces = card["supportedInterfaces"].as_array_mut().unwrap();
    ifaces.swap(0, 1);
    std::fs::write(env.cwd().join("rest-first.json"), card.to_string())?;
    let out = env.run(&["send", "-a", "./rest-first.json", "--debug", "hi"]);
    out.expect(0);
    assert!(selected(&out).contains("HTTP+JSON"), "{}", selected(&out));
    // A binding the card does not offer falls back to the card's order.
    let only_grpc: Value = {
        let mut c = card.clone();
        c["supportedInterfaces"] = Value::Array(vec![card["supportedInterfaces"][2].clone()]);
        c
    };
    std::fs::write(env.cwd().join("grpc-only.json"), only_grpc.to_string())?;
    let out = env.run(&[
        "send",
        "-a",
        "./grpc-only.json",
        "--transport",
        "JSONRPC",
        "--debug",
        "hi",
    ]);
    out.expect(0);
    assert!(selected(&out).contains("GRPC"));
    assert!(
        out.stderr
            .contains("offers none of the requested transports")
    );
    // A2A-Version on every request, every binding (gRPC metadata included).
    let calls = rec.headers();
    assert!(calls.len() >= 5);
    assert!(
        calls
            .iter()
            .all(|h| h.get("a2a-version").is_some_and(|v| v == "1.0")),
        "{calls:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_of_the_selected_interface_is_sent() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let mut card: Value = env.run(&["card", "get", "-a", &h, "-o", "json"]).json();
    for i in card["supportedInterfaces"].as_array_mut().unwrap() {
        i["tenant"] = Value::String("acme".into());
    }
    std::fs::write(env.cwd().join("tenant.json"), card.to_string())?;
    for t in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        let out = env.run(&[
            "send",
            "-a",
            "./tenant.json",
            "--transport",
            t,
            "--debug",
            "-o",
            "json",
            "hi",
        ]);
        out.expect(0);
        let id = out.json()["task"]["id"].as_str().unwrap().to_owned();
        let req = out.stderr.lines().find(|l| l.contains("--> Send")).unwrap();
        assert!(req.contains("\"tenant\":\"acme\""), "{t}: {req}");
        // The task lives under that tenant: found through the same card...
        env.run(&["task", "get", "-a", "./tenant.json", "--transport", t, &id])
            .expect(0);
    }
    // ...and a card without tenant sends none.
    let out = env.run(&["send", "-a", &h, "--debug", "hi"]);
    let req = out.stderr.lines().find(|l| l.contains("--> Send")).unwrap();
    assert!(!req.contains("tenant"), "{req}");
    Ok(())
}

fn bearer_card() -> AgentCard {
    let mut card = lab_card();
    card.security_schemes.insert(
        "bearer".into(),
        SecurityScheme {
            scheme: Some(security_scheme::Scheme::HttpAuthSecurityScheme(
                agentwire_types::HttpAuthSecurityScheme {
                    scheme: "Bearer".into(),
                    ..Default::default()
                },
            )),
        },
    );
    card.security_requirements.push(SecurityRequirement {
        schemes: [("bearer".to_string(), StringList::default())].into(),
    });
    card
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_credentials_flag_env_and_errors() -> T {
    let rec = Recorder {
        bearer: Some("s3cret-token".into()),
        ..Default::default()
    };
    let (server, _) = lab_with(bearer_card(), rec).await;
    let env = Env::new();
    let h = host(&server);
    // Missing: exit 4 with a hint naming the flag, from the card's scheme.
    let out = env.run(&["send", "-a", &h, "-o", "json", "hi"]);
    out.expect(4);
    let e = out.json();
    assert_eq!(e["error"]["code"], "A2ACLI_ERR_CREDENTIALS_MISSING");
    assert!(e["error"]["hint"].as_str().unwrap().contains("--bearer"));
    // Wrong: exit 4, another code.
    let out = env.run(&["send", "-a", &h, "--bearer", "wrong", "-o", "json", "hi"]);
    out.expect(4);
    assert_eq!(out.json()["error"]["code"], "A2ACLI_ERR_AUTH_FAILED");
    // Right, by flag over every transport, and never in the debug log.
    for t in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        let out = env.run(&[
            "send",
            "-a",
            &h,
            "--transport",
            t,
            "--bearer",
            "s3cret-token",
            "--debug",
            "--verbose",
            "hi",
        ]);
        out.expect(0);
        assert!(
            !out.stderr.contains("s3cret-token"),
            "{t}: token leaked:\n{}",
            out.stderr
        );
        assert!(
            out.stderr.contains("Authorization: <redacted>"),
            "{}",
            out.stderr
        );
    }
    // Right, from the environment.
    let env2 = Env::new().with_env("A2ACLI_BEARER", "s3cret-token");
    env2.run(&["send", "-a", &h, "hi"]).expect(0);
    // A flag beats the environment.
    let out = env2.run(&["send", "-a", &h, "--bearer", "wrong", "hi"]);
    out.expect(4);
    // --insecure warns loudly when credentials are sent.
    let out = env.run(&[
        "card",
        "get",
        "-a",
        &h,
        "--insecure",
        "--bearer",
        "s3cret-token",
    ]);
    out.expect(0);
    assert!(
        out.stderr.contains("warning: --insecure")
            && out.stderr.contains("credentials will be sent"),
        "{}",
        out.stderr
    );
    // The help says credentials on the command line are visible.
    let help = env.run(&["--help"]);
    assert!(help.stdout.contains("process table"));
    assert!(help.stdout.contains("A2ACLI_BEARER"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_goes_where_the_card_says() -> T {
    let mut card = lab_card();
    card.security_schemes.insert(
        "key".into(),
        SecurityScheme {
            scheme: Some(security_scheme::Scheme::ApiKeySecurityScheme(
                agentwire_types::ApiKeySecurityScheme {
                    location: "header".into(),
                    name: "X-Lab-Key".into(),
                    ..Default::default()
                },
            )),
        },
    );
    let rec = Recorder {
        api_key: Some(("x-lab-key".into(), "k-42".into())),
        ..Default::default()
    };
    let (server, rec) = lab_with(card, rec).await;
    let env = Env::new();
    let h = host(&server);
    for t in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        let out = env.run(&[
            "send",
            "-a",
            &h,
            "--transport",
            t,
            "--api-key",
            "k-42",
            "--debug",
            "hi",
        ]);
        out.expect(0);
        assert!(!out.stderr.contains("k-42"), "{}", out.stderr);
    }
    assert!(
        rec.headers()
            .iter()
            .any(|h| h.get("x-lab-key").is_some_and(|v| v == "k-42"))
    );
    let out = env.run(&["send", "-a", &h, "hi", "-o", "json"]);
    out.expect(4);
    assert!(
        out.json()["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("--api-key")
    );
    // Service parameter values never show in --debug either.
    let out = env.run(&[
        "send",
        "-a",
        &h,
        "--api-key",
        "k-42",
        "--svc-param",
        "x-secret:hunter22",
        "--debug",
        "hi",
    ]);
    out.expect(0);
    assert!(!out.stderr.contains("hunter22"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extended_card_uses_a_declared_scheme() -> T {
    let mut card = bearer_card();
    card.capabilities
        .get_or_insert_with(Default::default)
        .extended_agent_card = Some(true);
    let mut extended = card.clone();
    extended.description = "extended view".into();
    let rec = std::sync::Arc::new(Recorder {
        bearer: Some("tok".into()),
        ..Default::default()
    });
    let server = serve(
        agentwire_server::A2aServer::new(card, Lab)
            .authenticator(rec.clone())
            .extended_card(extended),
    )
    .await;
    let env = Env::new();
    let h = host(&server);
    let out = env.run(&["card", "get", "-a", &h, "--extended", "--bearer", "tok"]);
    out.expect(0);
    assert_eq!(out.field("Description").as_deref(), Some("extended view"));
    assert_eq!(out.field("Card").as_deref(), Some("extended"));
    // An API key is not presented: the card declares no scheme for it.
    let out = env.run(&[
        "card",
        "get",
        "-a",
        &h,
        "--extended",
        "--api-key",
        "k",
        "-o",
        "json",
    ]);
    out.expect(4);
    assert!(out.stderr.contains("not sending credentials"));
    assert_eq!(
        out.json()["error"]["code"],
        "A2ACLI_ERR_CREDENTIALS_MISSING"
    );
    // The public card fetch never carries credentials.
    assert!(rec.headers().iter().all(|h| h.get("x-api-key").is_none()));
    // An agent without an extended card: refused from the card.
    let (plain, _) = lab().await;
    let out = env.run(&[
        "card",
        "get",
        "-a",
        &host(&plain),
        "--extended",
        "-o",
        "json",
    ]);
    out.expect(1);
    assert_eq!(out.json()["error"]["code"], "UnsupportedOperationError");
    Ok(())
}

// ----- configuration, help, completion --------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_precedence_and_show() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let global = env.home().join(".config/a2a-cli");
    std::fs::create_dir_all(&global)?;
    std::fs::write(
        global.join(".env"),
        format!(
            "A2ACLI_AGENT_CARD={h}\nA2ACLI_POLL_INTERVAL=5s\nA2ACLI_TIMEOUT=9s\nA2ACLI_VERBOSE=true\n"
        ),
    )?;
    std::fs::write(
        env.cwd().join(".env"),
        "A2ACLI_POLL_INTERVAL=3s\nA2ACLI_TIMEOUT=8s\n",
    )?;
    let env = env.with_env("A2ACLI_TIMEOUT", "7s");
    let out = env.run(&["config", "show", "--verbose", "-o", "json"]);
    out.expect(0);
    let s = &out.json()["settings"];
    assert_eq!(s["A2ACLI_AGENT_CARD"]["value"], h.as_str());
    assert!(
        s["A2ACLI_AGENT_CARD"]["source"]
            .as_str()
            .unwrap()
            .contains(".config/a2a-cli/.env")
    );
    assert_eq!(s["A2ACLI_POLL_INTERVAL"]["value"], "3s");
    assert!(
        s["A2ACLI_POLL_INTERVAL"]["source"]
            .as_str()
            .unwrap()
            .ends_with("work/.env")
    );
    assert_eq!(s["A2ACLI_TIMEOUT"]["value"], "7s");
    assert_eq!(s["A2ACLI_TIMEOUT"]["source"], "environment");
    assert_eq!(s["A2ACLI_VERBOSE"]["source"], "flag");
    assert_eq!(s["A2ACLI_OUTPUT"]["source"], "flag");
    assert_eq!(s["A2ACLI_A2A_VERSION"]["source"], "default");
    // The configured agent is used without a flag.
    env.run(&["send", "hi"]).expect(0);
    // --config replaces the local file (scoping settings per agent).
    std::fs::write(
        env.cwd().join("other.env"),
        "A2ACLI_POLL_INTERVAL=1s\nA2ACLI_BEARER=abc\n",
    )?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            env.cwd().join("other.env"),
            std::fs::Permissions::from_mode(0o644),
        )?;
    }
    let out = env.run(&["config", "show", "--config", "other.env"]);
    out.expect(0);
    assert_text_floor(&out.stdout);
    assert!(
        out.stdout.contains("A2ACLI_POLL_INTERVAL: 1s [file "),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("A2ACLI_BEARER: <redacted> [file "),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("abc"));
    #[cfg(unix)]
    assert!(out.stderr.contains("chmod 600"), "{}", out.stderr);
    // --stream is never taken from the environment.
    let env3 = Env::new().with_env("A2ACLI_STREAM", "true");
    let out = env3.run(&["send", "-a", &h, "-o", "json", "chunks"]);
    out.expect(0);
    assert_eq!(out.jsonl().len(), 1);
    // A configured --async is overridden by an explicit --wait.
    let env4 = Env::new().with_env("A2ACLI_ASYNC", "true");
    let v = env4
        .run(&["send", "-a", &h, "--wait", "-o", "json", "slow 300"])
        .json();
    assert_eq!(v["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let v = env4
        .run(&["send", "-a", &h, "-o", "json", "slow 300"])
        .json();
    assert_ne!(v["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    Ok(())
}

#[test]
fn help_version_and_completion() {
    let env = Env::new();
    let out = env.run(&["--help"]);
    out.expect(0);
    for needle in [
        "card",
        "send",
        "task",
        "config",
        "completion",
        "chat",
        "[default: text]",
        "A2ACLI_OUTPUT",
    ] {
        assert!(
            out.stdout.contains(needle),
            "--help lacks {needle}:\n{}",
            out.stdout
        );
    }
    // The defaults of the client options, on the commands that take them.
    let out = env.run(&["send", "--help"]);
    for needle in [
        "[default: 1.0, and 1.1 on the task streams",
        "[default: 2s]",
        "A2ACLI_TRANSPORT",
    ] {
        assert!(
            out.stdout.contains(needle),
            "send --help lacks {needle}:\n{}",
            out.stdout
        );
    }
    let out = env.run(&["help", "task"]);
    out.expect(0);
    assert!(out.stdout.contains("push-config") && out.stdout.contains("download"));
    let out = env.run(&["send", "--help"]);
    out.expect(0);
    assert!(out.stdout.contains("--media-type") && out.stdout.contains("--async"));
    for flag in ["-v", "--version"] {
        let out = env.run(&[flag]);
        out.expect(0);
        assert!(out.stdout.starts_with("a2a "), "{}", out.stdout);
    }
    // --svc-param is not documented as a credential flag.
    let out = env.run(&["send", "--help"]);
    let line = out
        .stdout
        .lines()
        .skip_while(|l| !l.contains("--svc-param"))
        .take(2)
        .collect::<String>();
    assert!(
        !line.to_ascii_lowercase().contains("credential")
            && !line.to_ascii_lowercase().contains("auth"),
        "{line}"
    );
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let out = env.run(&["completion", shell]);
        out.expect(0);
        assert!(
            out.stdout.contains("a2a") && out.stdout.len() > 200,
            "{shell}"
        );
    }
    env.run(&["completion", "tcsh"]).expect(2);
}

// ----- chat, conformance, demo server -----------------------------------------

// `a2a chat` needs a terminal: its tests drive it in a pseudo-terminal
// (tests/chat.rs).

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_smoke_check_passes_on_the_conformance_agent() -> T {
    let server = serve(agentwire_server::A2aServer::new(
        agentwire_agents::conformance::card(),
        agentwire_agents::conformance::ConformanceAgent::default(),
    ))
    .await;
    let env = Env::new();
    let out = env.run(&["conformance", "-a", &host(&server)]);
    out.expect(0);
    assert_text_floor(&out.stdout);
    assert_eq!(out.field("Failed").as_deref(), Some("0"));
    assert_eq!(out.field("Skipped").as_deref(), Some("0"));
    assert!(
        out.field("Conformance Agent")
            .unwrap_or_default()
            .starts_with("yes")
    );
    // --strict is still accepted.
    env.run(&["conformance", "-a", &host(&server), "--strict"])
        .expect(0);
    let v = env
        .run(&["conformance", "-a", &host(&server), "-o", "json"])
        .json();
    assert_eq!(v["failed"], 0);
    assert_eq!(v["conformanceAgent"], true);
    let bindings: std::collections::HashSet<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["binding"].as_str())
        .collect();
    assert_eq!(bindings.len(), 3);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_skips_tck_checks_elsewhere_and_fails_by_default() -> T {
    let env = Env::new();
    // Another agent: the checks that need the conformance agent are
    // skipped, by name; the others pass; --strict fails on the skipped.
    let (lab, _) = lab().await;
    let out = env.run(&["conformance", "-a", &host(&lab)]);
    out.expect(0);
    assert_text_floor(&out.stdout);
    assert!(
        out.field("Conformance Agent")
            .unwrap_or_default()
            .starts_with("no")
    );
    assert_eq!(out.field("Failed").as_deref(), Some("0"));
    assert!(
        out.stdout.contains(
            "Check: send: direct message\nResult: skipped: needs the TCK conformance agent"
        ),
        "{}",
        out.stdout
    );
    let v = env
        .run(&["conformance", "-a", &host(&lab), "-o", "json"])
        .json();
    assert_eq!(v["conformanceAgent"], false);
    assert_eq!(v["skipped"], 8);
    env.run(&["conformance", "-a", &host(&lab), "--strict"])
        .expect(1);
    // An agent whose card says it is the conformance agent but that does
    // not act on the scenarios: exit 1, with readable expected/got lines.
    let card = lab_card().with_skill(agentwire_types::AgentSkill::new(
        "tck",
        "Conformance scenarios",
        "Claims the TCK scenarios",
        ["tck"],
    ));
    let (fake, _) = lab_with(card, Recorder::default()).await;
    let out = env.run(&["conformance", "-a", &host(&fake)]);
    out.expect(1);
    assert_text_floor(&out.stdout);
    assert!(
        out.stdout
            .contains("Result: FAIL\nExpected: a message (no task)\nGot: a task "),
        "{}",
        out.stdout
    );
    assert!(
        !out.stdout.contains('{') && !out.stdout.contains("Some("),
        "Rust debug output:\n{}",
        out.stdout
    );
    let v = env.run(&["conformance", "-a", &host(&fake), "-o", "json"]);
    v.expect(1);
    let v = v.json();
    let failed: Vec<&Value> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .collect();
    assert!(!failed.is_empty());
    assert!(
        failed
            .iter()
            .all(|c| c["expected"].is_string() && c["got"].is_string())
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_server_serves_a_bundled_agent() -> T {
    use std::io::BufRead;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    let env = Env::new();
    let bin = assert_cmd::cargo::cargo_bin("a2a");
    let mut child = std::process::Command::new(bin)
        .args([
            "demo-server",
            "--agent",
            "echo",
            "--port",
            &port.to_string(),
        ])
        .current_dir(env.cwd())
        .env("HOME", env.home())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().unwrap();
    let first = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .map(|_| line)
    });
    let line = tokio::time::timeout(Duration::from_secs(20), first).await???;
    assert!(line.contains("Serving Echo Agent"), "{line}");
    let out = env.run(&["send", "-a", &format!("127.0.0.1:{port}"), "hello demo"]);
    let _ = child.kill();
    let _ = child.wait();
    out.expect(0);
    assert!(out.stdout.contains("Text:\nhello demo"), "{}", out.stdout);
    Ok(())
}
