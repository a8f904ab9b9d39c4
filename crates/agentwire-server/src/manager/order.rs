//! The lock that orders a task's updates: held while an update is stored
//! and published, sometimes across an await (a database write).
//!
//! Taking and releasing it when nobody waits is one atomic operation each.
//! (A `tokio::sync::Mutex` also takes its waiter list's lock on every
//! release, and a blocking `SendMessage` takes the order lock four times.)
//! Waiters are woken through a `Notify` and try again; the lock is not
//! fair, which the task manager does not need: it orders updates, not
//! callers.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::Notify;

#[derive(Default)]
pub(crate) struct OrderLock {
    locked: AtomicBool,
    /// Tasks waiting in [`OrderLock::lock`] (a release without waiters
    /// notifies nobody).
    waiters: AtomicUsize,
    notify: Notify,
}

/// Holds an [`OrderLock`] until dropped.
pub(crate) struct OrderGuard<'a>(&'a OrderLock);

impl OrderLock {
    /// The lock, if it is free.
    pub(crate) fn try_lock(&self) -> Result<OrderGuard<'_>, ()> {
        self.locked
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::Relaxed)
            .map(|_| OrderGuard(self))
            .map_err(|_| ())
    }

    /// Waits for the lock.
    pub(crate) async fn lock(&self) -> OrderGuard<'_> {
        if let Ok(guard) = self.try_lock() {
            return guard;
        }
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(self);
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before trying again: a release after the attempt
            // wakes this waiter (or leaves a permit for it).
            notified.as_mut().enable();
            if let Ok(guard) = self.try_lock() {
                return guard;
            }
            notified.await;
        }
    }
}

/// Counts a waiter out when it stops waiting (it got the lock, or its
/// future was dropped).
struct Waiting<'a>(&'a OrderLock);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for OrderGuard<'_> {
    fn drop(&mut self) {
        let lock = self.0;
        lock.locked.store(false, Ordering::SeqCst);
        // The release and the waiter count are both sequentially
        // consistent: a waiter that counted itself after this load finds
        // the lock free when it tries again.
        if lock.waiters.load(Ordering::SeqCst) > 0 {
            lock.notify.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn try_lock_excludes() {
        let lock = OrderLock::default();
        let guard = lock.try_lock().unwrap();
        assert!(lock.try_lock().is_err());
        drop(guard);
        assert!(lock.try_lock().is_ok());
    }

    #[tokio::test]
    async fn a_waiter_gets_the_lock_when_it_is_released() {
        let lock = Arc::new(OrderLock::default());
        let guard = lock.try_lock().unwrap();
        let waiter = tokio::spawn({
            let lock = Arc::clone(&lock);
            async move {
                let _g = lock.lock().await;
            }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(guard);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("the waiter was woken")
            .unwrap();
        assert!(lock.try_lock().is_ok());
        assert_eq!(lock.waiters.load(Ordering::SeqCst), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn excludes_under_contention() {
        let lock = Arc::new(OrderLock::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let total = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let (lock, inside, total) =
                    (Arc::clone(&lock), Arc::clone(&inside), Arc::clone(&total));
                tokio::spawn(async move {
                    for i in 0..500 {
                        let _g = lock.lock().await;
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                        if i % 10 == 0 {
                            tokio::task::yield_now().await;
                        }
                        total.fetch_add(1, Ordering::SeqCst);
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in tasks {
            tokio::time::timeout(Duration::from_secs(20), t)
                .await
                .expect("no waiter is lost")
                .unwrap();
        }
        assert_eq!(total.load(Ordering::SeqCst), 8 * 500);
        assert_eq!(lock.waiters.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_dropped_waiter_is_counted_out() {
        let lock = OrderLock::default();
        let guard = lock.try_lock().unwrap();
        let waited = tokio::time::timeout(Duration::from_millis(10), lock.lock()).await;
        assert!(waited.is_err());
        assert_eq!(lock.waiters.load(Ordering::SeqCst), 0);
        drop(guard);
        drop(lock.lock().await);
    }
}
