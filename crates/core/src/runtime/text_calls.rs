//! Tool calls that a model wrote as text. Servers that do not parse their model's tool-call
//! syntax pass it through as content: Qwen's and Hermes' `<tool_call>{…}</tool_call>` tags, or
//! a JSON object `{"name": …, "arguments": …}` in a ```json fence. Classic mode turns them into
//! the calls they are instead of showing them to the user as the answer.

use serde_json::Value;

use crate::provider::{ToolCallRequest, wire_tool_name};
use crate::tool::ToolSet;

/// The calls written in `text`, and the text left around them. Empty when there are none:
/// a `<tool_call>` tag is always a call (an unknown name fails as an unknown tool, which the
/// model can read), a JSON object when its name is an offered tool and the JSON is the whole
/// reply or a fenced block of it, or when it is the whole reply (fenced or not) and its name
/// reads as a tool id: a call of a tool that is not offered fails loudly as one.
pub fn text_tool_calls(text: &str, tools: &ToolSet) -> (Vec<ToolCallRequest>, String) {
    let tagged = tagged_calls(text, tools);
    if !tagged.0.is_empty() {
        return tagged;
    }
    json_calls(text, tools)
}

fn tagged_calls(text: &str, tools: &ToolSet) -> (Vec<ToolCallRequest>, String) {
    // Qwen's template shows the tools inside <tools>, and the model sometimes answers in kind.
    for (open, close) in [("<tool_call>", "</tool_call>"), ("<tools>", "</tools>")] {
        let found = tagged_with(text, tools, open, close);
        if !found.0.is_empty() {
            return found;
        }
    }
    (Vec::new(), text.to_owned())
}

fn tagged_with(
    text: &str,
    tools: &ToolSet,
    open: &str,
    close: &str,
) -> (Vec<ToolCallRequest>, String) {
    let mut calls = Vec::new();
    let mut rest = String::new();
    let mut remaining = text;
    while let Some(start) = remaining.find(open) {
        rest.push_str(&remaining[..start]);
        let after = &remaining[start + open.len()..];
        let (inside, next) = match after.find(close) {
            Some(end) => (&after[..end], &after[end + close.len()..]),
            None => (after, ""),
        };
        match serde_json::from_str::<Value>(inside.trim()) {
            // Only the call tag means a call whatever it names.
            Ok(value) => match call_of(&value, tools, open == "<tool_call>") {
                Some(call) => calls.push(call),
                None => rest.push_str(&remaining[start..remaining.len() - next.len()]),
            },
            Err(_) => rest.push_str(&remaining[start..remaining.len() - next.len()]),
        }
        remaining = next;
    }
    rest.push_str(remaining);
    if calls.is_empty() {
        return (Vec::new(), text.to_owned());
    }
    (calls, rest.trim().to_owned())
}

fn json_calls(text: &str, tools: &ToolSet) -> (Vec<ToolCallRequest>, String) {
    let none = || (Vec::new(), text.to_owned());
    if let Some(calls) = calls_alone(text, tools) {
        return (calls, String::new());
    }
    // The whole reply, or each ```json block of it.
    let trimmed = text.trim();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        // The whole reply, perhaps with a stray closing fence after it.
        let json = trimmed.strip_suffix("```").unwrap_or(trimmed).trim_end();
        let value = parse_json(json);
        if let Some(calls) = value.as_ref().and_then(|value| calls_in(value, tools)) {
            return (calls, String::new());
        }
        if let Some(call) = value
            .as_ref()
            .and_then(|value| attempted_call(value, tools))
        {
            return (vec![call], String::new());
        }
        return none();
    }
    let mut calls = Vec::new();
    let mut rest = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let fence = line.trim_start().strip_prefix("```").map(str::trim);
        let Some(language) = fence.filter(|language| matches!(*language, "json" | "")) else {
            rest.push(line.to_owned());
            continue;
        };
        let mut block = Vec::new();
        for line in lines.by_ref() {
            if line.trim_start().starts_with("```") {
                break;
            }
            block.push(line);
        }
        let parsed = parse_json(block.join("\n").trim()).and_then(|value| calls_in(&value, tools));
        match parsed {
            Some(found) => calls.extend(found),
            None => {
                rest.push(format!("```{language}"));
                rest.extend(block.iter().map(|line| (*line).to_owned()));
                rest.push("```".to_owned());
            }
        }
    }
    if calls.is_empty() {
        // A reply that is one fenced call of a tool that is not offered: a call all the same,
        // which fails loudly as an unknown tool, rather than the JSON shown as the answer.
        let blocks: Vec<&str> = trimmed.split("```").collect();
        if let [before, block, after] = blocks.as_slice()
            && before.trim().is_empty()
            && after.trim().is_empty()
            && let Some(body) = block
                .strip_prefix("json")
                .or(Some(block))
                .filter(|body| body.starts_with(['\n', '\r']))
            && let Some(call) =
                parse_json(body.trim()).and_then(|value| attempted_call(&value, tools))
        {
            return (vec![call], String::new());
        }
        return none();
    }
    (calls, rest.join("\n").trim().to_owned())
}

