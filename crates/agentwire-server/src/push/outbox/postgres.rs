//! The PostgreSQL push outbox: notifications survive a restart, and the
//! replicas of a server (`a2a serve --store postgres://...`) share it.
//!
//! It works on the pool of a [`PostgresStore`], whose migrations create its
//! tables (`a2a_push_streams`, `a2a_push_outbox`). Every change is one
//! transaction; leasing takes the due streams with `FOR UPDATE SKIP
//! LOCKED`, so replicas leasing at once split the work instead of waiting
//! for each other, and a lease expires if its replica dies.

use agentwire_types::{A2aError, A2aResult};
use sqlx::postgres::PgPool;

use super::sql::{SqlOutbox, outbox_on_sql};
use crate::store::PostgresStore;
use crate::store::sql::driver::{Conn, Dialect, SqlRow, Stmt};
use crate::store::sql::postgres::Pg;

/// A [`PushOutbox`](super::PushOutbox) in the PostgreSQL database of a
/// [`PostgresStore`].
#[derive(Debug, Clone)]
pub struct PostgresOutbox {
    sql: SqlOutbox<Pg>,
}

outbox_on_sql!(PostgresOutbox);

impl PostgresOutbox {
    /// The outbox of `store`'s database (its schema is the store's).
    pub fn new(store: &PostgresStore) -> Self {
        Self {
            sql: SqlOutbox {
                pool: store.pool().clone(),
            },
        }
    }

    fn pool(&self) -> &PgPool {
        &self.sql.pool
    }

    /// The signing key the replicas sharing this database use: created by
    /// the first one that asks, read by the others (table `a2a_push_key`).
    /// The private key lives in the database, readable by whoever can read
    /// the tasks.
    pub async fn shared_signer(&self) -> A2aResult<crate::push::PushSigner> {
        let what = "reading the shared signing key";
        let fail = |e| Pg::error("push outbox", what, e);
        let fresh = crate::push::PushSigner::generate_pkcs8()?;
        let mut conn = Pg::on(self.pool());
        conn.execute(
            Stmt::new(
                "INSERT INTO a2a_push_key (id, pkcs8) VALUES (1, $1) ON CONFLICT (id) DO NOTHING",
            )
            .arg(&fresh),
        )
        .await
        .map_err(fail)?;
        let der = match conn
            .fetch_optional(Stmt::new("SELECT pkcs8 FROM a2a_push_key WHERE id = 1"))
            .await
            .map_err(fail)?
        {
            Some(r) => r.blob("pkcs8")?,
            None => {
                return Err(A2aError::internal(
                    "push outbox: the shared signing key is missing after it was stored",
                ));
            }
        };
        crate::push::PushSigner::from_pkcs8(&der)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::push::outbox::PushOutbox;
    use crate::store::postgres::testing::TestSchema;
    use agentwire_types::TaskPushNotificationConfig;
    use bytes::Bytes;
    use sqlx::postgres::PgPoolOptions;

    /// A store on a fresh schema of the test database (`None`: skipped).
    async fn schema() -> Option<(PostgresStore, TestSchema)> {
        let db = TestSchema::create("a2a_outbox", "PostgreSQL push outbox test").await?;
        Some((db.store(4).await, db))
    }

    #[tokio::test]
    #[ignore = "needs PostgreSQL: set A2A_TEST_POSTGRES_URL (bash .ci/postgres start)"]
    async fn replicas_get_one_signing_key() {
        let Some((store, db)) = schema().await else {
            return;
        };
        let other = PostgresStore::connect_with(
            PgPoolOptions::new().max_connections(2),
            db.options.clone(),
        )
        .await
        .unwrap();
        let (oa, ob) = (PostgresOutbox::new(&store), PostgresOutbox::new(&other));
        let (a, b) = tokio::join!(oa.shared_signer(), ob.shared_signer());
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(a.kid(), b.kid());
        assert_eq!(a.jwks_json(), b.jwks_json());
        // And it stays the same.
        let again = PostgresOutbox::new(&store).shared_signer().await.unwrap();
        assert_eq!(again.kid(), a.kid());
        store.pool().close().await;
        other.pool().close().await;
        db.drop_schema().await;
    }

    #[tokio::test]
    #[ignore = "needs PostgreSQL: set A2A_TEST_POSTGRES_URL (bash .ci/postgres start)"]
    async fn postgres_outbox_contract() {
        let Some((store, db)) = schema().await else {
            return;
        };
        crate::push::outbox::conformance(&PostgresOutbox::new(&store)).await;
        store.pool().close().await;
        db.drop_schema().await;
    }

    /// Two replicas leasing at once split the streams between them, and
    /// every notification is handed out exactly once, in stream order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs PostgreSQL: set A2A_TEST_POSTGRES_URL (bash .ci/postgres start)"]
    async fn replicas_share_the_work_without_overlap() {
        let Some((store, db)) = schema().await else {
            return;
        };
        let other = PostgresStore::connect_with(
            PgPoolOptions::new().max_connections(4),
            db.options.clone(),
        )
        .await
        .unwrap();
        let (a, b) = (PostgresOutbox::new(&store), PostgresOutbox::new(&other));
        const STREAMS: usize = 20;
        const EACH: u64 = 5;
        for s in 0..STREAMS {
            let cfg = TaskPushNotificationConfig {
                id: "c".into(),
                task_id: format!("t{s}"),
                url: "http://127.0.0.1:9/".into(),
                ..Default::default()
            };
            for i in 1..=EACH {
                a.enqueue(
                    &cfg.task_id,
                    std::slice::from_ref(&cfg),
                    Bytes::from(format!("e{i}")),
                    i == EACH,
                )
                .await
                .unwrap();
            }
        }
        // Each replica drains what it leases, acking head after head.
        let drain = |outbox: PostgresOutbox, me: &'static str| async move {
            let mut seen: Vec<(String, u64)> = Vec::new();
            loop {
                let l = outbox.lease(me, 1_000, 60_000, 3).await.unwrap();
                if l.items.is_empty() {
                    return seen;
                }
                for mut n in l.items {
                    loop {
                        seen.push((n.task_id.clone(), n.seq));
                        match outbox.ack(me, &n, 1_000, 60_000).await.unwrap() {
                            Some(next) => n = next,
                            None => break,
                        }
                    }
                }
            }
        };
        let (ra, rb) = tokio::join!(
            tokio::spawn(drain(a.clone(), "a")),
            tokio::spawn(drain(b, "b"))
        );
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        let mut all: Vec<(String, u64)> = ra.iter().chain(rb.iter()).cloned().collect();
        assert_eq!(
            all.len(),
            STREAMS * EACH as usize,
            "every notification once"
        );
        all.sort();
        all.dedup();
        assert_eq!(all.len(), STREAMS * EACH as usize, "none twice");
        // A stream is drained by one replica, in order.
        for r in [&ra, &rb] {
            let mut last: std::collections::HashMap<&str, u64> = Default::default();
            for (t, seq) in r.iter() {
                let prev = last.insert(t.as_str(), *seq).unwrap_or(0);
                assert_eq!(*seq, prev + 1, "stream {t} in order on one replica");
            }
        }
        assert_eq!(a.pending().await.unwrap(), 0);
        store.pool().close().await;
        other.pool().close().await;
        db.drop_schema().await;
    }
}
