//! `warden run`: one command through the supervisor, output streamed, the
//! outcome reported, and an exit code that says how it ended.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use base64::Engine;
use serde_json::json;
use tokio::io::AsyncReadExt;
use warden_core::{FailureKind, Outcome, RunId, RunSpec, StdinMode, Terminal};
use warden_exec::{RunEvent, Stream, Supervisor, SupervisorConfig};

use crate::cli::RunArgs;
use crate::config::{MAX_GRACE_SECONDS, RunsConfig, secs};

/// The exit code for each outcome (see `cli::EXIT_CODES`).
pub fn exit_code(outcome: &Outcome) -> u8 {
    match outcome {
        Outcome::Completed => 0,
        Outcome::Failed(FailureKind::Application {
            exit_code: Some(c), ..
        }) => u8::try_from(*c & 0xff).unwrap_or(1),
        Outcome::Failed(FailureKind::Application {
            signal: Some(s), ..
        }) => u8::try_from(128 + (*s & 0x7f)).unwrap_or(1),
        Outcome::Failed(FailureKind::Application { .. }) => 1,
        Outcome::Failed(FailureKind::Infrastructure { .. }) => 125,
        Outcome::OutputLimit => 123,
        Outcome::TimedOut => 124,
        Outcome::Cancelled => 130,
    }
}

pub async fn main(args: RunArgs) -> anyhow::Result<ExitCode> {
    let defaults = RunsConfig::default();
    let cwd = match args.cwd {
        Some(c) => std::path::absolute(&c).with_context(|| format!("bad --cwd {}", c.display()))?,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let timeout = match args.timeout {
        Some(t) if !(t.is_finite() && t > 0.0) => {
            anyhow::bail!("--timeout must be a positive number of seconds")
        }
        Some(t) => secs(t),
        None => defaults.default_timeout(),
    };
    let spec = RunSpec {
        argv: args.argv,
        cwd: cwd.clone(),
        env: args.env,
        timeout,
        max_output: args.max_output.unwrap_or(defaults.default_max_output_bytes),
        terminal: if args.pty {
            Terminal::Pty
        } else {
            Terminal::Pipes
        },
        stdin: if args.stdin {
            StdinMode::Open
        } else {
            StdinMode::Closed
        },
        confine: match args.confine {
            None => None,
            Some(profile) => {
                let ws = cwd
                    .canonicalize()
                    .with_context(|| format!("workspace {}", cwd.display()))?;
                crate::tiers::refuse_home_workspace(&ws)?;
                Some(warden_core::Policy::for_profile(profile, ws))
            }
        },
    };
    spec.validate(&defaults.limits())?;
    let grace = match args.grace {
        Some(g) if !(g.is_finite() && (0.0..=MAX_GRACE_SECONDS).contains(&g)) => {
            anyhow::bail!("--grace must be from 0 to {MAX_GRACE_SECONDS} seconds")
        }
        Some(g) => secs(g),
        None => defaults.grace(),
    };
    let supervisor = Supervisor::new(SupervisorConfig {
        grace,
        sandbox_helper: Some(std::env::current_exe().context("locating the warden binary")?),
        ..SupervisorConfig::default()
    })
    .context("cannot become a child subreaper")?;
    let json = args.json;

    // Listen before the program starts: a Ctrl-C that came before the
    // handlers would kill warden and leave the program running.
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;

    let id = RunId::new();
    let mut run = match supervisor.spawn(&id.to_string(), &spec) {
        Ok(r) => r,
        Err(e) => {
            let outcome = e.outcome();
            report(json, &outcome)?;
            return Ok(ExitCode::from(exit_code(&outcome)));
        }
    };
    if let Some(mut stdin) = run.take_stdin() {
        tokio::spawn(async move {
            let mut ours = tokio::io::stdin();
            let mut buf = vec![0u8; 8192];
            while let Ok(n) = ours.read(&mut buf).await {
                if n == 0 || stdin.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
            // Dropping the handle closes the child's stdin (pipes) at our EOF.
        });
    }
    let canceller = run.canceller();
    tokio::spawn(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        canceller.cancel();
    });

    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr();
    let outcome = loop {
        match run.next().await {
            Some(RunEvent::Output(chunk)) => {
                if json {
                    let line = match std::str::from_utf8(&chunk.data) {
                        Ok(text) => {
                            json!({"type": "output", "seq": chunk.seq, "stream": chunk.stream_name(), "text": text})
                        }
                        Err(_) => {
                            json!({"type": "output", "seq": chunk.seq, "stream": chunk.stream_name(),
                                         "base64": base64::engine::general_purpose::STANDARD.encode(&chunk.data)})
                        }
                    };
                    writeln!(stdout, "{line}")?;
                    stdout.flush()?;
                } else {
                    // A closed stdout (e.g. `| head`) must not end the supervision early.
                    let _ = match chunk.stream {
                        Stream::Stdout => {
                            stdout.write_all(&chunk.data).and_then(|()| stdout.flush())
                        }
                        Stream::Stderr => stderr.write_all(&chunk.data),
                    };
                }
            }
            Some(RunEvent::Finished(o)) => break o,
            None => break Outcome::infrastructure("supervisor_lost", None),
        }
    };
    drop(stdout);
    report(json, &outcome)?;
    Ok(ExitCode::from(exit_code(&outcome)))
}

fn report(json: bool, outcome: &Outcome) -> anyhow::Result<()> {
    if json {
        let line = json!({"type": "outcome", "state": outcome.state(), "outcome": outcome, "exit_code": exit_code(outcome)});
        println!("{line}");
    } else if *outcome != Outcome::Completed {
        eprintln!("warden: {}", outcome.describe());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_has_a_documented_exit_code() {
        assert_eq!(exit_code(&Outcome::Completed), 0);
        assert_eq!(exit_code(&Outcome::exit_code(3)), 3);
        assert_eq!(exit_code(&Outcome::signal(9)), 137);
        assert_eq!(
            exit_code(&Outcome::infrastructure("program_not_found", None)),
            125
        );
        assert_eq!(exit_code(&Outcome::OutputLimit), 123);
        assert_eq!(exit_code(&Outcome::TimedOut), 124);
        assert_eq!(exit_code(&Outcome::Cancelled), 130);
    }
}
