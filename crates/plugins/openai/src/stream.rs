//! Reads streamed chunks tolerantly: fields may be missing, `null`, or of a bent type, tool
//! call fragments arrive across chunks (with or without `index`, with the id repeated or
//! not), and the legacy `function_call` may come beside or instead of `tool_calls`.

use std::collections::BTreeMap;

use agentic_core::tokens::{estimate_call_tokens, estimate_request_tokens, estimate_tokens};
use agentic_core::{ModelEvent, ModelRequest, PromptUsage, ProviderError, ToolCallRequest};
use serde_json::Value;

use agentic_wire::ToolNameMap;

/// Collects one streamed answer.
#[derive(Debug, Default)]
pub(crate) struct ChunkReader {
    calls: BTreeMap<usize, PartialCall>,
    last_index: Option<usize>,
    finished: bool,
    finish_reason: Option<String>,
    usage: Option<PromptUsage>,
    model: Option<String>,
    saw_tool_calls: bool,
    /// The text the model wrote, for an estimate when the server reports no usage.
    answered: String,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

impl ChunkReader {
    /// Reads one `data:` payload; returns the text deltas it carried.
    pub(crate) fn read(&mut self, chunk: &Value) -> Result<Vec<ModelEvent>, ProviderError> {
        if let Some(error) = chunk.get("error").filter(|error| !error.is_null()) {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_owned);
            return Err(ProviderError::Stream(format!(
                "the server sent an error: {message}"
            )));
        }
        if let Some(model) = text(chunk.get("model")) {
            self.model = Some(model.to_owned());
        }
        if let Some(usage) = chunk.get("usage").filter(|usage| usage.is_object()) {
            self.usage = Some(read_usage(usage));
        }
        let mut events = Vec::new();
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else {
            return Ok(events);
        };
        // Only the first choice is used; we never ask for more than one.
        for choice in choices
            .iter()
            .filter(|choice| choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        {
            // Non-streamed answers carry `message` instead of `delta`.
            let delta = choice
                .get("delta")
                .filter(|delta| delta.is_object())
                .or_else(|| choice.get("message").filter(|message| message.is_object()));
            if let Some(delta) = delta {
                if let Some(content) = text(delta.get("content")) {
                    self.answered.push_str(content);
                    events.push(ModelEvent::TextDelta(content.to_owned()));
                }
                if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                    for call in calls {
                        self.saw_tool_calls = true;
                        self.read_tool_call(call);
                    }
                }
                if !self.saw_tool_calls
                    && let Some(call) = delta.get("function_call").filter(|call| call.is_object())
                {
                    self.read_legacy_function_call(call);
                }
            }
            if let Some(reason) = text(choice.get("finish_reason")) {
                self.finished = true;
                self.finish_reason = Some(reason.to_owned());
            }
        }
        Ok(events)
    }

    /// True once a choice has said why it stopped.
    pub(crate) fn finished(&self) -> bool {
        self.finished
    }

    /// The tool calls and usage, once the stream is over. A server that sent no usage (as
    /// llama.cpp's never does) gets an estimate: `request`'s tokens in, what the model wrote
    /// out, marked as estimated.
    pub(crate) fn finish(
        self,
        names: &ToolNameMap,
        fallback_model: &str,
        request: &ModelRequest,
    ) -> Vec<ModelEvent> {
        let estimated_output = (self.usage.is_none()).then(|| {
            estimate_tokens(&self.answered)
                + self
                    .calls
                    .values()
                    .map(|call| estimate_call_tokens(&call.name, &call.arguments))
                    .sum::<u64>()
        });
        let mut events: Vec<ModelEvent> = self
            .calls
            .into_values()
            .filter(|call| !call.name.is_empty() || !call.arguments.is_empty())
            .map(|call| {
                ModelEvent::ToolCall(ToolCallRequest {
                    id: call.id.unwrap_or_else(generated_call_id),
                    name: names.tool_id(&call.name),
                    arguments: call.arguments,
                })
            })
            .collect();
        let mut usage = match (self.usage, estimated_output) {
            (Some(usage), _) => usage,
            (None, output) => {
                let input = estimate_request_tokens(request);
                let output = output.unwrap_or(0);
                let mut usage = PromptUsage::tokens(input, output);
                usage.estimated = true;
                usage
            }
        };
        usage.model = Some(self.model.unwrap_or_else(|| fallback_model.to_owned()));
        if let Some(reason) = self.finish_reason {
            events.push(ModelEvent::Finished(reason));
        }
        events.push(ModelEvent::Usage(usage));
        events
    }

