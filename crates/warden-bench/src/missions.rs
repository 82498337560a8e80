//! `missions`: AIWG executor-contract missions end to end. The conformance
//! peer (`aiwg-peer`, the orchestrator side, in this process) dispatches
//! short missions (`true`) to a release `warden serve`; each is timed from
//! the dispatch request to its `mission.completed` arriving on the peer's
//! WebSocket. The baseline is the same command spawned and waited for
//! directly (`sh -c true`), in the same run.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;

use crate::percentile;

/// Fails the bench if the peer saw any schema or order violation.
fn no_violations(peer: &aiwg_peer::Peer) -> anyhow::Result<()> {
    let violations = peer.violations();
    if let Some(first) = violations.first() {
        bail!(
            "the peer saw {} contract violations, first: {first}",
            violations.len()
        );
    }
    println!("  contract violations seen by the peer: 0");
    Ok(())
}

/// The release `warden` beside this binary.
fn warden_bin() -> anyhow::Result<std::path::PathBuf> {
    let bin = std::env::current_exe()?.with_file_name("warden");
    if !bin.is_file() {
        bail!(
            "{} not found: cargo build --release -p warden -p warden-bench",
            bin.display()
        );
    }
    Ok(bin)
}

fn bench_dir() -> anyhow::Result<tempfile::TempDir> {
    Ok(match std::env::var_os("WARDEN_BENCH_DIR") {
        Some(d) => tempfile::tempdir_in(d)?,
        None => tempfile::tempdir()?,
    })
}

/// Starts `warden serve` on `dir/home`, registered with `peer`; returns it
/// and its base URL once it listens.
async fn serve(
    bin: &std::path::Path,
    dir: &std::path::Path,
    peer: &aiwg_peer::Peer,
) -> anyhow::Result<(tokio::process::Child, String)> {
    let mut child = tokio::process::Command::new(bin)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("WARDEN_HOME", dir.join("home"))
        .env("WARDEN_LOG", "warn")
        .env("AIWG_SERVE_ENDPOINT", peer.base())
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting warden serve")?;
    let stdout = child.stdout.take().context("warden's stdout")?;
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .context("warden did not start in 30 s")??
        .context("warden exited")?;
    let base = line
        .strip_prefix("warden listening on ")
        .context("unexpected first line")?
        .to_owned();
    Ok((child, base))
}

/// Runs the benchmark: `missions` dispatches, `concurrency` at a time.
pub async fn run(missions: usize, concurrency: usize) -> anyhow::Result<()> {
    let peer = Arc::new(aiwg_peer::Peer::start().await?);
    let bin = warden_bin()?;
    let dir = bench_dir()?;
    let (mut child, base) = serve(&bin, dir.path(), &peer).await?;
    peer.wait_for(Duration::from_secs(30), "warden's first resync", |f| {
        f.iter().any(|r| r.frame["event"] == "executor.resync")
    })
    .await;
    let exec = std::fs::read_to_string(dir.path().join("home/identity"))?
        .trim()
        .to_owned();

    // Warm up, then measure.
    let _ = dispatch_all(&peer, &base, &exec, "warm", 20, concurrency).await?;
    let started = Instant::now();
    let mut lat = dispatch_all(&peer, &base, &exec, "m", missions, concurrency).await?;
    let wall = started.elapsed();
    lat.sort();

    let mut raw: Vec<Duration> = (0..200)
        .map(|_| {
            let t = Instant::now();
            let _ = Command::new("sh").args(["-c", "true"]).status();
            t.elapsed()
        })
        .collect();
    raw.sort();

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (p50, p90, p99) = (
        percentile(&lat, 50.0),
        percentile(&lat, 90.0),
        percentile(&lat, 99.0),
    );
    println!(
        "missions: {missions} dispatches of `true`, {concurrency} at a time, to warden serve (release) from aiwg-peer"
    );
    println!(
        "  dispatch → mission.completed  p50 {:.2} ms  p90 {:.2} ms  p99 {:.2} ms",
        ms(p50),
        ms(p90),
        ms(p99)
    );
    println!(
        "  throughput {:.0} missions/s ({} in {:.2} s)",
        missions as f64 / wall.as_secs_f64(),
        missions,
        wall.as_secs_f64()
    );
    let raw50 = percentile(&raw, 50.0);
    println!(
        "  baseline `sh -c true` spawn+wait p50 {:.2} ms; ratio mission p50 / baseline = {:.1}x",
        ms(raw50),
        p50.as_secs_f64() / raw50.as_secs_f64()
    );
    no_violations(&peer)?;
    let _ = child.kill().await;
    Ok(())
}

