//! Where the CLI's commands run: in this process ([`LocalBackend`]) or on an `agentic serve`
//! ([`crate::remote::Remote`]). Both answer with the API's own types, so every command prints
//! the same thing whichever ran it.

use std::sync::Arc;

use agentic_api::types::{ToolDetail, ToolSummary};
use agentic_conversation::{Conversation, ConversationError, ConversationService};
use agentic_core::scope::ScopeGrant;
use agentic_core::{Approval, Capabilities, Prepared, Runtime, State, ToolContext};
use async_trait::async_trait;
use serde_json::Value;

use crate::local::USER;
use crate::ui::{PromptDriver, PromptSettings};

/// Why a prompt did not start.
#[derive(Debug)]
pub(crate) enum StartError {
    /// The caller's mistake (an unknown conversation or mode): exit code 2.
    Usage(String),
    /// Anything else: exit code 1.
    Failed(anyhow::Error),
}

/// The commands' side of a backend.
#[async_trait]
pub(crate) trait Backend: Send + Sync {
    /// The user's conversations, most recent first.
    async fn conversations(&self) -> anyhow::Result<Vec<Conversation>>;
    async fn tools(&self) -> anyhow::Result<Vec<ToolSummary>>;
    async fn tool(&self, id: &str) -> anyhow::Result<ToolDetail>;
    /// Runs one tool: `Ok(Err(message))` when the tool failed or was refused.
    /// Runs one tool; `yes` approves it when it needs approval (a server decides itself).
    async fn invoke(
        &self,
        id: &str,
        input: Value,
        yes: bool,
    ) -> anyhow::Result<Result<Value, String>>;
    async fn capabilities(&self) -> anyhow::Result<Capabilities>;
    /// Starts a prompt in `conversation` (a new one when `None`) and follows it.
    async fn start(
        &self,
        conversation: Option<&str>,
        message: String,
        settings: &PromptSettings,
    ) -> Result<Box<dyn PromptDriver>, StartError>;
    /// One of the user's prompts as a test case, in YAML (`agentic export`).
    async fn export(&self, prompt_id: &str) -> anyhow::Result<String>;
    /// The user's approval scopes in force, of one conversation or all.
    async fn scopes(&self, conversation: Option<&str>) -> anyhow::Result<Vec<ScopeGrant>>;
    /// Revokes one of the user's scopes; the scope as revoked.
    async fn revoke_scope(&self, id: &str) -> anyhow::Result<ScopeGrant>;
    /// Ends the backend's work before the process exits.
    async fn close(&self) -> anyhow::Result<()> {
        Ok(())
    }
}

/// Prompts and tools in this process, on the local database.
pub(crate) struct LocalBackend {
    pub runtime: Arc<Runtime>,
    pub service: ConversationService,
}

impl LocalBackend {
    async fn prepare(&self) -> anyhow::Result<Prepared> {
        self.runtime
            .services()
            .prepare(USER, "cli", "classic", &State::default())
            .await
    }
}

#[async_trait]
impl Backend for LocalBackend {
    async fn conversations(&self) -> anyhow::Result<Vec<Conversation>> {
        Ok(self.service.list(USER).await?)
    }

    async fn tools(&self) -> anyhow::Result<Vec<ToolSummary>> {
        Ok(ToolSummary::all(&self.prepare().await?))
    }

    async fn tool(&self, id: &str) -> anyhow::Result<ToolDetail> {
        ToolDetail::of(&self.prepare().await?, id)
            .ok_or_else(|| anyhow::anyhow!("unknown tool \"{id}\""))
    }

    async fn invoke(
        &self,
        id: &str,
        input: Value,
        yes: bool,
    ) -> anyhow::Result<Result<Value, String>> {
        let prepared = self.prepare().await?;
        // A tool that needs approval is asked about on the terminal, as in a prompt.
        if let Approval::Required { reason } = prepared.tools.approval(id, &input)
            && let Err(refusal) = crate::ui::decide(id, &reason, &input, yes)
        {
            return Ok(Err(refusal));
        }
        let context = ToolContext::new(
            USER,
            "cli",
            State::default(),
            self.runtime.services().clone(),
        );
        Ok(prepared
            .tools
            .invoke(context, id, input)
            .await
            .map_err(|error| error.to_string()))
    }

    async fn capabilities(&self) -> anyhow::Result<Capabilities> {
        Ok(self.runtime.services().capabilities())
    }

    async fn start(
        &self,
        conversation: Option<&str>,
        message: String,
        settings: &PromptSettings,
    ) -> Result<Box<dyn PromptDriver>, StartError> {
        match crate::local::start(&self.service, conversation, message, settings).await {
            Ok(driver) => Ok(Box::new(driver)),
            Err(ConversationError::NotFound(id)) => Err(StartError::Usage(format!(
                "no conversation \"{id}\"; `agentic conversations` lists yours"
            ))),
            Err(error) => Err(StartError::Failed(error.into())),
        }
    }

    async fn export(&self, prompt_id: &str) -> anyhow::Result<String> {
        let case = agentic_api::export::export_case(&self.service, USER, prompt_id).await?;
        agentic_api::export::case_yaml(&case)
    }

    async fn scopes(&self, conversation: Option<&str>) -> anyhow::Result<Vec<ScopeGrant>> {
        Ok(self.service.scopes(USER, conversation).await?)
    }

    async fn revoke_scope(&self, id: &str) -> anyhow::Result<ScopeGrant> {
        Ok(self.service.revoke_scope(USER, id).await?)
    }

    async fn close(&self) -> anyhow::Result<()> {
        self.service.shutdown().await.map(drop)
    }
}
