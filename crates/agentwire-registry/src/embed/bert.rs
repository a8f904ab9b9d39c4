//! The BERT encoder's forward pass, written for what the router asks of it:
//! a few short texts at a time (one request of 10 to 20 tokens on the path
//! of every routed request; a card's skills, 32 texts at most, when it is
//! published), on the CPU, one thread.
//!
//! Why our own and not `candle` (which this replaced, and which the tests
//! of `agentwire-embed` still run as the reference): for one text of a
//! dozen tokens, candle's matrix products (the `gemm` crate) repacked the
//! 42 MB of the encoder's weights on every product of every request (half
//! of the CPU time, `perf`), and each of its hundreds of operations a
//! request allocated a tensor. Here the weights are laid out once, at load
//! (each output's weights contiguous, PyTorch's own layout, the query, key
//! and value projections in one matrix), every product is a tile of dot
//! products streamed over them (AVX2 and FMA when the CPU has them,
//! detected at run time; plain Rust otherwise), and a batch is not padded:
//! the texts' tokens are concatenated for the products (which work token by
//! token) and attention runs on each text alone, which is what the padding
//! mask computes (a masked key's weight is exactly 0 after the softmax).
//!
//! What it computes is BERT as `transformers` defines it (and candle's
//! `BertModel`): word, position and token-type embeddings summed and
//! normalised; per layer, multi-head self-attention (scaled dot products,
//! softmax), a projection, a residual connection and LayerNorm, then the
//! feed-forward layer (`hidden_act` from `config.json`: `gelu` is the erf
//! GELU, `gelu_new` / `gelu_pytorch_tanh` the tanh approximation, `relu`),
//! a projection, a residual connection and LayerNorm (`layer_norm_eps`
//! from `config.json`). The large products run on two threads
//! (`Encoder::linear`).

use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

/// The activation of the feed-forward layer (`hidden_act`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Activation {
    /// `gelu`: x Φ(x), with the error function.
    GeluErf,
    /// `gelu_new`, `gelu_pytorch_tanh`, `gelu_fast`: the tanh approximation.
    GeluTanh,
    /// `relu`.
    Relu,
}

/// What `config.json` says of the encoder (the fields read).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub position_embedding_type: Option<String>,
    #[serde(default)]
    pub model_type: Option<String>,
}

fn default_act() -> String {
    "gelu".into()
}
fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}

impl Config {
    fn activation(&self) -> Result<Activation, String> {
        match self.hidden_act.as_str() {
            "gelu" => Ok(Activation::GeluErf),
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" | "geluapproximate" => {
                Ok(Activation::GeluTanh)
            }
            "relu" => Ok(Activation::Relu),
            other => Err(format!(
                "hidden_act {other:?} is not supported (gelu, gelu_new, relu are)"
            )),
        }
    }
}

/// A dense layer: `y = x Wᵀ + b`, `w` of `out` rows of `inp` numbers.
///
/// With AVX2, the weights are kept in half precision (`half`, `w` then
/// empty) and widened in the registers: a request reads all 42 MB of the
/// encoder's `f32` weights (21 MB in halves) once per product, from memory
/// rather than the cache, and the products were bound by that, not by the
/// arithmetic (`perf`: the loads' stalls). A half keeps 11 bits of a
/// weight; the vectors stay within a cosine of 0.9999 of candle's (all in
/// `f32`; the test of agentwire-embed), and the routing accuracy is
/// unchanged (`benches/README.md`).
struct Linear {
    w: Vec<f32>,
    half: Vec<u16>,
    b: Vec<f32>,
    inp: usize,
    out: usize,
}

/// LayerNorm's scale and shift.
struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

struct Layer {
    /// Query, key and value in one: `3 × hidden` outputs.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    intermediate: Linear,
    output: Linear,
    output_norm: Norm,
}

