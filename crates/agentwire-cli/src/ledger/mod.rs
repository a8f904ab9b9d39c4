//! The `a2a` command's ledger: what the one-shot commands learn from the
//! agents they call (contexts and the agent of each, the tasks of a
//! context and their states, artifacts and their version chains, the
//! version the user accepted), kept between runs in an SQLite file.
//!
//! The records and their rules (how a new artifact chains to the version
//! it refines, what "accepted" means) are the client library's
//! [`agentwire_client::ledger::Ledger`], the one `a2a chat`, `a2a mcp` and
//! `a2a inspect` keep too; this module only opens the file, records into
//! it without ever failing the command (a ledger that cannot be written is
//! a warning), bounds it, and turns the names people type (`last`, a short
//! id) into ids. The commands that read it are in [`cmd`].
//!
//! The ledger is an extension of the CLI specification's stateless
//! baseline (SPEC 6.3): nothing is ever replayed on the caller's behalf.
//! A recorded id is used only when the caller names it (`--context-id
//! last`, a short id), and `--no-ledger` turns the recording off.

pub mod cmd;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentwire_client::EventStream;
use agentwire_client::ledger::{
    ArtifactVersion, ContextRecord, Ledger, LedgerError, LedgerResult, LedgerStore, MemoryStore,
    TaskRecord,
};
use agentwire_types::{Message, SendMessageResponse, StreamResponse, Task, stream_response};
use chrono::{DateTime, Utc};
use clap::Args;
use futures::StreamExt;

use crate::error::CliError;
use crate::{Apply, Globals};

/// The most contexts the ledger keeps by default; the least recently
/// updated ones (with their tasks and versions) are forgotten first.
pub const DEFAULT_MAX_CONTEXTS: usize = 1000;

/// The ledger's options (send, the task commands, `a2a ledger`).
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Ledger options")]
pub struct LedgerOpts {
    /// The ledger (SQLite file) recording contexts, tasks and artifact versions [default: ledger.db in the user's data directory].
    #[arg(long, global = true, env = "A2ACLI_LEDGER", value_name = "PATH")]
    pub ledger: Option<PathBuf>,

    /// Record nothing and read no ledger (`--context-id last` and short ids then do not resolve).
    #[arg(long, global = true, env = "A2ACLI_NO_LEDGER")]
    pub no_ledger: bool,

    /// The most contexts the ledger keeps; the least recently updated are forgotten first.
    #[arg(long, global = true, env = "A2ACLI_LEDGER_MAX_CONTEXTS", default_value_t = DEFAULT_MAX_CONTEXTS, value_name = "N")]
    pub ledger_max_contexts: usize,
}

impl Apply for LedgerOpts {
    fn apply(&self, g: &mut Globals) {
        g.ledger.clone_from(&self.ledger);
        g.no_ledger = self.no_ledger;
        g.ledger_max_contexts = self.ledger_max_contexts;
    }
}

/// The ledger file of these settings: `--ledger`, else the default in the
/// user's data directory (the one `a2a mcp` uses too).
pub fn path(g: &Globals) -> Option<PathBuf> {
    g.ledger.clone().or_else(crate::mcp::default_ledger)
}

/// Opens the ledger (creating the file and its directory). `Ok(None)` when
/// it is turned off.
pub async fn open(g: &Globals) -> Result<Option<(Ledger, PathBuf)>, CliError> {
    if g.no_ledger {
        return Ok(None);
    }
    let Some(path) = path(g) else {
        return Err(CliError::usage("no place for the ledger: HOME is not set")
            .with_hint("pass --ledger PATH, or --no-ledger"));
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            CliError::internal(format!("cannot create {}: {e}", dir.display()))
                .with_hint("pass --ledger PATH, or --no-ledger")
        })?;
    }
    let ledger = Ledger::open(&path).await.map_err(|e| {
        CliError::internal(format!("cannot open the ledger {}: {e}", path.display()))
            .with_hint("pass --ledger PATH, or --no-ledger")
    })?;
    Ok(Some((ledger, path)))
}

