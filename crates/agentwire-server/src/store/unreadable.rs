//! Task rows a store keeps but cannot read: damaged, or written by a
//! program whose tasks this one cannot decode (a message nested deeper
//! than the decoder's recursion limit, say).
//!
//! One such row never stops the server or fails the requests about other
//! tasks:
//!
//! - crash recovery sets an unfinished one aside ([`SetAside`]: the SQL
//!   stores move its row to the table `a2a_unreadable_tasks`, kept as it
//!   was) and fails the others as usual;
//! - `ListTasks` skips it (and counts it);
//! - `GetTask` (and every request naming it) gets [`unreadable_error`]:
//!   an internal error naming the task and saying it cannot be read,
//!   only for the task's owner; anyone else gets `TaskNotFound`.
//!
//! The operator's side (where the row is, how to look at it or remove
//! it) is in `docs/operations.md`.

use agentwire_types::A2aError;

use super::{Owner, StoredTask};

/// The metadata key (in `ErrorInfo.metadata`) of [`unreadable_error`]:
/// what part of the stored task could not be read (`head`, `history`,
/// `artifacts`, `artifact chunk`, or `set aside` for a row set aside
/// earlier).
pub const UNREADABLE: &str = "unreadable";

/// The error of a request about a task its store keeps but cannot read:
/// [`ErrorKind::Internal`](agentwire_types::ErrorKind::Internal) (JSON-RPC
/// -32603, HTTP 500, gRPC `INTERNAL`), naming the task, with `taskId` and
/// [`UNREADABLE`] in its metadata. Never a storage fault: nothing is
/// retried, and the task's other rows are not touched.
pub fn unreadable_error(task_id: &str, part: &str, detail: impl std::fmt::Display) -> A2aError {
    A2aError::internal(format!(
        "task {task_id} cannot be read: the task store keeps it, but its stored {part} cannot \
         be decoded ({detail}); the server's operator can inspect or remove it"
    ))
    .with_metadata("taskId", task_id.to_owned())
    .with_metadata(UNREADABLE, part.to_owned())
}

/// Whether `e` is an [`unreadable_error`].
pub fn is_unreadable(e: &A2aError) -> bool {
    e.metadata.contains_key(UNREADABLE)
}

/// An unfinished task row that crash recovery could not read, set aside
/// by the store.
#[derive(Debug, Clone)]
pub struct SetAside {
    /// The task's id.
    pub task_id: String,
    /// Its owner (kept in plain columns: readable).
    pub owner: Owner,
    /// Why it could not be read.
    pub reason: String,
    /// Where the store keeps it now, for the operator (e.g. "table
    /// a2a_unreadable_tasks of /srv/a2a-tasks-echo.db").
    pub kept: String,
}

/// What crash recovery finds in a store
/// ([`TaskStore::unfinished_for_recovery`](super::TaskStore::unfinished_for_recovery)).
#[derive(Debug, Clone, Default)]
pub struct RecoveryScan {
    /// The unfinished tasks, read.
    pub tasks: Vec<StoredTask>,
    /// The unfinished rows that could not be read, now set aside.
    pub set_aside: Vec<SetAside>,
}

/// The error of a request about a task crash recovery set aside (at
/// `at_millis`, because of `reason`): as [`unreadable_error`]. Only the SQL
/// stores set rows aside.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn set_aside_error(task_id: &str, reason: &str, at_millis: i64) -> A2aError {
    let at = chrono::DateTime::from_timestamp_millis(at_millis)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| at_millis.to_string());
    A2aError::internal(format!(
        "task {task_id} cannot be read: the task store set it aside at {at} ({reason}); the \
         server's operator can inspect or remove it"
    ))
    .with_metadata("taskId", task_id.to_owned())
    .with_metadata(UNREADABLE, "set aside")
}
