//! An MCP server's tool as an agentic tool, and its results as values a model can read.

use std::sync::Arc;

use agentic_core::{Approval, Tool, ToolContext, ToolError};
use async_trait::async_trait;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::{Value, json};

use crate::config::ApprovalPolicy;
use crate::server::Server;

/// Characters of a tool's description offered to a model at most.
const MAX_DESCRIPTION: usize = 1_000;

pub(crate) struct McpTool {
    server: Arc<Server>,
    /// `<server>.<tool>`.
    id: String,
    /// The tool's name on its server.
    name: String,
    description: String,
    input_schema: Value,
    output_schema: Value,
    destructive: bool,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    pub(crate) fn new(server: Arc<Server>, tool: &rmcp::model::Tool) -> Self {
        let mut description = tool
            .description
            .as_deref()
            .or(tool.title.as_deref())
            .unwrap_or("")
            .trim()
            .to_owned();
        if description.is_empty() {
            description = format!("The {} tool of the MCP server {}", tool.name, server.name);
        }
        if description.chars().count() > MAX_DESCRIPTION {
            description = description
                .chars()
                .take(MAX_DESCRIPTION)
                .collect::<String>()
                + "…";
        }
        let mut input_schema = Value::Object((*tool.input_schema).clone());
        if input_schema.get("type").is_none() {
            // The spec asks for an object schema; a server that leaves `type` out still takes
            // an object.
            input_schema["type"] = json!("object");
        }
        let output_schema = match &tool.output_schema {
            Some(schema) => Value::Object((**schema).clone()),
            // Without an output schema the result is the tool's text.
            None => json!({ "type": "string" }),
        };
        let annotations = tool.annotations.as_ref();
        let destructive = annotations.and_then(|a| a.destructive_hint) == Some(true)
            && annotations.and_then(|a| a.read_only_hint) != Some(true);
        Self {
            id: server.tool_id(&tool.name),
            name: tool.name.to_string(),
            description,
            input_schema,
            output_schema,
            destructive,
            server,
        }
    }
}

#[async_trait]
impl Tool for McpTool {
    fn id(&self) -> &str {
        &self.id
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    fn output_schema(&self) -> Option<&Value> {
        Some(&self.output_schema)
    }

    fn approval(&self, _input: &Value) -> Approval {
        match self.server.config.approval {
            ApprovalPolicy::Never => Approval::NotRequired,
            ApprovalPolicy::Always => Approval::Required {
                reason: format!(
                    "the MCP server \"{}\" is configured to ask before every call",
                    self.server.name
                ),
            },
            ApprovalPolicy::Destructive if self.destructive => Approval::Required {
                reason: format!(
                    "the MCP server \"{}\" marks {} as destructive",
                    self.server.name, self.name
                ),
            },
            ApprovalPolicy::Destructive => Approval::NotRequired,
        }
    }

    async fn invoke(&self, context: ToolContext, input: Value) -> Result<Value, ToolError> {
        let arguments = match input {
            Value::Object(map) => map,
            Value::Null => serde_json::Map::new(),
            other => {
                return Err(ToolError::InvalidInput {
                    tool: self.id.clone(),
                    message: format!("expected an object, got {other}"),
                });
            }
        };
        let result = self
            .server
            .call(&context, &self.name, arguments)
            .await
            .map_err(ToolError::Failed)?;
        result_value(result)
    }
}

/// A tool result as agentic's result: the structured content when there is some, else the
/// text. `isError` becomes an error with the server's text.
pub(crate) fn result_value(result: CallToolResult) -> Result<Value, ToolError> {
    let text = content_text(&result.content);
    if result.is_error == Some(true) {
        let message = if text.trim().is_empty() {
            result
                .structured_content
                .as_ref()
                .map(Value::to_string)
                .unwrap_or_else(|| "the tool failed and said nothing more".to_owned())
        } else {
            text
        };
        return Err(ToolError::Failed(message));
    }
    match result.structured_content {
        Some(value) => Ok(value),
        None => Ok(Value::String(text)),
    }
}

/// The content blocks as one text: text as it is, other blocks as a line saying what they
/// are.
fn content_text(content: &[ContentBlock]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for block in content {
        match block {
            ContentBlock::Text(text) => parts.push(text.text.clone()),
            ContentBlock::Image(image) => parts.push(format!(
                "[image: {}, {} bytes]",
                image.mime_type,
                base64_len(&image.data)
            )),
            ContentBlock::Audio(audio) => parts.push(format!(
                "[audio: {}, {} bytes]",
                audio.mime_type,
                base64_len(&audio.data)
            )),
            ContentBlock::Resource(embedded) => match &embedded.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    parts.push(format!("[resource {uri}]\n{text}"));
                }
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => parts.push(format!(
                    "[resource {uri}: {}, {} bytes]",
                    mime_type.as_deref().unwrap_or("binary"),
                    base64_len(blob)
                )),
                _ => parts.push("[a resource of a kind agentic does not know]".to_owned()),
            },
            ContentBlock::ResourceLink(link) => {
                parts.push(format!("[resource link {} ({})]", link.uri, link.name));
            }
            _ => parts.push("[content of a kind agentic does not know]".to_owned()),
        }
    }
    parts.join("\n")
}

/// Bytes that a base64 text decodes to.
fn base64_len(data: &str) -> usize {
    let data = data.trim_end_matches('=');
    data.len() * 3 / 4
}
