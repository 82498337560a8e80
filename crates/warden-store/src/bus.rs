//! The scratchpad bus's storage: agents, messages under leases, and their
//! transitions, each in one transaction. The rules (who may post, payload
//! limits) live in `warden-bus`; here is what the store guarantees: a
//! message has at most one live lease, an ack or reject counts only with
//! that lease's token before it expires, and nothing past its TTL is
//! delivered.

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::{Value, json};
use warden_core::{CoreError, Timestamp};

use crate::{Store, StoreError};

/// A message on the bus.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BusMessage {
    pub id: String,
    pub from: String,
    pub to: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub capability: String,
    pub payload: Value,
    /// Milliseconds it may wait to be delivered; 0: no limit.
    pub ttl: u64,
    /// `pending`, `delivered`, `completed`, `failed`, or `dead` (too many deliveries).
    pub status: String,
    /// Posted at, ms since the epoch.
    pub ts: u64,
    pub reply_to: Option<String>,
    /// How many times it was delivered.
    pub attempts: u32,
    /// The current lease's token, while delivered.
    pub lease_token: Option<String>,
    /// When it is (again) deliverable: posted at, or its lease's expiry.
    pub visible_at: u64,
    pub result: Option<Value>,
    pub error: Option<String>,
    /// Earlier deliveries whose leases expired.
    pub history: Value,
}

/// What a poster sends.
#[derive(Debug, Clone, PartialEq)]
pub struct NewBusMessage {
    pub from: String,
    pub to: String,
    pub kind: String,
    pub capability: String,
    pub payload: Value,
    pub ttl: u64,
    pub reply_to: Option<String>,
}

/// A registered agent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BusAgent {
    pub name: String,
    pub capabilities: Vec<String>,
    pub registered_at: u64,
    pub last_poll: Option<u64>,
}

/// Messages addressed to one agent, by status.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BusCounts {
    pub agent: String,
    pub registered: bool,
    pub pending: u64,
    pub delivered: u64,
    pub completed: u64,
    pub failed: u64,
    /// Past their TTL, never to be delivered; prune removes them.
    pub expired: u64,
    pub dead: u64,
}

/// A resource lease: one holder at a time, with a fencing token that only
/// grows, so a stale holder's writes can be told apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceLease {
    pub resource: String,
    /// `None` once revoked or expired.
    pub holder: Option<String>,
    pub fencing: u64,
    /// ms since the epoch; `None` when not held.
    pub expires_at: Option<u64>,
}

/// How a poll delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollRules {
    /// A lease lasts this long (ms).
    pub visibility: u64,
    /// Deliveries before a message goes to the dead letters.
    pub max_attempts: u32,
    /// At most this many messages.
    pub limit: u32,
}

const COLUMNS: &str = "id, sender, recipient, type, capability, payload, ttl_ms, status, ts, reply_to, attempts, lease_token, visible_at, result, error, history";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<BusMessage> {
    let json = |s: String| serde_json::from_str(&s).unwrap_or(Value::Null);
    Ok(BusMessage {
        id: r.get(0)?,
        from: r.get(1)?,
        to: r.get(2)?,
        kind: r.get(3)?,
        capability: r.get(4)?,
        payload: json(r.get(5)?),
        ttl: r.get::<_, i64>(6)?.max(0) as u64,
        status: r.get(7)?,
        ts: r.get::<_, i64>(8)?.max(0) as u64,
        reply_to: r.get(9)?,
        attempts: r.get::<_, i64>(10)?.max(0) as u32,
        lease_token: r.get(11)?,
        visible_at: r.get::<_, i64>(12)?.max(0) as u64,
        result: r.get::<_, Option<String>>(13)?.map(json),
        error: r.get(14)?,
        history: json(r.get(15)?),
    })
}

fn now() -> i64 {
    Timestamp::now().as_millis() as i64
}

fn get(c: &Connection, id: &str) -> Result<BusMessage, StoreError> {
    c.prepare_cached(&format!("SELECT {COLUMNS} FROM bus_messages WHERE id = ?1"))?
        .query_row([id], row)
        .optional()?
        .ok_or_else(|| StoreError::NotFound {
            kind: "bus message",
            id: id.to_owned(),
        })
}

fn refuse(field: &str, message: String) -> StoreError {
    CoreError::field(field, message).into()
}

