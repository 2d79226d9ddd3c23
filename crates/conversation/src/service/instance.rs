//! `ConversationInstance`: one conversation of one user, and `StartedPrompt`, a prompt
//! started in it.

use super::*;

/// One conversation of one user.
#[derive(Clone)]
pub struct ConversationInstance {
    pub(super) service: ConversationService,
    pub(super) conversation: Conversation,
}

impl std::fmt::Debug for ConversationInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConversationInstance")
            .field("id", &self.conversation.id)
            .finish_non_exhaustive()
    }
}

impl ConversationInstance {
    pub fn id(&self) -> &str {
        &self.conversation.id
    }

    pub fn user_id(&self) -> &str {
        &self.conversation.user_id
    }

    /// The conversation as it was when this instance was loaded or last prompted.
    pub fn conversation(&self) -> &Conversation {
        &self.conversation
    }

    /// Every prompt, in order, archived ones included.
    pub async fn prompts(&self) -> Result<Vec<StoredPrompt>, ConversationError> {
        Ok(self
            .service
            .inner
            .store
            .conversation_prompts(&self.conversation.id)
            .await?)
    }

    /// Sets a title chosen by someone (or something) better than the first input.
    pub async fn set_title(&mut self, title: &str) -> Result<(), ConversationError> {
        let title = title.trim();
        self.service
            .inner
            .store
            .set_title(&self.conversation.id, title, true)
            .await?;
        self.conversation.title = title.to_owned();
        self.conversation.title_fixed = true;
        Ok(())
    }

    /// Runs one prompt to its end (or until it waits for approval).
    pub async fn prompt(&mut self, request: PromptRequest) -> Result<Prompt, ConversationError> {
        self.start(request).await?.run().await
    }

    /// Creates and stores the prompt and takes the conversation for it; `run` does the work.
    /// Lets a caller answer with the prompt's id before it runs.
    pub async fn start(
        &mut self,
        request: PromptRequest,
    ) -> Result<StartedPrompt, ConversationError> {
        let inner = self.service.inner.clone();
        let runtime = &inner.runtime;
        let mode = request
            .mode
            .clone()
            .unwrap_or_else(|| agentic_core::prompt::DEFAULT_MODE.to_owned());
        runtime
            .services()
            .modes
            .get(&mode)
            .map_err(PromptServiceError::from)?;

        // Take the conversation with a token before anything else, so two callers racing for
        // it (in this process or another) cannot both start.
        let token = inner.store.claim_token();
        if let Err(holder) = inner.store.claim(&self.conversation.id, &token).await? {
            return Err(ConversationError::Busy {
                conversation_id: self.conversation.id.clone(),
                prompt_id: holder,
            });
        }
        match self.create_claimed(request, mode, &token).await {
            Ok(started) => Ok(started),
            Err(error) => {
                if let Err(release) = inner
                    .store
                    .release(&self.conversation.id, &token, None)
                    .await
                {
                    tracing::error!(error = %release, "could not release a conversation");
                }
                Err(error)
            }
        }
    }

    async fn create_claimed(
        &mut self,
        request: PromptRequest,
        mode: String,
        token: &str,
    ) -> Result<StartedPrompt, ConversationError> {
        let inner = &self.service.inner;
        let store = &inner.store;
        if let Some(fresh) = store
            .conversation(&self.conversation.user_id, &self.conversation.id)
            .await?
        {
            self.conversation = fresh;
        }
        let mut prompts = store.conversation_prompts(&self.conversation.id).await?;

        let title = (prompts.is_empty() && !self.conversation.title_fixed)
            .then(|| request.input.as_deref().map(title_from_input))
            .flatten()
            .filter(|title| !title.is_empty());

        let mut history = history_before(&self.conversation, &prompts, i64::MAX);
        if let Some(summary) = inner
            .compressor
            .compress_if_needed(store, &self.conversation, &history, &mode, request.model)
            .await
        {
            self.conversation.summary = Some(summary.summary);
            for prompt in &mut prompts {
                if summary.archived.contains(&prompt.prompt.id) {
                    prompt.archived = true;
                }
            }
            history = history_before(&self.conversation, &prompts, i64::MAX);
        }

        let mut state = self.conversation.state.clone();
        if let Some(extra) = request.state {
            state.extend(extra);
        }
        // Announced once stored: no event for a prompt a failed insert would take back.
        let handle = inner.runtime.prompts().create_unannounced(PromptOptions {
            user_id: self.conversation.user_id.clone(),
            input: request.input,
            model: request.model,
            mode: Some(mode),
            history,
            state: State::from_map(state),
            max_rounds: request.max_rounds,
            resume_prompt: None,
            checkpoint: Some(self.service.checkpoint()),
            conversation_id: Some(self.conversation.id.clone()),
            replay: None,
        })?;
        let prompt = handle.lock().await.prompt().clone();
        // One transaction stores the prompt, hands it the conversation and sets the title.
        if let Err(error) = store
            .insert_claimed_prompt(
                &self.conversation.id,
                &prompt,
                Some(token),
                title.as_deref(),
            )
            .await
        {
            inner.runtime.prompts().forget(&prompt.id);
            return Err(error.into());
        }
        inner.runtime.prompts().announce_created(&prompt.id);
        if let Some(title) = title {
            self.conversation.title = title;
        }
        Ok(StartedPrompt {
            service: self.service.clone(),
            conversation_id: self.conversation.id.clone(),
            prompt_id: prompt.id,
            handle,
        })
    }
}

