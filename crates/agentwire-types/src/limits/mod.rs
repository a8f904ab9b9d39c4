//! Limits on what a peer can make us hold: the nesting and size of the
//! free-form JSON (`google.protobuf.Struct` / `Value` / `ListValue`: the
//! metadata and the data parts) and the length of the repeated fields of a
//! request. They are applied while a request is read, before what it
//! describes is built, and checked again on what was built (a request made
//! by a program rather than read from the network, an agent's updates):
//!
//! - [`MAX_STRUCT_DEPTH`]: how deep objects and arrays may nest in one
//!   metadata object or data value, everywhere and always (requests,
//!   responses, agent cards, what an agent produces). Deeper content could
//!   be accepted but not stored: protobuf decoders stop at a recursion
//!   depth of 100, and each object level costs three protobuf levels.
//! - [`MAX_STRUCT_VALUES`]: how many values the metadata and data of one
//!   request may hold in all, and [`MAX_LIST_ITEMS`]: how many strings one
//!   of its repeated fields (extensions, reference task ids, accepted
//!   output modes, 0.3 authentication schemes) may hold. With the parts of
//!   a message ([`ReadLimits::max_parts`]) they bound the memory a request
//!   costs while it is read to a small multiple of its size.
//!
//! How they apply:
//!
//! - JSON (the JSON-RPC and HTTP+JSON bindings, both protocol versions):
//!   the server reads a request inside [`reading`]; the readers of
//!   `Struct`/`Value` (in [`crate::wkt`]) and of the bounded lists (the
//!   types below, used by the generated and the 0.3 serde code) stop at the
//!   first item over a limit, with a serde error naming it. Nesting is
//!   refused at any time, the counts only inside [`reading`].
//! - Protobuf (gRPC): [`wire`] walks the encoded request before it is
//!   decoded (the server's codec), with the same limits.
//! - What was built: [`ContentCheck`] walks it (the handler's validation,
//!   the agent's updates).

use std::cell::Cell;
use std::fmt;

use serde::de::{Deserialize, Deserializer, SeqAccess, Visitor};

use crate::wkt::{Struct, Value, value::Kind};
use crate::{
    A2aError, AgentCard, Artifact, ListTasksResponse, Message, Part, SendMessageResponse,
    StreamResponse, Task, send_message_response, stream_response,
};

mod json_path;
#[cfg(feature = "grpc")]
#[cfg_attr(docsrs, doc(cfg(feature = "grpc")))]
pub mod wire;

/// How deep objects and arrays may nest in one `google.protobuf.Struct` or
/// `Value` (a metadata object, a data part): `{}` and `[]` are one level,
/// `{"a":{}}` two. The limit keeps the deepest content allowed decodable
/// by protobuf decoders (whose recursion limit is 100) where it sits
/// deepest: a data part of a status message of a task inside a
/// `ListTasksResponse` or a `StreamResponse` (five messages above the
/// data's `Value`), where each object level costs three protobuf levels
/// (`Struct`, its map entry, `Value`); 31 would be the most that fits.
pub const MAX_STRUCT_DEPTH: usize = 30;

/// How many values the metadata and data parts of one request may hold in
/// all: every member of an object and every item of an array, at every
/// level, and a data part's value itself.
pub const MAX_STRUCT_VALUES: usize = 100_000;

/// How many strings one repeated field of a request may hold (a message's
/// extensions and reference task ids, the accepted output modes, 0.3
/// authentication schemes).
pub const MAX_LIST_ITEMS: usize = 1_000;

/// The parts a message may have by default (the server's
/// `HandlerConfig::max_parts`).
pub const DEFAULT_MAX_PARTS: usize = 1_000;

/// The longest identifier a caller may give, in bytes: a context id, the
/// id of a task it refers to, a push notification config's id, a tenant.
/// The ids the server makes are 36 bytes. Together with [`MAX_PRINCIPAL_BYTES`]
/// this keeps every key a store indexes within what PostgreSQL's B-tree
/// indexes take (about 2,700 bytes a key): a longer id could be accepted
/// by one store and fail in another.
pub const MAX_ID_BYTES: usize = 512;

/// The longest name of an authenticated caller (the task owner a store
/// keeps, e.g. `jwt:ISSUER#SUBJECT`), in bytes.
pub const MAX_PRINCIPAL_BYTES: usize = 1_024;

