//! The JSON-RPC 2.0 binding (spec 9): `POST` a request object, get a
//! response object; the two streaming methods answer with Server-Sent
//! Events, each event a JSON-RPC response carrying the request's id.
//!
//! Errors are answered with HTTP 200 and a JSON-RPC `error` object whose
//! `data` holds a `google.rpc.ErrorInfo` (spec 9.5).

use std::borrow::Cow;

use agentwire_types::jsonrpc::methods;
use agentwire_types::limits::{ReadLimits, reading};
use agentwire_types::{A2aError, ErrorKind, SendMessageRequest, Task};
use axum::extract::{Request, State};
use axum::response::Response;
use futures::StreamExt;
use http::StatusCode;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use crate::bindings::http::{
    HttpState, call_context, is_json, is_too_large, json_response, read_body, sse_response,
    write_task_answer,
};
use crate::handler::{CallContext, IdEventStream, SendAnswer};
use crate::observe::CallInfo;

/// A request object as read: each member's JSON text, the params of a
/// `SendMessage` read already when the method came before them.
struct Envelope<'a> {
    jsonrpc: Option<&'a str>,
    id: Option<&'a str>,
    method: Option<&'a str>,
    params: Params<'a>,
}

/// The params of a request object.
enum Params<'a> {
    /// Their JSON text (absent: `None`), read when the method is known.
    Text(Option<&'a RawValue>),
    /// A `SendMessage`'s params, read while the envelope was: no second
    /// pass over the message (which is most of the body).
    Send(Box<SendMessageRequest>),
}

/// The envelope read by serde's derive: what decides the errors of a
/// request object that [`Envelope::read`] does not take in one pass.
#[derive(Deserialize)]
struct TextEnvelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<&'a RawValue>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

impl<'a> Envelope<'a> {
    /// Reads a request object. The common case, `"method":"SendMessage"`
    /// before `"params"`, is read in one pass; anything else that pass
    /// does not take (another order, a duplicate member, params that are
    /// not a valid `SendMessageRequest`, bad JSON) is read again as text
    /// first, which is what decides the error of a bad request.
    fn read(bytes: &'a [u8]) -> serde_json::Result<Self> {
        if let Some(envelope) = Self::read_plain(bytes) {
            return Ok(envelope);
        }
        if let Ok(envelope) = serde_json::from_slice::<OnePass<'a>>(bytes) {
            return Ok(envelope.0);
        }
        let e: TextEnvelope<'a> = serde_json::from_slice(bytes)?;
        Ok(Self {
            jsonrpc: e.jsonrpc.map(RawValue::get),
            id: e.id.map(RawValue::get),
            method: e.method.map(RawValue::get),
            params: Params::Text(e.params),
        })
    }

    /// The commonest request of all, read without serde: `SendMessage`
    /// with params of the common shape
    /// ([`agentwire_types::json_reader`]), every member once, the method
    /// before the params, no escapes. `None` for anything else.
    fn read_plain(bytes: &'a [u8]) -> Option<Self> {
        let mut r = agentwire_types::json_reader::Reader::new(std::str::from_utf8(bytes).ok()?);
        r.eat(b'{')?;
        let (mut version, mut id, mut method, mut params) = (false, None, false, None);
        loop {
            match r.plain_string()? {
                "jsonrpc" if !version => {
                    r.eat(b':')?;
                    version = r.plain_string()? == "2.0";
                    if !version {
                        return None;
                    }
                }
                "id" if id.is_none() => {
                    r.eat(b':')?;
                    // (A `null` id is refused: left to the text path.)
                    id = Some(r.plain_id().filter(|id| *id != "null")?);
                }
                "method" if !method => {
                    r.eat(b':')?;
                    method = r.plain_string()? == methods::SEND_MESSAGE;
                    if !method {
                        return None;
                    }
                }
                "params" if method && params.is_none() => {
                    r.eat(b':')?;
                    params = Some(r.send_message_request()?);
                }
                _ => return None,
            }
            match r.peek()? {
                b',' => r.eat(b',')?,
                b'}' => {
                    r.eat(b'}')?;
                    break;
                }
                _ => return None,
            }
        }
        if !r.at_end() || !version {
            return None;
        }
        Some(Self {
            jsonrpc: Some("\"2.0\""),
            id: Some(id?),
            method: Some("\"SendMessage\""),
            params: Params::Send(Box::new(params?)),
        })
    }
}

