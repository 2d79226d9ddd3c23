//! Turns prompt timelines back into model messages, for earlier prompts of a conversation and
//! for the rounds of the running one.

use crate::prompt::{Prompt, PromptOutput, ToolResult};
use crate::provider::{ChatMessage, ChatRole, ToolCallRequest};
use crate::tool::cap_text;

/// Messages for an earlier prompt of the conversation, as a mode other than `own_mode` sees
/// it: prompts of the same mode in full, others compactly.
pub fn history_messages(
    prompt: &Prompt,
    own_mode: &str,
    tool_result_limit: usize,
) -> Vec<ChatMessage> {
    if let Some(message) = summary_message(prompt) {
        vec![message]
    } else if prompt.mode == own_mode {
        prompt_messages(prompt, tool_result_limit)
    } else {
        compact_prompt_messages(prompt, COMPACT_RESULT_CHARS)
    }
}

/// The mode of the stand-in prompt that carries a compressed conversation's summary.
pub const SUMMARY_MODE: &str = "summary";

/// A history entry that stands for prompts compressed into `summary`. Every mode turns it
/// into one system message (see [`summary_message`]).
pub fn summary_prompt(user_id: &str, summary: &str) -> Prompt {
    let now = chrono::Utc::now();
    let mut prompt = Prompt::new(user_id, SUMMARY_MODE, Default::default(), None);
    prompt.state = crate::prompt::PromptState::Completed;
    prompt
        .output
        .push(PromptOutput::Text(crate::prompt::TextOutput {
            id: uuid::Uuid::new_v4().to_string(),
            content: summary.to_owned(),
            start: now,
            end: Some(now),
        }));
    prompt
}

