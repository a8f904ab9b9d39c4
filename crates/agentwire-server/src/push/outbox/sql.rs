//! The outbox in an SQL database, written once for SQLite and PostgreSQL
//! (what differs between them is their [`Dialect`]).
//!
//! Two tables: `a2a_push_streams`, one row per (task, config) with the
//! stream's delivery state (the next sequence number, whether it is
//! failing, the head's attempts and due time, the lease, how many
//! notifications wait), and `a2a_push_outbox`, the notifications in stream
//! order. Every change is one transaction. Claiming the due streams is one
//! statement that picks them with the dialect's [`Dialect::SKIP_LOCKED`]
//! (replicas sharing a PostgreSQL database split the work instead of waiting
//! for each other; SQLite has one writer at a time) and leases them.

use agentwire_types::{A2aError, A2aResult, TaskPushNotificationConfig};
use bytes::Bytes;
use prost::Message as _;

use super::{Leased, Notification};
use crate::store::sql::driver::{Conn, Dialect, SqlRow, Stmt};

// The statements. `$n` placeholders (see `store/sql/driver.rs`); the ones
// that filter on `failing` where a partial index does are made by
// `lease_sql` and `next_due_sql`.

/// The stream of a (task, config), if it is new.
const ENSURE_STREAM: &str = "INSERT INTO a2a_push_streams (task_id, config_id, config) \
     VALUES ($1, $2, $3) ON CONFLICT (task_id, config_id) DO NOTHING";
/// Takes the next sequence number of a stream that is not failing. The row
/// lock taken here orders the enqueues of one stream, whichever replica
/// makes them.
const NEXT_SEQ: &str = "UPDATE a2a_push_streams SET next_seq = next_seq + 1, \
     pending = pending + 1 WHERE task_id = $1 AND config_id = $2 AND failing = $3 \
     RETURNING next_seq - 1 AS seq";
const INSERT_NOTIFICATION: &str = "INSERT INTO a2a_push_outbox \
     (task_id, config_id, seq, id, body, is_final, created_ms) \
     VALUES ($1, $2, $3, $4, $5, $6, $7)";
const DELETE_STREAM: &str = "DELETE FROM a2a_push_streams WHERE task_id = $1 AND config_id = $2";
const HEAD: &str = "SELECT seq, id, body, is_final FROM a2a_push_outbox \
     WHERE task_id = $1 AND config_id = $2 ORDER BY seq LIMIT 1";
const DELETE_NOTIFICATION: &str =
    "DELETE FROM a2a_push_outbox WHERE task_id = $1 AND config_id = $2 AND seq = $3";
/// After an ack: `$1` notifications fewer, and the next head starts afresh.
const ACKED: &str = "UPDATE a2a_push_streams \
     SET pending = CASE WHEN pending > $1 THEN pending - $1 ELSE 0 END, attempts = 0, \
     due_ms = 0 WHERE task_id = $2 AND config_id = $3 RETURNING pending, lease_owner, config";
const RELEASE: &str =
    "UPDATE a2a_push_streams SET lease_until = 0 WHERE task_id = $1 AND config_id = $2";
const EXTEND: &str =
    "UPDATE a2a_push_streams SET lease_until = $1 WHERE task_id = $2 AND config_id = $3";
/// Only the lease's owner schedules a retry.
const RETRY: &str = "UPDATE a2a_push_streams SET attempts = $1, due_ms = $2, lease_until = 0 \
     WHERE task_id = $3 AND config_id = $4 AND lease_owner = $5";
const DELETE_QUEUED: &str =
    "DELETE FROM a2a_push_outbox WHERE task_id = $1 AND config_id = $2 RETURNING is_final";
const MARK_FAILING: &str = "UPDATE a2a_push_streams SET failing = $1, pending = 0, \
     attempts = 0, lease_until = 0 WHERE task_id = $2 AND config_id = $3";
const RESET: &str = "UPDATE a2a_push_streams SET config = $1, failing = $2 \
     WHERE task_id = $3 AND config_id = $4";
const PENDING: &str = "SELECT COUNT(*) AS n FROM a2a_push_outbox";

/// Leases the streams with something due that nobody holds, earliest due
/// first: `$1` now, `$2` how many, `$3` the owner, `$4` until when.
pub(super) fn lease_sql<D: Dialect>() -> String {
    format!(
        "WITH picked AS (SELECT task_id AS picked_task, config_id AS picked_config \
           FROM a2a_push_streams \
           WHERE pending > 0 AND failing = {false} AND due_ms <= $1 AND lease_until <= $1 \
           ORDER BY due_ms LIMIT $2{skip}) \
         UPDATE a2a_push_streams SET lease_owner = $3, lease_until = $4 \
         WHERE (task_id, config_id) IN (SELECT picked_task, picked_config FROM picked) \
         RETURNING task_id, config_id, config, attempts, due_ms",
        false = D::FALSE,
        skip = D::SKIP_LOCKED,
    )
}

