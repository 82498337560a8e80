//! warden-bench: measures the supervisor and the store against their raw
//! baselines in the same run and prints the ratios.
//!
//! ```text
//! cargo run --release -p warden-bench -- all
//! ```

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, Subcommand};

mod a2a;
mod adapter;
mod bus;
mod missions;
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
        /// `confined`: the confined tier's per-run overhead against the host
        /// tier (needs target/release/warden, the sandbox helper).
        #[arg(long, value_enum, default_value_t = spawn::Tier::Host)]
        tier: spawn::Tier,
    },
    /// Durable run state changes from concurrent writers: group commit vs one commit per change.
    Store {
        #[arg(long, default_value_t = 10_000)]
        changes: usize,
        #[arg(long, default_value_t = 8)]
        writers: usize,
    },
    /// A2A sends on echo agents: warden vs the official Rust and Python SDK servers.
    A2a {
        /// Keep-alive connections.
        #[arg(long, default_value_t = 16)]
        connections: usize,
        /// Seconds per measurement.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Which servers [default: all three].
        #[arg(long, value_enum, value_delimiter = ',')]
        peers: Vec<a2a::PeerKind>,
    },
    /// adapter-command/v1 task latency vs the runner run directly; hitl prompt latency.
    Adapter {
        #[arg(long, default_value_t = 200)]
        runs: usize,
    },
    /// Bus post → poll → ack cycles: warden vs Redis Streams (fsync always) vs a JSON file.
    Bus {
        /// Seconds per measurement.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
    },
    /// AIWG missions: dispatch → mission.completed through aiwg-peer, vs `sh -c true`.
    Missions {
        #[arg(long, default_value_t = 1000)]
        missions: usize,
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
        /// Then restart a server holding this many suspended missions and
        /// time its resync (0: skip).
        #[arg(long, default_value_t = 10_000)]
        suspended: usize,
    },
    /// spawn and store, with their default sizes.
    All,
}

fn main() -> anyhow::Result<()> {
    if cfg!(debug_assertions) {
        eprintln!("warning: this is a debug build; benchmark figures only count with --release");
    }
    let cli = Cli::parse();
    if let Bench::A2a {
        connections,
        seconds,
        peers,
    } = &cli.bench
    {
        let peers = if peers.is_empty() {
            vec![
                a2a::PeerKind::Warden,
                a2a::PeerKind::RustSdk,
                a2a::PeerKind::PythonSdk,
            ]
        } else {
            peers.clone()
        };
        return a2a::run(a2a::Options {
            connections: *connections,
            duration: Duration::from_secs_f64(*seconds),
            peers,
        });
    }
    if let Bench::Adapter { runs } = cli.bench {
        return adapter::run(runs);
    }
    if let Bench::Bus { seconds } = cli.bench {
        return bus::run(seconds);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
    match cli.bench {
        Bench::Spawn {
            runs,
            tier: spawn::Tier::Host,
        } => rt.block_on(spawn::run(runs)),
        Bench::Spawn {
            runs,
            tier: spawn::Tier::Confined,
        } => rt.block_on(spawn::confined(runs)),
        Bench::Store { changes, writers } => rt.block_on(store::run(changes, writers)),
        Bench::Missions {
            missions,
            concurrency,
            suspended,
        } => rt.block_on(async {
            if missions > 0 {
                missions::run(missions, concurrency).await?;
            }
            if suspended > 0 {
                println!();
                missions::resync(suspended).await?;
            }
            Ok(())
        }),
        Bench::All => {
            rt.block_on(spawn::run(2000))?;
            println!();
            rt.block_on(store::run(10_000, 8))
        }
        Bench::A2a { .. } | Bench::Adapter { .. } | Bench::Bus { .. } => Ok(()),
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
