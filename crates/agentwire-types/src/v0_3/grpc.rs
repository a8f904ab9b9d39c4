//! The A2A 0.3 gRPC binding's messages (package `a2a.v1`, service
//! `a2a.v1.A2AService`) and the bridge between them and the 0.3 forms of
//! [`super::rest`] (feature `v0_3` with `grpc`).
//!
//! The 0.3 HTTP+JSON bodies are, by the 0.3 specification, the ProtoJSON
//! form of these very messages, and [`super::rest`] already converts that
//! form to the JSON-RPC objects (and so, through [`super::convert`], to
//! 1.0). So a gRPC message is bridged by writing it as ProtoJSON (the serde
//! generated with it) and reading that as the HTTP+JSON struct, and back:
//! [`to_form`] and [`from_form`]. The rules of what 0.3 can carry stay in
//! one place; the cost, one JSON value per call, is only paid by 0.3 gRPC
//! callers.
//!
//! What differs from HTTP+JSON:
//!
//! - Resource names: a task is named `tasks/{id}`, a push config
//!   `tasks/{id}/pushNotificationConfigs/{configId}` ([`task_id_of`],
//!   [`push_config_name_of`]).
//! - Blocking: as in HTTP+JSON, the protobuf `blocking` is `false` when
//!   absent, so a `configuration` without it does not block; a request
//!   without `configuration` blocks.
//! - Errors are gRPC statuses with the codes of 1.0 (task not found
//!   `NOT_FOUND`, not cancelable `FAILED_PRECONDITION`...) and the 1.0
//!   `google.rpc.ErrorInfo` details, which 0.3 SDKs read as a status.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{A2aError, ErrorKind};

/// The generated messages, client (`a2a_service_client`) and server
/// (`a2a_service_server`) of the 0.3 service.
#[allow(missing_docs, clippy::all)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/a2a.v1.rs"));
    include!(concat!(env!("OUT_DIR"), "/a2a.v1.serde.rs"));

    /// The encoded `FileDescriptorSet` of the 0.3 proto (with its
    /// imports), for gRPC server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/a2a_v03_descriptor.bin"));
}

/// The gRPC service name of A2A 0.3.
pub const SERVICE_NAME: &str = "a2a.v1.A2AService";

/// One value rewritten from one serde form into another through its JSON
/// value: a generated 0.3 message into its [`super::rest`] struct, or back.
fn transcode<T: Serialize, U: DeserializeOwned>(value: &T, what: &str) -> Result<U, A2aError> {
    let json = serde_json::to_value(value)
        .map_err(|e| A2aError::internal(format!("could not write the 0.3 {what}: {e}")))?;
    serde_json::from_value(json)
        .map_err(|e| A2aError::invalid_params("", format!("invalid 0.3 {what}: {e}")))
}

/// A generated 0.3 message as its HTTP+JSON struct (`rest::SendRequest`
/// from `proto::SendMessageRequest`...).
pub fn to_form<T: Serialize, U: DeserializeOwned>(message: &T, what: &str) -> Result<U, A2aError> {
    transcode(message, what)
}

/// An HTTP+JSON struct as the generated 0.3 message.
pub fn from_form<T: Serialize, U: DeserializeOwned>(form: &T, what: &str) -> Result<U, A2aError> {
    transcode(form, what).map_err(|e| A2aError::internal(e.message))
}

/// The task id of a resource name `tasks/{id}` (or of a longer name under
/// it: `tasks/{id}/pushNotificationConfigs/...`).
pub fn task_id_of(name: &str) -> Result<String, A2aError> {
    let rest = name.strip_prefix("tasks/").unwrap_or_default();
    let id = rest.split('/').next().unwrap_or_default();
    if id.is_empty() {
        return Err(A2aError::invalid_params(
            "name",
            format!("expected a task name of the form tasks/{{id}}, got {name:?}"),
        ));
    }
    Ok(id.to_owned())
}

/// The task id and config id of a resource name
/// `tasks/{id}/pushNotificationConfigs/{configId}`.
pub fn push_config_name_of(name: &str) -> Result<(String, String), A2aError> {
    let parts: Vec<&str> = name.split('/').collect();
    match parts.as_slice() {
        ["tasks", id, "pushNotificationConfigs", cid] if !id.is_empty() && !cid.is_empty() => {
            Ok(((*id).to_owned(), (*cid).to_owned()))
        }
        _ => Err(A2aError::new(
            ErrorKind::InvalidParams,
            format!(
                "expected a name of the form tasks/{{id}}/pushNotificationConfigs/{{configId}}, \
                 got {name:?}"
            ),
        )),
    }
}

