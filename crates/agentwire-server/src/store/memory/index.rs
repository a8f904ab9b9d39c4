//! The in-memory store's listing indexes: for every owner, its tasks in
//! listing order (status time, then id), all of them, by state, by context,
//! and by context and state. A `ListTasks` page reads one of them from its
//! cursor on: it costs the page and a binary search, however many tasks the
//! store holds, and an unknown owner or context costs a hash lookup.
//!
//! The task table (`task_table.rs`) keeps the indexes in step with itself:
//! a task joins them when it is stored, moves when its status changes, and
//! leaves them when it is evicted or expires, each under the lock of the
//! task's shard, so that the indexes never hold a task the table does not.
//! An index that empties is dropped, so they hold nothing once the tasks
//! have left.
//!
//! [`Ranked`] is written here rather than taken from a crate: the store
//! needs an ordered set that also counts the entries from a key on in
//! logarithmic time (the page's `totalSize` with `statusTimestampAfter`),
//! and that costs a few words when it holds one task (the store keeps one
//! per conversation). The order-statistic trees on crates.io allocate
//! nodes of hundreds of entries up front.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use agentwire_types::TaskState;
use parking_lot::RwLock;

use crate::store::Owner;

/// One task in an index: its place in the listing order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    /// The status time in milliseconds (0 without one, as in `Cursor`).
    pub(super) millis: i64,
    /// The task id, shared by the task's entries in every index.
    pub(super) id: Arc<str>,
}

impl Entry {
    fn cmp_key(&self, millis: i64, id: &str) -> Ordering {
        self.millis
            .cmp(&millis)
            .then_with(|| self.id.as_bytes().cmp(id.as_bytes()))
    }
}

/// Where a task stands in the indexes: what its status says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Position {
    pub(super) state: TaskState,
    pub(super) millis: i64,
    /// Whether the status has a time (a task without one never matches
    /// `statusTimestampAfter`).
    pub(super) timed: bool,
}

/// The most entries in one chunk of a [`Ranked`]; a chunk splits beyond it.
const CHUNK_MAX: usize = 512;
/// A chunk smaller than this merges with a neighbour when they fit in one.
const CHUNK_MIN: usize = CHUNK_MAX / 4;

/// An ordered set of entries (ascending) that counts: sorted chunks of at
/// most [`CHUNK_MAX`] entries, in order, with a Fenwick tree of their
/// lengths. Finding a key is two binary searches; counting the entries
/// before it adds a walk of the tree; inserting or removing moves at most
/// a chunk (and, when a chunk splits, merges or empties, rebuilds the
/// tree: once per hundreds of changes). Keys mostly arrive at the end
/// (status times grow), where inserting moves nothing.
#[derive(Debug, Default)]
pub(super) struct Ranked {
    /// Never an empty chunk.
    chunks: Vec<Vec<Entry>>,
    /// Fenwick tree over the chunks' lengths (empty with one chunk).
    tree: Vec<usize>,
    len: usize,
    /// Entries of tasks whose status has no time (all at 0 ms).
    untimed: usize,
}

