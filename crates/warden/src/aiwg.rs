//! Wiring of the AIWG executor contract: enabled by `AIWG_SERVE_ENDPOINT`
//! (silently off without it), with the identity in `WARDEN_HOME/identity`
//! and the capabilities this host has proven.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use warden_aiwg::{Link, LinkConfig};
use warden_store::Store;

use crate::tiers::Tiers;

/// The platform capability of this build's target.
fn platform() -> Option<String> {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        _ => return None,
    };
    (std::env::consts::OS == "linux").then(|| format!("platform:linux/{arch}"))
}

/// Starts the link when configured; `None` (and nothing started) otherwise.
pub fn start(
    home: &Path,
    store: &Store,
    tiers: &Arc<Tiers>,
    listening: SocketAddr,
    shutdown: CancellationToken,
) -> anyhow::Result<Option<Arc<Link>>> {
    let Some(endpoint) = std::env::var("AIWG_SERVE_ENDPOINT")
        .ok()
        .filter(|e| !e.trim().is_empty())
    else {
        return Ok(None);
    };
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        anyhow::bail!("AIWG_SERVE_ENDPOINT must be an http:// or https:// URL, got {endpoint:?}");
    }
    let executor_id = warden_aiwg::identity::load_or_create(home)
        .with_context(|| format!("the executor identity in {}", home.display()))?;
    let rest_url = std::env::var("AIWG_COCKPIT_EXECUTOR_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| format!("http://{listening}"));
    let ws_url = rest_url
        .replacen("https://", "wss://", 1)
        .replacen("http://", "ws://", 1);
    let tiers = Arc::clone(tiers);
    let config = LinkConfig {
        endpoint,
        name: std::env::var("AIWG_SERVE_NAME")
            .ok()
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| "agentic-sandbox".to_owned()),
        executor_id,
        rest_url,
        ws_url,
        version: env!("CARGO_PKG_VERSION").to_owned(),
        capabilities: Arc::new(move || {
            let mut caps = tiers.capabilities();
            caps.extend(platform());
            caps
        }),
    };
    let link = Link::new(config, store.clone());
    tokio::spawn(Arc::clone(&link).run(shutdown));
    Ok(Some(link))
}
