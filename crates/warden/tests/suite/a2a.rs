//! A2A over JSON-RPC against the real binary, both protocol versions.

use serde_json::{Value, json};

use super::harness::*;

async fn rpc(server: &Server, path: &str, version: Option<&str>, body: Value) -> Value {
    let mut req = server.client.post(server.url(path)).json(&body);
    if let Some(v) = version {
        req = req.header("A2A-Version", v);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200, "JSON-RPC answers errors with HTTP 200");
    resp.json().await.unwrap()
}

fn call(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[tokio::test]
async fn card_is_pure_1_0_with_the_header_and_carries_0_3_fields_without() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let v1 = server
        .client
        .get(server.url("/.well-known/agent-card.json"))
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(v1.status(), 200);
    let etag = v1.headers()["etag"].to_str().unwrap().to_owned();
    assert!(
        v1.headers()["cache-control"]
            .to_str()
            .unwrap()
            .contains("max-age")
    );
    assert!(
        v1.headers()["last-modified"]
            .to_str()
            .unwrap()
            .ends_with(" GMT")
    );
    let card: Value = v1.json().await.unwrap();
    assert_eq!(card["name"], "default");
    assert!(
        card.get("url").is_none() && card.get("protocolVersion").is_none(),
        "{card}"
    );
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["capabilities"]["pushNotifications"], false);
    // The default instance takes adapter commands in the server's workspace.
    let uris: Vec<&str> = card["capabilities"]["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        [
            "https://agentic-sandbox.aiwg.io/extensions/adapter-command/v1",
            "https://agentic-sandbox.aiwg.io/extensions/hitl-prompt/v1"
        ]
    );
    // No trailing slash: clients append `/message:send` and the like.
    let url = server.base.clone();
    assert_eq!(
        card["supportedInterfaces"],
        json!([
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
        ])
    );
    let again = server
        .client
        .get(server.url("/.well-known/agent-card.json"))
        .header("A2A-Version", "1.0")
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);

    let (_, v03) = server.get("/.well-known/agent-card.json").await;
    assert_eq!(
        (v03["url"].as_str(), v03["preferredTransport"].as_str()),
        (Some(url.as_str()), Some("JSONRPC"))
    );
    assert_eq!(v03["protocolVersion"], "0.3.0");
    let (_, named) = server
        .get("/agents/default/.well-known/agent-card.json")
        .await;
    assert_eq!(named["url"], format!("{}/agents/default", server.base));
    let (status, missing) = server
        .get("/agents/nobody/.well-known/agent-card.json")
        .await;
    assert_eq!(
        (status, missing["error"]["status"].as_str()),
        (404, Some("NOT_FOUND"))
    );
    let bad = server
        .client
        .get(server.url("/.well-known/agent-card.json"))
        .header("A2A-Version", "99.0")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
}

