//! In-task authorization end to end with the command line: the Dependency
//! Compatibility Agent asks for the private registry's token when a
//! question names one of its packages (`TASK_STATE_AUTH_REQUIRED`, saying
//! what it needs), `a2a send` reports it with the command that answers,
//! the answer with the token completes the same task, on every binding;
//! `a2a chat` asks for the token and sends the typed line.

mod common;
mod pty;

use agentwire_agents::depcompat::{self, DepCompatAgent, private};
use agentwire_server::A2aServer;
use common::{Env, host, serve};
use pty::Pty;
use serde_json::Value;

const QUESTION: &str = "Does @acme-internal/widgets 2.0.0 run on Node.js 18?";

async fn agent() -> agentwire_server::ServerHandle {
    serve(A2aServer::new(depcompat::card(), DepCompatAgent)).await
}

fn status_text(task: &Value) -> String {
    task["status"]["message"]["parts"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_reports_what_is_needed_and_the_answer_completes_the_task_on_every_binding() {
    let server = agent().await;
    let a = host(&server);
    let env = Env::new();
    let card = env.run(&["card", "get", "-a", &a, "-o", "json"]);
    card.expect(0);
    let exts = card.json()["capabilities"]["extensions"].clone();
    assert!(
        exts.as_array().is_some_and(|e| e
            .iter()
            .any(|x| x["uri"] == agentwire_server::IN_TASK_AUTH_EXTENSION)),
        "the card declares the in-task authorization extension: {exts}"
    );
    for b in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        let out = env.run(&["send", "-a", &a, "--transport", b, "-o", "json", QUESTION]);
        out.expect(0);
        let task = out.json()["task"].clone();
        assert_eq!(
            task["status"]["state"], "TASK_STATE_AUTH_REQUIRED",
            "{b}: {task}"
        );
        let id = task["id"].as_str().expect("a task id").to_owned();
        let asked = task["status"]["message"]["parts"]
            .as_array()
            .and_then(|p| {
                p.iter()
                    .find_map(|p| p["data"].get("authRequired").cloned())
            })
            .unwrap_or_else(|| panic!("{b}: no authRequired data part: {task}"));
        assert_eq!(asked["scheme"], "bearer", "{b}");
        assert_eq!(asked["resource"], private::REGISTRY, "{b}");
        assert_eq!(asked["scopes"][0], private::READ_SCOPE, "{b}");
        assert!(status_text(&task).contains("read token"), "{b}: {task}");

        // A wrong token: refused, the task still waits.
        let out = env.run(&[
            "send",
            "-a",
            &a,
            "--transport",
            b,
            "-o",
            "json",
            "--task-id",
            &id,
            "not-the-token",
        ]);
        out.expect(0);
        let task = out.json()["task"].clone();
        assert_eq!(
            task["status"]["state"], "TASK_STATE_AUTH_REQUIRED",
            "{b}: {task}"
        );
        assert!(status_text(&task).contains("refused"), "{b}: {task}");

        // The token: the same task completes with the registry's entry.
        let out = env.run(&[
            "send",
            "-a",
            &a,
            "--transport",
            b,
            "-o",
            "json",
            "--task-id",
            &id,
            private::DEMO_TOKEN,
        ]);
        out.expect(0);
        let task = out.json()["task"].clone();
        assert_eq!(task["id"], id.as_str(), "{b}");
        assert_eq!(
            task["status"]["state"], "TASK_STATE_COMPLETED",
            "{b}: {task}"
        );
        assert!(
            status_text(&task).contains("does not allow Node.js 18"),
            "{b}: {task}"
        );
        assert!(
            task["artifacts"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x["name"] == private::ARTIFACT)),
            "{b}: {task}"
        );
    }

    // Text: what is needed and the command that answers.
    let out = env.run(&["send", "-a", &a, QUESTION]);
    out.expect(0);
    assert!(
        out.stderr.contains(
            "waiting for authorization (AUTH_REQUIRED): a bearer token for https://npm.acme.internal/ (scopes: read:packages)"
        ),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.contains("--task-id ") && out.stdout.contains("\"<credential>\""),
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_asks_for_the_token_and_sends_it() {
    let server = agent().await;
    let env = Env::new();
    let mut cmd = pty::command(pty::a2a(), env.home(), &env.cwd());
    cmd.args(["chat", "-a", &host(&server)]);
    let mut t = Pty::spawn(cmd);
    t.expect("/quit leaves.");
    t.line(QUESTION);
    t.expect("AUTH_REQUIRED");
    t.expect("The agent needs a bearer token for https://npm.acme.internal/");
    t.line(private::DEMO_TOKEN);
    t.expect("does not allow Node.js 18");
    t.expect("COMPLETED");
    t.line("/quit");
    assert_eq!(t.wait(), 0, "{}", t.screen());
}
