//! The A2A task engine's process runner: command instances run through the
//! same run service as `/api/v1/runs`, so they are recorded, bounded and
//! cancelled the same way.

use std::sync::Arc;

use warden_a2a::process::{BoxFuture, ProcessRequest, ProcessRunner, Started};
use warden_core::{Outcome, RunId, RunSpec, StdinMode, Terminal};

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
                    spec.argv = c.argv(&spec.cwd, &spec.argv, uid.as_raw(), gid.as_raw());
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
