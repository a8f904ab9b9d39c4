//! The SQLite push outbox: notifications survive a restart of the server.
//!
//! It opens its own connection to a database file, typically the one the
//! [`crate::store::SqliteStore`] uses (write-ahead logging lets both work
//! on one file), and keeps its schema version in its own table
//! (`a2a_push_schema`), so the two schemas evolve independently. The
//! migrations are embedded from `migrations/push_sqlite/`.

use std::path::Path;
use std::time::Duration;

use agentwire_types::{A2aResult, TaskPushNotificationConfig};
use async_trait::async_trait;
use bytes::Bytes;
use prost::Message as _;
use sqlx::Row;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::{Leased, Notification, PushOutbox, db_error, decode_config, now_ms};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/push_sqlite");

const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// A [`PushOutbox`] in an SQLite database file.
///
/// Every change is one transaction (`BEGIN IMMEDIATE`), committed with
/// `synchronous = NORMAL` in WAL mode: an enqueued notification survives a
/// crash of the process. Several processes may share the file: leases keep
/// them from delivering the same stream at once.
#[derive(Debug, Clone)]
pub struct SqliteOutbox {
    pool: SqlitePool,
}

impl SqliteOutbox {
    /// Opens (creating it if needed) the database file at `path` and brings
    /// the outbox schema up to date. `path` may be the task store's file.
    pub async fn open(path: impl AsRef<Path>) -> A2aResult<Self> {
        let path = path.as_ref();
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .map_err(|e| db_error(&format!("opening {}", path.display()), e))?;
        Self::migrate(&pool).await?;
        Ok(Self { pool })
    }

    /// A private outbox in memory (for tests).
    pub async fn in_memory() -> A2aResult<Self> {
        let options = SqliteConnectOptions::new()
            .in_memory(true)
            .busy_timeout(BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options)
            .await
            .map_err(|e| db_error("opening an in-memory database", e))?;
        Self::migrate(&pool).await?;
        Ok(Self { pool })
    }

    /// Applies the embedded migrations not yet recorded in
    /// `a2a_push_schema`, each in its own transaction.
    async fn migrate(pool: &SqlitePool) -> A2aResult<()> {
        let what = "migrating the schema";
        let mut tx = pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(|e| db_error(what, e))?;
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS a2a_push_schema (version INTEGER PRIMARY KEY, \
             description TEXT NOT NULL, applied_ms INTEGER NOT NULL)",
        )
        .execute(&mut *tx)
        .await
        .map_err(|e| db_error(what, e))?;
        let applied: Vec<i64> = sqlx::query_scalar("SELECT version FROM a2a_push_schema")
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| db_error(what, e))?;
        for m in MIGRATOR.iter() {
            if m.migration_type.is_down_migration() || applied.contains(&m.version) {
                continue;
            }
            sqlx::raw_sql(&m.sql).execute(&mut *tx).await.map_err(|e| {
                db_error(&format!("migration {} ({})", m.version, m.description), e)
            })?;
            sqlx::query(
                "INSERT INTO a2a_push_schema (version, description, applied_ms) VALUES (?, ?, ?)",
            )
            .bind(m.version)
            .bind(&*m.description)
            .bind(now_ms())
            .execute(&mut *tx)
            .await
            .map_err(|e| db_error(what, e))?;
        }
        tx.commit().await.map_err(|e| db_error(what, e))
    }

    async fn begin(&self, what: &str) -> A2aResult<sqlx::Transaction<'static, sqlx::Sqlite>> {
        self.pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(|e| db_error(what, e))
    }
}

