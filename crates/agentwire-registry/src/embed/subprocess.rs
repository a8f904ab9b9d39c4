//! The sentence-embedding model in a sidecar process: [`SubprocessEmbedder`]
//! (the client, always compiled) and [`serve_lines`] (the sidecar's side,
//! what `a2a-embed`, the program of the package agentwire-embed, runs).
//!
//! Why a sidecar: the model's code (the encoder, tokenizers) is larger than
//! what the `a2a` command may grow by (its release binary has a 25 MiB
//! bound), so `a2a` speaks to a program beside it, `a2a-embed`, that loads
//! the model. A registry without the sidecar routes by words.
//!
//! The protocol (version [`PROTOCOL`]): JSON, one object a line, UTF-8.
//!
//! - The sidecar's first line on its standard output is its hello,
//!   `{"a2aEmbed": 1, "model": NAME, "dimensions": N, "modelId": ID}`
//!   ([`Hello`]; `modelId` optional), or
//!   `{"error": WHY}` when the model cannot be loaded (it then exits).
//! - Each request on its standard input is `{"texts": [TEXT, ...]}`
//!   ([`Request`]: at most [`MAX_TEXTS`] texts, a line at most
//!   [`MAX_REQUEST_BYTES`]); each answer one line, in order: `{"vectors":
//!   [[f32, ...], ...]}` (one vector of N numbers a text) or `{"error":
//!   WHY}`. A request it cannot read is answered with an error line; the
//!   sidecar goes on with the next line.
//! - The sidecar exits when its standard input ends.
//!
//! The client sends one request at a time, waits at most its timeout for
//! the answer (the sidecar is killed past it, and started again by the
//! next request), starts the sidecar again once when it finds it has
//! exited, and kills it when dropped. After a request that left no
//! sidecar (it could not start, died again, timed out or garbled), no new
//! one is started for a while (1 s, doubled after each failure in a row,
//! at most 60 s): requests fail at once meanwhile. Each failure is an [`EmbedError`]:
//! the router then routes the request by words (see [`crate::route`]).
//!
//! Hand-written (no crate): a line protocol over a child's pipes is a few
//! dozen lines of `std`, and the registry has no RPC framework to reuse for
//! a pipe.

use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::route::{EmbedError, Embedder};

/// The protocol's version, in the hello.
pub const PROTOCOL: u32 = 1;

/// The most texts in one request (the client splits larger calls).
pub const MAX_TEXTS: usize = 64;

/// The longest text sent, in bytes (the client cuts longer texts at a
/// character boundary: the model reads its first 256 tokens or so anyway).
pub const MAX_TEXT_BYTES: usize = 16 * 1024;

/// The longest request line the sidecar reads (longer ones are answered
/// with an error and skipped).
pub const MAX_REQUEST_BYTES: usize = 8 << 20;

/// The longest answer line the client reads (longer ones are an error).
pub const MAX_REPLY_BYTES: usize = 32 << 20;

/// The sidecar's first line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The protocol's version ([`PROTOCOL`]).
    #[serde(rename = "a2aEmbed")]
    pub protocol: u32,
    /// The model's name (for logs).
    pub model: String,
    /// The length of its vectors.
    pub dimensions: usize,
    /// What identifies its vectors (the model's
    /// [`Embedder::model_id`]: the registry keeps a card's vectors across
    /// restarts only for the same identifier). Absent: none is kept.
    #[serde(rename = "modelId", default, skip_serializing_if = "String::is_empty")]
    pub model_id: String,
}

/// A request: texts to embed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The texts.
    pub texts: Vec<String>,
}

/// An answer: the vectors, or why not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Reply {
    /// One vector a text, in order.
    Vectors {
        /// The vectors.
        vectors: Vec<Vec<f32>>,
    },
    /// Why the texts could not be embedded.
    Error {
        /// What happened.
        error: String,
    },
}

/// One line read with a bound.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// The line, without its end.
    Text(String),
    /// Longer than the bound (skipped up to its end), or not UTF-8.
    Invalid(&'static str),
    /// The input ended.
    End,
}