fn agent_exists(c: &Connection, name: &str) -> Result<bool, StoreError> {
    Ok(
        c.prepare_cached("SELECT 1 FROM bus_agents WHERE name = ?1")?
            .query_row([name], |_| Ok(()))
            .optional()?
            .is_some(),
    )
}

/// The one message `id` leased under `token`, live now: what ack and
/// reject may change.
fn leased(c: &Connection, id: &str, token: &str) -> Result<(), StoreError> {
    let m = get(c, id)?;
    if m.status != "delivered" {
        return Err(refuse(
            "msgId",
            format!(
                "message {id} is {}, not delivered; nothing to acknowledge",
                m.status
            ),
        ));
    }
    if m.lease_token.as_deref() != Some(token) {
        return Err(refuse(
            "lease",
            format!("that lease is not message {id}'s current one (it was delivered again since)"),
        ));
    }
    if m.visible_at as i64 <= now() {
        return Err(refuse(
            "lease",
            format!("the lease on message {id} expired; it will be delivered again"),
        ));
    }
    Ok(())
}

fn finish(
    c: &Connection,
    id: &str,
    status: &str,
    result: Option<&Value>,
    error: Option<&str>,
) -> Result<BusMessage, StoreError> {
    c.prepare_cached(
        "UPDATE bus_messages SET status = ?2, result = ?3, error = ?4, lease_token = NULL, done_at = ?5 WHERE id = ?1",
    )?
    .execute(params![
        id,
        status,
        result.map(Value::to_string),
        error,
        now()
    ])?;
    get(c, id)
}

impl Store {
    /// Registers (or re-registers) agent `name`.
    pub async fn bus_register(
        &self,
        name: &str,
        capabilities: Vec<String>,
    ) -> Result<BusAgent, StoreError> {
        let name = name.to_owned();
        self.write(move |c| {
            let caps = serde_json::to_string(&capabilities)?;
            c.prepare_cached(
                "INSERT INTO bus_agents (name, capabilities, registered_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(name) DO UPDATE SET capabilities = excluded.capabilities",
            )?
            .execute(params![name, caps, now()])?;
            agent(c, &name)
        })
        .await
    }

    /// Removes agent `name`; its pending and delivered messages fail with
    /// `reason`. Returns how many.
    pub async fn bus_unregister(&self, name: &str, reason: &str) -> Result<u64, StoreError> {
        let (name, reason) = (name.to_owned(), reason.to_owned());
        self.write(move |c| {
            if c.prepare_cached("DELETE FROM bus_agents WHERE name = ?1")?.execute([&name])? == 0 {
                return Err(StoreError::NotFound {
                    kind: "bus agent",
                    id: name.clone(),
                });
            }
            let failed = c
                .prepare_cached(
                    "UPDATE bus_messages SET status = 'failed', error = ?2, lease_token = NULL, done_at = ?3
                     WHERE recipient = ?1 AND status IN ('pending', 'delivered')",
                )?
                .execute(params![name, reason, now()])?;
            // What it held is free again (the fencing token stays).
            c.prepare_cached("UPDATE bus_leases SET holder = NULL, expires_at = NULL WHERE holder = ?1")?
                .execute([&name])?;
            Ok(failed as u64)
        })
        .await
    }

    /// The registered agents.
    pub async fn bus_agents(&self) -> Result<Vec<BusAgent>, StoreError> {
        self.read(|c| {
            let names: Vec<String> = c
                .prepare_cached("SELECT name FROM bus_agents ORDER BY name")?
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            names.iter().map(|n| agent(c, n)).collect()
        })
        .await
    }

    /// Posts a message to a registered agent.
    pub async fn bus_post(&self, m: NewBusMessage) -> Result<BusMessage, StoreError> {
        self.write(move |c| {
            if !agent_exists(c, &m.to)? {
                return Err(StoreError::NotFound {
                    kind: "bus agent",
                    id: m.to.clone(),
                });
            }
            let id = format!("msg_{}", uuid::Uuid::now_v7().simple());
            let ts = now();
            c.prepare_cached(
                "INSERT INTO bus_messages (id, sender, recipient, type, capability, payload, ttl_ms, status, ts, reply_to, visible_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', ?8, ?9, ?8)",
            )?
            .execute(params![
                id,
                m.from,
                m.to,
                m.kind,
                m.capability,
                m.payload.to_string(),
                m.ttl as i64,
                ts,
                m.reply_to
            ])?;
            get(c, &id)
        })
        .await
    }

