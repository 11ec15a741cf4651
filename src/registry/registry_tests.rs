//! Registration rules, alias resolution and pool assembly.

use std::path::PathBuf;

use async_trait::async_trait;
use serde_json::json;

use super::*;
use crate::session::{SessionConfig, SessionState};
use crate::tool::{PermissionLevel, ToolContext, ToolError, ToolOutput};

struct Named {
    spec: ToolSpec,
    enabled: bool,
}

#[async_trait]
impl Tool for Named {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn is_enabled(&self, _session: &dyn crate::tool::SessionView) -> bool {
        self.enabled
    }
    async fn execute(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("ok"))
    }
}

fn tool(
    name: &str,
    configure: impl FnOnce(crate::tool::ToolSpecBuilder) -> crate::tool::ToolSpecBuilder,
) -> Arc<dyn Tool> {
    let builder = ToolSpec::builder(name)
        .description(format!("the {name} tool"))
        .max_result_size_chars(Some(100))
        .permission(PermissionLevel::ReadOnly);
    Arc::new(Named {
        spec: configure(builder).build().unwrap(),
        enabled: true,
    })
}

fn external(name: &str, alias: Option<&str>) -> Arc<RegisteredTool> {
    let t = tool(name, |b| match alias {
        Some(alias) => b.alias(alias),
        None => b,
    });
    Arc::new(RegisteredTool::new(t, ToolSource::External).unwrap())
}

fn session(mode: PermissionLevel) -> SessionState {
    SessionState::new(SessionConfig::new("s", PathBuf::from("/ws")).permission_mode(mode))
}

fn names(pool: &ToolPool) -> Vec<&str> {
    pool.tools().iter().map(|t| t.name()).collect()
}

#[test]
fn registration_checks_names_aliases_and_schemas() {
    let mut registry = ToolRegistry::new();
    registry
        .register(tool("read_file", |b| b.alias("Read")))
        .unwrap();
    assert_eq!(
        registry.register(tool("Read", |b| b)).unwrap_err(),
        RegistryError::Duplicate("Read".into())
    );
    assert_eq!(
        registry.register(tool("bad name", |b| b)).unwrap_err(),
        RegistryError::InvalidName("bad name".into())
    );
    assert_eq!(
        registry
            .register(tool("ok", |b| b.alias("bad.alias")))
            .unwrap_err(),
        RegistryError::InvalidName("bad.alias".into())
    );
    let not_object = registry.register(tool("x", |b| b.input_schema(json!({"type": "string"}))));
    assert!(matches!(
        not_object,
        Err(RegistryError::InvalidSchema { .. })
    ));
    let broken = registry.register(tool("y", |b| {
        b.input_schema(json!({"type": "object", "properties": {"a": {"type": 5}}}))
    }));
    assert!(
        matches!(broken, Err(RegistryError::InvalidSchema { .. })),
        "{broken:?}"
    );
    let dangling = registry.register(tool("z", |b| {
        b.input_schema(json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/no"}}}))
    }));
    assert!(matches!(dangling, Err(RegistryError::InvalidSchema { .. })));
}

#[test]
fn aliases_resolve_in_the_base_registry_only() {
    let mut registry = ToolRegistry::new();
    registry
        .register(tool("read_file", |b| b.alias("Read")))
        .unwrap();
    let externals = vec![external("mcp_lookup", Some("Lookup"))];
    let pool = ToolPool::assemble(
        &registry,
        &externals,
        &session(PermissionLevel::ReadOnly),
        &PoolOptions::for_mode(PermissionLevel::ReadOnly),
    );
    assert_eq!(pool.resolve("Read").unwrap().name(), "read_file");
    assert_eq!(pool.resolve("mcp_lookup").unwrap().name(), "mcp_lookup");
    let refused = pool.resolve("Lookup").unwrap_err();
    assert_eq!(refused.name, "Lookup");
    let typo = pool.resolve("reed_file").unwrap_err();
    assert_eq!(
        typo.to_string(),
        "unknown tool \"reed_file\"; did you mean \"read_file\"?"
    );
    assert_eq!(
        pool.resolve("zzzzzz").unwrap_err().to_string(),
        "unknown tool \"zzzzzz\""
    );
}

#[test]
fn pools_are_sorted_builtins_first_and_deduplicated() {
    let mut registry = ToolRegistry::new();
    for name in ["write_file", "bash", "read_file"] {
        registry.register(tool(name, |b| b)).unwrap();
    }
    let externals = vec![
        external("zeta", None),
        external("alpha", None),
        external("bash", None),  // collides with a built-in: the built-in wins
        external("alpha", None), // duplicate external
    ];
    let pool = ToolPool::assemble(
        &registry,
        &externals,
        &session(PermissionLevel::ReadOnly),
        &PoolOptions::for_mode(PermissionLevel::ReadOnly),
    );
    assert_eq!(
        names(&pool),
        ["bash", "read_file", "write_file", "alpha", "zeta"]
    );
    assert_eq!(pool.resolve("bash").unwrap().source, ToolSource::BuiltIn);
}

/// A reader (alias `Read`), a writer, a shell whose floor is read-only, and a tool that is
/// never enabled (and would need full access).
fn filtering_registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry
        .register(tool("read_file", |b| b.alias("Read")))
        .unwrap();
    registry
        .register(tool("write_file", |b| {
            b.permission(PermissionLevel::WorkspaceWrite)
        }))
        .unwrap();
    registry
        .register(tool("bash", |b| {
            b.permission_for(PermissionLevel::ReadOnly, |_, _| {
                Ok(PermissionLevel::DangerFullAccess)
            })
        }))
        .unwrap();
    registry
        .register(Arc::new(Named {
            spec: ToolSpec::builder("disabled")
                .description("d")
                .max_result_size_chars(None)
                .permission(PermissionLevel::DangerFullAccess)
                .build()
                .unwrap(),
            enabled: false,
        }))
        .unwrap();
    registry
}

