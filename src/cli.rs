//! The command line: `serve` runs the daemon, `mcp` serves one session over stdio for an MCP
//! client that starts toold as its `command` (stdout is the protocol, so logs stay on
//! stderr), `settings` prints the effective settings after
//! the file, the environment and the flags have been applied. Errors are printed once, here.
//!
//! The client subcommands (`sessions`, `tools`, `call`, `tail`, `approvals`, `audit`, `cp`,
//! `snapshot`, `fork`: `crate::client`) take `--url`/`TOOLD_URL` and `--token`/`TOOLD_TOKEN`
//! through clap's `env`, as `--config` does: they are the client's own flags, not the daemon's settings, so `config` (which reads
//! the daemon's `TOOLD_*` environment) stays out of it and a broken settings file does not
//! stop a client. They (with `--ca-cert` and `-o/--output`) are global, declared once on
//! [`Cli`]: `toold --url U sessions` and `toold sessions --url U` are the same command (the
//! daemon's subcommands accept and ignore them). Their exit codes are the client's
//! ([`EXIT_CODES`]: 0 done, 1 tool failed, 2 usage, 3 auth, 4 unreachable, 5 certificate);
//! clap's own usage errors exit 2 as well.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::client::{
    ApprovalDecision, AuditRequest, ClientCommand, Connection, Output, TailRequest,
};
use crate::config::{McpFlags, PermissionLevel, ServerFlags, Settings};
use crate::tools::SandboxMode;

/// The client subcommands' exit codes, as `--help` shows them (`crate::client::ExitStatus`).
pub const EXIT_CODES: &str = "\
Client exit codes (sessions, tools, call, tail, approvals, audit, cp, snapshot, fork):
  0  done
  1  the tool failed, or the API refused the request (unknown session, approval gone)
  2  usage: a malformed argument, or a request the API calls invalid
  3  auth: the token was refused (401/403)
  4  unreachable: nothing answers at --url, or the connection was lost
  5  certificate: an https:// daemon answered with a certificate this client does not
     trust (self-signed or of a private CA: --ca-cert FILE; another host name; expired)";

#[derive(Debug, Parser)]
#[command(
    name = "toold",
    version,
    about = "An LLM agent's tool system as a network service",
    after_help = EXIT_CODES
)]
pub struct Cli {
    /// Settings file (TOML).
    #[arg(long, global = true, env = "TOOLD_CONFIG")]
    pub config: Option<PathBuf>,

    #[command(flatten)]
    connect: ConnectArgs,

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
    #[command(flatten)]
    Client(ClientSubcommand),
}

/// The terminal client's subcommands (`crate::client`).
#[derive(Debug, Subcommand)]
pub enum ClientSubcommand {
    /// List the sessions (client).
    #[command(after_help = EXIT_CODES)]
    Sessions,
    /// List the built-in tools, or their definitions in a provider's format (client).
    #[command(after_help = EXIT_CODES)]
    Tools(ToolsArgs),
    /// Run one tool call and print its output; exit 1 if it failed (client).
    #[command(after_help = EXIT_CODES)]
    Call(CallArgs),
    /// Follow the event stream, resuming after a dropped connection (client).
    #[command(after_help = EXIT_CODES)]
    Tail(TailArgs),
    /// List pending approvals, or allow or deny one (client).
    #[command(after_help = EXIT_CODES)]
    Approvals(ApprovalsArgs),
    /// Read the audit log across sessions, newest first: table, json or csv (client).
    #[command(after_help = EXIT_CODES)]
    Audit(AuditArgs),
    /// Copy a directory or file into a session's workspace or out of it (client).
    #[command(after_help = EXIT_CODES)]
    Cp(CpArgs),
    /// Freeze a session's filesystem; print the snapshot's id (client).
    #[command(after_help = EXIT_CODES)]
    Snapshot(SnapshotArgs),
    /// Snapshot a session and start N sessions from it; print their ids (client).
    #[command(after_help = EXIT_CODES)]
    Fork(ForkArgs),
}

/// Where the daemon is and how to print, for the client subcommands: global, so they may
/// come before or after the subcommand.
#[derive(Debug, Args)]
pub struct ConnectArgs {
    /// The daemon's base URL.
    #[arg(
        long,
        global = true,
        env = "TOOLD_URL",
        default_value = crate::client::DEFAULT_URL,
        help_heading = "Client options"
    )]
    url: String,
    /// The bearer token.
    #[arg(
        long,
        global = true,
        env = "TOOLD_TOKEN",
        hide_env_values = true,
        help_heading = "Client options"
    )]
    token: Option<String>,
    /// A PEM file of CA certificates to trust for an https:// URL (a daemon serving a
    /// certificate of a private CA), besides the built-in roots.
    #[arg(
        long = "ca-cert",
        global = true,
        env = "TOOLD_CA_CERT",
        help_heading = "Client options"
    )]
    ca_certificate: Option<PathBuf>,
    /// `text` or `table` (tab-separated columns under a header; tail: one line per event),
    /// `json` (the API's JSON; tail: NDJSON, the server's event JSON), or `csv` (audit only:
    /// the export's CSV).
    #[arg(
        short = 'o',
        long = "output",
        global = true,
        default_value = "text",
        value_parser = ["text", "table", "json", "csv"],
        help_heading = "Client options"
    )]
    output: String,
}

