//! The AIWG executor contract's HTTP side: the link's status and reconnect
//! (operator routes), missions (operator routes) and the dispatch route,
//! which `aiwg serve` calls with the bearer token it issued at registration.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use warden_aiwg::wire::DispatchPayload;
use warden_core::MissionId;

use super::{ApiError, AppState};

/// Operator routes (behind operator auth when configured).
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/api/v1/aiwg/status", get(status))
        .route("/api/v1/aiwg/reconnect", post(reconnect))
        .route("/api/v1/missions", get(list))
        .route("/api/v1/missions/{id}", get(mission).delete(abort))
        .with_state(state)
}

/// The dispatch route: authenticated by the AIWG token, not the operator's.
pub fn dispatch_router(state: AppState) -> Router {
    Router::new()
        .route("/api/v1/sessions/{id}/dispatch", post(dispatch))
        .with_state(state)
}

fn not_configured() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "aiwg_not_configured",
        "the AIWG integration is off: set AIWG_SERVE_ENDPOINT",
    )
}

async fn status(State(state): State<AppState>) -> Json<Value> {
    match &state.aiwg {
        Some(a) => Json(json!(a.link.status())),
        None => Json(json!({"configured": false})),
    }
}

/// Skips the backoff wait: the next registration or connection attempt
/// starts now (an open connection is closed and opened again).
async fn reconnect(State(state): State<AppState>) -> Result<(StatusCode, Json<Value>), ApiError> {
    let a = state.aiwg.as_ref().ok_or_else(not_configured)?;
    a.link.reconnect_now();
    Ok((StatusCode::ACCEPTED, Json(json!({"reconnecting": true}))))
}

fn mission_id(raw: &str) -> Result<MissionId, ApiError> {
    MissionId::parse(raw).map_err(|e| ApiError::field("mission_id", e.to_string()))
}

fn store_error(e: warden_store::StoreError, id: &str) -> ApiError {
    if e.is_not_found() {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no mission {id}"),
        )
    } else {
        tracing::error!(error = %e, "mission store error");
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            "the mission store is unavailable",
        )
    }
}

/// `?active=true` for only the missions not ended; `limit` (default 100,
/// at most 1000).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    #[serde(default)]
    active: bool,
    limit: Option<u32>,
}

/// The newest missions, newest first: one line of each.
async fn list(
    State(state): State<AppState>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let a = state.aiwg.as_ref().ok_or_else(not_configured)?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::field("limit", "must be between 1 and 1000"));
    }
    let missions = a
        .missions
        .list(q.active, limit)
        .await
        .map_err(|e| store_error(e, ""))?;
    Ok(Json(json!({ "missions": missions })))
}

/// `MissionStatusResponse`: state, times, exit code or error, recent events.
async fn mission(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let a = state.aiwg.as_ref().ok_or_else(not_configured)?;
    let status = a
        .missions
        .status(mission_id(&id)?)
        .await
        .map_err(|e| store_error(e, &id))?;
    Ok(Json(status))
}

/// An operator's kill: `202`, then `mission.aborted` once the run's
/// processes are gone (an ended mission is answered as it is, `200`).
async fn abort(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let a = state.aiwg.as_ref().ok_or_else(not_configured)?;
    let found = a
        .missions
        .abort(mission_id(&id)?)
        .await
        .map_err(|e| store_error(e, &id))?;
    let (status, rec, aborting) = match found {
        warden_aiwg::Abort::Ended(rec) => (StatusCode::OK, rec, false),
        warden_aiwg::Abort::Aborting(rec) => (StatusCode::ACCEPTED, rec, true),
        warden_aiwg::Abort::NotRunning(rec) => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "mission_not_running",
                format!(
                    "mission {id} is {} and not running under this server; it can be aborted once it runs",
                    rec.state
                ),
            ));
        }
    };
    let _ = state
        .store
        .audit(
            "operator",
            "mission.abort",
            &id,
            json!({"state": rec.state.as_str(), "aborting": aborting}),
        )
        .await;
    Ok((
        status,
        Json(json!({"mission_id": id, "state": rec.state.as_str(), "aborting": aborting})),
    ))
}

/// `POST /api/v1/sessions/{id}/dispatch`.
async fn dispatch(
    State(state): State<AppState>,
    Path(session): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let a = state.aiwg.as_ref().ok_or_else(not_configured)?;
    let presented = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    match a.link.token_matches(presented) {
        None => {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "not_registered",
                "this executor is not registered with aiwg serve (see GET /api/v1/aiwg/status)",
            ));
        }
        Some(false) => {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a dispatch needs Authorization: Bearer with the token aiwg serve issued",
            ));
        }
        Some(true) => {}
    }
    let de = &mut serde_json::Deserializer::from_slice(&body);
    let payload: DispatchPayload = serde_path_to_error::deserialize(de)
        .map_err(|e| ApiError::field(e.path().to_string(), e.inner().to_string()))?;
    match a.missions.dispatch(&session, payload).await {
        Ok(answer) => Ok((StatusCode::ACCEPTED, Json(json!(answer)))),
        Err(e) => Err(ApiError::new(
            StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            e.code(),
            e.message(),
        )),
    }
}
