//! [`SentenceEmbedder`]: the model run in this process (feature
//! `semantic`; see the parent module), with the encoder of [`super::bert`].

use std::path::{Path, PathBuf};

use serde::Deserialize;
use tokenizers::{Tokenizer, TruncationParams};

use super::bert::{Config, Encoder, Tokens};
use crate::route::{EmbedError, Embedder};

/// How token vectors become one vector per text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The mean of the token vectors, padding left out.
    Mean,
    /// The vector of the first token (`[CLS]`).
    Cls,
}

/// Texts encoded at once (bounds the memory of one forward pass).
const BATCH: usize = 32;

/// A BERT-family sentence-embedding model loaded from a directory.
pub struct SentenceEmbedder {
    model: Encoder,
    tokenizer: Tokenizer,
    pooling: Pooling,
    normalize: bool,
    max_tokens: usize,
    dimensions: usize,
    name: String,
    /// What [`Embedder::model_id`] says (see [`SentenceEmbedder::model_id`]).
    id: String,
}

impl std::fmt::Debug for SentenceEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentenceEmbedder")
            .field("name", &self.name)
            .field("pooling", &self.pooling)
            .field("normalize", &self.normalize)
            .field("max_tokens", &self.max_tokens)
            .field("dimensions", &self.dimensions)
            .finish()
    }
}

/// `modules.json`: the pipeline of a sentence-transformers model.
#[derive(Deserialize)]
struct Module {
    #[serde(default)]
    path: String,
    #[serde(rename = "type", default)]
    kind: String,
}

/// The pooling module's `config.json`.
#[derive(Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
}

/// `sentence_bert_config.json`.
#[derive(Deserialize)]
struct SentenceConfig {
    max_seq_length: Option<usize>,
}

fn err(what: impl std::fmt::Display) -> EmbedError {
    EmbedError(what.to_string())
}

