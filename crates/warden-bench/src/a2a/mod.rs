//! `a2a`: A2A `SendMessage` and streaming sends on an echo agent, against
//! warden, the official Rust SDK server (`benches/a2a-rust-sdk`) and the
//! official Python SDK server (`benches/a2a_python_echo.py`), each started
//! here on loopback and loaded by the same generator in the same run. Then
//! a warden instance whose runtime is a process (`/bin/echo {text}`), beside
//! the supervisor's own spawn rate at the same concurrency.

pub(crate) mod load;
pub(crate) mod peers;

use std::time::{Duration, Instant};

use anyhow::Context;
use warden_core::RunSpec;
use warden_exec::{Supervisor, SupervisorConfig};

use crate::percentile;
use load::{Measured, Workload};
use peers::Peer;
pub use peers::PeerKind;

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    pub connections: usize,
    pub duration: Duration,
    pub peers: Vec<PeerKind>,
}

fn send(method: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{{"message":{{"messageId":"m-{{n}}","role":"ROLE_USER","parts":[{{"text":"hello {{n}}"}}]}}}}}}"#
    )
}

fn workload(path: &str, method: &str) -> Workload {
    Workload {
        path: path.to_owned(),
        body: send(method),
        expect: "TASK_STATE_COMPLETED",
    }
}

/// A measured row of the report.
struct Row {
    name: String,
    m: Measured,
    cpu_per_request: Duration,
}

fn measure(peer: &Peer, work: &Workload, o: &Options) -> anyhow::Result<Row> {
    let cpu0 = peer.cpu()?;
    let m = load::run(peer.addr, work, o.connections, o.duration)?;
    let cpu = peer.cpu()?.saturating_sub(cpu0);
    if let Some(f) = &m.first_failure {
        eprintln!(
            "  {}: {} failed answers; first: {f}",
            peer.kind.name(),
            m.failures
        );
    }
    let cpu_per_request = if m.requests == 0 {
        Duration::ZERO
    } else {
        cpu / u32::try_from(m.requests).unwrap_or(u32::MAX)
    };
    Ok(Row {
        name: peer.kind.name().to_owned(),
        m,
        cpu_per_request,
    })
}

fn print_table(title: &str, rows: &[Row]) {
    println!("{title}");
    println!(
        "  {:<12} {:>10} {:>9} {:>9} {:>16} {:>9}",
        "server", "req/s", "p50 ms", "p99 ms", "CPU µs/request", "failures"
    );
    for r in rows {
        println!(
            "  {:<12} {:>10.0} {:>9.2} {:>9.2} {:>16.0} {:>9}",
            r.name,
            r.m.rate(),
            percentile(&r.m.latencies, 50.0).as_secs_f64() * 1e3,
            percentile(&r.m.latencies, 99.0).as_secs_f64() * 1e3,
            r.cpu_per_request.as_secs_f64() * 1e6,
            r.m.failures,
        );
    }
    let Some(w) = rows.iter().find(|r| r.name == PeerKind::Warden.name()) else {
        return;
    };
    for other in rows.iter().filter(|r| r.name != w.name) {
        println!(
            "  warden / {}: {:.2}× req/s, {:.2}× CPU per request",
            other.name,
            w.m.rate() / other.m.rate(),
            w.cpu_per_request.as_secs_f64() / other.cpu_per_request.as_secs_f64().max(1e-9),
        );
    }
}

pub fn run(o: Options) -> anyhow::Result<()> {
    println!(
        "a2a: {} keep-alive connections, {:.0} s per measurement (after 1 s warm-up), echo agents",
        o.connections,
        o.duration.as_secs_f64()
    );
    let mut peers = Vec::new();
    for kind in &o.peers {
        peers.push(Peer::start(*kind)?);
    }
    let warm = Options {
        duration: Duration::from_secs(1),
        ..o.clone()
    };
    let mut blocking = Vec::new();
    let mut streaming = Vec::new();
    for peer in &peers {
        let path = peer.kind.rpc_path();
        load::run(
            peer.addr,
            &workload(path, "SendMessage"),
            o.connections,
            warm.duration,
        )?;
        blocking.push(measure(peer, &workload(path, "SendMessage"), &o)?);
        streaming.push(measure(peer, &workload(path, "SendStreamingMessage"), &o)?);
    }
    print_table("SendMessage (blocking), JSON-RPC 1.0:", &blocking);
    if let Some(w) = blocking.iter().find(|r| r.name == "warden")
        && let Some(sdk) = blocking.iter().find(|r| r.name == "rust-sdk")
    {
        let p99 = percentile(&w.m.latencies, 99.0);
        let met = w.m.rate() >= sdk.m.rate() && p99 < Duration::from_millis(5);
        println!(
            "  target: warden ≥ rust-sdk req/s with p99 < 5 ms: {}",
            if met { "met" } else { "MISSED" }
        );
    }
    println!();
    print_table(
        "SendStreamingMessage (to the end of the stream), JSON-RPC 1.0:",
        &streaming,
    );

    if let Some(warden) = peers.iter().find(|p| p.kind == PeerKind::Warden) {
        let tasks = warden.total_tasks()?;
        println!("  every task warden answered is in its store: {tasks} tasks recorded");
        println!();
        process_instance(warden, &o)?;
    }
    drop(peers);
    Ok(())
}

/// A warden instance whose runtime is `/bin/echo {text}` beside the
/// supervisor spawning `/bin/echo` directly, at the same concurrency.
fn process_instance(warden: &Peer, o: &Options) -> anyhow::Result<()> {
    let row = measure(warden, &workload("/agents/proc/", "SendMessage"), o)?;
    let supervisor = Supervisor::new(SupervisorConfig::default()).context("supervisor")?;
    let spec = RunSpec::new(
        vec!["/bin/echo".into(), "hello".into()],
        "/".into(),
        Duration::from_secs(30),
        1 << 20,
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
    let supervisor = std::sync::Arc::new(supervisor);
    let connections = o.connections;
    let duration = o.duration;
    let spawn_rate = rt.block_on(async move {
        let deadline = Instant::now() + duration;
        let start = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..connections {
            let (supervisor, spec) = (supervisor.clone(), spec.clone());
            tasks.push(tokio::spawn(async move {
                let mut n = 0u64;
                while Instant::now() < deadline {
                    crate::spawn::supervised(&supervisor, &spec).await?;
                    n += 1;
                }
                anyhow::Ok(n)
            }));
        }
        let mut runs = 0;
        for t in tasks {
            runs += t.await??;
        }
        anyhow::Ok(runs as f64 / start.elapsed().as_secs_f64())
    })?;
    println!(
        "Process runtime: instance [\"/bin/echo\", \"{{text}}\"], {} connections:",
        o.connections
    );
    println!(
        "  warden SendMessage        {:>8.0} req/s  (p50 {:.2} ms, p99 {:.2} ms, {} failures)",
        row.m.rate(),
        percentile(&row.m.latencies, 50.0).as_secs_f64() * 1e3,
        percentile(&row.m.latencies, 99.0).as_secs_f64() * 1e3,
        row.m.failures
    );
    println!(
        "  supervisor alone, /bin/echo {spawn_rate:>8.0} runs/s (same concurrency, no HTTP, no store)"
    );
    println!(
        "  ratio: {:.2}× of the raw spawn rate",
        row.m.rate() / spawn_rate
    );
    Ok(())
}
