//! `warden shim`: the owner of a resumable run (a mission), independent of
//! the server so the run outlives a server restart.
//!
//! It leaves the server's session, runs the program on a pseudo-terminal of
//! its own in its own process group, appends every byte of output to
//! `DIR/output`, copies what is written into the FIFO `DIR/stdin` to the
//! terminal, enforces the deadline, stops the program on SIGTERM, and when
//! the program's group is gone writes how it ended to `DIR/status.json`
//! (atomically) and exits. The server reads those files; it never holds the
//! run's terminal, so its death does not hang the program up.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, SigmaskHow, Signal, killpg, sigprocmask};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// How a shim's program ended, as `status.json` holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "ended", rename_all = "snake_case")]
pub enum ShimStatus {
    Exited {
        code: i32,
    },
    Signaled {
        signal: i32,
    },
    TimedOut,
    /// The program printed more than the output cap; its group was killed.
    OutputLimit,
    /// SIGTERM to the shim (an operator's kill).
    Cancelled,
    /// The program could not be started.
    NotStarted {
        error: String,
    },
}

/// The files of a shim's run directory.
pub struct ShimFiles;

impl ShimFiles {
    pub fn output(dir: &Path) -> PathBuf {
        dir.join("output")
    }
    pub fn stdin(dir: &Path) -> PathBuf {
        dir.join("stdin")
    }
    pub fn status(dir: &Path) -> PathBuf {
        dir.join("status.json")
    }
    /// Written once the program runs (and the shim takes SIGTERM): only
    /// then is a mission started.
    pub fn started(dir: &Path) -> PathBuf {
        dir.join("started")
    }
    /// Confined runs: the sandbox helper's setup record.
    pub fn setup(dir: &Path) -> PathBuf {
        dir.join("setup.status")
    }
    /// Confined runs: written by the sandbox helper once the program itself
    /// has been exec'd (the shim's `started` only means the helper runs).
    pub fn program_started(dir: &Path) -> PathBuf {
        dir.join("program.started")
    }
}

/// Reads `status.json` if the run has ended.
pub fn read_status(dir: &Path) -> Option<Result<ShimStatus, String>> {
    let text = std::fs::read(ShimFiles::status(dir)).ok()?;
    Some(serde_json::from_slice(&text).map_err(|e| format!("status.json: {e}")))
}

/// What the shim runs.
#[derive(Debug, Clone)]
pub struct ShimRequest {
    pub dir: PathBuf,
    pub argv: Vec<String>,
    pub timeout: Duration,
    pub grace: Duration,
    /// Bytes of output kept; past them the program's group is killed.
    pub max_output: u64,
}

fn write_status(dir: &Path, status: &ShimStatus) -> std::io::Result<()> {
    let tmp = dir.join("status.json.tmp");
    let mut f = File::create(&tmp)?;
    f.write_all(&serde_json::to_vec(status).map_err(std::io::Error::other)?)?;
    f.sync_all()?;
    std::fs::rename(&tmp, ShimFiles::status(dir))?;
    File::open(dir)?.sync_all()
}

/// Runs the shim to its end; the exit code of the shim itself.
pub fn run(req: ShimRequest) -> i32 {
    match shim(&req) {
        Ok(status) => match write_status(&req.dir, &status) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("warden shim: cannot write status.json: {e}");
                1
            }
        },
        Err(e) => {
            let _ = write_status(&req.dir, &ShimStatus::NotStarted { error: e.clone() });
            eprintln!("warden shim: {e}");
            1
        }
    }
}

