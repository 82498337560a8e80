//! `adapter-command/v1` against the real binary with a real `node` and a
//! test `runner.mjs` in a temp workspace (the server's working directory).

use std::path::Path;

use serde_json::{Value, json};

use super::harness::*;

pub(super) const URI: &str = "https://agentic-sandbox.aiwg.io/extensions/adapter-command/v1";
const RUNNER: &str = ".aiwg/ops/adapters/sandbox-agent-runner/runner.mjs";

/// Prints the adapter environment as JSON, then does what the request file says.
const RUNNER_MJS: &str = r#"
import { readFileSync } from 'node:fs';
const req = JSON.parse(readFileSync(process.argv[process.argv.indexOf('--request') + 1], 'utf8'));
const env = {};
for (const k of Object.keys(process.env).filter((k) => k.startsWith('AIWG_A2A_'))) env[k] = process.env[k];
console.log(JSON.stringify(env));
if (req.action === 'fail') { console.error('failing as asked'); process.exit(1); }
if (req.action === 'hang') { setInterval(() => {}, 1000); }
if (req.action === 'ask' || req.action === 'ask2') {
  const questions = req.action === 'ask' ? ['Apply the plan? [y/N] '] : ['Step one? [y/N] ', 'Step two (yes/no)? '];
  const answers = [];
  let buf = '';
  process.stdout.write(questions[0]);
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (d) => {
    buf += d;
    while (buf.includes('\n')) {
      const i = buf.indexOf('\n');
      answers.push(buf.slice(0, i).trim());
      buf = buf.slice(i + 1);
      if (answers.length < questions.length) { process.stdout.write(questions[answers.length]); continue; }
      console.log('answers: ' + answers.join(','));
      process.exit(answers.every((a) => a === 'y' || a === 'yes') ? 0 : 3);
    }
  });
  process.stdin.on('end', () => { console.log('no input'); process.exit(4); });
}
if (req.action === 'secret') { process.stdout.write('Password: '); process.stdin.on('data', () => process.exit(0)); }
if (req.action === 'drift') {
  process.stdout.write('Proceed? [y/N] ');
  setTimeout(() => process.stdout.write('\nno answer yet, going on\n'), 300);
  process.stdin.on('data', () => process.exit(0));
}
if (req.action === 'len') {
  process.stdout.write('Send it? [y/N] ');
  let buf = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (d) => {
    buf += d;
    if (buf.includes('\n')) { console.log('len ' + buf.slice(0, buf.indexOf('\n')).length); process.exit(0); }
  });
}
"#;

/// A workspace with the runner and request files, and a server in it.
pub(super) fn serve(dir: &Path) -> Server {
    let runner = dir.join(RUNNER);
    std::fs::create_dir_all(runner.parent().unwrap().join("examples")).unwrap();
    std::fs::write(&runner, RUNNER_MJS).unwrap();
    std::fs::write(
        runner.parent().unwrap().join("examples/ok.json"),
        r#"{"action":"ok"}"#,
    )
    .unwrap();
    std::fs::create_dir_all(dir.join(".aiwg/ops/runs")).unwrap();
    for action in [
        "ok", "fail", "hang", "ask", "ask2", "secret", "drift", "len",
    ] {
        std::fs::write(
            dir.join(format!(".aiwg/ops/runs/{action}.json")),
            format!(r#"{{"action":"{action}"}}"#),
        )
        .unwrap();
    }
    std::fs::write(dir.join("outside.json"), "{}").unwrap();
    Server::start(dir)
}

pub(super) fn envelope(request: &str) -> Value {
    json!({
        "adapter": "sandbox-agent-runner",
        "mode": "plan",
        "command": ["node", RUNNER, "--request", request],
    })
}

fn message(id: &str, env: Value) -> Value {
    json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": "run the adapter"}],
           "metadata": {URI: env}})
}

