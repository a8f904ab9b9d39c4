//! The gRPC binding (spec 10) over a tonic [`Channel`], using the client
//! stub generated from the project's proto.

use std::time::Duration;

use agentwire_types::limits::{ContentCheck, LimitError};
use agentwire_types::proto::a2a_service_client::A2aServiceClient;
use agentwire_types::{
    A2aError, AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
};
use futures::StreamExt;
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue};
use tonic::transport::{Channel, Endpoint};

use crate::error::{ClientError, ClientResult, error_chain};
use crate::http::DEFAULT_CONNECT_TIMEOUT;
use crate::tap::{Tap, TapCall, Tapped};
use crate::tls::TlsOptions;
use crate::transport::{
    CallOptions, EventStream, LastEventId, TenantField, Transport, end_after_error_with_ids,
};

/// The gRPC transport.
///
/// Accepts the URL forms agent cards use for gRPC: a bare `host:port`,
/// `http://host:port` or `grpc://host:port` (plaintext HTTP/2, "h2c"), and
/// `https://` / `grpcs://` (TLS, with the crate feature `grpc-tls`).
/// Service parameters travel as metadata with lowercase names, along with
/// `a2a-version: 1.0` and `a2a-extensions`.
///
/// ```no_run
/// # async fn demo() -> Result<(), agentwire_client::ClientError> {
/// use agentwire_client::{CallOptions, GrpcTransport, Transport};
/// use agentwire_types::{Message, SendMessageRequest};
/// let grpc = GrpcTransport::connect("127.0.0.1:50051").await?;
/// let req = SendMessageRequest {
///     message: Some(Message::user_text("hello")),
///     ..Default::default()
/// };
/// let answer = grpc.send_message(req, &CallOptions::new()).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct GrpcTransport {
    client: A2aServiceClient<Channel>,
    url: String,
    tenant: String,
    tap: Option<Tap>,
}

/// The endpoint for a gRPC interface URL.
pub(crate) fn endpoint_uri(url: &str) -> ClientResult<(String, bool)> {
    let trimmed = url.trim();
    let (scheme, rest) = match trimmed.split_once("://") {
        Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest),
        None => ("http".to_owned(), trimmed),
    };
    let tls = match scheme.as_str() {
        "http" | "grpc" => false,
        "https" | "grpcs" => true,
        other => {
            return Err(ClientError::InvalidRequest(format!(
                "unsupported gRPC URL scheme {other:?} in {url:?} (use host:port, http://, grpc://, https:// or grpcs://)"
            )));
        }
    };
    // gRPC has no path prefix: keep the authority only.
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() {
        return Err(ClientError::InvalidRequest(format!(
            "gRPC URL {url:?} names no host"
        )));
    }
    let uri = format!("{}://{authority}", if tls { "https" } else { "http" });
    Ok((uri, tls))
}

/// A gRPC endpoint and, over TLS, the connector that makes its
/// connections.
pub(crate) struct GrpcEndpoint {
    endpoint: Endpoint,
    #[cfg(feature = "grpc-tls")]
    tls: Option<crate::tls::GrpcTlsConnector>,
}

impl GrpcEndpoint {
    /// A channel connecting on first use.
    pub(crate) fn connect_lazy(self) -> Channel {
        #[cfg(feature = "grpc-tls")]
        if let Some(tls) = self.tls {
            return self.endpoint.connect_with_connector_lazy(tls);
        }
        self.endpoint.connect_lazy()
    }

    /// A channel connected now.
    pub(crate) async fn connect(self) -> Result<Channel, tonic::transport::Error> {
        #[cfg(feature = "grpc-tls")]
        if let Some(tls) = self.tls {
            return self.endpoint.connect_with_connector(tls).await;
        }
        self.endpoint.connect().await
    }
}

