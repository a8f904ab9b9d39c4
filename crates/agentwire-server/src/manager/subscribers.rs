//! Subscribers: the queues a task's events fan out to (a stream's bounded
//! queue, or the one slot of a request waiting for the end of a turn), how
//! a request subscribes, and how a slow subscriber is resynchronised or
//! cut.
//!
//! A stream's queue is bounded three ways: in events (`queue_capacity`: a
//! reader further behind is resynchronised from a snapshot), in bytes
//! (`queue_bytes`: one further behind is cut), and, with every other
//! stream of the server, in total bytes (`max_queued_bytes`, the
//! [`Budget`]): when the total is reached, the stream furthest behind is
//! cut. A cut stream's queued events are dropped at once (their memory
//! freed, though its reader may never read again), and its reader gets an
//! error telling it to subscribe again with the last event id it
//! received. Publishing never waits: the total is one atomic counter,
//! and the search for the stream to cut runs only when it is reached.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};

use agentwire_types::{A2aError, A2aResult, ErrorKind, StreamResponse, Task};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use super::TaskManager;
use super::events::{EventId, event_size};
use super::live::{LiveState, LiveTask};
use crate::store::StoredTask;

/// What subscribers receive: an event, or an error that ends the request
/// (boxed, to keep queue slots small).
pub(crate) type Item = Result<Arc<StreamResponse>, Box<A2aError>>;

/// What a stream's queue holds: an item, its event id (events of a task
/// whose log is recorded), and the bytes it counts for.
pub(crate) type Queued = (Option<EventId>, Item, usize);

/// Which bound a stream passed when it was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cut {
    /// Its own queue's bytes (`queue_bytes`).
    Stream(usize),
    /// The bytes queued for all the server's streams (`max_queued_bytes`):
    /// it was the furthest behind when the total was reached.
    Server(usize),
}

/// The bytes queued for the stream subscribers of every task, and their
/// bound (see the [module documentation](self)).
pub(crate) struct Budget {
    held: AtomicUsize,
    limit: usize,
    /// Counts the rounds of cuts; a queue read from since the last round
    /// (its `read_round` is this one) is being read.
    round: AtomicU64,
    /// Every stream queue, to find the one to cut (locked to join, to
    /// leave, and to cut: never to queue or take an event).
    queues: Mutex<Queues>,
    /// Streams cut by their own bound, and by the server's.
    cut_stream: AtomicU64,
    cut_server: AtomicU64,
}

#[derive(Default)]
struct Queues {
    next: u64,
    all: HashMap<u64, Weak<Queue>, ahash::RandomState>,
}

/// The figures of [`Budget`] (for the metrics).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct QueueStats {
    /// Bytes queued for all streams now.
    pub(crate) bytes: u64,
    /// Streams cut by their own bound so far.
    pub(crate) cut_stream: u64,
    /// Streams cut by the server's bound so far.
    pub(crate) cut_server: u64,
}

impl Budget {
    pub(crate) fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            held: AtomicUsize::new(0),
            limit: limit.max(1),
            round: AtomicU64::new(0),
            queues: Mutex::new(Queues::default()),
            cut_stream: AtomicU64::new(0),
            cut_server: AtomicU64::new(0),
        })
    }

    pub(crate) fn stats(&self) -> QueueStats {
        QueueStats {
            bytes: self.held.load(Ordering::Relaxed) as u64,
            cut_stream: self.cut_stream.load(Ordering::Relaxed),
            cut_server: self.cut_server.load(Ordering::Relaxed),
        }
    }

    /// Counts `size` more bytes for `me` (whose queue lock is not held),
    /// making room when the total would pass the bound: the queue furthest
    /// behind is cut, until the total is under the bound again. `false`
    /// when `me` is the one cut.
    fn take(&self, size: usize, me: &Queue) -> bool {
        let total = self.held.fetch_add(size, Ordering::AcqRel) + size;
        if total <= self.limit {
            return true;
        }
        self.make_room(size, me)
    }

    fn give_back(&self, size: usize) {
        self.held.fetch_sub(size, Ordering::AcqRel);
    }

    #[cold]
    fn make_room(&self, size: usize, me: &Queue) -> bool {
        let mut dropped = Vec::new();
        let queues = self.queues.lock();
        let round = self.round.fetch_add(1, Ordering::AcqRel);
        let mut admitted = true;
        while self.held.load(Ordering::Acquire) > self.limit {
            // The furthest behind: of the queues not read from since the
            // last round (their readers stopped, or are slowest), the
            // largest; the largest of all when every queue is being read.
            let victim = queues
                .all
                .values()
                .filter_map(Weak::upgrade)
                .filter(|q| q.held.load(Ordering::Acquire) > 0 || std::ptr::eq(&**q, me))
                .max_by_key(|q| {
                    let idle = q.read_round.load(Ordering::Acquire) < round;
                    let held = q.held.load(Ordering::Acquire);
                    // `me` counts with the event it is adding.
                    let held = if std::ptr::eq(&**q, me) {
                        held + size
                    } else {
                        held
                    };
                    (idle, held)
                });
            match victim {
                Some(q) if !std::ptr::eq(&*q, me) => {
                    let mut inner = q.inner.lock();
                    dropped.push(q.cut_locked(&mut inner, Cut::Server(self.limit)));
                }
                // This one is the furthest behind (or the event alone is
                // over the bound).
                _ => {
                    self.give_back(size);
                    let mut inner = me.inner.lock();
                    dropped.push(me.cut_locked(&mut inner, Cut::Server(self.limit)));
                    admitted = false;
                    break;
                }
            }
        }
        drop(queues);
        // The events go once no lock is held.
        drop(dropped);
        admitted
    }
}

