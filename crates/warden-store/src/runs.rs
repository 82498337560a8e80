//! Runs: create, start, output, finish, and the restart sweep. Each change
//! appends its event (and, where someone asked for it, an audit entry) in the
//! same transaction.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::json;
use warden_core::{CoreError, Outcome, RunId, RunRecord, RunState, Timestamp};

use crate::{Store, StoreError, audit, events};

const COLUMNS: &str =
    "id, spec, state, outcome, pid, created_at, started_at, finished_at, output_bytes";

/// A `runs` row as SQLite returns it, before decoding.
type Raw = (
    String,
    String,
    String,
    Option<String>,
    Option<i64>,
    i64,
    Option<i64>,
    Option<i64>,
    i64,
);

fn from_row(r: &Row<'_>) -> rusqlite::Result<Raw> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
    ))
}

fn decode(raw: Raw) -> Result<RunRecord, StoreError> {
    let (id, spec, state, outcome, pid, created, started, finished, bytes) = raw;
    let ts = |ms: i64| Timestamp::from_millis(ms as u64);
    Ok(RunRecord {
        id: id.parse()?,
        spec: serde_json::from_str(&spec)?,
        state: state.parse()?,
        outcome: outcome.map(|o| serde_json::from_str(&o)).transpose()?,
        pid: pid.map(|p| p as u32),
        created_at: ts(created),
        started_at: started.map(ts),
        finished_at: finished.map(ts),
        output_bytes: bytes as u64,
    })
}

fn load(conn: &Connection, id: &str) -> Result<RunRecord, StoreError> {
    let raw = conn
        .query_row(
            &format!("SELECT {COLUMNS} FROM runs WHERE id = ?1"),
            [id],
            from_row,
        )
        .optional()?
        .ok_or_else(|| StoreError::NotFound {
            kind: "run",
            id: id.to_owned(),
        })?;
    decode(raw)
}