/// Reads one line of at most `max` bytes; a longer one is skipped to its
/// end and reported, so that the next line can be read.
pub fn read_line(input: &mut impl BufRead, max: usize) -> io::Result<Line> {
    let mut line = Vec::new();
    let mut too_long = false;
    let mut any = false;
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            if !any {
                return Ok(Line::End);
            }
            break;
        }
        any = true;
        let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(at) => (&buf[..at], Some(at + 1)),
            None => (buf, None),
        };
        if !too_long {
            if line.len() + chunk.len() > max {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = done.unwrap_or(buf.len());
        input.consume(used);
        if done.is_some() {
            break;
        }
    }
    if too_long {
        return Ok(Line::Invalid("the line is longer than allowed"));
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    match String::from_utf8(line) {
        Ok(s) => Ok(Line::Text(s)),
        Err(_) => Ok(Line::Invalid("the line is not UTF-8")),
    }
}

fn write_json(output: &mut impl Write, value: &impl Serialize) -> io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(io::Error::other)?;
    line.push(b'\n');
    output.write_all(&line)?;
    output.flush()
}

/// The sidecar's side: writes `hello`, then answers each request line of
/// `input` with `embedder` until `input` ends (an error only when the
/// output cannot be written or the input read).
pub fn serve_lines(
    mut input: impl BufRead,
    mut output: impl Write,
    hello: &Hello,
    embedder: &dyn Embedder,
) -> io::Result<()> {
    write_json(&mut output, hello)?;
    loop {
        let reply = match read_line(&mut input, MAX_REQUEST_BYTES)? {
            Line::End => return Ok(()),
            Line::Invalid(why) => Reply::Error { error: why.into() },
            Line::Text(t) if t.trim().is_empty() => continue,
            Line::Text(t) => answer(&t, hello.dimensions, embedder),
        };
        write_json(&mut output, &reply)?;
    }
}

fn answer(line: &str, dimensions: usize, embedder: &dyn Embedder) -> Reply {
    let request: Request = match serde_json::from_str(line) {
        Ok(r) => r,
        Err(e) => {
            return Reply::Error {
                error: format!("not a request ({{\"texts\": [...]}}): {e}"),
            };
        }
    };
    if request.texts.len() > MAX_TEXTS {
        return Reply::Error {
            error: format!(
                "{} texts in one request, at most {MAX_TEXTS}",
                request.texts.len()
            ),
        };
    }
    let texts: Vec<&str> = request
        .texts
        .iter()
        .map(|t| truncate(t, MAX_TEXT_BYTES))
        .collect();
    match embedder.embed(&texts) {
        Ok(vectors)
            if vectors.len() == texts.len() && vectors.iter().all(|v| v.len() == dimensions) =>
        {
            Reply::Vectors { vectors }
        }
        Ok(_) => Reply::Error {
            error: "the model gave vectors of another count or length".into(),
        },
        Err(e) => Reply::Error { error: e.0 },
    }
}

/// `text` cut to at most `max` bytes, at a character boundary.
fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// How to start the sidecar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidecarCommand {
    /// The program (`a2a-embed`).
    pub program: PathBuf,
    /// Its arguments (`serve DIR`).
    pub args: Vec<OsString>,
}

impl SidecarCommand {
    /// `a2a-embed serve DIR`: the sidecar `program` serving the model in
    /// `model_dir`.
    pub fn serve(program: impl Into<PathBuf>, model_dir: &Path) -> Self {
        Self {
            program: program.into(),
            args: vec!["serve".into(), model_dir.as_os_str().to_owned()],
        }
    }
}

/// A running sidecar: its input, and its output's lines as a reader
/// thread passes them on.
struct Running {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<Line>,
}

impl Running {
    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// How it ended, if it has.
    fn exit(&mut self) -> String {
        match self.child.try_wait() {
            Ok(Some(status)) => format!("it exited ({status})"),
            _ => "it closed its output".into(),
        }
    }
}

