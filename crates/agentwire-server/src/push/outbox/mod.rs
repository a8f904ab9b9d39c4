//! The push outbox: notifications waiting for delivery, persisted by the
//! durable implementations so that a restart loses none.
//!
//! Notifications form one *stream* per (task, config): they are enqueued
//! in the order the task's events were applied and delivered in that order,
//! one at a time; only the head of a stream is ever in flight. A worker
//! *leases* the heads that are due (a lease names its owner and expires, so
//! a worker that died gives its streams back after the lease time), then
//! *acks* a head once the webhook answered 2xx (which removes it and hands
//! over the next one under the same lease), or schedules a *retry*, or
//! marks the stream *failing* after too many attempts (its pending
//! notifications are dropped and later events are not enqueued until the
//! config is created again).
//!
//! Delivery is at least once: a crash between the webhook's 2xx and the
//! ack sends that notification again after the restart, with the same
//! notification id, so a receiver drops it as a duplicate. Nothing is sent
//! twice otherwise.

#[cfg(feature = "postgres")]
mod postgres;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;

use std::collections::{HashMap, HashSet, VecDeque};

use agentwire_types::{A2aResult, TaskPushNotificationConfig};
use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;

#[cfg(feature = "postgres")]
pub use postgres::PostgresOutbox;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteOutbox;

/// One notification to deliver: the head of its stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    /// The task.
    pub task_id: String,
    /// Where and how to deliver it.
    pub config: TaskPushNotificationConfig,
    /// Position in the (task, config) stream, from 1, without gaps.
    pub seq: u64,
    /// Unique id, stable across retries and restarts
    /// (`X-A2A-Notification-Id`).
    pub id: String,
    /// The `StreamResponse` JSON.
    pub body: Bytes,
    /// Failed attempts so far.
    pub attempts: u32,
    /// The event ends the task (a terminal state): the stream ends with it.
    pub is_final: bool,
}

/// A lease taken by [`PushOutbox::lease`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Leased {
    /// Stream heads now leased to the caller.
    pub items: Vec<Notification>,
    /// When the earliest stream not returned becomes due (ms since the
    /// epoch), if any stream waits for a retry.
    pub next_due_ms: Option<i64>,
}

/// Where push notifications wait for delivery.
///
/// Times are milliseconds since the Unix epoch; `owner` identifies one
/// worker (process) so that leases of a dead worker expire instead of
/// being reused by mistake.
#[async_trait]
pub trait PushOutbox: Send + Sync + 'static {
    /// Appends one event of a task to the stream of each config, in order.
    /// Streams marked failing are skipped; a final event for a failing
    /// stream forgets it.
    async fn enqueue(
        &self,
        task_id: &str,
        configs: &[TaskPushNotificationConfig],
        body: Bytes,
        is_final: bool,
    ) -> A2aResult<()>;

    /// Leases up to `limit` stream heads that are due and not leased (or
    /// whose lease expired) until `now_ms + lease_ms`.
    async fn lease(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
        limit: usize,
    ) -> A2aResult<Leased>;

    /// The head was delivered: removes it and returns the stream's next
    /// notification, leased to `owner` until `now_ms + lease_ms`, if there
    /// is one. A stream whose final notification was delivered is
    /// forgotten.
    async fn ack(
        &self,
        owner: &str,
        delivered: &Notification,
        now_ms: i64,
        lease_ms: i64,
    ) -> A2aResult<Option<Notification>>;

    /// The head failed: records the attempt and releases the stream until
    /// `due_ms`.
    async fn retry(&self, owner: &str, failed: &Notification, due_ms: i64) -> A2aResult<()>;

    /// Gives up on a stream: marks it failing and drops its pending
    /// notifications; returns how many were dropped.
    async fn fail(&self, task_id: &str, config_id: &str) -> A2aResult<u64>;

    /// A config was created or replaced: its stream (if any) takes the new
    /// config and is no longer failing.
    async fn reset(&self, config: &TaskPushNotificationConfig) -> A2aResult<()>;

    /// A config was deleted: forgets its stream and drops its pending
    /// notifications; returns how many were dropped.
    async fn remove(&self, task_id: &str, config_id: &str) -> A2aResult<u64>;

    /// How many notifications wait in all.
    async fn pending(&self) -> A2aResult<u64>;
}