/// Why `id` cannot be an identifier a caller gives, if it cannot: longer
/// than [`MAX_ID_BYTES`], or holding the character U+0000 (which
/// PostgreSQL's text cannot hold). Empty ids are the caller's rules to
/// judge (some are optional).
pub fn id_problem(id: &str) -> Option<String> {
    id_problem_within(id, MAX_ID_BYTES)
}

/// [`id_problem`] with another bound.
pub fn id_problem_within(id: &str, max_bytes: usize) -> Option<String> {
    if id.len() > max_bytes {
        Some(format!(
            "an identifier is at most {max_bytes} bytes, this one has {}",
            id.len()
        ))
    } else if id.as_bytes().contains(&0) {
        Some("an identifier may not hold the character U+0000".to_owned())
    } else {
        None
    }
}

/// The limits a request is read with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// Parts of one message.
    pub max_parts: usize,
    /// Values in the metadata and data of the request, in all
    /// ([`MAX_STRUCT_VALUES`]).
    pub max_struct_values: usize,
    /// Strings in one repeated field ([`MAX_LIST_ITEMS`]).
    pub max_list_items: usize,
}

impl Default for ReadLimits {
    fn default() -> Self {
        Self {
            max_parts: DEFAULT_MAX_PARTS,
            max_struct_values: MAX_STRUCT_VALUES,
            max_list_items: MAX_LIST_ITEMS,
        }
    }
}

impl ReadLimits {
    /// The default limits with `max_parts` parts per message.
    pub fn with_max_parts(max_parts: usize) -> Self {
        Self {
            max_parts,
            ..Self::default()
        }
    }
}

/// The request being read on this thread: its limits and what is left of
/// its budget of values.
#[derive(Clone, Copy)]
struct Reading {
    limits: ReadLimits,
    values_left: usize,
}

thread_local! {
    static READING: Cell<Option<Reading>> = const { Cell::new(None) };
}

/// Runs `read` (a synchronous serde read of one request) with `limits`:
/// the bounded readers of this crate count what `read` reads against them
/// and stop at the first item over one. Serde has no way to hand a
/// context to the readers of nested fields, so the limits are this
/// thread's for the duration of `read` (and restored after it, even if it
/// panics). Outside of it only the nesting is limited.
pub fn reading<T>(limits: &ReadLimits, read: impl FnOnce() -> T) -> T {
    struct Restore(Option<Reading>);
    impl Drop for Restore {
        fn drop(&mut self) {
            READING.with(|r| r.set(self.0));
        }
    }
    let previous = READING.with(|r| {
        r.replace(Some(Reading {
            limits: *limits,
            values_left: limits.max_struct_values,
        }))
    });
    let _restore = Restore(previous);
    read()
}

/// The limits of the request being read on this thread, if any.
pub(crate) fn current() -> Option<ReadLimits> {
    READING.with(|r| r.get().map(|r| r.limits))
}

/// Counts one value of `Struct` content against the budget of the request
/// being read (nothing outside [`reading`]).
pub(crate) fn count_value<E: serde::de::Error>() -> Result<(), E> {
    READING.with(|r| match r.get() {
        None => Ok(()),
        Some(Reading {
            values_left: 0,
            limits,
        }) => Err(E::custom(values_message(limits.max_struct_values))),
        Some(mut reading) => {
            reading.values_left -= 1;
            r.set(Some(reading));
            Ok(())
        }
    })
}

/// What the error of content nested too deep says.
pub(crate) fn depth_message() -> String {
    format!(
        "objects and arrays nest more than {MAX_STRUCT_DEPTH} levels deep (the limit of \
         metadata and data)"
    )
}

fn values_message(max: usize) -> String {
    format!("the metadata and data of a request may hold at most {max} values in all")
}

fn parts_message(max: usize) -> String {
    format!("a message may have at most {max} parts")
}

fn list_message(max: usize) -> String {
    format!("at most {max} items are allowed here")
}

/// Whether `description` is one of the messages above.
fn is_limit_description(description: &str) -> bool {
    let number_then = |prefix: &str, suffix: &str| {
        description
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix(suffix))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    description == depth_message()
        || number_then(
            "the metadata and data of a request may hold at most ",
            " values in all",
        )
        || number_then("a message may have at most ", " parts")
        || number_then("at most ", " items are allowed here")
}

