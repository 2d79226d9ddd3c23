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
mod expiry;
mod instance;
mod scopes;
mod takeover;

use crate::store::{Conversation, Recovery, Store, StoredPrompt};
pub use decisions::{Action, CancelOutcome, Decision, DecisionForwarder, WaitingCall};
use instance::settle;
pub use instance::{ConversationInstance, StartedPrompt};
use takeover::{keep_alive, resumable};

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
    #[error("{0}")]
    BadScope(String),
    /// A decision that cannot apply to the request it names (`calls` past its end).
    #[error("{0}")]
    BadDecision(String),
    #[error("scope \"{0}\" not found")]
    ScopeNotFound(String),
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
        scopes::attach(runtime.services(), &store);
        let settings = CompressionSettings::from_config(&runtime.services().config)?;
        let approval_timeout = expiry::approval_timeout(&runtime.services().config)?;
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
        if let Some(limit) = approval_timeout {
            tokio::spawn(expiry::expire_loop(Arc::downgrade(&service.inner), limit));
        }
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

    /// One of the user's prompts with its journal, and the earlier prompts of its conversation
    /// that the model saw (with theirs): what `agentic export` makes a test case of. A
    /// conversation's summary of archived prompts is not among them.
    pub async fn recorded_run(
        &self,
        user_id: &str,
        prompt_id: &str,
    ) -> Result<RecordedRun, ConversationError> {
        let stored = self.prompt(user_id, prompt_id).await?;
        let store = &self.inner.store;
        let mut history = Vec::new();
        for earlier in store.conversation_prompts(&stored.conversation_id).await? {
            if earlier.position < stored.position
                && !earlier.archived
                && earlier.prompt.state.is_finished()
            {
                let journal = store.journal_entries(&earlier.prompt.id).await?;
                history.push((earlier.prompt, journal));
            }
        }
        let journal = store.journal_entries(prompt_id).await?;
        Ok(RecordedRun {
            prompt: stored.prompt,
            journal,
            history,
        })
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
            replay: None,
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
/// A prompt with its journal and the earlier prompts of its conversation (see
/// [`ConversationService::recorded_run`]).
#[derive(Debug, Clone)]
pub struct RecordedRun {
    /// The prompt as stored.
    pub prompt: Prompt,
    /// Its journal, oldest entry first.
    pub journal: Vec<serde_json::Value>,
    /// The finished, unarchived prompts before it, oldest first, each with its journal.
    pub history: Vec<(Prompt, Vec<serde_json::Value>)>,
}

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
