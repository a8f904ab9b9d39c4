//! Ergonomic constructors and accessors on the generated protocol types.

use bytes::Bytes;

use crate::json;
use crate::proto::{
    Artifact, Message, Part, Role, SendMessageResponse, StreamResponse, Task,
    TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent, part,
    send_message_response, stream_response,
};
use crate::timestamp::Timestamp;

/// A fresh identifier, as used for tasks, contexts, messages and
/// artifacts: a UUID v7 (RFC 9562), the current time in milliseconds
/// followed by 74 random bits (no counter: identifiers made in the same
/// millisecond are no easier to guess from one another than UUID v4s).
///
/// Time first, so that a database's indexes on task and context ids take
/// new ones at one end instead of at random places: a durable store's
/// commit of a batch of new tasks then rewrites about half as many pages.
pub fn new_id() -> String {
    // uuid's own encoder (a table of byte pairs written here saved about 160
    // instructions an id, under 1% of a request: docs/performance.md "The
    // fast paths"), into a buffer rather than through `Display` and
    // `to_string`, whose formatting machinery cost about 770 instructions
    // more an id in the `a2a` binary (its last optimisation at opt-level "z").
    let mut text = uuid::Uuid::encode_buffer();
    uuid::Uuid::new_v7(uuid::Timestamp::now(uuid::NoContext))
        .hyphenated()
        .encode_lower(&mut text)
        .to_owned()
}

#[cfg(test)]
mod id_tests {
    use super::new_id;

    #[test]
    fn identifiers_are_time_ordered_uuid_v7s() {
        let a = new_id();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = new_id();
        let ua = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(ua.get_version_num(), 7, "{a}");
        assert!(a < b, "{a} then {b}");
        // The random part differs between two made in the same millisecond.
        let (c, d) = (new_id(), new_id());
        assert_ne!(c[15..], d[15..]);
    }
}

impl TaskState {
    /// Completed, failed, canceled or rejected: the task never changes again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected
        )
    }

    /// Input-required or auth-required: the task waits for the client.
    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }

    /// Terminal or interrupted: where a blocking `SendMessage` returns and a
    /// stream closes.
    pub fn ends_turn(self) -> bool {
        self.is_terminal() || self.is_interrupted()
    }

    /// Parses a state from its proto name (`TASK_STATE_WORKING`) or a short
    /// form (`working`, `input-required`, `input_required`).
    pub fn parse(s: &str) -> Option<Self> {
        if let Some(state) = Self::from_str_name(s) {
            return Some(state);
        }
        let upper = s.trim().to_ascii_uppercase().replace('-', "_");
        Self::from_str_name(&format!("TASK_STATE_{upper}"))
    }

    /// The short lower-case name, e.g. `input-required`.
    pub fn short_name(self) -> &'static str {
        match self {
            TaskState::Unspecified => "unspecified",
            TaskState::Submitted => "submitted",
            TaskState::Working => "working",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Canceled => "canceled",
            TaskState::InputRequired => "input-required",
            TaskState::Rejected => "rejected",
            TaskState::AuthRequired => "auth-required",
        }
    }
}

impl TaskStatus {
    /// A status in `state` stamped with the current time.
    pub fn new(state: TaskState) -> Self {
        Self {
            state: state as i32,
            message: None,
            timestamp: Some(Timestamp::now()),
        }
    }

    /// Attaches a status message.
    pub fn with_message(mut self, message: Message) -> Self {
        self.message = Some(Box::new(message));
        self
    }
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: Some(part::Content::Text(text.into())),
            ..Default::default()
        }
    }

    /// A file part carrying its bytes inline (`raw`, base64 in JSON).
    pub fn file(
        bytes: impl Into<Bytes>,
        filename: impl Into<String>,
        media_type: impl Into<String>,
    ) -> Self {
        Self {
            content: Some(part::Content::Raw(bytes.into())),
            filename: filename.into(),
            media_type: media_type.into(),
            ..Default::default()
        }
    }

    /// A part pointing at content by URL.
    pub fn url(url: impl Into<String>) -> Self {
        Self {
            content: Some(part::Content::Url(url.into())),
            ..Default::default()
        }
    }

    /// A structured data part (any JSON value).
    pub fn data(data: serde_json::Value) -> Self {
        Self {
            content: Some(part::Content::Data(json::to_value(data))),
            ..Default::default()
        }
    }

    /// Sets the media type.
    pub fn with_media_type(mut self, media_type: impl Into<String>) -> Self {
        self.media_type = media_type.into();
        self
    }

    /// Sets the file name.
    pub fn with_filename(mut self, filename: impl Into<String>) -> Self {
        self.filename = filename.into();
        self
    }

    /// Adds one metadata entry.
    pub fn with_metadata(mut self, key: impl Into<String>, value: serde_json::Value) -> Self {
        self.metadata
            .get_or_insert_with(Default::default)
            .fields
            .insert(key.into(), json::to_value(value));
        self
    }

    /// The text, if this is a text part.
    pub fn as_text(&self) -> Option<&str> {
        match &self.content {
            Some(part::Content::Text(t)) => Some(t),
            _ => None,
        }
    }

    /// The bytes, if this is an inline file part.
    pub fn as_raw(&self) -> Option<&Bytes> {
        match &self.content {
            Some(part::Content::Raw(b)) => Some(b),
            _ => None,
        }
    }

    /// The URL, if this is a URL part.
    pub fn as_url(&self) -> Option<&str> {
        match &self.content {
            Some(part::Content::Url(u)) => Some(u),
            _ => None,
        }
    }

    /// The data as JSON, if this is a data part.
    pub fn as_data(&self) -> Option<serde_json::Value> {
        match &self.content {
            Some(part::Content::Data(v)) => Some(json::from_value(v)),
            _ => None,
        }
    }

    /// The media type this part declares, or the one its content implies
    /// (`text/plain` for text, `application/json` for data).
    pub fn effective_media_type(&self) -> Option<&str> {
        if !self.media_type.is_empty() {
            return Some(&self.media_type);
        }
        match &self.content {
            Some(part::Content::Text(_)) => Some("text/plain"),
            Some(part::Content::Data(_)) => Some("application/json"),
            _ => None,
        }
    }
}

