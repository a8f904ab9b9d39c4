//! The HTTP+JSON (REST) binding (spec 11): resource URLs, ProtoJSON bodies
//! with `Content-Type: application/a2a+json`, `google.rpc.Status` error
//! bodies and Server-Sent Events whose data are `StreamResponse`s.

use agentwire_types::rest_routes::{COMPONENT, RestMethod, RestRoute};
use agentwire_types::{
    A2aError, AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, MEDIA_TYPE, SendMessageRequest, SendMessageResponse,
    StreamResponse, SubscribeToTaskRequest, Task, TaskPushNotificationConfig, TaskState,
};
use percent_encoding::utf8_percent_encode;
use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{ClientError, ClientResult, truncate_body};
use crate::http::{
    DEFAULT_MAX_RESPONSE_BYTES, HttpTap, MAX_ERROR_BODY, default_http_client, event_stream,
    exchange, send_tapped, service_headers,
};
use crate::sse::SseEvent;
use crate::tap::{Tap, TapCall};
use crate::transport::{Binding, CallOptions, EventStream, Transport};

const ACCEPT_JSON: &str = "application/a2a+json, application/json";

/// The HTTP+JSON (REST) transport.
///
/// Paths are those of spec 11.3 under the interface URL, prefixed with
/// `/{tenant}` when the request (or the transport) names a tenant. GET
/// parameters go in the query string with camelCase names.
///
/// ```no_run
/// # async fn demo() -> Result<(), agentwire_client::ClientError> {
/// use agentwire_client::{CallOptions, RestTransport, Transport};
/// use agentwire_types::{ListTasksRequest, TaskState};
/// let rest = RestTransport::new("http://127.0.0.1:8080")?;
/// let req = ListTasksRequest {
///     status: TaskState::Working as i32,
///     page_size: Some(20),
///     ..Default::default()
/// };
/// let page = rest.list_tasks(req, &CallOptions::new()).await?;
/// println!("{} working tasks", page.total_size);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RestTransport {
    http: reqwest::Client,
    base: String,
    tenant: String,
    query: Vec<(String, String)>,
    tap: Option<Tap>,
    /// The most bytes of one answer or one stream event.
    max_response_bytes: usize,
}

