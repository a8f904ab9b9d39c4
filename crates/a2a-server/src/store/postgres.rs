//! The PostgreSQL task store: durable tasks shared by several replicas.

use std::time::Duration;

use a2a_types::{A2aError, A2aResult, Task, TaskPushNotificationConfig, TaskState};
use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use super::sql::{self, Stored, TaskRow};
use super::{Owner, StoredTask, TaskPage, TaskQuery, TaskStore, TaskUpdate, apply_update};

/// Connections of the pool made by [`PostgresStore::connect`].
const DEFAULT_CONNECTIONS: u32 = 16;

/// A [`TaskStore`] in PostgreSQL, for running several replicas of a server
/// behind a load balancer: every replica sees every task.
///
/// The tables (`a2a_tasks`, `a2a_push_configs`) are created or upgraded
/// when the store connects (migrations embedded in the binary, run under
/// PostgreSQL's advisory lock, so replicas starting together are safe). They
/// live in the first schema of the connection's `search_path`; when the
/// database also holds an application that runs its own sqlx migrations,
/// give the store a schema of its own (for example
/// `postgres://.../db?options=-csearch_path%3Da2a` after
/// `CREATE SCHEMA a2a`), as both would share one `_sqlx_migrations` table.
///
/// Two replicas never both apply conflicting updates to one task: an
/// update reads the task with its version, applies [`apply_update`] and
/// writes it back only if the version is unchanged (`UPDATE ... WHERE
/// version = $v`); on a conflict it redoes the whole step in a transaction
/// holding the row lock (`SELECT ... FOR UPDATE`), so it can neither lose
/// the other update nor starve.
///
/// ```no_run
/// use a2a_server::store::PostgresStore;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> a2a_server::A2aResult<()> {
/// let store = PostgresStore::connect("postgres://a2a:secret@127.0.0.1:5432/a2a").await?;
/// # let _ = store;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db`,
    /// with any of libpq's parameters such as `sslmode`) with a pool of 16
    /// connections, and brings the schema up to date.
    pub async fn connect(url: &str) -> A2aResult<Self> {
        let options: PgConnectOptions = url
            .parse()
            .map_err(|e| A2aError::internal(format!("task store: bad PostgreSQL URL: {e}")))?;
        Self::connect_with(
            PgPoolOptions::new().max_connections(DEFAULT_CONNECTIONS),
            options,
        )
        .await
    }

    /// Connects with explicit pool and connection options (pool size,
    /// timeouts, TLS, `search_path`...), and brings the schema up to date.
    pub async fn connect_with(pool: PgPoolOptions, options: PgConnectOptions) -> A2aResult<Self> {
        let pool = pool
            .connect_with(options)
            .await
            .map_err(|e| sql::db_error("connecting to PostgreSQL", e))?;
        Self::from_pool(pool).await
    }

    /// A store on an existing pool; brings the schema up to date.
    pub async fn from_pool(pool: PgPool) -> A2aResult<Self> {
        let mut migrator = sqlx::migrate!("./migrations/postgres");
        // Tolerate other migrations recorded in the same table (an
        // application sharing the schema).
        migrator.set_ignore_missing(true);
        migrator.run(&pool).await.map_err(|e| {
            A2aError::internal(format!("task store: migrating the PostgreSQL schema: {e}"))
        })?;
        Ok(Self { pool })
    }

    /// The connection pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Applies an update holding the task's row lock (the slow path, after a
    /// conflict).
    async fn update_locked(&self, task_id: &str, update: TaskUpdate) -> A2aResult<TaskState> {
        let what = || format!("updating task {task_id}");
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(|e| sql::db_error(&what(), e))?;
        let row = sqlx::query(
            "SELECT version, head, history, artifacts FROM a2a_tasks WHERE id = $1 FOR UPDATE",
        )
        .bind(task_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| sql::db_error(&what(), e))?
        .ok_or_else(|| A2aError::task_not_found(task_id))?;
        let old = Stored::from_row(&row, task_id)?;
        let mut task = old.task(task_id)?;
        apply_update(&mut task, update)?;
        let state = task.state();
        let new = TaskRow::encode(task);
        sql::update_query(&new, &old, sql::now_millis(), None)
            .build()
            .execute(&mut *tx)
            .await
            .map_err(|e| sql::db_error(&what(), e))?;
        tx.commit().await.map_err(|e| sql::db_error(&what(), e))?;
        Ok(state)
    }
}