impl Message {
    /// A message with a fresh id from `role` made of `parts`.
    pub fn new(role: Role, parts: Vec<Part>) -> Self {
        Self {
            message_id: new_id(),
            role: role as i32,
            parts,
            ..Default::default()
        }
    }

    /// A user message of one text part.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self::new(Role::User, vec![Part::text(text)])
    }

    /// An agent message of one text part.
    pub fn agent_text(text: impl Into<String>) -> Self {
        Self::new(Role::Agent, vec![Part::text(text)])
    }

    /// Sets the message id.
    pub fn with_message_id(mut self, id: impl Into<String>) -> Self {
        self.message_id = id.into();
        self
    }

    /// Sets the context id.
    pub fn with_context_id(mut self, id: impl Into<String>) -> Self {
        self.context_id = id.into();
        self
    }

    /// Sets the task id (continues that task).
    pub fn with_task_id(mut self, id: impl Into<String>) -> Self {
        self.task_id = id.into();
        self
    }

    /// Adds a referenced task id.
    pub fn with_reference_task(mut self, id: impl Into<String>) -> Self {
        self.reference_task_ids.push(id.into());
        self
    }

    /// Adds a part.
    pub fn with_part(mut self, part: Part) -> Self {
        self.parts.push(part);
        self
    }

    /// Adds one metadata entry.
    pub fn with_metadata(mut self, key: impl Into<String>, value: serde_json::Value) -> Self {
        self.metadata
            .get_or_insert_with(Default::default)
            .fields
            .insert(key.into(), json::to_value(value));
        self
    }

    /// All text parts joined with newlines.
    pub fn text(&self) -> String {
        join_text(&self.parts)
    }

    /// A metadata entry as JSON.
    pub fn metadata_value(&self, key: &str) -> Option<serde_json::Value> {
        self.metadata
            .as_ref()
            .and_then(|m| m.fields.get(key))
            .map(json::from_value)
    }
}

impl Artifact {
    /// An artifact with a fresh id, a name and parts.
    pub fn new(name: impl Into<String>, parts: Vec<Part>) -> Self {
        Self {
            artifact_id: new_id(),
            name: name.into(),
            parts,
            ..Default::default()
        }
    }

    /// An artifact of one text part.
    pub fn text(name: impl Into<String>, text: impl Into<String>) -> Self {
        Self::new(name, vec![Part::text(text)])
    }

    /// Sets the artifact id (chunks of one artifact share it).
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.artifact_id = id.into();
        self
    }

    /// Sets the description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Adds one metadata entry.
    pub fn with_metadata(mut self, key: impl Into<String>, value: serde_json::Value) -> Self {
        self.metadata
            .get_or_insert_with(Default::default)
            .fields
            .insert(key.into(), json::to_value(value));
        self
    }

    /// All text parts joined (without separator: chunks concatenate).
    pub fn text_content(&self) -> String {
        self.parts.iter().filter_map(Part::as_text).collect()
    }
}

fn join_text(parts: &[Part]) -> String {
    let mut out = String::new();
    for text in parts.iter().filter_map(Part::as_text) {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(text);
    }
    out
}

impl Task {
    /// The current state (`Unspecified` when the status is missing).
    pub fn state(&self) -> TaskState {
        self.status
            .as_ref()
            .map_or(TaskState::Unspecified, |s| s.state())
    }

    /// The status timestamp, if any.
    pub fn status_timestamp(&self) -> Option<Timestamp> {
        self.status.as_ref().and_then(|s| s.timestamp)
    }

    /// The artifact with this id.
    pub fn artifact(&self, artifact_id: &str) -> Option<&Artifact> {
        self.artifacts.iter().find(|a| a.artifact_id == artifact_id)
    }

    /// Keeps only the `n` most recent history messages (spec 3.2.4):
    /// `None` keeps everything, `Some(0)` drops the history.
    pub fn truncate_history(&mut self, n: Option<usize>) {
        if let Some(n) = n {
            let len = self.history.len();
            if n < len {
                self.history.drain(..len - n);
            }
        }
    }
}

