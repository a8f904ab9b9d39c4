//! Compatibility with earlier versions of the protocol: [`v0_3`] serves
//! clients of A2A 0.3 beside 1.0.

pub(crate) mod v0_3;