/// A ledger error as the tool reports it.
pub fn err(e: LedgerError) -> CliError {
    match e {
        LedgerError::UnknownTask(id) => CliError::usage(format!("the ledger has no task {id}"))
            .with_hint("list the recorded tasks with `a2a ledger tasks`"),
        LedgerError::UnknownArtifact(id) => {
            CliError::usage(format!("the ledger has no artifact version {id}"))
                .with_hint("list the recorded versions with `a2a ledger artifacts`")
        }
        LedgerError::InvalidState(m) => CliError::usage(m),
        other => CliError::internal(other.to_string()),
    }
}

// ----- short ids ---------------------------------------------------------

/// The short form of an id, to tell ids apart at a glance. The ids this
/// project (and most agents) assign are time-ordered UUIDs (v7), whose
/// first characters are the same for ids made in the same minute; their
/// last 8 hex digits are random, so the short form of a UUID is its tail.
/// Another id is shown whole up to 12 characters, else by its last 8.
pub fn short_id(id: &str) -> &str {
    let n = id.len();
    if n <= 12 || !id.is_char_boundary(n - 8) {
        return id;
    }
    &id[n - 8..]
}

/// How an id matches what someone typed: the whole id, or (at least 4
/// characters) its start or its end, ignoring case.
fn matches(id: &str, typed: &str) -> bool {
    if id == typed {
        return true;
    }
    if typed.len() < 4 {
        return false;
    }
    let (id, typed) = (id.to_ascii_lowercase(), typed.to_ascii_lowercase());
    id.ends_with(&typed) || id.starts_with(&typed)
}

/// The one id among `ids` that `typed` names; an error when several do.
fn pick<'a>(
    what: &str,
    typed: &str,
    ids: impl Iterator<Item = &'a str>,
) -> Result<Option<&'a str>, CliError> {
    let all: Vec<&str> = ids.collect();
    if let Some(exact) = all.iter().find(|id| **id == typed) {
        return Ok(Some(exact));
    }
    let found: Vec<&str> = all.into_iter().filter(|id| matches(id, typed)).collect();
    match found.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one)),
        many => Err(CliError::usage(format!(
            "{typed:?} names {} {what}s in the ledger: {}",
            many.len(),
            many.iter().take(5).copied().collect::<Vec<_>>().join(", ")
        ))
        .with_hint("give more characters of the id")),
    }
}

/// The context a reference names: `last` (the most recently updated one;
/// of `agent` when given), a whole id, or a short id (start or end).
pub async fn find_context(
    ledger: &Ledger,
    typed: &str,
    agent: Option<&str>,
) -> Result<Option<ContextRecord>, CliError> {
    let contexts = ledger.contexts().await.map_err(err)?;
    if typed.eq_ignore_ascii_case("last") {
        let last = contexts
            .into_iter()
            .find(|c| agent.is_none_or(|a| c.agent.as_deref() == Some(a)));
        return match last {
            Some(c) => Ok(Some(c)),
            None => Err(CliError::usage(match agent {
                Some(a) => format!("the ledger has no context with the agent {a}"),
                None => "the ledger has no context yet".to_owned(),
            })
            .with_hint("list the recorded contexts with `a2a ledger contexts`")),
        };
    }
    let id = pick("context", typed, contexts.iter().map(|c| c.id.as_str()))?.map(str::to_owned);
    Ok(id.and_then(|id| contexts.into_iter().find(|c| c.id == id)))
}

/// The task a reference names: `last` (the most recently updated one), a
/// whole id or a short id; an error when the ledger has none.
pub async fn find_task(ledger: &Ledger, typed: &str) -> Result<TaskRecord, CliError> {
    let tasks = ledger.store().tasks(None).await.map_err(err)?;
    let unknown = || {
        CliError::usage(format!("the ledger has no task {typed}"))
            .with_hint("list the recorded tasks with `a2a ledger tasks`")
    };
    if typed.eq_ignore_ascii_case("last") {
        return tasks
            .into_iter()
            .max_by_key(|t| t.updated_at)
            .ok_or_else(unknown);
    }
    let id = pick("task", typed, tasks.iter().map(|t| t.id.as_str()))?
        .map(str::to_owned)
        .ok_or_else(unknown)?;
    tasks.into_iter().find(|t| t.id == id).ok_or_else(unknown)
}

