//! `warden`: the agent execution plane's daemon and CLI.
#![forbid(unsafe_code)]

mod a2a_runner;
mod aiwg;
mod certify;
mod cli;
mod cmd_bus;
mod cmd_certify;
mod cmd_mission;
mod cmd_run;
mod cmd_sandbox;
mod config;
mod runs;
mod serve;
mod server;
mod tiers;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // The sandbox helper starts for every confined run: parse only its own
    // arguments, not the whole command tree.
    if args.get(1).is_some_and(|a| a == cli::SANDBOX_EXEC) {
        let helper = cli::SandboxExecCli::parse_from(args.iter().skip(1));
        cmd_sandbox::main(helper.args);
    }
    let cli = cli::Cli::parse_from(cmd_bus::rewrite_link(args));
    // The sandbox helper and its probes fork: they run before any thread exists.
    let command = match cli.command {
        cli::Command::SandboxExec(a) => cmd_sandbox::main(a),
        cli::Command::SandboxProbe(args) => return certify::probe_main(args),
        cli::Command::Shim(args) => {
            let code = warden_exec::shim::run(warden_exec::shim::ShimRequest {
                dir: args.dir,
                argv: args.argv,
                timeout: std::time::Duration::from_secs_f64(args.timeout.max(0.001)),
                grace: std::time::Duration::from_secs_f64(args.grace.max(0.0)),
                max_output: args.max_output,
            });
            return ExitCode::from(u8::try_from(code).unwrap_or(1));
        }
        other => other,
    };
    let default_level = match command {
        cli::Command::Serve(_) => "info",
        _ => "warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WARDEN_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("warden: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async move {
        match command {
            cli::Command::Serve(args) => serve::main(args).await.map(|()| ExitCode::SUCCESS),
            cli::Command::Run(args) => cmd_run::main(args).await,
            cli::Command::Bus(args) => cmd_bus::main(args).await,
            cli::Command::Certify(args) => cmd_certify::main(args).await,
            cli::Command::Mission(args) => cmd_mission::main(args).await,
            cli::Command::SandboxExec(_)
            | cli::Command::SandboxProbe(_)
            | cli::Command::Shim(_) => {
                unreachable!("handled before the runtime starts")
            }
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("warden: {e:#}");
            ExitCode::from(1)
        }
    }
}
