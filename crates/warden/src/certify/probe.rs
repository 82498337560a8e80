//! `warden sandbox-probe`: one attempt at something a confined run must not
//! do, printed as one JSON line (`{"allowed": bool, "error": "EACCES …"}`).
//!
//! The certifier runs each probe twice, unconfined and confined; only a
//! probe that succeeded unconfined proves anything when it fails confined.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};

#[derive(Debug, Args)]
pub struct ProbeArgs {
    #[command(subcommand)]
    pub action: Action,
}

/// What a probe attempts.
#[derive(Debug, Clone, Subcommand, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Open and read a file.
    Read { path: PathBuf },
    /// Create (or truncate) a file and write to it.
    Write { path: PathBuf },
    /// Create a hard link `link` to `target`.
    Hardlink { target: PathBuf, link: PathBuf },
    /// Open a TCP connection.
    Connect { addr: String },
    /// Listen on a TCP port on loopback.
    Listen,
    /// Send a UDP datagram (Landlock does not cover UDP at ABI 7; the
    /// network namespace does).
    UdpSend { addr: String },
    /// Create a file in `$TMPDIR` (the private scratch when confined).
    WriteScratch,
    /// Start a background process (`/bin/true`, not waited for).
    Spawn,
    /// Set a file's mode to the mode it has (metadata, which Landlock does
    /// not govern; a read-only mount does).
    Chmod { path: PathBuf },
    /// Create a user namespace (a namespace escape).
    Unshare,
    /// Ask to be traced by the parent (`PTRACE_TRACEME`).
    Ptrace,
    /// Create a Unix-domain socket (the way to a host daemon's socket).
    UnixSocket,
}

impl Action {
    /// The probe's arguments after `sandbox-probe`.
    pub fn argv(&self) -> Vec<String> {
        let p = |p: &PathBuf| p.display().to_string();
        match self {
            Self::Read { path } => vec!["read".into(), p(path)],
            Self::Write { path } => vec!["write".into(), p(path)],
            Self::Hardlink { target, link } => vec!["hardlink".into(), p(target), p(link)],
            Self::Connect { addr } => vec!["connect".into(), addr.clone()],
            Self::Listen => vec!["listen".into()],
            Self::UdpSend { addr } => vec!["udp-send".into(), addr.clone()],
            Self::WriteScratch => vec!["write-scratch".into()],
            Self::Spawn => vec!["spawn".into()],
            Self::Chmod { path } => vec!["chmod".into(), p(path)],
            Self::Unshare => vec!["unshare".into()],
            Self::Ptrace => vec!["ptrace".into()],
            Self::UnixSocket => vec!["unix-socket".into()],
        }
    }
}

/// What one probe run observed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observed {
    pub allowed: bool,
    /// The OS error when refused (`EACCES: Permission denied`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn attempt(action: &Action) -> std::io::Result<()> {
    match action {
        Action::Read { path } => {
            let mut buf = Vec::new();
            std::fs::File::open(path)?.read_to_end(&mut buf).map(drop)
        }
        Action::Write { path } => std::fs::File::create(path)?.write_all(b"probe"),
        Action::Hardlink { target, link } => std::fs::hard_link(target, link),
        Action::Connect { addr } => std::net::TcpStream::connect(addr.as_str()).map(drop),
        Action::Listen => std::net::TcpListener::bind("127.0.0.1:0").map(drop),
        Action::UdpSend { addr } => std::net::UdpSocket::bind("127.0.0.1:0")?
            .send_to(b"probe", addr.as_str())
            .map(drop),
        Action::WriteScratch => {
            std::fs::File::create(std::env::temp_dir().join("warden-probe"))?.write_all(b"probe")
        }
        Action::Spawn => std::process::Command::new("/bin/true").spawn().map(drop),
        Action::Chmod { path } => {
            let mode = std::fs::metadata(path)?.permissions();
            std::fs::set_permissions(path, mode)
        }
        Action::Unshare => {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER).map_err(std::io::Error::from)
        }
        Action::Ptrace => nix::sys::ptrace::traceme().map_err(std::io::Error::from),
        Action::UnixSocket => std::os::unix::net::UnixDatagram::unbound().map(drop),
    }
}

/// Runs one probe and prints what happened.
pub fn main(args: ProbeArgs) -> ExitCode {
    let observed = match attempt(&args.action) {
        Ok(()) => Observed {
            allowed: true,
            error: None,
        },
        Err(e) => Observed {
            allowed: false,
            error: Some(match e.raw_os_error() {
                Some(n) => format!("{:?}", nix::errno::Errno::from_raw(n)),
                None => e.to_string(),
            }),
        },
    };
    match serde_json::to_string(&observed) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(_) => ExitCode::from(1),
    }
}