/// Resolves `--context-id` (and `--task-id`) of a command that sends: a
/// recorded context named by `last` or a short id becomes its id, and
/// lends its agent when no `-a` was given. An id the ledger does not know
/// is sent as typed.
pub async fn resolve_ids(g: &Globals) -> Result<Globals, CliError> {
    let mut g = g.clone();
    let wants = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.trim().is_empty());
    if !wants(&g.context_id) && !wants(&g.task_id) {
        return Ok(g);
    }
    let is_last = |v: &Option<String>| {
        v.as_deref()
            .is_some_and(|s| s.trim().eq_ignore_ascii_case("last"))
    };
    let needed = is_last(&g.context_id) || is_last(&g.task_id);
    let ledger = match open(&g).await {
        Ok(Some((l, _))) => l,
        Ok(None) if needed => {
            return Err(CliError::usage("`last` needs the ledger")
                .with_hint("drop --no-ledger (or A2ACLI_NO_LEDGER), or give the id itself"));
        }
        Ok(None) => return Ok(g),
        Err(e) if needed => return Err(e),
        Err(e) => {
            warn_once(&e.message);
            return Ok(g);
        }
    };
    if let Some(typed) = g.context_id.clone().filter(|s| !s.trim().is_empty())
        && let Some(c) = find_context(&ledger, typed.trim(), g.agent_card.as_deref()).await?
    {
        if c.id != typed {
            tracing::debug!("context {typed} is {} in the ledger", c.id);
        }
        if g.agent_card.is_none() {
            g.agent_card.clone_from(&c.agent);
            if let Some(a) = &g.agent_card {
                crate::error::set_agent(a);
            }
        }
        g.context_id = Some(c.id);
    }
    if let Some(typed) = g.task_id.clone().filter(|s| !s.trim().is_empty()) {
        let known = if typed.eq_ignore_ascii_case("last") {
            Some(find_task(&ledger, "last").await?)
        } else {
            find_task(&ledger, typed.trim()).await.ok()
        };
        if let Some(t) = known {
            if g.agent_card.is_none() {
                let c = ledger.store().context(&t.context_id).await.map_err(err)?;
                g.agent_card = c.and_then(|c| c.agent);
                if let Some(a) = &g.agent_card {
                    crate::error::set_agent(a);
                }
            }
            g.task_id = Some(t.id);
        }
    }
    Ok(g)
}

/// The ids of `--reference-task`: `last` and short ids the ledger knows
/// become their task's id; others are sent as typed.
pub async fn resolve_references(g: &Globals, refs: &[String]) -> Result<Vec<String>, CliError> {
    if refs.is_empty() || g.no_ledger {
        return Ok(refs.to_vec());
    }
    let ledger = match open(g).await {
        Ok(Some((l, _))) => l,
        Ok(None) => return Ok(refs.to_vec()),
        Err(e) => {
            warn_once(&e.message);
            return Ok(refs.to_vec());
        }
    };
    let mut out = Vec::new();
    for r in refs {
        let r = r.trim();
        if r.eq_ignore_ascii_case("last") {
            out.push(find_task(&ledger, "last").await?.id);
        } else {
            out.push(
                find_task(&ledger, r)
                    .await
                    .map_or_else(|_| r.to_owned(), |t| t.id),
            );
        }
    }
    Ok(out)
}

/// Resolves the task id a task command was given (`last`, a short id from
/// the ledger), lending the task's agent when no `-a` was given.
pub async fn resolve_task(g: &Globals, id: String) -> Result<(Globals, String), CliError> {
    let mut g = g.clone();
    g.task_id = Some(id.clone());
    g.context_id = None;
    let mut r = resolve_ids(&g).await?;
    let id = r.task_id.take().unwrap_or(id);
    r.task_id = Some(id.clone());
    Ok((r, id))
}

