//! The 0.3 HTTP+JSON routes (`/v1/message:send`, `/v1/tasks/{id}`...), on
//! the same port as the 1.0 ones. Their bodies, and the conversions of
//! those to the JSON-RPC form, are in [`agentwire_types::v0_3::rest`]
//! (the client's 0.3 transport uses them too); what differs from the
//! JSON-RPC form is written down there.

pub(crate) use agentwire_types::v0_3::rest::*;
use agentwire_types::{A2aError, ErrorKind};
use axum::response::Response;
use futures::StreamExt;
use http::{Method, StatusCode, Uri};
use serde::Serialize;

use super::{convert, error_object, jsonrpc, types as v03};
use crate::bindings::http::{HttpState, is_json, json_response, query_pairs, sse_response};
use crate::handler::{CallContext, IdEventStream, SendAnswer};

// ------------------------------------------------------------ the routes

/// A 0.3 route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    Send,
    Stream,
    Get(String),
    Cancel(String),
    Subscribe(String),
    CreatePush(String),
    ListPush(String),
    GetPush(String, String),
    DeletePush(String, String),
    Card,
}

fn decode_segment(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// The 0.3 route of a method and path under `/v1/`: `None` when the path
/// is none of 0.3's, `Some(Err(()))` for a 0.3 path with another method.
pub(crate) fn route(method: &Method, path: &str) -> Option<Result<Route, ()>> {
    let rest = path.strip_prefix("/v1/")?;
    let segs: Vec<&str> = rest.split('/').collect();
    let m = |ok: bool, r: Route| if ok { Ok(r) } else { Err(()) };
    let get = method == Method::GET;
    let post = method == Method::POST;
    Some(match segs.as_slice() {
        ["message:send"] => m(post, Route::Send),
        ["message:stream"] => m(post, Route::Stream),
        ["card"] => m(get, Route::Card),
        ["tasks", id] => {
            // An encoded `:` belongs to the id; a plain one starts an action.
            if let Some(id) = id.strip_suffix(":cancel") {
                m(post, Route::Cancel(decode_segment(id)))
            } else if let Some(id) = id.strip_suffix(":subscribe") {
                m(get || post, Route::Subscribe(decode_segment(id)))
            } else if id.is_empty() {
                return None;
            } else {
                m(get, Route::Get(decode_segment(id)))
            }
        }
        ["tasks", id, "pushNotificationConfigs"] if !id.is_empty() => {
            let id = decode_segment(id);
            if post {
                Ok(Route::CreatePush(id))
            } else {
                m(get, Route::ListPush(id))
            }
        }
        ["tasks", id, "pushNotificationConfigs", cid] if !id.is_empty() && !cid.is_empty() => {
            let (id, cid) = (decode_segment(id), decode_segment(cid));
            if method == Method::DELETE {
                Ok(Route::DeletePush(id, cid))
            } else {
                m(get, Route::GetPush(id, cid))
            }
        }
        _ => return None,
    })
}

/// Whether a request for a `/v1/` path is a 0.3 one: it names no version
/// or a 0.x one (with `A2A-Version: 1.0`, `/v1/...` is a 1.0 route of the
/// tenant `v1`).
pub(crate) fn is_v03_request(method: &Method, uri: &Uri, ctx: &CallContext) -> bool {
    !crate::handler::requested_version(ctx).starts_with("1.") && route(method, uri.path()).is_some()
}

/// The HTTP status of an error for a 0.3 client (the 0.3 servers' table).
fn status_of(kind: ErrorKind) -> StatusCode {
    let code = match kind {
        ErrorKind::ParseError | ErrorKind::InvalidRequest => 400,
        ErrorKind::MethodNotFound | ErrorKind::TaskNotFound => 404,
        ErrorKind::InvalidParams => 422,
        ErrorKind::TaskNotCancelable | ErrorKind::TaskGenerationMismatch => 409,
        ErrorKind::PushNotificationNotSupported | ErrorKind::UnsupportedOperation => 501,
        ErrorKind::ContentTypeNotSupported => 415,
        ErrorKind::InvalidAgentResponse => 502,
        ErrorKind::ExtendedAgentCardNotConfigured => 404,
        ErrorKind::ExtensionSupportRequired | ErrorKind::VersionNotSupported => 400,
        ErrorKind::Unauthenticated => 401,
        ErrorKind::PermissionDenied => 403,
        ErrorKind::Unavailable => 503,
        _ => 500,
    };
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

fn error_response(e: &A2aError) -> Response {
    json_response(
        status_of(e.kind),
        "application/json",
        serde_json::to_vec(&error_object(e)).unwrap_or_default(),
    )
}

fn ok<T: Serialize>(result: Result<T, A2aError>) -> Response {
    match result.and_then(|v| {
        serde_json::to_vec(&v)
            .map_err(|e| A2aError::internal(format!("could not encode the response: {e}")))
    }) {
        Ok(body) => json_response(StatusCode::OK, "application/json", body),
        Err(e) => error_response(&e),
    }
}

fn body<T: serde::de::DeserializeOwned + Default>(bytes: &[u8]) -> Result<T, A2aError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(bytes).map_err(|e| {
        if is_json(bytes) {
            A2aError::invalid_params("", e.to_string())
        } else {
            A2aError::new(ErrorKind::ParseError, format!("Invalid JSON payload: {e}"))
        }
    })
}

/// Read with the handler's limits ([`agentwire_types::limits::reading`]).
fn required_body<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    limits: &agentwire_types::limits::ReadLimits,
) -> Result<T, A2aError> {
    agentwire_types::limits::reading(limits, || serde_json::from_slice(bytes)).map_err(|e| {
        if is_json(bytes) {
            A2aError::invalid_params("", e.to_string())
        } else {
            A2aError::new(ErrorKind::ParseError, format!("Invalid JSON payload: {e}"))
        }
    })
}

