//! One conformance suite for every [`TaskStore`]: each behaviour is a
//! function over the store, run against the memory store, SQLite (a file,
//! and in memory) and PostgreSQL.
//!
//! PostgreSQL runs when `A2A_TEST_POSTGRES_URL` names a database
//! (`postgres://user:password@127.0.0.1:port/db`; `bash .ci/postgres start`
//! starts a throwaway server and prints one); each test gets a schema of its
//! own and drops it at the end. The PostgreSQL tests are ignored (`cargo
//! test` lists them as such); `-- --include-ignored` runs them (CI does),
//! and without the variable they fail, saying so.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use agentwire_server::store::{
    Cursor, MemoryStore, Owner, PushFormat, StoredPushConfig, TaskPage, TaskQuery, TaskStore,
    TaskUpdate,
};
use agentwire_server::types::{
    Artifact, AuthenticationInfo, ErrorKind, Message, Part, Task, TaskPushNotificationConfig,
    TaskState, TaskStatus, Timestamp,
};
use serde_json::json;

type Store = Arc<dyn TaskStore>;

/// The stores a behaviour runs on.
struct Stores {
    /// The store under test.
    store: Store,
    /// A second handle on the same data: another connection pool to the same
    /// database (another replica), or the same store when there is no such
    /// thing.
    peer: Store,
}

enum Backend {
    Memory,
    #[cfg(feature = "sqlite")]
    SqliteFile,
    #[cfg(feature = "sqlite")]
    SqliteMemory,
    #[cfg(feature = "postgres")]
    Postgres,
    /// PostgreSQL with the event log of several replicas on.
    #[cfg(feature = "postgres")]
    PostgresLogged,
}