impl ConnectArgs {
    fn connection(self) -> (Connection, Output) {
        let output = match self.output.as_str() {
            "json" => Output::Json,
            "csv" => Output::Csv,
            _ => Output::Text,
        };
        let connection = Connection {
            url: self.url,
            token: self.token,
            ca_certificate: self.ca_certificate,
        };
        (connection, output)
    }
}

#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// Print definitions as JSON in this format: anthropic, openai, openai_chat, mcp, toold.
    #[arg(long)]
    format: Option<String>,
    /// The session whose pool to list with --format (default: a session of its own).
    #[arg(long)]
    session: Option<String>,
}

#[derive(Debug, Args)]
pub struct CallArgs {
    /// The tool's name.
    tool: String,
    /// The tool's input, a JSON object.
    input: String,
    /// The session to run in (default: a session of its own, closed after the call).
    #[arg(long)]
    session: Option<String>,
}

#[derive(Debug, Args)]
pub struct TailArgs {
    /// Only this session's events.
    #[arg(long)]
    session: Option<String>,
    /// Only this tool's events.
    #[arg(long)]
    tool: Option<String>,
    /// Only events of this type (e.g. tool:post).
    #[arg(long = "type")]
    event_type: Option<String>,
    /// Replay the stored events after this seq first.
    #[arg(long)]
    since_seq: Option<u64>,
}

#[derive(Debug, Args)]
pub struct ApprovalsArgs {
    /// Only this session (default: every open session).
    #[arg(long, global = true)]
    session: Option<String>,
    #[command(subcommand)]
    action: Option<ApprovalAction>,
}

#[derive(Debug, Subcommand)]
pub enum ApprovalAction {
    /// Let the waiting call run.
    Allow { id: String },
    /// Refuse the waiting call.
    Deny { id: String },
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Only this session's calls.
    #[arg(long)]
    session: Option<String>,
    /// Only this batch's calls.
    #[arg(long)]
    batch: Option<String>,
    /// Only calls run by this principal.
    #[arg(long)]
    principal: Option<String>,
    /// Only calls of this tool (resolved or requested name).
    #[arg(long)]
    tool: Option<String>,
    /// allowed or denied.
    #[arg(long)]
    decision: Option<String>,
    /// Who decided: mode, rule, hook, approver, timeout.
    #[arg(long)]
    decided_by: Option<String>,
    /// Only failed calls of this kind (permission_denied, timeout, ...).
    #[arg(long)]
    error_kind: Option<String>,
    /// Only failed calls.
    #[arg(long)]
    errors: bool,
    /// Calls started since: a duration back from now (24h, 7d) or an RFC 3339 time.
    #[arg(long)]
    since: Option<String>,
    /// Calls started before: a duration back from now or an RFC 3339 time.
    #[arg(long)]
    until: Option<String>,
    /// Only calls of this trace.
    #[arg(long)]
    trace_id: Option<String>,
    /// Rows printed as a table or JSON, newest first (0: all); csv prints all.
    #[arg(long, default_value_t = 100)]
    limit: usize,
}

/// `toold cp SRC DST`: exactly one side is `SESSION:PATH`.
#[derive(Debug, Args)]
#[command(after_long_help = "\
Examples:
  toold cp ./src SESSION:src          the contents of ./src into the workspace's src
  toold cp SESSION:/workspace/out ./out   a directory's contents into ./out (created)
  toold cp ./run.sh SESSION:bin/      one file, its mode kept, as bin/run.sh
  toold cp SESSION:report.txt .       one file into the current directory
A path holding a colon is local when it starts with ./ or /.")]
pub struct CpArgs {
    /// A local path, or SESSION:PATH (SESSION: alone is the workspace).
    source: String,
    /// A local path, or SESSION:PATH.
    destination: String,
}

#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// The session to freeze.
    session: String,
    /// A name for the snapshot.
    #[arg(long)]
    name: Option<String>,
}

