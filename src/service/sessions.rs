//! Sessions: creating (with the workspace rules), listing, closing, and restoring the open
//! ones after a restart. A session belongs to the principal that created it (`principal`,
//! recorded in the store and shown in its JSON); see `access` for what that allows.
//!
//! A request's `metadata` is an object (null or absent: `{}`) and `output_schema` an object;
//! a `working_directory` that does not exist is `not_found`, one outside the allowed roots
//! `forbidden` (a relative one is `invalid`), so each answer says which is wrong.
//!
//! `from_snapshot`: a plain snapshot's layers become the lowers of a fresh workspace's view;
//! an environment session's snapshot brings that session's environment (image leased by
//! digest, pulled by digest when no longer cached) and its layers go over the image's root.
//! `environment` with `from_snapshot` is refused either way (400, naming which;
//! `service::environments`'s `environment_of`). A restored or adopted environment session is
//! mounted again over the layers `session_views` keeps.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::access::{Access, unknown_session};
use super::children::child_request;
use super::environments::{EnvironmentInfo, Prepared};
use super::{LiveSession, ServiceError, ToolService};
use crate::environment::EnvironmentRequest;
use crate::event::{EventDraft, EventType};
use crate::permission::{
    PermissionLevel, Principal, RuleContext, RuleSet, RuleSource, SessionRules,
};
use crate::registry::{DenySource, PoolDeny, PoolOptions};
use crate::session::{SessionConfig, SessionSnapshot, SessionState};
use crate::store::SessionRecord;

/// Permission rules a session adds to the server's (`Tool` or `Tool(specifier)`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionRuleTexts {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub ask: Vec<String>,
}

/// Which tools the session is offered.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolFilter {
    /// Tools (names or aliases) left out of the pool.
    pub deny: Vec<String>,
    /// Only tools whose least requirement fits this mode are offered (at most the session's).
    pub mode: Option<PermissionLevel>,
}

/// `POST /v1/sessions` (and gRPC `CreateSession`'s fields plus `options_json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CreateSessionRequest {
    /// Must lie under an allowed root; omitted: a fresh directory under the data directory.
    pub working_directory: Option<PathBuf>,
    pub permission_mode: Option<PermissionLevel>,
    pub rules: SessionRuleTexts,
    pub tools: ToolFilter,
    pub interactive: bool,
    /// Names of MCP servers from the server's settings.
    pub mcp_servers: Vec<String>,
    /// Names of tool providers whose tools the session gets (DESIGN §11); a provider not
    /// connected yet is allowed (its tools appear when it connects).
    pub providers: Vec<String>,
    pub metadata: Value,
    /// The schema `structured_output` validates against.
    pub output_schema: Option<Value>,
    /// Network access for the session's sandboxed shells; granted only where the server's
    /// `[sandbox] network` allows it (otherwise they have none, as without asking).
    pub network: bool,
    /// Makes the session a child of this one (see `children`).
    pub parent_session_id: Option<String>,
    /// Starts the session's filesystem as this snapshot (DESIGN §12): a fresh workspace whose
    /// view stacks the snapshot's layers (no `working_directory` with it).
    pub from_snapshot: Option<String>,
    /// Runs the session's tools in an image's filesystem (DESIGN §12; `environments`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<EnvironmentRequest>,
}

/// The key of a stored session's options under which its resolved environment is kept.
const RESOLVED_ENVIRONMENT: &str = "resolved_environment";

/// A session as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub id: String,
    pub working_directory: PathBuf,
    pub permission_mode: PermissionLevel,
    pub interactive: bool,
    /// The daemon (node id) that runs the session.
    pub owner: String,
    /// Where that daemon is reached (`http://host:port`), when known.
    pub owner_address: Option<String>,
    /// The principal the session belongs to (the one that created it); `null` for sessions
    /// created before principals were recorded.
    pub principal: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    pub closed: bool,
    pub rules: SessionRuleTexts,
    pub tools: ToolFilter,
    pub mcp_servers: Vec<String>,
    pub providers: Vec<String>,
    pub metadata: Value,
    /// The session asked for network access for its sandboxed shells.
    pub network: bool,
    /// The session this one is a child of (see `children`); absent for others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
    /// The snapshot the session's filesystem started as; absent for others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_snapshot: Option<String>,
    /// How the session's view was made from its snapshot: `cow` (nothing copied) or `full`;
    /// in the answer that created it only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy: Option<String>,
    /// Its environment (image, tier, limits), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<EnvironmentInfo>,
}

