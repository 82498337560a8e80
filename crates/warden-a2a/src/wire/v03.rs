//! A2A 0.3 JSON-RPC shapes: camelCase fields, a `kind` on every object
//! (`task`, `message`, `status-update`, `artifact-update`, and per part
//! `text` | `file` | `data`), lower-case states and roles, and `final` on
//! status updates.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use warden_core as core;

use crate::WireError;

type Metadata = Option<Map<String, Value>>;

/// A `kind` value that must be exactly one string.
macro_rules! kind_tag {
    ($name:ident, $value:literal) => {
        #[doc = concat!("The `kind: \"", $value, "\"` marker.")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct $name;

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str($value)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let v = String::deserialize(d)?;
                if v == $value {
                    Ok($name)
                } else {
                    Err(D::Error::custom(format!(
                        "expected kind {:?}, got {v:?}",
                        $value
                    )))
                }
            }
        }
    };
}

kind_tag!(TaskKind, "task");
kind_tag!(MessageKind, "message");
kind_tag!(StatusUpdateKind, "status-update");
kind_tag!(ArtifactUpdateKind, "artifact-update");

/// The file of a `file` part: inline `bytes` (base64) or a `uri`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileContent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
}

/// A part, discriminated by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Part {
    Text {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Metadata,
    },
    File {
        file: FileContent,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Metadata,
    },
    Data {
        data: Map<String, Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Metadata,
    },
}

/// `Message` (`kind: "message"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub kind: MessageKind,
    pub message_id: String,
    pub role: String,
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Metadata,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_task_ids: Vec<String>,
}

/// `Artifact`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Metadata,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

/// `TaskStatus`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStatus {
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// `Task` (`kind: "task"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub kind: TaskKind,
    pub id: String,
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Metadata,
}

/// `TaskStatusUpdateEvent` (`kind: "status-update"`); `final` marks the last event of a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    pub kind: StatusUpdateKind,
    pub task_id: String,
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(rename = "final")]
    pub is_final: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Metadata,
}

/// `TaskArtifactUpdateEvent` (`kind: "artifact-update"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    pub kind: ArtifactUpdateKind,
    pub task_id: String,
    pub context_id: String,
    pub artifact: Artifact,
    #[serde(default)]
    pub append: bool,
    #[serde(default)]
    pub last_chunk: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Metadata,
}

/// A `message/send` result or a `message/stream` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Event {
    Task(Task),
    Message(Message),
    StatusUpdate(TaskStatusUpdateEvent),
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

// ---- enums -----------------------------------------------------------------

/// The 0.3 name of a task state.
pub fn state_name(s: core::TaskState) -> &'static str {
    use core::TaskState::*;
    match s {
        Submitted => "submitted",
        Working => "working",
        InputRequired => "input-required",
        AuthRequired => "auth-required",
        Completed => "completed",
        Canceled => "canceled",
        Failed => "failed",
        Rejected => "rejected",
    }
}

/// Parses a 0.3 task state. `unknown` is refused: warden never reports it.
pub fn parse_state(name: &str) -> Result<core::TaskState, WireError> {
    use core::TaskState::*;
    Ok(match name {
        "submitted" => Submitted,
        "working" => Working,
        "input-required" => InputRequired,
        "auth-required" => AuthRequired,
        "completed" => Completed,
        "canceled" => Canceled,
        "failed" => Failed,
        "rejected" => Rejected,
        other => {
            return Err(WireError::new(
                "state",
                format!("unknown task state {other:?}"),
            ));
        }
    })
}

fn role_name(r: core::Role) -> &'static str {
    match r {
        core::Role::User => "user",
        core::Role::Agent => "agent",
    }
}

fn parse_role(name: &str) -> Result<core::Role, WireError> {
    match name {
        "user" => Ok(core::Role::User),
        "agent" => Ok(core::Role::Agent),
        other => Err(WireError::new(
            "role",
            format!("unknown role {other:?} (user or agent)"),
        )),
    }
}

// ---- wire -> core ----------------------------------------------------------

impl TryFrom<Part> for core::Part {
    type Error = WireError;

    fn try_from(p: Part) -> Result<Self, WireError> {
        Ok(match p {
            Part::Text { text, metadata } => Self {
                content: core::PartContent::Text(text),
                metadata,
                filename: None,
                media_type: None,
            },
            Part::Data { data, metadata } => Self {
                content: core::PartContent::Data(Value::Object(data)),
                metadata,
                filename: None,
                media_type: None,
            },
            Part::File { file, metadata } => {
                let content = match (file.bytes, file.uri) {
                    (Some(b), None) => {
                        core::PartContent::Raw(B64.decode(b.as_bytes()).map_err(|e| {
                            WireError::new("file.bytes", format!("is not base64: {e}"))
                        })?)
                    }
                    (None, Some(u)) => core::PartContent::Url(u),
                    _ => return Err(WireError::new("file", "needs exactly one of bytes or uri")),
                };
                Self {
                    content,
                    metadata,
                    filename: file.name,
                    media_type: file.mime_type,
                }
            }
        })
    }
}

fn parts_from(parts: Vec<Part>) -> Result<Vec<core::Part>, WireError> {
    parts
        .into_iter()
        .enumerate()
        .map(|(i, p)| core::Part::try_from(p).map_err(|e| e.within(&format!("parts[{i}]"))))
        .collect()
}

impl TryFrom<Message> for core::Message {
    type Error = WireError;

