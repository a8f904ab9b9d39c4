//! The [`Client`] facade: picks an interface of the agent card (spec 8.3),
//! sets its `tenant` on every request, falls back to the next interface when
//! one cannot be reached, and offers short methods for common calls.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use agentwire_types::{
    AgentCard, AgentInterface, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, Message, Role, SendMessageRequest, SendMessageResponse,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
};
use futures::future::BoxFuture;

use crate::auth::{Credentials, Interceptor, Operation, TokenSource, set_bearer};
use crate::card::{DEFAULT_MAX_CARD_BYTES, fetch_agent_card_max};
use crate::error::{ClientError, ClientResult};
#[cfg(feature = "grpc")]
use crate::grpc::GrpcTransport;
use crate::http::{DEFAULT_MAX_RESPONSE_BYTES, default_http_client};
use crate::jsonrpc::JsonRpcTransport;
use crate::rest::RestTransport;
use crate::tap::Tap;
use crate::transport::{Binding, CallOptions, EventStream, TenantField, Transport};
use crate::v0_3::{V03JsonRpcTransport, V03RestTransport, is_v03};

/// Why a `GRPC` interface is not used by a build without gRPC.
const GRPC_MISSING: &str = "gRPC is not compiled in: enable the `grpc` feature of agentwire-client";

/// Whether an interface's `protocolVersion` is a 1.x version.
fn is_v1(version: &str) -> bool {
    version.trim().split('.').next() == Some("1")
}

/// The interfaces of `card` this client may use, best first.
///
/// Only interfaces whose binding is in `bindings` and whose
/// `protocolVersion` has major version 1 are kept. By default the card's
/// order decides (spec 8.3.2: the agent lists its interfaces in preference
/// order); with `prefer_binding_order` the order of `bindings` decides, and
/// the card's order only among interfaces of the same binding.
///
/// A card without `supportedInterfaces` (an A2A 0.x card, which has a
/// top-level `url` instead) or without any usable interface gives
/// [`ClientError::NoCompatibleInterface`]: the client never downgrades to 0.x.
///
/// ```
/// use agentwire_client::{Binding, select_interfaces};
/// use agentwire_types::AgentCard;
/// let card = AgentCard::new("Echo", "Echoes", "1.0.0")
///     .with_interface("127.0.0.1:50051", "GRPC")
///     .with_interface("http://127.0.0.1:8080/", "JSONRPC");
/// let picked = select_interfaces(&card, &Binding::ALL, false).unwrap();
/// assert_eq!(picked[0].0, Binding::Grpc); // the card's first choice
/// let picked = select_interfaces(&card, &Binding::ALL, true).unwrap();
/// assert_eq!(picked[0].0, Binding::JsonRpc); // the caller's first choice
/// ```
pub fn select_interfaces(
    card: &AgentCard,
    bindings: &[Binding],
    prefer_binding_order: bool,
) -> ClientResult<Vec<(Binding, AgentInterface)>> {
    select_interfaces_with(card, bindings, prefer_binding_order, false)
}

/// The text telling a user how to let the client use a 0.3 agent.
pub const ALLOW_V03_HINT: &str = "pass --allow-v03 to the a2a command (or set allow_v03 = true \
     in its config file; in the library, ClientBuilder::allow_v03(true)) to call it through \
     the 0.3 protocol";