/// [`Envelope`] in one pass (see [`Envelope::read`]).
struct OnePass<'a>(Envelope<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for OnePass<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = OnePass<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON-RPC request object")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut map: M,
            ) -> Result<Self::Value, M::Error> {
                use serde::de::Error;
                let (mut jsonrpc, mut id, mut method) = (None, None, None);
                let mut params: Option<Params<'a>> = None;
                // Members seen (a repeated one is refused, as serde's derive
                // does, even after a `null`).
                let mut seen = [false; 3];
                while let Some(key) = map.next_key::<&'de str>()? {
                    let (slot, i) = match key {
                        "jsonrpc" => (&mut jsonrpc, 0),
                        "id" => (&mut id, 1),
                        "method" => (&mut method, 2),
                        "params" => {
                            if params.is_some() {
                                return Err(M::Error::custom("duplicate params"));
                            }
                            let send = method.is_some_and(|m: &str| {
                                m.strip_prefix('"').and_then(|m| m.strip_suffix('"'))
                                    == Some(methods::SEND_MESSAGE)
                            });
                            params = Some(if send {
                                Params::Send(Box::new(map.next_value()?))
                            } else {
                                Params::Text(Some(map.next_value()?))
                            });
                            continue;
                        }
                        _ => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                            continue;
                        }
                    };
                    if std::mem::replace(&mut seen[i], true) {
                        return Err(M::Error::custom("duplicate member"));
                    }
                    // `null` is an absent member (as for an `Option`).
                    let text = map.next_value::<&'de RawValue>()?.get();
                    *slot = (text != "null").then_some(text);
                }
                Ok(OnePass(Envelope {
                    jsonrpc,
                    id,
                    method,
                    params: params.unwrap_or(Params::Text(None)),
                }))
            }
        }
        d.deserialize_map(Visitor(std::marker::PhantomData))
    }
}

const NULL_ID: &str = "null";

/// Writes `{"jsonrpc":"2.0","id":<id>,"result":<result>}`.
fn result_body<T: serde::Serialize>(id: &str, result: &T) -> Result<Vec<u8>, A2aError> {
    result_body_with(id, 256, |out| serde_json::to_writer(out, result))
}

/// [`result_body`] with the result written by `write`.
fn result_body_with(
    id: &str,
    capacity: usize,
    write: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>,
) -> Result<Vec<u8>, A2aError> {
    let mut out = Vec::with_capacity(capacity);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b",\"result\":");
    write(&mut out).map_err(|e| A2aError::internal(format!("could not encode the result: {e}")))?;
    out.push(b'}');
    Ok(out)
}

/// A task as the result (`GetTask`, or inside `SendMessage`'s answer),
/// written by the task writer rather than serde.
fn task_response(id: &str, task: &Task, in_send: bool) -> Response {
    let body = result_body_with(id, 1024, |out| write_task_answer(out, task, in_send));
    let response = match body {
        Ok(body) => respond(body),
        Err(e) => error_response(id, &e),
    };
    CallInfo::task(&task.id);
    response
}

fn error_body(id: &str, error: &A2aError) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b",\"error\":");
    // Serializing a serde_json::Value cannot fail.
    let _ = serde_json::to_writer(&mut out, &error.to_jsonrpc_error());
    out.push(b'}');
    out
}

fn respond(body: Vec<u8>) -> Response {
    json_response(StatusCode::OK, "application/json", body)
}

fn error_response(id: &str, error: &A2aError) -> Response {
    let mut response = respond(error_body(id, error));
    if let Some(challenge) = crate::bindings::http::challenge(error) {
        // JSON-RPC answers with its own error code (-31401 / -31403); the
        // challenge comes along as HTTP clients expect it.
        response
            .headers_mut()
            .insert(http::header::WWW_AUTHENTICATE, challenge);
    }
    CallInfo::error(error.kind);
    response
}

/// The operation a method names (empty for none).
fn operation_name(method: &str) -> &'static str {
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

