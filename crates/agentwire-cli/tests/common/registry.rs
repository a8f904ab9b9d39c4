//! A real registry process (`a2a registry serve` on a free loopback port),
//! in the test's isolated environment, stopped when dropped.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{Env, Out};

/// A registry process, stopped when dropped.
pub struct Registry {
    pub child: Child,
    /// Its base URL, as its banner says it.
    pub url: String,
    /// The lines of its banner, up to "Press Ctrl-C to stop.".
    pub banner: Vec<String>,
}

impl Registry {
    /// Starts `a2a registry serve --port 0` with `publishers` (name, token)
    /// in its tokens file, `--store memory` unless `extra` names a store,
    /// and `extra`; waits up to `wait` for its banner.
    pub fn start(env: &Env, publishers: &[(&str, &str)], extra: &[&str], wait: Duration) -> Self {
        let tokens = env.home().join("publishers.txt");
        let lines: String = publishers
            .iter()
            .map(|(name, token)| format!("{name} {token}\n"))
            .collect();
        std::fs::write(&tokens, lines).expect("tokens file");
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("a2a"));
        cmd.args(["registry", "serve", "--port", "0"])
            .args(if extra.contains(&"--store") {
                &[][..]
            } else {
                &["--store", "memory"][..]
            })
            .arg("--tokens")
            .arg(&tokens)
            .args(extra)
            .env("HOME", env.home())
            .env("A2A_LOG", "error")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, _) in std::env::vars() {
            if k.starts_with("A2ACLI_") || k.starts_with("A2A_REGISTRY") {
                cmd.env_remove(k);
            }
        }
        let mut child = cmd.spawn().expect("start a2a registry serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let deadline = Instant::now() + wait;
        let mut banner = Vec::new();
        let mut url = None;
        while Instant::now() < deadline {
            let Some(Ok(line)) = lines.next() else { break };
            if let Some(rest) = line.strip_prefix("Serving ") {
                url = rest.rsplit(" on ").next().map(str::to_owned);
            }
            let done = line.starts_with("Press Ctrl-C");
            banner.push(line);
            if done {
                break;
            }
        }
        // Keep draining stdout so the process never blocks on it.
        std::thread::spawn(move || for _ in lines {});
        let url = url.expect("the registry printed its address");
        Self { child, url, banner }
    }

    /// `a2a registry publish` of `card` (a URL, a host or a file) to this
    /// registry with the bearer `token`, and `extra`.
    pub fn publish(&self, env: &Env, token: &str, card: &str, extra: &[&str]) -> Out {
        let mut args = vec![
            "registry",
            "publish",
            "--registry",
            &self.url,
            "--bearer",
            token,
            card,
        ];
        args.extend_from_slice(extra);
        env.run(&args)
    }

    /// `a2a registry route TEXT -o json` against this registry: its answer.
    pub fn route(&self, env: &Env, text: &str) -> serde_json::Value {
        env.run(&[
            "registry",
            "route",
            "--registry",
            &self.url,
            text,
            "-o",
            "json",
        ])
        .expect(0)
        .json()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
