//! The HTTP+JSON (REST) binding (spec 11): resource URLs, query parameters
//! for GET/DELETE, `application/a2a+json` bodies, errors as
//! `{"error": {code, status, message, details}}`, and SSE streams.
//!
//! Every route also exists under a `/{tenant}` prefix; the tenant goes into
//! the request's `tenant` field.

use agentwire_types::limits::{ReadLimits, reading};
use agentwire_types::rest_routes::{RestRoute, RouteError};
use agentwire_types::{
    A2aError, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, ErrorKind,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTasksRequest, MEDIA_TYPE, SendMessageRequest,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig, TaskState, Timestamp,
};
use axum::extract::Request;
use axum::extract::State;
use axum::response::Response;
use futures::StreamExt;
use http::{Method, StatusCode};
use serde::de::DeserializeOwned;

use crate::bindings::http::{
    HttpState, call_context, is_json, is_too_large, json_response, query_pairs, read_body,
    sse_response, write_task_answer,
};
use crate::handler::{IdEventStream, SendAnswer};
use crate::observe::CallInfo;

/// Tells the tenant and the route from the method and path with the table
/// shared with the client ([`agentwire_types::rest_routes`]), or an error
/// naming what is wrong (unknown path: 404, known path with another method:
/// 405).
fn resolve(method: &Method, path: &str) -> Result<(String, RestRoute), (StatusCode, String)> {
    RestRoute::parse(method.as_str(), path).map_err(|e| match e {
        RouteError::NotFound => (StatusCode::NOT_FOUND, format!("no A2A operation at {path}")),
        RouteError::MethodNotAllowed => (
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{method} is not allowed on {path}"),
        ),
    })
}

fn error_response(e: &A2aError) -> Response {
    let status =
        StatusCode::from_u16(e.kind.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    error_response_with_status(e, status)
}

/// An error answered with a given HTTP status (405, 413...); `error.code`
/// of the body is that status too (spec 11.6).
fn error_response_with_status(e: &A2aError, status: StatusCode) -> Response {
    let mut body = e.to_http_body();
    body["error"]["code"] = status.as_u16().into();
    let mut response = json_response(
        status,
        MEDIA_TYPE,
        serde_json::to_vec(&body).unwrap_or_default(),
    );
    if let Some(challenge) = crate::bindings::http::challenge(e) {
        response
            .headers_mut()
            .insert(http::header::WWW_AUTHENTICATE, challenge);
    }
    CallInfo::error(e.kind);
    response
}

fn ok_json<T: serde::Serialize>(result: Result<T, A2aError>) -> Response {
    match result.and_then(|v| {
        serde_json::to_vec(&v)
            .map_err(|e| A2aError::internal(format!("could not encode the response: {e}")))
    }) {
        Ok(body) => json_response(StatusCode::OK, MEDIA_TYPE, body),
        Err(e) => error_response(&e),
    }
}

/// A task as the body (`GetTask`, or inside `SendMessage`'s answer),
/// written by the task writer rather than serde.
fn task_json(task: &Task, in_send: bool) -> Response {
    let mut body = Vec::with_capacity(1024);
    if let Err(e) = write_task_answer(&mut body, task, in_send) {
        return error_response(&A2aError::internal(format!(
            "could not encode the response: {e}"
        )));
    }
    let response = json_response(StatusCode::OK, MEDIA_TYPE, body);
    CallInfo::task(&task.id);
    response
}

/// A body as the request type (`{}` when empty), read with the handler's
/// limits ([`agentwire_types::limits::reading`]).
fn parse_body<T: DeserializeOwned + Default>(
    bytes: &[u8],
    limits: &ReadLimits,
) -> Result<T, A2aError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    reading(limits, || serde_json::from_slice(bytes)).map_err(|e| {
        if let Some(limit) = agentwire_types::limits::json_limit_error(bytes, &e) {
            return limit.into_invalid_params();
        }
        if is_json(bytes) {
            A2aError::invalid_params("", e.to_string())
        } else {
            A2aError::new(ErrorKind::ParseError, format!("Invalid JSON payload: {e}"))
        }
    })
}

