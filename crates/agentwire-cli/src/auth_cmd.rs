//! `a2a auth login|status|logout`: OAuth sign-in to an agent whose card
//! declares an OAuth2 or OpenID Connect security scheme, with the tokens
//! kept per agent (see [`agentwire_client::oauth::TokenStore`]) and sent
//! by every later command that calls that agent.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use agentwire_client::TokenSource;
use agentwire_client::oauth::{
    self, OAuthEndpoints, RefreshingToken, StoredToken, TokenParams, TokenStorage, TokenStore,
};
use agentwire_types::AgentCard;
use clap::{Args, Subcommand};
use serde_json::json;

use crate::agent::Settings;
use crate::error::{CliError, exit};
use crate::{Globals, OutputFormat};

/// `a2a auth ...`.
#[derive(Subcommand, Debug)]
pub enum AuthCommand {
    /// Sign in to the agent (-a): the device flow (a code to enter in a browser) or, with a client secret, the client-credentials grant.
    Login(LoginArgs),
    /// Which agents you are signed in to: expiry and scopes (never the tokens).
    Status,
    /// Forget the token of the agent (-a), or of every agent (--all).
    Logout {
        /// Forget every stored token.
        #[arg(long)]
        all: bool,
    },
}

/// The options of `a2a auth login`.
#[derive(Args, Debug, Clone)]
pub struct LoginArgs {
    /// The OAuth client id registered with the agent's authorization server.
    #[arg(long, env = "A2ACLI_CLIENT_ID", value_name = "ID")]
    pub client_id: Option<String>,

    /// The client secret: signs in with the client-credentials grant (prefer A2ACLI_CLIENT_SECRET or --client-secret-file).
    #[arg(
        long,
        env = "A2ACLI_CLIENT_SECRET",
        hide_env_values = true,
        value_name = "SECRET",
        conflicts_with = "client_secret_file"
    )]
    pub client_secret: Option<String>,

    /// Read the client secret from this file (first line).
    #[arg(long, value_name = "PATH")]
    pub client_secret_file: Option<PathBuf>,

    /// The authorization server (issuer URL) instead of the one the card names.
    #[arg(long, env = "A2ACLI_ISSUER", value_name = "URL")]
    pub issuer: Option<String>,

    /// Scopes to ask for instead of the card's (repeatable or comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "SCOPE")]
    pub scope: Vec<String>,

    /// The resource indicator (RFC 8707) some authorization servers need to issue a token for the agent.
    #[arg(long, value_name = "URI")]
    pub resource: Option<String>,
}

/// The key a token is stored under: the agent's first interface URL (its
/// identity on the card), or the card's name when it lists none.
pub fn token_key(card: &AgentCard) -> String {
    card.supported_interfaces
        .first()
        .map(|i| i.url.clone())
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| format!("name:{}", card.name))
}

/// The keyring service the CLI's tokens are stored under (one entry per
/// agent, named by its [`token_key`]).
pub const KEYRING_SERVICE: &str = "a2a-cli";

/// The variable that chooses the token store: `auto` (the default: the OS
/// keyring when one answers, else files), `keyring` or `file`.
pub const TOKEN_STORE_VAR: &str = "A2ACLI_TOKEN_STORE";

/// The token store and why it is the one used.
pub struct Chosen {
    pub store: TokenStore,
    pub why: String,
}

fn tokens_dir() -> Result<PathBuf, CliError> {
    crate::config::global_dir()
        .map(|d| d.join("tokens"))
        .ok_or_else(|| {
            CliError::internal("no home directory: set HOME or XDG_CONFIG_HOME to store tokens")
        })
}

