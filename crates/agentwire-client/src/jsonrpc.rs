//! The JSON-RPC 2.0 binding (spec 9): every operation is a POST of a
//! JSON-RPC request to the interface URL; streaming operations answer with
//! Server-Sent Events whose data are JSON-RPC responses.

use std::sync::atomic::{AtomicU64, Ordering};

use agentwire_types::jsonrpc::{JSONRPC_VERSION, methods};
use agentwire_types::{
    A2aError, AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{ClientError, ClientResult, truncate_body};
use crate::http::{
    DEFAULT_MAX_RESPONSE_BYTES, HttpTap, MAX_ERROR_BODY, default_http_client, event_stream,
    exchange, send_tapped, service_headers,
};
use crate::sse::SseEvent;
use crate::tap::Tap;
use crate::transport::{Binding, CallOptions, EventStream, TenantField, Transport};

/// The JSON-RPC 2.0 transport.
///
/// Sends `Content-Type: application/json` and `A2A-Version: 1.0` on every
/// request, the service parameters of the [`CallOptions`] as headers, and
/// decodes results as ProtoJSON. JSON-RPC errors become
/// [`ClientError::A2a`].
///
/// ```no_run
/// # async fn demo() -> Result<(), agentwire_client::ClientError> {
/// use agentwire_client::{CallOptions, JsonRpcTransport, Transport};
/// use agentwire_types::GetTaskRequest;
/// let rpc = JsonRpcTransport::new("http://127.0.0.1:8080/")?;
/// let req = GetTaskRequest { id: "task-1".into(), ..Default::default() };
/// let task = rpc.get_task(req, &CallOptions::new()).await?;
/// println!("{:?}", task.state());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct JsonRpcTransport {
    http: reqwest::Client,
    url: String,
    tenant: String,
    next_id: AtomicU64,
    tap: Option<Tap>,
    /// The headers of a call (the 0.3 transport sends its own).
    headers: fn(&CallOptions) -> ClientResult<http::HeaderMap>,
    /// The most bytes of one answer or one stream event.
    max_response_bytes: usize,
}

/// The JSON-RPC 2.0 request object.
#[derive(Serialize)]
pub(crate) struct RequestEnvelope<'a, P> {
    jsonrpc: &'static str,
    id: u64,
    method: &'a str,
    params: &'a P,
}

/// The JSON-RPC 2.0 response object (`result` or `error`).
#[derive(serde::Deserialize)]
#[serde(bound = "T: DeserializeOwned")]
pub(crate) struct ResponseEnvelope<T> {
    #[serde(default)]
    result: Option<T>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

impl JsonRpcTransport {
    /// A transport posting to `url` (the interface URL of the card) with the
    /// shared default HTTP client.
    pub fn new(url: impl Into<String>) -> ClientResult<Self> {
        let url = url.into();
        let parsed = reqwest::Url::parse(&url).map_err(|e| {
            ClientError::InvalidRequest(format!("invalid JSON-RPC URL {url:?}: {e}"))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ClientError::InvalidRequest(format!(
                "JSON-RPC URL {url:?} must be http:// or https://"
            )));
        }
        Ok(Self {
            http: default_http_client(),
            url,
            tenant: String::new(),
            next_id: AtomicU64::new(1),
            tap: None,
            headers: service_headers,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        })
    }

    /// The most bytes accepted in one answer, and in one event of a
    /// stream (default [`DEFAULT_MAX_RESPONSE_BYTES`], 64 MiB): reading
    /// stops there with [`ClientError::ResponseTooLarge`].
    pub fn with_max_response_bytes(mut self, max: usize) -> Self {
        self.max_response_bytes = max;
        self
    }

    /// Sends the headers `headers` makes instead of the 1.0 ones (the 0.3
    /// transport's).
    pub(crate) fn with_headers(
        mut self,
        headers: fn(&CallOptions) -> ClientResult<http::HeaderMap>,
    ) -> Self {
        self.headers = headers;
        self
    }

