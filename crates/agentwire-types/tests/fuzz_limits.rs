//! The readers of `agentwire_types::limits` over generated hostile content
//! (issue 40), without a server: the JSON readers of `Struct`/`Value` (in
//! and out of a request being read), the walk of encoded protobuf requests
//! (`limits::wire::check`, what the gRPC codec runs first) and the walk of
//! built content (`ContentCheck`), with content nested at, just over and
//! far over the nesting limit (up to a million levels), objects, arrays
//! and both. The properties: within the limit, read; over it, refused
//! with the limit's error naming the field; never a stack overflow (this
//! process would die). Also checks the suite's own protobuf builders
//! against prost. The same content through the servers' real routers:
//! `agentwire-server/tests/fuzz_limits.rs`.

mod fuzz_support;

use agentwire_types::limits::{ContentCheck, MAX_STRUCT_DEPTH, ReadLimits, reading};
use agentwire_types::{Message, SendMessageRequest};
use fuzz_support::config;
use fuzz_support::hostile::{
    DEPTH_LIMIT, Nest, depth, field, nested_json, nested_struct_proto, nested_value_proto,
    struct_nest, value_nest, varint_field,
};
use proptest::prelude::*;

#[test]
fn the_limit_is_the_one_the_suite_generates_around() {
    assert_eq!(MAX_STRUCT_DEPTH, DEPTH_LIMIT);
}

/// What the nesting error says.
const DEPTH_PHRASE: &str = "levels deep";

