//! OAuth 2.1 sign-in for agents whose card declares an OAuth2 or OpenID
//! Connect security scheme: the client-credentials grant, the device
//! authorization grant (RFC 8628), refresh, and a [`TokenStore`] that keeps
//! the tokens per agent between runs.
//!
//! Written on reqwest rather than the `oauth2` crate: `oauth2` 5 is built on
//! reqwest 0.12 while this workspace uses reqwest 0.13 (two HTTP stacks in
//! one binary), and the three token requests used here are small form posts.
//! Form bodies are encoded here too, since the workspace's reqwest is built
//! without its `form` feature.
//!
//! Secrets never reach `Debug` output: [`StoredToken`] redacts its tokens.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agentwire_types::{AgentCard, o_auth_flows, security_scheme};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde::{Deserialize, Serialize};

use crate::error::{ClientError, ClientResult};

fn connect_error(url: &str, e: reqwest::Error) -> ClientError {
    ClientError::Connect {
        url: url.to_owned(),
        message: e.to_string(),
        source: Some(Box::new(e)),
    }
}

/// The most bytes read from an authorization server's answer (a discovery
/// document, a token response): 1 MiB, far above what they hold. Reading
/// stops there with [`ClientError::ResponseTooLarge`].
pub const MAX_OAUTH_RESPONSE_BYTES: usize = 1 << 20;

/// How early a token counts as expired (clock skew, time in flight).
pub const EXPIRY_MARGIN: Duration = Duration::from_secs(30);

/// Where an agent's tokens come from: the endpoints of its authorization
/// server and the scopes to ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthEndpoints {
    /// The issuer, when known (OpenID Connect discovery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// The token endpoint.
    pub token_endpoint: String,
    /// The device authorization endpoint (RFC 8628), when offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_authorization_endpoint: Option<String>,
    /// The scopes the card lists for its flows.
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// What the card says about OAuth: either the endpoints themselves (an
/// OAuth2 scheme's flows) or a discovery document to read them from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CardOAuth {
    /// The discovery document's URL (OpenID Connect URL or OAuth2 metadata URL).
    pub discovery_url: Option<String>,
    /// Endpoints the card's flows give.
    pub endpoints: OAuthEndpoints,
}

