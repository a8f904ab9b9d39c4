//! Full-text ranking: the analyzer (words to terms) and a BM25F index.
//!
//! Why not a search engine crate? We weighed three:
//!
//! - `tantivy` is the obvious full engine, but it is the heaviest build of
//!   the workspace by far (dozens of crates; on the project's 2-core
//!   machine minutes of compile for every clean build), it needs a newer
//!   Rust than the workspace's 1.85, and its writes become visible only at
//!   a segment commit, so publish throughput and publish-to-searchable
//!   latency depend on commit batching. Its scores are unbounded, and ARD
//!   asks for 0-100 relevance.
//! - `bm25` (the crate used here for its text pipeline) has a scorer too,
//!   but it keeps the IDF private, has no per-field weights and does not
//!   say which terms matched; routing needs all three (the score bound
//!   that makes "no skill fits" decidable, weighting examples above
//!   descriptions, and the "why" of a match).
//! - `probly-search` has fields, but it is no longer maintained.
//!
//! So the text pipeline (Unicode normalisation, English stop words,
//! Snowball stemming) is the `bm25` crate's tokenizer, and the scoring
//! (below, about a hundred lines) is BM25F written here: per-field weights
//! fold into one term frequency and one length per document, and every
//! score comes with its upper bound for the query and the query terms it
//! matched. The index lives in memory, rebuilt from the store at start-up
//! and kept in step with it; with 10,000 cards a search takes about 2 ms
//! on the median (the repository's benches/README.md, "Agent registry").

use std::collections::HashMap;
use std::hash::Hash;

use bm25::{DefaultTokenizer, Language, Tokenizer};

/// Words of polite requests that say nothing about what is asked
/// ("please", "I need", "would you"), as stemmed terms; the English stop
/// words of the tokenizer do not include them.
const FILLER_TERMS: &[&str] = &[
    "pleas", "kind", "help", "need", "want", "would", "could", "like", "thank", "thanks", "hi",
    "hello", "hey", "let",
];

/// Turns text into index terms (lower case, stop words and request filler
/// words removed, stemmed).
pub struct Analyzer {
    tokenizer: DefaultTokenizer,
    /// Terms of common English words (see [`Analyzer::is_common`]).
    common: std::collections::HashSet<String, ahash::RandomState>,
    /// Terms of words of time (see [`Analyzer::is_temporal`]).
    temporal: std::collections::HashSet<String, ahash::RandomState>,
}

/// One distinct term of a request, with the word it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The term.
    pub term: String,
    /// The first word of the text that gave it, as written.
    pub word: String,
    /// Written with a capital inside a sentence ("Berlin", "Tesla",
    /// "Priya", "USD") every time: the name of a place, a person, a product
    /// or a company, most likely. Such a word says what the request is
    /// about, not what is to be done with it.
    pub name: bool,
    /// A word of time ([`Analyzer::is_temporal`]).
    pub temporal: bool,
}

/// Words of time: the days of the week, the months, parts of the day and
/// units of the calendar, and the words that place something in time. A
/// request says when ("on Friday", "this morning", "last night") as often
/// as what, and the examples of a skill do too, so these words match across
/// skills that have nothing else in common ("Am I free on Friday" and "I
/// want to take leave next Friday"). A closed class of English, written
/// here; "may" and "march" are left out (they are mostly a verb).
const TEMPORAL_WORDS: &[&str] = &[
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "weekday",
    "weekend",
    "january",
    "february",
    "april",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "today",
    "tonight",
    "tomorrow",
    "yesterday",
    "morning",
    "afternoon",
    "evening",
    "night",
    "noon",
    "midnight",
    "day",
    "week",
    "month",
    "year",
    "hour",
    "minute",
    "daily",
    "weekly",
    "monthly",
    "yearly",
    "hourly",
    "nightly",
    "now",
    "ago",
    "soon",
    "later",
];

