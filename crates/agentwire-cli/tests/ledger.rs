//! The `a2a` ledger as a user meets it: a real `a2a serve --agent
//! depcompat` on loopback, the `a2a` command run one shot at a time with a
//! ledger file of the test's own, on every binding. A context continued
//! across three one-shot `a2a send` calls (`--context last`, then a short
//! id, with the agent taken from the ledger), three versions of the
//! Markdown report chained, one accepted, all read back with the `a2a
//! ledger` commands in text and `-o json`; `--no-ledger` writes nothing;
//! the short ids of tasks made in the same second differ.

mod common;

use std::path::{Path, PathBuf};

use common::{Env, Out, Serving};
use serde_json::Value;

const MD: &str = "compatibility-report.md";

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../agentwire-agents/fixtures/npm/payment-service")
        .join(name)
}

/// An environment with the project's files in its working directory.
fn env() -> Env {
    let env = Env::new();
    for f in ["package.json", "package-lock.json"] {
        std::fs::copy(fixture(f), env.cwd().join(f)).expect("copy the fixture");
    }
    env
}

fn ok(env: &Env, args: &[&str]) -> Out {
    let out = env.run(args);
    out.expect(0);
    out
}

fn ok_json(env: &Env, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    ok(env, &a).json()
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no string at {pointer} in {v}"))
}

/// Every value of the `label: ` lines of a text output.
fn fields(out: &Out, label: &str) -> Vec<String> {
    let prefix = format!("{label}: ");
    out.stdout
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
        .collect()
}

