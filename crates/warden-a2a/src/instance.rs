//! Instances: the agent runtimes a server hosts, each served under
//! `/agents/{name}/` (the `default` one also at `/`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What answers an instance's messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runtime {
    /// In process, no child: the agent's message and artifact carry the user's text.
    Echo,
    /// A program run through the supervisor for each task.
    Command(CommandRuntime),
    /// Behaves as the A2A conformance kits expect of a system under test.
    Conformance,
}

/// An argv template fronting a CLI agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRuntime {
    /// Program and arguments; every `{text}` in an element is replaced by
    /// the user's text, which stays inside that one element (no shell).
    pub argv: Vec<String>,
    /// Where the program runs.
    pub cwd: PathBuf,
    /// Its deadline.
    pub timeout: Duration,
    /// Total stdout and stderr bytes allowed.
    pub max_output: u64,
}

/// The placeholder a command template's elements may contain.
pub const TEXT_PLACEHOLDER: &str = "{text}";

impl CommandRuntime {
    /// The argv for a message whose text is `text`.
    pub fn render(&self, text: &str) -> Vec<String> {
        self.argv
            .iter()
            .map(|a| a.replace(TEXT_PLACEHOLDER, text))
            .collect()
    }
}

impl Instance {
    /// Lets the instance take adapter commands in `workspace`, and lists
    /// the two extensions that brings on its card.
    pub fn set_workspace(&mut self, workspace: PathBuf) {
        self.workspace = Some(workspace);
        for (uri, description) in [
            (
                crate::adapter::ADAPTER_URI,
                "runs an allowlisted adapter command (sandbox-agent-runner, plan or assess) in the instance's workspace",
            ),
            (
                crate::adapter::HITL_URI,
                "an adapter command's interactive prompts ([y/N] and the like) become input-required; answers go to its stdin",
            ),
        ] {
            if !self.extensions.iter().any(|e| e.uri == uri) {
                self.extensions.push(Extension {
                    uri: uri.to_owned(),
                    description: description.to_owned(),
                    required: false,
                });
            }
        }
    }
}

/// An A2A extension an instance supports, as its card lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extension {
    /// Its URI, what clients name in `A2A-Extensions`.
    pub uri: String,
    /// What it does.
    pub description: String,
    /// Whether a client must activate it to be served at all.
    pub required: bool,
}

/// One hosted agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// Its name, the path segment in `/agents/{name}/`.
    pub name: String,
    /// What the card says it is.
    pub description: String,
    /// What answers it.
    pub runtime: Runtime,
    /// The extensions it supports.
    pub extensions: Vec<Extension>,
    /// Whether it offers streaming (`SendStreamingMessage`, subscriptions).
    pub streaming: bool,
    /// Where its adapter commands run (`adapter-command/v1`); none: it
    /// takes no adapter commands. Canonical.
    pub workspace: Option<PathBuf>,
    /// The tier its processes run in.
    pub isolation: warden_core::confine::Isolation,
}

/// The instances of one server.
#[derive(Debug, Clone)]
pub struct Instances {
    by_name: BTreeMap<String, Arc<Instance>>,
}

/// The instance served at `/` as well.
pub const DEFAULT_INSTANCE: &str = "default";

/// Why a set of instances cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstanceError {
    /// The name cannot be a path segment.
    #[error(
        "instance name {0:?} must be 1 to 63 characters of a-z, 0-9, '-' and '_', starting with a letter or digit"
    )]
    BadName(String),
    /// Two instances share a name.
    #[error("instance {0:?} is configured twice")]
    Duplicate(String),
    /// A command template cannot run.
    #[error("instance {0:?}: {1}")]
    BadCommand(String, String),
}

fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || *c == b'_')
}

impl Instances {
    /// Just the `default` echo instance, as when nothing is configured
    /// (it takes adapter commands when given a workspace).
    pub fn default_only() -> Self {
        let default = Instance {
            name: DEFAULT_INSTANCE.to_owned(),
            description: "warden's default instance: echoes the text it is sent".to_owned(),
            runtime: Runtime::Echo,
            extensions: vec![],
            streaming: true,
            workspace: None,
            isolation: Default::default(),
        };
        Self {
            by_name: BTreeMap::from([(default.name.clone(), Arc::new(default))]),
        }
    }

    /// The configured instances, checked; none configured means
    /// [`Instances::default_only`] with `default_workspace`.
    pub fn new(
        list: Vec<Instance>,
        default_workspace: Option<PathBuf>,
    ) -> Result<Self, InstanceError> {
        if list.is_empty() {
            let mut only = Self::default_only();
            if let Some(ws) = default_workspace {
                let mut i = (*only.by_name[DEFAULT_INSTANCE]).clone();
                i.set_workspace(ws);
                only.by_name.insert(i.name.clone(), Arc::new(i));
            }
            return Ok(only);
        }
        let mut by_name = BTreeMap::new();
        for i in list {
            if !valid_name(&i.name) {
                return Err(InstanceError::BadName(i.name));
            }
            if let Runtime::Command(c) = &i.runtime {
                if c.argv.first().is_none_or(|p| p.is_empty()) {
                    return Err(InstanceError::BadCommand(
                        i.name,
                        "argv must name a program".into(),
                    ));
                }
                if c.argv[0].contains(TEXT_PLACEHOLDER) {
                    return Err(InstanceError::BadCommand(
                        i.name,
                        "the program (argv[0]) cannot come from the user's text".into(),
                    ));
                }
            }
            if by_name.contains_key(&i.name) {
                return Err(InstanceError::Duplicate(i.name));
            }
            by_name.insert(i.name.clone(), Arc::new(i));
        }
        Ok(Self { by_name })
    }

    /// The instance called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Instance>> {
        self.by_name.get(name).cloned()
    }

    /// Every instance, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Instance>> {
        self.by_name.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(argv: &[&str]) -> Instance {
        Instance {
            name: "coder".into(),
            description: String::new(),
            runtime: Runtime::Command(CommandRuntime {
                argv: argv.iter().map(|s| (*s).to_owned()).collect(),
                cwd: PathBuf::from("/"),
                timeout: Duration::from_secs(1),
                max_output: 1,
            }),
            extensions: vec![],
            streaming: true,
            workspace: None,
            isolation: Default::default(),
        }
    }

    #[test]
    fn text_stays_inside_its_element() {
        let Runtime::Command(c) = command(&["agent", "--prompt={text}", "{text}"]).runtime else {
            unreachable!()
        };
        assert_eq!(
            c.render("a b; rm -rf /"),
            ["agent", "--prompt=a b; rm -rf /", "a b; rm -rf /"]
        );
    }

    #[test]
    fn bad_configurations_are_refused() {
        assert!(matches!(
            Instances::new(vec![command(&["{text}"])], None),
            Err(InstanceError::BadCommand(..))
        ));
        assert!(matches!(
            Instances::new(vec![command(&[])], None),
            Err(InstanceError::BadCommand(..))
        ));
        assert!(matches!(
            Instances::new(vec![command(&["a"]), command(&["b"])], None),
            Err(InstanceError::Duplicate(_))
        ));
        let mut bad = command(&["a"]);
        bad.name = "Has Space".into();
        assert!(matches!(
            Instances::new(vec![bad], None),
            Err(InstanceError::BadName(_))
        ));
        assert!(Instances::new(vec![], None).is_ok_and(|i| i.get(DEFAULT_INSTANCE).is_some()));
    }
}
