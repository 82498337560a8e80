//! The bearer token A2A clients present when one is configured. Cards stay
//! public (they say which scheme to use); every other route checks it, in
//! constant time after a length check.

use std::sync::Arc;

use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use subtle::ConstantTimeEq;

/// The configured token, if any.
#[derive(Clone, Default)]
pub struct ClientToken(Option<Arc<[u8]>>);

impl std::fmt::Debug for ClientToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "ClientToken(set)"
        } else {
            "ClientToken(none)"
        })
    }
}

impl ClientToken {
    /// `None`: the A2A endpoints are open (loopback only, see the config).
    pub fn new(token: Option<String>) -> Self {
        Self(token.map(|t| Arc::from(t.into_bytes().into_boxed_slice())))
    }

    /// Whether clients must present a token.
    pub fn required(&self) -> bool {
        self.0.is_some()
    }

    /// `None` when `headers` carry the token (or none is needed), else the 401.
    pub fn check(&self, headers: &HeaderMap) -> Option<Response> {
        let want = self.0.as_ref()?;
        // The scheme name is case-insensitive (RFC 7235); the token is not.
        let presented = headers.get(AUTHORIZATION).and_then(|v| {
            let v = v.as_bytes();
            (v.len() > 7 && v[..7].eq_ignore_ascii_case(b"bearer ")).then(|| &v[7..])
        });
        if presented.is_some_and(|got| want.len() == got.len() && bool::from(want.ct_eq(got))) {
            return None;
        }
        let body = json!({ "error": {
            "code": 401,
            "status": "UNAUTHENTICATED",
            "message": "missing or invalid token: send Authorization: Bearer <token>, as the agent card's securitySchemes say",
        }});
        let mut resp = (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
        resp.headers_mut()
            .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        Some(resp)
    }
}
