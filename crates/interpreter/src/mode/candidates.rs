//! Programs checked before they run: each program is dry-run first (`crate::dry_run`:
//! read-only tools run, every other call gets a placeholder). When it would fail, the model
//! is asked the same request again, warmer and with other seeds, for up to `candidates` (a
//! top-level setting) more programs, each dry-run in turn; the first that gets through runs.
//! A model that cannot write the right program at its first pick often writes it at a later
//! one, and a program that fails where the dry run can see it never runs.
//!
//! A program fails its check when it copies an earlier program of the turn (not run again:
//! `rules::repeated`), when its dry run throws, ends with `done()` alone in a turn that
//! has shown the user nothing, or does nothing at all: what the real run would hold back. It
//! also fails when it answers from reads that all came back empty (only empty lists, or
//! errors): a sample that finds something is preferred, and when none does, the program runs
//! as written (an empty answer may be the right one). The same holds for a program that changes
//! nothing and answers only with words written out in it (`rules::fixed_answer`), and for a
//! program that logs or returns what a string search that missed gave (`engine/silent.rs`:
//! the search had it in another case, or further in; the sandbox refuses an answer after such
//! a search but only notes it on a log line).
//! A sample is held to more than the model's own program: one with a string search that was
//! given several texts and matched none of them (`line.endsWith(" ✔️")` over checklist lines
//! that say `- [x]`) does not take its place, as it may answer without a word where the
//! model's own program fails loudly and is told what the data writes (checklist-left, tuning,
//! round 36).
//! Only what the real run would meet counts: a dry run that looked inside a placeholder, met
//! a read that may pass when tried again, or made an `llm()` request (not asked while
//! checking) proves nothing, and the program runs as written. Such a sample gets through in
//! place of a program that would fail, but not in place of one whose answer the check only
//! likes less: a program that answers "What is the capital of France?" with
//! `done("Paris")` (written out in it) is not replaced by a sample that asks `llmJson()`,
//! whose answer the check cannot see and which may fail. A reply in prose is not
//! checked (the mode may take it as the answer). When none of the candidates gets through,
//! the model's own program runs, and its error is fed back as before, unless a sample got
//! further: its failure would go back to the model too (it throws, ends with `done()` alone
//! unseen, or does nothing), after more distinct reads that gave data than the model's own
//! program made. Then the sample that read most (the first of those) runs in its place, so
//! the model is told the error of a program that reached the data, with what its reads gave,
//! rather than that of one that never did: `fs.list` of a CSV file, where a sample had read
//! it and then failed on its header line.
//!
//! The verdicts are journaled (`Entry::Checked`): a replay of the prompt takes them instead
//! of checking again, as the reads a check made are not in its recording.
//!
//! Measured (eval, embedded Qwen2.5-Coder-1.5B, `docs/benchmarks.md`): checked only after a
//! failure (round 16), tuning 13/17 and held-out 2/9 with and without it; every program
//! (round 18), see there; an answer from empty reads failing the check (round 19): neutral,
//! tuning 14/17 and held-out 3/9 with and without it; a failing sample that got further run
//! in place of the model's own program (round 27): tuning 20 → 20/24 (misplaced-report passes
//! where it fired), held-out 5/12 with and without it, task for task, on the same day.

use agentic_core::{ModelRequest, Prepared, Reasoning};

use super::CodeExecutor;
use super::request::Purpose;
use super::votes::{Answer, Voted};
use crate::dry_run::{DryHost, DryProgram, plan_program};
use crate::journal::Entry;
use crate::prompt::extract_code;
use crate::protocol::{CodePath, Determinism, HostReply, ToolBinding};

/// What a replay's journal says of its next check: the verdicts, the sample that ran for
/// getting further, the vote, and the review.
type RecordedCheck = (
    std::collections::VecDeque<bool>,
    Option<usize>,
    Option<Voted>,
    Option<bool>,
);

/// A sample drawn for the same request: a program to check, a reply in prose, one passed
/// over (a refusal, a program tried already, one that changes what the model's own does not),
/// or none, as the model could not be asked.
pub(super) enum Drawn {
    Program(Checked),
    Prose(Checked),
    Skipped,
    Unasked,
}