/// The refusal of a JSON request that serde_json stopped reading for one
/// of these limits, or for its own recursion limit (128 levels, which only
/// content over [`MAX_STRUCT_DEPTH`] reaches, and which is answered as
/// that: the same error whatever reader met the content first). The field
/// is where the reader stopped in `text`, found from the error's position:
/// `message.parts` and `message.extensions` (a list over its length),
/// `message.metadata.a.a` (the object one level too deep),
/// `message.metadata.b.c` (the first value over the request's budget).
/// `None` for any other error.
pub fn json_limit_error(text: &[u8], e: &serde_json::Error) -> Option<LimitError> {
    let shown = e.to_string();
    let at = format!(" at line {} column {}", e.line(), e.column());
    let description = shown.strip_suffix(&at).unwrap_or(&shown);
    let description = if description == "recursion limit exceeded" {
        depth_message()
    } else if is_limit_description(description) {
        description.to_owned()
    } else {
        return None;
    };
    let offset = json_path::offset(text, e.line(), e.column());
    let mut field = json_path::path_at(text, offset);
    // A list over its limit is named as a whole, as the protobuf walk
    // names it (the reader stops after the first item over, or after the
    // list when that item was the last).
    if description != depth_message() && !description.starts_with("the metadata") {
        if let Some(list) = field
            .strip_suffix(']')
            .and_then(|f| f.rsplit_once('['))
            .filter(|(_, n)| n.bytes().all(|b| b.is_ascii_digit()))
            .map(|(list, _)| list.len())
        {
            field.truncate(list);
        }
    }
    Some(LimitError { field, description })
}

/// A list read with a bound on its length while a request is read.
struct Bounded<T> {
    max: Option<usize>,
    message: fn(usize) -> String,
    item: std::marker::PhantomData<T>,
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for Bounded<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let max = self.max.unwrap_or(usize::MAX);
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(max).min(64));
        while let Some(item) = seq.next_element::<T>()? {
            if items.len() == max {
                return Err(serde::de::Error::custom((self.message)(max)));
            }
            items.push(item);
        }
        Ok(items)
    }
}

fn bounded<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
    max: Option<usize>,
    message: fn(usize) -> String,
) -> Result<Vec<T>, D::Error> {
    d.deserialize_seq(Bounded {
        max,
        message,
        item: std::marker::PhantomData,
    })
}

/// The parts of a message or an artifact, as read: at most
/// [`ReadLimits::max_parts`] inside [`reading`]. (Used by the generated
/// ProtoJSON readers.)
#[doc(hidden)]
pub struct Parts<T>(pub Vec<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Parts<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        parts(d).map(Parts)
    }
}

/// The items of another repeated field, as read: at most
/// [`ReadLimits::max_list_items`] inside [`reading`]. (Used by the
/// generated ProtoJSON readers.)
#[doc(hidden)]
pub struct List<T>(pub Vec<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        list(d).map(List)
    }
}

/// [`Parts`] for `#[serde(deserialize_with)]`.
#[doc(hidden)]
pub fn parts<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    bounded(d, current().map(|l| l.max_parts), parts_message)
}

/// [`List`] for `#[serde(deserialize_with)]`.
#[doc(hidden)]
pub fn list<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    bounded(d, current().map(|l| l.max_list_items), list_message)
}

/// Content over a limit, found by [`ContentCheck`]: the field that holds
/// it (`message.parts[2].metadata`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitError {
    /// The field, as a path of JSON member names.
    pub field: String,
    /// What is over which limit.
    pub description: String,
}

impl fmt::Display for LimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.description)
    }
}

impl std::error::Error for LimitError {}

impl LimitError {
    /// The invalid-parameters error of a request over the limit.
    pub fn into_invalid_params(self) -> A2aError {
        A2aError::invalid_params(self.field, self.description)
    }
}

impl From<LimitError> for A2aError {
    fn from(e: LimitError) -> Self {
        e.into_invalid_params()
    }
}

/// What a walk found wrong, before it knows the field.
enum Over {
    Depth,
    Values(usize),
}

