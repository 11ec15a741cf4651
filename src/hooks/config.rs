//! `[[hooks.pre_tool_use]]`, `[[hooks.post_tool_use]]` and `[[hooks.post_tool_use_failure]]`
//! settings (DESIGN §5), and their checks: a matcher that compiles, exactly one of `command`
//! or `url`, an `http(s)` URL, a timeout within range. Deliberately absent: running hooks
//! ([`super::command`], [`super::url_hook`]) and composing them ([`super::HookChain`]).

use regex::Regex;
use serde::{Deserialize, Serialize};

/// A hook's default timeout, in milliseconds.
pub const DEFAULT_HOOK_TIMEOUT_MS: u64 = 10_000;
/// The longest timeout a hook may have (a hook holds its call up that long).
pub const MAX_HOOK_TIMEOUT_MS: u64 = 600_000;

/// Every configured hook, per event, in configuration order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HookSettings {
    pub pre_tool_use: Vec<HookConfig>,
    pub post_tool_use: Vec<HookConfig>,
    pub post_tool_use_failure: Vec<HookConfig>,
}

/// One hook.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    /// A regex that must match the whole (canonical) tool name; `*` or empty matches all.
    #[serde(default)]
    pub matcher: String,
    /// Run through `/bin/sh -c`, JSON on stdin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// POSTed the same JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default)]
    pub on_failure: OnFailure,
}

fn default_timeout_ms() -> u64 {
    DEFAULT_HOOK_TIMEOUT_MS
}

/// What a hook that crashed, timed out or answered nonsense means for the call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// Log it and go on as if the hook had said nothing.
    #[default]
    Allow,
    /// A pre-tool hook's failure blocks the call; a post-tool hook's is told to the model.
    Block,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HookConfigError {
    #[error("hooks.{event}[{index}]: give exactly one of command or url")]
    CommandOrUrl { event: &'static str, index: usize },
    #[error("hooks.{event}[{index}]: matcher \"{matcher}\" is not a valid regex: {problem}")]
    Matcher {
        event: &'static str,
        index: usize,
        matcher: String,
        problem: String,
    },
    #[error("hooks.{event}[{index}]: url \"{url}\" is not an http or https URL")]
    Url {
        event: &'static str,
        index: usize,
        url: String,
    },
    #[error(
        "hooks.{event}[{index}]: timeout_ms {value} is out of range (1 to {MAX_HOOK_TIMEOUT_MS})"
    )]
    Timeout {
        event: &'static str,
        index: usize,
        value: u64,
    },
}

impl HookSettings {
    /// The three lists with their settings names.
    pub fn events(&self) -> [(&'static str, &[HookConfig]); 3] {
        [
            ("pre_tool_use", &self.pre_tool_use),
            ("post_tool_use", &self.post_tool_use),
            ("post_tool_use_failure", &self.post_tool_use_failure),
        ]
    }

    pub fn check(&self) -> Result<(), HookConfigError> {
        for (event, hooks) in self.events() {
            for (index, hook) in hooks.iter().enumerate() {
                hook.check(event, index)?;
            }
        }
        Ok(())
    }
}

impl HookConfig {
    fn check(&self, event: &'static str, index: usize) -> Result<(), HookConfigError> {
        let given = |v: &Option<String>| v.as_deref().is_some_and(|t| !t.trim().is_empty());
        if given(&self.command) == given(&self.url) {
            return Err(HookConfigError::CommandOrUrl { event, index });
        }
        if let Some(url) = self.url.as_deref().filter(|_| given(&self.url)) {
            let ok = url::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https"));
            if !ok {
                return Err(HookConfigError::Url {
                    event,
                    index,
                    url: url.to_owned(),
                });
            }
        }
        if !(1..=MAX_HOOK_TIMEOUT_MS).contains(&self.timeout_ms) {
            return Err(HookConfigError::Timeout {
                event,
                index,
                value: self.timeout_ms,
            });
        }
        self.matcher_regex()
            .map_err(|problem| HookConfigError::Matcher {
                event,
                index,
                matcher: self.matcher.clone(),
                problem,
            })
            .map(|_| ())
    }

    /// The matcher anchored to the whole name; `None` matches every tool.
    pub fn matcher_regex(&self) -> Result<Option<Regex>, String> {
        let matcher = self.matcher.trim();
        if matcher.is_empty() || matcher == "*" {
            return Ok(None);
        }
        Regex::new(&format!("^(?:{matcher})$"))
            .map(Some)
            .map_err(|err| err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(
        matcher: &str,
        command: Option<&str>,
        url: Option<&str>,
        timeout_ms: u64,
    ) -> HookConfig {
        HookConfig {
            matcher: matcher.into(),
            command: command.map(Into::into),
            url: url.map(Into::into),
            timeout_ms,
            on_failure: OnFailure::Allow,
        }
    }

    fn check_one(config: HookConfig) -> Result<(), HookConfigError> {
        HookSettings {
            pre_tool_use: vec![config],
            ..HookSettings::default()
        }
        .check()
    }

    #[test]
    fn bad_hooks_are_named_by_event_and_index() {
        let cases = [
            (
                hook("bash", None, None, 10),
                "exactly one of command or url",
            ),
            (hook("bash", Some("x"), Some("http://a"), 10), "exactly one"),
            (hook("bash", Some("  "), None, 10), "exactly one"),
            (hook("(bash", Some("x"), None, 10), "matcher \"(bash\""),
            (hook("", None, Some("ftp://a/b"), 10), "url \"ftp://a/b\""),
            (hook("", None, Some("not a url"), 10), "not an http"),
            (hook("", Some("x"), None, 0), "timeout_ms 0"),
            (hook("", Some("x"), None, 600_001), "timeout_ms 600001"),
        ];
        for (config, expected) in cases {
            let err = check_one(config).unwrap_err().to_string();
            assert!(err.starts_with("hooks.pre_tool_use[0]"), "{err}");
            assert!(err.contains(expected), "{err} lacks {expected}");
        }
        assert!(check_one(hook("bash|write_file", Some("x"), None, 10)).is_ok());
        assert!(check_one(hook("*", None, Some("https://h/x"), 10)).is_ok());
    }

    #[test]
    fn matchers_match_whole_names_and_star_or_empty_match_all() {
        let m = hook("bash|write_file", Some("x"), None, 1)
            .matcher_regex()
            .unwrap()
            .unwrap();
        assert!(m.is_match("bash") && m.is_match("write_file"));
        assert!(!m.is_match("bash_output") && !m.is_match("rebash"));
        assert!(
            hook("*", Some("x"), None, 1)
                .matcher_regex()
                .unwrap()
                .is_none()
        );
        assert!(
            hook("", Some("x"), None, 1)
                .matcher_regex()
                .unwrap()
                .is_none()
        );
    }
}
