//! kill -9 of the server: in-flight runs are failed{infrastructure,
//! server_restart} after restart, with an event, and their processes are gone.

use std::time::Duration;

use serde_json::json;

use super::harness::*;

#[tokio::test]
async fn runs_in_flight_at_kill_9_are_failed_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path());
    let run = server
        .start_run(json!({"argv": ["sh", "-c", "echo started; exec sleep 1000"]}))
        .await;
    let id = run["id"].as_str().unwrap().to_owned();
    let pid = run["pid"].as_i64().unwrap();
    server.child.kill().unwrap(); // SIGKILL: no chance to clean up
    server.child.wait().unwrap();
    assert!(
        alive(pid),
        "the run's process should have outlived the killed server"
    );

    let server = Server::start(dir.path());
    let (status, done) = server.get(&format!("/api/v1/runs/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(done["state"], "failed");
    assert_eq!(done["outcome"]["kind"], "infrastructure");
    assert_eq!(done["outcome"]["reason"], "server_restart");
    assert_eq!(
        done["outcome"]["detail"],
        "the server stopped while this run was in flight; 1 leftover process(es) were killed"
    );
    assert!(
        wait_gone(pid, Duration::from_secs(5)).await,
        "leftover process {pid} was not killed"
    );

    let resp = server
        .client
        .get(server.url(&format!("/api/v1/runs/{id}/events")))
        .send()
        .await
        .unwrap();
    let body = tokio::time::timeout(Duration::from_secs(10), resp.text())
        .await
        .unwrap()
        .unwrap();
    assert!(body.contains("event: run.finished"), "{body}");
    assert!(body.contains("server_restart"), "{body}");
    let (_, running) = server.get("/api/v1/runs?state=running").await;
    assert_eq!(running, json!({"runs": []}));
}
