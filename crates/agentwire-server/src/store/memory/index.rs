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
use std::collections::VecDeque;
use std::sync::Arc;

use agentwire_types::TaskState;
use hashbrown::hash_map::EntryRef;
use hashbrown::{HashMap, HashTable};
use parking_lot::{RwLock, RwLockWriteGuard};

use crate::store::Owner;

/// One task in an index: its place in the listing order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    /// The status time in milliseconds (0 without one, as in `Cursor`).
    pub(super) millis: i64,
    /// The task id (UTF-8: it is a `&str`'s bytes), shared by the task's
    /// entries in every index. Bytes, not a `str`: the indexes read a
    /// finished task's keys from its encoding, and checking them for UTF-8
    /// at every change took more than finding the task's place.
    pub(super) id: Arc<[u8]>,
    /// The id's [`tag`], beside the time: a removal finds its entry
    /// without reading the ids of the others, which have mostly left the
    /// caches by then.
    tag: u64,
}

/// Eight bytes that tell most ids apart: their last eight (the random end
/// of a UUID), with the length. Two ids with the same tag are told apart
/// by their bytes.
fn tag(id: &[u8]) -> u64 {
    let mut end = [0u8; 8];
    let n = id.len().min(8);
    end[..n].copy_from_slice(&id[id.len() - n..]);
    u64::from_le_bytes(end) ^ (id.len() as u64).rotate_right(8)
}

impl Entry {
    pub(super) fn new(millis: i64, id: Arc<[u8]>) -> Self {
        let tag = tag(&id);
        Self { millis, id, tag }
    }

    /// The entry with the same id, at another time.
    fn at(self, millis: i64) -> Self {
        Self { millis, ..self }
    }

    fn cmp_key(&self, millis: i64, id: &[u8]) -> Ordering {
        self.millis.cmp(&millis).then_with(|| (*self.id).cmp(id))
    }

