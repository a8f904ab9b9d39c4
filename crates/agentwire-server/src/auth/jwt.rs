//! JWT bearer tokens (RFC 7519) checked against a JWKS (RFC 7517), and
//! OpenID Connect resource servers (the issuer's discovery document names
//! the JWKS).
//!
//! The signature and the claims are checked by `jsonwebtoken`; this file
//! keeps the keys: a JWKS file, or a URL fetched once and again when a
//! token names a key id not in the cache (at most every
//! [`JwtConfig::refresh_interval`], so a flood of tokens with made-up key
//! ids cannot make the server fetch in a loop) or when the cache is older
//! than [`JwtConfig::max_key_age`]. Keys the token itself carries (`jwk`,
//! `jku`) are never used.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire_types::{
    A2aError, A2aResult, ErrorKind, HttpAuthSecurityScheme, OpenIdConnectSecurityScheme,
    SecurityScheme, security_scheme,
};
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use parking_lot::Mutex;
use serde_json::Value;

use super::{WWW_AUTHENTICATE, unauthenticated};

/// Where the keys that sign the tokens come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// A JWKS document in a file (read again when a token names a key id
    /// it does not have: rotating is replacing the file).
    File(PathBuf),
    /// A JWKS document at an `http(s)` URL.
    Url(String),
    /// An OpenID Connect issuer: `ISSUER/.well-known/openid-configuration`
    /// names the JWKS (`jwks_uri`) and the issuer tokens must carry.
    Oidc(String),
}

impl JwksSource {
    /// `http://` and `https://` are URLs, anything else a file.
    pub fn parse(s: &str) -> Self {
        if s.starts_with("http://") || s.starts_with("https://") {
            Self::Url(s.to_owned())
        } else {
            Self::File(PathBuf::from(s))
        }
    }
}

/// What a JWT must be to be accepted.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JwtConfig {
    /// The signing keys.
    pub source: JwksSource,
    /// The `iss` tokens must carry (with [`JwksSource::Oidc`], the issuer
    /// of the discovery document when not set). `None`: any issuer.
    pub issuer: Option<String>,
    /// The `aud` values accepted (one is enough). Empty: no audience check
    /// (not advisable: a token meant for another service would do).
    pub audiences: Vec<String>,
    /// The clock skew allowed on `exp` and `nbf`. Default 60 s.
    pub leeway: Duration,
    /// The signature algorithms accepted. Default: RS256, RS384, RS512,
    /// PS256, PS384, PS512, ES256, ES384 and EdDSA. `none` never is; the
    /// HMAC ones (HS256...) only with [`Self::shared_secret`].
    pub algorithms: Vec<Algorithm>,
    /// A secret shared with the token issuer, for HS256, HS384 and HS512.
    pub shared_secret: Option<Vec<u8>>,
    /// Scopes every token must have (`scope` or `scp` claim); a token
    /// without one of them is refused with PermissionDenied (403).
    pub required_scopes: Vec<String>,
    /// The claim naming the principal. Default `sub`.
    pub principal_claim: String,
    /// The shortest time between two fetches of the keys. Default 30 s.
    pub refresh_interval: Duration,
    /// Keys older than this are fetched again (a removed key stops being
    /// accepted then). Default 1 hour.
    pub max_key_age: Duration,
    /// How long one fetch may take. Default 10 s.
    pub fetch_timeout: Duration,
}

impl JwtConfig {
    /// Tokens signed by the keys of `source`, with the defaults.
    pub fn new(source: JwksSource) -> Self {
        Self {
            source,
            issuer: None,
            audiences: Vec::new(),
            leeway: Duration::from_secs(60),
            algorithms: vec![
                Algorithm::RS256,
                Algorithm::RS384,
                Algorithm::RS512,
                Algorithm::PS256,
                Algorithm::PS384,
                Algorithm::PS512,
                Algorithm::ES256,
                Algorithm::ES384,
                Algorithm::EdDSA,
            ],
            shared_secret: None,
            required_scopes: Vec::new(),
            principal_claim: "sub".into(),
            refresh_interval: Duration::from_secs(30),
            max_key_age: Duration::from_secs(3600),
            fetch_timeout: Duration::from_secs(10),
        }
    }

