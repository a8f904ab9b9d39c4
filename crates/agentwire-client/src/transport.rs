//! The binding-independent [`Transport`] trait, its per-call
//! [`CallOptions`] and the [`Binding`] names.

use std::fmt;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use agentwire_types::{
    AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
};
use futures::Stream;

use crate::error::{ClientError, ClientResult};

/// The boxed stream of events inside an [`EventStream`].
type BoxedEvents = Pin<Box<dyn Stream<Item = Result<StreamResponse, ClientError>> + Send>>;

/// A stream of events from `SendStreamingMessage` or `SubscribeToTask`.
///
/// It yields the events in the order the agent sent them (first a `Task` or
/// a single `Message`, then status and artifact updates) and ends when the
/// agent closes the stream. An error is always the last item: after an
/// `Err` the stream ends.
///
/// It also keeps the id of the last event it yielded
/// ([`EventStream::last_event_id`]), when the server gives its events ids:
/// the `id:` field of Server-Sent Events (JSON-RPC and HTTP+JSON), or on
/// gRPC the numbering announced in the stream's initial metadata (see
/// `docs/streaming.md`). A client whose stream was cut resumes it by
/// calling `SubscribeToTask` with that id as the `Last-Event-ID` service
/// parameter; [`crate::follow::follow`] does so by itself.
///
/// ```
/// use agentwire_client::EventStream;
/// use agentwire_types::StreamResponse;
/// use futures::StreamExt;
///
/// # futures::executor::block_on(async {
/// let mut events = EventStream::new(futures::stream::iter([Ok(StreamResponse::default())]));
/// assert!(events.next().await.is_some());
/// // Made from a plain stream: no ids.
/// assert_eq!(events.last_event_id(), None);
/// # });
/// ```
pub struct EventStream {
    inner: BoxedEvents,
    ids: Option<LastEventId>,
}

impl EventStream {
    /// A stream of events without event ids (its
    /// [`last_event_id`](Self::last_event_id) is always `None`).
    pub fn new<S>(events: S) -> Self
    where
        S: Stream<Item = Result<StreamResponse, ClientError>> + Send + 'static,
    {
        Self {
            inner: Box::pin(events),
            ids: None,
        }
    }

    /// A stream whose transport records each event's id in `ids` as it
    /// yields the event.
    pub(crate) fn with_ids<S>(events: S, ids: LastEventId) -> Self
    where
        S: Stream<Item = Result<StreamResponse, ClientError>> + Send + 'static,
    {
        Self {
            inner: Box::pin(events),
            ids: Some(ids),
        }
    }

    /// The id of the last event this stream yielded, when the server gave
    /// it one; `None` before the first event, for a server whose events
    /// carry no ids, and on gRPC once the numbering no longer holds (see
    /// `docs/streaming.md`).
    pub fn last_event_id(&self) -> Option<String> {
        self.ids.as_ref().and_then(LastEventId::get)
    }

    /// Wraps this stream (to log or inspect its events, say) and keeps its
    /// event ids: `wrap` must yield the events of the stream it is given
    /// one for one, as they come (`inspect`, `map`, `then` do), so that
    /// [`last_event_id`](Self::last_event_id) stays the id of the last
    /// event yielded.
    ///
    /// ```
    /// use agentwire_client::EventStream;
    /// use futures::StreamExt;
    ///
    /// fn logged(events: EventStream) -> EventStream {
    ///     events.wrap(|s| s.inspect(|e| eprintln!("{e:?}")))
    /// }
    /// ```
    pub fn wrap<S, F>(self, wrap: F) -> EventStream
    where
        F: FnOnce(EventStream) -> S,
        S: Stream<Item = Result<StreamResponse, ClientError>> + Send + 'static,
    {
        let ids = self.ids.clone();
        EventStream {
            inner: Box::pin(wrap(self)),
            ids,
        }
    }
}

impl Stream for EventStream {
    type Item = Result<StreamResponse, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl fmt::Debug for EventStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventStream")
            .field("last_event_id", &self.last_event_id())
            .finish_non_exhaustive()
    }
}

