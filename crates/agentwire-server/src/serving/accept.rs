//! The accept loop: one hyper connection per TCP connection, HTTP/1.1 and
//! h2c (gRPC) on the same port, or, with TLS ([`super::tls`]), HTTP/1.1 and
//! HTTP/2 over TLS (offered by ALPN) after a bounded handshake.
//!
//! Written here rather than taken from `axum::serve` for two reasons. The
//! JSON-RPC endpoint and the agent card, most of the traffic, are answered
//! before the router (no route matching, no boxed body). And the HTTP/1
//! read buffer is capped at [`MAX_HEAD_BYTES`]. Hyper sizes each read
//! to 8 KiB; when part of a request is still in the buffer (a head or body
//! not yet consumed) and the cap is higher, the buffer doubles to 16 KiB and
//! stays that size for the life of the connection. With the cap, every
//! connection keeps one 8 KiB buffer, which is what lets a server hold tens
//! of thousands of open streams in little memory. Bodies are not limited by
//! it (they are read through the buffer in pieces); a request whose head
//! (request line and headers) exceeds it is answered with
//! `431 Request Header Fields Too Large`.
//!
//! The limits that keep slow and hostile clients from holding the server
//! ([`ConnectionLimits`]) are applied here too: hyper's own timer for the
//! request head (HTTP/1) and the HTTP/2 settings; a deadline on each request
//! body ([`TimedBody`]); a watch on each connection that closes it
//! gracefully when no request came for a whole period (or the server
//! stops); and a cap on open connections, one slot each of a semaphore,
//! which is also how the server waits for its connections when it stops.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::response::Response;
use futures::future::BoxFuture;
use http::{Method, Request};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::either::Either;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::head_timer::{HeadClock, HeadTimer};
use crate::bindings::http::{CardEndpoint, HttpState, call_context};

/// The largest HTTP/1 request head accepted, and the size of each
/// connection's read buffer.
pub const MAX_HEAD_BYTES: usize = 8192;

/// The two most frequent requests, answered without going through the
/// router: `POST /` (JSON-RPC) and `GET` of the agent card. Everything
/// else goes to the router, which serves these two the same way.
#[derive(Clone)]
pub(crate) struct Direct {
    pub(crate) rpc: HttpState,
    pub(crate) card: CardEndpoint,
    /// The server's metrics, counted by the log layer.
    pub(crate) metrics: Option<Arc<crate::observe::Metrics>>,
    /// The CORS layer, when origins are allowed.
    pub(crate) cors: Option<tower_http::cors::CorsLayer>,
}

/// The service of one connection: [`Direct`] paths first, then the router.
///
/// Each connection has its own copy of [`Direct`], in its own allocation:
/// the reference a request's future takes is counted there, on the thread
/// serving the connection, instead of on a counter that every thread of
/// the server updates for every request.
///
/// Around it, the request-id and log layers ([`crate::observe::layers`]).
#[derive(Clone)]
struct Service {
    router: Router,
    direct: Arc<Direct>,
    /// Requests received on the connection, for its idle timer.
    requests: Arc<AtomicU64>,
    body_read_timeout: Duration,
    /// The connection's peer, given to each request (as axum's
    /// `ConnectInfo`): authentication failures are throttled per address.
    peer: Option<std::net::SocketAddr>,
    /// When the peer is a trusted reverse proxy: the proxies, to give each
    /// request the client it forwards for instead.
    proxies: Option<super::proxies::TrustedProxies>,
    /// The principal of the connection's verified client certificate
    /// (mutual TLS), given to each request.
    client_cert: Option<crate::auth::ClientCertificate>,
    /// What the connection's request bodies are counted against (the
    /// bound on bytes being received, `handler/incoming.rs`).
    incoming: Option<Arc<crate::handler::IncomingGate>>,
}

impl tower::Service<Request<Incoming>> for Service {
    type Response = Response;
    type Error = Infallible;
    type Future = Answer;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Incoming>) -> Answer {
        crate::observe::Answers::answer(self, request)
    }
}

