//! The task manager's side of an event bus, on an in-memory "cluster": two
//! request handlers (two replicas) share one memory store whose writes are
//! logged, and a bus over that log whose notices the test can hold back,
//! repeat or replay. What it shows: whatever happens to the notices (lost,
//! repeated, late, in any order), a subscriber on the other replica ends up
//! with exactly the events of the task, once each, in order, as soon as a
//! notice or a resynchronisation comes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agentwire_server::bus::{EventBus, Notice, NoticeSender, Notices, RemoteEvent, notice_channel};
use agentwire_server::store::{
    LogSpan, MemoryStore, Owner, StoredPushConfig, StoredTask, TaskPage, TaskQuery, TaskStore,
    TaskUpdate, Updated,
};
use agentwire_server::types::{
    A2aResult, AgentCard, Artifact, Message, SendMessageRequest, StreamResponse,
    SubscribeToTaskRequest, Task, TaskArtifactUpdateEvent, TaskPushNotificationConfig, TaskState,
    TaskStatusUpdateEvent, new_id, stream_response,
};
use agentwire_server::{
    AgentExecutor, CallContext, EventStream, HandlerConfig, RequestContext, RequestHandler,
    TaskUpdater,
};
use async_trait::async_trait;
use futures::StreamExt;
use tokio::sync::watch;

const WAIT: Duration = Duration::from_secs(10);

async fn within<F: std::future::IntoFuture>(what: &str, f: F) -> F::Output {
    match tokio::time::timeout(WAIT, f.into_future()).await {
        Ok(out) => out,
        Err(_) => panic!("timed out after {WAIT:?}: {what}"),
    }
}

// ----- the in-memory cluster -------------------------------------------------

struct Entry {
    seq: i64,
    task_id: String,
    origin: String,
    event: Arc<StreamResponse>,
}

#[derive(Default)]
struct Shared {
    store: MemoryStore,
    /// Serialises writes: the log's order is the order they were applied.
    write: tokio::sync::Mutex<()>,
    log: parking_lot::Mutex<Vec<Entry>>,
    listeners: parking_lot::Mutex<Vec<(String, NoticeSender)>>,
    /// Notices are held back (lost) while set.
    deaf: AtomicBool,
}

impl Shared {
    fn last_seq(&self, task_id: &str) -> i64 {
        let log = self.log.lock();
        log.iter()
            .rev()
            .find(|e| e.task_id == task_id)
            .map_or(0, |e| e.seq)
    }

    /// Appends an event and announces it to the other replicas.
    fn append(&self, task_id: &str, origin: &str, event: StreamResponse) -> i64 {
        let seq = {
            let mut log = self.log.lock();
            // Positions are global: leave gaps, as a shared sequence does.
            let seq = log.last().map_or(1, |e| e.seq + 3);
            log.push(Entry {
                seq,
                task_id: task_id.to_owned(),
                origin: origin.to_owned(),
                event: Arc::new(event),
            });
            seq
        };
        if !self.deaf.load(Ordering::Acquire) {
            self.notify(
                origin,
                &Notice::Event {
                    task_id: task_id.to_owned(),
                    seq,
                },
            );
        }
        seq
    }

    /// Sends a notice to every replica but `origin`.
    fn notify(&self, origin: &str, notice: &Notice) {
        for (replica, tx) in self.listeners.lock().iter() {
            if replica != origin {
                tx.send(notice.clone());
            }
        }
    }
}

/// One replica's view: a store that logs, and the bus over the log.
#[derive(Clone)]
struct Node {
    shared: Arc<Shared>,
    replica: String,
}

fn event_of(task: &Task, update: &TaskUpdate) -> Option<StreamResponse> {
    match update {
        TaskUpdate::Status { status, metadata } => Some(
            TaskStatusUpdateEvent {
                generation: 0,
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
                status: Some(status.clone()),
                metadata: metadata.clone(),
            }
            .into(),
        ),
        TaskUpdate::Artifact {
            artifact,
            append,
            last_chunk,
            metadata,
        } => Some(
            TaskArtifactUpdateEvent {
                generation: 0,
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
                artifact: Some(artifact.clone()),
                append: *append,
                last_chunk: *last_chunk,
                metadata: metadata.clone(),
            }
            .into(),
        ),
        TaskUpdate::UserMessage(_) => None,
    }
}

#[async_trait]
impl TaskStore for Node {
    async fn create(&self, owner: &Owner, task: Task) -> A2aResult<Option<LogSpan>> {
        let _w = self.shared.write.lock().await;
        let id = task.id.clone();
        self.shared.store.create(owner, task.clone()).await?;
        let after = self
            .shared
            .append(&id, &self.replica, StreamResponse::from(task));
        Ok(Some(LogSpan { before: 0, after }))
    }

