//! The SQLite ledger store: one file, migrations embedded in the binary.
//!
//! Protocol objects (tasks, messages, artifacts) are stored as their
//! ProtoJSON text next to the columns the ledger queries; the schema version
//! is SQLite's `user_version`, and each migration runs once, in a
//! transaction.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use agentwire_types::{Artifact, Message, Task, TaskState};
use chrono::{DateTime, SecondsFormat, Utc};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow};
use sqlx::{Row, SqlitePool};

use super::{ArtifactVersion, ContextRecord, LedgerError, LedgerResult, LedgerStore, TaskRecord};

/// The schema, one entry per version (never edit a published entry: add
/// one).
pub(super) const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE contexts (
    id          TEXT PRIMARY KEY,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE TABLE messages (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    context_id  TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    body        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    UNIQUE (context_id, message_id)
);
CREATE TABLE tasks (
    seq                  INTEGER PRIMARY KEY AUTOINCREMENT,
    id                   TEXT NOT NULL UNIQUE,
    context_id           TEXT NOT NULL,
    state                TEXT NOT NULL,
    body                 TEXT NOT NULL,
    refines_artifact_id  TEXT,
    created_at           TEXT NOT NULL,
    updated_at           TEXT NOT NULL
);
CREATE INDEX tasks_by_context ON tasks (context_id, seq);
CREATE INDEX tasks_by_state ON tasks (state);
CREATE TABLE artifact_versions (
    seq                   INTEGER PRIMARY KEY AUTOINCREMENT,
    artifact_id           TEXT NOT NULL UNIQUE,
    artifact_name         TEXT NOT NULL,
    task_id               TEXT NOT NULL,
    context_id            TEXT NOT NULL,
    previous_artifact_id  TEXT,
    accepted_by_user      INTEGER NOT NULL DEFAULT 0,
    created_at            TEXT NOT NULL,
    body                  TEXT NOT NULL
);
CREATE INDEX versions_by_context ON artifact_versions (context_id, artifact_name, seq);
"#,
    r#"
ALTER TABLE contexts ADD COLUMN agent TEXT;
CREATE INDEX contexts_by_update ON contexts (updated_at);
"#,
    // The task generation (A2A v1.1 draft): from the stored snapshot when
    // it has one (ProtoJSON writes an int64 as a string), else 0.
    r#"
ALTER TABLE tasks ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
UPDATE tasks SET generation = COALESCE(CAST(json_extract(body, '$.generation') AS INTEGER), 0);
"#,
];

/// Keeps the ledger in an SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

fn db_err(e: sqlx::Error) -> LedgerError {
    LedgerError::Storage(e.to_string())
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

fn parse_ts(s: &str) -> LedgerResult<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| LedgerError::Storage(format!("bad timestamp {s:?}: {e}")))
}

fn to_json<T: serde::Serialize>(v: &T) -> LedgerResult<String> {
    serde_json::to_string(v).map_err(|e| LedgerError::Storage(e.to_string()))
}

fn from_json<T: serde::de::DeserializeOwned>(s: &str) -> LedgerResult<T> {
    serde_json::from_str(s).map_err(|e| LedgerError::Storage(format!("corrupt row: {e}")))
}