/// Dispatches `n` missions, at most `concurrency` in flight; the latency of
/// each, dispatch to `mission.completed`.
async fn dispatch_all(
    peer: &Arc<aiwg_peer::Peer>,
    base: &str,
    exec: &str,
    prefix: &str,
    n: usize,
    concurrency: usize,
) -> anyhow::Result<Vec<Duration>> {
    let gate = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let permit = Arc::clone(&gate).acquire_owned().await?;
        let (peer, base, exec) = (Arc::clone(peer), base.to_owned(), exec.to_owned());
        let id = format!("{prefix}-{i}");
        tasks.push(tokio::spawn(async move {
            let body = json!({"mission_id": id, "objective": "true", "completion": "exit 0"});
            let t = Instant::now();
            let (code, answer) = peer.dispatch(&base, &exec, "bench", body).await;
            if code != 202 {
                drop(permit);
                return Err(anyhow::anyhow!("dispatch {id}: {code} {answer}"));
            }
            let ended = peer.wait_ended(&id, Duration::from_secs(60)).await;
            drop(permit);
            match ended {
                Some((event, at)) if event == "mission.completed" => Ok(at - t),
                Some((event, _)) => Err(anyhow::anyhow!("{id} ended with {event}")),
                None => Err(anyhow::anyhow!("{id} did not end within 60 s")),
            }
        }));
    }
    let mut lat = Vec::with_capacity(n);
    for t in tasks {
        lat.push(t.await??);
    }
    Ok(lat)
}

/// User + system clock ticks (1/100 s) a process has used.
fn cpu_ticks(pid: i32) -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat.rsplit_once(')').context("/proc stat")?.1;
    let f: Vec<&str> = after.split_whitespace().collect();
    Ok(f.get(11).context("utime")?.parse::<u64>()? + f.get(12).context("stime")?.parse::<u64>()?)
}

