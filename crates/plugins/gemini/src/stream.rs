//! The streamed `GenerateContentResponse` chunks read one by one: text as it arrives, thought
//! parts gathered into reasoning, each function call whole (the API does not stream
//! arguments), and at the end usage (cached and thinking tokens included) and why the model
//! stopped, or the error a safety block or a malformed call is.

use agentic_core::{ModelEvent, PromptUsage, ProviderError, Reasoning, ToolCallRequest};
use agentic_wire::{ToolNameMap, shorten};
use serde_json::Value;

use crate::wire::MADE_UP_ID;

/// Reads one answer's chunks.
#[derive(Debug, Default)]
pub(crate) struct ChunkReader {
    /// Thought text not yet given out as reasoning.
    thought: String,
    /// Whether any text or call came.
    answered: bool,
    calls: usize,
    finish_reason: Option<String>,
    finish_message: Option<String>,
    blocked: Option<String>,
    usage: Option<Value>,
    model: Option<String>,
}

impl ChunkReader {
    /// The events one chunk gives, or the error it reports.
    pub(crate) fn read(
        &mut self,
        chunk: &Value,
        names: &ToolNameMap,
    ) -> Result<Vec<ModelEvent>, ProviderError> {
        if let Some(error) = chunk.get("error") {
            let status = error
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("error");
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| shorten(&error.to_string()), str::to_owned);
            return Err(ProviderError::Stream(format!(
                "the model provider reported {status} mid-stream: {message}"
            )));
        }
        if let Some(model) = chunk.get("modelVersion").and_then(Value::as_str) {
            self.model = Some(model.to_owned());
        }
        if let Some(usage) = chunk.get("usageMetadata") {
            // Running totals: the latest wins.
            self.usage = Some(usage.clone());
        }
        if let Some(reason) = chunk
            .get("promptFeedback")
            .and_then(|feedback| feedback.get("blockReason"))
            .and_then(Value::as_str)
        {
            self.blocked = Some(reason.to_owned());
        }
        let mut events = Vec::new();
        // One candidate is asked for; a server that sends more is read for its first.
        let Some(candidate) = chunk
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|candidates| candidates.first())
        else {
            return Ok(events);
        };
        let parts = candidate
            .get("content")
            .and_then(|content| content.get("parts"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for part in parts {
            self.read_part(part, names, &mut events)?;
        }
        if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
            self.finish_message = candidate
                .get("finishMessage")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        Ok(events)
    }

    fn read_part(
        &mut self,
        part: &Value,
        names: &ToolNameMap,
        events: &mut Vec<ModelEvent>,
    ) -> Result<(), ProviderError> {
        let signature = part
            .get("thoughtSignature")
            .and_then(Value::as_str)
            .filter(|signature| !signature.is_empty());
        let thought = part.get("thought").and_then(Value::as_bool) == Some(true);
        if let Some(call) = part.get("functionCall") {
            let name = call
                .get("name")
                .and_then(Value::as_str)
                .filter(|name| !name.is_empty())
                .ok_or_else(|| {
                    ProviderError::Stream(format!(
                        "a function call without a name: {}",
                        shorten(&call.to_string())
                    ))
                })?;
            let id = call
                .get("id")
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty())
                .map_or_else(
                    || format!("{MADE_UP_ID}{}", uuid::Uuid::new_v4().simple()),
                    str::to_owned,
                );
            let arguments = match call.get("args") {
                Some(Value::Null) | None => "{}".to_owned(),
                Some(args) => args.to_string(),
            };
            // The signature belongs to this call: it is sent back on it.
            if let Some(signature) = signature {
                let thought = std::mem::take(&mut self.thought);
                events.push(ModelEvent::Reasoning(
                    Reasoning::new(crate::PROVIDER_ID, thought)
                        .with_signature(signature)
                        .with_item_id(id.clone()),
                ));
            } else {
                self.flush_thought(events);
            }
            self.answered = true;
            self.calls += 1;
            events.push(ModelEvent::ToolCall(ToolCallRequest {
                id,
                name: names.tool_id(name),
                arguments,
            }));
            return Ok(());
        }
        let text = part.get("text").and_then(Value::as_str).unwrap_or_default();
        if thought {
            self.thought.push_str(text);
            if let Some(signature) = signature {
                let thought = std::mem::take(&mut self.thought);
                events.push(ModelEvent::Reasoning(
                    Reasoning::new(crate::PROVIDER_ID, thought).with_signature(signature),
                ));
            }
            return Ok(());
        }
        self.flush_thought(events);
        if !text.is_empty() {
            self.answered = true;
            events.push(ModelEvent::TextDelta(text.to_owned()));
        }
        if let Some(signature) = signature {
            events.push(ModelEvent::Reasoning(
                Reasoning::new(crate::PROVIDER_ID, "").with_signature(signature),
            ));
        }
        // Inline data, code execution and parts added after this reader was written.
        Ok(())
    }

    fn flush_thought(&mut self, events: &mut Vec<ModelEvent>) {
        if !self.thought.trim().is_empty() {
            let thought = std::mem::take(&mut self.thought);
            events.push(ModelEvent::Reasoning(Reasoning::new(
                crate::PROVIDER_ID,
                thought,
            )));
        }
        self.thought.clear();
    }

    /// What the end of the stream gives: the last reasoning, the usage and the stop reason;
    /// or the error a blocked prompt, a blocked answer, a malformed call or a stream cut
    /// before its finish reason is.
    pub(crate) fn finish(mut self, fallback_model: &str) -> Result<Vec<ModelEvent>, ProviderError> {
        let mut events = Vec::new();
        self.flush_thought(&mut events);
        if let Some(reason) = &self.blocked
            && !self.answered
        {
            return Err(ProviderError::Stream(format!(
                "Gemini refused the prompt ({reason})"
            )));
        }
        let Some(reason) = self.finish_reason.as_deref() else {
            return Err(ProviderError::Stream(
                "the stream ended before the model finished (no finishReason)".to_owned(),
            ));
        };
        let detail = self
            .finish_message
            .as_deref()
            .map(|message| format!(": {message}"))
            .unwrap_or_default();
        let reason = match reason {
            "STOP" | "FINISH_REASON_UNSPECIFIED" if self.calls > 0 => "tool_calls".to_owned(),
            "STOP" | "FINISH_REASON_UNSPECIFIED" => "stop".to_owned(),
            "MAX_TOKENS" => "length".to_owned(),
            "MALFORMED_FUNCTION_CALL" | "UNEXPECTED_TOOL_CALL" | "TOO_MANY_TOOL_CALLS" => {
                return Err(ProviderError::Stream(format!(
                    "the model made a function call the API could not read ({reason}){detail}"
                )));
            }
            // Safety, recitation, blocklists: an answer stopped part-way keeps what came.
            other if !self.answered => {
                return Err(ProviderError::Stream(format!(
                    "Gemini stopped the answer before it began ({other}){detail}"
                )));
            }
            _ => "content_filter".to_owned(),
        };
        events.push(ModelEvent::Usage(self.usage(fallback_model)));
        events.push(ModelEvent::Finished(reason));
        Ok(events)
    }

    /// Input counts every token read (the prompt, cached or not, and tool-use prompts);
    /// output counts the answer and the thinking, as the API bills them.
    fn usage(&self, fallback_model: &str) -> PromptUsage {
        let count = |key: &str| {
            self.usage
                .as_ref()
                .and_then(|usage| usage.get(key))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        let input = count("promptTokenCount") + count("toolUsePromptTokenCount");
        let thoughts = count("thoughtsTokenCount");
        let output = count("candidatesTokenCount") + thoughts;
        let mut usage = PromptUsage::tokens(input, output);
        if count("totalTokenCount") > 0 {
            usage.total_tokens = count("totalTokenCount");
        }
        usage.reasoning_tokens = thoughts;
        usage.cache_read_tokens = count("cachedContentTokenCount");
        usage.model = Some(
            self.model
                .clone()
                .unwrap_or_else(|| fallback_model.to_owned()),
        );
        usage
    }
}