/// The store new tokens go to, per [`TOKEN_STORE_VAR`]: asks the OS
/// keyring whether it answers unless files are asked for.
pub fn choose_store() -> Result<Chosen, CliError> {
    let dir = tokens_dir()?;
    let wanted = std::env::var(TOKEN_STORE_VAR).unwrap_or_default();
    match wanted.trim().to_ascii_lowercase().as_str() {
        "file" => Ok(Chosen {
            store: TokenStore::new(dir),
            why: format!("{TOKEN_STORE_VAR}=file"),
        }),
        "keyring" => match oauth::keyring_reachable(KEYRING_SERVICE) {
            Ok(()) => Ok(Chosen {
                store: TokenStore::with_keyring(dir, KEYRING_SERVICE),
                why: format!("{TOKEN_STORE_VAR}=keyring"),
            }),
            Err(e) => Err(auth_err(format!(
                "{TOKEN_STORE_VAR}=keyring, and the OS keyring is not reachable: {e}"
            ))
            .with_hint(format!(
                "start a Secret Service (e.g. gnome-keyring) in your session, or set {TOKEN_STORE_VAR}=file"
            ))),
        },
        "" | "auto" => Ok(match oauth::keyring_reachable(KEYRING_SERVICE) {
            Ok(()) => Chosen {
                store: TokenStore::with_keyring(dir, KEYRING_SERVICE),
                why: "the OS keyring answers".into(),
            },
            Err(e) => Chosen {
                store: TokenStore::new(dir),
                why: format!("no OS keyring is reachable: {e}"),
            },
        }),
        other => Err(CliError::usage(format!(
            "{TOKEN_STORE_VAR}={other}: expected auto, keyring or file"
        ))),
    }
}

/// The token store for reading (and for saving a refreshed token where
/// the old one was): each token's file says where its secrets are, so no
/// keyring is asked until one is needed.
pub fn store() -> Result<TokenStore, CliError> {
    tokens_dir().map(TokenStore::new)
}

fn auth_err(message: impl Into<String>) -> CliError {
    // The registry has no A2ACLI_ERR_AUTH (CLI SPEC Appendix D): a sign-in
    // that could not be completed is a refused authentication.
    CliError::new(crate::error::code::AUTH_FAILED, exit::AUTH, message)
}

fn client_err(e: &agentwire_client::ClientError) -> CliError {
    if e.is_unreachable() {
        CliError::new(
            crate::error::code::UNREACHABLE,
            exit::UNREACHABLE,
            e.to_string(),
        )
    } else {
        auth_err(e.to_string())
    }
}

/// The token stored for this card, refreshed first when it has expired,
/// and the source that keeps it fresh for the calls (refreshed again, and
/// the call retried once, when the agent refuses it); `None` when there is
/// none (or no store).
pub async fn stored_token(
    http: &reqwest::Client,
    card: &AgentCard,
) -> Result<Option<(String, Arc<RefreshingToken>)>, CliError> {
    let Ok(store) = store() else {
        return Ok(None);
    };
    let key = token_key(card);
    let Some(token) = store.load(&key).map_err(|e| auth_err(e.to_string()))? else {
        return Ok(None);
    };
    let store = store.for_agent(&key);
    let source = Arc::new(RefreshingToken::stored(http.clone(), store, key, token));
    let current = source
        .token()
        .await
        .map_err(|e| client_err(&e))?
        .unwrap_or_default();
    Ok(Some((current, source)))
}

pub async fn run(g: &Globals, command: AuthCommand) -> Result<u8, CliError> {
    match command {
        AuthCommand::Login(args) => login(g, args).await,
        AuthCommand::Status => status(g),
        AuthCommand::Logout { all } => logout(g, all).await,
    }
}

