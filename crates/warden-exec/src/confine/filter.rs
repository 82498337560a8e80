//! The seccomp filters of a policy: system calls a confined run never
//! needs (namespace escapes, tracing, mounts, kernel modules, keyrings),
//! and, when the policy says so, new processes and Unix-domain sockets.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};
use warden_core::confine::{Network, Policy};

/// Always refused with EPERM, whatever the profile.
const DENIED: &[(&str, libc::c_long)] = &[
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("keyctl", libc::SYS_keyctl),
    ("bpf", libc::SYS_bpf),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("acct", libc::SYS_acct),
    ("syslog", libc::SYS_syslog),
    ("quotactl", libc::SYS_quotactl),
    // io_uring performs operations (opening sockets among them) that the
    // filter never sees as system calls.
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
];

/// `clone` flags that create namespaces; refused whatever the profile.
const NAMESPACE_FLAGS: [u64; 7] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
];

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value).map_err(|e| e.to_string())
}

/// A condition on an `int` argument: only the low 32 bits count (the kernel
/// truncates), so a caller cannot dodge an `Eq` by setting the high bits.
fn cond_int(arg: u8, value: u32) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value.into())
        .map_err(|e| e.to_string())
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|e| e.to_string())
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    action: SeccompAction,
) -> Result<BpfProgram, String> {
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| format!("seccomp: {e}"))?;
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, action, arch)
        .map_err(|e| format!("seccomp: {e}"))?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| format!("seccomp: {e}"))
}

/// The filters for `policy`, in the order they are installed.
pub(crate) fn build(policy: &Policy) -> Result<Vec<BpfProgram>, String> {
    let eperm = SeccompAction::Errno(libc::EPERM as u32);
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|&(_, nr)| (nr, Vec::new())).collect();
    rules.insert(SYS_OPEN_TREE_ATTR, Vec::new());

    let mut clone_rules = Vec::new();
    for flag in NAMESPACE_FLAGS {
        clone_rules.push(rule(vec![cond(0, SeccompCmpOp::MaskedEq(flag), flag)?])?);
    }
    if !policy.new_processes {
        // A clone without CLONE_THREAD is a new process; threads stay allowed.
        let thread = libc::CLONE_THREAD as u64;
        clone_rules.push(rule(vec![cond(0, SeccompCmpOp::MaskedEq(thread), 0)?])?);
        #[cfg(target_arch = "x86_64")]
        {
            rules.insert(libc::SYS_fork, Vec::new());
            rules.insert(libc::SYS_vfork, Vec::new());
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        // Direct port I/O.
        rules.insert(libc::SYS_iopl, Vec::new());
        rules.insert(libc::SYS_ioperm, Vec::new());
    }
    rules.insert(libc::SYS_clone, clone_rules);
    // Typing into a terminal (TIOCSTI) or its console (TIOCLINUX) would
    // reach a shell outside the sandbox.
    rules.insert(
        libc::SYS_ioctl,
        vec![
            rule(vec![cond_int(1, libc::TIOCSTI as u32)?])?,
            rule(vec![cond_int(1, libc::TIOCLINUX as u32)?])?,
        ],
    );
    if policy.network == Network::None {
        // Landlock at this kernel's ABI does not govern connecting to a Unix
        // socket by path (a host daemon's socket is reachable by name); a
        // run without network gets none. `socketpair` stays allowed.
        rules.insert(
            libc::SYS_socket,
            vec![rule(vec![cond_int(0, libc::AF_UNIX as u32)?])?],
        );
    }
    let main = compile(rules, eperm)?;

    // clone3 passes its flags in memory a filter cannot read: answer ENOSYS
    // so the C library falls back to clone, whose flags the filter checks.
    let clone3 = compile(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Errno(libc::ENOSYS as u32),
    )?;
    let mut filters = vec![main, clone3];
    filters.extend(x32_filter());
    Ok(filters)
}

/// `open_tree_attr` (Linux 6.15): clones a mount tree with changed
/// attributes, a way around the read-only view. The same number on every
/// architecture (new calls share one table since 424).
const SYS_OPEN_TREE_ATTR: i64 = 467;

/// The first system call number this filter does not know: newer calls
/// answer ENOSYS (as on an older kernel) until they are reviewed here.
#[cfg(target_arch = "x86_64")]
const FIRST_UNKNOWN_SYSCALL: u32 = 468;

/// On x86_64 a system call number with bit 30 set is the same call through
/// the x32 ABI, which the number-keyed filters above would not recognise:
/// refuse every such number. Numbers past the last reviewed call answer
/// ENOSYS.
#[cfg(target_arch = "x86_64")]
fn x32_filter() -> Option<BpfProgram> {
    use seccompiler::sock_filter;
    // BPF_LD | BPF_W | BPF_ABS, BPF_JMP | BPF_JGE | BPF_K, BPF_RET | BPF_K
    // (linux/bpf_common.h; BPF_LD, BPF_W and BPF_K are 0).
    const BPF_LD_W_ABS: u16 = 0x20;
    const BPF_JGE_K: u16 = 0x05 | 0x30;
    const BPF_RET_K: u16 = 0x06;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    let errno = |e: i32| libc::SECCOMP_RET_ERRNO | e as u32;
    Some(vec![
        // The arch was checked by the first filter (others are killed).
        op(BPF_LD_W_ABS, 0, 0, 0), // seccomp_data.nr
        op(BPF_JGE_K, 0, 1, X32_SYSCALL_BIT),
        op(BPF_RET_K, 0, 0, errno(libc::EPERM)),
        op(BPF_JGE_K, 0, 1, FIRST_UNKNOWN_SYSCALL),
        op(BPF_RET_K, 0, 0, errno(libc::ENOSYS)),
        op(BPF_RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ])
}

#[cfg(not(target_arch = "x86_64"))]
fn x32_filter() -> Option<BpfProgram> {
    None
}

/// Installs `filters` on the calling thread (no_new_privs must be set).
pub(crate) fn install(filters: &[BpfProgram]) -> Result<(), String> {
    for f in filters {
        seccompiler::apply_filter(f).map_err(|e| format!("seccomp: install: {e}"))?;
    }
    Ok(())
}

/// Names of the always-denied calls, for documentation and certificates.
pub fn denied_calls() -> Vec<&'static str> {
    let mut names: Vec<&str> = DENIED.iter().map(|&(n, _)| n).collect();
    names.push("open_tree_attr");
    names
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use warden_core::confine::Profile;

    use super::*;

    #[test]
    fn every_profile_compiles() {
        for profile in Profile::ALL {
            let policy = Policy::for_profile(profile, PathBuf::from("/w"));
            let filters = build(&policy).unwrap();
            assert_eq!(filters.len(), 2 + usize::from(cfg!(target_arch = "x86_64")));
            assert!(!filters[0].is_empty());
        }
    }

    #[test]
    fn refusing_new_processes_makes_the_filter_longer() {
        let edit = build(&Policy::for_profile(Profile::Edit, PathBuf::from("/w"))).unwrap();
        let test = build(&Policy::for_profile(Profile::Test, PathBuf::from("/w"))).unwrap();
        assert!(test[0].len() > edit[0].len());
    }
}
