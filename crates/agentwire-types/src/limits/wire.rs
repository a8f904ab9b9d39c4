//! The limits applied to a protobuf request before it is decoded (feature
//! `grpc`): prost builds every part, string and value of a message as it
//! decodes it (an empty part costs two bytes on the wire and over a
//! hundred in memory), so the server's codec ([`Codec`], the codec of the
//! generated services) walks the encoded request first, counting what the
//! limits bound, and refuses it with the invalid-parameters status naming
//! the field. The walk allocates nothing and reads each byte once.
//!
//! Only the requests that carry lists or `Struct`s are walked: 1.0
//! `SendMessageRequest` and `CancelTaskRequest`; 0.3 `SendMessageRequest`
//! and `CreateTaskPushNotificationConfigRequest`. The limits are those the
//! server sets around the call with [`decoding`]; a client (or a call
//! outside of it) decodes as prost does.

use std::any::TypeId;
use std::cell::Cell;
use std::marker::PhantomData;

use bytes::Buf;
use tonic::Status;
use tonic::codec::{BufferSettings, DecodeBuf};

use super::{LimitError, MAX_STRUCT_DEPTH, ReadLimits, depth_message, list_message};
use super::{parts_message, values_message};

thread_local! {
    static DECODING: Cell<Option<ReadLimits>> = const { Cell::new(None) };
}

/// Runs `poll` (the poll of a server call's future, inside which tonic
/// decodes the request) with `limits` for the requests it decodes.
pub fn decoding<T>(limits: &ReadLimits, poll: impl FnOnce() -> T) -> T {
    struct Restore(Option<ReadLimits>);
    impl Drop for Restore {
        fn drop(&mut self) {
            DECODING.with(|d| d.set(self.0));
        }
    }
    let previous = DECODING.with(|d| d.replace(Some(*limits)));
    let _restore = Restore(previous);
    poll()
}

/// What a field holds, for the walk.
#[derive(Clone, Copy)]
enum Kind {
    /// A message of this shape.
    Message(&'static Shape),
    /// A repeated message of this shape, counted against `max_parts`.
    Parts(&'static Shape),
    /// A repeated string, counted against `max_list_items`.
    Strings,
    /// `google.protobuf.Struct`.
    Struct,
    /// `google.protobuf.Value`.
    Value,
}

/// A message's fields worth walking: (number, JSON name, kind). Other
/// fields are skipped.
struct Shape(&'static [(u32, &'static str, Kind)]);

/// 1.0 (`lf.a2a.v1`).
mod v1 {
    use super::{Kind, Shape};

    pub(super) static PART: Shape =
        Shape(&[(4, "data", Kind::Value), (5, "metadata", Kind::Struct)]);
    pub(super) static MESSAGE: Shape = Shape(&[
        (5, "parts", Kind::Parts(&PART)),
        (6, "metadata", Kind::Struct),
        (7, "extensions", Kind::Strings),
        (8, "referenceTaskIds", Kind::Strings),
    ]);
    static CONFIGURATION: Shape = Shape(&[(1, "acceptedOutputModes", Kind::Strings)]);
    pub(super) static SEND: Shape = Shape(&[
        (2, "message", Kind::Message(&MESSAGE)),
        (3, "configuration", Kind::Message(&CONFIGURATION)),
        (4, "metadata", Kind::Struct),
    ]);
    pub(super) static CANCEL: Shape = Shape(&[(3, "metadata", Kind::Struct)]);
}

/// 0.3 (`a2a.v1`), with the JSON names of its HTTP+JSON form.
#[cfg(feature = "v0_3")]
mod v03 {
    use super::{Kind, Shape};

    static DATA_PART: Shape = Shape(&[(1, "data", Kind::Struct)]);
    static PART: Shape = Shape(&[
        (3, "data", Kind::Message(&DATA_PART)),
        (4, "metadata", Kind::Struct),
    ]);
    static MESSAGE: Shape = Shape(&[
        (5, "parts", Kind::Parts(&PART)),
        (6, "metadata", Kind::Struct),
        (7, "extensions", Kind::Strings),
    ]);
    static AUTHENTICATION: Shape = Shape(&[(1, "schemes", Kind::Strings)]);
    static PUSH: Shape = Shape(&[(4, "authentication", Kind::Message(&AUTHENTICATION))]);
    static CONFIGURATION: Shape = Shape(&[
        (1, "acceptedOutputModes", Kind::Strings),
        (2, "pushNotificationConfig", Kind::Message(&PUSH)),
    ]);
    pub(super) static SEND: Shape = Shape(&[
        (1, "message", Kind::Message(&MESSAGE)),
        (2, "configuration", Kind::Message(&CONFIGURATION)),
        (3, "metadata", Kind::Struct),
    ]);
    static TASK_PUSH: Shape = Shape(&[(2, "pushNotificationConfig", Kind::Message(&PUSH))]);
    pub(super) static CREATE_PUSH: Shape = Shape(&[(3, "config", Kind::Message(&TASK_PUSH))]);
}