fn story(binding: &str) {
    let env = env();
    let serving = Serving::start(&env, &["--agent", "depcompat"]);
    let agent = serving.base();
    let ledger = env.home().join("test-ledger").join("ledger.db");
    let l = ledger.to_str().expect("a UTF-8 path");
    let conn = ["--transport", binding, "--ledger", l];

    // 1. The analysis: a new context.
    let mut a = vec!["send", "-a", agent.as_str()];
    a.extend(conn);
    a.extend([
        "--file",
        "package.json",
        "--file",
        "package-lock.json",
        "Check whether payment-service can move to Node.js 24",
    ]);
    let first = ok_json(&env, &a);
    assert_eq!(
        str_at(&first, "/task/status/state"),
        "TASK_STATE_COMPLETED",
        "{first}"
    );
    let ctx = str_at(&first, "/task/contextId").to_owned();
    let t1 = str_at(&first, "/task/id").to_owned();

    // 2. A refinement in the same context, named `last`; no -a: the
    // ledger knows the context's agent.
    let mut a = vec!["send"];
    a.extend(conn);
    a.extend([
        "--context",
        "last",
        "--reference-task",
        "last",
        "sort the fixes by risk in the Markdown report",
    ]);
    let second = ok_json(&env, &a);
    assert_eq!(str_at(&second, "/task/contextId"), ctx, "{second}");
    let t2 = str_at(&second, "/task/id").to_owned();
    assert_ne!(t2, t1, "a refinement is a new task");

    // 3. Another one, the context named by its short id (in text).
    let short_ctx = &ctx[ctx.len() - 8..];
    let mut a = vec!["send"];
    a.extend(conn);
    a.extend([
        "--context-id",
        short_ctx,
        "--reference-task",
        &t2[t2.len() - 8..],
        "keep only high risk findings in the Markdown report",
    ]);
    let third = ok(&env, &a);
    assert_eq!(third.field("Context ID").as_deref(), Some(ctx.as_str()));
    assert_eq!(third.field("State").as_deref(), Some("COMPLETED"));
    let t3 = third.field("Task ID").expect("Task ID");

    // The contexts: one, with its agent and three completed tasks.
    let mut a = vec!["ledger", "contexts", "--ledger", l];
    let doc = ok_json(&env, &a);
    assert_eq!(doc["contexts"].as_array().map(Vec::len), Some(1), "{doc}");
    assert_eq!(doc["contexts"][0]["contextId"], ctx.as_str());
    assert_eq!(doc["contexts"][0]["agent"], agent.as_str());
    assert_eq!(doc["contexts"][0]["tasks"], 3);
    let text = ok(&env, &a);
    assert_eq!(text.field("Contexts").as_deref(), Some("1"));
    assert_eq!(text.field("Tasks").as_deref(), Some("3 (3 completed)"));
    assert_eq!(text.field("Short ID").as_deref(), Some(short_ctx));
    common::assert_text_floor(&text.stdout);

    // The tasks of the context, oldest first, told apart by short ids.
    a = vec!["ledger", "tasks", "--ledger", l];
    let doc = ok_json(&env, &a);
    let ids: Vec<&str> = doc["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| t["taskId"].as_str().expect("taskId"))
        .collect();
    assert_eq!(ids, vec![t1.as_str(), t2.as_str(), t3.as_str()]);
    let text = ok(&env, &a);
    let shorts = fields(&text, "Short ID");
    assert_eq!(shorts.len(), 3, "{}", text.stdout);
    assert!(
        shorts[0] != shorts[1] && shorts[1] != shorts[2] && shorts[0] != shorts[2],
        "{shorts:?}"
    );
    assert_eq!(fields(&text, "State"), vec!["COMPLETED"; 3]);
    common::assert_text_floor(&text.stdout);

    // The Markdown report's versions: a chain of three, none accepted.
    a = vec!["ledger", "artifacts", "--ledger", l, "--name", MD];
    let doc = ok_json(&env, &a);
    let versions = doc["artifacts"][0]["versions"]
        .as_array()
        .expect("versions")
        .clone();
    assert_eq!(versions.len(), 3, "{doc}");
    let vid = |i: usize| versions[i]["artifactId"].as_str().expect("id").to_owned();
    assert_eq!(versions[0]["taskId"], t1.as_str());
    assert_eq!(versions[1]["taskId"], t2.as_str());
    assert_eq!(versions[2]["taskId"], t3.as_str());
    assert_eq!(versions[0]["previousArtifactId"], Value::Null);
    assert_eq!(versions[1]["previousArtifactId"], vid(0).as_str());
    assert_eq!(versions[2]["previousArtifactId"], vid(1).as_str());
    assert_eq!(doc["artifacts"][0]["acceptedArtifactId"], Value::Null);

    // Accept version 2 by name and number, read it back in both forms.
    let accepted = ok(&env, &["ledger", "accept", "--ledger", l, MD, "2"]);
    assert_eq!(accepted.field("Accepted"), Some(vid(1)));
    assert_eq!(accepted.field("Version").as_deref(), Some("2 of 3"));
    let doc = ok_json(&env, &a);
    assert_eq!(doc["artifacts"][0]["acceptedArtifactId"], vid(1).as_str());
    let flags: Vec<bool> = doc["artifacts"][0]["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .map(|v| v["accepted"].as_bool().expect("accepted"))
        .collect();
    assert_eq!(flags, vec![false, true, false]);
    let text = ok(&env, &a);
    assert_eq!(
        text.field("Accepted Version"),
        Some(format!("2 ({})", vid(1)))
    );
    assert_eq!(fields(&text, "Accepted"), vec!["no", "yes", "no"]);
    assert_eq!(
        fields(&text, "Refines"),
        vec![
            format!("version 1 ({})", vid(0)),
            format!("version 2 ({})", vid(1))
        ]
    );
    common::assert_text_floor(&text.stdout);

    // Accepting another version by its short id moves the mark.
    let v3 = vid(2);
    let doc = ok_json(
        &env,
        &["ledger", "accept", "--ledger", l, &v3[v3.len() - 8..]],
    );
    assert_eq!(doc["artifactId"], v3.as_str());
    assert_eq!(doc["version"], 3);
    let doc = ok_json(&env, &a);
    assert_eq!(doc["artifacts"][0]["acceptedArtifactId"], v3.as_str());

    // A task command takes a short id from the ledger, and its agent.
    let mut a = vec!["task", "get"];
    a.extend(conn);
    a.push(&t1[t1.len() - 8..]);
    let got = ok_json(&env, &a);
    assert_eq!(got["id"], t1.as_str());
    drop(serving);
}

#[test]
fn a_context_continued_across_one_shot_sends_jsonrpc() {
    story("JSONRPC");
}

#[test]
fn a_context_continued_across_one_shot_sends_http_json() {
    story("HTTP+JSON");
}

#[test]
fn a_context_continued_across_one_shot_sends_grpc() {
    story("GRPC");
}

/// `--no-ledger` (and its variable) writes nothing, and `last` then has
/// nothing to name.
#[test]
fn no_ledger_writes_nothing() {
    let env = env();
    let serving = Serving::start(&env, &["--agent", "echo"]);
    let agent = serving.base();
    let ledger = env.home().join("off").join("ledger.db");
    let l = ledger.to_str().expect("a UTF-8 path");
    ok(
        &env,
        &["send", "-a", &agent, "--ledger", l, "--no-ledger", "hello"],
    );
    let env = env.with_env("A2ACLI_NO_LEDGER", "true");
    ok(&env, &["send", "-a", &agent, "--ledger", l, "hello"]);
    assert!(!exists(&ledger), "the ledger was written");
    assert!(
        !exists(&env.home().join(".local/share/a2a-cli")),
        "the default ledger was written"
    );
    let out = env.run(&["send", "-a", &agent, "--context", "last", "hello"]);
    out.expect(2);
    assert!(out.stderr.contains("needs the ledger"), "{}", out.stderr);
    let out = env.run(&["ledger", "contexts"]);
    out.expect(2);
}

fn exists(p: &Path) -> bool {
    std::fs::metadata(p).is_ok()
}

/// Two `a2a send` at once on one ledger file: both recorded, both
/// contexts listed, their tasks' short ids differ.
#[test]
fn two_sends_at_once_share_the_default_ledger() {
    let env = env();
    let serving = Serving::start(&env, &["--agent", "echo"]);
    let agent = serving.base();
    let outs: Vec<Value> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..2)
            .map(|i| {
                let (env, agent) = (&env, agent.as_str());
                s.spawn(move || ok_json(env, &["send", "-a", agent, &format!("hello {i}")]))
            })
            .collect();
        runs.into_iter().map(|r| r.join().expect("a run")).collect()
    });
    // The default place: the user's data directory.
    assert!(exists(&env.home().join(".local/share/a2a-cli/ledger.db")));
    let doc = ok_json(&env, &["ledger", "contexts"]);
    assert_eq!(doc["contexts"].as_array().map(Vec::len), Some(2), "{doc}");
    let ids: Vec<&str> = outs.iter().map(|o| str_at(o, "/task/id")).collect();
    let short = |id: &str| id[id.len() - 8..].to_owned();
    assert_ne!(short(ids[0]), short(ids[1]));
    let listed: Vec<String> = doc["contexts"]
        .as_array()
        .expect("contexts")
        .iter()
        .map(|c| c["shortId"].as_str().expect("shortId").to_owned())
        .collect();
    assert_ne!(listed[0], listed[1]);
}

