//! What an MCP `tools/call` result becomes (DESIGN §8): the text the model sees, and what is
//! kept beside it.
//!
//! Text blocks are given as they are, joined by newlines. Images and audio become a one-line
//! placeholder with their type and decoded size, and resource links and embedded resources are
//! named, so a model is never handed kilobytes of base64. The bytes are not thrown away: when
//! a result has any, the whole result (the text, then each binary block as a `data:` URI) is
//! written to a spill file, which the offload phase stores as the call's offloaded result and
//! `read_result` pages through; the preview is the model's text. The spill file lives in the
//! system's temporary directory only until the offload phase has streamed it into the store.
//!
//! The result is read as JSON rather than through rmcp's content enums: the wire shape is the
//! protocol's and stable, the enums are the SDK's and change between releases.

use std::io::Write;

use serde_json::Value;

use crate::tool::{ErrorKind, SpilledOutput, ToolOutput};

/// The model's text and the binary blocks as `data:` URIs.
#[derive(Debug, Default, PartialEq)]
pub struct Rendered {
    pub text: String,
    pub attachments: Vec<String>,
}

/// Renders a `CallToolResult`'s `content` array.
pub fn render(content: &[Value]) -> Rendered {
    let mut rendered = Rendered::default();
    let mut parts: Vec<String> = Vec::with_capacity(content.len());
    for block in content {
        let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or("");
        match field("type") {
            "text" => parts.push(field("text").to_owned()),
            kind @ ("image" | "audio") => {
                let data = field("data");
                let mime = field("mimeType");
                parts.push(format!(
                    "[{kind}: {}, {} bytes]",
                    if mime.is_empty() {
                        "unknown type"
                    } else {
                        mime
                    },
                    decoded_len(data)
                ));
                rendered
                    .attachments
                    .push(format!("data:{mime};base64,{data}"));
            }
            "resource_link" => {
                let name = field("name");
                if name.is_empty() {
                    parts.push(format!("[resource link: {}]", field("uri")));
                } else {
                    parts.push(format!("[resource link: {} ({name})]", field("uri")));
                }
            }
            "resource" => {
                let resource = block.get("resource").cloned().unwrap_or(Value::Null);
                let inner = |name: &str| {
                    resource
                        .get(name)
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                };
                let uri = inner("uri").unwrap_or_default();
                match (inner("text"), inner("blob")) {
                    (Some(text), _) => parts.push(format!("[resource: {uri}]\n{text}")),
                    (None, Some(blob)) => {
                        let mime = inner("mimeType").unwrap_or_default();
                        parts.push(format!(
                            "[resource: {uri}, {}, {} bytes]",
                            if mime.is_empty() {
                                "unknown type"
                            } else {
                                &mime
                            },
                            decoded_len(&blob)
                        ));
                        rendered
                            .attachments
                            .push(format!("data:{mime};base64,{blob}"));
                    }
                    (None, None) => parts.push(format!("[resource: {uri}]")),
                }
            }
            other => parts.push(format!("[content of type \"{other}\"]")),
        }
    }
    rendered.text = parts.join("\n");
    rendered
}

/// The size of the bytes base64 `data` stands for.
fn decoded_len(data: &str) -> usize {
    let data = data.trim_end_matches('=');
    data.len() * 3 / 4
}

/// A whole `CallToolResult` (as JSON) as the call's output.
pub fn to_output(result: &Value) -> ToolOutput {
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let rendered = render(blocks);
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    let mut output = if is_error {
        ToolOutput {
            error_kind: Some(ErrorKind::Execution),
            ..ToolOutput::failure(rendered.text.clone())
        }
    } else {
        ToolOutput::text(rendered.text.clone())
    };
    if let Some(structured) = result.get("structuredContent") {
        output = output.with_metadata("structured_content", structured.clone());
    }
    if !rendered.attachments.is_empty() {
        match spill(&rendered) {
            Ok(spilled) => output.spill = Some(std::sync::Arc::new(spilled)),
            Err(err) => {
                tracing::warn!(error = %err, "an MCP result's binary content could not be kept");
            }
        }
    }
    output
}

/// Writes the text and the attachments to a file the offload phase stores.
fn spill(rendered: &Rendered) -> std::io::Result<SpilledOutput> {
    let path = std::env::temp_dir().join(format!(
        "toold-mcp-result-{}",
        uuid::Uuid::now_v7().simple()
    ));
    let mut file = std::fs::File::create(&path)?;
    let mut bytes = 0u64;
    let mut write = |part: &str| -> std::io::Result<()> {
        file.write_all(part.as_bytes())?;
        bytes += part.len() as u64;
        Ok(())
    };
    write(&rendered.text)?;
    for attachment in &rendered.attachments {
        write("\n\n")?;
        write(attachment)?;
    }
    Ok(SpilledOutput::new(
        path,
        bytes,
        rendered.text.clone(),
        String::new(),
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_block_kind_becomes_text_a_model_can_read() {
        let content = [
            json!({"type": "text", "text": "hello"}),
            json!({"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}),
            json!({"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}),
            json!({"type": "resource_link", "uri": "file:///a", "name": "a"}),
            json!({"type": "resource", "resource": {"uri": "file:///b", "text": "bee"}}),
            json!({"type": "resource", "resource": {"uri": "file:///c", "blob": "AAAA", "mimeType": "application/x"}}),
            json!({"type": "mystery"}),
        ];
        let rendered = render(&content);
        assert_eq!(
            rendered.text,
            "hello\n[image: image/png, 5 bytes]\n[audio: audio/wav, 3 bytes]\n\
             [resource link: file:///a (a)]\n[resource: file:///b]\nbee\n\
             [resource: file:///c, application/x, 3 bytes]\n[content of type \"mystery\"]"
        );
        assert_eq!(
            rendered.attachments,
            [
                "data:image/png;base64,aGVsbG8=",
                "data:audio/wav;base64,AAAA",
                "data:application/x;base64,AAAA"
            ]
        );
    }

    #[test]
    fn is_error_structured_content_and_binary_blocks_are_kept() {
        let output = to_output(&json!({
            "content": [{"type": "text", "text": "no such file"}],
            "isError": true,
            "structuredContent": {"code": 2}
        }));
        assert!(output.is_error);
        assert_eq!(output.error_kind, Some(ErrorKind::Execution));
        assert_eq!(output.text, "no such file");
        assert_eq!(output.metadata["structured_content"], json!({"code": 2}));
        assert!(output.spill.is_none());

        let output = to_output(&json!({"content": [
            {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}
        ]}));
        let spill = output.spill.expect("binary content is spilled");
        let kept = std::fs::read_to_string(spill.path()).unwrap();
        assert_eq!(
            kept,
            "[image: image/png, 5 bytes]\n\ndata:image/png;base64,aGVsbG8="
        );
        assert_eq!(spill.head, "[image: image/png, 5 bytes]");
    }

    #[test]
    fn a_result_without_content_is_empty_text() {
        assert_eq!(to_output(&json!({})).text, "");
        assert!(!to_output(&json!({"isError": false})).is_error);
    }
}
