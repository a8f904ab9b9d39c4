//! Events between replicas.
//!
//! Several server processes (replicas) can serve the same tasks from one
//! shared store (a [`crate::store::PostgresStore`]). The store alone makes
//! every task visible everywhere; an [`EventBus`] adds what a replica needs
//! from the others to keep its *live* promises:
//!
//! - a subscriber on replica B of a task whose agent runs on replica A
//!   receives A's events, in the order they were applied, each once;
//! - `CancelTask` on B stops the agent running on A.
//!
//! The store keeps a log of the events it applied (each with a position,
//! `seq`, and the replica that wrote it, its *origin*); the bus announces
//! new positions and cancellations, and reads the log. The task manager
//! does the rest (`docs/concurrency.md`, "Several replicas").
//!
//! Without a bus (the default) nothing of this happens: one process, any
//! store. [`crate::store::PgEventBus`] is the PostgreSQL implementation
//! (`LISTEN`/`NOTIFY`); [`crate::store::postgres::connect_cluster`] makes a
//! store and its bus from one URL.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentwire_types::{A2aResult, StreamResponse};
use async_trait::async_trait;
use tokio::sync::mpsc;

use crate::store::StoredTask;

/// What a replica hears from the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// Another replica applied the event at position `seq` of a task. The
    /// event (and every earlier one of the task) can be read with
    /// [`EventBus::events_after`] by the time the notice arrives (with
    /// PostgreSQL: a notification is delivered after its transaction
    /// committed). Notices may be lost, repeated or late.
    Event {
        /// The task.
        task_id: String,
        /// The event's position in the log.
        seq: i64,
    },
    /// `CancelTask` was called for a task: stop its agent if it runs here.
    Cancel {
        /// The task.
        task_id: String,
    },
    /// Notices may have been missed (the connection was lost, or the
    /// receiver fell behind): check every task followed here.
    Resync,
    /// The replica that was working on this task stopped (it no longer
    /// announces itself): fail the task if it is still working.
    Orphaned {
        /// The task.
        task_id: String,
    },
    /// The push notification configs of a task were created or deleted on
    /// some replica: a replica following the task reads them again before
    /// its next event.
    PushConfigs {
        /// The task.
        task_id: String,
    },
}

/// An event another replica applied, as read from the log.
#[derive(Debug, Clone)]
pub struct RemoteEvent {
    /// Its position in the log.
    pub seq: i64,
    /// The event (`None` when the stored bytes could not be decoded; the
    /// bus logs why).
    pub event: Option<Arc<StreamResponse>>,
}

/// What the task manager needs from the other replicas. Implementations
/// must not block: every method is bounded by the database's answer.
#[async_trait]
pub trait EventBus: Send + Sync + 'static {
    /// This replica's id: the origin of the events it writes. Unique among
    /// the replicas sharing a store.
    fn replica_id(&self) -> &str;

    /// Starts listening to the other replicas (called once by each task
    /// manager using the bus; needs a tokio runtime). Listening stops when
    /// the returned [`Notices`] is dropped. The first notice after a
    /// (re)connection is [`Notice::Resync`].
    fn listen(&self) -> Notices;

    /// The events of a task after position `after` (and at most `upto`),
    /// in order, written by other replicas; at most `limit` of them.
    async fn events_after(
        &self,
        task_id: &str,
        after: i64,
        upto: Option<i64>,
        limit: usize,
    ) -> A2aResult<Vec<RemoteEvent>>;

    /// The task with the position of its last event, read together (the
    /// snapshot contains exactly the events up to that position).
    async fn snapshot(
        &self,
        task_id: &str,
        history_length: Option<usize>,
    ) -> A2aResult<Option<(StoredTask, i64)>>;

    /// Tells every replica that a task was canceled (after the cancellation
    /// is recorded), so the one running its agent stops it.
    async fn request_cancel(&self, task_id: &str) -> A2aResult<()>;

    /// Tells every replica that the push notification configs of a task
    /// changed (after the change is stored), so the one whose agent works
    /// on it notifies the new set.
    async fn announce_push_configs(&self, task_id: &str) -> A2aResult<()>;
}

/// A channel of [`Notice`]s for bus implementations: bounded, never
/// blocking the sender; notices that do not fit become one
/// [`Notice::Resync`].
pub fn notice_channel(capacity: usize) -> (NoticeSender, Notices) {
    let (tx, rx) = mpsc::channel(capacity.max(1));
    let lagged = Arc::new(AtomicBool::new(false));
    (
        NoticeSender {
            tx,
            lagged: Arc::clone(&lagged),
        },
        Notices { rx, lagged },
    )
}

/// The sending side of [`notice_channel`].
#[derive(Debug, Clone)]
pub struct NoticeSender {
    tx: mpsc::Sender<Notice>,
    lagged: Arc<AtomicBool>,
}

impl NoticeSender {
    /// Sends a notice without waiting. False when the receiver is gone.
    pub fn send(&self, notice: Notice) -> bool {
        match self.tx.try_send(notice) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.lagged.store(true, Ordering::Release);
                true
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }

    /// Completes when the receiver is gone.
    pub async fn closed(&self) {
        self.tx.closed().await;
    }

    /// Whether the receiver is gone.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// The receiving side of [`notice_channel`].
#[derive(Debug)]
pub struct Notices {
    rx: mpsc::Receiver<Notice>,
    lagged: Arc<AtomicBool>,
}

impl Notices {
    /// The next notice (`None` when the bus stopped).
    pub async fn recv(&mut self) -> Option<Notice> {
        if self.lagged.swap(false, Ordering::AcqRel) {
            return Some(Notice::Resync);
        }
        self.rx.recv().await
    }
}

/// A replica id for this process: the host name (when the environment
/// says it), the process id and a random part.
pub fn new_replica_id() -> String {
    // The last 8 hex digits of a fresh id: random (its first ones are the
    // time, a UUID v7's).
    let random = agentwire_types::new_id();
    let random = random
        .get(random.len().saturating_sub(8)..)
        .unwrap_or(&random);
    let host: String = std::env::var("HOSTNAME")
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        .take(64)
        .collect();
    if host.is_empty() {
        format!("{}-{random}", std::process::id())
    } else {
        format!("{host}-{}-{random}", std::process::id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn overflow_becomes_one_resync() {
        let (tx, mut rx) = notice_channel(2);
        for seq in 1..=5 {
            assert!(tx.send(Notice::Event {
                task_id: "t".into(),
                seq
            }));
        }
        assert_eq!(rx.recv().await, Some(Notice::Resync));
        assert!(matches!(
            rx.recv().await,
            Some(Notice::Event { seq: 1, .. })
        ));
        assert!(matches!(
            rx.recv().await,
            Some(Notice::Event { seq: 2, .. })
        ));
        drop(rx);
        assert!(!tx.send(Notice::Resync));
        assert!(tx.is_closed());
    }

    #[test]
    fn replica_ids_are_tokens() {
        let id = new_replica_id();
        assert!(!id.is_empty());
        assert!(!id.contains(char::is_whitespace));
        assert_ne!(id, new_replica_id());
    }
}
