//! Conversions between the 0.3 data model (`types.rs`) and the 1.0 one, in
//! both directions, by move: the strings, vectors, metadata and timestamps
//! are handed over, not copied.
//!
//! Where 0.3 cannot say what 1.0 says, the loss is written down at the
//! conversion (a text part's media type, a role left unspecified...).
//!
//! The server needs requests one way and answers the other; a client of
//! 0.3 agents needs the other directions. The round-trip tests (in the
//! server's compatibility module) check every type both ways.

use crate as v1;
use crate::wkt::value::Kind;
use crate::{A2aError, A2aResult, Struct, Value};
use base64::Engine;

use super::types as v03;

/// The metadata key marking a data part whose 1.0 content is not a JSON
/// object (0.3 data parts hold objects only): the content travels as
/// `{"value": ...}` with this key set to `true` in the part's metadata,
/// the same marker the official SDKs use, so it comes back unchanged.
pub const DATA_PART_COMPAT: &str = "data_part_compat";

// ---------------------------------------------------------------- enums

/// A 0.3 role (`user`, `agent`) as the 1.0 role.
pub fn role_to_v1(r: v03::Role) -> v1::Role {
    match r {
        v03::Role::User => v1::Role::User,
        v03::Role::Agent => v1::Role::Agent,
    }
}

/// 0.3 has no unspecified role: a message that names none is the agent's
/// (only the agent's own messages can come out without one; requests
/// without a role are refused by the handler before anything is sent).
pub fn role_to_v03(r: i32) -> v03::Role {
    match v1::Role::try_from(r) {
        Ok(v1::Role::User) => v03::Role::User,
        _ => v03::Role::Agent,
    }
}

/// A 0.3 task state (kebab-case: `input-required`...) as the 1.0 state;
/// `unknown` is 1.0's unspecified state.
pub fn state_to_v1(s: v03::TaskState) -> v1::TaskState {
    use v03::TaskState as S;
    match s {
        S::Submitted => v1::TaskState::Submitted,
        S::Working => v1::TaskState::Working,
        S::InputRequired => v1::TaskState::InputRequired,
        S::Completed => v1::TaskState::Completed,
        S::Canceled => v1::TaskState::Canceled,
        S::Failed => v1::TaskState::Failed,
        S::Rejected => v1::TaskState::Rejected,
        S::AuthRequired => v1::TaskState::AuthRequired,
        S::Unknown => v1::TaskState::Unspecified,
    }
}

/// A 1.0 task state as 0.3's; an unspecified or unknown number is
/// `unknown`.
pub fn state_to_v03(s: i32) -> v03::TaskState {
    use v03::TaskState as S;
    match v1::TaskState::try_from(s).unwrap_or(v1::TaskState::Unspecified) {
        v1::TaskState::Submitted => S::Submitted,
        v1::TaskState::Working => S::Working,
        v1::TaskState::InputRequired => S::InputRequired,
        v1::TaskState::Completed => S::Completed,
        v1::TaskState::Canceled => S::Canceled,
        v1::TaskState::Failed => S::Failed,
        v1::TaskState::Rejected => S::Rejected,
        v1::TaskState::AuthRequired => S::AuthRequired,
        v1::TaskState::Unspecified => S::Unknown,
    }
}

// ---------------------------------------------------------------- parts

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

/// A 0.3 part as a 1.0 part. Fails only on a file whose `bytes` are not
/// base64.
pub fn part_to_v1(p: v03::Part) -> A2aResult<v1::Part> {
    use v1::part::Content;
    Ok(match p {
        v03::Part::Text(t) => v1::Part {
            content: Some(Content::Text(t.text)),
            metadata: t.metadata,
            ..Default::default()
        },
        v03::Part::File(f) => {
            let (content, mime_type, name) = match f.file {
                v03::File::Bytes(b) => {
                    let raw = base64::engine::general_purpose::STANDARD
                        .decode(b.bytes.trim())
                        .map_err(|e| {
                            A2aError::invalid_params(
                                "file.bytes",
                                format!("must be base64 (standard alphabet): {e}"),
                            )
                        })?;
                    (Content::Raw(raw.into()), b.mime_type, b.name)
                }
                v03::File::Uri(u) => (Content::Url(u.uri), u.mime_type, u.name),
            };
            v1::Part {
                content: Some(content),
                metadata: f.metadata,
                filename: name.unwrap_or_default(),
                media_type: mime_type.unwrap_or_default(),
            }
        }
        v03::Part::Data(d) => {
            let mut metadata = d.metadata;
            let wrapped = metadata
                .as_mut()
                .and_then(|m| m.fields.remove(DATA_PART_COMPAT))
                .is_some_and(|v| matches!(v.kind, Some(Kind::BoolValue(true))));
            if metadata.as_ref().is_some_and(|m| m.fields.is_empty()) {
                metadata = None;
            }
            let mut data = d.data;
            let value = match wrapped.then(|| data.fields.remove("value")).flatten() {
                Some(inner) => inner,
                None => Value {
                    kind: Some(Kind::StructValue(data)),
                },
            };
            v1::Part {
                content: Some(Content::Data(value)),
                metadata,
                ..Default::default()
            }
        }
    })
}