/// The params of a method as the request type (`{}` when absent), read
/// with the handler's limits ([`agentwire_types::limits::reading`]).
fn params<T: DeserializeOwned + Default>(
    params: Option<&RawValue>,
    limits: &ReadLimits,
) -> Result<T, A2aError> {
    match params {
        None => Ok(T::default()),
        Some(raw) if raw.get() == "null" => Ok(T::default()),
        Some(raw) => reading(limits, || serde_json::from_str(raw.get())).map_err(|e| {
            if let Some(limit) = agentwire_types::limits::json_limit_error(raw.get().as_bytes(), &e)
            {
                return limit.into_invalid_params();
            }
            if raw.get().trim_start().starts_with('{') {
                A2aError::invalid_params("params", e.to_string())
            } else {
                A2aError::invalid_params("params", "params must be an object")
            }
        }),
    }
}

/// `POST /`: one JSON-RPC request (as routed by axum).
pub(crate) async fn handle(State(state): State<HttpState>, request: Request) -> Response {
    // The parts are moved out (the `HeaderMap` and `Uri` extractors clone).
    let (parts, body) = request.into_parts();
    serve(
        &state,
        call_context(parts.headers, &parts.uri, &parts.extensions),
        body,
    )
    .await
}

/// One JSON-RPC request, with any body type: the accept loop calls this
/// directly for `POST /` (no routing, no boxed body), with the call context
/// already taken from the request's head.
// Not an `async fn`, which would keep its arguments twice in its future
// (see `RequestHandler::send_message`).
#[allow(clippy::manual_async_fn)]
pub(crate) fn serve<B>(
    state: &HttpState,
    ctx: CallContext,
    body: B,
) -> impl Future<Output = Response> + Send + '_
where
    B: hyper::body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    async move {
        let mut operation = "";
        let response = answer(state, ctx, body, &mut operation).await;
        CallInfo::operation("jsonrpc", operation);
        response
    }
}

