//! The gRPC transport of A2A 0.3: the service `a2a.v1.A2AService`.
//!
//! Each 1.0 request is converted to its 0.3 form as for HTTP+JSON, then
//! bridged to the generated 0.3 protobuf message through its ProtoJSON
//! form ([`agentwire_types::v0_3::grpc`]); answers and stream messages go
//! back the same way, into the 1.0 model. Tasks and push configs are named
//! by resource names (`tasks/{id}`,
//! `tasks/{id}/pushNotificationConfigs/{configId}`). The channel (TLS,
//! timeouts, keep-alive) and the tap are those of the 1.0 gRPC transport.

use agentwire_types::v0_3::grpc::{
    SERVICE_NAME, from_form, proto, push_config_name, task_name, to_form,
};
use agentwire_types::v0_3::{convert, rest};
use agentwire_types::{
    AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
};
use proto::a2a_service_client::A2aServiceClient;
use tonic::metadata::MetadataMap;
use tonic::transport::Channel;

use super::{
    invalid_answer, list_tasks_unsupported, named_error_kind, rest_event_to_v1, send_answer,
    v03_headers,
};
use crate::error::{ClientError, ClientResult};
use crate::grpc::{GrpcCall, endpoint, status_to_error};
use crate::tap::Tap;
use crate::tls::TlsOptions;
use crate::transport::{CallOptions, EventStream, Transport};

/// The gRPC transport of A2A 0.3 (service `a2a.v1.A2AService`).
///
/// Takes the URL forms of [`crate::GrpcTransport`]; sends no `a2a-version`
/// metadata (its absence means 0.3), the requested extensions in
/// `a2a-extensions` and `x-a2a-extensions`.
///
/// ```no_run
/// # async fn demo() -> Result<(), agentwire_client::ClientError> {
/// use agentwire_client::{CallOptions, Transport, V03GrpcTransport};
/// use agentwire_types::{Message, SendMessageRequest};
/// let grpc = V03GrpcTransport::new("127.0.0.1:50051")?;
/// let req = SendMessageRequest {
///     message: Some(Message::user_text("hello")),
///     ..Default::default()
/// };
/// let answer = grpc.send_message(req, &CallOptions::new()).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct V03GrpcTransport {
    client: A2aServiceClient<Channel>,
    url: String,
    tap: Option<Tap>,
}

impl V03GrpcTransport {
    /// A transport that connects on first use (and reconnects when the
    /// connection drops). Must be called within a Tokio runtime.
    pub fn new(url: impl Into<String>) -> ClientResult<Self> {
        let url = url.into();
        let channel = endpoint(&url, None)?.connect_lazy();
        Ok(Self::from_channel(channel, url))
    }

    /// [`V03GrpcTransport::new`] with these TLS settings for an
    /// `https://` / `grpcs://` URL; a plaintext URL ignores them.
    pub fn with_tls(url: impl Into<String>, tls: &TlsOptions) -> ClientResult<Self> {
        let url = url.into();
        let channel = endpoint(&url, Some(tls))?.connect_lazy();
        Ok(Self::from_channel(channel, url))
    }

    /// A transport over a channel configured by the caller.
    pub fn from_channel(channel: Channel, url: impl Into<String>) -> Self {
        Self {
            client: A2aServiceClient::new(channel)
                .max_decoding_message_size(crate::http::DEFAULT_MAX_RESPONSE_BYTES),
            url: url.into(),
            tap: None,
        }
    }

    /// Tells `tap` every exchange (see [`crate::tap`]), as the 1.0 gRPC
    /// transport does.
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

    /// The interface URL this transport was made for.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A request with the 0.3 metadata; a deadline only for unary calls.
    fn request<T>(
        &self,
        message: T,
        options: &CallOptions,
        deadline: bool,
    ) -> ClientResult<tonic::Request<T>> {
        let mut req = tonic::Request::new(message);
        *req.metadata_mut() = MetadataMap::from_headers(v03_headers(options)?);
        crate::trace_context::grpc(req.metadata_mut());
        if let (true, Some(t)) = (deadline, options.timeout) {
            req.set_timeout(t);
        }
        Ok(req)
    }

