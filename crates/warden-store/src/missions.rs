//! AIWG executor-contract missions and their event outbox.
//!
//! A mission's state changes only through [`MissionState::become_`], in the
//! same transaction as the event that reports it, so the log and the row
//! never disagree. Events are appended before they are sent; the outbox
//! cursor says how far the orchestrator has been given them.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::Value;
use warden_core::{MissionId, MissionState, Timestamp};

use crate::{Store, StoreError, events};

/// A mission as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct MissionRecord {
    pub id: MissionId,
    /// The `:id` of the dispatch route it came in on.
    pub session_id: String,
    /// The instance it runs in.
    pub instance: String,
    pub objective: String,
    pub completion: String,
    pub long_running: bool,
    /// The dispatch's `metadata`, passed through.
    pub metadata: Value,
    pub state: MissionState,
    /// Stable per mission: named by `mission.suspended` and presented back in
    /// `mission.reconnected`.
    pub checkpoint_id: String,
    /// Where its shim keeps output and exit status.
    pub run_dir: Option<String>,
    /// The shim's pid and start time (clock ticks after boot): a pid alone
    /// may have been reused.
    pub shim: Option<(i32, u64)>,
    pub exit_code: Option<i32>,
    pub error: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub completed_at: Option<Timestamp>,
    /// Bytes of its output reported so far (`None`: nothing yet).
    pub scanned: Option<u64>,
}

/// What a state change also records.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MissionUpdate {
    pub run_dir: Option<String>,
    pub shim: Option<(i32, u64)>,
    pub exit_code: Option<i32>,
    pub error: Option<String>,
    /// How far its output has been reported, when that moved.
    pub scanned: Option<u64>,
    /// Refuse the change unless the mission is in this state now (a
    /// compare-and-set against a change that happened meanwhile).
    pub only_from: Option<MissionState>,
}

/// A suspended mission to resume: the events that say so (kind,
/// envelope), and the state it ends in (`running`, or `hitl_required`).
#[derive(Debug, Clone, PartialEq)]
pub struct Resume {
    pub id: MissionId,
    pub events: Vec<(String, Value)>,
    pub to: MissionState,
}

/// One event of the log, as delivered: its seq and the envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct MissionEvent {
    pub seq: u64,
    pub kind: String,
    pub envelope: Value,
}

/// Whether a dispatch created the mission or found it already there.
#[derive(Debug, Clone, PartialEq)]
pub enum Dispatched {
    /// New; the seq of its first event.
    Created(u64),
    /// The same `mission_id` was dispatched before: nothing was started again.
    Existing(Box<MissionRecord>),
}

const COLUMNS: &str = "id, session_id, instance, objective, completion, long_running, metadata, \
     state, checkpoint_id, run_dir, shim_pid, shim_start, exit_code, error, created_at, \
     updated_at, completed_at, scanned";

