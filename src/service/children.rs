//! Child sessions (DESIGN §11): the session the `agent` tool's provider runs a sub-agent in,
//! a child of the session whose batch called `agent`, and the token scoped to it.
//!
//! A child (`parent_session_id`, stored with the session's options and shown in its JSON):
//! - shares its parent's workspace (a different `working_directory` is refused);
//! - has a mode never wider than its parent's: the parent's when none is asked, and a wider
//!   `permission_mode` (or `tools.mode`) asked for is *refused*, not narrowed, so a caller
//!   learns it will not get what it asked; `interactive` and `network` likewise only if the
//!   parent has them; each such refusal is `forbidden` (403, as any widening);
//! - inherits its parent's session rules and tool filter (the server's apply to every
//!   session) and may add `deny` and `ask` rules and denied tools, never `allow` rules: an
//!   allow rule comes before the mode, so it could let a child do what its parent's mode
//!   forbids;
//! - belongs to its parent's principal, whoever asked for it, and is closed (its calls
//!   cancelled) when its parent closes; interrupting the parent interrupts its children;
//! - gets its parent's `providers` (and may name more: a provider's tools are checked like
//!   any other's); names its own `mcp_servers` (none are inherited: each would start its own
//!   instances).
//!
//! `[limits]` count a child as its principal's: a session under `sessions_per_principal`, its
//! batches under `concurrent_batches_per_principal` (so with a limit of 1 batch a sub-agent
//! cannot run one while its parent's batch waits for it), its requests under the rate.
//!
//! After a restart, a child opened for an `agent` call (`metadata.agent_call_id`) is closed:
//! its call and its token died with the process; so is a child whose parent is not open.
//!
//! Two ways to make one: the `agent` tool's execution asks [`ToolService::open_child`] (the
//! provider hub's `ChildSessions` port), which also mints a token; or a caller that may change
//! the parent sends `parent_session_id` in `POST /v1/sessions` (gRPC: `options_json`), and
//! uses its own token. The parent must be live on the daemon asked.
//!
//! The child token is 32 random bytes (hex, after `toold_child_`), held here only as its
//! SHA-256 digest with the principal it stands for: the parent's principal's name, role
//! `agent`, scoped to the child (`Principal::session_scope`; `access` enforces the scope for
//! every door). So the child's audit rows and events name the parent's principal, and an
//! admin's child token is no wider than an agent's. The gate looks every presented token up
//! here too (besides the configured ones) through [`SessionTokens::principal_for`], comparing
//! every digest in constant time; a token works only while its child is open, and only on the
//! daemon that made it (a fleet's other daemons do not know it: the `agent` provider calls
//! back into the daemon that invoked it).
//!
//! Events: a subscriber of a session also receives its children's (and their children's)
//! events, each with the child's own `session_id`: live ones through [`Children::is_below`],
//! replayed ones because the subscription's filter lists the children this daemon has opened
//! for the parent while running it (after a restart, those still open), kept until the parent
//! closes. A child token's subscriber sees its own child's events only (not a grandchild's:
//! the scope is one session).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use sha2::{Digest, Sha256};
use std::fmt::Write as _;

use super::sessions::CreateSessionRequest;
use super::{ServiceError, SessionInfo, ToolService};
use crate::permission::{Principal, Role, digests_equal};
use crate::provider::{ChildSession, ChildSessions};

/// The key of a child's `metadata` naming the `agent` call it was opened for.
const AGENT_CALL_ID: &str = "agent_call_id";

/// Which session is whose child, for closing, interrupting and relaying events.
#[derive(Default)]
pub(super) struct Children {
    /// Child → parent, kept until the parent closes.
    parent_of: RwLock<HashMap<String, String>>,
}

