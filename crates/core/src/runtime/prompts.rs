//! `PromptService`: prompts created by mode, run, decided and cancelled, and the unfinished
//! ones kept reachable by id.

use super::*;
use crate::prompt::DecidedBy;

/// What [`PromptService`] asks of an executor.
enum Step<'a> {
    Run,
    Decide(&'a str, &'a Verdict, Option<DecidedBy>),
}

/// A live executor, shared between whoever runs it and whoever approves its tool calls.
pub type ExecutorHandle = Arc<tokio::sync::Mutex<Box<dyn PromptExecutor>>>;

/// An unfinished prompt, as [`PromptService`] keeps it.
struct Active {
    handle: ExecutorHandle,
    user_id: String,
    conversation: Option<String>,
    mode: String,
    /// Where a cancel is saved before it is published.
    checkpoint: Option<Arc<dyn PromptCheckpoint>>,
    cancel: CancellationToken,
}

/// The error a tool call records when its prompt is cancelled while it runs or waits.
pub const CANCELLED_TOOL_ERROR: &str =
    "Cancelled: the prompt was stopped before this tool call finished";

/// The error a tool call records when the process running it stopped before its result was
/// stored, and the prompt goes on elsewhere: it is not run again unless the tool is
/// idempotent ([`crate::Tool::idempotent`]).
pub const TAKEN_OVER_TOOL_ERROR: &str = "Interrupted: the server running this tool call stopped before its result was recorded; it was not run again, and it may or may not have taken effect";

/// The error text a pending tool result gets when its prompt is interrupted (its process
/// stopped, and nobody took the prompt over). A prompt continued later treats such a call
/// as one whose process died: an idempotent tool runs again.
pub const INTERRUPTED_TOOL_ERROR: &str =
    "Interrupted: the process stopped before this tool call finished";

/// Creates executors by mode and keeps the unfinished ones reachable by prompt id.
pub struct PromptService {
    services: Arc<Services>,
    /// Each unfinished prompt's executor, its conversation (for its spans), and what cancels
    /// it.
    active: Mutex<HashMap<String, Active>>,
}

impl std::fmt::Debug for PromptService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptService").finish_non_exhaustive()
    }
}

