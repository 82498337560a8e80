//! `warden serve`: open the store, settle what a previous process left
//! behind, and serve HTTP until SIGTERM or SIGINT.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use serde_json::json;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;
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
    // Held for the life of the process: a second server on the same home
    // would take the first one's live runs for interrupted ones.
    let _home_lock = lock_home(&home)?;
    let store = Store::open(&home.join("warden.db"), CommitMode::Group)?;
    settle_interrupted_runs(&store).await?;

    let supervisor = Supervisor::new(SupervisorConfig {
        grace: config.runs.grace(),
        env_allow: config.runs.env_allow.clone(),
        sandbox_helper: Some(std::env::current_exe().context("locating the warden binary")?),
        // No confined run may write warden's own state.
        protected: guarded_paths(&home, &config),
        ..SupervisorConfig::default()
    })
    .context("cannot become a child subreaper, so escaped processes could outlive their runs")?;
    let runs = RunService::new(
        store.clone(),
        supervisor,
        config.runs.limits(),
        config.runs.max_live_runs,
    );
    let shutdown = CancellationToken::new();
    let tiers = certify_at_start(&home, &config).await?;
    tiers.spawn_renewal(shutdown.clone());
    let engine = warden_a2a::engine::TaskEngine::new(store.clone()).with_runner(
        Arc::new(crate::a2a_runner::ServiceRunner {
            runs: Arc::clone(&runs),
            tiers: Arc::clone(&tiers),
        }),
        runs.grace(),
    );
    let bus = warden_bus::Bus::new(store.clone(), config.bus.bus_config()?);
    spawn_bus_prune(bus.clone(), config.bus.prune_interval(), shutdown.clone());
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let addr = listener.local_addr()?;
    let aiwg = crate::aiwg::start(&home, &config, &store, &tiers, addr)
        .await?
        .map(Arc::new);
    let state = AppState {
        runs: Arc::clone(&runs),
        store: store.clone(),
        shutdown: shutdown.clone(),
        defaults: Arc::new(config.runs.clone()),
        workspace: config.workspace.clone(),
        streams: Arc::new(tokio::sync::Semaphore::new(server::MAX_EVENT_STREAMS)),
        engine: engine.clone(),
        bus: bus.clone(),
        tiers: Arc::clone(&tiers),
        aiwg: aiwg.clone(),
    };
    let interrupted = engine.settle_interrupted().await?;
    if interrupted > 0 {
        tracing::warn!(
            tasks = interrupted,
            "marked A2A tasks interrupted by a server restart as failed"
        );
    }
    let a2a = warden_a2a::server::A2aState {
        engine,
        streams: Arc::new(tokio::sync::Semaphore::new(warden_a2a::server::MAX_STREAMS)),
        shutdown: shutdown.clone(),
        instances: Arc::new(config.instances.clone()),
        token: warden_a2a::server::ClientToken::new(config.a2a_token.clone()),
        max_body: config.a2a_max_body,
        confined_until: {
            let tiers = Arc::clone(&tiers);
            Arc::new(move || tiers.confined_ready().ok())
        },
    };
    let app = server::router(
        state,
        config.operator_token.clone(),
        warden_a2a::server::router(a2a),
    );

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
    // Small writes (SSE events) go out at once instead of waiting for the
    // client's delayed ACK.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
    });
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move { graceful.cancelled().await });
    let server = tokio::spawn(async move { served.await });
    shutdown.cancelled().await;
    runs.shutdown().await;
    if let Some(aiwg) = &aiwg {
        aiwg.shut_down().await;
    }
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

/// What no confined or container run may write: the home (store,
/// certificate), the config file as named and where it points, and this
/// binary (the sandbox helper).
fn guarded_paths(home: &Path, config: &ServeConfig) -> Vec<std::path::PathBuf> {
    let mut paths = vec![home.to_owned()];
    if let Some(p) = &config.source {
        paths.push(std::path::absolute(p).unwrap_or_else(|_| p.clone()));
        paths.extend(p.canonicalize().ok());
    }
    if let Ok(exe) = std::env::current_exe() {
        paths.extend(exe.canonicalize().ok());
        paths.push(exe);
    }
    paths
}