/// The id of the last event of a stream, shared between the transport
/// that reads the events (and writes it) and the [`EventStream`] (which
/// reads it).
#[derive(Debug, Clone, Default)]
pub(crate) struct LastEventId(Arc<std::sync::Mutex<Option<String>>>);

impl LastEventId {
    pub(crate) fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Records the id of the event about to be yielded (`None`: unknown).
    pub(crate) fn set(&self, id: Option<String>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = id;
    }
}

/// A protocol binding of A2A (spec 5), as named in
/// `AgentInterface.protocolBinding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Binding {
    /// JSON-RPC 2.0 over HTTP (`JSONRPC`).
    JsonRpc,
    /// HTTP+JSON, the REST binding (`HTTP+JSON`).
    HttpJson,
    /// gRPC (`GRPC`).
    Grpc,
}

impl Binding {
    /// The three standard bindings in the client's default preference order.
    pub const ALL: [Binding; 3] = [Binding::JsonRpc, Binding::HttpJson, Binding::Grpc];

    /// Whether this build of the client can use the binding: always, except
    /// gRPC without the `grpc` feature (such interfaces are then skipped).
    pub const fn is_available(self) -> bool {
        match self {
            Binding::Grpc => cfg!(feature = "grpc"),
            Binding::JsonRpc | Binding::HttpJson => true,
        }
    }

    /// The name used in agent cards: `JSONRPC`, `HTTP+JSON` or `GRPC`.
    pub fn as_str(self) -> &'static str {
        match self {
            Binding::JsonRpc => agentwire_types::binding::JSONRPC,
            Binding::HttpJson => agentwire_types::binding::HTTP_JSON,
            Binding::Grpc => agentwire_types::binding::GRPC,
        }
    }

    /// Parses a binding name, ignoring ASCII case. `REST` is accepted for
    /// `HTTP+JSON` and `JSON-RPC` for `JSONRPC`.
    pub fn parse(name: &str) -> Option<Self> {
        let name = name.trim();
        [
            ("JSONRPC", Binding::JsonRpc),
            ("JSON-RPC", Binding::JsonRpc),
            ("HTTP+JSON", Binding::HttpJson),
            ("REST", Binding::HttpJson),
            ("GRPC", Binding::Grpc),
        ]
        .into_iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, b)| b)
    }
}

impl fmt::Display for Binding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Binding {
    type Err = ClientError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Binding::parse(s).ok_or_else(|| {
            ClientError::InvalidRequest(format!(
                "unknown protocol binding {s:?} (expected JSONRPC, HTTP+JSON or GRPC)"
            ))
        })
    }
}

/// Per-call options: service parameters, extensions and a timeout.
///
/// Service parameters (spec 3.2.6) travel as HTTP headers on the JSON-RPC and
/// HTTP+JSON bindings and as gRPC metadata on gRPC; `Authorization` goes
/// here too. `A2A-Version: 1.0` is always sent (a service parameter named
/// `A2A-Version` replaces it) and [`CallOptions::extensions`] become the
/// `A2A-Extensions` parameter.
///
/// ```
/// use std::time::Duration;
/// use agentwire_client::CallOptions;
/// let opts = CallOptions::new()
///     .with_service_param("Authorization", "Bearer t0ken")
///     .with_extension("https://example.com/ext/citations/v1")
///     .with_timeout(Duration::from_secs(30));
/// assert_eq!(opts.extensions.len(), 1);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallOptions {
    /// Service parameters: `(name, value)` pairs sent as headers / metadata.
    /// Names are case-insensitive.
    pub service_params: Vec<(String, String)>,
    /// Extension URIs the client wants to use (`A2A-Extensions`).
    pub extensions: Vec<String>,
    /// Bound on the call. For unary calls it covers the whole exchange; for
    /// streaming calls it bounds the time until the stream is established
    /// (the stream itself may then last as long as the task runs).
    pub timeout: Option<Duration>,
}

impl CallOptions {
    /// No parameters, no extensions, no timeout.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a service parameter (header / metadata entry).
    pub fn with_service_param(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.service_params.push((name.into(), value.into()));
        self
    }