fn millis(ms: i64) -> Timestamp {
    Timestamp::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// Reads one row; the inner result holds what does not convert (a row
/// written by this code always does).
fn from_row(r: &Row<'_>) -> rusqlite::Result<Result<MissionRecord, StoreError>> {
    let id: String = r.get(0)?;
    let metadata: String = r.get(6)?;
    let state: String = r.get(7)?;
    let shim = match (r.get::<_, Option<i64>>(10)?, r.get::<_, Option<i64>>(11)?) {
        (Some(pid), Some(start)) => Some((pid as i32, start as u64)),
        _ => None,
    };
    let session_id = r.get(1)?;
    let instance = r.get(2)?;
    let objective = r.get(3)?;
    let completion = r.get(4)?;
    let long_running = r.get::<_, i64>(5)? != 0;
    let checkpoint_id = r.get(8)?;
    let run_dir = r.get(9)?;
    let exit_code = r.get(12)?;
    let error = r.get(13)?;
    let created_at = millis(r.get(14)?);
    let updated_at = millis(r.get(15)?);
    let completed_at = r.get::<_, Option<i64>>(16)?.map(millis);
    let scanned = r.get::<_, Option<i64>>(17)?.map(|n| n.max(0) as u64);
    Ok((|| {
        Ok(MissionRecord {
            id: MissionId::parse(&id)?,
            session_id,
            instance,
            objective,
            completion,
            long_running,
            metadata: serde_json::from_str(&metadata)?,
            state: MissionState::parse(&state).ok_or_else(|| {
                warden_core::CoreError::field("missions.state", format!("unknown state {state:?}"))
            })?,
            checkpoint_id,
            run_dir,
            shim,
            exit_code,
            error,
            created_at,
            updated_at,
            completed_at,
            scanned,
        })
    })())
}

fn load(c: &Connection, id: &str) -> Result<Option<MissionRecord>, StoreError> {
    c.prepare_cached(&format!("SELECT {COLUMNS} FROM missions WHERE id = ?1"))?
        .query_row(params![id], from_row)
        .optional()?
        .transpose()
}

fn not_found(id: &MissionId) -> StoreError {
    StoreError::NotFound {
        kind: "mission",
        id: id.to_string(),
    }
}

/// Appends an event of mission `id`, moving its read mark to `scanned`
/// when given; refused for a mission that does not exist.
fn append_event(
    c: &Connection,
    id: &MissionId,
    (kind, envelope): &(String, Value),
    scanned: Option<u64>,
) -> Result<u64, StoreError> {
    let found = c
        .prepare_cached("UPDATE missions SET scanned = COALESCE(?2, scanned) WHERE id = ?1")?
        .execute(params![id.as_str(), scanned.map(|n| n as i64)])?;
    if found == 0 {
        return Err(not_found(id));
    }
    events::append(c, "mission", id.as_str(), kind, envelope)
}

/// `seq, kind, body` of an events row.
fn event_row(r: &Row<'_>) -> rusqlite::Result<(i64, String, String)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
}

fn mission_event((seq, kind, body): (i64, String, String)) -> Result<MissionEvent, StoreError> {
    Ok(MissionEvent {
        seq: seq as u64,
        kind,
        envelope: serde_json::from_str(&body)?,
    })
}

impl MissionRecord {
    /// A mission just dispatched: `assigned`, created now, nothing run yet
    /// (not long-running, no metadata: set those after).
    pub fn assigned(
        id: MissionId,
        session_id: String,
        instance: String,
        objective: String,
        completion: String,
        checkpoint_id: String,
    ) -> Self {
        let now = Timestamp::now();
        Self {
            id,
            session_id,
            instance,
            objective,
            completion,
            long_running: false,
            metadata: Value::Object(serde_json::Map::new()),
            state: MissionState::Assigned,
            checkpoint_id,
            run_dir: None,
            shim: None,
            exit_code: None,
            error: None,
            created_at: now,
            updated_at: now,
            completed_at: None,
            scanned: None,
        }
    }
}

impl Store {
    /// Records a dispatched mission (state `assigned`) with its first event,
    /// in one transaction, unless a mission with that id exists already.
    pub async fn dispatch_mission(
        &self,
        rec: MissionRecord,
        assigned: Value,
    ) -> Result<Dispatched, StoreError> {
        self.write(move |c| {
            if let Some(existing) = load(c, rec.id.as_str())? {
                return Ok(Dispatched::Existing(Box::new(existing)));
            }
            let now = Timestamp::now().as_millis() as i64;
            c.prepare_cached(&format!(
                "INSERT INTO missions ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, NULL, NULL, NULL, NULL, NULL, ?10, ?10, NULL, NULL)"
            ))?
            .execute(params![
                rec.id.as_str(),
                rec.session_id,
                rec.instance,
                rec.objective,
                rec.completion,
                i64::from(rec.long_running),
                rec.metadata.to_string(),
                MissionState::Assigned.as_str(),
                rec.checkpoint_id,
                now,
            ])?;
            let seq = events::append(c, "mission", rec.id.as_str(), "mission.assigned", &assigned)?;
            Ok(Dispatched::Created(seq))
        })
        .await
    }

    /// Moves mission `id` to `to` (checked against the contract's diagram)
    /// with `update`, appending `event` (kind, envelope) in the same
    /// transaction. Returns the event's seq.
    pub async fn transition_mission(
        &self,
        id: MissionId,
        to: MissionState,
        update: MissionUpdate,
        event: (String, Value),
    ) -> Result<u64, StoreError> {
        self.write(move |c| {
            let Some(cur) = load(c, id.as_str())? else {
                return Err(not_found(&id));
            };
            if let Some(from) = update.only_from
                && cur.state != from
            {
                return Err(StoreError::Rejected(
                    warden_core::CoreError::InvalidTransition {
                        from: cur.state.as_str().to_owned(),
                        to: to.as_str().to_owned(),
                    },
                ));
            }
            cur.state.become_(to)?;
            let now = Timestamp::now().as_millis() as i64;
            let (pid, start) = match update.shim.or(cur.shim) {
                Some((p, s)) => (Some(i64::from(p)), Some(s as i64)),
                None => (None, None),
            };
            c.prepare_cached(
                "UPDATE missions SET state = ?2, run_dir = ?3, shim_pid = ?4, shim_start = ?5,
                        exit_code = ?6, error = ?7, updated_at = ?8,
                        completed_at = CASE WHEN ?9 THEN ?8 ELSE completed_at END,
                        scanned = COALESCE(?10, scanned)
                 WHERE id = ?1",
            )?
            .execute(params![
                id.as_str(),
                to.as_str(),
                update.run_dir.or(cur.run_dir),
                pid,
                start,
                update.exit_code.or(cur.exit_code),
                update.error.or(cur.error),
                now,
                to.is_terminal(),
                update.scanned.map(|n| n as i64),
            ])?;
            events::append(c, "mission", id.as_str(), &event.0, &event.1)
        })
        .await
    }

    /// Appends an event that changes no state (`mission.progress`,
    /// `mission.hitl_required`, `mission.reconnected`, …).
    pub async fn append_mission_event(
        &self,
        id: MissionId,
        kind: String,
        envelope: Value,
    ) -> Result<u64, StoreError> {
        self.write(move |c| append_event(c, &id, &(kind, envelope), None))
            .await
    }

    /// Appends a `mission.progress` (kind, envelope) and records that the
    /// mission's output up to `scanned` bytes has been reported, together.
    pub async fn record_progress(
        &self,
        id: MissionId,
        scanned: u64,
        event: (String, Value),
    ) -> Result<u64, StoreError> {
        self.write(move |c| append_event(c, &id, &event, Some(scanned)))
            .await
    }

    /// Appends an executor-level event (`executor.resync`).
    pub async fn append_executor_event(
        &self,
        executor_id: String,
        kind: String,
        envelope: Value,
    ) -> Result<u64, StoreError> {
        self.write(move |c| events::append(c, "executor", &executor_id, &kind, &envelope))
            .await
    }

    /// One mission.
    pub async fn mission(&self, id: MissionId) -> Result<MissionRecord, StoreError> {
        self.read(move |c| load(c, id.as_str())?.ok_or_else(|| not_found(&id)))
            .await
    }

    /// Missions not in a terminal state, oldest first.
    pub async fn active_missions(&self) -> Result<Vec<MissionRecord>, StoreError> {
        self.read(|c| {
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM missions
                 WHERE state NOT IN ('done', 'failed', 'aborted') ORDER BY created_at, id"
            ))?;
            let rows = stmt.query_map([], from_row)?;
            rows.map(|r| r?).collect()
        })
        .await
    }

    /// The newest `limit` missions (only those not ended when `active`),
    /// newest first.
    pub async fn list_missions(
        &self,
        active: bool,
        limit: u32,
    ) -> Result<Vec<MissionRecord>, StoreError> {
        self.read(move |c| {
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM missions
                 WHERE NOT ?1 OR state NOT IN ('done', 'failed', 'aborted')
                 ORDER BY created_at DESC, id DESC LIMIT ?2"
            ))?;
            let rows = stmt.query_map(params![active, limit], from_row)?;
            rows.map(|r| r?).collect()
        })
        .await
    }

    /// Resumes many suspended missions in one transaction (one commit for
    /// thousands after a restart): each one still `suspended` gets its
    /// events appended in order and becomes `running`, then `to` (`running`,
    /// or `hitl_required` for one whose prompt is offered again). One that
    /// changed meanwhile is left as it is. Returns the ids resumed.
    pub async fn resume_missions(&self, batch: Vec<Resume>) -> Result<Vec<MissionId>, StoreError> {
        self.write(move |c| {
            let now = Timestamp::now().as_millis() as i64;
            let mut resumed = Vec::with_capacity(batch.len());
            for Resume {
                id,
                events: evs,
                to,
            } in batch
            {
                MissionState::Suspended.become_(MissionState::Running)?;
                if to != MissionState::Running {
                    MissionState::Running.become_(to)?;
                }
                let moved = c
                    .prepare_cached(
                        "UPDATE missions SET state = ?2, updated_at = ?3
                         WHERE id = ?1 AND state = ?4",
                    )?
                    .execute(params![
                        id.as_str(),
                        to.as_str(),
                        now,
                        MissionState::Suspended.as_str()
                    ])?;
                if moved == 0 {
                    continue;
                }
                for (kind, envelope) in &evs {
                    events::append(c, "mission", id.as_str(), kind, envelope)?;
                }
                resumed.push(id);
            }
            Ok(resumed)
        })
        .await
    }

    /// The last `n` events of mission `id`, oldest first.
    pub async fn recent_mission_events(
        &self,
        id: MissionId,
        n: u32,
    ) -> Result<Vec<MissionEvent>, StoreError> {
        self.read(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT seq, kind, body FROM (
                    SELECT seq, kind, body FROM events
                    WHERE entity_kind = 'mission' AND entity_id = ?1
                    ORDER BY seq DESC LIMIT ?2
                 ) ORDER BY seq",
            )?;
            let rows = stmt.query_map(params![id.as_str(), n], event_row)?;
            rows.map(|r| mission_event(r?)).collect()
        })
        .await
    }

    /// Mission events not yet delivered and after `after` (what the caller
    /// already sent and awaits an acknowledgement for), oldest first, at
    /// most `limit`.
    pub async fn undelivered_mission_events(
        &self,
        after: u64,
        limit: u32,
    ) -> Result<Vec<MissionEvent>, StoreError> {
        self.read(move |c| {
            let delivered: i64 = c.query_row(
                "SELECT delivered FROM mission_outbox WHERE id = 1",
                [],
                |r| r.get(0),
            )?;
            let mut stmt = c.prepare_cached(
                "SELECT seq, kind, body FROM events
                 WHERE entity_kind = 'mission' AND seq > ?1
                 ORDER BY seq LIMIT ?2",
            )?;
            let from = delivered.max(i64::try_from(after).unwrap_or(i64::MAX));
            let rows = stmt.query_map(params![from, limit], event_row)?;
            rows.map(|r| mission_event(r?)).collect()
        })
        .await
    }

    /// Records that every queued event up to `seq` was delivered (never
    /// moves backwards).
    pub async fn mission_events_delivered(&self, seq: u64) -> Result<(), StoreError> {
        self.write(move |c| {
            c.prepare_cached(
                "UPDATE mission_outbox SET delivered = MAX(delivered, ?1) WHERE id = 1",
            )?
            .execute(params![seq as i64])?;
            Ok(())
        })
        .await
    }
}
