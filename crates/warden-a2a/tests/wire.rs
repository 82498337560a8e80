//! The wire types against captures of the official Python SDK: every
//! capture parses, serializes back to the same JSON, and converts to
//! warden's task model and back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use warden_a2a::wire::{v1, v03};
use warden_core::{PartContent, Role, TaskState};

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Python writes microseconds; warden keeps milliseconds.
fn to_millis(mut v: Value) -> Value {
    match &mut v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "timestamp"
                    && let Value::String(s) = x
                    && let Some((head, frac)) = s.trim_end_matches('Z').split_once('.')
                {
                    *s = format!("{head}.{}Z", &frac[..3]);
                } else {
                    *x = to_millis(x.take());
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| *x = to_millis(x.take())),
        _ => {}
    }
    v
}

#[test]
fn v1_send_response_round_trips_and_converts() {
    let result = fixture("jr10_send")["result"].clone();
    let wire: v1::StreamResponse = serde_json::from_value(result.clone()).unwrap();
    assert_eq!(serde_json::to_value(&wire).unwrap(), result);
    let v1::StreamResponse::Task(task) = wire else {
        panic!("expected a task")
    };
    let core: warden_core::Task = task.try_into().unwrap();
    assert_eq!(core.status.state, TaskState::Completed);
    assert_eq!(core.history[0].role, Role::User);
    assert_eq!(
        core.history[0].parts[0].content,
        PartContent::Text("hello".into())
    );
    assert_eq!(
        core.artifacts[0].parts[0].content,
        PartContent::Text("echo: hello".into())
    );
    let back = serde_json::to_value(v1::StreamResponse::Task((&core).into())).unwrap();
    assert_eq!(back, to_millis(result));
}

#[test]
fn v1_stream_and_rest_payloads_round_trip() {
    for name in ["jr10_stream", "rest10_subscribe"] {
        for event in fixture(name).as_array().unwrap() {
            let payload = event.get("result").unwrap_or(event).clone();
            let wire: v1::StreamResponse = serde_json::from_value(payload.clone()).unwrap();
            assert_eq!(serde_json::to_value(&wire).unwrap(), payload, "{name}");
        }
    }
    let rest = fixture("rest10_send");
    let wire: v1::StreamResponse = serde_json::from_value(rest.clone()).unwrap();
    assert_eq!(serde_json::to_value(&wire).unwrap(), rest);
}

#[test]
fn v03_send_and_stream_round_trip_and_convert() {
    let result = fixture("jr03_send")["result"].clone();
    let wire: v03::Event = serde_json::from_value(result.clone()).unwrap();
    assert_eq!(serde_json::to_value(&wire).unwrap(), result);
    let v03::Event::Task(task) = wire else {
        panic!("expected a task")
    };
    let core: warden_core::Task = task.try_into().unwrap();
    assert_eq!(core.status.state, TaskState::Completed);
    let back = serde_json::to_value(v03::Event::Task((&core).into())).unwrap();
    assert_eq!(back, to_millis(result));

    let events = fixture("jr03_stream");
    let kinds: Vec<(String, Option<bool>)> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let payload = e["result"].clone();
            let wire: v03::Event = serde_json::from_value(payload.clone()).unwrap();
            assert_eq!(serde_json::to_value(&wire).unwrap(), payload);
            (
                payload["kind"].as_str().unwrap().to_owned(),
                payload["final"].as_bool(),
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
}

#[test]
fn invalid_client_messages_name_the_field() {
    let v1_err = |m: Value| {
        let wire: v1::Message = serde_json::from_value(m).unwrap();
        warden_core::Message::try_from(wire).unwrap_err().field
    };
    assert_eq!(
        v1_err(json!({"role": "ROLE_USER", "parts": [{"text": "x"}]})),
        "messageId"
    );
    assert_eq!(
        v1_err(json!({"messageId": "m", "parts": [{"text": "x"}]})),
        "role"
    );
    assert_eq!(
        v1_err(json!({"messageId": "m", "role": "ROLE_UNSPECIFIED", "parts": [{"text": "x"}]})),
        "role"
    );
    assert_eq!(
        v1_err(json!({"messageId": "m", "role": "ROLE_USER", "parts": []})),
        "parts"
    );
    assert_eq!(
        v1_err(json!({"messageId": "m", "role": "ROLE_USER", "parts": [{}]})),
        "parts[0]"
    );
    assert_eq!(
        v1_err(
            json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a", "url": "b"}]})
        ),
        "parts[0]"
    );
    assert_eq!(
        v1_err(json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"raw": "%%"}]})),
        "parts[0].raw"
    );

    let v03_err = |m: Value| {
        let wire: v03::Message = serde_json::from_value(m).unwrap();
        warden_core::Message::try_from(wire).unwrap_err().field
    };
    let msg =
        |parts: Value| json!({"kind": "message", "messageId": "m", "role": "user", "parts": parts});
    assert_eq!(v03_err(msg(json!([]))), "parts");
    assert_eq!(
        v03_err(msg(json!([{"kind": "file", "file": {}}]))),
        "parts[0].file"
    );
    assert!(
        serde_json::from_value::<v03::Message>(
            json!({"kind": "task", "messageId": "m", "role": "user", "parts": []})
        )
        .is_err()
    );
    assert!(serde_json::from_value::<v03::Message>(msg(json!([{"kind": "image"}]))).is_err());
}

#[test]
fn parts_convert_between_versions_without_loss() {
    let v1_parts = json!([
        {"text": "hi"},
        {"raw": "aGVsbG8=", "filename": "h.txt", "mediaType": "text/plain"},
        {"url": "https://example.invalid/x", "mediaType": "image/png"},
        {"data": {"k": [1, 2]}}
    ]);
    let msg: v1::Message =
        serde_json::from_value(json!({"messageId": "m", "role": "ROLE_AGENT", "parts": v1_parts}))
            .unwrap();
    let core: warden_core::Message = msg.clone().try_into().unwrap();
    assert_eq!(core.parts[1].content, PartContent::Raw(b"hello".to_vec()));
    assert_eq!(v1::Message::from(&core), msg);
    let as03 = serde_json::to_value(v03::Message::from(&core)).unwrap();
    assert_eq!(
        as03["parts"],
        json!([
            {"kind": "text", "text": "hi"},
            {"kind": "file", "file": {"name": "h.txt", "mimeType": "text/plain", "bytes": "aGVsbG8="}},
            {"kind": "file", "file": {"mimeType": "image/png", "uri": "https://example.invalid/x"}},
            {"kind": "data", "data": {"k": [1, 2]}}
        ])
    );
    let again: warden_core::Message = serde_json::from_value::<v03::Message>(as03)
        .unwrap()
        .try_into()
        .unwrap();
    assert_eq!(again, core);
}