#[derive(Debug, Args)]
pub struct ForkArgs {
    /// The session to fork.
    session: String,
    /// How many sessions to start from the snapshot.
    #[arg(short = 'n', long = "count", value_parser = parse_fork_count)]
    count: u32,
    /// A name for the snapshot the fork takes.
    #[arg(long)]
    name: Option<String>,
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
    /// Kill this process group (SIGKILL) and exit instead of serving: how the daemon stops a
    /// command's whole group inside a gVisor sandbox, where its own signals do not reach.
    #[arg(long)]
    kill_group: Option<i32>,
    /// An environment's Landlock tier: each command enters this root (`chroot`), gives up
    /// every capability and is confined to reading beneath it.
    #[arg(long)]
    chroot: Option<PathBuf>,
    /// With `--chroot`: where commands may write (repeated).
    #[arg(long, requires = "chroot")]
    landlock_write: Vec<PathBuf>,
    /// With `--chroot`: TCP is not restricted (`network = "host"`).
    #[arg(long, requires = "chroot")]
    landlock_network: bool,
}

/// Flags of `toold mcp`: where its store lives, and its one session (over `[mcp]`).
#[derive(Debug, Args)]
pub struct McpArgs {
    /// Where the SQLite store, workspaces and spill files live [env: TOOLD_DATA_DIR];
    /// default: `$XDG_STATE_HOME/toold`, else `~/.local/state/toold` (not the project).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The session's working directory (allowed as a root); default: `[mcp]
    /// working_directory`, else the directory toold mcp was started in.
    #[arg(long)]
    working_directory: Option<PathBuf>,
    /// The session's permission mode: read_only, workspace_write or danger_full_access;
    /// default: `[mcp] permission_mode`.
    #[arg(long, value_parser = parse_permission_mode)]
    permission_mode: Option<PermissionLevel>,
    /// A root session working directories may lie under; repeatable [env: TOOLD_ALLOWED_ROOTS].
    #[arg(long = "allowed-root")]
    allowed_roots: Vec<PathBuf>,
    /// The sandbox bash runs in: auto, bwrap, landlock or off [env: TOOLD_SANDBOX].
    #[arg(long, value_parser = parse_sandbox_mode)]
    sandbox: Option<SandboxMode>,
}

fn parse_fork_count(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(count) if count >= 1 => Ok(count),
        _ => Err(format!(
            "-n takes a count of sessions, 1 or more, got \"{text}\""
        )),
    }
}

fn parse_sandbox_mode(text: &str) -> Result<SandboxMode, String> {
    text.parse()
}

fn parse_permission_mode(text: &str) -> Result<PermissionLevel, String> {
    text.parse().map_err(|err| format!("{err}"))
}

impl McpArgs {
    /// Applies the flags; a relative working directory is taken from where toold was started.
    fn apply(self, settings: &mut Settings) -> anyhow::Result<()> {
        // Not `./toold-data`: that would land in the project the client started us in.
        let daemons_default = crate::config::ServerSettings::default().data_dir;
        if self.data_dir.is_none()
            && settings.server.data_dir == daemons_default
            && let Some(dir) = crate::config::stdio_state_dir()
        {
            settings.server.data_dir = dir;
        }
        ServerFlags {
            data_dir: self.data_dir,
            allowed_roots: self.allowed_roots,
            ..ServerFlags::default()
        }
        .apply(&mut settings.server);
        if let Some(mode) = self.sandbox {
            settings.sandbox.mode = mode;
        }
        let working_directory = self
            .working_directory
            .map(|dir| std::path::absolute(&dir))
            .transpose()?;
        // The MCP client's working directory is the project: the workspace unless named.
        let working_directory = match working_directory {
            None if settings.mcp.working_directory.as_os_str().is_empty() => {
                Some(std::env::current_dir()?)
            }
            named => named,
        };
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
    /// PEM certificate chain: serve HTTPS and gRPC over TLS (with --tls-key; reloaded on
    /// SIGHUP) [env: TOOLD_TLS_CERT].
    #[arg(long)]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert [env: TOOLD_TLS_KEY].
    #[arg(long)]
    tls_key: Option<PathBuf>,
    /// The sandbox bash runs in: auto (bubblewrap, else landlock), bwrap, landlock or off
    /// [env: TOOLD_SANDBOX].
    #[arg(long, value_parser = parse_sandbox_mode)]
    sandbox: Option<SandboxMode>,
}

impl ServeArgs {
    /// Applies the flags over `settings`.
    fn apply(self, settings: &mut Settings) {
        if let Some(mode) = self.sandbox {
            settings.sandbox.mode = mode;
        }
        self.flags().apply(&mut settings.server);
    }