/// A 1.0 part as a 0.3 part. A text part's `mediaType` and `filename`,
/// and a data part's, have no place in 0.3 and are left out; a part with
/// no content becomes an empty text.
pub fn part_to_v03(p: v1::Part) -> v03::Part {
    use v1::part::Content;
    match p.content {
        None | Some(Content::Text(_)) => v03::Part::Text(v03::TextPart {
            text: match p.content {
                Some(Content::Text(t)) => t,
                _ => String::new(),
            },
            metadata: p.metadata,
        }),
        Some(Content::Raw(raw)) => v03::Part::File(v03::FilePart {
            file: v03::File::Bytes(v03::FileWithBytes {
                bytes: base64::engine::general_purpose::STANDARD.encode(&raw),
                mime_type: non_empty(p.media_type),
                name: non_empty(p.filename),
            }),
            metadata: p.metadata,
        }),
        Some(Content::Url(uri)) => v03::Part::File(v03::FilePart {
            file: v03::File::Uri(v03::FileWithUri {
                uri,
                mime_type: non_empty(p.media_type),
                name: non_empty(p.filename),
            }),
            metadata: p.metadata,
        }),
        Some(Content::Data(value)) => match value.kind {
            Some(Kind::StructValue(data)) => v03::Part::Data(v03::DataPart {
                data,
                metadata: p.metadata,
            }),
            other => {
                let mut metadata = p.metadata.unwrap_or_default();
                metadata.fields.insert(
                    DATA_PART_COMPAT.to_owned(),
                    Value {
                        kind: Some(Kind::BoolValue(true)),
                    },
                );
                let mut data = Struct::default();
                data.fields
                    .insert("value".to_owned(), Value { kind: other });
                v03::Part::Data(v03::DataPart {
                    data,
                    metadata: Some(metadata),
                })
            }
        },
    }
}

fn parts_to_v1(parts: Vec<v03::Part>) -> A2aResult<Vec<v1::Part>> {
    parts.into_iter().map(part_to_v1).collect()
}

fn parts_to_v03(parts: Vec<v1::Part>) -> Vec<v03::Part> {
    parts.into_iter().map(part_to_v03).collect()
}

// ------------------------------------------------- messages and artifacts

/// A 0.3 message as the 1.0 message (parts by [`part_to_v1`]). Fails on a
/// part that does not convert.
pub fn message_to_v1(m: v03::Message) -> A2aResult<v1::Message> {
    Ok(v1::Message {
        message_id: m.message_id,
        context_id: m.context_id,
        task_id: m.task_id,
        role: role_to_v1(m.role) as i32,
        parts: parts_to_v1(m.parts)?,
        metadata: m.metadata,
        extensions: m.extensions,
        reference_task_ids: m.reference_task_ids,
    })
}

/// A 1.0 message as a 0.3 message (parts by [`part_to_v03`]).
pub fn message_to_v03(m: v1::Message) -> v03::Message {
    v03::Message {
        kind: v03::MessageKind,
        message_id: m.message_id,
        role: role_to_v03(m.role),
        parts: parts_to_v03(m.parts),
        context_id: m.context_id,
        task_id: m.task_id,
        reference_task_ids: m.reference_task_ids,
        extensions: m.extensions,
        metadata: m.metadata,
    }
}

/// A 0.3 artifact as the 1.0 artifact. Fails on a part that does not
/// convert.
pub fn artifact_to_v1(a: v03::Artifact) -> A2aResult<v1::Artifact> {
    Ok(v1::Artifact {
        artifact_id: a.artifact_id,
        name: a.name,
        description: a.description,
        parts: parts_to_v1(a.parts)?,
        metadata: a.metadata,
        extensions: a.extensions,
    })
}

