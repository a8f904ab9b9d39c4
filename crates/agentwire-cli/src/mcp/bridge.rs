//! The work of the `a2a mcp` tools, on the client ledger and the agents.
//!
//! Each tool returns an [`Output`]: a JSON object (the tool's structured
//! content) and its text rendering, both saying what the agent needs next,
//! so that a model that keeps nothing between calls can finish multi-turn
//! work. Everything a later call needs is in the ledger: the contexts, the
//! tasks (and which wait for input), the artifact versions, and which
//! agent each context belongs to (the ledger's own record of a context's
//! agent, the one `a2a send --context` reads too: so `continue_task(task_id)`
//! after a restart of the host reaches the right agent).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentwire_client::follow::{OpenedBy, ends_interaction};
use agentwire_client::ledger::{ArtifactVersion, Ledger, LedgerError, TaskRecord};
use agentwire_client::{CallOptions, Transport};
use agentwire_types::{
    AgentCard, CancelTaskRequest, GetTaskRequest, Message, Part, Role, SendMessageConfiguration,
    SendMessageResponse, StreamResponse, Task, TaskState, TaskStatus, send_message_response,
    stream_response,
};
use futures::StreamExt;
use serde_json::{Value, json};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use tokio::time::Instant;

use super::AgentEntry;
use crate::Globals;
use crate::agent::Agent;
use crate::error::CliError;

/// The message metadata key naming the skill a message is meant for (A2A
/// messages have no field for it; agents that route by skill may read it).
pub const SKILL_KEY: &str = "skillId";

/// The URI scheme of artifact resources: `a2a://artifact/ARTIFACT_ID`.
pub const ARTIFACT_URI_PREFIX: &str = "a2a://artifact/";

/// Artifact text longer than this is clipped in tool results (the whole
/// artifact stays readable as a resource).
const MAX_ARTIFACT_TEXT: usize = 24_000;

/// Time between two polls of a task whose stream ended early, or of an
/// agent that does not stream.
const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// What a tool returns: structured content and its text rendering.
#[derive(Debug, Clone)]
pub struct Output {
    pub json: Value,
    pub text: String,
}

/// Where a running call reports progress (the text of each status event).
pub type ProgressSink = Option<tokio::sync::mpsc::UnboundedSender<String>>;

/// The bridge: the configured agents, the connections made, the ledger.
pub struct Bridge {
    globals: Globals,
    entries: Vec<AgentEntry>,
    ledger: Ledger,
    /// The most contexts the ledger keeps (`--ledger-max-contexts`).
    max_contexts: usize,
    connected: tokio::sync::Mutex<HashMap<String, Arc<Agent>>>,
    max_wait: Duration,
}

/// How an exchange ended.
enum Outcome {
    Task(Task),
    Message(Message),
}

impl Bridge {
    /// The bridge on this ledger (the `a2a` ledger file, or one in
    /// memory with `--no-ledger`).
    pub fn new(
        globals: Globals,
        entries: Vec<AgentEntry>,
        ledger: Ledger,
        max_wait: Duration,
    ) -> Self {
        Self {
            max_contexts: globals.ledger_max_contexts.max(1),
            globals,
            entries,
            ledger,
            connected: tokio::sync::Mutex::new(HashMap::new()),
            max_wait,
        }
    }

    // ----- agents ----------------------------------------------------

    /// Connects to an agent by reference (once; later calls reuse it).
    async fn connect(&self, reference: &str) -> Result<Arc<Agent>, CliError> {
        let mut connected = self.connected.lock().await;
        if let Some(a) = connected.get(reference) {
            return Ok(a.clone());
        }
        let mut g = self.globals.clone();
        g.agent_card = Some(reference.to_owned());
        let agent = Arc::new(Agent::connect(&g).await?);
        connected.insert(reference.to_owned(), agent.clone());
        Ok(agent)
    }

    /// The agent an `agent` argument names: a configured agent's name, a
    /// configured reference, a configured agent's card name, or any
    /// reference `-a` accepts.
    async fn resolve(&self, name: &str) -> Result<(String, Arc<Agent>), CliError> {
        let name = name.trim();
        if name.is_empty() {
            return Err(self.no_agent_error("no agent given"));
        }
        if let Some(e) = self
            .entries
            .iter()
            .find(|e| {
                e.name
                    .as_deref()
                    .is_some_and(|n| n.eq_ignore_ascii_case(name))
            })
            .or_else(|| self.entries.iter().find(|e| e.reference == name))
        {
            let agent = self.connect(&e.reference).await?;
            return Ok((e.reference.clone(), agent));
        }
        for e in self.entries.iter().filter(|e| e.name.is_none()) {
            let Ok(agent) = self.connect(&e.reference).await else {
                continue;
            };
            if agent.card.name.eq_ignore_ascii_case(name) || slug(&agent.card.name) == slug(name) {
                return Ok((e.reference.clone(), agent));
            }
        }
        let looks_like_reference = name.contains([':', '/', '.']);
        if !looks_like_reference {
            return Err(self.no_agent_error(&format!("no agent named {name:?}")));
        }
        let agent = self.connect(name).await?;
        Ok((name.to_owned(), agent))
    }

