//! Optional duplicate detection for `SendMessage` (spec 3.3.1): with it on,
//! a message whose `messageId` was already used by the same caller to start
//! a task is answered with that task instead of starting another. Off by
//! default, since conformance runs and many clients reuse message ids.

use std::collections::VecDeque;

use dashmap::DashMap;
use parking_lot::Mutex;

use crate::store::Owner;

/// Remembers which task each (caller, messageId) started, for a bounded
/// number of recent messages.
pub(crate) struct Idempotency {
    seen: DashMap<String, String, ahash::RandomState>,
    order: Mutex<VecDeque<String>>,
    capacity: usize,
}

fn key(owner: &Owner, message_id: &str) -> String {
    format!(
        "{}\u{0}{}\u{0}{}",
        owner.tenant, owner.principal, message_id
    )
}

impl Idempotency {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            seen: DashMap::default(),
            order: Mutex::new(VecDeque::new()),
            capacity: capacity.max(1),
        }
    }

    /// The task this caller's message started before, if remembered.
    pub(crate) fn lookup(&self, owner: &Owner, message_id: &str) -> Option<String> {
        self.seen.get(&key(owner, message_id)).map(|t| t.clone())
    }

    /// Records that this caller's message starts `task_id`.
    pub(crate) fn record(&self, owner: &Owner, message_id: &str, task_id: &str) {
        let k = key(owner, message_id);
        if self.seen.insert(k.clone(), task_id.to_owned()).is_none() {
            let mut order = self.order.lock();
            order.push_back(k);
            while order.len() > self.capacity {
                if let Some(old) = order.pop_front() {
                    self.seen.remove(&old);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_scoped() {
        let i = Idempotency::new(2);
        let a = Owner::default();
        let b = Owner {
            principal: "b".into(),
            ..Default::default()
        };
        i.record(&a, "m1", "t1");
        assert_eq!(i.lookup(&a, "m1").as_deref(), Some("t1"));
        assert_eq!(i.lookup(&b, "m1"), None);
        i.record(&a, "m2", "t2");
        i.record(&a, "m3", "t3");
        assert_eq!(i.lookup(&a, "m1"), None);
        assert_eq!(i.lookup(&a, "m3").as_deref(), Some("t3"));
    }
}
