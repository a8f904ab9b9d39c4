//! The in-memory ledger store.

use std::sync::Mutex;

use agentwire_types::Message;
use chrono::{DateTime, Utc};

use super::{ArtifactVersion, ContextRecord, LedgerError, LedgerResult, LedgerStore, TaskRecord};

#[derive(Default)]
struct Inner {
    contexts: Vec<ContextRecord>,
    messages: Vec<(String, Message)>,
    tasks: Vec<TaskRecord>,
    versions: Vec<ArtifactVersion>,
}

/// Keeps the ledger in memory (insertion-ordered vectors: a ledger holds
/// one application's conversations, not a server's traffic).
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> LedgerResult<std::sync::MutexGuard<'_, Inner>> {
        self.inner
            .lock()
            .map_err(|_| LedgerError::Storage("ledger lock poisoned".into()))
    }
}

#[async_trait::async_trait]
impl LedgerStore for MemoryStore {
    async fn touch_context(&self, id: &str, at: DateTime<Utc>) -> LedgerResult<()> {
        let mut g = self.lock()?;
        match g.contexts.iter_mut().find(|c| c.id == id) {
            Some(c) => c.updated_at = at,
            None => g.contexts.push(ContextRecord {
                id: id.to_owned(),
                agent: None,
                created_at: at,
                updated_at: at,
            }),
        }
        Ok(())
    }

    async fn context(&self, id: &str) -> LedgerResult<Option<ContextRecord>> {
        Ok(self.lock()?.contexts.iter().find(|c| c.id == id).cloned())
    }

    async fn contexts(&self) -> LedgerResult<Vec<ContextRecord>> {
        let mut v = self.lock()?.contexts.clone();
        v.reverse();
        v.sort_by_key(|c| std::cmp::Reverse(c.updated_at));
        Ok(v)
    }

    async fn add_message(
        &self,
        context_id: &str,
        message: &Message,
        _at: DateTime<Utc>,
    ) -> LedgerResult<()> {
        let mut g = self.lock()?;
        let existing = g.messages.iter_mut().find(|(c, m)| {
            c == context_id && !message.message_id.is_empty() && m.message_id == message.message_id
        });
        match existing {
            Some((_, m)) => *m = message.clone(),
            None => g.messages.push((context_id.to_owned(), message.clone())),
        }
        Ok(())
    }

    async fn messages(&self, context_id: &str) -> LedgerResult<Vec<Message>> {
        Ok(self
            .lock()?
            .messages
            .iter()
            .filter(|(c, _)| c == context_id)
            .map(|(_, m)| m.clone())
            .collect())
    }

    async fn put_task(&self, record: &TaskRecord) -> LedgerResult<()> {
        let mut g = self.lock()?;
        match g.tasks.iter_mut().find(|t| t.id == record.id) {
            Some(t) => {
                let created = t.created_at;
                let refines = t.refines_artifact_id.take();
                let generation = t.generation;
                *t = record.clone();
                t.created_at = created;
                t.generation = t.generation.max(generation);
                if t.refines_artifact_id.is_none() {
                    t.refines_artifact_id = refines;
                }
            }
            None => g.tasks.push(record.clone()),
        }
        Ok(())
    }

    async fn task(&self, id: &str) -> LedgerResult<Option<TaskRecord>> {
        Ok(self.lock()?.tasks.iter().find(|t| t.id == id).cloned())
    }

    async fn tasks(&self, context_id: Option<&str>) -> LedgerResult<Vec<TaskRecord>> {
        Ok(self
            .lock()?
            .tasks
            .iter()
            .filter(|t| context_id.is_none_or(|c| t.context_id == c))
            .cloned()
            .collect())
    }

    async fn put_version(&self, version: &ArtifactVersion) -> LedgerResult<()> {
        let mut g = self.lock()?;
        match g
            .versions
            .iter_mut()
            .find(|v| v.artifact_id == version.artifact_id)
        {
            Some(v) => {
                v.artifact = version.artifact.clone();
                v.artifact_name.clone_from(&version.artifact_name);
            }
            None => g.versions.push(version.clone()),
        }
        Ok(())
    }

    async fn version(&self, artifact_id: &str) -> LedgerResult<Option<ArtifactVersion>> {
        Ok(self
            .lock()?
            .versions
            .iter()
            .find(|v| v.artifact_id == artifact_id)
            .cloned())
    }

    async fn versions(&self, context_id: &str) -> LedgerResult<Vec<ArtifactVersion>> {
        Ok(self
            .lock()?
            .versions
            .iter()
            .filter(|v| v.context_id == context_id)
            .cloned()
            .collect())
    }

    async fn set_accepted(&self, artifact_id: &str) -> LedgerResult<()> {
        let mut g = self.lock()?;
        let Some((ctx, name)) = g
            .versions
            .iter()
            .find(|v| v.artifact_id == artifact_id)
            .map(|v| (v.context_id.clone(), v.artifact_name.clone()))
        else {
            return Err(LedgerError::UnknownArtifact(artifact_id.to_owned()));
        };
        for v in g
            .versions
            .iter_mut()
            .filter(|v| v.context_id == ctx && v.artifact_name == name)
        {
            v.accepted_by_user = v.artifact_id == artifact_id;
        }
        Ok(())
    }

    async fn set_context_agent(&self, id: &str, agent: &str) -> LedgerResult<()> {
        let mut g = self.lock()?;
        if let Some(c) = g.contexts.iter_mut().find(|c| c.id == id) {
            c.agent = Some(agent.to_owned());
        }
        Ok(())
    }

    async fn retain_recent_contexts(&self, keep: usize) -> LedgerResult<usize> {
        let mut g = self.lock()?;
        if g.contexts.len() <= keep {
            return Ok(0);
        }
        // Most recent first, as `contexts` orders them.
        let mut order: Vec<(usize, DateTime<Utc>)> = g
            .contexts
            .iter()
            .enumerate()
            .map(|(i, c)| (i, c.updated_at))
            .collect();
        order.sort_by_key(|(i, at)| (std::cmp::Reverse(*at), std::cmp::Reverse(*i)));
        let gone: Vec<String> = order
            .iter()
            .skip(keep)
            .map(|(i, _)| g.contexts[*i].id.clone())
            .collect();
        g.contexts.retain(|c| !gone.contains(&c.id));
        g.messages.retain(|(c, _)| !gone.contains(c));
        g.tasks.retain(|t| !gone.contains(&t.context_id));
        g.versions.retain(|v| !gone.contains(&v.context_id));
        Ok(gone.len())
    }
}
