//! The seed's scratchpad file (`{"messages": [...], "seq": N, "agents":
//! {...}}`), read and written so an existing scratchpad moves over without
//! loss and can be handed back.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use warden_store::{BusAgent, BusMessage};

use crate::BusError;

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scratchpad {
    #[serde(default)]
    pub messages: Vec<SeedMessage>,
    #[serde(default)]
    pub seq: u64,
    #[serde(default)]
    pub agents: BTreeMap<String, SeedAgent>,
}

/// A message as the seed writes it (plus its result or error, when done).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedMessage {
    pub id: String,
    pub from: String,
    pub to: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub capability: String,
    #[serde(default)]
    pub payload: Value,
    #[serde(default)]
    pub ttl: u64,
    pub status: String,
    pub ts: u64,
    #[serde(default)]
    pub reply_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// An agent as the seed writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedAgent {
    #[serde(default)]
    pub last_poll: Option<u64>,
    #[serde(default)]
    pub capabilities: Vec<String>,
}

const STATUSES: [&str; 5] = ["pending", "delivered", "completed", "failed", "dead"];

impl Scratchpad {
    /// Parses a scratchpad file, checking every message.
    pub fn parse(text: &str) -> Result<Self, BusError> {
        let pad: Scratchpad = serde_json::from_str(text).map_err(|e| BusError::Invalid {
            field: "scratchpad",
            message: format!("not a scratchpad file: {e}"),
        })?;
        for m in &pad.messages {
            if !STATUSES.contains(&m.status.as_str()) {
                return Err(BusError::Invalid {
                    field: "scratchpad",
                    message: format!("message {} has an unknown status {:?}", m.id, m.status),
                });
            }
        }
        Ok(pad)
    }

    /// The store's view of it. A message the seed marked `delivered` had no
    /// lease: it is brought in as delivered once and not finished, so it is
    /// delivered again.
    pub fn into_store(self) -> (Vec<BusAgent>, Vec<BusMessage>) {
        let agents = self
            .agents
            .into_iter()
            .map(|(name, a)| BusAgent {
                name,
                capabilities: a.capabilities,
                registered_at: 0,
                last_poll: a.last_poll,
            })
            .collect();
        let messages = self
            .messages
            .into_iter()
            .map(|m| {
                let redeliver = m.status == "delivered";
                BusMessage {
                    id: m.id,
                    from: m.from,
                    to: m.to,
                    kind: m.kind,
                    capability: m.capability,
                    payload: m.payload,
                    ttl: m.ttl,
                    status: if redeliver {
                        "pending".into()
                    } else {
                        m.status
                    },
                    ts: m.ts,
                    reply_to: m.reply_to,
                    attempts: u32::from(redeliver),
                    lease_token: None,
                    visible_at: m.ts,
                    result: m.result,
                    error: m.error,
                    history: Value::Array(vec![]),
                }
            })
            .collect();
        (agents, messages)
    }

    /// The seed's file for what the store holds.
    pub fn from_store(agents: Vec<BusAgent>, messages: Vec<BusMessage>) -> Self {
        // The seed numbers its ids from `seq`: never hand back one that an
        // id in use (`msg_NNN`) has passed.
        let numbered = messages
            .iter()
            .filter_map(|m| m.id.strip_prefix("msg_")?.parse::<u64>().ok())
            .max()
            .unwrap_or(0);
        Self {
            seq: numbered.max(messages.len() as u64),
            messages: messages
                .into_iter()
                .map(|m| SeedMessage {
                    id: m.id,
                    from: m.from,
                    to: m.to,
                    kind: m.kind,
                    capability: m.capability,
                    payload: m.payload,
                    ttl: m.ttl,
                    status: m.status,
                    ts: m.ts,
                    reply_to: m.reply_to,
                    result: m.result,
                    error: m.error,
                })
                .collect(),
            agents: agents
                .into_iter()
                .map(|a| {
                    (
                        a.name,
                        SeedAgent {
                            last_poll: a.last_poll,
                            capabilities: a.capabilities,
                        },
                    )
                })
                .collect(),
        }
    }
}
