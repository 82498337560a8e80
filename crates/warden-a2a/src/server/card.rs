//! The agent card. Only what this build really serves is listed: JSON-RPC
//! and HTTP+JSON, each at 1.0 and 0.3, with streaming; push is `false` until
//! it exists. A request that says `A2A-Version: 1.0` gets the pure 1.0
//! card; one without the header (a 0.3 client) also gets the 0.3 fields.

use std::collections::HashMap;

use axum::http::header::{CACHE_CONTROL, ETAG, IF_NONE_MATCH, LAST_MODIFIED};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::ProtocolVersion;
use crate::instance::{Instance, Runtime};
use warden_core::Timestamp;
use warden_core::confine::Isolation;

/// The card of `instance` served at `url`, in the shape `version` expects.
/// The extension entry that says which isolation tier runs this instance's
/// work (listed only while the tier is proven on this host).
pub const ISOLATION_URI: &str = "https://warden.dev/extensions/isolation/v1";

/// The isolation entry of `instance`'s card, if its tier is proven now.
fn isolation(instance: &Instance, confined_until: Option<Timestamp>) -> Option<Value> {
    let (params, description) = match &instance.isolation {
        Isolation::Host => return None,
        Isolation::Confined(policy) => (
            json!({
                "tier": "confined",
                "profile": policy.profile.as_str(),
                "certifiedUntil": confined_until?.to_string(),
            }),
            format!(
                "work runs confined by the kernel (namespaces, Landlock, seccomp), profile {}",
                policy.profile.as_str()
            ),
        ),
        Isolation::Container(c) => (
            json!({ "tier": "container", "image": c.image }),
            "work runs in a container without network and with a read-only root".to_owned(),
        ),
    };
    Some(json!({
        "uri": ISOLATION_URI,
        "description": description,
        "required": false,
        "params": params,
    }))
}

/// The card of `instance` served at `url`, in the shape `version` expects.
pub fn card(
    instance: &Instance,
    url: &str,
    secured: bool,
    confined_until: Option<Timestamp>,
    version: ProtocolVersion,
) -> Value {
    let mut card = json!({
        "name": instance.name,
        "description": instance.description,
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [
            { "url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0" },
            { "url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3" },
            { "url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0" },
            { "url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3" },
        ],
        "capabilities": { "streaming": instance.streaming, "pushNotifications": false },
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [skill(instance)],
    });
    let mut extensions: Vec<Value> = instance
        .extensions
        .iter()
        .map(|e| json!({ "uri": e.uri, "description": e.description, "required": e.required }))
        .collect();
    extensions.extend(isolation(instance, confined_until));
    if !extensions.is_empty() {
        card["capabilities"]["extensions"] = Value::Array(extensions);
    }
    if secured {
        card["securityRequirements"] = json!([{ "schemes": { "bearer": { "list": [] } } }]);
        card["securitySchemes"] = json!({ "bearer": {
            "httpAuthSecurityScheme": { "scheme": "Bearer" }
        }});
        if version == ProtocolVersion::V0_3 {
            // One object both versions can read: 0.3 takes `type`/`scheme`,
            // 1.0 the oneof member; each ignores the other's keys.
            card["securitySchemes"]["bearer"]["type"] = json!("http");
            card["securitySchemes"]["bearer"]["scheme"] = json!("bearer");
            card["security"] = json!([{ "bearer": [] }]);
        }
    }
    if version == ProtocolVersion::V0_3 {
        card["url"] = json!(url);
        card["preferredTransport"] = json!("JSONRPC");
        card["protocolVersion"] = json!("0.3.0");
        card["additionalInterfaces"] = json!([
            { "url": url, "transport": "JSONRPC" },
            { "url": url, "transport": "HTTP+JSON" },
        ]);
    }
    card
}

/// A card changes only when the server restarts with a new config, so it
/// was last modified when this process started serving.
static SERVED_SINCE: std::sync::LazyLock<std::time::SystemTime> =
    std::sync::LazyLock::new(std::time::SystemTime::now);

/// Fixes the cards' `Last-Modified` to now, when the server starts serving.
pub fn mark_served() {
    std::sync::LazyLock::force(&SERVED_SINCE);
}

/// What the instance's runtime does, as a skill.
fn skill(instance: &Instance) -> Value {
    match &instance.runtime {
        Runtime::Echo => json!({
            "id": "echo",
            "name": "echo",
            "description": "Answers with the parts it was sent, as an agent message and an artifact",
            "tags": ["echo"],
        }),
        Runtime::Command(_) => json!({
            "id": "command",
            "name": instance.name,
            "description": instance.description,
            "tags": ["command"],
        }),
        Runtime::Conformance => json!({
            "id": "tck",
            "name": "TCK Conformance",
            "description": "Handles TCK conformance test messages",
            "tags": ["tck"],
        }),
    }
}

/// Serves the card with `ETag` (and `304` on a matching `If-None-Match`)
/// and `Cache-Control`. An unsupported `A2A-Version` is refused.
pub fn respond(
    instance: &Instance,
    url: &str,
    secured: bool,
    confined_until: Option<Timestamp>,
    headers: &HeaderMap,
    query: &HashMap<String, String>,
) -> Response {
    let asked = super::asked_version(headers, query);
    let version = match ProtocolVersion::negotiate(asked) {
        // The conformance kit fetches the card without A2A-Version and
        // validates it against the 1.0 schema: its instances serve the
        // pure 1.0 card to everyone.
        Ok(_) if instance.runtime == Runtime::Conformance => ProtocolVersion::V1_0,
        Ok(v) => v,
        Err(e) => {
            let err = crate::jsonrpc::A2aError::VersionNotSupported(e.message);
            return (StatusCode::BAD_REQUEST, axum::Json(err.to_rest())).into_response();
        }
    };
    let body = card(instance, url, secured, confined_until, version).to_string();
    let etag = format!(
        "\"{}\"",
        &hex::encode(Sha256::digest(body.as_bytes()))[..32]
    );
    let matches = headers
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut resp = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    };
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(ETAG, v);
    }
    h.insert(
        CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    if let Ok(v) = HeaderValue::from_str(&httpdate::fmt_http_date(*SERVED_SINCE)) {
        h.insert(LAST_MODIFIED, v);
    }
    h.insert(
        axum::http::header::VARY,
        HeaderValue::from_static("A2A-Version"),
    );
    resp
}
