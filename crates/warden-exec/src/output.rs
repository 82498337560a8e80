//! Output chunks: sequenced pieces of a run's stdout and stderr.

/// Which stream a chunk came from. In PTY mode everything is `Stdout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    /// Standard output (or the terminal).
    Stdout,
    /// Standard error.
    Stderr,
}

impl Stream {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
        }
    }
}

/// A piece of output, numbered in arrival order across both streams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputChunk {
    /// 0, 1, 2, … per run.
    pub seq: u64,
    /// Where it came from.
    pub stream: Stream,
    /// At most the configured chunk size.
    pub data: Vec<u8>,
}

impl OutputChunk {
    /// The stream's wire name.
    pub fn stream_name(&self) -> &'static str {
        self.stream.as_str()
    }
}
