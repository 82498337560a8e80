//! JSON-RPC 2.0: the request envelope, and A2A's errors with their codes,
//! gRPC status names and HTTP statuses (A2A 1.0.1 §5.4), rendered with the
//! `google.rpc.ErrorInfo` (and `BadRequest`) details 1.0 requires.

use serde::Deserialize;
use serde_json::{Map, Value, json};

/// `type.googleapis.com/google.rpc.ErrorInfo`.
pub const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";
/// `type.googleapis.com/google.rpc.BadRequest`.
pub const BAD_REQUEST_TYPE: &str = "type.googleapis.com/google.rpc.BadRequest";
/// The `domain` of every A2A `ErrorInfo`.
pub const ERROR_DOMAIN: &str = "a2a-protocol.org";

/// Every error an A2A endpoint answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum A2aError {
    /// `-32700`: the body is not JSON.
    Parse(String),
    /// `-32600`: JSON, but not a JSON-RPC request.
    InvalidRequest(String),
    /// `-32601`.
    MethodNotFound(String),
    /// `-32602`, naming the field.
    InvalidParams { field: String, message: String },
    /// `-32602` from a named validation rule (e.g. an extension envelope's),
    /// which the `ErrorInfo` carries as `metadata.rule`.
    RuleViolated {
        rule: String,
        field: String,
        message: String,
    },
    /// `-32603`; the message never carries internals.
    Internal,
    /// `-32001`.
    TaskNotFound(String),
    /// `-32002`.
    TaskNotCancelable(String),
    /// `-32003`.
    PushNotificationNotSupported,
    /// `-32004`.
    UnsupportedOperation(String),
    /// `-32005`.
    ContentTypeNotSupported(String),
    /// `-32006`.
    InvalidAgentResponse(String),
    /// `-32007`.
    ExtendedAgentCardNotConfigured,
    /// `-32008`.
    ExtensionSupportRequired(String),
    /// `-32009`.
    VersionNotSupported(String),
}

