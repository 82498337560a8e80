//! A2A 0.3's HTTP+JSON binding (`/v1/…` paths, the 0.3 proto's JSON)
//! against the real binary.

use reqwest::Method;
use serde_json::{Value, json};

use super::harness::*;

fn send(text: &str) -> Value {
    json!({"message": {"messageId": "r1", "role": "ROLE_USER", "content": [{"text": text}]}})
}

#[tokio::test]
async fn http_json_binding_0_3_send_get_cancel_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let (status, sent) = server
        .rest(Method::POST, "/v1/message:send", None, Some(send("hello")))
        .await;
    assert_eq!(status, 200, "{sent}");
    let task = &sent["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(task["history"][0]["content"], json!([{"text": "hello"}]));
    assert!(task["history"][0].get("parts").is_none(), "{task}");
    assert_eq!(
        task["status"]["message"]["content"],
        json!([{"text": "hello"}])
    );
    assert_eq!(task["artifacts"][0]["parts"], json!([{"text": "hello"}]));
    let id = task["id"].as_str().unwrap();

    // The same task, through a named instance's /v1/ path too.
    let (status, got) = server
        .rest(
            Method::GET,
            &format!("/agents/default/v1/tasks/{id}?historyLength=0"),
            None,
            None,
        )
        .await;
    assert_eq!((status, got["id"].as_str()), (200, Some(id)));
    assert!(got.get("history").is_none(), "{got}");

    let (status, err) = server
        .rest(Method::POST, &format!("/v1/tasks/{id}:cancel"), None, None)
        .await;
    assert_eq!(
        (status, err["error"]["status"].as_str()),
        (400, Some("FAILED_PRECONDITION")),
        "{err}"
    );
    assert_eq!(err["error"]["details"][0]["reason"], "TASK_NOT_CANCELABLE");
    // 0.3 clients read the error's type.
    assert_eq!(err["type"], "TaskNotCancelableError");

    // 1.0 names, a 1.0 header on a 0.3 path, push configs, a missing task.
    let bad =
        json!({"message": {"messageId": "r2", "role": "ROLE_USER", "parts": [{"text": "x"}]}});
    let (status, err) = server
        .rest(Method::POST, "/v1/message:send", None, Some(bad))
        .await;
    assert_eq!(status, 400, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("content"),
        "{err}"
    );
    let (status, err) = server
        .rest(
            Method::POST,
            "/v1/message:send",
            Some("1.0"),
            Some(send("x")),
        )
        .await;
    assert_eq!(
        (status, err["error"]["details"][0]["reason"].as_str()),
        (400, Some("VERSION_NOT_SUPPORTED"))
    );
    let push = json!({"url": "http://127.0.0.1:9/hook"});
    let (status, err) = server
        .rest(
            Method::POST,
            &format!("/v1/tasks/{id}/pushNotificationConfigs"),
            None,
            Some(push),
        )
        .await;
    assert_eq!(
        (status, err["error"]["details"][0]["reason"].as_str()),
        (400, Some("PUSH_NOTIFICATION_NOT_SUPPORTED"))
    );
    let (status, _) = server
        .rest(
            Method::GET,
            "/v1/tasks/0190a0a0-0000-7000-8000-000000000000",
            None,
            None,
        )
        .await;
    assert_eq!(status, 404);
    let (status, err) = server.rest(Method::GET, "/v1/card", None, None).await;
    assert_eq!(
        (status, err["error"]["details"][0]["reason"].as_str()),
        (400, Some("EXTENDED_AGENT_CARD_NOT_CONFIGURED"))
    );
}

#[tokio::test]
async fn http_json_binding_0_3_stream_marks_the_last_update_final() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let resp = server
        .client
        .post(server.url("/v1/message:stream"))
        .json(&send("hi"))
        .send()
        .await
        .unwrap();
    let mut sse = Sse::new(resp);
    let mut events = vec![];
    while let Some((_, e)) = sse.next().await {
        events.push(e);
    }
    assert_eq!(
        events[0]["task"]["history"][0]["content"],
        json!([{"text": "hi"}])
    );
    assert_eq!(
        events[1]["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    assert_eq!(events[1]["statusUpdate"]["final"], false);
    assert_eq!(
        events[2]["artifactUpdate"]["artifact"]["parts"],
        json!([{"text": "hi"}])
    );
    let last = events.last().unwrap();
    assert_eq!(
        last["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert_eq!(last["statusUpdate"]["final"], true);
    assert_eq!(events.len(), 4);
}
