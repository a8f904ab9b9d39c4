//! One process at a time on a SQLite file: the lock a [`SqliteStore`] (and
//! a [`SqliteOutbox`] on the same file) takes when it opens it.
//!
//! The lock is the operating system's advisory lock (`flock` on Unix,
//! `LockFileEx` on Windows, through `fs4`) on a side file, `PATH.lock`,
//! which holds the process id of its holder. It is taken before the
//! schema is migrated, so two servers starting on a new file at once never
//! race on the schema: the second is refused, naming the file and the
//! holder's pid. The system releases it when its holder exits, however it
//! exits (`kill -9` included), so crash recovery of the next start only
//! ever meets the tasks of a process that is gone. The side file stays
//! (deleting it would let two processes lock two different files).
//!
//! Within one process the stores and outboxes of one file share the lock
//! (a process-wide table of the files held): it is released when the last
//! of them is closed or dropped.
//!
//! [`SqliteStore`]: crate::store::SqliteStore
//! [`SqliteOutbox`]: crate::push::SqliteOutbox

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use agentwire_types::{A2aError, A2aResult};
use parking_lot::Mutex;

use crate::store::{StorageFault, storage_error};

/// The metadata key (in the error of a file in use) naming the process
/// that holds it.
pub const HOLDER_PID: &str = "holderPid";

/// The lock of one database file, held while this value lives.
#[derive(Debug)]
pub struct FileLock {
    /// The open side file: closing it releases the lock.
    _file: File,
}

/// The files this process holds, by canonical path of their side file.
static HELD: Mutex<Option<HashMap<PathBuf, Weak<FileLock>>>> = Mutex::new(None);

/// The side file of the database file `db`: `db` with `.lock` appended.
pub fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// Takes the lock of the database file `db` for this process (shared with
/// the stores of this process that hold it already), or says which process
/// holds it. `area` names the component in errors ("task store", ...).
pub fn lock(area: &str, db: &Path) -> A2aResult<Arc<FileLock>> {
    let path = lock_path(db);
    let opened = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path);
    let mut file = opened.map_err(|e| {
        let fault = match e.kind() {
            std::io::ErrorKind::StorageFull => StorageFault::Full,
            _ => StorageFault::Io,
        };
        storage_error(
            fault,
            format!(
                "{area}: opening {} failed: cannot create its lock file {}: {e}",
                db.display(),
                path.display()
            ),
        )
    })?;
    // The key: the same file however it is named.
    let key = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
    let mut held = HELD.lock();
    let held = held.get_or_insert_with(HashMap::new);
    if let Some(mine) = held.get(&key).and_then(Weak::upgrade) {
        // Held by this process: `file`, a second handle, is closed
        // without touching the lock of the first.
        return Ok(mine);
    }
    held.retain(|_, w| w.strong_count() > 0);
    match fs4::FileExt::try_lock(&file) {
        Ok(()) => {}
        Err(fs4::TryLockError::WouldBlock) => {
            let pid = holder(&mut file);
            let who = match &pid {
                Some(pid) => format!("process {pid}"),
                None => "another process".to_owned(),
            };
            let mut e = storage_error(
                StorageFault::Busy,
                format!(
                    "{area}: {} is in use by {who} (it holds the lock file {}): one server at a \
                     time may use a SQLite file",
                    db.display(),
                    path.display()
                ),
            );
            if let Some(pid) = pid {
                e = e.with_metadata(HOLDER_PID, pid);
            }
            return Err(e);
        }
        Err(fs4::TryLockError::Error(e)) => {
            return Err(storage_error(
                StorageFault::Io,
                format!(
                    "{area}: opening {} failed: cannot lock {}: {e}",
                    db.display(),
                    path.display()
                ),
            ));
        }
    }
    // Ours: say who holds it.
    let written = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .and_then(|()| file.flush());
    if let Err(e) = written {
        tracing::debug!(error = %e, lock = %path.display(), "{area}: cannot write the pid into the lock file");
    }
    let lock = Arc::new(FileLock { _file: file });
    held.insert(key, Arc::downgrade(&lock));
    Ok(lock)
}

/// The pid a lock file holds: its holder writes it just after taking the
/// lock, so an empty file is read again for a little while.
fn holder(file: &mut File) -> Option<String> {
    for _ in 0..20 {
        let mut text = String::new();
        if file.rewind().is_ok() && file.read_to_string(&mut text).is_ok() {
            let pid = text.trim();
            if !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) {
                return Some(pid.to_owned());
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// The pid of the process holding a file, from the error of [`lock`].
pub fn holder_pid(e: &A2aError) -> Option<&str> {
    e.metadata.get(HOLDER_PID).map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_shares_its_lock_and_releases_it_with_the_last_holder() {
        let dir = tempfile_dir();
        let db = dir.join("t.db");
        let a = lock("task store", &db).unwrap();
        let b = lock("push outbox", &db).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let pid = std::fs::read_to_string(lock_path(&db)).unwrap();
        assert_eq!(pid.trim(), std::process::id().to_string());
        // Another handle of the file (as another process would have) is
        // refused while it is held...
        let other = OpenOptions::new()
            .read(true)
            .write(true)
            .open(lock_path(&db))
            .unwrap();
        assert!(matches!(
            fs4::FileExt::try_lock(&other),
            Err(fs4::TryLockError::WouldBlock)
        ));
        drop(a);
        assert!(fs4::FileExt::try_lock(&other).is_err());
        // ...and takes it once the last holder is gone.
        drop(b);
        assert!(fs4::FileExt::try_lock(&other).is_ok());
        drop(other);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("a2a-lock-{}", agentwire_types::new_id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
