//! The public face of the supervisor: configuration, `spawn`, and the handle
//! a caller holds while a run lives.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use warden_core::{Outcome, Policy, RunSpec, StdinMode, Terminal};

use crate::driver::{Driver, Source};
use crate::output::{OutputChunk, Stream};
use crate::{SpawnError, StdinHandle, confine, env, procs, pty, resolve};

/// Settings shared by every run of one supervisor.
#[derive(Debug, Clone)]
pub struct SupervisorConfig {
    /// Time between SIGTERM and SIGKILL when a run must end.
    pub grace: Duration,
    /// The largest output chunk, in bytes.
    pub chunk_size: usize,
    /// Names of the supervisor's environment variables a child may also see.
    pub env_allow: Vec<String>,
    /// How many chunks may wait for a slow consumer before the child is
    /// blocked on its own writes (this bounds memory).
    pub channel_capacity: usize,
    /// The `warden` binary that serves as the confined tier's helper
    /// (`warden sandbox-exec`); without it confined runs are refused.
    pub sandbox_helper: Option<PathBuf>,
    /// Where confined runs' helpers record how setup went (a private
    /// directory, created 0700 and checked at every confined spawn).
    pub confine_dir: PathBuf,
    /// Paths no confined run may be given write access to (the server's
    /// home and config); `confine_dir` is always protected.
    pub protected: Vec<PathBuf>,
}

impl Default for SupervisorConfig {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(5),
            chunk_size: 16 * 1024,
            env_allow: Vec::new(),
            channel_capacity: 32,
            sandbox_helper: None,
            confine_dir: std::env::temp_dir()
                .join(format!("warden-confine-{}", nix::unistd::getuid())),
            protected: Vec::new(),
        }
    }
}

/// What a run reports, in order: output chunks, then exactly one `Finished`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEvent {
    /// A chunk of output.
    Output(OutputChunk),
    /// The run is over and every one of its processes is gone.
    Finished(Outcome),
}

/// Asks a run to stop; the outcome is `cancelled` unless it had already exited.
#[derive(Debug, Clone)]
pub struct Canceller(CancellationToken);

impl Canceller {
    /// Requests cancellation; idempotent.
    pub fn cancel(&self) {
        self.0.cancel();
    }
}

/// A live run.
#[derive(Debug)]
pub struct RunHandle {
    pid: u32,
    events: mpsc::Receiver<RunEvent>,
    cancel: CancellationToken,
    stdin: Option<StdinHandle>,
}

impl RunHandle {
    /// The leader's pid, which is also the run's process group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The next event; `None` after `Finished` has been taken.
    pub async fn next(&mut self) -> Option<RunEvent> {
        self.events.recv().await
    }

    /// A cloneable handle that cancels this run.
    pub fn canceller(&self) -> Canceller {
        Canceller(self.cancel.clone())
    }

    /// The writable stdin, when the spec asked for one (once).
    pub fn take_stdin(&mut self) -> Option<StdinHandle> {
        self.stdin.take()
    }
}

/// Spawns and watches bounded runs.
#[derive(Debug, Clone)]
pub struct Supervisor {
    config: Arc<SupervisorConfig>,
}