    /// Sets `Authorization: Bearer <token>`.
    pub fn with_bearer_token(self, token: impl AsRef<str>) -> Self {
        self.with_service_param("Authorization", format!("Bearer {}", token.as_ref()))
    }

    /// Adds an extension URI to `A2A-Extensions`.
    pub fn with_extension(mut self, uri: impl Into<String>) -> Self {
        self.extensions.push(uri.into());
        self
    }

    /// Sets the timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Whether the options carry nothing.
    pub fn is_empty(&self) -> bool {
        self.service_params.is_empty() && self.extensions.is_empty() && self.timeout.is_none()
    }

    /// These options with `over` applied on top: parameters of `over` with
    /// the same (case-insensitive) name replace ours, extensions are joined
    /// without duplicates, and `over`'s timeout wins when set.
    pub fn merged(&self, over: &CallOptions) -> CallOptions {
        if over.is_empty() {
            return self.clone();
        }
        if self.is_empty() {
            return over.clone();
        }
        let mut service_params: Vec<(String, String)> = self
            .service_params
            .iter()
            .filter(|(name, _)| {
                !over
                    .service_params
                    .iter()
                    .any(|(n, _)| n.eq_ignore_ascii_case(name))
            })
            .cloned()
            .collect();
        service_params.extend(over.service_params.iter().cloned());
        let mut extensions = self.extensions.clone();
        for e in &over.extensions {
            if !extensions.contains(e) {
                extensions.push(e.clone());
            }
        }
        CallOptions {
            service_params,
            extensions,
            timeout: over.timeout.or(self.timeout),
        }
    }

    /// The value of the `A2A-Extensions` parameter, if any extension is set.
    pub(crate) fn extensions_value(&self) -> Option<String> {
        (!self.extensions.is_empty()).then(|| self.extensions.join(","))
    }
}

/// The eleven A2A operations (spec 3.1) over one protocol binding.
///
/// Implemented by [`crate::JsonRpcTransport`], [`crate::RestTransport`],
/// [`crate::GrpcTransport`] and by [`crate::Client`] itself (which adds
/// interface selection, fallback and the interface's `tenant`). Requests and
/// responses are the protocol types of [`agentwire_types`]; errors are
/// [`ClientError`]s whose A2A [`agentwire_types::ErrorKind`] does not depend on
/// the binding.
///
/// The trait is object safe: `Box<dyn Transport>` and `Arc<dyn Transport>`
/// are transports too, so layers (auth, logging, retries) can wrap one.
#[async_trait::async_trait]
pub trait Transport: Send + Sync {
    /// `SendMessage`: a Task or a direct Message.
    async fn send_message(
        &self,
        request: SendMessageRequest,
        options: &CallOptions,
    ) -> ClientResult<SendMessageResponse>;

    /// `SendStreamingMessage`: the stream of events of the interaction.
    /// Errors the agent reports before the stream starts are returned here;
    /// errors during the stream are its last item.
    async fn send_streaming_message(
        &self,
        request: SendMessageRequest,
        options: &CallOptions,
    ) -> ClientResult<EventStream>;

    /// `GetTask`.
    async fn get_task(&self, request: GetTaskRequest, options: &CallOptions) -> ClientResult<Task>;

    /// `ListTasks`.
    async fn list_tasks(
        &self,
        request: ListTasksRequest,
        options: &CallOptions,
    ) -> ClientResult<ListTasksResponse>;

    /// `CancelTask`: the task after the cancellation request.
    async fn cancel_task(
        &self,
        request: CancelTaskRequest,
        options: &CallOptions,
    ) -> ClientResult<Task>;

    /// `SubscribeToTask`: a stream starting with the current Task.
    async fn subscribe_to_task(
        &self,
        request: SubscribeToTaskRequest,
        options: &CallOptions,
    ) -> ClientResult<EventStream>;