impl RestTransport {
    /// A transport for the interface at `base_url` with the shared default
    /// HTTP client.
    pub fn new(base_url: impl Into<String>) -> ClientResult<Self> {
        let base = base_url.into();
        let parsed = reqwest::Url::parse(&base).map_err(|e| {
            ClientError::InvalidRequest(format!("invalid HTTP+JSON URL {base:?}: {e}"))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ClientError::InvalidRequest(format!(
                "HTTP+JSON URL {base:?} must be http:// or https://"
            )));
        }
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(ClientError::InvalidRequest(format!(
                "HTTP+JSON URL {base:?} must not have a query or fragment"
            )));
        }
        Ok(Self {
            http: default_http_client(),
            base: base.trim_end_matches('/').to_owned(),
            tenant: String::new(),
            query: Vec::new(),
            tap: None,
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
        self.tap.as_ref().map(|t| (t, Binding::HttpJson, operation))
    }

    /// Adds query parameters to every request URL (for an API key the agent
    /// card declares `in: query`).
    pub fn with_query_params(mut self, params: impl IntoIterator<Item = (String, String)>) -> Self {
        self.query.extend(params);
        self
    }

    /// Uses this HTTP client.
    pub fn with_http_client(mut self, http: reqwest::Client) -> Self {
        self.http = http;
        self
    }

    /// Sets the tenant used for requests that name none.
    pub fn with_tenant(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = tenant.into();
        self
    }

    /// The base URL (without trailing `/`).
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The URL of a route (from the table shared with the server) under the
    /// request's tenant, or the transport's when the request names none.
    fn url(&self, request_tenant: &str, route: &RestRoute) -> UrlBuilder {
        let tenant = if request_tenant.is_empty() {
            &self.tenant
        } else {
            request_tenant
        };
        let mut b = UrlBuilder::new(&self.base, tenant, route);
        b.extra.clone_from(&self.query);
        b
    }

    fn builder(
        &self,
        method: Method,
        url: &str,
        body: Option<Vec<u8>>,
        options: &CallOptions,
        stream: bool,
    ) -> ClientResult<reqwest::RequestBuilder> {
        let mut rb = self
            .http
            .request(method, url)
            .headers(service_headers(options)?)
            .header(
                http::header::ACCEPT,
                if stream {
                    "text/event-stream"
                } else {
                    ACCEPT_JSON
                },
            );
        if let Some(body) = body {
            rb = rb.header(http::header::CONTENT_TYPE, MEDIA_TYPE).body(body);
        }
        if let (false, Some(t)) = (stream, options.timeout) {
            rb = rb.timeout(t);
        }
        Ok(crate::trace_context::http(rb))
    }

    async fn exchange(
        &self,
        op: &'static str,
        method: Method,
        url: &str,
        body: Option<Vec<u8>>,
        options: &CallOptions,
    ) -> ClientResult<bytes::Bytes> {
        let rb = self.builder(method, url, body, options, false)?;
        let (status, bytes) = exchange(rb, url, self.tap_for(op), self.max_response_bytes).await?;
        if !(200..300).contains(&status) {
            return Err(error_from_http(status, &bytes));
        }
        Ok(bytes)
    }

    async fn unary<R: DeserializeOwned>(
        &self,
        op: &'static str,
        method: Method,
        url: &str,
        body: Option<Vec<u8>>,
        options: &CallOptions,
    ) -> ClientResult<R> {
        let bytes = self.exchange(op, method, url, body, options).await?;
        serde_json::from_slice(&bytes).map_err(|e| {
            ClientError::invalid_response(format!(
                "undecodable answer from {url}: {e}: {}",
                truncate_body(&bytes, 200)
            ))
        })
    }

    async fn open_stream(
        &self,
        op: &'static str,
        method: Method,
        url: &str,
        body: Option<Vec<u8>>,
        options: &CallOptions,
    ) -> ClientResult<(reqwest::Response, Option<TapCall>)> {
        let rb = self.builder(method, url, body, options, true)?;
        send_tapped(rb, options.timeout, url, self.tap_for(op)).await
    }

    async fn event_stream(
        &self,
        sent: (reqwest::Response, Option<TapCall>),
        url: &str,
    ) -> ClientResult<EventStream> {
        event_stream(
            sent,
            url,
            decode_event,
            |status, bytes| {
                if !(200..300).contains(&status) {
                    return Err(error_from_http(status, bytes));
                }
                // A single JSON answer instead of a stream.
                let ev = SseEvent {
                    event: "message".into(),
                    data: String::from_utf8_lossy(bytes).into_owned(),
                    id: None,
                };
                decode_event(&ev).unwrap_or_else(|| {
                    Err(ClientError::invalid_response(format!(
                        "{url} answered a streaming call with neither a stream nor an event"
                    )))
                })
            },
            self.max_response_bytes,
        )
        .await
    }
}

/// Builds `{base}[/{tenant}]/path?query` with the route's path and encoded
/// query values.
#[derive(Debug)]
pub(crate) struct UrlBuilder {
    url: String,
    has_query: bool,
    /// Parameters appended last, whatever the path.
    extra: Vec<(String, String)>,
}

impl UrlBuilder {
    pub(crate) fn new(base: &str, tenant: &str, route: &RestRoute) -> Self {
        let mut url = base.trim_end_matches('/').to_owned();
        url.push_str(&route.path(tenant));
        Self {
            url,
            has_query: false,
            extra: Vec::new(),
        }
    }

    /// Appends a query parameter with an encoded value.
    pub(crate) fn query(mut self, name: &str, value: impl AsRef<str>) -> Self {
        self.url.push(if self.has_query { '&' } else { '?' });
        self.has_query = true;
        self.url.push_str(name);
        self.url.push('=');
        self.url
            .extend(utf8_percent_encode(value.as_ref(), COMPONENT));
        self
    }

    /// Appends a query parameter when the value is present.
    pub(crate) fn query_opt<V: ToString>(self, name: &str, value: Option<V>) -> Self {
        match value {
            Some(v) => self.query(name, v.to_string()),
            None => self,
        }
    }

