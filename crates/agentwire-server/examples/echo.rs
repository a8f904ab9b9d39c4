//! An echo agent in about 20 lines: `cargo run -p agentwire-server --example echo`
//! then `curl http://127.0.0.1:8080/.well-known/agent-card.json` (another
//! address: `--example echo -- 127.0.0.1:9000`).
use agentwire_server::{A2aServer, AgentExecutor, RequestContext, TaskUpdater};
use agentwire_types::{A2aResult, AgentCard, AgentSkill, Artifact};

struct Echo;

impl AgentExecutor for Echo {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.start_work().await?;
        task.add_artifact(Artifact::text("echo", ctx.text()))
            .await?;
        task.complete().await
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let card = AgentCard::new("Echo", "Repeats what you say", "1.0.0").with_skill(AgentSkill::new(
        "echo",
        "Echo",
        "Repeats the text",
        ["echo"],
    ));
    let addr = std::env::args().nth(1);
    let addr = addr.as_deref().unwrap_or("127.0.0.1:8080");
    A2aServer::new(card, Echo).serve(addr).await
}
