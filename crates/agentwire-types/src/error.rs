//! The A2A error model (spec 3.3.2) and its mapping onto each binding
//! (spec 5.4, 9.5, 10.6, 11.6).

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Value, json};

/// The domain of `google.rpc.ErrorInfo` details for A2A errors.
pub const ERROR_DOMAIN: &str = "a2a-protocol.org";
/// `@type` of a `google.rpc.ErrorInfo` detail.
pub const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";
/// `@type` of a `google.rpc.BadRequest` detail.
pub const BAD_REQUEST_TYPE: &str = "type.googleapis.com/google.rpc.BadRequest";

/// What went wrong, independent of the binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The task does not exist or is not visible to the caller.
    TaskNotFound,
    /// The task is in a state that cannot be canceled.
    TaskNotCancelable,
    /// The agent does not support push notifications.
    PushNotificationNotSupported,
    /// The operation (or an aspect of it) is not supported.
    UnsupportedOperation,
    /// A media type in the request is not supported.
    ContentTypeNotSupported,
    /// An agent answered in a way the specification does not allow.
    InvalidAgentResponse,
    /// The agent declares an extended card but has none configured.
    ExtendedAgentCardNotConfigured,
    /// A required extension was not declared by the client.
    ExtensionSupportRequired,
    /// The requested protocol version is not supported.
    VersionNotSupported,
    /// A message's `ifGenerationMatch` does not match the task's current
    /// generation (A2A v1.1 draft, section 3.2.7): JSON-RPC `-32010`, gRPC
    /// `ABORTED`, HTTP `409 Conflict`.
    TaskGenerationMismatch,
    /// The body is not valid JSON (JSON-RPC -32700).
    ParseError,
    /// The JSON is not a valid request object (JSON-RPC -32600).
    InvalidRequest,
    /// The method does not exist (JSON-RPC -32601).
    MethodNotFound,
    /// The parameters are invalid (JSON-RPC -32602).
    InvalidParams,
    /// An internal error (JSON-RPC -32603).
    Internal,
    /// Credentials are missing or invalid.
    Unauthenticated,
    /// The caller may not do this.
    PermissionDenied,
    /// The server is too busy, or holds as much as it may, to take this on
    /// now; the same request may succeed later. The spec's system error for
    /// temporary unavailability: JSON-RPC `-32603` (internal error), HTTP
    /// `503 Service Unavailable`, gRPC `UNAVAILABLE`.
    Unavailable,
}

/// gRPC status codes used by the mapping (numeric values of `google.rpc.Code`).
#[allow(missing_docs)]
pub mod grpc_code {
    pub const INVALID_ARGUMENT: i32 = 3;
    pub const NOT_FOUND: i32 = 5;
    pub const PERMISSION_DENIED: i32 = 7;
    pub const FAILED_PRECONDITION: i32 = 9;
    pub const UNIMPLEMENTED: i32 = 12;
    pub const INTERNAL: i32 = 13;
    pub const ABORTED: i32 = 10;
    pub const UNAVAILABLE: i32 = 14;
    pub const UNAUTHENTICATED: i32 = 16;
}

impl ErrorKind {
    const ALL: [ErrorKind; 18] = [
        ErrorKind::TaskNotFound,
        ErrorKind::TaskNotCancelable,
        ErrorKind::PushNotificationNotSupported,
        ErrorKind::UnsupportedOperation,
        ErrorKind::ContentTypeNotSupported,
        ErrorKind::InvalidAgentResponse,
        ErrorKind::ExtendedAgentCardNotConfigured,
        ErrorKind::ExtensionSupportRequired,
        ErrorKind::VersionNotSupported,
        ErrorKind::TaskGenerationMismatch,
        ErrorKind::ParseError,
        ErrorKind::InvalidRequest,
        ErrorKind::MethodNotFound,
        ErrorKind::InvalidParams,
        ErrorKind::Internal,
        ErrorKind::Unauthenticated,
        ErrorKind::PermissionDenied,
        // After `Internal`, which keeps JSON-RPC's -32603 for itself.
        ErrorKind::Unavailable,
    ];

