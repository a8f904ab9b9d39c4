//! The MCP Tools Agent: the tools of an MCP (Model Context Protocol) server,
//! served as A2A skills.
//!
//! The agent starts an MCP server (a command line, spoken to over stdio) or
//! connects to one (a streamable HTTP URL) with rmcp's client, lists its
//! tools, and describes each as a skill of its card (the skill id is the
//! tool name; its examples come from the tool's description). A message
//! then runs one tool:
//!
//! - by name: a data part `{"tool": NAME, "arguments": {...}}`, or the
//!   message metadata `skillId` naming the tool and a data part holding the
//!   arguments;
//! - in words: the tool whose name and description share most words with
//!   the text; when the tool takes exactly one required text argument that
//!   the message does not give, the text is that argument.
//!
//! A tool's required arguments that are still missing make the task
//! `input-required`: the question names them, and the answer (a data part
//! with them, or the value as text when one is missing) runs the tool. The
//! pending call travels in the question's metadata, so the agent keeps no
//! state between the two messages. The tool's result comes back as an
//! artifact `TOOL-result` (its text content as text parts, its structured
//! content as a data part); a tool error fails the task with its text.

use std::collections::BTreeSet;
use std::sync::Arc;

use agentwire_server::{A2aResult, AgentExecutor, RequestContext, TaskUpdater};
use agentwire_types::{AgentCard, AgentSkill, Artifact, Message, Part, TaskState};
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, Tool};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{Peer, RoleClient, ServiceExt};
use serde_json::{Map, Value, json};

/// The message metadata key naming the tool (the skill) a message is for.
pub const SKILL_KEY: &str = "skillId";
/// The metadata key of the pending call in an `input-required` question.
pub const PENDING_KEY: &str = "mcpPendingCall";

/// What can go wrong reaching the MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpAgentError(String);

impl std::fmt::Display for McpAgentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for McpAgentError {}

/// An MCP server's tools, as an A2A agent.
pub struct McpToolsAgent {
    peer: Peer<RoleClient>,
    tools: Vec<Tool>,
    server_name: String,
    instructions: Option<String>,
    _service: Arc<RunningService<RoleClient, ()>>,
}

impl std::fmt::Debug for McpToolsAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpToolsAgent")
            .field("server", &self.server_name)
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

impl McpToolsAgent {
    /// Starts (a command line: `CMD ARGS`, split as a shell would) or
    /// connects to (an `http://` or `https://` URL, streamable HTTP) an MCP
    /// server, and lists its tools.
    pub async fn connect(server: &str) -> Result<Self, McpAgentError> {
        let server = server.trim();
        let service = if server.starts_with("http://") || server.starts_with("https://") {
            agentwire_client::install_crypto_provider();
            let transport = StreamableHttpClientTransport::from_uri(server);
            ().serve(transport).await.map_err(|e| {
                McpAgentError(format!("cannot reach the MCP server at {server}: {e}"))
            })?
        } else {
            let words = shlex::split(server)
                .filter(|w| !w.is_empty())
                .ok_or_else(|| {
                    McpAgentError(format!(
                        "{server:?} is neither a command line nor an http(s) URL"
                    ))
                })?;
            let (program, args) = words
                .split_first()
                .ok_or_else(|| McpAgentError("an empty MCP server command line".to_owned()))?;
            let cmd = tokio::process::Command::new(program).configure(|c| {
                c.args(args);
            });
            let transport = TokioChildProcess::builder(cmd)
                .stderr(std::process::Stdio::inherit())
                .spawn()
                .map(|(t, _)| t)
                .map_err(|e| McpAgentError(format!("cannot start {program}: {e}")))?;
            ().serve(transport).await.map_err(|e| {
                McpAgentError(format!(
                    "the MCP server {program} did not start a session: {e}"
                ))
            })?
        };
        let peer = service.peer().clone();
        let tools = peer
            .list_all_tools()
            .await
            .map_err(|e| McpAgentError(format!("cannot list the MCP server's tools: {e}")))?;
        let info = peer.peer_info();
        let server_name = info
            .as_ref()
            .and_then(|i| i.server_info.as_ref())
            .map(|s| s.title.clone().unwrap_or_else(|| s.name.clone()))
            .unwrap_or_else(|| "MCP server".to_owned());
        let instructions = info.as_ref().and_then(|i| i.instructions.clone());
        Ok(Self {
            peer,
            tools,
            server_name,
            instructions,
            _service: Arc::new(service),
        })
    }