impl crate::observe::Answers<Request<Incoming>> for Service {
    fn answer(&self, request: Request<Incoming>) -> Answer {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let timeout = self.body_read_timeout;
        // Through a trusted proxy: the client it names, whose bodies count
        // against that client.
        let (peer, proxied_gate) = match (&self.proxies, self.peer) {
            (Some(proxies), Some(peer)) => {
                let client = proxies.client(peer, request.headers());
                let gate = self.direct.rpc.handler.incoming_gate(Some(client));
                (Some(client), gate)
            }
            _ => (self.peer, None),
        };
        let count = proxied_gate
            .as_ref()
            .or(self.incoming.as_ref())
            .and_then(|gate| gate.body(hyper::body::Body::size_hint(request.body()).exact()));
        let request = request.map(|body| TimedBody {
            body,
            timeout,
            timer: None,
            count,
        });
        let path = request.uri().path();
        if path == "/" && request.method() == Method::POST {
            let direct = Arc::clone(&self.direct);
            // The head is read here: the boxed future keeps only what the
            // call needs (the headers and the body).
            let (parts, body) = request.into_parts();
            let ctx = call_context(parts.headers, &parts.uri, &parts.extensions)
                .with_peer(peer)
                .with_client_cert(self.client_cert.clone());
            return Answer::Direct(Box::pin(async move {
                crate::bindings::jsonrpc::serve(&direct.rpc, ctx, body).await
            }));
        }
        if path == agentwire_types::AGENT_CARD_PATH && request.method() == Method::GET {
            return Answer::Ready(Some(
                self.direct.card.respond(request.headers(), request.uri()),
            ));
        }
        let mut request = request;
        if let Some(peer) = peer {
            // (Only here: the direct JSON-RPC path above takes the peer
            // without an allocation of the request's extensions.)
            request
                .extensions_mut()
                .insert(axum::extract::ConnectInfo(peer));
        }
        if let Some(cert) = &self.client_cert {
            request.extensions_mut().insert(cert.clone());
        }
        Answer::Routed(Box::pin(self.router.clone().oneshot(request)))
    }
}

/// The future of `Service::call`.
enum Answer {
    Direct(BoxFuture<'static, Response>),
    Ready(Option<Response>),
    Routed(BoxFuture<'static, Result<Response, Infallible>>),
}

impl Future for Answer {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Every variant is Unpin (the futures are pinned in their boxes).
        match self.get_mut() {
            Answer::Direct(f) => f.as_mut().poll(cx).map(Ok),
            Answer::Ready(r) => Poll::Ready(Ok(r.take().unwrap_or_default())),
            Answer::Routed(f) => f.as_mut().poll(cx),
        }
    }
}

/// Limits on the connections of a server: how long a client may take to
/// send a request, how long a connection may stay idle, how many may be
/// open at once, and the HTTP/2 settings. A client that is slow or that
/// holds connections without using them is disconnected, and a flood of
/// connections is refused, so that it cannot take the server's service
/// away from the others.
///
/// ```
/// use std::time::Duration;
/// let mut limits = agentwire_server::ConnectionLimits::default();
/// limits.request_head_timeout = Duration::from_secs(5);
/// limits.max_connections = Some(2_000);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConnectionLimits {
    /// How long a client may take to send a request's head (request line
    /// and headers) from the moment the server waits for it: a connection
    /// that sends only part of a head in this time is closed. An HTTP/1.1
    /// connection kept alive between requests waits for the next head, so
    /// it is also closed after this long without a request. Default 10 s.
    pub request_head_timeout: Duration,
    /// How long a client may take to send a request's body once the server
    /// waits for it; a slower body is refused. Default 30 s.
    pub body_read_timeout: Duration,
    /// How long a connection may go without a new request before it is
    /// closed (gracefully: a response still being sent, an event stream
    /// for example, finishes first). Mostly for HTTP/2 (gRPC) connections;
    /// an idle HTTP/1.1 connection is closed after the request-head timeout
    /// already. Default 60 s.
    pub idle_timeout: Duration,
    /// How many connections may be open at once; a connection beyond is
    /// answered `503 Service Unavailable` and closed, and a warning is
    /// logged once per burst. `None` (the default): 50,000, or fewer when
    /// the open-file limit is lower (that limit less 128, kept for the
    /// store, outgoing calls and logs). When the server binds, it raises
    /// the process's soft open-file limit to the hard limit where allowed.
    pub max_connections: Option<usize>,
    /// How many of those one address may have open at once (an IPv6
    /// address by its /64 prefix), so that one client cannot take every
    /// connection the server has; one beyond is answered the same way.
    /// Behind a reverse proxy every client has the proxy's address.
    /// `None`: no bound. Default 1,000.
    pub max_connections_per_address: Option<usize>,
    /// The reverse proxies in front of the server (addresses and networks):
    /// their connections are not bounded per address, and each request
    /// that comes through one counts as its client's, the rightmost
    /// address in `X-Forwarded-For` that is not itself a trusted proxy,
    /// for every bound and throttle keyed on an address and in the
    /// request's [`CallContext::peer`](crate::CallContext::peer). A request
    /// from any other address is its own client, whatever its headers say.
    /// Default: none (`X-Forwarded-For` is never believed).
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// HTTP/2: how many requests (streams) one connection may have open at
    /// once. Default 256.
    pub http2_max_concurrent_streams: u32,
    /// HTTP/2: the largest request head (header list) accepted, in bytes.
    /// Default 16 KiB.
    pub http2_max_header_list_size: u32,
    /// HTTP/2: how often to ping a connection to check that the client is
    /// still there (`None`: never). Default 30 s.
    pub http2_keep_alive_interval: Option<Duration>,
    /// HTTP/2: how long to wait for the answer to a ping before closing
    /// the connection. Default 20 s.
    pub http2_keep_alive_timeout: Duration,
}

