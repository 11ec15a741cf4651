//! Unit tests of the spec builder's fail-closed defaults and flag evaluation.

use serde_json::json;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::*;
use crate::tool::{FileStateEntry, SessionView};

/// A read-only session in `/ws` with nothing left behind by calls. The contract's tests stand
/// alone: the real session sits above the contract.
#[derive(Debug)]
struct FixedSession;

impl SessionView for FixedSession {
    fn id(&self) -> &str {
        "s"
    }
    fn shared_id(&self) -> Arc<str> {
        Arc::from("s")
    }
    fn working_directory(&self) -> &Path {
        Path::new("/ws")
    }
    fn real_working_directory(&self) -> &Path {
        Path::new("/ws")
    }
    fn permission_mode(&self) -> PermissionLevel {
        PermissionLevel::ReadOnly
    }
    fn interactive(&self) -> bool {
        false
    }
    fn shell_cwd(&self) -> PathBuf {
        PathBuf::from("/ws")
    }
    fn file_state(&self, _path: &Path) -> Option<FileStateEntry> {
        None
    }
    fn todos(&self) -> Value {
        Value::Null
    }
    fn loaded_tools(&self) -> BTreeSet<String> {
        BTreeSet::new()
    }
    fn runtime_setting(&self, _key: &str) -> Option<Value> {
        None
    }
    fn network_requested(&self) -> bool {
        false
    }
    fn output_schema(&self) -> Option<&Value> {
        None
    }
}

fn session() -> FixedSession {
    FixedSession
}

/// A detached call context in [`session`].
fn ctx() -> crate::tool::ToolContext {
    crate::tool::ToolContext::detached(Arc::new(FixedSession))
}

fn minimal() -> ToolSpec {
    ToolSpec::builder("noop")
        .description("does nothing")
        .max_result_size_chars(Some(1000))
        .build()
        .unwrap()
}

#[test]
fn every_omitted_flag_takes_its_fail_closed_value() {
    let spec = minimal();
    let input = json!({});
    assert!(
        !spec.is_read_only(&input, &session()),
        "read-only must default to false"
    );
    assert!(
        !spec.is_concurrency_safe(&input, &session()),
        "concurrency-safe must default to false"
    );
    assert!(
        spec.is_destructive(&input, &session()),
        "destructive must default to true"
    );
    assert_eq!(
        spec.required_permission(&input, &ctx()),
        PermissionLevel::DangerFullAccess
    );
    assert_eq!(spec.concurrency_class, ConcurrencyClass::Unsafe);
    assert_eq!(spec.interrupt_behavior, InterruptBehavior::Block);
    assert!(!spec.requires_user_interaction);
    assert!(!spec.should_defer);
    assert!(!spec.always_load);
    assert!(spec.open_world);
    assert!(!spec.idempotent);
    assert!(!spec.aborts_siblings_on_failure);
    assert_eq!(spec.timeout, None);
}

#[test]
fn a_spec_without_max_result_size_does_not_build() {
    let err = ToolSpec::builder("x").description("d").build().unwrap_err();
    assert_eq!(err, BuildError::MissingMaxResultSize { name: "x".into() });
    assert!(err.to_string().contains("max_result_size_chars"));
    // Explicit `None` is a decision, not an omission.
    let spec = ToolSpec::builder("x")
        .description("d")
        .max_result_size_chars(None)
        .build()
        .unwrap();
    assert_eq!(spec.max_result_size_chars, None);
}

#[test]
fn a_spec_needs_a_description_and_an_object_schema() {
    let no_desc = ToolSpec::builder("x").max_result_size_chars(None).build();
    assert!(matches!(
        no_desc,
        Err(BuildError::MissingDescription { .. })
    ));
    let bad_schema = ToolSpec::builder("x")
        .description("d")
        .input_schema(json!(true))
        .max_result_size_chars(None)
        .build();
    assert!(matches!(
        bad_schema,
        Err(BuildError::SchemaNotObject { .. })
    ));
}

#[test]
fn dynamic_flags_are_functions_of_input() {
    let spec = ToolSpec::builder("x")
        .description("d")
        .max_result_size_chars(None)
        .read_only_if(|input, _| Ok(input["mode"] == "read"))
        .concurrency_safe_if(|input, _| Ok(input["mode"] == "read"))
        .destructive_if(|input, _| Ok(input["mode"] == "delete"))
        .permission_for(PermissionLevel::ReadOnly, |input, ctx| {
            assert_eq!(ctx.session.working_directory(), std::path::Path::new("/ws"));
            Ok(if input["mode"] == "read" {
                PermissionLevel::ReadOnly
            } else {
                PermissionLevel::WorkspaceWrite
            })
        })
        .build()
        .unwrap();
    let read = json!({"mode": "read"});
    let delete = json!({"mode": "delete"});
    assert!(spec.is_read_only(&read, &session()) && spec.is_concurrency_safe(&read, &session()));
    assert!(!spec.is_destructive(&read, &session()));
    assert!(
        !spec.is_read_only(&delete, &session()) && !spec.is_concurrency_safe(&delete, &session())
    );
    assert!(spec.is_destructive(&delete, &session()));
    assert_eq!(
        spec.required_permission(&read, &ctx()),
        PermissionLevel::ReadOnly
    );
    assert_eq!(
        spec.required_permission(&delete, &ctx()),
        PermissionLevel::WorkspaceWrite
    );
}

#[test]
fn a_classifier_error_or_panic_yields_the_safe_answer() {
    let erroring = ToolSpec::builder("x")
        .description("d")
        .max_result_size_chars(None)
        .read_only_if(|_, _| Err("cannot parse".into()))
        .concurrency_safe_if(|_, _| Err("cannot parse".into()))
        .destructive_if(|_, _| Err("cannot parse".into()))
        .permission_for(PermissionLevel::ReadOnly, |_, _| Err("cannot parse".into()))
        .build()
        .unwrap();
    let panicking = ToolSpec::builder("y")
        .description("d")
        .max_result_size_chars(None)
        .read_only_if(|_, _| panic!("classifier bug"))
        .concurrency_safe_if(|_, _| panic!("classifier bug"))
        .destructive_if(|_, _| panic!("classifier bug"))
        .permission_for(PermissionLevel::ReadOnly, |_, _| panic!("classifier bug"))
        .build()
        .unwrap();
    for spec in [&erroring, &panicking] {
        let input = json!({});
        assert!(!spec.is_read_only(&input, &session()));
        assert!(!spec.is_concurrency_safe(&input, &session()));
        assert!(spec.is_destructive(&input, &session()));
        assert_eq!(
            spec.required_permission(&input, &ctx()),
            PermissionLevel::DangerFullAccess
        );
    }
}

#[test]
fn a_dynamic_permission_never_goes_below_its_floor() {
    let spec = ToolSpec::builder("x")
        .description("d")
        .max_result_size_chars(None)
        .permission_for(PermissionLevel::WorkspaceWrite, |_, _| {
            Ok(PermissionLevel::ReadOnly)
        })
        .build()
        .unwrap();
    assert_eq!(
        spec.required_permission(&json!({}), &ctx()),
        PermissionLevel::WorkspaceWrite
    );
}
