//! Task generations (A2A v1.1 draft) from the command line, against a real
//! `a2a serve --agent conformance` on loopback, on every binding:
//! `a2a task wait` answered on change (the long-poll is held until the task
//! moves) and on timeout (exit 5); two racing `a2a send --if-generation`
//! with the same generation: exactly one wins, the other exits 1 with
//! `TaskGenerationMismatchError`; the ledger records the generation
//! (`a2a ledger tasks -o json`).

mod common;

use std::time::{Duration, Instant};

use common::{Env, Out, Serving};
use serde_json::Value;

const BINDINGS: [&str; 3] = ["JSONRPC", "HTTP+JSON", "GRPC"];

/// The generation of a task in `-o json` output (ProtoJSON: a string).
fn generation(task: &Value) -> i64 {
    match task.get("generation") {
        Some(Value::String(s)) => s.parse().expect("a number"),
        Some(Value::Number(n)) => n.as_i64().expect("an integer"),
        other => panic!("no generation in {task}: {other:?}"),
    }
}

fn state(task: &Value) -> &str {
    task.pointer("/status/state")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// A task of the conformance agent's multi-turn scenario, waiting for
/// input: its id and generation (read with `a2a task wait`, which asks
/// for A2A 1.1; without `--after` it answers at once for a task waiting
/// for input).
fn waiting_task(env: &Env, agent: &str, b: &str, ledger: &str) -> (String, i64) {
    let out = env.run(&[
        "send",
        "-a",
        agent,
        "--transport",
        b,
        "--ledger",
        ledger,
        "tck-multi-turn start",
        "-o",
        "json",
    ]);
    out.expect(0);
    let sent = out.json();
    let id = sent
        .pointer("/task/id")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("[{b}] no task: {sent}"))
        .to_owned();
    let out = env.run(&[
        "task",
        "wait",
        &id,
        "-a",
        agent,
        "--transport",
        b,
        "--ledger",
        ledger,
        "--timeout",
        "30s",
        "-o",
        "json",
    ]);
    out.expect(0);
    let task = out.json();
    assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED", "[{b}] {task}");
    (id, generation(&task))
}

fn run_binding(env: &Env, agent: &str, b: &str) {
    let ledger_path = env
        .home()
        .join(format!("ledger-{}.db", b.replace('+', "-")));
    let ledger = ledger_path.to_str().expect("UTF-8");

    // 1. Long-poll answered on change.
    let (id, g) = waiting_task(env, agent, b, ledger);
    let after = g.to_string();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            env.run(&[
                "task",
                "wait",
                &id,
                "--after",
                &after,
                "-a",
                agent,
                "--transport",
                b,
                "--ledger",
                ledger,
                "--timeout",
                "60s",
                "-o",
                "json",
            ])
        });
        // Held while nothing changes.
        std::thread::sleep(Duration::from_millis(700));
        assert!(
            !waiter.is_finished(),
            "[{b}] task wait answered before any change"
        );
        env.run(&[
            "send",
            "-a",
            agent,
            "--transport",
            b,
            "--ledger",
            ledger,
            "--task-id",
            &id,
            "done",
            "-o",
            "json",
        ])
        .expect(0);
        let out = waiter.join().expect("the waiter");
        out.expect(0);
        let task = out.json();
        assert!(generation(&task) > g, "[{b}] {task}");
    });

    // The ledger recorded the generation the wait read.
    let out = env.run(&["ledger", "tasks", "--ledger", ledger, "-o", "json"]);
    out.expect(0);
    let doc = out.json();
    let rec = doc["tasks"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["taskId"] == id.as_str()))
        .unwrap_or_else(|| panic!("[{b}] task not in the ledger: {doc}"));
    assert!(rec["generation"].as_i64().unwrap_or(0) > g, "[{b}] {rec}");

    // 2. Long-poll answered on timeout: exit 5.
    let (id, g) = waiting_task(env, agent, b, ledger);
    let started = Instant::now();
    let out = env.run(&[
        "task",
        "wait",
        &id,
        "--after",
        &g.to_string(),
        "-a",
        agent,
        "--transport",
        b,
        "--ledger",
        ledger,
        "--timeout",
        "1s",
    ]);
    out.expect(5);
    assert!(started.elapsed() >= Duration::from_millis(900), "[{b}]");

    // 3. Two racing writers with the same generation: exactly one wins.
    let gen_arg = g.to_string();
    let send = |text: &str| -> Out {
        env.run(&[
            "send",
            "-a",
            agent,
            "--transport",
            b,
            "--ledger",
            ledger,
            "--task-id",
            &id,
            "--if-generation",
            &gen_arg,
            text,
            "-o",
            "json",
        ])
    };
    let (one, two) = std::thread::scope(|s| {
        let a = s.spawn(|| send("more"));
        let z = s.spawn(|| send("done"));
        (a.join().expect("a"), z.join().expect("z"))
    });
    let mut codes = [one.code, two.code];
    codes.sort_unstable();
    assert_eq!(codes, [0, 1], "[{b}] {one:?} {two:?}");
    let lost = if one.code == 1 { &one } else { &two };
    let all = format!("{}{}", lost.stdout, lost.stderr);
    assert!(all.contains("TaskGenerationMismatchError"), "[{b}] {all}");
    assert!(all.contains("-32010"), "[{b}] {all}");
}

#[test]
fn task_wait_and_if_generation_on_every_binding() {
    let env = Env::new();
    let serving = Serving::start(&env, &["--agent", "conformance"]);
    let agent = serving.base();
    for b in BINDINGS {
        run_binding(&env, &agent, b);
    }
}

#[test]
fn if_generation_needs_a_task() {
    let env = Env::new();
    let out = env.run(&[
        "send",
        "-a",
        "http://127.0.0.1:9",
        "--if-generation",
        "3",
        "hello",
    ]);
    out.expect(2);
    assert!(out.stderr.contains("--task-id"), "{}", out.stderr);
}

#[test]
fn help_texts() {
    let env = Env::new();
    let out = env.run(&["task", "wait", "--help"]);
    out.expect(0);
    for flag in ["--after", "--timeout", "--poll-interval"] {
        assert!(out.stdout.contains(flag), "{flag}: {}", out.stdout);
    }
    let out = env.run(&["send", "--help"]);
    out.expect(0);
    assert!(out.stdout.contains("--if-generation"), "{}", out.stdout);
}
