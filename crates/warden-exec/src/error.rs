//! Why a run could not start.

use warden_core::Outcome;

/// A run that never started. Each variant maps to an infrastructure failure
/// whose `reason` is stable for scripts.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// `argv[0]` was not found on the child's PATH (or at the given path).
    #[error("program not found: {0}")]
    ProgramNotFound(String),
    /// The program exists but is not an executable file we may run.
    #[error("program not executable: {0}")]
    NotExecutable(String),
    /// The working directory does not exist, is not a directory, or is not searchable.
    #[error("working directory unusable: {path}: {why}")]
    BadCwd { path: String, why: String },
    /// The pseudo-terminal could not be allocated.
    #[error("could not allocate a pseudo-terminal: {0}")]
    Pty(String),
    /// The run asks for the confined tier and this host cannot give it.
    #[error("confinement unavailable: {0}")]
    ConfinementUnavailable(String),
    /// The OS refused to spawn the process.
    #[error("spawn failed: {0}")]
    Spawn(#[from] std::io::Error),
}

impl SpawnError {
    /// The stable machine-readable reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::ProgramNotFound(_) => "program_not_found",
            Self::NotExecutable(_) => "permission_denied",
            Self::BadCwd { .. } => "bad_cwd",
            Self::Pty(_) => "pty_unavailable",
            Self::ConfinementUnavailable(_) => "confinement_unavailable",
            Self::Spawn(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                "permission_denied"
            }
            Self::Spawn(e) if e.kind() == std::io::ErrorKind::NotFound => "program_not_found",
            Self::Spawn(_) => "spawn_failed",
        }
    }

    /// The outcome this failure is reported as.
    pub fn outcome(&self) -> Outcome {
        Outcome::infrastructure(self.reason(), Some(self.to_string()))
    }
}
