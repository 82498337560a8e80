//! `adapter-command/v1`: an envelope in a message's metadata that asks an
//! instance to run one allowlisted adapter command (the AIWG
//! `sandbox-agent-runner` in `plan` or `assess` mode) instead of its default
//! text dispatch. Everything is checked before anything runs; a refusal
//! names the rule that failed.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};
use warden_core::Message;

/// The extension's URI, the envelope's key in `Message.metadata`.
pub const ADAPTER_URI: &str = "https://agentic-sandbox.aiwg.io/extensions/adapter-command/v1";

/// The text-input extension's URI.
pub const HITL_URI: &str = "https://agentic-sandbox.aiwg.io/extensions/hitl-prompt/v1";

/// The only adapter v1 supports.
pub const ADAPTER: &str = "sandbox-agent-runner";

/// The runner script, relative to the working directory.
pub const RUNNER: &str = ".aiwg/ops/adapters/sandbox-agent-runner/runner.mjs";

/// Where a request file may be, relative to the workspace.
pub const REQUEST_ROOTS: [&str; 2] = [".aiwg/ops/adapters/sandbox-agent-runner", ".aiwg/ops/runs"];

/// `timeout_seconds` when the envelope names none.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 300;

/// The largest `timeout_seconds`.
pub const MAX_TIMEOUT_SECONDS: u64 = 900;

/// What the runner is asked to do, given to it as `AIWG_A2A_ADAPTER_MODE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Plan,
    Assess,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plan => "plan",
            Self::Assess => "assess",
        }
    }
}

/// A validated envelope: what will run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterCommand {
    pub mode: Mode,
    /// `node`, the runner, `--request`, the request file: the runner and
    /// the request as resolved in the workspace (absolute), so the file
    /// the command reads is the one that was checked, whatever the
    /// working directory.
    pub argv: Vec<String>,
    /// Canonical, inside the workspace.
    pub working_dir: PathBuf,
    pub timeout: Duration,
    /// `input_mode: "text-line"`: prompts in the output may be answered.
    pub text_line: bool,
}

/// Why an envelope was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The rule, e.g. `command.path_prefix`.
    pub rule: &'static str,
    /// The offending field, from the envelope's root.
    pub field: String,
    pub message: String,
}

fn refuse(rule: &'static str, field: &str, message: impl Into<String>) -> Refusal {
    Refusal {
        rule,
        field: field.to_owned(),
        message: message.into(),
    }
}

/// The envelope a send carries: in the message's metadata, else in the
/// request's.
pub fn envelope<'a>(
    message: &'a Message,
    request: Option<&'a Map<String, Value>>,
) -> Option<&'a Value> {
    message
        .metadata
        .as_ref()
        .and_then(|m| m.get(ADAPTER_URI))
        .or_else(|| request.and_then(|m| m.get(ADAPTER_URI)))
}

const FIELDS: [&str; 6] = [
    "adapter",
    "mode",
    "command",
    "working_dir",
    "timeout_seconds",
    "input_mode",
];