    /// Requires `iss`.
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }

    /// Accepts this `aud` (may be called several times).
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.audiences.push(audience.into());
        self
    }

    /// Requires this scope.
    pub fn require_scope(mut self, scope: impl Into<String>) -> Self {
        self.required_scopes.push(scope.into());
        self
    }

    /// Allows this much clock skew.
    pub fn leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }

    /// Accepts HS256/384/512 tokens signed with this secret.
    pub fn shared_secret(mut self, secret: impl Into<Vec<u8>>) -> Self {
        self.shared_secret = Some(secret.into());
        self.algorithms
            .extend([Algorithm::HS256, Algorithm::HS384, Algorithm::HS512]);
        self
    }

    /// Waits at least this long between two fetches of the keys.
    pub fn refresh_interval(mut self, interval: Duration) -> Self {
        self.refresh_interval = interval;
        self
    }
}

/// One key of the set.
struct Key {
    kid: Option<String>,
    key: DecodingKey,
    /// The kind of key (which algorithms it can verify).
    family: Family,
    /// The key's own `alg`, when it names one.
    alg: Option<Algorithm>,
}

/// The keys in use and where they came from.
#[derive(Default)]
struct Cache {
    keys: Arc<Vec<Key>>,
    /// Counts the loads of `keys`: a token accepted under an earlier set is
    /// checked again (its key may have left).
    generation: u64,
    /// When the keys were last loaded.
    loaded: Option<Instant>,
    /// When they were last fetched or tried.
    tried: Option<Instant>,
    /// From the discovery document: the JWKS URL and the issuer.
    discovered: Option<(String, String)>,
}

/// Validates JWT bearer tokens. Cheap to share (`Arc`).
pub struct JwtAuth {
    config: JwtConfig,
    cache: Mutex<Cache>,
    /// One fetch at a time.
    fetching: tokio::sync::Mutex<()>,
    http: reqwest::Client,
    /// Tokens already verified (see [`Accepted`]).
    accepted: Mutex<std::collections::HashMap<Box<str>, Accepted>>,
}

/// A token this validator accepted: a client sends the same token on every
/// call until it expires, and checking its signature again each time is
/// most of the cost of a call (an ES256 or RS256 verification: tens of
/// microseconds). Kept until the token expires (with the leeway) and only
/// while the key set it was checked with is the one in use; the claims'
/// other checks (issuer, audience, scopes) depend on the configuration
/// only, which does not change.
struct Accepted {
    principal: String,
    /// Unix seconds after which the token is refused (`exp` + leeway).
    until: u64,
    /// The key set's generation it was checked under (0: a shared secret).
    generation: u64,
}

/// The most tokens remembered as accepted (a bound on what callers can make
/// the server hold: a full table drops the expired ones, then all).
const MAX_ACCEPTED: usize = 4096;

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl std::fmt::Debug for JwtAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtAuth")
            .field("source", &self.config.source)
            .field("issuer", &self.config.issuer)
            .field("audiences", &self.config.audiences)
            .finish_non_exhaustive()
    }
}

/// Why a token was not accepted.
pub(crate) enum Refusal {
    /// No key of the cache fits: fetching the keys again may help.
    UnknownKey,
    /// Refused for good.
    Error(A2aError),
}

/// The largest JWKS or discovery document read.
const MAX_DOCUMENT_BYTES: usize = 1 << 20;

impl JwtAuth {
    /// A validator for `config`. A JWKS file is read now (an error names
    /// it); URLs are fetched on first use (or by [`Self::refresh`]).
    pub fn new(config: JwtConfig) -> Result<Self, String> {
        if config.algorithms.is_empty() {
            return Err("no signature algorithm is accepted".into());
        }
        let hmac =
            |a: &Algorithm| matches!(a, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512);
        if config.shared_secret.is_none() && config.algorithms.iter().any(hmac) {
            return Err("HS256, HS384 and HS512 need a shared secret".into());
        }
        // reqwest is built without a crypto provider of its own (see the
        // workspace's Cargo.toml): *ring*, unless the application chose one.
        crate::serving::tls::crypto_provider();
        let http = reqwest::Client::builder()
            .timeout(config.fetch_timeout)
            .redirect(reqwest::redirect::Policy::limited(3))
            .user_agent(concat!("agentwire/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build the HTTP client fetching the keys: {e}"))?;
        let auth = Self {
            config,
            cache: Mutex::new(Cache::default()),
            fetching: tokio::sync::Mutex::new(()),
            http,
            accepted: Mutex::new(std::collections::HashMap::new()),
        };
        if let JwksSource::File(path) = &auth.config.source {
            let keys = read_jwks_file(path)?;
            let mut cache = auth.cache.lock();
            cache.keys = Arc::new(keys);
            cache.generation += 1;
            cache.loaded = Some(Instant::now());
            cache.tried = cache.loaded;
        }
        Ok(auth)
    }

