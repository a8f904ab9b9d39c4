//! Interop: our client (the `a2a` command, hence `agentwire-client`) against
//! the official JavaScript SDK's servers (npm `@a2a-js/sdk`):
//!
//! - the 1.x server (`interop/js/v1/reference_server.mjs`, protocol 1.0),
//!   named by `A2A_INTEROP_JS_URL`, over JSON-RPC, HTTP+JSON and gRPC;
//! - the 0.3 server (`interop/js/v03/reference_server.mjs`, protocol 0.3),
//!   named by `A2A_INTEROP_JS_V03_URL`, with `--allow-v03`, over JSON-RPC
//!   and HTTP+JSON, and over gRPC when our client speaks 0.3 gRPC (the test
//!   says so when it does not).
//!
//! Both servers implement the conformance behaviour keyed on the messageId
//! prefix. `bash interop/js/client_interop.sh` starts them and runs these
//! tests (CI does). Without the variables each test says it is skipped and
//! passes, so `cargo test` stays green on a machine without node.

mod common;

use common::Env;
use serde_json::Value;

const V1_BINDINGS: [&str; 3] = ["JSONRPC", "HTTP+JSON", "GRPC"];
const V03_BINDINGS: [&str; 2] = ["JSONRPC", "HTTP+JSON"];

/// The server's URL from `var`, or `None` after saying the test is skipped.
fn target(var: &str, test: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(u) if !u.trim().is_empty() => Some(u),
        _ => {
            eprintln!(
                "skipped {test}: it needs the JavaScript SDK's server; set {var} to its URL, \
                 or run `bash interop/js/client_interop.sh`, which starts the servers and runs these tests"
            );
            None
        }
    }
}

fn id(prefix: &str) -> String {
    format!("{prefix}-{}", agentwire_types::new_id())
}

/// One server (its URL), one binding, and whether 0.3 is allowed.
struct Peer<'a> {
    env: &'a Env,
    url: &'a str,
    binding: &'a str,
    v03: bool,
}

impl Peer<'_> {
    fn args<'b>(&'b self, args: &[&'b str]) -> Vec<&'b str> {
        let mut a = args.to_vec();
        a.extend(["-a", self.url, "--transport", self.binding, "-o", "json"]);
        if self.v03 {
            a.push("--allow-v03");
        }
        a
    }

    fn run(&self, args: &[&str]) -> common::Out {
        self.env.run(&self.args(args))
    }

    fn ok(&self, args: &[&str]) -> Value {
        let out = self.run(args);
        out.expect(0);
        out.json()
    }

    fn send_task(&self, prefix: &str) -> Value {
        let v = self.ok(&["send", "--message-id", &id(prefix), "hello"]);
        assert!(
            v.get("task").is_some(),
            "{}: expected a task, got {v}",
            self.binding
        );
        v["task"].clone()
    }
}

fn state_of(ev: &Value) -> Option<&str> {
    ev.pointer("/statusUpdate/status/state")
        .or_else(|| ev.pointer("/task/status/state"))
        .or_else(|| ev.pointer("/status/state"))
        .and_then(Value::as_str)
}

