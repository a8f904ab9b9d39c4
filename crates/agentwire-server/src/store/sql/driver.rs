//! What the SQL layer needs from a database, and the one place that says it
//! for each database ([`Dialect`], implemented by `sqlite.rs` and
//! `postgres/mod.rs`).
//!
//! The stores and outboxes write their statements once, as text with
//! numbered placeholders (`$1`, `$2`, ...; PostgreSQL's form, which SQLite
//! also accepts) and a list of [`Arg`]s, and read answers through
//! [`SqlRow`]. Only [`Conn`] executes them. The statements, their
//! arguments and the row encoding therefore do not depend on the driver:
//! another way of executing them (for example a dedicated writer thread
//! with its own SQLite driver) implements [`Conn`] and reuses the rest.
//!
//! In a statement written once, a placeholder first appears after every
//! lower-numbered one (a unit test checks it), so that binding by position
//! and binding by name agree.

use std::borrow::Cow;
use std::fmt::Debug;
use std::future::Future;

use agentwire_types::{A2aError, A2aResult};

/// A value bound to a statement's placeholder.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Arg<'a> {
    Text(&'a str),
    I64(i64),
    I32(i32),
    Bool(bool),
    Blob(&'a [u8]),
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(v: &'a str) -> Self {
        Arg::Text(v)
    }
}
impl<'a> From<&'a String> for Arg<'a> {
    fn from(v: &'a String) -> Self {
        Arg::Text(v)
    }
}
impl From<i64> for Arg<'_> {
    fn from(v: i64) -> Self {
        Arg::I64(v)
    }
}
impl From<i32> for Arg<'_> {
    fn from(v: i32) -> Self {
        Arg::I32(v)
    }
}
impl From<bool> for Arg<'_> {
    fn from(v: bool) -> Self {
        Arg::Bool(v)
    }
}
impl<'a> From<&'a [u8]> for Arg<'a> {
    fn from(v: &'a [u8]) -> Self {
        Arg::Blob(v)
    }
}
impl<'a> From<&'a Vec<u8>> for Arg<'a> {
    fn from(v: &'a Vec<u8>) -> Self {
        Arg::Blob(v)
    }
}

/// A statement: its text and the values of its placeholders, in order.
///
/// Written by hand rather than with `sqlx::QueryBuilder`, whose output
/// depends on the driver's type: this one is the same text for every
/// database and every way of executing it.
#[derive(Debug, Clone)]
pub(crate) struct Stmt<'a> {
    sql: Cow<'a, str>,
    args: Vec<Arg<'a>>,
}

impl<'a> Stmt<'a> {
    /// A statement of fixed text (its placeholders are then given by
    /// [`Stmt::arg`], in order).
    pub fn new(sql: impl Into<Cow<'a, str>>) -> Self {
        Self {
            sql: sql.into(),
            args: Vec::new(),
        }
    }

    /// The value of the next placeholder.
    pub fn arg(mut self, v: impl Into<Arg<'a>>) -> Self {
        self.args.push(v.into());
        self
    }

    /// Appends text (building a statement piece by piece).
    pub fn push(&mut self, sql: &str) -> &mut Self {
        self.sql.to_mut().push_str(sql);
        self
    }

    /// Appends the next placeholder (`$n`) with its value.
    pub fn bind(&mut self, v: impl Into<Arg<'a>>) -> &mut Self {
        self.args.push(v.into());
        let n = self.args.len();
        self.sql.to_mut().push_str(&format!("${n}"));
        self
    }

    /// The text.
    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// The values of the placeholders, in order.
    pub fn args(&self) -> &[Arg<'a>] {
        &self.args
    }
}

/// A row of an answer: its columns by name. A column that cannot be read
/// as asked is an internal error (the schema is not what the code expects).
pub(crate) trait SqlRow: Send {
    fn text(&self, col: &str) -> A2aResult<String>;
    fn i64(&self, col: &str) -> A2aResult<i64>;
    fn opt_i64(&self, col: &str) -> A2aResult<Option<i64>>;
    fn i32(&self, col: &str) -> A2aResult<i32>;
    fn flag(&self, col: &str) -> A2aResult<bool>;
    fn blob(&self, col: &str) -> A2aResult<Vec<u8>>;
    fn opt_blob(&self, col: &str) -> A2aResult<Option<Vec<u8>>>;
}

