//! `hitl-prompt/v1`: an adapter command's `[y/N]` prompt pauses the task,
//! and an answer reaches that exact process (real `node` on a PTY).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::adapter::{URI, envelope, serve};
use super::harness::*;

const HITL: &str = "https://agentic-sandbox.aiwg.io/extensions/hitl-prompt/v1";

fn text_line(request: &str) -> Value {
    let mut env = envelope(request);
    env["input_mode"] = json!("text-line");
    env
}

async fn call(
    server: &Server,
    version: Option<&str>,
    ext: Option<(&str, &str)>,
    body: Value,
) -> Value {
    let mut req = server.client.post(server.url("/")).json(&body);
    if let Some(v) = version {
        req = req.header("A2A-Version", v);
    }
    if let Some((name, value)) = ext {
        req = req.header(name, value);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

fn start(request: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": "h1", "role": "ROLE_USER", "parts": [{"text": "plan"}],
        "metadata": {URI: text_line(request)}}}})
}

fn answer(task: &Value, prompt_id: &str, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": {
        "messageId": format!("ans-{text}"), "role": "ROLE_USER", "taskId": task["id"],
        "contextId": task["contextId"], "parts": [{"text": text}],
        "metadata": {HITL: {"prompt_id": prompt_id, "text": text}}}}})
}

fn prompt_of(task: &Value) -> (String, Value) {
    let env = task["status"]["message"]["metadata"][HITL].clone();
    (env["prompt_id"].as_str().unwrap().to_owned(), env)
}

