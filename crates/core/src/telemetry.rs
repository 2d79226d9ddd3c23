//! Spans and metrics of prompts, model calls and tool calls.
//!
//! The spans follow OpenTelemetry's GenAI semantic conventions (`invoke_agent`, `chat`,
//! `execute_tool`) through `tracing`; `otel.name` gives each its conventional name and the
//! binary decides where they go (logs, an OTLP exporter, nowhere). The metrics go through the
//! `metrics` facade; without a recorder (no `/metrics`) they cost a branch each.
//!
//! Names of metrics are constants here so that the exporter and its tests use the same ones.

use std::sync::atomic::{AtomicBool, Ordering};

use tracing::field::Empty;

use crate::config::ModelPrice;
use crate::prompt::{Prompt, PromptUsage};
use crate::tool::ToolError;

/// The target of the GenAI spans. Log lines leave it out by default (a prompt's spans carry a
/// dozen attributes meant for a trace backend), so without a trace exporter the spans are off
/// altogether and cost nothing.
pub const SPANS: &str = "agentic::spans";

/// Prompts that ended, by `mode` and final `state`.
pub const PROMPTS: &str = "agentic_prompts_total";
/// Prompts executing right now (waiting for approval is not executing), by `mode`.
pub const PROMPTS_RUNNING: &str = "agentic_prompts_running";
/// Seconds per model call, by `model`.
pub const MODEL_CALL_SECONDS: &str = "agentic_model_call_duration_seconds";
/// Model calls that failed, by `model`.
pub const MODEL_CALL_ERRORS: &str = "agentic_model_call_errors_total";
/// Tokens by `model` and `type` (`input`, `output`).
pub const MODEL_TOKENS: &str = "agentic_model_tokens_total";
/// Cost of model calls since the process started, by `model` and `type` (`input`, `output`), in
/// the price table's currency (a gauge that only grows: `metrics` counters count whole numbers).
pub const MODEL_COST: &str = "agentic_model_cost";
/// Seconds per tool call, by `tool`.
pub const TOOL_CALL_SECONDS: &str = "agentic_tool_call_duration_seconds";
/// Tool calls that failed, by `tool`.
pub const TOOL_CALL_ERRORS: &str = "agentic_tool_call_errors_total";

/// Describes core's metrics for the exporter's `# HELP` lines (the sandbox's, the store's and
/// the API's are described by their crates).
pub fn describe_metrics() {
    use metrics::Unit;
    metrics::describe_counter!(PROMPTS, "Prompts that ended, by mode and final state");
    metrics::describe_gauge!(PROMPTS_RUNNING, "Prompts executing now, by mode");
    metrics::describe_histogram!(
        MODEL_CALL_SECONDS,
        Unit::Seconds,
        "Model call latency, by model"
    );
    metrics::describe_counter!(MODEL_CALL_ERRORS, "Model calls that failed, by model");
    metrics::describe_counter!(
        MODEL_TOKENS,
        "Tokens by model and type (input, output; cache_read and cache_write, parts of input)"
    );
    metrics::describe_gauge!(
        MODEL_COST,
        "Cost of model calls since start, by model and type (input, output), in the price \
         table's currency"
    );
    metrics::describe_histogram!(
        TOOL_CALL_SECONDS,
        Unit::Seconds,
        "Tool call latency, by tool"
    );
    metrics::describe_counter!(TOOL_CALL_ERRORS, "Tool calls that failed, by tool");
}

/// Span attributes whose value is an array of strings. `tracing` records only scalars, so these
/// are recorded as JSON arrays in text, and the exporter turns them into OpenTelemetry arrays.
pub const STRING_ARRAY_ATTRIBUTES: &[&str] = &["gen_ai.response.finish_reasons"];

/// The `tool` label of a call to a tool that does not exist: names a model made up must not
/// become label values, or one prompt could grow the metrics without bound.
pub const UNKNOWN_TOOL: &str = "(unknown)";

static RECORD_PAYLOADS: AtomicBool = AtomicBool::new(false);

