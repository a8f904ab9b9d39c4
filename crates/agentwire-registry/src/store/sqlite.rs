//! Records in an embedded SQLite database (one file; the default of
//! `a2a registry serve`).

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::Row;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

use super::{
    Change, RegistryStore, StoreError, StoreResult, decode_with_vectors, encode, encode_vectors,
};
use crate::model::{Record, StoredVectors};

const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS registry_entries (
        identifier TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        doc TEXT,
        revision INTEGER NOT NULL,
        lease_until INTEGER NOT NULL DEFAULT 0,
        vectors TEXT
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
    /// Opens (or creates) the database file. Another process opening the
    /// same new file at the same moment is waited for (up to ten seconds:
    /// `agentwire_client::sqlite_open`).
    pub async fn open(path: impl AsRef<Path>) -> StoreResult<Self> {
        let options = SqliteConnectOptions::new()
            .filename(path.as_ref())
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(5));
        agentwire_client::sqlite_open::open_patiently(
            || Self::connect(options.clone()),
            |(busy, _)| *busy,
        )
        .await
        .map_err(|(_, e)| {
            StoreError(format!(
                "cannot open the SQLite registry store {}: {e}",
                path.as_ref().display()
            ))
        })
    }

    /// One try at opening: the error, and whether it was SQLite's busy
    /// answer.
    async fn connect(options: SqliteConnectOptions) -> Result<Self, (bool, String)> {
        let fault = |e: sqlx::Error| (agentwire_client::sqlite_open::is_busy(&e), e.to_string());
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .map_err(fault)?;
        for stmt in SCHEMA {
            sqlx::query(stmt).execute(&pool).await.map_err(fault)?;
        }
        migrate_vectors(&pool).await.map_err(|e| (false, e.0))?;
        Ok(Self { pool })
    }

    async fn write(&self, record: &Record, expected: Option<i64>) -> StoreResult<Option<i64>> {
        let doc = encode(record)?;
        let vectors = encode_vectors(record)?;
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
            "INSERT INTO registry_entries (identifier, owner, doc, revision, vectors) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (identifier) DO UPDATE SET owner = excluded.owner, doc = excluded.doc,
             revision = excluded.revision, vectors = excluded.vectors",
        )
        .bind(&record.identifier)
        .bind(&record.owner)
        .bind(&doc)
        .bind(rev)
        .bind(&vectors)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from_db)?;
        tx.commit().await.map_err(StoreError::from_db)?;
        Ok(Some(rev))
    }
}

