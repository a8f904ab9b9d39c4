//! API keys (spec 4.5.2): a key in a header, a query parameter or a
//! cookie, mapped to the principal it belongs to.
//!
//! Keys are kept only as SHA-256 digests; the digest of a presented key is
//! compared with every stored one in constant time (`subtle`), so neither
//! the keys nor the timing of a refusal say anything about them.

use std::path::Path;

use agentwire_types::{A2aResult, ApiKeySecurityScheme, SecurityScheme, security_scheme};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{AuthCall, unauthenticated};

/// Where the key is sent (the scheme's `location`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiKeyLocation {
    /// In a header (HTTP) or metadata entry (gRPC) of this name.
    Header(String),
    /// In a query parameter of this name (HTTP bindings only).
    Query(String),
    /// In a cookie of this name (HTTP bindings only).
    Cookie(String),
}

impl ApiKeyLocation {
    /// The default: the `X-API-Key` header.
    pub fn default_header() -> Self {
        Self::Header("X-API-Key".into())
    }

    /// Parses `header:NAME`, `query:NAME` or `cookie:NAME` (a bare `NAME`
    /// is a header).
    pub fn parse(s: &str) -> Result<Self, String> {
        let (kind, name) = s.split_once(':').unwrap_or(("header", s));
        let name = name.trim();
        if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == ';' || c == '=') {
            return Err(format!(
                "{s:?} is not a place for an API key: expected header:NAME, query:NAME or cookie:NAME"
            ));
        }
        match kind.trim().to_ascii_lowercase().as_str() {
            "header" => http::HeaderName::from_bytes(name.as_bytes())
                .map(|_| Self::Header(name.to_owned()))
                .map_err(|_| format!("{name:?} is not a valid header name")),
            "query" => Ok(Self::Query(name.to_owned())),
            "cookie" => Ok(Self::Cookie(name.to_owned())),
            other => Err(format!(
                "unknown API key location {other:?}: expected header, query or cookie"
            )),
        }
    }

    fn parts(&self) -> (&'static str, &str) {
        match self {
            Self::Header(n) => ("header", n),
            Self::Query(n) => ("query", n),
            Self::Cookie(n) => ("cookie", n),
        }
    }
}

/// API keys mapped to principals.
#[derive(Clone)]
pub struct ApiKeys {
    location: ApiKeyLocation,
    /// (SHA-256 of the key, principal).
    keys: Vec<([u8; 32], String)>,
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKeys")
            .field("location", &self.location)
            .field("keys", &self.keys.len())
            .finish()
    }
}

/// The shortest key accepted.
const MIN_KEY_CHARS: usize = 8;

impl ApiKeys {
    /// No keys yet, expected at `location`.
    pub fn new(location: ApiKeyLocation) -> Self {
        Self {
            location,
            keys: Vec::new(),
        }
    }

    /// Accepts `key` as `principal`.
    pub fn with_key(mut self, key: &str, principal: impl Into<String>) -> Self {
        self.keys.push((digest(key), principal.into()));
        self
    }

    /// Where the key is expected.
    pub fn location(&self) -> &ApiKeyLocation {
        &self.location
    }