/// [`select_interfaces`], and with `allow_v03` the interfaces of protocol
/// version 0.3 (a 0.3 card's top-level `url` is read as one) when the card
/// offers no usable 1.0 interface: a 1.0-capable agent is never
/// downgraded. 0.3 is spoken over JSON-RPC, HTTP+JSON and gRPC.
pub fn select_interfaces_with(
    card: &AgentCard,
    bindings: &[Binding],
    prefer_binding_order: bool,
    allow_v03: bool,
) -> ClientResult<Vec<(Binding, AgentInterface)>> {
    if card.supported_interfaces.is_empty() {
        return Err(ClientError::NoCompatibleInterface(
            "the agent card declares no supportedInterfaces and no top-level \"url\"".into(),
        ));
    }
    let pick =
        |keep: &dyn Fn(&AgentInterface, Binding) -> bool| -> Vec<(Binding, &AgentInterface)> {
            card.supported_interfaces
                .iter()
                .filter_map(|i| {
                    Binding::parse(&i.protocol_binding)
                        .filter(|b| bindings.contains(b) && b.is_available() && keep(i, *b))
                        .map(|b| (b, i))
                })
                .collect()
        };
    let mut usable = pick(&|i, _| is_v1(&i.protocol_version));
    if usable.is_empty() {
        let v03 = pick(&|i, _| is_v03(&i.protocol_version));
        if !v03.is_empty() {
            if !allow_v03 {
                return Err(ClientError::NoCompatibleInterface(format!(
                    "the agent speaks only A2A {} ({} at {}); {ALLOW_V03_HINT}",
                    v03[0].1.protocol_version, v03[0].1.protocol_binding, v03[0].1.url
                )));
            }
            usable = v03;
        }
    }
    let ordered: Vec<(Binding, AgentInterface)> = if prefer_binding_order {
        let mut seen = Vec::new();
        bindings
            .iter()
            .filter(|b| {
                let first = !seen.contains(*b);
                seen.push(**b);
                first
            })
            .flat_map(|b| usable.iter().filter(move |(ub, _)| ub == b))
            .map(|(b, i)| (*b, (*i).clone()))
            .collect()
    } else {
        usable.iter().map(|(b, i)| (*b, (*i).clone())).collect()
    };
    if ordered.is_empty() {
        let offered: Vec<String> = card
            .supported_interfaces
            .iter()
            .map(|i| {
                let version = if i.protocol_version.is_empty() {
                    "(no protocolVersion)"
                } else {
                    &i.protocol_version
                };
                format!("{} {version} at {}", i.protocol_binding, i.url)
            })
            .collect();
        let accepted: Vec<&str> = bindings
            .iter()
            .filter(|b| b.is_available())
            .map(|b| b.as_str())
            .collect();
        let missing = if bindings.iter().any(|b| !b.is_available()) {
            format!(" ({GRPC_MISSING})")
        } else {
            String::new()
        };
        return Err(ClientError::NoCompatibleInterface(format!(
            "none of the card's interfaces is usable: it offers {}; this client accepts {} \
             with protocol version 1.x (and 0.3 when allowed){missing}",
            offered.join(", "),
            accepted.join(", ")
        )));
    }
    Ok(ordered)
}

/// One interface the client may use, with its transport made on first use.
struct Candidate {
    binding: Option<Binding>,
    interface: Option<AgentInterface>,
    transport: OnceLock<Arc<dyn Transport>>,
}

impl Candidate {
    fn transport(
        &self,
        http: &reqwest::Client,
        query: &[(String, String)],
        tap: Option<&Tap>,
        tls: Option<&crate::tls::TlsOptions>,
        max: usize,
    ) -> ClientResult<Arc<dyn Transport>> {
        if let Some(t) = self.transport.get() {
            return Ok(t.clone());
        }
        let (Some(binding), Some(iface)) = (self.binding, &self.interface) else {
            return Err(ClientError::InvalidRequest(
                "candidate without transport".into(),
            ));
        };
        let v03 = is_v03(&iface.protocol_version);
        let t: Arc<dyn Transport> = match binding {
            Binding::JsonRpc if v03 => Arc::new(
                V03JsonRpcTransport::new(iface.url.clone())?
                    .with_http_client(http.clone())
                    .with_query_params(query.iter().cloned())
                    .with_max_response_bytes(max)
                    .tapped(tap),
            ),
            Binding::HttpJson if v03 => Arc::new(
                V03RestTransport::new(iface.url.clone())?
                    .with_http_client(http.clone())
                    .with_query_params(query.iter().cloned())
                    .with_max_response_bytes(max)
                    .tapped(tap),
            ),
            Binding::JsonRpc => Arc::new(
                JsonRpcTransport::new(iface.url.clone())?
                    .with_http_client(http.clone())
                    .with_query_params(query.iter().cloned())
                    .with_max_response_bytes(max)
                    .tapped(tap),
            ),
            Binding::HttpJson => Arc::new(
                RestTransport::new(iface.url.clone())?
                    .with_http_client(http.clone())
                    .with_query_params(query.iter().cloned())
                    .with_max_response_bytes(max)
                    .tapped(tap),
            ),
            #[cfg(feature = "grpc")]
            Binding::Grpc if v03 => Arc::new(
                match tls {
                    Some(tls) => crate::v0_3::V03GrpcTransport::with_tls(iface.url.clone(), tls)?,
                    None => crate::v0_3::V03GrpcTransport::new(iface.url.clone())?,
                }
                .with_max_response_bytes(max)
                .tapped(tap),
            ),
            #[cfg(feature = "grpc")]
            Binding::Grpc => Arc::new(
                match tls {
                    Some(tls) => GrpcTransport::with_tls(iface.url.clone(), tls)?,
                    None => GrpcTransport::new(iface.url.clone())?,
                }
                .with_max_response_bytes(max)
                .tapped(tap),
            ),
            #[cfg(not(feature = "grpc"))]
            Binding::Grpc => {
                // The TLS settings and the limit are the gRPC channel's.
                let _ = (tls, max);
                return Err(ClientError::NoCompatibleInterface(GRPC_MISSING.into()));
            }
        };
        Ok(self.transport.get_or_init(|| t).clone())
    }

