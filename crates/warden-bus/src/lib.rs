//! The scratchpad bus: the seed's agent mailboxes (post, poll, ack, reject,
//! status, prune, register, unregister) on the warden store instead of one
//! JSON file rewritten whole. Every acknowledged operation is durable; a
//! poll leases what it delivers, and only the lease's holder may finish a
//! message before the lease expires.
#![forbid(unsafe_code)]

mod scratchpad;
mod wait;

use std::time::Duration;

pub use scratchpad::{Scratchpad, SeedAgent, SeedMessage};
pub use wait::StoreChanges;

use serde_json::Value;
use warden_store::{
    BusAgent, BusCounts, BusMessage, NewBusMessage, PollRules, ResourceLease, Store, StoreError,
};

/// After a wake-up, how long to wait before each further look at a commit
/// that may not have become visible yet.
const RECHECKS: [Duration; 4] = [
    Duration::from_millis(5),
    Duration::from_millis(20),
    Duration::from_millis(80),
    Duration::from_millis(320),
];

/// The longest resource lease: a year.
pub const MAX_LEASE: Duration = Duration::from_secs(365 * 86400);

/// The bus's limits and timings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BusConfig {
    /// How long a poll's lease lasts.
    pub visibility: Duration,
    /// Deliveries before a message goes to the dead letters.
    pub max_attempts: u32,
    /// The largest payload, in bytes of JSON.
    pub max_payload: usize,
    /// Finished messages older than this are pruned.
    pub keep_done: Duration,
    /// A message's TTL when the poster names none (the seed's 300 s).
    pub default_ttl: Duration,
    /// Agents idle this long with nothing unfinished are collected by prune.
    pub agent_idle: Duration,
}

impl Default for BusConfig {
    fn default() -> Self {
        Self {
            visibility: Duration::from_secs(30),
            max_attempts: 5,
            max_payload: 256 * 1024,
            keep_done: Duration::from_secs(3600),
            default_ttl: Duration::from_secs(300),
            agent_idle: Duration::from_secs(7 * 86400),
        }
    }
}

/// Why a bus operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    /// The request is wrong; nothing changed.
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    /// No such agent.
    #[error(
        "no agent named {0:?} is registered (register it with `warden bus register {0} <capabilities>`)"
    )]
    UnknownAgent(String),
    /// No such message.
    #[error("no message {0:?} on the bus")]
    UnknownMessage(String),
    /// The lease check failed: not delivered, another lease, or expired.
    #[error("{0}")]
    NotLeased(String),
    /// The store failed; the operation may not have happened.
    #[error("the bus store failed: {0}")]
    Store(StoreError),
}

impl From<StoreError> for BusError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound {
                kind: "bus agent",
                id,
            } => Self::UnknownAgent(id),
            StoreError::NotFound {
                kind: "bus message",
                id,
            } => Self::UnknownMessage(id),
            StoreError::NotFound {
                kind: "bus lease",
                id,
            } => Self::Invalid {
                field: "resource",
                message: format!("no lease on {id}"),
            },
            StoreError::Rejected(c) => Self::NotLeased(c.to_string()),
            other => Self::Store(other),
        }
    }
}

fn invalid(field: &'static str, message: impl Into<String>) -> BusError {
    BusError::Invalid {
        field,
        message: message.into(),
    }
}

/// A name for an agent, a type or a capability: printable, no spaces.
fn check_name(field: &'static str, v: &str) -> Result<(), BusError> {
    if v.is_empty() || v.len() > 128 || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(invalid(
            field,
            format!("{v:?} must be 1 to 128 printable characters without spaces"),
        ));
    }
    Ok(())
}

/// A message to post.
#[derive(Debug, Clone, Copy)]
pub struct Post<'a> {
    pub from: &'a str,
    pub to: &'a str,
    pub kind: &'a str,
    pub capability: &'a str,
    /// JSON text.
    pub payload: &'a str,
    /// Milliseconds; `None`: the default; 0: no limit.
    pub ttl: Option<i64>,
    pub reply_to: Option<&'a str>,
}

