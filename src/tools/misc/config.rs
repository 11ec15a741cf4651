//! `config`: reads or sets the session's runtime settings, from a fixed table.
//!
//! Owns the table of known settings ([`RUNTIME_SETTINGS`]: key, bounds, default, meaning) and
//! [`runtime_setting_u64`], which the tools that honour a setting call to read it. A change is a
//! `ContextUpdate::RuntimeSetting` the session applies after the call; nothing here outlives
//! the session or touches the daemon's own settings file.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::string_field;
use crate::tool::{
    BuildError, ConcurrencyClass, ContextUpdate, InterruptBehavior, PermissionLevel, SessionView,
    Tool, ToolContext, ToolError, ToolOutput, ToolSpec,
};

/// A setting `config` knows: an integer within bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuntimeSettingSpec {
    pub key: &'static str,
    pub description: &'static str,
    pub min: u64,
    pub max: u64,
    pub default: u64,
}

/// Every setting a session may change. The tool named in each description reads it.
pub const RUNTIME_SETTINGS: &[RuntimeSettingSpec] = &[
    RuntimeSettingSpec {
        key: "bash_default_timeout_ms",
        description: "timeout of a bash command that gives none, in milliseconds",
        min: 1,
        max: 600_000,
        default: 120_000,
    },
    RuntimeSettingSpec {
        key: "web_fetch_max_chars",
        description: "characters web_fetch returns when a call gives no max_chars",
        min: 1,
        max: 1_000_000,
        default: 100_000,
    },
    RuntimeSettingSpec {
        key: "read_result_page_chars",
        description: "characters read_result returns when a call gives no limit",
        min: 1,
        max: 30_000,
        default: 30_000,
    },
    RuntimeSettingSpec {
        key: "tool_search_max_results",
        description: "matches tool_search returns when a call gives no max_results",
        min: 1,
        max: 50,
        default: 5,
    },
];

fn setting(key: &str) -> Option<&'static RuntimeSettingSpec> {
    RUNTIME_SETTINGS.iter().find(|spec| spec.key == key)
}

/// The value of a known integer setting in `session`: what the session set, else the
/// default. `None` for a key not in [`RUNTIME_SETTINGS`].
pub fn runtime_setting_u64(session: &dyn SessionView, key: &str) -> Option<u64> {
    let spec = setting(key)?;
    Some(
        session
            .runtime_setting(key)
            .and_then(|value| value.as_u64())
            .filter(|value| (spec.min..=spec.max).contains(value))
            .unwrap_or(spec.default),
    )
}

fn known_keys() -> String {
    RUNTIME_SETTINGS
        .iter()
        .map(|spec| spec.key)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `config` tool.
pub struct ConfigTool {
    spec: ToolSpec,
}

impl ConfigTool {
    pub fn new() -> Result<ConfigTool, BuildError> {
        let table: String = RUNTIME_SETTINGS
            .iter()
            .map(|spec| {
                format!(
                    "\n- {}: {} (integer {}..={}, default {})",
                    spec.key, spec.description, spec.min, spec.max, spec.default
                )
            })
            .collect();
        let spec = ToolSpec::builder("config")
            .description(format!(
                "Reads or changes one of this session's runtime settings. Give `setting` alone \
                 to read its current value (the default until changed); give `setting` and \
                 `value` to change it for the rest of the session. Known settings:{table}"
            ))
            .input_schema(json!({
                "type": "object",
                "properties": {
                    "setting": {
                        "type": "string",
                        "description": "The setting's name, one of those listed in this tool's description",
                        "minLength": 1,
                        "maxLength": 200
                    },
                    "value": {
                        "type": ["integer", "string"],
                        "description": "The new value (an integer, or a string holding one); omit to read"
                    }
                },
                "required": ["setting"],
                "additionalProperties": false
            }))
            .read_only_if(|input, _| Ok(is_read(input)))
            .concurrency_safe_if(|input, _| Ok(is_read(input)))
            .destructive(false)
            .permission(PermissionLevel::ReadOnly)
            .concurrency_class(ConcurrencyClass::WriteExclusive)
            .interrupt_behavior(InterruptBehavior::Cancel)
            .idempotent(true)
            .open_world(false)
            .max_result_size_chars(None)
            .build()?;
        Ok(ConfigTool { spec })
    }
}

fn is_read(input: &Value) -> bool {
    matches!(input.get("value"), None | Some(Value::Null))
}

/// The known setting named in the input.
fn named_setting(input: &Value) -> Result<&'static RuntimeSettingSpec, ToolError> {
    let key = string_field(input, "setting")?;
    setting(key).ok_or_else(|| {
        ToolError::Validation(format!(
            "unknown setting \"{key}\"; known settings: {}",
            known_keys()
        ))
    })
}

/// The value to set, parsed and checked against the setting's bounds.
fn parse_value(spec: &RuntimeSettingSpec, value: &Value) -> Result<u64, ToolError> {
    let parsed = match value {
        Value::Number(number) => number.as_u64(),
        Value::String(text) => text.trim().parse::<u64>().ok(),
        _ => None,
    };
    let Some(parsed) = parsed else {
        return Err(ToolError::Validation(format!(
            "\"{}\" takes a non-negative integer, got {value}",
            spec.key
        )));
    };
    if !(spec.min..=spec.max).contains(&parsed) {
        return Err(ToolError::Validation(format!(
            "\"{}\" must be between {} and {}, got {parsed}",
            spec.key, spec.min, spec.max
        )));
    }
    Ok(parsed)
}

#[async_trait]
impl Tool for ConfigTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), ToolError> {
        let spec = named_setting(input)?;
        match input.get("value") {
            None | Some(Value::Null) => Ok(()),
            Some(value) => parse_value(spec, value).map(drop),
        }
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let spec = named_setting(&input)?;
        let is_set = ctx.session.runtime_setting(spec.key).is_some();
        // Only a key in the table is asked for, so the value is always present.
        let current = runtime_setting_u64(&*ctx.session, spec.key).unwrap_or(spec.default);
        let (output, value) = match input.get("value") {
            None | Some(Value::Null) => {
                let origin = if is_set {
                    "set in this session"
                } else {
                    "default"
                };
                let output = ToolOutput::text(format!(
                    "{} = {current} ({origin}; {}, integer {}..={})",
                    spec.key, spec.description, spec.min, spec.max
                ));
                (output, current)
            }
            Some(value) => {
                let new = parse_value(spec, value)?;
                let output = ToolOutput::text(format!("{} set to {new} (was {current})", spec.key))
                    .with_update(ContextUpdate::RuntimeSetting {
                        key: spec.key.to_owned(),
                        value: json!(new),
                    })
                    .with_metadata("previous", json!(current));
                (output, new)
            }
        };
        Ok(output
            .with_metadata("setting", json!(spec.key))
            .with_structured(json!({ "setting": spec.key, "value": value })))
    }
}