/// Milliseconds since the Unix epoch (the outboxes' clock).
pub(super) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

type Key = (String, String);

#[derive(Debug)]
struct Entry {
    seq: u64,
    id: String,
    body: Bytes,
    is_final: bool,
}

#[derive(Debug)]
struct Stream {
    config: TaskPushNotificationConfig,
    next_seq: u64,
    failing: bool,
    attempts: u32,
    due_ms: i64,
    lease_owner: String,
    lease_until: i64,
    queue: VecDeque<Entry>,
}

impl Stream {
    fn head(&self, task_id: &str) -> Option<Notification> {
        self.queue.front().map(|e| Notification {
            task_id: task_id.to_owned(),
            config: self.config.clone(),
            seq: e.seq,
            id: e.id.clone(),
            body: e.body.clone(),
            attempts: self.attempts,
            is_final: e.is_final,
        })
    }

    fn leased_by(&self, owner: &str) -> bool {
        self.lease_owner == owner
    }
}

#[derive(Default)]
struct State {
    streams: HashMap<Key, Stream>,
    /// Streams with pending notifications.
    active: HashSet<Key>,
}

/// An outbox in memory: ordered and retried like the durable ones, but
/// gone with the process.
#[derive(Default)]
pub struct MemoryOutbox {
    state: Mutex<State>,
}

impl MemoryOutbox {
    /// An empty outbox.
    pub fn new() -> Self {
        Self::default()
    }
}

impl std::fmt::Debug for MemoryOutbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.state.lock();
        f.debug_struct("MemoryOutbox")
            .field("streams", &s.streams.len())
            .field("active", &s.active.len())
            .finish()
    }
}

#[async_trait]
impl PushOutbox for MemoryOutbox {
    async fn enqueue(
        &self,
        task_id: &str,
        configs: &[TaskPushNotificationConfig],
        body: Bytes,
        is_final: bool,
    ) -> A2aResult<()> {
        let mut s = self.state.lock();
        for c in configs {
            let key = (task_id.to_owned(), c.id.clone());
            let stream = s.streams.entry(key.clone()).or_insert_with(|| Stream {
                config: c.clone(),
                next_seq: 1,
                failing: false,
                attempts: 0,
                due_ms: 0,
                lease_owner: String::new(),
                lease_until: 0,
                queue: VecDeque::new(),
            });
            if stream.failing {
                if is_final {
                    s.streams.remove(&key);
                }
                continue;
            }
            let seq = stream.next_seq;
            stream.next_seq += 1;
            stream.queue.push_back(Entry {
                seq,
                id: agentwire_types::new_id(),
                body: body.clone(),
                is_final,
            });
            s.active.insert(key);
        }
        Ok(())
    }

    async fn lease(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
        limit: usize,
    ) -> A2aResult<Leased> {
        let mut guard = self.state.lock();
        let State { streams, active } = &mut *guard;
        let mut out = Leased::default();
        for key in active.iter() {
            let Some(stream) = streams.get_mut(key) else {
                continue;
            };
            if stream.lease_until > now_ms {
                continue;
            }
            if stream.due_ms > now_ms {
                out.next_due_ms = Some(
                    out.next_due_ms
                        .map_or(stream.due_ms, |d| d.min(stream.due_ms)),
                );
                continue;
            }
            if out.items.len() >= limit {
                out.next_due_ms = Some(now_ms);
                break;
            }
            if let Some(n) = stream.head(&key.0) {
                stream.lease_owner = owner.to_owned();
                stream.lease_until = now_ms + lease_ms;
                out.items.push(n);
            }
        }
        Ok(out)
    }

