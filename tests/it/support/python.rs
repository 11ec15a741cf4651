//! The Python that `.ci/run` makes (a venv with grpcio, grpcio-tools and requests), named by
//! `TOOLD_TEST_PYTHON`: tests that run Python clients or providers ask for it here, and are
//! skipped without it locally (in CI its absence fails them).

use std::path::PathBuf;

/// The venv's Python `.ci/run` exported, or `None` (skipped) outside CI.
pub fn python(what: &str) -> Option<PathBuf> {
    match std::env::var_os("TOOLD_TEST_PYTHON") {
        Some(path) => Some(PathBuf::from(path)),
        None => {
            super::skip_unless_ci(&format!("TOOLD_TEST_PYTHON is not set ({what})"));
            None
        }
    }
}
