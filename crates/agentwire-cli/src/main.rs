//! `a2a`: discover, call, follow and serve A2A (Agent2Agent) agents.
//!
//! The command follows the A2A CLI specification (`agentwire-cli` SPEC 0.2):
//! stateless, blocking by default, `-o text|json`, `--stream` for live
//! events, protocol errors by their A2A name and the tool's own as
//! `A2ACLI_ERR_*`, exit codes 0-5.

// The server's requests are served by any worker thread, so memory is often
// freed on another thread than the one that allocated it (hyper's 8 KiB read
// buffers and request headers, which are too large for glibc's per-thread
// caches). glibc then takes the owning arena's lock, and under load the two
// threads wait on each other (futex calls); mimalloc frees such memory
// without a lock. Measured: see benches/README.md.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod agent;
mod auth_cmd;
mod card;
mod chat;
mod config;
mod conformance;
mod demo;
mod error;
mod inspect;
mod ledger;
mod mcp;
mod progress;
mod push;
mod registry;
mod release;
mod render;
mod send;
mod serve;
mod task;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgAction, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use crate::error::{CliError, exit};

const AFTER_HELP: &str = "\
Each command takes the options that mean something for it (see a2a <command> --help):
the global options below on every command; the connection options (-a, --bearer,
--transport...) on the commands that call an agent; --wait, --async, --poll-interval,
--timeout where the command waits; --task-id, --context-id, --metadata, --stream where
they apply. Any other option is a usage error (exit 2).

Every client option can also be set as A2ACLI_<OPTION> in the environment or in a .env
file (./.env found upwards from the working directory, or --config FILE; then
~/.config/a2a-cli/.env), and is read by the commands that take the option. Precedence:
flag > environment > local file > global file > default. --stream is never read from
the environment. `a2a config show` lists every setting and where it came from.
`a2a serve` reads its own options from A2A_SERVE_<OPTION> (see a2a serve --help).

Durations (--timeout, --poll-interval, and the server's) are a number and a unit:
500ms, 2s, 1.5s, 1m, 24h, 7d, or combined (1h 30m); a bare number is seconds.
Log filtering follows RUST_LOG (e.g. RUST_LOG=info for the server's requests);
--debug turns on the client's diagnostics.

Credentials passed as flags are visible in the process table and in shell history:
prefer A2ACLI_BEARER / A2ACLI_API_KEY (or a .env file with mode 600).

Exit status: 0 the command did its job (whatever the task's outcome), 1 failure,
2 usage error, 3 agent or card unreachable, 4 authentication, 5 --timeout expired.

Examples:
  a2a card get -a localhost:8080
  a2a send -a localhost:8080 \"hello\"
  a2a send -a localhost:8080 --task-id <taskId> \"my answer\"
  a2a send -a localhost:8080 -o json --stream --text \"report\" --file data.csv
  a2a task get -a localhost:8080 --wait <taskId>";

/// Discover, call, follow and serve A2A (Agent2Agent) agents.
#[derive(Parser, Debug)]
#[command(
    name = "a2a",
    version,
    disable_version_flag = true,
    about = "Discover, call, follow and serve A2A (Agent2Agent) agents",
    after_help = AFTER_HELP
)]
pub struct Cli {
    #[command(flatten)]
    pub common: CommonOpts,

    /// Print the version and exit (also -V).
    #[arg(short = 'v', short_alias = 'V', long = "version", action = ArgAction::Version)]
    version: Option<bool>,

    #[command(subcommand)]
    pub command: Command,
}

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Labelled fields for people, one per line; safe to pipe.
    Text,
    /// The protocol's own JSON objects (one document, or JSONL with --stream).
    Json,
}

/// The options of every command (CLI SPEC 7.2): output, configuration and
/// diagnostics. The other options of the specification's table belong to
/// the commands they mean something for (the groups below), so a command
/// refuses an option it would ignore, and its `--help` lists only its own.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Global options")]
pub struct CommonOpts {
    /// Load configuration from this .env file instead of the local .env.
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Diagnostics on stderr: negotiation, timing, the protocol messages (credentials redacted).
    #[arg(long, global = true, env = "A2ACLI_DEBUG")]
    pub debug: bool,

    /// Output format.
    #[arg(
        short = 'o',
        long,
        global = true,
        env = "A2ACLI_OUTPUT",
        value_enum,
        default_value = "text"
    )]
    pub output: OutputFormat,

    /// Show every part and field exchanged, not the concise view.
    #[arg(long, global = true, env = "A2ACLI_VERBOSE")]
    pub verbose: bool,
}

/// The agent, when a command only reads its card.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Connection options")]
pub struct AgentOpts {
    /// The agent: a host or origin (the well-known card path is appended), a card URL, a card file (file://... or a path), or registry:NAME (with --registry).
    #[arg(
        short = 'a',
        long,
        global = true,
        env = "A2ACLI_AGENT_CARD",
        value_name = "REF"
    )]
    pub agent_card: Option<String>,

    /// Do not verify TLS certificates (development only; prints a warning).
    #[arg(long, global = true, env = "A2ACLI_INSECURE")]
    pub insecure: bool,

    /// Fetch the agent card afresh instead of using the cached copy (the new card replaces it).
    #[arg(long, global = true, env = "A2ACLI_NO_CACHE")]
    pub no_cache: bool,

    #[command(flatten)]
    pub tls: TlsOpts,

    #[command(flatten)]
    pub registry: RegistryOpt,

    #[command(flatten)]
    pub limits: LimitOpts,
}