    /// The JSON-RPC error code. Authentication errors use application codes
    /// outside the range JSON-RPC reserves (-32768..-32000).
    pub fn jsonrpc_code(self) -> i64 {
        match self {
            ErrorKind::TaskNotFound => -32001,
            ErrorKind::TaskNotCancelable => -32002,
            ErrorKind::PushNotificationNotSupported => -32003,
            ErrorKind::UnsupportedOperation => -32004,
            ErrorKind::ContentTypeNotSupported => -32005,
            ErrorKind::InvalidAgentResponse => -32006,
            ErrorKind::ExtendedAgentCardNotConfigured => -32007,
            ErrorKind::ExtensionSupportRequired => -32008,
            ErrorKind::VersionNotSupported => -32009,
            ErrorKind::TaskGenerationMismatch => -32010,
            ErrorKind::ParseError => -32700,
            ErrorKind::InvalidRequest => -32600,
            ErrorKind::MethodNotFound => -32601,
            ErrorKind::InvalidParams => -32602,
            ErrorKind::Internal | ErrorKind::Unavailable => -32603,
            ErrorKind::Unauthenticated => -31401,
            ErrorKind::PermissionDenied => -31403,
        }
    }

    /// The gRPC status code (numeric `google.rpc.Code`).
    pub fn grpc_code(self) -> i32 {
        use grpc_code::*;
        match self {
            ErrorKind::TaskNotFound => NOT_FOUND,
            ErrorKind::TaskNotCancelable
            | ErrorKind::PushNotificationNotSupported
            | ErrorKind::UnsupportedOperation
            | ErrorKind::ExtendedAgentCardNotConfigured
            | ErrorKind::ExtensionSupportRequired
            | ErrorKind::VersionNotSupported => FAILED_PRECONDITION,
            ErrorKind::ContentTypeNotSupported
            | ErrorKind::ParseError
            | ErrorKind::InvalidRequest
            | ErrorKind::InvalidParams => INVALID_ARGUMENT,
            ErrorKind::InvalidAgentResponse | ErrorKind::Internal => INTERNAL,
            ErrorKind::MethodNotFound => UNIMPLEMENTED,
            ErrorKind::Unauthenticated => UNAUTHENTICATED,
            ErrorKind::PermissionDenied => PERMISSION_DENIED,
            ErrorKind::Unavailable => UNAVAILABLE,
            ErrorKind::TaskGenerationMismatch => ABORTED,
        }
    }

