//! The README's `a2a` commands do their job against the bundled echo agent
//! served by `a2a serve --agent echo` (the real binary, on a free port,
//! with its default SQLite store in a temporary directory): the multi-part
//! send, `--async` with a long job, `task get --wait`, `task list --status
//! working`, `task subscribe`, `task cancel`, the push-config operations
//! (and a notification reaching `a2a webhook`); and `card get --extended
//! --bearer` against the extended-card example agent (no bundled agent has
//! an extended card).

mod common;

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Env, Out};
use serde_json::Value;

#[allow(dead_code)]
#[path = "../../agentwire-server/examples/extended_card.rs"]
mod extended_card;

/// `a2a serve --agent echo` on a free port; killed when dropped.
struct Served {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_echo(env: &Env) -> Served {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("a2a"))
        .args(["serve", "--agent", "echo", "--port", "0"])
        .env("HOME", env.home())
        .env_remove("A2A_STORE")
        .env_remove("A2A_PORT")
        .env_remove("A2A_HOST")
        .current_dir(env.cwd())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a2a serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    let read = reader.read_line(&mut line);
    // Keep reading (and discarding) what the server prints.
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .map(str::to_owned);
    let Some(url) = url.filter(|_| read.is_ok()) else {
        let _ = child.kill();
        panic!("a2a serve did not start: {line:?}");
    };
    Served { child, url }
}

/// The task of a `send` / `task` answer in JSON (`{"task": ...}` or the
/// task itself).
fn task_of(v: &Value) -> &Value {
    if v["task"].is_object() { &v["task"] } else { v }
}

fn state(v: &Value) -> &str {
    task_of(v)["status"]["state"].as_str().unwrap_or_default()
}

fn id(v: &Value) -> String {
    task_of(v)["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task id in {v}"))
        .to_owned()
}

/// `send --async TEXT`: the task, not finished yet.
fn start_async(env: &Env, a: &str, text: &str) -> Value {
    let out = env.run(&["send", "-a", a, "--async", text, "-o", "json"]);
    out.expect(0);
    let v = out.json();
    assert!(
        matches!(state(&v), "TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING"),
        "--async returns at once: {v}"
    );
    v
}

