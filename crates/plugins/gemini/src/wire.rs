//! Requests in the Gemini API's shape: the system prompt as `systemInstruction`, `user` and
//! `model` turns of parts, function calls and their responses paired by name, thought
//! signatures returned on the part they came with, and tools as JSON Schema declarations.

use std::collections::HashMap;

use agentic_core::{ChatMessage, ChatRole, ModelRequest, ToolChoice};
use agentic_wire::ToolNameMap;
use serde::Serialize;
use serde_json::{Value, json};

use crate::config::GeminiConfig;

/// Ids this provider made up for calls the API sent without one; never sent back as ids.
pub(crate) const MADE_UP_ID: &str = "agentic_call_";

/// The streamed request body. Tool schemas are borrowed from the request, not copied.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RequestBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<Content<'a>>,
    contents: Vec<Content<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tools<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<Value>,
    generation_config: GenerationConfig<'a>,
}

#[derive(Debug, Serialize)]
struct Content<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    parts: Vec<Part<'a>>,
}

/// One part, as sent: text, a call, or a call's response, with the signature it came with.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct Part<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    function_call: Option<FunctionCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    function_response: Option<FunctionResponse<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thought_signature: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct FunctionCall<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    name: String,
    args: Value,
}

#[derive(Debug, Serialize)]
struct FunctionResponse<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    name: String,
    response: Value,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Tools<'a> {
    function_declarations: Vec<Declaration<'a>>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Declaration<'a> {
    name: String,
    description: &'a str,
    /// Full JSON Schema (the older `parameters` field takes only an OpenAPI subset).
    parameters_json_schema: &'a Value,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_config: Option<ThinkingConfig>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ThinkingConfig {
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    include_thoughts: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_budget: Option<i32>,
}

/// An id the API gave, which goes back with the call and its response; `None` for one this
/// provider made up.
fn api_id(id: &str) -> Option<&str> {
    (!id.starts_with(MADE_UP_ID) && !id.is_empty()).then_some(id)
}

/// The body for `request`.
pub(crate) fn request_body<'a>(
    request: &'a ModelRequest,
    names: &ToolNameMap,
    config: &GeminiConfig,
) -> RequestBody<'a> {
    let mut system: Vec<Part<'a>> = Vec::new();
    let mut contents: Vec<Content<'a>> = Vec::new();
    // A function response names its function; the call it answers says which.
    let mut called: HashMap<&'a str, String> = HashMap::new();
    for message in &request.messages {
        let (role, parts) = match message.role {
            ChatRole::System => {
                system.extend(text(&message.content));
                continue;
            }
            ChatRole::User => ("user", text(&message.content).into_iter().collect()),
            ChatRole::Tool => {
                let id = message.tool_call_id.as_deref().unwrap_or_default();
                let name = called
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| "unknown_call".to_owned());
                let key = if message.is_error { "error" } else { "output" };
                (
                    "user",
                    vec![Part {
                        function_response: Some(FunctionResponse {
                            id: api_id(id),
                            name,
                            response: json!({ key: message.content }),
                        }),
                        ..Part::default()
                    }],
                )
            }
            ChatRole::Assistant => {
                for call in &message.tool_calls {
                    called.insert(&call.id, names.wire_name(&call.name));
                }
                ("model", model_parts(message, names))
            }
        };
        if parts.is_empty() {
            continue;
        }
        // Turns alternate: the responses to parallel calls, and the user's words after
        // them, are one user turn.
        match contents.last_mut() {
            Some(last) if last.role == Some(role) => last.parts.extend(parts),
            _ => contents.push(Content {
                role: Some(role),
                parts,
            }),
        }
    }
    let declarations: Vec<Declaration<'a>> = request
        .tools
        .iter()
        .map(|tool| Declaration {
            name: names.wire_name(&tool.name),
            description: &tool.description,
            parameters_json_schema: &tool.parameters,
        })
        .collect();
    let tools = if declarations.is_empty() {
        Vec::new()
    } else {
        vec![Tools {
            function_declarations: declarations,
        }]
    };
    let temperature = match (config.temperature, request.min_temperature) {
        (Some(configured), _) => Some(request.temperature(f64::from(configured))),
        (None, Some(floor)) => Some(f64::from(floor)),
        (None, None) => None,
    };
    let thinking_config =
        (config.include_thoughts || config.thinking.is_some()).then_some(ThinkingConfig {
            include_thoughts: config.include_thoughts,
            thinking_budget: config.thinking,
        });
    RequestBody {
        system_instruction: (!system.is_empty()).then_some(Content {
            role: None,
            parts: system,
        }),
        contents,
        tools,
        // Mode `ANY`: the answer calls one of the declared functions.
        tool_config: ToolChoice::required(request)
            .then(|| json!({ "functionCallingConfig": { "mode": "ANY" } })),
        generation_config: GenerationConfig {
            temperature,
            max_output_tokens: request.max_tokens.or(config.max_tokens),
            stop_sequences: &request.stop,
            thinking_config,
        },
    }
}

/// A text part, or none for empty text (the API refuses parts without data).
fn text(content: &str) -> Option<Part<'_>> {
    (!content.trim().is_empty()).then_some(Part {
        text: Some(content),
        ..Part::default()
    })
}

/// A model turn: its words, then its calls, each with its arguments as the object the API
/// wants (arguments that were not an object, which the runtime refused, go as `{}`). Thought
/// signatures go back on the part they came with: a call's on that call, any other on the
/// turn's last text part (where the API puts it), else on its first call.
fn model_parts<'a>(message: &'a ChatMessage, names: &ToolNameMap) -> Vec<Part<'a>> {
    let mut parts: Vec<Part<'a>> = text(&message.content).into_iter().collect();
    for call in &message.tool_calls {
        let args = serde_json::from_str::<Value>(&call.arguments)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
        let signature = message
            .reasoning_of(crate::PROVIDER_ID)
            .find(|reasoning| reasoning.item_id.as_deref() == Some(call.id.as_str()))
            .and_then(|reasoning| reasoning.signature.as_deref());
        parts.push(Part {
            function_call: Some(FunctionCall {
                id: api_id(&call.id),
                name: names.wire_name(&call.name),
                args,
            }),
            thought_signature: signature,
            ..Part::default()
        });
    }
    let loose = message
        .reasoning_of(crate::PROVIDER_ID)
        .filter(|reasoning| {
            reasoning.item_id.is_none()
                || !message
                    .tool_calls
                    .iter()
                    .any(|call| Some(call.id.as_str()) == reasoning.item_id.as_deref())
        })
        .filter_map(|reasoning| reasoning.signature.as_deref())
        .last();
    if let Some(signature) = loose {
        let target = match parts.iter().rposition(|part| part.text.is_some()) {
            Some(index) => Some(index),
            None => parts
                .iter()
                .position(|part| part.thought_signature.is_none()),
        };
        if let Some(index) = target {
            parts[index].thought_signature = Some(signature);
        }
    }
    parts
}
