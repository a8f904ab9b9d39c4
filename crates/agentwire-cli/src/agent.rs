//! From the global options to a connected agent: card resolution,
//! transport and version negotiation (CLI SPEC 13), credentials (12.1),
//! service parameters, and the `--debug` wire log with credentials redacted.

use std::sync::Arc;
use std::time::Instant;

use agentwire_client::card::{CacheMode, CardOrigin, CardResolver, ResolvedCard};
use agentwire_client::tls::TlsOptions;
use agentwire_client::{
    Binding, CallOptions, Client, ClientResult, Credentials, EventStream, Transport,
    select_interfaces_with,
};
use agentwire_types::{
    AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
};
use futures::StreamExt;
use serde::Serialize;

use crate::Globals;
use crate::error::{CliError, ErrorContext};

/// Service parameters whose values are never secret.
const PUBLIC_PARAMS: &[&str] = &["a2a-version", "a2a-extensions"];

/// What every command needs from the options, before any network call.
#[derive(Debug, Clone)]
pub struct Settings {
    pub reference: Option<String>,
    pub credentials: Credentials,
    pub service_params: Vec<(String, String)>,
    pub bindings: Vec<Binding>,
    /// The version signalled on every call (`--a2a-version`, else 1.0).
    pub version: String,
    /// The caller chose the version (`--a2a-version` from a flag, the
    /// environment or a file, or `--svc-param A2A-Version:...`): it is
    /// signalled on every call as it is, never negotiated up (see
    /// [`Agent::stream_generations`]).
    pub version_pinned: bool,
    /// `--allow-v03`: an agent speaking only A2A 0.3 is called through 0.3.
    pub allow_v03: bool,
    pub debug: bool,
    pub insecure: bool,
    /// `--cacert`, `--cert`/`--key`: TLS with the agent, on every binding.
    pub tls: TlsOptions,
    /// `--no-cache`: the card is fetched afresh, not read from the cache.
    pub no_cache: bool,
    /// `--registry`: resolves `-a registry:NAME`.
    pub registry: Option<String>,
    /// The token stored by `a2a auth login` for the agent: sent on every
    /// call, refreshed when it expires or the agent refuses it.
    pub stored_token: Option<Arc<agentwire_client::oauth::RefreshingToken>>,
    /// `--max-response-bytes`: the most bytes of one answer, stream event
    /// or gRPC message.
    pub max_response_bytes: usize,
    /// `--max-card-bytes`: the most bytes of an agent card.
    pub max_card_bytes: usize,
}

