//! `CodeExecutor`: the code-mode loop. The model writes code, the sandbox runs it, tool calls
//! come back to the host (where approval, validation and recording happen), and the result
//! goes back to the model until the code calls `done()` or `complete()`.

use std::sync::Arc;

use agentic_core::tool::cap_text;
use agentic_core::{
    Approval, ChatMessage, ExecutionModeFactory, ExecutorCreateOptions, ExecutorError,
    ModelRequest, ModelResponse, Prepared, Prompt, PromptExecutor, PromptOutput, PromptRecorder,
    PromptState, ProviderError, State, ToolContext, ToolOutput, ToolResult,
};
use async_trait::async_trait;
use serde_json::{Map, Value, json};
use tracing::Instrument as _;

use crate::history::history_messages;
use crate::host::{ScriptHost, calls_reply};
use crate::journal::{Entry, Replay};
use crate::plugin::Shared;
use crate::prompt::{CODE_EXECUTE, extract_code, iteration_messages, system_prompt};
use crate::protocol::{
    CodePath, Determinism, ExecuteRequest, ExecutionOutcome, HostReply, HostRequest, ParallelCall,
    ScriptError, ScriptErrorKind, ToolBinding,
};
use crate::sandbox::{Execution, SandboxEvent};

pub(crate) const CODE_MODE: &str = "code";

/// Registers [`CodeExecutor`] as mode `code`.
pub(crate) struct CodeModeFactory {
    pub(crate) shared: Arc<Shared>,
}

impl ExecutionModeFactory for CodeModeFactory {
    fn id(&self) -> &str {
        CODE_MODE
    }
    fn name(&self) -> &str {
        "Code (JavaScript sandbox)"
    }
    fn create_executor(&self, options: ExecutorCreateOptions) -> Box<dyn PromptExecutor> {
        Box::new(CodeExecutor::new(options, self.shared.clone()))
    }
    /// A script paused at an approval, or running when its process stopped, is replayed
    /// from its journal in a fresh worker (see `journal.rs`).
    fn resumes_after_restart(&self) -> bool {
        true
    }
}

/// The code-mode executor.
pub(crate) struct CodeExecutor {
    options: ExecutorCreateOptions,
    shared: Arc<Shared>,
    recorder: PromptRecorder,
    prepared: Option<(Prepared, Vec<ToolBinding>)>,
    /// The system prompt, built from `prepared` on the first request and the same for every
    /// request of the prompt after it.
    system: std::sync::OnceLock<String>,
    /// The grammar of this prompt's programs (see [`crate::grammar`]), built on first use.
    grammar: std::sync::OnceLock<String>,
    iterations: u32,
    max_iterations: u32,
    /// `store()`/`recall()` values, carried from one iteration to the next.
    store: Map<String, Value>,
    active: Option<ActiveExecution>,
    /// The stored state of a prompt this executor resumes (running when its process
    /// stopped, or waiting for a person), until its script is restored.
    resumed_from: Option<PromptState>,
}

impl std::fmt::Debug for CodeExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeExecutor")
            .field("prompt", &self.recorder.prompt().id)
            .finish_non_exhaustive()
    }
}

/// A script that is running, or paused at a host request.
struct ActiveExecution {
    execution: Execution,
    code_output_id: String,
    path: CodePath,
    logs: Vec<String>,
    /// The tool calls of the request the script is blocked on.
    batch: Option<Batch>,
    /// The `execute_code` span: the script's tool calls and `llm()` calls are its children.
    span: tracing::Span,
    /// A resumed script: what answers its requests until it catches up with its journal.
    replay: Option<Replay>,
    /// The `store()` values it started with.
    start_store: Map<String, Value>,
}

struct Batch {
    request_id: u64,
    parallel: bool,
    calls: Vec<BatchCall>,
}

struct BatchCall {
    id: String,
    tool: String,
    input: Value,
    decision: Decision,
}

#[derive(Clone, PartialEq)]
enum Decision {
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

enum Progress {
    Paused,
    Finished(Box<ExecutionOutcome>),
}

impl CodeExecutor {
    pub(crate) fn new(options: ExecutorCreateOptions, shared: Arc<Shared>) -> Self {
        let prompt = options.resume_prompt.clone().unwrap_or_else(|| {
            Prompt::new(
                &options.user_id,
                &options.mode,
                options.model,
                options.input.clone(),
            )
        });
        let recorder = PromptRecorder::new(
            prompt,
            options.services.events.clone(),
            options.checkpoint.clone(),
        );
        let max_iterations = options.max_rounds.unwrap_or(shared.config.max_iterations);
        let resumed_from = options.resume_prompt.as_ref().map(|prompt| prompt.state);
        Self {
            options,
            shared,
            recorder,
            prepared: None,
            system: std::sync::OnceLock::new(),
            grammar: std::sync::OnceLock::new(),
            iterations: 0,
            max_iterations,
            store: Map::new(),
            active: None,
            resumed_from,
        }
    }

    /// Appends to the prompt's journal, durably, before the script goes on.
    async fn journal(&self, entry: Entry) -> Result<(), ExecutorError> {
        let Some(checkpoint) = &self.options.checkpoint else {
            return Ok(());
        };
        let entry = serde_json::to_value(&entry)
            .map_err(|error| ExecutorError::Internal(error.to_string()))?;
        checkpoint
            .append_journal(&self.recorder.prompt().id, entry)
            .await
            .map_err(|error| {
                ExecutorError::Internal(format!("could not journal the script: {error:#}"))
            })
    }