/// The bus over a store.
#[derive(Debug, Clone)]
pub struct Bus {
    store: Store,
    config: BusConfig,
    /// One watch on the store's files for every waiting poll.
    changes: std::sync::Arc<StoreChanges>,
}

impl Bus {
    pub fn new(store: Store, config: BusConfig) -> Self {
        Self {
            store,
            config,
            changes: std::sync::Arc::default(),
        }
    }

    pub fn config(&self) -> &BusConfig {
        &self.config
    }

    /// `register <name> <capabilities>` (comma- or space-separated).
    pub async fn register(
        &self,
        name: &str,
        capabilities: &[String],
    ) -> Result<BusAgent, BusError> {
        check_name("name", name)?;
        let caps: Vec<String> = capabilities
            .iter()
            .flat_map(|c| c.split(','))
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
            .collect();
        for c in &caps {
            check_name("capabilities", c)?;
        }
        Ok(self.store.bus_register(name, caps).await?)
    }

    /// `unregister <id>`: its unfinished messages fail, saying why.
    pub async fn unregister(&self, name: &str) -> Result<u64, BusError> {
        Ok(self
            .store
            .bus_unregister(name, &format!("agent {name} was unregistered"))
            .await?)
    }

    /// `post <to> <type> <capability> <payload…>`: the payload is JSON.
    pub async fn post(&self, p: &Post<'_>) -> Result<BusMessage, BusError> {
        let Post {
            from,
            to,
            kind,
            capability,
            payload,
            ttl,
            reply_to,
        } = *p;
        check_name("from", from)?;
        check_name("to", to)?;
        check_name("type", kind)?;
        check_name("capability", capability)?;
        if payload.len() > self.config.max_payload {
            return Err(invalid(
                "payload",
                format!(
                    "{} bytes is over the {}-byte cap",
                    payload.len(),
                    self.config.max_payload
                ),
            ));
        }
        let payload: Value = serde_json::from_str(payload)
            .map_err(|e| invalid("payload", format!("not valid JSON: {e}")))?;
        let ttl = match ttl {
            None => self.config.default_ttl.as_millis() as u64,
            Some(t) if t < 0 => return Err(invalid("ttl", format!("{t} is negative"))),
            Some(t) => t as u64,
        };
        Ok(self
            .store
            .bus_post(NewBusMessage {
                from: from.to_owned(),
                to: to.to_owned(),
                kind: kind.to_owned(),
                capability: capability.to_owned(),
                payload,
                ttl,
                reply_to: reply_to.map(str::to_owned),
            })
            .await?)
    }

    /// `poll [agentId]`: delivers under leases.
    pub async fn poll(&self, agent: &str, limit: u32) -> Result<Vec<BusMessage>, BusError> {
        Ok(self
            .store
            .bus_poll(
                agent,
                PollRules {
                    visibility: self.config.visibility.as_millis() as u64,
                    max_attempts: self.config.max_attempts,
                    limit: limit.clamp(1, 1000),
                },
            )
            .await?)
    }

    /// `poll --wait`: as [`Bus::poll`], but when nothing is deliverable,
    /// waits (sleeping, woken by writes to the store from any process, or
    /// by the agent's earliest lease running out) until something is or
    /// `wait` has passed.
    pub async fn poll_wait(
        &self,
        agent: &str,
        limit: u32,
        wait: Duration,
    ) -> Result<Vec<BusMessage>, BusError> {
        let deadline = tokio::time::Instant::now() + wait;
        // Watching starts before the first look, so nothing falls between.
        let subscribe = || {
            self.changes.subscribe(self.store.path()).map_err(|e| {
                BusError::Store(StoreError::Open {
                    path: self.store.path().display().to_string(),
                    why: format!(
                        "cannot watch the store for changes: {e} (fs.inotify.max_user_instances reached? each bus that waits takes one)"
                    ),
                })
            })
        };
        let mut watch = subscribe()?;
        let mut first = true;
        // A wake-up can come from the first WAL frames of a commit that is
        // not visible yet (the wal-index is updated through shared memory,
        // which inotify does not see): after one, look again a few times,
        // ever later, until the next event.
        let mut recheck = RECHECKS.iter();
        loop {
            // A read says whether there is anything before a poll takes the
            // write lock (most wake-ups are other writes).
            if first || self.store.bus_deliverable(agent).await? {
                let got = self.poll(agent, limit).await?;
                if !got.is_empty() {
                    return Ok(got);
                }
            }
            first = false;
            if tokio::time::Instant::now() >= deadline {
                return Ok(vec![]);
            }
            let mut until = deadline;
            if let Some(d) = recheck.next() {
                until = until.min(tokio::time::Instant::now() + *d);
            }
            if let Some(expiry) = self.store.bus_next_expiry(agent).await? {
                let now = warden_core::Timestamp::now().as_millis();
                let at = tokio::time::Instant::now()
                    + Duration::from_millis(expiry.saturating_sub(now) + 1);
                until = until.min(at);
            }
            let _asleep = self.changes.asleep();
            tokio::select! {
                woke = watch.changed() => {
                    if woke.is_err() {
                        // The watch ended (its directory went, or its
                        // runtime): a new one, and a look for what it missed.
                        watch = subscribe()?;
                        first = true;
                    }
                    recheck = RECHECKS.iter();
                }
                () = tokio::time::sleep_until(until) => {}
            }
        }
    }

