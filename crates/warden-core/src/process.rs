//! What a supervised process does, as the layers above the supervisor see
//! it: output as it is saved, then how it ended.

use crate::Outcome;

/// Which output stream bytes came from. In PTY mode everything is `Stdout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputStream {
    /// Standard output (or the terminal).
    Stdout,
    /// Standard error.
    Stderr,
}

impl OutputStream {
    /// `stdout` or `stderr`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
        }
    }
}

/// A recorded run's progress, in order; [`ProcessEvent::Ended`] is last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessEvent {
    /// Output, already saved.
    Output {
        /// Where it came from.
        stream: OutputStream,
        /// The chunk's number in the run (0, 1, 2, … across both streams).
        seq: u64,
        /// The bytes.
        data: Vec<u8>,
    },
    /// The outcome, saved; every process of the run is gone.
    Ended(Outcome),
}