impl Settings {
    pub fn from_globals(g: &Globals) -> Result<Self, CliError> {
        let mut service_params = Vec::new();
        for p in &g.svc_param {
            let Some((k, v)) = p.split_once(':') else {
                return Err(CliError::usage(format!(
                    "--svc-param {p:?}: expected KEY:VALUE (e.g. x-trace-id:abc123)"
                )));
            };
            let k = k.trim();
            if k.is_empty() {
                return Err(CliError::usage(format!("--svc-param {p:?}: empty key")));
            }
            service_params.push((k.to_owned(), v.trim().to_owned()));
        }
        let mut bindings = Vec::new();
        for t in &g.transport {
            let b = Binding::parse(t).ok_or_else(|| {
                CliError::usage(format!(
                    "--transport {t:?}: unknown binding (use JSONRPC, HTTP+JSON or GRPC)"
                ))
            })?;
            if !bindings.contains(&b) {
                bindings.push(b);
            }
        }
        let version_pinned = g.a2a_version.is_some()
            || service_params
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("a2a-version"));
        let version = g
            .a2a_version
            .as_deref()
            .unwrap_or(agentwire_types::PROTOCOL_VERSION)
            .trim()
            .to_owned();
        let major = version.split('.').next().unwrap_or_default();
        if major != "1" {
            return Err(CliError::usage(format!(
                "--a2a-version {version}: this tool speaks A2A 1.x only (never below 1.0)"
            ))
            .with_hint("omit --a2a-version to use 1.0"));
        }
        let mut credentials = Credentials::new();
        credentials.bearer = g.bearer.clone().filter(|s| !s.is_empty());
        credentials.api_key = g.api_key.clone().filter(|s| !s.is_empty());
        let tls = tls_options(g)?;
        Ok(Self {
            reference: g.agent_card.clone().filter(|s| !s.trim().is_empty()),
            credentials,
            service_params,
            bindings,
            version,
            version_pinned,
            allow_v03: g.allow_v03,
            debug: g.debug,
            insecure: g.insecure,
            tls,
            no_cache: g.no_cache,
            registry: g.registry.clone(),
            stored_token: None,
            max_response_bytes: g
                .max_response_bytes
                .unwrap_or(agentwire_client::DEFAULT_MAX_RESPONSE_BYTES),
            max_card_bytes: g
                .max_card_bytes
                .unwrap_or(agentwire_client::card::DEFAULT_MAX_CARD_BYTES),
        })
    }

    /// Whether the caller supplied any credential.
    pub fn credentials_given(&self) -> bool {
        !self.credentials.is_empty()
            || self.tls.has_identity()
            || self.service_params.iter().any(|(k, _)| {
                k.eq_ignore_ascii_case("authorization") || k.eq_ignore_ascii_case("x-api-key")
            })
    }

    pub fn reference(&self) -> Result<&str, CliError> {
        self.reference.as_deref().ok_or_else(|| {
            CliError::usage("no agent given")
                .with_hint("pass --agent-card <host:port | URL | file | registry:NAME> (or set A2ACLI_AGENT_CARD)")
        })
    }

    pub fn http_client(&self) -> Result<reqwest::Client, CliError> {
        if self.insecure {
            eprintln!(
                "warning: --insecure: TLS certificates are NOT verified; use this only for development"
            );
            if self.credentials_given() {
                eprintln!(
                    "warning: credentials will be sent over a connection whose certificate is not verified"
                );
            }
        }
        agentwire_client::install_crypto_provider();
        let builder = agentwire_client::http_client_builder()
            .user_agent(concat!("agentwire-cli/", env!("CARGO_PKG_VERSION")))
            .danger_accept_invalid_certs(self.insecure);
        self.tls
            .configure_reqwest(builder)
            .map_err(|e| CliError::usage(e.to_string()))?
            .build()
            .map_err(|e| {
                let mut why = e.to_string();
                let mut cur = std::error::Error::source(&e);
                while let Some(c) = cur {
                    why = format!("{why}: {c}");
                    cur = c.source();
                }
                if self.tls.has_identity() {
                    // rustls refuses the certificate or key while setting up.
                    CliError::usage(format!("--cert/--key: the client certificate is not usable: {why}"))
                        .with_hint("give --cert an X.509 v3 certificate (PEM) and --key its own private key (PEM)")
                } else {
                    CliError::internal(format!("cannot build the HTTP client: {why}"))
                }
            })
    }

    pub fn resolver(&self, http: reqwest::Client) -> CardResolver {
        let mut r = CardResolver::new()
            .with_http_client(http)
            .with_max_card_bytes(self.max_card_bytes);
        if let Some(dir) = crate::config::cache_dir() {
            r = r.with_cache_dir(dir);
        }
        if self.no_cache {
            r = r.with_cache_mode(CacheMode::Reload);
        }
        r
    }

    pub fn error_context(&self, card: Option<&AgentCard>) -> ErrorContext {
        ErrorContext {
            credentials_given: self.credentials_given(),
            client_certificate: self.tls.has_identity(),
            auth_hint: card.and_then(auth_hint),
            ..Default::default()
        }
    }

    /// Resolves the card of `--agent-card`.
    pub async fn resolve_card(&self, http: &reqwest::Client) -> Result<ResolvedCard, CliError> {
        let mode = if self.no_cache {
            CacheMode::Reload
        } else {
            CacheMode::Default
        };
        self.resolve_card_with(http, mode).await
    }

    /// Before refusing an operation because the card lacks it (`has` is
    /// false): a card taken from the cache without asking the agent may be
    /// stale (another agent may have taken the address), so it is
    /// revalidated first (a conditional request; the agent's current card
    /// comes back if it changed). Cards fetched, revalidated or read from a
    /// file are returned as they are.
    pub async fn confirm_card(
        &self,
        http: &reqwest::Client,
        resolved: ResolvedCard,
        has: impl Fn(&AgentCard) -> bool,
    ) -> Result<ResolvedCard, CliError> {
        if has(&resolved.card) || resolved.origin != CardOrigin::Cached {
            return Ok(resolved);
        }
        tracing::debug!("the cached agent card lacks what is asked; revalidating it");
        self.resolve_card_with(http, CacheMode::Revalidate).await
    }

    async fn resolve_card_with(
        &self,
        http: &reqwest::Client,
        mode: CacheMode,
    ) -> Result<ResolvedCard, CliError> {
        let reference = self.reference()?;
        let started = Instant::now();
        // `registry:NAME`: the registry names the agent's card first.
        let resolved = if let Some(name) =
            reference.strip_prefix(agentwire_client::registry::REFERENCE_PREFIX)
        {
            let resolver = self.resolver(http.clone()).with_cache_mode(mode);
            crate::registry::resolve_reference(
                self.registry.as_deref(),
                name,
                http.clone(),
                resolver,
            )
            .await?
        } else {
            match self
                .resolver(http.clone())
                .resolve_with(reference, mode)
                .await
            {
                Ok(r) => r,
                Err(e) => {
                    // A TLS connection ended without saying why: find out.
                    let url = agentwire_client::card::agent_card_url(reference).unwrap_or_default();
                    let e = agentwire_client::tls::diagnose(e, &url, Some(&self.tls)).await;
                    let ctx = ErrorContext {
                        resolving_card: true,
                        client_certificate: self.tls.has_identity(),
                        ..Default::default()
                    };
                    return Err(CliError::from_client(&e, &ctx));
                }
            }
        };
        if self.debug {
            let how = match resolved.origin {
                CardOrigin::Fetched => "fetched",
                CardOrigin::Cached => "from the cache (fresh)",
                CardOrigin::Revalidated => "revalidated (304 Not Modified)",
                CardOrigin::File => "read from a file",
                CardOrigin::Extended => "extended card",
            };
            tracing::debug!(
                "agent card {} {how} in {:?}",
                resolved.location,
                started.elapsed()
            );
        }
        Ok(resolved)
    }
}

