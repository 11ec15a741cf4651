//! [`ProviderHub`]: the providers connected to this daemon, their connections, and the calls
//! in flight between toold and them. In memory: a provider that the daemon loses (restart,
//! dropped stream) connects again.
//!
//! A connection is a channel of [`Outbound`] messages the door drains onto its wire (a gRPC
//! stream, an SSE stream) plus the [`ProviderConnection`] handle the door holds: dropping it
//! disconnects, which fails the connection's calls in flight with an error naming the
//! provider. Answers (progress, results) come back through [`ProviderHub::progress`] and
//! [`ProviderHub::result`], keyed by invocation id and checked against the connection.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::AGENT_PROVIDER;
use super::children::{ChildSession, ChildSessions};
use super::declare::{self, Refusal, RefusalKind, Registration, ToolDeclaration};
use super::tool::AgentTool;
use crate::permission::Principal;
use crate::registry::{RegisteredTool, ToolSource};
use crate::tool::{ErrorKind, ToolContext, ToolOutput};

/// A message toold sends a provider's connection.
#[derive(Clone, Debug, PartialEq)]
pub enum Outbound {
    Invoke(Invocation),
    Cancel {
        invocation_id: String,
        reason: String,
    },
}

/// One call for a provider to run.
#[derive(Clone, Debug, PartialEq)]
pub struct Invocation {
    pub invocation_id: String,
    pub session_id: String,
    pub call_id: String,
    /// The provider's own tool name.
    pub tool: String,
    pub input: Value,
    pub deadline_unix_ms: u64,
    pub child_session: Option<ChildSession>,
    pub traceparent: Option<String>,
}

/// Which wire a connection uses (shown in listings).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    Grpc,
    Http,
}

/// A registered connection, as its door holds it. Dropping it disconnects.
pub struct ProviderConnection {
    pub id: String,
    pub provider: String,
    /// The full names of the provider's tools.
    pub tools: Vec<String>,
    /// What toold sends the provider; the door forwards it onto its wire.
    pub outbound: mpsc::UnboundedReceiver<Outbound>,
    hub: Weak<ProviderHub>,
}

impl Drop for ProviderConnection {
    fn drop(&mut self) {
        if let Some(hub) = self.hub.upgrade() {
            hub.disconnect(&self.id);
        }
    }
}

/// A connected provider as `GET /v1/providers` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProviderStatus {
    pub name: String,
    pub principal: String,
    pub global: bool,
    pub tools: Vec<String>,
    pub connections: Vec<ConnectionStatus>,
}

/// One connection of a provider.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConnectionStatus {
    pub connection_id: String,
    pub transport: Transport,
    /// Calls sent and not answered yet.
    pub in_flight: u64,
    /// Calls sent since it connected.
    pub invoked: u64,
}

/// What a call in flight waits for.
enum Answer {
    Result {
        output: String,
        is_error: bool,
    },
    /// The connection went away first.
    Dropped,
}

struct Pending {
    connection_id: String,
    progress: crate::tool::ProgressSink,
    reply: oneshot::Sender<Answer>,
}

struct Connection {
    id: String,
    transport: Transport,
    sender: mpsc::UnboundedSender<Outbound>,
    in_flight: u64,
    invoked: u64,
}

struct Provider {
    principal: Principal,
    global: bool,
    declared: Vec<ToolDeclaration>,
    tools: Vec<Arc<RegisteredTool>>,
    connections: Vec<Connection>,
}

#[derive(Default)]
struct State {
    providers: BTreeMap<String, Provider>,
    pending: HashMap<String, Pending>,
}

/// The providers connected to this daemon (see the module header).
pub struct ProviderHub {
    /// Names (and aliases) a provided tool may not take.
    builtins: BTreeSet<String>,
    state: Mutex<State>,
    /// Bumped whenever a provider connects or leaves: pools assembled before are stale.
    generation: AtomicU64,
    /// Sees each such change (the MCP door tells its clients their tool list changed).
    changed: tokio::sync::watch::Sender<u64>,
    /// The built-in `agent` tool, offered while the `agent` provider is connected.
    agent: Arc<RegisteredTool>,
    children: Mutex<Option<Weak<dyn ChildSessions>>>,
    me: Weak<ProviderHub>,
}

