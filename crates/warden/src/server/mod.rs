//! The HTTP surface: routers per area, assembled with shared state.

mod api_error;
mod auth;
mod health;
mod json;
mod runs_api;
mod sse;

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use tokio_util::sync::CancellationToken;
use warden_store::Store;

use crate::config::RunsConfig;
use crate::runs::RunService;

pub use api_error::ApiError;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub runs: Arc<RunService>,
    pub store: Store,
    /// Cancelled when the server begins shutting down; long streams end on it.
    pub shutdown: CancellationToken,
    /// Run defaults and limits from the config.
    pub defaults: Arc<RunsConfig>,
    /// Where runs without a `cwd` run: the directory `warden serve` started in.
    pub workspace: PathBuf,
}

/// The whole HTTP surface. `token` protects `/api/v1/*` when set.
pub fn router(state: AppState, token: Option<String>) -> Router {
    let api = runs_api::router(state.clone()).layer(axum::middleware::from_fn_with_state(
        auth::OperatorAuth::new(token),
        auth::require_operator,
    ));
    Router::new()
        .merge(health::router(state))
        .merge(api)
        .fallback(|| async {
            ApiError::new(
                axum::http::StatusCode::NOT_FOUND,
                "no_route",
                "no such route",
            )
        })
}
