//! The place for serving clients of A2A protocol version 0.3.
//!
//! Nothing is implemented yet. A request without `A2A-Version` means 0.3
//! (the version check in `handler/admission` answers it with
//! `VersionNotSupportedError` today). What goes here when 0.3 is served:
//!
//! - the 0.3 wire forms (JSON-RPC method names such as `message/send`,
//!   the 0.3 field names and enum spellings, the 0.3 REST paths) decoded
//!   into the 1.0 request types the handler takes, and the handler's
//!   answers and events encoded back into their 0.3 form;
//! - the 0.3 agent card fields, derived from the 1.0 card.
//!
//! The bindings would call into this module when the requested version is
//! 0.3; the handler, the task manager and the stores stay version-free.