/// The endpoint of a gRPC interface URL. Over TLS, the connections are
/// made by [`crate::tls::GrpcTlsConnector`] (the certificate checks of
/// [`TlsOptions`]): the endpoint then connects to `http://` (tonic would
/// otherwise want TLS of its own) while the requests keep the `https://`
/// origin.
pub(crate) fn endpoint(url: &str, tls_options: Option<&TlsOptions>) -> ClientResult<GrpcEndpoint> {
    let (uri, tls) = endpoint_uri(url)?;
    let invalid = |e: tonic::transport::Error| {
        ClientError::InvalidRequest(format!("invalid gRPC URL {url:?}: {e}"))
    };
    let connect_uri = match uri.strip_prefix("https://") {
        Some(authority) => format!("http://{authority}"),
        None => uri.clone(),
    };
    let ep = Endpoint::from_shared(connect_uri)
        .map_err(invalid)?
        .connect_timeout(DEFAULT_CONNECT_TIMEOUT)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_while_idle(false);
    if tls {
        let origin = Endpoint::from_shared(uri).map_err(invalid)?.uri().clone();
        return tls_endpoint(ep.origin(origin), url, tls_options);
    }
    Ok(GrpcEndpoint {
        endpoint: ep,
        #[cfg(feature = "grpc-tls")]
        tls: None,
    })
}

#[cfg(feature = "grpc-tls")]
fn tls_endpoint(
    ep: Endpoint,
    _url: &str,
    options: Option<&TlsOptions>,
) -> ClientResult<GrpcEndpoint> {
    let default = TlsOptions::default();
    Ok(GrpcEndpoint {
        endpoint: ep,
        tls: Some(options.unwrap_or(&default).grpc_connector()?),
    })
}

#[cfg(not(feature = "grpc-tls"))]
fn tls_endpoint(
    _ep: Endpoint,
    url: &str,
    _options: Option<&TlsOptions>,
) -> ClientResult<GrpcEndpoint> {
    Err(ClientError::InvalidRequest(format!(
        "gRPC over TLS ({url}) needs the `grpc-tls` feature of agentwire-client; \
         this build only speaks plaintext gRPC (host:port, http://, grpc://)"
    )))
}

impl GrpcTransport {
    /// A transport that connects on first use (and reconnects when the
    /// connection drops). Must be called within a Tokio runtime.
    pub fn new(url: impl Into<String>) -> ClientResult<Self> {
        let url = url.into();
        let channel = endpoint(&url, None)?.connect_lazy();
        Ok(Self::from_channel(channel, url))
    }

    /// [`GrpcTransport::new`] with these TLS settings (trusted authorities,
    /// client certificate) for an `https://` / `grpcs://` URL; a plaintext
    /// URL ignores them.
    pub fn with_tls(url: impl Into<String>, tls: &TlsOptions) -> ClientResult<Self> {
        let url = url.into();
        let channel = endpoint(&url, Some(tls))?.connect_lazy();
        Ok(Self::from_channel(channel, url))
    }

    /// A transport connected now: fails with [`ClientError::Connect`] when
    /// the agent cannot be reached.
    pub async fn connect(url: impl Into<String>) -> ClientResult<Self> {
        let url = url.into();
        let channel = endpoint(&url, None)?
            .connect()
            .await
            .map_err(|e| ClientError::Connect {
                url: url.clone(),
                message: error_chain(&e),
                source: Some(Box::new(e)),
            })?;
        Ok(Self::from_channel(channel, url))
    }

    /// A transport over a channel configured by the caller (TLS, load
    /// balancing, interceptors at the tower level...).
    pub fn from_channel(channel: Channel, url: impl Into<String>) -> Self {
        Self {
            client: A2aServiceClient::new(channel)
                .max_decoding_message_size(crate::http::DEFAULT_MAX_RESPONSE_BYTES),
            url: url.into(),
            tenant: String::new(),
            tap: None,
        }
    }

    /// Tells `tap` every exchange: the method, the request metadata and
    /// message, the response metadata and each response message, messages
    /// decoded to JSON (see [`crate::tap`]).
    pub fn with_tap(mut self, tap: Tap) -> Self {
        self.tap = Some(tap);
        self
    }

