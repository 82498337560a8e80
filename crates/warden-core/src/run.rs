//! Runs: the validated request for one bounded process execution, and the
//! state machine it moves through.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{CoreError, Outcome};

/// How the child's standard streams are connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Terminal {
    /// stdout and stderr are separate pipes.
    #[default]
    Pipes,
    /// stdin, stdout and stderr are one pseudo-terminal, for programs that check `isatty`.
    Pty,
}

/// Whether the run gets a writable stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StdinMode {
    /// stdin is closed (reads see end of file).
    #[default]
    Closed,
    /// stdin stays open for later writes (prompt answers).
    Open,
}

/// Upper bounds an operator configures; requests beyond them are refused, not clamped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    /// The longest deadline a run may ask for.
    pub max_timeout: Duration,
    /// The largest output cap a run may ask for, in bytes.
    pub max_output_cap: u64,
}

impl Default for RunLimits {
    fn default() -> Self {
        Self {
            max_timeout: Duration::from_secs(7 * 24 * 3600),
            max_output_cap: 1 << 30,
        }
    }
}

/// A validated request to run one program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSpec {
    /// Program and arguments; `argv[0]` is resolved to an absolute path before spawning.
    pub argv: Vec<String>,
    /// The working directory.
    pub cwd: PathBuf,
    /// Extra environment given to the child on top of the minimal base.
    pub env: Vec<(String, String)>,
    /// The deadline, measured from spawn.
    #[serde(with = "millis")]
    pub timeout: Duration,
    /// Total bytes of stdout plus stderr allowed before the group is killed.
    pub max_output: u64,
    /// Pipes or a pseudo-terminal.
    pub terminal: Terminal,
    /// Closed or writable stdin.
    pub stdin: StdinMode,
    /// The confined tier's policy; `None` runs on the host tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confine: Option<crate::confine::Policy>,
}

impl RunSpec {
    /// A spec with pipes, closed stdin and no extra environment.
    pub fn new(argv: Vec<String>, cwd: PathBuf, timeout: Duration, max_output: u64) -> Self {
        Self {
            argv,
            cwd,
            env: Vec::new(),
            timeout,
            max_output,
            terminal: Terminal::Pipes,
            stdin: StdinMode::Closed,
            confine: None,
        }
    }

    /// Checks every field against `limits`; the error names the offending field.
    pub fn validate(&self, limits: &RunLimits) -> Result<(), CoreError> {
        let Some(program) = self.argv.first() else {
            return Err(CoreError::field("argv", "must name a program"));
        };
        if program.is_empty() {
            return Err(CoreError::field("argv[0]", "program must not be empty"));
        }
        if let Some(i) = self.argv.iter().position(|a| a.contains('\0')) {
            return Err(CoreError::field(
                format!("argv[{i}]"),
                "contains a NUL byte",
            ));
        }
        if self.cwd.as_os_str().is_empty() {
            return Err(CoreError::field("cwd", "must not be empty"));
        }
        if !self.cwd.is_absolute() {
            return Err(CoreError::field("cwd", "must be an absolute path"));
        }
        if self.timeout.is_zero() {
            return Err(CoreError::field("timeout", "must be greater than zero"));
        }
        if self.timeout > limits.max_timeout {
            return Err(CoreError::field(
                "timeout",
                format!("must be at most {} s", limits.max_timeout.as_secs()),
            ));
        }
        if self.max_output == 0 || self.max_output > limits.max_output_cap {
            return Err(CoreError::field(
                "max_output",
                format!("must be between 1 and {} bytes", limits.max_output_cap),
            ));
        }
        for (name, value) in &self.env {
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                return Err(CoreError::field(
                    format!("env.{name}"),
                    "variable names must be non-empty without '=' or NUL",
                ));
            }
            if value.contains('\0') {
                return Err(CoreError::field(
                    format!("env.{name}"),
                    "contains a NUL byte",
                ));
            }
        }
        if let Some(policy) = &self.confine {
            policy.validate()?;
        }
        Ok(())
    }
}

/// Where a run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Recorded, not yet spawned.
    Starting,
    /// The process was spawned and has not ended.
    Running,
    /// Exited 0.
    Completed,
    /// Non-zero exit, signal, or could not run.
    Failed,
    /// Deadline passed.
    TimedOut,
    /// Cancelled by an operator.
    Cancelled,
    /// Output cap exceeded.
    OutputLimit,
}