    pub(crate) fn build(mut self) -> String {
        for (name, value) in std::mem::take(&mut self.extra) {
            self = self.query(&name, value);
        }
        self.url
    }
}

fn require_id(what: &str, id: &str) -> ClientResult<()> {
    if id.is_empty() {
        Err(ClientError::InvalidRequest(format!("{what} is empty")))
    } else {
        Ok(())
    }
}

fn json_body<T: Serialize>(value: &T) -> ClientResult<Vec<u8>> {
    serde_json::to_vec(value)
        .map_err(|e| ClientError::InvalidRequest(format!("cannot encode request: {e}")))
}

/// The name of a `TaskState` filter value, as the query wants it
/// (`TASK_STATE_WORKING`); unknown numbers are sent as numbers.
fn state_name(status: i32) -> Option<String> {
    match TaskState::try_from(status) {
        Ok(TaskState::Unspecified) => None,
        Ok(state) => Some(state.as_str_name().to_owned()),
        Err(_) => Some(status.to_string()),
    }
}

/// The URL of `GET /tasks` with the request's filters.
pub(crate) fn list_tasks_url(t: &RestTransport, req: &ListTasksRequest) -> String {
    let mut u = t.url(&req.tenant, &RestRoute::ListTasks);
    if !req.context_id.is_empty() {
        u = u.query("contextId", &req.context_id);
    }
    u = u
        .query_opt("status", state_name(req.status))
        .query_opt("pageSize", req.page_size);
    if !req.page_token.is_empty() {
        u = u.query("pageToken", &req.page_token);
    }
    u.query_opt("historyLength", req.history_length)
        .query_opt("statusTimestampAfter", req.status_timestamp_after)
        .query_opt("includeArtifacts", req.include_artifacts)
        .build()
}

/// An error answer: an A2A error when the body is a `google.rpc.Status`
/// (`{"error": {...}}`), else an HTTP error.
pub(crate) fn error_from_http(status: u16, body: &[u8]) -> ClientError {
    match serde_json::from_slice::<Value>(body) {
        Ok(v) if v.get("error").is_some_and(Value::is_object) => {
            ClientError::A2a(A2aError::from_http_body(status, &v))
        }
        _ => ClientError::Http {
            status,
            body: truncate_body(body, MAX_ERROR_BODY),
        },
    }
}

/// An error carried inside a stream (an SSE event with `{"error": ...}`).
fn error_from_event(v: &Value) -> ClientError {
    let status = v
        .pointer("/error/code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c))
        .unwrap_or(500);
    ClientError::A2a(A2aError::from_http_body(status, v))
}

/// One SSE event of a REST stream; `None` for events to skip.
pub(crate) fn decode_event(ev: &SseEvent) -> Option<ClientResult<StreamResponse>> {
    let data = ev.data.trim();
    if data.is_empty() {
        return None;
    }
    if ev.event != "error" {
        if let Ok(r) = serde_json::from_str::<StreamResponse>(data) {
            if r.payload.is_some() {
                return Some(Ok(r));
            }
        }
    }
    // Not a known event: an error object, an event kind this client does
    // not know, or garbage.
    match serde_json::from_str::<Value>(data) {
        Ok(v) if v.get("error").is_some_and(Value::is_object) => Some(Err(error_from_event(&v))),
        Ok(v) if ev.event == "error" => Some(Err(ClientError::invalid_response(format!(
            "stream error event: {v}"
        )))),
        Ok(Value::Object(_)) if serde_json::from_str::<StreamResponse>(data).is_ok() => {
            tracing::debug!(data, "skipping stream event of unknown kind");
            None
        }
        Ok(_) | Err(_) => {
            let why = serde_json::from_str::<StreamResponse>(data)
                .err()
                .map_or_else(|| "not an object".to_owned(), |e| e.to_string());
            Some(Err(ClientError::invalid_response(format!(
                "undecodable stream event: {why}: {}",
                truncate_body(data.as_bytes(), 200)
            ))))
        }
    }
}

/// The reqwest method of a table row's method.
fn http_method(method: RestMethod) -> Method {
    match method {
        RestMethod::Get => Method::GET,
        RestMethod::Post => Method::POST,
        RestMethod::Delete => Method::DELETE,
    }
}

#[async_trait::async_trait]
impl Transport for RestTransport {
    async fn send_message(
        &self,
        request: SendMessageRequest,
        options: &CallOptions,
    ) -> ClientResult<SendMessageResponse> {
        let options =
            crate::generation::versioned(options, crate::generation::checks_generation(&request));
        let options = &*options;
        let route = RestRoute::SendMessage;
        let url = self.url(&request.tenant, &route).build();
        let body = Some(json_body(&request)?);
        self.unary(
            route.template().operation,
            http_method(route.method()),
            &url,
            body,
            options,
        )
        .await
    }

    async fn send_streaming_message(
        &self,
        request: SendMessageRequest,
        options: &CallOptions,
    ) -> ClientResult<EventStream> {
        let options =
            crate::generation::versioned(options, crate::generation::checks_generation(&request));
        let options = &*options;
        let route = RestRoute::SendStreamingMessage;
        let url = self.url(&request.tenant, &route).build();
        let body = Some(json_body(&request)?);
        let resp = self
            .open_stream(
                route.template().operation,
                http_method(route.method()),
                &url,
                body,
                options,
            )
            .await?;
        self.event_stream(resp, &url).await
    }

    async fn get_task(&self, request: GetTaskRequest, options: &CallOptions) -> ClientResult<Task> {
        require_id("task id", &request.id)?;
        let route = RestRoute::GetTask {
            id: request.id.clone(),
        };
        let url = self
            .url(&request.tenant, &route)
            .query_opt("historyLength", request.history_length)
            .query_opt("currentGeneration", request.current_generation)
            .build();
        let options = crate::generation::versioned(options, request.current_generation.is_some());
        self.unary(
            route.template().operation,
            http_method(route.method()),
            &url,
            None,
            &options,
        )
        .await
    }

    async fn list_tasks(
        &self,
        request: ListTasksRequest,
        options: &CallOptions,
    ) -> ClientResult<ListTasksResponse> {
        let url = list_tasks_url(self, &request);
        let route = RestRoute::ListTasks;
        let method = http_method(route.method());
        self.unary(route.template().operation, method, &url, None, options)
            .await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskRequest,
        options: &CallOptions,
    ) -> ClientResult<Task> {
        require_id("task id", &request.id)?;
        let route = RestRoute::CancelTask {
            id: request.id.clone(),
        };
        let url = self.url(&request.tenant, &route).build();
        let body = Some(json_body(&request)?);
        self.unary(
            route.template().operation,
            http_method(route.method()),
            &url,
            body,
            options,
        )
        .await
    }

    async fn subscribe_to_task(
        &self,
        request: SubscribeToTaskRequest,
        options: &CallOptions,
    ) -> ClientResult<EventStream> {
        require_id("task id", &request.id)?;
        let route = RestRoute::SubscribeToTask {
            id: request.id.clone(),
        };
        let url = self.url(&request.tenant, &route).build();
        // The table accepts GET (the proto's HTTP rule) and POST (the spec's
        // tables): try the first and fall back to the next once when the
        // server refuses the method.
        let mut methods = route.template().methods.iter().copied();
        let first = methods.next().unwrap_or(RestMethod::Get);
        let op = route.template().operation;
        let mut resp = self
            .open_stream(op, http_method(first), &url, None, options)
            .await?;
        if let Some(next) = methods.next() {
            if resp.0.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED {
                tracing::debug!(%url, "{first} :subscribe refused with 405, retrying with {next}");
                let (refused, tap) = resp;
                drop(refused);
                if let Some(tap) = tap {
                    tap.end(None);
                }
                resp = self
                    .open_stream(op, http_method(next), &url, None, options)
                    .await?;
            }
        }
        self.event_stream(resp, &url).await
    }

    async fn create_task_push_notification_config(
        &self,
        request: TaskPushNotificationConfig,
        options: &CallOptions,
    ) -> ClientResult<TaskPushNotificationConfig> {
        require_id("task id", &request.task_id)?;
        let route = RestRoute::CreateTaskPushNotificationConfig {
            task_id: request.task_id.clone(),
        };
        let url = self.url(&request.tenant, &route).build();
        let body = Some(json_body(&request)?);
        self.unary(
            route.template().operation,
            http_method(route.method()),
            &url,
            body,
            options,
        )
        .await
    }

    async fn get_task_push_notification_config(
        &self,
        request: GetTaskPushNotificationConfigRequest,
        options: &CallOptions,
    ) -> ClientResult<TaskPushNotificationConfig> {
        require_id("task id", &request.task_id)?;
        require_id("push notification config id", &request.id)?;
        let route = RestRoute::GetTaskPushNotificationConfig {
            task_id: request.task_id.clone(),
            id: request.id.clone(),
        };
        let url = self.url(&request.tenant, &route).build();
        self.unary(
            route.template().operation,
            http_method(route.method()),
            &url,
            None,
            options,
        )
        .await
    }

    async fn list_task_push_notification_configs(
        &self,
        request: ListTaskPushNotificationConfigsRequest,
        options: &CallOptions,
    ) -> ClientResult<ListTaskPushNotificationConfigsResponse> {
        require_id("task id", &request.task_id)?;
        let route = RestRoute::ListTaskPushNotificationConfigs {
            task_id: request.task_id.clone(),
        };
        let mut url = self.url(&request.tenant, &route).query_opt(
            "pageSize",
            (request.page_size != 0).then_some(request.page_size),
        );
        if !request.page_token.is_empty() {
            url = url.query("pageToken", &request.page_token);
        }
        self.unary(
            route.template().operation,
            http_method(route.method()),
            &url.build(),
            None,
            options,
        )
        .await
    }

    async fn delete_task_push_notification_config(
        &self,
        request: DeleteTaskPushNotificationConfigRequest,
        options: &CallOptions,
    ) -> ClientResult<()> {
        require_id("task id", &request.task_id)?;
        require_id("push notification config id", &request.id)?;
        let route = RestRoute::DeleteTaskPushNotificationConfig {
            task_id: request.task_id.clone(),
            id: request.id.clone(),
        };
        let url = self.url(&request.tenant, &route).build();
        self.exchange(
            route.template().operation,
            http_method(route.method()),
            &url,
            None,
            options,
        )
        .await?;
        Ok(())
    }

    async fn get_extended_agent_card(
        &self,
        request: GetExtendedAgentCardRequest,
        options: &CallOptions,
    ) -> ClientResult<AgentCard> {
        let route = RestRoute::GetExtendedAgentCard;
        let url = self.url(&request.tenant, &route).build();
        self.unary(
            route.template().operation,
            http_method(route.method()),
            &url,
            None,
            options,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_types::{ErrorKind, Timestamp};
    use serde_json::json;

    fn rest(base: &str) -> RestTransport {
        RestTransport::new(base).unwrap()
    }

    #[test]
    fn paths_and_tenant_prefix() {
        let t = rest("http://127.0.0.1:8080/");
        assert_eq!(t.base_url(), "http://127.0.0.1:8080");
        assert_eq!(
            t.url("", &RestRoute::SendMessage).build(),
            "http://127.0.0.1:8080/message:send"
        );
        assert_eq!(
            t.url("acme", &RestRoute::CancelTask { id: "t-1".into() })
                .build(),
            "http://127.0.0.1:8080/acme/tasks/t-1:cancel"
        );
        let t = rest("https://agent.example.com/a2a/v1").with_tenant("default-tenant");
        assert_eq!(
            t.url("", &RestRoute::GetExtendedAgentCard).build(),
            "https://agent.example.com/a2a/v1/default-tenant/extendedAgentCard"
        );
        // The request's tenant wins over the transport's.
        assert_eq!(
            t.url("other", &RestRoute::ListTasks).build(),
            "https://agent.example.com/a2a/v1/other/tasks"
        );
    }

    #[test]
    fn segments_are_encoded() {
        let route = RestRoute::SubscribeToTask {
            id: "a/b:c?d#e%f é".into(),
        };
        let u = UrlBuilder::new("http://h", "te nant/x", &route).build();
        assert_eq!(
            u,
            "http://h/te%20nant%2Fx/tasks/a%2Fb%3Ac%3Fd%23e%25f%20%C3%A9:subscribe"
        );
        let route = RestRoute::GetTaskPushNotificationConfig {
            task_id: "t".into(),
            id: "cfg 1".into(),
        };
        let u = UrlBuilder::new("http://h", "", &route)
            .query("x", "a&b")
            .build();
        assert_eq!(
            u,
            "http://h/tasks/t/pushNotificationConfigs/cfg%201?x=a%26b"
        );
    }

    #[test]
    fn list_tasks_query() {
        let t = rest("http://h:1");
        assert_eq!(
            list_tasks_url(&t, &ListTasksRequest::default()),
            "http://h:1/tasks"
        );
        let req = ListTasksRequest {
            tenant: "t1".into(),
            context_id: "ctx 1&x=y".into(),
            status: TaskState::InputRequired as i32,
            page_size: Some(50),
            page_token: "abc+/=".into(),
            history_length: Some(0),
            status_timestamp_after: Some(Timestamp::parse("2025-11-09T10:30:00Z").unwrap()),
            include_artifacts: Some(true),
        };
        assert_eq!(
            list_tasks_url(&t, &req),
            "http://h:1/t1/tasks?contextId=ctx%201%26x%3Dy&status=TASK_STATE_INPUT_REQUIRED\
             &pageSize=50&pageToken=abc%2B%2F%3D&historyLength=0\
             &statusTimestampAfter=2025-11-09T10%3A30%3A00.000Z&includeArtifacts=true"
        );
        let req = ListTasksRequest {
            status: 42,
            include_artifacts: Some(false),
            ..Default::default()
        };
        assert_eq!(
            list_tasks_url(&t, &req),
            "http://h:1/tasks?status=42&includeArtifacts=false"
        );
    }

    #[test]
    fn http_errors() {
        let body = A2aError::task_not_found("t-1").to_http_body();
        let e = error_from_http(404, &serde_json::to_vec(&body).unwrap());
        assert_eq!(e.kind(), Some(ErrorKind::TaskNotFound));
        assert_eq!(e.a2a().unwrap().metadata["taskId"], "t-1");
        // Same status, different A2A errors: the ErrorInfo reason decides.
        let body = json!({"error": {"code": 400, "status": "FAILED_PRECONDITION",
            "message": "done already", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "TASK_NOT_CANCELABLE", "domain": "a2a-protocol.org"}]}});
        let e = error_from_http(400, &serde_json::to_vec(&body).unwrap());
        assert_eq!(e.kind(), Some(ErrorKind::TaskNotCancelable));
        assert_eq!(e.a2a().unwrap().message, "done already");
        // A bare 404 page is not an A2A error.
        let e = error_from_http(404, b"Not Found");
        assert!(matches!(e, ClientError::Http { status: 404, ref body } if body == "Not Found"));
        let e = error_from_http(500, br#"{"error": "boom"}"#);
        assert!(matches!(e, ClientError::Http { status: 500, .. }));
    }

    fn sse(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
            id: None,
        }
    }

    #[test]
    fn stream_events() {
        let ok = decode_event(&sse(
            "message",
            r#"{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_SUBMITTED"}}}"#,
        ))
        .unwrap()
        .unwrap();
        assert_eq!(ok.task_id(), Some("t"));
        let err_body =
            serde_json::to_string(&A2aError::unsupported("terminal").to_http_body()).unwrap();
        let e = decode_event(&sse("message", &err_body))
            .unwrap()
            .unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::UnsupportedOperation));
        let e = decode_event(&sse("error", &err_body)).unwrap().unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::UnsupportedOperation));
        assert!(decode_event(&sse("message", r#"{"somethingNew":{}}"#)).is_none());
        assert!(matches!(
            decode_event(&sse("message", "[1,2]")),
            Some(Err(ClientError::InvalidResponse(_)))
        ));
        assert!(matches!(
            decode_event(&sse("error", "oops")),
            Some(Err(ClientError::InvalidResponse(_)))
        ));
    }

    #[test]
    fn base_url_validation() {
        assert!(RestTransport::new("localhost:80").is_err());
        assert!(RestTransport::new("http://h/?q=1").is_err());
        assert!(RestTransport::new("ftp://h/").is_err());
    }
}