/// Polls `task get` until the task is working (the agent has started).
fn wait_working(env: &Env, a: &str, task: &str) {
    let start = Instant::now();
    loop {
        let out = env.run(&["task", "get", "-a", a, task, "-o", "json"]);
        out.expect(0);
        let s = state(&out.json()).to_owned();
        if s == "TASK_STATE_WORKING" {
            return;
        }
        assert_eq!(s, "TASK_STATE_SUBMITTED", "{}", out.stdout);
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "task {task} never started working"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

fn wait_listening(port: u16) {
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "nothing listened on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_card_declares_the_skills_and_capabilities_the_examples_use() {
    let env = Env::new();
    let served = serve_echo(&env);
    let out = env.run(&["card", "get", "-a", &served.url, "-o", "json"]);
    out.expect(0);
    let card = out.json();
    assert_eq!(card["capabilities"]["streaming"], true, "{card}");
    assert_eq!(card["capabilities"]["pushNotifications"], true, "{card}");
    let modes: Vec<&str> = card["defaultInputModes"]
        .as_array()
        .expect("input modes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(modes.contains(&"*/*"), "{modes:?}");
    let skills: Vec<&str> = card["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(skills, ["echo", "long-job", "parts"]);
    let long_job = &card["skills"][1];
    assert!(
        long_job["examples"]
            .as_array()
            .is_some_and(|e| e.iter().any(|x| x == "long job")),
        "{long_job}"
    );
}

#[test]
fn a_multi_part_send_is_acknowledged_part_by_part() {
    let env = Env::new();
    let served = serve_echo(&env);
    let pdf: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(env.cwd().join("report.pdf"), &pdf).expect("write report.pdf");
    let params = r#"{"pages": [1, 2], "style": "short"}"#;
    let readme = [
        "send",
        "-a",
        &served.url,
        "--text",
        "summarise",
        "--file",
        "report.pdf",
        "--media-type",
        "application/pdf",
        "--data",
        "-",
    ];
    // The README's command as it is (text output)...
    let out = env.run_stdin(&readme, params);
    out.expect(0);
    assert_eq!(
        out.field("State").as_deref(),
        Some("COMPLETED"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("\"filename\": \"report.pdf\""),
        "{}",
        out.stdout
    );
    // ...and in JSON, checked part by part.
    let mut json_args = readme.to_vec();
    json_args.extend(["-o", "json"]);
    let out = env.run_stdin(&json_args, params);
    out.expect(0);
    let v = out.json();
    let task = task_of(&v);
    assert_eq!(state(&v), "TASK_STATE_COMPLETED", "{v}");
    let artifacts = task["artifacts"].as_array().expect("artifacts");
    let names: Vec<&str> = artifacts
        .iter()
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert_eq!(names, ["echo", "parts", "data"], "{v}");
    assert_eq!(artifacts[0]["parts"][0]["text"], "summarise");
    let described = &artifacts[1]["parts"][0]["data"];
    assert_eq!(described[0]["kind"], "text");
    assert_eq!(described[1]["kind"], "file");
    assert_eq!(described[1]["filename"], "report.pdf");
    assert_eq!(described[1]["mediaType"], "application/pdf");
    assert_eq!(described[1]["size"], 3000);
    assert_eq!(described[2]["kind"], "data");
    let echoed = &artifacts[2]["parts"][0]["data"];
    assert_eq!(
        *echoed,
        serde_json::from_str::<Value>(params).expect("params JSON")
    );
}

#[test]
fn a_long_job_is_listed_pushed_and_canceled() {
    let env = Env::new();
    let served = serve_echo(&env);
    let a = served.url.as_str();

    // a2a send -a $A --async "long job"
    let started = start_async(&env, a, "long job");
    let task = id(&started);
    let context = task_of(&started)["contextId"]
        .as_str()
        .expect("a context id")
        .to_owned();
    wait_working(&env, a, &task);

    // a2a task list -a $A --context-id <contextId> --status working
    let out = env.run(&[
        "task",
        "list",
        "-a",
        a,
        "--context-id",
        &context,
        "--status",
        "working",
        "-o",
        "json",
    ]);
    out.expect(0);
    let listed = out.json();
    let ids: Vec<&str> = listed["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(ids, [task.as_str()], "{listed}");

    // A webhook receiving this task's notifications until its final one.
    let port = free_port();
    let mut webhook = env.cmd();
    webhook.args([
        "webhook",
        "--port",
        &port.to_string(),
        "--token",
        "t",
        "-a",
        a,
        "--task",
        &task,
        "--until-final",
        "--timeout",
        "40s",
        "-o",
        "json",
    ]);
    let receiving = std::thread::spawn(move || webhook.output().expect("run a2a webhook"));
    wait_listening(port);

    // a2a task push-config create -a $A <taskId> --url https://hooks.example.com/a2a --token t
    let create = |url: &str| -> Value {
        let out = env.run(&[
            "task",
            "push-config",
            "create",
            "-a",
            a,
            &task,
            "--url",
            url,
            "--token",
            "t",
            "-o",
            "json",
        ]);
        out.expect(0);
        out.json()
    };
    let public = create("https://hooks.example.com/a2a");
    assert_eq!(public["taskId"], task.as_str(), "{public}");
    assert_eq!(public["url"], "https://hooks.example.com/a2a");
    let public_id = public["id"].as_str().expect("a config id").to_owned();
    let local = create(&format!("http://127.0.0.1:{port}/"));
    let local_id = local["id"].as_str().expect("a config id").to_owned();

    // a2a task push-config get|list|delete -a $A <taskId> [<configId>]
    let out = env.run(&[
        "task",
        "push-config",
        "get",
        "-a",
        a,
        &task,
        &public_id,
        "-o",
        "json",
    ]);
    out.expect(0);
    assert_eq!(out.json()["url"], "https://hooks.example.com/a2a");
    let list = |env: &Env| -> Vec<String> {
        let out = env.run(&["task", "push-config", "list", "-a", a, &task, "-o", "json"]);
        out.expect(0);
        let v = out.json();
        v["configs"]
            .as_array()
            .unwrap_or_else(|| panic!("configs in {v}"))
            .iter()
            .filter_map(|c| c["id"].as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(list(&env), [public_id.clone(), local_id.clone()]);
    let out = env.run(&["task", "push-config", "delete", "-a", a, &task, &public_id]);
    out.expect(0);
    assert_eq!(list(&env), [local_id]);

    // a2a task cancel -a $A <taskId>
    let out = env.run(&["task", "cancel", "-a", a, &task, "-o", "json"]);
    out.expect(0);
    assert_eq!(state(&out.json()), "TASK_STATE_CANCELED", "{}", out.stdout);
    let out = env.run(&["task", "get", "-a", a, &task, "-o", "json"]);
    out.expect(0);
    let after = out.json();
    assert_eq!(state(&after), "TASK_STATE_CANCELED");
    assert!(
        task_of(&after)["artifacts"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "a canceled long job produces no result: {after}"
    );

    // The webhook got the task's notifications, verified, up to the
    // cancellation.
    let o = receiving.join().expect("webhook thread");
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let last = events
        .last()
        .unwrap_or_else(|| panic!("no notification: {stderr}"));
    assert_eq!(last["statusUpdate"]["taskId"], task.as_str(), "{stdout}");
    assert_eq!(
        last["statusUpdate"]["status"]["state"], "TASK_STATE_CANCELED",
        "{stdout}"
    );
}

#[test]
fn task_get_wait_and_subscribe_follow_a_long_job_to_its_end() {
    let env = Env::new();
    let served = serve_echo(&env);
    let a = served.url.clone();

    // a2a task subscribe -a $A <taskId> [--stream], started at once.
    let followed = id(&start_async(&env, &a, "slow 8"));
    let mut subscribe = env.cmd();
    subscribe.args([
        "task",
        "subscribe",
        "-a",
        &a,
        &followed,
        "--stream",
        "-o",
        "json",
    ]);
    let subscribing = std::thread::spawn(move || subscribe.output().expect("run a2a"));

    // a2a task get -a $A --wait <taskId> --poll-interval 1s --timeout 2m
    let waited = id(&start_async(&env, &a, "slow 2"));
    let out = env.run(&[
        "task",
        "get",
        "-a",
        &a,
        "--wait",
        &waited,
        "--poll-interval",
        "1s",
        "--timeout",
        "2m",
        "-o",
        "json",
    ]);
    out.expect(0);
    let done = out.json();
    assert_eq!(state(&done), "TASK_STATE_COMPLETED", "{done}");
    assert_eq!(
        task_of(&done)["artifacts"][0]["parts"][0]["text"],
        "done after 2 s in 2 steps: slow 2"
    );

    let o = subscribing.join().expect("subscribe thread");
    let out = Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    };
    out.expect(0);
    let events = out.jsonl();
    let progress = events
        .iter()
        .filter(|e| {
            e["statusUpdate"]["status"]["message"]["parts"][0]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("step "))
        })
        .count();
    assert!(progress >= 1, "progress while following: {}", out.stdout);
    assert!(
        events
            .iter()
            .any(|e| e["artifactUpdate"]["artifact"]["name"] == "result"),
        "{}",
        out.stdout
    );
    let last = events.last().expect("events");
    assert_eq!(
        last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_extended_card_with_a_bearer_token() {
    let agent = common::serve(extended_card::server("s3cret")).await;
    let env = Env::new();
    let a = common::host(&agent);
    // a2a card get -a $B --extended --bearer $TOKEN
    let out = env.run(&["card", "get", "-a", &a, "--extended", "--bearer", "s3cret"]);
    out.expect(0);
    assert_eq!(
        out.field("Card").as_deref(),
        Some("extended"),
        "{}",
        out.stdout
    );
    // The extended card is callable: it has the public card's interfaces.
    let selected = out.field("Selected Interface").unwrap_or_default();
    assert!(selected.starts_with("JSONRPC http://"), "{}", out.stdout);
    let out = env.run(&[
        "card",
        "get",
        "-a",
        &a,
        "--extended",
        "--bearer",
        "s3cret",
        "-o",
        "json",
    ]);
    out.expect(0);
    let skills = out.json()["skills"].as_array().map_or(0, Vec::len);
    assert_eq!(skills, 2, "{}", out.stdout);
    // A wrong token: an authentication failure (exit 4).
    let out = env.run(&["card", "get", "-a", &a, "--extended", "--bearer", "nope"]);
    out.expect(4);
}
