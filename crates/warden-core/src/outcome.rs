//! How a run ended. The vocabulary is fixed: a run is `completed` only when
//! the program exited 0; everything else says what was observed.

use serde::{Deserialize, Serialize};

/// Whose fault a failure was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FailureKind {
    /// The program ran and reported failure: a non-zero exit or a signal.
    Application {
        /// The exit code, absent when a signal ended the process.
        #[serde(skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// The signal that ended the process, when one did.
        #[serde(skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
    },
    /// The program could not run, or died for a reason outside it.
    Infrastructure {
        /// A short machine-readable reason, e.g. `program_not_found`, `server_restart`.
        reason: String,
        /// Human-readable detail, e.g. the OS error.
        #[serde(skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
}

/// The final outcome of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// The program exited with code 0.
    Completed,
    /// The program failed, or could not be run.
    Failed(FailureKind),
    /// The deadline passed; the process group was terminated.
    TimedOut,
    /// An operator cancelled the run; the process group was terminated.
    Cancelled,
    /// The program printed more than the output cap; the group was killed.
    OutputLimit,
}

impl Outcome {
    /// An application failure from an exit code.
    pub fn exit_code(code: i32) -> Self {
        if code == 0 {
            Self::Completed
        } else {
            Self::Failed(FailureKind::Application {
                exit_code: Some(code),
                signal: None,
            })
        }
    }

    /// An application failure from a terminating signal.
    pub fn signal(signal: i32) -> Self {
        Self::Failed(FailureKind::Application {
            exit_code: None,
            signal: Some(signal),
        })
    }

    /// An infrastructure failure.
    pub fn infrastructure(reason: impl Into<String>, detail: Option<String>) -> Self {
        Self::Failed(FailureKind::Infrastructure {
            reason: reason.into(),
            detail,
        })
    }

    /// The state a run with this outcome is in.
    pub fn state(&self) -> crate::RunState {
        use crate::RunState;
        match self {
            Self::Completed => RunState::Completed,
            Self::Failed(_) => RunState::Failed,
            Self::TimedOut => RunState::TimedOut,
            Self::Cancelled => RunState::Cancelled,
            Self::OutputLimit => RunState::OutputLimit,
        }
    }

    /// A one-line description for people.
    pub fn describe(&self) -> String {
        match self {
            Self::Completed => "completed (exit code 0)".into(),
            Self::Failed(FailureKind::Application {
                exit_code: Some(c), ..
            }) => format!("failed (exit code {c})"),
            Self::Failed(FailureKind::Application {
                signal: Some(s), ..
            }) => format!("failed (killed by signal {s})"),
            Self::Failed(FailureKind::Application { .. }) => "failed".into(),
            Self::Failed(FailureKind::Infrastructure { reason, detail }) => match detail {
                Some(d) => format!("failed to run ({reason}: {d})"),
                None => format!("failed to run ({reason})"),
            },
            Self::TimedOut => "timed out (deadline passed, process group terminated)".into(),
            Self::Cancelled => "cancelled (process group terminated)".into(),
            Self::OutputLimit => "output limit exceeded (process group killed)".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wire_shapes_are_stable() {
        assert_eq!(
            serde_json::to_value(Outcome::exit_code(3)).unwrap(),
            json!({"status": "failed", "kind": "application", "exit_code": 3})
        );
        assert_eq!(
            serde_json::to_value(Outcome::infrastructure("server_restart", None)).unwrap(),
            json!({"status": "failed", "kind": "infrastructure", "reason": "server_restart"})
        );
        assert_eq!(
            serde_json::to_value(Outcome::Completed).unwrap(),
            json!({"status": "completed"})
        );
        assert_eq!(
            serde_json::to_value(Outcome::OutputLimit).unwrap(),
            json!({"status": "output_limit"})
        );
        let back: Outcome =
            serde_json::from_value(json!({"status": "failed", "kind": "application", "signal": 9}))
                .unwrap();
        assert_eq!(back, Outcome::signal(9));
    }

    #[test]
    fn exit_zero_is_the_only_completion() {
        assert_eq!(Outcome::exit_code(0), Outcome::Completed);
        assert_eq!(Outcome::exit_code(1).state(), crate::RunState::Failed);
    }
}
