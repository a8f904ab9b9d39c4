//! Records in an embedded SQLite database (one file; the default of
//! `a2a registry serve`).

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::Row;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

use super::{Change, RegistryStore, StoreError, StoreResult, decode, encode};
use crate::model::Record;

const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS registry_entries (
        identifier TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        doc TEXT,
        revision INTEGER NOT NULL,
        lease_until INTEGER NOT NULL DEFAULT 0
    )",
    "CREATE INDEX IF NOT EXISTS registry_entries_revision ON registry_entries (revision)",
    "CREATE TABLE IF NOT EXISTS registry_revision (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO registry_revision (id, value) VALUES (1, 0)",
];

const NEXT_REVISION: &str =
    "UPDATE registry_revision SET value = value + 1 WHERE id = 1 RETURNING value";

/// Records in SQLite. One writer connection (SQLite serialises writes
/// anyway), WAL so that reads do not wait for it.
#[derive(Clone)]
pub struct SqliteRegistryStore {
    pool: SqlitePool,
}

impl SqliteRegistryStore {
    /// Opens (or creates) the database file.
    pub async fn open(path: impl AsRef<Path>) -> StoreResult<Self> {
        let options = SqliteConnectOptions::new()
            .filename(path.as_ref())
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(5));
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .map_err(|e| {
                StoreError(format!(
                    "cannot open the SQLite registry store {}: {e}",
                    path.as_ref().display()
                ))
            })?;
        for stmt in SCHEMA {
            sqlx::query(stmt)
                .execute(&pool)
                .await
                .map_err(StoreError::from_db)?;
        }
        Ok(Self { pool })
    }

    async fn write(&self, record: &Record, expected: Option<i64>) -> StoreResult<Option<i64>> {
        let doc = encode(record)?;
        let mut tx = self.pool.begin().await.map_err(StoreError::from_db)?;
        if let Some(expected) = expected {
            let current: Option<i64> = sqlx::query_scalar(
                "SELECT 1 FROM registry_entries WHERE identifier = ? AND revision = ? AND doc IS NOT NULL",
            )
            .bind(&record.identifier)
            .bind(expected)
            .fetch_optional(&mut *tx)
            .await
            .map_err(StoreError::from_db)?;
            if current.is_none() {
                return Ok(None);
            }
        }
        let rev: i64 = sqlx::query_scalar(NEXT_REVISION)
            .fetch_one(&mut *tx)
            .await
            .map_err(StoreError::from_db)?;
        sqlx::query(
            "INSERT INTO registry_entries (identifier, owner, doc, revision) VALUES (?, ?, ?, ?)
             ON CONFLICT (identifier) DO UPDATE SET owner = excluded.owner, doc = excluded.doc,
             revision = excluded.revision",
        )
        .bind(&record.identifier)
        .bind(&record.owner)
        .bind(&doc)
        .bind(rev)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from_db)?;
        tx.commit().await.map_err(StoreError::from_db)?;
        Ok(Some(rev))
    }
}

#[async_trait]
impl RegistryStore for SqliteRegistryStore {
    async fn put(&self, record: &Record) -> StoreResult<i64> {
        self.write(record, None)
            .await?
            .ok_or_else(|| StoreError("the record was not written".into()))
    }

    async fn update(&self, record: &Record, expected_revision: i64) -> StoreResult<Option<i64>> {
        self.write(record, Some(expected_revision)).await
    }

    async fn get(&self, identifier: &str) -> StoreResult<Option<Record>> {
        let doc: Option<Option<String>> =
            sqlx::query_scalar("SELECT doc FROM registry_entries WHERE identifier = ?")
                .bind(identifier)
                .fetch_optional(&self.pool)
                .await
                .map_err(StoreError::from_db)?;
        doc.flatten().map(|d| decode(&d)).transpose()
    }

    async fn delete(&self, identifier: &str) -> StoreResult<Option<i64>> {
        let mut tx = self.pool.begin().await.map_err(StoreError::from_db)?;
        let live: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM registry_entries WHERE identifier = ? AND doc IS NOT NULL",
        )
        .bind(identifier)
        .fetch_optional(&mut *tx)
        .await
        .map_err(StoreError::from_db)?;
        if live.is_none() {
            return Ok(None);
        }
        let rev: i64 = sqlx::query_scalar(NEXT_REVISION)
            .fetch_one(&mut *tx)
            .await
            .map_err(StoreError::from_db)?;
        sqlx::query("UPDATE registry_entries SET doc = NULL, revision = ? WHERE identifier = ?")
            .bind(rev)
            .bind(identifier)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from_db)?;
        tx.commit().await.map_err(StoreError::from_db)?;
        Ok(Some(rev))
    }

    async fn changes_since(&self, revision: i64) -> StoreResult<Vec<Change>> {
        let rows = sqlx::query(
            "SELECT identifier, revision, doc FROM registry_entries WHERE revision > ? ORDER BY revision",
        )
        .bind(revision)
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::from_db)?;
        rows.into_iter()
            .map(|row| {
                let doc: Option<String> = row.get("doc");
                Ok(Change {
                    identifier: row.get("identifier"),
                    revision: row.get("revision"),
                    record: doc.map(|d| decode(&d)).transpose()?,
                })
            })
            .collect()
    }

    async fn claim_fetch(&self, identifier: &str, now_ms: i64, until_ms: i64) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE registry_entries SET lease_until = ? WHERE identifier = ? AND lease_until <= ?",
        )
        .bind(until_ms)
        .bind(identifier)
        .bind(now_ms)
        .execute(&self.pool)
        .await
        .map_err(StoreError::from_db)?;
        Ok(done.rows_affected() == 1)
    }

    async fn release_fetch(&self, identifier: &str) -> StoreResult<()> {
        sqlx::query("UPDATE registry_entries SET lease_until = 0 WHERE identifier = ?")
            .bind(identifier)
            .execute(&self.pool)
            .await
            .map_err(StoreError::from_db)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn conformance() {
        let dir = tempfile::tempdir().unwrap();
        let store = super::SqliteRegistryStore::open(dir.path().join("r.db"))
            .await
            .unwrap();
        super::super::conformance::run(&store).await;
        // Reopened: the records are still there.
        drop(store);
        let again = super::SqliteRegistryStore::open(dir.path().join("r.db"))
            .await
            .unwrap();
        use super::RegistryStore;
        assert!(!again.changes_since(0).await.unwrap().is_empty());
    }
}
