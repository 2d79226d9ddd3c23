//! `ConversationService` and `ConversationInstance`: prompts that belong to a conversation,
//! run one at a time, checkpoint every change, and see the conversation's history.

use std::sync::Arc;

use agentic_core::history::summary_prompt;
use agentic_core::runtime::ExecutorHandle;
use agentic_core::{
    ModelKind, Prompt, PromptChange, PromptCheckpoint, PromptOptions, PromptServiceError,
    PromptState, Runtime, State,
};
use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::compress::{CompressionSettings, Compressor};

mod decisions;

use crate::store::{Conversation, Recovery, Store, StoredPrompt};
pub use decisions::{Action, CancelOutcome, Decision, DecisionForwarder, WaitingCall};

/// Characters of the first input that become a conversation's title.
const TITLE_CHARS: usize = 60;

/// What went wrong with a conversation call.
#[derive(Debug, thiserror::Error)]
pub enum ConversationError {
    #[error("conversation \"{0}\" not found")]
    NotFound(String),
    #[error("prompt \"{0}\" not found")]
    PromptNotFound(String),
    #[error(
        "conversation \"{conversation_id}\" is busy: prompt \"{prompt_id}\" is still running or \
         waiting for approval; wait for it, or approve or reject its tool call"
    )]
    Busy {
        conversation_id: String,
        prompt_id: String,
    },
    #[error(
        "prompt \"{prompt_id}\" has no tool call \"{tool_call_id}\" waiting for approval{}",
        waiting_list(waiting)
    )]
    NotWaiting {
        prompt_id: String,
        tool_call_id: String,
        /// The calls that do wait, if any.
        waiting: Vec<WaitingCall>,
    },
    #[error("tool call \"{tool_call_id}\" of prompt \"{prompt_id}\" is already decided")]
    AlreadyDecided {
        prompt_id: String,
        tool_call_id: String,
    },
    #[error("prompt \"{prompt_id}\" is {state} and cannot be cancelled")]
    NotCancellable {
        prompt_id: String,
        state: &'static str,
    },
    #[error("prompt \"{prompt_id}\" cannot be continued: {why}")]
    NotContinuable { prompt_id: String, why: String },
    #[error(transparent)]
    Prompt(#[from] PromptServiceError),
    #[error(transparent)]
    Store(#[from] anyhow::Error),
}

fn waiting_list(waiting: &[WaitingCall]) -> String {
    if waiting.is_empty() {
        return "; none is".to_owned();
    }
    let calls: Vec<String> = waiting
        .iter()
        .map(|call| format!("\"{}\" ({})", call.tool_call_id, call.function))
        .collect();
    format!("; waiting: {}", calls.join(", "))
}

/// What a caller asks of one prompt in a conversation.
#[derive(Debug, Clone, Default)]
pub struct PromptRequest {
    pub input: Option<String>,
    /// The conversation's mode choice for this prompt; `classic` when absent.
    pub mode: Option<String>,
    pub model: ModelKind,
    /// Merged over the state the conversation carries.
    pub state: Option<Map<String, Value>>,
    pub max_rounds: Option<u32>,
}

/// Conversations of every user, over one [`Store`] and one [`Runtime`].
#[derive(Clone)]
pub struct ConversationService {
    inner: Arc<Inner>,
}

struct Inner {
    runtime: Arc<Runtime>,
    store: Store,
    /// Sends a decision to the live server that holds its prompt (several servers on one
    /// PostgreSQL; see `relay.rs`).
    forwarder: std::sync::OnceLock<Arc<dyn DecisionForwarder>>,
    /// Whether this service takes over prompts of servers that died (`take_over_prompts`).
    takeover: std::sync::atomic::AtomicBool,
    resuming: tokio::sync::Mutex<()>,
    applying: decisions::Applying,
    compressor: Compressor,
    recovery: Recovery,
}

impl std::fmt::Debug for ConversationService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConversationService")
            .field("store", &self.inner.store)
            .finish_non_exhaustive()
    }
}