/// Checks `envelope` against the rules, with `workspace` the instance's
/// workspace (canonical).
pub fn validate(envelope: &Value, workspace: &Path) -> Result<AdapterCommand, Refusal> {
    let Value::Object(env) = envelope else {
        return Err(refuse(
            "envelope.object",
            "",
            "the envelope must be a JSON object",
        ));
    };
    if let Some(k) = env.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(refuse(
            "envelope.known_fields",
            k,
            format!("unknown field; v1 takes {}", FIELDS.join(", ")),
        ));
    }
    match env.get("adapter") {
        Some(Value::String(a)) if a == ADAPTER => {}
        _ => {
            return Err(refuse(
                "adapter.supported",
                "adapter",
                format!("must be \"{ADAPTER}\""),
            ));
        }
    }
    let mode = match env.get("mode").and_then(Value::as_str) {
        Some("plan") => Mode::Plan,
        Some("assess") => Mode::Assess,
        _ => {
            return Err(refuse(
                "mode.supported",
                "mode",
                "must be \"plan\" or \"assess\"",
            ));
        }
    };
    let mut argv = command(env.get("command"))?;
    let request = request_path(&argv[3], workspace)?;
    let runner = workspace.join(RUNNER).canonicalize().map_err(|e| {
        refuse(
            "command.runner_exists",
            "command[1]",
            format!(
                "{RUNNER} is not in the workspace {}: {e}",
                workspace.display()
            ),
        )
    })?;
    if !runner.starts_with(workspace) {
        return Err(refuse(
            "command.runner_exists",
            "command[1]",
            format!(
                "{RUNNER} resolves outside the workspace, to {}",
                runner.display()
            ),
        ));
    }
    argv[1] = runner.to_string_lossy().into_owned();
    argv[3] = request.to_string_lossy().into_owned();
    let working_dir = working_dir(env.get("working_dir"), workspace)?;
    let timeout = match env.get("timeout_seconds") {
        None => DEFAULT_TIMEOUT_SECONDS,
        Some(v) => match v.as_i64() {
            Some(s) if (1..=MAX_TIMEOUT_SECONDS as i64).contains(&s) => s as u64,
            Some(_) => {
                return Err(refuse(
                    "timeout_seconds.range",
                    "timeout_seconds",
                    format!("must be from 1 to {MAX_TIMEOUT_SECONDS}"),
                ));
            }
            None => {
                return Err(refuse(
                    "timeout_seconds.integer",
                    "timeout_seconds",
                    format!("must be an integer number of seconds, got {v}"),
                ));
            }
        },
    };
    let text_line = match env.get("input_mode") {
        None => false,
        Some(Value::String(m)) if m == "text-line" => true,
        Some(_) => {
            return Err(refuse(
                "input_mode.supported",
                "input_mode",
                "the only input mode is \"text-line\"",
            ));
        }
    };
    Ok(AdapterCommand {
        mode,
        argv,
        working_dir,
        timeout: Duration::from_secs(timeout),
        text_line,
    })
}

/// `["node", RUNNER, "--request", <path>]`, exactly.
fn command(v: Option<&Value>) -> Result<Vec<String>, Refusal> {
    let shape = || {
        refuse(
            "command.shape",
            "command",
            format!("must be [\"node\", \"{RUNNER}\", \"--request\", <relative request path>]"),
        )
    };
    let Some(Value::Array(items)) = v else {
        return Err(shape());
    };
    let argv: Vec<String> = items
        .iter()
        .map(|i| i.as_str().map(str::to_owned))
        .collect::<Option<_>>()
        .ok_or_else(shape)?;
    if argv.len() != 4 || argv[0] != "node" || argv[1] != RUNNER || argv[2] != "--request" {
        return Err(shape());
    }
    Ok(argv)
}

/// The request path: relative, no `..`, no backslash, no NUL, and its
/// canonical form (symlinks resolved, from the workspace) under one of
/// [`REQUEST_ROOTS`].
fn request_path(path: &str, workspace: &Path) -> Result<PathBuf, Refusal> {
    const FIELD: &str = "command[3]";
    if path.is_empty() {
        return Err(refuse(
            "command.path_relative",
            FIELD,
            "the request path is empty",
        ));
    }
    if path.contains('\0') {
        return Err(refuse(
            "command.path_nul",
            FIELD,
            "the request path contains NUL",
        ));
    }
    if path.contains('\\') {
        return Err(refuse(
            "command.path_backslash",
            FIELD,
            "the request path contains a backslash",
        ));
    }
    let p = Path::new(path);
    if p.is_absolute() {
        return Err(refuse(
            "command.path_relative",
            FIELD,
            "the request path must be relative to the workspace",
        ));
    }
    if p.components().any(|c| c == Component::ParentDir) {
        return Err(refuse(
            "command.path_dotdot",
            FIELD,
            "the request path has a \"..\" segment",
        ));
    }
    let canonical = workspace.join(p).canonicalize().map_err(|e| {
        refuse(
            "command.path_resolves",
            FIELD,
            format!("cannot resolve {path} in the workspace: {e}"),
        )
    })?;
    // Against the roots as named, not resolved: a root that is itself a
    // symlink out of the workspace lets nothing through.
    let allowed = canonical.is_file()
        && REQUEST_ROOTS
            .iter()
            .any(|root| canonical.starts_with(workspace.join(root)));
    if !allowed {
        return Err(refuse(
            "command.path_prefix",
            FIELD,
            format!(
                "{path} resolves to {}, outside {}",
                canonical.display(),
                REQUEST_ROOTS.map(|r| format!("{r}/")).join(" and ")
            ),
        ));
    }
    Ok(canonical)
}

