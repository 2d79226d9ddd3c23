//! Context compression: when the history a prompt would send passes its budget, the model
//! summarises the oldest prompts, the summary takes their place in history, and the originals
//! stay in the database marked archived. Plugins that want the archived originals (e.g. to
//! file them in long-term memory) register a [`CompressionHook`] from `setup()`.

use std::collections::BTreeMap;
use std::sync::Arc;

use agentic_core::history::{
    COMPACT_RESULT_CHARS, SUMMARY_MODE, compact_prompt_messages, history_messages,
};
use agentic_core::plugin::SetupContext;
use agentic_core::tokens::estimate_message_tokens;
use agentic_core::{ChatMessage, ChatRole, Config, ModelKind, ModelRequest, Prompt, Services};
use anyhow::{Context as _, ensure};
use async_trait::async_trait;
use serde::Deserialize;

use crate::store::{Conversation, Store};

/// The `conversation` config section.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct CompressionSettings {
    /// Tokens a model can read, for models not named in `contextWindows`.
    pub context_window: u64,
    /// Context windows by model name (as the provider calls it) or by `normal` / `high`.
    pub context_windows: BTreeMap<String, u64>,
    /// Compress once the history passes this share of the window.
    pub compress_at: f64,
    /// The most recent prompts, always kept verbatim.
    pub keep_recent: usize,
    /// Whether `agentic serve` takes over the running prompts of a server on the same database
    /// that died; otherwise they stay `interrupted` for a person to continue.
    pub takeover: bool,
    /// How long a server on another host counts as alive after its last heartbeat (sent
    /// every quarter of this): the longest a takeover waits for a dead server's prompts.
    /// Servers on one host see each other's processes and need no lease.
    pub lease_seconds: u64,
}

impl Default for CompressionSettings {
    fn default() -> Self {
        Self {
            context_window: 128_000,
            context_windows: BTreeMap::new(),
            compress_at: 0.8,
            keep_recent: 4,
            takeover: true,
            lease_seconds: 60,
        }
    }
}

impl CompressionSettings {
    pub fn from_config(config: &Config) -> anyhow::Result<Self> {
        let section = config.section("conversation");
        let settings: Self = if section.is_null() {
            Self::default()
        } else {
            serde_json::from_value(section).context("invalid `conversation` config section")?
        };
        ensure!(
            settings.compress_at > 0.0 && settings.compress_at <= 1.0,
            "conversation.compressAt must be in (0, 1], got {}",
            settings.compress_at
        );
        ensure!(
            settings.keep_recent >= 1,
            "conversation.keepRecent must be at least 1"
        );
        ensure!(
            (2..=86_400).contains(&settings.lease_seconds),
            "conversation.leaseSeconds must be from 2 to 86400, got {}",
            settings.lease_seconds
        );
        Ok(settings)
    }
}

/// What one compression did.
#[derive(Debug, Clone, PartialEq)]
pub struct Compressed {
    pub summary: String,
    pub archived: Vec<String>,
}

/// Told about the prompts each compression took out of the live history, once they are
/// archived. A hook's error is logged and never fails the prompt that triggered compression.
#[async_trait]
pub trait CompressionHook: Send + Sync {
    async fn archived(&self, archived: &ArchivedHistory) -> anyhow::Result<()>;
}

/// What one compression archived, as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchivedHistory {
    pub user_id: String,
    pub conversation_id: String,
    /// The summary that now stands for these prompts (and any earlier summary).
    pub summary: String,
    /// The archived prompts, oldest first.
    pub prompts: Vec<ArchivedPrompt>,
}

/// One archived prompt: its id and a transcript (`User: …`, `Assistant: …` lines, tool
/// results cut to [`COMPACT_RESULT_CHARS`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchivedPrompt {
    pub prompt_id: String,
    pub text: String,
}

/// Registers a hook from a plugin's `setup()`; hooks run in registration order.
pub fn register_compression_hook(context: &mut SetupContext<'_>, hook: Arc<dyn CompressionHook>) {
    context
        .extensions
        .get_or_insert_default::<CompressionHooks>()
        .push(hook);
}

/// The hooks plugins registered, kept in the runtime's extensions.
pub type CompressionHooks = crate::registry::Registry<Arc<dyn CompressionHook>>;

pub(crate) struct Compressor {
    services: Arc<Services>,
    settings: CompressionSettings,
}

const SUMMARY_INSTRUCTIONS: &str = "You compress the history of a conversation between a user \
and an assistant that uses tools. Summarise the conversation you are given in plain prose. \
Keep every fact, name, number, decision, tool result and open question a later answer could \
need; drop pleasantries and repetition. Start directly with the summary.";

impl Compressor {
    pub(crate) fn new(services: Arc<Services>, settings: CompressionSettings) -> Self {
        Self { services, settings }
    }

