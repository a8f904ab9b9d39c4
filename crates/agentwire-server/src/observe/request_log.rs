//! The request log's own writer: the line of each request answered,
//! formatted and written on a thread of its own.
//!
//! Through `tracing` (a span per request, an event when it is answered,
//! `tracing-subscriber`'s formatter and a write to stderr for every line),
//! the line cost a quarter of the instructions of a `SendMessage` on the
//! in-memory store (about 20,000 of 81,000). With [`install`], a request
//! pays only for the facts of its line, moved (never formatted) into a
//! bounded queue; this module's thread formats them, in the same text or
//! JSON as `tracing-subscriber`'s formatter, and writes every line it finds
//! queued in one write.
//!
//! The queue holds [`QUEUED_LINES`] lines. When it is full, the request
//! that answers waits for room (as it waited for its write to stderr
//! before): no line is dropped. [`flush`] waits until the lines queued so
//! far are written (`a2a serve` calls it before it exits).
//!
//! Without [`install`] (an application with its own `tracing`
//! subscriber), the line stays a `tracing` event in the request's span.

use std::io::Write;
use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::HeaderValue;

use super::REQUEST_LOG_TARGET;

/// The lines queued at most; the request answered when the queue is full
/// waits for room.
pub const QUEUED_LINES: usize = 8192;

/// How long [`flush`] waits for the lines to be written, at most.
const FLUSH_WAIT: Duration = Duration::from_secs(5);

/// A batch of lines is written once it reaches this size (or when no
/// line is queued any more).
const BATCH_BYTES: usize = 64 * 1024;

/// How long the writer lets lines queue up after the first of a batch
/// woke it. While it sleeps, a request queues its line without waking
/// it (a wake is a mutex, a futex call and a thread switch, more than
/// the line's formatting): under load a batch holds the lines of these
/// milliseconds, written at once, instead of one line a wake.
const LINGER: Duration = Duration::from_millis(10);

/// How each line is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `tracing-subscriber`'s full text format, with the time in RFC 3339.
    Text,
    /// `tracing-subscriber`'s JSON format (with the current span).
    Json,
}

/// The facts of one line, as the request left them.
pub(crate) struct Line {
    pub(crate) time: SystemTime,
    pub(crate) request_id: RequestId,
    /// The caller's `traceparent` header, when it sent one.
    pub(crate) traceparent: Option<HeaderValue>,
    pub(crate) method: http::Method,
    /// The request's path (its query is never written).
    pub(crate) path: Option<http::uri::PathAndQuery>,
    /// The caller's address: the connection's peer, or the client a
    /// trusted reverse proxy forwards for.
    pub(crate) client: Option<std::net::IpAddr>,
    /// What the binding noted (the bindings note into it while the
    /// request is answered: [`super::CallInfo`]); its binding is `http`
    /// and its error `error` for an answer no binding made that failed.
    pub(crate) call: super::CallInfo,
    pub(crate) status: u16,
    /// How long the answer took, in whole microseconds.
    pub(crate) duration_us: u64,
}

/// A request's id in its line: the one made for it, as text (a copy of 33
/// bytes, where a clone of its header value allocated), or the caller's.
pub(crate) enum RequestId {
    Made([u8; super::MADE_ID_LEN]),
    Given(HeaderValue),
}

impl RequestId {
    /// The id as text (empty if the caller's is not visible ASCII, which
    /// the server never takes).
    pub(crate) fn as_str(&self) -> &str {
        match self {
            RequestId::Made(text) => std::str::from_utf8(text).unwrap_or_default(),
            RequestId::Given(value) => value.to_str().unwrap_or_default(),
        }
    }
}

enum Message {
    Line(Box<Line>),
    Flush(SyncSender<()>),
}

static QUEUE: OnceLock<SyncSender<Message>> = OnceLock::new();

/// Writes the request lines of every server of this process to `out`, in
/// `format`, from a thread of its own. Which lines are written is still
/// the `tracing` subscriber's choice (its filter for the target
/// [`REQUEST_LOG_TARGET`] at `info`); only their writing moves here.
/// False when the writer was installed already (the first stays).
pub fn install(format: Format, out: impl Write + Send + 'static) -> bool {
    if QUEUE.get().is_some() {
        return false;
    }
    let (tx, rx) = std::sync::mpsc::sync_channel(QUEUED_LINES);
    if QUEUE.set(tx).is_err() {
        return false;
    }
    let spawned = std::thread::Builder::new()
        .name("a2a-request-log".into())
        .spawn(move || write_lines(rx, format, out));
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the request log's thread");
    }
    true
}

