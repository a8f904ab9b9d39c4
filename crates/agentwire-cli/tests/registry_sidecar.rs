//! Routing by meaning in the default `a2a` (without the feature
//! `semantic`): `a2a registry serve` runs the model in the sidecar
//! `a2a-embed`, and `a2a registry model install` runs `a2a-embed install`.
//!
//! Without the real model: a fake sidecar (agentwire-registry's
//! tests/data/fake-a2a-embed.sh: a "model" of three concepts, weather,
//! markets and anything else, and misbehaviours chosen by a file
//! `fake-mode` in the model's directory) routes a request that shares no
//! word with any card; a sidecar that answers garbage or nothing leaves the
//! registry serving, by words; without the sidecar, or without the model,
//! one line on stderr says why and how, and routing is by words. With the
//! real all-MiniLM-L6-v2 (`A2A_TEST_EMBEDDER` naming its directory, and the
//! real `a2a-embed` built beside `a2a`: `cargo build -p agentwire-embed`;
//! ignored otherwise), the shipped
//! arrangement routes by meaning.
#![cfg(not(feature = "semantic"))]

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::Env;
use common::registry::Registry;
use serde_json::Value;

const TOKEN: &str = "alice-token-0001";
const CARDS: &str = include_str!("../../agentwire-registry/tests/data/routing-cards.json");

fn fake_sidecar() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../agentwire-registry/tests/data/fake-a2a-embed.sh")
}

/// Where `serve` looks for the model in a test's home.
fn default_dir(env: &Env) -> PathBuf {
    env.home()
        .join(".local/share/a2a-cli/models/all-MiniLM-L6-v2")
}

/// The model's files (placeholders: the fake sidecar reads none of them),
/// with the fake's misbehaviour.
fn fake_model(dir: &Path, mode: &str) {
    std::fs::create_dir_all(dir).expect("model dir");
    for f in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::fs::write(dir.join(f), "{}").expect("model file");
    }
    std::fs::write(dir.join("fake-mode"), mode).expect("mode");
}

/// The weather agent with its current-weather skill only, and the market
/// analyst with its stock-quote skill only: one skill a concept of the
/// fake model.
fn publish_two(env: &Env, reg: &Registry) {
    let cards: Vec<Value> = serde_json::from_str(CARDS).expect("cards");
    for (name, skill) in [
        ("Weather Agent", "current-weather"),
        ("Stock Market Analyst", "stock-quote"),
    ] {
        let mut card = cards
            .iter()
            .find(|c| c["name"] == name)
            .expect("the card")
            .clone();
        let skills: Vec<Value> = card["skills"]
            .as_array()
            .expect("skills")
            .iter()
            .filter(|s| s["id"] == skill)
            .cloned()
            .collect();
        card["skills"] = Value::Array(skills);
        let file = env.cwd().join(format!("{skill}.json"));
        std::fs::write(&file, card.to_string()).expect("write card");
        reg.publish(env, TOKEN, file.to_str().expect("path"), &[])
            .expect(0);
    }
}

fn start(env: &Env, extra: &[&str]) -> Registry {
    Registry::start(env, &[("alice", TOKEN)], extra, Duration::from_secs(60))
}

#[test]
fn serve_routes_by_meaning_through_the_sidecar() {
    let env = Env::new();
    fake_model(&default_dir(&env), "ok");
    let sidecar = fake_sidecar();
    let reg = start(&env, &["--embed-sidecar", sidecar.to_str().expect("path")]);
    assert!(
        reg.banner.iter().any(|l| l.contains("route:")
            && l.contains("by meaning and words: model fake-concepts, 3 dimensions")),
        "{:?}",
        reg.banner
    );
    publish_two(&env, &reg);
    // No card says "chilly": the fake model's weather concept does.
    let r = reg.route(&env, "is it chilly in oslo at the moment?");
    assert_eq!(r["noFit"], false, "{r}");
    assert_eq!(r["matches"][0]["skillId"], "current-weather", "{r}");
    assert!(
        r["matches"][0]["why"]
            .as_str()
            .is_some_and(|w| w.contains("semantic similarity")),
        "{r}"
    );

    // By words alone, the same request fits nothing.
    let lexical = start(&env, &["--lexical"]);
    publish_two(&env, &lexical);
    let r = lexical.route(&env, "is it chilly in oslo at the moment?");
    assert_eq!(r["noFit"], true, "{r}");
}

