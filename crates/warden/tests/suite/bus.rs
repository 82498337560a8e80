//! The scratchpad bus from the command line: many OS processes posting and
//! polling at once lose nothing and never share a delivery; the seed's
//! command names work as links; bad input changes nothing.

use std::collections::HashMap;
use std::path::Path;
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::harness::*;

fn bus(dir: &Path, args: &[&str]) -> Output {
    warden(dir)
        .arg("bus")
        .args(args)
        .env("WARDEN_HOME", dir.join(".warden"))
        .output()
        .unwrap()
}

fn bus_json(dir: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = bus(dir, &all);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn many_processes_post_and_poll_without_loss_or_shared_deliveries() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_owned();
    bus_json(&d, &["register", "worker", "build"]);
    let (posters, per_poster, consumers) = (4, 15, 3);
    let posted = Arc::new(Mutex::new(Vec::new()));
    let mut threads = Vec::new();
    for p in 0..posters {
        let (d, posted) = (d.clone(), Arc::clone(&posted));
        threads.push(std::thread::spawn(move || {
            for i in 0..per_poster {
                let payload = format!(r#"{{"poster":{p},"n":{i}}}"#);
                let m = bus_json(&d, &["post", "worker", "job", "build", &payload]);
                posted
                    .lock()
                    .unwrap()
                    .push(m["id"].as_str().unwrap().to_owned());
            }
        }));
    }
    let total = posters * per_poster;
    let delivered: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let deadline = Instant::now() + Duration::from_secs(120);
    for _ in 0..consumers {
        let (d, delivered) = (d.clone(), Arc::clone(&delivered));
        threads.push(std::thread::spawn(move || {
            loop {
                let done = delivered.lock().unwrap().len() >= total;
                if done || Instant::now() > deadline {
                    return;
                }
                let got = bus_json(&d, &["poll", "worker", "--limit", "4"]);
                for m in got["messages"].as_array().unwrap() {
                    let id = m["id"].as_str().unwrap().to_owned();
                    *delivered.lock().unwrap().entry(id.clone()).or_default() += 1;
                    let lease = m["lease_token"].as_str().unwrap();
                    let acked = bus_json(&d, &["ack", &id, "--lease", lease, "built"]);
                    assert_eq!(acked["status"], "completed");
                }
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    let delivered = delivered.lock().unwrap();
    let mut posted = posted.lock().unwrap().clone();
    posted.sort();
    let mut seen: Vec<String> = delivered.keys().cloned().collect();
    seen.sort();
    assert_eq!(
        seen, posted,
        "every posted message was delivered, none invented"
    );
    assert!(
        delivered.values().all(|n| *n == 1),
        "a message was delivered twice: {delivered:?}"
    );
    let status = bus_json(&d, &["status"]);
    let worker = status["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["agent"] == "worker")
        .unwrap()
        .clone();
    assert_eq!(worker["completed"], total);
    assert_eq!(worker["pending"], 0);
}

#[test]
fn the_seeds_command_names_work_as_links() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bin = d.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in [
        "agent-register",
        "a2a-post",
        "a2a-poll",
        "a2a-ack",
        "a2a-status",
    ] {
        std::os::unix::fs::symlink(BIN, bin.join(name)).unwrap();
    }
    let run = |name: &str, args: &[&str]| -> String {
        let out = std::process::Command::new(bin.join(name))
            .args(args)
            .env("WARDEN_HOME", d.join(".warden"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(
        run("agent-register", &["researcher", "coder", "reader"]).contains("registered researcher")
    );
    assert!(
        run(
            "a2a-post",
            &[
                "researcher",
                "request",
                "code.search",
                r#"{"query":"test"}"#
            ]
        )
        .starts_with("posted msg_")
    );
    let polled = run("a2a-poll", &["researcher"]);
    let lease = polled
        .split("lease=")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    let id = polled.split_whitespace().next().unwrap();
    assert!(run("a2a-ack", &[id, "--lease", lease, "found", "3"]).contains("completed"));
    assert!(run("a2a-status", &[]).contains("researcher"));
}

#[test]
fn bad_input_is_refused_with_the_reason_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (args, says) in [
        (
            vec!["post", "nobody", "request", "x", "{}"],
            "no agent named \"nobody\"",
        ),
        (
            vec!["post", "user", "request", "x", "{not json"],
            "payload: not valid JSON",
        ),
        (
            vec!["post", "user", "request", "x", "--ttl", "-5", "{}"],
            "ttl: -5 is negative",
        ),
        (
            vec!["ack", "msg_nope", "--lease", "t", "ok"],
            "no message \"msg_nope\"",
        ),
        (vec!["ack", "msg_nope", "ok"], "--lease TOKEN"),
        (vec!["poll", "nobody"], "no agent named \"nobody\""),
        (vec!["unregister", "nobody"], "no agent named \"nobody\""),
    ] {
        let out = bus(d, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // Over the 256 KiB cap, in many short arguments (one may not pass 128 KiB).
    let mut args = vec!["post", "user", "request", "x", "["];
    args.extend(std::iter::repeat_n("1,", 100_000));
    args.push("1]");
    let out = bus(d, &args);
    assert!(String::from_utf8_lossy(&out.stderr).contains("cap"));
    let status = bus_json(d, &["status"]);
    assert_eq!(status["agents"][0]["pending"], 0);
}