/// A BERT encoder, its weights in memory.
pub(crate) struct Encoder {
    hidden: usize,
    heads: usize,
    eps: f32,
    activation: Activation,
    vocab: usize,
    types: usize,
    max_positions: usize,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    /// AVX2, FMA and F16C, detected at load.
    simd: bool,
}

/// One text: its token ids and token types.
pub(crate) struct Tokens<'a> {
    pub ids: &'a [u32],
    pub types: &'a [u32],
}

/// The weights file, with the prefix under which the encoder's tensors are.
struct Weights<'a> {
    file: SafeTensors<'a>,
    prefix: String,
}

impl Weights<'_> {
    /// The tensor `name` as `f32`, checked to hold `shape`.
    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        let full = format!("{}{name}", self.prefix);
        let t = self
            .file
            .tensor(&full)
            .map_err(|_| format!("no tensor {full}"))?;
        if t.shape() != shape {
            return Err(format!(
                "tensor {full} has the shape {:?}, not {shape:?}",
                t.shape()
            ));
        }
        let data = t.data();
        let words = |size: usize| data.chunks_exact(size);
        let v: Vec<f32> = match t.dtype() {
            Dtype::F32 => words(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            Dtype::BF16 => words(2)
                .map(|b| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16))
                .collect(),
            Dtype::F16 => words(2)
                .map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]])))
                .collect(),
            other => return Err(format!("tensor {full} is of type {other:?}, not a float")),
        };
        Ok(v)
    }

    fn linear(&self, name: &str, inp: usize, out: usize) -> Result<Linear, String> {
        Ok(Linear {
            w: self.get(&format!("{name}.weight"), &[out, inp])?,
            half: Vec::new(),
            b: self.get(&format!("{name}.bias"), &[out])?,
            inp,
            out,
        })
    }

    fn norm(&self, name: &str, size: usize) -> Result<Norm, String> {
        // Older checkpoints name LayerNorm's parameters gamma and beta.
        let get = |new: &str, old: &str| {
            self.get(&format!("{name}.{new}"), &[size])
                .or_else(|e| self.get(&format!("{name}.{old}"), &[size]).map_err(|_| e))
        };
        Ok(Norm {
            gamma: get("weight", "gamma")?,
            beta: get("bias", "beta")?,
        })
    }
}

/// An IEEE half-precision number as `f32`.
fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let mant = u32::from(h & 0x3ff);
    let bits = match (exp, mant) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: normalise.
            let shift = mant.leading_zeros() - 21;
            let mant = (mant << shift) & 0x3ff;
            sign | ((127 - 15 + 1 - shift) << 23) | (mant << 13)
        }
        (0x1f, _) => sign | 0x7f80_0000 | (mant << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (mant << 13),
    };
    f32::from_bits(bits)
}

