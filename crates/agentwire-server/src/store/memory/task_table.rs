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

use std::collections::VecDeque;
use std::sync::Arc;

use agentwire_types::{A2aResult, Task, TaskState, Timestamp};
use hashbrown::HashTable;
use hashbrown::hash_table::Entry;
use parking_lot::{Mutex, RwLock};

use super::index::{Change, Folded, Indexed, ListIndex, Position};
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

    /// The id's bytes (a packed task's, without checking them again).
    fn id_bytes(&self) -> &[u8] {
        match &self.held {
            Held::Open(t) => t.id.as_bytes(),
            Held::Finished(p) => p.id_bytes(),
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

impl Keys {
    /// No keys: those of a withdrawn change (see `Waiting::record`).
    fn none() -> Self {
        Keys::Owned {
            id: Box::default(),
            context: Box::default(),
        }
    }
}

/// A change to the listing indexes that waits for its shard's next batch.
struct Pending {
    /// The task id's hash (the table's): a later change of the same task
    /// finds this one by it (see `Waiting::record`).
    hash: u64,
    keys: Keys,
    owner: Option<Arc<Owner>>,
    /// `None` once withdrawn: the task left the store before the indexes
    /// took it.
    change: Option<Change>,
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
        Self {
            hash,
            keys,
            owner: slot.owner.clone(),
            change: Some(change),
            kept: kept(slot, change),
        }
    }

    fn id(&self) -> &[u8] {
        match &self.keys {
            Keys::Packed(p) => p.id_bytes(),
            Keys::Owned { id, .. } => id.as_bytes(),
        }
    }

    /// The task and its change (one not withdrawn).
    fn indexed(&self) -> Option<(Indexed<'_>, Change)> {
        let context = match &self.keys {
            Keys::Packed(p) => p.context_id_bytes(),
            Keys::Owned { context, .. } => context.as_bytes(),
        };
        let task = Indexed {
            owner: owner_or_anonymous(&self.owner),
            context,
            id: self.id(),
        };
        Some((task, self.change?))
    }
}

/// A shard's oldest changes are applied when this many wait, if the
/// indexes are free; ...
const WAIT: usize = 1024;
/// ... and at once, waiting for the indexes, when this many wait ...
const WAIT_MAX: usize = 4 * WAIT;
/// ... or when the tasks removed in them (which they keep alive until
/// then) account for this many bytes: 32 shards keep at most 8 MiB waiting,
/// and as much again in the batches being applied (one per shard).
const WAIT_BYTES: usize = 256 * 1024;
/// How many of a shard's oldest changes a request applies when they are
/// due (a listing applies them all).
const BATCH: usize = 64;

/// One shard: its tasks, and the changes to the listing indexes made under
/// its lock that the indexes have not taken yet.
///
/// The indexes take a shard's changes in batches, in the order they were
/// made (a task's changes are all in its shard's list), and every reader
/// of the indexes applies what waits first (`TaskTable::index`). One lock
/// per change made the threads serving one owner (whose index is one map
/// behind one lock) wait on each other at every request, and a thread that
/// waits for a lock soon yields its core to another process. A batch takes
/// the index's lock once per 64 changes, and only when no other thread
/// holds it, until too many wait. A batch is taken out of the shard and
/// applied outside its lock (`TaskTable::apply_batch`): applying one takes
/// tens of microseconds, during which the shard's tasks stay available.
///
/// Changes wait until a listing reads the indexes, or until a thousand
/// wait in the shard: only ListTasks reads the indexes, and a store that
/// is full (the bench's, a busy server's) removes its oldest task for
/// every new one. A task stored and removed before the indexes took it
/// never reaches them (`Waiting::record`): with the default 10,000 tasks,
/// about 300 a shard, that is every task nobody listed.
#[derive(Default)]
struct Shard {
    slots: HashTable<Slot>,
    waiting: Waiting,
}

/// A shard's changes that the indexes have not taken, oldest first.
struct Waiting {
    changes: VecDeque<Pending>,
    /// Tags of the changes' task hashes (`tag`), apart: a change finds its
    /// task's earlier one among hundreds by reading these (4 bytes each).
    tags: VecDeque<u32>,
    /// The bytes of the removed tasks that `changes` keeps.
    bytes: usize,
    /// How many changes make a batch due ([`WAIT`]; fewer in tests).
    due_at: usize,
    /// How many changes were ever added (see `put_back`).
    added: u64,
    /// How many of `changes` are withdrawn (see `withdraw`).
    withdrawn: usize,
}

impl Default for Waiting {
    fn default() -> Self {
        Self {
            changes: VecDeque::new(),
            tags: VecDeque::new(),
            bytes: 0,
            due_at: WAIT,
            added: 0,
            withdrawn: 0,
        }
    }
}

impl Waiting {
    fn len(&self) -> usize {
        self.changes.len()
    }

    /// Records a change of the task in `slot` (whose hash is `hash`):
    /// folded into the task's change that still waits when there is one
    /// (see `fold`), else added. Says when the shard's batch is due
    /// (`Some`), and whether it must be applied even if that means waiting
    /// for the indexes (`Some(true)`).
    #[must_use]
    fn record(&mut self, hash: u64, slot: &Slot, change: Change) -> Option<bool> {
        if self.fold(hash, || slot.id_bytes(), change, kept(slot, change)) {
            return None;
        }
        self.push(Pending::new(hash, slot, change))
    }

    /// Folds a change of the task with this hash and id into the task's
    /// change that waits, if there is one: stored, then finished, is stored
    /// finished; moved, then removed, is removed from where the indexes
    /// hold it; stored, then removed, is nothing (withdrawn). `kept`: the
    /// bytes of a removed task the change keeps. False when there is none
    /// to fold it into.
    ///
    /// A task's every change folds into the one that waits, so a task has
    /// at most one change waiting that is not a removal (the removals are
    /// of earlier tasks with its id, and come before it). That change is
    /// found from either end: a removal (eviction takes the oldest tasks)
    /// looks from the oldest, a move (mostly of a task stored within the
    /// request) from the newest. Changes of different tasks do not depend on
    /// each other's order; a task's own stay in theirs.
    fn fold<'a>(
        &mut self,
        hash: u64,
        id: impl Fn() -> &'a [u8],
        change: Change,
        kept: u32,
    ) -> bool {
        // A new task has none (an earlier task of its id left the store).
        if matches!(change, Change::Insert(_)) {
            return false;
        }
        let Some(at) = self.find(hash, id, matches!(change, Change::Remove(_))) else {
            return false;
        };
        let earlier = &mut self.changes[at];
        match earlier.change.and_then(|c| c.then(change)) {
            Some(Folded::Into(folded)) => {
                if matches!(folded, Change::Remove(_)) {
                    self.bytes = self.bytes - earlier.kept as usize + kept as usize;
                    earlier.kept = kept;
                }
                earlier.change = Some(folded);
                true
            }
            Some(Folded::Nothing) => {
                self.withdraw(at);
                true
            }
            None => false,
        }
    }

    /// Adds a change (see `record`).
    #[must_use]
    fn push(&mut self, pending: Pending) -> Option<bool> {
        self.bytes += pending.kept as usize;
        self.added += 1;
        self.tags.push_back(tag(pending.hash));
        self.changes.push_back(pending);
        (self.len() >= self.due_at)
            .then_some(self.len() >= WAIT_MAX / WAIT * self.due_at || self.bytes >= WAIT_BYTES)
    }

    /// Withdraws the change at `at`: what it kept is freed now, and the
    /// withdrawn changes at the front leave the list.
    ///
    /// A change that stays (a task open for long, or one that eviction
    /// takes later than the tasks after it) keeps the withdrawn ones behind
    /// it in the list; once they are half of it, the list is compacted, so
    /// that a search reads about as many tags as changes wait.
    fn withdraw(&mut self, at: usize) {
        let p = &mut self.changes[at];
        self.bytes -= p.kept as usize;
        p.kept = 0;
        p.change = None;
        p.keys = Keys::none();
        p.owner = None;
        self.withdrawn += 1;
        while self.changes.front().is_some_and(|p| p.change.is_none()) {
            self.changes.pop_front();
            self.tags.pop_front();
            self.withdrawn -= 1;
        }
        if self.withdrawn >= COMPACT_MIN && 2 * self.withdrawn >= self.len() {
            self.changes.retain(|p| p.change.is_some());
            self.tags = self.changes.iter().map(|p| tag(p.hash)).collect();
            self.withdrawn = 0;
        }
    }

    /// Where the change that waits of the task with this hash and id is
    /// (the one that is not a removal, see `fold`), looked for from the
    /// oldest change or from the newest. The id is read only when a tag
    /// matches.
    fn find<'a>(&self, hash: u64, id: impl Fn() -> &'a [u8], oldest_first: bool) -> Option<usize> {
        let tag = tag(hash);
        let is = |at: usize| {
            let p = &self.changes[at];
            p.change.is_some_and(|c| !matches!(c, Change::Remove(_))) && p.id() == id()
        };
        let (front, back) = self.tags.as_slices();
        let n = front.len();
        if oldest_first {
            first_of(front, tag, is).or_else(|| first_of(back, tag, |i| is(n + i)).map(|i| n + i))
        } else {
            last_of(back, tag, |i| is(n + i))
                .map(|i| n + i)
                .or_else(|| last_of(front, tag, is))
        }
    }

    /// Takes out the oldest changes: all of them, or a batch. With them,
    /// how many changes had been added (for `put_back`).
    fn take(&mut self, all: bool) -> (VecDeque<Pending>, u64) {
        let n = if all {
            self.len()
        } else {
            self.len().min(BATCH)
        };
        let batch: VecDeque<Pending> = if n == self.len() {
            self.tags.clear();
            std::mem::take(&mut self.changes)
        } else {
            self.tags.drain(..n);
            self.changes.drain(..n).collect()
        };
        self.bytes -= batch.iter().map(|p| p.kept as usize).sum::<usize>();
        self.withdrawn -= batch.iter().filter(|p| p.change.is_none()).count();
        (batch, self.added)
    }

    /// Puts back what the indexes did not take of a batch, before the
    /// changes recorded since it was taken (when `added` changes had been
    /// added). A change put back of a task that changed since (its later
    /// change was added, as the earlier one was not there to fold into)
    /// folds into the later one, so that a task still has one change
    /// waiting that is not a removal (see `fold`).
    fn put_back(&mut self, rest: VecDeque<Pending>, added: u64) {
        // The changes added since are the newest (those put back go in
        // front, and only withdrawn changes leave, from the front); a task
        // of the batch has no other.
        let since = usize::try_from(self.added - added).unwrap_or(usize::MAX);
        for p in rest.into_iter().rev() {
            let Some(change) = p.change else {
                continue;
            };
            let later = if since == 0 || matches!(change, Change::Remove(_)) {
                None
            } else {
                let tag = tag(p.hash);
                (self.len() - since.min(self.len())..self.len())
                    .find(|&at| {
                        self.tags[at] == tag
                            && self.changes[at].change.is_some()
                            && self.changes[at].id() == p.id()
                    })
                    .and_then(|at| Some((at, change.then(self.changes[at].change?)?)))
            };
            match later {
                Some((at, Folded::Into(folded))) => {
                    self.changes[at].change = Some(folded);
                }
                Some((at, Folded::Nothing)) => self.withdraw(at),
                None => {
                    self.bytes += p.kept as usize;
                    self.tags.push_front(tag(p.hash));
                    self.changes.push_front(p);
                }
            }
        }
    }
}

