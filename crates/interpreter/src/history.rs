//! Earlier prompts of a conversation as code mode gives them to the model: each one as the
//! programs that ran, what they gave back, and what the user was shown. Written this way, a
//! past turn looks like the work the model does, so the reply it copies is a program; a
//! digest in prose ("Tools I used: …") was copied word for word as the next "program" and
//! failed to parse.
//!
//! Prompts run by another mode (classic tool calls) read the same way: their calls become the
//! lines of a program, and an answer given without tools becomes `done("…")`.

use agentic_core::history::{is_mode_working, summary_message};
use agentic_core::provider::ChatMessage;
use agentic_core::tool::cap_text;
use agentic_core::{Prompt, PromptOutput, ToolOutput, ToolResult};
use serde_json::Value;

use crate::prompt::CODE_EXECUTE;

/// Characters kept of what one earlier program gave back, and of one call's input.
const RESULT_CHARS: usize = 1_000;
const INPUT_CHARS: usize = 300;
/// Characters kept of an answer the user was shown.
const ANSWER_CHARS: usize = 2_000;

/// The messages for the conversation's earlier prompts, oldest first.
pub(crate) fn history_messages(history: &[Prompt]) -> Vec<ChatMessage> {
    history.iter().flat_map(prompt_messages).collect()
}

fn prompt_messages(prompt: &Prompt) -> Vec<ChatMessage> {
    if let Some(summary) = summary_message(prompt) {
        return vec![summary];
    }
    let mut messages = Vec::new();
    if let Some(input) = &prompt.input {
        messages.push(ChatMessage::user(input.clone()));
    }
    let answer = prompt
        .output
        .iter()
        .filter_map(|output| match output {
            PromptOutput::Text(text) if !text.content.trim().is_empty() => {
                Some(text.content.trim())
            }
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let answer = cap_text(&answer, ANSWER_CHARS);
    let shown = |text: &mut String| {
        if !answer.is_empty() {
            text.push_str("\nShown to the user:\n");
            text.push_str(&answer);
        }
    };
    let programs: Vec<&ToolOutput> = prompt
        .output
        .iter()
        .filter_map(|output| match output {
            // A reply taken as prose ran no program: it is the answer.
            PromptOutput::Tool(tool)
                if tool.function == CODE_EXECUTE
                    && matches!(&tool.result, ToolResult::Success { output }
                        if output.get("path").and_then(Value::as_str) != Some("prose")) =>
            {
                Some(tool)
            }
            _ => None,
        })
        .collect();
    if !programs.is_empty() {
        for (index, program) in programs.iter().enumerate() {
            let Some(code) = program.input.get("code").and_then(Value::as_str) else {
                continue;
            };
            messages.push(ChatMessage::assistant(code.to_owned()));
            let mut text = match &program.result {
                ToolResult::Success { output } => gave_back(output),
                _ => String::new(),
            };
            if index + 1 == programs.len() {
                shown(&mut text);
            }
            messages.push(ChatMessage::user(text));
        }
        return messages;
    }
    let calls: Vec<&ToolOutput> = prompt
        .output
        .iter()
        .filter_map(|output| match output {
            PromptOutput::Tool(tool)
                if tool.function != CODE_EXECUTE
                    && tool.function != crate::plan::CODE_PLAN
                    && !is_mode_working(prompt, &tool.function)
                    && !matches!(tool.result, ToolResult::Pending { .. }) =>
            {
                Some(tool)
            }
            _ => None,
        })
        .collect();
    if calls.is_empty() {
        if !answer.is_empty() {
            let answer = Value::String(answer.clone());
            messages.push(ChatMessage::assistant(format!("done({answer});")));
        }
        return messages;
    }
    let program: Vec<String> = calls
        .iter()
        .map(|call| {
            format!(
                "{}({});",
                call_name(&call.function),
                cap_text(&call.input.to_string(), INPUT_CHARS)
            )
        })
        .collect();
    messages.push(ChatMessage::assistant(program.join("\n")));
    let mut text = String::from("Execution finished. What the calls returned:");
    for call in &calls {
        let result = match &call.result {
            ToolResult::Success { output } => {
                format!("returned {}", cap_text(&output.to_string(), RESULT_CHARS))
            }
            ToolResult::Error { error, .. } => format!("failed: {}", cap_text(error, RESULT_CHARS)),
            ToolResult::Pending { .. } => continue,
        };
        text.push_str(&format!("\n{}(…) {result}", call_name(&call.function)));
    }
    shown(&mut text);
    messages.push(ChatMessage::user(text));
    messages
}

/// What a program that ran gave back: its value and its logs, cut.
fn gave_back(output: &Value) -> String {
    let mut text = match output.get("value") {
        None | Some(Value::Null) => "Execution finished.".to_owned(),
        Some(Value::String(value)) => format!("Execution result (a string):\n{value}"),
        Some(other) => format!("Execution result: {other}"),
    };
    if let Some(logs) = output
        .get("logs")
        .and_then(Value::as_array)
        .filter(|logs| !logs.is_empty())
    {
        text.push_str("\nLogs:");
        for line in logs {
            text.push('\n');
            text.push_str(line.as_str().unwrap_or_default());
        }
    }
    cap_text(&text, RESULT_CHARS)
}

/// How a program calls a tool by its id: `fs.list` as it is, `tools["a-b.c"]` otherwise.
fn call_name(id: &str) -> String {
    let plain = id.split('.').all(|part| {
        part.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && part.chars().all(crate::names::is_identifier_char)
    });
    if plain {
        id.to_owned()
    } else {
        format!("tools[{}]", Value::String(id.to_owned()))
    }
}
