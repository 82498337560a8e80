//! Integration tests of the supervisor against real processes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