/// The answer of [`serve`], noting the operation the request names.
// (Not an `async fn`, as `serve`.)
#[allow(clippy::manual_async_fn)]
fn answer<'a, B>(
    state: &'a HttpState,
    ctx: CallContext,
    body: B,
    operation: &'a mut &'static str,
) -> impl Future<Output = Response> + Send + 'a
where
    B: hyper::body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    async move {
        let bytes = match read_body(body, state.max_body_bytes).await {
            Ok(b) => b,
            // Refused before it is parsed: the JSON-RPC error object, with
            // the HTTP status of a body too large.
            Err(e) if is_too_large(&e) => {
                let response = json_response(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "application/json",
                    error_body(NULL_ID, &e),
                );
                CallInfo::error(e.kind);
                return response;
            }
            Err(e) => return error_response(NULL_ID, &e),
        };
        // Read with the handler's limits: a list or a metadata object over
        // one is refused at its first item over it, before the rest is
        // built.
        let limits = state.handler.read_limits();
        // A batch (a JSON array) is refused before it is read: serde would
        // take an array of three items for the envelope's three first
        // members, in order.
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') && is_json(&bytes) {
            return error_response(
                NULL_ID,
                &A2aError::new(
                    ErrorKind::InvalidRequest,
                    "batch requests are not supported; send one request object",
                ),
            );
        }
        let envelope = match reading(&limits, || Envelope::read(&bytes)) {
            Ok(e) => e,
            Err(e) if is_json(&bytes) => {
                return error_response(
                    NULL_ID,
                    &A2aError::new(
                        ErrorKind::InvalidRequest,
                        format!("not a JSON-RPC request object: {e}"),
                    ),
                );
            }
            Err(e) => {
                return error_response(
                    NULL_ID,
                    &A2aError::new(ErrorKind::ParseError, format!("Invalid JSON payload: {e}")),
                );
            }
        };
        let id = match envelope.id {
            Some(id)
                if id.starts_with('"')
                    || id == "null"
                    || id.starts_with('-')
                    || id.as_bytes()[0].is_ascii_digit() =>
            {
                id
            }
            Some(_) => {
                return error_response(
                    NULL_ID,
                    &A2aError::new(
                        ErrorKind::InvalidRequest,
                        "id must be a string, a number or null",
                    ),
                );
            }
            None => {
                return error_response(
                    NULL_ID,
                    &A2aError::new(
                        ErrorKind::InvalidRequest,
                        "id is required (notifications are not supported)",
                    ),
                );
            }
        };
        if envelope.jsonrpc != Some("\"2.0\"") {
            return error_response(
                id,
                &A2aError::new(ErrorKind::InvalidRequest, "jsonrpc must be \"2.0\""),
            );
        }
        // Borrowed from the body unless it has escapes.
        let method: Cow<'_, str> = match envelope.method.map(|m| {
            serde_json::from_str::<&str>(m)
                .map(Cow::Borrowed)
                .or_else(|_| serde_json::from_str::<String>(m).map(Cow::Owned))
        }) {
            Some(Ok(m)) => m,
            _ => {
                return error_response(
                    id,
                    &A2aError::new(ErrorKind::InvalidRequest, "method must be a string"),
                );
            }
        };
        *operation = operation_name(&method);
        // A 0.3 method: the compatibility layer's (it checks the version).
        let p = match envelope.params {
            Params::Text(p) => p,
            Params::Send(req) if &*method == methods::SEND_MESSAGE => {
                return match Box::pin(state.handler.send_answer(&ctx, *req)).await {
                    Ok(SendAnswer::Task(task)) => task_response(id, &task, true),
                    other => finish(id, other),
                };
            }
            // (Read in one pass only for that method.)
            Params::Send(_) => None,
        };
        if crate::compat::v0_3::jsonrpc::is_v03_method(&method) {
            return Box::pin(crate::compat::v0_3::serve_jsonrpc(
                state, ctx, id, &method, p,
            ))
            .await;
        }
        let h = &state.handler;
        // Each method's future is boxed on its own: the future of this
        // function (which axum boxes) stays small instead of being as large as
        // the largest method's.
        macro_rules! unary {
            ($call:ident) => {
                match params(p, &limits) {
                    Ok(req) => finish(id, Box::pin(h.$call(&ctx, req)).await),
                    Err(e) => error_response(id, &e),
                }
            };
        }
        match &*method {
            methods::SEND_MESSAGE => match params(p, &limits) {
                Ok(req) => match Box::pin(h.send_answer(&ctx, req)).await {
                    Ok(SendAnswer::Task(task)) => task_response(id, &task, true),
                    other => finish(id, other),
                },
                Err(e) => error_response(id, &e),
            },
            methods::GET_TASK => match params(p, &limits) {
                Ok(req) => match Box::pin(h.get_task(&ctx, req)).await {
                    Ok(task) => task_response(id, &task, false),
                    Err(e) => error_response(id, &e),
                },
                Err(e) => error_response(id, &e),
            },
            methods::LIST_TASKS => unary!(list_tasks),
            methods::CANCEL_TASK => unary!(cancel_task),
            methods::CREATE_PUSH_CONFIG => unary!(create_task_push_notification_config),
            methods::GET_PUSH_CONFIG => unary!(get_task_push_notification_config),
            methods::LIST_PUSH_CONFIGS => unary!(list_task_push_notification_configs),
            methods::DELETE_PUSH_CONFIG => match params(p, &limits) {
                Ok(req) => {
                    match Box::pin(h.delete_task_push_notification_config(&ctx, req)).await {
                        Ok(()) => {
                            respond(result_body(id, &serde_json::json!({})).unwrap_or_default())
                        }
                        Err(e) => error_response(id, &e),
                    }
                }
                Err(e) => error_response(id, &e),
            },
            methods::GET_EXTENDED_AGENT_CARD => unary!(get_extended_agent_card),
            methods::SEND_STREAMING_MESSAGE => match params(p, &limits) {
                Ok(req) => stream(
                    id,
                    Box::pin(h.send_streaming_message_with_ids(&ctx, req)).await,
                ),
                Err(e) => error_response(id, &e),
            },
            methods::SUBSCRIBE_TO_TASK => match params(p, &limits) {
                Ok(req) => stream(id, Box::pin(h.subscribe_to_task_with_ids(&ctx, req)).await),
                Err(e) => error_response(id, &e),
            },
            other => error_response(
                id,
                &A2aError::new(
                    ErrorKind::MethodNotFound,
                    format!("Method not found: {other}"),
                )
                .with_metadata("method", other),
            ),
        }
    }
}

fn finish<T: serde::Serialize>(id: &str, result: Result<T, A2aError>) -> Response {
    match result.and_then(|r| result_body(id, &r)) {
        Ok(body) => respond(body),
        Err(e) => error_response(id, &e),
    }
}