async fn rpc(server: &Server, version: Option<&str>, method: &str, params: Value) -> Value {
    let mut req = server
        .client
        .post(server.url("/"))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    if let Some(v) = version {
        req = req.header("A2A-Version", v);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

async fn send(server: &Server, env: Value) -> Value {
    rpc(
        server,
        Some("1.0"),
        "SendMessage",
        json!({"message": message("a1", env)}),
    )
    .await
}

#[tokio::test]
async fn exit_0_completes_with_the_adapter_environment_and_chunk_artifacts() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let r = send(
        &server,
        envelope(".aiwg/ops/adapters/sandbox-agent-runner/examples/ok.json"),
    )
    .await;
    let t = &r["result"]["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    let id = t["id"].as_str().unwrap();
    let a = &t["artifacts"][0];
    assert_eq!(a["artifactId"], format!("{id}-stdout-0"), "{t}");
    let env: Value = serde_json::from_str(a["parts"][0]["text"].as_str().unwrap().trim()).unwrap();
    assert_eq!(env["AIWG_A2A_ADAPTER"], "sandbox-agent-runner");
    assert_eq!(env["AIWG_A2A_ADAPTER_MODE"], "plan");
    assert_eq!(env["AIWG_A2A_TASK_ID"], id);
    assert_eq!(env["AIWG_A2A_CONTEXT_ID"], t["contextId"]);
    assert_eq!(env["AIWG_A2A_MESSAGE_ID"], "a1");
    assert_eq!(env["AIWG_A2A_INSTANCE_ID"], "default");
    assert!(
        env["AIWG_A2A_DEADLINE"].as_str().unwrap().ends_with('Z'),
        "{env}"
    );
    let meta = &t["status"]["message"]["metadata"];
    assert_eq!(meta["outcome"]["status"], "completed");
    assert!(meta.get("failure").is_none());
}

#[tokio::test]
async fn nonzero_exit_fails_as_an_application_failure_over_0_3() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let mut env = envelope(".aiwg/ops/runs/fail.json");
    env["mode"] = json!("assess");
    let r = rpc(
        &server,
        None,
        "message/send",
        json!({"message": {"kind": "message", "messageId": "a2", "role": "user",
               "parts": [{"kind": "text", "text": "assess"}], "metadata": {URI: env}}}),
    )
    .await;
    let t = &r["result"];
    assert_eq!(t["status"]["state"], "failed", "{r}");
    let meta = &t["status"]["message"]["metadata"];
    assert_eq!(
        meta["failure"],
        json!({"kind": "application", "exit_code": 1, "signal": null})
    );
    let stderr: Vec<&Value> = t["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["name"] == "stderr")
        .collect();
    assert_eq!(stderr[0]["parts"][0]["text"], "failing as asked\n");
    let env: Value = serde_json::from_str(
        t["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .trim(),
    )
    .unwrap();
    assert_eq!(env["AIWG_A2A_ADAPTER_MODE"], "assess");
}

#[tokio::test]
async fn the_deadline_ends_it_as_an_infrastructure_failure() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let mut env = envelope(".aiwg/ops/runs/hang.json");
    env["timeout_seconds"] = json!(1);
    let r = send(&server, env).await;
    let t = &r["result"]["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_FAILED", "{r}");
    assert_eq!(
        t["status"]["message"]["metadata"]["failure"],
        json!({"kind": "infrastructure", "reason": "timed_out"})
    );
}

#[tokio::test]
async fn streamed_and_from_the_request_metadata_over_http_json() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let body = json!({
        "message": {"messageId": "s1", "role": "ROLE_USER", "parts": [{"text": "go"}]},
        "metadata": {URI: envelope(".aiwg/ops/runs/ok.json")},
    });
    let resp = server
        .client
        .post(server.url("/message:stream"))
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await
        .unwrap();
    let mut sse = Sse::new(resp);
    let mut events = vec![];
    while let Some((_, e)) = sse.next().await {
        events.push(e);
    }
    let id = events[0]["task"]["id"].as_str().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e["artifactUpdate"]["artifact"]["artifactId"] == format!("{id}-stdout-0")),
        "{events:?}"
    );
    assert_eq!(
        events.last().unwrap()["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

/// Sends `env`, expects the refusal naming `rule`, and checks nothing was
/// stored and the refusal was audited.
async fn refused(env: Value, rule: &str) {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let r = send(&server, env).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["data"][0]["metadata"]["rule"], rule, "{r}");
    let list = rpc(&server, Some("1.0"), "ListTasks", json!({})).await;
    assert_eq!(list["result"]["totalSize"], 0, "nothing stored: {list}");
    let (_, runs) = server.get("/api/v1/runs").await;
    assert_eq!(runs["runs"], json!([]), "nothing ran");
    let (_, audit) = server.get("/api/v1/audit").await;
    let last = audit["entries"].as_array().unwrap().last().unwrap();
    assert_eq!(
        (last["action"].as_str(), last["detail"]["rule"].as_str()),
        (Some("adapter.refused"), Some(rule)),
        "{audit}"
    );
    assert_eq!(audit["chain"]["state"], "intact");
}

fn with(key: &str, value: Value) -> Value {
    let mut env = envelope(".aiwg/ops/runs/ok.json");
    env[key] = value;
    env
}

#[tokio::test]
async fn refuses_an_unknown_field() {
    refused(with("shell", json!(true)), "envelope.known_fields").await;
}

#[tokio::test]
async fn refuses_another_adapter() {
    refused(with("adapter", json!("other-runner")), "adapter.supported").await;
}

#[tokio::test]
async fn refuses_another_mode() {
    refused(with("mode", json!("apply")), "mode.supported").await;
}

#[tokio::test]
async fn refuses_another_command() {
    refused(
        with(
            "command",
            json!(["sh", "-c", "id", ".aiwg/ops/runs/ok.json"]),
        ),
        "command.shape",
    )
    .await;
}

#[tokio::test]
async fn refuses_an_absolute_request_path() {
    refused(envelope("/etc/passwd"), "command.path_relative").await;
}

#[tokio::test]
async fn refuses_a_dotdot_segment() {
    refused(
        envelope(".aiwg/ops/runs/../runs/ok.json"),
        "command.path_dotdot",
    )
    .await;
}

#[tokio::test]
async fn refuses_a_backslash() {
    refused(
        envelope(".aiwg\\ops\\runs\\ok.json"),
        "command.path_backslash",
    )
    .await;
}

#[tokio::test]
async fn refuses_a_nul() {
    refused(envelope(".aiwg/ops/runs/ok\u{0}.json"), "command.path_nul").await;
}

#[tokio::test]
async fn refuses_a_path_outside_the_allowed_prefixes() {
    refused(envelope("outside.json"), "command.path_prefix").await;
}

#[tokio::test]
async fn refuses_a_symlink_that_escapes_and_runs_one_that_stays() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let runs = dir.path().join(".aiwg/ops/runs");
    std::os::unix::fs::symlink(dir.path().join("outside.json"), runs.join("out.json")).unwrap();
    std::os::unix::fs::symlink(runs.join("ok.json"), runs.join("in.json")).unwrap();
    let r = send(&server, envelope(".aiwg/ops/runs/out.json")).await;
    assert_eq!(
        r["error"]["data"][0]["metadata"]["rule"], "command.path_prefix",
        "{r}"
    );
    let r = send(&server, envelope(".aiwg/ops/runs/in.json")).await;
    assert_eq!(
        r["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{r}"
    );
}

#[tokio::test]
async fn refuses_a_request_path_that_does_not_resolve() {
    refused(
        envelope(".aiwg/ops/runs/missing.json"),
        "command.path_resolves",
    )
    .await;
}

#[tokio::test]
async fn runs_in_a_working_dir_inside_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    // The runner and the request are the workspace's, wherever it runs.
    std::fs::create_dir_all(dir.path().join("sub")).unwrap();
    let r = send(&server, with("working_dir", json!("sub"))).await;
    assert_eq!(
        r["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{r}"
    );
}

#[tokio::test]
async fn refuses_a_working_dir_outside_the_workspace() {
    refused(
        with("working_dir", json!("/tmp")),
        "working_dir.inside_workspace",
    )
    .await;
}

#[tokio::test]
async fn refuses_a_timeout_out_of_range() {
    refused(with("timeout_seconds", json!(901)), "timeout_seconds.range").await;
}

#[tokio::test]
async fn refuses_a_timeout_that_is_not_an_integer() {
    refused(
        with("timeout_seconds", json!("300")),
        "timeout_seconds.integer",
    )
    .await;
}

#[tokio::test]
async fn refuses_an_unknown_input_mode() {
    refused(with("input_mode", json!("raw")), "input_mode.supported").await;
}

#[tokio::test]
async fn a_refusal_over_http_json_is_a_400_naming_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let (status, body) = server
        .post(
            "/message:send?A2A-Version=1.0",
            json!({"message": message("r1", with("mode", json!("apply")))}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["error"]["details"][0]["metadata"]["rule"],
        "mode.supported"
    );
}
