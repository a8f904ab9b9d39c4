//! `a2a auth login|status|logout`: OAuth sign-in to an agent whose card
//! declares an OAuth2 or OpenID Connect security scheme, with the tokens
//! kept per agent (see [`agentwire_client::oauth::TokenStore`]) and sent
//! by every later command that calls that agent.

use std::io::Write;
use std::path::PathBuf;

use agentwire_client::oauth::{self, OAuthEndpoints, StoredToken, TokenParams, TokenStore};
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

/// The token store under the configuration directory.
pub fn store() -> Result<TokenStore, CliError> {
    crate::config::global_dir()
        .map(|d| TokenStore::new(d.join("tokens")))
        .ok_or_else(|| {
            CliError::internal("no home directory: set HOME or XDG_CONFIG_HOME to store tokens")
        })
}

fn auth_err(message: impl Into<String>) -> CliError {
    CliError::new("A2ACLI_ERR_AUTH", exit::AUTH, message)
}

fn client_err(e: &agentwire_client::ClientError) -> CliError {
    if e.is_unreachable() {
        CliError::new("A2ACLI_ERR_UNREACHABLE", exit::UNREACHABLE, e.to_string())
    } else {
        auth_err(e.to_string())
    }
}

/// The stored token for this card, refreshed first when it has expired;
/// `None` when there is none (or the store cannot be read).
pub async fn stored_bearer(
    http: &reqwest::Client,
    card: &AgentCard,
) -> Result<Option<String>, CliError> {
    let Ok(store) = store() else {
        return Ok(None);
    };
    let key = token_key(card);
    let Some(token) = store.load(&key).map_err(|e| auth_err(e.to_string()))? else {
        return Ok(None);
    };
    if !token.is_expired() {
        return Ok(Some(token.access_token));
    }
    let fresh = refresh_stored(http, &store, &key, &token).await?;
    Ok(Some(fresh.access_token))
}

/// Refreshes a stored token and stores the new one.
pub async fn refresh_stored(
    http: &reqwest::Client,
    store: &TokenStore,
    key: &str,
    token: &StoredToken,
) -> Result<StoredToken, CliError> {
    let fresh = oauth::refresh(http, token).await.map_err(|e| {
        client_err(&e).with_hint(format!(
            "sign in again: a2a auth login -a {}",
            token_hint(key)
        ))
    })?;
    store
        .save(key, &fresh)
        .map_err(|e| auth_err(e.to_string()))?;
    tracing::debug!("refreshed the stored token for {key}");
    Ok(fresh)
}

fn token_hint(key: &str) -> String {
    key.trim_start_matches("name:").to_owned()
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
        return Err(auth_err(format!(
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
            return Err(auth_err(
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
    let store = store()?;
    store
        .save(&key, &token)
        .map_err(|e| auth_err(e.to_string()))?;
    match g.output {
        OutputFormat::Json => println!("{}", describe(&key, &token)),
        OutputFormat::Text => {
            println!("Signed in to {} ({key})", card.name);
            print_fields(&token);
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

fn status(g: &Globals) -> Result<u8, CliError> {
    let all = store()?.list().map_err(|e| auth_err(e.to_string()))?;
    match g.output {
        OutputFormat::Json => {
            let list: Vec<_> = all.iter().map(|(k, t)| describe(k, t)).collect();
            println!("{}", json!({ "agents": list }));
        }
        OutputFormat::Text => {
            if all.is_empty() {
                println!("Not signed in to any agent (a2a auth login -a AGENT).");
            }
            for (i, (k, t)) in all.iter().enumerate() {
                if i > 0 {
                    println!();
                }
                println!("Agent: {k}");
                print_fields(t);
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