    /// Whether this is the entry of the id with this tag, at this time (its
    /// id read only when the time and the tag match).
    fn is(&self, millis: i64, tag: u64, id: &[u8]) -> bool {
        self.millis == millis && self.tag == tag && *self.id == *id
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

impl Position {
    /// The position of a task in this state, with this status time.
    pub(super) fn new(state: TaskState, timestamp: Option<agentwire_types::Timestamp>) -> Self {
        Self {
            state,
            millis: timestamp.map_or(0, |t| t.as_millis()),
            timed: timestamp.is_some(),
        }
    }
}

/// The most entries at one time that a removal compares by their tags
/// before it searches by ids.
const FIND_SCAN: usize = 64;

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
#[derive(Debug, Default, Clone)]
pub(super) struct Ranked {
    /// Never an empty chunk. Ring buffers: the oldest entries, which
    /// eviction removes, leave the front of the first chunk without moving
    /// the rest of it (a `Vec` moved the whole chunk, kilobytes, per task).
    chunks: Vec<VecDeque<Entry>>,
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
    fn locate(&self, millis: i64, id: &[u8]) -> (usize, usize) {
        let c = self
            .chunks
            .partition_point(|ch| ch.back().is_some_and(|e| e.cmp_key(millis, id).is_lt()));
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
            self.tree.extend(self.chunks.iter().map(VecDeque::len));
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
            self.chunks.reserve_exact(1);
            let mut chunk = VecDeque::with_capacity(1);
            chunk.push_back(entry);
            self.chunks.push(chunk);
        } else {
            // New tasks mostly come after every other (status times grow):
            // their place is the end, found without the binary searches.
            let last = self.chunks.len() - 1;
            let after_all = self.chunks[last]
                .back()
                .is_some_and(|e| e.cmp_key(entry.millis, &entry.id).is_lt());
            let (c, pos) = if after_all {
                (last, self.chunks[last].len())
            } else {
                self.locate(entry.millis, &entry.id)
            };
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

    /// The chunk and position of the entry of this id at this time. The
    /// entries at that time are found by their times and told apart by
    /// their tags (see `Entry::tag`), so that no other entry's id is read.
    fn find(&self, millis: i64, id: &[u8]) -> Option<(usize, usize)> {
        let tag = tag(id);
        // Eviction takes the oldest tasks, mostly the first entries.
        if let Some(pos) = self.chunks[0]
            .iter()
            .take(4)
            .position(|e| e.is(millis, tag, id))
        {
            return Some((0, pos));
        }
        let first = self
            .chunks
            .partition_point(|ch| ch.back().is_some_and(|e| e.millis < millis));
        let mut seen = 0;
        for (c, chunk) in self.chunks.iter().enumerate().skip(first) {
            let from = chunk.partition_point(|e| e.millis < millis);
            for (pos, e) in chunk.iter().enumerate().skip(from) {
                if e.millis != millis {
                    return None;
                }
                if e.is(millis, tag, id) {
                    return Some((c, pos));
                }
                seen += 1;
                // Many entries at one time (tasks without a status time
                // are all at 0 ms): the binary search, reading ids.
                if seen == FIND_SCAN {
                    let (c, pos) = self.locate(millis, id);
                    let found = self.chunks[c]
                        .get(pos)
                        .is_some_and(|e| e.is(millis, tag, id));
                    return found.then_some((c, pos));
                }
            }
        }
        None
    }

    /// Removes the entry with this key, and gives it back.
    pub(super) fn remove(&mut self, millis: i64, id: &[u8], timed: bool) -> Option<Entry> {
        if self.chunks.is_empty() {
            return None;
        }
        let (c, pos) = self.find(millis, id)?;
        let chunk = &mut self.chunks[c];
        let entry = chunk.remove(pos)?;
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
        let (c, pos) = self.locate(millis, b"");
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
        cursor: Option<(i64, &[u8])>,
    ) -> impl Iterator<Item = &'a Entry> + 'a {
        // The entries before `pos` in chunk `c`, then the chunks before it.
        let (c, pos) = match cursor {
            _ if self.chunks.is_empty() => (0, 0),
            None => (self.chunks.len(), 0),
            Some((millis, id)) => self.locate(millis, id),
        };
        let head = self
            .chunks
            .get(c)
            .into_iter()
            .flat_map(move |ch| ch.range(..pos).rev());
        let rest = self.chunks[..c.min(self.chunks.len())]
            .iter()
            .rev()
            .flat_map(|ch| ch.iter().rev());
        head.chain(rest)
    }

    /// Bytes held (for tests of the bounds).
    #[cfg(test)]
    fn held_bytes(&self) -> usize {
        self.chunks
            .iter()
            .map(|c| c.capacity() * std::mem::size_of::<Entry>())
            .sum::<usize>()
            + self.chunks.capacity() * std::mem::size_of::<VecDeque<Entry>>()
            + self.tree.capacity() * std::mem::size_of::<usize>()
    }
}

/// Tasks in listing order, all of them and by state.
#[derive(Debug, Default)]
pub(super) struct Group {
    all: Ranked,
    /// While every task of the group is in one state, that state: `all` is
    /// then that state's list too, and `states` is empty. A group is mostly
    /// in one state (an owner's finished tasks), and a second copy of the
    /// list would cost an insert and a removal per task for nothing.
    only: Option<TaskState>,
    /// The tasks by state, while they are in two states or more. Few states
    /// are in use at once: a short list.
    states: Vec<(TaskState, Ranked)>,
}

impl Group {
    fn insert(&mut self, entry: Entry, p: Position) {
        let timed = p.timed;
        match self.only {
            _ if self.all.is_empty() => self.only = Some(p.state),
            Some(state) if state == p.state => {}
            Some(state) => {
                // A second state: the list of the first is `all` so far.
                let mut r = Ranked::default();
                r.insert(entry.clone(), timed);
                self.states = vec![(state, self.all.clone()), (p.state, r)];
                self.only = None;
            }
            None => match self.states.iter_mut().find(|(s, _)| *s == p.state) {
                Some((_, r)) => {
                    r.insert(entry.clone(), timed);
                }
                None => {
                    let mut r = Ranked::default();
                    r.insert(entry.clone(), timed);
                    self.states.reserve_exact(1);
                    self.states.push((p.state, r));
                }
            },
        }
        self.all.insert(entry, timed);
    }

    fn remove(&mut self, id: &[u8], p: Position) -> Option<Entry> {
        if self.only.is_none()
            && let Some(i) = self.states.iter().position(|(s, _)| *s == p.state)
        {
            self.states[i].1.remove(p.millis, id, p.timed);
            if self.states[i].1.is_empty() {
                self.states.swap_remove(i);
            }
            // Back to one state: `all` is its list.
            if self.states.len() == 1 {
                self.only = Some(self.states[0].0);
                self.states = Vec::new();
            }
        }
        let entry = self.all.remove(p.millis, id, p.timed);
        if self.all.is_empty() {
            self.only = None;
            self.states = Vec::new();
        }
        entry
    }

    /// The tasks in this state, or all of them.
    pub(super) fn get(&self, state: Option<TaskState>) -> Option<&Ranked> {
        match (state, self.only) {
            (None, _) => Some(&self.all),
            (Some(state), Some(only)) => (state == only).then_some(&self.all),
            (Some(state), None) => self
                .states
                .iter()
                .find(|(s, _)| *s == state)
                .map(|(_, r)| r),
        }
    }

    fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// Entries as if every task were in two lists, all and its state's (for
    /// tests of the bounds).
    #[cfg(test)]
    fn entries(&self) -> usize {
        match self.only {
            Some(_) => 2 * self.all.len(),
            None => self.all.len() + self.states.iter().map(|(_, r)| r.len()).sum::<usize>(),
        }
    }
}

/// One conversation's tasks: most conversations have one task, which is
/// kept as it is, without lists (a list is made when a second task comes,
/// boxed: a conversation's slot in its owner's map stays small).
#[derive(Debug)]
enum Context {
    One(Entry, Position),
    Many(Box<Group>),
}

/// A context id as its owner's map keeps it: in the map's slot when it is
/// short (a UUID is 36 bytes), so that finding a conversation reads no
/// other memory than the slot, and removing one frees none.
///
/// Written here rather than taken from a crate: `smallvec`'s
/// `SmallVec<[u8; 38]>` is 48 bytes even with its `union` feature (it
/// keeps a capacity beside the bytes; this key is 40), which makes the
/// slot larger than the 96 bytes it is held to,
/// and the inline strings of `compact_str` and the like hold 24 bytes, not
/// a UUID's 36.
#[derive(Clone)]
enum ContextKey {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

/// The longest context id kept in the map's slot.
const INLINE_KEY: usize = 38;

impl ContextKey {
    fn as_bytes(&self) -> &[u8] {
        match self {
            ContextKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
            ContextKey::Heap(b) => b,
        }
    }
}

impl From<&[u8]> for ContextKey {
    fn from(key: &[u8]) -> Self {
        match u8::try_from(key.len()) {
            Ok(len) if key.len() <= INLINE_KEY => {
                let mut bytes = [0; INLINE_KEY];
                bytes[..key.len()].copy_from_slice(key);
                ContextKey::Inline { len, bytes }
            }
            _ => ContextKey::Heap(key.into()),
        }
    }
}

impl std::borrow::Borrow<[u8]> for ContextKey {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

/// Hashed as its bytes are (the map is searched with them).
impl std::hash::Hash for ContextKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl PartialEq for ContextKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for ContextKey {}

impl std::fmt::Debug for ContextKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        String::from_utf8_lossy(self.as_bytes()).fmt(f)
    }
}

impl Context {
    fn insert(&mut self, entry: Entry, p: Position) {
        match self {
            Context::Many(g) => g.insert(entry, p),
            Context::One(first, fp) => {
                let mut g = Box::<Group>::default();
                g.insert(first.clone(), *fp);
                g.insert(entry, p);
                *self = Context::Many(g);
            }
        }
    }

    /// Removes the task; true when the conversation has none left.
    fn remove(&mut self, id: &[u8], p: Position) -> bool {
        match self {
            Context::One(first, _) => *first.id == *id,
            Context::Many(g) => {
                g.remove(id, p);
                g.is_empty()
            }
        }
    }

    /// `f` on the conversation's tasks in this state, or all of them.
    fn read<R>(&self, state: Option<TaskState>, f: impl FnOnce(&Ranked) -> R) -> Option<R> {
        match self {
            Context::Many(g) => g.get(state).map(f),
            Context::One(entry, p) => {
                if state.is_some_and(|s| s != p.state) {
                    return None;
                }
                let mut r = Ranked::default();
                r.insert(entry.clone(), p.timed);
                Some(f(&r))
            }
        }
    }

    #[cfg(test)]
    fn entries(&self) -> usize {
        match self {
            Context::One(..) => 2,
            Context::Many(g) => g.entries(),
        }
    }
}

type Hasher = ahash::RandomState;

/// One owner's tasks.
#[derive(Debug, Default)]
struct OwnerIndex {
    tasks: Group,
    contexts: HashMap<ContextKey, Context, Hasher>,
}

impl OwnerIndex {
    fn insert(&mut self, context: &[u8], entry: Entry, p: Position) {
        // One hash of the context, whether it is there or not.
        match self.contexts.entry_ref(context) {
            EntryRef::Occupied(mut c) => c.get_mut().insert(entry.clone(), p),
            EntryRef::Vacant(v) => {
                v.insert(Context::One(entry.clone(), p));
            }
        }
        self.tasks.insert(entry, p);
    }

    fn remove(&mut self, context: &[u8], id: &[u8], p: Position) -> Option<Entry> {
        if let EntryRef::Occupied(mut c) = self.contexts.entry_ref(context)
            && c.get_mut().remove(id, p)
        {
            c.remove();
            if self.contexts.capacity() > 16 && self.contexts.len() < self.contexts.capacity() / 4 {
                self.contexts.shrink_to(self.contexts.len() * 2);
            }
        }
        self.tasks.remove(id, p)
    }

    /// A task's status changed: it moves in its lists, and a conversation
    /// of one task keeps its place in the map.
    fn moved(&mut self, context: &[u8], id: &[u8], before: Position, after: Position) -> Entry {
        let entry = match self.contexts.get_mut(context) {
            Some(Context::One(first, p)) if *first.id == *id => {
                first.millis = after.millis;
                *p = after;
                let e = self.tasks.remove(id, before);
                e.unwrap_or_else(|| first.clone()).at(after.millis)
            }
            _ => {
                let e = self
                    .remove(context, id, before)
                    .unwrap_or_else(|| Entry::new(after.millis, Arc::from(id)));
                let entry = e.at(after.millis);
                self.insert(context, entry.clone(), after);
                return entry;
            }
        };
        self.tasks.insert(entry.clone(), after);
        entry
    }
}

/// Number of index shards (owners are spread over them by hash).
const SHARDS: usize = 16;

/// The listing indexes of every owner.
pub(super) struct ListIndex {
    hasher: Hasher,
    shards: Box<[RwLock<OwnerMap>]>,
}

/// The owners of one shard and their indexes, found by a hash computed once
/// per change (it also picks the shard).
type OwnerMap = HashTable<(Owner, OwnerIndex)>;

impl Default for ListIndex {
    fn default() -> Self {
        Self {
            hasher: Hasher::new(),
            shards: (0..SHARDS).map(|_| RwLock::default()).collect(),
        }
    }
}

/// A task as the indexes see it.
#[derive(Clone)]
pub(super) struct Indexed<'a> {
    pub(super) owner: &'a Owner,
    pub(super) context: &'a [u8],
    pub(super) id: &'a [u8],
}

/// A change of one task's place in the indexes.
#[derive(Debug, Clone, Copy)]
pub(super) enum Change {
    /// The task was stored, here.
    Insert(Position),
    /// Its status changed from the first to the second.
    Moved(Position, Position),
    /// It left the store, from here.
    Remove(Position),
}

/// Two changes of one task, as one (see `Change::then`).
#[derive(Debug, Clone, Copy)]
pub(super) enum Folded {
    /// One change does what the two did.
    Into(Change),
    /// Together they change nothing: a task stored and removed before the
    /// indexes took it.
    Nothing,
}

impl Change {
    /// This change followed by `later` (of the same task), as one change:
    /// `None` when they do not make one (after its removal, a change is of
    /// a new task with the same id).
    pub(super) fn then(self, later: Change) -> Option<Folded> {
        match (self, later) {
            (Change::Insert(_), Change::Moved(_, to)) => Some(Folded::Into(Change::Insert(to))),
            (Change::Moved(from, _), Change::Moved(_, to)) => {
                Some(Folded::Into(Change::Moved(from, to)))
            }
            (Change::Insert(_), Change::Remove(_)) => Some(Folded::Nothing),
            (Change::Moved(from, _), Change::Remove(_)) => Some(Folded::Into(Change::Remove(from))),
            _ => None,
        }
    }
}

impl ListIndex {
    /// The owner's hash, and its shard (picked by the hash's top bits: the
    /// shard's table places it by the others).
    fn hash(&self, owner: &Owner) -> (u64, usize) {
        let hash = self.hasher.hash_one(owner);
        (hash, (hash >> 60) as usize % SHARDS)
    }

    /// Applies the changes in their order. Consecutive changes of owners in
    /// the same shard take its lock once. With `wait` false, no lock is
    /// waited for: the changes stop before the first whose shard another
    /// thread holds. Returns how many were applied (a prefix).
    pub(super) fn apply<'a>(
        &self,
        changes: impl IntoIterator<Item = (Indexed<'a>, Change)>,
        wait: bool,
    ) -> usize {
        let mut held: Option<(usize, RwLockWriteGuard<'_, OwnerMap>)> = None;
        let mut applied = 0;
        for (task, change) in changes {
            let (hash, at) = self.hash(task.owner);
            let shard = match &mut held {
                Some((s, guard)) if *s == at => guard,
                _ => {
                    // The previous shard's lock is released first.
                    held = None;
                    let guard = if wait {
                        self.shards[at].write()
                    } else {
                        match self.shards[at].try_write() {
                            Some(guard) => guard,
                            None => break,
                        }
                    };
                    &mut held.insert((at, guard)).1
                }
            };
            self.change(shard, hash, &task, change);
            applied += 1;
        }
        applied
    }

    fn change(&self, shard: &mut OwnerMap, hash: u64, task: &Indexed<'_>, change: Change) {
        let owner = task.owner;
        let found = shard.find_entry(hash, |(o, _)| o == owner);
        match (change, found) {
            (Change::Insert(p), found) => {
                let entry = Entry::new(p.millis, Arc::from(task.id));
                match found {
                    Ok(mut o) => o.get_mut().1.insert(task.context, entry, p),
                    Err(_) => {
                        let mut o = OwnerIndex::default();
                        o.insert(task.context, entry, p);
                        shard.insert_unique(hash, (owner.clone(), o), |(o, _)| {
                            self.hasher.hash_one(o)
                        });
                    }
                }
            }
            (Change::Moved(before, after), Ok(mut o)) => {
                o.get_mut().1.moved(task.context, task.id, before, after);
            }
            (Change::Remove(p), Ok(mut o)) => {
                let index = &mut o.get_mut().1;
                index.remove(task.context, task.id, p);
                if index.tasks.is_empty() {
                    o.remove();
                }
            }
            (Change::Moved(..) | Change::Remove(_), Err(_)) => {}
        }
    }

    /// `f` on the owner's tasks (of this context, in this state, when
    /// given), under the index's read lock; `None` when there are none.
    pub(super) fn read<R>(
        &self,
        owner: &Owner,
        context: Option<&[u8]>,
        state: Option<TaskState>,
        f: impl FnOnce(&Ranked) -> R,
    ) -> Option<R> {
        let (hash, at) = self.hash(owner);
        let shard = self.shards[at].read();
        let (_, o) = shard.find(hash, |(o, _)| o == owner)?;
        match context {
            None => o.tasks.get(state).map(f),
            Some(c) => o.contexts.get(c)?.read(state, f),
        }
    }

    /// One change, applied at once (for the tests).
    #[cfg(test)]
    pub(super) fn insert(&self, task: &Indexed<'_>, p: Position) {
        self.apply([(task.clone(), Change::Insert(p))], true);
    }

    #[cfg(test)]
    pub(super) fn moved(&self, task: &Indexed<'_>, before: Position, after: Position) {
        self.apply([(task.clone(), Change::Moved(before, after))], true);
    }

    #[cfg(test)]
    pub(super) fn remove(&self, task: &Indexed<'_>, p: Position) {
        self.apply([(task.clone(), Change::Remove(p))], true);
    }

    /// How many owners have an index (for tests of the bounds).
    #[cfg(test)]
    pub(super) fn owners(&self) -> usize {
        self.shards.iter().map(|s| s.read().len()).sum()
    }

    /// How many entries the indexes hold in all, counted as if each task
    /// were in four lists (see `Group` and `Context` for the lists that are
    /// not kept).
    #[cfg(test)]
    pub(super) fn entries(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                s.read()
                    .iter()
                    .map(|(_, o)| {
                        o.tasks.entries() + o.contexts.values().map(Context::entries).sum::<usize>()
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
        Entry::new(millis, id.as_bytes().into())
    }

    /// A reference model: a sorted vector.
    fn check(r: &Ranked, model: &[(i64, String)]) {
        assert_eq!(r.len(), model.len());
        let got: Vec<(i64, String)> = r
            .descending_from(None)
            .map(|e| (e.millis, String::from_utf8(e.id.to_vec()).unwrap()))
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
                .descending_from(Some((*m, id.as_bytes())))
                .map(|e| (e.millis, String::from_utf8(e.id.to_vec()).unwrap()))
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
            assert!(r.remove(k / 3, id.as_bytes(), true).is_some(), "{id}");
            model.retain(|(_, x)| *x != id);
        }
        assert!(r.remove(0, b"t0", true).is_none());
        check(&r, &model);
        assert!(r.chunks.len() <= 2, "{} chunks", r.chunks.len());
        for (m, id) in std::mem::take(&mut model) {
            assert!(r.remove(m, id.as_bytes(), true).is_some());
        }
        assert!(r.is_empty());
        assert_eq!(r.held_bytes(), 0, "an empty set holds nothing");
    }

    /// A removal finds its entry among many at the same time, across
    /// chunks, whether their tags tell them apart or not (ids with the same
    /// end and length), and finds nothing for an id that is not there.
    #[test]
    fn removals_find_entries_that_share_a_time_or_a_tag() {
        for (n, same_tag) in [
            (3 * CHUNK_MAX, false),
            (3 * CHUNK_MAX, true),
            (FIND_SCAN + 3, true),
        ] {
            let id = |i: usize| {
                if same_tag {
                    format!("{i:05}-same-end")
                } else {
                    format!("same-start-{i:05}")
                }
            };
            if same_tag {
                assert_eq!(tag(id(1).as_bytes()), tag(id(2).as_bytes()));
            }
            let mut r = Ranked::default();
            let mut model = Vec::new();
            for i in 0..n {
                // Most at one time; a few before and after it.
                let millis = match i % 10 {
                    0 => 5,
                    9 => 20,
                    _ => 10,
                };
                assert!(r.insert(e(millis, &id(i)), true));
                model.push((millis, id(i)));
            }
            assert!(r.remove(10, b"absent", true).is_none());
            assert!(
                r.remove(10, id(0).as_bytes(), true).is_none(),
                "at another time"
            );
            for i in (0..n).map(|i| (i * 7919) % n) {
                let (millis, key) = model.iter().find(|(_, k)| *k == id(i)).cloned().unwrap();
                let entry = r.remove(millis, key.as_bytes(), true);
                assert_eq!(entry.map(|e| e.id.to_vec()), Some(key.clone().into_bytes()));
                model.retain(|(_, k)| *k != key);
                if model.len() % 97 == 0 {
                    check(&r, &model);
                }
            }
            assert!(r.is_empty());
        }
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
        r.remove(0, b"untimed", false);
        assert_eq!(r.count_from(-10), 3);
    }

    /// A conversation's slot in its owner's map: its key, and its task (or
    /// a box of its lists).
    #[test]
    fn a_conversation_slot_is_small() {
        let slot = std::mem::size_of::<(ContextKey, Context)>();
        assert!(slot <= 96, "{slot} bytes");
        let key = ContextKey::from("0196f3a2-7c1e-7d40-9b1a-3c5e8f2d4a11".as_bytes());
        assert!(matches!(key, ContextKey::Inline { .. }));
        assert_eq!(key.as_bytes(), b"0196f3a2-7c1e-7d40-9b1a-3c5e8f2d4a11");
        let long = ContextKey::from([7u8; 39].as_slice());
        assert!(matches!(long, ContextKey::Heap(_)));
        assert_eq!(long.as_bytes(), [7u8; 39]);
    }

    #[test]
    fn a_small_set_is_small() {
        let mut r = Ranked::default();
        r.insert(e(1, "a"), true);
        assert!(r.held_bytes() <= 64, "{} bytes", r.held_bytes());
    }
    /// The indexes against a model (every task with its context and
    /// position), through random inserts, moves and removals: every list
    /// (all, by state, by context, by context and state) reads as the
    /// model filtered and sorted.
    #[test]
    fn the_lists_follow_a_model_through_moves() {
        use std::collections::BTreeMap;
        let owner = Owner::default();
        let index = ListIndex::default();
        let states = [
            TaskState::Working,
            TaskState::InputRequired,
            TaskState::Completed,
        ];
        // id -> (context, position)
        let mut model: BTreeMap<String, (String, Position)> = BTreeMap::new();
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for step in 0..4000 {
            let pick = next(10);
            let id = format!("t{}", next(60));
            let at = |millis: u64, state: usize| Position {
                state: states[state],
                millis: millis as i64,
                timed: millis % 5 != 0,
            };
            match model.get(&id).cloned() {
                None if pick < 7 => {
                    // Some too long to be kept in the map's slot.
                    let context = match next(8) {
                        k if k % 2 == 1 => format!("c{k}-{}", "long".repeat(10)),
                        k => format!("c{k}"),
                    };
                    let p = at(next(50), next(3) as usize);
                    index.insert(
                        &Indexed {
                            owner: &owner,
                            context: context.as_bytes(),
                            id: id.as_bytes(),
                        },
                        p,
                    );
                    model.insert(id, (context, p));
                }
                None => {}
                Some((context, before)) if pick < 6 => {
                    let after = at(next(50), next(3) as usize);
                    let t = Indexed {
                        owner: &owner,
                        context: context.as_bytes(),
                        id: id.as_bytes(),
                    };
                    if after != before {
                        index.moved(&t, before, after);
                    }
                    model.insert(id, (context, after));
                }
                Some((context, p)) => {
                    index.remove(
                        &Indexed {
                            owner: &owner,
                            context: context.as_bytes(),
                            id: id.as_bytes(),
                        },
                        p,
                    );
                    model.remove(&id);
                }
            }
            if step % 97 != 0 && step != 3999 {
                continue;
            }
            let contexts: Vec<Option<String>> = std::iter::once(None)
                .chain((0..8).map(|c| Some(format!("c{c}"))))
                .collect();
            for context in &contexts {
                for state in std::iter::once(None).chain(states.iter().copied().map(Some)) {
                    let mut want: Vec<(i64, String)> = model
                        .iter()
                        .filter(|(_, (c, p))| {
                            context.as_ref().is_none_or(|x| x == c)
                                && state.is_none_or(|s| s == p.state)
                        })
                        .map(|(id, (_, p))| (p.millis, id.clone()))
                        .collect();
                    want.sort();
                    want.reverse();
                    let untimed_want = model
                        .iter()
                        .filter(|(_, (c, p))| {
                            context.as_ref().is_none_or(|x| x == c)
                                && state.is_none_or(|s| s == p.state)
                                && p.timed
                        })
                        .count();
                    let got =
                        index.read(&owner, context.as_deref().map(str::as_bytes), state, |r| {
                            let list: Vec<(i64, String)> = r
                                .descending_from(None)
                                .map(|e| (e.millis, String::from_utf8(e.id.to_vec()).unwrap()))
                                .collect();
                            (list, r.count_from(0))
                        });
                    match got {
                        None => assert!(want.is_empty(), "{context:?} {state:?} at {step}"),
                        Some((list, timed)) => {
                            assert_eq!(list, want, "{context:?} {state:?} at {step}");
                            assert_eq!(timed, untimed_want, "{context:?} {state:?} at {step}");
                        }
                    }
                }
            }
        }
        for (id, (context, p)) in std::mem::take(&mut model) {
            index.remove(
                &Indexed {
                    owner: &owner,
                    context: context.as_bytes(),
                    id: id.as_bytes(),
                },
                p,
            );
        }
        assert_eq!(index.owners(), 0, "an empty index holds no owner");
        assert_eq!(index.entries(), 0);
    }
}
