//! [`AuthSchemes`]: the security schemes of a deployed agent, checked on
//! every call and written into its card.

use std::sync::Arc;

use agentwire_types::{A2aError, A2aResult, AgentCard, ErrorKind, SecurityRequirement, StringList};
use http::HeaderMap;

use super::jwt::Refusal;
use super::throttle::Throttle;
use super::{
    ApiKeys, AuthCall, Authenticator, JwtAuth, ThrottleConfig, Verdict, bearer_token,
    unauthenticated,
};
use crate::store::{API_KEY_NAMESPACE, MTLS_NAMESPACE};

/// The schemes a caller may authenticate with (any one is enough), whether
/// anonymous callers are let in, and how failures are throttled.
///
/// ```no_run
/// use std::sync::Arc;
/// use agentwire_server::auth::{ApiKeyLocation, ApiKeys, AuthSchemes, JwksSource, JwtAuth, JwtConfig};
///
/// # fn main() -> Result<(), String> {
/// let keys = ApiKeys::new(ApiKeyLocation::default_header()).parse("alice:alice-key-123")?;
/// let jwt = JwtAuth::new(
///     JwtConfig::new(JwksSource::parse("https://id.example.com/jwks.json"))
///         .issuer("https://id.example.com")
///         .audience("https://agent.example.com"),
/// )?;
/// let schemes = AuthSchemes::new().api_keys(keys).jwt(jwt);
/// // A2aServer::new(card, agent).authenticator(Arc::new(schemes))
/// # let _ = Arc::new(schemes);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct AuthSchemes {
    api_keys: Option<ApiKeys>,
    jwt: Vec<Arc<JwtAuth>>,
    mutual_tls: bool,
    allow_anonymous: bool,
    throttle: Option<Throttle>,
}

impl std::fmt::Debug for Throttle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Throttle")
    }
}

impl Default for AuthSchemes {
    fn default() -> Self {
        Self::new()
    }
}

impl AuthSchemes {
    /// No scheme yet; failures throttled with the default
    /// [`ThrottleConfig`].
    pub fn new() -> Self {
        Self {
            api_keys: None,
            jwt: Vec::new(),
            mutual_tls: false,
            allow_anonymous: false,
            throttle: Some(Throttle::new(ThrottleConfig::default())),
        }
    }

    /// Accepts these API keys.
    pub fn api_keys(mut self, keys: ApiKeys) -> Self {
        self.api_keys = Some(keys);
        self
    }

    /// Accepts JWTs this validator accepts (may be called several times:
    /// a token any of them accepts is enough).
    pub fn jwt(mut self, jwt: JwtAuth) -> Self {
        self.jwt.push(Arc::new(jwt));
        self
    }

    /// Accepts callers by the client certificate they presented in the TLS
    /// handshake (mutual TLS; the server must be given a client CA with
    /// [`crate::TlsConfig::client_ca`], which verifies the certificate).
    /// The principal is the certificate's subject common name, or else its
    /// first DNS or URI subject alternative name. Credentials sent with the
    /// call (an API key, an `Authorization` header) take precedence over
    /// the certificate; a call with neither is refused like any call
    /// without credentials (401 / `UNAUTHENTICATED` / `-31401`).
    pub fn mutual_tls(mut self, on: bool) -> Self {
        self.mutual_tls = on;
        self
    }

    /// Lets calls without credentials in, as anonymous (they still see
    /// only anonymous tasks). Bad credentials are refused all the same.
    pub fn allow_anonymous(mut self, yes: bool) -> Self {
        self.allow_anonymous = yes;
        self
    }

    /// Throttles failures this way (`None`: never).
    pub fn throttle(mut self, config: Option<ThrottleConfig>) -> Self {
        self.throttle = config.map(Throttle::new);
        self
    }

    /// Whether any scheme is configured.
    pub fn is_empty(&self) -> bool {
        self.api_keys.is_none() && self.jwt.is_empty() && !self.mutual_tls
    }

