//! The child's environment: a minimal base, never the server's own secrets.

use std::collections::BTreeMap;
use std::ffi::OsString;

use warden_core::Terminal;

/// Names every child's environment carries, taken from the supervisor's own
/// environment when set there.
const BASE: [&str; 4] = ["PATH", "HOME", "LANG", "TERM"];

/// The variable that marks every process of a run with the run's id; it is
/// how a descendant that left the process group is recognised.
pub const MARKER_VAR: &str = "WARDEN_RUN_ID";

const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Builds the environment for one run: the base names, the operator's
/// allow-list, the request's own variables, and the run marker, in that
/// order of precedence (later wins, the marker always last).
pub(crate) fn build(
    allow: &[String],
    extra: &[(String, String)],
    terminal: Terminal,
    marker: &str,
) -> BTreeMap<OsString, OsString> {
    let mut env = BTreeMap::new();
    for name in BASE.iter().copied().chain(allow.iter().map(String::as_str)) {
        if let Some(v) = std::env::var_os(name) {
            env.insert(OsString::from(name), v);
        }
    }
    env.entry("PATH".into())
        .or_insert_with(|| DEFAULT_PATH.into());
    let term = match terminal {
        Terminal::Pipes => "dumb",
        Terminal::Pty => "xterm-256color",
    };
    env.entry("TERM".into()).or_insert_with(|| term.into());
    for (k, v) in extra {
        env.insert(k.into(), v.into());
    }
    env.insert(MARKER_VAR.into(), marker.into());
    env
}