/// The TLS settings of `--cacert` and `--cert`/`--key`: the files read and
/// checked now, so that a wrong path is a usage error before any call.
pub(crate) fn tls_options(g: &Globals) -> Result<TlsOptions, CliError> {
    // `--insecure` on every binding (gRPC's channel included).
    let mut tls = TlsOptions::new().danger_accept_invalid_certs(g.insecure);
    if let Some(ca) = &g.cacert {
        tls = tls
            .ca_file(ca)
            .map_err(|e| tls_usage("--cacert", &e).with_hint(
                "give --cacert a PEM file with the certificate of the authority that signed the agent's certificate (or the agent's own self-signed certificate)",
            ))?;
    }
    match (&g.cert, &g.key) {
        (Some(cert), Some(key)) => {
            tls = tls.identity_files(cert, key).map_err(|e| {
                tls_usage("--cert/--key", &e).with_hint(
                    "give --cert the client certificate (PEM) and --key its private key (PEM)",
                )
            })?;
        }
        (None, None) => {}
        _ => {
            return Err(CliError::usage("--cert and --key go together").with_hint(
                "give --cert the client certificate (PEM) and --key its private key (PEM)",
            ));
        }
    }
    Ok(tls)
}

fn tls_usage(option: &str, e: &agentwire_client::ClientError) -> CliError {
    let text = match e {
        agentwire_client::ClientError::InvalidRequest(m) => m.clone(),
        other => other.to_string(),
    };
    CliError::usage(format!("{option}: {text}"))
}

