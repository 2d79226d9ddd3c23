//! Model providers: messages and tool specs go in, a stream of text deltas, tool calls and
//! usage comes out. Concrete providers live in plugin crates and register a
//! [`ProviderFactory`] from their plugin's `setup()`.

use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::Instrument as _;

use crate::config::{Config, ModelPrice, Prices};
use crate::prompt::{ModelKind, PromptUsage, Reasoning};
use crate::telemetry;

/// Who a [`ChatMessage`] is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    /// The runtime's instructions to the model.
    System,
    /// The person asking.
    User,
    /// The model.
    Assistant,
    /// A tool's result, answering one call.
    Tool,
}

/// One message of the conversation sent to a model, in the shape of the OpenAI wire format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatMessage {
    /// Who it is from.
    pub role: ChatRole,
    /// Its text.
    pub content: String,
    /// Calls an assistant message made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallRequest>,
    /// The call a `tool` message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Whether a `tool` message reports that the call failed (the wire formats that can say
    /// so, Anthropic's `is_error`, are told).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// The reasoning an assistant message began with. A provider sends back only its own
    /// (see [`Reasoning::provider`]), as its API requires within a tool loop.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning: Vec<Reasoning>,
}

impl ChatMessage {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(ChatRole::System, content.into())
    }
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(ChatRole::User, content.into())
    }
    /// An assistant message without tool calls.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::plain(ChatRole::Assistant, content.into())
    }
    /// A `tool` message: the result of the call `tool_call_id`.
    pub fn tool_result(tool_call_id: &str, content: impl Into<String>) -> Self {
        Self {
            role: ChatRole::Tool,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: Some(tool_call_id.to_owned()),
            is_error: false,
            reasoning: Vec::new(),
        }
    }
    /// A `tool` message saying that the call `tool_call_id` failed, and why.
    pub fn tool_error(tool_call_id: &str, content: impl Into<String>) -> Self {
        Self {
            is_error: true,
            ..Self::tool_result(tool_call_id, content)
        }
    }
    fn plain(role: ChatRole, content: String) -> Self {
        Self {
            role,
            content,
            tool_calls: Vec::new(),
            tool_call_id: None,
            is_error: false,
            reasoning: Vec::new(),
        }
    }

    /// The reasoning of this message that `provider` wrote, which is what it may be sent.
    pub fn reasoning_of<'a>(&'a self, provider: &'a str) -> impl Iterator<Item = &'a Reasoning> {
        self.reasoning
            .iter()
            .filter(move |reasoning| reasoning.provider == provider)
    }
}

/// A tool call as the model made it. `name` is the dotted tool id (providers map wire names
/// back); `arguments` is the raw JSON text, which may be malformed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallRequest {
    /// The call's id, which the `tool` message with its result names.
    pub id: String,
    /// The dotted tool id.
    pub name: String,
    /// The arguments, as raw JSON text.
    pub arguments: String,
}

/// Longest tool name providers accept.
pub const MAX_TOOL_NAME: usize = 64;

/// A tool id as providers' names allow it (`^[a-zA-Z0-9_-]{1,64}$`): every other character
/// becomes `_`, an empty id is `tool`, and the name is cut at 64. `time.now` → `time_now`.
/// Collisions are the provider's to resolve (see the OpenAI provider's name map).
pub fn wire_tool_name(id: &str) -> String {
    let cleaned: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_TOOL_NAME)
        .collect();
    if cleaned.is_empty() {
        "tool".to_owned()
    } else {
        cleaned
    }
}

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The dotted tool id.
    pub name: String,
    /// What the tool does, as the model reads it.
    pub description: String,
    /// Shared with the tool: a request per model call would otherwise copy every schema.
    pub parameters: std::sync::Arc<Value>,
}

/// How warm a reply is sampled when a mode asks again for another answer.
pub const RESAMPLE_TEMPERATURE: f32 = 0.7;

/// The most replies a mode samples again in place of one ([`crate::config::RuntimeLimits::candidates`]
/// is held to it).
pub const MAX_CANDIDATES: u32 = 16;

