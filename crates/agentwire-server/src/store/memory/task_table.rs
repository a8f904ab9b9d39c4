//! The in-memory store's table of tasks: a hash table split into shards,
//! each behind its own lock, whose slots are four words: an open task
//! (shared) or a finished one (packed, see `packed.rs`), its owner, and
//! the store's accounting of it (its estimated size, and when it last
//! changed).
//!
//! The slots hold no copy of the task id: a task is found by hashing the id
//! and comparing it with the id inside the task. Eviction, which runs on
//! every finished task and reaches tasks that have long left the caches,
//! finds a slot by the hash it kept and the address of the packed task, so
//! it compares no key before it frees them. Small slots keep the table
//! itself small, which matters for the same reason.
//!
use std::sync::Arc;

use agentwire_types::{A2aResult, Task, TaskState, Timestamp};
use hashbrown::HashTable;
use hashbrown::hash_table::Entry;
use parking_lot::RwLock;

use super::packed::PackedTask;
use crate::store::Owner;

/// The anonymous owner (no tenant, no principal).
static ANONYMOUS: Owner = Owner {
    tenant: String::new(),
    principal: String::new(),
};

/// The owner a slot keeps (`None`: the anonymous one).
fn owner_or_anonymous(owner: &Option<Arc<Owner>>) -> &Owner {
    owner.as_deref().unwrap_or(&ANONYMOUS)
}

/// Number of shards (a power of two).
const SHARDS: usize = 32;

/// What a slot holds (cloned cheaply: a listing keeps what it found).
#[derive(Clone)]
pub(super) enum Held {
    /// A task that can still change. Shared with the answers that read it
    /// (a blocking `SendMessage` answers with the stored task itself); an
    /// update copies it only while such an answer still holds it.
    Open(Arc<Task>),
    /// A task in a terminal state: packed, as it will not change again.
    Finished(PackedTask),
}

/// One stored task.
pub(super) struct Slot {
    pub(super) held: Held,
    /// `None` for the anonymous owner (no tenant, no principal).
    owner: Option<Arc<Owner>>,
    /// The bytes the store accounts to this task (see `MemoryStore`).
    pub(super) bytes: u32,
    /// When the task last changed, in the store's ticks (see `Clock`).
    pub(super) touched: u32,
}

impl Slot {
    /// A slot for a task: packed at once when it is already terminal
    /// (shared, not copied, when it is open).
    pub(super) fn new(task: &Arc<Task>, owner: &Owner, bytes: u32, touched: u32) -> Self {
        let anonymous = owner.tenant.is_empty() && owner.principal.is_empty();
        let held = if task.state().is_terminal() {
            Held::Finished(PackedTask::pack(task))
        } else {
            Held::Open(Arc::clone(task))
        };
        Self {
            held,
            owner: (!anonymous).then(|| Arc::new(owner.clone())),
            bytes,
            touched,
        }
    }

    /// Packs the task (it reached a terminal state): returns its token for
    /// the eviction queue, and the task as it was.
    pub(super) fn finish(&mut self) -> Option<(usize, Arc<Task>)> {
        let Held::Open(task) = &self.held else {
            return None;
        };
        let packed = PackedTask::pack(task);
        let token = packed.token();
        match std::mem::replace(&mut self.held, Held::Finished(packed)) {
            Held::Open(task) => Some((token, task)),
            Held::Finished(_) => None,
        }
    }

    /// The eviction token of a finished task.
    pub(super) fn token(&self) -> Option<usize> {
        match &self.held {
            Held::Finished(p) => Some(p.token()),
            Held::Open(_) => None,
        }
    }

    pub(super) fn id(&self) -> &str {
        match &self.held {
            Held::Open(t) => &t.id,
            Held::Finished(p) => p.id(),
        }
    }

    pub(super) fn context_id(&self) -> &str {
        match &self.held {
            Held::Open(t) => &t.context_id,
            Held::Finished(p) => p.context_id(),
        }
    }

    pub(super) fn state(&self) -> TaskState {
        match &self.held {
            Held::Open(t) => t.state(),
            Held::Finished(p) => p.state(),
        }
    }

    pub(super) fn status_timestamp(&self) -> Option<Timestamp> {
        match &self.held {
            Held::Open(t) => t.status_timestamp(),
            Held::Finished(p) => p.status_timestamp(),
        }
    }

    /// The task, shared when it is open, decoded when it is packed.
    pub(super) fn task(&self) -> A2aResult<Arc<Task>> {
        match &self.held {
            Held::Open(t) => Ok(Arc::clone(t)),
            Held::Finished(p) => p.unpack().map(Arc::new),
        }
    }
    /// Who may see the task.
    pub(super) fn owner(&self) -> Owner {
        self.owner_ref().clone()
    }

    fn owner_ref(&self) -> &Owner {
        owner_or_anonymous(&self.owner)
    }

    pub(super) fn is_owned_by(&self, owner: &Owner) -> bool {
        match &self.owner {
            Some(o) => **o == *owner,
            None => owner.tenant.is_empty() && owner.principal.is_empty(),
        }
    }
}

impl Held {
    /// A copy of the task with only the last `history` messages (all when
    /// `None`), and its artifacts only when asked: nothing is cloned or
    /// kept that the answer would drop.
    pub(super) fn copy(&self, history: Option<usize>, artifacts: bool) -> A2aResult<Task> {
        match self {
            Held::Open(t) => {
                let keep = history.map_or(t.history.len(), |n| n.min(t.history.len()));
                Ok(Task {
                    generation: t.generation,
                    id: t.id.clone(),
                    context_id: t.context_id.clone(),
                    status: t.status.clone(),
                    artifacts: if artifacts {
                        t.artifacts.clone()
                    } else {
                        Vec::new()
                    },
                    history: t.history[t.history.len() - keep..].to_vec(),
                    metadata: t.metadata.clone(),
                })
            }
            Held::Finished(p) => {
                let mut t = if artifacts {
                    p.unpack()?
                } else {
                    p.unpack_without_artifacts()?
                };
                t.truncate_history(history);
                Ok(t)
            }
        }
    }
}