    async fn ack(
        &self,
        owner: &str,
        delivered: &Notification,
        now_ms: i64,
        lease_ms: i64,
    ) -> A2aResult<Option<Notification>> {
        let mut s = self.state.lock();
        let key = (delivered.task_id.clone(), delivered.config.id.clone());
        let Some(stream) = s.streams.get_mut(&key) else {
            return Ok(None);
        };
        if stream.queue.front().is_some_and(|e| e.seq == delivered.seq) {
            stream.queue.pop_front();
        }
        stream.attempts = 0;
        stream.due_ms = 0;
        if stream.queue.is_empty() {
            let ended = delivered.is_final;
            stream.lease_until = 0;
            if ended {
                s.streams.remove(&key);
            }
            s.active.remove(&key);
            return Ok(None);
        }
        if !stream.leased_by(owner) {
            return Ok(None);
        }
        stream.lease_until = now_ms + lease_ms;
        Ok(stream.head(&key.0))
    }

    async fn retry(&self, owner: &str, failed: &Notification, due_ms: i64) -> A2aResult<()> {
        let mut s = self.state.lock();
        let key = (failed.task_id.clone(), failed.config.id.clone());
        if let Some(stream) = s.streams.get_mut(&key) {
            if stream.leased_by(owner) && stream.queue.front().is_some_and(|e| e.seq == failed.seq)
            {
                stream.attempts = failed.attempts + 1;
                stream.due_ms = due_ms;
                stream.lease_until = 0;
            }
        }
        Ok(())
    }

    async fn fail(&self, task_id: &str, config_id: &str) -> A2aResult<u64> {
        let mut s = self.state.lock();
        let key = (task_id.to_owned(), config_id.to_owned());
        let mut dropped = 0;
        if let Some(stream) = s.streams.get_mut(&key) {
            dropped = stream.queue.len() as u64;
            let ended = stream.queue.iter().any(|e| e.is_final);
            stream.queue.clear();
            stream.failing = true;
            stream.attempts = 0;
            stream.lease_until = 0;
            if ended {
                s.streams.remove(&key);
            }
        }
        s.active.remove(&key);
        Ok(dropped)
    }

    async fn reset(&self, config: &TaskPushNotificationConfig) -> A2aResult<()> {
        let mut s = self.state.lock();
        let key = (config.task_id.clone(), config.id.clone());
        if let Some(stream) = s.streams.get_mut(&key) {
            stream.config = config.clone();
            stream.failing = false;
        }
        Ok(())
    }

    async fn remove(&self, task_id: &str, config_id: &str) -> A2aResult<u64> {
        let mut s = self.state.lock();
        let key = (task_id.to_owned(), config_id.to_owned());
        s.active.remove(&key);
        Ok(s.streams.remove(&key).map_or(0, |st| st.queue.len() as u64))
    }

    async fn pending(&self) -> A2aResult<u64> {
        let s = self.state.lock();
        Ok(s.streams.values().map(|st| st.queue.len() as u64).sum())
    }
}