/// The text in `value`: itself when it is a string, else the strings inside it.
fn strings(value: &serde_json::Value) -> Vec<String> {
    match value {
        serde_json::Value::String(text) => vec![text.clone()],
        serde_json::Value::Array(items) => items.iter().flat_map(strings).collect(),
        serde_json::Value::Object(fields) => fields.values().flat_map(strings).collect(),
        _ => Vec::new(),
    }
}

/// A program the model wrote again, as an earlier one of the turn: whether that one failed
/// (what it changes may not have been changed) or not (it ran, and has changed it, or it was
/// not run: refused, or held back by a rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Again {
    AfterFailure,
    AfterRun,
}

/// The program a check let through: its code, how it was taken, and the reasoning of the
/// reply it came from when that was a sample.
pub(super) struct Checked {
    pub(super) code: String,
    pub(super) path: CodePath,
    pub(super) reasoning: Vec<Reasoning>,
}

impl CodeExecutor {
    /// Whether the program about to run is checked first: candidates are on and the model can
    /// give another answer to the same request.
    pub(super) fn checks_programs(&self) -> bool {
        let services = &self.base.options.services;
        services.limits().candidates > 0 && services.completion.samples()
    }

    /// The program to run in place of `code` (written for `request`): `code` itself when its
    /// check passes, else the first sampled candidate whose check does, else `code`. A `copy`
    /// of an earlier program fails its check without a dry run: it would give what it gave.
    /// A sample that changes what `code` would not change is skipped
    /// (`rules::sampled_changes`).
    pub(super) async fn checked_program(
        &mut self,
        code: String,
        path: CodePath,
        copy: Option<Again>,
        request: &ModelRequest,
        prepared: &Prepared,
        bindings: &[ToolBinding],
    ) -> Result<Checked, agentic_core::ExecutorError> {
        let own = Checked {
            code,
            path,
            reasoning: Vec::new(),
        };
        if own.path == CodePath::Plain && crate::prose::looks_like_prose(&own.code) {
            return Ok(own);
        }
        let (mut recorded, recorded_further, recorded_vote, recorded_review) = match self
            .recorded_verdicts()
        {
            Some((passed, further, voted, reviewed)) => (Some(passed), further, voted, reviewed),
            None => (None, None, None, None),
        };
        self.checks += 1;
        let mut passed = Vec::new();
        let (first, answer) = if copy.is_some() {
            // Journaled as a verdict like any other, so a replay pops it in its place.
            recorded
                .as_mut()
                .and_then(std::collections::VecDeque::pop_front);
            // Not run: the model is told it wrote the same program again.
            let failure = Failure {
                told: true,
                data_reads: 0,
            };
            (Some(failure), None)
        } else {
            self.verdict(&mut recorded, &own.code, prepared, bindings, false, false)
                .await
        };
        passed.push(first.is_none());
        // A program that passes and computes its answer from data the model has not seen is
        // written again with that data in view (`review.rs`).
        if first.is_none() && self.reviews(&own.code, answer.as_ref(), recorded_review) {
            let (program, reviewed) = self
                .review(
                    own,
                    answer.as_ref(),
                    request,
                    (prepared, bindings),
                    recorded_review,
                )
                .await;
            self.journal(Entry::Checked {
                passed,
                further: None,
                voted: None,
                reviewed: Some(reviewed),
            })
            .await?;
            return Ok(program);
        }
        // A program that passes, and whose answer the dry run saw it compute, is voted on
        // (`votes.rs`); a replay holds the vote as it was journaled.
        let votes_on = first.is_none()
            && self.votes() > 0
            && (recorded_vote.is_some() || (answer.is_some() && super::votes::computes(&own.code)));
        if votes_on {
            let answer = answer.unwrap_or_default();
            let (program, voted) = self
                .vote(
                    own,
                    &answer,
                    request,
                    prepared,
                    bindings,
                    &mut recorded,
                    recorded_vote,
                    &mut passed,
                )
                .await;
            self.journal(Entry::Checked {
                passed,
                further: None,
                voted,
                reviewed: None,
            })
            .await?;
            return Ok(program);
        }
        let mut chosen = None;
        let mut chosen_answer = None;
        // A failing sample whose failure goes back to the model, after more reads that gave
        // data than the model's own program made: it runs in its place when none passes.
        let mut further: Option<(usize, Checked)> = None;
        let mut best = first.map_or(0, |failure| failure.data_reads);
        // A program the check only likes less (its answer ends the turn) gives way to a
        // sample the check has seen through, not to one it cannot judge (`llm()` asked, a
        // placeholder looked inside): that one may fail where this one answers.
        let proof_needed = first.is_some_and(|failure| !failure.told);
        if first.is_some() {
            // What a sample may change: what the model's own program changes, unless that is
            // a copy of a program that ran, whose changes are made.
            let allowed = if copy == Some(Again::AfterRun) {
                Vec::new()
            } else {
                crate::rules::sampled_changes::changing_tools(&own.code, prepared, bindings)
            };
            let mut tried = vec![super::timeline::code_shape(&own.code)];
            for attempt in 1..=self.base.options.services.limits().candidates {
                let program = match self
                    .draw(request, attempt, (prepared, bindings), &mut tried, &allowed)
                    .await
                {
                    Drawn::Program(program) => program,
                    Drawn::Skipped => continue,
                    Drawn::Unasked => break,
                    Drawn::Prose(prose) => {
                        // A sample in prose that says what the last program found, which the
                        // user has not seen, is the answer the mode would take from the
                        // model's own reply. Decided from the turn alone, so a replay decides
                        // it the same way and no verdict is journaled for it.
                        if !self.timeline().prose_says_the_finding(&prose.code) {
                            continue;
                        }
                        tracing::info!(
                            attempt,
                            "code mode takes a sampled answer in prose that says what the turn found"
                        );
                        chosen = Some(prose);
                        break;
                    }
                };
                // A recording that runs out mid-check is checked live from there on.
                let from_recording = recorded.as_ref().is_some_and(|left| !left.is_empty());
                let (through, sample_answer) = self
                    .verdict(
                        &mut recorded,
                        &program.code,
                        prepared,
                        bindings,
                        proof_needed,
                        true,
                    )
                    .await;
                passed.push(through.is_none());
                let Some(failure) = through else {
                    tracing::info!(
                        attempt,
                        "code mode runs a sampled program in place of one that would fail"
                    );
                    chosen_answer = sample_answer;
                    chosen = Some(program);
                    break;
                };
                let goes_further = if from_recording {
                    recorded_further == Some(passed.len() - 1)
                } else {
                    failure.told && failure.data_reads > best
                };
                if goes_further {
                    best = failure.data_reads;
                    further = Some((passed.len() - 1, program));
                }
            }
        }
        // A sample that passed is reviewed as the model's own program would be (`review.rs`).
        let mut reviewed = None;
        if let Some(program) = chosen.take() {
            chosen = Some(
                if self.reviews(&program.code, chosen_answer.as_ref(), recorded_review) {
                    let (program, again) = self
                        .review(
                            program,
                            chosen_answer.as_ref(),
                            request,
                            (prepared, bindings),
                            recorded_review,
                        )
                        .await;
                    reviewed = Some(again);
                    program
                } else {
                    program
                },
            );
        }
        let further = further.filter(|_| chosen.is_none());
        if let Some((place, _)) = &further {
            tracing::info!(
                place,
                "code mode runs a failing sample that got further than the model's own program"
            );
        }
        self.journal(Entry::Checked {
            passed,
            further: further.as_ref().map(|(place, _)| *place),
            voted: None,
            reviewed,
        })
        .await?;
        Ok(chosen
            .or(further.map(|(_, program)| program))
            .unwrap_or(own))
    }