fn shim(req: &ShimRequest) -> Result<ShimStatus, String> {
    // Out of the server's session and process group: its signals and its
    // end do not reach the run.
    nix::unistd::setsid().map_err(|e| format!("setsid: {e}"))?;
    // Descendants that leave the program's group come back to the shim
    // (not the server) when their parent dies, and are ended with the run.
    nix::sys::prctl::set_child_subreaper(true).map_err(|e| format!("subreaper: {e}"))?;
    // SIGTERM is taken by one thread (below); the program starts with the
    // default mask (std resets it in the child).
    let mut term = SigSet::empty();
    term.add(Signal::SIGTERM);
    term.add(Signal::SIGINT);
    term.add(Signal::SIGHUP);
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&term), None).map_err(|e| format!("sigmask: {e}"))?;

    let fifo = ShimFiles::stdin(&req.dir);
    match nix::unistd::mkfifo(
        &fifo,
        nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
    ) {
        Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
        Err(e) => return Err(format!("mkfifo {}: {e}", fifo.display())),
    }
    // Read and write: the FIFO never reports end of file between writers.
    let stdin_fifo = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .map_err(|e| format!("opening {}: {e}", fifo.display()))?;
    let mut output = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(ShimFiles::output(&req.dir))
        .map_err(|e| format!("opening the output file: {e}"))?;

    let pty = nix::pty::openpty(None, None).map_err(|e| format!("openpty: {e}"))?;
    let slave = |fd: &OwnedFd| fd.try_clone().map(Stdio::from);
    let Some((program, args)) = req.argv.split_first() else {
        return Err("no program".into());
    };
    let child = Command::new(program)
        .args(args)
        .stdin(slave(&pty.slave).map_err(|e| e.to_string())?)
        .stdout(slave(&pty.slave).map_err(|e| e.to_string())?)
        .stderr(slave(&pty.slave).map_err(|e| e.to_string())?)
        .process_group(0)
        .spawn();
    drop(pty.slave);
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            return Ok(ShimStatus::NotStarted {
                error: format!("{program}: {e}"),
            });
        }
    };
    let group = Pid::from_raw(child.id() as i32);
    std::fs::write(ShimFiles::started(&req.dir), child.id().to_string())
        .map_err(|e| format!("writing the started marker: {e}"))?;

    // Output: terminal → file, until the last slave closes (EIO).
    let master_read = File::from(pty.master.try_clone().map_err(|e| e.to_string())?);
    let (copied_tx, copied_rx) = mpsc::channel::<()>();
    let (capped_tx, capped_rx) = mpsc::channel::<()>();
    let cap = req.max_output;
    let copier = std::thread::spawn(move || {
        let mut master_read = master_read;
        let mut buf = [0u8; 16 * 1024];
        let mut total: u64 = 0;
        loop {
            match master_read.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    // Exactly the cap is kept; the rest is read and dropped
                    // so the program never blocks on a full terminal.
                    let room = usize::try_from(cap.saturating_sub(total)).unwrap_or(usize::MAX);
                    let keep = n.min(room);
                    if keep > 0 && output.write_all(&buf[..keep]).is_err() {
                        break;
                    }
                    total += n as u64;
                    if total > cap {
                        let _ = capped_tx.send(());
                    }
                }
            }
        }
        let _ = output.sync_all();
        let _ = copied_tx.send(());
    });
    // Input: FIFO → terminal.
    let mut master_write = File::from(pty.master);
    std::thread::spawn(move || {
        let mut fifo = stdin_fifo;
        let mut buf = [0u8; 4096];
        while let Ok(n) = fifo.read(&mut buf) {
            if n == 0 || master_write.write_all(&buf[..n]).is_err() {
                break;
            }
        }
    });

    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done_tx.send(child.wait());
    });
    let (sig_tx, sig_rx) = mpsc::channel();
    std::thread::spawn(move || {
        if term.wait().is_ok() {
            let _ = sig_tx.send(());
        }
    });

    let deadline = Instant::now() + req.timeout;
    let mut cause: Option<ShimStatus> = None;
    let mut term_sent_at: Option<Instant> = None;
    let status = loop {
        let wait = match term_sent_at {
            Some(t) => (t + req.grace).saturating_duration_since(Instant::now()),
            None => deadline.saturating_duration_since(Instant::now()),
        }
        .min(Duration::from_millis(200));
        match done_rx.recv_timeout(wait) {
            Ok(status) => break status,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err("lost the program's exit status".into());
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if cause.is_none() && sig_rx.try_recv().is_ok() {
            cause = Some(ShimStatus::Cancelled);
        }
        if cause.is_none() && capped_rx.try_recv().is_ok() {
            cause = Some(ShimStatus::OutputLimit);
            // Killed at once, as the supervisor does past the cap.
            let _ = killpg(group, Signal::SIGKILL);
        }
        if cause.is_none() && Instant::now() >= deadline {
            cause = Some(ShimStatus::TimedOut);
        }
        match (cause.is_some(), term_sent_at) {
            (true, None) => {
                let _ = killpg(group, Signal::SIGTERM);
                term_sent_at = Some(Instant::now());
            }
            (true, Some(t)) if t.elapsed() >= req.grace => {
                let _ = killpg(group, Signal::SIGKILL);
            }
            _ => {}
        }
    };
    // Whatever the leader left goes with it: its group, and descendants
    // that left the group (they carry the run's marker).
    let _ = killpg(group, Signal::SIGKILL);
    if let Some(marker) = std::env::var_os(crate::MARKER_VAR).filter(|m| !m.is_empty()) {
        crate::procs::kill_orphaned_run(&marker.to_string_lossy());
    }
    // The last output, unless something unkillable holds the terminal.
    if copied_rx.recv_timeout(Duration::from_secs(2)).is_ok() {
        let _ = copier.join();
    }
    let status = status.map_err(|e| format!("waiting for the program: {e}"))?;
    Ok(cause.unwrap_or(match (status.code(), status.signal()) {
        (Some(code), _) => ShimStatus::Exited { code },
        (None, Some(signal)) => ShimStatus::Signaled { signal },
        (None, None) => ShimStatus::NotStarted {
            error: format!("unrecognised exit status {status}"),
        },
    }))
}