/// Reads the card's OAuth2 / OpenID Connect security schemes.
pub fn card_oauth(card: &AgentCard) -> Option<CardOAuth> {
    let mut out = CardOAuth::default();
    let mut found = false;
    for s in card.security_schemes.values() {
        match &s.scheme {
            Some(security_scheme::Scheme::OpenIdConnectSecurityScheme(o)) => {
                if out.discovery_url.is_none() && !o.open_id_connect_url.is_empty() {
                    out.discovery_url = Some(o.open_id_connect_url.clone());
                }
                found = true;
            }
            Some(security_scheme::Scheme::Oauth2SecurityScheme(o)) => {
                found = true;
                if out.discovery_url.is_none() && !o.oauth2_metadata_url.is_empty() {
                    out.discovery_url = Some(o.oauth2_metadata_url.clone());
                }
                let Some(flow) = o.flows.as_ref().and_then(|f| f.flow.as_ref()) else {
                    continue;
                };
                let e = &mut out.endpoints;
                match flow {
                    o_auth_flows::Flow::ClientCredentials(f) => {
                        if e.token_endpoint.is_empty() {
                            e.token_endpoint.clone_from(&f.token_url);
                        }
                        e.scopes.extend(f.scopes.keys().cloned());
                    }
                    o_auth_flows::Flow::DeviceCode(f) => {
                        if e.token_endpoint.is_empty() {
                            e.token_endpoint.clone_from(&f.token_url);
                        }
                        e.device_authorization_endpoint = Some(f.device_authorization_url.clone());
                        e.scopes.extend(f.scopes.keys().cloned());
                    }
                    o_auth_flows::Flow::AuthorizationCode(f) => {
                        if e.token_endpoint.is_empty() {
                            e.token_endpoint.clone_from(&f.token_url);
                        }
                        e.scopes.extend(f.scopes.keys().cloned());
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    out.endpoints.scopes.sort();
    out.endpoints.scopes.dedup();
    found.then_some(out)
}

/// The discovery document's URL for an issuer (OpenID Connect Discovery 1.0):
/// a URL that already names a well-known document is kept as is.
pub fn discovery_url(issuer: &str) -> String {
    if issuer.contains("/.well-known/") {
        issuer.to_owned()
    } else {
        format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        )
    }
}

/// Reads an issuer's discovery document (OpenID Connect Discovery or
/// RFC 8414 authorization server metadata).
pub async fn discover(http: &reqwest::Client, url: &str) -> ClientResult<OAuthEndpoints> {
    #[derive(Deserialize)]
    struct Doc {
        issuer: Option<String>,
        token_endpoint: Option<String>,
        device_authorization_endpoint: Option<String>,
    }
    let url = discovery_url(url);
    let resp = http
        .get(&url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| connect_error(&url, e))?;
    let status = resp.status();
    if !status.is_success() {
        return Err(ClientError::InvalidResponse(format!(
            "the discovery document {url} answered HTTP {status}"
        )));
    }
    let body = crate::http::read_body_max(
        resp,
        &url,
        MAX_OAUTH_RESPONSE_BYTES,
        "the discovery document",
    )
    .await?;
    let doc: Doc = serde_json::from_slice(&body).map_err(|e| {
        ClientError::InvalidResponse(format!("the discovery document {url} is not valid: {e}"))
    })?;
    let token_endpoint = doc.token_endpoint.ok_or_else(|| {
        ClientError::InvalidResponse(format!(
            "the discovery document {url} names no token_endpoint"
        ))
    })?;
    Ok(OAuthEndpoints {
        issuer: doc.issuer,
        token_endpoint,
        device_authorization_endpoint: doc.device_authorization_endpoint,
        scopes: Vec::new(),
    })
}

/// A token obtained for an agent, as kept by the [`TokenStore`].
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredToken {
    /// The access token (sent as `Authorization: Bearer`).
    pub access_token: String,
    /// The refresh token, when the server issued one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires, when the server said.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "unix_seconds"
    )]
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The scopes granted.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The token endpoint (for refresh).
    pub token_endpoint: String,
    /// The client the token was issued to (for refresh).
    pub client_id: String,
    /// The grant that obtained it: `client_credentials` or `device_code`.
    pub grant: String,
    /// The agent this token is for (its card's URL).
    #[serde(default)]
    pub agent: String,
}

/// `expires_at` as Unix seconds (chrono's serde feature is off here).
mod unix_seconds {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(
        t: &Option<chrono::DateTime<chrono::Utc>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_some(&t.timestamp()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<chrono::DateTime<chrono::Utc>>, D::Error> {
        Ok(Option::<i64>::deserialize(d)?.and_then(|s| chrono::DateTime::from_timestamp(s, 0)))
    }
}

impl fmt::Debug for StoredToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredToken")
            .field("access_token", &"<redacted>")
            .field(
                "refresh_token",
                &self.refresh_token.as_ref().map(|_| "<redacted>"),
            )
            .field("expires_at", &self.expires_at)
            .field("scopes", &self.scopes)
            .field("token_endpoint", &self.token_endpoint)
            .field("client_id", &self.client_id)
            .field("grant", &self.grant)
            .field("agent", &self.agent)
            .finish()
    }
}

impl StoredToken {
    /// The expiry as RFC 3339 (seconds, UTC), when known.
    pub fn expires_at_rfc3339(&self) -> Option<String> {
        self.expires_at
            .map(|e| e.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
    }

    /// Whether the access token has expired (or will within [`EXPIRY_MARGIN`]).
    pub fn is_expired(&self) -> bool {
        self.expires_at.is_some_and(|t| {
            let margin = chrono::Duration::from_std(EXPIRY_MARGIN).unwrap_or_default();
            t - margin <= chrono::Utc::now()
        })
    }
}

/// The successful token response (RFC 6749 5.1).
#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    expires_in: Option<f64>,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    scope: Option<String>,
}

/// A token endpoint's error (RFC 6749 5.2, RFC 8628 3.5).
#[derive(Debug, Deserialize)]
struct TokenError {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

/// Why a token request failed.
#[derive(Debug)]
enum Failure {
    /// The server's OAuth error code and description.
    OAuth(String, Option<String>),
    /// Anything else.
    Other(ClientError),
}

impl Failure {
    fn into_error(self, what: &str) -> ClientError {
        match self {
            Failure::OAuth(code, desc) => ClientError::InvalidRequest(match desc {
                Some(d) => format!("{what}: the authorization server refused: {code} ({d})"),
                None => format!("{what}: the authorization server refused: {code}"),
            }),
            Failure::Other(e) => e,
        }
    }
}

fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                utf8_percent_encode(k, NON_ALPHANUMERIC),
                utf8_percent_encode(v, NON_ALPHANUMERIC)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

async fn post_form<T: for<'de> Deserialize<'de>>(
    http: &reqwest::Client,
    url: &str,
    pairs: &[(&str, &str)],
    basic: Option<(&str, &str)>,
) -> Result<T, Failure> {
    let mut req = http
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .body(form(pairs));
    if let Some((id, secret)) = basic {
        // RFC 6749 2.3.1: the client id and secret are form-encoded first.
        req = req.basic_auth(
            utf8_percent_encode(id, NON_ALPHANUMERIC).to_string(),
            Some(utf8_percent_encode(secret, NON_ALPHANUMERIC).to_string()),
        );
    }
    let resp = req
        .send()
        .await
        .map_err(|e| Failure::Other(connect_error(url, e)))?;
    let status = resp.status();
    let body = crate::http::read_body_max(resp, url, MAX_OAUTH_RESPONSE_BYTES, "the answer")
        .await
        .map_err(Failure::Other)?;
    if status.is_success() {
        return serde_json::from_slice(&body).map_err(|e| {
            Failure::Other(ClientError::InvalidResponse(format!(
                "{url} answered a token response that is not valid: {e}"
            )))
        });
    }
    match serde_json::from_slice::<TokenError>(&body) {
        Ok(e) => Err(Failure::OAuth(e.error, e.error_description)),
        Err(_) => Err(Failure::Other(ClientError::InvalidResponse(format!(
            "{url} answered HTTP {status}"
        )))),
    }
}

fn stored(
    r: TokenResponse,
    endpoints: &OAuthEndpoints,
    client_id: &str,
    grant: &str,
    asked: &[String],
    previous_refresh: Option<String>,
) -> ClientResult<StoredToken> {
    if let Some(t) = &r.token_type
        && !t.eq_ignore_ascii_case("bearer")
    {
        return Err(ClientError::InvalidResponse(format!(
            "the authorization server issued a {t} token; only bearer tokens are supported"
        )));
    }
    let expires_at = r
        .expires_in
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| chrono::Utc::now() + chrono::Duration::milliseconds((s * 1000.0) as i64));
    let scopes = match r.scope {
        Some(s) => s.split_whitespace().map(str::to_owned).collect(),
        None => asked.to_vec(),
    };
    Ok(StoredToken {
        access_token: r.access_token,
        refresh_token: r.refresh_token.or(previous_refresh),
        expires_at,
        scopes,
        token_endpoint: endpoints.token_endpoint.clone(),
        client_id: client_id.to_owned(),
        grant: grant.to_owned(),
        agent: String::new(),
    })
}

/// Extra parameters of every token request (e.g. `resource`, RFC 8707).
#[derive(Debug, Clone, Default)]
pub struct TokenParams {
    /// The resource indicator, when the authorization server needs one.
    pub resource: Option<String>,
}

/// The client-credentials grant (RFC 6749 4.4), the client authenticated
/// with HTTP Basic.
pub async fn client_credentials(
    http: &reqwest::Client,
    endpoints: &OAuthEndpoints,
    client_id: &str,
    client_secret: &str,
    scopes: &[String],
    params: &TokenParams,
) -> ClientResult<StoredToken> {
    let scope = scopes.join(" ");
    let mut pairs = vec![("grant_type", "client_credentials")];
    if !scope.is_empty() {
        pairs.push(("scope", &scope));
    }
    if let Some(r) = &params.resource {
        pairs.push(("resource", r));
    }
    let r: TokenResponse = post_form(
        http,
        &endpoints.token_endpoint,
        &pairs,
        Some((client_id, client_secret)),
    )
    .await
    .map_err(|f| f.into_error("client-credentials sign-in"))?;
    stored(r, endpoints, client_id, "client_credentials", scopes, None)
}

/// A device authorization (RFC 8628 3.2): what the user is shown.
#[derive(Clone, Deserialize)]
pub struct DeviceAuthorization {
    /// The device code (secret: polled with, never shown).
    pub device_code: String,
    /// The code the user enters.
    pub user_code: String,
    /// Where the user enters it.
    pub verification_uri: String,
    /// The same with the code filled in, when offered.
    #[serde(default)]
    pub verification_uri_complete: Option<String>,
    /// Seconds until the codes expire.
    pub expires_in: u64,
    /// Seconds between two polls (default 5).
    #[serde(default)]
    pub interval: Option<u64>,
}

impl fmt::Debug for DeviceAuthorization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceAuthorization")
            .field("device_code", &"<redacted>")
            .field("user_code", &self.user_code)
            .field("verification_uri", &self.verification_uri)
            .field("expires_in", &self.expires_in)
            .field("interval", &self.interval)
            .finish()
    }
}