    /// Tells `tap` every exchange: the request and its exact body, the
    /// response and its exact body, each stream frame (see [`crate::tap`]).
    pub fn with_tap(mut self, tap: Tap) -> Self {
        self.tap = Some(tap);
        self
    }

    pub(crate) fn tapped(mut self, tap: Option<&Tap>) -> Self {
        self.tap = tap.cloned();
        self
    }

    fn tap_for(&self, operation: &'static str) -> HttpTap<'_> {
        self.tap.as_ref().map(|t| (t, Binding::JsonRpc, operation))
    }

    /// Uses this HTTP client (its pool, TLS settings, proxies, timeouts).
    pub fn with_http_client(mut self, http: reqwest::Client) -> Self {
        self.http = http;
        self
    }

    /// Adds query parameters to the endpoint URL (for an API key the agent
    /// card declares `in: query`).
    pub fn with_query_params(mut self, params: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut params = params.into_iter().peekable();
        if params.peek().is_none() {
            return self;
        }
        if let Ok(mut url) = reqwest::Url::parse(&self.url) {
            url.query_pairs_mut().extend_pairs(params);
            self.url = url.into();
        }
        self
    }

    /// Sets the tenant put in requests that name none.
    pub fn with_tenant(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = tenant.into();
        self
    }

    /// The endpoint URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn request<P: Serialize>(
        &self,
        method: &'static str,
        params: &P,
        options: &CallOptions,
        stream: bool,
    ) -> ClientResult<reqwest::RequestBuilder> {
        let envelope = RequestEnvelope {
            jsonrpc: JSONRPC_VERSION,
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            method,
            params,
        };
        let body = serde_json::to_vec(&envelope)
            .map_err(|e| ClientError::InvalidRequest(format!("cannot encode {method}: {e}")))?;
        let accept = if stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let mut rb = self
            .http
            .post(&self.url)
            .headers((self.headers)(options)?)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, accept)
            .body(body);
        if let (false, Some(t)) = (stream, options.timeout) {
            rb = rb.timeout(t);
        }
        Ok(crate::trace_context::http(rb))
    }

    /// Calls `method` and decodes its `result`.
    pub(crate) async fn call<P, R>(
        &self,
        method: &'static str,
        params: &P,
        options: &CallOptions,
    ) -> ClientResult<R>
    where
        P: Serialize,
        R: DeserializeOwned,
    {
        self.call_opt(method, params, options)
            .await?
            .ok_or_else(|| no_result(method))
    }

    /// [`Self::call`], `Ok(None)` for a success without `result` (or with
    /// `"result": null`).
    pub(crate) async fn call_opt<P, R>(
        &self,
        method: &'static str,
        params: &P,
        options: &CallOptions,
    ) -> ClientResult<Option<R>>
    where
        P: Serialize,
        R: DeserializeOwned,
    {
        let rb = self.request(method, params, options, false)?;
        let (status, body) =
            exchange(rb, &self.url, self.tap_for(method), self.max_response_bytes).await?;
        decode_response(method, status, &body)
    }

    async fn stream<P: Serialize>(
        &self,
        method: &'static str,
        params: &P,
        options: &CallOptions,
    ) -> ClientResult<EventStream> {
        self.stream_as::<_, StreamResponse>(method, params, options, decode_event, Ok)
            .await
    }

    /// A streaming call whose SSE events `decode` reads; an answer that is
    /// not a stream is a JSON-RPC error, or a lone result of type `E`
    /// (`convert` makes it the 1.0 event) accepted as a one-event stream.
    pub(crate) async fn stream_as<P: Serialize, E: DeserializeOwned>(
        &self,
        method: &'static str,
        params: &P,
        options: &CallOptions,
        decode: fn(&SseEvent) -> Option<ClientResult<StreamResponse>>,
        convert: fn(E) -> ClientResult<StreamResponse>,
    ) -> ClientResult<EventStream> {
        let rb = self.request(method, params, options, true)?;
        let sent = send_tapped(rb, options.timeout, &self.url, self.tap_for(method)).await?;
        event_stream(
            sent,
            &self.url,
            decode,
            |status, body| {
                let first: E =
                    decode_response(method, status, body)?.ok_or_else(|| no_result(method))?;
                convert(first)
            },
            self.max_response_bytes,
        )
        .await
    }
}

