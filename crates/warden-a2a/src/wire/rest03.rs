//! The 0.3 HTTP+JSON shapes (`/v1/…` paths): the 0.3 proto's JSON, which is
//! the 1.0 ProtoJSON with older names: a message's parts are `content`,
//! file parts nest under `file` (`fileWithUri` / `fileWithBytes`,
//! `mimeType`), data parts under `data.data`, `CANCELLED` has two Ls, and
//! a status update carries `final`. Translated here to and from the 1.0
//! JSON so one parser and one renderer serve both.

use serde_json::{Map, Value, json};

use crate::error::WireError;

fn bad(path: &str, message: &str) -> WireError {
    WireError::new(path, message)
}

/// A 0.3 part as a 1.0 part.
fn part_in(p: Value, path: &str) -> Result<Value, WireError> {
    let Value::Object(mut p) = p else {
        return Err(bad(path, "a part is an object"));
    };
    if let Some(text) = p.remove("text") {
        return Ok(json!({ "text": text }));
    }
    if let Some(file) = p.remove("file") {
        let Value::Object(mut f) = file else {
            return Err(bad(&format!("{path}.file"), "must be an object"));
        };
        let mut out = Map::new();
        match (f.remove("fileWithUri"), f.remove("fileWithBytes")) {
            (Some(uri), None) => out.insert("url".into(), uri),
            (None, Some(bytes)) => out.insert("raw".into(), bytes),
            _ => {
                return Err(bad(
                    &format!("{path}.file"),
                    "needs exactly one of fileWithUri and fileWithBytes",
                ));
            }
        };
        if let Some(m) = f.remove("mimeType") {
            out.insert("mediaType".into(), m);
        }
        if let Some(n) = f.remove("name") {
            out.insert("filename".into(), n);
        }
        return Ok(Value::Object(out));
    }
    if let Some(data) = p.remove("data") {
        let inner = match data {
            Value::Object(mut d) => d.remove("data"),
            _ => None,
        };
        let Some(inner) = inner else {
            return Err(bad(&format!("{path}.data"), "must be {\"data\": {…}}"));
        };
        return Ok(json!({ "data": inner }));
    }
    Err(bad(path, "a part needs text, file or data"))
}

/// A 1.0 part as a 0.3 part (metadata has no place in 0.3 parts).
fn part_out(p: &Value) -> Value {
    if let Some(t) = p.get("text") {
        return json!({ "text": t });
    }
    if let Some(d) = p.get("data") {
        // 0.3 carries a Struct: anything else is wrapped.
        let d = if d.is_object() {
            d.clone()
        } else {
            json!({ "value": d })
        };
        return json!({ "data": { "data": d } });
    }
    let mut f = Map::new();
    if let Some(u) = p.get("url") {
        f.insert("fileWithUri".into(), u.clone());
    }
    if let Some(r) = p.get("raw") {
        f.insert("fileWithBytes".into(), r.clone());
    }
    if let Some(m) = p.get("mediaType") {
        f.insert("mimeType".into(), m.clone());
    }
    if let Some(n) = p.get("filename") {
        f.insert("name".into(), n.clone());
    }
    json!({ "file": f })
}