impl Children {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, String>> {
        // Only single inserts and removes happen under the write lock.
        self.parent_of.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, String>> {
        self.parent_of.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Records `child` as a child of `parent`.
    pub(super) fn adopt(&self, parent: &str, child: &str) {
        self.write().insert(child.to_owned(), parent.to_owned());
    }

    /// Whether `session` is a child (or a child's child, …) of `ancestor`.
    pub(super) fn is_below(&self, session: &str, ancestor: &str) -> bool {
        let parent_of = self.read();
        let mut current = session;
        // Bounded by the map's size: a cycle cannot be made (a parent exists before its child).
        for _ in 0..parent_of.len() {
            match parent_of.get(current) {
                Some(parent) if parent == ancestor => return true,
                Some(parent) => current = parent,
                None => return false,
            }
        }
        false
    }

    /// Every session below `ancestor` (children, theirs, …).
    pub(super) fn below(&self, ancestor: &str) -> Vec<String> {
        let parent_of = self.read();
        let mut found = vec![ancestor.to_owned()];
        let mut next = 0;
        while next < found.len() {
            let parent = found[next].clone();
            found.extend(
                parent_of
                    .iter()
                    .filter(|(_, p)| **p == parent)
                    .map(|(child, _)| child.clone()),
            );
            next += 1;
        }
        found.remove(0);
        found
    }

    /// The direct children of `parent`.
    fn of(&self, parent: &str) -> Vec<String> {
        self.read()
            .iter()
            .filter(|(_, p)| *p == parent)
            .map(|(child, _)| child.clone())
            .collect()
    }

    /// Forgets `parent`'s children (it has closed).
    fn forget(&self, parent: &str) {
        self.write().retain(|_, p| p != parent);
    }
}

/// The child sessions' tokens, as digests, and the scoped principal each stands for.
#[derive(Default)]
pub struct SessionTokens {
    /// Read on every request the gate admits (a read lock: requests do not wait on each other).
    tokens: RwLock<Vec<([u8; 32], Principal)>>,
}

impl SessionTokens {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<([u8; 32], Principal)>> {
        // Only single pushes and retains happen under the write lock.
        self.tokens.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<([u8; 32], Principal)>> {
        self.tokens.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The principal `presented` stands for, if it is an open child session's token. Every
    /// digest is compared in full, so timing tells nothing of which one (or which prefix)
    /// matched.
    pub fn principal_for(&self, presented: &str) -> Option<Principal> {
        let tokens = self.read();
        if tokens.is_empty() {
            return None;
        }
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        tokens
            .iter()
            .fold(None, |found, (known, principal)| {
                found.or(digests_equal(known, &digest).then_some(principal))
            })
            .cloned()
    }

    /// A fresh token for `principal` (scoped to a session, whose close revokes it). The
    /// service mints one per child; public so the gate's tests can too.
    pub fn mint(&self, principal: Principal) -> Result<String, ServiceError> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|err| {
            ServiceError::internal(format!("no randomness for a child session token: {err}"))
        })?;
        let token = secret
            .iter()
            .fold(String::from("toold_child_"), |mut text, byte| {
                // Writing to a `String` cannot fail.
                let _ = write!(text, "{byte:02x}");
                text
            });
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        self.write().push((digest, principal));
        Ok(token)
    }

    /// Revokes the token of session `session_id`, if it has one.
    fn revoke(&self, session_id: &str) {
        self.write()
            .retain(|(_, principal)| principal.session_scope.as_deref() != Some(session_id));
    }
}

impl ToolService {
    /// The child sessions' tokens, for the doors' gate.
    pub fn session_tokens(&self) -> Arc<SessionTokens> {
        self.session_tokens.clone()
    }

    /// Opens a child session of live session `parent_session_id` for call `call_id` of its
    /// `agent` tool, with a token scoped to it. No caller is checked: the parent's batch was.
    pub async fn open_child(
        &self,
        parent_session_id: &str,
        call_id: &str,
    ) -> Result<ChildSession, String> {
        self.open_child_session(parent_session_id, call_id)
            .await
            .map_err(|err| {
                format!(
                    "cannot open a child session of \"{parent_session_id}\": {}",
                    err.message
                )
            })
    }

    async fn open_child_session(
        &self,
        parent_session_id: &str,
        call_id: &str,
    ) -> Result<ChildSession, ServiceError> {
        let parent = self.session(parent_session_id)?;
        let request = CreateSessionRequest {
            parent_session_id: Some(parent_session_id.to_owned()),
            metadata: serde_json::json!({AGENT_CALL_ID: call_id}),
            interactive: parent.info.interactive,
            network: parent.info.network,
            ..CreateSessionRequest::default()
        };
        let request = child_request(&parent.info, request)?;
        let owner = parent.info.principal.clone();
        let name: Arc<str> = owner.as_deref().unwrap_or(Principal::LOCAL).into();
        let info = self.insert_session(request, owner, name.clone()).await?;
        let principal = Principal::new(name.clone(), Role::Agent).scoped_to(info.id.as_str());
        match self.session_tokens.mint(principal) {
            Ok(token) => Ok(ChildSession {
                session_id: info.id,
                token,
            }),
            Err(err) => {
                let _ = self.close_live(&info.id, name).await;
                Err(err)
            }
        }
    }

    /// Closes child session `child_session_id` (cancelling its running calls) once its
    /// `agent` call has ended; nothing when it is closed already (with its parent).
    pub async fn close_child(&self, child_session_id: &str) {
        let Ok(child) = self.session(child_session_id) else {
            return;
        };
        let actor: Arc<str> = child
            .info
            .principal
            .as_deref()
            .unwrap_or(Principal::LOCAL)
            .into();
        if let Err(err) = self.close_live(child_session_id, actor).await {
            tracing::warn!(session = child_session_id, error = %err, "closing a child session failed");
        }
    }

