//! Shared helpers of the CLI tests: an isolated environment per test (HOME,
//! configuration and cache under a temporary directory, no `A2ACLI_*`
//! variables inherited), the `a2a` binary run with a time bound, in-process
//! agents on ephemeral loopback ports, and checks of the text floor.

#![allow(dead_code)]

pub mod interop;
pub mod registry;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentwire_server::{
    A2aResult, A2aServer, AgentExecutor, Authenticator, RequestContext, ServerHandle, TaskUpdater,
};
use agentwire_types::{AgentCard, AgentSkill, Artifact, Part};
use http::HeaderMap;
use serde_json::Value;

/// Bound on every run of the binary.
pub const RUN_LIMIT: Duration = Duration::from_secs(60);

/// An isolated home for one test.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub extra: Vec<(String, String)>,
}

/// The result of one run.
#[derive(Debug)]
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// The single JSON document on stdout.
    pub fn json(&self) -> Value {
        let lines: Vec<&str> = self
            .stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "expected exactly one JSON document on stdout, got:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("not JSON ({e}): {}", lines[0]))
    }

    /// Every stdout line as JSON (JSONL).
    pub fn jsonl(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("line not JSON ({e}): {l}")))
            .collect()
    }

    /// The value of the first `Label: value` field.
    pub fn field(&self, label: &str) -> Option<String> {
        let prefix = format!("{label}: ");
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
    }

    /// Asserts the status, printing everything on failure.
    pub fn expect(&self, code: i32) -> &Self {
        assert_eq!(
            self.code, code,
            "exit status\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

impl Env {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("work")).expect("work dir");
        Self {
            dir,
            extra: Vec::new(),
        }
    }

    pub fn home(&self) -> &Path {
        self.dir.path()
    }

    /// The working directory of the runs.
    pub fn cwd(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    pub fn with_env(mut self, k: &str, v: &str) -> Self {
        self.extra.push((k.into(), v.into()));
        self
    }

    pub fn cmd(&self) -> assert_cmd::Command {
        let mut c = assert_cmd::Command::cargo_bin("a2a").expect("the a2a binary");
        for (k, _) in std::env::vars() {
            if k.starts_with("A2ACLI_")
                || k.starts_with("XDG_")
                || k.starts_with("A2A_SERVE_")
                || k == "A2A_LOG"
                || k == "RUST_LOG"
            {
                c.env_remove(k);
            }
        }
        // No session bus: tokens go to files unless a test gives one.
        c.env_remove("DBUS_SESSION_BUS_ADDRESS");
        c.env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.home().join(".config"))
            .env("XDG_CACHE_HOME", self.home().join(".cache"))
            .current_dir(self.cwd())
            .timeout(RUN_LIMIT);
        for (k, v) in &self.extra {
            c.env(k, v);
        }
        c
    }

    pub fn run(&self, args: &[&str]) -> Out {
        self.run_with(args, |_| {})
    }

    pub fn run_stdin(&self, args: &[&str], stdin: &str) -> Out {
        let input = stdin.to_owned();
        self.run_with(args, move |c| {
            c.write_stdin(input.clone());
        })
    }

    pub fn run_with(&self, args: &[&str], f: impl FnOnce(&mut assert_cmd::Command)) -> Out {
        let mut c = self.cmd();
        c.args(args);
        f(&mut c);
        let o = c.output().expect("run a2a");
        Out {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// Checks the text floor (CLI SPEC 11.2): no control sequences; every line
/// is a `Label: value` field, a `Label:` block opener followed by content up
/// to a blank line, or blank.
pub fn assert_text_floor(out: &str) {
    assert!(
        !out.chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t'),
        "control characters in text output:\n{out:?}"
    );
    let mut in_block = false;
    for line in out.lines() {
        if in_block {
            if line.is_empty() {
                in_block = false;
            }
            continue;
        }
        if line.is_empty() {
            continue;
        }
        let label = line.split(':').next().unwrap_or_default();
        assert!(
            !label.is_empty()
                && label.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == ' ' || c == '_'),
            "not a labelled line: {line:?} in\n{out}"
        );
        if line.ends_with(':') && line.len() == label.len() + 1 {
            in_block = true;
        } else {
            assert!(line.contains(": "), "not a field: {line:?}");
        }
    }
}

// ----- agents -----------------------------------------------------------

/// The test agent; its behaviour is chosen by the first word of the text.
///
/// - `ask`: input-required; the reply completes with an artifact of it.
/// - `auth`: auth-required.  `fail`, `reject`: those outcomes.
/// - `slow <ms>`: works that long, then completes (cancelable).
/// - `file`: an artifact with a file, a data and a URL part.
/// - `chunks`: an artifact in three chunks.
/// - `message`: a direct message, no task.
/// - `parts`: a data artifact describing the parts received.
/// - `meta`: a data artifact with the message metadata.
/// - `escape`: text with terminal escape sequences.
/// - anything else: an `echo` artifact repeating the text.
#[derive(Debug, Clone, Copy)]
pub struct Lab;

impl AgentExecutor for Lab {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        let text = ctx.text();
        if let Some(prev) = &ctx.task
            && prev.state().is_interrupted()
        {
            task.add_artifact(Artifact::text("answer", format!("you said: {text}")))
                .await?;
            return task.complete().await;
        }
        let word = text
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_owned();
        match word.as_str() {
            "ask" => task.require_input("What size?").await,
            "auth" => {
                task.require_auth("Please sign in at https://example.com/login")
                    .await
            }
            "fail" => task.fail("boom").await,
            "reject" => task.reject("not today").await,
            "message" => task.reply_text("just a message").await,
            "slow" => {
                let ms: u64 = text
                    .split_whitespace()
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(500);
                task.start_work().await?;
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(ms)) => {
                        task.add_artifact(Artifact::text("echo", "done")).await?;
                        task.complete().await
                    }
                    () = ctx.canceled() => Ok(()),
                }
            }
            "file" => {
                let parts = vec![
                    Part::file(
                        &b"\x00\x01binary-report"[..],
                        "report.bin",
                        "application/octet-stream",
                    ),
                    Part::data(serde_json::json!({"rows": 3, "ok": true})),
                    Part::url("https://example.com/big.csv")
                        .with_filename("big.csv")
                        .with_media_type("text/csv"),
                ];
                task.add_artifact(Artifact::new("bundle", parts)).await?;
                task.add_artifact(Artifact::text("notes.md", "# Notes\nline two"))
                    .await?;
                task.complete().await
            }
            "chunks" => {
                task.start_work().await?;
                let id = agentwire_types::new_id();
                for (i, w) in ["alpha ", "beta ", "gamma"].iter().enumerate() {
                    task.artifact_chunk(Artifact::text("story", *w).with_id(&id), i > 0, i == 2)
                        .await?;
                }
                task.complete().await
            }
            "parts" => {
                let desc: Vec<Value> = ctx
                    .message
                    .parts
                    .iter()
                    .map(|p| {
                        let kind = if p.as_text().is_some() {
                            "text"
                        } else if p.as_raw().is_some() {
                            "raw"
                        } else if p.as_url().is_some() {
                            "url"
                        } else {
                            "data"
                        };
                        serde_json::json!({
                            "kind": kind,
                            "mediaType": p.media_type,
                            "filename": p.filename,
                            "text": p.as_text(),
                            "size": p.as_raw().map(|b| b.len()),
                            "data": p.as_data(),
                        })
                    })
                    .collect();
                task.add_artifact(Artifact::new("parts", vec![Part::data(Value::Array(desc))]))
                    .await?;
                task.complete().await
            }
            "meta" => {
                let m = ctx
                    .message
                    .metadata
                    .as_ref()
                    .map(|s| Value::Object(agentwire_types::json::from_struct(s)))
                    .unwrap_or(Value::Null);
                task.add_artifact(Artifact::new("meta", vec![Part::data(m)]))
                    .await?;
                task.complete().await
            }
            "escape" => {
                task.add_artifact(Artifact::text(
                    "evil",
                    "red \u{1b}[31mtext\u{1b}[0m \u{7} bell",
                ))
                .await?;
                task.complete().await
            }
            _ => {
                task.add_artifact(Artifact::text("echo", text)).await?;
                task.complete().await
            }
        }
    }
}