/// A 0.3 message as a 1.0 message.
pub fn message_in(m: Value, path: &str) -> Result<Value, WireError> {
    let Value::Object(mut m) = m else {
        return Err(bad(path, "a message is an object"));
    };
    if m.contains_key("parts") {
        return Err(bad(
            &format!("{path}.parts"),
            "0.3 HTTP+JSON names a message's parts \"content\"",
        ));
    }
    let content = match m.remove("content") {
        Some(Value::Array(c)) => c,
        Some(_) => return Err(bad(&format!("{path}.content"), "must be an array")),
        None => vec![],
    };
    let parts = content
        .into_iter()
        .enumerate()
        .map(|(i, p)| part_in(p, &format!("{path}.content[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    m.insert("parts".into(), Value::Array(parts));
    Ok(Value::Object(m))
}

/// A 0.3 `SendMessageRequest` as a 1.0 one. `blocking: false` is 1.0's
/// `returnImmediately`; a push config keeps its 1.0 key so it is refused
/// the same way. The message may come as `request`, its proto name.
pub fn send_request_in(mut req: Value) -> Result<Value, WireError> {
    super::json_names(&mut req);
    let Value::Object(mut req) = req else {
        return Err(bad("body", "must be a JSON object"));
    };
    if let Some(m) = req.remove("request") {
        if req.contains_key("message") {
            return Err(bad(
                "request",
                "send the message once, as message or request",
            ));
        }
        req.insert("message".into(), m);
    }
    if let Some(m) = req.remove("message") {
        req.insert("message".into(), message_in(m, "message")?);
    }
    if let Some(Value::Object(mut c)) = req.remove("configuration") {
        let mut out = Map::new();
        for (from, to) in [
            ("acceptedOutputModes", "acceptedOutputModes"),
            ("historyLength", "historyLength"),
            ("pushNotification", "taskPushNotificationConfig"),
        ] {
            if let Some(v) = c.remove(from) {
                out.insert(to.into(), v);
            }
        }
        if let Some(b) = c.remove("blocking") {
            let blocking = b
                .as_bool()
                .ok_or_else(|| bad("configuration.blocking", "must be true or false"))?;
            out.insert("returnImmediately".into(), json!(!blocking));
        }
        if let Some(k) = c.keys().next() {
            return Err(bad(&format!("configuration.{k}"), "unknown field"));
        }
        req.insert("configuration".into(), Value::Object(out));
    }
    Ok(Value::Object(req))
}

fn message_out(m: &mut Value) {
    if let Some(Value::Array(parts)) = m.as_object_mut().and_then(|o| o.remove("parts")) {
        m["content"] = Value::Array(parts.iter().map(part_out).collect());
    }
}

fn status_out(s: &mut Value) {
    if s["state"] == "TASK_STATE_CANCELED" {
        s["state"] = json!("TASK_STATE_CANCELLED");
    }
    if let Some(m) = s.get_mut("message") {
        message_out(m);
    }
}

fn artifact_out(a: &mut Value) {
    if let Some(Value::Array(parts)) = a.get_mut("parts") {
        *parts = parts.iter().map(part_out).collect();
    }
}

/// A 1.0 task as a 0.3 task.
pub fn task_out(t: &mut Value) {
    if let Some(s) = t.get_mut("status") {
        status_out(s);
    }
    if let Some(Value::Array(h)) = t.get_mut("history") {
        h.iter_mut().for_each(message_out);
    }
    if let Some(Value::Array(a)) = t.get_mut("artifacts") {
        a.iter_mut().for_each(artifact_out);
    }
}

/// A 1.0 `SendMessageResponse` or `StreamResponse` as its 0.3 form;
/// `is_final` marks the status update that ends a stream.
pub fn response_out(mut r: Value, is_final: bool) -> Value {
    if let Some(t) = r.get_mut("task") {
        task_out(t);
    }
    if let Some(m) = r.get_mut("message") {
        message_out(m);
    }
    if let Some(u) = r.get_mut("statusUpdate") {
        if let Some(s) = u.get_mut("status") {
            status_out(s);
        }
        u["final"] = json!(is_final);
    }
    if let Some(a) = r
        .get_mut("artifactUpdate")
        .and_then(|u| u.get_mut("artifact"))
    {
        artifact_out(a);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_0_3_send_becomes_a_1_0_send() {
        let req = json!({
            "message": {"messageId": "r1", "role": "ROLE_USER", "content": [
                {"text": "hi"},
                {"file": {"fileWithBytes": "dGNr", "mimeType": "text/plain"}},
                {"data": {"data": {"k": 1}}},
            ]},
            "configuration": {"blocking": false, "historyLength": 2},
        });
        assert_eq!(
            send_request_in(req).unwrap(),
            json!({
                "message": {"messageId": "r1", "role": "ROLE_USER", "parts": [
                    {"text": "hi"},
                    {"raw": "dGNr", "mediaType": "text/plain"},
                    {"data": {"k": 1}},
                ]},
                "configuration": {"historyLength": 2, "returnImmediately": true},
            })
        );
        let parts = json!({"message": {"messageId": "r1", "role": "ROLE_USER", "parts": []}});
        assert!(send_request_in(parts).is_err(), "1.0 names are refused");
        let proto_names = json!({
            "request": {"message_id": "r1", "role": "ROLE_USER", "content": [
                {"file": {"file_with_uri": "https://e/x", "mime_type": "text/plain"}},
                {"data": {"data": {"keep_me": 1}}},
            ], "metadata": {"free_form": true}},
            "configuration": {"history_length": 1},
        });
        assert_eq!(
            send_request_in(proto_names).unwrap(),
            json!({
                "message": {"messageId": "r1", "role": "ROLE_USER", "parts": [
                    {"url": "https://e/x", "mediaType": "text/plain"},
                    {"data": {"keep_me": 1}},
                ], "metadata": {"free_form": true}},
                "configuration": {"historyLength": 1},
            })
        );
    }

    #[test]
    fn a_1_0_task_reads_as_0_3() {
        let r = json!({"task": {
            "id": "t", "status": {"state": "TASK_STATE_CANCELED", "message": {"parts": [{"text": "x"}]}},
            "history": [{"parts": [{"url": "https://e/x", "filename": "x"}]}],
            "artifacts": [{"artifactId": "a", "parts": [{"data": [1]}]}],
        }});
        assert_eq!(
            response_out(r, false),
            json!({"task": {
                "id": "t", "status": {"state": "TASK_STATE_CANCELLED", "message": {"content": [{"text": "x"}]}},
                "history": [{"content": [{"file": {"fileWithUri": "https://e/x", "name": "x"}}]}],
                "artifacts": [{"artifactId": "a", "parts": [{"data": {"data": {"value": [1]}}}]}],
            }})
        );
        let u = response_out(
            json!({"statusUpdate": {"status": {"state": "TASK_STATE_COMPLETED"}}}),
            true,
        );
        assert_eq!(u["statusUpdate"]["final"], true);
    }
}
