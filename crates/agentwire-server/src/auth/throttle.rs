//! Slowing down guessing: a peer address whose authentication attempts
//! keep failing is refused for a while without its credentials being
//! looked at.
//!
//! Written here (a table and a window count) because the rate-limiting
//! crates limit every request, not failures, and keep a state per key
//! without a bound; this table holds at most [`ThrottleConfig::max_peers`]
//! addresses, forgetting the oldest first.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How repeated failures from one address are answered.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ThrottleConfig {
    /// Failures allowed from one address within [`Self::window`]; the next
    /// attempts are refused until the window ends. Default 20.
    pub max_failures: u32,
    /// The window failures are counted in, and how long an address is
    /// refused after. Default 60 s.
    pub window: Duration,
    /// Addresses tracked at most. Default 10,000.
    pub max_peers: usize,
}

impl Default for ThrottleConfig {
    fn default() -> Self {
        Self {
            max_failures: 20,
            window: Duration::from_secs(60),
            max_peers: 10_000,
        }
    }
}

impl ThrottleConfig {
    /// `max_failures` failures per `window`.
    pub fn new(max_failures: u32, window: Duration) -> Self {
        Self {
            max_failures,
            window,
            ..Self::default()
        }
    }
}

struct Entry {
    /// Start of the current window.
    since: Instant,
    failures: u32,
}

/// The failure table.
pub(crate) struct Throttle {
    config: ThrottleConfig,
    peers: Mutex<HashMap<IpAddr, Entry>>,
}

impl Throttle {
    pub(crate) fn new(config: ThrottleConfig) -> Self {
        Self {
            config,
            peers: Mutex::new(HashMap::new()),
        }
    }

    /// `Some(wait)` when `peer` is refused for now.
    pub(crate) fn blocked(&self, peer: IpAddr) -> Option<Duration> {
        let peers = self.peers.lock();
        let e = peers.get(&peer)?;
        let age = e.since.elapsed();
        (e.failures >= self.config.max_failures && age < self.config.window)
            .then(|| self.config.window - age)
    }

    /// Counts a failure of `peer`.
    pub(crate) fn failed(&self, peer: IpAddr) {
        let mut peers = self.peers.lock();
        let window = self.config.window;
        if !peers.contains_key(&peer) && peers.len() >= self.config.max_peers.max(1) {
            peers.retain(|_, e| e.since.elapsed() < window);
            if peers.len() >= self.config.max_peers.max(1) {
                // Still full: forget the oldest window.
                if let Some(oldest) = peers.iter().min_by_key(|(_, e)| e.since).map(|(k, _)| *k) {
                    peers.remove(&oldest);
                }
            }
        }
        let e = peers.entry(peer).or_insert(Entry {
            since: Instant::now(),
            failures: 0,
        });
        if e.since.elapsed() >= window {
            e.since = Instant::now();
            e.failures = 0;
        }
        e.failures = e.failures.saturating_add(1);
    }

    #[cfg(test)]
    pub(crate) fn tracked(&self) -> usize {
        self.peers.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_block_then_the_table_stays_bounded() {
        let t = Throttle::new(ThrottleConfig {
            max_failures: 3,
            window: Duration::from_secs(600),
            max_peers: 4,
        });
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        for _ in 0..3 {
            assert!(t.blocked(a).is_none());
            t.failed(a);
        }
        assert!(t.blocked(a).is_some());
        for i in 0..100u8 {
            t.failed(IpAddr::from([10, 1, 0, i]));
        }
        assert!(t.tracked() <= 4);
    }
}