impl ProviderHub {
    /// A hub whose providers may not take the names in `builtins`.
    pub fn new(builtins: impl IntoIterator<Item = String>) -> Arc<ProviderHub> {
        Arc::new_cyclic(|me: &Weak<ProviderHub>| {
            let agent =
                RegisteredTool::new(Arc::new(AgentTool::new(me.clone())), ToolSource::External)
                    .expect("the agent tool's spec is valid");
            ProviderHub {
                builtins: builtins.into_iter().collect(),
                state: Mutex::default(),
                generation: AtomicU64::new(0),
                changed: tokio::sync::watch::Sender::new(0),
                agent: Arc::new(agent),
                children: Mutex::new(None),
                me: me.clone(),
            }
        })
    }

    /// Where the `agent` tool gets its child sessions; called once by the server wiring.
    pub fn set_child_sessions(&self, children: Weak<dyn ChildSessions>) {
        *lock(&self.children) = Some(children);
    }

    pub(super) fn child_sessions(&self) -> Option<Arc<dyn ChildSessions>> {
        lock(&self.children).as_ref().and_then(Weak::upgrade)
    }

    /// Registers a connection of `registration` by `principal`, or says why not.
    pub fn connect(
        &self,
        principal: &Principal,
        registration: Registration,
        transport: Transport,
    ) -> Result<ProviderConnection, Refusal> {
        declare::check(&registration, principal, &self.builtins)?;
        let name = registration.provider.clone();
        let mut state = self.lock();
        if let Some(held) = state.providers.get(&name) {
            if held.principal.name != principal.name {
                return Err(Refusal::new(
                    RefusalKind::Held,
                    format!(
                        "provider name \"{name}\" is held by another principal while it has a connection"
                    ),
                ));
            }
            if held.declared != registration.tools || held.global != registration.global {
                return Err(Refusal::new(
                    RefusalKind::Held,
                    format!(
                        "provider \"{name}\" is connected with other tools or another `global`; a further connection must declare the same ones"
                    ),
                ));
            }
        } else {
            let tools = registration
                .tools
                .iter()
                .filter(|tool| !declare::is_agent_executor(&name, &tool.name))
                .map(|tool| declare::build_tool(&self.me, &name, tool))
                .collect::<Result<Vec<_>, _>>()?;
            state.providers.insert(
                name.clone(),
                Provider {
                    principal: principal.clone(),
                    global: registration.global,
                    declared: registration.tools,
                    tools,
                    connections: Vec::new(),
                },
            );
        }
        // Present: found held above, or inserted just now, under the same lock.
        let provider = state.providers.get_mut(&name).expect("inserted above");
        let (sender, outbound) = mpsc::unbounded_channel();
        let id = format!("conn_{}", uuid::Uuid::now_v7().simple());
        provider.connections.push(Connection {
            id: id.clone(),
            transport,
            sender,
            in_flight: 0,
            invoked: 0,
        });
        let mut tools: Vec<String> = provider.tools.iter().map(|t| t.name().to_owned()).collect();
        if name == AGENT_PROVIDER {
            tools.push(AGENT_PROVIDER.to_owned());
        }
        drop(state);
        self.bump();
        tracing::info!(provider = %name, connection = %id, principal = %principal, "provider connected");
        Ok(ProviderConnection {
            id,
            provider: name,
            tools,
            outbound,
            hub: self.me.clone(),
        })
    }

    /// Ends connection `connection_id` (its handle dropped, or `DELETE`d): its calls in flight
    /// fail naming the provider; the provider leaves with its last connection. Whether it was
    /// connected.
    pub fn disconnect(&self, connection_id: &str) -> bool {
        let mut state = self.lock();
        let Some((name, provider)) = state
            .providers
            .iter_mut()
            .find(|(_, p)| p.connections.iter().any(|c| c.id == connection_id))
        else {
            return false;
        };
        let name = name.clone();
        provider.connections.retain(|c| c.id != connection_id);
        if provider.connections.is_empty() {
            state.providers.remove(&name);
        }
        let dropped: Vec<String> = state
            .pending
            .iter()
            .filter(|(_, p)| p.connection_id == connection_id)
            .map(|(id, _)| id.clone())
            .collect();
        for id in dropped {
            if let Some(pending) = state.pending.remove(&id) {
                let _ = pending.reply.send(Answer::Dropped);
            }
        }
        drop(state);
        self.bump();
        tracing::info!(provider = %name, connection = %connection_id, "provider connection ended");
        true
    }

