//! Finished tasks of the in-memory store, kept as their protobuf encoding.
//!
//! A task that reached a terminal state never changes again, and the store
//! keeps thousands of them (10,000 by default) for clients that read them
//! back. As a `Task` each is a dozen or more allocations (ids, parts,
//! messages) spread over the heap, about a kilobyte in all; as its protobuf
//! encoding it is one allocation of a third of that. The difference shows
//! under load: the store cycles through its finished tasks (one leaves for
//! every one that finishes), and what it cycles through no longer fits the
//! processor's caches, so every cache line a stored task spans costs a miss
//! when it is freed and its memory reused. The `Task` a request answers with
//! is freed when the answer is written, while it is still in the caches.
//!
//! Listing reads a packed task's id, context id, state and status time from
//! the bytes without decoding the task; reading one back decodes it.

use std::cell::RefCell;
use std::sync::Arc;

use agentwire_types::{A2aError, A2aResult, Task, TaskState, Timestamp};
use prost::Message as _;

/// A task's protobuf encoding (the `lf.a2a.v1.Task` message). Cloned by
/// listings, which keep what they found without copying it.
#[derive(Clone)]
pub(super) struct PackedTask(Arc<[u8]>);

impl PackedTask {
    /// Encodes a task: into this thread's scratch buffer, then into one
    /// allocation of the exact size.
    pub(super) fn pack(task: &Task) -> Self {
        thread_local! {
            static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
        }
        SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
            Ok(mut buf) => {
                buf.clear();
                task.encode_raw(&mut *buf);
                let packed = Self(Arc::from(&buf[..]));
                // A rare large task does not keep its buffer size.
                if buf.capacity() > 64 * 1024 {
                    *buf = Vec::new();
                }
                packed
            }
            Err(_) => Self(Arc::from(task.encode_to_vec())),
        })
    }

    /// Decodes the task.
    pub(super) fn unpack(&self) -> A2aResult<Task> {
        Task::decode(&*self.0)
            .map_err(|e| A2aError::internal(format!("a stored task could not be decoded: {e}")))
    }

    /// The address of the encoding: which packed task this is, for the
    /// eviction queue (compared, never dereferenced).
    pub(super) fn token(&self) -> usize {
        self.0.as_ptr() as usize
    }

    /// Size of the encoding in bytes.
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// `Task.id` (field 1).
    pub(super) fn id(&self) -> &str {
        string_field(&self.0, 1)
    }

    /// `Task.context_id` (field 2).
    pub(super) fn context_id(&self) -> &str {
        string_field(&self.0, 2)
    }

    /// `Task.status.state` (field 3, field 1).
    pub(super) fn state(&self) -> TaskState {
        let status = bytes_field(&self.0, 3).unwrap_or_default();
        let state = Fields(status).find_map(|(n, v)| match (n, v) {
            (1, Value::Varint(v)) => Some(v as i32),
            _ => None,
        });
        TaskState::try_from(state.unwrap_or(0)).unwrap_or(TaskState::Unspecified)
    }

    /// `Task.status.timestamp` (field 3, field 3).
    pub(super) fn status_timestamp(&self) -> Option<Timestamp> {
        let status = bytes_field(&self.0, 3)?;
        let ts = Fields(status).find_map(|(n, v)| match (n, v) {
            (3, Value::Bytes(b)) => Some(b),
            _ => None,
        })?;
        let mut t = Timestamp::default();
        for (n, v) in Fields(ts) {
            match (n, v) {
                // int64 and int32 travel as two's-complement varints.
                (1, Value::Varint(v)) => t.seconds = v as i64,
                (2, Value::Varint(v)) => t.nanos = v as i32,
                _ => {}
            }
        }
        Some(t)
    }
}

/// One field's value, by wire type.
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// A fixed-width value (not read here).
    Fixed,
}

/// The fields of an encoded message, in the order they were written. Stops
/// at the first malformed byte (the store only reads what it wrote).
struct Fields<'a>(&'a [u8]);

impl<'a> Iterator for Fields<'a> {
    type Item = (u32, Value<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        let key = varint(&mut self.0)?;
        let field = u32::try_from(key >> 3).ok()?;
        let value = match key & 7 {
            0 => Value::Varint(varint(&mut self.0)?),
            1 => {
                self.0 = self.0.get(8..)?;
                Value::Fixed
            }
            2 => {
                let len = usize::try_from(varint(&mut self.0)?).ok()?;
                let (bytes, rest) = self.0.split_at_checked(len)?;
                self.0 = rest;
                Value::Bytes(bytes)
            }
            5 => {
                self.0 = self.0.get(4..)?;
                Value::Fixed
            }
            _ => {
                self.0 = &[];
                return None;
            }
        };
        Some((field, value))
    }
}

