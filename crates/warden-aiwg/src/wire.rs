//! The contract's wire shapes.
//!
//! Outbound (registration, dispatch answers, events, mission status) are
//! built only from these types, which hold exactly the fields the schema
//! allows. Inbound dispatches are strict too: an unknown field is refused,
//! never ignored. Timestamps are RFC 3339 with milliseconds, UTC.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use warden_core::{MissionId, MissionState, Timestamp};

/// The contract version this build speaks.
pub const SPEC_VERSION: &str = "1.0.0";

/// Where the orchestrator reaches this executor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TransportEndpoints {
    pub rest: String,
    pub ws: String,
}

/// `POST /api/v1/executors/register`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RegisterPayload {
    pub executor_id: String,
    pub name: String,
    pub version: String,
    pub spec_version: &'static str,
    pub transport_endpoints: TransportEndpoints,
    pub capabilities: Vec<String>,
}

/// The registration answer: the bearer token lives in memory only.
#[derive(Clone, Deserialize)]
pub struct RegisterResponse {
    pub executor_id: String,
    pub token: String,
    #[serde(default)]
    pub registered_at: Option<String>,
}

impl std::fmt::Debug for RegisterResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisterResponse")
            .field("executor_id", &self.executor_id)
            .field("token", &"<redacted>")
            .field("registered_at", &self.registered_at)
            .finish()
    }
}

/// `executor_filter` of a dispatch: the seed's `agent_id` and the schema's
/// fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorFilter {
    #[serde(default)]
    pub executor_id: Option<String>,
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default)]
    pub a2a_instance_id: Option<String>,
    #[serde(default)]
    pub instance_id: Option<String>,
    #[serde(default)]
    pub capabilities: Option<Vec<String>>,
}

impl ExecutorFilter {
    /// The instance the dispatch names, by whichever of its names it used.
    pub fn instance(&self) -> Option<&str> {
        self.agent_id
            .as_deref()
            .or(self.instance_id.as_deref())
            .or(self.a2a_instance_id.as_deref())
    }
}

/// `POST /api/v1/sessions/{id}/dispatch`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DispatchPayload {
    pub mission_id: MissionId,
    pub objective: String,
    pub completion: String,
    #[serde(default)]
    pub long_running: bool,
    #[serde(default)]
    pub executor_filter: Option<ExecutorFilter>,
    #[serde(default)]
    pub a2a_instance_id: Option<String>,
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
}

impl DispatchPayload {
    /// The instance named anywhere in the dispatch.
    pub fn instance(&self) -> Option<&str> {
        self.executor_filter
            .as_ref()
            .and_then(ExecutorFilter::instance)
            .or(self.a2a_instance_id.as_deref())
    }

    /// Checks what serde cannot: non-empty texts. The error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.objective.is_empty() {
            return Err("objective: must not be empty".into());
        }
        if self.completion.is_empty() {
            return Err("completion: must not be empty".into());
        }
        Ok(())
    }
}

/// The `202` answer to a dispatch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DispatchResponse {
    pub mission_id: String,
    pub executor_id: String,
    pub status: &'static str,
    pub estimated_start: String,
}

/// Who aborted a mission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbortedBy {
    Operator,
    System,
}

/// An event warden emits. Each carries the fields that make its `data`
/// match exactly one of the schema's shapes (`mission.started` always names
/// its runtime, `mission.resumed` where it resumed from: with `state`
/// alone both would match).
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Resync {
        owned_mission_ids: Vec<String>,
    },
    Assigned {
        estimated_start: Timestamp,
    },
    Started {
        agent_runtime: String,
        pty_session_id: Option<String>,
    },
    Progress {
        phase: String,
        iteration: u64,
        summary: String,
    },
    HitlRequired {
        hitl_id: String,
        prompt: String,
        context: Option<String>,
        expires_at: Option<Timestamp>,
    },
    Suspended {
        checkpoint_id: String,
        reason: String,
    },
    Reconnected {
        checkpoint_id: String,
    },
    /// Resumed after a suspension (the only resumption warden has).
    Resumed,
    Completed {
        exit_code: Option<i32>,
        summary: Option<String>,
    },
    Failed {
        reason: String,
        error: Option<String>,
        exit_code: Option<i32>,
    },
    Aborted {
        aborted_by: AbortedBy,
        reason: String,
    },
}

