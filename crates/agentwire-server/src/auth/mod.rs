//! Caller authentication: who is calling decides which tasks they see.
//!
//! An [`Authenticator`] turns a call's credentials into the caller's
//! identity (the principal that owns the tasks the call creates, spec
//! 13.1). Besides [`NoAuth`] and the static [`BearerTokens`], the
//! schemes a deployed agent uses are configured in [`AuthSchemes`]:
//!
//! - API keys ([`ApiKeys`]): in a header, a query parameter or a cookie,
//!   read from a file or the environment, kept in memory only as SHA-256
//!   digests and compared in constant time;
//! - JWT bearer tokens ([`JwtAuth`]): signature checked against the keys of
//!   a JWKS (a file, or a URL fetched, cached and fetched again when a
//!   token names a key it does not have, at most every
//!   [`JwtConfig::refresh_interval`]), `iss`, `aud`, `exp` and `nbf` with a
//!   clock skew, algorithms allow-listed, required scopes;
//! - OpenID Connect ([`JwtAuth::oidc`]): the same, with the issuer and its
//!   JWKS taken from the issuer's discovery document;
//! - mutual TLS ([`AuthSchemes::mutual_tls`]): the client certificate
//!   verified during the TLS handshake against the CA of
//!   [`crate::TlsConfig::client_ca`], the principal its subject common
//!   name (or else its first DNS or URI subject alternative name).
//!
//! [`AuthSchemes`] also writes its schemes into the agent card
//! ([`Authenticator::declare`]: `securitySchemes` and `security`), so the
//! card says exactly what the server checks, and slows down a peer whose
//! attempts keep failing ([`ThrottleConfig`]).
//!
//! Failures are answered with the binding's error: HTTP 401 with a
//! `WWW-Authenticate` challenge, gRPC `UNAUTHENTICATED`, JSON-RPC `-31401`;
//! a token without a required scope with 403 / `PERMISSION_DENIED` /
//! `-31403`. The challenge travels in the error's metadata under
//! [`WWW_AUTHENTICATE`]. Credentials are never logged nor echoed.

mod api_key;
mod jwt;
mod schemes;
mod throttle;

use std::collections::HashMap;
use std::net::SocketAddr;

use agentwire_types::{A2aError, A2aResult, AgentCard, ErrorKind};
use futures::future::BoxFuture;
use http::HeaderMap;

pub use api_key::{ApiKeyLocation, ApiKeys};
pub use jwt::{JwksSource, JwtAuth, JwtConfig};
pub use schemes::AuthSchemes;
pub use throttle::ThrottleConfig;

/// The key, in an authentication error's metadata, of the challenge the
/// HTTP bindings send as `WWW-Authenticate` (and gRPC as the
/// `www-authenticate` metadata).
pub const WWW_AUTHENTICATE: &str = "wwwAuthenticate";

/// What an authenticator sees of a call: its service parameters (HTTP
/// headers or gRPC metadata), the query string of an HTTP request (API
/// keys may be sent there) and the peer's address, when known.
#[derive(Debug, Clone, Copy)]
pub struct AuthCall<'a> {
    /// Service parameters (names lower-case).
    pub headers: &'a HeaderMap,
    /// The query string of an HTTP request, without `?`.
    pub query: Option<&'a str>,
    /// The address the call came from.
    pub peer: Option<SocketAddr>,
    /// The principal of the connection's verified client certificate
    /// (mutual TLS; see [`crate::TlsConfig`]).
    pub client_cert: Option<&'a str>,
}

impl<'a> AuthCall<'a> {
    /// A call known by its headers alone.
    pub fn from_headers(headers: &'a HeaderMap) -> Self {
        Self {
            headers,
            query: None,
            peer: None,
            client_cert: None,
        }
    }
}

/// The caller named by a connection's verified client certificate (its
/// subject common name, or else its first DNS or URI subject alternative
/// name), set by the server's TLS accept loop on each request of the
/// connection (a request extension).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCertificate(std::sync::Arc<str>);

impl ClientCertificate {
    /// The certificate of `principal`.
    pub fn new(principal: impl Into<std::sync::Arc<str>>) -> Self {
        Self(principal.into())
    }

    /// The principal it names.
    pub fn principal(&self) -> &str {
        &self.0
    }
}

/// The outcome of [`Authenticator::check`]: known at once (most calls), or
/// after waiting (keys to fetch first).
pub enum Verdict<'a> {
    /// The caller (`None`: anonymous) or the refusal.
    Ready(A2aResult<Option<String>>),
    /// To be awaited.
    Pending(BoxFuture<'a, A2aResult<Option<String>>>),
}