impl RunState {
    /// Whether the run has ended.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Self::Starting | Self::Running)
    }

    /// Starting → Running, once the process exists.
    pub fn start(self) -> Result<Self, CoreError> {
        match self {
            Self::Starting => Ok(Self::Running),
            other => Err(other.refuse(Self::Running)),
        }
    }

    /// A live run ends with `outcome`; an ended run cannot end again.
    pub fn finish(self, outcome: &Outcome) -> Result<Self, CoreError> {
        let to = outcome.state();
        if self.is_terminal() {
            return Err(self.refuse(to));
        }
        Ok(to)
    }

    fn refuse(self, to: Self) -> CoreError {
        CoreError::InvalidTransition {
            from: self.to_string(),
            to: to.to_string(),
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::TimedOut => "timed_out",
            Self::Cancelled => "cancelled",
            Self::OutputLimit => "output_limit",
        }
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunState {
    type Err = CoreError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "starting" => Self::Starting,
            "running" => Self::Running,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "timed_out" => Self::TimedOut,
            "cancelled" => Self::Cancelled,
            "output_limit" => Self::OutputLimit,
            other => {
                return Err(CoreError::field(
                    "state",
                    format!("unknown state {other:?}"),
                ));
            }
        })
    }
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> RunSpec {
        RunSpec {
            argv: vec!["true".into()],
            cwd: "/tmp".into(),
            env: vec![],
            timeout: Duration::from_secs(5),
            max_output: 1024,
            terminal: Terminal::Pipes,
            stdin: StdinMode::Closed,
            confine: None,
        }
    }

    #[test]
    fn validation_names_the_field() {
        let limits = RunLimits::default();
        assert_eq!(spec().validate(&limits), Ok(()));
        let cases: Vec<(RunSpec, &str)> = vec![
            (
                RunSpec {
                    argv: vec![],
                    ..spec()
                },
                "argv",
            ),
            (
                RunSpec {
                    argv: vec![String::new()],
                    ..spec()
                },
                "argv[0]",
            ),
            (
                RunSpec {
                    argv: vec!["a".into(), "b\0".into()],
                    ..spec()
                },
                "argv[1]",
            ),
            (
                RunSpec {
                    cwd: "rel".into(),
                    ..spec()
                },
                "cwd",
            ),
            (
                RunSpec {
                    timeout: Duration::ZERO,
                    ..spec()
                },
                "timeout",
            ),
            (
                RunSpec {
                    timeout: Duration::from_secs(30 * 86400),
                    ..spec()
                },
                "timeout",
            ),
            (
                RunSpec {
                    max_output: 0,
                    ..spec()
                },
                "max_output",
            ),
            (
                RunSpec {
                    max_output: u64::MAX,
                    ..spec()
                },
                "max_output",
            ),
            (
                RunSpec {
                    env: vec![("A=B".into(), "x".into())],
                    ..spec()
                },
                "env.A=B",
            ),
        ];
        for (s, field) in cases {
            let err = s.validate(&limits).unwrap_err();
            assert_eq!(err.field_name(), Some(field), "{err}");
        }
    }

    #[test]
    fn transitions_are_checked() {
        assert_eq!(RunState::Starting.start(), Ok(RunState::Running));
        assert!(RunState::Running.start().is_err());
        assert_eq!(
            RunState::Running.finish(&Outcome::TimedOut),
            Ok(RunState::TimedOut)
        );
        assert_eq!(
            RunState::Starting.finish(&Outcome::infrastructure("spawn", None)),
            Ok(RunState::Failed)
        );
        assert_eq!(
            RunState::Completed.finish(&Outcome::Cancelled),
            Err(CoreError::InvalidTransition {
                from: "completed".into(),
                to: "cancelled".into()
            })
        );
        for s in [
            "starting",
            "running",
            "completed",
            "failed",
            "timed_out",
            "cancelled",
            "output_limit",
        ] {
            assert_eq!(s.parse::<RunState>().unwrap().as_str(), s);
        }
    }
}

/// What the store knows about a run: its request, where it is, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run's id.
    pub id: crate::RunId,
    /// The validated request.
    pub spec: RunSpec,
    /// Where it is in its life.
    pub state: RunState,
    /// How it ended, once it has.
    pub outcome: Option<Outcome>,
    /// The leader's pid (also its process group id), once spawned.
    pub pid: Option<u32>,
    /// When the run was recorded.
    pub created_at: crate::Timestamp,
    /// When the process was spawned.
    pub started_at: Option<crate::Timestamp>,
    /// When the last process of the run was gone.
    pub finished_at: Option<crate::Timestamp>,
    /// Output bytes kept so far.
    pub output_bytes: u64,
}

impl RunRecord {
    /// A new record in `starting` state.
    pub fn new(spec: RunSpec) -> Self {
        Self {
            id: crate::RunId::new(),
            spec,
            state: RunState::Starting,
            outcome: None,
            pid: None,
            created_at: crate::Timestamp::now(),
            started_at: None,
            finished_at: None,
            output_bytes: 0,
        }
    }
}
