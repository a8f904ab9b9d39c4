//! The error contract (CLI SPEC 11.4, Appendix B, Appendix D) and the exit
//! codes (11.6).
//!
//! A protocol failure carries the A2A error name the agent reported
//! (`TaskNotFoundError`, ...), whatever the binding; a failure of the tool
//! itself carries an `A2ACLI_ERR_*` code. Both become one JSON envelope in
//! `-o json` and a short labelled message on stderr in `text`.

use std::fmt;
use std::sync::OnceLock;

use agentwire_client::ClientError;
use agentwire_client::tls::TlsFailure;
use agentwire_types::ErrorKind;
use serde_json::{Value, json};

/// Exit statuses (CLI SPEC 11.6).
pub mod exit {
    /// The CLI did its job (whatever the task's outcome).
    pub const OK: u8 = 0;
    /// The operation could not be completed.
    pub const FAILURE: u8 = 1;
    /// Invalid arguments, flags or flag combination.
    pub const USAGE: u8 = 2;
    /// The agent or its card could not be reached or resolved.
    pub const UNREACHABLE: u8 = 3;
    /// Authentication could not be completed.
    pub const AUTH: u8 = 4;
    /// `--timeout` expired before a terminal state.
    pub const TIMEOUT: u8 = 5;
    /// Stopped by the user (Ctrl-C, SIGINT): the status a shell gives a
    /// command killed by SIGINT (128 + 2), as `a2a` leaves on its own.
    pub const INTERRUPTED: u8 = 130;
}

/// CLI-local error codes (CLI SPEC Appendix D).
pub mod code {
    pub const USAGE: &str = "A2ACLI_ERR_USAGE";
    pub const CARD_NOT_FOUND: &str = "A2ACLI_ERR_CARD_NOT_FOUND";
    pub const CARD_INVALID: &str = "A2ACLI_ERR_CARD_INVALID";
    pub const UNREACHABLE: &str = "A2ACLI_ERR_UNREACHABLE";
    pub const CREDENTIALS_MISSING: &str = "A2ACLI_ERR_CREDENTIALS_MISSING";
    pub const AUTH_FAILED: &str = "A2ACLI_ERR_AUTH_FAILED";
    pub const TIMEOUT: &str = "A2ACLI_ERR_TIMEOUT";
    pub const INTERNAL: &str = "A2ACLI_ERR_INTERNAL";
    /// A failure of `a2a serve` (a vendor code: the server is not the
    /// client the `A2ACLI_ERR_*` registry is about). Not printed in text.
    pub const SERVE_FAILED: &str = "AGENTWIRE_SERVE_FAILED";
    /// An answer larger than the tool's limit (`--max-response-bytes`,
    /// `--max-card-bytes`); a vendor code: the CLI specification has none.
    pub const RESPONSE_TOO_LARGE: &str = "AGENTWIRE_RESPONSE_TOO_LARGE";
    /// The user stopped the command (Ctrl-C) before it was done; the task,
    /// if one was started, keeps running at the agent (a vendor code: the
    /// CLI specification has none).
    pub const INTERRUPTED: &str = "AGENTWIRE_INTERRUPTED";
}

/// The agent of this invocation, as the caller named it (`-a`), for hints.
static AGENT: OnceLock<String> = OnceLock::new();

/// Records the agent this invocation talks to (one per run), so that every
/// hint is a command the caller can paste as it is.
pub fn set_agent(reference: &str) {
    let reference = reference.trim();
    if !reference.is_empty() {
        let _ = AGENT.set(reference.to_owned());
    }
}

/// A command to paste: `a2a COMMAND -a AGENT ARGS` (the agent of this run).
pub fn paste(command: &str, args: &str) -> String {
    let mut s = format!("a2a {command}");
    if let Some(a) = AGENT.get() {
        s.push_str(" -a ");
        s.push_str(&crate::render::shell_quote(a));
    }
    if !args.is_empty() {
        s.push(' ');
        s.push_str(args);
    }
    s
}