/// The sidecar, when one runs, and the failures that left none.
struct State {
    running: Option<Running>,
    /// Requests in a row that ended without a sidecar (it could not start,
    /// it died again once started again, it timed out or garbled).
    failures: u32,
    /// No new sidecar is started before this (while `failures` > 0).
    retry_at: Option<Instant>,
}

/// The router's [`Embedder`] in a sidecar process (see the module's
/// documentation for the protocol and the failures).
pub struct SubprocessEmbedder {
    command: SidecarCommand,
    hello: Hello,
    timeout: Duration,
    start_timeout: Duration,
    state: Mutex<State>,
}

impl std::fmt::Debug for SubprocessEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubprocessEmbedder")
            .field("command", &self.command)
            .field("hello", &self.hello)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// How long an answer may take by default (one request of at most
/// [`MAX_TEXTS`] texts).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the sidecar may take to load its model and say hello, by
/// default.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(120);

/// How long no sidecar is started after a request that left none: this
/// after the first such failure, doubled after each next one in a row, up
/// to [`BACKOFF_MAX`]. Meanwhile requests fail at once (the router routes
/// them by words) instead of each loading the model again: a sidecar that
/// dies on every request would otherwise cost every request two starts.
pub const BACKOFF_FIRST: Duration = Duration::from_secs(1);

/// The longest wait between two starts after failures.
pub const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// The wait after `failures` failures in a row (at least one).
fn backoff(failures: u32) -> Duration {
    BACKOFF_FIRST
        .saturating_mul(1u32 << failures.saturating_sub(1).min(16))
        .min(BACKOFF_MAX)
}

fn err(what: impl std::fmt::Display) -> EmbedError {
    EmbedError(format!("the embedding sidecar: {what}"))
}

impl SubprocessEmbedder {
    /// Starts the sidecar and waits for its hello (at most `start_timeout`):
    /// an error says why it could not start (no such program, the model
    /// could not be loaded, no hello). `timeout` bounds each answer.
    pub fn start(
        command: SidecarCommand,
        timeout: Duration,
        start_timeout: Duration,
    ) -> Result<Self, EmbedError> {
        let (running, hello) = spawn(&command, start_timeout)?;
        Ok(Self {
            command,
            hello,
            timeout,
            start_timeout,
            state: Mutex::new(State {
                running: Some(running),
                failures: 0,
                retry_at: None,
            }),
        })
    }

    /// The model's name, as the sidecar said.
    pub fn model(&self) -> &str {
        &self.hello.model
    }

    /// The length of its vectors.
    pub fn dimensions(&self) -> usize {
        self.hello.dimensions
    }

    /// The program it runs.
    pub fn program(&self) -> &Path {
        &self.command.program
    }

