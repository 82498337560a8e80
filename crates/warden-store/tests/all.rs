//! Integration tests of the store on real SQLite files.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
