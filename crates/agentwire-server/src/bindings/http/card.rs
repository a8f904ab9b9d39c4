//! The agent card endpoint (`GET /.well-known/agent-card.json`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, header};

use crate::handler::RequestHandler;

/// The agent card endpoint (spec 8.6): pre-serialized bytes with an
/// `ETag` (a hash of the card), `Last-Modified` (when the endpoint was set
/// up: the card cannot have changed later) and `Cache-Control`, answering
/// conditional requests (`If-None-Match`, else `If-Modified-Since`) with
/// `304 Not Modified`.
///
/// `Cache-Control` is `no-cache` unless a max-age is chosen: clients may
/// keep the card but ask again (a conditional request, answered 304 while
/// the card is the same) before each use, so an agent replaced on the same
/// address is noticed at once. A deployment whose card rarely changes
/// chooses a max-age ([`crate::A2aServer::card_max_age`]).
#[derive(Clone)]
pub(crate) struct CardEndpoint {
    body: Bytes,
    etag: HeaderValue,
    last_modified: HeaderValue,
    /// `last_modified` as a time (whole seconds).
    modified: SystemTime,
    cache_control: HeaderValue,
}

impl CardEndpoint {
    pub(crate) fn new(handler: &RequestHandler, max_age: Option<Duration>) -> Self {
        use std::hash::{Hash, Hasher};
        // The 1.0 card, with the fields 0.3 clients read when 0.3 is served.
        let body = Bytes::from(crate::compat::v0_3::card::with_v03_fields(
            handler.agent_card(),
            &handler.agent_card_json(),
            handler.serves_v03(),
        ));
        let mut h = std::collections::hash_map::DefaultHasher::new();
        body.hash(&mut h);
        let etag = HeaderValue::from_str(&format!("\"{:016x}\"", h.finish()))
            .unwrap_or_else(|_| HeaderValue::from_static("\"card\""));
        // HTTP dates have whole seconds.
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(UNIX_EPOCH, |d| {
                UNIX_EPOCH + Duration::from_secs(d.as_secs())
            });
        let last_modified = HeaderValue::from_str(&httpdate::fmt_http_date(now))
            .unwrap_or_else(|_| HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT"));
        let cache_control = match max_age {
            Some(age) => HeaderValue::from_str(&format!("public, max-age={}", age.as_secs()))
                .unwrap_or_else(|_| HeaderValue::from_static("no-cache")),
            None => HeaderValue::from_static("no-cache"),
        };
        Self {
            body,
            etag,
            last_modified,
            modified: now,
            cache_control,
        }
    }

    /// A copy for one connection: its header values in allocations of its
    /// own (cloned for every answer; see `serving::accept::Service`).
    pub(crate) fn for_connection(&self) -> Self {
        let own =
            |v: &HeaderValue| HeaderValue::from_bytes(v.as_bytes()).unwrap_or_else(|_| v.clone());
        Self {
            body: self.body.clone(),
            etag: own(&self.etag),
            last_modified: own(&self.last_modified),
            modified: self.modified,
            cache_control: own(&self.cache_control),
        }
    }

    /// Whether the client's copy is current (RFC 9110 13.1: `If-None-Match`,
    /// weak comparison; `If-Modified-Since` only without it).
    fn not_modified(&self, headers: &HeaderMap) -> bool {
        if let Some(v) = headers.get(header::IF_NONE_MATCH) {
            let Ok(v) = v.to_str() else { return false };
            let ours = self.etag.as_bytes();
            return v
                .split(',')
                .map(str::trim)
                .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t).as_bytes() == ours);
        }
        headers
            .get(header::IF_MODIFIED_SINCE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| httpdate::parse_http_date(v).ok())
            .is_some_and(|since| self.modified <= since)
    }

    pub(crate) fn respond(&self, headers: &HeaderMap) -> Response {
        let mut r = if self.not_modified(headers) {
            let mut r = Response::new(Body::empty());
            *r.status_mut() = StatusCode::NOT_MODIFIED;
            r
        } else {
            let mut r = Response::new(Body::from(self.body.clone()));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            r
        };
        let h = r.headers_mut();
        h.insert(header::CACHE_CONTROL, self.cache_control.clone());
        h.insert(header::ETAG, self.etag.clone());
        h.insert(header::LAST_MODIFIED, self.last_modified.clone());
        h.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
        r
    }
}
