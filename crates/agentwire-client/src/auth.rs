//! Interceptors and credentials.
//!
//! An [`Interceptor`] sees the [`CallOptions`] of every call a
//! [`crate::Client`] makes, after the client's defaults were merged, and may
//! change them: add a header (a service parameter, sent as gRPC metadata on
//! gRPC), an extension (`A2A-Extensions`), a timeout, or refuse the call.
//!
//! [`Credentials`] are the caller's secrets (a bearer token, an API key);
//! [`Credentials::placement`] reads the agent card's security schemes to put
//! each one where the agent expects it: `Authorization: Bearer ...`, an API
//! key in the header, query parameter or cookie the card names (spec 4.5).
//! [`crate::ClientBuilder::credentials`] wires them into a client.
//!
//! ```
//! use agentwire_client::auth::{Credentials, Placement};
//! use agentwire_types::{AgentCard, ApiKeySecurityScheme, SecurityScheme, security_scheme};
//!
//! let mut card = AgentCard::new("Weather", "Forecasts", "1.0.0");
//! card.security_schemes.insert(
//!     "key".into(),
//!     SecurityScheme {
//!         scheme: Some(security_scheme::Scheme::ApiKeySecurityScheme(ApiKeySecurityScheme {
//!             location: "query".into(),
//!             name: "api_key".into(),
//!             ..Default::default()
//!         })),
//!     },
//! );
//! let placed = Credentials::new().with_api_key("k-123").placement(Some(&card));
//! assert_eq!(placed.query, vec![("api_key".to_string(), "k-123".to_string())]);
//! assert_eq!(placed.api_key_at, Some(Placement::Query("api_key".into())));
//! ```

use std::fmt;

use agentwire_types::{AgentCard, SecurityScheme, security_scheme};

use crate::error::ClientResult;
use crate::transport::CallOptions;

/// The A2A operation a call performs (spec 3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Operation {
    /// `SendMessage`.
    SendMessage,
    /// `SendStreamingMessage`.
    SendStreamingMessage,
    /// `GetTask`.
    GetTask,
    /// `ListTasks`.
    ListTasks,
    /// `CancelTask`.
    CancelTask,
    /// `SubscribeToTask`.
    SubscribeToTask,
    /// `CreateTaskPushNotificationConfig`.
    CreateTaskPushNotificationConfig,
    /// `GetTaskPushNotificationConfig`.
    GetTaskPushNotificationConfig,
    /// `ListTaskPushNotificationConfigs`.
    ListTaskPushNotificationConfigs,
    /// `DeleteTaskPushNotificationConfig`.
    DeleteTaskPushNotificationConfig,
    /// `GetExtendedAgentCard`.
    GetExtendedAgentCard,
}

