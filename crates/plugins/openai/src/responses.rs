//! OpenAI's Responses API (`/responses`, streamed), used statelessly: `store: false`, the
//! conversation sent whole as input items, and reasoning items asked for encrypted
//! (`include: ["reasoning.encrypted_content"]`) and sent back in the next request of a tool
//! loop, so that the model keeps its reasoning between calls.

use std::collections::BTreeMap;

use agentic_core::{
    ChatRole, ModelEvent, ModelRequest, PromptUsage, ProviderError, Reasoning, ToolCallRequest,
    ToolChoice,
};
use agentic_wire::{ToolNameMap, shorten};
use serde_json::{Map, Value, json};

use crate::config::OpenAiConfig;

/// What reasoning from this API is marked with; only it is sent reasoning back.
pub(crate) const REASONING_PROVIDER: &str = "openai";

/// The request body for `request`.
pub(crate) fn request_body(
    request: &ModelRequest,
    model: &str,
    names: &ToolNameMap,
    config: &OpenAiConfig,
) -> Value {
    let mut instructions: Vec<&str> = Vec::new();
    let mut input: Vec<Value> = Vec::new();
    for message in &request.messages {
        match message.role {
            ChatRole::System => instructions.push(&message.content),
            ChatRole::User => input.push(json!({ "role": "user", "content": message.content })),
            ChatRole::Assistant => {
                for reasoning in message.reasoning_of(REASONING_PROVIDER) {
                    // Without its encrypted form a stateless request cannot refer to it.
                    let Some(encrypted) = &reasoning.encrypted else {
                        continue;
                    };
                    let summary: Vec<Value> = if reasoning.text.is_empty() {
                        Vec::new()
                    } else {
                        vec![json!({ "type": "summary_text", "text": reasoning.text })]
                    };
                    let mut item = json!({
                        "type": "reasoning",
                        "summary": summary,
                        "encrypted_content": encrypted,
                    });
                    if let Some(id) = &reasoning.item_id {
                        item["id"] = json!(id);
                    }
                    input.push(item);
                }
                if !message.content.trim().is_empty() {
                    input.push(json!({ "role": "assistant", "content": message.content }));
                }
                for call in &message.tool_calls {
                    input.push(json!({
                        "type": "function_call",
                        "call_id": call.id,
                        "name": names.wire_name(&call.name),
                        "arguments": call.arguments,
                    }));
                }
            }
            ChatRole::Tool => input.push(json!({
                "type": "function_call_output",
                "call_id": message.tool_call_id.as_deref().unwrap_or_default(),
                "output": message.content,
            })),
        }
    }
    let tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| {
            json!({
                "type": "function",
                "name": names.wire_name(&tool.name),
                "description": tool.description,
                "parameters": *tool.parameters,
                "strict": false,
            })
        })
        .collect();
    let mut body = Map::new();
    body.insert("model".to_owned(), json!(model));
    if !instructions.is_empty() {
        body.insert("instructions".to_owned(), json!(instructions.join("\n\n")));
    }
    body.insert("input".to_owned(), Value::Array(input));
    if !tools.is_empty() {
        body.insert("tools".to_owned(), Value::Array(tools));
        if ToolChoice::required(request) {
            body.insert("tool_choice".to_owned(), json!("required"));
        }
    }
    body.insert("stream".to_owned(), json!(true));
    body.insert("store".to_owned(), json!(false));
    body.insert("include".to_owned(), json!(["reasoning.encrypted_content"]));
    if let Some(effort) = &config.reasoning_effort {
        body.insert(
            "reasoning".to_owned(),
            json!({ "effort": effort, "summary": "auto" }),
        );
    }
    if let Some(limit) = request.max_tokens.or(config.max_tokens) {
        body.insert("max_output_tokens".to_owned(), json!(limit));
    }
    let temperature = match (config.temperature, request.min_temperature) {
        (Some(configured), _) => Some(request.temperature(f64::from(configured))),
        (None, Some(floor)) => Some(f64::from(floor)),
        (None, None) => None,
    };
    if let Some(temperature) = temperature {
        body.insert("temperature".to_owned(), json!(temperature));
    }
    // The Responses API takes no stop sequences: a request's are not sent.
    Value::Object(body)
}

/// Reads one response's events.
#[derive(Debug, Default)]
pub(crate) struct EventReader {
    /// Function calls being streamed, by output index: arguments so far.
    arguments: BTreeMap<u64, String>,
    calls: usize,
    usage: Option<Value>,
    model: Option<String>,
    finish: Option<String>,
}

