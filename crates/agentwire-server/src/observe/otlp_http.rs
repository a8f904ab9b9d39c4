//! The OTLP/HTTP protobuf span exporter of `a2a serve --otel` (the
//! default protocol, `http/protobuf`).
//!
//! Written here rather than taken from `opentelemetry-otlp` (whose gRPC
//! exporter is still used for `grpc`) because of what it cost on the
//! request path's machine: that exporter turns each batch into an owned
//! tree of protobuf structs (every attribute key and string value copied
//! into a new `String`), then prost walks the tree twice per level (the
//! nested lengths, then the bytes) and drops it. Measured with callgrind on
//! `a2a serve --otel` (the bench's echo SendMessage, two spans a request),
//! that was about 26,000 instructions a request when this was written, and
//! in December, against `opentelemetry-otlp`'s HTTP exporter swapped in,
//! about 4,400 (4.3 % of the request with traces on; docs/performance.md,
//! "The fast paths"), on a thread that shares the two cores with the
//! request workers. This
//! encoder writes the same message straight from the SDK's `SpanData`: each
//! field once, the resource encoded once when the exporter starts. Its
//! output decodes to exactly what `opentelemetry-proto`'s conversion builds
//! (a unit test holds the two together).
//!
//! Configuration as the OpenTelemetry specification's exporter variables
//! say (what `opentelemetry-otlp` reads too): the endpoint
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as it is) or
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` appended), by default
//! `http://localhost:4318/v1/traces`; headers from
//! `OTEL_EXPORTER_OTLP_HEADERS` and `OTEL_EXPORTER_OTLP_TRACES_HEADERS`
//! (`key=value,...`, values percent-decoded; the second wins); the timeout
//! of an export from `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` or
//! `OTEL_EXPORTER_OTLP_TIMEOUT` (milliseconds, 10 s by default).
//! Compression is not offered (`none` only), as before.

use std::borrow::Cow;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{SpanId, SpanKind, Status};
use opentelemetry::{Array, InstrumentationScope, KeyValue, Value};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

/// The content type of an OTLP/HTTP protobuf request.
const PROTOBUF: &str = "application/x-protobuf";

/// The exporter: where to post, with what headers, and the resource's
/// encoding (its `Resource` message and schema URL).
pub(crate) struct HttpExporter {
    endpoint: String,
    headers: reqwest::header::HeaderMap,
    timeout: Duration,
    /// Built on the batch thread at the first export: a blocking client
    /// owns a runtime thread of its own, which must not be started or
    /// stopped from inside the server's async runtime.
    client: OnceLock<Result<reqwest::blocking::Client, String>>,
    resource: Vec<u8>,
    resource_schema_url: String,
}

impl std::fmt::Debug for HttpExporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the headers: they often carry a collector's credentials.
        f.debug_struct("HttpExporter")
            .field("endpoint", &self.endpoint)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The endpoint as the variables say.
fn endpoint(traces: Option<String>, generic: Option<String>) -> String {
    if let Some(url) = traces {
        return url;
    }
    match generic {
        Some(base) => format!("{}/v1/traces", base.trim_end_matches('/')),
        None => "http://localhost:4318/v1/traces".to_owned(),
    }
}

/// `key=value,key2=value2` (values percent-decoded), as the exporter
/// variables' headers are written.
fn parse_headers(
    var: &str,
    value: &str,
    into: &mut reqwest::header::HeaderMap,
) -> Result<(), String> {
    for pair in value.split(',').filter(|p| !p.trim().is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(format!("{var}: {pair:?} is not key=value"));
        };
        let v = percent_encoding::percent_decode_str(v.trim()).decode_utf8_lossy();
        let name = reqwest::header::HeaderName::from_bytes(k.trim().as_bytes())
            .map_err(|_| format!("{var}: {:?} is not a header name", k.trim()))?;
        let value = reqwest::header::HeaderValue::from_str(&v)
            .map_err(|_| format!("{var}: the value of {name} is not a header value"))?;
        into.insert(name, value);
    }
    Ok(())
}

