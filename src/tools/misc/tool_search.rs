//! `tool_search`: finds deferred tools by keyword, and loads them with `select:a,b`.
//!
//! Owns the keyword scoring and the two output shapes (matches; loaded definitions). It sees
//! the batch's frozen pool only through `ctx.tools` (deferred tools not loaded yet) and loads
//! by returning `ContextUpdate::LoadTools`, which takes effect from the session's next batch.
//! It is never deferred itself: the pool guarantees that.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{optional_whole_number, runtime_setting_u64, string_field};
use crate::tool::{
    BuildError, ConcurrencyClass, ContextUpdate, DeferredTool, InterruptBehavior, PermissionLevel,
    Tool, ToolContext, ToolError, ToolOutput, ToolSpec,
};

const MAX_RESULTS_SETTING: &str = "tool_search_max_results";
const DEFAULT_MAX_RESULTS: u64 = 5;
const MAX_MAX_RESULTS: u64 = 50;
/// Deferred tool names listed when nothing matches (a hint, not a catalogue).
const NAMES_LISTED: usize = 50;
const SUMMARY_CHARS: usize = 200;

/// The `tool_search` tool.
pub struct ToolSearchTool {
    spec: ToolSpec,
}

impl ToolSearchTool {
    pub fn new() -> Result<ToolSearchTool, BuildError> {
        let spec = ToolSpec::builder("tool_search")
            .description(
                "Finds tools that are available but not loaded yet (deferred), and loads them. \
                 Search with keywords (`query: \"slack message\"`; prefix a word with + to \
                 require it): matching tools are listed by name and description. Load tools by \
                 name with `query: \"select:name_one,name_two\"`: their full definitions are \
                 returned and they can be called from your next batch of tool calls (not in the \
                 batch that loads them).",
            )
            .input_schema(json!({
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "Keywords to search for, or \"select:\" followed by comma-separated tool names to load",
                        "minLength": 1,
                        "maxLength": 1000
                    },
                    "max_results": {
                        "type": "integer",
                        "description": format!("Most matches to list (default {DEFAULT_MAX_RESULTS})"),
                        "minimum": 1,
                        "maximum": MAX_MAX_RESULTS
                    }
                },
                "required": ["query"],
                "additionalProperties": false
            }))
            // Loading changes only which tools the session's next batch offers, and loading a
            // tool twice is the same as once, so parallel calls cannot disagree.
            .read_only_if(|input, _| Ok(select_names(input).is_none()))
            .concurrency_safe(true)
            .destructive(false)
            .permission(PermissionLevel::ReadOnly)
            .concurrency_class(ConcurrencyClass::ReadOnly)
            .interrupt_behavior(InterruptBehavior::Cancel)
            .idempotent(true)
            .open_world(false)
            .max_result_size_chars(Some(100_000))
            .build()?;
        Ok(ToolSearchTool { spec })
    }
}

/// The names of a `select:` query, or `None` for a keyword search.
fn select_names(input: &Value) -> Option<Vec<String>> {
    let query = input.get("query")?.as_str()?.trim();
    let rest = query
        .get(..7)
        .filter(|prefix| prefix.eq_ignore_ascii_case("select:"))
        .map(|_| &query[7..])?;
    let mut names: Vec<String> = Vec::new();
    for name in rest.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if !names.iter().any(|seen| seen == name) {
            names.push(name.to_owned());
        }
    }
    Some(names)
}

fn definition(tool: &DeferredTool) -> Value {
    json!({
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.input_schema,
    })
}

fn names_hint(deferred: &[DeferredTool]) -> String {
    if deferred.is_empty() {
        return "there are no deferred tools in this session".into();
    }
    let mut names: Vec<&str> = deferred.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    let more = names.len().saturating_sub(NAMES_LISTED);
    let mut hint = format!("deferred tools: {}", names[..names.len() - more].join(", "));
    if more > 0 {
        hint.push_str(&format!(" and {more} more"));
    }
    hint
}