/// Certifies the confined tier. When an instance is configured confined
/// the server does not start without the certificate (fail closed, with
/// the probes that failed); otherwise the probes run in the background and
/// the tier is offered once they pass.
async fn certify_at_start(
    home: &Path,
    config: &ServeConfig,
) -> anyhow::Result<Arc<crate::tiers::Tiers>> {
    // An instance that could write warden's own state could rewrite its own
    // tier: refuse to start.
    let guarded = guarded_paths(home, config);
    for i in config.instances.iter() {
        let writable: Vec<&Path> = match &i.isolation {
            warden_core::confine::Isolation::Confined(p) => p.writable().collect(),
            warden_core::confine::Isolation::Container(c)
                if c.workspace_access == warden_core::confine::FsAccess::ReadWrite =>
            {
                vec![c.workspace.as_path()]
            }
            _ => vec![],
        };
        for w in writable {
            if let Some(g) = guarded.iter().find(|g| g.starts_with(w)) {
                anyhow::bail!(
                    "a2a instance {:?}: its workspace {} contains {} (warden's own home or config), which its runs could then rewrite; choose another workspace or WARDEN_HOME",
                    i.name,
                    w.display(),
                    g.display()
                );
            }
        }
    }
    let tiers = crate::tiers::Tiers::new(home);
    let confined: Vec<String> = config
        .instances
        .iter()
        .filter(|i| matches!(i.isolation, warden_core::confine::Isolation::Confined(_)))
        .map(|i| i.name.clone())
        .collect();
    // Without a confined instance the renewal task certifies in the
    // background (see `spawn_renewal`).
    if !confined.is_empty()
        && let Err(why) = tiers.certify().await
    {
        anyhow::bail!(
            "instances {confined:?} use the confined tier, which this host cannot provide: {why} (see `warden certify` for each probe)"
        );
    }
    Ok(tiers)
}

/// Prunes the bus every `interval` (expired messages, finished ones older
/// than `bus.keep_done_seconds`, idle agents), as the seed's scratchpad did
/// every 60 s, until shutdown.
fn spawn_bus_prune(
    bus: warden_bus::Bus,
    interval: std::time::Duration,
    shutdown: CancellationToken,
) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(interval);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = every.tick() => {}
                () = shutdown.cancelled() => return,
            }
            match bus.prune().await {
                Ok((0, 0, 0)) => {}
                Ok((expired, finished, agents)) => {
                    tracing::info!(expired, finished, agents, "pruned the bus")
                }
                Err(e) => tracing::warn!(error = %e, "cannot prune the bus"),
            }
        }
    });
}

/// Takes an exclusive lock on `home/warden.lock`, or says who holds it.
fn lock_home(home: &Path) -> anyhow::Result<Flock<std::fs::File>> {
    let path = home.join("warden.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(l) => l,
        Err((file, Errno::EWOULDBLOCK)) => {
            let mut holder = String::new();
            let _ = (&file).read_to_string(&mut holder);
            anyhow::bail!(
                "another warden serve (pid {}) is using WARDEN_HOME {}; stop it or choose another home",
                holder.trim(),
                home.display()
            );
        }
        Err((_, e)) => return Err(e).with_context(|| format!("cannot lock {}", path.display())),
    };
    lock.set_len(0)?;
    write!(lock, "{}", std::process::id())?;
    lock.flush()?;
    Ok(lock)
}

/// Runs the previous server left in flight cannot be watched any more: kill
/// whatever is left of each, then record it as failed with `server_restart`
/// and a detail that says what was found.
async fn settle_interrupted_runs(store: &Store) -> anyhow::Result<()> {
    let live = store.live_runs().await?;
    for run in &live {
        let marker = run.id.to_string();
        let (killed, left) = kill_leftovers(&marker).await?;
        let mut detail = "the server stopped while this run was in flight".to_owned();
        detail.push_str(&match (killed, left) {
            (0, 0) => "; no process of it was left".to_owned(),
            (k, 0) => format!("; {k} leftover process(es) were killed"),
            (k, l) => format!("; {k} leftover process(es) were sent SIGKILL and {l} still exist"),
        });
        if killed > 0 {
            tracing::warn!(run = %run.id, killed, left, "killed processes left over from an interrupted run");
            store
                .audit(
                    "system",
                    "run.kill_leftovers",
                    &marker,
                    json!({ "signalled": killed, "remaining": left }),
                )
                .await?;
        }
        store
            .interrupt_run(run.id, "server_restart", detail)
            .await?;
    }
    if !live.is_empty() {
        tracing::warn!(
            runs = live.len(),
            "marked runs interrupted by a server restart as failed"
        );
    }
    Ok(())
}

/// SIGKILLs every process carrying a run's marker, again until none is
/// found (for up to a second); returns how many the first pass signalled
/// and how many the last one still found.
async fn kill_leftovers(marker: &str) -> anyhow::Result<(usize, usize)> {
    let pass = || {
        let marker = marker.to_owned();
        tokio::task::spawn_blocking(move || warden_exec::kill_orphaned_run(&marker))
    };
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(1);
    let killed = pass().await?;
    let mut left = killed;
    while left > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        left = pass().await?;
    }
    Ok((killed, left))
}