/// The error for a column that cannot be read.
pub(crate) fn column_error(col: &str, e: impl std::fmt::Display) -> A2aError {
    A2aError::internal(format!("reading column {col} of a stored row failed: {e}"))
}

/// Something that executes statements: a pool (each statement on any of
/// its connections) or a transaction.
pub(crate) trait Conn: Send {
    type Row: SqlRow;
    /// The driver's error.
    type Error: std::fmt::Display + Send;
    /// Runs a statement; the number of rows it changed.
    fn execute(&mut self, s: Stmt<'_>) -> impl Future<Output = Result<u64, Self::Error>> + Send;
    /// Runs a statement; its first row, if any.
    fn fetch_optional(
        &mut self,
        s: Stmt<'_>,
    ) -> impl Future<Output = Result<Option<Self::Row>, Self::Error>> + Send;
    /// Runs a statement; all its rows.
    fn fetch_all(
        &mut self,
        s: Stmt<'_>,
    ) -> impl Future<Output = Result<Vec<Self::Row>, Self::Error>> + Send;
}

/// What differs between the databases: a few pieces of SQL, connections,
/// transactions and the mapping of errors. Everything else (the statements'
/// meaning, the row encoding, the order of steps) is written once against
/// this trait.
pub(crate) trait Dialect: Debug + Clone + Send + Sync + 'static {
    /// A row of an answer.
    type Row: SqlRow;
    /// The driver's error.
    type Error: std::fmt::Display + Send;
    /// A pool of connections.
    type Pool: Debug + Clone + Send + Sync + 'static;
    /// A statement on the pool.
    type On<'p>: Conn<Row = Self::Row, Error = Self::Error>;
    /// A write transaction.
    type Tx: Conn<Row = Self::Row, Error = Self::Error>;

    /// Appended to a `SELECT` of rows that the transaction goes on to
    /// update: PostgreSQL locks them; SQLite's `BEGIN IMMEDIATE` already
    /// holds the database's one write lock.
    const LOCK_ROWS: &'static str;
    /// Appended to a `SELECT` that picks rows to claim or delete: PostgreSQL
    /// skips the rows another transaction holds (so replicas split the
    /// work); SQLite has one writer at a time.
    const SKIP_LOCKED: &'static str;
    /// A `NULL` in a blob column's place (PostgreSQL wants its type).
    const NULL_BLOB: &'static str;
    /// The literal `false` of a flag column, as the partial indexes spell
    /// it (SQLite keeps flags as integers, and uses a partial index only
    /// when a query repeats its condition to the letter).
    const FALSE: &'static str;
    /// `state` is a terminal state (completed 3, failed 4, canceled 5,
    /// rejected 7), as the partial index `a2a_tasks_terminal_updated`
    /// spells it: a query repeats it to the letter to use the index.
    const TERMINAL: &'static str;
    /// `state` is an open state (submitted 1, working 2, input-required 6,
    /// auth-required 8), as the partial index `a2a_tasks_open` spells it.
    const OPEN: &'static str;
    /// The tables whose rows (by `task_id`) are deleted with their task.
    const TASK_TABLES: &'static [&'static str];
    /// Whether the task counters (`a2a_task_counts`, `a2a_context_counts`)
    /// are kept, and listings read their totals from them: only where every
    /// write goes through a writer that applies its changes to them in its
    /// transaction ([`super::Tables::flush_counts`]).
    const COUNTED: bool;
    /// Into how many rows each counter of tasks by owner and state is
    /// split (`a2a_task_counts.shard`; totals add them up). 1 for SQLite,
    /// whose one writer is never waiting for another. PostgreSQL's
    /// concurrent writers (and replicas) would otherwise all update the
    /// same row of an owner's counter and wait for each other's commit:
    /// one owner's writes were serialised (440 SendMessage/s at c=64).
    const COUNT_SHARDS: u32;

    /// A statement on `pool`.
    fn on(pool: &Self::Pool) -> Self::On<'_>;
    /// Starts a write transaction.
    fn begin(pool: &Self::Pool) -> impl Future<Output = Result<Self::Tx, Self::Error>> + Send;
    /// Commits it.
    fn commit(tx: Self::Tx) -> impl Future<Output = Result<(), Self::Error>> + Send;
    /// The error a caller sees for a failed statement: `area` is the
    /// component ("task store"), `what` what it was doing.
    fn error(area: &str, what: &str, e: Self::Error) -> A2aError;
    /// Whether an error is a unique-key violation.
    #[cfg(any(feature = "sqlite", test))]
    fn is_unique_violation(e: &Self::Error) -> bool;
}

