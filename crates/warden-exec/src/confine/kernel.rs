//! What this kernel offers the confined tier, read without confining anyone.

use serde::Serialize;
use warden_core::confine::{Network, Policy};

use super::sys;

/// Landlock ABI that handles every filesystem right the helper uses
/// (including device ioctls).
pub const LANDLOCK_FS_ABI: u32 = 5;
/// Landlock ABI that can deny TCP bind and connect.
pub const LANDLOCK_NET_ABI: u32 = 4;
/// Landlock ABI that scopes abstract Unix sockets and signals to the run.
pub const LANDLOCK_SCOPE_ABI: u32 = 6;

/// The kernel facts the confined tier depends on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Support {
    /// `uname -r`.
    pub kernel_release: String,
    /// The Landlock ABI version, `None` when Landlock is off or absent.
    pub landlock_abi: Option<u32>,
    /// Whether this user may create user namespaces (sysctls allow it).
    pub user_namespaces: bool,
    /// Whether seccomp filters are available.
    pub seccomp_filter: bool,
}

impl Support {
    /// Reads the facts of the running kernel.
    pub fn probe() -> Self {
        Self {
            kernel_release: nix::sys::utsname::uname()
                .map(|u| u.release().to_string_lossy().into_owned())
                .unwrap_or_default(),
            landlock_abi: sys::landlock_abi(),
            user_namespaces: user_namespaces_allowed(),
            // Present exactly when the kernel has seccomp filters.
            seccomp_filter: std::path::Path::new("/proc/sys/kernel/seccomp/actions_avail").exists(),
        }
    }

    /// The facts as first read by this process: they change only with a
    /// reboot or a sysctl, and the helper checks them again for each run.
    pub fn cached() -> &'static Self {
        static SUPPORT: std::sync::OnceLock<Support> = std::sync::OnceLock::new();
        SUPPORT.get_or_init(Self::probe)
    }

    /// Every feature `policy` asks for that this kernel lacks, each named
    /// so the operator knows what to change. Empty means the policy can be
    /// enforced in full.
    pub fn missing_for(&self, policy: &Policy) -> Vec<String> {
        let mut missing = Vec::new();
        let abi = self.landlock_abi.unwrap_or(0);
        let have = match self.landlock_abi {
            Some(v) => format!("this kernel has ABI {v}"),
            None => {
                "Landlock is not enabled in this kernel (add `landlock` to the lsm= boot parameter)"
                    .to_owned()
            }
        };
        if abi < LANDLOCK_FS_ABI {
            missing.push(format!(
                "Landlock filesystem rules need Landlock ABI {LANDLOCK_FS_ABI}; {have}"
            ));
        }
        if policy.network == Network::None && abi < LANDLOCK_NET_ABI {
            missing.push(format!(
                "denying TCP bind/connect needs Landlock ABI {LANDLOCK_NET_ABI}; {have}"
            ));
        }
        if abi < LANDLOCK_SCOPE_ABI {
            missing.push(format!(
                "scoping signals and abstract Unix sockets needs Landlock ABI {LANDLOCK_SCOPE_ABI}; {have}"
            ));
        }
        if policy.namespaces.user && !self.user_namespaces {
            missing.push(
                "user namespaces are disabled (user.max_user_namespaces is 0 or kernel.unprivileged_userns_clone is 0)"
                    .to_owned(),
            );
        }
        if !self.seccomp_filter {
            missing.push("seccomp filters are not available in this kernel".to_owned());
        }
        missing
    }
}

fn read_sysctl(path: &str) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn user_namespaces_allowed() -> bool {
    if read_sysctl("/proc/sys/user/max_user_namespaces") == Some(0) {
        return false;
    }
    // Debian's switch; root may create them regardless.
    let unprivileged = read_sysctl("/proc/sys/kernel/unprivileged_userns_clone") != Some(0);
    unprivileged || nix::unistd::geteuid().is_root()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use warden_core::confine::Profile;

    use super::*;

    fn support(abi: Option<u32>, userns: bool) -> Support {
        Support {
            kernel_release: "test".into(),
            landlock_abi: abi,
            user_namespaces: userns,
            seccomp_filter: true,
        }
    }

    #[test]
    fn each_missing_feature_is_named() {
        let policy = Policy::for_profile(Profile::Edit, PathBuf::from("/w"));
        assert!(support(Some(7), true).missing_for(&policy).is_empty());
        let missing = support(Some(3), false).missing_for(&policy).join("\n");
        assert!(
            missing.contains("ABI 5; this kernel has ABI 3"),
            "{missing}"
        );
        assert!(
            missing.contains("denying TCP bind/connect needs Landlock ABI 4"),
            "{missing}"
        );
        assert!(
            missing.contains("user namespaces are disabled"),
            "{missing}"
        );
        let none = support(None, true).missing_for(&policy).join("\n");
        assert!(none.contains("Landlock is not enabled"), "{none}");
    }
}
