//! Instances: the agent runtimes a server hosts, each served under
//! `/agents/{name}/` (the `default` one also at `/`).

use std::collections::BTreeMap;
use std::sync::Arc;

/// What answers an instance's messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runtime {
    /// In process, no child: the agent's message and artifact carry the user's text.
    Echo,
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
}

/// The instances of one server.
#[derive(Debug, Clone)]
pub struct Instances {
    by_name: BTreeMap<String, Arc<Instance>>,
}

/// The instance served at `/` as well.
pub const DEFAULT_INSTANCE: &str = "default";

impl Instances {
    /// Just the `default` echo instance, as when nothing is configured.
    pub fn default_only() -> Self {
        let default = Instance {
            name: DEFAULT_INSTANCE.to_owned(),
            description: "warden's default instance: echoes the text it is sent".to_owned(),
            runtime: Runtime::Echo,
        };
        Self {
            by_name: BTreeMap::from([(default.name.clone(), Arc::new(default))]),
        }
    }

    /// The instance called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Instance>> {
        self.by_name.get(name).cloned()
    }
}
