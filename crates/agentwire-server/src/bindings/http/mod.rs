//! Pieces shared by the two HTTP bindings: reading bounded bodies, building
//! the call context from headers (and the `A2A-Version` query parameter),
//! Server-Sent Events, JSON answers, and the agent card endpoint
//! (`card.rs`).

mod card;

pub(crate) use card::{CardEndpoint, DEFAULT_CARD_MAX_AGE};

use std::convert::Infallible;
use std::time::Duration;

use agentwire_types::{A2aError, ErrorKind};
use axum::body::Body;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use http_body_util::{BodyExt, Limited};

use crate::handler::{A2A_VERSION, CallContext, RequestHandler};

/// Default limit of a request body.
pub const DEFAULT_MAX_BODY_BYTES: usize = 10 * 1024 * 1024;

/// How often an idle event stream sends a keep-alive comment. Short enough
/// for clients with a 5 s read timeout.
pub(crate) const SSE_KEEP_ALIVE: Duration = Duration::from_secs(4);

/// Shared state of the HTTP bindings.
#[derive(Clone)]
pub(crate) struct HttpState {
    pub(crate) handler: RequestHandler,
    pub(crate) max_body_bytes: usize,
}

/// Reads a body of at most `limit` bytes. A body whose declared length
/// (`Content-Length`) is over the limit is refused before any of it is
/// read; one that turns out longer is refused once the limit is passed.
/// Either error carries `limitBytes` ([`is_too_large`]), answered `413
/// Payload Too Large` by both HTTP bindings.
pub(crate) async fn read_body<B>(body: B, limit: usize) -> Result<Bytes, A2aError>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if body.size_hint().lower() > limit as u64 {
        return Err(too_large(limit));
    }
    match collect(Limited::new(body, limit)).await {
        // The bytes may share the connection's read buffer; that is fine
        // while the request is handled (with the buffer capped, hyper
        // reads into a fresh buffer rather than growing a shared one).
        Ok(bytes) => Ok(bytes),
        Err(e) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                Err(too_large(limit))
            } else if let Some(refused) = refusal_in(&*e) {
                // The bound on bytes being received (`handler/incoming.rs`).
                Err(refused.error())
            } else {
                Err(A2aError::new(
                    ErrorKind::InvalidRequest,
                    format!("could not read the request body: {e}"),
                ))
            }
        }
    }
}

/// The refusal of the bound on bytes being received, wherever it is in
/// `e`'s chain (the router's body type wraps the body's errors).
fn refusal_in<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a crate::handler::IncomingRefused> {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(refused) = e.downcast_ref::<crate::handler::IncomingRefused>() {
            return Some(refused);
        }
        next = e.source();
    }
    None
}

/// The error of a body over the limit.
fn too_large(limit: usize) -> A2aError {
    A2aError::new(
        ErrorKind::InvalidRequest,
        format!("request body exceeds the limit of {limit} bytes"),
    )
    .with_metadata("limitBytes", limit.to_string())
}

/// Whether `e` is [`read_body`]'s refusal of a body over the limit.
pub(crate) fn is_too_large(e: &A2aError) -> bool {
    e.metadata.contains_key("limitBytes")
}

/// A task answer's JSON: the task (`GetTask`), or `{"task": ...}` (the
/// `SendMessage` response), written by the task writer rather than serde.
pub(crate) fn write_task_answer(
    out: &mut Vec<u8>,
    task: &agentwire_types::Task,
    in_send: bool,
) -> serde_json::Result<()> {
    if in_send {
        out.extend_from_slice(b"{\"task\":");
    }
    agentwire_types::fast_json::write_task(out, task)?;
    if in_send {
        out.push(b'}');
    }
    Ok(())
}

/// The data of a body. A body that comes in one frame (the usual case) is
/// returned as it is, without the list `BodyExt::collect` keeps.
async fn collect<B: hyper::body::Body<Data = Bytes>>(body: B) -> Result<Bytes, B::Error> {
    let mut body = std::pin::pin!(body);
    let mut first: Option<Bytes> = None;
    let mut joined: Option<bytes::BytesMut> = None;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else {
            continue; // trailers
        };
        match (&first, &mut joined) {
            (None, _) => first = Some(data),
            (Some(head), None) => {
                let mut all = bytes::BytesMut::with_capacity(head.len() + data.len());
                all.extend_from_slice(head);
                all.extend_from_slice(&data);
                joined = Some(all);
            }
            (Some(_), Some(all)) => all.extend_from_slice(&data),
        }
    }
    Ok(match (joined, first) {
        (Some(all), _) => all.freeze(),
        (None, first) => first.unwrap_or_default(),
    })
}