    fn read_tool_call(&mut self, call: &Value) {
        let id = text(call.get("id"));
        let index = match call.get("index").and_then(Value::as_u64) {
            Some(index) => usize::try_from(index).unwrap_or(usize::MAX),
            None => match id {
                // Without an index, an id names the call: a known one continues it.
                Some(id) => self
                    .calls
                    .iter()
                    .find(|(_, partial)| partial.id.as_deref() == Some(id))
                    .map(|(index, _)| *index)
                    .unwrap_or_else(|| self.calls.len()),
                None => self.last_index.unwrap_or(0),
            },
        };
        self.last_index = Some(index);
        let partial = self.calls.entry(index).or_default();
        if let Some(id) = id {
            partial.id.get_or_insert_with(|| id.to_owned());
        }
        if let Some(function) = call.get("function") {
            append_function(partial, function);
        }
    }

    fn read_legacy_function_call(&mut self, function: &Value) {
        let partial = self.calls.entry(0).or_default();
        append_function(partial, function);
    }
}

fn append_function(partial: &mut PartialCall, function: &Value) {
    if let Some(name) = text(function.get("name")) {
        // Some servers repeat the whole name in every chunk instead of sending it once.
        if partial.name != name {
            partial.name.push_str(name);
        }
    }
    match function.get("arguments") {
        Some(Value::String(fragment)) => partial.arguments.push_str(fragment),
        // A few servers send the arguments as an object rather than a JSON string.
        Some(object @ Value::Object(_)) => partial.arguments.push_str(&object.to_string()),
        _ => {}
    }
}

/// A non-empty string, or `None` for missing, `null`, empty or non-string values.
fn text(value: Option<&Value>) -> Option<&str> {
    value
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
}