/// How much of an agent's answers the tool reads (a larger answer is
/// refused, exit 1, as soon as it passes the limit).
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Connection options")]
pub struct LimitOpts {
    /// The most bytes read in one answer of the agent, one stream event or one gRPC message [default: 67108864, 64 MiB].
    #[arg(
        long,
        global = true,
        env = "A2ACLI_MAX_RESPONSE_BYTES",
        value_name = "BYTES"
    )]
    pub max_response_bytes: Option<usize>,

    /// The most bytes read of an agent card [default: 1048576, 1 MiB].
    #[arg(
        long,
        global = true,
        env = "A2ACLI_MAX_CARD_BYTES",
        value_name = "BYTES"
    )]
    pub max_card_bytes: Option<usize>,
}

impl Apply for LimitOpts {
    fn apply(&self, g: &mut Globals) {
        g.max_response_bytes = self.max_response_bytes;
        g.max_card_bytes = self.max_card_bytes;
    }
}

/// TLS with the agent: the authorities to trust, and a client certificate
/// for agents that ask for one (mutual TLS), on every binding.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Connection options")]
pub struct TlsOpts {
    /// Trust the certificate authorities in this PEM file for the agent's certificate, instead of the system's.
    #[arg(long, global = true, env = "A2ACLI_CACERT", value_name = "FILE")]
    pub cacert: Option<PathBuf>,

    /// Present this client certificate (PEM) to agents that ask for one (mutual TLS); needs --key.
    #[arg(
        long,
        global = true,
        env = "A2ACLI_CERT",
        requires = "key",
        value_name = "FILE"
    )]
    pub cert: Option<PathBuf>,

    /// The private key (PEM) of --cert.
    #[arg(
        long,
        global = true,
        env = "A2ACLI_KEY",
        requires = "cert",
        value_name = "FILE"
    )]
    pub key: Option<PathBuf>,
}

impl Apply for TlsOpts {
    fn apply(&self, g: &mut Globals) {
        g.cacert.clone_from(&self.cacert);
        g.cert.clone_from(&self.cert);
        g.key.clone_from(&self.key);
    }
}

/// The agent registry (`-a registry:NAME`, `a2a demo`, the `a2a registry` commands).
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Connection options")]
pub struct RegistryOpt {
    /// The agent registry for `-a registry:NAME` references and the `a2a registry` commands.
    #[arg(long, global = true, env = "A2ACLI_REGISTRY", value_name = "URL")]
    pub registry: Option<String>,
}

/// How to reach a registry (the `a2a registry` commands that call one).
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Connection options")]
pub struct RegistryConn {
    #[command(flatten)]
    pub registry: RegistryOpt,

    /// Bearer token sent as Authorization: Bearer (publishing; prefer the environment variable).
    #[arg(
        long,
        global = true,
        env = "A2ACLI_BEARER",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub bearer: Option<String>,

    /// Do not verify TLS certificates (development only; prints a warning).
    #[arg(long, global = true, env = "A2ACLI_INSECURE")]
    pub insecure: bool,

    /// `--cacert`, `--cert`, `--key`: a registry behind a private authority
    /// (or asking for a client certificate) is reached as agents are.
    #[command(flatten)]
    pub tls: TlsOpts,

    #[command(flatten)]
    pub timeout: TimeoutOpt,
}

/// The binding preference.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Connection options")]
pub struct TransportOpt {
    /// Preferred binding (JSONRPC, HTTP+JSON, GRPC), repeatable, best first [default: the card's order].
    #[arg(
        long,
        global = true,
        env = "A2ACLI_TRANSPORT",
        value_delimiter = ',',
        value_name = "BINDING"
    )]
    pub transport: Vec<String>,
}

/// How to reach and call an agent (the commands that call one).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Connection options")]
pub struct ConnOpts {
    #[command(flatten)]
    pub agent: AgentOpts,

    /// A2A protocol version to signal on every request (1.x only). [default: 1.0, and 1.1 on the task streams of an agent whose card declares 1.1: task generations, missed events detected and healed]
    #[arg(
        long,
        global = true,
        env = "A2ACLI_A2A_VERSION",
        value_name = "VERSION"
    )]
    pub a2a_version: Option<String>,

    /// Let an agent that speaks only A2A 0.3 be called through the 0.3 protocol (an agent offering 1.0 always gets 1.0).
    #[arg(long = "allow-v03", global = true, env = "A2ACLI_ALLOW_V03")]
    pub allow_v03: bool,

    /// Bearer token sent as Authorization: Bearer (prefer the environment variable).
    #[arg(
        long,
        global = true,
        env = "A2ACLI_BEARER",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub bearer: Option<String>,

    /// API key, placed where the card's API key scheme says (default header X-API-Key).
    #[arg(
        long,
        global = true,
        env = "A2ACLI_API_KEY",
        hide_env_values = true,
        value_name = "KEY"
    )]
    pub api_key: Option<String>,

    /// A service parameter (HTTP header / gRPC metadata), repeatable.
    #[arg(
        long = "svc-param",
        global = true,
        env = "A2ACLI_SVC_PARAM",
        hide_env_values = true,
        value_name = "KEY:VALUE"
    )]
    pub svc_param: Vec<String>,

    #[command(flatten)]
    pub transport: TransportOpt,
}

