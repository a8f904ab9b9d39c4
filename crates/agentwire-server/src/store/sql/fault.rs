//! Which database errors are failures of the storage (see
//! [`StorageFault`]): the one place the SQL stores classify them.

use agentwire_types::A2aError;

use crate::store::{StorageFault, storage_error};

/// The storage fault of a database error, if it is one: SQLite's result
/// codes `SQLITE_BUSY`, `SQLITE_LOCKED` (busy), `SQLITE_FULL` (full),
/// `SQLITE_IOERR`, `SQLITE_CANTOPEN`, `SQLITE_PROTOCOL` (I/O),
/// `SQLITE_CORRUPT`, `SQLITE_NOTADB` (corrupt); PostgreSQL's SQLSTATE
/// classes 08 (connection), 53 (insufficient resources), 57P (shutting
/// down), 55P03 and 40P01 (lock not available, deadlock), XX001 and XX002
/// (corrupt data); a lost connection or an exhausted pool. Anything else
/// (a constraint, a conflict, a bad query) is not.
pub(crate) fn fault_of(e: &sqlx::Error) -> Option<StorageFault> {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::WorkerCrashed => Some(StorageFault::Io),
        sqlx::Error::PoolTimedOut => Some(StorageFault::Busy),
        sqlx::Error::Database(d) => {
            #[cfg(feature = "sqlite")]
            if let Some(e) = d.try_downcast_ref::<sqlx::sqlite::SqliteError>() {
                use sqlx::error::DatabaseError as _;
                let code = e.code().and_then(|c| c.parse::<i32>().ok())?;
                return sqlite_fault(code);
            }
            #[cfg(feature = "postgres")]
            if let Some(e) = d.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
                return postgres_fault(e.code());
            }
            None
        }
        _ => None,
    }
}

/// The fault of an SQLite (extended) result code.
fn sqlite_fault(code: i32) -> Option<StorageFault> {
    // Primary result codes (https://www.sqlite.org/rescode.html): the low
    // byte of an extended code.
    match code & 0xff {
        5 | 6 => Some(StorageFault::Busy),
        13 => Some(StorageFault::Full),
        10 | 14 | 15 => Some(StorageFault::Io),
        11 | 26 => Some(StorageFault::Corrupt),
        _ => None,
    }
}

/// The fault of a PostgreSQL SQLSTATE.
#[cfg(feature = "postgres")]
fn postgres_fault(sqlstate: &str) -> Option<StorageFault> {
    match sqlstate {
        "53100" => Some(StorageFault::Full),
        "55P03" | "40P01" => Some(StorageFault::Busy),
        "XX001" | "XX002" => Some(StorageFault::Corrupt),
        s if s.starts_with("08") || s.starts_with("57P") => Some(StorageFault::Io),
        s if s.starts_with("53") => Some(StorageFault::Busy),
        _ => None,
    }
}

/// The error of opening the database `file`: for a damaged file (or one
/// that is not a database), what is wrong and what to do; otherwise the
/// store's usual error.
#[cfg(feature = "sqlite")]
pub(crate) fn open_error(
    area: &str,
    file: &std::path::Path,
    what: &str,
    e: sqlx::Error,
) -> A2aError {
    if fault_of(&e) == Some(StorageFault::Corrupt) {
        tracing::error!(error = %e, file = %file.display(), "{area}: the database is damaged");
        return storage_error(
            StorageFault::Corrupt,
            format!(
                "the {area}'s database file {} is damaged or is not an SQLite database \
                 ({e}): move it away (or restore it from a backup) and start again; a new, \
                 empty database is created where none exists",
                file.display()
            ),
        );
    }
    super::driver::internal_error(area, what, &e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_codes_are_classified() {
        assert_eq!(sqlite_fault(5), Some(StorageFault::Busy));
        // SQLITE_BUSY_SNAPSHOT, an extended code.
        assert_eq!(sqlite_fault(517), Some(StorageFault::Busy));
        assert_eq!(sqlite_fault(13), Some(StorageFault::Full));
        // SQLITE_IOERR_WRITE.
        assert_eq!(sqlite_fault(778), Some(StorageFault::Io));
        assert_eq!(sqlite_fault(26), Some(StorageFault::Corrupt));
        // SQLITE_CONSTRAINT_UNIQUE: a conflict, not the storage.
        assert_eq!(sqlite_fault(2067), None);
        assert_eq!(sqlite_fault(1), None);
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn postgres_states_are_classified() {
        assert_eq!(postgres_fault("53100"), Some(StorageFault::Full));
        assert_eq!(postgres_fault("08006"), Some(StorageFault::Io));
        assert_eq!(postgres_fault("57P01"), Some(StorageFault::Io));
        assert_eq!(postgres_fault("XX001"), Some(StorageFault::Corrupt));
        // A unique violation, a serialization conflict.
        assert_eq!(postgres_fault("23505"), None);
        assert_eq!(postgres_fault("40001"), None);
    }
}
