//! `/api/v1/hitl`: prompts of adapter commands waiting for an answer
//! (`hitl-prompt/v1`), and the operator's way to answer one.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use warden_a2a::engine::AnswerError;

use super::json::JsonBody;
use super::{ApiError, AppState};

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/api/v1/hitl", get(list))
        .route("/api/v1/hitl/{id}/respond", post(respond))
        .with_state(state)
}

async fn list(State(state): State<AppState>) -> Json<Value> {
    let prompts: Vec<Value> = state
        .engine
        .pending_prompts()
        .iter()
        .map(|p| p.envelope())
        .collect();
    Json(json!({ "prompts": prompts }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Respond {
    text: String,
}

/// Answers prompt `id`: `200` with the task once the text (and a newline)
/// reached the process; `400` for an unacceptable text, `409` when the
/// prompt is not waiting (answered, withdrawn, its process gone) or the
/// text did not reach the process.
async fn respond(
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<Respond>,
) -> Result<Json<Value>, ApiError> {
    match state
        .engine
        .answer_prompt(&id, &body.text, "operator")
        .await
    {
        Ok(task) => Ok(Json(json!({
            "prompt_id": id,
            "task_id": task.id.to_string(),
            "state": task.status.state.as_str(),
        }))),
        Err(e @ AnswerError::Invalid { .. }) => Err(ApiError::field("text", e.message())),
        Err(e @ AnswerError::Stale(_)) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "prompt_not_waiting",
            e.message(),
        )),
        Err(e @ AnswerError::NotDelivered { .. }) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_delivered",
            e.message(),
        )),
        Err(AnswerError::Store(m)) => {
            tracing::error!(error = %m, "cannot record an answer");
            Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                "the answer could not be recorded; retry",
            ))
        }
    }
}
