//! A delegating agent: every message it is sent is passed on, as it came
//! (same message id, same text), to another A2A agent, and the answer comes
//! back as this agent's task: the far agent's artifacts, then a completed
//! status saying who did the work and what it said.
//!
//! It is the middle hop of the mixed multi-hop interop test
//! (`interop/python/v03/multihop.sh`): an A2A 0.3 client calls it, and it
//! calls a 1.0 agent of another SDK.
//!
//! ```sh
//! cargo run -p agentwire-agents --example relay -- 9000 http://127.0.0.1:8080
//! ```

use agentwire_client::Client;
use agentwire_server::{A2aServer, AgentExecutor, RequestContext, TaskUpdater};
use agentwire_types::{
    A2aError, A2aResult, AgentCard, AgentSkill, Artifact, Message, send_message_response,
};

/// The agent: relays to the agent at `to`.
struct Relay {
    to: String,
}

impl AgentExecutor for Relay {
    async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
        task.start_work().await?;
        let far = |e: agentwire_client::ClientError| {
            A2aError::internal(format!("calling the agent at {}: {e}", self.to))
        };
        let client = Client::builder().connect(&self.to).await.map_err(far)?;
        let name = client
            .card()
            .map_or_else(|| self.to.clone(), |c| c.name.clone());
        let message = Message::user_text(ctx.text()).with_message_id(&ctx.message.message_id);
        let answer = client.send(message).await.map_err(far)?;
        let said = match answer.payload {
            Some(send_message_response::Payload::Task(t)) => {
                for a in t.artifacts {
                    task.add_artifact(a).await?;
                }
                t.status
                    .and_then(|s| s.message)
                    .map(|m| m.text())
                    .unwrap_or_default()
            }
            Some(send_message_response::Payload::Message(m)) => {
                task.add_artifact(Artifact::new("reply", m.parts.clone()))
                    .await?;
                m.text()
            }
            None => String::new(),
        };
        task.complete_with(format!("relayed to {name}: {said}"))
            .await
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(port), Some(to)) = (args.next(), args.next()) else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "usage: relay PORT FAR_AGENT_URL",
        ));
    };
    let port: u16 = port.parse().map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{port:?} is not a port number"),
        )
    })?;
    let card = AgentCard::new("Relay", "Passes every message on to another agent", "1.0.0")
        .with_skill(AgentSkill::new(
            "relay",
            "Relay",
            "Asks another A2A agent and answers with its work",
            ["delegation"],
        ));
    println!("Relay agent on http://127.0.0.1:{port}, relaying to {to}");
    A2aServer::new(card, Relay { to })
        .serve(("127.0.0.1", port))
        .await
}
