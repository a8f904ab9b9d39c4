//! The in-memory index: every live entry with its card's facts, catalog
//! entry and filter view; a BM25F index of entries for search; a BM25F
//! index of skills for routing. Built from the store and kept in step with
//! it (changes carry the store's revision; an older change never replaces a
//! newer one).

use std::collections::HashMap;
use std::sync::Arc;

use agentwire_client::registry::{CatalogEntry, RouteMatch, RouteResponse};
use chrono::{DateTime, Utc};

use crate::card::CardFacts;
use crate::filter::{CompiledFilter, FilterView, parse_time};
use crate::model::{Record, SkillVector, StoredVectors};
use crate::route::{self, Embedder, RouterConfig, cosine};
use crate::text::{self, Analyzer, Bm25Index, Field};

/// One live entry.
#[derive(Debug)]
pub struct Indexed {
    /// As stored.
    pub record: Record,
    /// Its card's facts.
    pub facts: CardFacts,
    /// Its catalog entry.
    pub entry: CatalogEntry,
    /// Its filterable values.
    pub view: FilterView,
    /// First published.
    pub created: Option<DateTime<Utc>>,
    /// Last changed.
    pub updated: Option<DateTime<Utc>>,
    /// The store revision it comes from.
    pub revision: i64,
    skills: Vec<SkillDoc>,
    terms: EntryTerms,
}

#[derive(Debug, Default)]
struct EntryTerms {
    name: Vec<String>,
    description: Vec<String>,
    skill_names: Vec<String>,
    skill_descriptions: Vec<String>,
    tags: Vec<String>,
    examples: Vec<String>,
    queries: Vec<String>,
    capabilities: Vec<String>,
}

/// A skill as the router sees it.
#[derive(Debug, Default)]
struct SkillDoc {
    name: Vec<String>,
    id: Vec<String>,
    description: Vec<String>,
    tags: Vec<String>,
    examples: Vec<Vec<String>>,
    agent_name: Vec<String>,
    agent_description: Vec<String>,
    /// With an embedder: the skill's vector, the normalised mean of its
    /// examples' and description's normalised vectors (the centroid of
    /// what it is asked and what it says it does).
    vector: Option<Vec<f32>>,
    /// The texts the vector comes from (examples, then description), one
    /// a line: when an agent is indexed again (a refresh, an update), a
    /// skill whose texts did not change keeps its vector.
    embedded: String,
    /// The distinct terms of the skill's own text (not its agent's), for
    /// the document frequencies of routing.
    own_terms: Vec<String>,
    /// The distinct terms of its name and id.
    name_terms: Vec<String>,
    /// The distinct terms of its name, id, tags and description: what the
    /// skill is about (a name found there is a topic, not an argument).
    topic_terms: Vec<String>,
    /// For each example, its terms written as names ([`crate::text::Word`]).
    example_names: Vec<Vec<String>>,
}

impl SkillDoc {
    fn all_example_terms(&self) -> Vec<String> {
        self.examples.iter().flatten().cloned().collect()
    }

    /// Fills `own_terms`, `name_terms` and `topic_terms`.
    fn with_term_sets(mut self) -> Self {
        /// The terms in order of first appearance, each once.
        fn distinct<'a>(terms: impl Iterator<Item = &'a String>) -> Vec<String> {
            let mut out: Vec<String> = Vec::new();
            for t in terms {
                if !out.contains(t) {
                    out.push(t.clone());
                }
            }
            out
        }
        let named = || self.name.iter().chain(&self.id);
        let topic = || named().chain(&self.description).chain(&self.tags);
        let name_terms = distinct(named());
        let topic_terms = distinct(topic());
        let own_terms = distinct(topic().chain(self.examples.iter().flatten()));
        self.own_terms = own_terms;
        self.name_terms = name_terms;
        self.topic_terms = topic_terms;
        self
    }

    /// How present a request's term is in the skill (0..=1): the presence
    /// weight of the best field that has it, or `related` times that of
    /// the best field with a derived form of it.
    fn presence(&self, term: &String, agent_words: f64, related: f64) -> f64 {
        self.presence_from(self.found(|t| t == term), term, agent_words, related)
    }

    /// [`Self::presence`] from where the term itself is ([`Self::found`]).
    fn presence_from(&self, exact: Found, term: &str, agent_words: f64, related: f64) -> f64 {
        let exact = exact.presence(agent_words);
        if exact > 0.0 || related <= 0.0 {
            return exact;
        }
        related * self.presence_by(|t| text::related(t, term), agent_words)
    }

    /// Whether the skill has `a` then `b` in one of its fields.
    fn has_pair(&self, a: &str, b: &str) -> bool {
        let pair = |v: &Vec<String>| v.windows(2).any(|w| w[0] == a && w[1] == b);
        pair(&self.name)
            || pair(&self.id)
            || pair(&self.description)
            || pair(&self.tags)
            || self.examples.iter().any(pair)
    }

    fn presence_by(&self, is: impl Fn(&String) -> bool, agent_words: f64) -> f64 {
        self.found(is).presence(agent_words)
    }

    /// Where the skill has a term that `is`: the presence weight of the
    /// best of its own fields, and whether its agent's name and
    /// description have one.
    fn found(&self, is: impl Fn(&String) -> bool) -> Found {
        let mut p: f64 = 0.0;
        let has = |v: &Vec<String>| v.iter().any(&is);
        if self.examples.iter().any(has) {
            p = p.max(route::PRESENCE_EXAMPLE);
        }
        if has(&self.name) {
            p = p.max(route::PRESENCE_NAME);
        }
        if has(&self.tags) {
            p = p.max(route::PRESENCE_TAG);
        }
        if has(&self.id) {
            p = p.max(route::PRESENCE_ID);
        }
        if has(&self.description) {
            p = p.max(route::PRESENCE_DESCRIPTION);
        }
        Found {
            own: p,
            agent_name: has(&self.agent_name),
            agent_description: has(&self.agent_description),
        }
    }
}

/// Where a skill has a term ([`SkillDoc::found`]).
#[derive(Debug, Clone, Copy)]
struct Found {
    /// The presence weight of the best of the skill's own fields that has
    /// it (0: none).
    own: f64,
    /// Whether its agent's name has it.
    agent_name: bool,
    /// Whether its agent's description has it.
    agent_description: bool,
}

impl Found {
    /// The term's presence, the words of the agent's name and description
    /// counting `agent_words` times their presence weight.
    fn presence(self, agent_words: f64) -> f64 {
        let mut p = self.own;
        if self.agent_name {
            p = p.max(route::PRESENCE_AGENT_NAME * agent_words);
        }
        if self.agent_description {
            p = p.max(route::PRESENCE_AGENT_DESCRIPTION * agent_words);
        }
        p
    }
}

/// How a skill's vector is made from its texts' vectors (the normalised
/// mean: [`route::centroid`]), as part of what a stored vector is kept
/// for: a change of that computation must change it, so that vectors
/// stored before are computed again.
pub const VECTOR_SCHEME: &str = "skill-centroid-1";