/// Waits until the request lines queued so far are written (5 s at most).
/// Returns at once when no writer is installed.
pub fn flush() {
    let Some(queue) = QUEUE.get() else {
        return;
    };
    let (done, written) = std::sync::mpsc::sync_channel(1);
    if queue.send(Message::Flush(done)).is_ok() {
        let _ = written.recv_timeout(FLUSH_WAIT);
    }
}

/// Queues `line` when a writer is installed; gives it back otherwise.
pub(crate) fn queue(line: Box<Line>) -> Result<(), Box<Line>> {
    let Some(queue) = QUEUE.get() else {
        return Err(line);
    };
    match queue.send(Message::Line(line)) {
        Ok(()) => Ok(()),
        Err(std::sync::mpsc::SendError(Message::Line(line))) => Err(line),
        Err(_) => Ok(()),
    }
}

/// Whether lines are queued to the writer of [`install`].
pub(crate) fn installed() -> bool {
    QUEUE.get().is_some()
}

/// The writer's thread: formats the queued lines and writes them in
/// batches.
fn write_lines(queue: Receiver<Message>, format: Format, mut out: impl Write) {
    let mut batch = Vec::with_capacity(BATCH_BYTES + 1024);
    let mut flushed = Vec::new();
    let mut clock = Clock::default();
    while let Ok(first) = queue.recv() {
        // A flush is answered at once; lines wait for the next ones.
        if matches!(first, Message::Line(_)) {
            std::thread::sleep(LINGER);
        }
        let mut next = Some(first);
        while let Some(message) = next {
            match message {
                Message::Line(line) => line.write(format, &mut clock, &mut batch),
                Message::Flush(done) => flushed.push(done),
            }
            if batch.len() >= BATCH_BYTES {
                break;
            }
            next = queue.try_recv().ok();
        }
        // A failed write (stderr closed) loses the batch, as a failed
        // write of `tracing-subscriber` loses its line.
        let _ = out.write_all(&batch).and_then(|()| out.flush());
        batch.clear();
        for done in flushed.drain(..) {
            let _ = done.send(());
        }
    }
}