/// A success without `result`, where one is due.
pub(crate) fn no_result(method: &str) -> ClientError {
    ClientError::invalid_response(format!(
        "{method}: JSON-RPC response has neither result nor error"
    ))
}

/// Decodes a JSON-RPC response body received with HTTP `status`.
pub(crate) fn decode_response<R: DeserializeOwned>(
    method: &str,
    status: u16,
    body: &[u8],
) -> ClientResult<Option<R>> {
    let success = (200..300).contains(&status);
    match serde_json::from_slice::<ResponseEnvelope<R>>(body) {
        Ok(ResponseEnvelope {
            error: Some(error), ..
        }) => Err(ClientError::A2a(A2aError::from_jsonrpc_error(&error))),
        Ok(ResponseEnvelope { result, .. }) if success => Ok(result),
        _ if !success => Err(ClientError::Http {
            status,
            body: truncate_body(body, MAX_ERROR_BODY),
        }),
        Err(e) => Err(ClientError::invalid_response(format!(
            "{method}: undecodable JSON-RPC response: {e}: {}",
            truncate_body(body, 200)
        ))),
        Ok(_) => unreachable!("success and error handled above"),
    }
}

/// One SSE event of a JSON-RPC stream; `None` for events to skip (empty
/// data, or a result of an event kind this client does not know).
fn decode_event(ev: &SseEvent) -> Option<ClientResult<StreamResponse>> {
    match decode_rpc_event::<StreamResponse>(ev)? {
        Ok(r) if r.payload.is_none() => {
            tracing::debug!(data = %ev.data, "skipping stream event of unknown kind");
            None
        }
        other => Some(other),
    }
}

/// The `result` (or the error) of one SSE event of a JSON-RPC stream, as a
/// `T`; `None` for an event without data.
pub(crate) fn decode_rpc_event<T: DeserializeOwned>(ev: &SseEvent) -> Option<ClientResult<T>> {
    if ev.data.trim().is_empty() {
        return None;
    }
    match serde_json::from_str::<ResponseEnvelope<T>>(&ev.data) {
        Ok(ResponseEnvelope {
            error: Some(error), ..
        }) => Some(Err(ClientError::A2a(A2aError::from_jsonrpc_error(&error)))),
        Ok(ResponseEnvelope {
            result: Some(r), ..
        }) => Some(Ok(r)),
        Ok(_) => Some(Err(ClientError::invalid_response(format!(
            "stream event is neither a result nor an error: {}",
            truncate_body(ev.data.as_bytes(), 200)
        )))),
        Err(e) => Some(Err(ClientError::invalid_response(format!(
            "undecodable stream event: {e}: {}",
            truncate_body(ev.data.as_bytes(), 200)
        )))),
    }
}

fn with_tenant<R: TenantField>(mut request: R, tenant: &str) -> R {
    request.fill_tenant(tenant);
    request
}

#[async_trait::async_trait]
impl Transport for JsonRpcTransport {
    async fn send_message(
        &self,
        request: SendMessageRequest,
        options: &CallOptions,
    ) -> ClientResult<SendMessageResponse> {
        let options =
            crate::generation::versioned(options, crate::generation::checks_generation(&request));
        let options = &*options;
        let request = with_tenant(request, &self.tenant);
        self.call(methods::SEND_MESSAGE, &request, options).await
    }

    async fn send_streaming_message(
        &self,
        request: SendMessageRequest,
        options: &CallOptions,
    ) -> ClientResult<EventStream> {
        let options =
            crate::generation::versioned(options, crate::generation::checks_generation(&request));
        let options = &*options;
        let request = with_tenant(request, &self.tenant);
        self.stream(methods::SEND_STREAMING_MESSAGE, &request, options)
            .await
    }