/// The router's embedder when a record is indexed.
#[derive(Clone, Copy)]
pub struct Embedding<'a> {
    /// The model.
    pub embedder: &'a dyn Embedder,
    /// Its [`Embedder::model_id`]; empty: unknown, vectors neither reused
    /// from the record nor given to it.
    pub model: &'a str,
    /// Whether the skills that have no vector yet are embedded now (a
    /// publish, a refresh), or left for later (start-up: see
    /// [`Indexed::needs_vectors`]).
    pub embed_now: bool,
}

impl Indexed {
    /// Builds the indexed form of a record (outside any lock: it analyses
    /// every text of the card, and embeds its skills with an embedder).
    /// A skill's vector comes, when its texts did not change, from the
    /// skills of `previous` (the same entry as indexed before) or from the
    /// vectors stored with the record (the same model); otherwise it is
    /// computed, if `embed_now`. The record's [`Record::vectors`] are then
    /// those of its skills (when the model is known).
    pub fn build(
        record: Record,
        revision: i64,
        analyzer: &Analyzer,
        embedding: Option<Embedding<'_>>,
        previous: Option<&Indexed>,
    ) -> Self {
        let mut record = record;
        let facts = record.facts();
        let entry = record.entry(&facts);
        let view = FilterView::new(&record, &facts, &entry);
        let mut terms = EntryTerms {
            name: analyzer.terms(&facts.name),
            description: analyzer.terms(&facts.description),
            queries: analyzer.terms(&entry.representative_queries.join(" ")),
            ..Default::default()
        };
        for t in &entry.tags {
            terms.tags.extend(analyzer.terms(t));
        }
        let agent_name = terms.name.clone();
        let agent_description = terms.description.clone();
        let mut skills = Vec::new();
        for s in &facts.skills {
            let doc = SkillDoc {
                name: analyzer.terms(&s.name),
                id: analyzer.terms(&s.id),
                description: analyzer.terms(&s.description),
                tags: s.tags.iter().flat_map(|t| analyzer.terms(t)).collect(),
                examples: s.examples.iter().map(|e| analyzer.terms(e)).collect(),
                example_names: s
                    .examples
                    .iter()
                    .map(|e| {
                        analyzer
                            .words(e)
                            .into_iter()
                            .filter(|w| w.name)
                            .map(|w| w.term)
                            .collect()
                    })
                    .collect(),
                agent_name: agent_name.clone(),
                agent_description: agent_description.clone(),
                embedded: skill_texts(&s.examples, &s.description)
                    .iter()
                    .map(|t| t.replace(['\n', '\r'], " "))
                    .collect::<Vec<_>>()
                    .join("\n"),
                ..Default::default()
            }
            .with_term_sets();
            terms.skill_names.extend(doc.name.iter().cloned());
            terms
                .skill_descriptions
                .extend(doc.description.iter().cloned());
            terms.examples.extend(doc.all_example_terms());
            terms.capabilities.extend(doc.id.iter().cloned());
            skills.push(doc);
        }
        if let Some(embedding) = embedding {
            embed_skills(&mut skills, embedding, previous, &mut record);
        }
        Self {
            created: parse_time(&record.created_at),
            updated: parse_time(&record.updated_at),
            record,
            facts,
            entry,
            view,
            revision,
            skills,
            terms,
        }
    }

    /// Whether a skill that has texts has no vector (not computed yet, or
    /// the embedder failed).
    pub fn needs_vectors(&self) -> bool {
        self.skills
            .iter()
            .any(|s| s.vector.is_none() && !s.embedded.is_empty())
    }

    /// How many of its skills have a vector.
    pub fn skills_with_vectors(&self) -> usize {
        self.skills.iter().filter(|s| s.vector.is_some()).count()
    }
}

/// What a stored skill vector is kept for: the SHA-256 (hex) of the
/// skill's texts, with [`VECTOR_SCHEME`].
fn texts_key(embedded: &str) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(VECTOR_SCHEME.as_bytes());
    ctx.update(b"\n");
    ctx.update(embedded.as_bytes());
    ctx.finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The vectors stored with `record` that `model` made (all of one
/// length), by their texts' key.
fn stored_for<'a>(record: &'a Record, model: &str) -> HashMap<&'a str, &'a Vec<f32>> {
    let Some(stored) = record
        .vectors
        .as_ref()
        .filter(|v| !model.is_empty() && v.model == model)
    else {
        return HashMap::new();
    };
    let len = stored.skills.first().map_or(0, |s| s.vector.len());
    if len == 0 || stored.skills.iter().any(|s| s.vector.len() != len) {
        return HashMap::new();
    }
    stored
        .skills
        .iter()
        .map(|s| (s.texts.as_str(), &s.vector))
        .collect()
}

/// The texts of a skill that its vector is made of: its examples and its
/// description (blank ones left out).
fn skill_texts<'a>(examples: &'a [String], description: &'a str) -> Vec<&'a str> {
    examples
        .iter()
        .map(String::as_str)
        .chain(std::iter::once(description))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect()
}

/// Gives each skill its vector: the one it had in `previous` or the one
/// stored with the record when its texts are the same, otherwise (when
/// `embed_now`) the normalised mean of its texts' normalised vectors (one
/// call to the embedder for all of them). When the embedder fails, the
/// skills concerned stay without a vector (semantic similarity 0: chosen
/// only if their words alone fit) and a warning says so. With a known
/// model, the record's vectors become those of its skills.
fn embed_skills(
    skills: &mut [SkillDoc],
    embedding: Embedding<'_>,
    previous: Option<&Indexed>,
    record: &mut Record,
) {
    let identifier = record.identifier.as_str();
    let mut texts: Vec<&str> = Vec::new();
    let mut wanted: Vec<(usize, usize, usize)> = Vec::new();
    let mut found: Vec<(usize, Option<Vec<f32>>)> = Vec::new();
    let stored = stored_for(record, embedding.model);
    let keys: Vec<String> = skills.iter().map(|d| texts_key(&d.embedded)).collect();
    for (i, doc) in skills.iter().enumerate() {
        if doc.embedded.is_empty() {
            continue;
        }
        let before = previous
            .and_then(|p| {
                p.skills
                    .iter()
                    .find(|d| d.embedded == doc.embedded)
                    .and_then(|d| d.vector.clone())
            })
            .or_else(|| {
                keys.get(i)
                    .and_then(|k| stored.get(k.as_str()))
                    .map(|v| (*v).clone())
            });
        if before.is_some() {
            found.push((i, before));
            continue;
        }
        if !embedding.embed_now {
            continue;
        }
        let start = texts.len();
        texts.extend(doc.embedded.split('\n'));
        wanted.push((i, start, texts.len()));
    }
    if !texts.is_empty() {
        match embedding.embedder.embed(&texts) {
            Ok(vectors) if vectors.len() == texts.len() => {
                for (i, start, end) in wanted {
                    found.push((i, vectors.get(start..end).and_then(route::centroid)));
                }
            }
            Ok(vectors) => tracing::warn!(
                agent = identifier,
                "the embedder gave {} vectors for {} texts; the agent's skills are routed by their words only",
                vectors.len(),
                texts.len()
            ),
            Err(e) => tracing::warn!(
                agent = identifier,
                "cannot embed the agent's skills ({e}); they are routed by their words only"
            ),
        }
    }
    drop(stored);
    for (i, vector) in found {
        if let Some(doc) = skills.get_mut(i) {
            doc.vector = vector;
        }
    }
    if !embedding.model.is_empty() {
        let kept: Vec<SkillVector> = skills
            .iter()
            .zip(keys)
            .filter_map(|(d, texts)| {
                d.vector.as_ref().map(|v| SkillVector {
                    texts,
                    vector: v.clone(),
                })
            })
            .collect();
        if !kept.is_empty() {
            record.vectors = Some(StoredVectors {
                model: embedding.model.to_owned(),
                skills: kept,
            });
        }
    }
}