pub fn lab_card() -> AgentCard {
    AgentCard::new("Lab", "The CLI test agent", "1.0.0")
        .with_streaming(true)
        .with_input_modes([
            "text/plain",
            "text/markdown",
            "text/csv",
            "application/json",
            "application/pdf",
            "application/octet-stream",
        ])
        .with_skill(AgentSkill::new("lab", "Lab", "Test behaviours", ["test"]))
}

/// Records the headers (metadata) of every call.
#[derive(Debug, Default)]
pub struct Recorder {
    pub calls: Mutex<Vec<HeaderMap>>,
    /// When set, calls must carry `Authorization: Bearer <token>`.
    pub bearer: Option<String>,
    /// When set, calls must carry this API key header.
    pub api_key: Option<(String, String)>,
}

impl Recorder {
    pub fn headers(&self) -> Vec<HeaderMap> {
        self.calls.lock().unwrap().clone()
    }
}

impl Authenticator for Recorder {
    fn authenticate(&self, headers: &HeaderMap) -> A2aResult<Option<String>> {
        self.calls.lock().unwrap().push(headers.clone());
        let unauth = |m: &str| {
            Err(agentwire_types::A2aError::new(
                agentwire_types::ErrorKind::Unauthenticated,
                m.to_owned(),
            ))
        };
        if let Some(t) = &self.bearer {
            match headers.get("authorization").and_then(|v| v.to_str().ok()) {
                None => return unauth("missing credentials"),
                Some(v) if v == format!("Bearer {t}") => return Ok(Some("alice".into())),
                Some(_) => return unauth("invalid bearer token"),
            }
        }
        if let Some((name, key)) = &self.api_key {
            match headers.get(name.as_str()).and_then(|v| v.to_str().ok()) {
                None => return unauth("missing API key"),
                Some(v) if v == key => return Ok(Some("bob".into())),
                Some(_) => return unauth("invalid API key"),
            }
        }
        Ok(None)
    }
}