/// `--async` (send).
#[derive(Args, Debug, Clone, Default)]
pub struct AsyncOpt {
    /// Do not wait: return the task identifiers at once (aliases: --return-immediately, --no-wait).
    #[arg(long = "async", env = "A2ACLI_ASYNC", aliases = ["return-immediately", "no-wait"])]
    pub async_: bool,
}

/// `--wait` and `--poll-interval` (send, task get).
#[derive(Args, Debug, Clone)]
pub struct PollOpts {
    /// Wait until the task is terminal or interrupted (the default of send; on task get, poll).
    #[arg(long, env = "A2ACLI_WAIT", alias = "watch")]
    pub wait: bool,

    /// Time between two polls while waiting (a duration: 500ms, 2s, 1m).
    #[arg(long, env = "A2ACLI_POLL_INTERVAL", default_value = "2s", value_parser = parse_duration, value_name = "DURATION")]
    pub poll_interval: Duration,
}

/// `--timeout` (the commands that wait).
#[derive(Args, Debug, Clone, Default)]
pub struct TimeoutOpt {
    /// Give up waiting after this long (exit 5; a duration: 30s, 2m, 1h).
    #[arg(long, env = "A2ACLI_TIMEOUT", value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Option<Duration>,
}

/// `--task-id` (send, chat, and the task commands that take a task id).
/// The task commands reword its help with [`TASK_ID_HELP`].
#[derive(Args, Debug, Clone, Default)]
pub struct TaskIdOpt {
    /// Continue this existing task (e.g. one waiting for input).
    #[arg(long, env = "A2ACLI_TASK_ID", value_name = "ID")]
    pub task_id: Option<String>,
}

/// The help of `--task-id` on the task commands.
pub const TASK_ID_HELP: &str = "The task (instead of the TASK_ID argument)";

/// `--context-id` (send, chat, task list).
#[derive(Args, Debug, Clone, Default)]
pub struct ContextIdOpt {
    /// Start a new task in this existing context (send and chat also take `last` or a short id from the ledger; alias --context).
    #[arg(
        long,
        env = "A2ACLI_CONTEXT_ID",
        visible_alias = "context",
        value_name = "ID"
    )]
    pub context_id: Option<String>,
}

/// `--metadata` (send).
#[derive(Args, Debug, Clone, Default)]
pub struct MetadataOpt {
    /// Metadata for the message / request payload, as a JSON object.
    #[arg(long, env = "A2ACLI_METADATA", value_name = "JSON")]
    pub metadata: Option<String>,
}

/// `--stream` (send, task subscribe, task list).
#[derive(Args, Debug, Clone, Default)]
pub struct StreamOpt {
    /// Follow the live event stream (JSONL with -o json). Never read from the environment.
    #[arg(long)]
    pub stream: bool,
}

/// The settings a command runs with: the options of its groups, the
/// built-in defaults for the others.
#[derive(Debug, Clone)]
pub struct Globals {
    pub agent_card: Option<String>,
    /// `--a2a-version` (flag, environment or file); `None`: negotiated
    /// (1.0, and 1.1 on the streams of an agent declaring it).
    pub a2a_version: Option<String>,
    pub allow_v03: bool,
    pub async_: bool,
    pub wait: bool,
    pub bearer: Option<String>,
    pub api_key: Option<String>,
    pub config: Option<PathBuf>,
    pub context_id: Option<String>,
    pub task_id: Option<String>,
    pub debug: bool,
    pub insecure: bool,
    pub no_cache: bool,
    /// `--cacert`, `--cert`, `--key`: TLS with the agent.
    pub cacert: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub registry: Option<String>,
    pub metadata: Option<String>,
    pub output: OutputFormat,
    pub poll_interval: Duration,
    pub timeout: Option<Duration>,
    pub stream: bool,
    pub svc_param: Vec<String>,
    pub transport: Vec<String>,
    pub verbose: bool,
    /// `--max-response-bytes`, `--max-card-bytes` (the client's defaults
    /// when `None`).
    pub max_response_bytes: Option<usize>,
    pub max_card_bytes: Option<usize>,
    /// `--ledger`, `--no-ledger`, `--ledger-max-contexts` (see [`ledger`]).
    pub ledger: Option<PathBuf>,
    pub no_ledger: bool,
    pub ledger_max_contexts: usize,
}

/// The default time between two polls.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(2);

impl Globals {
    /// The settings of a command that takes only the common options.
    pub fn new(c: &CommonOpts) -> Self {
        Self {
            agent_card: None,
            a2a_version: None,
            allow_v03: false,
            async_: false,
            wait: false,
            bearer: None,
            api_key: None,
            config: c.config.clone(),
            context_id: None,
            task_id: None,
            debug: c.debug,
            insecure: false,
            no_cache: false,
            cacert: None,
            cert: None,
            key: None,
            registry: None,
            metadata: None,
            output: c.output,
            poll_interval: DEFAULT_POLL_INTERVAL,
            timeout: None,
            stream: false,
            svc_param: Vec::new(),
            transport: Vec::new(),
            verbose: c.verbose,
            max_response_bytes: None,
            max_card_bytes: None,
            ledger: None,
            no_ledger: false,
            ledger_max_contexts: ledger::DEFAULT_MAX_CONTEXTS,
        }
    }

    /// These settings with a group of options applied.
    #[must_use]
    pub fn with(&self, opts: &impl Apply) -> Self {
        let mut g = self.clone();
        opts.apply(&mut g);
        g
    }
}

/// A group of options, put into the settings.
pub trait Apply {
    fn apply(&self, g: &mut Globals);
}

