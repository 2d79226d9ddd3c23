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
        HostRequest::Llm { prompt, json } => Ok(Some(host.llm(&prompt, json).await)),
        HostRequest::ToolSchema { tool } => {
            let (tools, bindings) = host.tools();
            Ok(Some(crate::prompt::describe_reply(tools, bindings, &tool)))
        }
    }
}

/// A bare string becomes the input of a tool whose input has one required string field.
fn normalised<H: ScriptHost>(host: &H, calls: Vec<ParallelCall>) -> Vec<ParallelCall> {
    let (tools, _) = host.tools();
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
