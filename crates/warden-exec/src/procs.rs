//! Finding every process that belongs to a run, and reaping the orphans this
//! process adopts as a child subreaper.
//!
//! A run's processes are its process group, plus any descendant that left
//! the group (`setsid`): while its ancestors live it is found by walking
//! `/proc/<pid>/task/*/children` from the leader; once they die it is
//! re-parented to us and recognised by the run's marker in its environment.

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex, MutexGuard};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

/// Leaders we spawned and whose exit status tokio will collect; never reaped here.
static LEADERS: LazyLock<Mutex<HashSet<i32>>> = LazyLock::new(|| Mutex::new(HashSet::new()));

/// Holds the leader registry; spawning happens under it so a fresh child is
/// registered before any scan could mistake it for an adopted orphan.
pub(crate) fn leaders() -> MutexGuard<'static, HashSet<i32>> {
    LEADERS.lock().unwrap_or_else(|p| p.into_inner())
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

/// Sends `sig` to the group and to each listed process; gone ones are ignored.
pub(crate) fn signal_all(pgid: i32, members: &[i32], sig: Signal) {
    let _ = killpg(Pid::from_raw(pgid), sig);
    for &pid in members {
        let _ = kill(Pid::from_raw(pid), sig);
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

/// The state letter from `/proc/<pid>/stat` (`Z` for a zombie).
fn state_of(pid: i32) -> Option<u8> {
    let s = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let close = s.iter().rposition(|&b| b == b')')?;
    s.get(close + 2).copied()
}

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
/// the leader's descendants and the adopted orphans carrying `marker`, with
/// their descendants. Adopted zombies found on the way are reaped.
pub(crate) fn members(leader: Option<i32>, marker: &[u8]) -> Vec<i32> {
    let mut roots: Vec<i32> = leader.into_iter().collect();
    {
        let leaders = leaders();
        for child in adopted_children() {
            if leaders.contains(&child) {
                continue;
            }
            match state_of(child) {
                Some(b'Z') => {
                    let _ = waitpid(Pid::from_raw(child), Some(WaitPidFlag::WNOHANG));
                }
                Some(_) if has_marker(child, marker) => roots.push(child),
                _ => {}
            }
        }
    }
    let mut seen: HashSet<i32> = HashSet::new();
    let mut out = Vec::new();
    while let Some(pid) = roots.pop() {
        if !seen.insert(pid) {
            continue;
        }
        if Some(pid) != leader && state_of(pid).is_some_and(|s| s != b'Z') {
            out.push(pid);
        }
        roots.extend(children_of(pid));
    }
    out
}

/// After a server restart: kills every process that carries the run's
/// marker (its old process group and any descendant that left it). A
/// recycled pid is never touched, since it lacks the marker. Returns how many
/// processes were signalled.
pub fn kill_orphaned_run(run_marker: &str) -> usize {
    let marker = marker_bytes(run_marker);
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut killed = 0;
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if pid != me
            && has_marker(pid, &marker)
            && kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok()
        {
            killed += 1;
        }
    }
    killed
}
