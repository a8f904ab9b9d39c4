//! The option surface of the `a2a` command: each command takes the options
//! that mean something for it and refuses the others; the environment
//! feeds only the commands an option belongs to; one duration syntax; the
//! start-up errors of `a2a serve`.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::*;

/// Bound on waiting for `a2a serve` to announce itself or fail.
const SERVE_LIMIT: Duration = Duration::from_secs(30);

/// What became of an `a2a serve` run.
enum Served {
    /// It is serving: its first line of output (the process is killed).
    Up(String),
    /// It exited: its status and standard error.
    Exited(i32, String),
}

/// Runs `a2a serve ARGS` in the test's isolated environment (plus `vars`)
/// until it prints its first line or exits, then stops it.
fn serve_once(env: &Env, args: &[&str], vars: &[(&str, &str)]) -> Served {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("a2a"));
    for (k, _) in std::env::vars() {
        if k.starts_with("A2ACLI_") || k.starts_with("A2A_") || k == "RUST_LOG" {
            cmd.env_remove(k);
        }
    }
    cmd.arg("serve")
        .args(args)
        .env("HOME", env.home())
        .env("XDG_CONFIG_HOME", env.home().join(".config"))
        .env("XDG_CACHE_HOME", env.home().join(".cache"))
        .current_dir(env.cwd())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let mut child: Child = cmd.spawn().expect("start a2a serve");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let n = BufReader::new(stdout).read_line(&mut line).unwrap_or(0);
        let _ = tx.send((n, line));
    });
    let first = rx.recv_timeout(SERVE_LIMIT);
    match first {
        Ok((n, line)) if n > 0 => {
            let _ = child.kill();
            let _ = child.wait();
            Served::Up(line)
        }
        Ok(_) => {
            // stdout closed: the process is ending.
            let status = child.wait().expect("wait for a2a serve");
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            Served::Exited(status.code().unwrap_or(-1), err)
        }
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("a2a serve {args:?} neither served nor exited within {SERVE_LIMIT:?}");
        }
    }
}

// ----- each command takes its own options --------------------------------

/// Whether a help text lists an option (a line that starts with it, or
/// with its short form and then it).
fn lists_option(help: &str, option: &str) -> bool {
    help.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with(&format!("{option} "))
            || l == option
            || l.split_once(", ")
                .is_some_and(|(short, rest)| short.len() == 2 && rest.starts_with(option))
    })
}

