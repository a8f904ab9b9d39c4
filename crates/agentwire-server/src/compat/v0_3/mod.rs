//! Serving clients of A2A protocol version 0.3 beside 1.0, on the same
//! port and paths.
//!
//! Everything that knows about 0.3 is in this module: the bindings hand a
//! 0.3 request here, it is converted into the 1.0 request the handler
//! takes, and the handler's answer (or its events) converted back into the
//! 0.3 form. The handler, the task manager and the stores never see 0.3.
//!
//! - `types` (in `agentwire_types::v0_3`, shared with the client): the 0.3 data model in its JSON-RPC form (`kind`
//!   discriminators, text/file/data parts, lower-case kebab-case states,
//!   `final` on status updates);
//! - `convert` (also shared): the conversions between that model and the 1.0 one, both
//!   ways, by move;
//! - `jsonrpc`: the 0.3 JSON-RPC methods;
//! - `rest`: the 0.3 HTTP+JSON routes (`/v1/message:send`...), whose
//!   bodies are the ProtoJSON form of the 0.3 protobuf messages;
//! - `grpc`: the 0.3 gRPC service `a2a.v1.A2AService`, beside the 1.0
//!   `lf.a2a.v1.A2AService` on the same port;
//! - `card`: the agent card fields a 0.3 client needs, derived from the
//!   1.0 card.
//!
//! # Which version a request speaks
//!
//! The version is the `A2A-Version` header, or the `A2A-Version` query
//! parameter; without either a request is a 0.3 request (the 1.0 rule).
//! On JSON-RPC the method name says which model the params are in: the 0.3
//! names have a `/` (`message/send`), the 1.0 ones none (`SendMessage`).
//! On HTTP+JSON the path does: the 0.3 routes start with `/v1/`; with
//! `A2A-Version: 1.x` such a path is a 1.0 route of the tenant `v1`.
//!
//! - A 0.3 method with version 0.3 (or none) is served here, unless 0.3 is
//!   turned off ([`crate::HandlerBuilder::serve_v03`], `a2a serve
//!   --no-v03`).
//! - A 0.3 method with any other version, or with 0.3 turned off, is
//!   answered `VersionNotSupportedError` in the 0.3 error form (below).
//! - A 1.0 method is the 1.0 binding's whatever the version: without
//!   `A2A-Version: 1.0` it is refused with `VersionNotSupportedError` in
//!   the 1.0 form, as before.
//!
//! # Where 0.3 and 1.0 differ, and what is done
//!
//! - Errors: 0.3's JSON-RPC error is `{code, message, data}` with the same
//!   codes as 1.0 for the A2A errors (-32001 task not found ... -32007
//!   authenticated extended card not configured); `data` is an object with
//!   the error's `reason` (as the 1.0 `ErrorInfo` names it) and its
//!   metadata (`taskId`...), not 1.0's list of `google.rpc` details. The
//!   errors 0.3 does not define keep their 1.0 codes (-32008 extension
//!   support required, -32009 version not supported, -31401/-31403
//!   authentication), so a 0.3 client sees a JSON-RPC error it can show.
//! - Listing tasks: 0.3 JSON-RPC has no `tasks/list`; it is answered
//!   `Method not found` naming the 1.0 method.
//! - Blocking: `configuration.blocking` absent or `true` waits for the task
//!   to end or be interrupted, as 0.3 servers do; `false` is 1.0's
//!   `returnImmediately: true`.
//! - History length: in 0.3 a `historyLength` of 0 means the whole history
//!   (in 1.0 it means none); 0 is passed on as "no limit".
//! - `final` on status updates: set on the update whose state ends the
//!   stream (terminal, input-required or auth-required), the rule 1.0
//!   follows without a flag.
//! - Parts: a 1.0 text part's media type and file name, which 0.3 text
//!   parts cannot carry, are left out; a 1.0 data part holding something
//!   other than an object travels as `{"value": ...}` marked in the part's
//!   metadata (`data_part_compat: true`, as the official SDKs do) and comes
//!   back as it was.
//! - Push notification configs: 0.3 nests the config in `{taskId,
//!   pushNotificationConfig}`; its `authentication.schemes` list becomes
//!   1.0's single `scheme` (the first). A config set without an id gets
//!   the task's id, and `get` without a config id returns that config (or
//!   the task's first), as 0.3 servers do. `list` returns every config (0.3
//!   has no pages); `delete` answers `null`.
//! - The extended card (`agent/getAuthenticatedExtendedCard`) is the 1.0
//!   extended card with the 0.3 fields; an agent without one answers
//!   -32007 (`AuthenticatedExtendedCardNotConfiguredError`).
//! - Extensions: 0.3 clients name them in `X-A2A-Extensions`; it is read
//!   as `A2A-Extensions`.
//! - Tenants: 0.3 has none; 0.3 calls reach the default tenant.

