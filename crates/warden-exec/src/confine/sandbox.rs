//! `warden sandbox-exec`: enters the policy's namespaces, applies rlimits,
//! Landlock and seccomp, and execs the target.
//!
//! Three processes take part. The helper itself stays in the supervisor's
//! PID namespace and relays how the target ended (exit code or signal), so
//! the supervisor sees what it would see on the host tier. Its child is
//! PID 1 of the run's PID namespace: it mounts the run's own `/proc`, reaps,
//! and reports; when it exits the kernel kills whatever the target left
//! behind. The grandchild restricts itself and execs the target. Setup
//! failures travel back on a close-on-exec pipe, so the helper knows
//! whether the target ever started, and are written to a status file the
//! confined run cannot reach.

use std::ffi::{CString, OsString};
use std::fs;
use std::io::{BufRead, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, raise, sigprocmask};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, execve, getgid, getppid, getuid, pipe2};
use seccompiler::BpfProgram;
use warden_core::confine::Policy;

use super::record::{Record, SetupFailure};
use super::{filter, kernel::Support, rules, sys};

/// What to run and under which policy.
#[derive(Debug, Clone)]
pub struct Request {
    pub policy: Policy,
    /// Where a setup failure is recorded for the supervisor.
    pub status_file: Option<PathBuf>,
    /// Written (`started`) once the target has been exec'd: a mission is
    /// started only then, not when the helper is.
    pub started_file: Option<PathBuf>,
    /// The target: program (resolved on PATH when it has no `/`) and arguments.
    pub argv: Vec<OsString>,
}

/// How the helper must end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    /// The target died of this signal; the helper dies of it too.
    Signal(Signal),
}

impl Exit {
    /// Ends the helper the way the target ended.
    pub fn apply(self) -> ! {
        match self {
            Exit::Code(c) => std::process::exit(c),
            Exit::Signal(sig) => {
                // No core file of the helper: the target's death is relayed,
                // not the helper's.
                let _ = setrlimit(Resource::RLIMIT_CORE, 0, 0);
                let _ = sys::default_signal(sig);
                let mut set = SigSet::empty();
                set.add(sig);
                let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&set), None);
                let _ = raise(sig);
                std::process::exit(128 + sig as i32)
            }
        }
    }
}

/// Runs the helper; returns how it must end.
pub fn run(req: Request) -> Exit {
    close_inherited_fds();
    // Opened first: once the namespaces are entered the whole filesystem is
    // read-only to the helper too.
    let file = match req.status_file.as_deref().map(Record::create).transpose() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("warden sandbox-exec: cannot create its setup record: {e}");
            return Exit::Code(125);
        }
    };
    let started = match req.started_file.as_deref().map(Record::create).transpose() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("warden sandbox-exec: cannot create its started file: {e}");
            return Exit::Code(125);
        }
    };
    let result = helper(&req, started);
    let record = match &result {
        Ok(_) => Record::Ran,
        Err(f) => Record::Failed(f.clone()),
    };
    if let Some(file) = file
        && let Err(e) = record.write_to(file)
    {
        eprintln!("warden sandbox-exec: cannot write its setup record: {e}");
        return Exit::Code(125);
    }
    match result {
        Ok(exit) => exit,
        Err(f) => {
            eprintln!("warden sandbox-exec: {}", f.detail);
            Exit::Code(f.exit_code())
        }
    }
}

/// Writes the record for the supervisor; `Some` (exit 125) when it cannot,
/// so the supervisor finds no record and says the helper failed.
pub fn finish(record: Record, status_file: Option<&Path>) -> Option<Exit> {
    let path = status_file?;
    match record.write(path) {
        Ok(()) => None,
        Err(e) => {
            eprintln!(
                "warden sandbox-exec: cannot record how setup went in {}: {e}",
                path.display()
            );
            Some(Exit::Code(125))
        }
    }
}

/// The id root runs as inside its user namespace: any non-zero id does.
const UNPRIVILEGED_ID: u32 = 1000;

