//! The bytes of request bodies being received: at most
//! [`HandlerConfig::max_incoming_bytes_per_caller`] from one caller at
//! once, and [`HandlerConfig::max_incoming_bytes`] from all callers
//! together.
//!
//! Every other bound applies once a request is read: a body up to the
//! largest one allowed (`max_body_bytes`, 10 MiB) is held in memory while
//! it arrives, and a caller sending many at once (over many connections,
//! or HTTP/2 streams) made the server hold them all before any bound could
//! refuse one (measured: twenty 8 MB sends at once from one address, 388
//! MB of the server's memory at their first burst). So the server counts
//! the bytes of each body as they arrive, from the first frame that takes
//! it past [`SMALL_BODY_BYTES`] (or at once, when its `Content-Length`
//! says it will) until the body is read whole, or given up; a body that
//! would take its caller, or the server, over the bound is refused (
//! `Unavailable`: JSON-RPC -32603, HTTP 503, gRPC UNAVAILABLE, "try again
//! later"), unless nothing else is being received from that caller (or
//! at all), so one body of any size the body limit allows can always
//! arrive.
//!
//! The caller here is always an address (an IPv6 address by its /64
//! prefix): credentials are looked at once the request is read. The bound
//! is the server's ([`crate::A2aServer`]): a router mounted in an
//! application of its own reads bodies as that application does.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agentwire_types::A2aError;
use parking_lot::Mutex;

use super::open_tasks::Caller;
use crate::store::Owner;

/// Bodies up to this size are not counted (the bound on requests at once
/// covers them): the usual request costs nothing here.
pub(crate) const SMALL_BODY_BYTES: usize = 64 * 1024;

/// The bytes being received, by caller and in all.
pub(crate) struct IncomingBytes {
    per_caller: usize,
    total_max: usize,
    held: Mutex<Held>,
    pub(super) refused: AtomicU64,
}

#[derive(Default)]
struct Held {
    total: usize,
    by_caller: HashMap<Caller, usize>,
}

impl IncomingBytes {
    /// `None` when neither bound is set.
    pub(crate) fn new(per_caller: Option<usize>, total: Option<usize>) -> Option<Arc<Self>> {
        if per_caller.is_none() && total.is_none() {
            return None;
        }
        Some(Arc::new(Self {
            per_caller: per_caller.unwrap_or(usize::MAX),
            total_max: total.unwrap_or(usize::MAX),
            held: Mutex::default(),
            refused: AtomicU64::new(0),
        }))
    }

    /// The bytes of all bodies being received and counted now.
    pub(crate) fn held_now(&self) -> u64 {
        u64::try_from(self.held.lock().total).unwrap_or(u64::MAX)
    }

    /// The gate of the bodies a connection from `peer` sends.
    pub(crate) fn gate(self: &Arc<Self>, peer: Option<SocketAddr>) -> IncomingGate {
        IncomingGate {
            bytes: Arc::clone(self),
            caller: Caller::of(&Owner::default(), peer),
        }
    }
}

/// What one connection's bodies are counted against (one per connection,
/// shared by its requests).
pub(crate) struct IncomingGate {
    bytes: Arc<IncomingBytes>,
    caller: Caller,
}

/// A body refused by the bound: the error its reader gets. For gRPC its
/// source is the status tonic answers with.
#[derive(Debug)]
pub(crate) struct IncomingRefused {
    error: A2aError,
    status: tonic::Status,
}

impl IncomingRefused {
    /// The A2A error to answer with.
    pub(crate) fn error(&self) -> A2aError {
        self.error.clone()
    }
}

impl std::fmt::Display for IncomingRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.error.message)
    }
}

impl std::error::Error for IncomingRefused {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.status)
    }
}

impl IncomingGate {
    /// Counts `more` bytes of a body that holds `mine` already: refused
    /// when that would take the caller or the server over its bound while
    /// other bodies hold bytes.
    pub(crate) fn take(&self, mine: usize, more: usize) -> Result<(), IncomingRefused> {
        let bytes = &*self.bytes;
        let mut held = bytes.held.lock();
        let caller_now = held.by_caller.get(&self.caller).copied().unwrap_or(0);
        let over_caller = caller_now > mine && caller_now.saturating_add(more) > bytes.per_caller;
        let over_total = held.total > mine && held.total.saturating_add(more) > bytes.total_max;
        if over_caller || over_total {
            let (total, by_caller) = (held.total, caller_now);
            drop(held);
            bytes.refused.fetch_add(1, Ordering::Relaxed);
            let (limit, message) = if over_caller {
                (
                    "maxIncomingBytesPerCaller",
                    format!(
                        "{} are sending {by_caller} bytes of request bodies already, and this \
                         one would take them over {} (the server's max incoming bytes per \
                         caller): try again later, once those have arrived",
                        self.caller.describe(),
                        bytes.per_caller
                    ),
                )
            } else {
                (
                    "maxIncomingBytes",
                    format!(
                        "the server is receiving {total} bytes of request bodies already, and \
                         this one would take it over {} (its max incoming bytes): try again \
                         later",
                        bytes.total_max
                    ),
                )
            };
            tracing::debug!(caller = self.caller.describe(), more, "{message}");
            let error = A2aError::unavailable(message).with_metadata("limit", limit);
            return Err(IncomingRefused {
                status: error.to_grpc_status(),
                error,
            });
        }
        held.total += more;
        *held.by_caller.entry(self.caller.clone()).or_default() += more;
        Ok(())
    }

