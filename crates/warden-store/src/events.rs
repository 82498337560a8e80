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

thread_local! {
    /// The entities whose events this thread appended since the last
    /// [`take_touched`]; only the writer thread appends.
    static TOUCHED: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn entity_key(kind: &str, id: &str) -> String {
    format!("{kind}/{id}")
}

/// The entities touched since the last call, for the commit's change feed.
pub(crate) fn take_touched() -> Vec<String> {
    TOUCHED.with(|t| std::mem::take(&mut *t.borrow_mut()))
}

/// What one commit changed: the entities whose events it appended.
#[derive(Debug)]
pub struct Committed {
    entities: Vec<String>,
}

impl Committed {
    pub(crate) fn new(mut entities: Vec<String>) -> Self {
        entities.sort_unstable();
        entities.dedup();
        Self { entities }
    }

    /// Whether the commit appended events of entity `kind`/`id`.
    pub fn touches(&self, kind: &str, id: &str) -> bool {
        self.entities.binary_search(&entity_key(kind, id)).is_ok()
    }
}

/// Commits that touch one entity, for a stream that follows it: each
/// commit is checked in memory, so a stream reads the log only when its
/// own entity has something new.
pub struct EntityChanges {
    rx: tokio::sync::broadcast::Receiver<std::sync::Arc<Committed>>,
    key: String,
}

impl EntityChanges {
    pub(crate) fn new(
        rx: tokio::sync::broadcast::Receiver<std::sync::Arc<Committed>>,
        kind: &str,
        id: &str,
    ) -> Self {
        Self {
            rx,
            key: entity_key(kind, id),
        }
    }

    /// Waits for a commit that appended events of the entity (or one that
    /// may have: when this follower fell behind the feed). `false` only if
    /// the feed is gone (the store keeps it while it is open, so followers
    /// also watch for shutdown themselves).
    pub async fn changed(&mut self) -> bool {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            match self.rx.recv().await {
                Ok(c) if c.entities.binary_search(&self.key).is_ok() => return true,
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => return true,
                Err(RecvError::Closed) => return false,
            }
        }
    }
}

/// Appends an event inside the caller's transaction and returns its seq.
pub(crate) fn append(
    conn: &Connection,
    entity_kind: &str,
    entity_id: &str,
    kind: &str,
    body: &serde_json::Value,
) -> Result<u64, StoreError> {
    TOUCHED.with(|t| t.borrow_mut().push(entity_key(entity_kind, entity_id)));
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