    /// The principal that holds connection `connection_id`'s provider, if it is connected.
    pub fn connection_owner(&self, connection_id: &str) -> Option<Principal> {
        self.lock()
            .providers
            .values()
            .find(|p| p.connections.iter().any(|c| c.id == connection_id))
            .map(|p| p.principal.clone())
    }

    /// A progress report of invocation `invocation_id` from `connection_id`; ignored (with a
    /// log line) when that connection has no such call in flight.
    pub fn progress(&self, connection_id: &str, invocation_id: &str, data: Value) {
        let sink = self
            .lock()
            .pending
            .get(invocation_id)
            .filter(|pending| pending.connection_id == connection_id)
            .map(|pending| pending.progress.clone());
        // Reported outside the lock: publishing is the event bus's business.
        match sink {
            Some(sink) => sink.report(data),
            None => tracing::info!(
                connection = %connection_id,
                invocation = %invocation_id,
                "progress for no call in flight ignored"
            ),
        }
    }

    /// The result of invocation `invocation_id` from `connection_id`; ignored (with a log
    /// line) when that connection has no such call in flight. Whether it was taken.
    pub fn result(
        &self,
        connection_id: &str,
        invocation_id: &str,
        output: String,
        is_error: bool,
    ) -> bool {
        let mut state = self.lock();
        let ours = state
            .pending
            .get(invocation_id)
            .is_some_and(|p| p.connection_id == connection_id);
        if !ours {
            tracing::info!(connection = %connection_id, invocation = %invocation_id, "result for no call in flight ignored");
            return false;
        }
        // Present: checked just above, under the same lock.
        let pending = state.pending.remove(invocation_id).expect("checked above");
        let _ = pending.reply.send(Answer::Result { output, is_error });
        true
    }

    /// A number that changes whenever a provider connects or leaves.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Sees a change whenever a provider connects or leaves.
    pub fn watch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn bump(&self) {
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        self.changed.send_replace(generation);
    }

    /// The provided tools a session of `owner` that named `named` sees now: those of the
    /// global providers, and of the named ones registered by `owner` or by an admin; plus
    /// the `agent` tool while the `agent` provider is connected and visible under the same
    /// rule (or global).
    pub fn tools(&self, owner: Option<&str>, named: &[String]) -> Vec<Arc<RegisteredTool>> {
        let state = self.lock();
        if state.providers.is_empty() {
            return Vec::new();
        }
        let serves = |name: &str, provider: &Provider| {
            provider.global
                || (named.iter().any(|n| n == name)
                    && (provider.principal.is_admin()
                        || owner.is_some_and(|o| *o == *provider.principal.name)))
        };
        let agent_serves = |name: &str, provider: &Provider| {
            provider.global
                || provider.principal.is_admin()
                || owner.is_some_and(|o| *o == *provider.principal.name)
                || serves(name, provider)
        };
        let mut tools = Vec::new();
        for (name, provider) in &state.providers {
            if serves(name, provider) {
                tools.extend(provider.tools.iter().cloned());
            }
            if name == AGENT_PROVIDER && agent_serves(name, provider) {
                tools.push(self.agent.clone());
            }
        }
        tools
    }