/// Checks built content against the limits: the nesting of every `Struct`
/// and `Value` ([`MAX_STRUCT_DEPTH`]), their values in all (when made with
/// a budget) and the length of a message's lists. The walk never goes
/// more than [`MAX_STRUCT_DEPTH`] + 1 levels down, however deep the
/// content.
#[derive(Debug, Clone)]
pub struct ContentCheck {
    values_left: Option<usize>,
    max_values: usize,
    max_list_items: Option<usize>,
}

impl ContentCheck {
    /// The checks of a request: nesting, values and lists by `limits`
    /// (the parts of a message are the handler's to count).
    pub fn request(limits: &ReadLimits) -> Self {
        Self {
            values_left: Some(limits.max_struct_values),
            max_values: limits.max_struct_values,
            max_list_items: Some(limits.max_list_items),
        }
    }

    /// The nesting alone (what an agent produces, an agent card).
    pub fn nesting() -> Self {
        Self {
            values_left: None,
            max_values: usize::MAX,
            max_list_items: None,
        }
    }

    /// A metadata object (or any `Struct`) named `field`; `None` passes.
    pub fn structure(&mut self, s: Option<&Struct>, field: &str) -> Result<(), LimitError> {
        match s {
            Some(s) => self.walk_struct(s, 1).map_err(|o| self.error(o, field)),
            None => Ok(()),
        }
    }

    /// A value (a data part's) named `field`; `None` passes.
    pub fn value(&mut self, v: Option<&Value>, field: &str) -> Result<(), LimitError> {
        match v {
            Some(v) => self.walk_value(v, 0).map_err(|o| self.error(o, field)),
            None => Ok(()),
        }
    }

    /// A repeated string field named `field`.
    pub fn list(&mut self, items: &[String], field: &str) -> Result<(), LimitError> {
        match self.max_list_items {
            Some(max) if items.len() > max => Err(LimitError {
                field: field.to_owned(),
                description: format!("{}, got {}", list_message(max), items.len()),
            }),
            _ => Ok(()),
        }
    }

    /// Parts named `field` (`message.parts`): their metadata and data.
    pub fn parts(&mut self, parts: &[Part], field: &str) -> Result<(), LimitError> {
        for (i, p) in parts.iter().enumerate() {
            if p.metadata.is_some() {
                self.structure(p.metadata.as_ref(), &format!("{field}[{i}].metadata"))?;
            }
            if let Some(crate::part::Content::Data(v)) = &p.content {
                self.value(Some(v), &format!("{field}[{i}].data"))?;
            }
        }
        Ok(())
    }

    /// A message named `field`: its metadata, its parts' and its lists.
    pub fn message(&mut self, m: &Message, field: &str) -> Result<(), LimitError> {
        self.structure(m.metadata.as_ref(), &format!("{field}.metadata"))?;
        self.parts(&m.parts, &format!("{field}.parts"))?;
        self.list(&m.extensions, &format!("{field}.extensions"))?;
        self.list(&m.reference_task_ids, &format!("{field}.referenceTaskIds"))
    }

    /// An artifact named `field`: its metadata and its parts'.
    pub fn artifact(&mut self, a: &Artifact, field: &str) -> Result<(), LimitError> {
        self.structure(a.metadata.as_ref(), &format!("{field}.metadata"))?;
        self.parts(&a.parts, &format!("{field}.parts"))
    }

    /// A task: its metadata, its status message, history and artifacts.
    pub fn task(&mut self, t: &Task) -> Result<(), LimitError> {
        self.task_at(t, "")
    }

    /// A task whose fields are named after `at` (`""`, or `task.`).
    fn task_at(&mut self, t: &Task, at: &str) -> Result<(), LimitError> {
        self.structure(t.metadata.as_ref(), &format!("{at}metadata"))?;
        if let Some(m) = t.status.as_ref().and_then(|s| s.message.as_deref()) {
            self.message(m, &format!("{at}status.message"))?;
        }
        for (i, m) in t.history.iter().enumerate() {
            self.message(m, &format!("{at}history[{i}]"))?;
        }
        for (i, a) in t.artifacts.iter().enumerate() {
            self.artifact(a, &format!("{at}artifacts[{i}]"))?;
        }
        Ok(())
    }

    /// An answer to `SendMessage`: its task or its message.
    pub fn send_response(&mut self, r: &SendMessageResponse) -> Result<(), LimitError> {
        match &r.payload {
            Some(send_message_response::Payload::Task(t)) => self.task_at(t, "task."),
            Some(send_message_response::Payload::Message(m)) => self.message(m, "message"),
            None => Ok(()),
        }
    }

