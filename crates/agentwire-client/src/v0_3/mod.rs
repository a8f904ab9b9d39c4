//! Calling agents that speak A2A 0.3
//! (<https://a2a-protocol.org/v0.3.0/specification/>) over its three
//! bindings: [`V03JsonRpcTransport`] (`message/send`, `tasks/get`...),
//! [`V03RestTransport`] (`/v1/message:send`, `/v1/tasks/{id}`...) and, with
//! the `grpc` feature, `V03GrpcTransport` (service `a2a.v1.A2AService`).
//!
//! The client works in the 1.0 model; these transports convert each 1.0
//! request into its 0.3 form, and each answer and stream event back into
//! the 1.0 model, through the conversion layer the server's compatibility
//! module uses too ([`agentwire_types::v0_3`]). Streaming helpers, the
//! ledger and the CLI see 1.0 objects and work unchanged. The envelope,
//! exchange, stream and tap plumbing is that of the 1.0 transports; only
//! the headers differ: no `A2A-Version` (its absence means 0.3), the
//! extensions also in 0.3's `X-A2A-Extensions`.
//!
//! A transport is chosen by [`crate::ClientBuilder::allow_v03`] for an
//! interface whose `protocolVersion` is 0.3 (a 0.3 card's top-level `url`,
//! `preferredTransport` and `additionalInterfaces` become such interfaces
//! when the card is read, [`crate::card::parse_agent_card`], as do its
//! security schemes and requirements, so credentials are attached as for
//! a 1.0 card); it is never chosen while the card offers a 1.0 interface.
//!
//! Errors: JSON-RPC errors by their codes; HTTP+JSON errors by their
//! `{code, message}` body, or by the HTTP status the 0.3 SDKs use (404,
//! 409, 415, 501) when the body has a message only; gRPC errors by their
//! status, the error a 0.3 SDK names at the start of the message
//! (`TaskNotCancelableError: ...`) winning over the code.
//!
//! What 0.3 cannot carry: a tenant, `ListTasks` (answered
//! `UnsupportedOperation` without a call), a 1.0 `historyLength` of 0
//! (sent as 1: in 0.3, 0 means the whole history), paged push config
//! lists (0.3 returns them all), event ids on gRPC streams, and the
//! extended card call (0.3's `agent/getAuthenticatedExtendedCard`,
//! `GET /v1/card` and `GetAgentCard` answer a 0.3 card, which is read as
//! the 1.0 card). See [`agentwire_types::v0_3`] for what the conversions
//! lose.

use agentwire_types::v0_3::{convert, types as v03};
use agentwire_types::{
    A2aError, AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, ErrorKind,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
};
use http::{HeaderName, HeaderValue};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{ClientError, ClientResult, truncate_body};
use crate::http::{
    DEFAULT_MAX_RESPONSE_BYTES, HttpTap, MAX_ERROR_BODY, default_http_client, event_stream,
    exchange, send_tapped, service_headers,
};
use crate::jsonrpc::{JsonRpcTransport, decode_rpc_event};
use crate::sse::SseEvent;
use crate::tap::Tap;
use crate::transport::{Binding, CallOptions, EventStream, Transport};

#[cfg(feature = "grpc")]
mod grpc;
#[cfg(feature = "grpc")]
pub use grpc::V03GrpcTransport;

/// The 0.3 JSON-RPC method names.
mod methods {
    pub const SEND: &str = "message/send";
    pub const STREAM: &str = "message/stream";
    pub const GET: &str = "tasks/get";
    pub const CANCEL: &str = "tasks/cancel";
    pub const RESUBSCRIBE: &str = "tasks/resubscribe";
    pub const PUSH_SET: &str = "tasks/pushNotificationConfig/set";
    pub const PUSH_GET: &str = "tasks/pushNotificationConfig/get";
    pub const PUSH_LIST: &str = "tasks/pushNotificationConfig/list";
    pub const PUSH_DELETE: &str = "tasks/pushNotificationConfig/delete";
    pub const EXTENDED_CARD: &str = "agent/getAuthenticatedExtendedCard";
}