#[test]
fn mode_deny_and_enabled_filter_the_pool() {
    let registry = filtering_registry();
    let read_only = session(PermissionLevel::ReadOnly);
    let pool = ToolPool::assemble(
        &registry,
        &[],
        &read_only,
        &PoolOptions::for_mode(PermissionLevel::ReadOnly),
    );
    assert_eq!(names(&pool), ["bash", "read_file"]);
    let mut options = PoolOptions::for_mode(PermissionLevel::WorkspaceWrite);
    options.deny = vec![
        PoolDeny::new("Read", DenySource::SessionRule),
        PoolDeny::new("bash(rm:*)", DenySource::SessionRule),
    ];
    let pool = ToolPool::assemble(&registry, &[], &read_only, &options);
    assert_eq!(names(&pool), ["bash", "write_file"]);
    assert!(
        pool.resolve("Read").is_err(),
        "a denied tool's alias must not reach it"
    );
}

#[test]
fn a_tool_kept_out_by_mode_or_rule_says_why_and_a_disabled_one_stays_unknown() {
    let registry = filtering_registry();
    let mut options = PoolOptions::for_mode(PermissionLevel::ReadOnly);
    options.deny = vec![PoolDeny::new("Read", DenySource::ServerRule)];
    let pool = ToolPool::assemble(
        &registry,
        &[],
        &session(PermissionLevel::ReadOnly),
        &options,
    );
    let by_mode = pool.resolve("write_file").unwrap_err();
    assert_eq!(
        by_mode.excluded,
        Some(PoolExclusion::Mode {
            tool: "write_file".into(),
            required: PermissionLevel::WorkspaceWrite,
            mode: PermissionLevel::ReadOnly,
            tool_filter: false,
        })
    );
    assert!(by_mode.to_string().contains("read_only"), "{by_mode}");
    let by_rule = PoolExclusion::Denied {
        tool: "read_file".into(),
        rule: "Read".into(),
        source: DenySource::ServerRule,
    };
    // Under its name and its alias alike.
    assert_eq!(
        pool.resolve("read_file").unwrap_err().excluded,
        Some(by_rule.clone())
    );
    assert_eq!(pool.resolve("Read").unwrap_err().excluded, Some(by_rule));
    assert!(
        pool.resolve("read_file")
            .unwrap_err()
            .to_string()
            .contains("server rule \"Read\""),
    );
    // A session's rule is named as the session's, before the server's naming the same tool.
    options
        .deny
        .insert(0, PoolDeny::new("read_file", DenySource::SessionRule));
    let pool = ToolPool::assemble(
        &registry,
        &[],
        &session(PermissionLevel::ReadOnly),
        &options,
    );
    assert!(matches!(
        pool.resolve("Read").unwrap_err().excluded,
        Some(PoolExclusion::Denied { source: DenySource::SessionRule, ref rule, .. })
            if rule == "read_file"
    ));
    // Not enabled for this session: it does not exist for it.
    assert_eq!(pool.resolve("disabled").unwrap_err().excluded, None);
    assert_eq!(pool.resolve("nothing").unwrap_err().excluded, None);
}

