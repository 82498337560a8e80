//! `GET /api/v1/aiwg/status` and `POST /api/v1/aiwg/reconnect`: the link to
//! `aiwg serve` as it stands (never a token).

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

use super::{ApiError, AppState};

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/api/v1/aiwg/status", get(status))
        .route("/api/v1/aiwg/reconnect", post(reconnect))
        .with_state(state)
}

async fn status(State(state): State<AppState>) -> Json<Value> {
    match &state.aiwg {
        Some(link) => Json(json!(link.status())),
        None => Json(json!({"configured": false})),
    }
}

/// Skips the backoff wait: the next registration or connection attempt
/// starts now (an open connection is closed and opened again).
async fn reconnect(State(state): State<AppState>) -> Result<(StatusCode, Json<Value>), ApiError> {
    let Some(link) = &state.aiwg else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "aiwg_not_configured",
            "the AIWG integration is off: set AIWG_SERVE_ENDPOINT",
        ));
    };
    link.reconnect_now();
    Ok((StatusCode::ACCEPTED, Json(json!({"reconnecting": true}))))
}