fn parse_int<T: std::str::FromStr>(field: &str, v: &str) -> Result<T, A2aError> {
    v.trim()
        .parse()
        .map_err(|_| A2aError::invalid_params(field, format!("must be an integer, got {v:?}")))
}

fn parse_bool(field: &str, v: &str) -> Result<bool, A2aError> {
    match v.trim() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(A2aError::invalid_params(
            field,
            format!("must be true or false, got {v:?}"),
        )),
    }
}

/// Query parameters of `GET /tasks` (camelCase, snake_case accepted).
fn list_request(query: &str, tenant: String) -> Result<ListTasksRequest, A2aError> {
    let mut req = ListTasksRequest {
        tenant,
        ..Default::default()
    };
    for (k, v) in query_pairs(query) {
        match k.as_str() {
            "contextId" | "context_id" => req.context_id = v,
            "status" => {
                let state = TaskState::parse(&v).ok_or_else(|| {
                    A2aError::invalid_params(
                        "status",
                        format!("unknown task state {v:?}; use e.g. TASK_STATE_WORKING"),
                    )
                })?;
                req.status = state as i32;
            }
            "pageSize" | "page_size" => req.page_size = Some(parse_int("pageSize", &v)?),
            "pageToken" | "page_token" => req.page_token = v,
            "historyLength" | "history_length" => {
                req.history_length = Some(parse_int("historyLength", &v)?)
            }
            "statusTimestampAfter" | "status_timestamp_after" => {
                req.status_timestamp_after = Some(Timestamp::parse(&v).map_err(|_| {
                    A2aError::invalid_params(
                        "statusTimestampAfter",
                        format!(
                            "must be an ISO 8601 timestamp such as 2025-11-09T10:30:00Z, got {v:?}"
                        ),
                    )
                })?);
            }
            "includeArtifacts" | "include_artifacts" => {
                req.include_artifacts = Some(parse_bool("includeArtifacts", &v)?);
            }
            "tenant" if req.tenant.is_empty() => req.tenant = v,
            _ => {}
        }
    }
    Ok(req)
}

/// Any request of the binding.
pub(crate) async fn handle(State(state): State<HttpState>, request: Request) -> Response {
    // The parts are moved out (the `HeaderMap` and `Uri` extractors clone).
    let (parts, body) = request.into_parts();
    let (method, uri, headers, extensions) =
        (parts.method, parts.uri, parts.headers, parts.extensions);
    // A gRPC call that reached no gRPC service (the 0.3 service
    // `a2a.v1.A2AService`, or any other): a gRPC status, not an HTTP error
    // a gRPC client cannot read.
    if is_grpc(&headers) {
        return grpc_unimplemented(uri.path());
    }
    // A 0.3 route (`/v1/...` without a 1.x version): the compatibility
    // layer's.
    if uri.path().starts_with("/v1/") {
        let ctx = call_context(headers.clone(), &uri, &extensions);
        if crate::compat::v0_3::rest::is_v03_request(&method, &uri, &ctx) {
            let bytes = match read_body(body, state.max_body_bytes).await {
                Ok(b) => b,
                Err(e) if is_too_large(&e) => {
                    return error_response_with_status(&e, StatusCode::PAYLOAD_TOO_LARGE);
                }
                Err(e) => return error_response(&e),
            };
            return Box::pin(crate::compat::v0_3::rest::handle(
                &state, method, uri, ctx, &bytes,
            ))
            .await;
        }
    }
    let (tenant, route) = match resolve(&method, uri.path()) {
        Ok(r) => r,
        Err((status, message)) => {
            let e = A2aError::new(ErrorKind::MethodNotFound, message);
            let response = error_response_with_status(&e, status);
            CallInfo::operation("rest", "");
            return response;
        }
    };
    let operation = route.template().operation;
    let task_id = route_task_id(&route).map(Box::<str>::from);
    let response = answer(state, route, tenant, uri, headers, extensions, body).await;
    CallInfo::operation("rest", operation);
    if let Some(id) = task_id {
        CallInfo::task(&id);
    }
    response
}

