//! The A2A task engine's process runner: command instances run through the
//! same run service as `/api/v1/runs`, so they are recorded, bounded and
//! cancelled the same way.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;

use warden_a2a::process::{BoxFuture, ProcessRequest, ProcessRunner, Started};
use warden_core::{Outcome, ProcessEvent, RunId, RunSpec, StdinMode, Terminal};

use crate::runs::{RunError, RunService};
use crate::tiers::Tiers;
use warden_core::confine::Isolation;

/// The infrastructure failure a task reports when its run could not start.
fn unstarted(e: RunError) -> Outcome {
    match e {
        RunError::Unstartable(spawn) => spawn.outcome(),
        RunError::Invalid(e) => Outcome::infrastructure("invalid_run", Some(e.to_string())),
        RunError::TooMany(n) => Outcome::infrastructure(
            "capacity",
            Some(format!(
                "{n} runs are already live, the configured maximum (runs.max_live_runs)"
            )),
        ),
        RunError::ShuttingDown => Outcome::infrastructure(
            "server_shutdown",
            Some("the server is shutting down".into()),
        ),
        // Details stay in the server log, not in what clients see.
        RunError::Store(e) => {
            tracing::error!(error = %e, "cannot record a task's run");
            Outcome::infrastructure("store_unavailable", None)
        }
        other => {
            tracing::error!(error = %other, "cannot start a task's run");
            Outcome::infrastructure("internal", None)
        }
    }
}

/// Forwards a container run's events, but its end only once the container
/// is known to be gone: a SIGKILLed engine client leaves its container
/// running, so `rm -f` runs after every container run, and a container that
/// was still there (or could not be removed) is what the task reports.
fn reap_container(
    mut events: mpsc::Receiver<ProcessEvent>,
    engine: PathBuf,
    name: String,
) -> mpsc::Receiver<ProcessEvent> {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        // Drained to the end even when nobody listens any more: the
        // container is removed whatever happens to the task.
        let mut listening = true;
        let mut ended = false;
        while let Some(ev) = events.recv().await {
            let ev = match ev {
                ProcessEvent::Ended(outcome) => {
                    ended = true;
                    ProcessEvent::Ended(remove_container(&engine, &name, outcome).await)
                }
                other => other,
            };
            if listening && tx.send(ev).await.is_err() {
                listening = false;
            }
        }
        if !ended {
            let lost = Outcome::infrastructure("run_lost", None);
            let _ = remove_container(&engine, &name, lost).await;
        }
    });
    rx
}

async fn remove_container(engine: &Path, name: &str, outcome: Outcome) -> Outcome {
    let limit = std::time::Duration::from_secs(30);
    // `rm --force` succeeds on a missing container with current engines,
    // so ask first whether there is one (`--rm` normally removed it).
    let inspect = tokio::process::Command::new(engine)
        .args(["container", "inspect", "--format", "{{.Id}}", name])
        .stdin(std::process::Stdio::null())
        .output();
    match tokio::time::timeout(limit, inspect).await {
        Ok(Ok(out)) if !out.status.success() => return outcome,
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            return Outcome::infrastructure(
                "container_cleanup_failed",
                Some(format!(
                    "{} container inspect {name}: {e}",
                    engine.display()
                )),
            );
        }
        Err(_) => {
            return Outcome::infrastructure(
                "container_cleanup_failed",
                Some(format!(
                    "{} container inspect {name}: no answer in 30 s",
                    engine.display()
                )),
            );
        }
    }
    let rm = tokio::process::Command::new(engine)
        .args(["rm", "--force", name])
        .stdin(std::process::Stdio::null())
        .output();
    match tokio::time::timeout(limit, rm).await {
        // Removed now: it had outlived its client.
        Ok(Ok(out)) if out.status.success() => {
            tracing::warn!(container = name, "a container outlived its run; removed it");
            Outcome::infrastructure(
                "container_outlived_client",
                Some(format!(
                    "the engine client ended ({}) while container {name} still ran; it was removed",
                    outcome.describe()
                )),
            )
        }
        Ok(Ok(out)) => Outcome::infrastructure(
            "container_cleanup_failed",
            Some(format!(
                "{} rm --force {name}: {}",
                engine.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )),
        ),
        Ok(Err(e)) => Outcome::infrastructure(
            "container_cleanup_failed",
            Some(format!("{} rm --force {name}: {e}", engine.display())),
        ),
        Err(_) => Outcome::infrastructure(
            "container_cleanup_failed",
            Some(format!(
                "{} rm --force {name}: no answer in 30 s",
                engine.display()
            )),
        ),
    }
}

/// [`ProcessRunner`] over a [`RunService`], in the instance's tier.
pub struct ServiceRunner {
    pub runs: Arc<RunService>,
    pub tiers: Arc<Tiers>,
}

impl ProcessRunner for ServiceRunner {
    fn start(&self, request: ProcessRequest) -> BoxFuture<'_, Result<Started, Outcome>> {
        Box::pin(async move {
            let mut spec = RunSpec::new(
                request.argv,
                request.cwd,
                request.timeout,
                request.max_output,
            );
            spec.env = request.env;
            let mut container = None;
            match request.isolation {
                Isolation::Host => {}
                Isolation::Confined(policy) => {
                    // Confined work starts only while the tier is proven.
                    self.tiers.confined_ready().map_err(|why| {
                        Outcome::infrastructure("confinement_uncertified", Some(why))
                    })?;
                    spec.confine = Some(policy);
                }
                Isolation::Container(c) => {
                    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
                    let name = format!("warden-{}", RunId::new());
                    spec.argv = c.argv(&name, &spec.cwd, &spec.argv, uid.as_raw(), gid.as_raw());
                    container = Some((c.engine.clone(), name));
                }
            }
            if request.pty {
                spec.terminal = Terminal::Pty;
            }
            if request.stdin {
                spec.stdin = StdinMode::Open;
            }
            let (run, events) = self
                .runs
                .start_observed(spec, &request.actor)
                .await
                .map_err(unstarted)?;
            let events = match container {
                None => events,
                Some((engine, name)) => reap_container(events, engine, name),
            };
            Ok(Started {
                run: run.id,
                events,
            })
        })
    }

    fn stop(&self, run: RunId) {
        self.runs.stop(run);
    }

    fn write_stdin(&self, run: RunId, data: Vec<u8>) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            self.runs
                .write_stdin(run, &data)
                .await
                .map_err(|e| e.to_string())
        })
    }
}