/// The start time of process `pid` in clock ticks after boot (field 22 of
/// `/proc/<pid>/stat`): with the pid, it names one process for good.
pub fn process_start(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: count after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(19)?.parse().ok()
}

/// Whether the process named by `pid` and `start` is still alive (and not
/// a zombie).
pub fn process_alive(pid: i32, start: u64) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let Some(close) = stat.rfind(')') else {
        return false;
    };
    let state = stat[close + 2..].chars().next();
    state != Some('Z') && process_start(pid) == Some(start)
}

/// Writes `data` into a run's stdin FIFO (the shim copies it to the
/// program's terminal). Never blocks: the shim holds the FIFO open.
pub fn write_stdin(dir: &Path, data: &[u8]) -> std::io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(ShimFiles::stdin(dir))?;
    f.write_all(data)
}

/// Starts shims: `helper shim --dir … -- argv`, detached from the server's
/// session, with the minimal environment runs get.
#[derive(Debug, Clone)]
pub struct ShimLauncher {
    /// The `warden` binary.
    pub helper: PathBuf,
    /// Names of the server's environment variables runs may see.
    pub env_allow: Vec<String>,
    /// SIGTERM → SIGKILL.
    pub grace: Duration,
    /// Wakes the wait for a new shim's `started` marker.
    pub watcher: crate::dirwatch::DirWatcher,
}

/// A shim that was started: its pid and start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launched {
    pub pid: i32,
    pub start: u64,
}

/// What to launch.
#[derive(Debug, Clone)]
pub struct Launch<'a> {
    pub dir: &'a Path,
    pub argv: &'a [String],
    pub cwd: &'a Path,
    pub env: &'a [(String, String)],
    pub timeout: Duration,
    /// Confined tier: the program runs through `warden sandbox-exec`.
    pub confine: Option<&'a warden_core::Policy>,
    /// Output cap, bytes.
    pub max_output: u64,
    /// Shown to the run as `WARDEN_RUN_ID`.
    pub marker: &'a str,
}

