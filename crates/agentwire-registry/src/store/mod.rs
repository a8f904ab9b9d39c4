//! Where registered agents are kept: in memory ([`MemoryRegistryStore`]),
//! in an embedded SQLite file ([`SqliteRegistryStore`], the default of
//! `a2a registry serve`), or in PostgreSQL ([`PostgresRegistryStore`]) for
//! a registry served by several replicas.
//!
//! Every write gets a revision number, and a withdrawn entry stays as a
//! tombstone, so that a replica keeps its search index in step with the
//! store by reading what changed since the last revision it saw
//! ([`RegistryStore::changes_since`]). Refreshes of a card are claimed with
//! a lease ([`RegistryStore::claim_fetch`]) so that only one replica fetches
//! a given agent at a time.

use async_trait::async_trait;

use crate::model::{Record, StoredVectors};

mod memory;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

pub use memory::MemoryRegistryStore;
#[cfg(feature = "postgres")]
pub use postgres::PostgresRegistryStore;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteRegistryStore;

/// A store failure.
#[derive(Debug, thiserror::Error)]
#[error("registry store: {0}")]
pub struct StoreError(pub String);

impl StoreError {
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub(crate) fn from_db(e: impl std::fmt::Display) -> Self {
        Self(e.to_string())
    }
}

/// Shorthand for store results.
pub type StoreResult<T> = Result<T, StoreError>;

/// One change read back from the store.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The entry's URN.
    pub identifier: String,
    /// The revision of this write.
    pub revision: i64,
    /// The record; `None` when the entry was withdrawn.
    pub record: Option<Record>,
}

/// Storage of registry records.
#[async_trait]
pub trait RegistryStore: Send + Sync + 'static {
    /// Creates or replaces a record; returns its new revision.
    async fn put(&self, record: &Record) -> StoreResult<i64>;

    /// Replaces a record only if it is still at `expected_revision` (not
    /// withdrawn, not republished meanwhile: a refresh must neither revive
    /// a withdrawn entry nor undo a newer publish); returns the new
    /// revision, or `None` when nothing was written.
    async fn update(&self, record: &Record, expected_revision: i64) -> StoreResult<Option<i64>>;

    /// One record.
    async fn get(&self, identifier: &str) -> StoreResult<Option<Record>>;

    /// Withdraws a record (keeps a tombstone); returns the tombstone's
    /// revision, `None` if there was no such record.
    async fn delete(&self, identifier: &str) -> StoreResult<Option<i64>>;

    /// Every change with a revision above `revision`, oldest first, and
    /// tombstones included (`revision` 0: everything there is).
    async fn changes_since(&self, revision: i64) -> StoreResult<Vec<Change>>;

    /// Claims the refresh of one agent until `until_ms` (Unix ms): `true`
    /// when no one else holds an unexpired claim on it.
    async fn claim_fetch(&self, identifier: &str, now_ms: i64, until_ms: i64) -> StoreResult<bool>;

    /// Releases a claim taken by [`Self::claim_fetch`].
    async fn release_fetch(&self, identifier: &str) -> StoreResult<()>;

    /// Keeps `vectors` with the record, if it is still at `revision`,
    /// without making a new revision (they are derived from the record,
    /// not a change of it); `true` when kept. [`Self::put`] and
    /// [`Self::update`] keep [`Record::vectors`] too, and [`Self::get`] and
    /// [`Self::changes_since`] give them back.
    ///
    /// The default keeps nothing (`false`): a store without it works, and
    /// its registry embeds every card again when it starts.
    async fn put_vectors(
        &self,
        identifier: &str,
        revision: i64,
        vectors: &StoredVectors,
    ) -> StoreResult<bool> {
        let _ = (identifier, revision, vectors);
        Ok(false)
    }
}

#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn encode(record: &Record) -> StoreResult<String> {
    serde_json::to_string(record).map_err(|e| StoreError(format!("cannot encode a record: {e}")))
}

pub(crate) fn decode(doc: &str) -> StoreResult<Record> {
    serde_json::from_str(doc).map_err(|e| StoreError(format!("cannot decode a record: {e}")))
}

/// The stored form of a record's vectors (JSON; `None` without vectors).
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn encode_vectors(record: &Record) -> StoreResult<Option<String>> {
    record
        .vectors
        .as_ref()
        .map(|v| {
            serde_json::to_string(v)
                .map_err(|e| StoreError(format!("cannot encode a record's vectors: {e}")))
        })
        .transpose()
}

/// A record with its stored vectors. Vectors that cannot be read are left
/// out with a warning (they are computed again), not an error: the record
/// is what matters.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn decode_with_vectors(doc: &str, vectors: Option<&str>) -> StoreResult<Record> {
    let mut record = decode(doc)?;
    if let Some(v) = vectors {
        match serde_json::from_str::<StoredVectors>(v) {
            Ok(v) => record.vectors = Some(v),
            Err(e) => tracing::warn!(
                identifier = %record.identifier,
                "the stored vectors cannot be read ({e}): the skills are embedded again"
            ),
        }
    }
    Ok(record)
}

