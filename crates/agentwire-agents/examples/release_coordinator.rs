//! The release coordinator as a program: it takes a goal such
//! as "upgrade payment-service to Node 24", discovers the Dependency
//! Compatibility Agent by its card, delegates the analysis, answers the
//! agent's question from its own knowledge, follows the streamed report,
//! refines it, and keeps the versions in the client ledger.
//!
//! ```sh
//! # against a running agent (a2a serve --agent depcompat --port 8080):
//! cargo run -p agentwire-agents --example release_coordinator -- http://127.0.0.1:8080
//! # or with the agent served in-process on a free loopback port:
//! cargo run -p agentwire-agents --example release_coordinator -- "upgrade payment-service to Node 22"
//! ```
//!
//! The service's files are the bundled `payment-service` fixture.

use agentwire_agents::coordinator::{ReleaseCoordinator, StoryEvent, payment_service_files};
use agentwire_agents::depcompat::{self, DepCompatAgent};
use agentwire_server::A2aServer;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let goal = args
        .iter()
        .find(|a| !a.starts_with("http://") && !a.starts_with("https://"))
        .cloned()
        .unwrap_or_else(|| "upgrade payment-service to Node 24".to_owned());
    // The agent: the URL given, or one served here.
    let (url, local) = match args.iter().find(|a| a.starts_with("http")) {
        Some(url) => (url.clone(), None),
        None => {
            let server = A2aServer::new(depcompat::card(), DepCompatAgent)
                .bind("127.0.0.1:0")
                .await?
                .spawn();
            (server.base_url(), Some(server))
        }
    };
    println!("Goal: {goal}\nAgent: {url}");

    let coordinator = ReleaseCoordinator::new();
    let outcome = coordinator
        .run(
            &url,
            &goal,
            &payment_service_files(),
            &mut |event| match event {
                StoryEvent::Step(title) => println!("\n== {title}"),
                StoryEvent::Say(text) => println!("   {text}"),
                StoryEvent::Card { url, card } => println!("   card of {} at {url}", card.name),
                StoryEvent::Request {
                    method, binding, ..
                } => println!("   -> {method} ({binding})"),
                StoryEvent::Response { method, .. } => println!("   <- {method}"),
                StoryEvent::Event { event, .. } => {
                    if let Some(state) = event.state() {
                        println!("   <- {}", state.as_str_name());
                    } else if let Some(agentwire_types::stream_response::Payload::ArtifactUpdate(
                        a,
                    )) = &event.payload
                    {
                        let name = a.artifact.as_ref().map_or("", |a| a.name.as_str());
                        println!(
                            "   <- artifact chunk {name} (append {}, lastChunk {})",
                            a.append, a.last_chunk
                        );
                    }
                }
            },
        )
        .await?;

    println!(
        "\nThe accepted report ({} versions in the ledger):\n",
        outcome.markdown_versions.len()
    );
    println!("{}", outcome.final_markdown);
    if let Some(server) = local {
        server.shutdown().await?;
    }
    Ok(())
}
