//! The A2A 0.3 data model in its JSON-RPC form: objects told apart by a
//! `kind` member (`"task"`, `"message"`, `"status-update"`,
//! `"artifact-update"`; parts `"text"`, `"file"`, `"data"`), camelCase
//! names, lower-case roles and kebab-case task states.
//!
//! These are serde structs of their own (not the 1.0 prost types): the
//! shapes differ in too many places (a `kind` on every object, one part
//! type per content kind, `final` on status updates, push configs nested
//! in `{taskId, pushNotificationConfig}`) for attributes on the 1.0 types
//! to cover. Converting to and from the 1.0 model is in `convert.rs`; it
//! moves the strings and vectors, it does not copy them.
//!
//! Metadata and data parts use the 1.0 JSON object type ([`Struct`]) as
//! they are, and timestamps the 1.0 [`Timestamp`]: their JSON is the same
//! in both versions.

use std::borrow::Cow;

use crate::{Struct, Timestamp};
use serde::{Deserialize, Serialize};

/// A `kind` marker: always written, checked when present, and optional on
/// input (a few 0.3 clients leave it out of objects whose type the method
/// already says).
macro_rules! kind {
    ($name:ident, $lit:literal) => {
        #[doc = concat!("The `kind` value `\"", $lit, "\"`.")]
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $name;

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str($lit)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = Cow::<'de, str>::deserialize(d)?;
                if s == $lit {
                    Ok($name)
                } else {
                    Err(serde::de::Error::custom(format!(
                        concat!("kind must be \"", $lit, "\", got {:?}"),
                        s
                    )))
                }
            }
        }
    };
}

kind!(TaskKind, "task");
kind!(MessageKind, "message");
kind!(StatusUpdateKind, "status-update");
kind!(ArtifactUpdateKind, "artifact-update");

fn is_false(b: &bool) -> bool {
    !*b
}

/// Who sent a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The client.
    User,
    /// The agent.
    Agent,
}

/// The state of a task (kebab-case on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskState {
    Submitted,
    Working,
    InputRequired,
    Completed,
    Canceled,
    Failed,
    Rejected,
    AuthRequired,
    Unknown,
}

/// One piece of content (`kind` tells which).
///
/// Read by a reader of its own rather than serde's for internally tagged
/// enums, which buffers the whole part before it looks at `kind`: that
/// buffering reads metadata and data without the nesting limit of
/// [`Struct`] (serde_json's own, 128 levels, refused them first, with
/// another error) and without the field where it stopped.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Part {
    /// `{"kind": "text", "text": ...}`.
    Text(TextPart),
    /// `{"kind": "file", "file": {...}}`.
    File(FilePart),
    /// `{"kind": "data", "data": {...}}`.
    Data(DataPart),
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct PartVisitor;
        impl<'de> serde::de::Visitor<'de> for PartVisitor {
            type Value = Part;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a part object with a kind")
            }

            fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<Part, M::Error> {
                use serde::de::Error;
                let mut kind: Option<Cow<'de, str>> = None;
                let mut text: Option<String> = None;
                let mut file: Option<File> = None;
                let mut data: Option<Struct> = None;
                let mut metadata: Option<Option<Struct>> = None;
                fn once<T, E: Error>(slot: &Option<T>, name: &'static str) -> Result<(), E> {
                    match slot {
                        Some(_) => Err(E::duplicate_field(name)),
                        None => Ok(()),
                    }
                }
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    match &*key {
                        "kind" => {
                            once(&kind, "kind")?;
                            kind = Some(map.next_value()?);
                        }
                        "text" => {
                            once(&text, "text")?;
                            text = Some(map.next_value()?);
                        }
                        "file" => {
                            once(&file, "file")?;
                            file = Some(map.next_value()?);
                        }
                        "data" => {
                            once(&data, "data")?;
                            data = Some(map.next_value()?);
                        }
                        "metadata" => {
                            once(&metadata, "metadata")?;
                            metadata = Some(map.next_value()?);
                        }
                        _ => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                let metadata = metadata.flatten();
                match kind.as_deref() {
                    Some("text") => Ok(Part::Text(TextPart {
                        text: text.ok_or_else(|| M::Error::missing_field("text"))?,
                        metadata,
                    })),
                    Some("file") => Ok(Part::File(FilePart {
                        file: file.ok_or_else(|| M::Error::missing_field("file"))?,
                        metadata,
                    })),
                    Some("data") => Ok(Part::Data(DataPart {
                        data: data.ok_or_else(|| M::Error::missing_field("data"))?,
                        metadata,
                    })),
                    Some(other) => Err(M::Error::unknown_variant(other, &["text", "file", "data"])),
                    None => Err(M::Error::missing_field("kind")),
                }
            }
        }
        d.deserialize_map(PartVisitor)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextPart {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FilePart {
    pub file: File,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataPart {
    pub data: Struct,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

/// A file, inline (base64 `bytes`) or by `uri`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum File {
    Bytes(FileWithBytes),
    Uri(FileWithUri),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileWithBytes {
    /// Base64 (standard alphabet), decoded when converted.
    pub bytes: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileWithUri {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    #[serde(default)]
    pub kind: MessageKind,
    pub message_id: String,
    pub role: Role,
    #[serde(deserialize_with = "crate::limits::parts")]
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub context_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub task_id: String,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::limits::list"
    )]
    pub reference_task_ids: Vec<String>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::limits::list"
    )]
    pub extensions: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Box<Message>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    #[serde(default)]
    pub kind: TaskKind,
    pub id: String,
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    #[serde(default)]
    pub kind: StatusUpdateKind,
    pub task_id: String,
    pub context_id: String,
    pub status: TaskStatus,
    /// Whether the stream ends after this event.
    #[serde(rename = "final", default)]
    pub is_final: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    #[serde(default)]
    pub kind: ArtifactUpdateKind,
    pub task_id: String,
    pub context_id: String,
    pub artifact: Artifact,
    #[serde(default, skip_serializing_if = "is_false")]
    pub append: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub last_chunk: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

/// The result of `message/send`: a task or a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SendResult {
    Task(Task),
    Message(Message),
}

