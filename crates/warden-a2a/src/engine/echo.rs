//! The `echo` runtime: in process, no child.

use warden_core::{Artifact, Message, TaskId, TaskState};
use warden_store::{StoreError, TaskChange};

use super::{TaskEngine, agent_message, status, store_error};
use crate::jsonrpc::A2aError;

impl TaskEngine {
    /// The echo runtime: working, an artifact with the user's parts, then
    /// completed with an agent message carrying them, saved as one
    /// transaction (one durable commit, the events in order). A pending
    /// cancel is honoured first; a task that already ended keeps its ending.
    pub(super) async fn echo(
        &self,
        id: TaskId,
        context_id: &str,
        input: &Message,
    ) -> Result<(), A2aError> {
        if self.cancel_requested(id) {
            return self.record_end(id, status(TaskState::Canceled, None)).await;
        }
        let artifact = Artifact {
            artifact_id: uuid::Uuid::now_v7().to_string(),
            name: Some("echo".into()),
            description: None,
            parts: input.parts.clone(),
            metadata: None,
            extensions: vec![],
        };
        let reply = agent_message(id, context_id, input.parts.clone());
        let changes = vec![
            TaskChange::Status(status(TaskState::Working, None)),
            TaskChange::Artifact {
                artifact,
                append: false,
                last_chunk: true,
            },
            TaskChange::Status(status(TaskState::Completed, Some(reply))),
        ];
        match self.store.update_task(id, changes).await {
            Ok(_) | Err(StoreError::Rejected(_)) => Ok(()),
            Err(e) => Err(store_error(e, &id.to_string())),
        }
    }
}
