//! What a running script asks of its host, answered the same way wherever the script runs:
//! in code mode ([`crate::mode`]) and in `interpreter.run-code` ([`crate::plugin`]). Each host
//! says how it runs tool calls and `llm()`; the request's shape, a bare string as the input of
//! a one-string tool, `toolSchema()`, and the shape of a `parallel()` answer are decided here.

use agentic_core::ToolSet;
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::protocol::{HostReply, HostRequest, ParallelCall, ToolBinding};

/// One place a script runs.
#[async_trait]
pub(crate) trait ScriptHost: Send {
    type Error: Send;

    /// The tools the script's functions call, and how the script names them.
    fn tools(&self) -> (&ToolSet, &[ToolBinding]);

    /// Runs the calls of request `id` (one for a tool function, several for `parallel()`),
    /// their inputs already normalised. `None` when the answer has to wait (for a person's
    /// approval); the host replies to `id` itself later, with [`calls_reply`].
    async fn tool_calls(
        &mut self,
        id: u64,
        parallel: bool,
        calls: Vec<ParallelCall>,
    ) -> Result<Option<HostReply>, Self::Error>;

    /// `llm(prompt)` and `llmJson(prompt)`.
    async fn llm(&mut self, prompt: &str, json: bool) -> HostReply;
}

/// Answers request `id`, or `None` when the host answers later.
pub(crate) async fn answer<H: ScriptHost>(
    host: &mut H,
    id: u64,
    request: HostRequest,
) -> Result<Option<HostReply>, H::Error> {
    match request {
        HostRequest::CallTool { tool, input } => {
            let calls = normalised(host, vec![ParallelCall { tool, input }]);
            host.tool_calls(id, false, calls).await
        }
        HostRequest::Parallel { calls } => {
            let calls = normalised(host, calls);
            host.tool_calls(id, true, calls).await
        }
        HostRequest::Llm { prompt, json } => match fetch_request(host, &prompt) {
            Some(message) => Ok(Some(HostReply::Error { message })),
            None => Ok(Some(host.llm(&prompt, json).await)),
        },
        HostRequest::ToolSchema { tool } => {
            let (tools, bindings) = host.tools();
            Ok(Some(crate::prompt::describe_reply(tools, bindings, &tool)))
        }
    }
}

/// A short `llm()` prompt around a URL asks the model to open it, which it cannot: it would
/// answer with something made up. The error says which tool fetches instead.
fn fetch_request<H: ScriptHost>(host: &H, prompt: &str) -> Option<String> {
    let start = prompt.find("https://").or_else(|| prompt.find("http://"))?;
    let url_len = prompt[start..]
        .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | ')'))
        .unwrap_or(prompt.len() - start);
    // Text to work on that happens to hold a link is fine; a request around a link is not.
    if prompt.len() - url_len > 200 {
        return None;
    }
    let (_, bindings) = host.tools();
    let fetcher = bindings
        .iter()
        .find(|binding| binding.id == "web.fetch")
        .and_then(|binding| binding.member.clone().or_else(|| binding.function.clone()))
        .map(|name| format!("{name}({{ url }})"));
    let instead = match fetcher {
        Some(call) => format!("fetch it with {call}, then pass the text it returns to llm()"),
        None => {
            "no tool here fetches URLs, so end the program with done(\"…\") saying so".to_owned()
        }
    };
    Some(format!(
        "llm() and llmJson() ask a language model, which cannot open URLs or files: {instead}"
    ))
}

/// A bare string becomes the input of a tool whose input has one required string field.
fn normalised<H: ScriptHost>(host: &H, calls: Vec<ParallelCall>) -> Vec<ParallelCall> {
    let (tools, _) = host.tools();
    normalised_calls(tools, calls)
}

/// [`normalised`] against a tool set: how the calls are recorded, and so compared on replay.
pub(crate) fn normalised_calls(tools: &ToolSet, calls: Vec<ParallelCall>) -> Vec<ParallelCall> {
    calls
        .into_iter()
        .map(|call| ParallelCall {
            input: tools.shorthand_input(&call.tool, call.input),
            tool: call.tool,
        })
        .collect()
}

/// The answer to a request's calls: for `parallel()` an array with each value or `{error}`,
/// in order; for a tool function its value, or the error it throws.
pub(crate) fn calls_reply(parallel: bool, results: Vec<Result<Value, String>>) -> HostReply {
    if parallel {
        let values = results
            .into_iter()
            .map(|result| result.unwrap_or_else(|error| json!({ "error": error })))
            .collect();
        return HostReply::Value {
            value: Value::Array(values),
        };
    }
    match results.into_iter().next() {
        Some(Ok(value)) => HostReply::Value { value },
        Some(Err(message)) => HostReply::Error { message },
        None => HostReply::Value { value: Value::Null },
    }
}
