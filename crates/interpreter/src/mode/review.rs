//! A look at the data before an answer computed from it stands (`rules::data_review`): a
//! program that passes its check, computes its answer (`votes::computes`) from reads that gave
//! data the model has not been shown (after an earlier program that failed, the request shows
//! what its calls returned), and would end the turn with it, does not run at once. The model
//! is asked for the program again (greedy, as for its own programs, under a grammar of bare
//! code) in the same request, followed by what those reads gave, as the dry run of its check
//! read them. Its program is not in that request: shown it, the embedded model sent it back
//! unchanged (round 38). The program written then runs in its place when it is another
//! program, changes nothing the first did not (`rules::sampled_changes`), and passes its
//! check; else the first runs as written. At most once a turn, and only where programs are
//! checked (`candidates.rs`: a model that can answer differently). The `review` setting (on
//! by default) turns it off.
//!
//! What it decided is journaled with the check (`Entry::Checked::reviewed`): a replay asks
//! once more, as the run did, and takes the program the run took without dry-running it.

use agentic_core::{ChatMessage, ModelRequest, Prepared};

use super::CodeExecutor;
use super::candidates::Checked;
use super::request::Purpose;
use super::votes::Answer;
use crate::prompt::extract_code;
use crate::protocol::ToolBinding;

impl CodeExecutor {
    /// Whether `code`, which passed its check with `answer`, is reviewed: see the module's doc.
    /// A replay reviews where its recording did (`recorded`).
    pub(super) fn reviews(
        &self,
        code: &str,
        answer: Option<&Answer>,
        recorded: Option<bool>,
    ) -> bool {
        if recorded.is_some() {
            return true;
        }
        self.base.options.services.limits().review
            && !self.reviewed
            && self.base.options.prompt.replay.is_none()
            && answer.is_some_and(|answer| {
                let timeline = self.timeline();
                answer
                    .data
                    .iter()
                    .any(|(tool, input, _)| !timeline.read_shown(tool, input))
            })
            && super::votes::computes(code)
    }

    /// The program that runs after `own` was reviewed, and whether it is the one written
    /// again (what the journal keeps). `recorded`: what a replay's recording decided.
    pub(super) async fn review(
        &mut self,
        own: Checked,
        answer: Option<&Answer>,
        request: &ModelRequest,
        (prepared, bindings): (&Prepared, &[ToolBinding]),
        recorded: Option<bool>,
    ) -> (Checked, bool) {
        self.reviewed = true;
        let data = answer
            .map(|answer| answer.data.as_slice())
            .unwrap_or_default();
        let mut asked = request.clone();
        asked.grammar = asked.grammar.as_deref().map(crate::grammar::bare_program);
        // The data without the program: shown its own program, the model writes it back.
        asked
            .messages
            .push(ChatMessage::user(crate::rules::data_review::request(data)));
        let reply = match self.ask(asked, Purpose::Candidate).await {
            Ok(reply) => reply,
            Err(error) => {
                tracing::warn!(%error, "a program could not be reviewed");
                return (own, false);
            }
        };
        let (code, path) = extract_code(&reply.text);
        let again = Checked {
            code,
            path,
            reasoning: reply.reasoning,
        };
        if let Some(chosen) = recorded {
            return if chosen { (again, true) } else { (own, false) };
        }
        if crate::rules::not_a_program::refusal(&reply.text, None, bindings).is_some()
            || crate::prose::looks_like_prose(&again.code)
            || super::timeline::code_shape(&again.code) == super::timeline::code_shape(&own.code)
        {
            return (own, false);
        }
        let allowed = crate::rules::sampled_changes::changing_tools(&own.code, prepared, bindings);
        let changes =
            crate::rules::sampled_changes::changing_tools(&again.code, prepared, bindings);
        if crate::rules::sampled_changes::beyond(&changes, &allowed).is_some() {
            return (own, false);
        }
        let (failure, _) = self
            .verdict(&mut None, &again.code, prepared, bindings, false, false)
            .await;
        if failure.is_some() {
            tracing::info!(
                "a program written again with its data in view would fail; the first runs"
            );
            return (own, false);
        }
        tracing::info!("code mode runs the program written again with its data in view");
        (again, true)
    }
}
