//! What every executor starts from, whatever its mode: the prompt it creates or resumes, its
//! recorder, its plugins prepared once, and the steps of running and deciding that do not
//! depend on how the mode asks the model. Classic mode and code mode both build on it: each
//! is a [`ModeDriver`] over an [`ExecutorBase`], run as a [`PromptExecutor`] by [`Driven`].

use async_trait::async_trait;

use crate::mode::{ExecutorCreateOptions, ExecutorError, PromptExecutor, Verdict};
use crate::plugin::Prepared;
use crate::prompt::{
    DecidedBy, DecisionRecord, ErrorKind, Prompt, PromptState, ToolOutput, ToolResult,
};
use crate::recorder::PromptRecorder;
use crate::state::State;

/// The shared part of an executor (see the module's docs).
pub struct ExecutorBase {
    /// What the executor was created from.
    pub options: ExecutorCreateOptions,
    /// The prompt, and the only way to change it.
    pub recorder: PromptRecorder,
    prepared: Option<Prepared>,
    resumed_from: Option<PromptState>,
    /// Who takes the next decision, when someone said ([`PromptExecutor::decided_by`]).
    decider: std::sync::Mutex<Option<DecidedBy>>,
}

impl std::fmt::Debug for ExecutorBase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutorBase")
            .field("prompt", &self.recorder.prompt().id)
            .field("resumed_from", &self.resumed_from)
            .finish_non_exhaustive()
    }
}

impl ExecutorBase {
    /// The prompt `options` asks for, or the stored one it resumes, with its recorder.
    pub fn new(options: ExecutorCreateOptions) -> Self {
        let resumed_from = options
            .prompt
            .resume_prompt
            .as_ref()
            .map(|prompt| prompt.state);
        let prompt = options.prompt.resume_prompt.clone().unwrap_or_else(|| {
            Prompt::new(
                &options.prompt.user_id,
                &options.mode,
                options.prompt.model,
                options.prompt.input.clone(),
            )
        });
        let recorder = PromptRecorder::new(
            prompt,
            options.services.events.clone(),
            options.prompt.checkpoint.clone(),
        );
        Self {
            options,
            recorder,
            prepared: None,
            resumed_from,
            decider: std::sync::Mutex::new(None),
        }
    }

    /// The prompt as it stands.
    pub fn prompt(&self) -> &Prompt {
        self.recorder.prompt()
    }

    /// The state the prompt's tools read and write.
    pub fn state(&self) -> &State {
        &self.options.prompt.state
    }

    /// The stored state of the prompt this executor resumes, until [`Self::take_resumed`].
    pub fn resumed_from(&self) -> Option<PromptState> {
        self.resumed_from
    }

    /// The stored state of the prompt this executor resumes, once: the executor sorts out
    /// what its process left unfinished, then runs on as any other.
    pub fn take_resumed(&mut self) -> Option<PromptState> {
        self.resumed_from.take()
    }

    /// Whether the prompt may run: only a running one does.
    pub fn runnable(&self) -> Result<(), ExecutorError> {
        match self.recorder.prompt().state {
            PromptState::Running => Ok(()),
            other => Err(ExecutorError::NotRunnable(other.as_str())),
        }
    }

