//! The 0.3 gRPC service `a2a.v1.A2AService`, served on the same port (and
//! the same HTTP/2 connections) as the 1.0 service `lf.a2a.v1.A2AService`.
//!
//! Each call's message is bridged to its 0.3 HTTP+JSON struct
//! ([`agentwire_types::v0_3::grpc`]), converted to the 1.0 request like an
//! HTTP+JSON call, handed to the handler, and the answer converted back the
//! same way. What differs from HTTP+JSON:
//!
//! - Resource names: `GetTask`, `CancelTask` and `TaskSubscription` name the
//!   task `tasks/{id}`; the push config calls name
//!   `tasks/{id}/pushNotificationConfigs/{configId}` (get, delete) or their
//!   parent `tasks/{id}` (create, list).
//! - `GetAgentCard` answers the extended card when the agent has one (the
//!   0.3 SDKs call it for that), else the public card, in both cases with
//!   the 0.3 fields.
//! - Errors are gRPC statuses with the 1.0 codes and `google.rpc.ErrorInfo`
//!   details (0.3 defined no details of its own).
//! - With 0.3 turned off, or with an `a2a-version` other than 0.3, every
//!   method answers `VersionNotSupportedError` as a status
//!   (`FAILED_PRECONDITION`... as 1.0 maps it), never an HTTP error.

use agentwire_types::v0_3::grpc::{
    self as bridge, from_form, proto, push_config_name_of, task_id_of, to_form,
};
use agentwire_types::{A2aError, ErrorKind};
use futures::{Stream, StreamExt};
use std::future::Future;
use std::pin::Pin;
use tonic::{Request, Response, Status};

use super::{convert, jsonrpc, rest, types as v03};
use crate::bindings::grpc_refusals::Refusing;
use crate::bindings::http::HttpState;
use crate::handler::{CallContext, IdEventStream, RequestHandler, SendAnswer};

/// The response stream of the 0.3 streaming methods.
pub(crate) type V03EventStream =
    Pin<Box<dyn Stream<Item = Result<proto::StreamResponse, Status>> + Send>>;

/// The tonic server of the 0.3 service, accepting request messages of up to
/// `max_message_bytes`; one it cannot read is refused with the codes of the
/// 1.0 service (`INVALID_ARGUMENT`, `RESOURCE_EXHAUSTED`).
pub(crate) fn service(handler: RequestHandler, max_message_bytes: usize) -> Refusing<Decoding> {
    let decoding = Decoding {
        limits: handler.read_limits(),
        inner: proto::a2a_service_server::A2aServiceServer::new(V03Grpc {
            state: HttpState {
                handler,
                max_body_bytes: max_message_bytes,
            },
        })
        .max_decoding_message_size(max_message_bytes),
    };
    Refusing::new(decoding, max_message_bytes)
}

/// The 0.3 tonic server, with each request walked against the handler's
/// read limits before it is decoded ([`agentwire_types::limits::wire`]).
#[derive(Clone)]
pub(crate) struct Decoding {
    inner: proto::a2a_service_server::A2aServiceServer<V03Grpc>,
    limits: agentwire_types::limits::ReadLimits,
}

impl<B> tower::Service<http::Request<B>> for Decoding
where
    B: hyper::body::Body + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        tower::Service::<http::Request<B>>::poll_ready(&mut self.inner, cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let mut inner = self.inner.call(request);
        let limits = self.limits;
        // tonic decodes the request inside the polls of its future.
        Box::pin(std::future::poll_fn(move |cx| {
            agentwire_types::limits::wire::decoding(&limits, || inner.as_mut().poll(cx))
        }))
    }
}

/// The path prefix of the 0.3 service's methods.
pub(crate) fn route() -> String {
    format!("/{}/{{method}}", bridge::SERVICE_NAME)
}

/// The 0.3 `A2AService`: converts each call and hands it to the handler.
#[derive(Clone)]
pub(crate) struct V03Grpc {
    state: HttpState,
}

