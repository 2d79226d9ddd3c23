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
    /// The server says a call may repeat: it only reads, or it is idempotent.
    idempotent: bool,
    /// The server says a call only reads: a dry run may run it.
    read_only: bool,
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
        let read_only = annotations.and_then(|a| a.read_only_hint) == Some(true);
        let idempotent = read_only || annotations.and_then(|a| a.idempotent_hint) == Some(true);
        Self {
            id: server.tool_id(&tool.name),
            name: tool.name.to_string(),
            description,
            input_schema,
            output_schema,
            destructive,
            idempotent,
            read_only,
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

    fn may_need_approval(&self) -> bool {
        match self.server.config.approval {
            ApprovalPolicy::Never => false,
            ApprovalPolicy::Always => true,
            ApprovalPolicy::Destructive => self.destructive,
        }
    }

    fn idempotent(&self) -> bool {
        self.idempotent
    }

    fn read_only(&self) -> bool {
        self.read_only
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
        let saved = save_binary_content(&context, &self.id, &result.content).await;
        result_value(result, &saved)
    }
}

/// Where a binary content block (an image, audio, a blob resource) went.
#[derive(Debug, Clone)]
pub(crate) enum Saved {
    /// Not binary: nothing to save.
    Nothing,
    /// Saved among the user's files at this path (and added to the timeline as a file).
    At(String),
    /// Could not be saved, and why.
    Failed(String),
}

/// Saves each binary block of a result among the user's files (`agentic_core::UserFiles`, the
/// fs plugin's root), under
/// `mcp/<server>/`, and adds it to the prompt's timeline as a file output: a model reads a
/// line saying where it is instead of kilobytes of base64, and the user gets the file.
pub(crate) async fn save_binary_content(
    context: &ToolContext,
    tool_id: &str,
    content: &[ContentBlock],
) -> Vec<Saved> {
    let files = context.services.extensions.get::<agentic_core::UserFiles>();
    let mut saved = Vec::with_capacity(content.len());
    for block in content {
        let Some((data, mime_type, name)) = binary_block(block) else {
            saved.push(Saved::Nothing);
            continue;
        };
        saved.push(match &files {
            Some(files) => save_one(context, &files.0, tool_id, data, mime_type, name).await,
            None => Saved::Failed("no plugin keeps user files (the fs plugin does)".to_owned()),
        });
    }
    saved
}

/// A binary block's base64 data, MIME type and, for a resource, its URI's last segment.
fn binary_block(block: &ContentBlock) -> Option<(&str, &str, Option<&str>)> {
    match block {
        ContentBlock::Image(image) => Some((&image.data, &image.mime_type, None)),
        ContentBlock::Audio(audio) => Some((&audio.data, &audio.mime_type, None)),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => Some((
                blob,
                mime_type.as_deref().unwrap_or("application/octet-stream"),
                uri.rsplit('/').next(),
            )),
            _ => None,
        },
        _ => None,
    }
}

async fn save_one(
    context: &ToolContext,
    files: &Arc<dyn agentic_core::UserFileStore>,
    tool_id: &str,
    data: &str,
    mime_type: &str,
    name: Option<&str>,
) -> Saved {
    use base64::Engine as _;
    let bytes = match base64::engine::general_purpose::STANDARD.decode(data.trim()) {
        Ok(bytes) => bytes,
        Err(error) => return Saved::Failed(format!("its data is not base64: {error}")),
    };
    let (server, tool) = tool_id.split_once('.').unwrap_or(("mcp", tool_id));
    let unique = uuid::Uuid::new_v4().simple().to_string();
    let stem = format!("{}-{}", file_part(tool), &unique[..8]);
    let file = match name.map(file_part).filter(|name| name.contains('.')) {
        Some(name) => format!("{stem}-{name}"),
        None => format!("{stem}.{}", extension(mime_type)),
    };
    let path = format!("mcp/{}/{file}", file_part(server));
    match files.save(&context.user_id, &path, bytes).await {
        Ok(path) => {
            context.emit_file(
                &path,
                mime_type,
                Some(&format!("from the MCP tool {tool_id}")),
            );
            Saved::At(path)
        }
        Err(error) => Saved::Failed(error.to_string()),
    }
}

/// A name as a file name's part: letters, digits, `.`, `_` and `-`, at most 64 of them.
fn file_part(name: &str) -> String {
    let part: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    let part = part.trim_start_matches('.');
    if part.is_empty() {
        "file".to_owned()
    } else {
        part.to_owned()
    }
}

fn extension(mime_type: &str) -> &'static str {
    match mime_type.split(';').next().unwrap_or("").trim() {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "audio/wav" | "audio/x-wav" => "wav",
        "audio/mpeg" => "mp3",
        "audio/ogg" => "ogg",
        "application/gzip" => "gz",
        "application/pdf" => "pdf",
        "application/zip" => "zip",
        "application/json" => "json",
        "text/plain" => "txt",
        "text/csv" => "csv",
        _ => "bin",
    }
}

/// A tool result as agentic's result: the structured content when there is some, else the
/// text. `isError` becomes an error with the server's text. `saved` says, block by block,
/// where binary content went.
pub(crate) fn result_value(result: CallToolResult, saved: &[Saved]) -> Result<Value, ToolError> {
    let text = content_text(&result.content, saved);
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
/// are (and where a binary one was saved).
fn content_text(content: &[ContentBlock], saved: &[Saved]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for (index, block) in content.iter().enumerate() {
        let before = parts.len();
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
        if let (Some(part), Some(place)) = (parts.get_mut(before), saved.get(index)) {
            match place {
                Saved::At(path) if part.ends_with(']') => {
                    part.pop();
                    part.push_str(&format!(", saved as {path}]"));
                }
                Saved::Failed(reason) if part.ends_with(']') => {
                    part.pop();
                    part.push_str(&format!(", not saved: {reason}]"));
                }
                _ => {}
            }
        }
    }
    parts.join("\n")
}

/// Bytes that a base64 text decodes to.
fn base64_len(data: &str) -> usize {
    let data = data.trim_end_matches('=');
    data.len() * 3 / 4
}