    /// Sample `attempt` for `request`, passed over when it is a refusal, a program of a shape
    /// in `tried` or run earlier in the turn, or one that changes what is not `allowed`.
    pub(super) async fn draw(
        &mut self,
        request: &ModelRequest,
        attempt: u32,
        (prepared, bindings): (&Prepared, &[ToolBinding]),
        tried: &mut Vec<String>,
        allowed: &[String],
    ) -> Drawn {
        let asked = request.clone().sampled_again(self.iterations, attempt);
        let reply = match self.ask(asked, Purpose::Candidate).await {
            Ok(reply) => reply,
            Err(error) => {
                tracing::warn!(%error, "a candidate program could not be sampled");
                return Drawn::Unasked;
            }
        };
        if crate::rules::not_a_program::refusal(&reply.text, None, bindings).is_some() {
            return Drawn::Skipped;
        }
        let (code, path) = extract_code(&reply.text);
        let shape = super::timeline::code_shape(&code);
        if tried.contains(&shape) || self.timeline().earlier_iteration_with(&code).is_some() {
            return Drawn::Skipped;
        }
        let program = Checked {
            code,
            path,
            reasoning: reply.reasoning,
        };
        if path == CodePath::Plain && crate::prose::looks_like_prose(&program.code) {
            return Drawn::Prose(program);
        }
        tried.push(shape);
        let changes =
            crate::rules::sampled_changes::changing_tools(&program.code, prepared, bindings);
        if let Some(tool) = crate::rules::sampled_changes::beyond(&changes, allowed) {
            tracing::info!(
                attempt,
                tool,
                "a sampled program that changes what the model's own does not is skipped"
            );
            return Drawn::Skipped;
        }
        Drawn::Program(program)
    }

