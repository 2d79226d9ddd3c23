//! Requests in the Messages API's shape: a system prompt apart, user and assistant turns that
//! alternate, tool results as blocks of a user turn, and `cache_control` breakpoints.

use agentic_core::{ChatMessage, ChatRole, ModelRequest, ToolChoice};
use agentic_wire::ToolNameMap;
use serde::Serialize;
use serde_json::Value;

use crate::config::AnthropicConfig;

/// The streamed request body. Tool schemas are borrowed from the request, not copied.
#[derive(Debug, Serialize)]
pub(crate) struct RequestBody<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<Block<'a>>,
    messages: Vec<Message<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<ToolChoiceBlock>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
    stream: bool,
}

/// `{"type": "any"}`: the answer calls one of the tools.
#[derive(Debug, Serialize)]
struct ToolChoiceBlock {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Debug, Serialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: &'static str,
    budget_tokens: u32,
}

#[derive(Debug, Serialize)]
struct Message<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

/// A content block, as sent.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolUse {
        id: &'a str,
        name: String,
        input: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
}

impl Block<'_> {
    /// Marks the block as a cache breakpoint; thinking blocks cannot be one.
    fn mark_cached(&mut self) {
        let mark = match self {
            Block::Text { cache_control, .. }
            | Block::ToolUse { cache_control, .. }
            | Block::ToolResult { cache_control, .. } => cache_control,
            Block::Thinking { .. } | Block::RedactedThinking { .. } => return,
        };
        *mark = Some(CacheControl::EPHEMERAL);
    }
}

#[derive(Debug, Clone, Copy, Serialize)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

impl CacheControl {
    const EPHEMERAL: Self = Self { kind: "ephemeral" };
}

#[derive(Debug, Serialize)]
struct Tool<'a> {
    name: String,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

/// The body for `request`. With caching on, three of the four breakpoints the API allows
/// mark what the next call of the same prompt starts with: the system prompt, the tool
/// declarations, and the conversation up to its last message.
pub(crate) fn request_body<'a>(
    request: &'a ModelRequest,
    model: &'a str,
    names: &ToolNameMap,
    config: &AnthropicConfig,
) -> RequestBody<'a> {
    let mut system = Vec::new();
    let mut messages: Vec<Message<'a>> = Vec::new();
    for message in &request.messages {
        let (role, blocks) = match message.role {
            ChatRole::System => {
                system.push(Block::Text {
                    text: &message.content,
                    cache_control: None,
                });
                continue;
            }
            ChatRole::User => ("user", vec![text(&message.content)]),
            ChatRole::Tool => (
                "user",
                vec![Some(Block::ToolResult {
                    tool_use_id: message.tool_call_id.as_deref().unwrap_or_default(),
                    content: &message.content,
                    is_error: message.is_error,
                    cache_control: None,
                })],
            ),
            ChatRole::Assistant => ("assistant", assistant_blocks(message, names)),
        };
        let blocks: Vec<Block<'a>> = blocks.into_iter().flatten().collect();
        if blocks.is_empty() {
            continue;
        }
        // Turns alternate: a tool result and the user's words after it are one user turn.
        match messages.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => messages.push(Message {
                role,
                content: blocks,
            }),
        }
    }
    let mut tools: Vec<Tool<'a>> = request
        .tools
        .iter()
        .map(|tool| Tool {
            name: names.wire_name(&tool.name),
            description: &tool.description,
            input_schema: &tool.parameters,
            cache_control: None,
        })
        .collect();
    if config.cache {
        if let Some(Block::Text { cache_control, .. }) = system.last_mut() {
            *cache_control = Some(CacheControl::EPHEMERAL);
        }
        if let Some(tool) = tools.last_mut() {
            tool.cache_control = Some(CacheControl::EPHEMERAL);
        }
        if let Some(block) = messages
            .last_mut()
            .and_then(|message| message.content.last_mut())
        {
            block.mark_cached();
        }
    }
    let temperature = match (config.temperature, request.min_temperature) {
        // Thinking is allowed only at the API's default temperature.
        _ if config.thinking.is_some() => None,
        (Some(configured), _) => Some(request.temperature(f64::from(configured))),
        (None, Some(floor)) => Some(f64::from(floor)),
        (None, None) => None,
    };
    let mut max_tokens = request.max_tokens.unwrap_or(config.max_tokens);
    let thinking = config.thinking.map(|budget| {
        // The budget is part of the answer's tokens: leave room to answer after thinking.
        max_tokens = max_tokens.max(budget.saturating_add(config.max_tokens.min(4_096)));
        Thinking {
            kind: "enabled",
            budget_tokens: budget,
        }
    });
    // With thinking on, the API takes no tool choice but `auto` (and `none`).
    let tool_choice = (ToolChoice::required(request) && thinking.is_none())
        .then_some(ToolChoiceBlock { kind: "any" });
    RequestBody {
        model,
        max_tokens,
        system,
        messages,
        tools,
        tool_choice,
        stop_sequences: &request.stop,
        // The API takes 0 to 1.
        temperature: temperature.map(|value| value.clamp(0.0, 1.0)),
        thinking,
        stream: true,
    }
}

/// A text block, or none for empty text (the API refuses empty text blocks).
fn text(content: &str) -> Option<Block<'_>> {
    (!content.trim().is_empty()).then_some(Block::Text {
        text: content,
        cache_control: None,
    })
}

/// An assistant turn: the thinking it began with (this provider's, signed or redacted: the
/// API refuses any other), its words, then its calls, each with its input as the JSON object
/// the API wants (arguments that were not an object, which the runtime refused, go as `{}`).
fn assistant_blocks<'a>(message: &'a ChatMessage, names: &ToolNameMap) -> Vec<Option<Block<'a>>> {
    let mut blocks: Vec<Option<Block<'a>>> = message
        .reasoning_of(crate::PROVIDER_ID)
        .map(
            |reasoning| match (&reasoning.encrypted, &reasoning.signature) {
                (Some(data), _) => Some(Block::RedactedThinking { data }),
                (None, Some(signature)) => Some(Block::Thinking {
                    thinking: &reasoning.text,
                    signature,
                }),
                (None, None) => None,
            },
        )
        .collect();
    blocks.push(text(&message.content));
    for call in &message.tool_calls {
        let input = serde_json::from_str::<Value>(&call.arguments)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
        blocks.push(Some(Block::ToolUse {
            id: &call.id,
            name: names.wire_name(&call.name),
            input,
            cache_control: None,
        }));
    }
    blocks
}
