//! Plan first: a program that may make calls needing approval runs as a dry run before it
//! runs for real. Read-only and idempotent tools that need no approval run; every other call
//! is answered with a placeholder of its declared output, and those needing approval make the
//! plan. The person decides the plan at once (all, a chosen part, or none); the program then
//! runs for real, held to the plan by `crate::plan::DecidedPlan` (see `batch.rs`).

use std::collections::VecDeque;

use agentic_core::{
    Approval, DecidedBy, ExecutorError, Prepared, Prompt, PromptState, ToolContext, ToolResult,
    Verdict,
};
use serde_json::{Map, Value, json};

use super::CodeExecutor;
use crate::host::calls_reply;
use crate::plan::{CODE_PLAN, DecidedPlan, PlanInput, PlannedCall};
use crate::protocol::{
    CodePath, Determinism, ExecuteRequest, HostReply, HostRequest, ParallelCall, ToolBinding,
};
use crate::sandbox::SandboxEvent;

/// What starts a program: made once, used by its dry run and by its real run.
#[derive(Clone)]
pub(super) struct Launch {
    pub(super) code_output_id: String,
    pub(super) code: String,
    pub(super) path: CodePath,
    pub(super) store: Map<String, Value>,
    pub(super) determinism: Determinism,
}

/// Where the current program stands with its plan.
pub(super) enum PlanState {
    /// The plan waits for a person; the program has not run.
    Waiting {
        plan_id: String,
        input: PlanInput,
        launch: Launch,
        reads: VecDeque<(String, Value, u64)>,
    },
    /// Decided: the program runs, held to it.
    Decided(DecidedPlan),
}

/// What a dry run found.
struct DryRun {
    input: PlanInput,
    reads: VecDeque<(String, Value, u64)>,
}

impl CodeExecutor {
    /// Whether `code` is planned first: plans are on, calls are not approved by the
    /// configuration, and the program names a tool some of whose calls need approval.
    pub(super) fn plans_first(
        &self,
        code: &str,
        prepared: &Prepared,
        bindings: &[ToolBinding],
    ) -> bool {
        if !self.shared.config.plan || self.shared.config.auto_approve {
            return false;
        }
        bindings.iter().any(|binding| {
            prepared.tools.may_need_approval(&binding.id)
                && names_of(binding)
                    .iter()
                    .any(|name| code.contains(name.as_str()))
        })
    }

    /// Dry-runs `launch` and, when it plans calls needing approval, records the plan and waits
    /// for a person (`true`). `false` when there is nothing to approve: the program just runs.
    pub(super) async fn plan(
        &mut self,
        launch: &Launch,
        prepared: &Prepared,
        bindings: &[ToolBinding],
    ) -> Result<bool, ExecutorError> {
        let dry = self.dry_run(launch, prepared, bindings).await;
        if dry.input.calls.is_empty() {
            self.plan = None;
            return Ok(false);
        }
        let plan_id = super::new_call_id();
        let reason = dry.input.reason();
        let input = serde_json::to_value(&dry.input)
            .map_err(|error| ExecutorError::Internal(error.to_string()))?;
        self.base
            .recorder
            .start_tool(&plan_id, CODE_PLAN, input, &reason)
            .await?;
        self.base
            .recorder
            .request_approval(&plan_id, &reason)
            .await?;
        self.plan = Some(PlanState::Waiting {
            plan_id,
            input: dry.input,
            launch: launch.clone(),
            reads: dry.reads,
        });
        Ok(true)
    }

    /// The plan waiting for a decision, if `tool_call_id` is it.
    pub(super) fn waiting_plan(&self, tool_call_id: &str) -> bool {
        matches!(&self.plan, Some(PlanState::Waiting { plan_id, .. }) if plan_id == tool_call_id)
    }

    /// Whether the prompt waits for its plan to be decided.
    pub(super) fn plan_waits(&self) -> bool {
        matches!(self.plan, Some(PlanState::Waiting { .. }))
    }