/// Starts the device authorization grant (RFC 8628 3.1).
pub async fn device_authorize(
    http: &reqwest::Client,
    endpoints: &OAuthEndpoints,
    client_id: &str,
    scopes: &[String],
    params: &TokenParams,
) -> ClientResult<DeviceAuthorization> {
    let Some(url) = endpoints.device_authorization_endpoint.as_deref() else {
        return Err(ClientError::InvalidRequest(
            "the authorization server offers no device authorization endpoint".into(),
        ));
    };
    let scope = scopes.join(" ");
    let mut pairs = vec![("client_id", client_id)];
    if !scope.is_empty() {
        pairs.push(("scope", &scope));
    }
    if let Some(r) = &params.resource {
        pairs.push(("resource", r));
    }
    post_form(http, url, &pairs, None)
        .await
        .map_err(|f| f.into_error("device sign-in"))
}

/// Polls the token endpoint until the user approved or denied the device
/// authorization, or its codes expired (RFC 8628 3.4, 3.5): waits
/// `interval` seconds between polls and 5 more on each `slow_down`.
pub async fn device_poll(
    http: &reqwest::Client,
    endpoints: &OAuthEndpoints,
    client_id: &str,
    auth: &DeviceAuthorization,
    scopes: &[String],
    params: &TokenParams,
) -> ClientResult<StoredToken> {
    let mut interval = Duration::from_secs(auth.interval.unwrap_or(5).max(1));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(auth.expires_in.max(1));
    loop {
        tokio::time::sleep(interval).await;
        let mut pairs = vec![
            ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
            ("device_code", auth.device_code.as_str()),
            ("client_id", client_id),
        ];
        if let Some(r) = &params.resource {
            pairs.push(("resource", r));
        }
        match post_form::<TokenResponse>(http, &endpoints.token_endpoint, &pairs, None).await {
            Ok(r) => return stored(r, endpoints, client_id, "device_code", scopes, None),
            Err(Failure::OAuth(code, desc)) => match code.as_str() {
                "authorization_pending" => {}
                "slow_down" => interval += Duration::from_secs(5),
                "expired_token" => {
                    return Err(ClientError::InvalidRequest(
                        "the device code expired before it was approved: run the login again"
                            .into(),
                    ));
                }
                "access_denied" => {
                    return Err(ClientError::InvalidRequest(
                        "the sign-in was denied at the verification page".into(),
                    ));
                }
                // An authorization server that forgets an expired code
                // answers as for an unknown one.
                "invalid_grant" => {
                    return Err(ClientError::InvalidRequest(
                        "the device code is no longer valid (it expired or was already used): \
                         run the login again"
                            .into(),
                    ));
                }
                _ => return Err(Failure::OAuth(code, desc).into_error("device sign-in")),
            },
            Err(f) => return Err(f.into_error("device sign-in")),
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ClientError::InvalidRequest(
                "the device code expired before it was approved: run the login again".into(),
            ));
        }
    }
}