    fn no_agent_error(&self, what: &str) -> CliError {
        let names = self.agent_names();
        let hint = if names.is_empty() {
            "pass an agent reference (host:port, URL or card file), or configure agents with `a2a mcp -a NAME=REF`".to_owned()
        } else {
            format!(
                "the configured agents are {}; list_agents describes them; any host:port, URL or card file works too",
                names.join(", ")
            )
        };
        CliError::usage(what.to_owned()).with_hint(hint)
    }

    fn agent_names(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|e| e.name.clone().unwrap_or_else(|| e.reference.clone()))
            .collect()
    }

    /// The name to show for an agent: its configured name, else its card's.
    fn display_name(&self, reference: &str, agent: &Agent) -> String {
        self.entries
            .iter()
            .find(|e| e.reference == reference)
            .and_then(|e| e.name.clone())
            .unwrap_or_else(|| agent.card.name.clone())
    }

    /// Records the agent of a context (and keeps the ledger bounded).
    async fn set_route(&self, context_id: &str, reference: &str) -> Result<(), CliError> {
        self.ledger
            .set_agent(context_id, reference)
            .await
            .map_err(ledger_err)?;
        self.ledger
            .prune(self.max_contexts)
            .await
            .map_err(ledger_err)?;
        Ok(())
    }

    /// The agent of a context, as the ledger recorded it.
    async fn agent_of_context(&self, context_id: &str) -> Result<(String, Arc<Agent>), CliError> {
        let recorded = self
            .ledger
            .store()
            .context(context_id)
            .await
            .map_err(ledger_err)?
            .and_then(|c| c.agent);
        let Some(reference) = recorded else {
            return Err(CliError::usage(format!(
                "the ledger does not say which agent context {context_id} belongs to"
            ))
            .with_hint("start again with send_message(agent=..., context_id=...)"));
        };
        let agent = self.connect(&reference).await?;
        Ok((reference, agent))
    }

    // ----- tools -----------------------------------------------------

    /// `list_agents`.
    pub async fn list_agents(&self) -> Output {
        let mut agents = Vec::new();
        let mut text = String::new();
        if self.entries.is_empty() {
            text.push_str(
                "No agents are configured. Pass any agent's host:port, URL or card file as `agent` to describe_agent or send_message.\n",
            );
        }
        for e in &self.entries {
            match self.connect(&e.reference).await {
                Ok(agent) => {
                    let name = e.name.clone().unwrap_or_else(|| slug(&agent.card.name));
                    let card = &agent.card;
                    text.push_str(&format!(
                        "{name}: {} ({})\n  {}\n",
                        card.name, e.reference, card.description
                    ));
                    for s in &card.skills {
                        text.push_str(&format!("  skill {}: {}\n", s.id, s.description));
                        for ex in &s.examples {
                            text.push_str(&format!("    e.g. {ex}\n"));
                        }
                    }
                    agents.push(json!({
                        "name": name,
                        "reference": e.reference,
                        "title": card.name,
                        "description": card.description,
                        "skills": skills_json(card),
                    }));
                }
                Err(err) => {
                    let name = e.name.clone().unwrap_or_else(|| e.reference.clone());
                    text.push_str(&format!(
                        "{name}: unreachable ({}): {}\n",
                        e.reference, err.message
                    ));
                    agents.push(json!({
                        "name": name,
                        "reference": e.reference,
                        "error": err.message,
                    }));
                }
            }
        }
        text.push_str("Next: send_message(agent=NAME, text=...) starts work with an agent.\n");
        Output {
            json: json!({
                "agents": agents,
                "next": "send_message(agent=NAME, text=...) starts work with an agent",
            }),
            text,
        }
    }

    /// `describe_agent`.
    pub async fn describe_agent(&self, name: &str) -> Result<Output, CliError> {
        let (reference, agent) = self.resolve(name).await?;
        let card = &agent.card;
        let display = self.display_name(&reference, &agent);
        let interfaces: Vec<Value> = card
            .supported_interfaces
            .iter()
            .map(|i| json!({"url": i.url, "protocolBinding": i.protocol_binding}))
            .collect();
        let mut text = format!(
            "{display}: {} version {}\n{}\nReference: {reference}\nStreaming: {}\nAccepts: {}\nProduces: {}\n",
            card.name,
            card.version,
            card.description,
            if card.supports_streaming() {
                "yes"
            } else {
                "no"
            },
            card.default_input_modes.join(", "),
            card.default_output_modes.join(", "),
        );
        for s in &card.skills {
            text.push_str(&format!("Skill {} ({}): {}\n", s.id, s.name, s.description));
            for ex in &s.examples {
                text.push_str(&format!("  e.g. {ex}\n"));
            }
        }
        let next = format!(
            "send_message(agent=\"{display}\", text=..., files=[paths], skill=SKILL_ID) sends it work"
        );
        text.push_str(&format!("Next: {next}\n"));
        Ok(Output {
            json: json!({
                "name": display,
                "reference": reference,
                "title": card.name,
                "description": card.description,
                "version": card.version,
                "streaming": card.supports_streaming(),
                "defaultInputModes": card.default_input_modes,
                "defaultOutputModes": card.default_output_modes,
                "interfaces": interfaces,
                "skills": skills_json(card),
                "next": next,
            }),
            text,
        })
    }

    /// `send_message`.
    #[allow(clippy::too_many_arguments)]
    pub async fn send_message(
        &self,
        agent: &str,
        text: &str,
        files: &[String],
        data: Option<Value>,
        skill: Option<&str>,
        context_id: Option<&str>,
        progress: ProgressSink,
    ) -> Result<Output, CliError> {
        let (reference, agent) = self.resolve(agent).await?;
        let mut parts = Vec::new();
        if !text.is_empty() {
            parts.push(Part::text(text));
        }
        for f in files {
            parts.push(file_part(f)?);
        }
        if let Some(d) = data {
            parts.push(Part::data(d));
        }
        if parts.is_empty() {
            return Err(CliError::usage("nothing to send: give text, files or data"));
        }
        let mut message = Message::new(Role::User, parts);
        if let Some(c) = context_id.filter(|c| !c.is_empty()) {
            message.context_id = c.to_owned();
        }
        if let Some(s) = skill.filter(|s| !s.is_empty()) {
            let Some(found) = agent
                .card
                .skills
                .iter()
                .find(|k| k.id.eq_ignore_ascii_case(s) || k.name.eq_ignore_ascii_case(s))
            else {
                let known: Vec<&str> = agent.card.skills.iter().map(|k| k.id.as_str()).collect();
                return Err(
                    CliError::usage(format!("{} has no skill {s:?}", agent.card.name))
                        .with_hint(format!("its skills are: {}", known.join(", "))),
                );
            };
            message = message.with_metadata(SKILL_KEY, json!(found.id));
        }
        let outcome = self
            .exchange(&reference, &agent, message, None, None, progress)
            .await?;
        self.render_outcome(&reference, &agent, outcome).await
    }

    /// `continue_task`.
    pub async fn continue_task(
        &self,
        task_id: &str,
        text: &str,
        data: Option<Value>,
        progress: ProgressSink,
    ) -> Result<Output, CliError> {
        let record = self.task_record(task_id).await?;
        if record.state.is_terminal() {
            let hint = match self.ledger.versions_of_task(task_id).await {
                Ok(v) if !v.is_empty() => format!(
                    "refine(artifact_id=\"{}\", text=...) asks for a new version in the same context",
                    v[v.len() - 1].artifact_id
                ),
                _ => "send_message(agent=..., context_id=..., text=...) starts a new task in the same context".to_owned(),
            };
            return Err(CliError::usage(format!(
                "task {task_id} is {} and cannot be continued",
                record.state.short_name()
            ))
            .with_hint(hint));
        }
        let (reference, agent) = self.agent_of_context(&record.context_id).await?;
        let mut parts = Vec::new();
        if !text.is_empty() {
            parts.push(Part::text(text));
        }
        if let Some(d) = data {
            parts.push(Part::data(d));
        }
        if parts.is_empty() {
            return Err(CliError::usage("nothing to send: give text or data"));
        }
        let message = Message::new(Role::User, parts)
            .with_task_id(task_id)
            .with_context_id(&record.context_id);
        let waiting = record.task.status.clone();
        let outcome = self
            .exchange(&reference, &agent, message, None, waiting, progress)
            .await?;
        self.render_outcome(&reference, &agent, outcome).await
    }

    /// `get_task`: the task as the agent reports it now (the ledger's copy
    /// when the agent cannot be reached).
    pub async fn get_task(&self, task_id: &str) -> Result<Output, CliError> {
        let record = self.task_record(task_id).await?;
        let (reference, agent) = match self.agent_of_context(&record.context_id).await {
            Ok(a) => a,
            Err(e) => {
                let mut out = self.render_task(None, &record.task).await?;
                out.text
                    .push_str(&format!("Note: the agent was not asked ({})\n", e.message));
                return Ok(out);
            }
        };
        let request = GetTaskRequest {
            id: task_id.to_owned(),
            ..Default::default()
        };
        match agent.client.get_task(request, &CallOptions::new()).await {
            Ok(task) => {
                self.ledger.record_task(&task).await.map_err(ledger_err)?;
                let task = self.recorded(&task).await?;
                let name = self.display_name(&reference, &agent);
                self.render_task(Some(&name), &task).await
            }
            Err(e) => {
                let err = agent.task_err(&e, task_id);
                let mut out = self.render_task(None, &record.task).await?;
                out.text.push_str(&format!(
                    "Note: this is the ledger's copy; the agent did not answer ({})\n",
                    err.message
                ));
                Ok(out)
            }
        }
    }

    /// `cancel_task`.
    pub async fn cancel_task(&self, task_id: &str) -> Result<Output, CliError> {
        let record = self.task_record(task_id).await?;
        let (reference, agent) = self.agent_of_context(&record.context_id).await?;
        let request = CancelTaskRequest {
            id: task_id.to_owned(),
            ..Default::default()
        };
        let task = agent
            .client
            .cancel_task(request, &CallOptions::new())
            .await
            .map_err(|e| agent.task_err(&e, task_id))?;
        self.ledger.record_task(&task).await.map_err(ledger_err)?;
        let task = self.recorded(&task).await?;
        let name = self.display_name(&reference, &agent);
        self.render_task(Some(&name), &task).await
    }

    /// `list_versions`: the artifact versions of one context, or of all.
    pub async fn list_versions(&self, context_id: Option<&str>) -> Result<Output, CliError> {
        let contexts: Vec<String> = match context_id.filter(|c| !c.is_empty()) {
            Some(c) => {
                if self.ledger.context(c).await.map_err(ledger_err)?.is_none() {
                    return Err(CliError::usage(format!("the ledger has no context {c}"))
                        .with_hint("list_versions() without a context lists every version"));
                }
                vec![c.to_owned()]
            }
            None => self
                .ledger
                .contexts()
                .await
                .map_err(ledger_err)?
                .into_iter()
                .map(|c| c.id)
                .collect(),
        };
        let mut items = Vec::new();
        let mut text = String::new();
        for c in &contexts {
            let versions = self
                .ledger
                .context(c)
                .await
                .map_err(ledger_err)?
                .map(|v| v.versions)
                .unwrap_or_default();
            if versions.is_empty() {
                continue;
            }
            text.push_str(&format!("Context {c}:\n"));
            for v in versions {
                let n = self.version_number(&v).await?;
                let total = self
                    .ledger
                    .versions(&v.context_id, &v.artifact_name)
                    .await
                    .map_err(ledger_err)?
                    .len();
                text.push_str(&format!(
                    "  {} v{n} of {total}: artifactId {}{}{}\n",
                    v.artifact_name,
                    v.artifact_id,
                    v.previous_artifact_id
                        .as_ref()
                        .map(|p| format!(", refines {p}"))
                        .unwrap_or_default(),
                    if v.accepted_by_user { ", accepted" } else { "" },
                ));
                items.push(json!({
                    "artifactId": v.artifact_id,
                    "name": v.artifact_name,
                    "version": n,
                    "versions": total,
                    "taskId": v.task_id,
                    "contextId": v.context_id,
                    "previousArtifactId": v.previous_artifact_id,
                    "accepted": v.accepted_by_user,
                    "uri": artifact_uri(&v.artifact_id),
                }));
            }
        }
        let next = if items.is_empty() {
            "no artifact versions yet: send_message starts work that produces them".to_owned()
        } else {
            "accept_version(artifact_id=...) marks the version to keep; refine(artifact_id=..., text=...) asks for a new one; read a version whole as the resource a2a://artifact/ID".to_owned()
        };
        if items.is_empty() {
            text.push_str("No artifact versions in the ledger.\n");
        }
        text.push_str(&format!("Next: {next}\n"));
        Ok(Output {
            json: json!({"versions": items, "next": next}),
            text,
        })
    }

    /// `accept_version`.
    pub async fn accept_version(&self, artifact_id: &str) -> Result<Output, CliError> {
        let v = self.ledger.accept(artifact_id).await.map_err(ledger_err)?;
        let n = self.version_number(&v).await?;
        let text = format!(
            "Accepted {} v{n} (artifactId {}) in context {}; any other version of it is no longer accepted.\n",
            v.artifact_name, v.artifact_id, v.context_id
        );
        Ok(Output {
            json: json!({
                "artifactId": v.artifact_id,
                "name": v.artifact_name,
                "version": n,
                "contextId": v.context_id,
                "taskId": v.task_id,
                "accepted": true,
                "next": "the accepted version is recorded; list_versions shows it",
            }),
            text,
        })
    }

    /// `refine`: a new task in the artifact's context, naming the artifact
    /// (`referenceTaskIds`, and `artifactId` / `taskId` in part metadata).
    pub async fn refine(
        &self,
        artifact_id: &str,
        text: &str,
        progress: ProgressSink,
    ) -> Result<Output, CliError> {
        let v = self
            .ledger
            .version(artifact_id)
            .await
            .map_err(ledger_err)?
            .ok_or_else(|| ledger_err(LedgerError::UnknownArtifact(artifact_id.to_owned())))?;
        let (reference, agent) = self.agent_of_context(&v.context_id).await?;
        let message = self
            .ledger
            .refinement_message(artifact_id, Message::user_text(text))
            .await
            .map_err(ledger_err)?;
        let outcome = self
            .exchange(
                &reference,
                &agent,
                message,
                Some(artifact_id),
                None,
                progress,
            )
            .await?;
        self.render_outcome(&reference, &agent, outcome).await
    }

    // ----- resources -------------------------------------------------

    /// Every artifact version, newest context first.
    pub async fn all_versions(&self) -> Result<Vec<(ArtifactVersion, usize)>, CliError> {
        let mut out = Vec::new();
        for c in self.ledger.contexts().await.map_err(ledger_err)? {
            if let Some(view) = self.ledger.context(&c.id).await.map_err(ledger_err)? {
                for v in view.versions {
                    let n = self.version_number(&v).await?;
                    out.push((v, n));
                }
            }
        }
        Ok(out)
    }

    /// A version, by artifact id.
    pub async fn version(&self, artifact_id: &str) -> Result<Option<ArtifactVersion>, CliError> {
        self.ledger.version(artifact_id).await.map_err(ledger_err)
    }

    // ----- the exchange ----------------------------------------------

    /// Sends a message and follows the answer up to the wait bound:
    /// streamed when the agent streams (each status event goes to
    /// `progress`), else sent without blocking and polled. Every event is
    /// recorded in the ledger as it passes. `refines` is the artifact a
    /// refinement targets (recorded on the new task before its artifacts
    /// arrive, so that they chain to it); `waiting` the status of the
    /// interrupted task a message answers (a poll that still sees it is
    /// not the answer).
    async fn exchange(
        &self,
        reference: &str,
        agent: &Agent,
        message: Message,
        refines: Option<&str>,
        waiting: Option<TaskStatus>,
        progress: ProgressSink,
    ) -> Result<Outcome, CliError> {
        let deadline = Instant::now() + self.max_wait;
        let say = |s: String| {
            if let Some(p) = &progress {
                let _ = p.send(s);
            }
        };
        let mut task_id: Option<String> = None;
        let mut direct: Option<Message> = None;
        let mut ended = false;
        if agent.card.supports_streaming() {
            let mut events = self
                .ledger
                .stream(&agent.client, message, &CallOptions::new())
                .await
                .map_err(|e| ledger_call_err(agent, e))?;
            let mut first = true;
            loop {
                let Ok(next) = tokio::time::timeout_at(deadline, events.next()).await else {
                    break; // the bound: the task goes on, checked later
                };
                let Some(event) = next else {
                    break;
                };
                let event = event.map_err(|e| agent.err(&e))?;
                if task_id.is_none()
                    && let Some(id) = event.task_id()
                {
                    task_id = Some(id.to_owned());
                    self.task_started(reference, id, refines).await?;
                }
                if let Some(stream_response::Payload::Message(m)) = &event.payload
                    && task_id.is_none()
                {
                    direct = Some(m.clone());
                    if !m.context_id.is_empty() {
                        self.set_route(&m.context_id, reference).await?;
                    }
                }
                if let Some(line) = describe_event(&event) {
                    say(line);
                }
                let end = ends_interaction(&event, first, OpenedBy::SendStreamingMessage);
                first = false;
                if end {
                    ended = true;
                    break;
                }
            }
        } else {
            let configuration = SendMessageConfiguration {
                return_immediately: true,
                ..Default::default()
            };
            let response: SendMessageResponse = self
                .ledger
                .send_with(
                    &agent.client,
                    message,
                    Some(configuration),
                    &CallOptions::new(),
                )
                .await
                .map_err(|e| ledger_call_err(agent, e))?;
            match &response.payload {
                Some(send_message_response::Payload::Task(t)) => {
                    task_id = Some(t.id.clone());
                    self.task_started(reference, &t.id, refines).await?;
                    say(t.state().short_name().to_owned());
                    let stale = waiting.is_some() && t.status == waiting;
                    ended = t.state().ends_turn() && !stale;
                }
                Some(send_message_response::Payload::Message(m)) => {
                    if !m.context_id.is_empty() {
                        self.set_route(&m.context_id, reference).await?;
                    }
                    direct = Some(m.clone());
                }
                None => {}
            }
        }
        match (task_id, direct) {
            (Some(id), _) => {
                if !ended {
                    self.poll(agent, &id, waiting.as_ref(), deadline, &progress)
                        .await?;
                }
                let record = self.task_record(&id).await?;
                Ok(Outcome::Task(record.task))
            }
            (None, Some(m)) => Ok(Outcome::Message(m)),
            (None, None) => Err(CliError::internal(
                "the agent closed the stream without answering",
            )),
        }
    }

    /// A task appeared: its context belongs to this agent, and a
    /// refinement's task records the artifact it refines.
    async fn task_started(
        &self,
        reference: &str,
        task_id: &str,
        refines: Option<&str>,
    ) -> Result<(), CliError> {
        let Some(mut record) = self.ledger.task(task_id).await.map_err(ledger_err)? else {
            return Ok(());
        };
        if !record.context_id.is_empty() {
            self.set_route(&record.context_id, reference).await?;
        }
        if let Some(target) = refines
            && record.refines_artifact_id.is_none()
        {
            record.refines_artifact_id = Some(target.to_owned());
            self.ledger
                .store()
                .put_task(&record)
                .await
                .map_err(ledger_err)?;
        }
        Ok(())
    }

    /// Polls a task until its turn ends (not counting the interrupted
    /// status a message answered) or the deadline passes, recording it.
    async fn poll(
        &self,
        agent: &Agent,
        task_id: &str,
        waiting: Option<&TaskStatus>,
        deadline: Instant,
        progress: &ProgressSink,
    ) -> Result<(), CliError> {
        let mut last_state = None;
        loop {
            let request = GetTaskRequest {
                id: task_id.to_owned(),
                ..Default::default()
            };
            let task = agent
                .client
                .get_task(request, &CallOptions::new())
                .await
                .map_err(|e| agent.task_err(&e, task_id))?;
            self.ledger.record_task(&task).await.map_err(ledger_err)?;
            let state = task.state();
            if last_state != Some(state) {
                if let Some(p) = progress {
                    let _ = p.send(status_line(state, task.status.as_ref()));
                }
                last_state = Some(state);
            }
            let stale = waiting.is_some() && task.status.as_ref() == waiting;
            if state.ends_turn() && !stale {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(());
            }
            tokio::time::sleep(POLL_INTERVAL.min(deadline - now)).await;
        }
    }

    // ----- rendering -------------------------------------------------

    async fn render_outcome(
        &self,
        reference: &str,
        agent: &Agent,
        outcome: Outcome,
    ) -> Result<Output, CliError> {
        let name = self.display_name(reference, agent);
        match outcome {
            Outcome::Task(task) => self.render_task(Some(&name), &task).await,
            Outcome::Message(m) => {
                let reply = message_text(&m);
                let next = if m.context_id.is_empty() {
                    format!(
                        "the agent answered directly; send_message(agent=\"{name}\", text=...) goes on"
                    )
                } else {
                    format!(
                        "the agent answered directly (no task); send_message(agent=\"{name}\", context_id=\"{}\", text=...) goes on in the same conversation",
                        m.context_id
                    )
                };
                Ok(Output {
                    text: format!("{name} answers:\n{reply}\nNext: {next}\n"),
                    json: json!({
                        "agent": name,
                        "contextId": m.context_id,
                        "message": reply,
                        "next": next,
                    }),
                })
            }
        }
    }

    /// A task as the tools show it: state, the question when it waits, its
    /// artifacts (with their version numbers), and what to do next.
    async fn render_task(&self, agent: Option<&str>, task: &Task) -> Result<Output, CliError> {
        let state = task.state();
        let status_text = task
            .status
            .as_ref()
            .and_then(|s| s.message.as_deref())
            .map(message_text)
            .unwrap_or_default();
        let mut artifacts = Vec::new();
        let mut artifact_text = String::new();
        for a in &task.artifacts {
            let version = match self
                .ledger
                .version(&a.artifact_id)
                .await
                .map_err(ledger_err)?
            {
                Some(v) => Some(self.version_number(&v).await?),
                None => None,
            };
            let (body, clipped) = artifact_body(a);
            artifact_text.push_str(&format!(
                "Artifact {} (artifactId {}{}):\n{body}\n{}\n",
                a.name,
                a.artifact_id,
                version
                    .map(|n| format!(", version {n}"))
                    .unwrap_or_default(),
                if clipped {
                    format!(
                        "[clipped: read the whole artifact as the resource {}]\n",
                        artifact_uri(&a.artifact_id)
                    )
                } else {
                    String::new()
                }
            ));
            artifacts.push(json!({
                "name": a.name,
                "artifactId": a.artifact_id,
                "version": version,
                "uri": artifact_uri(&a.artifact_id),
                "text": body,
            }));
        }
        let latest = task.artifacts.last().map(|a| a.artifact_id.clone());
        let next = match state {
            TaskState::InputRequired => format!(
                "the agent asks: {}; answer with continue_task(task_id=\"{}\", text=\"your answer\")",
                or_default(&status_text, "(no question text)"),
                task.id
            ),
            TaskState::AuthRequired => format!(
                "the agent needs authorization: {}; complete it as it says, then call continue_task(task_id=\"{}\", text=...)",
                or_default(&status_text, "(no details)"),
                task.id
            ),
            TaskState::Completed => match &latest {
                Some(id) => format!(
                    "done; refine(artifact_id=\"{id}\", text=\"what to change\") asks for a new version, accept_version(artifact_id=\"{id}\") keeps this one"
                ),
                None => format!(
                    "done; send_message(agent=..., context_id=\"{}\", text=...) goes on in the same context",
                    task.context_id
                ),
            },
            TaskState::Failed | TaskState::Rejected | TaskState::Canceled => format!(
                "the task ended ({}){}; send_message starts new work",
                state.short_name(),
                if status_text.is_empty() {
                    String::new()
                } else {
                    format!(": {status_text}")
                }
            ),
            _ => format!(
                "the agent is still working; check later with get_task(task_id=\"{}\"), or stop it with cancel_task(task_id=\"{}\")",
                task.id, task.id
            ),
        };
        let mut text = String::new();
        if let Some(a) = agent {
            text.push_str(&format!("Agent: {a}\n"));
        }
        text.push_str(&format!(
            "Task: {}\nContext: {}\nState: {}\n",
            task.id,
            task.context_id,
            state.short_name()
        ));
        if !status_text.is_empty() {
            let label = if state.is_interrupted() {
                "Question"
            } else {
                "Status"
            };
            text.push_str(&format!("{label}: {status_text}\n"));
        }
        text.push_str(&artifact_text);
        text.push_str(&format!("Next: {next}\n"));
        let mut json = json!({
            "taskId": task.id,
            "contextId": task.context_id,
            "state": state.short_name(),
            "artifacts": artifacts,
            "next": next,
        });
        if let Some(a) = agent {
            json["agent"] = json!(a);
        }
        if !status_text.is_empty() {
            let key = if state.is_interrupted() {
                "question"
            } else {
                "statusMessage"
            };
            json[key] = json!(status_text);
        }
        Ok(Output { json, text })
    }

    // ----- helpers ---------------------------------------------------

    async fn task_record(&self, task_id: &str) -> Result<TaskRecord, CliError> {
        self.ledger
            .task(task_id)
            .await
            .map_err(ledger_err)?
            .ok_or_else(|| ledger_err(LedgerError::UnknownTask(task_id.to_owned())))
    }

    /// The task as the ledger now has it (artifacts merged).
    async fn recorded(&self, task: &Task) -> Result<Task, CliError> {
        Ok(self
            .ledger
            .task(&task.id)
            .await
            .map_err(ledger_err)?
            .map_or_else(|| task.clone(), |r| r.task))
    }

    /// The position of a version in its chain (1 for the first).
    async fn version_number(&self, v: &ArtifactVersion) -> Result<usize, CliError> {
        Ok(self
            .ledger
            .chain(&v.artifact_id)
            .await
            .map_err(ledger_err)?
            .len()
            .max(1))
    }
}