    fn call<'a>(&'a self, op: &'static str, options: &CallOptions) -> GrpcCall<'a> {
        GrpcCall {
            url: &self.url,
            tap: self.tap.as_ref(),
            service: SERVICE_NAME,
            op,
            timeout: options.timeout,
            status_error,
        }
    }

    async fn stream<T, F, Fut>(
        &self,
        op: &'static str,
        message: T,
        options: &CallOptions,
        call: F,
    ) -> ClientResult<EventStream>
    where
        T: serde::Serialize,
        F: FnOnce(A2aServiceClient<Channel>, tonic::Request<T>) -> Fut,
        Fut: Future<
            Output = Result<
                tonic::Response<tonic::Streaming<proto::StreamResponse>>,
                tonic::Status,
            >,
        >,
    {
        let req = self.request(message, options, false)?;
        let client = self.client.clone();
        self.call(op, options)
            .stream(
                req,
                |r| call(client, r),
                |m| matches!(m.payload, Some(proto::stream_response::Payload::Task(_))),
                event_to_v1,
            )
            .await
    }
}

/// A status of the call `op` as an error. The 0.3 gRPC binding has no
/// error details, and the 0.3 SDKs share status codes between errors, so a
/// status without details is read as they read it: the error a message
/// names (`TaskNotFoundError: ...`, the Python SDK's form), else by the
/// code and the call (the JavaScript SDK's reading): `FAILED_PRECONDITION`
/// on `CancelTask` is not cancelable and on `GetAgentCard` no extended
/// card; `UNIMPLEMENTED` on a push config call is push notifications not
/// supported, elsewhere an unsupported operation.
fn status_error(status: tonic::Status, url: &str, op: &'static str) -> ClientError {
    use agentwire_types::ErrorKind;
    let kind = if status.details().is_empty() {
        named_error_kind(status.message()).or(match (status.code(), op) {
            (tonic::Code::FailedPrecondition, "CancelTask") => Some(ErrorKind::TaskNotCancelable),
            (tonic::Code::FailedPrecondition, "GetAgentCard") => {
                Some(ErrorKind::ExtendedAgentCardNotConfigured)
            }
            (tonic::Code::Unimplemented, op) if op.contains("PushNotificationConfig") => {
                Some(ErrorKind::PushNotificationNotSupported)
            }
            (tonic::Code::Unimplemented, _) => Some(ErrorKind::UnsupportedOperation),
            _ => None,
        })
    } else {
        None
    };
    match (status_to_error(status, url), kind) {
        (ClientError::A2a(mut e), Some(kind)) => {
            e.kind = kind;
            ClientError::A2a(e)
        }
        (e, _) => e,
    }
}

fn event_to_v1(m: proto::StreamResponse) -> ClientResult<StreamResponse> {
    rest_event_to_v1(to_form(&m, "event").map_err(invalid_answer)?)
}

fn task_to_v1(t: &proto::Task) -> ClientResult<Task> {
    to_form::<_, rest::Task>(t, "task")
        .and_then(rest::task_from)
        .and_then(convert::task_to_v1)
        .map_err(invalid_answer)
}

fn push_to_v1(
    task_id: String,
    c: &proto::TaskPushNotificationConfig,
) -> ClientResult<TaskPushNotificationConfig> {
    let c: rest::TaskPushConfig = to_form(c, "push notification config").map_err(invalid_answer)?;
    Ok(convert::task_push_config_to_v1(rest::task_push_from(
        task_id, c,
    )))
}

fn send_request(request: SendMessageRequest) -> ClientResult<proto::SendMessageRequest> {
    from_form(
        &rest::send_to(convert::send_request_to_v03(request)),
        "send request",
    )
    .map_err(invalid_answer)
}

