//! Opening a SQLite database file that another process may be opening at
//! the same moment (the ledger of two `a2a` commands started at once, two
//! registries sharing one file).
//!
//! SQLite answers some of the locks such a start meets with "database is
//! locked" at once instead of waiting for the busy timeout: switching a new
//! file to write-ahead logging, or the deadlock it avoids between two
//! readers that both want to write. Measured before this was used: the
//! ledger failed 6 times in 200 double opens, the registry's store within
//! 40. Such an open is tried again, 10 ms doubling to 250 ms, for up to
//! [`OPEN_PATIENCE`]; any other error is returned at once.

use std::future::Future;
use std::time::Duration;

/// How long [`open_patiently`] keeps trying.
pub const OPEN_PATIENCE: Duration = Duration::from_secs(10);

/// Whether `e` is SQLite's busy answer: `SQLITE_BUSY` (5) or
/// `SQLITE_LOCKED` (6), with or without an extended code in the upper bits.
pub fn is_busy(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .and_then(|c| c.parse::<i32>().ok())
        .is_some_and(|c| matches!(c & 0xff, 5 | 6))
}

/// Runs `open` until it succeeds, fails with an error that `busy` says is
/// not SQLite's busy answer, or [`OPEN_PATIENCE`] has passed (its last
/// error is returned then).
pub async fn open_patiently<T, E, F, Fut>(mut open: F, busy: impl Fn(&E) -> bool) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let deadline = tokio::time::Instant::now() + OPEN_PATIENCE;
    let mut pause = Duration::from_millis(10);
    loop {
        match open().await {
            Err(e) if busy(&e) && tokio::time::Instant::now() + pause < deadline => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(250));
            }
            done => return done,
        }
    }
}
