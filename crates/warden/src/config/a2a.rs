//! `[a2a]` in `warden.toml`: the hosted instances and the token A2A clients
//! present.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;
use warden_a2a::instance::{
    CommandRuntime, DEFAULT_INSTANCE, Extension, Instance, Instances, Runtime,
};

use warden_core::confine::{ContainerSpec, Isolation, Policy, Profile};

use super::{RunsConfig, secs};

/// `[a2a]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct A2aConfig {
    /// Bearer token A2A clients must present (cards stay public). Required
    /// when listening beyond loopback; `WARDEN_A2A_TOKEN` overrides it.
    pub token: Option<String>,
    /// The hosted instances; none means one `default` echo instance.
    #[serde(default)]
    pub instances: Vec<InstanceConfig>,
    /// The largest A2A request body read (bytes); larger ones get 413.
    pub max_body_bytes: Option<usize>,
}

/// What answers an instance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeKind {
    /// In process: answers with what it was sent.
    #[default]
    Echo,
    /// `argv` run through the supervisor for each task.
    Command,
    /// Behaves as the A2A conformance kits expect of a system under test.
    Conformance,
}

/// Which card a `conformance` instance serves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CardProfile {
    /// Everything warden offers.
    #[default]
    Full,
    /// No streaming: the kit's capability-error tests run against it.
    Minimal,
    /// Declares a required extension (`urn:a2a:tck:required-extension`).
    RequiredExtension,
}

/// The isolation tier of an instance's processes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TierKind {
    /// Host processes bounded by the supervisor.
    #[default]
    Host,
    /// Namespaces, Landlock, seccomp and rlimits (`warden sandbox-exec`).
    Confined,
    /// A container of the engine that answered at start-up.
    Container,
}

/// The extension the `required-extension` card declares.
pub const TCK_REQUIRED_EXTENSION: &str = "urn:a2a:tck:required-extension";

/// `[[a2a.instances]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceConfig {
    /// Served under `/agents/{name}/`; `default` is also served at `/`.
    pub name: String,
    /// What the card says the instance does.
    pub description: Option<String>,
    /// `echo` (default) or `command`.
    #[serde(default)]
    pub runtime: RuntimeKind,
    /// For `command`: program and arguments; `{text}` becomes the user's text.
    pub argv: Option<Vec<String>>,
    /// For `command`: working directory [default: where `warden serve` started].
    pub cwd: Option<PathBuf>,
    /// For `command`: deadline [default: `runs.default_timeout_seconds`].
    pub timeout_seconds: Option<f64>,
    /// For `command`: output cap [default: `runs.default_max_output_bytes`].
    pub max_output_bytes: Option<u64>,
    /// For `conformance`: `full` (default), `minimal` or `required-extension`.
    pub card_profile: Option<CardProfile>,
    /// Where adapter commands (`adapter-command/v1`) run. Without it an
    /// instance takes none, except one named `default`, which uses the
    /// server's workspace. Conformance instances take none.
    pub workspace: Option<PathBuf>,
    /// `host` (default), `confined` or `container`.
    #[serde(default)]
    pub tier: TierKind,
    /// For `confined` and `container`: `edit` (default), `test` or `readonly`.
    pub profile: Option<String>,
    /// For `container`: the image the commands run in.
    pub container_image: Option<String>,
}

impl InstanceConfig {
    fn to_instance(&self, runs: &RunsConfig, workspace: &Path) -> anyhow::Result<Instance> {
        let name = &self.name;
        let command_only = [
            ("cwd", self.cwd.is_some()),
            ("timeout_seconds", self.timeout_seconds.is_some()),
            ("max_output_bytes", self.max_output_bytes.is_some()),
        ];
        if self.card_profile.is_some() && self.runtime != RuntimeKind::Conformance {
            bail!("a2a instance {name:?}: card_profile applies to runtime = \"conformance\" only");
        }
        let runtime = match self.runtime {
            RuntimeKind::Echo | RuntimeKind::Conformance => {
                if self.argv.is_some() {
                    bail!(
                        "a2a instance {name:?}: argv is set but runtime is not \"command\"; set runtime = \"command\""
                    );
                }
                if let Some((key, _)) = command_only.iter().find(|(_, set)| *set) {
                    bail!("a2a instance {name:?}: {key} applies to runtime = \"command\" only");
                }
                if self.runtime == RuntimeKind::Echo {
                    Runtime::Echo
                } else {
                    Runtime::Conformance
                }
            }
            RuntimeKind::Command => {
                let Some(argv) = self.argv.clone() else {
                    bail!(
                        "a2a instance {name:?}: runtime \"command\" needs argv, e.g. argv = [\"my-agent\", \"--prompt\", \"{{text}}\"]"
                    );
                };
                let timeout = self.timeout_seconds.unwrap_or(runs.default_timeout_seconds);
                if !(timeout.is_finite() && timeout > 0.0 && timeout <= runs.max_timeout_seconds) {
                    bail!(
                        "a2a instance {name:?}: timeout_seconds must be above 0 and at most runs.max_timeout_seconds ({})",
                        runs.max_timeout_seconds
                    );
                }
                let max_output = self
                    .max_output_bytes
                    .unwrap_or(runs.default_max_output_bytes);
                if max_output == 0 || max_output > runs.max_output_cap_bytes {
                    bail!(
                        "a2a instance {name:?}: max_output_bytes must be between 1 and runs.max_output_cap_bytes"
                    );
                }
                // A confined or container instance runs in its own workspace
                // unless told otherwise; the server's may not be granted.
                let own_ws = self
                    .workspace
                    .as_ref()
                    .filter(|_| self.tier != TierKind::Host);
                let cwd = match self.cwd.as_ref().or(own_ws) {
                    Some(d) => d
                        .canonicalize()
                        .with_context(|| format!("a2a instance {name:?}: cwd {}", d.display()))?,
                    None => workspace.to_owned(),
                };
                Runtime::Command(CommandRuntime {
                    argv,
                    cwd,
                    timeout: secs(timeout),
                    max_output,
                })
            }
        };
        let description = self.description.clone().unwrap_or_else(|| match runtime {
            Runtime::Echo => "echoes the text it is sent".to_owned(),
            Runtime::Command(_) => "runs a command for each task".to_owned(),
            Runtime::Conformance => {
                "behaves as the A2A conformance kit (a2a-tck) expects of its system under test"
                    .to_owned()
            }
        });
        let profile = self.card_profile.unwrap_or_default();
        let extensions = match profile {
            CardProfile::RequiredExtension => vec![Extension {
                uri: TCK_REQUIRED_EXTENSION.to_owned(),
                description: "the conformance kit's required extension: requests must activate it"
                    .to_owned(),
                required: true,
            }],
            _ => vec![],
        };
        let mut instance = Instance {
            name: name.clone(),
            description,
            runtime,
            extensions,
            streaming: profile != CardProfile::Minimal,
            workspace: None,
            isolation: Isolation::Host,
        };
        if self.runtime == RuntimeKind::Conformance {
            if self.workspace.is_some() {
                bail!("a2a instance {name:?}: a conformance instance takes no workspace");
            }
        } else {
            let ws = match &self.workspace {
                Some(d) => Some(d.canonicalize().with_context(|| {
                    format!("a2a instance {name:?}: workspace {}", d.display())
                })?),
                None if name == DEFAULT_INSTANCE => Some(workspace.to_owned()),
                None => None,
            };
            if let Some(ws) = ws {
                if !ws.is_dir() {
                    bail!(
                        "a2a instance {name:?}: workspace {} is not a directory",
                        ws.display()
                    );
                }
                instance.set_workspace(ws);
            }
        }
        instance.isolation = self.isolation(&instance)?;
        Ok(instance)
    }