    /// The configuration.
    pub fn config(&self) -> &JwtConfig {
        &self.config
    }

    /// Loads the keys now (reads the file, or fetches the discovery
    /// document and the JWKS), whatever the refresh interval; the keys in
    /// use are kept when this fails.
    pub async fn refresh(&self) -> Result<(), String> {
        let _one = self.fetching.lock().await;
        self.load().await
    }

    async fn load(&self) -> Result<(), String> {
        self.cache.lock().tried = Some(Instant::now());
        let keys = match &self.config.source {
            JwksSource::File(path) => read_jwks_file(path)?,
            JwksSource::Url(url) => self.fetch_jwks(url).await?,
            JwksSource::Oidc(issuer) => {
                let known = self.cache.lock().discovered.clone();
                let (jwks_uri, _) = match known {
                    Some(d) => d,
                    None => {
                        let d = self.discover(issuer).await?;
                        self.cache.lock().discovered = Some(d.clone());
                        d
                    }
                };
                self.fetch_jwks(&jwks_uri).await?
            }
        };
        let mut cache = self.cache.lock();
        cache.keys = Arc::new(keys);
        cache.generation += 1;
        cache.loaded = Some(Instant::now());
        Ok(())
    }

    async fn get_json(&self, url: &str, what: &str) -> Result<Value, String> {
        let resp = self
            .http
            .get(url)
            .header(http::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| format!("cannot fetch the {what} {url}: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("the {what} {url} answered {}", resp.status()));
        }
        if resp
            .content_length()
            .is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64)
        {
            return Err(format!("the {what} {url} is larger than 1 MiB"));
        }
        let body = resp
            .bytes()
            .await
            .map_err(|e| format!("cannot read the {what} {url}: {e}"))?;
        if body.len() > MAX_DOCUMENT_BYTES {
            return Err(format!("the {what} {url} is larger than 1 MiB"));
        }
        serde_json::from_slice(&body).map_err(|e| format!("the {what} {url} is not JSON: {e}"))
    }

    async fn fetch_jwks(&self, url: &str) -> Result<Vec<Key>, String> {
        let doc = self.get_json(url, "JWKS").await?;
        parse_jwks(doc).map_err(|e| format!("the JWKS {url}: {e}"))
    }

    /// The discovery document's `jwks_uri` and `issuer` (which must be the
    /// issuer asked for, OpenID Connect Discovery 1.0 section 4.3).
    async fn discover(&self, issuer: &str) -> Result<(String, String), String> {
        let base = issuer.trim_end_matches('/');
        let url = format!("{base}/.well-known/openid-configuration");
        let doc = self.get_json(&url, "OpenID configuration").await?;
        let said = doc["issuer"].as_str().unwrap_or_default();
        if said.trim_end_matches('/') != base {
            return Err(format!(
                "the OpenID configuration {url} names the issuer {said:?}, not {issuer:?}"
            ));
        }
        let jwks_uri = doc["jwks_uri"]
            .as_str()
            .filter(|u| !u.is_empty())
            .ok_or_else(|| format!("the OpenID configuration {url} has no jwks_uri"))?;
        Ok((jwks_uri.to_owned(), said.to_owned()))
    }

    /// The issuer tokens must carry, as far as known now.
    fn expected_issuer(&self) -> Option<String> {
        if let Some(iss) = &self.config.issuer {
            return Some(iss.clone());
        }
        match &self.config.source {
            JwksSource::Oidc(issuer) => Some(
                self.cache
                    .lock()
                    .discovered
                    .as_ref()
                    .map_or_else(|| issuer.clone(), |(_, iss)| iss.clone()),
            ),
            _ => None,
        }
    }