    async fn update(&self, task_id: &str, update: TaskUpdate) -> A2aResult<Updated> {
        let _w = self.shared.write.lock().await;
        let before = self.shared.last_seq(task_id);
        let task = self
            .shared
            .store
            .get(task_id, Some(0))
            .await?
            .map(|s| s.task);
        let event = task.as_ref().and_then(|t| event_of(t, &update));
        let state = self.shared.store.update(task_id, update).await?.state;
        let after = match event {
            Some(e) => self.shared.append(task_id, &self.replica, e),
            None => before,
        };
        Ok(Updated::new(state).logged(LogSpan { before, after }))
    }

    async fn get(&self, task_id: &str, history: Option<usize>) -> A2aResult<Option<StoredTask>> {
        self.shared.store.get(task_id, history).await
    }

    async fn list(&self, owner: &Owner, query: &TaskQuery) -> A2aResult<TaskPage> {
        self.shared.store.list(owner, query).await
    }

    async fn put_push_config(&self, config: &StoredPushConfig) -> A2aResult<()> {
        self.shared.store.put_push_config(config).await
    }

    async fn get_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> A2aResult<Option<StoredPushConfig>> {
        self.shared.store.get_push_config(task_id, id).await
    }

    async fn list_push_configs(&self, task_id: &str) -> A2aResult<Vec<StoredPushConfig>> {
        self.shared.store.list_push_configs(task_id).await
    }

    async fn delete_push_config(&self, task_id: &str, id: &str) -> A2aResult<bool> {
        self.shared.store.delete_push_config(task_id, id).await
    }
}

#[async_trait]
impl EventBus for Node {
    fn replica_id(&self) -> &str {
        &self.replica
    }

    fn listen(&self) -> Notices {
        let (tx, rx) = notice_channel(64);
        tx.send(Notice::Resync);
        self.shared
            .listeners
            .lock()
            .push((self.replica.clone(), tx));
        rx
    }

    async fn events_after(
        &self,
        task_id: &str,
        after: i64,
        upto: Option<i64>,
        limit: usize,
    ) -> A2aResult<Vec<RemoteEvent>> {
        let log = self.shared.log.lock();
        Ok(log
            .iter()
            .filter(|e| e.task_id == task_id && e.seq > after && e.origin != self.replica)
            .filter(|e| upto.is_none_or(|u| e.seq <= u))
            .take(limit)
            .map(|e| RemoteEvent {
                seq: e.seq,
                event: Some(Arc::clone(&e.event)),
            })
            .collect())
    }

    async fn snapshot(
        &self,
        task_id: &str,
        history: Option<usize>,
    ) -> A2aResult<Option<(StoredTask, i64)>> {
        let _w = self.shared.write.lock().await;
        let stored = self.shared.store.get(task_id, history).await?;
        Ok(stored.map(|s| (s, self.shared.last_seq(task_id))))
    }

    async fn request_cancel(&self, task_id: &str) -> A2aResult<()> {
        self.shared.notify(
            &self.replica,
            &Notice::Cancel {
                task_id: task_id.to_owned(),
            },
        );
        Ok(())
    }

    async fn announce_push_configs(&self, task_id: &str) -> A2aResult<()> {
        self.shared.notify(
            &self.replica,
            &Notice::PushConfigs {
                task_id: task_id.to_owned(),
            },
        );
        Ok(())
    }
}

// ----- agents and replicas -----------------------------------------------------

/// Starts working, waits for the test's gate, streams `N` chunks, completes.
#[derive(Clone)]
struct Gated {
    gate: watch::Receiver<bool>,
}

const N: usize = 50;

impl AgentExecutor for Gated {
    async fn execute(&self, _ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.start_work().await?;
        let mut gate = self.gate.clone();
        let _ = gate.wait_for(|open| *open).await;
        let id = new_id();
        for i in 0..N {
            let chunk = Artifact::text("out", format!("c{i} ")).with_id(&id);
            task.artifact_chunk(chunk, i > 0, i + 1 == N).await?;
            tokio::task::yield_now().await;
        }
        task.complete().await
    }
}

struct Cluster {
    shared: Arc<Shared>,
    a: RequestHandler,
    b: RequestHandler,
    open: watch::Sender<bool>,
}

fn cluster() -> Cluster {
    cluster_with(HandlerConfig::default())
}

fn cluster_with(config: HandlerConfig) -> Cluster {
    cluster_of(config, None)
}