impl Line {
    /// Appends the line, with its newline, to `out`.
    fn write(&self, format: Format, clock: &mut Clock, out: &mut Vec<u8>) {
        let trace_id = self
            .traceparent
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .and_then(super::trace_id_of);
        let path = self.path.as_ref().map_or("/", |p| p.path());
        let method = self.method.as_str();
        let call = &self.call;
        let operation = (!call.operation.is_empty()).then_some(call.operation);
        match format {
            Format::Text => {
                clock.write(self.time, out);
                out.extend_from_slice(b"  INFO request{request_id=");
                // A made id is written from its bytes (hexadecimal digits
                // and a dash), not checked as UTF-8 again for each line
                // (170 instructions); so is it in JSON, needing no escape.
                out.extend_from_slice(match &self.request_id {
                    RequestId::Made(text) => text,
                    RequestId::Given(_) => self.request_id.as_str().as_bytes(),
                });
                if let Some(t) = trace_id {
                    out.extend_from_slice(b" trace_id=");
                    out.extend_from_slice(t.as_bytes());
                }
                // Pieces appended as they are: `write!` into a `Vec` goes
                // through `core::fmt` for each (a third of this thread's
                // instructions).
                for piece in [" method=", method, " path=", path] {
                    out.extend_from_slice(piece.as_bytes());
                }
                if let Some(ip) = self.client {
                    out.extend_from_slice(b" client=");
                    address(ip, out);
                }
                out.extend_from_slice(b"}: answered binding=");
                out.extend_from_slice(call.binding.as_bytes());
                if let Some(o) = operation {
                    out.extend_from_slice(b" operation=");
                    out.extend_from_slice(o.as_bytes());
                }
                if let Some(t) = &call.task_id {
                    out.extend_from_slice(b" task_id=");
                    out.extend_from_slice(t.as_bytes());
                }
                out.extend_from_slice(b" outcome=");
                out.extend_from_slice(call.outcome().as_bytes());
                out.extend_from_slice(b" status=");
                decimal(self.status, out);
                out.extend_from_slice(b" duration_ms=");
                if !milliseconds(self.duration_us, out) {
                    let _ = write!(out, "{:?}", self.duration_us as f64 / 1e3);
                }
                out.push(b'\n');
            }
            Format::Json => {
                let string = |out: &mut Vec<u8>, s: &str| {
                    let _ = serde_json::to_writer(&mut *out, s);
                };
                out.extend_from_slice(b"{\"timestamp\":\"");
                clock.write(self.time, out);
                out.extend_from_slice(
                    b"\",\"level\":\"INFO\",\"fields\":{\"message\":\"answered\",\"binding\":",
                );
                string(out, call.binding);
                if let Some(o) = operation {
                    out.extend_from_slice(b",\"operation\":");
                    string(out, o);
                }
                if let Some(t) = &call.task_id {
                    out.extend_from_slice(b",\"task_id\":");
                    string(out, t);
                }
                out.extend_from_slice(b",\"outcome\":");
                string(out, call.outcome());
                out.extend_from_slice(b",\"status\":");
                decimal(self.status, out);
                out.extend_from_slice(b",\"duration_ms\":");
                if !milliseconds(self.duration_us, out) {
                    let _ = serde_json::to_writer(&mut *out, &(self.duration_us as f64 / 1e3));
                }
                out.extend_from_slice(b"},\"target\":");
                string(out, REQUEST_LOG_TARGET);
                // The span's fields in the order of their names, as
                // `tracing-subscriber` writes them.
                out.extend_from_slice(b",\"span\":{");
                if let Some(ip) = self.client {
                    out.extend_from_slice(b"\"client\":\"");
                    address(ip, out);
                    out.extend_from_slice(b"\",");
                }
                out.extend_from_slice(b"\"method\":");
                string(out, method);
                out.extend_from_slice(b",\"path\":");
                string(out, path);
                out.extend_from_slice(b",\"request_id\":");
                match &self.request_id {
                    RequestId::Made(text) => {
                        out.push(b'"');
                        out.extend_from_slice(text);
                        out.push(b'"');
                    }
                    RequestId::Given(_) => string(out, self.request_id.as_str()),
                }
                if let Some(t) = trace_id {
                    out.extend_from_slice(b",\"trace_id\":");
                    string(out, t);
                }
                out.extend_from_slice(b",\"name\":\"request\"}}\n");
            }
        }
    }
}

/// Appends an address as `Display` writes it: an IPv4 one digit by digit
/// (through `core::fmt` it cost as much as the rest of the line), an IPv6
/// one, rarer, through `Display`.
fn address(ip: std::net::IpAddr, out: &mut Vec<u8>) {
    match ip {
        std::net::IpAddr::V4(v4) => {
            // At most 15 bytes: written into a buffer, appended once.
            let mut text = [0u8; 15];
            let mut len = 0;
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    text[len] = b'.';
                    len += 1;
                }
                if octet >= 100 {
                    text[len] = b'0' + octet / 100;
                    len += 1;
                }
                if octet >= 10 {
                    text[len] = b'0' + octet / 10 % 10;
                    len += 1;
                }
                text[len] = b'0' + octet % 10;
                len += 1;
            }
            out.extend_from_slice(&text[..len]);
        }
        std::net::IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
}

