//! What every fuzz test of the workspace shares (the server's and the
//! client's include this file): how many cases a target runs, the corpus of
//! inputs replayed on every run, and a byte-level mutator over that corpus.
//!
//! The fuzzing is property-based (proptest) so that it runs on stable Rust
//! inside `cargo test`, bounded: each target runs a small default number of
//! cases (the whole suite stays well under a minute), and the environment
//! variable `PROPTEST_CASES` raises it for a longer run, e.g.
//! `PROPTEST_CASES=100000 cargo test --test fuzz_types` (the seed is fixed
//! unless `PROPTEST_RNG_SEED` gives another). Every file of a
//! target's corpus folder (`tests/fuzz-corpus/<target>/` of the crate) is
//! replayed first, then used as a seed of the mutations; an input that ever
//! made a decoder panic is added there, so it is tried on every run.
//!
//! [`hostile`] makes the shapes of the limit suites (content nested up to a
//! million levels, as JSON and protobuf, built without recursion; depths
//! and counts around the limits): `fuzz_limits.rs` of agentwire-types and
//! agentwire-server, `fuzz_store.rs` and `fuzz_client_limits.rs`.
#![allow(dead_code)]

pub mod hostile;

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed};

/// The proptest configuration of a target: `default_cases` unless
/// `PROPTEST_CASES` says otherwise. Failures are not written to a
/// regressions file: an input that found a bug goes into the corpus.
pub fn config(default_cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default_cases);
    // A fixed seed by default, so that a test run is repeatable (CI never
    // fails on an input no earlier run tried); `PROPTEST_RNG_SEED=N`
    // explores further.
    let rng_seed = std::env::var("PROPTEST_RNG_SEED")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(RngSeed::Fixed(0x00a2_a5eed));
    Config {
        cases,
        rng_seed,
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        // Shrinking a failure of a slow target can take long: bounded.
        max_shrink_iters: 256,
        ..Config::default()
    }
}

/// The corpus folder of `target` in the calling crate.
pub fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fuzz-corpus")
        .join(target)
}

/// Every input of a target's corpus (its files' bytes, by name), with
/// `extra` seeds written in the test itself.
pub fn corpus(target: &str, extra: &[&[u8]]) -> Vec<(String, Vec<u8>)> {
    let mut inputs: Vec<(String, Vec<u8>)> = extra
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("seed {i}"), s.to_vec()))
        .collect();
    let dir = corpus_dir(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    for path in files.into_iter().filter(|p| p.is_file()) {
        let bytes = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("reading the corpus file {}: {e}", path.display()));
        inputs.push((path.display().to_string(), bytes));
    }
    assert!(!inputs.is_empty(), "no corpus nor seed for {target}");
    inputs
}

/// One byte-level edit.
#[derive(Debug, Clone)]
pub enum Edit {
    /// Replace the byte at a position (modulo the length).
    Set(usize, u8),
    /// Flip one bit.
    Flip(usize, u8),
    /// Insert bytes.
    Insert(usize, Vec<u8>),
    /// Remove up to n bytes.
    Remove(usize, usize),
    /// Copy a slice of the input elsewhere (repetition, nesting).
    Duplicate(usize, usize, usize),
    /// Cut the input there.
    Truncate(usize),
    /// Put a token that matters to the formats here (JSON, SSE, HTTP).
    Token(usize, &'static str),
}

const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    ":",
    ",",
    "\\",
    "\\u0000",
    "\\ud800",
    "null",
    "true",
    "-0",
    "1e999",
    "-1",
    "2147483648",
    "18446744073709551616",
    "0.5",
    "\"\"",
    "{}",
    "[]",
    "\n",
    "\r",
    "\r\n",
    "\n\n",
    "data:",
    "event:",
    "id:",
    ": ",
    "%",
    "%2F",
    "%00",
    "%ff",
    "/",
    "?",
    "&",
    "=",
    "\u{feff}",
    "\u{0}",
    "é",
    "🦀",
    "\u{10ffff}",
    "TASK_STATE_WORKING",
    "ROLE_USER",
    "1970-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999999999Z",
    "AAAA",
    "====",
];

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Set(i, b)),
        (any::<usize>(), 0u8..8).prop_map(|(i, b)| Edit::Flip(i, b)),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(i, b)| Edit::Insert(i, b)),
        (any::<usize>(), 1usize..16).prop_map(|(i, n)| Edit::Remove(i, n)),
        (any::<usize>(), 1usize..64, any::<usize>())
            .prop_map(|(from, n, to)| Edit::Duplicate(from, n, to)),
        any::<usize>().prop_map(Edit::Truncate),
        (any::<usize>(), prop::sample::select(TOKENS)).prop_map(|(i, t)| Edit::Token(i, t)),
    ]
}

/// Applies `edits` to `input`.
pub fn apply(mut input: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let len = input.len();
        let at = |i: usize| if len == 0 { 0 } else { i % (len + 1) };
        match e {
            Edit::Set(i, b) if len > 0 => input[i % len] = *b,
            Edit::Flip(i, bit) if len > 0 => input[i % len] ^= 1 << bit,
            Edit::Insert(i, bytes) => {
                let i = at(*i);
                input.splice(i..i, bytes.iter().copied());
            }
            Edit::Remove(i, n) if len > 0 => {
                let i = i % len;
                input.drain(i..(i + n).min(len));
            }
            Edit::Duplicate(from, n, to) if len > 0 => {
                let from = from % len;
                let piece = input[from..(from + n).min(len)].to_vec();
                let to = at(*to);
                input.splice(to..to, piece);
            }
            Edit::Truncate(i) => input.truncate(at(*i)),
            Edit::Token(i, t) => {
                let i = at(*i);
                input.splice(i..i, t.bytes());
            }
            _ => {}
        }
    }
    input
}

/// Inputs made from the seeds by up to `max_edits` byte-level edits, plus
/// some wholly random bytes.
pub fn mutated(seeds: Vec<Vec<u8>>, max_edits: usize) -> impl Strategy<Value = Vec<u8>> {
    let seeds = std::sync::Arc::new(seeds);
    let n = seeds.len();
    prop_oneof![
        9 => (0..n, prop::collection::vec(edit(), 0..=max_edits))
            .prop_map(move |(i, edits)| apply(seeds[i].clone(), &edits)),
        1 => prop::collection::vec(any::<u8>(), 0..256),
    ]
}

/// The seeds of a corpus, without their names.
pub fn seeds(corpus: &[(String, Vec<u8>)]) -> Vec<Vec<u8>> {
    corpus.iter().map(|(_, b)| b.clone()).collect()
}
