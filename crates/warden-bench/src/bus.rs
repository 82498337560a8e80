//! `bus`: durable post → poll → ack cycles per second on one mailbox per
//! agent, with 1 and 8 agents at once, at queue depths 1,000 and 100,000,
//! side by side: warden's bus (the store, group commit), Redis Streams with
//! `appendfsync always` (XADD, XREADGROUP, XACK; started here), and a
//! whole-file JSON scratchpad like the seed's (read, modify, write a temp
//! file, fsync, rename).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use warden_bus::{Bus, BusConfig, Post};
use warden_store::{BusAgent, BusMessage, CommitMode, Store};

/// One measurement.
struct Row {
    system: &'static str,
    agents: usize,
    depth: usize,
    cycles_per_s: f64,
}

fn bench_dir() -> anyhow::Result<tempfile::TempDir> {
    Ok(match std::env::var_os("WARDEN_BENCH_DIR") {
        Some(d) => tempfile::tempdir_in(d)?,
        None => tempfile::tempdir()?,
    })
}

/// Messages to prefill `agent`'s mailbox with.
fn backlog(agent: &str, n: usize) -> Vec<BusMessage> {
    (0..n)
        .map(|i| BusMessage {
            id: format!("pre_{agent}_{i}"),
            from: "user".into(),
            to: agent.into(),
            kind: "job".into(),
            capability: "bench".into(),
            payload: json!({ "i": i }),
            ttl: 0,
            status: "pending".into(),
            ts: 1,
            reply_to: None,
            attempts: 0,
            lease_token: None,
            visible_at: 1,
            result: None,
            error: None,
            history: json!([]),
        })
        .collect()
}

