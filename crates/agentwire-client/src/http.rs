//! What the two HTTP bindings (JSON-RPC and HTTP+JSON) share: the default
//! `reqwest` client, service parameters as headers, error classification and
//! response plumbing.

use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt, TryStreamExt};
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::error::{ClientError, error_chain};
use crate::sse::{self, SseEvent};
use crate::tap::{Tap, TapCall, Tapped};
use agentwire_types::StreamResponse;

use crate::transport::{Binding, CallOptions, EventStream, LastEventId, end_after_error_with_ids};

/// How long establishing a TCP (and TLS) connection may take with the
/// default HTTP client before the agent counts as unreachable.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes of a response body kept in [`ClientError::Http`].
pub(crate) const MAX_ERROR_BODY: usize = 4096;

/// The most bytes the transports accept by default in one answer of an
/// agent: a whole unary answer (JSON-RPC, HTTP+JSON), one event of a
/// stream (SSE) and one gRPC message; 64 MiB. A task carries its history
/// and artifacts (the server's default lets one artifact grow to 16 MiB,
/// about 21 MiB once base64 in JSON, and a task may have several), so a
/// tighter default would refuse answers a well-behaved agent sends; a
/// larger answer fails with [`ClientError::ResponseTooLarge`] after at most
/// this many bytes were read. Set it with
/// [`crate::ClientBuilder::max_response_bytes`].
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// Makes *ring* the process's rustls crypto provider, unless one is
/// installed already (an application's own choice is kept).
///
/// reqwest is built without a TLS crypto provider of its own, so that one
/// provider, *ring*, serves HTTPS, gRPC over TLS and PostgreSQL TLS alike;
/// building a `reqwest::Client` before the process has a provider panics.
/// The clients this crate builds call this first; call it before building
/// a `reqwest::Client` of your own (for [`crate::ClientBuilder::http_client`]
/// and the like). Calling it again does nothing.
pub fn install_crypto_provider() {
    crypto_provider();
}

/// The process's crypto provider, *ring* installed first when there is
/// none ([`install_crypto_provider`]): the one place where the client
/// names a provider.
pub(crate) fn crypto_provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    if let Some(p) = rustls::crypto::CryptoProvider::get_default() {
        return std::sync::Arc::clone(p);
    }
    let ring = rustls::crypto::ring::default_provider();
    // An error means another thread installed one meanwhile: as good.
    let _ = ring.clone().install_default();
    rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| std::sync::Arc::new(ring))
}

/// The process-wide default HTTP client (connection pool shared by every
/// transport that is not given its own).
pub fn default_http_client() -> reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            install_crypto_provider();
            http_client_builder()
                .build()
                .unwrap_or_else(|_| reqwest::Client::new())
        })
        .clone()
}

/// The settings of the HTTP clients the transports make (a client of your
/// own given to a transport can start from them): connect timeout, no Nagle
/// delay, the user agent, and HTTP/1.1.
///
/// HTTP/1.1 also over TLS, where ALPN would otherwise pick HTTP/2: a
/// request over an HTTP/2 connection that the server closes as soon as the
/// TLS handshake ends, which is how a TLS 1.3 server refuses a client
/// certificate (after the client's side of the handshake completed), was
/// seen to wait for ever, about once in a hundred runs of the mutual-TLS
/// test matrix with other tests running (in reqwest/hyper's HTTP/2 client;
/// never in 200 runs over HTTP/1.1). The JSON-RPC and HTTP+JSON bindings
/// make one exchange per call and stream over SSE, so they lose nothing
/// that matters by it; gRPC (HTTP/2 by definition) has its own client.
pub fn http_client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .http1_only()
        .connect_timeout(DEFAULT_CONNECT_TIMEOUT)
        .tcp_nodelay(true)
        .user_agent(concat!("agentwire/", env!("CARGO_PKG_VERSION")))
}

