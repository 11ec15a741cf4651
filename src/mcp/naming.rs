//! Bridged tool names (DESIGN §8): `mcp__{server}__{tool}`, characters outside
//! `[A-Za-z0-9_-]` replaced by `_`, at most 64 characters.
//!
//! A longer name keeps its first 55 characters and gets `_` plus 8 hex digits of the xxh3
//! hash of the whole unsanitised name: stable across restarts and daemons (a rule or an
//! approval written for it keeps matching), and two long names that share a prefix still
//! differ. The server's own name for the tool is what goes on the wire.

/// The longest tool name providers accept.
pub const MAX_NAME: usize = 64;
const HASH_DIGITS: usize = 8;

/// The name a server's tool has in a session's pool.
pub fn bridged_name(server: &str, tool: &str) -> String {
    let full = format!("mcp__{server}__{tool}");
    let sanitised: String = full
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if sanitised.len() <= MAX_NAME {
        return sanitised;
    }
    let hash = xxhash_rust::xxh3::xxh3_64(full.as_bytes());
    let keep = MAX_NAME - HASH_DIGITS - 1;
    format!(
        "{}_{:0width$x}",
        &sanitised[..keep],
        hash >> 32,
        width = HASH_DIGITS
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_sanitised_only() {
        assert_eq!(bridged_name("fs", "read_file"), "mcp__fs__read_file");
        assert_eq!(bridged_name("fs", "read.file v2"), "mcp__fs__read_file_v2");
        assert_eq!(bridged_name("fs", "läsa"), "mcp__fs__l_sa");
    }

    #[test]
    fn long_names_are_cut_with_a_stable_distinct_suffix() {
        let long = "x".repeat(80);
        let a = bridged_name("server", &format!("{long}a"));
        let b = bridged_name("server", &format!("{long}b"));
        assert_eq!(a.len(), MAX_NAME);
        assert_eq!(b.len(), MAX_NAME);
        assert_ne!(a, b);
        assert_eq!(a, bridged_name("server", &format!("{long}a")));
        assert!(crate::tool::is_valid_tool_name(&a), "{a}");
        // Pinned: the suffix must not change between releases (rules name these tools).
        assert_eq!(
            bridged_name("s", &"t".repeat(70)),
            format!("mcp__s__{}_0242813f", "t".repeat(47))
        );
    }

    #[test]
    fn exactly_64_characters_is_kept() {
        let tool = "t".repeat(MAX_NAME - "mcp__fs__".len());
        assert_eq!(bridged_name("fs", &tool).len(), MAX_NAME);
        assert!(!bridged_name("fs", &tool).contains("_t_"));
    }
}
