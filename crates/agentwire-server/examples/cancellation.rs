//! Cancellation: long work that stops as soon as the client cancels the
//! task. `CancelTask` fires `ctx.canceled()` (the agent leaves its loop at
//! once), then calls the agent's optional `cancel` hook (the place to
//! release what the work held); the runtime marks the task canceled
//! whatever the agent does, and refuses its later updates.
//!
//! ```sh
//! cargo run -p agentwire-server --example cancellation           # 127.0.0.1:8080
//! cargo run -p agentwire-server --example cancellation -- 9000   # another port
//! a2a send -a 127.0.0.1:8080 --async "count down"   # prints the task id at once
//! a2a task cancel -a 127.0.0.1:8080 <taskId>
//! ```

use std::time::Duration;

use agentwire_server::{A2aServer, AgentExecutor, RequestContext, TaskUpdater};
use agentwire_types::{A2aResult, AgentCard, AgentSkill};

/// Counts down a minute, a progress status every second.
pub struct Countdown;

impl AgentExecutor for Countdown {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.start_work().await?;
        for left in (1..=60).rev() {
            task.progress(format!("{left} s to go")).await?;
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
                // Canceled: stop now. The runtime records the cancellation.
                () = ctx.canceled() => return Ok(()),
            }
        }
        task.complete_with("Liftoff!").await
    }

    /// Called after `ctx.canceled()` fired, with the task as it was:
    /// release what the work held (files, connections, other agents'
    /// tasks). There is no need to record the cancellation: the runtime
    /// does.
    async fn cancel(&self, ctx: RequestContext, _task: TaskUpdater) -> A2aResult<()> {
        println!("task {} canceled: nothing to clean up", ctx.task_id);
        Ok(())
    }
}

/// The agent with its card, ready to bind.
pub fn server() -> A2aServer {
    let card = AgentCard::new(
        "Countdown",
        "Counts down a minute; cancel it to stop",
        "1.0.0",
    )
    .with_skill(
        AgentSkill::new(
            "countdown",
            "Countdown",
            "A minute of work, cancelable",
            ["cancel"],
        )
        .with_example("count down"),
    );
    A2aServer::new(card, Countdown)
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
        "Countdown agent on http://{} (Ctrl-C stops it)",
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