fn timeout_ms(var: &str, value: Option<String>) -> Result<Option<Duration>, String> {
    value
        .map(|v| {
            v.parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| format!("{var}: {v:?} is not a number of milliseconds"))
        })
        .transpose()
}

impl HttpExporter {
    /// The exporter the `OTEL_EXPORTER_OTLP_*` variables describe.
    pub(crate) fn from_env() -> Result<Self, String> {
        let endpoint = endpoint(
            env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            env("OTEL_EXPORTER_OTLP_ENDPOINT"),
        );
        let parsed = url::Url::parse(&endpoint)
            .map_err(|e| format!("invalid OTLP endpoint {endpoint:?}: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!(
                "invalid OTLP endpoint {endpoint:?}: an http:// or https:// URL is needed"
            ));
        }
        let mut headers = reqwest::header::HeaderMap::new();
        for var in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        ] {
            if let Some(v) = env(var) {
                parse_headers(var, &v, &mut headers)?;
            }
        }
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            reqwest::header::HeaderValue::from_static(PROTOBUF),
        );
        let timeout = match timeout_ms(
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            env("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"),
        )? {
            Some(t) => t,
            None => timeout_ms(
                "OTEL_EXPORTER_OTLP_TIMEOUT",
                env("OTEL_EXPORTER_OTLP_TIMEOUT"),
            )?
            .unwrap_or(Duration::from_secs(10)),
        };
        for var in [
            "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
            "OTEL_EXPORTER_OTLP_COMPRESSION",
        ] {
            if let Some(v) = env(var)
                && v != "none"
            {
                return Err(format!(
                    "{var}={v} is not supported: OTLP exports are sent uncompressed"
                ));
            }
        }
        Ok(Self {
            endpoint,
            headers,
            timeout,
            client: OnceLock::new(),
            resource: Vec::new(),
            resource_schema_url: String::new(),
        })
    }

    fn client(&self) -> Result<&reqwest::blocking::Client, OTelSdkError> {
        self.client
            .get_or_init(|| {
                reqwest::blocking::Client::builder()
                    .timeout(self.timeout)
                    .build()
                    .map_err(|e| format!("cannot start the OTLP HTTP client: {e}"))
            })
            .as_ref()
            .map_err(|e| OTelSdkError::InternalFailure(e.clone()))
    }

    fn post(&self, body: Vec<u8>) -> OTelSdkResult {
        let response = self
            .client()?
            .post(&self.endpoint)
            .headers(self.headers.clone())
            .body(body)
            .send()
            .map_err(|e| {
                OTelSdkError::InternalFailure(format!(
                    "OTLP export to {} failed: {e}",
                    self.endpoint
                ))
            })?;
        let status = response.status();
        if status.is_success() {
            Ok(())
        } else {
            Err(OTelSdkError::InternalFailure(format!(
                "OTLP export to {} refused: HTTP {status}",
                self.endpoint
            )))
        }
    }
}

impl SpanExporter for HttpExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        if batch.is_empty() {
            return Ok(());
        }
        let body = encode_request(&self.resource, &self.resource_schema_url, &batch);
        self.post(body)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource = encode_resource(resource);
        self.resource_schema_url = resource.schema_url().unwrap_or_default().to_owned();
    }
}

// ---------------------------------------------------------------- protobuf
//
// The wire format of `opentelemetry/proto/collector/trace/v1` (proto3): a
// field is a varint key (number << 3 | wire type), then a varint, 8 or 4
// little-endian bytes, or a varint length and that many bytes. Defaults
// are left out as proto3 does, but for the members of a `oneof` and the
// message fields the conversion always sets (`value`, `status`, `scope`,
// `resource`), which are written even when empty, so both decode alike.

const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;
const FIXED32: u32 = 5;

