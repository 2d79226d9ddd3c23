//! Prompts run in this process, in conversations stored in the local database.

use agentic_conversation::{ConversationError, ConversationService, PromptRequest};
use agentic_core::{Event, EventSubscription, Prompt, Received, Verdict};
use async_trait::async_trait;
use tokio::task::JoinHandle;

use crate::ui::{PromptDriver, PromptSettings};

pub(crate) const USER: &str = "cli";

pub(crate) struct LocalPrompt {
    service: ConversationService,
    prompt_id: String,
    conversation_id: String,
    subscription: EventSubscription,
    /// The run (or the approval that runs it on) in progress, if any.
    task: Option<JoinHandle<Result<Prompt, ConversationError>>>,
    failure: Option<ConversationError>,
}

/// Stores and starts a prompt in `conversation` (a new one when `None`).
pub(crate) async fn start(
    service: &ConversationService,
    conversation: Option<&str>,
    message: String,
    settings: &PromptSettings,
) -> Result<LocalPrompt, ConversationError> {
    let state = settings
        .leave_out
        .as_deref()
        .map(|ids| service.runtime().services().leave_out_state(ids))
        .transpose()
        .map_err(ConversationError::Store)?;
    let mut conversation = service.get_or_create(USER, conversation).await?;
    // Subscribe before starting, so no event of the prompt is missed.
    // Lossless: `--json` prints every event of the prompt, however fast a script publishes.
    let subscription = service.runtime().services().events.subscribe_lossless(USER);
    let started = conversation
        .start(PromptRequest {
            input: Some(message),
            mode: Some(settings.mode.clone()),
            model: settings.model,
            state,
            ..PromptRequest::default()
        })
        .await?;
    let prompt_id = started.prompt_id().to_owned();
    let conversation_id = started.conversation_id().to_owned();
    Ok(LocalPrompt {
        service: service.clone(),
        prompt_id,
        conversation_id,
        subscription,
        task: Some(tokio::spawn(started.run())),
        failure: None,
    })
}

impl LocalPrompt {
    fn ours(&self, event: &Event) -> bool {
        event.payload.prompt_id() == Some(self.prompt_id.as_str())
    }

    /// This prompt's event, if `received` is one.
    fn take(&self, received: Received) -> anyhow::Result<Option<Event>> {
        match received {
            Received::Event(event) if self.ours(&event) => Ok(Some((*event).clone())),
            Received::Event(_) => Ok(None),
            // The subscription is lossless, so this does not happen; if it did, the output
            // would be incomplete, which is an error rather than a note.
            Received::Lagged(missed) => anyhow::bail!("{missed} events of the prompt were lost"),
        }
    }

    fn note(&mut self, result: Result<Result<Prompt, ConversationError>, tokio::task::JoinError>) {
        match result {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => self.failure = Some(error),
            Err(error) => {
                self.failure = Some(ConversationError::Store(anyhow::anyhow!(
                    "the prompt task failed: {error}"
                )))
            }
        }
    }
}

#[async_trait]
impl PromptDriver for LocalPrompt {
    fn conversation_id(&self) -> &str {
        &self.conversation_id
    }

    fn prompt_id(&self) -> &str {
        &self.prompt_id
    }

    async fn next_event(&mut self) -> anyhow::Result<Option<Event>> {
        loop {
            // Whatever already arrived comes first.
            while let Some(received) = self.subscription.try_next() {
                if let Some(event) = self.take(received)? {
                    return Ok(Some(event));
                }
            }
            let Some(task) = self.task.as_mut() else {
                return Ok(None);
            };
            tokio::select! {
                received = self.subscription.next() => match received {
                    Some(received) => if let Some(event) = self.take(received)? {
                        return Ok(Some(event));
                    },
                    None => return Ok(None),
                },
                result = task => {
                    self.task = None;
                    self.note(result);
                }
            }
        }
    }

    async fn decide(
        &mut self,
        tool_call_id: &str,
        verdict: Verdict,
        scope: Option<agentic_core::scope::Scope>,
    ) -> anyhow::Result<()> {
        self.settle().await;
        let (service, prompt, call) = (
            self.service.clone(),
            self.prompt_id.clone(),
            tool_call_id.to_owned(),
        );
        self.task = Some(tokio::spawn(async move {
            service
                .decide_with_scope(USER, &prompt, &call, verdict, scope)
                .await
        }));
        Ok(())
    }

    async fn finish(&mut self) -> anyhow::Result<Prompt> {
        self.settle().await;
        if let Some(error) = self.failure.take() {
            return Err(error.into());
        }
        Ok(self.service.prompt(USER, &self.prompt_id).await?.prompt)
    }
}

impl LocalPrompt {
    /// Waits for the run in progress: it stops at the approval request just seen.
    async fn settle(&mut self) {
        if let Some(task) = self.task.take() {
            let result = task.await;
            self.note(result);
        }
    }
}
