//! The three system calls the helper needs that have no safe wrapper.
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

/// Restores the default action of `SIGPIPE`, which Rust's runtime set to
/// "ignore" at start-up; an ignored disposition survives `execve`, and the
/// target must start as any program does.
pub(crate) fn default_sigpipe() -> nix::Result<()> {
    use nix::sys::signal::{SigHandler, Signal, signal};
    // SAFETY: installing SIG_DFL sets no handler code, so no
    // async-signal-safety requirement applies.
    unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) }.map(|_| ())
}
