//! The in-memory store's table of tasks: a hash table split into shards,
//! each behind its own lock, whose slots are two pointers.
//!
//! The slots hold no copy of the task id: a task is found by hashing the id
//! and comparing it with the id inside the task. Eviction, which runs on
//! every finished task and reaches tasks that have long left the caches,
//! finds a slot by the hash it kept and the task's address, so it reads
//! neither the task nor a key before it frees them. Small slots keep the
//! table itself small, which matters for the same reason.

use std::sync::Arc;

use a2a_types::Task;
use hashbrown::HashTable;
use hashbrown::hash_table::Entry;
use parking_lot::RwLock;

use super::Owner;

/// Number of shards (a power of two).
const SHARDS: usize = 32;

/// One stored task.
pub(super) struct Slot {
    /// Shared with the answers that read it (a blocking `SendMessage`
    /// answers with the stored task itself); an update copies it only while
    /// such an answer still holds it.
    pub(super) task: Arc<Task>,
    /// `None` for the anonymous owner (no tenant, no principal).
    owner: Option<Box<Owner>>,
}

impl Slot {
    pub(super) fn new(task: Arc<Task>, owner: &Owner) -> Self {
        let anonymous = owner.tenant.is_empty() && owner.principal.is_empty();
        Self {
            task,
            owner: (!anonymous).then(|| Box::new(owner.clone())),
        }
    }

    /// Who may see the task.
    pub(super) fn owner(&self) -> Owner {
        self.owner.as_deref().cloned().unwrap_or_default()
    }

    pub(super) fn is_owned_by(&self, owner: &Owner) -> bool {
        match &self.owner {
            Some(o) => **o == *owner,
            None => owner.tenant.is_empty() && owner.principal.is_empty(),
        }
    }
}

/// Tasks by id.
pub(super) struct TaskTable {
    hasher: ahash::RandomState,
    shards: Box<[RwLock<HashTable<Slot>>]>,
}

impl Default for TaskTable {
    fn default() -> Self {
        Self {
            hasher: ahash::RandomState::new(),
            shards: (0..SHARDS).map(|_| RwLock::default()).collect(),
        }
    }
}

impl TaskTable {
    /// The hash of a task id (the table's and the eviction queue's).
    pub(super) fn hash(&self, id: &str) -> u64 {
        self.hasher.hash_one(id)
    }

    fn shard(&self, hash: u64) -> &RwLock<HashTable<Slot>> {
        // Bits the shard's own table does not use to place the slot.
        &self.shards[(hash >> 40) as usize & (SHARDS - 1)]
    }

    /// Adds a task; `false` (and nothing added) when one with the same id
    /// is there.
    pub(super) fn insert(&self, hash: u64, slot: Slot) -> bool {
        let mut shard = self.shard(hash).write();
        match shard.entry(
            hash,
            |s| s.task.id == slot.task.id,
            |s| self.hash(&s.task.id),
        ) {
            Entry::Occupied(_) => false,
            Entry::Vacant(v) => {
                v.insert(slot);
                true
            }
        }
    }

    /// `f` on the task with this id, under its shard's read lock.
    pub(super) fn read<R>(&self, hash: u64, id: &str, f: impl FnOnce(&Slot) -> R) -> Option<R> {
        let shard = self.shard(hash).read();
        shard.find(hash, |s| s.task.id == id).map(f)
    }

    /// `f` on the task with this id, under its shard's write lock.
    pub(super) fn write<R>(
        &self,
        hash: u64,
        id: &str,
        f: impl FnOnce(&mut Slot) -> R,
    ) -> Option<R> {
        let mut shard = self.shard(hash).write();
        shard.find_mut(hash, |s| s.task.id == id).map(f)
    }

    /// Removes this very task (the same allocation, found by address: the
    /// task is not read). The slot is dropped by the caller, outside the
    /// lock.
    pub(super) fn remove_exact(&self, hash: u64, task: &Arc<Task>) -> Option<Slot> {
        let mut shard = self.shard(hash).write();
        match shard.find_entry(hash, |s| Arc::ptr_eq(&s.task, task)) {
            Ok(entry) => Some(entry.remove().0),
            Err(_) => None,
        }
    }

    /// `f` on every task, one shard (read-locked) at a time.
    pub(super) fn for_each(&self, mut f: impl FnMut(&Slot)) {
        for shard in self.shards.iter() {
            for slot in shard.read().iter() {
                f(slot);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str) -> Arc<Task> {
        Arc::new(Task {
            id: id.into(),
            ..Default::default()
        })
    }

    #[test]
    fn finds_inserts_once_and_removes_by_address() {
        let t = TaskTable::default();
        let bob = Owner {
            principal: "bob".into(),
            ..Default::default()
        };
        for i in 0..1000 {
            let id = format!("t{i}");
            let owner = if i % 2 == 0 { &bob } else { &Owner::default() };
            assert!(t.insert(t.hash(&id), Slot::new(task(&id), owner)));
        }
        let h = t.hash("t7");
        assert!(!t.insert(h, Slot::new(task("t7"), &bob)), "ids are unique");
        assert_eq!(t.read(h, "t7", |s| s.owner()), Some(Owner::default()));
        let h4 = t.hash("t4");
        assert!(t.read(h4, "t4", |s| s.is_owned_by(&bob)).unwrap());
        assert!(
            !t.read(h4, "t4", |s| s.is_owned_by(&Owner::default()))
                .unwrap()
        );
        assert_eq!(t.read(t.hash("nope"), "nope", |_| ()), None);

        // Only the very task stored is removed, not another with its id.
        let stored = t.read(h, "t7", |s| Arc::clone(&s.task)).unwrap();
        assert!(t.remove_exact(h, &task("t7")).is_none());
        assert!(t.remove_exact(h, &stored).is_some());
        assert!(t.read(h, "t7", |_| ()).is_none());
        assert!(t.remove_exact(h, &stored).is_none());

        let mut n = 0;
        t.for_each(|_| n += 1);
        assert_eq!(n, 999);
    }
}