impl Ranked {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The chunk and position of the first entry at or after the key (the
    /// last chunk's end when there is none). The set is not empty.
    fn locate(&self, millis: i64, id: &str) -> (usize, usize) {
        let c = self
            .chunks
            .partition_point(|ch| ch.last().is_some_and(|e| e.cmp_key(millis, id).is_lt()));
        let c = c.min(self.chunks.len() - 1);
        let pos = self.chunks[c].partition_point(|e| e.cmp_key(millis, id).is_lt());
        (c, pos)
    }

    /// The number of entries in the chunks before chunk `c`.
    fn before_chunk(&self, c: usize) -> usize {
        if self.tree.is_empty() {
            return 0;
        }
        let (mut k, mut sum) = (c, 0);
        while k > 0 {
            sum += self.tree[k - 1];
            k &= k - 1;
        }
        sum
    }

    fn rebuild(&mut self) {
        self.tree.clear();
        if self.chunks.len() > 1 {
            let n = self.chunks.len();
            self.tree.extend(self.chunks.iter().map(Vec::len));
            for k in 1..=n {
                let parent = k + (k & k.wrapping_neg());
                if parent <= n {
                    self.tree[parent - 1] += self.tree[k - 1];
                }
            }
        } else {
            self.tree.shrink_to_fit();
        }
    }

    fn add_to_chunk(&mut self, c: usize, grow: bool) {
        let n = self.tree.len();
        let mut k = c + 1;
        while k <= n {
            if grow {
                self.tree[k - 1] += 1;
            } else {
                self.tree[k - 1] -= 1;
            }
            k += k & k.wrapping_neg();
        }
    }

    /// Adds an entry; false (and nothing changes) when it is there.
    pub(super) fn insert(&mut self, entry: Entry, timed: bool) -> bool {
        if self.chunks.is_empty() {
            // Exactly the room of one entry.
            self.chunks.reserve_exact(1);
            self.chunks.push(vec![entry]);
        } else {
            let (c, pos) = self.locate(entry.millis, &entry.id);
            let chunk = &mut self.chunks[c];
            if chunk
                .get(pos)
                .is_some_and(|e| e.cmp_key(entry.millis, &entry.id).is_eq())
            {
                return false;
            }
            // Small sets (one conversation's tasks) grow one at a time.
            if chunk.len() == chunk.capacity() && chunk.len() < 8 {
                chunk.reserve_exact(1);
            }
            chunk.insert(pos, entry);
            if chunk.len() > CHUNK_MAX {
                let tail = chunk.split_off(chunk.len() / 2);
                chunk.shrink_to_fit();
                self.chunks.insert(c + 1, tail);
                self.rebuild();
            } else {
                self.add_to_chunk(c, true);
            }
        }
        self.len += 1;
        self.untimed += usize::from(!timed);
        true
    }

    /// Removes the entry with this key, and gives it back.
    pub(super) fn remove(&mut self, millis: i64, id: &str, timed: bool) -> Option<Entry> {
        if self.chunks.is_empty() {
            return None;
        }
        let (c, pos) = self.locate(millis, id);
        let chunk = &mut self.chunks[c];
        if !chunk
            .get(pos)
            .is_some_and(|e| e.cmp_key(millis, id).is_eq())
        {
            return None;
        }
        let entry = chunk.remove(pos);
        self.len -= 1;
        self.untimed -= usize::from(!timed);
        if chunk.is_empty() {
            self.chunks.remove(c);
            if self.chunks.is_empty() {
                *self = Self::default();
                return Some(entry);
            }
            self.rebuild();
        } else if chunk.len() < CHUNK_MIN && self.chunks.len() > 1 {
            let left = if c + 1 < self.chunks.len() { c } else { c - 1 };
            if self.chunks[left].len() + self.chunks[left + 1].len() <= CHUNK_MAX {
                let right = self.chunks.remove(left + 1);
                self.chunks[left].extend(right);
                self.rebuild();
            } else {
                self.add_to_chunk(c, false);
            }
        } else {
            self.add_to_chunk(c, false);
        }
        // What a chunk no longer holds goes back to the allocator.
        if let Some(chunk) = self.chunks.get_mut(c)
            && chunk.capacity() > 8
            && chunk.len() < chunk.capacity() / 4
        {
            chunk.shrink_to(chunk.len() * 2);
        }
        if self.chunks.capacity() > 8 && self.chunks.len() < self.chunks.capacity() / 4 {
            self.chunks.shrink_to(self.chunks.len() * 2);
        }
        Some(entry)
    }

    /// How many entries have a status time at or after `millis`.
    pub(super) fn count_from(&self, millis: i64) -> usize {
        if self.chunks.is_empty() {
            return 0;
        }
        let (c, pos) = self.locate(millis, "");
        let at_or_after = self.len - (self.before_chunk(c) + pos);
        // The tasks without a time sit at 0 ms, and never match.
        if millis <= 0 {
            at_or_after - self.untimed
        } else {
            at_or_after
        }
    }

    /// The entries before the key (all of them without one), last first:
    /// the listing order from a cursor on.
    pub(super) fn descending_from<'a>(
        &'a self,
        cursor: Option<(i64, &str)>,
    ) -> impl Iterator<Item = &'a Entry> + 'a {
        let (head, rest): (&[Entry], &[Vec<Entry>]) = match cursor {
            _ if self.chunks.is_empty() => (&[], &[]),
            None => (&[], &self.chunks[..]),
            Some((millis, id)) => {
                let (c, pos) = self.locate(millis, id);
                (&self.chunks[c][..pos], &self.chunks[..c])
            }
        };
        head.iter()
            .rev()
            .chain(rest.iter().rev().flat_map(|ch| ch.iter().rev()))
    }

    /// Bytes held (for tests of the bounds).
    #[cfg(test)]
    fn held_bytes(&self) -> usize {
        self.chunks
            .iter()
            .map(|c| c.capacity() * std::mem::size_of::<Entry>())
            .sum::<usize>()
            + self.chunks.capacity() * std::mem::size_of::<Vec<Entry>>()
            + self.tree.capacity() * std::mem::size_of::<usize>()
    }
}