    /// The prompt's plugins prepared (their tools and context), once per executor: `shape`
    /// adapts them the first time, and later calls return the same.
    pub async fn prepared(
        &mut self,
        shape: impl FnOnce(Prepared) -> Prepared + Send,
    ) -> anyhow::Result<Prepared> {
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
                &self.options.prompt.state,
            )
            .await?;
        let mut prepared = shape(prepared);
        if let Some(replay) = &self.options.prompt.replay {
            prepared.tools = prepared.tools.replaying(replay.clone());
        }
        self.prepared = Some(prepared.clone());
        Ok(prepared)
    }

    /// Journals one model call's outcome (a reply, or the provider's error), so that the
    /// prompt can later be exported as a test case that plays it again. `purpose` says what the mode asked for, when the mode asks for more than one thing
    /// (code mode: [`crate::replay::PROGRAM_REPLY`] for a program).
    pub async fn journal_reply(
        &self,
        outcome: &Result<crate::provider::ModelResponse, crate::provider::ProviderError>,
        purpose: Option<&str>,
    ) {
        self.journal_for_export(crate::replay::RecordedReply::entry(outcome, purpose))
            .await;
    }

    /// Appends what an export reads (a model reply, a decision) to the prompt's journal.
    /// Without persistence nothing is kept; an entry that cannot be written costs the export,
    /// not the prompt, so it is logged and the prompt goes on.
    async fn journal_for_export(&self, entry: serde_json::Value) {
        let Some(checkpoint) = &self.options.prompt.checkpoint else {
            return;
        };
        if let Err(error) = checkpoint
            .append_journal(&self.recorder.prompt().id, entry)
            .await
        {
            tracing::warn!(error = %format!("{error:#}"), "could not journal for export");
        }
    }

    /// Says who takes the next decision, for its record.
    pub fn set_decider(&self, by: DecidedBy) {
        *self
            .decider
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(by);
    }

    /// Ends the prompt as failed because its plugins could not prepare, and returns it.
    pub async fn fail_preparing(&mut self, error: &anyhow::Error) -> Result<Prompt, ExecutorError> {
        self.recorder
            .fail(&format!("preparing the prompt failed: {error:#}"))
            .await?;
        Ok(self.recorder.prompt().clone())
    }

    /// The record of a scope that approves a call of `tool` (which needs approval because of
    /// `shown`), when one is in force: the call then runs without asking.
    pub async fn scope_for(&self, tool: &str, shown: &str) -> Option<DecisionRecord> {
        let slot = self
            .options
            .services
            .extensions
            .get::<crate::scope::ScopeSlot>()?;
        let prompt = self.recorder.prompt();
        let covering = slot
            .store()
            .covering(
                &prompt.user_id,
                self.options.prompt.conversation_id.as_deref(),
                &prompt.id,
                tool,
            )
            .await;
        match covering {
            Ok(grant) => {
                let grant = grant?;
                Some(DecisionRecord::new(
                    Verdict::Approve,
                    grant.decided_by(),
                    shown,
                ))
            }
            Err(error) => {
                // Asking a person is always safe.
                tracing::warn!(error = %format!("{error:#}"), "could not read the scopes; the call is asked about");
                None
            }
        }
    }

    /// Records a person's verdict on the call the prompt waits at, once the mode has checked
    /// that it waits there: the prompt runs again, and the call either starts now (its time
    /// is its run, not the time a person took) or fails as rejected.
    pub async fn record_verdict(
        &mut self,
        tool_call_id: &str,
        verdict: &Verdict,
    ) -> Result<(), ExecutorError> {
        self.record_verdicts(&[tool_call_id.to_owned()], verdict)
            .await?;
        Ok(())
    }

    /// Records one verdict on the calls a single request held (`calls`, in the order the
    /// request listed them, as [`PromptRecorder::request_approvals`] asked): each call gets
    /// its own part of it, approved or rejected, with a record that says it was decided with
    /// the others. The approved calls start now; the rejected ones fail. Returns, for each
    /// call, whether it was approved.
    ///
    /// [`PromptRecorder::request_approvals`]: crate::runtime::recorder::PromptRecorder::request_approvals
    pub async fn record_verdicts(
        &mut self,
        calls: &[String],
        verdict: &Verdict,
    ) -> Result<Vec<bool>, ExecutorError> {
        let by = self
            .decider
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .unwrap_or_else(|| DecidedBy::User {
                user_id: self.recorder.prompt().user_id.clone(),
            });
        let shown: Vec<String> = calls
            .iter()
            .enumerate()
            .map(|(index, id)| {
                let reason = match self.recorder.prompt().tool_output(id) {
                    Some(ToolOutput {
                        result: ToolResult::Pending { reason, .. },
                        ..
                    }) => reason.clone(),
                    _ => String::new(),
                };
                if calls.len() > 1 {
                    format!(
                        "call {} of {} decided together: {reason}",
                        index + 1,
                        calls.len()
                    )
                } else {
                    reason
                }
            })
            .collect();
        self.recorder.resume().await?;
        let mut approved = Vec::with_capacity(calls.len());
        for (index, (id, shown)) in calls.iter().zip(shown).enumerate() {
            // Each call's record holds its own part: approved, or rejected with the reason.
            let rejection = verdict.rejection_at(index);
            let own = match (calls.len(), &rejection) {
                (1, _) => verdict.clone(),
                (_, None) => Verdict::Approve,
                (_, Some(_)) => Verdict::Reject {
                    reason: verdict.reason().map(str::to_owned),
                },
            };
            self.recorder
                .record_decision(id, DecisionRecord::new(own.clone(), by.clone(), shown))
                .await?;
            // An exported case answers its approval requests as they were answered.
            self.journal_for_export(crate::replay::decision_entry(id, &own))
                .await;
            approved.push(rejection.is_none());
            match rejection {
                None => self.recorder.mark_tool_started(id),
                Some(error) => {
                    let rejected = ToolResult::error(ErrorKind::Rejected, error);
                    self.recorder.finish_tool(id, rejected).await?;
                }
            }
        }
        Ok(approved)
    }
}

/// A mode's own part of an executor: how it runs a prompt on, and how it applies a verdict.
/// [`Driven`] makes it a [`PromptExecutor`].
#[async_trait]
pub trait ModeDriver: Send + Sync {
    /// The shared part: the prompt, its recorder, its options.
    fn base(&self) -> &ExecutorBase;
    /// Runs the prompt, which may run, until it completes, fails or waits for a person.
    async fn advance(&mut self) -> Result<Prompt, ExecutorError>;
    /// Applies a person's verdict on the call `tool_call_id` and runs on; a mode whose calls
    /// never wait keeps the default, which says the call does not wait.
    async fn apply_verdict(
        &mut self,
        tool_call_id: &str,
        _verdict: &Verdict,
    ) -> Result<Prompt, ExecutorError> {
        Err(ExecutorError::NotWaiting(tool_call_id.to_owned()))
    }
}

/// A [`ModeDriver`] as the runtime runs it: `Box::new(Driven(driver))` from a mode's
/// `create_executor`.
#[derive(Debug)]
pub struct Driven<D>(pub D);

#[async_trait]
impl<D: ModeDriver> PromptExecutor for Driven<D> {
    fn prompt(&self) -> &Prompt {
        self.0.base().prompt()
    }

    fn state(&self) -> &State {
        self.0.base().state()
    }

    async fn run(&mut self) -> Result<Prompt, ExecutorError> {
        self.0.base().runnable()?;
        self.0.advance().await
    }

    fn decided_by(&self, by: DecidedBy) {
        self.0.base().set_decider(by);
    }

    async fn decide(
        &mut self,
        tool_call_id: &str,
        verdict: &Verdict,
    ) -> Result<Prompt, ExecutorError> {
        self.0.apply_verdict(tool_call_id, verdict).await
    }
}
