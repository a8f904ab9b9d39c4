//! The gRPC binding (spec 10): the generated `lf.a2a.v1.A2AService` served
//! by tonic, as a thin adapter over [`RequestHandler`].
//!
//! Every protocol rule lives in the handler; this module only maps:
//!
//! - Service parameters (`a2a-version`, `a2a-extensions`, `authorization`)
//!   come from the call's gRPC metadata, whose keys are lower-case, and are
//!   handed to the handler as a [`CallContext`].
//! - Errors become a gRPC status ([`A2aError::to_grpc_status`]): the code of
//!   spec 5.4, the error's message, and details carrying a
//!   `google.rpc.ErrorInfo` (reason, domain `a2a-protocol.org`, metadata)
//!   plus a `google.rpc.BadRequest` for invalid fields. tonic writes them as
//!   `grpc-status`, `grpc-message` and `grpc-status-details-bin`, so the
//!   three always agree.
//! - Streaming calls (`SendStreamingMessage`, `SubscribeToTask`): an error
//!   before the stream starts is the call's status; an error after it is the
//!   stream's final status (no event follows it).
//! - Event ids: gRPC stream messages have no field for one (and stay plain
//!   `lf.a2a.v1.StreamResponse` messages), so the stream's initial metadata
//!   announces the numbering instead: `a2a-event-log` (the log part of the
//!   ids) and `a2a-event-position` (the position of the first message);
//!   message `n` of the stream (from 0) has the id
//!   `<a2a-event-log>-<a2a-event-position + n>`, the id the SSE bindings
//!   send as `id:`. A client resumes with it in the `last-event-id` key of
//!   a `SubscribeToTask` call. A `Task` message after the first one is a
//!   fresh snapshot (its reader fell behind and events were skipped): the
//!   numbering stops there (see `docs/streaming.md`).
//!
//! [`A2aError::to_grpc_status`]: agentwire_types::A2aError::to_grpc_status

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use agentwire_types::proto::a2a_service_server::{A2aService, A2aServiceServer};
use agentwire_types::{
    A2aError, A2aResult, AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    ErrorKind, GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
};
use futures::{Stream, StreamExt};
use tonic::{Request, Response, Status};

use crate::handler::{CallContext, IdEventStream, RequestHandler};
use crate::manager::events::{EventId, LAST_EVENT_ID};
use crate::observe::CallInfo;

/// The initial-metadata key naming the log of a stream's event ids.
pub const EVENT_LOG_KEY: &str = "a2a-event-log";

/// The initial-metadata key with the position of a stream's first message
/// in its log (see the [module documentation](self)).
pub const EVENT_POSITION_KEY: &str = "a2a-event-position";

/// Default limit of a decoded request message: 10 MiB, like the request
/// body limit of the HTTP bindings. A larger request is refused by tonic
/// with an error status before it reaches the handler.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 10 * 1024 * 1024;

/// The response stream of the server-streaming methods.
pub type GrpcEventStream = Pin<Box<dyn Stream<Item = Result<StreamResponse, Status>> + Send>>;

/// The `A2AService` implementation: decodes calls into [`RequestHandler`]
/// calls and encodes what it returns. Serve it with [`grpc_service`].
#[derive(Clone)]
pub struct GrpcBinding {
    handler: RequestHandler,
}

impl GrpcBinding {
    /// A binding serving `handler`.
    pub fn new(handler: RequestHandler) -> Self {
        Self { handler }
    }

    /// The handler behind the binding.
    pub fn handler(&self) -> &RequestHandler {
        &self.handler
    }
}

impl fmt::Debug for GrpcBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcBinding")
            .field("agent", &self.handler.agent_card().name)
            .finish_non_exhaustive()
    }
}

/// The tonic service of the gRPC binding, accepting request messages of up
/// to `max_message_bytes` (decoded size; [`DEFAULT_MAX_MESSAGE_BYTES`] is a
/// sensible default). Responses are not limited.
///
/// A request that never reaches the handler is answered with the status
/// gRPC prescribes for the client's fault, with an A2A `ErrorInfo` like
/// every other error: bytes that are not the request message (malformed
/// protobuf, a truncated frame) are `INVALID_ARGUMENT` (tonic alone says
/// `INTERNAL`), and a message over the limit is `RESOURCE_EXHAUSTED`
/// (tonic alone says `OUT_OF_RANGE`).
pub fn grpc_service(handler: RequestHandler, max_message_bytes: usize) -> GrpcService {
    GrpcService {
        limits: handler.read_limits(),
        inner: A2aServiceServer::new(GrpcBinding::new(handler))
            .max_decoding_message_size(max_message_bytes),
        max_message_bytes,
    }
}

