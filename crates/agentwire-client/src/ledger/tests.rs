//! Ledger scenarios against a real server, over both stores.

use agentwire_server::{
    A2aResult, A2aServer, AgentExecutor, RequestContext, ServerHandle, TaskUpdater,
};
use agentwire_types::{AgentCard, Artifact, Message, TaskState};

use super::*;
use crate::Client;

/// Produces a "poster" artifact describing the request; asks for input
/// when the text says "ask"; names the refined artifact when the message
/// carries refinement metadata.
struct Poster;

impl AgentExecutor for Poster {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        let text = ctx.text();
        if text.contains("ask") && ctx.task.is_none() {
            return task.require_input("which size?").await;
        }
        let target = ctx
            .message
            .parts
            .first()
            .and_then(|p| p.metadata.as_ref())
            .and_then(|m| m.fields.get(ARTIFACT_ID_KEY))
            .map(|v| agentwire_types::json::from_value(v).to_string());
        let body = match target {
            Some(t) => format!(
                "{text} (refining {t}, refs {:?})",
                ctx.message.reference_task_ids
            ),
            None => text,
        };
        task.add_artifact(Artifact::text("poster", body)).await?;
        task.complete().await
    }
}

async fn server() -> ServerHandle {
    A2aServer::new(AgentCard::new("Poster", "Makes posters", "1.0.0"), Poster)
        .bind("127.0.0.1:0")
        .await
        .expect("bind")
        .spawn()
}

async fn scenario(ledger: &Ledger, client: &Client) -> String {
    // v1
    let r = ledger
        .send(client, Message::user_text("coffee poster"))
        .await
        .unwrap();
    let t1 = r.task().unwrap().clone();
    let v1 = ledger.versions_of_task(&t1.id).await.unwrap().remove(0);
    assert_eq!(v1.artifact_name, "poster");
    assert_eq!(v1.previous_artifact_id, None);
    assert_eq!(v1.context_id, t1.context_id);

    // v2 refines v1: new task, same context, chained.
    let r = ledger
        .refine(client, &v1.artifact_id, Message::user_text("fancier title"))
        .await
        .unwrap();
    let t2 = r.task().unwrap().clone();
    assert_ne!(t2.id, t1.id);
    assert_eq!(t2.context_id, t1.context_id);
    let text = t2.artifacts[0].text_content();
    assert!(text.contains(&v1.artifact_id), "{text}");
    assert!(text.contains(&t1.id), "{text}");
    let v2 = ledger
        .latest_version(&t1.context_id, "poster")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(v2.task_id, t2.id);
    assert_eq!(
        v2.previous_artifact_id.as_deref(),
        Some(v1.artifact_id.as_str())
    );
    assert_eq!(
        ledger
            .task(&t2.id)
            .await
            .unwrap()
            .unwrap()
            .refines_artifact_id,
        Some(v1.artifact_id.clone())
    );

    // Accept v1, then v2: only one accepted at a time.
    ledger.accept(&v1.artifact_id).await.unwrap();
    let accepted = ledger.accept(&v2.artifact_id).await.unwrap();
    assert!(accepted.accepted_by_user);
    let all = ledger.versions(&t1.context_id, "poster").await.unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(
        all.iter().filter(|v| v.accepted_by_user).count(),
        1,
        "{all:?}"
    );
    assert_eq!(
        ledger
            .accepted_version(&t1.context_id, "poster")
            .await
            .unwrap()
            .unwrap()
            .artifact_id,
        v2.artifact_id
    );
    let chain = ledger.chain(&v2.artifact_id).await.unwrap();
    assert_eq!(
        chain
            .iter()
            .map(|v| v.artifact_id.clone())
            .collect::<Vec<_>>(),
        [v1.artifact_id.clone(), v2.artifact_id.clone()]
    );

    // A task waiting for input is pending until it is continued.
    let r = ledger
        .send(
            client,
            Message::user_text("ask me").with_context_id(&t1.context_id),
        )
        .await
        .unwrap();
    let t3 = r.task().unwrap().clone();
    assert_eq!(t3.state(), TaskState::InputRequired);
    let pending = ledger.pending().await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, t3.id);
    let r = ledger
        .continue_task(client, &t3.id, Message::user_text("A3"))
        .await
        .unwrap();
    assert_eq!(r.task().unwrap().state(), TaskState::Completed);
    assert!(ledger.pending().await.unwrap().is_empty());
    // A terminal task cannot be continued.
    assert!(matches!(
        ledger
            .continue_task(client, &t3.id, Message::user_text("again"))
            .await,
        Err(LedgerError::InvalidState(_))
    ));
    // A third poster in the context chains to the latest version.
    let v3 = ledger.versions_of_task(&t3.id).await.unwrap().remove(0);
    assert_eq!(
        v3.previous_artifact_id.as_deref(),
        Some(v2.artifact_id.as_str())
    );

    let view = ledger.context(&t1.context_id).await.unwrap().unwrap();
    assert_eq!(view.tasks.len(), 3);
    assert_eq!(view.versions.len(), 3);
    // The four user messages of the context.
    assert_eq!(view.messages.len(), 4, "{:?}", view.messages);
    assert_eq!(ledger.contexts().await.unwrap().len(), 1);
    t1.context_id
}