/// Everything the target's exec needs, prepared before any fork.
struct Target {
    program: CString,
    argv: Vec<CString>,
    env: Vec<CString>,
    filters: Vec<BpfProgram>,
}

fn helper(req: &Request, started: Option<fs::File>) -> Result<Exit, SetupFailure> {
    ensure_single_threaded()?;
    let policy = &req.policy;
    policy
        .validate()
        .map_err(|e| SetupFailure::failed(format!("invalid policy: {e}")))?;
    let missing = Support::probe().missing_for(policy);
    if !missing.is_empty() {
        return Err(SetupFailure::unavailable(format!(
            "this host cannot enforce the policy: {}",
            missing.join("; ")
        )));
    }
    let scratch = match policy.scratch {
        Some(_) => Some(ScratchDir::create()?),
        None => None,
    };
    let target = prepare(req, scratch.as_ref().map(|s| s.path.as_path()))?;
    let (report_rx, report_tx) =
        pipe2(OFlag::O_CLOEXEC).map_err(|e| SetupFailure::failed(format!("pipe: {e}")))?;

    // Signals for the run reach the target through its process group; the
    // helper and init must outlive the target to report how it ended.
    let mut relayed = SigSet::empty();
    for s in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
    ] {
        relayed.add(s);
    }
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&relayed), None)
        .map_err(|e| SetupFailure::failed(format!("sigprocmask: {e}")))?;

    enter_namespaces(policy, scratch.as_ref())?;
    // The working directory still names the mount it was entered on; look
    // it up again so a writable workspace is the writable bind mount.
    if let Ok(cwd) = std::env::current_dir() {
        std::env::set_current_dir(&cwd)
            .map_err(|e| SetupFailure::failed(format!("entering {} again: {e}", cwd.display())))?;
    }
    let helper_pid = nix::unistd::getpid();
    match sys::fork().map_err(|e| SetupFailure::failed(format!("fork: {e}")))? {
        ForkResult::Child => {
            drop(report_rx);
            let code = init(policy, helper_pid, &target, scratch.as_ref(), report_tx);
            std::process::exit(code)
        }
        ForkResult::Parent { child } => {
            drop(report_tx);
            relay(report_rx, child, started)
        }
    }
}

/// Reads init's report (passing `started` on as it comes), then reaps init.
fn relay(report: OwnedFd, init: Pid, mut started: Option<fs::File>) -> Result<Exit, SetupFailure> {
    let mut text = String::new();
    let mut lines = std::io::BufReader::new(fs::File::from(report));
    let mut line = String::new();
    while matches!(lines.read_line(&mut line), Ok(n) if n > 0) {
        if line.trim_end() == "started" {
            if let Some(f) = started.as_mut() {
                let _ = f.write_all(b"started\n");
            }
        } else {
            text.push_str(&line);
        }
        line.clear();
    }
    while let Err(Errno::EINTR) = waitpid(init, None) {}
    // A setup failure outranks the exit status init reports after it.
    let line = text
        .lines()
        .find(|l| l.starts_with("setup "))
        .or_else(|| text.lines().last())
        .unwrap_or_default();
    let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
    match kind {
        "exit" => rest
            .parse()
            .map(Exit::Code)
            .map_err(|_| SetupFailure::failed(format!("init reported {line:?}"))),
        "signal" => rest
            .parse::<i32>()
            .ok()
            .and_then(|n| Signal::try_from(n).ok())
            .map(Exit::Signal)
            .ok_or_else(|| SetupFailure::failed(format!("init reported {line:?}"))),
        "setup" => {
            let (reason, detail) = rest.split_once(' ').unwrap_or((rest, ""));
            Err(SetupFailure::new(reason, detail))
        }
        _ => Err(SetupFailure::failed(
            "the sandbox's init ended without reporting how the program ended",
        )),
    }
}

