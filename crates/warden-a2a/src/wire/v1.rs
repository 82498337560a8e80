//! A2A 1.0 shapes in ProtoJSON: camelCase fields, `TASK_STATE_*` and
//! `ROLE_*` enum names, parts as a oneof (`text` | `raw` | `url` | `data`),
//! responses as a oneof (`task` | `message` | `statusUpdate` | `artifactUpdate`).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use warden_core as core;

use crate::WireError;

type Metadata = Option<Map<String, Value>>;

/// `Part`: exactly one of `text`, `raw` (base64), `url`, `data`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Metadata,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
}

/// `Message`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    #[serde(default)]
    pub message_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default)]
    pub role: String,
    #[serde(default)]
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Metadata,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_task_ids: Vec<String>,
}

/// `Artifact`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Metadata,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

/// `TaskStatus`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// `Task`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: String,
    #[serde(default)]
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Metadata,
}

/// `TaskStatusUpdateEvent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    pub task_id: String,
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Metadata,
}

/// `TaskArtifactUpdateEvent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    pub task_id: String,
    pub context_id: String,
    pub artifact: Artifact,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub append: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last_chunk: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Metadata,
}

/// `SendMessageResponse` and `StreamResponse`: one payload each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse {
    Task(Task),
    Message(Message),
    StatusUpdate(TaskStatusUpdateEvent),
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

/// `SendMessageConfiguration`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration {
    #[serde(default)]
    pub accepted_output_modes: Vec<String>,
    #[serde(default)]
    pub task_push_notification_config: Option<Value>,
    #[serde(default)]
    pub history_length: Option<i32>,
    #[serde(default)]
    pub return_immediately: bool,
}

/// `SendMessageRequest`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest {
    #[serde(default)]
    pub tenant: Option<String>,
    #[serde(default)]
    pub message: Option<Message>,
    #[serde(default)]
    pub configuration: Option<SendMessageConfiguration>,
    #[serde(default)]
    pub metadata: Metadata,
}

// ---- enums -----------------------------------------------------------------

/// The ProtoJSON name of a task state.
pub fn state_name(s: core::TaskState) -> &'static str {
    use core::TaskState::*;
    match s {
        Submitted => "TASK_STATE_SUBMITTED",
        Working => "TASK_STATE_WORKING",
        InputRequired => "TASK_STATE_INPUT_REQUIRED",
        AuthRequired => "TASK_STATE_AUTH_REQUIRED",
        Completed => "TASK_STATE_COMPLETED",
        Canceled => "TASK_STATE_CANCELED",
        Failed => "TASK_STATE_FAILED",
        Rejected => "TASK_STATE_REJECTED",
    }
}

/// Parses a ProtoJSON task state; `TASK_STATE_UNSPECIFIED` and unknown names are errors.
pub fn parse_state(name: &str) -> Result<core::TaskState, WireError> {
    use core::TaskState::*;
    Ok(match name {
        "TASK_STATE_SUBMITTED" => Submitted,
        "TASK_STATE_WORKING" => Working,
        "TASK_STATE_INPUT_REQUIRED" => InputRequired,
        "TASK_STATE_AUTH_REQUIRED" => AuthRequired,
        "TASK_STATE_COMPLETED" => Completed,
        "TASK_STATE_CANCELED" => Canceled,
        "TASK_STATE_FAILED" => Failed,
        "TASK_STATE_REJECTED" => Rejected,
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
        core::Role::User => "ROLE_USER",
        core::Role::Agent => "ROLE_AGENT",
    }
}

fn parse_role(name: &str) -> Result<core::Role, WireError> {
    match name {
        "ROLE_USER" => Ok(core::Role::User),
        "ROLE_AGENT" => Ok(core::Role::Agent),
        "" => Err(WireError::new(
            "role",
            "is required (ROLE_USER or ROLE_AGENT)",
        )),
        other => Err(WireError::new("role", format!("unknown role {other:?}"))),
    }
}

// ---- wire -> core ----------------------------------------------------------

impl TryFrom<Part> for core::Part {
    type Error = WireError;

    fn try_from(p: Part) -> Result<Self, WireError> {
        let content = match (p.text, p.raw, p.url, p.data) {
            (Some(t), None, None, None) => core::PartContent::Text(t),
            (None, Some(r), None, None) => core::PartContent::Raw(
                B64.decode(r.as_bytes())
                    .map_err(|e| WireError::new("raw", format!("is not base64: {e}")))?,
            ),
            (None, None, Some(u), None) => core::PartContent::Url(u),
            (None, None, None, Some(d)) => core::PartContent::Data(d),
            (None, None, None, None) => {
                return Err(WireError::new(
                    "",
                    "a part needs one of text, raw, url or data",
                ));
            }
            _ => {
                return Err(WireError::new(
                    "",
                    "a part has exactly one of text, raw, url or data",
                ));
            }
        };
        Ok(Self {
            content,
            metadata: p.metadata,
            filename: p.filename,
            media_type: p.media_type,
        })
    }
}

fn parts_from(parts: Vec<Part>) -> Result<Vec<core::Part>, WireError> {
    parts
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            core::Part::try_from(p).map_err(|e| WireError {
                field: if e.field.is_empty() {
                    format!("parts[{i}]")
                } else {
                    format!("parts[{i}].{}", e.field)
                },
                message: e.message,
            })
        })
        .collect()
}