/// The message for a summary stand-in; `None` for an ordinary prompt.
pub fn summary_message(prompt: &Prompt) -> Option<ChatMessage> {
    if prompt.mode != SUMMARY_MODE {
        return None;
    }
    let text = prompt
        .output
        .iter()
        .filter_map(|output| match output {
            PromptOutput::Text(text) => Some(text.content.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    Some(ChatMessage::system(format!(
        "Summary of the earlier part of this conversation (older prompts were compressed):\n{text}"
    )))
}

/// Characters of each tool result kept in a compact summary.
pub const COMPACT_RESULT_CHARS: usize = 1_000;

/// Characters of each tool input kept in a compact summary.
pub const COMPACT_INPUT_CHARS: usize = 300;

/// Whether a tool output is the working of the mode that ran the prompt rather than a tool it
/// used: its id is in the mode's own namespace (`<mode>.…`, as a mode records its steps).
pub fn is_mode_working(prompt: &Prompt, function: &str) -> bool {
    function
        .strip_prefix(prompt.mode.as_str())
        .is_some_and(|rest| rest.starts_with('.'))
}

/// A prompt in two messages: the user's input, and one assistant message that lists the tools
/// it used (results cut to `result_chars`) and what it told the user. Any mode's timeline reads
/// the same way this way, so history crosses modes. The mode's own working (see
/// [`is_mode_working`]) is left out: it is how the answer was found, not what was found.
pub fn compact_prompt_messages(prompt: &Prompt, result_chars: usize) -> Vec<ChatMessage> {
    if let Some(message) = summary_message(prompt) {
        return vec![message];
    }
    let mut messages = Vec::new();
    if let Some(input) = &prompt.input {
        messages.push(ChatMessage::user(input.clone()));
    }
    let mut tools = Vec::new();
    let mut texts = Vec::new();
    for output in &prompt.output {
        match output {
            PromptOutput::Tool(tool) if is_mode_working(prompt, &tool.function) => {}
            // Inputs are cut like results: a large input (data handed to artifact.store, a
            // file written) must not come back into the context on every later prompt.
            PromptOutput::Tool(tool) => tools.push(format!(
                "- {}({}) → {}",
                tool.function,
                crate::tool::cap_text(
                    &tool.input.to_string(),
                    result_chars.min(COMPACT_INPUT_CHARS)
                )
                .replace('\n', " "),
                tool_result_text(&tool.result, result_chars).replace('\n', " ")
            )),
            PromptOutput::Text(text) => texts.push(text.content.clone()),
            PromptOutput::File(file) => {
                texts.push(format!("[file: {} ({})]", file.path, file.mime_type))
            }
            // How the model thought is not what it found; only the tool loop it was part of
            // sends it back.
            PromptOutput::Reasoning(_) => {}
        }
    }
    let mut summary = String::new();
    if !tools.is_empty() {
        summary.push_str("Tools I used:\n");
        summary.push_str(&tools.join("\n"));
        summary.push_str("\n\n");
    }
    summary.push_str(&texts.join("\n"));
    let summary = summary.trim().to_owned();
    if !summary.is_empty() {
        messages.push(ChatMessage::assistant(summary));
    }
    messages
}

/// Messages for a whole prompt: the user's input, then its timeline.
pub fn prompt_messages(prompt: &Prompt, tool_result_limit: usize) -> Vec<ChatMessage> {
    let mut messages = Vec::new();
    if let Some(input) = &prompt.input {
        messages.push(ChatMessage::user(input.clone()));
    }
    messages.extend(output_messages(&prompt.output, tool_result_limit));
    messages
}

/// Messages for a timeline: each run of text and tool outputs becomes an assistant message
/// carrying the calls, followed by one `tool` message per call.
pub fn output_messages(outputs: &[PromptOutput], tool_result_limit: usize) -> Vec<ChatMessage> {
    let mut messages = Vec::new();
    let mut assistant: Option<ChatMessage> = None;
    let mut results: Vec<ChatMessage> = Vec::new();
    for output in outputs {
        match output {
            // Reasoning opens a model reply: it starts a new assistant message unless the
            // current one has nothing but reasoning yet.
            PromptOutput::Reasoning(reasoning) => {
                if assistant.as_ref().is_some_and(|message| {
                    !message.tool_calls.is_empty() || !message.content.is_empty()
                }) {
                    flush(&mut messages, &mut assistant, &mut results);
                }
                let message = assistant.get_or_insert_with(|| ChatMessage::assistant(""));
                message.reasoning.push(reasoning.reasoning.clone());
            }
            PromptOutput::Text(text) => {
                if assistant
                    .as_ref()
                    .is_some_and(|message| !message.tool_calls.is_empty())
                {
                    flush(&mut messages, &mut assistant, &mut results);
                }
                let message = assistant.get_or_insert_with(|| ChatMessage::assistant(""));
                if !message.content.is_empty() {
                    message.content.push('\n');
                }
                message.content.push_str(&text.content);
            }
            PromptOutput::Tool(tool) => {
                let message = assistant.get_or_insert_with(|| ChatMessage::assistant(""));
                message.tool_calls.push(ToolCallRequest {
                    id: tool.id.clone(),
                    name: tool.function.clone(),
                    arguments: match &tool.input {
                        serde_json::Value::String(raw) => raw.clone(),
                        other => other.to_string(),
                    },
                });
                let text = tool_result_text(&tool.result, tool_result_limit);
                results.push(match tool.result {
                    ToolResult::Error { .. } => ChatMessage::tool_error(&tool.id, text),
                    _ => ChatMessage::tool_result(&tool.id, text),
                });
            }
            PromptOutput::File(file) => {
                let note = format!(
                    "[file: {} ({}){}]",
                    file.path,
                    file.mime_type,
                    file.description
                        .as_deref()
                        .map(|description| format!(" {description}"))
                        .unwrap_or_default()
                );
                match results.last_mut() {
                    Some(result) => {
                        result.content.push('\n');
                        result.content.push_str(&note);
                    }
                    None => {
                        let message = assistant.get_or_insert_with(|| ChatMessage::assistant(""));
                        message.content.push_str(&note);
                    }
                }
            }
        }
    }
    flush(&mut messages, &mut assistant, &mut results);
    messages
}

/// The text a model reads for a tool result.
pub fn tool_result_text(result: &ToolResult, limit: usize) -> String {
    match result {
        ToolResult::Success { output } => crate::tool::result_text_for_model(output, limit),
        ToolResult::Error { error, .. } => cap_text(&format!("Error: {error}"), limit),
        ToolResult::Pending { .. } => "Error: the call never finished".to_owned(),
    }
}

fn flush(
    messages: &mut Vec<ChatMessage>,
    assistant: &mut Option<ChatMessage>,
    results: &mut Vec<ChatMessage>,
) {
    if let Some(message) = assistant.take() {
        debug_assert_eq!(message.role, ChatRole::Assistant);
        messages.push(message);
    }
    messages.append(results);
}
