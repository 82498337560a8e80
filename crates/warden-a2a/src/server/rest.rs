//! The HTTP+JSON binding of A2A 1.0: `POST message:send`, `message:stream`,
//! `GET tasks/{id}`, `GET tasks`, `POST tasks/{id}:cancel`,
//! `GET|POST tasks/{id}:subscribe`, `GET extendedAgentCard`, under the
//! instance's URL. Errors are AIP-193 bodies with the 1.0.1 HTTP statuses.
//! (0.3's `/v1/…` paths, with the 0.3 proto's shapes, are not served yet.)

use std::collections::HashMap;

use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::stream::{self, Framing};
use super::{A2aState, params};
use crate::ProtocolVersion;
use crate::engine::{SendOptions, trim_history};
use crate::instance::Instance;
use crate::jsonrpc::A2aError;
use crate::wire::v1;

/// `application/a2a+json`, the 1.0 HTTP+JSON media type.
const A2A_JSON: &str = "application/a2a+json";

fn ok(body: Value) -> Response {
    (StatusCode::OK, [(CONTENT_TYPE, A2A_JSON)], body.to_string()).into_response()
}

/// An AIP-193 error response.
pub fn error(e: &A2aError) -> Response {
    let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(CONTENT_TYPE, A2A_JSON)], e.to_rest().to_string()).into_response()
}

/// The binding speaks 1.0 only; a request without `A2A-Version` is a 0.3
/// client, whose HTTP+JSON paths (`/v1/…`) are not served yet.
fn require_v1(headers: &HeaderMap, query: &HashMap<String, String>) -> Result<(), A2aError> {
    let asked = super::asked_version(headers, query);
    match ProtocolVersion::negotiate(asked) {
        Ok(ProtocolVersion::V1_0) => Ok(()),
        Ok(ProtocolVersion::V0_3) => Err(A2aError::VersionNotSupported(
            "this HTTP+JSON endpoint speaks A2A 1.0: send A2A-Version: 1.0 (0.3's /v1/ paths are not served)".into(),
        )),
        Err(e) => Err(A2aError::VersionNotSupported(e.message)),
    }
}

fn body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, A2aError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(A2aError::InvalidParams {
            field: "body".into(),
            message: "a request body is required".into(),
        });
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|e| A2aError::Parse(e.to_string()))?;
    serde_path_to_error::deserialize(value).map_err(|e| A2aError::InvalidParams {
        field: e.path().to_string(),
        message: e.into_inner().to_string(),
    })
}

fn int<T: std::str::FromStr>(
    q: &HashMap<String, String>,
    key: &str,
) -> Result<Option<T>, A2aError> {
    q.get(key)
        .map(|v| {
            v.parse::<T>().map_err(|_| A2aError::InvalidParams {
                field: key.into(),
                message: format!("{v:?} is not a valid number"),
            })
        })
        .transpose()
}

/// The body of `message:send` / `message:stream`: the message and how to answer.
fn send_request(bytes: &[u8]) -> Result<(warden_core::Message, SendOptions), A2aError> {
    let (message, config) = params::v1_send(body(bytes)?)?;
    let history_length = params::history_length(
        config.history_length.map(i64::from),
        "configuration.historyLength",
    )?;
    Ok((
        message,
        SendOptions {
            history_length,
            return_immediately: config.return_immediately,
        },
    ))
}

fn query_history(q: &HashMap<String, String>) -> Result<Option<usize>, A2aError> {
    params::history_length(int::<i64>(q, "historyLength")?, "historyLength")
}

/// One HTTP+JSON request on `instance`: `method` and the path below the instance URL.
pub async fn handle(
    state: &A2aState,
    instance: &Instance,
    method: &axum::http::Method,
    path: &str,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    bytes: &[u8],
) -> Response {
    if let Err(e) = require_v1(headers, query) {
        return error(&e);
    }
    let framing = Framing {
        version: ProtocolVersion::V1_0,
        rpc_id: None,
    };
    let engine = &state.engine;
    let result: Result<Value, A2aError> = match (method.as_str(), path) {
        ("POST", "message:send") => match send_request(bytes) {
            Ok((message, opts)) => engine
                .send(instance, message, opts)
                .await
                .map(|t| json!({ "task": v1::Task::from(&t) })),
            Err(e) => Err(e),
        },
        ("POST", "message:stream") => {
            let (message, opts) = match send_request(bytes) {
                Ok(parsed) => parsed,
                Err(e) => return error(&e),
            };
            return match engine.send_streaming(instance, message).await {
                // historyLength applies to the task the stream starts with.
                Ok((task, seq)) => {
                    let first = trim_history(task.clone(), opts.history_length);
                    stream::respond(state, Some(first), &task, seq, framing)
                }
                Err(e) => error(&e),
            };
        }
        ("GET", "tasks") => list(state, instance, query).await,
        ("GET", "extendedAgentCard") => Err(A2aError::ExtendedAgentCardNotConfigured),
        (m, p) => match p
            .strip_prefix("tasks/")
            .map(|rest| rest.split_once(':').unwrap_or((rest, "")))
        {
            Some((id, "")) if m == "GET" => match query_history(query) {
                Ok(n) => engine
                    .get(instance, id, n)
                    .await
                    .map(|t| json!(v1::Task::from(&t))),
                Err(e) => Err(e),
            },
            Some((id, "cancel")) if m == "POST" => engine
                .cancel(instance, id)
                .await
                .map(|t| json!(v1::Task::from(&t))),
            Some((id, "subscribe")) if m == "GET" || m == "POST" => {
                let resumed = match stream::last_event_id(headers) {
                    Some(after) => engine
                        .resume(instance, id, after)
                        .await
                        .map(|t| (None, t, after)),
                    None => engine
                        .subscribe(instance, id)
                        .await
                        .map(|(t, seq)| (Some(t.clone()), t, seq)),
                };
                return match resumed {
                    Ok((first, task, after)) => {
                        stream::respond(state, first, &task, after, framing)
                    }
                    Err(e) => error(&e),
                };
            }
            _ => {
                let mut body =
                    A2aError::UnsupportedOperation(format!("no such A2A route: {m} {p}")).to_rest();
                body["error"]["code"] = 404.into();
                body["error"]["status"] = "NOT_FOUND".into();
                return (
                    StatusCode::NOT_FOUND,
                    [(CONTENT_TYPE, A2A_JSON)],
                    body.to_string(),
                )
                    .into_response();
            }
        },
    };
    match result {
        Ok(v) => ok(v),
        Err(e) => error(&e),
    }
}

async fn list(
    state: &A2aState,
    instance: &Instance,
    q: &HashMap<String, String>,
) -> Result<Value, A2aError> {
    let include_artifacts = match q.get("includeArtifacts").map(String::as_str) {
        None => None,
        Some("false") => Some(false),
        Some("true") => Some(true),
        Some(other) => {
            return Err(A2aError::InvalidParams {
                field: "includeArtifacts".into(),
                message: format!("{other:?} is not true or false"),
            });
        }
    };
    let p = params::ListParams {
        context_id: q.get("contextId").cloned(),
        status: q.get("status").cloned(),
        page_size: int::<i64>(q, "pageSize")?,
        page_token: q.get("pageToken").cloned(),
        history_length: int::<i64>(q, "historyLength")?,
        status_timestamp_after: q.get("statusTimestampAfter").cloned(),
        include_artifacts,
    };
    Ok(params::list_response(
        &state.engine.list(instance, p.query()?).await?,
    ))
}