/// The tower service of the gRPC binding, made by [`grpc_service`]: the
/// generated `A2AService` server, with the statuses of requests it refuses
/// before the handler (undecodable or too large) mapped to the codes gRPC
/// prescribes.
#[derive(Clone)]
pub struct GrpcService {
    inner: A2aServiceServer<GrpcBinding>,
    max_message_bytes: usize,
    /// The limits a request is walked against before it is decoded
    /// ([`agentwire_types::limits::wire`]).
    limits: agentwire_types::limits::ReadLimits,
}

impl fmt::Debug for GrpcService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcService")
            .field("max_message_bytes", &self.max_message_bytes)
            .finish_non_exhaustive()
    }
}

impl tonic::server::NamedService for GrpcService {
    const NAME: &'static str = <A2aServiceServer<GrpcBinding> as tonic::server::NamedService>::NAME;
}

/// The response of the gRPC service.
type GrpcResponse = http::Response<tonic::body::Body>;

impl<B> tower::Service<http::Request<B>> for GrpcService
where
    B: hyper::body::Body + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    type Response = GrpcResponse;
    type Error = std::convert::Infallible;
    type Future =
        GrpcFuture<<A2aServiceServer<GrpcBinding> as tower::Service<http::Request<B>>>::Future>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        tower::Service::<http::Request<B>>::poll_ready(&mut self.inner, cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let operation = operation_name(request.uri().path());
        GrpcFuture {
            inner: self.inner.call(request),
            limit: self.max_message_bytes,
            operation,
            limits: self.limits,
        }
    }
}

/// The operation a gRPC path names (empty for none).
fn operation_name(path: &str) -> &'static str {
    use agentwire_types::jsonrpc::methods;
    let method = path.rsplit('/').next().unwrap_or_default();
    [
        methods::SEND_MESSAGE,
        methods::SEND_STREAMING_MESSAGE,
        methods::GET_TASK,
        methods::LIST_TASKS,
        methods::CANCEL_TASK,
        methods::SUBSCRIBE_TO_TASK,
        methods::CREATE_PUSH_CONFIG,
        methods::GET_PUSH_CONFIG,
        methods::LIST_PUSH_CONFIGS,
        methods::DELETE_PUSH_CONFIG,
        methods::GET_EXTENDED_AGENT_CARD,
    ]
    .into_iter()
    .find(|m| *m == method)
    .unwrap_or_default()
}

/// The future of a [`GrpcService`] call.
pub struct GrpcFuture<F> {
    inner: F,
    limit: usize,
    operation: &'static str,
    limits: agentwire_types::limits::ReadLimits,
}

impl<F> Future for GrpcFuture<F>
where
    F: Future<Output = Result<GrpcResponse, std::convert::Infallible>> + Unpin,
{
    type Output = F::Output;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let (limit, operation, limits) = (self.limit, self.operation, self.limits);
        // tonic decodes the request inside this poll: with the limits.
        let polled =
            agentwire_types::limits::wire::decoding(&limits, || Pin::new(&mut self.inner).poll(cx));
        polled.map(|r| {
            r.map(|response| {
                let response = refusal_codes(response, limit);
                // An error comes in the head ("trailers-only").
                let error = Status::from_header_map(response.headers())
                    .filter(|s| s.code() != tonic::Code::Ok)
                    .map(|s| agentwire_types::grpc_status_name(s.code() as i32));
                CallInfo::operation("grpc", operation);
                if let Some(error) = error {
                    CallInfo::error_reason(error);
                }
                response
            })
        })
    }
}

/// Rewrites the status of a request tonic refused before the handler saw
/// it. Those come "trailers-only" (the status in the response head)
/// without details, while every error of the handler carries an
/// `ErrorInfo`: so a head status without details that says `INTERNAL` is
/// a request message that could not be decoded (tonic's choice for a
/// protobuf error, a bad compression flag or a truncated frame: all the
/// client's), and one that says `OUT_OF_RANGE` is a message over the
/// limit (tonic's code for it; gRPC prescribes `RESOURCE_EXHAUSTED`).
pub(crate) fn refusal_codes(mut response: GrpcResponse, limit: usize) -> GrpcResponse {
    let headers = response.headers_mut();
    if headers.contains_key("grpc-status-details-bin") {
        return response;
    }
    let Some(status) = Status::from_header_map(headers) else {
        return response;
    };
    let Some(replacement) = refusal_status(&status, limit) else {
        return response;
    };
    for name in ["grpc-status", "grpc-message", "grpc-status-details-bin"] {
        headers.remove(name);
    }
    if replacement.add_header(headers).is_err() {
        // The status's own fields always encode as headers.
        tracing::debug!("could not write a gRPC status");
    }
    response
}

