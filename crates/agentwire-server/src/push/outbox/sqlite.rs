//! The SQLite push outbox: notifications survive a restart of the server.
//!
//! It opens its own connection to a database file, typically the one the
//! [`crate::store::SqliteStore`] uses (write-ahead logging lets both work
//! on one file), and keeps its schema version in its own table
//! (`a2a_push_schema`), so the two schemas evolve independently. The
//! migrations are embedded from `migrations/push_sqlite/`.

use std::path::Path;

use agentwire_types::A2aResult;
use sqlx::sqlite::SqlitePool;

use super::now_ms;
use super::sql::{SqlOutbox, outbox_on_sql};
use crate::store::sql::driver::{Conn, Dialect, SqlRow, Stmt};
use crate::store::sql::sqlite::{self as dialect, Sqlite};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/push_sqlite");

const AREA: &str = "push outbox";

/// A [`PushOutbox`](super::PushOutbox) in an SQLite database file.
///
/// Every change is one transaction (`BEGIN IMMEDIATE`), committed with
/// `synchronous = NORMAL` in WAL mode: an enqueued notification survives a
/// crash of the process. One process at a time uses the file (its lock,
/// shared with the task store of that process); leases would keep several
/// from delivering the same stream at once all the same.
#[derive(Debug, Clone)]
pub struct SqliteOutbox {
    sql: SqlOutbox<Sqlite>,
    /// The file's lock, shared with the task store of this process on the
    /// same file (`None` in memory).
    _lock: Option<std::sync::Arc<crate::store::sql::lock::FileLock>>,
}

outbox_on_sql!(SqliteOutbox);

impl SqliteOutbox {
    /// Opens (creating it if needed) the database file at `path` and brings
    /// the outbox schema up to date. `path` may be the task store's file.
    ///
    /// As the task store, it takes the file's lock (`PATH.lock`; see
    /// [`SqliteStore::open`](crate::store::SqliteStore::open)), shared with
    /// the store of this process on the same file: another process's
    /// server cannot use it meanwhile.
    pub async fn open(path: impl AsRef<Path>) -> A2aResult<Self> {
        let lock = crate::store::sql::lock::lock(AREA, path.as_ref())?;
        let pool = dialect::file_pool(AREA, path.as_ref(), 1).await?;
        Self::migrate(&pool).await?;
        Ok(Self {
            sql: SqlOutbox { pool },
            _lock: Some(lock),
        })
    }

    /// A private outbox in memory (for tests).
    pub async fn in_memory() -> A2aResult<Self> {
        let pool = dialect::in_memory_pool(AREA).await?;
        Self::migrate(&pool).await?;
        Ok(Self {
            sql: SqlOutbox { pool },
            _lock: None,
        })
    }