    /// One request, with one restart when the sidecar is found to have
    /// exited; none while a failure's back-off runs (see [`BACKOFF_FIRST`]).
    /// `wait`: how long to wait for the sidecar when another request has
    /// it (`None`: as long as it takes).
    fn request(&self, texts: &[&str], wait: Option<Duration>) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut line = serde_json::to_vec(&Request {
            texts: texts
                .iter()
                .map(|t| truncate(t, MAX_TEXT_BYTES).to_owned())
                .collect(),
        })
        .map_err(err)?;
        line.push(b'\n');
        let mut state = match wait {
            None => self.state.lock(),
            Some(wait) => self.state.try_lock_for(wait).ok_or_else(|| {
                err(format!(
                    "busy with other requests for over {wait:?} (this one is not queued)"
                ))
            })?,
        };
        if state.running.is_none()
            && let Some(at) = state.retry_at
        {
            let now = Instant::now();
            if now < at {
                return Err(err(format!(
                    "it failed {} time(s) in a row; not started again for {:.1?}",
                    state.failures,
                    at - now
                )));
            }
        }
        let result = self.exchange(&mut state.running, &line, texts.len());
        match &result {
            Ok(_) => {
                state.failures = 0;
                state.retry_at = None;
            }
            // The sidecar is still there (it refused these texts).
            Err(_) if state.running.is_some() => {}
            Err(e) => {
                state.failures = state.failures.saturating_add(1);
                let wait = backoff(state.failures);
                state.retry_at = Some(Instant::now() + wait);
                tracing::warn!(
                    program = %self.command.program.display(),
                    failures = state.failures,
                    "{e}: not started again for {wait:?} (requests are routed by words meanwhile)"
                );
            }
        }
        result
    }

    /// One request on the sidecar in `slot` (started when there is none),
    /// with one restart when it is found to have exited. `slot` is left
    /// empty when no sidecar is fit to answer the next request.
    fn exchange(
        &self,
        slot: &mut Option<Running>,
        line: &[u8],
        count: usize,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut restarted = false;
        loop {
            let mut running = match slot.take() {
                Some(r) => r,
                None => {
                    let (r, hello) = spawn(&self.command, self.start_timeout)?;
                    restarted = true;
                    if hello.dimensions != self.hello.dimensions {
                        r.stop();
                        return Err(err(format!(
                            "started again, it has vectors of {} dimensions, not {}",
                            hello.dimensions, self.hello.dimensions
                        )));
                    }
                    // Another model under the same directory: its vectors
                    // would not compare with those already indexed.
                    if hello.model_id != self.hello.model_id {
                        r.stop();
                        return Err(err(format!(
                            "started again, it has another model ({:?}, not {:?}): \
                             restart the registry to use it",
                            hello.model_id, self.hello.model_id
                        )));
                    }
                    r
                }
            };
            let sent = running
                .stdin
                .write_all(line)
                .and_then(|()| running.stdin.flush());
            let answer = match sent {
                Ok(()) => running.lines.recv_timeout(self.timeout),
                Err(_) => Err(RecvTimeoutError::Disconnected),
            };
            match answer {
                Ok(Line::Text(text)) => {
                    let reply = self.read_reply(&text, count);
                    if matches!(reply, Err(Fault::Garbled(_))) {
                        // Out of step with the protocol: a new one next time.
                        running.stop();
                    } else {
                        *slot = Some(running);
                    }
                    return reply.map_err(Fault::into_error);
                }
                Ok(Line::Invalid(why)) => {
                    running.stop();
                    return Err(err(format!("an unreadable answer: {why}")));
                }
                Err(RecvTimeoutError::Timeout) => {
                    running.stop();
                    return Err(err(format!(
                        "no answer within {:?} (stopped; started again by the next request)",
                        self.timeout
                    )));
                }
                Ok(Line::End) | Err(RecvTimeoutError::Disconnected) => {
                    let why = running.exit();
                    running.stop();
                    if restarted {
                        return Err(err(format!("{why}, also when started again")));
                    }
                    tracing::warn!(
                        program = %self.command.program.display(),
                        "the embedding sidecar stopped ({why}): starting it again"
                    );
                }
            }
        }
    }

    fn read_reply(&self, text: &str, count: usize) -> Result<Vec<Vec<f32>>, Fault> {
        let reply: Reply = serde_json::from_str(text)
            .map_err(|e| Fault::Garbled(format!("an answer that is not the protocol's: {e}")))?;
        let vectors = match reply {
            Reply::Error { error } => return Err(Fault::Refused(error)),
            Reply::Vectors { vectors } => vectors,
        };
        if vectors.len() != count {
            return Err(Fault::Garbled(format!(
                "{} vectors for {count} texts",
                vectors.len()
            )));
        }
        if let Some(v) = vectors
            .iter()
            .find(|v| v.len() != self.hello.dimensions || v.iter().any(|x| !x.is_finite()))
        {
            return Err(Fault::Garbled(format!(
                "a vector of {} numbers (not all finite, or not {})",
                v.len(),
                self.hello.dimensions
            )));
        }
        Ok(vectors)
    }
}