/// `v` as a varint: its bytes (at most 10) and how many there are.
fn varint_bytes(mut v: u64) -> ([u8; 10], usize) {
    let (mut out, mut n) = ([0u8; 10], 0);
    while v >= 0x80 {
        out[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    out[n] = v as u8;
    (out, n + 1)
}

fn varint(buf: &mut Vec<u8>, v: u64) {
    let (bytes, n) = varint_bytes(v);
    buf.extend_from_slice(&bytes[..n]);
}

fn key(buf: &mut Vec<u8>, field: u32, wire: u32) {
    varint(buf, u64::from(field << 3 | wire));
}

fn bytes_field(buf: &mut Vec<u8>, field: u32, b: &[u8]) {
    key(buf, field, LEN);
    varint(buf, b.len() as u64);
    buf.extend_from_slice(b);
}

/// A string or bytes field, left out when empty.
fn opt_bytes(buf: &mut Vec<u8>, field: u32, b: &[u8]) {
    if !b.is_empty() {
        bytes_field(buf, field, b);
    }
}

/// A varint field, left out when zero.
fn opt_varint(buf: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        key(buf, field, VARINT);
        varint(buf, v);
    }
}

fn opt_fixed64(buf: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        key(buf, field, FIXED64);
        buf.extend_from_slice(&v.to_le_bytes());
    }
}

fn opt_fixed32(buf: &mut Vec<u8>, field: u32, v: u32) {
    if v != 0 {
        key(buf, field, FIXED32);
        buf.extend_from_slice(&v.to_le_bytes());
    }
}

/// A message field whose body `body` writes: the body goes after a
/// one-byte length, which grows (moving the body) only when the body is
/// 128 bytes or more.
fn message(buf: &mut Vec<u8>, field: u32, body: impl FnOnce(&mut Vec<u8>)) {
    key(buf, field, LEN);
    let at = buf.len();
    buf.push(0);
    body(buf);
    let len = buf.len() - at - 1;
    if len < 0x80 {
        buf[at] = len as u8;
    } else {
        let (prefix, n) = varint_bytes(len as u64);
        buf.splice(at..=at, prefix[..n].iter().copied());
    }
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// `AnyValue` (a oneof: the member is written even when it is the default).
fn any_value(buf: &mut Vec<u8>, v: &Value) {
    match v {
        Value::String(s) => bytes_field(buf, 1, s.as_str().as_bytes()),
        Value::Bool(b) => {
            key(buf, 2, VARINT);
            varint(buf, u64::from(*b));
        }
        Value::I64(n) => {
            key(buf, 3, VARINT);
            varint(buf, *n as u64);
        }
        Value::F64(x) => {
            key(buf, 4, FIXED64);
            buf.extend_from_slice(&x.to_bits().to_le_bytes());
        }
        Value::Array(a) => message(buf, 5, |buf| match a {
            Array::Bool(v) => {
                for x in v {
                    message(buf, 1, |buf| any_value(buf, &Value::Bool(*x)));
                }
            }
            Array::I64(v) => {
                for x in v {
                    message(buf, 1, |buf| any_value(buf, &Value::I64(*x)));
                }
            }
            Array::F64(v) => {
                for x in v {
                    message(buf, 1, |buf| any_value(buf, &Value::F64(*x)));
                }
            }
            Array::String(v) => {
                for x in v {
                    message(buf, 1, |buf| bytes_field(buf, 1, x.as_str().as_bytes()));
                }
            }
            // A kind of array a later API adds: an empty array.
            _ => {}
        }),
        // A kind of value a later API adds: no value.
        _ => {}
    }
}

fn key_value(buf: &mut Vec<u8>, field: u32, k: &str, v: &Value) {
    message(buf, field, |buf| {
        opt_bytes(buf, 1, k.as_bytes());
        message(buf, 2, |buf| any_value(buf, v));
    });
}

fn attributes<'a>(buf: &mut Vec<u8>, field: u32, kvs: impl IntoIterator<Item = &'a KeyValue>) {
    for kv in kvs {
        key_value(buf, field, kv.key.as_str(), &kv.value);
    }
}

