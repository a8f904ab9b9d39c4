//! Routing by skill examples: which agent and skill should handle a
//! request, or "no skill fits".
//!
//! The request is compared with every skill of the registered A2A 1.x
//! agents that are reachable. Lexically by default (no model): five
//! signals, each in 0..=1, over terms from the same analyzer as search,
//! with inverse document frequencies computed over the skills:
//!
//! - **coverage**: the IDF-weighted share of the request's terms found in
//!   the skill (an example, its name or tags count fully, its description a
//!   little less; the agent's name and description only as much as
//!   [`RouterConfig::agent_words_in_skill`] says). A request
//!   about something no skill mentions has words no skill has, whose IDF is
//!   the highest there is: coverage stays low, which is what makes "no skill
//!   fits" decidable;
//! - **example**: the best IDF-weighted cosine between the request and one
//!   of the skill's `examples`;
//! - **bm25**: the skill's BM25F score over its bound;
//! - **name**: the IDF-weighted share of the skill's name and id that the
//!   request says;
//! - **phrase**: the IDF-weighted share of the request's pairs of successive
//!   words of content that the skill has one after the other in a field
//!   ("purchase orders", "peer dependencies", "release notes").
//!
//! Not every word of a request says what is asked. Each term's IDF is
//! multiplied by a factor of [`RouterConfig`]: words of time ("Friday",
//! "tomorrow", "last night": [`crate::text::Analyzer::is_temporal`]) say
//! when, numbers say how much, and names (a word written with a capital
//! inside a sentence, "Berlin", "Tesla", "Priya", that no skill has in its
//! name, id, tags or description: [`crate::text::Word::name`]) say what the
//! request is about, not which skill it needs; by default words of time and
//! names count for nothing and numbers for half, in the request and in the
//! examples alike (BM25F included). Common English words and words no skill
//! has have factors too, and a derived form of a word ("summary" for
//! "summarize": [`crate::text::related`]) can count for part of the word;
//! the search on the training half left those at their neutral values.
//!
//! The IDF of routing is counted over the skills' own text (not their
//! agents' names and descriptions, which every skill of an agent shares).
//! The agent as a whole counts too ([`RouterConfig::agent_weight`]): the
//! request's terms found in any of its skills.
//! They are mixed with [`RouterConfig`]'s weights.
//!
//! With an [`Embedder`] (a semantic model: `crate::embed::SentenceEmbedder`
//! with the feature `semantic`, or any other), meaning counts too: each
//! skill's vector is the normalised mean of its examples' and
//! description's vectors, and the score becomes `(1 - w) * lexical + w *
//! cosine` ([`RouterConfig::semantic_weight`]), with its own fit threshold
//! ([`RouterConfig::semantic_fit_threshold`]) and a minimum cosine
//! ([`RouterConfig::min_semantic`]) below which no skill fits whatever
//! words it shares with the request. The skills nearest to the request's
//! vector join the BM25F candidates.
//!
//! The best candidate is chosen only when it scores at least
//! [`RouterConfig::fit_threshold`], and leads the next skill by more than
//! [`RouterConfig::tie_margin`]; otherwise the answer says so (`noFit` or
//! `ambiguous`), and the caller asks instead of guessing. Three more rules
//! of "no fit" can be set (a minimum coverage, a minimum share of the
//! request's known words, a minimum coverage in words of content); the
//! defaults leave them off.
//!
//! On the labelled set of the benchmark (`benches/registry.rs`, figures in
//! the repository's `benches/README.md`, "Agent registry": 355 requests, 157 of them written from the cards
//! alone by someone who had not seen the router) the defaults, chosen on
//! the training half of the first 198, choose the right skill for 72% of
//! the held-out in-domain requests (the right one is in the top three for
//! 93%) and answer "no fit" to 86% of the held-out requests that no skill
//! fits. Requests in words no card uses are mostly answered "no fit": an
//! [`Embedder`] is what closes that gap. With all-MiniLM-L6-v2 (22 M
//! parameters) the router chooses the right skill for 87% of the held-out
//! in-domain requests and says "no fit" to 92% of the held-out requests
//! that no skill fits (79% and 88% on the 157 written from the cards alone).
//!
//! Why the lexical router stays the default, without a model: a model is
//! files the registry cannot fetch by itself (87 MiB for that one), a longer
//! build (the feature `semantic`), and milliseconds of CPU per request
//! instead of a fraction of one; the lexical router explains each choice
//! word by word, and on requests worded like the skills' examples it does
//! as well. A registry whose requests come from people in their own words
//! should use a model.

