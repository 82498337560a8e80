//! A conformance peer for warden's tests: the orchestrator side of the
//! AIWG executor contract. [`schema`] checks every payload against the
//! contract's schema rules.
#![forbid(unsafe_code)]

pub mod schema;
mod server;

pub use server::{Peer, Received};
