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
//! the bytes without decoding the task; reading one back decodes it (without
//! its artifacts when they are not asked for). The state and the status
//! time, which a listing reads of every task, are written in a fixed header
//! before the encoding, so reading them walks no field.

use std::cell::RefCell;
use std::sync::Arc;

use agentwire_types::{A2aError, A2aResult, Task, TaskState, Timestamp};
use prost::Message as _;

/// A task's protobuf encoding (the `lf.a2a.v1.Task` message) after a
/// [`HEADER`] of its state and status time. Cloned by listings, which keep
/// what they found without copying it.
#[derive(Clone)]
pub(super) struct PackedTask(Arc<[u8]>);

/// The header's length: the state (`i32`, little-endian), whether the
/// status has a time (one byte), and the time's seconds (`i64`) and nanos
/// (`i32`).
const HEADER: usize = 17;

/// Writes the header of `task` into `buf`.
fn write_header(buf: &mut Vec<u8>, task: &Task) {
    let status = task.status.as_ref();
    let ts = status.and_then(|s| s.timestamp.as_ref());
    buf.extend_from_slice(&status.map_or(0, |s| s.state).to_le_bytes());
    buf.push(u8::from(ts.is_some()));
    buf.extend_from_slice(&ts.map_or(0, |t| t.seconds).to_le_bytes());
    buf.extend_from_slice(&ts.map_or(0, |t| t.nanos).to_le_bytes());
}

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
                write_header(&mut buf, task);
                task.encode_raw(&mut *buf);
                let packed = Self(Arc::from(&buf[..]));
                // A rare large task does not keep its buffer size.
                if buf.capacity() > 64 * 1024 {
                    *buf = Vec::new();
                }
                packed
            }
            Err(_) => {
                let mut buf = Vec::with_capacity(HEADER + task.encoded_len());
                write_header(&mut buf, task);
                task.encode_raw(&mut buf);
                Self(Arc::from(buf))
            }
        })
    }

    /// Decodes the task.
    pub(super) fn unpack(&self) -> A2aResult<Task> {
        if self.0.len() < HEADER {
            return Err(A2aError::internal(
                "a stored task could not be decoded: no header",
            ));
        }
        Task::decode(self.body())
            .map_err(|e| A2aError::internal(format!("a stored task could not be decoded: {e}")))
    }

    /// Decodes the task without its artifacts: their fields are skipped,
    /// not decoded (a listing answers without them unless asked, and a
    /// streamed task's artifacts can be most of its encoding).
    pub(super) fn unpack_without_artifacts(&self) -> A2aResult<Task> {
        let body = self.body();
        let mut fields = Fields(body);
        let mut kept: Option<Vec<u8>> = None;
        let mut from = 0;
        loop {
            let at = body.len() - fields.0.len();
            let Some((field, _)) = fields.next() else {
                break;
            };
            if field == ARTIFACTS {
                let kept = kept.get_or_insert_with(|| Vec::with_capacity(body.len()));
                kept.extend_from_slice(&body[from..at]);
                from = body.len() - fields.0.len();
            }
        }
        match kept {
            // Stopped before the end (malformed): decoding it all says so.
            _ if !fields.0.is_empty() => self.unpack(),
            None => self.unpack(),
            Some(mut kept) => {
                kept.extend_from_slice(&body[from..]);
                Task::decode(kept.as_slice()).map_err(|e| {
                    A2aError::internal(format!("a stored task could not be decoded: {e}"))
                })
            }
        }
    }

    /// The address of the encoding: which packed task this is, for the
    /// eviction queue (compared, never dereferenced).
    pub(super) fn token(&self) -> usize {
        self.0.as_ptr() as usize
    }

    /// Size of the encoding in bytes (the task's encoded length).
    pub(super) fn len(&self) -> usize {
        self.0.len().saturating_sub(HEADER)
    }

    /// The encoding, after the header.
    fn body(&self) -> &[u8] {
        self.0.get(HEADER..).unwrap_or_default()
    }

    /// `HEADER`'s bytes `at..at + N`.
    fn header<const N: usize>(&self, at: usize) -> Option<[u8; N]> {
        self.0.get(at..at + N)?.try_into().ok()
    }

    /// `Task.id` (field 1).
    pub(super) fn id(&self) -> &str {
        as_str(self.id_bytes())
    }

    /// `Task.context_id` (field 2).
    pub(super) fn context_id(&self) -> &str {
        as_str(self.context_id_bytes())
    }

    /// The id's bytes, unchecked for UTF-8 (they were a `String`'s).
    pub(super) fn id_bytes(&self) -> &[u8] {
        bytes_field(self.body(), 1).unwrap_or_default()
    }

    /// The context id's bytes, unchecked for UTF-8 (they were a `String`'s).
    pub(super) fn context_id_bytes(&self) -> &[u8] {
        bytes_field(self.body(), 2).unwrap_or_default()
    }

    /// `Task.status.state`, from the header.
    pub(super) fn state(&self) -> TaskState {
        let state = self.header::<4>(0).map_or(0, i32::from_le_bytes);
        TaskState::try_from(state).unwrap_or(TaskState::Unspecified)
    }

    /// `Task.status.timestamp`, from the header.
    pub(super) fn status_timestamp(&self) -> Option<Timestamp> {
        if self.header::<1>(4)? != [1] {
            return None;
        }
        Some(Timestamp {
            seconds: i64::from_le_bytes(self.header::<8>(5)?),
            nanos: i32::from_le_bytes(self.header::<4>(13)?),
        })
    }
}

/// `Task.artifacts`' field number.
const ARTIFACTS: u32 = 4;

/// One field's value, by wire type.
enum Value<'a> {
    /// (Not read here.)
    Varint,
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
            0 => {
                varint(&mut self.0)?;
                Value::Varint
            }
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

/// A string field's bytes as text (empty if they were not UTF-8, which a
/// field written from a `String` always is).
fn as_str(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap_or_default()
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
            generation: 0,
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
            assert!(!task.artifacts.is_empty());
            let without = Task {
                artifacts: Vec::new(),
                ..task.clone()
            };
            assert_eq!(packed.unpack_without_artifacts().unwrap(), without);
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
            // An artifact, then a truncated field.
            &[0x22, 0x00, 0x2a, 0x05, b'a'][..],
        ] {
            // Malformed as a header, and as an encoding after a header.
            let mut with_header = vec![1, 0, 0, 0, 1];
            with_header.extend_from_slice(&[0; 12]);
            with_header.extend_from_slice(bytes);
            for p in [
                PackedTask(Arc::from(bytes)),
                PackedTask(Arc::from(with_header)),
            ] {
                let _ = (p.id(), p.context_id(), p.state(), p.status_timestamp());
                assert!(p.unpack().is_err());
                assert!(p.unpack_without_artifacts().is_err());
            }
        }
    }
}
