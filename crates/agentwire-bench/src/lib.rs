//! Performance harness for the A2A server.
//!
//! Two binaries live in this crate:
//!
//! * `bare-server`: the baseline. A bare axum server that parses the request
//!   JSON and answers with fixed bytes shaped like the echo agent's answer to a
//!   blocking `SendMessage`, plus a pre-serialized agent card. No A2A logic.
//! * `stream-probe`: measures SSE behaviour of a running A2A server (time to
//!   first event, end-to-end time of a chunked stream, many held streams).
//!
//! The helpers below are shared by both and unit-tested here.

use std::time::Duration;

/// The fixed JSON-RPC answer of `bare-server` to `POST /`: the shape the echo
/// agent returns for a blocking `SendMessage` of "hello", with identifiers of
/// realistic length (UUIDs) so the byte count is comparable.
pub const SEND_MESSAGE_RESPONSE: &str = concat!(
    r#"{"jsonrpc":"2.0","id":1,"result":{"task":{"#,
    r#""id":"0196f3a2-7c1e-7d40-9b1a-3c5e8f2d4a10","#,
    r#""contextId":"0196f3a2-7c1e-7d40-9b1a-3c5e8f2d4a11","#,
    r#""status":{"state":"TASK_STATE_COMPLETED","timestamp":"2026-01-01T00:00:00.000Z"},"#,
    r#""artifacts":[{"artifactId":"0196f3a2-7c1e-7d40-9b1a-3c5e8f2d4a12","name":"echo","parts":[{"text":"hello"}]}],"#,
    r#""history":[{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello"}],"#,
    r#""contextId":"0196f3a2-7c1e-7d40-9b1a-3c5e8f2d4a11","taskId":"0196f3a2-7c1e-7d40-9b1a-3c5e8f2d4a10"}]}}}"#
);

/// The multi-thread runtime of a benchmark server: `workers` threads, or
/// one per core (tokio also reads `TOKIO_WORKER_THREADS`).
pub fn server_runtime(workers: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.enable_all();
    if let Some(w) = workers {
        rt.worker_threads(w.max(1));
    }
    rt.build()
}

/// The fixed, pre-serialized agent card served by `bare-server` at
/// `/.well-known/agent-card.json` (v1.0 shape, echo agent).
pub fn agent_card(port: u16) -> String {
    format!(
        concat!(
            r#"{{"name":"Echo Agent","description":"Echoes the text of each message back as an artifact.","#,
            r#""supportedInterfaces":["#,
            r#"{{"url":"http://127.0.0.1:{port}/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}},"#,
            r#"{{"url":"http://127.0.0.1:{port}/","protocolBinding":"HTTP+JSON","protocolVersion":"1.0"}},"#,
            r#"{{"url":"http://127.0.0.1:{port}","protocolBinding":"GRPC","protocolVersion":"1.0"}}],"#,
            r#""provider":{{"url":"https://example.invalid","organization":"agentwire"}},"#,
            r#""version":"0.1.0","#,
            r#""capabilities":{{"streaming":true,"pushNotifications":true,"extendedAgentCard":false}},"#,
            r#""defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"#,
            r#""skills":[{{"id":"echo","name":"Echo","description":"Repeats the message text.","#,
            r#""tags":["echo","test"],"examples":["hello"],"inputModes":["text/plain"],"outputModes":["text/plain"]}}]}}"#
        ),
        port = port
    )
}

/// The default `SendStreamingMessage` body of the probe (a one-word "hello").
pub const STREAM_HELLO_BODY: &str = r#"{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"hello"}]}}}"#;

/// The default body of the 100-chunk test: 100 words of text and
/// `metadata: {"chunks": 100}` (the echo agent's chunking contract may
/// differ; `--body-file` overrides this).
pub fn chunked_body(words: usize, chunks: usize) -> String {
    let text: Vec<String> = (0..words).map(|i| format!("word{i}")).collect();
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": {
            "messageId": "m-chunks-{{i}}",
            "role": "ROLE_USER",
            "parts": [{"text": text.join(" ")}],
            "metadata": {"chunks": chunks}
        }}
    })
    .to_string()
}

/// Refuse every target that is not loopback: only `127.0.0.1`, `localhost`
/// and `::1` are accepted.
pub fn check_loopback(url: &reqwest::Url) -> anyhow::Result<()> {
    match url.scheme() {
        "http" | "https" => {}
        other => anyhow::bail!("unsupported URL scheme {other:?} (use http://)"),
    }
    // `host_str` is the normalized form: IPv4 in dotted decimal, domains in
    // lower case, IPv6 in brackets.
    let ok = matches!(url.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
    if !ok {
        anyhow::bail!(
            "refusing target {url}: only loopback hosts (127.0.0.1, localhost, ::1) may be probed"
        );
    }
    Ok(())
}

/// What one SSE event of a JSON-RPC stream says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// A JSON-RPC error object.
    Error(String),
    /// A status update whose state is terminal or interrupted (the stream
    /// should close after it); carries the state name.
    Final(String),
    /// Any other result (task, message, artifact update, working status...).
    Other,
    /// Not JSON.
    Garbage,
}