/// One failure of an invocation.
#[derive(Debug, Clone)]
pub struct CliError {
    /// The A2A error name or an `A2ACLI_ERR_*` code.
    pub code: String,
    /// What happened.
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
    /// The A2A error code (the spec's numeric code), when the agent sent one.
    pub a2a_code: Option<Value>,
    /// The exit status.
    pub exit: u8,
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl CliError {
    pub fn new(code: &str, exit: u8, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            hint: None,
            a2a_code: None,
            exit,
        }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(code::USAGE, exit::USAGE, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(code::INTERNAL, exit::FAILURE, message)
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Adds a hint unless one is set.
    pub fn or_hint(mut self, hint: impl Into<String>) -> Self {
        if self.hint.is_none() {
            self.hint = Some(hint.into());
        }
        self
    }

    /// The Appendix B envelope.
    pub fn envelope(&self) -> Value {
        json!({
            "error": {
                "code": self.code,
                "message": self.message,
                "hint": self.hint,
                "a2aCode": self.a2a_code,
            }
        })
    }

    /// A client failure, with context: what the tool was doing, and whether
    /// the caller supplied credentials.
    pub fn from_client(e: &ClientError, ctx: &ErrorContext) -> Self {
        if let Some(failure) = agentwire_client::tls::tls_failure(e) {
            return Self::from_tls(e, &failure, ctx);
        }
        match e {
            ClientError::A2a(err) => {
                let kind = err.kind;
                if kind == ErrorKind::Unauthenticated || kind == ErrorKind::PermissionDenied {
                    let (code, hint) = if ctx.credentials_given {
                        (
                            code::AUTH_FAILED,
                            "the agent refused the credentials: check the token or key \
                             (and that it is meant for this agent)"
                                .to_owned(),
                        )
                    } else {
                        (
                            code::CREDENTIALS_MISSING,
                            ctx.auth_hint.clone().unwrap_or_else(|| {
                                "the agent requires credentials: pass --bearer <token> or \
                                 --api-key <key> (or set A2ACLI_BEARER / A2ACLI_API_KEY)"
                                    .to_owned()
                            }),
                        )
                    };
                    let mut out =
                        CliError::new(code, exit::AUTH, err.message.clone()).with_hint(hint);
                    out.a2a_code = Some(json!(kind.jsonrpc_code()));
                    return out;
                }
                let mut out =
                    CliError::new(&a2a_error_name(kind), exit::FAILURE, err.message.clone());
                out.a2a_code = Some(json!(kind.jsonrpc_code()));
                if let Some(h) = protocol_hint(kind, ctx) {
                    out.hint = Some(h);
                }
                out
            }
            ClientError::Connect { url, message, .. } => CliError::new(
                code::UNREACHABLE,
                exit::UNREACHABLE,
                format!("cannot reach the agent at {url}: {message}"),
            )
            .with_hint(format!(
                "check that the agent is running and that the address is right \
                 (`{}` shows what is there)",
                paste("card get", "")
            )),
            ClientError::CardNotFound { location, message } => CliError::new(
                code::CARD_NOT_FOUND,
                exit::UNREACHABLE,
                format!("no agent card at {location} ({message})"),
            )
            .with_hint(
                "pass the agent's base URL (the tool appends /.well-known/agent-card.json), \
                 the full URL of its card, or a card file",
            ),
            ClientError::Timeout { url } => CliError::new(
                code::TIMEOUT,
                exit::TIMEOUT,
                format!("the request to {url} timed out"),
            )
            .with_hint(ctx.timeout_hint()),
            ClientError::WaitTimeout {
                task_id,
                waited,
                last_state,
            } => CliError::new(
                code::TIMEOUT,
                exit::TIMEOUT,
                format!(
                    "task {task_id} did not reach a terminal or interrupted state within {:.1}s \
                     (last state: {})",
                    waited.as_secs_f64(),
                    last_state.to_ascii_uppercase().replace('-', "_")
                ),
            )
            .with_hint(format!(
                "the task keeps running: follow it with `{}` or `{}`, or raise --timeout",
                paste("task get", &format!("--wait {task_id}")),
                paste("task subscribe", task_id)
            )),
            ClientError::NoCompatibleInterface(m) => {
                if m.contains("--allow-v03") {
                    CliError::new(
                        &a2a_error_name(ErrorKind::VersionNotSupported),
                        exit::FAILURE,
                        m.clone(),
                    )
                    .with_hint(
                        "this agent speaks only A2A 0.3; rerun with --allow-v03 to call it \
                         through 0.3 (an agent offering 1.0 is always called through 1.0)",
                    )
                } else if m.contains("0.x") || m.contains("protocol version") {
                    CliError::new(
                        &a2a_error_name(ErrorKind::VersionNotSupported),
                        exit::FAILURE,
                        m.clone(),
                    )
                    .with_hint(
                        "this agent does not offer an A2A 1.x interface; this tool speaks \
                             A2A 1.0 and never downgrades to 0.x",
                    )
                } else {
                    CliError::new(code::CARD_INVALID, exit::FAILURE, m.clone()).with_hint(format!(
                        "the card offers no interface this tool can use; see them with `{}`",
                        paste("card get", "")
                    ))
                }
            }
            ClientError::InvalidResponse(m) if ctx.resolving_card => {
                CliError::new(code::CARD_INVALID, exit::FAILURE, m.clone()).with_hint(format!(
                    "check the card with `{}`",
                    paste("card get", "--validate")
                ))
            }
            ClientError::ResponseTooLarge { what, url, limit } => {
                let option = if what.contains("card") {
                    "--max-card-bytes BYTES (or A2ACLI_MAX_CARD_BYTES)"
                } else {
                    "--max-response-bytes BYTES (or A2ACLI_MAX_RESPONSE_BYTES)"
                };
                CliError::new(
                    code::RESPONSE_TOO_LARGE,
                    exit::FAILURE,
                    format!(
                        "{what} from {url} is larger than {limit} bytes, the most this tool \
                         reads; it was not read further"
                    ),
                )
                .with_hint(format!(
                    "if the agent is trusted and the answer expected, raise the limit with {option}"
                ))
            }
            ClientError::InvalidRequest(m) => CliError::usage(m.clone()),
            ClientError::Http { status, body } if ctx.resolving_card => CliError::new(
                code::CARD_NOT_FOUND,
                exit::UNREACHABLE,
                format!("fetching the agent card failed with HTTP {status}: {body}"),
            ),
            other => CliError::internal(other.to_string())
                .with_hint("re-run with --debug to see the exchange with the agent"),
        }
    }
}

impl CliError {
    /// A failed TLS handshake: the agent's certificate not trusted (the
    /// agent cannot be reached safely: exit 3), or this client's
    /// certificate refused or missing (authentication: exit 4).
    fn from_tls(e: &ClientError, failure: &TlsFailure, ctx: &ErrorContext) -> Self {
        let url = match e {
            ClientError::Connect { url, .. } => format!(" at {url}"),
            _ => String::new(),
        };
        match failure {
            TlsFailure::ServerCertificate(why) => CliError::new(
                code::UNREACHABLE,
                exit::UNREACHABLE,
                format!("the TLS certificate of the agent{url} is not trusted: {why}"),
            )
            .with_hint(
                "pass --cacert <file> with the certificate of the authority that signed the \
                 agent's certificate, or the agent's own certificate if it is self-signed (or \
                 check the address: the certificate must name its host)",
            ),
            TlsFailure::ClientCertificate(why) if ctx.client_certificate => CliError::new(
                code::AUTH_FAILED,
                exit::AUTH,
                format!(
                    "the agent{url} refused the TLS connection over the client certificate \
                     ({why})"
                ),
            )
            .with_hint(
                "the agent does not accept this certificate (--cert): use one signed by an \
                 authority the agent trusts, not expired",
            ),
            TlsFailure::ClientCertificate(why) => CliError::new(
                code::CREDENTIALS_MISSING,
                exit::AUTH,
                format!(
                    "the agent{url} refused the TLS connection without a client certificate \
                     ({why})"
                ),
            )
            .with_hint("the agent requires mutual TLS: pass --cert <file> --key <file>"),
            TlsFailure::PlaintextToTls(https_url) => CliError::new(
                code::UNREACHABLE,
                exit::UNREACHABLE,
                format!(
                    "the agent{url} answers with TLS (HTTPS), not plain HTTP: call it with https://"
                ),
            )
            .with_hint(format!("use the https:// address: {https_url}")),
            TlsFailure::Other(why) => CliError::new(
                code::UNREACHABLE,
                exit::UNREACHABLE,
                format!("the TLS connection to the agent{url} failed: {why}"),
            )
            .with_hint("re-run with --debug to see the exchange with the agent"),
            _ => CliError::new(
                code::UNREACHABLE,
                exit::UNREACHABLE,
                format!(
                    "the TLS connection to the agent{url} failed: {}",
                    failure.detail()
                ),
            ),
        }
    }
}

/// What the tool was doing when a client call failed.
#[derive(Debug, Clone, Default)]
pub struct ErrorContext {
    /// Whether the caller supplied credentials (bearer, API key, client
    /// certificate, or an `Authorization` service parameter).
    pub credentials_given: bool,
    /// Whether a client certificate (`--cert`) was given.
    pub client_certificate: bool,
    /// A hint naming the credentials the card asks for.
    pub auth_hint: Option<String>,
    /// The card was being resolved.
    pub resolving_card: bool,
    /// The task concerned, if known.
    pub task_id: Option<String>,
    /// A message was sent to an existing task (`--task-id`).
    pub continuing: bool,
}

impl ErrorContext {
    fn timeout_hint(&self) -> String {
        match &self.task_id {
            Some(t) => {
                format!(
                    "raise --timeout, or follow the task with `{}`",
                    paste("task get", &format!("--wait {t}"))
                )
            }
            None => "raise --timeout, or check the agent with --debug".into(),
        }
    }
}

/// The A2A error name of a kind (spec 3.3.2 and the JSON-RPC errors).
pub fn a2a_error_name(kind: ErrorKind) -> String {
    match kind {
        ErrorKind::TaskNotFound => "TaskNotFoundError",
        ErrorKind::TaskNotCancelable => "TaskNotCancelableError",
        ErrorKind::PushNotificationNotSupported => "PushNotificationNotSupportedError",
        ErrorKind::UnsupportedOperation => "UnsupportedOperationError",
        ErrorKind::ContentTypeNotSupported => "ContentTypeNotSupportedError",
        ErrorKind::InvalidAgentResponse => "InvalidAgentResponseError",
        ErrorKind::ExtendedAgentCardNotConfigured => "ExtendedAgentCardNotConfiguredError",
        ErrorKind::ExtensionSupportRequired => "ExtensionSupportRequiredError",
        ErrorKind::VersionNotSupported => "VersionNotSupportedError",
        ErrorKind::TaskGenerationMismatch => "TaskGenerationMismatchError",
        ErrorKind::ParseError => "JSONParseError",
        ErrorKind::InvalidRequest => "InvalidRequestError",
        ErrorKind::MethodNotFound => "MethodNotFoundError",
        ErrorKind::InvalidParams => "InvalidParamsError",
        ErrorKind::Internal => "InternalError",
        ErrorKind::Unauthenticated => "UnauthenticatedError",
        ErrorKind::PermissionDenied => "PermissionDeniedError",
        _ => "InternalError",
    }
    .to_owned()
}

fn protocol_hint(kind: ErrorKind, ctx: &ErrorContext) -> Option<String> {
    let task = ctx.task_id.as_deref().unwrap_or("<taskId>");
    let debug = "re-run with --debug to see the protocol error";
    Some(match kind {
        ErrorKind::TaskNotFound if ctx.continuing => format!(
            "no task {task} at this agent; no new task was started. Check the id \
             (`{}`); {debug}",
            paste("task list", "")
        ),
        ErrorKind::TaskNotFound => {
            format!(
                "no task {task} at this agent: check the id, or list tasks with `{}`",
                paste("task list", "")
            )
        }
        ErrorKind::TaskGenerationMismatch => format!(
            "the task changed since the generation you gave; nothing was sent to it. Read it \
             with `{}` and send again with its generation",
            paste("task get", &format!("{task} -o json"))
        ),
        ErrorKind::TaskNotCancelable => {
            format!(
                "the task already reached a terminal state; see it with `{}`",
                paste("task get", task)
            )
        }
        ErrorKind::UnsupportedOperation if ctx.continuing => format!(
            "the agent refused to continue task {task} (a terminal task cannot be continued, \
             and --context-id must match the task's context); no new task was started. To \
             build on a finished task, send a new message with --context-id; {debug}"
        ),
        ErrorKind::InvalidParams if ctx.continuing => {
            format!("the agent refused the identifiers; no new task was started; {debug}")
        }
        ErrorKind::PushNotificationNotSupported => {
            "this agent does not support push notifications (its card does not declare \
             capabilities.pushNotifications)"
                .into()
        }
        ErrorKind::VersionNotSupported => format!(
            "the agent does not accept this A2A version; see the versions its card lists with `{}`",
            paste("card get", "")
        ),
        ErrorKind::ContentTypeNotSupported => format!(
            "the agent does not accept this media type; see its input modes with `{}`",
            paste("card get", "")
        ),
        ErrorKind::ExtendedAgentCardNotConfigured => format!(
            "this agent has no extended card; use `{}` without --extended",
            paste("card get", "")
        ),
        _ if ctx.continuing => debug.into(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_types::A2aError;

    #[test]
    fn protocol_errors_keep_their_name() {
        let e = CliError::from_client(
            &ClientError::from(A2aError::task_not_found("t1")),
            &ErrorContext::default(),
        );
        assert_eq!(e.code, "TaskNotFoundError");
        assert_eq!(e.exit, exit::FAILURE);
        assert_eq!(e.envelope()["error"]["a2aCode"], -32001);
    }

    #[test]
    fn auth_errors_depend_on_credentials() {
        let err = ClientError::from(A2aError::new(ErrorKind::Unauthenticated, "no"));
        let e = CliError::from_client(&err, &ErrorContext::default());
        assert_eq!(
            (e.code.as_str(), e.exit),
            (code::CREDENTIALS_MISSING, exit::AUTH)
        );
        let ctx = ErrorContext {
            credentials_given: true,
            ..Default::default()
        };
        let e = CliError::from_client(&err, &ctx);
        assert_eq!(e.code, code::AUTH_FAILED);
    }
}