    /// Whether the keys should be loaded before this call can be decided:
    /// never loaded, or too old, and not tried too recently.
    pub(crate) fn wants_refresh(&self) -> bool {
        let cache = self.cache.lock();
        let stale = cache
            .loaded
            .is_none_or(|t| t.elapsed() >= self.config.max_key_age);
        stale && self.may_fetch(&cache)
    }

    fn may_fetch(&self, cache: &Cache) -> bool {
        cache
            .tried
            .is_none_or(|t| t.elapsed() >= self.config.refresh_interval)
    }

    /// Checks a token with the keys at hand: the principal, or why not.
    pub(crate) fn verify_now(&self, token: &str) -> Result<String, Refusal> {
        let now = unix_now();
        if let Some(principal) = self.accepted_before(token, now) {
            return Ok(principal);
        }
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| Refusal::Error(invalid_token("the bearer token is not a JWT")))?;
        let alg = header.alg;
        if !self.config.algorithms.contains(&alg) {
            return Err(Refusal::Error(invalid_token(format!(
                "tokens signed with {alg:?} are not accepted"
            ))));
        }
        let mut validation = Validation::new(alg);
        validation.leeway = self.config.leeway.as_secs();
        validation.validate_nbf = true;
        validation.validate_exp = true;
        let mut required = vec!["exp"];
        if self.config.audiences.is_empty() {
            validation.validate_aud = false;
        } else {
            validation.set_audience(&self.config.audiences);
            required.push("aud");
        }
        if let Some(iss) = self.expected_issuer() {
            validation.set_issuer(&[iss]);
            required.push("iss");
        }
        validation.set_required_spec_claims(&required);
        let decode = |key: &DecodingKey| {
            jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, key, &validation)
        };
        // The key set checked against (0: the shared secret).
        let mut generation = 0;
        let result = if let Some(secret) = &self.config.shared_secret {
            if is_hmac(alg) {
                let key = DecodingKey::from_secret(secret);
                Some(decode(&key))
            } else {
                None
            }
        } else {
            None
        };
        let result = match result {
            Some(r) => r,
            None => {
                let (keys, keys_generation) = {
                    let cache = self.cache.lock();
                    (Arc::clone(&cache.keys), cache.generation)
                };
                generation = keys_generation;
                let fits = |k: &&Key| {
                    Family::of_alg(alg) == Some(k.family)
                        && k.alg.is_none_or(|a| a == alg)
                        && match (&header.kid, &k.kid) {
                            (Some(want), Some(have)) => want == have,
                            (Some(_), None) => false,
                            (None, _) => true,
                        }
                };
                let mut outcome = None;
                for key in keys.iter().filter(fits) {
                    match decode(&key.key) {
                        Err(e)
                            if header.kid.is_none()
                                && matches!(
                                    e.kind(),
                                    jsonwebtoken::errors::ErrorKind::InvalidSignature
                                ) =>
                        {
                            // Without a key id, the next key of the family
                            // may be the one.
                            outcome = Some(Err(e));
                        }
                        other => {
                            outcome = Some(other);
                            break;
                        }
                    }
                }
                match outcome {
                    Some(r) => r,
                    None => return Err(Refusal::UnknownKey),
                }
            }
        };
        let claims = result.map_err(|e| Refusal::Error(claim_error(&e)))?.claims;
        let principal = claims
            .get(&self.config.principal_claim)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                Refusal::Error(invalid_token(format!(
                    "the token has no {} claim naming the caller",
                    self.config.principal_claim
                )))
            })?;
        let scopes = token_scopes(&claims);
        let missing: Vec<&str> = self
            .config
            .required_scopes
            .iter()
            .filter(|s| !scopes.contains(&s.as_str()))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            let all = self.config.required_scopes.join(" ");
            return Err(Refusal::Error(
                A2aError::new(
                    ErrorKind::PermissionDenied,
                    format!("the token lacks the scope {}", missing.join(" ")),
                )
                .with_metadata(
                    WWW_AUTHENTICATE,
                    format!(r#"Bearer error="insufficient_scope", scope="{all}""#),
                ),
            ));
        }
        // Namespaced by the issuer (see `crate::store::Owner`): one name
        // from two issuers, or from an API key, is another caller.
        let issuer = claims
            .get("iss")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let principal = &format!("{}{issuer}#{principal}", crate::store::JWT_NAMESPACE);
        if let Some(exp) = claims.get("exp").and_then(Value::as_u64) {
            self.remember(
                token,
                principal,
                exp.saturating_add(self.config.leeway.as_secs()),
                generation,
                now,
            );
        }
        Ok(principal.to_owned())
    }

    /// The principal of a token accepted earlier, still unexpired and
    /// checked under the keys in use.
    fn accepted_before(&self, token: &str, now: u64) -> Option<String> {
        let accepted = self.accepted.lock();
        let a = accepted.get(token)?;
        let current = a.generation == 0 || a.generation == self.cache.lock().generation;
        (now <= a.until && current).then(|| a.principal.clone())
    }

    fn remember(&self, token: &str, principal: &str, until: u64, generation: u64, now: u64) {
        let mut accepted = self.accepted.lock();
        if accepted.len() >= MAX_ACCEPTED {
            accepted.retain(|_, a| now <= a.until);
            if accepted.len() >= MAX_ACCEPTED {
                accepted.clear();
            }
        }
        accepted.insert(
            token.into(),
            Accepted {
                principal: principal.to_owned(),
                until,
                generation,
            },
        );
    }

    /// Checks a token, loading the keys first when they are missing or
    /// stale, or when the token names a key not at hand (and the keys were
    /// not fetched too recently).
    pub(crate) async fn verify(&self, token: &str) -> A2aResult<String> {
        if self.wants_refresh() {
            self.refresh_if_allowed().await;
        }
        match self.verify_now(token) {
            Ok(p) => Ok(p),
            Err(Refusal::Error(e)) => Err(e),
            Err(Refusal::UnknownKey) => {
                if self.refresh_if_allowed().await {
                    match self.verify_now(token) {
                        Ok(p) => return Ok(p),
                        Err(Refusal::Error(e)) => return Err(e),
                        Err(Refusal::UnknownKey) => {}
                    }
                }
                Err(invalid_token(
                    "the token is signed by a key this agent does not know",
                ))
            }
        }
    }

    /// Loads the keys unless they were tried within the refresh interval
    /// (or another call is loading them: then waits for it). Whether new
    /// keys may be there.
    async fn refresh_if_allowed(&self) -> bool {
        let before = self.cache.lock().loaded;
        let _one = self.fetching.lock().await;
        let (reloaded, may_fetch) = {
            let cache = self.cache.lock();
            (cache.loaded != before, self.may_fetch(&cache))
        };
        if reloaded {
            // Another call loaded them meanwhile.
            return true;
        }
        if !may_fetch {
            return false;
        }
        match self.load().await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(error = %e, "could not load the token signing keys");
                false
            }
        }
    }

    /// The card's description of this scheme: its name and the scheme.
    pub(crate) fn scheme(&self) -> (&'static str, SecurityScheme) {
        match &self.config.source {
            JwksSource::Oidc(issuer) => (
                "oidc",
                SecurityScheme {
                    scheme: Some(security_scheme::Scheme::OpenIdConnectSecurityScheme(
                        OpenIdConnectSecurityScheme {
                            description: "An access token (JWT) from this OpenID provider".into(),
                            open_id_connect_url: format!(
                                "{}/.well-known/openid-configuration",
                                issuer.trim_end_matches('/')
                            ),
                        },
                    )),
                },
            ),
            _ => (
                "bearer",
                SecurityScheme {
                    scheme: Some(security_scheme::Scheme::HttpAuthSecurityScheme(
                        HttpAuthSecurityScheme {
                            description: match &self.config.issuer {
                                Some(iss) => format!("A JWT issued by {iss}"),
                                None => "A JWT signed by one of the agent's trusted keys".into(),
                            },
                            scheme: "Bearer".into(),
                            bearer_format: "JWT".into(),
                        },
                    )),
                },
            ),
        }
    }
}

