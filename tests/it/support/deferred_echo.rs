//! A deferred test tool (`misc` and `service` register it): it is loaded with `tool_search`
//! and echoes its input's `text`.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use toold::permission::PermissionLevel;
use toold::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolSpec};

pub struct DeferredEcho {
    spec: ToolSpec,
}

impl DeferredEcho {
    pub fn tool(name: &str, description: &str) -> Arc<dyn Tool> {
        let spec = ToolSpec::builder(name)
            .description(description)
            .input_schema(json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "additionalProperties": false
            }))
            .should_defer(true)
            .read_only(true)
            .concurrency_safe(true)
            .destructive(false)
            .permission(PermissionLevel::ReadOnly)
            .max_result_size_chars(Some(1_000))
            .build()
            .expect("test spec builds");
        Arc::new(DeferredEcho { spec })
    }
}

#[async_trait]
impl Tool for DeferredEcho {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(input["text"].as_str().unwrap_or_default()))
    }
}
