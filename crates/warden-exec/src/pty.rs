//! Pseudo-terminal allocation for runs that need `isatty` to be true.
//!
//! The child gets the slave side as stdin, stdout and stderr, in its own
//! process group as usual. It has no controlling terminal (that would need
//! `setsid` + `TIOCSCTTY` in the child, i.e. a `pre_exec` hook), so programs
//! that open `/dev/tty` directly, such as password prompts, are not served.

use std::os::fd::OwnedFd;

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::pty::openpty;
use tokio::net::unix::pipe;

use crate::SpawnError;

/// The master side, split into a reader and a writer registered with tokio.
pub(crate) struct Master {
    pub(crate) reader: pipe::Receiver,
    pub(crate) writer: pipe::Sender,
}

/// A fresh pty pair: the master (non-blocking) and the slave for the child.
pub(crate) fn open() -> Result<(Master, OwnedFd), SpawnError> {
    let err = |e: &dyn std::fmt::Display| SpawnError::Pty(e.to_string());
    let pair = openpty(None, None).map_err(|e| err(&e))?;
    // The unchecked constructors leave the fd as it is; a blocking master
    // would stall a runtime worker on a full read or write.
    fcntl(&pair.master, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).map_err(|e| err(&e))?;
    let write_fd = pair.master.try_clone().map_err(|e| err(&e))?;
    // A PTY master is not a FIFO, hence the unchecked constructors; both only
    // need a pollable non-blocking fd, which this is.
    let reader = pipe::Receiver::from_owned_fd_unchecked(pair.master).map_err(|e| err(&e))?;
    let writer = pipe::Sender::from_owned_fd_unchecked(write_fd).map_err(|e| err(&e))?;
    Ok((Master { reader, writer }, pair.slave))
}
