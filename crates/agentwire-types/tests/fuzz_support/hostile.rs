//! Hostile shapes for the limit suites (`fuzz_limits`, `fuzz_store`,
//! `fuzz_client`): free-form content (`google.protobuf.Struct` / `Value`)
//! nested at, just over and far over `MAX_STRUCT_DEPTH`, as JSON text and
//! as protobuf bytes, and the depths and counts the strategies pick from.
//!
//! Everything here is built without recursion and without a
//! `serde_json::Value` of the nesting (whose drop recurses): a million
//! levels cost their bytes and nothing on the stack.
#![allow(dead_code)]

use proptest::prelude::*;

/// `agentwire_types::limits::MAX_STRUCT_DEPTH`, restated: the suites check
/// the constant against this, so that a change of the limit is a change of
/// the tests too.
pub const DEPTH_LIMIT: usize = 30;

/// How nested content is made: objects (`{"a":{"a":...}}`), arrays
/// (`[[...]]`), or both in turn (starting with an object).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Nest {
    Objects,
    Arrays,
    Mixed,
}

impl Nest {
    /// Whether level `i` (0 = outermost) is an object.
    fn object_at(self, i: usize) -> bool {
        match self {
            Nest::Objects => true,
            Nest::Arrays => false,
            Nest::Mixed => i % 2 == 0,
        }
    }
}

/// A nesting for a `Struct` (the outermost level is an object).
pub fn struct_nest() -> impl Strategy<Value = Nest> {
    prop::sample::select(vec![Nest::Objects, Nest::Mixed])
}

/// A nesting for a `Value` (a data part).
pub fn value_nest() -> impl Strategy<Value = Nest> {
    prop::sample::select(vec![Nest::Objects, Nest::Arrays, Nest::Mixed])
}

/// Depths around the limit, and far over it: 31 (one over), 120 (under
/// serde_json's own recursion limit of 128), 129 (over it), 10,000 and
/// 1,000,000 (what would overflow a stack if any reader recursed).
pub fn depth() -> impl Strategy<Value = usize> {
    prop_oneof![
        6 => 1usize..=DEPTH_LIMIT,
        3 => Just(DEPTH_LIMIT),
        4 => Just(DEPTH_LIMIT + 1),
        2 => (DEPTH_LIMIT + 2)..=127usize,
        1 => Just(120usize),
        1 => Just(129usize),
        1 => Just(10_000usize),
        1 => Just(1_000_000usize),
    ]
}

/// Depths within the limit only (for what must be accepted).
pub fn depth_within() -> impl Strategy<Value = usize> {
    prop_oneof![3 => 1usize..=DEPTH_LIMIT, 1 => Just(DEPTH_LIMIT)]
}

/// A count around `limit`: small, just under, at, just over, far over.
pub fn count_around(limit: usize) -> impl Strategy<Value = usize> {
    prop_oneof![
        2 => 0usize..4,
        2 => Just(limit - 1),
        3 => Just(limit),
        4 => Just(limit + 1),
        1 => (limit + 2)..=(limit + limit / 2),
    ]
}

/// JSON text of content `depth` levels deep (`{}` and `[]` are one level;
/// depth 0 is the scalar `1`), innermost holding `1`.
pub fn nested_json(depth: usize, nest: Nest) -> String {
    let mut out = String::with_capacity(depth * 6 + 1);
    for i in 0..depth {
        out.push_str(if nest.object_at(i) { "{\"a\":" } else { "[" });
    }
    out.push('1');
    for i in (0..depth).rev() {
        out.push(if nest.object_at(i) { '}' } else { ']' });
    }
    out
}

/// A JSON object of `n` members (`{"k0":0,...}`): `n` values.
pub fn wide_json(n: usize) -> String {
    let mut out = String::with_capacity(n * 10 + 2);
    out.push('{');
    for i in 0..n {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!("\"k{i}\":{}", i % 10));
    }
    out.push('}');
    out
}

/// A JSON array of `n` strings.
pub fn strings_json(n: usize, prefix: &str) -> String {
    let items: Vec<String> = (0..n).map(|i| format!("\"{prefix}{i}\"")).collect();
    format!("[{}]", items.join(","))
}

// Protobuf.

/// A varint.
pub fn varint(mut n: u64, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// A length-delimited field `number` holding `bytes`.
pub fn field(number: u32, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 6);
    varint(u64::from(number << 3 | 2), &mut out);
    varint(bytes.len() as u64, &mut out);
    out.extend_from_slice(bytes);
    out
}

