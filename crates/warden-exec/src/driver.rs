//! The task that watches one run until every process of it is gone.
//!
//! One task per run does everything: waits for the leader, reads both output
//! streams, enforces deadline, cancel and output cap, and escalates kills.
//! Keeping it in one task (no reader tasks, no internal channel) keeps the
//! per-run cost close to a bare spawn+wait.

use std::cell::Cell;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior, interval, sleep_until};
use tokio_util::sync::CancellationToken;
use warden_core::Outcome;

use crate::confine::Record;
use crate::output::{OutputChunk, Stream};
use crate::procs;
use crate::supervisor::RunEvent;

/// How often membership is re-checked while a run is being torn down.
const TICK: Duration = Duration::from_millis(10);

/// How long processes may survive SIGKILL before the run is reported as
/// holding an unkillable process (stuck in the kernel, or not ours to kill).
const KILL_LIMIT: Duration = Duration::from_secs(10);

/// The least time allowed for reading the last output once every process
/// is gone (pipes normally report end of file at once).
const DRAIN_MIN: Duration = Duration::from_secs(1);

/// How long an ending run waits for orphans that may be its own but cannot
/// be told yet (inside `execve` or exiting: normally a matter of
/// microseconds) before it is taken as gone without them.
const UNSETTLED_LIMIT: Duration = Duration::from_secs(2);

/// Where the kill escalation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kill {
    Idle,
    Term {
        escalate_at: Instant,
    },
    /// SIGKILL first sent at `since`; sent again at `again_at` in case a
    /// dying process forked.
    Killed {
        since: Instant,
        again_at: Instant,
    },
}

/// `now + d`, saturating far in the future instead of overflowing.
pub(crate) fn later(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86400))
}

/// One output stream being read.
pub(crate) struct Source {
    pub(crate) stream: Stream,
    pub(crate) reader: Box<dyn AsyncRead + Unpin + Send>,
    pub(crate) buf: Vec<u8>,
}

impl Source {
    pub(crate) fn new(
        stream: Stream,
        reader: impl AsyncRead + Unpin + Send + 'static,
        chunk: usize,
    ) -> Self {
        Self {
            stream,
            reader: Box::new(reader),
            buf: vec![0; chunk],
        }
    }
}

/// Reads once from `source`; end of file, EIO (a PTY whose last slave
/// closed) and errors all mean the stream is over.
async fn read_some(source: &mut Option<Source>) -> Option<(Stream, Vec<u8>)> {
    let s = source.as_mut()?;
    loop {
        match s.reader.read(&mut s.buf).await {
            Ok(0) => return None,
            Ok(n) => return Some((s.stream, s.buf[..n].to_vec())),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                if e.raw_os_error() != Some(nix::libc::EIO) {
                    tracing::warn!(stream = s.stream.as_str(), error = %e, "output read failed");
                }
                return None;
            }
        }
    }
}

/// The run's identity for signalling: its group and marker.
struct Group {
    pid: i32,
    marker: Vec<u8>,
    grace: Duration,
    /// Set once the group was seen empty: from then on its id may be reused
    /// by an unrelated process group, so it is never signalled again.
    empty: Cell<bool>,
    /// Since when orphans that cannot be told yet have held the end up.
    unsettled_since: Cell<Option<Instant>>,
}

impl Group {
    /// The group id, while it may still be signalled.
    fn pgid(&self) -> Option<i32> {
        (!self.empty.get()).then_some(self.pid)
    }

    fn alive(&self) -> bool {
        if self.empty.get() {
            return false;
        }
        let alive = procs::group_alive(self.pid);
        self.empty.set(!alive);
        alive
    }

    fn members(&self, leader_alive: bool) -> procs::Members {
        procs::members(leader_alive.then_some(self.pid), self.pid, &self.marker)
    }

    /// SIGTERM to the group and every escaped member; SIGKILL follows after the grace period.
    fn terminate(&self, kill: Kill, leader_alive: bool) -> Kill {
        if kill != Kill::Idle {
            return kill;
        }
        procs::signal_all(
            self.pgid(),
            &self.members(leader_alive).pids,
            Signal::SIGTERM,
        );
        Kill::Term {
            escalate_at: later(self.grace),
        }
    }

    fn kill_now(&self, kill: Kill, leader_alive: bool) -> Kill {
        procs::signal_all(
            self.pgid(),
            &self.members(leader_alive).pids,
            Signal::SIGKILL,
        );
        let since = match kill {
            Kill::Killed { since, .. } => since,
            Kill::Idle | Kill::Term { .. } => Instant::now(),
        };
        Kill::Killed {
            since,
            again_at: Instant::now() + TICK,
        }
    }

    fn escalate(&self, kill: Kill, leader_alive: bool) -> Kill {
        match kill {
            Kill::Term { escalate_at } if Instant::now() >= escalate_at => {
                self.kill_now(kill, leader_alive)
            }
            // Keep killing: a dying process may have forked on its way out.
            Kill::Killed { again_at, .. } if Instant::now() >= again_at => {
                self.kill_now(kill, leader_alive)
            }
            other => other,
        }
    }