/// A reply of nothing but calls of offered tools, one after another: each a JSON object or an
/// array of them, fenced or bare (the embedded model's grammar lets a reply that opens with a
/// call go on with more). Fences are skipped only between values, never inside one.
fn calls_alone(text: &str, tools: &ToolSet) -> Option<Vec<ToolCallRequest>> {
    let mut calls = Vec::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest
            .strip_prefix("```json")
            .or_else(|| rest.strip_prefix("```"))
        {
            rest = after;
            continue;
        }
        if rest.is_empty() {
            break;
        }
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        let value = values.next()?.ok()?;
        calls.extend(calls_in(&value, tools)?);
        rest = &rest[values.byte_offset()..];
    }
    (!calls.is_empty()).then_some(calls)
}

/// A whole reply that is one object `{"name": "<a tool-like id>", "arguments": {…}}`: a call
/// of a tool that may not exist (`config.get`). Data that merely has a name (`{"name":
/// "Alice", …}`) is not one: the name must read as a tool id (dotted or snake case) and the
/// arguments must be an object.
fn attempted_call(value: &Value, tools: &ToolSet) -> Option<ToolCallRequest> {
    let object = value.as_object()?;
    let name = object.get("name")?.as_str()?;
    let tool_like = name.contains(['.', '_'])
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '_');
    let arguments = object
        .get("arguments")
        .or_else(|| object.get("parameters"))?;
    (tool_like && arguments.is_object() && object.len() == 2)
        .then(|| call_of(value, tools, true))
        .flatten()
}

/// JSON, or JSON in doubled braces (`{{"name": …}}`, a template's escaping copied by the model).
fn parse_json(text: &str) -> Option<Value> {
    serde_json::from_str(text).ok().or_else(|| {
        let inner = text.strip_prefix('{')?.strip_suffix('}')?.trim();
        inner
            .starts_with('{')
            .then(|| serde_json::from_str(inner).ok())
            .flatten()
    })
}

/// A call object or a list of them, every one naming an offered tool.
fn calls_in(value: &Value, tools: &ToolSet) -> Option<Vec<ToolCallRequest>> {
    match value {
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .map(|item| call_of(item, tools, false))
            .collect(),
        Value::Object(_) => Some(vec![call_of(value, tools, false)?]),
        _ => None,
    }
}