pub(crate) mod card;
pub(crate) mod grpc;
pub(crate) mod jsonrpc;
pub(crate) mod rest;

/// The 0.3 model and its conversions live in `agentwire-types` (feature
/// `v0_3`), shared with the client.
pub(crate) use agentwire_types::v0_3::{convert, types};

#[cfg(test)]
mod tests;

use agentwire_types::A2aError;
use http::{HeaderName, HeaderValue};
use serde_json::{Value, json};

use crate::handler::{A2A_VERSION, CallContext};

/// The version 0.3 requests are served as.
pub(crate) const V03: &str = "0.3";

/// The extensions header of 1.0.
static A2A_EXTENSIONS: HeaderName = HeaderName::from_static("a2a-extensions");
/// The extensions header of 0.3 clients.
static X_A2A_EXTENSIONS: HeaderName = HeaderName::from_static("x-a2a-extensions");

/// The call context of a 0.3 request as the handler is to see it: a 1.0
/// call (the request has been converted), with the extensions a 0.3 client
/// names in `X-A2A-Extensions` moved to `A2A-Extensions`, registering push
/// configs whose notifications take the 0.3 form.
pub(crate) fn as_v1_call(mut ctx: CallContext) -> CallContext {
    // The configs it registers are notified in the 0.3 form.
    ctx.push_format = crate::store::PushFormat::V03;
    ctx.headers.insert(
        A2A_VERSION.clone(),
        HeaderValue::from_static(agentwire_types::PROTOCOL_VERSION),
    );
    if !ctx.headers.contains_key(&A2A_EXTENSIONS) {
        let legacy: Vec<HeaderValue> = ctx
            .headers
            .get_all(&X_A2A_EXTENSIONS)
            .iter()
            .cloned()
            .collect();
        for v in legacy {
            ctx.headers.append(A2A_EXTENSIONS.clone(), v);
        }
    }
    ctx
}

/// The JSON-RPC `error` object in the 0.3 form: `{code, message, data}`,
/// `data` holding the reason and the error's metadata.
pub(crate) fn error_object(e: &A2aError) -> Value {
    let mut data = serde_json::Map::new();
    data.insert("reason".into(), json!(e.kind.reason()));
    for (k, v) in &e.metadata {
        data.insert(k.clone(), json!(v));
    }
    if !e.field_violations.is_empty() {
        data.insert(
            "fieldViolations".into(),
            e.field_violations
                .iter()
                .map(|v| json!({"field": v.field, "description": v.description}))
                .collect(),
        );
    }
    json!({
        "code": e.kind.jsonrpc_code(),
        "message": e.message,
        "data": data,
    })
}

/// A 0.3 JSON-RPC request (its method has a `/`): served when it asks for
/// 0.3 (or no version) and 0.3 is served, else refused with
/// `VersionNotSupportedError` in the 0.3 form.
pub(crate) async fn serve_jsonrpc(
    state: &crate::bindings::http::HttpState,
    ctx: CallContext,
    id: &str,
    method: &str,
    params: Option<&serde_json::value::RawValue>,
) -> axum::response::Response {
    let h = &state.handler;
    if crate::handler::requested_version(&ctx) != V03 || !h.serves_v03() {
        let requested = ctx
            .headers
            .get(&A2A_VERSION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        return jsonrpc::error_response(id, &h.version_not_supported(requested));
    }
    jsonrpc::call(state, as_v1_call(ctx), id, method, params).await
}
