//! The `conformance` runtime: behaves as the A2A conformance kits expect of
//! a system under test. The kit (a2aproject/a2a-tck, 1.0) names a behaviour
//! by the prefix of the message id (`tck-complete-task-…`); the draft ACTS
//! suite by the prefix of the first text part (`tck-complete-task hello`),
//! with follow-up turns carrying no prefix (the task's first prefixed user
//! message decides). Anything else is echoed. Texts are the kit's own,
//! which the ACTS checks (types only) also accept.

use std::time::Duration;

use serde_json::json;
use warden_core::{Artifact, Message, Part, PartContent, Role, TaskId, TaskState};
use warden_store::StoreError;

use super::{TaskEngine, agent_message, status, store_error};
use crate::jsonrpc::A2aError;

/// What the instance does with one message.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Behaviour {
    /// Complete with a status message (`text`), after `artifacts`.
    Complete {
        working: bool,
        artifacts: Vec<Chunk>,
        pause: Option<Duration>,
        text: Option<&'static str>,
    },
    /// Answer with a message and no task.
    DirectMessage,
    /// End in `state` with a status message.
    End(TaskState, String),
    /// Stay working until canceled.
    HoldUntilCanceled,
    /// ACTS multi-turn: ask for input until a turn starts with `done`.
    MultiTurn { done: bool },
    /// Not a behaviour: echo the parts back.
    Echo,
}

/// One artifact update.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Chunk {
    /// Suffix of the artifact id (`{task}-{suffix}`); chunks share it.
    suffix: &'static str,
    part: Content,
    append: bool,
    last_chunk: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Content {
    Text(&'static str),
    File,
    FileUrl,
    Data,
}

impl Content {
    fn part(&self) -> Part {
        let file = |content| Part {
            content,
            metadata: None,
            filename: Some("output.txt".into()),
            media_type: Some("text/plain".into()),
        };
        match self {
            Self::Text(t) => Part::text(*t),
            Self::File => file(PartContent::Raw(b"tck".to_vec())),
            Self::FileUrl => file(PartContent::Url("https://example.com/output.txt".into())),
            Self::Data => Part {
                content: PartContent::Data(json!({"key": "value", "count": 42})),
                metadata: None,
                filename: None,
                media_type: Some("application/json".into()),
            },
        }
    }
}

fn one(content: Content) -> Vec<Chunk> {
    vec![Chunk {
        suffix: "result",
        part: content,
        append: false,
        last_chunk: true,
    }]
}

fn complete(working: bool, artifacts: Vec<Chunk>, text: Option<&'static str>) -> Behaviour {
    Behaviour::Complete {
        working,
        artifacts,
        pause: None,
        text,
    }
}

fn chunked(texts: &[&'static str]) -> Vec<Chunk> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| Chunk {
            suffix: "chunked",
            part: Content::Text(t),
            append: i > 0,
            last_chunk: i + 1 == texts.len(),
        })
        .collect()
}

/// The kit's message-id prefixes; the longest match wins (the kit appends
/// a session suffix, and `tck-artifact-file-url` extends `tck-artifact-file`).
fn tck(prefix: &str) -> Option<Behaviour> {
    use Content::*;
    Some(match prefix {
        "tck-complete-task" => complete(true, vec![], Some("Hello from TCK")),
        "tck-artifact-text" => complete(true, one(Text("Generated text content")), None),
        "tck-artifact-file" => complete(true, one(File), None),
        "tck-artifact-file-url" => complete(true, one(FileUrl), None),
        "tck-artifact-data" => complete(true, one(Data), None),
        "tck-message-response" => Behaviour::DirectMessage,
        "tck-input-required" => Behaviour::End(
            TaskState::InputRequired,
            "tck-input-required: send more input".into(),
        ),
        // The kit's generated agents raise an error here and no kit test
        // sends it; ACTS wants the task rejected, which is what A2A has
        // the state for.
        "tck-reject-task" => Behaviour::End(TaskState::Rejected, "rejected".into()),
        "tck-stream-001" => complete(true, one(Text("Stream hello from TCK")), None),
        "tck-stream-002" => complete(false, vec![], None),
        "tck-stream-003" => complete(true, one(Text("Stream task lifecycle")), None),
        "tck-stream-ordering-001" => complete(true, one(Text("Ordered output")), None),
        "tck-stream-artifact-text" => complete(true, one(Text("Streamed text content")), None),
        "tck-stream-artifact-file" => complete(true, one(File), None),
        "tck-stream-artifact-chunked" => complete(true, chunked(&["chunk-1 ", "chunk-2"]), None),
        // Stays working for twice the kit's 2 s streaming timeout.
        "test-resubscribe-message-id" => Behaviour::Complete {
            working: true,
            artifacts: vec![],
            pause: Some(Duration::from_secs(4)),
            text: None,
        },
        _ => return None,
    })
}

