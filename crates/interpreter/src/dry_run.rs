//! The dry run of a program, shared by code mode (`mode/plan.rs`) and `interpreter.run-code`
//! (`plugin.rs`): read-only and idempotent tools that need no approval run; every other call
//! is answered with a placeholder of its declared output, and those needing approval are
//! gathered as the plan. What the caller owns (`llm()`, scopes a person granted) it lends
//! through a [`DryHost`].

use std::collections::VecDeque;

use agentic_core::{Approval, Prepared, ToolContext};
use async_trait::async_trait;
use serde_json::Value;

use crate::host::calls_reply;
use crate::plan::{PlanInput, PlannedCall};
use crate::protocol::{HostReply, HostRequest, ParallelCall, ToolBinding};
use crate::sandbox::{Execution, SandboxEvent};

/// What the caller of a dry run answers for it.
#[async_trait]
pub(crate) trait DryHost: Send {
    /// The answer to the program's `llm()` request.
    async fn llm(&mut self, prompt: &str, json: bool) -> HostReply;
    /// Whether a scope a person granted earlier approves a call of `tool` (needing approval
    /// because of `reason`): such a call is not part of the plan.
    async fn scoped(&self, tool: &str, reason: &str) -> bool;
}

/// What a dry run found: the plan, and what its reads answered (tool, input, fingerprint),
/// in order, for the real run to compare with.
pub(crate) struct DryRun {
    pub(crate) input: PlanInput,
    pub(crate) reads: VecDeque<(String, Value, u64)>,
}

/// What a dry run works with.
pub(crate) struct DryProgram<'a> {
    /// The program's source, for the line each planned call is made on.
    pub(crate) code: &'a str,
    /// The output the plan is of (`code.execute`'s id; empty outside code mode).
    pub(crate) execution: String,
    pub(crate) prepared: &'a Prepared,
    pub(crate) bindings: &'a [ToolBinding],
    pub(crate) context: ToolContext,
}

/// Runs `execution` (the program, started in the sandbox) without the calls it may not make
/// yet, and gathers them as a plan.
pub(crate) async fn dry_run(
    mut execution: Execution,
    program: &DryProgram<'_>,
    host: &mut impl DryHost,
) -> DryRun {
    let mut dry = DryRun {
        input: PlanInput {
            execution: program.execution.clone(),
            calls: Vec::new(),
            caveats: Vec::new(),
        },
        reads: VecDeque::new(),
    };
    loop {
        match execution.next().await {
            SandboxEvent::Request { id, request, .. } => {
                let reply = match request {
                    HostRequest::CallTool { tool, input } => {
                        let calls = vec![ParallelCall { tool, input }];
                        let results = dry_calls(calls, program, host, &mut dry).await;
                        calls_reply(false, results)
                    }
                    HostRequest::Parallel { calls } => {
                        let results = dry_calls(calls, program, host, &mut dry).await;
                        calls_reply(true, results)
                    }
                    HostRequest::Llm { prompt, json } => host.llm(&prompt, json).await,
                    HostRequest::ToolSchema { tool } => crate::prompt::describe_reply(
                        &program.prepared.tools,
                        program.bindings,
                        &tool,
                    ),
                };
                execution.reply(id, reply).await;
            }
            SandboxEvent::Output(_) | SandboxEvent::Log(_) => {}
            SandboxEvent::Finished(outcome) => {
                if let Err(error) = &outcome.result {
                    dry.input.caveats.push(format!(
                        "the dry run stopped with an error, so the plan may miss calls: {}",
                        error.message.lines().next().unwrap_or_default()
                    ));
                }
                return dry;
            }
        }
    }
}

/// The answers of one request's calls in a dry run.
async fn dry_calls(
    calls: Vec<ParallelCall>,
    program: &DryProgram<'_>,
    host: &mut impl DryHost,
    dry: &mut DryRun,
) -> Vec<Result<Value, String>> {
    let tools = &program.prepared.tools;
    let calls = crate::host::normalised_calls(tools, calls);
    let mut results = Vec::with_capacity(calls.len());
    for call in calls {
        if let Err(error) = tools.validate(&call.tool, &call.input) {
            // The real run fails the same way; nothing to plan.
            results.push(Err(error.to_string()));
            continue;
        }
        if tools.runs_in_dry_run(&call.tool, &call.input) {
            let result = tools
                .invoke_dry(program.context.clone(), &call.tool, call.input.clone())
                .await
                .map_err(|error| error.to_string());
            dry.reads.push_back((
                call.tool.clone(),
                call.input.clone(),
                crate::plan::fingerprint(&result),
            ));
            results.push(result);
            continue;
        }
        let schema = tools
            .get(&call.tool)
            .and_then(|tool| tool.output_schema().cloned());
        let placeholder = crate::plan::placeholder(schema.as_ref(), &call.tool);
        if let Approval::Required { reason } = tools.approval(&call.tool, &call.input)
            && !host.scoped(&call.tool, &reason).await
        {
            let plan = &mut dry.input;
            if crate::plan::holds_placeholder(&call.input) {
                plan.caveats.push(format!(
                    "call {} is built from the result of a call that has not run yet, so the \
                     real run will make it with other input and it will be asked about again",
                    plan.calls.len() + 1
                ));
            }
            let names = program
                .bindings
                .iter()
                .find(|binding| binding.id == call.tool)
                .map(names_of)
                .unwrap_or_default();
            let preview = tools
                .preview(program.context.clone(), &call.tool, &call.input)
                .await;
            plan.calls.push(PlannedCall {
                line: crate::plan::line_of(program.code, &names),
                tool: call.tool,
                input: call.input,
                reason,
                preview,
            });
        }
        results.push(Ok(placeholder));
    }
    results
}

/// Whether `code` names a tool some of whose calls need approval: only such a program is
/// worth a dry run.
pub(crate) fn names_a_gated_tool(
    code: &str,
    prepared: &Prepared,
    bindings: &[ToolBinding],
) -> bool {
    bindings.iter().any(|binding| {
        prepared.tools.may_need_approval(&binding.id)
            && names_of(binding)
                .iter()
                .any(|name| code.contains(name.as_str()))
    })
}

/// Every name code may call `binding`'s tool by.
fn names_of(binding: &ToolBinding) -> Vec<String> {
    let mut names: Vec<String> = binding
        .member
        .iter()
        .chain(binding.function.iter())
        .chain(binding.aliases.iter())
        .cloned()
        .collect();
    names.push(binding.id.clone());
    names
}
