//! `bare-server`: the baseline for the A2A server benchmark.
//!
//! A bare axum 0.8 server on 127.0.0.1 that
//! * answers `POST /` by parsing the body with serde_json (so JSON decoding
//!   costs the same as in the real server) and returning fixed bytes shaped
//!   like the echo agent's answer to a blocking `SendMessage`;
//! * answers `GET /.well-known/agent-card.json` with a pre-serialized card.
//!
//! It runs no A2A logic: whatever the real server costs on top of this is the
//! price of the protocol implementation.

// The same allocator as the A2A servers (see agent-server.rs), so that the
// comparison measures the A2A logic, not the allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::net::{Ipv4Addr, SocketAddr};

use axum::{
    Router,
    body::Bytes,
    http::{StatusCode, header},
    response::IntoResponse,
    routing::{get, post},
};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Bare axum baseline server for the A2A benchmark (listens on 127.0.0.1 only)")]
struct Args {
    /// TCP port to listen on (127.0.0.1).
    #[arg(long, short, default_value_t = 8099)]
    port: u16,
    /// Tokio worker threads (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
}

const JSON: &str = "application/json";

const PARSE_ERROR: &str =
    r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#;

async fn rpc(body: Bytes) -> impl IntoResponse {
    // Parse the request like a real server would, then discard it.
    match serde_json::from_slice::<serde_json::Value>(&body) {
        Ok(v) => {
            std::hint::black_box(&v);
            (
                [(header::CONTENT_TYPE, JSON)],
                agentwire_bench::SEND_MESSAGE_RESPONSE,
            )
        }
        Err(_) => ([(header::CONTENT_TYPE, JSON)], PARSE_ERROR),
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    agentwire_bench::server_runtime(args.workers)?.block_on(serve(args.port))
}

async fn serve(port: u16) -> anyhow::Result<()> {
    let card = Bytes::from(agentwire_bench::agent_card(port));
    let app = Router::new()
        .route("/", post(rpc))
        .route(
            "/.well-known/agent-card.json",
            get(move || {
                let card = card.clone();
                async move { ([(header::CONTENT_TYPE, JSON)], card) }
            }),
        )
        .fallback(|| async { StatusCode::NOT_FOUND });
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot bind {addr}: {e}"))?;
    eprintln!("bare-server listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}
