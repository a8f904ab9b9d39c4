//! The bodies of the 0.3 HTTP+JSON binding (`/v1/message:send`,
//! `/v1/tasks/{id}`...), shared by the server's 0.3 routes and the
//! client's 0.3 transport.
//!
//! 0.3's HTTP+JSON bodies are not the JSON-RPC objects: they are the
//! ProtoJSON form of the 0.3 protobuf messages (package `a2a.v1`), as the
//! official SDKs send them: `content` for a message's parts, a part as
//! `{"text"}`, `{"file": {"fileWithUri" | "fileWithBytes", "mimeType"}}` or
//! `{"data": {"data": {...}}}`, enum names (`ROLE_USER`,
//! `TASK_STATE_CANCELLED`), results wrapped as `{"task"}` / `{"message"}`,
//! events as `{"statusUpdate"}`..., push configs named
//! `tasks/{id}/pushNotificationConfigs/{configId}`. The structs here are
//! that form; they convert to and from the JSON-RPC form (`types.rs`),
//! whose conversions to 1.0 are reused.
//!
//! What this form cannot carry: a part's metadata and a file's name, a
//! message's `referenceTaskIds` (the 0.3 protobuf messages have no such
//! fields).
//!
//! Differences from the JSON-RPC form, and what is done:
//!
//! - Blocking: ProtoJSON leaves out a `false`, so a `configuration`
//!   without `blocking` means non-blocking (what the 0.3 protobuf says);
//!   a request without `configuration` blocks.
//! - Errors: HTTP statuses as the 0.3 servers answer them (task not found
//!   404, not cancelable 409, unsupported 501, invalid params 422...),
//!   the body `{"code", "message", "data"}` as in JSON-RPC.
//! - `GET /v1/tasks` (listing) is not served: 0.3 clients have no such
//!   call; 1.0's `GET /tasks` lists.

use crate::{A2aError, Struct, Timestamp};
use serde::{Deserialize, Serialize};

use super::types as v03;

// ------------------------------------------------------------ the form

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    #[serde(rename = "ROLE_UNSPECIFIED")]
    Unspecified,
    #[serde(rename = "ROLE_USER")]
    User,
    #[serde(rename = "ROLE_AGENT")]
    Agent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum State {
    #[serde(rename = "TASK_STATE_UNSPECIFIED")]
    Unspecified,
    #[serde(rename = "TASK_STATE_SUBMITTED")]
    Submitted,
    #[serde(rename = "TASK_STATE_WORKING")]
    Working,
    #[serde(rename = "TASK_STATE_COMPLETED")]
    Completed,
    #[serde(rename = "TASK_STATE_FAILED")]
    Failed,
    /// Spelled with two Ls in 0.3 (one in 1.0; both read).
    #[serde(rename = "TASK_STATE_CANCELLED", alias = "TASK_STATE_CANCELED")]
    Cancelled,
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED")]
    InputRequired,
    #[serde(rename = "TASK_STATE_REJECTED")]
    Rejected,
    #[serde(rename = "TASK_STATE_AUTH_REQUIRED")]
    AuthRequired,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FilePart {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "file_with_uri"
    )]
    pub file_with_uri: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "file_with_bytes"
    )]
    pub file_with_bytes: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty", alias = "mime_type")]
    pub mime_type: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DataPart {
    #[serde(default)]
    pub data: Struct,
}

/// A part: one of the three members.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Part {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FilePart>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataPart>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    #[serde(default, alias = "message_id")]
    pub message_id: String,
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        alias = "context_id"
    )]
    pub context_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty", alias = "task_id")]
    pub task_id: String,
    #[serde(default = "unspecified_role")]
    pub role: Role,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::limits::parts"
    )]
    pub content: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::limits::list"
    )]
    pub extensions: Vec<String>,
}

fn unspecified_role() -> Role {
    Role::Unspecified
}

fn unspecified_state() -> State {
    State::Unspecified
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    #[serde(default = "unspecified_state")]
    pub state: State,
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "update")]
    pub message: Option<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    #[serde(default, alias = "artifact_id")]
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: String,
    #[serde(default, alias = "context_id")]
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusUpdate {
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(default, alias = "context_id")]
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(rename = "final", default, skip_serializing_if = "is_false")]
    pub is_final: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactUpdate {
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(default, alias = "context_id")]
    pub context_id: String,
    pub artifact: Artifact,
    #[serde(default, skip_serializing_if = "is_false")]
    pub append: bool,
    #[serde(default, skip_serializing_if = "is_false", alias = "last_chunk")]
    pub last_chunk: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