/// The scopes of a token: `scope` (space-separated, RFC 8693 / 9068) or
/// `scp` (a list or a string).
fn token_scopes(claims: &serde_json::Map<String, Value>) -> Vec<&str> {
    let mut out = Vec::new();
    for name in ["scope", "scp"] {
        match claims.get(name) {
            Some(Value::String(s)) => out.extend(s.split_whitespace()),
            Some(Value::Array(items)) => out.extend(items.iter().filter_map(Value::as_str)),
            _ => {}
        }
    }
    out
}

fn read_jwks_file(path: &std::path::Path) -> Result<Vec<Key>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the JWKS file {}: {e}", path.display()))?;
    let doc: Value = serde_json::from_str(&text)
        .map_err(|e| format!("the JWKS file {} is not JSON: {e}", path.display()))?;
    parse_jwks(doc).map_err(|e| format!("the JWKS file {}: {e}", path.display()))
}

/// The signing keys of a JWKS document (keys for encryption, or of a kind
/// this library cannot use, are skipped).
fn parse_jwks(doc: Value) -> Result<Vec<Key>, String> {
    let set: JwkSet = serde_json::from_value(doc).map_err(|e| format!("not a JWK set ({e})"))?;
    let mut keys = Vec::new();
    for jwk in &set.keys {
        if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
            continue;
        }
        if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
            // A shared secret has no place in a published key set.
            continue;
        }
        let Ok(key) = DecodingKey::from_jwk(jwk) else {
            tracing::debug!(kid = ?jwk.common.key_id, "skipping a JWK that is not a usable public key");
            continue;
        };
        let alg = jwk
            .common
            .key_algorithm
            .and_then(|a| Algorithm::from_str(&a.to_string()).ok());
        let Some(family) = Family::of_jwk(&jwk.algorithm) else {
            continue;
        };
        keys.push(Key {
            kid: jwk.common.key_id.clone(),
            key,
            family,
            alg,
        });
    }
    if keys.is_empty() {
        return Err("no signing key in the set".into());
    }
    Ok(keys)
}