fn varint(buf: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for (i, &b) in buf.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            *buf = &buf[i + 1..];
            return Some(value);
        }
    }
    None
}

fn bytes_field(buf: &[u8], field: u32) -> Option<&[u8]> {
    Fields(buf).find_map(|(n, v)| match v {
        Value::Bytes(b) if n == field => Some(b),
        _ => None,
    })
}

/// A string field, empty when absent (as protobuf leaves empty strings out).
fn string_field(buf: &[u8], field: u32) -> &str {
    bytes_field(buf, field)
        .and_then(|b| std::str::from_utf8(b).ok())
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_types::{Artifact, Message, Part, TaskStatus};

    fn rich_task(state: TaskState, seconds: i64, nanos: i32) -> Task {
        let serde_json::Value::Object(map) =
            serde_json::json!({"k": {"n": -1.5, "a": [true, null, "x"]}, "e": {}})
        else {
            unreachable!()
        };
        let meta = agentwire_types::json::to_struct(map);
        let mut status_msg = Message::agent_text("working on it — ünïcode");
        status_msg.metadata = Some(meta.clone());
        Task {
            id: "task-é-1".into(),
            context_id: "ctx-1".into(),
            status: Some(TaskStatus {
                state: state as i32,
                message: Some(Box::new(status_msg)),
                timestamp: Some(Timestamp { seconds, nanos }),
            }),
            artifacts: vec![
                Artifact {
                    artifact_id: "a1".into(),
                    name: "answer".into(),
                    description: "d".into(),
                    parts: vec![
                        Part::text(""),
                        Part::file(vec![0u8, 1, 2, 255], "f.bin", "application/octet-stream"),
                        Part::url("https://example.com/x"),
                        Part::data(serde_json::json!({"x": 1})),
                    ],
                    metadata: Some(meta.clone()),
                    extensions: vec!["https://example.com/ext".into()],
                },
                Artifact::new("", vec![Part::text("second")]),
            ],
            history: vec![Message::user_text("hello"), Message::agent_text("hi")],
            metadata: Some(meta),
        }
    }

    #[test]
    fn round_trips_every_kind_of_content() {
        for (state, seconds, nanos) in [
            (TaskState::Completed, 1_764_000_000, 123_000_000),
            (TaskState::Failed, -5, 999_999_999),
            (TaskState::Canceled, 0, 0),
            (TaskState::Rejected, i64::MAX / 1000, 1),
        ] {
            let task = rich_task(state, seconds, nanos);
            let packed = PackedTask::pack(&task);
            assert_eq!(packed.unpack().unwrap(), task);
            assert_eq!(packed.id(), "task-é-1");
            assert_eq!(packed.context_id(), "ctx-1");
            assert_eq!(packed.state(), state);
            assert_eq!(
                packed.status_timestamp(),
                Some(Timestamp { seconds, nanos })
            );
        }
    }

    #[test]
    fn reads_absent_fields_as_empty() {
        let task = Task {
            id: "t".into(),
            ..Default::default()
        };
        let packed = PackedTask::pack(&task);
        assert_eq!(packed.id(), "t");
        assert_eq!(packed.context_id(), "");
        assert_eq!(packed.state(), TaskState::Unspecified);
        assert_eq!(packed.status_timestamp(), None);
        assert_eq!(packed.unpack().unwrap(), task);

        // A status without a time.
        let task = Task {
            id: "t".into(),
            status: Some(TaskStatus {
                state: TaskState::Completed as i32,
                ..Default::default()
            }),
            ..Default::default()
        };
        let packed = PackedTask::pack(&task);
        assert_eq!(packed.state(), TaskState::Completed);
        assert_eq!(packed.status_timestamp(), None);
    }

    #[test]
    fn is_smaller_than_the_task_it_packs() {
        let task = rich_task(TaskState::Completed, 1, 2);
        let packed = PackedTask::pack(&task);
        assert_eq!(packed.len(), task.encoded_len());
        assert_ne!(packed.token(), PackedTask::pack(&task).token());
    }

    #[test]
    fn walks_malformed_bytes_without_panicking() {
        for bytes in [
            &[0x0a, 0x05, b'a'][..],
            &[0xff; 12][..],
            &[0x0b][..],
            &[0x09, 1, 2][..],
            &[0x1a, 0x02, 0x08][..],
        ] {
            let p = PackedTask(Arc::from(bytes));
            let _ = (p.id(), p.context_id(), p.state(), p.status_timestamp());
            assert!(p.unpack().is_err());
        }
    }
}