    /// `CreateTaskPushNotificationConfig`.
    async fn create_task_push_notification_config(
        &self,
        request: TaskPushNotificationConfig,
        options: &CallOptions,
    ) -> ClientResult<TaskPushNotificationConfig>;

    /// `GetTaskPushNotificationConfig`.
    async fn get_task_push_notification_config(
        &self,
        request: GetTaskPushNotificationConfigRequest,
        options: &CallOptions,
    ) -> ClientResult<TaskPushNotificationConfig>;

    /// `ListTaskPushNotificationConfigs`.
    async fn list_task_push_notification_configs(
        &self,
        request: ListTaskPushNotificationConfigsRequest,
        options: &CallOptions,
    ) -> ClientResult<ListTaskPushNotificationConfigsResponse>;

    /// `DeleteTaskPushNotificationConfig`.
    async fn delete_task_push_notification_config(
        &self,
        request: DeleteTaskPushNotificationConfigRequest,
        options: &CallOptions,
    ) -> ClientResult<()>;

    /// `GetExtendedAgentCard`.
    async fn get_extended_agent_card(
        &self,
        request: GetExtendedAgentCardRequest,
        options: &CallOptions,
    ) -> ClientResult<AgentCard>;
}

macro_rules! forward_transport {
    ($ty:ty) => {
        #[async_trait::async_trait]
        impl<T: Transport + ?Sized> Transport for $ty {
            async fn send_message(
                &self,
                request: SendMessageRequest,
                options: &CallOptions,
            ) -> ClientResult<SendMessageResponse> {
                (**self).send_message(request, options).await
            }
            async fn send_streaming_message(
                &self,
                request: SendMessageRequest,
                options: &CallOptions,
            ) -> ClientResult<EventStream> {
                (**self).send_streaming_message(request, options).await
            }
            async fn get_task(
                &self,
                request: GetTaskRequest,
                options: &CallOptions,
            ) -> ClientResult<Task> {
                (**self).get_task(request, options).await
            }
            async fn list_tasks(
                &self,
                request: ListTasksRequest,
                options: &CallOptions,
            ) -> ClientResult<ListTasksResponse> {
                (**self).list_tasks(request, options).await
            }
            async fn cancel_task(
                &self,
                request: CancelTaskRequest,
                options: &CallOptions,
            ) -> ClientResult<Task> {
                (**self).cancel_task(request, options).await
            }
            async fn subscribe_to_task(
                &self,
                request: SubscribeToTaskRequest,
                options: &CallOptions,
            ) -> ClientResult<EventStream> {
                (**self).subscribe_to_task(request, options).await
            }
            async fn create_task_push_notification_config(
                &self,
                request: TaskPushNotificationConfig,
                options: &CallOptions,
            ) -> ClientResult<TaskPushNotificationConfig> {
                (**self)
                    .create_task_push_notification_config(request, options)
                    .await
            }
            async fn get_task_push_notification_config(
                &self,
                request: GetTaskPushNotificationConfigRequest,
                options: &CallOptions,
            ) -> ClientResult<TaskPushNotificationConfig> {
                (**self)
                    .get_task_push_notification_config(request, options)
                    .await
            }
            async fn list_task_push_notification_configs(
                &self,
                request: ListTaskPushNotificationConfigsRequest,
                options: &CallOptions,
            ) -> ClientResult<ListTaskPushNotificationConfigsResponse> {
                (**self)
                    .list_task_push_notification_configs(request, options)
                    .await
            }
            async fn delete_task_push_notification_config(
                &self,
                request: DeleteTaskPushNotificationConfigRequest,
                options: &CallOptions,
            ) -> ClientResult<()> {
                (**self)
                    .delete_task_push_notification_config(request, options)
                    .await
            }
            async fn get_extended_agent_card(
                &self,
                request: GetExtendedAgentCardRequest,
                options: &CallOptions,
            ) -> ClientResult<AgentCard> {
                (**self).get_extended_agent_card(request, options).await
            }
        }
    };
}

forward_transport!(Box<T>);
forward_transport!(Arc<T>);

/// Request types carrying a `tenant` field (all of them, spec 8.3.2).
pub(crate) trait TenantField {
    fn tenant_mut(&mut self) -> &mut String;