/// When the earliest stream that waits (for its due time or for a lease to
/// expire) can be leased: `$1` now.
pub(super) fn next_due_sql<D: Dialect>() -> String {
    format!(
        "SELECT MIN(CASE WHEN due_ms > lease_until THEN due_ms ELSE lease_until END) \
           AS next_due FROM a2a_push_streams \
         WHERE pending > 0 AND failing = {false} AND (due_ms > $1 OR lease_until > $1)",
        false = D::FALSE,
    )
}

/// The error of a failed outbox statement.
fn fail<D: Dialect>(what: &str, e: D::Error) -> A2aError {
    D::error("push outbox", what, e)
}

/// A config as the outbox stores it (protobuf).
fn decode_config(blob: &[u8], task_id: &str) -> A2aResult<TaskPushNotificationConfig> {
    TaskPushNotificationConfig::decode(blob).map_err(|e| {
        A2aError::internal(format!(
            "push outbox: a stored config of task {task_id} cannot be decoded: {e}"
        ))
    })
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// The head of one stream (inside a transaction).
async fn head<C: Conn>(
    conn: &mut C,
    what: &str,
    task_id: &str,
    config: TaskPushNotificationConfig,
    attempts: u32,
) -> A2aResult<Option<Notification>> {
    let row = conn
        .fetch_optional(Stmt::new(HEAD).arg(task_id).arg(&config.id))
        .await
        .map_err(|e| A2aError::internal(format!("push outbox: {what} failed: {e}")))?;
    let Some(r) = row else {
        return Ok(None);
    };
    Ok(Some(Notification {
        task_id: task_id.to_owned(),
        seq: to_u64(r.i64("seq")?),
        id: r.text("id")?,
        body: Bytes::from(r.blob("body")?),
        is_final: r.flag("is_final")?,
        attempts,
        config,
    }))
}

/// The outbox's tables in one database.
#[derive(Debug, Clone)]
pub(super) struct SqlOutbox<D: Dialect> {
    pub pool: D::Pool,
}

impl<D: Dialect> SqlOutbox<D> {
    async fn begin(&self, what: &str) -> A2aResult<D::Tx> {
        D::begin(&self.pool).await.map_err(|e| fail::<D>(what, e))
    }

    async fn commit(tx: D::Tx, what: &str) -> A2aResult<()> {
        D::commit(tx).await.map_err(|e| fail::<D>(what, e))
    }

    /// [`super::PushOutbox::enqueue`].
    pub async fn enqueue(
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
        let now = super::now_ms();
        for c in configs {
            let blob = c.encode_to_vec();
            tx.execute(Stmt::new(ENSURE_STREAM).arg(task_id).arg(&c.id).arg(&blob))
                .await
                .map_err(|e| fail::<D>(what, e))?;
            let seq = tx
                .fetch_optional(Stmt::new(NEXT_SEQ).arg(task_id).arg(&c.id).arg(false))
                .await
                .map_err(|e| fail::<D>(what, e))?;
            match seq {
                Some(row) => {
                    let id = agentwire_types::new_id();
                    let s = Stmt::new(INSERT_NOTIFICATION)
                        .arg(task_id)
                        .arg(&c.id)
                        .arg(row.i64("seq")?)
                        .arg(&id)
                        .arg(body.as_ref())
                        .arg(is_final)
                        .arg(now);
                    tx.execute(s).await.map_err(|e| fail::<D>(what, e))?;
                }
                // A failing stream takes nothing; its final event forgets it.
                None if is_final => {
                    tx.execute(Stmt::new(DELETE_STREAM).arg(task_id).arg(&c.id))
                        .await
                        .map_err(|e| fail::<D>(what, e))?;
                }
                None => {}
            }
        }
        Self::commit(tx, what).await
    }

    /// [`super::PushOutbox::lease`].
    pub async fn lease(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
        limit: usize,
    ) -> A2aResult<Leased> {
        let what = "leasing notifications";
        let mut tx = self.begin(what).await?;
        let lease = Stmt::new(lease_sql::<D>())
            .arg(now_ms)
            .arg(i64::try_from(limit).unwrap_or(i64::MAX))
            .arg(owner)
            .arg(now_ms.saturating_add(lease_ms));
        let rows = tx.fetch_all(lease).await.map_err(|e| fail::<D>(what, e))?;
        let mut picked = Vec::with_capacity(rows.len());
        for r in rows {
            let task_id = r.text("task_id")?;
            let config = decode_config(&r.blob("config")?, &task_id)?;
            let attempts = u32::try_from(r.i32("attempts")?).unwrap_or(0);
            picked.push((r.i64("due_ms")?, task_id, config, attempts));
        }
        // Earliest due first, as the streams were picked.
        picked.sort_by_key(|p| p.0);
        let mut out = Leased::default();
        for (_, task_id, config, attempts) in picked {
            if let Some(n) = head(&mut tx, what, &task_id, config, attempts).await? {
                out.items.push(n);
            }
        }
        out.next_due_ms = if out.items.len() >= limit {
            Some(now_ms)
        } else {
            match tx
                .fetch_optional(Stmt::new(next_due_sql::<D>()).arg(now_ms))
                .await
                .map_err(|e| fail::<D>(what, e))?
            {
                Some(r) => r.opt_i64("next_due")?,
                None => None,
            }
        };
        Self::commit(tx, what).await?;
        Ok(out)
    }

    /// [`super::PushOutbox::ack`].
    pub async fn ack(
        &self,
        owner: &str,
        delivered: &Notification,
        now_ms: i64,
        lease_ms: i64,
    ) -> A2aResult<Option<Notification>> {
        let what = "acknowledging a notification";
        let (task_id, config_id) = (&delivered.task_id, &delivered.config.id);
        let mut tx = self.begin(what).await?;
        let removed = tx
            .execute(
                Stmt::new(DELETE_NOTIFICATION)
                    .arg(task_id)
                    .arg(config_id)
                    .arg(to_i64(delivered.seq)),
            )
            .await
            .map_err(|e| fail::<D>(what, e))?;
        let row = tx
            .fetch_optional(
                Stmt::new(ACKED)
                    .arg(to_i64(removed))
                    .arg(task_id)
                    .arg(config_id),
            )
            .await
            .map_err(|e| fail::<D>(what, e))?;
        let Some(row) = row else {
            Self::commit(tx, what).await?;
            return Ok(None);
        };
        let next = if row.i64("pending")? == 0 {
            // Nothing left: a stream whose final notification went is
            // forgotten, another one waits, unleased, for more.
            let sql = if delivered.is_final {
                DELETE_STREAM
            } else {
                RELEASE
            };
            tx.execute(Stmt::new(sql).arg(task_id).arg(config_id))
                .await
                .map_err(|e| fail::<D>(what, e))?;
            None
        } else if row.text("lease_owner")? == owner {
            // The next one, under the same lease.
            let until = now_ms.saturating_add(lease_ms);
            tx.execute(Stmt::new(EXTEND).arg(until).arg(task_id).arg(config_id))
                .await
                .map_err(|e| fail::<D>(what, e))?;
            let config = decode_config(&row.blob("config")?, task_id)?;
            head(&mut tx, what, task_id, config, 0).await?
        } else {
            None
        };
        Self::commit(tx, what).await?;
        Ok(next)
    }

    /// [`super::PushOutbox::retry`].
    pub async fn retry(&self, owner: &str, failed: &Notification, due_ms: i64) -> A2aResult<()> {
        let s = Stmt::new(RETRY)
            .arg(i32::try_from(failed.attempts.saturating_add(1)).unwrap_or(i32::MAX))
            .arg(due_ms)
            .arg(&failed.task_id)
            .arg(&failed.config.id)
            .arg(owner);
        D::on(&self.pool)
            .execute(s)
            .await
            .map_err(|e| fail::<D>("scheduling a retry", e))?;
        Ok(())
    }

    /// Deletes the notifications queued for a stream; whether each was the
    /// task's final one.
    async fn delete_queued(
        tx: &mut D::Tx,
        what: &str,
        task_id: &str,
        config_id: &str,
    ) -> A2aResult<Vec<bool>> {
        let rows = tx
            .fetch_all(Stmt::new(DELETE_QUEUED).arg(task_id).arg(config_id))
            .await
            .map_err(|e| fail::<D>(what, e))?;
        rows.iter().map(|r| r.flag("is_final")).collect()
    }

    /// [`super::PushOutbox::fail`].
    pub async fn fail(&self, task_id: &str, config_id: &str) -> A2aResult<u64> {
        let what = "marking a stream failing";
        let mut tx = self.begin(what).await?;
        let finals = Self::delete_queued(&mut tx, what, task_id, config_id).await?;
        // A stream whose final notification was dropped has ended.
        let s = if finals.iter().any(|f| *f) {
            Stmt::new(DELETE_STREAM).arg(task_id).arg(config_id)
        } else {
            Stmt::new(MARK_FAILING)
                .arg(true)
                .arg(task_id)
                .arg(config_id)
        };
        tx.execute(s).await.map_err(|e| fail::<D>(what, e))?;
        Self::commit(tx, what).await?;
        Ok(finals.len() as u64)
    }

    /// [`super::PushOutbox::reset`].
    pub async fn reset(&self, config: &TaskPushNotificationConfig) -> A2aResult<()> {
        let blob = config.encode_to_vec();
        let s = Stmt::new(RESET)
            .arg(&blob)
            .arg(false)
            .arg(&config.task_id)
            .arg(&config.id);
        D::on(&self.pool)
            .execute(s)
            .await
            .map_err(|e| fail::<D>("resetting a stream", e))?;
        Ok(())
    }

    /// [`super::PushOutbox::remove`].
    pub async fn remove(&self, task_id: &str, config_id: &str) -> A2aResult<u64> {
        let what = "removing a stream";
        let mut tx = self.begin(what).await?;
        let dropped = Self::delete_queued(&mut tx, what, task_id, config_id)
            .await?
            .len() as u64;
        tx.execute(Stmt::new(DELETE_STREAM).arg(task_id).arg(config_id))
            .await
            .map_err(|e| fail::<D>(what, e))?;
        Self::commit(tx, what).await?;
        Ok(dropped)
    }

    /// [`super::PushOutbox::pending`].
    pub async fn pending(&self) -> A2aResult<u64> {
        let what = "counting notifications";
        let row = D::on(&self.pool)
            .fetch_optional(Stmt::new(PENDING))
            .await
            .map_err(|e| fail::<D>(what, e))?;
        Ok(match row {
            Some(r) => to_u64(r.i64("n")?),
            None => 0,
        })
    }
}

/// Implements [`super::PushOutbox`] for an outbox type by calling its
/// `sql` (a [`SqlOutbox`]).
macro_rules! outbox_on_sql {
    ($outbox:ty) => {
        #[async_trait::async_trait]
        impl $crate::push::outbox::PushOutbox for $outbox {
            async fn enqueue(
                &self,
                task_id: &str,
                configs: &[agentwire_types::TaskPushNotificationConfig],
                body: bytes::Bytes,
                is_final: bool,
            ) -> agentwire_types::A2aResult<()> {
                self.sql.enqueue(task_id, configs, body, is_final).await
            }

            async fn lease(
                &self,
                owner: &str,
                now_ms: i64,
                lease_ms: i64,
                limit: usize,
            ) -> agentwire_types::A2aResult<$crate::push::outbox::Leased> {
                self.sql.lease(owner, now_ms, lease_ms, limit).await
            }

            async fn ack(
                &self,
                owner: &str,
                delivered: &$crate::push::outbox::Notification,
                now_ms: i64,
                lease_ms: i64,
            ) -> agentwire_types::A2aResult<Option<$crate::push::outbox::Notification>> {
                self.sql.ack(owner, delivered, now_ms, lease_ms).await
            }

            async fn retry(
                &self,
                owner: &str,
                failed: &$crate::push::outbox::Notification,
                due_ms: i64,
            ) -> agentwire_types::A2aResult<()> {
                self.sql.retry(owner, failed, due_ms).await
            }

            async fn fail(
                &self,
                task_id: &str,
                config_id: &str,
            ) -> agentwire_types::A2aResult<u64> {
                self.sql.fail(task_id, config_id).await
            }

            async fn reset(
                &self,
                config: &agentwire_types::TaskPushNotificationConfig,
            ) -> agentwire_types::A2aResult<()> {
                self.sql.reset(config).await
            }

            async fn remove(
                &self,
                task_id: &str,
                config_id: &str,
            ) -> agentwire_types::A2aResult<u64> {
                self.sql.remove(task_id, config_id).await
            }

            async fn pending(&self) -> agentwire_types::A2aResult<u64> {
                self.sql.pending().await
            }
        }
    };
}
pub(super) use outbox_on_sql;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sql::driver::assert_placeholders_in_order;

    #[test]
    fn placeholders_first_appear_in_order() {
        for sql in [
            ENSURE_STREAM,
            NEXT_SEQ,
            INSERT_NOTIFICATION,
            DELETE_STREAM,
            HEAD,
            DELETE_NOTIFICATION,
            ACKED,
            RELEASE,
            EXTEND,
            RETRY,
            DELETE_QUEUED,
            MARK_FAILING,
            RESET,
        ] {
            assert_placeholders_in_order(sql);
        }
        #[cfg(feature = "sqlite")]
        {
            use crate::store::sql::sqlite::Sqlite;
            assert_placeholders_in_order(&lease_sql::<Sqlite>());
            assert_placeholders_in_order(&next_due_sql::<Sqlite>());
        }
    }
}
