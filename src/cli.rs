//! The command line. Subcommands grow with the daemon; today `settings` prints the effective
//! settings after the file and the environment have been applied.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::Settings;

#[derive(Debug, Parser)]
#[command(
    name = "toold",
    version,
    about = "An LLM agent's tool system as a network service"
)]
pub struct Cli {
    /// Settings file (TOML).
    #[arg(long, global = true, env = "TOOLD_CONFIG")]
    pub config: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the effective settings as JSON.
    Settings,
}

/// Runs the command line; errors are printed once, here at the edge.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("toold: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let settings = Settings::load(cli.config.as_deref(), |name| std::env::var(name).ok())?;
    match cli.command {
        Command::Settings => println!("{}", serde_json::to_string_pretty(&settings)?),
    }
    Ok(())
}