const TCK_PREFIXES: [&str; 16] = [
    "tck-complete-task",
    "tck-artifact-text",
    "tck-artifact-file",
    "tck-artifact-file-url",
    "tck-artifact-data",
    "tck-message-response",
    "tck-input-required",
    "tck-reject-task",
    "tck-stream-001",
    "tck-stream-002",
    "tck-stream-003",
    "tck-stream-ordering-001",
    "tck-stream-artifact-text",
    "tck-stream-artifact-file",
    "tck-stream-artifact-chunked",
    "test-resubscribe-message-id",
];

fn by_message_id(id: &str) -> Option<Behaviour> {
    TCK_PREFIXES
        .iter()
        .filter(|p| id.starts_with(**p))
        .max_by_key(|p| p.len())
        .and_then(|p| tck(p))
}

/// The ACTS behaviour name a text starts with: `tck-` then lowercase
/// words joined by `-`.
fn acts_name(text: &str) -> Option<&str> {
    let t = text.trim_start();
    let rest = t.strip_prefix("tck-")?;
    let len = rest
        .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
        .unwrap_or(rest.len());
    let name = rest[..len].trim_end_matches('-');
    (!name.is_empty()).then(|| &t[..4 + name.len()])
}

fn first_text(m: &Message) -> Option<&str> {
    m.parts.iter().find_map(|p| match &p.content {
        PartContent::Text(t) => Some(t.as_str()),
        _ => None,
    })
}

fn acts(name: &str, text: &str) -> Behaviour {
    use Content::*;
    match name {
        "tck-long-running" => Behaviour::Complete {
            working: true,
            artifacts: vec![Chunk {
                suffix: "long-running",
                part: Text("long running result"),
                append: false,
                last_chunk: true,
            }],
            pause: Some(Duration::from_secs(1)),
            text: Some("long running work finished"),
        },
        "tck-multi-turn" => Behaviour::MultiTurn {
            done: is_done(text),
        },
        "tck-cancel" => Behaviour::HoldUntilCanceled,
        "tck-stream-basic" => complete(true, one(Text("streamed content")), None),
        "tck-stream-chunked" => complete(
            true,
            chunked(&["chunk one ", "chunk two ", "chunk three"]),
            None,
        ),
        "tck-task-failure" => Behaviour::End(
            TaskState::Failed,
            "tck-task-failure: failed as asked".into(),
        ),
        "tck-auth-required" => Behaviour::End(
            TaskState::AuthRequired,
            "tck-auth-required: authenticate to continue".into(),
        ),
        other => tck(other).unwrap_or_else(|| {
            Behaviour::End(
                TaskState::Failed,
                format!("unimplemented ACTS behaviour '{other}'"),
            )
        }),
    }
}

fn is_done(text: &str) -> bool {
    text.trim_start()
        .get(..4)
        .is_some_and(|w| w.eq_ignore_ascii_case("done"))
}

/// Picks the behaviour for `message`, sent to a task whose earlier
/// messages are `history` (empty for a new task).
fn pick(message: &Message, history: &[Message]) -> Behaviour {
    if let Some(b) = by_message_id(&message.message_id) {
        return b;
    }
    let text = first_text(message).unwrap_or("");
    if let Some(name) = acts_name(text) {
        return acts(name, text);
    }
    // A follow-up turn: the task's first prefixed user message decides.
    let first = history
        .iter()
        .filter(|m| m.role == Role::User)
        .find_map(|m| acts_name(first_text(m)?));
    match first {
        Some(name) => acts(name, text),
        None => Behaviour::Echo,
    }
}

/// The direct answer to a message that asks for a message, not a task.
pub(super) fn direct_reply(message: &Message) -> Option<Message> {
    if message.task_id.is_some() || pick(message, &[]) != Behaviour::DirectMessage {
        return None;
    }
    Some(Message {
        message_id: uuid::Uuid::now_v7().to_string(),
        context_id: Some(
            message
                .context_id
                .clone()
                .unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
        ),
        task_id: None,
        role: Role::Agent,
        parts: vec![Part::text("Direct message response")],
        metadata: None,
        extensions: vec![],
        reference_task_ids: vec![],
    })
}