fn cluster_of(config: HandlerConfig, push: Option<agentwire_server::PushConfig>) -> Cluster {
    let shared = Arc::new(Shared::default());
    let (open, gate) = watch::channel(false);
    let card = AgentCard::new("Gated", "Streams when told", "1.0.0").with_streaming(true);
    let replica = |name: &str| {
        let node = Node {
            shared: Arc::clone(&shared),
            replica: name.to_owned(),
        };
        let builder = RequestHandler::builder(card.clone(), Gated { gate: gate.clone() })
            .store(Arc::new(node.clone()))
            .bus(Arc::new(node))
            .config(config.clone());
        match &push {
            Some(p) => builder.push(p.clone()).build(),
            None => builder.build(),
        }
    };
    Cluster {
        a: replica("a"),
        b: replica("b"),
        shared,
        open,
    }
}

async fn next(stream: &mut EventStream, what: &str) -> StreamResponse {
    within(what, stream.next())
        .await
        .unwrap_or_else(|| panic!("{what}: ended"))
        .unwrap_or_else(|e| panic!("{what}: {e:?}"))
}

async fn rest(stream: EventStream, what: &str) -> Vec<StreamResponse> {
    within(what, stream.collect::<Vec<_>>())
        .await
        .into_iter()
        .map(|e| e.unwrap_or_else(|e| panic!("{what}: {e:?}")))
        .collect()
}

/// A stream started on `a` (its first two events read: the task, working)
/// and a subscription on `b` (its snapshot read).
async fn started(c: &Cluster) -> (String, Vec<StreamResponse>, EventStream, EventStream) {
    let ctx = CallContext::v1();
    let req = SendMessageRequest {
        message: Some(Message::user_text("go")),
        ..Default::default()
    };
    let mut on_a = within("stream on a", c.a.send_streaming_message(&ctx, req))
        .await
        .expect("stream on a");
    let first = vec![next(&mut on_a, "a").await, next(&mut on_a, "a").await];
    let Some(stream_response::Payload::Task(task)) = &first[0].payload else {
        panic!("a task first: {first:?}");
    };
    let id = task.id.clone();
    let req = SubscribeToTaskRequest {
        id: id.clone(),
        ..Default::default()
    };
    let mut on_b = within("subscribe on b", c.b.subscribe_to_task(&ctx, req))
        .await
        .expect("subscribe on b");
    let snapshot = next(&mut on_b, "b").await;
    assert_eq!(snapshot.state(), Some(TaskState::Working));
    (id, first, on_a, on_b)
}

// ----- tests -------------------------------------------------------------------

/// Notices lost while a whole stream is written are made up for by the
/// next resynchronisation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_notices_are_made_up_by_a_resync() {
    let c = cluster();
    let (_, first, on_a, mut on_b) = started(&c).await;
    // Each replica's listener starts with a resync (`EventBus::listen`);
    // b's must be behind it before notices go missing, or a late one would
    // catch b up and hide what this test is about. It runs as soon as its
    // task is polled: a pause leaves it time on a loaded machine (seen
    // once, under two builds beside the test run).
    tokio::time::sleep(Duration::from_millis(100)).await;
    c.shared.deaf.store(true, Ordering::Release);
    c.open.send_replace(true);
    let mut seen_a = first;
    seen_a.extend(rest(on_a, "a").await);
    assert_eq!(seen_a.len(), N + 3);
    // Nothing was announced: b waits.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), on_b.next())
            .await
            .is_err(),
        "b cannot know yet"
    );
    c.shared.deaf.store(false, Ordering::Release);
    c.shared.notify("a", &Notice::Resync);
    let seen_b = rest(on_b, "b").await;
    assert_eq!(
        seen_b,
        &seen_a[2..],
        "b sees exactly the rest of a's stream"
    );
}

/// Notices repeated, late and out of order change nothing: each event is
/// delivered once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_and_stale_notices_deliver_nothing_twice() {
    let c = cluster();
    let (id, first, on_a, on_b) = started(&c).await;
    c.open.send_replace(true);
    // Meanwhile, a storm of notices: old positions, repeats, far ahead.
    let storm = {
        let shared = Arc::clone(&c.shared);
        let id = id.clone();
        tokio::spawn(async move {
            for round in 0..200 {
                let last = shared.last_seq(&id);
                // (Never ahead of the log: a notice names an event that
                // can be read.)
                for seq in [last, last - 3, 1, last, last - 3 * (round % 7)] {
                    shared.notify(
                        "a",
                        &Notice::Event {
                            task_id: id.clone(),
                            seq,
                        },
                    );
                }
                if round % 50 == 0 {
                    shared.notify("a", &Notice::Resync);
                }
                tokio::task::yield_now().await;
            }
        })
    };
    let mut seen_a = first;
    seen_a.extend(rest(on_a, "a").await);
    let seen_b = rest(on_b, "b").await;
    storm.await.expect("storm");
    assert_eq!(seen_a.len(), N + 3);
    assert_eq!(seen_b, &seen_a[2..]);
}

