//! The architecture invariants a test can check (ARCHITECTURE.md, "Invariants"):
//! the core knows no transport or SQL crate, only `api/` and `store/` may, and every source
//! file says what it owns in a `//!` header.

use std::path::{Path, PathBuf};

/// Modules that make up the core: they must not know the doors' or the store's crates.
const CORE_MODULES: &[&str] = &[
    "tool",
    "tools",
    "registry",
    "dispatch",
    "permission",
    "hooks",
    "session",
    "event",
];

/// Crates only the doors (`api/`) may name.
const DOOR_CRATES: &[&str] = &["axum", "tonic", "prost", "hyper", "http"];

/// Crates only the store (`store/`) may name.
const STORE_CRATES: &[&str] = &["sqlx", "rusqlite"];

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`src/dispatch/pipeline/audit.rs` → `dispatch`).
fn module_of(file: &Path) -> String {
    let relative = file.strip_prefix(src()).unwrap();
    let first = relative
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_owned()
}

/// Whether `source` names crate `name` in code: `name::` or `use name` outside comments.
fn names_crate(source: &str, name: &str) -> Option<String> {
    source
        .lines()
        .map(str::trim_start)
        .filter(|line| !line.starts_with("//"))
        .find(|line| {
            let path_use = format!("{name}::");
            line.match_indices(&path_use).any(|(at, _)| {
                // Not a suffix of a longer identifier (e.g. `my_http::`).
                at == 0
                    || !line.as_bytes()[at - 1].is_ascii_alphanumeric()
                        && line.as_bytes()[at - 1] != b'_'
            }) || line.starts_with(&format!("use {name};"))
        })
        .map(str::to_owned)
}

#[test]
fn core_modules_know_no_transport_or_sql_crate() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut violations = Vec::new();
    for file in &files {
        let module = module_of(file);
        let source = std::fs::read_to_string(file).unwrap();
        let mut forbidden: Vec<&str> = Vec::new();
        if module != "api" {
            forbidden.extend(DOOR_CRATES);
        }
        if module != "store" {
            forbidden.extend(STORE_CRATES);
        }
        if CORE_MODULES.contains(&module.as_str()) {
            forbidden.extend(DOOR_CRATES.iter().chain(STORE_CRATES));
        }
        for name in forbidden {
            if let Some(line) = names_crate(&source, name) {
                violations.push(format!("{}: names `{name}`: {line}", file.display()));
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn the_checker_catches_what_it_should() {
    assert!(names_crate("use axum::Router;", "axum").is_some());
    assert!(names_crate("    let s = sqlx::query(\"\");", "sqlx").is_some());
    assert!(names_crate("// axum::Router in a comment", "axum").is_none());
    assert!(names_crate("use my_http::x;", "http").is_none());
    assert!(names_crate("let status = StatusCode::OK;", "http").is_none());
}

#[test]
fn every_source_file_starts_with_a_module_doc() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    assert!(
        files.len() > 20,
        "found only {} files under src/",
        files.len()
    );
    let undocumented: Vec<_> = files
        .iter()
        .filter(|file| {
            let source = std::fs::read_to_string(file).unwrap();
            !source.trim_start().starts_with("//!")
        })
        .map(|file| file.display().to_string())
        .collect();
    assert!(
        undocumented.is_empty(),
        "files without a //! header: {undocumented:?}"
    );
}

#[test]
fn core_modules_name_no_http_status_codes() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    for file in files
        .iter()
        .filter(|f| CORE_MODULES.contains(&module_of(f).as_str()))
    {
        let source = std::fs::read_to_string(file).unwrap();
        assert!(
            !source.contains("StatusCode"),
            "{} names HTTP status codes",
            file.display()
        );
    }
}
