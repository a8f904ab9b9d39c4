//! JSON-RPC 2.0 method names and envelope helpers (spec 9).

/// The JSON-RPC version string.
pub const JSONRPC_VERSION: &str = "2.0";

/// JSON-RPC method names (PascalCase, as the gRPC methods).
pub mod methods {
    #![allow(missing_docs)]
    pub const SEND_MESSAGE: &str = "SendMessage";
    pub const SEND_STREAMING_MESSAGE: &str = "SendStreamingMessage";
    pub const GET_TASK: &str = "GetTask";
    pub const LIST_TASKS: &str = "ListTasks";
    pub const CANCEL_TASK: &str = "CancelTask";
    pub const SUBSCRIBE_TO_TASK: &str = "SubscribeToTask";
    pub const CREATE_PUSH_CONFIG: &str = "CreateTaskPushNotificationConfig";
    pub const GET_PUSH_CONFIG: &str = "GetTaskPushNotificationConfig";
    pub const LIST_PUSH_CONFIGS: &str = "ListTaskPushNotificationConfigs";
    pub const DELETE_PUSH_CONFIG: &str = "DeleteTaskPushNotificationConfig";
    pub const GET_EXTENDED_AGENT_CARD: &str = "GetExtendedAgentCard";
}

/// A JSON-RPC response as received by a client: exactly one of `result`
/// and `error`.
#[derive(Debug, serde::Deserialize)]
pub struct ResponseEnvelope<T> {
    /// Always `"2.0"`.
    #[serde(default)]
    pub jsonrpc: String,
    /// The request id echoed back.
    #[serde(default)]
    pub id: serde_json::Value,
    /// The result on success.
    pub result: Option<T>,
    /// The error object on failure.
    pub error: Option<serde_json::Value>,
}

impl<T> ResponseEnvelope<T> {
    /// The result, or the error rebuilt as an [`crate::A2aError`].
    pub fn into_result(self) -> Result<T, crate::A2aError> {
        match (self.result, self.error) {
            (_, Some(e)) => Err(crate::A2aError::from_jsonrpc_error(&e)),
            (Some(r), None) => Ok(r),
            (None, None) => Err(crate::A2aError::new(
                crate::ErrorKind::InvalidAgentResponse,
                "JSON-RPC response has neither result nor error",
            )),
        }
    }
}
