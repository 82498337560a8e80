//! `hitl-prompt/v1`: a prompt in an adapter command's output (see
//! `warden_core::prompt`) pauses the task in `input-required` with an
//! envelope naming a fresh prompt id; an answer claims that prompt
//! atomically and goes, with one newline, to that exact process's stdin.
//! Pending prompts live in memory with the process they belong to: after
//! a restart there is nothing to deliver to, and answers are refused.

use serde_json::{Value, json};
use warden_core::{Message, Part, RunId, Task, TaskId, TaskState, Timestamp};
use warden_store::{StoreError, TaskChange};

use super::{TaskEngine, agent_message, lock, status, store_error};
use crate::adapter::HITL_URI;
use crate::instance::Instance;
use crate::jsonrpc::A2aError;

/// A prompt waiting for its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingPrompt {
    pub prompt_id: String,
    pub task_id: TaskId,
    pub context_id: String,
    pub instance: String,
    /// The prompt line, as shown.
    pub prompt: String,
    /// The command's deadline; an answer after it finds the task ended.
    pub deadline: Timestamp,
    run: RunId,
    /// The status message that shows the prompt, to restore it.
    shown: Message,
}

impl PendingPrompt {
    /// The `hitl-prompt/v1` envelope (also the operator API's shape).
    pub fn envelope(&self) -> Value {
        json!({
            "prompt_id": self.prompt_id,
            "prompt": self.prompt,
            "instance_id": self.instance,
            "task_id": self.task_id.to_string(),
            "context_id": self.context_id,
            "deadline": self.deadline,
        })
    }
}

/// Why an answer was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerError {
    /// The answer itself is unacceptable; `rule` names why.
    Invalid { rule: &'static str, message: String },
    /// No such prompt is waiting: already answered, replaced by later
    /// output, or its process is gone (a restart, the deadline).
    Stale(String),
    /// The answer did not reach the process; `restored` says whether the
    /// prompt is waiting again.
    NotDelivered { why: String, restored: bool },
    /// The store failed.
    Store(String),
}

impl AnswerError {
    /// The A2A error for it.
    pub fn to_a2a(&self) -> A2aError {
        match self {
            Self::Invalid { rule, message } => A2aError::RuleViolated {
                rule: (*rule).to_owned(),
                field: format!("message.metadata[{HITL_URI}]"),
                message: message.clone(),
            },
            Self::Stale(why) => A2aError::RuleViolated {
                rule: "hitl.prompt_waiting".to_owned(),
                field: format!("message.metadata[{HITL_URI}].prompt_id"),
                message: why.clone(),
            },
            Self::NotDelivered { why, restored } => A2aError::UnsupportedOperation(format!(
                "the answer did not reach the process ({why}); {}",
                if *restored {
                    "the prompt is waiting again"
                } else {
                    "the task has moved on"
                }
            )),
            Self::Store(_) => A2aError::Internal,
        }
    }

    /// A message for people.
    pub fn message(&self) -> String {
        match self {
            Self::Invalid { message, .. } | Self::Stale(message) | Self::Store(message) => {
                message.clone()
            }
            Self::NotDelivered { .. } => self.to_a2a().message(),
        }
    }
}

fn invalid(rule: &'static str, message: impl Into<String>) -> AnswerError {
    AnswerError::Invalid {
        rule,
        message: message.into(),
    }
}

/// An answer's text: [`warden_core::prompt::check_answer`].
fn check_text(text: &str) -> Result<(), AnswerError> {
    warden_core::prompt::check_answer(text).map_err(|(rule, message)| invalid(rule, message))
}

/// What an answering message carries under the extension's URI.
struct AnswerEnvelope {
    prompt_id: String,
    text: String,
}

fn answer_envelope(v: &Value) -> Result<AnswerEnvelope, AnswerError> {
    let shape = || invalid("hitl.envelope", "must be {\"prompt_id\": …, \"text\": …}");
    let Value::Object(m) = v else {
        return Err(shape());
    };
    if m.keys().any(|k| k != "prompt_id" && k != "text") {
        return Err(shape());
    }
    match (m.get("prompt_id"), m.get("text")) {
        (Some(Value::String(p)), Some(Value::String(t))) => Ok(AnswerEnvelope {
            prompt_id: p.clone(),
            text: t.clone(),
        }),
        _ => Err(shape()),
    }
}

/// The answer envelope a message carries, if it is an answer.
pub(super) fn answer_in(message: &Message) -> Option<&Value> {
    message.metadata.as_ref()?.get(HITL_URI)
}

impl TaskEngine {
    /// The text of the prompt of `id` that is waiting, if one is.
    pub(super) fn waiting_prompt(&self, id: TaskId) -> Option<String> {
        lock(&self.prompts).get(&id).map(|p| p.prompt.clone())
    }

