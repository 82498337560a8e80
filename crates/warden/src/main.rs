//! `warden`: the agent execution plane's daemon and CLI.
#![forbid(unsafe_code)]

mod a2a_runner;
mod cli;
mod cmd_bus;
mod cmd_run;
mod config;
mod runs;
mod serve;
mod server;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse_from(cmd_bus::rewrite_link(std::env::args_os().collect()));
    let default_level = match cli.command {
        cli::Command::Serve(_) => "info",
        cli::Command::Run(_) | cli::Command::Bus(_) => "warn",
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
        match cli.command {
            cli::Command::Serve(args) => serve::main(args).await.map(|()| ExitCode::SUCCESS),
            cli::Command::Run(args) => cmd_run::main(args).await,
            cli::Command::Bus(args) => cmd_bus::main(args).await,
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
