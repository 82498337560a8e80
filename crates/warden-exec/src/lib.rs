//! warden's process supervisor.
//!
//! [`Supervisor::spawn`] starts one bounded command in its own process group
//! (std's `posix_spawn` path: no `pre_exec`), streams its output as sequenced
//! chunks, enforces the deadline and the output cap, and reports an
//! [`Outcome`](warden_core::Outcome) only once every process of the run is gone.
//!
//! The process hosting a `Supervisor` becomes a child subreaper, so a
//! descendant that leaves the run's process group with `setsid` is re-parented
//! to us when its parent dies; it is recognised by the `WARDEN_RUN_ID`
//! variable the run's environment carries and is killed with the rest.
//! Such a process must spawn its children only through the supervisor, which
//! reaps the orphans it adopts.
//!
//! A run whose spec carries a policy is confined: it is spawned through the
//! `warden sandbox-exec` helper ([`confine`]), which the kernel then holds to
//! the policy (namespaces, Landlock, seccomp, rlimits).
// Unsafe code is denied everywhere but `confine::sys` (fork and two
// system calls the confined tier's helper needs).
#![deny(unsafe_code)]

pub mod confine;
pub mod dirwatch;
mod driver;
mod env;
mod error;
mod output;
mod procfs;
mod procs;
mod pty;
mod resolve;
pub mod runner;
pub mod shim;
mod stdin;
mod supervisor;

pub use env::MARKER_VAR;
pub use error::SpawnError;
pub use output::{OutputChunk, Stream};
pub use procs::kill_orphaned_run;
pub use stdin::StdinHandle;
pub use supervisor::{Canceller, RunEvent, RunHandle, Supervisor, SupervisorConfig};