#[tokio::test]
async fn memory_ledger_tracks_versions_acceptance_and_pending_tasks() {
    let server = server().await;
    let client = Client::connect(&server.base_url()).await.unwrap();
    scenario(&Ledger::in_memory(), &client).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_ledger_survives_a_restart() {
    let server = server().await;
    let client = Client::connect(&server.base_url()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let ctx = {
        let ledger = Ledger::open(&path).await.unwrap();
        scenario(&ledger, &client).await
    };
    // A later run sees everything.
    let ledger = Ledger::open(&path).await.unwrap();
    let view = ledger.context(&ctx).await.unwrap().unwrap();
    assert_eq!(view.tasks.len(), 3);
    assert_eq!(view.versions.len(), 3);
    assert_eq!(
        view.versions.iter().filter(|v| v.accepted_by_user).count(),
        1
    );
    assert!(view.tasks.iter().all(|t| t.state == TaskState::Completed));
    // And can continue the conversation: refine the accepted version.
    let accepted = ledger
        .accepted_version(&ctx, "poster")
        .await
        .unwrap()
        .unwrap();
    let r = ledger
        .refine(&client, &accepted.artifact_id, Message::user_text("bigger"))
        .await
        .unwrap();
    let v4 = ledger
        .versions_of_task(&r.task().unwrap().id)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(v4.previous_artifact_id, Some(accepted.artifact_id));
    let store = SqliteStore::open(&path).await.unwrap();
    assert_eq!(store.schema_version().await.unwrap(), 3);
}

#[tokio::test]
async fn streamed_chunks_become_one_version() {
    struct Chunks;
    impl AgentExecutor for Chunks {
        async fn execute(&self, _ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
            task.start_work().await?;
            let id = agentwire_types::new_id();
            for (i, w) in ["a ", "b ", "c"].iter().enumerate() {
                task.artifact_chunk(Artifact::text("doc", *w).with_id(&id), i > 0, i == 2)
                    .await?;
            }
            task.complete().await
        }
    }
    let server = A2aServer::new(AgentCard::new("C", "chunks", "1"), Chunks)
        .bind("127.0.0.1:0")
        .await
        .unwrap()
        .spawn();
    let client = Client::connect(&server.base_url()).await.unwrap();
    let ledger = Ledger::in_memory();
    let mut events = ledger
        .stream(&client, Message::user_text("go"), &CallOptions::new())
        .await
        .unwrap();
    let mut task_id = String::new();
    while let Some(e) = events.next().await {
        let e = e.unwrap();
        if let Some(id) = e.task_id() {
            task_id = id.to_owned();
        }
    }
    let versions = ledger.versions_of_task(&task_id).await.unwrap();
    assert_eq!(versions.len(), 1);
    assert_eq!(versions[0].artifact.text_content(), "a b c");
    let rec = ledger.task(&task_id).await.unwrap().unwrap();
    assert_eq!(rec.state, TaskState::Completed);
    let view = ledger.context(&rec.context_id).await.unwrap().unwrap();
    assert_eq!(view.messages.len(), 1);
}

/// Three contexts, each with a task and an artifact version, recorded
/// without a server.
async fn three_contexts(ledger: &Ledger) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..3 {
        let mut task = agentwire_types::Task {
            id: agentwire_types::new_id(),
            context_id: agentwire_types::new_id(),
            status: Some(agentwire_types::TaskStatus::new(TaskState::Completed)),
            ..Default::default()
        };
        task.artifacts.push(Artifact::text("doc", format!("v{i}")));
        ledger.record_task(&task).await.unwrap();
        ledger
            .set_agent(&task.context_id, &format!("http://agent-{i}"))
            .await
            .unwrap();
        ids.push(task.context_id.clone());
        // Distinct update times.
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    ids
}

async fn agents_and_pruning(ledger: &Ledger) {
    let ids = three_contexts(ledger).await;
    let c = ledger.context(&ids[1]).await.unwrap().unwrap();
    assert_eq!(c.context.agent.as_deref(), Some("http://agent-1"));
    assert_eq!(ledger.prune(5).await.unwrap(), 0);
    assert_eq!(ledger.prune(2).await.unwrap(), 1);
    let left: Vec<String> = ledger
        .contexts()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(left, vec![ids[2].clone(), ids[1].clone()]);
    assert!(ledger.context(&ids[0]).await.unwrap().is_none());
    assert_eq!(ledger.store().tasks(None).await.unwrap().len(), 2);
    assert!(ledger.store().versions(&ids[0]).await.unwrap().is_empty());
}

#[tokio::test]
async fn memory_ledger_keeps_agents_and_prunes_the_oldest_contexts() {
    agents_and_pruning(&Ledger::in_memory()).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_ledger_keeps_agents_and_prunes_the_oldest_contexts() {
    let dir = tempfile::tempdir().unwrap();
    agents_and_pruning(&Ledger::open(dir.path().join("l.db")).await.unwrap()).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_ledger_opened_by_two_at_once_migrates_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.db");
    let (a, b) = tokio::join!(Ledger::open(&path), Ledger::open(&path));
    let (a, b) = (a.unwrap(), b.unwrap());
    // Both write and see each other's records.
    let ids = three_contexts(&a).await;
    let t = agentwire_types::Task {
        id: agentwire_types::new_id(),
        context_id: ids[0].clone(),
        status: Some(agentwire_types::TaskStatus::new(TaskState::Working)),
        ..Default::default()
    };
    b.record_task(&t).await.unwrap();
    assert_eq!(a.store().tasks(None).await.unwrap().len(), 4);
    let store = SqliteStore::open(&path).await.unwrap();
    assert_eq!(store.schema_version().await.unwrap(), 3);
}

async fn generations_recorded(ledger: &Ledger) {
    let mut task = agentwire_types::Task {
        id: agentwire_types::new_id(),
        context_id: agentwire_types::new_id(),
        status: Some(agentwire_types::TaskStatus::new(TaskState::Working)),
        generation: 5,
        ..Default::default()
    };
    assert_eq!(ledger.record_task(&task).await.unwrap().generation, 5);
    // A snapshot without a generation (a 1.0 call) keeps the one recorded.
    task.generation = 0;
    ledger.record_task(&task).await.unwrap();
    assert_eq!(ledger.task(&task.id).await.unwrap().unwrap().generation, 5);
    // An update event moves it on.
    let mut e = agentwire_types::TaskStatusUpdateEvent::new(
        &task.id,
        &task.context_id,
        agentwire_types::TaskStatus::new(TaskState::Completed),
    );
    e.generation = 6;
    ledger
        .record_event(&agentwire_types::StreamResponse::from(e))
        .await
        .unwrap();
    let r = ledger.task(&task.id).await.unwrap().unwrap();
    assert_eq!((r.generation, r.state), (6, TaskState::Completed));
}

#[tokio::test]
async fn memory_ledger_records_generations() {
    generations_recorded(&Ledger::in_memory()).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_ledger_records_generations() {
    let dir = tempfile::tempdir().unwrap();
    generations_recorded(&Ledger::open(dir.path().join("l.db")).await.unwrap()).await;
}

/// A ledger written before generations (schema 2) gets the column, filled
/// from the snapshots that carry one.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_ledger_of_schema_2_is_migrated_with_generations() {
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    {
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(
                SqliteConnectOptions::new()
                    .filename(&path)
                    .create_if_missing(true),
            )
            .await
            .unwrap();
        for sql in &super::sqlite::MIGRATIONS[..2] {
            sqlx::raw_sql(sql).execute(&pool).await.unwrap();
        }
        sqlx::raw_sql("PRAGMA user_version = 2")
            .execute(&pool)
            .await
            .unwrap();
        for (id, body) in [
            (
                "old",
                r#"{"id":"old","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}"#,
            ),
            (
                "new",
                r#"{"id":"new","contextId":"c","status":{"state":"TASK_STATE_WORKING"},"generation":"7"}"#,
            ),
        ] {
            sqlx::query(
                "INSERT INTO tasks (id, context_id, state, body, created_at, updated_at) \
                 VALUES (?1, 'c', 'TASK_STATE_WORKING', ?2, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')",
            )
            .bind(id)
            .bind(body)
            .execute(&pool)
            .await
            .unwrap();
        }
        pool.close().await;
    }
    let store = SqliteStore::open(&path).await.unwrap();
    assert_eq!(store.schema_version().await.unwrap(), 3);
    let ledger = Ledger::with_store(std::sync::Arc::new(store));
    assert_eq!(ledger.task("old").await.unwrap().unwrap().generation, 0);
    assert_eq!(ledger.task("new").await.unwrap().unwrap().generation, 7);
}
