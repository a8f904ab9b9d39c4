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
//! The table also keeps the listing indexes (`index.rs`) in step with the
//! tasks it holds: every change of a slot that moves a task in the listing
//! order is recorded under the slot's shard lock, and the indexes take a
//! shard's changes in batches, always before anyone reads them (see
//! `Shard`). To take a task out of them, eviction reads the head of its
//! encoding (id, context and status, the first bytes, next to where the
//! allocator writes when it frees it).

use std::sync::Arc;

use agentwire_types::{A2aResult, Task, TaskState, Timestamp};
use hashbrown::HashTable;
use hashbrown::hash_table::Entry;
use parking_lot::{Mutex, RwLock};

use super::index::{Change, Indexed, ListIndex, Position};
use super::packed::PackedTask;
use crate::store::Owner;

/// The anonymous owner (no tenant, no principal).
static ANONYMOUS: Owner = Owner {
    tenant: String::new(),
    principal: String::new(),
};

/// The owner a slot or a change keeps (`None`: the anonymous one).
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
    /// `None` for the anonymous owner (no tenant, no principal). Shared
    /// with the index changes not applied yet (see `Shard`).
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

    /// Where the task stands in the listing indexes.
    pub(super) fn position(&self) -> Position {
        Position::new(self.state(), self.status_timestamp())
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
                let mut t = p.unpack()?;
                t.truncate_history(history);
                if !artifacts {
                    t.artifacts = Vec::new();
                }
                Ok(t)
            }
        }
    }
}

/// Where a change to the indexes reads the task's id and context from.
enum Keys {
    /// The finished task itself (shared, not copied).
    Packed(PackedTask),
    /// A copy of an open task's (holding the task would make its next
    /// update copy it).
    Owned { id: Box<str>, context: Box<str> },
}

/// A change to the listing indexes that waits for its shard's next batch.
struct Pending {
    /// The task id's hash (the table's): a later change of the same task
    /// finds this one by it (see `Shard::fold`).
    hash: u64,
    keys: Keys,
    owner: Option<Arc<Owner>>,
    change: Change,
    /// The bytes of a removed task that this change keeps alive (0 for a
    /// task still stored).
    kept: u32,
}

impl Pending {
    fn new(hash: u64, slot: &Slot, change: Change) -> Self {
        let keys = match &slot.held {
            Held::Finished(p) => Keys::Packed(p.clone()),
            Held::Open(t) => Keys::Owned {
                id: t.id.as_str().into(),
                context: t.context_id.as_str().into(),
            },
        };
        let kept = match change {
            Change::Remove(_) => slot.bytes,
            Change::Insert(_) | Change::Moved(..) => 0,
        };
        Self {
            hash,
            keys,
            owner: slot.owner.clone(),
            change,
            kept,
        }
    }

    fn id(&self) -> &[u8] {
        match &self.keys {
            Keys::Packed(p) => p.id_bytes(),
            Keys::Owned { id, .. } => id.as_bytes(),
        }
    }

    fn indexed(&self) -> (Indexed<'_>, Change) {
        let context = match &self.keys {
            Keys::Packed(p) => p.context_id_bytes(),
            Keys::Owned { context, .. } => context.as_bytes(),
        };
        let task = Indexed {
            owner: owner_or_anonymous(&self.owner),
            context,
            id: self.id(),
        };
        (task, self.change)
    }
}

/// A shard's changes are applied when this many wait, if the indexes are
/// free; ...
const BATCH: usize = 32;
/// ... and at once, waiting for the indexes, when this many wait ...
const BATCH_MAX: usize = 8 * BATCH;
/// ... or when the tasks removed in them (which they keep alive until
/// then) account for this many bytes: 32 shards keep at most 8 MiB waiting,
/// and as much again in the batches being applied (one per shard).
const BATCH_BYTES: usize = 256 * 1024;

