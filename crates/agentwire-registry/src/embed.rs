//! A local sentence-embedding model as the router's
//! [`Embedder`](crate::Embedder): run in this process
//! ([`SentenceEmbedder`], feature `semantic`), or in a sidecar process,
//! `a2a-embed` ([`SubprocessEmbedder`], always compiled: a program without
//! the model code of its own speaks to it over a pipe, see
//! [`subprocess`]), and the model installed and checked ([`install`]).
//!
//! `SentenceEmbedder::load` reads a model directory in the layout of the
//! `sentence-transformers` library, as a model is published and packaged:
//!
//! - `config.json`: a BERT encoder (`model_type` `bert`, e.g.
//!   all-MiniLM-L6-v2, 22 M parameters, 384 dimensions);
//! - `tokenizer.json`: its tokenizer (WordPiece), read with the `tokenizers`
//!   crate (pure Rust: no Oniguruma, no C++);
//! - `model.safetensors`: the weights, read into memory (no memory map);
//! - optionally `modules.json`, the pooling module's `config.json` (mean of
//!   the tokens or the `[CLS]` token) and `sentence_bert_config.json` (the
//!   longest input, in tokens): what the model prescribes. Without them,
//!   mean pooling, normalised vectors and the encoder's own longest input.
//!
//! The encoder runs on the CPU, in pure Rust (a forward pass of its own,
//! `bert.rs`: the weights laid out once at load, AVX2 when the CPU has
//! it). A text is tokenised (with the model's special tokens, truncated to
//! its longest input), each text of a batch is encoded at its own length
//! (what padding with an attention mask computes), the encoder's last
//! hidden states are pooled over the text's tokens, and the vector is
//! scaled to length 1 when the model says so.
//!
//! Why a model at all: a request says what it needs in its own words ("is
//! it cold in oslo at the moment?", "where's the nasdaq at today?"), and
//! words are all the lexical router has (see [`crate::route`]). Why this
//! way: no service to call, no runtime to install, weights from a
//! directory the operator chose, and a default build without any of it.

#[cfg(feature = "semantic")]
mod bert;
pub mod install;
#[cfg(feature = "semantic")]
mod sentence;
pub mod subprocess;

#[cfg(feature = "semantic")]
pub use sentence::{Pooling, SentenceEmbedder};
pub use subprocess::SubprocessEmbedder;