/// The current state alone: what a transition needs to check.
fn state_of(conn: &Connection, id: &str) -> Result<RunState, StoreError> {
    let state: String = conn
        .prepare_cached("SELECT state FROM runs WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()?
        .ok_or_else(|| StoreError::NotFound {
            kind: "run",
            id: id.to_owned(),
        })?;
    Ok(state.parse()?)
}

fn finish_in(conn: &Connection, id: &str, outcome: &Outcome) -> Result<RunState, StoreError> {
    let state = state_of(conn, id)?.finish(outcome)?;
    conn.prepare_cached(
        "UPDATE runs SET state = ?2, outcome = ?3, finished_at = ?4 WHERE id = ?1",
    )?
    .execute(params![
        id,
        state.as_str(),
        serde_json::to_string(outcome)?,
        Timestamp::now().as_millis() as i64
    ])?;
    events::append(
        conn,
        "run",
        id,
        "run.finished",
        &json!({ "state": state, "outcome": outcome }),
    )?;
    Ok(state)
}

impl Store {
    /// Records a new run (state `starting`) with its event and audit entry.
    pub async fn create_run(&self, run: RunRecord, actor: &str) -> Result<RunRecord, StoreError> {
        let actor = actor.to_owned();
        self.write(move |c| {
            let id = run.id.to_string();
            c.prepare_cached(&format!(
                "INSERT INTO runs ({COLUMNS}) VALUES (?1, ?2, ?3, NULL, NULL, ?4, NULL, NULL, 0)"
            ))?
            .execute(params![
                id,
                serde_json::to_string(&run.spec)?,
                run.state.as_str(),
                run.created_at.as_millis() as i64
            ])?;
            let body = json!({ "argv": run.spec.argv, "cwd": run.spec.cwd });
            events::append(c, "run", &id, "run.created", &body)?;
            audit::append(c, &actor, "run.create", &id, &body)?;
            load(c, &id)
        })
        .await
    }

    /// `starting` → `running`, with the leader's pid.
    pub async fn mark_started(&self, id: RunId, pid: u32) -> Result<(), StoreError> {
        self.write(move |c| {
            let id = id.to_string();
            let state = state_of(c, &id)?.start()?;
            c.prepare_cached(
                "UPDATE runs SET state = ?2, pid = ?3, started_at = ?4 WHERE id = ?1",
            )?
            .execute(params![
                id,
                state.as_str(),
                pid,
                Timestamp::now().as_millis() as i64
            ])?;
            events::append(c, "run", &id, "run.started", &json!({ "pid": pid }))?;
            Ok(())
        })
        .await
    }

    /// Saves one output chunk and its `run.output` event; only a running
    /// run takes output.
    pub async fn append_output(
        &self,
        id: RunId,
        chunk: u64,
        stream: &'static str,
        data: Vec<u8>,
    ) -> Result<u64, StoreError> {
        self.write(move |c| {
            let id = id.to_string();
            let state = state_of(c, &id)?;
            if state != RunState::Running {
                return Err(CoreError::InvalidTransition {
                    from: state.to_string(),
                    to: "output".into(),
                }
                .into());
            }
            let len = data.len();
            c.prepare_cached(
                "INSERT INTO output_chunks (run_id, seq, stream, data) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![id, chunk as i64, stream, data])?;
            c.prepare_cached("UPDATE runs SET output_bytes = output_bytes + ?2 WHERE id = ?1")?
                .execute(params![id, len as i64])?;
            events::append(
                c,
                "run",
                &id,
                "run.output",
                &json!({ "chunk": chunk, "stream": stream, "bytes": len }),
            )
        })
        .await
    }

    /// Ends a live run with `outcome` and returns its new state; refuses to
    /// end an ended run.
    pub async fn finish_run(&self, id: RunId, outcome: Outcome) -> Result<RunState, StoreError> {
        self.write(move |c| finish_in(c, &id.to_string(), &outcome))
            .await
    }

    /// Runs still `starting` or `running`, oldest first. At start-up these
    /// are the runs a previous server left in flight.
    pub async fn live_runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.read(|c| {
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM runs WHERE state IN ('starting', 'running') ORDER BY id"
            ))?;
            stmt.query_map([], from_row)?
                .map(|r| r.map_err(StoreError::from).and_then(decode))
                .collect()
        })
        .await
    }

    /// Ends a run the server can no longer watch with an infrastructure
    /// failure, and audits it as done by `system`.
    pub async fn interrupt_run(
        &self,
        id: RunId,
        reason: &str,
        detail: String,
    ) -> Result<RunState, StoreError> {
        let outcome = Outcome::infrastructure(reason, Some(detail));
        let reason = reason.to_owned();
        self.write(move |c| {
            let id = id.to_string();
            let state = finish_in(c, &id, &outcome)?;
            audit::append(
                c,
                "system",
                "run.interrupt",
                &id,
                &json!({ "reason": reason }),
            )?;
            Ok(state)
        })
        .await
    }

    /// One run.
    pub async fn get_run(&self, id: RunId) -> Result<RunRecord, StoreError> {
        self.read(move |c| load(c, &id.to_string())).await
    }

    /// Runs, newest first, optionally only those in `state`.
    pub async fn list_runs(
        &self,
        state: Option<RunState>,
        limit: u32,
    ) -> Result<Vec<RunRecord>, StoreError> {
        self.read(move |c| {
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM runs WHERE (?1 IS NULL OR state = ?1) ORDER BY id DESC LIMIT ?2"
            ))?;
            stmt.query_map(params![state.map(RunState::as_str), limit], from_row)?
                .map(|r| r.map_err(StoreError::from).and_then(decode))
                .collect()
        })
        .await
    }

    /// Whether the store answers reads.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.read(|c| {
            Ok(c.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))
                .map(|_| ())?)
        })
        .await
    }
}