/// Exchanges the refresh token for a new access token (RFC 6749 6). A
/// public client (device grant) sends its client id; a confidential one
/// has no stored secret, so it signs in again instead.
pub async fn refresh(http: &reqwest::Client, token: &StoredToken) -> ClientResult<StoredToken> {
    let Some(rt) = token.refresh_token.as_deref() else {
        return Err(ClientError::InvalidRequest(
            "the stored token has expired and has no refresh token: sign in again with a2a auth login"
                .into(),
        ));
    };
    let pairs = [
        ("grant_type", "refresh_token"),
        ("refresh_token", rt),
        ("client_id", token.client_id.as_str()),
    ];
    let endpoints = OAuthEndpoints {
        token_endpoint: token.token_endpoint.clone(),
        ..Default::default()
    };
    let r: TokenResponse = post_form(http, &token.token_endpoint, &pairs, None)
        .await
        .map_err(|f| f.into_error("token refresh"))?;
    let mut t = stored(
        r,
        &endpoints,
        &token.client_id,
        &token.grant,
        &token.scopes,
        token.refresh_token.clone(),
    )?;
    t.agent.clone_from(&token.agent);
    Ok(t)
}

/// An OAuth token that refreshes itself: a [`crate::auth::TokenSource`]
/// for [`crate::ClientBuilder::token_source`].
///
/// Before a call, a token that has expired (see [`StoredToken::is_expired`])
/// is refreshed with its refresh token; when the agent refuses a token
/// anyway (revoked, clock skew), [`crate::auth::TokenSource::refresh`]
/// refreshes it once and the client retries the call once. A refreshed
/// token is saved in the [`TokenStore`] it came from, if any. Calls that
/// share one `RefreshingToken` refresh it once between them.
#[derive(Debug)]
pub struct RefreshingToken {
    http: reqwest::Client,
    token: tokio::sync::Mutex<StoredToken>,
    store: Option<(TokenStore, String)>,
    /// Why the last refresh failed (cleared by a successful one).
    failure: std::sync::Mutex<Option<String>>,
}

impl RefreshingToken {
    /// A token kept in memory only.
    pub fn new(http: reqwest::Client, token: StoredToken) -> Self {
        Self {
            http,
            token: tokio::sync::Mutex::new(token),
            store: None,
            failure: std::sync::Mutex::new(None),
        }
    }

    /// A token of `store` (under `agent`): refreshed tokens are saved there.
    pub fn stored(
        http: reqwest::Client,
        store: TokenStore,
        agent: impl Into<String>,
        token: StoredToken,
    ) -> Self {
        Self {
            http,
            token: tokio::sync::Mutex::new(token),
            store: Some((store, agent.into())),
            failure: std::sync::Mutex::new(None),
        }
    }

    /// The token as it is now.
    pub async fn current(&self) -> StoredToken {
        self.token.lock().await.clone()
    }

    /// Refreshes the token held (the lock is held by the caller).
    async fn renew(&self, held: &mut StoredToken) -> ClientResult<()> {
        let fresh = refresh(&self.http, held).await?;
        if let Some((store, agent)) = &self.store {
            store.save(agent, &fresh)?;
        }
        *held = fresh;
        self.set_failure(None);
        Ok(())
    }

    fn set_failure(&self, failure: Option<String>) {
        if let Ok(mut f) = self.failure.lock() {
            *f = failure;
        }
    }
}

