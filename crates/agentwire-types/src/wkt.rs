//! `google.protobuf.Struct`, `Value`, `ListValue` and `NullValue`: the
//! free-form JSON of metadata and data parts.
//!
//! Their protobuf encoding is the well-known types'; their JSON form is the
//! JSON value itself, with one care taken over generic implementations:
//! whole numbers are written as integers (`42`, not `42.0`), so data passes
//! through the protobuf model unchanged.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};

/// A JSON object.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Struct {
    /// The members, in key order.
    #[prost(btree_map = "string, message", tag = "1")]
    pub fields: BTreeMap<String, Value>,
}

/// A JSON value.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Value {
    /// Which kind of value (absent means null).
    #[prost(oneof = "value::Kind", tags = "1, 2, 3, 4, 5, 6")]
    pub kind: Option<value::Kind>,
}

/// The kinds of [`Value`].
pub mod value {
    /// One JSON value kind.
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum Kind {
        /// `null`.
        #[prost(enumeration = "super::NullValue", tag = "1")]
        NullValue(i32),
        /// A number (a double).
        #[prost(double, tag = "2")]
        NumberValue(f64),
        /// A string.
        #[prost(string, tag = "3")]
        StringValue(String),
        /// `true` or `false`.
        #[prost(bool, tag = "4")]
        BoolValue(bool),
        /// An object.
        #[prost(message, tag = "5")]
        StructValue(super::Struct),
        /// An array.
        #[prost(message, tag = "6")]
        ListValue(super::ListValue),
    }
}

/// A JSON array.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ListValue {
    /// The elements.
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<Value>,
}

/// The single value of JSON `null`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum NullValue {
    /// `null`.
    NullValue = 0,
}

/// Largest magnitude below which every integer is exact in a double.
const EXACT_INT: f64 = 9_007_199_254_740_992.0;

impl serde::Serialize for Value {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use value::Kind;
        match &self.kind {
            None | Some(Kind::NullValue(_)) => s.serialize_unit(),
            Some(Kind::NumberValue(n)) if !n.is_finite() => s.serialize_unit(),
            Some(Kind::NumberValue(n)) if n.fract() == 0.0 && n.abs() < EXACT_INT => {
                s.serialize_i64(*n as i64)
            }
            Some(Kind::NumberValue(n)) => s.serialize_f64(*n),
            Some(Kind::StringValue(v)) => s.serialize_str(v),
            Some(Kind::BoolValue(b)) => s.serialize_bool(*b),
            Some(Kind::StructValue(v)) => v.serialize(s),
            Some(Kind::ListValue(v)) => v.serialize(s),
        }
    }
}

impl serde::Serialize for Struct {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.fields.len()))?;
        for (k, v) in &self.fields {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl serde::Serialize for ListValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.values.len()))?;
        for v in &self.values {
            seq.serialize_element(v)?;
        }
        seq.end()
    }
}

/// Reads one [`Value`] whose enclosing objects and arrays are `parent`
/// levels deep: an object or array in it is one level deeper, refused past
/// [`MAX_STRUCT_DEPTH`](crate::limits::MAX_STRUCT_DEPTH) while it is read
/// (before anything below it is built). Each value counts against the
/// budget of the request being read, if any ([`crate::limits::reading`]).
#[derive(Clone, Copy)]
struct ValueSeed {
    parent: usize,
}

impl<'de> serde::de::DeserializeSeed<'de> for ValueSeed {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        crate::limits::count_value::<D::Error>()?;
        d.deserialize_any(ValueVisitor {
            parent: self.parent,
        })
    }
}

/// The level of an object or array under `parent` levels, or the error of
/// one too deep.
fn level<E: serde::de::Error>(parent: usize) -> Result<usize, E> {
    let level = parent + 1;
    if level > crate::limits::MAX_STRUCT_DEPTH {
        return Err(E::custom(crate::limits::depth_message()));
    }
    Ok(level)
}

struct ValueVisitor {
    parent: usize,
}

fn kind(k: value::Kind) -> Value {
    Value { kind: Some(k) }
}

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(kind(value::Kind::NullValue(0)))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(kind(value::Kind::NullValue(0)))
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(kind(value::Kind::BoolValue(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(kind(value::Kind::NumberValue(v as f64)))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(kind(value::Kind::NumberValue(v as f64)))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(kind(value::Kind::NumberValue(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(kind(value::Kind::StringValue(v.to_owned())))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(kind(value::Kind::StringValue(v)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let level = level(self.parent)?;
        let mut values = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(v) = seq.next_element_seed(ValueSeed { parent: level })? {
            values.push(v);
        }
        Ok(kind(value::Kind::ListValue(ListValue { values })))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        StructVisitor {
            level: level(self.parent)?,
        }
        .visit_map(map)
        .map(|s| kind(value::Kind::StructValue(s)))
    }
}

/// Reads the members of an object at nesting `level` (1 for a metadata
/// object itself).
struct StructVisitor {
    level: usize,
}

impl<'de> Visitor<'de> for StructVisitor {
    type Value = Struct;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Struct, A::Error> {
        let mut fields = BTreeMap::new();
        while let Some(k) = map.next_key::<String>()? {
            let v = map.next_value_seed(ValueSeed { parent: self.level })?;
            fields.insert(k, v);
        }
        Ok(Struct { fields })
    }
}

impl<'de> serde::Deserialize<'de> for Value {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::DeserializeSeed::deserialize(ValueSeed { parent: 0 }, d)
    }
}

impl<'de> serde::Deserialize<'de> for Struct {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(StructVisitor { level: 1 })
    }
}

impl<'de> serde::Deserialize<'de> for ListValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value {
                kind: Some(value::Kind::ListValue(l)),
            } => Ok(l),
            _ => Err(serde::de::Error::custom("expected a JSON array")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn json_round_trip_keeps_integers() {
        let text = r#"{"a":[1,2.5,null,true,"x"],"b":{"c":42},"big":12345678901}"#;
        let s: Struct = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::to_string(&s).unwrap(), text);
    }

    #[test]
    fn protobuf_round_trip() {
        let s: Struct = serde_json::from_str(r#"{"k":{"n":[1,"two",false]}}"#).unwrap();
        let bytes = s.encode_to_vec();
        assert_eq!(Struct::decode(bytes.as_slice()).unwrap(), s);
    }
}
