//! The task that watches one run until every process of it is gone.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior, interval, sleep_until};
use tokio_util::sync::CancellationToken;
use warden_core::Outcome;

use crate::output::{OutputChunk, Raw};
use crate::procs;
use crate::supervisor::RunEvent;

/// How often membership is re-checked while a run is being torn down.
const TICK: Duration = Duration::from_millis(10);

/// Where the kill escalation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kill {
    Idle,
    Term { escalate_at: Instant },
    Killed,
}

pub(crate) struct Driver {
    pub(crate) child: tokio::process::Child,
    pub(crate) pid: i32,
    pub(crate) marker: Vec<u8>,
    pub(crate) raw_rx: mpsc::Receiver<Raw>,
    pub(crate) pumps: Vec<JoinHandle<()>>,
    pub(crate) tx: mpsc::Sender<RunEvent>,
    pub(crate) cancel: CancellationToken,
    pub(crate) deadline: Instant,
    pub(crate) grace: Duration,
    pub(crate) max_output: u64,
}

impl Driver {
    pub(crate) async fn run(mut self) {
        let mut exit: Option<Outcome> = None;
        let mut cause: Option<Outcome> = None;
        let mut kill = Kill::Idle;
        let mut pending: Option<RunEvent> = None;
        let mut readers_open = true;
        let mut over_cap = false;
        let mut seq = 0u64;
        let mut total = 0u64;
        let mut gone_since: Option<Instant> = None;
        let mut tick = interval(TICK);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let deadline = sleep_until(self.deadline);
        tokio::pin!(deadline);

        loop {
            let ticking = exit.is_some() || kill != Kill::Idle;
            tokio::select! {
                biased;
                status = self.child.wait(), if exit.is_none() => {
                    procs::leaders().remove(&self.pid);
                    exit = Some(match status {
                        Ok(s) => match (s.code(), s.signal()) {
                            (Some(code), _) => Outcome::exit_code(code),
                            (None, Some(sig)) => Outcome::signal(sig),
                            (None, None) => Outcome::infrastructure("wait_failed", Some(format!("unrecognised exit status {s}"))),
                        },
                        Err(e) => Outcome::infrastructure("wait_failed", Some(e.to_string())),
                    });
                }
                () = &mut deadline, if exit.is_none() && cause.is_none() => {
                    cause = Some(Outcome::TimedOut);
                    kill = self.terminate(kill, true);
                }
                () = self.cancel.cancelled(), if exit.is_none() && cause.is_none() => {
                    cause = Some(Outcome::Cancelled);
                    kill = self.terminate(kill, true);
                }
                permit = self.tx.reserve(), if pending.is_some() => {
                    match permit {
                        Ok(p) => { if let Some(ev) = pending.take() { p.send(ev); } }
                        // Nobody listens any more; the run is still watched to its end.
                        Err(_) => pending = None,
                    }
                }
                raw = self.raw_rx.recv(), if pending.is_none() && readers_open => {
                    match raw {
                        None => readers_open = false,
                        Some((_, _)) if over_cap => {}
                        Some((stream, mut data)) => {
                            let room = self.max_output.saturating_sub(total);
                            if data.len() as u64 > room {
                                data.truncate(usize::try_from(room).unwrap_or(usize::MAX));
                                over_cap = true;
                            }
                            total += data.len() as u64;
                            if !data.is_empty() {
                                pending = Some(RunEvent::Output(OutputChunk { seq, stream, data }));
                                seq += 1;
                            }
                            if over_cap {
                                if cause.is_none() {
                                    cause = Some(Outcome::OutputLimit);
                                }
                                kill = self.kill_now(exit.is_none());
                            }
                        }
                    }
                }
                _ = tick.tick(), if ticking => {
                    kill = self.escalate(kill, exit.is_none());
                }
            }

            if let Some(ref _status) = exit {
                if gone_since.is_none() {
                    let members = procs::members(None, &self.marker);
                    if procs::group_alive(self.pid) || !members.is_empty() {
                        if kill == Kill::Idle {
                            // The leader is done; whatever it left behind is not.
                            kill = self.terminate(kill, false);
                        }
                    } else {
                        gone_since = Some(Instant::now());
                    }
                }
                if let Some(since) = gone_since {
                    if !readers_open && pending.is_none() {
                        break;
                    }
                    if since.elapsed() > self.grace && pending.is_none() {
                        tracing::warn!(
                            pid = self.pid,
                            "output still held open by an untracked process; abandoning it"
                        );
                        break;
                    }
                }
            }
        }
        for p in &self.pumps {
            p.abort();
        }
        let outcome = match (cause, exit) {
            (Some(c), _) => c,
            (None, Some(e)) => e,
            (None, None) => Outcome::infrastructure("wait_failed", None),
        };
        let _ = self.tx.send(RunEvent::Finished(outcome)).await;
    }

    /// SIGTERM to the group and every escaped member; SIGKILL follows after the grace period.
    fn terminate(&self, kill: Kill, leader_alive: bool) -> Kill {
        if kill != Kill::Idle {
            return kill;
        }
        let members = procs::members(leader_alive.then_some(self.pid), &self.marker);
        procs::signal_all(self.pid, &members, Signal::SIGTERM);
        Kill::Term {
            escalate_at: Instant::now() + self.grace,
        }
    }

    fn kill_now(&self, leader_alive: bool) -> Kill {
        let members = procs::members(leader_alive.then_some(self.pid), &self.marker);
        procs::signal_all(self.pid, &members, Signal::SIGKILL);
        Kill::Killed
    }

    fn escalate(&self, kill: Kill, leader_alive: bool) -> Kill {
        match kill {
            Kill::Term { escalate_at } if Instant::now() >= escalate_at => {
                self.kill_now(leader_alive)
            }
            // Keep killing: a dying process may have forked on its way out.
            Kill::Killed => self.kill_now(leader_alive),
            other => other,
        }
    }
}
