//! The append-only event log. Every state change appends one event in the
//! same transaction; its global `seq` is what SSE ids and replay use.

use rusqlite::{Connection, params};
use serde::Serialize;
use warden_core::Timestamp;

use crate::{Store, StoreError};

/// One logged event, with the output bytes attached for `run.output`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventRecord {
    /// Global, strictly increasing sequence.
    pub seq: u64,
    /// `run`, later `task`, `mission`, …
    pub entity_kind: String,
    /// The entity's id.
    pub entity_id: String,
    /// e.g. `run.started`.
    pub kind: String,
    /// Event-specific JSON.
    pub body: serde_json::Value,
    /// When it was appended.
    pub ts: Timestamp,
    /// For `run.output`: the chunk's bytes.
    #[serde(skip)]
    pub data: Option<Vec<u8>>,
}

/// Appends an event inside the caller's transaction and returns its seq.
pub(crate) fn append(
    conn: &Connection,
    entity_kind: &str,
    entity_id: &str,
    kind: &str,
    body: &serde_json::Value,
) -> Result<u64, StoreError> {
    conn.prepare_cached(
        "INSERT INTO events (entity_kind, entity_id, kind, body, ts) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        entity_kind,
        entity_id,
        kind,
        body.to_string(),
        Timestamp::now().as_millis() as i64
    ])?;
    Ok(conn.last_insert_rowid() as u64)
}

impl Store {
    /// Events of one entity with `seq > after`, oldest first, at most `limit`.
    pub async fn events_for(
        &self,
        entity_kind: &'static str,
        entity_id: String,
        after: u64,
        limit: u32,
    ) -> Result<Vec<EventRecord>, StoreError> {
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT e.seq, e.kind, e.body, e.ts, c.data
                 FROM events e
                 LEFT JOIN output_chunks c
                   ON e.kind = 'run.output' AND c.run_id = e.entity_id
                  AND c.seq = json_extract(e.body, '$.chunk')
                 WHERE e.entity_kind = ?1 AND e.entity_id = ?2 AND e.seq > ?3
                 ORDER BY e.seq LIMIT ?4",
            )?;
            let rows =
                stmt.query_map(params![entity_kind, entity_id, after as i64, limit], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, Option<Vec<u8>>>(4)?,
                    ))
                })?;
            let mut out = Vec::new();
            for row in rows {
                let (seq, kind, body, ts, data) = row?;
                out.push(EventRecord {
                    seq: seq as u64,
                    entity_kind: entity_kind.to_owned(),
                    entity_id: entity_id.clone(),
                    kind,
                    body: serde_json::from_str(&body)?,
                    ts: Timestamp::from_millis(ts as u64),
                    data,
                });
            }
            Ok(out)
        })
        .await
    }
}
