//! A Server-Sent Events parser (the `text/event-stream` format of the WHATWG
//! HTML standard, 9.2.6) fed with byte chunks as they arrive.
//!
//! Written here rather than taken from a crate because the parser must stay
//! linear on large events: an artifact chunk of several megabytes arrives in
//! many small network chunks, and each new chunk is scanned once, never the
//! whole buffered event again. Lines end with CRLF, LF or CR (also when the
//! CR and LF are split across chunks); comments (`:` lines) are skipped;
//! `data` lines of one event are joined with `\n`; a leading BOM is dropped;
//! an event left unterminated at the end of the stream is discarded, as the
//! standard requires.

use std::collections::VecDeque;

use bytes::Bytes;
use futures::{Stream, StreamExt};

use crate::error::ClientError;

/// The largest event (or line) accepted by default; beyond it the stream
/// fails rather than buffering without bound. The transports use their
/// own limit ([`crate::ClientBuilder::max_response_bytes`], the same
/// 64 MiB by default).
pub const MAX_EVENT_BYTES: usize = crate::http::DEFAULT_MAX_RESPONSE_BYTES;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The event type (`message` when the event names none).
    pub event: String,
    /// The data lines joined with `\n`.
    pub data: String,
    /// The last event id seen so far, if any.
    pub id: Option<String>,
}

/// Incremental parser state.
#[derive(Debug)]
pub struct SseParser {
    /// Bytes of the current, unterminated line.
    line: Vec<u8>,
    /// The previous chunk ended with CR: a LF starting the next one belongs
    /// to that line end.
    after_cr: bool,
    /// No line was processed yet (it may start with a BOM).
    first_line: bool,
    data: String,
    has_data: bool,
    event: String,
    last_id: Option<String>,
    max: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new(MAX_EVENT_BYTES)
    }
}

impl SseParser {
    /// A parser refusing events or lines larger than `max_event_bytes`.
    pub fn new(max_event_bytes: usize) -> Self {
        Self {
            line: Vec::new(),
            after_cr: false,
            first_line: true,
            data: String::new(),
            has_data: false,
            event: String::new(),
            last_id: None,
            max: max_event_bytes,
        }
    }

    /// Feeds a chunk; complete events are appended to `out`.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut VecDeque<SseEvent>) -> Result<(), String> {
        // An empty chunk changes nothing (it must not forget a CR that
        // ended the previous chunk, or the LF after it becomes a blank line).
        if chunk.is_empty() {
            return Ok(());
        }
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while let Some(pos) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
            let (head, tail) = chunk.split_at(pos);
            let is_cr = tail[0] == b'\r';
            chunk = &tail[1..];
            if is_cr {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            if self.line.is_empty() {
                self.process_line(head, out)?;
            } else {
                self.line.extend_from_slice(head);
                let line = std::mem::take(&mut self.line);
                self.process_line(&line, out)?;
                self.line = line;
                self.line.clear();
            }
        }
        self.line.extend_from_slice(chunk);
        if self.line.len() + self.data.len() > self.max {
            return Err(format!("server-sent event larger than {} bytes", self.max));
        }
        Ok(())
    }

    fn process_line(
        &mut self,
        mut line: &[u8],
        out: &mut VecDeque<SseEvent>,
    ) -> Result<(), String> {
        if self.first_line {
            self.first_line = false;
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match name {
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&String::from_utf8_lossy(value));
                self.has_data = true;
                if self.data.len() > self.max {
                    return Err(format!("server-sent event larger than {} bytes", self.max));
                }
            }
            b"event" => self.event = String::from_utf8_lossy(value).into_owned(),
            b"id" if !value.contains(&0) => {
                self.last_id = Some(String::from_utf8_lossy(value).into_owned());
            }
            // `retry` only matters to reconnecting EventSource clients; other
            // fields are ignored by the standard.
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut VecDeque<SseEvent>) {
        let event = std::mem::take(&mut self.event);
        if !self.has_data {
            return;
        }
        self.has_data = false;
        out.push_back(SseEvent {
            event: if event.is_empty() {
                "message".to_owned()
            } else {
                event
            },
            data: std::mem::take(&mut self.data),
            id: self.last_id.clone(),
        });
    }
}

