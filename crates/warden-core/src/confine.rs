//! The confined tier's policy: what the operating system lets a run touch.
//!
//! Pure data. `warden-exec` enforces it (namespaces, Landlock, seccomp,
//! rlimits) in the `warden sandbox-exec` helper; the binary builds it from
//! an instance's tier and profile. A policy asks for features; a kernel that
//! lacks one makes the run fail, never run with less.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::CoreError;

/// The named profiles an instance can choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// Read-write workspace, private scratch, no network, processes allowed.
    Edit,
    /// Read-only workspace, private scratch, no network, no new processes.
    Test,
    /// Read-only workspace, private scratch, no network, processes allowed.
    Readonly,
}

impl Profile {
    /// Every profile, in the order documentation lists them.
    pub const ALL: [Profile; 3] = [Profile::Edit, Profile::Test, Profile::Readonly];

    /// The profile's name as written in config.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Edit => "edit",
            Self::Test => "test",
            Self::Readonly => "readonly",
        }
    }

    /// Parses a profile name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// Read-only or read-write access to a directory tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FsAccess {
    ReadOnly,
    ReadWrite,
}

/// Whether the run may use the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// No network: a new network namespace, TCP bind/connect denied by
    /// Landlock, Unix-domain sockets refused by seccomp.
    None,
    /// The host's network, unrestricted.
    Host,
}

/// Which namespaces the helper enters. A policy that asks for a namespace
/// the kernel cannot create fails the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Namespaces {
    pub user: bool,
    pub mount: bool,
    pub pid: bool,
    pub ipc: bool,
    pub net: bool,
}

/// Resource limits (`setrlimit`); `None` leaves the inherited limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// RLIMIT_NPROC. The kernel does not apply it to root; the `test`
    /// profile's no-new-processes rule is enforced by seccomp instead.
    #[serde(default)]
    pub processes: Option<u64>,
    /// RLIMIT_FSIZE, bytes.
    #[serde(default)]
    pub file_size: Option<u64>,
    /// RLIMIT_AS, bytes.
    #[serde(default)]
    pub address_space: Option<u64>,
    /// RLIMIT_CPU, seconds.
    #[serde(default)]
    pub cpu_seconds: Option<u64>,
}

/// A private scratch directory: a tmpfs only this run sees, also its `HOME`
/// and `TMPDIR`; it disappears with the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scratch {
    /// The tmpfs size limit.
    pub max_bytes: u64,
}

/// Everything the confined tier enforces on one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// The profile this policy was built from (recorded for audit and cards).
    pub profile: Profile,
    /// The workspace directory (absolute).
    pub workspace: PathBuf,
    /// How the run may use the workspace.
    pub workspace_access: FsAccess,
    /// Extra directories readable (and executable) beyond the system paths.
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
    /// Extra directories writable beyond the workspace and scratch.
    #[serde(default)]
    pub read_write: Vec<PathBuf>,
    /// A private scratch directory, if any.
    pub scratch: Option<Scratch>,
    pub network: Network,
    /// `false` denies `fork`, `vfork` and `clone` of new processes (threads
    /// stay allowed).
    pub new_processes: bool,
    pub namespaces: Namespaces,
    #[serde(default)]
    pub limits: Limits,
}

/// Which tier an instance's runs execute in.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "tier", rename_all = "snake_case")]
pub enum Isolation {
    /// Processes of the host, bounded by the supervisor only.
    #[default]
    Host,
    /// Held by the kernel: namespaces, Landlock, seccomp, rlimits.
    Confined(Policy),
    /// Inside a container of a container engine that answered at start-up.
    Container(ContainerSpec),
}

impl Isolation {
    /// The tier's name, as in config and capabilities.
    pub fn tier(&self) -> &'static str {
        match self {
            Self::Host => "host",
            Self::Confined(_) => "confined",
            Self::Container(_) => "container",
        }
    }
}

/// How a container-tier run is started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerSpec {
    /// The engine's client (`docker` or `podman`), as resolved at start-up.
    pub engine: PathBuf,
    /// The image the commands run in.
    pub image: String,
    /// Mounted at the same path inside.
    pub workspace: PathBuf,
    pub workspace_access: FsAccess,
}

impl ContainerSpec {
    /// The engine argv that runs `argv` in `cwd` as container `name`: no
    /// network, a read-only root, a private `/tmp`, the workspace mounted,
    /// the caller's ids.
    pub fn argv(&self, name: &str, cwd: &Path, argv: &[String], uid: u32, gid: u32) -> Vec<String> {
        let ws = self.workspace.display().to_string();
        let mode = match self.workspace_access {
            FsAccess::ReadOnly => "ro",
            FsAccess::ReadWrite => "rw",
        };
        let mut out = vec![
            self.engine.display().to_string(),
            "run".into(),
            "--rm".into(),
            format!("--name={name}"),
            // Never fetch an image behind the operator's back.
            "--pull=never".into(),
            "--init".into(),
            "--interactive".into(),
            "--network=none".into(),
            "--read-only".into(),
            "--tmpfs=/tmp".into(),
            "--cap-drop=ALL".into(),
            "--security-opt=no-new-privileges".into(),
            format!("--user={uid}:{gid}"),
            format!("--volume={ws}:{ws}:{mode}"),
            format!("--workdir={}", cwd.display()),
            self.image.clone(),
        ];
        out.extend(argv.iter().cloned());
        out
    }
}

/// Default scratch size: enough for test caches, small enough for memory.
pub const DEFAULT_SCRATCH_BYTES: u64 = 256 * 1024 * 1024;

const GIB: u64 = 1024 * 1024 * 1024;