/// Serves an agent on an ephemeral loopback port.
pub async fn serve(server: A2aServer) -> ServerHandle {
    server
        .bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0")
        .spawn()
}

/// The lab agent with a header recorder.
pub async fn lab() -> (ServerHandle, Arc<Recorder>) {
    lab_with(lab_card(), Recorder::default()).await
}

pub async fn lab_with(card: AgentCard, recorder: Recorder) -> (ServerHandle, Arc<Recorder>) {
    let rec = Arc::new(recorder);
    let server = A2aServer::new(card, Lab).authenticator(rec.clone());
    (serve(server).await, rec)
}

/// `host:port` of a server.
pub fn host(server: &ServerHandle) -> String {
    server.local_addr().to_string()
}

// ----- a2a serve as a process ----------------------------------------------

/// How long `a2a serve` may take to announce itself.
pub const SERVE_LIMIT: Duration = Duration::from_secs(30);

/// `a2a serve --store memory --port 0 ARGS` in an environment (no
/// `A2ACLI_*` / `A2A_*` variables inherited), started once it printed its
/// banner up to `Press Ctrl-C to stop.`, killed on drop.
pub struct Serving {
    pub child: std::process::Child,
    /// What it printed up to the banner's end.
    pub stdout: String,
}

impl Serving {
    pub fn start(env: &Env, args: &[&str]) -> Self {
        Self::start_on(env, "memory", args)
    }

