//! Agents bundled with the project, written on the public API only.
//!
//! - [`echo::EchoAgent`]: repeats the text it receives as an artifact
//!   (streamed word by word when the client streams).
//! - [`conformance::ConformanceAgent`]: the system under test of the A2A
//!   conformance kit (TCK); it reacts to messageId prefixes exactly as the
//!   TCK scenarios describe.

pub mod conformance;
pub mod echo;
