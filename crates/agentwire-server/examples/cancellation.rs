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
async fn main() -> Result<(), agentwire_server::StartError> {
    // The port first (the first argument, 8080 without one), then the
    // address: it is printed only once it is ours.
    let bound = server().bind_local(8080).await?;
    println!("Countdown agent on {} (Ctrl-C stops it)", bound.base_url());
    Ok(bound.run_until(agentwire_server::shutdown_signal()).await?)
}
