//! `warden sandbox-exec`: the confined tier's helper, entered by the
//! supervisor for every confined run (the server never restricts itself).
//!
//! It runs before any async runtime or thread exists: the helper forks.

use std::path::PathBuf;

use warden_core::confine::Policy;
use warden_exec::confine::{self, Exit, Record, Request, SetupFailure};

use crate::cli::SandboxExecArgs;

/// Runs the helper to its end; never returns.
pub fn main(args: SandboxExecArgs) -> ! {
    let policy = match load(&args) {
        Ok(p) => p,
        Err(e) => {
            let failure = SetupFailure::failed(e);
            eprintln!("warden sandbox-exec: {}", failure.detail);
            let record = Record::Failed(failure);
            confine::finish(record, args.status_file.as_deref())
                .unwrap_or(Exit::Code(125))
                .apply()
        }
    };
    if args.print_policy {
        match serde_json::to_string_pretty(&policy) {
            Ok(json) => println!("{json}"),
            Err(e) => eprintln!("warden sandbox-exec: {e}"),
        }
        Exit::Code(0).apply()
    }
    confine::run(Request {
        policy,
        status_file: args.status_file,
        started_file: args.started_file,
        argv: args.argv,
    })
    .apply()
}

/// The policy from `--profile` or `--policy` (inline JSON or a file).
fn load(args: &SandboxExecArgs) -> Result<Policy, String> {
    if let Some(profile) = args.profile {
        let ws = match &args.workspace {
            Some(w) => w.clone(),
            None => std::env::current_dir().map_err(|e| format!("current directory: {e}"))?,
        };
        let ws = ws
            .canonicalize()
            .map_err(|e| format!("workspace {}: {e}", ws.display()))?;
        return Ok(Policy::for_profile(profile, ws));
    }
    let Some(arg) = &args.policy else {
        return Err("give --policy FILE|JSON or --profile NAME".to_owned());
    };
    let (text, source) = if arg.trim_start().starts_with('{') {
        (arg.clone(), "--policy".to_owned())
    } else {
        let path = PathBuf::from(arg);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading policy file {}: {e}", path.display()))?;
        (text, path.display().to_string())
    };
    let de = &mut serde_json::Deserializer::from_str(&text);
    let policy: Policy = serde_path_to_error::deserialize(de)
        .map_err(|e| format!("{source}: invalid policy at `{}`: {}", e.path(), e.inner()))?;
    policy.validate().map_err(|e| format!("{source}: {e}"))?;
    Ok(policy)
}
