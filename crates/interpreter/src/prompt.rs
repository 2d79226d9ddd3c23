//! What the model sees in code mode: the system prompt, its code taken out of its reply, and
//! the feedback of each execution.

use std::collections::BTreeMap;

use agentic_core::history::{COMPACT_RESULT_CHARS, compact_prompt_messages};
use agentic_core::{ChatMessage, ContextItem, Prompt, PromptOutput, ToolResult, tool::cap_text};
use serde_json::Value;

use crate::protocol::{CodePath, ToolBinding};

/// The tool id under which each execution is recorded in the timeline.
pub const CODE_EXECUTE: &str = "code.execute";

const RULES: &str = "\
You work by writing JavaScript. Answer every message with code only, no prose around it. \
The code runs in a sandbox; what it returns (its last expression or `return`) and its log() \
lines come back to you, and you write more code until the task is done.

In the sandbox:
- Every tool is a function. It returns its result directly (`await` is allowed but not \
needed) and throws an Error when it fails.
- output(text) shows text to the user. The user sees nothing else.
- done() ends your turn once the user has their answer; complete({response}) shows a \
response and ends the turn in one step.
- store(key, value) and recall(key) keep values between your code runs in this turn.
- log(...values) sends notes back to you, not to the user.
- parallel([{tool: \"id\", input: {...}}]) runs several tool calls at once; a failed call \
comes back as {error}.
- llm(prompt) asks a language model for text; llmJson(prompt) for JSON.
- discoverTools() lists the tools; toolSchema(\"id\") gives one tool's input schema.
- tools[\"dotted.id\"](input) reaches any tool by its id.
- There is no require, import, timer, network or file access except through tools.

Filter, join and aggregate tool results in code, and output only what the user needs.";

/// The system prompt: rules, tools grouped by plugin, then the context items.
pub fn system_prompt(
    tools: &[ToolBinding],
    plugin_of: &dyn Fn(&str) -> String,
    context: &[ContextItem],
) -> String {
    let mut text = RULES.to_owned();
    let mut groups: BTreeMap<String, Vec<&ToolBinding>> = BTreeMap::new();
    for tool in tools {
        groups.entry(plugin_of(&tool.id)).or_default().push(tool);
    }
    text.push_str("\n\nTools:");
    if groups.is_empty() {
        text.push_str(" none.");
    }
    for (plugin, tools) in groups {
        text.push_str(&format!("\n## {plugin}"));
        for tool in tools {
            let description = tool.description.lines().next().unwrap_or_default();
            let names: Vec<&str> = tool
                .function
                .iter()
                .chain(&tool.aliases)
                .map(String::as_str)
                .collect();
            if names.is_empty() {
                text.push_str(&format!("\n- tools[\"{}\"]: {description}", tool.id));
            } else {
                let names = names.join(" or ");
                text.push_str(&format!("\n- {names} ({}): {description}", tool.id));
            }
        }
    }
    text.push_str(&context_sections(context));
    text
}

/// The context items from `prepare()`, a `## title` section each.
pub fn context_sections(context: &[ContextItem]) -> String {
    context
        .iter()
        .map(|item| format!("\n\n## {}\n{}", item.title, item.content))
        .collect()
}

/// A stretch of a model's reply: plain text, or the inside of a markdown fence with its
/// language (lower case, possibly empty).
pub(crate) struct Segment<'a> {
    pub fence: Option<String>,
    pub lines: Vec<&'a str>,
}

impl Segment<'_> {
    /// A fence that holds JavaScript (or TypeScript, or names no language).
    pub fn is_javascript_fence(&self) -> bool {
        self.fence.as_deref().is_some_and(|language| {
            matches!(
                language,
                "" | "js" | "javascript" | "ts" | "typescript" | "jsx" | "mjs"
            )
        })
    }
}

/// Splits `reply` at its markdown fences (a fence left open runs to the end).
pub(crate) fn segments(reply: &str) -> Vec<Segment<'_>> {
    let mut segments = Vec::new();
    let mut plain = Vec::new();
    let mut lines = reply.lines();
    while let Some(line) = lines.next() {
        let Some(language) = line.trim_start().strip_prefix("```") else {
            plain.push(line);
            continue;
        };
        if !plain.is_empty() {
            segments.push(Segment {
                fence: None,
                lines: std::mem::take(&mut plain),
            });
        }
        let mut block = Vec::new();
        for line in lines.by_ref() {
            if line.trim_start().starts_with("```") {
                break;
            }
            block.push(line);
        }
        segments.push(Segment {
            fence: Some(language.trim().to_ascii_lowercase()),
            lines: block,
        });
    }
    if !plain.is_empty() {
        segments.push(Segment {
            fence: None,
            lines: plain,
        });
    }
    segments
}

/// The code in a model's reply: fenced blocks when there are any, else the reply itself.
pub fn extract_code(reply: &str) -> (String, CodePath) {
    let blocks: Vec<String> = segments(reply)
        .into_iter()
        .filter(Segment::is_javascript_fence)
        .map(|segment| segment.lines.join("\n"))
        .collect();
    if blocks.is_empty() {
        (reply.trim().to_owned(), CodePath::Plain)
    } else {
        (blocks.join("\n"), CodePath::Fenced)
    }
}

/// Earlier prompts, compactly: what was asked, which tools ran, what the user was told.
pub fn history_messages(history: &[Prompt]) -> Vec<ChatMessage> {
    history
        .iter()
        .flat_map(|prompt| compact_prompt_messages(prompt, COMPACT_RESULT_CHARS))
        .collect()
}

/// The iterations of the running prompt: each execution's code as the assistant's message,
/// then its feedback. Tool calls made inside the code stay out: their results live in the
/// code's variables, which is the point of code mode.
pub fn iteration_messages(outputs: &[PromptOutput], limit: usize) -> Vec<ChatMessage> {
    let mut messages = Vec::new();
    let mut shown: Vec<String> = Vec::new();
    let mut current: Option<(String, ToolResult)> = None;
    let flush = |current: &mut Option<(String, ToolResult)>,
                 shown: &mut Vec<String>,
                 messages: &mut Vec<ChatMessage>| {
        if let Some((code, result)) = current.take() {
            messages.push(ChatMessage::assistant(code));
            messages.push(ChatMessage::user(feedback(&result, shown, limit)));
        }
        shown.clear();
    };
    for output in outputs {
        match output {
            PromptOutput::Tool(tool) if tool.function == CODE_EXECUTE => {
                flush(&mut current, &mut shown, &mut messages);
                let code = tool
                    .input
                    .get("code")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                current = Some((code, tool.result.clone()));
            }
            PromptOutput::Text(text) => shown.push(text.content.clone()),
            _ => {}
        }
    }
    flush(&mut current, &mut shown, &mut messages);
    messages
}

/// `Execution result: …` or `Execution error: …`, with logs and what the user was shown.
fn feedback(result: &ToolResult, shown: &[String], limit: usize) -> String {
    let mut text = match result {
        ToolResult::Success { output } => {
            let value = output.get("value").cloned().unwrap_or(Value::Null);
            let rendered = match &value {
                Value::Null => "undefined (no value)".to_owned(),
                other => other.to_string(),
            };
            let mut text = format!("Execution result: {rendered}");
            append_logs(&mut text, output.get("logs"));
            text
        }
        ToolResult::Error { error } => format!("Execution error: {error}"),
        ToolResult::Pending { .. } => "Execution error: the execution never finished".to_owned(),
    };
    if !shown.is_empty() {
        text.push_str("\nShown to the user:\n");
        text.push_str(&shown.join("\n"));
    }
    cap_text(&text, limit)
}

fn append_logs(text: &mut String, logs: Option<&Value>) {
    let Some(logs) = logs
        .and_then(Value::as_array)
        .filter(|logs| !logs.is_empty())
    else {
        return;
    };
    text.push_str("\nLogs:");
    for line in logs {
        text.push('\n');
        text.push_str(line.as_str().unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fenced_code_is_taken_out_of_prose() {
        let reply = "Here you go:\n```javascript\nconst a = 1;\noutput(a)\n```\nHope it helps.";
        assert_eq!(
            extract_code(reply),
            ("const a = 1;\noutput(a)".to_owned(), CodePath::Fenced)
        );
        assert_eq!(
            extract_code("done()"),
            ("done()".to_owned(), CodePath::Plain)
        );
        // Blocks in other languages are not ours to run.
        assert_eq!(extract_code("```python\nprint(1)\n```").1, CodePath::Plain);
    }
}