    /// After a restart: closes the children whose parent is not open here, and those opened
    /// for an `agent` call (the call and the child's token died with the process); how many.
    pub(super) async fn close_stranded_children(&self) -> Result<usize, ServiceError> {
        let stranded: Vec<(String, Arc<str>)> = {
            let live = self.live();
            live.values()
                .filter_map(|session| {
                    let parent = session.info.parent_session_id.as_ref()?;
                    let for_a_call = session.info.metadata.get(AGENT_CALL_ID).is_some();
                    (for_a_call || !live.contains_key(parent)).then(|| {
                        let actor = session
                            .info
                            .principal
                            .as_deref()
                            .unwrap_or(Principal::LOCAL);
                        (session.info.id.clone(), actor.into())
                    })
                })
                .collect()
        };
        let mut closed = 0;
        for (id, actor) in stranded {
            // Closed with its own parent, already, when that was stranded too.
            if self.live().contains_key(&id) {
                self.close_live(&id, actor).await?;
                closed += 1;
            }
        }
        Ok(closed)
    }

    /// Closes the children of `parent` (closing), and forgets them; revokes `parent`'s own
    /// token if it is a child.
    pub(super) async fn close_children(&self, parent: &str, actor: &Arc<str>) {
        self.session_tokens.revoke(parent);
        for child in self.children.of(parent) {
            if self.live().contains_key(&child) {
                // Boxed: closing recurses through the children's children.
                let closing = Box::pin(self.close_live(&child, actor.clone()));
                if let Err(err) = closing.await {
                    tracing::warn!(session = %child, error = %err, "closing a child session failed");
                }
            }
        }
        self.children.forget(parent);
    }

    /// Interrupts the live children (and theirs) of `parent`.
    pub(super) fn interrupt_children(&self, parent: &str) {
        let live = self.live();
        for child in self.children.below(parent) {
            if let Some(session) = live.get(&child) {
                session.state.interrupt();
            }
        }
    }
}

/// The provider hub's port: the `agent` tool's execution opens and closes its child here.
#[async_trait::async_trait]
impl ChildSessions for ToolService {
    async fn open_child(
        &self,
        parent_session_id: &str,
        call_id: &str,
    ) -> Result<ChildSession, String> {
        ToolService::open_child(self, parent_session_id, call_id).await
    }

    async fn close_child(&self, child_session_id: &str) {
        ToolService::close_child(self, child_session_id).await;
    }
}

/// `request` made a child of `parent`: see the module header for what it inherits and what is
/// refused.
pub(super) fn child_request(
    info: &SessionInfo,
    mut request: CreateSessionRequest,
) -> Result<CreateSessionRequest, ServiceError> {
    // Asking a child for more than its parent may give is forbidden (403), as any widening.
    let refuse = |what: String| {
        Err(ServiceError::forbidden(format!(
            "a child session of \"{}\" {what}",
            info.id
        )))
    };
    if let Some(dir) = &request.working_directory
        && dir != &info.working_directory
    {
        return refuse(format!(
            "shares its workspace \"{}\"; working_directory \"{}\" differs",
            info.working_directory.display(),
            dir.display()
        ));
    }
    let parent_mode = info.permission_mode;
    for (field, mode) in [
        ("permission_mode", request.permission_mode),
        ("tools.mode", request.tools.mode),
    ] {
        if let Some(mode) = mode
            && mode > parent_mode
        {
            return refuse(format!(
                "may not be wider than its parent: {field} \"{mode}\" is wider than the parent's \"{parent_mode}\""
            ));
        }
    }
    if !request.rules.allow.is_empty() {
        return refuse(format!(
            "may add deny and ask rules, not allow rules ({:?}): an allow rule could let it do what its parent's mode forbids",
            request.rules.allow
        ));
    }
    if request.interactive && !info.interactive {
        return refuse("may be interactive only if its parent is".to_owned());
    }
    if request.network && !info.network {
        return refuse("may ask for network access only if its parent has it".to_owned());
    }
    request.working_directory = Some(info.working_directory.clone());
    request.permission_mode = Some(request.permission_mode.unwrap_or(parent_mode));
    request.tools.mode = match (info.tools.mode, request.tools.mode) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let inherit = |theirs: &[String], ours: &mut Vec<String>| {
        let added = std::mem::take(ours);
        *ours = theirs.to_vec();
        ours.extend(added.into_iter().filter(|rule| !theirs.contains(rule)));
    };
    inherit(&info.tools.deny, &mut request.tools.deny);
    inherit(&info.rules.allow, &mut request.rules.allow);
    inherit(&info.rules.deny, &mut request.rules.deny);
    inherit(&info.rules.ask, &mut request.rules.ask);
    inherit(&info.providers, &mut request.providers);
    request.parent_session_id = Some(info.id.clone());
    Ok(request)
}

#[cfg(test)]
#[path = "children_tests.rs"]
mod tests;