    /// The tools.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The agent card: a skill per tool.
    pub fn card(&self) -> AgentCard {
        let mut description = format!(
            "Runs the tools of the MCP server {} as A2A skills: name a tool and its arguments in a data part \
             ({{\"tool\": NAME, \"arguments\": {{...}}}}), or ask in words.",
            self.server_name
        );
        if let Some(i) = self.instructions.as_ref().filter(|i| !i.trim().is_empty()) {
            description.push(' ');
            description.push_str(i.trim());
        }
        let mut card = AgentCard::new(
            format!("{} (MCP tools)", self.server_name),
            description,
            env!("CARGO_PKG_VERSION"),
        )
        .with_streaming(true)
        .with_input_modes(["text/plain", "application/json"])
        .with_output_modes(["text/plain", "application/json"]);
        for t in &self.tools {
            card = card.with_skill(skill_of(t));
        }
        card
    }

    fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The tool whose name and description share most words with `text`
    /// (`None` on a tie or no shared word, unless there is only one tool).
    fn tool_for_words(&self, text: &str) -> Option<&Tool> {
        if self.tools.len() == 1 {
            return self.tools.first();
        }
        let asked = words(text);
        let mut scored: Vec<(usize, &Tool)> = self
            .tools
            .iter()
            .map(|t| {
                let mut w = words(&t.name.replace(['_', '-'], " "));
                w.extend(words(t.description.as_deref().unwrap_or_default()));
                (asked.intersection(&w).count(), t)
            })
            .collect();
        scored.sort_by_key(|(s, _)| std::cmp::Reverse(*s));
        match scored.as_slice() {
            [(best, t), rest @ ..] if *best > 0 && rest.first().is_none_or(|(s, _)| s < best) => {
                Some(*t)
            }
            _ => None,
        }
    }

    async fn ask_for_tool(&self, task: &TaskUpdater) -> A2aResult<()> {
        let mut q = String::from("Which tool should run? Reply with its name:");
        for t in &self.tools {
            q.push_str(&format!(
                "\n- {}: {}",
                t.name,
                t.description.as_deref().unwrap_or_default()
            ));
        }
        let pending = json!({"tool": Value::Null, "arguments": {}});
        self.ask(task, q, pending).await
    }

    async fn ask(&self, task: &TaskUpdater, question: String, pending: Value) -> A2aResult<()> {
        let m = task
            .agent_message(vec![Part::text(question)])
            .with_metadata(PENDING_KEY, pending);
        task.set_status(TaskState::InputRequired, Some(m)).await
    }
}

/// A skill for a tool: the examples are the description's first sentence
/// and the data part that calls it.
fn skill_of(t: &Tool) -> AgentSkill {
    let description = t
        .description
        .as_deref()
        .filter(|d| !d.trim().is_empty())
        .unwrap_or("An MCP tool")
        .trim()
        .to_owned();
    let title = t
        .title
        .clone()
        .or_else(|| t.annotations.as_ref().and_then(|a| a.title.clone()))
        .unwrap_or_else(|| t.name.to_string());
    let first = description
        .split_inclusive(['.', '\n'])
        .next()
        .unwrap_or(&description)
        .trim()
        .trim_end_matches('.')
        .to_owned();
    let mut args = Map::new();
    for name in required(t) {
        args.insert(name, json!("..."));
    }
    AgentSkill::new(t.name.to_string(), title, description, ["mcp", "tool"])
        .with_example(first)
        .with_example(json!({"tool": t.name, "arguments": args}).to_string())
}

/// Lower-case words of three letters or more.
fn words(s: &str) -> BTreeSet<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_lowercase)
        .collect()
}