impl ConversationService {
    /// Opens the database at `url`, runs ours and the plugins' migrations, and recovers what
    /// the last process left: running prompts become `interrupted`.
    pub async fn open(runtime: Arc<Runtime>, url: &str) -> anyhow::Result<Self> {
        let store = Store::open(url, &runtime.services().extensions).await?;
        Self::with_store(runtime, store).await
    }

    /// Like [`open`](Self::open), over a store that is already migrated.
    pub async fn with_store(runtime: Arc<Runtime>, store: Store) -> anyhow::Result<Self> {
        store.register_instance().await?;
        if let Some(slot) = runtime
            .services()
            .extensions
            .get::<crate::migration::DatabaseSlot>()
        {
            slot.set(store.clone());
        }
        let settings = CompressionSettings::from_config(&runtime.services().config)?;
        store.set_lease(std::time::Duration::from_secs(settings.lease_seconds));
        let recovery = store.recover(&resumable(&runtime)).await?;
        let compressor = Compressor::new(runtime.services().clone(), settings);
        let service = Self {
            inner: Arc::new(Inner {
                runtime,
                store,
                forwarder: std::sync::OnceLock::new(),
                takeover: std::sync::atomic::AtomicBool::new(false),
                resuming: tokio::sync::Mutex::new(()),
                applying: decisions::Applying::default(),
                compressor,
                recovery,
            }),
        };
        tokio::spawn(keep_alive(Arc::downgrade(&service.inner)));
        Ok(service)
    }