/// Writes one line of the report; the pipe never fills (a few bytes).
fn report(tx: &OwnedFd, line: &str) {
    let mut f = match tx.try_clone() {
        Ok(fd) => fs::File::from(fd),
        Err(_) => return,
    };
    let _ = f.write_all(format!("{}\n", line.replace('\n', " ")).as_bytes());
}

/// PID 1 of the run: mounts `/proc`, starts the target, waits for it.
fn init(
    policy: &Policy,
    helper: Pid,
    target: &Target,
    scratch: Option<&ScratchDir>,
    tx: OwnedFd,
) -> i32 {
    // If the helper is killed, so is the run (and, as PID 1, all of it).
    // In a new PID namespace the parent is outside it and reads as 0.
    let parent_ok = if policy.namespaces.pid {
        getppid() == Pid::from_raw(0)
    } else {
        getppid() == helper
    };
    if nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).is_err() || !parent_ok {
        report(
            &tx,
            "setup confinement_failed the sandbox helper died during setup",
        );
        return 1;
    }
    if policy.namespaces.pid {
        let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
        if let Err(e) = mount(Some("proc"), "/proc", Some("proc"), flags, None::<&str>) {
            report(
                &tx,
                &format!("setup confinement_failed mounting the run's /proc: {e}"),
            );
            return 1;
        }
    }
    // Closed by the target's exec (close-on-exec), or by the stage's exit
    // after a failure, which writes a byte first: end of file with nothing
    // read means the program runs.
    let (exec_rx, exec_tx) = match pipe2(OFlag::O_CLOEXEC) {
        Ok(p) => p,
        Err(e) => {
            report(&tx, &format!("setup confinement_failed pipe: {e}"));
            return 1;
        }
    };
    let child = match sys::fork() {
        Ok(ForkResult::Child) => {
            drop(exec_rx);
            stage(policy, target, scratch, &tx, &exec_tx)
        }
        Ok(ForkResult::Parent { child }) => child,
        Err(e) => {
            report(&tx, &format!("setup confinement_failed fork: {e}"));
            return 1;
        }
    };
    drop(exec_tx);
    if exec_succeeded(exec_rx) {
        report(&tx, "started");
    }
    loop {
        match waitpid(None::<Pid>, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == child => {
                // A setup failure was already reported by the target stage.
                report(&tx, &format!("exit {code}"));
                return 0;
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => {
                report(&tx, &format!("signal {}", sig as i32));
                return 0;
            }
            Err(Errno::ECHILD) => return 1,
            _ => {}
        }
    }
}

