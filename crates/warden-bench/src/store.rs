//! `store`: durable run state changes from concurrent writers, group commit
//! against one fsync'd commit per change.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use warden_core::{Outcome, RunId, RunRecord, RunSpec};
use warden_store::{CommitMode, Store};

use crate::{percentile, verdict};

struct Figures {
    per_sec: f64,
    per_commit: f64,
    p50: Duration,
    p99: Duration,
}

pub async fn run(changes: usize, writers: usize) -> anyhow::Result<()> {
    let dir =
        tempfile::tempdir_in(std::env::var_os("WARDEN_BENCH_DIR").unwrap_or_else(|| ".".into()))
            .context("temp dir (set WARDEN_BENCH_DIR to choose the disk)")?;
    println!(
        "store: {changes} durable run state changes (running -> completed, each with its event) \
         from {writers} concurrent writers, synchronous=FULL, WAL, in {}",
        dir.path().display()
    );
    let group = measure(
        &dir.path().join("group.db"),
        CommitMode::Group,
        changes,
        writers,
    )
    .await?;
    let single = measure(
        &dir.path().join("single.db"),
        CommitMode::PerWrite,
        changes,
        writers,
    )
    .await?;
    for (name, f) in [("group commit", &group), ("one commit per change", &single)] {
        println!(
            "  {name:<24} {:9.0} changes/s   p50 {:7.2} ms   p99 {:7.2} ms   {:5.2} changes/commit",
            f.per_sec,
            f.p50.as_secs_f64() * 1e3,
            f.p99.as_secs_f64() * 1e3,
            f.per_commit
        );
    }
    let fsync = fsync_latency(dir.path())?;
    // One change alone costs F + M (fixed commit cost + marginal cost per
    // change); a commit of k changes costs F + k·M. Group commit can only
    // amortize F, so the ratio is bounded by (F + M) / M.
    let k = group.per_commit;
    let one = 1.0 / single.per_sec;
    let batch = k / group.per_sec;
    let marginal = ((batch - one) / (k - 1.0)).max(0.0);
    let fixed = (one - marginal).max(0.0);
    println!(
        "  this disk: 4 KiB write+fdatasync {:.0} µs; commit cost = fixed {:.0} µs + {:.0} µs per change \
         (bound for any batching: {:.1}x)",
        fsync.as_secs_f64() * 1e6,
        fixed * 1e6,
        marginal * 1e6,
        (fixed + marginal) / marginal.max(f64::EPSILON)
    );
    let ratio = group.per_sec / single.per_sec;
    println!(
        "  ratio group / unbatched = {ratio:.2}x  (target >= 5x: {})",
        verdict(ratio >= 5.0)
    );
    Ok(())
}

async fn measure(
    path: &Path,
    mode: CommitMode,
    changes: usize,
    writers: usize,
) -> anyhow::Result<Figures> {
    // Set up the runs with group commit (not measured), then reopen in `mode`.
    let setup = Store::open(path, CommitMode::Group)?;
    let mut ids: Vec<RunId> = Vec::with_capacity(changes);
    let mut pending = Vec::new();
    for _ in 0..changes {
        let store = setup.clone();
        pending.push(tokio::spawn(async move {
            let run = store.create_run(RunRecord::new(spec()), "bench").await?;
            store.mark_started(run.id, 1).await?;
            Ok::<_, anyhow::Error>(run.id)
        }));
        if pending.len() == 256 {
            for p in pending.drain(..) {
                ids.push(p.await??);
            }
        }
    }
    for p in pending {
        ids.push(p.await??);
    }
    setup.close();

    let store = Store::open(path, mode)?;
    let per_writer = changes.div_ceil(writers);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for chunk in ids.chunks(per_writer) {
        let store = store.clone();
        let chunk = chunk.to_vec();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(chunk.len());
            for id in chunk {
                let t = Instant::now();
                store.finish_run(id, Outcome::Completed).await?;
                lat.push(t.elapsed());
            }
            Ok::<_, anyhow::Error>(lat)
        }));
    }
    let mut lat = Vec::with_capacity(changes);
    for t in tasks {
        lat.extend(t.await??);
    }
    let elapsed = start.elapsed();
    let (commits, writes) = store.commit_stats();
    store.close();
    lat.sort();
    Ok(Figures {
        per_sec: lat.len() as f64 / elapsed.as_secs_f64(),
        per_commit: writes as f64 / commits.max(1) as f64,
        p50: percentile(&lat, 50.0),
        p99: percentile(&lat, 99.0),
    })
}

/// Median latency of a 4 KiB write + fdatasync in `dir`: the floor under any
/// durable commit on this disk.
fn fsync_latency(dir: &Path) -> anyhow::Result<Duration> {
    use std::io::Write;
    let path = dir.join("fsync.probe");
    let mut f = std::fs::File::create(&path)?;
    let mut lat = Vec::with_capacity(200);
    for _ in 0..200 {
        let t = Instant::now();
        f.write_all(&[7u8; 4096])?;
        f.sync_data()?;
        lat.push(t.elapsed());
    }
    std::fs::remove_file(&path)?;
    lat.sort();
    Ok(percentile(&lat, 50.0))
}

fn spec() -> RunSpec {
    RunSpec::new(
        vec!["true".into()],
        "/".into(),
        Duration::from_secs(60),
        1024,
    )
}
