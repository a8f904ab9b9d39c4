//! The health endpoints: `/healthz` answers while the process does,
//! `/readyz` answers 200 while the task store answers and 503 (with the
//! reason) when it does not, and the readiness follows the store back.

#[macro_use]
#[allow(unused_macros)]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentwire_server::A2aServer;
use agentwire_server::store::{
    LogSpan, MemoryStore, Owner, StorageFault, StoredPushConfig, StoredTask, TaskPage, TaskQuery,
    TaskStore, TaskUpdate, Updated, storage_error,
};
use agentwire_server::types::{A2aResult, Task};
use async_trait::async_trait;
use common::agents::{Echo, echo_card};
use serde_json::Value;

/// The in-memory store, whose reads fail as a lost database connection
/// does while `down` is set.
struct Unreachable {
    store: MemoryStore,
    down: Arc<AtomicBool>,
}

impl Unreachable {
    fn check(&self) -> A2aResult<()> {
        if self.down.load(Ordering::SeqCst) {
            return Err(storage_error(
                StorageFault::Io,
                "the connection to the database was lost",
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl TaskStore for Unreachable {
    async fn create(&self, owner: &Owner, task: Task) -> A2aResult<Option<LogSpan>> {
        self.check()?;
        self.store.create(owner, task).await
    }
    async fn update(&self, task_id: &str, update: TaskUpdate) -> A2aResult<Updated> {
        self.check()?;
        self.store.update(task_id, update).await
    }
    async fn get(&self, id: &str, history: Option<usize>) -> A2aResult<Option<StoredTask>> {
        self.check()?;
        self.store.get(id, history).await
    }
    async fn list(&self, owner: &Owner, query: &TaskQuery) -> A2aResult<TaskPage> {
        self.check()?;
        self.store.list(owner, query).await
    }
    async fn put_push_config(&self, config: &StoredPushConfig) -> A2aResult<()> {
        self.store.put_push_config(config).await
    }
    async fn get_push_config(
        &self,
        task_id: &str,
        id: &str,
    ) -> A2aResult<Option<StoredPushConfig>> {
        self.store.get_push_config(task_id, id).await
    }
    async fn list_push_configs(&self, task_id: &str) -> A2aResult<Vec<StoredPushConfig>> {
        self.store.list_push_configs(task_id).await
    }
    async fn delete_push_config(&self, task_id: &str, id: &str) -> A2aResult<bool> {
        self.store.delete_push_config(task_id, id).await
    }
}

async fn get(url: &str) -> (u16, Value) {
    let r = reqwest::get(url).await.expect("an answer");
    let status = r.status().as_u16();
    assert_eq!(
        r.headers()
            .get("cache-control")
            .and_then(|v| v.to_str().ok()),
        Some("no-store"),
        "{url}"
    );
    (status, r.json().await.expect("a JSON body"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_and_readyz_follows_the_store() {
    agentwire_client::install_crypto_provider();
    let down = Arc::new(AtomicBool::new(false));
    let store = Unreachable {
        store: MemoryStore::default(),
        down: Arc::clone(&down),
    };
    let server =
        common::start_server(A2aServer::new(echo_card(), Echo).store(Arc::new(store))).await;
    let base = server.base_url();

    let (status, body) = get(&format!("{base}/healthz")).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("ok")),
        "{body}"
    );
    let (status, body) = get(&format!("{base}/readyz")).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("ready")),
        "{body}"
    );

    // The store cannot be reached: not ready, and why; alive all the same.
    down.store(true, Ordering::SeqCst);
    let (status, body) = get(&format!("{base}/readyz")).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "unavailable", "{body}");
    let reason = body["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("task store") && reason.contains("connection to the database was lost"),
        "{body}"
    );
    let (status, body) = get(&format!("{base}/healthz")).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("ok")),
        "{body}"
    );

    // Back: ready again.
    down.store(false, Ordering::SeqCst);
    let (status, body) = get(&format!("{base}/readyz")).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("ready")),
        "{body}"
    );
}
