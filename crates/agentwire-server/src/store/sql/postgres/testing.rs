//! A throwaway schema of the test database, for the PostgreSQL tests of
//! this workspace (not part of the supported API).

use std::future::Future;
use std::time::Duration;

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPoolOptions};

use super::PostgresStore;

/// Bound on each statement of the schema's administration.
const WAIT: Duration = Duration::from_secs(30);

/// A fresh schema of the database named by `A2A_TEST_POSTGRES_URL`, with
/// the connection options and URL that put it first on the search path.
pub struct TestSchema {
    /// The connection that created the schema (for the test's own
    /// statements).
    pub admin: PgConnection,
    /// The schema's name.
    pub name: String,
    /// Options of connections to the schema.
    pub options: PgConnectOptions,
    /// A URL of the schema (for `a2a serve --store`).
    pub url: String,
}

/// `f`, or a panic naming `what` after [`WAIT`].
async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(WAIT, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {WAIT:?}: {what}"),
    }
}

impl TestSchema {
    /// Creates a schema named `prefix` and a fresh id.
    ///
    /// The tests that call this are `#[ignore]`d with the reason (they need
    /// a database), so that `cargo test` reports them as ignored; run with
    /// `--include-ignored` (as CI does) and no `A2A_TEST_POSTGRES_URL`, they
    /// fail here, saying what is missing. Always `Some`: an `Option` so
    /// that the callers' `?` and `let ... else` stay as they are.
    pub async fn create(prefix: &str, what: &str) -> Option<Self> {
        let base = match std::env::var("A2A_TEST_POSTGRES_URL") {
            Ok(url) if !url.trim().is_empty() => url,
            _ => panic!(
                "{what} needs PostgreSQL: set A2A_TEST_POSTGRES_URL to a database URL \
                 (`export A2A_TEST_POSTGRES_URL=$(bash .ci/postgres start)` starts a \
                 throwaway server on loopback and prints one)"
            ),
        };
        let name = format!("{prefix}_{}", agentwire_types::new_id().replace('-', ""));
        let mut admin = within("connect to PostgreSQL", PgConnection::connect(&base))
            .await
            .expect("connect to A2A_TEST_POSTGRES_URL");
        let create = format!("CREATE SCHEMA {name}");
        within("create a schema", sqlx::query(&create).execute(&mut admin))
            .await
            .expect("create a test schema");
        let options: PgConnectOptions = base.parse().expect("A2A_TEST_POSTGRES_URL");
        let options = options.options([("search_path", name.as_str())]);
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}options=-c%20search_path%3D{name}");
        Some(Self {
            admin,
            name,
            options,
            url,
        })
    }

    /// A store on the schema with a pool of `connections`.
    pub async fn store(&self, connections: u32) -> PostgresStore {
        let pool = PgPoolOptions::new().max_connections(connections);
        within(
            "connect a store",
            PostgresStore::connect_with(pool, self.options.clone()),
        )
        .await
        .expect("PostgresStore on the test schema")
    }

    /// Runs a statement on the admin connection; the rows it affected.
    pub async fn execute(&mut self, sql: &str) -> u64 {
        within(sql, sqlx::query(sql).execute(&mut self.admin))
            .await
            .expect("a statement on the test schema")
            .rows_affected()
    }

    /// Drops the schema and everything in it.
    pub async fn drop_schema(mut self) {
        let statement = format!("DROP SCHEMA {} CASCADE", self.name);
        self.execute(&statement).await;
    }
}
