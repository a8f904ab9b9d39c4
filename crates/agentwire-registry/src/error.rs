//! Errors of the ARD API (Appendix B): an HTTP status, an error code and a
//! message, sent as `{"errorCode", "message"}`.

use agentwire_client::registry::ErrorBody;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use crate::store::StoreError;

/// A refused or failed call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} ({code})")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The ARD error code.
    pub code: &'static str,
    /// What went wrong, and what to do.
    pub message: String,
}

impl ApiError {
    /// 400 `INVALID_ARGUMENT`: a malformed query, filter or card.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            code: "INVALID_ARGUMENT",
            message: message.into(),
        }
    }

    /// 401 `UNAUTHENTICATED`: missing or invalid credentials.
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            code: "UNAUTHENTICATED",
            message: message.into(),
        }
    }

    /// 403 `PERMISSION_DENIED`: the entry belongs to another publisher.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::FORBIDDEN,
            code: "PERMISSION_DENIED",
            message: message.into(),
        }
    }

    /// 404 `NOT_FOUND`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            code: "NOT_FOUND",
            message: message.into(),
        }
    }

    /// 409 `AMBIGUOUS`: a name that several entries share.
    pub fn ambiguous(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::CONFLICT,
            code: "AMBIGUOUS",
            message: message.into(),
        }
    }

    /// 501 `NOT_IMPLEMENTED`.
    pub fn not_implemented(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::NOT_IMPLEMENTED,
            code: "NOT_IMPLEMENTED",
            message: message.into(),
        }
    }

    /// 500 `INTERNAL_ERROR`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: "INTERNAL_ERROR",
            message: message.into(),
        }
    }

    /// The JSON body.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error_code: self.code.to_owned(),
            message: self.message.clone(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        tracing::error!(error = %e, "registry store failure");
        ApiError::internal(e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}