/// Inserts `value` under `key` when present.
fn put<T: Serialize>(data: &mut Map<String, Value>, key: &str, value: Option<T>) {
    if let Some(v) = value {
        data.insert(key.to_owned(), json!(v));
    }
}

impl Event {
    /// The `event` name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Resync { .. } => "executor.resync",
            Self::Assigned { .. } => "mission.assigned",
            Self::Started { .. } => "mission.started",
            Self::Progress { .. } => "mission.progress",
            Self::HitlRequired { .. } => "mission.hitl_required",
            Self::Suspended { .. } => "mission.suspended",
            Self::Reconnected { .. } => "mission.reconnected",
            Self::Resumed => "mission.resumed",
            Self::Completed { .. } => "mission.completed",
            Self::Failed { .. } => "mission.failed",
            Self::Aborted { .. } => "mission.aborted",
        }
    }

    /// The state the event reports, for those that report one.
    pub fn state(&self) -> Option<MissionState> {
        match self {
            Self::Assigned { .. } => Some(MissionState::Assigned),
            Self::Started { .. } | Self::Resumed => Some(MissionState::Running),
            Self::Suspended { .. } => Some(MissionState::Suspended),
            Self::Completed { .. } => Some(MissionState::Completed),
            Self::Failed { .. } => Some(MissionState::Failed),
            Self::Aborted { .. } => Some(MissionState::Aborted),
            Self::Resync { .. }
            | Self::Progress { .. }
            | Self::HitlRequired { .. }
            | Self::Reconnected { .. } => None,
        }
    }

    /// The `data` object.
    pub fn data(&self) -> Value {
        let mut d = Map::new();
        match self {
            Self::Resync { owned_mission_ids } => {
                put(&mut d, "owned_mission_ids", Some(owned_mission_ids));
                put(&mut d, "protocol_version", Some(SPEC_VERSION));
            }
            Self::Assigned { estimated_start } => {
                put(&mut d, "state", Some("assigned"));
                put(&mut d, "estimated_start", Some(estimated_start.to_string()));
            }
            Self::Started {
                agent_runtime,
                pty_session_id,
            } => {
                put(&mut d, "state", Some("running"));
                put(&mut d, "agent_runtime", Some(agent_runtime));
                put(&mut d, "pty_session_id", pty_session_id.as_ref());
            }
            Self::Progress {
                phase,
                iteration,
                summary,
            } => {
                put(&mut d, "phase", Some(phase));
                put(&mut d, "iteration", Some(iteration));
                put(&mut d, "summary", Some(summary));
            }
            Self::HitlRequired {
                hitl_id,
                prompt,
                context,
                expires_at,
            } => {
                put(&mut d, "hitl_id", Some(hitl_id));
                put(&mut d, "prompt", Some(prompt));
                put(&mut d, "context", context.as_ref());
                put(&mut d, "expires_at", expires_at.map(|t| t.to_string()));
            }
            Self::Suspended {
                checkpoint_id,
                reason,
            } => {
                put(&mut d, "state", Some("suspended"));
                put(&mut d, "checkpoint_id", Some(checkpoint_id));
                put(&mut d, "reason", Some(reason));
            }
            Self::Reconnected { checkpoint_id } => {
                put(&mut d, "checkpoint_id", Some(checkpoint_id));
            }
            Self::Resumed => {
                put(&mut d, "state", Some("running"));
                put(&mut d, "resumed_from", Some("suspended"));
            }
            Self::Completed { exit_code, summary } => {
                put(&mut d, "state", Some("done"));
                put(&mut d, "exit_code", *exit_code);
                put(&mut d, "summary", summary.as_ref());
            }
            Self::Failed {
                reason,
                error,
                exit_code,
            } => {
                put(&mut d, "state", Some("failed"));
                put(&mut d, "reason", Some(reason));
                put(&mut d, "error", error.as_ref());
                put(&mut d, "exit_code", *exit_code);
            }
            Self::Aborted { aborted_by, reason } => {
                put(&mut d, "state", Some("aborted"));
                let by = match aborted_by {
                    AbortedBy::Operator => "operator",
                    AbortedBy::System => "system",
                };
                put(&mut d, "aborted_by", Some(by));
                put(&mut d, "reason", Some(reason));
            }
        }
        Value::Object(d)
    }

    /// The envelope: `{event, executor_id, mission_id, ts, data}`, without
    /// `mission_id` on executor-level events.
    pub fn envelope(&self, executor_id: &str, mission: Option<&MissionId>, ts: Timestamp) -> Value {
        let mut e = Map::new();
        e.insert("event".into(), json!(self.name()));
        e.insert("executor_id".into(), json!(executor_id));
        if !matches!(self, Self::Resync { .. }) {
            put(&mut e, "mission_id", mission.map(MissionId::as_str));
        }
        e.insert("ts".into(), json!(ts.to_string()));
        e.insert("data".into(), self.data());
        Value::Object(e)
    }
}