impl ToolService {
    /// Creates a session for `caller` (it belongs to it, or a child to its parent's principal);
    /// the working directory is checked against the allowed roots.
    pub async fn create_session(
        &self,
        caller: &Principal,
        request: CreateSessionRequest,
    ) -> Result<SessionInfo, ServiceError> {
        self.authorize_create(caller)?;
        if let Some(snapshot) = &request.from_snapshot {
            // Another agent's snapshot is not there; its layers must be this daemon's to mount.
            self.snapshot_layers(&caller.name, caller.role, snapshot)
                .await?;
        }
        let (request, principal) = match request.parent_session_id.clone() {
            Some(parent) => {
                let parent = self.session_for(caller, &parent, Access::Write)?;
                (
                    child_request(&parent.info, request)?,
                    parent.info.principal.clone(),
                )
            }
            None => (request, Some(caller.name.to_string())),
        };
        self.insert_session(request, principal, caller.name.clone())
            .await
    }

    /// Creates a session that belongs to `principal`, published as done by `actor`.
    pub(super) async fn insert_session(
        &self,
        mut request: CreateSessionRequest,
        principal: Option<String>,
        actor: Arc<str>,
    ) -> Result<SessionInfo, ServiceError> {
        // Taken first and held by the live session: a creation that fails gives it back. A
        // child counts as a session of its principal (its parent's).
        let owner: Arc<str> = principal
            .as_deref()
            .map_or_else(|| actor.clone(), Arc::from);
        let open = self.limits.sessions.acquire(&owner)?;
        self.bridge
            .check_names(&request.mcp_servers)
            .map_err(ServiceError::invalid)?;
        match &request.metadata {
            Value::Null => request.metadata = json!({}),
            Value::Object(_) => {}
            _ => return Err(ServiceError::invalid("metadata must be a JSON object")),
        }
        for name in &request.providers {
            crate::provider::check_provider_name(name)
                .map_err(|err| ServiceError::invalid(format!("providers: {err}")))?;
        }
        if let Some(schema) = &request.output_schema {
            if !schema.is_object() {
                return Err(ServiceError::invalid(
                    "output_schema must be a JSON object (a JSON Schema)",
                ));
            }
            jsonschema::validator_for(schema).map_err(|err| {
                ServiceError::invalid(format!("output_schema is not a valid JSON schema: {err}"))
            })?;
        }
        let id = format!("sess_{}", uuid::Uuid::now_v7().simple());
        if request.from_snapshot.is_some() && request.working_directory.is_some() {
            return Err(ServiceError::invalid(
                "from_snapshot starts a fresh workspace: give no working_directory with it",
            ));
        }
        let (snapshot_layers, prepared) = self.environment_of(&id, &actor, &request).await?;
        let mounted = match &prepared {
            Some(prepared) => {
                Some(self.mount_environment(&id, &prepared.info, &snapshot_layers)?)
            }
            None => None,
        };
        let working_directory = match &request.working_directory {
            _ if mounted.is_some() => mounted.as_ref().unwrap().working_directory.clone(),
            Some(dir) => self.allowed_directory(dir)?,
            None => {
                // Rules are checked before a fresh workspace is made for a refused request.
                let probe = self.settings.workspaces_dir.join(&id);
                self.session_rules(&probe, &request.rules)?;
                self.fresh_workspace(&id)?
            }
        };
        self.session_rules(&working_directory, &request.rules)?;
        let view = match (&request.from_snapshot, &mounted) {
            // The environment's view stacks the layers already (`mount_environment`).
            (Some(_), Some(mounted)) => Some((snapshot_layers, mounted.view.copy_kind())),
            (Some(_), None) => {
                let copy = self.open_view(&id, &working_directory, snapshot_layers.clone())?;
                Some((snapshot_layers, copy))
            }
            (None, _) => None,
        };
        let mut options = serde_json::to_value(&request)
            .map_err(|err| ServiceError::internal(err.to_string()))?;
        let (environment, lease) = match prepared {
            Some(Prepared { info, lease }) => (Some(info), lease),
            None => (None, None),
        };
        if let Some(info) = &environment {
            options[RESOLVED_ENVIRONMENT] = serde_json::to_value(info)
                .map_err(|err| ServiceError::internal(err.to_string()))?;
        }
        let record = SessionRecord {
            id: id.clone(),
            working_directory,
            permission_mode: request
                .permission_mode
                .unwrap_or(PermissionLevel::WorkspaceWrite),
            interactive: request.interactive,
            owner: self.settings.node_id.clone(),
            principal,
            created_at: SystemTime::now(),
            closed_at: None,
            options,
            state: json!({}),
        };
        self.store.insert_session(&record).await?;
        if let Some((lowers, _)) = &view {
            self.store.set_session_layers(&id, lowers).await?;
        }
        let live = self.go_live_with(
            &record,
            SessionSnapshot::default(),
            open,
            Some((lease, mounted)),
            &[],
        )?;
        self.bridge.wait_started(&id).await;
        self.events.publish(
            EventDraft::new(EventType::SessionStart, id.as_str())
                .actor(actor)
                .data(json!({
                    "working_directory": live.info.working_directory,
                    "environment": live.info.environment,
                })),
        );
        let mut info = live.info.clone();
        info.copy = view.map(|(_, copy)| match copy {
            crate::workspace::CopyKind::Cow => "cow".to_owned(),
            crate::workspace::CopyKind::Full => "full".to_owned(),
        });
        Ok(info)
    }