/// The name of a task's push config, or of the task when no config is
/// named (the task's only config).
fn config_name(task_id: &str, config_id: &str) -> String {
    if config_id.is_empty() {
        task_name(task_id)
    } else {
        push_config_name(task_id, config_id)
    }
}

#[async_trait::async_trait]
impl Transport for V03GrpcTransport {
    async fn send_message(
        &self,
        request: SendMessageRequest,
        options: &CallOptions,
    ) -> ClientResult<SendMessageResponse> {
        let req = self.request(send_request(request)?, options, true)?;
        let mut c = self.client.clone();
        let answer: proto::SendMessageResponse = self
            .call("SendMessage", options)
            .unary(req, |r| async move { c.send_message(r).await })
            .await?;
        send_answer(to_form(&answer, "send response").map_err(invalid_answer)?)
    }

    async fn send_streaming_message(
        &self,
        request: SendMessageRequest,
        options: &CallOptions,
    ) -> ClientResult<EventStream> {
        let req = send_request(request)?;
        self.stream(
            "SendStreamingMessage",
            req,
            options,
            |mut c, r| async move { c.send_streaming_message(r).await },
        )
        .await
    }

    async fn get_task(&self, request: GetTaskRequest, options: &CallOptions) -> ClientResult<Task> {
        let params = convert::get_task_to_v03(request);
        let msg = proto::GetTaskRequest {
            name: task_name(&params.id),
            history_length: params.history_length.unwrap_or(0),
        };
        let req = self.request(msg, options, true)?;
        let mut c = self.client.clone();
        let t = self
            .call("GetTask", options)
            .unary(req, |r| async move { c.get_task(r).await })
            .await?;
        task_to_v1(&t)
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
        let msg = proto::CancelTaskRequest {
            name: task_name(&request.id),
        };
        let req = self.request(msg, options, true)?;
        let mut c = self.client.clone();
        let t = self
            .call("CancelTask", options)
            .unary(req, |r| async move { c.cancel_task(r).await })
            .await?;
        task_to_v1(&t)
    }