impl TaskStatusUpdateEvent {
    /// A status update for a task.
    pub fn new(
        task_id: impl Into<String>,
        context_id: impl Into<String>,
        status: TaskStatus,
    ) -> Self {
        Self {
            generation: 0,
            task_id: task_id.into(),
            context_id: context_id.into(),
            status: Some(status),
            metadata: None,
        }
    }

    /// The new state.
    pub fn state(&self) -> TaskState {
        self.status
            .as_ref()
            .map_or(TaskState::Unspecified, |s| s.state())
    }
}

impl TaskArtifactUpdateEvent {
    /// An artifact update for a task.
    pub fn new(
        task_id: impl Into<String>,
        context_id: impl Into<String>,
        artifact: Artifact,
    ) -> Self {
        Self {
            generation: 0,
            task_id: task_id.into(),
            context_id: context_id.into(),
            artifact: Some(artifact),
            append: false,
            last_chunk: false,
            metadata: None,
        }
    }
}

impl From<Task> for SendMessageResponse {
    fn from(task: Task) -> Self {
        Self {
            payload: Some(send_message_response::Payload::Task(task)),
        }
    }
}

impl From<Message> for SendMessageResponse {
    fn from(message: Message) -> Self {
        Self {
            payload: Some(send_message_response::Payload::Message(message)),
        }
    }
}

impl SendMessageResponse {
    /// The task, when the agent answered with one.
    pub fn task(&self) -> Option<&Task> {
        match &self.payload {
            Some(send_message_response::Payload::Task(t)) => Some(t),
            _ => None,
        }
    }

    /// The message, when the agent answered with one.
    pub fn message(&self) -> Option<&Message> {
        match &self.payload {
            Some(send_message_response::Payload::Message(m)) => Some(m),
            _ => None,
        }
    }
}

impl From<Task> for StreamResponse {
    fn from(task: Task) -> Self {
        Self {
            payload: Some(stream_response::Payload::Task(task)),
        }
    }
}

impl From<Message> for StreamResponse {
    fn from(message: Message) -> Self {
        Self {
            payload: Some(stream_response::Payload::Message(message)),
        }
    }
}

impl From<TaskStatusUpdateEvent> for StreamResponse {
    fn from(event: TaskStatusUpdateEvent) -> Self {
        Self {
            payload: Some(stream_response::Payload::StatusUpdate(event)),
        }
    }
}

impl From<TaskArtifactUpdateEvent> for StreamResponse {
    fn from(event: TaskArtifactUpdateEvent) -> Self {
        Self {
            payload: Some(stream_response::Payload::ArtifactUpdate(event)),
        }
    }
}

impl StreamResponse {
    /// The task id the event belongs to (`None` for a bare message without
    /// one).
    pub fn task_id(&self) -> Option<&str> {
        match self.payload.as_ref()? {
            stream_response::Payload::Task(t) => Some(&t.id),
            stream_response::Payload::Message(m) if !m.task_id.is_empty() => Some(&m.task_id),
            stream_response::Payload::Message(_) => None,
            stream_response::Payload::StatusUpdate(e) => Some(&e.task_id),
            stream_response::Payload::ArtifactUpdate(e) => Some(&e.task_id),
        }
    }

    /// The state this event leaves the task in, when it says.
    pub fn state(&self) -> Option<TaskState> {
        match self.payload.as_ref()? {
            stream_response::Payload::Task(t) => Some(t.state()),
            stream_response::Payload::StatusUpdate(e) => Some(e.state()),
            _ => None,
        }
    }

    /// Whether a stream closes after this event: a message, or a terminal or
    /// interrupted state.
    pub fn ends_stream(&self) -> bool {
        match &self.payload {
            Some(stream_response::Payload::Message(_)) => true,
            _ => self.state().is_some_and(TaskState::ends_turn),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states() {
        assert!(TaskState::Completed.is_terminal());
        assert!(TaskState::Rejected.is_terminal());
        assert!(!TaskState::InputRequired.is_terminal());
        assert!(TaskState::AuthRequired.is_interrupted());
        assert!(!TaskState::Working.ends_turn());
        assert_eq!(
            TaskState::parse("input-required"),
            Some(TaskState::InputRequired)
        );
        assert_eq!(
            TaskState::parse("TASK_STATE_WORKING"),
            Some(TaskState::Working)
        );
        assert_eq!(TaskState::parse("running"), None);
    }

    #[test]
    fn history_truncation() {
        let mut t = Task {
            history: (0..5).map(|i| Message::user_text(i.to_string())).collect(),
            ..Default::default()
        };
        t.truncate_history(None);
        assert_eq!(t.history.len(), 5);
        t.truncate_history(Some(2));
        assert_eq!(
            t.history.iter().map(Message::text).collect::<Vec<_>>(),
            ["3", "4"]
        );
        t.truncate_history(Some(0));
        assert!(t.history.is_empty());
    }
}