    /// Makes a stored session live (after create, or on restart). `open` is its place in
    /// its principal's session limit when create took one; a restored or adopted session
    /// takes one here, unrefused (it exists already). `layers`: the snapshot layers an
    /// environment session's root stacks over its image (the store's `session_layers`).
    pub(super) fn go_live(
        &self,
        record: &SessionRecord,
        snapshot: SessionSnapshot,
        open: Option<super::limits::LimitSlot>,
        layers: &[PathBuf],
    ) -> Result<Arc<LiveSession>, ServiceError> {
        self.go_live_with(record, snapshot, open, None, layers)
    }

    /// [`ToolService::go_live`] with the image lease creation took (`None`: take one here,
    /// for a restored or adopted session, and mount its environment over `layers`).
    fn go_live_with(
        &self,
        record: &SessionRecord,
        snapshot: SessionSnapshot,
        open: Option<super::limits::LimitSlot>,
        fresh: Option<(
            Option<crate::environment::ImageLease>,
            Option<super::environments::Mounted>,
        )>,
        layers: &[PathBuf],
    ) -> Result<Arc<LiveSession>, ServiceError> {
        let open = open.or_else(|| {
            let principal = record.principal.as_deref().unwrap_or_default();
            self.limits.sessions.count(principal)
        });
        let (request, environment) = stored_options(record)?;
        let (lease, mounted) = match (fresh, &environment) {
            (Some(fresh), _) => fresh,
            (None, Some(info)) => (
                self.relase(info)?,
                Some(self.mount_environment(&record.id, info, layers)?),
            ),
            (None, None) => (None, None),
        };
        let (environment_view, tools_view) = match mounted {
            Some(m) => (Some(m.view), Some(m.tools)),
            None => (None, None),
        };
        let mut config = SessionConfig::new(record.id.clone(), record.working_directory.clone())
            .permission_mode(record.permission_mode)
            .interactive(record.interactive);
        config.output_schema = request.output_schema.clone();
        config.network = request.network;
        if let Some(mut view) = tools_view {
            view.writable_root = record.permission_mode >= PermissionLevel::DangerFullAccess;
            config.network = environment
                .as_ref()
                .is_some_and(|e| e.network == crate::environment::Network::Host);
            config.environment = Some(view);
        }
        config.rules = Arc::new(self.session_rules(&record.working_directory, &request.rules)?);
        let mode = request
            .tools
            .mode
            .map_or(record.permission_mode, |m| m.min(record.permission_mode));
        let entries = |rules: &[String], source| {
            rules
                .iter()
                .map(move |rule| PoolDeny::new(rule.clone(), source))
                .collect::<Vec<_>>()
        };
        let mut deny = entries(&request.tools.deny, DenySource::ToolFilter);
        deny.extend(entries(&request.rules.deny, DenySource::SessionRule));
        deny.extend(entries(
            &self.settings.permissions.deny,
            DenySource::ServerRule,
        ));
        let live = Arc::new(LiveSession {
            state: Arc::new(SessionState::restore(config, snapshot)),
            info: SessionInfo {
                environment,
                ..session_info(record, &request)
            },
            pool_options: PoolOptions {
                mode,
                mode_is_tool_filter: mode < record.permission_mode,
                deny,
                loaded: Default::default(),
            },
            batches_running: tokio::sync::RwLock::new(()),
            live_since: std::time::SystemTime::now(),
            _open: open,
            _image: lease,
            environment_view,
        });
        self.live().insert(record.id.clone(), live.clone());
        if let Some(parent) = &request.parent_session_id {
            self.children.adopt(parent, &record.id);
        }
        self.bridge
            .open_session(&record.id, &record.working_directory, &request.mcp_servers);
        Ok(live)
    }