    /// Sets the tenant when the request names none.
    fn fill_tenant(&mut self, tenant: &str) {
        let t = self.tenant_mut();
        if t.is_empty() && !tenant.is_empty() {
            tenant.clone_into(t);
        }
    }

    /// Sets the tenant to exactly `tenant` (empty: no tenant).
    fn set_tenant(&mut self, tenant: &str) {
        tenant.clone_into(self.tenant_mut());
    }
}

macro_rules! tenant_field {
    ($($ty:ty),* $(,)?) => {
        $(impl TenantField for $ty {
            fn tenant_mut(&mut self) -> &mut String {
                &mut self.tenant
            }
        })*
    };
}

tenant_field!(
    SendMessageRequest,
    GetTaskRequest,
    ListTasksRequest,
    CancelTaskRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
);

/// Wraps a stream so that it ends right after its first error; its
/// transport records event ids in `ids`.
pub(crate) fn end_after_error_with_ids<S>(inner: S, ids: LastEventId) -> EventStream
where
    S: Stream<Item = Result<StreamResponse, ClientError>> + Send + 'static,
{
    EventStream::with_ids(ends_after_error(inner), ids)
}

fn ends_after_error<S>(inner: S) -> EndAfterError<S>
where
    S: Stream<Item = Result<StreamResponse, ClientError>> + Send + 'static,
{
    EndAfterError {
        inner: Box::pin(inner),
        done: false,
    }
}

struct EndAfterError<S> {
    inner: Pin<Box<S>>,
    done: bool,
}

impl<S> Stream for EndAfterError<S>
where
    S: Stream<Item = Result<StreamResponse, ClientError>>,
{
    type Item = Result<StreamResponse, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        let item = self.inner.as_mut().poll_next(cx);
        match &item {
            Poll::Ready(Some(Err(_))) | Poll::Ready(None) => self.done = true,
            _ => {}
        }
        item
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[test]
    fn binding_names() {
        for b in Binding::ALL {
            assert_eq!(Binding::parse(b.as_str()), Some(b));
            assert_eq!(b.to_string().parse::<Binding>().unwrap(), b);
        }
        assert_eq!(Binding::parse("grpc"), Some(Binding::Grpc));
        assert_eq!(Binding::parse("http+json"), Some(Binding::HttpJson));
        assert_eq!(Binding::parse("rest"), Some(Binding::HttpJson));
        assert_eq!(Binding::parse("websocket"), None);
        assert!("soap".parse::<Binding>().is_err());
    }

    #[test]
    fn merged_options() {
        let base = CallOptions::new()
            .with_service_param("Authorization", "Bearer a")
            .with_service_param("X-Trace", "1")
            .with_extension("urn:e1")
            .with_timeout(Duration::from_secs(5));
        let over = CallOptions::new()
            .with_service_param("authorization", "Bearer b")
            .with_extension("urn:e1")
            .with_extension("urn:e2");
        let m = base.merged(&over);
        assert_eq!(
            m.service_params,
            vec![
                ("X-Trace".to_string(), "1".to_string()),
                ("authorization".to_string(), "Bearer b".to_string())
            ]
        );
        assert_eq!(m.extensions, ["urn:e1", "urn:e2"]);
        assert_eq!(m.timeout, Some(Duration::from_secs(5)));
        assert_eq!(base.merged(&CallOptions::new()), base);
        assert_eq!(CallOptions::new().merged(&over), over);
        assert_eq!(m.extensions_value().unwrap(), "urn:e1,urn:e2");
    }

    #[tokio::test]
    async fn stream_ends_after_first_error() {
        let items = vec![
            Ok(StreamResponse::default()),
            Err(ClientError::InvalidResponse("x".into())),
            Ok(StreamResponse::default()),
        ];
        let s = end_after_error_with_ids(futures::stream::iter(items), LastEventId::default());
        let got: Vec<_> = s.collect().await;
        assert_eq!(got.len(), 2);
        assert!(got[1].is_err());
    }
}