/// One request to a model: the messages, and the tools it may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRequest {
    /// The class of model to answer; the provider resolves it to a name.
    pub model: ModelKind,
    /// The conversation, in order.
    pub messages: Vec<ChatMessage>,
    /// The tools the model may call; none when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// The most tokens the answer may have; `None` leaves it to the provider's config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Texts that end the answer where they appear; the answer stops before them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Sample at least this warm, whatever temperature the provider is set to. A caller sets
    /// it when it asks again after a reply it could not use: at temperature 0 the same
    /// model, asked nearly the same, writes the same reply. A provider whose temperature is
    /// left to its server's default leaves it there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_temperature: Option<f32>,
    /// A grammar the answer must follow, in llguidance's Lark dialect. A provider that
    /// decodes the model itself (the embedded one) generates under it; a provider that cannot
    /// ignores it, so it is a help to the model, never a check of the answer. Code mode sets
    /// it to the JavaScript its sandbox runs with this prompt's tools, and to one JSON value
    /// for a script's `llmJson()`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grammar: Option<String>,
    /// The sampler's seed for this answer, for a caller that asks one request several times
    /// for different answers (with a `min_temperature`). A provider that cannot set it
    /// leaves it to chance ([`ModelProvider::samples`] says whether asking again can differ).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// With a `grammar` of JavaScript programs: the functions a program may call by a bare
    /// name without declaring them (the language's globals, the sandbox's functions, the
    /// tools as bound). A provider that decodes under the grammar keeps a program from
    /// calling any other bare name it has not declared before the call (`requireArtifact(…)`):
    /// it takes the name back and writes something else there. One that cannot ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callable: Option<Vec<String>>,
    /// With a `grammar` of JavaScript programs: tool calls this turn made that failed, for a
    /// reason that trying again does not change (a missing file, a refused input). A
    /// provider that decodes under the grammar keeps a program from making one of them again
    /// with the same literal input: it takes the method's name back and writes something
    /// else there. One that cannot ignores them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_calls: Vec<FailedCall>,
    /// With a `grammar` of JavaScript programs: the fields a read of a tool's result may
    /// name, per function a program calls the tool by. A provider that decodes under the
    /// grammar keeps a program from reading any other field of a `const` bound to such a
    /// call (`const r = fs.read({…});` then `r.entries`): it takes the field back and writes
    /// another there. One that cannot ignores them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub result_fields: Vec<ResultFields>,
    /// Whether the answer may be text, or must call one or more of `tools`. Every provider
    /// passes it on in its API's words (`tool_choice: "required"`, `{"type": "any"}`, mode
    /// `ANY`); the embedded one decodes under a grammar of calls alone.
    #[serde(default, skip_serializing_if = "ToolChoice::is_auto")]
    pub tool_choice: ToolChoice,
}

/// Whether an answer may be text or must call a tool (see [`ModelRequest::tool_choice`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ToolChoice {
    /// The model chooses between answering in text and calling tools.
    #[default]
    Auto,
    /// The answer calls one or more of the offered tools, and says nothing else. Without
    /// tools offered, it is the same as `Auto`.
    Required,
}

impl ToolChoice {
    /// Whether the model may answer in text.
    pub fn is_auto(&self) -> bool {
        *self == Self::Auto
    }

    /// Whether `request` must call a tool: `Required`, with tools offered.
    pub fn required(request: &ModelRequest) -> bool {
        request.tool_choice == Self::Required && !request.tools.is_empty()
    }
}

/// The fields a read of a tool's result may name (see [`ModelRequest::result_fields`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultFields {
    /// The function a program calls (`fs.read`).
    pub callee: String,
    /// What its result has: the fields it declares, and what every value of its kind has
    /// (`toString`; a string's `length` and methods).
    pub fields: Vec<String>,
}

/// A tool call that failed, as a program writes it (see [`ModelRequest::failed_calls`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedCall {
    /// The function a program calls (`fs.list`).
    pub callee: String,
    /// The input it failed with.
    pub input: Value,
}

impl ModelRequest {
    /// A request without tools, token limit, stop texts, temperature floor or grammar.
    pub fn new(model: ModelKind, messages: Vec<ChatMessage>) -> Self {
        Self {
            model,
            messages,
            tools: Vec::new(),
            max_tokens: None,
            stop: Vec::new(),
            min_temperature: None,
            grammar: None,
            seed: None,
            callable: None,
            failed_calls: Vec::new(),
            result_fields: Vec::new(),
            tool_choice: ToolChoice::Auto,
        }
    }

    /// The same request asked again for another answer, as a mode does in place of a reply
    /// it would not use: at least as warm as [`RESAMPLE_TEMPERATURE`], with a seed of its own
    /// for the `attempt`-th sample (from 1) of the `step`-th reply (a round, an iteration), so
    /// that a run meets the same samples again.
    #[must_use]
    pub fn sampled_again(mut self, step: u32, attempt: u32) -> Self {
        self.min_temperature = Some(self.min_temperature.map_or(RESAMPLE_TEMPERATURE, |floor| {
            floor.max(RESAMPLE_TEMPERATURE)
        }));
        self.seed = Some(u64::from(step) << 8 | u64::from(attempt.min(MAX_CANDIDATES)));
        self
    }

