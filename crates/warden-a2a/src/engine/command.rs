//! The command runtime: each task runs the instance's argv template through
//! the process runner. Output becomes artifact chunks as it is saved; the
//! run's outcome decides the task's final state.

use std::collections::{HashMap, HashSet};

use serde_json::json;
use warden_core::{
    Artifact, FailureKind, Message, Outcome, Part, PartContent, RunId, TaskId, TaskState,
};
use warden_store::{StoreError, TaskChange};

use super::{TaskEngine, agent_message, status};
use crate::instance::{CommandRuntime, Instance};
use crate::jsonrpc::A2aError;
use crate::process::{OutputStream, ProcessEvent, ProcessRequest};
use warden_core::{LastLine, PromptWatch, Timestamp};

/// The user's text: its text parts, one per line.
pub(super) fn message_text(message: &Message) -> String {
    let texts: Vec<&str> = message
        .parts
        .iter()
        .filter_map(|p| match &p.content {
            PartContent::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    texts.join("\n")
}

/// A command instance takes text it can pass as one argv element.
pub(super) fn check_input(message: &Message) -> Result<(), A2aError> {
    let text = message_text(message);
    if text.is_empty() {
        return Err(A2aError::InvalidParams {
            field: "message.parts".into(),
            message: "this instance runs a command and needs a non-empty text part".into(),
        });
    }
    if text.contains('\0') {
        return Err(A2aError::InvalidParams {
            field: "message.parts".into(),
            message: "text for a command cannot contain NUL".into(),
        });
    }
    Ok(())
}

/// Splits a byte stream into UTF-8 text without tearing a character that
/// straddles two chunks; bytes that are not UTF-8 become U+FFFD.
#[derive(Default)]
struct Utf8Chunks {
    carry: Vec<u8>,
}

impl Utf8Chunks {
    fn push(&mut self, data: &[u8]) -> String {
        self.carry.extend_from_slice(data);
        let keep = incomplete_tail(&self.carry);
        let ready: Vec<u8> = self.carry.drain(..self.carry.len() - keep).collect();
        String::from_utf8_lossy(&ready).into_owned()
    }

    fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.carry);
        String::from_utf8_lossy(&rest).into_owned()
    }
}

