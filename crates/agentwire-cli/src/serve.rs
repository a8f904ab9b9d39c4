//! `a2a serve`: run a bundled agent.

use std::time::Duration;

use agentwire_agents::{conformance, depcompat, echo};
use std::sync::Arc;

use agentwire_server::A2aServer;
use agentwire_server::store::{MemoryStore, MemoryStoreConfig, SqliteStore, TaskStore};
use anyhow::Context;
use clap::{Args, ValueEnum};

/// The bundled agents.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum AgentName {
    /// Repeats what it is sent as an artifact.
    Echo,
    /// The A2A conformance kit's system under test.
    Conformance,
    /// The Dependency Compatibility Agent (npm / Cargo projects against a
    /// target runtime; seed 003).
    #[value(name = "depcompat", alias = "dependency-compatibility")]
    DepCompat,
    /// Every bundled agent, each on its own port: echo on PORT, depcompat on
    /// PORT+1, conformance on PORT+2 (free ports with --port 0), each with
    /// its own task store (sqlite:a2a-tasks-echo.db...).
    All,
}

impl AgentName {
    /// The name on the command line.
    fn name(self) -> &'static str {
        match self {
            AgentName::Echo => "echo",
            AgentName::Conformance => "conformance",
            AgentName::DepCompat => "depcompat",
            AgentName::All => "all",
        }
    }
}

/// The store of one agent among several: `sqlite:a2a-tasks.db` becomes
/// `sqlite:a2a-tasks-echo.db`; `memory` stays; one PostgreSQL store would
/// mix the agents' tasks, so it is refused.
fn store_for(spec: &str, agent: AgentName) -> anyhow::Result<String> {
    if spec == "memory" {
        return Ok(spec.to_owned());
    }
    if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
        anyhow::bail!(
            "--agent all gives each agent its own store: use --store sqlite:PATH (one file per agent) or memory"
        );
    }
    let path = spec.strip_prefix("sqlite:").unwrap_or(spec);
    let p = std::path::Path::new(path);
    let stem = p
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("a2a-tasks");
    let file = match p.extension().and_then(|e| e.to_str()) {
        Some(ext) => format!("{stem}-{}.{ext}", agent.name()),
        None => format!("{stem}-{}", agent.name()),
    };
    Ok(format!("sqlite:{}", p.with_file_name(file).display()))
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
    #[arg(long, default_value_t = agentwire_server::DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// Conformance agent: the TCK's streaming timeout in milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub tck_streaming_timeout_ms: u64,
    /// Where tasks are kept: `sqlite:PATH` (a file, created if needed),
    /// `memory` (lost on exit) or `postgres://...` (shared by replicas).
    #[arg(long, default_value = "sqlite:a2a-tasks.db", env = "A2A_STORE")]
    pub store: String,
    /// With a shared PostgreSQL store: after how long without a sign of
    /// life another replica counts as gone, and its working tasks are
    /// failed (their agent went with it).
    #[arg(long, default_value = "30s", env = "A2A_REPLICA_TIMEOUT", value_parser = parse_age)]
    pub replica_timeout: Duration,
    /// Purge terminal tasks older than this (e.g. `30m`, `24h`, `7d`); off
    /// by default, except in the memory store, which keeps finished tasks
    /// for 10 minutes.
    #[arg(long, env = "A2A_RETENTION", value_parser = parse_age)]
    pub retention: Option<Duration>,
    /// With `--store memory`: how many tasks are held at most (the oldest
    /// finished ones leave first; tasks still open are never dropped).
    #[arg(long, default_value_t = 10_000, env = "A2A_MAX_TASKS")]
    pub max_tasks: usize,
}

/// Parses an age such as `90s`, `30m`, `24h` or `7d` (a bare number is
/// seconds).
fn parse_age(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not an age such as 30m, 24h or 7d"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86_400,
        _ => return Err(format!("unknown unit {unit:?} in {s:?}; use s, m, h or d")),
    };
    Ok(Duration::from_secs(secs))
}

/// Opens the task store named by `--store`. Returns it with the event bus
/// of the replicas sharing it, if it is shared (PostgreSQL): then the
/// start-up crash recovery does not apply (its tasks may be running on
/// other replicas).
/// A store opened by [`open_store`].
struct Opened {
    store: Arc<dyn TaskStore>,
    /// The replicas' event bus (PostgreSQL).
    bus: Option<Arc<dyn agentwire_server::EventBus>>,
    /// A push outbox in the same database, shared by the replicas, with
    /// their shared signing key (PostgreSQL; a SQLite store gets its
    /// outbox in [`push_config`]).
    outbox: Option<agentwire_server::push::PostgresOutbox>,
}

