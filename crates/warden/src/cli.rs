//! Command-line definitions.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// warden: runs agent work as bounded, supervised processes and tells the
/// truth about what happened.
#[derive(Debug, Parser)]
#[command(name = "warden", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon: HTTP API on 127.0.0.1:8122 with the embedded store.
    Serve(ServeArgs),
    /// The scratchpad bus: agent mailboxes with leases (also run as a2a-post, a2a-poll, …).
    Bus(crate::cmd_bus::BusArgs),
    /// AIWG missions of a running server: list, show, abort.
    #[command(after_help = crate::cmd_mission::EXIT_CODES)]
    Mission(crate::cmd_mission::MissionArgs),
    /// Run one command under the supervisor and report its outcome.
    #[command(after_help = EXIT_CODES)]
    Run(RunArgs),
    /// Prove the confined tier on this host: run the escape probes unconfined
    /// and confined, and store a certificate for this binary (valid 2 hours).
    Certify(CertifyArgs),
    /// Run PROGRAM confined by a policy (the helper the supervisor spawns for
    /// confined runs; also usable by hand).
    #[command(after_help = SANDBOX_EXIT_CODES)]
    SandboxExec(SandboxExecArgs),
    /// One certification probe (run by `warden certify`, inside and outside the sandbox).
    #[command(hide = true)]
    SandboxProbe(crate::certify::ProbeArgs),
    /// Own one resumable run (a mission) so it outlives the server (spawned by `warden serve`).
    #[command(hide = true)]
    Shim(ShimArgs),
}

/// Exit codes of `warden sandbox-exec` beyond the program's own.
pub const SANDBOX_EXIT_CODES: &str = "\
Exit codes:
  PROGRAM's own exit code, or death by PROGRAM's signal
  125      the sandbox could not be set up (the message names the missing feature)
  126      PROGRAM is not executable inside the policy
  127      PROGRAM was not found";

#[derive(Debug, Args)]
pub struct ShimArgs {
    /// The run directory (output, stdin FIFO, status.json).
    #[arg(long)]
    pub dir: PathBuf,
    /// Deadline in seconds.
    #[arg(long)]
    pub timeout: f64,
    /// Seconds between SIGTERM and SIGKILL.
    #[arg(long, default_value_t = 5.0)]
    pub grace: f64,
    /// Output bytes kept; past them the program is killed.
    #[arg(long, default_value_t = 64 << 20)]
    pub max_output: u64,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    pub argv: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CertifyArgs {
    /// Data directory where the certificate is stored [default: ./.warden].
    #[arg(long, env = "WARDEN_HOME")]
    pub home: Option<PathBuf>,
    /// Print the certificate as JSON.
    #[arg(long)]
    pub json: bool,
    /// Check the stored certificate instead of certifying: exit 0 if it is
    /// valid for this binary and kernel now, 1 (with the reason) if not.
    #[arg(long)]
    pub check: bool,
}

/// The helper's subcommand name.
pub const SANDBOX_EXEC: &str = "sandbox-exec";

/// `warden sandbox-exec …` parsed on its own (see `main`).
#[derive(Debug, Parser)]
#[command(
    name = "warden sandbox-exec",
    about = "Run PROGRAM confined by a policy",
    after_help = SANDBOX_EXIT_CODES
)]
pub struct SandboxExecCli {
    #[command(flatten)]
    pub args: SandboxExecArgs,
}

#[derive(Debug, Args)]
pub struct SandboxExecArgs {
    /// The policy: a JSON object, or a file holding one. See docs/CONFINEMENT.md.
    #[arg(long, value_name = "FILE|JSON", required_unless_present = "profile")]
    pub policy: Option<String>,
    /// Use a named profile (edit, test, readonly) for --workspace instead of --policy.
    #[arg(long, conflicts_with = "policy", value_parser = parse_profile)]
    pub profile: Option<warden_core::confine::Profile>,
    /// The workspace for --profile [default: the current directory].
    #[arg(long, requires = "profile", value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Print the policy as JSON and exit (no program is run).
    #[arg(long)]
    pub print_policy: bool,
    /// Where a setup failure is recorded as JSON (used by the supervisor).
    #[arg(long, value_name = "FILE")]
    pub status_file: Option<PathBuf>,
    /// A new file to write `started` into once PROGRAM has been exec'd (used by `warden shim`).
    #[arg(long, value_name = "FILE")]
    pub started_file: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(
        last = true,
        required_unless_present = "print_policy",
        value_name = "PROGRAM ARGS"
    )]
    pub argv: Vec<std::ffi::OsString>,
}