    /// How `code` would fail its check (`None`: it passes): as the recording says, in a
    /// replay that has it, else as its dry run says. With `proof_needed`, a program whose dry
    /// run proves nothing fails (told nothing, nothing read). A `sample` is held to more than
    /// the model's own program (see [`Self::check`]).
    pub(super) async fn verdict(
        &mut self,
        recorded: &mut Option<std::collections::VecDeque<bool>>,
        code: &str,
        prepared: &Prepared,
        bindings: &[ToolBinding],
        proof_needed: bool,
        sample: bool,
    ) -> (Option<Failure>, Option<Answer>) {
        match recorded
            .as_mut()
            .and_then(std::collections::VecDeque::pop_front)
        {
            Some(true) => (None, None),
            Some(false) => (Some(Failure::default()), None),
            None => {
                self.check(code, prepared, bindings, proof_needed, sample)
                    .await
            }
        }
    }

    /// The verdicts the recording this prompt replays journaled for its next check, and the
    /// sample that ran for getting further, if it is a replay and has them.
    fn recorded_verdicts(&self) -> Option<RecordedCheck> {
        let replay = self.base.options.prompt.replay.as_ref()?;
        replay
            .journal()
            .iter()
            .filter_map(|entry| match serde_json::from_value(entry.clone()) {
                Ok(Entry::Checked {
                    passed,
                    further,
                    voted,
                    reviewed,
                }) => Some((passed.into(), further, voted, reviewed)),
                _ => None,
            })
            .nth(self.checks)
    }