impl V03Grpc {
    /// The call's context as the handler is to see it, after checking the
    /// call may be served as 0.3.
    fn context<T>(&self, request: Request<T>) -> Result<(CallContext, T), Status> {
        let (metadata, extensions, message) = request.into_parts();
        let peer = extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|c| c.0);
        let ctx = CallContext::new(metadata.into_headers())
            .with_peer(peer)
            .with_client_cert(extensions.get::<crate::auth::ClientCertificate>().cloned());
        let h = &self.state.handler;
        if crate::handler::requested_version(&ctx) != super::V03 || !h.serves_v03() {
            let requested = ctx
                .headers
                .get(&crate::handler::A2A_VERSION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            return Err(status_of(&h.version_not_supported(&requested)));
        }
        Ok((super::as_v1_call(ctx), message))
    }
}

/// The status of an error (with its challenge, as the 1.0 service sends).
///
/// Where 0.3 and 1.0 differ: the 0.3 SDKs (Python and JavaScript, servers
/// and clients) carry `UnsupportedOperationError` and
/// `PushNotificationNotSupportedError` as `UNIMPLEMENTED`, where 1.0 says
/// `FAILED_PRECONDITION`; a 0.3 client reads these errors only from the
/// code, so the 0.3 service answers with theirs.
fn status_of(e: &A2aError) -> Status {
    let mut status = e.to_grpc_status();
    if matches!(
        e.kind,
        ErrorKind::UnsupportedOperation | ErrorKind::PushNotificationNotSupported
    ) {
        status = Status::with_details_and_metadata(
            tonic::Code::Unimplemented,
            status.message().to_owned(),
            status.details().to_vec().into(),
            status.metadata().clone(),
        );
    }
    if let Some(challenge) = crate::bindings::http::challenge(e)
        .and_then(|v| v.to_str().ok().and_then(|v| v.parse().ok()))
    {
        status.metadata_mut().insert("www-authenticate", challenge);
    }
    status
}

fn respond<T>(result: Result<T, A2aError>) -> Result<Response<T>, Status> {
    result.map(Response::new).map_err(|e| status_of(&e))
}

/// The handler's events as 0.3 stream messages; an error ends the stream
/// as its status.
fn stream(result: Result<IdEventStream, A2aError>) -> Result<Response<V03EventStream>, Status> {
    let events = result.map_err(|e| status_of(&e))?;
    let out = events
        .filter_map(|(_, item)| {
            let out = match item {
                Ok(ev) => convert::stream_event_to_v03(ev).map(|ev| {
                    from_form::<_, proto::StreamResponse>(&rest::event_to(ev), "event")
                        .map_err(|e| status_of(&e))
                }),
                Err(e) => Some(Err(status_of(&e))),
            };
            std::future::ready(out)
        })
        // Nothing follows an error.
        .scan(false, |ended, item| {
            if *ended {
                return std::future::ready(None);
            }
            *ended = item.is_err();
            std::future::ready(Some(item))
        });
    Ok(Response::new(Box::pin(out)))
}

/// A 0.3 task as its protobuf message.
fn task_proto(t: v03::Task) -> Result<proto::Task, A2aError> {
    from_form(&rest::task_to(t), "task")
}

/// A 0.3 push config as its protobuf message.
fn push_proto(
    c: v03::TaskPushNotificationConfig,
) -> Result<proto::TaskPushNotificationConfig, A2aError> {
    from_form(&rest::task_push_to(c), "push notification config")
}

/// The 1.0 send request of a 0.3 `SendMessageRequest`.
fn send_request(
    req: &proto::SendMessageRequest,
) -> Result<agentwire_types::SendMessageRequest, A2aError> {
    if req.request.is_none() {
        return Err(A2aError::invalid_params("message", "a message is required"));
    }
    to_form::<_, rest::SendRequest>(req, "send request")
        .and_then(rest::send_from)
        .and_then(convert::send_params_to_v1)
}

#[tonic::async_trait]
impl proto::a2a_service_server::A2aService for V03Grpc {
    async fn send_message(
        &self,
        request: Request<proto::SendMessageRequest>,
    ) -> Result<Response<proto::SendMessageResponse>, Status> {
        let (ctx, req) = self.context(request)?;
        let req = send_request(&req).map_err(|e| status_of(&e))?;
        let answer = Box::pin(self.state.handler.send_answer(&ctx, req)).await;
        respond(answer.and_then(|a| {
            let result = match a {
                SendAnswer::Task(task) => v03::SendResult::Task(convert::shared_task_to_v03(task)),
                SendAnswer::Response(r) => convert::send_result_to_v03(r).ok_or_else(|| {
                    A2aError::internal("the agent answered with neither a task nor a message")
                })?,
            };
            let form = match result {
                v03::SendResult::Task(t) => rest::StreamResponse {
                    task: Some(rest::task_to(t)),
                    ..Default::default()
                },
                v03::SendResult::Message(m) => rest::StreamResponse {
                    message: Some(rest::message_to(m)),
                    ..Default::default()
                },
            };
            from_form(&form, "send response")
        }))
    }