/// A general list of common English words (Stopwords ISO, MIT licence:
/// `data/README.md`). Longer than the tokenizer's stop words ("find",
/// "make", "last", "next", "near"...), so used only to weigh words, never to
/// drop them.
const COMMON_WORDS: &str = include_str!("../data/stopwords-iso-en.txt");

impl Default for Analyzer {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Analyzer(English)")
    }
}

impl Analyzer {
    /// The English analyzer.
    pub fn new() -> Self {
        let tokenizer = DefaultTokenizer::builder()
            .language_mode(Language::English)
            .normalization(true)
            .stemming(true)
            .stopwords(true)
            .build();
        let common = COMMON_WORDS
            .lines()
            .filter(|w| w.chars().all(char::is_alphabetic))
            .flat_map(|w| tokenizer.tokenize(&american_spelling(w)))
            .collect();
        let temporal = TEMPORAL_WORDS
            .iter()
            .flat_map(|w| tokenizer.tokenize(w))
            .collect();
        Self {
            tokenizer,
            common,
            temporal,
        }
    }

    /// Whether a term is that of a common English word ("find", "make",
    /// "last", "near"): it says less about what is asked than a rarer one.
    pub fn is_common(&self, term: &str) -> bool {
        self.common.contains(term)
    }

    /// The terms of a text, in order (repeats kept).
    pub fn terms(&self, text: &str) -> Vec<String> {
        // "payment-service" and "package_lock" are words of their own too,
        // and "what's" / "tomorrow's" are "what" and "tomorrow".
        let spaced = american_spelling(&text.replace(['-', '_', '/', '\'', '\u{2019}'], " "));
        let mut terms = self.tokenizer.tokenize(&spaced);
        terms.retain(|t| !FILLER_TERMS.contains(&t.as_str()));
        terms
    }

    /// Whether a term is that of a word of time ("Friday", "tomorrow",
    /// "morning", "week", "June"): when something is wanted, not what.
    pub fn is_temporal(&self, term: &str) -> bool {
        self.temporal.contains(term)
    }

    /// The distinct terms of a text with what the router needs to know of
    /// the words that gave them: the first such word, and whether every
    /// one was written as a name (see [`Word::name`]).
    pub fn words(&self, text: &str) -> Vec<Word> {
        let mut out: Vec<Word> = Vec::new();
        // The first word of the text, and a word after a full stop, a
        // question or exclamation mark or a colon, start a sentence: their
        // capital says nothing.
        let mut sentence_start = true;
        for raw in text.split(char::is_whitespace) {
            let starts = sentence_start;
            sentence_start = raw.ends_with(['.', '?', '!', ':']);
            for word in raw.split(['-', '_', '/', '\'', '\u{2019}']) {
                let word = word.trim_matches(|c: char| !c.is_alphanumeric());
                if word.is_empty() {
                    continue;
                }
                let name = !starts && word.chars().next().is_some_and(char::is_uppercase);
                for term in self.tokenizer.tokenize(&american_spelling(word)) {
                    if FILLER_TERMS.contains(&term.as_str()) {
                        continue;
                    }
                    match out.iter_mut().find(|w| w.term == term) {
                        Some(w) => w.name &= name,
                        None => out.push(Word {
                            temporal: self.is_temporal(&term),
                            term,
                            word: word.to_owned(),
                            name,
                        }),
                    }
                }
            }
        }
        out
    }

    /// The distinct terms of a text, each with the first word of the text
    /// that gave it (to explain a match in the user's own words).
    pub fn terms_with_words(&self, text: &str) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for word in text
            .split(|c: char| c.is_whitespace() || matches!(c, '-' | '_' | '/' | '\'' | '\u{2019}'))
        {
            let word = word.trim_matches(|c: char| !c.is_alphanumeric());
            if word.is_empty() {
                continue;
            }
            for term in self.tokenizer.tokenize(&american_spelling(word)) {
                if FILLER_TERMS.contains(&term.as_str()) {
                    continue;
                }
                if !out.iter().any(|(t, _)| *t == term) {
                    out.push((term, word.to_owned()));
                }
            }
        }
        out
    }
}