    /// How many keys there are.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Adds the keys of `text`: one `PRINCIPAL:KEY` a line (or several on a
    /// line, separated by commas, the form of an environment variable);
    /// blank lines and lines starting with `#` are ignored. Errors name the
    /// line, never the key.
    pub fn parse(mut self, text: &str) -> Result<Self, String> {
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            for pair in line.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let bad = || format!("line {}: expected PRINCIPAL:KEY", i + 1);
                let (who, key) = pair.split_once(':').ok_or_else(bad)?;
                let (who, key) = (who.trim(), key.trim());
                if who.is_empty() || key.is_empty() || key.contains(char::is_whitespace) {
                    return Err(bad());
                }
                if key.chars().count() < MIN_KEY_CHARS {
                    return Err(format!(
                        "line {}: the key of {who} is shorter than {MIN_KEY_CHARS} characters",
                        i + 1
                    ));
                }
                self = self.with_key(key, who);
            }
        }
        Ok(self)
    }

    /// Adds the keys of a file (see [`Self::parse`]).
    pub fn from_file(self, path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the API key file {}: {e}", path.display()))?;
        let keys = self
            .parse(&text)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if keys.is_empty() {
            return Err(format!("{}: no API key in the file", path.display()));
        }
        Ok(keys)
    }

    /// The key the call presents, if any.
    pub(crate) fn presented(&self, call: &AuthCall<'_>) -> Option<String> {
        match &self.location {
            ApiKeyLocation::Header(name) => call
                .headers
                .get(name.as_str())
                .and_then(|v| v.to_str().ok())
                .map(|v| v.trim().to_owned()),
            ApiKeyLocation::Query(name) => call
                .query
                .and_then(|q| crate::bindings::http::query_value(q, name)),
            ApiKeyLocation::Cookie(name) => call
                .headers
                .get_all(http::header::COOKIE)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(';'))
                .filter_map(|c| c.trim().split_once('='))
                .find(|(k, _)| k.trim() == name)
                .map(|(_, v)| v.trim().to_owned()),
        }
        .filter(|k| !k.is_empty())
    }

    /// The principal of a presented key, or the refusal.
    pub(crate) fn verify(&self, key: &str) -> A2aResult<String> {
        let d = digest(key);
        // Every stored digest is compared, whatever matched before.
        let mut found: Option<&String> = None;
        for (stored, who) in &self.keys {
            if bool::from(stored.ct_eq(&d)) {
                found = Some(who);
            }
        }
        found.cloned().ok_or_else(|| {
            unauthenticated(
                format!("invalid API key (in {})", self.describe()),
                &self.challenge(),
            )
        })
    }

    /// `header X-API-Key`, for messages.
    pub(crate) fn describe(&self) -> String {
        let (kind, name) = self.location.parts();
        format!("{kind} {name}")
    }

    /// The challenge of this scheme (API keys have no registered HTTP
    /// authentication scheme; this names where the key goes).
    pub(crate) fn challenge(&self) -> String {
        let (kind, name) = self.location.parts();
        format!(r#"ApiKey in="{kind}", name="{name}""#)
    }

    /// The card's description of this scheme.
    pub(crate) fn scheme(&self) -> SecurityScheme {
        let (kind, name) = self.location.parts();
        SecurityScheme {
            scheme: Some(security_scheme::Scheme::ApiKeySecurityScheme(
                ApiKeySecurityScheme {
                    description: "An API key the agent's operator gave you".into(),
                    location: kind.into(),
                    name: name.into(),
                },
            )),
        }
    }
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;

    #[test]
    fn keys_from_text_in_each_location() {
        let text = "# keys\nalice:alice-key-123\n\nbob:bob-key-4567, carol:carol-key-89\n";
        let keys = ApiKeys::new(ApiKeyLocation::default_header())
            .parse(text)
            .unwrap();
        assert_eq!(keys.len(), 3);
        assert_eq!(keys.verify("bob-key-4567").unwrap(), "bob");
        let e = keys.verify("nope-nope-nope").unwrap_err();
        assert!(!e.message.contains("nope"), "{}", e.message);
        assert!(
            ApiKeys::new(ApiKeyLocation::default_header())
                .parse("alice")
                .is_err()
        );
        let short = ApiKeys::new(ApiKeyLocation::default_header())
            .parse("alice:short")
            .unwrap_err();
        assert!(!short.contains("short:"), "{short}");

        let mut h = HeaderMap::new();
        h.insert("x-api-key", "alice-key-123".parse().unwrap());
        h.insert("cookie", "a=b; k=carol-key-89".parse().unwrap());
        let call = AuthCall {
            headers: &h,
            query: Some("x=1&key=bob-key-4567"),
            peer: None,
            client_cert: None,
        };
        assert_eq!(keys.presented(&call).as_deref(), Some("alice-key-123"));
        let q = ApiKeys::new(ApiKeyLocation::parse("query:key").unwrap());
        assert_eq!(q.presented(&call).as_deref(), Some("bob-key-4567"));
        let c = ApiKeys::new(ApiKeyLocation::parse("cookie:k").unwrap());
        assert_eq!(c.presented(&call).as_deref(), Some("carol-key-89"));
        assert!(ApiKeyLocation::parse("body:x").is_err());
        assert!(ApiKeyLocation::parse("header:").is_err());
    }
}
