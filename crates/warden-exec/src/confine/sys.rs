//! The system calls the helper needs that have no safe wrapper.
//!
//! Everything unsafe in the confined tier is here, each with why it is sound.
#![allow(unsafe_code)]

use nix::unistd::{ForkResult, fork as nix_fork};

/// Forks the helper. Sound only while the process has one thread (after a
/// fork only the calling thread exists, so a lock another thread held would
/// never be released); `ensure_single_threaded` is checked by the caller
/// before the first fork, and the helper never starts a thread.
pub(crate) fn fork() -> nix::Result<ForkResult> {
    // SAFETY: the helper is single-threaded (checked by the caller), so the
    // child inherits no lock held by another thread.
    unsafe { nix_fork() }
}

/// The kernel's Landlock ABI version; `None` when Landlock is not built in
/// or not enabled at boot. (The landlock crate only reports this after a
/// restriction, and the supervisor must ask without restricting itself.)
pub(crate) fn landlock_abi() -> Option<u32> {
    const LANDLOCK_CREATE_RULESET_VERSION: nix::libc::c_long = 1;
    // SAFETY: landlock_create_ruleset with a null attribute pointer, size 0
    // and the VERSION flag reads nothing from memory and returns a number.
    let v = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).ok().filter(|&v| v > 0)
}

/// Restores the default action of `sig`. Rust's runtime ignores `SIGPIPE`
/// (an ignored disposition survives `execve`, and the target must start as
/// any program does) and handles `SIGSEGV` and `SIGBUS` (the helper must
/// die of the signal its target died of).
pub(crate) fn default_signal(sig: nix::sys::signal::Signal) -> nix::Result<()> {
    use nix::sys::signal::{SigHandler, signal};
    // SAFETY: installing SIG_DFL sets no handler code, so no
    // async-signal-safety requirement applies.
    unsafe { signal(sig, SigHandler::SigDfl) }.map(|_| ())
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;

/// Makes the mount at `path` read-only (`readonly`) or writable, and with
/// `recursive` every mount below it too, leaving its other flags alone
/// (remounting through `mount(2)` would have to restate flags that are
/// locked in a user namespace). Linux 5.12+.
pub(crate) fn mount_setattr_readonly(
    path: &std::path::Path,
    readonly: bool,
    recursive: bool,
) -> nix::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path =
        std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| nix::Error::EINVAL)?;
    let attr = MountAttr {
        attr_set: if readonly { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: if readonly { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive {
        nix::libc::AT_RECURSIVE
    } else {
        0
    };
    // SAFETY: `path` is a valid NUL-terminated string and `attr` a valid
    // `struct mount_attr` whose size is passed; the kernel only reads them.
    let r = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_mount_setattr,
            nix::libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    nix::errno::Errno::result(r).map(drop)
}