/// The required argument names of a tool.
fn required(t: &Tool) -> Vec<String> {
    t.input_schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The JSON type of an argument (`string`, `number`...), if declared.
fn arg_type(t: &Tool, name: &str) -> Option<String> {
    t.input_schema
        .get("properties")
        .and_then(|p| p.get(name))
        .and_then(|p| p.get("type"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn arg_description(t: &Tool, name: &str) -> String {
    t.input_schema
        .get("properties")
        .and_then(|p| p.get(name))
        .and_then(|p| p.get("description"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// A text answer as an argument value: parsed for a number or boolean.
fn value_of(t: &Tool, name: &str, text: &str) -> Value {
    match arg_type(t, name).as_deref() {
        Some("integer") | Some("number") | Some("boolean") => {
            serde_json::from_str(text.trim()).unwrap_or_else(|_| json!(text.trim()))
        }
        _ => json!(text),
    }
}

/// The first data part of a message that is a JSON object.
fn data_object(m: &Message) -> Option<Map<String, Value>> {
    m.parts.iter().find_map(|p| match p.as_data() {
        Some(Value::Object(o)) => Some(o),
        _ => None,
    })
}

fn metadata_str(m: &Message, key: &str) -> Option<String> {
    m.metadata_value(key)
        .and_then(|v| v.as_str().map(str::to_owned))
}

/// The text of a tool result and its artifact.
fn result_artifact(tool: &str, r: &CallToolResult) -> (String, Artifact) {
    let mut parts = Vec::new();
    let mut text = Vec::new();
    for c in &r.content {
        match c {
            ContentBlock::Text(t) => {
                text.push(t.text.clone());
                parts.push(Part::text(t.text.clone()));
            }
            other => parts.push(Part::data(
                serde_json::to_value(other).unwrap_or(Value::Null),
            )),
        }
    }
    if let Some(s) = &r.structured_content {
        parts.push(Part::data(s.clone()));
    }
    if parts.is_empty() {
        parts.push(Part::text(""));
    }
    (
        text.join("\n"),
        Artifact::new(format!("{tool}-result"), parts),
    )
}

impl AgentExecutor for McpToolsAgent {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        let text = ctx.text();
        let data = data_object(&ctx.message);
        // A pending call from the question this message answers.
        let pending = ctx
            .task
            .as_ref()
            .filter(|t| t.state() == TaskState::InputRequired)
            .and_then(|t| t.status.as_ref())
            .and_then(|s| s.message.as_deref())
            .and_then(|m| m.metadata_value(PENDING_KEY));
        let (mut tool_name, mut arguments, answering) = match &pending {
            Some(p) => (
                p.get("tool").and_then(Value::as_str).map(str::to_owned),
                p.get("arguments")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default(),
                true,
            ),
            None => (None, Map::new(), false),
        };
        let mut text_used = false;
        if tool_name.is_none() {
            if let Some(d) = &data {
                if let Some(name) = d.get("tool").and_then(Value::as_str) {
                    tool_name = Some(name.to_owned());
                    if let Some(a) = d.get("arguments").and_then(Value::as_object) {
                        arguments.extend(a.clone());
                    }
                }
            }
        } else if let Some(d) = &data {
            arguments.extend(d.clone());
        }
        if tool_name.is_none() {
            tool_name = metadata_str(&ctx.message, SKILL_KEY).or_else(|| {
                ctx.metadata.as_ref().and_then(|m| {
                    agentwire_types::json::from_struct(m)
                        .get(SKILL_KEY)
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
            });
            if tool_name.is_some() {
                if let Some(d) = &data {
                    arguments.extend(d.clone());
                }
            }
        }
        if tool_name.is_none() {
            // An answer to "which tool?" is its name; a request in words
            // picks the tool whose description fits.
            let named = self
                .tools
                .iter()
                .find(|t| t.name.eq_ignore_ascii_case(text.trim()));
            match named.or_else(|| self.tool_for_words(&text)) {
                Some(t) => {
                    text_used = named.is_some();
                    tool_name = Some(t.name.to_string());
                }
                None => return self.ask_for_tool(&task).await,
            }
        }
        let Some(name) = tool_name else {
            return self.ask_for_tool(&task).await;
        };
        let Some(tool) = self.tool(&name) else {
            let known: Vec<&str> = self.tools.iter().map(|t| t.name.as_ref()).collect();
            return task
                .reject(format!(
                    "the MCP server has no tool {name:?}; its tools are: {}",
                    known.join(", ")
                ))
                .await;
        };
        let missing: Vec<String> = required(tool)
            .into_iter()
            .filter(|r| !arguments.contains_key(r))
            .collect();
        let mut missing = missing;
        if missing.len() == 1
            && !text_used
            && !text.trim().is_empty()
            && (answering || data.is_none())
        {
            let v = value_of(tool, &missing[0], &text);
            arguments.insert(missing.remove(0), v);
        }
        if !missing.is_empty() {
            let mut q = format!("The tool {} needs more input:", tool.name);
            for m in &missing {
                q.push_str(&format!(
                    "\n- {m}{}{}",
                    arg_type(tool, m)
                        .map(|t| format!(" ({t})"))
                        .unwrap_or_default(),
                    {
                        let d = arg_description(tool, m);
                        if d.is_empty() {
                            String::new()
                        } else {
                            format!(": {d}")
                        }
                    }
                ));
            }
            q.push_str(if missing.len() == 1 {
                "\nReply with the value as text, or a data part holding it."
            } else {
                "\nReply with a data part holding them (a JSON object)."
            });
            let pending = json!({"tool": tool.name, "arguments": arguments});
            return self.ask(&task, q, pending).await;
        }
        task.progress(format!("calling the MCP tool {}", tool.name))
            .await?;
        let params = CallToolRequestParams::new(tool.name.clone()).with_arguments(arguments);
        let result = tokio::select! {
            r = self.peer.call_tool(params) => r,
            () = ctx.canceled() => return Ok(()),
        };
        match result {
            Ok(r) => {
                let (text, artifact) = result_artifact(&tool.name, &r);
                if r.is_error == Some(true) {
                    return task
                        .fail(format!("the tool {} failed: {text}", tool.name))
                        .await;
                }
                task.add_artifact(artifact).await?;
                task.complete().await
            }
            Err(e) => {
                task.fail(format!("the MCP server could not run {}: {e}", tool.name))
                    .await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_lower_case_and_long_enough() {
        let w = words("Reverse the TEXT, a b");
        assert!(w.contains("reverse") && w.contains("text") && w.contains("the"));
        assert!(!w.contains("a"));
    }
}
