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
    /// It is serving: its first line of output and what it printed on
    /// stderr before it (the process is killed).
    Up(String, String),
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
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            Served::Up(line, err)
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
    // The server takes no client credentials, and names its own options.
    let out = env.run_with(
        &["serve", "--bearer", "s3cret", "--port", "0", "-o", "json"],
        |c| {
            c.timeout(Duration::from_secs(20));
        },
    );
    out.expect(2);
    let hint = out.json()["error"]["hint"].as_str().unwrap().to_owned();
    assert!(
        hint.contains("client option") && hint.contains("--api-key-file"),
        "{hint}"
    );

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
        Served::Up(line, _) => assert!(line.starts_with("Serving "), "{line}"),
        Served::Exited(code, err) => panic!("a2a serve exited with {code}: {err}"),
    }
    // Where the option applies, a bad value is still refused.
    env.run(&["send", "-a", "127.0.0.1:9", "hi"]).expect(2);
}

// ----- one syntax, one naming scheme ---------------------------------------

/// A free loopback port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Serves, expecting the server up; its first line and stderr.
fn serving(env: &Env, args: &[&str], vars: &[(&str, &str)]) -> (String, String) {
    match serve_once(env, args, vars) {
        Served::Up(line, err) => (line, err),
        Served::Exited(code, err) => panic!("a2a serve {args:?} exited with {code}: {err}"),
    }
}

