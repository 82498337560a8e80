//! The HTTP+JSON binding: A2A 1.0's `POST message:send`, `message:stream`,
//! `GET tasks/{id}`, `GET tasks`, `POST tasks/{id}:cancel`,
//! `GET|POST tasks/{id}:subscribe`, `GET extendedAgentCard`, and 0.3's
//! `/v1/…` forms of the same (with `GET v1/card`, no task list), under the
//! instance's URL. The 0.3 paths speak the 0.3 proto's JSON
//! ([`rest03`]). Errors are AIP-193 bodies with the 1.0.1 HTTP statuses.

use std::collections::HashMap;

use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::extensions::Requested;
use super::stream::{self, Framing};
use super::{A2aState, params};
use crate::ProtocolVersion;
use crate::engine::{SendOptions, Sent, Streamed, trim_history};
use crate::instance::Instance;
use crate::jsonrpc::A2aError;
use crate::wire::{rest03, v1};

/// `application/a2a+json`, the 1.0 HTTP+JSON media type (a SHOULD).
const A2A_JSON: &str = "application/a2a+json";

/// Plain JSON: what the conformance kit requires, and AIP-193 errors' type.
const JSON: &str = "application/json";

/// The media type of a success body: `application/a2a+json` to a client
/// that accepts it by name, else `application/json`.
fn media(headers: &HeaderMap) -> &'static str {
    let named = headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains(A2A_JSON));
    if named { A2A_JSON } else { JSON }
}

fn ok(body: Value, media: &'static str) -> Response {
    (StatusCode::OK, [(CONTENT_TYPE, media)], body.to_string()).into_response()
}

/// An AIP-193 error response.
pub fn error(e: &A2aError) -> Response {
    let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(CONTENT_TYPE, JSON)], e.to_rest().to_string()).into_response()
}

/// A request body that is not JSON: 415, in the AIP-193 shape.
fn unsupported_media(got: &str) -> Response {
    let e = A2aError::ContentTypeNotSupported(format!(
        "the request body must be JSON (Content-Type: application/json), got {got:?}"
    ));
    let mut body = e.to_rest();
    body["error"]["code"] = 415.into();
    (
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        [(CONTENT_TYPE, JSON)],
        body.to_string(),
    )
        .into_response()
}

/// The request's `Content-Type`, when it is there and not JSON.
pub(super) fn not_json(headers: &HeaderMap) -> Option<String> {
    let ct = headers.get(CONTENT_TYPE)?.to_str().unwrap_or("?");
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let json =
        essence == JSON || (essence.starts_with("application/") && essence.ends_with("+json"));
    (!json).then(|| ct.to_owned())
}

