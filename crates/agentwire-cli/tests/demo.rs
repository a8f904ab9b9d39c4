//! `a2a demo`: the release coordination story end to end in one command, as a newcomer runs it
//! (text, each step printed, the final report) and as a machine reads it
//! (`-o json`: the raw protocol exchange, one object per line).

mod common;

use common::Env;
use serde_json::Value;

#[test]
fn the_story_step_by_step() {
    let env = Env::new();
    // The demo's SQLite file lives in the temporary directory while it
    // runs; it leaves nothing there (the database, its journal, its lock).
    let tmp = env.cwd().join("tmp");
    std::fs::create_dir_all(&tmp).expect("a temporary directory");
    let out = env.run_with(&["demo"], |c| {
        c.env("TMPDIR", &tmp);
    });
    out.expect(0);
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .expect("read the temporary directory")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "the demo left {left:?}");
    let s = &out.stdout;
    for expected in [
        "[1] Discover the dependency compatibility agent by its card",
        "/.well-known/agent-card.json",
        "<- SendMessage: Message (no task;",
        "TASK_STATE_SUBMITTED",
        "status TASK_STATE_INPUT_REQUIRED  \"To run the analysis I still need the target Node.js version",
        "-> SendStreamingMessage (HTTP+JSON): text \"Target environment: Node.js 24.\"",
        "artifact compatibility-report.md",
        "append  lastChunk",
        "status TASK_STATE_COMPLETED",
        "Which artifact should I refine?",
        "[metadata artifactId",
        "compatibility-report.md v2: artifactId",
        "(accepted)",
        "The final report (compatibility-report.md, version 2 of 2, accepted in the ledger):",
        "# Dependency compatibility report: payment-service@3.4.1",
        "## Fixes (sorted by risk, highest first)",
    ] {
        assert!(s.contains(expected), "missing {expected:?} in:\n{s}");
    }
}

#[test]
fn the_raw_exchange_as_jsonl_over_grpc() {
    let env = Env::new();
    let out = env.run(&["demo", "-o", "json", "--transport", "GRPC"]);
    out.expect(0);
    let lines = out.jsonl();
    // The story's steps (numbered, as in text) and its notes are lines too
    // (issue 42), and the last line is the outcome with the ledger's chain
    // of versions: v2 refines v1 and is the accepted one.
    let steps: Vec<&Value> = lines.iter().filter(|l| l["type"] == "step").collect();
    assert!(steps.len() >= 5, "{}", out.stdout);
    assert_eq!(steps[0]["step"], 1);
    assert!(steps.iter().all(|s| s["title"].is_string()));
    assert!(lines.iter().any(|l| l["type"] == "note"), "{}", out.stdout);
    let outcome = lines.last().expect("lines");
    assert_eq!(outcome["type"], "outcome", "{}", out.stdout);
    assert_eq!(outcome["binding"], "GRPC");
    assert_eq!(outcome["tasks"].as_array().map(Vec::len), Some(2));
    let versions = outcome["ledger"]["versions"].as_array().expect("versions");
    assert_eq!(versions.len(), 2, "{outcome}");
    assert_eq!(versions[1]["previousArtifactId"], versions[0]["artifactId"]);
    assert_eq!(versions[0]["accepted"], false);
    assert_eq!(versions[1]["accepted"], true);
    // The wire lines, as before: the card first.
    let wire: Vec<&Value> = lines
        .iter()
        .filter(|l| !matches!(l["type"].as_str(), Some("step" | "note" | "outcome")))
        .collect();
    assert_eq!(wire[0]["type"], "card", "{}", out.stdout);
    assert_eq!(wire[0]["body"]["name"], "Dependency Compatibility Agent");
    let requests: Vec<&Value> = lines.iter().filter(|l| l["type"] == "request").collect();
    assert_eq!(requests.len(), 5, "{}", out.stdout);
    assert!(requests.iter().all(|r| r["binding"] == "GRPC"));
    assert_eq!(requests[0]["method"], "SendMessage");
    let response = lines
        .iter()
        .find(|l| l["type"] == "response")
        .expect("the Message answer");
    assert!(
        response["body"]["message"]["parts"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Yes: npm 11"))
    );
    let states: Vec<&str> = lines
        .iter()
        .filter_map(|l| l["body"]["statusUpdate"]["status"]["state"].as_str())
        .collect();
    assert_eq!(
        states
            .iter()
            .filter(|s| **s == "TASK_STATE_INPUT_REQUIRED")
            .count(),
        2,
        "{states:?}"
    );
    assert_eq!(
        states
            .iter()
            .filter(|s| **s == "TASK_STATE_COMPLETED")
            .count(),
        2,
        "{states:?}"
    );
    let chunks = lines
        .iter()
        .filter(|l| !l["body"]["artifactUpdate"].is_null())
        .count();
    assert_eq!(chunks, 9);
}

/// `a2a serve --agent all`: every bundled agent on its own port, each card
/// reachable, each with a ready-to-paste `a2a send` line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_all_agents() {
    use std::io::{BufRead, BufReader};
    let env = Env::new();
    let bin = assert_cmd::cargo::cargo_bin("a2a");
    let mut child = std::process::Command::new(bin)
        .args([
            "serve", "--agent", "all", "--port", "0", "--store", "memory",
        ])
        .env("HOME", env.home())
        .current_dir(env.cwd())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn a2a serve");
    let stdout = child.stdout.take().expect("stdout");
    let lines = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let done = line.starts_with("Press Ctrl-C");
                out.push(line);
                if done {
                    break;
                }
            }
            out
        }),
    )
    .await;
    let lines = match lines {
        Ok(Ok(lines)) => lines,
        other => {
            let _ = child.kill();
            panic!("a2a serve did not start: {other:?}");
        }
    };
    let cards: Vec<String> = lines
        .iter()
        .filter_map(|l| l.trim().strip_prefix("agent card: "))
        .map(str::to_owned)
        .collect();
    let tries = lines
        .iter()
        // (A try line may feed a2a on its standard input: `echo '...' | a2a ...`.)
        .filter(|l| l.trim().starts_with("try: ") && l.contains("a2a "))
        .count();
    let mut names = Vec::new();
    agentwire_client::install_crypto_provider();
    for url in &cards {
        let card: Value = reqwest::get(url)
            .await
            .expect("card request")
            .json()
            .await
            .expect("card JSON");
        names.push(card["name"].as_str().unwrap_or("").to_owned());
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        names,
        [
            "Echo Agent",
            "Dependency Compatibility Agent",
            "A2A Rust Conformance Agent"
        ],
        "{lines:#?}"
    );
    assert_eq!(tries, 5, "{lines:#?}");
}
