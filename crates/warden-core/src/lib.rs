//! warden's domain types. No I/O, no async runtime: ids, time, run specs and
//! outcomes, and the checked state transitions every other crate relies on.
#![forbid(unsafe_code)]

pub mod confine;
pub mod error;
pub mod id;
pub mod mission;
pub mod outcome;
pub mod process;
pub mod prompt;
pub mod run;
pub mod task;
pub mod time;

pub use confine::Policy;
pub use error::CoreError;
pub use id::RunId;
pub use mission::{MissionId, MissionState};
pub use outcome::{FailureKind, Outcome};
pub use process::{OutputStream, ProcessEvent};
pub use prompt::{LastLine, PromptWatch};
pub use run::{RunLimits, RunRecord, RunSpec, RunState, StdinMode, Terminal};
pub use task::{
    Artifact, Message, Part, PartContent, Role, Task, TaskEvent, TaskId, TaskState, TaskStatus,
};
pub use time::Timestamp;
