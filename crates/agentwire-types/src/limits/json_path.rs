//! Where in a JSON text a reader stopped, as a field path
//! (`message.parts[3].metadata.a`): the refusals of the read limits name
//! the field, as the protobuf walk ([`super::wire`]) does.
//!
//! Serde gives a reader no path; serde_json gives its errors a position.
//! The path is found from that position, by a scan of the text before it
//! that only follows strings, objects and arrays (the text was read by
//! serde_json up to there, so it is JSON up to there).

/// The most segments a path shows (content refused for its nesting is at
/// most a few dozen levels down; serde_json's own limit is 128).
const MAX_SEGMENTS: usize = 48;

/// The most characters of a member name a path shows.
const MAX_KEY_CHARS: usize = 40;

/// The most open levels the scan keeps (deeper ones are counted only).
const MAX_FRAMES: usize = 4096;

/// The byte offset of serde_json's `line`/`column` (1-based line, column
/// counting bytes from the start of the line) in `text`.
pub(super) fn offset(text: &[u8], line: usize, column: usize) -> usize {
    let mut start = 0;
    for _ in 1..line {
        match text[start..].iter().position(|&b| b == b'\n') {
            Some(n) => start += n + 1,
            None => return text.len(),
        }
    }
    (start + column).min(text.len())
}

enum Frame {
    /// An object, with the range of its current member's name.
    Object(Option<(usize, usize)>),
    /// An array, with the index of its current item.
    Array(usize),
}

/// The path of the value being read at byte `at` of `text`: member names
/// joined by `.`, array indexes as `[i]`; empty at the top level.
pub(super) fn path_at(text: &[u8], at: usize) -> String {
    let text = &text[..at.min(text.len())];
    let mut frames: Vec<Frame> = Vec::new();
    // Levels open beyond `MAX_FRAMES`.
    let mut hidden = 0usize;
    // Whether the next string of the object on top is a member name.
    let mut expect_key = false;
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'"' => {
                let start = i + 1;
                let mut j = start;
                while j < text.len() && text[j] != b'"' {
                    j += if text[j] == b'\\' { 2 } else { 1 };
                }
                if expect_key && hidden == 0 {
                    if let Some(Frame::Object(key)) = frames.last_mut() {
                        *key = Some((start, j.min(text.len())));
                    }
                }
                expect_key = false;
                i = j;
            }
            b'{' | b'[' => {
                if frames.len() < MAX_FRAMES && hidden == 0 {
                    frames.push(if text[i] == b'{' {
                        Frame::Object(None)
                    } else {
                        Frame::Array(0)
                    });
                } else {
                    hidden += 1;
                }
                expect_key = text[i] == b'{';
            }
            b'}' | b']' => {
                if hidden > 0 {
                    hidden -= 1;
                } else {
                    frames.pop();
                }
                expect_key = false;
            }
            b',' if hidden == 0 => match frames.last_mut() {
                Some(Frame::Object(key)) => {
                    *key = None;
                    expect_key = true;
                }
                Some(Frame::Array(n)) => *n += 1,
                None => {}
            },
            _ => {}
        }
        i += 1;
    }
    let mut path = String::new();
    for (n, frame) in frames.iter().enumerate() {
        if n == MAX_SEGMENTS {
            path.push_str("...");
            break;
        }
        match frame {
            Frame::Object(Some((start, end))) => {
                if !path.is_empty() {
                    path.push('.');
                }
                let name = String::from_utf8_lossy(&text[*start..*end]);
                let mut chars = name.chars();
                path.extend(chars.by_ref().take(MAX_KEY_CHARS));
                if chars.next().is_some() {
                    path.push_str("...");
                }
            }
            // An object before its first member's name: the object itself.
            Frame::Object(None) => {}
            Frame::Array(index) => {
                path.push('[');
                path.push_str(&index.to_string());
                path.push(']');
            }
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at_marker(text: &str) -> String {
        let at = text.find('#').expect("a marker");
        path_at(text.as_bytes(), at)
    }

    #[test]
    fn paths_of_members_and_items() {
        assert_eq!(
            at_marker(r#"{"message":{"parts":[{},{"text":#"#),
            "message.parts[1].text"
        );
        assert_eq!(at_marker(r#"{"a":{"b":1},"c":[1,2,#"#), "c[2]");
        assert_eq!(at_marker(r#"{"a":{"b":1},#"#), "");
        assert_eq!(at_marker(r#"{"a":{"x\"}":{#"#), r#"a.x\"}"#);
        assert_eq!(
            at_marker(r#"{"m":{"metadata":{"a":{"a":{#"#),
            "m.metadata.a.a"
        );
        assert_eq!(at_marker("#"), "");
        let deep = format!("{{\"d\":{}#", "[".repeat(200));
        let path = at_marker(&deep);
        assert!(
            path.starts_with("d[0][0]") && path.ends_with("..."),
            "{path}"
        );
        let long = format!("{{\"{}\":#", "k".repeat(100));
        assert_eq!(at_marker(&long), format!("{}...", "k".repeat(40)));
    }

    #[test]
    fn offsets_of_lines_and_columns() {
        let text = b"{\n  \"a\": [\n1,";
        assert_eq!(offset(text, 1, 1), 1);
        assert_eq!(offset(text, 3, 2), text.len());
        assert_eq!(offset(text, 9, 0), text.len());
    }
}
