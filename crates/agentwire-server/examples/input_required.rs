//! A multi-turn agent: it asks a question (`require_input`, the task waits
//! in `TASK_STATE_INPUT_REQUIRED`), and the client's answer, a message
//! naming the task, calls the agent again with `ctx.task` set to the task
//! as it was. An answer it cannot use gets the question again.
//!
//! ```sh
//! cargo run -p agentwire-server --example input_required           # 127.0.0.1:8080
//! cargo run -p agentwire-server --example input_required -- 9000   # another port
//! a2a send -a 127.0.0.1:8080 "a coffee, please"     # prints the task id and the question
//! a2a send -a 127.0.0.1:8080 --task-id <taskId> "large"
//! ```

use agentwire_server::{A2aServer, AgentExecutor, RequestContext, TaskUpdater};
use agentwire_types::{A2aResult, AgentCard, AgentSkill, Artifact};

/// The sizes the agent knows.
pub const SIZES: [&str; 3] = ["small", "medium", "large"];

/// The question it asks.
pub const QUESTION: &str = "What size: small, medium or large?";

/// Takes coffee orders; needs to know the size.
pub struct Barista;

impl AgentExecutor for Barista {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        let text = ctx.text().to_lowercase();
        let size = SIZES.iter().find(|s| text.contains(*s));
        match (&ctx.task, size) {
            // A size, in the first message or in an answer: done.
            (_, Some(size)) => {
                let order = format!("one {size} coffee");
                task.add_artifact(Artifact::text("order", order)).await?;
                task.complete().await
            }
            // An answer without a size: ask again (the task keeps waiting).
            (Some(_), None) => {
                task.require_input(format!("Sorry, I did not get that. {QUESTION}"))
                    .await
            }
            // A new order without a size: ask.
            (None, None) => task.require_input(QUESTION).await,
        }
    }
}

/// The agent with its card, ready to bind.
pub fn server() -> A2aServer {
    let card = AgentCard::new(
        "Barista",
        "Takes coffee orders, asking for what is missing",
        "1.0.0",
    )
    .with_skill(
        AgentSkill::new(
            "order",
            "Order a coffee",
            "Asks for the size when not given",
            ["coffee"],
        )
        .with_example("a coffee, please")
        .with_example("a large coffee"),
    );
    A2aServer::new(card, Barista)
}

#[tokio::main]
async fn main() -> Result<(), agentwire_server::StartError> {
    // The port first (the first argument, 8080 without one), then the
    // address: it is printed only once it is ours.
    let bound = server().bind_local(8080).await?;
    println!("Barista agent on {} (Ctrl-C stops it)", bound.base_url());
    Ok(bound.run_until(agentwire_server::shutdown_signal()).await?)
}
