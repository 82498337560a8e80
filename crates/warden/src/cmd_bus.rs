//! `warden bus …` (and the seed's names, `a2a-post` and friends, when the
//! binary is run through a link of that name): the scratchpad bus on the
//! store in `WARDEN_HOME`, used directly, so agents on this machine need no
//! server. Human-readable output, or `--json`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::json;
use warden_bus::{Bus, BusError, Post};
use warden_store::{BusMessage, CommitMode, Store};

#[derive(Debug, Args)]
pub struct BusArgs {
    /// Data directory [default: ./.warden].
    #[arg(long, env = "WARDEN_HOME", global = true)]
    pub home: Option<PathBuf>,
    /// Config file (its [bus] section) [default: $WARDEN_HOME/warden.toml, then ./warden.toml].
    #[arg(long, env = "WARDEN_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// The agent this command acts as [default: user].
    #[arg(long = "as", env = "WARDEN_AGENT", global = true, value_name = "AGENT")]
    pub agent: Option<String>,
    /// Print JSON for scripts.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: BusCommand,
}

#[derive(Debug, Subcommand)]
pub enum BusCommand {
    /// Post a message: <to> <type> <capability> <payload…> (the payload is JSON).
    Post {
        to: String,
        #[arg(value_name = "TYPE")]
        kind: String,
        capability: String,
        #[arg(required = true, num_args = 1.., trailing_var_arg = true, allow_hyphen_values = true)]
        payload: Vec<String>,
        /// Milliseconds it may wait to be delivered (0: no limit) [default: 300000].
        #[arg(long, allow_hyphen_values = true)]
        ttl: Option<i64>,
        /// The message this one answers.
        #[arg(long)]
        reply_to: Option<String>,
    },
    /// Take the agent's deliverable messages under leases [default agent: the current one].
    Poll {
        agent: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// When nothing is there, wait up to S seconds for a message (at most 300).
        #[arg(long, value_name = "S")]
        wait: Option<f64>,
    },
    /// Complete a message with a result (JSON, or text).
    Ack {
        msg_id: String,
        #[arg(required = true, num_args = 1.., trailing_var_arg = true, allow_hyphen_values = true)]
        result: Vec<String>,
        /// The lease the poll gave [env: WARDEN_BUS_LEASE].
        #[arg(long, env = "WARDEN_BUS_LEASE")]
        lease: Option<String>,
    },
    /// Fail a message with an error.
    Reject {
        msg_id: String,
        #[arg(required = true, num_args = 1.., trailing_var_arg = true, allow_hyphen_values = true)]
        error: Vec<String>,
        /// The lease the poll gave [env: WARDEN_BUS_LEASE].
        #[arg(long, env = "WARDEN_BUS_LEASE")]
        lease: Option<String>,
    },
    /// Messages per agent, by status.
    Status,
    /// Remove expired messages, finished ones older than bus.keep_done_seconds, idle agents, now.
    Prune,
    /// Register an agent: <name> <capabilities> (comma- or space-separated).
    Register {
        name: String,
        capabilities: Vec<String>,
    },
    /// Remove an agent; its unfinished messages fail.
    Unregister { id: String },
    /// Resource leases: one holder at a time, with a fencing token.
    #[command(subcommand)]
    Lease(LeaseCommand),
    /// Bring in a scratchpad file in the seed's format (messages keep their ids).
    Import { file: PathBuf },
    /// Write everything on the bus in the seed's scratchpad format [default: stdout].
    Export { file: Option<PathBuf> },
}

#[derive(Debug, Subcommand)]
pub enum LeaseCommand {
    /// Give <resource> to an agent for S seconds (refused while held); the holder is told.
    Create {
        resource: String,
        #[arg(long)]
        holder: String,
        #[arg(long, value_name = "S")]
        ttl: f64,
    },
    /// Take <resource> back; the holder is told.
    Revoke { resource: String },
    /// Every lease.
    List,
}

/// The seed's command names, as links to this binary.
pub const LINK_NAMES: [(&str, &str); 8] = [
    ("a2a-post", "post"),
    ("a2a-poll", "poll"),
    ("a2a-ack", "ack"),
    ("a2a-reject", "reject"),
    ("a2a-status", "status"),
    ("a2a-prune", "prune"),
    ("agent-register", "register"),
    ("agent-unregister", "unregister"),
];

/// `a2a-post x …` run through a link becomes `warden bus post x …`.
pub fn rewrite_link(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let name = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("");
    match LINK_NAMES.iter().find(|(link, _)| *link == name) {
        Some((_, sub)) => {
            let mut out = vec!["warden".into(), "bus".into(), (*sub).into()];
            out.extend(args.into_iter().skip(1));
            out
        }
        None => args,
    }
}

