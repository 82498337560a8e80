//! `/api/v1/bus/*`: the scratchpad bus for agents on other hosts, with the
//! CLI's semantics (operator token when one is configured).

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use warden_bus::{BusError, Post};

use super::json::JsonBody;
use super::{ApiError, AppState};

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/api/v1/bus/agents", post(register).get(agents))
        .route(
            "/api/v1/bus/agents/{name}",
            axum::routing::delete(unregister),
        )
        .route("/api/v1/bus/agents/{name}/poll", post(poll))
        .route("/api/v1/bus/messages", post(post_message))
        .route("/api/v1/bus/messages/{id}", get(message))
        .route("/api/v1/bus/messages/{id}/ack", post(ack))
        .route("/api/v1/bus/messages/{id}/reject", post(reject))
        .route("/api/v1/bus/status", get(status))
        .route("/api/v1/bus/prune", post(prune))
        .route("/api/v1/bus/leases", post(lease_create).get(leases))
        .route(
            "/api/v1/bus/leases/{resource}",
            axum::routing::delete(lease_revoke),
        )
        .with_state(state)
}

impl From<BusError> for ApiError {
    fn from(e: BusError) -> Self {
        match e {
            BusError::Invalid { field, message } => ApiError::field(field, message),
            BusError::UnknownAgent(_) => {
                ApiError::new(StatusCode::NOT_FOUND, "unknown_agent", e.to_string())
            }
            BusError::UnknownMessage(_) => {
                ApiError::new(StatusCode::NOT_FOUND, "unknown_message", e.to_string())
            }
            BusError::NotLeased(_) => {
                ApiError::new(StatusCode::CONFLICT, "not_leased", e.to_string())
            }
            BusError::Store(s) => s.into(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Register {
    name: String,
    #[serde(default)]
    capabilities: Vec<String>,
}

async fn register(
    State(s): State<AppState>,
    JsonBody(b): JsonBody<Register>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let a = s.bus.register(&b.name, &b.capabilities).await?;
    Ok((StatusCode::CREATED, Json(json!(a))))
}

async fn agents(State(s): State<AppState>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({ "agents": s.store.bus_agents().await? })))
}

async fn unregister(
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let failed = s.bus.unregister(&name).await?;
    Ok(Json(json!({ "agent": name, "failed": failed })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewMessage {
    from: String,
    to: String,
    #[serde(rename = "type")]
    kind: String,
    capability: String,
    payload: Value,
    ttl: Option<i64>,
    reply_to: Option<String>,
}

async fn post_message(
    State(s): State<AppState>,
    JsonBody(b): JsonBody<NewMessage>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let payload = b.payload.to_string();
    let m = s
        .bus
        .post(&Post {
            from: &b.from,
            to: &b.to,
            kind: &b.kind,
            capability: &b.capability,
            payload: &payload,
            ttl: b.ttl,
            reply_to: b.reply_to.as_deref(),
        })
        .await?;
    Ok((StatusCode::CREATED, Json(json!(m))))
}

async fn message(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(s.bus.message(&id).await?)))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PollQuery {
    limit: Option<u32>,
    /// Seconds to wait for a message when none is there (at most 300).
    wait: Option<f64>,
}

async fn poll(
    State(s): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<PollQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = q.limit.unwrap_or(100);
    let got = match q.wait {
        None => s.bus.poll(&name, limit).await?,
        Some(w) if w.is_finite() && (0.0..=300.0).contains(&w) => {
            let wait = std::time::Duration::from_secs_f64(w);
            tokio::select! {
                got = s.bus.poll_wait(&name, limit, wait) => got?,
                () = s.shutdown.cancelled() => {
                    return Err(ApiError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "shutting_down",
                        "the server is shutting down; poll again",
                    ));
                }
            }
        }
        Some(w) => {
            return Err(ApiError::field(
                "wait",
                format!("{w} must be from 0 to 300 seconds"),
            ));
        }
    };
    Ok(Json(json!({ "agent": name, "messages": got })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Finish {
    lease: String,
    result: Option<Value>,
    error: Option<String>,
}

async fn ack(
    State(s): State<AppState>,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<Finish>,
) -> Result<Json<Value>, ApiError> {
    let result = b.result.unwrap_or(Value::Null).to_string();
    Ok(Json(json!(s.bus.ack(&id, &b.lease, &result).await?)))
}

async fn reject(
    State(s): State<AppState>,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<Finish>,
) -> Result<Json<Value>, ApiError> {
    let error = b
        .error
        .ok_or_else(|| ApiError::field("error", "say why the message failed"))?;
    Ok(Json(json!(s.bus.reject(&id, &b.lease, &error).await?)))
}

async fn status(State(s): State<AppState>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({ "agents": s.bus.status().await? })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewLease {
    resource: String,
    holder: String,
    ttl_seconds: f64,
}

async fn lease_create(
    State(s): State<AppState>,
    JsonBody(b): JsonBody<NewLease>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let max = warden_bus::MAX_LEASE.as_secs_f64();
    if !(b.ttl_seconds.is_finite() && b.ttl_seconds > 0.0 && b.ttl_seconds <= max) {
        return Err(ApiError::field(
            "ttl_seconds",
            format!("must be above 0 and at most {max}"),
        ));
    }
    let ttl = std::time::Duration::from_secs_f64(b.ttl_seconds);
    let l = s.bus.lease_create(&b.resource, &b.holder, ttl).await?;
    Ok((StatusCode::CREATED, Json(json!(l))))
}

async fn lease_revoke(
    State(s): State<AppState>,
    Path(resource): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(s.bus.lease_revoke(&resource).await?)))
}

async fn leases(State(s): State<AppState>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({ "leases": s.bus.leases().await? })))
}

async fn prune(State(s): State<AppState>) -> Result<Json<Value>, ApiError> {
    let (expired, finished, agents) = s.bus.prune().await?;
    Ok(Json(
        json!({ "expired": expired, "finished": finished, "agents": agents }),
    ))
}
