//! The most frequent request read directly: a `SendMessageRequest` whose
//! message has text parts, in the ProtoJSON form clients send, without
//! serde's per-field machinery (which took about 5,000 instructions for a
//! one-word message, a tenth of what the server spends on a whole
//! blocking `SendMessage`).
//!
//! It is a fast path with a fallback, not a second parser of the format:
//! it reads only a narrow, common shape (camelCase member names it knows,
//! strings without escapes, text parts, no metadata) and answers `None` for
//! anything else, including every malformed input, so that the caller
//! reads the text with serde instead, which then decides the result or the
//! error. For what it accepts it gives exactly what serde would (the tests
//! compare the two over generated inputs).
//!
//! Inside [`crate::limits::reading`] it keeps the same limits as serde's
//! readers: a list longer than its limit is left to serde too, which
//! refuses it with the error naming the limit.

use crate::proto::{Message, Part, Role, SendMessageRequest, part};

/// Where the first byte that a JSON string cannot hold as it is (`"`,
/// `\\` or a control character) is in `bytes`, if there is one.
///
/// Eight bytes at a time in word arithmetic rather than a loop over the
/// bytes that the compiler may or may not vectorise: the `a2a` binary's
/// whole-program optimisation runs at opt-level "z", which vectorises
/// nothing, and a byte loop cost that build about 2,400 instructions of a
/// SendMessage (docs/performance.md, "`a2a serve` against the library").
/// Why by hand: `memchr` finds one to three given bytes, not a range.
pub(crate) fn special_at(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in words.by_ref() {
        let mut b = [0; 8];
        b.copy_from_slice(word);
        let w = u64::from_le_bytes(b);
        // A byte's high bit is set in each term where that byte is below
        // 0x20, or equal to `"` or `\\` (a zero after the exclusive or).
        // A borrow can only mark bytes above a marked one, so the lowest
        // mark is the first such byte (little-endian: the lowest bits are
        // the first byte).
        let quote = w ^ (ONES * u64::from(b'"'));
        let backslash = w ^ (ONES * u64::from(b'\\'));
        let marks =
            (w.wrapping_sub(ONES * 0x20) | quote.wrapping_sub(ONES) | backslash.wrapping_sub(ONES))
                & !w
                & HIGH;
        // `!w`: bytes of 0x80 and above (UTF-8) are never marked; `quote`
        // and `backslash` of such a byte keep the high bit too, so `!w`
        // stands for `!quote` and `!backslash` as well.
        if marks != 0 {
            return Some(at + (marks.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    words
        .remainder()
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .map(|i| at + i)
}

/// A cursor over JSON text.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `text` (validated as UTF-8 once, here,
    /// rather than string by string).
    pub fn new(text: &'a str) -> Self {
        Self {
            text,
            bytes: text.as_bytes(),
            at: 0,
        }
    }

    /// Skips JSON whitespace.
    pub fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, not taken.
    pub fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.bytes.get(self.at).copied()
    }

    /// Takes `byte` (after whitespace), or fails.
    pub fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// Whether only whitespace is left.
    pub fn at_end(&mut self) -> bool {
        self.peek().is_none()
    }

    /// A string without escapes (after whitespace), as its content; `None`
    /// for any other value or a string with an escape or a control
    /// character.
    pub fn plain_string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        let rest = self.bytes.get(start..)?;
        let len = special_at(rest)?;
        if rest[len] != b'"' {
            return None;
        }
        self.at = start + len + 1;
        // Between two ASCII quotes: on character boundaries.
        self.text.get(start..start + len)
    }

    /// A JSON-RPC id as its JSON text: a string without escapes, an
    /// integer (no fraction or exponent, no leading zero) or `null`.
    pub fn plain_id(&mut self) -> Option<&'a str> {
        let start = {
            self.skip_ws();
            self.at
        };
        match self.peek()? {
            b'"' => {
                self.plain_string()?;
            }
            b'n' => {
                self.bytes.get(start..start + 4).filter(|w| w == b"null")?;
                self.at += 4;
            }
            _ => {
                let digits = |r: &Self, from: usize| {
                    r.bytes
                        .get(from..)
                        .map_or(0, |s| s.iter().take_while(|b| b.is_ascii_digit()).count())
                };
                let sign = usize::from(self.bytes.get(start) == Some(&b'-'));
                let n = digits(self, start + sign);
                let first = self.bytes.get(start + sign).copied();
                if n == 0 || (n > 1 && first == Some(b'0')) {
                    return None;
                }
                self.at = start + sign + n;
                // A fraction or an exponent: not read here.
                if let Some(b'.' | b'e' | b'E') = self.bytes.get(self.at) {
                    return None;
                }
            }
        }
        self.text.get(start..self.at)
    }

    /// The members of an object, each key handed to `member` with the
    /// reader placed on its value; `member` answers `None` to give up.
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        loop {
            let key = self.plain_string()?;
            self.eat(b':')?;
            member(self, key)?;
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// The items of an array, each read by `item`; `None` past `max`
    /// items.
    fn array<T>(
        &mut self,
        max: usize,
        mut item: impl FnMut(&mut Self) -> Option<T>,
    ) -> Option<Vec<T>> {
        self.eat(b'[')?;
        let mut items = Vec::new();
        if self.peek()? == b']' {
            self.at += 1;
            return Some(items);
        }
        loop {
            if items.len() == max {
                return None;
            }
            items.push(item(self)?);
            match self.peek()? {
                b',' => self.at += 1,
                b']' => {
                    self.at += 1;
                    return Some(items);
                }
                _ => return None,
            }
        }
    }

    /// A `SendMessageRequest` of the common shape: a `message` member only.
    pub fn send_message_request(&mut self) -> Option<SendMessageRequest> {
        let mut message = None;
        self.object(|r, key| match key {
            "message" if message.is_none() => {
                message = Some(r.message()?);
                Some(())
            }
            _ => None,
        })?;
        Some(SendMessageRequest {
            message: Some(message?),
            ..Default::default()
        })
    }

    /// A message: ids, role, text parts, extensions, referenced tasks.
    fn message(&mut self) -> Option<Message> {
        let mut m = Message::default();
        let limits = crate::limits::current();
        let max_parts = limits.map_or(usize::MAX, |l| l.max_parts);
        let max_items = limits.map_or(usize::MAX, |l| l.max_list_items);
        // Which members were read: a repeated one is left to serde (which
        // refuses it).
        let mut seen = 0u8;
        self.object(|r, key| {
            let bit = match key {
                "messageId" => 1,
                "contextId" => 2,
                "taskId" => 4,
                "role" => 8,
                "parts" => 16,
                "extensions" => 32,
                "referenceTaskIds" => 64,
                _ => return None,
            };
            if seen & bit != 0 {
                return None;
            }
            seen |= bit;
            match bit {
                1 => m.message_id = r.plain_string()?.to_owned(),
                2 => m.context_id = r.plain_string()?.to_owned(),
                4 => m.task_id = r.plain_string()?.to_owned(),
                8 => m.role = Role::from_str_name(r.plain_string()?)? as i32,
                16 => m.parts = r.array(max_parts, Self::text_part)?,
                32 => m.extensions = r.array(max_items, |r| r.plain_string().map(str::to_owned))?,
                _ => {
                    m.reference_task_ids =
                        r.array(max_items, |r| r.plain_string().map(str::to_owned))?
                }
            }
            Some(())
        })?;
        Some(m)
    }

    /// A part with text (or none), a media type and a file name.
    fn text_part(&mut self) -> Option<Part> {
        let mut p = Part::default();
        let mut seen = 0u8;
        self.object(|r, key| {
            let bit = match key {
                "text" => 1,
                "mediaType" => 2,
                "filename" => 4,
                _ => return None,
            };
            if seen & bit != 0 {
                return None;
            }
            seen |= bit;
            let value = r.plain_string()?.to_owned();
            match bit {
                1 => p.content = Some(part::Content::Text(value)),
                2 => p.media_type = value,
                _ => p.filename = value,
            }
            Some(())
        })?;
        Some(p)
    }
}

/// Reads `text` as a whole as a `SendMessageRequest` of the common shape
/// (see the module's documentation); `None` when it is not one.
pub fn send_message_request(text: &[u8]) -> Option<SendMessageRequest> {
    let mut r = Reader::new(std::str::from_utf8(text).ok()?);
    let req = r.send_message_request()?;
    r.at_end().then_some(req)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn serde(text: &str) -> Option<SendMessageRequest> {
        serde_json::from_str(text).ok()
    }

    fn special_by_bytes(bytes: &[u8]) -> Option<usize> {
        bytes
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
    }

    #[test]
    fn special_at_finds_the_first_special_byte_at_every_position() {
        // Every byte value at every position of strings of 0 to 24 bytes
        // over a background of plain, high (UTF-8) and boundary bytes, with
        // a second special byte after the first (which a borrow could
        // confuse with the first).
        for len in 0..25 {
            for fill in [b'a', 0x80, 0xff, 0x21, 0x1f + 1, b'"' + 1, b'\\' - 1, 0x7f] {
                let mut bytes = vec![fill; len];
                assert_eq!(special_at(&bytes), special_by_bytes(&bytes), "{bytes:?}");
                for at in 0..len {
                    for value in 0..=255u8 {
                        bytes[at] = value;
                        assert_eq!(special_at(&bytes), special_by_bytes(&bytes), "{bytes:?}");
                        if at + 1 < len {
                            bytes[at + 1] = 0;
                            assert_eq!(special_at(&bytes), special_by_bytes(&bytes), "{bytes:?}");
                            bytes[at + 1] = fill;
                        }
                    }
                    bytes[at] = fill;
                }
            }
        }
    }

    proptest! {
        #[test]
        fn special_at_agrees_with_a_byte_loop(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            prop_assert_eq!(special_at(&bytes), special_by_bytes(&bytes));
        }
    }

    #[test]
    fn reads_the_common_shape_as_serde_does() {
        for text in [
            r#"{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello"}]}}"#,
            r#" { "message" : { "role" : "ROLE_AGENT" , "parts" : [ ] , "messageId" : "" } } "#,
            r#"{"message":{"messageId":"m","contextId":"c","taskId":"t","role":"ROLE_UNSPECIFIED","parts":[{"text":"a","mediaType":"text/plain","filename":"f.txt"},{"mediaType":"x/y"},{}],"extensions":["https://e"],"referenceTaskIds":["t0","t1"]}}"#,
            r#"{"message":{}}"#,
            "{\"message\":{\"messageId\":\"ünï\u{1F600}\",\"parts\":[{\"text\":\"día\"}]}}",
        ] {
            let fast = send_message_request(text.as_bytes());
            assert!(fast.is_some(), "not read: {text}");
            assert_eq!(fast, serde(text), "{text}");
        }
    }

    #[test]
    fn leaves_everything_else_to_serde() {
        for text in [
            // Escapes, other member names, other kinds of parts, other
            // members of the request, repeated members, bad JSON.
            r#"{"message":{"messageId":"m\u0031","parts":[]}}"#,
            r#"{"message":{"message_id":"m1"}}"#,
            r#"{"message":{"parts":[{"url":"https://x"}]}}"#,
            r#"{"message":{"parts":[{"text":"a","text":"b"}]}}"#,
            r#"{"message":{"messageId":"a","messageId":"b"}}"#,
            r#"{"message":{"role":1}}"#,
            r#"{"message":{"role":"ROLE_BAD"}}"#,
            r#"{"message":{"metadata":{}}}"#,
            r#"{"message":{},"configuration":{"historyLength":1}}"#,
            r#"{"tenant":"t","message":{}}"#,
            r#"{"message":{},"message":{}}"#,
            r#"{}"#,
            r#"{"message":null}"#,
            r#"{"message":{"messageId":null}}"#,
            r#"{"message":{"parts":[{"text":"a"},]}}"#,
            r#"{"message":{}} x"#,
            r#"{"message":{"#,
            "{\"message\":{\"messageId\":\"a\tb\"}}",
            "",
        ] {
            assert_eq!(send_message_request(text.as_bytes()), None, "{text}");
        }
    }

    #[test]
    fn lists_over_the_read_limits_are_left_to_serde() {
        use crate::limits::{ReadLimits, reading};
        let parts = |n: usize| {
            let parts = vec![r#"{"text":"x"}"#; n].join(",");
            format!(r#"{{"message":{{"messageId":"m","parts":[{parts}],"extensions":["a","b"]}}}}"#)
        };
        let limits = ReadLimits {
            max_parts: 3,
            max_list_items: 2,
            ..ReadLimits::default()
        };
        let read = |text: &str| reading(&limits, || send_message_request(text.as_bytes()));
        assert!(read(&parts(3)).is_some());
        assert_eq!(read(&parts(4)), None);
        // Serde refuses it, naming the limit.
        let e = reading(&limits, || {
            serde_json::from_str::<SendMessageRequest>(&parts(4))
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("at most 3 parts"), "{e}");
        let three = r#"{"message":{"extensions":["a","b","c"]}}"#;
        assert_eq!(read(three), None);
        // Outside of a read with limits: no bound.
        assert!(send_message_request(parts(4).as_bytes()).is_some());
    }

    #[test]
    fn ids_are_read_as_their_text() {
        let id = |t: &str| Reader::new(t).plain_id().map(str::to_owned);
        assert_eq!(id("1").as_deref(), Some("1"));
        assert_eq!(id(" -42,").as_deref(), Some("-42"));
        assert_eq!(id("0").as_deref(), Some("0"));
        assert_eq!(id("\"a-b\"").as_deref(), Some("\"a-b\""));
        assert_eq!(id("null").as_deref(), Some("null"));
        for other in [
            "01", "1.5", "1e3", "-", "nul", "\"a\\n\"", "true", "{}", "[1]",
        ] {
            assert_eq!(id(other), None, "{other}");
        }
    }

    /// Text of the common shape, written with random spacing and member
    /// order, from random contents (some with characters that need
    /// escaping, which the fast path must leave to serde).
    fn text_strategy() -> impl Strategy<Value = String> {
        let s = || prop::string::string_regex("[a-zA-Z0-9 é\"\\\\\n-]{0,8}").expect("regex");
        let ws = prop::sample::select(vec!["", " ", "\n  ", "\t"]);
        let part = (
            prop::option::of(s()),
            prop::option::of(s()),
            prop::option::of(s()),
        );
        (
            prop::option::of(s()),
            prop::option::of(s()),
            prop::option::of(prop::sample::select(vec![
                "ROLE_USER",
                "ROLE_AGENT",
                "ROLE_UNSPECIFIED",
            ])),
            prop::option::of(prop::collection::vec(part, 0..4)),
            prop::option::of(prop::collection::vec(s(), 0..3)),
            ws,
            any::<bool>(),
        )
            .prop_map(|(id, ctx, role, parts, refs, ws, reverse)| {
                let q = |s: &str| serde_json::to_string(s).expect("a string");
                let mut members = Vec::new();
                if let Some(id) = id {
                    members.push(format!("\"messageId\"{ws}:{ws}{}", q(&id)));
                }
                if let Some(ctx) = ctx {
                    members.push(format!("\"contextId\":{}", q(&ctx)));
                }
                if let Some(role) = role {
                    members.push(format!("\"role\":{ws}\"{role}\""));
                }
                if let Some(parts) = parts {
                    let parts: Vec<String> = parts
                        .iter()
                        .map(|(t, m, f)| {
                            let mut p = Vec::new();
                            if let Some(t) = t {
                                p.push(format!("\"text\":{}", q(t)));
                            }
                            if let Some(m) = m {
                                p.push(format!("{ws}\"mediaType\":{}", q(m)));
                            }
                            if let Some(f) = f {
                                p.push(format!("\"filename\":{}{ws}", q(f)));
                            }
                            format!("{{{}}}", p.join(","))
                        })
                        .collect();
                    members.push(format!("\"parts\":[{}]", parts.join(&format!(",{ws}"))));
                }
                if let Some(refs) = refs {
                    let refs: Vec<String> = refs.iter().map(|r| q(r)).collect();
                    members.push(format!("\"referenceTaskIds\":[{}]", refs.join(",")));
                }
                if reverse {
                    members.reverse();
                }
                format!("{ws}{{\"message\":{ws}{{{}}}}}{ws}", members.join(","))
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn agrees_with_serde(text in text_strategy()) {
            let fast = send_message_request(text.as_bytes());
            let slow = serde(&text);
            // Everything generated is valid: serde reads it all, and the
            // fast path reads all of it but the strings with escapes.
            prop_assert!(slow.is_some(), "{}", text);
            if let Some(fast) = fast {
                prop_assert_eq!(Some(fast), slow, "{}", text);
            } else {
                prop_assert!(text.contains('\\'), "not read without an escape: {}", text);
            }
        }

        #[test]
        fn never_reads_what_serde_refuses(text in "[{}\\[\\]\":, a-zA-Z_]{0,60}") {
            if let Some(fast) = send_message_request(text.as_bytes()) {
                prop_assert_eq!(Some(fast), serde(&text), "{}", text);
            }
        }
    }
}