#[tokio::test]
async fn core_send_get_cancel_1_0() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let msg = json!({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hello"}]});
    let sent = rpc(
        &server,
        "/",
        Some("1.0"),
        call(1, "SendMessage", json!({"message": msg})),
    )
    .await;
    let task = &sent["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent}");
    assert_eq!(task["artifacts"][0]["name"], "echo");
    assert_eq!(task["artifacts"][0]["parts"], json!([{"text": "hello"}]));
    assert_eq!(task["status"]["message"]["role"], "ROLE_AGENT");
    assert_eq!(
        task["status"]["message"]["parts"],
        json!([{"text": "hello"}])
    );
    let id = task["id"].as_str().unwrap();
    let ctx = task["contextId"].as_str().unwrap();
    assert_eq!(
        task["history"][0],
        json!({"messageId": "m1", "contextId": ctx, "taskId": id, "role": "ROLE_USER", "parts": [{"text": "hello"}]})
    );

    let got = rpc(
        &server,
        "/",
        Some("1.0"),
        call(2, "GetTask", json!({"id": id})),
    )
    .await;
    assert_eq!(&got["result"], task);
    let short = rpc(
        &server,
        "/",
        Some("1.0"),
        call(3, "GetTask", json!({"id": id, "historyLength": 0})),
    )
    .await;
    assert!(short["result"].get("history").is_none(), "{short}");

    let cancel = rpc(
        &server,
        "/",
        Some("1.0"),
        call(4, "CancelTask", json!({"id": id})),
    )
    .await;
    assert_eq!(cancel["error"]["code"], -32002, "{cancel}");
    assert_eq!(cancel["error"]["data"][0]["reason"], "TASK_NOT_CANCELABLE");

    let missing = rpc(
        &server,
        "/",
        Some("1.0"),
        call(5, "GetTask", json!({"id": "nope"})),
    )
    .await;
    assert_eq!(missing["id"], 5);
    assert_eq!(missing["error"]["code"], -32001);
    assert_eq!(
        missing["error"]["data"][0]["@type"],
        "type.googleapis.com/google.rpc.ErrorInfo"
    );

    let listed = rpc(
        &server,
        "/",
        Some("1.0"),
        call(6, "ListTasks", json!({"pageSize": 10})),
    )
    .await;
    assert_eq!(listed["result"]["totalSize"], 1, "{listed}");
    assert_eq!(listed["result"]["nextPageToken"], "");
    assert_eq!(listed["result"]["tasks"][0]["id"], id);
    assert!(
        listed["result"]["tasks"][0].get("artifacts").is_none(),
        "artifacts only on request"
    );

    // Follow-ups to an ended task are refused, not silently restarted.
    let follow =
        json!({"messageId": "m2", "role": "ROLE_USER", "taskId": id, "parts": [{"text": "again"}]});
    let refused = rpc(
        &server,
        "/",
        Some("1.0"),
        call(7, "SendMessage", json!({"message": follow})),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32004, "{refused}");
}

#[tokio::test]
async fn core_send_get_0_3_and_tasks_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let server = Server::start(dir.path());
        let msg = json!({"kind": "message", "messageId": "m3", "role": "user", "parts": [{"kind": "text", "text": "hello"}]});
        let sent = rpc(
            &server,
            "/agents/default",
            None,
            call(1, "message/send", json!({"message": msg})),
        )
        .await;
        let task = &sent["result"];
        assert_eq!(
            (task["kind"].as_str(), task["status"]["state"].as_str()),
            (Some("task"), Some("completed")),
            "{sent}"
        );
        assert_eq!(
            task["artifacts"][0]["parts"],
            json!([{"kind": "text", "text": "hello"}])
        );
        assert_eq!(task["history"][0]["kind"], "message");
        task["id"].as_str().unwrap().to_owned()
    };
    let server = Server::start(dir.path());
    let got = rpc(&server, "/", None, call(2, "tasks/get", json!({"id": id}))).await;
    assert_eq!(got["result"]["status"]["state"], "completed", "{got}");
    assert_eq!(got["result"]["artifacts"][0]["parts"][0]["text"], "hello");
}

#[tokio::test]
async fn protocol_errors_are_json_rpc_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let code = |v: &Value| v["error"]["code"].as_i64();

    let raw = server
        .client
        .post(server.url("/"))
        .header("content-type", "application/json")
        .body("{oops")
        .send()
        .await
        .unwrap();
    let parse: Value = raw.json().await.unwrap();
    assert_eq!((code(&parse), &parse["id"]), (Some(-32700), &Value::Null));
    let no_version = rpc(&server, "/", None, json!({"id": 1, "method": "tasks/get"})).await;
    assert_eq!(code(&no_version), Some(-32600));
    let bad_version = rpc(
        &server,
        "/",
        Some("99.0"),
        call(2, "GetTask", json!({"id": "x"})),
    )
    .await;
    assert_eq!(code(&bad_version), Some(-32009));
    assert_eq!(
        bad_version["error"]["data"][0]["reason"],
        "VERSION_NOT_SUPPORTED"
    );
    let unknown = rpc(&server, "/", None, call(3, "SendMessage", json!({}))).await;
    assert_eq!(code(&unknown), Some(-32601));
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("A2A-Version: 1.0")
    );

    let empty = rpc(&server, "/", Some("1.0"), call(4, "SendMessage", json!({}))).await;
    assert_eq!(
        code(&empty),
        Some(-32602),
        "an empty SendMessage is an error"
    );
    assert_eq!(
        empty["error"]["data"][1]["fieldViolations"][0]["field"],
        "message"
    );
    let no_parts = rpc(
        &server,
        "/",
        Some("1.0"),
        call(
            5,
            "SendMessage",
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}),
        ),
    )
    .await;
    assert_eq!(
        no_parts["error"]["data"][1]["fieldViolations"][0]["field"],
        "message.parts"
    );
    let push = rpc(
        &server,
        "/",
        Some("1.0"),
        call(6, "SendMessage", json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]},
                                       "configuration": {"taskPushNotificationConfig": {"url": "http://127.0.0.1:9/"}}})),
    )
    .await;
    assert_eq!(code(&push), Some(-32003));
    let stream = rpc(
        &server,
        "/",
        Some("1.0"),
        call(7, "SendStreamingMessage", json!({})),
    )
    .await;
    assert_eq!(
        code(&stream),
        Some(-32602),
        "a stream that cannot start is a plain JSON-RPC error"
    );
    let card = rpc(
        &server,
        "/",
        None,
        call(8, "agent/getAuthenticatedExtendedCard", json!({})),
    )
    .await;
    assert_eq!(code(&card), Some(-32007));

    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{{\"pad\":\"{}\"}}}}",
        "x".repeat((1 << 20) + 1024)
    );
    let resp = server
        .client
        .post(server.url("/"))
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 413);
    let err: Value = resp.json().await.unwrap();
    assert_eq!(err["error"]["code"], 413);

    let (_, list) = server.get("/api/v1/runs").await;
    assert_eq!(list, json!({"runs": []}));
}