async fn open_store(spec: &str, args: &ServeArgs) -> anyhow::Result<Opened> {
    let replica_timeout = args.replica_timeout;
    if spec == "memory" {
        let mut config = MemoryStoreConfig {
            max_tasks: args.max_tasks,
            ..MemoryStoreConfig::default()
        };
        if let Some(age) = args.retention {
            config.terminal_ttl = age;
        }
        return Ok(Opened {
            store: Arc::new(MemoryStore::new(config)),
            bus: None,
            outbox: None,
        });
    }
    if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
        // Replicas sharing the database follow each other's tasks (event
        // log and LISTEN/NOTIFY): each process is a replica of its own.
        // A replica that stops announcing itself for `replica_timeout` is
        // gone: the others fail its working tasks.
        let replica = agentwire_server::bus::new_replica_id();
        let store = agentwire_server::store::PostgresStore::connect(spec)
            .await
            .and_then(|s| s.with_event_log(&replica))
            .context("cannot open the PostgreSQL task store (check --store / A2A_STORE)")?;
        let bus = agentwire_server::store::PgEventBus::new(&store)
            .context("cannot start the event bus")?
            .liveness(replica_timeout / 6, replica_timeout);
        let outbox = agentwire_server::push::PostgresOutbox::new(&store);
        return Ok(Opened {
            store: Arc::new(store),
            bus: Some(Arc::new(bus)),
            outbox: Some(outbox),
        });
    }
    let path = spec.strip_prefix("sqlite:").unwrap_or(spec);
    let path = path.strip_prefix("//").unwrap_or(path);
    if path.is_empty() {
        anyhow::bail!("--store sqlite: needs a file path, e.g. sqlite:a2a-tasks.db");
    }
    let store = SqliteStore::open(path)
        .await
        .with_context(|| format!("cannot open the SQLite task store {path}"))?;
    Ok(Opened {
        store: Arc::new(store),
        bus: None,
        outbox: None,
    })
}

/// Prints a line, ignoring a closed stdout (a server must not die because
/// whoever started it stopped reading).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, $($arg)*);
        let _ = out.flush();
    }};
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let agents = match args.agent {
        AgentName::All => vec![
            AgentName::Echo,
            AgentName::DepCompat,
            AgentName::Conformance,
        ],
        one => vec![one],
    };
    let several = agents.len() > 1;
    if several && args.public_url.is_some() {
        anyhow::bail!("--public-url names one agent: serve them one by one with --agent NAME");
    }
    let mut servers = Vec::new();
    for (i, agent) in agents.into_iter().enumerate() {
        let store_spec = if several {
            store_for(&args.store, agent)?
        } else {
            args.store.clone()
        };
        let port = if args.port == 0 {
            0
        } else {
            u16::try_from(i)
                .ok()
                .and_then(|i| args.port.checked_add(i))
                .context("--port leaves no room for every agent")?
        };
        servers.push(bind(&args, agent, &store_spec, port).await?);
    }
    say!("Press Ctrl-C to stop.");
    let runs = servers
        .into_iter()
        .map(|bound| bound.run_until(agentwire_server::shutdown_signal()));
    futures::future::try_join_all(runs).await?;
    say!("Stopped.");
    Ok(())
}

/// The conformance agent's push set-up for a store spec (and the outbox
/// the store's database offers, if any).
async fn push_config(
    store_spec: &str,
    outbox: Option<agentwire_server::push::PostgresOutbox>,
) -> anyhow::Result<agentwire_server::PushConfig> {
    let config = agentwire_server::PushConfig::new().allow_loopback();
    if let Some(outbox) = outbox {
        // Replicas behind one URL sign with one key.
        let signer = outbox
            .shared_signer()
            .await
            .context("cannot read or create the replicas' push signing key")?;
        return Ok(config.outbox(Arc::new(outbox)).signer(signer));
    }
    let Some(path) = sqlite_path(store_spec) else {
        return Ok(config);
    };
    let outbox = agentwire_server::push::SqliteOutbox::open(path)
        .await
        .with_context(|| format!("cannot open the push outbox in {path}"))?;
    let signer = agentwire_server::push::PushSigner::load_or_create(format!("{path}.push-key"))
        .with_context(|| format!("cannot load or create the push signing key beside {path}"))?;
    Ok(config.outbox(Arc::new(outbox)).signer(signer))
}