// ----- recording ---------------------------------------------------------

/// Warns once per process that the ledger could not be written.
fn warn_once(what: &str) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        eprintln!("warning: the ledger is not recording: {what}");
    }
}

/// Records what a command learns, without ever failing it.
#[derive(Clone)]
pub struct Recorder {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    ledger: Ledger,
    agent: String,
    max_contexts: usize,
}

impl Recorder {
    /// A recorder for the commands of these settings talking to `agent`
    /// (the reference they were given; empty when the command does not
    /// know it, e.g. `a2a webhook` without `-a`: the contexts' agents are
    /// then left as recorded); records nothing with `--no-ledger`, or
    /// (with a warning) when the ledger cannot be opened.
    pub async fn open(g: &Globals, agent: &str) -> Self {
        let inner = match open(g).await {
            Ok(Some((ledger, _))) => Some(Arc::new(Inner {
                ledger,
                agent: agent.to_owned(),
                max_contexts: g.ledger_max_contexts.max(1),
            })),
            Ok(None) => None,
            Err(e) => {
                warn_once(&e.message);
                None
            }
        };
        Self { inner }
    }

    fn failed(e: LedgerError) {
        warn_once(&e.to_string());
    }

    /// Notes the agent of a context and keeps the ledger bounded.
    async fn context(inner: &Inner, context_id: &str) -> Result<(), LedgerError> {
        if context_id.is_empty() {
            return Ok(());
        }
        if !inner.agent.is_empty() {
            inner.ledger.set_agent(context_id, &inner.agent).await?;
        }
        inner.ledger.prune(inner.max_contexts).await?;
        Ok(())
    }

    /// Records a message sent and the agent's answer.
    pub async fn exchange(&self, sent: &Message, response: &SendMessageResponse) {
        let Some(inner) = &self.inner else { return };
        let ctx = match response.task() {
            Some(t) => t.context_id.clone(),
            None => response
                .message()
                .map(|m| m.context_id.clone())
                .filter(|c| !c.is_empty())
                .unwrap_or_else(|| sent.context_id.clone()),
        };
        let done = async {
            inner.ledger.record_exchange(sent, response).await?;
            Self::context(inner, &ctx).await
        };
        if let Err(e) = done.await {
            Self::failed(e);
        }
    }

    /// Records a task snapshot (`task get`, `task cancel`...).
    pub async fn task(&self, task: &Task) {
        let Some(inner) = &self.inner else { return };
        let done = async {
            inner.ledger.record_task(task).await?;
            Self::context(inner, &task.context_id).await
        };
        if let Err(e) = done.await {
            Self::failed(e);
        }
    }

    /// Updates the tasks the ledger already holds (`task list`: the agent
    /// may list far more than this client ever sent).
    pub async fn known_tasks<'a>(&self, tasks: impl Iterator<Item = &'a Task>) {
        let Some(inner) = &self.inner else { return };
        for t in tasks {
            match inner.ledger.task(&t.id).await {
                Ok(Some(_)) => {
                    if let Err(e) = inner.ledger.record_task(t).await {
                        return Self::failed(e);
                    }
                }
                Ok(None) => {}
                Err(e) => return Self::failed(e),
            }
        }
    }

    /// Records one event received outside a stream the command opened (a
    /// push notification `a2a webhook` accepted).
    pub async fn event(&self, event: &StreamResponse) {
        let Some(inner) = &self.inner else { return };
        let done = async {
            inner.ledger.record_event(event).await?;
            let ctx = match context_of(event) {
                "" => match event.task_id() {
                    Some(t) => inner
                        .ledger
                        .task(t)
                        .await?
                        .map(|r| r.context_id)
                        .unwrap_or_default(),
                    None => String::new(),
                },
                c => c.to_owned(),
            };
            Self::context(inner, &ctx).await
        };
        if let Err(e) = done.await {
            Self::failed(e);
        }
    }

    /// Records each event of a stream as it passes (and `sent`, once the
    /// context is known); never changes the stream.
    pub fn wrap(&self, events: EventStream, sent: Option<Message>) -> EventStream {
        let Some(inner) = self.inner.clone() else {
            return events;
        };
        let state = Arc::new(tokio::sync::Mutex::new((sent, String::new())));
        events.wrap(move |events| {
            events.then(move |item| {
                let inner = inner.clone();
                let state = state.clone();
                async move {
                    if let Ok(ev) = &item {
                        let mut st = state.lock().await;
                        let ctx = context_of(ev);
                        let done = async {
                            if !ctx.is_empty()
                                && let Some(m) = st.0.take()
                            {
                                inner.ledger.record_message_sent(&m, ctx).await?;
                            }
                            inner.ledger.record_event(ev).await?;
                            if !ctx.is_empty() && st.1 != ctx {
                                Self::context(&inner, ctx).await?;
                                st.1 = ctx.to_owned();
                            }
                            Ok::<(), LedgerError>(())
                        };
                        if let Err(e) = done.await {
                            Self::failed(e);
                        }
                    }
                    item
                }
            })
        })
    }
}

