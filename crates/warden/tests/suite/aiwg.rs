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
    // Nothing is claimed that is not built or proven yet.
    for unproven in ["resumable", "hitl", "isolation:vm", "isolation:container"] {
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