/// The status gRPC prescribes for a status tonic gives a request it
/// refused before the service (see [`refusal_codes`]); `None` for the
/// others.
pub(crate) fn refusal_status(status: &Status, limit: usize) -> Option<Status> {
    Some(match status.code() {
        tonic::Code::Internal => A2aError::new(
            ErrorKind::ParseError,
            format!(
                "the request is not a valid protobuf message of the method: {}",
                status.message()
            ),
        )
        .to_grpc_status(),
        tonic::Code::OutOfRange => {
            let err = A2aError::new(
                ErrorKind::InvalidRequest,
                format!("request message exceeds the limit of {limit} bytes"),
            )
            .with_metadata("limitBytes", limit.to_string())
            .to_grpc_status();
            Status::with_details(
                tonic::Code::ResourceExhausted,
                err.message().to_owned(),
                bytes::Bytes::copy_from_slice(err.details()),
            )
        }
        _ => return None,
    })
}

/// Splits a call into its service parameters and its request message.
fn split<T>(request: Request<T>) -> (CallContext, T) {
    let (metadata, extensions, message) = request.into_parts();
    let peer = extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0);
    (
        CallContext::new(metadata.into_headers())
            .with_peer(peer)
            .with_client_cert(extensions.get::<crate::auth::ClientCertificate>().cloned()),
        message,
    )
}

/// The status of an error; an authentication error carries its challenge
/// in the `www-authenticate` metadata, as the HTTP bindings do in the
/// header.
fn status_of(e: &A2aError) -> Status {
    let mut status = e.to_grpc_status();
    if let Some(challenge) = crate::bindings::http::challenge(e)
        .and_then(|v| v.to_str().ok().and_then(|v| v.parse().ok()))
    {
        status.metadata_mut().insert("www-authenticate", challenge);
    }
    status
}

/// A unary answer.
fn respond<T>(result: A2aResult<T>) -> Result<Response<T>, Status> {
    result.map(Response::new).map_err(|e| status_of(&e))
}

/// A unary answer about a task (for the request log).
fn respond_task<T>(
    result: A2aResult<T>,
    task_id: impl Fn(&T) -> Option<&str>,
) -> Result<Response<T>, Status> {
    let response = respond(result)?;
    if let Some(id) = task_id(response.get_ref()) {
        CallInfo::task(id);
    }
    Ok(response)
}

/// A streaming answer with event ids: the handler's error before the
/// stream starts is the call's status; the initial metadata announces the
/// numbering of the messages (when they have ids).
///
/// `resume` is the `last-event-id` the client sent: a resumed subscription
/// that missed nothing has no event ready to read the numbering from; its
/// next message is the one after that id.
fn respond_id_stream(
    result: A2aResult<IdEventStream>,
    resume: Option<EventId>,
) -> Result<Response<GrpcEventStream>, Status> {
    use futures::FutureExt as _;
    let mut events = result.map_err(|e| status_of(&e))?;
    // The first event of a stream is ready at once (the handler opens it
    // with the task or the events missed), except on a resumed
    // subscription that missed nothing: the next event then comes live,
    // and the headers must not wait for it.
    let first = events.next().now_or_never();
    let base = match &first {
        Some(Some((id, Ok(_)))) => *id,
        Some(_) => None,
        None => resume.map(|r| EventId {
            log: r.log,
            seq: r.seq + 1,
        }),
    };
    let mut response = Response::new(numbered_events(first.flatten(), events, base));
    if let Some(base) = base {
        let md = response.metadata_mut();
        // Hex digits and decimal digits: always valid metadata values.
        if let (Ok(log), Ok(position)) = (
            format!("{:x}", base.log).parse(),
            base.seq.to_string().parse(),
        ) {
            md.insert(EVENT_LOG_KEY, log);
            md.insert(EVENT_POSITION_KEY, position);
        }
    }
    Ok(response)
}

/// The id a client resumes from (`last-event-id`), when it is one of this
/// server's (the handler refuses the call otherwise).
fn resume_id(ctx: &CallContext) -> Option<EventId> {
    ctx.headers
        .get(LAST_EVENT_ID)
        .and_then(|v| v.to_str().ok())
        .and_then(EventId::parse)
}

/// The id expected after `event` (whose id is `id`), when `expected` was
/// the id expected for it; `None` once the numbering stopped.
fn numbered_next(
    expected: Option<EventId>,
    id: Option<EventId>,
    event: &StreamResponse,
) -> Option<EventId> {
    let want = expected?;
    if id == Some(want) {
        return Some(EventId {
            log: want.log,
            seq: want.seq + 1,
        });
    }
    let snapshot = matches!(
        event.payload,
        Some(agentwire_types::stream_response::Payload::Task(_))
    );
    if !snapshot {
        // The handler numbers every event of a stream in order; only the
        // snapshot of a resynchronised reader leaves the numbering.
        tracing::warn!(?id, expected = %want, "a gRPC stream event is out of its numbering");
    }
    None
}