/// A cancellation on `b` stops the agent running on `a`, and both sides
/// see the task end canceled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_on_b_stops_the_agent_on_a() {
    let c = cluster();
    let (id, _, on_a, on_b) = started(&c).await;
    let ctx = CallContext::v1();
    let canceled = within(
        "cancel on b",
        c.b.cancel_task(
            &ctx,
            agentwire_server::types::CancelTaskRequest {
                id: id.clone(),
                ..Default::default()
            },
        ),
    )
    .await
    .expect("cancel on b");
    assert_eq!(canceled.state(), TaskState::Canceled);
    // The agent was waiting at its gate: released, its writes are refused.
    c.open.send_replace(true);
    let seen_a = rest(on_a, "a").await;
    let seen_b = rest(on_b, "b").await;
    assert_eq!(seen_a.len(), 1, "{seen_a:?}");
    assert_eq!(seen_a, seen_b);
    assert_eq!(seen_a[0].state(), Some(TaskState::Canceled));
    let stored = c.shared.store.get(&id, None).await.unwrap().unwrap().task;
    assert_eq!(stored.state(), TaskState::Canceled);
    assert!(
        stored.artifacts.is_empty(),
        "no chunk after the cancellation"
    );
}

/// A subscriber on `b` too slow for the other replica's events is
/// resynchronised from a snapshot, like a slow local one: what it receives
/// is a prefix of the events, then a snapshot holding everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_subscriber_of_remote_events_resynchronises() {
    let c = cluster_with(HandlerConfig {
        queue_capacity: 4,
        ..Default::default()
    });
    let (id, _, on_a, on_b) = started(&c).await;
    c.open.send_replace(true);
    // (a's own stream, as slow, is resynchronised too.)
    let _ = rest(on_a, "a").await;
    // Let every announcement be handled before b reads anything.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let seen_b = rest(on_b, "b").await;
    let last = seen_b.last().expect("b's events");
    let Some(stream_response::Payload::Task(task)) = &last.payload else {
        panic!("b ends with a snapshot: {seen_b:?}");
    };
    assert_eq!(task.state(), TaskState::Completed);
    assert_eq!(task.artifacts[0].parts.len(), N);
    // The task's events as applied: the task, working, the chunks,
    // completed; b's snapshot came after "working".
    let log: Vec<StreamResponse> = c
        .shared
        .log
        .lock()
        .iter()
        .filter(|e| e.task_id == id)
        .map(|e| (*e.event).clone())
        .collect();
    assert_eq!(log.len(), N + 3);
    let before = &seen_b[..seen_b.len() - 1];
    assert!(before.len() <= 4, "{} queued", before.len());
    assert_eq!(before, &log[2..2 + before.len()], "a prefix, in order");
}

/// A push config created on `b` for a task whose agent runs on `a`: `a`
/// notifies it from the next event on (it had cached "no configs" when the
/// task started).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_config_created_on_b_is_used_by_a() {
    let push = agentwire_server::PushConfig::new().allow_loopback();
    let c = cluster_of(HandlerConfig::default(), Some(push));
    let (id, _, on_a, on_b) = started(&c).await;
    let enqueued =
        |h: &RequestHandler| h.push_sender().expect("push").metrics().snapshot().enqueued;
    assert_eq!(enqueued(&c.a), 0, "no config yet");
    let ctx = CallContext::v1();
    within(
        "create a push config on b",
        c.b.create_task_push_notification_config(
            &ctx,
            TaskPushNotificationConfig {
                task_id: id.clone(),
                // Nothing listens there: the notifications are queued, and
                // that is what is counted.
                url: "http://127.0.0.1:9/hook".into(),
                ..Default::default()
            },
        ),
    )
    .await
    .expect("config created");
    // The notice reaches a's manager through the bus task: give it a moment.
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.open.send_replace(true);
    let seen_a = rest(on_a, "a").await;
    let _ = rest(on_b, "b").await;
    // Every event after the config: N chunks and the completion.
    within("a's notifications queued", async {
        while enqueued(&c.a) < (N + 1) as u64 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert_eq!(enqueued(&c.b), 0, "b ran nothing");
    assert_eq!(
        seen_a.last().and_then(StreamResponse::state),
        Some(TaskState::Completed)
    );
}