#[async_trait::async_trait]
impl crate::auth::TokenSource for RefreshingToken {
    async fn token(&self) -> ClientResult<Option<String>> {
        let mut held = self.token.lock().await;
        if held.is_expired()
            && held.refresh_token.is_some()
            && let Err(e) = self.renew(&mut held).await
        {
            // The agent has the last word on the old token (it may still
            // be within its leeway); a refusal comes back as the call's
            // error.
            tracing::warn!("the token has expired and could not be refreshed: {e}");
            self.set_failure(Some(format!(
                "the token expired and refreshing it failed: {e}"
            )));
        }
        Ok(Some(held.access_token.clone()))
    }

    async fn refresh(&self, rejected: &str) -> ClientResult<Option<String>> {
        let mut held = self.token.lock().await;
        if held.access_token != rejected {
            // Another call refreshed it meanwhile.
            return Ok(Some(held.access_token.clone()));
        }
        if held.refresh_token.is_none() {
            self.set_failure(Some(
                "the agent refused the token, which has no refresh token: sign in again with a2a auth login"
                    .into(),
            ));
            return Ok(None);
        }
        match self.renew(&mut held).await {
            Ok(()) => Ok(Some(held.access_token.clone())),
            Err(e) => {
                tracing::warn!("the agent refused the token and it could not be refreshed: {e}");
                self.set_failure(Some(format!(
                    "the agent refused the token and refreshing it failed: {e}"
                )));
                Ok(None)
            }
        }
    }

    fn refresh_failure(&self) -> Option<String> {
        self.failure.lock().ok().and_then(|f| f.clone())
    }
}

/// Tokens per agent: one JSON file each (mode 0600 on Unix) in a
/// directory of their own (mode 0700), or, with
/// [`TokenStore::with_keyring`], the secrets (access and refresh token) in
/// the OS keyring and only what `a2a auth status` shows (expiry, scopes,
/// grant, client id) in the file.
///
/// A file that names the keyring holds no token; one that does not is a
/// token stored in the file, whichever store reads it, so tokens stored
/// before a change of store stay usable. [`TokenStore::remove`] removes
/// the token from wherever it is.
#[derive(Debug, Clone)]
pub struct TokenStore {
    dir: PathBuf,
    /// The keyring service the secrets are stored under, when they go to
    /// the keyring.
    keyring: Option<String>,
}

/// The storage kind of a [`TokenStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenStorage {
    /// Files readable by their owner only.
    File,
    /// The OS keyring (files hold what is not secret).
    Keyring,
}

impl TokenStorage {
    /// `file` or `keyring`.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenStorage::File => "file",
            TokenStorage::Keyring => "keyring",
        }
    }
}

/// The secrets of a token, as kept in the keyring.
#[derive(Serialize, Deserialize)]
struct Secrets {
    access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refresh_token: Option<String>,
}

/// The marker of a file whose secrets are in the keyring.
const IN_KEYRING: &str = "inKeyring";