/// The default of [`ConnectionLimits::request_head_timeout`].
pub const DEFAULT_REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// The default of [`ConnectionLimits::body_read_timeout`].
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The default of [`ConnectionLimits::idle_timeout`].
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// The most connections open at once by default, when the open-file limit
/// allows it (see [`ConnectionLimits::max_connections`]).
pub const DEFAULT_MAX_CONNECTIONS: usize = 50_000;
/// The default of [`ConnectionLimits::max_connections_per_address`].
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 1_000;

/// File descriptors kept for other uses than client connections.
const RESERVED_FILES: u64 = 128;

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            request_head_timeout: DEFAULT_REQUEST_HEAD_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: None,
            max_connections_per_address: Some(DEFAULT_MAX_CONNECTIONS_PER_ADDRESS),
            trusted_proxies: Vec::new(),
            http2_max_concurrent_streams: 256,
            http2_max_header_list_size: 16 * 1024,
            http2_keep_alive_interval: Some(Duration::from_secs(30)),
            http2_keep_alive_timeout: Duration::from_secs(20),
        }
    }
}

impl ConnectionLimits {
    /// The connection cap: the one set, or the default bounded by the
    /// open-file limit.
    pub(crate) fn connection_cap(&self) -> usize {
        // (At most u32::MAX: the server waits for that many slots when it
        // stops.)
        let most = u32::MAX as usize;
        if let Some(n) = self.max_connections {
            return n.clamp(1, most);
        }
        let files = open_file_limit();
        let by_files = files.saturating_sub(RESERVED_FILES).max(16);
        usize::try_from(by_files)
            .unwrap_or(usize::MAX)
            .min(DEFAULT_MAX_CONNECTIONS)
    }
}

/// Raises the soft open-file limit to the hard limit (once per process,
/// where the system allows it) and returns the soft limit then in force.
#[cfg(unix)]
pub(crate) fn open_file_limit() -> u64 {
    static LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(n) => n,
        Err(e) => {
            tracing::debug!(error = %e, "could not raise the open-file limit");
            rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(1024, |(soft, _)| soft)
        }
    })
}

/// Elsewhere sockets are not bounded by an open-file limit.
#[cfg(not(unix))]
pub(crate) fn open_file_limit() -> u64 {
    u64::MAX
}

/// The answer to a connection beyond the cap.
const REFUSED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\n\
content-type: text/plain\r\nretry-after: 1\r\ncontent-length: 45\r\n\r\n\
too many open connections; try again shortly\n";