/// One shard of the table.
type Shard = HashTable<Slot>;

/// Tasks by id.
pub(super) struct TaskTable {
    hasher: ahash::RandomState,
    shards: Box<[RwLock<Shard>]>,
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

    fn shard(&self, hash: u64) -> &RwLock<Shard> {
        &self.shards[Self::shard_of(hash)]
    }

    fn shard_of(hash: u64) -> usize {
        // Bits the shard's own table does not use to place the slot.
        (hash >> 40) as usize & (SHARDS - 1)
    }

    /// Adds the slot made of `task`; gives the slot back (and adds
    /// nothing) when one with the same id is there.
    pub(super) fn insert(&self, hash: u64, slot: Slot, task: &Task) -> Result<(), Slot> {
        let mut shard = self.shard(hash).write();
        match shard.entry(hash, |s| s.id() == task.id, |s| self.hash(s.id())) {
            Entry::Occupied(_) => Err(slot),
            Entry::Vacant(v) => {
                v.insert(slot);
                Ok(())
            }
        }
    }

    /// `f` on the task with this id, under its shard's read lock.
    pub(super) fn read<R>(&self, hash: u64, id: &str, f: impl FnOnce(&Slot) -> R) -> Option<R> {
        let shard = self.shard(hash).read();
        shard.find(hash, |s| s.id() == id).map(f)
    }

    /// `f` on the task with this id, under its shard's write lock.
    pub(super) fn write<R>(
        &self,
        hash: u64,
        id: &str,
        f: impl FnOnce(&mut Slot) -> R,
    ) -> Option<R> {
        let mut shard = self.shard(hash).write();
        shard.find_mut(hash, |s| s.id() == id).map(f)
    }

    /// Removes the finished task with this token (found by the address of
    /// its encoding: the task is not read). The slot is dropped by the
    /// caller, outside the lock.
    pub(super) fn remove_exact(&self, hash: u64, token: usize) -> Option<Slot> {
        let mut shard = self.shard(hash).write();
        let slot = shard
            .find_entry(hash, |s| s.token() == Some(token))
            .ok()?
            .remove()
            .0;
        Some(slot)
    }

    /// Removes the tasks `drop` picks, one shard (write-locked) at a time;
    /// returns them, to be dropped by the caller outside the locks.
    pub(super) fn remove_where(&self, mut drop: impl FnMut(&Slot) -> bool) -> Vec<Slot> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            out.extend(shard.write().extract_if(|slot| drop(slot)));
        }
        out
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
    fn slots_are_four_words() {
        assert_eq!(
            std::mem::size_of::<Slot>(),
            4 * std::mem::size_of::<usize>()
        );
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
            assert!(
                t.insert(t.hash(&id), Slot::new(&task(&id), owner, 0, 0), &task(&id))
                    .is_ok()
            );
        }
        let h = t.hash("t7");
        assert!(
            t.insert(h, Slot::new(&task("t7"), &bob, 0, 0), &task("t7"))
                .is_err(),
            "ids are unique"
        );
        assert_eq!(t.read(h, "t7", |s| s.owner()), Some(Owner::default()));
        let h4 = t.hash("t4");
        assert!(t.read(h4, "t4", |s| s.is_owned_by(&bob)).unwrap());
        assert!(
            !t.read(h4, "t4", |s| s.is_owned_by(&Owner::default()))
                .unwrap()
        );
        assert_eq!(t.read(t.hash("nope"), "nope", |_| ()), None);

        // Open tasks are not removed by token; a finished one is, by its own
        // token only.
        assert!(t.read(h, "t7", |s| s.token()).unwrap().is_none());
        let (token, before) = t.write(h, "t7", |s| s.finish()).unwrap().unwrap();
        assert_eq!(before.id, "t7");
        assert!(
            t.write(h, "t7", |s| s.finish()).unwrap().is_none(),
            "packed once"
        );
        assert_eq!(t.read(h, "t7", |s| s.token()).unwrap(), Some(token));
        assert_eq!(t.read(h, "t7", |s| s.id().to_owned()).unwrap(), "t7");
        assert_eq!(*t.read(h, "t7", |s| s.task()).unwrap().unwrap(), *before);
        assert!(t.remove_exact(h, token ^ 1).is_none());
        assert!(t.remove_exact(t.hash("t8"), token).is_none());
        assert!(t.remove_exact(h, token).is_some());
        assert!(t.read(h, "t7", |_| ()).is_none());
        assert!(t.remove_exact(h, token).is_none());

        // A task stored terminal is packed at once.
        let done = Arc::new(Task {
            id: "done".into(),
            context_id: "c".into(),
            status: Some(agentwire_types::TaskStatus::new(TaskState::Completed)),
            ..Default::default()
        });
        let hd = t.hash("done");
        assert!(t.insert(hd, Slot::new(&done, &bob, 0, 0), &done).is_ok());
        let slot_state = t.read(hd, "done", |s| {
            (s.token().is_some(), s.state(), s.context_id().to_owned())
        });
        assert_eq!(
            slot_state.unwrap(),
            (true, TaskState::Completed, "c".to_owned())
        );
        assert!(
            t.insert(hd, Slot::new(&done, &bob, 0, 0), &done).is_err(),
            "ids are unique, packed or not"
        );

        let mut n = 0;
        t.for_each(|_| n += 1);
        assert_eq!(n, 1000);
    }
}
