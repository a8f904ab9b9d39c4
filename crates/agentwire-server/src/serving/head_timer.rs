//! The HTTP/1 request-head timeout of one connection, kept by the
//! connection's own task instead of the runtime's timer at every request.
//!
//! hyper starts the head timeout each time it waits for a request head:
//! on a kept-alive connection, after every response. With tokio's timer
//! that is a timer entry registered (the runtime's timer lock, taken again
//! when the head arrives and the entry goes) and a box, per request.
//!
//! Here the timer hyper is given ([`HeadTimer`]) only notes the deadline
//! of the head it waits for ([`HeadClock`]). The connection's task
//! (`Watch` in `accept.rs`) keeps one runtime timer for the connection,
//! armed no later than that deadline: as new heads' deadlines only move
//! later, it is re-armed when it fires (about once per timeout on a busy
//! connection), not at every request. When it fires past the deadline of
//! a head still awaited, the task marks that deadline expired and polls the
//! connection, whose sleep is then ready: hyper closes the connection as
//! with its own timer.
//!
//! hyper's HTTP/1 server uses its timer for the head timeout only, so one
//! deadline per connection is enough. HTTP/2 keeps tokio's timer (for its
//! pings).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// The deadline of the request head a connection waits for, shared by the
/// connection's sleep (which sets it) and its task (which watches it).
/// Deadlines are kept as nanoseconds after `origin`, plus one (0: none).
#[derive(Debug)]
pub(crate) struct HeadClock {
    origin: Instant,
    /// The deadline of the head awaited (0: none is awaited, or the head
    /// arrived before its sleep was polled).
    awaited: AtomicU64,
    /// The latest deadline the connection's task saw pass.
    expired: AtomicU64,
}

impl HeadClock {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            origin: Instant::now(),
            awaited: AtomicU64::new(0),
            expired: AtomicU64::new(0),
        })
    }

    fn code(&self, at: Instant) -> u64 {
        let nanos = at.saturating_duration_since(self.origin).as_nanos();
        u64::try_from(nanos).unwrap_or(u64::MAX - 1) + 1
    }

    fn instant(&self, code: u64) -> Instant {
        self.origin + Duration::from_nanos(code - 1)
    }

    /// The deadline of the head awaited, if hyper waits for one whose
    /// deadline was not seen to pass yet.
    pub(crate) fn awaited(&self) -> Option<Instant> {
        let awaited = self.awaited.load(Ordering::Relaxed);
        (awaited > self.expired.load(Ordering::Relaxed)).then(|| self.instant(awaited))
    }

    /// Marks the awaited head's deadline as passed when `now` is past it;
    /// true when it was not marked before.
    pub(crate) fn expire(&self, now: Instant) -> bool {
        let awaited = self.awaited.load(Ordering::Relaxed);
        if awaited <= self.expired.load(Ordering::Relaxed) || awaited > self.code(now) {
            return false;
        }
        self.expired.store(awaited, Ordering::Relaxed);
        true
    }
}

/// The timer hyper's HTTP/1 connection is given (see the module's text).
#[derive(Clone, Debug)]
pub(crate) struct HeadTimer(pub(crate) Arc<HeadClock>);

impl hyper::rt::Timer for HeadTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep_until(Instant::now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HeadSleep {
            deadline: self.0.code(deadline),
            clock: Arc::clone(&self.0),
        })
    }
}

/// A head's timeout: ready once the connection's task saw its deadline
/// pass. Polled, it notes its deadline for the task; dropped (the head
/// arrived), it takes the deadline back.
struct HeadSleep {
    deadline: u64,
    clock: Arc<HeadClock>,
}

impl Future for HeadSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        // The task that polls this sleep is the connection's task, which
        // is woken by its own timer (never later than this deadline) and
        // polls the connection again when the deadline passed.
        if self.clock.expired.load(Ordering::Relaxed) >= self.deadline {
            return Poll::Ready(());
        }
        self.clock.awaited.store(self.deadline, Ordering::Relaxed);
        Poll::Pending
    }
}

impl Drop for HeadSleep {
    fn drop(&mut self) {
        let _ = self.clock.awaited.compare_exchange(
            self.deadline,
            0,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }
}

impl hyper::rt::Sleep for HeadSleep {}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::rt::Timer;

    fn poll(sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>) -> Poll<()> {
        let waker = futures::task::noop_waker();
        sleep.as_mut().poll(&mut Context::from_waker(&waker))
    }

    /// A sleep is ready only once the task saw its deadline pass; a sleep
    /// dropped before it (its head arrived) leaves nothing awaited, and a
    /// later head's sleep is not ready for an earlier head's expiry.
    #[test]
    fn a_head_sleep_is_ready_once_its_deadline_is_seen_to_pass() {
        let clock = HeadClock::new();
        let timer = HeadTimer(Arc::clone(&clock));
        let start = Instant::now();
        let deadline = start + Duration::from_secs(10);

        // Made and dropped unpolled: the head was there.
        drop(timer.sleep_until(deadline));
        assert_eq!(clock.awaited(), None);

        let mut sleep = timer.sleep_until(deadline);
        assert!(poll(&mut sleep).is_pending());
        let awaited = clock.awaited().expect("awaited once polled");
        assert!(awaited.duration_since(deadline) < Duration::from_micros(1));
        assert!(!clock.expire(start + Duration::from_secs(9)), "not yet");
        assert!(poll(&mut sleep).is_pending());
        assert!(clock.expire(start + Duration::from_secs(11)));
        assert!(!clock.expire(start + Duration::from_secs(12)), "once");
        assert_eq!(clock.awaited(), None, "no longer awaited once expired");
        assert!(poll(&mut sleep).is_ready());
        drop(sleep);
        assert_eq!(clock.awaited(), None);

        // The next head's deadline is later: not expired by the last one.
        let mut next = timer.sleep_until(start + Duration::from_secs(20));
        assert!(poll(&mut next).is_pending());
        assert!(!clock.expire(start + Duration::from_secs(12)));
        assert!(poll(&mut next).is_pending());
        assert!(clock.expire(start + Duration::from_secs(21)));
        assert!(poll(&mut next).is_ready());
    }
}