/// `v` scaled to length 1 (None when it is zero or not finite).
fn unit(v: &[f32]) -> Option<Vec<f32>> {
    let norm = v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    (norm > 0.0 && norm.is_finite())
        .then(|| v.iter().map(|x| (f64::from(*x) / norm) as f32).collect())
}

/// A vector in 8 bits a number: each number divided by the vector's
/// scale (its largest magnitude over 127) and rounded, so that the route's
/// scan reads a quarter of the memory of `f32` (at 10,000 cards, 30,000
/// skills: 11 MB instead of 46 MB a route, which is what the scan's time
/// was). The dot product of two quantised unit vectors is within about
/// 1e-2 of their cosine; it only preselects candidates, which are then
/// scored with the vectors themselves ([`route::cosine`]).
fn quantize(v: &[f32]) -> (Vec<i8>, f32) {
    let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if !(max > 0.0 && max.is_finite()) {
        return (vec![0; v.len()], 0.0);
    }
    let scale = max / 127.0;
    let q = v
        .iter()
        .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8)
        .collect();
    (q, scale)
}

/// The dot product of two quantised vectors (of one length; the shorter
/// one's length otherwise), in their units.
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    let n = a.len().min(b.len());
    let whole = n - n % 16;
    let (Some((a, a_tail)), Some((b, b_tail))) = (
        a.get(..n).map(|a| a.split_at(whole)),
        b.get(..n).map(|b| b.split_at(whole)),
    ) else {
        return 0;
    };
    // Nothing past the chunks for vectors of 384 (the route's scan: no
    // work a row beyond the chunks).
    let tail: i32 = if a_tail.is_empty() {
        0
    } else {
        a_tail
            .iter()
            .zip(b_tail)
            .map(|(x, y)| i32::from(*x) * i32::from(*y))
            .sum()
    };
    dot_i8_16(a, b) + tail
}

/// The sum of the dot products of chunks of 16: with AVX2 when the
/// processor has it (checked at run time: [`dot_i8_16_avx2`]), with SSE2
/// otherwise (x86-64's baseline: [`dot_i8_16_sse2`]). The library is
/// optimised for size (opt-level "z", which does not vectorise loops), so
/// the instructions are named (hand-written: a crate of SIMD kernels for
/// one loop is not worth its weight). Each product fits an i16 pair's sum
/// in i32 (127 × 127 × 2); the sums are exact, so both give the same.
#[cfg(target_arch = "x86_64")]
fn dot_i8_16(a: &[i8], b: &[i8]) -> i32 {
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2 (checked just above).
        unsafe { dot_i8_16_avx2(a, b) }
    } else {
        dot_i8_16_sse2(a, b)
    }
}

/// [`dot_i8_16`] with AVX2: each chunk of 16 sign-extended to 16 bits in
/// one instruction (`vpmovsxbw`), multiplied and added in pairs
/// (`vpmaddwd`): a third of the SSE2 version's instructions, on the
/// route's scan of every skill's vector (most of a route's time at 10,000
/// cards).
///
/// # Safety
///
/// The processor must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_i8_16_avx2(a: &[i8], b: &[i8]) -> i32 {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm_loadu_si128, _mm256_add_epi32, _mm256_cvtepi8_epi16,
        _mm256_madd_epi16, _mm256_setzero_si256, _mm256_storeu_si256,
    };
    let chunks = a.len().min(b.len()) / 16;
    let mut lanes = [0i32; 8];
    // SAFETY: the caller checked that the processor has AVX2; each load
    // reads 16 i8 (16 bytes, unaligned) at `16 * i`, inside both slices
    // (i < chunks); the store writes the 8 i32 of `lanes` (32 bytes).
    unsafe {
        let mut acc = _mm256_setzero_si256();
        for i in 0..chunks {
            let x = _mm_loadu_si128(a.as_ptr().add(16 * i).cast::<__m128i>());
            let y = _mm_loadu_si128(b.as_ptr().add(16 * i).cast::<__m128i>());
            let (x, y) = (_mm256_cvtepi8_epi16(x), _mm256_cvtepi8_epi16(y));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(x, y));
        }
        _mm256_storeu_si256(lanes.as_mut_ptr().cast::<__m256i>(), acc);
    }
    let [l0, l1, l2, l3, l4, l5, l6, l7] = lanes;
    l0 + l1 + l2 + l3 + l4 + l5 + l6 + l7
}

/// [`dot_i8_16`] with SSE2.
#[cfg(target_arch = "x86_64")]
fn dot_i8_16_sse2(a: &[i8], b: &[i8]) -> i32 {
    use std::arch::x86_64::{
        __m128i, _mm_add_epi32, _mm_loadu_si128, _mm_madd_epi16, _mm_setzero_si128, _mm_srai_epi16,
        _mm_storeu_si128, _mm_unpackhi_epi8, _mm_unpacklo_epi8,
    };
    let mut lanes = [0i32; 4];
    // SAFETY: SSE2 is part of the x86-64 baseline (every x86-64 processor
    // has it); each load reads one chunk of 16 i8 (16 bytes, unaligned),
    // the store writes the 4 i32 of `lanes` (16 bytes).
    unsafe {
        let mut acc = _mm_setzero_si128();
        for (x, y) in a.chunks_exact(16).zip(b.chunks_exact(16)) {
            let x = _mm_loadu_si128(x.as_ptr().cast::<__m128i>());
            let y = _mm_loadu_si128(y.as_ptr().cast::<__m128i>());
            // Each byte sign-extended to 16 bits: the byte twice in a
            // 16-bit lane, shifted right arithmetically by 8.
            let (xl, xh) = (
                _mm_srai_epi16::<8>(_mm_unpacklo_epi8(x, x)),
                _mm_srai_epi16::<8>(_mm_unpackhi_epi8(x, x)),
            );
            let (yl, yh) = (
                _mm_srai_epi16::<8>(_mm_unpacklo_epi8(y, y)),
                _mm_srai_epi16::<8>(_mm_unpackhi_epi8(y, y)),
            );
            acc = _mm_add_epi32(
                acc,
                _mm_add_epi32(_mm_madd_epi16(xl, yl), _mm_madd_epi16(xh, yh)),
            );
        }
        _mm_storeu_si128(lanes.as_mut_ptr().cast::<__m128i>(), acc);
    }
    lanes.iter().sum()
}

