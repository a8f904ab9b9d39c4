//! `a2a serve`: run a bundled agent.

use std::time::Duration;

use a2a_agents::{conformance, echo};
use a2a_server::A2aServer;
use anyhow::Context;
use clap::{Args, ValueEnum};

/// The bundled agents.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum AgentName {
    /// Repeats what it is sent as an artifact.
    Echo,
    /// The A2A conformance kit's system under test.
    Conformance,
}

/// Options of `a2a serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Which agent to serve.
    #[arg(long, value_enum, default_value = "echo")]
    pub agent: AgentName,
    /// Address to listen on (loopback by default).
    #[arg(long, default_value = "127.0.0.1", env = "A2A_HOST")]
    pub host: String,
    /// Port to listen on (0 picks a free one).
    #[arg(long, short, default_value_t = 8080, env = "A2A_PORT")]
    pub port: u16,
    /// Base URL advertised in the agent card (default: http://HOST:PORT).
    #[arg(long, env = "A2A_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Do not serve gRPC.
    #[arg(long)]
    pub no_grpc: bool,
    /// Largest accepted request body, in bytes.
    #[arg(long, default_value_t = a2a_server::DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// Conformance agent: the TCK's streaming timeout in milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub tck_streaming_timeout_ms: u64,
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let server = match args.agent {
        AgentName::Echo => A2aServer::new(echo::card(), echo::EchoAgent),
        AgentName::Conformance => A2aServer::new(
            conformance::card(),
            conformance::ConformanceAgent {
                streaming_timeout: Duration::from_millis(args.tck_streaming_timeout_ms),
            },
        ),
    };
    let mut server = server
        .grpc(!args.no_grpc)
        .max_body_bytes(args.max_body_bytes);
    if let Some(url) = &args.public_url {
        server = server.public_url(url);
    }
    let addr = format!("{}:{}", args.host, args.port);
    let bound = server
        .bind(&addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = bound.local_addr();
    let card = bound.agent_card();
    println!("Serving {} on http://{local}", card.name);
    println!("  agent card: http://{local}{}", a2a_types::AGENT_CARD_PATH);
    for i in &card.supported_interfaces {
        println!("  {:<9} {}", i.protocol_binding, i.url);
    }
    println!("Press Ctrl-C to stop.");
    bound.run_until(a2a_server::shutdown_signal()).await?;
    println!("Stopped.");
    Ok(())
}
