//! Adapter commands (`adapter-command/v1`): the envelope is checked before
//! any task exists (a refusal is audited and stores nothing); a valid one
//! runs through the process runner with the `AIWG_A2A_*` environment, its
//! output saved as one artifact per chunk.

use serde_json::json;
use warden_core::{Message, TaskId, Timestamp};

use super::command::{ProcessPlan, PromptSetup};
use super::{SendContext, TaskEngine, Work};
use crate::adapter::{self, ADAPTER, ADAPTER_URI, AdapterCommand, HITL_URI, Refusal};
use crate::instance::Instance;
use crate::jsonrpc::A2aError;
use crate::process::ProcessRequest;

/// Output an adapter command may print in all (16 MiB).
pub const ADAPTER_MAX_OUTPUT: u64 = 16 << 20;

impl TaskEngine {
    /// What works `message`: an adapter command when it carries a valid
    /// envelope, the instance's runtime when it carries none.
    pub(super) async fn plan(
        &self,
        instance: &Instance,
        message: &Message,
        ctx: &SendContext,
    ) -> Result<Work, A2aError> {
        let Some(envelope) = adapter::envelope(message, ctx.metadata.as_ref()) else {
            return Ok(Work::Runtime);
        };
        let checked = match (&instance.workspace, &message.task_id) {
            (None, _) => Err(Refusal {
                rule: "instance.adapter_supported",
                field: String::new(),
                message: format!("instance {} takes no adapter commands", instance.name),
            }),
            (Some(_), Some(task)) => Err(Refusal {
                rule: "envelope.new_task",
                field: String::new(),
                message: format!(
                    "an adapter command starts a new task; send it without taskId (not to {task})"
                ),
            }),
            (Some(ws), None) => adapter::validate(envelope, ws),
        };
        match checked {
            Ok(mut cmd) => {
                // Prompts are answered only when the request also activated hitl-prompt/v1.
                cmd.text_line &= ctx.extensions.iter().any(|e| e == HITL_URI);
                Ok(Work::Adapter(cmd))
            }
            Err(r) => {
                let field = if r.field.is_empty() {
                    format!("metadata[{ADAPTER_URI}]")
                } else {
                    format!("metadata[{ADAPTER_URI}].{}", r.field)
                };
                let detail = json!({ "rule": r.rule, "field": field, "message": r.message });
                if let Err(e) = self
                    .store
                    .audit(
                        &format!("a2a:{}", instance.name),
                        "adapter.refused",
                        &message.message_id,
                        detail,
                    )
                    .await
                {
                    // Not recorded: say so rather than refuse silently.
                    tracing::error!(error = %e, rule = r.rule, "cannot audit an adapter refusal");
                    return Err(A2aError::Internal);
                }
                Err(A2aError::RuleViolated {
                    rule: r.rule.to_owned(),
                    field,
                    message: r.message,
                })
            }
        }
    }

    /// Runs a validated adapter command for task `id`.
    pub(super) async fn adapter(
        &self,
        instance: &Instance,
        cmd: &AdapterCommand,
        id: TaskId,
        context_id: &str,
        input: &Message,
    ) -> Result<(), A2aError> {
        let deadline = Timestamp::from_millis(
            Timestamp::now().as_millis()
                + u64::try_from(cmd.timeout.as_millis()).unwrap_or(u64::MAX),
        );
        let plan = ProcessPlan {
            request: ProcessRequest {
                argv: cmd.argv.clone(),
                cwd: cmd.working_dir.clone(),
                env: vec![
                    ("AIWG_A2A_ADAPTER".into(), ADAPTER.into()),
                    ("AIWG_A2A_ADAPTER_MODE".into(), cmd.mode.as_str().into()),
                    ("AIWG_A2A_TASK_ID".into(), id.to_string()),
                    ("AIWG_A2A_CONTEXT_ID".into(), context_id.to_owned()),
                    ("AIWG_A2A_MESSAGE_ID".into(), input.message_id.clone()),
                    ("AIWG_A2A_INSTANCE_ID".into(), instance.name.clone()),
                    ("AIWG_A2A_DEADLINE".into(), deadline.to_string()),
                ],
                timeout: cmd.timeout,
                max_output: ADAPTER_MAX_OUTPUT,
                actor: format!("a2a:{}", instance.name),
                // Prompts are answered on the terminal the command runs on.
                pty: cmd.text_line,
                stdin: cmd.text_line,
                isolation: instance.isolation.clone(),
            },
            per_chunk: true,
            prompts: cmd.text_line.then(|| PromptSetup {
                instance: instance.name.clone(),
                deadline,
            }),
        };
        self.run_process(plan, id, context_id).await
    }
}
