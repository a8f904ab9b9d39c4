//! Records in PostgreSQL, shared by the replicas of one registry.
//!
//! Revisions come from a sequence. Two writers may commit their revisions
//! out of order, so a replica reading the changes re-reads a window of
//! recent revisions (see `Registry::sync`); applying a change twice is
//! harmless.

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::{PgPool, PgPoolOptions};

use super::{
    Change, RegistryStore, StoreError, StoreResult, decode_with_vectors, encode, encode_vectors,
};
use crate::model::{Record, StoredVectors};

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
    // The skills' vectors (added after the first schema: a table made
    // before gets the column, empty; those records are embedded again
    // once, then stored).
    "ALTER TABLE registry_entries ADD COLUMN IF NOT EXISTS vectors TEXT",
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
        let vectors = encode_vectors(record)?;
        let rev: i64 = sqlx::query_scalar(
            "INSERT INTO registry_entries (identifier, owner, doc, revision, vectors)
             VALUES ($1, $2, $3, nextval('registry_revision'), $4)
             ON CONFLICT (identifier) DO UPDATE SET owner = excluded.owner, doc = excluded.doc,
             revision = excluded.revision, vectors = excluded.vectors
             RETURNING revision",
        )
        .bind(&record.identifier)
        .bind(&record.owner)
        .bind(&doc)
        .bind(&vectors)
        .fetch_one(&self.pool)
        .await
        .map_err(StoreError::from_db)?;
        Ok(rev)
    }

    async fn update(&self, record: &Record, expected_revision: i64) -> StoreResult<Option<i64>> {
        let doc = encode(record)?;
        let vectors = encode_vectors(record)?;
        let rev: Option<i64> = sqlx::query_scalar(
            "UPDATE registry_entries SET doc = $3, vectors = $4, revision = nextval('registry_revision')
             WHERE identifier = $1 AND revision = $2 AND doc IS NOT NULL
             RETURNING revision",
        )
        .bind(&record.identifier)
        .bind(expected_revision)
        .bind(&doc)
        .bind(&vectors)
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::from_db)?;
        Ok(rev)
    }

    async fn get(&self, identifier: &str) -> StoreResult<Option<Record>> {
        let row: Option<(Option<String>, Option<String>)> =
            sqlx::query_as("SELECT doc, vectors FROM registry_entries WHERE identifier = $1")
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
        let rev: Option<i64> = sqlx::query_scalar(
            "UPDATE registry_entries SET doc = NULL, vectors = NULL, revision = nextval('registry_revision')
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
            "SELECT identifier, revision, doc, vectors FROM registry_entries WHERE revision > $1 ORDER BY revision",
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

    async fn put_vectors(
        &self,
        identifier: &str,
        revision: i64,
        vectors: &StoredVectors,
    ) -> StoreResult<bool> {
        let v = serde_json::to_string(vectors)
            .map_err(|e| StoreError(format!("cannot encode a record's vectors: {e}")))?;
        let done = sqlx::query(
            "UPDATE registry_entries SET vectors = $3 WHERE identifier = $1 AND revision = $2 AND doc IS NOT NULL",
        )
        .bind(identifier)
        .bind(revision)
        .bind(&v)
        .execute(&self.pool)
        .await
        .map_err(StoreError::from_db)?;
        Ok(done.rows_affected() == 1)
    }
}

#[cfg(test)]
mod tests {
    /// A schema of its own in the database at `url` (`PREFIX_PID`): the
    /// admin pool, its name, and connect options that use it.
    async fn scratch_schema(
        url: &str,
        prefix: &str,
    ) -> (sqlx::PgPool, String, sqlx::postgres::PgConnectOptions) {
        let schema = format!("{prefix}_{}", std::process::id());
        let admin = sqlx::PgPool::connect(url).await.unwrap();
        sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
            .execute(&admin)
            .await
            .unwrap();
        let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
        let options = options.options([("search_path", schema.as_str())]);
        (admin, schema, options)
    }

    async fn drop_schema(admin: &sqlx::PgPool, schema: &str) {
        sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
            .execute(admin)
            .await
            .unwrap();
    }

    /// Runs against `A2A_TEST_POSTGRES_URL` when it is set (in a schema of
    /// its own); skipped otherwise.
    #[tokio::test]
    async fn conformance() {
        let Ok(url) = std::env::var("A2A_TEST_POSTGRES_URL") else {
            eprintln!("A2A_TEST_POSTGRES_URL not set: PostgreSQL registry store not tested");
            return;
        };
        let (admin, schema, options) = scratch_schema(&url, "registry_test").await;
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect_with(options)
            .await
            .unwrap();
        let store = super::PostgresRegistryStore::with_pool(pool).await.unwrap();
        super::super::conformance::run(&store).await;
        super::super::conformance::run_vectors(&store).await;
        drop_schema(&admin, &schema).await;
    }

    /// Started again on the same database, a registry embeds nothing.
    #[tokio::test]
    #[ignore = "needs PostgreSQL (A2A_TEST_POSTGRES_URL)"]
    async fn a_restarted_registry_reuses_the_stored_vectors() {
        let url = std::env::var("A2A_TEST_POSTGRES_URL")
            .expect("A2A_TEST_POSTGRES_URL: a PostgreSQL database to test with");
        let (admin, schema, options) = scratch_schema(&url, "registry_restart").await;
        super::super::conformance::restart_reuses_vectors(|| async {
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(2)
                .connect_with(options.clone())
                .await
                .unwrap();
            std::sync::Arc::new(super::PostgresRegistryStore::with_pool(pool).await.unwrap())
                as std::sync::Arc<dyn super::RegistryStore>
        })
        .await;
        drop_schema(&admin, &schema).await;
    }

    /// A table of the schema before the vectors' column gets it, its rows
    /// read as they were (without vectors).
    #[tokio::test]
    #[ignore = "needs PostgreSQL (A2A_TEST_POSTGRES_URL)"]
    async fn a_table_without_the_vectors_column_is_migrated() {
        use super::RegistryStore;
        let url = std::env::var("A2A_TEST_POSTGRES_URL")
            .expect("A2A_TEST_POSTGRES_URL: a PostgreSQL database to test with");
        let (admin, schema, options) = scratch_schema(&url, "registry_migrate").await;
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect_with(options)
            .await
            .unwrap();
        let record = super::super::conformance::record("urn:air:old.example:agent:a", "alice");
        for stmt in [
            "CREATE SEQUENCE registry_revision",
            "CREATE TABLE registry_entries (identifier TEXT PRIMARY KEY, owner TEXT NOT NULL, \
             doc TEXT, revision BIGINT NOT NULL, lease_until BIGINT NOT NULL DEFAULT 0)",
        ] {
            sqlx::query(stmt).execute(&pool).await.unwrap();
        }
        let rev: i64 = sqlx::query_scalar(
            "INSERT INTO registry_entries (identifier, owner, doc, revision)
             VALUES ($1, $2, $3, nextval('registry_revision')) RETURNING revision",
        )
        .bind(&record.identifier)
        .bind(&record.owner)
        .bind(super::encode(&record).unwrap())
        .fetch_one(&pool)
        .await
        .unwrap();
        let store = super::PostgresRegistryStore::with_pool(pool.clone())
            .await
            .unwrap();
        assert_eq!(
            store.get(&record.identifier).await.unwrap().unwrap(),
            record
        );
        let v = super::StoredVectors {
            model: "m".into(),
            skills: vec![],
        };
        assert!(
            store
                .put_vectors(&record.identifier, rev, &v)
                .await
                .unwrap()
        );
        // The schema applied again (another replica starting): no change.
        let store = super::PostgresRegistryStore::with_pool(pool).await.unwrap();
        let got = store.get(&record.identifier).await.unwrap().unwrap();
        assert_eq!(got.vectors, Some(v));
        drop_schema(&admin, &schema).await;
    }
}