/// The handler's events as gRPC stream items: an error is the last item,
/// which tonic sends as the stream's final status. Checks that the events
/// follow the numbering announced from `base`: only a `Task` snapshot sent
/// to a reader that fell behind may leave it (the client stops counting
/// there).
fn numbered_events(
    first: Option<(Option<EventId>, A2aResult<StreamResponse>)>,
    mut rest: IdEventStream,
    base: Option<EventId>,
) -> GrpcEventStream {
    Box::pin(async_stream::stream! {
        let mut expected = base;
        let mut next = first;
        loop {
            let item = match next.take() {
                Some(item) => item,
                None => match rest.next().await {
                    Some(item) => item,
                    None => break,
                },
            };
            match item {
                (id, Ok(event)) => {
                    expected = numbered_next(expected, id, &event);
                    yield Ok(event);
                }
                (_, Err(e)) => {
                    yield Err(e.to_grpc_status());
                    break;
                }
            }
        }
    })
}

#[tonic::async_trait]
impl A2aService for GrpcBinding {
    async fn send_message(
        &self,
        request: Request<SendMessageRequest>,
    ) -> Result<Response<SendMessageResponse>, Status> {
        let (ctx, req) = split(request);
        respond_task(self.handler.send_message(&ctx, req).await, |r| {
            r.task().map(|t| t.id.as_str())
        })
    }

    type SendStreamingMessageStream = GrpcEventStream;

    async fn send_streaming_message(
        &self,
        request: Request<SendMessageRequest>,
    ) -> Result<Response<Self::SendStreamingMessageStream>, Status> {
        let (ctx, req) = split(request);
        respond_id_stream(
            self.handler
                .send_streaming_message_with_ids(&ctx, req)
                .await,
            None,
        )
    }

    async fn get_task(&self, request: Request<GetTaskRequest>) -> Result<Response<Task>, Status> {
        let (ctx, req) = split(request);
        respond_task(self.handler.get_task(&ctx, req).await, |t| Some(&t.id))
    }

    async fn list_tasks(
        &self,
        request: Request<ListTasksRequest>,
    ) -> Result<Response<ListTasksResponse>, Status> {
        let (ctx, req) = split(request);
        respond(self.handler.list_tasks(&ctx, req).await)
    }

    async fn cancel_task(
        &self,
        request: Request<CancelTaskRequest>,
    ) -> Result<Response<Task>, Status> {
        let (ctx, req) = split(request);
        respond_task(self.handler.cancel_task(&ctx, req).await, |t| Some(&t.id))
    }

    type SubscribeToTaskStream = GrpcEventStream;

    async fn subscribe_to_task(
        &self,
        request: Request<SubscribeToTaskRequest>,
    ) -> Result<Response<Self::SubscribeToTaskStream>, Status> {
        let (ctx, req) = split(request);
        let resume = resume_id(&ctx);
        respond_id_stream(
            self.handler.subscribe_to_task_with_ids(&ctx, req).await,
            resume,
        )
    }

    async fn create_task_push_notification_config(
        &self,
        request: Request<TaskPushNotificationConfig>,
    ) -> Result<Response<TaskPushNotificationConfig>, Status> {
        let (ctx, req) = split(request);
        respond(
            self.handler
                .create_task_push_notification_config(&ctx, req)
                .await,
        )
    }