/// Whether spans carry prompt inputs, answers, model messages and tool arguments and results.
/// Off unless the configuration turns it on: they may hold anything a user or a tool wrote.
pub fn set_record_payloads(on: bool) {
    RECORD_PAYLOADS.store(on, Ordering::Relaxed);
}

/// Whether spans carry payloads (see [`set_record_payloads`]).
pub fn record_payloads() -> bool {
    RECORD_PAYLOADS.load(Ordering::Relaxed)
}

/// The span of one run of a prompt (a run ends when the prompt finishes or waits for a person;
/// an approval starts another). `model` is the provider's id and the model the prompt's class
/// names, when a provider is configured.
pub fn prompt_span(
    prompt: &Prompt,
    conversation_id: Option<&str>,
    model: Option<(&str, &str)>,
) -> tracing::Span {
    let span = tracing::info_span!(
        target: SPANS,
        "invoke_agent",
        otel.name = "invoke_agent agentic",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = "agentic",
        gen_ai.provider.name = model.map(|(provider, _)| provider),
        gen_ai.request.model = model.map(|(_, name)| name),
        gen_ai.conversation.id = conversation_id,
        agentic.prompt.id = %prompt.id,
        agentic.mode = %prompt.mode,
        user.id = %prompt.user_id,
        agentic.prompt.state = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        agentic.usage.cost = Empty,
        agentic.prompt.input = Empty,
        agentic.prompt.answer = Empty,
        error.type = Empty,
        otel.status_code = Empty,
        otel.status_description = Empty,
    );
    if record_payloads()
        && let Some(input) = &prompt.input
    {
        span.record("agentic.prompt.input", input.as_str());
    }
    span
}

/// Records how a run of a prompt ended on its span, and counts it.
pub fn prompt_ran(span: &tracing::Span, prompt: &Prompt) {
    let state = prompt.state.as_str();
    span.record("agentic.prompt.state", state);
    record_usage(span, &prompt.usage);
    if let Some(error) = &prompt.error {
        record_error(span, "prompt_failed", error);
    }
    if record_payloads() {
        let answer = prompt.text();
        if !answer.is_empty() {
            span.record("agentic.prompt.answer", answer.as_str());
        }
    }
    if prompt.state.is_finished() {
        metrics::counter!(PROMPTS, "mode" => prompt.mode.clone(), "state" => state).increment(1);
    }
}

/// Counts a prompt as executing until the guard drops.
pub fn prompt_running(mode: &str) -> Held {
    hold(metrics::gauge!(PROMPTS_RUNNING, "mode" => mode.to_owned()))
}

/// Adds one to `gauge` until the guard drops (also when its task is cancelled).
pub fn hold(gauge: metrics::Gauge) -> Held {
    gauge.increment(1.0);
    Held(gauge)
}

/// One unit of a gauge, given back when dropped.
#[derive(Debug)]
pub struct Held(metrics::Gauge);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// A count as a span attribute: OpenTelemetry's integers are `i64`, and `tracing-opentelemetry`
/// would record a `u64` as text.
pub fn count(value: impl TryInto<i64>) -> i64 {
    value.try_into().unwrap_or(i64::MAX)
}

/// Marks a span as failed, the OpenTelemetry way: `error.type` and an error status. The
/// message is a payload (a tool's error quotes paths and inputs, a script's quotes what it
/// threw), so without payloads the status says only the kind.
pub fn record_error(span: &tracing::Span, kind: &str, message: &str) {
    span.record("error.type", kind);
    span.record("otel.status_code", "ERROR");
    let description = if record_payloads() { message } else { kind };
    span.record("otel.status_description", description);
}

/// A span attribute of [`STRING_ARRAY_ATTRIBUTES`], as the JSON array of `values`.
pub fn string_array(values: &[&str]) -> String {
    serde_json::Value::from(values).to_string()
}

fn record_usage(span: &tracing::Span, usage: &PromptUsage) {
    span.record("gen_ai.usage.input_tokens", count(usage.input_tokens));
    span.record("gen_ai.usage.output_tokens", count(usage.output_tokens));
    if let Some(cost) = usage.cost {
        span.record("agentic.usage.cost", cost);
    }
}

