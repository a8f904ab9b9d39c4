//! Push notifications: the agent works a few seconds on each task, and
//! every update of a task with a push config (sent inline with the message,
//! or created later with `CreateTaskPushNotificationConfig`) is POSTed to
//! the config's webhook: signed, in order, retried. Turning it on is one
//! call, `.push(PushConfig)`, which also declares
//! `capabilities.pushNotifications` in the card.
//!
//! This example allows loopback webhooks so that you can receive them on
//! your machine; an agent on a network keeps the default policy (public
//! webhooks only). For notifications that survive a restart, give the
//! config a `SqliteOutbox` and a stable `PushSigner` (see
//! `docs/push-notifications.md`).
//!
//! ```sh
//! cargo run -p agentwire-server --example push_notifications           # 127.0.0.1:8080
//! cargo run -p agentwire-server --example push_notifications -- 9000   # another port
//! # a webhook that checks the token and the signature, and prints each notification:
//! a2a webhook --port 9000 --token s3cret -a 127.0.0.1:8080 --until-final &
//! a2a send -a 127.0.0.1:8080 --push-url http://127.0.0.1:9000/ --push-token s3cret "hello"
//! ```

use std::time::Duration;

use agentwire_server::{A2aServer, AgentExecutor, PushConfig, RequestContext, TaskUpdater};
use agentwire_types::{A2aResult, AgentCard, AgentSkill, Artifact};

/// Works three short steps, then answers.
pub struct Worker;

impl AgentExecutor for Worker {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.start_work().await?;
        for step in 1..=3 {
            task.progress(format!("step {step} of 3")).await?;
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
                () = ctx.canceled() => return Ok(()),
            }
        }
        task.add_artifact(Artifact::text("result", format!("done: {}", ctx.text())))
            .await?;
        task.complete().await
    }
}

/// The agent with its card and push notifications, ready to bind.
pub fn server() -> A2aServer {
    let card = AgentCard::new(
        "Worker",
        "Works a little on each task; tells your webhook",
        "1.0.0",
    )
    .with_skill(AgentSkill::new(
        "work",
        "Work",
        "Three steps of work",
        ["push"],
    ));
    A2aServer::new(card, Worker).push(PushConfig::new().allow_loopback())
}

#[tokio::main]
async fn main() -> Result<(), agentwire_server::StartError> {
    // The port first (the first argument, 8080 without one), then the
    // address: it is printed only once it is ours.
    let bound = server().bind_local(8080).await?;
    println!(
        "Worker agent with push notifications on {} (Ctrl-C stops it)",
        bound.base_url()
    );
    Ok(bound.run_until(agentwire_server::shutdown_signal()).await?)
}
