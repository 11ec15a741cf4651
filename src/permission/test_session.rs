//! A session for permission's own tests: a workspace, rules, remembered answers and the two
//! tokens, behind [`PermissionSession`]. The real session sits above permission, so the tests
//! stand in for it; `tools::tests` checks that [`BUILTIN_NAMES`] still matches the registry.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::{PermissionLevel, PermissionSession, RememberedRule, SessionRules, ToolNames};

/// The built-in tools' canonical names, as the registry holds them: the names models are
/// trained on (issue 3), all present, nothing else.
pub(crate) const BUILTIN_NAMES: &[&str] = &[
    "bash",
    "bash_output",
    "config",
    "edit_file",
    "glob_search",
    "grep_search",
    "kill_shell",
    "notebook_edit",
    "read_file",
    "read_result",
    "send_user_message",
    "skill",
    "sleep",
    "str_replace_based_edit_tool",
    "structured_output",
    "todo_write",
    "tool_search",
    "web_fetch",
    "write_file",
    "write_stdin",
];

/// The built-in tools' aliases (alias, canonical name).
pub(crate) const BUILTIN_ALIASES: &[(&str, &str)] = &[
    ("Bash", "bash"),
    ("BashOutput", "bash_output"),
    ("Edit", "edit_file"),
    ("Glob", "glob_search"),
    ("Grep", "grep_search"),
    ("KillShell", "kill_shell"),
    ("NotebookEdit", "notebook_edit"),
    ("Read", "read_file"),
    ("TodoWrite", "todo_write"),
    ("WebFetch", "web_fetch"),
    ("Write", "write_file"),
    ("WriteStdin", "write_stdin"),
];

/// The built-in tools' names and aliases, for compiling rules.
pub(crate) fn builtin_tool_names() -> ToolNames {
    ToolNames::new(
        BUILTIN_NAMES.iter().copied(),
        BUILTIN_ALIASES.iter().copied(),
    )
}

#[derive(Debug)]
pub(crate) struct TestSession {
    pub(crate) working_directory: PathBuf,
    pub(crate) mode: PermissionLevel,
    pub(crate) rules: Arc<SessionRules>,
    remembered: Mutex<Vec<RememberedRule>>,
    close: CancellationToken,
    interrupt: CancellationToken,
}

impl TestSession {
    pub(crate) fn new(
        working_directory: impl Into<PathBuf>,
        mode: PermissionLevel,
        rules: SessionRules,
    ) -> TestSession {
        TestSession {
            working_directory: working_directory.into(),
            mode,
            rules: Arc::new(rules),
            remembered: Mutex::default(),
            close: CancellationToken::new(),
            interrupt: CancellationToken::new(),
        }
    }

    pub(crate) fn permission_mode(&self) -> PermissionLevel {
        self.mode
    }
}

impl PermissionSession for TestSession {
    fn working_directory(&self) -> &Path {
        &self.working_directory
    }
    fn permission_rules(&self) -> &SessionRules {
        &self.rules
    }
    fn remembered_rules(&self) -> Vec<RememberedRule> {
        self.remembered.lock().unwrap().clone()
    }
    fn remember_rule(&self, rule: RememberedRule) {
        let mut remembered = self.remembered.lock().unwrap();
        if !remembered.contains(&rule) {
            remembered.push(rule);
        }
    }
    fn close_token(&self) -> CancellationToken {
        self.close.clone()
    }
    fn interrupt_token(&self) -> CancellationToken {
        self.interrupt.clone()
    }
}
