//! Resuming a prompt after its process stopped, or after a person decided: the script that
//! was running or waiting runs again in a fresh worker, answered from its journal and the
//! timeline until it catches up, and goes live from there.

use agentic_core::runtime::takeover::{self, Adopted, taken_over};
use agentic_core::{
    Approval, ErrorKind, ExecutorError, Prepared, Prompt, PromptOutput, PromptState, ToolResult,
};
use serde_json::Value;

use super::batch::{Batch, BatchCall, Decision};
use super::{ActiveExecution, CodeExecutor, Progress};
use crate::journal::{Entry, Replay};
use crate::prompt::CODE_EXECUTE;
use crate::protocol::{
    CodePath, Determinism, ExecutionOutcome, HostReply, HostRequest, ParallelCall, ScriptError,
    ScriptErrorKind, ToolBinding,
};

impl CodeExecutor {
    /// A resumed prompt picks up where its process left it: the iteration count and
    /// `store()` values come back, and the script that was running or waiting for a person
    /// runs again in a fresh worker, answered from its journal until it catches up.
    pub(super) async fn restore(&mut self, bindings: &[ToolBinding]) -> Result<(), ExecutorError> {
        let Some(resumed_from) = self.base.take_resumed() else {
            return Ok(());
        };
        let entries: Vec<Entry> = match &self.base.options.prompt.checkpoint {
            Some(checkpoint) => checkpoint
                .journal(&self.base.recorder.prompt().id)
                .await
                .map_err(|error| {
                    ExecutorError::Internal(format!("could not read the journal: {error:#}"))
                })?
                .into_iter()
                // Model replies and decisions are journaled for export, not for resuming.
                .filter(agentic_core::replay::is_mode_entry)
                .filter_map(|entry| match serde_json::from_value(entry) {
                    Ok(entry) => Some(entry),
                    Err(error) => {
                        tracing::warn!(%error, "skipping a journal entry this version cannot read");
                        None
                    }
                })
                .collect(),
            None => Vec::new(),
        };
        self.iterations = u32::try_from(self.timeline().executions().count()).unwrap_or(u32::MAX);
        if let Some(store) = crate::journal::last_store(&entries) {
            self.store = store;
        }
        let output = &self.base.recorder.prompt().output;
        let Some((index, execution)) =
            output
                .iter()
                .enumerate()
                .rev()
                .find_map(|(index, output)| match output {
                    PromptOutput::Tool(tool) if tool.function == CODE_EXECUTE => {
                        Some((index, tool))
                    }
                    _ => None,
                })
        else {
            return Ok(());
        };
        let interrupted = execution.result.error_kind() == Some(ErrorKind::Interrupted);
        if !execution.result.is_pending() && !interrupted {
            // It had ended: the next iteration asks the model, as it would have there.
            return Ok(());
        }
        let code_output_id = execution.id.clone();
        let code = execution
            .input
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let outputs = crate::journal::texts_after(output, index);
        let record = crate::journal::record_of(&entries, &code_output_id);
        let calls = self.timeline().calls_of(&code_output_id).cloned().collect();
        if interrupted {
            self.base
                .recorder
                .reopen_tool(&code_output_id, "running")
                .await?;
        }
        let store = record.store.clone().unwrap_or_else(|| self.store.clone());
        let path = record.path.unwrap_or(CodePath::Plain);
        let launch = super::plan::Launch {
            code_output_id: code_output_id.clone(),
            code: code.clone(),
            path,
            store: store.clone(),
            determinism: Determinism {
                seed: record.seed,
                clock: Vec::new(),
            },
        };
        if self.restore_plan(&launch, &record.llm)? {
            // Its plan still waits for a person: the program has not run yet.
            return Ok(());
        }
        tracing::info!(prompt = %self.base.recorder.prompt().id, execution = %code_output_id, "resuming a script from its journal");
        let replay = Replay {
            calls,
            matched: 0,
            llm: record.llm,
            outputs,
            was_waiting: resumed_from == PromptState::WaitingForApproval,
        };
        let determinism = Determinism {
            seed: record.seed,
            clock: record.clock,
        };
        self.launch(
            code_output_id,
            code,
            path,
            store,
            bindings,
            determinism,
            Some(replay),
        )
        .await;
        Ok(())
    }