    /// A clean stop: every prompt this process still runs is marked `interrupted` (pending
    /// tool results closed), its conversation released, and this process unregistered.
    pub async fn shutdown(&self) -> anyhow::Result<Vec<String>> {
        let store = &self.inner.store;
        store.unregister_instance().await?;
        let recovery = store.recover(&resumable(&self.inner.runtime)).await?;
        Ok(recovery.interrupted)
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.inner.runtime
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// What startup recovery did.
    pub fn recovery(&self) -> &Recovery {
        &self.inner.recovery
    }

    /// A new, empty conversation for `user_id`.
    pub async fn create(&self, user_id: &str) -> Result<ConversationInstance, ConversationError> {
        let conversation = self
            .inner
            .store
            .create_conversation(user_id, "New conversation")
            .await?;
        Ok(self.instance_of(conversation))
    }

    /// The user's conversation; another user's answers `NotFound`.
    pub async fn get(
        &self,
        user_id: &str,
        conversation_id: &str,
    ) -> Result<ConversationInstance, ConversationError> {
        let conversation = self
            .inner
            .store
            .conversation(user_id, conversation_id)
            .await?
            .ok_or_else(|| ConversationError::NotFound(conversation_id.to_owned()))?;
        Ok(self.instance_of(conversation))
    }

    /// The user's conversation when an id is given, else a new one.
    pub async fn get_or_create(
        &self,
        user_id: &str,
        conversation_id: Option<&str>,
    ) -> Result<ConversationInstance, ConversationError> {
        match conversation_id {
            Some(id) => self.get(user_id, id).await,
            None => self.create(user_id).await,
        }
    }

    pub async fn list(&self, user_id: &str) -> Result<Vec<Conversation>, ConversationError> {
        Ok(self.inner.store.conversations(user_id).await?)
    }

    /// Deletes a conversation and its prompts. A conversation whose prompt is running is busy.
    pub async fn delete(
        &self,
        user_id: &str,
        conversation_id: &str,
    ) -> Result<(), ConversationError> {
        let conversation = self
            .inner
            .store
            .conversation(user_id, conversation_id)
            .await?
            .ok_or_else(|| ConversationError::NotFound(conversation_id.to_owned()))?;
        if let Some(active) = &conversation.active_prompt_id {
            let running = self
                .inner
                .store
                .prompt(user_id, active)
                .await?
                .is_some_and(|stored| stored.prompt.state == PromptState::Running);
            if running {
                return Err(ConversationError::Busy {
                    conversation_id: conversation_id.to_owned(),
                    prompt_id: active.clone(),
                });
            }
        }
        if !self
            .inner
            .store
            .delete_conversation(user_id, conversation_id)
            .await?
        {
            return Err(ConversationError::NotFound(conversation_id.to_owned()));
        }
        Ok(())
    }

    /// One of the user's prompts, as stored (live prompts are checkpointed at every step).
    pub async fn prompt(
        &self,
        user_id: &str,
        prompt_id: &str,
    ) -> Result<StoredPrompt, ConversationError> {
        self.inner
            .store
            .prompt(user_id, prompt_id)
            .await?
            .ok_or_else(|| ConversationError::PromptNotFound(prompt_id.to_owned()))
    }

    /// Continues one of the user's `interrupted` prompts where its process left it, in this
    /// process: the last prompt of its conversation, while nothing else holds it. A classic
    /// prompt redoes the round in flight; a code prompt replays its script from its journal.
    /// A tool call that was running when the process stopped runs again only if its tool is
    /// idempotent. Returns the prompt, running and holding its conversation, to be run.
    pub async fn continue_prompt(
        &self,
        user_id: &str,
        prompt_id: &str,
    ) -> Result<StartedPrompt, ConversationError> {
        let not = |why: String| ConversationError::NotContinuable {
            prompt_id: prompt_id.to_owned(),
            why,
        };
        let mut stored = self.prompt(user_id, prompt_id).await?;
        if stored.prompt.state != PromptState::Interrupted {
            return Err(not(format!(
                "it is {}, and only an interrupted prompt can be continued",
                stored.prompt.state.as_str()
            )));
        }
        let later = self
            .inner
            .store
            .conversation_prompts(&stored.conversation_id)
            .await?
            .iter()
            .any(|other| other.position > stored.position);
        if later {
            return Err(not(
                "a later prompt of its conversation has run since; continue from there instead"
                    .to_owned(),
            ));
        }
        if let Err(holder) = self
            .inner
            .store
            .claim(&stored.conversation_id, prompt_id)
            .await?
        {
            return Err(ConversationError::Busy {
                conversation_id: stored.conversation_id.clone(),
                prompt_id: holder,
            });
        }
        stored.prompt.state = PromptState::Running;
        stored.prompt.error = None;
        let started = async {
            self.inner
                .store
                .save_prompt(&stored.prompt, PromptChange::Prompt)
                .await?;
            self.executor_for(&stored).await
        }
        .await;
        let handle = match started {
            Ok(handle) => handle,
            Err(error) => {
                // Left as it was: interrupted, its conversation free.
                stored.prompt.state = PromptState::Interrupted;
                self.inner
                    .store
                    .save_prompt(&stored.prompt, PromptChange::Prompt)
                    .await?;
                self.inner
                    .store
                    .release(&stored.conversation_id, prompt_id, None)
                    .await?;
                return Err(error);
            }
        };
        tracing::info!(prompt = %prompt_id, "continuing an interrupted prompt");
        Ok(StartedPrompt {
            service: self.clone(),
            conversation_id: stored.conversation_id,
            prompt_id: prompt_id.to_owned(),
            handle,
        })
    }

    /// From now on (under `agentic serve`), this service takes over the running prompts of
    /// servers on the same database that died, in modes that can resume: tool calls that were
    /// running there get an error result saying so (they are not run again), and the round in
    /// flight is asked again, here. Checked every 2 s.
    pub fn take_over_prompts(&self) {
        if self
            .inner
            .takeover
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        tokio::spawn(take_over_loop(Arc::downgrade(&self.inner)));
    }

    /// Resumes prompts this service took over, each in its own task.
    async fn resume_taken(&self) -> anyhow::Result<()> {
        let taken = self
            .inner
            .store
            .take_over(&resumable(&self.inner.runtime))
            .await?;
        for stored in taken {
            let prompt_id = stored.prompt.id.clone();
            if self.cancel_taken_over(&stored).await? {
                tracing::warn!(prompt = %prompt_id, "cancelled a prompt taken over from a stopped server, as asked");
                continue;
            }
            tracing::warn!(prompt = %prompt_id, "taking over a prompt whose server stopped");
            // The executor sorts out the calls that were running there: a call that may have
            // taken effect is not run again unless its tool is idempotent, and the model
            // reads why.
            let handle = self.executor_for(&stored).await?;
            let service = self.clone();
            let conversation_id = stored.conversation_id.clone();
            tokio::spawn(async move {
                let result = service.inner.runtime.prompts().run(&handle).await;
                if let Err(error) = settle(&service.inner, &conversation_id, &handle, result).await
                {
                    tracing::warn!(prompt = %prompt_id, %error, "a prompt taken over failed");
                }
            });
        }
        Ok(())
    }

    /// An executor for a stored prompt, with its conversation's history and state.
    async fn executor_for(
        &self,
        stored: &StoredPrompt,
    ) -> Result<agentic_core::ExecutorHandle, ConversationError> {
        let conversation = self
            .inner
            .store
            .conversation(&stored.prompt.user_id, &stored.conversation_id)
            .await?
            .ok_or_else(|| ConversationError::NotFound(stored.conversation_id.clone()))?;
        let all = self
            .inner
            .store
            .conversation_prompts(&conversation.id)
            .await?;
        let history = history_before(&conversation, &all, stored.position);
        Ok(self.inner.runtime.prompts().create(PromptOptions {
            user_id: stored.prompt.user_id.clone(),
            input: stored.prompt.input.clone(),
            model: stored.prompt.model,
            mode: Some(stored.prompt.mode.clone()),
            history,
            state: State::from_map(conversation.state.clone()),
            max_rounds: None,
            resume_prompt: Some(stored.prompt.clone()),
            checkpoint: Some(self.checkpoint()),
            conversation_id: Some(conversation.id.clone()),
        })?)
    }

    /// From now on, when a decision is stored for a prompt that a live server other than this
    /// one holds, that server is woken to apply it.
    pub fn forward_decisions(&self, forwarder: Arc<dyn DecisionForwarder>) {
        let _ = self.inner.forwarder.set(forwarder);
    }

    fn checkpoint(&self) -> Arc<dyn PromptCheckpoint> {
        Arc::new(StoreCheckpoint {
            store: self.inner.store.clone(),
        })
    }

    fn instance_of(&self, conversation: Conversation) -> ConversationInstance {
        ConversationInstance {
            service: self.clone(),
            conversation,
        }
    }
}

/// One conversation of one user.
#[derive(Clone)]
pub struct ConversationInstance {
    service: ConversationService,
    conversation: Conversation,
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
    service: ConversationService,
    conversation_id: String,
    prompt_id: String,
    handle: ExecutorHandle,
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
async fn settle(
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

/// Which prompts can wait for approval across a restart: those of modes that say so.
fn resumable(runtime: &Runtime) -> impl Fn(&Prompt) -> bool + Send + Sync + use<> {
    let services = runtime.services().clone();
    move |prompt: &Prompt| {
        services
            .modes
            .get(&prompt.mode)
            .is_ok_and(|mode| mode.resumes_after_restart())
    }
}

/// A service renews its lease, and sweeps prompts of instances that are gone, four times
/// per lease.
async fn keep_alive(inner: std::sync::Weak<Inner>) {
    let every = match inner.upgrade() {
        Some(inner) => inner.store.lease() / 4,
        None => return,
    };
    let mut ticks = tokio::time::interval(every);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        if let Err(error) = inner.store.heartbeat().await {
            tracing::warn!(error = %format!("{error:#}"), "could not renew the instance lease");
        }
        // Prompts this server can take over are taken before the sweep would interrupt them.
        if inner.takeover.load(std::sync::atomic::Ordering::SeqCst) {
            let service = ConversationService {
                inner: inner.clone(),
            };
            if let Err(error) = service.resume_taken().await {
                tracing::warn!(error = %format!("{error:#}"), "could not take over prompts of stopped servers");
            }
        }
        if !inner.takeover.load(std::sync::atomic::Ordering::SeqCst) {
            let service = ConversationService {
                inner: inner.clone(),
            };
            if let Err(error) = service.sweep_decisions(false).await {
                tracing::warn!(error = %format!("{error:#}"), "could not apply stored decisions");
            }
        }
        if let Err(error) = inner.store.recover(&resumable(&inner.runtime)).await {
            tracing::warn!(error = %format!("{error:#}"), "could not sweep prompts of stopped instances");
        }
        if let Err(error) = inner.store.prune_journals().await {
            tracing::warn!(error = %format!("{error:#}"), "could not prune the journals of ended prompts");
        }
    }
}

/// How often a server looks for prompts of servers that died (see `take_over_prompts`).
const TAKE_OVER_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

async fn take_over_loop(inner: std::sync::Weak<Inner>) {
    let mut ticks = tokio::time::interval(TAKE_OVER_EVERY);
    loop {
        ticks.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let service = ConversationService { inner };
        if let Err(error) = service.resume_taken().await {
            tracing::warn!(error = %format!("{error:#}"), "could not take over prompts of stopped servers");
        }
        if let Err(error) = service.sweep_decisions(true).await {
            tracing::warn!(error = %format!("{error:#}"), "could not apply stored decisions");
        }
    }
}

/// Writes every change of a prompt to the store before the executor's next step.
struct StoreCheckpoint {
    store: Store,
}

#[async_trait]
impl PromptCheckpoint for StoreCheckpoint {
    async fn save(&self, prompt: &Prompt, change: PromptChange) -> anyhow::Result<()> {
        self.store.save_prompt(prompt, change).await
    }