    fn describe(&self) -> String {
        match (&self.binding, &self.interface) {
            (Some(b), Some(i)) => format!("{b} {}", i.url),
            _ => "transport".into(),
        }
    }
}

struct Shared {
    card: Option<AgentCard>,
    candidates: Vec<Candidate>,
    active: AtomicUsize,
    http: reqwest::Client,
    /// Query parameters of the HTTP bindings (credentials the card wants in
    /// the query); gRPC gets them as metadata.
    query: Vec<(String, String)>,
    interceptors: Vec<Arc<dyn Interceptor>>,
    /// The wire tap of the transports, if any.
    tap: Option<Tap>,
    /// The bearer token of every call, refreshed once on a refusal.
    token_source: Option<Arc<dyn TokenSource>>,
    /// The TLS settings of the gRPC channels (the HTTP client has its own).
    tls: Option<crate::tls::TlsOptions>,
    /// The most bytes of one answer, stream event or gRPC message.
    max_response_bytes: usize,
}

/// An A2A client: one agent, the best interface its card offers, and the
/// eleven operations plus short forms of the common ones.
///
/// Cheap to clone (clones share the connections and the chosen interface).
/// The client implements [`Transport`]: the full operations take a request
/// and [`CallOptions`] (merged over the client's default options). Where a
/// short form has the same name (`get_task`, `list_tasks`, `cancel_task`),
/// call the full operation as `Transport::get_task(&client, request, &opts)`.
///
/// ```no_run
/// # async fn demo() -> Result<(), agentwire_client::ClientError> {
/// use agentwire_client::Client;
/// use agentwire_types::Message;
/// use futures::StreamExt;
///
/// let client = Client::connect("http://127.0.0.1:8080").await?;
/// let answer = client.send_text("hello").await?;
/// if let Some(task) = answer.task() {
///     println!("task {} is {:?}", task.id, task.state());
/// }
///
/// let mut events = client.stream(Message::user_text("stream please")).await?;
/// while let Some(event) = events.next().await {
///     println!("{:?}", event?.payload);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
    options: CallOptions,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("agent", &self.shared.card.as_ref().map(|c| &c.name))
            .field(
                "interfaces",
                &self
                    .shared
                    .candidates
                    .iter()
                    .map(Candidate::describe)
                    .collect::<Vec<_>>(),
            )
            .field("active", &self.shared.active.load(Ordering::Relaxed))
            .field("options", &self.options)
            .finish()
    }
}

/// Builds a [`Client`] from an agent card, choosing how to negotiate.
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    bindings: Vec<Binding>,
    prefer_binding_order: bool,
    http: Option<reqwest::Client>,
    options: CallOptions,
    credentials: Credentials,
    interceptors: Vec<Arc<dyn Interceptor>>,
    token_source: Option<Arc<dyn TokenSource>>,
    allow_v03: bool,
    tap: Option<Tap>,
    tls: Option<crate::tls::TlsOptions>,
    max_response_bytes: usize,
    max_card_bytes: usize,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        Self {
            bindings: Binding::ALL.to_vec(),
            prefer_binding_order: false,
            http: None,
            options: CallOptions::default(),
            credentials: Credentials::default(),
            interceptors: Vec::new(),
            token_source: None,
            allow_v03: false,
            tap: None,
            tls: None,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_card_bytes: DEFAULT_MAX_CARD_BYTES,
        }
    }
}