    pub(crate) fn tapped(mut self, tap: Option<&Tap>) -> Self {
        self.tap = tap.cloned();
        self
    }

    /// The most bytes accepted in one gRPC message, a unary answer or one
    /// message of a stream (default [`crate::DEFAULT_MAX_RESPONSE_BYTES`],
    /// 64 MiB): a longer one fails with [`ClientError::ResponseTooLarge`]
    /// before its body is read.
    pub fn with_max_response_bytes(mut self, max: usize) -> Self {
        self.client = self.client.max_decoding_message_size(max);
        self
    }

    /// Sets the tenant used for requests that name none.
    pub fn with_tenant(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = tenant.into();
        self
    }

    /// The interface URL this transport was made for.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn request<T: TenantField>(
        &self,
        mut message: T,
        options: &CallOptions,
        deadline: bool,
    ) -> ClientResult<tonic::Request<T>> {
        message.fill_tenant(&self.tenant);
        let mut req = tonic::Request::new(message);
        let md = req.metadata_mut();
        crate::trace_context::grpc(md);
        md.insert(
            "a2a-version",
            AsciiMetadataValue::from_static(agentwire_types::PROTOCOL_VERSION),
        );
        let mut replaced_version = false;
        for (name, value) in &options.service_params {
            let key = AsciiMetadataKey::from_bytes(name.to_ascii_lowercase().as_bytes()).map_err(
                |_| {
                    ClientError::InvalidRequest(format!(
                        "invalid service parameter name {name:?} for gRPC metadata"
                    ))
                },
            )?;
            let value = AsciiMetadataValue::try_from(value.as_str()).map_err(|_| {
                ClientError::InvalidRequest(format!("invalid value for service parameter {name}"))
            })?;
            if key == "a2a-version" && !replaced_version {
                md.remove("a2a-version");
                replaced_version = true;
            }
            md.append(key, value);
        }
        if let Some(ext) = options.extensions_value() {
            let joined = match md.get("a2a-extensions").and_then(|v| v.to_str().ok()) {
                Some(existing) => format!("{existing},{ext}"),
                None => ext,
            };
            let value = AsciiMetadataValue::try_from(joined.as_str()).map_err(|_| {
                ClientError::InvalidRequest(format!("invalid extension URI in {joined:?}"))
            })?;
            md.insert("a2a-extensions", value);
        }
        if let (true, Some(t)) = (deadline, options.timeout) {
            req.set_timeout(t);
        }
        Ok(req)
    }

    async fn unary<T, R, F, Fut>(
        &self,
        op: &'static str,
        message: T,
        options: &CallOptions,
        call_fn: F,
    ) -> ClientResult<R>
    where
        T: TenantField + serde::Serialize,
        R: serde::Serialize,
        F: FnOnce(A2aServiceClient<Channel>, tonic::Request<T>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<R>, tonic::Status>>,
    {
        let req = self.request(message, options, true)?;
        let client = self.client.clone();
        let call = GrpcCall {
            url: &self.url,
            tap: self.tap.as_ref(),
            service: SERVICE_NAME,
            op,
            timeout: options.timeout,
            status_error: |status, url, _| status_to_error(status, url),
        };
        call.unary(req, |r| call_fn(client, r)).await
    }

    async fn stream<T, F, Fut>(
        &self,
        op: &'static str,
        message: T,
        options: &CallOptions,
        call_fn: F,
    ) -> ClientResult<EventStream>
    where
        T: TenantField + serde::Serialize,
        F: FnOnce(A2aServiceClient<Channel>, tonic::Request<T>) -> Fut,
        Fut: Future<
            Output = Result<
                tonic::Response<tonic::Streaming<agentwire_types::StreamResponse>>,
                tonic::Status,
            >,
        >,
    {
        // No grpc-timeout on streams: the deadline would cut a long task's
        // stream. The timeout bounds the wait for the response headers.
        let req = self.request(message, options, false)?;
        let client = self.client.clone();
        let call = GrpcCall {
            url: &self.url,
            tap: self.tap.as_ref(),
            service: SERVICE_NAME,
            op,
            timeout: options.timeout,
            status_error: |status, url, _| status_to_error(status, url),
        };
        call.stream(
            req,
            |r| call_fn(client, r),
            |e| {
                matches!(
                    e.payload,
                    Some(agentwire_types::stream_response::Payload::Task(_))
                )
            },
            |e| {
                e.nesting(&mut ContentCheck::nesting()).map_err(too_deep)?;
                Ok(e)
            },
        )
        .await
    }
}

