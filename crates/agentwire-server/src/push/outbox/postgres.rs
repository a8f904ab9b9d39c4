//! The PostgreSQL push outbox: notifications survive a restart, and the
//! replicas of a server (`a2a serve --store postgres://...`) share it.
//!
//! It works on the pool of a [`PostgresStore`], whose migrations create its
//! tables (`a2a_push_streams`, `a2a_push_outbox`). Every change is one
//! transaction; leasing takes the due streams with `FOR UPDATE SKIP
//! LOCKED`, so replicas leasing at once split the work instead of waiting
//! for each other, and a lease expires if its replica dies.

use agentwire_types::{A2aResult, TaskPushNotificationConfig};
use async_trait::async_trait;
use bytes::Bytes;
use prost::Message as _;
use sqlx::Row;
use sqlx::postgres::{PgConnection, PgPool};

use super::{Leased, Notification, PushOutbox, db_error, decode_config, now_ms};
use crate::store::PostgresStore;

/// A [`PushOutbox`] in the PostgreSQL database of a [`PostgresStore`].
#[derive(Debug, Clone)]
pub struct PostgresOutbox {
    pool: PgPool,
}

impl PostgresOutbox {
    /// The outbox of `store`'s database (its schema is the store's).
    pub fn new(store: &PostgresStore) -> Self {
        Self {
            pool: store.pool().clone(),
        }
    }

    /// The signing key the replicas sharing this database use: created by
    /// the first one that asks, read by the others (table `a2a_push_key`).
    /// The private key lives in the database, readable by whoever can read
    /// the tasks.
    pub async fn shared_signer(&self) -> A2aResult<crate::push::PushSigner> {
        let what = "reading the shared signing key";
        let fresh = crate::push::PushSigner::generate_pkcs8()?;
        sqlx::query(
            "INSERT INTO a2a_push_key (id, pkcs8) VALUES (1, $1) ON CONFLICT (id) DO NOTHING",
        )
        .bind(&fresh)
        .execute(&self.pool)
        .await
        .map_err(|e| db_error(what, e))?;
        let der: Vec<u8> = sqlx::query_scalar("SELECT pkcs8 FROM a2a_push_key WHERE id = 1")
            .fetch_one(&self.pool)
            .await
            .map_err(|e| db_error(what, e))?;
        crate::push::PushSigner::from_pkcs8(&der)
    }

    async fn begin(&self, what: &str) -> A2aResult<sqlx::Transaction<'static, sqlx::Postgres>> {
        self.pool.begin().await.map_err(|e| db_error(what, e))
    }
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// The head of one stream (inside a transaction).
async fn head(
    conn: &mut PgConnection,
    task_id: &str,
    config: TaskPushNotificationConfig,
    attempts: u32,
) -> A2aResult<Option<Notification>> {
    let row = sqlx::query(
        "SELECT seq, id, body, is_final FROM a2a_push_outbox \
         WHERE task_id = $1 AND config_id = $2 ORDER BY seq LIMIT 1",
    )
    .bind(task_id)
    .bind(&config.id)
    .fetch_optional(&mut *conn)
    .await
    .map_err(|e| db_error("reading a stream head", e))?;
    let Some(r) = row else {
        return Ok(None);
    };
    let what = "reading a stream head";
    Ok(Some(Notification {
        task_id: task_id.to_owned(),
        seq: to_u64(r.try_get("seq").map_err(|e| db_error(what, e))?),
        id: r.try_get("id").map_err(|e| db_error(what, e))?,
        body: Bytes::from(
            r.try_get::<Vec<u8>, _>("body")
                .map_err(|e| db_error(what, e))?,
        ),
        is_final: r.try_get("is_final").map_err(|e| db_error(what, e))?,
        attempts,
        config,
    }))
}

