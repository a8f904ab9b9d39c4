//! `agent-server`: a bundled agent served by the library, alone.
//!
//! What an agent author's binary is: `A2aServer` with the in-memory store,
//! the three bindings on one port, and one agent of `agentwire-agents`: the echo
//! agent (`a2a serve --agent echo`: a task with one artifact, streamed word
//! by word when asked to stream) or the conformance agent (whose
//! long-running scenario keeps streams open). The benchmark loads it side
//! by side with `bare-server`. `a2a serve` runs the same code inside the
//! CLI, whose other commands (client, SQLite and PostgreSQL stores, chat)
//! make a larger binary with more resident code.

// The server's requests are served by any worker thread, so memory is often
// freed on another thread than the one that allocated it (hyper's 8 KiB read
// buffers and request headers, which are too large for glibc's per-thread
// caches). glibc then takes the owning arena's lock, and under load the two
// threads wait on each other (futex calls); mimalloc frees such memory
// without a lock. Measured: see benches/README.md.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use agentwire_agents::{conformance, echo};
use agentwire_server::A2aServer;
use agentwire_server::store::{MemoryStore, MemoryStoreConfig};
use clap::{Parser, ValueEnum};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Agent {
    Echo,
    Conformance,
}

#[derive(Parser, Debug)]
#[command(about = "A bundled agent on the A2A server library, for the benchmark (127.0.0.1 only)")]
struct Args {
    /// TCP port to listen on (127.0.0.1).
    #[arg(long, short, default_value_t = 8080)]
    port: u16,
    /// Which agent to serve.
    #[arg(long, value_enum, default_value = "echo")]
    agent: Agent,
    /// Tokio worker threads (default: one per core, or TOKIO_WORKER_THREADS).
    #[arg(long)]
    workers: Option<usize>,
    /// Tasks held at most by the in-memory store.
    #[arg(long, default_value_t = MemoryStoreConfig::default().max_tasks)]
    max_tasks: usize,
    /// Conformance agent: the streaming timeout of its scenarios, in ms.
    #[arg(long, default_value_t = 2000)]
    tck_streaming_timeout_ms: u64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    agentwire_bench::server_runtime(args.workers)?.block_on(async {
        let server = match args.agent {
            Agent::Echo => A2aServer::new(echo::card(), echo::EchoAgent),
            Agent::Conformance => A2aServer::new(
                conformance::card(),
                conformance::ConformanceAgent {
                    streaming_timeout: Duration::from_millis(args.tck_streaming_timeout_ms),
                },
            ),
        };
        let store = MemoryStore::new(MemoryStoreConfig {
            max_tasks: args.max_tasks,
            ..MemoryStoreConfig::default()
        });
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
        let server = server
            .store(Arc::new(store))
            .bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot bind {addr}: {e}"))?;
        eprintln!("agent-server listening on http://{}", server.local_addr());
        server
            .run_until(agentwire_server::shutdown_signal())
            .await?;
        anyhow::Ok(())
    })
}