/// `working_dir`: the workspace when absent, else a directory inside it.
fn working_dir(v: Option<&Value>, workspace: &Path) -> Result<PathBuf, Refusal> {
    const FIELD: &str = "working_dir";
    let Some(v) = v else {
        return Ok(workspace.to_owned());
    };
    let Some(dir) = v.as_str().filter(|d| !d.is_empty() && !d.contains('\0')) else {
        return Err(refuse(
            "working_dir.inside_workspace",
            FIELD,
            "must be a directory path",
        ));
    };
    let canonical = workspace.join(dir).canonicalize().map_err(|e| {
        refuse(
            "working_dir.inside_workspace",
            FIELD,
            format!("cannot resolve {dir}: {e}"),
        )
    })?;
    if !canonical.starts_with(workspace) || !canonical.is_dir() {
        return Err(refuse(
            "working_dir.inside_workspace",
            FIELD,
            format!(
                "{dir} resolves to {}, which is not the workspace {} or a directory inside it",
                canonical.display(),
                workspace.display()
            ),
        ));
    }
    Ok(canonical)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn workspace() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(ws.join(".aiwg/ops/adapters/sandbox-agent-runner/examples"))
            .unwrap();
        std::fs::create_dir_all(ws.join(".aiwg/ops/runs")).unwrap();
        std::fs::write(ws.join(RUNNER), "").unwrap();
        std::fs::write(
            ws.join(".aiwg/ops/adapters/sandbox-agent-runner/examples/req.json"),
            "{}",
        )
        .unwrap();
        std::fs::write(ws.join(".aiwg/ops/runs/r.json"), "{}").unwrap();
        std::fs::write(ws.join("outside.json"), "{}").unwrap();
        (dir, ws)
    }

    fn env(path: &str) -> Value {
        json!({
            "adapter": "sandbox-agent-runner",
            "mode": "plan",
            "command": ["node", RUNNER, "--request", path],
        })
    }

    fn rule(v: &Value, ws: &Path) -> &'static str {
        validate(v, ws).map(|_| "ok").unwrap_or_else(|r| r.rule)
    }

    #[test]
    fn a_valid_envelope_gets_defaults() {
        let (_d, ws) = workspace();
        let c = validate(
            &env(".aiwg/ops/adapters/sandbox-agent-runner/examples/req.json"),
            &ws,
        )
        .unwrap();
        assert_eq!(c.mode, Mode::Plan);
        assert_eq!(c.timeout, Duration::from_secs(300));
        assert_eq!(c.working_dir, ws);
        assert!(!c.text_line);
        assert_eq!(
            c.argv,
            [
                "node".to_owned(),
                ws.join(RUNNER).to_string_lossy().into_owned(),
                "--request".to_owned(),
                ws.join(".aiwg/ops/adapters/sandbox-agent-runner/examples/req.json")
                    .to_string_lossy()
                    .into_owned(),
            ]
        );
        assert_eq!(rule(&env(".aiwg/ops/runs/r.json"), &ws), "ok");
    }

    #[test]
    fn each_rule_refuses_what_it_names() {
        let (_d, ws) = workspace();
        let ok = ".aiwg/ops/runs/r.json";
        let with = |k: &str, v: Value| {
            let mut e = env(ok);
            e[k] = v;
            e
        };
        assert_eq!(rule(&json!("x"), &ws), "envelope.object");
        assert_eq!(rule(&with("extra", json!(1)), &ws), "envelope.known_fields");
        assert_eq!(
            rule(&with("adapter", json!("other")), &ws),
            "adapter.supported"
        );
        assert_eq!(rule(&with("mode", json!("apply")), &ws), "mode.supported");
        assert_eq!(
            rule(&with("command", json!(["sh", "-c", "x", ok])), &ws),
            "command.shape"
        );
        assert_eq!(
            rule(&with("command", json!(["node", RUNNER, "--request"])), &ws),
            "command.shape"
        );
        assert_eq!(rule(&env("/etc/passwd"), &ws), "command.path_relative");
        assert_eq!(
            rule(&env(".aiwg/ops/runs/../runs/r.json"), &ws),
            "command.path_dotdot"
        );
        assert_eq!(
            rule(&env(".aiwg\\ops\\runs\\r.json"), &ws),
            "command.path_backslash"
        );
        assert_eq!(
            rule(&env(".aiwg/ops/runs/r\0.json"), &ws),
            "command.path_nul"
        );
        assert_eq!(rule(&env("outside.json"), &ws), "command.path_prefix");
        assert_eq!(
            rule(&env(".aiwg/ops/runs/missing.json"), &ws),
            "command.path_resolves"
        );
        assert_eq!(
            rule(&with("working_dir", json!("/")), &ws),
            "working_dir.inside_workspace"
        );
        assert_eq!(
            rule(&with("timeout_seconds", json!(0)), &ws),
            "timeout_seconds.range"
        );
        assert_eq!(
            rule(&with("timeout_seconds", json!(901)), &ws),
            "timeout_seconds.range"
        );
        assert_eq!(
            rule(&with("timeout_seconds", json!(-5)), &ws),
            "timeout_seconds.range"
        );
        assert_eq!(
            rule(&with("timeout_seconds", json!(1.5)), &ws),
            "timeout_seconds.integer"
        );
        assert_eq!(
            rule(&with("timeout_seconds", json!("30")), &ws),
            "timeout_seconds.integer"
        );
        assert_eq!(
            rule(&with("input_mode", json!("tty")), &ws),
            "input_mode.supported"
        );
        assert_eq!(rule(&with("timeout_seconds", json!(900)), &ws), "ok");
    }

    #[test]
    fn a_symlink_out_of_the_allowed_roots_is_refused() {
        let (_d, ws) = workspace();
        std::os::unix::fs::symlink(ws.join("outside.json"), ws.join(".aiwg/ops/runs/link.json"))
            .unwrap();
        assert_eq!(
            rule(&env(".aiwg/ops/runs/link.json"), &ws),
            "command.path_prefix"
        );
        // A root that is itself a symlink out of the workspace lets nothing through.
        let (_d2, ws2) = workspace();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("id_rsa"), "secret").unwrap();
        std::fs::remove_dir_all(ws2.join(".aiwg/ops/runs")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), ws2.join(".aiwg/ops/runs")).unwrap();
        assert_eq!(
            rule(&env(".aiwg/ops/runs/id_rsa"), &ws2),
            "command.path_prefix"
        );
        // A symlink that stays inside is fine.
        std::os::unix::fs::symlink(
            ws.join(".aiwg/ops/runs/r.json"),
            ws.join(".aiwg/ops/runs/in.json"),
        )
        .unwrap();
        assert_eq!(rule(&env(".aiwg/ops/runs/in.json"), &ws), "ok");
    }
}