/// The shape of a request type that is walked, if it is one.
fn shape_of<U: 'static>() -> Option<&'static Shape> {
    let t = TypeId::of::<U>();
    if t == TypeId::of::<crate::SendMessageRequest>() {
        return Some(&v1::SEND);
    }
    if t == TypeId::of::<crate::CancelTaskRequest>() {
        return Some(&v1::CANCEL);
    }
    #[cfg(feature = "v0_3")]
    {
        use crate::v0_3::grpc::proto;
        if t == TypeId::of::<proto::SendMessageRequest>() {
            return Some(&v03::SEND);
        }
        if t == TypeId::of::<proto::CreateTaskPushNotificationConfigRequest>() {
            return Some(&v03::CREATE_PUSH);
        }
    }
    None
}

/// Checks an encoded request of type `U` against `limits` without decoding
/// it. Bytes that are not valid protobuf end the walk without an error:
/// the decoder that follows refuses them.
pub fn check<U: 'static>(bytes: &[u8], limits: &ReadLimits) -> Result<(), LimitError> {
    let Some(shape) = shape_of::<U>() else {
        return Ok(());
    };
    let mut walk = Walk {
        limits,
        values_left: limits.max_struct_values,
    };
    match walk.message(bytes, shape, &mut String::new()) {
        Ok(()) | Err(Stop::Malformed) => Ok(()),
        Err(Stop::Over(e)) => Err(e),
    }
}

/// Why a walk stopped.
enum Stop {
    /// A limit was passed.
    Over(LimitError),
    /// The bytes are not protobuf: left to the decoder.
    Malformed,
}

struct Walk<'a> {
    limits: &'a ReadLimits,
    values_left: usize,
}

/// The fields of an encoded message: (number, wire type, value bytes for
/// the length-delimited ones).
struct Fields<'b> {
    bytes: &'b [u8],
}

fn varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for i in 0..10 {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        value |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Some(value);
        }
    }
    None
}

impl<'b> Iterator for Fields<'b> {
    /// (field number, the bytes of a length-delimited field), or an error
    /// on malformed bytes.
    type Item = Result<(u32, Option<&'b [u8]>), Stop>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.bytes.is_empty() {
            return None;
        }
        let mut rest = self.bytes;
        let item = (|| {
            let key = varint(&mut rest)?;
            let number = u32::try_from(key >> 3).ok()?;
            let value = match key & 7 {
                0 => {
                    varint(&mut rest)?;
                    None
                }
                1 => {
                    rest = rest.get(8..)?;
                    None
                }
                5 => {
                    rest = rest.get(4..)?;
                    None
                }
                2 => {
                    let len = usize::try_from(varint(&mut rest)?).ok()?;
                    let value = rest.get(..len)?;
                    rest = rest.get(len..)?;
                    Some(value)
                }
                // Groups (deprecated) and bad wire types: the decoder's.
                _ => return None,
            };
            Some((number, value))
        })();
        match item {
            Some(item) => {
                self.bytes = rest;
                Some(Ok(item))
            }
            None => {
                self.bytes = &[];
                Some(Err(Stop::Malformed))
            }
        }
    }
}

/// `path` with `.name` (and `[index]`) appended, for an error.
fn field_path(path: &str, name: &str, index: Option<usize>) -> String {
    let mut p = String::with_capacity(path.len() + name.len() + 8);
    p.push_str(path);
    if !p.is_empty() {
        p.push('.');
    }
    p.push_str(name);
    if let Some(i) = index {
        p.push_str(&format!("[{i}]"));
    }
    p
}

