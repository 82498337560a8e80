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
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::procfs::{self, Marked};

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

/// The `NAME=value` bytes that mark a run's processes.
pub(crate) fn marker_bytes(run_marker: &str) -> Vec<u8> {
    format!("{}={run_marker}", crate::MARKER_VAR).into_bytes()
}

/// The processes of a run that [`members`] found.
pub(crate) struct Members {
    /// Live processes to signal.
    pub(crate) pids: Vec<i32>,
    /// Adopted orphans that may be the run's but cannot be told yet (inside
    /// `execve` or exiting): never signalled; the run waits a moment for them.
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
                let Some(stat) = procfs::stat(child) else {
                    continue;
                };
                if stat.dead() {
                    reaped |= matches!(
                        waitpid(Pid::from_raw(child), Some(WaitPidFlag::WNOHANG)),
                        Ok(status) if status != WaitStatus::StillAlive
                    );
                } else if stat.pgrp == pgid || registry.live_runs <= 1 {
                    roots.push(child);
                } else {
                    match procfs::marked(child, &stat, marker) {
                        Marked::Yes => roots.push(child),
                        Marked::InsideExec | Marked::Exiting => unsettled += 1,
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
        if Some(pid) != leader && procfs::stat(pid).is_some_and(|s| !s.dead()) {
            pids.push(pid);
        }
        roots.extend(children_of(pid));
    }
    Members { pids, unsettled }
}

/// How long a scan by marker looks again at processes it cannot tell yet.
const SETTLE_LIMIT: Duration = Duration::from_millis(200);

/// Calls `found` for each live process carrying `run_marker`, other than
/// us, as soon as it is told. One inside `execve` cannot be told for a
/// moment and is looked at again for up to [`SETTLE_LIMIT`]; one exiting is
/// passed over (it is on its way out, whoever's it is).
fn scan_marked(run_marker: &str, mut found: impl FnMut(i32)) {
    let marker = marker_bytes(run_marker);
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    let mut untold: Vec<i32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .filter(|&pid| pid != me)
        .collect();
    let deadline = Instant::now() + SETTLE_LIMIT;
    loop {
        untold.retain(|&pid| {
            let Some(stat) = procfs::stat(pid) else {
                return false;
            };
            match procfs::marked(pid, &stat, &marker) {
                Marked::Yes => {
                    found(pid);
                    false
                }
                Marked::InsideExec => true,
                Marked::No | Marked::Exiting => false,
            }
        });
        if untold.is_empty() || Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// SIGKILLs every live process that carries the run's marker (its process
/// group and any descendant that left it): after a server restart, at a
/// shim's end, at shutdown. A recycled pid is never touched, since it lacks
/// the marker. Returns how many were signalled: call it until that is 0 to
/// know none is left. Blocks for up to [`SETTLE_LIMIT`]: call it off the
/// async runtime.
pub fn kill_orphaned_run(run_marker: &str) -> usize {
    let mut killed = 0;
    scan_marked(run_marker, |pid| {
        if kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok() {
            killed += 1;
        }
    });
    killed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procfs::tests::Reaped;

    #[test]
    fn a_scan_for_a_run_finds_its_process_inside_execve() {
        // A shell that execs itself forever: part of its time its new
        // environment is not laid out yet.
        let script = "exec sh -c \"$0\" \"$0\"";
        let _child = Reaped(
            std::process::Command::new("sh")
                .args(["-c", script, script])
                .env(crate::MARKER_VAR, "reexec-scan")
                .spawn()
                .unwrap(),
        );
        let count = || {
            let mut n = 0;
            scan_marked("reexec-scan", |_| n += 1);
            n
        };
        let until = Instant::now() + Duration::from_secs(5);
        while count() == 0 {
            assert!(Instant::now() < until, "never found");
        }
        let counts: Vec<usize> = (0..50).map(|_| count()).collect();
        assert!(counts.iter().all(|&n| n == 1), "{counts:?}");
        assert_eq!(kill_orphaned_run("reexec-scan"), 1);
    }
}
