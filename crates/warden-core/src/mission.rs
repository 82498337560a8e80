//! AIWG executor-contract missions: their ids and the checked state machine
//! of the contract's diagram.
//!
//! ```text
//! Assigned ──┬─→ Running ──┬─→ HitlRequired ──┐
//!            │             │   ┌──────────────┘ (answered: back to Running)
//!            │             │   ▼
//!            │             ├─→ Suspended ─────→ Running (after restart + resync)
//!            │             │
//!            │             └─→ Completed │ Failed │ Aborted   (terminal)
//!            │
//!            └─→ Failed (the run could not start)
//! ```
//!
//! A suspended mission whose process ended while the server was down goes
//! straight to the ending it really had (`Completed` or `Failed`).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::CoreError;

/// A mission id as the orchestrator chose it: opaque, 1–256 printable
/// characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MissionId(String);

/// The longest mission id accepted.
pub const MAX_MISSION_ID: usize = 256;

impl MissionId {
    /// Checks and wraps an id.
    pub fn parse(s: &str) -> Result<Self, CoreError> {
        if s.is_empty() || s.len() > MAX_MISSION_ID {
            return Err(CoreError::field(
                "mission_id",
                format!("must be 1 to {MAX_MISSION_ID} bytes"),
            ));
        }
        if s.chars().any(char::is_control) {
            return Err(CoreError::field(
                "mission_id",
                "must not contain control characters",
            ));
        }
        Ok(Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for MissionId {
    type Error = CoreError;
    fn try_from(s: String) -> Result<Self, CoreError> {
        Self::parse(&s)
    }
}

impl From<MissionId> for String {
    fn from(id: MissionId) -> String {
        id.0
    }
}

impl fmt::Display for MissionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a mission is, named as the contract's `mission_state` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MissionState {
    #[serde(rename = "assigned")]
    Assigned,
    #[serde(rename = "running")]
    Running,
    #[serde(rename = "hitl-required")]
    HitlRequired,
    #[serde(rename = "suspended")]
    Suspended,
    #[serde(rename = "done")]
    Completed,
    #[serde(rename = "failed")]
    Failed,
    #[serde(rename = "aborted")]
    Aborted,
}

impl MissionState {
    /// Every state, for tests and tables.
    pub const ALL: [MissionState; 7] = [
        Self::Assigned,
        Self::Running,
        Self::HitlRequired,
        Self::Suspended,
        Self::Completed,
        Self::Failed,
        Self::Aborted,
    ];

    /// The contract's name (`done` for completed).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Assigned => "assigned",
            Self::Running => "running",
            Self::HitlRequired => "hitl-required",
            Self::Suspended => "suspended",
            Self::Completed => "done",
            Self::Failed => "failed",
            Self::Aborted => "aborted",
        }
    }

    /// Parses a contract name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// Completed, failed and aborted missions never change again and are
    /// not owned (they are left out of `executor.resync`).
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Aborted)
    }

    /// Whether the diagram has an arrow from `self` to `to`.
    pub fn can_become(self, to: Self) -> bool {
        use MissionState::*;
        match self {
            Assigned => matches!(to, Running | Failed),
            Running => matches!(to, HitlRequired | Suspended | Completed | Failed | Aborted),
            HitlRequired => matches!(to, Running | Suspended | Completed | Failed | Aborted),
            Suspended => matches!(to, Running | Completed | Failed),
            Completed | Failed | Aborted => false,
        }
    }

    /// The checked transition.
    pub fn become_(self, to: Self) -> Result<Self, CoreError> {
        if self.can_become(to) {
            Ok(to)
        } else {
            Err(CoreError::InvalidTransition {
                from: self.as_str().to_owned(),
                to: to.as_str().to_owned(),
            })
        }
    }
}

impl fmt::Display for MissionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::MissionState::*;
    use super::*;

    #[test]
    fn the_diagram_and_nothing_else() {
        let allowed = [
            (Assigned, Running),
            (Assigned, Failed),
            (Running, HitlRequired),
            (Running, Suspended),
            (Running, Completed),
            (Running, Failed),
            (Running, Aborted),
            (HitlRequired, Running),
            (HitlRequired, Suspended),
            (HitlRequired, Completed),
            (HitlRequired, Failed),
            (HitlRequired, Aborted),
            (Suspended, Running),
            (Suspended, Completed),
            (Suspended, Failed),
        ];
        for from in MissionState::ALL {
            for to in MissionState::ALL {
                let want = allowed.contains(&(from, to));
                assert_eq!(from.can_become(to), want, "{from} -> {to}");
                assert_eq!(from.become_(to).is_ok(), want, "{from} -> {to}");
            }
        }
    }

    #[test]
    fn terminal_states_and_wire_names() {
        for s in MissionState::ALL {
            assert_eq!(MissionState::parse(s.as_str()), Some(s));
            assert_eq!(
                serde_json::to_value(s).unwrap(),
                serde_json::json!(s.as_str())
            );
            assert_eq!(
                s.is_terminal(),
                matches!(s, Completed | Failed | Aborted),
                "{s}"
            );
        }
        assert_eq!(Completed.as_str(), "done");
        assert_eq!(HitlRequired.as_str(), "hitl-required");
    }

    #[test]
    fn mission_ids_are_checked() {
        assert!(MissionId::parse("m-1").is_ok());
        assert!(MissionId::parse("").is_err());
        assert!(MissionId::parse("a\nb").is_err());
        assert!(MissionId::parse(&"x".repeat(257)).is_err());
        let id: MissionId = serde_json::from_str("\"m-abc\"").unwrap();
        assert_eq!(id.as_str(), "m-abc");
        assert!(serde_json::from_str::<MissionId>("\"\"").is_err());
    }
}