impl ClientBuilder {
    /// Accepts all three bindings, in the card's order.
    pub fn new() -> Self {
        Self::default()
    }

    /// The bindings the client accepts (default: JSON-RPC, HTTP+JSON, gRPC).
    pub fn bindings(mut self, bindings: impl IntoIterator<Item = Binding>) -> Self {
        self.bindings = bindings.into_iter().collect();
        self
    }

    /// When `true`, the order of [`ClientBuilder::bindings`] wins over the
    /// card's order (default `false`: the agent's preference wins).
    pub fn prefer_binding_order(mut self, yes: bool) -> Self {
        self.prefer_binding_order = yes;
        self
    }

    /// The HTTP client of the JSON-RPC and HTTP+JSON transports and of the
    /// card fetch (default: a shared client with a 10 s connect timeout).
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    /// Options applied to every call (e.g. an `Authorization` parameter).
    pub fn options(mut self, options: CallOptions) -> Self {
        self.options = options;
        self
    }

    /// Credentials placed per the card's security schemes (see
    /// [`Credentials::placement`]): headers join the default options, an
    /// API key the card wants in the query goes in the query string of the
    /// HTTP bindings (and in gRPC metadata).
    pub fn credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = credentials;
        self
    }

    /// Adds an interceptor, called (in the order added) before every call.
    pub fn interceptor(mut self, interceptor: Arc<dyn Interceptor>) -> Self {
        self.interceptors.push(interceptor);
        self
    }

    /// The bearer token of every call comes from `source`, and a call the
    /// agent refuses as unauthenticated is retried once with the token
    /// [`TokenSource::refresh`] gives (on every binding).
    pub fn token_source(mut self, source: Arc<dyn TokenSource>) -> Self {
        self.token_source = Some(source);
        self
    }

    /// When `true`, an agent that speaks only A2A 0.3 (a 0.3 card) is
    /// called through the 0.3 JSON-RPC or HTTP+JSON forms, its answers
    /// converted into the 1.0 model (default `false`: such a card is
    /// refused with [`ClientError::NoCompatibleInterface`]). A card with a
    /// usable 1.0 interface is always used through 1.0.
    pub fn allow_v03(mut self, yes: bool) -> Self {
        self.allow_v03 = yes;
        self
    }

    /// Tells `tap` what the transports send and receive, exchange by
    /// exchange (see [`crate::tap`]). The client adds to what it redacts
    /// the headers and query parameters its credentials go in and the API
    /// key names of the card's security schemes. The 0.3 compatibility
    /// transports are not tapped.
    pub fn tap(mut self, tap: Tap) -> Self {
        self.tap = Some(tap);
        self
    }

    /// TLS settings: the certificate authorities to trust for the agent's
    /// certificate and a client certificate for mutual TLS (see
    /// [`crate::tls::TlsOptions`]), on every binding: the gRPC channels, and
    /// the HTTP client of JSON-RPC, HTTP+JSON and card fetches unless one
    /// is given with [`ClientBuilder::http_client`] (configure that one
    /// with [`crate::tls::TlsOptions::configure_reqwest`]).
    pub fn tls(mut self, tls: crate::tls::TlsOptions) -> Self {
        self.tls = (!tls.is_empty()).then_some(tls);
        self
    }

    /// The most bytes accepted in one answer of the agent (default
    /// [`DEFAULT_MAX_RESPONSE_BYTES`], 64 MiB), on every binding: a whole
    /// unary answer (JSON-RPC, HTTP+JSON), one event of a stream (the
    /// longest SSE event or line) and one gRPC message. Reading stops as
    /// soon as an answer passes it (a `Content-Length` above it is refused
    /// before reading) and the call fails with
    /// [`ClientError::ResponseTooLarge`]; a stream ends with that error.
    pub fn max_response_bytes(mut self, max: usize) -> Self {
        self.max_response_bytes = max;
        self
    }

    /// The largest agent card [`ClientBuilder::connect`] accepts (default
    /// [`DEFAULT_MAX_CARD_BYTES`], 1 MiB); see
    /// [`crate::card::CardResolver::with_max_card_bytes`].
    pub fn max_card_bytes(mut self, max: usize) -> Self {
        self.max_card_bytes = max;
        self
    }

    /// The HTTP client: the one given, else one with the TLS settings,
    /// else the shared default.
    fn http_or_default(&self) -> ClientResult<reqwest::Client> {
        match (&self.http, &self.tls) {
            (Some(h), _) => Ok(h.clone()),
            (None, Some(tls)) => tls.http_client(),
            (None, None) => Ok(default_http_client()),
        }
    }

    /// A client for the agent this card describes.
    pub fn build(mut self, card: AgentCard) -> ClientResult<Client> {
        let picked = select_interfaces_with(
            &card,
            &self.bindings,
            self.prefer_binding_order,
            self.allow_v03,
        )?;
        let placed = self.credentials.placement(Some(&card));
        let tap = self.tap.take().map(|tap| redacting(tap, &card, &placed));
        if !placed.headers.is_empty() {
            self.options = self.options.merged(&CallOptions {
                service_params: placed.headers,
                ..Default::default()
            });
        }
        let candidates = picked
            .into_iter()
            .map(|(binding, interface)| Candidate {
                binding: Some(binding),
                interface: Some(interface),
                transport: OnceLock::new(),
            })
            .collect();
        Ok(Client {
            shared: Arc::new(Shared {
                card: Some(card),
                candidates,
                active: AtomicUsize::new(0),
                http: self.http_or_default()?,
                query: placed.query,
                interceptors: self.interceptors,
                tap,
                token_source: self.token_source,
                tls: self.tls,
                max_response_bytes: self.max_response_bytes,
            }),
            options: self.options,
        })
    }

    /// Fetches the agent's card (see [`crate::card::agent_card_url`]) with
    /// this builder's HTTP client and options, then builds the client.
    pub async fn connect(self, url: &str) -> ClientResult<Client> {
        let http = self.http_or_default()?;
        // The public card is fetched without credentials (spec 12.4).
        let public = CallOptions {
            timeout: self.options.timeout,
            ..Default::default()
        };
        let card = fetch_agent_card_max(&http, url, &public, self.max_card_bytes).await?;
        self.http_client(http).build(card)
    }
}

