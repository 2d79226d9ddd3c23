//! One execution's lifecycle: a program starts in the sandbox, is fed its hosts' answers
//! until it finishes or waits for a person, and its outcome is recorded (or sent back to
//! the model with what was wrong).

use agentic_core::tool::cap_text;
use agentic_core::{ExecutorError, Prepared, PromptState, ToolResult};
use serde_json::{Map, Value, json};
use tracing::Instrument as _;

use super::batch::{Decision, ModeHost};
use super::resume::ReplayError;
use super::{ActiveExecution, CodeExecutor, Progress};
use crate::journal::{Entry, Replay};
use crate::prompt::CODE_EXECUTE;
use crate::protocol::{
    CodePath, Determinism, ExecuteRequest, ExecutionOutcome, ScriptErrorKind, ToolBinding,
};
use crate::rules::Notice;
use crate::sandbox::SandboxEvent;

impl CodeExecutor {
    /// Starts a script in the sandbox, inside its `execute_code` span (the parent of its tool
    /// and `llm()` calls), as the active execution; `replay` when it resumes from a journal.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn launch(
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
                Some(&self.base.options.prompt.user_id),
                ExecuteRequest {
                    code,
                    tools: bindings.to_vec(),
                    input: None,
                    store: store.clone(),
                    limits: self.shared.sandbox.config().script_limits(),
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

    /// Runs `active` on, inside its span, until it waits for a person (it stays the active
    /// execution: `None`) or finishes (with its outcome, for `finish_iteration`).
    pub(super) async fn run_active(
        &mut self,
        mut active: ActiveExecution,
        prepared: &Prepared,
        bindings: &[ToolBinding],
    ) -> Result<Option<(ActiveExecution, ExecutionOutcome)>, ExecutorError> {
        let span = active.span.clone();
        match self
            .continue_execution(&mut active, prepared, bindings)
            .instrument(span)
            .await?
        {
            Progress::Paused => {
                self.active = Some(active);
                Ok(None)
            }
            Progress::Finished(outcome) => Ok(Some((active, *outcome))),
        }
    }

    /// Feeds the script until it finishes or waits for a person.
    pub(super) async fn continue_execution(
        &mut self,
        active: &mut ActiveExecution,
        prepared: &Prepared,
        bindings: &[ToolBinding],
    ) -> Result<Progress, ExecutorError> {
        loop {
            if let Some(batch) = &active.batch {
                // The calls of one request that need a person are put to them together.
                let asking: Vec<(String, String)> = batch
                    .calls
                    .iter()
                    .filter_map(|call| match &call.decision {
                        Decision::Ask(reason) => Some((call.id.clone(), reason.clone())),
                        _ => None,
                    })
                    .collect();
                if let Some((first, _)) = asking.first() {
                    active.execution.pause_clock();
                    // A restored script reaches the calls it waited at: already asked.
                    let asked = self.base.recorder.prompt().state
                        == PromptState::WaitingForApproval
                        && self
                            .base
                            .recorder
                            .prompt()
                            .tool_output(first)
                            .is_some_and(|tool| tool.result.is_awaiting_approval());
                    if !asked {
                        self.base.recorder.request_approvals(&asking).await?;
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
                    self.base.recorder.push_unstreamed_text(&text).await?;
                }
                SandboxEvent::Log(text) => active.logs.push(text),
                SandboxEvent::Finished(outcome) => return Ok(Progress::Finished(outcome)),
            }
        }
    }

    /// Records an execution's outcome. True when the turn is over.
    pub(super) async fn finish_iteration(
        &mut self,
        active: ActiveExecution,
        outcome: ExecutionOutcome,
        prepared: &Prepared,
    ) -> Result<bool, ExecutorError> {
        if !outcome.clock.is_empty() {
            self.journal(Entry::Clock {
                execution: active.code_output_id.clone(),
                values: outcome.clock.clone(),
            })
            .await?;
        }
        if outcome.store != active.start_store {
            self.journal(Entry::End {
                execution: active.code_output_id.clone(),
                store: outcome.store.clone(),
            })
            .await?;
        }
        self.store = outcome.store;
        // A bare reply that does not parse and does not look like code is prose, not an
        // error: the mode decides that, not the sandbox.
        let prose = active.path == CodePath::Plain
            && matches!(&outcome.result, Err(error) if error.kind == ScriptErrorKind::Syntax)
            && self
                .base
                .recorder
                .prompt()
                .tool_output(&active.code_output_id)
                .and_then(|tool| tool.input.get("code").and_then(Value::as_str))
                .is_some_and(crate::prose::looks_like_prose);
        let path = if prose { CodePath::Prose } else { active.path };
        if let Err(error) = &outcome.result
            && !prose
        {
            agentic_core::telemetry::record_error(
                &active.span,
                &format!("{:?}", error.kind),
                &error.message,
            );
        }
        if path == CodePath::Prose
            && self.timeline().refusals() == 0
            && self
                .timeline()
                .previous_execution_failed(&active.code_output_id)
        {
            // "The error indicates that…": small models explain a failure to no one instead of
            // fixing it. Told once; a second prose reply is the answer.
            let error = crate::rules::not_a_program::prose_after_failure();
            return self.send_back(&active, Notice::NotAProgram, error).await;
        }
        if path == CodePath::Prose {
            let mut answer = self
                .base
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
            // "The file sizes.txt is created…", and no call wrote it (`rules::unwritten`).
            if let Some(error) = self.unwritten_notice(prepared, &[]) {
                return self.send_back(&active, Notice::Unwritten, error).await;
            }
            // "Done." after a program that logged the count: what the program found has not
            // been shown, and the prose does not say it. Told once; after that the prose is
            // the answer with what the program found beneath it, so it is never lost.
            if !self.timeline().shown_text()
                && let Some(found) = self.timeline().unshown_finding(&active.code_output_id)
                && !crate::rules::unsaid::says_any(&answer, &found, self.timeline().asked())
            {
                if self.timeline().count(Notice::Unsaid) == 0 {
                    let error = crate::rules::unsaid::notice(&found);
                    return self.send_back(&active, Notice::Unsaid, error).await;
                }
                answer = format!("{}\n\n{}", answer.trim_end(), cap_text(&found, 4_000));
            }
            self.base
                .recorder
                .finish_tool(
                    &active.code_output_id,
                    ToolResult::Success {
                        output: json!({ "path": path }),
                    },
                )
                .await?;
            self.base.recorder.push_unstreamed_text(&answer).await?;
            self.base.recorder.complete().await?;
            return Ok(true);
        }
        if let Err(error) = &outcome.result
            && error.kind == ScriptErrorKind::Unavailable
        {
            // The model cannot fix a missing sandbox; asking it again only spends tokens.
            self.base
                .recorder
                .finish_tool(
                    &active.code_output_id,
                    ToolResult::failed(error.message.clone()),
                )
                .await?;
            self.base
                .recorder
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
            && crate::rules::nothing_shown::ends_unseen(
                outcome.done,
                response.is_some(),
                self.timeline().shown_text(),
            )
            && self.timeline().count(Notice::NothingShown) == 0
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
            return self.send_back(&active, Notice::NothingShown, error).await;
        }
        // An answer while the file the user asked for was never written: the answer would
        // read as success (`rules::unwritten`). Told once.
        if outcome.result.is_ok()
            && outcome.done
            && let Some(error) = self.unwritten_notice(prepared, &[])
        {
            return self.send_back(&active, Notice::Unwritten, error).await;
        }
        // A program that did nothing (`rules::did_nothing`): it returned no value, or one it
        // is made of alone (`3`: a guess, not a finding), and logged and showed nothing.
        if outcome.result.is_ok()
            && !outcome.done
            && active.logs.is_empty()
            && !self.timeline().showed_text(&active.code_output_id)
        {
            let code = self
                .base
                .recorder
                .prompt()
                .tool_output(&active.code_output_id)
                .and_then(|tool| tool.input.get("code").and_then(Value::as_str))
                .unwrap_or_default()
                .to_owned();
            let called = self.timeline().calls_of(&active.code_output_id).count();
            let notice = if matches!(outcome.result, Ok(Value::Null)) {
                crate::rules::did_nothing::notice(&code, called)
            } else if called == 0 {
                crate::rules::did_nothing::lone_value(&code)
            } else {
                None
            };
            if let Some(error) = notice {
                return self.send_back(&active, Notice::DidNothing, error).await;
            }
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
                if broken && let Some(note) = self.timeline().got_note(&active.code_output_id) {
                    output["note"] = Value::String(note);
                }
                if let Some(complete) = &outcome.complete {
                    output["complete"] = complete.clone();
                }
                self.base
                    .recorder
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
                    let got = self.timeline().what_it_got(&active.code_output_id);
                    let end = text.find('\n').unwrap_or(text.len());
                    text.insert_str(end, &got);
                }
                if let Some(note) = self
                    .timeline()
                    .declared_earlier(&error.message, &active.code_output_id)
                {
                    text.push('\n');
                    text.push_str(&note);
                } else if let Some(note) = self
                    .base
                    .recorder
                    .prompt()
                    .tool_output(&active.code_output_id)
                    .and_then(|tool| tool.input.get("code").and_then(Value::as_str))
                    .and_then(|code| {
                        crate::rules::undeclared_call::note(&error.message, code)
                            .or_else(|| crate::rules::parameter_name::note(&error.message, code))
                    })
                {
                    text.push('\n');
                    text.push_str(&note);
                }
                self.base
                    .recorder
                    .finish_tool(&active.code_output_id, ToolResult::failed(text))
                    .await?;
            }
        }
        if let Some(response) = response {
            self.base.recorder.push_unstreamed_text(&response).await?;
        }
        if outcome.done {
            if self.timeline().shown_text() {
                self.base.recorder.complete().await?;
            } else {
                // `done()` alone again after `nothing_shown` told the model to answer: a turn
                // that "completed" with no answer would be a silent failure.
                self.base
                    .recorder
                    .fail(crate::rules::nothing_shown::NO_ANSWER)
                    .await?;
            }
            return Ok(true);
        }
        Ok(false)
    }

    /// Ends the iteration with `notice`'s `error` (and the program's logs): the model is told
    /// what was wrong and writes the next program. The turn goes on.
    pub(super) async fn send_back(
        &mut self,
        active: &ActiveExecution,
        notice: Notice,
        error: String,
    ) -> Result<bool, ExecutorError> {
        self.base
            .recorder
            .finish_tool(
                &active.code_output_id,
                notice.result(with_logs(error, &active.logs)),
            )
            .await?;
        Ok(false)
    }
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
