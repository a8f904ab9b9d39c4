//! Serving an agent: [`A2aServer`] assembles the request handler, binds
//! the address and runs the accept loop; [`BoundServer`] and
//! [`ServerHandle`] are the server bound and running.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agentwire_types::{AgentCard, binding};
use axum::Router;

use super::accept::ConnectionLimits;
use super::router::{RouterOptions, router_with_card};
use crate::AgentExecutor;
use crate::auth::Authenticator;
use crate::bindings::http::{CardEndpoint, HttpState};
use crate::handler::{HandlerBuilder, HandlerConfig, RequestHandler};
use crate::store::TaskStore;

/// An agent server: the card, the agent, and how to serve them.
///
/// ```no_run
/// use agentwire_server::{A2aServer, AgentExecutor, RequestContext, TaskUpdater};
/// use agentwire_types::{A2aResult, AgentCard, Artifact};
///
/// struct Echo;
/// impl AgentExecutor for Echo {
///     async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
///         task.add_artifact(Artifact::text("echo", ctx.text())).await?;
///         task.complete().await
///     }
/// }
///
/// # async fn run() -> std::io::Result<()> {
/// let card = AgentCard::new("Echo", "Repeats what you say", "1.0.0");
/// A2aServer::new(card, Echo).serve("127.0.0.1:8080").await
/// # }
/// ```
pub struct A2aServer {
    builder: HandlerBuilder,
    public_url: Option<String>,
    options: RouterOptions,
    recover_on_start: bool,
    retention: Option<Duration>,
    limits: ConnectionLimits,
    /// The replicas' bus, for the readiness check.
    bus: Option<Arc<dyn crate::EventBus>>,
    /// The metrics counted, and whether `/metrics` is on the agent's port.
    metrics: Option<(Arc<crate::observe::Metrics>, bool)>,
    /// The origins allowed to call from a browser (CORS).
    cors_origins: Vec<http::HeaderValue>,
    /// How long open requests and streams may go on once the server stops.
    shutdown_grace: Duration,
    /// TLS, when on.
    tls: Option<super::tls::TlsConfig>,
}

/// How long open requests and streams may go on once a server stops, by
/// default.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

impl A2aServer {
    /// A server for `executor`, described by `card`. Streaming is declared
    /// unless the card says otherwise.
    pub fn new<E: AgentExecutor>(mut card: AgentCard, executor: E) -> Self {
        let caps = card.capabilities.get_or_insert_with(Default::default);
        caps.streaming.get_or_insert(true);
        Self {
            builder: RequestHandler::builder(card, executor),
            public_url: None,
            options: RouterOptions::default(),
            recover_on_start: true,
            retention: None,
            limits: ConnectionLimits::default(),
            bus: None,
            metrics: None,
            cors_origins: Vec::new(),
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            tls: None,
        }
    }

    /// Uses this task store (default: in memory).
    pub fn store(mut self, store: Arc<dyn TaskStore>) -> Self {
        self.builder = self.builder.store(store);
        self
    }

    /// Follows the tasks of the other replicas sharing the store (see
    /// [`crate::bus`] and [`crate::store::postgres::connect_cluster`]).
    /// Also turns off the start-up recovery ([`Self::recover_on_start`]):
    /// the working tasks of a shared store may be running on other
    /// replicas.
    pub fn bus(mut self, bus: Arc<dyn crate::EventBus>) -> Self {
        self.builder = self.builder.bus(Arc::clone(&bus));
        self.bus = Some(bus);
        self.recover_on_start = false;
        self
    }

    /// Authenticates callers.
    pub fn authenticator(mut self, auth: Arc<dyn Authenticator>) -> Self {
        self.builder = self.builder.authenticator(auth);
        self
    }

    /// Serves an extended agent card to authenticated callers.
    pub fn extended_card(mut self, card: AgentCard) -> Self {
        self.builder = self.builder.extended_card(card);
        self
    }

    /// Signs the agent card (public and extended) and serves the keys'
    /// JWKS; see [`crate::card_signing`].
    pub fn sign_card(mut self, signing: crate::CardSigning) -> Self {
        self.builder = self.builder.sign_card(signing);
        self
    }

    /// Sends push notifications (and declares them in the card); see
    /// [`crate::push`].
    pub fn push(mut self, push: crate::PushConfig) -> Self {
        self.builder = self.builder.push(push);
        self
    }