/// `tap`, also redacting where these credentials go and the API key names
/// of the card's security schemes.
fn redacting(mut tap: Tap, card: &AgentCard, placed: &crate::auth::PlacedCredentials) -> Tap {
    for (name, _) in &placed.headers {
        tap = tap.redact_header(name);
    }
    for (name, _) in &placed.query {
        tap = tap.redact_query_param(name.clone());
    }
    for scheme in card.security_schemes.values() {
        if let Some(agentwire_types::security_scheme::Scheme::ApiKeySecurityScheme(k)) =
            &scheme.scheme
        {
            if k.name.is_empty() {
                continue;
            }
            tap = match k.location.to_ascii_lowercase().as_str() {
                "query" => tap.redact_query_param(k.name.clone()),
                // A cookie travels in `Cookie`, always redacted.
                "cookie" => tap,
                _ => tap.redact_header(&k.name),
            };
        }
    }
    tap
}

impl Client {
    /// A builder to choose bindings, preference order, HTTP client and
    /// default options.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::new()
    }

    /// A client for the agent of `card` with the default negotiation.
    pub fn new(card: AgentCard) -> ClientResult<Self> {
        ClientBuilder::new().build(card)
    }

    /// Fetches the card at `url` (an origin or a card URL) and builds a
    /// client with the default negotiation.
    pub async fn connect(url: &str) -> ClientResult<Self> {
        ClientBuilder::new().connect(url).await
    }

    /// A client over one given transport (no card, no fallback; requests
    /// keep the tenant they carry).
    pub fn from_transport(transport: Box<dyn Transport>) -> Self {
        let cell = OnceLock::new();
        let _ = cell.set(Arc::from(transport));
        Client {
            shared: Arc::new(Shared {
                card: None,
                candidates: vec![Candidate {
                    binding: None,
                    interface: None,
                    transport: cell,
                }],
                active: AtomicUsize::new(0),
                http: default_http_client(),
                query: Vec::new(),
                interceptors: Vec::new(),
                tap: None,
                token_source: None,
                tls: None,
                max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            }),
            options: CallOptions::default(),
        }
    }

    /// The same client (sharing connections) with other default options.
    pub fn with_options(&self, options: CallOptions) -> Self {
        Self {
            shared: self.shared.clone(),
            options,
        }
    }

    /// The default options of every call.
    pub fn options(&self) -> &CallOptions {
        &self.options
    }

    /// The agent card the client was built from.
    pub fn card(&self) -> Option<&AgentCard> {
        self.shared.card.as_ref()
    }

    /// The interface in use (the first one, until a fallback happens).
    pub fn interface(&self) -> Option<&AgentInterface> {
        let i = self.shared.active.load(Ordering::Relaxed);
        self.shared.candidates.get(i)?.interface.as_ref()
    }

    /// The binding in use.
    pub fn binding(&self) -> Option<Binding> {
        let i = self.shared.active.load(Ordering::Relaxed);
        self.shared.candidates.get(i)?.binding
    }

    /// The usable interfaces, best first.
    pub fn interfaces(&self) -> Vec<(Binding, AgentInterface)> {
        self.shared
            .candidates
            .iter()
            .filter_map(|c| Some((c.binding?, c.interface.clone()?)))
            .collect()
    }

    /// Runs one operation on the active interface, moving to the next one
    /// (for this and later calls) when an interface cannot be reached.
    async fn dispatch<Req, R, F>(
        &self,
        op: Operation,
        request: Req,
        options: &CallOptions,
        call: F,
    ) -> ClientResult<R>
    where
        Req: TenantField + Clone + Send,
        F: for<'t> Fn(&'t dyn Transport, Req, &'t CallOptions) -> BoxFuture<'t, ClientResult<R>>
            + Send
            + Sync,
    {
        let options: Cow<'_, CallOptions> = if options.is_empty() {
            Cow::Borrowed(&self.options)
        } else {
            Cow::Owned(self.options.merged(options))
        };
        let shared = &*self.shared;
        let n = shared.candidates.len();
        let start = shared.active.load(Ordering::Relaxed);
        let mut request = Some(request);
        let mut failures: Vec<(String, ClientError)> = Vec::new();
        for k in 0..n {
            let i = (start + k) % n;
            let candidate = &shared.candidates[i];
            let mut req = if k + 1 < n {
                request.clone()
            } else {
                request.take()
            }
            .expect("request kept until the last attempt");
            let transport = match candidate.transport(
                &shared.http,
                &shared.query,
                shared.tap.as_ref(),
                shared.tls.as_ref(),
                shared.max_response_bytes,
            ) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(interface = %candidate.describe(), error = %e, "interface unusable");
                    failures.push((candidate.describe(), e));
                    continue;
                }
            };
            if let Some(iface) = &candidate.interface {
                req.set_tenant(&iface.tenant);
            }
            let mut opts: Cow<'_, CallOptions> = Cow::Borrowed(&*options);
            if candidate.binding == Some(Binding::Grpc) && !shared.query.is_empty() {
                opts.to_mut()
                    .service_params
                    .extend(shared.query.iter().cloned());
            }
            let bearer = match &shared.token_source {
                Some(source) => source.token().await?,
                None => None,
            };
            if let Some(t) = &bearer {
                set_bearer(opts.to_mut(), t);
            }
            for interceptor in &shared.interceptors {
                interceptor.intercept(op, opts.to_mut())?;
            }
            // A refused token is refreshed once and the call retried once
            // with the new one, whatever the binding.
            let retry = bearer.as_ref().map(|_| req.clone());
            let mut res = call(&*transport, req, &opts).await;
            let refused = matches!(&res, Err(e) if e.is_unauthenticated());
            if refused
                && let (Some(rejected), Some(req), Some(source)) =
                    (&bearer, retry, &shared.token_source)
            {
                match source.refresh(rejected).await? {
                    Some(fresh) if fresh != *rejected => {
                        tracing::debug!(%op, "the agent refused the token: retrying with a fresh one");
                        set_bearer(opts.to_mut(), &fresh);
                        res = call(&*transport, req, &opts).await;
                    }
                    _ => {}
                }
            }
            // Still refused: say why the token could not be renewed.
            if let (Err(e), Some(source)) = (&res, &shared.token_source)
                && e.is_unauthenticated()
                && let Some(failure) = source.refresh_failure()
            {
                res = res.map_err(|e| crate::auth::with_refresh_failure(e, &failure));
            }
            match res {
                Err(e) if e.is_unreachable() => {
                    if k + 1 < n {
                        tracing::warn!(
                            interface = %candidate.describe(),
                            error = %e,
                            "agent interface unreachable, trying the next one"
                        );
                    }
                    failures.push((candidate.describe(), e));
                }
                Err(e) => {
                    if i != start {
                        shared.active.store(i, Ordering::Relaxed);
                    }
                    // A TLS connection ended without saying why: find out.
                    let url = candidate.interface.as_ref().map_or("", |f| f.url.as_str());
                    return Err(crate::tls::diagnose(e, url, shared.tls.as_ref()).await);
                }
                res => {
                    if i != start {
                        shared.active.store(i, Ordering::Relaxed);
                    }
                    return res;
                }
            }
        }
        Err(all_failed(failures))
    }

    // ----- short forms -------------------------------------------------

    /// Sends one user text message (`SendMessage`).
    pub async fn send_text(&self, text: impl Into<String>) -> ClientResult<SendMessageResponse> {
        self.send(Message::user_text(text)).await
    }

    /// Sends a message (`SendMessage`). An empty `messageId` is filled with
    /// a fresh id and an unspecified role becomes `ROLE_USER`.
    pub async fn send(&self, message: Message) -> ClientResult<SendMessageResponse> {
        Transport::send_message(self, message_request(message), &CallOptions::new()).await
    }

    /// Sends a message and follows the interaction (`SendStreamingMessage`).
    pub async fn stream(&self, message: Message) -> ClientResult<EventStream> {
        Transport::send_streaming_message(self, message_request(message), &CallOptions::new()).await
    }

    /// Gets a task with the agent's default history (`GetTask`).
    pub async fn get_task(&self, id: impl Into<String>) -> ClientResult<Task> {
        let request = GetTaskRequest {
            id: id.into(),
            ..Default::default()
        };
        Transport::get_task(self, request, &CallOptions::new()).await
    }

    /// Lists tasks (`ListTasks`).
    pub async fn list_tasks(&self, request: ListTasksRequest) -> ClientResult<ListTasksResponse> {
        Transport::list_tasks(self, request, &CallOptions::new()).await
    }

    /// Requests the cancellation of a task (`CancelTask`).
    pub async fn cancel_task(&self, id: impl Into<String>) -> ClientResult<Task> {
        let request = CancelTaskRequest {
            id: id.into(),
            ..Default::default()
        };
        Transport::cancel_task(self, request, &CallOptions::new()).await
    }

    /// Follows a task (`SubscribeToTask`): the current Task, then its updates.
    pub async fn subscribe(&self, id: impl Into<String>) -> ClientResult<EventStream> {
        let request = SubscribeToTaskRequest {
            id: id.into(),
            ..Default::default()
        };
        Transport::subscribe_to_task(self, request, &CallOptions::new()).await
    }
}

