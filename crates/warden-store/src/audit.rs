//! The audit log: who asked for what, append-only, each entry hashing the
//! one before it (SHA-256) so an edit or a deletion anywhere breaks the chain.

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use sha2::{Digest, Sha256};
use warden_core::Timestamp;

use crate::{Store, StoreError};

/// The `prev_hash` of the first entry.
const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// One audit entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditEntry {
    /// 1, 2, 3, … without gaps.
    pub seq: u64,
    /// When it was recorded.
    pub ts: Timestamp,
    /// Who asked (`operator`, `cli`, `system`, …).
    pub actor: String,
    /// What was asked (`run.create`, `run.cancel`, …).
    pub action: String,
    /// What it was about (usually an id).
    pub subject: String,
    /// Details as JSON.
    pub detail: serde_json::Value,
    /// The previous entry's hash.
    pub prev_hash: String,
    /// SHA-256 over this entry's fields and `prev_hash`.
    pub hash: String,
}

fn digest(
    seq: u64,
    ts: u64,
    actor: &str,
    action: &str,
    subject: &str,
    detail: &str,
    prev: &str,
) -> String {
    let mut h = Sha256::new();
    for part in [
        &seq.to_string(),
        &ts.to_string(),
        actor,
        action,
        subject,
        detail,
        prev,
    ] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    hex::encode(h.finalize())
}

/// Appends an entry inside the caller's transaction.
pub(crate) fn append(
    conn: &Connection,
    actor: &str,
    action: &str,
    subject: &str,
    detail: &serde_json::Value,
) -> Result<u64, StoreError> {
    let last: Option<(i64, String)> = conn
        .query_row(
            "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let (seq, prev) = match last {
        Some((s, h)) => (s as u64 + 1, h),
        None => (1, GENESIS.to_owned()),
    };
    let ts = Timestamp::now().as_millis();
    let detail = detail.to_string();
    let hash = digest(seq, ts, actor, action, subject, &detail, &prev);
    conn.prepare_cached(
        "INSERT INTO audit (seq, ts, actor, action, subject, detail, prev_hash, hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        seq as i64, ts as i64, actor, action, subject, detail, prev, hash
    ])?;
    Ok(seq)
}

impl Store {
    /// Records an audit entry on its own, durably.
    pub async fn audit(
        &self,
        actor: &str,
        action: &str,
        subject: &str,
        detail: serde_json::Value,
    ) -> Result<u64, StoreError> {
        let (actor, action, subject) = (actor.to_owned(), action.to_owned(), subject.to_owned());
        self.write(move |c| append(c, &actor, &action, &subject, &detail))
            .await
    }

    /// Audit entries with `seq > after`, oldest first.
    pub async fn audit_log(&self, after: u64, limit: u32) -> Result<Vec<AuditEntry>, StoreError> {
        self.read(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT seq, ts, actor, action, subject, detail, prev_hash, hash
                 FROM audit WHERE seq > ?1 ORDER BY seq LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![after as i64, limit], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, String>(7)?,
                ))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (seq, ts, actor, action, subject, detail, prev_hash, hash) = row?;
                out.push(AuditEntry {
                    seq: seq as u64,
                    ts: Timestamp::from_millis(ts as u64),
                    actor,
                    action,
                    subject,
                    detail: serde_json::from_str(&detail)?,
                    prev_hash,
                    hash,
                });
            }
            Ok(out)
        })
        .await
    }

    /// Recomputes the whole chain; returns how many entries verified.
    pub async fn verify_audit(&self) -> Result<u64, StoreError> {
        self.read(|c| {
            let mut stmt = c.prepare("SELECT seq, ts, actor, action, subject, detail, prev_hash, hash FROM audit ORDER BY seq")?;
            let mut rows = stmt.query([])?;
            let mut prev = GENESIS.to_owned();
            let mut expect = 1u64;
            while let Some(r) = rows.next()? {
                let seq = r.get::<_, i64>(0)? as u64;
                let stored_prev: String = r.get(6)?;
                let hash: String = r.get(7)?;
                let want = digest(
                    seq,
                    r.get::<_, i64>(1)? as u64,
                    &r.get::<_, String>(2)?,
                    &r.get::<_, String>(3)?,
                    &r.get::<_, String>(4)?,
                    &r.get::<_, String>(5)?,
                    &prev,
                );
                if seq != expect || stored_prev != prev || hash != want {
                    return Err(StoreError::AuditChainBroken { seq });
                }
                prev = hash;
                expect += 1;
            }
            Ok(expect - 1)
        })
        .await
    }
}