/// A varint field `number`.
pub fn varint_field(number: u32, value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    varint(u64::from(number << 3), &mut out);
    varint(value, &mut out);
    out
}

/// Builds bytes back to front: each piece is pushed reversed, the whole is
/// reversed at the end (so that a header can be written knowing the length
/// of what it holds, without copying it).
struct Backwards(Vec<u8>);

impl Backwards {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn push(&mut self, piece: &[u8]) {
        self.0.extend(piece.iter().rev());
    }
    /// The header of a length-delimited field holding everything so far
    /// (no allocation: a million levels are a million headers).
    fn wrap(&mut self, number: u32) {
        let mut head = [0u8; 16];
        let mut n = 0;
        for mut v in [u64::from(number << 3 | 2), self.len() as u64] {
            while v >= 0x80 {
                head[n] = (v as u8) | 0x80;
                v >>= 7;
                n += 1;
            }
            head[n] = v as u8;
            n += 1;
        }
        self.push(&head[..n]);
    }
    fn finish(mut self) -> Vec<u8> {
        self.0.reverse();
        self.0
    }
}

/// The encoded `google.protobuf.Value` of content `depth` levels deep (as
/// [`nested_json`]: the innermost value is the number 1). The deepest ones
/// (megabytes) are made once per process.
pub fn nested_value_proto(depth: usize, nest: Nest) -> Vec<u8> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};
    type Made = HashMap<(usize, Nest), Arc<Vec<u8>>>;
    static MADE: Mutex<Option<Made>> = Mutex::new(None);
    if depth < 10_000 {
        return make_nested_value_proto(depth, nest);
    }
    let made = {
        let mut cache = MADE.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .get_or_insert_with(HashMap::new)
            .get(&(depth, nest))
            .cloned()
    };
    let bytes = made.unwrap_or_else(|| {
        let bytes = Arc::new(make_nested_value_proto(depth, nest));
        let mut cache = MADE.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .get_or_insert_with(HashMap::new)
            .insert((depth, nest), bytes.clone());
        bytes
    });
    bytes.to_vec()
}

fn make_nested_value_proto(depth: usize, nest: Nest) -> Vec<u8> {
    let mut b = Backwards(Vec::with_capacity(depth * 14 + 9));
    // number_value (2, fixed64) = 1.0
    let mut leaf = vec![0x11];
    leaf.extend_from_slice(&1.0f64.to_le_bytes());
    b.push(&leaf);
    for i in (0..depth).rev() {
        if nest.object_at(i) {
            // Value { struct_value (5): Struct { fields (1): entry { key (1)
            // "a", value (2): inner } } }
            b.wrap(2);
            b.push(&[0x0a, 0x01, b'a']);
            b.wrap(1);
            b.wrap(5);
        } else {
            // Value { list_value (6): ListValue { values (1): inner } }
            b.wrap(1);
            b.wrap(6);
        }
    }
    b.finish()
}

/// The encoded `google.protobuf.Struct` of content `depth` (at least 1)
/// levels deep, whose outermost level is an object.
pub fn nested_struct_proto(depth: usize, nest: Nest) -> Vec<u8> {
    assert!(depth >= 1 && nest.object_at(0));
    // The Value of the whole, less its struct_value header.
    let value = nested_value_proto(depth, nest);
    let mut at = &value[1..];
    // Skip the length varint of struct_value (5).
    while let Some((&byte, rest)) = at.split_first() {
        at = rest;
        if byte < 0x80 {
            break;
        }
    }
    at.to_vec()
}

/// The encoded `Struct` of `n` members (`k0`... holding numbers).
pub fn wide_struct_proto(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 16);
    for i in 0..n {
        let mut entry = field(1, format!("k{i}").as_bytes());
        let mut number = vec![0x11];
        number.extend_from_slice(&((i % 10) as f64).to_le_bytes());
        entry.extend(field(2, &number));
        out.extend(field(1, &entry));
    }
    out
}

/// A gRPC request frame.
pub fn grpc_frame(message: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert_eq!(nested_json(0, Nest::Objects), "1");
        assert_eq!(nested_json(2, Nest::Mixed), "{\"a\":[1]}");
        assert_eq!(nested_json(2, Nest::Arrays), "[[1]]");
    }
}
