//! The run service: wires the supervisor to the store. Every run is recorded
//! before it is spawned, each output chunk and the outcome are saved as they
//! happen, and nothing is reported that the store has not made durable.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::json;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use warden_core::{
    CoreError, Outcome, ProcessEvent, RunId, RunLimits, RunRecord, RunSpec, RunState,
};
use warden_exec::{Canceller, RunEvent, RunHandle, SpawnError, StdinHandle, Supervisor};
use warden_store::{Store, StoreError};

/// Why a request to start or cancel a run was refused.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A field of the request is invalid.
    #[error(transparent)]
    Invalid(#[from] CoreError),
    /// The program or working directory is unusable; nothing was recorded.
    #[error("{0}")]
    Unstartable(SpawnError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run has already ended.
    #[error("run {0} has already ended")]
    Ended(RunId),
    /// The run is not live here: still being started, or its end could not be recorded.
    #[error("run {0} is not live in this server (it may be starting); retry shortly")]
    NotLive(RunId),
    /// As many runs as allowed are live.
    #[error("{0} runs are already live, the configured maximum; retry when one ends")]
    TooMany(usize),
    /// The server is shutting down and takes no new runs.
    #[error("the server is shutting down")]
    ShuttingDown,
    /// The task starting the run failed.
    #[error("internal error starting the run")]
    Internal,
    /// The run was started without a writable stdin.
    #[error("run {0} has no writable stdin")]
    NoStdin(RunId),
    /// Writing to the run's stdin failed: the input did not reach it.
    #[error("cannot write to the stdin of run {0}: {1}")]
    StdinFailed(RunId, String),
}

/// Why the service, not the program, ended a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Operator,
    Shutdown,
    StoreFailed,
}

struct Live {
    canceller: Canceller,
    stop: Option<Stop>,
    done: watch::Receiver<bool>,
    /// The writable end of its stdin, for runs started with one.
    stdin: Option<Arc<tokio::sync::Mutex<StdinHandle>>>,
}

/// Live runs and whether new ones may start, under one lock so a start and
/// a shutdown cannot miss each other.
#[derive(Default)]
struct LiveSet {
    runs: HashMap<RunId, Live>,
    closed: bool,
}

/// Starts, tracks and cancels runs.
pub struct RunService {
    store: Store,
    supervisor: Supervisor,
    limits: RunLimits,
    slots: Arc<Semaphore>,
    max_live: usize,
    live: Mutex<LiveSet>,
    /// Set when an outcome could not be saved; readiness reports it.
    unrecorded: AtomicBool,
}

