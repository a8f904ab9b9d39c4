//! The release coordinator: the other side of the
//! [Dependency Compatibility Agent](crate::depcompat).
//!
//! Given a goal such as "upgrade payment-service to Node 24" and the
//! service's files, it:
//!
//! 1. discovers the compatibility agent by its card (the client's
//!    [`CardResolver`]) and checks that a skill fits the job; given a
//!    registry ([`ReleaseCoordinator::with_registry`]), it asks the
//!    registry which agent and skill fit the goal instead of using a fixed
//!    address;
//! 2. asks a quick question ("do you support npm 11 lockfiles?"), answered
//!    with a Message: no task;
//! 3. delegates the analysis in the same context, streaming: a Task, which
//!    stops in `input-required` because the request did not say which Node.js
//!    version;
//! 4. answers that question from its own knowledge (the goal), in the same
//!    task, and follows the stream: status updates, the JSON report, the
//!    Markdown report in chunks, completion;
//! 5. asks for a refinement ("sort the fixes by risk") referencing the task:
//!    a new task, which asks which artifact is meant; the coordinator answers
//!    with the Markdown report's `artifactId` in the part metadata;
//! 6. keeps everything in the client [`Ledger`]: the context, both tasks,
//!    and the two versions of `compatibility-report.md`, the second accepted.
//!
//! Every step is reported to an observer as [`StoryEvent`]s, including the
//! raw protocol objects sent and received (the `a2a demo` command prints
//! them).

use std::fmt;
use std::future::Future;
use std::time::Duration;

use agentwire_client::ledger::{ArtifactVersion, Ledger, LedgerError};
use agentwire_client::{Binding, CallOptions, CardResolver, Client, ClientError, Transport};
use agentwire_types::{
    AgentCard, GetTaskRequest, Message, Part, Role, SendMessageRequest, StreamResponse, Task,
    TaskState, send_message_response, stream_response,
};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::depcompat::{ARTIFACT_ID_KEY, JSON_REPORT, MARKDOWN_REPORT};

/// The coordinator's own knowledge of the release: which service, which
/// runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Goal {
    /// The service to upgrade.
    pub service: String,
    /// The target Node.js version or line.
    pub node: String,
}

impl Goal {
    /// Reads "upgrade payment-service to Node 24" (also "Node.js 24.1",
    /// "node v24").
    pub fn parse(text: &str) -> Option<Self> {
        let node = crate::depcompat::input::parse_text(text).node?;
        let words: Vec<&str> = text.split_whitespace().collect();
        let service = words
            .iter()
            .position(|w| {
                ["upgrade", "migrate", "move", "update"].contains(&w.to_ascii_lowercase().as_str())
            })
            .and_then(|i| words.get(i + 1))
            .map(|s| s.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_'))
            .filter(|s| !s.is_empty() && !s.eq_ignore_ascii_case("to"))?;
        Some(Self {
            service: service.to_owned(),
            node,
        })
    }
}

/// One file of the service's checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectFile {
    /// Its name (`package.json`).
    pub name: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// The checkout of `payment-service` bundled with the agents (the npm
/// fixture): `package.json` and `package-lock.json`.
pub fn payment_service_files() -> Vec<ProjectFile> {
    vec![
        ProjectFile {
            name: "package.json".into(),
            bytes: include_bytes!("../fixtures/npm/payment-service/package.json").to_vec(),
        },
        ProjectFile {
            name: "package-lock.json".into(),
            bytes: include_bytes!("../fixtures/npm/payment-service/package-lock.json").to_vec(),
        },
    ]
}

/// What the coordinator reports while it works.
#[derive(Debug, Clone)]
pub enum StoryEvent {
    /// A new step, with its title.
    Step(String),
    /// A remark explaining what happens.
    Say(String),
    /// The card was resolved.
    Card {
        /// Where it was fetched from.
        url: String,
        /// The card.
        card: AgentCard,
    },
    /// A request sent (ProtoJSON of the request object).
    Request {
        /// The A2A operation.
        method: &'static str,
        /// The binding used.
        binding: String,
        /// The request.
        body: Value,
    },
    /// A response received (ProtoJSON).
    Response {
        /// The A2A operation.
        method: &'static str,
        /// The response.
        body: Value,
    },
    /// One streamed event.
    Event {
        /// The A2A operation.
        method: &'static str,
        /// The event.
        event: StreamResponse,
    },
}

/// Why the story could not be told to its end.
#[derive(Debug)]
pub struct StoryError(pub String);

impl fmt::Display for StoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StoryError {}

impl From<ClientError> for StoryError {
    fn from(e: ClientError) -> Self {
        Self(e.to_string())
    }
}

impl From<LedgerError> for StoryError {
    fn from(e: LedgerError) -> Self {
        Self(e.to_string())
    }
}

fn fail<T>(msg: impl Into<String>) -> Result<T, StoryError> {
    Err(StoryError(msg.into()))
}

/// What the story produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The agent's card.
    pub card: AgentCard,
    /// The binding used.
    pub binding: Option<Binding>,
    /// The context grouping every interaction.
    pub context_id: String,
    /// The direct answer to the quick question.
    pub answer: Message,
    /// The question the agent asked in the analysis task.
    pub question: Message,
    /// The analysis task, as `GetTask` returns it at the end.
    pub analysis: Task,
    /// The question the agent asked in the refinement task.
    pub refinement_question: Option<Message>,
    /// The refinement task, as `GetTask` returns it at the end.
    pub refinement: Task,
    /// The versions of `compatibility-report.md`, oldest first.
    pub markdown_versions: Vec<ArtifactVersion>,
    /// The structured report.
    pub json_report: Value,
    /// The accepted (refined) Markdown report.
    pub final_markdown: String,
    /// Artifact chunks received while streaming, over both tasks.
    pub chunks: usize,
    /// The ledger with every record.
    pub ledger: Ledger,
}