/// The `invalid_token` refusal (RFC 6750 section 3.1).
fn invalid_token(message: impl Into<String>) -> A2aError {
    let message = message.into();
    let challenge = format!(
        r#"Bearer error="invalid_token", error_description="{}""#,
        message.replace('"', "'")
    );
    unauthenticated(message, &challenge)
}

/// The kinds of public key a JWKS carries, and the algorithms each verifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Rsa,
    Ec,
    Ed,
}

impl Family {
    fn of_alg(alg: Algorithm) -> Option<Self> {
        use Algorithm as A;
        match alg {
            A::RS256 | A::RS384 | A::RS512 | A::PS256 | A::PS384 | A::PS512 => Some(Self::Rsa),
            A::ES256 | A::ES384 => Some(Self::Ec),
            A::EdDSA => Some(Self::Ed),
            A::HS256 | A::HS384 | A::HS512 => None,
        }
    }

    fn of_jwk(params: &AlgorithmParameters) -> Option<Self> {
        match params {
            AlgorithmParameters::RSA(_) => Some(Self::Rsa),
            AlgorithmParameters::EllipticCurve(_) => Some(Self::Ec),
            AlgorithmParameters::OctetKeyPair(_) => Some(Self::Ed),
            AlgorithmParameters::OctetKey(_) => None,
        }
    }
}

/// An HMAC algorithm (a shared secret, not a published key).
fn is_hmac(alg: Algorithm) -> bool {
    matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512)
}

fn claim_error(e: &jsonwebtoken::errors::Error) -> A2aError {
    use jsonwebtoken::errors::ErrorKind as K;
    invalid_token(match e.kind() {
        K::ExpiredSignature => "the token has expired".to_owned(),
        K::ImmatureSignature => "the token is not valid yet (nbf)".to_owned(),
        K::InvalidAudience => "the token is meant for another audience (aud)".to_owned(),
        K::InvalidIssuer => "the token is from another issuer (iss)".to_owned(),
        K::InvalidSignature => "the token's signature is not valid".to_owned(),
        K::InvalidAlgorithm => "the token's algorithm does not fit its key".to_owned(),
        K::MissingRequiredClaim(c) => format!("the token has no {c} claim"),
        _ => "the bearer token is not a valid JWT".to_owned(),
    })
}