#[test]
fn options_belong_to_the_commands_that_use_them() {
    let env = Env::new();
    let refused: &[&[&str]] = &[
        &[
            "serve", "--bearer", "s3cret", "--store", "memory", "--port", "0",
        ],
        &[
            "serve",
            "--api-key",
            "k",
            "--store",
            "memory",
            "--port",
            "0",
        ],
        &["serve", "--async", "--store", "memory", "--port", "0"],
        &["demo", "--async"],
        &["demo", "--task-id", "t"],
        &["config", "show", "--bearer", "x"],
        &["config", "show", "--stream"],
        &["card", "get", "-a", "127.0.0.1:9", "--task-id", "t"],
        &["card", "get", "-a", "127.0.0.1:9", "--stream"],
        &["card", "get", "-a", "127.0.0.1:9", "--async"],
        &["task", "list", "-a", "127.0.0.1:9", "--task-id", "t"],
        &["task", "cancel", "-a", "127.0.0.1:9", "t", "--wait"],
        &["task", "get", "-a", "127.0.0.1:9", "t", "--stream"],
        &[
            "task",
            "download",
            "-a",
            "127.0.0.1:9",
            "t",
            "--timeout",
            "1s",
        ],
        &["completion", "bash", "-a", "127.0.0.1:9"],
        &["webhook", "--bearer", "x"],
        &["conformance", "-a", "127.0.0.1:9", "--async"],
    ];
    for args in refused {
        // Bounded: before each command had its own options, `serve` took
        // these and started serving.
        let out = env.run_with(args, |c| {
            c.timeout(Duration::from_secs(20));
        });
        out.expect(2);
        assert!(
            out.stderr.contains("hint: ") && out.stderr.contains("--help"),
            "{args:?}: {}",
            out.stderr
        );
        let mut json_args = args.to_vec();
        json_args.extend(["-o", "json"]);
        let out = env.run_with(&json_args, |c| {
            c.timeout(Duration::from_secs(20));
        });
        out.expect(2);
        let e = &out.json()["error"];
        assert_eq!(e["code"], "A2ACLI_ERR_USAGE", "{args:?}");
        assert!(e["hint"].as_str().unwrap().contains("--help"), "{e}");
    }
    // The server has no client credentials, and says so.
    let out = env.run_with(
        &["serve", "--bearer", "s3cret", "--port", "0", "-o", "json"],
        |c| {
            c.timeout(Duration::from_secs(20));
        },
    );
    out.expect(2);
    let hint = out.json()["error"]["hint"].as_str().unwrap().to_owned();
    assert!(hint.contains("does not authenticate"), "{hint}");

    // Each command's help lists its own options.
    let help = env.run(&["serve", "--help"]);
    help.expect(0);
    for absent in [
        "--bearer",
        "--api-key",
        "--async",
        "--task-id",
        "--stream",
        "--agent-card",
        "--poll-interval",
    ] {
        assert!(
            !lists_option(&help.stdout, absent),
            "serve --help lists {absent}:\n{}",
            help.stdout
        );
    }
    assert!(help.stdout.contains("--store") && help.stdout.contains("--output"));
    let help = env.run(&["send", "--help"]);
    for present in [
        "--bearer",
        "--async",
        "--wait",
        "--task-id",
        "--context-id",
        "--metadata",
        "--stream",
        "--poll-interval",
        "--timeout",
        "--transport",
        "--output",
    ] {
        assert!(
            lists_option(&help.stdout, present),
            "send --help lacks {present}"
        );
    }
    let help = env.run(&["card", "get", "--help"]);
    assert!(lists_option(&help.stdout, "--bearer") && !lists_option(&help.stdout, "--task-id"));
}

#[test]
fn the_environment_only_feeds_the_commands_an_option_belongs_to() {
    let env = Env::new()
        .with_env("A2ACLI_BEARER", "s3cret")
        .with_env("A2ACLI_TIMEOUT", "soon")
        .with_env("A2ACLI_POLL_INTERVAL", "often")
        .with_env("A2ACLI_ASYNC", "maybe");
    // config show lists them (and where they came from) without parsing them.
    let out = env.run(&["config", "show"]);
    out.expect(0);
    assert!(
        out.stdout.contains("A2ACLI_TIMEOUT: soon [environment]"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("A2ACLI_BEARER: <redacted> [environment]"),
        "{}",
        out.stdout
    );
    let v = env.run(&["config", "show", "-o", "json"]).json();
    assert_eq!(v["settings"]["A2ACLI_POLL_INTERVAL"]["value"], "often");
    assert_eq!(v["settings"]["A2ACLI_A2A_VERSION"]["source"], "default");
    assert_eq!(v["settings"]["A2ACLI_OUTPUT"]["source"], "flag");
    // Completion and the server ignore the client's settings.
    env.run(&["completion", "bash"]).expect(0);
    match serve_once(
        &env,
        &["--store", "memory", "--port", "0"],
        &[
            ("A2ACLI_BEARER", "s3cret"),
            ("A2ACLI_TIMEOUT", "soon"),
            ("A2ACLI_ASYNC", "maybe"),
        ],
    ) {
        Served::Up(line) => assert!(line.starts_with("Serving "), "{line}"),
        Served::Exited(code, err) => panic!("a2a serve exited with {code}: {err}"),
    }
    // Where the option applies, a bad value is still refused.
    env.run(&["send", "-a", "127.0.0.1:9", "hi"]).expect(2);
}