fn read(path: &Path) -> Result<Vec<u8>, EmbedError> {
    std::fs::read(path).map_err(|e| err(format!("cannot read {}: {e}", path.display())))
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, EmbedError> {
    serde_json::from_slice(&read(path)?)
        .map_err(|e| err(format!("{} is not what was expected: {e}", path.display())))
}

impl SentenceEmbedder {
    /// Loads the model in `dir` (see the module's documentation for the
    /// files it reads). Fails with a message naming the file at fault.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self, EmbedError> {
        let dir = dir.as_ref();
        if !dir.is_dir() {
            return Err(err(format!(
                "{} is not a directory (a sentence-embedding model's: config.json, \
                 tokenizer.json, model.safetensors)",
                dir.display()
            )));
        }
        let config: serde_json::Value = read_json(&dir.join("config.json"))?;
        match config.get("model_type").and_then(|v| v.as_str()) {
            None | Some("bert") => {}
            Some(other) => {
                return Err(err(format!(
                    "{}: model_type {other:?} is not supported (a BERT encoder is: \
                     all-MiniLM-L6-v2, bge-small-en-v1.5, ...)",
                    dir.join("config.json").display()
                )));
            }
        }
        let config: Config = serde_json::from_value(config).map_err(|e| {
            err(format!(
                "{} is not a BERT configuration: {e}",
                dir.join("config.json").display()
            ))
        })?;
        let (pooling, normalize) = Self::pipeline(dir)?;
        let sentence: Option<SentenceConfig> = {
            let p = dir.join("sentence_bert_config.json");
            if p.is_file() {
                Some(read_json(&p)?)
            } else {
                None
            }
        };
        let max_tokens = sentence
            .and_then(|s| s.max_seq_length)
            .unwrap_or(config.max_position_embeddings)
            .min(config.max_position_embeddings)
            .max(2);

        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| err(format!("cannot load {}: {e}", tokenizer_path.display())))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..Default::default()
            }))
            .map_err(|e| err(format!("{}: {e}", tokenizer_path.display())))?;
        // Batches are padded here, with an attention mask.
        tokenizer.with_padding(None);

        let weights_path = dir.join("model.safetensors");
        let weights = read(&weights_path)?;
        // What identifies the vectors: the files that make them (the
        // weights are in memory already: hashing them costs a fraction of
        // loading them) and the pipeline read from the others.
        let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
        let (config_bytes, tokenizer_bytes) =
            (read(&dir.join("config.json"))?, read(&tokenizer_path)?);
        for part in [&config_bytes[..], &tokenizer_bytes[..], &weights[..]] {
            digest.update(&(part.len() as u64).to_le_bytes());
            digest.update(part);
        }
        let digest: String = digest
            .finish()
            .as_ref()
            .iter()
            .take(16)
            .map(|b| format!("{b:02x}"))
            .collect();
        let model = Encoder::load(&config, &weights).map_err(|e| {
            err(format!(
                "{} does not hold the weights of the encoder that config.json describes: {e}",
                weights_path.display()
            ))
        })?;
        drop(weights);
        let name = dir
            .canonicalize()
            .unwrap_or_else(|_| PathBuf::from(dir))
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into());
        let id = format!(
            "{name}/{}d/{}/{}/{max_tokens}t/sha256:{digest}",
            config.hidden_size,
            match pooling {
                Pooling::Mean => "mean",
                Pooling::Cls => "cls",
            },
            if normalize { "normalized" } else { "raw" },
        );
        Ok(Self {
            model,
            tokenizer,
            pooling,
            normalize,
            max_tokens,
            dimensions: config.hidden_size,
            name,
            id,
        })
    }

    /// The pooling and whether vectors are normalised, from `modules.json`
    /// and the pooling module's configuration (mean pooling and
    /// normalisation without them).
    fn pipeline(dir: &Path) -> Result<(Pooling, bool), EmbedError> {
        let modules_path = dir.join("modules.json");
        if !modules_path.is_file() {
            return Ok((Pooling::Mean, true));
        }
        let modules: Vec<Module> = read_json(&modules_path)?;
        let normalize = modules.iter().any(|m| m.kind.ends_with("Normalize"));
        let Some(pool) = modules.iter().find(|m| m.kind.ends_with("Pooling")) else {
            return Ok((Pooling::Mean, normalize));
        };
        let pool_path = dir.join(&pool.path).join("config.json");
        if !pool_path.is_file() {
            return Ok((Pooling::Mean, normalize));
        }
        let p: PoolingConfig = read_json(&pool_path)?;
        let pooling = match (
            p.pooling_mode_mean_tokens,
            p.pooling_mode_cls_token,
            p.pooling_mode_max_tokens || p.pooling_mode_mean_sqrt_len_tokens,
        ) {
            (true, false, false) => Pooling::Mean,
            (false, true, false) => Pooling::Cls,
            _ => {
                return Err(err(format!(
                    "{}: only mean pooling or the [CLS] token alone are supported",
                    pool_path.display()
                )));
            }
        };
        Ok((pooling, normalize))
    }

    /// The model directory's name (for logs).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What identifies its vectors (its [`Embedder::model_id`]): the
    /// directory's name, the vectors' length, the pooling, the
    /// normalisation, the longest input and a SHA-256 of `config.json`,
    /// `tokenizer.json` and `model.safetensors`, e.g.
    /// `all-MiniLM-L6-v2/384d/mean/normalized/256t/sha256:…`.
    pub fn model_id(&self) -> &str {
        &self.id
    }

    /// The length of its vectors.
    pub fn dimensions(&self) -> usize {
        self.dimensions
    }

    /// The pooling the model prescribes.
    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    /// The longest input, in tokens (longer texts are truncated).
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encodings = texts
            .iter()
            .map(|t| self.tokenizer.encode(*t, true))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| err(format!("cannot tokenise: {e}")))?;
        // No padding: the encoder runs each text at its own length (see
        // `bert`), which is what a padded batch with its mask computes.
        let tokens: Vec<Tokens<'_>> = encodings
            .iter()
            .map(|e| Tokens {
                ids: e.get_ids(),
                types: e.get_type_ids(),
            })
            .collect();
        let hidden = self
            .model
            .forward(&tokens)
            .map_err(|e| err(format!("the model failed: {e}")))?;
        let h = self.model.hidden();
        let mut rows = hidden.chunks_exact(h);
        let mut out = Vec::with_capacity(texts.len());
        for t in &tokens {
            let own: Vec<&[f32]> = rows.by_ref().take(t.ids.len()).collect();
            let mut v = vec![0f32; h];
            match self.pooling {
                Pooling::Cls => {
                    if let Some(first) = own.first() {
                        v.copy_from_slice(first);
                    }
                }
                Pooling::Mean => {
                    for row in &own {
                        for (a, b) in v.iter_mut().zip(*row) {
                            *a += b;
                        }
                    }
                    let count = (own.len() as f32).max(1e-9);
                    v.iter_mut().for_each(|a| *a /= count);
                }
            }
            if self.normalize {
                let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-12);
                v.iter_mut().for_each(|a| *a /= norm);
            }
            out.push(v);
        }
        Ok(out)
    }
}

impl Embedder for SentenceEmbedder {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(BATCH) {
            out.extend(self.embed_batch(chunk)?);
        }
        Ok(out)
    }

    fn model_id(&self) -> String {
        self.id.clone()
    }
}
