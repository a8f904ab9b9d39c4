//! The event log of the PostgreSQL store and its bus ([`PgEventBus`]): what
//! the replicas of a server rely on to follow each other's tasks.
//!
//! Runs when `A2A_TEST_POSTGRES_URL` names a database (see
//! `store_conformance.rs`; `bash .ci/postgres start` prints one), each test
//! in a schema of its own. The database tests are
//! ignored (`cargo test` lists them as such); `-- --include-ignored` runs them,
//! and without the variable they fail, saying so.
#![cfg(feature = "postgres")]

use std::sync::Arc;
use std::time::Duration;

use agentwire_server::EventBus;
use agentwire_server::bus::{Notice, Notices};
use agentwire_server::store::postgres::testing::TestSchema;
use agentwire_server::store::{LogSpan, Owner, PgEventBus, TaskStore, TaskUpdate, Updated};
use agentwire_server::types::{
    Artifact, Message, StreamResponse, Task, TaskState, TaskStatus, stream_response,
};

/// Bound on every wait.
const WAIT: Duration = Duration::from_secs(10);

/// A fresh schema of the test database (`None`: skipped).
async fn schema() -> Option<TestSchema> {
    TestSchema::create("a2a_events", "PostgreSQL event log test").await
}

fn task(id: &str) -> Task {
    Task {
        id: id.into(),
        context_id: "ctx".into(),
        status: Some(TaskStatus::new(TaskState::Submitted)),
        history: vec![Message::user_text("go")],
        ..Default::default()
    }
}

fn working() -> TaskUpdate {
    TaskUpdate::Status {
        status: TaskStatus::new(TaskState::Working),
        metadata: None,
    }
}

fn chunk(text: &str, append: bool) -> TaskUpdate {
    TaskUpdate::Artifact {
        artifact: Artifact::text("out", text).with_id("a1"),
        append,
        last_chunk: false,
        metadata: None,
    }
}

async fn next(notices: &mut Notices) -> Notice {
    tokio::time::timeout(WAIT, notices.recv())
        .await
        .expect("a notice in time")
        .expect("the bus is listening")
}

/// The next notice about `task_id` (the channels are the database's: the
/// tests running at the same time in other schemas are heard too).
async fn next_announcement(notices: &mut Notices, task_id: &str) -> Notice {
    loop {
        match next(notices).await {
            Notice::Event { task_id: t, .. } | Notice::Cancel { task_id: t } if t != task_id => {
                continue;
            }
            Notice::Resync => continue,
            n => return n,
        }
    }
}