/// Refuses a connection beyond the cap: reads what already arrived (so
/// that closing does not reset the connection before the answer is
/// read), answers 503 and closes, without waiting for anything.
fn refuse(tcp: TcpStream) {
    let mut buf = [0u8; 2048];
    for _ in 0..8 {
        match tcp.try_read(&mut buf) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
    let _ = tcp.try_write(REFUSED);
}

/// The open connections of each address (see
/// [`ConnectionLimits::max_connections_per_address`]).
struct ByAddress {
    max: usize,
    open: parking_lot::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>,
}

impl ByAddress {
    /// A place for one more connection from `peer`, held until the guard
    /// is dropped; `None` when the address has as many as it may.
    fn enter(self: &Arc<Self>, peer: std::net::SocketAddr) -> Option<AddressSlot> {
        let address = crate::handler::address_of(peer.ip());
        let mut open = self.open.lock();
        let n = open.entry(address).or_default();
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(AddressSlot {
            by: Arc::clone(self),
            address,
        })
    }
}

/// A connection's place in its address's count.
struct AddressSlot {
    by: Arc<ByAddress>,
    address: std::net::IpAddr,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        crate::handler::give_back(&mut self.by.open.lock(), &self.address, 1);
    }
}

/// What an open connection holds: its place under the server's cap and
/// under its address's.
struct Slots {
    _server: tokio::sync::OwnedSemaphorePermit,
    _address: Option<AddressSlot>,
}

/// Counts the connections refused in a burst, to log it once.
#[derive(Default)]
struct Refusals {
    /// Refused since the burst began.
    count: u64,
    /// When the last warning was logged.
    warned: Option<std::time::Instant>,
}

impl Refusals {
    /// How often a long burst is logged again.
    const REPEAT: Duration = Duration::from_secs(60);

    /// Counts a refusal: whether to warn about the burst now (its first
    /// refusal, or one a minute after the last warning).
    fn due(&mut self) -> bool {
        self.count += 1;
        let now = std::time::Instant::now();
        let due = self.warned.is_none_or(|t| now - t >= Self::REPEAT);
        if due {
            self.warned = Some(now);
        }
        due
    }

    fn refused(&mut self, cap: usize) {
        if self.due() {
            tracing::warn!(
                limit = cap,
                refused = self.count,
                "connection limit reached: refusing new connections (answered 503) until some close"
            );
        }
    }

    /// A connection from `peer` refused at its address's bound.
    fn refused_from(&mut self, peer: std::net::SocketAddr, max: usize) {
        if self.due() {
            tracing::warn!(
                limit = max,
                address = %crate::handler::address_of(peer.ip()),
                refused = self.count,
                "an address has as many connections open as one may: refusing its new ones \
                 (answered 503) until some close"
            );
        }
    }

    fn accepted(&mut self) {
        if self.count > 0 {
            tracing::info!(
                refused = self.count,
                "accepting connections again after refusing some at the connection limit"
            );
            *self = Self::default();
        }
    }
}