    /// The HTTP status code of the HTTP+JSON binding.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorKind::TaskNotFound | ErrorKind::MethodNotFound => 404,
            ErrorKind::InvalidAgentResponse | ErrorKind::Internal => 500,
            ErrorKind::Unauthenticated => 401,
            ErrorKind::PermissionDenied => 403,
            ErrorKind::Unavailable => 503,
            ErrorKind::TaskGenerationMismatch => 409,
            _ => 400,
        }
    }

    /// The `google.rpc.ErrorInfo` reason: the error name in UPPER_SNAKE_CASE
    /// without the `Error` suffix.
    pub fn reason(self) -> &'static str {
        match self {
            ErrorKind::TaskNotFound => "TASK_NOT_FOUND",
            ErrorKind::TaskNotCancelable => "TASK_NOT_CANCELABLE",
            ErrorKind::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            ErrorKind::UnsupportedOperation => "UNSUPPORTED_OPERATION",
            ErrorKind::ContentTypeNotSupported => "CONTENT_TYPE_NOT_SUPPORTED",
            ErrorKind::InvalidAgentResponse => "INVALID_AGENT_RESPONSE",
            ErrorKind::ExtendedAgentCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            ErrorKind::ExtensionSupportRequired => "EXTENSION_SUPPORT_REQUIRED",
            ErrorKind::VersionNotSupported => "VERSION_NOT_SUPPORTED",
            ErrorKind::TaskGenerationMismatch => "TASK_GENERATION_MISMATCH",
            ErrorKind::ParseError => "PARSE_ERROR",
            ErrorKind::InvalidRequest => "INVALID_REQUEST",
            ErrorKind::MethodNotFound => "METHOD_NOT_FOUND",
            ErrorKind::InvalidParams => "INVALID_PARAMS",
            ErrorKind::Internal => "INTERNAL",
            ErrorKind::Unauthenticated => "UNAUTHENTICATED",
            ErrorKind::PermissionDenied => "PERMISSION_DENIED",
            ErrorKind::Unavailable => "UNAVAILABLE",
        }
    }

    /// Whether this is one of the A2A-specific errors of spec 3.3.2 (those
    /// MUST carry a `google.rpc.ErrorInfo` detail).
    pub fn is_a2a_specific(self) -> bool {
        (-32010..=-32001).contains(&self.jsonrpc_code())
    }

    /// The kind for an ErrorInfo reason.
    pub fn from_reason(reason: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.reason() == reason)
    }

    /// The kind for a JSON-RPC code.
    pub fn from_jsonrpc_code(code: i64) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.jsonrpc_code() == code)
    }

    /// A best guess from a gRPC code alone (when no ErrorInfo came along).
    pub fn from_grpc_code(code: i32) -> Self {
        use grpc_code::*;
        match code {
            NOT_FOUND => ErrorKind::TaskNotFound,
            INVALID_ARGUMENT => ErrorKind::InvalidParams,
            FAILED_PRECONDITION => ErrorKind::UnsupportedOperation,
            UNIMPLEMENTED => ErrorKind::MethodNotFound,
            UNAUTHENTICATED => ErrorKind::Unauthenticated,
            PERMISSION_DENIED => ErrorKind::PermissionDenied,
            UNAVAILABLE => ErrorKind::Unavailable,
            ABORTED => ErrorKind::TaskGenerationMismatch,
            _ => ErrorKind::Internal,
        }
    }

    /// A best guess from an HTTP status alone.
    pub fn from_http_status(status: u16) -> Self {
        match status {
            404 => ErrorKind::TaskNotFound,
            401 => ErrorKind::Unauthenticated,
            403 => ErrorKind::PermissionDenied,
            409 => ErrorKind::TaskGenerationMismatch,
            400..=499 => ErrorKind::InvalidRequest,
            503 => ErrorKind::Unavailable,
            _ => ErrorKind::Internal,
        }
    }

    /// The canonical name of the gRPC status (`NOT_FOUND`), as used in the
    /// `status` field of HTTP+JSON error bodies.
    pub fn grpc_status_name(self) -> &'static str {
        grpc_status_name(self.grpc_code())
    }

    /// The standard human-readable message for the kind.
    pub fn default_message(self) -> &'static str {
        match self {
            ErrorKind::TaskNotFound => "Task not found",
            ErrorKind::TaskNotCancelable => "Task cannot be canceled",
            ErrorKind::PushNotificationNotSupported => "Push notifications are not supported",
            ErrorKind::UnsupportedOperation => "This operation is not supported",
            ErrorKind::ContentTypeNotSupported => "Incompatible content types",
            ErrorKind::InvalidAgentResponse => "Invalid agent response",
            ErrorKind::ExtendedAgentCardNotConfigured => "Extended agent card is not configured",
            ErrorKind::ExtensionSupportRequired => "A required extension was not requested",
            ErrorKind::VersionNotSupported => "Protocol version is not supported",
            ErrorKind::TaskGenerationMismatch => "Task generation mismatch",
            ErrorKind::ParseError => "Invalid JSON payload",
            ErrorKind::InvalidRequest => "Request payload validation error",
            ErrorKind::MethodNotFound => "Method not found",
            ErrorKind::InvalidParams => "Invalid parameters",
            ErrorKind::Internal => "Internal error",
            ErrorKind::Unauthenticated => "Authentication required",
            ErrorKind::PermissionDenied => "Permission denied",
            ErrorKind::Unavailable => "Service temporarily unavailable",
        }
    }
}

/// The name of a numeric gRPC status code.
pub fn grpc_status_name(code: i32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "UNKNOWN",
    }
}