    /// [`Self::start`] with the store `store` (`--store STORE`).
    pub fn start_on(env: &Env, store: &str, args: &[&str]) -> Self {
        use std::io::{BufRead, BufReader, Read};
        use std::process::{Command, Stdio};
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("a2a"));
        for (k, _) in std::env::vars() {
            if k.starts_with("A2ACLI_") || k.starts_with("A2A_") || k == "RUST_LOG" {
                cmd.env_remove(k);
            }
        }
        cmd.arg("serve")
            .args(["--store", store, "--port", "0"])
            .args(args)
            .env("HOME", env.home())
            .current_dir(env.cwd())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start a2a serve");
        let out = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(out).lines();
            let mut got = String::new();
            while let Some(Ok(line)) = lines.next() {
                got.push_str(&line);
                got.push('\n');
                if line.contains("Press Ctrl-C") {
                    break;
                }
            }
            let _ = tx.send(got);
        });
        let stdout = match rx.recv_timeout(SERVE_LIMIT) {
            Ok(s) => s,
            Err(_) => {
                let _ = child.kill();
                panic!("a2a serve {args:?} did not announce itself within {SERVE_LIMIT:?}");
            }
        };
        if !stdout.contains("agent card:") {
            let _ = child.kill();
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("a2a serve {args:?} did not start: {stdout}\n{err}");
        }
        Self { child, stdout }
    }

    /// The agent card URL it printed.
    pub fn card_url(&self) -> String {
        let line = self
            .stdout
            .lines()
            .find(|l| l.contains("agent card:"))
            .expect("the agent card line");
        line.split_whitespace().last().expect("a URL").to_owned()
    }

    /// `http(s)://HOST:PORT`, from the agent card URL.
    pub fn base(&self) -> String {
        let url = self.card_url();
        let (scheme, rest) = url.split_once("://").expect("an absolute URL");
        let host = rest.split('/').next().expect("host");
        format!("{scheme}://{host}")
    }

    /// `HOST:PORT`, from the agent card URL.
    pub fn addr(&self) -> String {
        let base = self.base();
        base.split_once("://")
            .map(|(_, h)| h.to_owned())
            .unwrap_or(base)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a port")
    }

    /// Stops it: what it printed on stderr.
    pub fn stop(mut self) -> String {
        use std::io::Read;
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        err
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text of the Prometheus metrics `base` serves (`--metrics`).
#[allow(dead_code)]
pub async fn metrics_text(http: &reqwest::Client, base: &str) -> String {
    http.get(format!("{base}/metrics"))
        .send()
        .await
        .expect("/metrics")
        .text()
        .await
        .expect("the metrics text")
}

/// The value of the sample `sample` (its name and labels, as written) in
/// a metrics text; the test fails when it is missing.
#[allow(dead_code)]
pub fn metric_value(text: &str, sample: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(sample)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {sample} in {text}"))
}

// ----- processes and addresses ---------------------------------------------

/// An HTTP client whose connections come from the loopback address `ip`
/// (another caller, for the bounds kept per address).
pub fn client_from(ip: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(ip.parse::<std::net::IpAddr>().expect("an address"))
        .build()
        .expect("a client")
}

/// A free loopback port (free when this returns).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Kills a child process when dropped.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A JSON-RPC `SendMessage` of "hello" with id `message_id` (the
/// conformance agent follows its prefix) to `base`, with `headers`
/// (an API key, `X-Forwarded-For`...): the JSON-RPC answer.
pub async fn send_hello(
    http: &reqwest::Client,
    base: &str,
    message_id: &str,
    headers: &[(&str, &str)],
) -> Value {
    let mut r = http
        .post(format!("{base}/"))
        .header("A2A-Version", "1.0")
        .json(&serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {
                "messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "hello"}],
            }},
        }));
    for (name, value) in headers {
        r = r.header(*name, *value);
    }
    r.send()
        .await
        .expect("send")
        .json()
        .await
        .expect("a JSON-RPC answer")
}
