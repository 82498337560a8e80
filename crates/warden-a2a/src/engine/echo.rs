//! The `echo` runtime: in process, no child.

use warden_core::{Artifact, Message, TaskId, TaskState};
use warden_store::StoreError;

use super::{TaskEngine, agent_message, status, store_error};
use crate::jsonrpc::A2aError;

impl TaskEngine {
    /// The echo runtime: working, an artifact with the user's parts, then
    /// completed with an agent message carrying them. A pending cancel is
    /// honoured between steps; a step refused because the task already
    /// ended ends the run.
    pub(super) async fn echo(
        &self,
        id: TaskId,
        context_id: &str,
        input: &Message,
    ) -> Result<(), A2aError> {
        let key = id.to_string();
        for step in 0..3 {
            if self.cancel_requested(id) {
                return self.record_end(id, status(TaskState::Canceled, None)).await;
            }
            let recorded = match step {
                0 => {
                    self.store
                        .set_task_status(id, status(TaskState::Working, None))
                        .await
                }
                1 => {
                    let artifact = Artifact {
                        artifact_id: uuid::Uuid::now_v7().to_string(),
                        name: Some("echo".into()),
                        description: None,
                        parts: input.parts.clone(),
                        metadata: None,
                        extensions: vec![],
                    };
                    self.store
                        .add_task_artifact(id, artifact, false, true)
                        .await
                }
                _ => {
                    let reply = agent_message(id, context_id, input.parts.clone());
                    self.store
                        .set_task_status(id, status(TaskState::Completed, Some(reply)))
                        .await
                }
            };
            match recorded {
                Ok(_) => {}
                Err(StoreError::Rejected(_)) => return Ok(()),
                Err(e) => return Err(store_error(e, &key)),
            }
        }
        Ok(())
    }
}
