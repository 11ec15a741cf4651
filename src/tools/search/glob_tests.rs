//! Unit tests of `glob_search`'s pattern rules and its bounded newest-first selection.

use std::time::Duration;

use super::*;

fn parse(pattern: &str) -> Result<GlobQuery, ToolError> {
    GlobQuery::parse(&json!({ "pattern": pattern }))
}

#[test]
fn glob_rules() {
    for (pattern, path, expected) in [
        ("*.rs", "main.rs", true),
        ("*.rs", "src/main.rs", false),
        ("**/*.rs", "main.rs", true),
        ("**/*.rs", "src/a/b/main.rs", true),
        ("src/*.rs", "src/main.rs", true),
        ("src/*.rs", "src/a/main.rs", false),
        ("src/**/*.rs", "src/a/main.rs", true),
        ("*.{ts,tsx}", "a.tsx", true),
        ("*.{ts,tsx}", "a.js", false),
        ("?.md", "a.md", true),
        ("?.md", "ab.md", false),
        ("[ab].txt", "b.txt", true),
        ("[!ab].txt", "b.txt", false),
        ("\\*.txt", "*.txt", true),
        ("\\*.txt", "a.txt", false),
    ] {
        let query = parse(pattern).unwrap();
        assert_eq!(
            query.matcher.is_match(path),
            expected,
            "{pattern} vs {path}"
        );
    }
}

#[test]
fn hidden_components_are_noticed() {
    for (pattern, hidden, git) in [
        ("**/*.rs", false, false),
        ("./*.rs", false, false),
        (".github/**/*.yml", true, false),
        ("**/.env*", true, false),
        (".git/config", true, true),
        ("**/.gitignore", true, false),
        (".github/**", true, false),
    ] {
        let query = parse(pattern).unwrap();
        assert_eq!(
            (query.names_hidden, query.names_git_dir),
            (hidden, git),
            "{pattern}"
        );
    }
}

fn candidate(modified: Option<u64>, path: &str) -> Candidate {
    Candidate {
        modified: modified.map(|secs| SystemTime::UNIX_EPOCH + Duration::from_secs(secs)),
        path: PathBuf::from(path),
    }
}

#[test]
fn the_heap_keeps_only_the_newest_and_counts_the_rest() {
    let mut newest = Newest::new(10);
    // Offered in a shuffled order of age.
    for i in 0..1000u64 {
        newest.offer(candidate(Some((i * 37) % 1000), &format!("f{i:04}")));
        assert!(newest.heap.len() <= 10);
    }
    assert_eq!(newest.total, 1000);
    let kept: Vec<Option<SystemTime>> = newest
        .into_sorted()
        .into_iter()
        .map(|c| c.modified)
        .collect();
    let expected: Vec<Option<SystemTime>> = (990..1000)
        .rev()
        .map(|secs| candidate(Some(secs), "").modified)
        .collect();
    assert_eq!(kept, expected);
}

#[test]
fn ties_go_by_path_and_undated_files_last() {
    let offered = || {
        [
            candidate(Some(5), "b"),
            candidate(None, "a"),
            candidate(Some(5), "a"),
            candidate(Some(1), "c"),
        ]
    };
    for (keep, expected) in [
        (
            3,
            vec![
                candidate(Some(5), "a"),
                candidate(Some(5), "b"),
                candidate(Some(1), "c"),
            ],
        ),
        (
            9,
            vec![
                candidate(Some(5), "a"),
                candidate(Some(5), "b"),
                candidate(Some(1), "c"),
                candidate(None, "a"),
            ],
        ),
    ] {
        let mut newest = Newest::new(keep);
        offered().into_iter().for_each(|c| newest.offer(c));
        assert_eq!(newest.total, 4);
        assert_eq!(newest.into_sorted(), expected, "{keep}");
    }
}

#[test]
fn bad_patterns_are_named() {
    for (pattern, needle) in [
        ("", "empty"),
        ("/etc/*", "is absolute"),
        ("../*.rs", "contains \"..\""),
        ("src/../../x", "contains \"..\""),
        ("a[", "invalid glob pattern \"a[\""),
        ("{a,b", "invalid glob pattern \"{a,b\""),
        ("a\0b", "NUL"),
    ] {
        let err = match parse(pattern) {
            Err(err) => err,
            Ok(_) => panic!("{pattern:?} parsed"),
        };
        assert!(matches!(err, ToolError::Validation(_)), "{pattern:?}");
        assert!(err.message().contains(needle), "{pattern:?}: {err}");
    }
}