    fn flags(self) -> ServerFlags {
        ServerFlags {
            listen: self.listen,
            data_dir: self.data_dir,
            database_url: self.database_url,
            allowed_roots: self.allowed_roots,
            auth_tokens: self.auth_tokens,
            tls_cert: self.tls_cert,
            tls_key: self.tls_key,
        }
    }
}

/// Runs the command line; errors are printed once, here at the edge.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Client(subcommand) = cli.command {
        let command = client_command(subcommand);
        let (connection, output) = cli.connect.connection();
        return ExitCode::from(crate::client::run(connection, output, command) as u8);
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("toold: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// A client subcommand as the client takes it.
fn client_command(subcommand: ClientSubcommand) -> ClientCommand {
    match subcommand {
        ClientSubcommand::Sessions => ClientCommand::Sessions,
        ClientSubcommand::Tools(args) => ClientCommand::Tools {
            format: args.format,
            session: args.session,
        },
        ClientSubcommand::Call(args) => ClientCommand::Call {
            tool: args.tool,
            input: args.input,
            session: args.session,
        },
        ClientSubcommand::Tail(args) => ClientCommand::Tail(TailRequest {
            session: args.session,
            tool: args.tool,
            event_type: args.event_type,
            since_seq: args.since_seq,
        }),
        ClientSubcommand::Approvals(args) => {
            let decision = args.action.map(|action| match action {
                ApprovalAction::Allow { id } => (ApprovalDecision::Allow, id),
                ApprovalAction::Deny { id } => (ApprovalDecision::Deny, id),
            });
            ClientCommand::Approvals {
                session: args.session,
                decision,
            }
        }
        ClientSubcommand::Audit(args) => ClientCommand::Audit(AuditRequest {
            session: args.session,
            batch_id: args.batch,
            principal: args.principal,
            tool: args.tool,
            decision: args.decision,
            decided_by: args.decided_by,
            error_kind: args.error_kind,
            errors_only: args.errors,
            since: args.since,
            until: args.until,
            trace_id: args.trace_id,
            limit: args.limit,
        }),
        ClientSubcommand::Cp(args) => ClientCommand::Copy {
            source: args.source,
            destination: args.destination,
        },
        ClientSubcommand::Snapshot(args) => ClientCommand::Snapshot {
            session: args.session,
            name: args.name,
        },
        ClientSubcommand::Fork(args) => ClientCommand::Fork {
            session: args.session,
            count: args.count,
            name: args.name,
        },
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let config = cli.config;
    let load = || Settings::load(config.as_deref(), |name| std::env::var(name).ok());
    match cli.command {
        Command::SandboxSpawner(args) => {
            // No settings, no logs, no runtime: it only forks commands for its session (whose
            // id is on its command line for process listings).
            match args.kill_group {
                Some(group) => crate::tools::kill_group_inside(group)?,
                None => {
                    let chroot = args.chroot.map(|root| crate::tools::SpawnerChroot {
                        root,
                        writable: args.landlock_write,
                        network: args.landlock_network,
                    });
                    crate::tools::serve_spawner(args.control_fd, &args.limits, chroot)?
                }
            }
        }
        Command::Serve(args) => {
            let mut settings = load()?;
            args.apply(&mut settings);
            // While the process has one thread: sessions' views mount in a namespace of its own.
            crate::server::enter_private_mounts();
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            let traces = init_logs_and_traces(&runtime, &settings)?;
            let served = runtime.block_on(crate::server::run(settings));
            // After the drain: the spans of the last batches are flushed before exit.
            traces.shutdown();
            served?;
        }
        Command::Mcp(args) => {
            let mut settings = load()?;
            args.apply(&mut settings)?;
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            let traces = init_logs_and_traces(&runtime, &settings)?;
            let served = runtime.block_on(crate::server::run_mcp_stdio(settings));
            traces.shutdown();
            // A blocking read of stdin (when it is not a pipe) cannot be cancelled; after a
            // signal it must not hold the exit.
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
            served?;
        }
        Command::Settings(args) => {
            let mut settings = load()?;
            args.apply(&mut settings);
            println!("{}", serde_json::to_string_pretty(&settings)?);
        }
        // Handled in `main`, before any settings are read.
        Command::Client(_) => {}
    }
    Ok(())
}

/// Structured logs on stderr, filtered by `[server] log`, and the OTLP trace exporter when
/// `[telemetry]` names an endpoint (built inside `runtime`: its gRPC client lives there).
fn init_logs_and_traces(
    runtime: &tokio::runtime::Runtime,
    settings: &Settings,
) -> anyhow::Result<crate::telemetry::traces::TracesGuard> {
    let _entered = runtime.enter();
    Ok(crate::telemetry::traces::init(
        &settings.server.log,
        &settings.telemetry,
    )?)
}