    /// Applies a person's verdict on the plan: the program runs, held to what they approved
    /// (nothing, when they rejected it).
    pub(super) async fn decide_plan(&mut self, verdict: &Verdict) -> Result<Prompt, ExecutorError> {
        let Some(PlanState::Waiting {
            plan_id,
            input,
            launch,
            reads,
        }) = self.plan.take()
        else {
            return Err(ExecutorError::Internal("no plan waits".to_owned()));
        };
        self.base.record_verdict(&plan_id, verdict).await?;
        let decided = self
            .decided_plan(&plan_id, &input, verdict)
            .with_reads(reads);
        let approved = decided.approved();
        let rejected: Vec<usize> = (0..input.calls.len())
            .filter(|index| !approved.contains(index))
            .collect();
        // Rejected whole, the plan is recorded as rejected; the program still runs, and each
        // planned call fails as rejected where it is made (a program may catch that).
        if !matches!(verdict, Verdict::Reject { .. }) {
            let output = json!({ "approved": approved, "rejected": rejected });
            self.base
                .recorder
                .finish_tool(&plan_id, ToolResult::Success { output })
                .await?;
        }
        self.plan = Some(PlanState::Decided(decided));
        self.start_program(launch).await;
        self.drive().await
    }

    /// The plan `plan_id` as decided: by whom and when, from its record.
    fn decided_plan(&self, plan_id: &str, input: &PlanInput, verdict: &Verdict) -> DecidedPlan {
        let record = self
            .base
            .recorder
            .prompt()
            .tool_output(plan_id)
            .and_then(|tool| tool.decision.clone());
        let (by, at) = match record {
            Some(record) => (record.by, record.decided_at),
            None => (
                DecidedBy::User {
                    user_id: self.base.recorder.prompt().user_id.clone(),
                },
                chrono::Utc::now(),
            ),
        };
        DecidedPlan::new(input, verdict, by, at)
    }

    /// The plan recorded after the execution `code_output_id`, as the timeline holds it: a
    /// prompt restored in another process picks it up there.
    pub(super) fn restore_plan(
        &mut self,
        launch: &Launch,
        llm: &VecDeque<(String, bool, HostReply)>,
    ) -> Result<bool, ExecutorError> {
        let Some(plan) = self.timeline().plan_of(&launch.code_output_id).cloned() else {
            return Ok(false);
        };
        let input: PlanInput = serde_json::from_value(plan.input.clone()).map_err(|error| {
            ExecutorError::Internal(format!("a plan that does not read: {error}"))
        })?;
        if plan.result.is_awaiting_approval() {
            // The dry run's `llm()` answers, for the real run to read.
            self.dry_llm = llm.clone();
            self.plan = Some(PlanState::Waiting {
                plan_id: plan.id.clone(),
                input,
                launch: launch.clone(),
                reads: VecDeque::new(),
            });
            return Ok(true);
        }
        if let Some(record) = &plan.decision {
            let decided = DecidedPlan::new(
                &input,
                &record.verdict,
                record.by.clone(),
                record.decided_at,
            );
            self.plan = Some(PlanState::Decided(decided));
        }
        Ok(false)
    }

    /// Runs the program without the calls it may not make yet, and gathers them as a plan.
    async fn dry_run(
        &mut self,
        launch: &Launch,
        prepared: &Prepared,
        bindings: &[ToolBinding],
    ) -> DryRun {
        let mut execution = self
            .shared
            .sandbox
            .start_with_wall_time(
                Some(&self.base.options.prompt.user_id),
                ExecuteRequest {
                    code: launch.code.clone(),
                    tools: bindings.to_vec(),
                    input: None,
                    store: launch.store.clone(),
                    limits: self.shared.sandbox.config().script_limits(),
                    same_tools_as_before: false,
                    determinism: launch.determinism.clone(),
                },
                None,
            )
            .await;
        let prompt = self.base.recorder.prompt();
        let context = ToolContext::new(
            &prompt.user_id,
            &prompt.id,
            self.base.options.prompt.state.clone(),
            self.base.options.services.clone(),
        );
        let mut input = PlanInput {
            execution: launch.code_output_id.clone(),
            calls: Vec::new(),
            caveats: Vec::new(),
        };
        let mut reads = VecDeque::new();
        self.dry_llm.clear();
        loop {
            match execution.next().await {
                SandboxEvent::Request { id, request, .. } => {
                    let reply = match request {
                        HostRequest::CallTool { tool, input: call } => {
                            let calls = crate::host::normalised_calls(
                                &prepared.tools,
                                vec![ParallelCall { tool, input: call }],
                            );
                            let results = self
                                .dry_calls(
                                    calls, prepared, bindings, launch, &context, &mut input,
                                    &mut reads,
                                )
                                .await;
                            calls_reply(false, results)
                        }
                        HostRequest::Parallel { calls } => {
                            let calls = crate::host::normalised_calls(&prepared.tools, calls);
                            let results = self
                                .dry_calls(
                                    calls, prepared, bindings, launch, &context, &mut input,
                                    &mut reads,
                                )
                                .await;
                            calls_reply(true, results)
                        }
                        HostRequest::Llm { prompt, json } => {
                            let reply = self.llm(&prompt, json).await;
                            // Journaled as the real run's: it reads the same answer, here or
                            // in the process that runs it after a restart.
                            let entry = crate::journal::Entry::Llm {
                                execution: launch.code_output_id.clone(),
                                prompt: prompt.clone(),
                                json,
                                reply: reply.clone(),
                            };
                            if let Err(error) = self.journal(entry).await {
                                tracing::warn!(%error, "could not journal a dry run's llm() answer");
                            }
                            self.dry_llm.push_back((prompt, json, reply.clone()));
                            reply
                        }
                        HostRequest::ToolSchema { tool } => {
                            crate::prompt::describe_reply(&prepared.tools, bindings, &tool)
                        }
                    };
                    execution.reply(id, reply).await;
                }
                SandboxEvent::Output(_) | SandboxEvent::Log(_) => {}
                SandboxEvent::Finished(outcome) => {
                    if let Err(error) = &outcome.result {
                        input.caveats.push(format!(
                            "the dry run stopped with an error, so the plan may miss calls: {}",
                            error.message.lines().next().unwrap_or_default()
                        ));
                    }
                    break;
                }
            }
        }
        DryRun { input, reads }
    }