/// The bytes of the removed task in `slot` that a change keeps alive
/// until the indexes take it (0 for a task still stored).
fn kept(slot: &Slot, change: Change) -> u32 {
    match change {
        Change::Remove(_) => slot.bytes,
        Change::Insert(_) | Change::Moved(..) => 0,
    }
}

/// The bits of a task's hash that `Waiting` compares first.
fn tag(hash: u64) -> u32 {
    hash as u32
}

/// The fewest withdrawn changes a list is compacted for (`withdraw`): a
/// short list is searched as fast as it is compacted.
const COMPACT_MIN: usize = 16;

/// Tags are compared this many at a time, without a branch for each (the
/// compiler makes vector comparisons of them): most are not the one.
const SCAN: usize = 16;

/// Whether `chunk` holds `tag`.
fn holds(chunk: &[u32], tag: u32) -> bool {
    chunk.iter().fold(false, |hit, t| hit | (*t == tag))
}

/// The first position in `tags` that holds `tag` and passes `is`.
fn first_of(tags: &[u32], tag: u32, mut is: impl FnMut(usize) -> bool) -> Option<usize> {
    for (k, chunk) in tags.chunks(SCAN).enumerate() {
        if holds(chunk, tag) {
            let start = k * SCAN;
            let found = (start..start + chunk.len()).find(|&at| tags[at] == tag && is(at));
            if found.is_some() {
                return found;
            }
        }
    }
    None
}

