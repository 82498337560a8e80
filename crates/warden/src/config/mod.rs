//! Configuration: `warden.toml`, then environment, then flags (later wins).

mod a2a;
pub mod bus;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;
use warden_a2a::instance::Instances;
use warden_core::RunLimits;

pub use a2a::A2aConfig;

/// The default listen address: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8122";

/// The longest deadline anyone may configure: one year.
pub const MAX_TIMEOUT_SECONDS: f64 = 365.0 * 86400.0;

/// The longest SIGTERM → SIGKILL grace anyone may configure: one hour.
pub const MAX_GRACE_SECONDS: f64 = 3600.0;

/// Everything in `warden.toml`; unknown keys are an error, not ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Listen address.
    pub listen: Option<SocketAddr>,
    /// Data directory.
    pub home: Option<PathBuf>,
    /// Bearer token operators must present on `/api/v1/*`.
    pub operator_token: Option<String>,
    /// Run defaults and limits.
    #[serde(default)]
    pub runs: RunsConfig,
    /// Hosted A2A instances.
    #[serde(default)]
    pub a2a: A2aConfig,
    /// The scratchpad bus.
    #[serde(default)]
    pub bus: bus::BusSettings,
}

/// `[runs]` in `warden.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunsConfig {
    /// Deadline when a request names none.
    pub default_timeout_seconds: f64,
    /// Output cap when a request names none.
    pub default_max_output_bytes: u64,
    /// Largest deadline a request may ask for.
    pub max_timeout_seconds: f64,
    /// Largest output cap a request may ask for.
    pub max_output_cap_bytes: u64,
    /// SIGTERM → SIGKILL grace period.
    pub grace_seconds: f64,
    /// Names of the server's environment variables children may see, on top
    /// of PATH, HOME, LANG and TERM.
    pub env_allow: Vec<String>,
    /// Runs that may be live at once; more are refused (429), not queued.
    pub max_live_runs: usize,
}

impl Default for RunsConfig {
    fn default() -> Self {
        Self {
            default_timeout_seconds: 3600.0,
            default_max_output_bytes: 64 << 20,
            max_timeout_seconds: 7.0 * 86400.0,
            max_output_cap_bytes: 1 << 30,
            grace_seconds: 5.0,
            env_allow: Vec::new(),
            max_live_runs: 64,
        }
    }
}

impl RunsConfig {
    /// The limits requests are checked against.
    pub fn limits(&self) -> RunLimits {
        RunLimits {
            max_timeout: secs(self.max_timeout_seconds),
            max_output_cap: self.max_output_cap_bytes,
        }
    }

    /// The grace period.
    pub fn grace(&self) -> Duration {
        secs(self.grace_seconds)
    }

    /// The default deadline.
    pub fn default_timeout(&self) -> Duration {
        secs(self.default_timeout_seconds)
    }

    fn check(&self) -> anyhow::Result<()> {
        for (name, v, max) in [
            (
                "runs.default_timeout_seconds",
                self.default_timeout_seconds,
                MAX_TIMEOUT_SECONDS,
            ),
            (
                "runs.max_timeout_seconds",
                self.max_timeout_seconds,
                MAX_TIMEOUT_SECONDS,
            ),
            ("runs.grace_seconds", self.grace_seconds, MAX_GRACE_SECONDS),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= max) {
                bail!("{name} must be a number of seconds above 0 and at most {max}, got {v}");
            }
        }
        if self.max_live_runs == 0 {
            bail!("runs.max_live_runs must be at least 1");
        }
        if self.default_timeout_seconds > self.max_timeout_seconds {
            bail!("runs.default_timeout_seconds exceeds runs.max_timeout_seconds");
        }
        if self.default_max_output_bytes == 0
            || self.default_max_output_bytes > self.max_output_cap_bytes
        {
            bail!("runs.default_max_output_bytes must be between 1 and runs.max_output_cap_bytes");
        }
        Ok(())
    }
}

/// Seconds as a `Duration`, saturating on absurd values.
pub fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX)
}

/// The resolved configuration `warden serve` runs with.
#[derive(Debug)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub home: PathBuf,
    pub operator_token: Option<String>,
    /// The token A2A clients present, when one is required.
    pub a2a_token: Option<String>,
    pub runs: RunsConfig,
    /// Where runs and command instances without a `cwd` run: the directory
    /// `warden serve` started in.
    pub workspace: PathBuf,
    /// The hosted A2A instances.
    pub instances: Instances,
    /// The largest A2A request body.
    pub a2a_max_body: usize,
    /// The scratchpad bus.
    pub bus: bus::BusSettings,
    /// Where the config came from, for the start-up log.
    pub source: Option<PathBuf>,
}

impl ServeConfig {
    /// Resolves flags (already merged with their env vars by clap) over the file.
    pub fn resolve(args: &crate::cli::ServeArgs) -> anyhow::Result<Self> {
        let home_hint = args
            .home
            .clone()
            .unwrap_or_else(|| PathBuf::from(".warden"));
        let path = match &args.config {
            Some(p) => Some(p.clone()),
            None => [home_hint.join("warden.toml"), PathBuf::from("warden.toml")]
                .into_iter()
                .find(|p| p.is_file()),
        };
        let file = match &path {
            Some(p) => load(p)?,
            None => FileConfig::default(),
        };
        file.runs.check()?;
        let token = std::env::var("WARDEN_OPERATOR_TOKEN")
            .ok()
            .filter(|t| !t.is_empty())
            .or(file.operator_token);
        if token.as_ref().is_some_and(|t| t.len() < 16) {
            bail!("the operator token must be at least 16 characters");
        }
        let a2a_token = std::env::var("WARDEN_A2A_TOKEN")
            .ok()
            .filter(|t| !t.is_empty())
            .or(file.a2a.token.clone());
        if a2a_token.as_ref().is_some_and(|t| t.len() < 16) {
            bail!("the A2A token must be at least 16 characters");
        }
        let listen = match args.listen.or(file.listen) {
            Some(a) => a,
            None => DEFAULT_LISTEN.parse().context("default listen address")?,
        };
        if !listen.ip().is_loopback() && token.is_none() {
            bail!(
                "refusing to listen on {listen} without operator auth: set operator_token in \
                 warden.toml or WARDEN_OPERATOR_TOKEN, or listen on a loopback address"
            );
        }
        if !listen.ip().is_loopback() && a2a_token.is_none() {
            bail!(
                "refusing to listen on {listen} with the A2A endpoints open: set [a2a] token in \
                 warden.toml or WARDEN_A2A_TOKEN (A2A clients then send it as a bearer token), \
                 or listen on a loopback address"
            );
        }
        let workspace = match &args.workspace {
            Some(d) => d
                .canonicalize()
                .with_context(|| format!("--workspace {}", d.display()))?,
            None => std::env::current_dir()
                .and_then(|d| d.canonicalize())
                .context("cannot read the current directory")?,
        };
        if !workspace.is_dir() {
            bail!("the workspace {} is not a directory", workspace.display());
        }
        let instances = file.a2a.instances(&file.runs, &workspace)?;
        let a2a_max_body = file.a2a.max_body()?;
        file.bus.bus_config()?;
        Ok(Self {
            listen,
            home: args.home.clone().or(file.home).unwrap_or(home_hint),
            operator_token: token,
            a2a_token,
            runs: file.runs,
            workspace,
            instances,
            a2a_max_body,
            bus: file.bus.clone(),
            source: path,
        })
    }
}

fn load(path: &Path) -> anyhow::Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))
}