/// Moves the context->agent table earlier versions of the bridge kept
/// beside the ledger (`mcp_context_agents`) into the ledger's own record of
/// each context's agent, then drops it: the ledger is the one place for it.
pub async fn adopt_legacy_routes(path: &Path, ledger: &Ledger) -> Result<(), CliError> {
    let fail = |e: sqlx::Error| {
        CliError::internal(format!("cannot read the ledger {}: {e}", path.display()))
    };
    let options = SqliteConnectOptions::new()
        .filename(path)
        .busy_timeout(Duration::from_secs(5));
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .map_err(fail)?;
    let legacy: Option<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'mcp_context_agents'",
    )
    .fetch_optional(&pool)
    .await
    .map_err(fail)?;
    if legacy.is_some() {
        let rows: Vec<(String, String)> =
            sqlx::query_as("SELECT context_id, agent FROM mcp_context_agents")
                .fetch_all(&pool)
                .await
                .map_err(fail)?;
        for (context_id, agent) in rows {
            let known = ledger
                .store()
                .context(&context_id)
                .await
                .map_err(ledger_err)?;
            if known.is_none_or(|c| c.agent.is_none()) {
                ledger
                    .set_agent(&context_id, &agent)
                    .await
                    .map_err(ledger_err)?;
            }
        }
        sqlx::query("DROP TABLE IF EXISTS mcp_context_agents")
            .execute(&pool)
            .await
            .map_err(fail)?;
    }
    pool.close().await;
    Ok(())
}