/// Runs a behaviour on a fresh store of a backend.
async fn run<F, Fut>(backend: Backend, behaviour: F)
where
    F: FnOnce(Stores) -> Fut,
    Fut: Future<Output = ()>,
{
    match backend {
        Backend::Memory => {
            let store: Store = Arc::new(MemoryStore::default());
            behaviour(Stores {
                peer: Arc::clone(&store),
                store,
            })
            .await;
        }
        #[cfg(feature = "sqlite")]
        Backend::SqliteFile => sqlite::file(behaviour).await,
        #[cfg(feature = "sqlite")]
        Backend::SqliteMemory => {
            let store: Store = Arc::new(
                agentwire_server::store::SqliteStore::in_memory()
                    .await
                    .expect("in-memory SQLite"),
            );
            behaviour(Stores {
                peer: Arc::clone(&store),
                store,
            })
            .await;
        }
        #[cfg(feature = "postgres")]
        Backend::Postgres => postgres::run(behaviour, false).await,
        #[cfg(feature = "postgres")]
        Backend::PostgresLogged => postgres::run(behaviour, true).await,
    }
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;
    use agentwire_server::store::SqliteStore;

    /// Two stores (two processes, in effect) on one new database file.
    pub async fn file<F, Fut>(behaviour: F)
    where
        F: FnOnce(Stores) -> Fut,
        Fut: Future<Output = ()>,
    {
        let path = std::env::temp_dir().join(format!(
            "a2a-store-conformance-{}.db",
            agentwire_server::types::new_id()
        ));
        let store = SqliteStore::open(&path).await.expect("open SQLite file");
        let peer = SqliteStore::open(&path)
            .await
            .expect("open SQLite file again");
        behaviour(Stores {
            store: Arc::new(store.clone()),
            peer: Arc::new(peer.clone()),
        })
        .await;
        store.close().await;
        peer.close().await;
        drop((store, peer));
        for suffix in ["", "-wal", "-shm", ".lock"] {
            let mut p = path.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use super::*;
    use agentwire_server::store::PostgresStore;
    use agentwire_server::store::postgres::testing::TestSchema;
    use sqlx::postgres::PgPoolOptions;

    /// Two stores (two replicas) on a new schema of the test database
    /// (`logged`: each with an event log).
    pub async fn run<F, Fut>(behaviour: F, logged: bool)
    where
        F: FnOnce(Stores) -> Fut,
        Fut: Future<Output = ()>,
    {
        let Some(db) = TestSchema::create("a2a_conformance", "PostgreSQL store test").await else {
            return;
        };
        let options = db.options.clone();
        let connect = || {
            PostgresStore::connect_with(PgPoolOptions::new().max_connections(8), options.clone())
        };
        let mut store = connect().await.expect("PostgresStore");
        let mut peer = connect().await.expect("second PostgresStore");
        if logged {
            store = store.with_event_log("replica-a").expect("event log");
            peer = peer.with_event_log("replica-b").expect("event log");
        }
        behaviour(Stores {
            store: Arc::new(store.clone()),
            peer: Arc::new(peer.clone()),
        })
        .await;
        store.pool().close().await;
        peer.pool().close().await;
        db.drop_schema().await;
    }
}

// ---------------------------------------------------------------------------
// Helpers

fn owner(tenant: &str, principal: &str) -> Owner {
    Owner {
        tenant: tenant.into(),
        principal: principal.into(),
    }
}

fn status(state: TaskState, millis: i64) -> TaskStatus {
    TaskStatus {
        state: state as i32,
        message: None,
        timestamp: Some(Timestamp::from_millis(millis)),
    }
}

fn task(id: &str, context: &str, state: TaskState, millis: i64) -> Task {
    Task {
        // As the task manager creates a task (A2A v1.1 draft).
        generation: 1,
        id: id.into(),
        context_id: context.into(),
        status: Some(status(state, millis)),
        history: vec![Message::user_text(format!("hello from {id}"))],
        artifacts: vec![Artifact::text("out", format!("artifact of {id}")).with_id("a0")],
        ..Default::default()
    }
}

fn set_status(state: TaskState, millis: i64) -> TaskUpdate {
    TaskUpdate::Status {
        status: status(state, millis),
        metadata: None,
    }
}

fn chunk(artifact_id: &str, text: &str, append: bool) -> TaskUpdate {
    TaskUpdate::Artifact {
        artifact: Artifact::text("report", text).with_id(artifact_id),
        append,
        last_chunk: false,
        metadata: None,
    }
}

fn query(page_size: usize) -> TaskQuery {
    TaskQuery {
        page_size,
        ..Default::default()
    }
}

/// Every page of a listing, following the cursors.
async fn all_pages(store: &Store, who: &Owner, mut q: TaskQuery) -> Vec<TaskPage> {
    let mut pages = Vec::new();
    for _ in 0..10_000 {
        let page = store.list(who, &q).await.expect("list");
        let next = page.next.clone();
        pages.push(page);
        match next {
            Some(c) => q.cursor = Some(c),
            None => return pages,
        }
    }
    panic!("the listing never ended");
}

fn ids(tasks: &[Task]) -> Vec<String> {
    tasks.iter().map(|t| t.id.clone()).collect()
}

/// The listing order of the memory store: status time, then id, descending
/// (ids compared as bytes).
fn expected_order(tasks: &[Task]) -> Vec<String> {
    let mut keys: Vec<Cursor> = tasks.iter().map(Cursor::of).collect();
    keys.sort_by(|a, b| b.cmp(a));
    keys.into_iter().map(|c| c.id).collect()
}

// ---------------------------------------------------------------------------
// Behaviours

/// A task comes back exactly as stored, with its owner; ids are unique.
async fn create_and_get(s: Stores) {
    let me = owner("acme", "alice");
    let mut t = task("t-create", "ctx", TaskState::Working, 1_700_000_000_123);
    if let Some(st) = t.status.as_mut() {
        st.message = Some(Box::new(
            Message::agent_text("working on it").with_message_id("m-status"),
        ));
    }
    t.artifacts.push(Artifact::new(
        "mixed",
        vec![
            Part::data(json!({"risk": "high", "deps": [1, 2.5, null, true]})),
            Part::file(
                &b"\x00\x01binary\xff"[..],
                "a.bin",
                "application/octet-stream",
            ),
            Part::url("https://example.invalid/x").with_media_type("text/html"),
        ],
    ));
    t.metadata = Some(agentwire_server::types::json::to_struct(
        json!({"nested": {"a": [1, "two"]}, "flag": false})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    ));
    s.store.create(&me, t.clone()).await.expect("create");

    let got = s
        .store
        .get("t-create", None)
        .await
        .unwrap()
        .expect("stored");
    assert_eq!(got.owner, me);
    assert_eq!(got.task, t);
    // Visible through the other handle (another replica / process).
    let seen = s.peer.get("t-create", None).await.unwrap().expect("peer");
    assert_eq!(seen.task, t);

    assert!(s.store.get("no-such-task", None).await.unwrap().is_none());
    let err = s
        .peer
        .create(&me, task("t-create", "other", TaskState::Submitted, 1))
        .await
        .expect_err("duplicate id");
    assert_eq!(err.kind, ErrorKind::Internal);
    // The original is untouched.
    assert_eq!(
        s.store.get("t-create", None).await.unwrap().unwrap().task,
        t
    );
}

/// Tasks are listed only to their owner (tenant and principal both count).
async fn owner_isolation(s: Stores) {
    let owners = [
        owner("t1", "alice"),
        owner("t1", "bob"),
        owner("t2", "alice"),
        owner("", ""),
    ];
    for (n, who) in owners.iter().enumerate() {
        for i in 0..=n {
            let t = task(
                &format!("o{n}-{i}"),
                "shared",
                TaskState::Working,
                1000 + i as i64,
            );
            s.store.create(who, t).await.unwrap();
        }
    }
    for (n, who) in owners.iter().enumerate() {
        let page = s.store.list(who, &query(100)).await.unwrap();
        assert_eq!(page.total, n + 1, "owner {who:?}");
        assert!(
            page.tasks
                .iter()
                .all(|t| t.id.starts_with(&format!("o{n}-"))),
            "owner {who:?} sees {:?}",
            ids(&page.tasks)
        );
        let q = TaskQuery {
            context_id: Some("shared".into()),
            ..query(100)
        };
        assert_eq!(s.peer.list(who, &q).await.unwrap().total, n + 1);
        let got = s
            .store
            .get(&format!("o{n}-0"), None)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&got.owner, who);
    }
    let stranger = owner("t1", "mallory");
    let page = s.store.list(&stranger, &query(100)).await.unwrap();
    assert_eq!((page.total, page.tasks.len()), (0, 0));
    assert!(page.next.is_none());
}

/// The state machine through the store: statuses, history, chunk merging,
/// replacement, refusals, and terminal immutability.
async fn update_semantics(s: Stores) {
    let me = Owner::default();
    let mut t = task("t-upd", "ctx", TaskState::Submitted, 1000);
    t.artifacts.clear();
    s.store.create(&me, t).await.unwrap();

    let working = TaskStatus {
        message: Some(Box::new(Message::agent_text("started"))),
        ..status(TaskState::Working, 2000)
    };
    let state = s
        .store
        .update(
            "t-upd",
            TaskUpdate::Status {
                status: working,
                metadata: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(state.state, TaskState::Working);
    let state = s
        .peer
        .update("t-upd", TaskUpdate::UserMessage(Message::user_text("more")))
        .await
        .unwrap();
    assert_eq!(state.state, TaskState::Working);

    // 100 chunks of one artifact become one artifact of 100 parts.
    s.store
        .update("t-upd", chunk("a1", "c0 ", false))
        .await
        .unwrap();
    for i in 1..100 {
        let store = if i % 2 == 0 { &s.store } else { &s.peer };
        store
            .update("t-upd", chunk("a1", &format!("c{i} "), true))
            .await
            .unwrap();
    }
    // A chunk fills an empty name and merges metadata.
    let mut named = Artifact::new("", vec![Part::text("x")]).with_id("a2");
    named.name.clear();
    s.store
        .update(
            "t-upd",
            TaskUpdate::Artifact {
                artifact: named,
                append: true,
                last_chunk: false,
                metadata: None,
            },
        )
        .await
        .unwrap();
    s.store
        .update(
            "t-upd",
            TaskUpdate::Artifact {
                artifact: Artifact::new("second", vec![Part::text("y")])
                    .with_id("a2")
                    .with_metadata("k", json!("v")),
                append: true,
                last_chunk: true,
                metadata: None,
            },
        )
        .await
        .unwrap();

    let got = s.store.get("t-upd", None).await.unwrap().unwrap().task;
    assert_eq!(got.state(), TaskState::Working);
    assert_eq!(got.status_timestamp(), Some(Timestamp::from_millis(2000)));
    assert_eq!(
        got.history.len(),
        3,
        "user message, status message, user message"
    );
    assert_eq!(got.history[1].text(), "started");
    assert_eq!(got.history[2].text(), "more");
    assert_eq!(got.artifacts.len(), 2);
    let a1 = got.artifact("a1").unwrap();
    assert_eq!(a1.parts.len(), 100);
    let expected: String = (0..100).map(|i| format!("c{i} ")).collect();
    assert_eq!(a1.text_content(), expected);
    let a2 = got.artifact("a2").unwrap();
    assert_eq!(a2.name, "second");
    assert_eq!(a2.text_content(), "xy");
    assert!(a2.metadata.as_ref().unwrap().fields.contains_key("k"));

    // Without append, a chunk replaces the artifact.
    s.peer
        .update("t-upd", chunk("a1", "replaced", false))
        .await
        .unwrap();
    let got = s.store.get("t-upd", None).await.unwrap().unwrap().task;
    assert_eq!(got.artifact("a1").unwrap().text_content(), "replaced");
    assert_eq!(got.artifacts.len(), 2);

    // Refusals change nothing.
    let err = s
        .store
        .update("t-upd", set_status(TaskState::Unspecified, 3000))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidParams);
    let err = s
        .store
        .update("no-such-task", set_status(TaskState::Working, 3000))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::TaskNotFound);
    assert_eq!(s.store.get("t-upd", None).await.unwrap().unwrap().task, got);

    // Input required, then the user answers, then completion.
    let state = s
        .store
        .update("t-upd", set_status(TaskState::InputRequired, 4000))
        .await
        .unwrap();
    assert_eq!(state.state, TaskState::InputRequired);
    s.store
        .update("t-upd", TaskUpdate::UserMessage(Message::user_text("22")))
        .await
        .unwrap();
    let state = s
        .peer
        .update("t-upd", set_status(TaskState::Completed, 5000))
        .await
        .unwrap();
    assert_eq!(state.state, TaskState::Completed);
    let done = s.store.get("t-upd", None).await.unwrap().unwrap().task;

    // A terminal task never changes again, through either handle.
    for store in [&s.store, &s.peer] {
        for update in [
            set_status(TaskState::Working, 6000),
            set_status(TaskState::Failed, 6000),
            chunk("a1", "late", true),
            chunk("a9", "late", false),
            TaskUpdate::UserMessage(Message::user_text("late")),
        ] {
            let err = store.update("t-upd", update).await.unwrap_err();
            assert_eq!(err.kind, ErrorKind::UnsupportedOperation);
        }
    }
    assert_eq!(
        s.store.get("t-upd", None).await.unwrap().unwrap().task,
        done
    );

    // The listing columns follow the updates.
    let q = TaskQuery {
        state: Some(TaskState::Completed),
        ..query(10)
    };
    let page = s.store.list(&me, &q).await.unwrap();
    assert_eq!(ids(&page.tasks), ["t-upd"]);
    assert_eq!(Cursor::of(&page.tasks[0]).millis, 5000);
}

/// A streamed artifact, chunk by chunk: every read in the middle of the
/// stream (by id, in a listing with artifacts, among the unfinished tasks a
/// restarted server recovers) shows the artifact assembled so far, with the
/// task's other artifacts; the end of the turn keeps it whole; a chunk that
/// replaces an artifact mid-stream and one after the end behave as anywhere.
async fn streamed_artifacts(s: Stores) {
    let me = owner("acme", "streamer");
    s.store
        .create(&me, task("t-stream", "ctx-s", TaskState::Submitted, 1000))
        .await
        .unwrap();
    s.store
        .update("t-stream", set_status(TaskState::Working, 2000))
        .await
        .unwrap();
    let mut expected = String::new();
    for i in 0..60 {
        let text = format!("part{i} ");
        expected.push_str(&text);
        let store = if i % 3 == 0 { &s.peer } else { &s.store };
        let updated = store
            .update("t-stream", chunk("a-live", &text, i > 0))
            .await
            .unwrap();
        assert_eq!(updated.state, TaskState::Working);
        if i % 20 == 19 {
            // A status and a message in the middle of the stream keep it.
            s.store
                .update("t-stream", set_status(TaskState::Working, 2000 + i))
                .await
                .unwrap();
            s.peer
                .update(
                    "t-stream",
                    TaskUpdate::UserMessage(Message::user_text(format!("note {i}"))),
                )
                .await
                .unwrap();
        }
    }
    let check = |t: &Task, with_history: bool| {
        assert_eq!(t.state(), TaskState::Working);
        assert_eq!(t.artifacts.len(), 2, "{:?}", t.artifacts);
        assert_eq!(t.artifacts[0].text_content(), "artifact of t-stream");
        let live = t.artifact("a-live").expect("the streamed artifact");
        assert_eq!(live.parts.len(), 60);
        assert_eq!(live.text_content(), expected);
        if with_history {
            assert_eq!(t.history.len(), 4, "first message and three notes");
        }
    };
    for store in [&s.store, &s.peer] {
        check(
            &store.get("t-stream", None).await.unwrap().unwrap().task,
            true,
        );
        let short = store.get("t-stream", Some(1)).await.unwrap().unwrap().task;
        assert_eq!(short.history.len(), 1);
        check(&short, false);
        let q = TaskQuery {
            include_artifacts: true,
            ..query(10)
        };
        let page = store.list(&me, &q).await.unwrap();
        assert_eq!(page.total, 1);
        check(&page.tasks[0], true);
        let slim = TaskQuery {
            history_length: Some(0),
            ..q
        };
        let page = store.list(&me, &slim).await.unwrap();
        check(&page.tasks[0], false);
        let page = store.list(&me, &query(10)).await.unwrap();
        assert!(page.tasks[0].artifacts.is_empty());
        let recovered = store.unfinished().await.unwrap();
        let found = recovered
            .iter()
            .find(|t| t.task.id == "t-stream")
            .expect("the streaming task is unfinished");
        assert_eq!(found.owner, me);
        check(&found.task, true);
    }

    // Several streamed tasks in one listing page, each with its own chunks.
    for n in 0..3 {
        let id = format!("t-many-{n}");
        s.store
            .create(&me, task(&id, "ctx-many", TaskState::Working, 5000 + n))
            .await
            .unwrap();
        for i in 0..=n {
            s.store
                .update(&id, chunk("a-many", &format!("{id}:{i} "), i > 0))
                .await
                .unwrap();
        }
    }
    let q = TaskQuery {
        context_id: Some("ctx-many".into()),
        include_artifacts: true,
        ..query(2)
    };
    let pages = all_pages(&s.peer, &me, q).await;
    let listed: Vec<&Task> = pages.iter().flat_map(|p| &p.tasks).collect();
    assert_eq!(
        listed.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["t-many-2", "t-many-1", "t-many-0"]
    );
    for t in listed {
        let n: usize = t.id["t-many-".len()..].parse().unwrap();
        let many = t.artifact("a-many").unwrap();
        assert_eq!(many.parts.len(), n + 1, "{}", t.id);
        let want: String = (0..=n).map(|i| format!("{}:{i} ", t.id)).collect();
        assert_eq!(many.text_content(), want);
    }

    // A chunk without append replaces the artifact streamed so far.
    s.store
        .update("t-stream", chunk("a-live", "fresh ", false))
        .await
        .unwrap();
    s.peer
        .update("t-stream", chunk("a-live", "tail", true))
        .await
        .unwrap();
    expected = "fresh tail".into();
    let got = s.store.get("t-stream", None).await.unwrap().unwrap().task;
    assert_eq!(got.artifact("a-live").unwrap().text_content(), expected);

    // The turn ends: the task keeps its artifacts, and refuses more.
    let done = s
        .peer
        .update("t-stream", set_status(TaskState::Completed, 9000))
        .await
        .unwrap();
    assert_eq!(done.state, TaskState::Completed);
    let finished = s.store.get("t-stream", None).await.unwrap().unwrap().task;
    assert_eq!(finished.state(), TaskState::Completed);
    assert_eq!(finished.artifacts.len(), 2);
    assert_eq!(
        finished.artifact("a-live").unwrap().text_content(),
        expected
    );
    assert_eq!(finished.history.len(), 4);
    let err = s
        .store
        .update("t-stream", chunk("a-live", "late", true))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::UnsupportedOperation);
    let err = s
        .peer
        .update("no-such-task", chunk("a-live", "x", true))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::TaskNotFound);
    assert_eq!(
        s.peer.get("t-stream", None).await.unwrap().unwrap().task,
        finished
    );
    assert!(
        !s.store
            .unfinished()
            .await
            .unwrap()
            .iter()
            .any(|t| t.task.id == "t-stream")
    );

    // Interrupted mid-stream, then resumed: the same artifact goes on.
    s.store
        .create(&me, task("t-pause", "ctx-p", TaskState::Working, 1000))
        .await
        .unwrap();
    s.store
        .update("t-pause", chunk("a-p", "one ", false))
        .await
        .unwrap();
    s.store
        .update("t-pause", set_status(TaskState::InputRequired, 1100))
        .await
        .unwrap();
    s.store
        .update("t-pause", set_status(TaskState::Working, 1200))
        .await
        .unwrap();
    s.peer
        .update("t-pause", chunk("a-p", "two", true))
        .await
        .unwrap();
    let got = s.store.get("t-pause", None).await.unwrap().unwrap().task;
    assert_eq!(got.artifact("a-p").unwrap().text_content(), "one two");
    assert_eq!(got.artifact("a-p").unwrap().parts.len(), 2);
}