/// Serves `router` on `listener` until `shutdown` completes, then stops
/// accepting and waits for the open connections to end (the caller bounds
/// that wait).
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    direct: Direct,
    limits: ConnectionLimits,
    tls: Option<super::tls::Tls>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // The HTTP/1 timer (for the head timeout) is each connection's own:
    // see `head_timer.rs`.
    builder
        .http1()
        .header_read_timeout(limits.request_head_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.http2_max_concurrent_streams)
        .max_header_list_size(limits.http2_max_header_list_size)
        .keep_alive_interval(limits.http2_keep_alive_interval)
        .keep_alive_timeout(limits.http2_keep_alive_timeout);
    let cap = limits.connection_cap();
    let slots = Arc::new(Semaphore::new(cap));
    let stop = CancellationToken::new();
    let mut refusals = Refusals::default();
    let by_address = limits.max_connections_per_address.map(|max| {
        Arc::new(ByAddress {
            max,
            open: parking_lot::Mutex::default(),
        })
    });
    let mut address_refusals = Refusals::default();
    let proxies = super::proxies::TrustedProxies::new(&limits.trusted_proxies);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => (tcp, peer),
                Err(e) if per_connection(&e) => continue,
                Err(e) => {
                    // Out of file descriptors and the like: wait rather
                    // than spin; open connections go on being served.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            refuse(tcp);
            refusals.refused(cap);
            continue;
        };
        refusals.accepted();
        // A trusted proxy's connections carry many clients: they are not
        // bounded per address (each request counts as its client's).
        let proxied = proxies.trusts(peer.ip());
        let address_slot = match &by_address {
            Some(_) if proxied => None,
            Some(by) => match by.enter(peer) {
                Some(slot) => Some(slot),
                None => {
                    refuse(tcp);
                    address_refusals.refused_from(peer, by.max);
                    continue;
                }
            },
            None => None,
        };
        let slot = Slots {
            _server: slot,
            _address: address_slot,
        };
        // Small writes (streamed events) must not wait for Nagle.
        let _ = tcp.set_nodelay(true);
        let requests = Arc::new(AtomicU64::new(0));
        let mut service = Service {
            router: router.clone(),
            direct: Arc::new(Direct {
                rpc: direct.rpc.clone(),
                card: direct.card.for_connection(),
                metrics: None,
                cors: None,
            }),
            requests: Arc::clone(&requests),
            body_read_timeout: limits.body_read_timeout,
            peer: Some(peer),
            proxies: proxied.then(|| proxies.clone()),
            client_cert: None,
            incoming: if proxied {
                None
            } else {
                direct.rpc.handler.incoming_gate(Some(peer))
            },
        };
        let metrics = direct.metrics.clone();
        let cors = direct.cors.clone();
        let observed_peer = crate::observe::Peer {
            addr: Some(peer),
            proxies: proxied.then(|| proxies.clone()),
        };
        let head = HeadClock::new();
        let mut builder = builder.clone();
        builder.http1().timer(HeadTimer(Arc::clone(&head)));
        let periods = [limits.request_head_timeout, limits.idle_timeout];
        let stop = stop.clone();
        let Some(tls) = &tls else {
            let service = crate::observe::layers(service, metrics, cors.as_ref(), observed_peer);
            let conn = builder
                .serve_connection(TokioIo::new(Either::Left(tcp)), service)
                .into_owned();
            tokio::spawn(watch(conn, requests, head, periods, stop, slot));
            continue;
        };
        let acceptor = tls.acceptor();
        let handshake_timeout = tls.handshake_timeout;
        tokio::spawn(async move {
            // The handshake in the connection's own task, bounded: a slow
            // client holds its slot only this long.
            let accepting = acceptor.accept(tcp).into_fallible();
            let stream = match tokio::time::timeout(handshake_timeout, accepting).await {
                Ok(Ok(stream)) => stream,
                Ok(Err((e, tcp))) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    close_refused(tcp).await;
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            service.client_cert = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .and_then(super::tls::principal_of)
                .map(crate::auth::ClientCertificate::new);
            let service = crate::observe::layers(service, metrics, cors.as_ref(), observed_peer);
            let conn = builder
                .serve_connection(TokioIo::new(Either::Right(Box::new(stream))), service)
                .into_owned();
            watch(conn, requests, head, periods, stop, slot).await;
        });
    }
    drop(listener);
    stop.cancel();
    // Every connection holds a slot until it ends.
    let _ = slots
        .acquire_many(u32::try_from(cap).unwrap_or(u32::MAX))
        .await;
    Ok(())
}

