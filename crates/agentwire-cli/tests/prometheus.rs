//! A real Prometheus server scrapes `a2a serve --metrics`: the test starts
//! the Debian `prometheus` server on loopback with a configuration file of
//! its own (scrape interval 1s), makes requests, and finds the request
//! counters they caused through Prometheus's HTTP API.
//!
//! Ignored unless asked for (`-- --ignored`): it needs the `prometheus`
//! program (Debian package `prometheus`), which CI installs.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentwire_client::{CallOptions, JsonRpcTransport, Transport};
use agentwire_types::{Message, SendMessageRequest};
use common::{Killed, free_port};

/// Bound on every wait.
const LIMIT: Duration = Duration::from_secs(90);

/// The prometheus program, where Debian puts it (or on the PATH).
fn prometheus() -> Option<String> {
    if std::path::Path::new("/usr/bin/prometheus").exists() {
        return Some("/usr/bin/prometheus".into());
    }
    let out = Command::new("sh")
        .args(["-c", "command -v prometheus"])
        .output()
        .ok()?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (!path.is_empty()).then_some(path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the prometheus server (Debian package prometheus); CI installs it and runs this with --ignored"]
async fn prometheus_scrapes_the_request_counters() {
    let prom = prometheus().expect("the prometheus program (apt-get install prometheus)");
    let mut serve = Command::new(env!("CARGO_BIN_EXE_a2a"))
        .args(["serve", "--store", "memory", "--port", "0", "--metrics"])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a2a serve");
    let mut out = BufReader::new(serve.stdout.take().expect("stdout"));
    let serve = Killed(serve);
    let mut line = String::new();
    out.read_line(&mut line).expect("the first line");
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_owned();
    let target = url.trim_start_matches("http://").to_owned();

    // Requests to count: three SendMessage over JSON-RPC.
    let rpc = JsonRpcTransport::new(format!("{url}/")).expect("JSON-RPC");
    for i in 0..3 {
        let req = SendMessageRequest {
            message: Some(Message::user_text("count me").with_message_id(format!("m-{i}"))),
            ..Default::default()
        };
        rpc.send_message(req, &CallOptions::new())
            .await
            .expect("SendMessage");
    }

    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: a2a\n    metrics_path: /metrics\n    \
             static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .expect("write the configuration");
    let port = free_port();
    let prometheus = Command::new(&prom)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus");
    let _prometheus = Killed(prometheus);

    agentwire_client::install_crypto_provider();
    let http = reqwest::Client::new();
    let query = r#"a2a_requests_total{binding="jsonrpc",operation="SendMessage",outcome="ok"}"#;
    let start = Instant::now();
    let mut last = String::new();
    loop {
        let answer = http
            .get(format!(
                "http://127.0.0.1:{port}/api/v1/query?query={}",
                percent_encoding::utf8_percent_encode(query, percent_encoding::NON_ALPHANUMERIC)
            ))
            .send()
            .await;
        if let Ok(r) = answer {
            let body: serde_json::Value = r.json().await.unwrap_or_default();
            let value = body["data"]["result"][0]["value"][1]
                .as_str()
                .and_then(|v| v.parse::<f64>().ok());
            if value == Some(3.0) {
                let metric = &body["data"]["result"][0]["metric"];
                assert_eq!(metric["job"], "a2a", "{body}");
                assert_eq!(metric["instance"], target.as_str(), "{body}");
                break;
            }
            last = body.to_string();
        }
        assert!(
            start.elapsed() < LIMIT,
            "Prometheus did not report the 3 requests within {LIMIT:?}; last answer: {last}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    drop(serve);
}