    /// Whether nothing of the run is left (reaping adopted zombies on the
    /// way). Orphans that cannot be told yet hold this up for at most
    /// [`UNSETTLED_LIMIT`].
    fn gone(&self) -> bool {
        // Both, always (so an empty group is noted even while members
        // remain), the group after the members' zombies were reaped.
        let members = self.members(false);
        let group_alive = self.alive();
        let waiting = match (members.unsettled, self.unsettled_since.get()) {
            (0, _) => {
                self.unsettled_since.set(None);
                false
            }
            (_, None) => {
                self.unsettled_since.set(Some(Instant::now()));
                true
            }
            (_, Some(since)) => since.elapsed() < UNSETTLED_LIMIT,
        };
        let gone = members.pids.is_empty() && !waiting && !group_alive;
        if gone && members.unsettled > 0 {
            tracing::warn!(
                pid = self.pid,
                unsettled = members.unsettled,
                "orphans that may be the run's stayed inside execve or exiting; ending without them"
            );
        }
        gone
    }
}

pub(crate) struct Driver {
    pub(crate) child: tokio::process::Child,
    pub(crate) pid: i32,
    pub(crate) marker: Vec<u8>,
    pub(crate) sources: [Option<Source>; 2],
    pub(crate) tx: mpsc::Sender<RunEvent>,
    pub(crate) cancel: CancellationToken,
    pub(crate) deadline: Instant,
    pub(crate) grace: Duration,
    pub(crate) max_output: u64,
    /// Where a confined run's helper records a setup failure.
    pub(crate) confine_status: Option<std::path::PathBuf>,
}

/// Output accounting: sequence numbers, the cap, and the one chunk waiting
/// for the consumer (holding at most one keeps memory bounded).
struct Tally {
    max_output: u64,
    total: u64,
    seq: u64,
    over_cap: bool,
    pending: Option<RunEvent>,
}

impl Tally {
    /// Takes a read; returns true when it crossed the cap. Past the cap,
    /// reads are drained and dropped so writers never block on a full pipe.
    fn take(&mut self, stream: Stream, mut data: Vec<u8>) -> bool {
        if self.over_cap {
            return false;
        }
        let room = self.max_output.saturating_sub(self.total);
        if data.len() as u64 > room {
            data.truncate(usize::try_from(room).unwrap_or(usize::MAX));
            self.over_cap = true;
        }
        self.total += data.len() as u64;
        if !data.is_empty() {
            self.pending = Some(RunEvent::Output(OutputChunk {
                seq: self.seq,
                stream,
                data,
            }));
            self.seq += 1;
        }
        self.over_cap
    }
}

/// What kept a run from ending cleanly, found by the driver itself.
enum Leftover {
    /// A process outside the run's group and marker held its output open.
    Escaped,
    /// Processes survived SIGKILL for [`KILL_LIMIT`].
    Unkillable(Vec<i32>),
}

/// How the run is ending: what the leader did, why we intervened, and
/// whether everything of it is gone.
struct Ending {
    /// The leader's own exit, once reaped.
    exit: Option<Outcome>,
    /// Why warden ended it (deadline, cancel, cap), which outranks the exit.
    cause: Option<Outcome>,
    kill: Kill,
    /// When no process of the run was left; no signals are sent after it.
    gone_since: Option<Instant>,
    /// Something of the run outlived it; this outranks everything else.
    leftover: Option<Leftover>,
}

impl Ending {
    fn outcome(self) -> Outcome {
        let ended = match (&self.cause, &self.exit) {
            (Some(c), _) => c.describe(),
            (None, Some(e)) => format!("the program {}", e.describe()),
            (None, None) => "the program did not exit".to_owned(),
        };
        match (self.leftover, self.cause, self.exit) {
            (Some(Leftover::Escaped), _, _) => Outcome::infrastructure(
                "escaped_process",
                Some(format!(
                    "{ended}, but a process outside the run's group still held its output open and could not be found to kill"
                )),
            ),
            (Some(Leftover::Unkillable(pids)), _, _) => Outcome::infrastructure(
                "unkillable_process",
                Some(format!(
                    "{ended}, but processes {pids:?} survived SIGKILL for {} s",
                    KILL_LIMIT.as_secs()
                )),
            ),
            (None, Some(c), _) => c,
            (None, None, Some(e)) => e,
            (None, None, None) => Outcome::infrastructure("wait_failed", None),
        }
    }
}

fn exit_outcome(status: std::io::Result<std::process::ExitStatus>) -> Outcome {
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(code), _) => Outcome::exit_code(code),
            (None, Some(sig)) => Outcome::signal(sig),
            (None, None) => Outcome::infrastructure(
                "wait_failed",
                Some(format!("unrecognised exit status {s}")),
            ),
        },
        Err(e) => Outcome::infrastructure("wait_failed", Some(e.to_string())),
    }
}