/// How many trailing bytes start a character that is not complete yet.
fn incomplete_tail(b: &[u8]) -> usize {
    for back in 1..=b.len().min(3) {
        let c = b[b.len() - back];
        if c & 0xC0 == 0x80 {
            continue;
        }
        let need = match c {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        return if need > back { back } else { 0 };
    }
    0
}

/// Whose fault a failed run was, for the status message metadata:
/// `application` (the command's own exit or signal) or `infrastructure`
/// (it could not start, or something outside it ended it).
fn failure(outcome: &Outcome) -> Option<serde_json::Value> {
    match outcome {
        Outcome::Completed | Outcome::Cancelled => None,
        Outcome::Failed(FailureKind::Application { exit_code, signal }) => Some(json!({
            "kind": "application", "exit_code": exit_code, "signal": signal,
        })),
        Outcome::Failed(FailureKind::Infrastructure { reason, detail }) => Some(json!({
            "kind": "infrastructure", "reason": reason, "detail": detail,
        })),
        Outcome::TimedOut => Some(json!({ "kind": "infrastructure", "reason": "timed_out" })),
        Outcome::OutputLimit => Some(json!({ "kind": "infrastructure", "reason": "output_limit" })),
    }
}

/// The task state and the status text for a run's outcome.
fn ending(outcome: &Outcome) -> (TaskState, String) {
    match outcome {
        Outcome::Completed => (TaskState::Completed, "the command exited 0".into()),
        Outcome::Failed(FailureKind::Application { exit_code, signal }) => (
            TaskState::Failed,
            match (exit_code, signal) {
                (Some(c), _) => format!("the command failed: exit code {c}"),
                (None, Some(s)) => format!("the command was killed by signal {s}"),
                (None, None) => "the command failed".into(),
            },
        ),
        Outcome::Failed(FailureKind::Infrastructure { reason, detail }) => (
            TaskState::Failed,
            match detail {
                Some(d) => format!("the command could not run to its end ({reason}): {d}"),
                None => format!("the command could not run to its end ({reason})"),
            },
        ),
        Outcome::TimedOut => (
            TaskState::Failed,
            "the command ran past its deadline and was terminated".into(),
        ),
        Outcome::OutputLimit => (
            TaskState::Failed,
            "the command printed more than its output cap and was killed".into(),
        ),
        Outcome::Cancelled => (
            TaskState::Canceled,
            "the command was canceled; its processes are gone".into(),
        ),
    }
}

/// A process to run for a task, and how its output becomes artifacts.
pub(super) struct ProcessPlan {
    pub request: ProcessRequest,
    /// One artifact per chunk (`{task}-{stream}-{seq}`, adapter commands)
    /// instead of one per stream that chunks append to (`{task}-{stream}`).
    pub per_chunk: bool,
    /// Watch the output for prompts a client may answer (`hitl-prompt/v1`).
    pub prompts: Option<PromptSetup>,
}

/// What a chunk of output does to the task's prompt.
enum After<'a> {
    /// Its last line is a new prompt.
    Raise(String, &'a PromptSetup),
    /// It is plain output: a waiting prompt no longer is.
    Withdraw,
    /// Its last line asks for a secret, which is not offered.
    Restricted(String),
    Nothing,
}

/// What a raised prompt says about where it came from.
pub(super) struct PromptSetup {
    pub instance: String,
    pub deadline: Timestamp,
}

impl TaskEngine {
    /// Runs the instance's argv template for task `id`.
    pub(super) async fn command(
        &self,
        instance: &Instance,
        spec: &CommandRuntime,
        id: TaskId,
        context_id: &str,
        input: &Message,
    ) -> Result<(), A2aError> {
        let plan = ProcessPlan {
            request: ProcessRequest {
                argv: spec.render(&message_text(input)),
                cwd: spec.cwd.clone(),
                env: vec![
                    ("A2A_TASK_ID".into(), id.to_string()),
                    ("A2A_CONTEXT_ID".into(), context_id.to_owned()),
                    ("A2A_INSTANCE".into(), instance.name.clone()),
                ],
                timeout: spec.timeout,
                max_output: spec.max_output,
                actor: format!("a2a:{}", instance.name),
                pty: false,
                stdin: false,
                isolation: instance.isolation.clone(),
            },
            per_chunk: false,
            prompts: None,
        };
        self.run_process(plan, id, context_id).await
    }

    /// Runs `plan` for task `id` until its processes are gone: working,
    /// output as artifacts while it runs, then the state its outcome says.
    pub(super) async fn run_process(
        &self,
        plan: ProcessPlan,
        id: TaskId,
        context_id: &str,
    ) -> Result<(), A2aError> {
        let Some(runner) = self.runner.clone() else {
            tracing::error!(task = %id, "a process to run without a process runner");
            return Err(A2aError::Internal);
        };
        let end = |outcome: &Outcome, run: Option<RunId>| {
            let (state, text) = ending(outcome);
            let mut message = agent_message(id, context_id, vec![Part::text(text)]);
            let mut meta = serde_json::Map::new();
            meta.insert("outcome".into(), json!(outcome));
            if let Some(f) = failure(outcome) {
                meta.insert("failure".into(), f);
            }
            if let Some(run) = run {
                meta.insert("runId".into(), json!(run.to_string()));
            }
            message.metadata = Some(meta);
            status(state, Some(message))
        };
        match self
            .store
            .set_task_status(id, status(TaskState::Working, None))
            .await
        {
            Ok(_) => {}
            Err(StoreError::Rejected(_)) => return Ok(()),
            Err(e) => return Err(super::store_error(e, &id.to_string())),
        }
        if self.cancel_requested(id) {
            return self.record_end(id, end(&Outcome::Cancelled, None)).await;
        }
        let mut started = match runner.start(plan.request).await {
            Ok(s) => s,
            Err(outcome) => return self.record_end(id, end(&outcome, None)).await,
        };
        let run = started.run;
        if self.attach_run(id, run) {
            runner.stop(run);
        }
        let mut text: HashMap<OutputStream, Utf8Chunks> = HashMap::new();
        // The per-stream artifacts a client has seen the start of.
        let mut created: HashSet<OutputStream> = HashSet::new();
        let mut saving = true;
        let mut watch = plan.prompts.as_ref().map(|_| PromptWatch::default());
        // The secret prompt last reported, so it is said once.
        let mut restricted_shown: Option<String> = None;
        while let Some(event) = started.events.recv().await {
            match event {
                ProcessEvent::Output { stream, seq, data } => {
                    let last_line = watch.as_mut().map(|w| w.push(&data));
                    let chunk = text.entry(stream).or_default().push(&data);
                    if !saving || chunk.is_empty() {
                        continue;
                    }
                    let change = if plan.per_chunk {
                        TaskChange::Artifact {
                            artifact: Artifact {
                                artifact_id: format!("{id}-{}-{seq}", stream.as_str()),
                                parts: vec![Part::text(chunk)],
                                ..output_artifact(id, stream)
                            },
                            append: false,
                            last_chunk: true,
                        }
                    } else {
                        TaskChange::Artifact {
                            append: !created.insert(stream),
                            artifact: Artifact {
                                parts: vec![Part::text(chunk)],
                                ..output_artifact(id, stream)
                            },
                            last_chunk: false,
                        }
                    };
                    let after = match (last_line, &plan.prompts) {
                        // The prompt already waiting, still on screen.
                        (Some(LastLine::Prompt(p)), Some(_))
                            if self.waiting_prompt(id).as_deref() == Some(p.as_str()) =>
                        {
                            After::Nothing
                        }
                        // A new prompt (one that replaces another gets a new id).
                        (Some(LastLine::Prompt(p)), Some(s)) => After::Raise(p, s),
                        (Some(LastLine::Restricted(p)), Some(_)) => After::Restricted(p),
                        (Some(LastLine::Output), Some(_)) => After::Withdraw,
                        _ => After::Nothing,
                    };
                    // A prompt is saved with the output that shows it, in one commit.
                    let saved = match &after {
                        After::Raise(p, s) => {
                            self.raise_prompt(
                                &s.instance,
                                run,
                                id,
                                context_id,
                                p.clone(),
                                s.deadline,
                                change,
                            )
                            .await
                        }
                        _ => self.save_change(id, change).await,
                    };
                    if let Err(e) = saved {
                        // The task will say so; the run must not go on unrecorded.
                        tracing::error!(task = %id, %run, error = %e, "cannot save task output; stopping the run");
                        saving = false;
                        runner.stop(run);
                        continue;
                    }
                    if let After::Restricted(p) = &after
                        && restricted_shown.as_deref() != Some(p.as_str())
                    {
                        restricted_shown = Some(p.clone());
                        let _ = self.withdraw_prompt(id, false).await;
                        tracing::info!(task = %id, prompt = %p, "a prompt for a secret is not offered to text-line answers");
                        let why = agent_message(
                            id,
                            context_id,
                            vec![Part::text(format!(
                                "the command asks for a secret ({p}); such prompts are not offered to text-line answers, so it waits until its deadline unless canceled"
                            ))],
                        );
                        let _ = self
                            .save_change(
                                id,
                                TaskChange::Status(status(TaskState::Working, Some(why))),
                            )
                            .await;
                    }
                    // Output that is not a prompt: a waiting prompt was passed by.
                    if matches!(after, After::Withdraw) {
                        let asked = self.withdraw_prompt(id, true).await;
                        if let Err(e) = asked {
                            tracing::error!(task = %id, error = %e, "cannot record a prompt; stopping the run");
                            saving = false;
                            runner.stop(run);
                        }
                    }
                }
                ProcessEvent::Ended(outcome) => {
                    // Its process is gone: nothing can answer its prompt now.
                    let _ = self.withdraw_prompt(id, false).await;
                    if saving {
                        self.close_output(id, &mut text, &created, plan.per_chunk)
                            .await;
                    }
                    let outcome = if saving {
                        outcome
                    } else {
                        Outcome::infrastructure(
                            "store_unavailable",
                            Some("the task's output could not be saved".into()),
                        )
                    };
                    return self.record_end(id, end(&outcome, Some(run))).await;
                }
            }
        }
        // Never leave it running unwatched.
        runner.stop(run);
        let lost = Outcome::infrastructure(
            "runner_lost",
            Some("the process runner stopped reporting on the run".into()),
        );
        self.record_end(id, end(&lost, Some(run))).await
    }

    /// After the process ended: what is left of a torn character, and for
    /// per-stream artifacts the last chunk (`lastChunk`).
    async fn close_output(
        &self,
        id: TaskId,
        text: &mut HashMap<OutputStream, Utf8Chunks>,
        created: &HashSet<OutputStream>,
        per_chunk: bool,
    ) {
        for stream in [OutputStream::Stdout, OutputStream::Stderr] {
            let Some(mut rest) = text.remove(&stream) else {
                continue;
            };
            let tail = rest.finish();
            let saved = if per_chunk {
                if tail.is_empty() {
                    continue;
                }
                let artifact = Artifact {
                    artifact_id: format!("{id}-{}-end", stream.as_str()),
                    parts: vec![Part::text(tail)],
                    ..output_artifact(id, stream)
                };
                self.save_chunk(id, artifact, false, true).await
            } else {
                let started = created.contains(&stream);
                if !started && tail.is_empty() {
                    continue;
                }
                let parts = if tail.is_empty() {
                    vec![]
                } else {
                    vec![Part::text(tail)]
                };
                let last = Artifact {
                    parts,
                    ..output_artifact(id, stream)
                };
                self.save_chunk(id, last, started, true).await
            };
            if let Err(e) = saved {
                tracing::error!(task = %id, error = %e, "cannot close a task's output");
            }
        }
    }

    /// Saves one change of the task; one refused because it already ended is dropped.
    async fn save_change(&self, id: TaskId, change: TaskChange) -> Result<(), StoreError> {
        match self.store.update_task(id, vec![change]).await {
            Ok(_) | Err(StoreError::Rejected(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Saves a chunk; one refused because the task already ended (a cancel
    /// landed while the run was being stopped) is dropped.
    async fn save_chunk(
        &self,
        id: TaskId,
        artifact: Artifact,
        append: bool,
        last_chunk: bool,
    ) -> Result<(), StoreError> {
        match self
            .store
            .add_task_artifact(id, artifact, append, last_chunk)
            .await
        {
            Ok(_) | Err(StoreError::Rejected(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// The artifact a stream's output accumulates in: `{task}-stdout` or `{task}-stderr`.
fn output_artifact(id: TaskId, stream: OutputStream) -> Artifact {
    Artifact {
        artifact_id: format!("{id}-{}", stream.as_str()),
        name: Some(stream.as_str().to_owned()),
        description: None,
        parts: vec![],
        metadata: None,
        extensions: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_split_across_chunks_stay_whole() {
        let bytes = "héllo → wörld".as_bytes();
        for cut in 0..bytes.len() {
            let mut u = Utf8Chunks::default();
            let mut s = u.push(&bytes[..cut]);
            s += &u.push(&bytes[cut..]);
            s += &u.finish();
            assert_eq!(s, "héllo → wörld", "cut at {cut}");
        }
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        let mut u = Utf8Chunks::default();
        assert_eq!(u.push(b"a\xffb"), "a\u{fffd}b");
        assert_eq!(u.push(b"c\xe2\x82"), "c");
        assert_eq!(u.finish(), "\u{fffd}");
    }

    #[test]
    fn each_outcome_has_its_state() {
        assert_eq!(ending(&Outcome::Completed).0, TaskState::Completed);
        assert_eq!(ending(&Outcome::exit_code(3)).0, TaskState::Failed);
        assert_eq!(ending(&Outcome::TimedOut).0, TaskState::Failed);
        assert_eq!(ending(&Outcome::OutputLimit).0, TaskState::Failed);
        assert_eq!(ending(&Outcome::Cancelled).0, TaskState::Canceled);
        let (state, text) = ending(&Outcome::infrastructure(
            "spawn_failed",
            Some("no such file".into()),
        ));
        assert_eq!(state, TaskState::Failed);
        assert!(
            text.contains("spawn_failed") && text.contains("no such file"),
            "{text}"
        );
    }
}
