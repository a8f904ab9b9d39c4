//! A real reverse proxy in front of `a2a serve --trusted-proxy`: nginx
//! (Debian package `nginx-light`) on loopback, configured as its
//! documentation says (`proxy_set_header X-Forwarded-For
//! $proxy_add_x_forwarded_for`), passes requests from clients at 127.0.0.2
//! and 127.0.0.3 to the server, which bounds each client on its own and
//! names it in its refusals; what a client writes in `X-Forwarded-For`
//! itself is not believed, and neither is the header of a caller that is
//! not the proxy.
//!
//! Ignored unless asked for (`-- --ignored`): it needs the `nginx` program,
//! which CI installs.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// The nginx program, where Debian puts it (or on the PATH).
fn nginx() -> Option<String> {
    if std::path::Path::new("/usr/sbin/nginx").exists() {
        return Some("/usr/sbin/nginx".into());
    }
    let out = Command::new("sh")
        .args(["-c", "command -v nginx"])
        .output()
        .ok()?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (!path.is_empty()).then_some(path)
}

/// A JSON-RPC `SendMessage` to the conformance agent at `base`, with an
/// `X-Forwarded-For` of the caller's own when given.
async fn send(
    http: &reqwest::Client,
    base: &str,
    message_id: &str,
    forwarded: Option<&str>,
) -> Value {
    let header: Vec<(&str, &str)> = forwarded
        .map(|f| ("X-Forwarded-For", f))
        .into_iter()
        .collect();
    send_hello(http, base, message_id, &header).await
}

fn state(answer: &Value) -> &str {
    answer["result"]["task"]["status"]["state"]
        .as_str()
        .unwrap_or_default()
}

/// Whether `answer` is the refusal of the bound on open tasks, naming
/// `caller`.
fn refused(answer: &Value, caller: &str) -> bool {
    let m = answer["error"]["message"].as_str().unwrap_or_default();
    answer["error"]["code"] == -32603 && m.contains(caller) && m.contains("open tasks")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nginx (Debian package nginx-light); CI installs it and runs this with --ignored"]
async fn clients_behind_nginx_are_callers_of_their_own() {
    let program = nginx().expect("the nginx program (apt-get install nginx-light)");
    let env = Env::new();
    let serving = Serving::start(
        &env,
        &[
            "--agent",
            "conformance",
            "--max-open-tasks-per-caller",
            "2",
            "--trusted-proxy",
            "127.0.0.1",
        ],
    );
    let dir = env.cwd();
    let port = free_port();
    let d = dir.display();
    let conf = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
         error_log {d}/nginx-error.log warn;\nevents {{ worker_connections 64; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
         fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         server {{\n    listen 127.0.0.1:{port};\n    location / {{\n\
         proxy_pass http://{upstream};\n      proxy_http_version 1.1;\n\
         proxy_set_header Host $host;\n\
         proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n    }}\n  }}\n}}\n",
        upstream = serving.addr(),
    );
    let conf_path = dir.join("nginx.conf");
    std::fs::write(&conf_path, conf).expect("write nginx.conf");
    let child = Command::new(&program)
        .arg("-e")
        .arg(dir.join("nginx-error.log"))
        .arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(&conf_path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start nginx");
    let _nginx = Killed(child);
    let proxy = format!("http://127.0.0.1:{port}");
    agentwire_client::install_crypto_provider();
    // nginx answers the card once it listens.
    let started = Instant::now();
    loop {
        if let Ok(r) = reqwest::get(format!("{proxy}/.well-known/agent-card.json")).await {
            assert_eq!(r.status(), 200, "the card through nginx");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "nginx did not answer: {}",
            std::fs::read_to_string(dir.join("nginx-error.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A client at 127.0.0.2: its two open tasks, then refused by name.
    let (a, b) = (client_from("127.0.0.2"), client_from("127.0.0.3"));
    for i in 0..2 {
        let r = send(&a, &proxy, &format!("tck-input-required-a{i}"), None).await;
        assert_eq!(state(&r), "TASK_STATE_INPUT_REQUIRED", "{r}");
    }
    let r = send(&a, &proxy, "tck-input-required-a2", None).await;
    assert!(refused(&r, "127.0.0.2"), "{r}");
    // Another client behind the same proxy goes on, although it writes an
    // address of its own choosing (nginx appends the one it sees).
    for i in 0..2 {
        let r = send(
            &b,
            &proxy,
            &format!("tck-input-required-b{i}"),
            Some("127.0.0.2"),
        )
        .await;
        assert_eq!(state(&r), "TASK_STATE_INPUT_REQUIRED", "{r}");
    }
    let r = send(&b, &proxy, "tck-input-required-b2", Some("198.51.100.1")).await;
    assert!(
        refused(&r, "127.0.0.3") && !r.to_string().contains("198.51.100.1"),
        "{r}"
    );
    // A caller that is not the proxy cannot pass for a client of it: at
    // 127.0.0.4, straight to the server, it is itself (not 127.0.0.3,
    // whose bound is reached).
    let c = client_from("127.0.0.4");
    let r = send(
        &c,
        &serving.base(),
        "tck-input-required-c0",
        Some("127.0.0.3"),
    )
    .await;
    assert_eq!(state(&r), "TASK_STATE_INPUT_REQUIRED", "{r}");
}
