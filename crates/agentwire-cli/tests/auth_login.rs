//! `a2a auth login|status|logout` against a real OpenID provider (npm
//! `oidc-provider`, interop/oidc/provider.mjs) on loopback, and an
//! `a2a serve --auth-oidc ISSUER` that checks the tokens it issues.
//! Needs node and `npm ci` in interop/oidc: ignored by default, run by
//! .ci/run (`cargo test -p agentwire-cli --test auth_login -- --ignored`).

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(30);

/// A child process killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a child and waits for the stdout line containing `marker`.
fn start(mut cmd: Command, marker: &'static str) -> (Proc, String) {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("start the process");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if line.contains(marker) {
                let _ = tx.send(line);
            }
        }
    });
    let proc = Proc(child);
    let line = rx
        .recv_timeout(LIMIT)
        .unwrap_or_else(|_| panic!("no {marker:?} line within {LIMIT:?}"));
    (proc, line)
}

fn oidc_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../interop/oidc")
}

/// The provider and its issuer URL.
fn provider() -> (Proc, String) {
    let dir = oidc_dir();
    assert!(
        dir.join("node_modules").exists(),
        "run `npm ci` in interop/oidc first"
    );
    let mut cmd = Command::new("node");
    cmd.arg("provider.mjs").current_dir(&dir);
    let (p, line) = start(cmd, "ISSUER ");
    let issuer = line.trim_start_matches("ISSUER ").trim().to_owned();
    (p, issuer)
}

/// `a2a serve --auth-oidc ISSUER` and its `127.0.0.1:PORT`.
fn serve(env: &Env, issuer: &str) -> (Proc, String) {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("a2a"));
    for (k, _) in std::env::vars() {
        if k.starts_with("A2ACLI_") || k.starts_with("A2A_") || k == "RUST_LOG" {
            cmd.env_remove(k);
        }
    }
    cmd.args([
        "serve",
        "--store",
        "memory",
        "--port",
        "0",
        "--auth-oidc",
        issuer,
    ])
    .env("HOME", env.home())
    .current_dir(env.cwd());
    let (p, line) = start(cmd, "agent card:");
    let url = line.split_whitespace().last().expect("a URL");
    let addr = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .expect("host:port")
        .to_owned();
    (p, addr)
}

#[test]
#[ignore = "needs node and `npm ci` in interop/oidc (run by .ci/run)"]
fn client_credentials_login_then_send_on_every_binding_status_logout() {
    let env = Env::new();
    let (_provider, issuer) = provider();
    let (_server, addr) = serve(&env, &issuer);

    // Without a token the agent refuses (exit 4).
    env.run(&["send", "-a", &addr, "hello"]).expect(4);

    let out = env.run(&[
        "auth",
        "login",
        "-a",
        &addr,
        "--client-id",
        "a2a-service",
        "--client-secret",
        "service-secret",
        "--scope",
        "a2a",
        "-o",
        "json",
    ]);
    out.expect(0);
    assert!(
        !out.stdout.contains("eyJ"),
        "the token was printed: {}",
        out.stdout
    );
    let v = out.json();
    assert_eq!(v["grant"], "client_credentials");

    for b in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        env.run(&["send", "-a", &addr, "--transport", b, "hello"])
            .expect(0);
    }

    let out = env.run(&["auth", "status", "-o", "json"]);
    out.expect(0);
    assert!(
        !out.stdout.contains("eyJ"),
        "status printed a token: {}",
        out.stdout
    );
    let v = out.json();
    assert_eq!(v["agents"].as_array().map(Vec::len), Some(1), "{v}");

    env.run(&["auth", "logout", "-a", &addr]).expect(0);
    let v = env.run(&["auth", "status", "-o", "json"]).json();
    assert_eq!(v["agents"].as_array().map(Vec::len), Some(0), "{v}");
    env.run(&["send", "-a", &addr, "hello"]).expect(4);
}