impl A2aError {
    /// The error's class name in the A2A SDKs (`TaskNotFoundError`, …),
    /// which 0.3 HTTP+JSON clients read from an error body's `type`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Parse(_) => "JSONParseError",
            Self::InvalidRequest(_) => "InvalidRequestError",
            Self::MethodNotFound(_) => "MethodNotFoundError",
            Self::InvalidParams { .. } | Self::RuleViolated { .. } => "InvalidParamsError",
            Self::Internal => "InternalError",
            Self::TaskNotFound(_) => "TaskNotFoundError",
            Self::TaskNotCancelable(_) => "TaskNotCancelableError",
            Self::PushNotificationNotSupported => "PushNotificationNotSupportedError",
            Self::UnsupportedOperation(_) => "UnsupportedOperationError",
            Self::ContentTypeNotSupported(_) => "ContentTypeNotSupportedError",
            Self::InvalidAgentResponse(_) => "InvalidAgentResponseError",
            Self::ExtendedAgentCardNotConfigured => "ExtendedAgentCardNotConfiguredError",
            Self::ExtensionSupportRequired(_) => "ExtensionSupportRequiredError",
            Self::VersionNotSupported(_) => "VersionNotSupportedError",
        }
    }

    /// The JSON-RPC error code.
    pub fn code(&self) -> i64 {
        match self {
            Self::Parse(_) => -32700,
            Self::InvalidRequest(_) => -32600,
            Self::MethodNotFound(_) => -32601,
            Self::InvalidParams { .. } | Self::RuleViolated { .. } => -32602,
            Self::Internal => -32603,
            Self::TaskNotFound(_) => -32001,
            Self::TaskNotCancelable(_) => -32002,
            Self::PushNotificationNotSupported => -32003,
            Self::UnsupportedOperation(_) => -32004,
            Self::ContentTypeNotSupported(_) => -32005,
            Self::InvalidAgentResponse(_) => -32006,
            Self::ExtendedAgentCardNotConfigured => -32007,
            Self::ExtensionSupportRequired(_) => -32008,
            Self::VersionNotSupported(_) => -32009,
        }
    }

    /// The `ErrorInfo.reason`: the error type in UPPER_SNAKE_CASE without "Error".
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Parse(_) => "JSON_PARSE",
            Self::InvalidRequest(_) => "INVALID_REQUEST",
            Self::MethodNotFound(_) => "METHOD_NOT_FOUND",
            Self::InvalidParams { .. } | Self::RuleViolated { .. } => "INVALID_PARAMS",
            Self::Internal => "INTERNAL",
            Self::TaskNotFound(_) => "TASK_NOT_FOUND",
            Self::TaskNotCancelable(_) => "TASK_NOT_CANCELABLE",
            Self::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            Self::UnsupportedOperation(_) => "UNSUPPORTED_OPERATION",
            Self::ContentTypeNotSupported(_) => "CONTENT_TYPE_NOT_SUPPORTED",
            Self::InvalidAgentResponse(_) => "INVALID_AGENT_RESPONSE",
            Self::ExtendedAgentCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            Self::ExtensionSupportRequired(_) => "EXTENSION_SUPPORT_REQUIRED",
            Self::VersionNotSupported(_) => "VERSION_NOT_SUPPORTED",
        }
    }

    /// The gRPC status name used by the HTTP+JSON binding's error body.
    pub fn grpc_status(&self) -> &'static str {
        match self {
            Self::Parse(_)
            | Self::InvalidRequest(_)
            | Self::InvalidParams { .. }
            | Self::RuleViolated { .. }
            | Self::ContentTypeNotSupported(_) => "INVALID_ARGUMENT",
            Self::MethodNotFound(_) | Self::TaskNotFound(_) => "NOT_FOUND",
            Self::Internal | Self::InvalidAgentResponse(_) => "INTERNAL",
            Self::TaskNotCancelable(_)
            | Self::PushNotificationNotSupported
            | Self::UnsupportedOperation(_)
            | Self::ExtendedAgentCardNotConfigured
            | Self::ExtensionSupportRequired(_)
            | Self::VersionNotSupported(_) => "FAILED_PRECONDITION",
        }
    }

    /// The HTTP status of the HTTP+JSON binding.
    pub fn http_status(&self) -> u16 {
        match self.grpc_status() {
            "NOT_FOUND" => 404,
            "INTERNAL" => 500,
            _ => 400,
        }
    }

    /// A message for people.
    pub fn message(&self) -> String {
        match self {
            Self::Parse(d) => format!("Invalid JSON payload: {d}"),
            Self::InvalidRequest(d) => format!("Request payload validation error: {d}"),
            Self::MethodNotFound(m) => format!("Method not found: {m}"),
            Self::InvalidParams { field, message } => {
                format!("Invalid parameters: {field}: {message}")
            }
            Self::RuleViolated {
                rule,
                field,
                message,
            } => format!("Invalid parameters: {field}: {message} (rule {rule})"),
            Self::Internal => "Internal error".to_owned(),
            Self::TaskNotFound(id) => format!("Task not found: {id}"),
            Self::TaskNotCancelable(why) => format!("Task cannot be canceled: {why}"),
            Self::PushNotificationNotSupported => "Push notifications are not supported".to_owned(),
            Self::UnsupportedOperation(what) => format!("Unsupported operation: {what}"),
            Self::ContentTypeNotSupported(what) => format!("Content type not supported: {what}"),
            Self::InvalidAgentResponse(what) => format!("Invalid agent response: {what}"),
            Self::ExtendedAgentCardNotConfigured => {
                "No extended agent card is configured".to_owned()
            }
            Self::ExtensionSupportRequired(uri) => {
                format!("The client must support extension {uri}")
            }
            Self::VersionNotSupported(what) => what.clone(),
        }
    }

    /// The detail objects: an `ErrorInfo` always, plus a `BadRequest` naming
    /// the field for invalid parameters.
    pub fn details(&self) -> Vec<Value> {
        let mut metadata = Map::new();
        match self {
            Self::TaskNotFound(id) | Self::TaskNotCancelable(id) => {
                metadata.insert("taskId".into(), json!(id));
            }
            Self::InvalidParams { field, .. } => {
                metadata.insert("field".into(), json!(field));
            }
            Self::RuleViolated { rule, field, .. } => {
                metadata.insert("field".into(), json!(field));
                metadata.insert("rule".into(), json!(rule));
            }
            _ => {}
        }
        let mut out = vec![json!({
            "@type": ERROR_INFO_TYPE,
            "reason": self.reason(),
            "domain": ERROR_DOMAIN,
            "metadata": metadata,
        })];
        if let Self::InvalidParams { field, message } | Self::RuleViolated { field, message, .. } =
            self
        {
            out.push(json!({
                "@type": BAD_REQUEST_TYPE,
                "fieldViolations": [{ "field": field, "description": message }],
            }));
        }
        out
    }

    /// The JSON-RPC `error` member.
    pub fn to_jsonrpc(&self) -> Value {
        json!({ "code": self.code(), "message": self.message(), "data": self.details() })
    }

    /// The HTTP+JSON (AIP-193) error body.
    pub fn to_rest(&self) -> Value {
        json!({ "error": {
            "code": self.http_status(),
            "status": self.grpc_status(),
            "message": self.message(),
            "details": self.details(),
        }})
    }
}