    async fn subscribe_to_task(
        &self,
        request: SubscribeToTaskRequest,
        options: &CallOptions,
    ) -> ClientResult<EventStream> {
        let msg = proto::TaskSubscriptionRequest {
            name: task_name(&request.id),
        };
        self.stream("TaskSubscription", msg, options, |mut c, r| async move {
            c.task_subscription(r).await
        })
        .await
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
            parent: task_name(&task_id),
            config_id: config.push_notification_config.id.clone(),
            config: Some(config),
        };
        let msg: proto::CreateTaskPushNotificationConfigRequest =
            from_form(&body, "push notification config").map_err(invalid_answer)?;
        let req = self.request(msg, options, true)?;
        let mut c = self.client.clone();
        let answer = self
            .call("CreateTaskPushNotificationConfig", options)
            .unary(req, |r| async move {
                c.create_task_push_notification_config(r).await
            })
            .await?;
        push_to_v1(task_id, &answer)
    }

    async fn get_task_push_notification_config(
        &self,
        request: GetTaskPushNotificationConfigRequest,
        options: &CallOptions,
    ) -> ClientResult<TaskPushNotificationConfig> {
        let msg = proto::GetTaskPushNotificationConfigRequest {
            name: config_name(&request.task_id, &request.id),
        };
        let req = self.request(msg, options, true)?;
        let mut c = self.client.clone();
        let answer = self
            .call("GetTaskPushNotificationConfig", options)
            .unary(req, |r| async move {
                c.get_task_push_notification_config(r).await
            })
            .await?;
        push_to_v1(request.task_id, &answer)
    }

    async fn list_task_push_notification_configs(
        &self,
        request: ListTaskPushNotificationConfigsRequest,
        options: &CallOptions,
    ) -> ClientResult<ListTaskPushNotificationConfigsResponse> {
        let msg = proto::ListTaskPushNotificationConfigRequest {
            parent: task_name(&request.task_id),
            page_size: 0,
            page_token: String::new(),
        };
        let req = self.request(msg, options, true)?;
        let mut c = self.client.clone();
        let answer = self
            .call("ListTaskPushNotificationConfig", options)
            .unary(req, |r| async move {
                c.list_task_push_notification_config(r).await
            })
            .await?;
        Ok(ListTaskPushNotificationConfigsResponse {
            configs: answer
                .configs
                .iter()
                .map(|c| push_to_v1(request.task_id.clone(), c))
                .collect::<ClientResult<_>>()?,
            next_page_token: String::new(),
        })
    }

    async fn delete_task_push_notification_config(
        &self,
        request: DeleteTaskPushNotificationConfigRequest,
        options: &CallOptions,
    ) -> ClientResult<()> {
        let msg = proto::DeleteTaskPushNotificationConfigRequest {
            name: push_config_name(&request.task_id, &request.id),
        };
        let req = self.request(msg, options, true)?;
        let mut c = self.client.clone();
        self.call("DeleteTaskPushNotificationConfig", options)
            .unary(req, |r| async move {
                c.delete_task_push_notification_config(r).await
            })
            .await?;
        Ok(())
    }

    async fn get_extended_agent_card(
        &self,
        _request: GetExtendedAgentCardRequest,
        options: &CallOptions,
    ) -> ClientResult<AgentCard> {
        let req = self.request(proto::GetAgentCardRequest {}, options, true)?;
        let mut c = self.client.clone();
        let card = self
            .call("GetAgentCard", options)
            .unary(req, |r| async move { c.get_agent_card(r).await })
            .await?;
        let body = serde_json::to_vec(&card)
            .map_err(|e| ClientError::invalid_response(format!("extended card: {e}")))?;
        crate::card::parse_agent_card(&body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn metadata_is_that_of_0_3() {
        let t = V03GrpcTransport::new("127.0.0.1:1").unwrap();
        let opts = CallOptions::new()
            .with_service_param("A2A-Version", "1.0")
            .with_service_param("Authorization", "Bearer x")
            .with_extension("urn:a");
        let req = t
            .request(proto::GetAgentCardRequest {}, &opts, true)
            .unwrap();
        let md = req.metadata();
        assert!(md.get("a2a-version").is_none());
        assert_eq!(md.get("authorization").unwrap(), "Bearer x");
        assert_eq!(md.get("a2a-extensions").unwrap(), "urn:a");
        assert_eq!(md.get("x-a2a-extensions").unwrap(), "urn:a");
        assert_eq!(config_name("t", ""), "tasks/t");
        // Errors as the 0.3 SDKs send them (no details; response metadata,
        // as a status from a server has).
        use agentwire_types::ErrorKind as K;
        use tonic::Code;
        let kind = |code, msg: &str, op| {
            let mut s = tonic::Status::new(code, msg);
            s.metadata_mut()
                .insert("content-type", "application/grpc".parse().unwrap());
            status_error(s, "h:1", op).kind()
        };
        let not_cancelable = Some(K::TaskNotCancelable);
        assert_eq!(
            kind(
                Code::FailedPrecondition,
                "Task not cancelable",
                "CancelTask"
            ),
            not_cancelable
        );
        assert_eq!(
            kind(
                Code::Unimplemented,
                "TaskNotCancelableError: no",
                "CancelTask"
            ),
            not_cancelable
        );
        assert_eq!(
            kind(Code::NotFound, "Task not found", "GetTask"),
            Some(K::TaskNotFound)
        );
        assert_eq!(
            kind(Code::Unimplemented, "no", "GetTaskPushNotificationConfig"),
            Some(K::PushNotificationNotSupported)
        );
        assert_eq!(
            kind(Code::Unimplemented, "no", "TaskSubscription"),
            Some(K::UnsupportedOperation)
        );
        assert_eq!(config_name("t", "c"), "tasks/t/pushNotificationConfigs/c");
    }
}