    /// Loads the JWT keys now (see [`JwtAuth::refresh`]); the errors, one
    /// per validator that could not load its keys.
    pub async fn prefetch(&self) -> Vec<String> {
        let mut errors = Vec::new();
        for j in &self.jwt {
            if let Err(e) = j.refresh().await {
                errors.push(e);
            }
        }
        errors
    }

    /// The challenge naming every scheme.
    fn challenge(&self) -> String {
        let mut parts = Vec::new();
        if !self.jwt.is_empty() {
            parts.push(r#"Bearer realm="a2a""#.to_owned());
        }
        if let Some(k) = &self.api_keys {
            parts.push(k.challenge());
        }
        if parts.is_empty() && self.mutual_tls {
            // (No HTTP authentication scheme names a client certificate;
            // the challenge still tells the client it must authenticate.)
            parts.push(r#"Bearer realm="a2a""#.to_owned());
        }
        parts.join(", ")
    }

    fn missing(&self) -> A2aError {
        let mut ways = Vec::new();
        if !self.jwt.is_empty() {
            ways.push("Authorization: Bearer <token>".to_owned());
        }
        if let Some(k) = &self.api_keys {
            ways.push(format!("an API key in {}", k.describe()));
        }
        if self.mutual_tls {
            ways.push("a client certificate signed by the agent's client CA".to_owned());
        }
        unauthenticated(
            format!("missing credentials: send {}", ways.join(" or ")),
            &self.challenge(),
        )
    }

    /// The decision from the credentials alone, with whether it checked a
    /// secret the caller presented (an API key, a bearer token): only such
    /// a refusal counts against the peer ([`ThrottleConfig`]); a call
    /// without credentials, or with a header of a scheme the agent does
    /// not take, guesses nothing. Or the token, when the JWT validators
    /// must load keys first.
    ///
    /// The principal is namespaced by the scheme (see
    /// [`crate::store::Owner`]): `apikey:NAME`, `jwt:ISSUER#NAME`,
    /// `mtls:NAME`.
    fn decide(&self, call: &AuthCall<'_>) -> Result<Decided, String> {
        if let Some(keys) = &self.api_keys {
            if let Some(key) = keys.presented(call) {
                let r = keys
                    .verify(&key)
                    .map(|name| Some(format!("{API_KEY_NAMESPACE}{name}")));
                return Ok((r, Checked::Secret));
            }
        }
        let Some(value) = call.headers.get(http::header::AUTHORIZATION) else {
            if let (true, Some(principal)) = (self.mutual_tls, call.client_cert) {
                return Ok((
                    Ok(Some(format!("{MTLS_NAMESPACE}{principal}"))),
                    Checked::Nothing,
                ));
            }
            let r = if self.allow_anonymous {
                Ok(None)
            } else {
                Err(self.missing())
            };
            return Ok((r, Checked::Nothing));
        };
        if self.jwt.is_empty() {
            return Ok((
                Err(unauthenticated(
                    "this agent does not accept Authorization headers: see the security schemes of its card",
                    &self.challenge(),
                )),
                Checked::Nothing,
            ));
        }
        let Some(token) = bearer_token(value) else {
            return Ok((
                Err(unauthenticated(
                    "the Authorization header is not Bearer <token>",
                    &self.challenge(),
                )),
                Checked::Nothing,
            ));
        };
        let mut first_error = None;
        let mut later = false;
        for j in &self.jwt {
            if j.wants_refresh() {
                later = true;
                continue;
            }
            match j.verify_now(token) {
                Ok(p) => return Ok((Ok(Some(p)), Checked::Secret)),
                Err(Refusal::UnknownKey) => later = true,
                Err(Refusal::Error(e)) => {
                    first_error = Some(pick(first_error, e));
                }
            }
        }
        if later {
            return Err(token.to_owned());
        }
        Ok((
            Err(first_error.unwrap_or_else(|| self.missing())),
            Checked::Secret,
        ))
    }

    /// Counts a refused secret against the peer (a call without
    /// credentials is refused, and not counted).
    fn outcome(
        &self,
        call_peer: Option<std::net::IpAddr>,
        (r, checked): Decided,
    ) -> A2aResult<Option<String>> {
        if let (Err(e), Some(t), Some(peer)) = (&r, &self.throttle, call_peer) {
            if e.kind == ErrorKind::Unauthenticated && checked == Checked::Secret {
                t.failed(peer);
                tracing::info!(%peer, reason = %e.message, "authentication failed");
            }
        }
        r
    }

    async fn decide_later(&self, token: String) -> A2aResult<Option<String>> {
        let mut first_error = None;
        for j in &self.jwt {
            match j.verify(&token).await {
                Ok(p) => return Ok(Some(p)),
                Err(e) => first_error = Some(pick(first_error, e)),
            }
        }
        Err(first_error.unwrap_or_else(|| self.missing()))
    }
}

/// Whether a decision checked a secret the caller presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Checked {
    /// An API key or a bearer token, checked.
    Secret,
    /// None: no credentials, a certificate verified in the handshake, or
    /// a header of a scheme the agent does not take.
    Nothing,
}

/// A decision, and what it checked.
type Decided = (A2aResult<Option<String>>, Checked);

/// Of two refusals, the one that says most: a missing scope (the token is
/// good) over an invalid token.
fn pick(first: Option<A2aError>, next: A2aError) -> A2aError {
    match first {
        Some(f) if f.kind == ErrorKind::PermissionDenied => f,
        Some(_) if next.kind == ErrorKind::PermissionDenied => next,
        Some(f) => f,
        None => next,
    }
}

impl Authenticator for AuthSchemes {
    fn authenticate(&self, headers: &HeaderMap) -> A2aResult<Option<String>> {
        match self.decide(&AuthCall::from_headers(headers)) {
            Ok((r, _)) => r,
            Err(_) => Err(unauthenticated(
                "the token's signing key is not loaded yet: try again",
                &self.challenge(),
            )),
        }
    }