/// The totals of listings (`totalSize`) follow every change of state,
/// through either handle: creation, status updates, a refused duplicate, the
/// failing of the tasks a restarted server finds unfinished, and a purge.
async fn totals_follow_the_tasks(s: Stores) {
    let me = owner("totals", "me");
    let other = owner("totals", "other");
    let total = |who: &Owner, context: Option<&str>, state: Option<TaskState>| {
        let q = TaskQuery {
            context_id: context.map(String::from),
            state,
            ..query(1)
        };
        let store = Arc::clone(&s.store);
        let who = who.clone();
        async move { store.list(&who, &q).await.unwrap().total }
    };
    for i in 0..12 {
        let ctx = ["one", "two", "three"][i % 3];
        let store = if i % 2 == 0 { &s.store } else { &s.peer };
        store
            .create(
                &me,
                task(&format!("n{i:02}"), ctx, TaskState::Submitted, 100),
            )
            .await
            .unwrap();
    }
    s.peer
        .create(&other, task("n-other", "one", TaskState::Submitted, 100))
        .await
        .unwrap();
    // A duplicate counts nothing.
    assert!(
        s.store
            .create(&me, task("n00", "one", TaskState::Submitted, 100))
            .await
            .is_err()
    );
    assert_eq!(total(&me, None, None).await, 12);
    assert_eq!(total(&me, None, Some(TaskState::Submitted)).await, 12);
    assert_eq!(total(&me, Some("one"), None).await, 4);
    assert_eq!(total(&other, None, None).await, 1);

    // Work starts on all; some finish, one waits for input.
    for i in 0..12 {
        let store = if i % 3 == 0 { &s.peer } else { &s.store };
        store
            .update(&format!("n{i:02}"), set_status(TaskState::Working, 200))
            .await
            .unwrap();
    }
    for i in 0..4 {
        s.store
            .update(&format!("n{i:02}"), set_status(TaskState::Completed, 300))
            .await
            .unwrap();
    }
    s.peer
        .update("n04", set_status(TaskState::InputRequired, 300))
        .await
        .unwrap();
    // Refused updates count nothing.
    assert!(
        s.store
            .update("n00", set_status(TaskState::Working, 400))
            .await
            .is_err()
    );
    assert!(
        s.store
            .update("n05", set_status(TaskState::Unspecified, 400))
            .await
            .is_err()
    );
    assert_eq!(total(&me, None, None).await, 12);
    assert_eq!(total(&me, None, Some(TaskState::Submitted)).await, 0);
    assert_eq!(total(&me, None, Some(TaskState::Working)).await, 7);
    assert_eq!(total(&me, None, Some(TaskState::Completed)).await, 4);
    assert_eq!(total(&me, None, Some(TaskState::InputRequired)).await, 1);
    // n00, n03 are "one"; n01 "two"; n02 "three".
    assert_eq!(total(&me, Some("one"), Some(TaskState::Completed)).await, 2);
    assert_eq!(total(&me, Some("two"), Some(TaskState::Working)).await, 2);
    assert_eq!(total(&me, Some("two"), None).await, 4);
    assert_eq!(total(&me, Some("nowhere"), None).await, 0);
    assert_eq!(total(&other, None, Some(TaskState::Submitted)).await, 1);

    // A restart finds the unfinished tasks and fails them (as the task
    // manager does at startup).
    let unfinished: Vec<String> = s
        .peer
        .unfinished()
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.owner == me)
        .map(|t| t.task.id)
        .collect();
    assert_eq!(unfinished.len(), 7);
    for id in &unfinished {
        s.peer
            .update(id, set_status(TaskState::Failed, 500))
            .await
            .unwrap();
    }
    assert_eq!(total(&me, None, None).await, 12);
    assert_eq!(total(&me, None, Some(TaskState::Working)).await, 0);
    assert_eq!(total(&me, None, Some(TaskState::Failed)).await, 7);
    assert_eq!(total(&me, Some("three"), Some(TaskState::Failed)).await, 3);

    // The purge takes the finished tasks out of the totals.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let purged = s
        .peer
        .purge_terminal_older_than(Duration::from_millis(5))
        .await
        .unwrap();
    assert_eq!(purged, 11);
    assert_eq!(total(&me, None, None).await, 1);
    assert_eq!(total(&me, None, Some(TaskState::Completed)).await, 0);
    assert_eq!(total(&me, None, Some(TaskState::InputRequired)).await, 1);
    assert_eq!(total(&me, Some("two"), None).await, 1);
    assert_eq!(total(&me, Some("one"), None).await, 0);
    assert_eq!(total(&other, None, None).await, 1);
}

