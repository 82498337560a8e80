//! Wiring of the AIWG executor contract: enabled by `AIWG_SERVE_ENDPOINT`
//! (silently off without it), with the identity in `WARDEN_HOME/identity`
//! and the capabilities this host has proven.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use warden_a2a::instance::{DEFAULT_INSTANCE, Runtime};
use warden_aiwg::{Link, LinkConfig, MissionTarget, Missions, Resolve};
use warden_core::confine::Isolation;
use warden_exec::shim::ShimLauncher;
use warden_store::Store;

use crate::config::ServeConfig;
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

/// The link and the mission service, when configured.
pub struct Aiwg {
    pub link: Arc<Link>,
    pub missions: Arc<Missions>,
    /// Stops the link once the missions' last events are logged.
    stop: CancellationToken,
    task: tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Aiwg {
    /// The clean end, after the runs were stopped: every mission's end is
    /// logged, the outbox is delivered over the open WebSocket, then the
    /// executor deregisters.
    pub async fn shut_down(&self) {
        // The shims go on: the missions are suspended, not stopped.
        if let Err(e) = self.missions.suspend_all().await {
            tracing::error!(error = %e, "cannot suspend the missions");
        }
        self.stop.cancel();
        if let Some(task) = self.task.lock().await.take() {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), task).await;
        }
        self.link.deregister().await;
    }
}

/// Where a dispatch's objective runs: the named instance (the seed's
/// `agent_id`, the schema's `instance_id`), else `default`; in its
/// workspace, else its command's directory, else the server's.
fn resolver(config: &ServeConfig, tiers: Arc<Tiers>) -> Resolve {
    let instances = config.instances.clone();
    let workspace = config.workspace.clone();
    let timeout = config.runs.default_timeout();
    let max_output = config.runs.default_max_output_bytes;
    Arc::new(move |name: Option<&str>| {
        let name = name.unwrap_or(DEFAULT_INSTANCE);
        let Some(instance) = instances.get(name) else {
            return Err(format!("no instance named {name:?} is hosted here"));
        };
        let cwd = match (&instance.workspace, &instance.runtime) {
            (Some(ws), _) => ws.clone(),
            (None, Runtime::Command(c)) => c.cwd.clone(),
            (None, _) => workspace.clone(),
        };
        let refusal = match &instance.isolation {
            Isolation::Host => None,
            Isolation::Confined(_) => tiers.confined_ready().err(),
            Isolation::Container(_) => {
                Some("missions do not run in the container tier (their shim owns the run)".into())
            }
        };
        Ok(MissionTarget {
            instance: instance.name.clone(),
            cwd,
            isolation: instance.isolation.clone(),
            timeout,
            max_output,
            refusal,
        })
    })
}

/// Starts the link when configured; `None` (and nothing started) otherwise.
/// Missions a previous server left are checked before the first connection.
pub async fn start(
    home: &Path,
    config: &ServeConfig,
    store: &Store,
    tiers: &Arc<Tiers>,
    listening: SocketAddr,
) -> anyhow::Result<Option<Aiwg>> {
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
    let caps_tiers = Arc::clone(tiers);
    let link_config = LinkConfig {
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
            // Missions do not run in the container tier: not claimed here.
            let mut caps: Vec<String> = caps_tiers
                .capabilities()
                .into_iter()
                .filter(|c| c != "isolation:container")
                .collect();
            caps.extend(platform());
            // Missions survive a restart (their shims), and prompts in
            // their output round-trip (mission.hitl_*).
            caps.push("resumable".to_owned());
            caps.push("hitl".to_owned());
            caps
        }),
    };
    let link = Link::new(link_config, store.clone());
    let launcher = ShimLauncher {
        helper: std::env::current_exe().context("locating the warden binary")?,
        env_allow: config.runs.env_allow.clone(),
        grace: config.runs.grace(),
        watcher: warden_exec::dirwatch::DirWatcher::new()
            .context("starting the inotify watcher of the missions' run directories")?,
    };
    let missions = Missions::new(
        store.clone(),
        Arc::clone(&link),
        launcher,
        home.join("missions"),
        resolver(config, Arc::clone(tiers)),
    );
    missions.listen();
    missions
        .recover()
        .await
        .context("checking the missions a previous server left")?;
    // Not the server's shutdown token: the link outlives the runs, to
    // deliver how the missions ended.
    let stop = CancellationToken::new();
    let task = tokio::spawn(Arc::clone(&link).run(stop.clone()));
    Ok(Some(Aiwg {
        link,
        missions,
        stop,
        task: tokio::sync::Mutex::new(Some(task)),
    }))
}
