//! `a2a chat` as a person uses it, in a pseudo-terminal: the whole
//! dependency-compatibility flow against a real `a2a serve --agent
//! depcompat` (files attached, the question answered, the report shown as
//! text, refined, versions listed and accepted), the labelled `text`
//! format when its output is redirected, and the refusal to run without a
//! terminal.

mod common;
mod pty;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use common::{Env, assert_text_floor, host, lab};
use pty::{Pty, wait_file};

/// `a2a serve` of one bundled agent on a free port, killed on drop.
struct Served {
    child: Child,
    url: String,
}

impl Served {
    fn start(agent: &str, env: &Env) -> Self {
        let mut child = Command::new(pty::a2a())
            .args([
                "serve", "--agent", agent, "--port", "0", "--store", "memory",
            ])
            .env("HOME", env.home())
            .current_dir(env.cwd())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a2a serve");
        let stdout = child.stdout.take().expect("its stdout");
        let mut reader = BufReader::new(stdout);
        let mut first = String::new();
        reader
            .read_line(&mut first)
            .expect("read the server's first line");
        // Keep reading (and dropping) what it prints.
        std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
        let url = first
            .split_whitespace()
            .find(|w| w.starts_with("http://127.0.0.1:"))
            .unwrap_or_else(|| panic!("no URL in {first:?}"))
            .to_owned();
        Self { child, url }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../agentwire-agents/fixtures/npm/payment-service")
        .join(name)
}

#[test]
fn chat_refuses_a_standard_input_that_is_not_a_terminal() {
    let env = Env::new();
    // No agent is needed: the check comes first.
    let out = env.run_stdin(&["chat", "-a", "127.0.0.1:9"], "hello\n/quit\n");
    out.expect(2);
    assert!(
        out.stderr.contains("needs a terminal") && out.stderr.contains("a2a send"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    let out = env.run_stdin(&["chat", "-a", "127.0.0.1:9", "-o", "json"], "");
    out.expect(2);
    assert_eq!(out.json()["error"]["code"], "A2ACLI_ERR_USAGE");
}

/// The dependency-compatibility flow, done entirely in chat.
#[test]
fn dependency_compatibility_flow_in_chat_on_a_terminal() {
    let env = Env::new();
    for f in ["package.json", "package-lock.json"] {
        std::fs::copy(fixture(f), env.cwd().join(f)).expect("copy the fixture");
    }
    let server = Served::start("depcompat", &env);
    let mut cmd = pty::command(pty::a2a(), env.home(), &env.cwd());
    cmd.args(["chat", "-a", &server.url]);
    let mut t = Pty::spawn(cmd);
    t.expect("Chatting with Dependency Compatibility Agent");
    t.expect("/quit leaves.");

    // Help: one line per command.
    t.line("/help");
    let help = t.expect("leave (also Ctrl-D)");
    for c in [
        "/file PATH [TYPE]",
        "/data JSON",
        "/versions",
        "/refine N|ID TEXT",
    ] {
        assert!(help.contains(c), "{help}");
    }

    // The project's files, attached to the first message.
    t.line("/file package.json");
    t.expect("Attached package.json (application/json");
    t.line("/file package-lock.json");
    t.expect("Attached package-lock.json (application/json");
    t.expect("[2 parts attached] >");
    t.line("Check whether payment-service can move to the new runtime");
    // The agent's question, as text.
    t.expect("I still need the target Node.js version");
    t.expect("INPUT_REQUIRED");
    t.expect("type your reply");

    // The answer; the report streams in, shown as text.
    t.expect("[reply to ");
    t.line("Node.js 24");
    t.expect("── compatibility-report.json ──");
    t.expect("\"findings\"");
    t.expect("── compatibility-report.md ──");
    let report = t.expect("Dependency compatibility report: payment-service@3.4.1");
    t.expect("Verdict: blocked");
    t.expect("Fixes (in the order found)");
    t.expect("Upgrade @acme/ledger-client");
    let tail = t.expect("COMPLETED");
    let footer = t.expect("(/versions)");
    assert!(
        footer.contains("1 compatibility-report.json v1, 2 compatibility-report.md v1"),
        "{footer}"
    );
    // Laid out for the terminal (no Markdown markers, no labels).
    assert!(
        !report.contains("# Dependency") && !tail.contains("**Verdict"),
        "{report}{tail}"
    );
    let screen = t.screen();
    for label in ["Artifact: ", "Text:\n", "Event: ", "Artifact ID: "] {
        assert!(!screen.contains(label), "label {label:?} in\n{screen}");
    }

    t.line("/versions");
    t.expect("2. compatibility-report.md v1");

    // A refinement: a new version of the Markdown report.
    t.line("/refine 2 sort the fixes by risk");
    t.expect("Fixes (sorted by risk, highest first)");
    let footer = t.expect("(/versions)");
    assert!(footer.contains("3 compatibility-report.md v2"), "{footer}");

    t.line("/versions");
    let versions = t.expect("refines 2");
    assert!(
        versions.contains("3. compatibility-report.md v2"),
        "{versions}"
    );
    t.line("/accept 3");
    t.expect("Accepted compatibility-report.md");
    // Line editing: the up arrow brings back the line typed before.
    t.send("/versions");
    t.send("\r");
    t.expect(", accepted");
    t.send("\u{1b}[A");
    t.send("\r");
    t.expect(", accepted");

    // /show prints a version whole; an unknown command says so.
    t.line("/show 1");
    t.expect("\"unchecked\"");
    t.line("/frobnicate");
    t.expect("Unknown command /frobnicate. The commands are:");
    t.expect("/help");

    t.line("/quit");
    assert_eq!(t.wait(), 0, "{}", t.screen());
}

/// With its output redirected, chat keeps the labelled `text` format
/// (prompts and notes stay on the terminal), carries the context and the
/// waiting task across turns, and tracks artifact versions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_with_redirected_output_prints_labelled_text() {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let out = env.cwd().join("out.txt");
    let mut t = Pty::shell(
        env.home(),
        &env.cwd(),
        &format!("\"$A2A\" chat -a {h} > out.txt"),
    );
    t.expect("Chatting with Lab");
    t.line("ask");
    wait_file(&out, "State: INPUT_REQUIRED", 1, &mut t);
    t.line("large");
    wait_file(&out, "you said: large", 1, &mut t);
    t.line("paint a boat");
    wait_file(&out, "Artifact Version: echo v1", 1, &mut t);
    t.line("/refine 2 make it red");
    wait_file(&out, "Artifact Version: echo v2", 1, &mut t);
    t.line("/versions");
    wait_file(&out, "Versions: 3", 1, &mut t);
    t.line("/accept 3");
    t.expect("Accepted echo");
    t.line("/versions");
    wait_file(&out, "Versions: 3", 2, &mut t);
    t.line("/context");
    wait_file(&out, "Context ID: ", 5, &mut t);
    t.line("/quit");
    assert_eq!(t.wait(), 0, "{}", t.screen());
    let s = pty::read(&out);
    assert_text_floor(&s);
    assert!(
        !t.screen().contains("Versions: 3"),
        "output on the terminal"
    );
    // One context throughout.
    let ctxs: std::collections::HashSet<&str> = s
        .lines()
        .filter_map(|l| l.strip_prefix("Context ID: "))
        .collect();
    assert_eq!(ctxs.len(), 1, "{s}");
    assert!(s.contains("Refines: "), "{s}");
    assert!(s.contains("Accepted: yes"), "{s}");
}

/// `--save-history`: the lines typed come back in the next session (the
/// up arrow), from a file of mode 600 under the state directory; a line
/// that looks like a credential, a reply to an authorization request and a
/// line starting with a space are never written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saved_history_comes_back_without_credentials() {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let file = env.home().join(".state/a2a-cli/chat-history");
    let chat = |save: bool| {
        let mut cmd = pty::command(pty::a2a(), env.home(), &env.cwd());
        cmd.args(["chat", "-a", &h]);
        if save {
            cmd.arg("--save-history");
        }
        let mut t = Pty::spawn(cmd);
        t.expect("/quit leaves.");
        t
    };
    let mut t = chat(true);
    t.line("hello there");
    t.expect("COMPLETED");
    // The next prompt first: a line typed before it is drawn can be lost
    // (the line editor takes the terminal afresh for each line).
    t.expect("> ");
    t.line("my api key is k-123");
    t.expect("COMPLETED");
    // The next prompt first: a line typed before it is drawn can be lost
    // (the line editor takes the terminal afresh for each line).
    t.expect("> ");
    t.line(" off the record");
    t.expect("COMPLETED");
    // The next prompt first: a line typed before it is drawn can be lost
    // (the line editor takes the terminal afresh for each line).
    t.expect("> ");
    t.line("auth");
    t.expect("needs authorization");
    t.expect("> ");
    t.line("the code is 777");
    t.expect("COMPLETED");
    // The next prompt first: a line typed before it is drawn can be lost
    // (the line editor takes the terminal afresh for each line).
    t.expect("> ");
    t.line("/versions");
    t.expect("echo v1");
    t.line("/quit");
    assert_eq!(t.wait(), 0, "{}", t.screen());
    let kept = pty::read(&file);
    assert!(
        kept.contains("hello there") && kept.contains("/versions"),
        "{kept}"
    );
    for secret in ["k-123", "off the record", "777"] {
        assert!(!kept.contains(secret), "{secret:?} kept in\n{kept}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file)
            .expect("the file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // The next session recalls the lines with the up arrow: /quit, then
    // /versions.
    let mut t = chat(true);
    t.send("\u{1b}[A");
    t.send("\u{1b}[A");
    t.send("\r");
    t.expect("/versions");
    t.expect("No artifact in this conversation yet.");
    t.line("/quit");
    assert_eq!(t.wait(), 0, "{}", t.screen());
    // Without --save-history nothing is read or written.
    let before = pty::read(&file);
    let mut t = chat(false);
    t.line("unsaved words");
    t.expect("COMPLETED");
    // The next prompt first: a line typed before it is drawn can be lost
    // (the line editor takes the terminal afresh for each line).
    t.expect("> ");
    t.line("/quit");
    assert_eq!(t.wait(), 0, "{}", t.screen());
    assert_eq!(pty::read(&file), before);
}

/// Ctrl-C while a reply streams stops following it: the session goes on
/// (the next message is answered) and the task keeps running on the agent;
/// a SIGINT at the prompt then ends the chat with 0, as Ctrl-D does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_a_reply_then_ends_the_chat_with_0() {
    let (server, _) = lab().await;
    let env = Env::new();
    let h = host(&server);
    let mut cmd = pty::command(pty::a2a(), env.home(), &env.cwd());
    cmd.args(["chat", "-a", &h, "--no-ledger"]);
    let mut t = Pty::spawn(cmd);
    t.expect("/quit leaves.");
    t.line("slow 60000");
    // The progress line names the task once the stream did.
    t.expect(" WORKING");
    // Typed while the reply streams: the terminal sends SIGINT.
    t.send("\u{3}");
    t.expect("Stopped following the reply (Ctrl-C). Task ");
    let id = t.expect(" keeps running");
    let id = id.trim_end_matches(" keeps running").trim().to_owned();
    assert!(!id.is_empty());
    // Not canceled: the agent still works on it.
    let got = tokio::task::block_in_place(|| {
        env.run(&["task", "get", "-a", &h, "--no-ledger", &id, "-o", "json"])
    });
    got.expect(0);
    let got = got.json();
    assert_eq!(got["status"]["state"], "TASK_STATE_WORKING", "{got}");
    // The session goes on.
    t.line("hello again");
    t.expect("hello again");
    t.expect("COMPLETED");
    // A SIGINT at the prompt ends the chat, with 0.
    t.expect("> ");
    t.interrupt();
    assert_eq!(t.wait(), 0, "{}", t.screen());
    assert!(!t.screen().contains("A2ACLI_ERR"), "{}", t.screen());
}

/// Ctrl-C typed at the prompt ends the chat with 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_typed_at_the_prompt_ends_the_chat_with_0() {
    let (server, _) = lab().await;
    let env = Env::new();
    let mut cmd = pty::command(pty::a2a(), env.home(), &env.cwd());
    cmd.args(["chat", "-a", &host(&server), "--no-ledger"]);
    let mut t = Pty::spawn(cmd);
    t.expect("/quit leaves.");
    t.send("half a line\u{3}");
    assert_eq!(t.wait(), 0, "{}", t.screen());
}
