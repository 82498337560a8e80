//! The sandbox side of the AIWG executor contract (`executor.v1`).
//!
//! [`wire`] holds the contract's shapes: every payload warden sends and
//! every event it emits is built from these types, which carry exactly the
//! fields the contract's schema allows (`additionalProperties: false`).
#![forbid(unsafe_code)]

pub mod identity;
pub mod link;
pub mod missions;
pub mod wire;

pub use link::{Link, LinkConfig, LinkStatus};
pub use missions::{Abort, DispatchError, MissionTarget, Missions, Resolve};
