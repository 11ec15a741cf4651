//! The terminal client (DESIGN §9, "Client subcommands"; §12 for the transfers): `toold
//! sessions | tools | call | tail | approvals | audit | cp | snapshot | fork`, for a person at
//! a terminal, over the daemon's HTTP API. It knows the API only as JSON on the wire: no module of the daemon is imported, so the client cannot
//! drift into calling the core directly, and the wire is what it tests.
//!
//! Exit codes ([`ExitStatus`]): 0 done, 1 the tool failed (or the API refused the request:
//! an unknown session, a pending approval that is gone), 2 usage (a malformed JSON argument,
//! a request the API calls invalid), 3 auth (401/403), 4 unreachable (nothing listening, or
//! the connection lost before an answer), 5 certificate (an `https://` daemon answered with a
//! certificate this client refuses: self-signed or of an unknown CA, for another name,
//! expired; `--ca-cert` trusts a private CA). A certificate is not "unreachable": something
//! answered, and retrying will not help, so `tail` gives up at once instead of retrying.
//!
//! Decisions where the issue is silent:
//! - `call` without `--session` runs in a session of its own, created for the call and closed
//!   after it (its id is printed on stderr, so `toold tail --session` and `toold approvals`
//!   can follow it). HTTP has no "caller's default session" (that is the MCP door's), and a
//!   session left behind by every call would pile up. The session is interactive: an `ask`
//!   rule waits for `toold approvals allow|deny ID` (or the approval timeout) instead of
//!   failing at once, since a person is the one calling. Ctrl-C interrupts that session, so
//!   the call is cancelled (exit 1) and the session still closed.
//! - `call` prints the tool's output on stdout whether it failed or not (an error's output is
//!   the tool's message); a failure adds one line on stderr naming the error kind and exits 1.
//!   An offloaded output is printed whole, paged from `GET /v1/results/{id}`.
//! - `tools` lists the built-in catalogue (`GET /v1/tools`); `--format F` prints the
//!   definitions in that provider's format, which only a session knows (`--session`, or a
//!   session of its own as for `call`).
//! - `approvals` without `--session` looks through every open session the token may read (the
//!   API lists approvals per session); `allow|deny ID` finds the session holding `ID` the same
//!   way.
//! - `tail` resumes after a dropped connection (or a `lagged` notice) with `Last-Event-ID` set
//!   to the last seq it printed: the daemon replays from its store, so nothing is missed or
//!   printed twice. Before the first event there is no seq to resume from: give
//!   `--since-seq N` to make that gap impossible too. It keeps retrying (every 0.25 s, backing
//!   off to 5 s) once it has been connected; a first connection that fails exits 4.

mod audit;
mod listing;
mod progress;
mod run_call;
mod snapshots;
mod sse;
mod tail;
mod transfer;
mod wire;

use std::io::IsTerminal;

pub use audit::AuditRequest;
pub use wire::{ApiClient, ClientError};

/// The daemon's address when neither `--url` nor `TOOLD_URL` names one.
pub const DEFAULT_URL: &str = "http://127.0.0.1:7070";

/// How a client command ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    Done = 0,
    ToolFailed = 1,
    Usage = 2,
    Auth = 3,
    Unreachable = 4,
    Certificate = 5,
}

/// Where the daemon is and who is asking (`--url`/`TOOLD_URL`, `--token`/`TOOLD_TOKEN`), and
/// the CA certificates (PEM) to trust for an `https://` URL besides the system's
/// (`--ca-cert`/`TOOLD_CA_CERT`).
#[derive(Clone, Debug)]
pub struct Connection {
    pub url: String,
    pub token: Option<String>,
    pub ca_certificate: Option<std::path::PathBuf>,
}

/// `toold tail`'s choices.
#[derive(Clone, Debug, Default)]
pub struct TailRequest {
    pub session: Option<String>,
    pub tool: Option<String>,
    pub event_type: Option<String>,
    pub since_seq: Option<u64>,
}

/// `-o text|table|json|csv`: how the listings and `tail` print (`call` prints the tool's
/// output either way; `table` is `text`; `csv` is `audit`'s alone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Text,
    Json,
    Csv,
}

/// A client subcommand, as the command line parsed it.
#[derive(Clone, Debug)]
pub enum ClientCommand {
    Sessions,
    Tools {
        format: Option<String>,
        session: Option<String>,
    },
    Call {
        tool: String,
        input: String,
        session: Option<String>,
    },
    Tail(TailRequest),
    Approvals {
        session: Option<String>,
        decision: Option<(ApprovalDecision, String)>,
    },
    Audit(AuditRequest),
    Copy {
        source: String,
        destination: String,
    },
    Snapshot {
        session: String,
        name: Option<String>,
    },
    Fork {
        session: String,
        count: u32,
        name: Option<String>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalDecision {
    Allow,
    Deny,
}

impl ApprovalDecision {
    fn as_str(self) -> &'static str {
        match self {
            ApprovalDecision::Allow => "allow",
            ApprovalDecision::Deny => "deny",
        }
    }
}

/// Runs one client command to its end; errors are printed here (once, on stderr) and become
/// the exit status.
pub fn run(connection: Connection, output: Output, command: ClientCommand) -> ExitStatus {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("toold: cannot start the client's runtime: {err}");
            return ExitStatus::ToolFailed;
        }
    };
    match runtime.block_on(dispatch(connection, output, command)) {
        Ok(status) => status,
        Err(ClientError::Output(err)) if err.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitStatus::Done
        }
        Err(err) => {
            eprintln!("toold: {err}");
            err.exit_status()
        }
    }
}

async fn dispatch(
    connection: Connection,
    output: Output,
    command: ClientCommand,
) -> Result<ExitStatus, ClientError> {
    let client = ApiClient::new(&connection)?;
    let json = output == Output::Json;
    if output == Output::Csv && !matches!(command, ClientCommand::Audit(_)) {
        return Err(ClientError::Usage(
            "-o csv is for toold audit; the other commands print text or json".to_owned(),
        ));
    }
    match command {
        ClientCommand::Audit(request) => audit::audit(&client, &request, output).await,
        ClientCommand::Sessions => listing::sessions(&client, json).await,
        ClientCommand::Copy {
            source,
            destination,
        } => transfer::cp(&client, &source, &destination, output).await,
        ClientCommand::Snapshot { session, name } => {
            snapshots::snapshot(&client, &session, name.as_deref(), json).await
        }
        ClientCommand::Fork {
            session,
            count,
            name,
        } => snapshots::fork(&client, &session, count, name.as_deref(), json).await,
        ClientCommand::Tools { format, session } => {
            listing::tools(&client, format.as_deref(), session.as_deref(), json).await
        }
        ClientCommand::Call {
            tool,
            input,
            session,
        } => run_call::call(&client, &tool, &input, session.as_deref()).await,
        ClientCommand::Tail(request) => {
            let colour = std::io::stdout().is_terminal() && !json;
            tail::tail(&client, &request, json, colour).await
        }
        ClientCommand::Approvals { session, decision } => match decision {
            None => listing::approvals(&client, session.as_deref(), json).await,
            Some((decision, id)) => {
                listing::resolve(&client, session.as_deref(), decision, &id).await
            }
        },
    }
}
