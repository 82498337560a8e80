//! Finding every process that belongs to a run, and reaping the orphans this
//! process adopts as a child subreaper.
//!
//! A run's processes are its process group, plus any descendant that left
//! the group (`setsid`): while its ancestors live it is found by walking
//! `/proc/<pid>/task/*/children` from the leader; once they die it is
//! re-parented to us and recognised by the run's marker in its environment.

use std::collections::{HashMap, HashSet};
use std::sync::{LazyLock, Mutex, MutexGuard};

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

/// The state letter (`Z` for a zombie) and process group from `/proc/<pid>/stat`.
fn process_stat(pid: i32) -> Option<(u8, i32)> {
    let s = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let close = s.iter().rposition(|&b| b == b')')?;
    // After ") ": state, ppid, pgrp, …
    let rest = std::str::from_utf8(s.get(close + 2..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    let pgrp = fields.nth(1)?.parse().ok()?;
    Some((state, pgrp))
}

fn process_state(pid: i32) -> Option<u8> {
    process_stat(pid).map(|(state, _)| state)
}

/// Whether the process's environment carries `marker`. False when it cannot
/// be read (a non-dumpable process such as ssh-agent, a setuid one) or was
/// replaced (`env -i`).
fn has_marker(pid: i32, marker: &[u8]) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|env| env.split(|&b| b == 0).any(|kv| kv == marker))
        .unwrap_or(false)
}

/// The `NAME=value` bytes that mark a run's processes.
pub(crate) fn marker_bytes(run_marker: &str) -> Vec<u8> {
    format!("{}={run_marker}", crate::MARKER_VAR).into_bytes()
}

/// Every live process of the run outside what `killpg` reaches for sure:
/// the leader's descendants, and the adopted orphans that are the run's (in
/// its process group, carrying its marker, or, while this is the only live
/// run, any: an orphan can belong to no other run) with their descendants.
///
/// Adopted zombies are reaped on the way; a reaped orphan's own children are
/// handed to us at that moment, so the scan repeats until a pass reaps none.
pub(crate) fn members(leader: Option<i32>, pgid: i32, marker: &[u8]) -> Vec<i32> {
    let mut roots: Vec<i32> = leader.into_iter().collect();
    {
        let registry = registry();
        for _pass in 0..16 {
            let mut reaped = false;
            for child in adopted_children() {
                if registry.is_leader(child) {
                    continue;
                }
                match process_stat(child) {
                    Some((b'Z', _)) => {
                        let _ = waitpid(Pid::from_raw(child), Some(WaitPidFlag::WNOHANG));
                        reaped = true;
                    }
                    Some((_, pgrp))
                        if pgrp == pgid || registry.live_runs <= 1 || has_marker(child, marker) =>
                    {
                        roots.push(child)
                    }
                    Some(_) | None => {}
                }
            }
            if !reaped {
                break;
            }
        }
    }
    let mut seen: HashSet<i32> = HashSet::new();
    let mut out = Vec::new();
    while let Some(pid) = roots.pop() {
        if !seen.insert(pid) {
            continue;
        }
        if Some(pid) != leader && process_state(pid).is_some_and(|s| s != b'Z') {
            out.push(pid);
        }
        roots.extend(children_of(pid));
    }
    out
}

/// Live (non-zombie) processes carrying `run_marker`, other than us.
fn marked_processes(run_marker: &str) -> Vec<i32> {
    let marker = marker_bytes(run_marker);
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .filter(|&pid| {
            pid != me && has_marker(pid, &marker) && process_state(pid).is_some_and(|s| s != b'Z')
        })
        .collect()
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