#[async_trait]
impl PushOutbox for PostgresOutbox {
    async fn enqueue(
        &self,
        task_id: &str,
        configs: &[TaskPushNotificationConfig],
        body: Bytes,
        is_final: bool,
    ) -> A2aResult<()> {
        if configs.is_empty() {
            return Ok(());
        }
        let what = "enqueuing a notification";
        let mut tx = self.begin(what).await?;
        let now = now_ms();
        for c in configs {
            sqlx::query(
                "INSERT INTO a2a_push_streams (task_id, config_id, config) VALUES ($1, $2, $3) \
                 ON CONFLICT (task_id, config_id) DO NOTHING",
            )
            .bind(task_id)
            .bind(&c.id)
            .bind(c.encode_to_vec())
            .execute(&mut *tx)
            .await
            .map_err(|e| db_error(what, e))?;
            // The row lock taken here orders the enqueues of one stream,
            // whichever replica makes them.
            let seq: Option<i64> = sqlx::query_scalar(
                "UPDATE a2a_push_streams SET next_seq = next_seq + 1, pending = pending + 1 \
                 WHERE task_id = $1 AND config_id = $2 AND NOT failing RETURNING next_seq - 1",
            )
            .bind(task_id)
            .bind(&c.id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| db_error(what, e))?;
            match seq {
                Some(seq) => {
                    sqlx::query(
                        "INSERT INTO a2a_push_outbox \
                         (task_id, config_id, seq, id, body, is_final, created_ms) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    )
                    .bind(task_id)
                    .bind(&c.id)
                    .bind(seq)
                    .bind(agentwire_types::new_id())
                    .bind(body.as_ref())
                    .bind(is_final)
                    .bind(now)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| db_error(what, e))?;
                }
                None if is_final => {
                    sqlx::query(
                        "DELETE FROM a2a_push_streams WHERE task_id = $1 AND config_id = $2",
                    )
                    .bind(task_id)
                    .bind(&c.id)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| db_error(what, e))?;
                }
                None => {}
            }
        }
        tx.commit().await.map_err(|e| db_error(what, e))
    }

    async fn lease(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
        limit: usize,
    ) -> A2aResult<Leased> {
        let what = "leasing notifications";
        let mut tx = self.begin(what).await?;
        let rows = sqlx::query(
            "WITH picked AS (SELECT task_id, config_id FROM a2a_push_streams \
               WHERE pending > 0 AND NOT failing AND due_ms <= $1 AND lease_until <= $1 \
               ORDER BY due_ms LIMIT $2 FOR UPDATE SKIP LOCKED) \
             UPDATE a2a_push_streams s SET lease_owner = $3, lease_until = $4 \
             FROM picked WHERE s.task_id = picked.task_id AND s.config_id = picked.config_id \
             RETURNING s.task_id, s.config_id, s.config, s.attempts, s.due_ms",
        )
        .bind(now_ms)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .bind(owner)
        .bind(now_ms.saturating_add(lease_ms))
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| db_error(what, e))?;
        let mut picked = Vec::with_capacity(rows.len());
        for r in rows {
            let task_id: String = r.try_get("task_id").map_err(|e| db_error(what, e))?;
            let blob: Vec<u8> = r.try_get("config").map_err(|e| db_error(what, e))?;
            let config = decode_config(&blob, &task_id)?;
            let attempts: i32 = r.try_get("attempts").map_err(|e| db_error(what, e))?;
            let due: i64 = r.try_get("due_ms").map_err(|e| db_error(what, e))?;
            picked.push((due, task_id, config, u32::try_from(attempts).unwrap_or(0)));
        }
        // Earliest due first, as the streams were picked.
        picked.sort_by_key(|p| p.0);
        let mut out = Leased::default();
        for (_, task_id, config, attempts) in picked {
            if let Some(n) = head(&mut tx, &task_id, config, attempts).await? {
                out.items.push(n);
            }
        }
        out.next_due_ms = if out.items.len() >= limit {
            Some(now_ms)
        } else {
            sqlx::query_scalar(
                "SELECT MIN(GREATEST(due_ms, lease_until)) FROM a2a_push_streams \
                 WHERE pending > 0 AND NOT failing AND (due_ms > $1 OR lease_until > $1)",
            )
            .bind(now_ms)
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| db_error(what, e))?
        };
        tx.commit().await.map_err(|e| db_error(what, e))?;
        Ok(out)
    }

    async fn ack(
        &self,
        owner: &str,
        delivered: &Notification,
        now_ms: i64,
        lease_ms: i64,
    ) -> A2aResult<Option<Notification>> {
        let what = "acknowledging a notification";
        let (task_id, config_id) = (&delivered.task_id, &delivered.config.id);
        let mut tx = self.begin(what).await?;
        let removed = sqlx::query(
            "DELETE FROM a2a_push_outbox WHERE task_id = $1 AND config_id = $2 AND seq = $3",
        )
        .bind(task_id)
        .bind(config_id)
        .bind(i64::try_from(delivered.seq).unwrap_or(i64::MAX))
        .execute(&mut *tx)
        .await
        .map_err(|e| db_error(what, e))?
        .rows_affected();
        let row = sqlx::query(
            "UPDATE a2a_push_streams SET pending = GREATEST(pending - $1, 0), attempts = 0, \
             due_ms = 0 WHERE task_id = $2 AND config_id = $3 \
             RETURNING pending, lease_owner, config",
        )
        .bind(i64::try_from(removed).unwrap_or(i64::MAX))
        .bind(task_id)
        .bind(config_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| db_error(what, e))?;
        let Some(row) = row else {
            tx.commit().await.map_err(|e| db_error(what, e))?;
            return Ok(None);
        };
        let pending: i64 = row.try_get("pending").map_err(|e| db_error(what, e))?;
        let lease_owner: String = row.try_get("lease_owner").map_err(|e| db_error(what, e))?;
        let next = if pending == 0 {
            let sql = if delivered.is_final {
                "DELETE FROM a2a_push_streams WHERE task_id = $1 AND config_id = $2"
            } else {
                "UPDATE a2a_push_streams SET lease_until = 0 WHERE task_id = $1 AND config_id = $2"
            };
            sqlx::query(sql)
                .bind(task_id)
                .bind(config_id)
                .execute(&mut *tx)
                .await
                .map_err(|e| db_error(what, e))?;
            None
        } else if lease_owner == owner {
            sqlx::query(
                "UPDATE a2a_push_streams SET lease_until = $1 \
                 WHERE task_id = $2 AND config_id = $3",
            )
            .bind(now_ms.saturating_add(lease_ms))
            .bind(task_id)
            .bind(config_id)
            .execute(&mut *tx)
            .await
            .map_err(|e| db_error(what, e))?;
            let blob: Vec<u8> = row.try_get("config").map_err(|e| db_error(what, e))?;
            let config = decode_config(&blob, task_id)?;
            head(&mut tx, task_id, config, 0).await?
        } else {
            None
        };
        tx.commit().await.map_err(|e| db_error(what, e))?;
        Ok(next)
    }

    async fn retry(&self, owner: &str, failed: &Notification, due_ms: i64) -> A2aResult<()> {
        sqlx::query(
            "UPDATE a2a_push_streams SET attempts = $1, due_ms = $2, lease_until = 0 \
             WHERE task_id = $3 AND config_id = $4 AND lease_owner = $5",
        )
        .bind(i32::try_from(failed.attempts.saturating_add(1)).unwrap_or(i32::MAX))
        .bind(due_ms)
        .bind(&failed.task_id)
        .bind(&failed.config.id)
        .bind(owner)
        .execute(&self.pool)
        .await
        .map_err(|e| db_error("scheduling a retry", e))?;
        Ok(())
    }

    async fn fail(&self, task_id: &str, config_id: &str) -> A2aResult<u64> {
        let what = "marking a stream failing";
        let mut tx = self.begin(what).await?;
        let finals = delete_queued(&mut tx, task_id, config_id, what).await?;
        let sql = if finals.iter().any(|f| *f) {
            "DELETE FROM a2a_push_streams WHERE task_id = $1 AND config_id = $2"
        } else {
            "UPDATE a2a_push_streams SET failing = true, pending = 0, attempts = 0, \
             lease_until = 0 WHERE task_id = $1 AND config_id = $2"
        };
        sqlx::query(sql)
            .bind(task_id)
            .bind(config_id)
            .execute(&mut *tx)
            .await
            .map_err(|e| db_error(what, e))?;
        tx.commit().await.map_err(|e| db_error(what, e))?;
        Ok(finals.len() as u64)
    }

    async fn reset(&self, config: &TaskPushNotificationConfig) -> A2aResult<()> {
        sqlx::query(
            "UPDATE a2a_push_streams SET config = $1, failing = false \
             WHERE task_id = $2 AND config_id = $3",
        )
        .bind(config.encode_to_vec())
        .bind(&config.task_id)
        .bind(&config.id)
        .execute(&self.pool)
        .await
        .map_err(|e| db_error("resetting a stream", e))?;
        Ok(())
    }

    async fn remove(&self, task_id: &str, config_id: &str) -> A2aResult<u64> {
        let what = "removing a stream";
        let mut tx = self.begin(what).await?;
        let dropped = delete_queued(&mut tx, task_id, config_id, what)
            .await?
            .len() as u64;
        sqlx::query("DELETE FROM a2a_push_streams WHERE task_id = $1 AND config_id = $2")
            .bind(task_id)
            .bind(config_id)
            .execute(&mut *tx)
            .await
            .map_err(|e| db_error(what, e))?;
        tx.commit().await.map_err(|e| db_error(what, e))?;
        Ok(dropped)
    }

    async fn pending(&self) -> A2aResult<u64> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM a2a_push_outbox")
            .fetch_one(&self.pool)
            .await
            .map_err(|e| db_error("counting notifications", e))?;
        Ok(to_u64(n))
    }
}

/// Deletes the notifications queued for a stream; returns whether each was
/// the task's final one.
async fn delete_queued(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    task_id: &str,
    config_id: &str,
    what: &str,
) -> A2aResult<Vec<bool>> {
    sqlx::query_scalar(
        "DELETE FROM a2a_push_outbox WHERE task_id = $1 AND config_id = $2 RETURNING is_final",
    )
    .bind(task_id)
    .bind(config_id)
    .fetch_all(&mut **tx)
    .await
    .map_err(|e| db_error(what, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::postgres::testing::TestSchema;
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