#[async_trait]
impl TaskStore for PostgresStore {
    async fn create(&self, owner: &Owner, task: Task) -> A2aResult<()> {
        let row = TaskRow::encode(task);
        let now = sql::now_millis();
        let result = sqlx::query(
            "INSERT INTO a2a_tasks (id, context_id, owner_tenant, owner_principal, state, \
             status_millis, has_status_time, head, history, artifacts, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)",
        )
        .bind(&row.id)
        .bind(&row.context_id)
        .bind(&owner.tenant)
        .bind(&owner.principal)
        .bind(row.state)
        .bind(row.status_millis)
        .bind(row.has_status_time)
        .bind(&row.head)
        .bind(&row.history)
        .bind(&row.artifacts)
        .bind(now)
        .execute(&self.pool)
        .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) if sql::is_unique_violation(&e) => Err(sql::duplicate(&row.id)),
            Err(e) => Err(sql::db_error(&format!("creating task {}", row.id), e)),
        }
    }

    async fn update(&self, task_id: &str, update: TaskUpdate) -> A2aResult<TaskState> {
        // Fast path (two round trips, no transaction): read, apply, write
        // back if the version is unchanged. Within a replica the runtime
        // serialises the updates of a task, so a conflict needs another
        // replica (or a caller bypassing the runtime); the slow path then
        // redoes the step under the row lock.
        let what = || format!("updating task {task_id}");
        let row =
            sqlx::query("SELECT version, head, history, artifacts FROM a2a_tasks WHERE id = $1")
                .bind(task_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(|e| sql::db_error(&what(), e))?
                .ok_or_else(|| A2aError::task_not_found(task_id))?;
        let old = Stored::from_row(&row, task_id)?;
        let mut task = old.task(task_id)?;
        apply_update(&mut task, update.clone())?;
        let state = task.state();
        let new = TaskRow::encode(task);
        let written = sql::update_query(&new, &old, sql::now_millis(), Some(old.version))
            .build()
            .execute(&self.pool)
            .await
            .map_err(|e| sql::db_error(&what(), e))?
            .rows_affected();
        if written == 1 {
            return Ok(state);
        }
        self.update_locked(task_id, update).await
    }

    async fn get(
        &self,
        task_id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<StoredTask>> {
        let what = || format!("reading task {task_id}");
        let Some(row) = sqlx::query(
            "SELECT owner_tenant, owner_principal, head, history, artifacts \
             FROM a2a_tasks WHERE id = $1",
        )
        .bind(task_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| sql::db_error(&what(), e))?
        else {
            return Ok(None);
        };
        sql::stored_task(&row, task_id, history_length).map(Some)
    }

    async fn list(&self, owner: &Owner, query: &TaskQuery) -> A2aResult<TaskPage> {
        let what = "listing tasks";
        // One statement, so the page and the total come from one snapshot.
        let rows = sql::page_query::<sqlx::Postgres>(owner, query, "NULL::bytea")
            .build()
            .fetch_all(&self.pool)
            .await
            .map_err(|e| sql::db_error(what, e))?;
        let rows = rows
            .iter()
            .map(|r| sql::page_row(r, query.history_length))
            .collect::<A2aResult<Vec<_>>>()?;
        let total = match rows.first() {
            Some(r) => r.total,
            None => sql::count_query::<sqlx::Postgres>(owner, query)
                .build_query_scalar::<i64>()
                .fetch_one(&self.pool)
                .await
                .map_err(|e| sql::db_error(what, e))?,
        };
        Ok(sql::assemble_page(
            rows,
            query.page_size,
            sql::count(total)?,
        ))
    }

    async fn put_push_config(&self, config: &TaskPushNotificationConfig) -> A2aResult<()> {
        sqlx::query(
            "INSERT INTO a2a_push_configs (task_id, id, config) VALUES ($1, $2, $3) \
             ON CONFLICT (task_id, id) DO UPDATE SET config = excluded.config",
        )
        .bind(&config.task_id)
        .bind(&config.id)
        .bind(sql::encode_push(config))
        .execute(&self.pool)
        .await
        .map_err(|e| {
            sql::db_error(
                &format!(
                    "storing push-notification config {} of task {}",
                    config.id, config.task_id
                ),
                e,
            )
        })?;
        Ok(())
    }

    async fn get_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> A2aResult<Option<TaskPushNotificationConfig>> {
        let what = || format!("reading push-notification config {id} of task {task_id}");
        let bytes: Option<Vec<u8>> = sqlx::query_scalar(
            "SELECT config FROM a2a_push_configs WHERE task_id = $1 AND id = $2",
        )
        .bind(task_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| sql::db_error(&what(), e))?;
        bytes.map(|b| sql::decode_push(task_id, id, &b)).transpose()
    }

    async fn list_push_configs(&self, task_id: &str) -> A2aResult<Vec<TaskPushNotificationConfig>> {
        let what = || format!("listing push-notification configs of task {task_id}");
        let rows: Vec<(String, Vec<u8>)> = sqlx::query_as(
            "SELECT id, config FROM a2a_push_configs WHERE task_id = $1 ORDER BY seq",
        )
        .bind(task_id)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| sql::db_error(&what(), e))?;
        rows.iter()
            .map(|(id, b)| sql::decode_push(task_id, id, b))
            .collect()
    }

    async fn delete_push_config(&self, task_id: &str, id: &str) -> A2aResult<bool> {
        let n = sqlx::query("DELETE FROM a2a_push_configs WHERE task_id = $1 AND id = $2")
            .bind(task_id)
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(|e| {
                sql::db_error(
                    &format!("deleting push-notification config {id} of task {task_id}"),
                    e,
                )
            })?
            .rows_affected();
        Ok(n > 0)
    }

    async fn unfinished(&self) -> A2aResult<Vec<StoredTask>> {
        let what = "reading unfinished tasks";
        let rows = sqlx::query(
            "SELECT id, owner_tenant, owner_principal, head, history, artifacts \
             FROM a2a_tasks WHERE state IN (1, 2)",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(|e| sql::db_error(what, e))?;
        rows.iter()
            .map(|row| {
                let id: String =
                    sqlx::Row::try_get(row, "id").map_err(|e| sql::db_error(what, e))?;
                sql::stored_task(row, &id, None)
            })
            .collect()
    }

    /// Deletes in batches of a few hundred tasks, each batch one
    /// transaction (rows another replica is purging are skipped, not
    /// waited for); `age` is measured by this replica's clock against the
    /// time a task last changed (when it became terminal).
    async fn purge_terminal_older_than(&self, age: Duration) -> A2aResult<u64> {
        let cutoff = sql::purge_cutoff(age);
        let delete_tasks = format!(
            "DELETE FROM a2a_tasks WHERE id IN (SELECT id FROM a2a_tasks \
             WHERE state IN {} AND updated_at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING id",
            sql::TERMINAL_STATES_SQL
        );
        let what = "purging terminal tasks";
        let mut purged = 0;
        loop {
            let mut tx = self
                .pool
                .begin()
                .await
                .map_err(|e| sql::db_error(what, e))?;
            let ids: Vec<String> = sqlx::query_scalar(&delete_tasks)
                .bind(cutoff)
                .bind(sql::PURGE_BATCH)
                .fetch_all(&mut *tx)
                .await
                .map_err(|e| sql::db_error(what, e))?;
            if !ids.is_empty() {
                sql::delete_push_query::<sqlx::Postgres>(&ids)
                    .build()
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| sql::db_error(what, e))?;
            }
            tx.commit().await.map_err(|e| sql::db_error(what, e))?;
            purged += ids.len() as u64;
            if (ids.len() as i64) < sql::PURGE_BATCH {
                return Ok(purged);
            }
        }
    }
}
