//! One error type for every handler: a JSON body that names what is wrong,
//! never an internal detail.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use warden_core::CoreError;
use warden_exec::SpawnError;
use warden_store::StoreError;

use crate::runs::RunError;

/// An HTTP error: status, stable code, message and, when it is about one
/// field of the request, that field's name.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub field: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            field: None,
        }
    }

    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: Some(field.into()),
            ..Self::new(StatusCode::BAD_REQUEST, "invalid_field", message)
        }
    }

    pub fn not_found(kind: &str, message: impl Into<String>) -> Self {
        Self {
            field: Some("id".to_owned()),
            ..Self::new(StatusCode::NOT_FOUND, kind_code(kind), message)
        }
    }

    fn internal(e: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %e, "request failed");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; see the server log",
        )
    }
}

fn kind_code(kind: &str) -> &'static str {
    match kind {
        "run" => "run_not_found",
        _ => "not_found",
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut err = json!({ "code": self.code, "message": self.message });
        if let Some(f) = self.field {
            err["field"] = json!(f);
        }
        (self.status, Json(json!({ "error": err }))).into_response()
    }
}

impl From<CoreError> for ApiError {
    fn from(e: CoreError) -> Self {
        match &e {
            CoreError::InvalidField { field, message } => {
                Self::field(field.clone(), message.clone())
            }
            CoreError::MalformedId(_) => Self::field("id", e.to_string()),
            CoreError::InvalidTransition { .. } => {
                Self::new(StatusCode::CONFLICT, "conflict", e.to_string())
            }
            _ => Self::new(StatusCode::BAD_REQUEST, "invalid", e.to_string()),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound { kind, id } => {
                Self::not_found(kind, format!("{kind} {id} not found"))
            }
            StoreError::Rejected(c) => c.into(),
            StoreError::Closed => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "the store is closed",
            ),
            other => Self::internal(&other),
        }
    }
}

impl From<RunError> for ApiError {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Invalid(c) => c.into(),
            RunError::Unstartable(s) => {
                let field = if matches!(s, SpawnError::BadCwd { .. }) {
                    "cwd"
                } else {
                    "argv[0]"
                };
                Self::field(field, s.to_string())
            }
            RunError::Store(s) => s.into(),
            RunError::Ended(_) => Self::new(StatusCode::CONFLICT, "run_ended", e.to_string()),
            RunError::NotLive(_) => Self::new(StatusCode::CONFLICT, "run_not_live", e.to_string()),
            RunError::TooMany(_) => Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_runs",
                e.to_string(),
            ),
            RunError::Internal => Self::internal(&e),
            RunError::NoStdin(_) | RunError::StdinFailed(..) => {
                Self::new(StatusCode::CONFLICT, "stdin_unavailable", e.to_string())
            }
            RunError::ShuttingDown => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "shutting_down",
                e.to_string(),
            ),
        }
    }
}