fn line(m: &BusMessage) -> String {
    let mut s = format!(
        "{} from {} to {} [{} {}] {}",
        m.id, m.from, m.to, m.kind, m.capability, m.status
    );
    if let Some(l) = &m.lease_token {
        s.push_str(&format!(" lease={l} attempts={}", m.attempts));
    }
    s.push_str(&format!("\n  payload: {}", m.payload));
    if let Some(r) = &m.result {
        s.push_str(&format!("\n  result: {r}"));
    }
    if let Some(e) = &m.error {
        s.push_str(&format!("\n  error: {e}"));
    }
    s
}

fn need_lease(lease: Option<String>) -> Result<String, BusError> {
    lease.ok_or_else(|| BusError::Invalid {
        field: "lease",
        message: "give the lease token the poll printed (--lease TOKEN or WARDEN_BUS_LEASE)".into(),
    })
}

/// Options given after a payload, result or error would be taken as words
/// of it: refuse them, saying where they go.
fn options_first(words: &[String]) -> Result<(), BusError> {
    const FLAGS: [&str; 9] = [
        "--ttl",
        "--reply-to",
        "--lease",
        "--json",
        "--as",
        "--home",
        "--config",
        "--limit",
        "--wait",
    ];
    match words.iter().find(|w| {
        FLAGS
            .iter()
            .any(|f| w.as_str() == *f || w.starts_with(&format!("{f}=")))
    }) {
        Some(w) => Err(BusError::Invalid {
            field: "arguments",
            message: format!(
                "{w} comes after the text; options go before <payload…>, <result…> or <error…>"
            ),
        }),
        None => Ok(()),
    }
}

fn fail(json: bool, e: &dyn std::fmt::Display, code: u8) -> ExitCode {
    if json {
        println!("{}", json!({ "error": e.to_string() }));
    } else {
        eprintln!("warden bus: {e}");
    }
    ExitCode::from(code)
}

