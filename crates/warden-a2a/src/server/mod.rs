//! The A2A HTTP surface of an instance: its agent card and its JSON-RPC
//! endpoint, at `/agents/{name}/` and, for the `default` instance, at `/`.

mod auth;
mod card;
mod extensions;
mod params;
mod rest;
mod rpc;
mod stream;

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::engine::TaskEngine;
use crate::instance::{DEFAULT_INSTANCE, Instance, Instances};
use crate::jsonrpc::A2aError;

pub use auth::ClientToken;

/// What the A2A handlers share.
#[derive(Clone)]
pub struct A2aState {
    /// Runs and answers tasks.
    pub engine: TaskEngine,
    /// The hosted instances.
    pub instances: Arc<Instances>,
    /// Caps open event streams (see [`MAX_STREAMS`]).
    pub streams: Arc<Semaphore>,
    /// Cancelled when the server shuts down; open streams end on it.
    pub shutdown: CancellationToken,
    /// The token clients present, when one is configured.
    pub token: ClientToken,
    /// The largest request body read; larger ones get 413.
    pub max_body: usize,
    /// Until when the confined tier is certified on this host, if it is;
    /// cards advertise it only then.
    pub confined_until: ConfinedUntil,
}

/// Reads the confined tier's certificate expiry, `None` while uncertified.
pub type ConfinedUntil = Arc<dyn Fn() -> Option<warden_core::Timestamp> + Send + Sync>;

/// The most A2A event streams open at once.
pub const MAX_STREAMS: usize = 256;

/// The A2A routes of every instance.
pub fn router(state: A2aState) -> Router {
    card::mark_served();
    Router::new()
        .route("/.well-known/agent-card.json", get(default_card))
        .route(
            "/agents/{instance}/.well-known/agent-card.json",
            get(instance_card),
        )
        .route("/", post(default_rpc))
        .route("/agents/{instance}", post(instance_rpc))
        .route("/agents/{instance}/", post(instance_rpc))
        .route("/message:send", post(default_rest))
        .route("/message:stream", post(default_rest))
        .route("/tasks", get(default_rest))
        .route("/tasks/{*rest}", any(default_rest))
        .route("/extendedAgentCard", get(default_rest))
        .route("/v1/{*rest}", any(default_rest))
        .route("/agents/{instance}/{*rest}", any(instance_rest))
        .layer(DefaultBodyLimit::max(state.max_body))
        .with_state(state)
}

/// The `A2A-Version` a request asked for: the header, else the query
/// parameter (its name matched without regard to case).
pub(crate) fn asked_version<'a>(
    headers: &'a HeaderMap,
    query: &'a HashMap<String, String>,
) -> Option<&'a str> {
    headers
        .get("a2a-version")
        .and_then(|v| v.to_str().ok())
        .or_else(|| {
            query
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("a2a-version"))
                .map(|(_, v)| v.as_str())
        })
}

/// The default largest request body an A2A endpoint reads (1 MiB).
pub const MAX_BODY: usize = 1 << 20;

/// A body that could not be read: 413 when over the cap, in the
/// AIP-193 shape (a JSON-RPC client reads the status; there is no id to echo).
fn unreadable(e: &BytesRejection) -> Response {
    let status = e.status();
    let message = if status == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        "the request body is over the server's limit (a2a.max_body_bytes)".to_owned()
    } else {
        format!("cannot read the request body: {}", e.body_text())
    };
    let mut body = A2aError::InvalidRequest(message).to_rest();
    body["error"]["code"] = status.as_u16().into();
    // The rest of the body stays unread, so this connection cannot carry
    // another request; say so rather than let the client reuse it.
    (
        status,
        [(axum::http::header::CONNECTION, "close")],
        axum::Json(body),
    )
        .into_response()
}

/// The 404 for a name no instance has.
fn no_instance(name: &str) -> Response {
    let err = A2aError::UnsupportedOperation(format!("no instance named {name:?} is hosted here"));
    let mut body = err.to_rest();
    body["error"]["code"] = 404.into();
    body["error"]["status"] = "NOT_FOUND".into();
    (axum::http::StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}

/// `http://host` as the client addressed us, for the card's URLs.
fn base_url(headers: &HeaderMap) -> String {
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1:8122");
    format!("http://{host}")
}

/// The card of instance `name`, whose URL is `path` on the host the client used.
fn card_at(
    state: &A2aState,
    name: &str,
    path: &str,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Response {
    match state.instances.get(name) {
        Some(i) => card::respond(
            &i,
            &format!("{}{path}", base_url(headers)),
            state.token.required(),
            (state.confined_until)(),
            headers,
            query,
        ),
        None => no_instance(name),
    }
}

async fn default_card(
    State(state): State<A2aState>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    card_at(&state, DEFAULT_INSTANCE, "", &query, &headers)
}

async fn instance_card(
    State(state): State<A2aState>,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    card_at(&state, &name, &format!("/agents/{name}"), &query, &headers)
}

/// The default instance's JSON-RPC endpoint at `/`.
async fn default_rpc(
    state: State<A2aState>,
    query: Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    instance_rpc(
        state,
        Path(DEFAULT_INSTANCE.to_owned()),
        query,
        headers,
        body,
    )
    .await
}

async fn instance_rpc(
    State(state): State<A2aState>,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (instance, body, asked) = match admit(&state, &name, &headers, body) {
        Ok(admitted) => admitted,
        Err(refused) => return *refused,
    };
    let mut resp = rpc::handle(&state, &instance, &asked, &headers, &query, &body).await;
    asked.echo(&instance, &mut resp);
    resp
}

/// What every RPC and HTTP+JSON request passes first: the client token,
/// a readable body, an instance by that name; and the extensions it asks for.
fn admit(
    state: &A2aState,
    name: &str,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<(Arc<Instance>, Bytes, extensions::Requested), Box<Response>> {
    if let Some(refused) = state.token.check(headers) {
        return Err(Box::new(refused));
    }
    let body = body.map_err(|e| Box::new(unreadable(&e)))?;
    let instance = state
        .instances
        .get(name)
        .ok_or_else(|| Box::new(no_instance(name)))?;
    Ok((instance, body, extensions::Requested::from_headers(headers)))
}

/// The default instance's HTTP+JSON routes at `/`.
async fn default_rest(
    state: State<A2aState>,
    method: Method,
    uri: Uri,
    query: Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let path = uri.path().trim_start_matches('/').to_owned();
    instance_rest(
        state,
        Path((DEFAULT_INSTANCE.to_owned(), path)),
        method,
        query,
        headers,
        body,
    )
    .await
}

async fn instance_rest(
    State(state): State<A2aState>,
    Path((name, path)): Path<(String, String)>,
    method: Method,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (instance, body, asked) = match admit(&state, &name, &headers, body) {
        Ok(admitted) => admitted,
        Err(refused) => return *refused,
    };
    let mut resp = rest::handle(
        &state, &instance, &asked, &method, &path, &query, &headers, &body,
    )
    .await;
    asked.echo(&instance, &mut resp);
    resp
}
