//! What one peer can make `a2a` hold or reach (project issue 40): the
//! registry reads a card served in chunks only up to its limit and never
//! fetches internal addresses (nor follows a redirect to one); `a2a card
//! get` stops reading a huge card at its limit; `a2a serve` listening
//! beyond loopback (or on loopback behind a `--trusted-proxy`) refuses
//! loopback webhooks unless `--push-allow-loopback`, and on loopback still
//! delivers to them. Real processes on loopback.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::routing::{get, post};
use common::registry::Registry;
use common::{Env, Serving};

const ALICE: &str = "alice-token-0001";

/// `VmHWM` (peak resident memory) of a process, in kB.
fn peak_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// A server on 127.0.0.1 answering every GET of the card path with
/// `total` bytes of JSON-looking data in 64 KiB chunks, without
/// `Content-Length`; and `/redirect` with a 302 to `location`.
async fn huge_card_host(total: usize, location: &'static str) -> String {
    let app = axum::Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(move || async move {
                let chunk = bytes::Bytes::from(vec![b' '; 64 * 1024]);
                let n = total / chunk.len();
                let body = futures::stream::iter(
                    std::iter::once(Ok::<_, std::io::Error>(bytes::Bytes::from_static(
                        b"{\"name\": \"",
                    )))
                    .chain((0..n).map(move |_| Ok(chunk.clone()))),
                );
                (
                    [("content-type", "application/json")],
                    Body::from_stream(body),
                )
            }),
        )
        .route(
            "/redirect/.well-known/agent-card.json",
            get(move || async move { (http::StatusCode::FOUND, [("location", location)]) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("127.0.0.1:{}", addr.port())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_stops_reading_a_chunked_card_at_its_limit() {
    let host = huge_card_host(50 * 1024 * 1024, "http://169.254.169.254/").await;
    let env2 = Env::new();
    let reg = tokio::task::spawn_blocking(move || {
        let r = Registry::start(&env2, &[("alice", ALICE)], &[], Duration::from_secs(30));
        (r, env2)
    })
    .await
    .unwrap();
    let (reg, env2) = reg;
    let pid = reg.child.id();
    let before = peak_kb(pid).expect("the registry's VmHWM");
    let out = {
        let url = format!("http://{host}/.well-known/agent-card.json");
        let reg_url = reg.url.clone();
        tokio::task::spawn_blocking(move || {
            env2.run(&[
                "registry",
                "publish",
                "--registry",
                &reg_url,
                "--bearer",
                ALICE,
                &url,
            ])
        })
        .await
        .unwrap()
    };
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stderr.contains("larger than 1048576 bytes"),
        "{}",
        out.stderr
    );
    let after = peak_kb(pid).expect("the registry's VmHWM");
    assert!(
        after.saturating_sub(before) < 30 * 1024,
        "the registry's peak memory grew from {before} kB to {after} kB for a 50 MB card"
    );
    drop(reg);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_never_fetches_internal_addresses_nor_redirects_to_them() {
    let host = huge_card_host(1024, "http://169.254.169.254/latest/meta-data/card.json").await;
    let env = Env::new();
    let out = tokio::task::spawn_blocking(move || {
        let reg = Registry::start(&env, &[("alice", ALICE)], &[], Duration::from_secs(30));
        let mut outs = Vec::new();
        for url in [
            "http://169.254.169.254/latest/meta-data/card.json".to_owned(),
            "http://10.0.0.1/.well-known/agent-card.json".to_owned(),
            format!("http://{host}/redirect/.well-known/agent-card.json"),
        ] {
            outs.push((url.clone(), reg.publish(&env, ALICE, &url, &[])));
        }
        outs
    })
    .await
    .unwrap();
    for (url, out) in out {
        assert_ne!(out.code, 0, "{url}: {}", out.stdout);
        assert!(
            out.stderr
                .contains("refused by the registry's address policy"),
            "{url}: {}",
            out.stderr
        );
        let why = if url.contains("10.0.0.1") {
            "private"
        } else {
            "link-local"
        };
        assert!(out.stderr.contains(why), "{url}: {}", out.stderr);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_listening_beyond_loopback_refuses_loopback_agents() {
    let host = huge_card_host(1024, "http://127.0.0.1/").await;
    let env = Env::new();
    let out = tokio::task::spawn_blocking(move || {
        let mut reg = Registry::start(
            &env,
            &[("alice", ALICE)],
            &["--host", "0.0.0.0"],
            Duration::from_secs(30),
        );
        reg.url = reg.url.replace("0.0.0.0", "127.0.0.1");
        let url = format!("http://{host}/.well-known/agent-card.json");
        reg.publish(&env, ALICE, &url, &[])
    })
    .await
    .unwrap();
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stderr.contains("loopback") && out.stderr.contains("--fetch-allow"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn card_get_stops_reading_a_300_mb_card_at_its_limit() {
    let host = huge_card_host(300 * 1024 * 1024, "http://127.0.0.1/").await;
    let env = Env::new();
    let (out, peak) = tokio::task::spawn_blocking(move || {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("a2a"));
        for (k, _) in std::env::vars() {
            if k.starts_with("A2ACLI_") {
                cmd.env_remove(k);
            }
        }
        let mut child = cmd
            .args(["card", "get", "-a", &host, "-o", "json"])
            .env("HOME", env.home())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("a2a card get");
        let pid = child.id();
        let started = Instant::now();
        let mut peak = 0;
        while child.try_wait().expect("wait").is_none() {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "a2a card get hangs"
            );
            if let Some(kb) = peak_kb(pid) {
                peak = peak.max(kb);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        (child.wait_with_output().expect("output"), peak)
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let err: serde_json::Value = serde_json::from_str(&stdout).expect("an error envelope");
    assert_eq!(
        err["error"]["code"], "AGENTWIRE_RESPONSE_TOO_LARGE",
        "{stdout}"
    );
    assert!(
        err["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("agent card") && m.contains("1048576")),
        "{stdout}"
    );
    assert!(peak < 150 * 1024, "a2a card get peaked at {peak} kB");
}

/// A webhook on 127.0.0.1 counting the notifications it receives.
async fn counting_webhook() -> (u16, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&count);
    let app = axum::Router::new().route(
        "/",
        post(move || {
            let c = Arc::clone(&c);
            async move {
                c.fetch_add(1, Ordering::SeqCst);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (port, count)
}

/// `a2a send` to the agent of `serving` with a webhook at `push_url`.
fn send_with_push(env: &Env, serving: &Serving, push_url: &str) -> common::Out {
    let agent = format!("127.0.0.1:{}", serving.port());
    env.run(&[
        "send",
        "-a",
        &agent,
        "--push-url",
        push_url,
        "-o",
        "json",
        "hi",
    ])
}

async fn wait_for(count: &AtomicUsize) -> bool {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30) {
        if count.load(Ordering::SeqCst) > 0 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_beyond_loopback_refuses_loopback_webhooks_unless_allowed() {
    let (port, count) = counting_webhook().await;
    let hostname = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    let hostname = hostname.trim().to_owned();
    let name_is_loopback = !hostname.is_empty()
        && tokio::net::lookup_host((hostname.as_str(), 0))
            .await
            .map(|a| {
                let a: Vec<_> = a.collect();
                !a.is_empty() && a.iter().all(|x| x.ip().is_loopback())
            })
            .unwrap_or(false);
    let refused = tokio::task::spawn_blocking(move || {
        let env = Env::new();
        let serving = Serving::start(&env, &["--host", "0.0.0.0"]);
        // On loopback behind a reverse proxy, callers come from anywhere:
        // loopback webhooks are refused too.
        let proxied = Serving::start(&env, &["--trusted-proxy", "10.0.0.0/8"]);
        let proxied_out = send_with_push(&env, &proxied, &format!("http://127.0.0.1:{port}/"));
        let mut spellings: Vec<String> = [
            "127.0.0.1",
            "127.1",
            "0x7f000001",
            "2130706433",
            "[::1]",
            "[::ffff:127.0.0.1]",
            "localhost",
            "LOCALHOST.",
        ]
        .iter()
        .map(|h| format!("http://{h}:{port}/"))
        .collect();
        if name_is_loopback {
            spellings.push(format!("http://{hostname}:{port}/"));
        }
        let mut outs = vec![("behind a proxy".to_owned(), proxied_out)];
        for url in spellings {
            outs.push((url.clone(), send_with_push(&env, &serving, &url)));
        }
        outs
    })
    .await
    .unwrap();
    for (url, out) in refused {
        assert_ne!(out.code, 0, "{url} was accepted: {}", out.stdout);
        assert!(
            out.stderr.contains("webhook URL refused") && out.stderr.contains("loopback"),
            "{url}: {}",
            out.stderr
        );
    }
    assert_eq!(count.load(Ordering::SeqCst), 0);

    // With --push-allow-loopback, and on loopback (the default host), the
    // webhook gets the notifications.
    for args in [&["--host", "0.0.0.0", "--push-allow-loopback"][..], &[][..]] {
        count.store(0, Ordering::SeqCst);
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        let (env, serving, out) = tokio::task::spawn_blocking(move || {
            let env = Env::new();
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            let serving = Serving::start(&env, &a);
            let out = send_with_push(&env, &serving, &format!("http://127.0.0.1:{port}/"));
            (env, serving, out)
        })
        .await
        .unwrap();
        out.expect(0);
        assert!(wait_for(&count).await, "no notification delivered");
        drop(serving);
        drop(env);
    }
}