    /// Delivers `agent`'s deliverable messages (pending, or delivered under
    /// a lease that expired) under fresh leases, oldest first; a message
    /// past its TTL is never delivered, and one delivered `max_attempts`
    /// times goes to the dead letters instead.
    pub async fn bus_poll(
        &self,
        agent_name: &str,
        rules: PollRules,
    ) -> Result<Vec<BusMessage>, StoreError> {
        let agent_name = agent_name.to_owned();
        self.write(move |c| {
            let t = now();
            if !agent_exists(c, &agent_name)? {
                return Err(StoreError::NotFound {
                    kind: "bus agent",
                    id: agent_name.clone(),
                });
            }
            // Seconds are enough for `last_poll`: a busy agent's polls do
            // not each rewrite its row.
            c.prepare_cached(
                "UPDATE bus_agents SET last_poll = ?2 WHERE name = ?1 AND COALESCE(last_poll, 0) <= ?2 - 1000",
            )?
            .execute(params![agent_name, t])?;
            let ready: Vec<BusMessage> = c
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM bus_messages
                     WHERE recipient = ?1 AND status IN ('pending', 'delivered') AND visible_at <= ?2
                       AND (ttl_ms = 0 OR ts + ttl_ms > ?2)
                     ORDER BY seq LIMIT ?3"
                ))?
                .query_map(params![agent_name, t, rules.limit], row)?
                .collect::<Result<_, _>>()?;
            let mut out = Vec::with_capacity(ready.len());
            for m in ready {
                let mut history = m.history.as_array().cloned().unwrap_or_default();
                if m.status == "delivered" {
                    history.push(json!({ "attempt": m.attempts, "lease_expired_at": m.visible_at }));
                }
                if m.attempts >= rules.max_attempts {
                    c.prepare_cached(
                        "UPDATE bus_messages SET status = 'dead', lease_token = NULL, history = ?2, done_at = ?3,
                         error = ?4 WHERE id = ?1",
                    )?
                    .execute(params![
                        m.id,
                        Value::Array(history).to_string(),
                        t,
                        format!("not acknowledged after {} deliveries", m.attempts)
                    ])?;
                    continue;
                }
                let token = uuid::Uuid::now_v7().simple().to_string();
                c.prepare_cached(
                    "UPDATE bus_messages SET status = 'delivered', attempts = attempts + 1, lease_token = ?2,
                     visible_at = ?3, history = ?4 WHERE id = ?1",
                )?
                .execute(params![
                    m.id,
                    token,
                    t + rules.visibility as i64,
                    Value::Array(history).to_string()
                ])?;
                out.push(get(c, &m.id)?);
            }
            Ok(out)
        })
        .await
    }

    /// Completes message `id` with `result`, if `token` is its live lease.
    pub async fn bus_ack(
        &self,
        id: &str,
        token: &str,
        result: Value,
    ) -> Result<BusMessage, StoreError> {
        let (id, token) = (id.to_owned(), token.to_owned());
        self.write(move |c| {
            leased(c, &id, &token)?;
            finish(c, &id, "completed", Some(&result), None)
        })
        .await
    }

    /// Fails message `id` with `error`, if `token` is its live lease.
    pub async fn bus_reject(
        &self,
        id: &str,
        token: &str,
        error: &str,
    ) -> Result<BusMessage, StoreError> {
        let (id, token, error) = (id.to_owned(), token.to_owned(), error.to_owned());
        self.write(move |c| {
            leased(c, &id, &token)?;
            finish(c, &id, "failed", None, Some(&error))
        })
        .await
    }

    /// Whether a poll by `agent` would deliver something now (a read: a
    /// long poll checks this before it takes the write lock).
    pub async fn bus_deliverable(&self, agent: &str) -> Result<bool, StoreError> {
        let agent = agent.to_owned();
        self.read(move |c| {
            Ok(c.prepare_cached(
                "SELECT 1 FROM bus_messages
                 WHERE recipient = ?1 AND status IN ('pending', 'delivered') AND visible_at <= ?2
                   AND (ttl_ms = 0 OR ts + ttl_ms > ?2)
                 LIMIT 1",
            )?
            .query_row(params![agent, now()], |_| Ok(()))
            .optional()?
            .is_some())
        })
        .await
    }

    /// When `agent`'s earliest lease expires (ms since the epoch), if any:
    /// a long poll waits no longer than that.
    pub async fn bus_next_expiry(&self, agent: &str) -> Result<Option<u64>, StoreError> {
        let agent = agent.to_owned();
        self.read(move |c| {
            let v: Option<i64> = c
                .prepare_cached(
                    "SELECT MIN(visible_at) FROM bus_messages
                     WHERE recipient = ?1 AND status IN ('pending', 'delivered')
                       AND status = 'delivered' AND visible_at > ?2",
                )?
                .query_row(params![agent, now()], |r| r.get(0))?;
            Ok(v.map(|v| v.max(0) as u64))
        })
        .await
    }

    /// Gives `resource` to `holder` for `ttl` ms with the next fencing
    /// token, and tells the holder (a `lease` message) in the same
    /// transaction. Refused while someone holds it.
    pub async fn bus_lease_create(
        &self,
        resource: &str,
        holder: &str,
        ttl: u64,
    ) -> Result<ResourceLease, StoreError> {
        let (resource, holder) = (resource.to_owned(), holder.to_owned());
        self.write(move |c| {
            let t = now();
            if !agent_exists(c, &holder)? {
                return Err(StoreError::NotFound { kind: "bus agent", id: holder.clone() });
            }
            let current = lease(c, &resource)?;
            if let Some(l) = &current
                && let (Some(h), Some(until)) = (&l.holder, l.expires_at)
            {
                return Err(refuse(
                    "resource",
                    format!("{resource} is held by {h} (fencing {}) until {until}; revoke it first", l.fencing),
                ));
            }
            let fencing = current.map_or(1, |l| l.fencing + 1);
            let expires = t + ttl as i64;
            c.prepare_cached(
                "INSERT INTO bus_leases (resource, holder, fencing, expires_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(resource) DO UPDATE SET holder = ?2, fencing = ?3, expires_at = ?4",
            )?
            .execute(params![resource, holder, fencing as i64, expires])?;
            let payload = json!({ "resource": resource, "fencing": fencing, "expires_at": expires });
            notify(c, &holder, "lease.create", &payload)?;
            lease(c, &resource)?.ok_or_else(|| StoreError::NotFound { kind: "bus lease", id: resource.clone() })
        })
        .await
    }

    /// Takes `resource` back from its holder, telling them (a `lease`
    /// message). Refused when nobody holds it.
    pub async fn bus_lease_revoke(&self, resource: &str) -> Result<ResourceLease, StoreError> {
        let resource = resource.to_owned();
        self.write(move |c| {
            let t = now();
            let Some(l) = lease(c, &resource)? else {
                return Err(StoreError::NotFound {
                    kind: "bus lease",
                    id: resource.clone(),
                });
            };
            let Some(holder) = l
                .holder
                .clone()
                .filter(|_| l.expires_at.is_some_and(|e| e as i64 > t))
            else {
                return Err(refuse("resource", format!("nobody holds {resource} now")));
            };
            c.prepare_cached(
                "UPDATE bus_leases SET holder = NULL, expires_at = NULL WHERE resource = ?1",
            )?
            .execute([&resource])?;
            if agent_exists(c, &holder)? {
                let payload = json!({ "resource": resource, "fencing": l.fencing });
                notify(c, &holder, "lease.revoke", &payload)?;
            }
            Ok(ResourceLease {
                holder: None,
                expires_at: None,
                ..l
            })
        })
        .await
    }

    /// Every resource lease, held or not.
    pub async fn bus_leases(&self) -> Result<Vec<ResourceLease>, StoreError> {
        self.read(|c| {
            let names: Vec<String> = c
                .prepare_cached("SELECT resource FROM bus_leases ORDER BY resource")?
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            let mut out = Vec::with_capacity(names.len());
            for n in &names {
                out.extend(lease(c, n)?);
            }
            Ok(out)
        })
        .await
    }

    /// Everything on the bus: agents and messages in order.
    pub async fn bus_export(&self) -> Result<(Vec<BusAgent>, Vec<BusMessage>), StoreError> {
        self.read(|c| {
            // One snapshot for both.
            let tx = c.unchecked_transaction()?;
            let c: &Connection = &tx;
            let names: Vec<String> = c
                .prepare_cached("SELECT name FROM bus_agents ORDER BY name")?
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            let agents = names
                .iter()
                .map(|n| agent(c, n))
                .collect::<Result<_, _>>()?;
            let messages = c
                .prepare_cached(&format!("SELECT {COLUMNS} FROM bus_messages ORDER BY seq"))?
                .query_map([], row)?
                .collect::<Result<_, _>>()?;
            Ok((agents, messages))
        })
        .await
    }

    /// Adds agents and messages from another scratchpad in one transaction:
    /// agents not here yet are registered (capabilities and last poll as
    /// given; agents already here stay as they are), messages
    /// keep their ids, statuses and times; a message whose id is already
    /// here is skipped. Returns (agents, imported, skipped).
    pub async fn bus_import(
        &self,
        agents: Vec<BusAgent>,
        messages: Vec<BusMessage>,
    ) -> Result<(u64, u64, u64), StoreError> {
        self.write(move |c| {
            let t = now();
            let mut names: std::collections::BTreeSet<String> =
                agents.iter().map(|a| a.name.clone()).collect();
            names.extend(messages.iter().map(|m| m.to.clone()));
            for name in &names {
                let a = agents.iter().find(|a| &a.name == name);
                c.prepare_cached(
                    "INSERT INTO bus_agents (name, capabilities, registered_at, last_poll) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT(name) DO NOTHING",
                )?
                .execute(params![
                    name,
                    serde_json::to_string(&a.map(|a| a.capabilities.clone()).unwrap_or_default())?,
                    t,
                    a.and_then(|a| a.last_poll).map(|v| v as i64)
                ])?;
            }
            let (mut imported, mut skipped) = (0, 0);
            for m in &messages {
                let done = matches!(m.status.as_str(), "completed" | "failed" | "dead").then_some(t);
                let n = c
                    .prepare_cached(
                        "INSERT INTO bus_messages (id, sender, recipient, type, capability, payload, ttl_ms, status, ts,
                         reply_to, attempts, visible_at, result, error, history, done_at)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?9, ?12, ?13, ?14, ?15)
                         ON CONFLICT(id) DO NOTHING",
                    )?
                    .execute(params![
                        m.id,
                        m.from,
                        m.to,
                        m.kind,
                        m.capability,
                        m.payload.to_string(),
                        m.ttl as i64,
                        m.status,
                        m.ts as i64,
                        m.reply_to,
                        m.attempts,
                        m.result.as_ref().map(Value::to_string),
                        m.error,
                        m.history.to_string(),
                        done
                    ])?;
                if n == 0 {
                    skipped += 1;
                } else {
                    imported += 1;
                }
            }
            Ok((names.len() as u64, imported, skipped))
        })
        .await
    }

    /// One message.
    pub async fn bus_message(&self, id: &str) -> Result<BusMessage, StoreError> {
        let id = id.to_owned();
        self.read(move |c| get(c, &id)).await
    }

    /// Counts per agent: every registered agent, and every recipient with messages.
    pub async fn bus_status(&self) -> Result<Vec<BusCounts>, StoreError> {
        self.read(|c| {
            let mut out: std::collections::BTreeMap<String, BusCounts> =
                std::collections::BTreeMap::new();
            let names: Vec<String> = c
                .prepare_cached("SELECT name FROM bus_agents")?
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            for n in names {
                out.insert(
                    n.clone(),
                    BusCounts {
                        agent: n,
                        registered: true,
                        ..BusCounts::default()
                    },
                );
            }
            // A message past its TTL that nobody holds a live lease on is
            // counted as expired, whatever it was.
            let mut stmt = c.prepare_cached(
                "SELECT recipient,
                        CASE WHEN status IN ('pending', 'delivered') AND ttl_ms > 0 AND ts + ttl_ms <= ?1
                                  AND NOT (status = 'delivered' AND visible_at > ?1)
                             THEN 'expired' ELSE status END AS s,
                        COUNT(*)
                 FROM bus_messages GROUP BY recipient, s",
            )?;
            let rows = stmt.query_map([now()], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })?;
            for r in rows {
                let (agent, status, n) = r?;
                let e = out.entry(agent.clone()).or_insert_with(|| BusCounts {
                    agent,
                    ..BusCounts::default()
                });
                let n = n.max(0) as u64;
                match status.as_str() {
                    "pending" => e.pending += n,
                    "delivered" => e.delivered += n,
                    "completed" => e.completed += n,
                    "failed" => e.failed += n,
                    "expired" => e.expired += n,
                    _ => e.dead += n,
                }
            }
            Ok(out.into_values().collect())
        })
        .await
    }

    /// Removes messages past their TTL that were never finished, finished
    /// ones (completed or failed) older than `done_age` ms, and orphaned
    /// agents: idle (no poll, nor registration) for `agent_idle` ms with
    /// nothing unfinished addressed to them (`user` stays). Returns
    /// (expired, finished, agents) counts.
    pub async fn bus_prune(
        &self,
        done_age: u64,
        agent_idle: u64,
    ) -> Result<(u64, u64, u64), StoreError> {
        self.write(move |c| {
            let t = now();
            let expired = c
                .prepare_cached(
                    "DELETE FROM bus_messages WHERE status IN ('pending', 'delivered')
                     AND ttl_ms > 0 AND ts + ttl_ms <= ?1
                     AND NOT (status = 'delivered' AND visible_at > ?1)",
                )?
                .execute([t])?;
            let done = c
                .prepare_cached(
                    "DELETE FROM bus_messages WHERE status IN ('completed', 'failed') AND done_at <= ?1",
                )?
                .execute([t - done_age as i64])?;
            let agents = c
                .prepare_cached(
                    "DELETE FROM bus_agents WHERE name != 'user'
                     AND COALESCE(last_poll, registered_at) <= ?1
                     AND NOT EXISTS (SELECT 1 FROM bus_messages m WHERE m.recipient = bus_agents.name
                                     AND m.status IN ('pending', 'delivered'))",
                )?
                .execute([t - agent_idle as i64])?;
            c.prepare_cached(
                "UPDATE bus_leases SET holder = NULL, expires_at = NULL
                 WHERE holder IS NOT NULL AND holder NOT IN (SELECT name FROM bus_agents)",
            )?
            .execute([])?;
            Ok((expired as u64, done as u64, agents as u64))
        })
        .await
    }
}