impl RunService {
    pub fn new(
        store: Store,
        supervisor: Supervisor,
        limits: RunLimits,
        max_live: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            supervisor,
            limits,
            slots: Arc::new(Semaphore::new(max_live)),
            max_live,
            live: Mutex::new(LiveSet::default()),
            unrecorded: AtomicBool::new(false),
        })
    }

    fn live(&self) -> MutexGuard<'_, LiveSet> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The grace period runs get between SIGTERM and SIGKILL.
    pub fn grace(&self) -> Duration {
        self.supervisor.config().grace
    }

    /// Whether every outcome so far was saved.
    pub fn healthy(&self) -> bool {
        !self.unrecorded.load(Ordering::Relaxed)
    }

    /// Validates, records, spawns. A spec that fails validation or preflight
    /// writes nothing. The recording and spawning run in their own task, so
    /// a client that disconnects cannot leave a run half-started.
    pub async fn start(
        self: &Arc<Self>,
        spec: RunSpec,
        actor: &str,
    ) -> Result<RunRecord, RunError> {
        self.begin(spec, actor, None).await
    }

    /// As [`RunService::start`], and reports each saved chunk and the saved
    /// outcome on the returned channel (the run waits for a slow reader).
    pub async fn start_observed(
        self: &Arc<Self>,
        spec: RunSpec,
        actor: &str,
    ) -> Result<(RunRecord, mpsc::Receiver<ProcessEvent>), RunError> {
        let (tx, rx) = mpsc::channel(64);
        Ok((self.begin(spec, actor, Some(tx)).await?, rx))
    }

    async fn begin(
        self: &Arc<Self>,
        spec: RunSpec,
        actor: &str,
        observer: Option<mpsc::Sender<ProcessEvent>>,
    ) -> Result<RunRecord, RunError> {
        if self.live().closed {
            return Err(RunError::ShuttingDown);
        }
        spec.validate(&self.limits)?;
        self.supervisor
            .preflight(&spec)
            .map_err(RunError::Unstartable)?;
        let permit = Arc::clone(&self.slots)
            .try_acquire_owned()
            .map_err(|_| RunError::TooMany(self.max_live))?;
        let this = Arc::clone(self);
        let actor = actor.to_owned();
        tokio::spawn(async move { this.launch(spec, &actor, permit, observer).await })
            .await
            .map_err(|_| RunError::Internal)?
    }

    async fn launch(
        self: Arc<Self>,
        spec: RunSpec,
        actor: &str,
        permit: OwnedSemaphorePermit,
        observer: Option<mpsc::Sender<ProcessEvent>>,
    ) -> Result<RunRecord, RunError> {
        let mut record = self
            .store
            .create_run(RunRecord::new(spec.clone()), actor)
            .await?;
        let id = record.id;
        let (done_tx, done) = watch::channel(false);
        let spawned = {
            let mut live = self.live();
            if live.closed {
                Err(Outcome::infrastructure(
                    "server_shutdown",
                    Some("the server began shutting down before the run was spawned".into()),
                ))
            } else {
                match self.supervisor.spawn(&id.to_string(), &spec) {
                    Ok(mut handle) => {
                        let stdin = handle
                            .take_stdin()
                            .map(|s| Arc::new(tokio::sync::Mutex::new(s)));
                        live.runs.insert(
                            id,
                            Live {
                                canceller: handle.canceller(),
                                stop: None,
                                done,
                                stdin,
                            },
                        );
                        Ok(handle)
                    }
                    Err(e) => Err(e.outcome()),
                }
            }
        };
        let handle = match spawned {
            Ok(h) => h,
            Err(outcome) => {
                let saved = self.record_outcome(id, outcome.clone()).await;
                Self::report_end(observer, outcome, saved).await;
                return Ok(self.store.get_run(id).await?);
            }
        };
        let pid = handle.pid();
        let started = self.store.mark_started(id, pid).await;
        if let Err(e) = &started {
            // Unrecorded work must not run: stop it and report why.
            tracing::error!(run = %id, error = %e, "cannot record run start; stopping it");
            self.request_stop(id, Stop::StoreFailed);
        }
        let this = Arc::clone(&self);
        tokio::spawn(async move {
            this.pump(id, handle, observer).await;
            this.live().runs.remove(&id);
            let _ = done_tx.send(true);
            drop(permit);
        });
        // The run exists now: never answer with an error a client would retry
        // into a duplicate. If the store cannot be read back, answer with
        // what was observed here.
        match self.store.get_run(id).await {
            Ok(run) => Ok(run),
            Err(e) => {
                tracing::warn!(run = %id, error = %e, "cannot read back a started run; answering from memory");
                if started.is_ok() {
                    record.state = RunState::Running;
                    record.pid = Some(pid);
                }
                Ok(record)
            }
        }
    }

    /// Saves output as it comes and the outcome at the end.
    async fn pump(
        &self,
        id: RunId,
        mut handle: RunHandle,
        mut observer: Option<mpsc::Sender<ProcessEvent>>,
    ) {
        let mut store_error: Option<String> = None;
        let outcome = loop {
            match handle.next().await {
                Some(RunEvent::Output(chunk)) => {
                    if store_error.is_some() {
                        continue;
                    }
                    let seen = observer.as_ref().map(|_| ProcessEvent::Output {
                        stream: chunk.stream,
                        seq: chunk.seq,
                        data: chunk.data.clone(),
                    });
                    if let Err(e) = self
                        .store
                        .append_output(id, chunk.seq, chunk.stream_name(), chunk.data)
                        .await
                    {
                        tracing::error!(run = %id, error = %e, "cannot save output; stopping the run");
                        store_error = Some(e.to_string());
                        self.request_stop(id, Stop::StoreFailed);
                    } else if let (Some(tx), Some(event)) = (&observer, seen) {
                        // A reader that went away stops being told.
                        if tx.send(event).await.is_err() {
                            observer = None;
                        }
                    }
                }
                Some(RunEvent::Finished(o)) => break o,
                None => break Outcome::infrastructure("supervisor_lost", None),
            }
        };
        let stop = self.live().runs.get(&id).and_then(|l| l.stop);
        let outcome = match (stop, store_error, outcome) {
            // Output was lost: whatever the program did, the record is incomplete.
            (_, Some(err), _) => Outcome::infrastructure(
                "store_unavailable",
                Some(format!("output could not be saved: {err}")),
            ),
            (Some(Stop::StoreFailed), None, Outcome::Cancelled) => Outcome::infrastructure(
                "store_unavailable",
                Some("the run's start could not be recorded".into()),
            ),
            (Some(Stop::Shutdown), None, Outcome::Cancelled) => Outcome::infrastructure(
                "server_shutdown",
                Some("the server shut down and terminated the run".into()),
            ),
            // The program ended on its own before any stop landed: that is the truth.
            (_, None, o) => o,
        };
        let saved = self.record_outcome(id, outcome.clone()).await;
        Self::report_end(observer, outcome, saved).await;
    }

    /// Saves an outcome, retrying a failing store for a few seconds; if it
    /// still fails, readiness turns false (a restart will then report the run
    /// as `server_restart`, never as still running). Returns whether it was saved.
    async fn record_outcome(&self, id: RunId, outcome: Outcome) -> bool {
        let mut wait = Duration::from_millis(100);
        for attempt in 1..=6 {
            match self.store.finish_run(id, outcome.clone()).await {
                Ok(_) => return true,
                Err(e @ StoreError::Rejected(_)) => {
                    tracing::error!(run = %id, ?outcome, error = %e, "outcome refused by the store");
                    break;
                }
                Err(e) if attempt < 6 => {
                    tracing::warn!(run = %id, attempt, error = %e, "cannot save the outcome yet; retrying");
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
                Err(e) => {
                    tracing::error!(run = %id, ?outcome, error = %e, "cannot save the outcome; giving up")
                }
            }
        }
        self.unrecorded.store(true, Ordering::Relaxed);
        false
    }

    /// Tells an observer how the run ended, or that its end could not be
    /// recorded (then the observed outcome is not what the record says).
    async fn report_end(
        observer: Option<mpsc::Sender<ProcessEvent>>,
        outcome: Outcome,
        saved: bool,
    ) {
        let Some(tx) = observer else { return };
        let told = if saved {
            outcome
        } else {
            Outcome::infrastructure(
                "store_unavailable",
                Some(format!(
                    "the run ended ({}) but that could not be saved",
                    outcome.state().as_str()
                )),
            )
        };
        let _ = tx.send(ProcessEvent::Ended(told)).await;
    }

    /// Writes `bytes` to a live run's stdin (a pipe or its terminal).
    pub async fn write_stdin(&self, id: RunId, bytes: &[u8]) -> Result<(), RunError> {
        let stdin = match self.live().runs.get(&id) {
            Some(l) => l.stdin.clone().ok_or(RunError::NoStdin(id))?,
            None => return Err(RunError::NotLive(id)),
        };
        stdin
            .lock()
            .await
            .write_all(bytes)
            .await
            .map_err(|e| RunError::StdinFailed(id, e.to_string()))
    }

    /// Asks a live run to stop without waiting; its outcome says `cancelled`
    /// once its processes are gone (unless it ended on its own first).
    pub fn stop(&self, id: RunId) {
        self.request_stop(id, Stop::Operator);
    }

    fn request_stop(&self, id: RunId, why: Stop) -> bool {
        let mut live = self.live();
        let Some(entry) = live.runs.get_mut(&id) else {
            return false;
        };
        entry.stop.get_or_insert(why);
        entry.canceller.cancel();
        true
    }

    /// Cancels a live run and waits (up to the grace period and a margin) for
    /// its outcome to be saved; returns the run as the store has it then.
    pub async fn cancel(&self, id: RunId, actor: &str) -> Result<RunRecord, RunError> {
        let done = self.live().runs.get(&id).map(|l| l.done.clone());
        let Some(mut done) = done else {
            let run = self.store.get_run(id).await?;
            return Err(if run.state.is_terminal() {
                RunError::Ended(id)
            } else {
                RunError::NotLive(id)
            });
        };
        self.store
            .audit(actor, "run.cancel", &id.to_string(), json!({}))
            .await?;
        self.request_stop(id, Stop::Operator);
        let wait = self.grace().saturating_add(Duration::from_secs(2));
        let _ = tokio::time::timeout(wait, done.wait_for(|d| *d)).await;
        Ok(self.store.get_run(id).await?)
    }

    /// Refuses new runs, terminates live ones and waits for their outcomes
    /// (`failed{infrastructure, server_shutdown}`) to be saved.
    pub async fn shutdown(&self) {
        let waits: Vec<watch::Receiver<bool>> = {
            let mut live = self.live();
            live.closed = true;
            live.runs
                .values_mut()
                .map(|l| {
                    l.stop.get_or_insert(Stop::Shutdown);
                    l.canceller.cancel();
                    l.done.clone()
                })
                .collect()
        };
        // The supervisor gives up on unkillable processes after 10 s of
        // SIGKILL; allow for that, the grace period and saving the outcome.
        let deadline =
            tokio::time::Instant::now() + self.grace().saturating_add(Duration::from_secs(15));
        for mut w in waits {
            let _ = tokio::time::timeout_at(deadline, w.wait_for(|d| *d)).await;
        }
        let stuck: Vec<RunId> = self.live().runs.keys().copied().collect();
        for id in stuck {
            let marker = id.to_string();
            match tokio::task::spawn_blocking(move || warden_exec::kill_orphaned_run(&marker)).await
            {
                Ok(killed) => {
                    tracing::error!(run = %id, killed, "run did not finish before shutdown; its record stays running until the next start settles it");
                }
                Err(e) => {
                    tracing::error!(run = %id, error = %e, "run did not finish before shutdown and its processes could not be looked for; its record stays running until the next start settles it");
                }
            }
        }
    }
}
