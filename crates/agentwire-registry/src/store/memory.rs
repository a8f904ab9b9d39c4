//! Records in memory (lost when the process ends).

use std::collections::HashMap;

use async_trait::async_trait;
use parking_lot::Mutex;

use super::{Change, RegistryStore, StoreResult};
use crate::model::{Record, StoredVectors};

#[derive(Default)]
struct Inner {
    revision: i64,
    /// identifier -> (revision, record or tombstone)
    rows: HashMap<String, (i64, Option<Record>)>,
    leases: HashMap<String, i64>,
}

/// Records in memory.
#[derive(Default)]
pub struct MemoryRegistryStore {
    inner: Mutex<Inner>,
}

impl MemoryRegistryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl RegistryStore for MemoryRegistryStore {
    async fn put(&self, record: &Record) -> StoreResult<i64> {
        let mut g = self.inner.lock();
        g.revision += 1;
        let rev = g.revision;
        g.rows
            .insert(record.identifier.clone(), (rev, Some(record.clone())));
        Ok(rev)
    }

    async fn update(&self, record: &Record, expected_revision: i64) -> StoreResult<Option<i64>> {
        let mut g = self.inner.lock();
        let current = matches!(
            g.rows.get(&record.identifier),
            Some((rev, Some(_))) if *rev == expected_revision
        );
        if !current {
            return Ok(None);
        }
        g.revision += 1;
        let rev = g.revision;
        g.rows
            .insert(record.identifier.clone(), (rev, Some(record.clone())));
        Ok(Some(rev))
    }

    async fn get(&self, identifier: &str) -> StoreResult<Option<Record>> {
        Ok(self
            .inner
            .lock()
            .rows
            .get(identifier)
            .and_then(|(_, r)| r.clone()))
    }

    async fn delete(&self, identifier: &str) -> StoreResult<Option<i64>> {
        let mut g = self.inner.lock();
        if !matches!(g.rows.get(identifier), Some((_, Some(_)))) {
            return Ok(None);
        }
        g.revision += 1;
        let rev = g.revision;
        g.rows.insert(identifier.to_owned(), (rev, None));
        Ok(Some(rev))
    }

    async fn changes_since(&self, revision: i64) -> StoreResult<Vec<Change>> {
        let g = self.inner.lock();
        let mut out: Vec<Change> = g
            .rows
            .iter()
            .filter(|(_, (rev, _))| *rev > revision)
            .map(|(id, (rev, r))| Change {
                identifier: id.clone(),
                revision: *rev,
                record: r.clone(),
            })
            .collect();
        out.sort_by_key(|c| c.revision);
        Ok(out)
    }

    async fn claim_fetch(&self, identifier: &str, now_ms: i64, until_ms: i64) -> StoreResult<bool> {
        let mut g = self.inner.lock();
        match g.leases.get(identifier) {
            Some(&until) if until > now_ms => Ok(false),
            _ => {
                g.leases.insert(identifier.to_owned(), until_ms);
                Ok(true)
            }
        }
    }

    async fn release_fetch(&self, identifier: &str) -> StoreResult<()> {
        self.inner.lock().leases.remove(identifier);
        Ok(())
    }

    async fn put_vectors(
        &self,
        identifier: &str,
        revision: i64,
        vectors: &StoredVectors,
    ) -> StoreResult<bool> {
        let mut g = self.inner.lock();
        match g.rows.get_mut(identifier) {
            Some((rev, Some(record))) if *rev == revision => {
                record.vectors = Some(vectors.clone());
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn conformance() {
        super::super::conformance::run(&super::MemoryRegistryStore::new()).await;
        super::super::conformance::run_vectors(&super::MemoryRegistryStore::new()).await;
    }
}
