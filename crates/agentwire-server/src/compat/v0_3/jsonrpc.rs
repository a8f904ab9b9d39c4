//! The 0.3 JSON-RPC methods: params decoded into the 0.3 types, converted
//! into the 1.0 requests, the handler called as for a 1.0 client, and its
//! answers converted back and written in the 0.3 form.
//!
//! The JSON-RPC envelope (`jsonrpc`, `id`, `method`) is read once by the
//! JSON-RPC binding, which hands the raw `params` here: the body is parsed
//! once, into the 0.3 types.

use agentwire_types::{
    A2aError, ErrorKind, GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
};
use axum::response::Response;
use futures::StreamExt;
use http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use super::{convert, error_object, types as v03};
use crate::bindings::http::{HttpState, json_response, sse_response};
use crate::handler::{CallContext, IdEventStream, SendAnswer};

/// The 0.3 method names.
pub(crate) mod methods {
    pub(crate) const SEND: &str = "message/send";
    pub(crate) const STREAM: &str = "message/stream";
    pub(crate) const GET: &str = "tasks/get";
    pub(crate) const CANCEL: &str = "tasks/cancel";
    pub(crate) const RESUBSCRIBE: &str = "tasks/resubscribe";
    pub(crate) const PUSH_SET: &str = "tasks/pushNotificationConfig/set";
    pub(crate) const PUSH_GET: &str = "tasks/pushNotificationConfig/get";
    pub(crate) const PUSH_LIST: &str = "tasks/pushNotificationConfig/list";
    pub(crate) const PUSH_DELETE: &str = "tasks/pushNotificationConfig/delete";
    pub(crate) const EXTENDED_CARD: &str = "agent/getAuthenticatedExtendedCard";
}

/// Whether a method name is one of 0.3's (they have a `/`, the 1.0 names
/// none), including `tasks/list`, which 0.3 defines for gRPC and REST only.
pub(crate) fn is_v03_method(method: &str) -> bool {
    method.contains('/')
}

/// Writes `{"jsonrpc":"2.0","id":<id>,"result":<result>}`.
fn result_body<T: serde::Serialize>(id: &str, result: &T) -> Result<Vec<u8>, A2aError> {
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b",\"result\":");
    serde_json::to_writer(&mut out, result)
        .map_err(|e| A2aError::internal(format!("could not encode the result: {e}")))?;
    out.push(b'}');
    Ok(out)
}

/// The JSON-RPC error response in the 0.3 form.
pub(crate) fn error_body(id: &str, error: &A2aError) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b",\"error\":");
    // Serializing a serde_json::Value cannot fail.
    let _ = serde_json::to_writer(&mut out, &error_object(error));
    out.push(b'}');
    out
}

pub(crate) fn error_response(id: &str, error: &A2aError) -> Response {
    json_response(StatusCode::OK, "application/json", error_body(id, error))
}

fn respond<T: serde::Serialize>(id: &str, result: Result<T, A2aError>) -> Response {
    match result.and_then(|r| result_body(id, &r)) {
        Ok(body) => json_response(StatusCode::OK, "application/json", body),
        Err(e) => error_response(id, &e),
    }
}

/// The params as a 0.3 type; required (every 0.3 method has some).
/// Read with the handler's limits ([`agentwire_types::limits::reading`]).
fn params<T: DeserializeOwned>(
    params: Option<&RawValue>,
    limits: &agentwire_types::limits::ReadLimits,
) -> Result<T, A2aError> {
    let raw = params
        .map(RawValue::get)
        .filter(|p| *p != "null")
        .ok_or_else(|| A2aError::invalid_params("params", "params are required"))?;
    agentwire_types::limits::reading(limits, || serde_json::from_str(raw)).map_err(|e| {
        if let Some(limit) = agentwire_types::limits::json_limit_error(raw.as_bytes(), &e) {
            return limit.into_invalid_params();
        }
        if raw.trim_start().starts_with('{') {
            A2aError::invalid_params("params", e.to_string())
        } else {
            A2aError::invalid_params("params", "params must be an object")
        }
    })
}

