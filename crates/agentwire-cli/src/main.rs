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
mod card;
mod chat;
mod config;
mod conformance;
mod demo;
mod error;
mod progress;
mod push;
mod registry;
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
Every option can also be set as A2ACLI_<OPTION> in the environment or in a .env file
(./.env found upwards from the working directory, or --config FILE; then
~/.config/a2a-cli/.env). Precedence: flag > environment > local file > global file >
default. --stream is never read from the environment.

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
    pub globals: Globals,

    /// Print the version and exit.
    #[arg(short = 'v', long = "version", action = ArgAction::Version)]
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

/// Options of every command (CLI SPEC 7.2).
#[derive(Args, Debug, Clone)]
pub struct Globals {
    /// The agent: a host or origin (the well-known card path is appended), a card URL, a card file (file://... or a path), or registry:NAME (with --registry).
    #[arg(
        short = 'a',
        long,
        global = true,
        env = "A2ACLI_AGENT_CARD",
        value_name = "REF"
    )]
    pub agent_card: Option<String>,

    /// A2A protocol version to signal on every request (1.x only).
    #[arg(
        long,
        global = true,
        env = "A2ACLI_A2A_VERSION",
        default_value = "1.0",
        value_name = "VERSION"
    )]
    pub a2a_version: String,

    /// Do not wait: return the task identifiers at once (aliases: --return-immediately, --no-wait).
    #[arg(long = "async", global = true, env = "A2ACLI_ASYNC", aliases = ["return-immediately", "no-wait"])]
    pub async_: bool,

    /// Wait until the task is terminal or interrupted (the default of send; on task get, poll).
    #[arg(long, global = true, env = "A2ACLI_WAIT", alias = "watch")]
    pub wait: bool,

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

    /// Load configuration from this .env file instead of the local .env.
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Start a new task in this existing context (on task list: filter by it).
    #[arg(long, global = true, env = "A2ACLI_CONTEXT_ID", value_name = "ID")]
    pub context_id: Option<String>,

    /// Continue this existing task (e.g. one waiting for input).
    #[arg(long, global = true, env = "A2ACLI_TASK_ID", value_name = "ID")]
    pub task_id: Option<String>,

    /// Diagnostics on stderr: negotiation, timing, the protocol messages (credentials redacted).
    #[arg(long, global = true, env = "A2ACLI_DEBUG")]
    pub debug: bool,

    /// Do not verify TLS certificates (development only; prints a warning).
    #[arg(long, global = true, env = "A2ACLI_INSECURE")]
    pub insecure: bool,

    /// Fetch the agent card afresh instead of using the cached copy (the new card replaces it).
    #[arg(long, global = true, env = "A2ACLI_NO_CACHE")]
    pub no_cache: bool,

    /// Metadata for the message / request payload, as a JSON object.
    #[arg(long, global = true, env = "A2ACLI_METADATA", value_name = "JSON")]
    pub metadata: Option<String>,

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

    /// Time between two polls while waiting (e.g. 500ms, 2s, 1m).
    #[arg(long, global = true, env = "A2ACLI_POLL_INTERVAL", default_value = "2s", value_parser = parse_duration, value_name = "DURATION")]
    pub poll_interval: Duration,

    /// Give up waiting after this long (exit 5).
    #[arg(long, global = true, env = "A2ACLI_TIMEOUT", value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Option<Duration>,

    /// Follow the live event stream (JSONL with -o json). Never read from the environment.
    #[arg(long, global = true)]
    pub stream: bool,

    /// A service parameter (HTTP header / gRPC metadata), repeatable.
    #[arg(
        long = "svc-param",
        global = true,
        env = "A2ACLI_SVC_PARAM",
        hide_env_values = true,
        value_name = "KEY:VALUE"
    )]
    pub svc_param: Vec<String>,

    /// Preferred binding (JSONRPC, HTTP+JSON, GRPC), repeatable, best first [default: the card's order].
    #[arg(
        long,
        global = true,
        env = "A2ACLI_TRANSPORT",
        value_delimiter = ',',
        value_name = "BINDING"
    )]
    pub transport: Vec<String>,

    /// Show every part and field exchanged, not the concise view.
    #[arg(long, global = true, env = "A2ACLI_VERBOSE")]
    pub verbose: bool,

    /// The agent registry for `-a registry:NAME` references and the `a2a registry` commands.
    #[arg(long, global = true, env = "A2ACLI_REGISTRY", value_name = "URL")]
    pub registry: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Agent cards: fetch, show and validate.
    Card {
        #[command(subcommand)]
        command: card::CardCommand,
    },
    /// Send a message to start or continue an interaction.
    Send(send::SendArgs),
    /// Tasks: get, cancel, list, subscribe, download artifacts, push configs.
    Task {
        #[command(subcommand)]
        command: task::TaskCommand,
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
    Chat(chat::ChatArgs),
    /// Smoke-check a live agent against the A2A conformance (TCK) scenarios.
    Conformance(conformance::ConformanceArgs),
    /// Receive push notifications: a local webhook that verifies and prints them.
    Webhook(push::WebhookArgs),
    /// Run seed 003 end to end: a release coordinator and the Dependency
    /// Compatibility Agent, in-process on loopback (-o json: the raw exchange).
    Demo(demo::DemoArgs),
    /// Serve a bundled agent (echo, depcompat or conformance) on 127.0.0.1.
    #[command(alias = "demo-server")]
    Serve(serve::ServeArgs),
    /// Agent registries: run one (serve), publish, withdraw, search, route, list, explore.
    Registry {
        #[command(subcommand)]
        command: registry::RegistryCommand,
    },
}