/// Task states after which a stream closes (terminal or interrupted).
pub const FINAL_STATES: &[&str] = &[
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_AUTH_REQUIRED",
];

/// Classifies one event's data (a JSON-RPC response carrying a StreamResponse).
pub fn classify(data: &str) -> EventKind {
    let v: serde_json::Value = match serde_json::from_str(data) {
        Ok(v) => v,
        Err(_) => return EventKind::Garbage,
    };
    if let Some(e) = v.get("error") {
        return EventKind::Error(e.to_string());
    }
    let state = v
        .pointer("/result/statusUpdate/status/state")
        .and_then(|s| s.as_str());
    match state {
        Some(s) if FINAL_STATES.contains(&s) => EventKind::Final(s.to_string()),
        _ => EventKind::Other,
    }
}

/// Summary statistics of a sample of durations.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    pub n: usize,
    pub min: Duration,
    pub median: Duration,
    pub p99: Duration,
    pub max: Duration,
    pub mean: Duration,
}

/// Nearest-rank percentile of a sorted sample (`q` in 0..=100).
pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((q / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn stats(sample: &[Duration]) -> Option<Stats> {
    if sample.is_empty() {
        return None;
    }
    let mut s = sample.to_vec();
    s.sort();
    let sum: Duration = s.iter().sum();
    Some(Stats {
        n: s.len(),
        min: s[0],
        median: percentile(&s, 50.0),
        p99: percentile(&s, 99.0),
        max: s[s.len() - 1],
        mean: sum / s.len() as u32,
    })
}

/// Resident memory (VmRSS) of a process in KiB, from `/proc/PID/status`.
pub fn vm_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Fills the per-request placeholders of a body template: `{{i}}` becomes the
/// request index and `{{taskId}}` the given task id.
pub fn fill_template(template: &str, i: usize, task_id: Option<&str>) -> String {
    let mut s = template.replace("{{i}}", &i.to_string());
    if let Some(t) = task_id {
        s = s.replace("{{taskId}}", t);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_bodies_are_json() {
        let v: serde_json::Value = serde_json::from_str(SEND_MESSAGE_RESPONSE).unwrap();
        assert_eq!(
            v.pointer("/result/task/status/state").unwrap(),
            "TASK_STATE_COMPLETED"
        );
        assert_eq!(
            v.pointer("/result/task/history/0/role").unwrap(),
            "ROLE_USER"
        );
        let card: serde_json::Value = serde_json::from_str(&agent_card(8080)).unwrap();
        assert_eq!(
            card["supportedInterfaces"][0]["url"],
            "http://127.0.0.1:8080/"
        );
        let _: serde_json::Value = serde_json::from_str(STREAM_HELLO_BODY).unwrap();
        let b: serde_json::Value = serde_json::from_str(&chunked_body(100, 100)).unwrap();
        let text = b
            .pointer("/params/message/parts/0/text")
            .unwrap()
            .as_str()
            .unwrap();
        assert_eq!(text.split(' ').count(), 100);
        assert_eq!(b.pointer("/params/message/metadata/chunks").unwrap(), 100);
    }

    #[test]
    fn loopback_only() {
        for ok in [
            "http://127.0.0.1:8080/",
            "http://localhost:1/",
            "http://LOCALHOST/",
            "http://[::1]:9/",
        ] {
            check_loopback(&ok.parse().unwrap()).unwrap();
        }
        for bad in [
            "http://127.0.0.2/",
            "http://10.0.0.1/",
            "http://example.com/",
            "http://localhost.example.com/",
            "http://[::2]/",
            "ftp://127.0.0.1/",
        ] {
            assert!(check_loopback(&bad.parse().unwrap()).is_err(), "{bad}");
        }
    }

    #[test]
    fn classify_events() {
        assert_eq!(
            classify(
                r#"{"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"status":{"state":"TASK_STATE_COMPLETED"}}}}"#
            ),
            EventKind::Final("TASK_STATE_COMPLETED".into())
        );
        assert_eq!(
            classify(
                r#"{"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"status":{"state":"TASK_STATE_WORKING"}}}}"#
            ),
            EventKind::Other
        );
        assert!(matches!(
            classify(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"x"}}"#),
            EventKind::Error(_)
        ));
        assert_eq!(classify("nope"), EventKind::Garbage);
    }

    #[test]
    fn percentiles() {
        let s: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let st = stats(&s).unwrap();
        assert_eq!(st.median, Duration::from_millis(50));
        assert_eq!(st.p99, Duration::from_millis(99));
        assert_eq!(st.max, Duration::from_millis(100));
        assert_eq!(
            percentile(&[Duration::from_secs(1)], 99.0),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn templates() {
        assert_eq!(fill_template("a{{i}}b{{taskId}}", 7, Some("t")), "a7bt");
        assert_eq!(fill_template("{{taskId}}", 0, None), "{{taskId}}");
    }
}