fn stream(id: &str, result: Result<IdEventStream, A2aError>) -> Response {
    let events = match result {
        Ok(s) => s,
        Err(e) => return error_response(id, &e),
    };
    let id = id.to_owned();
    sse_response(events.map(
        move |(event_id, item)| match item.and_then(|ev| result_body(&id, &ev)) {
            Ok(body) => (
                None,
                event_id.map(|e| e.to_string()),
                String::from_utf8(body).unwrap_or_default(),
            ),
            Err(e) => (
                Some("error"),
                None,
                String::from_utf8(error_body(&id, &e)).unwrap_or_default(),
            ),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request object's version, id, method (as JSON text) and params.
    type Read = (Option<String>, Option<String>, Option<String>, String);

    /// What a request object says, as the text path reads it.
    fn by_text(body: &str) -> Option<Read> {
        let e: TextEnvelope<'_> = serde_json::from_str(body).ok()?;
        let params = e.params.map_or(String::new(), |p| {
            serde_json::from_str::<SendMessageRequest>(p.get())
                .map_or_else(|_| p.get().to_owned(), |r| format!("{r:?}"))
        });
        let get = |v: Option<&RawValue>| v.map(|v| v.get().to_owned());
        Some((get(e.jsonrpc), get(e.id), get(e.method), params))
    }

    /// The same, as [`Envelope::read`] reads it (its fast paths included).
    fn by_read(body: &str) -> Option<Read> {
        let e = Envelope::read(body.as_bytes()).ok()?;
        let params = match e.params {
            Params::Send(r) => format!("{r:?}"),
            Params::Text(None) => String::new(),
            Params::Text(Some(p)) => serde_json::from_str::<SendMessageRequest>(p.get())
                .map_or_else(|_| p.get().to_owned(), |r| format!("{r:?}")),
        };
        let own = |v: Option<&str>| v.map(str::to_owned);
        Some((own(e.jsonrpc), own(e.id), own(e.method), params))
    }

    #[test]
    fn every_way_of_reading_a_request_object_agrees() {
        let send = r#"{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}"#;
        let bodies = [
            // The fast path's shape, with ids of every kind.
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{send}}}"#),
            format!(r#" {{ "jsonrpc" : "2.0", "id" : "r-1" , "method":"SendMessage","params" : {send} }} "#),
            format!(r#"{{"id":-7,"method":"SendMessage","params":{send},"jsonrpc":"2.0"}}"#),
            format!(r#" {{ "jsonrpc" : "2.0", "id" : 0 , "method":"SendMessage","params" : {send} }} "#),
            // One pass, but not the fast path's shape.
            format!(r#"{{"jsonrpc":"2.0","id":1.5,"method":"SendMessage","params":{send}}}"#),
            r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[{"url":"https://x"}]},"configuration":{"historyLength":2}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":"a\"b","method":"SendMessage","params":{"message":{}}}"#.to_owned(),
            // The params first, other methods, errors of every kind.
            format!(r#"{{"params":{send},"jsonrpc":"2.0","id":1,"method":"SendMessage"}}"#),
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}"#.to_owned(),
            r#"{"jsonrpc":"1.0","id":1,"method":"SendMessage","params":{"message":{}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_BAD"}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":[1]}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":null}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"Send\u004dessage","params":{"message":{}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"SendMessage","params":{}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{},"params":{}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}} trailing"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"#.to_owned(),
            r#"[{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}]"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":{},"method":"SendMessage","params":{"message":{}}}"#.to_owned(),
            format!(r#"{{"jsonrpc":"2.0","id":null,"method":"SendMessage","params":{send}}}"#),
            r#"{"jsonrpc":"2.0","id":null,"id":1,"method":"SendMessage","params":{"message":{}}}"#.to_owned(),
            r#"{"jsonrpc":null,"id":1,"method":"SendMessage","params":{"message":{}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":null,"params":{"message":{}}}"#.to_owned(),
        ];
        for body in &bodies {
            assert_eq!(by_read(body), by_text(body), "{body}");
        }
        // The fast path did read the first ones.
        for body in &bodies[..4] {
            assert!(
                Envelope::read_plain(body.as_bytes()).is_some(),
                "not read by the fast path: {body}"
            );
        }
    }
}