/// `{"name", "arguments"}` (or `parameters`, or OpenAI's `{"function": {…}}`) as a call.
/// The name may be the id or its wire form (`time_now` for `time.now`). Unknown names are
/// kept only when `any_name`.
fn call_of(value: &Value, tools: &ToolSet, any_name: bool) -> Option<ToolCallRequest> {
    let value = value
        .get("function")
        .filter(|f| f.is_object())
        .unwrap_or(value);
    let name = value.get("name")?.as_str()?;
    let arguments = value
        .get("arguments")
        .or_else(|| value.get("parameters"))
        .cloned()
        .unwrap_or(Value::Object(serde_json::Map::new()));
    let arguments = match arguments {
        // Some templates write the arguments as a JSON string.
        Value::String(text) => text,
        other => other.to_string(),
    };
    let id = match tools.get(name) {
        Some(_) => name.to_owned(),
        None => match tools.iter().find(|tool| wire_tool_name(tool.id()) == name) {
            Some(tool) => tool.id().to_owned(),
            None if any_name => name.to_owned(),
            None => return None,
        },
    };
    Some(ToolCallRequest {
        id: format!("call_{}", uuid::Uuid::new_v4().simple()),
        name: id,
        arguments,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde::{Deserialize, Serialize};

    use super::*;
    use crate::tool::define_tool;

    #[derive(Deserialize, schemars::JsonSchema)]
    struct Input {
        #[allow(dead_code)]
        timezone: Option<String>,
    }

    #[derive(Serialize, schemars::JsonSchema)]
    struct Output {
        iso: String,
    }

    fn tools() -> ToolSet {
        let now = define_tool("time.now", "Now", |_context, _input: Input| async move {
            Ok(Output { iso: String::new() })
        });
        ToolSet::new(vec![Arc::new(now)])
    }

    fn names(calls: &[ToolCallRequest]) -> Vec<(&str, &str)> {
        calls
            .iter()
            .map(|call| (call.name.as_str(), call.arguments.as_str()))
            .collect()
    }

    #[test]
    fn qwen_tags_become_calls_and_leave_the_text_around_them() {
        let text = "Let me check.\n<tool_call>\n{\"name\": \"time_now\", \"arguments\": {\"timezone\": \"Asia/Tokyo\"}}\n</tool_call>";
        let (calls, rest) = text_tool_calls(text, &tools());
        assert_eq!(
            names(&calls),
            [("time.now", r#"{"timezone":"Asia/Tokyo"}"#)]
        );
        assert_eq!(rest, "Let me check.");
        // A tag always means a call; an unknown name fails later as an unknown tool.
        let (calls, _) = text_tool_calls("<tool_call>{\"name\": \"nope\"}</tool_call>", &tools());
        assert_eq!(names(&calls), [("nope", "{}")]);
    }

    #[test]
    fn fenced_or_bare_json_calls_count_only_when_they_name_an_offered_tool() {
        let fenced = "```json\n{\n  \"name\": \"time_now\",\n  \"arguments\": {\n    \"timezone\": \"UTC\"\n  }\n}\n```";
        let (calls, rest) = text_tool_calls(fenced, &tools());
        assert_eq!(names(&calls), [("time.now", r#"{"timezone":"UTC"}"#)]);
        assert_eq!(rest, "");
        let bare = r#"{"name": "time.now", "parameters": "{}"}"#;
        assert_eq!(
            names(&text_tool_calls(bare, &tools()).0),
            [("time.now", "{}")]
        );
        let stray = "{\"name\": \"time_now\", \"arguments\": \"{}\"}\n```";
        assert_eq!(
            names(&text_tool_calls(stray, &tools()).0),
            [("time.now", "{}")]
        );
        let tools_tag = "<tools>\n{\"name\": \"time_now\", \"arguments\": {}}\n</tools>";
        assert_eq!(
            names(&text_tool_calls(tools_tag, &tools()).0),
            [("time.now", "{}")]
        );
        let doubled = r#"{{"name": "time_now", "arguments": {}}}"#;
        assert_eq!(
            names(&text_tool_calls(doubled, &tools()).0),
            [("time.now", "{}")]
        );
        // Several calls one after another, fenced or bare or in an array, as the embedded
        // model's grammar allows; a fence inside a value stays in it.
        for several in [
            "```json\n{\"name\": \"time_now\", \"arguments\": {}}\n```\n\n```json\n{\"name\": \"time.now\", \"arguments\": {\"timezone\": \"```\"}}\n```",
            "{\"name\": \"time_now\", \"arguments\": {}}\n{\"name\": \"time.now\", \"arguments\": {\"timezone\": \"```\"}}",
            "```json\n[{\"name\": \"time_now\", \"arguments\": {}}, {\"name\": \"time.now\", \"arguments\": {\"timezone\": \"```\"}}]\n```",
        ] {
            let (calls, rest) = text_tool_calls(several, &tools());
            assert_eq!(
                names(&calls),
                [("time.now", "{}"), ("time.now", r#"{"timezone":"```"}"#)],
                "{several}"
            );
            assert_eq!(rest, "");
        }
        // One call of a tool that is not offered, as the whole reply: a call, which fails as
        // an unknown tool (seen with Qwen2.5-Coder-1.5B in classic mode, eval config-port).
        for attempt in [
            "```json\n{\n  \"name\": \"config.get\",\n  \"arguments\": {\"key\": \"port\"}\n}\n```",
            r#"{"name": "config_get", "arguments": {}}"#,
        ] {
            let (calls, rest) = text_tool_calls(attempt, &tools());
            assert_eq!(calls.len(), 1, "{attempt}");
            assert!(calls[0].name.starts_with("config"), "{attempt}");
            assert_eq!(rest, "");
        }
        for text in [
            "```json\n{\"name\": \"Alice\", \"arguments\": 3}\n```",
            "```json\n{\"name\": \"Alice Smith\", \"arguments\": {}}\n```",
            "Here it is:\n```json\n{\"name\": \"config.get\", \"arguments\": {}}\n```",
            "{\"name\": \"Alice\"}",
            "The time is 12:00.",
            "```json\n{\"total\": 3}\n```",
        ] {
            let (calls, rest) = text_tool_calls(text, &tools());
            assert!(calls.is_empty(), "{text}");
            assert_eq!(rest, text);
        }
    }
}