/// Checks the outbox contract on any implementation (used by the tests of
/// each one).
#[cfg(test)]
pub(crate) async fn conformance(outbox: &dyn PushOutbox) {
    let cfg = |task: &str, id: &str| TaskPushNotificationConfig {
        id: id.into(),
        task_id: task.into(),
        url: format!("http://127.0.0.1:9/{id}"),
        ..Default::default()
    };
    let (a, b) = (cfg("t1", "a"), cfg("t1", "b"));
    for i in 1..=3 {
        outbox
            .enqueue(
                "t1",
                &[a.clone(), b.clone()],
                Bytes::from(format!("e{i}")),
                false,
            )
            .await
            .unwrap();
    }
    assert_eq!(outbox.pending().await.unwrap(), 6);

    // One head per stream, in order; leased heads are not leased again.
    let l = outbox.lease("w1", 1000, 500, 10).await.unwrap();
    assert_eq!(l.items.len(), 2);
    assert!(l.items.iter().all(|n| n.seq == 1 && n.body == "e1"));
    assert!(
        outbox
            .lease("w2", 1100, 500, 10)
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // Ack hands over the next one under the same lease.
    let ha = l.items.iter().find(|n| n.config.id == "a").unwrap().clone();
    let next = outbox.ack("w1", &ha, 1200, 500).await.unwrap().unwrap();
    assert_eq!((next.seq, next.body.as_ref()), (2, &b"e2"[..]));
    assert_ne!(next.id, ha.id);

    // A retry waits for its due time and counts the attempt.
    outbox.retry("w1", &next, 5000).await.unwrap();
    let l = outbox.lease("w1", 1300, 500, 10).await.unwrap();
    assert!(l.items.is_empty(), "b is still leased, a waits");
    assert!(
        l.next_due_ms.is_some_and(|d| d <= 5000),
        "{:?}",
        l.next_due_ms
    );
    let l = outbox.lease("w1", 5000, 500, 10).await.unwrap();
    let again: Vec<_> = l.items.iter().filter(|n| n.config.id == "a").collect();
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].seq, again[0].attempts), (2, 1));
    assert_eq!(again[0].id, next.id, "the id survives retries");

    // An expired lease (dead worker) is taken over.
    let l = outbox.lease("w3", 9000, 500, 10).await.unwrap();
    assert_eq!(l.items.len(), 2);
    let hb = l.items.iter().find(|n| n.config.id == "b").unwrap().clone();
    assert_eq!(hb.seq, 1);

    // Failing drops the stream's notifications and skips later events.
    assert_eq!(outbox.fail("t1", "b").await.unwrap(), 3);
    outbox
        .enqueue("t1", std::slice::from_ref(&b), Bytes::from("late"), false)
        .await
        .unwrap();
    assert_eq!(outbox.pending().await.unwrap(), 2);
    // Creating the config again revives it.
    outbox.reset(&b).await.unwrap();
    outbox
        .enqueue(
            "t1",
            std::slice::from_ref(&b),
            Bytes::from("revived"),
            false,
        )
        .await
        .unwrap();
    assert_eq!(outbox.pending().await.unwrap(), 3);
    assert_eq!(outbox.remove("t1", "b").await.unwrap(), 1);

    // The final notification ends the stream.
    outbox
        .enqueue("t1", std::slice::from_ref(&a), Bytes::from("e4"), true)
        .await
        .unwrap();
    let ha = l.items.iter().find(|n| n.config.id == "a").unwrap().clone();
    let n3 = outbox.ack("w3", &ha, 9100, 500).await.unwrap().unwrap();
    assert!(!n3.is_final);
    let n4 = outbox.ack("w3", &n3, 9100, 500).await.unwrap().unwrap();
    assert!(n4.is_final);
    assert_eq!(n4.seq, 4);
    assert_eq!(outbox.ack("w3", &n4, 9200, 500).await.unwrap(), None);
    assert_eq!(outbox.pending().await.unwrap(), 0);
    assert!(
        outbox
            .lease("w3", 9300, 500, 10)
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // Lease limits: the rest stays due.
    for t in ["x", "y", "z"] {
        outbox
            .enqueue(t, &[cfg(t, "c")], Bytes::from("e"), false)
            .await
            .unwrap();
    }
    let l = outbox.lease("w4", 10_000, 500, 2).await.unwrap();
    assert_eq!(l.items.len(), 2);
    let l2 = outbox.lease("w4", 10_000, 500, 2).await.unwrap();
    assert_eq!(l2.items.len(), 1);
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn memory_outbox_contract() {
        super::conformance(&super::MemoryOutbox::new()).await;
    }
}