/// Whether a `protocolVersion` is a 0.3 version (`0.3`, `0.3.0`...).
pub fn is_v03(version: &str) -> bool {
    let mut parts = version.trim().split('.');
    parts.next() == Some("0") && parts.next() == Some("3")
}

/// The JSON-RPC transport of A2A 0.3.
///
/// Sends no `A2A-Version` header (its absence means 0.3), names the
/// requested extensions in `X-A2A-Extensions` (0.3's header) as well as
/// `A2A-Extensions`, and converts requests, results and events between
/// the 1.0 model and 0.3's.
///
/// ```no_run
/// # async fn demo() -> Result<(), agentwire_client::ClientError> {
/// use agentwire_client::{CallOptions, Transport, V03JsonRpcTransport};
/// use agentwire_types::{Message, SendMessageRequest};
/// let rpc = V03JsonRpcTransport::new("http://127.0.0.1:9999/")?;
/// let req = SendMessageRequest {
///     message: Some(Message::user_text("hello")),
///     ..Default::default()
/// };
/// let answer = rpc.send_message(req, &CallOptions::new()).await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct V03JsonRpcTransport {
    /// The 1.0 transport's envelope, exchange and stream plumbing, with
    /// the 0.3 headers.
    inner: JsonRpcTransport,
}

static X_A2A_EXTENSIONS: HeaderName = HeaderName::from_static("x-a2a-extensions");

