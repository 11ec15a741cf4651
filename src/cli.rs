//! The command line: `serve` runs the daemon, `mcp` serves one session over stdio for an MCP
//! client that starts toold as its `command` (stdout is the protocol, so logs stay on
//! stderr), `settings` prints the effective settings after
//! the file, the environment and the flags have been applied. Errors are printed once, here.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::config::{McpFlags, PermissionLevel, ServerFlags, Settings};

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
    /// Run the daemon until SIGTERM or SIGINT.
    Serve(ServeArgs),
    /// Serve one session over MCP on stdin/stdout until stdin ends.
    Mcp(McpArgs),
    /// Print the effective settings as JSON.
    Settings(ServeArgs),
    /// A session's sandbox spawner (started by the daemon inside the sandbox, not by hand).
    #[command(hide = true)]
    SandboxSpawner(SpawnerArgs),
}

/// Flags of `toold sandbox-spawner`, set by the daemon that starts it.
#[derive(Debug, Args)]
pub struct SpawnerArgs {
    /// The control socket's descriptor.
    #[arg(long)]
    control_fd: i32,
    /// Each command's rlimits: `cpu_seconds,open_files,processes,address_space` (0: none).
    #[arg(long)]
    limits: String,
    /// The session served (only shown in process listings).
    #[arg(long)]
    #[allow(dead_code)]
    session: String,
}

/// Flags of `toold mcp`: where its store lives, and its one session (over `[mcp]`).
#[derive(Debug, Args)]
pub struct McpArgs {
    /// Where the SQLite store, workspaces and spill files live [env: TOOLD_DATA_DIR].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The session's working directory (allowed as a root); default: `[mcp]
    /// working_directory`, or a fresh workspace.
    #[arg(long)]
    working_directory: Option<PathBuf>,
    /// The session's permission mode: read_only, workspace_write or danger_full_access;
    /// default: `[mcp] permission_mode`.
    #[arg(long, value_parser = parse_permission_mode)]
    permission_mode: Option<PermissionLevel>,
    /// A root session working directories may lie under; repeatable [env: TOOLD_ALLOWED_ROOTS].
    #[arg(long = "allowed-root")]
    allowed_roots: Vec<PathBuf>,
}

fn parse_permission_mode(text: &str) -> Result<PermissionLevel, String> {
    text.parse().map_err(|err| format!("{err}"))
}

impl McpArgs {
    /// Applies the flags; a relative working directory is taken from where toold was started.
    fn apply(self, settings: &mut Settings) -> anyhow::Result<()> {
        ServerFlags {
            data_dir: self.data_dir,
            allowed_roots: self.allowed_roots,
            ..ServerFlags::default()
        }
        .apply(&mut settings.server);
        let working_directory = self
            .working_directory
            .map(|dir| std::path::absolute(&dir))
            .transpose()?;
        McpFlags {
            working_directory,
            permission_mode: self.permission_mode,
        }
        .apply(&mut settings.mcp);
        Ok(())
    }
}

/// Flags that override `[server]` (the environment is read by `config`, below the flags).
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// HTTP listener address (port 0 picks one) [env: TOOLD_LISTEN].
    #[arg(long)]
    listen: Option<String>,
    /// Where SQLite, workspaces and spill files live [env: TOOLD_DATA_DIR].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// `sqlite://…` or a path [env: TOOLD_DATABASE_URL].
    #[arg(long)]
    database_url: Option<String>,
    /// A root session working directories may lie under; repeatable [env: TOOLD_ALLOWED_ROOTS].
    #[arg(long = "allowed-root")]
    allowed_roots: Vec<PathBuf>,
    /// A bearer token accepted; repeatable [env: TOOLD_AUTH_TOKENS].
    #[arg(long = "auth-token")]
    auth_tokens: Vec<String>,
}

impl ServeArgs {
    fn flags(self) -> ServerFlags {
        ServerFlags {
            listen: self.listen,
            data_dir: self.data_dir,
            database_url: self.database_url,
            allowed_roots: self.allowed_roots,
            auth_tokens: self.auth_tokens,
        }
    }
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
    let config = cli.config;
    let load = || Settings::load(config.as_deref(), |name| std::env::var(name).ok());
    match cli.command {
        Command::SandboxSpawner(args) => {
            // No settings, no logs, no runtime: it only forks commands for its session (whose
            // id is on its command line for process listings).
            crate::tools::serve_spawner(args.control_fd, &args.limits)?;
        }
        Command::Serve(args) => {
            let mut settings = load()?;
            args.flags().apply(&mut settings.server);
            init_logs(&settings.server.log)?;
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            runtime.block_on(crate::server::run(settings))?;
        }
        Command::Mcp(args) => {
            let mut settings = load()?;
            args.apply(&mut settings)?;
            init_logs(&settings.server.log)?;
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            let served = runtime.block_on(crate::server::run_mcp_stdio(settings));
            // A blocking read of stdin (when it is not a pipe) cannot be cancelled; after a
            // signal it must not hold the exit.
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
            served?;
        }
        Command::Settings(args) => {
            let mut settings = load()?;
            args.flags().apply(&mut settings.server);
            println!("{}", serde_json::to_string_pretty(&settings)?);
        }
    }
    Ok(())
}

/// Structured logs on stderr, filtered by `[server] log`.
fn init_logs(filter: &str) -> anyhow::Result<()> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    let targets: tracing_subscriber::filter::Targets = filter
        .parse()
        .map_err(|err| anyhow::anyhow!("invalid log filter {filter:?}: {err}"))?;
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false),
        )
        .with(targets)
        .try_init()?;
    Ok(())
}