/// The task a route names in its path.
fn route_task_id(route: &RestRoute) -> Option<&str> {
    match route {
        RestRoute::GetTask { id }
        | RestRoute::CancelTask { id }
        | RestRoute::SubscribeToTask { id } => Some(id),
        RestRoute::CreateTaskPushNotificationConfig { task_id }
        | RestRoute::ListTaskPushNotificationConfigs { task_id }
        | RestRoute::GetTaskPushNotificationConfig { task_id, .. }
        | RestRoute::DeleteTaskPushNotificationConfig { task_id, .. } => Some(task_id),
        _ => None,
    }
}

/// The answer to a request for `route`.
async fn answer(
    state: HttpState,
    route: RestRoute,
    tenant: String,
    uri: http::Uri,
    headers: http::HeaderMap,
    extensions: http::Extensions,
    body: axum::body::Body,
) -> Response {
    let query = uri.query().unwrap_or_default().to_owned();
    let bytes = match read_body(body, state.max_body_bytes).await {
        Ok(b) => b,
        Err(e) if is_too_large(&e) => {
            return error_response_with_status(&e, StatusCode::PAYLOAD_TOO_LARGE);
        }
        Err(e) => return error_response(&e),
    };
    let ctx = call_context(headers, &uri, &extensions);
    let h = &state.handler;
    let limits = h.read_limits();
    let history = || -> Result<Option<i32>, A2aError> {
        query_pairs(&query)
            .find(|(k, _)| k == "historyLength" || k == "history_length")
            .map(|(_, v)| parse_int("historyLength", &v))
            .transpose()
    };
    // A2A v1.1 draft: `GetTask`'s long-poll.
    let current_generation = || -> Result<Option<i64>, A2aError> {
        query_pairs(&query)
            .find(|(k, _)| k == "currentGeneration" || k == "current_generation")
            .map(|(_, v)| parse_int("currentGeneration", &v))
            .transpose()
    };
    match route {
        RestRoute::SendMessage => match parse_body::<SendMessageRequest>(&bytes, &limits) {
            Ok(mut req) => {
                if req.tenant.is_empty() {
                    req.tenant = tenant;
                }
                match h.send_answer(&ctx, req).await {
                    Ok(SendAnswer::Task(task)) => task_json(&task, true),
                    other => ok_json(other),
                }
            }
            Err(e) => error_response(&e),
        },
        RestRoute::SendStreamingMessage => {
            match parse_body::<SendMessageRequest>(&bytes, &limits) {
                Ok(mut req) => {
                    if req.tenant.is_empty() {
                        req.tenant = tenant;
                    }
                    stream(h.send_streaming_message_with_ids(&ctx, req).await)
                }
                Err(e) => error_response(&e),
            }
        }
        RestRoute::ListTasks => match list_request(&query, tenant) {
            Ok(req) => ok_json(h.list_tasks(&ctx, req).await),
            Err(e) => error_response(&e),
        },
        RestRoute::GetTask { id } => match history().and_then(|h| Ok((h, current_generation()?))) {
            Ok((history_length, current_generation)) => match h
                .get_task(
                    &ctx,
                    GetTaskRequest {
                        current_generation,
                        tenant,
                        id,
                        history_length,
                    },
                )
                .await
            {
                Ok(task) => task_json(&task, false),
                Err(e) => error_response(&e),
            },
            Err(e) => error_response(&e),
        },
        RestRoute::CancelTask { id } => match parse_body::<CancelTaskRequest>(&bytes, &limits) {
            Ok(mut req) => {
                req.id = id;
                req.tenant = tenant;
                ok_json(h.cancel_task(&ctx, req).await)
            }
            Err(e) => error_response(&e),
        },
        RestRoute::SubscribeToTask { id } => stream(
            h.subscribe_to_task_with_ids(&ctx, SubscribeToTaskRequest { tenant, id })
                .await,
        ),
        RestRoute::CreateTaskPushNotificationConfig { task_id } => {
            match parse_body::<TaskPushNotificationConfig>(&bytes, &limits) {
                Ok(mut req) => {
                    req.task_id = task_id;
                    req.tenant = tenant;
                    ok_json(h.create_task_push_notification_config(&ctx, req).await)
                }
                Err(e) => error_response(&e),
            }
        }
        RestRoute::ListTaskPushNotificationConfigs { task_id } => {
            let mut req = ListTaskPushNotificationConfigsRequest {
                tenant,
                task_id,
                ..Default::default()
            };
            for (k, v) in query_pairs(&query) {
                match k.as_str() {
                    "pageSize" | "page_size" => match parse_int("pageSize", &v) {
                        Ok(n) => req.page_size = n,
                        Err(e) => return error_response(&e),
                    },
                    "pageToken" | "page_token" => req.page_token = v,
                    _ => {}
                }
            }
            ok_json(h.list_task_push_notification_configs(&ctx, req).await)
        }
        RestRoute::GetTaskPushNotificationConfig { task_id, id } => ok_json(
            h.get_task_push_notification_config(
                &ctx,
                GetTaskPushNotificationConfigRequest {
                    tenant,
                    task_id,
                    id,
                },
            )
            .await,
        ),
        RestRoute::DeleteTaskPushNotificationConfig { task_id, id } => {
            match h
                .delete_task_push_notification_config(
                    &ctx,
                    DeleteTaskPushNotificationConfigRequest {
                        tenant,
                        task_id,
                        id,
                    },
                )
                .await
            {
                Ok(()) => json_response(StatusCode::OK, MEDIA_TYPE, b"{}".to_vec()),
                Err(e) => error_response(&e),
            }
        }
        RestRoute::GetExtendedAgentCard => ok_json(
            h.get_extended_agent_card(&ctx, GetExtendedAgentCardRequest { tenant })
                .await,
        ),
    }
}

