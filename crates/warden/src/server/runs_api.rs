//! `/api/v1/runs`: start, list, inspect and cancel runs.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header::LOCATION};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use warden_core::{RunId, RunRecord, RunSpec, RunState, StdinMode, Terminal};

use super::json::JsonBody;
use super::{ApiError, AppState, sse};
use crate::config::secs;

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/api/v1/runs", post(create).get(list))
        .route("/api/v1/runs/{id}", get(show))
        .route("/api/v1/runs/{id}/cancel", post(cancel))
        .route("/api/v1/runs/{id}/events", get(sse::run_events))
        .with_state(state)
}

/// The body of `POST /api/v1/runs`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateRun {
    argv: Vec<String>,
    cwd: Option<PathBuf>,
    timeout_seconds: Option<f64>,
    max_output_bytes: Option<u64>,
    #[serde(default)]
    pty: bool,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

/// The JSON shape of a run. Environment values are not echoed (they may be secrets).
pub fn view(r: &RunRecord) -> Value {
    json!({
        "id": r.id,
        "state": r.state,
        "argv": r.spec.argv,
        "cwd": r.spec.cwd,
        "env": r.spec.env.iter().map(|(k, _)| k).collect::<Vec<_>>(),
        "timeout_seconds": r.spec.timeout.as_secs_f64(),
        "max_output_bytes": r.spec.max_output,
        "pty": r.spec.terminal == Terminal::Pty,
        "outcome": r.outcome,
        "pid": r.pid,
        "created_at": r.created_at,
        "started_at": r.started_at,
        "finished_at": r.finished_at,
        "output_bytes": r.output_bytes,
        "events_url": format!("/api/v1/runs/{}/events", r.id),
    })
}

pub fn parse_id(raw: &str) -> Result<RunId, ApiError> {
    raw.parse::<RunId>()
        .map_err(|_| ApiError::field("id", format!("{raw:?} is not a run id (a UUID)")))
}

async fn create(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<CreateRun>,
) -> Result<Response, ApiError> {
    let timeout = match req.timeout_seconds {
        Some(t) if !(t.is_finite() && t > 0.0) => {
            return Err(ApiError::field(
                "timeout_seconds",
                format!("must be greater than zero, got {t}"),
            ));
        }
        Some(t) => secs(t),
        None => state.defaults.default_timeout(),
    };
    let cwd = match req.cwd {
        Some(c) if c.is_absolute() => c,
        Some(c) => state.workspace.join(c),
        None => state.workspace.clone(),
    };
    let spec = RunSpec {
        argv: req.argv,
        cwd,
        env: req.env.into_iter().collect(),
        timeout,
        max_output: req
            .max_output_bytes
            .unwrap_or(state.defaults.default_max_output_bytes),
        terminal: if req.pty {
            Terminal::Pty
        } else {
            Terminal::Pipes
        },
        stdin: StdinMode::Closed,
        confine: None,
    };
    let run = state
        .runs
        .start(spec, "operator")
        .await
        .map_err(|e| rename_fields(e.into()))?;
    let location = format!("/api/v1/runs/{}", run.id);
    Ok((
        StatusCode::CREATED,
        [(LOCATION, location)],
        Json(view(&run)),
    )
        .into_response())
}

/// Core validation speaks of `timeout` and `max_output`; the wire says seconds and bytes.
fn rename_fields(mut e: ApiError) -> ApiError {
    e.field = e.field.map(|f| match f.as_str() {
        "timeout" => "timeout_seconds".into(),
        "max_output" => "max_output_bytes".into(),
        _ => f,
    });
    e
}

async fn list(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let mut filter = None;
    let mut limit = 100u32;
    for (k, v) in &q {
        match k.as_str() {
            "state" => {
                filter = Some(
                    v.parse::<RunState>()
                        .map_err(|_| ApiError::field("state", format!("unknown state {v:?}")))?,
                )
            }
            "limit" => {
                limit = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=1000).contains(n))
                    .ok_or_else(|| ApiError::field("limit", "must be an integer from 1 to 1000"))?;
            }
            other => {
                return Err(ApiError::field(
                    other,
                    format!("unknown query parameter {other:?}"),
                ));
            }
        }
    }
    let runs = state.store.list_runs(filter, limit).await?;
    Ok(Json(
        json!({ "runs": runs.iter().map(view).collect::<Vec<_>>() }),
    ))
}

async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let run = state.store.get_run(parse_id(&id)?).await?;
    Ok(Json(view(&run)))
}

/// Cancels and waits briefly for the outcome: 200 with the ended run, or 202
/// when it has not ended yet (watch its events).
async fn cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let run = state.runs.cancel(parse_id(&id)?, "operator").await?;
    let status = if run.state.is_terminal() {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok((status, Json(view(&run))).into_response())
}