/// Restart and resync with `n` suspended missions: a store holding `n`
/// missions a previous server suspended (each with its run directory; one
/// sleeping process stands in for all their shims, as `n` real shims do not
/// fit one small machine), then `warden serve` started and timed until the
/// peer has the resync frame (owning all `n`) and every `mission.resumed`.
pub async fn resync(n: usize) -> anyhow::Result<()> {
    use warden_aiwg::wire::Event;
    use warden_core::{MissionId, MissionState, Timestamp};
    use warden_store::{CommitMode, MissionRecord, MissionUpdate, Store};

    let bin = warden_bin()?;
    // Baseline: the same restart with no missions, in the same run.
    let empty = {
        let peer = aiwg_peer::Peer::start().await?;
        let dir = bench_dir()?;
        let t0 = Instant::now();
        let (mut child, _) = serve(&bin, dir.path(), &peer).await?;
        peer.wait_for(Duration::from_secs(60), "the resync", |f| {
            f.iter().any(|r| r.frame["event"] == "executor.resync")
        })
        .await;
        let took = t0.elapsed();
        let _ = child.kill().await;
        took
    };
    let peer = aiwg_peer::Peer::start().await?;
    let dir = bench_dir()?;
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join("missions"))?;
    let exec = warden_aiwg::identity::load_or_create(&home)?;
    let mut stand_in = tokio::process::Command::new("sleep")
        .arg("3600")
        .kill_on_drop(true)
        .spawn()
        .context("starting the process that stands in for the shims")?;
    let pid = stand_in.id().context("the stand-in's pid")? as i32;
    let start = warden_exec::shim::process_start(pid).context("the stand-in's start time")?;

    eprintln!("seeding {n} suspended missions…");
    let seeding = Instant::now();
    let store = Store::open(&home.join("warden.db"), CommitMode::Group)?;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        let (store, exec) = (store.clone(), exec.clone());
        let run_dir = home.join(format!("missions/ckpt-{i}"));
        tasks.spawn(async move {
            std::fs::create_dir_all(&run_dir)?;
            std::fs::write(run_dir.join("output"), "working\n")?;
            let id = MissionId::parse(&format!("m-{i}"))?;
            let env = |e: &Event| e.envelope(&exec, Some(&id), Timestamp::now());
            let rec = MissionRecord {
                long_running: true,
                ..MissionRecord::assigned(
                    id.clone(),
                    "bench".into(),
                    "default".into(),
                    "sleep 3600".into(),
                    "exit 0".into(),
                    format!("ckpt-{i}"),
                )
            };
            let now = rec.created_at;
            let assigned = env(&Event::Assigned {
                estimated_start: now,
            });
            store.dispatch_mission(rec, assigned).await?;
            let started = Event::Started {
                agent_runtime: "command".into(),
                pty_session_id: Some(format!("ckpt-{i}")),
            };
            let update = MissionUpdate {
                run_dir: Some(run_dir.display().to_string()),
                shim: Some((pid, start)),
                ..MissionUpdate::default()
            };
            store
                .transition_mission(
                    id.clone(),
                    MissionState::Running,
                    update,
                    (started.name().into(), env(&started)),
                )
                .await?;
            let suspended = Event::Suspended {
                checkpoint_id: format!("ckpt-{i}"),
                reason: "mgmt_server_shutdown".into(),
            };
            store
                .transition_mission(
                    id.clone(),
                    MissionState::Suspended,
                    // The previous server had reported its output.
                    MissionUpdate {
                        scanned: Some("working\n".len() as u64),
                        ..MissionUpdate::default()
                    },
                    (suspended.name().into(), env(&suspended)),
                )
                .await
                .map_err(anyhow::Error::from)
        });
    }
    let mut last = 0;
    while let Some(seq) = tasks.join_next().await {
        last = last.max(seq??);
    }
    // The previous server delivered all of that before it stopped.
    store.mission_events_delivered(last).await?;
    store.close();
    eprintln!(
        "seeded in {:.1} s; starting warden serve",
        seeding.elapsed().as_secs_f64()
    );

    let t0 = Instant::now();
    let (mut child, _base) = serve(&bin, dir.path(), &peer).await?;
    let listening = t0.elapsed();
    let frames = peer
        .wait_for(Duration::from_secs(60), "the resync", |f| {
            f.iter().any(|r| r.frame["event"] == "executor.resync")
        })
        .await;
    let resynced = t0.elapsed();
    let owned = frames
        .iter()
        .find(|r| r.frame["event"] == "executor.resync")
        .and_then(|r| {
            r.frame["data"]["owned_mission_ids"]
                .as_array()
                .map(Vec::len)
        })
        .unwrap_or(0);
    if owned != n {
        bail!("the resync owned {owned} missions, not {n}");
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while peer.count("mission.resumed") < n {
        if Instant::now() > deadline {
            bail!(
                "only {} of {n} missions resumed within 120 s",
                peer.count("mission.resumed")
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let resumed = t0.elapsed();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "resync: warden serve restarted with {n} suspended missions (one stand-in shim process)"
    );
    println!("  listening after            {:8.1} ms", ms(listening));
    println!(
        "  baseline: the same restart with no missions: resync after {:.1} ms; ratio {:.1}x",
        ms(empty),
        resynced.as_secs_f64() / empty.as_secs_f64()
    );
    println!(
        "  executor.resync received   {:8.1} ms  (owned_mission_ids: {owned})  target < 1000 ms: {}",
        ms(resynced),
        crate::verdict(resynced < Duration::from_secs(1))
    );
    println!(
        "  all {n} mission.resumed    {:8.1} ms  ({:.0} missions/s after the resync)",
        ms(resumed),
        n as f64 / (resumed - resynced).as_secs_f64().max(1e-9)
    );
    no_violations(&peer)?;
    // What watching them costs while nothing happens.
    let server = child.id().context("the server's pid")? as i32;
    let before = cpu_ticks(server)?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let used = (cpu_ticks(server)? - before) as f64 / 100.0;
    println!(
        "  idle CPU while watching them: {:.1} % of one core (5 s)",
        used / 5.0 * 100.0
    );
    let _ = child.kill().await;
    let _ = stand_in.kill().await;
    Ok(())
}
