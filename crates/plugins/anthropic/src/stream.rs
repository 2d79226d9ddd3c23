//! The Messages API's stream read event by event: text as it arrives, each tool call whole
//! once its block closes, usage (cache reads and writes included) and the stop reason at the
//! end.

use std::collections::BTreeMap;

use agentic_core::{ModelEvent, PromptUsage, ProviderError, Reasoning, ToolCallRequest};
use agentic_wire::{ToolNameMap, shorten};
use serde_json::Value;

/// A content block being streamed.
#[derive(Debug)]
enum Block {
    Text,
    ToolUse {
        id: String,
        name: String,
        input: String,
    },
    /// Extended thinking: its text and the signature that lets it be sent back.
    Thinking {
        text: String,
        signature: String,
    },
    /// Thinking the API sent encrypted.
    RedactedThinking {
        data: String,
    },
    /// Any block this reader does not use.
    Other,
}

/// Reads one answer's events.
#[derive(Debug, Default)]
pub(crate) struct EventReader {
    blocks: BTreeMap<u64, Block>,
    input_tokens: u64,
    cache_read: u64,
    cache_write: u64,
    output_tokens: u64,
    stop_reason: Option<String>,
    model: Option<String>,
    stopped: bool,
}

impl EventReader {
    /// The events one streamed event gives, or the error it reports.
    pub(crate) fn read(
        &mut self,
        data: &Value,
        names: &ToolNameMap,
    ) -> Result<Vec<ModelEvent>, ProviderError> {
        let kind = data.get("type").and_then(Value::as_str).unwrap_or_default();
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        let mut events = Vec::new();
        match kind {
            "message_start" => {
                let message = data.get("message").unwrap_or(&Value::Null);
                self.model = message
                    .get("model")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                self.read_usage(message.get("usage"));
            }
            "content_block_start" => {
                let block = data.get("content_block").unwrap_or(&Value::Null);
                let text = |key: &str| {
                    block
                        .get(key)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                let started = match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let first = text("text");
                        if !first.is_empty() {
                            events.push(ModelEvent::TextDelta(first));
                        }
                        Block::Text
                    }
                    Some("tool_use") => {
                        // The input streams as JSON text; a block that came whole has it here.
                        let input = match block.get("input") {
                            Some(Value::Object(input)) if !input.is_empty() => {
                                Value::Object(input.clone()).to_string()
                            }
                            _ => String::new(),
                        };
                        Block::ToolUse {
                            id: text("id"),
                            name: names.tool_id(&text("name")),
                            input,
                        }
                    }
                    Some("thinking") => Block::Thinking {
                        text: text("thinking"),
                        signature: text("signature"),
                    },
                    Some("redacted_thinking") => Block::RedactedThinking { data: text("data") },
                    _ => Block::Other,
                };
                self.blocks.insert(index, started);
            }
            "content_block_delta" => {
                let delta = data.get("delta").unwrap_or(&Value::Null);
                let piece = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
                match (
                    delta.get("type").and_then(Value::as_str),
                    self.blocks.get_mut(&index),
                ) {
                    (Some("text_delta"), _) => {
                        events.push(ModelEvent::TextDelta(piece("text").to_owned()));
                    }
                    (Some("input_json_delta"), Some(Block::ToolUse { input, .. })) => {
                        input.push_str(piece("partial_json"));
                    }
                    (Some("input_json_delta"), _) => {
                        return Err(ProviderError::Stream(format!(
                            "tool input for block {index}, which is not a tool call"
                        )));
                    }
                    (Some("thinking_delta"), Some(Block::Thinking { text, .. })) => {
                        text.push_str(piece("thinking"));
                    }
                    (Some("signature_delta"), Some(Block::Thinking { signature, .. })) => {
                        signature.push_str(piece("signature"));
                    }
                    // Citations, and deltas added after this reader was written.
                    _ => {}
                }
            }
            "content_block_stop" => match self.blocks.remove(&index) {
                Some(Block::ToolUse { id, name, input }) => {
                    let arguments = if input.trim().is_empty() {
                        "{}".to_owned()
                    } else {
                        input
                    };
                    events.push(ModelEvent::ToolCall(ToolCallRequest {
                        id,
                        name,
                        arguments,
                    }));
                }
                Some(Block::Thinking { text, signature }) => {
                    let mut reasoning = Reasoning::new(crate::PROVIDER_ID, text);
                    if !signature.is_empty() {
                        reasoning = reasoning.with_signature(signature);
                    }
                    events.push(ModelEvent::Reasoning(reasoning));
                }
                Some(Block::RedactedThinking { data }) => {
                    events.push(ModelEvent::Reasoning(
                        Reasoning::new(crate::PROVIDER_ID, "").with_encrypted(data),
                    ));
                }
                Some(Block::Text | Block::Other) | None => {}
            },
            "message_delta" => {
                if let Some(reason) = data
                    .get("delta")
                    .and_then(|delta| delta.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(reason.to_owned());
                }
                self.read_usage(data.get("usage"));
            }
            "message_stop" => self.stopped = true,
            "error" => {
                let error = data.get("error").unwrap_or(&Value::Null);
                let what = error.get("type").and_then(Value::as_str).unwrap_or("error");
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| shorten(&error.to_string()), str::to_owned);
                return Err(ProviderError::Stream(format!(
                    "the model provider reported {what} mid-stream: {message}"
                )));
            }
            // `ping`, and event types added after this reader was written.
            _ => {}
        }
        Ok(events)
    }

    /// Counts in `message_start` and `message_delta` are running totals: the latest wins.
    fn read_usage(&mut self, usage: Option<&Value>) {
        let Some(usage) = usage else { return };
        let count = |key: &str| usage.get(key).and_then(Value::as_u64);
        if let Some(input) = count("input_tokens") {
            self.input_tokens = input;
        }
        if let Some(read) = count("cache_read_input_tokens") {
            self.cache_read = read;
        }
        if let Some(written) = count("cache_creation_input_tokens") {
            self.cache_write = written;
        }
        if let Some(output) = count("output_tokens") {
            self.output_tokens = output;
        }
    }

    /// Whether `message_stop` came.
    pub(crate) fn stopped(&self) -> bool {
        self.stopped
    }

    /// The usage and the stop reason, once the stream ended. `input_tokens` counts every
    /// token read, as in the other providers: the API's uncached input plus cache reads and
    /// writes, which are also given apart.
    pub(crate) fn finish(self, fallback_model: &str) -> Vec<ModelEvent> {
        let input = self.input_tokens + self.cache_read + self.cache_write;
        let mut usage = PromptUsage::tokens(input, self.output_tokens);
        usage.cache_read_tokens = self.cache_read;
        usage.cache_write_tokens = self.cache_write;
        usage.model = Some(self.model.unwrap_or_else(|| fallback_model.to_owned()));
        let reason = match self.stop_reason.as_deref() {
            Some("end_turn" | "stop_sequence") | None => "stop".to_owned(),
            Some("tool_use") => "tool_calls".to_owned(),
            Some("max_tokens") => "length".to_owned(),
            Some(other) => other.to_owned(),
        };
        vec![ModelEvent::Usage(usage), ModelEvent::Finished(reason)]
    }
}