impl Supervisor {
    /// Creates a supervisor and makes this process a child subreaper; fails
    /// closed if the kernel refuses, since escaped descendants could then
    /// outlive their runs.
    pub fn new(config: SupervisorConfig) -> std::io::Result<Self> {
        procs::become_subreaper().map_err(std::io::Error::from)?;
        Ok(Self {
            config: Arc::new(config),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &SupervisorConfig {
        &self.config
    }

    /// Checks, without spawning, that `spec`'s working directory is usable
    /// and its program resolves; lets callers refuse bad input up front.
    pub fn preflight(&self, spec: &RunSpec) -> Result<std::path::PathBuf, SpawnError> {
        let Some(argv0) = spec.argv.first() else {
            return Err(SpawnError::ProgramNotFound(String::new()));
        };
        resolve::check_cwd(&spec.cwd)?;
        let env = env::build(&self.config.env_allow, &spec.env, spec.terminal, "");
        resolve::program(
            argv0,
            &spec.cwd,
            env.get(std::ffi::OsStr::new("PATH")).map(|p| p.as_os_str()),
        )
    }

    /// The helper command for a confined run, and where it records a setup
    /// failure. Refuses before spawning when this kernel cannot enforce the
    /// policy: there is no unconfined fallback.
    fn confined_command(
        &self,
        marker: &str,
        policy: &Policy,
        program: &Path,
        args: &[String],
    ) -> Result<(tokio::process::Command, Option<PathBuf>), SpawnError> {
        let Some(helper) = &self.config.sandbox_helper else {
            return Err(SpawnError::ConfinementUnavailable(
                "this supervisor has no sandbox helper (warden sandbox-exec)".to_owned(),
            ));
        };
        let missing = confine::Support::cached().missing_for(policy);
        if !missing.is_empty() {
            return Err(SpawnError::ConfinementUnavailable(missing.join("; ")));
        }
        // The run must not reach the server's own state (its config, store,
        // certificate) nor forge its setup record.
        // The helper too: replaced, it would run the next confined run
        // unconfined.
        let protected = [&self.config.confine_dir, helper]
            .into_iter()
            .chain(&self.config.protected);
        for p in protected {
            if let Some(w) = policy.writable().find(|w| p.starts_with(w)) {
                return Err(SpawnError::ConfinementUnavailable(format!(
                    "the policy lets the run write {}, which holds {} (warden's own state); choose a workspace that does not contain it",
                    w.display(),
                    p.display()
                )));
            }
        }
        confine::private_dir(&self.config.confine_dir)
            .map_err(SpawnError::ConfinementUnavailable)?;
        let status = self.config.confine_dir.join(format!("{marker}.status"));
        let argv = confine::helper_argv(helper, policy, &status, None, program, args)
            .map_err(|e| SpawnError::ConfinementUnavailable(e.to_string()))?;
        let mut cmd = tokio::process::Command::new(helper);
        cmd.args(&argv[1..]);
        Ok((cmd, Some(status)))
    }

    /// Starts `spec` (already validated) with `marker` (the run id) in its
    /// environment. Must be called inside a tokio runtime.
    pub fn spawn(&self, marker: &str, spec: &RunSpec) -> Result<RunHandle, SpawnError> {
        let Some(argv0) = spec.argv.first() else {
            return Err(SpawnError::ProgramNotFound(String::new()));
        };
        resolve::check_cwd(&spec.cwd)?;
        let env = env::build(&self.config.env_allow, &spec.env, spec.terminal, marker);
        let program = resolve::program(
            argv0,
            &spec.cwd,
            env.get(std::ffi::OsStr::new("PATH")).map(|p| p.as_os_str()),
        )?;

        let (mut cmd, confine_status) = match &spec.confine {
            None => {
                let mut cmd = tokio::process::Command::new(&program);
                cmd.as_std_mut().arg0(argv0);
                cmd.args(&spec.argv[1..]);
                (cmd, None)
            }
            Some(policy) => self.confined_command(marker, policy, &program, &spec.argv[1..])?,
        };
        cmd.current_dir(&spec.cwd)
            .env_clear()
            .envs(&env)
            .process_group(0)
            .kill_on_drop(false);
        let mut master = None;
        match spec.terminal {
            Terminal::Pipes => {
                cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
                cmd.stdin(match spec.stdin {
                    StdinMode::Closed => Stdio::null(),
                    StdinMode::Open => Stdio::piped(),
                });
            }
            Terminal::Pty => {
                let (m, slave) = pty::open()?;
                cmd.stdin(Stdio::from(slave.try_clone()?))
                    .stdout(Stdio::from(slave.try_clone()?))
                    .stderr(Stdio::from(slave));
                master = Some(m);
            }
        }

        let (mut child, pid) = {
            let mut registry = procs::registry();
            let child = cmd.spawn()?;
            let Some(pid) = child.id() else {
                // Unreachable in practice: only a reaped child has no pid.
                return Err(SpawnError::Spawn(std::io::Error::other(
                    "the child has no pid right after spawn",
                )));
            };
            registry.add(pid as i32);
            (child, pid)
        };
        // Our copies of the PTY slave must close, or the master never sees EOF.
        drop(cmd);

        let chunk = self.config.chunk_size.max(1);
        let (sources, stdin) = match master {
            None => {
                let out = child
                    .stdout
                    .take()
                    .map(|o| Source::new(Stream::Stdout, o, chunk));
                let err = child
                    .stderr
                    .take()
                    .map(|e| Source::new(Stream::Stderr, e, chunk));
                ([out, err], child.stdin.take().map(StdinHandle::Pipe))
            }
            Some(m) => {
                let stdin = (spec.stdin == StdinMode::Open).then_some(StdinHandle::Pty(m.writer));
                (
                    [Some(Source::new(Stream::Stdout, m.reader, chunk)), None],
                    stdin,
                )
            }
        };

        let (tx, events) = mpsc::channel(self.config.channel_capacity.max(1));
        let cancel = CancellationToken::new();
        let driver = Driver {
            child,
            pid: pid as i32,
            marker: procs::marker_bytes(marker),
            sources,
            tx,
            cancel: cancel.clone(),
            deadline: crate::driver::later(spec.timeout),
            grace: self.config.grace,
            max_output: spec.max_output,
            confine_status,
        };
        tokio::spawn(driver.run());
        Ok(RunHandle {
            pid,
            events,
            cancel,
            stdin,
        })
    }
}