/// Endings written with an "s" in British English and a "z" in American
/// English ("summarise" / "summarize", "analyse" / "analyze",
/// "organisation" / "organization"): the Snowball stemmer keeps them apart.
const BRITISH_ENDINGS: &[&str] = &[
    "ise", "ised", "ises", "ising", "iser", "isers", "isation", "isations", "yse", "ysed", "yses",
    "ysing", "yser", "ysers",
];

/// The text with British "-ise" / "-yse" spellings of words written the
/// American way, so that either spelling of a request finds either spelling
/// of a card. Both sides go through it, so a word that merely ends like
/// that ("exercise") is changed the same way everywhere and still matches
/// itself. Written here: the stemmer has no option for it, and it is a
/// handful of suffixes.
fn american_spelling(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        // Short words ("rise", "wise", "raise") are left alone.
        if word.chars().count() >= 6 {
            let lower = word.to_lowercase();
            if let Some(ending) = BRITISH_ENDINGS.iter().find(|e| lower.ends_with(*e)) {
                // The "s" of the ending is its second letter.
                let cut = word.len() - ending.len() + 1;
                if word.is_char_boundary(cut) && word.is_char_boundary(cut + 1) {
                    let upper = word[cut..].starts_with('S');
                    word.replace_range(cut..cut + 1, if upper { "Z" } else { "z" });
                }
            }
        }
        out.push_str(word);
        word.clear();
    };
    for c in text.chars() {
        if c.is_alphabetic() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Whether two different terms are most likely forms of one word that the
/// stemmer keeps apart: derived forms ("summarize" / "summary", "convert" /
/// "conversion", "diversified" / "diversification") and an agent noun in
/// "-er" ("linter" / "lint"). The Snowball stemmer removes inflections
/// ("meetings", "booked") and some derivational suffixes, not all: the two
/// terms here share a stem of five letters at least, and neither goes on
/// more than two letters past it; or one is the other and "er".
pub fn related(a: &str, b: &str) -> bool {
    if a == b {
        return false;
    }
    // Letters of English only (the stemmer is English): cheap on bytes.
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.iter().chain(b).any(|c| !c.is_ascii_lowercase()) {
        return false;
    }
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if common >= 5 && a.len() - common <= 2 && b.len() - common <= 2 {
        return true;
    }
    common == short.len() && short.len() >= 4 && &long[common..] == b"er"
}

/// BM25 parameters.
#[derive(Debug, Clone, Copy)]
pub struct Bm25Params {
    /// Term frequency saturation.
    pub k1: f64,
    /// Length normalisation.
    pub b: f64,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Self { k1: 1.2, b: 0.75 }
    }
}

/// One field of a document: its weight and its terms.
pub struct Field<'a> {
    /// How much a term found here counts.
    pub weight: f64,
    /// The terms (from [`Analyzer::terms`]).
    pub terms: &'a [String],
}

struct Doc {
    /// Its distinct terms (to take it out of the postings).
    terms: Vec<String>,
    /// Weighted length.
    len: f64,
    /// Its number ([`Posting::doc`]).
    number: u32,
}

/// One posting: the document's weighted frequency of the term, the
/// document's weighted length (so that scoring needs no other lookup) and
/// its number: where a search adds up its score, in an array rather than
/// a hash map keyed by documents.
#[derive(Clone, Copy)]
struct Posting {
    tf: f64,
    len: f64,
    doc: u32,
}

type Map<K, V> = HashMap<K, V, ahash::RandomState>;

/// A score and what it is made of.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scored {
    /// The BM25F score.
    pub raw: f64,
    /// The score the query could reach at most (every term present, with
    /// saturated frequency): `raw / bound` is in 0..=1.
    pub bound: f64,
    /// The IDF-weighted share of the query's terms the document contains
    /// (0..=1).
    pub coverage: f64,
    /// The query terms found ([`Bm25Index::score`] only).
    pub matched: Vec<String>,
}