/// Appends `n` in decimal.
fn decimal(n: impl itoa::Integer, out: &mut Vec<u8>) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Appends a duration of `micros` microseconds in milliseconds, as `{:?}`
/// and `serde_json` write the `f64` `micros / 1e3` (the shortest decimal
/// that reads back as it), from the integer: the float's rounding and
/// formatting were a tenth of the writer's instructions.
/// False, with nothing appended, from 10^15 microseconds (31 years).
fn milliseconds(micros: u64, out: &mut Vec<u8>) -> bool {
    // Below 10^15 microseconds, `micros / 1e3` has at most 15 significant
    // digits, so it is the only decimal of 15 digits or fewer that reads
    // as that `f64`, hence the shortest, and `{:?}` writes it without an
    // exponent.
    const LIMIT: u64 = 1_000_000_000_000_000;
    if micros >= LIMIT {
        return false;
    }
    let (whole, fraction) = (micros / 1000, (micros % 1000) as u16);
    decimal(whole, out);
    out.push(b'.');
    let fraction = [
        b'0' + (fraction / 100) as u8,
        b'0' + (fraction / 10 % 10) as u8,
        b'0' + (fraction % 10) as u8,
    ];
    // Without trailing zeros, but one digit at least (`12.0`).
    let len = fraction
        .iter()
        .rposition(|&d| d != b'0')
        .map_or(1, |i| i + 1);
    out.extend_from_slice(&fraction[..len]);
    true
}

/// The time of the lines, whose date and second are formatted once a
/// second.
#[derive(Default)]
struct Clock {
    /// The second of `text`, since 1970.
    second: Option<u64>,
    /// That second in RFC 3339, up to its decimal point.
    text: Vec<u8>,
}

impl Clock {
    /// Appends `time` as [`rfc3339`] does.
    fn write(&mut self, time: SystemTime, out: &mut Vec<u8>) {
        let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
        if self.second != Some(since.as_secs()) {
            self.text.clear();
            rfc3339(
                UNIX_EPOCH + Duration::from_secs(since.as_secs()),
                &mut self.text,
            );
            // Without the microseconds and the `Z`.
            self.text.truncate(self.text.len() - 7);
            self.second = Some(since.as_secs());
        }
        out.extend_from_slice(&self.text);
        let mut micros = since.subsec_micros();
        let mut digits = [b'0'; 6];
        for d in digits.iter_mut().rev() {
            // A digit: below 10.
            *d = b'0' + (micros % 10) as u8;
            micros /= 10;
        }
        out.extend_from_slice(&digits);
        out.push(b'Z');
    }
}

/// Appends `time` in RFC 3339, UTC, to the microsecond
/// (`2026-12-06T10:04:34.339401Z`), as `tracing-subscriber` writes it.
fn rfc3339(time: SystemTime, out: &mut Vec<u8>) {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, of_day) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_date(days);
    let _ = write!(
        out,
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
        since.subsec_micros()
    );
}