/// Maps a ledger failure to the tool's error.
fn ledger_err(e: LedgerError) -> CliError {
    match e {
        LedgerError::UnknownTask(id) => CliError::usage(format!("the ledger has no task {id}"))
            .with_hint(
                "task ids come from send_message results; list_versions shows the work recorded",
            ),
        LedgerError::UnknownArtifact(id) => {
            CliError::usage(format!("the ledger has no artifact version {id}"))
                .with_hint("list_versions shows the artifact ids recorded")
        }
        LedgerError::InvalidState(m) => CliError::usage(m),
        other => CliError::internal(other.to_string()),
    }
}

fn ledger_call_err(agent: &Agent, e: LedgerError) -> CliError {
    match e {
        LedgerError::Client(c) => agent.err(&c),
        other => ledger_err(other),
    }
}

/// A file part from a local path (read by the bridge).
fn file_part(path: &str) -> Result<Part, CliError> {
    let p = path.strip_prefix("file://").unwrap_or(path);
    let bytes = std::fs::read(p).map_err(|e| {
        CliError::usage(format!("cannot read the file {path}: {e}")).with_hint(format!(
            "files are read by the bridge, relative to its working directory ({})",
            std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default()
        ))
    })?;
    let name = Path::new(p)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let media_type = crate::send::infer_media_type(&name);
    Ok(Part::file(bytes, name, media_type))
}