    /// Validates a client's message: an id, a role and at least one part.
    fn try_from(m: Message) -> Result<Self, WireError> {
        if m.message_id.is_empty() {
            return Err(WireError::new("messageId", "is required"));
        }
        if m.parts.is_empty() {
            return Err(WireError::new("parts", "at least one part is required"));
        }
        Ok(Self {
            message_id: m.message_id,
            context_id: m.context_id.filter(|c| !c.is_empty()),
            task_id: m.task_id.filter(|t| !t.is_empty()),
            role: parse_role(&m.role)?,
            parts: parts_from(m.parts)?,
            metadata: m.metadata,
            extensions: m.extensions,
            reference_task_ids: m.reference_task_ids,
        })
    }
}

impl TryFrom<Task> for core::Task {
    type Error = WireError;

    fn try_from(t: Task) -> Result<Self, WireError> {
        let timestamp = t
            .status
            .timestamp
            .map(|s| {
                serde_json::from_value(Value::String(s))
                    .map_err(|e| WireError::new("status.timestamp", e.to_string()))
            })
            .transpose()?;
        Ok(Self {
            id: t
                .id
                .parse()
                .map_err(|_| WireError::new("id", "is not a task id"))?,
            context_id: t.context_id,
            status: core::TaskStatus {
                state: parse_state(&t.status.state).map_err(|e| e.within("status"))?,
                message: t
                    .status
                    .message
                    .map(core::Message::try_from)
                    .transpose()
                    .map_err(|e| e.within("status.message"))?,
                timestamp,
            },
            artifacts: t
                .artifacts
                .into_iter()
                .map(|a| {
                    Ok(core::Artifact {
                        artifact_id: a.artifact_id,
                        name: a.name,
                        description: a.description,
                        parts: parts_from(a.parts)?,
                        metadata: a.metadata,
                        extensions: a.extensions,
                    })
                })
                .collect::<Result<_, WireError>>()
                .map_err(|e| e.within("artifacts"))?,
            history: t
                .history
                .into_iter()
                .map(core::Message::try_from)
                .collect::<Result<_, _>>()
                .map_err(|e| e.within("history"))?,
            metadata: t.metadata,
        })
    }
}

// ---- core -> wire ----------------------------------------------------------

impl From<&core::Part> for Part {
    fn from(p: &core::Part) -> Self {
        let metadata = p.metadata.clone();
        let file = |bytes, uri| FileContent {
            name: p.filename.clone(),
            mime_type: p.media_type.clone(),
            bytes,
            uri,
        };
        match &p.content {
            core::PartContent::Text(t) => Part::Text {
                text: t.clone(),
                metadata,
            },
            core::PartContent::Raw(r) => Part::File {
                file: file(Some(B64.encode(r)), None),
                metadata,
            },
            core::PartContent::Url(u) => Part::File {
                file: file(None, Some(u.clone())),
                metadata,
            },
            core::PartContent::Data(Value::Object(m)) => Part::Data {
                data: m.clone(),
                metadata,
            },
            // 0.3 data parts hold objects only; wrap anything else.
            core::PartContent::Data(other) => {
                let mut m = Map::new();
                m.insert("value".into(), other.clone());
                Part::Data { data: m, metadata }
            }
        }
    }
}

impl From<&core::Message> for Message {
    fn from(m: &core::Message) -> Self {
        Self {
            kind: MessageKind,
            message_id: m.message_id.clone(),
            role: role_name(m.role).to_owned(),
            parts: m.parts.iter().map(Part::from).collect(),
            context_id: m.context_id.clone(),
            task_id: m.task_id.clone(),
            metadata: m.metadata.clone(),
            extensions: m.extensions.clone(),
            reference_task_ids: m.reference_task_ids.clone(),
        }
    }
}

impl From<&core::Artifact> for Artifact {
    fn from(a: &core::Artifact) -> Self {
        Self {
            artifact_id: a.artifact_id.clone(),
            name: a.name.clone(),
            description: a.description.clone(),
            parts: a.parts.iter().map(Part::from).collect(),
            metadata: a.metadata.clone(),
            extensions: a.extensions.clone(),
        }
    }
}

impl From<&core::TaskStatus> for TaskStatus {
    fn from(s: &core::TaskStatus) -> Self {
        Self {
            state: state_name(s.state).to_owned(),
            message: s.message.as_ref().map(Message::from),
            timestamp: s.timestamp.map(|t| t.to_string()),
        }
    }
}

impl From<&core::Task> for Task {
    fn from(t: &core::Task) -> Self {
        Self {
            kind: TaskKind,
            id: t.id.to_string(),
            context_id: t.context_id.clone(),
            status: (&t.status).into(),
            artifacts: t.artifacts.iter().map(Artifact::from).collect(),
            history: t.history.iter().map(Message::from).collect(),
            metadata: t.metadata.clone(),
        }
    }
}

/// A stream event in 0.3 shape; `is_final` marks the event that ends the stream.
pub fn event(e: &core::TaskEvent, is_final: bool) -> Event {
    match e {
        core::TaskEvent::Status {
            task_id,
            context_id,
            status,
        } => Event::StatusUpdate(TaskStatusUpdateEvent {
            kind: StatusUpdateKind,
            task_id: task_id.to_string(),
            context_id: context_id.clone(),
            status: status.into(),
            is_final,
            metadata: None,
        }),
        core::TaskEvent::Artifact {
            task_id,
            context_id,
            artifact,
            append,
            last_chunk,
        } => Event::ArtifactUpdate(TaskArtifactUpdateEvent {
            kind: ArtifactUpdateKind,
            task_id: task_id.to_string(),
            context_id: context_id.clone(),
            artifact: artifact.into(),
            append: *append,
            last_chunk: *last_chunk,
            metadata: None,
        }),
    }
}