fn message_request(mut message: Message) -> SendMessageRequest {
    if message.message_id.is_empty() {
        message.message_id = agentwire_types::new_id();
    }
    if message.role == Role::Unspecified as i32 {
        message.role = Role::User as i32;
    }
    SendMessageRequest {
        message: Some(message),
        ..Default::default()
    }
}

/// The error when no interface worked: the single failure as it is, or a
/// summary naming each interface tried.
fn all_failed(mut failures: Vec<(String, ClientError)>) -> ClientError {
    if failures.len() == 1 {
        return failures.pop().expect("one failure").1;
    }
    if failures.is_empty() {
        return ClientError::NoCompatibleInterface("no interface to call".into());
    }
    let url = failures
        .iter()
        .find_map(|(_, e)| match e {
            ClientError::Connect { url, .. } => Some(url.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let message = failures
        .iter()
        .map(|(what, e)| match e {
            ClientError::Connect { message, .. } => format!("{what}: {message}"),
            other => format!("{what}: {other}"),
        })
        .collect::<Vec<_>>()
        .join("; ");
    // A TLS failure (an untrusted certificate...) stays the cause, so that
    // it is reported as such ([`crate::tls::tls_failure`]) rather than as
    // an unreachable agent.
    let source = failures
        .iter()
        .position(|(_, e)| crate::tls::tls_failure(e).is_some())
        .and_then(|i| match failures.swap_remove(i).1 {
            ClientError::Connect { source, .. } | ClientError::Transport { source, .. } => source,
            _ => None,
        });
    ClientError::Connect {
        url,
        message: format!("no interface of the agent could be reached ({message})"),
        source,
    }
}

#[async_trait::async_trait]
impl Transport for Client {
    async fn send_message(
        &self,
        request: SendMessageRequest,
        options: &CallOptions,
    ) -> ClientResult<SendMessageResponse> {
        self.dispatch(Operation::SendMessage, request, options, |t, r, o| {
            t.send_message(r, o)
        })
        .await
    }

    async fn send_streaming_message(
        &self,
        request: SendMessageRequest,
        options: &CallOptions,
    ) -> ClientResult<EventStream> {
        self.dispatch(
            Operation::SendStreamingMessage,
            request,
            options,
            |t, r, o| t.send_streaming_message(r, o),
        )
        .await
    }

    async fn get_task(&self, request: GetTaskRequest, options: &CallOptions) -> ClientResult<Task> {
        self.dispatch(Operation::GetTask, request, options, |t, r, o| {
            t.get_task(r, o)
        })
        .await
    }

    async fn list_tasks(
        &self,
        request: ListTasksRequest,
        options: &CallOptions,
    ) -> ClientResult<ListTasksResponse> {
        self.dispatch(Operation::ListTasks, request, options, |t, r, o| {
            t.list_tasks(r, o)
        })
        .await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskRequest,
        options: &CallOptions,
    ) -> ClientResult<Task> {
        self.dispatch(Operation::CancelTask, request, options, |t, r, o| {
            t.cancel_task(r, o)
        })
        .await
    }

    async fn subscribe_to_task(
        &self,
        request: SubscribeToTaskRequest,
        options: &CallOptions,
    ) -> ClientResult<EventStream> {
        self.dispatch(Operation::SubscribeToTask, request, options, |t, r, o| {
            t.subscribe_to_task(r, o)
        })
        .await
    }

    async fn create_task_push_notification_config(
        &self,
        request: TaskPushNotificationConfig,
        options: &CallOptions,
    ) -> ClientResult<TaskPushNotificationConfig> {
        self.dispatch(
            Operation::CreateTaskPushNotificationConfig,
            request,
            options,
            |t, r, o| t.create_task_push_notification_config(r, o),
        )
        .await
    }

    async fn get_task_push_notification_config(
        &self,
        request: GetTaskPushNotificationConfigRequest,
        options: &CallOptions,
    ) -> ClientResult<TaskPushNotificationConfig> {
        self.dispatch(
            Operation::GetTaskPushNotificationConfig,
            request,
            options,
            |t, r, o| t.get_task_push_notification_config(r, o),
        )
        .await
    }

    async fn list_task_push_notification_configs(
        &self,
        request: ListTaskPushNotificationConfigsRequest,
        options: &CallOptions,
    ) -> ClientResult<ListTaskPushNotificationConfigsResponse> {
        self.dispatch(
            Operation::ListTaskPushNotificationConfigs,
            request,
            options,
            |t, r, o| t.list_task_push_notification_configs(r, o),
        )
        .await
    }

    async fn delete_task_push_notification_config(
        &self,
        request: DeleteTaskPushNotificationConfigRequest,
        options: &CallOptions,
    ) -> ClientResult<()> {
        self.dispatch(
            Operation::DeleteTaskPushNotificationConfig,
            request,
            options,
            |t, r, o| t.delete_task_push_notification_config(r, o),
        )
        .await
    }

    async fn get_extended_agent_card(
        &self,
        request: GetExtendedAgentCardRequest,
        options: &CallOptions,
    ) -> ClientResult<AgentCard> {
        self.dispatch(
            Operation::GetExtendedAgentCard,
            request,
            options,
            |t, r, o| t.get_extended_agent_card(r, o),
        )
        .await
    }
}