/// Turns a body of byte chunks (from `url`) into a stream of events, each
/// at most `max` bytes (a longer event or line ends the stream with
/// [`ClientError::ResponseTooLarge`]). Errors of the body are passed
/// through and end the stream.
pub(crate) fn events<S>(
    body: S,
    url: &str,
    max: usize,
) -> impl Stream<Item = Result<SseEvent, ClientError>> + Send + use<S>
where
    S: Stream<Item = Result<Bytes, ClientError>> + Send + Unpin + 'static,
{
    struct State<S> {
        body: S,
        parser: SseParser,
        ready: VecDeque<SseEvent>,
        done: bool,
        url: String,
    }
    let state = State {
        body,
        parser: SseParser::new(max),
        ready: VecDeque::new(),
        done: false,
        url: url.to_owned(),
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(ev) = st.ready.pop_front() {
                return Some((Ok(ev), st));
            }
            if st.done {
                return None;
            }
            match st.body.next().await {
                Some(Ok(chunk)) => {
                    if st.parser.push(&chunk, &mut st.ready).is_err() {
                        // The parser's only failure: an event or line
                        // past the limit.
                        st.done = true;
                        st.ready.clear();
                        let e = ClientError::ResponseTooLarge {
                            what: "a server-sent event".into(),
                            url: std::mem::take(&mut st.url),
                            limit: st.parser.max,
                        };
                        return Some((Err(e), st));
                    }
                }
                Some(Err(e)) => {
                    st.done = true;
                    return Some((Err(e), st));
                }
                None => st.done = true,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_chunks(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::default();
        let mut out = VecDeque::new();
        for c in chunks {
            p.push(c, &mut out).unwrap();
        }
        out.into_iter().collect()
    }

    fn datas(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn simple_events() {
        let ev = parse_chunks(&[b"data: {\"a\":1}\n\ndata: {\"b\":2}\n\n"]);
        assert_eq!(datas(&ev), ["{\"a\":1}", "{\"b\":2}"]);
        assert_eq!(ev[0].event, "message");
        assert_eq!(ev[0].id, None);
    }

    #[test]
    fn multi_line_data_is_joined_with_newlines() {
        let ev = parse_chunks(&[b"data: {\n", b"data:  \"a\": 1\ndata\ndata: }\n\n"]);
        assert_eq!(datas(&ev), ["{\n \"a\": 1\n\n}"]);
    }

    #[test]
    fn comments_and_unknown_fields_are_ignored() {
        let ev = parse_chunks(&[b": keep-alive\n\n:another\nretry: 10\nfoo: bar\ndata: x\n\n"]);
        assert_eq!(datas(&ev), ["x"]);
        // A comment alone dispatches nothing.
        assert!(parse_chunks(&[b": ping\n\n: ping\n\n"]).is_empty());
    }

    #[test]
    fn crlf_cr_and_lf_line_ends() {
        let ev = parse_chunks(&[b"data: a\r\n\r\ndata: b\r\rdata: c\n\n"]);
        assert_eq!(datas(&ev), ["a", "b", "c"]);
    }

    #[test]
    fn crlf_split_across_chunks() {
        // The CR ends one chunk and the LF starts the next: one line end,
        // not two (which would dispatch an empty line early).
        let ev = parse_chunks(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]);
        assert_eq!(datas(&ev), ["a\nb"]);
    }

    #[test]
    fn byte_by_byte_delivery() {
        let text = "\u{FEFF}event: update\r\nid: 7\r\ndata: h\u{e9}llo\r\ndata: w\u{f6}rld\r\n\r\n";
        let chunks: Vec<&[u8]> = text.as_bytes().chunks(1).collect();
        let ev = parse_chunks(&chunks);
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].event, "update");
        assert_eq!(ev[0].id.as_deref(), Some("7"));
        assert_eq!(ev[0].data, "h\u{e9}llo\nw\u{f6}rld");
    }

    #[test]
    fn field_without_space_and_without_colon() {
        let ev = parse_chunks(&[b"data:x\ndata\n\n"]);
        assert_eq!(datas(&ev), ["x\n"]);
        // Only one leading space is removed.
        let ev = parse_chunks(&[b"data:  two\n\n"]);
        assert_eq!(datas(&ev), [" two"]);
    }

    #[test]
    fn event_type_resets_and_id_persists() {
        let ev = parse_chunks(&[b"event: error\nid: 1\ndata: e\n\ndata: m\n\n"]);
        assert_eq!(ev[0].event, "error");
        assert_eq!(ev[1].event, "message");
        assert_eq!(ev[1].id.as_deref(), Some("1"));
    }

    #[test]
    fn unterminated_event_is_discarded() {
        let ev = parse_chunks(&[b"data: a\n\ndata: partial\n"]);
        assert_eq!(datas(&ev), ["a"]);
    }

    #[test]
    fn oversized_event_fails() {
        let mut p = SseParser::new(16);
        let mut out = VecDeque::new();
        assert!(p.push(b"data: 0123456789", &mut out).is_ok());
        assert!(p.push(b"0123456789", &mut out).is_err());
        let mut p = SseParser::new(16);
        p.push(b"data: 0123456789\n", &mut out).unwrap();
        assert!(p.push(b"data: 0123456789\n", &mut out).is_err());
    }

    #[test]
    fn large_event_in_small_chunks_is_linear() {
        // 8 MiB of data in 4 KiB chunks: each chunk is scanned once.
        let payload = "x".repeat(8 * 1024 * 1024);
        let text = format!("data: {payload}\n\n");
        let started = std::time::Instant::now();
        let chunks: Vec<&[u8]> = text.as_bytes().chunks(4096).collect();
        let ev = parse_chunks(&chunks);
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].data.len(), payload.len());
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[tokio::test]
    async fn stream_of_chunks() {
        let chunks: Vec<Result<Bytes, ClientError>> = vec![
            Ok(Bytes::from_static(b"data: 1\n")),
            Ok(Bytes::from_static(b"\ndata: 2\n\n")),
            Err(ClientError::Transport {
                message: "reset".into(),
                source: None,
            }),
            Ok(Bytes::from_static(b"data: 3\n\n")),
        ];
        let got: Vec<_> = events(futures::stream::iter(chunks), "http://x/", 1 << 20)
            .collect()
            .await;
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].as_ref().unwrap().data, "1");
        assert_eq!(got[1].as_ref().unwrap().data, "2");
        assert!(got[2].is_err());
    }

    #[tokio::test]
    async fn an_event_past_the_limit_ends_the_stream() {
        let chunks: Vec<Result<Bytes, ClientError>> = vec![
            Ok(Bytes::from_static(b"data: small\n\n")),
            Ok(Bytes::from(format!("data: {}", "x".repeat(100)))),
            Ok(Bytes::from_static(b"\n\ndata: after\n\n")),
        ];
        let got: Vec<_> = events(futures::stream::iter(chunks), "http://x/", 64)
            .collect()
            .await;
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].as_ref().unwrap().data, "small");
        match &got[1] {
            Err(ClientError::ResponseTooLarge { what, limit, url }) => {
                assert_eq!(
                    (what.as_str(), *limit, url.as_str()),
                    ("a server-sent event", 64, "http://x/")
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
