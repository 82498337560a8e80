//! The HTTP surface: routers per area, assembled with shared state.

mod aiwg_api;
mod api_error;
mod audit_api;
mod auth;
mod bus_api;
mod health;
mod hitl_api;
mod isolation_api;
mod json;
mod runs_api;
mod sse;

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower_http::catch_panic::CatchPanicLayer;
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
    /// Open event streams are capped: each can hold a page of output in memory.
    pub streams: Arc<Semaphore>,
    /// The A2A task engine, for the operator's prompt answers.
    pub engine: warden_a2a::engine::TaskEngine,
    /// The scratchpad bus.
    pub bus: warden_bus::Bus,
    /// The isolation tiers and their proofs.
    pub tiers: Arc<crate::tiers::Tiers>,
    /// The link to `aiwg serve` and the missions, when `AIWG_SERVE_ENDPOINT`
    /// is set.
    pub aiwg: Option<Arc<crate::aiwg::Aiwg>>,
}

/// The most event streams open at once.
pub const MAX_EVENT_STREAMS: usize = 256;

/// The whole HTTP surface. `token` protects `/api/v1/*` when set; `a2a` is
/// the agents' own surface (cards and JSON-RPC), open as A2A expects.
pub fn router(state: AppState, token: Option<String>, a2a: Router) -> Router {
    let api = runs_api::router(state.clone())
        .merge(audit_api::router(state.clone()))
        .merge(hitl_api::router(state.clone()))
        .merge(bus_api::router(state.clone()))
        .merge(isolation_api::router(state.clone()))
        .merge(aiwg_api::router(state.clone()))
        .layer(axum::middleware::from_fn_with_state(
            auth::OperatorAuth::new(token),
            auth::require_operator,
        ));
    Router::new()
        .merge(aiwg_api::dispatch_router(state.clone()))
        .merge(health::router(state))
        .merge(api)
        .merge(a2a)
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no_route", "no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this route does not take that method",
            )
        })
        .layer(CatchPanicLayer::custom(
            |_: Box<dyn std::any::Any + Send>| {
                tracing::error!("a request handler panicked");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "internal error; see the server log",
                )
                .into_response()
            },
        ))
}