/// A hint naming what the card's security schemes ask for.
pub fn auth_hint(card: &AgentCard) -> Option<String> {
    let schemes = agentwire_client::auth::describe_schemes(card);
    if schemes.is_empty() {
        return None;
    }
    let mut flags = Vec::new();
    if agentwire_client::auth::accepts_bearer(card) {
        flags.push("--bearer <token> (or A2ACLI_BEARER)");
    }
    if agentwire_client::auth::accepts_api_key(card) {
        flags.push("--api-key <key> (or A2ACLI_API_KEY)");
    }
    let mtls = card.security_schemes.values().any(|s| {
        matches!(
            s.scheme,
            Some(agentwire_types::security_scheme::Scheme::MtlsSecurityScheme(_))
        )
    });
    if mtls {
        flags.push("--cert <file> --key <file> (a client certificate)");
    }
    let how = if flags.is_empty() {
        "a credential this tool cannot obtain yet".to_owned()
    } else {
        flags.join(" or ")
    };
    Some(format!(
        "the agent declares {}: pass {how}",
        schemes.join("; ")
    ))
}

/// A connected agent.
pub struct Agent {
    pub card: AgentCard,
    pub client: Logged,
    pub settings: Settings,
    /// How the card was obtained (a card from the cache is revalidated
    /// before an operation is refused on its word: [`Agent::confirm`]).
    pub origin: CardOrigin,
    http: reqwest::Client,
}

impl Agent {
    /// Resolves the card and negotiates the interface.
    pub async fn connect(g: &Globals) -> Result<Self, CliError> {
        let settings = Settings::from_globals(g)?;
        let http = settings.http_client()?;
        let mut settings = settings;
        let resolved = settings.resolve_card(&http).await?;
        // A token stored by `a2a auth login` for this agent, when no
        // credential was given (refreshed first when it has expired).
        if settings.credentials.is_empty()
            && let Some((t, source)) = crate::auth_cmd::stored_token(&http, &resolved.card).await?
        {
            settings.credentials.bearer = Some(t);
            settings.stored_token = Some(source);
        }
        let mut agent = Self::with_card(settings, http, resolved.card)?;
        agent.origin = resolved.origin;
        Ok(agent)
    }

    /// Whether the agent supports what `has` checks on its card, with the
    /// card made sure of first when it says no: a card from the cache is
    /// revalidated (see [`Settings::confirm_card`]), and when the agent's
    /// card changed, the connection is set up again with the new one. Call
    /// it before refusing an operation the card does not declare.
    pub async fn confirm(&mut self, has: impl Fn(&AgentCard) -> bool) -> Result<bool, CliError> {
        if has(&self.card) || self.origin != CardOrigin::Cached {
            return Ok(has(&self.card));
        }
        let resolved = ResolvedCard {
            card: self.card.clone(),
            location: String::new(),
            origin: self.origin,
        };
        let current = self
            .settings
            .confirm_card(&self.http, resolved, &has)
            .await?;
        if current.card != self.card {
            let mut agent =
                Self::with_card(self.settings.clone(), self.http.clone(), current.card)?;
            agent.origin = current.origin;
            *self = agent;
        } else {
            self.origin = current.origin;
        }
        Ok(has(&self.card))
    }

    pub fn with_card(
        settings: Settings,
        http: reqwest::Client,
        card: AgentCard,
    ) -> Result<Self, CliError> {
        Self::with_card_tapped(settings, http, card, None)
    }

