//! The hello agent: the smallest agent there is, the one of the README's
//! "Writing an agent". Every message becomes a completed task whose one
//! artifact repeats the text.
//!
//! ```sh
//! cargo run -p agentwire-server --example echo           # 127.0.0.1:8080
//! cargo run -p agentwire-server --example echo -- 9000   # another port
//! a2a send -a 127.0.0.1:8080 "hello"                     # or the hello client:
//! cargo run -p agentwire-client --example hello -- http://127.0.0.1:8080
//! ```

use agentwire_server::{A2aServer, AgentExecutor, RequestContext, TaskUpdater};
use agentwire_types::{A2aResult, AgentCard, AgentSkill, Artifact};

/// The agent.
pub struct Echo;

impl AgentExecutor for Echo {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.start_work().await?;
        task.add_artifact(Artifact::text("echo", ctx.text()))
            .await?;
        task.complete().await
    }
}

/// The agent with its card, ready to bind.
pub fn server() -> A2aServer {
    let card = AgentCard::new("Echo", "Repeats what you say", "1.0.0").with_skill(AgentSkill::new(
        "echo",
        "Echo",
        "Repeats the text",
        ["echo"],
    ));
    A2aServer::new(card, Echo)
}

#[tokio::main]
async fn main() -> Result<(), agentwire_server::StartError> {
    // The port first (the first argument, 8080 without one), then the
    // address: it is printed only once it is ours.
    let bound = server().bind_local(8080).await?;
    println!("Echo agent on {} (Ctrl-C stops it)", bound.base_url());
    Ok(bound.run_until(agentwire_server::shutdown_signal()).await?)
}