#[tokio::test]
#[ignore = "needs PostgreSQL: set A2A_TEST_POSTGRES_URL (bash .ci/postgres start)"]
async fn writes_say_where_their_events_went() {
    let Some(db) = schema().await else { return };
    let a = db.store(4).await.with_event_log("replica-a").unwrap();
    let b = db.store(4).await.with_event_log("replica-b").unwrap();
    let owner = Owner::default();
    let created = a.create(&owner, task("t1")).await.unwrap();
    // A new task records no event (nothing can follow it before it
    // exists): its span is empty.
    let created = created.expect("a span with an event log");
    assert_eq!(
        created,
        LogSpan {
            before: 0,
            after: 0
        }
    );
    assert!(
        b.create(&owner, task("t1")).await.is_err(),
        "ids are unique"
    );

    let Updated {
        state, log: span, ..
    } = a.update("t1", working()).await.unwrap();
    assert_eq!(state, TaskState::Working);
    let span = span.expect("a span with an event log");
    assert_eq!(span.before, created.after);
    assert!(span.after > span.before, "{span:?}");

    // Another replica's write follows, and says so.
    let Updated { log: next, .. } = b.update("t1", chunk("one ", false)).await.unwrap();
    let next = next.unwrap();
    assert_eq!(next.before, span.after);
    assert!(next.after > next.before);

    // A user message has no event: the position stays.
    let Updated { log: msg, .. } = a
        .update("t1", TaskUpdate::UserMessage(Message::user_text("more")))
        .await
        .unwrap();
    assert_eq!(
        msg,
        Some(LogSpan {
            before: next.after,
            after: next.after
        })
    );

    // A refused update logs nothing.
    a.update(
        "t1",
        TaskUpdate::Status {
            status: TaskStatus::new(TaskState::Completed),
            metadata: None,
        },
    )
    .await
    .unwrap();
    assert!(a.update("t1", working()).await.is_err());

    // The log, as another replica reads it: working, the chunk,
    // completed; a replica does not read its own events.
    let bus_b = PgEventBus::new(&b).unwrap();
    let seen = bus_b.events_after("t1", 0, None, 100).await.unwrap();
    let kinds: Vec<&str> = seen
        .iter()
        .map(
            |e| match e.event.as_ref().and_then(|e| e.payload.as_ref()) {
                Some(stream_response::Payload::Task(_)) => "task",
                Some(stream_response::Payload::StatusUpdate(_)) => "status",
                Some(stream_response::Payload::ArtifactUpdate(_)) => "artifact",
                _ => "other",
            },
        )
        .collect();
    assert_eq!(kinds, ["status", "status"], "b reads a's events only");
    assert!(seen.windows(2).all(|w| w[0].seq < w[1].seq));
    let bus_a = PgEventBus::new(&a).unwrap();
    let from_b = bus_a.events_after("t1", 0, None, 100).await.unwrap();
    assert_eq!(from_b.len(), 1);
    assert_eq!(from_b[0].seq, next.after);
    let Some(stream_response::Payload::ArtifactUpdate(ev)) =
        from_b[0].event.as_ref().and_then(|e| e.payload.clone())
    else {
        panic!("an artifact event: {from_b:?}");
    };
    assert_eq!(ev.task_id, "t1");
    assert_eq!(ev.context_id, "ctx");
    assert_eq!(ev.artifact.unwrap().text_content(), "one ");
    // Bounds and limits.
    assert!(
        bus_b
            .events_after("t1", 0, Some(span.after), 100)
            .await
            .unwrap()
            .len()
            == 1
    );
    assert_eq!(bus_b.events_after("t1", 0, None, 1).await.unwrap().len(), 1);

    // The snapshot comes with the position of its last event.
    let (stored, seq) = bus_a.snapshot("t1", None).await.unwrap().unwrap();
    assert_eq!(stored.task.state(), TaskState::Completed);
    let last = bus_b.events_after("t1", 0, None, 100).await.unwrap();
    assert_eq!(seq, last.last().unwrap().seq);
    assert!(bus_a.snapshot("nope", None).await.unwrap().is_none());

    // A store without an event log writes none, and has no bus.
    let plain = db.store(4).await;
    assert_eq!(plain.create(&owner, task("t2")).await.unwrap(), None);
    assert_eq!(plain.update("t2", working()).await.unwrap().log, None);
    assert!(
        bus_a
            .events_after("t2", 0, None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(PgEventBus::new(&plain).is_err());
    assert!(db.store(4).await.with_event_log("has blank").is_err());
    assert!(db.store(4).await.with_event_log("").is_err());

    db.drop_schema().await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL: set A2A_TEST_POSTGRES_URL (bash .ci/postgres start)"]
async fn concurrent_replicas_agree_on_the_order() {
    let Some(db) = schema().await else { return };
    let a = Arc::new(db.store(4).await.with_event_log("replica-a").unwrap());
    let b = Arc::new(db.store(4).await.with_event_log("replica-b").unwrap());
    a.create(&Owner::default(), task("t")).await.unwrap();
    a.update("t", working()).await.unwrap();
    // Both replicas append chunks at once (conflicts take the slow path):
    // every write's span starts where another ended, and the artifact
    // holds the chunks in log order.
    let mut handles = Vec::new();
    for (store, name) in [(&a, "a"), (&b, "b")] {
        let store = Arc::clone(store);
        handles.push(tokio::spawn(async move {
            let mut spans = Vec::new();
            for i in 0..40 {
                let Updated { log: span, .. } = store
                    .update("t", chunk(&format!("{name}{i} "), true))
                    .await
                    .unwrap();
                spans.push((span.unwrap(), format!("{name}{i} ")));
            }
            spans
        }));
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.await.unwrap());
    }
    all.sort_by_key(|(span, _)| span.after);
    for w in all.windows(2) {
        assert_eq!(w[1].0.before, w[0].0.after, "no write between: {w:?}");
    }
    let text: String = all.iter().map(|(_, t)| t.as_str()).collect();
    let stored = a.get("t", None).await.unwrap().unwrap().task;
    assert_eq!(stored.artifacts[0].text_content(), text);
    db.drop_schema().await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL: set A2A_TEST_POSTGRES_URL (bash .ci/postgres start)"]
async fn the_bus_announces_other_replicas_events_and_cancellations() {
    let Some(db) = schema().await else { return };
    let a = db.store(4).await.with_event_log("replica-a").unwrap();
    let b = db.store(4).await.with_event_log("replica-b").unwrap();
    let bus_a = PgEventBus::new(&a).unwrap();
    let bus_b = PgEventBus::new(&b).unwrap();
    assert_eq!(bus_b.replica_id(), "replica-b");
    // A listens too, so it announces itself: a replica that does not is
    // gone, and B would report A's working tasks as orphaned.
    let _heard_by_a = bus_a.listen();
    let mut heard_by_b = bus_b.listen();
    // The first notice says: catch up (nothing was heard before).
    assert_eq!(next(&mut heard_by_b).await, Notice::Resync);

    let t1 = agentwire_server::types::new_id();
    let t1 = t1.as_str();
    a.create(&Owner::default(), task(t1)).await.unwrap();
    let Updated { log: span, .. } = a.update(t1, working()).await.unwrap();
    // B's own write is not announced to B.
    b.update(t1, chunk("x", false)).await.unwrap();
    let Updated { log: last, .. } = a.update(t1, chunk("y", true)).await.unwrap();
    // The creation is not announced (it logs no event).
    let mut seqs = Vec::new();
    for _ in 0..2 {
        match next_announcement(&mut heard_by_b, t1).await {
            Notice::Event { seq, .. } => seqs.push(seq),
            n => panic!("unexpected {n:?}"),
        }
    }
    assert_eq!(seqs[0], span.unwrap().after);
    assert_eq!(seqs[1], last.unwrap().after);

    bus_a.request_cancel(t1).await.unwrap();
    assert_eq!(
        next_announcement(&mut heard_by_b, t1).await,
        Notice::Cancel { task_id: t1.into() }
    );

    // Purging: by age, and with the task.
    assert_eq!(
        a.purge_events_older_than(Duration::from_secs(3600))
            .await
            .unwrap(),
        0
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        a.purge_events_older_than(Duration::from_millis(1))
            .await
            .unwrap(),
        3
    );
    assert!(
        bus_b
            .events_after(t1, 0, None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    a.create(&Owner::default(), task("t2")).await.unwrap();
    a.update(
        "t2",
        TaskUpdate::Status {
            status: TaskStatus::new(TaskState::Completed),
            metadata: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(
        bus_b.events_after("t2", 0, None, 10).await.unwrap().len(),
        1
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        a.purge_terminal_older_than(Duration::from_millis(1))
            .await
            .unwrap(),
        1
    );
    assert!(
        bus_b
            .events_after("t2", 0, None, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // Dropping the notices stops the listener (and frees its connection).
    drop(heard_by_b);
    tokio::time::timeout(WAIT, b.pool().close())
        .await
        .expect("the pool closes once the listener is gone");
    db.drop_schema().await;
}

#[test]
fn stream_response_round_trips_through_the_log_encoding() {
    use prost::Message as _;
    let event = StreamResponse::from(task("t"));
    let bytes = event.encode_to_vec();
    assert_eq!(StreamResponse::decode(bytes.as_slice()).unwrap(), event);
}
