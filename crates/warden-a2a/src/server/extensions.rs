//! Extension activation: a client names the extensions it wants in
//! `A2A-Extensions` (0.3: `X-A2A-Extensions`), comma-separated; those the
//! instance supports are active for the request and echoed back in the
//! same header. An extension the instance marks required must be asked for.

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::response::Response;

use crate::instance::Instance;
use crate::jsonrpc::A2aError;

const MODERN: &str = "a2a-extensions";
const LEGACY: &str = "x-a2a-extensions";

/// What one request asked for and which header names it used.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requested {
    uris: Vec<String>,
    modern: bool,
    legacy: bool,
}

impl Requested {
    /// Reads both headers (each may repeat).
    pub fn from_headers(headers: &HeaderMap) -> Self {
        let mut out = Self::default();
        for (name, flag) in [(MODERN, &mut out.modern), (LEGACY, &mut out.legacy)] {
            for value in headers.get_all(name) {
                *flag = true;
                let Ok(value) = value.to_str() else { continue };
                for uri in value.split(',').map(str::trim).filter(|u| !u.is_empty()) {
                    if !out.uris.iter().any(|u| u == uri) {
                        out.uris.push(uri.to_owned());
                    }
                }
            }
        }
        out
    }

    /// The instance's extensions this request activates, in its order.
    pub fn active(&self, instance: &Instance) -> Vec<String> {
        instance
            .extensions
            .iter()
            .filter(|e| self.uris.contains(&e.uri))
            .map(|e| e.uri.clone())
            .collect()
    }

    /// The error for a required extension the request did not ask for.
    pub fn missing_required(&self, instance: &Instance) -> Option<A2aError> {
        instance
            .extensions
            .iter()
            .find(|e| e.required && !self.uris.contains(&e.uri))
            .map(|e| A2aError::ExtensionSupportRequired(e.uri.clone()))
    }

    /// Echoes the active extensions in the header name(s) the client used
    /// (`A2A-Extensions` when it used none).
    pub fn echo(&self, instance: &Instance, resp: &mut Response) {
        let active = self.active(instance);
        if active.is_empty() {
            return;
        }
        let Ok(value) = HeaderValue::from_str(&active.join(", ")) else {
            return;
        };
        let h = resp.headers_mut();
        if self.modern || !self.legacy {
            h.insert(HeaderName::from_static(MODERN), value.clone());
        }
        if self.legacy {
            h.insert(HeaderName::from_static(LEGACY), value);
        }
    }
}