impl Operation {
    /// The operation's name, as used for the JSON-RPC method.
    pub fn name(self) -> &'static str {
        match self {
            Operation::SendMessage => "SendMessage",
            Operation::SendStreamingMessage => "SendStreamingMessage",
            Operation::GetTask => "GetTask",
            Operation::ListTasks => "ListTasks",
            Operation::CancelTask => "CancelTask",
            Operation::SubscribeToTask => "SubscribeToTask",
            Operation::CreateTaskPushNotificationConfig => "CreateTaskPushNotificationConfig",
            Operation::GetTaskPushNotificationConfig => "GetTaskPushNotificationConfig",
            Operation::ListTaskPushNotificationConfigs => "ListTaskPushNotificationConfigs",
            Operation::DeleteTaskPushNotificationConfig => "DeleteTaskPushNotificationConfig",
            Operation::GetExtendedAgentCard => "GetExtendedAgentCard",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Sees and may change the options of every call of a [`crate::Client`].
///
/// ```
/// use agentwire_client::auth::{Interceptor, Operation};
/// use agentwire_client::{CallOptions, ClientResult};
///
/// /// Adds a trace id to every call.
/// #[derive(Debug)]
/// struct Trace;
/// impl Interceptor for Trace {
///     fn intercept(&self, _op: Operation, options: &mut CallOptions) -> ClientResult<()> {
///         options.service_params.push(("X-Trace-Id".into(), agentwire_types::new_id()));
///         Ok(())
///     }
/// }
/// ```
pub trait Interceptor: Send + Sync + fmt::Debug {
    /// Called before each attempt of `operation`; an error refuses the call.
    fn intercept(&self, operation: Operation, options: &mut CallOptions) -> ClientResult<()>;
}

/// Supplies the bearer token of every call of a [`crate::Client`] and, when
/// the agent refuses one as unauthenticated (HTTP 401, gRPC
/// `UNAUTHENTICATED`, the JSON-RPC mapping of either), a fresh one.
///
/// The client asks [`TokenSource::token`] before each call and sends the
/// answer as `Authorization: Bearer ...` (replacing any other). When the
/// agent refuses it, the client calls [`TokenSource::refresh`] once and, given
/// a different token, retries the call once; a second refusal is the
/// call's error. The retry lives in the client, above the transports, so
/// JSON-RPC, HTTP+JSON and gRPC behave the same (see
/// [`crate::oauth::RefreshingToken`] for OAuth tokens with a refresh token).
#[async_trait::async_trait]
pub trait TokenSource: Send + Sync + fmt::Debug {
    /// The token for the next call (`None`: this source sends none). May
    /// refresh a token it knows has expired.
    async fn token(&self) -> ClientResult<Option<String>>;

    /// The agent refused `rejected`: a new token to retry the call with, or
    /// `None` to give up (the call then fails with the agent's refusal).
    async fn refresh(&self, rejected: &str) -> ClientResult<Option<String>>;

    /// Why the last refresh failed, if it did (no secret in it): the
    /// client adds it to the agent's refusal of the call, so the caller
    /// learns that the token could not be renewed and why.
    fn refresh_failure(&self) -> Option<String> {
        None
    }
}

/// The agent's refusal `e`, with why the token could not be renewed.
pub(crate) fn with_refresh_failure(e: crate::ClientError, failure: &str) -> crate::ClientError {
    match e {
        crate::ClientError::A2a(mut a) => {
            a.message = format!("{}; {failure}", a.message);
            crate::ClientError::A2a(a)
        }
        crate::ClientError::Http { status, body } => crate::ClientError::Http {
            status,
            body: format!("{body}; {failure}"),
        },
        other => other,
    }
}

/// Puts `Authorization: Bearer <token>` in the options, replacing any
/// other `Authorization`.
pub(crate) fn set_bearer(options: &mut CallOptions, token: &str) {
    options
        .service_params
        .retain(|(n, _)| !n.eq_ignore_ascii_case("authorization"));
    options
        .service_params
        .push(("Authorization".into(), format!("Bearer {token}")));
}

/// Where a credential travels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// An HTTP header (gRPC metadata on gRPC) of this name.
    Header(String),
    /// A query parameter of this name (gRPC metadata on gRPC).
    Query(String),
    /// A cookie of this name.
    Cookie(String),
}

/// The header an API key goes in when the card declares no API key scheme.
pub const DEFAULT_API_KEY_HEADER: &str = "X-API-Key";

/// The caller's credentials. Never printed: `Debug` redacts them.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// A bearer token (`Authorization: Bearer <token>`).
    pub bearer: Option<String>,
    /// An API key, placed per the card's API key security scheme.
    pub api_key: Option<String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("bearer", &self.bearer.as_ref().map(|_| "<redacted>"))
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// The credentials of [`Credentials::placement`], placed for one card.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct PlacedCredentials {
    /// Headers (service parameters): `Authorization`, an API key header, a
    /// `Cookie`.
    pub headers: Vec<(String, String)>,
    /// Query parameters of the HTTP bindings (gRPC metadata on gRPC).
    pub query: Vec<(String, String)>,
    /// Where the API key went, if one was given.
    pub api_key_at: Option<Placement>,
}

impl fmt::Debug for PlacedCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names =
            |v: &Vec<(String, String)>| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        f.debug_struct("PlacedCredentials")
            .field("headers", &names(&self.headers))
            .field("query", &names(&self.query))
            .field("api_key_at", &self.api_key_at)
            .finish()
    }
}

impl PlacedCredentials {
    /// Whether no credential is placed.
    pub fn is_empty(&self) -> bool {
        self.headers.is_empty() && self.query.is_empty()
    }
}

