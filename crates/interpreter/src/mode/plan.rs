//! Plan first: a program that may make calls needing approval runs as a dry run before it
//! runs for real. Read-only and idempotent tools that need no approval run; every other call
//! is answered with a placeholder of its declared output, and those needing approval make the
//! plan. The person decides the plan at once (all, a chosen part, or none); the program then
//! runs for real, held to the plan by `crate::plan::DecidedPlan` (see `batch.rs`).

use std::collections::VecDeque;

use agentic_core::{
    DecidedBy, ExecutorError, Prepared, Prompt, PromptState, ToolContext, ToolResult, Verdict,
};
use serde_json::{Map, Value, json};

use super::CodeExecutor;
use crate::dry_run::{DryHost, DryProgram, plan_program};
use crate::plan::{CODE_PLAN, DecidedPlan, PlanInput};
use crate::protocol::{CodePath, Determinism, ExecuteRequest, HostReply, ToolBinding};

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
        crate::dry_run::names_a_gated_tool(code, prepared, bindings)
    }

    /// Dry-runs `launch` and, when it plans calls needing approval, records the plan and waits
    /// for a person (`true`). `false` when there is nothing to approve: the program just runs.
    pub(super) async fn plan(
        &mut self,
        launch: &Launch,
        prepared: &Prepared,
        bindings: &[ToolBinding],
    ) -> Result<bool, ExecutorError> {
        let request = self.dry_request(
            &launch.code,
            bindings,
            launch.store.clone(),
            launch.determinism.clone(),
        );
        let sandbox = self.shared.sandbox.clone();
        let owner = self.base.recorder.prompt().user_id.clone();
        let program = DryProgram {
            code: &launch.code,
            execution: launch.code_output_id.clone(),
            prepared,
            bindings,
            context: self.dry_context(),
            sandbox: &sandbox,
            owner: &owner,
            request: &request,
            wall_time: None,
            reads_only: false,
        };
        self.dry_llm.clear();
        let mut host = ModeDry {
            executor: self,
            execution: &launch.code_output_id,
        };
        let dry = plan_program(&program, &mut host).await;
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

    /// What a dry run of `code` starts the sandbox with.
    pub(super) fn dry_request(
        &self,
        code: &str,
        bindings: &[ToolBinding],
        store: Map<String, Value>,
        determinism: Determinism,
    ) -> ExecuteRequest {
        ExecuteRequest {
            code: code.to_owned(),
            tools: bindings.to_vec(),
            input: None,
            store,
            limits: self.shared.sandbox.config().script_limits(),
            same_tools_as_before: false,
            determinism,
        }
    }

    /// The context a dry run's reads run in: this prompt's user, id and state.
    pub(super) fn dry_context(&self) -> ToolContext {
        let prompt = self.base.recorder.prompt();
        ToolContext::new(
            &prompt.user_id,
            &prompt.id,
            self.base.options.prompt.state.clone(),
            self.base.options.services.clone(),
        )
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

/// Code mode as the host of a dry run: `llm()` is asked and journaled for the real run to
/// read the same answer, and the prompt's scopes keep calls out of the plan.
struct ModeDry<'a> {
    executor: &'a mut CodeExecutor,
    execution: &'a str,
}

#[async_trait::async_trait]
impl DryHost for ModeDry<'_> {
    async fn llm(&mut self, prompt: &str, json: bool) -> HostReply {
        let reply = self.executor.llm(prompt, json).await;
        // Journaled as the real run's: it reads the same answer, here or in the process that
        // runs it after a restart.
        let entry = crate::journal::Entry::Llm {
            execution: self.execution.to_owned(),
            prompt: prompt.to_owned(),
            json,
            reply: reply.clone(),
        };
        if let Err(error) = self.executor.journal(entry).await {
            tracing::warn!(%error, "could not journal a dry run's llm() answer");
        }
        self.executor
            .dry_llm
            .push_back((prompt.to_owned(), json, reply.clone()));
        reply
    }

    async fn scoped(&self, tool: &str, reason: &str) -> bool {
        self.executor.base.scope_for(tool, reason).await.is_some()
    }
}
