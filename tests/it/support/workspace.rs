//! A throwaway workspace for the tool tests that run in this process: a temporary directory
//! holding the workspace (`ws`) and a sibling outside it (`outside`), for path-escape checks.

use std::path::PathBuf;

use tempfile::TempDir;

/// `<tmp>/ws` and `<tmp>/outside`, canonical (so they compare equal to resolved paths);
/// removed when this is dropped.
pub struct TempWorkspace {
    _dir: TempDir,
    /// The workspace.
    pub root: PathBuf,
    /// A directory next to the workspace, outside it.
    pub outside: PathBuf,
}

impl TempWorkspace {
    pub fn new() -> TempWorkspace {
        let dir = tempfile::tempdir().expect("temp dir");
        let base = dir.path().canonicalize().expect("canonical temp dir");
        let root = base.join("ws");
        let outside = base.join("outside");
        std::fs::create_dir(&root).expect("workspace created");
        std::fs::create_dir(&outside).expect("outside directory created");
        TempWorkspace {
            _dir: dir,
            root,
            outside,
        }
    }
}
