//! Finding every process that belongs to a run, and reaping the orphans this
//! process adopts as a child subreaper.
//!
//! A run's processes are its process group, plus any descendant that left
//! the group (`setsid`): while its ancestors live it is found by walking
//! `/proc/<pid>/task/*/children` from the leader; once they die it is
//! re-parented to us and recognised by the run's marker in its environment.

use std::collections::{HashMap, HashSet};
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

/// What this process is supervising: the leaders tokio will reap (never
/// reaped here; counted, because a reaped leader's pid can be reused by a
/// new leader before the old registration is dropped) and how many runs are
/// live.
#[derive(Default)]
pub(crate) struct Registry {
    leaders: HashMap<i32, u32>,
    live_runs: usize,
}

impl Registry {
    /// Records a freshly spawned leader and its run.
    pub(crate) fn add(&mut self, pid: i32) {
        *self.leaders.entry(pid).or_default() += 1;
        self.live_runs += 1;
    }

    /// The leader was reaped by its waiter.
    pub(crate) fn leader_reaped(&mut self, pid: i32) {
        if let Some(n) = self.leaders.get_mut(&pid) {
            *n -= 1;
            if *n == 0 {
                self.leaders.remove(&pid);
            }
        }
    }

    /// The run is over.
    pub(crate) fn run_ended(&mut self) {
        self.live_runs = self.live_runs.saturating_sub(1);
    }

    fn is_leader(&self, pid: i32) -> bool {
        self.leaders.contains_key(&pid)
    }
}

static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(|| Mutex::new(Registry::default()));

/// Holds the registry; spawning happens under it so a fresh child is
/// registered before any scan could mistake it for an adopted orphan.
pub(crate) fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// Makes this process a child subreaper, so orphans of our runs come to us
/// instead of init.
pub(crate) fn become_subreaper() -> nix::Result<()> {
    nix::sys::prctl::set_child_subreaper(true)
}

/// Whether any process (zombies included) is still in group `pgid`.
pub(crate) fn group_alive(pgid: i32) -> bool {
    !matches!(killpg(Pid::from_raw(pgid), None), Err(Errno::ESRCH))
}

/// Sends `sig` to the group (unless it is known gone: its id may then
/// belong to someone else) and to each listed process. Gone ones are
/// ignored; a refusal (EPERM) is logged, since that process may outlive us.
pub(crate) fn signal_all(pgid: Option<i32>, members: &[i32], sig: Signal) {
    if let Some(pgid) = pgid
        && let Err(e) = killpg(Pid::from_raw(pgid), sig)
        && e != Errno::ESRCH
    {
        tracing::warn!(pgid, signal = %sig, error = %e, "cannot signal the run's process group");
    }
    for &pid in members {
        if let Err(e) = kill(Pid::from_raw(pid), sig)
            && e != Errno::ESRCH
        {
            tracing::warn!(pid, signal = %sig, error = %e, "cannot signal a process of the run");
        }
    }
}

/// Children of this process that were adopted as orphans. The kernel hands
/// an orphan to the first live thread of the subreaper's thread group, which
/// is the main thread while it lives, so only its list needs reading.
fn adopted_children() -> Vec<i32> {
    let me = std::process::id();
    match std::fs::read_to_string(format!("/proc/{me}/task/{me}/children")) {
        Ok(s) => s
            .split_ascii_whitespace()
            .filter_map(|t| t.parse().ok())
            .collect(),
        Err(_) => children_of(me as i32),
    }
}

fn children_of(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let mut p = task.path();
        p.push("children");
        if let Ok(s) = std::fs::read_to_string(p) {
            out.extend(
                s.split_ascii_whitespace()
                    .filter_map(|t| t.parse::<i32>().ok()),
            );
        }
    }
    out
}

/// Kernel task flags (`/proc/<pid>/stat` field 9): in its exit path, a kernel thread.
const PF_EXITING: u32 = 0x4;
const PF_KTHREAD: u32 = 0x0020_0000;

/// What `/proc/<pid>/stat` says about a process.
struct Stat {
    /// The state letter (`Z` for a zombie).
    state: u8,
    pgrp: i32,
    flags: u32,
    /// Where its environment ends; 0 while it has no memory to hold one:
    /// exiting, or inside `execve` before the new image's stack is built.
    env_end: u64,
}