/// The body of `POST /v1/tasks/{id}/pushNotificationConfigs`, in either of
/// the two forms 0.3 clients send. The 0.3 protobuf's HTTP rule says the
/// body is the `config` field alone (a `TaskPushNotificationConfig`,
/// `{"name", "pushNotificationConfig"}`), which is what the official
/// JavaScript SDK 0.3 client sends; the official Python SDK 0.3 client
/// sends the whole `CreateTaskPushNotificationConfigRequest`
/// (`{"parent", "configId", "config"}`). A body with a top-level
/// `pushNotificationConfig` and no `config` is the first form.
pub(crate) fn create_push_body(bytes: &[u8]) -> Result<CreatePushConfigRequest, A2aError> {
    let value: serde_json::Value = body(bytes)?;
    if value.is_null() {
        return Ok(CreatePushConfigRequest::default());
    }
    let is_config_alone = value.as_object().is_some_and(|o| {
        !o.contains_key("config")
            && (o.contains_key("pushNotificationConfig")
                || o.contains_key("push_notification_config"))
    });
    if is_config_alone {
        let config: TaskPushConfig = serde_json::from_value(value)
            .map_err(|e| A2aError::invalid_params("", e.to_string()))?;
        Ok(CreatePushConfigRequest {
            config: Some(config),
            ..Default::default()
        })
    } else {
        serde_json::from_value(value).map_err(|e| A2aError::invalid_params("", e.to_string()))
    }
}

fn stream(result: Result<IdEventStream, A2aError>) -> Response {
    let events = match result {
        Ok(s) => s,
        Err(e) => return error_response(&e),
    };
    sse_response(events.filter_map(|(event_id, item)| {
        let out = match item.map(convert::stream_event_to_v03) {
            Ok(Some(ev)) => match serde_json::to_string(&event_to(ev)) {
                Ok(data) => Some((None, event_id.map(|e| e.to_string()), data)),
                Err(e) => Some((
                    Some("error"),
                    None,
                    error_object(&A2aError::internal(format!(
                        "could not encode an event: {e}"
                    )))
                    .to_string(),
                )),
            },
            Ok(None) => None,
            Err(e) => Some((Some("error"), None, error_object(&e).to_string())),
        };
        std::future::ready(out)
    }))
}