    type SendStreamingMessageStream = V03EventStream;

    async fn send_streaming_message(
        &self,
        request: Request<proto::SendMessageRequest>,
    ) -> Result<Response<Self::SendStreamingMessageStream>, Status> {
        let (ctx, req) = self.context(request)?;
        let req = send_request(&req).map_err(|e| status_of(&e))?;
        stream(
            Box::pin(
                self.state
                    .handler
                    .send_streaming_message_with_ids(&ctx, req),
            )
            .await,
        )
    }

    async fn get_task(
        &self,
        request: Request<proto::GetTaskRequest>,
    ) -> Result<Response<proto::Task>, Status> {
        let (ctx, req) = self.context(request)?;
        let id = task_id_of(&req.name).map_err(|e| status_of(&e))?;
        let req = convert::get_task_to_v1(v03::TaskQueryParams {
            id,
            history_length: (req.history_length != 0).then_some(req.history_length),
            metadata: None,
        });
        respond(
            Box::pin(self.state.handler.get_task(&ctx, req))
                .await
                .and_then(|t| task_proto(convert::task_to_v03(t))),
        )
    }

    async fn cancel_task(
        &self,
        request: Request<proto::CancelTaskRequest>,
    ) -> Result<Response<proto::Task>, Status> {
        let (ctx, req) = self.context(request)?;
        let id = task_id_of(&req.name).map_err(|e| status_of(&e))?;
        let req = convert::cancel_to_v1(v03::TaskIdParams { id, metadata: None });
        respond(
            Box::pin(self.state.handler.cancel_task(&ctx, req))
                .await
                .and_then(|t| task_proto(convert::task_to_v03(t))),
        )
    }

    type TaskSubscriptionStream = V03EventStream;

    async fn task_subscription(
        &self,
        request: Request<proto::TaskSubscriptionRequest>,
    ) -> Result<Response<Self::TaskSubscriptionStream>, Status> {
        let (ctx, req) = self.context(request)?;
        let id = task_id_of(&req.name).map_err(|e| status_of(&e))?;
        let req = convert::subscribe_to_v1(v03::TaskIdParams { id, metadata: None });
        stream(Box::pin(self.state.handler.subscribe_to_task_with_ids(&ctx, req)).await)
    }

    async fn create_task_push_notification_config(
        &self,
        request: Request<proto::CreateTaskPushNotificationConfigRequest>,
    ) -> Result<Response<proto::TaskPushNotificationConfig>, Status> {
        let (ctx, req) = self.context(request)?;
        let result = async {
            let form: rest::CreatePushConfigRequest = to_form(&req, "push notification config")?;
            // The parent is `tasks/{id}`; a config name under it also says.
            let task_id = match task_id_of(&form.parent) {
                Ok(id) => id,
                Err(e) => form
                    .config
                    .as_ref()
                    .and_then(|c| task_id_of(&c.name).ok())
                    .ok_or(e)?,
            };
            let mut config = form.config.unwrap_or_default();
            if config.push_notification_config.id.is_empty() {
                config.push_notification_config.id = form.config_id;
            }
            let config = rest::task_push_from(task_id, config);
            Box::pin(jsonrpc::push_set(&self.state, &ctx, config))
                .await
                .and_then(push_proto)
        }
        .await;
        respond(result)
    }

