//! Agents bundled with the project, written on the public API only.
//!
//! - [`echo::EchoAgent`]: repeats the text it receives as an artifact
//!   (streamed word by word when the client streams); also runs a
//!   cancelable long job (`slow`, `long job`) and describes the files and
//!   data it is sent.
//! - [`depcompat::DepCompatAgent`]: the Dependency Compatibility Agent: it
//!   checks an npm or Cargo project against a target runtime and
//!   target package versions, asks for what is missing (input-required),
//!   streams a JSON risk report and a Markdown report, and refines them in
//!   new tasks.
//! - [`coordinator::ReleaseCoordinator`]: the caller of the Dependency Compatibility Agent, a
//!   release coordinator that discovers the compatibility agent by its card,
//!   delegates to it with the client, answers its question, follows the
//!   stream and keeps the artifact versions in the client ledger.
//! - `mcp::McpToolsAgent` (feature `mcp`): the tools of an MCP server
//!   (started as a command, or reached at a streamable HTTP URL) served as
//!   A2A skills; a message names a tool and its arguments or asks in
//!   words, missing arguments make the task input-required, results come
//!   back as artifacts.
//! - [`conformance::ConformanceAgent`]: the system under test of the A2A
//!   conformance kit (TCK); it reacts to messageId prefixes exactly as the
//!   TCK scenarios describe.

pub mod conformance;
pub mod coordinator;
pub mod depcompat;
pub mod echo;
#[cfg(feature = "mcp")]
pub mod mcp;
