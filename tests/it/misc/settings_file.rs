//! `config/toold.toml` says it lists every setting with its default: held to what
//! `toold settings` prints. Every leaf key of the printed JSON (`section.key`; arrays are
//! leaves) must be in the file and every key in the file must be a setting.
//!
//! The file's convention: a setting is a line `key = value` under its `[section]`, or, for one
//! without a default value to show, the same line commented out (`# key = "..."`, one space
//! after the `#`). A commented `# [[name]]` (an array of tables, empty by default) names the
//! setting `name`; the lines after it up to the next section are an example entry's fields,
//! not settings of their own.

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

use crate::support::daemon::without_settings;
use crate::support::deadline::{OutputWithin, STEP};

const SETTINGS_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/toold.toml");

/// `toold settings` (with `extra` arguments) and none of the caller's `TOOLD_*` settings.
fn printed_settings(extra: &[&str]) -> Value {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toold"));
    command.arg("settings").args(extra);
    without_settings(&mut command);
    // `toold settings` only prints; it cannot wait on anything, so `output` returns.
    let output = command
        .output_within(STEP, "toold settings")
        .expect("toold settings starts");
    assert!(
        output.status.success(),
        "toold settings {extra:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("toold settings prints JSON")
}

/// The dotted paths of `value`'s leaves (objects are walked, anything else is a leaf).
fn leaf_keys(prefix: &str, value: &Value, keys: &mut BTreeSet<String>) {
    match value {
        Value::Object(members) => {
            for (name, member) in members {
                let path = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}.{name}")
                };
                leaf_keys(&path, member, keys);
            }
        }
        _ => {
            keys.insert(prefix.to_owned());
        }
    }
}

/// Whether `text` starts like a TOML value (so `# false = no network` is prose, not a key).
fn looks_like_value(text: &str) -> bool {
    let text = text.trim_start();
    text.starts_with(['"', '[', '{', '-', '\''])
        || text.starts_with(|c: char| c.is_ascii_digit())
        || text.starts_with("true")
        || text.starts_with("false")
}

/// The settings `file` lists, by the convention in this module's header.
fn file_keys(file: &str) -> BTreeSet<String> {
    let key_line = regex::Regex::new(r"^(?:# )?([a-z_]+) *= *(.*)$").unwrap();
    let table = regex::Regex::new(r"^(?:# )?\[([a-z_.]+)\]\s*$").unwrap();
    let array_of_tables = regex::Regex::new(r"^(?:# )?\[\[([a-z_.]+)\]\]\s*$").unwrap();
    let mut keys = BTreeSet::new();
    // `None` inside an example entry of an array of tables.
    let mut section = Some(String::new());
    for line in file.lines() {
        if let Some(captures) = array_of_tables.captures(line) {
            keys.insert(captures[1].to_owned());
            section = None;
        } else if let Some(captures) = table.captures(line) {
            section = Some(captures[1].to_owned());
        } else if let (Some(section), Some(captures)) = (&section, key_line.captures(line)) {
            let commented = line.starts_with('#');
            if commented && !looks_like_value(&captures[2]) {
                continue;
            }
            let key = if section.is_empty() {
                captures[1].to_owned()
            } else {
                format!("{section}.{}", &captures[1])
            };
            keys.insert(key);
        }
    }
    keys
}

#[test]
fn the_settings_file_lists_every_setting_toold_settings_shows() {
    let mut shown = BTreeSet::new();
    leaf_keys("", &printed_settings(&[]), &mut shown);
    let file = std::fs::read_to_string(SETTINGS_FILE).unwrap();
    let listed = file_keys(&file);
    let missing: Vec<_> = shown.difference(&listed).collect();
    let extra: Vec<_> = listed.difference(&shown).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "config/toold.toml and `toold settings` disagree:\n  settings missing from the \
         file: {missing:?}\n  keys in the file that are no setting: {extra:?}"
    );
}

#[test]
fn the_settings_file_holds_the_defaults() {
    let defaults = printed_settings(&[]);
    let from_file = printed_settings(&["--config", SETTINGS_FILE]);
    let mut keys = BTreeSet::new();
    leaf_keys("", &defaults, &mut keys);
    let differing: Vec<_> = keys
        .iter()
        .filter(|key| {
            let pointer = format!("/{}", key.replace('.', "/"));
            defaults.pointer(&pointer) != from_file.pointer(&pointer)
        })
        .collect();
    assert!(
        differing.is_empty(),
        "config/toold.toml sets these to something other than their defaults: {differing:?}"
    );
}

#[test]
fn the_file_convention_reads_keys_commented_keys_and_example_entries() {
    let file = "# intro prose = not a key\n[a]\nx = 1\n# y = \"commented\"\n\
                # false = prose\n#   z = 3\n# [[b]]\n# name = \"example\"\n[c]\nw = []\n";
    let keys: Vec<_> = file_keys(file).into_iter().collect();
    assert_eq!(keys, ["a.x", "a.y", "b", "c.w"]);
}
