//! The store's error type.

use warden_core::CoreError;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite refused the operation.
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A stored JSON value did not (de)serialize.
    #[error("stored JSON is invalid: {0}")]
    Json(#[from] serde_json::Error),
    /// The entity does not exist.
    #[error("{kind} {id} not found")]
    NotFound { kind: &'static str, id: String },
    /// The domain refused the change (e.g. finishing a finished run).
    #[error(transparent)]
    Rejected(#[from] CoreError),
    /// The batch this write was in failed to commit; nothing of it was saved.
    #[error("commit failed, nothing was saved: {0}")]
    Commit(String),
    /// The writer thread is gone (the store is shutting down or crashed).
    #[error("store writer is not running")]
    Closed,
    /// Opening or migrating the database failed.
    #[error("cannot open store at {path}: {why}")]
    Open { path: String, why: String },
    /// The audit hash chain does not verify.
    #[error("audit chain broken at entry {seq}")]
    AuditChainBroken { seq: u64 },
}

impl StoreError {
    /// Whether the request named something that does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    /// Whether retrying the same call later could succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ),
            Self::Commit(_) => true,
            Self::Sqlite(_)
            | Self::Json(_)
            | Self::NotFound { .. }
            | Self::Rejected(_)
            | Self::Closed
            | Self::Open { .. }
            | Self::AuditChainBroken { .. } => false,
        }
    }
}
