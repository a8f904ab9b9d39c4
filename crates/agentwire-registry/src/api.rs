//! The HTTP API: the ARD v0.91 endpoints (`POST /search`, `GET
//! /agents/{identifier}`, `GET /agents`, `POST /explore`), the manifest
//! (`/.well-known/ard.json`, and `/.well-known/ai-catalog.json` of ARD v0.9
//! for older clients), `/robots.txt` with its `Agentmap:` line, and the
//! registry's own extensions: `POST /route`, `GET /agents?name=NAME` and
//! the publishing API (`POST /agents`, `PUT` and `DELETE
//! /agents/{identifier}`, `POST /catalogs` to register the agents of a
//! manifest; authenticated).

use std::sync::Arc;

use agentwire_client::registry::{
    ARD_CONTEXT, ARD_PATH, CATALOG_MEDIA_TYPE, CATALOG_PATH, CatalogEntry, ExploreRequest,
    IngestRequest, ListRequest, PublishRequest, RouteRequest, SearchRequest,
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
        .route(ARD_PATH, get(ard_manifest))
        .route(CATALOG_PATH, get(catalog))
        .route("/robots.txt", get(robots))
        .route("/search", post(search))
        .route("/explore", post(explore))
        .route("/route", post(route))
        .route("/agents", get(list).post(publish))
        .route("/catalogs", post(ingest))
        .route(
            "/agents/{identifier}",
            get(retrieve).put(update).delete(withdraw),
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

/// How long a Retrieve answer (`GET /agents/{identifier}`) may be reused
/// without asking again: `Cache-Control: max-age=60` (with an `ETag`).
pub const RETRIEVE_MAX_AGE_SECS: u32 = 60;
/// How long a `404` of Retrieve may be reused: short, so that an entry
/// published since is soon found (ARD v0.91 5.3.4).
pub const NOT_FOUND_MAX_AGE_SECS: u32 = 5;

async fn ard_manifest(State(s): State<ApiState>, headers: HeaderMap) -> Response {
    let (body, etag) = s.registry.ard_manifest();
    with_etag(&headers, body.as_ref().clone(), &etag, "application/json")
}

/// `robots.txt`: crawlers welcome, and the `Agentmap:` line of ARD v0.91
/// 5.1 pointing at the manifest.
async fn robots(State(s): State<ApiState>) -> Response {
    let base = s.registry.base_url();
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!(
            "User-agent: *\nAllow: /\nAgentmap: {}{ARD_PATH}\n",
            base.trim_end_matches('/')
        ),
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
    /// This registry's extension: the entries a name designates.
    name: Option<String>,
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
    if let Some(name) = p.name.as_deref().filter(|n| !n.trim().is_empty()) {
        let items: Vec<CatalogEntry> = s
            .registry
            .named(name)
            .iter()
            .take(page_size.map_or(20, |n| n.clamp(1, 100) as usize))
            .map(|e| e.entry.clone())
            .collect();
        let answer = agentwire_client::registry::ListResponse {
            total: Some(items.len() as u64),
            items,
            page_token: None,
        };
        let body = serde_json::to_vec(&answer).map_err(|e| ApiError::internal(e.to_string()))?;
        return Ok(cacheable(&headers, body, "application/json"));
    }
    let answer = s.registry.list(&ListRequest {
        filter: p.filter,
        order_by: p.order_by,
        page_size,
        page_token: p.page_token,
    })?;
    let body = serde_json::to_vec(&answer).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(cacheable(&headers, body, "application/json"))
}

/// ARD v0.91 Retrieve: the path segment percent-decoded exactly once,
/// checked against the identifier syntax (`400 INVALID_ARGUMENT`), looked
/// up exactly in this registry's index (`404 NOT_FOUND`, reusable for
/// [`NOT_FOUND_MAX_AGE_SECS`]); the entry with the ARD base context, an
/// `ETag` and `Cache-Control: max-age=`[`RETRIEVE_MAX_AGE_SECS`], `304` on
/// a matching `If-None-Match`.
async fn retrieve(State(s): State<ApiState>, headers: HeaderMap, uri: http::Uri) -> Response {
    // The raw segment (axum's path extractors decode it already): the
    // route's one segment is the path's last.
    let raw = uri
        .path()
        .rsplit_once('/')
        .map(|(_, s)| s)
        .unwrap_or_default();
    let identifier = match decode_segment(raw) {
        Ok(id) => id,
        Err(e) => return ApiError::invalid(e).into_response(),
    };
    let found = match s.registry.retrieve(&identifier) {
        Ok(e) => e,
        Err(e) if e.status == StatusCode::NOT_FOUND => {
            let mut r = e.into_response();
            r.headers_mut().insert(
                header::CACHE_CONTROL,
                http::HeaderValue::from_str(&format!("max-age={NOT_FOUND_MAX_AGE_SECS}"))
                    .unwrap_or_else(|_| http::HeaderValue::from_static("no-cache")),
            );
            return r;
        }
        Err(e) => return e.into_response(),
    };
    let entry = CatalogEntry {
        context: Some(serde_json::Value::String(ARD_CONTEXT.to_owned())),
        ..found.entry.clone()
    };
    let body = match serde_json::to_vec(&entry) {
        Ok(b) => b,
        Err(e) => return ApiError::internal(e.to_string()).into_response(),
    };
    let mut r = cacheable(&headers, body, "application/json");
    if let Ok(v) = http::HeaderValue::from_str(&format!("max-age={RETRIEVE_MAX_AGE_SECS}")) {
        r.headers_mut().insert(header::CACHE_CONTROL, v);
    }
    r
}

/// One path segment, percent-decoded once: a `%` must start two hex
/// digits, and the result must be UTF-8.
fn decode_segment(raw: &str) -> Result<String, String> {
    let bytes = raw.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'%'
            && !(bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
        {
            return Err(format!(
                "invalid percent-encoding in the identifier {raw:?}: encode it as one path \
                 segment (urn%3Aair%3A...)"
            ));
        }
    }
    percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| format!("the identifier {raw:?} is not UTF-8 once percent-decoded"))
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

#[cfg(test)]
mod tests {
    use super::decode_segment;

    #[test]
    fn segments_are_decoded_once() {
        assert_eq!(
            decode_segment("urn%3Aair%3Aa.example%3Aagent%3Ax").unwrap(),
            "urn:air:a.example:agent:x"
        );
        assert_eq!(
            decode_segment("urn:air:a.example:x").unwrap(),
            "urn:air:a.example:x"
        );
        // Once: %253A stays %3A.
        assert_eq!(decode_segment("a%253A").unwrap(), "a%3A");
        assert!(decode_segment("urn%3").is_err());
        assert!(decode_segment("urn%zz").is_err());
        assert!(decode_segment("%ff%fe").is_err());
    }
}
