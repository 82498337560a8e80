//! The JSON-RPC endpoint: one envelope, two method sets (1.0 and 0.3),
//! each answered in its own version's shapes.

use std::collections::HashMap;

use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use warden_core::{Message, Task};

use super::A2aState;
use super::extensions::Requested;
use super::params::{ListParams, history_length, invalid, list_response, send_context, v1_send};
use super::stream::{self, Framing};
use crate::ProtocolVersion;
use crate::engine::{SendOptions, Sent, Streamed, trim_history};
use crate::instance::Instance;
use crate::jsonrpc::{self, A2aError, Request};
use crate::wire::{v1, v03};

fn reply(body: Value) -> Response {
    (
        StatusCode::OK,
        [(CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Answers one JSON-RPC request. Protocol errors are JSON-RPC errors with
/// HTTP 200, as JSON-RPC prescribes.
pub async fn handle(
    state: &A2aState,
    instance: &Instance,
    extensions: &Requested,
    headers: &HeaderMap,
    query: &HashMap<String, String>,
    body: &[u8],
) -> Response {
    // A body that is not JSON is refused before it is parsed.
    if let Some(got) = super::rest::not_json(headers) {
        let e = A2aError::ContentTypeNotSupported(format!(
            "JSON-RPC requests are application/json, got {got:?}"
        ));
        return reply(jsonrpc::error(None, &e));
    }
    let req = match Request::parse(body) {
        Ok(r) => r,
        Err((id, e)) => return reply(jsonrpc::error(id.as_ref(), &e)),
    };
    let id = req.id.clone().unwrap_or(Value::Null);
    let asked = super::asked_version(headers, query);
    let version = match ProtocolVersion::negotiate(asked) {
        Ok(v) => v,
        Err(e) => {
            return reply(jsonrpc::error(
                Some(&id),
                &A2aError::VersionNotSupported(e.message),
            ));
        }
    };
    if let Some(e) = extensions.missing_required(instance) {
        return reply(jsonrpc::error(Some(&id), &e));
    }
    let framing = Framing {
        version,
        rpc_id: Some(id.clone()),
        rest03: false,
    };
    match (version, req.method.as_str()) {
        (ProtocolVersion::V1_0, "SendStreamingMessage")
        | (ProtocolVersion::V0_3, "message/stream") => {
            return match stream_send(state, instance, extensions, &req, version).await {
                Ok(Streamed::Task(task, seq)) => {
                    stream::respond(state, Some(task.clone()), &task, seq, framing)
                }
                Ok(Streamed::Message(m)) => stream::respond_message(&m, &framing),
                Err(e) => reply(jsonrpc::error(Some(&id), &e)),
            };
        }
        (ProtocolVersion::V1_0, "SubscribeToTask")
        | (ProtocolVersion::V0_3, "tasks/resubscribe") => {
            return match subscribe(state, instance, &req, headers).await {
                Ok((first, task, after)) => stream::respond(state, first, &task, after, framing),
                Err(e) => reply(jsonrpc::error(Some(&id), &e)),
            };
        }
        _ => {}
    }
    let result = match version {
        ProtocolVersion::V1_0 => v1_method(state, instance, extensions, &req).await,
        ProtocolVersion::V0_3 => v03_method(state, instance, extensions, &req).await,
    };
    match result {
        Ok(v) => reply(jsonrpc::result(&id, v)),
        Err(e) => reply(jsonrpc::error(Some(&id), &e)),
    }
}

/// Starts a task whose events the response streams.
async fn stream_send(
    state: &A2aState,
    instance: &Instance,
    extensions: &Requested,
    req: &Request,
    version: ProtocolVersion,
) -> Result<Streamed, A2aError> {
    let (message, history, metadata) = match version {
        ProtocolVersion::V1_0 => {
            let s = v1_send(params(req)?)?;
            (
                s.message,
                s.config.history_length.map(i64::from),
                s.metadata,
            )
        }
        ProtocolVersion::V0_3 => {
            let p: SendParams03 = params(req)?;
            let config = p.configuration.unwrap_or_default();
            if config.push_notification_config.is_some() {
                return Err(A2aError::PushNotificationNotSupported);
            }
            let message: Message = p.message.try_into().map_err(|e| invalid(e, "message"))?;
            (message, config.history_length, p.metadata)
        }
    };
    let history = history_length(history, "historyLength")?;
    let ctx = send_context(extensions, instance, metadata);
    // historyLength applies to the task the stream starts with.
    Ok(
        match state.engine.send_streaming(instance, message, &ctx).await? {
            Streamed::Task(task, seq) => Streamed::Task(trim_history(task, history), seq),
            direct => direct,
        },
    )
}

/// A subscription: the current task then its later events, or with
/// `Last-Event-ID` just the events after that id.
async fn subscribe(
    state: &A2aState,
    instance: &Instance,
    req: &Request,
    headers: &HeaderMap,
) -> Result<(Option<Task>, Task, u64), A2aError> {
    let p: IdParams = params(req)?;
    match stream::last_event_id(headers) {
        Some(after) => Ok((
            None,
            state.engine.resume(instance, &p.id, after).await?,
            after,
        )),
        None => {
            let (task, seq) = state.engine.subscribe(instance, &p.id).await?;
            Ok((Some(task.clone()), task, seq))
        }
    }
}

/// Decodes `params`, naming the offending field on failure.
fn params<T: DeserializeOwned>(req: &Request) -> Result<T, A2aError> {
    let mut value = req.params.clone().unwrap_or_else(|| json!({}));
    crate::wire::json_names(&mut value);
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        A2aError::InvalidParams {
            field: if field == "." { "params".into() } else { field },
            message: e.into_inner().to_string(),
        }
    })
}

fn task_v1(t: &Task) -> Value {
    serde_json::to_value(v1::Task::from(t)).unwrap_or(Value::Null)
}

fn task_v03(t: &Task) -> Value {
    serde_json::to_value(v03::Task::from(t)).unwrap_or(Value::Null)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IdParams {
    id: String,
    #[serde(default)]
    history_length: Option<i64>,
}

/// `GetTask` / `tasks/get`: the same parameters in both versions.
async fn get_task(state: &A2aState, instance: &Instance, req: &Request) -> Result<Task, A2aError> {
    let p: IdParams = params(req)?;
    let history = history_length(p.history_length, "historyLength")?;
    state.engine.get(instance, &p.id, history).await
}

/// `CancelTask` / `tasks/cancel`.
async fn cancel_task(
    state: &A2aState,
    instance: &Instance,
    req: &Request,
) -> Result<Task, A2aError> {
    let p: IdParams = params(req)?;
    state.engine.cancel(instance, &p.id).await
}

async fn v1_method(
    state: &A2aState,
    instance: &Instance,
    extensions: &Requested,
    req: &Request,
) -> Result<Value, A2aError> {
    let engine = &state.engine;
    match req.method.as_str() {
        "SendMessage" => {
            let s = v1_send(params(req)?)?;
            let opts = SendOptions {
                history_length: history_length(
                    s.config.history_length.map(i64::from),
                    "historyLength",
                )?,
                return_immediately: s.config.return_immediately,
            };
            let ctx = send_context(extensions, instance, s.metadata);
            Ok(match engine.send(instance, s.message, opts, &ctx).await? {
                Sent::Task(task) => json!({ "task": task_v1(&task) }),
                Sent::Message(m) => json!({ "message": v1::Message::from(&m) }),
            })
        }
        "GetTask" => Ok(task_v1(&get_task(state, instance, req).await?)),
        "CancelTask" => Ok(task_v1(&cancel_task(state, instance, req).await?)),
        "ListTasks" => {
            let p: ListParams = params(req)?;
            Ok(list_response(&engine.list(instance, p.query()?).await?))
        }
        "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig" => Err(A2aError::PushNotificationNotSupported),
        "GetExtendedAgentCard" => Err(A2aError::ExtendedAgentCardNotConfigured),
        other => Err(A2aError::MethodNotFound(not_found_hint(
            other,
            ProtocolVersion::V1_0,
        ))),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SendParams03 {
    message: v03::Message,
    #[serde(default)]
    configuration: Option<SendConfig03>,
    #[serde(default)]
    metadata: Option<serde_json::Map<String, Value>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct SendConfig03 {
    #[serde(default)]
    blocking: Option<bool>,
    #[serde(default)]
    history_length: Option<i64>,
    #[serde(default)]
    push_notification_config: Option<Value>,
}

async fn v03_method(
    state: &A2aState,
    instance: &Instance,
    extensions: &Requested,
    req: &Request,
) -> Result<Value, A2aError> {
    let engine = &state.engine;
    match req.method.as_str() {
        "message/send" => {
            let p: SendParams03 = params(req)?;
            let message: Message = p.message.try_into().map_err(|e| invalid(e, "message"))?;
            let config = p.configuration.unwrap_or_default();
            if config.push_notification_config.is_some() {
                return Err(A2aError::PushNotificationNotSupported);
            }
            let opts = SendOptions {
                history_length: history_length(config.history_length, "historyLength")?,
                return_immediately: config.blocking == Some(false),
            };
            let ctx = send_context(extensions, instance, p.metadata);
            Ok(match engine.send(instance, message, opts, &ctx).await? {
                Sent::Task(task) => task_v03(&task),
                Sent::Message(m) => json!(v03::Message::from(&m)),
            })
        }
        "tasks/get" => Ok(task_v03(&get_task(state, instance, req).await?)),
        "tasks/cancel" => Ok(task_v03(&cancel_task(state, instance, req).await?)),
        m if m.starts_with("tasks/pushNotificationConfig/") => {
            Err(A2aError::PushNotificationNotSupported)
        }
        "agent/getAuthenticatedExtendedCard" => Err(A2aError::ExtendedAgentCardNotConfigured),
        other => Err(A2aError::MethodNotFound(not_found_hint(
            other,
            ProtocolVersion::V0_3,
        ))),
    }
}

/// Points a client that mixed versions at the header it forgot.
fn not_found_hint(method: &str, version: ProtocolVersion) -> String {
    let v1 = [
        "SendMessage",
        "SendStreamingMessage",
        "GetTask",
        "ListTasks",
        "CancelTask",
        "SubscribeToTask",
    ];
    match version {
        ProtocolVersion::V0_3 if v1.contains(&method) => {
            format!("{method} (a 1.0 method; send the header A2A-Version: 1.0)")
        }
        ProtocolVersion::V1_0 if method.contains('/') => {
            format!("{method} (a 0.3 method; this request said A2A-Version: 1.0)")
        }
        _ => method.to_owned(),
    }
}