impl EventReader {
    /// The events one streamed event gives, or the error it reports.
    pub(crate) fn read(
        &mut self,
        event: &Value,
        names: &ToolNameMap,
    ) -> Result<Vec<ModelEvent>, ProviderError> {
        let kind = event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let text = |key: &str| event.get(key).and_then(Value::as_str).unwrap_or_default();
        let mut events = Vec::new();
        match kind {
            "response.created" | "response.in_progress" => self.read_response(event),
            "response.output_text.delta" => {
                let delta = text("delta");
                if !delta.is_empty() {
                    events.push(ModelEvent::TextDelta(delta.to_owned()));
                }
            }
            "response.function_call_arguments.delta" => {
                let index = event
                    .get("output_index")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                self.arguments
                    .entry(index)
                    .or_default()
                    .push_str(text("delta"));
            }
            "response.output_item.done" => {
                let index = event
                    .get("output_index")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                let item = event.get("item").unwrap_or(&Value::Null);
                let field = |key: &str| item.get(key).and_then(Value::as_str);
                match field("type") {
                    Some("function_call") => {
                        let streamed = self.arguments.remove(&index).unwrap_or_default();
                        let arguments = match field("arguments") {
                            Some(whole) if !whole.is_empty() => whole.to_owned(),
                            _ if !streamed.is_empty() => streamed,
                            _ => "{}".to_owned(),
                        };
                        let name = field("name").unwrap_or_default();
                        let id = field("call_id").or(field("id")).unwrap_or_default();
                        if name.is_empty() || id.is_empty() {
                            return Err(ProviderError::Stream(format!(
                                "a function call without a name or call id: {}",
                                shorten(&item.to_string())
                            )));
                        }
                        self.calls += 1;
                        events.push(ModelEvent::ToolCall(ToolCallRequest {
                            id: id.to_owned(),
                            name: names.tool_id(name),
                            arguments,
                        }));
                    }
                    Some("reasoning") => {
                        let summary: Vec<&str> = item
                            .get("summary")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .filter_map(|part| part.get("text").and_then(Value::as_str))
                            .collect();
                        let mut reasoning =
                            Reasoning::new(REASONING_PROVIDER, summary.join("\n\n"));
                        if let Some(encrypted) = field("encrypted_content") {
                            reasoning = reasoning.with_encrypted(encrypted);
                        }
                        if let Some(id) = field("id") {
                            reasoning = reasoning.with_item_id(id);
                        }
                        events.push(ModelEvent::Reasoning(reasoning));
                    }
                    // Messages came as text deltas; other items are not used.
                    _ => {}
                }
            }
            "response.completed" => {
                self.read_response(event);
                self.finish = Some(if self.calls > 0 { "tool_calls" } else { "stop" }.to_owned());
            }
            "response.incomplete" => {
                self.read_response(event);
                let reason = event
                    .pointer("/response/incomplete_details/reason")
                    .and_then(Value::as_str)
                    .unwrap_or("incomplete");
                self.finish = Some(match reason {
                    "max_output_tokens" => "length".to_owned(),
                    other => other.to_owned(),
                });
            }
            "response.failed" => {
                let error = event.pointer("/response/error").unwrap_or(&Value::Null);
                return Err(failure(error));
            }
            "error" => return Err(failure(event)),
            // Part and item starts, summaries as they stream, `done` events whose content
            // came in deltas, and event types added after this reader was written.
            _ => {}
        }
        Ok(events)
    }

    fn read_response(&mut self, event: &Value) {
        let Some(response) = event.get("response") else {
            return;
        };
        if let Some(model) = response.get("model").and_then(Value::as_str) {
            self.model = Some(model.to_owned());
        }
        if let Some(usage) = response.get("usage").filter(|usage| usage.is_object()) {
            self.usage = Some(usage.clone());
        }
    }

    /// Whether the response completed or stopped short (`response.completed` or
    /// `response.incomplete` came).
    pub(crate) fn finished(&self) -> bool {
        self.finish.is_some()
    }

    /// The usage and why the model stopped.
    pub(crate) fn finish(self, fallback_model: &str) -> Vec<ModelEvent> {
        let count = |pointer: &str| {
            self.usage
                .as_ref()
                .and_then(|usage| usage.pointer(pointer))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        let mut usage = PromptUsage::tokens(count("/input_tokens"), count("/output_tokens"));
        if count("/total_tokens") > 0 {
            usage.total_tokens = count("/total_tokens");
        }
        usage.cache_read_tokens = count("/input_tokens_details/cached_tokens");
        usage.reasoning_tokens = count("/output_tokens_details/reasoning_tokens");
        usage.model = Some(self.model.unwrap_or_else(|| fallback_model.to_owned()));
        vec![
            ModelEvent::Usage(usage),
            ModelEvent::Finished(self.finish.unwrap_or_else(|| "stop".to_owned())),
        ]
    }
}

fn failure(error: &Value) -> ProviderError {
    let code = error.get("code").and_then(Value::as_str).unwrap_or("error");
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| shorten(&error.to_string()), str::to_owned);
    ProviderError::Stream(format!(
        "the model provider reported {code} mid-stream: {message}"
    ))
}