    /// [`Agent::with_card`], the client's exchanges told to `tap` (the
    /// inspector's wire view).
    pub fn with_card_tapped(
        settings: Settings,
        http: reqwest::Client,
        card: AgentCard,
        tap: Option<agentwire_client::tap::Tap>,
    ) -> Result<Self, CliError> {
        let ctx = settings.error_context(Some(&card));
        // The caller's order first; when the card offers none of those
        // bindings, the card's own order (CLI SPEC 13.1).
        let (bindings, prefer) = if settings.bindings.is_empty() {
            (Binding::ALL.to_vec(), false)
        } else if select_interfaces_with(&card, &settings.bindings, true, settings.allow_v03)
            .is_ok()
        {
            (settings.bindings.clone(), true)
        } else {
            eprintln!(
                "warning: the agent offers none of the requested transports ({}); using the card's order",
                settings
                    .bindings
                    .iter()
                    .map(|b| b.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            (Binding::ALL.to_vec(), false)
        };
        let mut options = CallOptions::new();
        // One A2A-Version on the wire: a `--svc-param A2A-Version:...`
        // replaces the version's own parameter instead of joining it.
        if !settings
            .service_params
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("A2A-Version"))
        {
            options
                .service_params
                .push(("A2A-Version".into(), settings.version.clone()));
        }
        options
            .service_params
            .extend(settings.service_params.iter().cloned());
        let mut builder = Client::builder();
        if let Some(tap) = tap {
            builder = builder.tap(tap);
        }
        if let Some(source) = &settings.stored_token {
            builder = builder.token_source(source.clone());
        }
        let client = builder
            .bindings(bindings)
            .prefer_binding_order(prefer)
            .allow_v03(settings.allow_v03)
            .max_response_bytes(settings.max_response_bytes)
            .max_card_bytes(settings.max_card_bytes)
            .http_client(http.clone())
            .tls(settings.tls.clone())
            .credentials(settings.credentials.clone())
            .options(options)
            .build(card.clone())
            .map_err(|e| CliError::from_client(&e, &ctx))?;
        if settings.debug {
            for (i, (b, iface)) in client.interfaces().iter().enumerate() {
                tracing::debug!(
                    "interface {}: {b} {} (protocolVersion {}{}){}",
                    i + 1,
                    iface.url,
                    iface.protocol_version,
                    if iface.tenant.is_empty() {
                        String::new()
                    } else {
                        format!(", tenant {}", iface.tenant)
                    },
                    if i == 0 { " <- selected" } else { "" }
                );
            }
            tracing::debug!("A2A-Version: {}", settings.version);
        }
        let secrets: Vec<String> = {
            let placed = settings.credentials.placement(Some(&card));
            placed
                .headers
                .iter()
                .chain(placed.query.iter())
                .map(|(_, v)| v.clone())
                .chain(settings.service_params.iter().map(|(_, v)| v.clone()))
                .filter(|v| !v.is_empty())
                .collect()
        };
        Ok(Self {
            card,
            client: Logged {
                inner: client,
                debug: settings.debug,
                secrets: Arc::new(secrets),
            },
            settings,
            // The caller's card: taken as current.
            origin: CardOrigin::Fetched,
            http,
        })
    }

    pub fn error_context(&self) -> ErrorContext {
        self.settings.error_context(Some(&self.card))
    }

    /// Maps a client error with this agent's context.
    pub fn err(&self, e: &agentwire_client::ClientError) -> CliError {
        CliError::from_client(e, &self.error_context())
    }

    /// Maps a client error about a task.
    pub fn task_err(&self, e: &agentwire_client::ClientError, task_id: &str) -> CliError {
        let mut ctx = self.error_context();
        ctx.task_id = Some(task_id.to_owned());
        CliError::from_client(e, &ctx)
    }

    /// The `--agent-card` value, for resume hints.
    pub fn reference(&self) -> &str {
        self.settings.reference.as_deref().unwrap_or("<agent>")
    }

    /// Whether the streams of a task (`send --stream`, the stream `send`
    /// waits on, `task subscribe`) use task generations (A2A v1.1 draft,
    /// see docs/generation.md), and how they are opened.
    ///
    /// - `--a2a-version` given (or `--svc-param A2A-Version:...`): that
    ///   version on every call, as today; generations when it is 1.1.
    /// - Otherwise (CLI SPEC 13.2, the highest version both sides declare):
    ///   the opening call of a stream asks for 1.1 when the agent's card
    ///   declares 1.1 for the interface in use (same binding, URL and
    ///   tenant), and so do the calls `follow` makes for it. Every other
    ///   call stays 1.0, and an agent whose card declares only 1.0 sees
    ///   exactly the calls it saw before.
    pub fn stream_version(&self) -> StreamVersion {
        if self.settings.version_pinned {
            // The version on the wire: a `--svc-param A2A-Version` wins.
            let signalled = self
                .settings
                .service_params
                .iter()
                .rev()
                .find(|(k, _)| k.eq_ignore_ascii_case("a2a-version"))
                .map_or(self.settings.version.as_str(), |(_, v)| v.as_str());
            return if major_minor(signalled) == GENERATION_VERSION {
                StreamVersion::Pinned
            } else {
                StreamVersion::Off
            };
        }
        match self.client.inner.interface() {
            Some(active) if declares_generations(&self.card, active) => StreamVersion::Declared,
            _ => StreamVersion::Off,
        }
    }
}

/// The version of the calls that use task generations.
const GENERATION_VERSION: &str = agentwire_client::generation::GENERATION_VERSION;

/// How the streams of a task are opened ([`Agent::stream_version`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamVersion {
    /// A2A 1.0 (or the version pinned by the caller), no generations.
    Off,
    /// The card declares 1.1: the stream calls ask for it.
    Declared,
    /// The caller pinned 1.1 for every call.
    Pinned,
}

