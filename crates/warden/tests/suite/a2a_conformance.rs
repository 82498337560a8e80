//! The `conformance` runtime: what the A2A conformance kit (a2a-tck 1.0)
//! and the draft ACTS suite expect of a system under test. Tests are named
//! after the kit's requirement ids.

use std::path::Path;

use serde_json::{Value, json};

use super::harness::*;

const INSTANCES: &str = r#"
[[a2a.instances]]
name = "tck"
runtime = "conformance"

[[a2a.instances]]
name = "tck-min"
runtime = "conformance"
card_profile = "minimal"

[[a2a.instances]]
name = "tck-ext"
runtime = "conformance"
card_profile = "required-extension"
"#;

fn serve(dir: &Path) -> Server {
    write_config(dir, INSTANCES);
    Server::start(dir)
}

fn message(id: &str, text: &str, task: Option<&str>) -> Value {
    let mut m = json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]});
    if let Some(t) = task {
        m["taskId"] = json!(t);
    }
    m
}

async fn rpc(server: &Server, instance: &str, method: &str, params: Value) -> Value {
    let resp = server
        .client
        .post(server.url(&format!("/agents/{instance}/")))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

async fn send(server: &Server, id: &str, text: &str, task: Option<&str>) -> Value {
    let r = rpc(
        server,
        "tck",
        "SendMessage",
        json!({"message": message(id, text, task)}),
    )
    .await;
    r["result"]["task"].clone()
}

#[tokio::test]
async fn core_send_001_and_artifact_behaviours_by_message_id() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let t = send(&server, "tck-complete-task-1a2b3c4d-jsonrpc", "TCK", None).await;
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        t["status"]["message"]["parts"],
        json!([{"text": "Hello from TCK"}])
    );
    for (prefix, part) in [
        (
            "tck-artifact-text",
            json!({"text": "Generated text content"}),
        ),
        (
            "tck-artifact-file",
            json!({"raw": "dGNr", "filename": "output.txt", "mediaType": "text/plain"}),
        ),
        (
            "tck-artifact-file-url",
            json!({"url": "https://example.com/output.txt", "filename": "output.txt", "mediaType": "text/plain"}),
        ),
        (
            "tck-artifact-data",
            json!({"data": {"key": "value", "count": 42}, "mediaType": "application/json"}),
        ),
    ] {
        let t = send(
            &server,
            &format!("{prefix}-1a2b3c4d"),
            "TCK artifact test",
            None,
        )
        .await;
        assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{prefix}");
        assert_eq!(t["artifacts"][0]["parts"], json!([part]), "{prefix}");
    }
    // Anything else is echoed.
    let t = send(&server, "tck-infer-ctx-1a2b", "plain words", None).await;
    assert_eq!(
        t["status"]["message"]["parts"],
        json!([{"text": "plain words"}])
    );
}

#[tokio::test]
async fn core_send_message_response_is_a_message_in_every_binding() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let r = rpc(
        &server,
        "tck",
        "SendMessage",
        json!({"message": message("tck-message-response-1a2b", "hi", None)}),
    )
    .await;
    let m = &r["result"]["message"];
    assert_eq!(m["role"], "ROLE_AGENT", "{r}");
    assert_eq!(m["parts"], json!([{"text": "Direct message response"}]));
    assert!(m.get("taskId").is_none() && m["contextId"].is_string());
    // 0.3 JSON-RPC: a kind-tagged message.
    let (_, r) = server
        .post(
            "/agents/tck/",
            json!({"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": {"message": {
                "kind": "message", "messageId": "tck-message-response-x", "role": "user",
                "parts": [{"kind": "text", "text": "hi"}]}}}),
        )
        .await;
    assert_eq!(r["result"]["kind"], "message", "{r}");
    // A streamed message response is a single message event.
    let resp = server
        .client
        .post(server.url("/agents/tck/message:stream"))
        .header("A2A-Version", "1.0")
        .json(&json!({"message": message("tck-message-response-y", "hi", None)}))
        .send()
        .await
        .unwrap();
    let body = resp.text().await.unwrap();
    let events: Vec<&str> = body.lines().filter(|l| l.starts_with("data: ")).collect();
    assert_eq!(events.len(), 1, "{body}");
    let e: Value = serde_json::from_str(&events[0]["data: ".len()..]).unwrap();
    assert_eq!(e["message"]["parts"][0]["text"], "Direct message response");
    // Nothing was stored for the direct answers.
    let list = rpc(&server, "tck", "ListTasks", json!({})).await;
    assert_eq!(list["result"]["totalSize"], 0, "{list}");
}

