//! Requests in the Chat Completions wire format, built from async-openai's types.

use agentic_core::{ChatMessage, ChatRole, ModelRequest, ToolChoice};
use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestToolMessage,
    ChatCompletionRequestToolMessageContent, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, ChatCompletionStreamOptions,
    ChatCompletionToolChoiceOption, CreateChatCompletionRequest, FunctionCall, StopConfiguration,
    ToolChoiceOptions,
};

use crate::config::OpenAiConfig;
use agentic_wire::ToolNameMap;

/// The streamed request body: async-openai's request with the tools serialised beside it by
/// reference (copying every tool's schema into the request for each model call was a large
/// part of a prompt's CPU time).
#[derive(serde::Serialize)]
pub(crate) struct RequestBody<'a> {
    #[serde(flatten)]
    pub request: CreateChatCompletionRequest,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<WireTool<'a>>,
}

/// A tool as the wire format offers it: `{"type": "function", "function": {…}}`.
#[derive(serde::Serialize)]
pub(crate) struct WireTool<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: WireFunction<'a>,
}

#[derive(serde::Serialize)]
pub(crate) struct WireFunction<'a> {
    pub name: String,
    pub description: &'a str,
    pub parameters: &'a serde_json::Value,
}

/// The streamed request body.
pub(crate) fn request_body<'a>(
    request: &'a ModelRequest,
    model: &str,
    names: &ToolNameMap,
    config: &OpenAiConfig,
) -> RequestBody<'a> {
    let tools = request
        .tools
        .iter()
        .map(|tool| WireTool {
            kind: "function",
            function: WireFunction {
                name: names.wire_name(&tool.name),
                description: &tool.description,
                parameters: &tool.parameters,
            },
        })
        .collect();
    // `max_tokens` is deprecated by OpenAI in favour of `max_completion_tokens`, but it is the
    // field every local server (llama.cpp, Ollama, vLLM, LM Studio) reads.
    #[allow(deprecated)]
    let request = CreateChatCompletionRequest {
        model: model.to_owned(),
        messages: request
            .messages
            .iter()
            .map(|message| wire_message(message, names))
            .collect(),
        stream: Some(true),
        stream_options: config.stream_usage.then_some(ChatCompletionStreamOptions {
            include_usage: Some(true),
            include_obfuscation: None,
        }),
        max_tokens: request.max_tokens.or(config.max_tokens),
        // f32 → f64 → f32 gives back the same f32.
        temperature: config
            .temperature
            .map(|configured| request.temperature(f64::from(configured)) as f32),
        stop: (!request.stop.is_empty())
            .then(|| StopConfiguration::StringArray(request.stop.clone())),
        // Bit for bit: a seed is a label, not a quantity.
        seed: request.seed.map(|seed| seed as i64),
        tool_choice: ToolChoice::required(request).then_some(ChatCompletionToolChoiceOption::Mode(
            ToolChoiceOptions::Required,
        )),
        ..CreateChatCompletionRequest::default()
    };
    RequestBody { request, tools }
}

fn wire_message(message: &ChatMessage, names: &ToolNameMap) -> ChatCompletionRequestMessage {
    match message.role {
        ChatRole::System => {
            ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
                content: ChatCompletionRequestSystemMessageContent::Text(message.content.clone()),
                name: None,
            })
        }
        ChatRole::User => ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
            content: ChatCompletionRequestUserMessageContent::Text(message.content.clone()),
            name: None,
        }),
        ChatRole::Assistant => {
            let tool_calls: Vec<ChatCompletionMessageToolCalls> = message
                .tool_calls
                .iter()
                .map(|call| {
                    ChatCompletionMessageToolCalls::Function(ChatCompletionMessageToolCall {
                        id: call.id.clone(),
                        function: FunctionCall {
                            name: names.wire_name(&call.name),
                            arguments: call.arguments.clone(),
                        },
                    })
                })
                .collect();
            // Always a string, empty beside tool calls: llama.cpp's chat templates fail when
            // `content` is missing and its server answers 500 to `null`.
            let content = Some(ChatCompletionRequestAssistantMessageContent::Text(
                message.content.clone(),
            ));
            ChatCompletionRequestMessage::Assistant(ChatCompletionRequestAssistantMessage {
                content,
                tool_calls: (!tool_calls.is_empty()).then_some(tool_calls),
                ..ChatCompletionRequestAssistantMessage::default()
            })
        }
        ChatRole::Tool => ChatCompletionRequestMessage::Tool(ChatCompletionRequestToolMessage {
            content: ChatCompletionRequestToolMessageContent::Text(message.content.clone()),
            tool_call_id: message.tool_call_id.clone().unwrap_or_default(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use agentic_core::{ChatMessage, ModelKind, ModelRequest};

    use super::*;

    fn temperature_sent(configured: Option<f32>, floor: Option<f32>) -> Option<f32> {
        let mut request = ModelRequest::new(ModelKind::Normal, vec![ChatMessage::user("hi")]);
        request.min_temperature = floor;
        let mut config = OpenAiConfig::default();
        config.temperature = configured;
        request_body(&request, "m", &ToolNameMap::for_request(&request), &config)
            .request
            .temperature
    }

    #[test]
    fn a_minimum_temperature_raises_the_configured_one_only() {
        assert_eq!(temperature_sent(Some(0.0), None), Some(0.0));
        assert_eq!(temperature_sent(Some(0.0), Some(0.7)), Some(0.7));
        assert_eq!(temperature_sent(Some(1.0), Some(0.7)), Some(1.0));
        // Left to the server's default, it stays there.
        assert_eq!(temperature_sent(None, Some(0.7)), None);
    }
}
