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
        "Echo agent on http://{} (Ctrl-C stops it)",
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
