//! The process runner the engine uses: defined in `warden-exec` (shared
//! with the AIWG missions), implemented by the binary.

pub use warden_exec::runner::*;
