//! `[bus]` in `warden.toml`: the scratchpad bus's timings and limits, read
//! by `warden serve` and by `warden bus` alike.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::bail;
use serde::Deserialize;
use warden_bus::BusConfig;

use super::{FileConfig, secs};

/// `[bus]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BusSettings {
    /// How long a poll's lease lasts.
    pub visibility_seconds: f64,
    /// Deliveries before a message goes to the dead letters.
    pub max_attempts: u32,
    /// The largest payload, in bytes of JSON.
    pub max_payload_bytes: usize,
    /// A message's TTL when the poster names none.
    pub default_ttl_seconds: f64,
    /// Finished messages older than this are pruned.
    pub keep_done_seconds: f64,
    /// Agents idle this long with nothing unfinished are collected.
    pub agent_idle_seconds: f64,
    /// How often `warden serve` prunes.
    pub prune_interval_seconds: f64,
}

impl Default for BusSettings {
    fn default() -> Self {
        let d = BusConfig::default();
        Self {
            visibility_seconds: d.visibility.as_secs_f64(),
            max_attempts: d.max_attempts,
            max_payload_bytes: d.max_payload,
            default_ttl_seconds: d.default_ttl.as_secs_f64(),
            keep_done_seconds: d.keep_done.as_secs_f64(),
            agent_idle_seconds: d.agent_idle.as_secs_f64(),
            prune_interval_seconds: 60.0,
        }
    }
}

impl BusSettings {
    /// The bus's configuration, checked.
    pub fn bus_config(&self) -> anyhow::Result<BusConfig> {
        for (name, v) in [
            ("bus.visibility_seconds", self.visibility_seconds),
            ("bus.default_ttl_seconds", self.default_ttl_seconds),
            ("bus.keep_done_seconds", self.keep_done_seconds),
            ("bus.agent_idle_seconds", self.agent_idle_seconds),
            ("bus.prune_interval_seconds", self.prune_interval_seconds),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= super::MAX_TIMEOUT_SECONDS) {
                bail!("{name} must be a number of seconds above 0, got {v}");
            }
        }
        if self.max_attempts == 0 {
            bail!("bus.max_attempts must be at least 1");
        }
        if !(1..=64 << 20).contains(&self.max_payload_bytes) {
            bail!("bus.max_payload_bytes must be from 1 to 67108864");
        }
        Ok(BusConfig {
            visibility: secs(self.visibility_seconds),
            max_attempts: self.max_attempts,
            max_payload: self.max_payload_bytes,
            keep_done: secs(self.keep_done_seconds),
            default_ttl: secs(self.default_ttl_seconds),
            agent_idle: secs(self.agent_idle_seconds),
        })
    }

    /// How often the server prunes.
    pub fn prune_interval(&self) -> Duration {
        secs(self.prune_interval_seconds)
    }
}

/// `[bus]` for `warden bus`: from `--config`/`WARDEN_CONFIG`, else
/// `$WARDEN_HOME/warden.toml`, else `./warden.toml`, else the defaults.
pub fn for_cli(home: &Path, config: Option<PathBuf>) -> anyhow::Result<BusSettings> {
    let path = config.or_else(|| {
        [home.join("warden.toml"), PathBuf::from("warden.toml")]
            .into_iter()
            .find(|p| p.is_file())
    });
    Ok(match path {
        Some(p) => {
            let file: FileConfig = super::load(&p)?;
            file.bus
        }
        None => BusSettings::default(),
    })
}
