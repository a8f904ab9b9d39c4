//! `a2a send --task-id T --stream ANSWER` on every binding: the stream of
//! the answer opens with the task as it was (waiting for input); the
//! command must follow it to the streamed report and the completed state
//! instead of stopping at that first snapshot. Against the Dependency
//! Compatibility Agent, which asks for the target runtime first.

mod common;

use agentwire_agents::coordinator::payment_service_files;
use agentwire_agents::depcompat::{self, DepCompatAgent};
use agentwire_server::{A2aServer, ServerHandle};
use common::{Env, Out};
use serde_json::Value;

const BINDINGS: [&str; 3] = ["JSONRPC", "HTTP+JSON", "GRPC"];

async fn depcompat_server() -> ServerHandle {
    common::serve(A2aServer::new(depcompat::card(), DepCompatAgent)).await
}

/// An environment with the npm project's files in its working directory.
fn project_env() -> Env {
    let env = Env::new();
    for f in payment_service_files() {
        std::fs::write(env.cwd().join(&f.name), &f.bytes).expect("write a project file");
    }
    env
}

/// Runs `a2a` off the async runtime (the agent is served on it).
async fn run(env: &Env, args: Vec<String>) -> Out {
    let cmd = env.cmd();
    tokio::task::spawn_blocking(move || {
        let mut cmd = cmd;
        let o = cmd.args(&args).output().expect("run a2a");
        Out {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    })
    .await
    .expect("joined")
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// Streams the question (no target runtime): the task waits for input.
async fn ask(env: &Env, host: &str, binding: &str) -> String {
    let out = run(
        env,
        args(&[
            "send",
            "-a",
            host,
            "--transport",
            binding,
            "--stream",
            "-o",
            "json",
            "--text",
            "Check payment-service",
            "--file",
            "package.json",
            "--file",
            "package-lock.json",
        ]),
    )
    .await;
    out.expect(0);
    let lines = out.jsonl();
    let last = lines.last().expect("events");
    assert_eq!(
        last["statusUpdate"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "[{binding}] {}",
        out.stdout
    );
    lines[0]["task"]["id"]
        .as_str()
        .expect("the task id first")
        .to_owned()
}

fn state_of(line: &Value) -> Option<&str> {
    line["statusUpdate"]["status"]["state"]
        .as_str()
        .or_else(|| line["task"]["status"]["state"].as_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_answer_is_followed_to_the_report_as_json() {
    let server = depcompat_server().await;
    let host = common::host(&server);
    let env = project_env();
    for binding in BINDINGS {
        let id = ask(&env, &host, binding).await;
        let out = run(
            &env,
            args(&[
                "send",
                "-a",
                &host,
                "--transport",
                binding,
                "--task-id",
                &id,
                "--stream",
                "-o",
                "json",
                "Node.js 24",
            ]),
        )
        .await;
        out.expect(0);
        let lines = out.jsonl();
        // The opening snapshot: the task as it was.
        assert_eq!(lines[0]["task"]["id"], id.as_str(), "[{binding}]");
        assert_eq!(
            state_of(&lines[0]),
            Some("TASK_STATE_INPUT_REQUIRED"),
            "[{binding}]"
        );
        // Then the report, streamed, and the end.
        let names: Vec<&str> = lines
            .iter()
            .filter_map(|l| l["artifactUpdate"]["artifact"]["name"].as_str())
            .collect();
        assert!(
            names.contains(&"compatibility-report.json")
                && names.contains(&"compatibility-report.md"),
            "[{binding}] {}",
            out.stdout
        );
        assert_eq!(
            lines.last().and_then(state_of),
            Some("TASK_STATE_COMPLETED"),
            "[{binding}] {}",
            out.stdout
        );
        assert!(
            !out.stderr.contains("waiting for input"),
            "[{binding}] {}",
            out.stderr
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_answer_is_followed_to_the_report_as_text() {
    let server = depcompat_server().await;
    let host = common::host(&server);
    let env = project_env();
    for binding in BINDINGS {
        let id = ask(&env, &host, binding).await;
        let out = run(
            &env,
            args(&[
                "send",
                "-a",
                &host,
                "--transport",
                binding,
                "--task-id",
                &id,
                "--stream",
                "Node.js 24",
            ]),
        )
        .await;
        out.expect(0);
        // The report, streamed after the opening snapshot.
        let (opening, rest) = out
            .stdout
            .split_once("Event: status-update")
            .unwrap_or_else(|| panic!("[{binding}] no status event:\n{}", out.stdout));
        assert!(opening.contains("State: INPUT_REQUIRED"), "[{binding}]");
        assert!(
            rest.contains("Event: artifact-update")
                && rest.contains("Artifact: compatibility-report.md"),
            "[{binding}] {}",
            out.stdout
        );
        // The restated end (CLI SPEC 11.2): completed, not waiting.
        let tail = out
            .stdout
            .rsplit("Final: yes")
            .next()
            .expect("a final block");
        assert!(
            tail.contains("State: COMPLETED"),
            "[{binding}] {}",
            out.stdout
        );
        assert!(
            !out.stderr.contains("waiting for input"),
            "[{binding}] {}",
            out.stderr
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribing_to_a_waiting_task_shows_it_and_returns() {
    let server = depcompat_server().await;
    let host = common::host(&server);
    let env = project_env();
    for binding in BINDINGS {
        let id = ask(&env, &host, binding).await;
        let out = run(
            &env,
            args(&[
                "task",
                "subscribe",
                "-a",
                &host,
                "--transport",
                binding,
                &id,
                "--stream",
                "-o",
                "json",
            ]),
        )
        .await;
        out.expect(0);
        let lines = out.jsonl();
        assert_eq!(lines.len(), 1, "[{binding}] {}", out.stdout);
        assert_eq!(
            state_of(&lines[0]),
            Some("TASK_STATE_INPUT_REQUIRED"),
            "[{binding}]"
        );
    }
}
