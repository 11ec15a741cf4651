//! `[[auth.tokens]]` read through the settings loader, and every way an entry is refused.

use super::*;
use crate::config::{ConfigError, Settings};

fn load(toml: &str) -> Result<Settings, ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toold.toml");
    std::fs::write(&path, toml).unwrap();
    Settings::load(Some(&path), |_| None)
}

fn entry(name: &str, source: &str, role: &str) -> String {
    format!("[[auth.tokens]]\nname = \"{name}\"\n{source}\nrole = \"{role}\"\n")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[test]
fn tokens_by_digest_or_in_plain_name_their_principals_after_the_admin_tokens() {
    let digest_b = hex(&digest("secret-b"));
    let toml = [
        entry("ci-agent", "token = \"secret-a\"", "agent"),
        entry(
            "dashboards",
            &format!("sha256 = \"{}\"", digest_b.to_uppercase()),
            "observer",
        ),
    ]
    .concat();
    let mut settings = load(&toml).unwrap();
    settings.server.auth_tokens = vec!["first".into(), "second".into()];
    let principals = settings.auth_principals().unwrap();
    let named: Vec<(String, Role)> = principals
        .iter()
        .map(|(_, p)| (p.name.to_string(), p.role))
        .collect();
    assert_eq!(
        named,
        [
            ("token-1".to_owned(), Role::Admin),
            ("token-2".to_owned(), Role::Admin),
            ("ci-agent".to_owned(), Role::Agent),
            ("dashboards".to_owned(), Role::Observer),
        ]
    );
    assert_eq!(principals[0].0, digest("first"));
    assert_eq!(principals[2].0, digest("secret-a"));
    assert_eq!(principals[3].0, digest("secret-b"));
    // The plain token never shows in a debug rendering (what logs would print).
    let debug = format!("{:?}", settings.auth);
    assert!(
        !debug.contains("secret-a") && debug.contains("<redacted>"),
        "{debug}"
    );
}

#[test]
fn a_bad_entry_is_refused_with_a_message_naming_it() {
    let good = entry("a", "token = \"one\"", "agent");
    let cases = [
        (
            entry("b", "token = \"one\"", "agent"),
            "the same token as \"a\"",
        ),
        (
            entry("a", "token = \"two\"", "agent"),
            "the name \"a\" is taken",
        ),
        (
            entry("token-1", "token = \"two\"", "agent"),
            "the name \"token-1\" is taken",
        ),
        (
            entry(" ", "token = \"two\"", "agent"),
            "auth.tokens[1]: name must not be empty",
        ),
        (
            entry("b", "sha256 = \"abc\"", "agent"),
            "sha256 must be 64 hex digits, got \"abc\"",
        ),
        (
            entry("b", &format!("sha256 = \"+{}\"", "f".repeat(63)), "agent"),
            "64 hex digits",
        ),
        (
            entry("b", &format!("sha256 = \"{}\"", "g".repeat(64)), "agent"),
            "64 hex digits",
        ),
        (
            entry("b", "", "agent"),
            "give exactly one of sha256 and token, not neither",
        ),
        (
            entry(
                "b",
                &format!("token = \"x\"\nsha256 = \"{}\"", "0".repeat(64)),
                "agent",
            ),
            "give exactly one of sha256 and token, not both",
        ),
        (
            entry("b", "token = \"two\"", "root"),
            "unknown variant: found `root`",
        ),
        (
            format!(
                "{}colour = \"red\"\n",
                entry("b", "token = \"two\"", "agent")
            ),
            "colour",
        ),
    ];
    for (second, expected) in cases {
        let mut settings = match load(&format!("{good}{second}")) {
            Ok(settings) => settings,
            Err(err) => {
                assert!(
                    err.to_string().contains(expected),
                    "{err} lacks {expected:?}"
                );
                continue;
            }
        };
        // `--auth-token` tokens join after loading, as the command line applies them.
        settings.server.auth_tokens = vec!["flag".into()];
        let err = settings.auth_principals().unwrap_err().to_string();
        assert!(err.contains(expected), "{err} lacks {expected:?}");
    }
}

#[test]
fn without_entries_only_the_admin_tokens_count() {
    let settings = load("").unwrap();
    assert!(settings.auth_principals().unwrap().is_empty());
    let mut settings = settings;
    settings.server.auth_tokens = vec!["toold".to_owned()];
    let principals = settings.auth_principals().unwrap();
    assert_eq!(principals.len(), 1);
    assert_eq!(&*principals[0].1.name, "token-1");
}
