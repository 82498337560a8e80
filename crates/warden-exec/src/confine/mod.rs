//! The confined tier: runs held by the operating system, not by politeness.
//!
//! The supervisor never restricts itself. A confined run is spawned as
//! `warden sandbox-exec --policy <json> --status-file <file> -- PROGRAM ARGS`
//! ([`helper_argv`]); the helper ([`sandbox::run`]) sets `no_new_privs`,
//! enters new user, mount, PID, IPC and network namespaces, applies rlimits,
//! Landlock ([`rules`]) and seccomp ([`filter`]), closes inherited
//! descriptors and execs the target. A kernel that lacks a feature the
//! policy asks for fails the run ([`Support::missing_for`]); there is no
//! unconfined fallback.

mod filter;
mod kernel;
mod record;
mod rules;
mod sandbox;
mod sys;

use std::ffi::OsString;
use std::path::Path;

pub use filter::denied_calls;
pub use kernel::{LANDLOCK_FS_ABI, LANDLOCK_NET_ABI, LANDLOCK_SCOPE_ABI, Support};
pub use record::{Record, SetupFailure, private_dir};
pub use sandbox::{Exit, Request, finish, run};
use warden_core::confine::Policy;

/// The subcommand of the warden binary that is the helper.
pub const HELPER_SUBCOMMAND: &str = "sandbox-exec";

/// The argv that runs `program` (already resolved) with `args` confined by
/// `policy` through `helper`.
pub fn helper_argv(
    helper: &Path,
    policy: &Policy,
    status_file: &Path,
    started_file: Option<&Path>,
    program: &Path,
    args: &[String],
) -> Result<Vec<OsString>, serde_json::Error> {
    let mut argv: Vec<OsString> = vec![
        helper.into(),
        HELPER_SUBCOMMAND.into(),
        "--policy".into(),
        serde_json::to_string(policy)?.into(),
        "--status-file".into(),
        status_file.into(),
    ];
    if let Some(f) = started_file {
        argv.extend(["--started-file".into(), f.into()]);
    }
    argv.extend(["--".into(), program.into()]);
    argv.extend(args.iter().map(OsString::from));
    Ok(argv)
}
