//! Echo agent on tomtom215's a2a-rust (crate `a2a-protocol-server`, an
//! independent Rust SDK), for scripts/peers-bench.sh.
//!
//! Usage: peer-rust-tomtom PORT
//!
//! Serves JSON-RPC at `/` and the agent card at
//! `/.well-known/agent-card.json` on 127.0.0.1:PORT. A SendMessage gets back
//! a completed task holding one artifact named "echo" whose parts are the
//! text parts of the message, as `a2a serve --agent echo` answers; the task
//! is kept in the SDK's default (in-memory) task store.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use a2a_protocol_server::request_context::RequestContext;
use a2a_protocol_server::streaming::EventQueueWriter;
use a2a_protocol_server::{
    AgentExecutor, EventEmitter, JsonRpcDispatcher, RequestHandlerBuilder, serve,
};
use a2a_protocol_types::artifact::Artifact;
use a2a_protocol_types::error::A2aResult;
use a2a_protocol_types::events::{StreamResponse, TaskArtifactUpdateEvent};
use a2a_protocol_types::message::Part;
use a2a_protocol_types::task::{ContextId, TaskState};
use a2a_protocol_types::{AgentCard, AgentInterface, AgentSkill};

struct Echo;

impl AgentExecutor for Echo {
    fn execute<'a>(
        &'a self,
        ctx: &'a RequestContext,
        queue: &'a dyn EventQueueWriter,
    ) -> Pin<Box<dyn Future<Output = A2aResult<()>> + Send + 'a>> {
        Box::pin(async move {
            let parts: Vec<Part> = ctx.message.texts().map(Part::text).collect();
            let mut artifact = Artifact::new(uuid::Uuid::new_v4().to_string(), parts);
            artifact.name = Some("echo".to_owned());
            queue
                .write(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                    task_id: ctx.task_id.clone(),
                    context_id: ContextId::new(ctx.context_id.clone()),
                    artifact,
                    append: None,
                    last_chunk: Some(true),
                    metadata: None,
                }))
                .await?;
            EventEmitter::new(ctx, queue)
                .status(TaskState::Completed)
                .await
        })
    }
}

#[tokio::main]
async fn main() {
    let port: u16 = match std::env::args().nth(1).map(|a| a.parse()) {
        Some(Ok(port)) => port,
        _ => {
            eprintln!("usage: peer-rust-tomtom PORT");
            std::process::exit(2);
        }
    };
    let card = AgentCard::new(
        "Echo Agent",
        "0.0.0",
        AgentInterface::jsonrpc(format!("http://127.0.0.1:{port}/")),
    )
    .with_description("Repeats the text it is sent as an artifact.")
    .with_skill(
        AgentSkill::new("echo", "Echo", "Repeats the text it is sent.").with_tags(["echo"]),
    );
    let handler = match RequestHandlerBuilder::new(Echo)
        .with_agent_card(card)
        .build()
    {
        Ok(handler) => Arc::new(handler),
        Err(e) => {
            eprintln!("peer-rust-tomtom: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = serve(("127.0.0.1", port), JsonRpcDispatcher::new(handler)).await {
        eprintln!("peer-rust-tomtom: cannot serve on 127.0.0.1:{port}: {e}");
        std::process::exit(1);
    }
}