    async fn get_task(&self, request: GetTaskRequest, options: &CallOptions) -> ClientResult<Task> {
        let options = crate::generation::versioned(options, request.current_generation.is_some());
        let options = &*options;
        let request = with_tenant(request, &self.tenant);
        self.call(methods::GET_TASK, &request, options).await
    }

    async fn list_tasks(
        &self,
        request: ListTasksRequest,
        options: &CallOptions,
    ) -> ClientResult<ListTasksResponse> {
        let request = with_tenant(request, &self.tenant);
        self.call(methods::LIST_TASKS, &request, options).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskRequest,
        options: &CallOptions,
    ) -> ClientResult<Task> {
        let request = with_tenant(request, &self.tenant);
        self.call(methods::CANCEL_TASK, &request, options).await
    }

    async fn subscribe_to_task(
        &self,
        request: SubscribeToTaskRequest,
        options: &CallOptions,
    ) -> ClientResult<EventStream> {
        let request = with_tenant(request, &self.tenant);
        self.stream(methods::SUBSCRIBE_TO_TASK, &request, options)
            .await
    }

    async fn create_task_push_notification_config(
        &self,
        request: TaskPushNotificationConfig,
        options: &CallOptions,
    ) -> ClientResult<TaskPushNotificationConfig> {
        let request = with_tenant(request, &self.tenant);
        self.call(methods::CREATE_PUSH_CONFIG, &request, options)
            .await
    }

    async fn get_task_push_notification_config(
        &self,
        request: GetTaskPushNotificationConfigRequest,
        options: &CallOptions,
    ) -> ClientResult<TaskPushNotificationConfig> {
        let request = with_tenant(request, &self.tenant);
        self.call(methods::GET_PUSH_CONFIG, &request, options).await
    }

    async fn list_task_push_notification_configs(
        &self,
        request: ListTaskPushNotificationConfigsRequest,
        options: &CallOptions,
    ) -> ClientResult<ListTaskPushNotificationConfigsResponse> {
        let request = with_tenant(request, &self.tenant);
        self.call(methods::LIST_PUSH_CONFIGS, &request, options)
            .await
    }

    async fn delete_task_push_notification_config(
        &self,
        request: DeleteTaskPushNotificationConfigRequest,
        options: &CallOptions,
    ) -> ClientResult<()> {
        let request = with_tenant(request, &self.tenant);
        // The result is `google.protobuf.Empty` (`{}`), or absent / null.
        self.call_opt::<_, serde::de::IgnoredAny>(methods::DELETE_PUSH_CONFIG, &request, options)
            .await?;
        Ok(())
    }

