//! Routing through the public API: the lexical router on the labelled
//! cards, "no skill fits" and filters, and a semantic model plugged in
//! through the `Embedder` trait.

mod common;

use std::sync::Arc;

use agentwire_client::registry::{FilterValue, RouteRequest};
use agentwire_registry::{EmbedError, Embedder};
use common::{registry, route};

#[tokio::test]
async fn requests_go_to_the_skill_whose_examples_fit() {
    let r = registry(None).await;
    let a = route(&r, "Which dependencies block our upgrade to Node 24?");
    let m = a.chosen().expect("a choice");
    assert_eq!(
        (m.agent_name.as_str(), m.skill_id.as_str()),
        (
            "Dependency Compatibility Agent",
            "dependency-compatibility-analysis"
        )
    );
    assert!(m.why.contains("closest example"), "{}", m.why);
    let a = route(&r, "book a flight from Berlin to Madrid on Friday");
    assert_eq!(
        a.chosen().map(|m| m.skill_id.as_str()),
        Some("flight-search")
    );
    // Nothing registered does this: said so, with the reason.
    let a = route(&r, "play some relaxing jazz music");
    assert!(a.no_fit && a.chosen().is_none(), "{a:?}");
    assert!(a.reason.unwrap().contains("no skill fits") || a.matches.is_empty());
    // Filters narrow the candidates (skill-level media types too).
    let mut f = agentwire_client::registry::Filter::new();
    f.insert("inputMode".into(), FilterValue::One("image/*".into()));
    let a = r
        .route(&RouteRequest {
            text: "read the amounts from my receipts".into(),
            filter: Some(f),
            limit: Some(5),
        })
        .unwrap();
    assert!(
        a.matches.iter().all(|m| m.skill_id == "receipt-extraction"
            || m.skill_id == "background-removal"
            || m.skill_id == "invoice-data-extraction"),
        "{a:?}"
    );
}

/// A toy "semantic model": words to concept axes, so that synonyms the
/// cards never use land near the skill that means them.
struct Concepts;

const AXES: &[&[&str]] = &[
    &[
        "weather",
        "temperature",
        "warm",
        "cold",
        "hot",
        "chilly",
        "forecast",
        "rain",
        "umbrella",
    ],
    &[
        "currency", "convert", "euros", "dollars", "pounds", "yen", "exchange",
    ],
    &["flight", "fly", "plane", "airline", "ticket"],
];

impl Embedder for Concepts {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let t = t.to_lowercase();
                let words: Vec<&str> = t.split(|c: char| !c.is_alphanumeric()).collect();
                AXES.iter()
                    .map(|axis| words.iter().filter(|w| axis.contains(w)).count() as f32)
                    .collect()
            })
            .collect())
    }
}

#[tokio::test]
async fn an_embedder_brings_in_what_words_alone_miss() {
    let request = "is it chilly outside in Oslo?";
    let lexical = registry(None).await;
    let a = route(&lexical, request);
    assert!(
        a.chosen().is_none_or(|m| m.agent_name != "Weather Agent"),
        "{a:?}"
    );
    let semantic = registry(Some(Arc::new(Concepts))).await;
    let a = route(&semantic, request);
    let m = a.matches.first().expect("a candidate");
    assert_eq!(m.agent_name, "Weather Agent", "{a:?}");
    assert!(m.why.contains("semantic similarity"), "{}", m.why);
}

/// A model that fails on every text.
struct Broken;

impl Embedder for Broken {
    fn embed(&self, _texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Err(EmbedError("the model is gone".into()))
    }
}

#[tokio::test]
async fn a_failing_embedder_leaves_routing_to_the_words() {
    let lexical = registry(None).await;
    let broken = registry(Some(Arc::new(Broken))).await;
    for text in [
        "Which dependencies block our upgrade to Node 24?",
        "book a flight from Berlin to Madrid on Friday",
        "play some relaxing jazz music",
        "is it chilly outside in Oslo?",
    ] {
        let a = route(&broken, text);
        assert_eq!(a, route(&lexical, text), "{text}");
        assert!(a.matches.iter().all(|m| !m.why.contains("semantic")));
    }
}
