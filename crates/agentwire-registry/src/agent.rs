//! The registry as an A2A agent: its card offers the `find-agent` skill,
//! so that an A2A client can ask it in words which agent can do something
//! (ARD 7.5, protocol wrappers). The answer is a Message: a sentence for
//! people and a data part with the same result as `POST /route`, plus the
//! best search results as catalog entries.

use agentwire_client::registry::{Query, RouteRequest, SearchRequest};
use agentwire_server::{AgentExecutor, RequestContext, TaskUpdater};
use agentwire_types::{A2aError, A2aResult, AgentCard, AgentSkill, ErrorKind, Message, Part, Role};
use serde_json::json;

use crate::Registry;

/// The skill's id.
pub const FIND_AGENT: &str = "find-agent";

/// The registry's agent card (interfaces are added when it binds).
pub fn card(name: &str) -> AgentCard {
    AgentCard::new(
        name,
        "An agent registry: ask which registered A2A agent and skill can handle a request, \
         in plain words. It answers with the best fitting skill and why, or says that none fits.",
        env!("CARGO_PKG_VERSION"),
    )
    .with_streaming(false)
    .with_output_modes(["text/plain", "application/json"])
    .with_skill(
        AgentSkill::new(
            FIND_AGENT,
            "Find an agent",
            "Routes a request to the registered agent and skill whose examples fit it best, \
             or reports that no skill fits (or that two fit equally well).",
            ["registry", "discovery", "routing"],
        )
        .with_example("Which agent can check my package-lock.json against Node 24?")
        .with_example("find an agent that converts currencies")
        .with_output_modes(["text/plain", "application/json"]),
    )
}

/// The executor of the registry's own agent.
pub struct FindAgent {
    /// The registry it answers from.
    pub registry: Registry,
}

impl AgentExecutor for FindAgent {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        let text = ctx.text();
        if text.trim().is_empty() {
            return task
                .reply_text("Say in words what you need done, and I will name the agent and skill that fit it.")
                .await;
        }
        let routed = self
            .registry
            .route_async(RouteRequest {
                text: text.clone(),
                filter: None,
                limit: Some(3),
            })
            .await
            .map_err(|e| A2aError::new(ErrorKind::InvalidParams, e.message))?;
        let found = self
            .registry
            .search(SearchRequest {
                query: Query {
                    text: Some(text),
                    ..Default::default()
                },
                page_size: Some(5),
                ..Default::default()
            })
            .await
            .map(|r| r.results)
            .unwrap_or_default();
        let sentence = match (routed.chosen(), routed.matches.first()) {
            (Some(m), _) => format!(
                "{} ({}) fits best, with its skill \"{}\" ({} of 100): {}.{}",
                m.agent_name,
                m.identifier,
                m.skill_id,
                m.score,
                m.why,
                m.url
                    .as_deref()
                    .map(|u| format!(" Its card: {u}"))
                    .unwrap_or_default()
            ),
            (None, Some(_)) if routed.ambiguous => {
                let names: Vec<String> = routed
                    .matches
                    .iter()
                    .take(2)
                    .map(|m| format!("{} (skill \"{}\")", m.agent_name, m.skill_id))
                    .collect();
                format!(
                    "Several skills fit about equally well: {}. Which one do you mean?",
                    names.join(" and ")
                )
            }
            _ => format!(
                "No registered skill fits this request. {}",
                routed.reason.clone().unwrap_or_default()
            ),
        };
        let message = Message::new(
            Role::Agent,
            vec![
                Part::text(sentence),
                Part::data(json!({"route": routed, "results": found})),
            ],
        );
        task.reply(message).await
    }
}
