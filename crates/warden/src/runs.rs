//! The run service: wires the supervisor to the store. Every run is recorded
//! before it is spawned, each output chunk and the outcome are saved as they
//! happen, and nothing is reported that the store has not made durable.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::sync::watch;
use warden_core::{CoreError, Outcome, RunId, RunLimits, RunRecord, RunSpec};
use warden_exec::{Canceller, RunEvent, RunHandle, SpawnError, Supervisor};
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
    /// The run is being recorded but not yet spawned; retry shortly.
    #[error("run {0} is starting; retry the cancel")]
    Starting(RunId),
    /// The server is shutting down and takes no new runs.
    #[error("the server is shutting down")]
    ShuttingDown,
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
}

/// Starts, tracks and cancels runs.
pub struct RunService {
    store: Store,
    supervisor: Supervisor,
    limits: RunLimits,
    live: Mutex<HashMap<RunId, Live>>,
    closed: Mutex<bool>,
}

impl RunService {
    pub fn new(store: Store, supervisor: Supervisor, limits: RunLimits) -> Arc<Self> {
        Arc::new(Self {
            store,
            supervisor,
            limits,
            live: Mutex::new(HashMap::new()),
            closed: Mutex::new(false),
        })
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, Live>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The grace period runs get between SIGTERM and SIGKILL.
    pub fn grace(&self) -> Duration {
        self.supervisor.config().grace
    }

    /// Validates, records, spawns. A spec that fails validation or preflight
    /// writes nothing; a spawn that fails after recording is recorded as an
    /// infrastructure failure.
    pub async fn start(
        self: &Arc<Self>,
        spec: RunSpec,
        actor: &str,
    ) -> Result<RunRecord, RunError> {
        if *self.closed.lock().unwrap_or_else(|p| p.into_inner()) {
            return Err(RunError::ShuttingDown);
        }
        spec.validate(&self.limits)?;
        self.supervisor
            .preflight(&spec)
            .map_err(RunError::Unstartable)?;
        let record = self
            .store
            .create_run(RunRecord::new(spec.clone()), actor)
            .await?;
        let id = record.id;
        let handle = match self.supervisor.spawn(&id.to_string(), &spec) {
            Ok(h) => h,
            Err(e) => {
                self.store.finish_run(id, e.outcome()).await?;
                return Ok(self.store.get_run(id).await?);
            }
        };
        let (done_tx, done) = watch::channel(false);
        self.live().insert(
            id,
            Live {
                canceller: handle.canceller(),
                stop: None,
                done,
            },
        );
        if let Err(e) = self.store.mark_started(id, handle.pid()).await {
            // Unrecorded work must not run: stop it and report why.
            tracing::error!(run = %id, error = %e, "cannot record run start; stopping it");
            self.request_stop(id, Stop::StoreFailed);
        }
        let this = Arc::clone(self);
        tokio::spawn(async move {
            this.pump(id, handle).await;
            this.live().remove(&id);
            let _ = done_tx.send(true);
        });
        Ok(self.store.get_run(id).await?)
    }

    /// Saves output as it comes and the outcome at the end.
    async fn pump(&self, id: RunId, mut handle: RunHandle) {
        let mut store_error: Option<String> = None;
        let outcome = loop {
            match handle.next().await {
                Some(RunEvent::Output(chunk)) => {
                    if store_error.is_some() {
                        continue;
                    }
                    if let Err(e) = self
                        .store
                        .append_output(id, chunk.seq, chunk.stream_name(), chunk.data)
                        .await
                    {
                        tracing::error!(run = %id, error = %e, "cannot save output; stopping the run");
                        store_error = Some(e.to_string());
                        self.request_stop(id, Stop::StoreFailed);
                    }
                }
                Some(RunEvent::Finished(o)) => break o,
                None => break Outcome::infrastructure("supervisor_lost", None),
            }
        };
        let stop = self.live().get(&id).and_then(|l| l.stop);
        let outcome = match (stop, outcome) {
            // The program ended on its own before the stop landed: that is the truth.
            (Some(Stop::Shutdown), Outcome::Cancelled) => Outcome::infrastructure(
                "server_shutdown",
                Some("the server shut down and terminated the run".into()),
            ),
            (Some(Stop::StoreFailed), Outcome::Cancelled) => Outcome::infrastructure(
                "store_unavailable",
                Some(store_error.unwrap_or_else(|| "the run could not be recorded".into())),
            ),
            (_, o) => o,
        };
        if let Err(e) = self.store.finish_run(id, outcome.clone()).await {
            tracing::error!(run = %id, ?outcome, error = %e, "cannot save the outcome; it will be reported as server_restart after a restart");
        }
    }

    fn request_stop(&self, id: RunId, why: Stop) -> bool {
        let mut live = self.live();
        let Some(entry) = live.get_mut(&id) else {
            return false;
        };
        entry.stop.get_or_insert(why);
        entry.canceller.cancel();
        true
    }

    /// Cancels a live run and waits (up to the grace period and a margin) for
    /// its outcome to be saved; returns the run as the store has it then.
    pub async fn cancel(&self, id: RunId, actor: &str) -> Result<RunRecord, RunError> {
        let done = self.live().get(&id).map(|l| l.done.clone());
        let Some(mut done) = done else {
            let run = self.store.get_run(id).await?;
            return Err(if run.state.is_terminal() {
                RunError::Ended(id)
            } else {
                RunError::Starting(id)
            });
        };
        self.store
            .audit(actor, "run.cancel", &id.to_string(), json!({}))
            .await?;
        self.request_stop(id, Stop::Operator);
        let wait = self.grace() + Duration::from_secs(2);
        let _ = tokio::time::timeout(wait, done.wait_for(|d| *d)).await;
        Ok(self.store.get_run(id).await?)
    }

    /// Refuses new runs, terminates live ones and waits for their outcomes
    /// (`failed{infrastructure, server_shutdown}`) to be saved.
    pub async fn shutdown(&self) {
        *self.closed.lock().unwrap_or_else(|p| p.into_inner()) = true;
        let ids: Vec<RunId> = self.live().keys().copied().collect();
        let mut waits = Vec::new();
        for id in ids {
            if let Some(l) = self.live().get(&id) {
                waits.push(l.done.clone());
            }
            self.request_stop(id, Stop::Shutdown);
        }
        let limit = self.grace() + Duration::from_secs(5);
        for mut w in waits {
            let _ = tokio::time::timeout(limit, w.wait_for(|d| *d)).await;
        }
    }
}
