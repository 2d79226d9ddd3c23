//! The user's question said again after tool results, for a small model in classic mode.
//!
//! Qwen2.5-Coder-1.5B, given a correct tool result, calls the same tool again with the same
//! input and then tells the user how one would call it: the result sits in a `user` turn of
//! `<tool_response>` blocks, far from the question, and the model does not take it as the
//! answer to its call. Saying the question again after the results, with a line asking for
//! the answer from them or the next call, turns that into an answer. Measured (eval, classic
//! mode, `docs/benchmarks.md` round 19): tuning 3 → 4/17, held-out 0 → 1/9, median prompt
//! 10,003 → 6,502 tokens on the held-out split, as turns end instead of looping.
//!
//! Only the prompt the embedded model reads changes: the request, the timeline and what other
//! providers are sent stay as they are. `[local] restateQuestion = false` turns it off.

use agentic_core::{ChatMessage, ChatRole, ModelRequest};

/// `request` with the question said again after its tool results, when it offers tools (a
/// classic-mode request) and ends with results; unchanged otherwise.
pub(crate) fn restated(mut request: ModelRequest) -> ModelRequest {
    let ends_with_results = request
        .messages
        .last()
        .is_some_and(|message| message.role == ChatRole::Tool);
    if request.tools.is_empty() || !ends_with_results {
        return request;
    }
    let Some(question) = request
        .messages
        .iter()
        .rev()
        .find(|message| message.role == ChatRole::User)
        .map(|message| message.content.clone())
    else {
        return request;
    };
    request.messages.push(ChatMessage::user(format!(
        "{question}\n\n(Use the tool results above. If they answer this, reply with the answer \
         now; otherwise call the next tool you need.)"
    )));
    request
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentic_core::{ModelKind, ToolCallRequest, ToolSpec};

    fn request(messages: Vec<ChatMessage>, tools: bool) -> ModelRequest {
        let mut request = ModelRequest::new(ModelKind::default(), messages);
        if tools {
            request.tools = vec![ToolSpec {
                name: "fs.list".into(),
                description: "List a directory".into(),
                parameters: std::sync::Arc::new(serde_json::json!({ "type": "object" })),
            }];
        }
        request
    }

    fn turn() -> Vec<ChatMessage> {
        let mut call = ChatMessage::assistant(String::new());
        call.tool_calls = vec![ToolCallRequest {
            id: "call-1".into(),
            name: "fs.list".into(),
            arguments: "{\"path\":\"photos\"}".into(),
        }];
        let result = ChatMessage::tool_result("call-1", "{\"entries\":[]}");
        vec![
            ChatMessage::system("You are a helpful assistant."),
            ChatMessage::user("How many files are in photos?"),
            call,
            result,
        ]
    }

    #[test]
    fn the_question_follows_the_results_of_a_classic_request() {
        let asked = restated(request(turn(), true));
        assert_eq!(asked.messages.len(), 5);
        let last = asked.messages.last().unwrap();
        assert_eq!(last.role, ChatRole::User);
        assert!(
            last.content
                .starts_with("How many files are in photos?\n\n(Use the tool results above."),
            "{}",
            last.content
        );
    }

    #[test]
    fn other_requests_are_left_alone() {
        // No tools offered (code mode), or no results at the end (the first answer).
        assert_eq!(restated(request(turn(), false)).messages.len(), 4);
        let mut first = turn();
        first.truncate(2);
        assert_eq!(restated(request(first, true)).messages.len(), 2);
    }
}
