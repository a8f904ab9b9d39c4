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

use crate::model::Record;

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
}

pub(crate) fn encode(record: &Record) -> StoreResult<String> {
    serde_json::to_string(record).map_err(|e| StoreError(format!("cannot encode a record: {e}")))
}

pub(crate) fn decode(doc: &str) -> StoreResult<Record> {
    serde_json::from_str(doc).map_err(|e| StoreError(format!("cannot decode a record: {e}")))
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
        }
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