/// The `Resource` message's body.
fn encode_resource(resource: &Resource) -> Vec<u8> {
    let mut buf = Vec::new();
    for (k, v) in resource.iter() {
        key_value(&mut buf, 1, k.as_str(), v);
    }
    buf
}

/// `InstrumentationScope`.
fn scope(buf: &mut Vec<u8>, s: &InstrumentationScope) {
    message(buf, 1, |buf| {
        opt_bytes(buf, 1, s.name().as_bytes());
        opt_bytes(buf, 2, s.version().unwrap_or_default().as_bytes());
        attributes(buf, 3, s.attributes());
    });
}

/// The OTLP span flags: the W3C flags, and whether the parent is remote
/// (with the bit saying that this is known).
fn span_flags(trace_flags: u8, remote: bool) -> u32 {
    const HAS_IS_REMOTE: u32 = 0x100;
    const IS_REMOTE: u32 = 0x200;
    u32::from(trace_flags) | HAS_IS_REMOTE | if remote { IS_REMOTE } else { 0 }
}

fn span(buf: &mut Vec<u8>, s: &SpanData) {
    message(buf, 2, |buf| {
        let cx = &s.span_context;
        bytes_field(buf, 1, &cx.trace_id().to_bytes());
        bytes_field(buf, 2, &cx.span_id().to_bytes());
        opt_bytes(buf, 3, cx.trace_state().header().as_bytes());
        if s.parent_span_id != SpanId::INVALID {
            bytes_field(buf, 4, &s.parent_span_id.to_bytes());
        }
        opt_bytes(buf, 5, s.name.as_bytes());
        let kind = match s.span_kind {
            SpanKind::Internal => 1,
            SpanKind::Server => 2,
            SpanKind::Client => 3,
            SpanKind::Producer => 4,
            SpanKind::Consumer => 5,
        };
        opt_varint(buf, 6, kind);
        opt_fixed64(buf, 7, nanos(s.start_time));
        opt_fixed64(buf, 8, nanos(s.end_time));
        attributes(buf, 9, &s.attributes);
        opt_varint(buf, 10, u64::from(s.dropped_attributes_count));
        for e in s.events.iter() {
            message(buf, 11, |buf| {
                opt_fixed64(buf, 1, nanos(e.timestamp));
                opt_bytes(buf, 2, e.name.as_bytes());
                attributes(buf, 3, &e.attributes);
                opt_varint(buf, 4, u64::from(e.dropped_attributes_count));
            });
        }
        opt_varint(buf, 12, u64::from(s.events.dropped_count));
        for l in s.links.iter() {
            message(buf, 13, |buf| {
                let lc = &l.span_context;
                bytes_field(buf, 1, &lc.trace_id().to_bytes());
                bytes_field(buf, 2, &lc.span_id().to_bytes());
                opt_bytes(buf, 3, lc.trace_state().header().as_bytes());
                attributes(buf, 4, &l.attributes);
                opt_varint(buf, 5, u64::from(l.dropped_attributes_count));
                opt_fixed32(buf, 6, span_flags(lc.trace_flags().to_u8(), lc.is_remote()));
            });
        }
        opt_varint(buf, 14, u64::from(s.links.dropped_count));
        message(buf, 15, |buf| {
            let (code, text): (u64, Cow<'_, str>) = match &s.status {
                Status::Unset => (0, Cow::Borrowed("")),
                Status::Ok => (1, Cow::Borrowed("")),
                Status::Error { description } => (2, Cow::Borrowed(description.as_ref())),
            };
            opt_bytes(buf, 2, text.as_bytes());
            opt_varint(buf, 3, code);
        });
        opt_fixed32(
            buf,
            16,
            span_flags(cx.trace_flags().to_u8(), s.parent_span_is_remote),
        );
    });
}

