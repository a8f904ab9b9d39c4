//! The newcomer's defects (issue 42), each through the `a2a` command as a
//! user runs it, against `a2a serve` on an ephemeral loopback port: Ctrl-C
//! during `send --stream`, a stream whose server died, TLS failures of the
//! task commands, refused push notifications in `a2a webhook`, the `try:`
//! line of `a2a serve --agent depcompat` run from another directory, and
//! the exit codes of `task download` and `auth login`. (The demo's JSON
//! lines and banner are checked in tests/demo.rs and tests/registry.rs,
//! `--require-signature` in tests/card_signing.rs, the wait interrupted by
//! Ctrl-C in tests/cli.rs.)

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;

const BINDINGS: [&str; 3] = ["JSONRPC", "HTTP+JSON", "GRPC"];

/// Bound on waiting for a line or an exit.
const WAIT: Duration = Duration::from_secs(45);

/// `a2a ARGS` started in `env` (no `A2ACLI_*` / `A2A_*` variables
/// inherited), its stdout read line by line on a thread, its stderr
/// collected on another; killed on drop.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    stdout: String,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Running {
    fn start(env: &Env, args: &[&str]) -> Self {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("a2a"));
        for (k, _) in std::env::vars() {
            if k.starts_with("A2ACLI_") || k.starts_with("A2A_") || k == "RUST_LOG" {
                cmd.env_remove(k);
            }
        }
        cmd.args(args)
            .env("HOME", env.home())
            .env("XDG_CONFIG_HOME", env.home().join(".config"))
            .env("XDG_CACHE_HOME", env.home().join(".cache"))
            .current_dir(env.cwd())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start a2a");
        let out = child.stdout.take().expect("stdout");
        let mut err = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        Self {
            child,
            lines,
            stdout: String::new(),
            stderr: Some(stderr),
        }
    }

    /// Reads stdout until a line contains `needle`; that line.
    fn wait_for(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.stdout.push_str(&line);
                    self.stdout.push('\n');
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    panic!("no line with {needle:?} on stdout:\n{}", self.stdout);
                }
            }
        }
    }

    /// Sends SIGINT, as Ctrl-C in a terminal does.
    fn interrupt(&self) {
        let status = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .expect("kill -INT");
        assert!(status.success());
    }

    /// Waits (bounded) for the exit: the status, all of stdout, stderr.
    fn finish(mut self) -> Out {
        let deadline = Instant::now() + WAIT;
        let code = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status.code().unwrap_or(-1);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("a2a did not exit within {WAIT:?}:\n{}", self.stdout);
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.stdout.push_str(&line);
            self.stdout.push('\n');
        }
        let stderr = self
            .stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        Out {
            code,
            stdout: std::mem::take(&mut self.stdout),
            stderr,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text of an error message that holds a Rust Debug form (tonic's,
/// an I/O error's) instead of words.
fn debug_noise(s: &str) -> Option<&'static str> {
    [
        "tonic::",
        "ConnectError(",
        "Os {",
        "Custom {",
        "kind: ",
        "source: ",
    ]
    .into_iter()
    .find(|n| s.contains(n))
}

/// Defect 1: Ctrl-C during `a2a send --stream` stops the command with 130,
/// prints no "Final:" summary of a task that is still working, and says
/// what to run to follow the task; on every binding.
#[test]
fn ctrl_c_during_send_stream_exits_130_and_says_how_to_follow_the_task() {
    let env = Env::new();
    let serving = Serving::start(&env, &[]);
    let base = serving.base();
    for t in BINDINGS {
        let mut run = Running::start(
            &env,
            &["send", "-a", &base, "--transport", t, "--stream", "slow 30"],
        );
        let id = run.wait_for("Task ID: ");
        let id = id.trim_start_matches("Task ID: ").trim().to_owned();
        run.wait_for("State: WORKING");
        run.interrupt();
        let out = run.finish();
        out.expect(130);
        assert!(!out.stdout.contains("Final:"), "[{t}] {}", out.stdout);
        assert!(out.stderr.contains("interrupted"), "[{t}] {}", out.stderr);
        assert!(
            out.stderr
                .contains(&format!("a2a task subscribe -a {base} {id}")),
            "[{t}] {}",
            out.stderr
        );
        assert!(
            !out.stderr.contains("A2ACLI_ERR_INTERNAL"),
            "[{t}] {}",
            out.stderr
        );
        // The task did keep running: the hint's command follows it.
        env.run(&["task", "cancel", "-a", &base, &id]).expect(0);
    }
}

/// Defect 3: a stream whose server died says on stderr that it is
/// reconnecting (before giving up, not seconds of silence), and gives up
/// with a sentence, not tonic's Debug output; on every binding.
#[test]
fn a_stream_whose_server_died_says_it_is_reconnecting() {
    let env = Env::new();
    for t in BINDINGS {
        let serving = Serving::start(&env, &[]);
        let base = serving.base();
        let mut run = Running::start(
            &env,
            &["send", "-a", &base, "--transport", t, "--stream", "slow 60"],
        );
        run.wait_for("State: WORKING");
        serving.stop();
        let out = run.finish();
        out.expect(3);
        let first_notice = out.stderr.find("reconnecting");
        let error = out.stderr.find("\nerror:");
        assert!(
            first_notice.is_some() && first_notice < error,
            "[{t}] no reconnection notice before the error:\n{}",
            out.stderr
        );
        assert!(
            out.stderr.contains("(attempt 1 of "),
            "[{t}] {}",
            out.stderr
        );
        let error_line = out
            .stderr
            .lines()
            .find(|l| l.starts_with("error:"))
            .unwrap_or_default();
        assert!(
            error_line.contains("reconnections failed"),
            "[{t}] {}",
            out.stderr
        );
        assert_eq!(debug_noise(&out.stderr), None, "[{t}] {}", out.stderr);
    }
}

/// Makes a self-signed certificate as a user does (`openssl req -x509`):
/// `dir/NAME.pem` and `dir/NAME.key`.
fn openssl_self_signed(dir: &Path, name: &str) -> (String, String) {
    let cert = dir.join(format!("{name}.pem"));
    let key = dir.join(format!("{name}.key"));
    let out = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:P-256", "-nodes", "-days", "30"])
        .args(["-subj", "/CN=localhost", "-addext"])
        .arg("subjectAltName=DNS:localhost,IP:127.0.0.1")
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdin(Stdio::null())
        .output()
        .expect("run openssl (install the openssl command)");
    assert!(out.status.success(), "openssl req -x509: {out:?}");
    (cert.display().to_string(), key.display().to_string())
}

/// Defect 2, the task commands: with the card at hand (a file) and the
/// agent's certificate not trusted, `task get` / `task list` say that the
/// certificate is not trusted (exit 3), in words: not "cannot reach" with
/// each binding's Debug output.
#[test]
fn task_commands_say_the_certificate_is_not_trusted() {
    let env = Env::new();
    let (cert, key) = openssl_self_signed(&env.cwd(), "agent");
    let serving = Serving::start(&env, &["--tls-cert", &cert, "--tls-key", &key]);
    let a = format!("https://127.0.0.1:{}", serving.port());
    let card = env.run(&["card", "get", "-a", &a, "--cacert", &cert, "-o", "json"]);
    card.expect(0);
    std::fs::write(env.cwd().join("card.json"), &card.stdout).expect("write the card");
    for args in [
        vec![
            "task",
            "get",
            "-a",
            "./card.json",
            "--no-cache",
            "some-task",
        ],
        vec!["task", "list", "-a", "./card.json", "--no-cache"],
    ] {
        let out = env.run(&args);
        out.expect(3);
        assert!(
            out.stderr.contains("is not trusted"),
            "{args:?}: {}",
            out.stderr
        );
        assert!(out.stderr.contains("--cacert"), "{args:?}: {}", out.stderr);
        assert_eq!(debug_noise(&out.stderr), None, "{args:?}: {}", out.stderr);
    }
}

/// Posts a notification to a webhook URL (`http://HOST:PORT/`) with this
/// token; the HTTP status.
fn post_notification(url: &str, token: &str) -> u16 {
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let body = r#"{"statusUpdate":{"taskId":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_WORKING"}}}"#;
    let mut s = std::net::TcpStream::connect(&addr).expect("connect to the webhook");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(
        s,
        "POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         X-A2A-Notification-Token: {token}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// Defect 4: `a2a webhook` reports a refused notification (wrong token)
/// on stderr without --debug, and still prints the accepted ones.
#[test]
fn webhook_reports_a_refused_notification() {
    let env = Env::new();
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("a2a"));
    for (k, _) in std::env::vars() {
        if k.starts_with("A2ACLI_") || k.starts_with("A2A_") || k == "RUST_LOG" {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd
        .args(["webhook", "--push-token", "right", "--count", "1"])
        .args(["--timeout", "30s"])
        .env("HOME", env.home())
        .current_dir(env.cwd())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a2a webhook");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut first = String::new();
    err.read_line(&mut first).expect("the webhook URL line");
    let url = first
        .trim()
        .strip_prefix("webhook URL: ")
        .unwrap_or_else(|| panic!("no URL line: {first}"))
        .to_owned();
    assert_eq!(post_notification(&url, "wrong"), 401);
    assert_eq!(post_notification(&url, "right"), 200);
    // --count 1: it exits after the accepted one.
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("a2a webhook did not exit");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut rest = String::new();
    let _ = err.read_to_string(&mut rest);
    let mut stdout = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut stdout);
    }
    assert_eq!(status.code(), Some(0), "{rest}");
    assert!(
        rest.contains("refused a notification (HTTP 401)")
            && rest.contains("X-A2A-Notification-Token"),
        "{rest}"
    );
    assert!(
        !rest.contains("right"),
        "the token is never printed: {rest}"
    );
    assert!(stdout.contains("Notification:"), "{stdout}");
}

/// Defect 6: the `try:` lines of `a2a serve --agent depcompat` work from a
/// directory that is not a clone of the repository.
#[test]
fn depcompat_try_lines_work_from_any_directory() {
    let env = Env::new();
    let serving = Serving::start(&env, &["--agent", "depcompat"]);
    let tries: Vec<&str> = serving
        .stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("try: "))
        .collect();
    assert!(!tries.is_empty(), "{}", serving.stdout);
    assert!(
        !serving.stdout.contains("crates/"),
        "a repository path in: {}",
        serving.stdout
    );
    let line = tries
        .iter()
        .find(|l| l.contains("--stream"))
        .expect("a try line that analyses a project");
    let bin = assert_cmd::cargo::cargo_bin("a2a");
    let dir = bin.parent().expect("the binary's directory");
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(line)
        .env("PATH", path)
        .env("HOME", env.home())
        .env("XDG_CACHE_HOME", env.home().join(".cache"))
        .current_dir(env.home())
        .stdin(Stdio::null())
        .output()
        .expect("run the try line");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{line}\n{stdout}\n{stderr}");
    assert!(stdout.contains("State: COMPLETED"), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("compatibility-report.md"),
        "{stdout}\n{stderr}"
    );
}

/// Defect 7: `task download` onto existing files and `auth login` against
/// an agent without OAuth are usage errors (exit 2), with the way out.
#[test]
fn exit_codes_of_download_and_login_are_usage_errors() {
    let env = Env::new();
    let serving = Serving::start(&env, &[]);
    let base = serving.base();
    let v = env
        .run(&["send", "-a", &base, "-o", "json", "hello"])
        .json();
    let id = v["task"]["id"].as_str().expect("a task id").to_owned();
    env.run(&["task", "download", "-a", &base, &id, "--dir", "out"])
        .expect(0);
    let out = env.run(&[
        "task", "download", "-a", &base, &id, "--dir", "out", "-o", "json",
    ]);
    out.expect(2);
    let e = &out.json()["error"];
    assert_eq!(e["code"], "A2ACLI_ERR_USAGE", "{e}");
    assert!(
        e["hint"].as_str().is_some_and(|h| h.contains("--force")),
        "{e}"
    );

    let out = env.run(&["auth", "login", "-a", &base, "-o", "json"]);
    out.expect(2);
    let e = &out.json()["error"];
    assert_eq!(e["code"], "A2ACLI_ERR_USAGE", "{e}");
    assert!(
        e["hint"].as_str().is_some_and(|h| h.contains("--issuer")),
        "{e}"
    );
}