/// One 0.3 HTTP+JSON request (a path for which [`is_v03_request`] holds).
pub(crate) async fn handle(
    state: &HttpState,
    method: Method,
    uri: Uri,
    ctx: CallContext,
    bytes: &[u8],
) -> Response {
    let h = &state.handler;
    if crate::handler::requested_version(&ctx) != super::V03 || !h.serves_v03() {
        let requested = ctx
            .headers
            .get(&crate::handler::A2A_VERSION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        return error_response(&h.version_not_supported(&requested));
    }
    let route = match route(&method, uri.path()) {
        Some(Ok(r)) => r,
        Some(Err(())) => {
            return error_response(&A2aError::new(
                ErrorKind::MethodNotFound,
                format!("{method} is not allowed on {}", uri.path()),
            ));
        }
        None => {
            return error_response(&A2aError::new(
                ErrorKind::MethodNotFound,
                format!("no A2A 0.3 operation at {}", uri.path()),
            ));
        }
    };
    let ctx = super::as_v1_call(ctx);
    let query = uri.query().unwrap_or_default();
    match route {
        Route::Send => {
            let req = match required_body::<SendRequest>(bytes, &state.handler.read_limits())
                .and_then(send_from)
                .and_then(convert::send_params_to_v1)
            {
                Ok(r) => r,
                Err(e) => return error_response(&e),
            };
            let answer = Box::pin(h.send_answer(&ctx, req)).await;
            ok(answer.and_then(|a| {
                let result = match a {
                    SendAnswer::Task(task) => {
                        v03::SendResult::Task(convert::shared_task_to_v03(task))
                    }
                    SendAnswer::Response(r) => convert::send_result_to_v03(r).ok_or_else(|| {
                        A2aError::internal("the agent answered with neither a task nor a message")
                    })?,
                };
                Ok(match result {
                    v03::SendResult::Task(t) => StreamResponse {
                        task: Some(task_to(t)),
                        ..Default::default()
                    },
                    v03::SendResult::Message(m) => StreamResponse {
                        message: Some(message_to(m)),
                        ..Default::default()
                    },
                })
            }))
        }
        Route::Stream => {
            let req = match required_body::<SendRequest>(bytes, &state.handler.read_limits())
                .and_then(send_from)
                .and_then(convert::send_params_to_v1)
            {
                Ok(r) => r,
                Err(e) => return error_response(&e),
            };
            stream(Box::pin(h.send_streaming_message_with_ids(&ctx, req)).await)
        }
        Route::Get(id) => {
            let mut history_length = None;
            for (k, v) in query_pairs(query) {
                if k == "historyLength" || k == "history_length" {
                    match v.trim().parse::<i32>() {
                        Ok(n) => history_length = Some(n),
                        Err(_) => {
                            return error_response(&A2aError::invalid_params(
                                "historyLength",
                                format!("must be an integer, got {v:?}"),
                            ));
                        }
                    }
                }
            }
            let req = convert::get_task_to_v1(v03::TaskQueryParams {
                id,
                history_length,
                metadata: None,
            });
            ok(Box::pin(h.get_task(&ctx, req))
                .await
                .map(|t| task_to(convert::task_to_v03(t))))
        }
        Route::Cancel(id) => {
            let req = convert::cancel_to_v1(v03::TaskIdParams { id, metadata: None });
            ok(Box::pin(h.cancel_task(&ctx, req))
                .await
                .map(|t| task_to(convert::task_to_v03(t))))
        }
        Route::Subscribe(id) => {
            let req = convert::subscribe_to_v1(v03::TaskIdParams { id, metadata: None });
            stream(Box::pin(h.subscribe_to_task_with_ids(&ctx, req)).await)
        }
        Route::CreatePush(task_id) => {
            let req = match create_push_body(bytes) {
                Ok(r) => r,
                Err(e) => return error_response(&e),
            };
            let mut config = req.config.unwrap_or_default();
            if config.push_notification_config.id.is_empty() {
                config.push_notification_config.id = req.config_id;
            }
            let config = task_push_from(task_id, config);
            ok(Box::pin(jsonrpc::push_set(state, &ctx, config))
                .await
                .map(task_push_to))
        }
        Route::GetPush(task_id, config_id) => {
            let req = v03::PushConfigParams {
                id: task_id,
                push_notification_config_id: Some(config_id),
                metadata: None,
            };
            ok(Box::pin(jsonrpc::push_get(state, &ctx, req))
                .await
                .map(task_push_to))
        }
        Route::ListPush(task_id) => ok(Box::pin(jsonrpc::push_list(state, &ctx, task_id))
            .await
            .map(|all| ListPushConfigsResponse {
                configs: all.into_iter().map(task_push_to).collect(),
                next_page_token: String::new(),
            })),
        Route::DeletePush(task_id, id) => {
            let del = agentwire_types::DeleteTaskPushNotificationConfigRequest {
                tenant: String::new(),
                task_id,
                id,
            };
            ok(Box::pin(h.delete_task_push_notification_config(&ctx, del))
                .await
                .map(|()| serde_json::json!({})))
        }
        Route::Card => {
            let req = agentwire_types::GetExtendedAgentCardRequest::default();
            match Box::pin(h.get_extended_agent_card(&ctx, req)).await {
                Ok(card) => json_response(
                    StatusCode::OK,
                    "application/json",
                    super::card::v03_card(h, &card, true),
                ),
                Err(e) if e.kind == ErrorKind::UnsupportedOperation => error_response(
                    &A2aError::new(ErrorKind::ExtendedAgentCardNotConfigured, e.message),
                ),
                Err(e) => error_response(&e),
            }
        }
    }
}
