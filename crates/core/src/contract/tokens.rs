//! The one token estimator every part of agentic uses when a provider reports no usage.

use crate::provider::{ChatMessage, ModelRequest};

/// Roughly four characters per token, the usual rule of thumb for English text and code.
pub fn estimate_tokens(text: &str) -> u64 {
    let chars = text.chars().count() as u64;
    chars.div_ceil(4)
}

/// A tool call as a model writes it: its name and its arguments.
pub fn estimate_call_tokens(name: &str, arguments: &str) -> u64 {
    estimate_tokens(name) + estimate_tokens(arguments)
}

/// A message: its text and the tool calls it carries.
pub fn estimate_message_tokens(message: &ChatMessage) -> u64 {
    estimate_tokens(&message.content)
        + message
            .tool_calls
            .iter()
            .map(|call| estimate_call_tokens(&call.name, &call.arguments))
            .sum::<u64>()
}

/// What a request sends a model: its messages and the tools it offers.
pub fn estimate_request_tokens(request: &ModelRequest) -> u64 {
    let messages: u64 = request.messages.iter().map(estimate_message_tokens).sum();
    let tools: u64 = request
        .tools
        .iter()
        .map(|tool| {
            estimate_tokens(&tool.name)
                + estimate_tokens(&tool.description)
                + estimate_tokens(&tool.parameters.to_string())
        })
        .sum();
    messages + tools
}

#[cfg(test)]
mod tests {
    #[test]
    fn four_characters_make_a_token() {
        assert_eq!(super::estimate_tokens(""), 0);
        assert_eq!(super::estimate_tokens("abcd"), 1);
        assert_eq!(super::estimate_tokens("abcde"), 2);
        assert_eq!(super::estimate_tokens("ééééé"), 2);
    }
}