/// Posts a streaming JSON-RPC call and reads every SSE event until the stream closes.
async fn stream(
    server: &Server,
    version: Option<&str>,
    last_event_id: Option<u64>,
    body: Value,
) -> Vec<(u64, Value)> {
    use futures_util::StreamExt;
    let mut req = server.client.post(server.url("/")).json(&body);
    if let Some(v) = version {
        req = req.header("A2A-Version", v);
    }
    if let Some(id) = last_event_id {
        req = req.header("Last-Event-ID", id.to_string());
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut bytes = resp.bytes_stream();
    let mut buf = String::new();
    let mut out = Vec::new();
    let read = async {
        while let Some(chunk) = bytes.next().await {
            buf.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
            while let Some(end) = buf.find("\n\n") {
                let block: String = buf.drain(..end + 2).collect();
                let id = block
                    .lines()
                    .find_map(|l| l.strip_prefix("id: "))
                    .map(|v| v.parse::<u64>().unwrap());
                let data: String = block
                    .lines()
                    .filter_map(|l| l.strip_prefix("data: "))
                    .collect();
                if let Some(id) = id {
                    out.push((id, serde_json::from_str(&data).unwrap()));
                }
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(20), read)
        .await
        .expect("stream did not close");
    out
}

#[tokio::test]
async fn streaming_send_1_0_starts_with_the_task_and_ends_at_the_terminal_state() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let msg = json!({"messageId": "s1", "role": "ROLE_USER", "parts": [{"text": "hello"}]});
    let events = stream(
        &server,
        Some("1.0"),
        None,
        call(9, "SendStreamingMessage", json!({"message": msg})),
    )
    .await;
    let ids: Vec<u64> = events.iter().map(|(id, _)| *id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    assert!(
        events
            .iter()
            .all(|(_, e)| e["id"] == 9 && e["jsonrpc"] == "2.0")
    );
    let shapes: Vec<String> = events
        .iter()
        .map(|(_, e)| {
            let r = &e["result"];
            match r.as_object().unwrap().keys().next().unwrap().as_str() {
                "task" => format!("task:{}", r["task"]["status"]["state"].as_str().unwrap()),
                "statusUpdate" => format!(
                    "status:{}",
                    r["statusUpdate"]["status"]["state"].as_str().unwrap()
                ),
                other => other.to_owned(),
            }
        })
        .collect();
    assert_eq!(
        shapes,
        [
            "task:TASK_STATE_SUBMITTED",
            "status:TASK_STATE_WORKING",
            "artifactUpdate",
            "status:TASK_STATE_COMPLETED"
        ]
    );
    assert_eq!(
        events[2].1["result"]["artifactUpdate"]["artifact"]["parts"],
        json!([{"text": "hello"}])
    );
    assert_eq!(events[2].1["result"]["artifactUpdate"]["lastChunk"], true);

    // Resubscribing to the ended task is an error; resuming after the first
    // event replays exactly what came after it.
    let task_id = events[0].1["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let refused = rpc(
        &server,
        "/",
        Some("1.0"),
        call(10, "SubscribeToTask", json!({"id": task_id})),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32004, "{refused}");
    let missing = rpc(
        &server,
        "/",
        Some("1.0"),
        call(11, "SubscribeToTask", json!({"id": "nope"})),
    )
    .await;
    assert_eq!(missing["error"]["code"], -32001);
    let resumed = stream(
        &server,
        Some("1.0"),
        Some(events[0].0),
        call(12, "SubscribeToTask", json!({"id": task_id})),
    )
    .await;
    let resumed_ids: Vec<u64> = resumed.iter().map(|(id, _)| *id).collect();
    assert_eq!(resumed_ids, ids[1..].to_vec());
}

#[tokio::test]
async fn streaming_send_0_3_marks_the_last_event_final() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let msg = json!({"kind": "message", "messageId": "s2", "role": "user", "parts": [{"kind": "text", "text": "hi"}]});
    let events = stream(
        &server,
        None,
        None,
        call(
            3,
            "message/stream",
            json!({"message": msg, "configuration": {"historyLength": 0}}),
        ),
    )
    .await;
    let kinds: Vec<(String, Option<bool>)> = events
        .iter()
        .map(|(_, e)| {
            (
                e["result"]["kind"].as_str().unwrap().to_owned(),
                e["result"]["final"].as_bool(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("task".into(), None),
            ("status-update".into(), Some(false)),
            ("artifact-update".into(), None),
            ("status-update".into(), Some(true)),
        ]
    );
    assert_eq!(events[3].1["result"]["status"]["state"], "completed");
    assert!(
        events[0].1["result"].get("history").is_none(),
        "historyLength 0 applies to the first task event"
    );
}

#[tokio::test]
async fn http_json_binding_1_0() {
    use reqwest::Method;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let msg =
        json!({"message": {"messageId": "r1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}});

    let resp = server
        .client
        .post(server.url("/message:send"))
        .header("A2A-Version", "1.0")
        .json(&msg)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // Plain JSON unless the client names application/a2a+json.
    assert_eq!(resp.headers()["content-type"], "application/json");
    let sent: Value = resp.json().await.unwrap();
    let named = server
        .client
        .post(server.url("/message:send"))
        .header("A2A-Version", "1.0")
        .header("Accept", "application/a2a+json")
        .json(&msg)
        .send()
        .await
        .unwrap();
    assert_eq!(named.headers()["content-type"], "application/a2a+json");
    // A body that is not JSON is 415 on HTTP+JSON and -32005 on JSON-RPC.
    let plain = server
        .client
        .post(server.url("/message:send"))
        .header("A2A-Version", "1.0")
        .header("Content-Type", "text/plain")
        .body(msg.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 415);
    let err: Value = plain.json().await.unwrap();
    assert_eq!(
        err["error"]["details"][0]["reason"],
        "CONTENT_TYPE_NOT_SUPPORTED"
    );
    let rpc_plain = server
        .client
        .post(server.url("/"))
        .header("A2A-Version", "1.0")
        .header("Content-Type", "text/plain")
        .body("{'jsonrpc': '2.0'}")
        .send()
        .await
        .unwrap();
    let err: Value = rpc_plain.json().await.unwrap();
    assert_eq!(err["error"]["code"], -32005, "{err}");
    // Every push-config route says push is not supported (CORE-CAP-001).
    for (method, path) in [
        (Method::POST, "/tasks/t1/pushNotificationConfigs"),
        (Method::GET, "/tasks/t1/pushNotificationConfigs"),
        (Method::DELETE, "/tasks/t1/pushNotificationConfigs/c1"),
    ] {
        let (status, err) = server
            .rest(
                method,
                path,
                Some("1.0"),
                Some(json!({"url": "https://example.com"})),
            )
            .await;
        assert_eq!(
            (status, err["error"]["details"][0]["reason"].as_str()),
            (400, Some("PUSH_NOTIFICATION_NOT_SUPPORTED")),
            "{path}"
        );
    }
    assert_eq!(
        sent["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{sent}"
    );
    let id = sent["task"]["id"].as_str().unwrap().to_owned();

    let (status, got) = server
        .rest(Method::GET, &format!("/tasks/{id}"), Some("1.0"), None)
        .await;
    assert_eq!((status, &got), (200, &sent["task"]));
    let (status, err) = server
        .rest(
            Method::GET,
            &format!("/tasks/{id}?historyLength=-1"),
            Some("1.0"),
            None,
        )
        .await;
    assert_eq!(
        (status, err["error"]["status"].as_str()),
        (400, Some("INVALID_ARGUMENT"))
    );
    let (status, listed) = server
        .rest(
            Method::GET,
            "/agents/default/tasks?pageSize=5",
            Some("1.0"),
            None,
        )
        .await;
    assert_eq!((status, listed["totalSize"].as_u64()), (200, Some(2)));

    let (status, err) = server
        .rest(Method::GET, "/tasks/nope", Some("1.0"), None)
        .await;
    assert_eq!(status, 404);
    assert_eq!(err["error"]["status"], "NOT_FOUND");
    assert_eq!(err["error"]["details"][0]["reason"], "TASK_NOT_FOUND");
    let (status, err) = server
        .rest(
            Method::POST,
            &format!("/tasks/{id}:cancel"),
            Some("1.0"),
            None,
        )
        .await;
    assert_eq!(
        (status, err["error"]["details"][0]["reason"].as_str()),
        (400, Some("TASK_NOT_CANCELABLE"))
    );
    let (status, err) = server
        .rest(
            Method::GET,
            &format!("/tasks/{id}:subscribe"),
            Some("1.0"),
            None,
        )
        .await;
    assert_eq!(
        (status, err["error"]["details"][0]["reason"].as_str()),
        (400, Some("UNSUPPORTED_OPERATION"))
    );
    let (status, err) = server
        .rest(Method::POST, "/message:send", Some("1.0"), Some(json!({})))
        .await;
    assert_eq!(
        (status, err["error"]["details"][0]["reason"].as_str()),
        (400, Some("INVALID_PARAMS")),
        "an empty send is an error"
    );
    let (status, err) = server
        .rest(Method::POST, "/message:send", None, Some(msg.clone()))
        .await;
    assert_eq!(
        (status, err["error"]["details"][0]["reason"].as_str()),
        (400, Some("VERSION_NOT_SUPPORTED"))
    );
    let (status, err) = server
        .rest(Method::GET, "/extendedAgentCard", Some("1.0"), None)
        .await;
    assert_eq!(
        (status, err["error"]["details"][0]["reason"].as_str()),
        (400, Some("EXTENDED_AGENT_CARD_NOT_CONFIGURED"))
    );
    let (status, _) = server
        .rest(
            Method::GET,
            "/agents/default/nothing-here",
            Some("1.0"),
            None,
        )
        .await;
    assert_eq!(status, 404);

    // Streams on this binding carry bare StreamResponse objects.
    use futures_util::StreamExt;
    let resp = server
        .client
        .post(server.url("/agents/default/message:stream"))
        .header("A2A-Version", "1.0")
        .json(&msg)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut text = String::new();
    let mut bytes = resp.bytes_stream();
    tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while let Some(chunk) = bytes.next().await {
            text.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
        }
    })
    .await
    .unwrap();
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let keys: Vec<&str> = events
        .iter()
        .map(|e| e.as_object().unwrap().keys().next().unwrap().as_str())
        .collect();
    assert_eq!(
        keys,
        ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
    );
}

#[tokio::test]
async fn version_from_query_or_empty_header_and_bogus_resume_ids() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    // An empty header means 0.3; the query parameter works like the header.
    let resp = server
        .client
        .get(server.url("/.well-known/agent-card.json"))
        .header("A2A-Version", "")
        .send()
        .await
        .unwrap();
    let card: Value = resp.json().await.unwrap();
    assert_eq!(card["protocolVersion"], "0.3.0");
    let msg = json!({"messageId": "q1", "role": "ROLE_USER", "parts": [{"text": "q"}]});
    let sent = rpc(
        &server,
        "/?A2A-Version=1.0",
        None,
        call(1, "SendMessage", json!({"message": msg})),
    )
    .await;
    assert_eq!(
        sent["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{sent}"
    );
    let id = sent["result"]["task"]["id"].as_str().unwrap();

    // A Last-Event-ID past the task's newest event cannot be resumed from.
    let resp = server
        .client
        .post(server.url("/"))
        .header("A2A-Version", "1.0")
        .header("Last-Event-ID", "999999999")
        .json(&call(2, "SubscribeToTask", json!({"id": id})))
        .send()
        .await
        .unwrap();
    let err: Value = resp.json().await.unwrap();
    assert_eq!(err["error"]["code"], -32602, "{err}");
    assert_eq!(
        err["error"]["data"][1]["fieldViolations"][0]["field"],
        "Last-Event-ID"
    );
}
