//! Output chunks and the readers that produce them.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;

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

/// A raw read from one stream, before sequencing.
pub(crate) type Raw = (Stream, Vec<u8>);

/// Reads `src` in pieces of at most `chunk` bytes until end of file (or EIO,
/// which is how a PTY master reports that the last slave closed).
pub(crate) async fn pump<R: AsyncRead + Unpin>(
    mut src: R,
    stream: Stream,
    chunk: usize,
    tx: mpsc::Sender<Raw>,
) {
    let mut buf = vec![0u8; chunk];
    loop {
        match src.read(&mut buf).await {
            Ok(0) => return,
            Ok(n) => {
                if tx.send((stream, buf[..n].to_vec())).await.is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                if e.raw_os_error() != Some(nix::libc::EIO) {
                    tracing::warn!(stream = stream.as_str(), error = %e, "output read failed");
                }
                return;
            }
        }
    }
}
