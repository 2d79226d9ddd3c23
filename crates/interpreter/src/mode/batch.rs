//! The tool calls of one request from a script: recorded as pending, decided (allowed, put
//! to a person, answered from the journal), then run together and answered in one reply.

use agentic_core::{
    Approval, DecidedBy, DecisionRecord, ErrorKind, ExecutorError, Prepared, PromptState,
    ToolContext, ToolResult, Verdict,
};
use async_trait::async_trait;
use serde_json::Value;

use super::plan::PlanState;
use super::{CodeExecutor, new_call_id};
use crate::host::{ScriptHost, calls_reply};
use crate::journal::Entry;
use crate::plan::Held;
use crate::protocol::{HostReply, ParallelCall, ToolBinding};

/// The rule that approves, in its records, the calls `interpreter.autoApprove` lets through.
const AUTO_APPROVE_POLICY: &str = "interpreter.autoApprove";

pub(super) struct Batch {
    pub(super) request_id: u64,
    pub(super) parallel: bool,
    pub(super) calls: Vec<BatchCall>,
}

pub(super) struct BatchCall {
    pub(super) id: String,
    pub(super) tool: String,
    pub(super) input: Value,
    pub(super) decision: Decision,
}

#[derive(Clone, PartialEq)]
pub(super) enum Decision {
    /// Runs without asking.
    Allowed,
    /// Waits for a person; the reason is shown to them.
    Ask(String),
    Approved,
    /// Holds the error the call fails with.
    Rejected(String),
    /// Answered from the timeline: a replayed call that ran before.
    Recorded(Result<Value, String>),
}

impl CodeExecutor {
    /// Records the calls of one request as pending tool outputs and decides which need a person.
    pub(super) async fn open_batch(
        &mut self,
        request_id: u64,
        parallel: bool,
        calls: Vec<ParallelCall>,
        prepared: &Prepared,
    ) -> Result<Batch, ExecutorError> {
        let mut batch = Batch {
            request_id,
            parallel,
            calls: Vec::with_capacity(calls.len()),
        };
        for call in calls {
            let id = new_call_id();
            let (decision, record) = match prepared.tools.approval(&call.tool, &call.input) {
                Approval::Required { reason } if !self.shared.config.auto_approve => {
                    // The program's plan decides first; what it would ask about, a scope a
                    // person granted earlier may approve.
                    let held = self.held_decision(&call.tool, &call.input, reason.clone());
                    match held {
                        (Decision::Ask(_), _) => {
                            match self.base.scope_for(&call.tool, &reason).await {
                                Some(record) => (Decision::Allowed, Some(record)),
                                None => held,
                            }
                        }
                        held => held,
                    }
                }
                // Approved by the configuration: the record says so, not a person.
                Approval::Required { reason } => {
                    let by = DecidedBy::Policy {
                        name: AUTO_APPROVE_POLICY.to_owned(),
                    };
                    let record = DecisionRecord::new(Verdict::Approve, by, reason);
                    (Decision::Allowed, Some(record))
                }
                _ => (Decision::Allowed, None),
            };
            self.base
                .recorder
                .start_tool(&id, &call.tool, call.input.clone(), "running")
                .await?;
            if let Some(record) = record {
                self.base.recorder.record_decision(&id, record).await?;
            }
            if let Decision::Rejected(error) = &decision {
                // Left out of the plan the person approved: it fails as they rejected it.
                let rejected = ToolResult::error(ErrorKind::Rejected, error.clone());
                self.base.recorder.finish_tool(&id, rejected).await?;
            }
            batch.calls.push(BatchCall {
                id,
                tool: call.tool,
                input: call.input,
                decision,
            });
        }
        Ok(batch)
    }

    /// What a call needing approval gets (`reason` says why it needs it): held to the
    /// program's decided plan when it has one, else put to a person. With the record of the
    /// plan's decision when the plan decides it.
    pub(super) fn held_decision(
        &mut self,
        tool: &str,
        input: &Value,
        reason: String,
    ) -> (Decision, Option<DecisionRecord>) {
        let Some(PlanState::Decided(plan)) = self.plan.as_mut() else {
            return (Decision::Ask(reason), None);
        };
        let (by, at) = (plan.by.clone(), plan.decided_at);
        let shown = |index: usize| format!("call {} of the plan: {reason}", index + 1);
        match plan.hold(tool, input) {
            Held::Approved { index } => {
                let record = DecisionRecord::new(Verdict::Approve, by, shown(index)).decided_at(at);
                (Decision::Approved, Some(record))
            }
            Held::Rejected { index, reason } => {
                let verdict = Verdict::Reject { reason };
                let error = verdict.rejection().unwrap_or_default();
                let record = DecisionRecord::new(verdict, by, shown(index)).decided_at(at);
                (Decision::Rejected(error), Some(record))
            }
            Held::Ask(why) => (Decision::Ask(format!("{reason} ({why})")), None),
        }
    }