pub async fn main(args: BusArgs) -> anyhow::Result<ExitCode> {
    let json = args.json;
    let home = args
        .home
        .clone()
        .unwrap_or_else(|| PathBuf::from(".warden"));
    let settings = match crate::config::bus::for_cli(&home, args.config.clone())
        .and_then(|s| s.bus_config())
    {
        Ok(s) => s,
        Err(e) => return Ok(fail(json, &format!("{e:#}"), 1)),
    };
    let opened = std::fs::create_dir_all(&home)
        .with_context(|| format!("cannot create WARDEN_HOME {}", home.display()))
        .and_then(|()| Ok(Store::open(&home.join("warden.db"), CommitMode::Group)?));
    let store = match opened {
        Ok(s) => s,
        Err(e) => return Ok(fail(json, &format!("{e:#}"), 3)),
    };
    let bus = Bus::new(store.clone(), settings);
    let me = args.agent.clone().unwrap_or_else(|| "user".to_owned());
    let out = run(&bus, &me, args.command).await;
    store.close();
    match out {
        Ok((value, text)) => {
            if json {
                println!("{value}");
            } else {
                println!("{text}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            let code = match e {
                BusError::Store(_) => 3,
                _ => 1,
            };
            Ok(fail(json, &e, code))
        }
    }
}

async fn run(
    bus: &Bus,
    me: &str,
    command: BusCommand,
) -> Result<(serde_json::Value, String), BusError> {
    Ok(match command {
        BusCommand::Post {
            to,
            kind,
            capability,
            payload,
            ttl,
            reply_to,
        } => {
            options_first(&payload)?;
            let payload = payload.join(" ");
            let m = bus
                .post(&Post {
                    from: me,
                    to: &to,
                    kind: &kind,
                    capability: &capability,
                    payload: &payload,
                    ttl,
                    reply_to: reply_to.as_deref(),
                })
                .await?;
            let text = format!("posted {} to {}", m.id, m.to);
            (json!(m), text)
        }
        BusCommand::Poll { agent, limit, wait } => {
            let agent = agent.unwrap_or_else(|| me.to_owned());
            let got = match wait {
                None => bus.poll(&agent, limit).await?,
                Some(s) if s.is_finite() && (0.0..=300.0).contains(&s) => {
                    bus.poll_wait(&agent, limit, std::time::Duration::from_secs_f64(s))
                        .await?
                }
                Some(s) => {
                    return Err(BusError::Invalid {
                        field: "wait",
                        message: format!("{s} must be from 0 to 300 seconds"),
                    });
                }
            };
            let text = if got.is_empty() {
                format!("no messages for {agent}")
            } else {
                got.iter().map(line).collect::<Vec<_>>().join("\n")
            };
            (json!({ "agent": agent, "messages": got }), text)
        }
        BusCommand::Ack {
            msg_id,
            result,
            lease,
        } => {
            options_first(&result)?;
            let m = bus
                .ack(&msg_id, &need_lease(lease)?, &result.join(" "))
                .await?;
            let text = format!("{} completed", m.id);
            (json!(m), text)
        }
        BusCommand::Reject {
            msg_id,
            error,
            lease,
        } => {
            options_first(&error)?;
            let m = bus
                .reject(&msg_id, &need_lease(lease)?, &error.join(" "))
                .await?;
            let text = format!("{} failed: {}", m.id, m.error.clone().unwrap_or_default());
            (json!(m), text)
        }
        BusCommand::Status => {
            let counts = bus.status().await?;
            let mut text = format!(
                "{:<20} {:>8} {:>9} {:>9} {:>7} {:>7} {:>5}",
                "agent", "pending", "delivered", "completed", "failed", "expired", "dead"
            );
            for c in &counts {
                text.push_str(&format!(
                    "\n{:<20} {:>8} {:>9} {:>9} {:>7} {:>7} {:>5}{}",
                    c.agent,
                    c.pending,
                    c.delivered,
                    c.completed,
                    c.failed,
                    c.expired,
                    c.dead,
                    if c.registered {
                        ""
                    } else {
                        "  (not registered)"
                    }
                ));
            }
            (json!({ "agents": counts }), text)
        }
        BusCommand::Prune => {
            let (expired, finished, agents) = bus.prune().await?;
            let text = format!(
                "pruned {expired} expired and {finished} finished messages, and {agents} idle agents"
            );
            (
                json!({ "expired": expired, "finished": finished, "agents": agents }),
                text,
            )
        }
        BusCommand::Register { name, capabilities } => {
            let a = bus.register(&name, &capabilities).await?;
            let text = format!("registered {} ({})", a.name, a.capabilities.join(", "));
            (json!(a), text)
        }
        BusCommand::Lease(LeaseCommand::Create {
            resource,
            holder,
            ttl,
        }) => {
            if !(ttl.is_finite() && ttl > 0.0 && ttl <= warden_bus::MAX_LEASE.as_secs_f64()) {
                return Err(BusError::Invalid {
                    field: "ttl",
                    message: format!(
                        "{ttl} must be a number of seconds above 0 and at most {}",
                        warden_bus::MAX_LEASE.as_secs()
                    ),
                });
            }
            let l = bus
                .lease_create(&resource, &holder, std::time::Duration::from_secs_f64(ttl))
                .await?;
            let text = format!(
                "{} leased to {holder} with fencing token {}",
                l.resource, l.fencing
            );
            (json!(l), text)
        }
        BusCommand::Lease(LeaseCommand::Revoke { resource }) => {
            let l = bus.lease_revoke(&resource).await?;
            let text = format!("{} revoked (fencing token was {})", l.resource, l.fencing);
            (json!(l), text)
        }
        BusCommand::Lease(LeaseCommand::List) => {
            let all = bus.leases().await?;
            let text = all
                .iter()
                .map(|l| match &l.holder {
                    Some(h) => format!("{} held by {h} (fencing {})", l.resource, l.fencing),
                    None => format!("{} free (last fencing {})", l.resource, l.fencing),
                })
                .collect::<Vec<_>>()
                .join("\n");
            (json!({ "leases": all }), text)
        }
        BusCommand::Import { file } => {
            let text = std::fs::read_to_string(&file).map_err(|e| BusError::Invalid {
                field: "file",
                message: format!("cannot read {}: {e}", file.display()),
            })?;
            let (agents, imported, skipped) = bus.import(&text).await?;
            let text = format!(
                "imported {imported} messages ({skipped} already here) and {agents} agents from {}",
                file.display()
            );
            (
                json!({ "agents": agents, "imported": imported, "skipped": skipped }),
                text,
            )
        }
        BusCommand::Export { file } => {
            let pad = bus.export().await?;
            let body = serde_json::to_string_pretty(&pad).map_err(|e| BusError::Invalid {
                field: "export",
                message: e.to_string(),
            })?;
            match file {
                None => (json!(pad), body),
                Some(f) => {
                    // A temp file, synced, then renamed: a crash leaves the old file or the new.
                    let tmp = f.with_extension("tmp");
                    let written = std::fs::File::create(&tmp)
                        .and_then(|mut w| {
                            std::io::Write::write_all(&mut w, (body + "\n").as_bytes())?;
                            w.sync_all()
                        })
                        .and_then(|()| std::fs::rename(&tmp, &f));
                    written.map_err(|e| BusError::Invalid {
                        field: "file",
                        message: format!("cannot write {}: {e}", f.display()),
                    })?;
                    let text = format!(
                        "exported {} messages and {} agents to {}",
                        pad.messages.len(),
                        pad.agents.len(),
                        f.display()
                    );
                    (
                        json!({ "messages": pad.messages.len(), "agents": pad.agents.len() }),
                        text,
                    )
                }
            }
        }
        BusCommand::Unregister { id } => {
            let failed = bus.unregister(&id).await?;
            let text = format!("unregistered {id}; {failed} unfinished messages failed");
            (json!({ "agent": id, "failed": failed }), text)
        }
    })
}