/// The release coordinator.
#[derive(Debug, Clone)]
pub struct ReleaseCoordinator {
    resolver: CardResolver,
    bindings: Vec<Binding>,
    ledger: Ledger,
    wait: Duration,
    registry: Option<agentwire_client::registry::Registry>,
}

impl Default for ReleaseCoordinator {
    fn default() -> Self {
        Self::new()
    }
}

impl ReleaseCoordinator {
    /// A coordinator with an in-memory ledger, any binding.
    pub fn new() -> Self {
        Self {
            resolver: CardResolver::new(),
            bindings: vec![Binding::JsonRpc, Binding::HttpJson, Binding::Grpc],
            ledger: Ledger::in_memory(),
            wait: Duration::from_secs(30),
            registry: None,
        }
    }

    /// Finds the compatibility agent through this registry (routing the
    /// goal to the skill that fits it) instead of a fixed address: `run`'s
    /// `agent` is then ignored.
    pub fn with_registry(mut self, registry: agentwire_client::registry::Registry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Restricts (and orders) the bindings it may use.
    pub fn with_bindings(mut self, bindings: impl IntoIterator<Item = Binding>) -> Self {
        self.bindings = bindings.into_iter().collect();
        self
    }

    /// Keeps the records in this ledger.
    pub fn with_ledger(mut self, ledger: Ledger) -> Self {
        self.ledger = ledger;
        self
    }

    /// The longest wait for any one answer or event.
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// The ledger.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Asks the registry which agent and skill fit the goal, and resolves
    /// that agent's card. Stops (rather than guess) when the registry says
    /// that no skill fits or that two fit equally well.
    async fn discover(
        &self,
        registry: &agentwire_client::registry::Registry,
        goal: &Goal,
        obs: &mut (dyn FnMut(StoryEvent) + Send),
    ) -> Result<agentwire_client::card::ResolvedCard, StoryError> {
        obs(StoryEvent::Step(format!(
            "Ask the registry at {} which agent can check {} for Node.js {}",
            registry.base_url(),
            goal.service,
            goal.node
        )));
        let request = format!(
            "Check the dependencies of {} for an upgrade to Node.js {}",
            goal.service, goal.node
        );
        let routed = self
            .bounded("the registry", registry.route(&request, None))
            .await?
            .map_err(|e| StoryError(format!("the registry could not route the request: {e}")))?;
        obs(StoryEvent::Response {
            method: "POST /route",
            body: serde_json::to_value(&routed).unwrap_or_default(),
        });
        let Some(chosen) = routed.chosen() else {
            return fail(format!(
                "the registry found no agent to choose for \"{request}\": {} (publish the \
                 Dependency Compatibility Agent there: a2a registry publish)",
                routed.reason.as_deref().unwrap_or("no skill fits")
            ));
        };
        obs(StoryEvent::Say(format!(
            "the registry routes it to {} ({}), skill \"{}\", {} of 100: {}",
            chosen.agent_name, chosen.identifier, chosen.skill_id, chosen.score, chosen.why
        )));
        self.bounded(
            "the agent card",
            registry.resolve_card(&chosen.identifier, &self.resolver),
        )
        .await?
        .map_err(|e| StoryError(format!("cannot resolve {}: {e}", chosen.identifier)))
    }

    async fn bounded<T, F: Future<Output = T>>(&self, what: &str, f: F) -> Result<T, StoryError> {
        tokio::time::timeout(self.wait, f).await.map_err(|_| {
            StoryError(format!(
                "timed out after {:?} waiting for {what}",
                self.wait
            ))
        })
    }

    /// Sends one message as a stream through the ledger and follows it
    /// until the agent closes it (after a terminal or interrupted state, or
    /// a message).
    async fn stream(
        &self,
        client: &Client,
        message: Message,
        obs: &mut (dyn FnMut(StoryEvent) + Send),
    ) -> Result<Vec<StreamResponse>, StoryError> {
        let method = "SendStreamingMessage";
        let mut message = message;
        if message.message_id.is_empty() {
            message.message_id = agentwire_types::new_id();
        }
        obs(StoryEvent::Request {
            method,
            binding: binding_name(client),
            body: to_json(&SendMessageRequest {
                message: Some(message.clone()),
                ..Default::default()
            }),
        });
        let mut events = self
            .bounded(
                "the stream to open",
                self.ledger.stream(client, message, &CallOptions::new()),
            )
            .await??;
        let mut out = Vec::new();
        loop {
            let Some(item) = self.bounded("the next event", events.next()).await? else {
                break;
            };
            let event = item?;
            obs(StoryEvent::Event {
                method,
                event: event.clone(),
            });
            // Read until the agent closes the stream: a stream continuing
            // a task starts with the task as it was (still input-required).
            out.push(event);
        }
        Ok(out)
    }

    /// Runs the whole story against the agent at `agent` (an origin or a
    /// card URL) for `goal`, with the service's `files`.
    pub async fn run(
        &self,
        agent: &str,
        goal: &str,
        files: &[ProjectFile],
        obs: &mut (dyn FnMut(StoryEvent) + Send),
    ) -> Result<Outcome, StoryError> {
        let Some(goal) = Goal::parse(goal) else {
            return fail(format!(
                "cannot read the goal {goal:?}: say e.g. \"upgrade payment-service to Node 24\""
            ));
        };

        // 1. Discovery.
        let resolved = match &self.registry {
            None => {
                obs(StoryEvent::Step(
                    "Discover the dependency compatibility agent by its card".into(),
                ));
                self.bounded("the agent card", self.resolver.resolve(agent))
                    .await??
            }
            Some(registry) => self.discover(registry, &goal, obs).await?,
        };
        obs(StoryEvent::Card {
            url: resolved.location.clone(),
            card: resolved.card.clone(),
        });
        let card = resolved.card;
        let Some(skill) = card.skills.iter().find(|s| {
            s.tags
                .iter()
                .any(|t| t == "dependencies" || t == "compatibility")
                || s.id.contains("compatibility")
        }) else {
            return fail(format!(
                "{} declares no dependency compatibility skill",
                card.name
            ));
        };
        obs(StoryEvent::Say(format!(
            "skill \"{}\" ({}) fits the job; streaming: {}",
            skill.id,
            skill.name,
            if card.supports_streaming() {
                "yes"
            } else {
                "no"
            }
        )));
        if !card.supports_streaming() {
            return fail(format!("{} does not stream", card.name));
        }
        let client = Client::builder()
            .bindings(self.bindings.clone())
            .prefer_binding_order(true)
            .build(card.clone())?;
        if let Some(i) = client.interface() {
            obs(StoryEvent::Say(format!(
                "talking {} at {}",
                i.protocol_binding, i.url
            )));
        }

        // 2. A quick question: a Message.
        obs(StoryEvent::Step(
            "Ask a quick question: the agent answers with a Message, no task".into(),
        ));
        let question = Message::user_text("Do you support npm 11 lockfiles?");
        obs(StoryEvent::Request {
            method: "SendMessage",
            binding: binding_name(&client),
            body: to_json(&SendMessageRequest {
                message: Some(question.clone()),
                ..Default::default()
            }),
        });
        let response = self
            .bounded("the answer", self.ledger.send(&client, question))
            .await??;
        obs(StoryEvent::Response {
            method: "SendMessage",
            body: to_json(&response),
        });
        let answer = match response.payload {
            Some(send_message_response::Payload::Message(m)) => m,
            Some(send_message_response::Payload::Task(t)) => {
                return fail(format!(
                    "expected a direct message, got task {} ({})",
                    t.id,
                    t.state().short_name()
                ));
            }
            None => return fail("an empty answer"),
        };
        let context_id = answer.context_id.clone();
        obs(StoryEvent::Say(format!(
            "a Message, no task to track; its contextId {context_id} groups what follows"
        )));

        // 3. The analysis: a Task that needs input.
        obs(StoryEvent::Step(format!(
            "Delegate the analysis of {}: a Task, followed as a stream",
            goal.service
        )));
        let mut parts = vec![Part::text(format!(
            "Check the dependencies of {} for the planned runtime upgrade and send a structured risk report.",
            goal.service
        ))];
        for f in files {
            parts.push(Part::file(
                f.bytes.clone(),
                f.name.clone(),
                "application/json",
            ));
        }
        let request = Message::new(Role::User, parts).with_context_id(&context_id);
        let events = self.stream(&client, request, obs).await?;
        let mut chunks = count_chunks(&events);
        let Some(task_id) = events.iter().find_map(|e| e.task_id()).map(str::to_owned) else {
            return fail("the analysis produced no task");
        };
        let (state, asked) = last_status(&events);
        if state != Some(TaskState::InputRequired) {
            return fail(format!(
                "expected the task to ask for input, it is {}",
                state.map_or("unknown", TaskState::short_name)
            ));
        }
        let Some(asked) = asked else {
            return fail("the task asks for input without saying what");
        };
        obs(StoryEvent::Say(format!(
            "task {task_id} is input-required: {}",
            asked.text()
        )));
        let analysis_question = asked.clone();

        // 4. Answer from the coordinator's own knowledge.
        obs(StoryEvent::Step(
            "Answer the question from the coordinator's own knowledge, in the same task".into(),
        ));
        let missing = missing_fields(&asked);
        if missing.iter().any(|f| f != "targetRuntime.node") {
            return fail(format!(
                "the agent asks for {missing:?}; the coordinator only knows the target runtime"
            ));
        }
        let reply = Message::new(
            Role::User,
            vec![
                Part::text(format!("Target environment: Node.js {}.", goal.node)),
                Part::data(json!({"targetRuntime": {"node": goal.node}})),
            ],
        )
        .with_task_id(&task_id)
        .with_context_id(&context_id);
        let events = self.stream(&client, reply, obs).await?;
        chunks += count_chunks(&events);
        let (state, done) = last_status(&events);
        if state != Some(TaskState::Completed) {
            return fail(format!(
                "expected the analysis to complete, it is {}{}",
                state.map_or("unknown", TaskState::short_name),
                done.map(|m| format!(": {}", m.text())).unwrap_or_default()
            ));
        }
        if let Some(m) = &done {
            obs(StoryEvent::Say(m.text()));
        }
        let versions = self.ledger.versions_of_task(&task_id).await?;
        let Some(md_v1) = versions
            .iter()
            .find(|v| v.artifact_name == MARKDOWN_REPORT)
            .cloned()
        else {
            return fail("the analysis produced no Markdown report");
        };
        let json_report = versions
            .iter()
            .find(|v| v.artifact_name == JSON_REPORT)
            .and_then(|v| v.artifact.parts.iter().find_map(|p| p.as_data()))
            .unwrap_or(Value::Null);

        // 5. Refinement: a new task in the same context.
        obs(StoryEvent::Step(
            "Refine: \"sort the fixes by risk\", a new task in the same context (referenceTaskIds)"
                .into(),
        ));
        let refine = Message::user_text("Sort the fixes by risk.")
            .with_context_id(&context_id)
            .with_reference_task(&task_id);
        let events = self.stream(&client, refine, obs).await?;
        chunks += count_chunks(&events);
        let Some(refinement_id) = events.iter().find_map(|e| e.task_id()).map(str::to_owned) else {
            return fail("the refinement produced no task");
        };
        if refinement_id == task_id {
            return fail("the refinement reused the completed task");
        }
        let (mut state, asked) = last_status(&events);
        let mut refinement_question = None;
        if state == Some(TaskState::InputRequired) {
            let Some(asked) = asked else {
                return fail("the refinement asks for input without saying what");
            };
            obs(StoryEvent::Say(format!(
                "task {refinement_id} is input-required: {}",
                asked.text()
            )));
            obs(StoryEvent::Step(
                "Name the artifact to refine: the Markdown report, by its artifactId in the part metadata"
                    .into(),
            ));
            let answer = Message::new(
                Role::User,
                vec![
                    Part::text("The Markdown report, for the release notes.")
                        .with_metadata(ARTIFACT_ID_KEY, json!(md_v1.artifact_id))
                        .with_metadata("taskId", json!(task_id)),
                ],
            )
            .with_task_id(&refinement_id)
            .with_context_id(&context_id);
            refinement_question = Some(asked);
            let events = self.stream(&client, answer, obs).await?;
            chunks += count_chunks(&events);
            let (s, done) = last_status(&events);
            state = s;
            if let Some(m) = &done {
                obs(StoryEvent::Say(m.text()));
            }
        }
        if state != Some(TaskState::Completed) {
            return fail(format!(
                "expected the refinement to complete, it is {}",
                state.map_or("unknown", TaskState::short_name)
            ));
        }

        // 6. The ledger: two versions of the report, the second accepted.
        obs(StoryEvent::Step(
            "The client ledger keeps the versions: same name, new artifactId, chained".into(),
        ));
        let markdown_versions = self.ledger.versions(&context_id, MARKDOWN_REPORT).await?;
        let Some(latest) = markdown_versions.last().cloned() else {
            return fail("no version of the Markdown report in the ledger");
        };
        if markdown_versions.len() != 2
            || latest.previous_artifact_id.as_deref() != Some(&md_v1.artifact_id)
        {
            return fail(format!(
                "expected two chained versions of {MARKDOWN_REPORT}, the ledger has {}",
                markdown_versions.len()
            ));
        }
        let accepted = self.ledger.accept(&latest.artifact_id).await?;
        let markdown_versions = self.ledger.versions(&context_id, MARKDOWN_REPORT).await?;
        for (i, v) in markdown_versions.iter().enumerate() {
            obs(StoryEvent::Say(format!(
                "{} v{}: artifactId {} from task {}{}{}",
                v.artifact_name,
                i + 1,
                v.artifact_id,
                v.task_id,
                v.previous_artifact_id
                    .as_deref()
                    .map(|p| format!(", refines {p}"))
                    .unwrap_or_default(),
                if v.accepted_by_user {
                    " (accepted)"
                } else {
                    ""
                }
            )));
        }
        let final_markdown = accepted.artifact.text_content();

        let get = |id: &str| {
            let request = GetTaskRequest {
                id: id.to_owned(),
                ..Default::default()
            };
            let client = client.clone();
            async move { Transport::get_task(&client, request, &CallOptions::new()).await }
        };
        let analysis = self.bounded("GetTask", get(&task_id)).await??;
        let refinement = self.bounded("GetTask", get(&refinement_id)).await??;
        Ok(Outcome {
            binding: client.binding(),
            card,
            context_id,
            answer,
            question: analysis_question,
            analysis,
            refinement_question,
            refinement,
            markdown_versions,
            json_report,
            final_markdown,
            chunks,
            ledger: self.ledger.clone(),
        })
    }
}

fn binding_name(client: &Client) -> String {
    client
        .interface()
        .map(|i| i.protocol_binding.clone())
        .unwrap_or_default()
}

/// ProtoJSON of a protocol object.
pub fn to_json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn count_chunks(events: &[StreamResponse]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e.payload, Some(stream_response::Payload::ArtifactUpdate(_))))
        .count()
}