/// The internal error for a failed statement, logged (the mapping every
/// dialect falls back to).
///
/// A failure of the storage itself (locked, full, I/O, damaged: `fault`,
/// which each dialect classifies from its driver's error, see
/// [`super::fault`]) is a storage error instead.
///
/// The caller is told what failed and the kind of fault, never the
/// driver's text (file paths, table and column names, the database's own
/// messages are the operator's, not a caller's): that is logged, with a
/// reference the caller's message repeats.
pub(crate) fn internal_error(
    area: &str,
    what: &str,
    e: &dyn std::fmt::Display,
    fault: Option<crate::store::StorageFault>,
) -> A2aError {
    let reference = error_reference();
    tracing::error!(error = %e, reference = %reference, "{area}: {what} failed");
    let kind = match fault {
        Some(crate::store::StorageFault::Busy) => "the database is busy",
        Some(crate::store::StorageFault::Full) => "the database or its disk is full",
        Some(crate::store::StorageFault::Io) => "the database could not be reached or read",
        Some(crate::store::StorageFault::Corrupt) => "the database is damaged",
        None => "an internal error",
    };
    let message = format!(
        "{area}: {what} failed ({kind}); the server's log has the detail (reference {reference})"
    );
    match fault {
        Some(fault) => crate::store::storage_error(fault, message),
        None => A2aError::internal(message),
    }
}

/// A short reference that ties an error a caller sees to the server's log
/// line about it.
fn error_reference() -> String {
    // The ids are UUIDv7: their end is random, their start the time.
    let id = agentwire_types::new_id();
    id.get(id.len().saturating_sub(8)..)
        .unwrap_or_default()
        .to_owned()
}

/// Whether an sqlx error is a unique-key violation (sqlx classifies it for
/// every database).
#[cfg(any(feature = "sqlite", test))]
pub(crate) fn is_sqlx_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

