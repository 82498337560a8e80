//! Our JSON body extractor: malformed JSON and wrong fields get a 4xx JSON
//! body naming the field, never axum's plain-text rejection.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use serde::de::DeserializeOwned;

use super::ApiError;

/// A JSON request body of type `T`.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let json_type = req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_none_or(|v| v.starts_with("application/json"));
        if !json_type {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as application/json",
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            let status = e.status();
            let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
                "body_too_large"
            } else {
                "unreadable_body"
            };
            ApiError::new(
                status,
                code,
                format!("cannot read the body: {}", e.body_text()),
            )
        })?;
        let de = &mut serde_json::Deserializer::from_slice(&bytes);
        match serde_path_to_error::deserialize(de) {
            Ok(v) => Ok(Self(v)),
            Err(e) => {
                let path = e.path().to_string();
                let inner = e.into_inner();
                if inner.is_syntax() || inner.is_eof() {
                    return Err(ApiError::new(
                        StatusCode::BAD_REQUEST,
                        "malformed_json",
                        format!("the body is not valid JSON: {inner}"),
                    ));
                }
                let field = if path == "." {
                    unknown_field(&inner.to_string()).unwrap_or(path)
                } else {
                    path
                };
                Err(ApiError::field(field, inner.to_string()))
            }
        }
    }
}

/// Pulls the name out of serde's "unknown field `x`" / "missing field `x`".
fn unknown_field(msg: &str) -> Option<String> {
    let start = msg.find('`')? + 1;
    let len = msg[start..].find('`')?;
    Some(msg[start..start + len].to_owned())
}
