//! [`Agent`]: a runtime, its stored conversations and the choices a program makes once (the
//! model, the mode, the tools, who approves), behind one builder.

use std::sync::Arc;

use agentic_conversation::{ConversationError, ConversationService, PromptRequest};
use agentic_core::{
    Config, EventSubscription, ModelProvider, Plugin, PrepareContext, Prompt, PromptOutput,
    PromptState, Runtime, Tool, ToolOutput, Verdict,
};
use anyhow::Context as _;
use async_trait::async_trait;
use serde_json::Value;

/// The user an agent's conversations belong to unless [`AgentBuilder::user`] says otherwise.
const DEFAULT_USER: &str = "agent";
/// The store unless [`AgentBuilder::store`] names one: kept in memory, gone with the process.
const MEMORY_STORE: &str = "sqlite::memory:";
/// The plugin that offers the tools given to [`AgentBuilder::tool`].
const APP_PLUGIN: &str = "app";

type Decide = dyn Fn(&ApprovalRequest<'_>) -> Option<Verdict> + Send + Sync;

/// An agent: send it a message with [`Agent::run`], get its answer and what it did.
#[derive(Clone)]
pub struct Agent {
    conversations: ConversationService,
    mode: String,
    user: String,
    leave_out: Vec<String>,
    decide: Option<Arc<Decide>>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("mode", &self.mode)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// A tool call that waits for a person, as [`AgentBuilder::on_approval`] is asked about it.
#[derive(Debug)]
#[non_exhaustive]
pub struct ApprovalRequest<'a> {
    /// The call: its tool (`function`), its input and its id.
    pub call: &'a ToolOutput,
    /// Why the tool asks, in its words.
    pub reason: &'a str,
    /// The prompt the call belongs to.
    pub prompt: &'a Prompt,
}

/// What one message to an agent came to.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Reply {
    /// The conversation the message went to: give it to [`Agent::continue_with`] to go on.
    pub conversation_id: String,
    /// The prompt, its whole timeline included.
    pub prompt: Prompt,
}

impl Reply {
    /// The answer: the text the agent ended with.
    pub fn answer(&self) -> String {
        self.prompt.text()
    }

    /// Everything the agent did and said, in order: texts, tool calls with their results,
    /// files.
    pub fn timeline(&self) -> &[PromptOutput] {
        &self.prompt.output
    }

    /// Where the prompt stands: `completed`, `failed`, or `waiting_for_approval` when a tool
    /// call waits for a person that [`AgentBuilder::on_approval`] did not decide.
    pub fn state(&self) -> PromptState {
        self.prompt.state
    }

    /// The tool calls that wait for a person: decide each with [`Agent::decide`].
    pub fn waiting(&self) -> Vec<&ToolOutput> {
        self.prompt.calls_awaiting_approval()
    }
}

impl Agent {
    /// A builder. Call it early in `main`: when this process was started as a code-mode
    /// sandbox worker, it serves scripts and exits here (see [`crate::run_worker_if_requested`]).
    pub fn builder() -> AgentBuilder {
        crate::run_worker_if_requested();
        AgentBuilder::default()
    }

    /// Sends `message` in a new conversation and works until the answer, a failure, or a tool
    /// call that waits for a person nobody set up to decide.
    pub async fn run(&self, message: &str) -> anyhow::Result<Reply> {
        self.send(None, message).await
    }

    /// Sends `message` in the conversation `conversation_id` (from an earlier [`Reply`]): the
    /// model sees what was said there before.
    pub async fn continue_with(
        &self,
        conversation_id: &str,
        message: &str,
    ) -> anyhow::Result<Reply> {
        self.send(Some(conversation_id), message).await
    }

    /// Approves or rejects a call that waits (one of [`Reply::waiting`]), and works on.
    pub async fn decide(
        &self,
        reply: &Reply,
        tool_call_id: &str,
        verdict: Verdict,
    ) -> anyhow::Result<Reply> {
        let prompt = self
            .conversations
            .decide(&self.user, &reply.prompt.id, tool_call_id, verdict)
            .await
            .map_err(explain)?;
        self.settle(reply.conversation_id.clone(), prompt).await
    }

    /// Every event of this agent's prompts from now on (texts as they stream, tool calls,
    /// approvals), for a program that shows progress.
    pub fn events(&self) -> EventSubscription {
        self.conversations
            .runtime()
            .services()
            .events
            .subscribe(Some(&self.user))
    }