    /// Handler tunables.
    pub fn config(mut self, config: HandlerConfig) -> Self {
        self.builder = self.builder.config(config);
        self
    }

    /// Largest accepted request body in bytes (default 10 MiB). (Request
    /// heads are limited to [`crate::MAX_HEAD_BYTES`], answered with 431
    /// beyond.)
    pub fn max_body_bytes(mut self, n: usize) -> Self {
        self.options.max_body_bytes = n;
        self
    }

    /// How long a client may take to send a request's head (default 10 s):
    /// a connection that sends only part of one in this time is closed,
    /// and so is an HTTP/1.1 connection kept alive this long without a new
    /// request. See [`ConnectionLimits`].
    pub fn request_head_timeout(mut self, timeout: Duration) -> Self {
        self.limits.request_head_timeout = timeout;
        self
    }

    /// How long a client may take to send a request's body once the server
    /// waits for it (default 30 s); a slower body is refused.
    pub fn body_read_timeout(mut self, timeout: Duration) -> Self {
        self.limits.body_read_timeout = timeout;
        self
    }

    /// How long a connection may go without a new request before it is
    /// closed (default 60 s; responses under way finish first).
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.limits.idle_timeout = timeout;
        self
    }

    /// How many connections may be open at once (default 50,000, or fewer
    /// when the open-file limit is lower); one beyond is answered `503
    /// Service Unavailable` and closed.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.limits.max_connections = Some(n);
        self
    }

    /// How many connections one address may have open at once (default
    /// 1,000; `None`: no bound); one beyond is answered `503 Service
    /// Unavailable` and closed.
    pub fn max_connections_per_address(mut self, n: Option<usize>) -> Self {
        self.limits.max_connections_per_address = n;
        self
    }

    /// The reverse proxies in front of the server, by address or network
    /// (default none): a request that comes through one counts as the
    /// client it names in `X-Forwarded-For`, for every bound keyed on an
    /// address, and their connections are not bounded per address (see
    /// [`ConnectionLimits::trusted_proxies`]).
    ///
    /// ```
    /// # use agentwire_server::{A2aServer, IpNet};
    /// # fn f(server: A2aServer) -> A2aServer {
    /// let proxy: IpNet = "10.0.0.0/24".parse().expect("a network");
    /// server.trusted_proxies([proxy])
    /// # }
    /// ```
    pub fn trusted_proxies(mut self, nets: impl IntoIterator<Item = ipnet::IpNet>) -> Self {
        self.limits.trusted_proxies = nets.into_iter().collect();
        self
    }

    /// Every limit on connections at once (timeouts, cap, HTTP/2 settings).
    pub fn connection_limits(mut self, limits: ConnectionLimits) -> Self {
        self.limits = limits;
        self
    }

    /// How long clients may use the agent card without asking again: sent
    /// as `Cache-Control: public, max-age=N` (whole seconds; default 5
    /// minutes, spec 8.6.1). Clients see a new card once their copy is
    /// that old; they then revalidate it (`If-None-Match` /
    /// `If-Modified-Since`, answered `304 Not Modified` while it is the
    /// same). Zero sends `Cache-Control: no-cache`: clients revalidate the
    /// card before each use, so a changed card is seen at once.
    pub fn card_max_age(mut self, age: Duration) -> Self {
        self.options.card_max_age = Some(age);
        self
    }

    /// Whether to serve gRPC on the same port (default yes).
    pub fn grpc(mut self, on: bool) -> Self {
        self.options.grpc = on;
        self
    }

    /// The base URL to advertise in the card, for servers behind a proxy
    /// or listening on every interface. Default: `http://` and the bound
    /// address (over TLS, `https://` and a host the certificate names: see
    /// [`super::tls::TlsConfig::advertised_authority`]); for an address that means "every interface" (`0.0.0.0`,
    /// `::`), which no client can call, the address of this machine on its
    /// default route (loopback when there is none) and the bound port.
    pub fn public_url(mut self, url: impl Into<String>) -> Self {
        self.public_url = Some(url.into().trim_end_matches('/').to_owned());
        self
    }

    /// Whether to fail, when starting, the tasks a previous run of this
    /// server left working (default yes). Turn it off when several replicas
    /// share one store: their tasks may be running elsewhere.
    pub fn recover_on_start(mut self, on: bool) -> Self {
        self.recover_on_start = on;
        self
    }

    /// Counts requests in `metrics` (see [`crate::observe::metrics`]), and
    /// serves them as `/metrics` on the agent's port when `on_agent_port`
    /// (otherwise serve [`crate::observe::Metrics::render`] where you
    /// like, e.g. with [`crate::observe::metrics::router`] on a port of its
    /// own).
    pub fn metrics(mut self, metrics: Arc<crate::observe::Metrics>, on_agent_port: bool) -> Self {
        self.metrics = Some((metrics, on_agent_port));
        self
    }

    /// How long open requests and streams may go on once the server is
    /// told to stop (default 5 s): it stops accepting at once, lets the
    /// calls under way finish for this long, then returns, cutting what
    /// is left.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Lets web pages from `origin` (`https://app.example.com`) call the
    /// agent from a browser (CORS, with tower-http's layer): preflight
    /// requests are answered, and responses carry
    /// `Access-Control-Allow-Origin` for that origin. May be called for
    /// several origins; `*` allows every origin.
    pub fn cors_origin(mut self, origin: http::HeaderValue) -> Self {
        self.cors_origins.push(origin);
        self
    }

    /// Serves TLS (HTTP/1.1 and HTTP/2 by ALPN, so gRPC too) on the port
    /// instead of plain HTTP, with the certificate and key of `tls`, read
    /// again when they change; with a client CA, mutual TLS (see
    /// [`crate::TlsConfig`] and [`crate::auth::AuthSchemes::mutual_tls`]).
    /// The card's interfaces are then `https://` URLs. [`Self::bind`]
    /// fails when the files cannot be read or do not go together.
    pub fn tls(mut self, tls: super::tls::TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Purges terminal tasks older than `age` from the store, every minute
    /// (off by default).
    pub fn retention(mut self, age: Duration) -> Self {
        self.retention = Some(age);
        self
    }

    /// Binds the address, completes the card's interfaces from it (unless
    /// the card lists its own) and builds the handler.
    pub async fn bind(self, addr: impl tokio::net::ToSocketAddrs) -> std::io::Result<BoundServer> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        self.bind_listener(listener).await
    }

    /// Binds 127.0.0.1 and the port given as the program's first argument
    /// (`default_port` without one), the way an agent run from a terminal
    /// starts (every example does): see [`crate::listen_local`]. The
    /// address is known, and can be printed ([`BoundServer::base_url`]),
    /// only once this succeeds; a failure is one sentence.
    pub async fn bind_local(self, default_port: u16) -> Result<BoundServer, crate::StartError> {
        let (listener, _) = super::local::listen_local(default_port).await?;
        Ok(self.bind_listener(listener).await?)
    }

    /// [`A2aServer::bind`] on a listener bound already.
    pub async fn bind_listener(
        mut self,
        listener: tokio::net::TcpListener,
    ) -> std::io::Result<BoundServer> {
        let local = listener.local_addr()?;
        let base = self.public_url.clone().unwrap_or_else(|| match &self.tls {
            // A host the certificate names, so that clients accept it.
            Some(tls) => format!(
                "https://{}",
                tls.advertised_authority(advertised_addr(local))
            ),
            None => format!("http://{}", advertised_addr(local)),
        });
        let card = self.builder.card_mut();
        if card.supported_interfaces.is_empty() {
            // (Over TLS the gRPC URL keeps its https:// scheme, which
            // tells clients to use TLS.)
            let grpc_addr = if self.tls.is_some() {
                base.clone()
            } else {
                base.split_once("://")
                    .map_or(base.as_str(), |(_, rest)| rest)
                    .to_owned()
            };
            *card = std::mem::take(card)
                .with_interface(format!("{base}/"), binding::JSONRPC)
                .with_interface(base.clone(), binding::HTTP_JSON);
            if self.options.grpc {
                *card = std::mem::take(card).with_interface(grpc_addr, binding::GRPC);
            }
        }
        if let Some((metrics, _)) = &self.metrics {
            self.builder = self.builder.time_store(metrics);
        }
        let handler = self.builder.build();
        if self.recover_on_start {
            handler
                .recover_orphaned_tasks()
                .await
                .map_err(|e| std::io::Error::other(format!("crash recovery failed: {e}")))?;
        }
        if let Some(age) = self.retention {
            let store = std::sync::Arc::clone(handler.store());
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_secs(60));
                loop {
                    tick.tick().await;
                    match store.purge_terminal_older_than(age).await {
                        Ok(0) => {}
                        Ok(n) => tracing::info!(purged = n, "retention: purged old terminal tasks"),
                        Err(e) => tracing::warn!(error = %e, "retention purge failed"),
                    }
                }
            });
        }
        // One card endpoint (one Last-Modified) for both paths.
        let card = CardEndpoint::new(&handler, self.options.card_max_age);
        let mut router = router_with_card(handler.clone(), &self.options, card.clone(), true);
        // Health: always on, on the agent's port.
        let readiness = crate::observe::health::Readiness {
            store: Arc::clone(handler.store()),
            bus: self.bus.clone(),
        };
        let stopping = tokio_util::sync::CancellationToken::new();
        let tls = match &self.tls {
            None => None,
            Some(config) => Some(
                super::tls::Tls::start(config, stopping.clone())
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?,
            ),
        };
        router = crate::observe::health::http_routes(router, readiness.clone());
        if self.options.grpc {
            router = crate::observe::health::grpc_routes(
                router,
                readiness,
                stopping.clone(),
                handler.serves_v03(),
            );
        }
        if let Some((metrics, on_port)) = &self.metrics {
            let live = handler.clone();
            metrics.set_probe(move || live.live_stats());
            if *on_port {
                router = crate::observe::metrics::route(router, Arc::clone(metrics));
            }
        }
        let direct = crate::serving::accept::Direct {
            rpc: HttpState {
                handler: handler.clone(),
                max_body_bytes: self.options.max_body_bytes,
            },
            card,
            metrics: self.metrics.map(|(m, _)| m),
            cors: if self.cors_origins.iter().any(|o| o == "*") {
                Some(tower_http::cors::CorsLayer::permissive())
            } else {
                (!self.cors_origins.is_empty())
                    .then(|| crate::observe::cors_layer(&self.cors_origins))
            },
        };
        Ok(BoundServer {
            listener,
            router,
            direct,
            handler,
            local,
            limits: self.limits,
            tls,
            stopping: stopping.drop_guard(),
            shutdown_grace: self.shutdown_grace,
        })
    }

    /// Binds and serves until Ctrl-C.
    pub async fn serve(self, addr: impl tokio::net::ToSocketAddrs) -> std::io::Result<()> {
        self.bind(addr).await?.run_until(shutdown_signal()).await
    }
}

