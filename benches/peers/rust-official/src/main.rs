//! Echo agent on the official A2A Rust SDK (crates `a2a-lf` and
//! `a2a-server-lf`, repository a2aproject/a2a-rs), for scripts/peers-bench.sh.
//!
//! Usage: peer-rust-official PORT
//!
//! Serves JSON-RPC at `/` and the agent card at
//! `/.well-known/agent-card.json` on 127.0.0.1:PORT. A SendMessage gets back
//! a completed task holding one artifact named "echo" whose parts are the
//! text parts of the message, as `a2a serve --agent echo` answers; the task
//! is kept in the SDK's in-memory task store (its default handler).

use std::sync::Arc;

use a2a::{
    AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Artifact, Part, PartContent,
    StreamResponse, TRANSPORT_PROTOCOL_JSONRPC, Task, TaskState, TaskStatus,
};
use a2a_server::{
    AgentExecutor, DefaultRequestHandler, ExecutorContext, InMemoryTaskStore, StaticAgentCard,
    agent_card::agent_card_router, jsonrpc::jsonrpc_router,
};
use futures::stream::{self, BoxStream};

struct Echo;

impl Echo {
    /// The task in its final state; its history is the message received
    /// (the SDK's handler does not add it to a task the agent returns, and
    /// the other servers of the bench answer with it).
    fn finished(ctx: ExecutorContext, state: TaskState, artifacts: Option<Vec<Artifact>>) -> Task {
        Task {
            id: ctx.task_id,
            context_id: ctx.context_id,
            status: TaskStatus {
                state,
                message: None,
                timestamp: Some(chrono::Utc::now()),
            },
            artifacts,
            history: ctx.message.map(|m| vec![m]),
            metadata: None,
        }
    }
}

impl AgentExecutor for Echo {
    fn execute(
        &self,
        ctx: ExecutorContext,
    ) -> BoxStream<'static, Result<StreamResponse, a2a::A2AError>> {
        let parts: Vec<Part> = ctx
            .message
            .iter()
            .flat_map(|m| m.parts.iter())
            .filter(|p| matches!(p.content, PartContent::Text(_)))
            .cloned()
            .collect();
        let artifact = Artifact {
            artifact_id: a2a::new_artifact_id(),
            name: Some("echo".to_owned()),
            description: None,
            parts,
            metadata: None,
            extensions: None,
        };
        let task = Self::finished(ctx, TaskState::Completed, Some(vec![artifact]));
        Box::pin(stream::once(async move { Ok(StreamResponse::Task(task)) }))
    }

    fn cancel(
        &self,
        ctx: ExecutorContext,
    ) -> BoxStream<'static, Result<StreamResponse, a2a::A2AError>> {
        let task = Self::finished(ctx, TaskState::Canceled, None);
        Box::pin(stream::once(async move { Ok(StreamResponse::Task(task)) }))
    }
}

fn card(port: u16) -> AgentCard {
    AgentCard {
        name: "Echo Agent".to_owned(),
        description: "Repeats the text it is sent as an artifact.".to_owned(),
        version: "0.0.0".to_owned(),
        supported_interfaces: vec![AgentInterface::new(
            format!("http://127.0.0.1:{port}/"),
            TRANSPORT_PROTOCOL_JSONRPC,
        )],
        capabilities: AgentCapabilities::default(),
        default_input_modes: vec!["text/plain".to_owned()],
        default_output_modes: vec!["text/plain".to_owned()],
        skills: vec![AgentSkill {
            id: "echo".to_owned(),
            name: "Echo".to_owned(),
            description: "Repeats the text it is sent.".to_owned(),
            tags: vec!["echo".to_owned()],
            examples: None,
            input_modes: None,
            output_modes: None,
            security_requirements: None,
        }],
        provider: None,
        documentation_url: None,
        icon_url: None,
        security_schemes: None,
        security_requirements: None,
        signatures: None,
    }
}

#[tokio::main]
async fn main() {
    let port: u16 = match std::env::args().nth(1).map(|a| a.parse()) {
        Some(Ok(port)) => port,
        _ => {
            eprintln!("usage: peer-rust-official PORT");
            std::process::exit(2);
        }
    };
    let handler = Arc::new(DefaultRequestHandler::new(Echo, InMemoryTaskStore::new()));
    let app = jsonrpc_router(handler).merge(agent_card_router(Arc::new(StaticAgentCard::new(
        card(port),
    ))));
    let listener = match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("peer-rust-official: cannot listen on 127.0.0.1:{port}: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = axum::serve(listener, app).await {
        eprintln!("peer-rust-official: {e}");
        std::process::exit(1);
    }
}
