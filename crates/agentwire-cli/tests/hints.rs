//! The hints of the `a2a` command: each names a complete command, with the
//! `-a` of the agent the caller used, that works when pasted; and a hint
//! says what is really wrong (a missing push config is not a missing task,
//! a finished task has nothing to subscribe to).

mod common;

use agentwire_server::{A2aServer, PushConfig};
use common::*;
use serde_json::Value;

type T = Result<(), Box<dyn std::error::Error>>;

/// The `a2a ...` commands quoted in a hint (between backticks), as words.
fn commands(hint: &str) -> Vec<Vec<String>> {
    hint.split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|c| c.strip_prefix("a2a "))
        .map(|c| c.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// The error envelope of a run in `-o json`.
fn error_of(out: &Out) -> Value {
    out.json()["error"].clone()
}

/// Runs each command of a hint (with -o json) and returns their outputs.
fn paste(env: &Env, hint: &str) -> Vec<Out> {
    let cmds = commands(hint);
    assert!(!cmds.is_empty(), "no command in the hint: {hint}");
    cmds.iter()
        .map(|words| {
            let mut args: Vec<&str> = words.iter().map(String::as_str).collect();
            args.extend(["-o", "json"]);
            env.run(&args)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hints_are_commands_that_work_when_pasted() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    // A wait that times out names the task to follow, at this agent.
    let out = env.run(&[
        "send",
        "-a",
        &h,
        "--timeout",
        "300ms",
        "-o",
        "json",
        "slow 1500",
    ]);
    out.expect(5);
    let hint = error_of(&out)["hint"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        hint.contains(&format!("a2a task get -a {h} --wait ")),
        "{hint}"
    );
    let pasted = paste(&env, &hint);
    pasted[0].expect(0);
    assert_eq!(
        pasted[0].json()["status"]["state"],
        "TASK_STATE_COMPLETED",
        "{hint}"
    );
    // The other one (task subscribe) is a valid command too; the task is
    // finished by now, which it reports.
    for p in &pasted[1..] {
        assert_ne!(p.code, 2, "{hint}: {}", p.stderr);
    }
    // An unknown task points at the task list of this agent.
    let out = env.run(&["task", "get", "-a", &h, "no-such-task", "-o", "json"]);
    out.expect(1);
    let hint = error_of(&out)["hint"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for pasted in paste(&env, &hint) {
        pasted.expect(0);
        assert!(pasted.json()["tasks"].is_array(), "{hint}");
    }
    // An unreachable agent: the hint checks the same address.
    let out = env.run(&["task", "list", "-a", "127.0.0.1:9", "-o", "json"]);
    out.expect(3);
    let hint = error_of(&out)["hint"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        commands(&hint),
        vec![vec!["card", "get", "-a", "127.0.0.1:9"]],
        "{hint}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribing_to_a_finished_task_says_it_is_finished() -> T {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let v = env.run(&["send", "-a", &h, "-o", "json", "hello"]).json();
    let id = v["task"]["id"].as_str().unwrap_or_default().to_owned();
    let out = env.run(&["task", "subscribe", "-a", &h, &id, "-o", "json"]);
    out.expect(1);
    let e = error_of(&out);
    let message = e["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("already finished") && message.contains("COMPLETED"),
        "{e}"
    );
    let hint = e["hint"].as_str().unwrap_or_default().to_owned();
    assert!(
        hint.contains(&format!("a2a task get -a {h} {id}")),
        "{hint}"
    );
    let pasted = paste(&env, &hint);
    pasted[0].expect(0);
    assert_eq!(pasted[0].json()["id"], id.as_str());
    // In text, too.
    let out = env.run(&["task", "subscribe", "-a", &h, &id]);
    out.expect(1);
    assert!(
        out.stderr.contains("hint: see its result with"),
        "{}",
        out.stderr
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_push_config_is_not_a_missing_task() -> T {
    let server = serve(
        A2aServer::new(lab_card().with_push_notifications(true), Lab)
            .push(PushConfig::new().allow_loopback()),
    )
    .await;
    let env = Env::new();
    let h = host(&server);
    let v = env.run(&["send", "-a", &h, "-o", "json", "ask"]).json();
    let id = v["task"]["id"].as_str().unwrap_or_default().to_owned();
    let out = env.run(&[
        "task",
        "push-config",
        "get",
        "-a",
        &h,
        &id,
        "no-such-config",
        "-o",
        "json",
    ]);
    out.expect(1);
    let e = error_of(&out);
    // The agent's error keeps its name; the message and hint say what is missing.
    assert_eq!(e["code"], "TaskNotFoundError");
    let message = e["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("no push notification config no-such-config"),
        "{e}"
    );
    let hint = e["hint"].as_str().unwrap_or_default().to_owned();
    assert!(!hint.contains("no task"), "{hint}");
    let pasted = paste(&env, &hint);
    pasted[0].expect(0);
    assert!(pasted[0].json()["configs"].is_array() || pasted[0].json().is_object());
    // A task that does not exist is still reported as such.
    let out = env.run(&[
        "task",
        "push-config",
        "get",
        "-a",
        &h,
        "no-such-task",
        "c1",
        "-o",
        "json",
    ]);
    out.expect(1);
    let hint = error_of(&out)["hint"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(hint.contains("no task no-such-task"), "{hint}");
    Ok(())
}
