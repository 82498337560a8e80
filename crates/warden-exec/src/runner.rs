//! What a protocol needs from the layer that runs processes. The binary
//! implements [`ProcessRunner`] over its run service (supervisor and store);
//! protocol crates (A2A command runtimes, AIWG missions) never spawn
//! anything themselves.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use tokio::sync::mpsc;
use warden_core::{Outcome, RunId};
pub use warden_core::{OutputStream, ProcessEvent};

/// A program to run for a task or a mission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRequest {
    /// Program and arguments, already rendered.
    pub argv: Vec<String>,
    /// Working directory.
    pub cwd: PathBuf,
    /// Environment on top of the runner's minimal base.
    pub env: Vec<(String, String)>,
    /// Deadline.
    pub timeout: Duration,
    /// Total output allowed.
    pub max_output: u64,
    /// Who asked, for the audit log.
    pub actor: String,
    /// Run it on a pseudo-terminal (output all arrives as stdout).
    pub pty: bool,
    /// Keep its stdin open for [`ProcessRunner::write_stdin`].
    pub stdin: bool,
    /// The tier it runs in (the instance's).
    pub isolation: warden_core::confine::Isolation,
}

/// A process that was recorded and spawned (or recorded as unspawnable:
/// then its only event is an infrastructure failure).
#[derive(Debug)]
pub struct Started {
    /// Its run id.
    pub run: RunId,
    /// What it does.
    pub events: mpsc::Receiver<ProcessEvent>,
}

/// A boxed future, as the trait must be usable as `dyn`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Starts and stops processes for the protocols.
pub trait ProcessRunner: Send + Sync + 'static {
    /// Records and starts `request`. `Err` means nothing was started and
    /// carries the infrastructure failure to report (e.g.
    /// `program_not_found`, or `capacity` when too many runs are live).
    fn start(&self, request: ProcessRequest) -> BoxFuture<'_, Result<Started, Outcome>>;

    /// Asks run `run` to stop (SIGTERM to its group, SIGKILL after the
    /// grace period); its end arrives as [`ProcessEvent::Ended`].
    fn stop(&self, run: RunId);

    /// Writes `data` to the stdin of live run `run` (started with `stdin`).
    /// `Err` says why it did not get there.
    fn write_stdin(&self, run: RunId, data: Vec<u8>) -> BoxFuture<'_, Result<(), String>>;
}