#[test]
fn a_sidecar_that_answers_garbage_or_nothing_leaves_the_registry_routing_by_words() {
    for (mode, extra) in [
        ("garbage", &[][..]),
        ("hang", &["--embedder-timeout", "300ms"][..]),
    ] {
        let env = Env::new();
        fake_model(&default_dir(&env), mode);
        let sidecar = fake_sidecar();
        let mut args = vec!["--embed-sidecar", sidecar.to_str().expect("path")];
        args.extend_from_slice(extra);
        let reg = start(&env, &args);
        // Its skills get no vectors (the sidecar fails), but they are
        // published and routed by their words.
        publish_two(&env, &reg);
        for _ in 0..2 {
            let r = reg.route(&env, "What's the weather in Lisbon right now?");
            assert_eq!(r["matches"][0]["skillId"], "current-weather", "{mode}: {r}");
            assert!(
                r["matches"][0]["why"]
                    .as_str()
                    .is_some_and(|w| !w.contains("semantic similarity")),
                "{mode}: {r}"
            );
        }
        let r = reg.route(&env, "is it chilly in oslo at the moment?");
        assert_eq!(r["noFit"], true, "{mode}: {r}");
    }
}

/// Starts `a2a registry serve` with `args`, reads its banner, stops it and
/// returns the banner and what it wrote on stderr.
fn start_and_stop(env: &Env, args: &[&str]) -> (String, String) {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("a2a"))
        .args(["registry", "serve", "--port", "0", "--store", "memory"])
        .args(args)
        .env("HOME", env.home())
        .env_remove("XDG_DATA_HOME")
        .env_remove("A2A_EMBED_SIDECAR")
        .env_remove("A2A_REGISTRY_EMBEDDER")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a2a registry serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut banner = String::new();
    // The banner ends with "Press Ctrl-C"; a process that exits ends it too.
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        banner.push_str(&line);
        banner.push('\n');
        if line.starts_with("Press Ctrl-C") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    (banner, stderr)
}