/// The text of a message's parts (data parts as JSON).
fn message_text(m: &Message) -> String {
    parts_text(&m.parts)
}

/// Text parts run on as they are (a streamed artifact has a text part per
/// chunk, as `Artifact::text_content` reads it); the other parts each get a
/// line of their own.
fn parts_text(parts: &[Part]) -> String {
    let mut out = String::new();
    let line = |out: &mut String, s: String| {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&s);
        out.push('\n');
    };
    for p in parts {
        if let Some(t) = p.as_text() {
            out.push_str(t);
        } else if let Some(d) = p.as_data() {
            line(
                &mut out,
                serde_json::to_string_pretty(&d).unwrap_or_default(),
            );
        } else if let Some(u) = p.as_url() {
            line(&mut out, format!("[file at {u}]"));
        } else if let Some(b) = p.as_raw() {
            line(
                &mut out,
                format!(
                    "[file {} ({}, {} bytes)]",
                    p.filename,
                    p.effective_media_type()
                        .unwrap_or("application/octet-stream"),
                    b.len()
                ),
            );
        }
    }
    out
}

/// An artifact's text, clipped for a tool result.
fn artifact_body(a: &agentwire_types::Artifact) -> (String, bool) {
    let text = parts_text(&a.parts);
    if text.len() <= MAX_ARTIFACT_TEXT {
        return (text, false);
    }
    let mut end = MAX_ARTIFACT_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (text[..end].to_owned(), true)
}