    /// How many polls are asleep waiting for a change now.
    pub fn waiting(&self) -> usize {
        self.changes.waiting()
    }

    /// `ack <msgId> <result…>` with the lease the poll gave. The result is
    /// JSON if it parses, else a string.
    pub async fn ack(&self, id: &str, lease: &str, result: &str) -> Result<BusMessage, BusError> {
        let result =
            serde_json::from_str(result).unwrap_or_else(|_| Value::String(result.to_owned()));
        Ok(self.store.bus_ack(id, lease, result).await?)
    }

    /// `reject <msgId> <error…>` with the lease the poll gave.
    pub async fn reject(&self, id: &str, lease: &str, error: &str) -> Result<BusMessage, BusError> {
        Ok(self.store.bus_reject(id, lease, error).await?)
    }

    /// `status`: counts per agent.
    pub async fn status(&self) -> Result<Vec<BusCounts>, BusError> {
        Ok(self.store.bus_status().await?)
    }

    /// `prune`: (expired messages, finished messages, orphaned agents) removed.
    pub async fn prune(&self) -> Result<(u64, u64, u64), BusError> {
        Ok(self
            .store
            .bus_prune(
                self.config.keep_done.as_millis() as u64,
                self.config.agent_idle.as_millis() as u64,
            )
            .await?)
    }

    /// `import <scratchpad.json>`: (agents, imported, skipped as already here).
    pub async fn import(&self, text: &str) -> Result<(u64, u64, u64), BusError> {
        let (agents, messages) = Scratchpad::parse(text)?.into_store();
        Ok(self.store.bus_import(agents, messages).await?)
    }

    /// `export`: the seed's file for everything on the bus.
    pub async fn export(&self) -> Result<Scratchpad, BusError> {
        let (agents, messages) = self.store.bus_export().await?;
        Ok(Scratchpad::from_store(agents, messages))
    }

    /// `lease create <resource> --holder <agent> --ttl S`.
    pub async fn lease_create(
        &self,
        resource: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<ResourceLease, BusError> {
        check_name("resource", resource)?;
        if ttl.is_zero() || ttl > MAX_LEASE {
            return Err(invalid(
                "ttl",
                format!(
                    "a lease lasts more than 0 and at most {} s",
                    MAX_LEASE.as_secs()
                ),
            ));
        }
        Ok(self
            .store
            .bus_lease_create(resource, holder, ttl.as_millis() as u64)
            .await?)
    }

    /// `lease revoke <resource>`.
    pub async fn lease_revoke(&self, resource: &str) -> Result<ResourceLease, BusError> {
        Ok(self.store.bus_lease_revoke(resource).await?)
    }

    /// `lease list`.
    pub async fn leases(&self) -> Result<Vec<ResourceLease>, BusError> {
        Ok(self.store.bus_leases().await?)
    }

    /// One message.
    pub async fn message(&self, id: &str) -> Result<BusMessage, BusError> {
        Ok(self.store.bus_message(id).await?)
    }
}
