//! `GET /api/v1/audit`: the audit log (who asked for what, refusals
//! included), with its hash chain checked.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};
use warden_store::StoreError;

use super::{ApiError, AppState};

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/api/v1/audit", get(list))
        .with_state(state)
}

fn number(q: &HashMap<String, String>, key: &str, default: u64) -> Result<u64, ApiError> {
    q.get(key).map_or(Ok(default), |v| {
        v.parse()
            .map_err(|_| ApiError::field(key, format!("must be a non-negative integer, got {v:?}")))
    })
}

/// Entries after `?after=` (default 0), at most `?limit=` (1–1000, default
/// 100), oldest first, and the state of the whole hash chain: `intact`
/// (with how many entries were checked) or `broken` (with the first entry
/// that does not check out).
async fn list(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let after = number(&q, "after", 0)?;
    let limit = number(&q, "limit", 100)?;
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::field("limit", "must be from 1 to 1000"));
    }
    let entries = state
        .store
        .audit_log(after, u32::try_from(limit).unwrap_or(1000))
        .await?;
    let chain = match state.store.verify_audit().await {
        Ok(checked) => json!({ "state": "intact", "checked": checked }),
        Err(StoreError::AuditChainBroken { seq }) => json!({ "state": "broken", "at": seq }),
        Err(e) => return Err(e.into()),
    };
    Ok(Json(json!({ "entries": entries, "chain": chain })))
}