    /// Pauses task `id` on `prompt`, printed by `run`, saving `output` (the
    /// chunk that shows it) in the same commit.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn raise_prompt(
        &self,
        instance: &str,
        run: RunId,
        id: TaskId,
        context_id: &str,
        prompt: String,
        deadline: Timestamp,
        output: TaskChange,
    ) -> Result<(), StoreError> {
        let mut pending = PendingPrompt {
            prompt_id: uuid::Uuid::now_v7().to_string(),
            task_id: id,
            context_id: context_id.to_owned(),
            instance: instance.to_owned(),
            prompt: prompt.clone(),
            deadline,
            run,
            shown: agent_message(id, context_id, vec![Part::text(prompt)]),
        };
        pending.shown.metadata = Some(serde_json::Map::from_iter([(
            HITL_URI.to_owned(),
            pending.envelope(),
        )]));
        let message = pending.shown.clone();
        let _one_at_a_time = self.prompt_gate.lock().await;
        let paused = TaskChange::Status(status(TaskState::InputRequired, Some(message)));
        match self.store.update_task(id, vec![output, paused]).await {
            Ok(_) => {
                // Answerable only once saved (a prompt it replaces is gone).
                lock(&self.prompts).insert(id, pending);
                self.interrupt(id);
                Ok(())
            }
            Err(StoreError::Rejected(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The process went on without an answer (more output) or ended: the
    /// prompt no longer waits; with `resume`, the task is working again.
    pub(super) async fn withdraw_prompt(&self, id: TaskId, resume: bool) -> Result<(), StoreError> {
        if lock(&self.prompts).remove(&id).is_none() || !resume {
            return Ok(());
        }
        match self
            .store
            .set_task_status(id, status(TaskState::Working, None))
            .await
        {
            Ok(_) | Err(StoreError::Rejected(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Every prompt waiting for an answer.
    pub fn pending_prompts(&self) -> Vec<PendingPrompt> {
        let mut all: Vec<PendingPrompt> = lock(&self.prompts).values().cloned().collect();
        all.sort_by(|a, b| a.prompt_id.cmp(&b.prompt_id));
        all
    }

    /// Takes the waiting prompt of `task` if it is `prompt_id` (and, when
    /// given, of that instance and context): only one answer can claim it.
    fn claim(
        &self,
        task: TaskId,
        prompt_id: &str,
        instance: Option<&str>,
        context_id: Option<&str>,
    ) -> Result<PendingPrompt, AnswerError> {
        let mut prompts = lock(&self.prompts);
        let Some(p) = prompts.get(&task) else {
            return Err(AnswerError::Stale(format!(
                "no prompt of task {task} is waiting for an answer (already answered, withdrawn, or its process is gone)"
            )));
        };
        if p.prompt_id != prompt_id {
            return Err(AnswerError::Stale(format!(
                "prompt {prompt_id} is not the one waiting on task {task}"
            )));
        }
        if Timestamp::now().as_millis() > p.deadline.as_millis() {
            return Err(invalid(
                "hitl.deadline_passed",
                format!("the command's deadline ({}) has passed", p.deadline),
            ));
        }
        if instance.is_some_and(|i| i != p.instance)
            || context_id.is_some_and(|c| c != p.context_id)
        {
            return Err(invalid(
                "hitl.prompt_mismatch",
                "the prompt belongs to another instance or context",
            ));
        }
        prompts
            .remove(&task)
            .ok_or_else(|| AnswerError::Stale(format!("prompt {prompt_id} was just taken")))
    }

    /// Takes the answer for the claimed prompt: records it with the task
    /// back at `working` (one commit, before the process can print its next
    /// prompt), then writes it and a newline to that process. If the write
    /// fails, the prompt waits again only if nothing happened to the task
    /// in between.
    async fn accept(
        &self,
        claimed: PendingPrompt,
        answer: Message,
        text: &str,
    ) -> Result<(), AnswerError> {
        let Some(runner) = self.runner.clone() else {
            return Err(AnswerError::NotDelivered {
                why: "no process runner".into(),
                restored: false,
            });
        };
        let id = claimed.task_id;
        let recorded = self
            .store
            .update_task(
                id,
                vec![
                    TaskChange::Message(answer),
                    TaskChange::Status(status(TaskState::Working, None)),
                ],
            )
            .await;
        let seq = match recorded {
            Ok(seq) => seq,
            Err(StoreError::Rejected(_)) => {
                return Err(AnswerError::Stale(format!(
                    "task {id} has ended; its prompt cannot be answered"
                )));
            }
            Err(e) => {
                // Not recorded, not delivered: the prompt waits again.
                let why = store_error(e, &id.to_string()).message();
                lock(&self.prompts).entry(id).or_insert(claimed);
                return Err(AnswerError::Store(why));
            }
        };
        let mut line = text.as_bytes().to_vec();
        line.push(b'\n');
        let Err(why) = runner.write_stdin(claimed.run, line).await else {
            return Ok(());
        };
        // Back to waiting only if nothing happened to the task since the
        // answer was recorded (checked in the same transaction).
        let paused = TaskChange::Status(status(
            TaskState::InputRequired,
            Some(claimed.shown.clone()),
        ));
        let restored = self
            .store
            .update_task_if_unchanged(id, seq, vec![paused])
            .await
            .is_ok();
        if restored {
            lock(&self.prompts).entry(id).or_insert(claimed);
        }
        Err(AnswerError::NotDelivered { why, restored })
    }

    /// The operator's answer to prompt `prompt_id` (`POST
    /// /api/v1/hitl/{id}/respond`): recorded in the task's history and the
    /// audit log, then delivered.
    pub async fn answer_prompt(
        &self,
        prompt_id: &str,
        text: &str,
        actor: &str,
    ) -> Result<Task, AnswerError> {
        check_text(text)?;
        let _one_at_a_time = self.prompt_gate.lock().await;
        let task = lock(&self.prompts)
            .values()
            .find(|p| p.prompt_id == prompt_id)
            .map(|p| p.task_id)
            .ok_or_else(|| AnswerError::Stale(format!("no prompt {prompt_id} is waiting")))?;
        let claimed = self.claim(task, prompt_id, None, None)?;
        let audited = self
            .store
            .audit(
                actor,
                "hitl.respond",
                prompt_id,
                json!({ "task_id": task.to_string(), "bytes": text.len() }),
            )
            .await;
        if let Err(e) = audited {
            // Unrecorded, so not taken: the prompt waits again.
            lock(&self.prompts).entry(task).or_insert(claimed);
            return Err(AnswerError::Store(e.to_string()));
        }
        let message = Message {
            message_id: uuid::Uuid::now_v7().to_string(),
            context_id: Some(claimed.context_id.clone()),
            task_id: Some(task.to_string()),
            role: warden_core::Role::User,
            parts: vec![Part::text(text)],
            metadata: Some(serde_json::Map::from_iter([(
                HITL_URI.to_owned(),
                json!({ "prompt_id": prompt_id, "text": text, "via": actor }),
            )])),
            extensions: vec![],
            reference_task_ids: vec![],
        };
        self.accept(claimed, message, text).await?;
        self.store
            .get_task(task)
            .await
            .map(|(_, t)| t)
            .map_err(|e| AnswerError::Store(e.to_string()))
    }

    /// A client's answer: a message on the task carrying `{prompt_id,
    /// text}` under the extension's URI. Returns the task's id once the
    /// answer reached the process.
    pub(super) async fn answer_message(
        &self,
        instance: &Instance,
        message: Message,
    ) -> Result<TaskId, A2aError> {
        let envelope = answer_in(&message).ok_or(A2aError::Internal)?;
        let answer = answer_envelope(envelope).map_err(|e| e.to_a2a())?;
        if message.task_id.is_none() {
            return Err(invalid(
                "hitl.task_id_required",
                "an answer names the task whose prompt it answers (message.taskId)",
            )
            .to_a2a());
        }
        check_text(&answer.text).map_err(|e| e.to_a2a())?;
        let id = message.task_id.clone().unwrap_or_default();
        let task = self.owned_task(instance, &id).await?;
        if task.status.state.is_terminal() {
            return Err(A2aError::UnsupportedOperation(format!(
                "task {id} has ended ({}); its prompt cannot be answered",
                task.status.state.as_str()
            )));
        }
        let _one_at_a_time = self.prompt_gate.lock().await;
        let claimed = self
            .claim(
                task.id,
                &answer.prompt_id,
                Some(&instance.name),
                message.context_id.as_deref(),
            )
            .map_err(|e| e.to_a2a())?;
        let mut message = message;
        message.context_id = Some(claimed.context_id.clone());
        self.accept(claimed, message, &answer.text)
            .await
            .map_err(|e| e.to_a2a())?;
        Ok(task.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden_core::prompt::MAX_ANSWER;

    #[test]
    fn answers_are_one_short_line() {
        assert!(check_text("yes").is_ok());
        assert!(check_text(&"y".repeat(MAX_ANSWER)).is_ok());
        assert_eq!(MAX_ANSWER, 4095);
        assert!(matches!(
            check_text(&"y".repeat(MAX_ANSWER + 1)),
            Err(AnswerError::Invalid {
                rule: "hitl.text_length",
                ..
            })
        ));
        for bad in ["y\n", "y\r", "\u{1b}[A", "a\u{0}b", "tab\there"] {
            assert!(
                matches!(
                    check_text(bad),
                    Err(AnswerError::Invalid {
                        rule: "hitl.text_control",
                        ..
                    })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_answer_envelope_is_exact() {
        assert!(answer_envelope(&json!({"prompt_id": "p", "text": "y"})).is_ok());
        for bad in [
            json!("y"),
            json!({"prompt_id": "p"}),
            json!({"prompt_id": "p", "text": "y", "x": 1}),
            json!({"prompt_id": 1, "text": "y"}),
        ] {
            assert!(answer_envelope(&bad).is_err(), "{bad}");
        }
    }
}