/// A stream subscriber's queue of events (see the [module
/// documentation](self)): filled by the task's publisher, emptied by the
/// stream's reader.
pub(crate) struct Queue {
    inner: Mutex<QueueInner>,
    /// The bytes queued (changed under `inner`'s lock, read without it).
    held: AtomicUsize,
    /// The round of cuts when its reader last took an event.
    read_round: AtomicU64,
    /// The reader is gone (the subscription was dropped).
    gone: AtomicBool,
    /// The most events, and bytes, it holds.
    capacity: usize,
    limit: usize,
    budget: Arc<Budget>,
    /// Its key among the budget's queues.
    key: u64,
    /// Wakes the artifact writers waiting for its reader (see
    /// [`TaskManager::room_for_chunk`]), as it takes events or goes.
    space: tokio::sync::Notify,
    /// How many writers wait on `space` (the reader only wakes them when
    /// some do).
    waiters: AtomicUsize,
    /// A writer waited for its reader as long as it may: no writer waits
    /// for it again.
    stalled: AtomicBool,
}

struct QueueInner {
    items: VecDeque<Queued>,
    waker: Option<Waker>,
    /// The publisher let go of it: once the queue is read, the stream
    /// ends (or is resynchronised, see `Subscription::recv_event`).
    closed: bool,
    /// It was cut: its events were dropped, and its reader ends with an
    /// error.
    cut: Option<Cut>,
}

/// What became of an item offered to a stream's queue.
pub(crate) enum Pushed {
    Queued,
    /// The queue holds `queue_capacity` events: its reader is to be
    /// resynchronised.
    Full,
    /// Its reader is gone, or it was cut: the subscriber goes.
    Gone,
}

impl Queue {
    fn new(manager: &TaskManager) -> Arc<Self> {
        let budget = Arc::clone(&manager.budget);
        let mut queues = budget.queues.lock();
        let key = queues.next;
        queues.next += 1;
        let queue = Arc::new(Self {
            inner: Mutex::new(QueueInner {
                items: VecDeque::new(),
                waker: None,
                closed: false,
                cut: None,
            }),
            held: AtomicUsize::new(0),
            read_round: AtomicU64::new(budget.round.load(Ordering::Acquire)),
            gone: AtomicBool::new(false),
            capacity: manager.queue_capacity,
            limit: manager.queue_bytes,
            budget: Arc::clone(&budget),
            key,
            space: tokio::sync::Notify::new(),
            waiters: AtomicUsize::new(0),
            stalled: AtomicBool::new(false),
        });
        queues.all.insert(key, Arc::downgrade(&queue));
        drop(queues);
        queue
    }

    /// Queues an item (the publisher's side; never waits).
    pub(crate) fn try_send(&self, item: Queued) -> Pushed {
        if self.gone.load(Ordering::Acquire) {
            return Pushed::Gone;
        }
        let size = item.2;
        // The server's bound first: making room may cut this queue too.
        if size > 0 && !self.budget.take(size, self) {
            return Pushed::Gone;
        }
        let mut inner = self.inner.lock();
        let refused = if inner.cut.is_some() || self.gone.load(Ordering::Acquire) {
            Some(Pushed::Gone)
        } else if inner.items.len() >= self.capacity {
            Some(Pushed::Full)
        } else {
            None
        };
        if let Some(refused) = refused {
            drop(inner);
            self.budget.give_back(size);
            return refused;
        }
        let held = self.held.load(Ordering::Acquire);
        if held > 0 && held.saturating_add(size) > self.limit {
            self.budget.give_back(size);
            let dropped = self.cut_locked(&mut inner, Cut::Stream(self.limit));
            drop(inner);
            drop(dropped);
            return Pushed::Gone;
        }
        self.held.store(held + size, Ordering::Release);
        inner.items.push_back(item);
        let waker = inner.waker.take();
        drop(inner);
        if let Some(w) = waker {
            w.wake();
        }
        Pushed::Queued
    }