    /// Dry-runs `code` with this turn's tools and variables: how it would fail, or `None`.
    /// A dry run that proves nothing passes, unless `proof_needed`.
    async fn check(
        &mut self,
        code: &str,
        prepared: &Prepared,
        bindings: &[ToolBinding],
        proof_needed: bool,
        sample: bool,
    ) -> (Option<Failure>, Option<Answer>) {
        let determinism = Determinism {
            seed: Some(u64::from(self.iterations)),
            clock: Vec::new(),
        };
        let request = self.dry_request(code, bindings, self.store.clone(), determinism);
        let sandbox = self.shared.sandbox.clone();
        let owner = self.base.recorder.prompt().user_id.clone();
        let program = DryProgram {
            code,
            execution: String::new(),
            prepared,
            bindings,
            context: self.dry_context(),
            sandbox: &sandbox,
            owner: &owner,
            request: &request,
            wall_time: None,
            reads_only: true,
        };
        let mut host = Checking { asked: false };
        let dry = plan_program(&program, &mut host).await;
        if dry.uncertain || host.asked {
            return (proof_needed.then(Failure::default), None);
        }
        let ending = dry.ending;
        // The failures the real run gives back to the model, with what it read before them.
        let told = Failure {
            told: true,
            data_reads: ending.data_reads,
        };
        if let Some(error) = dry.failure {
            tracing::debug!(error = error.message.lines().next(), "a check failed");
            return (Some(told), None);
        }
        // What the real run would hold back: `done()` alone in a turn that has shown the
        // user nothing, or a program that did nothing at all.
        if crate::rules::nothing_shown::ends_unseen(
            ending.done,
            ending.answered,
            ending.shown || self.timeline().shown_text(),
        ) {
            return (Some(told), None);
        }
        // An ending the real run would hold back while a file the user asked for is not
        // written, by this program's calls or an earlier one's (`rules::unwritten`).
        if ending.done
            && (ending.answered || ending.shown || self.timeline().shown_text())
            && self.unwritten_notice(prepared, &dry.changes).is_some()
        {
            return (Some(told), None);
        }
        // As the real run judges it (`rules::did_nothing`): no tool called, or tools called
        // and the last line declares what they found, shown to no one.
        let did_nothing = !ending.done
            && !ending.logged
            && !ending.shown
            && if ending.returned {
                ending.calls == 0 && crate::rules::did_nothing::lone_value(code).is_some()
            } else {
                crate::rules::did_nothing::notice(code, ending.calls).is_some()
            };
        if did_nothing {
            return (Some(told), None);
        }
        // An answer from reads that all came back empty (the todos looked for in `memory`,
        // a search that matched nothing) may have looked in the wrong place: a sample that
        // finds something runs in its place. When none does, this program runs as written,
        // and nothing is said to the model: an empty answer may be the right one.
        // Both end the turn in the real run, so nothing goes back to the model.
        let ends = Failure {
            told: false,
            data_reads: ending.data_reads,
        };
        if ending.found_nothing && (ending.answered || ending.shown) {
            return (Some(ends), None);
        }
        // A program that logs or returns what a search that missed gave (`.startsWith("Germany")`
        // over rows that have it in their third field, then `log(count)`): the sandbox only
        // notes it on the log line, and a sample that reads the data right runs in its place.
        if ending.misread && (ending.logged || ending.returned) {
            return (Some(ends), None);
        }
        // A sample with a string search that matched none of the texts it was given may have
        // searched for what the data does not write (`line.endsWith(" ✔️")` over checklist
        // lines that say `- [x]`): it does not take the place of the model's own program,
        // whose failure may say what the data writes (checklist-left, tuning, round 36).
        if sample
            && ending.in_vain
            && (ending.answered || ending.shown || ending.logged || ending.returned)
        {
            return (Some(ends), None);
        }
        // Words written out in the program, by one that changes nothing (`rules::fixed_answer`):
        // likewise a preference, never said to the model.
        let timeline = self.timeline();
        if crate::rules::fixed_answer::fixed(code, &dry.said, !dry.input.calls.is_empty(), |text| {
            timeline.met(text) || timeline.met_data(text)
        }) {
            return (Some(ends), None);
        }
        // What a vote compares (`votes.rs`): the answer of a program that ends the turn with
        // words.
        let answer = (ending.done && (ending.answered || ending.shown)).then(|| Answer {
            texts: dry
                .said
                .iter()
                .cloned()
                .chain(dry.changes.iter().flat_map(|(_, input)| strings(input)))
                .collect(),
            data: dry.data.clone(),
        });
        (None, answer)
    }
}

/// How a program would fail. A verdict taken from a recording, or a copy not dry-run, is the
/// default: nothing read, nothing told.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Failure {
    /// The real run would give the failure back to the model (it throws, ends with `done()`
    /// alone in a turn that has shown nothing, or does nothing), rather than end the turn
    /// with an answer the check only likes less (from empty reads, or written out in it).
    told: bool,
    /// The distinct reads (tool and input) that gave data before it failed.
    data_reads: usize,
}

/// The host of a check: `llm()` is not asked (an answer costs a model call, and the program's
/// failure after it proves nothing), and no scope matters (nothing is planned).
struct Checking {
    asked: bool,
}

#[async_trait::async_trait]
impl DryHost for Checking {
    async fn llm(&mut self, _prompt: &str, _json: bool) -> HostReply {
        self.asked = true;
        HostReply::Error {
            message: "llm() is not asked while a program is checked".to_owned(),
        }
    }

    async fn scoped(&self, _tool: &str, _reason: &str) -> bool {
        false
    }
}