/// An in-memory BM25F index of documents keyed by `K`. Scoring is term at
/// a time: each query term's postings carry what the score needs, so a
/// search reads each posting of the query's terms once and adds its part
/// to its document's total in an array, by the document's number.
pub struct Bm25Index<K> {
    params: Bm25Params,
    docs: Map<K, Doc>,
    postings: Map<String, Map<K, Posting>>,
    total_len: f64,
    /// Each document number's key (None: free).
    keys: Vec<Option<K>>,
    /// The numbers of removed documents, given again first.
    free: Vec<u32>,
}

/// What a search adds up, per thread, kept from one search to the next
/// (a search among 30,000 documents would otherwise allocate and fault in
/// a new table each time): for each document number, its score, the
/// weight of the query terms it has, and the search that last touched it.
#[derive(Default)]
struct Totals {
    raw: Vec<f64>,
    found: Vec<f64>,
    stamp: Vec<u32>,
    /// The current search's stamp.
    search: u32,
    /// The numbers touched by the current search, in the order first
    /// touched.
    touched: Vec<u32>,
    /// [`Bm25Index::top`]'s scores and numbers.
    ranked: Vec<(f64, u32)>,
}

impl Totals {
    /// Starts a search over `docs` document numbers.
    fn start(&mut self, docs: usize) {
        self.search = self.search.wrapping_add(1);
        if self.search == 0 {
            // Stamps of 2^32 searches ago would look current.
            self.stamp.fill(0);
            self.search = 1;
        }
        if self.stamp.len() < docs {
            self.raw.resize(docs, 0.0);
            self.found.resize(docs, 0.0);
            self.stamp.resize(docs, 0);
        }
        self.touched.clear();
    }

    fn add(&mut self, doc: u32, raw: f64, found: f64) {
        let i = doc as usize;
        let (Some(r), Some(f), Some(s)) = (
            self.raw.get_mut(i),
            self.found.get_mut(i),
            self.stamp.get_mut(i),
        ) else {
            return;
        };
        if *s != self.search {
            *s = self.search;
            *r = 0.0;
            *f = 0.0;
            self.touched.push(doc);
        }
        *r += raw;
        *f += found;
    }
}

thread_local! {
    static TOTALS: std::cell::RefCell<Totals> = std::cell::RefCell::default();
}

/// A distinct term of a query, its weight and its postings.
type QueryTerm<'a, K> = (&'a String, f64, Option<&'a Map<K, Posting>>);

/// Scores documents one at a time against one query: each distinct term
/// of the query, its weight and its postings, looked up once for all of
/// them ([`Bm25Index::scorer`]).
pub struct Scorer<'a, K> {
    params: Bm25Params,
    avgdl: f64,
    /// Each distinct term of the query, its weight and its postings.
    terms: Vec<QueryTerm<'a, K>>,
    /// The score the query could reach at most.
    pub bound: f64,
}

impl<K: Eq + Hash> Scorer<'_, K> {
    /// The document's score, each query term it has given to `matched`
    /// with its weight.
    fn walk(&self, key: &K, mut matched: impl FnMut(&String, f64)) -> f64 {
        let mut raw = 0.0;
        for (t, w, postings) in &self.terms {
            if let Some(p) = postings.and_then(|m| m.get(key)) {
                raw += term_score(self.params, *w, *p, self.avgdl);
                matched(t, *w);
            }
        }
        raw
    }

    /// The document's BM25F score (0 when it has none of the terms, or is
    /// not in the index).
    pub fn raw(&self, key: &K) -> f64 {
        self.walk(key, |_, _| {})
    }
}

fn term_score(params: Bm25Params, w: f64, p: Posting, avgdl: f64) -> f64 {
    let Bm25Params { k1, b } = params;
    w * p.tf * (k1 + 1.0) / (p.tf + k1 * (1.0 - b + b * p.len / avgdl))
}