/// `historyLength` keeps the most recent messages, in order.
async fn history_length(s: Stores) {
    let mut t = task("t-hist", "ctx", TaskState::Working, 1);
    t.history = (0..5)
        .map(|i| Message::user_text(format!("m{i}")))
        .collect();
    s.store.create(&Owner::default(), t).await.unwrap();
    let texts = |t: &Task| t.history.iter().map(Message::text).collect::<Vec<_>>();
    for (n, expected) in [
        (Some(0), vec![]),
        (Some(1), vec!["m4"]),
        (Some(2), vec!["m3", "m4"]),
        (Some(5), vec!["m0", "m1", "m2", "m3", "m4"]),
        (Some(50), vec!["m0", "m1", "m2", "m3", "m4"]),
        (None, vec!["m0", "m1", "m2", "m3", "m4"]),
    ] {
        let got = s.store.get("t-hist", n).await.unwrap().unwrap().task;
        assert_eq!(texts(&got), expected, "historyLength {n:?}");
        assert_eq!(got.artifacts.len(), 1, "get always includes artifacts");
        let q = TaskQuery {
            history_length: n,
            ..query(10)
        };
        let page = s.peer.list(&Owner::default(), &q).await.unwrap();
        assert_eq!(texts(&page.tasks[0]), expected, "list historyLength {n:?}");
    }
}