/// Tasks in listing order, all of them and by state.
#[derive(Debug, Default)]
pub(super) struct Group {
    all: Ranked,
    /// Few states are in use at once: a short list.
    states: Vec<(TaskState, Ranked)>,
}

impl Group {
    fn insert(&mut self, entry: Entry, p: Position) {
        let timed = p.timed;
        match self.states.iter_mut().find(|(s, _)| *s == p.state) {
            Some((_, r)) => {
                r.insert(entry.clone(), timed);
            }
            None => {
                let mut r = Ranked::default();
                r.insert(entry.clone(), timed);
                self.states.reserve_exact(1);
                self.states.push((p.state, r));
            }
        }
        self.all.insert(entry, timed);
    }

    fn remove(&mut self, id: &str, p: Position) -> Option<Entry> {
        if let Some(i) = self.states.iter().position(|(s, _)| *s == p.state) {
            self.states[i].1.remove(p.millis, id, p.timed);
            if self.states[i].1.is_empty() {
                self.states.swap_remove(i);
                self.states.shrink_to_fit();
            }
        }
        self.all.remove(p.millis, id, p.timed)
    }

    /// The tasks in this state, or all of them.
    pub(super) fn get(&self, state: Option<TaskState>) -> Option<&Ranked> {
        match state {
            None => Some(&self.all),
            Some(state) => self
                .states
                .iter()
                .find(|(s, _)| *s == state)
                .map(|(_, r)| r),
        }
    }

    fn is_empty(&self) -> bool {
        self.all.is_empty()
    }
}

type Hasher = ahash::RandomState;

/// One owner's tasks.
#[derive(Debug, Default)]
struct OwnerIndex {
    tasks: Group,
    contexts: HashMap<Box<str>, Group, Hasher>,
}

impl OwnerIndex {
    fn insert(&mut self, context: &str, entry: Entry, p: Position) {
        match self.contexts.get_mut(context) {
            Some(g) => g.insert(entry.clone(), p),
            None => {
                let mut g = Group::default();
                g.insert(entry.clone(), p);
                self.contexts.insert(context.into(), g);
            }
        }
        self.tasks.insert(entry, p);
    }

    fn remove(&mut self, context: &str, id: &str, p: Position) -> Option<Entry> {
        if let Some(g) = self.contexts.get_mut(context) {
            g.remove(id, p);
            if g.is_empty() {
                self.contexts.remove(context);
                if self.contexts.capacity() > 16
                    && self.contexts.len() < self.contexts.capacity() / 4
                {
                    self.contexts.shrink_to(self.contexts.len() * 2);
                }
            }
        }
        self.tasks.remove(id, p)
    }
}

/// Number of index shards (owners are spread over them by hash).
const SHARDS: usize = 16;

/// The listing indexes of every owner.
pub(super) struct ListIndex {
    hasher: Hasher,
    shards: Box<[RwLock<HashMap<Owner, OwnerIndex, Hasher>>]>,
}

impl Default for ListIndex {
    fn default() -> Self {
        Self {
            hasher: Hasher::new(),
            shards: (0..SHARDS).map(|_| RwLock::default()).collect(),
        }
    }
}

/// A task as the indexes see it.
pub(super) struct Indexed<'a> {
    pub(super) owner: &'a Owner,
    pub(super) context: &'a str,
    pub(super) id: &'a str,
}

impl ListIndex {
    fn shard(&self, owner: &Owner) -> &RwLock<HashMap<Owner, OwnerIndex, Hasher>> {
        &self.shards[self.hasher.hash_one(owner) as usize % SHARDS]
    }

    /// A task was stored.
    pub(super) fn insert(&self, task: &Indexed<'_>, p: Position) {
        let entry = Entry {
            millis: p.millis,
            id: Arc::from(task.id),
        };
        let mut shard = self.shard(task.owner).write();
        match shard.get_mut(task.owner) {
            Some(o) => o.insert(task.context, entry, p),
            None => {
                let mut o = OwnerIndex::default();
                o.insert(task.context, entry, p);
                shard.insert(task.owner.clone(), o);
            }
        }
    }

    /// A task left the store.
    pub(super) fn remove(&self, task: &Indexed<'_>, p: Position) {
        let mut shard = self.shard(task.owner).write();
        let Some(o) = shard.get_mut(task.owner) else {
            return;
        };
        o.remove(task.context, task.id, p);
        if o.tasks.is_empty() {
            shard.remove(task.owner);
        }
    }