/// A card document with the 0.3 fields (the 1.0 card as JSON, with what
/// the server's compatibility layer adds beside it) as the 0.3 protobuf
/// `AgentCard`. The two protobuf forms share most of their members
/// (security schemes, provider, skills, signatures); the 0.3 `security`
/// lists are the 1.0 `securityRequirements`, and members only 1.0 has are
/// left out.
pub fn card_to_proto(mut doc: serde_json::Value) -> Result<proto::AgentCard, A2aError> {
    fn security_from_requirements(obj: &mut serde_json::Map<String, serde_json::Value>) {
        match obj.remove("securityRequirements") {
            Some(reqs) => {
                obj.insert("security".into(), reqs);
            }
            None => {
                obj.remove("security");
            }
        }
    }
    if let Some(obj) = doc.as_object_mut() {
        security_from_requirements(obj);
        if let Some(serde_json::Value::Array(skills)) = obj.get_mut("skills") {
            for skill in skills.iter_mut().filter_map(|s| s.as_object_mut()) {
                security_from_requirements(skill);
            }
        }
    }
    serde_json::from_value(doc)
        .map_err(|e| A2aError::internal(format!("could not write the 0.3 agent card: {e}")))
}

/// The resource name of a task.
pub fn task_name(id: &str) -> String {
    format!("tasks/{id}")
}

/// The resource name of a task's push config.
pub fn push_config_name(task_id: &str, config_id: &str) -> String {
    format!("tasks/{task_id}/pushNotificationConfigs/{config_id}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v0_3::rest;

    #[test]
    fn names() {
        assert_eq!(task_id_of("tasks/abc").unwrap(), "abc");
        assert_eq!(
            task_id_of("tasks/abc/pushNotificationConfigs/x").unwrap(),
            "abc"
        );
        assert!(task_id_of("abc").is_err());
        assert!(task_id_of("tasks/").is_err());
        assert_eq!(
            push_config_name_of(&push_config_name("t", "c")).unwrap(),
            ("t".to_owned(), "c".to_owned())
        );
        assert!(push_config_name_of("tasks/t").is_err());
    }

    #[test]
    fn messages_bridge_both_ways() {
        let send = proto::SendMessageRequest {
            request: Some(proto::Message {
                message_id: "m1".into(),
                role: proto::Role::User as i32,
                content: vec![
                    proto::Part {
                        part: Some(proto::part::Part::Text("hi".into())),
                        metadata: None,
                    },
                    proto::Part {
                        part: Some(proto::part::Part::File(proto::FilePart {
                            file: Some(proto::file_part::File::FileWithBytes(b"abc".to_vec())),
                            mime_type: "text/plain".into(),
                            name: String::new(),
                        })),
                        metadata: None,
                    },
                ],
                ..Default::default()
            }),
            configuration: Some(proto::SendMessageConfiguration {
                blocking: true,
                history_length: 3,
                ..Default::default()
            }),
            metadata: None,
        };
        let form: rest::SendRequest = to_form(&send, "request").unwrap();
        assert_eq!(form.message.message_id, "m1");
        assert_eq!(form.message.role, rest::Role::User);
        assert_eq!(form.message.content[0].text.as_deref(), Some("hi"));
        let file = form.message.content[1].file.as_ref().unwrap();
        assert_eq!(file.file_with_bytes.as_deref(), Some("YWJj"));
        assert!(form.configuration.as_ref().unwrap().blocking);
        let back: proto::SendMessageRequest = from_form(&form, "request").unwrap();
        assert_eq!(back, send);

        let task = rest::Task {
            id: "t1".into(),
            context_id: "c1".into(),
            status: rest::TaskStatus {
                state: rest::State::Cancelled,
                message: None,
                timestamp: None,
            },
            artifacts: vec![],
            history: vec![],
            metadata: None,
        };
        let event = rest::StreamResponse {
            status_update: Some(rest::StatusUpdate {
                task_id: "t1".into(),
                context_id: "c1".into(),
                status: task.status.clone(),
                is_final: true,
                metadata: None,
            }),
            ..Default::default()
        };
        let pe: proto::StreamResponse = from_form(&event, "event").unwrap();
        match pe.payload {
            Some(proto::stream_response::Payload::StatusUpdate(u)) => {
                assert!(u.r#final);
                assert_eq!(u.status.unwrap().state, proto::TaskState::Cancelled as i32);
            }
            other => panic!("not a status update: {other:?}"),
        }
        let pt: proto::Task = from_form(&task, "task").unwrap();
        let again: rest::Task = to_form(&pt, "task").unwrap();
        assert_eq!(again, task);
    }
}