impl ShimLauncher {
    /// The run directory is created private (0700); the shim is reaped by a
    /// task while this process lives and adopted by init after. Returns once
    /// the program runs (the shim's `started` marker), or with the shim's
    /// own account of why it did not.
    pub async fn launch(&self, l: &Launch<'_>) -> std::io::Result<Launched> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(l.dir)?;
        // Watching before the shim starts: its marker cannot be missed.
        let watch = self.watcher.watch(l.dir).ok();
        let argv: Vec<std::ffi::OsString> = match l.confine {
            None => l.argv.iter().map(Into::into).collect(),
            Some(policy) => {
                let Some((program, args)) = l.argv.split_first() else {
                    return Err(std::io::Error::other("no program"));
                };
                crate::confine::helper_argv(
                    &self.helper,
                    policy,
                    &ShimFiles::setup(l.dir),
                    Some(&ShimFiles::program_started(l.dir)),
                    Path::new(program),
                    args,
                )
                .map_err(std::io::Error::other)?
            }
        };
        let env = crate::env::build(&self.env_allow, l.env, warden_core::Terminal::Pty, l.marker);
        let mut cmd = tokio::process::Command::new(&self.helper);
        cmd.arg("shim")
            .arg("--dir")
            .arg(l.dir)
            .arg("--timeout")
            .arg(format!("{}", l.timeout.as_secs_f64()))
            .arg("--grace")
            .arg(format!("{}", self.grace.as_secs_f64()))
            .arg("--max-output")
            .arg(l.max_output.to_string())
            .arg("--")
            .args(&argv)
            .current_dir(l.cwd)
            .env_clear()
            .envs(&env)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(false);
        let mut child = cmd.spawn()?;
        let pid = child
            .id()
            .ok_or_else(|| std::io::Error::other("the shim has no pid"))? as i32;
        let start =
            process_start(pid).ok_or_else(|| std::io::Error::other("the shim vanished at once"))?;
        tokio::spawn(async move {
            let _ = child.wait().await;
        });
        let launched = Launched { pid, start };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let runs = || {
            ShimFiles::started(l.dir).exists()
                && (l.confine.is_none()
                    || std::fs::metadata(ShimFiles::program_started(l.dir))
                        .is_ok_and(|m| m.len() > 0))
        };
        loop {
            if runs() {
                return Ok(launched);
            }
            if let Some(status) = read_status(l.dir) {
                // The program may have run and ended already.
                if runs() {
                    return Ok(launched);
                }
                let setup = crate::confine::Record::read(&ShimFiles::setup(l.dir));
                let why = match (status, setup) {
                    (_, Some(Ok(crate::confine::Record::Failed(f)))) => {
                        format!("{}: {}", f.reason, f.detail)
                    }
                    (Ok(ShimStatus::NotStarted { error }), _) => error,
                    (Ok(other), _) => format!("the program ended at once: {other:?}"),
                    (Err(e), _) => e,
                };
                return Err(std::io::Error::other(why));
            }
            if !process_alive(pid, start) && !runs() && read_status(l.dir).is_none() {
                return Err(std::io::Error::other(
                    "the shim died before the program started",
                ));
            }
            let wait = async {
                match watch.as_ref() {
                    Some(w) => w.changed().await,
                    None => tokio::time::sleep(Duration::from_millis(10)).await,
                }
            };
            // Also woken now and then: a shim that dies writes nothing.
            tokio::select! {
                () = wait => {}
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
                () = tokio::time::sleep_until(deadline) => {
                    // Never left running unwatched: a failed launch is over.
                    let how = if self.stop_and_wait(launched, l.marker).await {
                        "it was stopped"
                    } else {
                        "it could not be stopped"
                    };
                    return Err(std::io::Error::other(format!(
                        "the shim (pid {pid}) did not start the program within 30 s; {how}"
                    )));
                }
            }
        }
    }

    /// Stops a shim whose launch failed: SIGTERM (it stops its program
    /// within the grace period), SIGKILL to it and every process carrying
    /// the run's marker if it is still there after that.
    /// Whether it is gone.
    async fn stop_and_wait(&self, shim: Launched, marker: &str) -> bool {
        Self::stop(shim);
        let deadline = tokio::time::Instant::now() + self.grace + Duration::from_secs(2);
        while process_alive(shim.pid, shim.start) {
            if tokio::time::Instant::now() >= deadline {
                let _ = nix::sys::signal::kill(Pid::from_raw(shim.pid), Signal::SIGKILL);
                // Its program is in a session of its own: found by the
                // run's marker in its environment.
                let marker = marker.to_owned();
                let _ =
                    tokio::task::spawn_blocking(move || crate::kill_orphaned_run(&marker)).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
                return !process_alive(shim.pid, shim.start);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// Asks the shim to stop its program (SIGTERM; it records `cancelled`),
    /// only if `shim` is still that process.
    pub fn stop(shim: Launched) -> bool {
        process_alive(shim.pid, shim.start)
            && nix::sys::signal::kill(Pid::from_raw(shim.pid), Signal::SIGTERM).is_ok()
    }
}