/// An AIP-193 error that also carries the 0.3 HTTP+JSON `type` and `message`.
fn error03(e: &A2aError) -> Response {
    let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut body = e.to_rest();
    body["type"] = json!(e.type_name());
    body["message"] = json!(e.message());
    (
        status,
        [(CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The 1.0 paths speak 1.0 and the `/v1/…` paths 0.3: the version asked
/// for must match the path.
fn check_version(
    headers: &HeaderMap,
    query: &HashMap<String, String>,
    rest03: bool,
) -> Result<(), A2aError> {
    let asked = super::asked_version(headers, query);
    match (ProtocolVersion::negotiate(asked), rest03) {
        (Ok(ProtocolVersion::V1_0), false) | (Ok(ProtocolVersion::V0_3), true) => Ok(()),
        (Ok(ProtocolVersion::V0_3), false) => Err(A2aError::VersionNotSupported(
            "these HTTP+JSON paths speak A2A 1.0: send A2A-Version: 1.0, or use the 0.3 paths under /v1/".into(),
        )),
        (Ok(ProtocolVersion::V1_0), true) => Err(A2aError::VersionNotSupported(
            "the /v1/ paths speak A2A 0.3: drop A2A-Version: 1.0, or use the paths without /v1/".into(),
        )),
        (Err(e), _) => Err(A2aError::VersionNotSupported(e.message)),
    }
}

fn body<T: serde::de::DeserializeOwned>(bytes: &[u8], rest03: bool) -> Result<T, A2aError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(A2aError::InvalidParams {
            field: "body".into(),
            message: "a request body is required".into(),
        });
    }
    let mut value: Value =
        serde_json::from_slice(bytes).map_err(|e| A2aError::Parse(e.to_string()))?;
    if rest03 {
        value = rest03::send_request_in(value).map_err(|e| A2aError::InvalidParams {
            field: e.field,
            message: e.message,
        })?;
    } else {
        crate::wire::json_names(&mut value);
    }
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
/// A parsed send: the message, how to answer, the request's metadata.
type SendRequest = (
    warden_core::Message,
    SendOptions,
    Option<serde_json::Map<String, Value>>,
);

fn send_request(bytes: &[u8], rest03: bool) -> Result<SendRequest, A2aError> {
    let params::V1Send {
        message,
        config,
        metadata,
    } = params::v1_send(body(bytes, rest03)?)?;
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
        metadata,
    ))
}

fn query_history(q: &HashMap<String, String>) -> Result<Option<usize>, A2aError> {
    params::history_length(int::<i64>(q, "historyLength")?, "historyLength")
}

/// One HTTP+JSON request on `instance`: `method` and the path below the instance URL.
#[allow(clippy::too_many_arguments)]
pub async fn handle(
    state: &A2aState,
    instance: &Instance,
    extensions: &Requested,
    method: &axum::http::Method,
    path: &str,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    bytes: &[u8],
) -> Response {
    let (rest03, path) = match path.strip_prefix("v1/") {
        Some(p) => (true, p),
        None => (false, path),
    };
    // The 0.3 paths' errors also name the error's type, which 0.3 clients read.
    let fail = |e: &A2aError| if rest03 { error03(e) } else { error(e) };
    if let Err(e) = check_version(headers, query, rest03) {
        return fail(&e);
    }
    if let Some(e) = extensions.missing_required(instance) {
        return fail(&e);
    }
    if method == axum::http::Method::POST
        && !bytes.is_empty()
        && let Some(got) = not_json(headers)
    {
        return unsupported_media(&got);
    }
    let framing = Framing {
        version: ProtocolVersion::V1_0,
        rpc_id: None,
        rest03,
    };
    // A task in the path's shapes.
    let task = |t: &warden_core::Task| {
        let mut v = json!(v1::Task::from(t));
        if rest03 {
            rest03::task_out(&mut v);
        }
        v
    };
    let engine = &state.engine;
    let card_path = if rest03 { "card" } else { "extendedAgentCard" };
    let result: Result<Value, A2aError> = match (method.as_str(), path) {
        ("POST", "message:send") => match send_request(bytes, rest03) {
            Ok((message, opts, metadata)) => {
                let ctx = params::send_context(extensions, instance, metadata);
                engine
                    .send(instance, message, opts, &ctx)
                    .await
                    .map(|sent| match sent {
                        Sent::Task(t) => json!({ "task": task(&t) }),
                        Sent::Message(m) => {
                            let r = json!({ "message": v1::Message::from(&m) });
                            if rest03 {
                                rest03::response_out(r, false)
                            } else {
                                r
                            }
                        }
                    })
            }
            Err(e) => Err(e),
        },
        ("POST", "message:stream") => {
            let (message, opts, metadata) = match send_request(bytes, rest03) {
                Ok(parsed) => parsed,
                Err(e) => return fail(&e),
            };
            let ctx = params::send_context(extensions, instance, metadata);
            return match engine.send_streaming(instance, message, &ctx).await {
                // historyLength applies to the task the stream starts with.
                Ok(Streamed::Task(task, seq)) => {
                    let first = trim_history(task.clone(), opts.history_length);
                    stream::respond(state, Some(first), &task, seq, framing)
                }
                Ok(Streamed::Message(m)) => stream::respond_message(&m, &framing),
                Err(e) => fail(&e),
            };
        }
        ("GET", "tasks") if !rest03 => list(state, instance, query).await,
        ("GET", p) if p == card_path => Err(A2aError::ExtendedAgentCardNotConfigured),
        // Push is not supported: every push-config route says so.
        (_, p) if p.starts_with("tasks/") && p.contains("/pushNotificationConfigs") => {
            Err(A2aError::PushNotificationNotSupported)
        }
        (m, p) => match p
            .strip_prefix("tasks/")
            .map(|rest| rest.split_once(':').unwrap_or((rest, "")))
        {
            Some((id, "")) if m == "GET" => match query_history(query) {
                Ok(n) => engine.get(instance, id, n).await.map(|t| task(&t)),
                Err(e) => Err(e),
            },
            Some((id, "cancel")) if m == "POST" => {
                engine.cancel(instance, id).await.map(|t| task(&t))
            }
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
                    Err(e) => fail(&e),
                };
            }
            _ => {
                let mut body =
                    A2aError::UnsupportedOperation(format!("no such A2A route: {m} {p}")).to_rest();
                body["error"]["code"] = 404.into();
                body["error"]["status"] = "NOT_FOUND".into();
                return (
                    StatusCode::NOT_FOUND,
                    [(CONTENT_TYPE, JSON)],
                    body.to_string(),
                )
                    .into_response();
            }
        },
    };
    match result {
        Ok(v) => ok(v, media(headers)),
        Err(e) => fail(&e),
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