/// A 1.0 send with `c` (JSON) at place `p` (0: send metadata, 1: message
/// metadata, 2: part metadata, 3: data part).
fn send_json(p: usize, c: &str) -> String {
    let part_meta = if p == 2 {
        format!(r#","metadata":{c}"#)
    } else {
        String::new()
    };
    let data = if p == 3 {
        format!(r#",{{"data":{c}}}"#)
    } else {
        String::new()
    };
    let meta = if p == 1 {
        format!(r#","metadata":{c}"#)
    } else {
        String::new()
    };
    let send_meta = if p == 0 {
        format!(r#","metadata":{c}"#)
    } else {
        String::new()
    };
    format!(
        r#"{{"message":{{"messageId":"m","role":"ROLE_USER","parts":[{{"text":"x"{part_meta}}}{data}]{meta}}}{send_meta}}}"#
    )
}

/// The same send as protobuf bytes.
fn send_proto(p: usize, depth: usize, nest: Nest) -> Vec<u8> {
    let mut part = field(1, b"x");
    if p == 2 {
        part.extend(field(5, &nested_struct_proto(depth, nest)));
    }
    let mut m = field(1, b"m");
    m.extend(varint_field(4, 1));
    m.extend(field(5, &part));
    if p == 3 {
        m.extend(field(5, &field(4, &nested_value_proto(depth, nest))));
    }
    if p == 1 {
        m.extend(field(6, &nested_struct_proto(depth, nest)));
    }
    let mut req = field(2, &m);
    if p == 0 {
        req.extend(field(4, &nested_struct_proto(depth, nest)));
    }
    req
}

fn field_of(p: usize) -> &'static str {
    [
        "metadata",
        "message.metadata",
        "message.parts[0].metadata",
        "message.parts[1].data",
    ][p]
}

/// Runs `f` on a thread with a small stack (256 KiB, an eighth of a tokio
/// worker's): a reader that recursed with the input would overflow it.
fn small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(f)
        .expect("a thread")
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

proptest! {
    #![proptest_config(config(128))]

    /// The JSON readers, in a request being read (the bindings' case) and
    /// out of one (what a client reads): refused past the limit.
    #[test]
    fn json_readers_refuse_nesting_past_the_limit(
        p in 0usize..4,
        struct_nest in struct_nest(),
        value_nest in value_nest(),
        depth in depth(),
        in_request in any::<bool>(),
    ) {
        let nest = if p == 3 { value_nest } else { struct_nest };
        let depth = if p == 3 { depth } else { depth.max(1) };
        let json = send_json(p, &nested_json(depth, nest));
        let (ok, err) = small_stack(move || {
            let read = || serde_json::from_str::<SendMessageRequest>(&json);
            let got = if in_request { reading(&ReadLimits::default(), read) } else { read() };
            (got.is_ok(), got.err().map(|e| e.to_string()))
        });
        if depth <= DEPTH_LIMIT {
            prop_assert!(ok, "{} levels at {}: {:?}", depth, field_of(p), err);
        } else {
            let err = err.unwrap_or_default();
            // Never serde_json's own recursion limit (128 levels of the
            // whole document): the readers stop at ours first.
            prop_assert!(
                err.contains(DEPTH_PHRASE),
                "{} levels at {}: {}", depth, field_of(p), err
            );
        }
    }

    /// The walk of encoded requests (the gRPC codec's): refused past the
    /// limit, naming the field.
    #[test]
    fn the_protobuf_walk_refuses_nesting_past_the_limit(
        p in 0usize..4,
        struct_nest in struct_nest(),
        value_nest in value_nest(),
        depth in depth(),
    ) {
        let nest = if p == 3 { value_nest } else { struct_nest };
        let depth = if p == 3 { depth } else { depth.max(1) };
        let bytes = send_proto(p, depth, nest);
        let got = small_stack(move || {
            agentwire_types::limits::wire::check::<SendMessageRequest>(&bytes, &ReadLimits::default())
                .map_err(|e| e.to_string())
        });
        if depth <= DEPTH_LIMIT {
            prop_assert!(got.is_ok(), "{} levels at {}: {:?}", depth, field_of(p), got);
        } else {
            let err = got.err().unwrap_or_default();
            prop_assert!(
                err.contains(DEPTH_PHRASE) && err.contains(field_of(p)),
                "{} levels at {}: {}", depth, field_of(p), err
            );
        }
    }

    /// The suite's protobuf builders give what prost encodes, and what
    /// prost decodes passes `ContentCheck` exactly within the limit (up to
    /// the depth prost itself can decode).
    #[test]
    fn built_content_is_checked_as_read(
        p in 0usize..4,
        struct_nest in struct_nest(),
        value_nest in value_nest(),
        depth in 0usize..=31,
    ) {
        let nest = if p == 3 { value_nest } else { struct_nest };
        let depth = if p == 3 { depth } else { depth.max(1) };
        let bytes = send_proto(p, depth, nest);
        let decoded: SendMessageRequest = prost::Message::decode(bytes.as_slice())
            .map_err(|e| TestCaseError::fail(format!("prost refused the builder's bytes: {e}")))?;
        // The builder's bytes are prost's encoding of the same request.
        prop_assert_eq!(prost::Message::encode_to_vec(&decoded), bytes);
        let mut check = ContentCheck::request(&ReadLimits::default());
        let message: &Message = decoded.message.as_ref().ok_or_else(|| TestCaseError::fail("no message"))?;
        let got = check
            .structure(decoded.metadata.as_ref(), "metadata")
            .and_then(|()| check.message(message, "message"));
        if depth <= DEPTH_LIMIT {
            prop_assert!(got.is_ok(), "{:?}", got);
            // And the JSON of the same content reads to the same request.
            let json = send_json(p, &nested_json(depth, nest));
            let from_json: SendMessageRequest = serde_json::from_str(&json)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(from_json, decoded);
        } else {
            let e = got.err().map(|e| e.to_string()).unwrap_or_default();
            prop_assert!(e.contains(field_of(p)) && e.contains(DEPTH_PHRASE), "{}", e);
        }
    }
}

#[cfg(feature = "v0_3")]
mod v0_3 {
    use super::*;
    use agentwire_types::v0_3::types::{MessageSendParams, TaskIdParams, TaskQueryParams};

    proptest! {
        #![proptest_config(config(128))]

        /// The 0.3 JSON readers: the params of `message/send` (send,
        /// message and part metadata, data parts), `tasks/cancel` and
        /// `tasks/get`.
        #[test]
        fn v03_json_readers_refuse_nesting_past_the_limit(
            p in 0usize..6,
            nest in struct_nest(),
            depth in depth(),
        ) {
            let depth = depth.max(1);
            let c = nested_json(depth, nest);
            let json = match p {
                0 => format!(r#"{{"message":{{"kind":"message","messageId":"m","role":"user","parts":[{{"kind":"text","text":"x"}}]}},"metadata":{c}}}"#),
                1 => format!(r#"{{"message":{{"kind":"message","messageId":"m","role":"user","parts":[{{"kind":"text","text":"x"}}],"metadata":{c}}}}}"#),
                2 => format!(r#"{{"message":{{"kind":"message","messageId":"m","role":"user","parts":[{{"kind":"text","text":"x","metadata":{c}}}]}}}}"#),
                3 => format!(r#"{{"message":{{"kind":"message","messageId":"m","role":"user","parts":[{{"kind":"data","data":{c}}}]}}}}"#),
                4 => format!(r#"{{"id":"t","metadata":{c}}}"#),
                _ => format!(r#"{{"id":"t","historyLength":1,"metadata":{c}}}"#),
            };
            let (ok, err) = small_stack(move || {
                let got = reading(&ReadLimits::default(), || match p {
                    0..=3 => serde_json::from_str::<MessageSendParams>(&json).map(|_| ()),
                    4 => serde_json::from_str::<TaskIdParams>(&json).map(|_| ()),
                    _ => serde_json::from_str::<TaskQueryParams>(&json).map(|_| ()),
                });
                (got.is_ok(), got.err().map(|e| e.to_string()))
            });
            if depth <= DEPTH_LIMIT {
                prop_assert!(ok, "{} levels (case {}): {:?}", depth, p, err);
            } else {
                let err = err.unwrap_or_default();
                // (0.3 parts are read as they come, not buffered: ours
                // first, never serde_json's recursion limit.)
                prop_assert!(
                    err.contains(DEPTH_PHRASE),
                    "{} levels (case {}): {}", depth, p, err
                );
            }
        }
    }
}