/// The headers of one call: `A2A-Version`, `A2A-Extensions`, then the
/// caller's service parameters (a parameter with the name of one of the
/// former replaces it, except `A2A-Extensions` which is joined).
pub(crate) fn service_headers(options: &CallOptions) -> Result<HeaderMap, ClientError> {
    let mut headers = HeaderMap::new();
    headers.insert(
        HeaderName::from_static("a2a-version"),
        HeaderValue::from_static(agentwire_types::PROTOCOL_VERSION),
    );
    let extensions_name = HeaderName::from_static("a2a-extensions");
    let mut replaced_version = false;
    for (name, value) in &options.service_params {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            ClientError::InvalidRequest(format!("invalid service parameter name {name:?}"))
        })?;
        let value = HeaderValue::from_str(value).map_err(|_| {
            ClientError::InvalidRequest(format!("invalid value for service parameter {name}"))
        })?;
        if name == "a2a-version" && !replaced_version {
            headers.remove(&name);
            replaced_version = true;
        }
        headers.append(name, value);
    }
    if let Some(ext) = options.extensions_value() {
        let joined = match headers.get(&extensions_name).and_then(|v| v.to_str().ok()) {
            Some(existing) => format!("{existing},{ext}"),
            None => ext,
        };
        let value = HeaderValue::from_str(&joined).map_err(|_| {
            ClientError::InvalidRequest(format!("invalid extension URI in {joined:?}"))
        })?;
        headers.insert(extensions_name, value);
    }
    Ok(headers)
}

/// Classifies a `reqwest` error.
pub(crate) fn map_reqwest_error(e: reqwest::Error, url: &str) -> ClientError {
    if e.is_connect() {
        ClientError::Connect {
            url: url.to_owned(),
            message: connect_message(&e),
            source: Some(Box::new(e)),
        }
    } else if e.is_timeout() {
        ClientError::Timeout {
            url: url.to_owned(),
        }
    } else if e.is_builder() {
        ClientError::InvalidRequest(error_chain(&e))
    } else {
        ClientError::Transport {
            message: error_chain(&e),
            source: Some(Box::new(e)),
        }
    }
}

/// The innermost, most telling part of a connect error ("Connection refused
/// (os error 111)", "dns error: ...").
fn connect_message(e: &reqwest::Error) -> String {
    let mut parts = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = cur {
        parts.push(s.to_string());
        cur = s.source();
    }
    if e.is_timeout() && !parts.iter().any(|p| p.contains("timed out")) {
        parts.push("connect timed out".into());
    }
    parts.retain(|p| !p.is_empty() && p != "client error (Connect)");
    if parts.is_empty() {
        e.to_string()
    } else {
        parts.join(": ")
    }
}

/// Sends a request, bounding the time until the response headers arrive by
/// `timeout` (used for streams, whose body may last long).
pub(crate) async fn send_with_header_timeout(
    rb: reqwest::RequestBuilder,
    timeout: Option<Duration>,
    url: &str,
) -> Result<reqwest::Response, ClientError> {
    let fut = rb.send();
    let res = match timeout {
        Some(d) => tokio::time::timeout(d, fut)
            .await
            .map_err(|_| ClientError::Timeout {
                url: url.to_owned(),
            })?,
        None => fut.await,
    };
    res.map_err(|e| map_reqwest_error(e, url))
}

/// The tap of one call of an HTTP binding: the tap, the binding and the
/// operation.
pub(crate) type HttpTap<'a> = Option<(&'a Tap, Binding, &'static str)>;

/// [`send_with_header_timeout`] (`timeout` `None`: as `rb.send()`), telling
/// the tap, when there is one, the request as built and the response head.
pub(crate) async fn send_tapped(
    rb: reqwest::RequestBuilder,
    timeout: Option<Duration>,
    url: &str,
    tap: HttpTap<'_>,
) -> Result<(reqwest::Response, Option<TapCall>), ClientError> {
    let Some((tap, binding, operation)) = tap else {
        return send_with_header_timeout(rb, timeout, url)
            .await
            .map(|r| (r, None));
    };
    let (client, req) = rb.build_split();
    let req = req.map_err(|e| map_reqwest_error(e, url))?;
    let mut call = tap.http_request(binding, operation, &req);
    let fut = client.execute(req);
    let res = match timeout {
        Some(d) => match tokio::time::timeout(d, fut).await {
            Ok(r) => r,
            Err(_) => {
                let e = ClientError::Timeout {
                    url: url.to_owned(),
                };
                call.end(Some(&e));
                return Err(e);
            }
        },
        None => fut.await,
    };
    match res {
        Ok(resp) => {
            call.http_head(&resp);
            Ok((resp, Some(call)))
        }
        Err(e) => {
            let e = map_reqwest_error(e, url);
            call.end(Some(&e));
            Err(e)
        }
    }
}

