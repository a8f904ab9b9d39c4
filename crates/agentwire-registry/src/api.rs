//! The HTTP API: the ARD endpoints (`POST /search`, `GET /agents`,
//! `POST /explore`), the catalog (`/.well-known/ai-catalog.json`), and the
//! registry's own extensions: `POST /route`, `GET /agents/{ref}` and the
//! publishing API (`POST /agents`, `PUT` and `DELETE /agents/{identifier}`,
//! `POST /catalogs` to register the agents of an AI catalog; authenticated).

use std::sync::Arc;

use agentwire_client::registry::{
    CATALOG_MEDIA_TYPE, CATALOG_PATH, ExploreRequest, IngestRequest, ListRequest, PublishRequest,
    RouteRequest, SearchRequest,
};
use agentwire_server::Authenticator;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use http::{HeaderMap, StatusCode, header};
use serde::Deserialize;

use crate::Registry;
use crate::error::ApiError;

/// What the handlers share.
#[derive(Clone)]
pub struct ApiState {
    /// The registry.
    pub registry: Registry,
    /// Who may publish.
    pub authenticator: Arc<dyn Authenticator>,
}

/// The API router (state included).
pub fn router(state: ApiState) -> Router {
    Router::new()
        .route(CATALOG_PATH, get(catalog))
        .route("/search", post(search))
        .route("/explore", post(explore))
        .route("/route", post(route))
        .route("/agents", get(list).post(publish))
        .route("/catalogs", post(ingest))
        .route(
            "/agents/{identifier}",
            get(get_entry).put(update).delete(withdraw),
        )
        .with_state(state)
}

fn json_body<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("invalid request body: {e}")))
}

fn json_response(status: StatusCode, value: &impl serde::Serialize) -> Response {
    match serde_json::to_vec(value) {
        Ok(b) => (status, [(header::CONTENT_TYPE, "application/json")], b).into_response(),
        Err(e) => ApiError::internal(e.to_string()).into_response(),
    }
}

/// An answer with an `ETag`, or `304` when the client has it.
fn cacheable(headers: &HeaderMap, body: Vec<u8>, media_type: &'static str) -> Response {
    let etag = format!(
        "\"{}\"",
        ring::digest::digest(&ring::digest::SHA256, &body)
            .as_ref()
            .iter()
            .take(12)
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    with_etag(headers, body, &etag, media_type)
}

fn with_etag(headers: &HeaderMap, body: Vec<u8>, etag: &str, media_type: &'static str) -> Response {
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let common = [
        (header::ETAG, etag.to_owned()),
        (header::CACHE_CONTROL, "no-cache".to_owned()),
    ];
    if matches {
        return (StatusCode::NOT_MODIFIED, common).into_response();
    }
    (
        StatusCode::OK,
        common,
        [(header::CONTENT_TYPE, media_type)],
        body,
    )
        .into_response()
}

async fn catalog(State(s): State<ApiState>, headers: HeaderMap) -> Response {
    let (body, etag) = s.registry.catalog();
    with_etag(&headers, body.as_ref().clone(), &etag, CATALOG_MEDIA_TYPE)
}

async fn search(State(s): State<ApiState>, body: Bytes) -> Result<Response, ApiError> {
    let request: SearchRequest = json_body(&body)?;
    let answer = s.registry.search(request).await?;
    Ok(json_response(StatusCode::OK, &answer))
}

async fn explore(State(s): State<ApiState>, body: Bytes) -> Result<Response, ApiError> {
    let request: ExploreRequest = json_body(&body)?;
    Ok(json_response(
        StatusCode::OK,
        &s.registry.explore(&request)?,
    ))
}

async fn route(State(s): State<ApiState>, body: Bytes) -> Result<Response, ApiError> {
    let request: RouteRequest = json_body(&body)?;
    Ok(json_response(
        StatusCode::OK,
        &s.registry.route_async(request).await?,
    ))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListParams {
    filter: Option<String>,
    order_by: Option<String>,
    page_size: Option<String>,
    page_token: Option<String>,
}

async fn list(
    State(s): State<ApiState>,
    headers: HeaderMap,
    Query(p): Query<ListParams>,
) -> Result<Response, ApiError> {
    let page_size = match p.page_size.as_deref() {
        None | Some("") => None,
        Some(v) => Some(v.parse::<u32>().map_err(|_| {
            ApiError::invalid(format!("pageSize {v:?} is not a number (1 to 100)"))
        })?),
    };
    let answer = s.registry.list(&ListRequest {
        filter: p.filter,
        order_by: p.order_by,
        page_size,
        page_token: p.page_token,
    })?;
    let body = serde_json::to_vec(&answer).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(cacheable(&headers, body, "application/json"))
}

async fn get_entry(
    State(s): State<ApiState>,
    headers: HeaderMap,
    Path(reference): Path<String>,
) -> Result<Response, ApiError> {
    let e = s.registry.get(&reference)?;
    let body = serde_json::to_vec(&e.entry).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(cacheable(&headers, body, "application/json"))
}

fn principal(s: &ApiState, headers: &HeaderMap) -> Result<String, ApiError> {
    match s.authenticator.authenticate(headers) {
        Ok(Some(p)) => Ok(p),
        Ok(None) => Err(ApiError::unauthenticated(
            "publishing needs credentials: send Authorization: Bearer <token> (a2a registry publish --bearer, or A2ACLI_BEARER)",
        )),
        Err(e) => Err(ApiError::unauthenticated(e.message.clone())),
    }
}

async fn publish(
    State(s): State<ApiState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let who = principal(&s, &headers)?;
    let request: PublishRequest = json_body(&body)?;
    let answer = s.registry.publish(&who, request, None).await?;
    let status = if answer.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(json_response(status, &answer))
}

async fn ingest(
    State(s): State<ApiState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let who = principal(&s, &headers)?;
    let request: IngestRequest = json_body(&body)?;
    let answer = s.registry.ingest(&who, &request.url).await?;
    Ok(json_response(StatusCode::OK, &answer))
}

async fn update(
    State(s): State<ApiState>,
    headers: HeaderMap,
    Path(identifier): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let who = principal(&s, &headers)?;
    let request: PublishRequest = json_body(&body)?;
    let answer = s.registry.publish(&who, request, Some(&identifier)).await?;
    Ok(json_response(StatusCode::OK, &answer))
}

async fn withdraw(
    State(s): State<ApiState>,
    headers: HeaderMap,
    Path(identifier): Path<String>,
) -> Result<Response, ApiError> {
    let who = principal(&s, &headers)?;
    s.registry.withdraw(&who, &identifier).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