/// The address to advertise for a server bound to `local`: `local` itself,
/// unless it is the unspecified address (every interface), which clients
/// cannot call; then the address of this machine on its default route (the
/// one a UDP socket "connected" to a documentation address would use: no
/// packet is sent), or loopback when there is no route.
pub fn advertised_addr(local: SocketAddr) -> SocketAddr {
    if !local.ip().is_unspecified() {
        return local;
    }
    let (any, probe, loopback): (&str, &str, std::net::IpAddr) = if local.is_ipv4() {
        (
            "0.0.0.0:0",
            "192.0.2.1:80",
            std::net::Ipv4Addr::LOCALHOST.into(),
        )
    } else {
        (
            "[::]:0",
            "[2001:db8::1]:80",
            std::net::Ipv6Addr::LOCALHOST.into(),
        )
    };
    let routed = std::net::UdpSocket::bind(any)
        .and_then(|s| s.connect(probe).and_then(|()| s.local_addr()))
        .map(|a| a.ip())
        .ok()
        .filter(|ip| !ip.is_unspecified());
    SocketAddr::new(routed.unwrap_or(loopback), local.port())
}

/// Completes on Ctrl-C (or SIGTERM on Unix).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

/// How long, at shutdown, the store may take to record the tasks still
/// running as failed.
const SHUTDOWN_WRITE_LIMIT: Duration = Duration::from_secs(5);