/// Closes a connection whose TLS handshake failed (the alert saying why
/// was written by the handshake) without resetting it: the write side is
/// shut down, then what the client sent already (its request, written as
/// soon as its side of the handshake ended) is read and dropped until it
/// closes too, for at most a second. Dropped at once with unread data, the
/// socket would be reset, which can discard the alert before the client
/// reads it, and a client could then be left waiting for an answer.
async fn close_refused(mut tcp: TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    if tcp.shutdown().await.is_err() {
        return;
    }
    let drain = async {
        let mut buf = [0u8; 1024];
        // At most 64 KiB: a client may not make the server read for it.
        for _ in 0..64 {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
}

/// Runs one connection until it ends, holding its `slot`. It is shut down
/// gracefully (responses under way finish, then it closes) when no request
/// came in a whole period, the request-head timeout for the first request
/// (a client that connects and sends nothing, which HTTP/1's own timer
/// does not see before the protocol is known) and the idle timeout after,
/// or when the server stops. Its timer also wakes it for the HTTP/1 head
/// timeout (`head`, see `head_timer.rs`).
fn watch(
    conn: Connection,
    requests: Arc<AtomicU64>,
    head: Arc<HeadClock>,
    [first, idle]: [Duration; 2],
    stop: CancellationToken,
    slot: Slots,
) -> Watch {
    let alarm = Arc::new(Alarm::default());
    let period_end = tokio::time::Instant::now() + first;
    Watch {
        conn,
        timer: tokio::time::sleep_until(period_end),
        period_end,
        head,
        stopped: stop.cancelled_owned(),
        alarm_waker: std::task::Waker::from(Arc::clone(&alarm)),
        alarm,
        requests,
        idle,
        seen: 0,
        closing: false,
        _slot: slot,
    }
}

pin_project_lite::pin_project! {
    /// The future of [`watch`], the whole task of a connection.
    ///
    /// The connection is polled at every wake of the task (each read,
    /// write and response of every request), the period's timer and the
    /// stop signal only when one of them woke it ([`Alarm`]): polling them
    /// every time (what a `select!` does) took a timer registration and a
    /// cancellation check per wake, several per request.
    ///
    /// A future of its own rather than an `async fn`: an `async fn` keeps
    /// its argument and the pinned local it is moved to as two fields of
    /// its state, and the connection (about 2 KiB) is most of the memory a
    /// held stream costs the server after its buffers.
    struct Watch {
        #[pin]
        conn: Connection,
        // Armed at the period's end, or earlier at the deadline of an
        // HTTP/1 request head awaited.
        #[pin]
        timer: tokio::time::Sleep,
        period_end: tokio::time::Instant,
        head: Arc<HeadClock>,
        #[pin]
        stopped: tokio_util::sync::WaitForCancellationFutureOwned,
        alarm: Arc<Alarm>,
        alarm_waker: std::task::Waker,
        // Requests received on the connection, and as many as the timer
        // saw when it last fired.
        requests: Arc<AtomicU64>,
        seen: u64,
        idle: Duration,
        closing: bool,
        _slot: Slots,
    }
}

impl Future for Watch {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        loop {
            if let Poll::Ready(ended) = this.conn.as_mut().poll(cx) {
                if let Err(e) = ended {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return Poll::Ready(());
            }
            // A head awaited before the timer's alarm: the timer is moved
            // to its deadline (rarely: later heads have later deadlines).
            if let Some(deadline) = this.head.awaited()
                && deadline < this.timer.deadline().into_std()
            {
                this.timer.as_mut().reset(deadline.into());
            }
            // Registered before the flag is read: an alarm after this
            // point wakes this task again.
            this.alarm.task.register(cx.waker());
            if !this.alarm.fired.swap(false, Ordering::AcqRel) {
                return Poll::Pending;
            }
            let mut alarm_cx = Context::from_waker(this.alarm_waker);
            let mut close = !*this.closing && this.stopped.as_mut().poll(&mut alarm_cx).is_ready();
            let mut head_expired = false;
            while this.timer.as_mut().poll(&mut alarm_cx).is_ready() {
                let now = tokio::time::Instant::now();
                if now >= *this.period_end {
                    // A period without a request closes the connection
                    // (once: a closing one is not closed again).
                    let seen = this.requests.load(Ordering::Relaxed);
                    close |= !*this.closing && seen == *this.seen;
                    *this.seen = seen;
                    *this.period_end = now + *this.idle;
                }
                // A closing connection may still wait for a head: its
                // timeout ends it.
                head_expired |= this.head.expire(now.into_std());
                let next = match this.head.awaited().map(tokio::time::Instant::from_std) {
                    Some(deadline) if deadline > now => deadline.min(*this.period_end),
                    _ => *this.period_end,
                };
                this.timer.as_mut().reset(next);
            }
            if close {
                // The connection is polled again at once, to begin its
                // shutdown.
                this.conn.as_mut().graceful_shutdown();
                *this.closing = true;
            } else if !head_expired {
                return Poll::Pending;
            }
            // Polled again: a head whose timeout is ready ends the
            // connection.
        }
    }
}

/// What woke [`watch`] when its timer or stop signal did: the flag tells it
/// to poll them, and the connection's task is woken.
struct Alarm {
    fired: std::sync::atomic::AtomicBool,
    task: futures::task::AtomicWaker,
}

impl Default for Alarm {
    /// Fired: the first poll polls the timer and the stop signal, which
    /// registers them.
    fn default() -> Self {
        Self {
            fired: std::sync::atomic::AtomicBool::new(true),
            task: futures::task::AtomicWaker::new(),
        }
    }
}

impl std::task::Wake for Alarm {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.fired.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// One connection, HTTP/1.1 or HTTP/2. The TLS stream is boxed: inline,
/// its 1.2 KiB would be part of every plain connection too (hyper keeps
/// the stream in a variant as large as its largest).
type Connection = auto::Connection<
    'static,
    TokioIo<Either<TcpStream, Box<tokio_rustls::server::TlsStream<TcpStream>>>>,
    crate::observe::Observed<Service>,
    TokioExecutor,
>;

/// A request body with a time limit: once the server waits for the body,
/// the rest of it must arrive within the limit, or reading it fails.
///
/// Written here because tower-http's `TimeoutBody` restarts its timer at
/// every frame, so a client sending a byte at a time is never cut off;
/// here the body as a whole has one deadline. The timer is only created
/// when the body is not there yet: a body that came with the head (the
/// usual case) costs nothing.
///
/// It also counts the body's bytes toward its caller's bound on bytes
/// being received (`handler/incoming.rs`).
pub(crate) struct TimedBody {
    body: Incoming,
    timeout: Duration,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The body's count at its connection's gate (`None`: not counted).
    count: Option<crate::handler::BodyCount>,
}

impl TimedBody {
    /// Counts `arrived` more bytes: the error ending the body when the
    /// bound refuses them (nothing more is counted then).
    fn over_bound(&mut self, arrived: usize) -> Option<Box<dyn std::error::Error + Send + Sync>> {
        let refused = self.count.as_mut()?.arrived(arrived).err()?;
        self.count = None;
        Some(Box::new(refused))
    }
}

/// The error of a body that came too slowly.
#[derive(Debug)]
struct BodyTimedOut(Duration);

impl std::fmt::Display for BodyTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the request body did not arrive within {}s",
            self.0.as_secs_f64()
        )
    }
}

