//! The operator HTTP API for runs.

use std::time::Duration;

use serde_json::{Value, json};

use super::harness::*;

#[tokio::test]
async fn health_and_readiness() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    assert_eq!(server.get("/healthz").await, (200, json!({"status": "ok"})));
    assert_eq!(
        server.get("/readyz").await,
        (200, json!({"status": "ready"}))
    );
    let (status, body) = server.get("/nope").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("no_route"))
    );
}

#[tokio::test]
async fn each_outcome_is_reported_truthfully() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let cases = [
        (
            json!({"argv": ["sh", "-c", "echo hi"]}),
            json!({"status": "completed"}),
        ),
        (
            json!({"argv": ["sh", "-c", "exit 3"]}),
            json!({"status": "failed", "kind": "application", "exit_code": 3}),
        ),
        (
            json!({"argv": ["sh", "-c", "kill -TERM $$"]}),
            json!({"status": "failed", "kind": "application", "signal": 15}),
        ),
        (
            json!({"argv": ["sleep", "100"], "timeout_seconds": 0.3}),
            json!({"status": "timed_out"}),
        ),
        (
            json!({"argv": ["cat", "/dev/zero"], "max_output_bytes": 100000}),
            json!({"status": "output_limit"}),
        ),
    ];
    for (body, want) in cases {
        let run = server.start_run(body.clone()).await;
        // Spawned before the response; a fast program may already have ended.
        assert!(
            run["pid"].is_u64() && run["started_at"].is_string(),
            "{run}"
        );
        let done = server
            .wait_ended(run["id"].as_str().unwrap(), Duration::from_secs(30))
            .await;
        assert_eq!(done["outcome"], want, "{body}");
        assert_eq!(done["state"], want["status"], "{body}");
    }
    let (_, list) = server.get("/api/v1/runs").await;
    assert_eq!(list["runs"].as_array().unwrap().len(), 5);
    let (_, timed_out) = server.get("/api/v1/runs?state=timed_out").await;
    assert_eq!(timed_out["runs"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn output_cap_keeps_exactly_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let run = server
        .start_run(json!({"argv": ["cat", "/dev/zero"], "max_output_bytes": 100000}))
        .await;
    let done = server
        .wait_ended(run["id"].as_str().unwrap(), Duration::from_secs(30))
        .await;
    assert_eq!(done["output_bytes"], 100000);
}

#[tokio::test]
async fn cancel_ends_the_run_and_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let run = server.start_run(json!({"argv": ["sleep", "1000"]})).await;
    let id = run["id"].as_str().unwrap();
    let (status, done) = server
        .post(&format!("/api/v1/runs/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["outcome"], json!({"status": "cancelled"}));
    assert!(!alive(run["pid"].as_i64().unwrap()));
    let (status, again) = server
        .post(&format!("/api/v1/runs/{id}/cancel"), json!({}))
        .await;
    assert_eq!(
        (status, again["error"]["code"].as_str()),
        (409, Some("run_ended"))
    );
}

#[tokio::test]
async fn bad_input_is_refused_naming_the_field_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let cases: Vec<(Value, u16, &str)> = vec![
        (json!({"argv": ["no-such-program-warden"]}), 400, "argv[0]"),
        (json!({"argv": []}), 400, "argv"),
        (json!({"argv": ["true"], "cwd": "/no/such/dir"}), 400, "cwd"),
        (json!({"argv": ["true"], "cwd": "/etc/passwd"}), 400, "cwd"),
        (
            json!({"argv": ["true"], "timeout_seconds": 0}),
            400,
            "timeout_seconds",
        ),
        (
            json!({"argv": ["true"], "timeout_seconds": -5}),
            400,
            "timeout_seconds",
        ),
        (
            json!({"argv": ["true"], "timeout_seconds": 99999999}),
            400,
            "timeout_seconds",
        ),
        (
            json!({"argv": ["true"], "max_output_bytes": 0}),
            400,
            "max_output_bytes",
        ),
        (
            json!({"argv": ["true"], "max_output_bytes": -1}),
            400,
            "max_output_bytes",
        ),
        (
            json!({"argv": ["true"], "max_output_bytes": 1_u64 << 50}),
            400,
            "max_output_bytes",
        ),
        (json!({"argv": ["true"], "surprise": 1}), 400, "surprise"),
        (json!({"argv": "true"}), 400, "argv"),
        (json!({}), 400, "argv"),
    ];
    for (body, status, field) in cases {
        let (got, err) = server.post("/api/v1/runs", body.clone()).await;
        assert_eq!(
            (got, err["error"]["field"].as_str()),
            (status, Some(field)),
            "{body} → {err}"
        );
    }
    let raw = server
        .client
        .post(server.url("/api/v1/runs"))
        .header("content-type", "application/json")
        .body("{\"argv\": [")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 400);
    let err: Value = raw.json().await.unwrap();
    assert_eq!(err["error"]["code"], "malformed_json");

    let (status, err) = server.get("/api/v1/runs/not-a-uuid").await;
    assert_eq!((status, err["error"]["field"].as_str()), (400, Some("id")));
    let (status, err) = server
        .get("/api/v1/runs/01a229eb-5df7-7041-9bab-8b51849fc659")
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (404, Some("run_not_found"))
    );
    let (status, _) = server.get("/api/v1/runs?state=bogus").await;
    assert_eq!(status, 400);

    let (_, list) = server.get("/api/v1/runs").await;
    assert_eq!(
        list,
        json!({"runs": []}),
        "a refused request left a run behind"
    );
}

