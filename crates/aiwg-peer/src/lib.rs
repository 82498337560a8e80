//! A conformance peer for warden's tests: the orchestrator side of the
//! AIWG executor contract. [`schema`] checks every payload against the
//! contract's schema rules; [`order`] checks each mission's events against
//! the contract's state diagram.
#![forbid(unsafe_code)]

pub mod order;
pub mod schema;
mod server;

pub use server::{Peer, Received};
