//! The AIWG executor contract against a conformance peer (`aiwg-peer`, the
//! orchestrator side served on loopback): registration on both routes, the
//! executor WebSocket with `executor.resync` first on every connection,
//! reconnects, a refused registration, and the status route.

use std::time::Duration;

use aiwg_peer::{Peer, Received};
use serde_json::Value;

use super::harness::*;

const WAIT: Duration = Duration::from_secs(20);

fn resyncs(frames: &[Received]) -> Vec<u32> {
    frames
        .iter()
        .filter(|r| r.frame["event"] == "executor.resync")
        .map(|r| r.connection)
        .collect()
}

fn serve_with(dir: &std::path::Path, peer: &Peer) -> Server {
    Server::start_with(dir, &[("AIWG_SERVE_ENDPOINT", peer.base().as_str())])
}

async fn status(server: &Server) -> Value {
    let (code, body) = server.get("/api/v1/aiwg/status").await;
    assert_eq!(code, 200);
    body
}

#[tokio::test]
async fn without_an_endpoint_the_integration_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    assert_eq!(
        status(&server).await,
        serde_json::json!({"configured": false})
    );
    let (code, body) = server
        .post("/api/v1/aiwg/reconnect", serde_json::json!({}))
        .await;
    assert_eq!(code, 503, "{body}");
    assert!(!dir.path().join(".warden/identity").exists());
}

#[tokio::test]
async fn registers_on_both_routes_and_resyncs_first_on_every_connection() {
    let peer = Peer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = serve_with(dir.path(), &peer);
    peer.wait_for(WAIT, "the first resync", |f| resyncs(f) == [1])
        .await;
    let identity = std::fs::read_to_string(dir.path().join(".warden/identity")).unwrap();
    let executor_id = identity.trim();
    let regs = peer.registrations();
    assert_eq!(regs.len(), 1);
    assert_eq!(regs[0]["executor_id"], executor_id);
    assert_eq!(regs[0]["spec_version"], "1.0.0");
    assert_eq!(regs[0]["transport_endpoints"]["rest"], server.base);
    let caps: Vec<&str> = regs[0]["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(caps.contains(&"isolation:host"), "{caps:?}");
    assert!(caps.contains(&"hitl"), "{caps:?}");
    assert!(caps.contains(&"resumable"), "{caps:?}");
    // Nothing is claimed that is not built or proven here.
    for unproven in ["isolation:vm", "isolation:container"] {
        assert!(!caps.contains(&unproven), "{caps:?}");
    }
    let sandbox = peer.sandbox_registrations();
    assert_eq!(sandbox.len(), 1);
    assert_eq!(sandbox[0]["instance_id"], executor_id, "the same identity");

    let st = status(&server).await;
    assert_eq!(st["configured"], true);
    assert_eq!(st["registered"], true);
    assert_eq!(st["connected"], true);
    assert_eq!(st["executor_id"], executor_id);
    assert_eq!(st["connections"], 1);
    let token = peer.token(executor_id).unwrap();
    assert!(!st.to_string().contains(&token), "the token is never shown");

    // A dropped connection is opened again (after the backoff), resync first.
    peer.drop_connection();
    peer.wait_for(WAIT, "a resync on a second connection", |f| {
        resyncs(f) == [1, 2]
    })
    .await;
    // The reconnect route skips the wait.
    let asked = std::time::Instant::now();
    let (code, _) = server
        .post("/api/v1/aiwg/reconnect", serde_json::json!({}))
        .await;
    assert_eq!(code, 202);
    peer.wait_for(WAIT, "a resync on a third connection", |f| {
        resyncs(f) == [1, 2, 3]
    })
    .await;
    assert!(
        asked.elapsed() < Duration::from_millis(800),
        "reconnect waited {:?}, the backoff is at least 800 ms",
        asked.elapsed()
    );
    assert_eq!(peer.violations(), Vec::<String>::new());
    assert_eq!(peer.registrations().len(), 1, "the token stayed valid");

    // The token never reaches the log.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "log") {
            let log = std::fs::read_to_string(&path).unwrap();
            assert!(!log.contains(&token), "token in {}", path.display());
        }
    }
}