/// Listing order: status time descending, then id descending by bytes
/// (whatever the database's collation), tasks without a time last.
async fn list_ordering(s: Stores) {
    let me = owner("order", "me");
    let mut tasks = Vec::new();
    for (i, id) in ["a", "B", "b", "_x", "Z1", "a0", "a-", "é", "zz", "A"]
        .into_iter()
        .enumerate()
    {
        tasks.push(task(id, "ctx", TaskState::Working, 5000));
        tasks.push(task(
            &format!("{id}~{i}"),
            "ctx",
            TaskState::Working,
            4000 + i as i64,
        ));
    }
    let mut untimed = task("untimed", "ctx", TaskState::Submitted, 0);
    if let Some(st) = untimed.status.as_mut() {
        st.timestamp = None;
    }
    tasks.push(untimed);
    tasks.push(task(
        "future",
        "ctx",
        TaskState::Completed,
        9_000_000_000_000,
    ));
    for t in &tasks {
        s.store.create(&me, t.clone()).await.unwrap();
    }
    let expected = expected_order(&tasks);
    assert_eq!(expected.last().map(String::as_str), Some("untimed"));
    assert_eq!(expected[0], "future");
    let page = s.store.list(&me, &query(100)).await.unwrap();
    assert_eq!(ids(&page.tasks), expected);
    assert_eq!(page.total, tasks.len());
    assert!(page.next.is_none());
    // The same order page by page, through the other handle.
    let pages = all_pages(&s.peer, &me, query(3)).await;
    let paged: Vec<String> = pages.iter().flat_map(|p| ids(&p.tasks)).collect();
    assert_eq!(paged, expected);
}