/// `SendMessageResponse` and `StreamResponse`: one member set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamResponse {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<Task>,
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "msg")]
    pub message: Option<Message>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "status_update"
    )]
    pub status_update: Option<StatusUpdate>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "artifact_update"
    )]
    pub artifact_update: Option<ArtifactUpdate>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushAuthentication {
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::limits::list"
    )]
    pub schemes: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub credentials: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushConfig {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    #[serde(default)]
    pub url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<PushAuthentication>,
}

/// `{"name": "tasks/{id}/pushNotificationConfigs/{configId}",
/// "pushNotificationConfig": {...}}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushConfig {
    #[serde(default)]
    pub name: String,
    #[serde(default, alias = "push_notification_config")]
    pub push_notification_config: PushConfig,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatePushConfigRequest {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub parent: String,
    #[serde(default, skip_serializing_if = "String::is_empty", alias = "config_id")]
    pub config_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<TaskPushConfig>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendConfiguration {
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        alias = "accepted_output_modes",
        deserialize_with = "crate::limits::list"
    )]
    pub accepted_output_modes: Vec<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "push_notification"
    )]
    pub push_notification: Option<PushConfig>,
    #[serde(default, skip_serializing_if = "is_zero", alias = "history_length")]
    pub history_length: i32,
    #[serde(default, skip_serializing_if = "is_false")]
    pub blocking: bool,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendRequest {
    #[serde(alias = "request")]
    pub message: Message,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPushConfigsResponse {
    #[serde(default)]
    pub configs: Vec<TaskPushConfig>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub next_page_token: String,
}

// ------------------------------------ to and from the JSON-RPC form

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

pub fn part_from(p: Part) -> Result<v03::Part, A2aError> {
    if let Some(text) = p.text {
        return Ok(v03::Part::Text(v03::TextPart {
            text,
            metadata: None,
        }));
    }
    if let Some(f) = p.file {
        let mime_type = non_empty(f.mime_type);
        let file = match (f.file_with_bytes, f.file_with_uri) {
            (Some(bytes), _) => v03::File::Bytes(v03::FileWithBytes {
                bytes,
                mime_type,
                name: None,
            }),
            (None, Some(uri)) => v03::File::Uri(v03::FileWithUri {
                uri,
                mime_type,
                name: None,
            }),
            (None, None) => {
                return Err(A2aError::invalid_params(
                    "file",
                    "a file part needs fileWithUri or fileWithBytes",
                ));
            }
        };
        return Ok(v03::Part::File(v03::FilePart {
            file,
            metadata: None,
        }));
    }
    if let Some(d) = p.data {
        return Ok(v03::Part::Data(v03::DataPart {
            data: d.data,
            metadata: None,
        }));
    }
    Err(A2aError::invalid_params(
        "content",
        "a part needs text, file or data",
    ))
}

pub fn part_to(p: v03::Part) -> Part {
    match p {
        v03::Part::Text(t) => Part {
            text: Some(t.text),
            ..Default::default()
        },
        v03::Part::File(f) => Part {
            file: Some(match f.file {
                v03::File::Bytes(b) => FilePart {
                    file_with_bytes: Some(b.bytes),
                    mime_type: b.mime_type.unwrap_or_default(),
                    ..Default::default()
                },
                v03::File::Uri(u) => FilePart {
                    file_with_uri: Some(u.uri),
                    mime_type: u.mime_type.unwrap_or_default(),
                    ..Default::default()
                },
            }),
            ..Default::default()
        },
        v03::Part::Data(d) => Part {
            data: Some(DataPart { data: d.data }),
            ..Default::default()
        },
    }
}

pub fn message_from(m: Message) -> Result<v03::Message, A2aError> {
    Ok(v03::Message {
        kind: v03::MessageKind,
        message_id: m.message_id,
        role: match m.role {
            Role::User => v03::Role::User,
            Role::Agent => v03::Role::Agent,
            Role::Unspecified => {
                return Err(A2aError::invalid_params(
                    "message.role",
                    "a role is required (ROLE_USER or ROLE_AGENT)",
                ));
            }
        },
        parts: m
            .content
            .into_iter()
            .map(part_from)
            .collect::<Result<_, _>>()?,
        context_id: m.context_id,
        task_id: m.task_id,
        reference_task_ids: Vec::new(),
        extensions: m.extensions,
        metadata: m.metadata,
    })
}

pub fn message_to(m: v03::Message) -> Message {
    Message {
        message_id: m.message_id,
        context_id: m.context_id,
        task_id: m.task_id,
        role: match m.role {
            v03::Role::User => Role::User,
            v03::Role::Agent => Role::Agent,
        },
        content: m.parts.into_iter().map(part_to).collect(),
        metadata: m.metadata,
        extensions: m.extensions,
    }
}

fn state_from(s: State) -> v03::TaskState {
    use v03::TaskState as S;
    match s {
        State::Unspecified => S::Unknown,
        State::Submitted => S::Submitted,
        State::Working => S::Working,
        State::Completed => S::Completed,
        State::Failed => S::Failed,
        State::Cancelled => S::Canceled,
        State::InputRequired => S::InputRequired,
        State::Rejected => S::Rejected,
        State::AuthRequired => S::AuthRequired,
    }
}

fn state_to(s: v03::TaskState) -> State {
    use v03::TaskState as S;
    match s {
        S::Unknown => State::Unspecified,
        S::Submitted => State::Submitted,
        S::Working => State::Working,
        S::Completed => State::Completed,
        S::Failed => State::Failed,
        S::Canceled => State::Cancelled,
        S::InputRequired => State::InputRequired,
        S::Rejected => State::Rejected,
        S::AuthRequired => State::AuthRequired,
    }
}

pub fn status_from(s: TaskStatus) -> Result<v03::TaskStatus, A2aError> {
    Ok(v03::TaskStatus {
        state: state_from(s.state),
        message: s.message.map(message_from).transpose()?.map(Box::new),
        timestamp: s.timestamp,
    })
}

pub fn status_to(s: v03::TaskStatus) -> TaskStatus {
    TaskStatus {
        state: state_to(s.state),
        message: s.message.map(|m| message_to(*m)),
        timestamp: s.timestamp,
    }
}

pub fn artifact_from(a: Artifact) -> Result<v03::Artifact, A2aError> {
    Ok(v03::Artifact {
        artifact_id: a.artifact_id,
        name: a.name,
        description: a.description,
        parts: a
            .parts
            .into_iter()
            .map(part_from)
            .collect::<Result<_, _>>()?,
        extensions: a.extensions,
        metadata: a.metadata,
    })
}

pub fn artifact_to(a: v03::Artifact) -> Artifact {
    Artifact {
        artifact_id: a.artifact_id,
        name: a.name,
        description: a.description,
        parts: a.parts.into_iter().map(part_to).collect(),
        metadata: a.metadata,
        extensions: a.extensions,
    }
}

pub fn task_from(t: Task) -> Result<v03::Task, A2aError> {
    Ok(v03::Task {
        kind: v03::TaskKind,
        id: t.id,
        context_id: t.context_id,
        status: status_from(t.status)?,
        history: t
            .history
            .into_iter()
            .map(message_from)
            .collect::<Result<_, _>>()?,
        artifacts: t
            .artifacts
            .into_iter()
            .map(artifact_from)
            .collect::<Result<_, _>>()?,
        metadata: t.metadata,
    })
}

pub fn task_to(t: v03::Task) -> Task {
    Task {
        id: t.id,
        context_id: t.context_id,
        status: status_to(t.status),
        artifacts: t.artifacts.into_iter().map(artifact_to).collect(),
        history: t.history.into_iter().map(message_to).collect(),
        metadata: t.metadata,
    }
}

pub fn event_to(e: v03::StreamEvent) -> StreamResponse {
    match e {
        v03::StreamEvent::Task(t) => StreamResponse {
            task: Some(task_to(t)),
            ..Default::default()
        },
        v03::StreamEvent::Message(m) => StreamResponse {
            message: Some(message_to(m)),
            ..Default::default()
        },
        v03::StreamEvent::StatusUpdate(u) => StreamResponse {
            status_update: Some(StatusUpdate {
                task_id: u.task_id,
                context_id: u.context_id,
                status: status_to(u.status),
                is_final: u.is_final,
                metadata: u.metadata,
            }),
            ..Default::default()
        },
        v03::StreamEvent::ArtifactUpdate(u) => StreamResponse {
            artifact_update: Some(ArtifactUpdate {
                task_id: u.task_id,
                context_id: u.context_id,
                artifact: artifact_to(u.artifact),
                append: u.append,
                last_chunk: u.last_chunk,
                metadata: u.metadata,
            }),
            ..Default::default()
        },
    }
}

pub fn event_from(e: StreamResponse) -> Result<v03::StreamEvent, A2aError> {
    Ok(match e {
        StreamResponse { task: Some(t), .. } => v03::StreamEvent::Task(task_from(t)?),
        StreamResponse {
            message: Some(m), ..
        } => v03::StreamEvent::Message(message_from(m)?),
        StreamResponse {
            status_update: Some(u),
            ..
        } => v03::StreamEvent::StatusUpdate(v03::TaskStatusUpdateEvent {
            kind: v03::StatusUpdateKind,
            task_id: u.task_id,
            context_id: u.context_id,
            status: status_from(u.status)?,
            is_final: u.is_final,
            metadata: u.metadata,
        }),
        StreamResponse {
            artifact_update: Some(u),
            ..
        } => v03::StreamEvent::ArtifactUpdate(v03::TaskArtifactUpdateEvent {
            kind: v03::ArtifactUpdateKind,
            task_id: u.task_id,
            context_id: u.context_id,
            artifact: artifact_from(u.artifact)?,
            append: u.append,
            last_chunk: u.last_chunk,
            metadata: u.metadata,
        }),
        _ => {
            return Err(A2aError::new(
                crate::ErrorKind::InvalidAgentResponse,
                "an empty stream response",
            ));
        }
    })
}

fn push_from(c: PushConfig) -> v03::PushNotificationConfig {
    v03::PushNotificationConfig {
        id: c.id,
        url: c.url,
        token: c.token,
        authentication: c.authentication.map(|a| v03::PushAuthentication {
            schemes: a.schemes,
            credentials: non_empty(a.credentials),
        }),
    }
}

fn push_to(c: v03::PushNotificationConfig) -> PushConfig {
    PushConfig {
        id: c.id,
        url: c.url,
        token: c.token,
        authentication: c.authentication.map(|a| PushAuthentication {
            schemes: a.schemes,
            credentials: a.credentials.unwrap_or_default(),
        }),
    }
}

pub fn task_push_to(c: v03::TaskPushNotificationConfig) -> TaskPushConfig {
    TaskPushConfig {
        name: format!(
            "tasks/{}/pushNotificationConfigs/{}",
            c.task_id, c.push_notification_config.id
        ),
        push_notification_config: push_to(c.push_notification_config),
    }
}

/// A config named `tasks/{id}/pushNotificationConfigs/{configId}`, for
/// `task_id` (the path's, which wins over the name's).
pub fn task_push_from(task_id: String, c: TaskPushConfig) -> v03::TaskPushNotificationConfig {
    let mut config = push_from(c.push_notification_config);
    if config.id.is_empty() {
        if let Some(id) = c
            .name
            .rsplit_once("/pushNotificationConfigs/")
            .map(|(_, id)| id)
        {
            config.id = id.to_owned();
        }
    }
    v03::TaskPushNotificationConfig {
        task_id,
        push_notification_config: config,
    }
}

pub fn send_from(r: SendRequest) -> Result<v03::MessageSendParams, A2aError> {
    Ok(v03::MessageSendParams {
        message: message_from(r.message)?,
        configuration: r.configuration.map(|c| v03::MessageSendConfiguration {
            accepted_output_modes: c.accepted_output_modes,
            blocking: Some(c.blocking),
            history_length: (c.history_length != 0).then_some(c.history_length),
            push_notification_config: c.push_notification.map(push_from),
        }),
        metadata: r.metadata,
    })
}

pub fn send_to(p: v03::MessageSendParams) -> SendRequest {
    SendRequest {
        message: message_to(p.message),
        configuration: p.configuration.map(|c| SendConfiguration {
            accepted_output_modes: c.accepted_output_modes,
            push_notification: c.push_notification_config.map(push_to),
            history_length: c.history_length.unwrap_or_default(),
            blocking: c.blocking.unwrap_or(true),
        }),
        metadata: p.metadata,
    }
}