/// The whole text of an artifact (resources).
pub fn artifact_text(a: &agentwire_types::Artifact) -> String {
    parts_text(&a.parts)
}

/// The resource URI of an artifact version.
pub fn artifact_uri(artifact_id: &str) -> String {
    format!("{ARTIFACT_URI_PREFIX}{artifact_id}")
}

fn or_default<'a>(s: &'a str, d: &'a str) -> &'a str {
    if s.is_empty() { d } else { s }
}

fn skills_json(card: &AgentCard) -> Vec<Value> {
    card.skills
        .iter()
        .map(|s| {
            json!({
                "id": s.id,
                "name": s.name,
                "description": s.description,
                "examples": s.examples,
                "tags": s.tags,
            })
        })
        .collect()
}

/// A name for a card name: lower case, words joined by `-`.
pub fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_owned()
}

fn status_line(state: TaskState, status: Option<&TaskStatus>) -> String {
    let text = status
        .and_then(|s| s.message.as_deref())
        .map(message_text)
        .unwrap_or_default();
    if text.is_empty() {
        state.short_name().to_owned()
    } else {
        format!("{}: {text}", state.short_name())
    }
}

/// A progress line for an event (status events and new artifacts).
fn describe_event(e: &StreamResponse) -> Option<String> {
    match &e.payload {
        Some(stream_response::Payload::Task(t)) => Some(status_line(t.state(), t.status.as_ref())),
        Some(stream_response::Payload::StatusUpdate(u)) => Some(status_line(
            u.status
                .as_ref()
                .map_or(TaskState::Unspecified, |s| s.state()),
            u.status.as_ref(),
        )),
        Some(stream_response::Payload::ArtifactUpdate(a)) => a
            .artifact
            .as_ref()
            .filter(|_| !a.append)
            .map(|art| format!("artifact {}", art.name)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_run_on_and_data_gets_its_own_line() {
        let parts = [
            Part::text("hello "),
            Part::text("world"),
            Part::data(json!({"a": 1})),
            Part::text("after"),
        ];
        assert_eq!(parts_text(&parts), "hello world\n{\n  \"a\": 1\n}\nafter");
    }

    #[test]
    fn slugs() {
        assert_eq!(
            slug("Dependency Compatibility Agent"),
            "dependency-compatibility-agent"
        );
        assert_eq!(slug("  Echo!  "), "echo");
    }
}
