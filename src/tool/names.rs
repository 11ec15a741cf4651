//! Tool-name rules and "did you mean" suggestions for unknown names.

/// The built-in `agent` tool: its spec is toold's, its executor the provider named `agent`
/// (`crate::provider`). Permission rules may name it while no such provider is connected.
pub const AGENT_TOOL: &str = "agent";

/// Whether a name is a provided tool's (`{provider}__{tool}`, DESIGN §11) or an MCP server's:
/// a valid name with a `__` separator. Rules may name such tools before they exist.
pub fn is_external_tool_name(name: &str) -> bool {
    is_valid_tool_name(name) && name.contains("__")
}

/// Whether `name` matches `^[a-zA-Z0-9_-]{1,64}$` (the rule every provider accepts).
pub fn is_valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The candidate closest to `name` by edit distance (case-insensitive), if it is close
/// enough to be a plausible typo: at most a third of the name's length, and at least 1.
/// On a tie the earlier candidate wins, so callers list canonical names before aliases.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let wanted = name.to_ascii_lowercase();
    let limit = (wanted.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|candidate| {
            (
                edit_distance(&wanted, &candidate.to_ascii_lowercase()),
                candidate,
            )
        })
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance over chars, in O(len(b)) memory.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_provider_rule() {
        for ok in ["read_file", "Read", "a", "mcp__srv__x-1", &"x".repeat(64)] {
            assert!(is_valid_tool_name(ok), "{ok}");
        }
        for bad in [
            "",
            "has space",
            "dot.name",
            "ünïcode",
            "semi;colon",
            &"x".repeat(65),
        ] {
            assert!(!is_valid_tool_name(bad), "{bad}");
        }
    }

    #[test]
    fn suggestions_catch_typos_only() {
        let names = ["read_file", "write_file", "bash", "Read"];
        assert_eq!(closest("reed_file", names), Some("read_file"));
        assert_eq!(closest("BASH", names), Some("bash"));
        assert_eq!(closest("rite_file", names), Some("write_file"));
        assert_eq!(closest("completely_else", names), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