fn process_stat(pid: i32) -> Option<Stat> {
    let s = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let close = s.iter().rposition(|&b| b == b')')?;
    // Fields from the third (state) on; see proc_pid_stat(5).
    let rest = std::str::from_utf8(s.get(close + 2..)?).ok()?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).copied();
    Some(Stat {
        state: *field(3)?.as_bytes().first()?,
        pgrp: field(5)?.parse().ok()?,
        flags: field(9)?.parse().ok()?,
        env_end: field(51).and_then(|f| f.parse().ok()).unwrap_or(0),
    })
}

fn process_state(pid: i32) -> Option<u8> {
    process_stat(pid).map(|s| s.state)
}

/// Whether a process carries a run's marker.
#[derive(Debug, PartialEq)]
enum Marked {
    Yes,
    /// It does not, or it cannot be read (a non-dumpable process such as
    /// ssh-agent, a setuid one), or it was replaced (`env -i`).
    No,
    /// Cannot be told yet: it is exiting (its environment is gone) or inside
    /// `execve` (its new one not laid out). Looking again shortly answers.
    Unsettled,
}

/// A process's environment, read in one call where it fits: each call looks
/// at the memory the process has then, so one that execs between two calls
/// would read as a cut-off mix.
fn read_environ(pid: i32) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = std::fs::File::open(format!("/proc/{pid}/environ"))?;
    let mut env = vec![0; 64 * 1024];
    let n = file.read(&mut env)?;
    if n == env.len() {
        // Larger than most environments ever are; read the rest as it comes.
        file.read_to_end(&mut env)?;
    } else {
        env.truncate(n);
    }
    Ok(env)
}

fn marked(pid: i32, marker: &[u8]) -> Marked {
    // A real empty environment has an address, but so has one that execve
    // is still laying out (for microseconds): an empty read is retried.
    for _ in 0..4 {
        let readable = match read_environ(pid) {
            Ok(env) if !env.is_empty() => {
                let carries = env.split(|&b| b == 0).any(|kv| kv == marker);
                return if carries { Marked::Yes } else { Marked::No };
            }
            Ok(_) => true,
            // Also what an exiting process answers, its memory gone.
            Err(_) => false,
        };
        match process_stat(pid) {
            None => return Marked::No,
            Some(s) if s.state == b'Z' || s.flags & PF_KTHREAD != 0 => return Marked::No,
            Some(s) if s.flags & PF_EXITING != 0 => return Marked::Unsettled,
            Some(_) if !readable => return Marked::No,
            Some(s) if s.env_end == 0 => return Marked::Unsettled,
            Some(_) => std::thread::yield_now(),
        }
    }
    Marked::No
}

/// The `NAME=value` bytes that mark a run's processes.
pub(crate) fn marker_bytes(run_marker: &str) -> Vec<u8> {
    format!("{}={run_marker}", crate::MARKER_VAR).into_bytes()
}

/// The processes of a run that [`members`] found.
pub(crate) struct Members {
    /// Live processes to signal.
    pub(crate) pids: Vec<i32>,
    /// Adopted orphans that may be the run's but cannot be told yet (inside
    /// `execve` or exiting): never signalled, but while there are any the run
    /// is not gone.
    pub(crate) unsettled: usize,
}

/// Every live process of the run outside what `killpg` reaches for sure:
/// the leader's descendants, and the adopted orphans that are the run's (in
/// its process group, carrying its marker, or, while this is the only live
/// run, any: an orphan can belong to no other run) with their descendants.
///
/// Adopted zombies are reaped on the way; a reaped orphan's own children are
/// handed to us at that moment, so the scan repeats until a pass reaps none.
pub(crate) fn members(leader: Option<i32>, pgid: i32, marker: &[u8]) -> Members {
    let mut roots: Vec<i32> = leader.into_iter().collect();
    let mut unsettled = 0;
    {
        let registry = registry();
        for _pass in 0..16 {
            let mut reaped = false;
            unsettled = 0;
            for child in adopted_children() {
                if registry.is_leader(child) {
                    continue;
                }
                let Some(stat) = process_stat(child) else {
                    continue;
                };
                if stat.state == b'Z' {
                    let _ = waitpid(Pid::from_raw(child), Some(WaitPidFlag::WNOHANG));
                    reaped = true;
                } else if stat.pgrp == pgid || registry.live_runs <= 1 {
                    roots.push(child);
                } else {
                    match marked(child, marker) {
                        Marked::Yes => roots.push(child),
                        Marked::Unsettled => unsettled += 1,
                        Marked::No => {}
                    }
                }
            }
            if !reaped {
                break;
            }
        }
    }
    let mut seen: HashSet<i32> = HashSet::new();
    let mut pids = Vec::new();
    while let Some(pid) = roots.pop() {
        if !seen.insert(pid) {
            continue;
        }
        if Some(pid) != leader && process_state(pid).is_some_and(|s| s != b'Z') {
            pids.push(pid);
        }
        roots.extend(children_of(pid));
    }
    Members { pids, unsettled }
}