impl<K: Eq + Hash + Clone> Default for Bm25Index<K> {
    fn default() -> Self {
        Self::new(Bm25Params::default())
    }
}

impl<K: Eq + Hash + Clone> Bm25Index<K> {
    /// An empty index.
    pub fn new(params: Bm25Params) -> Self {
        Self {
            params,
            docs: Map::default(),
            postings: Map::default(),
            total_len: 0.0,
            keys: Vec::new(),
            free: Vec::new(),
        }
    }

    /// How many documents it holds.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Adds (or replaces) a document.
    pub fn insert(&mut self, key: K, fields: &[Field<'_>]) {
        self.remove(&key);
        let mut tf: Map<&String, f64> = Map::default();
        let mut len = 0.0;
        for f in fields {
            for t in f.terms {
                *tf.entry(t).or_default() += f.weight;
                len += f.weight;
            }
        }
        let number = match self.free.pop() {
            Some(n) => n,
            None => {
                let Ok(n) = u32::try_from(self.keys.len()) else {
                    // 4 billion documents: more than memory holds.
                    return;
                };
                self.keys.push(None);
                n
            }
        };
        if let Some(k) = self.keys.get_mut(number as usize) {
            *k = Some(key.clone());
        }
        let mut terms = Vec::with_capacity(tf.len());
        for (t, f) in tf {
            self.postings.entry(t.clone()).or_default().insert(
                key.clone(),
                Posting {
                    tf: f,
                    len,
                    doc: number,
                },
            );
            terms.push(t.clone());
        }
        self.total_len += len;
        self.docs.insert(key, Doc { terms, len, number });
    }

    /// Removes a document.
    pub fn remove(&mut self, key: &K) {
        if let Some(doc) = self.docs.remove(key) {
            self.total_len -= doc.len;
            if let Some(k) = self.keys.get_mut(doc.number as usize) {
                *k = None;
                self.free.push(doc.number);
            }
            for t in &doc.terms {
                if let Some(set) = self.postings.get_mut(t) {
                    set.remove(key);
                    if set.is_empty() {
                        self.postings.remove(t);
                    }
                }
            }
        }
    }

    /// The IDF of a term that `df` documents have.
    pub fn idf_of_df(&self, df: usize) -> f64 {
        let n = self.docs.len() as f64;
        let df = df as f64;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// Whether any document has the term.
    pub fn contains_term(&self, term: &str) -> bool {
        self.postings.contains_key(term)
    }

    /// Inverse document frequency (never negative; a term no document has
    /// gets the highest value).
    pub fn idf(&self, term: &str) -> f64 {
        self.idf_of_df(self.postings.get(term).map_or(0, HashMap::len))
    }

    /// The distinct terms of a query.
    fn distinct(query: &[String]) -> Vec<&String> {
        let mut q: Vec<&String> = Vec::new();
        for t in query {
            if !q.contains(&t) {
                q.push(t);
            }
        }
        q
    }

    fn avgdl(&self) -> f64 {
        if self.docs.is_empty() {
            1.0
        } else {
            (self.total_len / self.docs.len() as f64).max(1e-9)
        }
    }

    /// A scorer of documents against `query`, each distinct query term's
    /// IDF multiplied by the factor at its position in `factors` (1 past
    /// its end).
    pub fn scorer<'a>(&'a self, query: &'a [String], factors: &[f64]) -> Scorer<'a, K> {
        let mut bound = 0.0;
        let terms = Self::distinct(query)
            .into_iter()
            .enumerate()
            .map(|(n, t)| {
                let postings = self.postings.get(t);
                let df = postings.map_or(0, HashMap::len);
                let w = self.idf_of_df(df) * factors.get(n).copied().unwrap_or(1.0);
                bound += w * (self.params.k1 + 1.0);
                (t, w, postings)
            })
            .collect();
        Scorer {
            params: self.params,
            avgdl: self.avgdl(),
            terms,
            bound,
        }
    }

    /// Scores one document (None if absent), with the query terms it has.
    pub fn score(&self, key: &K, query: &[String]) -> Option<Scored> {
        self.score_weighted(key, query, &[])
    }

    /// As [`Self::score`], each distinct query term's IDF multiplied by
    /// the factor at its position in `factors` (1 past its end).
    pub fn score_weighted(&self, key: &K, query: &[String], factors: &[f64]) -> Option<Scored> {
        self.docs.get(key)?;
        let scorer = self.scorer(query, factors);
        let all: f64 = scorer.terms.iter().map(|(_, w, _)| w).sum();
        let mut out = Scored {
            bound: scorer.bound,
            ..Default::default()
        };
        let mut found = 0.0;
        out.raw = scorer.walk(key, |t, w| {
            found += w;
            out.matched.push(t.clone());
        });
        out.coverage = if all > 0.0 { found / all } else { 0.0 };
        Some(out)
    }

    /// Adds up the score of every document sharing a term with the query
    /// (in this thread's [`Totals`]), then gives them to `read` with the
    /// query's bound and total weight.
    fn totals<R>(&self, query: &[String], read: impl FnOnce(&mut Totals, f64, f64) -> R) -> R {
        let run = |totals: &mut Totals| {
            totals.start(self.keys.len());
            let avgdl = self.avgdl();
            let k1 = self.params.k1;
            let (mut bound, mut all) = (0.0, 0.0);
            for t in Self::distinct(query) {
                let w = self.idf(t);
                bound += w * (k1 + 1.0);
                all += w;
                if let Some(postings) = self.postings.get(t) {
                    for p in postings.values() {
                        totals.add(p.doc, term_score(self.params, w, *p, avgdl), w);
                    }
                }
            }
            read(totals, bound, all)
        };
        TOTALS.with(|cell| match cell.try_borrow_mut() {
            Ok(mut totals) => run(&mut totals),
            // Only if `read` searched again: a table of its own.
            Err(_) => run(&mut Totals::default()),
        })
    }

    /// Every document sharing a term with the query, best first (without
    /// the matched terms: [`Self::score`] gives them for one document).
    pub fn search(&self, query: &[String]) -> Vec<(K, Scored)> {
        let mut out = self.search_unordered(query);
        out.sort_by(|a, b| b.1.raw.total_cmp(&a.1.raw));
        out
    }

    /// Every document sharing a term with the query, in no order.
    pub fn search_unordered(&self, query: &[String]) -> Vec<(K, Scored)> {
        self.totals(query, |totals, bound, all| {
            let Totals {
                raw,
                found,
                touched,
                ..
            } = totals;
            touched
                .iter()
                .filter_map(|&doc| {
                    let i = doc as usize;
                    let key = self.keys.get(i)?.as_ref()?;
                    let (raw, found) = (*raw.get(i)?, *found.get(i)?);
                    Some((
                        key.clone(),
                        Scored {
                            raw,
                            bound,
                            coverage: if all > 0.0 { found / all } else { 0.0 },
                            matched: Vec::new(),
                        },
                    ))
                })
                .collect()
        })
    }

    /// The `k` best documents sharing a term with the query that `accept`
    /// lets through, best first (equal scores: the smaller key first):
    /// the first `k` of [`Self::search`] that `accept` takes, without
    /// sorting them all (the best are selected, then sorted, and more only
    /// when `accept` refuses some).
    pub fn top(&self, query: &[String], k: usize, mut accept: impl FnMut(&K) -> bool) -> Vec<K>
    where
        K: Ord,
    {
        self.totals(query, |totals, _, _| {
            let Totals {
                raw,
                touched,
                ranked,
                ..
            } = totals;
            ranked.clear();
            ranked.extend(
                touched
                    .iter()
                    .filter_map(|&doc| Some((*raw.get(doc as usize)?, doc))),
            );
            let key = |doc: u32| self.keys.get(doc as usize).and_then(Option::as_ref);
            let order = |a: &(f64, u32), b: &(f64, u32)| {
                b.0.total_cmp(&a.0).then_with(|| key(a.1).cmp(&key(b.1)))
            };
            let mut out = Vec::with_capacity(k.min(ranked.len()));
            let mut rest = &mut ranked[..];
            while out.len() < k && !rest.is_empty() {
                let want = (k - out.len()).min(rest.len());
                if want < rest.len() {
                    rest.select_nth_unstable_by(want - 1, order);
                }
                let (head, tail) = std::mem::take(&mut rest).split_at_mut(want);
                head.sort_unstable_by(order);
                out.extend(
                    head.iter()
                        .filter_map(|&(_, doc)| key(doc))
                        .filter(|k| accept(k))
                        .cloned(),
                );
                rest = tail;
            }
            out
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_analyzer_stems_and_drops_stop_words() {
        let a = Analyzer::new();
        assert_eq!(a.terms("Checking the lockfiles"), ["check", "lockfil"]);
        assert_eq!(a.terms("payment-service"), ["payment", "servic"]);
        assert_eq!(
            a.terms("What's new in tomorrow\u{2019}s inbox?"),
            ["new", "tomorrow", "inbox"]
        );
        assert_eq!(
            a.terms("Summarise the analysis"),
            a.terms("summarize the analysis")
        );
        assert_eq!(a.terms("We analysed it"), a.terms("we analyzed it"));
        assert_eq!(a.terms("ORGANISATION"), a.terms("organization"));
        assert_eq!(a.terms("rise wise"), ["rise", "wise"]);
        let w = a.terms_with_words("Summarises what's new");
        assert_eq!(w[0].0, a.terms("summarizes")[0], "{w:?}");
        assert!(a.is_common("find") && a.is_common("last") && !a.is_common("invoic"));
        let w = a.terms_with_words("Is payment-service ready? Checking...");
        assert!(w.contains(&("check".into(), "Checking".into())), "{w:?}");
    }

    #[test]
    fn request_words_say_which_are_names_and_times() {
        let a = Analyzer::new();
        let w = a.words("Book a flight to Berlin on Friday. Tesla shares? Yes: Tokyo");
        let get = |t: &str| w.iter().find(|x| x.term == a.terms(t)[0]).cloned().unwrap();
        assert!(!get("book").name, "the first word of the text");
        assert!(get("berlin").name && !get("berlin").temporal);
        assert!(get("friday").name && get("friday").temporal);
        assert!(!get("tesla").name, "the first word of a sentence");
        assert!(!get("tokyo").name, "after a colon");
        assert!(!get("flight").name && !get("flight").temporal);
        assert_eq!(get("berlin").word, "Berlin");
        // A word written both ways is not a name.
        let w = a.words("the Weather in Paris: weather now");
        assert!(w.iter().any(|x| x.term == "weather" && !x.name));
        assert!(w.iter().any(|x| x.term == "now" && x.temporal) || a.terms("now").is_empty());
        assert!(a.is_temporal(&a.terms("mornings")[0]) && a.is_temporal(&a.terms("weeks")[0]));
        assert!(!a.is_temporal(&a.terms("invoice")[0]));
        // Filler words are dropped, as by `terms`.
        assert!(a.words("please help").is_empty());
    }

    #[test]
    fn related_terms_are_derived_forms() {
        let a = Analyzer::new();
        let t = |w: &str| a.terms(w).remove(0);
        assert!(related(&t("summarize"), &t("summary")));
        assert!(related(&t("convert"), &t("conversion")));
        assert!(related(&t("linter"), &t("lint")));
        assert!(related(&t("diversified"), &t("diversification")));
        assert!(!related(&t("meeting"), &t("meetings")), "the same term");
        assert!(!related(&t("schedule"), &t("reschedule")));
        assert!(!related(&t("plan"), &t("planet")));
        assert!(!related(&t("secret"), &t("secretary")));
        assert!(!related("rust", "rusty"), "too short a stem");
        assert!(!related("12345", "123456"), "numbers");
    }

    #[test]
    fn bm25f_ranks_weighted_fields_and_bounds_scores() {
        let a = Analyzer::new();
        let mut ix: Bm25Index<u32> = Bm25Index::default();
        let name1 = a.terms("Weather forecast");
        let desc1 = a.terms("Forecasts for cities");
        let name2 = a.terms("Currency converter");
        let desc2 = a.terms("Converts money, with a weather joke");
        ix.insert(
            1,
            &[
                Field {
                    weight: 3.0,
                    terms: &name1,
                },
                Field {
                    weight: 1.0,
                    terms: &desc1,
                },
            ],
        );
        ix.insert(
            2,
            &[
                Field {
                    weight: 3.0,
                    terms: &name2,
                },
                Field {
                    weight: 1.0,
                    terms: &desc2,
                },
            ],
        );
        let q = a.terms("weather forecast for Paris");
        let hits = ix.search(&q);
        assert_eq!(hits[0].0, 1);
        let s = &hits[0].1;
        assert!(s.raw > 0.0 && s.raw < s.bound);
        assert!(s.coverage > 0.0 && s.coverage < 1.0, "paris is unknown");
        assert_eq!(ix.score(&1, &q).unwrap().matched, ["weather", "forecast"]);
        ix.remove(&1);
        assert_eq!(ix.len(), 1);
        assert!(ix.search(&a.terms("forecast")).is_empty());
        assert!(ix.idf("unknown") > ix.idf("weather"));
    }

    #[test]
    fn the_top_documents_are_the_first_of_the_search_that_pass() {
        let a = Analyzer::new();
        let mut ix: Bm25Index<u32> = Bm25Index::default();
        let texts = [
            "invoice payment reminder",
            "invoice",
            "payment",
            "invoice payment",
            "weather forecast",
            "invoice payment",
            "payment schedule for the invoice",
        ];
        for (k, text) in texts.iter().enumerate() {
            let terms = a.terms(text);
            ix.insert(
                k as u32,
                &[Field {
                    weight: 1.0,
                    terms: &terms,
                }],
            );
        }
        let q = a.terms("invoice payment");
        // Best first, equal scores by key (3 and 5 are the same text).
        let mut all = ix.search(&q);
        all.sort_by(|x, y| y.1.raw.total_cmp(&x.1.raw).then(x.0.cmp(&y.0)));
        let keys: Vec<u32> = all.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys.len(), 6, "all but the weather");
        for k in 0..=7 {
            assert_eq!(ix.top(&q, k, |_| true), keys[..k.min(6)], "{k}");
        }
        // Those refused are skipped, more taken after them.
        let odd: Vec<u32> = keys.iter().copied().filter(|k| k % 2 == 1).collect();
        assert_eq!(ix.top(&q, 2, |k| k % 2 == 1), odd[..2]);
        assert_eq!(ix.top(&q, 9, |k| k % 2 == 1), odd);
        assert!(ix.top(&q, 3, |_| false).is_empty());
        // The scorer gives each document the score of the search.
        let scorer = ix.scorer(&q, &[]);
        for (k, s) in &all {
            assert_eq!(scorer.raw(k), s.raw);
            assert_eq!(scorer.bound, s.bound);
        }
        assert_eq!(scorer.raw(&4), 0.0);
        // A removed document's number goes to the next one: the search
        // sees the new one, not the old.
        ix.remove(&3);
        let terms = a.terms("weather report");
        ix.insert(
            9,
            &[Field {
                weight: 1.0,
                terms: &terms,
            }],
        );
        assert!(ix.search(&q).iter().all(|(k, _)| *k != 3 && *k != 9));
        assert_eq!(ix.top(&a.terms("weather"), 5, |_| true), [4, 9]);
    }
}