/// A 1.0 artifact as a 0.3 artifact.
pub fn artifact_to_v03(a: v1::Artifact) -> v03::Artifact {
    v03::Artifact {
        artifact_id: a.artifact_id,
        name: a.name,
        description: a.description,
        parts: parts_to_v03(a.parts),
        extensions: a.extensions,
        metadata: a.metadata,
    }
}

// ------------------------------------------------------------- tasks

/// A 0.3 task status (state, message, timestamp) as the 1.0 status.
pub fn status_to_v1(s: v03::TaskStatus) -> A2aResult<v1::TaskStatus> {
    Ok(v1::TaskStatus {
        state: state_to_v1(s.state) as i32,
        message: s
            .message
            .map(|m| message_to_v1(*m).map(Box::new))
            .transpose()?,
        timestamp: s.timestamp,
    })
}

/// A 1.0 task status as the 0.3 status.
pub fn status_to_v03(s: v1::TaskStatus) -> v03::TaskStatus {
    v03::TaskStatus {
        state: state_to_v03(s.state),
        message: s.message.map(|m| Box::new(message_to_v03(*m))),
        timestamp: s.timestamp,
    }
}

/// A 0.3 task (status, artifacts, history, metadata) as the 1.0 task.
pub fn task_to_v1(t: v03::Task) -> A2aResult<v1::Task> {
    Ok(v1::Task {
        generation: 0,
        id: t.id,
        context_id: t.context_id,
        status: Some(status_to_v1(t.status)?),
        artifacts: t
            .artifacts
            .into_iter()
            .map(artifact_to_v1)
            .collect::<A2aResult<_>>()?,
        history: t
            .history
            .into_iter()
            .map(message_to_v1)
            .collect::<A2aResult<_>>()?,
        metadata: t.metadata,
    })
}

/// A 1.0 task as a 0.3 task (a task without a status is `unknown`).
pub fn task_to_v03(t: v1::Task) -> v03::Task {
    v03::Task {
        kind: v03::TaskKind,
        id: t.id,
        context_id: t.context_id,
        status: status_to_v03(t.status.unwrap_or_default()),
        history: t.history.into_iter().map(message_to_v03).collect(),
        artifacts: t.artifacts.into_iter().map(artifact_to_v03).collect(),
        metadata: t.metadata,
    }
}

/// A task the handler shares (the in-memory store's copy): moved out when
/// nobody else holds it, copied otherwise.
pub fn shared_task_to_v03(t: std::sync::Arc<v1::Task>) -> v03::Task {
    task_to_v03(std::sync::Arc::try_unwrap(t).unwrap_or_else(|t| (*t).clone()))
}

// ------------------------------------------------------------- events

/// A 1.0 status update as a 0.3 one: `final` is set on the update that
/// ends the stream (a terminal or interrupted state), the rule 1.0 keeps
/// without a flag.
pub fn status_update_to_v03(e: v1::TaskStatusUpdateEvent) -> v03::TaskStatusUpdateEvent {
    let status = e.status.unwrap_or_default();
    let is_final = status.state().ends_turn();
    v03::TaskStatusUpdateEvent {
        kind: v03::StatusUpdateKind,
        task_id: e.task_id,
        context_id: e.context_id,
        status: status_to_v03(status),
        is_final,
        metadata: e.metadata,
    }
}

/// A 0.3 status update as a 1.0 one (`final` is implied by the state).
pub fn status_update_to_v1(e: v03::TaskStatusUpdateEvent) -> A2aResult<v1::TaskStatusUpdateEvent> {
    Ok(v1::TaskStatusUpdateEvent {
        generation: 0,
        task_id: e.task_id,
        context_id: e.context_id,
        status: Some(status_to_v1(e.status)?),
        metadata: e.metadata,
    })
}

/// A 1.0 artifact update (`append`, `lastChunk`) as the 0.3 event.
pub fn artifact_update_to_v03(e: v1::TaskArtifactUpdateEvent) -> v03::TaskArtifactUpdateEvent {
    v03::TaskArtifactUpdateEvent {
        kind: v03::ArtifactUpdateKind,
        task_id: e.task_id,
        context_id: e.context_id,
        artifact: artifact_to_v03(e.artifact.unwrap_or_default()),
        append: e.append,
        last_chunk: e.last_chunk,
        metadata: e.metadata,
    }
}