/// One 0.3 JSON-RPC call. `ctx` already says 1.0 (see
/// [`super::as_v1_call`]); `id` is the request id as it came.
pub(crate) async fn call(
    state: &HttpState,
    ctx: CallContext,
    id: &str,
    method: &str,
    p: Option<&RawValue>,
) -> Response {
    let h = &state.handler;
    let limits = h.read_limits();
    macro_rules! try_params {
        ($t:ty) => {
            match params::<$t>(p, &limits) {
                Ok(v) => v,
                Err(e) => return error_response(id, &e),
            }
        };
    }
    match method {
        methods::SEND => {
            let req = match convert::send_params_to_v1(try_params!(v03::MessageSendParams)) {
                Ok(r) => r,
                Err(e) => return error_response(id, &e),
            };
            let answer = Box::pin(h.send_answer(&ctx, req)).await;
            respond(
                id,
                answer.and_then(|a| match a {
                    SendAnswer::Task(task) => {
                        Ok(v03::SendResult::Task(convert::shared_task_to_v03(task)))
                    }
                    SendAnswer::Response(r) => convert::send_result_to_v03(r).ok_or_else(|| {
                        A2aError::internal("the agent answered with neither a task nor a message")
                    }),
                }),
            )
        }
        methods::STREAM => {
            let req = match params(p, &limits).and_then(convert::send_params_to_v1) {
                Ok(r) => r,
                Err(e) => return stream_error(id, &e),
            };
            stream(
                id,
                Box::pin(h.send_streaming_message_with_ids(&ctx, req)).await,
            )
        }
        methods::GET => {
            let req = convert::get_task_to_v1(try_params!(v03::TaskQueryParams));
            respond(
                id,
                Box::pin(h.get_task(&ctx, req))
                    .await
                    .map(convert::task_to_v03),
            )
        }
        methods::CANCEL => {
            let req = convert::cancel_to_v1(try_params!(v03::TaskIdParams));
            respond(
                id,
                Box::pin(h.cancel_task(&ctx, req))
                    .await
                    .map(convert::task_to_v03),
            )
        }
        methods::RESUBSCRIBE => {
            let req = match params(p, &limits) {
                Ok(r) => convert::subscribe_to_v1(r),
                Err(e) => return stream_error(id, &e),
            };
            stream(id, Box::pin(h.subscribe_to_task_with_ids(&ctx, req)).await)
        }
        methods::PUSH_SET => {
            let req = try_params!(v03::TaskPushNotificationConfig);
            respond(id, Box::pin(push_set(state, &ctx, req)).await)
        }
        methods::PUSH_GET => {
            let req = try_params!(v03::PushConfigParams);
            respond(id, Box::pin(push_get(state, &ctx, req)).await)
        }
        methods::PUSH_LIST => {
            let req = try_params!(v03::TaskIdParams);
            respond(id, Box::pin(push_list(state, &ctx, req.id)).await)
        }
        methods::PUSH_DELETE => {
            let req = try_params!(v03::PushConfigParams);
            let Some(config_id) = req.push_notification_config_id else {
                return error_response(
                    id,
                    &A2aError::invalid_params(
                        "pushNotificationConfigId",
                        "the id of the config to delete is required",
                    ),
                );
            };
            let del = agentwire_types::DeleteTaskPushNotificationConfigRequest {
                tenant: String::new(),
                task_id: req.id,
                id: config_id,
            };
            respond(
                id,
                Box::pin(h.delete_task_push_notification_config(&ctx, del))
                    .await
                    .map(|()| serde_json::Value::Null),
            )
        }
        methods::EXTENDED_CARD => {
            let req = agentwire_types::GetExtendedAgentCardRequest::default();
            match Box::pin(h.get_extended_agent_card(&ctx, req)).await {
                Ok(card) => {
                    let card_json = super::card::v03_card(h, &card, h.serves_v03());
                    json_response(
                        StatusCode::OK,
                        "application/json",
                        raw_result_body(id, &card_json),
                    )
                }
                Err(e) => error_response(id, &error_for_extended_card(e)),
            }
        }
        other => error_response(
            id,
            &A2aError::new(
                ErrorKind::MethodNotFound,
                if other == "tasks/list" {
                    "Method not found: tasks/list (A2A 0.3 defines listing for gRPC and HTTP+JSON \
                     only; use ListTasks with A2A-Version: 1.0)"
                        .to_owned()
                } else {
                    format!("Method not found: {other}")
                },
            )
            .with_metadata("method", other),
        ),
    }
}

/// The result already encoded.
fn raw_result_body(id: &str, result: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(result.len() + 48);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b",\"result\":");
    out.extend_from_slice(result);
    out.push(b'}');
    out
}