/// Implements [`SqlRow`] for a driver's row and [`Conn`] for its pool and
/// transactions (the same code for every sqlx database; a macro because
/// sqlx's generic bounds would be longer than the code).
macro_rules! sqlx_driver {
    ($db:ty, $row:ty, $pool:ty) => {
        impl $crate::store::sql::driver::SqlRow for $row {
            fn text(&self, col: &str) -> agentwire_types::A2aResult<String> {
                sqlx::Row::try_get(self, col)
                    .map_err(|e| $crate::store::sql::driver::column_error(col, e))
            }
            fn i64(&self, col: &str) -> agentwire_types::A2aResult<i64> {
                sqlx::Row::try_get(self, col)
                    .map_err(|e| $crate::store::sql::driver::column_error(col, e))
            }
            fn opt_i64(&self, col: &str) -> agentwire_types::A2aResult<Option<i64>> {
                sqlx::Row::try_get(self, col)
                    .map_err(|e| $crate::store::sql::driver::column_error(col, e))
            }
            fn i32(&self, col: &str) -> agentwire_types::A2aResult<i32> {
                sqlx::Row::try_get(self, col)
                    .map_err(|e| $crate::store::sql::driver::column_error(col, e))
            }
            fn flag(&self, col: &str) -> agentwire_types::A2aResult<bool> {
                sqlx::Row::try_get(self, col)
                    .map_err(|e| $crate::store::sql::driver::column_error(col, e))
            }
            fn blob(&self, col: &str) -> agentwire_types::A2aResult<Vec<u8>> {
                sqlx::Row::try_get(self, col)
                    .map_err(|e| $crate::store::sql::driver::column_error(col, e))
            }
            fn opt_blob(&self, col: &str) -> agentwire_types::A2aResult<Option<Vec<u8>>> {
                sqlx::Row::try_get(self, col)
                    .map_err(|e| $crate::store::sql::driver::column_error(col, e))
            }
        }

        /// Binds a statement's arguments to a query.
        fn bind<'q>(
            s: &'q $crate::store::sql::driver::Stmt<'_>,
        ) -> sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments<'q>> {
            use $crate::store::sql::driver::Arg;
            let mut q = sqlx::query(s.sql());
            for a in s.args() {
                q = match *a {
                    Arg::Text(v) => q.bind(v),
                    Arg::I64(v) => q.bind(v),
                    Arg::I32(v) => q.bind(v),
                    Arg::Bool(v) => q.bind(v),
                    Arg::Blob(v) => q.bind(v),
                };
            }
            q
        }

        impl $crate::store::sql::driver::Conn for &$pool {
            type Row = $row;
            type Error = sqlx::Error;
            async fn execute(
                &mut self,
                s: $crate::store::sql::driver::Stmt<'_>,
            ) -> Result<u64, sqlx::Error> {
                Ok(bind(&s).execute(*self).await?.rows_affected())
            }
            async fn fetch_optional(
                &mut self,
                s: $crate::store::sql::driver::Stmt<'_>,
            ) -> Result<Option<$row>, sqlx::Error> {
                bind(&s).fetch_optional(*self).await
            }
            async fn fetch_all(
                &mut self,
                s: $crate::store::sql::driver::Stmt<'_>,
            ) -> Result<Vec<$row>, sqlx::Error> {
                bind(&s).fetch_all(*self).await
            }
        }

        impl $crate::store::sql::driver::Conn for sqlx::Transaction<'static, $db> {
            type Row = $row;
            type Error = sqlx::Error;
            async fn execute(
                &mut self,
                s: $crate::store::sql::driver::Stmt<'_>,
            ) -> Result<u64, sqlx::Error> {
                Ok(bind(&s).execute(&mut **self).await?.rows_affected())
            }
            async fn fetch_optional(
                &mut self,
                s: $crate::store::sql::driver::Stmt<'_>,
            ) -> Result<Option<$row>, sqlx::Error> {
                bind(&s).fetch_optional(&mut **self).await
            }
            async fn fetch_all(
                &mut self,
                s: $crate::store::sql::driver::Stmt<'_>,
            ) -> Result<Vec<$row>, sqlx::Error> {
                bind(&s).fetch_all(&mut **self).await
            }
        }
    };
}
pub(crate) use sqlx_driver;

/// Checks that the placeholders of a statement first appear in increasing
/// order, each one after the one before (binding by position then agrees
/// with binding by name).
#[cfg(test)]
pub(crate) fn assert_placeholders_in_order(sql: &str) {
    let bytes = sql.as_bytes();
    let mut highest = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'$' {
            let digits: String = sql[i + 1..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(n) = digits.parse::<usize>() {
                assert!(n <= highest + 1, "${n} before ${} in {sql}", highest + 1);
                highest = highest.max(n);
            }
            i += digits.len();
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_placeholders_are_numbered_in_order() {
        let mut s = Stmt::new("SELECT 1 WHERE a = ");
        s.bind("x").push(" AND b = ").bind(2i64);
        assert_eq!(s.sql(), "SELECT 1 WHERE a = $1 AND b = $2");
        assert_eq!(s.args(), &[Arg::Text("x"), Arg::I64(2)]);
    }
}

#[cfg(test)]
mod message_tests {
    use super::*;

    /// A caller is told what failed and the kind of fault, with a
    /// reference to the log line; never the driver's text.
    #[test]
    fn a_callers_error_carries_no_driver_text() {
        let driver =
            "error returned from database: (code: 13) database or disk is full: /srv/secret/a2a.db";
        for fault in [
            None,
            Some(crate::store::StorageFault::Full),
            Some(crate::store::StorageFault::Corrupt),
        ] {
            let e = internal_error("task store", "create", &driver, fault);
            assert!(
                e.message.starts_with("task store: create failed ("),
                "{e:?}"
            );
            assert!(!e.message.contains("/srv/secret"), "{e:?}");
            assert!(!e.message.contains("code: 13"), "{e:?}");
            let reference = e.message.rsplit("reference ").next().unwrap_or_default();
            assert_eq!(reference.trim_end_matches(')').len(), 8, "{e:?}");
            assert_eq!(crate::store::storage_fault(&e), fault);
        }
        let a = internal_error("task store", "get", &driver, None);
        let b = internal_error("task store", "get", &driver, None);
        assert_ne!(a.message, b.message, "each failure its own reference");
    }
}