/// The last state of a stream and the status message that came with it.
fn last_status(events: &[StreamResponse]) -> (Option<TaskState>, Option<Message>) {
    for e in events.iter().rev() {
        match &e.payload {
            Some(stream_response::Payload::StatusUpdate(s)) => {
                return (
                    Some(s.state()),
                    s.status
                        .as_ref()
                        .and_then(|st| st.message.as_deref().cloned()),
                );
            }
            Some(stream_response::Payload::Task(t)) => {
                return (
                    Some(t.state()),
                    t.status
                        .as_ref()
                        .and_then(|st| st.message.as_deref().cloned()),
                );
            }
            _ => {}
        }
    }
    (None, None)
}

/// The `missing[].field` values of a question's data part.
fn missing_fields(question: &Message) -> Vec<String> {
    question
        .parts
        .iter()
        .filter_map(|p| p.as_data())
        .filter_map(|d| d.get("missing").and_then(Value::as_array).cloned())
        .flatten()
        .filter_map(|m| m.get("field").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goals() {
        assert_eq!(
            Goal::parse("upgrade payment-service to Node 24"),
            Some(Goal {
                service: "payment-service".into(),
                node: "24".into()
            })
        );
        assert_eq!(
            Goal::parse("Please migrate billing-api to Node.js 22.12").map(|g| g.node),
            Some("22.12".into())
        );
        assert_eq!(Goal::parse("upgrade payment-service"), None);
    }
}
