//! `a2a mcp`: A2A agents as tools of an MCP (Model Context Protocol) host.
//!
//! An MCP host (a desktop assistant, an IDE, an agent framework) runs a
//! model in a loop of tool calls that keeps no state between them. A2A
//! agents work in tasks that can wait for input, produce artifacts in
//! versions, and run longer than one call. This command sits between the
//! two: an MCP server (stdio, or streamable HTTP with `--http`) whose tools
//! send messages to the configured agents, answer the questions they ask,
//! follow their tasks and refine and accept their artifacts, with the state
//! the model lacks kept in the client ledger (SQLite, in the user's data
//! directory by default), so that work goes on across tool calls and
//! restarts of the host.
//!
//! - [`bridge`]: the tools' work, on the ledger and the connected agents;
//! - [`server`]: the MCP side (tools, resources, progress) over rmcp.

mod bridge;
mod server;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::error::{CliError, exit};
use crate::{Apply, Globals, RegistryOpt, TransportOpt};

pub use bridge::Bridge;

/// `a2a mcp`: serve the configured agents as MCP tools.
#[derive(Args, Debug, Clone)]
#[command(after_help = "\
Agents: -a takes a host or origin, a card URL, a card file or registry:NAME (with
--registry), optionally named: -a depcompat=localhost:8080. The tools also accept
any such reference in their `agent` argument. --agents FILE reads one agent per
line in the same form (# starts a comment).

Tools: list_agents, describe_agent, send_message, continue_task, get_task,
cancel_task, list_versions, accept_version, refine. Artifacts are also MCP
resources (a2a://artifact/ID).

Examples:
  a2a mcp -a depcompat=localhost:8080
  a2a mcp -a localhost:8080 --ledger ./work.db
  a2a mcp -a localhost:8080 --http 127.0.0.1:8931")]
pub struct McpArgs {
    /// An agent to offer (repeatable): REF or NAME=REF, REF being a host, origin, card URL, card file or registry:NAME.
    #[arg(short = 'a', long = "agent", value_name = "[NAME=]REF")]
    pub agents: Vec<String>,

    /// A file of agents, one [NAME=]REF per line.
    #[arg(long = "agents", value_name = "FILE")]
    pub agents_file: Option<PathBuf>,

    /// The `a2a` ledger (the one every command records into): with
    /// `--no-ledger` the bridge keeps its state in memory, lost when it ends.
    #[command(flatten)]
    pub ledger: crate::ledger::LedgerOpts,

    /// Serve MCP over streamable HTTP on this address (path /mcp) instead of stdio; requests must name a loopback host (the bridge reads local files for its callers).
    #[arg(long, value_name = "HOST:PORT")]
    pub http: Option<String>,

    /// How long a tool call waits for the agent before returning the task to check later.
    #[arg(long, env = "A2ACLI_MAX_WAIT", default_value = "30s", value_parser = crate::parse_duration, value_name = "DURATION")]
    pub max_wait: Duration,

    #[command(flatten)]
    pub conn: McpConn,
}

/// How the bridge reaches the agents.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Connection options")]
pub struct McpConn {
    /// Bearer token sent as Authorization: Bearer (prefer the environment variable).
    #[arg(
        long,
        env = "A2ACLI_BEARER",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub bearer: Option<String>,

    /// API key, placed where the card's API key scheme says (default header X-API-Key).
    #[arg(
        long,
        env = "A2ACLI_API_KEY",
        hide_env_values = true,
        value_name = "KEY"
    )]
    pub api_key: Option<String>,

    /// Do not verify TLS certificates (development only; prints a warning).
    #[arg(long, env = "A2ACLI_INSECURE")]
    pub insecure: bool,

    /// Fetch agent cards afresh instead of using the cached copies.
    #[arg(long, env = "A2ACLI_NO_CACHE")]
    pub no_cache: bool,

    #[command(flatten)]
    pub tls: crate::TlsOpts,

    #[command(flatten)]
    pub transport: TransportOpt,

    #[command(flatten)]
    pub registry: RegistryOpt,

    #[command(flatten)]
    pub limits: crate::LimitOpts,
}

impl Apply for McpConn {
    fn apply(&self, g: &mut Globals) {
        self.limits.apply(g);
        g.bearer.clone_from(&self.bearer);
        g.api_key.clone_from(&self.api_key);
        g.insecure = self.insecure;
        g.no_cache = self.no_cache;
        self.tls.apply(g);
        self.transport.apply(g);
        self.registry.apply(g);
    }
}

/// The default ledger: `$XDG_DATA_HOME/a2a-cli/ledger.db`, else
/// `~/.local/share/a2a-cli/ledger.db`.
pub fn default_ledger() -> Option<PathBuf> {
    Some(crate::config::data_dir()?.join("ledger.db"))
}

/// One configured agent: an optional name and a reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentEntry {
    pub name: Option<String>,
    pub reference: String,
}

/// Parses `[NAME=]REF`. A `=` inside a URL's query is not a name: a name
/// is a plain word (letters, digits, `-`, `_`, `.`).
pub fn parse_entry(s: &str) -> Result<AgentEntry, CliError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(CliError::usage("an empty agent reference"));
    }
    if let Some((name, reference)) = s.split_once('=') {
        let plain = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if plain && !name.contains("://") {
            let reference = reference.trim();
            if reference.is_empty() {
                return Err(CliError::usage(format!(
                    "agent {name:?} has no reference after '='"
                )));
            }
            return Ok(AgentEntry {
                name: Some(name.to_owned()),
                reference: reference.to_owned(),
            });
        }
    }
    Ok(AgentEntry {
        name: None,
        reference: s.to_owned(),
    })
}

fn read_agents_file(path: &std::path::Path) -> Result<Vec<AgentEntry>, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("--agents {}: {e}", path.display())))?;
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(parse_entry)
        .collect()
}

pub async fn run(g: &Globals, args: McpArgs) -> Result<u8, CliError> {
    let mut entries = Vec::new();
    for a in &args.agents {
        entries.push(parse_entry(a)?);
    }
    if let Some(f) = &args.agents_file {
        entries.extend(read_agents_file(f)?);
    }
    // The bridge's state (contexts, their agents, tasks, versions) is the
    // `a2a` ledger's: one place, read by `a2a ledger` and `a2a send
    // --context` alike.
    let g = &g.with(&args.ledger);
    let ledger = match crate::ledger::open(g).await? {
        Some((ledger, path)) => {
            bridge::adopt_legacy_routes(&path, &ledger).await?;
            ledger
        }
        None => agentwire_client::ledger::Ledger::in_memory(),
    };
    let bridge = Arc::new(Bridge::new(g.clone(), entries, ledger, args.max_wait));
    match &args.http {
        Some(addr) => server::serve_http(bridge, addr).await?,
        None => server::serve_stdio(bridge).await?,
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries() {
        let e = parse_entry("depcompat=localhost:8080").unwrap();
        assert_eq!(e.name.as_deref(), Some("depcompat"));
        assert_eq!(e.reference, "localhost:8080");
        let e = parse_entry("http://h/card.json?x=1").unwrap();
        assert_eq!(e.name, None);
        assert_eq!(e.reference, "http://h/card.json?x=1");
        let e = parse_entry("localhost:8080").unwrap();
        assert_eq!(e.name, None);
        assert!(parse_entry("x=").is_err());
        assert!(parse_entry("  ").is_err());
    }
}