#[test]
fn one_duration_syntax_for_every_duration_option() {
    let env = Env::new();
    // Client options: what people type (7d and 1h 30m are new), through
    // the parser to the unreachable agent (exit 3), never a usage error.
    for d in ["500ms", "2s", "1.5s", "1m", "24h", "7d", "1h 30m"] {
        let out = env.run(&["send", "-a", "127.0.0.1:9", "--timeout", d, "hi"]);
        assert_eq!(out.code, 3, "--timeout {d}: {}", out.stderr);
        let out = env.run(&[
            "task",
            "get",
            "-a",
            "127.0.0.1:9",
            "t",
            "--wait",
            "--poll-interval",
            d,
        ]);
        assert_eq!(out.code, 3, "--poll-interval {d}: {}", out.stderr);
    }
    // A bare number is seconds, as it was.
    let out = env.run(&["send", "-a", "127.0.0.1:9", "--timeout", "30", "hi"]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    let out = env.run(&[
        "send",
        "-a",
        "127.0.0.1:9",
        "--timeout",
        "soon",
        "-o",
        "json",
    ]);
    out.expect(2);
    let msg = out.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(msg.contains("500ms, 2s, 1m, 24h, 7d"), "{msg}");
    // Server options: the same parser.
    for d in ["1h 30m", "7d", "90s", "1.5h"] {
        serving(
            &env,
            &["--store", "memory", "--port", "0", "--retention", d],
            &[],
        );
    }
    serving(
        &env,
        &["--store", "memory", "--port", "0", "--retention", "3600"],
        &[],
    );
    // The conformance agent's streaming timeout is a duration too (the
    // former millisecond option still works).
    let (line, _) = serving(
        &env,
        &[
            "--agent",
            "conformance",
            "--store",
            "memory",
            "--port",
            "0",
            "--tck-streaming-timeout",
            "3s",
        ],
        &[],
    );
    assert!(line.starts_with("Serving "), "{line}");
    serving(
        &env,
        &[
            "--agent",
            "conformance",
            "--store",
            "memory",
            "--port",
            "0",
            "--tck-streaming-timeout-ms",
            "3000",
        ],
        &[],
    );
}

#[test]
fn one_naming_scheme_for_variables_and_options() {
    let env = Env::new();
    // The server's options come from A2A_SERVE_*, as its help says.
    let help = env.run(&["serve", "--help"]).stdout;
    for v in [
        "A2A_SERVE_STORE",
        "A2A_SERVE_PORT",
        "A2A_SERVE_RETENTION",
        "RUST_LOG",
    ] {
        assert!(help.contains(v), "serve --help lacks {v}:\n{help}");
    }
    let port = free_port().to_string();
    let (line, err) = serving(
        &env,
        &[],
        &[("A2A_SERVE_PORT", &port), ("A2A_SERVE_STORE", "memory")],
    );
    assert!(line.contains(&format!(":{port}")), "{line}");
    assert!(!err.contains("deprecated"), "{err}");
    // The former names still work, with a warning.
    let port = free_port().to_string();
    let (line, err) = serving(
        &env,
        &[],
        &[
            ("A2A_PORT", &port),
            ("A2A_STORE", "memory"),
            ("A2A_RETENTION", "3600"),
        ],
    );
    assert!(line.contains(&format!(":{port}")), "{line}");
    for w in [
        "A2A_PORT is deprecated",
        "A2A_SERVE_PORT",
        "A2A_STORE is deprecated",
        "A2A_RETENTION is deprecated",
    ] {
        assert!(err.contains(w), "no {w:?} in {err}");
    }
    // RUST_LOG filters the logs (A2A_LOG is the deprecated name).
    let quiet = env.run(&["send", "-a", "127.0.0.1:9", "hi"]);
    let loud = env.run_with(&["send", "-a", "127.0.0.1:9", "hi"], |c| {
        c.env("RUST_LOG", "debug");
    });
    assert_eq!((quiet.code, loud.code), (3, 3));
    assert!(
        loud.stderr.contains("DEBUG") && !quiet.stderr.contains("DEBUG"),
        "{}",
        loud.stderr
    );
    let out = env.run_with(&["send", "-a", "127.0.0.1:9", "hi"], |c| {
        c.env("A2A_LOG", "debug");
    });
    assert!(
        out.stderr.contains("A2A_LOG is deprecated"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("DEBUG"), "{}", out.stderr);
    // -V as well as -v.
    for flag in ["-V", "-v", "--version"] {
        let out = env.run(&[flag]);
        out.expect(0);
        assert!(out.stdout.starts_with("a2a "), "{flag}: {}", out.stdout);
    }
    // One name for the push notification options of send, push-config
    // create and webhook (the former ones are hidden aliases).
    let create = env.run(&["task", "push-config", "create", "--help"]).stdout;
    let webhook = env.run(&["webhook", "--help"]).stdout;
    let send = env.run(&["send", "--help"]).stdout;
    for o in [
        "--push-url",
        "--push-token",
        "--push-auth-scheme",
        "--push-auth-credentials",
    ] {
        assert!(lists_option(&create, o) && lists_option(&send, o), "{o}");
    }
    assert!(lists_option(&webhook, "--push-token") && lists_option(&webhook, "--task-id"));
    for (help, old) in [
        (&create, "--url"),
        (&create, "--token"),
        (&webhook, "--token"),
        (&webhook, "--task"),
    ] {
        assert!(!lists_option(help, old), "{old} is listed");
    }
    let out = env.run(&[
        "task",
        "push-config",
        "create",
        "-a",
        "127.0.0.1:9",
        "t",
        "--url",
        "http://127.0.0.1:1/",
        "--token",
        "x",
    ]);
    assert_eq!(out.code, 3, "the former spellings: {}", out.stderr);
}

// ----- the start-up errors of a2a serve --------------------------------------

/// Runs `a2a serve ARGS` expecting it to stop by itself within a bound.
fn serve_fails(env: &Env, args: &[&str]) -> Out {
    let mut all = vec!["serve"];
    all.extend_from_slice(args);
    env.run_with(&all, |c| {
        c.timeout(Duration::from_secs(20));
    })
}

/// The `error:` lines of a run.
fn error_lines(out: &Out) -> Vec<String> {
    out.stderr
        .lines()
        .filter(|l| l.starts_with("error:"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn serve_refuses_unknown_stores_and_options_that_do_not_apply() {
    let env = Env::new();
    for store in ["redis://127.0.0.1/0", "memroy", "tasks.db", "sqlite:"] {
        let out = serve_fails(&env, &["--port", "0", "--store", store]);
        out.expect(2);
        if store != "sqlite:" {
            for form in ["memory", "sqlite:PATH", "postgres://"] {
                assert!(out.stderr.contains(form), "{store}: {}", out.stderr);
            }
        }
        let out = serve_fails(&env, &["--port", "0", "--store", store, "-o", "json"]);
        out.expect(2);
        assert_eq!(out.json()["error"]["code"], "A2ACLI_ERR_USAGE");
    }
    // A mistyped store is not a file of that name.
    assert!(!env.cwd().join("memroy").exists());
    // Options that mean nothing for the chosen store or agent.
    let refused: &[(&[&str], &str)] = &[
        (&["--port", "0", "--max-tasks", "5"], "--max-tasks"),
        (
            &["--port", "0", "--store", "sqlite:t.db", "--max-tasks", "5"],
            "--max-tasks",
        ),
        (
            &[
                "--port",
                "0",
                "--store",
                "memory",
                "--replica-timeout",
                "5s",
            ],
            "--replica-timeout",
        ),
        (
            &[
                "--port",
                "0",
                "--store",
                "memory",
                "--agent",
                "echo",
                "--tck-streaming-timeout",
                "3s",
            ],
            "--tck-streaming-timeout",
        ),
        (
            &[
                "--port",
                "0",
                "--agent",
                "all",
                "--store",
                "postgres://u@127.0.0.1:1/db",
            ],
            "--agent all",
        ),
    ];
    for (args, what) in refused {
        let out = serve_fails(&env, args);
        out.expect(2);
        assert!(
            error_lines(&out).iter().any(|l| l.contains(what)),
            "{args:?}: {}",
            out.stderr
        );
    }
    let out = env.run_with(&["serve", "--port", "0"], |c| {
        c.env("A2A_SERVE_MAX_TASKS", "5")
            .timeout(Duration::from_secs(20));
    });
    out.expect(2);
    assert!(out.stderr.contains("A2A_SERVE_MAX_TASKS"), "{}", out.stderr);
    // Where they apply, they are taken.
    serving(
        &env,
        &["--store", "memory", "--port", "0", "--max-tasks", "5"],
        &[],
    );
}

#[test]
fn serve_start_up_failures_are_printed_once_without_client_codes() {
    let env = Env::new();
    // A store that cannot be opened.
    let out = serve_fails(
        &env,
        &["--port", "0", "--store", "sqlite:no-such-dir/tasks.db"],
    );
    out.expect(1);
    let errors = error_lines(&out);
    assert_eq!(errors.len(), 1, "{}", out.stderr);
    assert!(errors[0].contains("no-such-dir/tasks.db"), "{}", errors[0]);
    assert!(!out.stderr.contains("ERROR"), "logged too:\n{}", out.stderr);
    assert!(!out.stderr.contains("A2ACLI_ERR"), "{}", out.stderr);
    assert!(out.stderr.contains("hint: "), "{}", out.stderr);
    let out = serve_fails(
        &env,
        &[
            "--port",
            "0",
            "--store",
            "sqlite:no-such-dir/tasks.db",
            "-o",
            "json",
        ],
    );
    out.expect(1);
    let code = out.json()["error"]["code"].as_str().unwrap().to_owned();
    assert!(!code.starts_with("A2ACLI_ERR_"), "{code}");
    // PostgreSQL refusing the connection: the connect error, at once (the
    // pool alone retried for 30 seconds and then said it timed out).
    let closed = free_port();
    let url = format!("postgres://a2a:secret@127.0.0.1:{closed}/tasks");
    let out = serve_fails(&env, &["--port", "0", "--store", &url]);
    out.expect(1);
    let errors = error_lines(&out);
    assert_eq!(errors.len(), 1, "{}", out.stderr);
    assert!(
        errors[0].contains("cannot connect to PostgreSQL") && errors[0].contains("refused"),
        "{}",
        errors[0]
    );
    assert!(!out.stderr.contains("secret"), "{}", out.stderr);
    // PostgreSQL that never answers: a connect timeout of a few seconds.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = silent.local_addr().expect("addr").port();
    let url = format!("postgres://a2a@127.0.0.1:{port}/tasks");
    let out = serve_fails(&env, &["--port", "0", "--store", &url]);
    out.expect(1);
    let errors = error_lines(&out);
    assert_eq!(errors.len(), 1, "{}", out.stderr);
    assert!(errors[0].contains("connect timeout"), "{}", errors[0]);
    drop(silent);
    // A port that is taken.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port().to_string();
    let out = serve_fails(&env, &["--port", &port, "--store", "memory"]);
    out.expect(1);
    let errors = error_lines(&out);
    assert_eq!(errors.len(), 1, "{}", out.stderr);
    assert!(errors[0].contains("cannot listen"), "{}", errors[0]);
    assert!(!out.stderr.contains("A2ACLI_ERR"), "{}", out.stderr);
}

#[test]
fn serve_takes_the_memory_and_request_bounds() {
    let env = Env::new();
    // The memory store's bounds mean nothing for the other stores.
    for (option, value) in [("--max-store-bytes", "1000000"), ("--open-task-ttl", "5m")] {
        let out = serve_fails(
            &env,
            &["--port", "0", "--store", "sqlite:t.db", option, value],
        );
        out.expect(2);
        assert!(
            error_lines(&out).iter().any(|l| l.contains(option)),
            "{option}: {}",
            out.stderr
        );
    }
    // Where they apply, they are taken, as flags and as variables.
    serving(
        &env,
        &[
            "--store",
            "memory",
            "--port",
            "0",
            "--max-store-bytes",
            "1000000",
            "--open-task-ttl",
            "5m",
            "--max-list-bytes",
            "100000",
            "--max-parts",
            "10",
            "--max-artifact-bytes",
            "100000",
            "--max-in-flight",
            "50",
        ],
        &[],
    );
    serving(
        &env,
        &["--store", "memory", "--port", "0"],
        &[
            ("A2A_SERVE_MAX_STORE_BYTES", "1000000"),
            ("A2A_SERVE_OPEN_TASK_TTL", "90s"),
            ("A2A_SERVE_MAX_LIST_BYTES", "100000"),
            ("A2A_SERVE_MAX_PARTS", "10"),
            ("A2A_SERVE_MAX_ARTIFACT_BYTES", "100000"),
            ("A2A_SERVE_MAX_IN_FLIGHT", "50"),
        ],
    );
    // The help names them.
    let out = env.run(&["serve", "--help"]);
    for name in [
        "--max-store-bytes",
        "--open-task-ttl",
        "--max-list-bytes",
        "--max-parts",
        "--max-artifact-bytes",
        "--max-in-flight",
        "A2A_SERVE_MAX_IN_FLIGHT",
    ] {
        assert!(out.stdout.contains(name), "{name} not in the help");
    }
}
