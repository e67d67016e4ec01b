//! Command-line entry points. `main.rs` calls [`run`] and nothing else.

mod check;
mod serve;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit code for a configuration that cannot be used (as `loom check` and `loom` report it).
pub const EXIT_CONFIG: u8 = 2;
/// Exit code when loom cannot serve (no server could start, stdio unusable).
pub const EXIT_START: u8 = 1;

#[derive(Debug, Parser)]
#[command(
    name = "loom",
    version,
    about = "A context gateway for the Model Context Protocol: one stdio MCP server in front of many",
    long_about = None,
)]
pub struct Cli {
    /// Configuration file (else $LOOM_CONFIG, else ./loom.config.json).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP over stdio in front of the configured servers (the default).
    Serve,
    /// Validate the configuration and print the resolved servers (secrets masked); starts nothing.
    Check,
}

/// Parse arguments and run.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let config_path = crate::config::resolve_path(
        cli.config.as_deref(),
        std::env::var(crate::config::CONFIG_ENV_VAR).ok(),
    );
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve::run(&config_path),
        Command::Check => check::run(&config_path),
    }
}

/// Logs go to stderr only (stdout carries the protocol). Level from `LOOM_LOG`
/// (`tracing_subscriber` filter syntax), default `info` for loom and `warn` for libraries.
fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("LOOM_LOG")
        .unwrap_or_else(|_| EnvFilter::new("warn,rmcp=error,loom=info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .try_init();
}