    /// The answers of one request's calls in a dry run.
    #[allow(clippy::too_many_arguments)]
    async fn dry_calls(
        &self,
        calls: Vec<ParallelCall>,
        prepared: &Prepared,
        bindings: &[ToolBinding],
        launch: &Launch,
        context: &ToolContext,
        plan: &mut PlanInput,
        reads: &mut VecDeque<(String, Value, u64)>,
    ) -> Vec<Result<Value, String>> {
        let mut results = Vec::with_capacity(calls.len());
        for call in calls {
            if let Err(error) = prepared.tools.validate(&call.tool, &call.input) {
                // The real run fails the same way; nothing to plan.
                results.push(Err(error.to_string()));
                continue;
            }
            if prepared.tools.runs_in_dry_run(&call.tool, &call.input) {
                let result = prepared
                    .tools
                    .invoke_dry(context.clone(), &call.tool, call.input.clone())
                    .await
                    .map_err(|error| error.to_string());
                reads.push_back((
                    call.tool.clone(),
                    call.input.clone(),
                    crate::plan::fingerprint(&result),
                ));
                results.push(result);
                continue;
            }
            let schema = prepared
                .tools
                .get(&call.tool)
                .and_then(|tool| tool.output_schema().cloned());
            let placeholder = crate::plan::placeholder(schema.as_ref(), &call.tool);
            if let Approval::Required { reason } = prepared.tools.approval(&call.tool, &call.input)
                && self.base.scope_for(&call.tool, &reason).await.is_none()
            {
                if crate::plan::holds_placeholder(&call.input) {
                    plan.caveats.push(format!(
                        "call {} is built from the result of a call that has not run yet, so \
                         the real run will make it with other input and it will be asked about \
                         again",
                        plan.calls.len() + 1
                    ));
                }
                let names = bindings
                    .iter()
                    .find(|binding| binding.id == call.tool)
                    .map(names_of)
                    .unwrap_or_default();
                let preview = prepared
                    .tools
                    .preview(context.clone(), &call.tool, &call.input)
                    .await;
                plan.calls.push(PlannedCall {
                    line: crate::plan::line_of(&launch.code, &names),
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

    /// The answer the dry run got to the same `llm()` request, if it made it: the real run
    /// reads the same answer, so that what it writes from it matches the plan.
    pub(super) fn dry_llm_answer(&mut self, prompt: &str, json: bool) -> Option<HostReply> {
        let position = self
            .dry_llm
            .iter()
            .position(|(asked, asked_json, _)| asked == prompt && *asked_json == json)?;
        self.dry_llm.remove(position).map(|(_, _, reply)| reply)
    }

    /// Starts `launch` for real, as the active execution.
    pub(super) async fn start_program(&mut self, launch: Launch) {
        let bindings = self.bindings.clone().unwrap_or_default();
        self.launch(
            launch.code_output_id,
            launch.code,
            launch.path,
            launch.store,
            &bindings,
            launch.determinism,
            None,
        )
        .await;
    }

    /// Whether the prompt waits at a plan, for the loop: it stops there.
    pub(super) fn waits_at_plan(&self) -> bool {
        self.plan_waits() && self.base.recorder.prompt().state == PromptState::WaitingForApproval
    }
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
