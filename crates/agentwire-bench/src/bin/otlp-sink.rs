//! `otlp-sink`: a local OTLP/HTTP trace receiver for the benchmark rows
//! with tracing export on.
//!
//! Listens on 127.0.0.1 and answers `POST /v1/traces` (OTLP over HTTP,
//! protobuf) with an empty `ExportTraceServiceResponse` (which encodes as
//! zero bytes), counting the requests and bytes it swallowed;
//! `GET /stats` returns them as JSON. It decodes nothing, so that the
//! benchmark measures the exporting server, not the receiver: written by
//! hand because a collector (or any decoding receiver) would compete with
//! the server for the machine's cores.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{StatusCode, header},
    response::IntoResponse,
    routing::{get, post},
};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    about = "OTLP/HTTP trace sink for the A2A benchmark: accepts and counts exports (127.0.0.1 only)"
)]
struct Args {
    /// TCP port to listen on (127.0.0.1).
    #[arg(long, short, default_value_t = 4318)]
    port: u16,
}

#[derive(Default)]
struct Counts {
    requests: AtomicU64,
    bytes: AtomicU64,
}

async fn traces(State(counts): State<Arc<Counts>>, body: Bytes) -> impl IntoResponse {
    counts.requests.fetch_add(1, Ordering::Relaxed);
    counts.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-protobuf")],
        Bytes::new(),
    )
}

async fn stats(State(counts): State<Arc<Counts>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::json!({
            "requests": counts.requests.load(Ordering::Relaxed),
            "bytes": counts.bytes.load(Ordering::Relaxed),
        })
        .to_string(),
    )
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // One worker: the sink must stay out of the server's way.
    agentwire_bench::server_runtime(Some(1))?.block_on(async move {
        let app = Router::new()
            .route("/v1/traces", post(traces))
            .route("/stats", get(stats))
            .with_state(Arc::new(Counts::default()));
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
        let listener = tokio::net::TcpListener::bind(addr).await?;
        eprintln!("otlp-sink: http://{addr}/v1/traces");
        axum::serve(listener, app).await?;
        Ok::<(), anyhow::Error>(())
    })
}