/// Filters (context, state, status time, artifacts, history) and totals.
async fn list_filters(s: Stores) {
    let me = owner("filters", "me");
    let states = [
        TaskState::Working,
        TaskState::Completed,
        TaskState::InputRequired,
        TaskState::Failed,
    ];
    let mut tasks = Vec::new();
    for i in 0..24 {
        let ctx = ["red", "green", "blue"][i % 3];
        let t = task(
            &format!("f{i:02}"),
            ctx,
            states[i % 4],
            10_000 + 100 * i as i64,
        );
        tasks.push(t.clone());
        s.store.create(&me, t).await.unwrap();
    }
    let mut untimed = task("f-untimed", "red", TaskState::Working, 0);
    if let Some(st) = untimed.status.as_mut() {
        st.timestamp = None;
    }
    s.store.create(&me, untimed.clone()).await.unwrap();
    // Noise from another owner in the same contexts.
    s.store
        .create(
            &owner("filters", "other"),
            task("f-other", "red", TaskState::Working, 99_999),
        )
        .await
        .unwrap();

    let check = |q: TaskQuery, keep: &dyn Fn(&Task) -> bool| {
        let mut all = tasks.clone();
        all.push(untimed.clone());
        let expected_ids = expected_order(&all.into_iter().filter(|t| keep(t)).collect::<Vec<_>>());
        let store = Arc::clone(&s.store);
        let me = me.clone();
        async move {
            let page = store.list(&me, &q).await.unwrap();
            assert_eq!(ids(&page.tasks), expected_ids, "{q:?}");
            assert_eq!(page.total, expected_ids.len(), "{q:?}");
        }
    };

    check(
        TaskQuery {
            context_id: Some("red".into()),
            ..query(100)
        },
        &|t| t.context_id == "red",
    )
    .await;
    check(
        TaskQuery {
            context_id: Some("nowhere".into()),
            ..query(100)
        },
        &|_| false,
    )
    .await;
    check(
        TaskQuery {
            state: Some(TaskState::Completed),
            ..query(100)
        },
        &|t| t.state() == TaskState::Completed,
    )
    .await;
    check(
        TaskQuery {
            state: Some(TaskState::Working),
            context_id: Some("red".into()),
            ..query(100)
        },
        &|t| t.state() == TaskState::Working && t.context_id == "red",
    )
    .await;
    // statusTimestampAfter is inclusive; a task without a time never matches.
    check(
        TaskQuery {
            status_after: Some(Timestamp::from_millis(11_200)),
            ..query(100)
        },
        &|t| {
            t.status_timestamp()
                .is_some_and(|ts| ts.as_millis() >= 11_200)
        },
    )
    .await;
    check(
        TaskQuery {
            status_after: Some(Timestamp::from_millis(-1)),
            ..query(100)
        },
        &|t| t.status_timestamp().is_some(),
    )
    .await;
    check(
        TaskQuery {
            status_after: Some(Timestamp::from_millis(11_200)),
            state: Some(TaskState::Working),
            context_id: Some("red".into()),
            ..query(100)
        },
        &|t| {
            t.status_timestamp()
                .is_some_and(|ts| ts.as_millis() >= 11_200)
                && t.state() == TaskState::Working
                && t.context_id == "red"
        },
    )
    .await;

    // Artifacts only when asked; history trimmed as asked.
    let page = s.store.list(&me, &query(100)).await.unwrap();
    assert_eq!(page.tasks.len(), 25);
    assert!(page.tasks.iter().all(|t| t.artifacts.is_empty()));
    assert!(page.tasks.iter().all(|t| t.history.len() == 1));
    let q = TaskQuery {
        include_artifacts: true,
        history_length: Some(0),
        ..query(100)
    };
    let page = s.store.list(&me, &q).await.unwrap();
    for t in &page.tasks {
        assert!(t.history.is_empty());
        assert_eq!(t.artifacts.len(), 1);
        assert_eq!(
            t.artifacts[0].text_content(),
            format!("artifact of {}", t.id)
        );
        assert!(t.status.is_some());
    }
}

/// Paging through many pages: every task once, in order, the total on every
/// page, the end marked; a task created meanwhile (newer, so before the
/// cursor) does not shift later pages.
async fn pagination(s: Stores) {
    let me = owner("pages", "me");
    let mut tasks = Vec::new();
    for i in 0..230 {
        // Groups of three share a timestamp, so ids break ties across page
        // boundaries.
        let t = task(
            &format!("p{:03}", (i * 7919) % 230),
            "ctx",
            TaskState::Working,
            50_000 + i / 3,
        );
        tasks.push(t);
    }
    for t in &tasks {
        s.store.create(&me, t.clone()).await.unwrap();
    }
    let expected = expected_order(&tasks);
    for size in [1, 7, 100, 229, 230, 231] {
        let pages = all_pages(&s.store, &me, query(size)).await;
        assert_eq!(pages.len(), 230usize.div_ceil(size), "page size {size}");
        let mut seen = HashSet::new();
        let mut order = Vec::new();
        for (n, page) in pages.iter().enumerate() {
            assert_eq!(page.total, 230);
            let last = n + 1 == pages.len();
            assert_eq!(page.next.is_none(), last, "page {n} of size {size}");
            if !last {
                assert_eq!(page.tasks.len(), size);
                assert_eq!(
                    page.next.as_ref(),
                    page.tasks.last().map(Cursor::of).as_ref()
                );
            }
            for t in &page.tasks {
                assert!(
                    seen.insert(t.id.clone()),
                    "{} twice (page size {size})",
                    t.id
                );
                order.push(t.id.clone());
            }
        }
        assert_eq!(order, expected, "page size {size}");
    }

    // A new task during paging appears before the cursor: no duplicate, no gap.
    let first = s.store.list(&me, &query(50)).await.unwrap();
    s.peer
        .create(&me, task("p-new", "ctx", TaskState::Working, 99_999))
        .await
        .unwrap();
    let mut q = query(50);
    q.cursor = first.next.clone();
    let rest = all_pages(&s.peer, &me, q).await;
    let mut order = ids(&first.tasks);
    order.extend(rest.iter().flat_map(|p| ids(&p.tasks)));
    assert_eq!(order, expected);
    assert_eq!(rest[0].total, 231);

    // A cursor between two keys resumes after it.
    let mut q = query(5);
    q.cursor = Some(Cursor {
        millis: 50_010,
        id: "p".into(),
    });
    let page = s.store.list(&me, &q).await.unwrap();
    let after: Vec<String> = expected_order(&tasks)
        .into_iter()
        .filter(|id| {
            let t = tasks.iter().find(|t| &t.id == id).unwrap();
            Cursor::of(t)
                < Cursor {
                    millis: 50_010,
                    id: "p".into(),
                }
        })
        .take(5)
        .collect();
    assert_eq!(ids(&page.tasks), after);

    // Paging with a filter.
    s.store
        .create(&me, task("p-blue-1", "blue", TaskState::Working, 1))
        .await
        .unwrap();
    s.store
        .create(&me, task("p-blue-2", "blue", TaskState::Working, 2))
        .await
        .unwrap();
    let q = TaskQuery {
        context_id: Some("blue".into()),
        ..query(1)
    };
    let pages = all_pages(&s.store, &me, q).await;
    let order: Vec<String> = pages.iter().flat_map(|p| ids(&p.tasks)).collect();
    assert_eq!(order, ["p-blue-2", "p-blue-1"]);
    assert!(pages.iter().all(|p| p.total == 2));
}