fn select(names: Vec<String>, deferred: &[DeferredTool]) -> Result<ToolOutput, ToolError> {
    if names.is_empty() {
        return Err(ToolError::Validation(
            "\"select:\" needs at least one tool name, e.g. \"select:name_one,name_two\"".into(),
        ));
    }
    let (found, missing): (Vec<&String>, Vec<&String>) = names
        .iter()
        .partition(|name| deferred.iter().any(|tool| &tool.name == *name));
    if found.is_empty() {
        return Err(ToolError::Validation(format!(
            "no deferred tool named {}; {}",
            quoted(&missing),
            names_hint(deferred)
        )));
    }
    let definitions: Vec<Value> = found
        .iter()
        .filter_map(|name| deferred.iter().find(|tool| &tool.name == *name))
        .map(definition)
        .collect();
    let mut text = format!(
        "Loaded {} tool(s); call them from your next batch of tool calls:\n{}",
        definitions.len(),
        serde_json::to_string_pretty(&definitions).unwrap_or_default()
    );
    if !missing.is_empty() {
        text.push_str(&format!(
            "\n\nNot loaded (no deferred tool has the name; it may already be loaded): {}",
            quoted(&missing)
        ));
    }
    let loaded: Vec<String> = found.into_iter().cloned().collect();
    Ok(ToolOutput::text(text)
        .with_structured(json!({ "loaded": definitions, "not_found": missing }))
        .with_update(ContextUpdate::LoadTools { names: loaded }))
}

fn quoted(names: &[&String]) -> String {
    names
        .iter()
        .map(|name| format!("\"{name}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How well `tool` matches the query's terms; `None` when a required term is missing or
/// nothing matches.
fn score(tool: &DeferredTool, terms: &[(String, bool)]) -> Option<u32> {
    let name = tool.name.to_lowercase();
    let name_parts: Vec<&str> = name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| !p.is_empty())
        .collect();
    let description = tool.description.to_lowercase();
    let mut total = 0;
    for (term, required) in terms {
        let points = if name == *term {
            10
        } else if name_parts.contains(&term.as_str()) {
            6
        } else if name.contains(term.as_str()) {
            4
        } else if description
            .split(|c: char| !c.is_alphanumeric())
            .any(|word| word == term)
        {
            2
        } else if description.contains(term.as_str()) {
            1
        } else {
            0
        };
        if points == 0 && *required {
            return None;
        }
        total += points;
    }
    (total > 0).then_some(total)
}

fn search(query: &str, max_results: usize, deferred: &[DeferredTool]) -> ToolOutput {
    let terms: Vec<(String, bool)> = query
        .split_whitespace()
        .map(|word| match word.strip_prefix('+') {
            Some(rest) => (rest.to_lowercase(), true),
            None => (word.to_lowercase(), false),
        })
        .filter(|(term, _)| !term.is_empty())
        .collect();
    let mut matches: Vec<(u32, &DeferredTool)> = deferred
        .iter()
        .filter_map(|tool| score(tool, &terms).map(|points| (points, tool)))
        .collect();
    matches.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
    let total = matches.len();
    matches.truncate(max_results);
    if matches.is_empty() {
        return ToolOutput::text(format!(
            "No deferred tool matches \"{query}\"; {}",
            names_hint(deferred)
        ))
        .with_structured(json!({ "matches": [] }));
    }
    let mut text = format!(
        "{total} deferred tool(s) match \"{query}\"{}:\n",
        if total > matches.len() {
            format!(" (showing {})", matches.len())
        } else {
            String::new()
        }
    );
    for (_, tool) in &matches {
        let summary = tool.description.lines().next().unwrap_or_default();
        let (summary, cut) = super::cut_chars(summary, SUMMARY_CHARS);
        text.push_str(&format!(
            "- {}: {summary}{}\n",
            tool.name,
            if cut { "…" } else { "" }
        ));
    }
    let names: Vec<&str> = matches.iter().map(|(_, tool)| tool.name.as_str()).collect();
    text.push_str(&format!(
        "Load with tool_search {{\"query\": \"select:{}\"}}; loaded tools can be called from the next batch.",
        names.join(",")
    ));
    ToolOutput::text(text).with_structured(json!({ "matches": names, "total": total }))
}

#[async_trait]
impl Tool for ToolSearchTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let query = string_field(&input, "query")?.trim();
        if query.is_empty() {
            return Err(ToolError::Validation("\"query\" is blank".into()));
        }
        let deferred = ctx.tools.deferred_tools();
        if let Some(names) = select_names(&input) {
            return select(names, &deferred);
        }
        let max_results = match optional_whole_number(&input, "max_results")? {
            Some(0) => {
                return Err(ToolError::Validation(
                    "\"max_results\" must be at least 1".into(),
                ));
            }
            Some(n) => n.min(MAX_MAX_RESULTS),
            None => runtime_setting_u64(&*ctx.session, MAX_RESULTS_SETTING)
                .unwrap_or(DEFAULT_MAX_RESULTS),
        };
        Ok(search(
            query,
            usize::try_from(max_results).unwrap_or(usize::MAX),
            &deferred,
        ))
    }
}