/// [`read_body_max`], the body (and the end of the exchange) told to the
/// tap.
pub(crate) async fn read_body_tapped(
    resp: reqwest::Response,
    url: &str,
    call: Option<TapCall>,
    max: usize,
) -> Result<Bytes, ClientError> {
    let res = read_body_max(resp, url, max, "the response").await;
    if let Some(mut call) = call {
        match &res {
            Ok(body) => {
                call.body(body);
                call.end(None);
            }
            Err(e) => call.end(Some(e)),
        }
    }
    res
}

/// One non-streaming exchange: sends the request (told to the tap when
/// there is one) and reads the whole answer, its HTTP status and body (at
/// most `max` bytes).
pub(crate) async fn exchange(
    rb: reqwest::RequestBuilder,
    url: &str,
    tap: HttpTap<'_>,
    max: usize,
) -> Result<(u16, Bytes), ClientError> {
    let (resp, tap) = send_tapped(rb, None, url, tap).await?;
    let status = resp.status().as_u16();
    let body = read_body_tapped(resp, url, tap, max).await?;
    Ok((status, body))
}

/// The answer to a streaming request (as [`send_tapped`] gives it): a
/// successful event-stream answer becomes the stream of its events (each
/// at most `max` bytes), each decoded by `decode`; any other answer is
/// read whole (at most `max` bytes) and handed to `single` with its HTTP
/// status, which makes it an error or the one event of a one-event stream.
pub(crate) async fn event_stream(
    (resp, tap): (reqwest::Response, Option<TapCall>),
    url: &str,
    decode: fn(&SseEvent) -> Option<Result<StreamResponse, ClientError>>,
    single: impl FnOnce(u16, &[u8]) -> Result<StreamResponse, ClientError>,
    max: usize,
) -> Result<EventStream, ClientError> {
    if resp.status().is_success() && is_event_stream(&resp) {
        return Ok(sse_event_stream_tapped(resp, url, decode, tap, max));
    }
    let status = resp.status().as_u16();
    let body = read_body_tapped(resp, url, tap, max).await?;
    let first = single(status, &body)?;
    Ok(EventStream::new(futures::stream::iter([Ok(first)])))
}

/// Reads a whole body, at most [`DEFAULT_MAX_RESPONSE_BYTES`].
pub(crate) async fn read_body(resp: reqwest::Response, url: &str) -> Result<Bytes, ClientError> {
    read_body_max(resp, url, DEFAULT_MAX_RESPONSE_BYTES, "the response").await
}

/// Reads a response's whole body as it arrives, keeping at most
/// `max_bytes`: a body announced larger (`Content-Length`) is refused
/// before it is read, and one that grows past the limit (chunked, or
/// longer than announced) is refused as soon as it does, with
/// [`ClientError::ResponseTooLarge`]; the connection is then dropped.
/// Memory held never exceeds the limit (plus one network chunk).
///
/// ```no_run
/// # async fn demo() -> Result<(), agentwire_client::ClientError> {
/// let resp = reqwest::get("http://127.0.0.1:8080/.well-known/agent-card.json")
///     .await
///     .map_err(|e| agentwire_client::ClientError::InvalidRequest(e.to_string()))?;
/// let body = agentwire_client::read_body_limited(resp, 1 << 20).await?;
/// println!("{} bytes", body.len());
/// # Ok(()) }
/// ```
pub async fn read_body_limited(
    resp: reqwest::Response,
    max_bytes: usize,
) -> Result<Bytes, ClientError> {
    let url = resp.url().to_string();
    read_body_max(resp, &url, max_bytes, "the response").await
}