/// How long [`marked_processes`] waits for processes it cannot tell yet.
const SETTLE_LIMIT: Duration = Duration::from_millis(200);

/// Live (non-zombie) processes carrying `run_marker`, other than us. A
/// process inside `execve` or exiting cannot be told for a moment, so those
/// are looked at again until each is told (or [`SETTLE_LIMIT`] passes).
fn marked_processes(run_marker: &str) -> Vec<i32> {
    let marker = marker_bytes(run_marker);
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut untold: Vec<i32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .filter(|&pid| pid != me)
        .collect();
    let mut found = Vec::new();
    let deadline = Instant::now() + SETTLE_LIMIT;
    loop {
        untold.retain(|&pid| match marked(pid, &marker) {
            Marked::Yes => {
                if process_state(pid).is_some_and(|s| s != b'Z') {
                    found.push(pid);
                }
                false
            }
            Marked::No => false,
            Marked::Unsettled => true,
        });
        if untold.is_empty() || Instant::now() >= deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// After a server restart: SIGKILLs every process that carries the run's
/// marker (its old process group and any descendant that left it). A
/// recycled pid is never touched, since it lacks the marker. Returns how many
/// processes were signalled.
pub fn kill_orphaned_run(run_marker: &str) -> usize {
    marked_processes(run_marker)
        .into_iter()
        .filter(|&pid| kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok())
        .count()
}

/// How many live processes still carry the run's marker.
pub fn count_run_processes(run_marker: &str) -> usize {
    marked_processes(run_marker).len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child killed and reaped when the test ends, passed or not.
    struct Reaped(std::process::Child);

    impl Drop for Reaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// A shell that execs itself forever, carrying `marker`: part of its
    /// time its environment is not laid out yet (it reads empty then). The
    /// script is not made executable: writing a program while other threads
    /// fork can leave it busy (ETXTBSY).
    fn reexec(dir: &std::path::Path, marker: &str) -> Reaped {
        let script = dir.join("reexec");
        std::fs::write(&script, "exec sh \"$0\"\n").unwrap();
        let child = std::process::Command::new("sh")
            .arg(&script)
            .env(crate::MARKER_VAR, marker)
            .spawn()
            .unwrap();
        let (pid, mark) = (child.id() as i32, marker_bytes(marker));
        let child = Reaped(child);
        // Until its first execve it is a copy of this process, unmarked.
        let until = Instant::now() + Duration::from_secs(5);
        while marked(pid, &mark) != Marked::Yes {
            assert!(Instant::now() < until, "never read the marker");
        }
        child
    }

    #[test]
    fn a_process_inside_execve_is_never_taken_for_unmarked() {
        let dir = tempfile::tempdir().unwrap();
        let child = reexec(dir.path(), "reexec-unit");
        let (pid, mark) = (child.0.id() as i32, marker_bytes("reexec-unit"));
        let mut unsettled = 0;
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until && unsettled < 50 {
            match marked(pid, &mark) {
                Marked::Yes => {}
                Marked::Unsettled => unsettled += 1,
                Marked::No => panic!("a re-exec'ing process read as unmarked"),
            }
        }
    }

    #[test]
    fn a_scan_for_a_run_finds_its_process_inside_execve() {
        let dir = tempfile::tempdir().unwrap();
        let _child = reexec(dir.path(), "reexec-scan");
        for _ in 0..50 {
            assert_eq!(count_run_processes("reexec-scan"), 1);
        }
    }

    #[test]
    fn an_empty_environment_is_unmarked_once_its_program_runs() {
        let child = Reaped(
            std::process::Command::new("sleep")
                .arg("100")
                .env_clear()
                .spawn()
                .unwrap(),
        );
        let pid = child.0.id() as i32;
        // Inside its execve it may read as unsettled; then for good as unmarked.
        let until = Instant::now() + Duration::from_secs(5);
        let mut last = marked(pid, b"X=1");
        while last != Marked::No && Instant::now() < until {
            last = marked(pid, b"X=1");
        }
        assert_eq!(last, Marked::No);
        assert_eq!(marked(pid, b"X=1"), Marked::No);
    }
}
