//! Records in PostgreSQL, shared by the replicas of one registry.
//!
//! Revisions come from a sequence. Two writers may commit their revisions
//! out of order, so a replica reading the changes re-reads a window of
//! recent revisions (see `Registry::sync`); applying a change twice is
//! harmless.

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::{PgPool, PgPoolOptions};

use super::{Change, RegistryStore, StoreError, StoreResult, decode, encode};
use crate::model::Record;

const SCHEMA: &[&str] = &[
    "CREATE SEQUENCE IF NOT EXISTS registry_revision",
    "CREATE TABLE IF NOT EXISTS registry_entries (
        identifier TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        doc TEXT,
        revision BIGINT NOT NULL,
        lease_until BIGINT NOT NULL DEFAULT 0
    )",
    "CREATE INDEX IF NOT EXISTS registry_entries_revision ON registry_entries (revision)",
];

/// Records in PostgreSQL.
#[derive(Clone)]
pub struct PostgresRegistryStore {
    pool: PgPool,
}

impl PostgresRegistryStore {
    /// Connects (`postgres://user:password@host:5432/db`) and creates the
    /// tables if needed.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .connect(url)
            .await
            .map_err(|e| StoreError(format!("cannot connect to PostgreSQL: {e}")))?;
        Self::with_pool(pool).await
    }

    /// Uses an existing pool (its `search_path` decides the schema).
    pub async fn with_pool(pool: PgPool) -> StoreResult<Self> {
        for stmt in SCHEMA {
            sqlx::query(stmt)
                .execute(&pool)
                .await
                .map_err(StoreError::from_db)?;
        }
        Ok(Self { pool })
    }
}

#[async_trait]
impl RegistryStore for PostgresRegistryStore {
    async fn put(&self, record: &Record) -> StoreResult<i64> {
        let doc = encode(record)?;
        let rev: i64 = sqlx::query_scalar(
            "INSERT INTO registry_entries (identifier, owner, doc, revision)
             VALUES ($1, $2, $3, nextval('registry_revision'))
             ON CONFLICT (identifier) DO UPDATE SET owner = excluded.owner, doc = excluded.doc,
             revision = excluded.revision
             RETURNING revision",
        )
        .bind(&record.identifier)
        .bind(&record.owner)
        .bind(&doc)
        .fetch_one(&self.pool)
        .await
        .map_err(StoreError::from_db)?;
        Ok(rev)
    }

    async fn update(&self, record: &Record, expected_revision: i64) -> StoreResult<Option<i64>> {
        let doc = encode(record)?;
        let rev: Option<i64> = sqlx::query_scalar(
            "UPDATE registry_entries SET doc = $3, revision = nextval('registry_revision')
             WHERE identifier = $1 AND revision = $2 AND doc IS NOT NULL
             RETURNING revision",
        )
        .bind(&record.identifier)
        .bind(expected_revision)
        .bind(&doc)
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::from_db)?;
        Ok(rev)
    }

    async fn get(&self, identifier: &str) -> StoreResult<Option<Record>> {
        let doc: Option<Option<String>> =
            sqlx::query_scalar("SELECT doc FROM registry_entries WHERE identifier = $1")
                .bind(identifier)
                .fetch_optional(&self.pool)
                .await
                .map_err(StoreError::from_db)?;
        doc.flatten().map(|d| decode(&d)).transpose()
    }

    async fn delete(&self, identifier: &str) -> StoreResult<Option<i64>> {
        let rev: Option<i64> = sqlx::query_scalar(
            "UPDATE registry_entries SET doc = NULL, revision = nextval('registry_revision')
             WHERE identifier = $1 AND doc IS NOT NULL
             RETURNING revision",
        )
        .bind(identifier)
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::from_db)?;
        Ok(rev)
    }

    async fn changes_since(&self, revision: i64) -> StoreResult<Vec<Change>> {
        let rows = sqlx::query(
            "SELECT identifier, revision, doc FROM registry_entries WHERE revision > $1 ORDER BY revision",
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
            "UPDATE registry_entries SET lease_until = $2 WHERE identifier = $1 AND lease_until <= $3",
        )
        .bind(identifier)
        .bind(until_ms)
        .bind(now_ms)
        .execute(&self.pool)
        .await
        .map_err(StoreError::from_db)?;
        Ok(done.rows_affected() == 1)
    }

    async fn release_fetch(&self, identifier: &str) -> StoreResult<()> {
        sqlx::query("UPDATE registry_entries SET lease_until = 0 WHERE identifier = $1")
            .bind(identifier)
            .execute(&self.pool)
            .await
            .map_err(StoreError::from_db)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    /// Runs against `A2A_TEST_POSTGRES_URL` when it is set (in a schema of
    /// its own); skipped otherwise.
    #[tokio::test]
    async fn conformance() {
        let Ok(url) = std::env::var("A2A_TEST_POSTGRES_URL") else {
            eprintln!("A2A_TEST_POSTGRES_URL not set: PostgreSQL registry store not tested");
            return;
        };
        let schema = format!("registry_test_{}", std::process::id());
        let admin = sqlx::PgPool::connect(&url).await.unwrap();
        sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
            .execute(&admin)
            .await
            .unwrap();
        let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
        let options = options.options([("search_path", schema.as_str())]);
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect_with(options)
            .await
            .unwrap();
        let store = super::PostgresRegistryStore::with_pool(pool).await.unwrap();
        super::super::conformance::run(&store).await;
        sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
            .execute(&admin)
            .await
            .unwrap();
    }
}