/// The call context of an HTTP request. `A2A-Version` may also come as a
/// query parameter (spec 3.6.1); the header wins when both are present.
pub(crate) fn call_context(
    mut headers: HeaderMap,
    uri: &Uri,
    extensions: &http::Extensions,
) -> CallContext {
    if !headers.contains_key(&A2A_VERSION) {
        if let Some(v) = uri.query().and_then(|q| query_value(q, "A2A-Version")) {
            if let Ok(v) = HeaderValue::from_str(&v) {
                headers.insert(A2A_VERSION.clone(), v);
            }
        }
    }
    CallContext::new(headers)
        .with_query(uri.query().map(str::to_owned))
        .with_peer(peer_addr(extensions))
        .with_client_cert(extensions.get::<crate::auth::ClientCertificate>().cloned())
}

/// The peer of a request: set by the server's accept loop, or by axum's
/// `into_make_service_with_connect_info::<SocketAddr>()` when the router
/// is served by an application.
pub(crate) fn peer_addr(extensions: &http::Extensions) -> Option<std::net::SocketAddr> {
    extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0)
}

/// The `WWW-Authenticate` challenge of an authentication error (spec 7.4:
/// challenge information with the refusal), if it carries one.
pub(crate) fn challenge(e: &agentwire_types::A2aError) -> Option<HeaderValue> {
    use agentwire_types::ErrorKind;
    if !matches!(
        e.kind,
        ErrorKind::Unauthenticated | ErrorKind::PermissionDenied
    ) {
        return None;
    }
    e.metadata
        .get(crate::auth::WWW_AUTHENTICATE)
        .and_then(|v| HeaderValue::from_str(v).ok())
}

/// The first value of a query parameter (name compared case-insensitively).
pub(crate) fn query_value(query: &str, name: &str) -> Option<String> {
    query_pairs(query)
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
}

/// Decoded `name=value` pairs of a query string.
pub(crate) fn query_pairs(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    query.split('&').filter(|p| !p.is_empty()).map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (decode(k), decode(v))
    })
}

/// Percent-decodes a URL component (`+` is a space in query strings).
pub(crate) fn decode(s: &str) -> String {
    let s = s.replace('+', " ");
    percent_encoding::percent_decode_str(&s)
        .decode_utf8_lossy()
        .into_owned()
}

/// Distinguishes a body that is not JSON at all (parse error) from JSON of
/// the wrong shape (invalid request / params).
pub(crate) fn is_json(body: &[u8]) -> bool {
    serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok()
}

/// An SSE response from a stream of `(event name, event id, data)`.
pub(crate) fn sse_response<S>(events: S) -> Response
where
    S: Stream<Item = (Option<&'static str>, Option<String>, String)> + Send + 'static,
{
    let events = events.map(|(name, id, data)| {
        let mut event = Event::default().data(data);
        if let Some(id) = id {
            event = event.id(id);
        }
        Ok::<_, Infallible>(match name {
            Some(n) => event.event(n),
            None => event,
        })
    });
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(SSE_KEEP_ALIVE))
        .into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// A response with a JSON body and a status.
pub(crate) fn json_response(
    status: StatusCode,
    content_type: &'static str,
    body: Vec<u8>,
) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body sent in the given frames (a trailers frame where `None`).
    fn framed(
        frames: &[Option<&'static str>],
    ) -> impl hyper::body::Body<Data = Bytes, Error = std::convert::Infallible> {
        let frames: Vec<_> = frames
            .iter()
            .map(|f| {
                Ok(match f {
                    Some(text) => hyper::body::Frame::data(Bytes::from_static(text.as_bytes())),
                    None => hyper::body::Frame::trailers(http::HeaderMap::new()),
                })
            })
            .collect();
        http_body_util::StreamBody::new(futures::stream::iter(frames))
    }

    #[tokio::test]
    async fn bodies_are_read_whole_in_any_framing() {
        let read = |frames| read_body(framed(frames), 1024);
        assert_eq!(read(&[]).await.unwrap(), "");
        assert_eq!(read(&[Some("{\"a\":1}")]).await.unwrap(), "{\"a\":1}");
        assert_eq!(
            read(&[Some("ab"), Some(""), Some("cd"), None, Some("e")])
                .await
                .unwrap(),
            "abcde"
        );
        let too_big = read_body(framed(&[Some("0123456789"), Some("0123456789")]), 15)
            .await
            .unwrap_err();
        assert_eq!(too_big.kind, ErrorKind::InvalidRequest);
        assert!(
            too_big.message.contains("limit of 15 bytes"),
            "{}",
            too_big.message
        );
    }

    #[test]
    fn query_parsing() {
        assert_eq!(
            query_value("a=1&A2A-Version=1.0", "a2a-version").as_deref(),
            Some("1.0")
        );
        let pairs: Vec<_> = query_pairs("contextId=a%20b&x=c+d").collect();
        assert_eq!(
            pairs,
            [
                ("contextId".into(), "a b".into()),
                ("x".into(), "c d".into())
            ]
        );
    }
}