/// One shard: its tasks, and the changes to the listing indexes made under
/// its lock that the indexes have not taken yet.
///
/// The indexes take a shard's changes in batches, in the order they were
/// made (a task's changes are all in its shard's list), and every reader
/// of the indexes applies what waits first (`TaskTable::index`). One lock
/// per change made the threads serving one owner (whose index is one map
/// behind one lock) wait on each other at every request, and a thread that
/// waits for a lock soon yields its core to another process. A batch takes
/// the index's lock once per 32 changes, and only when no other thread
/// holds it, until too many wait. A batch is taken out of the shard and
/// applied outside its lock (`TaskTable::apply_batch`): applying one takes
/// tens of microseconds, during which the shard's tasks stay available.
#[derive(Default)]
struct Shard {
    slots: HashTable<Slot>,
    pending: Vec<Pending>,
    /// The bytes of the removed tasks that `pending` keeps.
    pending_bytes: usize,
}

impl Shard {
    /// Records a change; says when the shard's batch is due (`Some`), and
    /// whether it must be applied even if that means waiting for the
    /// indexes (`Some(true)`).
    #[must_use]
    fn push(&mut self, pending: Pending) -> Option<bool> {
        if self.pending.capacity() == 0 {
            self.pending.reserve_exact(BATCH);
        }
        self.pending_bytes += pending.kept as usize;
        self.pending.push(pending);
        (self.pending.len() >= BATCH)
            .then_some(self.pending.len() >= BATCH_MAX || self.pending_bytes >= BATCH_BYTES)
    }

    /// Folds a change of the task with this hash and id into its earlier
    /// change when one still waits (stored, then finished: stored
    /// finished); false when there is none to fold it into. Most tasks
    /// finish within their request, before their shard's batch is applied,
    /// and moving a task in the indexes cost as much as storing it there.
    fn fold(pending: &mut [Pending], hash: u64, id: &[u8], change: Change) -> bool {
        let earlier = pending
            .iter_mut()
            .rev()
            .find(|p| p.hash == hash && p.id() == id);
        match earlier.and_then(|p| Some((p.change.then(change)?, p))) {
            Some((folded, p)) => {
                p.change = folded;
                true
            }
            None => false,
        }
    }
}

/// Tasks by id, and the listing indexes of the tasks.
pub(super) struct TaskTable {
    hasher: ahash::RandomState,
    shards: Box<[RwLock<Shard>]>,
    /// One per shard, held while a batch of the shard's changes is applied:
    /// batches are applied one at a time, in their order. Taken before the
    /// shard's lock, never while holding it.
    appliers: Box<[Mutex<()>]>,
    /// Written by the holder of a shard's applier (never while holding a
    /// shard's lock; readers of the index take no shard lock while they
    /// hold it).
    index: ListIndex,
}

