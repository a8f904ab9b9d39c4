//! The accept loop: one hyper connection per TCP connection, HTTP/1.1 and
//! h2c (gRPC) on the same port.
//!
//! Written here rather than taken from `axum::serve` for one setting: the
//! HTTP/1 read buffer is capped at [`MAX_HEAD_BYTES`]. Hyper sizes each read
//! to 8 KiB; when part of a request is still in the buffer (a head or body
//! not yet consumed) and the cap is higher, the buffer doubles to 16 KiB and
//! stays that size for the life of the connection. With the cap, every
//! connection keeps one 8 KiB buffer, which is what lets a server hold tens
//! of thousands of open streams in little memory. Bodies are not limited by
//! it (they are read through the buffer in pieces); a request whose head
//! (request line and headers) exceeds it is answered with
//! `431 Request Header Fields Too Large`.

use std::future::Future;
use std::io;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

/// The largest HTTP/1 request head accepted, and the size of each
/// connection's read buffer.
pub const MAX_HEAD_BYTES: usize = 8192;

/// Serves `router` on `listener` until `shutdown` completes, then stops
/// accepting and waits for the open connections to end (the caller bounds
/// that wait).
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
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
        let service = TowerToHyperService::new(router.clone());
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