/// What a 1.0 answer holds that the nesting limit of metadata and data
/// ([`agentwire_types::limits::MAX_STRUCT_DEPTH`]) bounds. The JSON
/// bindings' readers refuse deeper content as they read it; prost decodes
/// it (up to its own limit of 100 message levels), so the gRPC transport
/// checks each decoded answer and event: the same limit on every binding.
pub(crate) trait Nested {
    fn nesting(&self, check: &mut ContentCheck) -> Result<(), LimitError>;
}

impl Nested for Task {
    fn nesting(&self, check: &mut ContentCheck) -> Result<(), LimitError> {
        check.task(self)
    }
}

impl Nested for SendMessageResponse {
    fn nesting(&self, check: &mut ContentCheck) -> Result<(), LimitError> {
        check.send_response(self)
    }
}

impl Nested for agentwire_types::StreamResponse {
    fn nesting(&self, check: &mut ContentCheck) -> Result<(), LimitError> {
        check.stream_response(self)
    }
}

impl Nested for ListTasksResponse {
    fn nesting(&self, check: &mut ContentCheck) -> Result<(), LimitError> {
        check.task_list(self)
    }
}

impl Nested for AgentCard {
    fn nesting(&self, check: &mut ContentCheck) -> Result<(), LimitError> {
        check.card(self)
    }
}

/// `answer`, when it is within the nesting limit.
fn checked<R: Nested>(answer: R) -> ClientResult<R> {
    answer
        .nesting(&mut ContentCheck::nesting())
        .map_err(too_deep)?;
    Ok(answer)
}

/// The error of an answer nested past the limit.
fn too_deep(e: LimitError) -> ClientError {
    ClientError::InvalidResponse(format!("the answer's {e}"))
}

/// The gRPC service name of A2A 1.0.
const SERVICE_NAME: &str = "lf.a2a.v1.A2AService";

/// One gRPC call of either version's service: where it goes, its tap, and
/// how long the answer (or a stream's response headers) may take.
pub(crate) struct GrpcCall<'a> {
    pub(crate) url: &'a str,
    pub(crate) tap: Option<&'a Tap>,
    pub(crate) service: &'static str,
    pub(crate) op: &'static str,
    pub(crate) timeout: Option<Duration>,
    /// How a status of the call `op` to `url` reads as an error
    /// ([`status_to_error`] for 1.0).
    pub(crate) status_error: fn(tonic::Status, &str, &'static str) -> ClientError,
}