async fn warden(agents: usize, depth: usize, duration: Duration) -> anyhow::Result<f64> {
    let dir = bench_dir()?;
    let store = Store::open(&dir.path().join("warden.db"), CommitMode::Group)?;
    let names: Vec<String> = (0..agents).map(|i| format!("agent{i}")).collect();
    let mut pre = Vec::new();
    for n in &names {
        pre.extend(backlog(n, depth / agents));
    }
    let roster = names
        .iter()
        .map(|n| BusAgent {
            name: n.clone(),
            capabilities: vec![],
            registered_at: 0,
            last_poll: None,
        })
        .collect();
    store.bus_import(roster, pre).await?;
    let bus = Arc::new(Bus::new(store.clone(), BusConfig::default()));
    let deadline = Instant::now() + duration;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for name in names {
        let bus = Arc::clone(&bus);
        tasks.push(tokio::spawn(async move {
            let mut cycles = 0u64;
            while Instant::now() < deadline {
                bus.post(&Post {
                    from: "user",
                    to: &name,
                    kind: "job",
                    capability: "bench",
                    payload: r#"{"work":1}"#,
                    ttl: Some(0),
                    reply_to: None,
                })
                .await?;
                let got = bus.poll(&name, 1).await?;
                let m = got.first().context("nothing to poll")?;
                let lease = m.lease_token.clone().context("no lease")?;
                bus.ack(&m.id, &lease, "1").await?;
                cycles += 1;
            }
            anyhow::Ok(cycles)
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await??;
    }
    let rate = total as f64 / start.elapsed().as_secs_f64();
    store.close();
    Ok(rate)
}

/// A redis-server with `appendfsync always`, on loopback, in a temp dir.
struct Redis {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Redis {
    fn start() -> anyhow::Result<Self> {
        let dir = bench_dir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut child = Command::new("redis-server")
            .args([
                "--bind", "127.0.0.1", "--port", &port.to_string(), "--dir",
            ])
            .arg(dir.path())
            .args(["--appendonly", "yes", "--appendfsync", "always", "--save", "", "--protected-mode", "yes"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("redis-server not found: apt-get install redis-server (the benchmark starts it itself)")?;
        let out = child.stdout.take().context("redis stdout")?;
        let mut lines = BufReader::new(out).lines();
        let ready = Instant::now() + Duration::from_secs(20);
        loop {
            let line = lines.next().context("redis-server exited")??;
            if line.contains("Ready to accept connections") {
                break;
            }
            if Instant::now() > ready {
                bail!("redis-server did not start");
            }
        }
        std::thread::spawn(move || for _ in lines {});
        Ok(Self {
            child,
            port,
            _dir: dir,
        })
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn redis(agents: usize, depth: usize, duration: Duration) -> anyhow::Result<f64> {
    let server = Redis::start()?;
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port))?;
    {
        let mut c = client.get_connection()?;
        for a in 0..agents {
            let key = format!("mbox:{a}");
            redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(&key)
                .arg("g")
                .arg("$")
                .arg("MKSTREAM")
                .query::<()>(&mut c)?;
            let mut pipe = redis::pipe();
            for i in 0..depth / agents {
                pipe.cmd("XADD")
                    .arg(&key)
                    .arg("*")
                    .arg("payload")
                    .arg(format!("{{\"i\":{i}}}"))
                    .ignore();
            }
            pipe.query::<()>(&mut c)?;
        }
    }
    let deadline = Instant::now() + duration;
    let start = Instant::now();
    let handles: Vec<_> = (0..agents)
        .map(|a| {
            let client = client.clone();
            std::thread::spawn(move || -> anyhow::Result<u64> {
                let mut c = client.get_connection()?;
                let key = format!("mbox:{a}");
                let mut cycles = 0;
                while Instant::now() < deadline {
                    redis::cmd("XADD")
                        .arg(&key)
                        .arg("*")
                        .arg("payload")
                        .arg(r#"{"work":1}"#)
                        .query::<String>(&mut c)?;
                    let got: redis::streams::StreamReadReply = redis::cmd("XREADGROUP")
                        .arg("GROUP")
                        .arg("g")
                        .arg("c")
                        .arg("COUNT")
                        .arg(1)
                        .arg("STREAMS")
                        .arg(&key)
                        .arg(">")
                        .query(&mut c)?;
                    let id = got
                        .keys
                        .first()
                        .and_then(|k| k.ids.first())
                        .map(|i| i.id.clone())
                        .context("nothing read")?;
                    redis::cmd("XACK")
                        .arg(&key)
                        .arg("g")
                        .arg(&id)
                        .query::<i64>(&mut c)?;
                    cycles += 1;
                }
                Ok(cycles)
            })
        })
        .collect();
    let mut total = 0;
    for h in handles {
        total += h
            .join()
            .map_err(|_| anyhow::anyhow!("redis worker panicked"))??;
    }
    Ok(total as f64 / start.elapsed().as_secs_f64())
}

/// The seed's design: the whole scratchpad in one JSON file.
fn json_file(agents: usize, depth: usize, duration: Duration) -> anyhow::Result<f64> {
    let dir = bench_dir()?;
    let path = dir.path().join("scratchpad.json");
    let mut messages = Vec::new();
    for a in 0..agents {
        for i in 0..depth / agents {
            messages.push(json!({"id": format!("pre_{a}_{i}"), "from": "user", "to": format!("agent{a}"),
                "type": "job", "capability": "bench", "payload": {"i": i}, "ttl": 0, "status": "pending",
                "ts": 1, "reply_to": null}));
        }
    }
    write(
        &path,
        &json!({"messages": messages, "seq": messages.len(), "agents": {}}),
    )?;
    let lock = Arc::new(std::sync::Mutex::new(()));
    let deadline = Instant::now() + duration;
    let start = Instant::now();
    let handles: Vec<_> = (0..agents)
        .map(|a| {
            let (path, lock) = (path.clone(), Arc::clone(&lock));
            std::thread::spawn(move || -> anyhow::Result<u64> {
                let me = format!("agent{a}");
                let mut cycles = 0;
                while Instant::now() < deadline {
                    // One process at a time may rewrite the file (the seed has no lock at
                    // all and loses updates; this is the best case for the design).
                    for step in 0..3 {
                        let _held = lock.lock().map_err(|_| anyhow::anyhow!("lock"))?;
                        let mut pad: Value = serde_json::from_slice(&std::fs::read(&path)?)?;
                        let msgs = pad["messages"].as_array_mut().context("messages")?;
                        match step {
                            0 => msgs.push(json!({"id": format!("m_{a}_{cycles}"), "from": "user", "to": me,
                                "type": "job", "capability": "bench", "payload": {"work": 1}, "ttl": 0,
                                "status": "pending", "ts": 2, "reply_to": null})),
                            1 => {
                                let m = msgs.iter_mut().find(|m| m["to"] == me.as_str() && m["status"] == "pending").context("nothing")?;
                                m["status"] = json!("delivered");
                            }
                            _ => {
                                let m = msgs.iter_mut().find(|m| m["to"] == me.as_str() && m["status"] == "delivered").context("nothing")?;
                                m["status"] = json!("completed");
                            }
                        }
                        write(&path, &pad)?;
                    }
                    cycles += 1;
                }
                Ok(cycles)
            })
        })
        .collect();
    let mut total = 0;
    for h in handles {
        total += h
            .join()
            .map_err(|_| anyhow::anyhow!("json worker panicked"))??;
    }
    Ok(total as f64 / start.elapsed().as_secs_f64())
}

/// Writes `v` durably: a temp file, fsync, rename.
fn write(path: &Path, v: &Value) -> anyhow::Result<()> {
    let tmp: PathBuf = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&serde_json::to_vec(v)?)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

pub fn run(seconds: f64) -> anyhow::Result<()> {
    let duration = Duration::from_secs_f64(seconds);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    println!(
        "bus: durable post → poll → ack cycles/s, {seconds:.0} s per measurement, one mailbox per agent"
    );
    let mut rows = Vec::new();
    for depth in [1_000, 100_000] {
        for agents in [1, 8] {
            let w = rt.block_on(warden(agents, depth, duration))?;
            let r = redis(agents, depth, duration)?;
            // The whole-file design rewrites 100,000 messages per step: a short look suffices.
            let j = json_file(agents, depth, duration.min(Duration::from_secs(3)))?;
            rows.push(Row {
                system: "warden",
                agents,
                depth,
                cycles_per_s: w,
            });
            rows.push(Row {
                system: "redis",
                agents,
                depth,
                cycles_per_s: r,
            });
            rows.push(Row {
                system: "json-file",
                agents,
                depth,
                cycles_per_s: j,
            });
            println!(
                "  depth {depth:>7}, {agents} agent(s): warden {w:>8.0}  redis {r:>8.0}  json-file {j:>8.1}  warden/redis {:.2}×",
                w / r
            );
        }
    }
    let get = |s: &str, a: usize, d: usize| {
        rows.iter()
            .find(|r| r.system == s && r.agents == a && r.depth == d)
            .map_or(0.0, |r| r.cycles_per_s)
    };
    let one = get("warden", 1, 1_000) / get("redis", 1, 1_000);
    let eight = get("warden", 8, 1_000) / get("redis", 8, 1_000);
    let flat = get("warden", 8, 1_000) / get("warden", 8, 100_000);
    println!(
        "  targets: ≥ redis at 1 agent: {one:.2}× {}",
        if one >= 1.0 { "met" } else { "MISSED" }
    );
    println!(
        "           ≥ 2× redis at 8 agents: {eight:.2}× {}",
        if eight >= 2.0 { "met" } else { "MISSED" }
    );
    println!(
        "           100,000 deep within 1.5× of 1,000 deep (8 agents): {flat:.2}× {}",
        if flat <= 1.5 { "met" } else { "MISSED" }
    );
    Ok(())
}
