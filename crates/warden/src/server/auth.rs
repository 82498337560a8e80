//! Operator authentication for `/api/v1/*`: a bearer token compared in
//! constant time (after a length check). Without a configured token the
//! server only ever listens on loopback.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::ApiError;

#[derive(Clone)]
pub struct OperatorAuth(Option<Arc<[u8]>>);

impl OperatorAuth {
    pub fn new(token: Option<String>) -> Self {
        Self(token.map(|t| Arc::from(t.into_bytes().into_boxed_slice())))
    }

    fn accepts(&self, presented: Option<&[u8]>) -> bool {
        match (&self.0, presented) {
            (None, _) => true,
            (Some(want), Some(got)) => {
                want.len() == got.len() && bool::from(want.as_ref().ct_eq(got))
            }
            (Some(_), None) => false,
        }
    }
}

pub async fn require_operator(
    State(auth): State<OperatorAuth>,
    req: Request,
    next: Next,
) -> Response {
    let presented = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
    if auth.accepts(presented) {
        return next.run(req).await;
    }
    let mut resp = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "missing or invalid operator token (Authorization: Bearer …)",
    )
    .into_response();
    resp.headers_mut().insert(
        WWW_AUTHENTICATE,
        axum::http::HeaderValue::from_static("Bearer"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_must_match_exactly() {
        let auth = OperatorAuth::new(Some("0123456789abcdef".into()));
        assert!(auth.accepts(Some(b"0123456789abcdef")));
        assert!(!auth.accepts(Some(b"0123456789abcdeF")));
        assert!(!auth.accepts(Some(b"0123456789abcde")));
        assert!(!auth.accepts(None));
        assert!(OperatorAuth::new(None).accepts(None));
    }
}