/// One event of `message/stream` and `tasks/resubscribe`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StreamEvent {
    Task(Task),
    Message(Message),
    StatusUpdate(TaskStatusUpdateEvent),
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushAuthentication {
    #[serde(deserialize_with = "crate::limits::list")]
    pub schemes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushNotificationConfig {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    pub url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<PushAuthentication>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfig {
    pub task_id: String,
    pub push_notification_config: PushNotificationConfig,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageSendConfiguration {
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::limits::list"
    )]
    pub accepted_output_modes: Vec<String>,
    /// Absent means blocking (the 0.3 servers' default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocking: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_notification_config: Option<PushNotificationConfig>,
}

/// The params of `message/send` and `message/stream`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageSendParams {
    pub message: Message,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<MessageSendConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

/// The params of `tasks/get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskQueryParams {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

/// The params of `tasks/cancel`, `tasks/resubscribe` and
/// `tasks/pushNotificationConfig/list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdParams {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

/// The params of `tasks/pushNotificationConfig/get` and `.../delete` (the
/// config id is optional for `get`: the task's only or first config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushConfigParams {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_notification_config_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> serde_json::Result<Part> {
        serde_json::from_str(text)
    }

    #[test]
    fn parts_are_read_by_kind_in_any_order() {
        let p = read(r#"{"text":"hi","metadata":{"a":1},"kind":"text","x":[1]}"#).unwrap();
        assert!(matches!(&p, Part::Text(t) if t.text == "hi" && t.metadata.is_some()));
        let p = read(r#"{"kind":"data","data":{"b":[true]},"metadata":null}"#).unwrap();
        assert!(
            matches!(&p, Part::Data(d) if d.data.fields.contains_key("b") && d.metadata.is_none())
        );
        let p = read(r#"{"kind":"file","file":{"uri":"https://x/y","name":"y"}}"#).unwrap();
        assert!(
            matches!(&p, Part::File(f) if matches!(&f.file, File::Uri(u) if u.uri == "https://x/y"))
        );
        // What serde's reader says of the wrong ones.
        for (text, says) in [
            (r#"{"text":"hi"}"#, "missing field `kind`"),
            (r#"{"kind":"data"}"#, "missing field `data`"),
            (
                r#"{"kind":"text","text":"a","text":"b"}"#,
                "duplicate field `text`",
            ),
            (r#"{"kind":"video"}"#, "unknown variant `video`"),
            (r#"[]"#, "invalid type"),
        ] {
            let e = read(text).unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
        // Written back as it was read.
        let p = read(r#"{"kind":"text","text":"hi"}"#).unwrap();
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            serde_json::json!({"kind": "text", "text": "hi"})
        );
    }

    /// Data and metadata are read with the nesting limit as they come (no
    /// buffering first), however deep: past serde_json's own limit too.
    #[test]
    fn deep_data_is_refused_by_the_nesting_limit() {
        for depth in [crate::limits::MAX_STRUCT_DEPTH + 1, 129, 5000] {
            let deep = format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
            for text in [
                format!(r#"{{"kind":"data","data":{deep}}}"#),
                format!(r#"{{"metadata":{deep},"kind":"text","text":"x"}}"#),
            ] {
                let e = read(&text).unwrap_err().to_string();
                assert!(e.contains("nest more than"), "{depth}: {e}");
            }
        }
    }
}