    /// A resumed prompt picks up where its process left it: the iteration count and
    /// `store()` values come back, and the script that was running or waiting for a person
    /// runs again in a fresh worker, answered from its journal until it catches up.
    async fn restore(&mut self, bindings: &[ToolBinding]) -> Result<(), ExecutorError> {
        let Some(resumed_from) = self.resumed_from.take() else {
            return Ok(());
        };
        let entries: Vec<Entry> = match &self.options.checkpoint {
            Some(checkpoint) => checkpoint
                .journal(&self.recorder.prompt().id)
                .await
                .map_err(|error| {
                    ExecutorError::Internal(format!("could not read the journal: {error:#}"))
                })?
                .into_iter()
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
        self.iterations = u32::try_from(self.executions().count()).unwrap_or(u32::MAX);
        if let Some(store) = crate::journal::last_store(&entries) {
            self.store = store;
        }
        let output = &self.recorder.prompt().output;
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
        let interrupted = matches!(&execution.result,
            ToolResult::Error { error } if error == agentic_core::INTERRUPTED_TOOL_ERROR);
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
        let calls = self.calls_of(&code_output_id).cloned().collect();
        if interrupted {
            self.recorder
                .reopen_tool(&code_output_id, "running")
                .await?;
        }
        let store = record.store.clone().unwrap_or_else(|| self.store.clone());
        let path = record.path.unwrap_or(CodePath::Plain);
        tracing::info!(prompt = %self.recorder.prompt().id, execution = %code_output_id, "resuming a script from its journal");
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
    async fn replayed(
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
                    let approval = match prepared.tools.approval(&call.tool, &call.input) {
                        Approval::Required { reason } if !self.shared.config.auto_approve => {
                            Decision::Ask(reason)
                        }
                        _ => Decision::Allowed,
                    };
                    let decision = match recorded.result {
                        ToolResult::Success { output } => Decision::Recorded(Ok(output)),
                        ToolResult::Error { error }
                            if error == agentic_core::INTERRUPTED_TOOL_ERROR =>
                        {
                            // Closed when its process stopped; the prompt was continued.
                            if prepared.tools.idempotent(&call.tool) {
                                self.recorder
                                    .reopen_tool(&recorded.id, "running")
                                    .await
                                    .map_err(ReplayError::Executor)?;
                                approval
                            } else {
                                self.recorder
                                    .finish_tool(
                                        &recorded.id,
                                        ToolResult::Error {
                                            error: agentic_core::TAKEN_OVER_TOOL_ERROR.to_owned(),
                                        },
                                    )
                                    .await
                                    .map_err(ReplayError::Executor)?;
                                Decision::Recorded(Err(
                                    agentic_core::TAKEN_OVER_TOOL_ERROR.to_owned()
                                ))
                            }
                        }
                        ToolResult::Error { error } => Decision::Recorded(Err(error)),
                        // The prompt waited for a person: nothing of this request had run.
                        // The call put to them is put again (asking is durable, an answer
                        // that did not finish is not); the others are decided as new.
                        ToolResult::Pending { reason, .. } if replay.was_waiting => {
                            if reason == "running" {
                                approval
                            } else {
                                Decision::Ask(reason)
                            }
                        }
                        // It may have been running (approved, if it asked): safe to repeat
                        // only if the tool says so.
                        ToolResult::Pending { .. } if prepared.tools.idempotent(&call.tool) => {
                            approval
                        }
                        ToolResult::Pending { .. } => {
                            let error = agentic_core::TAKEN_OVER_TOOL_ERROR.to_owned();
                            self.recorder
                                .finish_tool(
                                    &recorded.id,
                                    ToolResult::Error {
                                        error: error.clone(),
                                    },
                                )
                                .await
                                .map_err(ReplayError::Executor)?;
                            Decision::Recorded(Err(error))
                        }
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

    async fn drive(&mut self) -> Result<Prompt, ExecutorError> {
        let (prepared, bindings) = match self.prepared().await {
            Ok(prepared) => prepared,
            Err(error) => {
                self.recorder
                    .fail(&format!("preparing the prompt failed: {error:#}"))
                    .await?;
                return Ok(self.recorder.prompt().clone());
            }
        };
        if self.active.is_none() {
            self.restore(&bindings).await?;
        }
        loop {
            if let Some(mut active) = self.active.take() {
                let span = active.span.clone();
                match self
                    .continue_execution(&mut active, &prepared, &bindings)
                    .instrument(span)
                    .await?
                {
                    Progress::Paused => {
                        self.active = Some(active);
                        return Ok(self.recorder.prompt().clone());
                    }
                    Progress::Finished(outcome) => {
                        if self.finish_iteration(active, *outcome).await? {
                            return Ok(self.recorder.prompt().clone());
                        }
                    }
                }
            }
            if self.iterations >= self.max_iterations {
                // The user still gets the model's best answer, then the reason it is not more.
                self.answer_without_code(&format!(
                    "the code did not finish within {} iterations",
                    self.max_iterations
                ))
                .await?;
                let message = format!(
                    "Stopped: reached the maximum of {} code iterations without finishing.",
                    self.max_iterations
                );
                self.recorder.push_unstreamed_text(&message).await?;
                self.recorder.complete().await?;
                return Ok(self.recorder.prompt().clone());
            }
            self.iterations += 1;
            let request = self.request(&prepared, &bindings);
            let reply = match self.ask(request).await {
                Ok(reply) => reply,
                Err(error) => {
                    self.recorder.fail(&error.to_string()).await?;
                    return Ok(self.recorder.prompt().clone());
                }
            };
            let last_error = self.last_execution_error();
            if let Some(hint) =
                crate::rules::not_a_program::refusal(&reply.text, last_error.as_deref(), &bindings)
            {
                // Told once what was wrong; a second such reply is asked afresh (when nothing
                // was fetched to answer from), then gets the plain-answer path.
                let told = self.refusals();
                let afresh = told > 0 && self.may_ask_afresh();
                let error = if afresh {
                    format!("{} ({hint})", crate::rules::afresh::ASKED_AFRESH)
                } else {
                    hint
                };
                let id = new_call_id();
                self.recorder
                    .push_finished_tool(
                        &id,
                        CODE_EXECUTE,
                        json!({ "code": reply.text.trim() }),
                        ToolResult::Error { error },
                    )
                    .await?;
                if told == 0 || afresh {
                    continue;
                }
                let answered = self
                    .answer_without_code("you kept replying without code")
                    .await?;
                if !answered {
                    self.recorder
                        .push_unstreamed_text("Stopped: the model did not reply with code.")
                        .await?;
                }
                self.recorder.complete().await?;
                return Ok(self.recorder.prompt().clone());
            }
            let (code, path) = extract_code(&reply.text);
            let earlier = self.earlier_iteration_with(&code);
            // The same program after a failure that may pass by itself (a 503, a timeout): the
            // rule below assumes a program gives the same result twice, which a flaky service
            // breaks. Such a program is run once more.
            let rerun = earlier.is_some_and(|earlier| {
                self.iteration_met_transient_failure(earlier)
                    && self.executions_of(&code).count() == 1
            });
            let earlier = if rerun { None } else { earlier };
            let code_output_id = new_call_id();
            self.recorder
                .start_tool(
                    &code_output_id,
                    CODE_EXECUTE,
                    json!({ "code": code }),
                    "running",
                )
                .await?;
            if earlier.is_some()
                && self.count_errors_starting(crate::rules::repeated::REPEATED) == 0
                && let Some((number, last_run)) = self.last_run_of(&code, &code_output_id)
            {
                // The same program again, after it failed (or ran with a note on values it left
                // empty): told once what its last run met, as small models often copy their
                // code back unchanged past a long error.
                let error = match last_run {
                    LastRun::Failed(error) => crate::rules::repeated::after_failure(number, &error),
                    LastRun::Noted(note) => crate::rules::repeated::after_note(number, &note),
                };
                self.recorder
                    .finish_tool(&code_output_id, ToolResult::Error { error })
                    .await?;
                continue;
            }
            if let Some(earlier) = earlier
                && self.may_ask_afresh()
            {
                // Stuck on a program that failed, with nothing fetched yet to answer from: a
                // plain answer could only guess. The model is asked once more in a request
                // without its earlier programs, which a small model otherwise copies back.
                self.recorder
                    .finish_tool(
                        &code_output_id,
                        ToolResult::Error {
                            error: format!(
                                "{} (the same code as iteration {earlier})",
                                crate::rules::afresh::ASKED_AFRESH
                            ),
                        },
                    )
                    .await?;
                continue;
            }
            if let Some(earlier) = earlier {
                // A model that sends the same code again is stuck (greedy decoding of a small
                // model copies its last turn): running it would give the same result, and
                // asking again would give the same code, so it is asked for a plain answer.
                self.recorder
                    .finish_tool(
                        &code_output_id,
                        ToolResult::Error {
                            error: format!(
                                "not run: the same code as iteration {earlier}; asked for a \
                                 plain-text answer instead"
                            ),
                        },
                    )
                    .await?;
                let answered = self
                    .answer_without_code(&format!(
                        "you sent the program of iteration {earlier} again"
                    ))
                    .await?;
                if !answered {
                    self.recorder
                        .push_unstreamed_text(
                            "Stopped: the model repeated its code without finishing.",
                        )
                        .await?;
                }
                self.recorder.complete().await?;
                return Ok(self.recorder.prompt().clone());
            }
            // What the script reads besides its code and its tools' answers is journaled
            // first, so that another process can replay it.
            let seed = fastrand::u64(..);
            self.journal(Entry::Start {
                execution: code_output_id.clone(),
                path,
                seed,
                store: self.store.clone(),
            })
            .await?;
            let determinism = Determinism {
                seed: Some(seed),
                clock: Vec::new(),
            };
            let store = self.store.clone();
            self.launch(
                code_output_id,
                code,
                path,
                store,
                &bindings,
                determinism,
                None,
            )
            .await;
        }
    }

    /// Starts a script in the sandbox, inside its `execute_code` span (the parent of its tool
    /// and `llm()` calls), as the active execution; `replay` when it resumes from a journal.
    #[allow(clippy::too_many_arguments)]
    async fn launch(
        &mut self,
        code_output_id: String,
        code: String,
        path: CodePath,
        store: Map<String, Value>,
        bindings: &[ToolBinding],
        determinism: Determinism,
        replay: Option<Replay>,
    ) {
        let span = tracing::info_span!(
            target: agentic_core::telemetry::SPANS,
            "execute_code",
            otel.name = "execute_code",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = CODE_EXECUTE,
            gen_ai.tool.call.id = %code_output_id,
            agentic.code.iteration = agentic_core::telemetry::count(self.iterations),
            agentic.code.resumed = replay.is_some(),
            agentic.code = tracing::field::Empty,
            error.type = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
            otel.status_description = tracing::field::Empty,
        );
        if agentic_core::telemetry::record_payloads() {
            span.record("agentic.code", code.as_str());
        }
        let execution = self
            .shared
            .sandbox
            .start_with_wall_time(
                Some(&self.options.user_id),
                ExecuteRequest {
                    code,
                    tools: bindings.to_vec(),
                    input: None,
                    store: store.clone(),
                    limits: self.shared.sandbox.config().script_limits(),
                    allow_prose: path == CodePath::Plain,
                    same_tools_as_before: false,
                    determinism,
                },
                None,
            )
            .instrument(span.clone())
            .await;
        self.active = Some(ActiveExecution {
            execution,
            code_output_id,
            path,
            logs: Vec::new(),
            batch: None,
            span,
            replay,
            start_store: store,
        });
    }

    /// Feeds the script until it finishes or waits for a person.
    async fn continue_execution(
        &mut self,
        active: &mut ActiveExecution,
        prepared: &Prepared,
        bindings: &[ToolBinding],
    ) -> Result<Progress, ExecutorError> {
        loop {
            if let Some(batch) = &active.batch {
                if let Some(call) = batch
                    .calls
                    .iter()
                    .find(|call| matches!(call.decision, Decision::Ask(_)))
                {
                    let Decision::Ask(reason) = &call.decision else {
                        continue;
                    };
                    let (id, reason) = (call.id.clone(), reason.clone());
                    active.execution.pause_clock();
                    // A restored script reaches the call it waited at: already asked.
                    let asked = self.recorder.prompt().state == PromptState::WaitingForApproval
                        && self.recorder.prompt().tool_output(&id).is_some_and(|tool| {
                            matches!(&tool.result, ToolResult::Pending { reason: waiting, .. } if *waiting == reason)
                        });
                    if !asked {
                        self.recorder.request_approval(&id, &reason).await?;
                    }
                    return Ok(Progress::Paused);
                }
                if let Some(batch) = active.batch.take() {
                    let reply = self.run_batch(&batch, prepared).await?;
                    active.execution.reply(batch.request_id, reply).await;
                }
            }
            match active.execution.next().await {
                SandboxEvent::Request { id, request, clock } => {
                    if !clock.is_empty() {
                        self.journal(Entry::Clock {
                            execution: active.code_output_id.clone(),
                            values: clock,
                        })
                        .await?;
                    }
                    match self.replayed(active, id, &request, prepared).await {
                        Ok(Some(reply)) => {
                            if let Some(reply) = reply {
                                active.execution.reply(id, reply).await;
                            }
                            if active.replay.as_ref().is_some_and(Replay::is_spent) {
                                active.replay = None;
                            }
                            continue;
                        }
                        Ok(None) => {}
                        Err(ReplayError::Executor(error)) => return Err(error),
                        Err(ReplayError::Diverged(message)) => {
                            return self.stop_diverged(active, message).await;
                        }
                    }
                    // Tool calls wait in `active.batch`: run at the top of the loop, or held
                    // there for a person.
                    let mut host = ModeHost {
                        executor: self,
                        execution: &active.code_output_id,
                        batch: &mut active.batch,
                        prepared,
                        bindings,
                    };
                    let reply = crate::host::answer(&mut host, id, request).await?;
                    if let Some(reply) = reply {
                        active.execution.reply(id, reply).await;
                    }
                }
                SandboxEvent::Output(text) => {
                    // Shown already, before the script's process stopped.
                    if let Some(replay) = active.replay.as_mut()
                        && replay.outputs > 0
                    {
                        replay.outputs -= 1;
                        if replay.is_spent() {
                            active.replay = None;
                        }
                        continue;
                    }
                    self.recorder.push_unstreamed_text(&text).await?;
                }
                SandboxEvent::Log(text) => active.logs.push(text),
                SandboxEvent::Finished(outcome) => return Ok(Progress::Finished(outcome)),
            }
        }
    }

    /// Records the calls of one request as pending tool outputs and decides which need a person.
    async fn open_batch(
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
            let decision = match prepared.tools.approval(&call.tool, &call.input) {
                Approval::Required { reason } if !self.shared.config.auto_approve => {
                    Decision::Ask(reason)
                }
                _ => Decision::Allowed,
            };
            self.recorder
                .start_tool(&id, &call.tool, call.input.clone(), "running")
                .await?;
            batch.calls.push(BatchCall {
                id,
                tool: call.tool,
                input: call.input,
                decision,
            });
        }
        Ok(batch)
    }

    /// Runs the allowed and approved calls of a batch concurrently and records every result.
    async fn run_batch(
        &mut self,
        batch: &Batch,
        prepared: &Prepared,
    ) -> Result<HostReply, ExecutorError> {
        let prompt = self.recorder.prompt();
        let context = ToolContext::new(
            &prompt.user_id,
            &prompt.id,
            self.options.state.clone(),
            self.options.services.clone(),
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
        for (call, result) in batch.calls.iter().zip(&results) {
            let result = match result {
                Ok(output) => ToolResult::Success {
                    output: output.clone(),
                },
                Err(error) => ToolResult::Error {
                    error: error.clone(),
                },
            };
            if !matches!(call.decision, Decision::Rejected(_) | Decision::Recorded(_)) {
                self.recorder.finish_tool(&call.id, result).await?;
            }
        }
        for file in context.take_files() {
            self.recorder.push_file(file).await?;
        }
        Ok(calls_reply(batch.parallel, results))
    }

    async fn llm(&mut self, prompt: &str, json: bool) -> HostReply {
        let mut messages = Vec::new();
        if json {
            messages.push(ChatMessage::system(
                "Answer with one JSON value only: no prose, no code fences.",
            ));
        }
        messages.push(ChatMessage::user(prompt));
        let request = ModelRequest::new(self.recorder.prompt().model, messages);
        match self.ask(request).await {
            Ok(reply) => {
                if !json {
                    return HostReply::Value {
                        value: Value::String(reply.text),
                    };
                }
                match json_answer(&reply.text) {
                    Ok(value) => HostReply::Value { value },
                    Err(error) => HostReply::Error {
                        message: format!(
                            "llmJson: the model's answer is not JSON ({error}): {}",
                            cap_text(reply.text.trim(), 500)
                        ),
                    },
                }
            }
            Err(error) => HostReply::Error {
                message: format!("llm: {error}"),
            },
        }
    }

    /// Records an execution's outcome. True when the turn is over.
    async fn finish_iteration(
        &mut self,
        active: ActiveExecution,
        outcome: ExecutionOutcome,
    ) -> Result<bool, ExecutorError> {
        if outcome.store != active.start_store {
            self.journal(Entry::End {
                execution: active.code_output_id.clone(),
                store: outcome.store.clone(),
            })
            .await?;
        }
        self.store = outcome.store;
        if let Err(error) = &outcome.result {
            agentic_core::telemetry::record_error(
                &active.span,
                &format!("{:?}", error.kind),
                &error.message,
            );
        }
        let path = match (active.path, outcome.path) {
            (_, CodePath::Prose) => CodePath::Prose,
            (path, _) => path,
        };
        if path == CodePath::Prose
            && self.refusals() == 0
            && self.previous_execution_failed(&active.code_output_id)
        {
            // "The error indicates that…": small models explain a failure to no one instead of
            // fixing it. Told once; a second prose reply is the answer.
            let error = crate::rules::not_a_program::prose_after_failure();
            return self.send_back(&active, error).await;
        }
        if path == CodePath::Prose {
            let mut answer = self
                .recorder
                .prompt()
                .tool_output(&active.code_output_id)
                .and_then(|tool| {
                    tool.input
                        .get("code")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .unwrap_or_default();
            // "Done." after a program that logged the count: what the program found has not
            // been shown, and the prose does not say it. Told once; after that the prose is
            // the answer with what the program found beneath it, so it is never lost.
            if !self.shown_text()
                && let Some(found) = self.unshown_finding(&active.code_output_id)
                && !crate::rules::unsaid::says_any(&answer, &found)
            {
                if self.count_errors_starting(crate::rules::unsaid::UNSAID) == 0 {
                    let error = crate::rules::unsaid::notice(&found);
                    return self.send_back(&active, error).await;
                }
                answer = format!("{}\n\n{}", answer.trim_end(), cap_text(&found, 4_000));
            }
            self.recorder
                .finish_tool(
                    &active.code_output_id,
                    ToolResult::Success {
                        output: json!({ "path": path }),
                    },
                )
                .await?;
            self.recorder.push_unstreamed_text(&answer).await?;
            self.recorder.complete().await?;
            return Ok(true);
        }
        if let Err(error) = &outcome.result
            && error.kind == ScriptErrorKind::Unavailable
        {
            // The model cannot fix a missing sandbox; asking it again only spends tokens.
            self.recorder
                .finish_tool(
                    &active.code_output_id,
                    ToolResult::Error {
                        error: error.message.clone(),
                    },
                )
                .await?;
            self.recorder
                .fail(&format!("code mode is unavailable: {}", error.message))
                .await?;
            return Ok(true);
        }
        let response = outcome
            .complete
            .as_ref()
            .and_then(|complete| complete.get("response"))
            .and_then(response_text)
            .filter(|response| !response.is_empty());
        if outcome.result.is_ok()
            && outcome.done
            && response.is_none()
            && !self.shown_text()
            && self.count_errors_starting(crate::rules::nothing_shown::NOTHING_SHOWN) == 0
        {
            // `done()` alone, in a turn that showed nothing: the user would get an empty
            // answer. Told once; a second `done()` alone ends the turn. An empty text (an
            // empty list joined) usually means "none": that is an answer too, in words.
            let empty_text = outcome
                .complete
                .as_ref()
                .and_then(|complete| complete.get("response"))
                .is_some_and(|response| response.as_str() == Some(""));
            let error = crate::rules::nothing_shown::notice(empty_text);
            return self.send_back(&active, error).await;
        }
        match outcome.result {
            Ok(value) => {
                // A program that logged or returned `undefined`, `NaN`, … for the model to read
                // (not yet an answer): what its results have, beside what it read.
                let broken = !outcome.done
                    && active
                        .logs
                        .iter()
                        .map(String::as_str)
                        .chain(value.as_str())
                        .any(|text| crate::rules::empty_values::broken_answer(text).is_some());
                let mut output = json!({ "path": path, "value": value, "logs": active.logs });
                if broken && let Some(note) = self.got_note(&active.code_output_id) {
                    output["note"] = Value::String(note);
                }
                if let Some(complete) = &outcome.complete {
                    output["complete"] = complete.clone();
                }
                self.recorder
                    .finish_tool(&active.code_output_id, ToolResult::Success { output })
                    .await?;
            }
            Err(error) => {
                let mut text = with_logs(error.describe(), &active.logs);
                if error.kind == ScriptErrorKind::Runtime
                    && (reads_a_missing_value(&error.message)
                        || error.message.ends_with(crate::engine::NO_VALUE))
                    && !text.contains("has no field")
                {
                    // `memory.list({}).todos.length` on a result without `todos`: what the
                    // results do have, on the error's first line (a copied program is told that
                    // line). A field read through a variable is explained by the engine already
                    // ("`result` has no field `todos`; its fields are …").
                    let got = self.what_it_got(&active.code_output_id);
                    let end = text.find('\n').unwrap_or(text.len());
                    text.insert_str(end, &got);
                }
                if let Some(note) = self.declared_earlier(&error.message, &active.code_output_id) {
                    text.push('\n');
                    text.push_str(&note);
                }
                self.recorder
                    .finish_tool(&active.code_output_id, ToolResult::Error { error: text })
                    .await?;
            }
        }
        if let Some(response) = response {
            self.recorder.push_unstreamed_text(&response).await?;
        }
        if outcome.done {
            self.recorder.complete().await?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Ends the iteration as failed with `error` (and the program's logs): the model is told
    /// what was wrong and writes the next program. The turn goes on.
    async fn send_back(
        &mut self,
        active: &ActiveExecution,
        error: String,
    ) -> Result<bool, ExecutorError> {
        self.recorder
            .finish_tool(
                &active.code_output_id,
                ToolResult::Error {
                    error: with_logs(error, &active.logs),
                },
            )
            .await?;
        Ok(false)
    }

    /// Asks the model for a plain-text answer to the user's message, without code, and records
    /// it as a text output. `why` says why code mode gave up; the model sees every program and
    /// result so far. False when no answer came (the call failed or the reply was empty).
    async fn answer_without_code(&mut self, why: &str) -> Result<bool, ExecutorError> {
        // A fresh request: the user's message and what the tools returned, without the
        // programs and their errors. Shown the whole turn, small models paraphrased the last
        // error instead of answering from the data they had fetched.
        let prompt = self.recorder.prompt();
        let digest = crate::prompt::results_digest(&prompt.output);
        // The last error a program ran into, not a notice about a reply that was not run.
        let last_error = self
            .last_failure()
            .map(|error| cap_text(error.lines().next().unwrap_or_default(), 300));
        let mut message = prompt.input.clone().unwrap_or_default();
        if digest.is_empty() {
            message.push_str("\n\n(No tool was called for this message.)");
        } else {
            message
                .push_str("\n\nWhat the programs and tool calls made for this message returned:\n");
            message.push_str(&digest);
        }
        if let Some(error) = last_error {
            message.push_str(&format!("\n\nThe last program failed: {error}"));
        }
        message.push_str("\n\nAnswer the message above in plain text, from these results.");
        tracing::debug!(why, "code mode answers without code");
        let mut messages = vec![ChatMessage::system(
            crate::prompt::ANSWER_FROM_RESULTS.to_owned(),
        )];
        messages.extend(history_messages(&self.options.history));
        messages.push(ChatMessage::user(message));
        let request = ModelRequest::new(prompt.model, messages);
        let reply = match self.ask(request).await {
            Ok(reply) => reply,
            Err(error) => {
                tracing::warn!(%error, "the plain-text answer after code mode gave up failed");
                return Ok(false);
            }
        };
        let answer = reply.text.trim();
        if answer.is_empty() {
            return Ok(false);
        }
        self.recorder.push_unstreamed_text(answer).await?;
        Ok(true)
    }

    /// The tool calls made by the program recorded as `code_output_id`, as recorded.
    fn calls_of<'a>(&'a self, code_output_id: &'a str) -> impl Iterator<Item = &'a ToolOutput> {
        self.recorder
            .prompt()
            .output
            .iter()
            .skip_while(move |output| {
                !matches!(output, PromptOutput::Tool(tool) if tool.id == code_output_id)
            })
            .skip(1)
            .filter_map(|output| match output {
                PromptOutput::Tool(tool) => Some(tool),
                _ => None,
            })
            .take_while(|tool| tool.function != CODE_EXECUTE)
    }

    /// Whether the user has been shown text in this turn.
    fn shown_text(&self) -> bool {
        self.recorder.prompt().output.iter().any(
            |output| matches!(output, PromptOutput::Text(text) if !text.content.trim().is_empty()),
        )
    }

    /// What the program's tool calls returned that it did not use, in one line after a
    /// space, to follow a sentence of an error; empty when there is nothing to say. See
    /// [`crate::got`].
    fn what_it_got(&self, code_output_id: &str) -> String {
        self.got_note(code_output_id)
            .map(|got| format!(" {got}"))
            .unwrap_or_default()
    }

    /// [`Self::what_it_got`]'s note alone, if there is one.
    fn got_note(&self, code_output_id: &str) -> Option<String> {
        let code = self
            .recorder
            .prompt()
            .tool_output(code_output_id)?
            .input
            .get("code")?
            .as_str()?;
        crate::got::what_it_got(code, self.calls_of(code_output_id))
    }

    /// For `ReferenceError: x is not defined` where an earlier program of this turn declared
    /// `x`: programs share no variables, which small models take for granted.
    fn declared_earlier(&self, message: &str, current: &str) -> Option<String> {
        let name = message
            .strip_prefix("ReferenceError: ")?
            .strip_suffix(" is not defined")?;
        let number = self
            .executions()
            .filter(|tool| tool.id != current)
            .enumerate()
            .filter(|(_, tool)| {
                tool.input
                    .get("code")
                    .and_then(Value::as_str)
                    .is_some_and(|code| crate::names::declares(code, name))
            })
            .map(|(index, _)| index + 1)
            .last()?;
        Some(format!(
            "`{name}` was declared by program {number}, but each program starts with no \
             variables (only store(key, value) and recall(key) carry values over). Send the \
             whole program, with `{name}` declared in it."
        ))
    }

    /// The error of this turn's last execution, when it failed.
    fn last_execution_error(&self) -> Option<String> {
        self.executions()
            .next_back()
            .and_then(|tool| match &tool.result {
                ToolResult::Error { error } => Some(error.clone()),
                _ => None,
            })
    }

    /// This turn's executions (`code.execute` outputs), oldest first.
    fn executions(&self) -> impl DoubleEndedIterator<Item = &ToolOutput> {
        self.recorder
            .prompt()
            .output
            .iter()
            .filter_map(|output| match output {
                PromptOutput::Tool(tool) if tool.function == CODE_EXECUTE => Some(tool),
                _ => None,
            })
    }

    /// Whether the execution before `current` in this turn failed.
    fn previous_execution_failed(&self, current: &str) -> bool {
        self.executions()
            .filter(|tool| !not_run(tool, crate::rules::unsaid::UNSAID))
            .rfind(|tool| tool.id != current)
            .is_some_and(|tool| matches!(tool.result, ToolResult::Error { .. }))
    }

    /// What the last program before `current` gave back (its value, else its logs), when it
    /// ran and ended nothing: the finding a prose reply after it should say.
    fn unshown_finding(&self, current: &str) -> Option<String> {
        let last = self
            .executions()
            .filter(|tool| !not_run(tool, crate::rules::NOT_RUN))
            .rfind(|tool| tool.id != current)?;
        let ToolResult::Success { output } = &last.result else {
            return None;
        };
        if output.get("complete").is_some() {
            return None;
        }
        let value = match output.get("value") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text.trim().to_owned(),
            Some(other) => other.to_string(),
        };
        let found = if value.is_empty() {
            output
                .get("logs")
                .and_then(Value::as_array)
                .map(|logs| {
                    logs.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default()
        } else {
            value
        };
        (!found.trim().is_empty()).then_some(found)
    }

    /// Replies of this turn that were refused (see [`crate::prompt::refusal`]).
    fn refusals(&self) -> usize {
        self.count_errors_starting(crate::rules::not_a_program::REFUSED)
    }

    /// Executions of this turn whose error starts with `prefix`.
    fn count_errors_starting(&self, prefix: &str) -> usize {
        self.executions()
            .filter(|tool| {
                matches!(&tool.result, ToolResult::Error { error } if error.starts_with(prefix))
            })
            .count()
    }

    /// This turn's executions of `code` (comments and blank space aside: a small model copies
    /// its last code with a fresh timestamp in a comment), with their numbers (from 1).
    fn executions_of<'a>(&'a self, code: &str) -> impl Iterator<Item = (usize, &'a ToolOutput)> {
        let shape = code_shape(code);
        self.executions()
            .enumerate()
            .filter(move |(_, tool)| {
                tool.input
                    .get("code")
                    .and_then(Value::as_str)
                    .is_some_and(|earlier| code_shape(earlier) == shape)
            })
            .map(|(index, tool)| (index + 1, tool))
    }

    /// The last execution of this turn before `current` that ran `code` and failed, or ran
    /// with a note on values it left empty: its number and what it met. Copies that were not
    /// run are passed over.
    fn last_run_of(&self, code: &str, current: &str) -> Option<(usize, LastRun)> {
        let (number, tool) = self
            .executions_of(code)
            .filter(|(_, tool)| tool.id != current)
            .filter(|(_, tool)| {
                !matches!(&tool.result, ToolResult::Error { error } if error.starts_with(crate::rules::NOT_RUN))
            })
            .last()?;
        let last_run = match &tool.result {
            ToolResult::Error { error } => LastRun::Failed(error.clone()),
            ToolResult::Success { output } => {
                LastRun::Noted(output.get("note")?.as_str()?.to_owned())
            }
            ToolResult::Pending { .. } => return None,
        };
        Some((number, last_run))
    }

    /// Whether a tool call of iteration `number` (from 1) failed in a way that may pass when
    /// tried again: an HTTP status such as 503 or 429 in its result, or an error that says the
    /// service is temporarily unavailable or timed out.
    fn iteration_met_transient_failure(&self, number: usize) -> bool {
        let Some(execution) = number
            .checked_sub(1)
            .and_then(|index| self.executions().nth(index))
        else {
            return false;
        };
        self.calls_of(&execution.id)
            .any(|call| crate::rules::transient::transient_failure(&call.result))
    }

    /// The number (from 1) of the first iteration of this turn whose code was `code`.
    fn earlier_iteration_with(&self, code: &str) -> Option<usize> {
        self.executions_of(code).next().map(|(number, _)| number)
    }

    fn request(&self, prepared: &Prepared, bindings: &[ToolBinding]) -> ModelRequest {
        let limit = self.options.services.limits().tool_result_limit;
        let system = self.system.get_or_init(|| {
            let plugin_of = |id: &str| {
                let plugin = prepared
                    .tool_plugins
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| id.split('.').next().unwrap_or(id).to_owned());
                (prepared.plugin_rank(&plugin), plugin)
            };
            let config = &self.shared.config;
            let budget_tokens =
                (config.context_window as f64 * config.declarations_share.clamp(0.0, 1.0)) as u64;
            let message = self.recorder.prompt().input.clone().unwrap_or_default();
            system_prompt(
                bindings,
                &prepared.tools,
                &plugin_of,
                &prepared.context,
                budget_tokens,
                &message,
            )
        });
        let mut messages = self.conversation(system.clone());
        let prompt = self.recorder.prompt();
        // Why the last reply was not run, if it was not.
        let not_run = self
            .executions()
            .next_back()
            .and_then(|tool| match &tool.result {
                ToolResult::Error { error } if error.starts_with(crate::rules::NOT_RUN) => {
                    Some(error.as_str())
                }
                _ => None,
            })
            .unwrap_or_default();
        let asked_afresh = not_run.starts_with(crate::rules::afresh::ASKED_AFRESH);
        match self.last_failure().filter(|_| asked_afresh) {
            // The user's message and what went wrong, without the programs that did.
            Some(failure) => {
                messages.push(ChatMessage::user(crate::rules::afresh::request(failure)))
            }
            None => messages.extend(iteration_messages(&prompt.output, limit)),
        }
        let mut request = ModelRequest::new(prompt.model, messages);
        let grammar = self.grammar.get_or_init(|| {
            crate::grammar::program_grammar(bindings, |id| {
                prepared
                    .tools
                    .iter()
                    .find(|tool| tool.id() == id)
                    .map(|tool| tool.input_schema())
            })
        });
        // Once a program of this turn has run, the answer may be words (`with_prose_answer`).
        let ran = self
            .executions()
            .any(|tool| !matches!(&tool.result, ToolResult::Error { error } if error.starts_with(crate::rules::NOT_RUN)));
        request.grammar = Some(if ran {
            crate::grammar::with_prose_answer(grammar)
        } else {
            grammar.clone()
        });
        // The last reply was the code of an earlier program again. At temperature 0 the
        // model writes it once more however the request is put (eval rounds 7 and 8: asked
        // afresh, Qwen2.5-Coder-1.5B sent its first program back in every case), so the next
        // reply is sampled.
        if asked_afresh || not_run.starts_with(crate::rules::repeated::REPEATED) {
            request.min_temperature = Some(crate::rules::afresh::RESAMPLE_TEMPERATURE);
        }
        request
    }

    /// Whether a stuck turn may be asked afresh: once per turn, only while no tool call has
    /// returned anything to answer from, and never after a person rejected a call.
    fn may_ask_afresh(&self) -> bool {
        let prompt = self.recorder.prompt();
        let fetched = prompt.output.iter().any(|output| {
            matches!(output, PromptOutput::Tool(tool)
                if tool.function != CODE_EXECUTE && matches!(tool.result, ToolResult::Success { .. }))
        });
        let rejected = prompt.output.iter().any(|output| {
            matches!(output, PromptOutput::Tool(ToolOutput { result: ToolResult::Error { error }, .. })
                if error.starts_with("Rejected by user"))
        });
        !fetched
            && !rejected
            && self.count_errors_starting(crate::rules::afresh::ASKED_AFRESH) == 0
            && self.last_failure().is_some()
    }

    /// The whole error of this turn's last program that ran and failed, hint included: not a
    /// notice about a reply that was not run.
    fn last_failure(&self) -> Option<&str> {
        self.executions().rev().find_map(|tool| match &tool.result {
            ToolResult::Error { error } if !error.starts_with(crate::rules::NOT_RUN) => {
                Some(error.as_str())
            }
            _ => None,
        })
    }

    /// `system`, then the conversation's history and this prompt's user message.
    fn conversation(&self, system: String) -> Vec<ChatMessage> {
        let mut messages = vec![ChatMessage::system(system)];
        messages.extend(history_messages(&self.options.history));
        if let Some(input) = &self.recorder.prompt().input {
            messages.push(ChatMessage::user(input.clone()));
        }
        messages
    }

    /// One model call, its usage counted in the prompt's.
    async fn ask(&mut self, request: ModelRequest) -> Result<ModelResponse, ProviderError> {
        let reply = self
            .options
            .services
            .completion
            .complete_text(request)
            .await?;
        self.recorder.add_usage(&reply.usage);
        Ok(reply)
    }

    async fn prepared(&mut self) -> anyhow::Result<(Prepared, Vec<ToolBinding>)> {
        if let Some(prepared) = &self.prepared {
            return Ok(prepared.clone());
        }
        let prompt = self.recorder.prompt();
        let prepared = self
            .options
            .services
            .prepare(
                &prompt.user_id,
                &prompt.id,
                &prompt.mode,
                &self.options.state,
            )
            .await?;
        let bindings = crate::names::bindings(
            prepared
                .tools
                .iter()
                .map(|tool| crate::names::ToolNames::of(tool.as_ref())),
        );
        self.prepared = Some((prepared.clone(), bindings.clone()));
        Ok((prepared, bindings))
    }

    /// The id of the call waiting for a decision, if the prompt is waiting.
    fn waiting_call(&mut self) -> Option<&mut BatchCall> {
        if self.recorder.prompt().state != PromptState::WaitingForApproval {
            return None;
        }
        self.active
            .as_mut()?
            .batch
            .as_mut()?
            .calls
            .iter_mut()
            .find(|call| matches!(call.decision, Decision::Ask(_)))
    }
}

/// Why a replayed request was not answered from the journal.
enum ReplayError {
    Executor(ExecutorError),
    /// The script did something else than before; the text says what.
    Diverged(String),
}

impl CodeExecutor {
    /// Ends a replayed script that diverged from its journal: the model reads why. Calls of
    /// the journal it did not reach, and that were unfinished, get an error result.
    async fn stop_diverged(
        &mut self,
        active: &mut ActiveExecution,
        message: String,
    ) -> Result<Progress, ExecutorError> {
        tracing::warn!(prompt = %self.recorder.prompt().id, %message, "a resumed script diverged");
        active.replay = None;
        // The execution's calls left unfinished: those the replay did not reach, and any of
        // the request it stopped at.
        let unreached: Vec<String> = self
            .calls_of(&active.code_output_id)
            .filter(|call| call.result.is_pending())
            .map(|call| call.id.clone())
            .collect();
        for id in unreached {
            self.recorder
                .finish_tool(
                    &id,
                    ToolResult::Error {
                        error: agentic_core::TAKEN_OVER_TOOL_ERROR.to_owned(),
                    },
                )
                .await?;
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
        })))
    }

    /// A decision about a prompt that waited across a restart: its script is replayed up to
    /// the call it waits at. `Some` when the prompt went on without it (the script diverged
    /// from its journal), with the prompt as it ended.
    async fn restore_waiting(
        &mut self,
        tool_call_id: &str,
    ) -> Result<Option<Prompt>, ExecutorError> {
        if self.active.is_some() || self.resumed_from.is_none() {
            return Ok(None);
        }
        if self
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
        let Some(mut active) = self.active.take() else {
            return Err(ExecutorError::NotWaiting(tool_call_id.to_owned()));
        };
        let span = active.span.clone();
        match self
            .continue_execution(&mut active, &prepared, &bindings)
            .instrument(span)
            .await?
        {
            Progress::Paused => {
                self.active = Some(active);
                Ok(None)
            }
            Progress::Finished(outcome) => {
                // The waiting call was not reached: the prompt runs on without the decision.
                self.recorder.resume().await?;
                let done = self.finish_iteration(active, *outcome).await?;
                if done {
                    return Ok(Some(self.recorder.prompt().clone()));
                }
                Ok(Some(self.drive().await?))
            }
        }
    }
}

/// Code without its comments and blank space, for telling whether two replies are the same.
/// Only compared, never run: a `//` inside a string literal is cut too, which at worst makes two
/// codes that differ only there count as the same.
fn code_shape(code: &str) -> String {
    let mut without_blocks = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(start) = rest.find("/*") {
        without_blocks.push_str(&rest[..start]);
        rest = rest[start + 2..]
            .find("*/")
            .map_or("", |end| &rest[start + 2 + end + 2..]);
    }
    without_blocks.push_str(rest);
    without_blocks
        .lines()
        .map(|line| line.split("//").next().unwrap_or_default().trim())
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

fn new_call_id() -> String {
    format!("call_{}", uuid::Uuid::new_v4().simple())
}

/// Code mode as the host of its script: tool calls wait in a batch, so that calls needing
/// approval can hold the script while a person decides.
struct ModeHost<'a> {
    executor: &'a mut CodeExecutor,
    /// The execution's `code.execute` output id, for its journal entries.
    execution: &'a str,
    batch: &'a mut Option<Batch>,
    prepared: &'a Prepared,
    bindings: &'a [ToolBinding],
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

#[async_trait]
impl PromptExecutor for CodeExecutor {
    fn prompt(&self) -> &Prompt {
        self.recorder.prompt()
    }

    fn state(&self) -> &State {
        &self.options.state
    }

    async fn run(&mut self) -> Result<Prompt, ExecutorError> {
        match self.recorder.prompt().state {
            PromptState::Running => self.drive().await,
            other => Err(ExecutorError::NotRunnable(other.as_str())),
        }
    }

    async fn approve(&mut self, tool_call_id: &str) -> Result<Prompt, ExecutorError> {
        if let Some(prompt) = self.restore_waiting(tool_call_id).await? {
            return Ok(prompt);
        }
        let Some(call) = self.waiting_call().filter(|call| call.id == tool_call_id) else {
            return Err(ExecutorError::NotWaiting(tool_call_id.to_owned()));
        };
        call.decision = Decision::Approved;
        self.recorder.resume().await?;
        // A call's time is its run, as in classic mode, not the time a person took to decide.
        self.recorder.mark_tool_started(tool_call_id);
        if let Some(active) = self.active.as_mut() {
            active.execution.resume_clock().await;
        }
        self.drive().await
    }

    async fn reject(
        &mut self,
        tool_call_id: &str,
        reason: Option<&str>,
    ) -> Result<Prompt, ExecutorError> {
        if let Some(prompt) = self.restore_waiting(tool_call_id).await? {
            return Ok(prompt);
        }
        let Some(call) = self.waiting_call().filter(|call| call.id == tool_call_id) else {
            return Err(ExecutorError::NotWaiting(tool_call_id.to_owned()));
        };
        let error = agentic_core::mode::rejection_error(reason);
        call.decision = Decision::Rejected(error.clone());
        self.recorder.resume().await?;
        self.recorder
            .finish_tool(tool_call_id, ToolResult::Error { error })
            .await?;
        if let Some(active) = self.active.as_mut() {
            active.execution.resume_clock().await;
        }
        self.drive().await
    }
}

/// The JSON value in a model's answer to `llmJson()`: the whole answer, else the first fenced
/// block that parses (small models fence JSON as ```json however they are asked), else the
/// span from the first `{` or `[` to the last `}` or `]` (a sentence around the value).
fn json_answer(text: &str) -> Result<Value, serde_json::Error> {
    let text = text.trim();
    let whole = serde_json::from_str::<Value>(text);
    if whole.is_ok() {
        return whole;
    }
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let body_start = after.find('\n').map_or(after.len(), |index| index + 1);
        let body = &after[body_start..];
        let Some(close) = body.find("```") else { break };
        if let Ok(value) = serde_json::from_str::<Value>(body[..close].trim()) {
            return Ok(value);
        }
        rest = &body[close + 3..];
    }
    let start = text.find(['{', '[']);
    let end = text.rfind(['}', ']']);
    if let (Some(start), Some(end)) = (start, end)
        && start < end
        && let Ok(value) = serde_json::from_str::<Value>(&text[start..=end])
    {
        return Ok(value);
    }
    whole
}

/// What the last run of a program met, for the notice about a copy of it.
enum LastRun {
    Failed(String),
    /// It ran, with a note on values it left empty.
    Noted(String),
}

/// Whether a runtime error came from reading a value that is not there: a field of
/// `undefined` or `null`.
fn reads_a_missing_value(message: &str) -> bool {
    message.starts_with("TypeError") && (message.contains("undefined") || message.contains("null"))
}

fn with_logs(mut error: String, logs: &[String]) -> String {
    if !logs.is_empty() {
        error.push_str("\nLogs:\n");
        error.push_str(&logs.join("\n"));
    }
    error
}

/// The answer a `response` value shows: a string as written, a number or flag as text, and
/// anything else (models write `{response: {…}}` too) as indented JSON.
fn response_text(response: &Value) -> Option<String> {
    match response {
        Value::Null => None,
        Value::String(text) => Some(text.clone()),
        Value::Number(_) | Value::Bool(_) => Some(response.to_string()),
        _ => serde_json::to_string_pretty(response).ok(),
    }
}

/// Whether an execution was a reply not run, its error starting with `prefix`.
fn not_run(tool: &ToolOutput, prefix: &str) -> bool {
    matches!(&tool.result, ToolResult::Error { error } if error.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::code_shape;

    #[test]
    fn json_answers_are_read_through_fences_and_sentences() {
        assert_eq!(super::json_answer(" [1, 2] ").unwrap(), json!([1, 2]));
        assert_eq!(
            super::json_answer("```json\n{\"days\": 3}\n```").unwrap(),
            json!({ "days": 3 })
        );
        assert_eq!(
            super::json_answer("Here it is:\n```\nnot json\n```\n```json\n[true]\n```").unwrap(),
            json!([true])
        );
        assert_eq!(
            super::json_answer("The answer is {\"a\": 1}.").unwrap(),
            json!({ "a": 1 })
        );
        assert!(super::json_answer("no JSON here").is_err());
        assert!(super::json_answer("```json\n{broken\n```").is_err());
    }

    #[test]
    fn code_shape_ignores_comments_and_blank_space() {
        assert_eq!(
            code_shape("const now = new Date();\nconsole.log(now); // 2023-12-28T14:57:59Z\n"),
            code_shape(
                "  const now = new Date();\n\n/* the time */ console.log(now); // 2026-11-22\n"
            ),
        );
        assert_ne!(code_shape("f(1)"), code_shape("f(2)"));
        assert_eq!(code_shape("a /* open"), "a");
    }
}