impl SqliteStore {
    /// Opens (creating if needed) the database file and migrates it.
    ///
    /// Two processes opening the same new file at once can meet in a lock
    /// that SQLite answers with "database is locked" at once rather than
    /// waiting (switching the file to write-ahead logging, or the deadlock
    /// it avoids between two readers that both want to write); such an
    /// open is tried again, for up to ten seconds.
    pub async fn open(path: impl AsRef<Path>) -> LedgerResult<Self> {
        let options = SqliteConnectOptions::new()
            .filename(path.as_ref())
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true);
        crate::sqlite_open::open_patiently(
            || Self::connect(options.clone()),
            |e| matches!(e, Opening::Busy(_)),
        )
        .await
        .map_err(Into::into)
    }

    /// An in-memory SQLite database (for tests).
    pub async fn open_in_memory() -> LedgerResult<Self> {
        let options = SqliteConnectOptions::from_str("sqlite::memory:").map_err(db_err)?;
        Ok(Self::connect(options).await?)
    }

    async fn connect(options: SqliteConnectOptions) -> Result<Self, Opening> {
        // One connection: SQLite serialises writers anyway, and an
        // in-memory database exists per connection.
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await?;
        let store = Self { pool };
        store.migrate().await?;
        Ok(store)
    }

    /// The schema version of the file.
    pub async fn schema_version(&self) -> LedgerResult<i64> {
        sqlx::query_scalar("PRAGMA user_version")
            .fetch_one(&self.pool)
            .await
            .map_err(db_err)
    }

    /// Brings the file to the current schema. The version is read and the
    /// migrations run under one write lock (`BEGIN IMMEDIATE`), so two
    /// processes opening the same new file at once migrate it once.
    async fn migrate(&self) -> Result<(), Opening> {
        let mut conn = self.pool.acquire().await?;
        sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut *conn).await?;
        let applied = async {
            let current: i64 = sqlx::query_scalar("PRAGMA user_version")
                .fetch_one(&mut *conn)
                .await?;
            let current = usize::try_from(current).unwrap_or(0);
            if current > MIGRATIONS.len() {
                return Err(Opening::Other(LedgerError::Storage(format!(
                    "the ledger file has schema version {current}, newer than this library's {}",
                    MIGRATIONS.len()
                ))));
            }
            for (i, sql) in MIGRATIONS.iter().enumerate().skip(current) {
                sqlx::raw_sql(sql).execute(&mut *conn).await?;
                sqlx::raw_sql(&format!("PRAGMA user_version = {}", i + 1))
                    .execute(&mut *conn)
                    .await?;
            }
            Ok(())
        }
        .await;
        let end = if applied.is_ok() {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        let ended = sqlx::raw_sql(end).execute(&mut *conn).await;
        applied?;
        ended?;
        Ok(())
    }
}

/// Why an open failed: SQLite's busy answer (worth another try) or anything
/// else.
enum Opening {
    Busy(sqlx::Error),
    Other(LedgerError),
}

impl From<sqlx::Error> for Opening {
    fn from(e: sqlx::Error) -> Self {
        if crate::sqlite_open::is_busy(&e) {
            Opening::Busy(e)
        } else {
            Opening::Other(db_err(e))
        }
    }
}

impl From<Opening> for LedgerError {
    fn from(e: Opening) -> Self {
        match e {
            Opening::Busy(e) => db_err(e),
            Opening::Other(e) => e,
        }
    }
}

fn task_row(row: &SqliteRow) -> LedgerResult<TaskRecord> {
    let state: String = row.try_get("state").map_err(db_err)?;
    Ok(TaskRecord {
        id: row.try_get("id").map_err(db_err)?,
        context_id: row.try_get("context_id").map_err(db_err)?,
        state: TaskState::from_str_name(&state).unwrap_or(TaskState::Unspecified),
        task: from_json::<Task>(&row.try_get::<String, _>("body").map_err(db_err)?)?,
        refines_artifact_id: row.try_get("refines_artifact_id").map_err(db_err)?,
        generation: row.try_get("generation").map_err(db_err)?,
        created_at: parse_ts(&row.try_get::<String, _>("created_at").map_err(db_err)?)?,
        updated_at: parse_ts(&row.try_get::<String, _>("updated_at").map_err(db_err)?)?,
    })
}

fn version_row(row: &SqliteRow) -> LedgerResult<ArtifactVersion> {
    Ok(ArtifactVersion {
        artifact_id: row.try_get("artifact_id").map_err(db_err)?,
        artifact_name: row.try_get("artifact_name").map_err(db_err)?,
        task_id: row.try_get("task_id").map_err(db_err)?,
        context_id: row.try_get("context_id").map_err(db_err)?,
        previous_artifact_id: row.try_get("previous_artifact_id").map_err(db_err)?,
        accepted_by_user: row.try_get::<i64, _>("accepted_by_user").map_err(db_err)? != 0,
        created_at: parse_ts(&row.try_get::<String, _>("created_at").map_err(db_err)?)?,
        artifact: from_json::<Artifact>(&row.try_get::<String, _>("body").map_err(db_err)?)?,
    })
}