#[tokio::test]
async fn core_hist_005_input_required_turns_then_completion() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let t = send(&server, "tck-input-required-1a2b", "TCK start", None).await;
    assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let id = t["id"].as_str().unwrap().to_owned();
    for text in ["TCK history message 1", "TCK history message 2"] {
        let t = send(&server, "tck-input-required-1a2b", text, Some(&id)).await;
        assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
        assert_eq!(t["id"], id.as_str());
    }
    let t = send(
        &server,
        "tck-complete-task-1a2b",
        "TCK complete after history",
        Some(&id),
    )
    .await;
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED");
    let got = rpc(
        &server,
        "tck",
        "GetTask",
        json!({"id": id, "historyLength": 10}),
    )
    .await;
    let texts: Vec<&str> = got["result"]["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "ROLE_USER")
        .map(|m| m["parts"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "TCK start",
            "TCK history message 1",
            "TCK history message 2",
            "TCK complete after history"
        ]
    );
    // A terminal task takes no more messages (CORE-SEND-002).
    let r = rpc(
        &server,
        "tck",
        "SendMessage",
        json!({"message": message("tck-terminal-1a2b", "x", Some(&id))}),
    )
    .await;
    assert_eq!(r["error"]["code"], -32004, "{r}");
}

#[tokio::test]
async fn stream_sub_002_subscription_to_an_input_required_task_ends_at_its_completion() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let t = send(&server, "tck-input-required-1a2b", "TCK", None).await;
    let id = t["id"].as_str().unwrap().to_owned();
    let resp = server
        .client
        .post(server.url("/agents/tck/"))
        .header("A2A-Version", "1.0")
        .json(
            &json!({"jsonrpc": "2.0", "id": 5, "method": "SubscribeToTask", "params": {"id": id}}),
        )
        .send()
        .await
        .unwrap();
    let mut sse = Sse::new(resp);
    let (_, first) = sse.next().await.unwrap();
    assert_eq!(
        first["result"]["task"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );
    let done = send(&server, "tck-complete-task-1a2b", "go on", Some(&id)).await;
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED");
    let mut last = first;
    while let Some((_, e)) = sse.next().await {
        last = e;
    }
    assert_eq!(
        last["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[tokio::test]
async fn stream_artifact_chunked_shares_one_artifact() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let resp = server
        .client
        .post(server.url("/agents/tck/message:stream"))
        .header("A2A-Version", "1.0")
        .json(&json!({"message": message("tck-stream-artifact-chunked-1a", "x", None)}))
        .send()
        .await
        .unwrap();
    let mut sse = Sse::new(resp);
    let mut chunks = vec![];
    let mut states = vec![];
    while let Some((_, e)) = sse.next().await {
        if let Some(a) = e.get("artifactUpdate") {
            chunks.push((
                a["artifact"]["artifactId"].as_str().unwrap().to_owned(),
                a["artifact"]["parts"][0]["text"].clone(),
                a["append"].as_bool().unwrap_or(false),
                a["lastChunk"].as_bool().unwrap_or(false),
            ));
        } else if let Some(s) = e.get("statusUpdate") {
            states.push(s["status"]["state"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(chunks.len(), 2);
    assert_eq!(chunks[0].0, chunks[1].0);
    assert_eq!(
        (chunks[0].1.clone(), chunks[0].2, chunks[0].3),
        (json!("chunk-1 "), false, false)
    );
    assert_eq!(
        (chunks[1].1.clone(), chunks[1].2, chunks[1].3),
        (json!("chunk-2"), true, true)
    );
    assert_eq!(states, ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]);
}

#[tokio::test]
async fn acts_text_prefixes_cancel_multi_turn_and_unknown_behaviours() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let held = rpc(
        &server,
        "tck",
        "SendMessage",
        json!({"message": message("6a1f0c8e", "tck-cancel hold", None),
               "configuration": {"returnImmediately": true}}),
    )
    .await;
    let id = held["result"]["task"]["id"].as_str().unwrap().to_owned();
    let canceled = rpc(&server, "tck", "CancelTask", json!({"id": id})).await;
    assert_eq!(
        canceled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );

    let t = send(&server, "u1", "tck-multi-turn start", None).await;
    assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let id = t["id"].as_str().unwrap().to_owned();
    let t = send(&server, "u2", "here is more input", Some(&id)).await;
    assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let t = send(&server, "u3", "done", Some(&id)).await;
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED");

    for (text, state) in [
        ("tck-task-failure x", "TASK_STATE_FAILED"),
        ("tck-auth-required x", "TASK_STATE_AUTH_REQUIRED"),
        ("tck-reject-task x", "TASK_STATE_REJECTED"),
        ("tck-nonsense x", "TASK_STATE_FAILED"),
    ] {
        let t = send(&server, "u4", text, None).await;
        assert_eq!(t["status"]["state"], state, "{text}");
        assert!(t["status"]["message"]["parts"][0]["text"].is_string());
    }
}

#[tokio::test]
async fn core_cap_002_minimal_card_refuses_streams_with_plain_json() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let card = server
        .client
        .get(server.url("/agents/tck-min/.well-known/agent-card.json"))
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(card["capabilities"]["streaming"], false);
    let resp = server
        .client
        .post(server.url("/agents/tck-min/"))
        .header("A2A-Version", "1.0")
        .json(
            &json!({"jsonrpc": "2.0", "id": 3, "method": "SendStreamingMessage",
                      "params": {"message": message("tck-stream-001-a", "x", None)}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "application/json");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32004, "{body}");
}

#[tokio::test]
async fn core_cap_004_a_required_extension_must_be_activated() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path());
    let (_, card) = server
        .get("/agents/tck-ext/.well-known/agent-card.json")
        .await;
    assert_eq!(
        card["capabilities"]["extensions"][0]["uri"],
        "urn:a2a:tck:required-extension"
    );
    assert_eq!(card["capabilities"]["extensions"][0]["required"], true);
    let r = rpc(
        &server,
        "tck-ext",
        "SendMessage",
        json!({"message": message("tck-complete-task-1", "x", None)}),
    )
    .await;
    assert_eq!(r["error"]["code"], -32008, "{r}");
    assert_eq!(
        r["error"]["data"][0]["reason"],
        "EXTENSION_SUPPORT_REQUIRED"
    );
    let rest = server
        .client
        .post(server.url("/agents/tck-ext/message:send"))
        .header("A2A-Version", "1.0")
        .json(&json!({"message": message("tck-complete-task-2", "x", None)}))
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 400);
    let body: Value = rest.json().await.unwrap();
    assert_eq!(
        body["error"]["details"][0]["reason"],
        "EXTENSION_SUPPORT_REQUIRED"
    );
    // Activated (with another, unknown one): served, and echoed back.
    let ok = server
        .client
        .post(server.url("/agents/tck-ext/message:send"))
        .header("A2A-Version", "1.0")
        .header(
            "A2A-Extensions",
            "https://example.com/other, urn:a2a:tck:required-extension",
        )
        .json(&json!({"message": message("tck-complete-task-3", "x", None)}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        ok.headers()["a2a-extensions"],
        "urn:a2a:tck:required-extension"
    );
    let body: Value = ok.json().await.unwrap();
    assert_eq!(body["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    // 0.3's header name is answered in kind.
    let legacy = server
        .client
        .post(server.url("/agents/tck-ext/"))
        .header("X-A2A-Extensions", "urn:a2a:tck:required-extension")
        .json(
            &json!({"jsonrpc": "2.0", "id": 4, "method": "message/send", "params": {"message": {
            "kind": "message", "messageId": "tck-complete-task-4", "role": "user",
            "parts": [{"kind": "text", "text": "x"}]}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        legacy.headers()["x-a2a-extensions"],
        "urn:a2a:tck:required-extension"
    );
    assert!(legacy.headers().get("a2a-extensions").is_none());
    let body: Value = legacy.json().await.unwrap();
    assert_eq!(body["result"]["status"]["state"], "completed", "{body}");
}

#[tokio::test]
async fn a_task_waiting_for_input_survives_a_restart_and_continues() {
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let server = serve(dir.path());
        let t = send(&server, "tck-input-required-1a2b", "TCK", None).await;
        t["id"].as_str().unwrap().to_owned()
    };
    let server = Server::start(dir.path());
    let got = rpc(&server, "tck", "GetTask", json!({"id": id})).await;
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{got}"
    );
    let t = send(&server, "tck-complete-task-1a2b", "more", Some(&id)).await;
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED");
}