    /// The temperature to sample at: the provider's own, raised to `min_temperature`.
    pub fn temperature(&self, configured: f64) -> f64 {
        self.min_temperature
            .map_or(configured, |floor| configured.max(f64::from(floor)))
    }
}

/// One item of a model's streamed answer.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ModelEvent {
    /// The next piece of the answer's text.
    TextDelta(String),
    /// A complete tool call; providers stitch streamed fragments together first.
    ToolCall(ToolCallRequest),
    /// A complete block of reasoning, in its place among the answer's text and calls.
    Reasoning(Reasoning),
    /// Tokens spent; a stream may report several, which are added up.
    Usage(PromptUsage),
    /// Why the model stopped (`stop`, `length`, `tool_calls`, …), as the server said it.
    Finished(String),
}

/// A provider's answer as it streams in.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, ProviderError>> + Send>>;

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The server answered with an error status (after any retries).
    #[error("model provider answered {status}: {message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// What the server said.
        message: String,
    },
    /// The server could not be reached.
    #[error("could not reach the model provider: {0}")]
    Connection(String),
    /// The answer failed while it streamed (a broken or stalled stream, an unreadable chunk).
    #[error("model stream failed: {0}")]
    Stream(String),
    /// The provider cannot answer as configured, or no provider is configured.
    #[error("model provider is misconfigured: {0}")]
    Config(String),
    /// Any other failure, in the provider's own words (a scripted provider out of turns).
    #[error("{0}")]
    Other(String),
}

/// A source of model answers. Concrete providers live in plugin crates, which offer them
/// through a [`ProviderFactory`].
#[async_trait]
pub trait ModelProvider: Send + Sync {
    /// A short name for logs and capabilities, e.g. `openai`.
    fn id(&self) -> &str;
    /// The concrete model name `kind` resolves to.
    fn model_name(&self, kind: ModelKind) -> String;
    /// Sends one request; the answer comes back as a stream of [`ModelEvent`]s.
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError>;
    /// Whether the same request, asked again with another [`ModelRequest::seed`] and a
    /// `min_temperature`, may be answered differently: a mode may then sample more than one
    /// answer and keep the one that works. False unless the provider says so.
    fn samples(&self) -> bool {
        false
    }
}

/// Creates a provider from the text after `id:` in a provider spec, and the shared config.
pub type CreateProvider =
    fn(argument: Option<&str>, config: &Config) -> anyhow::Result<Arc<dyn ModelProvider>>;

/// How a plugin offers a provider. `create` gets the text after `id:` in a provider spec
/// such as `script:turns.yaml`, and the shared config.
#[derive(Clone)]
pub struct ProviderFactory {
    /// The provider's id: the part before `:` in a provider spec.
    pub id: &'static str,
    /// Builds the provider (see [`CreateProvider`]).
    pub create: CreateProvider,
    /// Whether the environment or config asks for this provider when none is named.
    pub configured: fn(config: &Config) -> bool,
    /// Used only when no other provider is configured (the embedded local model).
    pub fallback: bool,
}

impl std::fmt::Debug for ProviderFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderFactory")
            .field("id", &self.id)
            .finish()
    }
}

/// A model's whole answer to one request.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ModelResponse {
    /// The whole text, its deltas joined.
    pub text: String,
    /// Every tool call, in the order they came.
    pub tool_calls: Vec<ToolCallRequest>,
    /// The reasoning the model showed before it answered, in order.
    pub reasoning: Vec<Reasoning>,
    /// What the call spent, with the model's name, and its cost when the model has a price.
    pub usage: PromptUsage,
    /// Why the model stopped, when the provider said.
    pub finish_reason: Option<String>,
}

/// Sends requests to the selected provider and gathers streamed answers.
#[derive(Clone)]
pub struct CompletionService {
    provider: Option<Arc<dyn ModelProvider>>,
    missing_reason: String,
    /// Why this provider answers (or why none does), as `agentic capabilities` says it.
    reason: String,
    prices: Arc<Prices>,
}

impl std::fmt::Debug for CompletionService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionService")
            .field(
                "provider",
                &self.provider.as_ref().map(|p| p.id().to_owned()),
            )
            .finish()
    }
}

impl CompletionService {
    /// A service that sends every request to `provider`, with no prices.
    pub fn new(provider: Arc<dyn ModelProvider>) -> Self {
        Self {
            provider: Some(provider),
            missing_reason: String::new(),
            reason: "given to the runtime".to_owned(),
            prices: Arc::default(),
        }
    }