    /// The conversations underneath, for what the agent does not cover (listing, deleting,
    /// several users).
    pub fn conversations(&self) -> &ConversationService {
        &self.conversations
    }

    /// The runtime underneath: its plugins, modes and model.
    pub fn runtime(&self) -> &Arc<Runtime> {
        self.conversations.runtime()
    }

    async fn send(&self, conversation_id: Option<&str>, message: &str) -> anyhow::Result<Reply> {
        let mut conversation = self
            .conversations
            .get_or_create(&self.user, conversation_id)
            .await
            .map_err(explain)?;
        let state = if self.leave_out.is_empty() {
            None
        } else {
            Some(self.runtime().services().leave_out_state(&self.leave_out)?)
        };
        let prompt = conversation
            .prompt(PromptRequest {
                input: Some(message.to_owned()),
                mode: Some(self.mode.clone()),
                state,
                ..PromptRequest::default()
            })
            .await
            .map_err(explain)?;
        self.settle(conversation.id().to_owned(), prompt).await
    }

    /// Puts each waiting call to the agent's `on_approval`, if it has one, until the prompt
    /// ends or waits for someone else.
    async fn settle(&self, conversation_id: String, mut prompt: Prompt) -> anyhow::Result<Reply> {
        while let Some(decide) = &self.decide {
            if prompt.state != PromptState::WaitingForApproval {
                break;
            }
            let Some(call) = prompt
                .calls_awaiting_approval()
                .first()
                .map(|call| (*call).clone())
            else {
                break;
            };
            let reason = match &call.result {
                agentic_core::ToolResult::Pending { reason, .. } => reason.clone(),
                _ => String::new(),
            };
            let Some(verdict) = decide(&ApprovalRequest {
                call: &call,
                reason: &reason,
                prompt: &prompt,
            }) else {
                // Left for a person: the reply waits, and `Agent::decide` goes on.
                break;
            };
            prompt = self
                .conversations
                .decide(&self.user, &prompt.id, &call.id, verdict)
                .await
                .map_err(explain)?;
        }
        Ok(Reply {
            conversation_id,
            prompt,
        })
    }
}

fn explain(error: ConversationError) -> anyhow::Error {
    anyhow::Error::new(error)
}

/// Builds an [`Agent`]; every choice has a default, so `Agent::builder().build()` is an agent
/// in classic mode with the enabled plugins, the provider the environment selects, and its
/// conversations in memory.
#[derive(Default)]
#[must_use]
pub struct AgentBuilder {
    config: Option<Config>,
    sections: Vec<(String, Value)>,
    model: Option<String>,
    provider: Option<Arc<dyn ModelProvider>>,
    mode: Option<String>,
    tools: Vec<Arc<dyn Tool>>,
    plugins: Vec<Arc<dyn Plugin>>,
    leave_out: Vec<String>,
    store: Option<String>,
    user: Option<String>,
    decide: Option<Arc<Decide>>,
}

impl std::fmt::Debug for AgentBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("model", &self.model)
            .field("mode", &self.mode)
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

impl AgentBuilder {
    /// The model, as a provider spec: `local` (the embedded model), `openai` or
    /// `openai:<model>` (any OpenAI-compatible server, from `OPENAI_BASE_URL` and
    /// `OPENAI_API_KEY`), `script:<turns.yaml>` (scripted turns). Without one, the
    /// environment's `AGENTIC_PROVIDER`, else the first provider whose settings are present.
    pub fn model(mut self, spec: &str) -> Self {
        self.model = Some(spec.to_owned());
        self
    }