/// Push-notification configs: create, replace in place, read, list in
/// order, delete; each keeps the form of its notifications (the protocol
/// version that registered it: p2 is a 0.3 client's).
async fn push_configs(s: Stores) {
    let format = |id: &str| {
        if id == "p2" {
            PushFormat::V03
        } else {
            PushFormat::V1
        }
    };
    let config = |task_id: &str, id: &str, url: &str| StoredPushConfig {
        format: format(id),
        config: TaskPushNotificationConfig {
            tenant: "acme".into(),
            id: id.into(),
            task_id: task_id.into(),
            url: url.into(),
            token: format!("token-{id}"),
            authentication: Some(AuthenticationInfo {
                scheme: "Bearer".into(),
                credentials: "secret".into(),
            }),
        },
    };
    assert!(
        s.store
            .list_push_configs("t-push")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        s.store
            .get_push_config("t-push", "p1")
            .await
            .unwrap()
            .is_none()
    );
    for id in ["p1", "p2", "p3"] {
        s.store
            .put_push_config(&config(
                "t-push",
                id,
                &format!("https://hooks.invalid/{id}"),
            ))
            .await
            .unwrap();
    }
    s.store
        .put_push_config(&config("t-other", "p1", "https://hooks.invalid/other"))
        .await
        .unwrap();
    let replaced = config("t-push", "p1", "https://hooks.invalid/new");
    s.peer.put_push_config(&replaced).await.unwrap();

    let listed = s.peer.list_push_configs("t-push").await.unwrap();
    let listed_ids: Vec<&str> = listed.iter().map(|c| c.config.id.as_str()).collect();
    assert_eq!(
        listed_ids,
        ["p1", "p2", "p3"],
        "replacing keeps the position"
    );
    assert_eq!(listed[0], replaced);
    assert_eq!(listed[1].format, PushFormat::V03, "the format is kept");
    assert_eq!(
        s.store.get_push_config("t-push", "p2").await.unwrap(),
        Some(config("t-push", "p2", "https://hooks.invalid/p2"))
    );
    assert_eq!(
        s.store
            .get_push_config("t-other", "p1")
            .await
            .unwrap()
            .unwrap()
            .config
            .url,
        "https://hooks.invalid/other"
    );

    assert!(s.store.delete_push_config("t-push", "p2").await.unwrap());
    assert!(!s.peer.delete_push_config("t-push", "p2").await.unwrap());
    assert!(!s.store.delete_push_config("t-none", "p1").await.unwrap());
    let listed: Vec<String> = s
        .store
        .list_push_configs("t-push")
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.config.id)
        .collect();
    assert_eq!(listed, ["p1", "p3"]);
    assert!(
        s.store
            .get_push_config("t-push", "p2")
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(s.store.list_push_configs("t-other").await.unwrap().len(), 1);
}