impl TryFrom<Message> for core::Message {
    type Error = WireError;

    /// Validates a client's message: an id, a role and at least one part.
    fn try_from(m: Message) -> Result<Self, WireError> {
        if m.message_id.is_empty() {
            return Err(WireError::new("messageId", "is required"));
        }
        let role = parse_role(&m.role)?;
        if m.parts.is_empty() {
            return Err(WireError::new("parts", "at least one part is required"));
        }
        Ok(Self {
            message_id: m.message_id,
            context_id: m.context_id.filter(|c| !c.is_empty()),
            task_id: m.task_id.filter(|t| !t.is_empty()),
            role,
            parts: parts_from(m.parts)?,
            metadata: m.metadata,
            extensions: m.extensions,
            reference_task_ids: m.reference_task_ids,
        })
    }
}

impl TryFrom<Artifact> for core::Artifact {
    type Error = WireError;

    fn try_from(a: Artifact) -> Result<Self, WireError> {
        Ok(Self {
            artifact_id: a.artifact_id,
            name: a.name,
            description: a.description,
            parts: parts_from(a.parts)?,
            metadata: a.metadata,
            extensions: a.extensions,
        })
    }
}

impl TryFrom<TaskStatus> for core::TaskStatus {
    type Error = WireError;

    fn try_from(s: TaskStatus) -> Result<Self, WireError> {
        let timestamp = s
            .timestamp
            .map(|t| {
                serde_json::from_value(Value::String(t))
                    .map_err(|e| WireError::new("timestamp", e.to_string()))
            })
            .transpose()?;
        Ok(Self {
            state: parse_state(&s.state)?,
            message: s
                .message
                .map(core::Message::try_from)
                .transpose()
                .map_err(|e| e.within("message"))?,
            timestamp,
        })
    }
}

impl TryFrom<Task> for core::Task {
    type Error = WireError;

    fn try_from(t: Task) -> Result<Self, WireError> {
        Ok(Self {
            id: t
                .id
                .parse()
                .map_err(|_| WireError::new("id", "is not a task id"))?,
            context_id: t.context_id,
            status: t
                .status
                .try_into()
                .map_err(|e: WireError| e.within("status"))?,
            artifacts: t
                .artifacts
                .into_iter()
                .map(core::Artifact::try_from)
                .collect::<Result<_, _>>()
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
        let mut out = Part {
            metadata: p.metadata.clone(),
            filename: p.filename.clone(),
            media_type: p.media_type.clone(),
            ..Part::default()
        };
        match &p.content {
            core::PartContent::Text(t) => out.text = Some(t.clone()),
            core::PartContent::Raw(r) => out.raw = Some(B64.encode(r)),
            core::PartContent::Url(u) => out.url = Some(u.clone()),
            core::PartContent::Data(d) => out.data = Some(d.clone()),
        }
        out
    }
}

impl From<&core::Message> for Message {
    fn from(m: &core::Message) -> Self {
        Self {
            message_id: m.message_id.clone(),
            context_id: m.context_id.clone(),
            task_id: m.task_id.clone(),
            role: role_name(m.role).to_owned(),
            parts: m.parts.iter().map(Part::from).collect(),
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
            id: t.id.to_string(),
            context_id: t.context_id.clone(),
            status: (&t.status).into(),
            artifacts: t.artifacts.iter().map(Artifact::from).collect(),
            history: t.history.iter().map(Message::from).collect(),
            metadata: t.metadata.clone(),
        }
    }
}

impl From<&core::TaskEvent> for StreamResponse {
    fn from(e: &core::TaskEvent) -> Self {
        match e {
            core::TaskEvent::Status {
                task_id,
                context_id,
                status,
            } => Self::StatusUpdate(TaskStatusUpdateEvent {
                task_id: task_id.to_string(),
                context_id: context_id.clone(),
                status: status.into(),
                metadata: None,
            }),
            core::TaskEvent::Artifact {
                task_id,
                context_id,
                artifact,
                append,
                last_chunk,
            } => Self::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id: task_id.to_string(),
                context_id: context_id.clone(),
                artifact: artifact.into(),
                append: *append,
                last_chunk: *last_chunk,
                metadata: None,
            }),
        }
    }
}