    /// Answers a request of a replayed script from its journal. `None` when the journal has
    /// nothing for it (the request goes live); `Err` with the reason when the script did
    /// something else than before.
    pub(super) async fn replayed(
        &mut self,
        active: &mut ActiveExecution,
        id: u64,
        request: &HostRequest,
        prepared: &Prepared,
    ) -> Result<Option<Option<HostReply>>, ReplayError> {
        let Some(replay) = active.replay.as_mut() else {
            return Ok(None);
        };
        match request {
            HostRequest::Llm { prompt, json } => {
                let Some((journaled, journaled_json, reply)) = replay.llm.pop_front() else {
                    return Ok(None);
                };
                if journaled != *prompt || journaled_json != *json {
                    let did = crate::journal::describe_call("llm", &Value::String(prompt.clone()));
                    let had = crate::journal::describe_call("llm", &Value::String(journaled));
                    return Err(ReplayError::Diverged(crate::journal::diverged(
                        replay.matched + 1,
                        &did,
                        &had,
                    )));
                }
                Ok(Some(Some(reply)))
            }
            HostRequest::CallTool { .. } | HostRequest::Parallel { .. } => {
                if replay.calls.is_empty() {
                    return Ok(None);
                }
                let (parallel, calls) = match request.clone() {
                    HostRequest::CallTool { tool, input } => {
                        (false, vec![ParallelCall { tool, input }])
                    }
                    HostRequest::Parallel { calls } => (true, calls),
                    _ => unreachable!(),
                };
                let calls = crate::host::normalised_calls(&prepared.tools, calls);
                let mut batch = Batch {
                    request_id: id,
                    parallel,
                    calls: Vec::with_capacity(calls.len()),
                };
                let mut live = Vec::new();
                for call in calls {
                    let Some(recorded) = replay.calls.pop_front() else {
                        live.push(call);
                        continue;
                    };
                    replay.matched += 1;
                    if recorded.function != call.tool || recorded.input != call.input {
                        return Err(ReplayError::Diverged(crate::journal::diverged(
                            replay.matched,
                            &crate::journal::describe_call(&call.tool, &call.input),
                            &crate::journal::describe_call(&recorded.function, &recorded.input),
                        )));
                    }
                    // A call that runs now is asked about as any other: a person may not
                    // have seen it yet (only the first call of a request that needs approval
                    // is put to them at a time).
                    // A planned program's calls use its plan up as they did before.
                    let approval = match prepared.tools.approval(&call.tool, &call.input) {
                        Approval::Required { reason } if !self.shared.config.auto_approve => {
                            self.held_decision(&call.tool, &call.input, reason).0
                        }
                        _ => Decision::Allowed,
                    };
                    let decision = match &recorded.result {
                        ToolResult::Success { output } => Decision::Recorded(Ok(output.clone())),
                        // The prompt waited for a person: nothing of this request had run.
                        // The call put to them is put again (asking is durable, an answer
                        // that did not finish is not); the others are decided as new.
                        ToolResult::Pending {
                            reason,
                            awaiting_approval,
                        } if replay.was_waiting => {
                            if *awaiting_approval {
                                Decision::Ask(reason.clone())
                            } else if recorded
                                .decision
                                .as_ref()
                                .is_some_and(|record| record.verdict.rejection().is_none())
                            {
                                // Approved before the person was asked about the others (by
                                // a scope, say): it stays approved, and stays out of what
                                // they decide.
                                Decision::Approved
                            } else {
                                approval
                            }
                        }
                        // It may have been running (approved, if it asked), or was closed
                        // when its process stopped: the one takeover policy decides.
                        ToolResult::Pending { .. }
                        | ToolResult::Error {
                            kind: ErrorKind::Interrupted,
                            ..
                        } => {
                            let adopted = takeover::adopt(
                                &mut self.base.recorder,
                                &prepared.tools,
                                &recorded,
                                true,
                                "running",
                            )
                            .await
                            .map_err(ReplayError::Executor)?;
                            match adopted {
                                Adopted::Runs => approval,
                                Adopted::TakenOver => Decision::Recorded(Err(
                                    agentic_core::TAKEN_OVER_TOOL_ERROR.to_owned(),
                                )),
                            }
                        }
                        ToolResult::Error { error, .. } => Decision::Recorded(Err(error.clone())),
                    };
                    batch.calls.push(BatchCall {
                        id: recorded.id,
                        tool: call.tool,
                        input: call.input,
                        decision,
                    });
                }
                if !live.is_empty() {
                    let opened = self
                        .open_batch(id, parallel, live, prepared)
                        .await
                        .map_err(ReplayError::Executor)?;
                    batch.calls.extend(opened.calls);
                }
                active.batch = Some(batch);
                Ok(Some(None))
            }
            HostRequest::ToolSchema { .. } => Ok(None),
        }
    }
}

