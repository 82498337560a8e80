//! warden's durable store on SQLite.
//!
//! One writer thread owns the only read-write connection and commits
//! concurrent writes together (group commit); a write's future resolves only
//! after its transaction is durable (`synchronous=FULL` in WAL mode). Readers
//! use their own connections and never wait for the writer.
#![forbid(unsafe_code)]

mod audit;
mod bus;
mod error;
mod events;
mod missions;
mod runs;
mod schema;
mod store;
mod tasks;
mod writer;

pub use audit::AuditEntry;
pub use bus::{BusAgent, BusCounts, BusMessage, NewBusMessage, PollRules, ResourceLease};
pub use error::StoreError;
pub use events::{Committed, EntityChanges, EventRecord};
pub use missions::{Dispatched, MissionEvent, MissionRecord, MissionUpdate, Resume};
pub use store::{CommitMode, Store};
pub use tasks::{TaskChange, TaskFilter, TaskPage};
