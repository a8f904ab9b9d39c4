//! Failures of the storage itself, told apart from errors about a task.
//!
//! A store reports a failure of its storage (the database is locked by
//! another process, the disk is full, an I/O error, a damaged file) as an
//! [`A2aError`] built by [`storage_error`]: it carries its [`StorageFault`]
//! in its metadata (key [`STORAGE_FAULT`]), so the task manager can retry
//! the transient ones ([`StoreRetry`]) and never mistakes one for a task's
//! state (a storage failure is never `TaskNotFound` or
//! `TaskNotCancelable`). A transient fault is
//! [`ErrorKind::Unavailable`] (JSON-RPC -32603, HTTP 503, gRPC
//! `UNAVAILABLE`); a damaged database is [`ErrorKind::Internal`] (HTTP
//! 500, gRPC `INTERNAL`).

use std::time::Duration;

use agentwire_types::{A2aError, ErrorKind};

/// The metadata key (in `ErrorInfo.metadata`) naming the [`StorageFault`]
/// of an error: `busy`, `full`, `io` or `corrupt`.
pub const STORAGE_FAULT: &str = "storageFault";

/// What failed in the storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StorageFault {
    /// The database is locked or busy (another process or connection holds
    /// its write lock, a connection pool is exhausted). Transient.
    Busy,
    /// The database or the disk is full. Transient: room can be made.
    Full,
    /// An I/O error, or the connection to the database was lost. Transient.
    Io,
    /// The database is damaged, or the file is not a database. Not
    /// transient: retrying cannot help.
    Corrupt,
}

impl StorageFault {
    /// Its name in the error's metadata.
    pub fn as_str(self) -> &'static str {
        match self {
            StorageFault::Busy => "busy",
            StorageFault::Full => "full",
            StorageFault::Io => "io",
            StorageFault::Corrupt => "corrupt",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [Self::Busy, Self::Full, Self::Io, Self::Corrupt]
            .into_iter()
            .find(|f| f.as_str() == s)
    }

    /// Whether the same write may succeed later (busy, full, I/O).
    pub fn is_transient(self) -> bool {
        !matches!(self, StorageFault::Corrupt)
    }
}

/// The error of a store whose storage failed: [`ErrorKind::Unavailable`]
/// for a transient fault, [`ErrorKind::Internal`] for a damaged database,
/// with the fault in its metadata.
pub fn storage_error(fault: StorageFault, message: impl Into<String>) -> A2aError {
    let kind = if fault.is_transient() {
        ErrorKind::Unavailable
    } else {
        ErrorKind::Internal
    };
    A2aError::new(kind, message).with_metadata(STORAGE_FAULT, fault.as_str())
}

/// The storage fault of an error built by [`storage_error`] (`None` for
/// any other error).
pub fn storage_fault(e: &A2aError) -> Option<StorageFault> {
    e.metadata
        .get(STORAGE_FAULT)
        .and_then(|f| StorageFault::parse(f))
}

/// How the task manager retries a write that failed because of a transient
/// storage fault (busy, full, I/O; never a conflict, a refused update or a
/// damaged database).
///
/// The write is tried again after a pause that starts at
/// [`Self::first_pause`] and doubles up to [`Self::max_pause`], for
/// [`Self::budget`] in all; the task's later updates wait meanwhile, in
/// order. When the budget is spent, the task fails: every request waiting
/// for it and every stream following it gets the storage error at once,
/// the agent is canceled, and the task is recorded `TASK_STATE_FAILED`
/// (with a status message saying storage failed) as soon as the store
/// accepts writes again, tried every [`Self::max_pause`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreRetry {
    /// How long a write is retried in all before the task fails. Default:
    /// 30 s.
    pub budget: Duration,
    /// The first pause between two attempts. Default: 50 ms.
    pub first_pause: Duration,
    /// The longest pause between two attempts, and between two attempts to
    /// record a failed task. Default: 2 s.
    pub max_pause: Duration,
}

impl Default for StoreRetry {
    fn default() -> Self {
        Self {
            budget: Duration::from_secs(30),
            first_pause: Duration::from_millis(50),
            max_pause: Duration::from_secs(2),
        }
    }
}

impl StoreRetry {
    /// The pause after `pause`, doubled up to [`Self::max_pause`].
    pub(crate) fn next_pause(&self, pause: Duration) -> Duration {
        pause.saturating_mul(2).min(self.max_pause.max(pause))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_errors_say_what_failed_and_whether_to_retry() {
        let busy = storage_error(StorageFault::Busy, "database is locked");
        assert_eq!(busy.kind, ErrorKind::Unavailable);
        assert_eq!(storage_fault(&busy), Some(StorageFault::Busy));
        let corrupt = storage_error(StorageFault::Corrupt, "file is not a database");
        assert_eq!(corrupt.kind, ErrorKind::Internal);
        assert!(!storage_fault(&corrupt).is_some_and(StorageFault::is_transient));
        assert_eq!(storage_fault(&A2aError::unavailable("full")), None);
        let retry = StoreRetry {
            first_pause: Duration::from_millis(10),
            max_pause: Duration::from_millis(25),
            ..Default::default()
        };
        assert_eq!(
            retry.next_pause(Duration::from_millis(10)),
            Duration::from_millis(20)
        );
        assert_eq!(
            retry.next_pause(Duration::from_millis(20)),
            Duration::from_millis(25)
        );
    }
}