/// A database made before the skills' vectors were stored gets their
/// column (empty: those records are embedded again once, then stored).
/// Another process may be adding it at the same time: an error is one
/// only if the column is still missing afterwards.
async fn migrate_vectors(pool: &SqlitePool) -> StoreResult<()> {
    let has = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT COUNT(*) FROM pragma_table_info('registry_entries') WHERE name = 'vectors'",
        )
        .fetch_one(pool)
        .await
        .map(|n| n > 0)
        .map_err(StoreError::from_db)
    };
    if has().await? {
        return Ok(());
    }
    let added = sqlx::query("ALTER TABLE registry_entries ADD COLUMN vectors TEXT")
        .execute(pool)
        .await;
    match added {
        Ok(_) => {
            tracing::info!("registry store: column `vectors` added (the skills' vectors)");
            Ok(())
        }
        Err(_) if has().await? => Ok(()),
        Err(e) => Err(StoreError(format!(
            "cannot add the column of the skills' vectors to the SQLite registry store: {e}"
        ))),
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
        let row: Option<(Option<String>, Option<String>)> =
            sqlx::query_as("SELECT doc, vectors FROM registry_entries WHERE identifier = ?")
                .bind(identifier)
                .fetch_optional(&self.pool)
                .await
                .map_err(StoreError::from_db)?;
        match row {
            Some((Some(doc), vectors)) => decode_with_vectors(&doc, vectors.as_deref()).map(Some),
            _ => Ok(None),
        }
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
        sqlx::query(
            "UPDATE registry_entries SET doc = NULL, vectors = NULL, revision = ? WHERE identifier = ?",
        )
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
            "SELECT identifier, revision, doc, vectors FROM registry_entries WHERE revision > ? ORDER BY revision",
        )
        .bind(revision)
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::from_db)?;
        rows.into_iter()
            .map(|row| {
                let doc: Option<String> = row.get("doc");
                let vectors: Option<String> = row.get("vectors");
                Ok(Change {
                    identifier: row.get("identifier"),
                    revision: row.get("revision"),
                    record: doc
                        .map(|d| decode_with_vectors(&d, vectors.as_deref()))
                        .transpose()?,
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

    async fn put_vectors(
        &self,
        identifier: &str,
        revision: i64,
        vectors: &StoredVectors,
    ) -> StoreResult<bool> {
        let v = serde_json::to_string(vectors)
            .map_err(|e| StoreError(format!("cannot encode a record's vectors: {e}")))?;
        let done = sqlx::query(
            "UPDATE registry_entries SET vectors = ? WHERE identifier = ? AND revision = ? AND doc IS NOT NULL",
        )
        .bind(&v)
        .bind(identifier)
        .bind(revision)
        .execute(&self.pool)
        .await
        .map_err(StoreError::from_db)?;
        Ok(done.rows_affected() == 1)
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
        super::super::conformance::run_vectors(&again).await;
    }

    /// Two processes (here two tasks) opening one new file at once both
    /// open it, and see each other's records.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn opened_by_two_at_once() {
        use super::RegistryStore;
        for i in 0..40 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("r.db");
            let (a, b) = tokio::join!(
                super::SqliteRegistryStore::open(&path),
                super::SqliteRegistryStore::open(&path)
            );
            let (a, b) = match (a, b) {
                (Ok(a), Ok(b)) => (a, b),
                (a, b) => panic!("round {i}: {:?} {:?}", a.err(), b.err()),
            };
            let record = super::super::conformance::record("urn:air:two.example:agent:a", "alice");
            a.put(&record).await.unwrap();
            assert_eq!(b.changes_since(0).await.unwrap().len(), 1);
        }
    }

    /// Started again on the same file, a registry embeds nothing.
    #[tokio::test]
    async fn a_restarted_registry_reuses_the_stored_vectors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        super::super::conformance::restart_reuses_vectors(|| async {
            std::sync::Arc::new(super::SqliteRegistryStore::open(&path).await.unwrap())
                as std::sync::Arc<dyn super::RegistryStore>
        })
        .await;
    }

    /// A database of the schema before the vectors' column: opened, it
    /// gets the column, its records are read as they were (without
    /// vectors), and vectors can be kept for them.
    #[tokio::test]
    async fn a_database_without_the_vectors_column_is_migrated() {
        use super::RegistryStore;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        let record = super::super::conformance::record("urn:air:old.example:agent:a", "alice");
        {
            let options = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(&path)
                .create_if_missing(true);
            let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
            for stmt in [
                "CREATE TABLE registry_entries (identifier TEXT PRIMARY KEY, owner TEXT NOT NULL, \
                 doc TEXT, revision INTEGER NOT NULL, lease_until INTEGER NOT NULL DEFAULT 0)",
                "CREATE TABLE registry_revision (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL)",
                "INSERT INTO registry_revision (id, value) VALUES (1, 7)",
            ] {
                sqlx::query(stmt).execute(&pool).await.unwrap();
            }
            sqlx::query("INSERT INTO registry_entries (identifier, owner, doc, revision) VALUES (?, ?, ?, 7)")
                .bind(&record.identifier)
                .bind(&record.owner)
                .bind(super::encode(&record).unwrap())
                .execute(&pool)
                .await
                .unwrap();
            pool.close().await;
        }
        let store = super::SqliteRegistryStore::open(&path).await.unwrap();
        assert_eq!(
            store.get(&record.identifier).await.unwrap().unwrap(),
            record
        );
        let v = super::StoredVectors {
            model: "m".into(),
            skills: vec![],
        };
        assert!(store.put_vectors(&record.identifier, 7, &v).await.unwrap());
        drop(store);
        // Opened again: nothing to migrate, the vectors are there.
        let store = super::SqliteRegistryStore::open(&path).await.unwrap();
        let got = store.get(&record.identifier).await.unwrap().unwrap();
        assert_eq!(got.vectors, Some(v));
        assert_eq!(store.changes_since(0).await.unwrap()[0].revision, 7);
    }
}