impl<T: Apply> Apply for Option<T> {
    fn apply(&self, g: &mut Globals) {
        if let Some(o) = self {
            o.apply(g);
        }
    }
}

impl Apply for AgentOpts {
    fn apply(&self, g: &mut Globals) {
        g.agent_card.clone_from(&self.agent_card);
        g.insecure = self.insecure;
        g.no_cache = self.no_cache;
        self.tls.apply(g);
        self.registry.apply(g);
        self.limits.apply(g);
    }
}

impl Apply for RegistryOpt {
    fn apply(&self, g: &mut Globals) {
        g.registry.clone_from(&self.registry);
    }
}

impl Apply for RegistryConn {
    fn apply(&self, g: &mut Globals) {
        self.registry.apply(g);
        g.bearer.clone_from(&self.bearer);
        g.insecure = self.insecure;
        self.tls.apply(g);
        self.timeout.apply(g);
    }
}

impl Apply for TransportOpt {
    fn apply(&self, g: &mut Globals) {
        g.transport.clone_from(&self.transport);
    }
}

impl Apply for ConnOpts {
    fn apply(&self, g: &mut Globals) {
        self.agent.apply(g);
        g.a2a_version.clone_from(&self.a2a_version);
        g.allow_v03 = self.allow_v03;
        g.bearer.clone_from(&self.bearer);
        g.api_key.clone_from(&self.api_key);
        g.svc_param.clone_from(&self.svc_param);
        self.transport.apply(g);
    }
}

impl Apply for AsyncOpt {
    fn apply(&self, g: &mut Globals) {
        g.async_ = self.async_;
    }
}

impl Apply for PollOpts {
    fn apply(&self, g: &mut Globals) {
        g.wait = self.wait;
        g.poll_interval = self.poll_interval;
    }
}

impl Apply for TimeoutOpt {
    fn apply(&self, g: &mut Globals) {
        g.timeout = self.timeout;
    }
}

impl Apply for TaskIdOpt {
    fn apply(&self, g: &mut Globals) {
        g.task_id.clone_from(&self.task_id);
    }
}

impl Apply for ContextIdOpt {
    fn apply(&self, g: &mut Globals) {
        g.context_id.clone_from(&self.context_id);
    }
}

impl Apply for MetadataOpt {
    fn apply(&self, g: &mut Globals) {
        g.metadata.clone_from(&self.metadata);
    }
}

impl Apply for StreamOpt {
    fn apply(&self, g: &mut Globals) {
        g.stream = self.stream;
    }
}

// Parsed once per run: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Sign in to agents (OAuth device flow or client credentials), list and forget the stored tokens.
    Auth {
        #[command(subcommand)]
        command: auth_cmd::AuthCommand,
        #[command(flatten)]
        agent: AgentOpts,
    },
    /// Agent cards: fetch, show and validate.
    Card {
        #[command(subcommand)]
        command: card::CardCommand,
        #[command(flatten)]
        conn: ConnOpts,
    },
    /// Send a message to start or continue an interaction.
    Send(send::SendArgs),
    /// Tasks: get, cancel, list, subscribe, download artifacts, push configs.
    Task {
        #[command(subcommand)]
        command: task::TaskCommand,
        #[command(flatten)]
        conn: ConnOpts,
        #[command(flatten)]
        ledger: ledger::LedgerOpts,
    },
    /// The ledger the commands record into: contexts, their tasks, artifact versions; accept a version.
    Ledger {
        #[command(subcommand)]
        command: ledger::cmd::LedgerCommand,
        #[command(flatten)]
        opts: ledger::LedgerOpts,
    },
    /// Inspect the configuration (read-only).
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Print a shell completion script.
    Completion {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Interactive multi-turn session (needs a terminal; never the default).
    #[command(after_help = "\
Leaving: /quit, Ctrl-D, or Ctrl-C at the prompt; the exit status is 0.
Ctrl-C while a reply streams stops following that reply and the session goes on; the
task keeps running on the agent (`a2a task get --wait ID` follows it, `a2a task cancel
ID` cancels it). /help in the session lists its commands.")]
    Chat {
        #[command(flatten)]
        args: chat::ChatArgs,
        #[command(flatten)]
        task: TaskIdOpt,
        #[command(flatten)]
        context: ContextIdOpt,
        #[command(flatten)]
        conn: ConnOpts,
    },
    /// Smoke-check a live agent against the A2A conformance (TCK) scenarios (most need `a2a serve --agent conformance`).
    Conformance(conformance::ConformanceArgs),
    /// Receive push notifications: a local webhook that verifies and prints them.
    Webhook(push::WebhookArgs),
    /// The bundled example end to end: a release coordinator and the
    /// Dependency Compatibility Agent, in-process on loopback (-o json: the
    /// raw exchange).
    Demo(demo::DemoArgs),
    /// Serve a bundled agent (echo, depcompat or conformance) on 127.0.0.1.
    #[command(alias = "demo-server")]
    Serve(serve::ServeArgs),
    /// Agent registries: run one (serve), publish, withdraw, ingest, search, route, list, explore, get.
    Registry {
        #[command(subcommand)]
        command: registry::RegistryCommand,
    },
    /// Offer A2A agents as tools to an MCP host (stdio, or streamable HTTP with --http), with a ledger that keeps the work across calls.
    Mcp(mcp::McpArgs),
    /// A web inspector for any agent, on 127.0.0.1: its card, chat, timeline, wire log, tasks, versions and pushes, on every binding.
    Inspect(inspect::InspectArgs),
    /// The manual pages, generated from these definitions (scripts/release.sh).
    #[command(hide = true)]
    Man(release::ManArgs),
    /// Exit 0 when a server's /healthz answers (a container's health check).
    #[command(hide = true)]
    Healthcheck(release::HealthcheckArgs),
}

