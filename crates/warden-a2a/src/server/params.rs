//! Request parameters both 1.0 bindings (JSON-RPC and HTTP+JSON) share:
//! the same checks, the same field names in errors, one place.

use serde_json::{Value, json};
use warden_core::{Message, Timestamp};
use warden_store::TaskFilter;

use crate::engine::{ListQuery, ListResult};
use crate::jsonrpc::A2aError;
use crate::wire::v1;

/// A `historyLength`: absent means all, negative is refused naming `field`.
pub fn history_length(n: Option<i64>, field: &str) -> Result<Option<usize>, A2aError> {
    n.map(|n| {
        usize::try_from(n).map_err(|_| A2aError::InvalidParams {
            field: field.into(),
            message: "must not be negative".into(),
        })
    })
    .transpose()
}

/// A wire error inside `prefix` as an `InvalidParams` naming the full path.
pub fn invalid(e: crate::WireError, prefix: &str) -> A2aError {
    A2aError::InvalidParams {
        field: format!("{prefix}.{}", e.field),
        message: e.message,
    }
}

/// A 1.0 `SendMessageRequest`: the validated message and its configuration.
/// Push configuration is refused, since push is not supported.
pub fn v1_send(req: v1::SendMessageRequest) -> Result<V1Send, A2aError> {
    let config = req.configuration.unwrap_or_default();
    if config.task_push_notification_config.is_some() {
        return Err(A2aError::PushNotificationNotSupported);
    }
    let message = req
        .message
        .ok_or_else(|| A2aError::InvalidParams {
            field: "message".into(),
            message: "is required".into(),
        })?
        .try_into()
        .map_err(|e| invalid(e, "message"))?;
    Ok(V1Send {
        message,
        config,
        metadata: req.metadata,
    })
}

/// A parsed 1.0 `SendMessageRequest`.
pub struct V1Send {
    pub message: Message,
    pub config: v1::SendMessageConfiguration,
    /// The request's own metadata.
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

/// The send context of a request: the extensions it activated that
/// `instance` supports, and the request's metadata.
pub fn send_context(
    extensions: &super::extensions::Requested,
    instance: &crate::instance::Instance,
    metadata: Option<serde_json::Map<String, serde_json::Value>>,
) -> crate::engine::SendContext {
    crate::engine::SendContext {
        extensions: extensions.active(instance),
        metadata,
    }
}

/// `ListTasks` parameters as either binding carries them (JSON-RPC params,
/// or HTTP+JSON query parameters).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListParams {
    pub context_id: Option<String>,
    pub status: Option<String>,
    pub page_size: Option<i64>,
    pub page_token: Option<String>,
    pub history_length: Option<i64>,
    pub status_timestamp_after: Option<String>,
    pub include_artifacts: Option<bool>,
}

impl ListParams {
    /// Checks every field and builds the engine's query.
    pub fn query(self) -> Result<ListQuery, A2aError> {
        let state = self
            .status
            .filter(|s| s != "TASK_STATE_UNSPECIFIED")
            .map(|s| {
                v1::parse_state(&s).map_err(|e| A2aError::InvalidParams {
                    field: "status".into(),
                    message: e.message,
                })
            })
            .transpose()?;
        let updated_after = self
            .status_timestamp_after
            .map(|t| {
                serde_json::from_value::<Timestamp>(Value::String(t)).map_err(|e| {
                    A2aError::InvalidParams {
                        field: "statusTimestampAfter".into(),
                        message: e.to_string(),
                    }
                })
            })
            .transpose()?;
        let page_size = self
            .page_size
            .map(|n| {
                u32::try_from(n).map_err(|_| A2aError::InvalidParams {
                    field: "pageSize".into(),
                    message: "must be from 1 to 100".into(),
                })
            })
            .transpose()?;
        Ok(ListQuery {
            filter: TaskFilter {
                context_id: self.context_id,
                state,
                updated_after,
            },
            page_size,
            page_token: self.page_token,
            history_length: history_length(self.history_length, "historyLength")?,
            include_artifacts: self.include_artifacts.unwrap_or(false),
        })
    }
}

/// The `ListTasksResponse` body.
pub fn list_response(out: &ListResult) -> Value {
    json!({
        "tasks": out.tasks.iter().map(v1::Task::from).collect::<Vec<_>>(),
        "nextPageToken": out.next_page_token,
        "pageSize": out.page_size,
        "totalSize": out.total_size,
    })
}