impl GrpcCall<'_> {
    fn timeout_error(&self) -> ClientError {
        ClientError::Timeout {
            url: self.url.to_owned(),
        }
    }

    /// Sends `req` through `call` (told to the tap when there is one),
    /// waiting at most the timeout for the answer.
    async fn send<T, R, Fut>(
        &self,
        req: tonic::Request<T>,
        call: impl FnOnce(tonic::Request<T>) -> Fut,
    ) -> Result<(tonic::Response<R>, Option<TapCall>), ClientError>
    where
        T: serde::Serialize,
        Fut: Future<Output = Result<tonic::Response<R>, tonic::Status>>,
    {
        let tap = self
            .tap
            .map(|t| t.grpc_request(self.service, self.op, self.url, &req));
        let fut = call(req);
        let res = match self.timeout {
            Some(d) => match tokio::time::timeout(d, fut).await {
                Ok(res) => res,
                Err(_) => {
                    let e = self.timeout_error();
                    if let Some(tap) = tap {
                        tap.end(Some(&e));
                    }
                    return Err(e);
                }
            },
            None => fut.await,
        };
        match res {
            Ok(resp) => Ok((resp, tap)),
            Err(status) => {
                if let Some(tap) = tap {
                    tap.grpc_status(&status);
                }
                Err((self.status_error)(status, self.url, self.op))
            }
        }
    }

    /// A unary call: its answer.
    pub(crate) async fn unary<T, R, Fut>(
        &self,
        req: tonic::Request<T>,
        call: impl FnOnce(tonic::Request<T>) -> Fut,
    ) -> ClientResult<R>
    where
        T: serde::Serialize,
        R: serde::Serialize,
        Fut: Future<Output = Result<tonic::Response<R>, tonic::Status>>,
    {
        let (resp, tap) = self.send(req, call).await?;
        if let Some(mut tap) = tap {
            tap.grpc_response(resp.metadata(), Some(resp.get_ref()));
            tap.end(None);
        }
        Ok(resp.into_inner())
    }

    /// A server-streaming call: its messages, each made a 1.0 event by
    /// `convert` (`is_snapshot` tells a `Task` message, for the event ids).
    pub(crate) async fn stream<T, M, Fut>(
        &self,
        req: tonic::Request<T>,
        call: impl FnOnce(tonic::Request<T>) -> Fut,
        is_snapshot: fn(&M) -> bool,
        convert: fn(M) -> ClientResult<agentwire_types::StreamResponse>,
    ) -> ClientResult<EventStream>
    where
        T: serde::Serialize,
        M: serde::Serialize + Send + 'static,
        Fut: Future<Output = Result<tonic::Response<tonic::Streaming<M>>, tonic::Status>>,
    {
        let (response, tap) = self.send(req, call).await?;
        let mut numbering = EventNumbering::from_metadata(response.metadata());
        let tap = tap.map(|mut t| {
            t.grpc_response::<M>(response.metadata(), None);
            t
        });
        let streaming = response.into_inner();
        let url = self.url.to_owned();
        let status_error = self.status_error;
        let op = self.op;
        let ids = LastEventId::default();
        let seen = ids.clone();
        // Each message with its event id, told to the tap when there is one.
        let numbered = streaming.map(move |item| {
            let id = match &item {
                Ok(event) => numbering.as_mut().and_then(|n| n.next(is_snapshot(event))),
                Err(_) => None,
            };
            (item, id)
        });
        let numbered = match tap {
            None => futures::future::Either::Left(numbered),
            Some(tap) => futures::future::Either::Right(Tapped::new(
                numbered,
                tap,
                |tap: &mut TapCall, (item, id): &(Result<M, tonic::Status>, Option<String>)| {
                    match item {
                        Ok(event) => tap.grpc_frame(event, id.clone()),
                        Err(status) => tap.grpc_fail(status),
                    }
                },
            )),
        };
        let events = numbered.map(move |(item, id)| {
            if item.is_ok() {
                seen.set(id);
            }
            item.map_err(|s| status_error(s, &url, op))
                .and_then(convert)
        });
        Ok(end_after_error_with_ids(events, ids))
    }
}

/// The initial-metadata key naming the log of a stream's event ids.
pub const EVENT_LOG_KEY: &str = "a2a-event-log";

/// The initial-metadata key with the position of a stream's first message
/// in its log.
pub const EVENT_POSITION_KEY: &str = "a2a-event-position";

/// The event ids of a gRPC stream's messages.
///
/// gRPC stream messages have no field for an event id, so the server
/// announces the numbering in the stream's initial metadata:
/// [`EVENT_LOG_KEY`] (the log part of the ids) and [`EVENT_POSITION_KEY`]
/// (the position of the first message); message `n` (from 0) has the id
/// `<log>-<position + n>`. A `Task` message after the first one is a fresh
/// snapshot sent to a reader that fell behind (events were skipped): the
/// numbering stops there and the ids are unknown from then on.
#[derive(Debug, Clone)]
struct EventNumbering {
    log: String,
    position: u64,
    /// No message seen yet.
    first: bool,
}