use serde::{Deserialize, Serialize};

/// A semantic model: text to vectors (compared by cosine). Plug one in
/// with [`crate::RegistryBuilder::embedder`]: each skill's examples and
/// description are embedded when its agent is indexed (again only when
/// they change), the request when it is routed. With the feature
/// `semantic`, `crate::embed::SentenceEmbedder` is one: a local
/// sentence-embedding model (all-MiniLM-L6-v2, ...).
pub trait Embedder: Send + Sync + 'static {
    /// One vector per text, all of the same length. An error leaves the
    /// skills concerned without a vector, or routes the request lexically.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// [`Self::embed`] for a request a caller waits on: an embedder busy
    /// with other work for longer than `wait` may give up at once with an
    /// error (the request is then routed by its words) rather than queue
    /// it, so that a flood of requests cannot make every caller wait for
    /// the model. The default embeds as [`Self::embed`] does.
    fn embed_within(
        &self,
        texts: &[&str],
        wait: std::time::Duration,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let _ = wait;
        self.embed(texts)
    }

    /// What identifies the vectors this embedder gives: the model's name,
    /// the length of its vectors and something that changes with its
    /// weights (a digest of the weights file, the digest an installer
    /// checked...). The registry stores each skill's vector with it and
    /// reuses a stored vector only when the id is the same, so two
    /// embedders whose vectors differ must never have the same id. Called
    /// once, when the registry is built.
    ///
    /// The default, empty, says "unknown": vectors are then neither stored
    /// nor reused, and every card is embedded again when the registry
    /// starts.
    fn model_id(&self) -> String {
        String::new()
    }
}

/// Why an [`Embedder`] could not embed (or a model could not be loaded).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EmbedError(pub String);

/// The vectors of the requests routed last, by their text: a request
/// routed again (a client retrying, the same question from many users) is
/// not embedded again. At most `capacity` texts; the one used longest ago
/// makes room for a new one.
#[derive(Debug)]
pub(crate) struct RequestVectors {
    capacity: usize,
    clock: u64,
    /// Each text's vector, and when it was last used.
    seen: std::collections::HashMap<String, (u64, Vec<f32>), ahash::RandomState>,
}

/// How many requests' vectors a registry keeps (1.5 KB each with
/// 384-dimension vectors: 1.5 MB).
pub(crate) const REQUEST_VECTORS: usize = 1024;

impl RequestVectors {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            clock: 0,
            seen: Default::default(),
        }
    }

    /// The vector of `text`, if kept (and now the last used).
    pub(crate) fn get(&mut self, text: &str) -> Option<Vec<f32>> {
        self.clock += 1;
        let now = self.clock;
        self.seen.get_mut(text).map(|(used, v)| {
            *used = now;
            v.clone()
        })
    }

    /// Keeps `vector` as that of `text`.
    pub(crate) fn put(&mut self, text: &str, vector: Vec<f32>) {
        if self.capacity == 0 {
            return;
        }
        if self.seen.len() >= self.capacity && !self.seen.contains_key(text) {
            // The least recently used out (a scan of at most `capacity`
            // entries: nothing beside embedding a request).
            let oldest = self
                .seen
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(t, _)| t.clone());
            if let Some(t) = oldest {
                self.seen.remove(&t);
            }
        }
        self.clock += 1;
        self.seen.insert(text.to_owned(), (self.clock, vector));
    }
}

/// The cosine of two vectors (0 when either is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        dot += f64::from(*x) * f64::from(*y);
        na += f64::from(*x) * f64::from(*x);
        nb += f64::from(*y) * f64::from(*y);
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// The normalised mean of normalised vectors (None when there is none, or
/// they cancel out): a skill's vector from its texts' vectors.
pub fn centroid(vectors: &[Vec<f32>]) -> Option<Vec<f32>> {
    let dims = vectors.first()?.len();
    let mut sum = vec![0.0f64; dims];
    for v in vectors {
        if v.len() != dims {
            return None;
        }
        let norm = v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
        if norm == 0.0 {
            continue;
        }
        for (s, x) in sum.iter_mut().zip(v) {
            *s += f64::from(*x) / norm;
        }
    }
    let norm = sum.iter().map(|x| x * x).sum::<f64>().sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return None;
    }
    Some(sum.iter().map(|x| (x / norm) as f32).collect())
}