    async fn append_journal(
        &self,
        prompt_id: &str,
        entry: serde_json::Value,
    ) -> anyhow::Result<()> {
        self.store.append_journal(prompt_id, &entry).await
    }

    async fn journal(&self, prompt_id: &str) -> anyhow::Result<Vec<serde_json::Value>> {
        self.store.journal_entries(prompt_id).await
    }
}

/// The history a prompt at `position` sees: the summary (if any) in place of the archived
/// prompts, then every later prompt that ended, in order.
fn history_before(
    conversation: &Conversation,
    prompts: &[StoredPrompt],
    position: i64,
) -> Vec<Prompt> {
    let mut history = Vec::new();
    if let Some(summary) = &conversation.summary {
        history.push(summary_prompt(&conversation.user_id, summary));
    }
    history.extend(
        prompts
            .iter()
            .filter(|stored| {
                stored.position < position && !stored.archived && stored.prompt.state.is_finished()
            })
            .map(|stored| stored.prompt.clone()),
    );
    history
}

/// The first line of the input, cut at a word boundary to about 60 characters.
pub fn title_from_input(input: &str) -> String {
    let line = input
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or_default();
    if line.chars().count() <= TITLE_CHARS {
        return line.to_owned();
    }
    let cut: String = line.chars().take(TITLE_CHARS).collect();
    let cut = match cut.rfind(char::is_whitespace) {
        Some(space) if space > TITLE_CHARS / 2 => cut[..space].to_owned(),
        _ => cut,
    };
    format!("{}…", cut.trim_end())
}

#[cfg(test)]
mod tests {
    use super::title_from_input;

    #[test]
    fn titles_come_from_the_first_line_cut_at_a_word() {
        assert_eq!(
            title_from_input("  \nWhat time is it?\nmore"),
            "What time is it?"
        );
        let long =
            "Please summarise every open issue in the tracker and tell me which one to start with";
        let title = title_from_input(long);
        assert!(title.ends_with('…'), "{title}");
        assert!(title.chars().count() <= 61, "{title}");
        assert!(long.starts_with(title.trim_end_matches('…')));
    }
}