    /// Loads every open session this daemon owns from the store; returns how many (stranded
    /// child sessions among them are closed again: see `children`).
    pub async fn restore_sessions(&self) -> Result<usize, ServiceError> {
        let mut restored = 0;
        for record in self.store.list_sessions(false).await? {
            if record.owner != self.settings.node_id {
                continue;
            }
            let snapshot: SessionSnapshot =
                serde_json::from_value(record.state.clone()).unwrap_or_else(|err| {
                    tracing::warn!(session = %record.id, error = %err, "unreadable session state; starting it fresh");
                    SessionSnapshot::default()
                });
            // A session over a snapshot's layers is mounted again (its upper kept its changes);
            // an environment session's layers go under its root instead, in `go_live`.
            let lowers = self.store.session_layers(&record.id).await?;
            let environment = record.options.get(RESOLVED_ENVIRONMENT).is_some();
            if !lowers.is_empty()
                && !environment
                && let Err(err) =
                    self.open_view(&record.id, &record.working_directory, lowers.clone())
            {
                tracing::warn!(session = %record.id, error = %err, "session view not mounted again");
            }
            self.go_live(&record, snapshot, None, &lowers)?;
            // No call waits for an approval made before the restart: deny what is left.
            self.approvals.settle_orphans(&record.id).await?;
            restored += 1;
        }
        let stranded = self.close_stranded_children().await?;
        if stranded > 0 {
            tracing::info!(
                stranded,
                "closed child sessions whose agent call or parent is gone"
            );
        }
        Ok(restored)
    }

    pub fn get_session(&self, caller: &Principal, id: &str) -> Result<SessionInfo, ServiceError> {
        Ok(self.session_for(caller, id, Access::Read)?.info.clone())
    }

    /// How many sessions are live here (every principal's).
    pub fn live_session_count(&self) -> usize {
        self.live().len()
    }

    /// The live sessions `caller` sees, oldest first.
    pub fn list_sessions(&self, caller: &Principal) -> Vec<SessionInfo> {
        let mut sessions: Vec<SessionInfo> = self
            .live()
            .values()
            .filter(|s| Self::sees(caller, &s.info.id, s.info.principal.as_deref()))
            .map(|s| s.info.clone())
            .collect();
        sessions.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        sessions
    }

    /// Closes a session: its running calls are cancelled, its background shells stopped, its
    /// children closed.
    pub async fn close_session(
        &self,
        caller: &Principal,
        id: &str,
    ) -> Result<SessionInfo, ServiceError> {
        self.session_for(caller, id, Access::Write)?;
        self.close_live(id, caller.name.clone()).await
    }

    /// Closes live session `id` (authorised already), its children first; `actor` is named on
    /// the `session:end` events.
    pub(super) async fn close_live(
        &self,
        id: &str,
        actor: Arc<str>,
    ) -> Result<SessionInfo, ServiceError> {
        let live = self.live().remove(id).ok_or_else(|| unknown_session(id))?;
        live.state.close();
        self.close_children(id, &actor).await;
        // The running batch sees the close and answers its calls as cancelled before their
        // shells go (a shell killed first fails its call as an execution error instead); the
        // executor gives a call `cancel_grace` to stop, so this wait is bounded by it.
        let grace = self.dispatcher.settings().cancel_grace + std::time::Duration::from_secs(1);
        let _ = tokio::time::timeout(grace, live.batches_running.write()).await;
        self.shells.kill_session(id).await;
        self.close_view(id);
        self.bridge.close_session(id).await;
        if let Some(view) = &live.environment_view {
            if let Err(err) = view.unmount() {
                tracing::warn!(session = %id, error = %err, "environment not unmounted");
            }
            // Its `disk_mb` filesystem, if it had one, goes with it.
            crate::environment::disk::remove(&view.spec().private_dir);
        }
        self.store
            .save_session_state(id, &snapshot_json(&live.state))
            .await?;
        self.store.close_session(id).await?;
        self.events.publish(
            EventDraft::new(EventType::SessionEnd, id)
                .actor(actor)
                .data(json!({})),
        );
        let mut info = live.info.clone();
        info.closed = true;
        Ok(info)
    }

    /// The server's rules and the session's, compiled against `workspace`.
    fn session_rules(
        &self,
        workspace: &Path,
        rules: &SessionRuleTexts,
    ) -> Result<SessionRules, ServiceError> {
        let context = RuleContext {
            workspace,
            home: self.settings.home.as_deref(),
            tools: &self.tool_names,
        };
        let server = &self.settings.permissions;
        let invalid = |err: crate::permission::RuleError| ServiceError::invalid(err.to_string());
        Ok(SessionRules {
            server: RuleSet::parse(
                &server.allow,
                &server.deny,
                &server.ask,
                RuleSource::Server,
                &context,
            )
            .map_err(|err| ServiceError::internal(err.to_string()))?,
            session: RuleSet::parse(
                &rules.allow,
                &rules.deny,
                &rules.ask,
                RuleSource::Session,
                &context,
            )
            .map_err(invalid)?,
        })
    }