// ----- sessions (chat, inspect, demo) -------------------------------------

/// The ledger of a session (`a2a chat`, `a2a inspect`, `a2a demo`): kept
/// in memory for the session's own views (its versions, its pending
/// tasks), and copied into the ledger file like every other command's
/// records (unless `--no-ledger`). New contexts are recorded with `agent`
/// (none when empty).
pub async fn session(g: &Globals, agent: &str) -> Ledger {
    session_with_agent(g, agent).await.0
}

/// [`session`], with the handle that changes the agent new contexts are
/// recorded with (`a2a inspect` connects to one agent, then another).
pub async fn session_with_agent(g: &Globals, agent: &str) -> (Ledger, SessionAgent) {
    let file = match open(g).await {
        Ok(Some((l, _))) => Some(l),
        Ok(None) => None,
        Err(e) => {
            warn_once(&e.message);
            None
        }
    };
    let memory: Arc<dyn LedgerStore> = Arc::new(MemoryStore::new());
    let slot = SessionAgent(Arc::new(std::sync::Mutex::new(agent.to_owned())));
    let ledger = match file {
        None => Ledger::with_store(memory),
        Some(file) => Ledger::with_store(Arc::new(Tee {
            memory,
            file: file.store().clone(),
            agent: slot.clone(),
            max_contexts: g.ledger_max_contexts.max(1),
        })),
    };
    (ledger, slot)
}

/// The agent a session's new contexts are recorded with.
#[derive(Clone)]
pub struct SessionAgent(Arc<std::sync::Mutex<String>>);

impl SessionAgent {
    /// Records the contexts opened from now on with `agent`.
    pub fn set(&self, agent: &str) {
        let mut a = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        agent.clone_into(&mut a);
    }