impl TokenStore {
    /// A store of files in this directory (created on first save).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            keyring: None,
        }
    }

    /// A store whose secrets go to the OS keyring under `service` (one
    /// entry per agent), with what is not secret in files of `dir`. Check
    /// that a keyring is reachable first ([`keyring_reachable`]).
    #[cfg(feature = "keyring")]
    pub fn with_keyring(dir: impl Into<PathBuf>, service: impl Into<String>) -> Self {
        Self {
            dir: dir.into(),
            keyring: Some(service.into()),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where new tokens go.
    pub fn storage(&self) -> TokenStorage {
        if self.keyring.is_some() {
            TokenStorage::Keyring
        } else {
            TokenStorage::File
        }
    }

    fn path(&self, agent: &str) -> PathBuf {
        // Percent-encoding keeps one file per agent URL, reversible and
        // without path separators.
        let name = utf8_percent_encode(agent, NON_ALPHANUMERIC).to_string();
        self.dir.join(format!("{name}.json"))
    }

    /// The file of this agent: its JSON and the keyring service its
    /// secrets are in, if any.
    fn read_file(&self, path: &Path) -> ClientResult<Option<(serde_json::Value, Option<String>)>> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(ClientError::InvalidRequest(format!(
                    "cannot read the stored token {}: {e}",
                    path.display()
                )));
            }
        };
        let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
            ClientError::InvalidRequest(format!(
                "the stored token {} is not valid ({e}): remove it with a2a auth logout",
                path.display()
            ))
        })?;
        let service = v
            .get(IN_KEYRING)
            .and_then(|s| s.as_str())
            .map(str::to_owned);
        Ok(Some((v, service)))
    }

    /// The token of a file read by [`Self::read_file`], with its secrets
    /// from the keyring when they are there (`None`: the keyring has none).
    fn complete(
        &self,
        path: &Path,
        v: serde_json::Value,
        service: Option<&str>,
        agent: &str,
    ) -> ClientResult<Option<StoredToken>> {
        let mut token: StoredToken = serde_json::from_value(v).map_err(|e| {
            ClientError::InvalidRequest(format!(
                "the stored token {} is not valid ({e}): remove it with a2a auth logout",
                path.display()
            ))
        })?;
        if let Some(service) = service {
            let Some(secret) = os_keyring::get(service, agent)? else {
                return Ok(None);
            };
            let secrets: Secrets = serde_json::from_str(&secret).map_err(|e| {
                ClientError::InvalidRequest(format!(
                    "the keyring's token for {agent} is not valid ({e}): remove it with a2a auth logout"
                ))
            })?;
            token.access_token = secrets.access_token;
            token.refresh_token = secrets.refresh_token;
        }
        Ok(Some(token))
    }

    /// This store, saving where the agent's token is now: in the keyring
    /// when its secrets are there, whatever this store would choose (so a
    /// refreshed token goes back where it came from).
    pub fn for_agent(&self, agent: &str) -> TokenStore {
        match self.read_file(&self.path(agent)) {
            Ok(Some((_, Some(service)))) => TokenStore {
                dir: self.dir.clone(),
                keyring: Some(service),
            },
            _ => self.clone(),
        }
    }

    /// The token stored for this agent.
    pub fn load(&self, agent: &str) -> ClientResult<Option<StoredToken>> {
        let path = self.path(agent);
        let Some((v, service)) = self.read_file(&path)? else {
            return Ok(None);
        };
        self.complete(&path, v, service.as_deref(), agent)
    }

    /// Stores the token for this agent, replacing any other.
    pub fn save(&self, agent: &str, token: &StoredToken) -> ClientResult<()> {
        let err = |e: std::io::Error| {
            ClientError::InvalidRequest(format!(
                "cannot store the token under {}: {e}",
                self.dir.display()
            ))
        };
        std::fs::create_dir_all(&self.dir).map_err(err)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))
                .map_err(err)?;
        }
        let path = self.path(agent);
        if self.keyring.is_none()
            && let Ok(Some((_, Some(service)))) = self.read_file(&path)
        {
            // The token moves from the keyring to the file: the keyring
            // keeps no stale copy (best effort: the file is what counts).
            let _ = os_keyring::delete(&service, agent);
        }
        let mut token = token.clone();
        token.agent = agent.to_owned();
        let json = |e: serde_json::Error| ClientError::InvalidRequest(e.to_string());
        let body = match &self.keyring {
            None => serde_json::to_vec_pretty(&token).map_err(json)?,
            Some(service) => {
                let secrets = Secrets {
                    access_token: std::mem::take(&mut token.access_token),
                    refresh_token: token.refresh_token.take(),
                };
                os_keyring::set(
                    service,
                    agent,
                    &serde_json::to_string(&secrets).map_err(json)?,
                )?;
                let mut v = serde_json::to_value(&token).map_err(json)?;
                if let Some(o) = v.as_object_mut() {
                    o.insert(IN_KEYRING.into(), service.clone().into());
                }
                serde_json::to_vec_pretty(&v).map_err(json)?
            }
        };
        let tmp = path.with_extension("json.tmp");
        {
            use std::io::Write;
            let mut o = std::fs::OpenOptions::new();
            o.write(true).create(true).truncate(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                o.mode(0o600);
            }
            let mut f = o.open(&tmp).map_err(err)?;
            f.write_all(&body).map_err(err)?;
            f.sync_all().map_err(err)?;
        }
        std::fs::rename(&tmp, &path).map_err(err)
    }

    /// Removes the token of this agent, from the keyring too when its
    /// secrets are there; whether there was one.
    pub fn remove(&self, agent: &str) -> ClientResult<bool> {
        let path = self.path(agent);
        // A file that cannot be read (or parsed) is removed all the same.
        let service = self.read_file(&path).ok().flatten().and_then(|(_, s)| s);
        let mut removed = false;
        if let Some(service) = &service {
            removed = os_keyring::delete(service, agent)?;
        }
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(removed),
            Err(e) => Err(ClientError::InvalidRequest(format!(
                "cannot remove the stored token: {e}"
            ))),
        }
    }

    /// Every stored token, by agent (a token whose secrets the keyring no
    /// longer has is left out).
    pub fn list(&self) -> ClientResult<BTreeMap<String, StoredToken>> {
        let mut out = BTreeMap::new();
        let rd = match std::fs::read_dir(&self.dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => {
                return Err(ClientError::InvalidRequest(format!(
                    "cannot read {}: {e}",
                    self.dir.display()
                )));
            }
        };
        for entry in rd.flatten() {
            let p = entry.path();
            if p.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let Ok(Some((v, service))) = self.read_file(&p) else {
                continue;
            };
            let agent = v
                .get("agent")
                .and_then(|a| a.as_str())
                .unwrap_or_default()
                .to_owned();
            if let Ok(Some(t)) = self.complete(&p, v, service.as_deref(), &agent) {
                out.insert(t.agent.clone(), t);
            }
        }
        Ok(out)
    }
}

/// Whether the OS keyring answers (an entry read under `service`): `Err`
/// says why not (no D-Bus session, no Secret Service, locked, no answer
/// within a few seconds).
#[cfg(feature = "keyring")]
pub fn keyring_reachable(service: &str) -> Result<(), String> {
    os_keyring::probe(service)
}

/// The OS keyring, through the `keyring` crate. Every call runs on a
/// thread of its own, bounded in time: the Secret Service may wait for an
/// unlock prompt nobody answers, and its blocking D-Bus client stays off
/// the async runtime.
#[cfg(feature = "keyring")]
mod os_keyring {
    use std::time::Duration;

