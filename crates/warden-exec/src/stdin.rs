//! The writable end of a run's stdin, for answers to prompts.

use std::io;

use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;
use tokio::process::ChildStdin;

/// Writes to a live run's stdin: a pipe, or the PTY master.
#[derive(Debug)]
pub enum StdinHandle {
    /// A pipe to the child's stdin.
    Pipe(ChildStdin),
    /// The pseudo-terminal's master side.
    Pty(pipe::Sender),
}

impl StdinHandle {
    /// Writes all of `bytes`; an error means the input did not reach the run.
    pub async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Self::Pipe(p) => {
                p.write_all(bytes).await?;
                p.flush().await
            }
            Self::Pty(m) => {
                m.write_all(bytes).await?;
                m.flush().await
            }
        }
    }
}