/// [`read_body_limited`], saying `what` is read from `url` when it is too
/// large.
pub(crate) async fn read_body_max(
    mut resp: reqwest::Response,
    url: &str,
    max: usize,
    what: &str,
) -> Result<Bytes, ClientError> {
    let too_large = || ClientError::ResponseTooLarge {
        what: what.to_owned(),
        url: url.to_owned(),
        limit: max,
    };
    let announced = resp.content_length();
    if announced.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    // The first chunk is kept as it is (most answers are one chunk); more
    // are gathered in a buffer that never grows past the limit.
    let mut first: Option<Bytes> = None;
    let mut gathered: Option<bytes::BytesMut> = None;
    let mut len = 0usize;
    while let Some(chunk) = resp.chunk().await.map_err(|e| map_reqwest_error(e, url))? {
        len = len.saturating_add(chunk.len());
        if len > max {
            return Err(too_large());
        }
        match (&mut gathered, first.take()) {
            (Some(buf), _) => buf.extend_from_slice(&chunk),
            (None, None) => first = Some(chunk),
            (None, Some(f)) => {
                let hint = announced.map_or(len, |n| n as usize).clamp(len, max);
                let mut buf = bytes::BytesMut::with_capacity(hint);
                buf.extend_from_slice(&f);
                buf.extend_from_slice(&chunk);
                gathered = Some(buf);
            }
        }
    }
    Ok(match (gathered, first) {
        (Some(buf), _) => buf.freeze(),
        (None, Some(f)) => f,
        (None, None) => Bytes::new(),
    })
}

/// Whether a response carries an event stream.
pub(crate) fn is_event_stream(resp: &reqwest::Response) -> bool {
    resp.headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
        })
}

/// The events of an SSE response, each at most `max` bytes (a longer
/// event or line ends the stream with [`ClientError::ResponseTooLarge`]).
pub(crate) fn sse_events(
    resp: reqwest::Response,
    url: &str,
    max: usize,
) -> impl Stream<Item = Result<SseEvent, ClientError>> + Send + use<> {
    let shown = url.to_owned();
    let body = resp
        .bytes_stream()
        .map_err(move |e| map_reqwest_error(e, &shown))
        .boxed();
    sse::events(body, url, max)
}

/// The protocol events of an SSE response, each decoded by `decode`
/// (`None`: an event to skip), keeping the id of the last one yielded (the
/// SSE `id:` field; an empty id resets it), each frame told to the tap (if
/// any) as received.
pub(crate) fn sse_event_stream_tapped(
    resp: reqwest::Response,
    url: &str,
    decode: fn(&SseEvent) -> Option<Result<StreamResponse, ClientError>>,
    call: Option<TapCall>,
    max: usize,
) -> EventStream {
    let ids = LastEventId::default();
    let seen = ids.clone();
    let frames = sse_events(resp, url, max);
    let frames = match call {
        None => futures::future::Either::Left(frames),
        Some(mut call) => {
            call.flush_head();
            futures::future::Either::Right(Tapped::new(frames, call, |call, item| match item {
                Ok(ev) => call.sse_frame(ev),
                Err(e) => call.fail(e.to_string()),
            }))
        }
    };
    let events = frames.filter_map(move |ev| {
        let item = match ev {
            Err(e) => Some(Err(e)),
            Ok(ev) => {
                let item = decode(&ev);
                if let Some(Ok(_)) = &item {
                    seen.set(ev.id.filter(|id| !id.is_empty()));
                }
                item
            }
        };
        std::future::ready(item)
    });
    end_after_error_with_ids(events, ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_extensions_and_params() {
        let opts = CallOptions::new()
            .with_service_param("Authorization", "Bearer x")
            .with_extension("urn:a")
            .with_extension("urn:b");
        let h = service_headers(&opts).unwrap();
        assert_eq!(h["a2a-version"], "1.0");
        assert_eq!(h["a2a-extensions"], "urn:a,urn:b");
        assert_eq!(h["authorization"], "Bearer x");
    }

    #[test]
    fn caller_may_replace_the_version_and_join_extensions() {
        let opts = CallOptions::new()
            .with_service_param("A2A-Version", "0.3")
            .with_service_param("A2A-Extensions", "urn:x")
            .with_extension("urn:y");
        let h = service_headers(&opts).unwrap();
        assert_eq!(h.get_all("a2a-version").iter().count(), 1);
        assert_eq!(h["a2a-version"], "0.3");
        assert_eq!(h["a2a-extensions"], "urn:x,urn:y");
    }

    #[test]
    fn bad_header_names_are_request_errors() {
        let opts = CallOptions::new().with_service_param("bad header", "x");
        assert!(matches!(
            service_headers(&opts),
            Err(ClientError::InvalidRequest(_))
        ));
        let opts = CallOptions::new().with_service_param("x-ok", "line\nbreak");
        assert!(matches!(
            service_headers(&opts),
            Err(ClientError::InvalidRequest(_))
        ));
    }
}