    /// A directory under an allowed root, canonical.
    pub(super) fn allowed_directory(&self, dir: &Path) -> Result<PathBuf, ServiceError> {
        if !dir.is_absolute() {
            return Err(ServiceError::invalid(format!(
                "working_directory \"{}\" must be an absolute path",
                dir.display()
            )));
        }
        // A path that is not there is not found; one outside the roots is forbidden.
        let canonical = dir.canonicalize().map_err(|err| {
            ServiceError::not_found(format!("working_directory \"{}\": {err}", dir.display()))
        })?;
        if !canonical.is_dir() {
            return Err(ServiceError::not_found(format!(
                "working_directory \"{}\" is not a directory",
                dir.display()
            )));
        }
        let allowed = self
            .allowed_roots()
            .iter()
            .any(|root| canonical.starts_with(root));
        if !allowed {
            let roots: Vec<String> = self
                .allowed_roots()
                .iter()
                .map(|r| r.display().to_string())
                .collect();
            return Err(ServiceError::forbidden(format!(
                "working_directory \"{}\" is not under an allowed root ({})",
                dir.display(),
                roots.join(", ")
            )));
        }
        Ok(canonical)
    }

    /// The allowed roots, canonical (the workspaces directory always included).
    fn allowed_roots(&self) -> Vec<PathBuf> {
        std::iter::once(&self.settings.workspaces_dir)
            .chain(&self.settings.allowed_roots)
            .filter_map(|root| root.canonicalize().ok())
            .collect()
    }

    fn fresh_workspace(&self, id: &str) -> Result<PathBuf, ServiceError> {
        let dir = self.settings.workspaces_dir.join(id);
        std::fs::create_dir_all(&dir).map_err(|err| {
            ServiceError::internal(format!(
                "cannot create workspace \"{}\": {err}",
                dir.display()
            ))
        })?;
        dir.canonicalize().map_err(|err| {
            ServiceError::internal(format!("workspace \"{}\": {err}", dir.display()))
        })
    }
}

/// The session state as the store keeps it.
pub(super) fn snapshot_json(state: &SessionState) -> Value {
    serde_json::to_value(state.snapshot()).unwrap_or_else(|err| {
        // Snapshots are plain data; a failure would be a path that is not UTF-8 in the cache.
        tracing::warn!(session = %state.id(), error = %err, "session state not serialisable");
        json!({})
    })
}

pub(super) fn session_info(record: &SessionRecord, request: &CreateSessionRequest) -> SessionInfo {
    SessionInfo {
        id: record.id.clone(),
        working_directory: record.working_directory.clone(),
        permission_mode: record.permission_mode,
        interactive: record.interactive,
        owner: record.owner.clone(),
        owner_address: None,
        principal: record.principal.clone(),
        created_at: humantime::format_rfc3339_millis(record.created_at).to_string(),
        closed: record.closed_at.is_some(),
        rules: request.rules.clone(),
        tools: request.tools.clone(),
        mcp_servers: request.mcp_servers.clone(),
        providers: request.providers.clone(),
        // Sessions created before metadata was normalised may hold null.
        metadata: match &request.metadata {
            Value::Null => json!({}),
            metadata => metadata.clone(),
        },
        network: request.network,
        parent_session_id: request.parent_session_id.clone(),
        from_snapshot: request.from_snapshot.clone(),
        copy: None,
        environment: record
            .options
            .get(RESOLVED_ENVIRONMENT)
            .and_then(|v| serde_json::from_value(v.clone()).ok()),
    }
}

/// A stored session's request, and its resolved environment kept beside it.
pub(super) fn stored_options(
    record: &SessionRecord,
) -> Result<(CreateSessionRequest, Option<EnvironmentInfo>), ServiceError> {
    let bad = |err: serde_json::Error| {
        ServiceError::internal(format!("session \"{}\" options: {err}", record.id))
    };
    let mut options = record.options.clone();
    let resolved = options
        .as_object_mut()
        .and_then(|o| o.remove(RESOLVED_ENVIRONMENT));
    let request: CreateSessionRequest = serde_json::from_value(options).map_err(bad)?;
    let environment = resolved
        .map(serde_json::from_value)
        .transpose()
        .map_err(bad)?;
    Ok((request, environment))
}