/// How long, at shutdown, the streams ended by those failures may take to
/// send their last event before the server stops.
const SHUTDOWN_FLUSH_LIMIT: Duration = Duration::from_secs(1);

/// A server bound to its address, ready to run.
pub struct BoundServer {
    listener: tokio::net::TcpListener,
    router: Router,
    direct: crate::serving::accept::Direct,
    handler: RequestHandler,
    local: SocketAddr,
    limits: ConnectionLimits,
    tls: Option<super::tls::Tls>,
    /// Ends the server's background work (the gRPC health status) when
    /// the server stops or is dropped.
    stopping: tokio_util::sync::DropGuard,
    shutdown_grace: Duration,
}

impl BoundServer {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// `http://` (`https://` with TLS) and the address it listens on.
    pub fn base_url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.local)
    }

    /// The request handler (for in-process calls).
    pub fn handler(&self) -> &RequestHandler {
        &self.handler
    }

    /// The card as served.
    pub fn agent_card(&self) -> &AgentCard {
        self.handler.agent_card()
    }

    /// Serves until `shutdown` completes; then stops accepting, lets open
    /// requests finish for up to the shutdown grace period
    /// ([`A2aServer::shutdown_grace`], five seconds by default), and the
    /// agents still working too; then fails (and writes) the tasks still
    /// running, which ends their streams with that final status update,
    /// ends the other streams still open (a task waiting for input: its
    /// current status as their last event), and returns.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let _stopping = self.stopping;
        let grace = self.shutdown_grace;
        let handler = self.handler.clone();
        let stop = Arc::new(tokio::sync::Notify::new());
        let stopped = Arc::clone(&stop);
        let serve = crate::serving::accept::serve(
            self.listener,
            self.router,
            self.direct,
            self.limits,
            self.tls,
            async move {
                shutdown.await;
                stopped.notify_one();
            },
        );
        let mut serve = std::pin::pin!(serve);
        let mut deadline = std::pin::pin!(async {
            stop.notified().await;
            tokio::time::sleep(grace).await;
        });
        let mut closed = false;
        tokio::select! {
            r = &mut serve => {
                // Ends well only once shutdown began (`stop` then holds its
                // permit).
                r?;
                closed = true;
            }
            () = &mut deadline => {}
        }
        if closed {
            // Every connection closed within the grace period: the agents
            // still working have the rest of it.
            tokio::select! {
                () = &mut deadline => {}
                () = handler.tasks_settled() => {}
            }
        }
        // The grace period is over. The tasks still running here are
        // failed, as after a crash, but written now, before the process
        // exits: their open streams get the failure as their final event.
        let reason = "The server shut down before the agent finished this task. \
                      Send the request again to retry.";
        match tokio::time::timeout(SHUTDOWN_WRITE_LIMIT, handler.fail_running_tasks(reason)).await {
            Ok(failed) if !failed.is_empty() => {
                tracing::warn!(
                    count = failed.len(),
                    "failed the tasks still running at shutdown"
                );
            }
            Ok(_) => {}
            Err(_) => tracing::warn!(
                "the task store did not record the tasks still running at shutdown in time"
            ),
        }
        // The streams still open (on tasks waiting for input...) get their
        // last event too.
        match tokio::time::timeout(SHUTDOWN_WRITE_LIMIT, handler.end_streams()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(tasks = n, "ended the streams still open at shutdown"),
            Err(_) => tracing::warn!("the streams still open at shutdown were not ended in time"),
        }
        // Streams ending with those failures close their connections: a
        // moment for their last events to be sent.
        if !closed {
            let _ = tokio::time::timeout(SHUTDOWN_FLUSH_LIMIT, &mut serve).await;
        }
        Ok(())
    }

    /// Serves in a background task; the handle stops it when dropped or
    /// when [`ServerHandle::shutdown`] is called.
    pub fn spawn(self) -> ServerHandle {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let local = self.local;
        let handler = self.handler.clone();
        let task = tokio::spawn(self.run_until(async move {
            let _ = rx.await;
        }));
        ServerHandle {
            local,
            handler,
            stop: Some(tx),
            task,
        }
    }
}

/// A server running in the background.
pub struct ServerHandle {
    local: SocketAddr,
    handler: RequestHandler,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl ServerHandle {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// `http://` and the address.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.local)
    }

    /// The request handler.
    pub fn handler(&self) -> &RequestHandler {
        &self.handler
    }

    /// Stops the server and waits for it.
    pub async fn shutdown(mut self) -> std::io::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        (&mut self.task)
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.task.abort();
    }
}