/// The last position in `tags` that holds `tag` and passes `is`.
fn last_of(tags: &[u32], tag: u32, mut is: impl FnMut(usize) -> bool) -> Option<usize> {
    let mut end = tags.len();
    for chunk in tags.rchunks(SCAN) {
        let start = end - chunk.len();
        if holds(chunk, tag) {
            let found = (start..end).rev().find(|&at| tags[at] == tag && is(at));
            if found.is_some() {
                return found;
            }
        }
        end = start;
    }
    None
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
    /// A table whose shards' batches are due at `due_at` changes.
    #[cfg(test)]
    fn with_batches_due_at(due_at: usize) -> Self {
        let t = Self::default();
        for shard in t.shards.iter() {
            shard.write().waiting.due_at = due_at;
        }
        t
    }

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

    /// Applies shard `at`'s oldest waiting changes (all of them with
    /// `all`), taken out of the shard (whose lock is held only to take them,
    /// and to put back what the indexes did not take). Without `wait`,
    /// nothing is waited for: not another thread applying the shard's
    /// previous batch, nor the indexes.
    fn apply_batch(&self, at: usize, wait: bool, all: bool) {
        let _applying = if wait {
            self.appliers[at].lock()
        } else {
            match self.appliers[at].try_lock() {
                Some(applying) => applying,
                None => return,
            }
        };
        let (mut batch, added) = self.shards[at].write().waiting.take(all);
        // Withdrawn changes (a task stored and removed since) are skipped.
        batch.retain(|p| p.change.is_some());
        if batch.is_empty() {
            return;
        }
        let applied = self
            .index
            .apply(batch.iter().filter_map(Pending::indexed), wait);
        if applied < batch.len() {
            // The rest goes back before what was recorded meanwhile.
            batch.drain(..applied);
            self.shards[at].write().waiting.put_back(batch, added);
        }
        // The changes applied, and the removed tasks they kept, are freed
        // here, outside the shard's lock.
    }

    /// Applies a batch of the task's shard when a change made it due
    /// (what `Waiting::record` said), once the shard's lock is released.
    fn apply_due(&self, hash: u64, due: Option<bool>) {
        if let Some(wait) = due {
            self.apply_batch(Self::shard_of(hash), wait, false);
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
                    shard.waiting.push(pending)
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
                if after != before {
                    due = shard
                        .waiting
                        .record(hash, slot, Change::Moved(before, after));
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
            let due = shard
                .waiting
                .record(hash, &slot, Change::Remove(slot.position()));
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
            let from = out.len();
            {
                let mut guard = shard.write();
                let shard = &mut *guard;
                out.extend(shard.slots.extract_if(|slot| drop(slot)));
                for slot in &out[from..] {
                    let hash = self.hash(slot.id());
                    // Applied below, whether due or not.
                    let _ = shard
                        .waiting
                        .record(hash, slot, Change::Remove(slot.position()));
                }
            }
            if out.len() > from {
                self.apply_batch(at, true, true);
            }
        }
        out
    }

    /// The listing indexes, with every change made so far applied.
    pub(super) fn index(&self) -> &ListIndex {
        // Every shard's applier is taken, so a batch another thread is
        // applying is applied before the indexes are read.
        for at in 0..self.shards.len() {
            self.apply_batch(at, true, true);
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
        // The owner's index is read-locked here: changes enough to make
        // every shard's batch due are made, none waits for the lock, none is
        // applied.
        let n = 2 * WAIT * SHARDS;
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
        let waiting: usize = t.shards.iter().map(|s| s.read().waiting.len()).sum();
        assert_eq!(waiting, n, "nothing applied while the index was busy");
        assert_eq!(listed(&t), Some(n + 1), "the reader applied them all");
        let waiting: usize = t.shards.iter().map(|s| s.read().waiting.len()).sum();
        assert_eq!(waiting, 0);
    }

    /// Stores a task of this id of the anonymous owner, in conversation
    /// "c", in this state at this time (in milliseconds), accounted 7 bytes.
    fn store(t: &TaskTable, id: &str, s: TaskState, ms: i64) {
        let task = Arc::new(Task {
            id: id.into(),
            context_id: "c".into(),
            status: Some(status(s, ms)),
            ..Default::default()
        });
        let slot = Slot::new(&task, &Owner::default(), 7, 0);
        assert!(t.insert(t.hash(id), slot, &task).is_ok());
    }

    /// Sets the status of the open task of this id (a terminal one packs it).
    fn set(t: &TaskTable, id: &str, s: TaskState, ms: i64) {
        t.write(t.hash(id), id, |slot| {
            let Held::Open(task) = &mut slot.held else {
                panic!("open")
            };
            Arc::make_mut(task).status = Some(status(s, ms));
            if s.is_terminal() {
                slot.finish();
            }
        })
        .expect("stored");
    }

    /// Removes the finished task of this id, as eviction does.
    fn remove(t: &TaskTable, id: &str) {
        let h = t.hash(id);
        let token = t.read(h, id, |s| s.token()).flatten().expect("finished");
        assert!(t.remove_exact(h, token).is_some());
    }

    /// How many changes wait, in every shard.
    fn waiting(t: &TaskTable) -> usize {
        t.shards.iter().map(|s| s.read().waiting.len()).sum()
    }

    /// The anonymous owner's tasks in this state (any with `None`) as the
    /// indexes list them, newest first, with their times.
    fn listed(t: &TaskTable, state: Option<TaskState>) -> Vec<(i64, String)> {
        t.index()
            .read(&Owner::default(), None, state, |r| {
                r.descending_from(None)
                    .map(|e| (e.millis, String::from_utf8_lossy(&e.id).into_owned()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The pair (time, id) of a listing.
    fn at(ms: i64, id: &str) -> (i64, String) {
        (ms, id.to_owned())
    }

    /// A task that changes while its earlier change waits changes that
    /// one: stored, moved twice and finished in one batch is one change, and
    /// the indexes list it where it ended. A change never folds into the
    /// removal of an earlier task with the same id.
    #[test]
    fn changes_of_a_waiting_task_fold_into_one() {
        let t = TaskTable::default();
        store(&t, "a", TaskState::Submitted, 1);
        set(&t, "a", TaskState::Working, 2);
        set(&t, "a", TaskState::InputRequired, 3);
        set(&t, "a", TaskState::Completed, 4);
        assert_eq!(waiting(&t), 1, "one change for the four");
        assert_eq!(listed(&t, None), [at(4, "a")]);
        assert_eq!(listed(&t, Some(TaskState::Completed)).len(), 1);
        assert!(listed(&t, Some(TaskState::Working)).is_empty());
        assert_eq!(waiting(&t), 0);

        // Applied: the next moves wait as one move.
        store(&t, "b", TaskState::Working, 5);
        assert_eq!(listed(&t, None).len(), 2);
        set(&t, "b", TaskState::InputRequired, 6);
        set(&t, "b", TaskState::Working, 7);
        assert_eq!(waiting(&t), 1);
        assert_eq!(listed(&t, Some(TaskState::Working)), [at(7, "b")]);
        assert!(listed(&t, Some(TaskState::InputRequired)).is_empty());

        // Removed, then stored again under the same id: the move folds into
        // the new store, not into the removal.
        remove(&t, "a");
        store(&t, "a", TaskState::Working, 8);
        set(&t, "a", TaskState::Failed, 9);
        assert_eq!(waiting(&t), 2, "the removal and the new store");
        assert_eq!(listed(&t, None), [at(9, "a"), at(7, "b")]);
        assert_eq!(t.index().entries(), 8);
    }

    /// A task stored and removed before the indexes took it never reaches
    /// them: its change is withdrawn, and leaves the shard's list once no
    /// change before it waits. A task the indexes hold that moves and then
    /// leaves is taken out of them from where they hold it.
    #[test]
    fn a_task_removed_before_the_indexes_took_it_never_reaches_them() {
        let t = TaskTable::default();
        for i in 0..100 {
            store(&t, &format!("t{i}"), TaskState::Completed, i);
        }
        assert_eq!(waiting(&t), 100);
        // Removed oldest first, as eviction does: each leaves at once.
        for i in 0..100 {
            remove(&t, &format!("t{i}"));
            assert_eq!(waiting(&t), 99 - i as usize);
        }
        assert!(listed(&t, None).is_empty());
        assert_eq!(t.index().entries(), 0);
        assert_eq!(t.index().owners(), 0, "the owner never reached them");

        // Removed from among others: the rest are listed, in their order.
        for (i, id) in ["a", "b", "c", "d"].into_iter().enumerate() {
            store(&t, id, TaskState::Completed, 10 + i as i64);
        }
        remove(&t, "b");
        remove(&t, "d");
        assert_eq!(listed(&t, None), [at(12, "c"), at(10, "a")]);
        assert_eq!(waiting(&t), 0);

        // Held by the indexes, finished, then removed: one change waits, a
        // removal from where the indexes hold it (working, at 20 ms).
        store(&t, "x", TaskState::Working, 20);
        assert_eq!(listed(&t, None).len(), 3);
        set(&t, "x", TaskState::Completed, 21);
        remove(&t, "x");
        assert_eq!(waiting(&t), 1, "the move and the removal, as one");
        let kept: usize = t.shards.iter().map(|s| s.read().waiting.bytes).sum();
        assert_eq!(
            kept, 7,
            "the removed task's bytes are accounted while it waits"
        );
        assert_eq!(listed(&t, None), [at(12, "c"), at(10, "a")]);
        assert_eq!(t.index().entries(), 8);
    }

    /// A change that stays at the front of its shard's list (an open task)
    /// does not keep the withdrawn changes behind it: the list is compacted
    /// once they are half of it, so it holds about the changes that wait.
    #[test]
    fn withdrawn_changes_do_not_pile_up_behind_one_that_stays() {
        let t = TaskTable::default();
        store(&t, "open", TaskState::Working, 0);
        for i in 0..3_200 {
            let id = format!("t{i}");
            store(&t, &id, TaskState::Completed, i);
            remove(&t, &id);
        }
        assert!(
            waiting(&t) <= 1 + COMPACT_MIN,
            "{} changes kept",
            waiting(&t)
        );
        let withdrawn: usize = t.shards.iter().map(|s| s.read().waiting.withdrawn).sum();
        assert_eq!(withdrawn + 1, waiting(&t));
        assert_eq!(listed(&t, None), [at(0, "open")]);
    }

    /// What the indexes did not take of a batch goes back in front, and a
    /// task's change put back folds with its change made meanwhile (which
    /// could not fold into it while the batch was out): the task still has
    /// one change waiting, and the indexes end where the task is.
    #[test]
    fn a_batch_put_back_folds_with_the_changes_made_meanwhile() {
        let t = TaskTable::default();
        let shard = |id: &str| &t.shards[TaskTable::shard_of(t.hash(id))];
        // The batch of the task's shard is out while `meanwhile` runs, and
        // none of it is taken by the indexes.
        let out_while = |id: &str, meanwhile: &dyn Fn()| {
            let (batch, added) = shard(id).write().waiting.take(true);
            meanwhile();
            shard(id).write().waiting.put_back(batch, added);
            shard(id).read().waiting.len()
        };

        // Stored (out), finished meanwhile: stored finished.
        store(&t, "x", TaskState::Working, 1);
        assert_eq!(out_while("x", &|| set(&t, "x", TaskState::Completed, 2)), 1);
        assert_eq!(listed(&t, Some(TaskState::Completed)), [at(2, "x")]);
        assert!(listed(&t, Some(TaskState::Working)).is_empty());

        // Stored (out), finished and removed meanwhile: nothing.
        store(&t, "y", TaskState::Working, 3);
        let left = out_while("y", &|| {
            set(&t, "y", TaskState::Completed, 4);
            remove(&t, "y");
        });
        assert_eq!(left, 0);
        assert_eq!(listed(&t, None), [at(2, "x")]);

        // Removed (out), stored again meanwhile under the same id: the
        // removal stays before the new store.
        remove(&t, "x");
        assert_eq!(out_while("x", &|| store(&t, "x", TaskState::Working, 6)), 2);
        assert_eq!(listed(&t, None), [at(6, "x")]);
        assert_eq!(t.index().entries(), 4);
    }

    /// Threads storing, finishing, removing and storing again tasks of the
    /// same ids at once, while another lists them and holds the indexes for
    /// a while each time (so that batches are often only partly applied and
    /// their rest put back): every change is applied once, in its order, so
    /// the indexes end up holding exactly the tasks the table holds.
    #[test]
    fn changes_from_many_threads_reach_the_indexes_in_order() {
        // Batches due at a few changes: they are applied by the workers,
        // often while the lister holds the indexes.
        let t = TaskTable::with_batches_due_at(4);
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
