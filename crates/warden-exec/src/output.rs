//! Output chunks: sequenced pieces of a run's stdout and stderr.

pub use warden_core::OutputStream as Stream;

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