    /// A model provider of the program's own, instead of a spec.
    pub fn provider(mut self, provider: Arc<dyn ModelProvider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// How the agent works: [`crate::mode::CLASSIC`] (the default) or [`crate::mode::CODE`],
    /// or a mode a plugin adds.
    pub fn mode(mut self, mode: &str) -> Self {
        self.mode = Some(mode.to_owned());
        self
    }

    /// A tool of the program's own, e.g. from [`crate::define_tool`]. Its id (`weather.today`)
    /// is how the model calls it.
    pub fn tool(mut self, tool: impl Into<Arc<dyn Tool>>) -> Self {
        self.tools.push(tool.into());
        self
    }

    /// A plugin of the program's own, beside those the features link.
    pub fn plugin(mut self, plugin: impl Plugin + 'static) -> Self {
        self.plugins.push(Arc::new(plugin));
        self
    }

    /// Leaves out plugins by id (`shell`, `web`, …): the model is not offered their tools.
    pub fn without(mut self, plugin_ids: &[&str]) -> Self {
        self.leave_out
            .extend(plugin_ids.iter().map(|id| (*id).to_owned()));
        self
    }

    /// The whole configuration, as `agentic.toml` holds it.
    pub fn config(mut self, config: Config) -> Self {
        self.config = Some(config);
        self
    }

    /// One section of the configuration, e.g. `("interpreter", json!({"sandbox": {…}}))`;
    /// it is checked against the plugin's schema when the agent is built.
    pub fn section(mut self, id: &str, value: Value) -> Self {
        self.sections.push((id.to_owned(), value));
        self
    }

    /// Where conversations are kept: a SQLite URL (`sqlite://agent.db?mode=rwc`) or a
    /// PostgreSQL one. In memory by default.
    pub fn store(mut self, url: &str) -> Self {
        self.store = Some(url.to_owned());
        self
    }

    /// The user the agent's conversations belong to (`agent` by default).
    pub fn user(mut self, id: &str) -> Self {
        self.user = Some(id.to_owned());
        self
    }

    /// Decides, in code, the tool calls that wait for a person: a [`Verdict`], or `None` to
    /// leave the call to a person. A call left (or every call, without this) makes
    /// [`Agent::run`] return a [`Reply`] that waits, and [`Agent::decide`] goes on.
    pub fn on_approval(
        mut self,
        decide: impl Fn(&ApprovalRequest<'_>) -> Option<Verdict> + Send + Sync + 'static,
    ) -> Self {
        self.decide = Some(Arc::new(decide));
        self
    }

    /// Sets up the plugins, selects the model and opens the store.
    pub async fn build(self) -> anyhow::Result<Agent> {
        let mut config = self.config.unwrap_or_default();
        for (id, value) in self.sections {
            config = config.with_section(&id, value);
        }
        let mut runtime = Runtime::builder().config(config).registered_plugins();
        for plugin in crate::linked::plugins() {
            runtime = runtime.plugin(plugin);
        }
        for plugin in self.plugins {
            runtime = runtime.plugin(plugin);
        }
        if !self.tools.is_empty() {
            runtime = runtime.plugin(Arc::new(AppTools { tools: self.tools }));
        }
        if let Some(provider) = self.provider {
            runtime = runtime.provider(provider);
        } else if let Some(spec) = &self.model {
            runtime = runtime.provider_spec(spec);
        }
        let runtime = runtime.build().await?;
        let mode = self.mode.unwrap_or_else(|| crate::mode::CLASSIC.to_owned());
        let modes: Vec<String> = runtime
            .services()
            .modes
            .list()
            .iter()
            .map(|mode| mode.id().to_owned())
            .collect();
        if !modes.contains(&mode) {
            let hint = if mode == crate::mode::CODE {
                "; enable the `code` feature of agentic"
            } else {
                ""
            };
            anyhow::bail!(
                "no mode \"{mode}\" in this build (modes: {}){hint}",
                modes.join(", ")
            );
        }
        runtime.services().check_plugin_ids(&self.leave_out)?;
        let store = self.store.as_deref().unwrap_or(MEMORY_STORE);
        let conversations = ConversationService::open(Arc::new(runtime), store)
            .await
            .with_context(|| format!("could not open the conversation store {store}"))?;
        Ok(Agent {
            conversations,
            mode,
            user: self.user.unwrap_or_else(|| DEFAULT_USER.to_owned()),
            leave_out: self.leave_out,
            decide: self.decide,
        })
    }
}

/// Offers the tools given to [`AgentBuilder::tool`] to every prompt.
struct AppTools {
    tools: Vec<Arc<dyn Tool>>,
}

#[async_trait]
impl Plugin for AppTools {
    fn id(&self) -> &str {
        APP_PLUGIN
    }

    async fn prepare(&self, context: &mut PrepareContext) -> anyhow::Result<()> {
        for tool in &self.tools {
            context.add_tool(tool.clone());
        }
        Ok(())
    }
}