/// Polls task `id` until `done` holds for it (what the test waits for is
/// `what`), for at most 20 s.
async fn task_until(server: &Server, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = call(
            server,
            Some("1.0"),
            None,
            json!({"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": id}}),
        )
        .await;
        let t = r["result"].clone();
        if done(&t) {
            return t;
        }
        assert!(Instant::now() < deadline, "task {id}: {what}: {t}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls the task until it has ended, for at most 20 s.
async fn ended(server: &Server, id: &str) -> Value {
    task_until(server, id, "did not end", |t| {
        matches!(
            t["status"]["state"].as_str(),
            Some("TASK_STATE_COMPLETED" | "TASK_STATE_FAILED" | "TASK_STATE_CANCELED")
        )
    })
    .await
}

fn output(task: &Value) -> String {
    task["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|a| a["parts"].as_array().unwrap().iter())
        .filter_map(|p| p["text"].as_str())
        .collect()
}

#[tokio::test]
async fn a_y_n_prompt_pauses_the_task_and_the_answer_reaches_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let r = call(
        &server,
        Some("1.0"),
        Some(("A2A-Extensions", HITL)),
        start(".aiwg/ops/runs/ask.json"),
    )
    .await;
    let t = &r["result"]["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{r}");
    let (prompt_id, env) = prompt_of(t);
    assert_eq!(env["prompt"], "Apply the plan? [y/N]");
    assert_eq!(env["instance_id"], "default");
    assert_eq!(env["task_id"], t["id"]);
    assert_eq!(env["context_id"], t["contextId"]);
    assert!(env["deadline"].as_str().unwrap().ends_with('Z'));
    // The operator sees it waiting too.
    let (_, waiting) = server.get("/api/v1/hitl").await;
    assert_eq!(waiting["prompts"][0]["prompt_id"], prompt_id.as_str());

    let done = call(&server, Some("1.0"), None, answer(t, &prompt_id, "y")).await;
    let t2 = &done["result"]["task"];
    assert_eq!(t2["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    assert!(output(t2).contains("answers: y"), "{t2}");
    // The answer is in the history.
    let texts: Vec<&str> = t2["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "ROLE_USER")
        .map(|m| m["parts"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["plan", "y"]);
    // A second answer to the same prompt finds the task ended.
    let again = call(&server, Some("1.0"), None, answer(t, &prompt_id, "y")).await;
    assert_eq!(again["error"]["code"], -32004, "{again}");
}

#[tokio::test]
async fn stale_duplicate_and_bad_answers_are_refused_and_the_operator_can_answer() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let r = call(
        &server,
        Some("1.0"),
        Some(("A2A-Extensions", HITL)),
        start(".aiwg/ops/runs/ask2.json"),
    )
    .await;
    let t = r["result"]["task"].clone();
    let (first, _) = prompt_of(&t);
    // A control character is refused and the prompt keeps waiting.
    let bad = call(&server, Some("1.0"), None, answer(&t, &first, "y\u{7}")).await;
    assert_eq!(
        bad["error"]["data"][0]["metadata"]["rule"], "hitl.text_control",
        "{bad}"
    );
    let long = call(
        &server,
        Some("1.0"),
        None,
        answer(&t, &first, &"y".repeat(4096)),
    )
    .await;
    assert_eq!(
        long["error"]["data"][0]["metadata"]["rule"], "hitl.text_length",
        "{long}"
    );
    let next = call(&server, Some("1.0"), None, answer(&t, &first, "y")).await;
    let t2 = next["result"]["task"].clone();
    assert_eq!(t2["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{next}");
    let (second, env) = prompt_of(&t2);
    assert_ne!(first, second, "a later prompt gets a new id");
    assert_eq!(env["prompt"], "Step two (yes/no)?");
    // The first prompt is stale now.
    let stale = call(&server, Some("1.0"), None, answer(&t, &first, "y")).await;
    assert_eq!(
        stale["error"]["data"][0]["metadata"]["rule"], "hitl.prompt_waiting",
        "{stale}"
    );
    // The operator answers the second; a duplicate gets 409.
    let (status, body) = server
        .post(
            &format!("/api/v1/hitl/{second}/respond"),
            json!({"text": "no"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = server
        .post(
            &format!("/api/v1/hitl/{second}/respond"),
            json!({"text": "no"}),
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("prompt_not_waiting")),
        "{body}"
    );
    let done = ended(&server, t["id"].as_str().unwrap()).await;
    assert_eq!(done["status"]["state"], "TASK_STATE_FAILED");
    assert_eq!(
        done["status"]["message"]["metadata"]["failure"]["exit_code"], 3,
        "the answers decided the exit: {done}"
    );
    assert!(output(&done).contains("answers: y,no"), "{done}");
    let (_, audit) = server.get("/api/v1/audit").await;
    assert!(
        audit["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == "hitl.respond" && e["subject"] == second.as_str()),
        "{audit}"
    );
}

#[tokio::test]
async fn without_the_extension_output_is_never_a_request_for_input() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    // text-line asked for, hitl-prompt/v1 not activated: plain pipes, stdin closed.
    let r = call(&server, Some("1.0"), None, start(".aiwg/ops/runs/ask.json")).await;
    let t = &r["result"]["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_FAILED", "{r}");
    assert_eq!(
        t["status"]["message"]["metadata"]["failure"]["exit_code"],
        4
    );
    assert!(output(t).contains("no input"));
}

#[tokio::test]
async fn over_0_3_and_streamed_the_prompt_ends_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": {
        "kind": "message", "messageId": "h3", "role": "user", "parts": [{"kind": "text", "text": "plan"}],
        "metadata": {URI: text_line(".aiwg/ops/runs/ask.json")}}}});
    let resp = server
        .client
        .post(server.url("/"))
        .header("X-A2A-Extensions", HITL)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-a2a-extensions"], HITL);
    let mut sse = Sse::new(resp);
    let mut events = vec![];
    while let Some((_, e)) = sse.next().await {
        events.push(e);
    }
    let last = &events.last().unwrap()["result"];
    assert_eq!(last["status"]["state"], "input-required", "{events:?}");
    assert_eq!(last["final"], true);
    let prompt_id = last["status"]["message"]["metadata"][HITL]["prompt_id"]
        .as_str()
        .unwrap();
    let task_id = last["taskId"].as_str().unwrap();
    let r = call(
        &server,
        None,
        None,
        json!({"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": {"message": {
            "kind": "message", "messageId": "h4", "role": "user", "taskId": task_id,
            "parts": [{"kind": "text", "text": "y"}],
            "metadata": {HITL: {"prompt_id": prompt_id, "text": "y"}}}}}),
    )
    .await;
    assert_eq!(r["result"]["status"]["state"], "completed", "{r}");
}

#[tokio::test]
async fn after_a_restart_an_old_prompt_cannot_be_answered() {
    let dir = tempfile::tempdir().unwrap();
    let (task, prompt_id) = {
        let server = serve(dir.path());
        let r = call(
            &server,
            Some("1.0"),
            Some(("A2A-Extensions", HITL)),
            start(".aiwg/ops/runs/ask.json"),
        )
        .await;
        let t = r["result"]["task"].clone();
        let (p, _) = prompt_of(&t);
        (t, p)
        // The server is killed here, with the process waiting.
    };
    let server = Server::start(dir.path());
    let got = ended(&server, task["id"].as_str().unwrap()).await;
    assert_eq!(got["status"]["state"], "TASK_STATE_FAILED");
    assert_eq!(
        got["status"]["message"]["metadata"]["failure"]["reason"],
        "server_restart"
    );
    let r = call(&server, Some("1.0"), None, answer(&task, &prompt_id, "y")).await;
    assert_eq!(r["error"]["code"], -32004, "{r}");
    let (status, _) = server
        .post(
            &format!("/api/v1/hitl/{prompt_id}/respond"),
            json!({"text": "y"}),
        )
        .await;
    assert_eq!(status, 409);
}

#[tokio::test]
async fn two_answers_race_and_exactly_one_takes_the_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let r = call(
        &server,
        Some("1.0"),
        Some(("A2A-Extensions", HITL)),
        start(".aiwg/ops/runs/ask.json"),
    )
    .await;
    let t = r["result"]["task"].clone();
    let (prompt_id, _) = prompt_of(&t);
    let (a, b) = tokio::join!(
        call(&server, Some("1.0"), None, answer(&t, &prompt_id, "y")),
        call(&server, Some("1.0"), None, answer(&t, &prompt_id, "y")),
    );
    let taken = [&a, &b]
        .iter()
        .filter(|r| r.get("result").is_some())
        .count();
    assert_eq!(taken, 1, "{a} {b}");
    let refused = if a.get("error").is_some() { &a } else { &b };
    assert!(
        matches!(refused["error"]["code"].as_i64(), Some(-32602 | -32004)),
        "{refused}"
    );
}

#[tokio::test]
async fn an_answer_must_name_its_task_and_context() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let r = call(
        &server,
        Some("1.0"),
        Some(("A2A-Extensions", HITL)),
        start(".aiwg/ops/runs/ask.json"),
    )
    .await;
    let t = r["result"]["task"].clone();
    let (prompt_id, _) = prompt_of(&t);
    let mut other_context = answer(&t, &prompt_id, "y");
    other_context["params"]["message"]["contextId"] = json!("another-context");
    let e = call(&server, Some("1.0"), None, other_context).await;
    assert_eq!(
        e["error"]["data"][0]["metadata"]["rule"], "hitl.prompt_mismatch",
        "{e}"
    );
    let mut no_task = answer(&t, &prompt_id, "y");
    no_task["params"]["message"]
        .as_object_mut()
        .unwrap()
        .remove("taskId");
    let e = call(&server, Some("1.0"), None, no_task).await;
    assert_eq!(
        e["error"]["data"][0]["metadata"]["rule"], "hitl.task_id_required",
        "{e}"
    );
    // Nothing was taken: the right answer still works.
    let done = call(&server, Some("1.0"), None, answer(&t, &prompt_id, "y")).await;
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done}"
    );
}

