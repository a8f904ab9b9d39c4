//! The MCP side of `a2a mcp` (rmcp): the tools with their JSON schemas and
//! descriptions written for a model, the artifact versions as resources
//! (`a2a://artifact/ID`), and progress notifications from the status events
//! of running tasks, over stdio or streamable HTTP.

use std::sync::Arc;

use rmcp::handler::server::common::{schema_for_empty_input, schema_for_type};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceContents, ResourceTemplate, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::schemars::JsonSchema;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde::Deserialize;
use serde_json::{Value, json};

use super::bridge::{
    ARTIFACT_URI_PREFIX, Bridge, Output, ProgressSink, artifact_text, artifact_uri,
};
use crate::error::CliError;

/// What the server tells the host about itself.
const INSTRUCTIONS: &str = "\
These tools reach A2A agents: independent agents that do work in tasks. A task may stop \
to ask a question (state input-required): answer it with continue_task. Long work returns \
a task id to check later with get_task. Every result ends with `next`: what the agent \
needs now. Results (artifacts) come in versions: refine asks for a new version of one, \
list_versions shows them, accept_version marks the one to keep. The bridge remembers \
all of it between calls, so pass the ids it returns.";

// ----- arguments ---------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct DescribeAgentArgs {
    /// The agent: a name from list_agents, or any agent's host:port, URL or agent card file.
    agent: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct SendMessageArgs {
    /// The agent: a name from list_agents, or any agent's host:port, URL or agent card file.
    agent: String,
    /// What to ask the agent, in words.
    text: String,
    /// Local files to attach (paths on this machine, read by the bridge).
    #[serde(default)]
    files: Vec<String>,
    /// Structured input to attach (any JSON value), when the agent takes some.
    #[serde(default)]
    data: Option<Value>,
    /// The id of the agent skill the message is for (see describe_agent).
    #[serde(default)]
    skill: Option<String>,
    /// Go on in an existing conversation (a contextId from an earlier result): a new task in it.
    #[serde(default)]
    context_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct ContinueTaskArgs {
    /// The task waiting for input (taskId of an earlier result).
    task_id: String,
    /// The answer to the agent's question.
    text: String,
    /// Structured input to attach to the answer (any JSON value).
    #[serde(default)]
    data: Option<Value>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct TaskIdArgs {
    /// The task (taskId of an earlier result).
    task_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct ListVersionsArgs {
    /// Only this conversation's versions (a contextId); all of them when omitted.
    #[serde(default)]
    context_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct ArtifactIdArgs {
    /// The artifact version (artifactId of an earlier result or of list_versions).
    artifact_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct RefineArgs {
    /// The artifact version to improve (artifactId of an earlier result or of list_versions).
    artifact_id: String,
    /// What to change, in words.
    text: String,
}

// ----- the tools -----------------------------------------------------------

fn tools() -> Vec<Tool> {
    let read_only = || ToolAnnotations::new().read_only(true).open_world(true);
    vec![
        Tool::new(
            "list_agents",
            "List the A2A agents this bridge is configured with: each agent's name (to pass as `agent`), \
             what it does, and its skills with example requests. Call it first to choose an agent.",
            schema_for_empty_input(),
        )
        .with_annotations(read_only()),
        Tool::new(
            "describe_agent",
            "Describe one agent in full from its agent card: description, skills with examples, the \
             kinds of input it accepts (e.g. files) and what it produces.",
            schema_for_type::<DescribeAgentArgs>(),
        )
        .with_annotations(read_only()),
        Tool::new(
            "send_message",
            "Send work to an agent: text, optionally local files and structured data. Waits a bounded time \
             and returns the agent's answer: a direct reply, or a task with its state, the question it asks \
             when it needs input, and its artifacts (results) as text. If the agent asks a question, answer \
             with continue_task; if it is still working, check later with get_task. Pass context_id to go \
             on in an earlier conversation.",
            schema_for_type::<SendMessageArgs>(),
        )
        .with_annotations(ToolAnnotations::new().open_world(true)),
        Tool::new(
            "continue_task",
            "Answer a task that waits for input (state input-required) or for authorization \
             (auth-required): the answer goes to the same task, which then goes on. Returns the task as \
             send_message does.",
            schema_for_type::<ContinueTaskArgs>(),
        )
        .with_annotations(ToolAnnotations::new().open_world(true)),
        Tool::new(
            "get_task",
            "The current state of a task, asked of its agent: its state, question or status message, and \
             artifacts. Use it to check on work that was still running.",
            schema_for_type::<TaskIdArgs>(),
        )
        .with_annotations(read_only()),
        Tool::new(
            "cancel_task",
            "Ask the agent to stop a task that is still running.",
            schema_for_type::<TaskIdArgs>(),
        )
        .with_annotations(
            ToolAnnotations::new()
                .destructive(true)
                .idempotent(true)
                .open_world(true),
        ),
        Tool::new(
            "list_versions",
            "List the versions of the artifacts (results) produced so far, by conversation: name, version \
             number, artifactId, which version each refines, and which one was accepted.",
            schema_for_type::<ListVersionsArgs>(),
        )
        .with_annotations(ToolAnnotations::new().read_only(true).open_world(false)),
        Tool::new(
            "accept_version",
            "Mark an artifact version as the one to keep (no other version of that artifact in its \
             conversation stays accepted).",
            schema_for_type::<ArtifactIdArgs>(),
        )
        .with_annotations(
            ToolAnnotations::new()
                .idempotent(true)
                .destructive(false)
                .open_world(false),
        ),
        Tool::new(
            "refine",
            "Ask for a new version of an artifact: a new task in the same conversation that names the \
             artifact to change and says, in words, what to change. Returns the new task and its \
             artifacts (the next version).",
            schema_for_type::<RefineArgs>(),
        )
        .with_annotations(ToolAnnotations::new().open_world(true)),
    ]
}

/// The MCP server: the tools over a [`Bridge`].
#[derive(Clone)]
pub struct McpServer {
    bridge: Arc<Bridge>,
}

impl McpServer {
    pub fn new(bridge: Arc<Bridge>) -> Self {
        Self { bridge }
    }

    async fn call(
        &self,
        name: &str,
        args: Value,
        progress: ProgressSink,
    ) -> Result<Output, CliError> {
        let b = &self.bridge;
        match name {
            "list_agents" => Ok(b.list_agents().await),
            "describe_agent" => {
                let a: DescribeAgentArgs = parse(args)?;
                b.describe_agent(&a.agent).await
            }
            "send_message" => {
                let a: SendMessageArgs = parse(args)?;
                b.send_message(
                    &a.agent,
                    &a.text,
                    &a.files,
                    a.data,
                    a.skill.as_deref(),
                    a.context_id.as_deref(),
                    progress,
                )
                .await
            }
            "continue_task" => {
                let a: ContinueTaskArgs = parse(args)?;
                b.continue_task(&a.task_id, &a.text, a.data, progress).await
            }
            "get_task" => {
                let a: TaskIdArgs = parse(args)?;
                b.get_task(&a.task_id).await
            }
            "cancel_task" => {
                let a: TaskIdArgs = parse(args)?;
                b.cancel_task(&a.task_id).await
            }
            "list_versions" => {
                let a: ListVersionsArgs = parse(args)?;
                b.list_versions(a.context_id.as_deref()).await
            }
            "accept_version" => {
                let a: ArtifactIdArgs = parse(args)?;
                b.accept_version(&a.artifact_id).await
            }
            "refine" => {
                let a: RefineArgs = parse(args)?;
                b.refine(&a.artifact_id, &a.text, progress).await
            }
            other => Err(CliError::usage(format!("no tool named {other:?}"))),
        }
    }
}

fn parse<T: serde::de::DeserializeOwned>(args: Value) -> Result<T, CliError> {
    serde_json::from_value(args).map_err(|e| CliError::usage(format!("invalid arguments: {e}")))
}

/// A tool's failure as a result the model reads (not a protocol error).
fn error_result(e: &CliError) -> CallToolResult {
    let mut text = format!("Error: {} ({})\n", e.message, e.code);
    if let Some(h) = &e.hint {
        text.push_str(&format!("Next: {h}\n"));
    }
    let mut r = CallToolResult::error(vec![ContentBlock::text(text)]);
    r.structured_content = Some(json!({
        "error": {"code": e.code, "message": e.message, "hint": e.hint},
    }));
    r
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .build();
        let mut info = Implementation::new("a2a-mcp", env!("CARGO_PKG_VERSION"));
        info.title = Some("A2A agents (a2a mcp)".into());
        ServerConfig::new(capabilities)
            .with_server_info(info)
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !tools().iter().any(|t| t.name == request.name) {
            return Err(ErrorData::invalid_params(
                format!("no tool named {:?}", request.name),
                None,
            ));
        }
        let args = Value::Object(request.arguments.unwrap_or_default());
        // Progress notifications, in order, while the call runs (only when
        // the caller asked for them with a progress token).
        let (sink, forward) = match context.meta.get_progress_token() {
            Some(token) => {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
                let peer = context.peer.clone();
                let forward = tokio::spawn(async move {
                    let mut n = 0.0;
                    while let Some(line) = rx.recv().await {
                        n += 1.0;
                        let p = ProgressNotificationParam::new(token.clone(), n).with_message(line);
                        if peer.notify_progress(p).await.is_err() {
                            break;
                        }
                    }
                });
                (Some(tx), Some(forward))
            }
            None => (None, None),
        };
        let result = tokio::select! {
            r = self.call(&request.name, args, sink) => Some(r),
            () = context.ct.cancelled() => None,
        };
        if let Some(f) = forward {
            // The sender is gone: the forwarder sends what is left and ends.
            let _ = f.await;
        }
        let result = match result {
            Some(Ok(out)) => {
                let mut r = CallToolResult::success(vec![ContentBlock::text(out.text)]);
                r.structured_content = Some(out.json);
                r
            }
            Some(Err(e)) => error_result(&e),
            None => error_result(&CliError::usage(
                "the call was cancelled; a task it started goes on (get_task shows it)",
            )),
        };
        Ok(CallToolResponse::Complete(result))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let versions = self
            .bridge
            .all_versions()
            .await
            .map_err(|e| ErrorData::internal_error(e.message, None))?;
        let resources = versions
            .into_iter()
            .map(|(v, n)| {
                Resource::new(
                    artifact_uri(&v.artifact_id),
                    format!("{} v{n}", v.artifact_name),
                )
                .with_description(format!(
                    "Version {n} of the artifact {} (task {}, context {}){}",
                    v.artifact_name,
                    v.task_id,
                    v.context_id,
                    if v.accepted_by_user { ", accepted" } else { "" }
                ))
                .with_mime_type(mime_of(&v.artifact))
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(format!("{ARTIFACT_URI_PREFIX}{{artifactId}}"), "artifact")
                .with_description("An artifact version recorded by the bridge, by its artifactId"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let Some(id) = request.uri.strip_prefix(ARTIFACT_URI_PREFIX) else {
            return Err(ErrorData::resource_not_found(
                format!(
                    "{} is not an artifact of this bridge (a2a://artifact/ID)",
                    request.uri
                ),
                None,
            ));
        };
        let v = self
            .bridge
            .version(id)
            .await
            .map_err(|e| ErrorData::internal_error(e.message, None))?
            .ok_or_else(|| {
                ErrorData::resource_not_found(format!("no artifact version {id}"), None)
            })?;
        let contents = vec![
            ResourceContents::text(artifact_text(&v.artifact), request.uri.clone())
                .with_mime_type(mime_of(&v.artifact)),
        ];
        Ok(ReadResourceResponse::Complete(ReadResourceResult::new(
            contents,
        )))
    }
}

/// The media type of an artifact's text: that of its text parts when they
/// agree (a streamed artifact has a part per chunk), JSON for a single data
/// part, else plain text.
fn mime_of(a: &agentwire_types::Artifact) -> String {
    if let [p] = a.parts.as_slice()
        && p.as_data().is_some()
    {
        return "application/json".into();
    }
    let mut types = a
        .parts
        .iter()
        .map(|p| p.as_text().map(|_| p.media_type.as_str()));
    match types.next() {
        Some(Some(first)) if !first.is_empty() && types.all(|t| t == Some(first)) => {
            first.to_owned()
        }
        _ => "text/plain".into(),
    }
}

/// Serves MCP on stdin / stdout until the host closes them.
pub async fn serve_stdio(bridge: Arc<Bridge>) -> Result<(), CliError> {
    let server = McpServer::new(bridge)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| CliError::internal(format!("the MCP session did not start: {e}")))?;
    server
        .waiting()
        .await
        .map_err(|e| CliError::internal(format!("the MCP session failed: {e}")))?;
    Ok(())
}

/// Serves MCP over streamable HTTP at `http://ADDR/mcp` until interrupted.
pub async fn serve_http(bridge: Arc<Bridge>, addr: &str) -> Result<(), CliError> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| CliError::usage(format!("--http {addr}: cannot listen: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| CliError::internal(format!("--http {addr}: {e}")))?;
    let server = McpServer::new(bridge);
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    println!("MCP server (streamable HTTP) on http://{local}/mcp");
    use std::io::Write;
    let _ = std::io::stdout().flush();
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| CliError::internal(format!("the MCP HTTP server failed: {e}")))
}