    async fn get_task_push_notification_config(
        &self,
        request: Request<proto::GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<proto::TaskPushNotificationConfig>, Status> {
        let (ctx, req) = self.context(request)?;
        // `tasks/{id}` alone asks for the task's config, as JSON-RPC's get
        // without a config id does.
        let (id, config_id) = match push_config_name_of(&req.name) {
            Ok((id, cid)) => (id, Some(cid)),
            Err(e) => (task_id_of(&req.name).map_err(|_| status_of(&e))?, None),
        };
        let params = v03::PushConfigParams {
            id,
            push_notification_config_id: config_id,
            metadata: None,
        };
        respond(
            Box::pin(jsonrpc::push_get(&self.state, &ctx, params))
                .await
                .and_then(push_proto),
        )
    }

    async fn list_task_push_notification_config(
        &self,
        request: Request<proto::ListTaskPushNotificationConfigRequest>,
    ) -> Result<Response<proto::ListTaskPushNotificationConfigResponse>, Status> {
        let (ctx, req) = self.context(request)?;
        let task_id = task_id_of(&req.parent).map_err(|e| status_of(&e))?;
        let result = Box::pin(jsonrpc::push_list(&self.state, &ctx, task_id))
            .await
            .and_then(|all| {
                Ok(proto::ListTaskPushNotificationConfigResponse {
                    configs: all.into_iter().map(push_proto).collect::<Result<_, _>>()?,
                    next_page_token: String::new(),
                })
            });
        respond(result)
    }

    async fn get_agent_card(
        &self,
        request: Request<proto::GetAgentCardRequest>,
    ) -> Result<Response<proto::AgentCard>, Status> {
        let (ctx, _) = self.context(request)?;
        let h = &self.state.handler;
        let req = agentwire_types::GetExtendedAgentCardRequest::default();
        let card = match Box::pin(h.get_extended_agent_card(&ctx, req)).await {
            Ok(card) => card,
            Err(e) if e.kind == ErrorKind::UnsupportedOperation => h.agent_card().clone(),
            Err(e) => return Err(status_of(&e)),
        };
        let result = serde_json::to_vec(&card)
            .map_err(|e| A2aError::internal(format!("could not encode the card: {e}")))
            .and_then(|json| {
                let doc = super::card::with_v03_fields(&card, &json, true);
                serde_json::from_slice(&doc)
                    .map_err(|e| A2aError::internal(format!("could not encode the card: {e}")))
            })
            .and_then(bridge::card_to_proto)
            .and_then(|proto_card| self.signed_v03(proto_card));
        respond(result)
    }

    async fn delete_task_push_notification_config(
        &self,
        request: Request<proto::DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pbjson_types::Empty>, Status> {
        let (ctx, req) = self.context(request)?;
        let (task_id, id) = push_config_name_of(&req.name).map_err(|e| status_of(&e))?;
        let del = agentwire_types::DeleteTaskPushNotificationConfigRequest {
            tenant: String::new(),
            task_id,
            id,
        };
        respond(
            Box::pin(
                self.state
                    .handler
                    .delete_task_push_notification_config(&ctx, del),
            )
            .await
            .map(|()| pbjson_types::Empty {}),
        )
    }
}

impl V03Grpc {
    /// The 0.3 protobuf card with signatures of its own first, when the
    /// agent signs its cards. The signatures it carries from the 1.0 card
    /// cover the 1.0 card (with `supportedInterfaces`,
    /// `securityRequirements`...), which the 0.3 protobuf form cannot hold:
    /// a 0.3 client that checks the card it received (its protobuf form as
    /// JSON, the way the 0.3 SDKs read it) could verify none of them. Its
    /// own signature covers the RFC 8785 form of that JSON (without
    /// `signatures`).
    fn signed_v03(&self, mut card: proto::AgentCard) -> Result<proto::AgentCard, A2aError> {
        let Some((signer, jku)) = self.state.handler.card_signer() else {
            return Ok(card);
        };
        let inherited = std::mem::take(&mut card.signatures);
        let doc = serde_json::to_value(&card)
            .map_err(|e| A2aError::internal(format!("could not encode the card: {e}")))?;
        let own = signer
            .sign_as_is(&doc, jku)
            .map_err(|e| A2aError::internal(format!("could not sign the 0.3 card: {e}")))?;
        for sig in own {
            let sig = serde_json::to_value(&sig)
                .and_then(serde_json::from_value::<proto::AgentCardSignature>)
                .map_err(|e| A2aError::internal(format!("could not encode a signature: {e}")))?;
            card.signatures.push(sig);
        }
        card.signatures.extend(inherited);
        Ok(card)
    }
}