/// Whether the stage's exec pipe closed with nothing written (its exec).
fn exec_succeeded(rx: OwnedFd) -> bool {
    let mut f = fs::File::from(rx);
    let mut byte = [0u8; 1];
    loop {
        match f.read(&mut byte) {
            Ok(n) => return n == 0,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// The target's own process: restrict, then exec. Never returns.
fn stage(
    policy: &Policy,
    target: &Target,
    scratch: Option<&ScratchDir>,
    tx: &OwnedFd,
    exec_tx: &OwnedFd,
) -> ! {
    let fail = |reason: &str, detail: String| -> ! {
        let _ = nix::unistd::write(exec_tx, b"x");
        report(tx, &format!("setup {reason} {detail}"));
        std::process::exit(125)
    };
    if let Err(e) = sys::default_signal(Signal::SIGPIPE) {
        fail("confinement_failed", format!("SIGPIPE: {e}"));
    }
    if let Err(e) = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None) {
        fail("confinement_failed", format!("sigprocmask: {e}"));
    }
    if let Err(e) = set_limits(policy) {
        fail("confinement_failed", e);
    }
    if let Err(e) = rules::restrict(policy, scratch.map(|s| s.path.as_path())) {
        fail("confinement_unavailable", e);
    }
    if let Err(e) = filter::install(&target.filters) {
        fail("confinement_unavailable", e);
    }
    let Err(err) = execve(&target.program, &target.argv, &target.env);
    let program = target.program.to_string_lossy();
    match err {
        Errno::ENOENT => fail("program_not_found", format!("{program}: {err}")),
        Errno::EACCES | Errno::EPERM => fail(
            "permission_denied",
            format!("{program}: {err} (is it inside the policy's readable paths?)"),
        ),
        _ => fail("confinement_failed", format!("exec {program}: {err}")),
    }
}

/// Resolves the program and builds the exec arguments and environment.
fn prepare(req: &Request, scratch: Option<&Path>) -> Result<Target, SetupFailure> {
    let Some(argv0) = req.argv.first() else {
        return Err(SetupFailure::new("program_not_found", "no program given"));
    };
    let program = if argv0.as_bytes().contains(&b'/') {
        PathBuf::from(argv0)
    } else {
        let cwd = std::env::current_dir()
            .map_err(|e| SetupFailure::failed(format!("current directory: {e}")))?;
        crate::resolve::program(
            &argv0.to_string_lossy(),
            &cwd,
            std::env::var_os("PATH").as_deref(),
        )
        .map_err(|e| SetupFailure::new(e.reason(), e.to_string()))?
    };
    let cstr = |s: &[u8]| {
        CString::new(s).map_err(|_| SetupFailure::failed("an argument contains a NUL byte"))
    };
    let mut env = Vec::new();
    for (k, v) in std::env::vars_os() {
        if scratch.is_some() && (k == "HOME" || k == "TMPDIR") {
            continue;
        }
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        env.push(cstr(&kv)?);
    }
    if let Some(s) = scratch {
        for k in ["HOME", "TMPDIR"] {
            let mut kv = format!("{k}=").into_bytes();
            kv.extend_from_slice(s.as_os_str().as_bytes());
            env.push(cstr(&kv)?);
        }
    }
    Ok(Target {
        program: cstr(program.as_os_str().as_bytes())?,
        argv: req
            .argv
            .iter()
            .map(|a| cstr(a.as_bytes()))
            .collect::<Result<_, _>>()?,
        env,
        filters: filter::build(&req.policy).map_err(SetupFailure::failed)?,
    })
}

/// New namespaces, ID maps, private mounts and the scratch tmpfs.
fn enter_namespaces(policy: &Policy, scratch: Option<&ScratchDir>) -> Result<(), SetupFailure> {
    let ns = policy.namespaces;
    let mut flags = CloneFlags::empty();
    let mut names = Vec::new();
    for (on, flag, name) in [
        (ns.user, CloneFlags::CLONE_NEWUSER, "user"),
        (ns.mount, CloneFlags::CLONE_NEWNS, "mount"),
        (ns.pid, CloneFlags::CLONE_NEWPID, "pid"),
        (ns.ipc, CloneFlags::CLONE_NEWIPC, "ipc"),
        (ns.net, CloneFlags::CLONE_NEWNET, "net"),
    ] {
        if on {
            flags |= flag;
            names.push(name);
        }
    }
    if flags.is_empty() {
        return Ok(());
    }
    let (uid, gid) = (getuid(), getgid());
    unshare(flags).map_err(|e| {
        SetupFailure::unavailable(format!(
            "creating {} namespaces failed: {e}",
            names.join(", ")
        ))
    })?;
    if ns.user {
        // Files keep their owners (the outside ids are the same), but the
        // run is never root inside: a non-root uid loses every capability
        // at exec, so the target cannot remount, whatever the filter lets
        // through.
        let inside = |id: u32| if id == 0 { UNPRIVILEGED_ID } else { id };
        let write = |file: &str, text: String| {
            fs::write(format!("/proc/self/{file}"), text)
                .map_err(|e| SetupFailure::unavailable(format!("writing /proc/self/{file}: {e}")))
        };
        write("setgroups", "deny".to_owned())?;
        write("uid_map", format!("{} {uid} 1", inside(uid.as_raw())))?;
        write("gid_map", format!("{} {gid} 1", inside(gid.as_raw())))?;
    }
    if ns.mount {
        mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            None::<&str>,
        )
        .map_err(|e| SetupFailure::unavailable(format!("making mounts private: {e}")))?;
        // Everything read-only, then the trees the policy lets the run
        // write made writable again as their own bind mounts: Landlock does
        // not govern chmod, chown, utimes or xattrs, a read-only mount does.
        sys::mount_setattr_readonly(Path::new("/"), true, true).map_err(|e| {
            SetupFailure::unavailable(format!(
                "making every mount read-only (mount_setattr, Linux 5.12+): {e}"
            ))
        })?;
        for w in policy.writable() {
            mount(
                Some(w),
                w,
                None::<&str>,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None::<&str>,
            )
            .and_then(|()| sys::mount_setattr_readonly(w, false, false))
            .map_err(|e| {
                SetupFailure::unavailable(format!("making {} writable: {e}", w.display()))
            })?;
        }
        if let (Some(dir), Some(s)) = (scratch, policy.scratch) {
            let opts = format!("size={},mode=0700", s.max_bytes);
            mount(
                Some("tmpfs"),
                &dir.path,
                Some("tmpfs"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                Some(opts.as_str()),
            )
            .map_err(|e| SetupFailure::unavailable(format!("mounting the scratch tmpfs: {e}")))?;
        }
    }
    Ok(())
}

fn set_limits(policy: &Policy) -> Result<(), String> {
    let l = policy.limits;
    for (resource, value, name) in [
        (Resource::RLIMIT_NPROC, l.processes, "processes"),
        (Resource::RLIMIT_FSIZE, l.file_size, "file_size"),
        (Resource::RLIMIT_AS, l.address_space, "address_space"),
        (Resource::RLIMIT_CPU, l.cpu_seconds, "cpu_seconds"),
        (Resource::RLIMIT_CORE, Some(0), "core"),
    ] {
        let Some(want) = value else { continue };
        let (_, hard) = getrlimit(resource).map_err(|e| format!("getrlimit {name}: {e}"))?;
        let v = want.min(hard);
        setrlimit(resource, v, v).map_err(|e| format!("setrlimit {name}={v}: {e}"))?;
    }
    Ok(())
}

/// A fork with other threads alive could deadlock the child; the helper
/// refuses instead.
fn ensure_single_threaded() -> Result<(), SetupFailure> {
    let threads = fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .map_err(|e| SetupFailure::failed(format!("reading /proc/self/task: {e}")))?;
    if threads == 1 {
        Ok(())
    } else {
        Err(SetupFailure::failed(format!(
            "the sandbox helper must be single-threaded, it has {threads} threads"
        )))
    }
}

/// Closes every descriptor but stdin, stdout and stderr: nothing the
/// supervisor held open may leak into the run.
fn close_inherited_fds() {
    let fds: Vec<i32> = match fs::read_dir("/proc/self/fd") {
        Ok(dir) => dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter(|&fd| fd > 2)
            .collect(),
        Err(_) => return,
    };
    for fd in fds {
        // The directory's own descriptor is already closed: EBADF is fine.
        let _ = nix::unistd::close(fd);
    }
}

/// The scratch mount point. One directory per user serves every run: each
/// run mounts its own tmpfs on it inside its own mount namespace, so the
/// host's directory stays empty and nothing is left to remove when the run
/// (and its namespace) ends.
struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    fn create() -> Result<Self, SetupFailure> {
        let uid = getuid();
        let path = std::env::temp_dir().join(format!("warden-scratch-{uid}"));
        match fs::create_dir(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(SetupFailure::failed(format!(
                    "creating {}: {e}",
                    path.display()
                )));
            }
        }
        // Another user could have put a symlink or file there first.
        let meta = fs::symlink_metadata(&path)
            .map_err(|e| SetupFailure::failed(format!("{}: {e}", path.display())))?;
        if !meta.is_dir() || std::os::unix::fs::MetadataExt::uid(&meta) != uid.as_raw() {
            return Err(SetupFailure::failed(format!(
                "{} is not a directory owned by uid {uid}; remove it",
                path.display()
            )));
        }
        Ok(Self { path })
    }
}