impl EventNumbering {
    fn from_metadata(md: &tonic::metadata::MetadataMap) -> Option<Self> {
        let log = md.get(EVENT_LOG_KEY)?.to_str().ok()?.trim();
        let position = md
            .get(EVENT_POSITION_KEY)?
            .to_str()
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let valid = !log.is_empty() && log.bytes().all(|b| b.is_ascii_hexdigit());
        valid.then(|| Self {
            log: log.to_owned(),
            position,
            first: true,
        })
    }

    /// The id of the next message (`snapshot`: a `Task` message); `None`
    /// once the numbering stopped.
    fn next(&mut self, snapshot: bool) -> Option<String> {
        let first = std::mem::take(&mut self.first);
        if snapshot && !first {
            self.log.clear();
        }
        if self.log.is_empty() {
            return None;
        }
        let id = format!("{}-{}", self.log, self.position);
        self.position = self.position.saturating_add(1);
        Some(id)
    }
}

/// Classifies a gRPC status: a failure to connect (found in the status'
/// source chain) is [`ClientError::Connect`]; other statuses made by the
/// client's own channel (deadline, reset, broken stream) are timeouts or
/// transport errors; statuses the server sent are A2A errors.
pub(crate) fn status_to_error(status: tonic::Status, url: &str) -> ClientError {
    if let Some(limit) = too_large_limit(&status) {
        return ClientError::ResponseTooLarge {
            what: "a gRPC message".into(),
            url: url.to_owned(),
            limit,
        };
    }
    if is_connect_failure(&status) {
        let message = status_text(&status);
        return ClientError::Connect {
            url: url.to_owned(),
            message,
            source: Some(Box::new(status)),
        };
    }
    if is_local_status(&status) {
        let timed_out = matches!(
            status.code(),
            tonic::Code::DeadlineExceeded | tonic::Code::Cancelled
        ) && status.message().to_ascii_lowercase().contains("timeout");
        if timed_out {
            return ClientError::Timeout {
                url: url.to_owned(),
            };
        }
        return ClientError::Transport {
            message: format!(
                "{}: {}",
                agentwire_types::grpc_status_name(status.code() as i32),
                status_text(&status)
            ),
            source: Some(Box::new(status)),
        };
    }
    ClientError::A2a(A2aError::from_grpc_status(&status))
}

/// What a status made by the client's own channel says, in words: its
/// message and the causes under it (the refused connection, the TLS
/// error), without the `Display` of `tonic::Status` (which prints its code,
/// metadata and the Debug form of its source).
fn status_text(status: &tonic::Status) -> String {
    let mut out = status.message().trim().to_owned();
    let mut cur = std::error::Error::source(status);
    // Bounded: a chain is short, but a cyclic one must not hang the caller.
    for _ in 0..16 {
        let Some(e) = cur else { break };
        let text = e.to_string();
        let text = text.trim();
        // tonic's wrappers say nothing of their own.
        if !text.is_empty() && text != "transport error" && !out.contains(text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(text);
        }
        cur = e.source();
    }
    if out.is_empty() {
        out = agentwire_types::grpc_status_name(status.code() as i32).to_owned();
    }
    out
}