    use crate::error::{ClientError, ClientResult};

    /// How long one keyring call may take.
    const LIMIT: Duration = Duration::from_secs(10);

    fn on_thread<T: Send + 'static>(
        f: impl FnOnce() -> keyring::Result<T> + Send + 'static,
    ) -> Result<T, String> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        match rx.recv_timeout(LIMIT) {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(_) => Err(format!("the keyring did not answer within {LIMIT:?}")),
        }
    }

    fn failed(what: &str, e: String) -> ClientError {
        ClientError::InvalidRequest(format!("the OS keyring: cannot {what} the token: {e}"))
    }

    pub(super) fn probe(service: &str) -> Result<(), String> {
        let service = service.to_owned();
        on_thread(
            move || match keyring::Entry::new(&service, "reachable")?.get_password() {
                Ok(_) | Err(keyring::Error::NoEntry) => Ok(()),
                Err(e) => Err(e),
            },
        )
    }

    pub(super) fn get(service: &str, agent: &str) -> ClientResult<Option<String>> {
        let (service, agent) = (service.to_owned(), agent.to_owned());
        on_thread(
            move || match keyring::Entry::new(&service, &agent)?.get_password() {
                Ok(s) => Ok(Some(s)),
                Err(keyring::Error::NoEntry) => Ok(None),
                Err(e) => Err(e),
            },
        )
        .map_err(|e| failed("read", e))
    }

    pub(super) fn set(service: &str, agent: &str, secret: &str) -> ClientResult<()> {
        let (service, agent, secret) = (service.to_owned(), agent.to_owned(), secret.to_owned());
        on_thread(move || keyring::Entry::new(&service, &agent)?.set_password(&secret))
            .map_err(|e| failed("store", e))
    }

    pub(super) fn delete(service: &str, agent: &str) -> ClientResult<bool> {
        let (service, agent) = (service.to_owned(), agent.to_owned());
        on_thread(
            move || match keyring::Entry::new(&service, &agent)?.delete_credential() {
                Ok(()) => Ok(true),
                Err(keyring::Error::NoEntry) => Ok(false),
                Err(e) => Err(e),
            },
        )
        .map_err(|e| failed("remove", e))
    }
}

/// Without the `keyring` feature no store names the keyring; a file that
/// does (written by a build with it) is an error that says so.
#[cfg(not(feature = "keyring"))]
mod os_keyring {
    use crate::error::{ClientError, ClientResult};

    fn absent() -> ClientError {
        ClientError::InvalidRequest(
            "this token is stored in the OS keyring, and this build has no keyring support".into(),
        )
    }

    pub(super) fn get(_: &str, _: &str) -> ClientResult<Option<String>> {
        Err(absent())
    }

    pub(super) fn set(_: &str, _: &str, _: &str) -> ClientResult<()> {
        Err(absent())
    }

    pub(super) fn delete(_: &str, _: &str) -> ClientResult<bool> {
        Err(absent())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> StoredToken {
        StoredToken {
            access_token: "secret-access".into(),
            refresh_token: Some("secret-refresh".into()),
            expires_at: Some(chrono::Utc::now() + chrono::Duration::hours(1)),
            scopes: vec!["a2a".into()],
            token_endpoint: "http://127.0.0.1:1/token".into(),
            client_id: "cli".into(),
            grant: "device_code".into(),
            agent: String::new(),
        }
    }

    #[test]
    fn debug_never_shows_tokens() {
        let s = format!("{:?}", token());
        assert!(
            !s.contains("secret-access") && !s.contains("secret-refresh"),
            "{s}"
        );
    }

    #[test]
    fn store_round_trip_and_mode() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(dir.path().join("tokens"));
        let agent = "http://127.0.0.1:8080/.well-known/agent-card.json";
        assert!(store.load(agent).unwrap().is_none());
        store.save(agent, &token()).unwrap();
        let got = store.load(agent).unwrap().unwrap();
        assert_eq!(got.access_token, "secret-access");
        assert_eq!(got.agent, agent);
        assert_eq!(store.list().unwrap().len(), 1);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(store.path(agent))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(store.remove(agent).unwrap());
        assert!(!store.remove(agent).unwrap());
    }

    #[test]
    fn expiry_uses_a_margin() {
        let mut t = token();
        assert!(!t.is_expired());
        t.expires_at = Some(chrono::Utc::now() + chrono::Duration::seconds(5));
        assert!(t.is_expired());
        t.expires_at = None;
        assert!(!t.is_expired());
    }

    /// A device authorization to poll every second at `url`.
    fn device(url: &str) -> (OAuthEndpoints, DeviceAuthorization) {
        let endpoints = OAuthEndpoints {
            token_endpoint: format!("{url}/token"),
            ..Default::default()
        };
        let auth = DeviceAuthorization {
            device_code: "dc".into(),
            user_code: "ABCD-EFGH".into(),
            verification_uri: format!("{url}/device"),
            verification_uri_complete: None,
            expires_in: 300,
            interval: Some(1),
        };
        (endpoints, auth)
    }

