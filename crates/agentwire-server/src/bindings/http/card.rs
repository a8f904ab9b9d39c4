//! The agent card endpoint (`GET /.well-known/agent-card.json`).
//!
//! # Which card a request gets
//!
//! Two forms of the card may be served, decided by the protocol version
//! the request names: the `A2A-Version` header, else the `A2A-Version`
//! query parameter (spec 3.6.1).
//!
//! - `1.x` (or any version other than 0.x): the 1.0 card as it is, which
//!   validates against the 1.0 JSON schema. The official 1.0 SDK clients
//!   send `A2A-Version: 1.0` when they fetch the card, as does this
//!   project's client.
//! - No version, an empty one or `0.x`, while 0.3 is served (the default):
//!   the 1.0 card with the members 0.3 clients read added beside its own
//!   (`url`, `preferredTransport`, `protocolVersion`...: see
//!   `compat::v0_3::card`). An empty version means 0.3 (spec 3.6.2), and
//!   the official 0.3 SDK clients send none; a 1.0 reader that sends none
//!   still reads this card (it ignores the members it does not know).
//! - With 0.3 turned off, the 1.0 card whatever the request says.
//!
//! When both forms are served, every answer says `Vary: A2A-Version`, and
//! each form has its own `ETag`. A signed card is signed in each form as
//! it is served (`compat::v0_3::card::v03_card`).
//!
//! # Caching (spec 8.6)
//!
//! `Cache-Control: public, max-age=N` (300 s unless the deployment
//! chooses: [`crate::A2aServer::card_max_age`]; 0 sends `no-cache`), an
//! `ETag` (a hash of the bytes served) and `Last-Modified` (when the
//! endpoint was set up: the card cannot change later in this process);
//! conditional requests (`If-None-Match`, else `If-Modified-Since`) are
//! answered `304 Not Modified`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, Uri, header};

use crate::handler::RequestHandler;

/// How long clients may keep the agent card without asking again, unless
/// the deployment chooses (spec 8.6.1: a `max-age` suited to how often the
/// card changes; a card changes when the agent is redeployed).
pub(crate) const DEFAULT_CARD_MAX_AGE: Duration = Duration::from_secs(300);

/// The header naming the protocol version, which decides the form served.
static VARY_VERSION: HeaderValue = HeaderValue::from_static("A2A-Version");

/// One form of the card: its bytes and their `ETag`.
#[derive(Clone)]
struct Form {
    body: Bytes,
    etag: HeaderValue,
}

impl Form {
    fn new(body: Vec<u8>) -> Self {
        use std::hash::{Hash, Hasher};
        let body = Bytes::from(body);
        let mut h = std::collections::hash_map::DefaultHasher::new();
        body.hash(&mut h);
        let etag = HeaderValue::from_str(&format!("\"{:016x}\"", h.finish()))
            .unwrap_or_else(|_| HeaderValue::from_static("\"card\""));
        Self { body, etag }
    }

    fn for_connection(&self) -> Self {
        Self {
            body: self.body.clone(),
            etag: own(&self.etag),
        }
    }
}

/// A header value in an allocation of its own.
fn own(v: &HeaderValue) -> HeaderValue {
    HeaderValue::from_bytes(v.as_bytes()).unwrap_or_else(|_| v.clone())
}

/// The agent card endpoint (spec 8.6): pre-serialized bytes of each form
/// served, with an `ETag`, `Last-Modified` and `Cache-Control`, answering
/// conditional requests with `304 Not Modified`. See the module's
/// documentation for the forms.
#[derive(Clone)]
pub(crate) struct CardEndpoint {
    /// The 1.0 card.
    v1: Form,
    /// The card with the 0.3 members, when 0.3 is served.
    v03: Option<Form>,
    last_modified: HeaderValue,
    /// `last_modified` as a time (whole seconds).
    modified: SystemTime,
    cache_control: HeaderValue,
}

impl CardEndpoint {
    /// `max_age`: `None` or zero sends `no-cache` (clients revalidate the
    /// card before each use).
    pub(crate) fn new(handler: &RequestHandler, max_age: Option<Duration>) -> Self {
        let v1 = Form::new(handler.agent_card_json().to_vec());
        let v03 = handler.serves_v03().then(|| {
            Form::new(crate::compat::v0_3::card::v03_card(
                handler,
                handler.agent_card(),
                true,
            ))
        });
        // HTTP dates have whole seconds.
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(UNIX_EPOCH, |d| {
                UNIX_EPOCH + Duration::from_secs(d.as_secs())
            });
        let last_modified = HeaderValue::from_str(&httpdate::fmt_http_date(now))
            .unwrap_or_else(|_| HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT"));
        let cache_control = match max_age.map(|a| a.as_secs()) {
            Some(secs) if secs > 0 => HeaderValue::from_str(&format!("public, max-age={secs}"))
                .unwrap_or_else(|_| HeaderValue::from_static("no-cache")),
            _ => HeaderValue::from_static("no-cache"),
        };
        Self {
            v1,
            v03,
            last_modified,
            modified: now,
            cache_control,
        }
    }

    /// A copy for one connection: its header values in allocations of its
    /// own (cloned for every answer; see `serving::accept::Service`).
    pub(crate) fn for_connection(&self) -> Self {
        Self {
            v1: self.v1.for_connection(),
            v03: self.v03.as_ref().map(Form::for_connection),
            last_modified: own(&self.last_modified),
            modified: self.modified,
            cache_control: own(&self.cache_control),
        }
    }

    /// The form a request gets (see the module's documentation).
    fn form(&self, headers: &HeaderMap, uri: &Uri) -> &Form {
        let Some(v03) = &self.v03 else {
            return &self.v1;
        };
        let query;
        let version = match headers.get(&crate::handler::A2A_VERSION) {
            // A value that is not text names no version 0.3 knows.
            Some(v) => Some(v.to_str().unwrap_or("?")),
            None => {
                query = uri
                    .query()
                    .and_then(|q| super::query_value(q, "A2A-Version"));
                query.as_deref()
            }
        };
        match version.map(str::trim) {
            None | Some("") => v03,
            Some(v) if v.starts_with("0.") || v == "0" => v03,
            Some(_) => &self.v1,
        }
    }

    /// Whether the client's copy is current (RFC 9110 13.1: `If-None-Match`,
    /// weak comparison; `If-Modified-Since` only without it).
    fn not_modified(&self, form: &Form, headers: &HeaderMap) -> bool {
        if let Some(v) = headers.get(header::IF_NONE_MATCH) {
            let Ok(v) = v.to_str() else { return false };
            let ours = form.etag.as_bytes();
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

    pub(crate) fn respond(&self, headers: &HeaderMap, uri: &Uri) -> Response {
        let form = self.form(headers, uri);
        let mut r = if self.not_modified(form, headers) {
            let mut r = Response::new(Body::empty());
            *r.status_mut() = StatusCode::NOT_MODIFIED;
            r
        } else {
            let mut r = Response::new(Body::from(form.body.clone()));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            r
        };
        let h = r.headers_mut();
        h.insert(header::CACHE_CONTROL, self.cache_control.clone());
        h.insert(header::ETAG, form.etag.clone());
        h.insert(header::LAST_MODIFIED, self.last_modified.clone());
        if self.v03.is_some() {
            h.insert(header::VARY, VARY_VERSION.clone());
        }
        h.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
        r
    }
}
