//! Compatibility with earlier versions of the protocol.
//!
//! Nothing here yet. See [`v0_3`].

pub(crate) mod v0_3;
