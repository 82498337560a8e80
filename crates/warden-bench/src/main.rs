//! warden-bench: measures the supervisor and the store against their raw
//! baselines in the same run and prints the ratios.
//!
//! ```text
//! cargo run --release -p warden-bench -- all
//! ```

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, Subcommand};

mod spawn;
mod store;

#[derive(Debug, Parser)]
#[command(name = "warden-bench", about = "warden benchmarks; run with --release")]
struct Cli {
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Debug, Subcommand)]
enum Bench {
    /// /bin/true through the supervisor vs raw std::process::Command spawn+wait.
    Spawn {
        #[arg(long, default_value_t = 2000)]
        runs: usize,
    },
    /// Durable run state changes from concurrent writers: group commit vs one commit per change.
    Store {
        #[arg(long, default_value_t = 10_000)]
        changes: usize,
        #[arg(long, default_value_t = 8)]
        writers: usize,
    },
    /// Both, with their default sizes.
    All,
}

fn main() -> anyhow::Result<()> {
    if cfg!(debug_assertions) {
        eprintln!("warning: this is a debug build; benchmark figures only count with --release");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
    match Cli::parse().bench {
        Bench::Spawn { runs } => rt.block_on(spawn::run(runs)),
        Bench::Store { changes, writers } => rt.block_on(store::run(changes, writers)),
        Bench::All => {
            rt.block_on(spawn::run(2000))?;
            println!();
            rt.block_on(store::run(10_000, 8))
        }
    }
}

/// The p-th percentile (0..=100) of sorted durations.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// Runs `f` and returns how long it took.
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

fn verdict(ok: bool) -> &'static str {
    if ok { "target met" } else { "TARGET MISSED" }
}
