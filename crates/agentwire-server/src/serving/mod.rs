//! Serving and assembly: how the pieces become a running server.
//!
//! - `server`: [`A2aServer`] (the builder an agent author uses), what it
//!   assembles when it binds (the request handler with its store, push
//!   sender and bus; the card's interfaces; crash recovery and
//!   retention), [`BoundServer`] and [`ServerHandle`], and the axum
//!   [`router`] that carries every binding on one port.
//! - `accept`: the accept loop, one hyper connection per TCP connection
//!   (HTTP/1.1 and h2c on the same port), with the two most frequent
//!   requests answered before the router. Limits on connections (head
//!   and body read times, idle time, how many at once) belong here.
//! - `head_timer`: the HTTP/1 request-head timeout, kept by each
//!   connection's task with one timer rather than one per request.
//! - `local`: [`listen_local`], an agent run from a terminal: bind
//!   127.0.0.1 and the port given on the command line, then print.
//! - `tls`: [`TlsConfig`] (certificate and key files, reloaded when they
//!   change; client certificates for mutual TLS).
//!
//! [`A2aServer`]: crate::A2aServer
//! [`BoundServer`]: crate::BoundServer
//! [`ServerHandle`]: crate::ServerHandle
//! [`router`]: crate::router
//! [`TlsConfig`]: crate::TlsConfig
//! [`listen_local`]: crate::listen_local

pub(crate) mod accept;
pub(crate) mod head_timer;
pub(crate) mod local;
pub(crate) mod proxies;
pub(crate) mod router;
pub(crate) mod server;
pub(crate) mod tls;