impl Credentials {
    /// No credentials.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the bearer token.
    pub fn with_bearer(mut self, token: impl Into<String>) -> Self {
        self.bearer = Some(token.into());
        self
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Whether no credential is set.
    pub fn is_empty(&self) -> bool {
        self.bearer.is_none() && self.api_key.is_none()
    }

    /// Puts each credential where `card` says (spec 4.5, 7.3): the bearer
    /// token in `Authorization`, the API key in the header, query parameter
    /// or cookie of the card's API key scheme (the first one its security
    /// requirements name, else the first declared), or in
    /// [`DEFAULT_API_KEY_HEADER`] when the card declares none.
    pub fn placement(&self, card: Option<&AgentCard>) -> PlacedCredentials {
        let mut out = PlacedCredentials::default();
        if let Some(token) = &self.bearer {
            out.headers
                .push(("Authorization".into(), format!("Bearer {token}")));
        }
        if let Some(key) = &self.api_key {
            let at = card
                .and_then(api_key_scheme)
                .unwrap_or_else(|| Placement::Header(DEFAULT_API_KEY_HEADER.into()));
            match &at {
                Placement::Header(name) => out.headers.push((name.clone(), key.clone())),
                Placement::Query(name) => out.query.push((name.clone(), key.clone())),
                Placement::Cookie(name) => {
                    out.headers.push(("Cookie".into(), format!("{name}={key}")))
                }
            }
            out.api_key_at = Some(at);
        }
        out
    }
}

/// The security schemes of `card` in the order its requirements name them,
/// then the rest by name.
fn schemes_in_order(card: &AgentCard) -> Vec<(&str, &SecurityScheme)> {
    let mut names: Vec<&str> = Vec::new();
    for req in &card.security_requirements {
        let mut keys: Vec<&String> = req.schemes.keys().collect();
        keys.sort();
        for k in keys {
            if !names.contains(&k.as_str()) {
                names.push(k);
            }
        }
    }
    let mut rest: Vec<&String> = card.security_schemes.keys().collect();
    rest.sort();
    for k in rest {
        if !names.contains(&k.as_str()) {
            names.push(k);
        }
    }
    names
        .into_iter()
        .filter_map(|n| card.security_schemes.get(n).map(|s| (n, s)))
        .collect()
}

/// Where the card wants an API key, if it declares an API key scheme.
pub fn api_key_scheme(card: &AgentCard) -> Option<Placement> {
    schemes_in_order(card)
        .into_iter()
        .find_map(|(_, s)| match &s.scheme {
            Some(security_scheme::Scheme::ApiKeySecurityScheme(k)) if !k.name.is_empty() => {
                Some(match k.location.to_ascii_lowercase().as_str() {
                    "query" => Placement::Query(k.name.clone()),
                    "cookie" => Placement::Cookie(k.name.clone()),
                    _ => Placement::Header(k.name.clone()),
                })
            }
            _ => None,
        })
}

/// Whether the card declares a scheme that takes a bearer token: HTTP
/// `Bearer` auth, OAuth 2 or OpenID Connect.
pub fn accepts_bearer(card: &AgentCard) -> bool {
    card.security_schemes.values().any(|s| match &s.scheme {
        Some(security_scheme::Scheme::HttpAuthSecurityScheme(h)) => {
            h.scheme.eq_ignore_ascii_case("bearer")
        }
        Some(security_scheme::Scheme::Oauth2SecurityScheme(_))
        | Some(security_scheme::Scheme::OpenIdConnectSecurityScheme(_)) => true,
        _ => false,
    })
}

/// Whether the card declares an API key scheme.
pub fn accepts_api_key(card: &AgentCard) -> bool {
    api_key_scheme(card).is_some()
}

/// Whether the card requires credentials (it lists security requirements).
pub fn requires_credentials(card: &AgentCard) -> bool {
    card.security_requirements
        .iter()
        .any(|r| !r.schemes.is_empty())
}

/// Only the credentials `card` declares a scheme for (spec 12.4: the
/// extended card is fetched with a scheme of the public card; nothing is
/// presented to an agent that did not ask for it).
pub fn accepted_by(card: &AgentCard, credentials: &Credentials) -> Credentials {
    Credentials {
        bearer: credentials.bearer.clone().filter(|_| accepts_bearer(card)),
        api_key: credentials
            .api_key
            .clone()
            .filter(|_| accepts_api_key(card)),
    }
}

/// One human-readable line per security scheme of the card: its name, kind
/// and where the credential goes.
pub fn describe_schemes(card: &AgentCard) -> Vec<String> {
    schemes_in_order(card)
        .into_iter()
        .map(|(name, s)| {
            let what = match &s.scheme {
                Some(security_scheme::Scheme::ApiKeySecurityScheme(k)) => {
                    format!("API key in {} {:?}", k.location, k.name)
                }
                Some(security_scheme::Scheme::HttpAuthSecurityScheme(h)) => {
                    format!("HTTP {} auth", h.scheme)
                }
                Some(security_scheme::Scheme::Oauth2SecurityScheme(_)) => "OAuth 2.0".into(),
                Some(security_scheme::Scheme::OpenIdConnectSecurityScheme(o)) => {
                    format!("OpenID Connect ({})", o.open_id_connect_url)
                }
                Some(security_scheme::Scheme::MtlsSecurityScheme(_)) => "mutual TLS".into(),
                None => "unknown scheme".into(),
            };
            format!("{name}: {what}")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_types::{
        ApiKeySecurityScheme, HttpAuthSecurityScheme, SecurityRequirement, StringList,
    };

    fn api_key(location: &str, name: &str) -> SecurityScheme {
        SecurityScheme {
            scheme: Some(security_scheme::Scheme::ApiKeySecurityScheme(
                ApiKeySecurityScheme {
                    location: location.into(),
                    name: name.into(),
                    ..Default::default()
                },
            )),
        }
    }

    #[test]
    fn bearer_and_default_api_key_header() {
        let p = Credentials::new()
            .with_bearer("t")
            .with_api_key("k")
            .placement(None);
        assert_eq!(
            p.headers,
            vec![
                ("Authorization".to_string(), "Bearer t".to_string()),
                ("X-API-Key".to_string(), "k".to_string())
            ]
        );
        assert!(p.query.is_empty());
    }

    #[test]
    fn api_key_follows_the_required_scheme() {
        let mut card = AgentCard::new("a", "b", "1");
        card.security_schemes
            .insert("a_header".into(), api_key("header", "X-Key"));
        card.security_schemes
            .insert("b_cookie".into(), api_key("cookie", "session"));
        // No requirement: first by name.
        let p = Credentials::new().with_api_key("k").placement(Some(&card));
        assert_eq!(p.headers, vec![("X-Key".to_string(), "k".to_string())]);
        // The requirement names the cookie one.
        card.security_requirements.push(SecurityRequirement {
            schemes: [("b_cookie".to_string(), StringList::default())].into(),
        });
        let p = Credentials::new().with_api_key("k").placement(Some(&card));
        assert_eq!(
            p.headers,
            vec![("Cookie".to_string(), "session=k".to_string())]
        );
        assert!(requires_credentials(&card));
        assert!(accepts_api_key(&card));
        assert!(!accepts_bearer(&card));
    }

    #[test]
    fn only_declared_credentials_are_accepted() {
        let mut card = AgentCard::new("a", "b", "1");
        let creds = Credentials::new().with_bearer("t").with_api_key("k");
        assert!(accepted_by(&card, &creds).is_empty());
        card.security_schemes.insert(
            "bearer".into(),
            SecurityScheme {
                scheme: Some(security_scheme::Scheme::HttpAuthSecurityScheme(
                    HttpAuthSecurityScheme {
                        scheme: "Bearer".into(),
                        ..Default::default()
                    },
                )),
            },
        );
        let accepted = accepted_by(&card, &creds);
        assert_eq!(accepted.bearer.as_deref(), Some("t"));
        assert_eq!(accepted.api_key, None);
        assert_eq!(describe_schemes(&card), ["bearer: HTTP Bearer auth"]);
    }

    #[test]
    fn debug_never_shows_secrets() {
        let c = Credentials::new().with_bearer("sekrit").with_api_key("k3y");
        let d = format!("{c:?} {:?}", c.placement(None));
        assert!(!d.contains("sekrit") && !d.contains("k3y"), "{d}");
    }
}