#[test]
fn deferred_tools_wait_for_loading_and_tool_search_never_waits() {
    let mut registry = ToolRegistry::new();
    registry
        .register(tool("tool_search", |b| b.should_defer(true)))
        .unwrap();
    registry
        .register(tool("notebook_edit", |b| b.should_defer(true)))
        .unwrap();
    registry
        .register(tool("pinned", |b| b.should_defer(true).always_load(true)))
        .unwrap();
    let s = session(PermissionLevel::ReadOnly);
    let mut options = PoolOptions::for_mode(PermissionLevel::ReadOnly);
    let pool = ToolPool::assemble(&registry, &[], &s, &options);
    assert_eq!(names(&pool), ["pinned", "tool_search"]);
    assert_eq!(pool.deferred().len(), 1);
    let err = pool.resolve("notebook_edit").unwrap_err();
    assert!(
        err.deferred && err.to_string().contains("tool_search"),
        "{err}"
    );
    options.loaded.insert("notebook_edit".into());
    let pool = ToolPool::assemble(&registry, &[], &s, &options);
    assert_eq!(names(&pool), ["notebook_edit", "pinned", "tool_search"]);
}

#[test]
fn a_kept_pool_is_reused_until_the_session_loads_a_tool() {
    let mut registry = ToolRegistry::new();
    registry.register(tool("tool_search", |b| b)).unwrap();
    registry
        .register(tool("notebook_edit", |b| b.should_defer(true)))
        .unwrap();
    let cache = PoolCache::default();
    let assembled = std::cell::Cell::new(0);
    let pool = |s: &Arc<SessionState>, options: &PoolOptions| {
        cache.get_or_assemble(s, options, 0, |options| {
            assembled.set(assembled.get() + 1);
            ToolPool::assemble(&registry, &[], s, options)
        })
    };
    let s = Arc::new(session(PermissionLevel::ReadOnly));
    let options = PoolOptions::for_mode(PermissionLevel::ReadOnly);
    let first = pool(&s, &options);
    assert!(Arc::ptr_eq(&first, &pool(&s, &options)));
    assert_eq!(assembled.get(), 1);

    // Loading a deferred tool shows in the next pool; a repeat of the load changes nothing.
    let load = crate::tool::ContextUpdate::LoadTools {
        names: vec!["notebook_edit".into()],
    };
    s.apply(std::slice::from_ref(&load));
    let loaded = pool(&s, &options);
    assert_eq!(names(&loaded), ["notebook_edit", "tool_search"]);
    s.apply(&[load]);
    assert!(Arc::ptr_eq(&loaded, &pool(&s, &options)));
    assert_eq!(assembled.get(), 2);

    // Other options, or another session with the same id, get their own pool.
    let denied = PoolOptions {
        deny: vec![PoolDeny::new("notebook_edit", DenySource::ToolFilter)],
        ..options.clone()
    };
    assert_eq!(names(&pool(&s, &denied)), ["tool_search"]);
    let again = Arc::new(session(PermissionLevel::ReadOnly));
    assert_eq!(names(&pool(&again, &options)), ["tool_search"]);
    assert_eq!(assembled.get(), 4);
}

#[test]
fn a_deny_naming_a_whole_mcp_server_keeps_all_its_tools_out() {
    let registry = filtering_registry();
    let externals = [
        external("mcp__fs__read_text_file", None),
        external("mcp__fs__write_file", None),
        external("mcp__fsx__read", None),
        external("mcp__git__log", None),
    ];
    let s = session(PermissionLevel::WorkspaceWrite);
    for rule in ["mcp__fs", "mcp__fs__*"] {
        let mut options = PoolOptions::for_mode(PermissionLevel::WorkspaceWrite);
        options.deny = vec![PoolDeny::new(rule, DenySource::ToolFilter)];
        let pool = ToolPool::assemble(&registry, &externals, &s, &options);
        let offered = names(&pool);
        assert!(offered.contains(&"mcp__fsx__read"), "{rule}: {offered:?}");
        assert!(offered.contains(&"mcp__git__log"), "{rule}: {offered:?}");
        for gone in ["mcp__fs__read_text_file", "mcp__fs__write_file"] {
            assert!(!offered.contains(&gone), "{rule}: {offered:?}");
            assert_eq!(
                pool.resolve(gone).unwrap_err().excluded,
                Some(PoolExclusion::Denied {
                    tool: gone.into(),
                    rule: rule.into(),
                    source: DenySource::ToolFilter,
                })
            );
        }
    }
}
