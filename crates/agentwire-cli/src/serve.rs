//! `a2a serve`: run a bundled agent.
//!
//! Start-up errors are the server's own: a usage error (exit 2) for an
//! unknown store or an option that does not apply to the chosen store or
//! agent, found before anything is opened; otherwise a failure (exit 1)
//! printed once, with no client error code (`A2ACLI_ERR_*` belongs to the
//! client commands; `-o json` names it [`code::SERVE_FAILED`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentwire_agents::{conformance, depcompat, echo};
use agentwire_server::A2aServer;
use agentwire_server::store::{
    MemoryStore, MemoryStoreConfig, SqliteOptions, SqliteStore, Synchronous, TaskStore,
};
use clap::{Args, ValueEnum};
use tracing::instrument::WithSubscriber;

use crate::error::{CliError, code, exit};

/// The bundled agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AgentName {
    /// Repeats what it is sent as an artifact.
    Echo,
    /// The A2A conformance kit's system under test.
    Conformance,
    /// The Dependency Compatibility Agent (npm / Cargo projects against a
    /// target runtime; the agent of `a2a demo`).
    #[value(name = "depcompat", alias = "dependency-compatibility")]
    DepCompat,
    /// The tools of an MCP server as A2A skills (with --mcp-server).
    Mcp,
    /// Every bundled agent, each on its own port: echo on PORT, depcompat on
    /// PORT+1, conformance on PORT+2 (free ports with --port 0), each with
    /// its own task store (sqlite:a2a-tasks-echo.db...).
    All,
}

impl AgentName {
    /// The name on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            AgentName::Echo => "echo",
            AgentName::Conformance => "conformance",
            AgentName::DepCompat => "depcompat",
            AgentName::Mcp => "mcp",
            AgentName::All => "all",
        }
    }
}

/// What a commit of the SQLite store waits for (`--sqlite-synchronous`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SqliteSync {
    /// An acknowledged task survives a crash of the server (kill -9
    /// included); a power loss may lose the last commits, never the
    /// database's consistency.
    Normal,
    /// Every commit waits for the disk: an acknowledged task also survives
    /// a power loss, at a cost in throughput.
    Full,
}

impl SqliteSync {
    fn level(self) -> Synchronous {
        match self {
            SqliteSync::Normal => Synchronous::Normal,
            SqliteSync::Full => Synchronous::Full,
        }
    }
}

/// The forms `--store` accepts, for error messages.
const STORE_FORMS: &str = "memory, sqlite:PATH (a file, created if needed) or postgres://USER:PASSWORD@HOST:PORT/DATABASE";

/// How `a2a serve` writes its log (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One line of text per event.
    Text,
    /// One JSON object per line.
    Json,
}

/// The log filter of `a2a serve` when `RUST_LOG` is not set: warnings,
/// and the server's own information (one line per request answered).
pub const DEFAULT_SERVE_LOG: &str = "warn,agentwire_server=info,agentwire_agents=info,a2a=info";

/// Parses `--cors-origin`: `*`, or SCHEME://HOST[:PORT] with no path.
fn parse_origin(s: &str) -> Result<http::HeaderValue, String> {
    let t = s.trim().trim_end_matches('/');
    let ok = t == "*"
        || t.split_once("://").is_some_and(|(scheme, rest)| {
            !scheme.is_empty() && !rest.is_empty() && !rest.contains('/')
        });
    if !ok {
        return Err(format!(
            "{t:?} is not an origin: use SCHEME://HOST[:PORT] (e.g. https://app.example.com), or * for any"
        ));
    }
    http::HeaderValue::from_str(t).map_err(|e| format!("{t:?} is not an origin: {e}"))
}

/// Where tasks are kept (`--store`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// In memory, lost on exit.
    Memory,
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL database (the URL as given, password included).
    Postgres(String),
}

impl StoreSpec {
    /// Parses `--store`: `memory`, `sqlite:PATH` (or `sqlite://PATH`),
    /// `postgres://...` / `postgresql://...`. Anything else, a bare path
    /// included, is refused: a mistyped `memroy` must not become a SQLite
    /// file of that name.
    pub fn parse(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if t == "memory" {
            return Ok(Self::Memory);
        }
        if t.starts_with("postgres://") || t.starts_with("postgresql://") {
            return match t.parse::<sqlx::postgres::PgConnectOptions>() {
                Ok(_) => Ok(Self::Postgres(t.to_owned())),
                Err(e) => Err(format!(
                    "{} is not a PostgreSQL URL ({e}); expected postgres://USER:PASSWORD@HOST:PORT/DATABASE",
                    redact(t)
                )),
            };
        }
        if let Some(rest) = t.strip_prefix("sqlite:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err("sqlite: needs a file path, e.g. sqlite:a2a-tasks.db".into());
            }
            return Ok(Self::Sqlite(PathBuf::from(path)));
        }
        let scheme = t.split_once(':').map(|(s, _)| s).filter(|s| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
        });
        Err(match scheme {
            Some(scheme) => format!("unknown kind of task store {scheme:?}: use {STORE_FORMS}"),
            None => format!(
                "{t:?} does not say what kind of task store it is: use {STORE_FORMS} \
                 (for a SQLite file: sqlite:{t})"
            ),
        })
    }

    /// For printing: without the password.
    pub fn display(&self) -> String {
        match self {
            Self::Memory => "memory".into(),
            Self::Sqlite(p) => format!("sqlite:{}", p.display()),
            Self::Postgres(url) => redact(url),
        }
    }

    /// The store of one agent among several: `sqlite:a2a-tasks.db` becomes
    /// `sqlite:a2a-tasks-echo.db`; `memory` stays (each agent its own).
    /// PostgreSQL is refused before this is called.
    fn for_agent(&self, agent: AgentName) -> Self {
        match self {
            Self::Sqlite(p) => {
                let stem = p
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or("a2a-tasks");
                let file = match p.extension().and_then(|e| e.to_str()) {
                    Some(ext) => format!("{stem}-{}.{ext}", agent.name()),
                    None => format!("{stem}-{}", agent.name()),
                };
                Self::Sqlite(p.with_file_name(file))
            }
            other => other.clone(),
        }
    }
}

/// How long `a2a serve` waits for PostgreSQL to answer a first connection.
const PG_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The conformance agent's streaming timeout when none is given.
const DEFAULT_TCK_STREAMING_TIMEOUT: Duration = Duration::from_secs(2);

/// The replica timeout when none is given.
const DEFAULT_REPLICA_TIMEOUT: Duration = Duration::from_secs(30);

/// The memory store's cap when none is given.
const DEFAULT_MAX_TASKS: usize = 10_000;

/// The environment of `a2a serve`, shown in its help.
const SERVE_AFTER_HELP: &str = "\
Every option of a2a serve can also be set in the environment as A2A_SERVE_<OPTION>
(the long option in upper snake case, shown beside each option as [env: ...]);
A2A_SERVE_API_KEYS holds API keys themselves (PRINCIPAL:KEY,PRINCIPAL:KEY). A flag wins
over the variable. The former names (A2A_HOST, A2A_PORT, A2A_PUBLIC_URL, A2A_STORE,
A2A_REPLICA_TIMEOUT, A2A_RETENTION, A2A_MAX_TASKS) still work, with a warning, and will be
removed. The client's A2ACLI_* settings do not apply to the server.

Durations are a number and a unit: 500ms, 2s, 1m, 24h, 7d, or combined (1h 30m);
a bare number is seconds.
Logs go to stderr, filtered by RUST_LOG (default: warn,agentwire_server=info, which logs
one line per request; RUST_LOG=warn keeps warnings only).";