    /// A body that held `n` bytes is read, or given up.
    pub(crate) fn give_back(&self, n: usize) {
        let mut held = self.bytes.held.lock();
        held.total = held.total.saturating_sub(n);
        super::open_tasks::give_back(&mut held.by_caller, &self.caller, n);
    }

    /// The count of a body whose `Content-Length` is `declared` (when it
    /// has one); `None` when that says it is small enough not to count.
    pub(crate) fn body(self: &Arc<Self>, declared: Option<u64>) -> Option<BodyCount> {
        let declared = match declared {
            Some(n) if n <= SMALL_BODY_BYTES as u64 => return None,
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
            None => 0,
        };
        Some(BodyCount {
            gate: Arc::clone(self),
            declared,
            seen: 0,
            counted: 0,
        })
    }
}

/// One body's bytes at its connection's gate: its declared length, whole,
/// from its first read; otherwise what arrived, once past
/// [`SMALL_BODY_BYTES`]. What it counted is given back when it is dropped
/// (the body read whole, or given up) or refused.
pub(crate) struct BodyCount {
    gate: Arc<IncomingGate>,
    declared: usize,
    seen: usize,
    counted: usize,
}

impl BodyCount {
    /// `arrived` more bytes of the body arrived (0 at a read before any):
    /// refused past the bound.
    pub(crate) fn arrived(&mut self, arrived: usize) -> Result<(), IncomingRefused> {
        self.seen = self.seen.saturating_add(arrived);
        let arriving = if self.seen > SMALL_BODY_BYTES {
            self.seen
        } else {
            0
        };
        let due = self.declared.max(arriving);
        if due > self.counted {
            if let Err(refused) = self.gate.take(self.counted, due - self.counted) {
                self.give_back();
                return Err(refused);
            }
            self.counted = due;
        }
        Ok(())
    }

    fn give_back(&mut self) {
        let counted = std::mem::take(&mut self.counted);
        if counted > 0 {
            self.gate.give_back(counted);
        }
    }
}

impl Drop for BodyCount {
    fn drop(&mut self) {
        self.give_back();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> Option<SocketAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn bodies_are_bounded_per_caller_and_in_all() {
        let bytes = IncomingBytes::new(Some(1000), Some(2500)).unwrap();
        let a = bytes.gate(addr("127.0.0.1:1"));
        let a2 = bytes.gate(addr("127.0.0.1:2"));
        let b = bytes.gate(addr("127.0.0.2:1"));
        let c = bytes.gate(addr("127.0.0.3:1"));
        // Alone, a body over the bound arrives.
        a.take(0, 700).unwrap();
        a.take(700, 800).unwrap();
        // Another of the same address (another connection) does not.
        let e = a2.take(0, 10).unwrap_err();
        assert_eq!(e.error().kind, agentwire_types::ErrorKind::Unavailable);
        assert!(e.to_string().contains("127.0.0.1"), "{e}");
        assert_eq!(e.status.code(), tonic::Code::Unavailable);
        // Other addresses do, up to the total.
        b.take(0, 900).unwrap();
        let e = c.take(0, 200).unwrap_err();
        assert!(e.to_string().contains("max incoming bytes"), "{e}");
        assert_eq!(bytes.refused.load(Ordering::Relaxed), 2);
        // Read whole: the room comes back.
        a.give_back(1500);
        a2.take(0, 900).unwrap();
        c.take(0, 200).unwrap();
        a2.give_back(900);
        b.give_back(900);
        c.give_back(200);
        let held = bytes.held.lock();
        assert_eq!(held.total, 0);
        assert!(held.by_caller.is_empty());
    }

    #[test]
    fn a_body_counts_its_declared_length_or_what_arrived() {
        let bytes = IncomingBytes::new(Some(200_000), None).unwrap();
        let gate = Arc::new(bytes.gate(addr("127.0.0.1:1")));
        assert!(gate.body(Some(SMALL_BODY_BYTES as u64)).is_none());
        // Declared: counted whole at the first read.
        let mut declared = gate.body(Some(150_000)).unwrap();
        declared.arrived(0).unwrap();
        assert_eq!(bytes.held.lock().total, 150_000);
        // Chunked: counted once past the small size.
        let mut chunked = gate.body(None).unwrap();
        chunked.arrived(SMALL_BODY_BYTES).unwrap();
        assert_eq!(bytes.held.lock().total, 150_000);
        assert!(chunked.arrived(60_000).is_err());
        // Refused: what it counted is given back at once.
        assert_eq!(bytes.held.lock().total, 150_000);
        drop(declared);
        assert_eq!(bytes.held.lock().total, 0);
    }

    #[test]
    fn no_bound_no_gate() {
        assert!(IncomingBytes::new(None, None).is_none());
    }
}
