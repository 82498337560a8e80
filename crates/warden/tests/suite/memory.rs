//! Memory stays bounded whatever a child prints: the server's peak RSS
//! while a child prints far more than that must stay small.

use std::time::Duration;

use serde_json::json;

use super::harness::*;

fn peak_rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn server_memory_is_bounded_while_a_child_floods_output() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let before = peak_rss_kib(server.pid());
    // 96 MiB through the server into the store (under a 1 GiB cap), then an
    // endless stream cut by a 32 MiB cap.
    let big = server
        .start_run(json!({"argv": ["head", "-c", "100663296", "/dev/zero"], "max_output_bytes": 1073741824_u64}))
        .await;
    let done = server
        .wait_ended(big["id"].as_str().unwrap(), Duration::from_secs(240))
        .await;
    assert_eq!(done["outcome"], json!({"status": "completed"}));
    assert_eq!(done["output_bytes"], 100663296);
    let endless = server
        .start_run(json!({"argv": ["cat", "/dev/zero"], "max_output_bytes": 33554432}))
        .await;
    let done = server
        .wait_ended(endless["id"].as_str().unwrap(), Duration::from_secs(240))
        .await;
    assert_eq!(done["outcome"], json!({"status": "output_limit"}));
    let after = peak_rss_kib(server.pid());
    eprintln!("server peak RSS: {before} KiB before, {after} KiB after 128 MiB of output");
    assert!(
        after < before + 32 * 1024,
        "peak RSS grew from {before} KiB to {after} KiB"
    );
}