/// What went wrong with an answer.
enum Fault {
    /// The sidecar said it could not embed the texts (it is still fine).
    Refused(String),
    /// The answer is not what the protocol says.
    Garbled(String),
}

impl Fault {
    fn into_error(self) -> EmbedError {
        match self {
            Fault::Refused(why) => err(format!("it could not embed the texts: {why}")),
            Fault::Garbled(why) => err(why),
        }
    }
}

impl SubprocessEmbedder {
    /// `texts` in requests of at most [`MAX_TEXTS`], each waiting `wait`
    /// at most for the sidecar (see [`Self::request`]).
    fn requests(
        &self,
        texts: &[&str],
        wait: Option<Duration>,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(MAX_TEXTS) {
            out.extend(self.request(chunk, wait)?);
        }
        Ok(out)
    }
}

impl Embedder for SubprocessEmbedder {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.requests(texts, None)
    }

    /// One request at a time reaches the sidecar: one that finds it busy
    /// for longer than `wait` is an error at once (see
    /// [`Embedder::embed_within`]).
    fn embed_within(&self, texts: &[&str], wait: Duration) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.requests(texts, Some(wait))
    }

    /// The sidecar's model identifier, from its hello (empty when it
    /// gave none: then no vector is kept across restarts).
    fn model_id(&self) -> String {
        self.hello.model_id.clone()
    }
}

impl Drop for SubprocessEmbedder {
    fn drop(&mut self) {
        if let Some(r) = self.state.get_mut().running.take() {
            r.stop();
        }
    }
}

