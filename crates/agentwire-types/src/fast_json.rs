//! The ProtoJSON of a [`Task`] written directly: the same bytes as its
//! `Serialize` implementation produces through `serde_json` (the tests
//! compare the two over thousands of generated tasks), without serde's
//! per-field and per-byte machinery. A server's most frequent answer is a
//! task, and writing it was a tenth of the time a blocking `SendMessage`
//! costs the server's own code.
//!
//! The common fields are written here; the rare complex ones (metadata,
//! `data` and `raw` parts, strings that need escaping) are handed to
//! `serde_json`, which writes them exactly as it would inside the task.

use crate::proto::{Artifact, Message, Part, Role, Task, TaskState, TaskStatus, part};

/// Appends the JSON of `task` to `out`; fails where `serde_json` would (an
/// unknown enum value, a timestamp out of range). On error `out` may hold
/// part of the task.
pub fn write_task(out: &mut Vec<u8>, task: &Task) -> serde_json::Result<()> {
    let mut o = Obj::open(out);
    o.text("id", &task.id);
    o.text("contextId", &task.context_id);
    if let Some(status) = &task.status {
        o.key("status");
        write_status(o.out, status)?;
    }
    o.list("artifacts", &task.artifacts, write_artifact)?;
    o.list("history", &task.history, write_message)?;
    o.serde("metadata", task.metadata.as_ref())?;
    if task.generation != 0 {
        // ProtoJSON writes an int64 as a string.
        o.key("generation");
        o.out.push(b'"');
        o.out
            .extend_from_slice(task.generation.to_string().as_bytes());
        o.out.push(b'"');
    }
    o.close();
    Ok(())
}

/// Appends the JSON of a message.
pub fn write_message(out: &mut Vec<u8>, m: &Message) -> serde_json::Result<()> {
    let mut o = Obj::open(out);
    o.text("messageId", &m.message_id);
    o.text("contextId", &m.context_id);
    o.text("taskId", &m.task_id);
    if m.role != 0 {
        let role = Role::try_from(m.role).map_err(|_| invalid_variant(m.role))?;
        o.text("role", role.as_str_name());
    }
    o.list("parts", &m.parts, write_part)?;
    o.serde("metadata", m.metadata.as_ref())?;
    o.strings("extensions", &m.extensions);
    o.strings("referenceTaskIds", &m.reference_task_ids);
    o.close();
    Ok(())
}

fn write_status(out: &mut Vec<u8>, s: &TaskStatus) -> serde_json::Result<()> {
    let mut o = Obj::open(out);
    if s.state != 0 {
        let state = TaskState::try_from(s.state).map_err(|_| invalid_variant(s.state))?;
        o.text("state", state.as_str_name());
    }
    if let Some(message) = &s.message {
        o.key("message");
        write_message(o.out, message)?;
    }
    if let Some(ts) = &s.timestamp {
        o.key("timestamp");
        match ts.rfc3339_bytes() {
            // Digits, '-', ':', 'T', '.', 'Z': nothing to escape.
            Some((buf, len)) => {
                o.out.push(b'"');
                o.out.extend_from_slice(&buf[..len]);
                o.out.push(b'"');
            }
            None => serde_json::to_writer(&mut *o.out, ts)?,
        }
    }
    o.close();
    Ok(())
}

fn write_artifact(out: &mut Vec<u8>, a: &Artifact) -> serde_json::Result<()> {
    let mut o = Obj::open(out);
    o.text("artifactId", &a.artifact_id);
    o.text("name", &a.name);
    o.text("description", &a.description);
    o.list("parts", &a.parts, write_part)?;
    o.serde("metadata", a.metadata.as_ref())?;
    o.strings("extensions", &a.extensions);
    o.close();
    Ok(())
}

fn write_part(out: &mut Vec<u8>, p: &Part) -> serde_json::Result<()> {
    let text = match &p.content {
        Some(part::Content::Text(text)) => text,
        // Base64 and JSON values: serde's writing, unchanged.
        _ => return serde_json::to_writer(out, p),
    };
    let mut o = Obj::open(out);
    o.serde("metadata", p.metadata.as_ref())?;
    o.text("filename", &p.filename);
    o.text("mediaType", &p.media_type);
    // The content is written even when empty (a oneof that is set).
    o.key("text");
    string(o.out, text);
    o.close();
    Ok(())
}

fn invalid_variant(v: i32) -> serde_json::Error {
    <serde_json::Error as serde::ser::Error>::custom(format!("Invalid variant {v}"))
}

/// An object being written: commas between its members.
struct Obj<'a> {
    out: &'a mut Vec<u8>,
    empty: bool,
}

impl<'a> Obj<'a> {
    fn open(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Self { out, empty: true }
    }

    /// A member's key (the keys here need no escaping).
    fn key(&mut self, key: &str) {
        if !self.empty {
            self.out.push(b',');
        }
        self.empty = false;
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
    }

    /// A string member, left out when empty (as ProtoJSON does).
    fn text(&mut self, key: &str, value: &str) {
        if !value.is_empty() {
            self.key(key);
            string(self.out, value);
        }
    }

