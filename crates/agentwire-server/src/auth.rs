//! Caller authentication: who is calling decides which tasks they see.

use std::collections::HashMap;

use agentwire_types::{A2aError, A2aResult, ErrorKind};
use http::HeaderMap;

/// Turns a call's service parameters (headers / metadata) into the caller's
/// identity. `Ok(None)` means anonymous; an error refuses the call.
pub trait Authenticator: Send + Sync + 'static {
    /// Authenticates one call.
    fn authenticate(&self, headers: &HeaderMap) -> A2aResult<Option<String>>;
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
                Err(A2aError::new(
                    ErrorKind::Unauthenticated,
                    "missing credentials: send Authorization: Bearer <token>",
                ))
            };
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim);
        match token.and_then(|t| self.tokens.get(t)) {
            Some(p) => Ok(Some(p.clone())),
            None => Err(A2aError::new(
                ErrorKind::Unauthenticated,
                "invalid bearer token",
            )),
        }
    }
}