    /// The window for the model a prompt will use.
    fn window(&self, model: ModelKind) -> u64 {
        let name = self
            .services
            .completion
            .provider()
            .map(|provider| provider.model_name(model));
        name.and_then(|name| self.settings.context_windows.get(&name).copied())
            .or_else(|| self.settings.context_windows.get(model.as_str()).copied())
            .unwrap_or(self.settings.context_window)
    }

    /// Compresses when `history` (what a `mode` prompt would be sent: the summary stand-in,
    /// then the live prompts) passes the budget. A failed summary is logged and the prompt goes
    /// on with its history whole.
    pub(crate) async fn compress_if_needed(
        &self,
        store: &Store,
        conversation: &Conversation,
        history: &[Prompt],
        mode: &str,
        model: ModelKind,
    ) -> Option<Compressed> {
        let live: Vec<&Prompt> = history
            .iter()
            .filter(|prompt| prompt.mode != SUMMARY_MODE)
            .collect();
        let limit = self.services.limits().tool_result_limit;
        let tokens: u64 = history
            .iter()
            .flat_map(|prompt| history_messages(prompt, mode, limit))
            .map(|message| estimate_message_tokens(&message))
            .sum();
        let window = self.window(model);
        let budget = (window as f64 * self.settings.compress_at) as u64;
        if tokens <= budget {
            return None;
        }
        if live.len() <= self.settings.keep_recent {
            tracing::warn!(
                conversation = %conversation.id,
                tokens,
                budget,
                "history is over budget but holds only the prompts kept verbatim"
            );
            return None;
        }
        let old = &live[..live.len() - self.settings.keep_recent];
        match self.summarise(conversation.summary.as_deref(), old).await {
            Ok(summary) => {
                let archived: Vec<String> = old.iter().map(|prompt| prompt.id.clone()).collect();
                if let Err(error) = store.archive(&conversation.id, &archived, &summary).await {
                    tracing::error!(conversation = %conversation.id, error = %error, "could not archive compressed prompts");
                    return None;
                }
                tracing::info!(
                    conversation = %conversation.id,
                    tokens,
                    budget,
                    archived = archived.len(),
                    "compressed the conversation history"
                );
                self.run_hooks(conversation, &summary, old).await;
                Some(Compressed { summary, archived })
            }
            Err(error) => {
                tracing::warn!(conversation = %conversation.id, error = %format!("{error:#}"), "could not summarise the history; sending it whole");
                None
            }
        }
    }

    /// Hands the archived prompts to every registered hook; failures are only logged, since
    /// the originals stay in the database either way.
    async fn run_hooks(&self, conversation: &Conversation, summary: &str, prompts: &[&Prompt]) {
        let Some(hooks) = self.services.extensions.get::<CompressionHooks>() else {
            return;
        };
        let hooks = hooks.list();
        if hooks.is_empty() {
            return;
        }
        let archived = ArchivedHistory {
            user_id: conversation.user_id.clone(),
            conversation_id: conversation.id.clone(),
            summary: summary.to_owned(),
            prompts: prompts
                .iter()
                .map(|prompt| ArchivedPrompt {
                    prompt_id: prompt.id.clone(),
                    text: prompt_transcript(prompt, COMPACT_RESULT_CHARS),
                })
                .collect(),
        };
        for hook in hooks {
            if let Err(error) = hook.archived(&archived).await {
                tracing::error!(conversation = %conversation.id, error = %format!("{error:#}"), "a compression hook failed");
            }
        }
    }

    async fn summarise(
        &self,
        earlier: Option<&str>,
        prompts: &[&Prompt],
    ) -> anyhow::Result<String> {
        let mut transcript = String::new();
        if let Some(earlier) = earlier {
            transcript.push_str("Summary of what came before:\n");
            transcript.push_str(earlier);
            transcript.push_str("\n\n");
        }
        transcript.push_str("Conversation to summarise:\n");
        for prompt in prompts {
            transcript.push_str(&prompt_transcript(prompt, 500));
        }
        let request = ModelRequest::new(
            ModelKind::Normal,
            vec![
                ChatMessage::system(SUMMARY_INSTRUCTIONS),
                ChatMessage::user(transcript),
            ],
        );
        let response = self
            .services
            .completion
            .complete_text(request)
            .await
            .context("the summary request failed")?;
        let summary = response.text.trim().to_owned();
        ensure!(!summary.is_empty(), "the model returned an empty summary");
        Ok(summary)
    }
}

/// A prompt as `User: …` / `Assistant: …` lines, each ending in a newline.
fn prompt_transcript(prompt: &Prompt, result_chars: usize) -> String {
    let mut text = String::new();
    for message in compact_prompt_messages(prompt, result_chars) {
        let who = match message.role {
            ChatRole::User => "User",
            _ => "Assistant",
        };
        text.push_str(&format!("{who}: {}\n", message.content));
    }
    text
}