/// The ledger keeps at most `--ledger-max-contexts` contexts: the least
/// recently updated go first.
#[test]
fn the_ledger_is_bounded() {
    let env = env().with_env("A2ACLI_LEDGER_MAX_CONTEXTS", "2");
    let serving = Serving::start(&env, &["--agent", "echo"]);
    let agent = serving.base();
    let mut contexts = Vec::new();
    for i in 0..3 {
        let doc = ok_json(&env, &["send", "-a", &agent, &format!("hello {i}")]);
        contexts.push(str_at(&doc, "/task/contextId").to_owned());
    }
    let doc = ok_json(&env, &["ledger", "contexts"]);
    let listed: Vec<&str> = doc["contexts"]
        .as_array()
        .expect("contexts")
        .iter()
        .map(|c| c["contextId"].as_str().expect("contextId"))
        .collect();
    assert_eq!(listed, vec![contexts[2].as_str(), contexts[1].as_str()]);
}

/// The demo's two tasks, made a second apart in one context, print two
/// different short ids (the first 8 characters of time-ordered ids were
/// the same: "2 tasks (01a248f1 and 01a248f1)").
#[test]
fn the_demo_tells_its_two_tasks_apart() {
    let env = Env::new();
    let out = ok(&env, &["demo"]);
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("Done over"))
        .unwrap_or_else(|| panic!("no summary line in:\n{}", out.stdout));
    let inside = line
        .split_once("2 tasks (")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(ids, _)| ids)
        .unwrap_or_else(|| panic!("no task ids in {line}"));
    let (a, b) = inside.split_once(" and ").expect("two ids");
    assert_eq!(a.len(), 8, "{line}");
    assert_ne!(a, b, "{line}");
}

/// `a2a demo` records its story into the ledger like any command: the
/// context, its two tasks completed, the two chained versions of the
/// Markdown report with the second accepted; `--no-ledger` writes nothing.
#[test]
fn the_demo_records_its_story() {
    let env = Env::new();
    let ledger = env.home().join("demo").join("ledger.db");
    let l = ledger.to_str().expect("a UTF-8 path");
    let out = ok(&env, &["demo", "--ledger", l, "-o", "json"]);
    let outcome = out
        .jsonl()
        .into_iter()
        .find(|v| v["type"] == "outcome")
        .unwrap_or_else(|| panic!("no outcome in:\n{}", out.stdout));
    let ctx = str_at(&outcome, "/contextId").to_owned();
    let doc = ok_json(&env, &["ledger", "tasks", "--ledger", l, &ctx]);
    let tasks: Vec<(&str, &str)> = doc["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| (str_at(t, "/taskId"), str_at(t, "/state")))
        .collect();
    assert_eq!(
        tasks,
        vec![
            (str_at(&outcome, "/tasks/0"), "TASK_STATE_COMPLETED"),
            (str_at(&outcome, "/tasks/1"), "TASK_STATE_COMPLETED"),
        ],
        "{doc}"
    );
    let doc = ok_json(
        &env,
        &["ledger", "artifacts", "--ledger", l, &ctx, "--name", MD],
    );
    let recorded: Vec<&str> = doc["artifacts"][0]["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .map(|v| str_at(v, "/artifactId"))
        .collect();
    let told: Vec<&str> = outcome["ledger"]["versions"]
        .as_array()
        .expect("the outcome's versions")
        .iter()
        .map(|v| str_at(v, "/artifactId"))
        .collect();
    assert_eq!(recorded, told, "{doc}");
    assert_eq!(recorded.len(), 2, "{doc}");
    assert_eq!(doc["artifacts"][0]["acceptedArtifactId"], told[1], "{doc}");
    assert_eq!(
        doc["artifacts"][0]["versions"][1]["previousArtifactId"], told[0],
        "{doc}"
    );

    let off = env.home().join("off").join("ledger.db");
    let o = off.to_str().expect("a UTF-8 path");
    ok(&env, &["demo", "--ledger", o, "--no-ledger"]);
    assert!(!exists(&off), "the ledger was written");
}
