//! A2A-independent task model: what a task, a message, a part and an
//! artifact are, and the task state machine. Protocol crates translate their
//! wire shapes to and from these types at their edge.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::{CoreError, Timestamp};

/// A task id. warden generates them (UUIDv7); ids from elsewhere parse if they are UUIDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskId(Uuid);

impl TaskId {
    /// A fresh, time-ordered id.
    pub fn new() -> Self {
        Self(Uuid::now_v7())
    }
}

impl Default for TaskId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for TaskId {
    type Err = CoreError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s)
            .map(Self)
            .map_err(|_| CoreError::MalformedId(s.to_owned()))
    }
}

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Accepted, not yet worked on.
    Submitted,
    /// Being worked on.
    Working,
    /// Paused until the client sends more input.
    InputRequired,
    /// Paused until the client authenticates.
    AuthRequired,
    /// Finished successfully.
    Completed,
    /// Stopped at a client's request, and the work is confirmed stopped.
    Canceled,
    /// Finished unsuccessfully.
    Failed,
    /// Refused by the agent.
    Rejected,
}

impl TaskState {
    /// Terminal states never change again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Canceled | Self::Failed | Self::Rejected
        )
    }

    /// Interrupted states wait for the client; a blocking send returns on them.
    pub fn is_interrupted(self) -> bool {
        matches!(self, Self::InputRequired | Self::AuthRequired)
    }

    /// Checks a transition: terminal states are sticky, and nothing returns
    /// to `submitted`.
    pub fn move_to(self, next: Self) -> Result<Self, CoreError> {
        if self.is_terminal() || (next == Self::Submitted && self != Self::Submitted) {
            return Err(CoreError::InvalidTransition {
                from: self.as_str().into(),
                to: next.as_str().into(),
            });
        }
        Ok(next)
    }

    /// The name used in logs and the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Submitted => "submitted",
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::AuthRequired => "auth_required",
            Self::Completed => "completed",
            Self::Canceled => "canceled",
            Self::Failed => "failed",
            Self::Rejected => "rejected",
        }
    }
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The client.
    User,
    /// The agent.
    Agent,
}

/// What a part holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartContent {
    /// Text.
    Text(String),
    /// Inline bytes.
    Raw(Vec<u8>),
    /// A reference to content elsewhere; never fetched by warden on its own.
    Url(String),
    /// Structured JSON.
    Data(Value),
}

/// One piece of a message or an artifact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// The content.
    pub content: PartContent,
    /// Free-form metadata.
    pub metadata: Option<Map<String, Value>>,
    /// A file name, for file-like content.
    pub filename: Option<String>,
    /// The media type, e.g. `text/plain`.
    pub media_type: Option<String>,
}

impl Part {
    /// A plain text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: PartContent::Text(text.into()),
            metadata: None,
            filename: None,
            media_type: None,
        }
    }
}

/// A message between client and agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Chosen by the sender.
    pub message_id: String,
    /// The conversation it belongs to.
    pub context_id: Option<String>,
    /// The task it belongs to.
    pub task_id: Option<String>,
    /// Who wrote it.
    pub role: Role,
    /// Its content; never empty in a valid message.
    pub parts: Vec<Part>,
    /// Free-form metadata (extension envelopes live here).
    pub metadata: Option<Map<String, Value>>,
    /// Extension URIs this message uses.
    pub extensions: Vec<String>,
    /// Other tasks it refers to.
    pub reference_task_ids: Vec<String>,
}

/// An output of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Artifact {
    /// Unique within the task.
    pub artifact_id: String,
    /// A short name.
    pub name: Option<String>,
    /// A description.
    pub description: Option<String>,
    /// Its content.
    pub parts: Vec<Part>,
    /// Free-form metadata.
    pub metadata: Option<Map<String, Value>>,
    /// Extension URIs it uses.
    pub extensions: Vec<String>,
}

/// A task's state with the message that explains it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStatus {
    /// The state.
    pub state: TaskState,
    /// Why it is in that state, for people and clients.
    pub message: Option<Message>,
    /// When it entered the state.
    pub timestamp: Option<Timestamp>,
}

/// A task as clients see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// The task's id.
    pub id: TaskId,
    /// The conversation it belongs to.
    pub context_id: String,
    /// Where it is.
    pub status: TaskStatus,
    /// What it produced.
    pub artifacts: Vec<Artifact>,
    /// The messages exchanged, oldest first.
    pub history: Vec<Message>,
    /// Free-form metadata.
    pub metadata: Option<Map<String, Value>>,
}

/// A change to a task, as streamed to subscribers.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskEvent {
    /// The state changed.
    Status {
        /// The task.
        task_id: TaskId,
        /// Its context.
        context_id: String,
        /// The new status.
        status: TaskStatus,
    },
    /// An artifact was produced or extended.
    Artifact {
        /// The task.
        task_id: TaskId,
        /// Its context.
        context_id: String,
        /// The artifact (or the chunk of it).
        artifact: Artifact,
        /// Whether this chunk extends an artifact already sent.
        append: bool,
        /// Whether this is the artifact's last chunk.
        last_chunk: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_states_are_sticky_and_nothing_returns_to_submitted() {
        use TaskState::*;
        assert_eq!(Submitted.move_to(Working), Ok(Working));
        assert_eq!(Working.move_to(InputRequired), Ok(InputRequired));
        assert_eq!(InputRequired.move_to(Working), Ok(Working));
        assert_eq!(Working.move_to(Canceled), Ok(Canceled));
        for terminal in [Completed, Canceled, Failed, Rejected] {
            assert!(terminal.is_terminal());
            for next in [Submitted, Working, Completed, Canceled, Failed] {
                assert!(terminal.move_to(next).is_err(), "{terminal:?} -> {next:?}");
            }
        }
        assert!(Working.move_to(Submitted).is_err());
        assert!(InputRequired.is_interrupted() && AuthRequired.is_interrupted());
        assert!(!Working.is_interrupted());
    }
}