/// A 0.3 artifact update as the 1.0 event.
pub fn artifact_update_to_v1(
    e: v03::TaskArtifactUpdateEvent,
) -> A2aResult<v1::TaskArtifactUpdateEvent> {
    Ok(v1::TaskArtifactUpdateEvent {
        generation: 0,
        task_id: e.task_id,
        context_id: e.context_id,
        artifact: Some(artifact_to_v1(e.artifact)?),
        append: e.append,
        last_chunk: e.last_chunk,
        metadata: e.metadata,
    })
}

/// A 1.0 stream event as a 0.3 one (`None` for an empty event, which the
/// handler never sends).
pub fn stream_event_to_v03(e: v1::StreamResponse) -> Option<v03::StreamEvent> {
    use v1::stream_response::Payload;
    Some(match e.payload? {
        Payload::Task(t) => v03::StreamEvent::Task(task_to_v03(t)),
        Payload::Message(m) => v03::StreamEvent::Message(message_to_v03(m)),
        Payload::StatusUpdate(u) => v03::StreamEvent::StatusUpdate(status_update_to_v03(u)),
        Payload::ArtifactUpdate(u) => v03::StreamEvent::ArtifactUpdate(artifact_update_to_v03(u)),
    })
}

/// A 0.3 stream event (`kind`: task, message, status-update, artifact-
/// update) as the 1.0 `StreamResponse`.
pub fn stream_event_to_v1(e: v03::StreamEvent) -> A2aResult<v1::StreamResponse> {
    Ok(match e {
        v03::StreamEvent::Task(t) => task_to_v1(t)?.into(),
        v03::StreamEvent::Message(m) => message_to_v1(m)?.into(),
        v03::StreamEvent::StatusUpdate(u) => status_update_to_v1(u)?.into(),
        v03::StreamEvent::ArtifactUpdate(u) => artifact_update_to_v1(u)?.into(),
    })
}

/// The answer of a 1.0 `SendMessage` as the 0.3 `message/send` result
/// (`None` for an empty answer).
pub fn send_result_to_v03(r: v1::SendMessageResponse) -> Option<v03::SendResult> {
    use v1::send_message_response::Payload;
    Some(match r.payload? {
        Payload::Task(t) => v03::SendResult::Task(task_to_v03(t)),
        Payload::Message(m) => v03::SendResult::Message(message_to_v03(m)),
    })
}

/// A 0.3 `message/send` result (a task or a message) as the 1.0 answer.
pub fn send_result_to_v1(r: v03::SendResult) -> A2aResult<v1::SendMessageResponse> {
    Ok(match r {
        v03::SendResult::Task(t) => task_to_v1(t)?.into(),
        v03::SendResult::Message(m) => message_to_v1(m)?.into(),
    })
}

// ------------------------------------------------ push notification configs

/// 0.3 lists authentication schemes, 1.0 names one: the first is kept.
fn auth_to_v1(a: v03::PushAuthentication) -> v1::AuthenticationInfo {
    v1::AuthenticationInfo {
        scheme: a.schemes.into_iter().next().unwrap_or_default(),
        credentials: a.credentials.unwrap_or_default(),
    }
}

fn auth_to_v03(a: v1::AuthenticationInfo) -> v03::PushAuthentication {
    v03::PushAuthentication {
        schemes: if a.scheme.is_empty() {
            Vec::new()
        } else {
            vec![a.scheme]
        },
        credentials: non_empty(a.credentials),
    }
}

/// A 0.3 push config of a task as the 1.0 config.
pub fn push_config_to_v1(
    task_id: String,
    c: v03::PushNotificationConfig,
) -> v1::TaskPushNotificationConfig {
    v1::TaskPushNotificationConfig {
        tenant: String::new(),
        id: c.id,
        task_id,
        url: c.url,
        token: c.token,
        authentication: c.authentication.map(auth_to_v1),
    }
}

/// The 1.0 config's own part, as 0.3 nests it.
pub fn push_config_to_v03(
    c: v1::TaskPushNotificationConfig,
) -> (String, v03::PushNotificationConfig) {
    (
        c.task_id,
        v03::PushNotificationConfig {
            id: c.id,
            url: c.url,
            token: c.token,
            authentication: c.authentication.map(auth_to_v03),
        },
    )
}

/// A 0.3 task push config (`taskId` and the nested config) as the flat 1.0
/// config.
pub fn task_push_config_to_v1(
    c: v03::TaskPushNotificationConfig,
) -> v1::TaskPushNotificationConfig {
    push_config_to_v1(c.task_id, c.push_notification_config)
}

