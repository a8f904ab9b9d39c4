//! Event ids and the retained log of a task's recent events, from which a
//! stream that reconnects (`Last-Event-ID`) is resumed.
//!
//! Every event published to a task's subscribers gets the next position in
//! the task's log. An event id is `<log>-<position>`: the log part names
//! one log (a fresh one is started when none is retained, e.g. after a
//! restart), so a position is never taken for another log's. The log keeps
//! the last events (bounded in events and bytes); once the task has no
//! live state, its log is kept a while among the recently retired ones
//! (bounded too), so a client reconnecting after the agent finished still
//! gets what it missed. The log is recorded only for tasks that a stream
//! has followed: a task nobody streams pays nothing.
//!
//! The log lives in the task manager, not in the store: it serves every
//! store alike (memory, SQLite, PostgreSQL). What it no longer holds
//! (too old, another replica's stream, a restarted server) is answered
//! with a snapshot of the task first (see `docs/streaming.md`).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agentwire_types::StreamResponse;
use prost::Message as _;

/// The name of the HTTP header (and gRPC metadata key) with which a client
/// resumes a stream.
pub(crate) const LAST_EVENT_ID: &str = "last-event-id";

/// Where an event is in a task's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventId {
    /// Which log.
    pub log: u64,
    /// The position in it (1 for the first event; 0 before any).
    pub seq: u64,
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:x}-{}", self.log, self.seq)
    }
}

impl EventId {
    /// Parses the form written by `Display` (`None` for anything else).
    pub fn parse(s: &str) -> Option<Self> {
        let (log, seq) = s.trim().split_once('-')?;
        Some(Self {
            log: u64::from_str_radix(log, 16).ok()?,
            seq: seq.parse().ok()?,
        })
    }
}

/// Bounds of the retained logs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogLimits {
    /// Events kept per task.
    pub(crate) events: usize,
    /// Bytes (encoded size of the events) kept per task.
    pub(crate) bytes: usize,
    /// Logs of tasks without live state kept at most.
    pub(crate) retired: usize,
}

/// The recent events of one task.
pub(crate) struct EventLog {
    limits: LogLimits,
    log: u64,
    next: u64,
    events: VecDeque<(u64, Arc<StreamResponse>, usize)>,
    bytes: usize,
}

impl EventLog {
    /// The id of the last event recorded (position 0 before any).
    pub(crate) fn last_id(&self) -> EventId {
        EventId {
            log: self.log,
            seq: self.next - 1,
        }
    }

    /// Records an event and returns its id and size (see [`event_size`]).
    pub(crate) fn record(&mut self, event: &Arc<StreamResponse>) -> (EventId, usize) {
        let limits = self.limits;
        let seq = self.next;
        self.next += 1;
        let size = event_size(event);
        self.events.push_back((seq, Arc::clone(event), size));
        self.bytes += size;
        while self.events.len() > limits.events.max(1)
            || (self.bytes > limits.bytes && self.events.len() > 1)
        {
            if let Some((_, _, n)) = self.events.pop_front() {
                self.bytes -= n;
            }
        }
        (EventId { log: self.log, seq }, size)
    }

    /// The events after `after`, when this log still holds every one of
    /// them (`None`: another log, or some are gone).
    pub(crate) fn after(&self, after: EventId) -> Option<Vec<(EventId, Arc<StreamResponse>)>> {
        if after.log != self.log || after.seq >= self.next {
            return None;
        }
        let oldest = self.events.front().map_or(self.next, |e| e.0);
        if after.seq + 1 < oldest {
            return None;
        }
        Some(
            self.events
                .iter()
                .filter(|e| e.0 > after.seq)
                .map(|e| {
                    (
                        EventId {
                            log: self.log,
                            seq: e.0,
                        },
                        Arc::clone(&e.1),
                    )
                })
                .collect(),
        )
    }
}

/// The size an event counts for in byte bounds: its encoded (protobuf)
/// size, close to what it holds in memory and on the wire.
pub(crate) fn event_size(event: &StreamResponse) -> usize {
    event.encoded_len()
}

/// Starts logs and keeps those of recently retired tasks.
pub(crate) struct Logs {
    pub(crate) limits: LogLimits,
    base: u64,
    counter: AtomicU64,
    retired: parking_lot::Mutex<Retired>,
}

#[derive(Default)]
struct Retired {
    logs: HashMap<String, EventLog>,
    order: VecDeque<String>,
}

impl Logs {
    pub(crate) fn new(limits: LogLimits) -> Self {
        use std::hash::{BuildHasher, Hasher};
        // A different base per process: a restarted server starts other
        // logs, so an id from before never matches a new log by chance.
        let base = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
            >> 16;
        Self {
            limits,
            base,
            counter: AtomicU64::new(0),
            retired: parking_lot::Mutex::default(),
        }
    }

    /// The retained log of a task that lost its live state, or a new one.
    pub(crate) fn open(&self, task_id: &str) -> EventLog {
        if let Some(log) = self.take_retired(task_id) {
            return log;
        }
        EventLog {
            limits: self.limits,
            log: self
                .base
                .wrapping_add(self.counter.fetch_add(1, Ordering::Relaxed)),
            next: 1,
            events: VecDeque::new(),
            bytes: 0,
        }
    }

    /// The retained log of a task, if there is one.
    pub(crate) fn take_retired(&self, task_id: &str) -> Option<EventLog> {
        let mut r = self.retired.lock();
        let log = r.logs.remove(task_id)?;
        r.order.retain(|id| id != task_id);
        Some(log)
    }

    /// Keeps the log of a task whose live state is retired (the oldest
    /// retained go first).
    pub(crate) fn retire(&self, task_id: &str, log: EventLog) {
        if self.limits.retired == 0 {
            return;
        }
        let mut r = self.retired.lock();
        if r.logs.insert(task_id.to_owned(), log).is_none() {
            r.order.push_back(task_id.to_owned());
        }
        while r.order.len() > self.limits.retired {
            if let Some(old) = r.order.pop_front() {
                r.logs.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev() -> Arc<StreamResponse> {
        Arc::new(StreamResponse::default())
    }

    #[test]
    fn ids_round_trip_and_resume_only_what_is_held() {
        let limits = LogLimits {
            events: 3,
            bytes: usize::MAX,
            retired: 2,
        };
        let logs = Logs::new(limits);
        let mut log = logs.open("t");
        let start = log.last_id();
        assert_eq!(start.seq, 0);
        assert_eq!(EventId::parse(&start.to_string()), Some(start));
        assert_eq!(EventId::parse("nonsense"), None);
        let ids: Vec<_> = (0..5).map(|_| log.record(&ev()).0).collect();
        assert_eq!(ids[4].seq, 5);
        // Three kept: 3, 4, 5.
        assert_eq!(log.after(ids[1]).map(|v| v.len()), Some(3));
        assert_eq!(log.after(ids[4]).map(|v| v.len()), Some(0));
        assert!(log.after(ids[0]).is_none(), "event 2 is gone");
        assert!(log.after(start).is_none());
        let other = EventId {
            log: start.log ^ 1,
            seq: 1,
        };
        assert!(log.after(other).is_none());
        // A retired log comes back to the task's next live state.
        logs.retire("t", log);
        let back = logs.open("t");
        assert_eq!(back.last_id(), ids[4]);
        // Another task's log is another log.
        assert_ne!(logs.open("u").last_id().log, start.log);
    }
}
