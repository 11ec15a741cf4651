//! A session's tool pool: which tools a batch may call and which definitions a model sees.
//!
//! Assembly order (DESIGN §2): built-ins, then external tools; each filtered by `is_enabled`,
//! by the mode (a tool whose least possible requirement exceeds the mode is left out) and by
//! deny rules that name a whole tool (the pool remembers why, so a call to such a tool is
//! refused as `permission_denied` naming the mode or the rule, not as unknown); each part
//! sorted by name; de-duplicated with the built-in winning. Deferred tools stay out until
//! loaded; `tool_search` is always loaded. A pool is immutable: a batch holds one for its
//! whole duration. [`PoolCache`] keeps each session's last pool for the next batch, until the
//! session loads another tool.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, Weak};

use super::{RegisteredTool, ToolRegistry, closest};
use crate::permission::rules::mcp_server_prefix;
use crate::session::SessionState;
use crate::tool::{DeferredTool, PermissionLevel, ToolCatalog};

/// The one tool that is never deferred: it is how deferred tools get loaded.
pub const TOOL_SEARCH: &str = "tool_search";

/// What shapes a pool besides the registry.
#[derive(Clone, Debug)]
pub struct PoolOptions {
    /// Tools whose least possible requirement exceeds this mode are left out.
    pub mode: PermissionLevel,
    /// `mode` is the session's tool filter (`tools.mode`), narrower than its permission mode.
    pub mode_is_tool_filter: bool,
    /// Rules that leave tools out. A rule that is a bare tool name or alias (`bash`, `Read`)
    /// removes the tool; rules with a specifier (`bash(rm:*)`) are the permission policy's
    /// business. The first naming a tool is the one a refused call is told about.
    pub deny: Vec<PoolDeny>,
    /// Deferred tools this session has loaded.
    pub loaded: BTreeSet<String>,
}

impl PoolOptions {
    pub fn for_mode(mode: PermissionLevel) -> PoolOptions {
        PoolOptions {
            mode,
            mode_is_tool_filter: false,
            deny: Vec::new(),
            loaded: BTreeSet::new(),
        }
    }

    /// Whether a pool assembled with `self` serves `other` too (the loaded tools aside).
    fn same_shape(&self, other: &PoolOptions) -> bool {
        self.mode == other.mode
            && self.mode_is_tool_filter == other.mode_is_tool_filter
            && self.deny == other.deny
    }
}

/// A deny entry that can leave a tool out of a pool, and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolDeny {
    pub rule: String,
    pub source: DenySource,
}

impl PoolDeny {
    pub fn new(rule: impl Into<String>, source: DenySource) -> PoolDeny {
        PoolDeny {
            rule: rule.into(),
            source,
        }
    }
}

/// Where a deny entry came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DenySource {
    /// The session's tool filter (`tools.deny`).
    ToolFilter,
    /// The session's rules (`rules.deny`).
    SessionRule,
    /// The server's rules (`[permissions] deny`).
    ServerRule,
}

/// Why a registered, enabled tool is not in a pool: the session may not call it at all. A
/// call to it is refused as `permission_denied` naming this, not as an unknown tool (the
/// model was never offered it, but the caller and the audit log deserve the truth).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolExclusion {
    /// The least any input of the tool needs exceeds the pool's mode.
    Mode {
        tool: String,
        required: PermissionLevel,
        mode: PermissionLevel,
        /// The mode is the session's tool filter (`tools.mode`), not its permission mode.
        tool_filter: bool,
    },
    /// A deny entry names the whole tool.
    Denied {
        tool: String,
        rule: String,
        source: DenySource,
    },
}

impl fmt::Display for PoolExclusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolExclusion::Mode {
                tool,
                required,
                mode,
                tool_filter,
            } => {
                let whose = if *tool_filter {
                    "the session's tool filter (tools.mode)"
                } else {
                    "the session's mode"
                };
                write!(
                    f,
                    "\"{tool}\" needs at least {required}; {whose} is {mode}, so the tool is not in its pool"
                )
            }
            PoolExclusion::Denied { tool, rule, source } => {
                let by = match source {
                    DenySource::ToolFilter => "the session's tool filter (tools.deny)",
                    DenySource::SessionRule => "the session rule",
                    DenySource::ServerRule => "the server rule",
                };
                write!(
                    f,
                    "\"{tool}\" is denied by {by} \"{rule}\", so the tool is not in the session's pool"
                )
            }
        }
    }
}

/// A name that resolves to no tool in the pool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct UnknownTool {
    pub name: String,
    pub suggestion: Option<String>,
    /// The tool exists but is deferred and not loaded yet.
    pub deferred: bool,
    /// The tool exists but the session's mode or a deny rule keeps it out of the pool.
    pub excluded: Option<PoolExclusion>,
}