async fn login(g: &Globals, args: LoginArgs) -> Result<u8, CliError> {
    let settings = Settings::from_globals(g)?;
    let http = settings.http_client()?;
    let resolved = settings.resolve_card(&http).await?;
    let card = resolved.card;
    let from_card = oauth::card_oauth(&card);
    if from_card.is_none() && args.issuer.is_none() {
        // Nothing to sign in to: the command does not apply to this agent
        // as asked (a usage error, exit 2), not a failed authentication.
        return Err(CliError::usage(format!(
            "the agent {:?} declares no OAuth2 or OpenID Connect security scheme",
            card.name
        ))
        .with_hint("pass --issuer URL to sign in with an authorization server of your choice"));
    }
    let from_card = from_card.unwrap_or_default();
    let mut endpoints: OAuthEndpoints = from_card.endpoints.clone();
    let discovery = args.issuer.clone().or(from_card.discovery_url.clone());
    if args.issuer.is_some() || endpoints.token_endpoint.is_empty() {
        let Some(url) = discovery else {
            return Err(CliError::usage(
                "the card's OAuth2 scheme names no token URL and no metadata URL",
            )
            .with_hint("pass --issuer URL"));
        };
        let found = oauth::discover(&http, &url)
            .await
            .map_err(|e| client_err(&e))?;
        endpoints.issuer = found.issuer;
        endpoints.token_endpoint = found.token_endpoint;
        if found.device_authorization_endpoint.is_some() {
            endpoints.device_authorization_endpoint = found.device_authorization_endpoint;
        }
    }
    let scopes: Vec<String> = if args.scope.is_empty() {
        endpoints.scopes.clone()
    } else {
        args.scope
            .iter()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    };
    let secret = match (&args.client_secret, &args.client_secret_file) {
        (Some(s), _) if !s.is_empty() => Some(s.clone()),
        (_, Some(path)) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                CliError::usage(format!(
                    "--client-secret-file {}: cannot read it: {e}",
                    path.display()
                ))
            })?;
            let line = text.lines().next().unwrap_or_default().trim().to_owned();
            if line.is_empty() {
                return Err(CliError::usage(format!(
                    "--client-secret-file {}: the file is empty",
                    path.display()
                )));
            }
            Some(line)
        }
        _ => None,
    };
    let Some(client_id) = args.client_id.clone().filter(|s| !s.is_empty()) else {
        return Err(CliError::usage("a2a auth login needs --client-id")
            .with_hint("the id of the client registered with the agent's authorization server (or set A2ACLI_CLIENT_ID)"));
    };
    let params = TokenParams {
        resource: args.resource.clone(),
    };
    let token = match secret {
        Some(secret) => {
            oauth::client_credentials(&http, &endpoints, &client_id, &secret, &scopes, &params)
                .await
                .map_err(|e| client_err(&e))?
        }
        None => {
            let auth = oauth::device_authorize(&http, &endpoints, &client_id, &scopes, &params)
                .await
                .map_err(|e| {
                    client_err(&e).with_hint(
                        "without a device endpoint, sign in with --client-secret (client credentials)",
                    )
                })?;
            // The instructions go to stderr: stdout stays the result.
            let mut err = std::io::stderr().lock();
            let _ = writeln!(
                err,
                "To sign in, open {} and enter the code: {}",
                auth.verification_uri, auth.user_code
            );
            if let Some(c) = &auth.verification_uri_complete {
                let _ = writeln!(err, "(or open {c})");
            }
            let _ = writeln!(err, "Waiting for the sign-in to be approved...");
            drop(err);
            oauth::device_poll(&http, &endpoints, &client_id, &auth, &scopes, &params)
                .await
                .map_err(|e| client_err(&e))?
        }
    };
    let key = token_key(&card);
    let chosen = choose_store()?;
    chosen
        .store
        .save(&key, &token)
        .map_err(|e| auth_err(e.to_string()))?;
    let storage = chosen.store.storage().as_str();
    match g.output {
        OutputFormat::Json => {
            let mut v = describe(&key, &token);
            v["storage"] = json!(storage);
            println!("{v}");
        }
        OutputFormat::Text => {
            println!("Signed in to {} ({key})", card.name);
            print_fields(&token);
            println!("Stored in: {}", storage_words(&chosen));
        }
    }
    Ok(exit::OK)
}