impl Policy {
    /// The policy a named profile gives a workspace.
    pub fn for_profile(profile: Profile, workspace: PathBuf) -> Self {
        let (workspace_access, new_processes) = match profile {
            Profile::Edit => (FsAccess::ReadWrite, true),
            Profile::Test => (FsAccess::ReadOnly, false),
            Profile::Readonly => (FsAccess::ReadOnly, true),
        };
        Self {
            profile,
            workspace,
            workspace_access,
            read_only: Vec::new(),
            read_write: Vec::new(),
            scratch: Some(Scratch {
                max_bytes: DEFAULT_SCRATCH_BYTES,
            }),
            network: Network::None,
            new_processes,
            namespaces: Namespaces {
                user: true,
                mount: true,
                pid: true,
                ipc: true,
                net: true,
            },
            limits: Limits {
                processes: Some(1024),
                file_size: Some(4 * GIB),
                address_space: Some(64 * GIB),
                cpu_seconds: None,
            },
        }
    }

    /// Every tree the policy lets the run write (the scratch excepted: it is
    /// a fresh tmpfs).
    pub fn writable(&self) -> impl Iterator<Item = &Path> {
        self.read_write.iter().map(PathBuf::as_path).chain(
            (self.workspace_access == FsAccess::ReadWrite).then_some(self.workspace.as_path()),
        )
    }

    /// Checks the policy's own consistency; the error names the field.
    pub fn validate(&self) -> Result<(), CoreError> {
        // (Paths a run may write are checked against what the supervisor
        // protects when it spawns, see `warden-exec`.)
        let absolute = |field: &'static str, p: &Path| {
            if p.is_absolute() {
                Ok(())
            } else {
                Err(CoreError::field(field, "must be an absolute path"))
            }
        };
        absolute("policy.workspace", &self.workspace)?;
        if !self.namespaces.mount {
            return Err(CoreError::field(
                "policy.namespaces.mount",
                "must be true: the run's view of every tree but the writable ones is read-only, and that view is a mount namespace",
            ));
        }
        if self.writable().any(|p| p == Path::new("/")) {
            return Err(CoreError::field(
                "policy",
                "\"/\" cannot be a writable tree; name the directories the run may write",
            ));
        }
        for p in &self.read_only {
            absolute("policy.read_only", p)?;
        }
        for p in &self.read_write {
            absolute("policy.read_write", p)?;
        }
        if self.scratch.is_some() && !self.namespaces.mount {
            return Err(CoreError::field(
                "policy.scratch",
                "needs namespaces.mount (the scratch tmpfs is mounted in the run's own mount namespace)",
            ));
        }
        if self.namespaces.pid && !self.namespaces.mount {
            return Err(CoreError::field(
                "policy.namespaces.pid",
                "needs namespaces.mount (the run gets its own /proc)",
            ));
        }
        if (self.namespaces.mount
            || self.namespaces.pid
            || self.namespaces.ipc
            || self.namespaces.net)
            && !self.namespaces.user
        {
            return Err(CoreError::field(
                "policy.namespaces.user",
                "must be true when any other namespace is asked for (they are created unprivileged, owned by the run's user namespace)",
            ));
        }
        if self.network == Network::None && !self.namespaces.net {
            return Err(CoreError::field(
                "policy.namespaces.net",
                "must be true when network is none (Landlock governs TCP only; the namespace holds UDP and everything else)",
            ));
        }
        if self.network == Network::Host && self.namespaces.net {
            return Err(CoreError::field(
                "policy.network",
                "host contradicts namespaces.net = true",
            ));
        }
        if self.scratch.is_some_and(|s| s.max_bytes == 0) {
            return Err(CoreError::field(
                "policy.scratch.max_bytes",
                "must be positive",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_differ_where_the_issue_says() {
        let ws = PathBuf::from("/w");
        let edit = Policy::for_profile(Profile::Edit, ws.clone());
        let test = Policy::for_profile(Profile::Test, ws.clone());
        let ro = Policy::for_profile(Profile::Readonly, ws);
        assert_eq!(edit.workspace_access, FsAccess::ReadWrite);
        assert!(edit.new_processes);
        assert_eq!(test.workspace_access, FsAccess::ReadOnly);
        assert!(!test.new_processes);
        assert_eq!(ro.workspace_access, FsAccess::ReadOnly);
        assert!(ro.new_processes);
        for p in [&edit, &test, &ro] {
            assert_eq!(p.network, Network::None);
            assert!(p.scratch.is_some());
            p.validate().unwrap();
        }
    }

    #[test]
    fn validation_names_the_field() {
        /// Whether validation refuses `p`, naming `field`.
        fn refused(p: &Policy, field: &str) -> bool {
            p.validate().is_err_and(|e| e.to_string().contains(field))
        }
        let mut p = Policy::for_profile(Profile::Edit, PathBuf::from("rel"));
        assert!(refused(&p, "policy.workspace"));
        p.workspace = PathBuf::from("/w");
        p.namespaces.user = false;
        assert!(refused(&p, "namespaces.user"));
        p.namespaces.user = true;
        p.namespaces.mount = false;
        assert!(refused(&p, "namespaces.mount"));
        p.namespaces.mount = true;
        p.namespaces.net = false;
        assert!(refused(&p, "namespaces.net"));
        p.namespaces.net = true;
        p.read_write.push(PathBuf::from("/"));
        assert!(refused(&p, "writable tree"));
    }

    #[test]
    fn json_round_trip_and_unknown_fields_refused() {
        let p = Policy::for_profile(Profile::Test, PathBuf::from("/w"));
        let json = serde_json::to_string(&p).unwrap();
        let back: Policy = serde_json::from_str(&json).unwrap();
        assert_eq!(back, p);
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v["netwrok"] = serde_json::json!("host");
        assert!(serde_json::from_value::<Policy>(v).is_err());
    }
}
