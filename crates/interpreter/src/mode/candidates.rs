//! Programs checked before they run: after a program of the turn failed, the next one is
//! dry-run first (`crate::dry_run`: reads run, other calls get placeholders). When it would
//! fail too, the model is asked the same request again, warmer and with other seeds, for up
//! to `candidates` (a top-level setting) more programs, each dry-run in turn; the first that gets
//! through runs. A model that cannot write the right program at its first pick often writes
//! it at a later one, and a program that fails where the dry run can see it never runs.
//!
//! A program fails its check when its dry run throws, ends with `done()` alone in a turn that
//! has shown the user nothing, or does nothing at all: what the real run would hold back.
//! Only a failure the real run would meet counts: one after the program looked inside a
//! placeholder, after a read that may pass when tried again, or after an `llm()` request (not
//! asked while checking) proves nothing, and the program runs as written. When none of the
//! candidates gets through, the model's own program runs, and its error is fed back as before.

use agentic_core::{ModelRequest, Prepared, ToolContext};

use super::CodeExecutor;
use super::request::Purpose;
use crate::dry_run::{DryHost, DryProgram, plan_program};
use crate::prompt::extract_code;
use crate::protocol::{CodePath, Determinism, ExecuteRequest, HostReply, ToolBinding};

/// How warm candidates are sampled: as warm as a resample after a copied program.
const CANDIDATE_TEMPERATURE: f32 = crate::rules::afresh::RESAMPLE_TEMPERATURE;

/// What a dry run says of a program.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Check {
    /// It ran to its end, or failed where the real run might not.
    Passes,
    /// It failed where the real run would: the error's first line.
    Fails(String),
}

impl CodeExecutor {
    /// Whether the program about to run is checked first: candidates are on, the model can
    /// give another answer to the same request, and the turn's last program failed.
    pub(super) fn checks_programs(&self) -> bool {
        self.base.options.services.limits().candidates > 0
            && self
                .base
                .options
                .services
                .completion
                .provider()
                .is_some_and(|provider| provider.samples())
            && self.timeline().last_execution_error().is_some()
    }

    /// The program to run in place of `code` (written for `request`): `code` itself when its
    /// dry run passes, else the first sampled candidate whose dry run does, else `code`.
    pub(super) async fn checked_program(
        &mut self,
        code: String,
        path: CodePath,
        request: &ModelRequest,
        prepared: &Prepared,
        bindings: &[ToolBinding],
    ) -> (String, CodePath) {
        let Check::Fails(first_error) = self.check(&code, prepared, bindings).await else {
            return (code, path);
        };
        let mut tried = vec![code.clone()];
        let mut errors = vec![first_error];
        for attempt in 0..self.base.options.services.limits().candidates {
            let mut asked = request.clone();
            asked.min_temperature = Some(
                asked
                    .min_temperature
                    .map_or(CANDIDATE_TEMPERATURE, |floor| {
                        floor.max(CANDIDATE_TEMPERATURE)
                    }),
            );
            // Seeds that differ by attempt and by iteration, the same in every run: an eval
            // or a replay meets the same candidates.
            asked.seed = Some(u64::from(self.iterations) << 8 | u64::from(attempt + 1));
            let reply = match self.ask(asked, Purpose::Candidate).await {
                Ok(reply) => reply,
                Err(error) => {
                    tracing::warn!(%error, "a candidate program could not be sampled");
                    break;
                }
            };
            if crate::rules::not_a_program::refusal(&reply.text, None, bindings).is_some() {
                continue;
            }
            let (candidate, candidate_path) = extract_code(&reply.text);
            if tried.contains(&candidate)
                || self.timeline().earlier_iteration_with(&candidate).is_some()
            {
                continue;
            }
            tried.push(candidate.clone());
            match self.check(&candidate, prepared, bindings).await {
                Check::Passes => {
                    tracing::info!(
                        attempt = attempt + 1,
                        set_aside = ?errors,
                        "code mode runs a sampled program in place of one that would fail"
                    );
                    return (candidate, candidate_path);
                }
                Check::Fails(error) => errors.push(error),
            }
        }
        tracing::info!(
            tried = tried.len(),
            errors = ?errors,
            "no sampled program got through its dry run; the model's own runs"
        );
        (code, path)
    }

    /// Dry-runs `code` with this turn's tools and variables.
    async fn check(&mut self, code: &str, prepared: &Prepared, bindings: &[ToolBinding]) -> Check {
        let request = ExecuteRequest {
            code: code.to_owned(),
            tools: bindings.to_vec(),
            input: None,
            store: self.store.clone(),
            limits: self.shared.sandbox.config().script_limits(),
            same_tools_as_before: false,
            determinism: Determinism {
                seed: Some(u64::from(self.iterations)),
                clock: Vec::new(),
            },
        };
        let sandbox = self.shared.sandbox.clone();
        let prompt = self.base.recorder.prompt();
        let owner = prompt.user_id.clone();
        let program = DryProgram {
            code,
            execution: String::new(),
            prepared,
            bindings,
            context: ToolContext::new(
                &prompt.user_id,
                &prompt.id,
                self.base.options.prompt.state.clone(),
                self.base.options.services.clone(),
            ),
            sandbox: &sandbox,
            owner: &owner,
            request: &request,
            wall_time: None,
        };
        let mut host = Checking { asked: false };
        let dry = plan_program(&program, &mut host).await;
        let ending = dry.ending;
        match dry.failure {
            Some(error) if !dry.uncertain && !host.asked => {
                Check::Fails(error.message.lines().next().unwrap_or_default().to_owned())
            }
            Some(_) => Check::Passes,
            // What the real run would hold back: `done()` alone in a turn that has shown the
            // user nothing, or a program that did nothing at all.
            None if ending.done
                && !ending.answered
                && !ending.shown
                && !self.timeline().shown_text() =>
            {
                Check::Fails("done() without an answer, and nothing shown".to_owned())
            }
            None if !ending.done
                && !ending.returned
                && !ending.logged
                && !ending.shown
                && ending.calls == 0 =>
            {
                Check::Fails("the program did nothing".to_owned())
            }
            None => Check::Passes,
        }
    }
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