#[derive(Subcommand, Debug)]
pub enum ConfigCommand {
    /// Show each effective setting and where its value came from.
    Show,
}

/// Parses the value of every duration option (client and server alike):
/// a number and a unit as the `humantime` crate reads them (`500ms`, `2s`,
/// `1.5s`, `1m`, `24h`, `7d`, or combined: `1h 30m`). A bare number is a
/// number of seconds, as both former parsers of the tool read it.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let bare = !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.');
    let with_unit = if bare { format!("{t}s") } else { t.to_owned() };
    humantime::parse_duration(&with_unit)
        .map_err(|e| format!("{t:?} is not a duration ({e}); examples: 500ms, 2s, 1m, 24h, 7d"))
}

/// Whether the raw arguments ask for JSON output (used before clap could
/// parse them, to shape a usage error).
fn wants_json(args: &[OsString]) -> bool {
    let mut it = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .peekable();
    let mut json = std::env::var("A2ACLI_OUTPUT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    while let Some(a) = it.next() {
        match a.as_str() {
            "-o" | "--output" => {
                if let Some(v) = it.peek() {
                    json = v.eq_ignore_ascii_case("json");
                }
            }
            "--output=json" | "-ojson" => json = true,
            "--output=text" | "-otext" => json = false,
            _ => {}
        }
    }
    json
}

/// Reports a command line clap refused: clap's own message in text, the
/// error envelope in `-o json`, and a hint naming the command's help.
fn usage_error(e: &clap::Error, args: &[OsString], json: bool) {
    use clap::error::{ContextKind, ContextValue};
    let first = e.to_string();
    let first = first.lines().next().unwrap_or_default();
    let detail = first.trim_start_matches("error: ").to_owned();
    let command = command_path(args);
    let arg = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(a)) => a.split('=').next().unwrap_or_default().to_owned(),
        _ => String::new(),
    };
    let hint = if e.kind() == clap::error::ErrorKind::UnknownArgument && !arg.is_empty() {
        if command == "a2a serve" && CLIENT_CREDENTIALS.contains(&arg.as_str()) {
            format!(
                "{arg} is a client option (send, task, card get...): `a2a serve` authenticates \
                 its callers with --api-key-file, --auth-jwks or --auth-oidc; see `a2a serve --help`"
            )
        } else {
            format!("`{command}` does not take {arg}; see `{command} --help` for its options")
        }
    } else {
        format!("see `{command} --help`")
    };
    if json {
        let msg = if detail.is_empty() {
            e.kind()
                .as_str()
                .unwrap_or("invalid command line")
                .to_owned()
        } else {
            detail
        };
        report_error(&CliError::usage(msg).with_hint(hint), true);
    } else {
        let _ = e.print();
        if e.kind() == clap::error::ErrorKind::UnknownArgument {
            eprintln!("hint: {hint}");
        }
    }
}

/// The (sub)command named by the raw arguments, e.g. `a2a task get`.
fn command_path(args: &[OsString]) -> String {
    let mut cmd = Cli::command();
    let mut path = vec!["a2a".to_owned()];
    for a in args.iter().skip(1) {
        let a = a.to_string_lossy();
        if a == "--" {
            break;
        }
        if a.starts_with('-') {
            continue;
        }
        if let Some(sub) = cmd.find_subcommand(a.as_ref()).cloned() {
            path.push(sub.get_name().to_owned());
            cmd = sub;
        }
    }
    path.join(" ")
}

/// The credential options of the client.
const CLIENT_CREDENTIALS: &[&str] = &["--bearer", "--api-key"];

/// Installs the log subscriber: on stderr, without colours. The client
/// commands print bare lines (their diagnostics); `a2a serve` (`serving`
/// with its format) stamps each line with its RFC 3339 time, as text or
/// as one JSON object a line.
///
/// With `otel`, the spans of the server and the client (whatever the log
/// filter keeps) also go to the OpenTelemetry exporter.
fn init_logging(
    filter: tracing_subscriber::EnvFilter,
    serving: Option<serve::LogFormat>,
    otel: Option<&agentwire_server::observe::otel::Otel>,
) {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::filter::FilterExt as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false);
    // The server's request lines: formatted and written off the requests'
    // tasks, by the request log's own thread (one write for the lines
    // queued together), in the same format.
    if let Some(format) = serving {
        agentwire_server::observe::request_log::install(
            match format {
                serve::LogFormat::Text => agentwire_server::observe::request_log::Format::Text,
                serve::LogFormat::Json => agentwire_server::observe::request_log::Format::Json,
            },
            std::io::stderr(),
        );
    }
    let fmt = match serving {
        None => fmt.without_time().with_target(false).boxed(),
        Some(serve::LogFormat::Text) => fmt.with_target(false).boxed(),
        Some(serve::LogFormat::Json) => fmt
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .boxed(),
    };
    let traces = otel.map(|o| {
        let keep = tracing_subscriber::filter::Targets::new()
            .with_target("agentwire_server", tracing::Level::INFO)
            .with_target("agentwire_client", tracing::Level::INFO)
            .with_target("agentwire_agents", tracing::Level::INFO)
            .with_target("a2a", tracing::Level::INFO);
        // Spans, and of events only warnings and errors: an event at
        // `info` (the server's line per request) would become a span
        // event of every request's span, for each export to carry.
        let spans_and_warnings = tracing_subscriber::filter::filter_fn(|m| {
            m.is_span() || *m.level() <= tracing::Level::WARN
        });
        o.layer().with_filter(keep.and(spans_and_warnings))
    });
    // With traces on, the turn's span exists for them alone: the log would
    // format its fields for every request and read differently than with
    // traces off.
    let fmt = match otel {
        None => fmt.with_filter(filter).boxed(),
        Some(_) => {
            let not_turns = tracing_subscriber::filter::filter_fn(|m| {
                !(m.is_span() && m.target() == agentwire_server::observe::otel::TURN_TARGET)
            });
            fmt.with_filter(filter.and(not_turns)).boxed()
        }
    };
    // Without traces, no `Option` layer: a `None` layer declares an
    // interest in every callsite, which made `tracing::enabled!` true for
    // what the log's filter leaves out (at `RUST_LOG=warn`, every request
    // still made its span, and the request log's own writer would write
    // its line).
    let registry = tracing_subscriber::registry().with(fmt);
    match traces {
        Some(traces) => registry.with(traces).init(),
        None => registry.init(),
    }
}