/// Parses a confined-tier profile name.
pub fn parse_profile(s: &str) -> Result<warden_core::confine::Profile, String> {
    warden_core::confine::Profile::parse(s)
        .ok_or_else(|| format!("{s:?} is not a profile (edit, test, readonly)"))
}

/// Exit codes of `warden run`, also in the README.
pub const EXIT_CODES: &str = "\
Exit codes:
  0        completed (the program exited 0)
  1-255    failed: the program's own exit code (128+N if killed by signal N)
  123      output_limit: output passed --max-output; the process group was killed
  124      timed_out: the deadline passed; the process group was terminated
  125      failed to run: the program could not be started (see the message)
  130      cancelled (Ctrl-C or SIGTERM to warden)";

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on [default: 127.0.0.1:8122]. A non-loopback address
    /// needs operator auth (operator_token or WARDEN_OPERATOR_TOKEN).
    #[arg(long, env = "WARDEN_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Data directory [default: ./.warden].
    #[arg(long, env = "WARDEN_HOME")]
    pub home: Option<PathBuf>,
    /// Config file [default: $WARDEN_HOME/warden.toml, then ./warden.toml, if present].
    #[arg(long, env = "WARDEN_CONFIG")]
    pub config: Option<PathBuf>,
    /// Where runs without a cwd and adapter commands run [default: the current directory].
    #[arg(long, env = "WARDEN_WORKSPACE")]
    pub workspace: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Deadline in seconds (fractions allowed) [default: 3600].
    #[arg(long, value_name = "S")]
    pub timeout: Option<f64>,
    /// Output cap in bytes; K, M and G suffixes are accepted [default: 64M].
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub max_output: Option<u64>,
    /// Run on a pseudo-terminal (for programs that check isatty).
    #[arg(long)]
    pub pty: bool,
    /// Forward warden's stdin to the program (closed otherwise).
    #[arg(long)]
    pub stdin: bool,
    /// Working directory [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Extra environment for the program, NAME=VALUE (repeatable).
    #[arg(long = "env", value_name = "NAME=VALUE", value_parser = parse_env)]
    pub env: Vec<(String, String)>,
    /// Seconds between SIGTERM and SIGKILL [default: 5].
    #[arg(long, value_name = "S")]
    pub grace: Option<f64>,
    /// Print newline-delimited JSON events (output chunks, then the outcome) on stdout.
    #[arg(long)]
    pub json: bool,
    /// Run in the confined tier with this profile (edit, test, readonly); the
    /// workspace is --cwd. Run `warden certify` first to see what it enforces.
    #[arg(long, value_name = "PROFILE", value_parser = parse_profile)]
    pub confine: Option<warden_core::confine::Profile>,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM ARGS")]
    pub argv: Vec<String>,
}

/// Parses `1048576`, `64K`, `64M`, `1G` (binary multiples).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, mult) = match s.char_indices().last() {
        Some((i, 'K' | 'k')) => (&s[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&s[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a byte count (e.g. 1048576, 64K, 64M, 1G)"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too large"))
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("{s:?} is not NAME=VALUE")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_parse_with_suffixes() {
        assert_eq!(parse_bytes("1048576"), Ok(1 << 20));
        assert_eq!(parse_bytes("64K"), Ok(64 << 10));
        assert_eq!(parse_bytes("2g"), Ok(2 << 30));
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("99999999999999G").is_err());
    }
}
