//! Tools provided from outside (DESIGN §11): a program connects (gRPC `ProvideTools`, HTTP
//! `/v1/providers`), declares tools, and toold dispatches calls of them to it through the same
//! pipeline as a built-in's. Core: no wire types here; the doors translate.
//!
//! - [`declare`]: what a provider declares and the checks a registration passes;
//!   [`hub`]: [`ProviderHub`], the connected providers, their connections and calls in flight;
//!   [`tool`]: [`ProvidedTool`] and the built-in `agent` tool; [`children`]: the port through
//!   which the `agent` tool gets a child session.
//!
//! Decisions where DESIGN is silent:
//! - **Names.** A provider name matches `^[A-Za-z0-9_-]+$`, contains no `__` and is not `mcp`
//!   (so `{provider}__{tool}` reads one way and never as an MCP bridge name). A full name must
//!   be a valid tool name (at most 64 characters). A declared description may be empty (a
//!   generated one names the tool and provider); a declaration needs at least one tool, except
//!   the `agent` provider's.
//! - **Defaults.** Unset flags fail closed: destructive, `danger_full_access`, interrupt
//!   `block`, not read-only, not parallel-safe; `max_result_size_chars` 30 000 (longer results
//!   are offloaded), `timeout_ms` 120 000. An `Invoke`'s deadline is now + that timeout; the
//!   dispatcher's timeout fires the cancellation, and the provider gets `Cancel`.
//! - **Who holds a name.** A provider name belongs to the principal whose connection
//!   registered it while any connection under it is connected; another principal is refused
//!   (ALREADY_EXISTS). A later connection of the same principal must declare the same tools and
//!   the same `global` (else refused, ALREADY_EXISTS): a pool never mixes two versions of a
//!   tool. Observers may not register; `global` is for admins.
//! - **Which sessions see a provider.** A session names providers in `providers` when it is
//!   created; naming one not connected yet is allowed (its tools appear when it connects, and
//!   go when it leaves). A named provider serves the session only when it was registered by
//!   the session's principal or by an admin: its calls carry the session's inputs, which
//!   another agent principal must not receive. A global provider serves every session.
//! - **The `agent` tool** is offered while the provider named `agent` is connected, to the
//!   sessions of its principal (every session when an admin registered it, or it is global),
//!   unless denied. Its declared tools other than `agent` are provided tools like any other's;
//!   a declared `agent` is taken as its executor of the built-in spec, never published as
//!   `agent__agent`. Without a [`ChildSessions`] port the call fails saying so.
//! - **Sharing calls.** The least busy connection (fewest calls in flight, then fewest sent)
//!   gets the next call. A connection that ends fails its calls in flight with an error naming
//!   the provider, never retried (the call may have had effects); with no connection left the
//!   call fails saying the provider is not connected.
//! - **Pools.** A provider connecting or leaving bumps [`ProviderHub::generation`], which the
//!   service's pool cache compares: the next batch's pool changes, never a running one's. A
//!   call resolved from a frozen pool whose provider left fails naming it.
//! - **Fleets.** A provider serves the daemon it connects to; a session another daemon runs
//!   does not see it.
//! - **Answers.** A result or progress for an invocation the connection has not in flight
//!   (unknown, answered, cancelled, another connection's) is ignored with a log line.

pub mod children;
pub mod declare;
pub mod hub;
pub mod tool;

pub use children::{ChildSession, ChildSessions};
pub use declare::{
    MAX_NAME_CHARS, Refusal, RefusalKind, Registration, ToolDeclaration, check_provider_name,
};
pub use hub::{
    ConnectionStatus, Invocation, Outbound, ProviderConnection, ProviderHub, ProviderStatus,
    Transport,
};
pub use tool::{AgentTool, ProvidedTool};

/// The provider that executes the built-in `agent` tool.
pub const AGENT_PROVIDER: &str = "agent";
/// The built-in tool the `agent` provider executes.
pub use crate::tool::AGENT_TOOL;

#[cfg(test)]
#[path = "hub_tests.rs"]
mod tests;