/// Many tokio tasks update one task at once, through both handles: no
/// update is lost, each writer's updates keep their order, and exactly one
/// of several racing terminal updates wins.
async fn concurrent_updates(s: Stores) {
    const WRITERS: usize = 24;
    const EACH: usize = 5;
    let mut t = task("t-race", "ctx", TaskState::Working, 1);
    t.artifacts.clear();
    t.history.clear();
    s.store.create(&Owner::default(), t).await.unwrap();
    s.store
        .update("t-race", chunk("a1", "", false))
        .await
        .unwrap();

    let mut handles = Vec::new();
    for w in 0..WRITERS {
        let store = if w % 2 == 0 {
            Arc::clone(&s.store)
        } else {
            Arc::clone(&s.peer)
        };
        handles.push(tokio::spawn(async move {
            for i in 0..EACH {
                store
                    .update("t-race", chunk("a1", &format!("w{w}.{i};"), true))
                    .await
                    .expect("chunk");
                store
                    .update(
                        "t-race",
                        TaskUpdate::UserMessage(Message::user_text(format!("w{w}.{i}"))),
                    )
                    .await
                    .expect("message");
            }
        }));
    }
    for h in handles {
        h.await.expect("writer");
    }
    let got = s.store.get("t-race", None).await.unwrap().unwrap().task;
    let parts: Vec<String> = got.artifacts[0]
        .parts
        .iter()
        .filter_map(|p| p.as_text().map(str::to_owned))
        .filter(|p| !p.is_empty())
        .collect();
    assert_eq!(got.artifacts.len(), 1);
    assert_eq!(parts.len(), WRITERS * EACH, "lost artifact chunks");
    assert_eq!(got.history.len(), WRITERS * EACH, "lost messages");
    for w in 0..WRITERS {
        let mine: Vec<&String> = parts
            .iter()
            .filter(|p| p.starts_with(&format!("w{w}.")))
            .collect();
        let expected: Vec<String> = (0..EACH).map(|i| format!("w{w}.{i};")).collect();
        assert_eq!(mine, expected.iter().collect::<Vec<_>>(), "writer {w}");
        let texts: Vec<String> = got
            .history
            .iter()
            .map(Message::text)
            .filter(|m| m.starts_with(&format!("w{w}.")))
            .collect();
        let expected: Vec<String> = (0..EACH).map(|i| format!("w{w}.{i}")).collect();
        assert_eq!(texts, expected, "writer {w}");
    }

    // Racing terminal updates: one wins, the others are refused.
    let mut racers = Vec::new();
    for r in 0..8 {
        let store = if r % 2 == 0 {
            Arc::clone(&s.store)
        } else {
            Arc::clone(&s.peer)
        };
        let state = if r % 2 == 0 {
            TaskState::Completed
        } else {
            TaskState::Failed
        };
        racers.push(tokio::spawn(async move {
            store.update("t-race", set_status(state, 10 + r)).await
        }));
    }
    let mut won = Vec::new();
    for r in racers {
        match r.await.expect("racer") {
            Ok(updated) => won.push(updated.state),
            Err(e) => assert_eq!(e.kind, ErrorKind::UnsupportedOperation),
        }
    }
    assert_eq!(won.len(), 1, "exactly one terminal update applies: {won:?}");
    let state = s
        .peer
        .get("t-race", None)
        .await
        .unwrap()
        .unwrap()
        .task
        .state();
    assert_eq!(state, won[0]);
}

/// Retention: terminal tasks older than the age go, with their push
/// configs; nothing else does.
async fn purge(s: Stores) {
    let me = Owner::default();
    let terminal = [
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
        TaskState::Rejected,
    ];
    let live = [
        TaskState::Submitted,
        TaskState::Working,
        TaskState::InputRequired,
        TaskState::AuthRequired,
    ];
    for (i, state) in terminal.iter().chain(&live).enumerate() {
        s.store
            .create(&me, task(&format!("r{i}"), "ctx", *state, 1000))
            .await
            .unwrap();
    }
    // One task becomes terminal through an update.
    s.store
        .create(&me, task("r-late", "ctx", TaskState::Working, 1000))
        .await
        .unwrap();
    s.store
        .update("r-late", set_status(TaskState::Completed, 2000))
        .await
        .unwrap();
    let push = |task_id: &str| {
        StoredPushConfig::v1(TaskPushNotificationConfig {
            id: "hook".into(),
            task_id: task_id.into(),
            url: "https://hooks.invalid/x".into(),
            ..Default::default()
        })
    };
    s.store.put_push_config(&push("r0")).await.unwrap();
    s.store.put_push_config(&push("r5")).await.unwrap();

    // Nothing is an hour old yet.
    assert_eq!(
        s.store
            .purge_terminal_older_than(Duration::from_secs(3600))
            .await
            .unwrap(),
        0
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    let purged = s
        .peer
        .purge_terminal_older_than(Duration::from_millis(5))
        .await
        .unwrap();
    assert_eq!(purged, 5);
    for i in 0..4 {
        assert!(s.store.get(&format!("r{i}"), None).await.unwrap().is_none());
    }
    assert!(s.store.get("r-late", None).await.unwrap().is_none());
    for i in 4..8 {
        assert!(s.store.get(&format!("r{i}"), None).await.unwrap().is_some());
    }
    assert!(s.store.list_push_configs("r0").await.unwrap().is_empty());
    assert_eq!(s.store.list_push_configs("r5").await.unwrap().len(), 1);
    assert_eq!(s.store.list(&me, &query(100)).await.unwrap().total, 4);
    assert_eq!(
        s.store
            .purge_terminal_older_than(Duration::ZERO)
            .await
            .unwrap(),
        0
    );

    // More than one batch.
    for i in 0..1100 {
        s.store
            .create(
                &me,
                task(&format!("bulk{i}"), "bulk", TaskState::Completed, 1),
            )
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(
        s.store
            .purge_terminal_older_than(Duration::ZERO)
            .await
            .unwrap(),
        1100
    );
    assert_eq!(s.store.list(&me, &query(100)).await.unwrap().total, 4);
}

// ---------------------------------------------------------------------------
// Every behaviour on every backend.

macro_rules! conformance {
    ($($behaviour:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $behaviour() {
                    super::run(super::Backend::Memory, super::$behaviour).await;
                }
            )*
        }
        #[cfg(feature = "sqlite")]
        mod sqlite_file {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $behaviour() {
                    super::run(super::Backend::SqliteFile, super::$behaviour).await;
                }
            )*
        }
        #[cfg(feature = "sqlite")]
        mod sqlite_memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $behaviour() {
                    super::run(super::Backend::SqliteMemory, super::$behaviour).await;
                }
            )*
        }
        #[cfg(feature = "postgres")]
        mod postgres_db {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[ignore = "needs PostgreSQL: set A2A_TEST_POSTGRES_URL (bash .ci/postgres start)"]
                async fn $behaviour() {
                    super::run(super::Backend::Postgres, super::$behaviour).await;
                }
            )*
        }
        #[cfg(feature = "postgres")]
        mod postgres_logged {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[ignore = "needs PostgreSQL: set A2A_TEST_POSTGRES_URL (bash .ci/postgres start)"]
                async fn $behaviour() {
                    super::run(super::Backend::PostgresLogged, super::$behaviour).await;
                }
            )*
        }
    };
}

conformance!(
    create_and_get,
    owner_isolation,
    update_semantics,
    streamed_artifacts,
    totals_follow_the_tasks,
    history_length,
    list_ordering,
    list_filters,
    pagination,
    push_configs,
    concurrent_updates,
    purge,
);
