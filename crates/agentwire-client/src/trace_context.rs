//! W3C trace context on outgoing calls.
//!
//! The client has no tracing system of its own: a program that exports
//! traces (the server's `otel` feature, `a2a serve` when traces are on)
//! installs an [`Injector`] once, and every call on every binding
//! (JSON-RPC and HTTP+JSON headers, gRPC metadata) then carries the
//! fields it writes (`traceparent`, `tracestate`, `baggage`), so an agent
//! that calls another continues the same trace. Without an injector a
//! call pays one atomic load and sends nothing more.

use std::sync::OnceLock;

/// Writes the current trace context's fields through `set(name, value)`;
/// names are lower-case header names.
pub type Injector = fn(set: &mut dyn FnMut(&str, String));

static INJECTOR: OnceLock<Injector> = OnceLock::new();

/// Installs the injector of every later call (the first one installed
/// stays). Returns whether this one was installed.
pub fn set_injector(injector: Injector) -> bool {
    INJECTOR.set(injector).is_ok()
}

/// Calls `set` with each field of the current trace context, when an
/// injector is installed.
pub(crate) fn inject(mut set: impl FnMut(&str, String)) {
    if let Some(injector) = INJECTOR.get() {
        injector(&mut set);
    }
}

/// The trace context fields as HTTP headers, added to `rb`.
pub(crate) fn http(rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    if INJECTOR.get().is_none() {
        return rb;
    }
    let mut headers = http::HeaderMap::new();
    inject(|name, value| {
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            headers.insert(n, v);
        }
    });
    rb.headers(headers)
}

/// The trace context fields as gRPC metadata, added to `md`.
#[cfg(feature = "grpc")]
pub(crate) fn grpc(md: &mut tonic::metadata::MetadataMap) {
    use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue};
    inject(|name, value| {
        if let (Ok(k), Ok(v)) = (
            AsciiMetadataKey::from_bytes(name.as_bytes()),
            AsciiMetadataValue::try_from(value.as_str()),
        ) {
            md.insert(k, v);
        }
    });
}
