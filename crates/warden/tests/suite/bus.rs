//! The scratchpad bus from the command line: many OS processes posting and
//! polling at once lose nothing and never share a delivery; the seed's
//! command names work as links; bad input changes nothing.

use std::collections::HashMap;
use std::os::unix::process::CommandExt;
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

/// CPU time (ms) a process has used, from /proc.
fn cpu_ms(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    (fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()) * 10
}

#[test]
fn a_long_poll_sleeps_until_a_message_arrives_from_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    bus_json(d, &["register", "waiter", "x"]);
    let mut poller = warden(d)
        .args(["bus", "--json", "poll", "waiter", "--wait", "30"])
        .env("WARDEN_HOME", d.join(".warden"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Let it settle into its wait, then check it is not spinning.
    let settle = Instant::now() + Duration::from_millis(800);
    while Instant::now() < settle {
        assert!(
            poller.try_wait().unwrap().is_none(),
            "the long poll returned early"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = cpu_ms(poller.id());
    std::thread::sleep(Duration::from_millis(500));
    let spent = cpu_ms(poller.id()) - before;
    assert!(
        spent <= 30,
        "a waiting poll used {spent} ms of CPU in 500 ms"
    );
    let posted_at = Instant::now();
    let m = bus_json(d, &["post", "waiter", "job", "x", r#"{"go":true}"#]);
    let out = poller.wait_with_output().unwrap();
    let took = posted_at.elapsed();
    assert!(out.status.success());
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["messages"][0]["id"], m["id"]);
    assert!(
        took < Duration::from_secs(5),
        "woke {took:?} after the post"
    );
    // And an empty wait ends on time with nothing.
    let start = Instant::now();
    let empty = bus_json(d, &["poll", "waiter", "--wait", "0.3"]);
    assert_eq!(empty["messages"], serde_json::json!([]));
    assert!(start.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn the_http_api_has_the_same_semantics() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let (status, _) = server
        .post(
            "/api/v1/bus/agents",
            serde_json::json!({"name": "remote", "capabilities": ["build"]}),
        )
        .await;
    assert_eq!(status, 201);
    // A long poll over HTTP, woken by a post.
    let waiting = {
        let client = server.client.clone();
        let url = server.url("/api/v1/bus/agents/remote/poll?wait=30");
        tokio::spawn(async move {
            let r = client.post(url).send().await.unwrap();
            r.json::<Value>().await.unwrap()
        })
    };
    let (status, m) = server
        .post(
            "/api/v1/bus/messages",
            serde_json::json!({"from": "user", "to": "remote", "type": "job", "capability": "build", "payload": {"n": 1}}),
        )
        .await;
    assert_eq!(status, 201, "{m}");
    let got = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the long poll did not wake")
        .unwrap();
    let delivered = &got["messages"][0];
    assert_eq!(delivered["id"], m["id"]);
    let id = delivered["id"].as_str().unwrap();
    let lease = delivered["lease_token"].as_str().unwrap();
    let (status, err) = server
        .post(
            &format!("/api/v1/bus/messages/{id}/ack"),
            serde_json::json!({"lease": "wrong", "result": 1}),
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("not_leased"))
    );
    let (status, done) = server
        .post(
            &format!("/api/v1/bus/messages/{id}/ack"),
            serde_json::json!({"lease": lease, "result": {"ok": true}}),
        )
        .await;
    assert_eq!(
        (status, done["status"].as_str()),
        (200, Some("completed")),
        "{done}"
    );
    let (status, _) = server
        .post("/api/v1/bus/messages", serde_json::json!({"from": "user", "to": "ghost", "type": "job", "capability": "x", "payload": 1}))
        .await;
    assert_eq!(status, 404);
    // Resource leases over HTTP: one holder, then a refusal naming it.
    let (status, l) = server
        .post(
            "/api/v1/bus/leases",
            serde_json::json!({"resource": "db", "holder": "remote", "ttl_seconds": 60}),
        )
        .await;
    assert_eq!((status, l["fencing"].as_u64()), (201, Some(1)), "{l}");
    let (status, err) = server
        .post(
            "/api/v1/bus/leases",
            serde_json::json!({"resource": "db", "holder": "user", "ttl_seconds": 60}),
        )
        .await;
    assert_eq!(status, 409, "{err}");
    let revoked = server
        .client
        .delete(server.url("/api/v1/bus/leases/db"))
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 200);
    let (_, counts) = server.get("/api/v1/bus/status").await;
    assert!(
        counts["agents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["agent"] == "remote" && a["completed"] == 1)
    );
}

#[test]
fn a_seed_scratchpad_imports_and_exports_without_loss() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let seed = serde_json::json!({
        "messages": [
            {"id": "msg_001", "from": "user", "to": "researcher", "type": "request", "capability": "code.search",
             "payload": {"query": "test"}, "ttl": 300000, "status": "pending", "ts": 1234567890, "reply_to": null},
            {"id": "msg_002", "from": "user", "to": "researcher", "type": "request", "capability": "code.read",
             "payload": {"path": "a.rs"}, "ttl": 0, "status": "delivered", "ts": 1234567891, "reply_to": null},
            {"id": "msg_003", "from": "researcher", "to": "user", "type": "response", "capability": "code.search",
             "payload": {}, "ttl": 0, "status": "completed", "ts": 1234567892, "reply_to": "msg_001", "result": {"hits": 2}},
            {"id": "msg_004", "from": "user", "to": "writer", "type": "request", "capability": "doc.write",
             "payload": "draft", "ttl": 0, "status": "failed", "ts": 1234567893, "reply_to": null, "error": "busy"}
        ],
        "seq": 4,
        "agents": {
            "researcher": {"last_poll": 1234567890, "capabilities": ["coder", "reader", "writer"]},
            "writer": {"last_poll": null, "capabilities": ["writer"]}
        }
    });
    std::fs::write(d.join("scratchpad.json"), seed.to_string()).unwrap();
    let file = d.join("scratchpad.json");
    let imported = bus_json(d, &["import", file.to_str().unwrap()]);
    assert_eq!(
        (imported["imported"].as_u64(), imported["skipped"].as_u64()),
        (Some(4), Some(0))
    );
    let again = bus_json(d, &["import", file.to_str().unwrap()]);
    assert_eq!(again["skipped"], 4, "importing twice adds nothing");
    let out = d.join("out.json");
    bus_json(d, &["export", out.to_str().unwrap()]);
    let exported: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let mut want = seed["messages"].clone();
    // A delivered message had no lease in the seed: it comes back pending.
    want[1]["status"] = "pending".into();
    assert_eq!(exported["messages"], want);
    assert_eq!(
        exported["agents"]["researcher"],
        seed["agents"]["researcher"]
    );
    assert_eq!(
        exported["agents"]["writer"]["capabilities"],
        serde_json::json!(["writer"])
    );
    let polled = bus_json(d, &["poll", "researcher"]);
    let ids: Vec<&str> = polled["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    // msg_001's TTL ran out long ago (ts is in ms): it is never delivered.
    assert_eq!(ids, ["msg_002"]);
    let pruned = bus_json(d, &["prune"]);
    assert_eq!(pruned["expired"], 1);
}

/// What the crash worker reported as done: posted ids and acked ids.
fn reported(log: &Path) -> (Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let (mut posted, mut acked) = (vec![], vec![]);
    for line in text.lines() {
        if let Some(json) = line.strip_prefix("posted ")
            && let Ok(v) = serde_json::from_str::<Value>(json)
        {
            posted.push(v["id"].as_str().unwrap().to_owned());
        } else if let Some(id) = line.strip_prefix("acked ") {
            acked.push(id.trim().to_owned());
        }
    }
    (posted, acked)
}

#[test]
fn every_operation_reported_done_survives_sigkill_at_random_points() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    bus_json(d, &["register", "w", "x"]);
    let log = d.join("log");
    let script = format!(
        r#"i=0
while :; do
  out=$("{bin}" bus --json post w job x "{{\"i\":$i}}") || exit 1
  echo "posted $out" >> "{log}"
  p=$("{bin}" bus poll w --limit 1) || exit 1
  id=$(echo "$p" | head -1 | cut -d' ' -f1)
  lease=$(echo "$p" | sed -n 's/.*lease=\([0-9a-f]*\).*/\1/p' | head -1)
  if [ -n "$lease" ]; then "{bin}" bus ack "$id" --lease "$lease" done > /dev/null && echo "acked $id" >> "{log}"; fi
  i=$((i+1))
done"#,
        bin = BIN,
        log = log.display()
    );
    let mut rounds_with_work = 0;
    for round in 0..12u64 {
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .env("WARDEN_HOME", d.join(".warden"))
            .process_group(0)
            .spawn()
            .unwrap();
        // A different point in the work each round.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos() as u64;
        std::thread::sleep(Duration::from_millis(60 + (nanos + round * 37) % 240));
        nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let _ = child.wait();
        let (posted, acked) = reported(&log);
        let pad = bus_json(d, &["export"]);
        let status: HashMap<String, String> = pad["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["id"].as_str().unwrap().to_owned(),
                    m["status"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        for id in &posted {
            assert!(
                status.contains_key(id),
                "round {round}: reported post {id} is gone"
            );
        }
        for id in &acked {
            assert_eq!(
                status.get(id).map(String::as_str),
                Some("completed"),
                "round {round}: reported ack {id}"
            );
        }
        if !posted.is_empty() {
            rounds_with_work += 1;
        }
    }
    let (posted, acked) = reported(&log);
    assert!(
        rounds_with_work > 0 && !posted.is_empty() && !acked.is_empty(),
        "the worker did nothing"
    );
}

#[test]
fn a_resource_has_one_holder_with_a_growing_fencing_token() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    bus_json(d, &["register", "a", "x"]);
    bus_json(d, &["register", "b", "x"]);
    let first = bus_json(
        d,
        &["lease", "create", "repo", "--holder", "a", "--ttl", "60"],
    );
    assert_eq!(
        (first["holder"].as_str(), first["fencing"].as_u64()),
        (Some("a"), Some(1))
    );
    let out = bus(
        d,
        &["lease", "create", "repo", "--holder", "b", "--ttl", "60"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("held by a"));
    let told = bus_json(d, &["poll", "a"]);
    assert_eq!(told["messages"][0]["capability"], "lease.create");
    assert_eq!(told["messages"][0]["payload"]["fencing"], 1);
    bus_json(d, &["lease", "revoke", "repo"]);
    let told = bus_json(d, &["poll", "a"]);
    assert_eq!(told["messages"][0]["capability"], "lease.revoke");
    let second = bus_json(
        d,
        &["lease", "create", "repo", "--holder", "b", "--ttl", "0.2"],
    );
    assert_eq!(second["fencing"], 2);
    // Once it runs out, the next holder needs no revoke.
    let until = second["expires_at"].as_u64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    std::thread::sleep(Duration::from_millis(until.saturating_sub(now) + 20));
    let third = bus_json(
        d,
        &["lease", "create", "repo", "--holder", "a", "--ttl", "60"],
    );
    assert_eq!(third["fencing"], 3);
    let out = bus(d, &["lease", "revoke", "nothing-here"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no lease on nothing-here"));
}

#[test]
fn the_bus_reads_its_limits_from_warden_toml() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_config(d, "[bus]\nmax_payload_bytes = 16\n");
    let out = bus(
        d,
        &[
            "post",
            "user",
            "note",
            "x",
            r#"{"far":"too long for sixteen"}"#,
        ],
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("16-byte cap"),
        "{out:?}"
    );
    write_config(d, "[bus]\nmax_attempts = 0\n");
    let out = bus(d, &["status"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bus.max_attempts"),
        "{out:?}"
    );
}

#[test]
fn fresh_homes_opened_by_many_processes_at_once_all_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_owned();
    let children: Vec<_> = (0..6)
        .map(|_| {
            warden(&d)
                .args(["bus", "status"])
                .env("WARDEN_HOME", d.join(".warden"))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn options_after_the_text_are_refused_not_swallowed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = bus(d, &["post", "user", "note", "x", "{}", "--ttl", "5"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("options go before"));
    let out = bus(d, &["ack", "msg_x", "done", "--lease", "t"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("options go before"));
}

#[tokio::test]
async fn a_live_lease_outlasts_the_ttl_and_prune_leaves_it_alone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_owned();
    bus_json(&d, &["register", "slow", "x"]);
    let m = bus_json(&d, &["post", "--ttl", "300", "slow", "job", "x", "{}"]);
    let got = bus_json(&d, &["poll", "slow"]);
    let lease = got["messages"][0]["lease_token"]
        .as_str()
        .unwrap()
        .to_owned();
    // Past the TTL, still under the lease.
    let ts = m["ts"].as_u64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    tokio::time::sleep(Duration::from_millis((ts + 320).saturating_sub(now))).await;
    let pruned = bus_json(&d, &["prune"]);
    assert_eq!(
        pruned["expired"], 0,
        "a message under a live lease was pruned"
    );
    // A long poll in the meantime does not spin on it.
    let start = Instant::now();
    let empty = bus_json(&d, &["poll", "slow", "--wait", "0.5"]);
    assert_eq!(empty["messages"], serde_json::json!([]));
    assert!(start.elapsed() >= Duration::from_millis(450));
    let id = m["id"].as_str().unwrap();
    let done = bus_json(&d, &["ack", "--lease", &lease, id, "late but held"]);
    assert_eq!(done["status"], "completed");
}