#[derive(Subcommand, Debug)]
pub enum ConfigCommand {
    /// Show each effective setting and where its value came from.
    Show,
}

/// Parses `500ms`, `2s`, `1.5s`, `3m`, `1h` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let n: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("invalid duration {s:?} (examples: 500ms, 2s, 1m)"))?;
    if !n.is_finite() || n < 0.0 {
        return Err(format!("invalid duration {s:?}"));
    }
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" | "sec" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("unknown unit in {s:?} (use ms, s, m or h)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| format!("invalid duration {s:?}"))
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

/// Prints a failure per the error contract and gives its exit status.
pub fn report_error(e: &CliError, json: bool) -> u8 {
    if json {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", e.envelope());
        let _ = out.flush();
    }
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "error: {} ({})", e.message, e.code);
    if let Some(h) = &e.hint {
        let _ = writeln!(err, "hint: {h}");
    }
    e.exit
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    let json = wants_json(&args);
    let loaded = match config::load(&args) {
        Ok(l) => l,
        Err(e) => return ExitCode::from(report_error(&e, json)),
    };
    let matches = match Cli::command().try_get_matches_from(&args) {
        Ok(m) => m,
        Err(e) => {
            use clap::error::ErrorKind as K;
            return match e.kind() {
                K::DisplayHelp
                | K::DisplayVersion
                | K::DisplayHelpOnMissingArgumentOrSubcommand
                    if e.kind() != K::DisplayHelpOnMissingArgumentOrSubcommand =>
                {
                    let _ = e.print();
                    ExitCode::SUCCESS
                }
                _ => {
                    if json {
                        let msg = e.kind().as_str().map_or_else(
                            || e.to_string().lines().next().unwrap_or_default().to_owned(),
                            str::to_owned,
                        );
                        let detail = e
                            .to_string()
                            .lines()
                            .next()
                            .unwrap_or_default()
                            .trim_start_matches("error: ")
                            .to_owned();
                        let ce = CliError::usage(if detail.is_empty() { msg } else { detail })
                            .with_hint("see `a2a help` or `a2a <command> --help`");
                        report_error(&ce, true);
                    } else {
                        let _ = e.print();
                    }
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
    let json = cli.globals.output == OutputFormat::Json;
    let filter = if cli.globals.debug {
        "warn,a2a=debug,agentwire_client=debug"
    } else {
        "error"
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("A2A_LOG")
                .unwrap_or_else(|_| filter.into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .without_time()
        .with_target(false)
        .init();
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
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
    let result = runtime.block_on(run(cli, &matches, &loaded));
    let code = match result {
        Ok(code) => code,
        Err(e) => report_error(&e, json),
    };
    // Streams may still hold connections; do not wait for them.
    runtime.shutdown_timeout(Duration::from_millis(100));
    ExitCode::from(code)
}

async fn run(
    cli: Cli,
    matches: &clap::ArgMatches,
    loaded: &config::Loaded,
) -> Result<u8, CliError> {
    let g = cli.globals;
    match cli.command {
        Command::Card { command } => card::run(&g, command).await,
        Command::Send(args) => {
            let sub = matches
                .subcommand_matches("send")
                .ok_or_else(|| CliError::internal("send without its arguments"))?;
            send::run(&g, args, sub).await
        }
        Command::Task { command } => task::run(&g, command).await,
        Command::Config {
            command: ConfigCommand::Show,
        } => show_config(&g, matches, loaded),
        Command::Completion { shell } => {
            let mut cmd = Cli::command();
            let mut out = std::io::stdout().lock();
            clap_complete::generate(shell, &mut cmd, "a2a", &mut out);
            Ok(exit::OK)
        }
        Command::Chat(args) => chat::run(&g, args).await,
        Command::Conformance(args) => conformance::run(&g, args).await,
        Command::Webhook(args) => push::webhook(&g, args).await,
        Command::Demo(args) => demo::run(&g, args).await,
        Command::Serve(args) => serve::run(args)
            .await
            .map(|()| exit::OK)
            .map_err(|e| CliError::internal(format!("{e:#}"))),
        Command::Registry { command } => registry::run(&g, command).await,
    }
}

/// The settings `config show` reports: (flag id, variable, built-in default).
const SETTINGS: &[(&str, &str, &str)] = &[
    ("agent_card", "A2ACLI_AGENT_CARD", ""),
    ("a2a_version", "A2ACLI_A2A_VERSION", "1.0"),
    ("async_", "A2ACLI_ASYNC", "false"),
    ("wait", "A2ACLI_WAIT", "true (send waits unless --async)"),
    ("bearer", "A2ACLI_BEARER", ""),
    ("api_key", "A2ACLI_API_KEY", ""),
    ("context_id", "A2ACLI_CONTEXT_ID", ""),
    ("task_id", "A2ACLI_TASK_ID", ""),
    ("debug", "A2ACLI_DEBUG", "false"),
    ("insecure", "A2ACLI_INSECURE", "false (TLS verification on)"),
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
];

fn show_config(
    g: &Globals,
    matches: &clap::ArgMatches,
    loaded: &config::Loaded,
) -> Result<u8, CliError> {
    use clap::parser::ValueSource;
    let sub = matches
        .subcommand_matches("config")
        .and_then(|m| m.subcommand_matches("show"));
    let mut rows = Vec::new();
    for (id, var, default) in SETTINGS {
        let source = sub
            .and_then(|m| m.value_source(id))
            .or_else(|| matches.value_source(id));
        let (src, value) = match source {
            Some(ValueSource::CommandLine) => (config::Source::Flag, current_value(g, id)),
            Some(ValueSource::EnvVariable) => {
                let s = match loaded.from_files.get(*var) {
                    Some(p) => config::Source::File(p.clone()),
                    None => config::Source::Env,
                };
                (s, std::env::var(var).unwrap_or_default())
            }
            _ => (config::Source::Default, (*default).to_owned()),
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
        "agent_card" => g.agent_card.clone().unwrap_or_default(),
        "a2a_version" => g.a2a_version.clone(),
        "async_" => g.async_.to_string(),
        "wait" => g.wait.to_string(),
        "bearer" => g.bearer.clone().unwrap_or_default(),
        "api_key" => g.api_key.clone().unwrap_or_default(),
        "context_id" => g.context_id.clone().unwrap_or_default(),
        "task_id" => g.task_id.clone().unwrap_or_default(),
        "debug" => g.debug.to_string(),
        "insecure" => g.insecure.to_string(),
        "no_cache" => g.no_cache.to_string(),
        "metadata" => g.metadata.clone().unwrap_or_default(),
        "output" => format!("{:?}", g.output).to_ascii_lowercase(),
        "poll_interval" => format!("{:?}", g.poll_interval),
        "timeout" => g.timeout.map(|t| format!("{t:?}")).unwrap_or_default(),
        "svc_param" => g.svc_param.join(","),
        "transport" => g.transport.join(","),
        "verbose" => g.verbose.to_string(),
        "registry" => g.registry.clone().unwrap_or_default(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("3 weeks").is_err());
    }

    #[test]
    fn clap_definition_is_valid() {
        Cli::command().debug_assert();
    }
}