fn agent(c: &Connection, name: &str) -> Result<BusAgent, StoreError> {
    c.prepare_cached(
        "SELECT name, capabilities, registered_at, last_poll FROM bus_agents WHERE name = ?1",
    )?
    .query_row([name], |r| {
        Ok(BusAgent {
            name: r.get(0)?,
            capabilities: serde_json::from_str(&r.get::<_, String>(1)?).unwrap_or_default(),
            registered_at: r.get::<_, i64>(2)?.max(0) as u64,
            last_poll: r.get::<_, Option<i64>>(3)?.map(|v| v.max(0) as u64),
        })
    })
    .optional()?
    .ok_or_else(|| StoreError::NotFound {
        kind: "bus agent",
        id: name.to_owned(),
    })
}

/// A resource's lease as it stands now: one that ran out is reported free.
fn lease(c: &Connection, resource: &str) -> Result<Option<ResourceLease>, StoreError> {
    let t = now();
    Ok(c.prepare_cached(
        "SELECT resource, holder, fencing, expires_at FROM bus_leases WHERE resource = ?1",
    )?
    .query_row([resource], |r| {
        let expires_at = r.get::<_, Option<i64>>(3)?.filter(|e| *e > t);
        Ok(ResourceLease {
            resource: r.get(0)?,
            holder: r
                .get::<_, Option<String>>(1)?
                .filter(|_| expires_at.is_some()),
            fencing: r.get::<_, i64>(2)?.max(0) as u64,
            expires_at: expires_at.map(|v| v.max(0) as u64),
        })
    })
    .optional()?)
}

/// Posts a `lease` message from `warden` to `to`, as the seed's lease system does.
fn notify(c: &Connection, to: &str, capability: &str, payload: &Value) -> Result<(), StoreError> {
    let t = now();
    c.prepare_cached(
        "INSERT INTO bus_messages (id, sender, recipient, type, capability, payload, ttl_ms, status, ts, visible_at)
         VALUES (?1, 'warden', ?2, 'lease', ?3, ?4, 0, 'pending', ?5, ?5)",
    )?
    .execute(params![
        format!("msg_{}", uuid::Uuid::now_v7().simple()),
        to,
        capability,
        payload.to_string(),
        t
    ])?;
    Ok(())
}