/// The head of one stream (inside a transaction).
async fn head(
    conn: &mut sqlx::SqliteConnection,
    task_id: &str,
    config: TaskPushNotificationConfig,
    attempts: u32,
) -> A2aResult<Option<Notification>> {
    let row = sqlx::query(
        "SELECT seq, id, body, is_final FROM a2a_push_outbox \
         WHERE task_id = ? AND config_id = ? ORDER BY seq LIMIT 1",
    )
    .bind(task_id)
    .bind(&config.id)
    .fetch_optional(&mut *conn)
    .await
    .map_err(|e| db_error("reading a stream head", e))?;
    Ok(row.map(|r| Notification {
        task_id: task_id.to_owned(),
        seq: r.get::<i64, _>(0) as u64,
        id: r.get(1),
        body: Bytes::from(r.get::<Vec<u8>, _>(2)),
        is_final: r.get::<i64, _>(3) != 0,
        attempts,
        config,
    }))
}

#[async_trait]
impl PushOutbox for SqliteOutbox {
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
                "INSERT INTO a2a_push_streams (task_id, config_id, config) VALUES (?, ?, ?) \
                 ON CONFLICT (task_id, config_id) DO NOTHING",
            )
            .bind(task_id)
            .bind(&c.id)
            .bind(c.encode_to_vec())
            .execute(&mut *tx)
            .await
            .map_err(|e| db_error(what, e))?;
            let seq: Option<i64> = sqlx::query_scalar(
                "UPDATE a2a_push_streams SET next_seq = next_seq + 1, pending = pending + 1 \
                 WHERE task_id = ? AND config_id = ? AND failing = 0 RETURNING next_seq - 1",
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
                         VALUES (?, ?, ?, ?, ?, ?, ?)",
                    )
                    .bind(task_id)
                    .bind(&c.id)
                    .bind(seq)
                    .bind(agentwire_types::new_id())
                    .bind(body.as_ref())
                    .bind(is_final as i64)
                    .bind(now)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| db_error(what, e))?;
                }
                None if is_final => {
                    sqlx::query("DELETE FROM a2a_push_streams WHERE task_id = ? AND config_id = ?")
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
            "SELECT task_id, config_id, config, attempts FROM a2a_push_streams \
             WHERE pending > 0 AND failing = 0 AND due_ms <= ? AND lease_until <= ? \
             ORDER BY due_ms LIMIT ?",
        )
        .bind(now_ms)
        .bind(now_ms)
        .bind(limit as i64)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| db_error(what, e))?;
        let mut out = Leased::default();
        for r in rows {
            let task_id: String = r.get(0);
            let config_id: String = r.get(1);
            let config = decode_config(&r.get::<Vec<u8>, _>(2), &task_id)?;
            let attempts = r.get::<i64, _>(3) as u32;
            sqlx::query(
                "UPDATE a2a_push_streams SET lease_owner = ?, lease_until = ? \
                 WHERE task_id = ? AND config_id = ?",
            )
            .bind(owner)
            .bind(now_ms + lease_ms)
            .bind(&task_id)
            .bind(&config_id)
            .execute(&mut *tx)
            .await
            .map_err(|e| db_error(what, e))?;
            if let Some(n) = head(&mut tx, &task_id, config, attempts).await? {
                out.items.push(n);
            }
        }
        out.next_due_ms = if out.items.len() >= limit {
            Some(now_ms)
        } else {
            sqlx::query_scalar(
                "SELECT MIN(MAX(due_ms, lease_until)) FROM a2a_push_streams \
                 WHERE pending > 0 AND failing = 0 AND (due_ms > ? OR lease_until > ?)",
            )
            .bind(now_ms)
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
            "DELETE FROM a2a_push_outbox WHERE task_id = ? AND config_id = ? AND seq = ?",
        )
        .bind(task_id)
        .bind(config_id)
        .bind(delivered.seq as i64)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_error(what, e))?
        .rows_affected() as i64;
        let row = sqlx::query(
            "UPDATE a2a_push_streams SET pending = MAX(pending - ?, 0), attempts = 0, due_ms = 0 \
             WHERE task_id = ? AND config_id = ? RETURNING pending, lease_owner, config",
        )
        .bind(removed)
        .bind(task_id)
        .bind(config_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| db_error(what, e))?;
        let Some(row) = row else {
            tx.commit().await.map_err(|e| db_error(what, e))?;
            return Ok(None);
        };
        let pending: i64 = row.get(0);
        let lease_owner: String = row.get(1);
        let next = if pending == 0 {
            let sql = if delivered.is_final {
                "DELETE FROM a2a_push_streams WHERE task_id = ? AND config_id = ?"
            } else {
                "UPDATE a2a_push_streams SET lease_until = 0 WHERE task_id = ? AND config_id = ?"
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
                "UPDATE a2a_push_streams SET lease_until = ? WHERE task_id = ? AND config_id = ?",
            )
            .bind(now_ms + lease_ms)
            .bind(task_id)
            .bind(config_id)
            .execute(&mut *tx)
            .await
            .map_err(|e| db_error(what, e))?;
            let config = decode_config(&row.get::<Vec<u8>, _>(2), task_id)?;
            head(&mut tx, task_id, config, 0).await?
        } else {
            None
        };
        tx.commit().await.map_err(|e| db_error(what, e))?;
        Ok(next)
    }

    async fn retry(&self, owner: &str, failed: &Notification, due_ms: i64) -> A2aResult<()> {
        sqlx::query(
            "UPDATE a2a_push_streams SET attempts = ?, due_ms = ?, lease_until = 0 \
             WHERE task_id = ? AND config_id = ? AND lease_owner = ?",
        )
        .bind(i64::from(failed.attempts) + 1)
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
        let finals: Vec<i64> = sqlx::query_scalar(
            "DELETE FROM a2a_push_outbox WHERE task_id = ? AND config_id = ? RETURNING is_final",
        )
        .bind(task_id)
        .bind(config_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| db_error(what, e))?;
        let sql = if finals.iter().any(|f| *f != 0) {
            "DELETE FROM a2a_push_streams WHERE task_id = ? AND config_id = ?"
        } else {
            "UPDATE a2a_push_streams SET failing = 1, pending = 0, attempts = 0, lease_until = 0 \
             WHERE task_id = ? AND config_id = ?"
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
            "UPDATE a2a_push_streams SET config = ?, failing = 0 WHERE task_id = ? AND config_id = ?",
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
        let dropped =
            sqlx::query("DELETE FROM a2a_push_outbox WHERE task_id = ? AND config_id = ?")
                .bind(task_id)
                .bind(config_id)
                .execute(&mut *tx)
                .await
                .map_err(|e| db_error(what, e))?
                .rows_affected();
        sqlx::query("DELETE FROM a2a_push_streams WHERE task_id = ? AND config_id = ?")
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
        Ok(n as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sqlite_outbox_contract() {
        let outbox = SqliteOutbox::in_memory().await.unwrap();
        crate::push::outbox::conformance(&outbox).await;
    }

    #[tokio::test]
    async fn shares_a_file_with_the_task_store_and_survives_reopening() {
        use crate::store::{SqliteStore, TaskStore};
        let dir = std::env::temp_dir().join(format!("a2a-outbox-{}", agentwire_types::new_id()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("tasks.db");
        let store = SqliteStore::open(&db).await.unwrap();
        let outbox = SqliteOutbox::open(&db).await.unwrap();
        let cfg = TaskPushNotificationConfig {
            id: "c".into(),
            task_id: "t".into(),
            url: "http://127.0.0.1:9/".into(),
            token: "secret".into(),
            ..Default::default()
        };
        outbox
            .enqueue("t", std::slice::from_ref(&cfg), Bytes::from("one"), false)
            .await
            .unwrap();
        drop(outbox);
        drop(store);
        // Both reopen: neither migration bookkeeping trips over the other.
        let store = SqliteStore::open(&db).await.unwrap();
        let outbox = SqliteOutbox::open(&db).await.unwrap();
        assert!(store.list_push_configs("t").await.unwrap().is_empty());
        let l = outbox.lease("w", now_ms(), 1000, 10).await.unwrap();
        assert_eq!(l.items.len(), 1);
        assert_eq!(l.items[0].config, cfg);
        assert_eq!(l.items[0].body, "one");
        drop(outbox);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