#[cfg(test)]
pub(crate) mod conformance {
    //! The same checks for every store.
    use super::*;
    use crate::model::{FetchState, Source};
    use serde_json::json;

    pub fn record(id: &str, owner: &str) -> Record {
        Record {
            identifier: id.into(),
            owner: owner.into(),
            source: Source::Url("http://127.0.0.1:1/.well-known/agent-card.json".into()),
            card: json!({"name": id}),
            representative_queries: None,
            extra_tags: vec![],
            trust_manifest: None,
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-01T00:00:00Z".into(),
            warnings: vec![],
            signature: "unsigned".into(),
            fetch: FetchState::default(),
            vectors: None,
        }
    }

    fn vectors(model: &str) -> StoredVectors {
        StoredVectors {
            model: model.into(),
            skills: vec![crate::model::SkillVector {
                texts: "00ff".into(),
                vector: vec![0.25, -1.5, 3.0e-7],
            }],
        }
    }

    /// A toy model for the restart checks: each word to one of 32 axes,
    /// and how many texts it was asked to embed.
    pub struct Counting {
        pub id: String,
        pub texts: std::sync::atomic::AtomicUsize,
    }

    impl Counting {
        pub fn new(id: &str) -> std::sync::Arc<Self> {
            std::sync::Arc::new(Self {
                id: id.into(),
                texts: Default::default(),
            })
        }

