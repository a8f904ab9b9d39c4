//! The skills' vectors kept with the records (SQLite): a registry started
//! again on the same file embeds no card whose vectors are stored for its
//! model; the others are embedded in the background, after the registry
//! is built and while it serves.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use agentwire_registry::store::{RegistryStore, SqliteRegistryStore};
use agentwire_registry::{EmbedError, Embedder, Registry};
use serde_json::Value;

/// A toy model (each word to one of 64 axes) that counts the texts it
/// embeds and, while `gate` is closed, makes them wait.
struct Toy {
    id: String,
    texts: AtomicUsize,
    gate: Mutex<bool>,
    opened: Condvar,
}

impl Toy {
    fn new(id: &str, open: bool) -> Arc<Self> {
        Arc::new(Self {
            id: id.into(),
            texts: AtomicUsize::new(0),
            gate: Mutex::new(open),
            opened: Condvar::new(),
        })
    }

    fn count(&self) -> usize {
        self.texts.load(Ordering::SeqCst)
    }

    fn open(&self) {
        *self.gate.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

impl Embedder for Toy {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut open = self.gate.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
        drop(open);
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0.0f32; 64];
                for w in t.to_lowercase().split(|c: char| !c.is_alphanumeric()) {
                    let h = w
                        .bytes()
                        .fold(5381usize, |h, b| h.wrapping_mul(33) ^ usize::from(b));
                    v[h % 64] += 1.0;
                }
                v
            })
            .collect())
    }

    fn model_id(&self) -> String {
        self.id.clone()
    }
}

async fn open(path: &std::path::Path, model: Arc<Toy>) -> Registry {
    let store = Arc::new(SqliteRegistryStore::open(path).await.unwrap());
    Registry::builder(store)
        .embedder(model)
        .build()
        .await
        .unwrap()
}

/// How many texts the labelled cards' skills are embedded from (each
/// example and the description).
fn texts_of(cards: &[Value]) -> usize {
    cards
        .iter()
        .flat_map(|c| c["skills"].as_array().cloned().unwrap_or_default())
        .map(|s| s["examples"].as_array().map_or(0, Vec::len) + 1)
        .sum()
}

const REQUESTS: [&str; 3] = [
    "Which dependencies block our upgrade to Node 24?",
    "book a flight from Berlin to Madrid on Friday",
    "is it chilly outside in Oslo?",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_registry_embeds_only_what_is_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.db");
    let cards: Vec<Value> = serde_json::from_str(common::CARDS).unwrap();

    let first = Toy::new("toy/64d/v1", true);
    let r = open(&path, first.clone()).await;
    for c in &cards {
        common::publish(&r, c.clone()).await;
    }
    let embedded = first.count();
    assert_eq!(embedded, texts_of(&cards), "embedded when published");
    let answers: Vec<_> = REQUESTS.iter().map(|t| common::route(&r, t)).collect();
    assert!(answers[0].matches[0].why.contains("semantic"));
    drop(r);

    // Same model: nothing to embed, the same answers.
    let same = Toy::new("toy/64d/v1", true);
    let r = open(&path, same.clone()).await;
    assert_eq!(r.embedding_backlog(), 0);
    let before_routing = same.count();
    assert_eq!(before_routing, 0, "no card embedded again");
    for (t, a) in REQUESTS.iter().zip(&answers) {
        assert_eq!(&common::route(&r, t), a, "{t}");
    }
    drop(r);

    // Another model: the registry is built and serves while the cards are
    // embedded again in the background (held back here until a search has
    // been answered).
    let other = Toy::new("toy/64d/v2", false);
    let r = open(&path, other.clone()).await;
    assert_eq!(r.len(), cards.len(), "every card indexed at once");
    assert!(r.embedding_backlog() > 0);
    let hits = r
        .search(agentwire_client::registry::SearchRequest {
            query: agentwire_client::registry::Query {
                text: Some("flight".into()),
                ..Default::default()
            },
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(!hits.results.is_empty());
    other.open();
    tokio::time::timeout(Duration::from_secs(120), r.embedded())
        .await
        .expect("the backlog is worked through");
    assert_eq!(other.count(), embedded, "every card embedded again");
    for (t, a) in REQUESTS.iter().zip(&answers) {
        assert_eq!(&common::route(&r, t), a, "{t}");
    }
    drop(r);

    // Stored for that model now.
    let other_again = Toy::new("toy/64d/v2", true);
    let r = open(&path, other_again.clone()).await;
    r.embedded().await;
    assert_eq!(other_again.count(), 0);
    drop(r);
}

/// A card whose texts changed in the store (written by a replica without
/// a model, say) keeps the vectors of its unchanged skills; only the
/// changed one is embedded again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_texts_are_embedded_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.db");
    let cards: Vec<Value> = serde_json::from_str(common::CARDS).unwrap();
    let card = cards
        .iter()
        .find(|c| c["skills"].as_array().is_some_and(|s| s.len() >= 2))
        .expect("a card with two skills")
        .clone();
    let model = Toy::new("toy/64d/v1", true);
    let r = open(&path, model.clone()).await;
    let published = common::publish(&r, card.clone()).await;
    drop(r);

    // One example of the first skill changed, the stored vectors kept.
    let store = SqliteRegistryStore::open(&path).await.unwrap();
    let id = &published.entry.identifier;
    let mut record = store.get(id).await.unwrap().unwrap();
    assert!(record.vectors.is_some());
    let revision = store.changes_since(0).await.unwrap()[0].revision;
    record.card["skills"][0]["examples"][0] = Value::from("translate this page into Italian");
    store.update(&record, revision).await.unwrap().unwrap();
    drop(store);

    let again = Toy::new("toy/64d/v1", true);
    let r = open(&path, again.clone()).await;
    r.embedded().await;
    let first_skill = &card["skills"][0];
    assert_eq!(
        again.count(),
        first_skill["examples"].as_array().unwrap().len() + 1,
        "the changed skill's texts only"
    );
}