impl Walk<'_> {
    fn over(field: String, description: String) -> Stop {
        Stop::Over(LimitError { field, description })
    }

    /// The stop of a walk of `Struct` content in `field`.
    fn stop(&self, deep: Deep, field: String) -> Stop {
        match deep {
            Deep::Depth => Self::over(field, depth_message()),
            // The budget is the request's: the error names the field where
            // it ran out.
            Deep::Values => Self::over(field, values_message(self.limits.max_struct_values)),
            Deep::Malformed => Stop::Malformed,
        }
    }

    /// A message of `shape` at `path` (the path is built only for an
    /// error, from the names of the enclosing fields).
    fn message(&mut self, bytes: &[u8], shape: &Shape, path: &mut String) -> Result<(), Stop> {
        // Occurrences of each field of the shape, in this message.
        let mut counts = [0usize; 8];
        for field in (Fields { bytes }) {
            let (number, value) = field?;
            let Some(i) = shape.0.iter().position(|(n, _, _)| *n == number) else {
                continue;
            };
            let (_, name, kind) = shape.0[i];
            let Some(value) = value else {
                continue; // The decoder refuses the wrong wire type.
            };
            let n = counts[i];
            counts[i] += 1;
            match kind {
                Kind::Message(inner) => {
                    let at = path.len();
                    *path = field_path(path, name, None);
                    self.message(value, inner, path)?;
                    path.truncate(at);
                }
                Kind::Parts(inner) => {
                    if n >= self.limits.max_parts {
                        return Err(Self::over(
                            field_path(path, name, None),
                            parts_message(self.limits.max_parts),
                        ));
                    }
                    let at = path.len();
                    *path = field_path(path, name, Some(n));
                    self.message(value, inner, path)?;
                    path.truncate(at);
                }
                Kind::Strings => {
                    if n >= self.limits.max_list_items {
                        return Err(Self::over(
                            field_path(path, name, None),
                            list_message(self.limits.max_list_items),
                        ));
                    }
                }
                Kind::Struct => self
                    .structure(value, 1)
                    .map_err(|e| self.stop(e, field_path(path, name, None)))?,
                Kind::Value => self
                    .value(value, 0)
                    .map_err(|e| self.stop(e, field_path(path, name, None)))?,
            }
        }
        Ok(())
    }

    /// An encoded `Struct` at nesting `level`.
    fn structure(&mut self, bytes: &[u8], level: usize) -> Result<(), Deep> {
        if level > MAX_STRUCT_DEPTH {
            return Err(Deep::Depth);
        }
        for field in (Fields { bytes }) {
            // fields (1): map entries of key (1) and value (2).
            let (1, Some(entry)) = field.map_err(|_| Deep::Malformed)? else {
                continue;
            };
            for f in (Fields { bytes: entry }) {
                if let (2, Some(v)) = f.map_err(|_| Deep::Malformed)? {
                    self.value(v, level)?;
                }
            }
        }
        Ok(())
    }

    /// An encoded `Value` under `parent` levels.
    fn value(&mut self, bytes: &[u8], parent: usize) -> Result<(), Deep> {
        if self.values_left == 0 {
            return Err(Deep::Values);
        }
        self.values_left -= 1;
        for field in (Fields { bytes }) {
            match field.map_err(|_| Deep::Malformed)? {
                // struct_value (5)
                (5, Some(s)) => self.structure(s, parent + 1)?,
                // list_value (6): values (1)
                (6, Some(list)) => {
                    let level = parent + 1;
                    if level > MAX_STRUCT_DEPTH {
                        return Err(Deep::Depth);
                    }
                    for item in (Fields { bytes: list }) {
                        if let (1, Some(v)) = item.map_err(|_| Deep::Malformed)? {
                            self.value(v, level)?;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Why the walk of `Struct` content stopped (its field named later).
enum Deep {
    Depth,
    Values,
    Malformed,
}

/// The codec of the generated gRPC services: prost's, with the request
/// walked first ([`check`]) when the call is decoded inside [`decoding`].
#[derive(Debug, Clone)]
pub struct Codec<T, U> {
    _types: PhantomData<(T, U)>,
}

impl<T, U> Default for Codec<T, U> {
    fn default() -> Self {
        Self {
            _types: PhantomData,
        }
    }
}

impl<T, U> tonic::codec::Codec for Codec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = tonic_prost::ProstEncoder<T>;
    type Decoder = Decoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        tonic_prost::ProstEncoder::new(BufferSettings::default())
    }

    fn decoder(&mut self) -> Self::Decoder {
        Decoder {
            inner: tonic_prost::ProstDecoder::new(BufferSettings::default()),
        }
    }
}

/// The decoder of [`Codec`].
#[derive(Debug)]
pub struct Decoder<U> {
    inner: tonic_prost::ProstDecoder<U>,
}

impl<U: prost::Message + Default + 'static> tonic::codec::Decoder for Decoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        if let Some(limits) = DECODING.with(Cell::get) {
            // One message, whole, in one buffer (tonic's).
            let bytes = buf.chunk();
            if bytes.len() == buf.remaining() {
                check::<U>(bytes, &limits).map_err(|e| e.into_invalid_params().to_grpc_status())?;
            }
        }
        self.inner.decode(buf)
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.inner.buffer_settings()
    }
}

/// The encoder of [`Codec`] (prost's).
pub type Encoder<T> = tonic_prost::ProstEncoder<T>;
