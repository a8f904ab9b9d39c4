//! The fast paths and the general path give the same events.
//!
//! With a store that answers at once (the in-memory store, which offers the
//! `ImmediateStore` capability), the runtime starts a plain new task, applies
//! an agent's updates and ends its run without a future of their own; with
//! any other store it takes the general path. The same agents are run here
//! over the in-memory store, over a wrapper of it that hides the capability,
//! and over SQLite, and what the callers receive must be the same, event for
//! event (ids and times aside).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agentwire_server::store::{
    LogSpan, MemoryStore, Owner, SqliteStore, StoredTask, TaskPage, TaskQuery, TaskStore,
    TaskUpdate, Updated,
};
use agentwire_server::types::{
    A2aError, A2aResult, AgentCard, Artifact, Message, SendMessageRequest, Task, TaskState,
};
use agentwire_server::{AgentExecutor, CallContext, RequestContext, RequestHandler, TaskUpdater};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::Value;

/// The in-memory store without its `ImmediateStore` capability: every call
/// goes through the general path.
struct Hidden(MemoryStore);

#[async_trait]
impl TaskStore for Hidden {
    async fn create(&self, owner: &Owner, task: Task) -> A2aResult<Option<LogSpan>> {
        self.0.create(owner, task).await
    }
    async fn update(&self, task_id: &str, update: TaskUpdate) -> A2aResult<Updated> {
        self.0.update(task_id, update).await
    }
    async fn get(&self, id: &str, history: Option<usize>) -> A2aResult<Option<StoredTask>> {
        self.0.get(id, history).await
    }
    async fn list(&self, owner: &Owner, query: &TaskQuery) -> A2aResult<TaskPage> {
        self.0.list(owner, query).await
    }
    async fn put_push_config(
        &self,
        config: &agentwire_server::store::StoredPushConfig,
    ) -> A2aResult<()> {
        self.0.put_push_config(config).await
    }
    async fn get_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> A2aResult<Option<agentwire_server::store::StoredPushConfig>> {
        self.0.get_push_config(task_id, id).await
    }
    async fn list_push_configs(
        &self,
        task_id: &str,
    ) -> A2aResult<Vec<agentwire_server::store::StoredPushConfig>> {
        self.0.list_push_configs(task_id).await
    }
    async fn delete_push_config(&self, task_id: &str, id: &str) -> A2aResult<bool> {
        self.0.delete_push_config(task_id, id).await
    }
}

/// One agent that behaves by the first word of the message.
struct Scripted;

impl AgentExecutor for Scripted {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        let text = ctx.text();
        match text.split_whitespace().next().unwrap_or_default() {
            "echo" => {
                task.start_work().await?;
                task.add_artifact(Artifact::text("echo", text.clone()).with_id("a1"))
                    .await?;
                task.complete().await
            }
            "chunks" => {
                task.start_work().await?;
                for (i, word) in ["one ", "two ", "three"].into_iter().enumerate() {
                    task.artifact_chunk(Artifact::text("story", word).with_id("a1"), i > 0, i == 2)
                        .await?;
                }
                task.complete_with("told").await
            }
            "ask" => task.require_input("which version?").await,
            "answer" => {
                task.progress("thinking").await?;
                task.complete_with(format!("you said {text}")).await
            }
            "reply" => task.reply_text("a plain message").await,
            "stop" => task.start_work().await,
            "error" => Err(A2aError::invalid_params("message", "the agent refuses")),
            "fail" => {
                task.start_work().await?;
                Err(A2aError::internal("the agent broke"))
            }
            _ => task.reject("unknown script").await,
        }
    }
}

fn handler(store: Arc<dyn TaskStore>) -> RequestHandler {
    RequestHandler::builder(AgentCard::default().with_streaming(true), Scripted)
        .store(store)
        .build()
}

fn send(text: &str, task_id: &str) -> SendMessageRequest {
    let mut message = Message::user_text(text).with_message_id(format!("m-{text}-{task_id}"));
    message.task_id = task_id.to_owned();
    SendMessageRequest {
        message: Some(message),
        ..Default::default()
    }
}

/// Ids and times replaced by their order of first appearance, so that runs
/// compare by structure.
#[derive(Default)]
struct Normalizer(HashMap<String, usize>);

