//! Which database errors are failures of the storage (see
//! [`StorageFault`]): the one place the SQL stores classify them.

#[cfg(feature = "sqlite")]
use agentwire_types::A2aError;

use crate::store::StorageFault;
#[cfg(feature = "sqlite")]
use crate::store::storage_error;

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
#[cfg(feature = "sqlite")]
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

/// The storage fault of an error of the SQLite task store's own driver
/// (`rusqlite`), classified by its primary result code exactly as
/// [`fault_of`] classifies the async driver's: busy or locked, full, I/O
/// (including a file that cannot be opened and a locking protocol error),
/// corrupt or not a database. Errors that are not SQLite's (a value of the
/// wrong type, a bad parameter) are not failures of the storage.
#[cfg(feature = "sqlite")]
pub(crate) fn lite_fault(e: &rusqlite::Error) -> Option<StorageFault> {
    use rusqlite::ErrorCode;
    match e {
        rusqlite::Error::SqliteFailure(f, _) => match f.code {
            ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => Some(StorageFault::Busy),
            ErrorCode::DiskFull => Some(StorageFault::Full),
            ErrorCode::SystemIoFailure
            | ErrorCode::CannotOpen
            | ErrorCode::FileLockingProtocolFailed => Some(StorageFault::Io),
            ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => Some(StorageFault::Corrupt),
            _ => None,
        },
        _ => None,
    }
}

/// The error of opening the database `file`: for a damaged file (or one
/// that is not a database, `fault` is [`StorageFault::Corrupt`]), what is
/// wrong and what to do; otherwise the store's usual error.
#[cfg(feature = "sqlite")]
pub(crate) fn open_error(
    area: &str,
    file: &std::path::Path,
    what: &str,
    e: &dyn std::fmt::Display,
    fault: Option<StorageFault>,
) -> A2aError {
    if fault == Some(StorageFault::Corrupt) {
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
    super::driver::internal_error(area, what, e, fault)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "sqlite")]
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

    /// An error of the SQLite store's own driver with this (extended)
    /// result code, as SQLite reports it.
    #[cfg(feature = "sqlite")]
    fn lite(code: i32) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None)
    }

    /// Every result code the async driver's errors are classified by, and
    /// some extended ones, give the same fault from the store's own driver.
    #[cfg(feature = "sqlite")]
    #[test]
    fn rusqlite_codes_are_classified_like_the_async_drivers() {
        use rusqlite::ffi;
        let cases = [
            (ffi::SQLITE_BUSY, Some(StorageFault::Busy)),
            (ffi::SQLITE_BUSY_SNAPSHOT, Some(StorageFault::Busy)),
            (ffi::SQLITE_BUSY_TIMEOUT, Some(StorageFault::Busy)),
            (ffi::SQLITE_LOCKED, Some(StorageFault::Busy)),
            (ffi::SQLITE_LOCKED_SHAREDCACHE, Some(StorageFault::Busy)),
            (ffi::SQLITE_FULL, Some(StorageFault::Full)),
            (ffi::SQLITE_IOERR, Some(StorageFault::Io)),
            (ffi::SQLITE_IOERR_WRITE, Some(StorageFault::Io)),
            (ffi::SQLITE_IOERR_FSYNC, Some(StorageFault::Io)),
            (ffi::SQLITE_CANTOPEN, Some(StorageFault::Io)),
            (ffi::SQLITE_PROTOCOL, Some(StorageFault::Io)),
            (ffi::SQLITE_CORRUPT, Some(StorageFault::Corrupt)),
            (ffi::SQLITE_CORRUPT_INDEX, Some(StorageFault::Corrupt)),
            (ffi::SQLITE_NOTADB, Some(StorageFault::Corrupt)),
            // Not the storage: a conflict, a refused statement, a read-only
            // connection (the store's readers are read-only on purpose).
            (ffi::SQLITE_CONSTRAINT_UNIQUE, None),
            (ffi::SQLITE_CONSTRAINT_PRIMARYKEY, None),
            (ffi::SQLITE_ERROR, None),
            (ffi::SQLITE_READONLY, None),
            (ffi::SQLITE_MISUSE, None),
        ];
        for (code, fault) in cases {
            assert_eq!(lite_fault(&lite(code)), fault, "result code {code}");
            assert_eq!(
                sqlite_fault(code),
                fault,
                "result code {code} (async driver)"
            );
        }
        // Not an SQLite failure at all.
        assert_eq!(lite_fault(&rusqlite::Error::InvalidQuery), None);
        assert_eq!(lite_fault(&rusqlite::Error::QueryReturnedNoRows), None);
    }

    /// The store's errors carry the fault: transient ones are
    /// `Unavailable`, a damaged database is `Internal`.
    #[cfg(feature = "sqlite")]
    #[test]
    fn rusqlite_failures_become_storage_errors() {
        use super::super::driver::Dialect as _;
        use super::super::lite::Lite;
        use crate::store::storage_fault;
        use agentwire_types::ErrorKind;
        let busy = Lite::error("task store", "writing", lite(rusqlite::ffi::SQLITE_BUSY));
        assert_eq!(busy.kind, ErrorKind::Unavailable);
        assert_eq!(storage_fault(&busy), Some(StorageFault::Busy));
        let full = Lite::error("task store", "writing", lite(rusqlite::ffi::SQLITE_FULL));
        assert_eq!(storage_fault(&full), Some(StorageFault::Full));
        let corrupt = Lite::error("task store", "reading", lite(rusqlite::ffi::SQLITE_CORRUPT));
        assert_eq!(corrupt.kind, ErrorKind::Internal);
        assert_eq!(storage_fault(&corrupt), Some(StorageFault::Corrupt));
        let unique = Lite::error(
            "task store",
            "creating",
            lite(rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE),
        );
        assert_eq!(unique.kind, ErrorKind::Internal);
        assert_eq!(storage_fault(&unique), None);
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