impl Default for TaskTable {
    fn default() -> Self {
        Self {
            hasher: ahash::RandomState::new(),
            shards: (0..SHARDS).map(|_| RwLock::default()).collect(),
            appliers: (0..SHARDS).map(|_| Mutex::new(())).collect(),
            index: ListIndex::default(),
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

    /// Applies shard `at`'s waiting changes, taken out of the shard (whose
    /// lock is held only to take them, and to put back what the indexes
    /// did not take). Without `wait`, nothing is waited for: not another
    /// thread applying the shard's previous batch, nor the indexes.
    fn apply_batch(&self, at: usize, wait: bool) {
        let _applying = if wait {
            self.appliers[at].lock()
        } else {
            match self.appliers[at].try_lock() {
                Some(applying) => applying,
                None => return,
            }
        };
        let mut batch = {
            let mut shard = self.shards[at].write();
            shard.pending_bytes = 0;
            std::mem::take(&mut shard.pending)
        };
        if batch.is_empty() {
            return;
        }
        let applied = self.index.apply(batch.iter().map(Pending::indexed), wait);
        if applied < batch.len() {
            // The rest goes back before what was recorded meanwhile.
            batch.drain(..applied);
            let mut shard = self.shards[at].write();
            shard.pending_bytes += batch.iter().map(|p| p.kept as usize).sum::<usize>();
            batch.append(&mut shard.pending);
            shard.pending = batch;
        }
        // The changes applied, and the removed tasks they kept, are freed
        // here, outside the shard's lock.
    }

    /// Applies the batch of the task's shard when a change made it due
    /// (what `Shard::push` said), once the shard's lock is released.
    fn apply_due(&self, hash: u64, due: Option<bool>) {
        if let Some(wait) = due {
            self.apply_batch(Self::shard_of(hash), wait);
        }
    }

    /// Adds the slot made of `task`; gives the slot back (and adds
    /// nothing) when one with the same id is there. The index keys are read
    /// from `task`, not from the slot (a finished task is packed there).
    pub(super) fn insert(&self, hash: u64, slot: Slot, task: &Task) -> Result<(), Slot> {
        let due = {
            let mut guard = self.shard(hash).write();
            let shard = &mut *guard;
            match shard
                .slots
                .entry(hash, |s| s.id() == task.id, |s| self.hash(s.id()))
            {
                Entry::Occupied(_) => return Err(slot),
                Entry::Vacant(v) => {
                    let change =
                        Change::Insert(Position::new(task.state(), task.status_timestamp()));
                    let pending = Pending::new(hash, &slot, change);
                    v.insert(slot);
                    shard.push(pending)
                }
            }
        };
        self.apply_due(hash, due);
        Ok(())
    }

    /// `f` on the task with this id, under its shard's read lock.
    pub(super) fn read<R>(&self, hash: u64, id: &str, f: impl FnOnce(&Slot) -> R) -> Option<R> {
        let shard = self.shard(hash).read();
        shard.slots.find(hash, |s| s.id() == id).map(f)
    }

    /// `f` on the task with this id, under its shard's write lock. A task
    /// whose status `f` changed moves in the listing indexes.
    pub(super) fn write<R>(
        &self,
        hash: u64,
        id: &str,
        f: impl FnOnce(&mut Slot) -> R,
    ) -> Option<R> {
        let (out, due) = {
            let mut guard = self.shard(hash).write();
            let shard = &mut *guard;
            let slot = shard.slots.find_mut(hash, |s| s.id() == id)?;
            // Only an open task changes.
            let before = matches!(slot.held, Held::Open(_)).then(|| slot.position());
            let out = f(slot);
            let mut due = None;
            if let Some(before) = before {
                let after = slot.position();
                let change = Change::Moved(before, after);
                if after != before && !Shard::fold(&mut shard.pending, hash, id.as_bytes(), change)
                {
                    let pending = Pending::new(hash, slot, change);
                    due = shard.push(pending);
                }
            }
            (out, due)
        };
        self.apply_due(hash, due);
        Some(out)
    }

    /// Removes the finished task with this token (found by the address of
    /// its encoding: the task is not read). The slot is dropped by the
    /// caller, outside the lock.
    pub(super) fn remove_exact(&self, hash: u64, token: usize) -> Option<Slot> {
        let (slot, due) = {
            let mut guard = self.shard(hash).write();
            let shard = &mut *guard;
            let slot = shard
                .slots
                .find_entry(hash, |s| s.token() == Some(token))
                .ok()?
                .remove()
                .0;
            let pending = Pending::new(hash, &slot, Change::Remove(slot.position()));
            let due = shard.push(pending);
            (slot, due)
        };
        self.apply_due(hash, due);
        Some(slot)
    }

    /// Removes the tasks `drop` picks, one shard (write-locked) at a time;
    /// returns them, to be dropped by the caller outside the locks.
    pub(super) fn remove_where(&self, mut drop: impl FnMut(&Slot) -> bool) -> Vec<Slot> {
        let mut out = Vec::new();
        for (at, shard) in self.shards.iter().enumerate() {
            {
                let mut guard = shard.write();
                let shard = &mut *guard;
                let from = out.len();
                out.extend(shard.slots.extract_if(|slot| drop(slot)));
                for slot in &out[from..] {
                    let hash = self.hash(slot.id());
                    let pending = Pending::new(hash, slot, Change::Remove(slot.position()));
                    // Applied below, whether due or not.
                    let _ = shard.push(pending);
                }
            }
            self.apply_batch(at, true);
        }
        out
    }

    /// The listing indexes, with every change made so far applied.
    pub(super) fn index(&self) -> &ListIndex {
        // Every shard's applier is taken, so a batch another thread is
        // applying is applied before the indexes are read.
        for at in 0..self.shards.len() {
            self.apply_batch(at, true);
        }
        &self.index
    }

    /// `f` on every task, one shard (read-locked) at a time.
    pub(super) fn for_each(&self, mut f: impl FnMut(&Slot)) {
        for shard in self.shards.iter() {
            for slot in shard.read().slots.iter() {
                f(slot);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A status in this state, at this time (in milliseconds).
    fn status(s: TaskState, ms: i64) -> agentwire_types::TaskStatus {
        agentwire_types::TaskStatus {
            state: s as i32,
            timestamp: Some(Timestamp::from_millis(ms)),
            ..Default::default()
        }
    }

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

    /// Changes wait while another thread holds the indexes (a request never
    /// waits for a listing), and every reader of the indexes sees them all.
    #[test]
    fn changes_wait_for_a_busy_index_and_readers_see_them() {
        let t = TaskTable::default();
        let owner = Owner::default();
        let first = task("first");
        assert!(
            t.insert(t.hash("first"), Slot::new(&first, &owner, 0, 0), &first)
                .is_ok()
        );
        let listed = |t: &TaskTable| t.index().read(&owner, None, None, |r| r.len());
        assert_eq!(listed(&t), Some(1));
        // The owner's index is read-locked here: more changes than a batch
        // are made, none waits for the lock, none is applied.
        let n = 5 * BATCH;
        let held = t.index.read(&owner, None, None, |r| {
            for i in 0..n {
                let id = format!("t{i}");
                let task = task(&id);
                assert!(
                    t.insert(t.hash(&id), Slot::new(&task, &owner, 0, 0), &task)
                        .is_ok()
                );
            }
            r.len()
        });
        assert_eq!(held, Some(1));
        let waiting: usize = t.shards.iter().map(|s| s.read().pending.len()).sum();
        assert_eq!(waiting, n, "nothing applied while the index was busy");
        assert_eq!(listed(&t), Some(n + 1), "the reader applied them all");
        let waiting: usize = t.shards.iter().map(|s| s.read().pending.len()).sum();
        assert_eq!(waiting, 0);
    }

    /// A task that changes while its earlier change waits changes that
    /// one: stored, moved twice and finished in one batch is one change, and
    /// the indexes list it where it ended. A change never folds into the
    /// removal of an earlier task with the same id.
    #[test]
    fn changes_of_a_waiting_task_fold_into_one() {
        let t = TaskTable::default();
        let owner = Owner::default();
        let at = status;
        let store = |t: &TaskTable, id: &str, s: TaskState, ms: i64| {
            let task = Arc::new(Task {
                id: id.into(),
                context_id: "c".into(),
                status: Some(at(s, ms)),
                ..Default::default()
            });
            assert!(
                t.insert(t.hash(id), Slot::new(&task, &owner, 0, 0), &task)
                    .is_ok()
            );
        };
        let set = |t: &TaskTable, id: &str, s: TaskState, ms: i64| {
            t.write(t.hash(id), id, |slot| {
                let Held::Open(task) = &mut slot.held else {
                    panic!("open")
                };
                Arc::make_mut(task).status = Some(at(s, ms));
                if s.is_terminal() {
                    slot.finish();
                }
            })
            .expect("stored");
        };
        let waiting =
            |t: &TaskTable| -> usize { t.shards.iter().map(|s| s.read().pending.len()).sum() };
        let listed = |t: &TaskTable, state: Option<TaskState>| {
            t.index()
                .read(&owner, Some(b"c"), state, |r| {
                    r.descending_from(None)
                        .map(|e| (e.millis, String::from_utf8_lossy(&e.id).into_owned()))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        };

        store(&t, "a", TaskState::Submitted, 1);
        set(&t, "a", TaskState::Working, 2);
        set(&t, "a", TaskState::InputRequired, 3);
        set(&t, "a", TaskState::Completed, 4);
        assert_eq!(waiting(&t), 1, "one change for the four");
        assert_eq!(listed(&t, None), [(4, "a".to_owned())]);
        assert_eq!(listed(&t, Some(TaskState::Completed)).len(), 1);
        assert!(listed(&t, Some(TaskState::Working)).is_empty());
        assert_eq!(waiting(&t), 0);

        // Applied: the next moves wait as one move.
        store(&t, "b", TaskState::Working, 5);
        assert_eq!(listed(&t, None).len(), 2);
        set(&t, "b", TaskState::InputRequired, 6);
        set(&t, "b", TaskState::Working, 7);
        assert_eq!(waiting(&t), 1);
        assert_eq!(listed(&t, Some(TaskState::Working)), [(7, "b".to_owned())]);
        assert!(listed(&t, Some(TaskState::InputRequired)).is_empty());

        // Removed, then stored again under the same id: the move folds into
        // the new store, not into the removal.
        let token = t
            .read(t.hash("a"), "a", |s| s.token())
            .flatten()
            .expect("finished");
        assert!(t.remove_exact(t.hash("a"), token).is_some());
        store(&t, "a", TaskState::Working, 8);
        set(&t, "a", TaskState::Failed, 9);
        assert_eq!(waiting(&t), 2, "the removal and the new store");
        assert_eq!(listed(&t, None), [(9, "a".to_owned()), (7, "b".to_owned())]);
        assert_eq!(t.index().entries(), 8);
    }

    /// Threads storing, finishing, removing and storing again tasks of the
    /// same ids at once, while another lists them and holds the indexes for
    /// a while each time (so that batches are often only partly applied and
    /// their rest put back): every change is applied once, in its order, so
    /// the indexes end up holding exactly the tasks the table holds.
    #[test]
    fn changes_from_many_threads_reach_the_indexes_in_order() {
        let t = TaskTable::default();
        let owner = Owner::default();
        const THREADS: usize = 4;
        const ROUNDS: usize = 3_000;
        const IDS: usize = 40;
        let listed = |t: &TaskTable, context: Option<&[u8]>, state| {
            t.index()
                .read(&owner, context, state, |r| r.len())
                .unwrap_or(0)
        };
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    t.index.read(&owner, None, None, |r| {
                        let until =
                            std::time::Instant::now() + std::time::Duration::from_micros(50);
                        while std::time::Instant::now() < until {
                            std::hint::black_box(r.len());
                        }
                    });
                    assert!(listed(&t, None, None) <= THREADS * IDS);
                }
            });
            let workers: Vec<_> = (0..THREADS)
                .map(|w| {
                    let t = &t;
                    let owner = &owner;
                    scope.spawn(move || {
                        for i in 0..ROUNDS {
                            let id = format!("w{w}-t{}", i % IDS);
                            let h = t.hash(&id);
                            // The task of this id from an earlier round
                            // leaves first.
                            if let Some(token) = t.read(h, &id, |s| s.token()).flatten() {
                                assert!(t.remove_exact(h, token).is_some());
                            }
                            let task = Arc::new(Task {
                                id: id.clone(),
                                context_id: format!("c{}", i % 7),
                                status: Some(status(TaskState::Working, i as i64)),
                                ..Default::default()
                            });
                            assert!(t.insert(h, Slot::new(&task, owner, 1, 0), &task).is_ok());
                            let end = if i % 5 == 0 {
                                TaskState::Failed
                            } else {
                                TaskState::Completed
                            };
                            for (s, ms) in [(TaskState::InputRequired, i + 1), (end, i + 2)] {
                                t.write(h, &id, |slot| {
                                    let Held::Open(task) = &mut slot.held else {
                                        panic!("open")
                                    };
                                    Arc::make_mut(task).status = Some(status(s, ms as i64));
                                    if s.is_terminal() {
                                        slot.finish();
                                    }
                                })
                                .expect("stored");
                            }
                        }
                    })
                })
                .collect();
            for w in workers {
                w.join().expect("a worker");
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        let kept = THREADS * IDS;
        let mut held = 0;
        t.for_each(|_| held += 1);
        assert_eq!(held, kept);
        assert_eq!(listed(&t, None, None), kept);
        let failed = listed(&t, None, Some(TaskState::Failed));
        let completed = listed(&t, None, Some(TaskState::Completed));
        assert_eq!(failed + completed, kept);
        assert_eq!(listed(&t, None, Some(TaskState::Working)), 0);
        let in_contexts: usize = (0..7)
            .map(|c| listed(&t, Some(format!("c{c}").as_bytes()), None))
            .sum();
        assert_eq!(in_contexts, kept);
        assert_eq!(t.index().entries(), 4 * kept);
        // Each task is listed at its last status time, newest first.
        let order = t
            .index()
            .read(&owner, None, None, |r| {
                r.descending_from(None)
                    .map(|e| (e.millis, e.id.to_vec()))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        assert!(order.windows(2).all(|w| w[0] > w[1]));
        let mut last = Vec::new();
        t.for_each(|s| {
            let millis = s.status_timestamp().map_or(0, |ts| ts.as_millis());
            last.push((millis, s.id().as_bytes().to_vec()));
        });
        last.sort();
        last.reverse();
        assert_eq!(order, last);
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
