//! End-to-end tests: the real `warden` binary, real processes, real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
