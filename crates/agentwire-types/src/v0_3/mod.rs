//! The A2A protocol version 0.3 data model and its conversions to and
//! from the 1.0 model (feature `v0_3`).
//!
//! One conversion layer for both sides: the server's compatibility module
//! serves 0.3 clients through it, and the client calls 0.3 agents through
//! it, so the rules (what 0.3 cannot carry, what a `historyLength` of 0
//! means...) are written once.
//!
//! - [`types`]: the 0.3 JSON-RPC objects (`kind` discriminators,
//!   text/file/data parts, lower-case kebab-case states, `final` on status
//!   updates);
//! - [`convert`]: 0.3 to 1.0 and back, by move;
//! - [`rest`]: the 0.3 HTTP+JSON bodies (the ProtoJSON form of the 0.3
//!   protobuf messages) and their conversions to the JSON-RPC objects.
//!
//! The 0.3 specification: <https://a2a-protocol.org/v0.3.0/specification/>.

// The items mirror the 0.3 schema member for member (and the conversions
// are named `<thing>_to_v1` / `<thing>_to_v03`); the 0.3 specification
// documents each member, so they carry no doc comment of their own.
#[allow(missing_docs)]
pub mod convert;
#[cfg(feature = "grpc")]
pub mod grpc;
#[allow(missing_docs)]
pub mod rest;
#[allow(missing_docs)]
pub mod types;

/// The protocol version string a 0.3 agent card carries.
pub const PROTOCOL_VERSION: &str = "0.3.0";