/// The file of a `sqlite:PATH` store spec (also a bare path).
fn sqlite_path(spec: &str) -> Option<&str> {
    if spec == "memory" || spec.contains("://") && !spec.starts_with("sqlite:") {
        return None;
    }
    let path = spec.strip_prefix("sqlite:").unwrap_or(spec);
    let path = path.strip_prefix("//").unwrap_or(path);
    (!path.is_empty()).then_some(path)
}

/// Builds, binds and announces one agent's server.
async fn bind(
    args: &ServeArgs,
    agent: AgentName,
    store_spec: &str,
    port: u16,
) -> anyhow::Result<agentwire_server::BoundServer> {
    let server = match agent {
        AgentName::Echo | AgentName::All => A2aServer::new(echo::card(), echo::EchoAgent),
        AgentName::Conformance => A2aServer::new(
            conformance::card(),
            conformance::ConformanceAgent {
                streaming_timeout: Duration::from_millis(args.tck_streaming_timeout_ms),
            },
        ),
        AgentName::DepCompat => A2aServer::new(depcompat::card(), depcompat::DepCompatAgent),
    };
    let Opened { store, bus, outbox } = open_store(store_spec, args).await?;
    let server = if matches!(agent, AgentName::Conformance | AgentName::Echo) {
        // Push notifications, loopback webhooks included (conformance runs,
        // `a2a webhook` beside the echo agent);
        // with a SQLite store the outbox and the signing key live beside
        // it, so a restart loses no notification and keeps the JWKS; with
        // PostgreSQL the replicas share an outbox in the database.
        server.push(push_config(store_spec, outbox).await?)
    } else {
        server
    };
    let mut server = server
        .grpc(!args.no_grpc)
        .max_body_bytes(args.max_body_bytes)
        .store(store)
        .recover_on_start(bus.is_none());
    if let Some(bus) = bus {
        server = server.bus(bus);
    }
    if let Some(age) = args.retention {
        server = server.retention(age);
    }
    if let Some(url) = &args.public_url {
        server = server.public_url(url);
    }
    let addr = format!("{}:{port}", args.host);
    let bound = server
        .bind(&addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = bound.local_addr();
    let card = bound.agent_card();
    say!("Serving {} on http://{local}", card.name);
    say!(
        "  agent card: http://{local}{}",
        agentwire_types::AGENT_CARD_PATH
    );
    say!("  task store: {}", redact_store(store_spec));
    for i in &card.supported_interfaces {
        say!("  {:<9} {}", i.protocol_binding, i.url);
    }
    for line in try_lines(agent, &format!("http://{local}")) {
        say!("  try: {line}");
    }
    Ok(bound)
}

/// Ready-to-paste `a2a send` lines for an agent served at `url`.
fn try_lines(agent: AgentName, url: &str) -> Vec<String> {
    match agent {
        AgentName::Echo | AgentName::All => vec![format!("a2a send -a {url} \"hello world\"")],
        AgentName::Conformance => vec![format!(
            "a2a send -a {url} --message-id tck-complete-task-1 \"hello\""
        )],
        AgentName::DepCompat => {
            let dir = "crates/agentwire-agents/fixtures/npm/payment-service";
            vec![
                format!("a2a send -a {url} \"Do you support npm 11 lockfiles?\""),
                format!(
                    "a2a send -a {url} --stream --text \"Check payment-service for Node.js 24\" --file {dir}/package.json --file {dir}/package-lock.json"
                ),
                "a2a demo   (the whole seed 003 story, with its own server)".to_owned(),
            ]
        }
    }
}

/// The store spec without a password, for printing.
fn redact_store(spec: &str) -> String {
    match (spec.find("://"), spec.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &spec[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{}{}:***{}", &spec[..scheme + 3], user, &spec[at..])
        }
        _ => spec.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_and_redaction() {
        assert_eq!(parse_age("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_age("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_age("7d").unwrap(), Duration::from_secs(7 * 86_400));
        assert!(parse_age("soon").is_err());
        assert!(parse_age("3w").is_err());
        assert_eq!(
            redact_store("postgres://a2a:secret@127.0.0.1:5432/db"),
            "postgres://a2a:***@127.0.0.1:5432/db"
        );
        assert_eq!(redact_store("sqlite:x.db"), "sqlite:x.db");
        assert_eq!(
            store_for("sqlite:a2a-tasks.db", AgentName::Echo).unwrap(),
            "sqlite:a2a-tasks-echo.db"
        );
        assert_eq!(
            store_for("sqlite:data/tasks", AgentName::DepCompat).unwrap(),
            "sqlite:data/tasks-depcompat"
        );
        assert_eq!(store_for("memory", AgentName::Echo).unwrap(), "memory");
        assert!(store_for("postgres://u@h/db", AgentName::Echo).is_err());
    }
}