/// One invalid field of a request (`google.rpc.BadRequest.FieldViolation`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldViolation {
    /// Path of the field, e.g. `message.parts`.
    pub field: String,
    /// What is wrong with it.
    pub description: String,
}

/// An A2A error: a kind, a human-readable message and structured details.
///
/// ```
/// use agentwire_types::{A2aError, ErrorKind};
/// let e = A2aError::task_not_found("t-1");
/// assert_eq!(e.kind, ErrorKind::TaskNotFound);
/// assert_eq!(e.kind.jsonrpc_code(), -32001);
/// assert_eq!(e.kind.http_status(), 404);
/// let body = e.to_jsonrpc_error();
/// assert_eq!(body["data"][0]["reason"], "TASK_NOT_FOUND");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct A2aError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// A human-readable description.
    pub message: String,
    /// Context for `ErrorInfo.metadata` (e.g. `taskId`).
    pub metadata: BTreeMap<String, String>,
    /// Invalid fields, for validation errors.
    pub field_violations: Vec<FieldViolation>,
}

impl fmt::Display for A2aError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for A2aError {}

/// Shorthand for results whose error is an [`A2aError`].
pub type A2aResult<T> = Result<T, A2aError>;

impl A2aError {
    /// An error of `kind` with a message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            metadata: BTreeMap::new(),
            field_violations: Vec::new(),
        }
    }

    /// Adds a metadata entry (carried in `ErrorInfo.metadata`).
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Adds a field violation (carried as `google.rpc.BadRequest`).
    pub fn with_field_violation(
        mut self,
        field: impl Into<String>,
        description: impl Into<String>,
    ) -> Self {
        self.field_violations.push(FieldViolation {
            field: field.into(),
            description: description.into(),
        });
        self
    }

    /// `TaskNotFoundError` for a task id.
    pub fn task_not_found(task_id: &str) -> Self {
        Self::new(
            ErrorKind::TaskNotFound,
            format!("Task {task_id:?} was not found"),
        )
        .with_metadata("taskId", task_id)
    }

    /// `TaskGenerationMismatchError` (A2A v1.1 draft): a message's
    /// `ifGenerationMatch` (`expected`) is not the task's generation
    /// (`current`).
    pub fn generation_mismatch(task_id: &str, expected: i64, current: i64) -> Self {
        Self::new(
            ErrorKind::TaskGenerationMismatch,
            format!(
                "Task generation mismatch: expected {expected} but current generation is {current}"
            ),
        )
        .with_metadata("taskId", task_id)
        .with_metadata("expectedGeneration", expected.to_string())
        .with_metadata("currentGeneration", current.to_string())
    }

    /// `TaskNotCancelableError`.
    pub fn task_not_cancelable(task_id: &str, state: crate::TaskState) -> Self {
        Self::new(
            ErrorKind::TaskNotCancelable,
            format!(
                "Task {task_id:?} is {} and cannot be canceled",
                state.short_name()
            ),
        )
        .with_metadata("taskId", task_id)
        .with_metadata("state", state.as_str_name())
    }

    /// An [`ErrorKind::Unavailable`] error: the server cannot take this on
    /// now (a limit is reached); the same request may succeed later.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }

    /// `UnsupportedOperationError`.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::UnsupportedOperation, message)
    }

    /// `PushNotificationNotSupportedError`.
    pub fn push_not_supported() -> Self {
        Self::new(
            ErrorKind::PushNotificationNotSupported,
            "Push notifications are not supported by this agent (capabilities.pushNotifications is false)",
        )
    }

    /// `ContentTypeNotSupportedError`.
    pub fn content_type_not_supported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::ContentTypeNotSupported, message)
    }

    /// `VersionNotSupportedError` naming the versions that are.
    pub fn version_not_supported(requested: &str, supported: &[&str]) -> Self {
        let shown = if requested.is_empty() {
            "(none, meaning 0.3)"
        } else {
            requested
        };
        Self::new(
            ErrorKind::VersionNotSupported,
            format!(
                "A2A protocol version {shown} is not supported; supported: {}",
                supported.join(", ")
            ),
        )
        .with_metadata("requestedVersion", requested)
        .with_metadata("supportedVersions", supported.join(","))
    }

    /// Invalid parameters (JSON-RPC -32602) with one field violation.
    pub fn invalid_params(field: impl Into<String>, description: impl Into<String>) -> Self {
        let field = field.into();
        let description = description.into();
        let message = if field.is_empty() {
            format!("Invalid parameters: {description}")
        } else {
            format!("Invalid parameters: {field}: {description}")
        };
        Self::new(ErrorKind::InvalidParams, message).with_field_violation(field, description)
    }

    /// An internal error.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    /// The detail objects (ProtoJSON `Any` form) carried by every binding:
    /// an `ErrorInfo` for A2A-specific (and other named) errors and a
    /// `BadRequest` when there are field violations.
    pub fn details_json(&self) -> Vec<Value> {
        let mut details = Vec::with_capacity(2);
        details.push(json!({
            "@type": ERROR_INFO_TYPE,
            "reason": self.kind.reason(),
            "domain": ERROR_DOMAIN,
            "metadata": self.metadata,
        }));
        if !self.field_violations.is_empty() {
            let violations: Vec<Value> = self
                .field_violations
                .iter()
                .map(|v| json!({"field": v.field, "description": v.description}))
                .collect();
            details.push(json!({"@type": BAD_REQUEST_TYPE, "fieldViolations": violations}));
        }
        details
    }

    /// The JSON-RPC `error` object: `{code, message, data: [details]}`.
    pub fn to_jsonrpc_error(&self) -> Value {
        json!({
            "code": self.kind.jsonrpc_code(),
            "message": self.message,
            "data": self.details_json(),
        })
    }

    /// The HTTP+JSON error body: `{"error": {code, status, message, details}}`.
    pub fn to_http_body(&self) -> Value {
        json!({
            "error": {
                "code": self.kind.http_status(),
                "status": self.kind.grpc_status_name(),
                "message": self.message,
                "details": self.details_json(),
            }
        })
    }

    /// Rebuilds an error from a JSON-RPC `error` object. The ErrorInfo reason
    /// wins over the numeric code when both are present.
    pub fn from_jsonrpc_error(error: &Value) -> Self {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(-32603);
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let fallback = ErrorKind::from_jsonrpc_code(code).unwrap_or(ErrorKind::Internal);
        Self::from_parts(fallback, message, error.get("data"))
    }

    /// Rebuilds an error from an HTTP+JSON error response.
    pub fn from_http_body(status: u16, body: &Value) -> Self {
        let error = body.get("error").unwrap_or(body);
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .or_else(|| error.get("detail").and_then(Value::as_str))
            .unwrap_or_default();
        Self::from_parts(
            ErrorKind::from_http_status(status),
            message,
            error.get("details"),
        )
    }

    /// Rebuilds an error from a kind guess, a message and ProtoJSON details.
    pub fn from_parts(fallback: ErrorKind, message: &str, details: Option<&Value>) -> Self {
        let mut err = Self::new(
            fallback,
            if message.is_empty() {
                fallback.default_message()
            } else {
                message
            },
        );
        let Some(details) = details.and_then(Value::as_array) else {
            return err;
        };
        for d in details {
            match d.get("@type").and_then(Value::as_str) {
                Some(ERROR_INFO_TYPE) => {
                    if let Some(kind) = d
                        .get("reason")
                        .and_then(Value::as_str)
                        .and_then(ErrorKind::from_reason)
                    {
                        err.kind = kind;
                    }
                    if let Some(meta) = d.get("metadata").and_then(Value::as_object) {
                        for (k, v) in meta {
                            let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                            err.metadata.insert(k.clone(), v);
                        }
                    }
                }
                Some(BAD_REQUEST_TYPE) => {
                    for v in d
                        .get("fieldViolations")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        err.field_violations.push(FieldViolation {
                            field: v
                                .get("field")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .into(),
                            description: v
                                .get("description")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .into(),
                        });
                    }
                }
                _ => {}
            }
        }
        err
    }
}