/// The log filter: `--debug` (the client's diagnostics), else `RUST_LOG`,
/// else the deprecated `A2A_LOG`, else errors only (for `a2a serve`,
/// `serving`: warnings and the server's information, a line per request);
/// and a warning to print.
fn log_filter(debug: bool, serving: bool) -> (tracing_subscriber::EnvFilter, Option<String>) {
    use tracing_subscriber::EnvFilter;
    if debug {
        return (
            EnvFilter::new("warn,a2a=debug,agentwire_client=debug"),
            None,
        );
    }
    let quiet = move || {
        EnvFilter::new(if serving {
            serve::DEFAULT_SERVE_LOG
        } else {
            // rustls-platform-verifier logs a refused certificate as an
            // error, which the client reports once itself.
            "error,rustls_platform_verifier=off"
        })
    };
    for (var, deprecated) in [("RUST_LOG", false), ("A2A_LOG", true)] {
        let Some(value) = std::env::var_os(var) else {
            continue;
        };
        let value = value.to_string_lossy().into_owned();
        return match EnvFilter::try_new(&value) {
            Ok(f) if deprecated => (
                f,
                Some("A2A_LOG is deprecated and will be removed: set RUST_LOG instead".into()),
            ),
            Ok(f) => (f, None),
            Err(e) => (
                quiet(),
                Some(format!(
                    "{var}={value:?} is not a log filter ({e}); {}",
                    if serving {
                        "using the default filter"
                    } else {
                        "logging errors only"
                    }
                )),
            ),
        };
    }
    (quiet(), None)
}

/// Prints a failure per the error contract and gives its exit status.
pub fn report_error(e: &CliError, json: bool) -> u8 {
    if json {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", e.envelope());
        let _ = out.flush();
    }
    let mut err = std::io::stderr().lock();
    if e.code == error::code::SERVE_FAILED {
        let _ = writeln!(err, "error: {}", e.message);
    } else {
        let _ = writeln!(err, "error: {} ({})", e.message, e.code);
    }
    if let Some(h) = &e.hint {
        let _ = writeln!(err, "hint: {h}");
    }
    e.exit
}

/// Exit status of a command whose reader went away (`a2a ... | head`): the
/// status a Unix tool killed by SIGPIPE reports (128 + 13).
const EXIT_BROKEN_PIPE: i32 = 141;

/// Output to a closed pipe ends the command quietly, as it ends `cat` or
/// `grep`, instead of with a panic message. Rust ignores SIGPIPE (so that a
/// server's writes to closed sockets fail instead of killing it), which
/// turns a `println!` into a closed pipe into a panic; this hook recognises
/// that panic and leaves with the SIGPIPE status. Other panics print as
/// usual.
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to std") && message.contains("Broken pipe") {
            std::process::exit(EXIT_BROKEN_PIPE);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    quiet_on_broken_pipe();
    let args: Vec<OsString> = std::env::args_os().collect();
    let json = wants_json(&args);
    let mut loaded = match config::load(&args) {
        Ok(l) => l,
        Err(e) => return ExitCode::from(report_error(&e, json)),
    };
    if command_path(&args) == "a2a serve" {
        loaded.warnings.extend(serve::adopt_legacy_env());
    }
    let matches = match Cli::command().try_get_matches_from(&args) {
        Ok(m) => m,
        Err(e) => {
            use clap::error::ErrorKind as K;
            return match e.kind() {
                K::DisplayHelp | K::DisplayVersion => {
                    let _ = e.print();
                    ExitCode::SUCCESS
                }
                _ => {
                    usage_error(&e, &args, json);
                    ExitCode::from(exit::USAGE)
                }
            };
        }
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(exit::USAGE);
        }
    };
    let json = cli.common.output == OutputFormat::Json;
    let serving = match &cli.command {
        Command::Serve(args) => Some(args.log_format),
        _ => None,
    };
    // One worker per core (or TOKIO_WORKER_THREADS): `a2a serve` must use
    // the machine it runs on.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            let ce = CliError::internal(format!("cannot start the async runtime: {e}"));
            return ExitCode::from(report_error(&ce, json));
        }
    };
    // Traces for `a2a serve --otel` (or with an OTLP endpoint in the
    // environment), and for the demo's coordinator, a traced client whose
    // calls carry the trace on to the agent, when the environment names an
    // OTLP endpoint. The gRPC exporter starts inside the runtime.
    let traced = match &cli.command {
        Command::Serve(args) if args.otel || agentwire_server::observe::otel::wanted_by_env() => {
            Some(format!("a2a-{}", args.agent.name()))
        }
        Command::Demo(_) if agentwire_server::observe::otel::wanted_by_env() => {
            Some("a2a-demo".to_owned())
        }
        _ => None,
    };
    let otel = match traced {
        Some(service) => {
            let _in_runtime = runtime.enter();
            // The HTTP exporter's client uses rustls with the ring provider.
            agentwire_client::install_crypto_provider();
            match agentwire_server::observe::otel::init(&service) {
                Ok(o) => {
                    agentwire_client::trace_context::set_injector(
                        agentwire_server::observe::otel::injector,
                    );
                    Some(o)
                }
                Err(e) => {
                    let ce = CliError::usage(format!("cannot export traces: {e}"));
                    return ExitCode::from(report_error(&ce, json));
                }
            }
        }
        None => None,
    };
    let (filter, log_warning) = log_filter(cli.common.debug, serving.is_some());
    init_logging(filter, serving, otel.as_ref());
    if let Some(w) = log_warning {
        eprintln!("warning: {w}");
    }
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    let result = runtime.block_on(run(cli, &matches, &loaded));
    let code = match result {
        Ok(code) => code,
        Err(e) => report_error(&e, json),
    };
    if let Some(o) = &otel {
        o.shutdown();
    }
    // Streams may still hold connections; do not wait for them.
    runtime.shutdown_timeout(Duration::from_millis(100));
    // The request lines still queued.
    agentwire_server::observe::request_log::flush();
    ExitCode::from(code)
}

