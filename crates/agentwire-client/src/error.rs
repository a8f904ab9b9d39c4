//! The one error type of the client: [`ClientError`].

use agentwire_types::{A2aError, ErrorKind};

/// A boxed error kept as the source of a [`ClientError`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Shorthand for results of client calls.
pub type ClientResult<T> = Result<T, ClientError>;

/// Everything a client call can fail with.
///
/// The variants separate *who* failed, whatever the binding:
///
/// - [`ClientError::A2a`]: the agent answered with a protocol error
///   (`TaskNotFound`, `UnsupportedOperation`, invalid params...). The
///   [`ErrorKind`] is the same whether it came as a JSON-RPC error code, an
///   HTTP+JSON `google.rpc.Status` body or a gRPC status.
/// - [`ClientError::Connect`]: the agent could not be reached at all
///   (connection refused, DNS failure, connect timeout, TLS handshake). Only
///   these make the [`crate::Client`] fall back to another interface: the
///   request never left the machine.
/// - [`ClientError::Timeout`], [`ClientError::Transport`]: the connection was
///   made but the exchange failed (timeout, reset, broken stream).
/// - [`ClientError::Http`]: an HTTP failure that is not an A2A error (a proxy's
///   502, an HTML 404 page...).
/// - [`ClientError::InvalidResponse`]: the answer could not be decoded.
/// - [`ClientError::ResponseTooLarge`]: the answer was larger than the
///   client's limit (reading stopped there).
/// - [`ClientError::InvalidRequest`], [`ClientError::NoCompatibleInterface`]:
///   detected locally, before anything was sent.
///
/// ```
/// use agentwire_client::ClientError;
/// use agentwire_types::{A2aError, ErrorKind};
/// let e = ClientError::from(A2aError::task_not_found("t-1"));
/// assert_eq!(e.kind(), Some(ErrorKind::TaskNotFound));
/// assert!(!e.is_unreachable());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The agent answered with an A2A (or JSON-RPC) protocol error.
    #[error("{} ({})", .0, .0.kind.reason())]
    A2a(A2aError),

    /// The agent could not be reached: nothing was sent.
    #[error("cannot reach {url}: {message}")]
    Connect {
        /// The URL that was tried.
        url: String,
        /// What went wrong (connection refused, DNS, connect timeout...).
        message: String,
        /// The underlying error.
        #[source]
        source: Option<BoxError>,
    },

    /// The call did not complete in time (see [`crate::CallOptions::timeout`]).
    #[error("request to {url} timed out")]
    Timeout {
        /// The URL of the call.
        url: String,
    },

    /// The connection failed after it was made (reset, broken stream,
    /// protocol error below A2A).
    #[error("transport error: {message}")]
    Transport {
        /// What went wrong.
        message: String,
        /// The underlying error.
        #[source]
        source: Option<BoxError>,
    },

    /// An HTTP failure whose body is not an A2A error.
    #[error("HTTP {status}: {body}")]
    Http {
        /// The HTTP status code.
        status: u16,
        /// The (possibly truncated) response body.
        body: String,
    },

    /// The agent's answer could not be decoded.
    #[error("invalid response: {0}")]
    InvalidResponse(String),

    /// An answer was larger than this client accepts: reading stopped at
    /// the limit (nothing beyond it was kept). The limits and how to raise
    /// them: [`crate::ClientBuilder::max_response_bytes`] (answers, each
    /// stream event, each gRPC message) and
    /// [`crate::card::CardResolver::with_max_card_bytes`] (agent cards).
    #[error("{what} from {url} is larger than {limit} bytes, the most this client accepts")]
    ResponseTooLarge {
        /// What was being read: "the response", "the agent card", "a
        /// server-sent event", "a gRPC message"...
        what: String,
        /// Where it came from.
        url: String,
        /// The limit, in bytes.
        limit: usize,
    },

    /// The request could not be built (bad URL, header name, empty id...).
    #[error("invalid request: {0}")]
    InvalidRequest(String),

    /// No interface of the agent card can be used by this client (a 0.x card,
    /// no accepted binding, no 1.x protocol version).
    #[error("no compatible interface: {0}")]
    NoCompatibleInterface(String),

    /// There is no agent card where it was looked for (HTTP 404 / 410 at
    /// the card URL, or no such file).
    #[error("no agent card at {location}: {message}")]
    CardNotFound {
        /// The URL or file path tried.
        location: String,
        /// What was found instead.
        message: String,
    },

    /// Waiting for a task to reach a terminal or interrupted state took
    /// longer than allowed.
    #[error("task {task_id} did not finish within {waited:?} (last state: {last_state})")]
    WaitTimeout {
        /// The task waited for.
        task_id: String,
        /// How long the wait lasted.
        waited: std::time::Duration,
        /// The last state seen (`unspecified` if none).
        last_state: String,
    },
}

impl ClientError {
    /// The A2A error, when the agent answered with one.
    pub fn a2a(&self) -> Option<&A2aError> {
        match self {
            ClientError::A2a(e) => Some(e),
            _ => None,
        }
    }

    /// The A2A error kind, when the agent answered with a protocol error.
    pub fn kind(&self) -> Option<ErrorKind> {
        self.a2a().map(|e| e.kind)
    }

    /// Whether the agent could not be reached at all (nothing was sent): the
    /// only case where trying another interface is safe.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, ClientError::Connect { .. })
    }

    /// Whether the agent refused the caller's credentials as missing,
    /// invalid or expired: HTTP 401, gRPC `UNAUTHENTICATED` or the JSON-RPC
    /// mapping (not `PERMISSION_DENIED`: a fresh token would not help).
    pub fn is_unauthenticated(&self) -> bool {
        match self {
            ClientError::A2a(e) => e.kind == ErrorKind::Unauthenticated,
            ClientError::Http { status, .. } => *status == 401,
            _ => false,
        }
    }

    /// Whether an answer was refused for its size
    /// ([`ClientError::ResponseTooLarge`]).
    pub fn is_too_large(&self) -> bool {
        matches!(self, ClientError::ResponseTooLarge { .. })
    }

    /// Whether the call timed out after the connection was made.
    pub fn is_timeout(&self) -> bool {
        matches!(self, ClientError::Timeout { .. })
    }

    pub(crate) fn invalid_response(what: impl std::fmt::Display) -> Self {
        ClientError::InvalidResponse(what.to_string())
    }
}

impl From<A2aError> for ClientError {
    fn from(e: A2aError) -> Self {
        ClientError::A2a(e)
    }
}

/// The display of an error followed by its sources, `a: b: c`, skipping
/// sources whose text is already contained in what precedes them.
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let text = s.to_string();
        if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cur = s.source();
    }
    out
}

/// Cuts a response body for inclusion in an error (at most `max` bytes, on a
/// character boundary).
pub(crate) fn truncate_body(body: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(body);
    if text.len() <= max {
        return text.trim().to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", text[..end].trim_end(), body.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_reason() {
        let e = ClientError::from(A2aError::task_not_found("t-9"));
        let s = e.to_string();
        assert!(s.contains("t-9") && s.contains("TASK_NOT_FOUND"), "{s}");
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        let body = "é".repeat(10);
        let t = truncate_body(body.as_bytes(), 5);
        assert!(t.starts_with("éé"), "{t}");
        assert!(t.ends_with("(20 bytes)"), "{t}");
        assert_eq!(truncate_body(b" short \n", 100), "short");
    }
}