/// The proleptic Gregorian date (year, month, day) `days` after
/// 1970-01-01 (the days-from-civil algorithm, read backwards: eras of
/// 400 years that start on March 1st).
fn civil_date(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64, micros: u32) -> String {
        let mut out = Vec::new();
        rfc3339(
            UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros.into()),
            &mut out,
        );
        String::from_utf8(out).expect("ASCII")
    }

    #[test]
    fn the_clock_writes_what_rfc3339_writes() {
        let mut clock = Clock::default();
        for (secs, micros) in [
            (5, 1),
            (5, 999_999),
            (6, 0),
            (1_796_560_274, 339_401),
            (5, 10),
        ] {
            let time =
                UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros.into());
            let mut out = Vec::new();
            clock.write(time, &mut out);
            assert_eq!(String::from_utf8(out).expect("ASCII"), at(secs, micros));
        }
    }

    #[test]
    fn decimals() {
        for n in [0u16, 7, 10, 200, 404, 9999, 65535] {
            let mut out = Vec::new();
            decimal(n, &mut out);
            assert_eq!(out, n.to_string().into_bytes());
        }
    }

    #[test]
    fn milliseconds_read_as_debug_and_serde_json_write_them() {
        // Durations as the server makes them (whole microseconds), written
        // as `{:?}` and serde_json write the milliseconds' `f64`.
        let mut micros: Vec<u64> = vec![0, 1, 10, 100, 234, 500, 999, 1000, 1001, 1500, 12_000];
        let mut m: u64 = 1;
        while m < 10_u64.pow(17) {
            micros.extend([m, m + 1, m * 7 + 3, m * 3 - 1, m * 10 - 1]);
            m *= 10;
        }
        micros.extend([u64::MAX, 999_999_999_999_999, 1_000_000_000_000_000]);
        for us in micros {
            let mut out = Vec::new();
            if !milliseconds(us, &mut out) {
                assert!(out.is_empty() && us >= 10_u64.pow(15), "{us}");
                continue;
            }
            let out = String::from_utf8(out).expect("ASCII");
            let ms = us as f64 / 1e3;
            assert_eq!(out, format!("{ms:?}"), "{us}");
            assert_eq!(out, serde_json::to_string(&ms).expect("a number"), "{us}");
            // As the server computed it from a `Duration` before.
            let before = (Duration::from_micros(us).as_secs_f64() * 1e6).round() / 1e3;
            assert_eq!(out, format!("{before:?}"), "{us}");
        }
    }

    #[test]
    fn times_in_rfc3339() {
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000000Z");
        // Dates from Python's datetime.utcfromtimestamp.
        assert_eq!(at(951_782_400, 7), "2000-02-29T00:00:00.000007Z");
        assert_eq!(at(1_796_560_274, 339_401), "2026-12-06T12:31:14.339401Z");
        assert_eq!(at(4_107_542_399, 999_999), "2100-02-28T23:59:59.999999Z");
        assert_eq!(at(4_107_542_400, 0), "2100-03-01T00:00:00.000000Z");
        assert_eq!(at(253_402_300_799, 0), "9999-12-31T23:59:59.000000Z");
    }

    /// A writer into a shared buffer, for `tracing-subscriber`.
    #[derive(Clone, Default)]
    struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::ErrorKind::Other)?
                .extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The line `tracing-subscriber` writes for `line` in `format`, made
    /// as the server made it before this writer (and still makes it
    /// without it): a span `request` and an event `answered` in it.
    fn through_tracing(line: &Line, format: Format) -> String {
        use tracing_subscriber::Layer as _;
        use tracing_subscriber::layer::SubscriberExt as _;
        let out = Shared::default();
        let writer = out.clone();
        let layer = tracing_subscriber::fmt::layer()
            .with_writer(move || writer.clone())
            .with_ansi(false);
        let layer = match format {
            Format::Text => layer.with_target(false).boxed(),
            Format::Json => layer
                .json()
                .with_current_span(true)
                .with_span_list(false)
                .boxed(),
        };
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(
                target: REQUEST_LOG_TARGET,
                "request",
                request_id = %line.request_id.as_str(),
                trace_id = line
                    .traceparent
                    .as_ref()
                    .and_then(|v| v.to_str().ok())
                    .and_then(super::super::trace_id_of)
                    .map(tracing::field::display),
                method = %line.method,
                path = %line.path.as_ref().map_or("/", |p| p.path()),
                client = line.client.map(tracing::field::display),
                otel.kind = tracing::field::Empty,
            );
            let _entered = span.enter();
            let call = &line.call;
            let operation = (!call.operation.is_empty()).then_some(call.operation);
            tracing::info!(
                target: REQUEST_LOG_TARGET,
                binding = %call.binding,
                operation = operation.map(tracing::field::display),
                task_id = call.task_id.as_deref().map(tracing::field::display),
                outcome = %call.outcome(),
                status = line.status,
                duration_ms = line.duration_us as f64 / 1e3,
                "answered"
            );
        });
        let bytes = out.0.lock().expect("the buffer").clone();
        String::from_utf8(bytes).expect("UTF-8")
    }

    #[test]
    fn lines_read_as_tracing_subscriber_writes_them() {
        let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let lines = [
            Line {
                time: SystemTime::now(),
                request_id: RequestId::Made(*b"5aa4b089a4a27201-0000000000000000"),
                traceparent: None,
                method: http::Method::POST,
                path: Some(http::uri::PathAndQuery::from_static("/")),
                client: Some("203.0.113.5".parse().expect("an address")),
                call: super::super::CallInfo {
                    binding: "jsonrpc",
                    operation: "SendMessage",
                    task_id: Some("01a24acf-f3d3-73bd-bf85-489f1c6a73d6".into()),
                    error: None,
                },
                status: 200,
                duration_us: 234,
            },
            Line {
                time: SystemTime::now(),
                request_id: RequestId::Given(HeaderValue::from_static("a\"b\\c")),
                traceparent: Some(HeaderValue::from_static(traceparent)),
                method: http::Method::GET,
                path: Some(http::uri::PathAndQuery::from_static(
                    "/tasks/abc?token=secret",
                )),
                client: Some("2001:db8::7".parse().expect("an address")),
                call: super::super::CallInfo {
                    binding: "rest",
                    operation: "GetTask",
                    task_id: Some("abc".into()),
                    error: Some("VERSION_NOT_SUPPORTED"),
                },
                status: 400,
                duration_us: 12_000,
            },
            Line {
                time: SystemTime::now(),
                request_id: RequestId::Given(HeaderValue::from_static("caller-id-8")),
                traceparent: Some(HeaderValue::from_static("garbage")),
                method: http::Method::GET,
                path: None,
                client: None,
                call: super::super::CallInfo {
                    binding: "http",
                    operation: "",
                    task_id: None,
                    error: Some("error"),
                },
                status: 404,
                duration_us: 1,
            },
        ];
        for format in [Format::Text, Format::Json] {
            for line in &lines {
                let mut mine = Vec::new();
                line.write(format, &mut Clock::default(), &mut mine);
                let mine = String::from_utf8(mine).expect("UTF-8");
                let theirs = through_tracing(line, format);
                // The time (27 characters) is the moment each was written.
                let at = match format {
                    Format::Text => 0,
                    Format::Json => "{\"timestamp\":\"".len(),
                };
                assert_eq!(mine.len(), theirs.len(), "\n{mine}{theirs}");
                assert_eq!(mine[..at], theirs[..at], "\n{mine}{theirs}");
                assert_eq!(mine[at + 27..], theirs[at + 27..], "\n{mine}{theirs}");
                assert!(!mine.contains("secret"), "{mine}");
            }
        }
    }

    #[test]
    fn addresses_are_written_as_display_writes_them() {
        for text in [
            "0.0.0.0",
            "1.2.3.4",
            "10.100.9.99",
            "255.255.255.255",
            "127.0.0.1",
            "::1",
            "2001:db8::7",
            "::ffff:1.2.3.4",
        ] {
            let ip: std::net::IpAddr = text.parse().expect("an address");
            let mut out = Vec::new();
            super::address(ip, &mut out);
            assert_eq!(String::from_utf8(out).expect("UTF-8"), ip.to_string());
        }
        for n in 0..=255u8 {
            let ip = std::net::IpAddr::from([n, n / 2, n / 3, 255 - n]);
            let mut out = Vec::new();
            super::address(ip, &mut out);
            assert_eq!(String::from_utf8(out).expect("UTF-8"), ip.to_string());
        }
    }

    #[test]
    fn the_thread_writes_every_queued_line_before_a_flush_answers() {
        let (tx, rx) = std::sync::mpsc::sync_channel(4);
        let out = Shared::default();
        let writer = out.clone();
        let thread = std::thread::spawn(move || write_lines(rx, Format::Text, writer));
        let sender = std::thread::spawn({
            let tx = tx.clone();
            move || {
                // More lines than the queue holds: the sender waits for room.
                for n in 0..1000 {
                    let line = Line {
                        time: SystemTime::now(),
                        request_id: RequestId::Given(
                            HeaderValue::from_str(&format!("id-{n}")).expect("an id"),
                        ),
                        traceparent: None,
                        method: http::Method::POST,
                        path: None,
                        client: None,
                        call: super::super::CallInfo {
                            binding: "jsonrpc",
                            operation: "SendMessage",
                            task_id: None,
                            error: None,
                        },
                        status: 200,
                        duration_us: 500,
                    };
                    assert!(tx.send(Message::Line(Box::new(line))).is_ok());
                }
            }
        });
        sender.join().expect("the sender");
        let (done, written) = std::sync::mpsc::sync_channel(1);
        assert!(tx.send(Message::Flush(done)).is_ok());
        written
            .recv_timeout(Duration::from_secs(60))
            .expect("the flush answered");
        let text = String::from_utf8(out.0.lock().expect("the buffer").clone()).expect("UTF-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1000);
        for (n, line) in lines.iter().enumerate() {
            assert!(
                line.contains(&format!(
                    "request{{request_id=id-{n} method=POST path=/}}: answered"
                )),
                "{line}"
            );
        }
        drop(tx);
        thread
            .join()
            .expect("the writer's thread ends with its queue");
    }
}