    async fn get_task_push_notification_config(
        &self,
        request: Request<GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<TaskPushNotificationConfig>, Status> {
        let (ctx, req) = split(request);
        respond(
            self.handler
                .get_task_push_notification_config(&ctx, req)
                .await,
        )
    }

    async fn list_task_push_notification_configs(
        &self,
        request: Request<ListTaskPushNotificationConfigsRequest>,
    ) -> Result<Response<ListTaskPushNotificationConfigsResponse>, Status> {
        let (ctx, req) = split(request);
        respond(
            self.handler
                .list_task_push_notification_configs(&ctx, req)
                .await,
        )
    }

    async fn get_extended_agent_card(
        &self,
        request: Request<GetExtendedAgentCardRequest>,
    ) -> Result<Response<AgentCard>, Status> {
        let (ctx, req) = split(request);
        respond(self.handler.get_extended_agent_card(&ctx, req).await)
    }

    async fn delete_task_push_notification_config(
        &self,
        request: Request<DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pbjson_types::Empty>, Status> {
        let (ctx, req) = split(request);
        let result = self
            .handler
            .delete_task_push_notification_config(&ctx, req)
            .await;
        respond(result.map(|()| pbjson_types::Empty {}))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;
    use std::time::Duration;

    use agentwire_types::{
        A2aError, AgentExtension, Artifact, ERROR_DOMAIN, ERROR_INFO_TYPE, ErrorKind, Message,
        TaskState, stream_response::Payload,
    };
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use prost::Message as _;
    use tonic::Code;
    use tonic::codegen::Service;
    use tonic::metadata::MetadataValue;

    use super::*;
    use crate::{AgentExecutor, BearerTokens, RequestContext, TaskUpdater};

    /// Echoes the text as an artifact and completes; "ask" stops at
    /// input-required instead.
    struct Echo;

    impl AgentExecutor for Echo {
        async fn execute(&self, ctx: RequestContext, task: TaskUpdater) -> A2aResult<()> {
            task.start_work().await?;
            if ctx.text() == "ask" {
                return task.require_input("more, please").await;
            }
            task.add_artifact(Artifact::text("echo", ctx.text()))
                .await?;
            task.complete().await
        }
    }

    const EXT: &str = "https://example.com/ext/required/v1";

    fn card() -> AgentCard {
        AgentCard::new("Echo", "Repeats what you say", "1.0.0").with_streaming(true)
    }

    fn binding() -> GrpcBinding {
        GrpcBinding::new(RequestHandler::builder(card(), Echo).build())
    }

    /// A request carrying `a2a-version: 1.0`.
    fn v1<T>(message: T) -> Request<T> {
        let mut request = Request::new(message);
        request
            .metadata_mut()
            .insert("a2a-version", MetadataValue::from_static("1.0"));
        request
    }

    fn send(text: &str) -> SendMessageRequest {
        SendMessageRequest {
            message: Some(Message::user_text(text)),
            ..Default::default()
        }
    }

    fn get(id: &str) -> GetTaskRequest {
        GetTaskRequest {
            id: id.to_owned(),
            ..Default::default()
        }
    }

    /// The wire form of `google.rpc.Status` and the details we look at.
    mod rpc {
        use std::collections::HashMap;

        #[derive(Clone, PartialEq, prost::Message)]
        pub struct Status {
            #[prost(int32, tag = "1")]
            pub code: i32,
            #[prost(string, tag = "2")]
            pub message: String,
            #[prost(message, repeated, tag = "3")]
            pub details: Vec<Any>,
        }

        #[derive(Clone, PartialEq, prost::Message)]
        pub struct Any {
            #[prost(string, tag = "1")]
            pub type_url: String,
            #[prost(bytes = "vec", tag = "2")]
            pub value: Vec<u8>,
        }

        #[derive(Clone, PartialEq, prost::Message)]
        pub struct ErrorInfo {
            #[prost(string, tag = "1")]
            pub reason: String,
            #[prost(string, tag = "2")]
            pub domain: String,
            #[prost(map = "string, string", tag = "3")]
            pub metadata: HashMap<String, String>,
        }
    }

    /// Checks that a status is a well-formed A2A error of `code` and `kind`
    /// (consistent code and message in the `google.rpc.Status` details, an
    /// ErrorInfo with the reason and the A2A domain) and returns it decoded.
    fn expect_error(status: &Status, code: Code, kind: ErrorKind) -> A2aError {
        assert_eq!(status.code(), code, "{status:?}");
        let rpc = rpc::Status::decode(status.details()).expect("google.rpc.Status details");
        assert_eq!(rpc.code, code as i32);
        assert_eq!(rpc.message, status.message());
        let info = rpc
            .details
            .iter()
            .find(|d| d.type_url == ERROR_INFO_TYPE)
            .expect("an ErrorInfo detail");
        let info = rpc::ErrorInfo::decode(info.value.as_slice()).expect("ErrorInfo");
        assert_eq!(info.reason, kind.reason());
        assert_eq!(info.domain, ERROR_DOMAIN);
        let err = A2aError::from_grpc_status(status);
        assert_eq!(err.kind, kind);
        assert_eq!(err.message, status.message());
        let metadata: HashMap<String, String> = err.metadata.clone().into_iter().collect();
        assert_eq!(info.metadata, metadata);
        err
    }

    async fn collect(stream: GrpcEventStream) -> Vec<Result<StreamResponse, Status>> {
        tokio::time::timeout(Duration::from_secs(10), stream.collect::<Vec<_>>())
            .await
            .expect("the stream ended")
    }

    #[tokio::test]
    async fn send_returns_the_completed_task_with_its_artifact() {
        let b = binding();
        let res = b
            .send_message(v1(send("hello")))
            .await
            .unwrap()
            .into_inner();
        let task = res.task().expect("a task").clone();
        assert_eq!(task.state(), TaskState::Completed);
        assert_eq!(task.artifacts.len(), 1);
        assert_eq!(task.artifacts[0].name, "echo");
        assert_eq!(task.artifacts[0].text_content(), "hello");
        assert!(!task.context_id.is_empty());

        let got = b.get_task(v1(get(&task.id))).await.unwrap().into_inner();
        assert_eq!(got.id, task.id);
        assert_eq!(got.state(), TaskState::Completed);

        let list = b
            .list_tasks(v1(ListTasksRequest::default()))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(list.total_size, 1);
        assert_eq!(list.tasks[0].id, task.id);
    }

    #[tokio::test]
    async fn missing_version_is_version_not_supported() {
        let b = binding();
        let status = b
            .send_message(Request::new(send("hello")))
            .await
            .unwrap_err();
        let err = expect_error(
            &status,
            Code::FailedPrecondition,
            ErrorKind::VersionNotSupported,
        );
        assert_eq!(err.metadata["supportedVersions"], "1.0,1.1");

        // The same on a streaming call: the call's status, no stream.
        let status = b
            .send_streaming_message(Request::new(send("hello")))
            .await
            .err()
            .expect("an error status");
        expect_error(
            &status,
            Code::FailedPrecondition,
            ErrorKind::VersionNotSupported,
        );
    }

    #[tokio::test]
    async fn unknown_task_is_not_found() {
        let b = binding();
        let status = b.get_task(v1(get("nope"))).await.unwrap_err();
        let err = expect_error(&status, Code::NotFound, ErrorKind::TaskNotFound);
        assert_eq!(err.metadata["taskId"], "nope");

        let cancel = CancelTaskRequest {
            id: "nope".into(),
            ..Default::default()
        };
        let status = b.cancel_task(v1(cancel)).await.unwrap_err();
        expect_error(&status, Code::NotFound, ErrorKind::TaskNotFound);

        let sub = SubscribeToTaskRequest {
            id: "nope".into(),
            ..Default::default()
        };
        let status = b.subscribe_to_task(v1(sub)).await.err().expect("an error");
        expect_error(&status, Code::NotFound, ErrorKind::TaskNotFound);
    }

    #[tokio::test]
    async fn invalid_params_carry_bad_request() {
        let b = binding();
        let req = SendMessageRequest::default();
        let status = b.send_message(v1(req)).await.unwrap_err();
        let err = expect_error(&status, Code::InvalidArgument, ErrorKind::InvalidParams);
        assert_eq!(err.field_violations[0].field, "message");
    }

    /// The numbering a stream's initial metadata announces.
    fn numbering(md: &tonic::metadata::MetadataMap) -> (String, u64) {
        let log = md
            .get(EVENT_LOG_KEY)
            .expect("a2a-event-log")
            .to_str()
            .unwrap();
        let position = md.get(EVENT_POSITION_KEY).expect("a2a-event-position");
        (log.to_owned(), position.to_str().unwrap().parse().unwrap())
    }

    #[tokio::test]
    async fn streams_announce_their_event_ids_and_resume_from_them() {
        let b = binding();
        let response = b
            .send_streaming_message(v1(send("stream me please")))
            .await
            .unwrap();
        let (log, first) = numbering(response.metadata());
        let events: Vec<StreamResponse> = collect(response.into_inner())
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert!(events.len() > 3, "{events:?}");
        let task_id = events[0].task_id().expect("a task").to_owned();
        // Resumed after the second message: the rest, numbered on.
        let mut sub = v1(SubscribeToTaskRequest {
            id: task_id.clone(),
            ..Default::default()
        });
        let after = format!("{log}-{}", first + 1);
        sub.metadata_mut()
            .insert(LAST_EVENT_ID, after.parse().unwrap());
        let response = b.subscribe_to_task(sub).await.unwrap();
        assert_eq!(numbering(response.metadata()), (log.clone(), first + 2));
        let rest: Vec<StreamResponse> = collect(response.into_inner())
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(rest, events[2..]);
        // Resumed after the last one of a finished task: nothing more.
        let mut sub = v1(SubscribeToTaskRequest {
            id: task_id,
            ..Default::default()
        });
        let last = format!("{log}-{}", first + events.len() as u64 - 1);
        sub.metadata_mut()
            .insert(LAST_EVENT_ID, last.parse().unwrap());
        let response = b.subscribe_to_task(sub).await.unwrap();
        assert!(collect(response.into_inner()).await.is_empty());
    }

    #[tokio::test]
    async fn streaming_yields_the_task_then_events_until_completed() {
        let b = binding();
        let stream = b
            .send_streaming_message(v1(send("stream me")))
            .await
            .unwrap()
            .into_inner();
        let events: Vec<StreamResponse> = collect(stream)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        let Some(Payload::Task(task)) = &events[0].payload else {
            panic!("the first event is not the task: {:?}", events[0]);
        };
        let task_id = task.id.clone();
        let mut states = Vec::new();
        let mut artifact_text = String::new();
        for event in &events[1..] {
            assert_eq!(event.task_id(), Some(task_id.as_str()));
            match event.payload.as_ref().expect("a payload") {
                Payload::StatusUpdate(s) => states.push(s.state()),
                Payload::ArtifactUpdate(a) => {
                    artifact_text.push_str(&a.artifact.as_ref().unwrap().text_content());
                }
                other => panic!("unexpected event {other:?}"),
            }
        }
        assert_eq!(states, [TaskState::Working, TaskState::Completed]);
        assert_eq!(artifact_text, "stream me");
        assert_eq!(
            events.last().unwrap().state(),
            Some(TaskState::Completed),
            "the stream ends at the terminal state"
        );
    }

    #[tokio::test]
    async fn subscribe_follows_a_task_until_canceled() {
        let b = binding();
        let res = b.send_message(v1(send("ask"))).await.unwrap().into_inner();
        let task = res.task().unwrap().clone();
        assert_eq!(task.state(), TaskState::InputRequired);

        let sub = SubscribeToTaskRequest {
            id: task.id.clone(),
            ..Default::default()
        };
        let mut stream = b
            .subscribe_to_task(v1(sub.clone()))
            .await
            .unwrap()
            .into_inner();
        let first = stream.next().await.unwrap().unwrap();
        assert!(matches!(&first.payload, Some(Payload::Task(t)) if t.id == task.id));
        assert_eq!(first.state(), Some(TaskState::InputRequired));

        let cancel = CancelTaskRequest {
            id: task.id.clone(),
            ..Default::default()
        };
        let canceled = b
            .cancel_task(v1(cancel.clone()))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(canceled.state(), TaskState::Canceled);
        let rest = collect(stream).await;
        let last = rest.last().expect("an event").as_ref().unwrap();
        assert_eq!(last.state(), Some(TaskState::Canceled));

        // A terminal task can be neither subscribed to nor canceled.
        let status = b.subscribe_to_task(v1(sub)).await.err().expect("an error");
        expect_error(
            &status,
            Code::FailedPrecondition,
            ErrorKind::UnsupportedOperation,
        );
        let status = b.cancel_task(v1(cancel)).await.unwrap_err();
        let err = expect_error(
            &status,
            Code::FailedPrecondition,
            ErrorKind::TaskNotCancelable,
        );
        assert_eq!(err.metadata["state"], "TASK_STATE_CANCELED");
    }

    #[tokio::test]
    async fn a_mid_stream_error_is_the_last_item() {
        let events: IdEventStream = Box::pin(futures::stream::iter([
            (None, Ok(StreamResponse::from(Task::default()))),
            (None, Err(A2aError::task_not_found("gone"))),
            (None, Ok(StreamResponse::from(Task::default()))),
        ]));
        let items = collect(numbered_events(None, events, None)).await;
        assert_eq!(items.len(), 2);
        assert!(items[0].is_ok());
        let status = items[1].as_ref().unwrap_err();
        expect_error(status, Code::NotFound, ErrorKind::TaskNotFound);
    }

    #[tokio::test]
    async fn push_configs_and_extended_card_are_refused() {
        let b = binding();
        let push = ErrorKind::PushNotificationNotSupported;
        let code = Code::FailedPrecondition;
        let status = b
            .create_task_push_notification_config(v1(TaskPushNotificationConfig::default()))
            .await
            .unwrap_err();
        expect_error(&status, code, push);
        let status = b
            .get_task_push_notification_config(v1(Default::default()))
            .await
            .unwrap_err();
        expect_error(&status, code, push);
        let status = b
            .list_task_push_notification_configs(v1(Default::default()))
            .await
            .unwrap_err();
        expect_error(&status, code, push);
        let status = b
            .delete_task_push_notification_config(v1(Default::default()))
            .await
            .unwrap_err();
        expect_error(&status, code, push);
        let status = b
            .get_extended_agent_card(v1(Default::default()))
            .await
            .unwrap_err();
        expect_error(&status, code, ErrorKind::UnsupportedOperation);
    }

    #[tokio::test]
    async fn authorization_and_extensions_come_from_metadata() {
        let mut card = card();
        card.capabilities
            .get_or_insert_with(Default::default)
            .extensions
            .push(AgentExtension {
                uri: EXT.into(),
                required: true,
                ..Default::default()
            });
        let auth = BearerTokens::new().with_token("secret", "alice");
        let handler = RequestHandler::builder(card, Echo)
            .authenticator(Arc::new(auth))
            .extended_card(AgentCard::new("Echo+", "More echo", "1.0.0"))
            .build();
        let b = GrpcBinding::new(handler);

        let status = b
            .get_extended_agent_card(v1(Default::default()))
            .await
            .unwrap_err();
        expect_error(&status, Code::Unauthenticated, ErrorKind::Unauthenticated);

        let authorized = |mut r: Request<SendMessageRequest>| {
            r.metadata_mut()
                .insert("authorization", MetadataValue::from_static("Bearer secret"));
            r
        };
        let mut req = v1(GetExtendedAgentCardRequest::default());
        req.metadata_mut()
            .insert("authorization", MetadataValue::from_static("Bearer secret"));
        let ext = b.get_extended_agent_card(req).await.unwrap().into_inner();
        assert_eq!(ext.name, "Echo+");

        let status = b
            .send_message(authorized(v1(send("hi"))))
            .await
            .unwrap_err();
        let err = expect_error(
            &status,
            Code::FailedPrecondition,
            ErrorKind::ExtensionSupportRequired,
        );
        assert_eq!(err.metadata["extension"], EXT);

        let mut req = authorized(v1(send("hi")));
        req.metadata_mut()
            .insert("a2a-extensions", MetadataValue::from_static(EXT));
        let res = b.send_message(req).await.unwrap().into_inner();
        assert_eq!(res.task().unwrap().state(), TaskState::Completed);
    }

    /// One gRPC frame holding `message`.
    fn frame(message: &impl prost::Message) -> Bytes {
        let body = message.encode_to_vec();
        let mut out = Vec::with_capacity(5 + body.len());
        out.push(0);
        out.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes());
        out.extend_from_slice(&body);
        out.into()
    }

    /// Calls `method` through the tonic service, as a client would: returns
    /// the final status and the response body.
    async fn wire_call(svc: &mut GrpcService, method: &str, body: Bytes) -> (Status, Bytes) {
        let req = http::Request::builder()
            .method("POST")
            .uri(format!("http://localhost/lf.a2a.v1.A2AService/{method}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .header("A2A-Version", "1.0")
            .body(Full::new(body))
            .unwrap();
        let res = svc.call(req).await.unwrap();
        let (parts, body) = res.into_parts();
        let collected = body.collect().await.unwrap();
        // Errors before any message come "trailers-only", in the headers.
        let trailers = collected.trailers().cloned().unwrap_or(parts.headers);
        let status = Status::from_header_map(&trailers).expect("a grpc-status");
        (status, collected.to_bytes())
    }

    #[tokio::test]
    async fn over_the_wire_with_a_message_size_limit() {
        let handler = RequestHandler::builder(card(), Echo).build();
        let mut svc = grpc_service(handler, 1024);

        let (status, body) = wire_call(&mut svc, "SendMessage", frame(&send("wire"))).await;
        assert_eq!(status.code(), Code::Ok, "{status:?}");
        let res = SendMessageResponse::decode(&body[5..]).unwrap();
        let task = res.task().unwrap();
        assert_eq!(task.artifacts[0].text_content(), "wire");

        let (status, _) = wire_call(&mut svc, "GetTask", frame(&get("nope"))).await;
        let err = expect_error(&status, Code::NotFound, ErrorKind::TaskNotFound);
        assert_eq!(err.metadata["taskId"], "nope");

        // Too big: refused before the handler, RESOURCE_EXHAUSTED with
        // the limit (tonic alone would say OUT_OF_RANGE).
        let big = send(&"x".repeat(2048));
        let (status, _) = wire_call(&mut svc, "SendMessage", frame(&big)).await;
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
        let err = A2aError::from_grpc_status(&status);
        assert_eq!(err.kind, ErrorKind::InvalidRequest);
        assert_eq!(err.metadata["limitBytes"], "1024");

        // Not protobuf: INVALID_ARGUMENT (tonic alone would say INTERNAL).
        let garbage = Bytes::from_static(&[0, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0x0f]);
        let (status, _) = wire_call(&mut svc, "SendMessage", garbage).await;
        expect_error(&status, Code::InvalidArgument, ErrorKind::ParseError);
        let (status, _) = wire_call(&mut svc, "SendMessage", frame(&send("again"))).await;
        assert_eq!(status.code(), Code::Ok, "{status:?}");
    }
}
