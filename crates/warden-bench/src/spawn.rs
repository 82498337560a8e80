//! `spawn`: per-run cost of the supervisor against a bare spawn+wait.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use warden_core::confine::{Policy, Profile};
use warden_core::{Outcome, RunId, RunSpec};
use warden_exec::{RunEvent, Supervisor, SupervisorConfig};

use crate::{timed, verdict};

const PROGRAM: &str = "/bin/true";

pub async fn run(runs: usize) -> anyhow::Result<()> {
    let supervisor = Supervisor::new(SupervisorConfig::default()).context("supervisor")?;
    let spec = RunSpec::new(
        vec![PROGRAM.into()],
        "/".into(),
        Duration::from_secs(30),
        1 << 20,
    );
    // Warm both paths (page cache, runtime threads) before timing.
    for _ in 0..50 {
        supervised(&supervisor, &spec).await?;
        raw_spawn_wait()?;
    }

    // Interleave rounds so drift on a shared machine hits both sides alike.
    let rounds = 20;
    let per_round = runs.div_ceil(rounds);
    let (mut sup_t, mut raw_t, mut piped_t) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let mut round_ratios = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let start = Instant::now();
        for _ in 0..per_round {
            supervised(&supervisor, &spec).await?;
        }
        let sup_round = start.elapsed();
        sup_t += sup_round;
        let ((), t) = timed(|| {
            for _ in 0..per_round {
                let _ = raw_spawn_wait();
            }
        });
        raw_t += t;
        round_ratios.push(sup_round.as_secs_f64() / t.as_secs_f64());
        let ((), t) = timed(|| {
            for _ in 0..per_round {
                let _ = raw_output();
            }
        });
        piped_t += t;
    }
    let n = (per_round * rounds) as f64;
    let per = |d: Duration| d.as_secs_f64() * 1e6 / n;
    let (sup, raw, piped) = (per(sup_t), per(raw_t), per(piped_t));
    let ratio = sup / raw;
    println!(
        "spawn: {} runs of {PROGRAM} each way, interleaved in {rounds} rounds",
        per_round * rounds
    );
    println!("  supervisor (pipes, own group, deadline, reap check)  {sup:8.1} µs/run");
    println!("  raw Command spawn+wait (inherited stdio)             {raw:8.1} µs/run");
    println!("  raw Command output() (piped stdout+stderr)           {piped:8.1} µs/run");
    println!("  ratio supervisor / raw spawn+wait, all runs = {ratio:.2}x");
    println!(
        "  ratio supervisor / raw output(),   all runs = {:.2}x",
        sup / piped
    );
    // Rounds alternate the two sides, so a burst of noise from the shared
    // machine lands in one round; the median round is the robust figure.
    round_ratios.sort_by(f64::total_cmp);
    let median = round_ratios[rounds / 2];
    println!(
        "  ratio supervisor / raw spawn+wait, per round: min {:.2}x  median {median:.2}x  max {:.2}x",
        round_ratios[0],
        round_ratios[rounds - 1]
    );
    println!(
        "  median ratio {median:.2}x  (target <= 1.30x: {})",
        verdict(median <= 1.3)
    );
    Ok(())
}

/// Which tier `spawn` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Tier {
    Host,
    Confined,
}

/// The confined tier's extra cost per run: `/bin/true` through the sandbox
/// helper (namespaces, Landlock, seccomp, rlimits; profile `edit`) against
/// the same supervisor on the host tier, interleaved.
pub async fn confined(runs: usize) -> anyhow::Result<()> {
    let helper = std::env::current_exe()?.with_file_name("warden");
    anyhow::ensure!(
        helper.is_file(),
        "{} not found: build it first (cargo build --release -p warden)",
        helper.display()
    );
    let supervisor = Supervisor::new(SupervisorConfig {
        sandbox_helper: Some(helper),
        ..SupervisorConfig::default()
    })
    .context("supervisor")?;
    let ws = tempfile::tempdir()?;
    let ws_path = ws.path().canonicalize()?;
    let host = RunSpec::new(
        vec![PROGRAM.into()],
        ws_path.clone(),
        Duration::from_secs(30),
        1 << 20,
    );
    let mut boxed = host.clone();
    boxed.confine = Some(Policy::for_profile(Profile::Edit, ws_path));
    for _ in 0..20 {
        supervised(&supervisor, &host).await?;
        supervised(&supervisor, &boxed).await?;
    }
    let rounds = 20;
    let per_round = runs.div_ceil(rounds).max(1);
    let (mut host_t, mut boxed_t) = (Duration::ZERO, Duration::ZERO);
    let mut extras = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let start = Instant::now();
        for _ in 0..per_round {
            supervised(&supervisor, &host).await?;
        }
        let h = start.elapsed();
        let start = Instant::now();
        for _ in 0..per_round {
            supervised(&supervisor, &boxed).await?;
        }
        let b = start.elapsed();
        host_t += h;
        boxed_t += b;
        extras.push((b.as_secs_f64() - h.as_secs_f64()) * 1e3 / per_round as f64);
    }
    let n = (per_round * rounds) as f64;
    let per = |d: Duration| d.as_secs_f64() * 1e6 / n;
    let (h, b) = (per(host_t), per(boxed_t));
    extras.sort_by(f64::total_cmp);
    let median = extras[rounds / 2];
    println!(
        "spawn --tier confined: {} runs of {PROGRAM} each way, interleaved in {rounds} rounds",
        per_round * rounds
    );
    println!("  host tier (supervisor)                       {h:8.1} µs/run");
    println!("  confined tier (sandbox-exec, profile edit)   {b:8.1} µs/run");
    println!("  ratio confined / host = {:.2}x", b / h);
    println!(
        "  extra per run: all runs {:.2} ms; per round min {:.2} median {median:.2} max {:.2} ms",
        (b - h) / 1e3,
        extras[0],
        extras[rounds - 1]
    );
    println!(
        "  median extra {median:.2} ms  (target <= 3 ms: {})",
        verdict(median <= 3.0)
    );
    Ok(())
}

pub(crate) async fn supervised(supervisor: &Supervisor, spec: &RunSpec) -> anyhow::Result<()> {
    let mut run = supervisor.spawn(&RunId::new().to_string(), spec)?;
    loop {
        match run.next().await {
            Some(RunEvent::Finished(Outcome::Completed)) => return Ok(()),
            Some(RunEvent::Finished(other)) => bail!("{:?} ended {other:?}", spec.argv),
            Some(RunEvent::Output(_)) => {}
            None => bail!("supervisor lost the run"),
        }
    }
}

fn raw_spawn_wait() -> anyhow::Result<()> {
    let status = Command::new(PROGRAM).spawn()?.wait()?;
    anyhow::ensure!(status.success(), "{PROGRAM} failed");
    Ok(())
}

fn raw_output() -> anyhow::Result<()> {
    let out = Command::new(PROGRAM).stdin(Stdio::null()).output()?;
    anyhow::ensure!(out.status.success(), "{PROGRAM} failed");
    Ok(())
}