fn error_code(out: &common::Out) -> String {
    out.json()["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

// ------------------------------------------------------------ the flows

fn card(env: &Env, url: &str, v03: bool, bindings: &[&str]) {
    let mut args = vec!["card", "get", "--validate", "-a", url];
    if v03 {
        args.push("--allow-v03");
    }
    let out = env.run(&args);
    out.expect(0);
    assert_eq!(out.field("Valid").as_deref(), Some("yes"), "{}", out.stdout);
    args.extend(["-o", "json"]);
    let card = env.run(&args).json();
    let listed = card.to_string();
    for b in bindings {
        assert!(
            listed.contains(&format!("\"{b}\"")),
            "{b} missing from the card: {listed}"
        );
    }
}

fn send_get_and_errors(p: &Peer) {
    let b = p.binding;
    let t = p.send_task("tck-complete-task");
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{b}: {t}");
    assert!(t.to_string().contains("Hello from TCK"), "{b}: {t}");
    let task_id = t["id"].as_str().unwrap_or_default().to_owned();
    let t = p.send_task("tck-artifact-text");
    assert_eq!(
        t["artifacts"][0]["parts"][0]["text"], "Generated text content",
        "{b}: {t}"
    );
    let v = p.ok(&["send", "--message-id", &id("tck-message-response"), "msg"]);
    assert!(
        v.to_string().contains("Direct message response") && v.get("message").is_some(),
        "{b}: {v}"
    );
    let g = p.ok(&["task", "get", &task_id]);
    assert_eq!(g["id"], task_id.as_str(), "{b}");
    assert_eq!(g["status"]["state"], "TASK_STATE_COMPLETED", "{b}");
    // Errors keep their A2A names.
    let out = p.run(&["task", "get", &id("no-such-task")]);
    out.expect(1);
    assert_eq!(error_code(&out), "TaskNotFoundError", "{b}: {}", out.stdout);
    let out = p.run(&["task", "cancel", &id("no-such-task")]);
    out.expect(1);
    assert_eq!(error_code(&out), "TaskNotFoundError", "{b}: {}", out.stdout);
    let out = p.run(&["task", "cancel", &task_id]);
    out.expect(1);
    assert_eq!(
        error_code(&out),
        "TaskNotCancelableError",
        "{b}: {}",
        out.stdout
    );
}

fn stream_and_chunks(p: &Peer) {
    let b = p.binding;
    let out = p.run(&[
        "send",
        "--stream",
        "--message-id",
        &id("tck-stream-001"),
        "go",
    ]);
    out.expect(0);
    let events = out.jsonl();
    assert!(events[0].get("task").is_some(), "{b}: {}", out.stdout);
    assert!(
        out.stdout.contains("Stream hello from TCK"),
        "{b}: {}",
        out.stdout
    );
    assert_eq!(
        events.last().and_then(state_of),
        Some("TASK_STATE_COMPLETED"),
        "{b}"
    );
    // The blocking default assembles chunks into one artifact.
    let t = p.send_task("tck-stream-artifact-chunked");
    let text: String = t["artifacts"][0]["parts"]
        .as_array()
        .map(|ps| ps.iter().filter_map(|p| p["text"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(text, "chunk-1 chunk-2", "{b}: {t}");
}

fn cancel_and_follow_up(p: &Peer) {
    let b = p.binding;
    let t = p.send_task("tck-input-required");
    assert_eq!(
        t["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{b}: {t}"
    );
    let task_id = t["id"].as_str().unwrap_or_default().to_owned();
    let v = p.ok(&["send", "--task-id", &task_id, "here is more"]);
    assert_eq!(v["task"]["id"], task_id.as_str(), "{b}");
    assert_eq!(
        v["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{b}: {v}"
    );
    let t = p.send_task("tck-input-required");
    let task_id = t["id"].as_str().unwrap_or_default().to_owned();
    let c = p.ok(&["task", "cancel", &task_id]);
    assert_eq!(c["status"]["state"], "TASK_STATE_CANCELED", "{b}: {c}");
}

fn resubscribe(p: &Peer) {
    let b = p.binding;
    let t = p.send_task("tck-input-required");
    let task_id = t["id"].as_str().unwrap_or_default().to_owned();
    // `a2a task subscribe` follows a task until it is terminal or
    // interrupted: on an input-required task it shows the task and stops.
    let out = p.run(&[
        "task",
        "subscribe",
        &task_id,
        "--stream",
        "--timeout",
        "30s",
    ]);
    out.expect(0);
    let events = out.jsonl();
    assert_eq!(
        events.first().and_then(state_of),
        Some("TASK_STATE_INPUT_REQUIRED"),
        "{b}: {events:?}"
    );
    let c = p.ok(&["task", "cancel", &task_id]);
    assert_eq!(c["status"]["state"], "TASK_STATE_CANCELED", "{b}: {c}");
    // A completed task cannot be subscribed to (1.0). The 0.3 SDK server
    // answers such a resubscription with the task instead of an error (a
    // limit of @a2a-js/sdk 0.3.14, interop/js/README.md): not checked there.
    if p.v03 {
        eprintln!(
            "skipped for {b} (0.3): subscribe to a completed task, the SDK server answers the task"
        );
        return;
    }
    let done = p.send_task("tck-complete-task");
    let out = p.run(&[
        "task",
        "subscribe",
        done["id"].as_str().unwrap_or_default(),
        "--stream",
    ]);
    assert_ne!(out.code, 0, "{b}: {}", out.stdout);
}

fn push_config_crud(p: &Peer) {
    let b = p.binding;
    let t = p.send_task("tck-input-required");
    let task_id = t["id"].as_str().unwrap_or_default().to_owned();
    let config_id = id("cfg");
    let hook = "http://127.0.0.1:9/a2a-interop-hook";
    let c = p.ok(&[
        "task",
        "push-config",
        "create",
        &task_id,
        "--push-url",
        hook,
        "--push-token",
        "interop-token",
        "--config-id",
        &config_id,
    ]);
    assert_eq!(c["taskId"], task_id.as_str(), "{b}: {c}");
    assert_eq!(c["url"], hook, "{b}: {c}");
    let g = p.ok(&["task", "push-config", "get", &task_id, &config_id]);
    assert_eq!(g["id"], config_id.as_str(), "{b}: {g}");
    assert_eq!(g["url"], hook, "{b}: {g}");
    let l = p.ok(&["task", "push-config", "list", &task_id]);
    let ids: Vec<&str> = l["configs"]
        .as_array()
        .map(|cs| cs.iter().filter_map(|c| c["id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(ids, [config_id.as_str()], "{b}: {l}");
    p.run(&["task", "push-config", "delete", &task_id, &config_id])
        .expect(0);
    let l = p.ok(&["task", "push-config", "list", &task_id]);
    assert_eq!(l["configs"].as_array().map_or(0, Vec::len), 0, "{b}: {l}");
    p.ok(&["task", "cancel", &task_id]);
}

fn every_flow(env: &Env, url: &str, binding: &str, v03: bool) {
    let p = Peer {
        env,
        url,
        binding,
        v03,
    };
    send_get_and_errors(&p);
    stream_and_chunks(&p);
    cancel_and_follow_up(&p);
    resubscribe(&p);
    push_config_crud(&p);
}

// ------------------------------------------------------------ 1.x server

#[test]
fn js_v1_server_card() {
    let Some(url) = target("A2A_INTEROP_JS_URL", "js_v1_server_card") else {
        return;
    };
    card(&Env::new(), &url, false, &V1_BINDINGS);
}

#[test]
fn js_v1_server_over_jsonrpc() {
    let Some(url) = target("A2A_INTEROP_JS_URL", "js_v1_server_over_jsonrpc") else {
        return;
    };
    every_flow(&Env::new(), &url, "JSONRPC", false);
}

#[test]
fn js_v1_server_over_http_json() {
    let Some(url) = target("A2A_INTEROP_JS_URL", "js_v1_server_over_http_json") else {
        return;
    };
    every_flow(&Env::new(), &url, "HTTP+JSON", false);
}

#[test]
fn js_v1_server_over_grpc() {
    let Some(url) = target("A2A_INTEROP_JS_URL", "js_v1_server_over_grpc") else {
        return;
    };
    every_flow(&Env::new(), &url, "GRPC", false);
}

// ------------------------------------------------------------ 0.3 server

#[test]
fn js_v03_server_card() {
    let Some(url) = target("A2A_INTEROP_JS_V03_URL", "js_v03_server_card") else {
        return;
    };
    card(&Env::new(), &url, true, &V1_BINDINGS);
}

#[test]
fn js_v03_server_is_refused_without_allow_v03() {
    let Some(url) = target(
        "A2A_INTEROP_JS_V03_URL",
        "js_v03_server_is_refused_without_allow_v03",
    ) else {
        return;
    };
    let env = Env::new();
    let out = env.run(&[
        "send",
        "-a",
        &url,
        "-o",
        "json",
        "--message-id",
        &id("tck-complete-task"),
        "x",
    ]);
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(
        format!("{}{}", out.stdout, out.stderr).contains("--allow-v03"),
        "the refusal names --allow-v03: {} {}",
        out.stdout,
        out.stderr
    );
}

#[test]
fn js_v03_server_over_jsonrpc() {
    let Some(url) = target("A2A_INTEROP_JS_V03_URL", "js_v03_server_over_jsonrpc") else {
        return;
    };
    every_flow(&Env::new(), &url, V03_BINDINGS[0], true);
}

#[test]
fn js_v03_server_over_http_json() {
    let Some(url) = target("A2A_INTEROP_JS_V03_URL", "js_v03_server_over_http_json") else {
        return;
    };
    every_flow(&Env::new(), &url, V03_BINDINGS[1], true);
}

#[test]
fn js_v03_server_over_grpc() {
    let Some(url) = target("A2A_INTEROP_JS_V03_URL", "js_v03_server_over_grpc") else {
        return;
    };
    let env = Env::new();
    // Our client's 0.3 gRPC transport may not be there yet: say so and stop.
    let probe = env.run(&[
        "send",
        "-a",
        &url,
        "--transport",
        "GRPC",
        "--allow-v03",
        "-o",
        "json",
        "--message-id",
        &id("tck-complete-task"),
        "probe",
    ]);
    if probe.code != 0 {
        eprintln!(
            "skipped js_v03_server_over_grpc: our client does not call this 0.3 agent over gRPC: {}{}",
            probe.stdout.trim(),
            probe.stderr.trim()
        );
        return;
    }
    every_flow(&env, &url, "GRPC", true);
}