fn read_usage(usage: &Value) -> PromptUsage {
    let number = |value: Option<&Value>| value.and_then(Value::as_u64).unwrap_or(0);
    let input = number(usage.get("prompt_tokens"));
    let output = number(usage.get("completion_tokens"));
    let total = usage
        .get("total_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(input + output);
    let mut read = PromptUsage::tokens(input, output);
    read.total_tokens = total;
    read.reasoning_tokens = number(
        usage
            .get("completion_tokens_details")
            .and_then(|details| details.get("reasoning_tokens")),
    );
    // Part of prompt_tokens, which counts them too (OpenAI's prompt caching is automatic).
    read.cache_read_tokens = number(
        usage
            .get("prompt_tokens_details")
            .and_then(|details| details.get("cached_tokens")),
    )
    .min(input);
    read
}

fn generated_call_id() -> String {
    format!("call_{:016x}", fastrand::u64(..))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn names() -> ToolNameMap {
        ToolNameMap::new(["time.now", "kit.add"])
    }

    #[test]
    fn bent_chunks_are_read() {
        let mut reader = ChunkReader::default();
        let chunks = [
            json!({"choices": [{"delta": {"role": null, "content": "Hi"}, "finish_reason": ""}]}),
            json!({"choices": [{"delta": {"content": null, "tool_calls": [
                {"id": "c1", "function": {"name": "time_now", "arguments": "{\"time"}}
            ]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [
                {"id": "c1", "function": {"arguments": "zone\":\"UTC\"}"}}
            ]}}]}),
            json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}], "model": "m-1"}),
            json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 7}}),
        ];
        let mut text = String::new();
        for chunk in &chunks {
            for event in reader.read(chunk).unwrap() {
                if let ModelEvent::TextDelta(delta) = event {
                    text.push_str(&delta);
                }
            }
        }
        assert!(reader.finished());
        assert_eq!(text, "Hi");
        let events = reader.finish(&names(), "fallback", &request());
        let mut usage = PromptUsage::tokens(5, 7);
        usage.model = Some("m-1".into());
        assert_eq!(
            events,
            vec![
                ModelEvent::ToolCall(ToolCallRequest {
                    id: "c1".into(),
                    name: "time.now".into(),
                    arguments: "{\"timezone\":\"UTC\"}".into(),
                }),
                ModelEvent::Finished("tool_calls".into()),
                ModelEvent::Usage(usage),
            ]
        );
    }

    #[test]
    fn legacy_function_call_beside_tool_calls_is_ignored() {
        let mut reader = ChunkReader::default();
        reader
            .read(&json!({"choices": [{"delta": {
                "tool_calls": [{"index": 0, "id": "a", "function": {"name": "kit_add", "arguments": "{}"}}],
                "function_call": {"name": "kit_add", "arguments": "{}"}
            }}]}))
            .unwrap();
        let events = reader.finish(&names(), "m", &request());
        let calls = events
            .iter()
            .filter(|event| matches!(event, ModelEvent::ToolCall(_)))
            .count();
        assert_eq!(calls, 1);
    }

    #[test]
    fn legacy_function_call_alone_becomes_a_tool_call() {
        let mut reader = ChunkReader::default();
        reader
            .read(&json!({"choices": [{"delta": {"function_call": {"name": "kit_add", "arguments": "{\"a\":1}"}}}]}))
            .unwrap();
        let events = reader.finish(&names(), "m", &request());
        let [ModelEvent::ToolCall(call), ModelEvent::Usage(_)] = events.as_slice() else {
            panic!("expected one call, got {events:?}")
        };
        assert_eq!(call.name, "kit.add");
        assert_eq!(call.arguments, "{\"a\":1}");
        assert!(call.id.starts_with("call_"));
    }

    fn request() -> ModelRequest {
        ModelRequest::new(
            agentic_core::ModelKind::Normal,
            vec![agentic_core::ChatMessage::user("What time is it in Oslo?")],
        )
    }

    /// Regression (issue 15): llama.cpp's server never sends usage, which left every prompt at
    /// 0 tokens. The one estimator fills in, and says so.
    #[test]
    fn a_stream_without_usage_gets_an_estimate_marked_as_such() {
        let mut reader = ChunkReader::default();
        for chunk in [
            json!({"choices": [{"delta": {"content": "Let me look."}}]}),
            json!({"choices": [{"delta": {"tool_calls": [
                {"index": 0, "id": "c1", "function": {"name": "time_now", "arguments": "{\"timezone\":\"Europe/Oslo\"}"}}
            ]}, "finish_reason": "tool_calls"}]}),
        ] {
            reader.read(&chunk).unwrap();
        }
        let events = reader.finish(&names(), "local-qwen", &request());
        let Some(ModelEvent::Usage(usage)) = events.last() else {
            panic!("expected usage last, got {events:?}")
        };
        // "What time is it in Oslo?" is 24 characters; "Let me look." 12, "time.now" 8 and
        // the arguments 27.
        let mut expected = PromptUsage::tokens(6, 3 + 2 + 7);
        expected.model = Some("local-qwen".into());
        expected.estimated = true;
        assert_eq!(usage, &expected);
        assert_eq!(usage.total_tokens, 18);
    }

    #[test]
    fn an_error_chunk_is_an_error() {
        let mut reader = ChunkReader::default();
        let error = reader
            .read(&json!({"error": {"message": "context length exceeded"}}))
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "model stream failed: the server sent an error: context length exceeded"
        );
    }
}