async fn run(
    cli: Cli,
    matches: &clap::ArgMatches,
    loaded: &config::Loaded,
) -> Result<u8, CliError> {
    let g = Globals::new(&cli.common);
    match cli.command {
        Command::Auth { command, agent } => {
            auth_cmd::run(&for_agent(g.with(&agent)), command).await
        }
        Command::Card { command, conn } => card::run(&for_agent(g.with(&conn)), command).await,
        Command::Send(args) => {
            let sub = matches
                .subcommand_matches("send")
                .ok_or_else(|| CliError::internal("send without its arguments"))?;
            send::run(&for_agent(g.with(&args)), args, sub).await
        }
        Command::Task {
            command,
            conn,
            ledger,
        } => task::run(&for_agent(g.with(&conn).with(&ledger)), command).await,
        Command::Ledger { command, opts } => ledger::cmd::run(&g.with(&opts), command).await,
        Command::Config {
            command: ConfigCommand::Show,
        } => show_config(&g, matches, loaded),
        Command::Completion { shell } => {
            let mut cmd = Cli::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut cmd, "a2a", &mut script);
            let mut out = std::io::stdout().lock();
            match out.write_all(&script).and_then(|()| out.flush()) {
                Ok(()) => Ok(exit::OK),
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                    std::process::exit(EXIT_BROKEN_PIPE)
                }
                Err(e) => Err(CliError::internal(format!(
                    "cannot write the completion script: {e}"
                ))),
            }
        }
        Command::Chat {
            args,
            task,
            context,
            conn,
        } => chat::run(&for_agent(g.with(&conn).with(&task).with(&context)), args).await,
        Command::Conformance(args) => conformance::run(&for_agent(g.with(&args.conn)), args).await,
        Command::Webhook(args) => push::webhook(&for_agent(g.with(&args)), args).await,
        Command::Demo(args) => demo::run(&g.with(&args), args).await,
        Command::Serve(args) => serve::run(args).await.map(|()| exit::OK),
        Command::Registry { command } => registry::run(&g, command).await,
        Command::Mcp(args) => mcp::run(&g.with(&args.conn), args).await,
        Command::Inspect(args) => inspect::run(&g.with(&args.conn).with(&args.ledger), args).await,
        Command::Man(args) => release::man(Cli::command(), &args),
        Command::Healthcheck(args) => release::healthcheck(&args).await,
    }
}

/// The settings of a command that talks to an agent: its `-a` is recorded
/// for the hints (complete commands to paste).
fn for_agent(g: Globals) -> Globals {
    if let Some(reference) = &g.agent_card {
        error::set_agent(reference);
    }
    g
}

