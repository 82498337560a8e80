//! The A2A task engine's process runner: command instances run through the
//! same run service as `/api/v1/runs`, so they are recorded, bounded and
//! cancelled the same way.

use std::sync::Arc;

use warden_a2a::process::{BoxFuture, ProcessRequest, ProcessRunner, Started};
use warden_core::{RunId, RunSpec};

use crate::runs::RunService;

/// [`ProcessRunner`] over a [`RunService`].
pub struct ServiceRunner(pub Arc<RunService>);

impl ProcessRunner for ServiceRunner {
    fn start(&self, request: ProcessRequest) -> BoxFuture<'_, Result<Started, String>> {
        Box::pin(async move {
            let mut spec = RunSpec::new(
                request.argv,
                request.cwd,
                request.timeout,
                request.max_output,
            );
            spec.env = request.env;
            let (run, events) = self
                .0
                .start_observed(spec, &request.actor)
                .await
                .map_err(|e| e.to_string())?;
            Ok(Started {
                run: run.id,
                events,
            })
        })
    }

    fn stop(&self, run: RunId) {
        self.0.stop(run);
    }
}