#[cfg(feature = "grpc")]
mod grpc {
    use super::*;
    use tonic_types::{ErrorDetails, StatusExt};

    impl From<A2aError> for tonic::Status {
        fn from(e: A2aError) -> Self {
            e.to_grpc_status()
        }
    }

    impl A2aError {
        /// The gRPC status with `google.rpc.ErrorInfo` (and `BadRequest`)
        /// details.
        pub fn to_grpc_status(&self) -> tonic::Status {
            let mut details = ErrorDetails::with_error_info(
                self.kind.reason(),
                ERROR_DOMAIN,
                self.metadata
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<std::collections::HashMap<_, _>>(),
            );
            for v in &self.field_violations {
                details.add_bad_request_violation(v.field.clone(), v.description.clone());
            }
            tonic::Status::with_error_details(
                tonic::Code::from_i32(self.kind.grpc_code()),
                self.message.clone(),
                details,
            )
        }

        /// Rebuilds an error from a gRPC status and its details.
        pub fn from_grpc_status(status: &tonic::Status) -> Self {
            let mut err = Self::new(
                ErrorKind::from_grpc_code(status.code() as i32),
                status.message(),
            );
            {
                for d in status.get_error_details_vec() {
                    match d {
                        tonic_types::ErrorDetail::ErrorInfo(info) => {
                            if let Some(kind) = ErrorKind::from_reason(&info.reason) {
                                err.kind = kind;
                            }
                            err.metadata.extend(info.metadata);
                        }
                        tonic_types::ErrorDetail::BadRequest(br) => {
                            for v in br.field_violations {
                                err.field_violations.push(FieldViolation {
                                    field: v.field,
                                    description: v.description,
                                });
                            }
                        }
                        _ => {}
                    }
                }
            }
            err
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_of_spec_5_4() {
        use ErrorKind::*;
        let rows = [
            (TaskNotFound, -32001, 5, 404),
            (TaskNotCancelable, -32002, 9, 400),
            (PushNotificationNotSupported, -32003, 9, 400),
            (UnsupportedOperation, -32004, 9, 400),
            (ContentTypeNotSupported, -32005, 3, 400),
            (InvalidAgentResponse, -32006, 13, 500),
            (ExtendedAgentCardNotConfigured, -32007, 9, 400),
            (ExtensionSupportRequired, -32008, 9, 400),
            (VersionNotSupported, -32009, 9, 400),
        ];
        for (kind, rpc, grpc, http) in rows {
            assert_eq!(kind.jsonrpc_code(), rpc, "{kind:?}");
            assert_eq!(kind.grpc_code(), grpc, "{kind:?}");
            assert_eq!(kind.http_status(), http, "{kind:?}");
            assert!(kind.is_a2a_specific());
            assert_eq!(ErrorKind::from_reason(kind.reason()), Some(kind));
        }
        assert_eq!(ParseError.jsonrpc_code(), -32700);
        assert_eq!(InvalidRequest.jsonrpc_code(), -32600);
        assert_eq!(MethodNotFound.jsonrpc_code(), -32601);
        assert_eq!(InvalidParams.jsonrpc_code(), -32602);
        assert_eq!(Internal.jsonrpc_code(), -32603);
        assert!(!InvalidParams.is_a2a_specific());
    }

    #[test]
    fn jsonrpc_and_http_round_trip() {
        let e = A2aError::invalid_params("message.parts", "at least one part is required");
        let back = A2aError::from_jsonrpc_error(&e.to_jsonrpc_error());
        assert_eq!(back, e);
        let e = A2aError::task_not_found("abc");
        let body = e.to_http_body();
        assert_eq!(body["error"]["status"], "NOT_FOUND");
        assert_eq!(body["error"]["details"][0]["domain"], ERROR_DOMAIN);
        assert_eq!(A2aError::from_http_body(404, &body), e);
    }

    #[cfg(feature = "grpc")]
    #[test]
    fn grpc_round_trip() {
        let e = A2aError::task_not_cancelable("t", crate::TaskState::Completed);
        let status = e.to_grpc_status();
        assert_eq!(status.code(), tonic::Code::FailedPrecondition);
        assert_eq!(A2aError::from_grpc_status(&status), e);
    }
}
