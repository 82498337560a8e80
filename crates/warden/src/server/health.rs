//! Liveness and readiness.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use super::{ApiError, AppState};

pub fn router(state: AppState) -> Router {
    Router::new()
        .route(
            "/healthz",
            get(|| async { Json(json!({ "status": "ok" })) }),
        )
        .route("/readyz", get(readyz))
        .with_state(state)
}

/// Ready when the store answers and writes, every outcome so far was saved,
/// and the server is not shutting down.
async fn readyz(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    if state.shutdown.is_cancelled() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the server is shutting down",
        ));
    }
    if !state.store.writer_alive() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            "the store's writer has stopped",
        ));
    }
    if !state.runs.healthy() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "outcome_unrecorded",
            "a run's outcome could not be saved; see the server log",
        ));
    }
    state.store.ping().await.map_err(|e| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            format!("the store does not answer: {e}"),
        )
    })?;
    Ok(Json(json!({ "status": "ready" })))
}