    /// A task's status changed from `before` to `after`.
    pub(super) fn moved(&self, task: &Indexed<'_>, before: Position, after: Position) {
        let mut shard = self.shard(task.owner).write();
        let Some(o) = shard.get_mut(task.owner) else {
            return;
        };
        // The entry's shared id moves with it.
        let entry = o
            .remove(task.context, task.id, before)
            .unwrap_or_else(|| Entry {
                millis: after.millis,
                id: Arc::from(task.id),
            });
        o.insert(
            task.context,
            Entry {
                millis: after.millis,
                id: entry.id,
            },
            after,
        );
    }

    /// `f` on the owner's tasks (of this context, in this state, when
    /// given), under the index's read lock; `None` when there are none.
    pub(super) fn read<R>(
        &self,
        owner: &Owner,
        context: Option<&str>,
        state: Option<TaskState>,
        f: impl FnOnce(&Ranked) -> R,
    ) -> Option<R> {
        let shard = self.shard(owner).read();
        let o = shard.get(owner)?;
        let group = match context {
            None => &o.tasks,
            Some(c) => o.contexts.get(c)?,
        };
        group.get(state).map(f)
    }

    /// How many owners have an index (for tests of the bounds).
    #[cfg(test)]
    pub(super) fn owners(&self) -> usize {
        self.shards.iter().map(|s| s.read().len()).sum()
    }

    /// How many entries the indexes hold in all (each task is in four).
    #[cfg(test)]
    pub(super) fn entries(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                s.read()
                    .values()
                    .map(|o| {
                        let group = |g: &Group| {
                            g.all.len() + g.states.iter().map(|(_, r)| r.len()).sum::<usize>()
                        };
                        group(&o.tasks) + o.contexts.values().map(group).sum::<usize>()
                    })
                    .sum::<usize>()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(millis: i64, id: &str) -> Entry {
        Entry {
            millis,
            id: id.into(),
        }
    }

    /// A reference model: a sorted vector.
    fn check(r: &Ranked, model: &[(i64, String)]) {
        assert_eq!(r.len(), model.len());
        let got: Vec<(i64, String)> = r
            .descending_from(None)
            .map(|e| (e.millis, e.id.to_string()))
            .collect();
        let mut want = model.to_vec();
        want.sort();
        want.reverse();
        assert_eq!(got, want);
        for probe in [i64::MIN, -1, 0, 1, 500, 999, 1000, 5000, i64::MAX] {
            let n = model.iter().filter(|(m, _)| *m >= probe).count();
            assert_eq!(r.count_from(probe), n, "from {probe}");
        }
        if let Some((m, id)) = want.get(want.len() / 2) {
            let below: Vec<_> = r
                .descending_from(Some((*m, id)))
                .map(|e| (e.millis, e.id.to_string()))
                .collect();
            assert_eq!(below, want[want.len() / 2 + 1..]);
        }
    }

    #[test]
    fn ranked_orders_counts_and_splits() {
        let mut r = Ranked::default();
        let mut model = Vec::new();
        // Enough to split into many chunks, in a scrambled order.
        for i in 0..5000i64 {
            let k = (i * 7919) % 5000;
            let id = format!("t{k}");
            assert!(r.insert(e(k / 3, &id), true));
            model.push((k / 3, id));
        }
        assert!(!r.insert(e(0, "t0"), true), "once");
        assert!(r.chunks.len() > 10, "{} chunks", r.chunks.len());
        check(&r, &model);
        // Remove most of them: the chunks merge and shrink.
        for i in 0..4900i64 {
            let k = (i * 31) % 5000;
            let id = format!("t{k}");
            assert!(r.remove(k / 3, &id, true).is_some(), "{id}");
            model.retain(|(_, x)| *x != id);
        }
        assert!(r.remove(0, "t0", true).is_none());
        check(&r, &model);
        assert!(r.chunks.len() <= 2, "{} chunks", r.chunks.len());
        for (m, id) in std::mem::take(&mut model) {
            assert!(r.remove(m, &id, true).is_some());
        }
        assert!(r.is_empty());
        assert_eq!(r.held_bytes(), 0, "an empty set holds nothing");
    }

    #[test]
    fn untimed_entries_never_count_from_a_time() {
        let mut r = Ranked::default();
        r.insert(e(0, "untimed"), false);
        r.insert(e(0, "epoch"), true);
        r.insert(e(-5, "before"), true);
        r.insert(e(10, "later"), true);
        assert_eq!(r.count_from(-10), 3);
        assert_eq!(r.count_from(0), 2);
        assert_eq!(r.count_from(1), 1);
        r.remove(0, "untimed", false);
        assert_eq!(r.count_from(-10), 3);
    }

    #[test]
    fn a_small_set_is_small() {
        let mut r = Ranked::default();
        r.insert(e(1, "a"), true);
        assert!(r.held_bytes() <= 64, "{} bytes", r.held_bytes());
    }
}