/// [`dot_i8_16`] elsewhere.
#[cfg(not(target_arch = "x86_64"))]
fn dot_i8_16(a: &[i8], b: &[i8]) -> i32 {
    a.chunks_exact(16)
        .zip(b.chunks_exact(16))
        .map(|(x, y)| {
            x.iter()
                .zip(y)
                .map(|(x, y)| i32::from(*x) * i32::from(*y))
                .sum::<i32>()
        })
        .sum()
}

/// The skills' vectors side by side, one row of `dim` numbers a skill (in
/// no order), quantised ([`quantize`]), for the route's scan: one pass
/// over contiguous memory instead of a pointer to follow per skill and an
/// entry to look up per skill. Kept in step with the entries by
/// [`Index::insert`] and [`Index::unindex`] (a removed row is replaced by
/// the last one).
#[derive(Debug, Default)]
struct VectorTable {
    /// The vectors' length (that of the first one put in; a vector of
    /// another length, from another model, is left out).
    dim: usize,
    data: Vec<i8>,
    /// Each row's scale.
    scales: Vec<f32>,
    /// Each row's skill.
    keys: Vec<(u32, u16)>,
    /// Each row's entry: active, and a card the router routes to by
    /// default ([`Record::routable`]); an entry's state is fixed while it
    /// is indexed (a change indexes it again).
    active: Vec<bool>,
    routable: Vec<bool>,
    /// Each skill's row.
    rows: HashMap<(u32, u16), usize, ahash::RandomState>,
}

impl VectorTable {
    fn push(&mut self, key: (u32, u16), v: &[f32], active: bool, routable: bool) {
        if self.keys.is_empty() {
            self.dim = v.len();
        }
        if v.is_empty() || v.len() != self.dim || self.rows.contains_key(&key) {
            return;
        }
        let (q, scale) = quantize(v);
        self.rows.insert(key, self.keys.len());
        self.data.extend_from_slice(&q);
        self.scales.push(scale);
        self.keys.push(key);
        self.active.push(active);
        self.routable.push(routable);
    }

    fn remove(&mut self, key: (u32, u16)) {
        let Some(row) = self.rows.remove(&key) else {
            return;
        };
        let last = self.keys.len() - 1;
        if row != last {
            let moved = self.keys[last];
            self.data
                .copy_within(last * self.dim..(last + 1) * self.dim, row * self.dim);
            self.scales[row] = self.scales[last];
            self.keys[row] = moved;
            self.active[row] = self.active[last];
            self.routable[row] = self.routable[last];
            self.rows.insert(moved, row);
        }
        self.data.truncate(last * self.dim);
        self.scales.truncate(last);
        self.keys.truncate(last);
        self.active.truncate(last);
        self.routable.truncate(last);
    }

    /// The rows: each one's number, skill, vector and scale.
    fn iter(&self) -> impl Iterator<Item = (usize, (u32, u16), &[i8], f32)> {
        self.data
            .chunks_exact(self.dim.max(1))
            .zip(&self.keys)
            .zip(&self.scales)
            .enumerate()
            .map(|(row, ((v, k), s))| (row, *k, v, *s))
    }
}

/// A search hit.
#[derive(Debug, Clone)]
pub struct Hit {
    /// The entry.
    pub entry: Arc<Indexed>,
    /// Relevance, 0 to 100.
    pub score: u8,
    /// For ordering.
    pub raw: f64,
}

/// Entries whose relevance is below this share of the query's terms are
/// not in the matched set (search and explore use the same cutoff).
pub const RELEVANCE_CUTOFF: f64 = 0.15;

/// The index.
pub struct Index {
    analyzer: Arc<Analyzer>,
    slots: HashMap<String, u32, ahash::RandomState>,
    next_slot: u32,
    entries: HashMap<u32, Arc<Indexed>, ahash::RandomState>,
    /// Revisions of withdrawn entries (so an older write does not revive
    /// them).
    removed: HashMap<String, i64>,
    text: Bm25Index<u32>,
    skills: Bm25Index<(u32, u16)>,
    /// The skills' vectors (with an embedder).
    vectors: VectorTable,
    /// How many skills have each term in their own text (name, id,
    /// description, tags, examples), and how many skills there are: the
    /// router's IDF. The words of an agent's name and description are in
    /// every one of its skills' BM25F documents; counted there, they would
    /// look common and weigh less than a word of one example.
    skill_df: HashMap<String, u32, ahash::RandomState>,
    /// How many skills have each term in their name, id, tags or
    /// description.
    topic_df: HashMap<String, u32, ahash::RandomState>,
    skill_count: u32,
    /// The highest store revision applied.
    pub revision: i64,
}

impl Index {
    /// An empty index.
    pub fn new(analyzer: Arc<Analyzer>) -> Self {
        Self {
            analyzer,
            slots: HashMap::default(),
            next_slot: 0,
            entries: HashMap::default(),
            removed: HashMap::new(),
            text: Bm25Index::default(),
            skills: Bm25Index::default(),
            vectors: VectorTable::default(),
            skill_df: HashMap::default(),
            topic_df: HashMap::default(),
            skill_count: 0,
            revision: 0,
        }
    }

    /// The analyzer.
    pub fn analyzer(&self) -> &Arc<Analyzer> {
        &self.analyzer
    }

