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
use agentwire_server::store::{MemoryStore, MemoryStoreConfig, SqliteStore, TaskStore};
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
    /// The request log as `a2a serve` writes it (a line per request on
    /// stderr, by the library's own writer), filtered by `RUST_LOG`
    /// (default: the request lines and warnings): what the line costs a
    /// request, in the library (scripts/icount.sh's `agent-server-log`).
    #[arg(long)]
    request_log: bool,
    /// The SQLite store in this file (synchronous NORMAL, as `a2a serve
    /// --store sqlite:FILE`) instead of the in-memory store: the durable
    /// store's cost in the library (scripts/icount.sh's `agent-server-sqlite`).
    #[arg(long, value_name = "FILE")]
    sqlite: Option<std::path::PathBuf>,
    /// The bounds per caller of `a2a serve` (`--max-open-tasks-per-caller`,
    /// `--max-streams-per-caller`; 0: none, as for the held streams of
    /// scripts/bench.sh, all from one address) [default: the library's].
    #[arg(long, value_name = "N")]
    max_open_tasks_per_caller: Option<usize>,
    #[arg(long, value_name = "N")]
    max_streams_per_caller: Option<usize>,
    /// `a2a serve --max-connections-per-address` (0: none).
    #[arg(long, value_name = "N")]
    max_connections_per_address: Option<usize>,
}

/// The subscriber of `a2a serve`: `tracing-subscriber`'s formatter behind
/// the log filter, and the request lines by the library's own writer.
fn request_log() {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    agentwire_server::observe::request_log::install(
        agentwire_server::observe::request_log::Format::Text,
        std::io::stderr(),
    );
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,agentwire_server=info"));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .with_filter(filter);
    // Set as the global default, not by `SubscriberInitExt::init`: that
    // also installs the bridge from the `log` crate (`LogTracer`), whose
    // `log::set_max_level` in the program made the `log` records of
    // `tracing`'s `log` feature (enabled by sqlx) live code, run for every
    // span of h2 when no subscriber is installed: `agent-server` without
    // `--request-log` then cost 16k more instructions a gRPC call (85.3k
    // against 69.0k a GetTask; docs/performance.md).
    if tracing::subscriber::set_global_default(tracing_subscriber::registry().with(fmt)).is_err() {
        eprintln!("agent-server: a tracing subscriber was already installed");
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.request_log {
        request_log();
    }
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
        let store: Arc<dyn TaskStore> = match &args.sqlite {
            Some(path) => Arc::new(
                SqliteStore::open(path)
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?,
            ),
            None => Arc::new(MemoryStore::new(MemoryStoreConfig {
                max_tasks: args.max_tasks,
                ..MemoryStoreConfig::default()
            })),
        };
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
        let defaults = agentwire_server::HandlerConfig::default();
        let bound = |arg: Option<usize>, default| match arg {
            Some(0) => None,
            Some(n) => Some(n),
            None => default,
        };
        let mut server = server;
        if let Some(n) = args.max_connections_per_address {
            server = server.max_connections_per_address((n > 0).then_some(n));
        }
        let server = server
            .config(agentwire_server::HandlerConfig {
                max_open_tasks_per_caller: bound(
                    args.max_open_tasks_per_caller,
                    defaults.max_open_tasks_per_caller,
                ),
                max_streams_per_caller: bound(
                    args.max_streams_per_caller,
                    defaults.max_streams_per_caller,
                ),
                ..defaults
            })
            .store(store)
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