    /// Prices every call's tokens by this table (`usage.cost`).
    pub fn with_prices(mut self, prices: Prices) -> Self {
        self.prices = Arc::new(prices);
        self
    }

    /// A service whose every call fails with `reason`, for runtimes without a model.
    pub fn unavailable(reason: &str) -> Self {
        Self {
            provider: None,
            missing_reason: reason.to_owned(),
            reason: reason.to_owned(),
            prices: Arc::default(),
        }
    }

    /// The same service, with why its provider was chosen.
    #[must_use]
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = reason.into();
        self
    }

    /// Why its provider answers, or why none does.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// Whether the provider in use may answer the same request differently when asked again
    /// ([`ModelProvider::samples`]).
    pub fn samples(&self) -> bool {
        self.provider
            .as_ref()
            .is_some_and(|provider| provider.samples())
    }

    /// The provider in use; `None` when no model is configured.
    pub fn provider(&self) -> Option<&Arc<dyn ModelProvider>> {
        self.provider.as_ref()
    }

    /// Runs one request, calling `on_delta` with each text delta as it arrives. The call is a
    /// `chat` span and counts in the model-call metrics.
    pub async fn complete_messages(
        &self,
        request: ModelRequest,
        on_delta: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ModelResponse, ProviderError> {
        let provider = self
            .provider
            .as_ref()
            .ok_or_else(|| ProviderError::Config(self.missing_reason.clone()))?;
        let model_name = provider.model_name(request.model);
        let span = telemetry::model_call_span(provider.id(), &model_name);
        if telemetry::record_payloads() {
            span.record(
                "gen_ai.input.messages",
                serde_json::to_string(&request.messages).unwrap_or_default(),
            );
        }
        let start = std::time::Instant::now();
        let result = self
            .stream_response(provider.as_ref(), &model_name, request, on_delta)
            .instrument(span.clone())
            .await;
        let seconds = start.elapsed().as_secs_f64();
        match &result {
            Ok(response) => {
                let reason = response.finish_reason.as_deref().unwrap_or(
                    if response.tool_calls.is_empty() {
                        "stop"
                    } else {
                        "tool_calls"
                    },
                );
                span.record(
                    "gen_ai.response.finish_reasons",
                    telemetry::string_array(&[reason]),
                );
                if telemetry::record_payloads() {
                    let output = serde_json::json!([{
                        "role": "assistant",
                        "content": response.text,
                        "tool_calls": response.tool_calls,
                    }]);
                    span.record("gen_ai.output.messages", output.to_string());
                }
                let price = self.price(&response.usage, &model_name);
                telemetry::model_called(&span, &model_name, seconds, Ok((&response.usage, price)));
            }
            Err(error) => {
                telemetry::model_called(&span, &model_name, seconds, Err(&error.to_string()));
            }
        }
        result
    }

    async fn stream_response(
        &self,
        provider: &dyn ModelProvider,
        model_name: &str,
        request: ModelRequest,
        on_delta: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ModelResponse, ProviderError> {
        let mut stream = provider.stream(request).await?;
        let mut response = ModelResponse::default();
        while let Some(event) = stream.next().await {
            match event? {
                ModelEvent::TextDelta(delta) => {
                    on_delta(&delta);
                    response.text.push_str(&delta);
                }
                ModelEvent::ToolCall(call) => response.tool_calls.push(call),
                ModelEvent::Reasoning(reasoning) => response.reasoning.push(reasoning),
                ModelEvent::Usage(usage) => response.usage.add(&usage),
                ModelEvent::Finished(reason) => response.finish_reason = Some(reason),
            }
        }
        if response.usage.model.is_none() {
            response.usage.model = Some(model_name.to_owned());
        }
        response.usage.model_calls = 1;
        if let Some(price) = self.price(&response.usage, model_name) {
            let (input, output) = price.costs(&response.usage);
            response.usage.cost = Some(input + output);
        }
        Ok(response)
    }

    /// The price of a call's tokens: that of the model the server named, else of the one asked.
    fn price(&self, usage: &PromptUsage, model_name: &str) -> Option<ModelPrice> {
        if self.prices.is_empty() {
            return None;
        }
        usage
            .model
            .as_deref()
            .and_then(|model| self.prices.of(model))
            .or_else(|| self.prices.of(model_name))
    }

    /// A single text answer, for sub-calls that need no tools and no streaming.
    pub async fn complete_text(
        &self,
        request: ModelRequest,
    ) -> Result<ModelResponse, ProviderError> {
        self.complete_messages(request, &mut |_| {}).await
    }
}