/// Starts the sidecar and reads its hello.
fn spawn(
    command: &SidecarCommand,
    start_timeout: Duration,
) -> Result<(Running, Hello), EmbedError> {
    let program = command.program.display().to_string();
    let mut child = Command::new(&command.program)
        .args(&command.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| err(format!("cannot start {program}: {e}")))?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(err(format!("{program} started without its pipes")));
    };
    let (tx, lines) = mpsc::channel();
    // The reader thread ends when the sidecar's output does (it exited or
    // was killed) or when nobody listens any more.
    let spawned = std::thread::Builder::new()
        .name("a2a-embed-reader".into())
        .spawn(move || {
            let mut out = BufReader::new(stdout);
            loop {
                let line = match read_line(&mut out, MAX_REPLY_BYTES) {
                    Ok(Line::End) | Err(_) => return,
                    Ok(l) => l,
                };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
    let mut running = Running {
        child,
        stdin,
        lines,
    };
    if let Err(e) = spawned {
        running.stop();
        return Err(err(format!("cannot start a thread: {e}")));
    }
    let first = match running.lines.recv_timeout(start_timeout) {
        Ok(Line::Text(t)) => t,
        Ok(Line::Invalid(why)) => {
            running.stop();
            return Err(err(format!(
                "{program} began with an unreadable line: {why}"
            )));
        }
        Ok(Line::End) | Err(RecvTimeoutError::Disconnected) => {
            let why = running.exit();
            running.stop();
            return Err(err(format!("{program} did not start: {why}")));
        }
        Err(RecvTimeoutError::Timeout) => {
            running.stop();
            return Err(err(format!(
                "{program} did not say hello within {start_timeout:?}"
            )));
        }
    };
    match serde_json::from_str::<Hello>(&first) {
        Ok(hello) if hello.protocol == PROTOCOL && hello.dimensions > 0 => Ok((running, hello)),
        Ok(hello) => {
            running.stop();
            Err(err(format!(
                "{program} speaks protocol {} with {} dimensions (this registry speaks {PROTOCOL})",
                hello.protocol, hello.dimensions
            )))
        }
        Err(_) => {
            running.stop();
            let why = match serde_json::from_str::<Reply>(&first) {
                Ok(Reply::Error { error }) => error,
                _ => format!("not a hello: {}", truncate(&first, 200)),
            };
            Err(err(format!("{program}: {why}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Vectors of two numbers: the text's length and 1.
    struct Lengths;

    impl Embedder for Lengths {
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            if texts.contains(&"fail") {
                return Err(EmbedError("no".into()));
            }
            Ok(texts.iter().map(|t| vec![t.len() as f32, 1.0]).collect())
        }
    }

    fn hello() -> Hello {
        Hello {
            protocol: PROTOCOL,
            model: "lengths".into(),
            dimensions: 2,
            model_id: String::new(),
        }
    }

    fn serve(input: &[u8]) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        serve_lines(input, &mut out, &hello(), &Lengths).unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn the_sidecar_says_hello_then_answers_each_line() {
        let out =
            serve(b"{\"texts\": [\"abc\", \"de\"]}\n\n{\"texts\": []}\r\n{\"texts\": [\"fail\"]}");
        assert_eq!(out.len(), 4, "{out:?}");
        assert_eq!(
            out[0],
            serde_json::json!({"a2aEmbed": 1, "model": "lengths", "dimensions": 2})
        );
        assert_eq!(
            out[1],
            serde_json::json!({"vectors": [[3.0, 1.0], [2.0, 1.0]]})
        );
        assert_eq!(out[2], serde_json::json!({"vectors": []}));
        assert_eq!(out[3], serde_json::json!({"error": "no"}));
    }

    #[test]
    fn bad_requests_are_answered_with_errors_and_the_next_line_is_read() {
        let many = serde_json::to_string(&Request {
            texts: vec!["x".into(); MAX_TEXTS + 1],
        })
        .unwrap();
        let mut input = Vec::new();
        input.extend_from_slice(b"not json\n{\"text\": 1}\n\xff\xfe\n");
        input.extend_from_slice(many.as_bytes());
        input.push(b'\n');
        input.extend(std::iter::repeat_n(b'a', MAX_REQUEST_BYTES + 10));
        input.extend_from_slice(b"\n{\"texts\": [\"ok\"]}\n");
        let out = serve(&input);
        assert_eq!(out.len(), 7, "{out:?}");
        for (k, want) in [
            (1, "not a request"),
            (2, "not a request"),
            (3, "not UTF-8"),
            (4, "at most 64"),
            (5, "longer than allowed"),
        ] {
            let e = out[k]["error"].as_str().unwrap_or_default();
            assert!(e.contains(want), "line {k}: {e}");
        }
        assert_eq!(out[6], serde_json::json!({"vectors": [[2.0, 1.0]]}));
    }

    #[test]
    fn the_back_off_doubles_up_to_its_bound() {
        assert_eq!(backoff(1), BACKOFF_FIRST);
        assert_eq!(backoff(2), BACKOFF_FIRST * 2);
        assert_eq!(backoff(3), BACKOFF_FIRST * 4);
        assert_eq!(backoff(7), BACKOFF_MAX);
        assert_eq!(backoff(u32::MAX), BACKOFF_MAX);
    }

    #[test]
    fn long_texts_are_cut_at_a_character_boundary() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("héllo", 3), "hé");
        assert_eq!(truncate("abc", 10), "abc");
    }

    #[test]
    fn a_line_is_read_within_its_bound() {
        let mut input: &[u8] = b"abcdef\nxy\nlast";
        assert_eq!(
            read_line(&mut input, 3).unwrap(),
            Line::Invalid("the line is longer than allowed")
        );
        assert_eq!(read_line(&mut input, 3).unwrap(), Line::Text("xy".into()));
        assert_eq!(read_line(&mut input, 4).unwrap(), Line::Text("last".into()));
        assert_eq!(read_line(&mut input, 4).unwrap(), Line::End);
    }

    #[test]
    fn a_program_that_does_not_exist_is_an_error() {
        let e = SubprocessEmbedder::start(
            SidecarCommand::serve("/nonexistent/a2a-embed", Path::new("/m")),
            DEFAULT_TIMEOUT,
            Duration::from_secs(5),
        )
        .unwrap_err();
        assert!(e.0.contains("cannot start /nonexistent/a2a-embed"), "{e}");
    }
}