/// The service headers of a 0.3 call: no `A2A-Version` (its absence means
/// 0.3; a 1.x version the caller's defaults carry, such as the `a2a`
/// command's, is dropped, a 0.x one kept), the extensions also in 0.3's
/// `X-A2A-Extensions`.
pub(crate) fn v03_headers(options: &CallOptions) -> ClientResult<http::HeaderMap> {
    let mut headers = service_headers(options)?;
    let keep = headers
        .get("a2a-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().starts_with("0."));
    if !keep {
        headers.remove("a2a-version");
    }
    if let Some(ext) = headers.get("a2a-extensions").cloned() {
        headers.insert(X_A2A_EXTENSIONS.clone(), ext);
    }
    Ok(headers)
}

impl V03JsonRpcTransport {
    /// A transport posting to `url` (the 0.3 card's `url`, or the URL of
    /// an interface with protocol version 0.3).
    pub fn new(url: impl Into<String>) -> ClientResult<Self> {
        Ok(Self {
            inner: JsonRpcTransport::new(url)?.with_headers(v03_headers),
        })
    }

    /// Uses this HTTP client (its pool, TLS settings, proxies, timeouts).
    pub fn with_http_client(mut self, http: reqwest::Client) -> Self {
        self.inner = self.inner.with_http_client(http);
        self
    }

    /// Adds query parameters to the endpoint URL (an API key the card
    /// wants in the query).
    pub fn with_query_params(mut self, params: impl IntoIterator<Item = (String, String)>) -> Self {
        self.inner = self.inner.with_query_params(params);
        self
    }

    /// The most bytes accepted in one answer or stream event (default
    /// [`crate::DEFAULT_MAX_RESPONSE_BYTES`]).
    pub fn with_max_response_bytes(mut self, max: usize) -> Self {
        self.inner = self.inner.with_max_response_bytes(max);
        self
    }

    /// Tells `tap` every exchange (see [`crate::tap`]), as the 1.0
    /// JSON-RPC transport does.
    pub fn with_tap(mut self, tap: Tap) -> Self {
        self.inner = self.inner.with_tap(tap);
        self
    }

    pub(crate) fn tapped(mut self, tap: Option<&Tap>) -> Self {
        self.inner = self.inner.tapped(tap);
        self
    }

    /// The endpoint URL.
    pub fn url(&self) -> &str {
        self.inner.url()
    }

    async fn call_result<P, R>(
        &self,
        method: &'static str,
        params: &P,
        options: &CallOptions,
    ) -> ClientResult<R>
    where
        P: Serialize,
        R: DeserializeOwned,
    {
        self.inner.call(method, params, options).await
    }

    async fn stream<P: Serialize>(
        &self,
        method: &'static str,
        params: &P,
        options: &CallOptions,
    ) -> ClientResult<EventStream> {
        self.inner
            .stream_as(method, params, options, decode_event, |first| {
                convert::stream_event_to_v1(first).map_err(invalid_answer)
            })
            .await
    }
}

/// A 0.3 answer that does not convert into the 1.0 model.
fn invalid_answer(e: A2aError) -> ClientError {
    ClientError::invalid_response(format!("0.3 agent's answer: {}", e.message))
}

/// One SSE event of a 0.3 JSON-RPC stream, as the 1.0 event.
fn decode_event(ev: &SseEvent) -> Option<ClientResult<StreamResponse>> {
    let event = decode_rpc_event::<v03::StreamEvent>(ev)?;
    Some(event.and_then(|e| convert::stream_event_to_v1(e).map_err(invalid_answer)))
}

/// `ListTasks`, which 0.3 does not have.
fn list_tasks_unsupported() -> ClientResult<ListTasksResponse> {
    Err(ClientError::A2a(A2aError::new(
        ErrorKind::UnsupportedOperation,
        "listing tasks is not part of A2A 0.3: this agent speaks 0.3 only",
    )))
}

fn push_params(task_id: String, config_id: String) -> v03::PushConfigParams {
    v03::PushConfigParams {
        id: task_id,
        push_notification_config_id: Some(config_id).filter(|c| !c.is_empty()),
        metadata: None,
    }
}

#[async_trait::async_trait]
impl Transport for V03JsonRpcTransport {
    async fn send_message(
        &self,
        request: SendMessageRequest,
        options: &CallOptions,
    ) -> ClientResult<SendMessageResponse> {
        let params = convert::send_request_to_v03(request);
        let r: v03::SendResult = self.call_result(methods::SEND, &params, options).await?;
        convert::send_result_to_v1(r).map_err(invalid_answer)
    }

    async fn send_streaming_message(
        &self,
        request: SendMessageRequest,
        options: &CallOptions,
    ) -> ClientResult<EventStream> {
        let params = convert::send_request_to_v03(request);
        self.stream(methods::STREAM, &params, options).await
    }

    async fn get_task(&self, request: GetTaskRequest, options: &CallOptions) -> ClientResult<Task> {
        let params = convert::get_task_to_v03(request);
        let t: v03::Task = self.call_result(methods::GET, &params, options).await?;
        convert::task_to_v1(t).map_err(invalid_answer)
    }

    async fn list_tasks(
        &self,
        _request: ListTasksRequest,
        _options: &CallOptions,
    ) -> ClientResult<ListTasksResponse> {
        list_tasks_unsupported()
    }

    async fn cancel_task(
        &self,
        request: CancelTaskRequest,
        options: &CallOptions,
    ) -> ClientResult<Task> {
        let params = convert::cancel_to_v03(request);
        let t: v03::Task = self.call_result(methods::CANCEL, &params, options).await?;
        convert::task_to_v1(t).map_err(invalid_answer)
    }

    async fn subscribe_to_task(
        &self,
        request: SubscribeToTaskRequest,
        options: &CallOptions,
    ) -> ClientResult<EventStream> {
        let params = convert::subscribe_to_v03(request);
        self.stream(methods::RESUBSCRIBE, &params, options).await
    }

    async fn create_task_push_notification_config(
        &self,
        request: TaskPushNotificationConfig,
        options: &CallOptions,
    ) -> ClientResult<TaskPushNotificationConfig> {
        let params = convert::task_push_config_to_v03(request);
        let c: v03::TaskPushNotificationConfig = self
            .call_result(methods::PUSH_SET, &params, options)
            .await?;
        Ok(convert::task_push_config_to_v1(c))
    }

    async fn get_task_push_notification_config(
        &self,
        request: GetTaskPushNotificationConfigRequest,
        options: &CallOptions,
    ) -> ClientResult<TaskPushNotificationConfig> {
        let params = push_params(request.task_id, request.id);
        let c: v03::TaskPushNotificationConfig = self
            .call_result(methods::PUSH_GET, &params, options)
            .await?;
        Ok(convert::task_push_config_to_v1(c))
    }

    async fn list_task_push_notification_configs(
        &self,
        request: ListTaskPushNotificationConfigsRequest,
        options: &CallOptions,
    ) -> ClientResult<ListTaskPushNotificationConfigsResponse> {
        let params = v03::TaskIdParams {
            id: request.task_id,
            metadata: None,
        };
        let list: Vec<v03::TaskPushNotificationConfig> = self
            .call_result(methods::PUSH_LIST, &params, options)
            .await?;
        Ok(ListTaskPushNotificationConfigsResponse {
            configs: list
                .into_iter()
                .map(convert::task_push_config_to_v1)
                .collect(),
            next_page_token: String::new(),
        })
    }

    async fn delete_task_push_notification_config(
        &self,
        request: DeleteTaskPushNotificationConfigRequest,
        options: &CallOptions,
    ) -> ClientResult<()> {
        let params = push_params(request.task_id, request.id);
        self.inner
            .call_opt::<_, serde::de::IgnoredAny>(methods::PUSH_DELETE, &params, options)
            .await?;
        Ok(())
    }

    async fn get_extended_agent_card(
        &self,
        _request: GetExtendedAgentCardRequest,
        options: &CallOptions,
    ) -> ClientResult<AgentCard> {
        let card: serde_json::Value = self
            .call_result(methods::EXTENDED_CARD, &serde_json::json!({}), options)
            .await?;
        let body = serde_json::to_vec(&card)
            .map_err(|e| ClientError::invalid_response(format!("extended card: {e}")))?;
        crate::card::parse_agent_card(&body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_of_the_0_3_sdks() {
        assert_eq!(
            named_error_kind("TaskNotCancelableError: Task cannot be canceled"),
            Some(ErrorKind::TaskNotCancelable)
        );
        assert_eq!(
            named_error_kind("TaskNotFoundError: Task not found"),
            Some(ErrorKind::TaskNotFound)
        );
        assert_eq!(
            named_error_kind("PushNotificationNotSupportedError: no"),
            Some(ErrorKind::PushNotificationNotSupported)
        );
        assert_eq!(
            named_error_kind("InvalidParamsError: x"),
            Some(ErrorKind::InvalidParams)
        );
        assert_eq!(
            named_error_kind("JSONParseError: x"),
            Some(ErrorKind::ParseError)
        );
        assert_eq!(named_error_kind("just a message"), None);
        assert_eq!(named_error_kind("Frobnicated: x"), None);
        let e = rest_error(409, br#"{"message":"Task cannot be canceled"}"#);
        assert_eq!(e.kind(), Some(ErrorKind::TaskNotCancelable));
        let e = rest_error(404, br#"{"code":-32001,"message":"Task not found"}"#);
        assert_eq!(e.kind(), Some(ErrorKind::TaskNotFound));
    }

    #[test]
    fn v03_versions() {
        assert!(is_v03("0.3"));
        assert!(is_v03("0.3.0"));
        assert!(is_v03(" 0.3.1 "));
        assert!(!is_v03("0.2.5"));
        assert!(!is_v03("1.0"));
        assert!(!is_v03(""));
    }
}

/// The HTTP+JSON transport of A2A 0.3: the `/v1/...` routes
/// (`POST /v1/message:send`, `GET /v1/tasks/{id}`...) whose bodies are the
/// ProtoJSON form of the 0.3 protobuf messages
/// ([`agentwire_types::v0_3::rest`]), converted to and from the 1.0 model.
///
/// The URL is the interface's base URL (the routes are appended to it). As
/// on JSON-RPC, no `A2A-Version` is sent.
#[derive(Debug)]
pub struct V03RestTransport {
    http: reqwest::Client,
    base: String,
    query: Vec<(String, String)>,
    tap: Option<Tap>,
    max_response_bytes: usize,
}

impl V03RestTransport {
    /// A transport for the 0.3 HTTP+JSON interface at `url`.
    pub fn new(url: impl Into<String>) -> ClientResult<Self> {
        let url = url.into();
        let parsed = reqwest::Url::parse(&url).map_err(|e| {
            ClientError::InvalidRequest(format!("invalid HTTP+JSON URL {url:?}: {e}"))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ClientError::InvalidRequest(format!(
                "HTTP+JSON URL {url:?} must be http:// or https://"
            )));
        }
        Ok(Self {
            http: default_http_client(),
            base: url.trim_end_matches('/').to_owned(),
            query: Vec::new(),
            tap: None,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        })
    }

    /// The most bytes accepted in one answer or stream event (default
    /// [`DEFAULT_MAX_RESPONSE_BYTES`]).
    pub fn with_max_response_bytes(mut self, max: usize) -> Self {
        self.max_response_bytes = max;
        self
    }

    /// Tells `tap` every exchange (see [`crate::tap`]), as the 1.0
    /// HTTP+JSON transport does.
    pub fn with_tap(mut self, tap: Tap) -> Self {
        self.tap = Some(tap);
        self
    }

    pub(crate) fn tapped(mut self, tap: Option<&Tap>) -> Self {
        self.tap = tap.cloned();
        self
    }

    fn tap_for(&self, operation: &'static str) -> HttpTap<'_> {
        self.tap.as_ref().map(|t| (t, Binding::HttpJson, operation))
    }

    /// Uses this HTTP client (its pool, TLS settings, proxies, timeouts).
    pub fn with_http_client(mut self, http: reqwest::Client) -> Self {
        self.http = http;
        self
    }

    /// Adds query parameters to every request (an API key the card wants
    /// in the query).
    pub fn with_query_params(mut self, params: impl IntoIterator<Item = (String, String)>) -> Self {
        self.query.extend(params);
        self
    }

    fn request(
        &self,
        method: http::Method,
        path: &str,
        options: &CallOptions,
        stream: bool,
    ) -> ClientResult<reqwest::RequestBuilder> {
        self.request_with_query(method, path, &[], options, stream)
    }

    fn request_with_query(
        &self,
        method: http::Method,
        path: &str,
        extra: &[(String, String)],
        options: &CallOptions,
        stream: bool,
    ) -> ClientResult<reqwest::RequestBuilder> {
        let headers = v03_headers(options)?;
        let accept = if stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let mut url = reqwest::Url::parse(&format!("{}{path}", self.base))
            .map_err(|e| ClientError::InvalidRequest(format!("invalid request URL: {e}")))?;
        if !self.query.is_empty() || !extra.is_empty() {
            url.query_pairs_mut()
                .extend_pairs(self.query.iter().chain(extra.iter()));
        }
        let mut rb = self
            .http
            .request(method, url)
            .headers(headers)
            .header(http::header::ACCEPT, HeaderValue::from_static(accept));
        if let (false, Some(t)) = (stream, options.timeout) {
            rb = rb.timeout(t);
        }
        Ok(rb)
    }

    fn with_body<B: Serialize>(
        rb: reqwest::RequestBuilder,
        body: &B,
    ) -> ClientResult<reqwest::RequestBuilder> {
        let bytes = serde_json::to_vec(body)
            .map_err(|e| ClientError::InvalidRequest(format!("cannot encode the request: {e}")))?;
        Ok(rb
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(bytes))
    }

    async fn call<R: DeserializeOwned>(
        &self,
        op: &'static str,
        rb: reqwest::RequestBuilder,
    ) -> ClientResult<Option<R>> {
        let (status, body) =
            exchange(rb, &self.base, self.tap_for(op), self.max_response_bytes).await?;
        if !(200..300).contains(&status) {
            return Err(rest_error(status, &body));
        }
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        serde_json::from_slice::<Option<R>>(&body).map_err(|e| {
            ClientError::invalid_response(format!(
                "undecodable 0.3 HTTP+JSON response: {e}: {}",
                truncate_body(&body, 200)
            ))
        })
    }

    async fn call_result<R: DeserializeOwned>(
        &self,
        op: &'static str,
        rb: reqwest::RequestBuilder,
    ) -> ClientResult<R> {
        self.call(op, rb)
            .await?
            .ok_or_else(|| ClientError::invalid_response("0.3 HTTP+JSON response without a body"))
    }

    async fn stream(
        &self,
        op: &'static str,
        rb: reqwest::RequestBuilder,
        timeout: Option<std::time::Duration>,
    ) -> ClientResult<EventStream> {
        let sent = send_tapped(rb, timeout, &self.base, self.tap_for(op)).await?;
        event_stream(
            sent,
            &self.base,
            decode_rest_event,
            |status, body| {
                if !(200..300).contains(&status) {
                    return Err(rest_error(status, body));
                }
                let first: rest::StreamResponse = serde_json::from_slice(body).map_err(|e| {
                    ClientError::invalid_response(format!("undecodable 0.3 event: {e}"))
                })?;
                rest_event_to_v1(first)
            },
            self.max_response_bytes,
        )
        .await
    }
}

use agentwire_types::v0_3::rest;

/// An error answer of a 0.3 HTTP+JSON agent: `{code, message, data}` as in
/// JSON-RPC (what some 0.3 servers send); a body with a `message` only (the
/// Python SDK 0.3's) is judged by the HTTP status as the 0.3 SDKs send it
/// (404 task not found, 409 not cancelable, 501 unsupported, 415 content
/// type); else as a 1.0 error body or by the HTTP status.
fn rest_error(status: u16, body: &[u8]) -> ClientError {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(v) if v.get("code").is_some_and(serde_json::Value::is_i64) => {
            ClientError::A2a(A2aError::from_jsonrpc_error(&v))
        }
        Ok(v) if v.get("error").is_none() && v.get("message").is_some_and(|m| m.is_string()) => {
            let message = v["message"].as_str().unwrap_or_default();
            let kind = match status {
                404 => Some(ErrorKind::TaskNotFound),
                409 => Some(ErrorKind::TaskNotCancelable),
                415 => Some(ErrorKind::ContentTypeNotSupported),
                501 => Some(ErrorKind::UnsupportedOperation),
                _ => None,
            };
            match kind {
                Some(kind) => ClientError::A2a(A2aError::new(kind, message)),
                None => ClientError::A2a(A2aError::from_http_body(status, &v)),
            }
        }
        Ok(v) if v.is_object() => ClientError::A2a(A2aError::from_http_body(status, &v)),
        _ => ClientError::Http {
            status,
            body: truncate_body(body, MAX_ERROR_BODY),
        },
    }
}

/// The kind of error a 0.3 SDK names at the start of a gRPC status message
/// (`TaskNotFoundError: Task not found`): the 0.3 gRPC binding has no error
/// details, and the SDKs share status codes between errors.
#[cfg_attr(not(feature = "grpc"), allow(dead_code))]
fn named_error_kind(message: &str) -> Option<ErrorKind> {
    let (name, _) = message.split_once(':')?;
    let name = name.trim().strip_suffix("Error")?;
    match name {
        "JSONParse" => return Some(ErrorKind::ParseError),
        "AuthenticatedExtendedCardNotConfigured" => {
            return Some(ErrorKind::ExtendedAgentCardNotConfigured);
        }
        "Internal" => return Some(ErrorKind::Internal),
        _ => {}
    }
    // `TaskNotFound` -> `TASK_NOT_FOUND`, the reason of the kind.
    let mut reason = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            reason.push('_');
        }
        reason.push(c.to_ascii_uppercase());
    }
    ErrorKind::from_reason(&reason)
}

fn rest_event_to_v1(e: rest::StreamResponse) -> ClientResult<StreamResponse> {
    rest::event_from(e)
        .and_then(convert::stream_event_to_v1)
        .map_err(invalid_answer)
}

fn decode_rest_event(ev: &SseEvent) -> Option<ClientResult<StreamResponse>> {
    if ev.data.trim().is_empty() {
        return None;
    }
    match serde_json::from_str::<rest::StreamResponse>(&ev.data) {
        Ok(r) => Some(rest_event_to_v1(r)),
        Err(e) => Some(Err(ClientError::invalid_response(format!(
            "undecodable 0.3 stream event: {e}: {}",
            truncate_body(ev.data.as_bytes(), 200)
        )))),
    }
}

/// The answer of a send (`{task}` or `{message}` in the HTTP+JSON form) as
/// the 1.0 answer.
fn send_answer(r: rest::StreamResponse) -> ClientResult<SendMessageResponse> {
    use agentwire_types::send_message_response::Payload as Answer;
    use agentwire_types::stream_response::Payload;
    let payload = match rest_event_to_v1(r)?.payload {
        Some(Payload::Task(t)) => Answer::Task(t),
        Some(Payload::Message(m)) => Answer::Message(m),
        _ => {
            return Err(ClientError::invalid_response(
                "message:send answered neither a task nor a message",
            ));
        }
    };
    Ok(SendMessageResponse {
        payload: Some(payload),
    })
}

/// A path segment, percent-encoded.
fn seg(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[async_trait::async_trait]
impl Transport for V03RestTransport {
    async fn send_message(
        &self,
        request: SendMessageRequest,
        options: &CallOptions,
    ) -> ClientResult<SendMessageResponse> {
        let body = rest::send_to(convert::send_request_to_v03(request));
        let rb = Self::with_body(
            self.request(http::Method::POST, "/v1/message:send", options, false)?,
            &body,
        )?;
        let r: rest::StreamResponse = self.call_result("SendMessage", rb).await?;
        send_answer(r)
    }

    async fn send_streaming_message(
        &self,
        request: SendMessageRequest,
        options: &CallOptions,
    ) -> ClientResult<EventStream> {
        let body = rest::send_to(convert::send_request_to_v03(request));
        let rb = Self::with_body(
            self.request(http::Method::POST, "/v1/message:stream", options, true)?,
            &body,
        )?;
        self.stream("SendStreamingMessage", rb, options.timeout)
            .await
    }

    async fn get_task(&self, request: GetTaskRequest, options: &CallOptions) -> ClientResult<Task> {
        let params = convert::get_task_to_v03(request);
        let extra: Vec<(String, String)> = params
            .history_length
            .map(|n| ("historyLength".to_owned(), n.to_string()))
            .into_iter()
            .collect();
        let rb = self.request_with_query(
            http::Method::GET,
            &format!("/v1/tasks/{}", seg(&params.id)),
            &extra,
            options,
            false,
        )?;
        let t: rest::Task = self.call_result("GetTask", rb).await?;
        rest::task_from(t)
            .and_then(convert::task_to_v1)
            .map_err(invalid_answer)
    }

    async fn list_tasks(
        &self,
        _request: ListTasksRequest,
        _options: &CallOptions,
    ) -> ClientResult<ListTasksResponse> {
        list_tasks_unsupported()
    }

    async fn cancel_task(
        &self,
        request: CancelTaskRequest,
        options: &CallOptions,
    ) -> ClientResult<Task> {
        let rb = Self::with_body(
            self.request(
                http::Method::POST,
                &format!("/v1/tasks/{}:cancel", seg(&request.id)),
                options,
                false,
            )?,
            &serde_json::json!({ "name": format!("tasks/{}", request.id) }),
        )?;
        let t: rest::Task = self.call_result("CancelTask", rb).await?;
        rest::task_from(t)
            .and_then(convert::task_to_v1)
            .map_err(invalid_answer)
    }

    async fn subscribe_to_task(
        &self,
        request: SubscribeToTaskRequest,
        options: &CallOptions,
    ) -> ClientResult<EventStream> {
        let rb = self.request(
            http::Method::GET,
            &format!("/v1/tasks/{}:subscribe", seg(&request.id)),
            options,
            true,
        )?;
        self.stream("SubscribeToTask", rb, options.timeout).await
    }

    async fn create_task_push_notification_config(
        &self,
        request: TaskPushNotificationConfig,
        options: &CallOptions,
    ) -> ClientResult<TaskPushNotificationConfig> {
        let c = convert::task_push_config_to_v03(request);
        let task_id = c.task_id.clone();
        let config = rest::task_push_to(c);
        let body = rest::CreatePushConfigRequest {
            parent: format!("tasks/{task_id}"),
            config_id: config.push_notification_config.id.clone(),
            config: Some(config),
        };
        let rb = Self::with_body(
            self.request(
                http::Method::POST,
                &format!("/v1/tasks/{}/pushNotificationConfigs", seg(&task_id)),
                options,
                false,
            )?,
            &body,
        )?;
        let c: rest::TaskPushConfig = self
            .call_result("CreateTaskPushNotificationConfig", rb)
            .await?;
        Ok(convert::task_push_config_to_v1(rest::task_push_from(
            task_id, c,
        )))
    }

    async fn get_task_push_notification_config(
        &self,
        request: GetTaskPushNotificationConfigRequest,
        options: &CallOptions,
    ) -> ClientResult<TaskPushNotificationConfig> {
        let rb = self.request(
            http::Method::GET,
            &format!(
                "/v1/tasks/{}/pushNotificationConfigs/{}",
                seg(&request.task_id),
                seg(&request.id)
            ),
            options,
            false,
        )?;
        let c: rest::TaskPushConfig = self
            .call_result("GetTaskPushNotificationConfig", rb)
            .await?;
        Ok(convert::task_push_config_to_v1(rest::task_push_from(
            request.task_id,
            c,
        )))
    }

    async fn list_task_push_notification_configs(
        &self,
        request: ListTaskPushNotificationConfigsRequest,
        options: &CallOptions,
    ) -> ClientResult<ListTaskPushNotificationConfigsResponse> {
        let rb = self.request(
            http::Method::GET,
            &format!(
                "/v1/tasks/{}/pushNotificationConfigs",
                seg(&request.task_id)
            ),
            options,
            false,
        )?;
        // 0.3 servers answer the bare list or `{configs: [...]}`.
        let v: serde_json::Value = self
            .call("ListTaskPushNotificationConfigs", rb)
            .await?
            .unwrap_or_default();
        let list: Vec<rest::TaskPushConfig> = match v {
            serde_json::Value::Array(_) => serde_json::from_value(v),
            serde_json::Value::Null => Ok(Vec::new()),
            other => {
                serde_json::from_value::<rest::ListPushConfigsResponse>(other).map(|r| r.configs)
            }
        }
        .map_err(|e| ClientError::invalid_response(format!("push config list: {e}")))?;
        Ok(ListTaskPushNotificationConfigsResponse {
            configs: list
                .into_iter()
                .map(|c| {
                    convert::task_push_config_to_v1(rest::task_push_from(
                        request.task_id.clone(),
                        c,
                    ))
                })
                .collect(),
            next_page_token: String::new(),
        })
    }

    async fn delete_task_push_notification_config(
        &self,
        request: DeleteTaskPushNotificationConfigRequest,
        options: &CallOptions,
    ) -> ClientResult<()> {
        let rb = self.request(
            http::Method::DELETE,
            &format!(
                "/v1/tasks/{}/pushNotificationConfigs/{}",
                seg(&request.task_id),
                seg(&request.id)
            ),
            options,
            false,
        )?;
        self.call::<serde_json::Value>("DeleteTaskPushNotificationConfig", rb)
            .await?;
        Ok(())
    }

    async fn get_extended_agent_card(
        &self,
        _request: GetExtendedAgentCardRequest,
        options: &CallOptions,
    ) -> ClientResult<AgentCard> {
        let rb = self.request(http::Method::GET, "/v1/card", options, false)?;
        let card: serde_json::Value = self.call_result("GetExtendedAgentCard", rb).await?;
        let body = serde_json::to_vec(&card)
            .map_err(|e| ClientError::invalid_response(format!("extended card: {e}")))?;
        crate::card::parse_agent_card(&body)
    }
}