#[tokio::test]
async fn non_loopback_needs_an_operator_token_and_the_token_is_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let out = warden(dir.path())
        .args(["serve", "--listen", "0.0.0.0:0"])
        .env("WARDEN_HOME", dir.path().join(".warden"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refusing to listen on 0.0.0.0:0 without operator auth"),
        "{stderr}"
    );

    let token = "t0ken-t0ken-t0ken-t0ken";
    let server = Server::start_with(dir.path(), &[("WARDEN_OPERATOR_TOKEN", token)]);
    let (status, err) = server.get("/api/v1/runs").await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (401, Some("unauthorized"))
    );
    let wrong = server
        .client
        .get(server.url("/api/v1/runs"))
        .bearer_auth("t0ken-t0ken-t0ken-t0keN")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let right = server
        .client
        .get(server.url("/api/v1/runs"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), 200);
    assert_eq!(server.get("/healthz").await.0, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_drains_live_runs_truthfully() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path());
    let run = server.start_run(json!({"argv": ["sleep", "1000"]})).await;
    let pid = run["pid"].as_i64().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server.pid()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = tokio::task::block_in_place(|| server.child.wait()).unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!alive(pid));
    let server = Server::start(dir.path());
    let (_, done) = server
        .get(&format!("/api/v1/runs/{}", run["id"].as_str().unwrap()))
        .await;
    assert_eq!(done["outcome"]["reason"], "server_shutdown", "{done}");
}

#[tokio::test]
async fn a_second_server_on_the_same_home_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let first = Server::start(dir.path());
    let out = warden(dir.path())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("WARDEN_HOME", dir.path().join(".warden"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let want = format!(
        "another warden serve (pid {}) is using WARDEN_HOME",
        first.pid()
    );
    assert!(stderr.contains(&want), "{stderr}");
    assert_eq!(first.get("/readyz").await.0, 200);
}

#[tokio::test]
async fn live_runs_are_capped_and_every_error_is_json() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".warden")).unwrap();
    std::fs::write(
        dir.path().join(".warden/warden.toml"),
        "[runs]\nmax_live_runs = 1\n",
    )
    .unwrap();
    let server = Server::start(dir.path());
    let first = server.start_run(json!({"argv": ["sleep", "1000"]})).await;
    let (status, err) = server.post("/api/v1/runs", json!({"argv": ["true"]})).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (429, Some("too_many_runs")),
        "{err}"
    );
    let id = first["id"].as_str().unwrap();
    assert_eq!(
        server
            .post(&format!("/api/v1/runs/{id}/cancel"), json!({}))
            .await
            .0,
        200
    );
    // The slot is free again once the run has ended.
    let again = server.start_run(json!({"argv": ["true"]})).await;
    server
        .wait_ended(again["id"].as_str().unwrap(), Duration::from_secs(10))
        .await;

    let (status, err) = server
        .get(&format!("/api/v1/runs/{id}/events?after=abc"))
        .await;
    assert_eq!(
        (status, err["error"]["field"].as_str()),
        (400, Some("after"))
    );
    let resp = server
        .client
        .delete(server.url("/api/v1/runs"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    let err: Value = resp.json().await.unwrap();
    assert_eq!(err["error"]["code"], "method_not_allowed");
    let resp = server
        .client
        .post(server.url("/api/v1/runs"))
        .header("content-type", "text/plain")
        .body("argv")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 415);
    let err: Value = resp.json().await.unwrap();
    assert_eq!(err["error"]["code"], "unsupported_media_type");
}