/// 0.3 names the missing extended card `AuthenticatedExtendedCardNotConfiguredError`
/// (-32007): the 1.0 handler says "unsupported" when the agent has none.
fn error_for_extended_card(e: A2aError) -> A2aError {
    if e.kind == ErrorKind::UnsupportedOperation {
        A2aError::new(ErrorKind::ExtendedAgentCardNotConfigured, e.message)
    } else {
        e
    }
}

/// `tasks/pushNotificationConfig/set`. A config without an id gets the
/// task's id (0.3 servers' rule, so that `get` without an id finds it).
pub(crate) async fn push_set(
    state: &HttpState,
    ctx: &CallContext,
    req: v03::TaskPushNotificationConfig,
) -> Result<v03::TaskPushNotificationConfig, A2aError> {
    let mut config = convert::task_push_config_to_v1(req);
    if config.id.is_empty() {
        config.id.clone_from(&config.task_id);
    }
    state
        .handler
        .create_task_push_notification_config(ctx, config)
        .await
        .map(convert::task_push_config_to_v03)
}

/// `tasks/pushNotificationConfig/get`; without a config id, the config
/// named after the task, else the task's first.
pub(crate) async fn push_get(
    state: &HttpState,
    ctx: &CallContext,
    req: v03::PushConfigParams,
) -> Result<v03::TaskPushNotificationConfig, A2aError> {
    let h = &state.handler;
    if let Some(config_id) = req.push_notification_config_id.filter(|c| !c.is_empty()) {
        let get = GetTaskPushNotificationConfigRequest {
            tenant: String::new(),
            task_id: req.id,
            id: config_id,
        };
        return h
            .get_task_push_notification_config(ctx, get)
            .await
            .map(convert::task_push_config_to_v03);
    }
    let all = push_list(state, ctx, req.id.clone()).await?;
    let mut chosen = None;
    for c in all {
        if c.push_notification_config.id == req.id {
            chosen = Some(c);
            break;
        }
        chosen.get_or_insert(c);
    }
    chosen.ok_or_else(|| {
        A2aError::new(
            ErrorKind::TaskNotFound,
            format!("task {} has no push notification config", req.id),
        )
        .with_metadata("taskId", req.id)
    })
}

/// `tasks/pushNotificationConfig/list`: every config of the task (0.3 has
/// no pages: they are all fetched).
pub(crate) async fn push_list(
    state: &HttpState,
    ctx: &CallContext,
    task_id: String,
) -> Result<Vec<v03::TaskPushNotificationConfig>, A2aError> {
    let h = &state.handler;
    let mut out = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = h
            .list_task_push_notification_configs(
                ctx,
                ListTaskPushNotificationConfigsRequest {
                    tenant: String::new(),
                    task_id: task_id.clone(),
                    page_size: 100,
                    page_token,
                },
            )
            .await?;
        out.extend(
            page.configs
                .into_iter()
                .map(convert::task_push_config_to_v03),
        );
        if page.next_page_token.is_empty() {
            return Ok(out);
        }
        page_token = page.next_page_token;
    }
}

/// An error of a streaming method: a stream of that one error, as 0.3
/// servers answer (0.3 clients read a streaming method's answer as events).
fn stream_error(id: &str, e: &A2aError) -> Response {
    let event = (
        None,
        None,
        String::from_utf8(error_body(id, e)).unwrap_or_default(),
    );
    sse_response(futures::stream::iter([event]))
}

fn stream(id: &str, result: Result<IdEventStream, A2aError>) -> Response {
    let events = match result {
        Ok(s) => s,
        Err(e) => return stream_error(id, &e),
    };
    let id = id.to_owned();
    sse_response(events.filter_map(move |(event_id, item)| {
        let item = item.and_then(|ev| match convert::stream_event_to_v03(ev) {
            Some(ev) => result_body(&id, &ev).map(Some),
            None => Ok(None),
        });
        let out = match item {
            Ok(Some(body)) => Some((
                None,
                event_id.map(|e| e.to_string()),
                String::from_utf8(body).unwrap_or_default(),
            )),
            Ok(None) => None,
            Err(e) => Some((
                Some("error"),
                None,
                String::from_utf8(error_body(&id, &e)).unwrap_or_default(),
            )),
        };
        std::future::ready(out)
    }))
}