    /// Runs the allowed and approved calls of a batch concurrently and records every result.
    pub(super) async fn run_batch(
        &mut self,
        batch: &Batch,
        prepared: &Prepared,
    ) -> Result<HostReply, ExecutorError> {
        let prompt = self.base.recorder.prompt();
        let context = ToolContext::new(
            &prompt.user_id,
            &prompt.id,
            self.base.options.prompt.state.clone(),
            self.base.options.services.clone(),
        );
        let runs = batch.calls.iter().map(|call| {
            let context = context.for_call(&call.id);
            async move {
                match &call.decision {
                    Decision::Rejected(error) => Err(error.clone()),
                    Decision::Recorded(result) => result.clone(),
                    _ => prepared
                        .tools
                        .invoke(context, &call.tool, call.input.clone())
                        .await
                        .map_err(|error| error.to_string()),
                }
            }
        });
        let results = futures::future::join_all(runs).await;
        if let Some(PlanState::Decided(plan)) = self.plan.as_mut() {
            for (call, result) in batch.calls.iter().zip(&results) {
                if prepared.tools.runs_in_dry_run(&call.tool, &call.input) {
                    plan.saw_read(&call.tool, &call.input, result);
                }
            }
        }
        for (call, result) in batch.calls.iter().zip(&results) {
            let result = match result {
                Ok(output) => ToolResult::Success {
                    output: output.clone(),
                },
                Err(error) => ToolResult::failed(error.clone()),
            };
            if !matches!(call.decision, Decision::Rejected(_) | Decision::Recorded(_)) {
                self.base.recorder.finish_tool(&call.id, result).await?;
            }
        }
        for file in context.take_files() {
            self.base.recorder.push_file(file).await?;
        }
        Ok(calls_reply(batch.parallel, results))
    }

    /// The ids of the calls of the current request that wait for a decision, in order; none
    /// when the prompt does not wait. Only those the person was shown (marked as waiting in
    /// the timeline) count: a decision's places index exactly that list.
    pub(super) fn waiting_calls(&self) -> Vec<String> {
        let prompt = self.base.recorder.prompt();
        if prompt.state != PromptState::WaitingForApproval {
            return Vec::new();
        }
        let Some(batch) = self
            .active
            .as_ref()
            .and_then(|active| active.batch.as_ref())
        else {
            return Vec::new();
        };
        batch
            .calls
            .iter()
            .filter(|call| matches!(call.decision, Decision::Ask(_)))
            .filter(|call| {
                prompt
                    .tool_output(&call.id)
                    .is_some_and(|tool| tool.result.is_awaiting_approval())
            })
            .map(|call| call.id.clone())
            .collect()
    }

    /// Gives the calls `asked` their part of `verdict` (`approved`, by place).
    pub(super) fn decide_waiting(
        &mut self,
        asked: &[String],
        approved: &[bool],
        verdict: &Verdict,
    ) {
        let Some(batch) = self
            .active
            .as_mut()
            .and_then(|active| active.batch.as_mut())
        else {
            return;
        };
        for (index, (id, approved)) in asked.iter().zip(approved).enumerate() {
            if let Some(call) = batch.calls.iter_mut().find(|call| &call.id == id) {
                call.decision = if *approved {
                    Decision::Approved
                } else {
                    Decision::Rejected(verdict.rejection_at(index).unwrap_or_default())
                };
            }
        }
    }
}

/// Code mode as the host of its script: tool calls wait in a batch, so that calls needing
/// approval can hold the script while a person decides.
pub(super) struct ModeHost<'a> {
    pub(super) executor: &'a mut CodeExecutor,
    /// The execution's `code.execute` output id, for its journal entries.
    pub(super) execution: &'a str,
    pub(super) batch: &'a mut Option<Batch>,
    pub(super) prepared: &'a Prepared,
    pub(super) bindings: &'a [ToolBinding],
}

#[async_trait]
impl ScriptHost for ModeHost<'_> {
    type Error = ExecutorError;

    fn tools(&self) -> (&agentic_core::ToolSet, &[ToolBinding]) {
        (&self.prepared.tools, self.bindings)
    }

    async fn tool_calls(
        &mut self,
        id: u64,
        parallel: bool,
        calls: Vec<ParallelCall>,
    ) -> Result<Option<HostReply>, ExecutorError> {
        let batch = self
            .executor
            .open_batch(id, parallel, calls, self.prepared)
            .await?;
        *self.batch = Some(batch);
        Ok(None)
    }

    async fn llm(&mut self, prompt: &str, json: bool) -> HostReply {
        if let Some(reply) = self.executor.dry_llm_answer(prompt, json) {
            // Journaled when the dry run asked.
            return reply;
        }
        let reply = self.executor.llm(prompt, json).await;
        let entry = Entry::Llm {
            execution: self.execution.to_owned(),
            prompt: prompt.to_owned(),
            json,
            reply: reply.clone(),
        };
        if let Err(error) = self.executor.journal(entry).await {
            // The script cannot be resumed past this answer; it goes on here.
            tracing::warn!(%error, "could not journal an llm() answer");
        }
        reply
    }
}