    /// How many live entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn known_revision(&self, id: &str) -> i64 {
        self.slots
            .get(id)
            .and_then(|s| self.entries.get(s))
            .map(|e| e.revision)
            .or_else(|| self.removed.get(id).copied())
            .unwrap_or(0)
    }

    /// Puts an entry in (unless the index has a newer revision of it).
    pub fn put(&mut self, indexed: Indexed) -> bool {
        let id = indexed.record.identifier.clone();
        if indexed.revision != 0 && indexed.revision <= self.known_revision(&id) {
            return false;
        }
        self.insert(indexed);
        true
    }

    /// Puts in again the revision of an entry that the index has (its
    /// skills' vectors computed since); nothing if it has another.
    pub fn refill(&mut self, indexed: Indexed) -> bool {
        let current = self.get(&indexed.record.identifier).map(|e| e.revision);
        if current != Some(indexed.revision) {
            return false;
        }
        self.insert(indexed);
        true
    }

    fn insert(&mut self, indexed: Indexed) {
        let id = indexed.record.identifier.clone();
        self.revision = self.revision.max(indexed.revision);
        self.removed.remove(&id);
        let slot = match self.slots.get(&id) {
            Some(s) => *s,
            None => {
                let s = self.next_slot;
                self.next_slot += 1;
                self.slots.insert(id, s);
                s
            }
        };
        self.unindex(slot);
        let t = &indexed.terms;
        self.text.insert(
            slot,
            &[
                Field {
                    weight: 3.0,
                    terms: &t.name,
                },
                Field {
                    weight: 1.0,
                    terms: &t.description,
                },
                Field {
                    weight: 2.0,
                    terms: &t.skill_names,
                },
                Field {
                    weight: 1.0,
                    terms: &t.skill_descriptions,
                },
                Field {
                    weight: 2.0,
                    terms: &t.tags,
                },
                Field {
                    weight: 1.0,
                    terms: &t.examples,
                },
                Field {
                    weight: 1.0,
                    terms: &t.queries,
                },
                Field {
                    weight: 1.0,
                    terms: &t.capabilities,
                },
            ],
        );
        let active = indexed.record.fetch.status == crate::model::Status::Active;
        let routable = indexed.record.routable(&indexed.facts);
        for (i, s) in indexed.skills.iter().enumerate() {
            let examples = s.all_example_terms();
            let Ok(i) = u16::try_from(i) else { break };
            if let Some(v) = &s.vector {
                self.vectors.push((slot, i), v, active, routable);
            }
            self.skill_count += 1;
            for t in &s.own_terms {
                *self.skill_df.entry(t.clone()).or_default() += 1;
            }
            for t in &s.topic_terms {
                *self.topic_df.entry(t.clone()).or_default() += 1;
            }
            self.skills.insert(
                (slot, i),
                &[
                    Field {
                        weight: 2.0,
                        terms: &s.name,
                    },
                    Field {
                        weight: 1.0,
                        terms: &s.id,
                    },
                    Field {
                        weight: 1.0,
                        terms: &s.description,
                    },
                    Field {
                        weight: 1.5,
                        terms: &s.tags,
                    },
                    Field {
                        weight: 1.0,
                        terms: &examples,
                    },
                    Field {
                        weight: 0.5,
                        terms: &s.agent_name,
                    },
                    Field {
                        weight: 0.3,
                        terms: &s.agent_description,
                    },
                ],
            );
        }
        self.entries.insert(slot, Arc::new(indexed));
    }

    fn unindex(&mut self, slot: u32) {
        if let Some(old) = self.entries.remove(&slot) {
            self.text.remove(&slot);
            for (i, s) in old.skills.iter().enumerate() {
                let Ok(i) = u16::try_from(i) else { break };
                self.skills.remove(&(slot, i));
                self.vectors.remove((slot, i));
                self.skill_count = self.skill_count.saturating_sub(1);
                for t in &s.own_terms {
                    if let Some(n) = self.skill_df.get_mut(t) {
                        *n = n.saturating_sub(1);
                        if *n == 0 {
                            self.skill_df.remove(t);
                        }
                    }
                }
                for t in &s.topic_terms {
                    if let Some(n) = self.topic_df.get_mut(t) {
                        *n = n.saturating_sub(1);
                        if *n == 0 {
                            self.topic_df.remove(t);
                        }
                    }
                }
            }
        }
    }

    /// Takes an entry out (withdrawn at `revision`).
    pub fn remove(&mut self, id: &str, revision: i64) -> bool {
        if revision != 0 && revision < self.known_revision(id) {
            return false;
        }
        self.revision = self.revision.max(revision);
        self.removed.insert(id.to_owned(), revision);
        match self.slots.remove(id) {
            Some(slot) => {
                self.unindex(slot);
                true
            }
            None => false,
        }
    }

    /// One entry.
    pub fn get(&self, id: &str) -> Option<Arc<Indexed>> {
        self.slots
            .get(id)
            .and_then(|s| self.entries.get(s))
            .cloned()
    }

    /// Every live entry (unordered).
    pub fn all(&self) -> impl Iterator<Item = &Arc<Indexed>> {
        self.entries.values()
    }

    /// Entries matching `text` (relevance at or above the cutoff) and the
    /// filter, best first.
    pub fn search(
        &self,
        text: &str,
        filter: &CompiledFilter,
        include: impl Fn(&Indexed) -> bool,
    ) -> Vec<Hit> {
        let q = self.analyzer.terms(text);
        let mut hits: Vec<Hit> = Vec::new();
        let mut best_raw: f64 = 0.0;
        for (slot, s) in self.text.search_unordered(&q) {
            if s.coverage < RELEVANCE_CUTOFF {
                continue;
            }
            let Some(e) = self.entries.get(&slot) else {
                continue;
            };
            if !include(e) || !filter.matches(&e.view) {
                continue;
            }
            best_raw = best_raw.max(s.raw);
            hits.push(Hit {
                entry: Arc::clone(e),
                score: 0,
                raw: s.raw + s.coverage * 1e-6,
            });
            // The coverage is kept in `score` for a moment.
            if let Some(h) = hits.last_mut() {
                h.score = (s.coverage * 100.0).round().clamp(0.0, 100.0) as u8;
            }
        }
        for h in &mut hits {
            let coverage = f64::from(h.score) / 100.0;
            let relative = if best_raw > 0.0 {
                h.raw / best_raw
            } else {
                0.0
            };
            h.score = ((0.75 * coverage + 0.25 * relative.min(1.0)) * 100.0)
                .round()
                .clamp(0.0, 100.0) as u8;
        }
        hits.sort_unstable_by(|a, b| {
            b.raw
                .total_cmp(&a.raw)
                .then_with(|| a.entry.record.identifier.cmp(&b.entry.record.identifier))
        });
        hits
    }

    /// Routes a request to the skills that fit it best.
    pub fn route(
        &self,
        text: &str,
        filter: &CompiledFilter,
        config: &RouterConfig,
        query_vec: Option<&[f32]>,
        limit: usize,
    ) -> RouteResponse {
        let words = self.analyzer.words(text);
        let q: Vec<String> = words.iter().map(|w| w.term.clone()).collect();
        if q.is_empty() {
            return RouteResponse {
                no_fit: true,
                reason: Some(
                    "the request has no words to match (only stop words or symbols)".into(),
                ),
                ..Default::default()
            };
        }
        // A word no skill has weighs as much as the rarest known word (times
        // `unknown_weight`), whatever the size of the registry: with the raw
        // IDF it would outweigh every known word of a small registry.
        let rarest = self.own_idf_of_df(1);
        // What each term counts for, relative to its IDF (also in BM25F).
        let factors: Vec<f64> = words
            .iter()
            .map(|w| self.term_factor(&w.term, w.name, w.temporal, config))
            .collect();
        let idf: Vec<f64> = words
            .iter()
            .zip(&factors)
            .map(|(word, f)| {
                let t = &word.term;
                let w = match self.skill_df.get(t) {
                    Some(df) => self.own_idf_of_df(*df),
                    // Only in agents' names or descriptions.
                    None if self.skills.contains_term(t) => rarest,
                    // A name no skill has says nothing of the domain.
                    None if word.name => rarest,
                    None => rarest * config.unknown_weight,
                };
                w * f
            })
            .collect();
        let idf_sum: f64 = idf.iter().sum();
        // The weight of the request's words that some skill has.
        let known_sum: f64 = q
            .iter()
            .zip(&idf)
            .filter(|(t, _)| self.skills.contains_term(t))
            .map(|(_, w)| w)
            .sum();
        // Pairs of successive content words of the request (by the
        // positions of their distinct terms), for the phrase signal.
        let mut pairs: Vec<(usize, usize)> = Vec::new();
        if config.phrase_weight > 0.0 {
            let content = |t: &String| {
                !self.analyzer.is_common(t)
                    && !self.analyzer.is_temporal(t)
                    && !t.chars().all(|c| c.is_ascii_digit())
            };
            let seq = self.analyzer.terms(text);
            for w in seq.windows(2) {
                if w[0] == w[1] || !content(&w[0]) || !content(&w[1]) {
                    continue;
                }
                let (Some(a), Some(b)) = (
                    q.iter().position(|t| *t == w[0]),
                    q.iter().position(|t| *t == w[1]),
                ) else {
                    continue;
                };
                if !pairs.contains(&(a, b)) {
                    pairs.push((a, b));
                }
            }
        }
        let pairs_sum: f64 = pairs.iter().map(|(a, b)| idf[*a] + idf[*b]).sum();
        // Which terms are words of content (for `min_content_coverage`).
        let content: Vec<bool> = words
            .iter()
            .map(|w| {
                let name = w.name && !self.topic_df.contains_key(&w.term);
                let number = w.term.chars().all(|c| c.is_ascii_digit());
                !(w.temporal || name || number || self.analyzer.is_common(&w.term))
            })
            .collect();
        let q_norm: f64 = idf.iter().map(|w| w * w).sum::<f64>().sqrt();
        let wants_old = filter.has("protocolVersion") || filter.has("cardVersion");

        // Two stages: BM25F picks the candidates (cheap, over the inverted
        // index), the full score ranks the best of them. With an embedder,
        // the skills nearest to the request's embedding join them.
        const CANDIDATES: usize = 200;
        let mut candidates: Vec<(u32, u16)> = self.skills.top(&q, CANDIDATES, |k| {
            self.entries.get(&k.0).is_some_and(|e| {
                e.record.fetch.status == crate::model::Status::Active
                    && (wants_old || e.record.routable(&e.facts))
                    && filter.matches(&e.view)
            })
        });
        // Every skill's vector against the request's: the skills' vectors
        // are of length 1 (`route::centroid`), so the cosine is their dot
        // product with the request's unit vector, in f32 over 8 lanes, and
        // only the nearest `CANDIDATES` are selected (not all sorted). At
        // 10,000 cards (30,000 skills) this scan is most of a route.
        if let Some((qn, q_scale)) = query_vec.and_then(unit).map(|u| quantize(&u)) {
            let table = &self.vectors;
            // Which entries a filter lets through, by slot (looked up once
            // an entry, not once a skill).
            let passes: Option<Vec<bool>> = (!filter.is_empty()).then(|| {
                let mut passes = vec![false; self.next_slot as usize];
                for (slot, e) in &self.entries {
                    if let Some(p) = passes.get_mut(*slot as usize) {
                        *p = filter.matches(&e.view);
                    }
                }
                passes
            });
            let mut near: Vec<(f32, (u32, u16))> = Vec::with_capacity(table.keys.len());
            for (row, key, v, scale) in table.iter() {
                let usable = table.active[row]
                    && (wants_old || table.routable[row])
                    && passes
                        .as_ref()
                        .is_none_or(|p| p.get(key.0 as usize).copied().unwrap_or(false));
                if usable {
                    near.push((dot_i8(&qn, v) as f32 * scale * q_scale, key));
                }
            }
            let nearest = |a: &(f32, (u32, u16)), b: &(f32, (u32, u16))| {
                b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
            };
            if near.len() > CANDIDATES {
                near.select_nth_unstable_by(CANDIDATES, nearest);
                near.truncate(CANDIDATES);
            }
            near.sort_unstable_by(nearest);
            for (_, k) in near {
                if !candidates.contains(&k) {
                    candidates.push(k);
                }
            }
        }
        struct Cand {
            score: f64,
            semantic: f64,
            coverage: f64,
            content_coverage: f64,
            slot: u32,
            skill: u16,
            /// The example closest to the request, if one shares a word.
            best_example: Option<usize>,
        }
        /// What the candidates of one entry share: where each of its
        /// skills has each of the request's terms ([`SkillDoc::found`],
        /// skill by skill, term by term), and the agent's coverage.
        struct EntryMatch {
            found: Vec<Found>,
            agent_coverage: f64,
        }
        let mut matched: HashMap<u32, EntryMatch, ahash::RandomState> = HashMap::default();
        let bm25_scorer = self.skills.scorer(&q, &factors);
        // Each term of the examples met, what it weighs (as a word and as a
        // name), looked up once a route; the terms of one example met.
        let mut example_weights: HashMap<&str, [f64; 2], ahash::RandomState> = HashMap::default();
        let mut seen: Vec<&String> = Vec::new();
        let mut scored: Vec<Cand> = Vec::new();
        for (slot, i) in candidates {
            let Some(e) = self.entries.get(&slot) else {
                continue;
            };
            let Some(doc) = e.skills.get(usize::from(i)) else {
                continue;
            };
            let Some(facts) = e.facts.skills.get(usize::from(i)) else {
                continue;
            };
            let usable = e.record.fetch.status == crate::model::Status::Active
                && (wants_old || e.record.routable(&e.facts));
            if !usable || !filter.matches(&e.view) || !skill_passes(filter, facts) {
                continue;
            }
            let m = matched.entry(slot).or_insert_with(|| {
                let found: Vec<Found> = e
                    .skills
                    .iter()
                    .flat_map(|d| q.iter().map(|t| d.found(|x| x == t)))
                    .collect();
                // The agent as a whole: the best presence over all its
                // skills.
                let mut agent_found = 0.0;
                if config.agent_weight > 0.0 {
                    for (k, (t, w)) in q.iter().zip(&idf).enumerate() {
                        let p = e
                            .skills
                            .iter()
                            .zip(found.chunks_exact(q.len()))
                            .map(|(d, f)| d.presence_from(f[k], t, 1.0, config.related_weight))
                            .fold(0.0, f64::max);
                        agent_found += w * p;
                    }
                }
                EntryMatch {
                    found,
                    agent_coverage: if idf_sum > 0.0 {
                        agent_found / idf_sum
                    } else {
                        0.0
                    },
                }
            });
            let agent_coverage = m.agent_coverage;
            let doc_found = m
                .found
                .chunks_exact(q.len())
                .nth(usize::from(i))
                .unwrap_or_default();
            // Coverage.
            let (mut found, mut content_found) = (0.0, 0.0);
            for (((t, w), is_content), f) in q.iter().zip(&idf).zip(&content).zip(doc_found) {
                let p =
                    doc.presence_from(*f, t, config.agent_words_in_skill, config.related_weight);
                if p > 0.0 {
                    found += w * p;
                    if *is_content {
                        content_found += w * p;
                    }
                }
            }
            let coverage = if idf_sum > 0.0 { found / idf_sum } else { 0.0 };
            let content_coverage = if idf_sum > 0.0 {
                content_found / idf_sum
            } else {
                0.0
            };
            // Best example.
            let mut best_example = (0.0, None::<usize>);
            for (n, ex) in doc.examples.iter().enumerate() {
                let mut dot = 0.0;
                let mut ex_norm = 0.0;
                seen.clear();
                let names = doc.example_names.get(n);
                for t in ex {
                    if seen.contains(&t) {
                        continue;
                    }
                    seen.push(t);
                    let name = names.is_some_and(|v| v.contains(t));
                    let weights = example_weights.entry(t.as_str()).or_insert_with(|| {
                        let idf = self.own_idf(t);
                        let temporal = self.analyzer.is_temporal(t);
                        [false, true].map(|name| idf * self.term_factor(t, name, temporal, config))
                    });
                    let w = weights[usize::from(name)];
                    ex_norm += w * w;
                    if let Some(k) = q.iter().position(|x| x == t) {
                        dot += w * idf[k];
                    } else if config.related_weight > 0.0 {
                        if let Some(k) = q.iter().position(|x| text::related(x, t)) {
                            dot += config.related_weight * w * idf[k];
                        }
                    }
                }
                if ex_norm > 0.0 && q_norm > 0.0 {
                    let sim = dot / (q_norm * ex_norm.sqrt());
                    if sim > best_example.0 {
                        best_example = (sim, Some(n));
                    }
                }
            }
            let bm25 = if bm25_scorer.bound > 0.0 {
                bm25_scorer.raw(&(slot, i)) / bm25_scorer.bound
            } else {
                0.0
            };
            // The share of the skill's name and id the request says.
            let (mut named, mut name_all) = (0.0, 0.0);
            for t in &doc.name_terms {
                let w = self.own_idf(t);
                name_all += w;
                if q.contains(t) {
                    named += w;
                } else if config.related_weight > 0.0 && q.iter().any(|x| text::related(x, t)) {
                    named += config.related_weight * w;
                }
            }
            let name_share = if name_all > 0.0 {
                named / name_all
            } else {
                0.0
            };
            // The share of the request's pairs of words the skill says too.
            let phrase = if pairs_sum > 0.0 {
                pairs
                    .iter()
                    .filter(|(a, b)| doc.has_pair(&q[*a], &q[*b]))
                    .map(|(a, b)| idf[*a] + idf[*b])
                    .sum::<f64>()
                    / pairs_sum
            } else {
                0.0
            };
            let weights = config.coverage_weight
                + config.example_weight
                + config.bm25_weight
                + config.name_weight
                + config.phrase_weight;
            let mut score = (config.coverage_weight * coverage
                + config.example_weight * best_example.0
                + config.bm25_weight * bm25
                + config.name_weight * name_share
                + config.phrase_weight * phrase)
                / weights.max(1e-9);
            score = (1.0 - config.agent_weight) * score + config.agent_weight * agent_coverage;
            let mut semantic = 0.0;
            if let Some(qv) = query_vec {
                semantic = doc.vector.as_ref().map_or(0.0, |v| cosine(qv, v).max(0.0));
                score = (1.0 - config.semantic_weight) * score + config.semantic_weight * semantic;
            }
            scored.push(Cand {
                score,
                semantic,
                coverage,
                content_coverage,
                slot,
                skill: i,
                best_example: best_example.1.filter(|_| best_example.0 > 0.0),
            });
        }
        scored.sort_by(|a, b| {
            b.score.total_cmp(&a.score).then_with(|| {
                let ka = self
                    .entries
                    .get(&a.slot)
                    .map(|e| e.record.identifier.as_str());
                let kb = self
                    .entries
                    .get(&b.slot)
                    .map(|e| e.record.identifier.as_str());
                ka.cmp(&kb).then(a.skill.cmp(&b.skill))
            })
        });
        let threshold = if query_vec.is_some() {
            config.semantic_fit_threshold
        } else {
            config.fit_threshold
        };
        let mut out = RouteResponse::default();
        for c in scored.iter().take(limit.max(1)) {
            let Some(e) = self.entries.get(&c.slot) else {
                continue;
            };
            let (Some(s), Some(doc)) = (
                e.facts.skills.get(usize::from(c.skill)),
                e.skills.get(usize::from(c.skill)),
            ) else {
                continue;
            };
            // Why, for the matches answered only: the words of the request
            // the skill has, its closest example, the similarity.
            let words_list = q
                .iter()
                .zip(&words)
                .filter(|(t, _)| {
                    doc.presence(t, config.agent_words_in_skill, config.related_weight) > 0.0
                })
                .map(|(_, word)| format!("\"{}\"", word.word))
                .collect::<Vec<_>>()
                .join(", ");
            let semantic_note = if query_vec.is_some() {
                format!("; semantic similarity {:.2}", c.semantic)
            } else {
                String::new()
            };
            let why = match c.best_example {
                Some(n) => format!(
                    "closest example: \"{}\"; shared words: {words_list}{semantic_note}",
                    s.examples.get(n).map_or("", String::as_str)
                ),
                None if !words_list.is_empty() => format!(
                    "shared words with the skill's name, tags or description: {words_list}{semantic_note}"
                ),
                None => format!("no shared words{semantic_note}"),
            };
            out.matches.push(RouteMatch {
                agent_name: e.facts.name.clone(),
                identifier: e.record.identifier.clone(),
                skill_id: s.id.clone(),
                skill_name: s.name.clone(),
                score: (c.score * 100.0).round().clamp(0.0, 100.0) as u8,
                why,
                url: e.record.url().map(str::to_owned),
            });
        }
        match (scored.first(), scored.get(1)) {
            (None, _) => {
                out.no_fit = true;
                out.reason = Some(
                    "no registered skill shares a word with the request; ask the user to say more, \
                     or search the registry"
                        .into(),
                );
            }
            (Some(best), _) if best.score < threshold => {
                out.no_fit = true;
                out.reason = Some(format!(
                    "the best skill scores {:.0} of 100, below the fit threshold of {:.0}: no skill fits; \
                     ask the user rather than guess",
                    best.score * 100.0,
                    threshold * 100.0
                ));
            }
            (Some(best), _) if query_vec.is_some() && best.semantic < config.min_semantic => {
                out.no_fit = true;
                out.reason = Some(format!(
                    "the best skill is close to the request in meaning by only {:.2} (at least {:.2} \
                     needed): no skill fits; ask the user rather than guess",
                    best.semantic, config.min_semantic
                ));
            }
            (Some(best), _)
                if known_sum > 0.0
                    && best.coverage * idf_sum / known_sum < config.min_known_share =>
            {
                out.no_fit = true;
                out.reason = Some(format!(
                    "the best skill has only {:.0}% of the request's words that some skill has \
                     (at least {:.0}% needed): the request's words belong to different skills, \
                     none fits; ask the user rather than guess",
                    best.coverage * idf_sum / known_sum * 100.0,
                    config.min_known_share * 100.0
                ));
            }
            (Some(best), _)
                if best.content_coverage < config.min_content_coverage
                    && best.score >= threshold =>
            {
                out.no_fit = true;
                out.reason = Some(format!(
                    "the best skill shares with the request only common words, numbers, \
                     words of time or names ({:.0}% of the request in words of content, at \
                     least {:.0}% needed): no skill fits; ask the user rather than guess",
                    best.content_coverage * 100.0,
                    config.min_content_coverage * 100.0
                ));
            }
            (Some(best), _) if best.coverage < config.min_coverage => {
                out.no_fit = true;
                out.reason = Some(format!(
                    "the best skill has only {:.0}% of the request's words (at least {:.0}% \
                     needed): no skill fits; ask the user rather than guess",
                    best.coverage * 100.0,
                    config.min_coverage * 100.0
                ));
            }
            (Some(best), Some(second)) if best.score - second.score <= config.tie_margin => {
                out.ambiguous = true;
                out.reason = Some(format!(
                    "the best two skills fit about equally well ({:.0} and {:.0} of 100): ask which \
                     one is meant",
                    best.score * 100.0,
                    second.score * 100.0
                ));
            }
            _ => {}
        }
        out
    }
}

