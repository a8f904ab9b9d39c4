//! Subscribers: the queues a task's events fan out to (a stream's bounded
//! queue, or the one slot of a request waiting for the end of a turn), how
//! a request subscribes, and how a slow subscriber is resynchronised.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use agentwire_types::{A2aError, A2aResult, ErrorKind, StreamResponse, Task};
use tokio::sync::{mpsc, oneshot};

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

/// The bytes a stream subscriber's queue holds, and its bound.
pub(crate) struct QueueBytes {
    held: AtomicUsize,
    limit: usize,
    /// The queue went over `limit`: the stream was cut.
    cut: AtomicBool,
}

impl QueueBytes {
    fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            held: AtomicUsize::new(0),
            limit,
            cut: AtomicBool::new(false),
        })
    }

    /// Counts `size` more bytes, unless the queue (not empty) would then
    /// hold more than its bound.
    fn admit(&self, size: usize) -> bool {
        let held = self.held.load(Ordering::Acquire);
        if held > 0 && held.saturating_add(size) > self.limit {
            return false;
        }
        self.held.fetch_add(size, Ordering::AcqRel);
        true
    }

    fn taken(&self, size: usize) {
        self.held.fetch_sub(size, Ordering::AcqRel);
    }
}

/// The error that ends a stream whose reader fell behind by more than its
/// queue's byte bound.
fn cut_error(task_id: &str, limit: usize) -> A2aError {
    A2aError::new(
        ErrorKind::Internal,
        format!(
            "the stream of task {task_id} was closed: its reader fell behind by more than \
             {limit} bytes of events; subscribe again (with the last event id received, \
             to get the events missed)"
        ),
    )
    .with_metadata("taskId", task_id.to_owned())
}

pub(crate) enum Subscriber {
    /// Every event, in a bounded queue.
    Stream {
        tx: mpsc::Sender<Queued>,
        overflow: Arc<AtomicBool>,
        bytes: Arc<QueueBytes>,
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
                Subscriber::Stream {
                    tx,
                    overflow,
                    bytes,
                } => {
                    if !bytes.admit(size) {
                        // Cut: its queue is drained, then it ends with an
                        // error (see `Subscription::recv`).
                        bytes.cut.store(true, Ordering::Release);
                        return false;
                    }
                    match tx.try_send((id, item.clone(), size)) {
                        Ok(()) => return true,
                        Err(mpsc::error::TrySendError::Full(_)) => {
                            bytes.taken(size);
                            overflow.store(true, Ordering::Release);
                            Arc::clone(overflow)
                        }
                        Err(mpsc::error::TrySendError::Closed(_)) => return false,
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
            let (tx, rx) = mpsc::channel(self.queue_capacity);
            let overflow = Arc::new(AtomicBool::new(false));
            let bytes = QueueBytes::new(self.queue_bytes);
            st.subscribers.push(Subscriber::Stream {
                tx,
                overflow: Arc::clone(&overflow),
                bytes: Arc::clone(&bytes),
            });
            Rx::Stream {
                rx,
                overflow,
                bytes,
            }
        };
        Subscription {
            rx,
            live: Arc::clone(live),
            manager: Arc::clone(self),
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
        rx: mpsc::Receiver<Queued>,
        overflow: Arc<AtomicBool>,
        bytes: Arc<QueueBytes>,
    },
    Final(Option<oneshot::Receiver<Item>>),
}

/// A subscriber's queue of events for one task.
pub(crate) struct Subscription {
    rx: Rx,
    live: Arc<LiveTask>,
    manager: Arc<TaskManager>,
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
            Rx::Stream {
                rx,
                overflow,
                bytes,
            } => {
                if let Some((id, item, size)) = rx.recv().await {
                    bytes.taken(size);
                    return Some((id, item));
                }
                if bytes.cut.swap(false, Ordering::AcqRel) {
                    tracing::info!(
                        task = %self.live.id,
                        limit = bytes.limit,
                        "a stream whose reader fell behind was closed"
                    );
                    let e = cut_error(&self.live.id, bytes.limit);
                    return Some((None, Err(Box::new(e))));
                }
                overflow.load(Ordering::Acquire)
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
                self.rx = Rx::Final(None);
                return Some((None, last));
            }
        }
        // The snapshot first, then the new queue (see `subscribe`).
        let snapshot = self.manager.snapshot_locked(&self.live, None).await;
        let (tx, rx) = mpsc::channel(self.manager.queue_capacity);
        let overflow = Arc::new(AtomicBool::new(false));
        let bytes = QueueBytes::new(self.manager.queue_bytes);
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
                tx,
                overflow: Arc::clone(&overflow),
                bytes: Arc::clone(&bytes),
            });
            st.log.as_ref().map(|l| l.last_id())
        };
        self.rx = Rx::Stream {
            rx,
            overflow,
            bytes,
        };
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
            Rx::Stream { rx, bytes, .. } => rx.poll_recv(cx).map(|q| {
                q.map(|(id, item, size)| {
                    bytes.taken(size);
                    (id, item)
                })
            }),
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

impl Drop for Subscription {
    fn drop(&mut self) {
        match &mut self.rx {
            Rx::Stream { rx, .. } => rx.close(),
            Rx::Final(slot) => drop(slot.take()),
        }
        self.manager.release(&self.live);
    }
}