/// The span of one model call.
pub(crate) fn model_call_span(provider: &str, model: &str) -> tracing::Span {
    tracing::info_span!(
        target: SPANS,
        "chat",
        otel.name = %format!("chat {model}"),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider,
        gen_ai.request.model = model,
        gen_ai.response.model = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        agentic.usage.estimated = Empty,
        agentic.usage.cost = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        error.type = Empty,
        otel.status_code = Empty,
        otel.status_description = Empty,
    )
}

/// Records a model call's outcome on its span and in the metrics.
pub(crate) fn model_called(
    span: &tracing::Span,
    model: &str,
    seconds: f64,
    outcome: Result<(&PromptUsage, Option<ModelPrice>), &str>,
) {
    metrics::histogram!(MODEL_CALL_SECONDS, "model" => model.to_owned()).record(seconds);
    match outcome {
        Ok((usage, price)) => {
            if let Some(name) = &usage.model {
                span.record("gen_ai.response.model", name.as_str());
            }
            record_usage(span, usage);
            if usage.estimated {
                span.record("agentic.usage.estimated", true);
            }
            metrics::counter!(MODEL_TOKENS, "model" => model.to_owned(), "type" => "input")
                .increment(usage.input_tokens);
            metrics::counter!(MODEL_TOKENS, "model" => model.to_owned(), "type" => "output")
                .increment(usage.output_tokens);
            // Parts of the input above, for what the provider's prompt cache saved.
            if usage.cache_read_tokens > 0 {
                metrics::counter!(MODEL_TOKENS, "model" => model.to_owned(), "type" => "cache_read")
                    .increment(usage.cache_read_tokens);
            }
            if usage.cache_write_tokens > 0 {
                metrics::counter!(MODEL_TOKENS, "model" => model.to_owned(), "type" => "cache_write")
                    .increment(usage.cache_write_tokens);
            }
            if let Some(price) = price {
                let (input, output) = price.costs(usage);
                metrics::gauge!(MODEL_COST, "model" => model.to_owned(), "type" => "input")
                    .increment(input);
                metrics::gauge!(MODEL_COST, "model" => model.to_owned(), "type" => "output")
                    .increment(output);
            }
        }
        Err(error) => {
            record_error(span, "provider_error", error);
            metrics::counter!(MODEL_CALL_ERRORS, "model" => model.to_owned()).increment(1);
        }
    }
}

/// The span of one tool call; `tool` is the name the caller gave, which is only a label when it
/// names a tool that exists.
pub(crate) fn tool_span(tool: &str, call_id: Option<&str>) -> tracing::Span {
    tracing::info_span!(
        target: SPANS,
        "execute_tool",
        otel.name = %format!("execute_tool {tool}"),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        gen_ai.tool.call.id = call_id,
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
        error.type = Empty,
        otel.status_code = Empty,
        otel.status_description = Empty,
    )
}

/// Records a tool call's outcome on its span and in the metrics.
pub(crate) fn tool_called(
    span: &tracing::Span,
    label: &str,
    seconds: f64,
    outcome: Result<&serde_json::Value, &ToolError>,
) {
    metrics::histogram!(TOOL_CALL_SECONDS, "tool" => label.to_owned()).record(seconds);
    match outcome {
        Ok(value) => {
            if record_payloads() {
                span.record("gen_ai.tool.call.result", value.to_string());
            }
        }
        Err(error) => {
            let kind = match error {
                ToolError::UnknownTool(_) => "unknown_tool",
                ToolError::InvalidInput { .. } => "invalid_input",
                ToolError::Failed(_) => "tool_error",
                ToolError::NotRecorded(_) => "not_recorded",
                ToolError::Panicked { .. } => "tool_panicked",
            };
            record_error(span, kind, &error.to_string());
            metrics::counter!(TOOL_CALL_ERRORS, "tool" => label.to_owned()).increment(1);
        }
    }
}
