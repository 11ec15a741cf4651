//! The registry: the single source of truth for which tools exist, by name and alias.
//!
//! A tool is registered once, with its name checked, its schema compiled for validation and
//! flattened for providers. The base registry holds the built-in tools and is the only place
//! aliases are resolved; tools contributed from outside (MCP servers) are registered as
//! [`ToolSource::External`] and their aliases are never consulted. Pools, provider formats and
//! provider call shapes live in the submodules.

pub mod calls;
pub mod definitions;
mod pool;
mod results_json;
pub mod schema;

pub use definitions::{ToolFormat, UnknownFormat, definition, definitions};
// Name rules are the contract's; the registry applies them when tools register.
pub use crate::tool::{closest, is_valid_tool_name};
pub use pool::{
    DenySource, PoolCache, PoolDeny, PoolExclusion, PoolOptions, ToolPool, UnknownTool,
};

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::permission::ToolNames;
use crate::tool::{BuildError, Tool, ToolSpec};

/// The names and aliases of `registry`'s tools, for resolving the tools rules name.
pub fn tool_names(registry: &ToolRegistry) -> ToolNames {
    // `agent` is toold's spec, offered while its provider is connected (`crate::provider`).
    let names = registry.tools().map(|tool| tool.name());
    ToolNames::new(names.chain([crate::tool::AGENT_TOOL]), registry.aliases())
}

/// Where a tool comes from; decides alias resolution and de-duplication.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolSource {
    BuiltIn,
    External,
}

/// Why a tool cannot be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("tool name \"{0}\" does not match ^[a-zA-Z0-9_-]{{1,64}}$")]
    InvalidName(String),
    #[error("tool name \"{0}\" is already registered")]
    Duplicate(String),
    #[error("tool \"{tool}\": {problem}")]
    InvalidSchema { tool: String, problem: String },
}

/// A spec that does not build is a mistake in a tool's code; registering surfaces it as a
/// registry error naming the tool rather than a panic.
impl From<BuildError> for RegistryError {
    fn from(err: BuildError) -> RegistryError {
        RegistryError::InvalidSchema {
            tool: err.tool().to_owned(),
            problem: err.to_string(),
        }
    }
}

/// A tool ready for dispatch: its compiled validator and its provider-ready schema.
pub struct RegisteredTool {
    pub tool: Arc<dyn Tool>,
    pub source: ToolSource,
    /// The input schema with references inlined, as sent to providers.
    pub flattened_schema: Value,
    pub flattened_output_schema: Option<Value>,
    validator: jsonschema::Validator,
}

impl RegisteredTool {
    /// Checks the name and compiles the schema.
    pub fn new(tool: Arc<dyn Tool>, source: ToolSource) -> Result<RegisteredTool, RegistryError> {
        let spec = tool.spec();
        let invalid = |problem: String| RegistryError::InvalidSchema {
            tool: spec.name.clone(),
            problem,
        };
        if !is_valid_tool_name(&spec.name) {
            return Err(RegistryError::InvalidName(spec.name.clone()));
        }
        if let Some(alias) = spec.aliases.iter().find(|a| !is_valid_tool_name(a)) {
            return Err(RegistryError::InvalidName(alias.clone()));
        }
        if spec.input_schema.get("type") != Some(&Value::String("object".into())) {
            return Err(invalid(
                "the input schema must have \"type\": \"object\"".into(),
            ));
        }
        let validator = jsonschema::validator_for(&spec.input_schema)
            .map_err(|err| invalid(format!("the input schema does not compile: {err}")))?;
        let flattened_schema =
            schema::inline_refs(&spec.input_schema).map_err(|err| invalid(err.to_string()))?;
        let flattened_output_schema = spec
            .output_schema
            .as_ref()
            .map(schema::inline_refs)
            .transpose()
            .map_err(|err| invalid(err.to_string()))?;
        Ok(RegisteredTool {
            tool,
            source,
            flattened_schema,
            flattened_output_schema,
            validator,
        })
    }

    pub fn spec(&self) -> &ToolSpec {
        self.tool.spec()
    }

    pub fn name(&self) -> &str {
        &self.tool.spec().name
    }

    /// Fast check used to classify a call before it is scheduled.
    pub fn is_valid_input(&self, input: &Value) -> bool {
        self.validator.is_valid(input)
    }

    /// Validates `input` against the schema; the error names each failing field and why.
    /// Each problem is cut to a few hundred characters, since the validator quotes the
    /// offending value and a refusal is never offloaded.
    pub fn validate_input(&self, input: &Value) -> Result<(), String> {
        const SHOWN: usize = 5;
        const PROBLEM_CHARS: usize = 300;
        let problems: Vec<String> = self
            .validator
            .iter_errors(input)
            .take(SHOWN)
            .map(|err| {
                let path = err.instance_path().to_string();
                let problem = if path.is_empty() {
                    err.to_string()
                } else {
                    format!("at {path}: {err}")
                };
                if problem.chars().count() > PROBLEM_CHARS {
                    let cut: String = problem.chars().take(PROBLEM_CHARS).collect();
                    format!("{cut}…")
                } else {
                    problem
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

impl fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisteredTool")
            .field("name", &self.name())
            .field("source", &self.source)
            .finish()
    }
}

/// The base registry of built-in tools and their aliases.
#[derive(Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<RegisteredTool>>,
    /// alias → canonical name; built-in tools only.
    aliases: BTreeMap<String, String>,
}

impl ToolRegistry {
    pub fn new() -> ToolRegistry {
        ToolRegistry::default()
    }

    /// Registers a built-in tool. Names and aliases share one namespace.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let registered = RegisteredTool::new(tool, ToolSource::BuiltIn)?;
        let spec = registered.spec();
        for name in std::iter::once(&spec.name).chain(&spec.aliases) {
            if self.tools.contains_key(name) || self.aliases.contains_key(name) {
                return Err(RegistryError::Duplicate(name.clone()));
            }
        }
        let name = spec.name.clone();
        for alias in &spec.aliases {
            self.aliases.insert(alias.clone(), name.clone());
        }
        self.tools.insert(name, Arc::new(registered));
        Ok(())
    }

    /// Built-in tools, sorted by name.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<RegisteredTool>> {
        self.tools.values()
    }

    pub fn get(&self, name: &str) -> Option<&Arc<RegisteredTool>> {
        self.tools.get(name)
    }

    /// The canonical name for `name`: itself if registered, its target if an alias.
    pub fn canonical_name<'a>(&'a self, name: &'a str) -> Option<&'a str> {
        if self.tools.contains_key(name) {
            Some(name)
        } else {
            self.aliases.get(name).map(String::as_str)
        }
    }

    /// Every alias with its target.
    pub fn aliases(&self) -> impl Iterator<Item = (&str, &str)> {
        self.aliases.iter().map(|(a, n)| (a.as_str(), n.as_str()))
    }
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