    fn oauth_error(code: &str) -> crate::testutil::Canned {
        crate::testutil::Canned::json(400, serde_json::json!({ "error": code }))
    }

    #[tokio::test]
    async fn device_poll_waits_longer_on_slow_down_then_takes_the_token() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let n = std::sync::Arc::new(AtomicUsize::new(0));
        let seen = n.clone();
        let server = crate::testutil::serve(move |_| match seen.fetch_add(1, Ordering::SeqCst) {
            0 => oauth_error("authorization_pending"),
            1 => oauth_error("slow_down"),
            _ => crate::testutil::Canned::json(
                200,
                serde_json::json!({
                    "access_token": "at", "token_type": "Bearer", "expires_in": 60,
                    "refresh_token": "rt", "scope": "a2a"
                }),
            ),
        })
        .await;
        let (endpoints, auth) = device(&server.url);
        let started = std::time::Instant::now();
        let http = crate::http::default_http_client();
        let t = device_poll(
            &http,
            &endpoints,
            "cli",
            &auth,
            &[],
            &TokenParams::default(),
        )
        .await
        .expect("the token");
        assert_eq!(t.access_token, "at");
        assert_eq!(t.refresh_token.as_deref(), Some("rt"));
        assert_eq!(t.grant, "device_code");
        assert_eq!(n.load(Ordering::SeqCst), 3);
        // 1 s, 1 s, then 1 + 5 s after the slow_down.
        assert!(started.elapsed() >= Duration::from_secs(8));
        let body = String::from_utf8(server.requests()[0].body.clone()).unwrap();
        let body = percent_encoding::percent_decode_str(&body).decode_utf8_lossy();
        assert!(
            body.contains("device_code=dc") && body.contains("client_id=cli"),
            "{body}"
        );
    }

    #[tokio::test]
    async fn device_poll_errors_say_what_happened() {
        for (code, says) in [
            ("access_denied", "denied at the verification page"),
            ("expired_token", "run the login again"),
            ("invalid_grant", "run the login again"),
            ("invalid_client", "invalid_client"),
        ] {
            let server = crate::testutil::serve(move |_| oauth_error(code)).await;
            let (endpoints, auth) = device(&server.url);
            let http = crate::http::default_http_client();
            let e = device_poll(
                &http,
                &endpoints,
                "cli",
                &auth,
                &[],
                &TokenParams::default(),
            )
            .await
            .expect_err("refused");
            assert!(e.to_string().contains(says), "{code}: {e}");
        }
    }

    #[tokio::test]
    async fn refreshing_token_refreshes_when_expired_or_refused_and_stores_it() {
        use crate::auth::TokenSource;
        let server = crate::testutil::serve(|r| {
            let body = String::from_utf8_lossy(&r.body).into_owned();
            let body = percent_encoding::percent_decode_str(&body)
                .decode_utf8_lossy()
                .into_owned();
            assert!(body.contains("grant_type=refresh_token"), "{body}");
            crate::testutil::Canned::json(
                200,
                serde_json::json!({
                    "access_token": format!("at-{}", body.len()), "token_type": "Bearer",
                    "expires_in": 3600, "refresh_token": "rt-2"
                }),
            )
        })
        .await;
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(dir.path().join("tokens"));
        let mut t = token();
        t.token_endpoint = format!("{}/token", server.url);
        t.expires_at = Some(chrono::Utc::now() - chrono::Duration::seconds(1));
        let http = crate::http::default_http_client();
        let source = RefreshingToken::stored(http.clone(), store.clone(), "agent", t.clone());

        // Expired: refreshed before use, and stored.
        let first = source.token().await.unwrap().unwrap();
        assert_ne!(first, "secret-access");
        assert_eq!(server.requests().len(), 1);
        assert_eq!(store.load("agent").unwrap().unwrap().access_token, first);
        assert_eq!(
            store
                .load("agent")
                .unwrap()
                .unwrap()
                .refresh_token
                .as_deref(),
            Some("rt-2")
        );
        // Fresh now: no request.
        assert_eq!(source.token().await.unwrap().unwrap(), first);
        assert_eq!(server.requests().len(), 1);
        // A token refused after another call refreshed it: the current one,
        // no request.
        assert_eq!(
            source.refresh("an-older-token").await.unwrap().as_deref(),
            Some(first.as_str())
        );
        assert_eq!(server.requests().len(), 1);
        // The current one refused: refreshed once.
        let second = source.refresh(&first).await.unwrap().unwrap();
        assert_eq!(server.requests().len(), 2);
        assert_eq!(source.current().await.access_token, second);

        // Without a refresh token there is nothing to retry with.
        let mut t = token();
        t.refresh_token = None;
        let source = RefreshingToken::new(http, t);
        assert_eq!(source.refresh("secret-access").await.unwrap(), None);
        assert_eq!(server.requests().len(), 2);
    }

    #[test]
    fn form_encoding() {
        assert_eq!(form(&[("a b", "c&d=e")]), "a%20b=c%26d%3De");
    }
}