    /// The tier and, for the confined and container tiers, what they hold
    /// the instance's processes to. The workspace the policy grants is the
    /// instance's workspace, else its command's working directory.
    fn isolation(&self, instance: &Instance) -> anyhow::Result<Isolation> {
        let name = &self.name;
        if self.tier == TierKind::Host {
            if self.profile.is_some() || self.container_image.is_some() {
                bail!(
                    "a2a instance {name:?}: profile and container_image apply to tier = \"confined\" or \"container\""
                );
            }
            return Ok(Isolation::Host);
        }
        if self.runtime == RuntimeKind::Conformance {
            bail!(
                "a2a instance {name:?}: a conformance instance runs no processes; it takes no tier"
            );
        }
        let profile = match self.profile.as_deref() {
            None => Profile::Edit,
            Some(p) => crate::cli::parse_profile(p)
                .map_err(|e| anyhow::anyhow!("a2a instance {name:?}: profile {e}"))?,
        };
        let cwd = match &instance.runtime {
            Runtime::Command(c) => Some(c.cwd.clone()),
            _ => None,
        };
        // Never the server's own directory by default: it may hold the
        // config and the store.
        let Some(ws) = instance
            .workspace
            .clone()
            .filter(|_| self.workspace.is_some())
        else {
            bail!(
                "a2a instance {name:?}: tier = \"{}\" needs workspace = \"…\", the one tree its runs may touch",
                if self.tier == TierKind::Confined {
                    "confined"
                } else {
                    "container"
                }
            );
        };
        if let Some(cwd) = &cwd
            && !cwd.starts_with(&ws)
        {
            bail!(
                "a2a instance {name:?}: cwd {} is outside the workspace {} its tier grants",
                cwd.display(),
                ws.display()
            );
        }
        crate::tiers::refuse_home_workspace(&ws)
            .map_err(|e| anyhow::anyhow!("a2a instance {name:?}: {e}"))?;
        if self.tier == TierKind::Confined {
            if self.container_image.is_some() {
                bail!("a2a instance {name:?}: container_image applies to tier = \"container\"");
            }
            return Ok(Isolation::Confined(Policy::for_profile(profile, ws)));
        }
        let engine = crate::tiers::container_engine().clone().map_err(|why| {
            anyhow::anyhow!(
                "a2a instance {name:?}: tier = \"container\" is unavailable on this host: {why}"
            )
        })?;
        let Some(image) = self.container_image.clone() else {
            bail!("a2a instance {name:?}: tier = \"container\" needs container_image");
        };
        let policy = Policy::for_profile(profile, ws.clone());
        Ok(Isolation::Container(ContainerSpec {
            engine,
            image,
            workspace: ws,
            workspace_access: policy.workspace_access,
        }))
    }
}

impl A2aConfig {
    /// The body cap: 1 KiB to 64 MiB, default 1 MiB.
    pub fn max_body(&self) -> anyhow::Result<usize> {
        let cap = self.max_body_bytes.unwrap_or(warden_a2a::server::MAX_BODY);
        if !(1024..=64 << 20).contains(&cap) {
            bail!("a2a.max_body_bytes must be from 1024 to 67108864, got {cap}");
        }
        Ok(cap)
    }

    /// The instances to serve, checked.
    pub fn instances(&self, runs: &RunsConfig, workspace: &Path) -> anyhow::Result<Instances> {
        let list = self
            .instances
            .iter()
            .map(|i| i.to_instance(runs, workspace))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Instances::new(list, Some(workspace.to_owned()))?)
    }
}