    fn get(&self) -> String {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// Reads from memory; writes to memory, then to the file (a failure there
/// is a warning).
struct Tee {
    memory: Arc<dyn LedgerStore>,
    file: Arc<dyn LedgerStore>,
    agent: SessionAgent,
    max_contexts: usize,
}

impl Tee {
    fn copy(r: LedgerResult<()>) {
        if let Err(e) = r {
            Recorder::failed(e);
        }
    }
}

#[async_trait::async_trait]
impl LedgerStore for Tee {
    async fn touch_context(&self, id: &str, at: DateTime<Utc>) -> LedgerResult<()> {
        self.memory.touch_context(id, at).await?;
        let copy = async {
            let new = self.file.context(id).await?.is_none();
            self.file.touch_context(id, at).await?;
            if new {
                let agent = self.agent.get();
                if !agent.is_empty() {
                    self.file.set_context_agent(id, &agent).await?;
                }
                self.file.retain_recent_contexts(self.max_contexts).await?;
            }
            Ok::<(), LedgerError>(())
        };
        Self::copy(copy.await);
        Ok(())
    }
    async fn context(&self, id: &str) -> LedgerResult<Option<ContextRecord>> {
        self.memory.context(id).await
    }
    async fn contexts(&self) -> LedgerResult<Vec<ContextRecord>> {
        self.memory.contexts().await
    }
    async fn add_message(
        &self,
        context_id: &str,
        message: &Message,
        at: DateTime<Utc>,
    ) -> LedgerResult<()> {
        self.memory.add_message(context_id, message, at).await?;
        Self::copy(self.file.add_message(context_id, message, at).await);
        Ok(())
    }
    async fn messages(&self, context_id: &str) -> LedgerResult<Vec<Message>> {
        self.memory.messages(context_id).await
    }
    async fn put_task(&self, record: &TaskRecord) -> LedgerResult<()> {
        self.memory.put_task(record).await?;
        Self::copy(self.file.put_task(record).await);
        Ok(())
    }
    async fn task(&self, id: &str) -> LedgerResult<Option<TaskRecord>> {
        self.memory.task(id).await
    }
    async fn tasks(&self, context_id: Option<&str>) -> LedgerResult<Vec<TaskRecord>> {
        self.memory.tasks(context_id).await
    }
    async fn put_version(&self, version: &ArtifactVersion) -> LedgerResult<()> {
        self.memory.put_version(version).await?;
        Self::copy(self.file.put_version(version).await);
        Ok(())
    }
    async fn version(&self, artifact_id: &str) -> LedgerResult<Option<ArtifactVersion>> {
        self.memory.version(artifact_id).await
    }
    async fn versions(&self, context_id: &str) -> LedgerResult<Vec<ArtifactVersion>> {
        self.memory.versions(context_id).await
    }
    async fn set_accepted(&self, artifact_id: &str) -> LedgerResult<()> {
        self.memory.set_accepted(artifact_id).await?;
        Self::copy(self.file.set_accepted(artifact_id).await);
        Ok(())
    }
    async fn set_context_agent(&self, id: &str, agent: &str) -> LedgerResult<()> {
        self.memory.set_context_agent(id, agent).await?;
        Self::copy(self.file.set_context_agent(id, agent).await);
        Ok(())
    }
    async fn retain_recent_contexts(&self, keep: usize) -> LedgerResult<usize> {
        self.memory.retain_recent_contexts(keep).await
    }
}

/// The context id an event carries.
fn context_of(ev: &StreamResponse) -> &str {
    match &ev.payload {
        Some(stream_response::Payload::Task(t)) => &t.context_id,
        Some(stream_response::Payload::Message(m)) => &m.context_id,
        Some(stream_response::Payload::StatusUpdate(e)) => &e.context_id,
        Some(stream_response::Payload::ArtifactUpdate(e)) => &e.context_id,
        None => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_ids_of_time_ordered_ids_differ() {
        // Two UUIDv7 made in the same millisecond share their start.
        let a = agentwire_types::new_id();
        let b = agentwire_types::new_id();
        assert_eq!(a[..8], b[..8]);
        assert_ne!(short_id(&a), short_id(&b));
        assert_eq!(short_id(&a), &a[a.len() - 8..]);
        assert_eq!(short_id("task-1"), "task-1");
        assert_eq!(short_id("task-boat-gen-123"), "-gen-123");
    }

    #[test]
    fn picks_by_whole_start_or_end() {
        let ids = [
            "0193aaaa-0000-7000-8000-00000000beef",
            "0193aaaa-0000-7000-8000-00000000cafe",
        ];
        let p = |t: &str| pick("task", t, ids.iter().copied());
        assert_eq!(p("beef").unwrap(), Some(ids[0]));
        assert_eq!(p("CAFE").unwrap(), Some(ids[1]));
        assert_eq!(p(ids[1]).unwrap(), Some(ids[1]));
        assert_eq!(p("dead").unwrap(), None);
        assert_eq!(p("bee").unwrap(), None, "too short to be a short id");
        assert!(p("0193aaaa").is_err(), "ambiguous");
    }
}
