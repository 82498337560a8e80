//! Which isolation tiers this server may offer, each backed by a proof:
//! `host` always; `confined` while a certificate for this binary is valid
//! (certified at start-up and renewed before it expires); `container` only
//! if a container engine answered at start-up.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_core::Timestamp;

use crate::certify::{self, Certificate};

/// Re-certify this long before the certificate expires.
const RENEW_AHEAD: Duration = Duration::from_secs(10 * 60);

/// After a failed certification, try again after this long.
const RETRY_AFTER: Duration = Duration::from_secs(5 * 60);

/// Where the confined tier stands.
#[derive(Debug, Clone)]
enum Confined {
    /// Certification has not finished yet.
    Pending,
    Certified(Box<Certificate>),
    /// Why it is not certified.
    Refused(String),
}

/// The tiers of one server.
#[derive(Debug)]
pub struct Tiers {
    home: PathBuf,
    confined: RwLock<Confined>,
    container: Result<PathBuf, String>,
    /// One certification at a time (start-up, renewal, operator request).
    certifying: tokio::sync::Mutex<()>,
}

impl Tiers {
    /// Starts with the confined tier pending and the container engine probed.
    pub fn new(home: &Path) -> Arc<Self> {
        Arc::new(Self {
            home: home.to_owned(),
            confined: RwLock::new(Confined::Pending),
            container: container_engine().clone(),
            certifying: tokio::sync::Mutex::new(()),
        })
    }

    fn confined(&self) -> Confined {
        match self.confined.read() {
            Ok(c) => c.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    fn set(&self, c: Confined) {
        match self.confined.write() {
            Ok(mut g) => *g = c,
            Err(p) => *p.into_inner() = c,
        }
    }

    /// `Ok` while confined runs may start: a certificate for this binary is
    /// valid now. Otherwise why not.
    pub fn confined_ready(&self) -> Result<Timestamp, String> {
        match self.confined() {
            Confined::Pending => {
                Err("the confined tier is still being certified on this host".to_owned())
            }
            Confined::Refused(why) => Err(format!("the confined tier is not certified: {why}")),
            Confined::Certified(cert) if Timestamp::now() < cert.expires_at => Ok(cert.expires_at),
            Confined::Certified(cert) => Err(format!(
                "the confined tier's certificate expired at {} and has not been renewed",
                cert.expires_at
            )),
        }
    }

    /// The capabilities a registration may list (`isolation:*`), each only
    /// while proven.
    #[allow(dead_code)] // read by the AIWG executor registration
    pub fn capabilities(&self) -> Vec<String> {
        let mut caps = vec!["isolation:host".to_owned()];
        if self.confined_ready().is_ok() {
            caps.push("isolation:confined".to_owned());
        }
        if self.container.is_ok() {
            caps.push("isolation:container".to_owned());
        }
        caps
    }

    /// Runs the probes now and records the result; the error says why the
    /// tier is refused.
    pub async fn certify(&self) -> Result<Timestamp, String> {
        let _one = self.certifying.lock().await;
        let home = self.home.clone();
        let result = tokio::task::spawn_blocking(move || certify::certify(&home))
            .await
            .map_err(|e| format!("certification task failed: {e}"))
            .and_then(|r| r.map_err(|e| format!("{e:#}")));
        let state = match result {
            Ok(cert) => match cert.check(Timestamp::now()) {
                Ok(()) => Confined::Certified(Box::new(cert)),
                Err(why) => Confined::Refused(why),
            },
            Err(why) => Confined::Refused(why),
        };
        match &state {
            Confined::Certified(c) => {
                tracing::info!(expires_at = %c.expires_at, "confined tier certified")
            }
            Confined::Refused(why) => tracing::warn!(%why, "confined tier not certified"),
            Confined::Pending => {}
        }
        self.set(state);
        self.confined_ready()
    }

    /// Certifies now if nothing has yet, then renews the certificate before
    /// it expires (or retries after a refusal), until shutdown.
    pub fn spawn_renewal(self: &Arc<Self>, shutdown: CancellationToken) {
        let tiers = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                let wait = match tiers.confined() {
                    Confined::Certified(c) => {
                        let left = c
                            .expires_at
                            .as_millis()
                            .saturating_sub(Timestamp::now().as_millis());
                        Duration::from_millis(left).saturating_sub(RENEW_AHEAD)
                    }
                    Confined::Refused(_) => RETRY_AFTER,
                    Confined::Pending => Duration::ZERO,
                };
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = shutdown.cancelled() => return,
                }
                let _ = tiers.certify().await;
            }
        });
    }

    /// What `GET /api/v1/isolation` answers.
    pub fn status(&self) -> Value {
        let confined = match self.confined() {
            Confined::Pending => json!({ "available": false, "state": "pending" }),
            Confined::Refused(why) => {
                json!({ "available": false, "state": "refused", "reason": why })
            }
            Confined::Certified(c) => {
                let valid = Timestamp::now() < c.expires_at;
                json!({
                    "available": valid,
                    "state": if valid { "certified" } else { "expired" },
                    "certificate": certify::certificate_path(&self.home),
                    "certified_at": c.created_at,
                    "expires_at": c.expires_at,
                    "binary_sha256": c.binary_sha256,
                    "kernel_release": c.kernel_release,
                    "landlock_abi": c.landlock_abi,
                    "probes_passed": c.probes.iter().filter(|p| p.passed).count(),
                    "probes": c.probes.len(),
                })
            }
        };
        let container = match &self.container {
            Ok(engine) => json!({ "available": true, "engine": engine }),
            Err(why) => json!({ "available": false, "reason": why }),
        };
        json!({
            "host": { "available": true },
            "confined": confined,
            "container": container,
        })
    }
}

/// Refuses a workspace that holds the user's home directory: every run
/// would be handed its credentials (`~/.ssh`, `~/.aws`, …).
pub fn refuse_home_workspace(ws: &Path) -> anyhow::Result<()> {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        return Ok(());
    };
    let home = home.canonicalize().unwrap_or(home);
    if home.starts_with(ws) {
        anyhow::bail!(
            "the workspace {} contains the home directory {}, so credentials such as ~/.ssh would be inside it; choose a project directory",
            ws.display(),
            home.display()
        );
    }
    Ok(())
}

/// The container engine that answered `info`, probed once per process.
pub fn container_engine() -> &'static Result<PathBuf, String> {
    static ENGINE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    ENGINE.get_or_init(probe_container_engine)
}

fn probe_container_engine() -> Result<PathBuf, String> {
    let mut why = Vec::new();
    for engine in ["docker", "podman"] {
        let Some(path) = find_on_path(engine) else {
            why.push(format!("{engine}: not installed"));
            continue;
        };
        match info_answers(&path) {
            Ok(()) => return Ok(path),
            Err(e) => why.push(format!("{engine} info: {e}")),
        }
    }
    Err(format!("no container engine answered ({})", why.join("; ")))
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Runs `<engine> info` with a deadline; only a zero exit counts.
fn info_answers(engine: &Path) -> Result<(), String> {
    let mut child = std::process::Command::new(engine)
        .arg("info")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(status) if status.success() => return Ok(()),
            Some(status) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                return Err(format!("{status}: {}", first.trim()));
            }
            None if std::time::Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("no answer within 10 s".to_owned());
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}
