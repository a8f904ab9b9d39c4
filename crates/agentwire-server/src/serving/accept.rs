//! The accept loop: one hyper connection per TCP connection, HTTP/1.1 and
//! h2c (gRPC) on the same port.
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

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::response::Response;
use futures::future::BoxFuture;
use http::{Method, Request};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tower::ServiceExt;

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
}

/// The service of one connection: [`Direct`] paths first, then the router.
///
/// Each connection has its own copy of [`Direct`], in its own allocation:
/// the reference a request's future takes is counted there, on the thread
/// serving the connection, instead of on a counter that every thread of
/// the server updates for every request.
struct Service {
    router: Router,
    direct: Arc<Direct>,
}

impl hyper::service::Service<Request<Incoming>> for Service {
    type Response = Response;
    type Error = Infallible;
    type Future = Answer;

    fn call(&self, request: Request<Incoming>) -> Answer {
        let path = request.uri().path();
        if path == "/" && request.method() == Method::POST {
            let direct = Arc::clone(&self.direct);
            // The head is read here: the boxed future keeps only what the
            // call needs (the headers and the body).
            let (parts, body) = request.into_parts();
            let ctx = call_context(parts.headers, &parts.uri);
            return Answer::Direct(Box::pin(async move {
                crate::bindings::jsonrpc::serve(&direct.rpc, ctx, body).await
            }));
        }
        if path == agentwire_types::AGENT_CARD_PATH && request.method() == Method::GET {
            return Answer::Ready(Some(self.direct.card.respond(request.headers())));
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

/// Serves `router` on `listener` until `shutdown` completes, then stops
/// accepting and waits for the open connections to end (the caller bounds
/// that wait).
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    direct: Direct,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().max_buf_size(MAX_HEAD_BYTES);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
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
        // Small writes (streamed events) must not wait for Nagle.
        let _ = tcp.set_nodelay(true);
        let service = Service {
            router: router.clone(),
            direct: Arc::new(Direct {
                rpc: direct.rpc.clone(),
                card: direct.card.for_connection(),
            }),
        };
        let conn = builder
            .serve_connection(TokioIo::new(tcp), service)
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
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
