//! Requests in the Chat Completions wire format, built from async-openai's types.

use agentic_core::{ChatMessage, ChatRole, ModelRequest};
use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestToolMessage,
    ChatCompletionRequestToolMessageContent, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, ChatCompletionStreamOptions, ChatCompletionTool,
    ChatCompletionTools, CreateChatCompletionRequest, FunctionCall, FunctionObject,
    StopConfiguration,
};

use crate::config::OpenAiConfig;
use crate::names::ToolNameMap;

/// The wire names of every tool a request mentions: offered tools and calls in its history.
pub fn name_map(request: &ModelRequest) -> ToolNameMap {
    let offered = request.tools.iter().map(|tool| tool.name.as_str());
    let called = request
        .messages
        .iter()
        .flat_map(|message| message.tool_calls.iter().map(|call| call.name.as_str()));
    ToolNameMap::new(offered.chain(called))
}

/// The streamed request body.
pub fn request_body(
    request: &ModelRequest,
    model: &str,
    names: &ToolNameMap,
    config: &OpenAiConfig,
) -> CreateChatCompletionRequest {
    let tools: Vec<ChatCompletionTools> = request
        .tools
        .iter()
        .map(|tool| {
            ChatCompletionTools::Function(ChatCompletionTool {
                function: FunctionObject {
                    name: names.wire_name(&tool.name),
                    description: Some(tool.description.clone()),
                    parameters: Some(tool.parameters.clone()),
                    strict: None,
                },
            })
        })
        .collect();
    // `max_tokens` is deprecated by OpenAI in favour of `max_completion_tokens`, but it is the
    // field every local server (llama.cpp, Ollama, vLLM, LM Studio) reads.
    #[allow(deprecated)]
    CreateChatCompletionRequest {
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
        tools: (!tools.is_empty()).then_some(tools),
        max_tokens: request.max_tokens.or(config.max_tokens),
        temperature: config.temperature,
        stop: (!request.stop.is_empty())
            .then(|| StopConfiguration::StringArray(request.stop.clone())),
        ..CreateChatCompletionRequest::default()
    }
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
            // Content is optional only when there are tool calls; some servers reject null.
            let content = (!message.content.is_empty() || tool_calls.is_empty()).then(|| {
                ChatCompletionRequestAssistantMessageContent::Text(message.content.clone())
            });
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