/// Options of `a2a serve`.
#[derive(Args, Debug)]
#[command(after_help = SERVE_AFTER_HELP)]
pub struct ServeArgs {
    /// Which agent to serve.
    #[arg(long, value_enum, default_value = "echo", env = "A2A_SERVE_AGENT")]
    pub agent: AgentName,
    /// Address to listen on (loopback by default).
    #[arg(long, default_value = "127.0.0.1", env = "A2A_SERVE_HOST")]
    pub host: String,
    /// Port to listen on (0 picks a free one).
    #[arg(long, short, default_value_t = 8080, env = "A2A_SERVE_PORT")]
    pub port: u16,
    /// Base URL advertised in the agent card (default: http://HOST:PORT).
    #[arg(long, env = "A2A_SERVE_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,
    /// Do not serve gRPC.
    #[arg(long, env = "A2A_SERVE_NO_GRPC")]
    pub no_grpc: bool,
    /// Do not serve clients of A2A protocol version 0.3. By default they are
    /// served beside 1.0 on the same endpoints (requests without an
    /// A2A-Version header, or with 0.3); with this flag they are answered
    /// with a version-not-supported error and the agent card carries no 0.3
    /// fields.
    #[arg(long, env = "A2A_SERVE_NO_V03")]
    pub no_v03: bool,
    /// Where tasks are kept: `sqlite:PATH` (a file, created if needed; one
    /// server at a time may use it), `memory` (lost on exit) or
    /// `postgres://USER:PASSWORD@HOST:PORT/DATABASE` (shared by replicas;
    /// the first connection must succeed within 5s) [default: a file per
    /// agent in the current directory, sqlite:a2a-tasks-AGENT.db, e.g.
    /// sqlite:a2a-tasks-echo.db]
    #[arg(
        long = "store",
        env = "A2A_SERVE_STORE",
        value_parser = StoreSpec::parse,
        value_name = "STORE"
    )]
    #[arg(help_heading = "Task store")]
    pub store_arg: Option<StoreSpec>,
    /// The store of the (first) agent served: `--store`, or its default
    /// (set by [`run`] before anything reads it).
    #[arg(skip = StoreSpec::Memory)]
    pub store: StoreSpec,
    /// Purge terminal tasks older than this (e.g. `30m`, `24h`, `7d`); off
    /// by default, except in the memory store, which keeps finished tasks
    /// for 10 minutes.
    #[arg(
        long,
        env = "A2A_SERVE_RETENTION",
        value_parser = crate::parse_duration,
        value_name = "DURATION"
    )]
    #[arg(help_heading = "Task store")]
    pub retention: Option<Duration>,
    /// With a SQLite store only: what each commit waits for. `normal`: an
    /// acknowledged task survives a crash of the server (kill -9
    /// included), while a power loss may lose the last few commits (never
    /// the database's consistency); `full`: every commit waits for the
    /// disk, so acknowledged tasks also survive a power loss, at a cost in
    /// throughput (see the README) [default: normal].
    #[arg(
        long,
        env = "A2A_SERVE_SQLITE_SYNCHRONOUS",
        value_enum,
        value_name = "LEVEL"
    )]
    #[arg(help_heading = "Task store")]
    pub sqlite_synchronous: Option<SqliteSync>,
    /// With `--store memory` only: how many tasks are held at most (the
    /// oldest finished ones leave first to make room; when none is left, a
    /// new task is refused as "try again later") [default: 10000].
    #[arg(long, env = "A2A_SERVE_MAX_TASKS", value_name = "N")]
    #[arg(help_heading = "Task store")]
    pub max_tasks: Option<usize>,
    /// With `--store memory` only: how many bytes the tasks held may take,
    /// by the store's estimate (the oldest finished tasks leave first to
    /// make room; when none is left, new work is refused as "try again
    /// later") [default: 268435456, 256 MiB].
    #[arg(long, env = "A2A_SERVE_MAX_STORE_BYTES", value_name = "BYTES")]
    #[arg(help_heading = "Task store")]
    pub max_store_bytes: Option<usize>,
    /// With `--store memory` only: how long a task that has not finished
    /// (one waiting for input, or still working) is kept after its last
    /// change [default: 1h].
    #[arg(
        long,
        env = "A2A_SERVE_OPEN_TASK_TTL",
        value_parser = crate::parse_duration,
        value_name = "DURATION"
    )]
    #[arg(help_heading = "Task store")]
    pub open_task_ttl: Option<Duration>,
    /// Largest accepted request body, in bytes.
    #[arg(
        long,
        default_value_t = agentwire_server::DEFAULT_MAX_BODY_BYTES,
        env = "A2A_SERVE_MAX_BODY_BYTES",
        value_name = "BYTES"
    )]
    #[arg(help_heading = "Limits (docs/operations.md)")]
    pub max_body_bytes: usize,
    /// The most bytes of tasks one ListTasks page carries: a page stops
    /// early, with a next page token, rather than pass it [default:
    /// 4194304, 4 MiB].
    #[arg(long, env = "A2A_SERVE_MAX_LIST_BYTES", value_name = "BYTES")]
    #[arg(help_heading = "Limits (docs/operations.md)")]
    pub max_list_bytes: Option<usize>,
    /// The most parts a message sent to the agent may have [default: 1000].
    #[arg(long, env = "A2A_SERVE_MAX_PARTS", value_name = "N")]
    #[arg(help_heading = "Limits (docs/operations.md)")]
    pub max_parts: Option<usize>,
    /// The most bytes one artifact may grow to, appended chunks included
    /// [default: 16777216, 16 MiB].
    #[arg(long, env = "A2A_SERVE_MAX_ARTIFACT_BYTES", value_name = "BYTES")]
    #[arg(help_heading = "Limits (docs/operations.md)")]
    pub max_artifact_bytes: Option<usize>,
    /// How many requests are handled at once at most; one more is refused
    /// at once as "try again later" (HTTP 503) [default: 10000].
    #[arg(long, env = "A2A_SERVE_MAX_IN_FLIGHT", value_name = "N")]
    #[arg(help_heading = "Limits (docs/operations.md)")]
    pub max_in_flight: Option<usize>,
    /// How many open tasks (submitted, working, or waiting for input) one
    /// caller may hold at once: an authenticated principal, or an
    /// anonymous caller's address (behind a reverse proxy: see
    /// --trusted-proxy). The task one more would create is refused as "try
    /// again later" (HTTP 503); replies with a message are never refused.
    /// 0: no bound [default: a tenth of --max-tasks with --store memory,
    /// 1000; 1000 with the other stores].
    #[arg(long, env = "A2A_SERVE_MAX_OPEN_TASKS_PER_CALLER", value_name = "N")]
    #[arg(help_heading = "Limits (docs/operations.md)")]
    pub max_open_tasks_per_caller: Option<usize>,
    /// How many bytes of messages one caller (as above) may have being
    /// worked on at once: a send counts its message's size until the
    /// agent's run on it ends (sends under 16 KiB do not count). One more
    /// is refused as "try again later" (HTTP 503) unless the caller has
    /// nothing running. 0: no bound [default: 33554432, 32 MiB].
    #[arg(
        long,
        env = "A2A_SERVE_MAX_RUNNING_BYTES_PER_CALLER",
        value_name = "BYTES"
    )]
    #[arg(help_heading = "Limits (docs/operations.md)")]
    pub max_running_bytes_per_caller: Option<usize>,
    /// The same for all callers together: a send that would take the
    /// server over is refused as "try again later" (HTTP 503) unless
    /// nothing is running. 0: no bound [default: 536870912, 512 MiB].
    #[arg(long, env = "A2A_SERVE_MAX_RUNNING_BYTES", value_name = "BYTES")]
    #[arg(help_heading = "Limits (docs/operations.md)")]
    pub max_running_bytes: Option<usize>,
    /// How many event streams (SendStreamingMessage, SubscribeToTask, on
    /// every binding) one caller (as above) may have open at once; one more
    /// is refused as "try again later" (HTTP 503) before anything starts.
    /// 0: no bound [default: 1000].
    #[arg(long, env = "A2A_SERVE_MAX_STREAMS_PER_CALLER", value_name = "N")]
    #[arg(help_heading = "Limits (docs/operations.md)")]
    pub max_streams_per_caller: Option<usize>,
    /// How many bytes of request bodies the server may be receiving from
    /// one address at once (an IPv6 one by its /64 prefix), counted from a
    /// body's first 64 KiB (or its Content-Length) until it is read whole;
    /// one more is refused as "try again later" (HTTP 503) unless nothing
    /// else is arriving from that address. 0: no bound [default: 67108864,
    /// 64 MiB].
    #[arg(
        long,
        env = "A2A_SERVE_MAX_INCOMING_BYTES_PER_CALLER",
        value_name = "BYTES"
    )]
    #[arg(help_heading = "Limits (docs/operations.md)")]
    pub max_incoming_bytes_per_caller: Option<usize>,
    /// The same for all addresses together. 0: no bound [default:
    /// 536870912, 512 MiB].
    #[arg(long, env = "A2A_SERVE_MAX_INCOMING_BYTES", value_name = "BYTES")]
    #[arg(help_heading = "Limits (docs/operations.md)")]
    pub max_incoming_bytes: Option<usize>,
    /// How many push notification configs one task may have (each is sent
    /// every update of the task); one more is refused as invalid
    /// parameters, replacing one by its id is not [default: 16].
    #[arg(long, env = "A2A_SERVE_MAX_PUSH_CONFIGS_PER_TASK", value_name = "N")]
    #[arg(help_heading = "Limits (docs/operations.md)")]
    pub max_push_configs_per_task: Option<usize>,
    /// The most bytes of events queued for all event streams together
    /// (every subscriber of every task); when reached, the stream whose
    /// reader is furthest behind is closed with an error telling it to
    /// subscribe again [default: 67108864, 64 MiB].
    #[arg(long, env = "A2A_SERVE_MAX_QUEUED_BYTES", value_name = "BYTES")]
    #[arg(help_heading = "Limits (docs/operations.md)")]
    pub max_queued_bytes: Option<usize>,
    /// The longest a GetTask with currentGeneration (the A2A v1.1 draft's
    /// long-poll) waits for the task to move past that generation; then it
    /// answers with the task as it is. 0: at once [default: 30s].
    #[arg(
        long,
        env = "A2A_SERVE_LONG_POLL_MAX",
        value_parser = crate::parse_duration,
        value_name = "DURATION"
    )]
    #[arg(help_heading = "Limits (docs/operations.md)")]
    pub long_poll_max: Option<std::time::Duration>,
    /// With a PostgreSQL store only: after how long without a sign of life
    /// another replica counts as gone, and its working tasks are failed
    /// (their agent went with it) [default: 30s].
    #[arg(
        long,
        env = "A2A_SERVE_REPLICA_TIMEOUT",
        value_parser = crate::parse_duration,
        value_name = "DURATION"
    )]
    #[arg(help_heading = "Task store")]
    pub replica_timeout: Option<Duration>,
    /// With the conformance agent only: how long the TCK's streaming
    /// scenarios keep a stream open [default: 2s].
    #[arg(
        long,
        value_parser = crate::parse_duration,
        env = "A2A_SERVE_TCK_STREAMING_TIMEOUT",
        value_name = "DURATION"
    )]
    pub tck_streaming_timeout: Option<Duration>,
    /// The same in milliseconds (the former spelling of --tck-streaming-timeout).
    #[arg(
        long,
        hide = true,
        conflicts_with = "tck_streaming_timeout",
        value_name = "MS"
    )]
    pub tck_streaming_timeout_ms: Option<u64>,
    /// How long clients may use the agent card without asking again, sent
    /// as Cache-Control max-age [default: 5m]. 0 sends no-cache: clients
    /// revalidate the card before each use, so a changed card is seen at
    /// once.
    #[arg(
        long,
        env = "A2A_SERVE_CARD_MAX_AGE",
        value_parser = crate::parse_duration,
        value_name = "DURATION"
    )]
    pub card_max_age: Option<Duration>,
    /// How long a client may take to send a request's head (request line
    /// and headers): a connection that sends only part of one in this time
    /// is closed, and so is a kept-alive HTTP/1.1 connection that sends no
    /// new request for this long [default: 10s].
    #[arg(
        long,
        env = "A2A_SERVE_REQUEST_HEAD_TIMEOUT",
        value_parser = crate::parse_duration,
        value_name = "DURATION"
    )]
    #[arg(help_heading = "Connections")]
    pub request_head_timeout: Option<Duration>,
    /// How long a client may take to send a request's body once the server
    /// waits for it; a slower body is refused [default: 30s].
    #[arg(
        long,
        env = "A2A_SERVE_BODY_READ_TIMEOUT",
        value_parser = crate::parse_duration,
        value_name = "DURATION"
    )]
    #[arg(help_heading = "Connections")]
    pub body_read_timeout: Option<Duration>,
    /// How long a connection (HTTP/2 and gRPC mostly) may go without a new
    /// request before it is closed; a response under way finishes first
    /// [default: 60s].
    #[arg(
        long,
        env = "A2A_SERVE_IDLE_TIMEOUT",
        value_parser = crate::parse_duration,
        value_name = "DURATION"
    )]
    #[arg(help_heading = "Connections")]
    pub idle_timeout: Option<Duration>,
    /// How many connections may be open at once; one more is answered 503
    /// and closed, and a warning is logged [default: 50000, or fewer when
    /// the open-file limit is lower].
    #[arg(long, env = "A2A_SERVE_MAX_CONNECTIONS", value_name = "N")]
    #[arg(help_heading = "Connections")]
    pub max_connections: Option<usize>,
    /// How many of those one address may have open at once (an IPv6 one
    /// by its /64 prefix; behind a reverse proxy: see --trusted-proxy); one
    /// more is answered 503 and closed. 0: no bound
    /// [default: 1000].
    #[arg(long, env = "A2A_SERVE_MAX_CONNECTIONS_PER_ADDRESS", value_name = "N")]
    #[arg(help_heading = "Connections")]
    pub max_connections_per_address: Option<usize>,
    /// A reverse proxy in front of the server: an address or a network
    /// (10.0.0.5, 10.0.0.0/24, fd00::/8); repeat it, or separate with
    /// commas. A request from it counts as the client it names in
    /// X-Forwarded-For (the rightmost address there that is not a trusted
    /// proxy) for every bound kept per address, and its connections are
    /// not bounded per address. X-Forwarded-For from any other address is
    /// ignored [default: none].
    #[arg(
        long = "trusted-proxy",
        env = "A2A_SERVE_TRUSTED_PROXY",
        value_name = "ADDRESS|CIDR",
        value_delimiter = ',',
        value_parser = parse_net
    )]
    #[arg(help_heading = "Connections")]
    pub trusted_proxies: Vec<agentwire_server::IpNet>,
    /// Serve metrics in the Prometheus text format at /metrics on the
    /// agent's port (requests by binding, operation and outcome, and their
    /// latency).
    #[arg(long, env = "A2A_SERVE_METRICS")]
    #[arg(help_heading = "Observability")]
    pub metrics: bool,
    /// Serve /metrics on this address (HOST:PORT) instead, a port of its
    /// own (implies --metrics).
    #[arg(long, env = "A2A_SERVE_METRICS_ADDR", value_name = "ADDR")]
    #[arg(help_heading = "Observability")]
    pub metrics_addr: Option<String>,
    /// Let web pages from this origin (e.g. https://app.example.com) call
    /// the agent from a browser (CORS); repeat for several (or separate
    /// with commas), `*` for any.
    #[arg(
        long = "cors-origin",
        env = "A2A_SERVE_CORS_ORIGIN",
        value_name = "ORIGIN",
        value_delimiter = ',',
        value_parser = parse_origin
    )]
    pub cors_origins: Vec<http::HeaderValue>,
    /// On SIGTERM or Ctrl-C: how long calls and streams under way may go
    /// on before the server exits (it stops accepting at once); tasks
    /// still working then are failed, with a message, by the next start
    /// on the same store [default: 5s].
    #[arg(
        long,
        env = "A2A_SERVE_SHUTDOWN_GRACE",
        value_parser = crate::parse_duration,
        value_name = "DURATION"
    )]
    pub shutdown_grace: Option<Duration>,
    /// Export OpenTelemetry traces with OTLP: a span per call on every
    /// binding, continuing the caller's W3C trace context (`traceparent`),
    /// with the agent's turn, its calls to other agents and each push
    /// delivery as child spans. The standard `OTEL_*` variables configure
    /// it (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_PROTOCOL`
    /// `grpc` or `http/protobuf`, `OTEL_SERVICE_NAME`,
    /// `OTEL_TRACES_SAMPLER`...). On as well when
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` is set; `OTEL_SDK_DISABLED=true`
    /// keeps it off.
    #[arg(long, env = "A2A_SERVE_OTEL")]
    #[arg(help_heading = "Observability")]
    pub otel: bool,
    /// How log lines are written on stderr: `text` (for people) or `json`
    /// (one JSON object a line, for log collectors). Every line carries
    /// an RFC 3339 time; each request answered is one `info` line.
    #[arg(
        long,
        value_enum,
        default_value = "text",
        env = "A2A_SERVE_LOG_FORMAT",
        value_name = "FORMAT"
    )]
    #[arg(help_heading = "Observability")]
    pub log_format: LogFormat,
    /// Sign the agent card with this private key (a PEM file: an Ed25519
    /// key signs with EdDSA, a P-256 key with ES256, an RSA key with
    /// RS256). The public keys are served as a JWKS at
    /// /.well-known/jwks.json, which each signature names. Repeat it to
    /// sign with several keys (while rotating keys; or separate the files
    /// with commas).
    #[arg(
        long,
        env = "A2A_SERVE_SIGN_CARD",
        value_name = "KEY_FILE",
        value_delimiter = ','
    )]
    pub sign_card: Vec<PathBuf>,
    /// What the card signatures sign: `rfc8785` (the card as served, in the
    /// RFC 8785 form the specification names), `sdk` (the form the
    /// official A2A SDKs verify: without null and empty values) or `both`
    /// (each key signs the RFC 8785 form and, only when it differs, the SDK
    /// form too).
    #[arg(
        long,
        value_enum,
        default_value = "both",
        env = "A2A_SERVE_CARD_SIGNATURE_FORM",
        value_name = "FORM"
    )]
    pub card_signature_form: crate::card::SignatureForm,
    /// Deliver push notifications to loopback webhooks (127.0.0.0/8, ::1,
    /// localhost, and names that resolve there) although the server
    /// listens beyond loopback, or behind a --trusted-proxy. Listening on
    /// a loopback address (the default 127.0.0.1) without a trusted proxy,
    /// loopback webhooks are always allowed (for `a2a webhook` on the same
    /// machine); listening on 0.0.0.0, :: or another address, or with a
    /// trusted proxy (whose callers come from anywhere), they are refused
    /// unless this is given, like private and link-local addresses, which
    /// are always refused (SSRF protection).
    #[arg(long, env = "A2A_SERVE_PUSH_ALLOW_LOOPBACK")]
    pub push_allow_loopback: bool,
    /// With --agent mcp: the MCP server whose tools to serve, a command line ('CMD ARGS', started and spoken to over stdio) or a streamable HTTP URL.
    #[arg(long, env = "A2A_SERVE_MCP_SERVER", value_name = "'CMD ARGS' | URL")]
    pub mcp_server: Option<String>,
    #[command(flatten)]
    pub auth: AuthArgs,
}

/// How `a2a serve` authenticates its callers. Each scheme given is written
/// into the agent card (`securitySchemes`, `security`); a caller may use
/// any one of them.
#[derive(Args, Debug, Default)]
#[command(next_help_heading = "Authentication")]
pub struct AuthArgs {
    /// Accept JWT bearer tokens signed by a key of this JWKS: an http(s)
    /// URL (fetched, cached, fetched again for a key it does not have) or a
    /// file.
    #[arg(long, env = "A2A_SERVE_AUTH_JWKS", value_name = "URL|FILE")]
    pub auth_jwks: Option<String>,
    /// The issuer (`iss`) the JWTs must carry.
    #[arg(long, env = "A2A_SERVE_AUTH_ISSUER", value_name = "ISS")]
    pub auth_issuer: Option<String>,
    /// The audience (`aud`) the JWTs must carry (one of them, if repeated):
    /// usually this agent's URL.
    #[arg(
        long,
        env = "A2A_SERVE_AUTH_AUDIENCE",
        value_name = "AUD",
        value_delimiter = ','
    )]
    pub auth_audience: Vec<String>,
    /// Accept access tokens (JWTs) of this OpenID Connect provider: its
    /// discovery document (ISSUER_URL/.well-known/openid-configuration)
    /// names its keys and its issuer.
    #[arg(long, env = "A2A_SERVE_AUTH_OIDC", value_name = "ISSUER_URL")]
    pub auth_oidc: Option<String>,
    /// Scopes every token must have (`scope` or `scp` claim); a token
    /// without them is refused with 403.
    #[arg(
        long,
        env = "A2A_SERVE_AUTH_SCOPE",
        value_name = "SCOPE",
        value_delimiter = ','
    )]
    pub auth_scope: Vec<String>,
    /// Clock skew allowed on the tokens' `exp` and `nbf` [default: 60s].
    #[arg(
        long,
        env = "A2A_SERVE_AUTH_LEEWAY",
        value_parser = crate::parse_duration,
        value_name = "DURATION"
    )]
    pub auth_leeway: Option<Duration>,
    /// Accept the API keys of this file: one PRINCIPAL:KEY a line (# starts
    /// a comment). The keys can also come from the environment variable
    /// A2A_SERVE_API_KEYS (PRINCIPAL:KEY pairs separated by commas).
    #[arg(long, env = "A2A_SERVE_API_KEY_FILE", value_name = "FILE")]
    pub api_key_file: Option<PathBuf>,
    /// Where callers send their API key: header:NAME, query:NAME or
    /// cookie:NAME [default: header:X-API-Key].
    #[arg(long, env = "A2A_SERVE_API_KEY_IN", value_name = "WHERE")]
    pub api_key_in: Option<String>,
    /// With authentication on, also let calls without credentials in (they
    /// see only the tasks of other anonymous calls).
    #[arg(long, env = "A2A_SERVE_ALLOW_ANONYMOUS")]
    pub allow_anonymous: bool,
    /// Serve TLS (https://, and gRPC over TLS) with this certificate chain
    /// (PEM, the server's certificate first); needs --tls-key. The files
    /// are read again when they change.
    #[arg(
        long,
        env = "A2A_SERVE_TLS_CERT",
        value_name = "FILE",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(
        long,
        env = "A2A_SERVE_TLS_KEY",
        value_name = "FILE",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
    /// Mutual TLS: accept callers by a client certificate signed by a CA of
    /// this PEM file; the caller is the certificate's subject common name
    /// (or else its first DNS or URI name). Needs --tls-cert and --tls-key.
    /// A call without a certificate is refused like one without credentials
    /// (401), unless --allow-anonymous.
    #[arg(
        long,
        env = "A2A_SERVE_CLIENT_CA",
        value_name = "FILE",
        requires = "tls_cert"
    )]
    pub client_ca: Option<PathBuf>,
}

/// The variable holding API keys (`PRINCIPAL:KEY,PRINCIPAL:KEY`).
const API_KEYS_VAR: &str = "A2A_SERVE_API_KEYS";

impl AuthArgs {
    /// The schemes configured, `None` without any. Errors are usage errors
    /// (exit 2) naming the option.
    pub fn schemes(&self) -> Result<Option<agentwire_server::AuthSchemes>, CliError> {
        use agentwire_server::auth::{ApiKeyLocation, ApiKeys, JwksSource, JwtAuth, JwtConfig};
        let env_keys = std::env::var(API_KEYS_VAR)
            .ok()
            .filter(|v| !v.trim().is_empty());
        let jwt_options = self.auth_issuer.is_some()
            || !self.auth_audience.is_empty()
            || !self.auth_scope.is_empty()
            || self.auth_leeway.is_some();
        if jwt_options && self.auth_jwks.is_none() && self.auth_oidc.is_none() {
            return Err(CliError::usage(
                "--auth-issuer, --auth-audience, --auth-scope and --auth-leeway apply to tokens: \
                 they need --auth-jwks or --auth-oidc",
            )
            .with_hint("add --auth-jwks URL|FILE (or --auth-oidc ISSUER_URL)"));
        }
        if self.api_key_in.is_some() && self.api_key_file.is_none() && env_keys.is_none() {
            return Err(CliError::usage(format!(
                "--api-key-in needs API keys: --api-key-file FILE or {API_KEYS_VAR}"
            )));
        }
        let mut schemes =
            agentwire_server::AuthSchemes::new().allow_anonymous(self.allow_anonymous);
        let mut any = false;
        if self.api_key_file.is_some() || env_keys.is_some() {
            let location = match &self.api_key_in {
                Some(w) => ApiKeyLocation::parse(w)
                    .map_err(|e| CliError::usage(format!("--api-key-in: {e}")))?,
                None => ApiKeyLocation::default_header(),
            };
            let mut keys = ApiKeys::new(location);
            if let Some(path) = &self.api_key_file {
                keys = keys.from_file(path).map_err(CliError::usage)?;
            }
            if let Some(text) = &env_keys {
                keys = keys
                    .parse(text)
                    .map_err(|e| CliError::usage(format!("{API_KEYS_VAR}: {e}")))?;
            }
            schemes = schemes.api_keys(keys);
            any = true;
        }
        let configure = |source: JwksSource| {
            let mut config = JwtConfig::new(source);
            config.issuer = self.auth_issuer.clone();
            config.audiences = self.auth_audience.clone();
            config.required_scopes = self.auth_scope.clone();
            if let Some(l) = self.auth_leeway {
                config.leeway = l;
            }
            JwtAuth::new(config)
        };
        if let Some(jwks) = &self.auth_jwks {
            let jwt = configure(JwksSource::parse(jwks))
                .map_err(|e| CliError::usage(format!("--auth-jwks: {e}")))?;
            schemes = schemes.jwt(jwt);
            any = true;
        }
        if let Some(issuer) = &self.auth_oidc {
            if !(issuer.starts_with("https://") || issuer.starts_with("http://")) {
                return Err(CliError::usage(format!(
                    "--auth-oidc takes the issuer's URL (https://...), not {issuer:?}"
                )));
            }
            let jwt = configure(JwksSource::Oidc(issuer.clone()))
                .map_err(|e| CliError::usage(format!("--auth-oidc: {e}")))?;
            schemes = schemes.jwt(jwt);
            any = true;
        }
        if self.client_ca.is_some() {
            schemes = schemes.mutual_tls(true);
            any = true;
        }
        if !any {
            if self.allow_anonymous {
                return Err(CliError::usage(
                    "--allow-anonymous applies with authentication on: add --api-key-file, --auth-jwks, --auth-oidc or --client-ca",
                ));
            }
            return Ok(None);
        }
        Ok(Some(schemes))
    }
}

impl ServeArgs {
    /// The conformance agent's streaming timeout (either spelling).
    fn tck_streaming_timeout(&self) -> Option<Duration> {
        self.tck_streaming_timeout_ms
            .map(Duration::from_millis)
            .or(self.tck_streaming_timeout)
    }

    /// Refuses the options that mean nothing for the chosen store or agent
    /// (they would be ignored), before anything is opened.
    fn check(&self) -> Result<(), CliError> {
        let from = |option: &str, var: &str| format!("{option} (or {var})");
        if self.max_tasks.is_some() && self.store != StoreSpec::Memory {
            return Err(CliError::usage(format!(
                "{} applies to --store memory only; the {} store keeps every task until --retention purges it",
                from("--max-tasks", "A2A_SERVE_MAX_TASKS"),
                self.store_kind()
            ))
            .with_hint("drop --max-tasks, or serve with --store memory"));
        }
        for (set, option, var) in [
            (
                self.max_store_bytes.is_some(),
                "--max-store-bytes",
                "A2A_SERVE_MAX_STORE_BYTES",
            ),
            (
                self.open_task_ttl.is_some(),
                "--open-task-ttl",
                "A2A_SERVE_OPEN_TASK_TTL",
            ),
        ] {
            if set && self.store != StoreSpec::Memory {
                return Err(CliError::usage(format!(
                    "{} applies to --store memory only; the {} store keeps its tasks on disk",
                    from(option, var),
                    self.store_kind()
                ))
                .with_hint(format!("drop {option}, or serve with --store memory")));
            }
        }
        if self.sqlite_synchronous.is_some() && !matches!(self.store, StoreSpec::Sqlite(_)) {
            return Err(CliError::usage(format!(
                "{} applies to a SQLite store only; the {} store does not commit to a SQLite file",
                from("--sqlite-synchronous", "A2A_SERVE_SQLITE_SYNCHRONOUS"),
                self.store_kind()
            ))
            .with_hint("drop --sqlite-synchronous, or serve with --store sqlite:PATH"));
        }
        if self.replica_timeout.is_some() && !matches!(self.store, StoreSpec::Postgres(_)) {
            return Err(CliError::usage(format!(
                "{} applies to a PostgreSQL store only (replicas sharing it); the {} store has one server",
                from("--replica-timeout", "A2A_SERVE_REPLICA_TIMEOUT"),
                self.store_kind()
            ))
            .with_hint("drop --replica-timeout, or serve with --store postgres://..."));
        }
        // (The hidden former spelling, in milliseconds, keeps its former
        // behaviour: ignored by the other agents, as scripts pass it to all.)
        if self.tck_streaming_timeout.is_some()
            && !matches!(self.agent, AgentName::Conformance | AgentName::All)
        {
            return Err(CliError::usage(format!(
                "{} applies to the conformance agent only, not to {}",
                from("--tck-streaming-timeout", "A2A_SERVE_TCK_STREAMING_TIMEOUT"),
                self.agent.name()
            ))
            .with_hint("drop it, or serve with --agent conformance"));
        }
        if self.agent == AgentName::Mcp && self.mcp_server.is_none() {
            return Err(CliError::usage(
                "--agent mcp serves the tools of an MCP server: name it with --mcp-server",
            )
            .with_hint("e.g. --mcp-server 'npx -y @modelcontextprotocol/server-everything' or --mcp-server http://127.0.0.1:8931/mcp"));
        }
        if self.mcp_server.is_some() && self.agent != AgentName::Mcp {
            return Err(CliError::usage(format!(
                "--mcp-server applies to --agent mcp only, not to {}",
                self.agent.name()
            ))
            .with_hint("drop it, or serve with --agent mcp"));
        }
        if self.agent == AgentName::All {
            if self.metrics_addr.is_some() {
                return Err(CliError::usage(
                    "--metrics-addr names one port, and --agent all serves three agents",
                )
                .with_hint("use --metrics (each agent's /metrics on its own port)"));
            }
            if self.public_url.is_some() {
                return Err(CliError::usage(
                    "--public-url names one agent, and --agent all serves three",
                )
                .with_hint("serve the agents one by one with --agent NAME --public-url URL"));
            }
            if matches!(self.store, StoreSpec::Postgres(_)) {
                return Err(CliError::usage(
                    "--agent all gives each agent its own store, and one PostgreSQL database would mix their tasks",
                )
                .with_hint("use --store sqlite:PATH (one file per agent) or --store memory"));
            }
        }
        Ok(())
    }

    fn store_kind(&self) -> &'static str {
        match self.store {
            StoreSpec::Memory => "memory",
            StoreSpec::Sqlite(_) => "SQLite",
            StoreSpec::Postgres(_) => "PostgreSQL",
        }
    }
}

/// The former environment variables of `a2a serve`, with their current
/// names.
const LEGACY_ENV: &[(&str, &str)] = &[
    ("A2A_HOST", "A2A_SERVE_HOST"),
    ("A2A_PORT", "A2A_SERVE_PORT"),
    ("A2A_PUBLIC_URL", "A2A_SERVE_PUBLIC_URL"),
    ("A2A_STORE", "A2A_SERVE_STORE"),
    ("A2A_REPLICA_TIMEOUT", "A2A_SERVE_REPLICA_TIMEOUT"),
    ("A2A_RETENTION", "A2A_SERVE_RETENTION"),
    ("A2A_MAX_TASKS", "A2A_SERVE_MAX_TASKS"),
];

/// Carries the former variables over to their current names (where those
/// are unset), with a deprecation warning for each.
///
/// Must run before any other thread exists (it sets the environment).
pub fn adopt_legacy_env() -> Vec<String> {
    let mut warnings = Vec::new();
    for (old, new) in LEGACY_ENV {
        let Some(value) = std::env::var_os(old) else {
            continue;
        };
        if std::env::var_os(new).is_some() {
            warnings.push(format!(
                "{old} is deprecated and ignored here: {new} is set"
            ));
            continue;
        }
        // SAFETY: called from `main` before the async runtime or any other
        // thread exists, so nothing reads the environment concurrently.
        unsafe { std::env::set_var(new, value) };
        warnings.push(format!(
            "{old} is deprecated and will be removed: set {new} instead"
        ));
    }
    warnings
}

/// A failure of the server (not a usage error): printed once, without a
/// client error code.
fn failure(message: impl Into<String>) -> CliError {
    CliError::new(code::SERVE_FAILED, exit::FAILURE, message)
}

/// The cause in a store's error, without the store's own "task store:
/// opening X failed:" prefix (the caller says what it was opening).
fn cause(e: &agentwire_types::A2aError) -> String {
    let m = e.message.as_str();
    match m
        .strip_prefix("task store: ")
        .and_then(|r| r.split_once(" failed: "))
    {
        Some((_, cause)) => cause.to_owned(),
        None => m.to_owned(),
    }
}

/// A store opened by [`open_store`].
struct Opened {
    store: Arc<dyn TaskStore>,
    /// The replicas' event bus (PostgreSQL): then the start-up crash
    /// recovery does not apply (its tasks may be running on other
    /// replicas).
    bus: Option<Arc<dyn agentwire_server::EventBus>>,
    /// A push outbox in the same database, shared by the replicas, with
    /// their shared signing key (PostgreSQL; a SQLite store gets its
    /// outbox in [`push_config`]).
    outbox: Option<agentwire_server::push::PostgresOutbox>,
    /// What to say about the store after its name on the start-up lines
    /// (for SQLite: the synchronous level its writer really uses).
    detail: Option<String>,
}

/// Checks that PostgreSQL answers, within [`PG_CONNECT_TIMEOUT`], with one
/// connection: the pool of the store retries a refused connection until its
/// own timeout and then reports only that it timed out.
async fn probe_postgres(url: &str) -> Result<(), CliError> {
    use sqlx::Connection;
    let options: sqlx::postgres::PgConnectOptions = url
        .parse()
        .map_err(|e| CliError::usage(format!("--store {}: {e}", redact(url))))?;
    let hint = "check that PostgreSQL runs at that address and that the user, password and \
                database in --store (or A2A_SERVE_STORE) are right";
    match tokio::time::timeout(
        PG_CONNECT_TIMEOUT,
        sqlx::PgConnection::connect_with(&options),
    )
    .await
    {
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
            Ok(())
        }
        Ok(Err(e)) => Err(failure(format!(
            "cannot connect to PostgreSQL at {}: {e}",
            redact(url)
        ))
        .with_hint(hint)),
        Err(_) => Err(failure(format!(
            "no answer from PostgreSQL at {} within {}s (connect timeout)",
            redact(url),
            PG_CONNECT_TIMEOUT.as_secs()
        ))
        .with_hint(hint)),
    }
}

async fn open_store(spec: &StoreSpec, args: &ServeArgs) -> Result<Opened, CliError> {
    match spec {
        StoreSpec::Memory => {
            let mut config = MemoryStoreConfig {
                max_tasks: args.max_tasks.unwrap_or(DEFAULT_MAX_TASKS),
                ..MemoryStoreConfig::default()
            };
            if let Some(age) = args.retention {
                config.terminal_ttl = age;
            }
            if let Some(bytes) = args.max_store_bytes {
                config.max_bytes = bytes;
            }
            if let Some(age) = args.open_task_ttl {
                config.idle_ttl = age;
            }
            Ok(Opened {
                store: Arc::new(MemoryStore::new(config)),
                bus: None,
                outbox: None,
                detail: None,
            })
        }
        StoreSpec::Postgres(url) => {
            probe_postgres(url).await?;
            // Replicas sharing the database follow each other's tasks (event
            // log and LISTEN/NOTIFY): each process is a replica of its own.
            // A replica that stops announcing itself for `replica_timeout` is
            // gone: the others fail its working tasks.
            let replica_timeout = args.replica_timeout.unwrap_or(DEFAULT_REPLICA_TIMEOUT);
            let replica = agentwire_server::bus::new_replica_id();
            let store = agentwire_server::store::PostgresStore::connect(url)
                .await
                .and_then(|s| s.with_event_log(&replica))
                .map_err(|e| {
                    failure(format!(
                        "cannot open the PostgreSQL task store {}: {}",
                        redact(url),
                        cause(&e)
                    ))
                })?;
            let bus = agentwire_server::store::PgEventBus::new(&store)
                .map_err(|e| {
                    failure(format!(
                        "cannot start the replicas' event bus: {}",
                        cause(&e)
                    ))
                })?
                .liveness(replica_timeout / 6, replica_timeout);
            let outbox = agentwire_server::push::PostgresOutbox::new(&store);
            Ok(Opened {
                store: Arc::new(store),
                bus: Some(Arc::new(bus)),
                outbox: Some(outbox),
                detail: None,
            })
        }
        StoreSpec::Sqlite(path) => {
            let level = args
                .sqlite_synchronous
                .unwrap_or(SqliteSync::Normal)
                .level();
            let options = SqliteOptions::default().synchronous(level);
            let store = SqliteStore::open_with(path, options).await.map_err(|e| {
                use agentwire_server::store::{StorageFault, holder_pid, storage_fault};
                if storage_fault(&e) == Some(StorageFault::Busy) {
                    // Another server has the file (the store's message names
                    // the file, its lock file and the holder's pid).
                    let stop = match holder_pid(&e) {
                        Some(pid) => format!("stop the server that uses it (pid {pid})"),
                        None => "stop the program that uses it".to_owned(),
                    };
                    let what = e.message.trim_start_matches("task store: ");
                    return failure(what).with_hint(format!(
                        "{stop}, or give this server a file of its own with --store \
                         sqlite:OTHER.db"
                    ));
                }
                if storage_fault(&e) == Some(StorageFault::Corrupt) {
                    // The store's message names the file and says what is
                    // wrong with it.
                    return failure(e.message.clone()).with_hint(format!(
                        "keep the damaged file aside (e.g. mv {0} {0}.damaged) or put back a \
                         backup of it, then start the server again",
                        path.display()
                    ));
                }
                failure(format!(
                    "cannot open the SQLite task store {}: {}",
                    path.display(),
                    cause(&e)
                ))
                .with_hint("check that the file's directory exists and is writable")
            })?;
            // Said as the writer's connection has it (read back, not
            // taken from the option).
            let level = store
                .with_writer(|c| c.pragma_query_value(None, "synchronous", |r| r.get::<_, i64>(0)))
                .await
                .map_err(|e| {
                    failure(format!(
                        "cannot read the settings of the SQLite task store {}: {}",
                        path.display(),
                        cause(&e)
                    ))
                })?;
            let detail = match level {
                // https://www.sqlite.org/pragma.html#pragma_synchronous
                0 => "synchronous OFF".to_owned(),
                1 => "synchronous NORMAL".to_owned(),
                2 => "synchronous FULL".to_owned(),
                3 => "synchronous EXTRA".to_owned(),
                n => format!("synchronous {n}"),
            };
            Ok(Opened {
                store: Arc::new(store),
                bus: None,
                outbox: None,
                detail: Some(detail),
            })
        }
    }
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

pub async fn run(mut args: ServeArgs) -> Result<(), CliError> {
    args.store = match &args.store_arg {
        Some(spec) => spec.clone(),
        None => default_store(args.agent),
    };
    args.check()?;
    let agents = match args.agent {
        AgentName::All => vec![
            AgentName::Echo,
            AgentName::DepCompat,
            AgentName::Conformance,
        ],
        one => vec![one],
    };
    let several = agents.len() > 1;
    let mut servers = Vec::new();
    for (i, agent) in agents.into_iter().enumerate() {
        let store = match &args.store_arg {
            Some(spec) if several => spec.for_agent(agent),
            Some(spec) => spec.clone(),
            None => {
                note_former_default(agent);
                default_store(agent)
            }
        };
        let port = if args.port == 0 {
            0
        } else {
            u16::try_from(i)
                .ok()
                .and_then(|i| args.port.checked_add(i))
                .ok_or_else(|| {
                    CliError::usage(format!(
                        "--port {} leaves no room for every agent (they take PORT, PORT+1, PORT+2)",
                        args.port
                    ))
                    .with_hint("use a lower --port, or --port 0 for free ones")
                })?
        };
        servers.push(bind(&args, agent, &store, port).await?);
    }
    say!("Press Ctrl-C to stop.");
    let runs = servers
        .into_iter()
        .map(|bound| bound.run_until(agentwire_server::shutdown_signal()));
    futures::future::try_join_all(runs)
        .await
        .map_err(|e| failure(format!("the server stopped: {e}")))?;
    say!("Stopped.");
    Ok(())
}

/// The former default task store, shared by every agent served in one
/// directory (which failed each other's tasks at restart).
const FORMER_DEFAULT_STORE: &str = "a2a-tasks.db";

/// The task store of `agent` when `--store` is not given: a SQLite file of
/// its own in the current directory, `a2a-tasks-AGENT.db` (the name
/// `--agent all` always gave each agent).
fn default_store(agent: AgentName) -> StoreSpec {
    StoreSpec::Sqlite(PathBuf::from(format!("a2a-tasks-{}.db", agent.name())))
}

/// Says, once (the first start of `agent` with the new default), that the
/// file earlier versions used by default is left as it is.
fn note_former_default(agent: AgentName) {
    let StoreSpec::Sqlite(new) = default_store(agent) else {
        return;
    };
    if Path::new(FORMER_DEFAULT_STORE).exists() && !new.exists() {
        eprintln!(
            "note: {FORMER_DEFAULT_STORE} (the task store earlier versions shared between agents) \
             is not used: this agent keeps its tasks in {}; to go on with the old file, pass \
             --store sqlite:{FORMER_DEFAULT_STORE} or rename it to {}",
            new.display(),
            new.display()
        );
    }
}

/// The conformance agent's push set-up for a store (and the outbox the
/// store's database offers, if any).
async fn push_config(
    store: &StoreSpec,
    outbox: Option<agentwire_server::push::PostgresOutbox>,
    allow_loopback: bool,
) -> Result<agentwire_server::PushConfig, CliError> {
    let config = agentwire_server::PushConfig::new();
    let config = if allow_loopback {
        config.allow_loopback()
    } else {
        config
    };
    if let Some(outbox) = outbox {
        // Replicas behind one URL sign with one key.
        let signer = outbox.shared_signer().await.map_err(|e| {
            failure(format!(
                "cannot read or create the replicas' push signing key: {e}"
            ))
        })?;
        return Ok(config.outbox(Arc::new(outbox)).signer(signer));
    }
    let StoreSpec::Sqlite(path) = store else {
        return Ok(config);
    };
    let outbox = agentwire_server::push::SqliteOutbox::open(path)
        .await
        .map_err(|e| {
            failure(format!(
                "cannot open the push outbox in {}: {e}",
                path.display()
            ))
        })?;
    let key = key_path(path);
    let signer = agentwire_server::push::PushSigner::load_or_create(&key).map_err(|e| {
        failure(format!(
            "cannot load or create the push signing key {}: {e}",
            key.display()
        ))
    })?;
    Ok(config.outbox(Arc::new(outbox)).signer(signer))
}

/// Whether push notifications may go to loopback webhooks: with
/// `--push-allow-loopback`, or when the server listens on loopback only and
/// no reverse proxy is named (`--trusted-proxy`): behind a proxy, callers
/// from anywhere reach a server listening on loopback, and loopback
/// webhooks would let them make it call the other services of its host.
async fn push_allows_loopback(args: &ServeArgs) -> bool {
    args.push_allow_loopback
        || (args.trusted_proxies.is_empty()
            && agentwire_server::push::is_loopback_host(&args.host).await)
}

/// The push signing key beside a SQLite store: `PATH.push-key`.
fn key_path(store: &Path) -> PathBuf {
    let mut name = store.as_os_str().to_owned();
    name.push(".push-key");
    PathBuf::from(name)
}

/// Builds, binds and announces one agent's server.
async fn bind(
    args: &ServeArgs,
    agent: AgentName,
    store_spec: &StoreSpec,
    port: u16,
) -> Result<agentwire_server::BoundServer, CliError> {
    let server = match agent {
        AgentName::Echo | AgentName::All => A2aServer::new(echo::card(), echo::EchoAgent),
        AgentName::Conformance => A2aServer::new(
            conformance::card(),
            conformance::ConformanceAgent {
                streaming_timeout: args
                    .tck_streaming_timeout()
                    .unwrap_or(DEFAULT_TCK_STREAMING_TIMEOUT),
            },
        ),
        AgentName::DepCompat => A2aServer::new(depcompat::card(), depcompat::DepCompatAgent),
        AgentName::Mcp => {
            let spec = args.mcp_server.as_deref().unwrap_or_default();
            let agent = agentwire_agents::mcp::McpToolsAgent::connect(spec)
                .await
                .map_err(|e| failure(e.to_string()))?;
            A2aServer::new(agent.card(), agent)
        }
    };
    // The stores log their failures; here the error returned says it all,
    // once: opening runs without a log subscriber.
    let quiet = || tracing::subscriber::NoSubscriber::default();
    let Opened {
        store,
        bus,
        outbox,
        detail,
    } = open_store(store_spec, args)
        .with_subscriber(quiet())
        .await?;
    let server = if matches!(agent, AgentName::Conformance | AgentName::Echo) {
        // Push notifications, loopback webhooks included when the server
        // listens on loopback or --push-allow-loopback says so (conformance
        // runs, `a2a webhook` beside the echo agent);
        // with a SQLite store the outbox and the signing key live beside
        // it, so a restart loses no notification and keeps the JWKS; with
        // PostgreSQL the replicas share an outbox in the database.
        server.push(
            push_config(store_spec, outbox, push_allows_loopback(args).await)
                .with_subscriber(quiet())
                .await?,
        )
    } else {
        server
    };
    let defaults = agentwire_server::HandlerConfig::default();
    let config = agentwire_server::HandlerConfig {
        max_list_bytes: args.max_list_bytes.unwrap_or(defaults.max_list_bytes),
        max_parts: args.max_parts.unwrap_or(defaults.max_parts),
        max_artifact_bytes: args
            .max_artifact_bytes
            .unwrap_or(defaults.max_artifact_bytes),
        max_in_flight: args.max_in_flight.unwrap_or(defaults.max_in_flight),
        max_open_tasks_per_caller: bound(
            args.max_open_tasks_per_caller,
            Some(default_open_tasks_per_caller(store_spec, args.max_tasks)),
        ),
        max_push_configs_per_task: args
            .max_push_configs_per_task
            .unwrap_or(defaults.max_push_configs_per_task),
        max_running_bytes_per_caller: bound(
            args.max_running_bytes_per_caller,
            defaults.max_running_bytes_per_caller,
        ),
        max_running_bytes: bound(args.max_running_bytes, defaults.max_running_bytes),
        max_streams_per_caller: bound(args.max_streams_per_caller, defaults.max_streams_per_caller),
        max_incoming_bytes_per_caller: bound(
            args.max_incoming_bytes_per_caller,
            defaults.max_incoming_bytes_per_caller,
        ),
        max_incoming_bytes: bound(args.max_incoming_bytes, defaults.max_incoming_bytes),
        max_queued_bytes: args.max_queued_bytes.unwrap_or(defaults.max_queued_bytes),
        long_poll_max: args.long_poll_max.unwrap_or(defaults.long_poll_max),
        serve_v03: !args.no_v03,
        ..defaults
    };
    let auth = args.auth.schemes()?;
    let authenticated = auth.is_some();
    let server = match auth {
        Some(schemes) => {
            // Keys fetched now, so that a mistyped URL shows at start; the
            // server starts all the same (the provider may come up later).
            for e in schemes.prefetch().await {
                eprintln!("warning: {e}; tokens are refused until the keys can be loaded");
            }
            server.authenticator(Arc::new(schemes))
        }
        None => server,
    };
    let mut server = server
        .config(config)
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
    if let Some(age) = args.card_max_age {
        server = server.card_max_age(age);
    }
    if let Some(url) = &args.public_url {
        server = server.public_url(url);
    }
    if let Some(t) = args.request_head_timeout {
        server = server.request_head_timeout(t);
    }
    if let Some(t) = args.body_read_timeout {
        server = server.body_read_timeout(t);
    }
    if let Some(t) = args.idle_timeout {
        server = server.idle_timeout(t);
    }
    if let Some(n) = args.max_connections_per_address {
        server = server.max_connections_per_address(bound(Some(n), None));
    }
    if !args.trusted_proxies.is_empty() {
        server = server.trusted_proxies(args.trusted_proxies.iter().copied());
    }
    if let Some(n) = args.max_connections {
        server = server.max_connections(n);
    }
    if let Some(grace) = args.shutdown_grace {
        server = server.shutdown_grace(grace);
    }
    for origin in &args.cors_origins {
        server = server.cors_origin(origin.clone());
    }
    let mut metrics_url = None;
    if args.metrics || args.metrics_addr.is_some() {
        let metrics = Arc::new(agentwire_server::observe::Metrics::new());
        server = server.metrics(Arc::clone(&metrics), args.metrics_addr.is_none());
        if let Some(addr) = &args.metrics_addr {
            let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
                failure(format!("cannot listen on {addr} for metrics: {e}"))
                    .with_hint("choose another --metrics-addr (port 0 picks a free one)")
            })?;
            let local = listener
                .local_addr()
                .map_err(|e| failure(format!("cannot listen on {addr} for metrics: {e}")))?;
            metrics_url = Some(format!(
                "http://{}{}",
                agentwire_server::advertised_addr(local),
                agentwire_server::observe::metrics::METRICS_PATH
            ));
            let router = agentwire_server::observe::metrics::router(metrics);
            tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, router).await {
                    tracing::warn!(error = %e, "the metrics server stopped");
                }
            });
        }
    }
    if !args.sign_card.is_empty() {
        server =
            server.sign_card(card_signing(&args.sign_card)?.form(args.card_signature_form.into()));
    }
    let tls = args.auth.tls_cert.is_some();
    let mut tls_config = None;
    if let (Some(cert), Some(key)) = (&args.auth.tls_cert, &args.auth.tls_key) {
        let mut config = agentwire_server::TlsConfig::new(cert, key);
        if let Some(ca) = &args.auth.client_ca {
            config = config.client_ca(ca);
        }
        // Read now, for a clear error before anything listens.
        config.load().map_err(|e| {
            failure(format!("TLS: {e}")).with_hint(
                "give --tls-cert a PEM certificate chain and --tls-key its PEM private key",
            )
        })?;
        if let Some(url) = &args.public_url {
            public_url_warning(url, &config, cert);
        }
        tls_config = Some(config.clone());
        server = server.tls(config);
    }
    let scheme = if tls { "https" } else { "http" };
    let addr = format!("{}:{port}", args.host);
    let bound = server.bind(&addr).await.map_err(|e| {
        // Before listening, the server runs the crash recovery of its
        // task store: not a matter of ports.
        if e.to_string().starts_with("crash recovery failed") {
            return failure(format!(
                "cannot start: the task store {} failed at start-up: {e}",
                store_spec.display()
            ))
            .with_hint(
                "check that the task store can be read and written (the disk, its permissions, \
                 or the database server), then start the server again",
            );
        }
        failure(format!("cannot listen on {addr}: {e}")).with_hint(
            "another program may use that port: choose another with --port (0 picks a free one), \
             or check --host",
        )
    })?;
    let local = bound.local_addr();
    // Listening on every interface: `local` is no address to call.
    let every_interface = local.ip().is_unspecified();
    let reachable = agentwire_server::advertised_addr(local);
    // Over TLS, a host the certificate names (as the card advertises).
    let reachable = match &tls_config {
        Some(config) => config.advertised_authority(reachable),
        None => reachable.to_string(),
    };
    let card = bound.agent_card();
    if every_interface {
        say!(
            "Serving {} on every network interface ({local}), e.g. {scheme}://{reachable}",
            card.name
        );
        if !authenticated {
            eprintln!(
                "warning: --host {} listens on every network interface without authentication: \
                 every task is served to anyone who can reach this machine; serve on 127.0.0.1 \
                 (the default) unless that is what you want, or authenticate callers with \
                 --api-key-file, --auth-jwks or --auth-oidc",
                args.host
            );
        }
        if args.public_url.is_none() {
            eprintln!(
                "warning: the agent card cannot advertise {}, so it advertises \
                 http://{reachable} (this machine's address on its default route); pass \
                 --public-url with the URL clients should use",
                local.ip()
            );
        }
    } else {
        say!("Serving {} on {scheme}://{local}", card.name);
    }
    if tls {
        say!(
            "  TLS:        on{}",
            if args.auth.client_ca.is_some() {
                " (client certificates: mutual TLS)"
            } else {
                ""
            }
        );
    }
    say!(
        "  agent card: {scheme}://{reachable}{}",
        agentwire_types::AGENT_CARD_PATH
    );
    match detail {
        Some(detail) => say!("  task store: {} ({detail})", store_spec.display()),
        None => say!("  task store: {}", store_spec.display()),
    }
    if !args.trusted_proxies.is_empty() {
        let nets: Vec<String> = args.trusted_proxies.iter().map(|n| n.to_string()).collect();
        say!(
            "  trusted proxies: {} (clients by X-Forwarded-For)",
            nets.join(", ")
        );
    }
    if authenticated {
        let mut names: Vec<&String> = card.security_schemes.keys().collect();
        names.sort();
        let names: Vec<&str> = names.into_iter().map(String::as_str).collect();
        say!("  authentication: {}", names.join(", "));
    }
    if let Some(url) = metrics_url {
        say!("  metrics:    {url}");
    } else if args.metrics {
        say!(
            "  metrics:    {scheme}://{reachable}{}",
            agentwire_server::observe::metrics::METRICS_PATH
        );
    }
    let hints = serde_json::to_value(card)
        .map(|c| agentwire_types::jws::card_signature_hints(&c))
        .unwrap_or_default();
    if !hints.is_empty() {
        let keys: Vec<String> = hints
            .iter()
            .map(|h| {
                let alg = h.alg.as_deref().unwrap_or_default();
                format!("{alg} key {}", h.kid.as_deref().unwrap_or_default())
            })
            .collect();
        say!("  card signed: {}", keys.join(", "));
        if let Some(jku) = hints.iter().find_map(|h| h.jku.as_deref()) {
            say!("  card keys:  {jku}");
        }
    }
    for i in &card.supported_interfaces {
        say!("  {:<9} {}", i.protocol_binding, i.url);
    }
    for line in try_lines(agent, &format!("{scheme}://{reachable}")) {
        say!("  try: {line}");
    }
    Ok(bound)
}

/// An address or network of `--trusted-proxy` (an address alone is its
/// own /32 or /128).
fn parse_net(s: &str) -> Result<agentwire_server::IpNet, String> {
    let s = s.trim();
    s.parse()
        .or_else(|_| s.parse::<std::net::IpAddr>().map(Into::into))
        .map_err(|_| format!("not an address or a network (CIDR, like 10.0.0.0/24): {s:?}"))
}

/// A bound given on the command line (`0`: none), or its default.
fn bound(arg: Option<usize>, default: Option<usize>) -> Option<usize> {
    match arg {
        Some(0) => None,
        Some(n) => Some(n),
        None => default,
    }
}

/// The bound on each caller's open tasks when `--max-open-tasks-per-caller`
/// is not given: a tenth of the memory store's cap (so that ten callers
/// are needed to fill it), and 1,000 with a store on disk.
fn default_open_tasks_per_caller(store: &StoreSpec, max_tasks: Option<usize>) -> usize {
    match store {
        StoreSpec::Memory => (max_tasks.unwrap_or(DEFAULT_MAX_TASKS) / 10).max(1),
        _ => 1000,
    }
}

/// Warns when the host of `--public-url` is not a name of the TLS
/// certificate: clients calling that URL would refuse the certificate.
fn public_url_warning(url: &str, config: &agentwire_server::TlsConfig, cert: &std::path::Path) {
    let Some(host) = url
        .parse::<http::Uri>()
        .ok()
        .and_then(|u| u.host().map(str::to_owned))
    else {
        return;
    };
    if let Ok(names) = config.certificate_names()
        && !names.covers(&host)
    {
        eprintln!(
            "warning: --public-url {url}: the TLS certificate {} does not name {host} (it \
             names {}), so clients calling that URL will refuse it; use a certificate for \
             {host} (subjectAltName) or a --public-url with a name it covers",
            cert.display(),
            names.describe()
        );
    }
}

/// The card signing keys of `--sign-card`.
fn card_signing(files: &[PathBuf]) -> Result<agentwire_server::CardSigning, CliError> {
    let mut signing = agentwire_server::CardSigning::default();
    for f in files {
        let key = agentwire_types::jws::SigningKey::from_pem_file(f).map_err(|e| {
            failure(format!("--sign-card: {e}")).with_hint(
                "give a PEM private key: Ed25519, P-256 or RSA, e.g. one made with \
                 `openssl genpkey -algorithm ed25519 -out card-key.pem`",
            )
        })?;
        signing = signing.key(key);
    }
    Ok(signing)
}

/// The npm lockfile of the `try:` line of `--agent depcompat`: a project
/// whose Node.js range and one dependency's engines are to be checked.
const DEPCOMPAT_TRY_LOCKFILE: &str = r#"{"name":"shop","lockfileVersion":3,"packages":{"":{"name":"shop","engines":{"node":">=18"},"dependencies":{"express":"^4.21.0","old-native":"^2.1.0"}},"node_modules/express":{"version":"4.21.2","engines":{"node":">= 0.10.0"}},"node_modules/old-native":{"version":"2.1.0","engines":{"node":">=14 <22"}}}}"#;

/// Ready-to-paste `a2a send` lines for an agent served at `url`.
fn try_lines(agent: AgentName, url: &str) -> Vec<String> {
    match agent {
        AgentName::Echo | AgentName::All => vec![format!("a2a send -a {url} \"hello world\"")],
        AgentName::Mcp => vec![format!(
            "a2a send -a {url} \"what can you do?\"   (a2a card get -a {url} lists the tools as skills)"
        )],
        AgentName::Conformance => vec![format!(
            "a2a send -a {url} --message-id tck-complete-task-1 \"hello\""
        )],
        AgentName::DepCompat => {
            // A lockfile given inline (standard input as a data part), so
            // that the line works from any directory, not only a clone.
            vec![
                format!("a2a send -a {url} \"Do you support npm 11 lockfiles?\""),
                format!(
                    "echo '{DEPCOMPAT_TRY_LOCKFILE}' | a2a send -a {url} --stream --text \"Check this project for Node.js 24\" --data -"
                ),
                "a2a demo   (the whole example story, with its own server)".to_owned(),
            ]
        }
    }
}

/// A URL without its password, for printing.
fn redact(spec: &str) -> String {
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

    /// What the help says: every option of `a2a serve` can be set as
    /// A2A_SERVE_<OPTION>, the long option in upper snake case.
    #[test]
    fn every_option_has_its_variable() {
        #[derive(clap::Parser)]
        struct Serve {
            #[command(flatten)]
            args: ServeArgs,
        }
        let command = <Serve as clap::CommandFactory>::command();
        let mut missing = Vec::new();
        for arg in command.get_arguments() {
            let Some(long) = arg.get_long() else {
                continue;
            };
            if arg.is_hide_set() || long == "help" {
                continue;
            }
            let wanted = format!("A2A_SERVE_{}", long.to_uppercase().replace('-', "_"));
            let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
            if env.as_deref() != Some(wanted.as_str()) {
                missing.push(format!("--{long}: {env:?}, not {wanted}"));
            }
        }
        assert!(missing.is_empty(), "{missing:#?}");
        assert!(command.get_arguments().count() > 50);
    }

    #[test]
    fn stores_and_redaction() {
        assert_eq!(
            redact("postgres://a2a:secret@127.0.0.1:5432/db"),
            "postgres://a2a:***@127.0.0.1:5432/db"
        );
        let parse = |s: &str| StoreSpec::parse(s);
        assert_eq!(parse("memory"), Ok(StoreSpec::Memory));
        assert_eq!(
            parse("sqlite:x.db"),
            Ok(StoreSpec::Sqlite(PathBuf::from("x.db")))
        );
        assert_eq!(
            parse("sqlite:///tmp/x.db"),
            Ok(StoreSpec::Sqlite(PathBuf::from("/tmp/x.db")))
        );
        assert!(matches!(
            parse("postgresql://u:p@h:5432/db"),
            Ok(StoreSpec::Postgres(_))
        ));
        for bad in ["redis://x", "memroy", "x.db", "sqlite:", "mysql:x"] {
            let e = parse(bad).unwrap_err();
            assert!(
                e.contains("memory") && e.contains("sqlite:") && e.contains("postgres://")
                    || bad == "sqlite:",
                "{bad}: {e}"
            );
        }
        let e = parse("postgres://u:secret@h:notaport/db").unwrap_err();
        assert!(!e.contains("secret"), "{e}");
        assert_eq!(
            parse("sqlite:a2a-tasks.db")
                .unwrap()
                .for_agent(AgentName::Echo),
            StoreSpec::Sqlite(PathBuf::from("a2a-tasks-echo.db"))
        );
        assert_eq!(
            parse("sqlite:data/tasks")
                .unwrap()
                .for_agent(AgentName::DepCompat),
            StoreSpec::Sqlite(PathBuf::from("data/tasks-depcompat"))
        );
        assert_eq!(
            StoreSpec::Memory.for_agent(AgentName::Echo),
            StoreSpec::Memory
        );
        assert_eq!(
            key_path(Path::new("data/t.db")),
            PathBuf::from("data/t.db.push-key")
        );
    }
}