    /// The connected providers `caller` may see (all for an admin or observer, its own for an
    /// agent), by name.
    pub fn status(&self, caller: &Principal) -> Vec<ProviderStatus> {
        let sees_all = caller.role != crate::permission::Role::Agent;
        self.lock()
            .providers
            .iter()
            .filter(|(_, p)| sees_all || p.principal.name == caller.name)
            .map(|(name, p)| {
                let mut tools: Vec<String> = p.tools.iter().map(|t| t.name().to_owned()).collect();
                if name == AGENT_PROVIDER {
                    tools.push(AGENT_PROVIDER.to_owned());
                }
                ProviderStatus {
                    name: name.clone(),
                    principal: p.principal.name.to_string(),
                    global: p.global,
                    tools,
                    connections: p
                        .connections
                        .iter()
                        .map(|c| ConnectionStatus {
                            connection_id: c.id.clone(),
                            transport: c.transport,
                            in_flight: c.in_flight,
                            invoked: c.invoked,
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// Runs `tool` of `provider` for the call `ctx` on its least busy connection and waits for
    /// its result; on `ctx.cancellation` sends `Cancel` and returns.
    pub(super) async fn invoke(
        &self,
        provider: &str,
        tool: &str,
        input: Value,
        ctx: &ToolContext,
        timeout: Option<Duration>,
        child_session: Option<ChildSession>,
    ) -> ToolOutput {
        let invocation_id = format!("inv_{}", uuid::Uuid::now_v7().simple());
        let deadline = SystemTime::now()
            + timeout.unwrap_or(Duration::from_millis(declare::DEFAULT_TIMEOUT_MS));
        let invocation = Invocation {
            invocation_id: invocation_id.clone(),
            session_id: ctx.session_id.to_string(),
            call_id: ctx.call_id.to_string(),
            tool: tool.to_owned(),
            input,
            deadline_unix_ms: deadline
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            child_session,
            traceparent: crate::tool::trace::current().map(|c| c.traceparent()),
        };
        let (reply, answer) = oneshot::channel();
        let Some((connection_id, sender)) =
            self.pick_connection(provider, &invocation_id, ctx, reply)
        else {
            return failure(
                provider,
                "is not connected (no connection left to run the call)",
            );
        };
        let _flight = InFlight {
            hub: self,
            provider,
            connection_id: &connection_id,
            invocation_id: &invocation_id,
        };
        if sender.send(Outbound::Invoke(invocation)).is_err() {
            return failure(
                provider,
                "closed its connection before the call could be sent",
            );
        }
        tokio::select! {
            answer = answer => match answer {
                Ok(Answer::Result { output, is_error: false }) => ToolOutput::text(output),
                Ok(Answer::Result { output, is_error: true }) => ToolOutput {
                    error_kind: Some(ErrorKind::Execution),
                    ..ToolOutput::failure(output)
                },
                Ok(Answer::Dropped) | Err(_) => failure(
                    provider,
                    "lost its connection while running the call; the call was not retried (it may have had effects)",
                ),
            },
            () = ctx.cancellation.cancelled() => {
                let _ = sender.send(Outbound::Cancel {
                    invocation_id: invocation_id.clone(),
                    reason: "cancelled by toold (timeout, interrupt, sibling abort or session close)".into(),
                });
                failure(provider, "was sent `Cancel`: the call was cancelled")
            }
        }
    }

    /// The least busy connection of `provider` (fewest calls in flight, then fewest sent),
    /// with invocation `invocation_id` counted on it and waiting for `reply`; `None` when the
    /// provider has no connection.
    fn pick_connection(
        &self,
        provider: &str,
        invocation_id: &str,
        ctx: &ToolContext,
        reply: oneshot::Sender<Answer>,
    ) -> Option<(String, mpsc::UnboundedSender<Outbound>)> {
        let mut state = self.lock();
        let connection = state
            .providers
            .get_mut(provider)?
            .connections
            .iter_mut()
            .min_by_key(|c| (c.in_flight, c.invoked))?;
        connection.in_flight += 1;
        connection.invoked += 1;
        let picked = (connection.id.clone(), connection.sender.clone());
        state.pending.insert(
            invocation_id.to_owned(),
            Pending {
                connection_id: picked.0.clone(),
                progress: ctx.progress.clone(),
                reply,
            },
        );
        Some(picked)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

/// A call in flight: when it ends (whichever way, the future dropped included) its pending
/// entry goes and its connection's count comes down.
struct InFlight<'a> {
    hub: &'a ProviderHub,
    provider: &'a str,
    connection_id: &'a str,
    invocation_id: &'a str,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut state = self.hub.lock();
        state.pending.remove(self.invocation_id);
        if let Some(connection) = state.providers.get_mut(self.provider).and_then(|p| {
            p.connections
                .iter_mut()
                .find(|c| c.id == self.connection_id)
        }) {
            connection.in_flight = connection.in_flight.saturating_sub(1);
        }
    }
}

/// A failed call, naming its provider.
pub(super) fn failure(provider: &str, problem: &str) -> ToolOutput {
    ToolOutput {
        error_kind: Some(ErrorKind::Execution),
        ..ToolOutput::failure(format!("provider \"{provider}\" {problem}"))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only whole entries are inserted or removed under these locks.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