/// Why [`PromptService`] could not create or step a prompt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromptServiceError {
    /// The mode registry refused, e.g. an unknown mode.
    #[error(transparent)]
    Mode(#[from] ModeError),
    /// No executor for this prompt is active in this process.
    #[error("prompt \"{0}\" is not active")]
    NotActive(String),
    /// The executor failed.
    #[error(transparent)]
    Executor(#[from] ExecutorError),
}

impl PromptService {
    /// A service over `services`, with no active prompts.
    pub fn new(services: Arc<Services>) -> Self {
        Self {
            services,
            active: Mutex::default(),
        }
    }

    /// Creates the executor for `options.mode` and publishes `prompt.created`.
    pub fn create(&self, options: PromptOptions) -> Result<ExecutorHandle, PromptServiceError> {
        let handle = self.create_unannounced(options)?;
        if let Ok(executor) = handle.try_lock() {
            self.announce_created(executor.id());
        }
        Ok(handle)
    }

    /// Like [`create`](Self::create), without publishing `prompt.created`: for a caller that
    /// stores the prompt first, and then calls [`announce_created`](Self::announce_created)
    /// (no event is published for a prompt that is not stored yet).
    pub fn create_unannounced(
        &self,
        options: PromptOptions,
    ) -> Result<ExecutorHandle, PromptServiceError> {
        let mode = options
            .mode
            .clone()
            .or_else(|| {
                options
                    .resume_prompt
                    .as_ref()
                    .map(|prompt| prompt.mode.clone())
            })
            .unwrap_or_else(|| DEFAULT_MODE.to_owned());
        let factory = self.services.modes.get(&mode)?;
        let conversation_id = options.conversation_id.clone();
        let checkpoint = options.checkpoint.clone();
        let executor = factory.create_executor(ExecutorCreateOptions {
            services: self.services.clone(),
            mode: mode.clone(),
            prompt: options,
        });
        let (prompt_id, user_id) = (executor.id().to_owned(), executor.user_id().to_owned());
        let handle: ExecutorHandle = Arc::new(tokio::sync::Mutex::new(executor));
        self.lock_active().insert(
            prompt_id,
            Active {
                handle: handle.clone(),
                user_id,
                conversation: conversation_id,
                mode,
                checkpoint,
                cancel: CancellationToken::new(),
            },
        );
        Ok(handle)
    }

    /// Publishes `prompt.created` for an executor made by
    /// [`create_unannounced`](Self::create_unannounced), once its prompt is stored.
    pub fn announce_created(&self, prompt_id: &str) {
        let (user_id, mode, conversation_id) = match self.lock_active().get(prompt_id) {
            Some(active) => (
                active.user_id.clone(),
                active.mode.clone(),
                active.conversation.clone(),
            ),
            None => return,
        };
        self.services.events.publish(
            &user_id,
            EventPayload::PromptCreated {
                prompt_id: prompt_id.to_owned(),
                mode,
                conversation_id,
            },
        );
    }

    /// Runs a created executor until it finishes or waits for approval.
    pub async fn run(&self, handle: &ExecutorHandle) -> Result<Prompt, PromptServiceError> {
        self.advance(handle, Step::Run).await
    }

    /// Takes one step of an executor, as an `invoke_agent` span that counts as a running
    /// prompt; forgets the executor once its prompt is finished. A cancel, before or during
    /// the step, drops the step where it stands and ends the prompt as `cancelled`.
    async fn advance(
        &self,
        handle: &ExecutorHandle,
        step: Step<'_>,
    ) -> Result<Prompt, PromptServiceError> {
        let mut executor = handle.lock().await;
        let (conversation, cancel) = match self.lock_active().get(executor.id()) {
            Some(active) => (active.conversation.clone(), active.cancel.clone()),
            None => (None, CancellationToken::new()),
        };
        if cancel.is_cancelled() {
            return Ok(self.end_cancelled(executor.prompt()).await);
        }
        let provider = self.services.completion.provider();
        let model =
            provider.map(|provider| (provider.id(), provider.model_name(executor.prompt().model)));
        let span = telemetry::prompt_span(
            executor.prompt(),
            conversation.as_deref(),
            model.as_ref().map(|(id, name)| (*id, name.as_str())),
        );
        let _running = telemetry::prompt_running(&executor.prompt().mode);
        let result = {
            let stepping = match step {
                Step::Run => executor.run(),
                Step::Decide(id, verdict, by) => {
                    if let Some(by) = by {
                        executor.decided_by(by);
                    }
                    executor.decide(id, verdict)
                }
            }
            .instrument(span.clone());
            tokio::select! {
                result = stepping => Some(result),
                () = cancel.cancelled() => None,
            }
        };
        let Some(result) = result else {
            let prompt = self.end_cancelled(executor.prompt()).await;
            telemetry::prompt_ran(&span, &prompt);
            return Ok(prompt);
        };
        telemetry::prompt_ran(&span, executor.prompt());
        self.forget_if_finished(executor.prompt());
        Ok(result?)
    }

    /// Stops a prompt of this process: a running step is dropped where it stands (the model's
    /// answer, a tool, a code-mode script and its worker), and a prompt waiting for approval
    /// ends there. Returns the prompt as it ends, `cancelled`, with tool calls that had not
    /// finished closed as errors; the caller stores it. `None` when the prompt is not active
    /// here; a prompt that already finished is returned as it is.
    pub async fn cancel(&self, prompt_id: &str) -> Option<Prompt> {
        let (handle, cancel) = {
            let active = self.lock_active();
            let entry = active.get(prompt_id)?;
            (entry.handle.clone(), entry.cancel.clone())
        };
        cancel.cancel();
        // A running step sees the token and lets go of the executor; one that waits for a
        // decision has nobody stepping it, so it ends here.
        let executor = handle.lock().await;
        let prompt = executor.prompt();
        if prompt.state.is_finished() {
            return Some(prompt.clone());
        }
        Some(self.end_cancelled(prompt).await)
    }

    /// The prompt as a cancel leaves it; saves it and then publishes `prompt.cancelled`, once,
    /// and forgets it. When the save fails nothing is published (the caller's own save
    /// reports the failure).
    async fn end_cancelled(&self, prompt: &Prompt) -> Prompt {
        let mut ended = prompt.clone();
        let event = close_cancelled(&mut ended);
        let Some(active) = self.lock_active().remove(&ended.id) else {
            return ended;
        };
        if let Some(checkpoint) = &active.checkpoint
            && let Err(error) = checkpoint.save(&ended, PromptChange::Prompt).await
        {
            tracing::error!(prompt = %ended.id, error = %format!("{error:#}"), "could not save a cancelled prompt");
            return ended;
        }
        self.services.events.publish(&ended.user_id, event);
        ended
    }

    /// Creates and runs in one go.
    pub async fn create_and_run(
        &self,
        options: PromptOptions,
    ) -> Result<Prompt, PromptServiceError> {
        let handle = self.create(options)?;
        self.run(&handle).await
    }

    /// The executor of an unfinished prompt of this process, if there is one.
    pub fn get(&self, prompt_id: &str) -> Option<ExecutorHandle> {
        self.lock_active()
            .get(prompt_id)
            .map(|active| active.handle.clone())
    }

    /// Applies a person's verdict on the waiting call of an active prompt, and runs it on.
    pub async fn decide(
        &self,
        prompt_id: &str,
        tool_call_id: &str,
        verdict: &Verdict,
    ) -> Result<Prompt, PromptServiceError> {
        let handle = self
            .get(prompt_id)
            .ok_or_else(|| PromptServiceError::NotActive(prompt_id.to_owned()))?;
        self.advance(&handle, Step::Decide(tool_call_id, verdict, None))
            .await
    }

    /// [`Self::decide`], recording who decided (a person, or a rule that decided for them)
    /// on the call; without it the record names the prompt's user.
    pub async fn decide_as(
        &self,
        prompt_id: &str,
        tool_call_id: &str,
        verdict: &Verdict,
        by: DecidedBy,
    ) -> Result<Prompt, PromptServiceError> {
        let handle = self
            .get(prompt_id)
            .ok_or_else(|| PromptServiceError::NotActive(prompt_id.to_owned()))?;
        self.advance(&handle, Step::Decide(tool_call_id, verdict, Some(by)))
            .await
    }

    /// Drops a prompt's executor from the active set, e.g. when its caller gives up on it.
    pub fn forget(&self, prompt_id: &str) {
        self.lock_active().remove(prompt_id);
    }

    fn forget_if_finished(&self, prompt: &Prompt) {
        if prompt.state.is_finished() {
            self.lock_active().remove(&prompt.id);
        }
    }

    fn lock_active(&self) -> std::sync::MutexGuard<'_, HashMap<String, Active>> {
        self.active.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Ends a prompt as `cancelled`: tool calls still running or waiting for approval get an
/// error result, so the timeline stays valid for the model in the next prompt. Returns the
/// `prompt.cancelled` event to publish.
pub fn close_cancelled(prompt: &mut Prompt) -> EventPayload {
    prompt.close_pending_tools(crate::ErrorKind::Cancelled, CANCELLED_TOOL_ERROR);
    prompt.state = PromptState::Cancelled;
    prompt.error = Some("cancelled".to_owned());
    EventPayload::PromptCancelled {
        prompt_id: prompt.id.clone(),
        output: prompt.output.clone(),
        usage: prompt.usage.clone(),
    }
}
