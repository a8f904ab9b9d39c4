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
async fn main() -> std::process::ExitCode {
    let port = match port_from_args() {
        Ok(port) => port,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    // The port first, then the address: it is printed only once it is ours.
    let bound = match server().bind(("127.0.0.1", port)).await {
        Ok(bound) => bound,
        Err(e) => {
            eprintln!(
                "error: cannot listen on 127.0.0.1:{port} ({e}); another program may be \
                 using that port: stop it, or give this example another port (`-- 9000`)"
            );
            return std::process::ExitCode::FAILURE;
        }
    };
    println!(
        "Barista agent on http://{} (Ctrl-C stops it)",
        bound.local_addr()
    );
    match bound.run_until(agentwire_server::shutdown_signal()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: the server stopped: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The port given as the first argument, 8080 without one.
fn port_from_args() -> std::io::Result<u16> {
    std::env::args().nth(1).map_or(Ok(8080), |p| {
        p.parse().map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{p:?} is not a port number (1-65535)"),
            )
        })
    })
}