fn describe(agent: &str, t: &StoredToken) -> serde_json::Value {
    json!({
        "agent": agent,
        "grant": t.grant,
        "clientId": t.client_id,
        "scopes": t.scopes,
        "expiresAt": t.expires_at_rfc3339(),
        "expired": t.is_expired(),
        "refreshable": t.refresh_token.is_some(),
    })
}

fn print_fields(t: &StoredToken) {
    println!("Grant: {}", t.grant);
    println!("Client: {}", t.client_id);
    println!(
        "Scopes: {}",
        if t.scopes.is_empty() {
            "(none)".to_owned()
        } else {
            t.scopes.join(" ")
        }
    );
    match t.expires_at_rfc3339() {
        Some(e) => println!(
            "Expires: {}{}",
            e,
            if t.is_expired() { " (expired)" } else { "" }
        ),
        None => println!("Expires: (not said)"),
    }
    println!(
        "Refresh: {}",
        if t.refresh_token.is_some() {
            "yes"
        } else {
            "no"
        }
    );
}

/// Where new tokens go, said plainly.
fn storage_words(chosen: &Chosen) -> String {
    match chosen.store.storage() {
        TokenStorage::Keyring => format!(
            "the OS keyring (service {KEYRING_SERVICE}; expiry and scopes in {}, mode 0600)",
            chosen.store.dir().display()
        ),
        TokenStorage::File => format!(
            "{}, one file per agent readable by you only (mode 0600)",
            chosen.store.dir().display()
        ),
    }
}

fn status(g: &Globals) -> Result<u8, CliError> {
    let chosen = choose_store()?;
    let all = chosen.store.list().map_err(|e| auth_err(e.to_string()))?;
    let kind = chosen.store.storage().as_str();
    match g.output {
        OutputFormat::Json => {
            let list: Vec<_> = all
                .iter()
                .map(|(k, t)| {
                    let mut v = describe(k, t);
                    v["storage"] = json!(chosen.store.for_agent(k).storage().as_str());
                    v
                })
                .collect();
            println!(
                "{}",
                json!({
                    "agents": list,
                    "storage": {
                        "kind": kind,
                        "directory": chosen.store.dir().display().to_string(),
                        "keyringService": (kind == "keyring").then_some(KEYRING_SERVICE),
                        "note": storage_words(&chosen),
                        "why": chosen.why,
                    },
                })
            );
        }
        OutputFormat::Text => {
            println!("Storage: {kind} ({})", chosen.why);
            println!("Stored in: {}", storage_words(&chosen));
            println!();
            if all.is_empty() {
                println!("Not signed in to any agent (a2a auth login -a AGENT).");
            }
            for (i, (k, t)) in all.iter().enumerate() {
                if i > 0 {
                    println!();
                }
                println!("Agent: {k}");
                print_fields(t);
                println!("Storage: {}", chosen.store.for_agent(k).storage().as_str());
            }
        }
    }
    Ok(exit::OK)
}

async fn logout(g: &Globals, all: bool) -> Result<u8, CliError> {
    let store = store()?;
    let removed: Vec<String> = if all {
        let list = store.list().map_err(|e| auth_err(e.to_string()))?;
        for k in list.keys() {
            store.remove(k).map_err(|e| auth_err(e.to_string()))?;
        }
        list.into_keys().collect()
    } else {
        let settings = Settings::from_globals(g)?;
        if settings.reference.is_none() {
            return Err(CliError::usage("a2a auth logout needs -a AGENT or --all"));
        }
        let http = settings.http_client()?;
        let card = settings.resolve_card(&http).await?.card;
        let key = token_key(&card);
        if store.remove(&key).map_err(|e| auth_err(e.to_string()))? {
            vec![key]
        } else {
            Vec::new()
        }
    };
    match g.output {
        OutputFormat::Json => println!("{}", json!({ "removed": removed })),
        OutputFormat::Text => {
            if removed.is_empty() {
                println!("No stored token to remove.");
            }
            for k in &removed {
                println!("Signed out of {k}");
            }
        }
    }
    Ok(exit::OK)
}