impl Index {
    /// The router's IDF of a term that `df` skills have in their own text.
    fn own_idf_of_df(&self, df: u32) -> f64 {
        let n = f64::from(self.skill_count);
        let df = f64::from(df);
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln().max(0.0)
    }

    /// What a term counts for, relative to its IDF: less for a word of
    /// time, a number, a common English word and a name that is no skill's
    /// topic ([`RouterConfig`]).
    fn term_factor(&self, term: &str, name: bool, temporal: bool, config: &RouterConfig) -> f64 {
        let mut f = if temporal {
            config.temporal_weight
        } else if term.chars().all(|c| c.is_ascii_digit()) {
            config.number_weight
        } else if self.analyzer.is_common(term) {
            config.common_word_weight
        } else {
            1.0
        };
        if name && !self.topic_df.contains_key(term) {
            f *= config.entity_weight;
        }
        f
    }

    /// The router's IDF of a term (that of the rarest term when no skill
    /// has it in its own text).
    fn own_idf(&self, term: &str) -> f64 {
        self.own_idf_of_df(self.skill_df.get(term).copied().unwrap_or(1))
    }
}

/// The skill-level keys of a route filter (`skill`, `inputMode`,
/// `outputMode`) apply to the skill itself, not only to its agent.
fn skill_passes(filter: &CompiledFilter, skill: &crate::card::SkillFacts) -> bool {
    filter.matches_skill(skill)
}