/// A parsed JSON-RPC request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The request id (string, number or null); `None` for a notification.
    pub id: Option<Value>,
    /// The method name.
    pub method: String,
    /// The params, if any.
    pub params: Option<Value>,
}

#[derive(Deserialize)]
struct Envelope {
    jsonrpc: Option<Value>,
    id: Option<Value>,
    method: Option<Value>,
    params: Option<Value>,
}

impl Request {
    /// Parses a request body. On failure also returns the id, when one
    /// could be read, so the error answer can carry it.
    pub fn parse(body: &[u8]) -> Result<Self, (Option<Value>, A2aError)> {
        let value: Value =
            serde_json::from_slice(body).map_err(|e| (None, A2aError::Parse(e.to_string())))?;
        let Value::Object(_) = &value else {
            return Err((
                None,
                A2aError::InvalidRequest("the request must be a JSON object".into()),
            ));
        };
        let env: Envelope = serde_json::from_value(value)
            .map_err(|e| (None, A2aError::InvalidRequest(e.to_string())))?;
        let id = env.id;
        let bad = |msg: &str| Err((id.clone(), A2aError::InvalidRequest(msg.to_owned())));
        if env.jsonrpc != Some(Value::String("2.0".into())) {
            return bad("\"jsonrpc\" must be \"2.0\"");
        }
        if let Some(i) = &id
            && !(i.is_string() || i.is_number() || i.is_null())
        {
            return Err((
                None,
                A2aError::InvalidRequest("\"id\" must be a string, a number or null".into()),
            ));
        }
        let method = match env.method {
            Some(Value::String(m)) if !m.is_empty() => m,
            _ => return bad("\"method\" must be a non-empty string"),
        };
        if let Some(p) = &env.params
            && !(p.is_object() || p.is_array())
        {
            return bad("\"params\" must be an object or an array");
        }
        Ok(Self {
            id,
            method,
            params: env.params,
        })
    }
}

/// A success response.
pub fn result(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// An error response; `id` is null when the request's id could not be read.
pub fn error(id: Option<&Value>, err: &A2aError) -> Value {
    json!({ "jsonrpc": "2.0", "id": id.cloned().unwrap_or(Value::Null), "error": err.to_jsonrpc() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_are_validated() {
        let ok =
            Request::parse(br#"{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"x"}}"#)
                .unwrap();
        assert_eq!(
            ok,
            Request {
                id: Some(json!(7)),
                method: "GetTask".into(),
                params: Some(json!({"id": "x"}))
            }
        );
        let code = |body: &[u8]| Request::parse(body).unwrap_err().1.code();
        assert_eq!(code(b"{not json"), -32700);
        assert_eq!(code(b"[1,2]"), -32600);
        assert_eq!(code(br#"{"id":1,"method":"x"}"#), -32600);
        assert_eq!(code(br#"{"jsonrpc":"1.0","id":1,"method":"x"}"#), -32600);
        assert_eq!(code(br#"{"jsonrpc":"2.0","id":1}"#), -32600);
        assert_eq!(code(br#"{"jsonrpc":"2.0","id":{},"method":"x"}"#), -32600);
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#),
            -32600
        );
        let (id, _) = Request::parse(br#"{"jsonrpc":"2.0","id":"a","method":""}"#).unwrap_err();
        assert_eq!(id, Some(json!("a")));
    }

    #[test]
    fn errors_render_as_the_python_sdk_captures_show() {
        // jr10_notfound.txt and rest10_notfound.txt from the official SDK, with our message.
        let err = A2aError::TaskNotFound("t1".into());
        assert_eq!(
            error(Some(&json!(4)), &err),
            json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32001, "message": "Task not found: t1", "data": [
                {"@type": ERROR_INFO_TYPE, "reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org", "metadata": {"taskId": "t1"}}
            ]}})
        );
        assert_eq!(err.to_rest()["error"]["code"], 404);
        assert_eq!(err.to_rest()["error"]["status"], "NOT_FOUND");
        let bad = A2aError::InvalidParams {
            field: "message.parts".into(),
            message: "at least one part is required".into(),
        };
        assert_eq!(
            bad.details()[1]["fieldViolations"][0]["field"],
            "message.parts"
        );
        assert_eq!(A2aError::VersionNotSupported("x".into()).http_status(), 400);
        assert_eq!(A2aError::PushNotificationNotSupported.code(), -32003);
    }
}