    /// A list of strings, left out when empty.
    fn strings(&mut self, key: &str, items: &[String]) {
        if items.is_empty() {
            return;
        }
        self.key(key);
        self.out.push(b'[');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            string(self.out, item);
        }
        self.out.push(b']');
    }

    /// A list of objects written by `write`, left out when empty.
    fn list<T>(
        &mut self,
        key: &str,
        items: &[T],
        write: fn(&mut Vec<u8>, &T) -> serde_json::Result<()>,
    ) -> serde_json::Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        self.key(key);
        self.out.push(b'[');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            write(self.out, item)?;
        }
        self.out.push(b']');
        Ok(())
    }

    /// A rare member (metadata), written by `serde_json` when present.
    fn serde<T: serde::Serialize>(
        &mut self,
        key: &str,
        value: Option<&T>,
    ) -> serde_json::Result<()> {
        if let Some(value) = value {
            self.key(key);
            serde_json::to_writer(&mut *self.out, value)?;
        }
        Ok(())
    }

    fn close(self) {
        self.out.push(b'}');
    }
}

/// A JSON string. Most strings (ids, names, plain text) need no escaping
/// and are copied whole; the others are escaped by `serde_json`.
fn string(out: &mut Vec<u8>, s: &str) {
    if crate::json_reader::special_at(s.as_bytes()).is_some() {
        // Writing a `str` into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    } else {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Timestamp;

    /// A small deterministic generator (xorshift), so failures reproduce.
    struct Gen(u64);

    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> usize {
            (self.next() % n) as usize
        }
        fn chance(&mut self, percent: u64) -> bool {
            self.next() % 100 < percent
        }
        fn string(&mut self) -> String {
            const PIECES: &[&str] = &[
                "",
                "hello",
                "0196f3a2-7c1e-7d40-9b1a-3c5e8f2d4a10",
                "quote \" inside",
                "back\\slash",
                "tab\tnew\nline\r",
                "\u{1}\u{1f}\u{7f}",
                "é ü 中文 🦀",
                "</script>",
                " ",
            ];
            (0..self.below(3))
                .map(|_| PIECES[self.below(PIECES.len() as u64)])
                .collect()
        }
        fn strings(&mut self) -> Vec<String> {
            (0..self.below(3)).map(|_| self.string()).collect()
        }
        fn metadata(&mut self) -> Option<crate::wkt::Struct> {
            self.chance(20).then(|| {
                let v = serde_json::json!({"k": self.string(), "n": [1, 2.5, null, true], "o": {}});
                crate::json::to_struct(v.as_object().cloned().unwrap_or_default())
            })
        }
        fn part(&mut self) -> Part {
            let content = match self.below(6) {
                0 => None,
                1 => Some(part::Content::Raw(bytes::Bytes::from_static(
                    b"\x00\x01raw",
                ))),
                2 => Some(part::Content::Url(self.string())),
                3 => Some(part::Content::Data(
                    serde_json::from_value(serde_json::json!({"a": [1, "x"]})).unwrap(),
                )),
                _ => Some(part::Content::Text(self.string())),
            };
            Part {
                content,
                metadata: self.metadata(),
                filename: if self.chance(20) {
                    self.string()
                } else {
                    String::new()
                },
                media_type: if self.chance(20) {
                    self.string()
                } else {
                    String::new()
                },
            }
        }
        fn message(&mut self) -> Message {
            Message {
                message_id: self.string(),
                context_id: self.string(),
                task_id: self.string(),
                role: self.below(3) as i32,
                parts: (0..self.below(3)).map(|_| self.part()).collect(),
                metadata: self.metadata(),
                extensions: self.strings(),
                reference_task_ids: self.strings(),
            }
        }
        fn task(&mut self) -> Task {
            let status = self.chance(90).then(|| TaskStatus {
                state: self.below(9) as i32,
                message: self.chance(30).then(|| Box::new(self.message())),
                timestamp: self.chance(80).then(|| {
                    let millis = (self.next() % 4_000_000_000_000) as i64;
                    let mut t = Timestamp::from_millis(millis);
                    if self.chance(20) {
                        t.nanos += (self.next() % 1_000_000) as i32;
                    }
                    t
                }),
            });
            Task {
                generation: if self.chance(50) {
                    self.below(1 << 20) as i64
                } else {
                    0
                },
                id: self.string(),
                context_id: self.string(),
                status,
                artifacts: (0..self.below(3))
                    .map(|_| Artifact {
                        artifact_id: self.string(),
                        name: self.string(),
                        description: self.string(),
                        parts: (0..self.below(3)).map(|_| self.part()).collect(),
                        metadata: self.metadata(),
                        extensions: self.strings(),
                    })
                    .collect(),
                history: (0..self.below(3)).map(|_| self.message()).collect(),
                metadata: self.metadata(),
            }
        }
    }

    #[test]
    fn writes_the_bytes_serde_writes() {
        let mut g = Gen(0x9e37_79b9_7f4a_7c15);
        for i in 0..5000 {
            let task = g.task();
            let mut fast = Vec::new();
            write_task(&mut fast, &task).unwrap();
            let serde = serde_json::to_vec(&task).unwrap();
            assert_eq!(
                String::from_utf8_lossy(&fast),
                String::from_utf8_lossy(&serde),
                "task {i}: {task:?}"
            );
        }
    }

    #[test]
    fn fails_where_serde_fails() {
        let bad_state = Task {
            status: Some(TaskStatus {
                state: 99,
                ..Default::default()
            }),
            ..Default::default()
        };
        let bad_role = Task {
            history: vec![Message {
                role: 42,
                ..Default::default()
            }],
            ..Default::default()
        };
        let bad_time = Task {
            status: Some(TaskStatus {
                timestamp: Some(Timestamp {
                    seconds: i64::MAX,
                    nanos: 0,
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        for task in [bad_state, bad_role, bad_time] {
            assert!(serde_json::to_vec(&task).is_err());
            assert!(write_task(&mut Vec::new(), &task).is_err());
        }
    }
}
