//! Helpers shared by the supervisor tests.

use std::time::Duration;

use warden_core::{Outcome, RunId, RunSpec};
use warden_exec::{OutputChunk, RunEvent, RunHandle, Supervisor, SupervisorConfig};

pub fn supervisor(grace_ms: u64) -> Supervisor {
    Supervisor::new(SupervisorConfig {
        grace: Duration::from_millis(grace_ms),
        ..SupervisorConfig::default()
    })
    .unwrap()
}

pub fn spec(argv: &[&str]) -> RunSpec {
    RunSpec::new(
        argv.iter().map(|s| s.to_string()).collect(),
        "/".into(),
        Duration::from_secs(30),
        1 << 20,
    )
}

pub fn sh(script: &str) -> RunSpec {
    spec(&["sh", "-c", script])
}

pub fn start(sup: &Supervisor, spec: &RunSpec) -> RunHandle {
    sup.spawn(&RunId::new().to_string(), spec).unwrap()
}

/// Drains a run to its end, failing the test if that takes over 60 s.
pub async fn finish(mut run: RunHandle) -> (Vec<OutputChunk>, Outcome) {
    tokio::time::timeout(Duration::from_secs(60), async move {
        let mut chunks = Vec::new();
        while let Some(ev) = run.next().await {
            match ev {
                RunEvent::Output(c) => chunks.push(c),
                RunEvent::Finished(o) => return (chunks, o),
            }
        }
        panic!("event stream ended without Finished");
    })
    .await
    .expect("run did not finish within 60 s")
}

pub fn text(chunks: &[OutputChunk], stream: warden_exec::Stream) -> String {
    let bytes: Vec<u8> = chunks
        .iter()
        .filter(|c| c.stream == stream)
        .flat_map(|c| c.data.clone())
        .collect();
    String::from_utf8(bytes).unwrap()
}

/// Reads a pid printed on the first line of stdout.
pub fn first_pid(chunks: &[OutputChunk]) -> i32 {
    text(chunks, warden_exec::Stream::Stdout)
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .expect("child printed no pid")
}
