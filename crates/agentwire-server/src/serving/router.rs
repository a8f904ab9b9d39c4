//! The axum router carrying the agent card, JSON-RPC (`POST /`), HTTP+JSON
//! (the REST paths) and gRPC (the `/lf.a2a.v1.A2AService/*` paths, and the
//! A2A 0.3 service's `/a2a.v1.A2AService/*`, HTTP/2), all on one port.

use std::time::Duration;

use agentwire_types::AGENT_CARD_PATH;
use axum::Router;
use axum::routing::{any, get, post};
use http::HeaderMap;

use crate::bindings::http::{CardEndpoint, DEFAULT_MAX_BODY_BYTES, HttpState};
use crate::bindings::{jsonrpc, rest};
use crate::handler::RequestHandler;

/// Options of the HTTP router.
#[derive(Debug, Clone)]
pub struct RouterOptions {
    /// Largest accepted request body (bytes); larger ones are refused with
    /// a clear error.
    pub max_body_bytes: usize,
    /// Serve gRPC on the same port.
    pub grpc: bool,
    /// How long clients may use the agent card without asking again
    /// (`Cache-Control: public, max-age=N`). Default: 5 minutes. `None` or
    /// zero sends `Cache-Control: no-cache`: clients keep the card but
    /// revalidate it before each use (a conditional request, answered
    /// `304 Not Modified` while it is unchanged), so a new card is seen at
    /// once. Every answer carries an `ETag` and a `Last-Modified`.
    pub card_max_age: Option<Duration>,
}

impl Default for RouterOptions {
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            grpc: true,
            card_max_age: Some(crate::bindings::http::DEFAULT_CARD_MAX_AGE),
        }
    }
}

/// The axum router serving `handler` over every binding, to mount in an
/// application of your own or to serve as is.
///
/// Every route is explicit (no fallback), so the router merges into an
/// application that has routes and a fallback of its own (see the
/// `axum_app` example). A path under an A2A route that names no operation
/// (`/tasks/x/y/z`) is answered by the REST binding with an A2A error; any
/// other path is the application's.
pub fn router(handler: RequestHandler, options: &RouterOptions) -> Router {
    let card = CardEndpoint::new(&handler, options.card_max_age);
    router_with_card(handler, options, card, false)
}

/// The router, with a fallback answering every unknown path with an A2A
/// error when `standalone` (the server serves nothing else).
pub(crate) fn router_with_card(
    handler: RequestHandler,
    options: &RouterOptions,
    card: CardEndpoint,
    standalone: bool,
) -> Router {
    let state = HttpState {
        handler: handler.clone(),
        max_body_bytes: options.max_body_bytes,
    };
    let mut router = Router::new()
        .route(
            AGENT_CARD_PATH,
            get(move |headers: HeaderMap, uri: http::Uri| {
                let card = card.clone();
                async move { card.respond(&headers, &uri) }
            }),
        )
        .route("/", post(jsonrpc::handle));
    if let Some(jwks) = handler.push_jwks_json() {
        router = router.route(
            crate::push::JWKS_PATH,
            get(move || async move {
                (
                    [(http::header::CONTENT_TYPE, "application/jwk-set+json")],
                    jwks,
                )
            }),
        );
    }
    if let Some(jwks) = handler.card_jwks_json() {
        router = router.route(
            crate::card_signing::CARD_JWKS_PATH,
            get(move || async move {
                (
                    [(http::header::CONTENT_TYPE, "application/jwk-set+json")],
                    jwks,
                )
            }),
        );
    }
    if options.grpc {
        // The 0.3 service is always mounted: with 0.3 turned off it answers
        // every call with a gRPC status saying so.
        let v03 = crate::compat::v0_3::grpc::service(handler.clone(), options.max_body_bytes);
        router = router.route_service(&crate::compat::v0_3::grpc::route(), v03);
        let grpc = crate::grpc::grpc_service(handler, options.max_body_bytes);
        router = router.route_service("/lf.a2a.v1.A2AService/{method}", grpc);
    }
    for path in agentwire_types::rest_routes::router_paths() {
        router = router
            .route(&path, any(rest::handle))
            .route(&format!("/{{tenant}}{path}"), any(rest::handle));
    }
    if standalone {
        router = router.fallback(rest::handle);
    }
    router.with_state(state)
}