        pub fn count(&self) -> usize {
            self.texts.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    impl crate::Embedder for Counting {
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, crate::EmbedError> {
            self.texts
                .fetch_add(texts.len(), std::sync::atomic::Ordering::SeqCst);
            Ok(texts
                .iter()
                .map(|t| {
                    let mut v = vec![0.0f32; 32];
                    for w in t.to_lowercase().split(|c: char| !c.is_alphanumeric()) {
                        let h = w
                            .bytes()
                            .fold(7usize, |h, b| h.wrapping_mul(31) ^ b as usize);
                        v[h % 32] += 1.0;
                    }
                    v
                })
                .collect())
        }

        fn model_id(&self) -> String {
            self.id.clone()
        }
    }

    fn skill_card(name: &str, examples: &[&str]) -> serde_json::Value {
        json!({
            "name": name,
            "description": format!("{name}, for the restart check"),
            "version": "1.0.0",
            "supportedInterfaces": [{"url": "http://127.0.0.1:1/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "capabilities": {},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [{
                "id": "main",
                "name": format!("{name} skill"),
                "description": format!("does what {name} does"),
                "tags": ["check"],
                "examples": examples,
            }],
        })
    }

    /// A registry opened again on the same store (`open` gives it, the
    /// same data each time) embeds nothing when its model is the same, and
    /// everything when the model id differs; one written by a model
    /// without an id stores nothing.
    pub async fn restart_reuses_vectors<F, Fut>(open: F)
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = std::sync::Arc<dyn RegistryStore>>,
    {
        use crate::Registry;
        use agentwire_client::registry::{PublishRequest, RouteRequest};
        let route = |r: &Registry| {
            r.route(&RouteRequest {
                text: "convert euros to dollars".into(),
                filter: None,
                limit: Some(3),
            })
            .unwrap()
        };
        let start = |m: std::sync::Arc<Counting>| {
            let open = &open;
            async move {
                let r = Registry::builder(open().await)
                    .embedder(m)
                    .build()
                    .await
                    .unwrap();
                r.embedded().await;
                r
            }
        };
        let first = Counting::new("toy-1");
        let r = start(first.clone()).await;
        for (name, ex) in [
            (
                "Currency",
                ["convert euros to dollars", "exchange rate of the yen"],
            ),
            ("Weather", ["is it cold in Oslo", "forecast for tomorrow"]),
        ] {
            r.publish(
                "alice",
                PublishRequest {
                    card: Some(skill_card(name, &ex)),
                    ..Default::default()
                },
                None,
            )
            .await
            .unwrap();
        }
        let embedded = first.count();
        assert_eq!(embedded, 6, "two examples and a description a skill");
        let answer = route(&r);
        assert!(answer.matches[0].why.contains("semantic"), "{answer:?}");
        drop(r);

        let again = Counting::new("toy-1");
        let r = start(again.clone()).await;
        assert_eq!(again.count(), 0, "same model: the stored vectors are used");
        assert_eq!(route(&r), answer);
        drop(r);

        let other = Counting::new("toy-2");
        let r = start(other.clone()).await;
        assert_eq!(other.count(), embedded, "another model: embedded again");
        assert_eq!(route(&r), answer);
        drop(r);
        let other_again = Counting::new("toy-2");
        let r = start(other_again.clone()).await;
        assert_eq!(other_again.count(), 0, "and stored for it");
        drop(r);

        let unnamed = Counting::new("");
        let r = start(unnamed.clone()).await;
        assert_eq!(
            unnamed.count(),
            embedded,
            "a model without an id reuses nothing"
        );
        drop(r);
        let named = Counting::new("toy-2");
        let r = start(named.clone()).await;
        assert_eq!(named.count(), 0, "nor overwrites what is stored");
        drop(r);
    }

    /// Vectors: kept by put and update, given back by get and
    /// changes_since; `put_vectors` keeps them without a new revision, only
    /// at the record's current revision; a withdrawal drops them.
    pub async fn run_vectors(store: &dyn RegistryStore) {
        let mut a = record("urn:air:v.example:agent:a", "alice");
        a.vectors = Some(vectors("m1"));
        let r1 = store.put(&a).await.unwrap();
        assert_eq!(store.get(&a.identifier).await.unwrap().unwrap(), a);
        let changes = store.changes_since(r1 - 1).await.unwrap();
        assert_eq!(changes.last().unwrap().record.as_ref(), Some(&a));

        let mut plain = a.clone();
        plain.vectors = None;
        let r2 = store.update(&plain, r1).await.unwrap().unwrap();
        assert_eq!(
            store.get(&a.identifier).await.unwrap().unwrap().vectors,
            None
        );
        assert!(
            store
                .put_vectors(&a.identifier, r2, &vectors("m2"))
                .await
                .unwrap()
        );
        let got = store.get(&a.identifier).await.unwrap().unwrap();
        assert_eq!(got.vectors, Some(vectors("m2")));
        let last = store.changes_since(0).await.unwrap();
        let last = last.iter().find(|c| c.identifier == a.identifier).unwrap();
        assert_eq!(last.revision, r2, "no new revision for vectors");
        assert_eq!(last.record.as_ref().unwrap().vectors, Some(vectors("m2")));
        // Stale: the record changed since.
        assert!(
            !store
                .put_vectors(&a.identifier, r1, &vectors("m3"))
                .await
                .unwrap()
        );
        assert!(
            !store
                .put_vectors("urn:air:v.example:agent:none", 1, &vectors("m3"))
                .await
                .unwrap()
        );
        let r3 = store.delete(&a.identifier).await.unwrap().unwrap();
        assert!(
            !store
                .put_vectors(&a.identifier, r3, &vectors("m3"))
                .await
                .unwrap()
        );
        store.put(&plain).await.unwrap();
        assert_eq!(
            store.get(&a.identifier).await.unwrap().unwrap().vectors,
            None
        );
    }

    pub async fn run(store: &dyn RegistryStore) {
        let a = record("urn:air:a.example:agent:a", "alice");
        let r1 = store.put(&a).await.unwrap();
        let b = record("urn:air:b.example:agent:b", "bob");
        let r2 = store.put(&b).await.unwrap();
        assert!(r2 > r1);
        assert_eq!(store.get(&a.identifier).await.unwrap().unwrap(), a);
        assert!(
            store
                .get("urn:air:x.example:agent:none")
                .await
                .unwrap()
                .is_none()
        );
        let all = store.changes_since(0).await.unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(store.changes_since(r1).await.unwrap().len(), 1);

        let mut a2 = a.clone();
        a2.fetch.failures = 2;
        let r3 = store.update(&a2, r1).await.unwrap().unwrap();
        assert!(r3 > r2);
        assert_eq!(
            store
                .get(&a.identifier)
                .await
                .unwrap()
                .unwrap()
                .fetch
                .failures,
            2
        );
        // Written meanwhile: a stale update is not applied.
        assert!(store.update(&a2, r1).await.unwrap().is_none());

        let r4 = store.delete(&a.identifier).await.unwrap().unwrap();
        assert!(r4 > r3);
        assert!(store.delete(&a.identifier).await.unwrap().is_none());
        assert!(store.get(&a.identifier).await.unwrap().is_none());
        // A refresh finishing after the withdrawal does not bring it back.
        assert!(store.update(&a2, r3).await.unwrap().is_none());
        let changes = store.changes_since(r2).await.unwrap();
        let last = changes.last().unwrap();
        assert_eq!(last.identifier, a.identifier);
        assert!(last.record.is_none());
        // Published again after a withdrawal: a new entry.
        store.put(&a).await.unwrap();
        assert!(store.get(&a.identifier).await.unwrap().is_some());

        assert!(store.claim_fetch(&b.identifier, 1000, 2000).await.unwrap());
        assert!(!store.claim_fetch(&b.identifier, 1500, 2500).await.unwrap());
        assert!(store.claim_fetch(&b.identifier, 2001, 3000).await.unwrap());
        store.release_fetch(&b.identifier).await.unwrap();
        assert!(store.claim_fetch(&b.identifier, 2002, 3000).await.unwrap());
    }
}