impl StreamVersion {
    /// Whether generations are asked for and checked.
    pub fn generations(self) -> bool {
        self != Self::Off
    }

    /// The options of a call that opens a stream: `call` with
    /// `A2A-Version: 1.1` when the card declared it (a pinned version is
    /// already on every call).
    pub fn call(self, call: &CallOptions) -> CallOptions {
        let mut c = call.clone();
        if self == Self::Declared {
            c.service_params
                .retain(|(k, _)| !k.eq_ignore_ascii_case("a2a-version"));
            c.service_params
                .push(("A2A-Version".into(), GENERATION_VERSION.into()));
        }
        c
    }
}

/// `Major.Minor` of a version (`1.1.0` -> `1.1`; patch versions do not
/// count in negotiation, A2A 3.6).
fn major_minor(v: &str) -> String {
    v.trim().split('.').take(2).collect::<Vec<_>>().join(".")
}

/// Whether the card declares A2A 1.1 for the interface in use: an
/// interface with the same binding, URL and tenant and protocolVersion 1.1
/// (A2A 3.6: an agent lists one interface per version it serves).
fn declares_generations(card: &AgentCard, active: &agentwire_types::AgentInterface) -> bool {
    let url = |u: &str| u.trim().trim_end_matches('/').to_owned();
    card.supported_interfaces.iter().any(|i| {
        major_minor(&i.protocol_version) == GENERATION_VERSION
            && Binding::parse(&i.protocol_binding).is_some()
            && Binding::parse(&i.protocol_binding) == Binding::parse(&active.protocol_binding)
            && url(&i.url) == url(&active.url)
            && i.tenant == active.tenant
    })
}

/// The client, logging every exchange under `--debug` (service parameter
/// values and credentials redacted).
#[derive(Clone)]
pub struct Logged {
    pub inner: Client,
    debug: bool,
    secrets: Arc<Vec<String>>,
}

impl Logged {
    /// The request as the client will send it: with the selected
    /// interface's tenant (CLI SPEC 13.1), so the log shows the wire.
    fn with_tenant<R>(&self, mut request: R, field: impl FnOnce(&mut R) -> &mut String) -> R {
        if let Some(i) = self.inner.interface() {
            i.tenant.clone_into(field(&mut request));
        }
        request
    }

    fn redact(&self, text: String) -> String {
        let mut out = text;
        for s in self.secrets.iter() {
            if s.len() >= 2 {
                out = out.replace(s.as_str(), "<redacted>");
            }
        }
        out
    }

    fn log_request<R: Serialize>(&self, op: &str, req: &R, options: &CallOptions) {
        if !self.debug {
            return;
        }
        let iface = self
            .inner
            .interface()
            .map(|i| format!("{} {}", i.protocol_binding, i.url))
            .unwrap_or_default();
        let params: Vec<String> = self
            .inner
            .options()
            .merged(options)
            .service_params
            .iter()
            .map(|(k, v)| {
                if PUBLIC_PARAMS.contains(&k.to_ascii_lowercase().as_str()) {
                    format!("{k}: {v}")
                } else {
                    format!("{k}: <redacted>")
                }
            })
            .collect();
        let body = serde_json::to_string(req).unwrap_or_default();
        tracing::debug!(
            "--> {op} via {iface} [{}] {}",
            params.join(", "),
            self.redact(body)
        );
    }

    fn log_response<R: Serialize>(&self, op: &str, started: Instant, res: &ClientResult<R>) {
        if !self.debug {
            return;
        }
        match res {
            Ok(r) => tracing::debug!(
                "<-- {op} {:?} {}",
                started.elapsed(),
                self.redact(serde_json::to_string(r).unwrap_or_default())
            ),
            Err(e) => tracing::debug!("<-- {op} {:?} error: {e:?}", started.elapsed()),
        }
    }