impl Normalizer {
    fn apply(&mut self, v: &mut Value) {
        match v {
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    let is_id = matches!(k.as_str(), "id" | "taskId" | "contextId" | "messageId");
                    if let (true, Value::String(s)) = (is_id, &mut *v) {
                        let n = self.0.len();
                        let n = *self.0.entry(s.clone()).or_insert(n);
                        *s = format!("<id {n}>");
                    } else if k == "timestamp" {
                        *v = Value::String("<time>".into());
                    } else {
                        self.apply(v);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.apply(v)),
            _ => {}
        }
    }
}

fn json<T: serde::Serialize>(n: &mut Normalizer, value: &T) -> Value {
    let mut v = serde_json::to_value(value).expect("serializable");
    n.apply(&mut v);
    v
}

fn error(e: &A2aError) -> Value {
    serde_json::json!({ "error": format!("{:?}", e.kind), "message": e.message })
}

/// What callers see of the scripts: blocking sends, streaming sends, a
/// continued task and the stored task afterwards.
async fn transcript(h: &RequestHandler) -> Vec<Value> {
    let ctx = CallContext::v1();
    let mut n = Normalizer::default();
    let mut out = Vec::new();
    let scripts = [
        "echo hi", "chunks", "reply", "stop", "error", "fail", "other",
    ];
    for script in scripts {
        // Blocking.
        let answer = h.send_message(&ctx, send(script, "")).await;
        out.push(match &answer {
            Ok(r) => json(&mut n, r),
            Err(e) => error(e),
        });
        if let Some(id) = answer
            .as_ref()
            .ok()
            .and_then(|r| Some(r.task()?.id.clone()))
        {
            let stored = h.store().get(&id, None).await.unwrap();
            out.push(json(&mut n, &stored.map(|s| s.task)));
        }
        // Streaming.
        match h.send_streaming_message(&ctx, send(script, "")).await {
            Ok(stream) => {
                let events: Vec<_> =
                    tokio::time::timeout(Duration::from_secs(10), stream.collect())
                        .await
                        .expect("the stream ends");
                for ev in events {
                    out.push(match ev {
                        Ok(ev) => json(&mut n, &ev),
                        Err(e) => error(&e),
                    });
                }
            }
            Err(e) => out.push(error(&e)),
        }
    }
    // A multi-turn task: interrupted, then continued (blocking and streaming).
    for streaming in [false, true] {
        let first = h.send_message(&ctx, send("ask", "")).await.unwrap();
        let task = first.task().expect("a task").clone();
        assert_eq!(task.state(), TaskState::InputRequired);
        out.push(json(&mut n, &first));
        if streaming {
            let stream = h
                .send_streaming_message(&ctx, send("answer 22", &task.id))
                .await
                .unwrap();
            let events: Vec<_> = tokio::time::timeout(Duration::from_secs(10), stream.collect())
                .await
                .expect("the stream ends");
            for ev in events {
                out.push(json(&mut n, &ev.unwrap()));
            }
        } else {
            let second = h.send_message(&ctx, send("answer 22", &task.id)).await;
            out.push(json(&mut n, &second.unwrap()));
        }
        let stored = h.store().get(&task.id, None).await.unwrap();
        out.push(json(&mut n, &stored.map(|s| s.task)));
    }
    out
}

#[tokio::test]
async fn fast_and_general_paths_give_the_same_events() {
    let memory: Arc<dyn TaskStore> = Arc::new(MemoryStore::default());
    assert!(memory.immediate().is_some(), "the fast paths are taken");
    let hidden: Arc<dyn TaskStore> = Arc::new(Hidden(MemoryStore::default()));
    assert!(hidden.immediate().is_none(), "the general path is taken");
    let sqlite: Arc<dyn TaskStore> = Arc::new(SqliteStore::in_memory().await.unwrap());

    let fast = transcript(&handler(memory)).await;
    assert!(fast.len() > 30, "the scripts ran: {fast:#?}");
    let general = transcript(&handler(hidden)).await;
    assert_eq!(
        fast, general,
        "memory store with and without the capability"
    );
    let sql = transcript(&handler(sqlite)).await;
    assert_eq!(fast, sql, "memory store and SQLite");
}