    fn check<'a>(&'a self, call: AuthCall<'_>) -> Verdict<'a> {
        let peer = call.peer.map(|p| p.ip());
        if let (Some(t), Some(ip)) = (&self.throttle, peer) {
            if let Some(wait) = t.blocked(ip) {
                return Verdict::Ready(Err(A2aError::new(
                    ErrorKind::Unauthenticated,
                    format!(
                        "too many failed authentication attempts from {ip}: try again in {} s",
                        wait.as_secs().max(1)
                    ),
                )
                .with_metadata(super::WWW_AUTHENTICATE, self.challenge())));
            }
        }
        match self.decide(&call) {
            Ok(r) => Verdict::Ready(self.outcome(peer, r)),
            Err(token) => Verdict::Pending(Box::pin(async move {
                let r = self.decide_later(token).await;
                self.outcome(peer, (r, Checked::Secret))
            })),
        }
    }

    fn declare(&self, card: &mut AgentCard) {
        let mut names = Vec::new();
        if let Some(k) = &self.api_keys {
            card.security_schemes.insert("apiKey".into(), k.scheme());
            names.push(("apiKey", Vec::new()));
        }
        if self.mutual_tls {
            card.security_schemes.insert(
                "mtls".into(),
                agentwire_types::SecurityScheme {
                    scheme: Some(agentwire_types::security_scheme::Scheme::MtlsSecurityScheme(
                        agentwire_types::MutualTlsSecurityScheme {
                            description: "A client certificate signed by the agent's client CA, presented in the TLS handshake".into(),
                        },
                    )),
                },
            );
            names.push(("mtls", Vec::new()));
        }
        for j in &self.jwt {
            let (name, scheme) = j.scheme();
            card.security_schemes.insert(name.into(), scheme);
            names.push((name, j.config().required_scopes.clone()));
        }
        if self.allow_anonymous {
            // No requirement: credentials are optional.
            return;
        }
        card.security_requirements = names
            .into_iter()
            .map(|(name, scopes)| SecurityRequirement {
                schemes: [(name.to_owned(), StringList { list: scopes })]
                    .into_iter()
                    .collect(),
            })
            .collect();
    }
}