    fn log_stream(
        &self,
        op: &'static str,
        started: Instant,
        s: ClientResult<EventStream>,
    ) -> ClientResult<EventStream> {
        if !self.debug {
            return s;
        }
        match s {
            Ok(stream) => {
                tracing::debug!("<-- {op} stream open after {:?}", started.elapsed());
                let me = self.clone();
                Ok(stream.wrap(|s| {
                    s.inspect(move |ev| match ev {
                        Ok(e) => tracing::debug!(
                            "<-- {op} event {}",
                            me.redact(serde_json::to_string(e).unwrap_or_default())
                        ),
                        Err(e) => tracing::debug!("<-- {op} stream error: {e:?}"),
                    })
                }))
            }
            Err(e) => {
                tracing::debug!("<-- {op} {:?} error: {e:?}", started.elapsed());
                Err(e)
            }
        }
    }
}

#[async_trait::async_trait]
impl Transport for Logged {
    async fn send_message(
        &self,
        request: SendMessageRequest,
        options: &CallOptions,
    ) -> ClientResult<SendMessageResponse> {
        self.log_request("SendMessage", &request, options);
        let started = Instant::now();
        let res = Transport::send_message(&self.inner, request, options).await;
        self.log_response("SendMessage", started, &res);
        res
    }

    async fn get_task(&self, request: GetTaskRequest, options: &CallOptions) -> ClientResult<Task> {
        let request = self.with_tenant(request, |r| &mut r.tenant);
        self.log_request("GetTask", &request, options);
        let started = Instant::now();
        let res = Transport::get_task(&self.inner, request, options).await;
        self.log_response("GetTask", started, &res);
        res
    }

    async fn list_tasks(
        &self,
        request: ListTasksRequest,
        options: &CallOptions,
    ) -> ClientResult<ListTasksResponse> {
        self.log_request("ListTasks", &request, options);
        let started = Instant::now();
        let res = Transport::list_tasks(&self.inner, request, options).await;
        self.log_response("ListTasks", started, &res);
        res
    }

    async fn cancel_task(
        &self,
        request: CancelTaskRequest,
        options: &CallOptions,
    ) -> ClientResult<Task> {
        self.log_request("CancelTask", &request, options);
        let started = Instant::now();
        let res = Transport::cancel_task(&self.inner, request, options).await;
        self.log_response("CancelTask", started, &res);
        res
    }

    async fn create_task_push_notification_config(
        &self,
        request: TaskPushNotificationConfig,
        options: &CallOptions,
    ) -> ClientResult<TaskPushNotificationConfig> {
        self.log_request("CreateTaskPushNotificationConfig", &request, options);
        let started = Instant::now();
        let res =
            Transport::create_task_push_notification_config(&self.inner, request, options).await;
        self.log_response("CreateTaskPushNotificationConfig", started, &res);
        res
    }

    async fn get_task_push_notification_config(
        &self,
        request: GetTaskPushNotificationConfigRequest,
        options: &CallOptions,
    ) -> ClientResult<TaskPushNotificationConfig> {
        self.log_request("GetTaskPushNotificationConfig", &request, options);
        let started = Instant::now();
        let res = Transport::get_task_push_notification_config(&self.inner, request, options).await;
        self.log_response("GetTaskPushNotificationConfig", started, &res);
        res
    }

    async fn list_task_push_notification_configs(
        &self,
        request: ListTaskPushNotificationConfigsRequest,
        options: &CallOptions,
    ) -> ClientResult<ListTaskPushNotificationConfigsResponse> {
        self.log_request("ListTaskPushNotificationConfigs", &request, options);
        let started = Instant::now();
        let res =
            Transport::list_task_push_notification_configs(&self.inner, request, options).await;
        self.log_response("ListTaskPushNotificationConfigs", started, &res);
        res
    }

    async fn get_extended_agent_card(
        &self,
        request: GetExtendedAgentCardRequest,
        options: &CallOptions,
    ) -> ClientResult<AgentCard> {
        self.log_request("GetExtendedAgentCard", &request, options);
        let started = Instant::now();
        let res = Transport::get_extended_agent_card(&self.inner, request, options).await;
        self.log_response("GetExtendedAgentCard", started, &res);
        res
    }