    /// Cuts the queue (its lock held): its events are taken out (to be
    /// dropped by the caller once no lock is held), no more are queued,
    /// and its reader is woken to end with the error of `cut`.
    fn cut_locked(&self, inner: &mut QueueInner, cut: Cut) -> VecDeque<Queued> {
        let items = std::mem::take(&mut inner.items);
        let held = self.held.swap(0, Ordering::AcqRel);
        self.budget.give_back(held);
        if inner.cut.is_none() && !self.gone.load(Ordering::Acquire) {
            inner.cut = Some(cut);
            let counter = match cut {
                Cut::Stream(_) => &self.budget.cut_stream,
                Cut::Server(_) => &self.budget.cut_server,
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(w) = inner.waker.take() {
            w.wake();
        }
        self.wake_writers();
        items
    }

    /// The publisher lets go of the queue: its reader reads what is
    /// queued, then the stream ends.
    fn close(&self) {
        let waker = {
            let mut inner = self.inner.lock();
            inner.closed = true;
            inner.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The next item (the reader's side): `Ready(None)` once the queue is
    /// closed and read, `Ready(Some(Err(cut)))` once it was cut.
    fn poll_pop(&self, cx: &mut Context<'_>) -> Poll<Option<Result<Queued, Cut>>> {
        let mut inner = self.inner.lock();
        if let Some(item) = inner.items.pop_front() {
            let size = item.2;
            if size > 0 {
                self.held.fetch_sub(size, Ordering::AcqRel);
                self.budget.give_back(size);
            }
            self.read_round
                .store(self.budget.round.load(Ordering::Relaxed), Ordering::Relaxed);
            drop(inner);
            self.wake_writers();
            return Poll::Ready(Some(Ok(item)));
        }
        if let Some(cut) = inner.cut {
            return Poll::Ready(Some(Err(cut)));
        }
        if inner.closed {
            return Poll::Ready(None);
        }
        if !inner
            .waker
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            inner.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    /// The reader is gone: the queued events go, and so does the queue
    /// from the budget's list.
    fn drop_reader(&self) {
        let items = {
            let mut inner = self.inner.lock();
            self.gone.store(true, Ordering::Release);
            inner.waker = None;
            let held = self.held.swap(0, Ordering::AcqRel);
            self.budget.give_back(held);
            std::mem::take(&mut inner.items)
        };
        self.wake_writers();
        drop(items);
        self.budget.queues.lock().all.remove(&self.key);
    }

    /// Wakes the writers waiting for this queue's reader, if any (a load
    /// of one counter when none waits).
    fn wake_writers(&self) {
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.space.notify_waiters();
        }
    }

    /// Whether a writer should wait before adding to this queue: half of
    /// its events or bytes are unread, its reader is still there and no
    /// writer has given up on it.
    fn backed_up(&self) -> bool {
        if self.stalled.load(Ordering::Acquire) || self.gone.load(Ordering::Acquire) {
            return false;
        }
        let inner = self.inner.lock();
        inner.cut.is_none()
            && (inner.items.len() >= self.capacity.div_ceil(2)
                || self.held.load(Ordering::Acquire) >= self.limit.div_ceil(2))
    }
}

/// Counts a writer among a queue's waiters while it lives.
struct Waiting<'a>(&'a Queue);

impl<'a> Waiting<'a> {
    fn new(queue: &'a Queue) -> Self {
        queue.waiters.fetch_add(1, Ordering::SeqCst);
        Self(queue)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

impl TaskManager {
    /// Backpressure for a streamed artifact's writer
    /// ([`crate::ArtifactWriter`]): waits while a stream following the task
    /// on this server has half its queue (events or bytes) unread, so that
    /// a slow reader slows the writer down instead of being resynchronised
    /// or cut. A reader that takes nothing for `max_wait` is given up on
    /// (no writer waits for it again; it falls behind as any slow reader
    /// does). Returns early when the task is canceled.
    pub(crate) async fn room_for_chunk(&self, live: &LiveTask, max_wait: std::time::Duration) {
        loop {
            let backed_up = {
                let st = live.state.lock();
                st.subscribers.iter().find_map(|s| match s {
                    Subscriber::Stream { tx, .. } if tx.backed_up() => Some(Arc::clone(&tx.0)),
                    _ => None,
                })
            };
            let Some(queue) = backed_up else { return };
            let waiting = Waiting::new(&queue);
            let notified = queue.space.notified();
            tokio::pin!(notified);
            // Registered before the check: a read between the two wakes it.
            notified.as_mut().enable();
            if !queue.backed_up() {
                continue;
            }
            tokio::select! {
                () = &mut notified => {}
                () = live.cancel.cancelled() => return,
                () = tokio::time::sleep(max_wait) => {
                    queue.stalled.store(true, Ordering::Release);
                    tracing::debug!(
                        task = %live.id,
                        waited = ?max_wait,
                        "a stream's reader took no event: the artifact writer goes on without it"
                    );
                }
            }
            drop(waiting);
        }
    }
}

/// The publisher's handle on a stream's queue; dropping it closes the
/// queue.
pub(crate) struct QueueTx(Arc<Queue>);

impl std::ops::Deref for QueueTx {
    type Target = Queue;
    fn deref(&self) -> &Queue {
        &self.0
    }
}

impl QueueTx {
    fn is_closed(&self) -> bool {
        self.0.gone.load(Ordering::Acquire)
    }
}

impl Drop for QueueTx {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// The error that ends a stream that was cut.
fn cut_error(task_id: &str, cut: Cut) -> A2aError {
    let why = match cut {
        Cut::Stream(limit) => {
            format!("its reader fell behind by more than {limit} bytes of events")
        }
        Cut::Server(limit) => format!(
            "the events queued for all the server's streams reached {limit} bytes, and its \
             reader was the furthest behind"
        ),
    };
    let limit = match cut {
        Cut::Stream(l) | Cut::Server(l) => l,
    };
    A2aError::new(
        ErrorKind::Internal,
        format!(
            "the stream of task {task_id} was closed: {why}; subscribe again (with the last \
             event id received, to get the events missed)"
        ),
    )
    .with_metadata("taskId", task_id.to_owned())
    .with_metadata("limitBytes", limit.to_string())
}

pub(crate) enum Subscriber {
    /// Every event, in a bounded queue.
    Stream {
        tx: QueueTx,
        overflow: Arc<AtomicBool>,
    },
    /// Only the item that ends the turn (a blocking `SendMessage` waiting
    /// for its answer): a message, an error, a terminal or interrupted
    /// state. Gone once delivered.
    Final(Option<oneshot::Sender<Item>>),
    /// A stream subscriber that fell behind: its queue was dropped and it
    /// will rejoin from a snapshot. It still counts as a follower, so the
    /// task's live state is not retired under it meanwhile.
    Lagging { overflow: Arc<AtomicBool> },
}

impl Subscriber {
    pub(super) fn is_closed(&self) -> bool {
        match self {
            Subscriber::Stream { tx, .. } => tx.is_closed(),
            Subscriber::Final(Some(tx)) => tx.is_closed(),
            Subscriber::Final(None) => true,
            // Gone when the subscription holding the other handle is.
            Subscriber::Lagging { overflow } => Arc::strong_count(overflow) == 1,
        }
    }
}

impl LiveTask {
    /// Tells the requests waiting for the end of the turn that it ended
    /// (an event without payload: they read the task).
    pub(super) fn settle(&self, st: &mut LiveState, signal: &Arc<StreamResponse>) {
        st.subscribers.retain_mut(|s| match s {
            Subscriber::Final(slot) => {
                if let Some(tx) = slot.take() {
                    let _ = tx.send(Ok(Arc::clone(signal)));
                }
                false
            }
            _ => true,
        });
    }

    pub(crate) fn publish(&self, st: &mut LiveState, item: Item) {
        let is_final = item.as_ref().map_or(true, |ev| ev.ends_stream());
        // The event's place in the task's log, when it is recorded.
        let streams = st
            .subscribers
            .iter()
            .any(|s| matches!(s, Subscriber::Stream { .. }));
        let (id, size) = match &item {
            Ok(event) => match st.log.as_mut() {
                Some(log) => {
                    let (id, size) = log.record(event);
                    (Some(id), size)
                }
                None if streams => (None, event_size(event)),
                None => (None, 0),
            },
            Err(_) => (None, 0),
        };
        st.subscribers.retain_mut(|s| {
            let lagging = match s {
                Subscriber::Stream { tx, overflow } => {
                    match tx.try_send((id, item.clone(), size)) {
                        Pushed::Queued => return true,
                        Pushed::Full => {
                            overflow.store(true, Ordering::Release);
                            Arc::clone(overflow)
                        }
                        // Cut (its reader ends with an error), or gone.
                        Pushed::Gone => return false,
                    }
                }
                Subscriber::Final(slot) if is_final => {
                    if let Some(tx) = slot.take() {
                        let _ = tx.send(item.clone());
                    }
                    return false;
                }
                Subscriber::Final(slot) => return slot.as_ref().is_some_and(|tx| !tx.is_closed()),
                Subscriber::Lagging { .. } => return true,
            };
            // Its queue goes (the subscriber drains it, then rejoins from a
            // snapshot); a placeholder keeps it counted as a follower.
            *s = Subscriber::Lagging { overflow: lagging };
            true
        });
    }
}

impl TaskManager {
    pub(super) fn subscribe_locked(
        self: &Arc<Self>,
        live: &Arc<LiveTask>,
        st: &mut LiveState,
        finals_only: bool,
    ) -> Subscription {
        let rx = if finals_only {
            let (tx, rx) = oneshot::channel();
            st.subscribers.push(Subscriber::Final(Some(tx)));
            Rx::Final(Some(rx))
        } else {
            if st.log.is_none() {
                st.log = Some(self.logs.open(&live.id));
            }
            let queue = Queue::new(self);
            let overflow = Arc::new(AtomicBool::new(false));
            st.subscribers.push(Subscriber::Stream {
                tx: QueueTx(Arc::clone(&queue)),
                overflow: Arc::clone(&overflow),
            });
            Rx::Stream { queue, overflow }
        };
        Subscription {
            rx,
            live: Arc::clone(live),
            manager: Arc::clone(self),
            held: None,
        }
    }

    /// Subscribes to an existing task: returns its current snapshot and a
    /// subscription to everything after it. With `resume` (the id of the
    /// last event a client received), the events after it are returned as
    /// well when the task's log still holds all of them (`Opening::Missed`);
    /// the snapshot is what the client should start from otherwise.
    pub(crate) async fn subscribe(
        self: &Arc<Self>,
        stored: &StoredTask,
        history_length: Option<usize>,
        resume: Option<EventId>,
    ) -> A2aResult<(Opening, Subscription)> {
        loop {
            let (live, ()) = self.attach(stored, |_, _, _| ());
            let guard = live.order.lock().await;
            // The snapshot first, then the subscriber joins (with a bus,
            // reading it may first deliver other replicas' events to the
            // subscribers already there).
            let snapshot = match self.snapshot_locked(&live, history_length).await {
                Ok(Some(s)) => s,
                Ok(None) => {
                    drop(guard);
                    self.release(&live);
                    return Err(A2aError::task_not_found(&live.id));
                }
                Err(e) => {
                    drop(guard);
                    self.release(&live);
                    return Err(e);
                }
            };
            let sub = {
                let mut st = live.state.lock();
                // Retired between attach and lock: try again on a fresh one.
                (!st.retired).then(|| {
                    let sub = self.subscribe_locked(&live, &mut st, false);
                    let log = st.log.as_ref();
                    let missed = resume.and_then(|r| log?.after(r));
                    let at = log.map(|l| l.last_id());
                    (sub, missed, at)
                })
            };
            let Some((sub, missed, at)) = sub else {
                drop(guard);
                continue;
            };
            drop(guard);
            let opening = match missed {
                Some(events) => Opening::Missed {
                    events,
                    state: snapshot.task.state(),
                },
                None => Opening::Snapshot {
                    task: snapshot.task,
                    id: at,
                },
            };
            return Ok((opening, sub));
        }
    }
}

impl TaskManager {
    /// At shutdown, once the tasks still running are failed: ends every
    /// stream still open on a task (`SubscribeToTask`, or a stream whose
    /// task no agent of this process works on any more) with a last item,
    /// so that no stream is cut without one (spec: a stream closes at a
    /// terminal or interrupted state):
    ///
    /// - a task waiting for its client (input-required, auth-required):
    ///   its current status, as a status update, then the end of the
    ///   stream. Nothing is written: the task stays as it is, to be
    ///   continued later (after a restart, on a durable store);
    /// - a task at work elsewhere (another replica): the error
    ///   `UNAVAILABLE` saying that this server is shutting down, so that
    ///   the client subscribes again (to another replica);
    /// - a terminal task: its streams already have their final event;
    ///   they just end.
    ///
    /// Returns how many tasks' streams were ended.
    pub(crate) async fn end_streams_at_shutdown(&self) -> usize {
        let open: Vec<Arc<LiveTask>> = self
            .live
            .iter()
            .filter(|e| {
                let st = e.value().state.lock();
                st.created
                    && st.subscribers.iter().any(|s| {
                        matches!(s, Subscriber::Stream { .. } | Subscriber::Lagging { .. })
                            && !s.is_closed()
                    })
            })
            .map(|e| Arc::clone(e.value()))
            .collect();
        let mut ended = 0;
        for live in open {
            let guard = live.order.lock().await;
            let last: Option<Item> = match self.get_task(&live.id, Some(0)).await {
                Ok(Some(stored)) => {
                    let task = stored.task;
                    let state = task.state();
                    if state.is_terminal() {
                        None
                    } else if state.is_interrupted() {
                        let status = task.status.unwrap_or_default();
                        Some(Ok(Arc::new(StreamResponse::from(
                            agentwire_types::TaskStatusUpdateEvent::new(
                                &task.id,
                                &task.context_id,
                                status,
                            ),
                        ))))
                    } else {
                        Some(Err(Box::new(shutting_down(&live.id))))
                    }
                }
                Ok(None) => Some(Err(Box::new(A2aError::task_not_found(&live.id)))),
                Err(_) => Some(Err(Box::new(shutting_down(&live.id)))),
            };
            {
                let mut st = live.state.lock();
                if let Some(last) = last {
                    live.publish(&mut st, last.clone());
                    st.closing = Some(last);
                }
                // Their queues go: each stream reads what is queued (the
                // last item included), then ends.
                st.subscribers
                    .retain(|s| !matches!(s, Subscriber::Stream { .. }));
            }
            drop(guard);
            ended += 1;
        }
        ended
    }
}

/// The error ending a stream at shutdown when the task goes on elsewhere.
fn shutting_down(task_id: &str) -> A2aError {
    A2aError::unavailable(format!(
        "the server is shutting down; subscribe to task {task_id} again (SubscribeToTask) to \
         go on following it"
    ))
    .with_metadata("taskId", task_id.to_owned())
}

/// How a stream to an existing task opens.
pub(crate) enum Opening {
    /// With the task as it is now (and the id of the last event it
    /// includes).
    Snapshot { task: Task, id: Option<EventId> },
    /// With the events a reconnecting client missed (none when it missed
    /// nothing), and the task's current state.
    Missed {
        events: Vec<(EventId, Arc<StreamResponse>)>,
        state: agentwire_types::TaskState,
    },
}

pub(super) enum Rx {
    Stream {
        queue: Arc<Queue>,
        overflow: Arc<AtomicBool>,
    },
    Final(Option<oneshot::Receiver<Item>>),
}

/// A subscriber's queue of events for one task.
pub(crate) struct Subscription {
    rx: Rx,
    live: Arc<LiveTask>,
    manager: Arc<TaskManager>,
    /// Held as long as the subscription: the place of a stream in its
    /// caller's bound on open streams (`handler/open_tasks.rs`).
    held: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl Subscription {
    /// The next event. When the subscriber fell too far behind, its queue is
    /// replaced and the current task snapshot is returned instead of the
    /// events it missed.
    pub(crate) async fn recv(&mut self) -> Option<Item> {
        self.recv_event().await.map(|(_, item)| item)
    }

    /// [`Self::recv`], with the event's id when it has one.
    pub(crate) async fn recv_event(&mut self) -> Option<(Option<EventId>, Item)> {
        let overflowed = match &mut self.rx {
            Rx::Final(slot) => {
                let rx = slot.take()?;
                return rx.await.ok().map(|item| (None, item));
            }
            Rx::Stream { queue, overflow } => {
                let overflow = Arc::clone(overflow);
                match std::future::poll_fn(|cx| queue.poll_pop(cx)).await {
                    Some(Ok((id, item, _))) => return Some((id, item)),
                    Some(Err(cut)) => return Some((None, Err(Box::new(self.cut(cut))))),
                    None => overflow.load(Ordering::Acquire),
                }
            }
        };
        if !overflowed {
            return None;
        }
        let guard = self.live.order.lock().await;
        {
            let st = self.live.state.lock();
            // The store failed the task: the error ends the stream.
            if let Some(e) = st.storage_failed.clone() {
                return Some((None, Err(e)));
            }
            // The server is stopping: the streams' last item, then the end.
            if let Some(last) = st.closing.clone() {
                drop(st);
                replace_rx(&mut self.rx, Rx::Final(None));
                return Some((None, last));
            }
        }
        // The snapshot first, then the new queue (see `subscribe`).
        let snapshot = self.manager.snapshot_locked(&self.live, None).await;
        let queue = Queue::new(&self.manager);
        let overflow = Arc::new(AtomicBool::new(false));
        let at = {
            let old = match &self.rx {
                Rx::Stream { overflow, .. } => Some(Arc::clone(overflow)),
                Rx::Final(_) => None,
            };
            let mut st = self.live.state.lock();
            if st.log.is_none() {
                st.log = Some(self.manager.logs.open(&self.live.id));
            }
            // The placeholder kept while lagging gives way to the new queue.
            st.subscribers.retain(|s| match (s, &old) {
                (Subscriber::Lagging { overflow }, Some(old)) => !Arc::ptr_eq(overflow, old),
                _ => true,
            });
            st.subscribers.push(Subscriber::Stream {
                tx: QueueTx(Arc::clone(&queue)),
                overflow: Arc::clone(&overflow),
            });
            st.log.as_ref().map(|l| l.last_id())
        };
        replace_rx(&mut self.rx, Rx::Stream { queue, overflow });
        drop(guard);
        tracing::debug!(task = %self.live.id, "slow subscriber resynchronised from a snapshot");
        Some((
            at,
            match snapshot {
                Ok(Some(s)) => Ok(Arc::new(StreamResponse::from(s.task))),
                Ok(None) => Err(Box::new(A2aError::task_not_found(&self.live.id))),
                Err(e) => Err(Box::new(e)),
            },
        ))
    }

    /// Polls for the next item, without the resynchronisation of
    /// [`Self::recv`] (for subscribers that only wait for the end of a
    /// turn).
    pub(crate) fn poll_recv(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Item>> {
        self.poll_recv_event(cx).map(|o| o.map(|(_, item)| item))
    }

    /// [`Self::poll_recv`], with the event's id when it has one.
    pub(crate) fn poll_recv_event(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<(Option<EventId>, Item)>> {
        use std::future::Future;
        match &mut self.rx {
            Rx::Stream { queue, .. } => match std::task::ready!(queue.poll_pop(cx)) {
                Some(Ok((id, item, _))) => Poll::Ready(Some((id, item))),
                Some(Err(cut)) => Poll::Ready(Some((None, Err(Box::new(self.cut(cut)))))),
                None => Poll::Ready(None),
            },
            Rx::Final(None) => std::task::Poll::Ready(None),
            Rx::Final(Some(rx)) => {
                let r = std::pin::Pin::new(rx)
                    .poll(cx)
                    .map(|r| r.ok().map(|item| (None, item)));
                if r.is_ready() {
                    self.rx = Rx::Final(None);
                }
                r
            }
        }
    }

    /// The task this subscription follows.
    pub(crate) fn task_id(&self) -> &str {
        &self.live.id
    }

    /// The task as the turn ended, when the store handed it over with the
    /// update that ended it (the in-memory store does) and no other
    /// waiting request took it first. Read the store otherwise.
    pub(crate) fn take_turn_task(&self) -> Option<Arc<Task>> {
        self.live.state.lock().turn_task.take()
    }
}

impl Subscription {
    /// Keeps `held` until the subscription is dropped.
    pub(crate) fn hold(&mut self, held: impl std::any::Any + Send + Sync) {
        self.held = Some(Box::new(held));
    }

    /// The stream was cut: no more events; the error that ends it.
    fn cut(&mut self, cut: Cut) -> A2aError {
        tracing::info!(
            task = %self.live.id,
            bound = ?cut,
            "a stream whose reader fell behind was closed"
        );
        replace_rx(&mut self.rx, Rx::Final(None));
        cut_error(&self.live.id, cut)
    }
}

/// Replaces a subscription's receiving side (the stream queue it had, if
/// any, is given up).
fn replace_rx(rx: &mut Rx, new: Rx) {
    if let Rx::Stream { queue, .. } = std::mem::replace(rx, new) {
        queue.drop_reader();
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        match &mut self.rx {
            Rx::Stream { queue, .. } => queue.drop_reader(),
            Rx::Final(slot) => drop(slot.take()),
        }
        self.manager.release(&self.live);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use agentwire_types::{
        AgentCard, Message, SendMessageRequest, StreamResponse, SubscribeToTaskRequest,
        stream_response::Payload,
    };
    use futures::StreamExt;

    use crate::executor::{RequestContext, TaskUpdater};
    use crate::handler::{CallContext, HandlerConfig, IdEventStream, RequestHandler};

    use super::*;

    /// Waits for input; on "big" streams 10 chunks of 10 KB and waits
    /// again.
    struct BigChunks;

    impl crate::AgentExecutor for BigChunks {
        async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
            if ctx.task.is_some() && ctx.text() == "big" {
                let id = agentwire_types::new_id();
                for i in 0..10 {
                    let chunk =
                        agentwire_types::Artifact::text("a", "x".repeat(10_000)).with_id(&id);
                    task.artifact_chunk(chunk, i > 0, i == 9).await?;
                }
            }
            task.require_input("more?").await
        }
    }

    fn send(text: &str, task_id: &str) -> SendMessageRequest {
        SendMessageRequest {
            message: Some(Message::user_text(text).with_task_id(task_id)),
            ..Default::default()
        }
    }

    fn is_chunk(ev: &A2aResult<StreamResponse>) -> bool {
        matches!(
            ev,
            Ok(StreamResponse {
                payload: Some(Payload::ArtifactUpdate(_))
            })
        )
    }

    /// The events a stream has ready (it stays open: its task waits for
    /// input).
    async fn ready(stream: &mut IdEventStream) -> Vec<A2aResult<StreamResponse>> {
        let mut out = Vec::new();
        while let Ok(Some((_, ev))) =
            tokio::time::timeout(Duration::from_millis(200), stream.next()).await
        {
            out.push(ev);
        }
        out
    }

    #[tokio::test]
    async fn the_stream_furthest_behind_is_cut_when_the_total_is_reached() {
        let h = RequestHandler::builder(AgentCard::default().with_streaming(true), BigChunks)
            .config(HandlerConfig {
                // No stream passes its own bound: only the total cuts.
                queue_bytes: 1 << 20,
                max_queued_bytes: 250_000,
                ..Default::default()
            })
            .build();
        let ctx = CallContext::v1();
        let mut tasks = Vec::new();
        let mut streams = Vec::new();
        for _ in 0..3 {
            let first = h.send_message(&ctx, send("start", "")).await.unwrap();
            let id = first.task().unwrap().id.clone();
            let sub = SubscribeToTaskRequest {
                id: id.clone(),
                ..Default::default()
            };
            let mut stream = h.subscribe_to_task_with_ids(&ctx, sub).await.unwrap();
            // The opening snapshot.
            assert!(stream.next().await.unwrap().1.is_ok());
            tasks.push(id);
            streams.push(stream);
        }
        let mut c = streams.pop().unwrap();
        let mut b = streams.pop().unwrap();
        let mut a = streams.pop().unwrap();

        // A and B are not read: 100 KB queued for each.
        h.send_message(&ctx, send("big", &tasks[0])).await.unwrap();
        h.send_message(&ctx, send("big", &tasks[1])).await.unwrap();
        assert!(h.live_stats().queued_bytes >= 200_000);
        // More for A: the total would pass the bound. No reader took an
        // event since the bound was last reached (it never was): the
        // largest queue goes, A's (with the event it is adding).
        h.send_message(&ctx, send("big", &tasks[0])).await.unwrap();
        let stats = h.live_stats();
        assert!(stats.queued_bytes <= 250_000, "{}", stats.queued_bytes);
        assert_eq!(stats.streams_cut, [0, 1]);
        // A's queue was dropped: its reader gets the error at once.
        let got = ready(&mut a).await;
        assert_eq!(got.len(), 1, "{got:?}");
        let err = got[0].as_ref().unwrap_err();
        assert!(err.message.contains("furthest behind"), "{}", err.message);
        assert_eq!(err.metadata["limitBytes"], "250000");

        // C is read, then falls behind by more than B: B, whose reader
        // took nothing since the bound was reached, goes, not C.
        h.send_message(&ctx, send("big", &tasks[2])).await.unwrap();
        let got = ready(&mut c).await;
        assert_eq!(got.iter().filter(|ev| is_chunk(ev)).count(), 10);
        h.send_message(&ctx, send("big", &tasks[2])).await.unwrap();
        h.send_message(&ctx, send("big", &tasks[2])).await.unwrap();
        let stats = h.live_stats();
        assert!(stats.queued_bytes <= 250_000, "{}", stats.queued_bytes);
        assert_eq!(stats.streams_cut, [0, 2]);
        let got = ready(&mut b).await;
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].is_err(), "{got:?}");
        // C gets everything.
        let got = ready(&mut c).await;
        assert_eq!(got.iter().filter(|ev| is_chunk(ev)).count(), 20);
        assert!(got.iter().all(Result::is_ok), "{got:?}");
        assert_eq!(h.live_stats().queued_bytes, 0);
    }
}