impl Encoder {
    /// The encoder `config` describes, its weights from the safetensors
    /// file `bytes` (under `bert.`, `{model_type}.` or no prefix).
    pub(crate) fn load(config: &Config, bytes: &[u8]) -> Result<Self, String> {
        if let Some(kind) = config.position_embedding_type.as_deref()
            && kind != "absolute"
        {
            return Err(format!(
                "position_embedding_type {kind:?} is not supported (absolute is)"
            ));
        }
        let activation = config.activation()?;
        let (h, heads, inter) = (
            config.hidden_size,
            config.num_attention_heads,
            config.intermediate_size,
        );
        if heads == 0 || h % heads != 0 {
            return Err(format!(
                "hidden_size {h} is not a multiple of num_attention_heads {heads}"
            ));
        }
        let file = SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
        let names = file.names();
        let prefix = [
            "bert.".to_owned(),
            format!("{}.", config.model_type.as_deref().unwrap_or("bert")),
            String::new(),
        ]
        .into_iter()
        .find(|p| {
            names
                .iter()
                .any(|n| n.starts_with(&format!("{p}embeddings.")))
        })
        .unwrap_or_default();
        let w = Weights { file, prefix };
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let at = format!("encoder.layer.{i}");
            let q = w.linear(&format!("{at}.attention.self.query"), h, h)?;
            let k = w.linear(&format!("{at}.attention.self.key"), h, h)?;
            let v = w.linear(&format!("{at}.attention.self.value"), h, h)?;
            let qkv = Linear {
                w: [q.w, k.w, v.w].concat(),
                half: Vec::new(),
                b: [q.b, k.b, v.b].concat(),
                inp: h,
                out: 3 * h,
            };
            layers.push(Layer {
                qkv,
                attention_out: w.linear(&format!("{at}.attention.output.dense"), h, h)?,
                attention_norm: w.norm(&format!("{at}.attention.output.LayerNorm"), h)?,
                intermediate: w.linear(&format!("{at}.intermediate.dense"), h, inter)?,
                output: w.linear(&format!("{at}.output.dense"), inter, h)?,
                output_norm: w.norm(&format!("{at}.output.LayerNorm"), h)?,
            });
        }
        let simd = simd_available();
        #[cfg(target_arch = "x86_64")]
        if simd {
            for l in &mut layers {
                for lin in [
                    &mut l.qkv,
                    &mut l.attention_out,
                    &mut l.intermediate,
                    &mut l.output,
                ] {
                    // SAFETY: AVX2, FMA and F16C were detected.
                    lin.half = unsafe { x86::to_half(&lin.w) };
                    lin.w = Vec::new();
                }
            }
        }
        Ok(Self {
            hidden: h,
            heads,
            eps: config.layer_norm_eps as f32,
            activation,
            vocab: config.vocab_size,
            types: config.type_vocab_size,
            max_positions: config.max_position_embeddings,
            word: w.get("embeddings.word_embeddings.weight", &[config.vocab_size, h])?,
            position: w.get(
                "embeddings.position_embeddings.weight",
                &[config.max_position_embeddings, h],
            )?,
            token_type: w.get(
                "embeddings.token_type_embeddings.weight",
                &[config.type_vocab_size, h],
            )?,
            embedding_norm: w.norm("embeddings.LayerNorm", h)?,
            layers,
            simd,
        })
    }

    /// The length of a token's vector.
    pub(crate) fn hidden(&self) -> usize {
        self.hidden
    }

    /// The last hidden states of `texts`' tokens, text after text (as many
    /// rows of [`Encoder::hidden`] numbers as the texts have tokens).
    /// Token ids, types or lengths out of the model's range are an error.
    pub(crate) fn forward(&self, texts: &[Tokens<'_>]) -> Result<Vec<f32>, String> {
        let h = self.hidden;
        let total: usize = texts.iter().map(|t| t.ids.len()).sum();
        let mut x = vec![0f32; total * h];
        let mut row = 0;
        for t in texts {
            if t.ids.len() > self.max_positions || t.types.len() != t.ids.len() {
                return Err(format!(
                    "{} tokens: more than the model's {} positions",
                    t.ids.len(),
                    self.max_positions
                ));
            }
            for (p, (&id, &ty)) in t.ids.iter().zip(t.types).enumerate() {
                let (id, ty) = (id as usize, ty as usize);
                if id >= self.vocab || ty >= self.types {
                    return Err(format!("token {id} (type {ty}) is out of the vocabulary"));
                }
                let out = &mut x[row * h..(row + 1) * h];
                let (wv, pv, tv) = (
                    &self.word[id * h..(id + 1) * h],
                    &self.position[p * h..(p + 1) * h],
                    &self.token_type[ty * h..(ty + 1) * h],
                );
                for i in 0..h {
                    out[i] = wv[i] + tv[i] + pv[i];
                }
                row += 1;
            }
        }
        layer_norm(&mut x, h, &self.embedding_norm, self.eps);

        let lens: Vec<usize> = texts.iter().map(|t| t.ids.len()).collect();
        let mut qkv = vec![0f32; total * 3 * h];
        let mut context = vec![0f32; total * h];
        let mut projected = vec![0f32; total * h];
        let inter = self.layers.first().map_or(0, |l| l.intermediate.out);
        let mut wide = vec![0f32; total * inter];
        let mut scores = Vec::new();
        for layer in &self.layers {
            self.linear(&layer.qkv, &x, &mut qkv);
            self.attention(&qkv, &lens, &mut context, &mut scores);
            self.linear(&layer.attention_out, &context, &mut projected);
            add(&mut x, &projected);
            layer_norm(&mut x, h, &layer.attention_norm, self.eps);
            self.linear(&layer.intermediate, &x, &mut wide);
            self.activate(&mut wide);
            self.linear(&layer.output, &wide, &mut projected);
            add(&mut x, &projected);
            layer_norm(&mut x, h, &layer.output_norm, self.eps);
        }
        Ok(x)
    }

    /// `y = x Wᵀ + b` for every row of `x`. A large product runs on two
    /// threads (rayon's pool, already in the process for the tokenizer),
    /// each computing half of the outputs: one request's embedding is the
    /// latency of every routed request, and on an idle machine the second
    /// core halves the products' time (the route with the model at 10,000
    /// cards: docs/registry.md).
    fn linear(&self, l: &Linear, x: &[f32], y: &mut [f32]) {
        let rows = x.len() / l.inp;
        debug_assert_eq!(y.len(), rows * l.out);
        if rows * l.inp * l.out < PARALLEL_PRODUCT || l.out < 64 {
            self.linear_outputs(l, x, 0..l.out, y);
            return;
        }
        let half = l.out / 2;
        let (mut low, mut high) = (vec![0.0; rows * half], vec![0.0; rows * (l.out - half)]);
        rayon::join(
            || self.linear_outputs(l, x, 0..half, &mut low),
            || self.linear_outputs(l, x, half..l.out, &mut high),
        );
        for (r, row) in y.chunks_exact_mut(l.out).enumerate() {
            row[..half].copy_from_slice(&low[r * half..(r + 1) * half]);
            let rest = l.out - half;
            row[half..].copy_from_slice(&high[r * rest..(r + 1) * rest]);
        }
    }

    /// The outputs `outputs` of `x Wᵀ + b` for every row of `x`, into `y`
    /// (`rows` x `outputs.len()`).
    fn linear_outputs(
        &self,
        l: &Linear,
        x: &[f32],
        outputs: std::ops::Range<usize>,
        y: &mut [f32],
    ) {
        let rows = x.len() / l.inp;
        let (inp, out) = (l.inp, outputs.len());
        let weights = outputs.start * inp..outputs.end * inp;
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: AVX2, FMA and F16C were detected at load.
            unsafe { x86::linear(x, rows, &l.half[weights], &l.b[outputs], inp, out, y) };
            return;
        }
        linear_portable(x, rows, &l.w[weights], &l.b[outputs], inp, out, y);
    }

    fn dot(&self, a: &[f32], b: &[f32]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: AVX2, FMA and F16C were detected at load.
            return unsafe { x86::dot(a, b) };
        }
        a.iter().zip(b).map(|(a, b)| a * b).sum()
    }

    /// `ctx` = softmax(q kᵀ / √d) v, each head of each text on its own.
    fn attention(&self, qkv: &[f32], lens: &[usize], ctx: &mut [f32], scores: &mut Vec<f32>) {
        let h = self.hidden;
        let d = h / self.heads;
        let scale = 1.0 / (d as f32).sqrt();
        let stride = 3 * h;
        let mut start = 0;
        for &len in lens {
            scores.resize(len, 0.0);
            for head in 0..self.heads {
                let (qo, ko, vo) = (head * d, h + head * d, 2 * h + head * d);
                for i in 0..len {
                    let q = &qkv[(start + i) * stride + qo..][..d];
                    let mut max = f32::NEG_INFINITY;
                    for (j, s) in scores.iter_mut().enumerate() {
                        let k = &qkv[(start + j) * stride + ko..][..d];
                        *s = self.dot(q, k) * scale;
                        max = max.max(*s);
                    }
                    let mut sum = 0.0;
                    for s in scores.iter_mut() {
                        *s = (*s - max).exp();
                        sum += *s;
                    }
                    let out = &mut ctx[(start + i) * h + head * d..][..d];
                    out.fill(0.0);
                    for (j, s) in scores.iter().enumerate() {
                        let v = &qkv[(start + j) * stride + vo..][..d];
                        let p = s / sum;
                        for (o, v) in out.iter_mut().zip(v) {
                            *o += p * v;
                        }
                    }
                }
            }
            start += len;
        }
    }

    fn activate(&self, x: &mut [f32]) {
        match self.activation {
            Activation::GeluErf => {
                #[cfg(target_arch = "x86_64")]
                if self.simd {
                    // SAFETY: AVX2, FMA and F16C were detected at load.
                    unsafe { x86::gelu_erf(x) };
                    return;
                }
                for v in x {
                    *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
                }
            }
            Activation::GeluTanh => {
                const C: f32 = 0.797_884_6; // √(2/π)
                for v in x {
                    let u = *v;
                    *v = 0.5 * u * (1.0 + (C * (u + 0.044_715 * u * u * u)).tanh());
                }
            }
            Activation::Relu => {
                for v in x {
                    *v = v.max(0.0);
                }
            }
        }
    }
}