/// An event the orchestrator sends over the WebSocket.
#[derive(Debug, Clone, PartialEq)]
pub enum Inbound {
    /// An operator's answer to `mission.hitl_required`; the seed names the
    /// text `text`, the schema `response`: either is accepted.
    HitlResponded {
        mission_id: Option<String>,
        hitl_id: String,
        text: String,
    },
    /// The orchestrator's own `mission.resumed` (its reconnect flow):
    /// acknowledged, nothing to do.
    Resumed { mission_id: Option<String> },
    /// Anything else, kept for the log.
    Other { event: String },
}

impl Inbound {
    /// Parses one text frame; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let event = v["event"].as_str().ok_or("no \"event\" string")?.to_owned();
        let mission_id = v["mission_id"].as_str().map(str::to_owned);
        match event.as_str() {
            "mission.hitl_responded" => {
                let data = &v["data"];
                let hitl_id = data["hitl_id"]
                    .as_str()
                    .ok_or("mission.hitl_responded: data.hitl_id missing")?
                    .to_owned();
                let text = data["response"]
                    .as_str()
                    .or(data["text"].as_str())
                    .ok_or("mission.hitl_responded: data.response (or data.text) missing")?
                    .to_owned();
                Ok(Self::HitlResponded {
                    mission_id,
                    hitl_id,
                    text,
                })
            }
            "mission.resumed" => Ok(Self::Resumed { mission_id }),
            _ => Ok(Self::Other { event }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mission() -> MissionId {
        MissionId::parse("m-1").unwrap()
    }

    #[test]
    fn envelopes_carry_exactly_the_contract_fields() {
        let ts = Timestamp::from_millis(1_780_000_000_123);
        let e = Event::Started {
            agent_runtime: "command".into(),
            pty_session_id: None,
        }
        .envelope("0190-x", Some(&mission()), ts);
        assert_eq!(
            e,
            json!({"event": "mission.started", "executor_id": "0190-x", "mission_id": "m-1",
                   "ts": "2026-05-28T20:26:40.123Z",
                   "data": {"state": "running", "agent_runtime": "command"}})
        );
        let r = Event::Resync {
            owned_mission_ids: vec!["m-1".into()],
        }
        .envelope("0190-x", Some(&mission()), ts);
        assert!(r.get("mission_id").is_none(), "executor events have none");
        assert_eq!(
            r["data"],
            json!({"owned_mission_ids": ["m-1"], "protocol_version": "1.0.0"})
        );
    }

    #[test]
    fn every_event_reports_the_state_its_data_names() {
        let ts = Timestamp::now();
        let events = [
            Event::Assigned {
                estimated_start: ts,
            },
            Event::Started {
                agent_runtime: "command".into(),
                pty_session_id: Some("run-1".into()),
            },
            Event::Suspended {
                checkpoint_id: "c".into(),
                reason: "mgmt_server_shutdown".into(),
            },
            Event::Resumed,
            Event::Completed {
                exit_code: Some(0),
                summary: None,
            },
            Event::Failed {
                reason: "non_zero_exit".into(),
                error: None,
                exit_code: Some(3),
            },
            Event::Aborted {
                aborted_by: AbortedBy::Operator,
                reason: "asked".into(),
            },
        ];
        for e in events {
            let state = e.state().unwrap();
            assert_eq!(e.data()["state"], json!(state.as_str()), "{e:?}");
        }
        let resumed = Event::Resumed.data();
        assert_eq!(resumed["resumed_from"], "suspended");
    }

    #[test]
    fn dispatches_are_strict_and_name_their_instance() {
        let ok: DispatchPayload = serde_json::from_value(json!({
            "mission_id": "m-9", "objective": "make", "completion": "exit 0",
            "executor_filter": {"executor_id": null, "capabilities": [], "agent_id": "coder"},
            "metadata": {"issue": 1}
        }))
        .unwrap();
        assert_eq!(ok.instance(), Some("coder"));
        assert!(!ok.long_running);
        let schema_name: DispatchPayload = serde_json::from_value(json!({
            "mission_id": "m-9", "objective": "make", "completion": "c",
            "executor_filter": {"instance_id": "tests"}
        }))
        .unwrap();
        assert_eq!(schema_name.instance(), Some("tests"));
        for bad in [
            json!({"mission_id": "m", "objective": "o"}),
            json!({"mission_id": "m", "objective": "o", "completion": "c", "extra": 1}),
            json!({"mission_id": "", "objective": "o", "completion": "c"}),
            json!({"mission_id": "m", "objective": "o", "completion": "c",
                   "executor_filter": {"agent": "x"}}),
        ] {
            assert!(
                serde_json::from_value::<DispatchPayload>(bad.clone()).is_err(),
                "{bad}"
            );
        }
        let empty: DispatchPayload = serde_json::from_value(json!({
            "mission_id": "m", "objective": "", "completion": "c"
        }))
        .unwrap();
        assert!(empty.validate().unwrap_err().contains("objective"));
    }

    #[test]
    fn inbound_answers_accept_text_or_response() {
        for field in ["text", "response"] {
            let frame = json!({"event": "mission.hitl_responded", "mission_id": "m-1",
                               "data": {"hitl_id": "h-1", field: "y"}})
            .to_string();
            assert_eq!(
                Inbound::parse(&frame).unwrap(),
                Inbound::HitlResponded {
                    mission_id: Some("m-1".into()),
                    hitl_id: "h-1".into(),
                    text: "y".into()
                }
            );
        }
        assert!(Inbound::parse("{\"event\": \"mission.hitl_responded\", \"data\": {}}").is_err());
        assert!(Inbound::parse("nope").is_err());
        assert_eq!(
            Inbound::parse("{\"event\": \"x.y\"}").unwrap(),
            Inbound::Other {
                event: "x.y".into()
            }
        );
    }

    #[test]
    fn every_event_passes_the_contract_schema() {
        let exec = "01936f3e-7a1b-7c2d-8e3f-0123456789ab";
        let ts = Timestamp::now();
        let all = [
            Event::Resync {
                owned_mission_ids: vec!["m-1".into(), "m-2".into()],
            },
            Event::Assigned {
                estimated_start: ts,
            },
            Event::Started {
                agent_runtime: "command".into(),
                pty_session_id: None,
            },
            Event::Progress {
                phase: "execution".into(),
                iteration: 3,
                summary: "compiling".into(),
            },
            Event::HitlRequired {
                hitl_id: "h-1".into(),
                prompt: "Proceed? [y/N]".into(),
                context: Some("last output".into()),
                expires_at: Some(ts),
            },
            Event::Suspended {
                checkpoint_id: "c-1".into(),
                reason: "mgmt_server_shutdown".into(),
            },
            Event::Reconnected {
                checkpoint_id: "c-1".into(),
            },
            Event::Resumed,
            Event::Completed {
                exit_code: Some(0),
                summary: Some("done".into()),
            },
            Event::Completed {
                exit_code: None,
                summary: None,
            },
            Event::Failed {
                reason: "non_zero_exit".into(),
                error: Some("exit code 2".into()),
                exit_code: Some(2),
            },
            Event::Aborted {
                aborted_by: AbortedBy::Operator,
                reason: "operator kill".into(),
            },
        ];
        for e in all {
            let v = e.envelope(exec, Some(&mission()), ts);
            assert_eq!(
                aiwg_peer::schema::check_envelope(&v),
                Vec::<String>::new(),
                "{v}"
            );
        }
    }

    #[test]
    fn the_token_is_never_printed() {
        let r: RegisterResponse =
            serde_json::from_value(json!({"executor_id": "e", "token": "s3cret"})).unwrap();
        assert!(!format!("{r:?}").contains("s3cret"));
    }
}