/// Whether a request is a gRPC call (`Content-Type: application/grpc...`).
fn is_grpc(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"))
}

/// `UNIMPLEMENTED` for a gRPC method of a service this server does not
/// serve, naming the one it does.
fn grpc_unimplemented(path: &str) -> Response {
    let service = path
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or_default();
    let message = if service == "a2a.v1.A2AService" {
        "the A2A 0.3 gRPC service a2a.v1.A2AService is not served here: this server does \
         not serve gRPC"
            .to_owned()
    } else {
        format!("no gRPC service {service:?} here; this agent serves lf.a2a.v1.A2AService")
    };
    tonic::Status::unimplemented(message).into_http()
}

fn stream(result: Result<IdEventStream, A2aError>) -> Response {
    let events = match result {
        Ok(s) => s,
        Err(e) => return error_response(&e),
    };
    sse_response(events.map(|(event_id, item)| {
        match item.and_then(|ev| {
            serde_json::to_string(&ev)
                .map_err(|e| A2aError::internal(format!("could not encode an event: {e}")))
        }) {
            Ok(data) => (None, event_id.map(|e| e.to_string()), data),
            Err(e) => (Some("error"), None, e.to_http_body().to_string()),
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        // The table itself is tested in agentwire-types; here the statuses.
        assert_eq!(
            resolve(&Method::POST, "/acme/tasks/x:cancel").unwrap(),
            ("acme".into(), RestRoute::CancelTask { id: "x".into() })
        );
        // `+` is a plus in a path, and an encoded `:` belongs to the id (the
        // client encodes a `:` inside an id): the task `a+b:cancel`.
        assert_eq!(
            resolve(&Method::GET, "/tasks/a+b%3Acancel").unwrap(),
            (
                String::new(),
                RestRoute::GetTask {
                    id: "a+b:cancel".into()
                }
            )
        );
        assert_eq!(
            resolve(&Method::GET, "/message:send").unwrap_err().0,
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(
            resolve(&Method::GET, "/nothing/here/at/all").unwrap_err().0,
            StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn list_query() {
        let r = list_request(
            "contextId=c&status=TASK_STATE_WORKING&pageSize=10&includeArtifacts=true&statusTimestampAfter=2025-11-09T10:30:00Z",
            String::new(),
        )
        .unwrap();
        assert_eq!(r.context_id, "c");
        assert_eq!(r.status(), TaskState::Working);
        assert_eq!(r.page_size, Some(10));
        assert_eq!(r.include_artifacts, Some(true));
        assert!(r.status_timestamp_after.is_some());
        let e = list_request("status=TASK_STATE_RUNNING", String::new()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidParams);
        assert!(list_request("pageSize=ten", String::new()).is_err());
    }
}
