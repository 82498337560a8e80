//! The Landlock ruleset of a policy: which trees the run may read, write
//! and execute, and that it may not bind or connect TCP sockets.
//!
//! Every right is requested as a hard requirement: a kernel that cannot
//! enforce one makes the helper fail, never run with less.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use warden_core::confine::{FsAccess, Network, Policy};

/// System trees every confined run may read and execute.
const SYSTEM_READ: [&str; 9] = [
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/sys/devices/system/cpu",
];

/// What a program needs from `/etc` to start, resolve names and verify
/// certificates. `/etc` as a whole is not readable: it holds `shadow`,
/// `ssh` host keys and the like.
const ETC_READ: [&str; 33] = [
    "alternatives",
    "bash.bashrc",
    "ca-certificates",
    "ca-certificates.conf",
    "debian_version",
    "environment",
    "fonts",
    "gai.conf",
    "group",
    "host.conf",
    "hostname",
    "hosts",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "locale.conf",
    "localtime",
    "magic",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "pki",
    "profile",
    "profile.d",
    "protocols",
    "resolv.conf",
    "services",
    "shells",
    "ssl",
    "timezone",
];

/// Device files a program may open for reading and writing. Not `/dev/tty`:
/// that is the supervisor's terminal when it has one.
const DEVICES: [&str; 5] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// The ABI whose filesystem rights the helper handles.
const FS_ABI: ABI = ABI::V5;

fn read_rights() -> BitFlags<AccessFs> {
    AccessFs::from_read(FS_ABI)
}

fn all_rights() -> BitFlags<AccessFs> {
    AccessFs::from_all(FS_ABI)
}

/// Restricts the calling process (and everything it execs) to `policy`.
pub(crate) fn restrict(policy: &Policy, scratch: Option<&Path>) -> Result<(), String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("landlock: {what}: {e}");
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all_rights())
        .map_err(|e| fail("filesystem rights", &e))?;
    if policy.network == Network::None {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(|e| fail("TCP rights", &e))?;
    }
    let ruleset = ruleset
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(|e| fail("scopes", &e))?;
    let mut created = ruleset.create().map_err(|e| fail("create", &e))?;

    // Optional trees: absent ones are skipped (not every system has /lib32).
    let system: Vec<PathBuf> = SYSTEM_READ
        .iter()
        .map(PathBuf::from)
        .chain(ETC_READ.iter().map(|e| Path::new("/etc").join(e)))
        .collect();
    created = created
        .add_rules(path_beneath_rules(&system, read_rights()))
        .map_err(|e| fail("system paths", &e))?
        .add_rules(path_beneath_rules(
            DEVICES,
            AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev,
        ))
        .map_err(|e| fail("devices", &e))?;

    // Paths the policy names must exist: a missing workspace is an error,
    // not a silently smaller sandbox.
    let mut named: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
    named.extend(policy.read_only.iter().map(|p| (p.clone(), read_rights())));
    named.extend(policy.read_write.iter().map(|p| (p.clone(), all_rights())));
    named.push((
        policy.workspace.clone(),
        match policy.workspace_access {
            FsAccess::ReadOnly => read_rights(),
            FsAccess::ReadWrite => all_rights(),
        },
    ));
    if let Some(s) = scratch {
        named.push((s.to_path_buf(), all_rights()));
    }
    for (path, rights) in named {
        let fd = PathFd::new(&path).map_err(|e| fail(&path.display().to_string(), &e))?;
        let rights = if path.is_dir() {
            rights
        } else {
            rights & AccessFs::from_file(FS_ABI)
        };
        created = created
            .add_rule(PathBeneath::new(fd, rights))
            .map_err(|e| fail(&path.display().to_string(), &e))?;
    }

    let status = created
        .restrict_self()
        .map_err(|e| fail("restrict_self", &e))?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(format!(
            "landlock: the kernel enforced the ruleset only partly ({:?})",
            status.ruleset
        ));
    }
    if !status.no_new_privs {
        return Err("landlock: no_new_privs was not set".to_owned());
    }
    Ok(())
}