#[tokio::test]
async fn a_prompt_for_a_secret_is_not_offered() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let mut body = start(".aiwg/ops/runs/secret.json");
    body["params"]["configuration"] = json!({"returnImmediately": true});
    let r = call(&server, Some("1.0"), Some(("A2A-Extensions", HITL)), body).await;
    let id = r["result"]["task"]["id"].as_str().unwrap().to_owned();
    let t = task_until(&server, &id, "no word about the secret prompt", |t| {
        t["status"]["message"]["parts"][0]["text"]
            .as_str()
            .is_some_and(|s| s.contains("asks for a secret"))
    })
    .await;
    assert_eq!(t["status"]["state"], "TASK_STATE_WORKING");
    let (_, waiting) = server.get("/api/v1/hitl").await;
    assert_eq!(waiting["prompts"], json!([]));
    let c = call(
        &server,
        Some("1.0"),
        None,
        json!({"jsonrpc": "2.0", "id": 4, "method": "CancelTask", "params": {"id": id}}),
    )
    .await;
    assert_eq!(c["result"]["status"]["state"], "TASK_STATE_CANCELED", "{c}");
}

#[tokio::test]
async fn more_output_withdraws_the_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let r = call(
        &server,
        Some("1.0"),
        Some(("A2A-Extensions", HITL)),
        start(".aiwg/ops/runs/drift.json"),
    )
    .await;
    let t = r["result"]["task"].clone();
    assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{r}");
    let (prompt_id, _) = prompt_of(&t);
    let id = t["id"].as_str().unwrap();
    task_until(&server, id, "the prompt was not withdrawn", |g| {
        g["status"]["state"] == "TASK_STATE_WORKING"
    })
    .await;
    let stale = call(&server, Some("1.0"), None, answer(&t, &prompt_id, "y")).await;
    assert_eq!(
        stale["error"]["data"][0]["metadata"]["rule"], "hitl.prompt_waiting",
        "{stale}"
    );
    let c = call(
        &server,
        Some("1.0"),
        None,
        json!({"jsonrpc": "2.0", "id": 4, "method": "CancelTask", "params": {"id": t["id"]}}),
    )
    .await;
    assert_eq!(c["result"]["status"]["state"], "TASK_STATE_CANCELED", "{c}");
}

#[tokio::test]
async fn the_longest_answer_arrives_whole() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let r = call(
        &server,
        Some("1.0"),
        Some(("A2A-Extensions", HITL)),
        start(".aiwg/ops/runs/len.json"),
    )
    .await;
    let t = r["result"]["task"].clone();
    let (prompt_id, _) = prompt_of(&t);
    let done = call(
        &server,
        Some("1.0"),
        None,
        answer(&t, &prompt_id, &"y".repeat(4095)),
    )
    .await;
    let t2 = &done["result"]["task"];
    assert_eq!(t2["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    assert!(output(t2).contains("len 4095"), "{}", output(t2));
}