    async fn delete_task_push_notification_config(
        &self,
        request: DeleteTaskPushNotificationConfigRequest,
        options: &CallOptions,
    ) -> ClientResult<()> {
        let request = self.with_tenant(request, |r| &mut r.tenant);
        self.log_request("DeleteTaskPushNotificationConfig", &request, options);
        let started = Instant::now();
        let res =
            Transport::delete_task_push_notification_config(&self.inner, request, options).await;
        self.log_response(
            "DeleteTaskPushNotificationConfig",
            started,
            &res.as_ref()
                .map(|()| serde_json::json!({}))
                .map_err(clone_err),
        );
        res
    }

    async fn send_streaming_message(
        &self,
        request: SendMessageRequest,
        options: &CallOptions,
    ) -> ClientResult<EventStream> {
        let request = self.with_tenant(request, |r| &mut r.tenant);
        self.log_request("SendStreamingMessage", &request, options);
        let started = Instant::now();
        let s = Transport::send_streaming_message(&self.inner, request, options).await;
        self.log_stream("SendStreamingMessage", started, s)
    }

    async fn subscribe_to_task(
        &self,
        request: SubscribeToTaskRequest,
        options: &CallOptions,
    ) -> ClientResult<EventStream> {
        let request = self.with_tenant(request, |r| &mut r.tenant);
        self.log_request("SubscribeToTask", &request, options);
        let started = Instant::now();
        let s = Transport::subscribe_to_task(&self.inner, request, options).await;
        self.log_stream("SubscribeToTask", started, s)
    }
}

fn clone_err(e: &agentwire_client::ClientError) -> agentwire_client::ClientError {
    agentwire_client::ClientError::InvalidResponse(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_types::AgentInterface;

    fn iface(binding: &str, url: &str, version: &str) -> AgentInterface {
        AgentInterface {
            url: url.into(),
            protocol_binding: binding.into(),
            tenant: String::new(),
            protocol_version: version.into(),
        }
    }

    fn card(ifaces: Vec<AgentInterface>) -> AgentCard {
        let mut c = AgentCard::new("a", "b", "1");
        c.supported_interfaces = ifaces;
        c
    }

    #[test]
    fn generations_only_where_the_card_declares_1_1_for_the_interface_in_use() {
        let active = iface("JSONRPC", "http://h/a2a", "1.0");
        // 1.0 only: nothing changes.
        assert!(!declares_generations(&card(vec![active.clone()]), &active));
        // A 1.1 twin of the interface (trailing slash and patch ignored).
        let c = card(vec![
            active.clone(),
            iface("JSONRPC", "http://h/a2a/", "1.1.0"),
        ]);
        assert!(declares_generations(&c, &active));
        // 1.1 on another binding or URL says nothing about this one.
        let c = card(vec![
            active.clone(),
            iface("GRPC", "http://h/a2a", "1.1"),
            iface("JSONRPC", "http://other/a2a", "1.1"),
        ]);
        assert!(!declares_generations(&c, &active));
        // Another tenant neither.
        let mut t = iface("JSONRPC", "http://h/a2a", "1.1");
        t.tenant = "x".into();
        assert!(!declares_generations(
            &card(vec![active.clone(), t]),
            &active
        ));
    }

    #[test]
    fn a_declared_version_asks_for_1_1_on_the_stream_call_only() {
        let base = CallOptions::new().with_service_param("X-Trace", "1");
        let c = StreamVersion::Declared.call(&base);
        assert!(
            c.service_params
                .iter()
                .any(|(k, v)| k == "A2A-Version" && v == "1.1")
        );
        assert!(c.service_params.iter().any(|(k, _)| k == "X-Trace"));
        assert_eq!(
            StreamVersion::Off.call(&base).service_params,
            base.service_params
        );
        assert_eq!(
            StreamVersion::Pinned.call(&base).service_params,
            base.service_params
        );
        assert!(!StreamVersion::Off.generations());
        assert!(StreamVersion::Pinned.generations());
    }
}