#[tokio::test]
async fn a_refused_registration_is_reported_and_the_rest_keeps_working() {
    let peer = Peer::start().await.unwrap();
    peer.refuse_registration(Some(404));
    let dir = tempfile::tempdir().unwrap();
    let server = serve_with(dir.path(), &peer);
    let deadline = std::time::Instant::now() + WAIT;
    let st = loop {
        let st = status(&server).await;
        if st["executor_register_error"].is_string() {
            break st;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no registration error: {st}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        st["executor_register_error"]
            .as_str()
            .unwrap()
            .contains("404"),
        "{st}"
    );
    assert_eq!(st["registered"], false);
    assert_eq!(st["connected"], false);
    assert_eq!(st["sandbox_register_error"], Value::Null, "{st}");
    let (code, _) = server.get("/healthz").await;
    assert_eq!(code, 200);
    assert!(!peer.connected());
    // Once aiwg serve accepts, a reconnect registers and connects at once.
    peer.refuse_registration(None);
    let (code, _) = server
        .post("/api/v1/aiwg/reconnect", serde_json::json!({}))
        .await;
    assert_eq!(code, 202);
    peer.wait_for(WAIT, "the resync after registering", |f| resyncs(f) == [1])
        .await;
    assert_eq!(
        status(&server).await["executor_register_error"],
        Value::Null
    );
}

#[tokio::test]
async fn the_identity_and_token_survive_a_restart() {
    let peer = Peer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let first = serve_with(dir.path(), &peer);
    peer.wait_for(WAIT, "the first resync", |f| resyncs(f) == [1])
        .await;
    drop(first);
    let _second = serve_with(dir.path(), &peer);
    peer.wait_for(WAIT, "the resync after the restart", |f| {
        resyncs(f) == [1, 2]
    })
    .await;
    let regs = peer.registrations();
    assert_eq!(regs.len(), 2);
    assert_eq!(regs[0]["executor_id"], regs[1]["executor_id"]);
    assert_eq!(peer.violations(), Vec::<String>::new());
}

/// Events of `mission`, in the order received: `(connection, event, data)`.
fn mission_events(frames: &[Received], mission: &str) -> Vec<(u32, String, Value)> {
    frames
        .iter()
        .filter(|r| r.frame["mission_id"] == mission)
        .map(|r| {
            (
                r.connection,
                r.frame["event"].as_str().unwrap().to_owned(),
                r.frame["data"].clone(),
            )
        })
        .collect()
}

/// `mission`'s events (name, data) that came on `connection`.
fn events_on(frames: &[Received], mission: &str, connection: u32) -> Vec<(String, Value)> {
    mission_events(frames, mission)
        .into_iter()
        .filter(|(c, _, _)| *c == connection)
        .map(|(_, e, d)| (e, d))
        .collect()
}

/// Dispatches `mission`, a program that asks `Proceed? [y/N]` and prints
/// `got <answer>`; the data of its `mission.hitl_required`.
async fn dispatch_a_question(peer: &Peer, server: &Server, exec: &str, mission: &str) -> Value {
    let objective = "printf 'Proceed? [y/N] '; read a; echo \"got $a\"";
    let (code, _) = peer
        .dispatch(&server.base, exec, "s", dispatch_body(mission, objective))
        .await;
    assert_eq!(code, 202);
    let frames = peer
        .wait_for(WAIT, "the prompt", |f| {
            lifecycle(f, mission).contains(&"mission.hitl_required".to_owned())
        })
        .await;
    let asked = mission_events(&frames, mission)
        .into_iter()
        .find(|(_, e, _)| e == "mission.hitl_required")
        .unwrap()
        .2;
    assert_eq!(asked["prompt"], "Proceed? [y/N]");
    asked
}

fn ended(frames: &[Received], mission: &str) -> bool {
    mission_events(frames, mission).iter().any(|(_, e, _)| {
        matches!(
            e.as_str(),
            "mission.completed" | "mission.failed" | "mission.aborted"
        )
    })
}

/// The event names of `mission`, progress collapsed to one entry.
fn lifecycle(frames: &[Received], mission: &str) -> Vec<String> {
    let mut names: Vec<String> = mission_events(frames, mission)
        .into_iter()
        .map(|(_, e, _)| e)
        .collect();
    names.dedup();
    names
}

fn dispatch_body(id: &str, objective: &str) -> Value {
    serde_json::json!({
        "mission_id": id, "objective": objective, "completion": "the command exits 0",
        "long_running": false,
        "executor_filter": {"executor_id": null, "capabilities": [], "agent_id": null},
        "metadata": {"issue": 5}
    })
}

/// Waits for `mission.started` of `mission`.
async fn wait_started(peer: &Peer, mission: &str) {
    peer.wait_for(WAIT, &format!("{mission} to start"), |f| {
        lifecycle(f, mission).contains(&"mission.started".to_owned())
    })
    .await;
}

/// A registered, connected server and its executor id.
async fn connected(dir: &std::path::Path, peer: &Peer) -> (Server, String) {
    let server = serve_with(dir, peer);
    peer.wait_for(WAIT, "the first resync", |f| !resyncs(f).is_empty())
        .await;
    let id = std::fs::read_to_string(dir.join(".warden/identity"))
        .unwrap()
        .trim()
        .to_owned();
    (server, id)
}

#[tokio::test]
async fn dispatched_missions_report_their_whole_life() {
    let peer = Peer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (server, exec) = connected(dir.path(), &peer).await;

    let (code, body) = peer
        .dispatch(
            &server.base,
            &exec,
            "s-1",
            dispatch_body("m-ok", "echo one; echo two"),
        )
        .await;
    assert_eq!(code, 202, "{body}");
    assert_eq!(body["mission_id"], "m-ok");
    assert_eq!(body["executor_id"], exec.as_str());
    assert_eq!(body["status"], "assigned");
    let frames = peer
        .wait_for(WAIT, "m-ok to end", |f| ended(f, "m-ok"))
        .await;
    assert_eq!(
        lifecycle(&frames, "m-ok"),
        [
            "mission.assigned",
            "mission.started",
            "mission.progress",
            "mission.completed"
        ]
    );
    let events = mission_events(&frames, "m-ok");
    let done = &events.last().unwrap().2;
    assert_eq!(done["exit_code"], 0);
    assert_eq!(done["summary"], "two");

    let (code, _) = peer
        .dispatch(
            &server.base,
            &exec,
            "s-1",
            dispatch_body("m-fail", "echo out; exit 3"),
        )
        .await;
    assert_eq!(code, 202);
    let frames = peer
        .wait_for(WAIT, "m-fail to end", |f| ended(f, "m-fail"))
        .await;
    let events = mission_events(&frames, "m-fail");
    let (_, name, data) = events.last().unwrap();
    assert_eq!(name, "mission.failed");
    assert_eq!(data["reason"], "non_zero_exit");
    assert_eq!(data["exit_code"], 3);
    assert_eq!(lifecycle(&frames, "m-fail")[2], "mission.progress");

    // The objective sees its mission.
    let check_env = "test \"$AIWG_MISSION_ID\" = m-env && test \"$AIWG_MISSION_COMPLETION\" = 'the command exits 0' && test -n \"$AIWG_MISSION_METADATA\"";
    peer.dispatch(
        &server.base,
        &exec,
        "s-1",
        dispatch_body("m-env", check_env),
    )
    .await;
    let frames = peer
        .wait_for(WAIT, "m-env to end", |f| ended(f, "m-env"))
        .await;
    assert_eq!(
        lifecycle(&frames, "m-env").last().unwrap(),
        "mission.completed"
    );

    // An operator's kill.
    peer.dispatch(
        &server.base,
        &exec,
        "s-1",
        dispatch_body("m-kill", "sleep 30"),
    )
    .await;
    wait_started(&peer, "m-kill").await;
    let resp = server
        .client
        .delete(server.url("/api/v1/missions/m-kill"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    let frames = peer
        .wait_for(WAIT, "m-kill to end", |f| ended(f, "m-kill"))
        .await;
    let events = mission_events(&frames, "m-kill");
    let (_, name, data) = events.last().unwrap();
    assert_eq!(name, "mission.aborted");
    assert_eq!(data["aborted_by"], "operator");

    // The status route answers the contract's shape (checked by the peer).
    let (code, st) = peer.mission_status(&server.base, "", "m-ok").await;
    assert_eq!(code, 200, "{st}");
    assert_eq!(st["state"], "done");
    assert_eq!(st["exit_code"], 0);
    let kinds: Vec<&str> = st["recent_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"mission.assigned"));
    assert_eq!(kinds.last(), Some(&"mission.completed"));
    let (code, _) = peer.mission_status(&server.base, "", "m-none").await;
    assert_eq!(code, 404);

    // A retried dispatch starts nothing again; another body is a conflict.
    let (code, again) = peer
        .dispatch(
            &server.base,
            &exec,
            "s-1",
            dispatch_body("m-ok", "echo one; echo two"),
        )
        .await;
    assert_eq!(code, 202, "{again}");
    let (code, _) = peer
        .dispatch(
            &server.base,
            &exec,
            "s-1",
            dispatch_body("m-ok", "rm -rf /"),
        )
        .await;
    assert_eq!(code, 409);
    let starts = mission_events(&peer.received(), "m-ok")
        .into_iter()
        .filter(|(_, e, _)| e == "mission.started")
        .count();
    assert_eq!(starts, 1);

    assert_eq!(peer.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn bad_dispatches_are_refused_with_the_contract_s_codes() {
    let peer = Peer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (server, exec) = connected(dir.path(), &peer).await;
    let (code, _) = peer
        .dispatch_with_token(
            &server.base,
            "s",
            "wrong-token",
            dispatch_body("m-1", "true"),
        )
        .await;
    assert_eq!(code, 401);
    let (code, _) = peer
        .dispatch_with_token(&server.base, "s", "", dispatch_body("m-1", "true"))
        .await;
    assert_eq!(code, 401);
    let mut unknown = dispatch_body("m-2", "true");
    unknown["executor_filter"]["agent_id"] = serde_json::json!("nobody");
    let (code, body) = peer.dispatch(&server.base, &exec, "s", unknown).await;
    assert_eq!(code, 404, "{body}");
    let mut no_completion = dispatch_body("m-4", "true");
    no_completion.as_object_mut().unwrap().remove("completion");
    let (code, body) = peer.dispatch(&server.base, &exec, "s", no_completion).await;
    assert_eq!(code, 400, "{body}");
    // None of them became a mission.
    assert!(
        peer.received()
            .iter()
            .all(|r| r.frame["event"] == "executor.resync")
    );
}

#[tokio::test]
async fn events_of_an_outage_arrive_in_order_after_reconnecting() {
    let peer = Peer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (server, exec) = connected(dir.path(), &peer).await;
    peer.drop_connection();
    // Dispatched and finished while the WebSocket is down (the backoff
    // before reconnecting is at least 800 ms): first see warden notice.
    let deadline = std::time::Instant::now() + WAIT;
    while status(&server).await["connected"] != false {
        assert!(
            std::time::Instant::now() < deadline,
            "warden never saw the drop"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (code, _) = peer
        .dispatch(&server.base, &exec, "s", dispatch_body("m-out", "echo hi"))
        .await;
    assert_eq!(code, 202);
    let frames = peer
        .wait_for(WAIT, "m-out's events on the second connection", |f| {
            ended(f, "m-out")
        })
        .await;
    let events = mission_events(&frames, "m-out");
    assert!(events.iter().all(|(c, _, _)| *c == 2), "{events:?}");
    assert_eq!(
        lifecycle(&frames, "m-out"),
        [
            "mission.assigned",
            "mission.started",
            "mission.progress",
            "mission.completed"
        ]
    );
    // Resync came first on that connection.
    let second: Vec<&Received> = frames.iter().filter(|r| r.connection == 2).collect();
    assert_eq!(second[0].frame["event"], "executor.resync");
    assert_eq!(peer.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn a_prompt_is_offered_and_the_orchestrator_s_answer_reaches_the_program() {
    let peer = Peer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (server, exec) = connected(dir.path(), &peer).await;
    let asked = dispatch_a_question(&peer, &server, &exec, "m-ask").await;
    let hitl_id = asked["hitl_id"].as_str().unwrap().to_owned();
    let (_, st) = peer.mission_status(&server.base, "", "m-ask").await;
    assert_eq!(st["state"], "hitl-required");

    let answer = |hitl: &str, field: &str, text: &str| {
        serde_json::json!({
            "event": "mission.hitl_responded", "executor_id": exec, "mission_id": "m-ask",
            "ts": "2026-11-30T07:00:00.000Z", "data": {"hitl_id": hitl, field: text}
        })
    };
    // An answer to another prompt goes nowhere, one that breaks the HITL
    // route's checks (a control character) is refused and claims nothing;
    // the real one (in the seed's `text` field) reaches the program.
    peer.send(answer("hitl-unknown", "response", "n")).unwrap();
    peer.send(answer(&hitl_id, "response", "n\u{1b}[2J"))
        .unwrap();
    peer.send(answer(&hitl_id, "text", "y")).unwrap();
    let frames = peer
        .wait_for(WAIT, "m-ask to end", |f| ended(f, "m-ask"))
        .await;
    let events = mission_events(&frames, "m-ask");
    let (_, name, data) = events.last().unwrap();
    assert_eq!(name, "mission.completed", "{events:?}");
    assert_eq!(data["summary"], "got y");
    assert_eq!(peer.violations(), Vec::<String>::new());
}

/// Sends SIGTERM and waits for the server to exit without blocking the
/// runtime (the peer serves on it).
async fn terminate(server: &mut Server) {
    let pid = server.pid();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let deadline = std::time::Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "warden did not stop");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn a_mission_is_suspended_at_shutdown_and_resumed_after_a_restart() {
    let peer = Peer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (mut server, exec) = connected(dir.path(), &peer).await;
    // Long-running: this executor is resumable, so it is taken.
    // Runs until the test creates `go` beside it (in the workspace).
    let mut body = dispatch_body(
        "m-live",
        "while [ ! -e go ]; do sleep 0.05; done; echo done",
    );
    body["long_running"] = serde_json::json!(true);
    let (code, answer) = peer.dispatch(&server.base, &exec, "s", body).await;
    assert_eq!(code, 202, "{answer}");
    wait_started(&peer, "m-live").await;
    terminate(&mut server).await;
    // Suspended (its shim goes on), delivered, then deregistered.
    let events = mission_events(&peer.received(), "m-live");
    let (_, name, data) = events.last().unwrap();
    assert_eq!(name, "mission.suspended", "{events:?}");
    assert_eq!(data["reason"], "mgmt_server_shutdown");
    let checkpoint = data["checkpoint_id"].clone();
    assert_eq!(peer.deregistrations(), std::slice::from_ref(&exec));

    let _server = serve_with(dir.path(), &peer);
    peer.wait_for(WAIT, "m-live resumed", |f| {
        mission_events(f, "m-live")
            .iter()
            .any(|(c, e, _)| *c == 2 && e == "mission.resumed")
    })
    .await;
    std::fs::write(dir.path().join("go"), "").unwrap();
    let frames = peer
        .wait_for(WAIT, "m-live to end after the restart", |f| {
            ended(f, "m-live")
        })
        .await;
    let second: Vec<&Received> = frames.iter().filter(|r| r.connection == 2).collect();
    assert_eq!(second[0].frame["event"], "executor.resync");
    assert_eq!(
        second[0].frame["data"]["owned_mission_ids"],
        serde_json::json!(["m-live"])
    );
    let after = events_on(&frames, "m-live", 2);
    assert_eq!(after[0].0, "mission.reconnected", "{after:?}");
    assert_eq!(after[0].1["checkpoint_id"], checkpoint);
    assert_eq!(after[1].0, "mission.resumed");
    assert_eq!(after[1].1["resumed_from"], "suspended");
    let (last, data) = after.last().unwrap();
    assert_eq!(last, "mission.completed", "{after:?}");
    assert_eq!(data["summary"], "done");
    assert_eq!(peer.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn a_mission_that_ends_while_the_server_is_down_reports_its_real_end() {
    let peer = Peer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (mut server, exec) = connected(dir.path(), &peer).await;
    peer.dispatch(
        &server.base,
        &exec,
        "s",
        dispatch_body("m-gone", "sleep 0.3; exit 4"),
    )
    .await;
    wait_started(&peer, "m-gone").await;
    terminate(&mut server).await;
    // Wait until its shim recorded the end, while no server runs.
    let missions = dir.path().join(".warden/missions");
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let done = std::fs::read_dir(&missions)
            .unwrap()
            .any(|d| d.unwrap().path().join("status.json").exists());
        if done {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the shim never finished"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _server = serve_with(dir.path(), &peer);
    let frames = peer
        .wait_for(WAIT, "m-gone's real end", |f| ended(f, "m-gone"))
        .await;
    let second: Vec<&Received> = frames.iter().filter(|r| r.connection == 2).collect();
    assert_eq!(second[0].frame["event"], "executor.resync");
    assert_eq!(
        second[0].frame["data"]["owned_mission_ids"],
        serde_json::json!([]),
        "a mission that ended is not owned"
    );
    let events = mission_events(&frames, "m-gone");
    let (conn, name, data) = events.last().unwrap();
    assert_eq!((*conn, name.as_str()), (2, "mission.failed"), "{events:?}");
    assert_eq!(data["exit_code"], 4);
    assert!(events.iter().all(|(_, e, _)| e != "mission.resumed"));
    assert_eq!(peer.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn a_mission_past_its_output_cap_is_killed_and_says_so() {
    let peer = Peer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "[runs]\ndefault_max_output_bytes = 4096\n");
    let (server, exec) = connected(dir.path(), &peer).await;
    peer.dispatch(&server.base, &exec, "s", dispatch_body("m-loud", "yes"))
        .await;
    let frames = peer
        .wait_for(WAIT, "m-loud to end", |f| ended(f, "m-loud"))
        .await;
    let events = mission_events(&frames, "m-loud");
    let (_, name, data) = events.last().unwrap();
    assert_eq!(name, "mission.failed", "{events:?}");
    assert_eq!(data["reason"], "output_limit");
    // Exactly the cap was kept.
    let missions = dir.path().join(".warden/missions");
    let run = std::fs::read_dir(&missions)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(std::fs::metadata(run.join("output")).unwrap().len(), 4096);
    assert_eq!(peer.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn a_prompt_open_at_shutdown_is_offered_again_after_the_restart() {
    let peer = Peer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (mut server, exec) = connected(dir.path(), &peer).await;
    let first = dispatch_a_question(&peer, &server, &exec, "m-wait").await;
    terminate(&mut server).await;
    let _server = serve_with(dir.path(), &peer);
    // Resumed, then the same prompt offered again under the same id.
    let frames = peer
        .wait_for(WAIT, "the prompt offered again", |f| {
            mission_events(f, "m-wait")
                .iter()
                .any(|(c, e, _)| *c == 2 && e == "mission.hitl_required")
        })
        .await;
    let again = events_on(&frames, "m-wait", 2);
    let names: Vec<&str> = again.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(
        names,
        [
            "mission.reconnected",
            "mission.resumed",
            "mission.hitl_required"
        ]
    );
    assert_eq!(again[2].1["hitl_id"], first["hitl_id"]);
    assert_eq!(again[2].1["prompt"], "Proceed? [y/N]");
    answer_yes_and_see_it_complete(&peer, &_server, &exec, "m-wait", &first["hitl_id"]).await;
}

/// The mission waits on a prompt: answered `y` from aiwg serve, it runs
/// again and completes, having read the answer (`got y`).
async fn answer_yes_and_see_it_complete(
    peer: &Peer,
    server: &Server,
    exec: &str,
    mission: &str,
    hitl_id: &Value,
) {
    let (_, st) = peer.mission_status(&server.base, "", mission).await;
    assert_eq!(st["state"], "hitl-required");
    peer.send(serde_json::json!({
        "event": "mission.hitl_responded", "executor_id": exec, "mission_id": mission,
        "ts": "2026-11-30T07:00:00.000Z",
        "data": {"hitl_id": hitl_id, "response": "y"}
    }))
    .unwrap();
    let frames = peer
        .wait_for(WAIT, &format!("{mission} to end"), |f| ended(f, mission))
        .await;
    let events = mission_events(&frames, mission);
    let (_, name, data) = events.last().unwrap();
    assert_eq!(name, "mission.completed", "{events:?}");
    assert_eq!(data["summary"], "got y");
    assert_eq!(peer.violations(), Vec::<String>::new());
}

/// Waits (without blocking the runtime) until `path` holds `text`.
async fn wait_file_holds(path: &std::path::Path, text: &str) {
    let deadline = std::time::Instant::now() + WAIT;
    while !std::fs::read_to_string(path).is_ok_and(|s| s.contains(text)) {
        assert!(
            std::time::Instant::now() < deadline,
            "{} never held {text:?}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn output_and_a_prompt_printed_while_the_server_is_down_are_reported_after_the_resume() {
    let peer = Peer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (mut server, exec) = connected(dir.path(), &peer).await;
    let objective = "echo before; while [ ! -e go ]; do sleep 0.05; done; \
                     echo printed-while-down; printf 'Proceed? [y/N] '; read a; echo \"got $a\"";
    peer.dispatch(&server.base, &exec, "s", dispatch_body("m-down", objective))
        .await;
    peer.wait_for(WAIT, "the first output", |f| {
        mission_events(f, "m-down")
            .iter()
            .any(|(_, e, d)| e == "mission.progress" && d["summary"] == "before")
    })
    .await;
    terminate(&mut server).await;
    // The program goes on without a server: prints, then asks.
    let runs = dir.path().join(".warden/missions");
    let run = std::fs::read_dir(&runs).unwrap().next().unwrap().unwrap();
    std::fs::write(dir.path().join("go"), "").unwrap();
    wait_file_holds(&run.path().join("output"), "Proceed?").await;

    let server = serve_with(dir.path(), &peer);
    let frames = peer
        .wait_for(WAIT, "the prompt and output printed while down", |f| {
            let second = events_on(f, "m-down", 2);
            second.iter().any(|(e, _)| e == "mission.hitl_required")
                && second.iter().any(|(e, _)| e == "mission.progress")
        })
        .await;
    let after = events_on(&frames, "m-down", 2);
    let names: Vec<&str> = after.iter().map(|(e, _)| e.as_str()).collect();
    // Nothing of it is reported before the mission is resumed.
    assert_eq!(
        &names[..2],
        ["mission.reconnected", "mission.resumed"],
        "{after:?}"
    );
    let asked = &after
        .iter()
        .find(|(e, _)| e == "mission.hitl_required")
        .unwrap()
        .1;
    assert_eq!(asked["prompt"], "Proceed? [y/N]");
    assert!(
        after.iter().any(|(e, d)| e == "mission.progress"
            && d["summary"]
                .as_str()
                .is_some_and(|s| s.contains("printed-while-down") || s.contains("Proceed?"))),
        "the output printed while down is reported: {after:?}"
    );
    answer_yes_and_see_it_complete(&peer, &server, &exec, "m-down", &asked["hitl_id"]).await;
}

#[tokio::test]
async fn a_dispatch_before_registration_is_503_and_a_run_that_cannot_start_is_500() {
    let peer = Peer::start().await.unwrap();
    peer.refuse_registration(Some(404));
    let dir = tempfile::tempdir().unwrap();
    // The workspace missions run in; removed below, so no run can start.
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let server = Server::start_with(
        dir.path(),
        &[
            ("AIWG_SERVE_ENDPOINT", peer.base().as_str()),
            ("WARDEN_WORKSPACE", workspace.to_str().unwrap()),
        ],
    );
    let deadline = std::time::Instant::now() + WAIT;
    while !status(&server).await["executor_register_error"].is_string() {
        assert!(std::time::Instant::now() < deadline, "never refused");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (code, body) = peer
        .dispatch_with_token(&server.base, "s", "any", dispatch_body("m-early", "true"))
        .await;
    assert_eq!(code, 503, "{body}");
    assert_eq!(body["error"]["code"], "not_registered", "{body}");

    peer.refuse_registration(None);
    server
        .post("/api/v1/aiwg/reconnect", serde_json::json!({}))
        .await;
    peer.wait_for(WAIT, "the resync", |f| !resyncs(f).is_empty())
        .await;
    let exec = status(&server).await["executor_id"]
        .as_str()
        .unwrap()
        .to_owned();
    std::fs::remove_dir(&workspace).unwrap();
    let (code, body) = peer
        .dispatch(&server.base, &exec, "s", dispatch_body("m-nowhere", "true"))
        .await;
    assert_eq!(code, 500, "{body}");
    assert_eq!(body["error"]["code"], "dispatch_failed", "{body}");
    let frames = peer
        .wait_for(WAIT, "m-nowhere to fail", |f| ended(f, "m-nowhere"))
        .await;
    let events = mission_events(&frames, "m-nowhere");
    let names: Vec<&str> = events.iter().map(|(_, e, _)| e.as_str()).collect();
    assert_eq!(names, ["mission.assigned", "mission.failed"], "{events:?}");
    assert_eq!(events[1].2["reason"], "dispatch_failed");
    let (_, st) = peer.mission_status(&server.base, "", "m-nowhere").await;
    assert_eq!(st["state"], "failed");
    assert_eq!(peer.violations(), Vec::<String>::new());
}

/// Runs `warden mission ARGS --url <server>` off the runtime (the peer
/// serves on it): exit code, stdout, stderr.
async fn mission_cli(
    dir: &std::path::Path,
    server: &Server,
    args: &[&str],
) -> (i32, String, String) {
    let mut cmd = warden(dir);
    cmd.arg("mission").args(args).args(["--url", &server.base]);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_cli_lists_shows_and_aborts_missions() {
    let peer = Peer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (server, exec) = connected(dir.path(), &peer).await;
    peer.dispatch(&server.base, &exec, "s", dispatch_body("m-done", "echo hi"))
        .await;
    peer.wait_for(WAIT, "m-done to end", |f| ended(f, "m-done"))
        .await;
    peer.dispatch(
        &server.base,
        &exec,
        "s",
        dispatch_body("m-cli", "sleep 300"),
    )
    .await;
    wait_started(&peer, "m-cli").await;

    let (code, out, err) = mission_cli(dir.path(), &server, &["list", "--json", "--active"]).await;
    assert_eq!(code, 0, "{err}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    let ids: Vec<&str> = listed["missions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["mission_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["m-cli"], "only the live one: {listed}");
    let (code, out, _) = mission_cli(dir.path(), &server, &["list"]).await;
    assert_eq!(code, 0);
    let row = |id: &str| {
        out.lines()
            .find(|l| l.starts_with(id))
            .and_then(|l| l.split_whitespace().nth(1))
            .map(str::to_owned)
    };
    assert_eq!(row("m-done").as_deref(), Some("done"), "{out}");
    assert_eq!(row("m-cli").as_deref(), Some("running"), "{out}");
    let (code, out, _) = mission_cli(dir.path(), &server, &["show", "m-done"]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("exit code  0") && out.contains("mission.completed"),
        "{out}"
    );

    let (code, out, err) = mission_cli(dir.path(), &server, &["abort", "m-cli", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let st: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        st["state"], "aborted",
        "the CLI returns once it has ended: {st}"
    );
    let frames = peer
        .wait_for(WAIT, "m-cli aborted", |f| ended(f, "m-cli"))
        .await;
    let events = mission_events(&frames, "m-cli");
    let (_, name, data) = events.last().unwrap();
    assert_eq!(name, "mission.aborted", "{events:?}");
    assert_eq!(data["aborted_by"], "operator");
    // Aborting what has ended says so; an unknown mission is an error.
    let (code, out, _) = mission_cli(dir.path(), &server, &["abort", "m-done"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("already ended"), "{out}");
    let (code, _, err) = mission_cli(dir.path(), &server, &["show", "m-nobody"]).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("404") && err.contains("no mission m-nobody"),
        "{err}"
    );
    assert_eq!(peer.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn after_a_crash_output_is_reported_on_neither_skipped_nor_repeated() {
    let peer = Peer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (mut server, exec) = connected(dir.path(), &peer).await;
    let objective = "echo one; while [ ! -e go1 ]; do sleep 0.05; done; echo two; \
                     while [ ! -e go2 ]; do sleep 0.05; done; echo three; \
                     while [ ! -e go3 ]; do sleep 0.05; done; echo four";
    peer.dispatch(
        &server.base,
        &exec,
        "s",
        dispatch_body("m-crash", objective),
    )
    .await;
    let said = |f: &[Received], conn: u32, line: &str| {
        mission_events(f, "m-crash")
            .iter()
            .any(|(c, e, d)| *c == conn && e == "mission.progress" && d["summary"] == line)
    };
    peer.wait_for(WAIT, "one", |f| said(f, 1, "one")).await;
    // A clean stop marks how far the output was read…
    terminate(&mut server).await;
    let mut second = serve_with(dir.path(), &peer);
    peer.wait_for(WAIT, "the resume", |f| {
        mission_events(f, "m-crash")
            .iter()
            .any(|(c, e, _)| *c == 2 && e == "mission.resumed")
    })
    .await;
    std::fs::write(dir.path().join("go1"), "").unwrap();
    peer.wait_for(WAIT, "two", |f| said(f, 2, "two")).await;
    // …and after a crash the next server reads on from what was last
    // reported: not from that old mark, and not skipping what the program
    // printed while no server ran.
    second.child.kill().unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    while second.child.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let run = std::fs::read_dir(dir.path().join(".warden/missions"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::write(dir.path().join("go2"), "").unwrap();
    wait_file_holds(&run.join("output"), "three").await;
    let _third = serve_with(dir.path(), &peer);
    peer.wait_for(WAIT, "three, printed while down", |f| said(f, 3, "three"))
        .await;
    std::fs::write(dir.path().join("go3"), "").unwrap();
    let frames = peer
        .wait_for(WAIT, "m-crash to end", |f| ended(f, "m-crash"))
        .await;
    // The crash may leave frames unacknowledged, sent again as they were
    // (delivery is at least once); no new event may report old output.
    let before: Vec<&Value> = frames
        .iter()
        .filter(|r| r.connection < 3)
        .map(|r| &r.frame)
        .collect();
    let new: Vec<&Value> = frames
        .iter()
        .filter(|r| r.connection == 3 && r.frame["mission_id"] == "m-crash")
        .map(|r| &r.frame)
        .filter(|f| !before.contains(f))
        .collect();
    assert!(
        !new.iter()
            .any(|f| f["data"]["summary"] == "one" || f["data"]["summary"] == "two"),
        "output reported before the crash was reported again: {new:?}"
    );
    let third = events_on(&frames, "m-crash", 3);
    let (last, data) = third.last().unwrap();
    assert_eq!(last, "mission.completed", "{third:?}");
    assert_eq!(data["summary"], "four");
    assert_eq!(peer.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn without_a_default_instance_a_dispatch_must_name_one() {
    let peer = Peer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        "[[a2a.instances]]\nname = \"builder\"\nruntime = \"command\"\nargv = [\"true\"]\n",
    );
    let (server, exec) = connected(dir.path(), &peer).await;
    let (code, body) = peer
        .dispatch(&server.base, &exec, "s", dispatch_body("m-nowhere", "true"))
        .await;
    assert_eq!(code, 503, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("executor_filter.agent_id")),
        "{body}"
    );
    let mut named = dispatch_body("m-named", "echo built");
    named["executor_filter"] = serde_json::json!({"agent_id": "builder"});
    let (code, body) = peer.dispatch(&server.base, &exec, "s", named).await;
    assert_eq!(code, 202, "{body}");
    let frames = peer
        .wait_for(WAIT, "m-named to end", |f| ended(f, "m-named"))
        .await;
    let events = mission_events(&frames, "m-named");
    assert_eq!(events.last().unwrap().1, "mission.completed", "{events:?}");
    assert!(mission_events(&frames, "m-nowhere").is_empty());
    assert_eq!(peer.violations(), Vec::<String>::new());
}
