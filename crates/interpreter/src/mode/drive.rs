//! The loop of a turn: ask the model, decide what to do with its reply (run it, refuse it,
//! stop a copy), run the program, and go on until an answer or the iteration limit.

use agentic_core::tool::cap_text;
use agentic_core::{ChatMessage, ExecutorError, ModelRequest, Prompt};
use serde_json::json;

use super::candidates::Again;
use super::plan::Launch;
use super::request::Purpose;
use super::timeline::LastRun;
use super::{CodeExecutor, new_call_id};
use crate::history::history_messages;
use crate::journal::Entry;
use crate::prompt::{CODE_EXECUTE, extract_code};
use crate::protocol::Determinism;
use crate::rules::Notice;

impl CodeExecutor {
    pub(super) async fn drive(&mut self) -> Result<Prompt, ExecutorError> {
        let (prepared, bindings) = match self.prepared().await {
            Ok(prepared) => prepared,
            Err(error) => return self.base.fail_preparing(&error).await,
        };
        if self.active.is_none() {
            self.restore(&bindings).await?;
        }
        if self.waits_at_plan() {
            return Ok(self.base.recorder.prompt().clone());
        }
        loop {
            if let Some(active) = self.active.take() {
                let Some((active, outcome)) = self.run_active(active, &prepared, &bindings).await?
                else {
                    return Ok(self.base.recorder.prompt().clone());
                };
                if self.finish_iteration(active, outcome, &prepared).await? {
                    return Ok(self.base.recorder.prompt().clone());
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
                self.base.recorder.push_unstreamed_text(&message).await?;
                self.base.recorder.complete().await?;
                return Ok(self.base.recorder.prompt().clone());
            }
            self.iterations += 1;
            let request = self.request(&prepared, &bindings);
            let checked = self.checks_programs().then(|| request.clone());
            let reply = match self.ask(request, Purpose::Program).await {
                Ok(reply) => reply,
                Err(error) => {
                    self.base.recorder.fail(&error.to_string()).await?;
                    return Ok(self.base.recorder.prompt().clone());
                }
            };
            // Shown and kept; code mode makes no native tool calls, so no provider needs it back.
            self.base.recorder.push_reasoning(&reply.reasoning).await?;
            let last_error = self.timeline().last_execution_error();
            if let Some(hint) =
                crate::rules::not_a_program::refusal(&reply.text, last_error.as_deref(), &bindings)
            {
                // Told once what was wrong; a second such reply is asked afresh (when nothing
                // was fetched to answer from), then gets the plain-answer path.
                let told = self.timeline().refusals();
                let afresh = told > 0 && self.timeline().may_ask_afresh();
                let result = if afresh {
                    Notice::Afresh
                        .result(format!("{} ({hint})", crate::rules::afresh::ASKED_AFRESH))
                } else {
                    Notice::NotAProgram.result(hint)
                };
                let id = new_call_id();
                self.base
                    .recorder
                    .push_finished_tool(
                        &id,
                        CODE_EXECUTE,
                        json!({ "code": reply.text.trim() }),
                        result,
                    )
                    .await?;
                if told == 0 || afresh {
                    continue;
                }
                let answered = self
                    .answer_without_code("you kept replying without code")
                    .await?;
                if !answered {
                    self.base
                        .recorder
                        .push_unstreamed_text("Stopped: the model did not reply with code.")
                        .await?;
                }
                self.base.recorder.complete().await?;
                return Ok(self.base.recorder.prompt().clone());
            }
            let (mut code, mut path) = extract_code(&reply.text);
            if let Some(request) = checked {
                // A program that would fail is sampled again first; so is a copy of an earlier
                // program (`rules::repeated`), which would give what it gave.
                let copy = self.copy_of_earlier(&code).map(|_| {
                    match self.timeline().last_run_of(&code, "") {
                        Some((_, LastRun::Failed(_))) => Again::AfterFailure,
                        _ => Again::AfterRun,
                    }
                });
                let chosen = self
                    .checked_program(code, path, copy, &request, &prepared, &bindings)
                    .await?;
                self.base.recorder.push_reasoning(&chosen.reasoning).await?;
                (code, path) = (chosen.code, chosen.path);
            }
            let earlier = self.copy_of_earlier(&code);
            let code_output_id = new_call_id();
            self.base
                .recorder
                .start_tool(
                    &code_output_id,
                    CODE_EXECUTE,
                    json!({ "code": code }),
                    "running",
                )
                .await?;
            if earlier.is_some()
                && self.timeline().count(Notice::Repeated) == 0
                && let Some((number, last_run)) =
                    self.timeline().last_run_of(&code, &code_output_id)
            {
                // The same program again, after it failed (or ran with a note on values it left
                // empty): told once what its last run met, as small models often copy their
                // code back unchanged past a long error.
                let error = match last_run {
                    LastRun::Failed(error) => crate::rules::repeated::after_failure(number, &error),
                    LastRun::Noted(note) => crate::rules::repeated::after_note(number, &note),
                };
                self.base
                    .recorder
                    .finish_tool(&code_output_id, Notice::Repeated.result(error))
                    .await?;
                continue;
            }
            if let Some(earlier) = earlier
                && self.timeline().may_ask_afresh()
            {
                // Stuck on a program that failed, with nothing fetched yet to answer from: a
                // plain answer could only guess. The model is asked once more in a request
                // without its earlier programs, which a small model otherwise copies back.
                self.base
                    .recorder
                    .finish_tool(
                        &code_output_id,
                        Notice::Afresh.result(format!(
                            "{} (the same code as iteration {earlier})",
                            crate::rules::afresh::ASKED_AFRESH
                        )),
                    )
                    .await?;
                continue;
            }
            if let Some(earlier) = earlier {
                // A model that sends the same code again is stuck (greedy decoding of a small
                // model copies its last turn): running it would give the same result, and
                // asking again would give the same code, so it is asked for a plain answer.
                self.base
                    .recorder
                    .finish_tool(
                        &code_output_id,
                        Notice::Stuck.result(format!(
                            "not run: the same code as iteration {earlier}; asked for a \
                                 plain-text answer instead"
                        )),
                    )
                    .await?;
                let answered = self
                    .answer_without_code(&format!(
                        "you sent the program of iteration {earlier} again"
                    ))
                    .await?;
                if !answered {
                    self.base
                        .recorder
                        .push_unstreamed_text(
                            "Stopped: the model repeated its code without finishing.",
                        )
                        .await?;
                }
                self.base.recorder.complete().await?;
                return Ok(self.base.recorder.prompt().clone());
            }
            // What the script reads besides its code and its tools' answers is journaled
            // first, so that another process can replay it.
            // A replayed run reads the seed and clock its recording read.
            let (seed, clock) = self.recorded_determinism();
            let seed = seed.unwrap_or_else(|| fastrand::u64(..));
            self.journal(Entry::Start {
                execution: code_output_id.clone(),
                path,
                seed,
                store: self.store.clone(),
            })
            .await?;
            let determinism = Determinism {
                seed: Some(seed),
                clock,
            };
            let launch = Launch {
                code_output_id,
                code,
                path,
                store: self.store.clone(),
                determinism,
            };
            // A new program: nothing of the last one's plan or dry run carries over.
            self.plan = None;
            self.dry_llm.clear();
            if self.plans_first(&launch.code, &prepared, &bindings)
                && self.plan(&launch, &prepared, &bindings).await?
            {
                // The plan waits for a person; the program runs once it is decided.
                return Ok(self.base.recorder.prompt().clone());
            }
            self.start_program(launch).await;
        }
    }

    /// The iteration whose program `code` copies, when running it again would give what it
    /// gave. A copy after a failure that may pass by itself (a 503, a timeout) is not one the
    /// first time: a flaky service breaks that assumption, so such a program runs once more.
    fn copy_of_earlier(&self, code: &str) -> Option<usize> {
        let earlier = self.timeline().earlier_iteration_with(code)?;
        let rerun = self.timeline().iteration_met_transient_failure(earlier)
            && self.timeline().executions_of(code).count() == 1;
        (!rerun).then_some(earlier)
    }

    /// The seed and clock readings of the recorded execution this one replays: the n-th
    /// execution of a replayed run takes the n-th of its recording.
    fn recorded_determinism(&self) -> (Option<u64>, Vec<i64>) {
        let Some(replay) = &self.base.options.prompt.replay else {
            return (None, Vec::new());
        };
        let entries: Vec<Entry> = replay
            .journal()
            .iter()
            .filter_map(|entry| serde_json::from_value(entry.clone()).ok())
            .collect();
        let nth = replay.take_turn("code.execute");
        let Some(execution) = entries
            .iter()
            .filter_map(|entry| match entry {
                Entry::Start { execution, .. } => Some(execution.as_str()),
                _ => None,
            })
            .nth(nth)
        else {
            return (None, Vec::new());
        };
        let record = crate::journal::record_of(&entries, execution);
        (record.seed, record.clock)
    }

    /// Asks the model for a plain-text answer to the user's message, without code, and records
    /// it as a text output. `why` says why code mode gave up; the model sees every program and
    /// result so far. False when no answer came (the call failed or the reply was empty).
    pub(super) async fn answer_without_code(&mut self, why: &str) -> Result<bool, ExecutorError> {
        // A fresh request: the user's message and what the tools returned, without the
        // programs and their errors. Shown the whole turn, small models paraphrased the last
        // error instead of answering from the data they had fetched.
        let prompt = self.base.recorder.prompt();
        let digest = crate::prompt::results_digest(&prompt.output);
        // The last error a program ran into, not a notice about a reply that was not run.
        let last_error = self
            .timeline()
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
        messages.extend(history_messages(&self.base.options.prompt.history));
        messages.push(ChatMessage::user(message));
        let request = ModelRequest::new(prompt.model, messages);
        let reply = match self.ask(request, Purpose::Answer).await {
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
        self.base.recorder.push_reasoning(&reply.reasoning).await?;
        self.base.recorder.push_unstreamed_text(answer).await?;
        Ok(true)
    }
}
