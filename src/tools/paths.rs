//! Paths for every tool that takes one: validation, resolution against the session, and the
//! workspace boundary, on top of the contract's resolver ([`crate::tool::paths`]).
//!
//! A path that leaves the workspace, by `..`, an absolute path or a symlink, is never silently
//! allowed or rewritten: it needs `danger_full_access`. Because the filesystem can change
//! between authorisation and execution, tools resolve again when they run
//! ([`resolve_for_execution`], or the kernel as it opens the path) and refuse a path that has
//! moved outside what was authorised.
//!
//! Before a call runs, its path is resolved once: by its validation ([`check_input`]), whose
//! answer the permission check that follows ([`path_permission`]) takes from the call's
//! context ([`ToolContext::path_checks`]). That answer may be a moment old; it is only ever a
//! pre-check, since the run resolves again.

use serde_json::Value;

pub use crate::tool::paths::{
    PathError, ResolvedPath, input_path, resolve, resolve_lenient, resolve_lenient_from,
};
use crate::tool::{PermissionLevel, SessionView, ToolContext, ToolError};

/// Resolves `input[field]` for a session (relative to its working directory). In an
/// environment (DESIGN §12) an absolute path is the environment's: it is looked up under the
/// environment's root, and a path that resolves outside that root (`..` past `/`, a symlink
/// to a host path) is refused, since the environment holds nothing of the host.
pub fn resolve_input(
    input: &Value,
    field: &str,
    session: &dyn SessionView,
) -> Result<ResolvedPath, PathError> {
    let raw = input_path(input, field)?;
    let Some(environment) = session.environment() else {
        return resolve(
            raw,
            field,
            session.working_directory(),
            session.real_working_directory(),
        );
    };
    let outside = || PathError::OutsideEnvironment {
        field: field.to_owned(),
        path: raw.to_owned(),
    };
    let rooted;
    let raw_here = if raw.starts_with('/') {
        rooted = environment
            .to_host(std::path::Path::new(raw))
            .ok_or_else(outside)?;
        rooted.to_str().ok_or_else(outside)?
    } else {
        raw
    };
    let resolved = resolve(
        raw_here,
        field,
        session.working_directory(),
        session.real_working_directory(),
    )?;
    if !resolved.path.starts_with(&environment.root) {
        return Err(outside());
    }
    Ok(resolved)
}

/// Resolves `input[field]` for a call's validation and keeps whether it lies in the workspace
/// on the call's context for its permission check ([`path_permission`]), which follows
/// validation in the pipeline.
pub fn check_input(
    input: &Value,
    field: &str,
    ctx: &ToolContext,
) -> Result<ResolvedPath, PathError> {
    let resolved = resolve_input(input, field, &*ctx.session)?;
    ctx.path_checks
        .keep(input_path(input, field)?, resolved.inside_workspace);
    Ok(resolved)
}

/// The permission `input[field]` needs: `inside` for a path in the workspace, else
/// `danger_full_access`. For `ToolSpecBuilder::permission_for`; an error fails closed.
///
/// The answer of the call's validation ([`check_input`]) is used when there is one. A moment
/// old at most in a pipeline, it errs safely either way: a path judged outside asks for more
/// than it needs, and one judged inside that has since left is refused when the call runs.
pub fn path_permission(
    input: &Value,
    field: &str,
    ctx: &ToolContext,
    inside: PermissionLevel,
) -> Result<PermissionLevel, String> {
    let raw = input_path(input, field).map_err(|err| err.to_string())?;
    let inside_workspace = match ctx.path_checks.take(raw) {
        Some(inside_workspace) => inside_workspace,
        None => {
            resolve_input(input, field, &*ctx.session)
                .map_err(|err| err.to_string())?
                .inside_workspace
        }
    };
    // In an environment a read anywhere inside it is a read (it holds nothing of the host;
    // `resolve_input` refused what leaves it); a write outside `workdir` stays outside.
    let read_in_environment =
        inside == PermissionLevel::ReadOnly && ctx.session.environment().is_some();
    Ok(if inside_workspace || read_in_environment {
        inside
    } else {
        PermissionLevel::DangerFullAccess
    })
}

/// Resolves `input[field]` again when the tool runs, and refuses it if it now leaves the
/// workspace although the call was authorised only for the inside (a symlink swapped after
/// the check).
pub fn resolve_for_execution(
    input: &Value,
    field: &str,
    ctx: &ToolContext,
) -> Result<ResolvedPath, ToolError> {
    let resolved = resolve_input(input, field, &*ctx.session)?;
    // In an environment, `resolve_input` kept the path inside it and the permission check
    // judged reads and writes apart; nothing of the host can be reached by a moved link.
    let in_environment = ctx.session.environment().is_some();
    if !resolved.inside_workspace
        && !in_environment
        && ctx.authorized < PermissionLevel::DangerFullAccess
    {
        return Err(ToolError::Validation(format!(
            "{field} \"{}\" now resolves outside the workspace (to {}); it changed after the call was authorised",
            input_path(input, field)?,
            resolved.path.display()
        )));
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;
    use std::sync::Arc;

    use super::*;
    use crate::session::{SessionConfig, SessionState};

    #[test]
    fn the_permission_check_takes_what_validation_found() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir(ws.join("sub")).unwrap();
        symlink(ws.join("sub"), ws.join("link")).unwrap();
        let ctx = ToolContext::detached(Arc::new(SessionState::new(SessionConfig::new("s", &ws))));
        let input = serde_json::json!({"file_path": "link/x"});
        let permission = || path_permission(&input, "file_path", &ctx, PermissionLevel::ReadOnly);
        assert!(
            check_input(&input, "file_path", &ctx)
                .unwrap()
                .inside_workspace
        );
        // The link now leads outside: the call's permission check still goes by its
        // validation (the run resolves again), and the next check without one resolves.
        std::fs::remove_file(ws.join("link")).unwrap();
        symlink("/etc", ws.join("link")).unwrap();
        assert_eq!(permission(), Ok(PermissionLevel::ReadOnly));
        assert_eq!(permission(), Ok(PermissionLevel::DangerFullAccess));
        assert!(
            !check_input(&input, "file_path", &ctx)
                .unwrap()
                .inside_workspace
        );
        assert_eq!(permission(), Ok(PermissionLevel::DangerFullAccess));
    }
}