/// A flat 1.0 task push config as 0.3's (the config nested under
/// `pushNotificationConfig`; the tenant has no place in 0.3).
pub fn task_push_config_to_v03(
    c: v1::TaskPushNotificationConfig,
) -> v03::TaskPushNotificationConfig {
    let (task_id, push_notification_config) = push_config_to_v03(c);
    v03::TaskPushNotificationConfig {
        task_id,
        push_notification_config,
    }
}

// ---------------------------------------------------------------- requests

/// 0.3 `historyLength` of 0 (or none) means the whole history; in 1.0 an
/// absent length does, and 0 means none.
fn history_to_v1(n: Option<i32>) -> Option<i32> {
    n.filter(|n| *n != 0)
}

/// `message/send` and `message/stream` params as the 1.0 request.
///
/// `blocking` absent means blocking in 0.3 as in 1.0 (`returnImmediately`
/// false); a push config in the configuration gets no task id (the task
/// does not exist yet; the handler fills it in).
pub fn send_params_to_v1(p: v03::MessageSendParams) -> A2aResult<v1::SendMessageRequest> {
    let configuration = p.configuration.map(|c| v1::SendMessageConfiguration {
        if_generation_match: None,
        accepted_output_modes: c.accepted_output_modes,
        task_push_notification_config: c
            .push_notification_config
            .map(|pc| push_config_to_v1(String::new(), pc)),
        history_length: history_to_v1(c.history_length),
        return_immediately: c.blocking == Some(false),
    });
    Ok(v1::SendMessageRequest {
        tenant: String::new(),
        message: Some(message_to_v1(p.message)?),
        configuration,
        metadata: p.metadata,
    })
}

/// A 1.0 send request as 0.3 params (used by the tests and by callers of
/// 0.3 agents; the tenant has no place in 0.3).
pub fn send_request_to_v03(r: v1::SendMessageRequest) -> v03::MessageSendParams {
    v03::MessageSendParams {
        message: message_to_v03(r.message.unwrap_or_default()),
        configuration: r.configuration.map(|c| v03::MessageSendConfiguration {
            accepted_output_modes: c.accepted_output_modes,
            blocking: Some(!c.return_immediately),
            history_length: c.history_length,
            push_notification_config: c
                .task_push_notification_config
                .map(|pc| push_config_to_v03(pc).1),
        }),
        metadata: r.metadata,
    }
}

/// `tasks/get` params as the 1.0 `GetTask` request.
pub fn get_task_to_v1(p: v03::TaskQueryParams) -> v1::GetTaskRequest {
    v1::GetTaskRequest {
        current_generation: None,
        tenant: String::new(),
        id: p.id,
        history_length: history_to_v1(p.history_length),
    }
}

/// `tasks/cancel` params as the 1.0 `CancelTask` request.
pub fn cancel_to_v1(p: v03::TaskIdParams) -> v1::CancelTaskRequest {
    v1::CancelTaskRequest {
        tenant: String::new(),
        id: p.id,
        metadata: p.metadata,
    }
}

/// `tasks/resubscribe` params as the 1.0 `SubscribeToTask` request.
pub fn subscribe_to_v1(p: v03::TaskIdParams) -> v1::SubscribeToTaskRequest {
    v1::SubscribeToTaskRequest {
        tenant: String::new(),
        id: p.id,
    }
}

/// A 1.0 `GetTask` request as `tasks/get` params. A 1.0 length of 0 ("no
/// messages") has no 0.3 form (0 means all there) and asks for one.
pub fn get_task_to_v03(r: v1::GetTaskRequest) -> v03::TaskQueryParams {
    v03::TaskQueryParams {
        id: r.id,
        history_length: r.history_length.map(|n| n.max(1)),
        metadata: None,
    }
}

/// A 1.0 `CancelTask` request as `tasks/cancel` params.
pub fn cancel_to_v03(r: v1::CancelTaskRequest) -> v03::TaskIdParams {
    v03::TaskIdParams {
        id: r.id,
        metadata: r.metadata,
    }
}

/// A 1.0 `SubscribeToTask` request as `tasks/resubscribe` params.
pub fn subscribe_to_v03(r: v1::SubscribeToTaskRequest) -> v03::TaskIdParams {
    v03::TaskIdParams {
        id: r.id,
        metadata: None,
    }
}