/// An `ExportTraceServiceRequest` of `spans`, grouped by instrumentation
/// scope in order of first appearance, under the one resource.
pub(crate) fn encode_request(resource: &[u8], schema_url: &str, spans: &[SpanData]) -> Vec<u8> {
    // The scopes in order of first appearance (a handful at most: linear).
    let mut scopes: Vec<&InstrumentationScope> = Vec::new();
    for s in spans {
        if !scopes.contains(&&s.instrumentation_scope) {
            scopes.push(&s.instrumentation_scope);
        }
    }
    let mut buf = Vec::with_capacity(64 + resource.len() + spans.len() * 400);
    message(&mut buf, 1, |buf| {
        message(buf, 1, |buf| buf.extend_from_slice(resource));
        for sc in &scopes {
            message(buf, 2, |buf| {
                scope(buf, sc);
                for s in spans.iter().filter(|s| &&s.instrumentation_scope == sc) {
                    span(buf, s);
                }
                opt_bytes(buf, 3, sc.schema_url().unwrap_or_default().as_bytes());
            });
        }
        opt_bytes(buf, 3, schema_url.as_bytes());
    });
    buf
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{Event, Link, SpanContext, TraceFlags, TraceId, TraceState};
    use opentelemetry::{KeyValue, StringValue};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
    use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};
    use prost::Message as _;

    fn cx(trace: u128, span: u64, remote: bool, state: &str) -> SpanContext {
        SpanContext::new(
            TraceId::from(trace),
            SpanId::from(span),
            TraceFlags::SAMPLED,
            remote,
            state.parse::<TraceState>().expect("a trace state"),
        )
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_nanos(secs * 1_000_000_000 + 123_456_789)
    }

    fn spans() -> Vec<SpanData> {
        let agentwire = InstrumentationScope::builder("agentwire")
            .with_version("1.2.3")
            .with_attributes([KeyValue::new("scope.attr", "x")])
            .build();
        let other = InstrumentationScope::builder("other")
            .with_schema_url("https://opentelemetry.io/schemas/1.30.0")
            .build();
        let long = "l".repeat(300);
        let request = SpanData {
            span_context: cx(
                0x0af7651916cd43dd8448eb211c80319c,
                0xb7ad6b7169203331,
                false,
                "vendor=value",
            ),
            parent_span_id: SpanId::from(0x00f067aa0ba902b7),
            parent_span_is_remote: true,
            span_kind: SpanKind::Server,
            name: "a2a SendMessage".into(),
            start_time: at(1_700_000_000),
            end_time: at(1_700_000_001),
            attributes: vec![
                KeyValue::new("rpc.method", "SendMessage"),
                KeyValue::new("http.response.status_code", 200_i64),
                KeyValue::new("negative", -5_i64),
                KeyValue::new("zero", 0_i64),
                KeyValue::new("empty", ""),
                KeyValue::new("flag", false),
                KeyValue::new("ratio", 0.25_f64),
                KeyValue::new("long", long.clone()),
                KeyValue::new("bools", Value::Array(Array::Bool(vec![true, false]))),
                KeyValue::new("ints", Value::Array(Array::I64(vec![1, -2, 300]))),
                KeyValue::new("floats", Value::Array(Array::F64(vec![1.5]))),
                KeyValue::new(
                    "strings",
                    Value::Array(Array::String(vec![
                        StringValue::from("a"),
                        StringValue::from(""),
                    ])),
                ),
            ],
            dropped_attributes_count: 2,
            events: {
                let mut e = SpanEvents::default();
                e.events.push(Event::new(
                    "answered",
                    at(1_700_000_001),
                    vec![KeyValue::new("outcome", "ok")],
                    1,
                ));
                e.dropped_count = 3;
                e
            },
            links: {
                let mut l = SpanLinks::default();
                l.links.push(Link::new(
                    cx(7, 8, true, ""),
                    vec![KeyValue::new("why", "follows")],
                    4,
                ));
                l.dropped_count = 1;
                l
            },
            status: Status::error("task not found"),
            instrumentation_scope: agentwire.clone(),
        };
        let turn = SpanData {
            span_context: cx(0x0af7651916cd43dd8448eb211c80319c, 42, false, ""),
            parent_span_id: SpanId::from(0xb7ad6b7169203331),
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: "a2a.execute".into(),
            start_time: at(1_700_000_000),
            end_time: at(1_700_000_000),
            attributes: vec![KeyValue::new("a2a.task.id", long)],
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Ok,
            instrumentation_scope: agentwire,
        };
        let root = SpanData {
            span_context: cx(1, 2, false, ""),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Client,
            name: "".into(),
            start_time: UNIX_EPOCH,
            end_time: at(5),
            attributes: Vec::new(),
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: other,
        };
        let mut all = vec![request, turn.clone(), root];
        // Enough spans that the outer messages' lengths take several bytes.
        for i in 0..200 {
            let mut t = turn.clone();
            t.span_context = cx(99, 1000 + i, false, "");
            all.push(t);
        }
        all
    }

    fn resource() -> Resource {
        Resource::builder_empty()
            .with_service_name("a2a-test")
            .with_attributes([
                KeyValue::new("host.name", "here"),
                KeyValue::new("pid", 7_i64),
            ])
            .with_schema_url(
                Vec::<KeyValue>::new(),
                "https://opentelemetry.io/schemas/1.30.0",
            )
            .build()
    }

    #[test]
    fn decodes_to_what_the_official_conversion_builds() {
        let resource = resource();
        let batch = spans();
        let official = ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(
                batch.clone(),
                &ResourceAttributesWithSchema::from(&resource),
            ),
        };
        let ours = encode_request(
            &encode_resource(&resource),
            resource.schema_url().unwrap_or_default(),
            &batch,
        );
        let decoded = ExportTraceServiceRequest::decode(ours.as_slice()).expect("valid protobuf");
        assert_eq!(decoded, official);
        // And byte for byte what prost writes for it.
        assert_eq!(ours, official.encode_to_vec());
    }

    #[test]
    fn an_empty_resource_and_one_span() {
        let resource = Resource::builder_empty().build();
        let batch = vec![spans().remove(2)];
        let official = ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(
                batch.clone(),
                &ResourceAttributesWithSchema::from(&resource),
            ),
        };
        let ours = encode_request(&encode_resource(&resource), "", &batch);
        assert_eq!(
            ExportTraceServiceRequest::decode(ours.as_slice()).expect("valid"),
            official
        );
    }

    #[test]
    fn endpoints_and_headers_from_the_variables() {
        assert_eq!(endpoint(None, None), "http://localhost:4318/v1/traces");
        assert_eq!(
            endpoint(None, Some("http://c:4318/".into())),
            "http://c:4318/v1/traces"
        );
        assert_eq!(
            endpoint(Some("http://c/custom".into()), Some("http://x".into())),
            "http://c/custom"
        );
        let mut h = reqwest::header::HeaderMap::new();
        parse_headers("V", "api-key=a%20b, x-team = t1 ,", &mut h).expect("parsed");
        assert_eq!(h["api-key"], "a b");
        assert_eq!(h["x-team"], "t1");
        parse_headers("V", "x-team=t2", &mut h).expect("parsed");
        assert_eq!(h["x-team"], "t2", "a later variable wins");
        assert!(parse_headers("V", "novalue", &mut h).is_err());
        assert!(parse_headers("V", "bad name=x", &mut h).is_err());
        assert_eq!(
            timeout_ms("T", Some("2500".into())),
            Ok(Some(Duration::from_millis(2500)))
        );
        assert!(timeout_ms("T", Some("soon".into())).is_err());
    }
}