    async fn get_extended_agent_card(
        &self,
        request: GetExtendedAgentCardRequest,
        options: &CallOptions,
    ) -> ClientResult<AgentCard> {
        let request = with_tenant(request, &self.tenant);
        self.call(methods::GET_EXTENDED_AGENT_CARD, &request, options)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_types::ErrorKind;
    use serde_json::json;

    fn body(v: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn request_envelope_shape() {
        let req = GetTaskRequest {
            id: "t-1".into(),
            history_length: Some(2),
            ..Default::default()
        };
        let env = RequestEnvelope {
            jsonrpc: JSONRPC_VERSION,
            id: 7,
            method: methods::GET_TASK,
            params: &req,
        };
        assert_eq!(
            serde_json::to_value(&env).unwrap(),
            json!({"jsonrpc": "2.0", "id": 7, "method": "GetTask",
                   "params": {"id": "t-1", "historyLength": 2}})
        );
        let env = RequestEnvelope {
            jsonrpc: JSONRPC_VERSION,
            id: 8,
            method: methods::GET_EXTENDED_AGENT_CARD,
            params: &GetExtendedAgentCardRequest::default(),
        };
        assert_eq!(serde_json::to_value(&env).unwrap()["params"], json!({}));
    }

    #[test]
    fn result_is_decoded() {
        let b = body(json!({"jsonrpc": "2.0", "id": 1, "result": {
            "id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_COMPLETED"}}}));
        let task: Task = decode_response("GetTask", 200, &b).unwrap().unwrap();
        assert_eq!(task.id, "t-1");
        assert_eq!(task.state(), agentwire_types::TaskState::Completed);
    }

    #[test]
    fn a2a_error_keeps_its_kind_and_details() {
        let b = body(json!({"jsonrpc": "2.0", "id": 2, "error": {
            "code": -32001, "message": "Task not found",
            "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                      "reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org",
                      "metadata": {"taskId": "nope"}}]}}));
        let err = decode_response::<Task>("GetTask", 200, &b).unwrap_err();
        let a2a = err.a2a().expect("an A2A error");
        assert_eq!(a2a.kind, ErrorKind::TaskNotFound);
        assert_eq!(a2a.message, "Task not found");
        assert_eq!(a2a.metadata["taskId"], "nope");
    }

    #[test]
    fn code_alone_and_standard_codes() {
        let b =
            body(json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32002, "message": "no"}}));
        let err = decode_response::<Task>("CancelTask", 200, &b).unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::TaskNotCancelable));
        let b = body(
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "bad"}}),
        );
        // JSON-RPC errors sent with an HTTP error status are still A2A errors.
        let err = decode_response::<Task>("GetTask", 400, &b).unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::ParseError));
        // The ErrorInfo reason wins over a code that disagrees.
        let b = body(
            json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32603, "message": "x",
            "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                      "reason": "VERSION_NOT_SUPPORTED", "domain": "a2a-protocol.org"}]}}),
        );
        let err = decode_response::<Task>("GetTask", 200, &b).unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::VersionNotSupported));
    }

    #[test]
    fn non_jsonrpc_failures() {
        let err = decode_response::<Task>("GetTask", 502, b"<html>Bad gateway</html>").unwrap_err();
        assert!(
            matches!(&err, ClientError::Http { status: 502, body } if body.contains("Bad gateway")),
            "{err:?}"
        );
        let err = decode_response::<Task>("GetTask", 200, b"not json").unwrap_err();
        assert!(matches!(err, ClientError::InvalidResponse(_)), "{err:?}");
        let b = body(json!({"jsonrpc": "2.0", "id": 1}));
        assert_eq!(decode_response::<Task>("GetTask", 200, &b).unwrap(), None);
        let b = body(json!({"jsonrpc": "2.0", "id": 1, "result": {"id": 5}}));
        assert!(matches!(
            decode_response::<Task>("GetTask", 200, &b),
            Err(ClientError::InvalidResponse(_))
        ));
    }

    fn sse(data: &str) -> SseEvent {
        SseEvent {
            event: "message".into(),
            data: data.into(),
            id: None,
        }
    }

    #[test]
    fn stream_events() {
        let ev = sse(
            r#"{"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}"#,
        );
        let r = decode_event(&ev).unwrap().unwrap();
        assert_eq!(r.task_id(), Some("t"));
        let ev = sse(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32004,"message":"terminal"}}"#);
        let e = decode_event(&ev).unwrap().unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::UnsupportedOperation));
        // An unknown event kind is skipped, garbage is an error.
        assert!(
            decode_event(&sse(
                r#"{"jsonrpc":"2.0","id":1,"result":{"futureEvent":{}}}"#
            ))
            .is_none()
        );
        assert!(decode_event(&sse("  ")).is_none());
        assert!(matches!(
            decode_event(&sse("{oops")),
            Some(Err(ClientError::InvalidResponse(_)))
        ));
    }

    #[test]
    fn url_validation() {
        assert!(JsonRpcTransport::new("http://127.0.0.1:1/").is_ok());
        assert!(JsonRpcTransport::new("127.0.0.1:1").is_err());
        assert!(JsonRpcTransport::new("grpc://h:1").is_err());
    }
}