impl fmt::Display for UnknownTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(exclusion) = &self.excluded {
            return exclusion.fmt(f);
        }
        if self.deferred {
            return write!(
                f,
                "tool \"{}\" is deferred; load it with {TOOL_SEARCH} (query \"select:{}\") and call it in a later batch",
                self.name, self.name
            );
        }
        write!(f, "unknown tool \"{}\"", self.name)?;
        if let Some(suggestion) = &self.suggestion {
            write!(f, "; did you mean \"{suggestion}\"?")?;
        }
        Ok(())
    }
}

impl ToolCatalog for ToolPool {
    fn deferred_tools(&self) -> Vec<DeferredTool> {
        self.deferred
            .iter()
            .map(|tool| DeferredTool {
                name: tool.name().to_owned(),
                description: tool.spec().description.clone(),
                input_schema: tool.flattened_schema.clone(),
            })
            .collect()
    }
}

/// The frozen set of tools one batch may call.
#[derive(Clone, Debug)]
pub struct ToolPool {
    /// Callable tools in definition order: built-ins by name, then external tools by name.
    tools: Vec<Arc<RegisteredTool>>,
    by_name: BTreeMap<String, usize>,
    /// Built-in aliases whose target is in the pool.
    aliases: BTreeMap<String, String>,
    /// Deferred tools not yet loaded, by name.
    deferred: Vec<Arc<RegisteredTool>>,
    /// Registered, enabled tools the mode or a deny rule left out, by name and by alias.
    excluded: BTreeMap<String, PoolExclusion>,
}

impl ToolPool {
    pub fn assemble(
        registry: &ToolRegistry,
        external: &[Arc<RegisteredTool>],
        session: &SessionState,
        options: &PoolOptions,
    ) -> ToolPool {
        // Canonical tool name → the first bare entry naming it; and the bare entries naming a
        // whole MCP server (`mcp__fs`, `mcp__fs__*`), by its tools' name prefix.
        let mut denied: BTreeMap<&str, &PoolDeny> = BTreeMap::new();
        let mut denied_servers: Vec<(String, &PoolDeny)> = Vec::new();
        for deny in options.deny.iter().filter(|deny| !deny.rule.contains('(')) {
            if let Some(prefix) = mcp_server_prefix(&deny.rule) {
                denied_servers.push((prefix, deny));
                continue;
            }
            let tool = registry.canonical_name(&deny.rule).unwrap_or(&deny.rule);
            denied.entry(tool).or_insert(deny);
        }
        let exclusion = |tool: &RegisteredTool| {
            let required = tool.spec().required_permission.floor();
            if required > options.mode {
                return Some(PoolExclusion::Mode {
                    tool: tool.name().to_owned(),
                    required,
                    mode: options.mode,
                    tool_filter: options.mode_is_tool_filter,
                });
            }
            let by_server = || {
                denied_servers
                    .iter()
                    .find(|(prefix, _)| tool.name().starts_with(prefix.as_str()))
                    .map(|(_, deny)| *deny)
            };
            denied
                .get(tool.name())
                .copied()
                .or_else(by_server)
                .map(|deny| PoolExclusion::Denied {
                    tool: tool.name().to_owned(),
                    rule: deny.rule.clone(),
                    source: deny.source,
                })
        };
        let mut excluded = BTreeMap::new();
        let mut admitted = |tool: &&Arc<RegisteredTool>| {
            if !tool.tool.is_enabled(session) {
                return false;
            }
            let Some(why) = exclusion(tool) else {
                return true;
            };
            excluded.insert(tool.name().to_owned(), why);
            false
        };
        let mut builtins: Vec<_> = registry.tools().filter(&mut admitted).cloned().collect();
        builtins.sort_by(|a, b| a.name().cmp(b.name()));
        let mut externals: Vec<_> = external
            .iter()
            // The built-in wins: an external tool may not take a built-in name or alias.
            .filter(|tool| registry.canonical_name(tool.name()).is_none())
            .filter(&mut admitted)
            .cloned()
            .collect();
        externals.sort_by(|a, b| a.name().cmp(b.name()));
        externals.dedup_by(|a, b| a.name() == b.name());

        let is_deferred = |tool: &Arc<RegisteredTool>| {
            let spec = tool.spec();
            spec.should_defer
                && !spec.always_load
                && spec.name != TOOL_SEARCH
                && !options.loaded.contains(&spec.name)
        };
        let (deferred, tools): (Vec<_>, Vec<_>) =
            builtins.into_iter().chain(externals).partition(is_deferred);
        let by_name = tools
            .iter()
            .enumerate()
            .map(|(index, tool)| (tool.name().to_owned(), index))
            .collect::<BTreeMap<_, _>>();
        let aliases = registry
            .aliases()
            .filter(|(_, target)| by_name.contains_key(*target))
            .map(|(alias, target)| (alias.to_owned(), target.to_owned()))
            .collect();
        // An excluded built-in is refused under its aliases too.
        let excluded_aliases: Vec<_> = registry
            .aliases()
            .filter_map(|(alias, target)| Some((alias.to_owned(), excluded.get(target)?.clone())))
            .collect();
        excluded.extend(excluded_aliases);
        ToolPool {
            tools,
            by_name,
            aliases,
            deferred,
            excluded,
        }
    }