impl std::error::Error for BodyTimedOut {}

impl hyper::body::Body for TimedBody {
    type Data = bytes::Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if let Some(refused) = this.over_bound(0) {
            return Poll::Ready(Some(Err(refused)));
        }
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let arrived = frame.data_ref().map_or(0, bytes::Bytes::len);
                match this.over_bound(arrived) {
                    Some(refused) => Poll::Ready(Some(Err(refused))),
                    None => Poll::Ready(Some(Ok(frame))),
                }
            }
            Poll::Ready(frame) => Poll::Ready(frame.map(|f| f.map_err(Into::into))),
            Poll::Pending => {
                let timeout = this.timeout;
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimedOut(timeout))))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// Accept errors that concern one connection only (it went away before it
/// was accepted).
fn per_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_well_formed_answer() {
        let text = std::str::from_utf8(REFUSED).expect("text");
        let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
        assert!(head.starts_with("HTTP/1.1 503 "), "{head}");
        assert!(
            head.lines()
                .any(|l| l == format!("content-length: {}", body.len())),
            "{head}"
        );
    }

    /// What a held connection costs the server besides its buffers: its
    /// task's future. An `async fn` watch (the connection stored twice) or
    /// an inline TLS stream made it 6 KiB; the bound catches both.
    #[test]
    fn a_connection_task_stays_small() {
        let size = std::mem::size_of::<Watch>();
        assert!(size < 2560, "a connection's future is {size} bytes");
    }

    #[test]
    fn the_connection_cap_is_bounded() {
        let mut limits = ConnectionLimits::default();
        let by_default = limits.connection_cap();
        assert!((16..=DEFAULT_MAX_CONNECTIONS).contains(&by_default));
        limits.max_connections = Some(0);
        assert_eq!(limits.connection_cap(), 1);
        limits.max_connections = Some(usize::MAX);
        assert_eq!(limits.connection_cap(), u32::MAX as usize);
    }
}