    /// An event of a stream: its task, message, status update (the
    /// status message, the event's metadata) or artifact update.
    pub fn stream_response(&mut self, r: &StreamResponse) -> Result<(), LimitError> {
        match &r.payload {
            Some(stream_response::Payload::Task(t)) => self.task_at(t, "task."),
            Some(stream_response::Payload::Message(m)) => self.message(m, "message"),
            Some(stream_response::Payload::StatusUpdate(u)) => {
                if let Some(m) = u.status.as_ref().and_then(|s| s.message.as_ref()) {
                    self.message(m, "statusUpdate.status.message")?;
                }
                self.structure(u.metadata.as_ref(), "statusUpdate.metadata")
            }
            Some(stream_response::Payload::ArtifactUpdate(u)) => {
                if let Some(a) = &u.artifact {
                    self.artifact(a, "artifactUpdate.artifact")?;
                }
                self.structure(u.metadata.as_ref(), "artifactUpdate.metadata")
            }
            None => Ok(()),
        }
    }

    /// A page of tasks.
    pub fn task_list(&mut self, r: &ListTasksResponse) -> Result<(), LimitError> {
        for (i, t) in r.tasks.iter().enumerate() {
            self.task_at(t, &format!("tasks[{i}]."))?;
        }
        Ok(())
    }

    /// An agent card: its extensions' params and its signatures' headers.
    pub fn card(&mut self, card: &AgentCard) -> Result<(), LimitError> {
        if let Some(caps) = &card.capabilities {
            for (i, e) in caps.extensions.iter().enumerate() {
                self.structure(
                    e.params.as_ref(),
                    &format!("capabilities.extensions[{i}].params"),
                )?;
            }
        }
        for (i, s) in card.signatures.iter().enumerate() {
            self.structure(s.header.as_ref(), &format!("signatures[{i}].header"))?;
        }
        Ok(())
    }

    fn error(&self, over: Over, field: &str) -> LimitError {
        LimitError {
            field: field.to_owned(),
            description: match over {
                Over::Depth => depth_message(),
                Over::Values(max) => values_message(max),
            },
        }
    }

    fn take(&mut self) -> Result<(), Over> {
        match &mut self.values_left {
            Some(0) => Err(Over::Values(self.max_values)),
            Some(n) => {
                *n -= 1;
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// A value under `parent` levels of objects and arrays.
    fn walk_value(&mut self, v: &Value, parent: usize) -> Result<(), Over> {
        self.take()?;
        match &v.kind {
            Some(Kind::StructValue(s)) => self.walk_struct(s, parent + 1),
            Some(Kind::ListValue(l)) => {
                let level = parent + 1;
                if level > MAX_STRUCT_DEPTH {
                    return Err(Over::Depth);
                }
                l.values.iter().try_for_each(|v| self.walk_value(v, level))
            }
            _ => Ok(()),
        }
    }

    /// An object at nesting `level`.
    fn walk_struct(&mut self, s: &Struct, level: usize) -> Result<(), Over> {
        if level > MAX_STRUCT_DEPTH {
            return Err(Over::Depth);
        }
        s.fields
            .values()
            .try_for_each(|v| self.walk_value(v, level))
    }
}

/// The nesting of a `Struct`: 1 for `{}`, 2 for `{"a":{}}`..., counted up
/// to `MAX_STRUCT_DEPTH + 1` at most (deeper content answers that).
pub fn struct_depth(s: &Struct) -> usize {
    fn value(v: &Value, parent: usize) -> usize {
        match &v.kind {
            Some(Kind::StructValue(s)) => structure(s, parent + 1),
            Some(Kind::ListValue(l)) if parent < MAX_STRUCT_DEPTH => l
                .values
                .iter()
                .map(|v| value(v, parent + 1))
                .max()
                .unwrap_or(parent + 1),
            Some(Kind::ListValue(_)) => parent + 1,
            _ => parent,
        }
    }
    fn structure(s: &Struct, level: usize) -> usize {
        if level > MAX_STRUCT_DEPTH {
            return level;
        }
        s.fields
            .values()
            .map(|v| value(v, level))
            .max()
            .unwrap_or(level)
    }
    structure(s, 1)
}

#[cfg(test)]
mod tests;
