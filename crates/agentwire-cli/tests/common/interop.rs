//! The flows the interop tests run against another SDK's server with our
//! client (the `a2a` command): send (task and message), get, errors,
//! stream and chunks, cancel and follow-up, resubscribe, push config CRUD.
//! The servers implement the conformance behaviour keyed on the messageId
//! prefix (`tck-complete-task`, `tck-input-required`...).

use super::{Env, Out};
use serde_json::Value;

pub fn id(prefix: &str) -> String {
    format!("{prefix}-{}", agentwire_types::new_id())
}

/// One server (its URL), one binding, and whether 0.3 is allowed.
pub struct Peer<'a> {
    pub env: &'a Env,
    pub url: &'a str,
    pub binding: &'a str,
    pub v03: bool,
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

    pub fn run(&self, args: &[&str]) -> Out {
        self.env.run(&self.args(args))
    }

    pub fn ok(&self, args: &[&str]) -> Value {
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

fn error_code(out: &Out) -> String {
    out.json()["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

// ------------------------------------------------------------ the flows

pub fn card(env: &Env, url: &str, v03: bool, bindings: &[&str]) {
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

pub fn send_get_and_errors(p: &Peer) {
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

pub fn stream_and_chunks(p: &Peer) {
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

pub fn cancel_and_follow_up(p: &Peer) {
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

pub fn resubscribe(p: &Peer) {
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
    // A completed task cannot be subscribed to (1.0). The 0.3 SDK servers
    // answer such a resubscription with the task instead of an error (a
    // limit of @a2a-js/sdk 0.3.14, interop/js/README.md; a2a-sdk 0.3 alike):
    // not checked there.
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

/// Creates a push config on an input-required task and reads it back: the
/// task id and the config id.
pub fn push_config_create_and_get(p: &Peer) -> (String, String) {
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
    (task_id, config_id)
}

pub fn push_config_crud(p: &Peer) {
    let b = p.binding;
    let (task_id, config_id) = push_config_create_and_get(p);
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

pub fn every_flow(env: &Env, url: &str, binding: &str, v03: bool) {
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