fn context_row(row: &SqliteRow) -> LedgerResult<ContextRecord> {
    Ok(ContextRecord {
        id: row.try_get("id").map_err(db_err)?,
        agent: row.try_get("agent").map_err(db_err)?,
        created_at: parse_ts(&row.try_get::<String, _>("created_at").map_err(db_err)?)?,
        updated_at: parse_ts(&row.try_get::<String, _>("updated_at").map_err(db_err)?)?,
    })
}

const TASK_COLUMNS: &str =
    "id, context_id, state, body, refines_artifact_id, generation, created_at, updated_at";
const VERSION_COLUMNS: &str = "artifact_id, artifact_name, task_id, context_id, \
     previous_artifact_id, accepted_by_user, created_at, body";

#[async_trait::async_trait]
impl LedgerStore for SqliteStore {
    async fn touch_context(&self, id: &str, at: DateTime<Utc>) -> LedgerResult<()> {
        sqlx::query(
            "INSERT INTO contexts (id, created_at, updated_at) VALUES (?1, ?2, ?2) \
             ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at",
        )
        .bind(id)
        .bind(ts(at))
        .execute(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn context(&self, id: &str) -> LedgerResult<Option<ContextRecord>> {
        let row =
            sqlx::query("SELECT id, agent, created_at, updated_at FROM contexts WHERE id = ?1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_err)?;
        row.as_ref().map(context_row).transpose()
    }

    async fn contexts(&self) -> LedgerResult<Vec<ContextRecord>> {
        let rows = sqlx::query(
            "SELECT id, agent, created_at, updated_at FROM contexts ORDER BY updated_at DESC, rowid DESC",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        rows.iter().map(context_row).collect()
    }

    async fn add_message(
        &self,
        context_id: &str,
        message: &Message,
        at: DateTime<Utc>,
    ) -> LedgerResult<()> {
        let id = if message.message_id.is_empty() {
            agentwire_types::new_id()
        } else {
            message.message_id.clone()
        };
        sqlx::query(
            "INSERT INTO messages (context_id, message_id, body, created_at) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (context_id, message_id) DO UPDATE SET body = excluded.body",
        )
        .bind(context_id)
        .bind(id)
        .bind(to_json(message)?)
        .bind(ts(at))
        .execute(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn messages(&self, context_id: &str) -> LedgerResult<Vec<Message>> {
        let rows: Vec<String> =
            sqlx::query_scalar("SELECT body FROM messages WHERE context_id = ?1 ORDER BY seq")
                .bind(context_id)
                .fetch_all(&self.pool)
                .await
                .map_err(db_err)?;
        rows.iter().map(|b| from_json(b)).collect()
    }

    async fn put_task(&self, r: &TaskRecord) -> LedgerResult<()> {
        sqlx::query(
            "INSERT INTO tasks (id, context_id, state, body, refines_artifact_id, created_at, updated_at, generation) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
             ON CONFLICT (id) DO UPDATE SET context_id = excluded.context_id, \
               state = excluded.state, body = excluded.body, \
               refines_artifact_id = COALESCE(excluded.refines_artifact_id, tasks.refines_artifact_id), \
               generation = MAX(excluded.generation, tasks.generation), \
               updated_at = excluded.updated_at",
        )
        .bind(&r.id)
        .bind(&r.context_id)
        .bind(r.state.as_str_name())
        .bind(to_json(&r.task)?)
        .bind(&r.refines_artifact_id)
        .bind(ts(r.created_at))
        .bind(ts(r.updated_at))
        .bind(r.generation)
        .execute(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn task(&self, id: &str) -> LedgerResult<Option<TaskRecord>> {
        let row = sqlx::query(&format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?;
        row.as_ref().map(task_row).transpose()
    }

    async fn tasks(&self, context_id: Option<&str>) -> LedgerResult<Vec<TaskRecord>> {
        let rows = match context_id {
            Some(c) => {
                sqlx::query(&format!(
                    "SELECT {TASK_COLUMNS} FROM tasks WHERE context_id = ?1 ORDER BY seq"
                ))
                .bind(c)
                .fetch_all(&self.pool)
                .await
            }
            None => {
                sqlx::query(&format!("SELECT {TASK_COLUMNS} FROM tasks ORDER BY seq"))
                    .fetch_all(&self.pool)
                    .await
            }
        }
        .map_err(db_err)?;
        rows.iter().map(task_row).collect()
    }

    async fn put_version(&self, v: &ArtifactVersion) -> LedgerResult<()> {
        sqlx::query(
            "INSERT INTO artifact_versions (artifact_id, artifact_name, task_id, context_id, \
               previous_artifact_id, accepted_by_user, created_at, body) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
             ON CONFLICT (artifact_id) DO UPDATE SET body = excluded.body, \
               artifact_name = excluded.artifact_name",
        )
        .bind(&v.artifact_id)
        .bind(&v.artifact_name)
        .bind(&v.task_id)
        .bind(&v.context_id)
        .bind(&v.previous_artifact_id)
        .bind(i64::from(v.accepted_by_user))
        .bind(ts(v.created_at))
        .bind(to_json(&v.artifact)?)
        .execute(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn version(&self, artifact_id: &str) -> LedgerResult<Option<ArtifactVersion>> {
        let row = sqlx::query(&format!(
            "SELECT {VERSION_COLUMNS} FROM artifact_versions WHERE artifact_id = ?1"
        ))
        .bind(artifact_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err)?;
        row.as_ref().map(version_row).transpose()
    }

    async fn versions(&self, context_id: &str) -> LedgerResult<Vec<ArtifactVersion>> {
        let rows = sqlx::query(&format!(
            "SELECT {VERSION_COLUMNS} FROM artifact_versions WHERE context_id = ?1 ORDER BY seq"
        ))
        .bind(context_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        rows.iter().map(version_row).collect()
    }

    async fn set_accepted(&self, artifact_id: &str) -> LedgerResult<()> {
        let mut tx = self.pool.begin().await.map_err(db_err)?;
        let done = sqlx::query(
            "UPDATE artifact_versions SET accepted_by_user = (artifact_id = ?1) \
             WHERE (context_id, artifact_name) IN \
               (SELECT context_id, artifact_name FROM artifact_versions WHERE artifact_id = ?1)",
        )
        .bind(artifact_id)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
        if done.rows_affected() == 0 {
            return Err(LedgerError::UnknownArtifact(artifact_id.to_owned()));
        }
        tx.commit().await.map_err(db_err)?;
        Ok(())
    }

    async fn set_context_agent(&self, id: &str, agent: &str) -> LedgerResult<()> {
        sqlx::query("UPDATE contexts SET agent = ?2 WHERE id = ?1")
            .bind(id)
            .bind(agent)
            .execute(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn retain_recent_contexts(&self, keep: usize) -> LedgerResult<usize> {
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        let old = "SELECT id FROM contexts ORDER BY updated_at DESC, rowid DESC LIMIT -1 OFFSET ?1";
        let mut tx = self.pool.begin().await.map_err(db_err)?;
        for table in ["messages", "tasks", "artifact_versions"] {
            sqlx::query(&format!("DELETE FROM {table} WHERE context_id IN ({old})"))
                .bind(keep)
                .execute(&mut *tx)
                .await
                .map_err(db_err)?;
        }
        let done = sqlx::query(&format!("DELETE FROM contexts WHERE id IN ({old})"))
            .bind(keep)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        tx.commit().await.map_err(db_err)?;
        Ok(usize::try_from(done.rows_affected()).unwrap_or(usize::MAX))
    }
}
