//! Mounting the agent in an axum application of your own:
//! `agentwire_server::router(handler, options)` is an axum `Router` serving
//! the agent card, JSON-RPC (`POST /`) and HTTP+JSON (the REST paths);
//! merge it with your routes and serve it as you serve the rest. The card
//! names the URLs the agent is reached at (here the listener's address).
//!
//! (`A2aServer::serve` also serves gRPC on the same port and bounds request
//! heads; with `axum::serve` gRPC is left out, `RouterOptions { grpc:
//! false, .. }`, and the card does not offer it.)
//!
//! ```sh
//! cargo run -p agentwire-server --example axum_app           # 127.0.0.1:8080
//! cargo run -p agentwire-server --example axum_app -- 9000   # another port
//! curl http://127.0.0.1:8080/health                          # the application's own route
//! a2a send -a 127.0.0.1:8080 "hello"                          # the agent
//! ```

use std::net::SocketAddr;

use agentwire_server::{
    AgentExecutor, RequestContext, RequestHandler, RouterOptions, TaskUpdater, router,
};
use agentwire_types::{A2aResult, AgentCard, AgentSkill, Artifact, binding};
use axum::Router;
use axum::routing::get;

/// The agent.
pub struct Echo;

impl AgentExecutor for Echo {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.add_artifact(Artifact::text("echo", ctx.text()))
            .await?;
        task.complete().await
    }
}

/// The application: its own `/health` route beside the agent, whose card
/// points at `addr`.
pub fn app(addr: SocketAddr) -> Router {
    let base = format!("http://{addr}");
    let card = AgentCard::new("Echo", "Repeats what you say, inside an axum app", "1.0.0")
        .with_streaming(true)
        .with_interface(format!("{base}/"), binding::JSONRPC)
        .with_interface(base, binding::HTTP_JSON)
        .with_skill(AgentSkill::new(
            "echo",
            "Echo",
            "Repeats the text",
            ["echo"],
        ));
    let handler = RequestHandler::builder(card, Echo).build();
    let options = RouterOptions {
        grpc: false,
        ..RouterOptions::default()
    };
    Router::new()
        .route("/health", get(|| async { "ok" }))
        .merge(router(handler, &options))
}

#[tokio::main]
async fn main() -> Result<(), agentwire_server::StartError> {
    // The port first (the first argument, 8080 without one), then the
    // address: it is printed only once it is ours.
    let (listener, url) = agentwire_server::listen_local(8080).await?;
    let addr = listener.local_addr()?;
    println!("App with an agent on {url} (Ctrl-C stops it)");
    axum::serve(listener, app(addr))
        .with_graceful_shutdown(agentwire_server::shutdown_signal())
        .await?;
    Ok(())
}