    /// The tools a model is shown, in definition order.
    pub fn tools(&self) -> &[Arc<RegisteredTool>] {
        &self.tools
    }

    /// Deferred tools that are not loaded yet (what `tool_search` searches).
    pub fn deferred(&self) -> &[Arc<RegisteredTool>] {
        &self.deferred
    }

    /// Resolves a requested name: an exact name first, then a built-in alias. External tools'
    /// aliases are never consulted.
    pub fn resolve(&self, name: &str) -> Result<Arc<RegisteredTool>, UnknownTool> {
        let index = self.by_name.get(name).or_else(|| {
            self.aliases
                .get(name)
                .and_then(|target| self.by_name.get(target))
        });
        if let Some(index) = index {
            return Ok(self.tools[*index].clone());
        }
        let deferred = self.deferred.iter().any(|tool| tool.name() == name);
        let candidates = self
            .by_name
            .keys()
            .chain(self.aliases.keys())
            .map(String::as_str);
        let excluded = self.excluded.get(name).cloned();
        Err(UnknownTool {
            name: name.to_owned(),
            suggestion: if deferred || excluded.is_some() {
                None
            } else {
                closest(name, candidates).map(str::to_owned)
            },
            deferred,
            excluded,
        })
    }
}

/// Each session's last assembled pool, handed to its later batches until what it was assembled
/// from changes: assembling filters, sorts and indexes every tool, which is most of what a
/// small batch costs besides its calls.
///
/// A pool depends on the registry (fixed), the session's options (mode and deny rules, fixed
/// when the session goes live, and compared anyway), the tools' `is_enabled` answers (fixed
/// for a session: they judge the session's fixed facts) and the session's loaded tools, which
/// [`SessionState::loaded_tools_version`] tracks. A session that goes live again (restored,
/// taken over) has a new state and so gets a new pool.
#[derive(Debug, Default)]
pub struct PoolCache {
    pools: Mutex<HashMap<Arc<str>, CachedPool>>,
}

#[derive(Debug)]
struct CachedPool {
    /// The session the pool was assembled for. Holding the allocation keeps its address from
    /// being reused, so comparing addresses tells this session from a later one with its id.
    session: Weak<SessionState>,
    loaded_version: u64,
    /// The generation of the external tools it was assembled with.
    external_version: u64,
    /// What it was assembled from (its loaded tools are `loaded_version`'s).
    options: PoolOptions,
    pool: Arc<ToolPool>,
}

impl PoolCache {
    /// The pool for a batch of `session` shaped by `options`: the kept one while it is
    /// current, else `assemble`d from `options` with the session's loaded tools (`loaded` as
    /// given is ignored) and kept. `external_version` names the external tools `assemble`
    /// adds (a number that changes when they do).
    pub fn get_or_assemble(
        &self,
        session: &Arc<SessionState>,
        options: &PoolOptions,
        external_version: u64,
        assemble: impl FnOnce(&PoolOptions) -> ToolPool,
    ) -> Arc<ToolPool> {
        let version = session.loaded_tools_version();
        if let Some(pool) = self.current(session, version, external_version, options) {
            return pool;
        }
        // Read together, so the pool kept under `version` has exactly those tools loaded.
        let (version, loaded) = session.versioned_loaded_tools();
        let options = PoolOptions {
            loaded,
            ..options.clone()
        };
        let pool = Arc::new(assemble(&options));
        let mut pools = self.lock();
        // Sessions that went away leave their pools behind; a miss is rare enough to sweep.
        pools.retain(|_, cached| cached.session.strong_count() > 0);
        pools.insert(
            session.shared_id(),
            CachedPool {
                session: Arc::downgrade(session),
                loaded_version: version,
                external_version,
                options,
                pool: pool.clone(),
            },
        );
        pool
    }

    fn current(
        &self,
        session: &Arc<SessionState>,
        version: u64,
        external_version: u64,
        options: &PoolOptions,
    ) -> Option<Arc<ToolPool>> {
        let pools = self.lock();
        let cached = pools.get(session.id())?;
        let same = std::ptr::eq(cached.session.as_ptr(), Arc::as_ptr(session))
            && cached.loaded_version == version
            && cached.external_version == external_version
            && cached.options.same_shape(options);
        same.then(|| cached.pool.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, CachedPool>> {
        // Only whole entries are inserted or removed under this lock; a panic cannot leave
        // one half-written.
        self.pools.lock().unwrap_or_else(|p| p.into_inner())
    }
}