impl Driver {
    pub(crate) async fn run(self) {
        let Driver {
            mut child,
            pid,
            marker,
            sources,
            tx,
            cancel,
            deadline,
            grace,
            max_output,
            confine_status,
        } = self;
        let group = Group {
            pid,
            marker,
            grace,
            empty: Cell::new(false),
            unsettled_since: Cell::new(None),
        };
        let [mut out, mut err] = sources;
        let mut tally = Tally {
            max_output,
            total: 0,
            seq: 0,
            over_cap: false,
            pending: None,
        };
        let mut end = Ending {
            exit: None,
            cause: None,
            kill: Kill::Idle,
            gone_since: None,
            leftover: None,
        };
        let mut tick = interval(TICK);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let deadline = sleep_until(deadline);
        tokio::pin!(deadline);

        loop {
            let live = end.exit.is_none();
            let ticking = !live || end.kill != Kill::Idle;
            let mut read = None;
            tokio::select! {
                biased;
                status = child.wait(), if live => {
                    procs::registry().leader_reaped(pid);
                    end.exit = Some(exit_outcome(status));
                }
                () = &mut deadline, if live && end.cause.is_none() => {
                    end.cause = Some(Outcome::TimedOut);
                    end.kill = group.terminate(end.kill, true);
                }
                () = cancel.cancelled(), if live && end.cause.is_none() => {
                    end.cause = Some(Outcome::Cancelled);
                    end.kill = group.terminate(end.kill, true);
                }
                permit = tx.reserve(), if tally.pending.is_some() => match permit {
                    Ok(p) => { if let Some(ev) = tally.pending.take() { p.send(ev); } }
                    // Nobody listens any more; the run is still watched to its end.
                    Err(_) => tally.pending = None,
                },
                r = read_some(&mut out), if tally.pending.is_none() && out.is_some() => {
                    if r.is_none() { out = None; }
                    read = r;
                }
                r = read_some(&mut err), if tally.pending.is_none() && err.is_some() => {
                    if r.is_none() { err = None; }
                    read = r;
                }
                _ = tick.tick(), if ticking => {}
            }

            // Checked on every pass, so a flood of output cannot starve it;
            // never once the group is gone, since its pid may be reused.
            if end.gone_since.is_none() {
                end.kill = group.escalate(end.kill, end.exit.is_none());
                if let Kill::Killed { since, .. } = end.kill
                    && since.elapsed() > KILL_LIMIT
                {
                    let left = group.members(end.exit.is_none()).pids;
                    tracing::error!(
                        pid,
                        ?left,
                        "processes of the run survive SIGKILL; giving up on them"
                    );
                    end.leftover = Some(Leftover::Unkillable(left));
                    break;
                }
            }
            if let Some((stream, data)) = read
                && tally.take(stream, data)
            {
                end.cause.get_or_insert(Outcome::OutputLimit);
                if end.gone_since.is_none() {
                    end.kill = group.kill_now(end.kill, end.exit.is_none());
                }
            }
            if end.exit.is_none() {
                continue;
            }
            // The leader is done. Whatever it left behind is not, until seen gone.
            if end.gone_since.is_none() {
                if group.gone() {
                    end.gone_since = Some(Instant::now());
                } else if end.kill == Kill::Idle {
                    end.kill = group.terminate(end.kill, false);
                }
            }
            if let Some(since) = end.gone_since
                && tally.pending.is_none()
            {
                if out.is_none() && err.is_none() {
                    break;
                }
                if since.elapsed() > grace.max(DRAIN_MIN) {
                    // Someone outside the run's group and marker holds its
                    // output open: the run did not end cleanly, say so.
                    tracing::warn!(
                        pid,
                        "output still held open by an untracked process; abandoning it"
                    );
                    end.leftover = Some(Leftover::Escaped);
                    break;
                }
            }
        }
        procs::registry().run_ended();
        // A confined program that never started did not fail on its own:
        // the helper's record says why (only the leftover check outranks it).
        if let Some(path) = confine_status.as_deref()
            && end.leftover.is_none()
        {
            match Record::take(path) {
                Some(Ok(Record::Ran)) => {}
                Some(Ok(Record::Failed(f))) => {
                    end.cause = Some(Outcome::infrastructure(f.reason, Some(f.detail)));
                }
                Some(Err(why)) => {
                    end.cause = Some(Outcome::infrastructure("confinement_failed", Some(why)));
                }
                // Killed by us on a deadline or cancel: that cause stands.
                None if end.cause.is_some() => {}
                None => {
                    end.cause = Some(Outcome::infrastructure(
                        "confinement_failed",
                        Some("the sandbox helper ended without recording how setup went".into()),
                    ));
                }
            }
        }
        let _ = tx.send(RunEvent::Finished(end.outcome())).await;
    }
}
