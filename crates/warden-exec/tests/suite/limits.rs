//! Output cap, chunking and the environment boundary.

use std::time::Duration;

use warden_core::Outcome;
use warden_exec::{Stream, Supervisor, SupervisorConfig};

use super::harness::*;

#[tokio::test(flavor = "multi_thread")]
async fn output_over_the_cap_kills_the_group() {
    let sup = supervisor(1000);
    let mut s = spec(&["cat", "/dev/zero"]);
    s.max_output = 100_000;
    let (chunks, outcome) = finish(start(&sup, &s)).await;
    assert_eq!(outcome, Outcome::OutputLimit);
    let total: usize = chunks.iter().map(|c| c.data.len()).sum();
    assert_eq!(total, 100_000, "exactly the cap is kept");
}

#[tokio::test(flavor = "multi_thread")]
async fn chunks_are_bounded_and_sequenced() {
    let sup = Supervisor::new(SupervisorConfig {
        chunk_size: 1000,
        grace: Duration::from_secs(1),
        ..SupervisorConfig::default()
    })
    .unwrap();
    let (chunks, outcome) =
        finish(start(&sup, &sh("head -c 50000 /dev/zero; echo done >&2"))).await;
    assert_eq!(outcome, Outcome::Completed);
    assert!(chunks.iter().all(|c| c.data.len() <= 1000));
    let seqs: Vec<u64> = chunks.iter().map(|c| c.seq).collect();
    assert_eq!(seqs, (0..chunks.len() as u64).collect::<Vec<_>>());
    let out: usize = chunks
        .iter()
        .filter(|c| c.stream == Stream::Stdout)
        .map(|c| c.data.len())
        .sum();
    assert_eq!(out, 50_000);
    assert_eq!(text(&chunks, Stream::Stderr), "done\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn environment_is_minimal() {
    let sup = supervisor(1000);
    let mut s = spec(&["env"]);
    s.env = vec![("EXTRA".into(), "1".into())];
    let (chunks, outcome) = finish(start(&sup, &s)).await;
    assert_eq!(outcome, Outcome::Completed);
    let mut names: Vec<String> = text(&chunks, Stream::Stdout)
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_string()))
        .collect();
    names.sort();
    // The test process has CARGO_*, RUST_* and more; none of it may leak.
    let allowed = ["EXTRA", "HOME", "LANG", "PATH", "TERM", "WARDEN_RUN_ID"];
    assert!(
        names.iter().all(|n| allowed.contains(&n.as_str())),
        "{names:?}"
    );
    assert!(names.contains(&"WARDEN_RUN_ID".to_string()) && names.contains(&"PATH".to_string()));
}