/// Why a replayed request was not answered from the journal.
pub(super) enum ReplayError {
    Executor(ExecutorError),
    /// The script did something else than before; the text says what.
    Diverged(String),
}

impl CodeExecutor {
    /// Ends a replayed script that diverged from its journal: the model reads why. Calls of
    /// the journal it did not reach, and that were unfinished, get an error result.
    pub(super) async fn stop_diverged(
        &mut self,
        active: &mut ActiveExecution,
        message: String,
    ) -> Result<Progress, ExecutorError> {
        tracing::warn!(prompt = %self.base.recorder.prompt().id, %message, "a resumed script diverged");
        active.replay = None;
        // The execution's calls left unfinished: those the replay did not reach, and any of
        // the request it stopped at.
        let unreached: Vec<String> = self
            .timeline()
            .calls_of(&active.code_output_id)
            .filter(|call| call.result.is_pending())
            .map(|call| call.id.clone())
            .collect();
        for id in unreached {
            self.base.recorder.finish_tool(&id, taken_over()).await?;
        }
        // A batch it built before diverging is dropped, and so is its worker.
        active.batch = None;
        Ok(Progress::Finished(Box::new(ExecutionOutcome {
            path: CodePath::Plain,
            result: Err(ScriptError {
                kind: ScriptErrorKind::Runtime,
                message,
                line: None,
                column: None,
                source_line: None,
                hint: None,
            }),
            done: false,
            complete: None,
            store: active.start_store.clone(),
            clock: Vec::new(),
            guesses_read: false,
            misread: false,
            searched_in_vain: false,
        })))
    }

    /// A decision about a prompt that waited across a restart: its script is replayed up to
    /// the call it waits at. `Some` when the prompt went on without it (the script diverged
    /// from its journal), with the prompt as it ended.
    pub(super) async fn restore_waiting(
        &mut self,
        tool_call_id: &str,
    ) -> Result<Option<Prompt>, ExecutorError> {
        if self.active.is_some() || self.base.resumed_from().is_none() {
            return Ok(None);
        }
        if self
            .base
            .recorder
            .prompt()
            .tool_output(tool_call_id)
            .is_none_or(|tool| !tool.result.is_pending())
        {
            return Err(ExecutorError::NotWaiting(tool_call_id.to_owned()));
        }
        let (prepared, bindings) = self.prepared().await.map_err(|error| {
            ExecutorError::Internal(format!("preparing the prompt failed: {error:#}"))
        })?;
        self.restore(&bindings).await?;
        if self.waiting_plan(tool_call_id) {
            return Ok(None);
        }
        let Some(active) = self.active.take() else {
            return Err(ExecutorError::NotWaiting(tool_call_id.to_owned()));
        };
        let Some((active, outcome)) = self.run_active(active, &prepared, &bindings).await? else {
            return Ok(None);
        };
        // The waiting call was not reached: the prompt runs on without the decision.
        self.base.recorder.resume().await?;
        if self.finish_iteration(active, outcome, &prepared).await? {
            return Ok(Some(self.base.recorder.prompt().clone()));
        }
        Ok(Some(self.drive().await?))
    }
}