/// A stored prompt that holds its conversation and is ready to run.
pub struct StartedPrompt {
    pub(super) service: ConversationService,
    pub(super) conversation_id: String,
    pub(super) prompt_id: String,
    pub(super) handle: ExecutorHandle,
}

impl std::fmt::Debug for StartedPrompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartedPrompt")
            .field("prompt_id", &self.prompt_id)
            .field("conversation_id", &self.conversation_id)
            .finish_non_exhaustive()
    }
}

impl StartedPrompt {
    pub fn prompt_id(&self) -> &str {
        &self.prompt_id
    }

    pub fn conversation_id(&self) -> &str {
        &self.conversation_id
    }

    /// Runs until the prompt completes, fails or waits for approval. A prompt that ends
    /// releases its conversation and leaves its state for the next one.
    pub async fn run(self) -> Result<Prompt, ConversationError> {
        let result = self.service.inner.runtime.prompts().run(&self.handle).await;
        settle(
            &self.service.inner,
            &self.conversation_id,
            &self.handle,
            result,
        )
        .await
    }
}

/// After a run or a decision: a prompt that ended releases its conversation with the state it
/// leaves; one whose executor failed without recording an end (e.g. its last checkpoint did
/// not commit) gets one recorded and published here, so nothing waits for it forever.
pub(super) async fn settle(
    inner: &Inner,
    conversation_id: &str,
    handle: &ExecutorHandle,
    result: Result<Prompt, PromptServiceError>,
) -> Result<Prompt, ConversationError> {
    let (mut prompt, state) = {
        let executor = handle.lock().await;
        (executor.prompt().clone(), executor.state().snapshot())
    };
    match result {
        Ok(finished) => {
            // A cancelled prompt is stored and released by `cancel`, which ended it.
            if finished.state != PromptState::WaitingForApproval
                && finished.state != PromptState::Cancelled
            {
                inner
                    .store
                    .release(conversation_id, &finished.id, Some(state))
                    .await?;
            }
            Ok(finished)
        }
        Err(PromptServiceError::Executor(agentic_core::ExecutorError::Internal(message))) => {
            inner.runtime.prompts().forget(&prompt.id);
            if !prompt.state.is_finished() {
                prompt.state = PromptState::Failed;
                prompt.error = Some(message.clone());
            }
            // Save the end whatever memory says: the executor's own save may be what failed.
            if let Err(error) = inner.store.save_prompt(&prompt, PromptChange::Prompt).await {
                tracing::error!(error = %format!("{error:#}"), prompt = %prompt.id, "could not record the end of a prompt");
            }
            inner.runtime.services().events.publish(
                &prompt.user_id,
                agentic_core::EventPayload::PromptError {
                    prompt_id: prompt.id.clone(),
                    error: message.clone(),
                },
            );
            if let Err(error) = inner
                .store
                .release(conversation_id, &prompt.id, Some(state))
                .await
            {
                tracing::error!(error = %format!("{error:#}"), "could not release a conversation");
            }
            Err(PromptServiceError::Executor(agentic_core::ExecutorError::Internal(message)).into())
        }
        // Not waiting, not runnable: the caller's mistake, nothing to record.
        Err(error) => Err(error.into()),
    }
}