/// The settings `config show` reports: (flag id, variable, built-in default).
const SETTINGS: &[(&str, &str, &str)] = &[
    ("agent_card", "A2ACLI_AGENT_CARD", ""),
    (
        "a2a_version",
        "A2ACLI_A2A_VERSION",
        "1.0 (1.1 on the task streams of an agent whose card declares 1.1)",
    ),
    (
        "allow_v03",
        "A2ACLI_ALLOW_V03",
        "false (agents that speak only A2A 0.3 are refused)",
    ),
    ("async_", "A2ACLI_ASYNC", "false"),
    ("wait", "A2ACLI_WAIT", "true (send waits unless --async)"),
    ("bearer", "A2ACLI_BEARER", ""),
    ("api_key", "A2ACLI_API_KEY", ""),
    ("context_id", "A2ACLI_CONTEXT_ID", ""),
    ("task_id", "A2ACLI_TASK_ID", ""),
    ("debug", "A2ACLI_DEBUG", "false"),
    ("insecure", "A2ACLI_INSECURE", "false (TLS verification on)"),
    (
        "cacert",
        "A2ACLI_CACERT",
        "the system's certificate authorities",
    ),
    ("cert", "A2ACLI_CERT", "none (no client certificate)"),
    ("key", "A2ACLI_KEY", ""),
    (
        "no_cache",
        "A2ACLI_NO_CACHE",
        "false (cached cards are used as their Cache-Control allows)",
    ),
    ("metadata", "A2ACLI_METADATA", ""),
    ("output", "A2ACLI_OUTPUT", "text"),
    ("poll_interval", "A2ACLI_POLL_INTERVAL", "2s"),
    ("timeout", "A2ACLI_TIMEOUT", "none"),
    ("svc_param", "A2ACLI_SVC_PARAM", ""),
    ("transport", "A2ACLI_TRANSPORT", "the card's order"),
    ("verbose", "A2ACLI_VERBOSE", "false"),
    ("registry", "A2ACLI_REGISTRY", ""),
    (
        "ledger",
        "A2ACLI_LEDGER",
        "ledger.db in the user's data directory (send, task, chat, inspect, demo, webhook, mcp, ledger)",
    ),
    (
        "no_ledger",
        "A2ACLI_NO_LEDGER",
        "false (the ledger records)",
    ),
    (
        "ledger_max_contexts",
        "A2ACLI_LEDGER_MAX_CONTEXTS",
        "1000 (the least recently updated contexts are forgotten first)",
    ),
    ("max_wait", "A2ACLI_MAX_WAIT", "30s (a2a mcp)"),
    (
        "max_response_bytes",
        "A2ACLI_MAX_RESPONSE_BYTES",
        "67108864 (64 MiB: one answer, stream event or gRPC message)",
    ),
    ("max_card_bytes", "A2ACLI_MAX_CARD_BYTES", "1048576 (1 MiB)"),
];

/// The settings that are options of every command, so may come from a flag
/// of `config show` itself.
const COMMON_SETTINGS: &[&str] = &["debug", "output", "verbose"];

fn show_config(
    g: &Globals,
    matches: &clap::ArgMatches,
    loaded: &config::Loaded,
) -> Result<u8, CliError> {
    use clap::parser::ValueSource;
    let mut rows = Vec::new();
    for (id, var, default) in SETTINGS {
        // The other settings are not options of `config show`: they come
        // from the environment, a file or the default.
        let from_flag = COMMON_SETTINGS.contains(id)
            && matches.value_source(id) == Some(ValueSource::CommandLine);
        let (src, value) = if from_flag {
            (config::Source::Flag, current_value(g, id))
        } else if let Ok(v) = std::env::var(var) {
            let s = match loaded.from_files.get(*var) {
                Some(p) => config::Source::File(p.clone()),
                None => config::Source::Env,
            };
            (s, v)
        } else {
            (config::Source::Default, (*default).to_owned())
        };
        rows.push((var.to_string(), config::display_value(var, &value), src));
    }
    let files = serde_json::json!({
        "local": loaded.local.as_ref().map(|p| p.display().to_string()),
        "global": loaded.global.as_ref().map(|p| p.display().to_string()),
        "globalPath": config::global_dir().map(|d| d.join(".env").display().to_string()),
        "cardCache": config::cache_dir().map(|d| d.display().to_string()),
    });
    if g.output == OutputFormat::Json {
        let settings: serde_json::Map<String, serde_json::Value> = rows
            .iter()
            .map(|(var, value, src)| {
                (
                    var.clone(),
                    serde_json::json!({"value": value, "source": src.to_string()}),
                )
            })
            .collect();
        let doc = serde_json::json!({"settings": settings, "files": files});
        println!("{doc}");
    } else {
        let mut out = String::new();
        out.push_str(&format!(
            "Local File: {}\n",
            loaded
                .local
                .as_ref()
                .map_or("(none)".into(), |p| p.display().to_string())
        ));
        out.push_str(&format!(
            "Global File: {}\n",
            loaded.global.as_ref().map_or_else(
                || format!(
                    "(none; would be {})",
                    config::global_dir()
                        .map(|d| d.join(".env").display().to_string())
                        .unwrap_or_default()
                ),
                |p| p.display().to_string()
            )
        ));
        for (var, value, src) in rows {
            let value = if value.is_empty() {
                "(unset)".to_owned()
            } else {
                value
            };
            out.push_str(&format!("{var}: {value} [{src}]\n"));
        }
        print!("{}", render::sanitize(&out));
    }
    Ok(exit::OK)
}

fn current_value(g: &Globals, id: &str) -> String {
    match id {
        "debug" => g.debug.to_string(),
        "output" => format!("{:?}", g.output).to_ascii_lowercase(),
        "verbose" => g.verbose.to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let ok = |s: &str, d: Duration| assert_eq!(parse_duration(s), Ok(d), "{s}");
        ok("500ms", Duration::from_millis(500));
        ok("2s", Duration::from_secs(2));
        ok("1.5s", Duration::from_millis(1500));
        ok("1m", Duration::from_secs(60));
        ok("24h", Duration::from_secs(86_400));
        ok("7d", Duration::from_secs(7 * 86_400));
        ok("1h 30m", Duration::from_secs(5400));
        ok("0", Duration::ZERO);
        ok("30", Duration::from_secs(30));
        ok("1.5", Duration::from_millis(1500));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn clap_definition_is_valid() {
        Cli::command().debug_assert();
    }
}
