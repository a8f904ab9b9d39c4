//! Subscribers: the queues a task's events fan out to (a stream's bounded
//! queue, or the one slot of a request waiting for the end of a turn), how
//! a request subscribes, and how a slow subscriber is resynchronised.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentwire_types::{A2aError, A2aResult, StreamResponse, Task};
use tokio::sync::{mpsc, oneshot};

use super::TaskManager;
use super::live::{LiveState, LiveTask};
use crate::store::StoredTask;

/// What subscribers receive: an event, or an error that ends the request
/// (boxed, to keep queue slots small).
pub(crate) type Item = Result<Arc<StreamResponse>, Box<A2aError>>;

pub(crate) enum Subscriber {
    /// Every event, in a bounded queue.
    Stream {
        tx: mpsc::Sender<Item>,
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
        st.subscribers.retain_mut(|s| {
            let lagging = match s {
                Subscriber::Stream { tx, overflow } => match tx.try_send(item.clone()) {
                    Ok(()) => return true,
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        overflow.store(true, Ordering::Release);
                        Arc::clone(overflow)
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => return false,
                },
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
            let (tx, rx) = mpsc::channel(self.queue_capacity);
            let overflow = Arc::new(AtomicBool::new(false));
            st.subscribers.push(Subscriber::Stream {
                tx,
                overflow: Arc::clone(&overflow),
            });
            Rx::Stream { rx, overflow }
        };
        Subscription {
            rx,
            live: Arc::clone(live),
            manager: Arc::clone(self),
        }
    }

    /// Subscribes to an existing task: returns its current snapshot and a
    /// subscription to everything after it.
    pub(crate) async fn subscribe(
        self: &Arc<Self>,
        stored: &StoredTask,
        history_length: Option<usize>,
    ) -> A2aResult<(Task, Subscription)> {
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
                (!st.retired).then(|| self.subscribe_locked(&live, &mut st, false))
            };
            let Some(sub) = sub else {
                drop(guard);
                continue;
            };
            drop(guard);
            return Ok((snapshot.task, sub));
        }
    }
}

pub(super) enum Rx {
    Stream {
        rx: mpsc::Receiver<Item>,
        overflow: Arc<AtomicBool>,
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
        let overflowed = match &mut self.rx {
            Rx::Final(slot) => {
                let rx = slot.take()?;
                return rx.await.ok();
            }
            Rx::Stream { rx, overflow } => {
                if let Some(item) = rx.recv().await {
                    return Some(item);
                }
                overflow.load(Ordering::Acquire)
            }
        };
        if !overflowed {
            return None;
        }
        let guard = self.live.order.lock().await;
        // The snapshot first, then the new queue (see `subscribe`).
        let snapshot = self.manager.snapshot_locked(&self.live, None).await;
        let (tx, rx) = mpsc::channel(self.manager.queue_capacity);
        let overflow = Arc::new(AtomicBool::new(false));
        {
            let old = match &self.rx {
                Rx::Stream { overflow, .. } => Some(Arc::clone(overflow)),
                Rx::Final(_) => None,
            };
            let mut st = self.live.state.lock();
            // The placeholder kept while lagging gives way to the new queue.
            st.subscribers.retain(|s| match (s, &old) {
                (Subscriber::Lagging { overflow }, Some(old)) => !Arc::ptr_eq(overflow, old),
                _ => true,
            });
            st.subscribers.push(Subscriber::Stream {
                tx,
                overflow: Arc::clone(&overflow),
            });
        }
        self.rx = Rx::Stream { rx, overflow };
        drop(guard);
        tracing::debug!(task = %self.live.id, "slow subscriber resynchronised from a snapshot");
        Some(match snapshot {
            Ok(Some(s)) => Ok(Arc::new(StreamResponse::from(s.task))),
            Ok(None) => Err(Box::new(A2aError::task_not_found(&self.live.id))),
            Err(e) => Err(Box::new(e)),
        })
    }

    /// Polls for the next item, without the resynchronisation of
    /// [`Self::recv`] (for subscribers that only wait for the end of a
    /// turn).
    pub(crate) fn poll_recv(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Item>> {
        use std::future::Future;
        match &mut self.rx {
            Rx::Stream { rx, .. } => rx.poll_recv(cx),
            Rx::Final(None) => std::task::Poll::Ready(None),
            Rx::Final(Some(rx)) => {
                let r = std::pin::Pin::new(rx).poll(cx).map(Result::ok);
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
