//! `warden serve`: open the store, settle what a previous process left
//! behind, and serve HTTP until SIGTERM or SIGINT.

use std::io::Write;
use std::sync::Arc;

use anyhow::Context;
use serde_json::json;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;
use warden_core::RunState;
use warden_exec::{Supervisor, SupervisorConfig};
use warden_store::{CommitMode, Store};

use crate::cli::ServeArgs;
use crate::config::ServeConfig;
use crate::runs::RunService;
use crate::server::{self, AppState};

pub async fn main(args: ServeArgs) -> anyhow::Result<()> {
    let config = ServeConfig::resolve(&args)?;
    std::fs::create_dir_all(&config.home)
        .with_context(|| format!("cannot create WARDEN_HOME {}", config.home.display()))?;
    let home = config
        .home
        .canonicalize()
        .context("cannot resolve WARDEN_HOME")?;
    let store = Store::open(&home.join("warden.db"), CommitMode::Group)?;
    settle_interrupted_runs(&store).await?;

    let supervisor = Supervisor::new(SupervisorConfig {
        grace: config.runs.grace(),
        env_allow: config.runs.env_allow.clone(),
        ..SupervisorConfig::default()
    })
    .context("cannot become a child subreaper, so escaped processes could outlive their runs")?;
    let runs = RunService::new(store.clone(), supervisor, config.runs.limits());
    let shutdown = CancellationToken::new();
    let state = AppState {
        runs: Arc::clone(&runs),
        store: store.clone(),
        shutdown: shutdown.clone(),
        defaults: Arc::new(config.runs.clone()),
        workspace: std::env::current_dir().context("cannot read the current directory")?,
    };
    let app = server::router(state, config.operator_token.clone());

    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(
        %addr,
        home = %home.display(),
        config = ?config.source,
        auth = config.operator_token.is_some(),
        "warden serving"
    );
    // Scripts and tests read this line to find the port.
    println!("warden listening on http://{addr}");
    std::io::stdout().flush()?;

    let signalled = shutdown.clone();
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = int.recv() => tracing::info!("SIGINT: shutting down"),
        }
        signalled.cancel();
    });
    let graceful = shutdown.clone();
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move { graceful.cancelled().await });
    let server = tokio::spawn(async move { served.await });
    shutdown.cancelled().await;
    runs.shutdown().await;
    let limit = runs.grace() + std::time::Duration::from_secs(5);
    match tokio::time::timeout(limit, server).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => tracing::error!(error = %e, "server error during shutdown"),
        Ok(Err(e)) => tracing::error!(error = %e, "server task failed"),
        Err(_) => tracing::warn!("connections still open after {limit:?}; closing anyway"),
    }
    store.close();
    tracing::info!("stopped");
    Ok(())
}

/// Runs the previous server left in flight cannot be watched any more: kill
/// whatever is left of them, then record them as failed with `server_restart`.
async fn settle_interrupted_runs(store: &Store) -> anyhow::Result<()> {
    let mut live = store.list_runs(Some(RunState::Running), 1000).await?;
    live.extend(store.list_runs(Some(RunState::Starting), 1000).await?);
    for run in &live {
        let killed = warden_exec::kill_orphaned_run(&run.id.to_string());
        if killed > 0 {
            tracing::warn!(run = %run.id, killed, "killed processes left over from an interrupted run");
            store
                .audit(
                    "system",
                    "run.kill_leftovers",
                    &run.id.to_string(),
                    json!({ "processes": killed }),
                )
                .await?;
        }
    }
    let swept = store
        .interrupt_live_runs(
            "server_restart",
            "the server stopped while this run was in flight; its processes were terminated",
        )
        .await?;
    if !swept.is_empty() {
        tracing::warn!(
            runs = swept.len(),
            "marked runs interrupted by a server restart as failed"
        );
    }
    Ok(())
}