/// Weights and thresholds of the router.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RouterConfig {
    /// Weight of the coverage signal.
    pub coverage_weight: f64,
    /// Weight of the best example's similarity.
    pub example_weight: f64,
    /// Weight of the BM25F score.
    pub bm25_weight: f64,
    /// Weight of the share of the skill's name (and id) that the request
    /// says: a request that names the skill ("reschedule", "receipt") is
    /// about it more surely than one that shares other words with it.
    pub name_weight: f64,
    /// Share of the final score given to the embedder, when there is one:
    /// the score is `(1 - w) * lexical + w * semantic`, the semantic part
    /// the cosine between the request's vector and the skill's (the mean
    /// of its examples' and description's vectors).
    pub semantic_weight: f64,
    /// Below this score (0..=1) no skill fits (lexical routing: no
    /// embedder, or the request could not be embedded).
    pub fit_threshold: f64,
    /// With an embedder, the fit threshold instead of
    /// [`Self::fit_threshold`]: the mixed score is on another scale.
    pub semantic_fit_threshold: f64,
    /// With an embedder, below this cosine between the request and the
    /// best skill no skill fits, whatever the words they share: the
    /// request means something else ("what time does the supermarket
    /// close" shares "time" with the time-off skill).
    pub min_semantic: f64,
    /// Below this coverage of the request by the best skill (0..=1) no
    /// skill fits either, whatever the score: most of what is asked is
    /// about something else.
    pub min_coverage: f64,
    /// When the best two skills are closer than this, the request is
    /// ambiguous.
    pub tie_margin: f64,
    /// How much a request's word that no skill contains counts, relative to
    /// its IDF (names of cities, people, products... say little about the
    /// skill, but a request made mostly of such words is about something no
    /// skill does).
    pub unknown_weight: f64,
    /// How much a number in the request counts, relative to its IDF.
    pub number_weight: f64,
    /// Share of the score given to the agent as a whole (the request's
    /// terms found in any of its skills, its name or its description): the
    /// agent is chosen on everything it says about itself, the skill on
    /// what the skill says.
    pub agent_weight: f64,
    /// How much the words of the agent's name and description count in
    /// the coverage of each of its skills (relative to the presence weights
    /// of those fields). They say which agent, not which of its skills: at
    /// full weight a word of the agent's description ("reschedules") lifts
    /// every sibling skill as much as the one it is about.
    pub agent_words_in_skill: f64,
    /// How much a common English word ("find", "make", "last", "near")
    /// counts, relative to its IDF: among a few skills a word of one example
    /// is rare, yet a request that shares only such words with a skill is
    /// not about it.
    pub common_word_weight: f64,
    /// How much a word of time ("Friday", "tomorrow", "this morning")
    /// counts, relative to its IDF: it says when, not what.
    pub temporal_weight: f64,
    /// How much a name ("Berlin", "Tesla", "Priya": a word written with a
    /// capital inside a sentence that no skill has in its name, id, tags or
    /// description) counts, relative to its IDF, in the request and in the
    /// examples: it says what the request is about, not which skill it
    /// needs. A name no skill has at all counts this much of the rarest
    /// word's IDF (instead of [`Self::unknown_weight`] times it).
    pub entity_weight: f64,
    /// How much a request's word counts in a skill that has not the word
    /// but a derived form of it ("summarize" and "summary", "convert" and
    /// "conversion", "linter" and "lint": [`crate::text::related`]),
    /// relative to the word itself.
    pub related_weight: f64,
    /// Weight of the phrase signal: the IDF-weighted share of the request's
    /// pairs of successive words (common words, numbers and words of time
    /// left out) that the skill has one after the other in a field
    /// ("purchase orders", "peer dependencies", "release notes").
    pub phrase_weight: f64,
    /// Below this share of the request's known words (those some skill
    /// has, IDF-weighted) that the best skill has, no skill fits: the
    /// words the registry knows are spread over skills that do different
    /// things ("book" a hotel, "table" of a database, "restaurant" receipt),
    /// which is what a request that no skill fits looks like. It compares
    /// the best skill with the best any skill could do for this request.
    pub min_known_share: f64,
    /// Below this coverage of the request by the best skill counting only
    /// its words of content (not common words, numbers, words of time or
    /// names), no skill fits: a skill that shares with the request only
    /// "find", "mean", "last night" or "Friday" has nothing to do with it.
    pub min_content_coverage: f64,
}