#[test]
fn without_the_model_or_the_sidecar_one_line_says_why_and_routing_is_by_words() {
    let env = Env::new();
    let sidecar = fake_sidecar();
    let sidecar = sidecar.to_str().expect("path");
    // No model.
    let (banner, stderr) = start_and_stop(&env, &["--embed-sidecar", sidecar]);
    assert!(banner.contains("(by words only: no model)"), "{banner}");
    assert!(
        stderr.contains("routing by words only: no sentence-embedding model in")
            && stderr.contains("install it with: a2a registry model install"),
        "{stderr}"
    );
    // The model, but no sidecar where it is said to be.
    fake_model(&default_dir(&env), "ok");
    let (banner, stderr) = start_and_stop(&env, &["--embed-sidecar", "/nonexistent/a2a-embed"]);
    assert!(banner.contains("(by words only: no model)"), "{banner}");
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("routing by words only"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(
        said[0].contains("a2a-embed")
            && said[0].contains("release archive")
            && said[0].contains("cargo install agentwire-embed"),
        "{stderr}"
    );
    // A model the sidecar cannot load: said too, routing by words.
    fake_model(&default_dir(&env), "nohello");
    let (banner, stderr) = start_and_stop(&env, &["--embed-sidecar", sidecar]);
    assert!(banner.contains("(by words only: no model)"), "{banner}");
    assert!(
        stderr.contains("cannot be loaded") && stderr.contains("it is a fake"),
        "{stderr}"
    );
}

#[test]
fn embedder_dir_runs_the_sidecar_and_refuses_what_cannot_be_loaded() {
    let env = Env::new();
    let sidecar = fake_sidecar();
    let sidecar = sidecar.to_str().expect("path");
    let model = env.home().join("some-model");
    fake_model(&model, "nohello");
    let model = model.to_str().expect("path");
    let serve = |extra: &[&str]| {
        let mut args = vec![
            "registry",
            "serve",
            "--port",
            "0",
            "--store",
            "memory",
            "--embedder",
            model,
        ];
        args.extend_from_slice(extra);
        env.run(&args)
    };
    let out = serve(&["--embed-sidecar", sidecar]);
    out.expect(2);
    assert!(out.stderr.contains("it is a fake"), "{}", out.stderr);
    let out = serve(&["--embed-sidecar", "/nonexistent/a2a-embed"]);
    out.expect(2);
    assert!(
        out.stderr.contains("a2a-embed") && out.stderr.contains("release archive"),
        "{}",
        out.stderr
    );
}

#[test]
fn model_install_runs_the_sidecar_and_status_needs_none() {
    let env = Env::new();
    let sidecar = fake_sidecar();
    let sidecar = sidecar.to_str().expect("path");
    let out = env.run(&["registry", "model", "status"]);
    out.expect(1);
    assert!(out.stdout.contains("is not installed"), "{}", out.stdout);

    let dir = env.home().join("models/x");
    std::fs::create_dir_all(&dir).expect("dir");
    let d = dir.to_str().expect("path");
    let install = |extra: &[&str]| {
        let mut args = vec!["registry", "model", "install", "--dir", d];
        args.extend_from_slice(extra);
        env.run(&args)
    };
    let out = install(&["--embed-sidecar", sidecar]);
    out.expect(0);
    assert!(out.stdout.contains("already installed"), "{}", out.stdout);
    let out = install(&["--embed-sidecar", sidecar, "-o", "json"]);
    out.expect(0);
    assert_eq!(out.json()["alreadyInstalled"], true, "{}", out.stdout);
    // The sidecar's failure, with its kind: unreachable is exit 3.
    std::fs::write(dir.join("fake-mode"), "install-fails").expect("mode");
    let out = install(&["--embed-sidecar", sidecar]);
    out.expect(3);
    assert!(out.stderr.contains("index.invalid"), "{}", out.stderr);
    // Without the sidecar: exit 2 and where to get it.
    let out = install(&["--embed-sidecar", "/nonexistent/a2a-embed"]);
    out.expect(2);
    assert!(out.stderr.contains("release archive"), "{}", out.stderr);
}

#[test]
#[ignore = "needs all-MiniLM-L6-v2 (A2A_TEST_EMBEDDER=DIR) and a2a-embed beside a2a"]
fn the_real_sidecar_beside_a2a_routes_by_meaning() {
    let Some(model) = std::env::var_os("A2A_TEST_EMBEDDER") else {
        panic!("A2A_TEST_EMBEDDER must name the directory of all-MiniLM-L6-v2");
    };
    let beside = assert_cmd::cargo::cargo_bin("a2a").with_file_name("a2a-embed");
    assert!(
        beside.is_file(),
        "{} is missing: cargo build -p agentwire-embed",
        beside.display()
    );
    let env = Env::new();
    // The model where `a2a registry model install` puts it: serve finds it,
    // and a2a-embed beside a2a, without options.
    let dir = default_dir(&env);
    std::fs::create_dir_all(&dir).expect("dir");
    for f in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::fs::copy(Path::new(&model).join(f), dir.join(f)).expect("copy the model");
    }
    let reg = start(&env, &[]);
    assert!(
        reg.banner.iter().any(|l| l.contains("route:")
            && l.contains("384 dimensions")
            && l.contains("a2a-embed")),
        "{:?}",
        reg.banner
    );
    let cards: Vec<Value> = serde_json::from_str(CARDS).expect("cards");
    for (i, card) in cards.iter().enumerate() {
        let file = env.cwd().join(format!("card-{i}.json"));
        std::fs::write(&file, card.to_string()).expect("write card");
        reg.publish(&env, TOKEN, file.to_str().expect("path"), &[])
            .expect(0);
    }
    for (text, skill) in [
        ("is it cold in oslo at the moment?", "current-weather"),
        ("where's the nasdaq at today?", "stock-quote"),
    ] {
        let r = reg.route(&env, text);
        assert_eq!(r["noFit"], false, "{text}: {r}");
        assert_eq!(r["matches"][0]["skillId"], skill, "{text}: {r}");
    }
    let status = env.run(&["registry", "model", "status"]);
    status.expect(0);
}
