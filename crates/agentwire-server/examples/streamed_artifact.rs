//! A streamed artifact: the agent writes a Markdown report piece by piece
//! with `artifact_chunk` (the first chunk creates the artifact, the next
//! ones are appended, the last one says so). A streaming client sees each
//! chunk as it is written; `GetTask` shows the one merged artifact.
//!
//! ```sh
//! cargo run -p agentwire-server --example streamed_artifact           # 127.0.0.1:8080
//! cargo run -p agentwire-server --example streamed_artifact -- 9000   # another port
//! a2a send -a 127.0.0.1:8080 --stream "coffee"
//! ```

use std::time::Duration;

use agentwire_server::{A2aServer, AgentExecutor, RequestContext, TaskUpdater};
use agentwire_types::{A2aResult, AgentCard, AgentSkill, Artifact, new_id};

/// Writes a short report on the topic it is sent.
pub struct Reporter;

impl AgentExecutor for Reporter {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        let topic = ctx.text();
        let chunks = [
            format!("# A report on {topic}\n\n"),
            "## Findings\n\nEverything is in order.\n\n".to_owned(),
            "## Next steps\n\nNone: this is an example.\n".to_owned(),
        ];
        task.start_work().await?;
        // Every chunk of one artifact carries the same artifact id.
        let id = new_id();
        for (i, chunk) in chunks.iter().enumerate() {
            let piece = Artifact::text("report.md", chunk.as_str()).with_id(&id);
            let append = i > 0;
            let last_chunk = i + 1 == chunks.len();
            task.artifact_chunk(piece, append, last_chunk).await?;
            // Real work would happen here; the pause makes the stream visible.
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        task.complete().await
    }
}

/// The agent with its card (streaming is declared by default), ready to bind.
pub fn server() -> A2aServer {
    let card = AgentCard::new(
        "Reporter",
        "Writes a short report, streamed as it goes",
        "1.0.0",
    )
    .with_output_modes(["text/markdown"])
    .with_skill(
        AgentSkill::new(
            "report",
            "Report",
            "A Markdown report on a topic",
            ["report"],
        )
        .with_example("coffee"),
    );
    A2aServer::new(card, Reporter)
}

#[tokio::main]
async fn main() -> Result<(), agentwire_server::StartError> {
    // The port first (the first argument, 8080 without one), then the
    // address: it is printed only once it is ours.
    let bound = server().bind_local(8080).await?;
    println!("Reporter agent on {} (Ctrl-C stops it)", bound.base_url());
    Ok(bound.run_until(agentwire_server::shutdown_signal()).await?)
}