fn simd_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("fma")
            && std::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn add(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// LayerNorm of every row of `h` numbers, in place.
fn layer_norm(x: &mut [f32], h: usize, n: &Norm, eps: f32) {
    for row in x.chunks_exact_mut(h) {
        let mean = row.iter().sum::<f32>() / h as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / h as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, g), b) in row.iter_mut().zip(&n.gamma).zip(&n.beta) {
            *v = (*v - mean) * inv * g + b;
        }
    }
}

/// The error function, within 1e-6 of the exact value: a rational
/// approximation on [-4, 4] (outside it erf is ±1 in `f32`), branch-free so
/// that the SIMD version is the same formula.
fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = ERF_ALPHA[0];
    for a in &ERF_ALPHA[1..] {
        p = p * x2 + a;
    }
    let mut q = ERF_BETA[0];
    for b in &ERF_BETA[1..] {
        q = q * x2 + b;
    }
    x * p / q
}

/// The numerator's coefficients, highest power of x² first (then × x).
const ERF_ALPHA: [f32; 7] = [
    -2.726_142_3e-10,
    2.770_681_4e-8,
    -2.101_024e-6,
    -5.692_506_4e-5,
    -7.349_906_3e-4,
    -2.954_600_1e-3,
    -1.609_603_3e-2,
];
/// The denominator's, highest power of x² first.
const ERF_BETA: [f32; 5] = [
    -1.456_607_2e-5,
    -2.133_740_6e-4,
    -1.682_827e-3,
    -7.373_329_2e-3,
    -1.426_474e-2,
];