#[cfg(test)]
mod vector_tests {
    use super::*;

    #[test]
    fn the_quantised_dot_of_unit_vectors_is_near_their_cosine() {
        let a: Vec<f32> = (0..389).map(|i| ((i * 7) % 13) as f32 - 6.0).collect();
        let b: Vec<f32> = (0..389).map(|i| ((i * 5) % 11) as f32 - 4.5).collect();
        let (ua, ub) = (unit(&a).unwrap(), unit(&b).unwrap());
        let ((qa, sa), (qb, sb)) = (quantize(&ua), quantize(&ub));
        let d = f64::from(dot_i8(&qa, &qb) as f32 * sa * sb);
        assert!((d - cosine(&a, &b)).abs() < 1e-2, "{d}");
        let d = dot_i8(&qa, &qa) as f32 * sa * sa;
        assert!((d - 1.0).abs() < 1e-2, "{d}");
        // The shorter one's length; the tail past the chunks of 16.
        assert_eq!(dot_i8(&[1, 2, 3], &[4, 5]), 14);
        let long: Vec<i8> = (0..40).map(|i| (i % 9) as i8 - 4).collect();
        let expected: i32 = long.iter().map(|x| i32::from(*x) * i32::from(*x)).sum();
        assert_eq!(dot_i8(&long, &long), expected);
        assert_eq!(dot_i8(&[-127; 32], &[127; 32]), -127 * 127 * 32);
        // Both kernels, whichever this processor runs.
        #[cfg(target_arch = "x86_64")]
        {
            let other: Vec<i8> = (0..48).map(|i| ((i * 37) % 255 - 127) as i8).collect();
            let exact: i32 = long
                .iter()
                .zip(&other)
                .map(|(x, y)| i32::from(*x) * i32::from(*y))
                .sum::<i32>();
            let (a, b) = (&long[..32], &other[..32]);
            let exact32: i32 = a
                .iter()
                .zip(b)
                .map(|(x, y)| i32::from(*x) * i32::from(*y))
                .sum();
            assert_eq!(dot_i8_16_sse2(a, b), exact32);
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the processor has AVX2.
                let avx2 = unsafe { dot_i8_16_avx2(a, b) };
                assert_eq!(avx2, exact32);
            }
            assert_eq!(dot_i8(&long, &other), exact);
        }
        assert_eq!(quantize(&[0.0, 0.0]).1, 0.0);
        assert_eq!(quantize(&[0.25, -1.0]).0, vec![32, -127]);
        assert_eq!(unit(&[0.0, 0.0]), None);
        assert_eq!(unit(&[f32::NAN]), None);
    }

    #[test]
    fn the_vector_table_keeps_one_row_a_skill_through_removals() {
        let mut t = VectorTable::default();
        t.push((1, 0), &[1.0, 0.0], true, true);
        t.push((1, 1), &[0.0, 1.0], true, false);
        t.push((2, 0), &[-1.0, 0.0], false, true);
        // Another length (another model): left out.
        t.push((3, 0), &[1.0, 0.0, 0.0], true, true);
        assert_eq!(t.keys.len(), 3);
        t.remove((1, 0));
        t.remove((9, 9));
        // Each row: its skill, its numbers, active, routable.
        type Row = ((u32, u16), Vec<i8>, bool, bool);
        let rows: Vec<Row> = t
            .iter()
            .map(|(row, k, v, _)| (k, v.to_vec(), t.active[row], t.routable[row]))
            .collect();
        assert_eq!(
            rows,
            vec![
                ((2, 0), vec![-127, 0], false, true),
                ((1, 1), vec![0, 127], true, false)
            ]
        );
        assert_eq!(t.rows.get(&(2, 0)), Some(&0));
        assert_eq!(t.rows.get(&(1, 1)), Some(&1));
        t.remove((2, 0));
        t.remove((1, 1));
        assert!(t.data.is_empty() && t.rows.is_empty());
        // Empty again: the next vector sets the length.
        t.push((3, 0), &[1.0, 0.0, 0.0], true, true);
        assert_eq!(t.dim, 3);
    }
}