impl Default for RouterConfig {
    /// Chosen on the training half of the labelled routing set
    /// (`tests/data/routing-*.json`, `--tune` in the benchmark); it reports
    /// both halves. The three knobs of the model (`semantic_weight`,
    /// `semantic_fit_threshold`, `min_semantic`) were chosen the same way,
    /// with all-MiniLM-L6-v2 (`--tune --embedder DIR`), the others kept.
    fn default() -> Self {
        Self {
            coverage_weight: 0.4,
            example_weight: 0.3,
            bm25_weight: 0.6,
            name_weight: 0.3,
            semantic_weight: 0.4,
            fit_threshold: 0.24,
            semantic_fit_threshold: 0.2,
            min_semantic: 0.4,
            min_coverage: 0.0,
            tie_margin: 0.0,
            unknown_weight: 1.0,
            number_weight: 0.5,
            agent_weight: 0.25,
            agent_words_in_skill: 0.0,
            common_word_weight: 1.0,
            temporal_weight: 0.0,
            entity_weight: 0.0,
            related_weight: 0.0,
            phrase_weight: 0.2,
            min_known_share: 0.0,
            min_content_coverage: 0.0,
        }
    }
}

/// Presence weights of the skill's fields for coverage.
pub(crate) const PRESENCE_EXAMPLE: f64 = 1.0;
pub(crate) const PRESENCE_NAME: f64 = 1.0;
pub(crate) const PRESENCE_TAG: f64 = 0.9;
pub(crate) const PRESENCE_ID: f64 = 0.8;
pub(crate) const PRESENCE_DESCRIPTION: f64 = 0.8;
pub(crate) const PRESENCE_AGENT_NAME: f64 = 0.6;
pub(crate) const PRESENCE_AGENT_DESCRIPTION: f64 = 0.4;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn centroids_are_means_of_directions() {
        let c = centroid(&[vec![2.0, 0.0], vec![0.0, 0.5]]).unwrap();
        let r = std::f32::consts::FRAC_1_SQRT_2;
        assert!((c[0] - r).abs() < 1e-6 && (c[1] - r).abs() < 1e-6, "{c:?}");
        assert_eq!(centroid(&[]), None);
        assert_eq!(centroid(&[vec![0.0, 0.0]]), None);
        assert_eq!(centroid(&[vec![1.0, 0.0], vec![-1.0, 0.0]]), None);
        assert_eq!(
            centroid(&[vec![1.0], vec![1.0, 0.0]]),
            None,
            "lengths differ"
        );
    }

    #[test]
    fn request_vectors_keep_the_most_recently_used() {
        let mut r = RequestVectors::new(2);
        assert_eq!(r.get("a"), None);
        r.put("a", vec![1.0]);
        r.put("b", vec![2.0]);
        // "a" used: "b" is now the oldest, and makes room for "c".
        assert_eq!(r.get("a"), Some(vec![1.0]));
        r.put("c", vec![3.0]);
        assert_eq!(r.get("b"), None);
        assert_eq!(r.get("a"), Some(vec![1.0]));
        assert_eq!(r.get("c"), Some(vec![3.0]));
        // A text put again is replaced, not added.
        r.put("c", vec![4.0]);
        assert_eq!(r.get("c"), Some(vec![4.0]));
        assert_eq!(r.get("a"), Some(vec![1.0]));
        let mut none = RequestVectors::new(0);
        none.put("a", vec![1.0]);
        assert_eq!(none.get("a"), None);
    }

    #[test]
    fn cosines() {
        assert!((cosine(&[1.0, 0.0], &[1.0, 0.0]) - 1.0).abs() < 1e-9);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 1.0]), 0.0);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
    }
}