    /// Applies the embedded migrations not yet recorded in
    /// `a2a_push_schema`, in one transaction.
    async fn migrate(pool: &SqlitePool) -> A2aResult<()> {
        let what = "migrating the schema";
        let fail = |e| Sqlite::error(AREA, what, e);
        let mut tx = Sqlite::begin(pool).await.map_err(fail)?;
        tx.execute(Stmt::new(
            "CREATE TABLE IF NOT EXISTS a2a_push_schema (version INTEGER PRIMARY KEY, \
             description TEXT NOT NULL, applied_ms INTEGER NOT NULL)",
        ))
        .await
        .map_err(fail)?;
        let applied = tx
            .fetch_all(Stmt::new("SELECT version FROM a2a_push_schema"))
            .await
            .map_err(fail)?
            .iter()
            .map(|r| r.i64("version"))
            .collect::<A2aResult<Vec<_>>>()?;
        for m in MIGRATOR.iter() {
            if m.migration_type.is_down_migration() || applied.contains(&m.version) {
                continue;
            }
            sqlx::raw_sql(&m.sql).execute(&mut *tx).await.map_err(|e| {
                let what = format!("migration {} ({})", m.version, m.description);
                Sqlite::error(AREA, &what, e)
            })?;
            tx.execute(
                Stmt::new(
                    "INSERT INTO a2a_push_schema (version, description, applied_ms) \
                     VALUES ($1, $2, $3)",
                )
                .arg(m.version)
                .arg(&*m.description)
                .arg(now_ms()),
            )
            .await
            .map_err(fail)?;
        }
        Sqlite::commit(tx).await.map_err(fail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::push::outbox::PushOutbox;
    use agentwire_types::TaskPushNotificationConfig;
    use bytes::Bytes;

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

    /// Rows as the outbox wrote them before its statements were shared
    /// with PostgreSQL's (flags as the integers 0 and 1) read as before.
    #[tokio::test]
    async fn reads_rows_written_by_the_earlier_statements() {
        use prost::Message as _;
        let outbox = SqliteOutbox::in_memory().await.unwrap();
        let cfg = TaskPushNotificationConfig {
            id: "c".into(),
            task_id: "t".into(),
            url: "http://127.0.0.1:9/".into(),
            ..Default::default()
        };
        let pool = &outbox.sql.pool;
        sqlx::query(
            "INSERT INTO a2a_push_streams (task_id, config_id, config, next_seq, failing, pending) \
             VALUES ('t', 'c', ?, 2, 0, 1)",
        )
        .bind(cfg.encode_to_vec())
        .execute(pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO a2a_push_outbox (task_id, config_id, seq, id, body, is_final, created_ms) \
             VALUES ('t', 'c', 1, 'n1', x'6f6e65', 1, 0)",
        )
        .execute(pool)
        .await
        .unwrap();
        let l = outbox.lease("w", now_ms(), 1000, 10).await.unwrap();
        assert_eq!(l.items.len(), 1);
        let n = &l.items[0];
        assert_eq!((n.seq, n.id.as_str(), n.is_final), (1, "n1", true));
        assert_eq!(n.body, "one");
        assert_eq!(n.config, cfg);
        assert_eq!(outbox.ack("w", n, now_ms(), 1000).await.unwrap(), None);
        assert_eq!(outbox.pending().await.unwrap(), 0);
        let streams: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM a2a_push_streams")
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(
            streams, 0,
            "a stream whose final notification went is forgotten"
        );
        // A failing stream as written then (failing = 1) takes nothing.
        sqlx::query(
            "INSERT INTO a2a_push_streams (task_id, config_id, config, failing) \
             VALUES ('t', 'c', x'', 1)",
        )
        .execute(pool)
        .await
        .unwrap();
        outbox
            .enqueue("t", std::slice::from_ref(&cfg), Bytes::from("x"), false)
            .await
            .unwrap();
        assert_eq!(outbox.pending().await.unwrap(), 0);
    }

    /// Claiming due streams uses the partial index of the streams with
    /// something to deliver (SQLite uses one only when the query repeats
    /// its condition to the letter: `failing = 0`).
    #[tokio::test]
    async fn leasing_uses_the_index_of_due_streams() {
        let outbox = SqliteOutbox::in_memory().await.unwrap();
        let lease = super::super::sql::lease_sql::<Sqlite>();
        let next_due = super::super::sql::next_due_sql::<Sqlite>();
        for (sql, args) in [(lease, 4), (next_due, 1)] {
            let explain = format!("EXPLAIN QUERY PLAN {sql}");
            let mut q = sqlx::query(&explain);
            for _ in 0..args {
                q = q.bind(0i64);
            }
            let plan: Vec<String> = q
                .fetch_all(&outbox.sql.pool)
                .await
                .unwrap()
                .iter()
                .map(|r| sqlx::Row::get::<String, _>(r, "detail"))
                .collect();
            assert!(
                plan.iter().any(|d| d.contains("a2a_push_streams_due")),
                "{plan:?} for {sql}"
            );
        }
    }
}
