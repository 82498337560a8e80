//! `GET /api/v1/isolation`: which tiers this server offers and the proof
//! behind each; `POST /api/v1/isolation/certify` re-runs the confined
//! tier's probes now.

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

use super::AppState;

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/api/v1/isolation", get(status))
        .route("/api/v1/isolation/certify", post(certify))
        .with_state(state)
}

async fn status(State(state): State<AppState>) -> Json<Value> {
    Json(state.tiers.status())
}

/// Answers once the probes have run, whatever they found (the status says).
async fn certify(State(state): State<AppState>) -> Json<Value> {
    let result = state.tiers.certify().await;
    let _ = state
        .store
        .audit(
            "operator",
            "isolation.certify",
            "confined",
            json!({ "certified": result.is_ok(), "reason": result.as_ref().err() }),
        )
        .await;
    Json(state.tiers.status())
}