impl TaskEngine {
    /// Works task `id` for `input` as the conformance kits expect.
    pub(super) async fn conformance(
        &self,
        id: TaskId,
        context_id: &str,
        input: &Message,
    ) -> Result<(), A2aError> {
        let key = id.to_string();
        let (_, task) = self
            .store
            .get_task(id)
            .await
            .map_err(|e| store_error(e, &key))?;
        // The history ends with `input` itself.
        let earlier = &task.history[..task.history.len().saturating_sub(1)];
        let say = |text: &str| Some(agent_message(id, context_id, vec![Part::text(text)]));
        let mut cancel = self.cancel_watch(id);
        let steps: Vec<Step> = match pick(input, earlier) {
            Behaviour::Echo | Behaviour::DirectMessage => {
                return self.echo(id, context_id, input).await;
            }
            Behaviour::Complete {
                working,
                artifacts,
                pause,
                text,
            } => {
                let mut s = vec![];
                if working {
                    s.push(Step::Status(TaskState::Working, None));
                }
                if let Some(p) = pause {
                    s.push(Step::Pause(p));
                }
                s.extend(artifacts.into_iter().map(Step::Artifact));
                s.push(Step::Status(TaskState::Completed, text.and_then(say)));
                s
            }
            Behaviour::End(state, text) => vec![
                Step::Status(TaskState::Working, None),
                Step::Status(state, say(&text)),
            ],
            Behaviour::HoldUntilCanceled => vec![
                Step::Status(TaskState::Working, None),
                Step::Pause(HOLD_LIMIT),
                Step::Status(
                    TaskState::Failed,
                    say("tck-cancel: no cancel came within a day"),
                ),
            ],
            Behaviour::MultiTurn { done: false } => vec![
                Step::Status(TaskState::Working, None),
                Step::Status(TaskState::InputRequired, say("more input please")),
            ],
            Behaviour::MultiTurn { done: true } => vec![
                Step::Status(TaskState::Working, None),
                Step::Status(TaskState::Completed, say("multi-turn complete")),
            ],
        };
        for step in steps {
            if self.cancel_requested(id) {
                return self.record_end(id, status(TaskState::Canceled, None)).await;
            }
            let recorded = match step {
                Step::Status(state, message) => {
                    self.store.set_task_status(id, status(state, message)).await
                }
                Step::Artifact(c) => {
                    let artifact = Artifact {
                        artifact_id: format!("{id}-{}", c.suffix),
                        name: Some(c.suffix.to_owned()),
                        description: None,
                        parts: vec![c.part.part()],
                        metadata: None,
                        extensions: vec![],
                    };
                    self.store
                        .add_task_artifact(id, artifact, c.append, c.last_chunk)
                        .await
                }
                Step::Pause(d) => {
                    let canceled = async {
                        match cancel.as_mut() {
                            Some(c) => {
                                let _ = c.wait_for(|c| *c).await;
                            }
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        () = tokio::time::sleep(d) => {}
                        () = canceled => {}
                    }
                    continue;
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

/// How long `tck-cancel` holds a task waiting for its cancel.
const HOLD_LIMIT: Duration = Duration::from_secs(86400);

enum Step {
    Status(TaskState, Option<Message>),
    Artifact(Chunk),
    Pause(Duration),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(id: &str, text: &str) -> Message {
        Message {
            message_id: id.into(),
            context_id: None,
            task_id: None,
            role: Role::User,
            parts: vec![Part::text(text)],
            metadata: None,
            extensions: vec![],
            reference_task_ids: vec![],
        }
    }

    #[test]
    fn the_longest_message_id_prefix_wins() {
        let b = pick(&msg("tck-artifact-file-url-1a2b3c4d-jsonrpc", "x"), &[]);
        assert_eq!(b, complete(true, one(Content::FileUrl), None));
        let b = pick(&msg("tck-artifact-file-1a2b3c4d", "x"), &[]);
        assert_eq!(b, complete(true, one(Content::File), None));
        // The kit's own follow-up ids are not behaviours.
        assert_eq!(
            pick(&msg("tck-infer-ctx-1a2b", "TCK text"), &[]),
            Behaviour::Echo
        );
    }

    #[test]
    fn acts_reads_the_first_text_part_and_follow_ups_the_history() {
        assert_eq!(
            pick(&msg("uuid", "tck-cancel please wait"), &[]),
            Behaviour::HoldUntilCanceled
        );
        let first = msg("uuid", "tck-multi-turn start");
        assert_eq!(
            pick(
                &msg("u2", "here is more input"),
                std::slice::from_ref(&first)
            ),
            Behaviour::MultiTurn { done: false }
        );
        assert_eq!(
            pick(&msg("u3", "Done."), std::slice::from_ref(&first)),
            Behaviour::MultiTurn { done: true }
        );
        assert_eq!(
            pick(&msg("uuid", "tck-no-such-thing x"), &[]),
            Behaviour::End(
                TaskState::Failed,
                "unimplemented ACTS behaviour 'tck-no-such-thing'".into()
            )
        );
        assert_eq!(
            acts_name("tck-artifact-file-url doc"),
            Some("tck-artifact-file-url")
        );
        assert_eq!(acts_name("TCK prerequisite"), None);
        assert_eq!(pick(&msg("m", "hello"), &[]), Behaviour::Echo);
    }

    #[test]
    fn a_message_response_has_a_context_and_no_task() {
        let reply = direct_reply(&msg("tck-message-response-1a2b", "x")).unwrap();
        assert!(reply.context_id.is_some() && reply.task_id.is_none());
        assert_eq!(reply.role, Role::Agent);
        assert!(direct_reply(&msg("tck-complete-task-1a2b", "x")).is_none());
    }
}