/// The limit a message went past, when `status` is tonic's refusal of a
/// message longer than `max_decoding_message_size` (made by the client's
/// own decoder, before the message's body is read).
fn too_large_limit(status: &tonic::Status) -> Option<usize> {
    if status.code() != tonic::Code::OutOfRange {
        return None;
    }
    let m = status.message();
    if !m.starts_with("Error, decoded message length too large") {
        return None;
    }
    let after = &m[m.find("the limit is: ")? + "the limit is: ".len()..];
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Whether the channel could not connect (refused, DNS, connect timeout):
/// tonic keeps the connector's error in the status' source chain.
fn is_connect_failure(status: &tonic::Status) -> bool {
    let mut cur = std::error::Error::source(status);
    while let Some(e) = cur {
        if e.downcast_ref::<tonic::ConnectError>().is_some() {
            return true;
        }
        cur = e.source();
    }
    false
}

/// A status the server sent carries response metadata (at least the
/// `content-type` of the response headers) or error details; one made
/// locally by the channel has neither.
fn is_local_status(status: &tonic::Status) -> bool {
    status.metadata().is_empty() && status.details().is_empty()
}

#[async_trait::async_trait]
impl Transport for GrpcTransport {
    async fn send_message(
        &self,
        request: SendMessageRequest,
        options: &CallOptions,
    ) -> ClientResult<SendMessageResponse> {
        let options =
            crate::generation::versioned(options, crate::generation::checks_generation(&request));
        let options = &*options;
        self.unary("SendMessage", request, options, |mut c, r| async move {
            c.send_message(r).await
        })
        .await
        .and_then(checked)
    }

    async fn send_streaming_message(
        &self,
        request: SendMessageRequest,
        options: &CallOptions,
    ) -> ClientResult<EventStream> {
        let options =
            crate::generation::versioned(options, crate::generation::checks_generation(&request));
        let options = &*options;
        self.stream(
            "SendStreamingMessage",
            request,
            options,
            |mut c, r| async move { c.send_streaming_message(r).await },
        )
        .await
    }

    async fn get_task(&self, request: GetTaskRequest, options: &CallOptions) -> ClientResult<Task> {
        let options = crate::generation::versioned(options, request.current_generation.is_some());
        let options = &*options;
        self.unary("GetTask", request, options, |mut c, r| async move {
            c.get_task(r).await
        })
        .await
        .and_then(checked)
    }

    async fn list_tasks(
        &self,
        request: ListTasksRequest,
        options: &CallOptions,
    ) -> ClientResult<ListTasksResponse> {
        self.unary("ListTasks", request, options, |mut c, r| async move {
            c.list_tasks(r).await
        })
        .await
        .and_then(checked)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskRequest,
        options: &CallOptions,
    ) -> ClientResult<Task> {
        self.unary("CancelTask", request, options, |mut c, r| async move {
            c.cancel_task(r).await
        })
        .await
        .and_then(checked)
    }

    async fn subscribe_to_task(
        &self,
        request: SubscribeToTaskRequest,
        options: &CallOptions,
    ) -> ClientResult<EventStream> {
        self.stream("SubscribeToTask", request, options, |mut c, r| async move {
            c.subscribe_to_task(r).await
        })
        .await
    }

    async fn create_task_push_notification_config(
        &self,
        request: TaskPushNotificationConfig,
        options: &CallOptions,
    ) -> ClientResult<TaskPushNotificationConfig> {
        self.unary(
            "CreateTaskPushNotificationConfig",
            request,
            options,
            |mut c, r| async move { c.create_task_push_notification_config(r).await },
        )
        .await
    }

    async fn get_task_push_notification_config(
        &self,
        request: GetTaskPushNotificationConfigRequest,
        options: &CallOptions,
    ) -> ClientResult<TaskPushNotificationConfig> {
        self.unary(
            "GetTaskPushNotificationConfig",
            request,
            options,
            |mut c, r| async move { c.get_task_push_notification_config(r).await },
        )
        .await
    }

    async fn list_task_push_notification_configs(
        &self,
        request: ListTaskPushNotificationConfigsRequest,
        options: &CallOptions,
    ) -> ClientResult<ListTaskPushNotificationConfigsResponse> {
        self.unary(
            "ListTaskPushNotificationConfigs",
            request,
            options,
            |mut c, r| async move { c.list_task_push_notification_configs(r).await },
        )
        .await
    }

    async fn delete_task_push_notification_config(
        &self,
        request: DeleteTaskPushNotificationConfigRequest,
        options: &CallOptions,
    ) -> ClientResult<()> {
        self.unary(
            "DeleteTaskPushNotificationConfig",
            request,
            options,
            |mut c, r| async move { c.delete_task_push_notification_config(r).await },
        )
        .await
        .map(|_empty| ())
    }

    async fn get_extended_agent_card(
        &self,
        request: GetExtendedAgentCardRequest,
        options: &CallOptions,
    ) -> ClientResult<AgentCard> {
        self.unary(
            "GetExtendedAgentCard",
            request,
            options,
            |mut c, r| async move { c.get_extended_agent_card(r).await },
        )
        .await
        .and_then(checked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_types::ErrorKind;

    #[test]
    fn url_forms() {
        for (input, want) in [
            ("127.0.0.1:50051", "http://127.0.0.1:50051"),
            ("http://127.0.0.1:50051", "http://127.0.0.1:50051"),
            ("grpc://agent.local:443/", "http://agent.local:443"),
            ("GRPC://h:1", "http://h:1"),
            ("[::1]:9000", "http://[::1]:9000"),
            ("localhost:8080/ignored/path", "http://localhost:8080"),
        ] {
            assert_eq!(
                endpoint_uri(input).unwrap(),
                (want.to_owned(), false),
                "{input}"
            );
        }
        assert_eq!(
            endpoint_uri("grpcs://h:443").unwrap(),
            ("https://h:443".to_owned(), true)
        );
        assert!(endpoint_uri("ws://h:1").is_err());
        assert!(endpoint_uri("http://").is_err());
    }

    #[cfg(not(feature = "grpc-tls"))]
    #[test]
    fn tls_without_feature_is_a_clear_error() {
        let Err(e) = endpoint("https://agent.example.com", None) else {
            panic!("an https endpoint without the feature grpc-tls was accepted");
        };
        assert!(e.to_string().contains("grpc-tls"), "{e}");
    }

    #[tokio::test]
    async fn metadata() {
        let t = GrpcTransport::new("127.0.0.1:1")
            .unwrap()
            .with_tenant("acme");
        let opts = CallOptions::new()
            .with_service_param("Authorization", "Bearer x")
            .with_extension("urn:a")
            .with_extension("urn:b");
        let req = t.request(GetTaskRequest::default(), &opts, true).unwrap();
        let md = req.metadata();
        assert_eq!(md.get("a2a-version").unwrap(), "1.0");
        assert_eq!(md.get("a2a-extensions").unwrap(), "urn:a,urn:b");
        assert_eq!(md.get("authorization").unwrap(), "Bearer x");
        assert_eq!(req.get_ref().tenant, "acme");
        let bad = CallOptions::new().with_service_param("bad key", "x");
        assert!(t.request(GetTaskRequest::default(), &bad, true).is_err());
    }

    #[test]
    fn statuses_from_the_server_are_a2a_errors() {
        let status = A2aError::task_not_found("t-1").to_grpc_status();
        let e = status_to_error(status, "h:1");
        assert_eq!(e.kind(), Some(ErrorKind::TaskNotFound));
        // A connection lost mid-call must not look like "unreachable" (the
        // client would then resend the request elsewhere).
        let local = tonic::Status::unavailable("error reading a body from connection: reset");
        let e = status_to_error(local, "h:1");
        assert!(matches!(e, ClientError::Transport { .. }), "{e:?}");
        let local = tonic::Status::cancelled("Timeout expired");
        assert!(status_to_error(local, "h:1").is_timeout());
    }

    #[tokio::test]
    async fn connection_refused_is_unreachable() {
        // Bind then drop a listener to get a port nobody listens on.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let t = GrpcTransport::new(format!("127.0.0.1:{port}")).unwrap();
        let err = t
            .get_task(
                GetTaskRequest {
                    id: "x".into(),
                    ..Default::default()
                },
                &CallOptions::new(),
            )
            .await
            .unwrap_err();
        assert!(err.is_unreachable(), "{err:?}");
        let err = GrpcTransport::connect(format!("127.0.0.1:{port}"))
            .await
            .unwrap_err();
        assert!(err.is_unreachable(), "{err:?}");
    }
}