/// Multiply-adds from which a product is split between two threads (a
/// layer's product for about 8 tokens of MiniLM; below it, the hand-off
/// costs more than it saves).
const PARALLEL_PRODUCT: usize = 1 << 20;

/// `y = x Wᵀ + b`, plain Rust.
fn linear_portable(
    x: &[f32],
    rows: usize,
    w: &[f32],
    b: &[f32],
    inp: usize,
    out: usize,
    y: &mut [f32],
) {
    for r in 0..rows {
        let xr = &x[r * inp..(r + 1) * inp];
        for o in 0..out {
            let wr = &w[o * inp..(o + 1) * inp];
            y[r * out + o] = b[o] + xr.iter().zip(wr).map(|(a, b)| a * b).sum::<f32>();
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The same computations with AVX2 and FMA (8 lanes).
    use std::arch::x86_64::*;

    use super::{ERF_ALPHA, ERF_BETA};

    /// Rows of `x` per pass over the weights: their inputs stay in the
    /// cache while each output's weights are read once for all of them.
    const BLOCK: usize = 48;

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
        _mm_cvtss_f32(s)
    }

    /// The dot products of 6 rows of inputs (`x`) with 2 rows of weights
    /// (`w`), over the first `whole` numbers (a multiple of 8): 12
    /// accumulators, the two weight vectors and one input vector, 15 of the
    /// 16 registers. Written out variable by variable, not as loops over
    /// arrays: agentwire-registry is optimised for size ("z"), which
    /// unrolls nothing and kept arrays of accumulators in memory (the first
    /// version of this ran slower than candle). A tile with fewer rows or
    /// one output repeats a row and drops its sums.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; each pointer is valid for `whole` reads.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn tile(x: &[*const f32; 6], w: &[*const u16; 2], whole: usize) -> [[f32; 2]; 6] {
        let [x0, x1, x2, x3, x4, x5] = *x;
        let [w0, w1] = *w;
        let z = _mm256_setzero_ps();
        let (mut a00, mut a01, mut a10, mut a11, mut a20, mut a21) = (z, z, z, z, z, z);
        let (mut a30, mut a31, mut a40, mut a41, mut a50, mut a51) = (z, z, z, z, z, z);
        let mut i = 0;
        while i < whole {
            // SAFETY: i + 8 <= whole, within every row (the caller's word).
            unsafe {
                let v0 = _mm256_cvtph_ps(_mm_loadu_si128(w0.add(i).cast()));
                let v1 = _mm256_cvtph_ps(_mm_loadu_si128(w1.add(i).cast()));
                let v = _mm256_loadu_ps(x0.add(i));
                a00 = _mm256_fmadd_ps(v, v0, a00);
                a01 = _mm256_fmadd_ps(v, v1, a01);
                let v = _mm256_loadu_ps(x1.add(i));
                a10 = _mm256_fmadd_ps(v, v0, a10);
                a11 = _mm256_fmadd_ps(v, v1, a11);
                let v = _mm256_loadu_ps(x2.add(i));
                a20 = _mm256_fmadd_ps(v, v0, a20);
                a21 = _mm256_fmadd_ps(v, v1, a21);
                let v = _mm256_loadu_ps(x3.add(i));
                a30 = _mm256_fmadd_ps(v, v0, a30);
                a31 = _mm256_fmadd_ps(v, v1, a31);
                let v = _mm256_loadu_ps(x4.add(i));
                a40 = _mm256_fmadd_ps(v, v0, a40);
                a41 = _mm256_fmadd_ps(v, v1, a41);
                let v = _mm256_loadu_ps(x5.add(i));
                a50 = _mm256_fmadd_ps(v, v0, a50);
                a51 = _mm256_fmadd_ps(v, v1, a51);
            }
            i += 8;
        }
        [
            [hsum(a00), hsum(a01)],
            [hsum(a10), hsum(a11)],
            [hsum(a20), hsum(a21)],
            [hsum(a30), hsum(a31)],
            [hsum(a40), hsum(a41)],
            [hsum(a50), hsum(a51)],
        ]
    }

    /// `values` in half precision (rounded to the nearest).
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn to_half(values: &[f32]) -> Vec<u16> {
        let mut out = vec![0u16; values.len()];
        for (o, v) in out.chunks_mut(8).zip(values.chunks(8)) {
            let mut lane = [0f32; 8];
            lane[..v.len()].copy_from_slice(v);
            let mut half = [0u16; 8];
            // SAFETY: 8 numbers read, 8 halves written.
            unsafe {
                let h =
                    _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(lane.as_ptr()));
                _mm_storeu_si128(half.as_mut_ptr().cast(), h);
            }
            o.copy_from_slice(&half[..o.len()]);
        }
        out
    }

    /// `y = x Wᵀ + b` for `rows` rows of `x`, `w` in half precision.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn linear(
        x: &[f32],
        rows: usize,
        w: &[u16],
        b: &[f32],
        inp: usize,
        out: usize,
        y: &mut [f32],
    ) {
        assert!(x.len() >= rows * inp && w.len() >= out * inp && b.len() >= out);
        assert!(y.len() >= rows * out);
        let whole = inp - inp % 8;
        let mut r0 = 0;
        while r0 < rows {
            let r1 = (r0 + BLOCK).min(rows);
            let mut o = 0;
            while o < out {
                let c = 2.min(out - o);
                let wr = [w[o * inp..].as_ptr(), w[(o + c - 1) * inp..].as_ptr()];
                let mut r = r0;
                while r < r1 {
                    let n = 6.min(r1 - r);
                    let xr: [*const f32; 6] =
                        std::array::from_fn(|k| x[(r + k.min(n - 1)) * inp..].as_ptr());
                    // SAFETY: every row pointed at has `inp` >= `whole`
                    // numbers (the slices' lengths were asserted above).
                    let sums = unsafe { tile(&xr, &wr, whole) };
                    for (k, row) in sums.iter().enumerate().take(n) {
                        let xs = &x[(r + k) * inp..(r + k + 1) * inp];
                        for (j, sum) in row.iter().enumerate().take(c) {
                            let ws = &w[(o + j) * inp..(o + j + 1) * inp];
                            let tail: f32 = xs[whole..]
                                .iter()
                                .zip(&ws[whole..])
                                .map(|(a, b)| a * super::f16_to_f32(*b))
                                .sum();
                            y[(r + k) * out + o + j] = sum + tail + b[o + j];
                        }
                    }
                    r += n;
                }
                o += c;
            }
            r0 = r1;
        }
    }

    /// The dot product of `a` and `b` (of the same length).
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let whole = n - n % 8;
        let mut acc = _mm256_setzero_ps();
        let mut i = 0;
        while i < whole {
            // SAFETY: i + 8 <= n, within both.
            let (va, vb) = unsafe {
                (
                    _mm256_loadu_ps(a.as_ptr().add(i)),
                    _mm256_loadu_ps(b.as_ptr().add(i)),
                )
            };
            acc = _mm256_fmadd_ps(va, vb, acc);
            i += 8;
        }
        let mut s = hsum(acc);
        for j in whole..n {
            s += a[j] * b[j];
        }
        s
    }

    /// GELU with the error function, in place (the formula of `super::erf`).
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn gelu_erf(x: &mut [f32]) {
        let mut chunks = x.chunks_exact_mut(8);
        for c in &mut chunks {
            // SAFETY: c has 8 numbers.
            let v = unsafe { _mm256_loadu_ps(c.as_ptr()) };
            let u = _mm256_mul_ps(v, _mm256_set1_ps(std::f32::consts::FRAC_1_SQRT_2));
            let u = _mm256_min_ps(_mm256_max_ps(u, _mm256_set1_ps(-4.0)), _mm256_set1_ps(4.0));
            let u2 = _mm256_mul_ps(u, u);
            let mut p = _mm256_set1_ps(ERF_ALPHA[0]);
            for a in &ERF_ALPHA[1..] {
                p = _mm256_fmadd_ps(p, u2, _mm256_set1_ps(*a));
            }
            let mut q = _mm256_set1_ps(ERF_BETA[0]);
            for b in &ERF_BETA[1..] {
                q = _mm256_fmadd_ps(q, u2, _mm256_set1_ps(*b));
            }
            let erf = _mm256_div_ps(_mm256_mul_ps(u, p), q);
            let half = _mm256_mul_ps(v, _mm256_set1_ps(0.5));
            let g = _mm256_fmadd_ps(half, erf, half);
            // SAFETY: c has 8 numbers.
            unsafe { _mm256_storeu_ps(c.as_mut_ptr(), g) };
        }
        for v in chunks.into_remainder() {
            *v = 0.5 * *v * (1.0 + super::erf(*v * std::f32::consts::FRAC_1_SQRT_2));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_is_within_1e_6_of_libm() {
        let mut worst = 0f64;
        for i in -6000..=6000 {
            let x = i as f32 / 1000.0;
            let exact = libm_erf(f64::from(x));
            worst = worst.max((f64::from(erf(x)) - exact).abs());
        }
        assert!(worst < 1e-6, "worst error {worst}");
    }

    /// erf in f64, for the test: its Taylor series below 3 (80 terms: the
    /// cancellation costs about 4 of f64's 16 digits), the continued
    /// fraction of erfc above.
    fn libm_erf(x: f64) -> f64 {
        if x.abs() < 3.0 {
            let (mut sum, mut term) = (0f64, x);
            for n in 0..80 {
                let n = f64::from(n);
                sum += term / (2.0 * n + 1.0);
                term *= -x * x / (n + 1.0);
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            let z = x.abs();
            let mut f = z;
            for k in (1..60).rev() {
                f = z + (f64::from(k) / 2.0) / f;
            }
            let erfc = (-z * z).exp() / std::f64::consts::PI.sqrt() / f;
            (1.0 - erfc).copysign(x)
        }
    }

    #[test]
    fn half_precision_numbers_convert() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0000), 0.0);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(f16_to_f32(0x0200), 2f32.powi(-15));
        assert!(f16_to_f32(0x7c00).is_infinite());
    }

    #[test]
    fn simd_and_portable_products_agree() {
        // Sizes that exercise every tile shape and the tail of k.
        for (rows, inp, out) in [(1, 8, 1), (7, 13, 5), (13, 40, 3), (50, 24, 7)] {
            let x: Vec<f32> = (0..rows * inp)
                .map(|i| ((i * 7 % 11) as f32 - 5.0) / 3.0)
                .collect();
            let w: Vec<f32> = (0..out * inp)
                .map(|i| ((i * 5 % 13) as f32 - 6.0) / 4.0)
                .collect();
            let b: Vec<f32> = (0..out).map(|i| i as f32 / 2.0).collect();
            let mut plain = vec![0f32; rows * out];
            linear_portable(&x, rows, &w, &b, inp, out, &mut plain);
            // The reference in f64.
            for r in 0..rows {
                for o in 0..out {
                    let e: f64 = f64::from(b[o])
                        + (0..inp)
                            .map(|k| f64::from(x[r * inp + k]) * f64::from(w[o * inp + k]))
                            .sum::<f64>();
                    assert!((f64::from(plain[r * out + o]) - e).abs() < 1e-3);
                }
            }
            #[cfg(target_arch = "x86_64")]
            if simd_available() {
                // The same weights in half precision, and back.
                // SAFETY: detected just above.
                let half = unsafe { x86::to_half(&w) };
                let rounded: Vec<f32> = half.iter().map(|h| f16_to_f32(*h)).collect();
                for (a, b) in rounded.iter().zip(&w) {
                    assert!((a - b).abs() <= b.abs() / 1024.0, "{a} for {b}");
                }
                linear_portable(&x, rows, &rounded, &b, inp, out, &mut plain);
                let mut fast = vec![0f32; rows * out];
                // SAFETY: detected above; the lengths are those of the call.
                unsafe { x86::linear(&x, rows, &half, &b, inp, out, &mut fast) };
                for (a, b) in fast.iter().zip(&plain) {
                    assert!((a - b).abs() < 1e-3, "{a} against {b} ({rows}×{inp}×{out})");
                }
                let mut g1: Vec<f32> = x.clone();
                // SAFETY: detected above.
                unsafe { x86::gelu_erf(&mut g1) };
                for (g, v) in g1.iter().zip(&x) {
                    let e = 0.5 * v * (1.0 + erf(v * std::f32::consts::FRAC_1_SQRT_2));
                    assert!((g - e).abs() < 1e-6);
                }
            }
        }
    }
}