impl Verdict<'_> {
    /// The outcome, awaited if need be.
    pub async fn resolve(self) -> A2aResult<Option<String>> {
        match self {
            Verdict::Ready(r) => r,
            Verdict::Pending(f) => f.await,
        }
    }
}

impl std::fmt::Debug for Verdict<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Ready(r) => f.debug_tuple("Ready").field(r).finish(),
            Verdict::Pending(_) => f.write_str("Pending"),
        }
    }
}

/// Turns a call's service parameters (headers / metadata) into the caller's
/// identity. `Ok(None)` means anonymous; an error refuses the call.
pub trait Authenticator: Send + Sync + 'static {
    /// Authenticates one call from its service parameters, without waiting
    /// for anything (an authenticator whose keys are not at hand yet
    /// refuses here, and fetches them in [`Self::check`]).
    fn authenticate(&self, headers: &HeaderMap) -> A2aResult<Option<String>>;

    /// Authenticates one call, with everything the server knows of it; the
    /// server calls this one. By default [`Self::authenticate`] on the
    /// headers.
    fn check<'a>(&'a self, call: AuthCall<'_>) -> Verdict<'a> {
        Verdict::Ready(self.authenticate(call.headers))
    }

    /// Writes the security schemes this authenticator checks into the
    /// agent card (`securitySchemes` and `security`). By default nothing:
    /// the card is left as it was given.
    fn declare(&self, card: &mut AgentCard) {
        let _ = card;
    }
}

/// Everyone is anonymous (and anonymous callers share their tasks).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoAuth;

impl Authenticator for NoAuth {
    fn authenticate(&self, _headers: &HeaderMap) -> A2aResult<Option<String>> {
        Ok(None)
    }
}

/// Static bearer tokens mapped to principals. Calls without a token are
/// refused unless `allow_anonymous` is set; unknown tokens are always
/// refused. Tokens are never logged.
#[derive(Clone, Default)]
pub struct BearerTokens {
    tokens: HashMap<String, String>,
    /// Let calls without credentials through as anonymous.
    pub allow_anonymous: bool,
}

impl std::fmt::Debug for BearerTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerTokens")
            .field("tokens", &self.tokens.len())
            .field("allow_anonymous", &self.allow_anonymous)
            .finish()
    }
}

impl BearerTokens {
    /// No tokens yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Accepts `token` as `principal`.
    pub fn with_token(mut self, token: impl Into<String>, principal: impl Into<String>) -> Self {
        self.tokens.insert(token.into(), principal.into());
        self
    }
}

impl Authenticator for BearerTokens {
    fn authenticate(&self, headers: &HeaderMap) -> A2aResult<Option<String>> {
        let Some(value) = headers.get(http::header::AUTHORIZATION) else {
            return if self.allow_anonymous {
                Ok(None)
            } else {
                Err(unauthenticated(
                    "missing credentials: send Authorization: Bearer <token>",
                    "Bearer",
                ))
            };
        };
        match bearer_token(value).and_then(|t| self.tokens.get(t)) {
            Some(p) => Ok(Some(p.clone())),
            None => Err(unauthenticated(
                "invalid bearer token",
                r#"Bearer error="invalid_token""#,
            )),
        }
    }
}

/// The token of an `Authorization: Bearer <token>` value (the scheme name
/// is case-insensitive, RFC 7235).
pub(crate) fn bearer_token(value: &http::HeaderValue) -> Option<&str> {
    let v = value.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// An `Unauthenticated` error with its challenge.
pub(crate) fn unauthenticated(message: impl Into<String>, challenge: &str) -> A2aError {
    A2aError::new(ErrorKind::Unauthenticated, message).with_metadata(WWW_AUTHENTICATE, challenge)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_refuse_unknown_and_missing_tokens_with_a_challenge() {
        let tokens = BearerTokens::new().with_token("s3cret", "alice");
        let mut h = HeaderMap::new();
        let e = tokens.authenticate(&h).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unauthenticated);
        assert_eq!(e.metadata[WWW_AUTHENTICATE], "Bearer");
        h.insert(
            http::header::AUTHORIZATION,
            "bearer s3cret".parse().unwrap(),
        );
        assert_eq!(tokens.authenticate(&h).unwrap().as_deref(), Some("alice"));
        h.insert(http::header::AUTHORIZATION, "Bearer nope".parse().unwrap());
        let e = tokens.authenticate(&h).unwrap_err();
        assert!(!e.message.contains("nope"));
    }
}
