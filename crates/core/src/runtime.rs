//! The runtime: plugins set up in order, the services they registered, and the prompt service
//! that dispatches each prompt to its execution mode.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{Context as _, bail};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::classic::classic_mode;
use crate::config::{Config, RuntimeLimits};
use crate::event::{EventPayload, EventService};
use crate::mode::{
    ExecutionModeService, ExecutorCreateOptions, ExecutorError, ModeError, PromptChange,
    PromptCheckpoint, PromptExecutor, Verdict,
};
use crate::plugin::{
    Extensions, Plugin, PrepareContext, Prepared, SetupContext, registered_plugins,
};
use crate::prompt::{DEFAULT_MODE, ModelKind, Prompt, PromptState};
use crate::provider::{CompletionService, ModelProvider, ProviderFactory};
use crate::state::State;
use crate::telemetry;
use crate::tool::ToolSet;

/// The prompt state key that lists the plugins a prompt leaves out (their tools and context),
/// e.g. `["fs", "shell"]`; it overrides the config's `leaveOut`, and lives on with the
/// conversation's state.
pub const LEFT_OUT_PLUGINS: &str = "leaveOut";

/// Everything plugins and executors share. Built once by [`RuntimeBuilder`], then read-only.
pub struct Services {
    pub config: Config,
    pub events: EventService,
    pub modes: ExecutionModeService,
    pub completion: CompletionService,
    pub providers: Vec<ProviderFactory>,
    pub extensions: Extensions,
    plugins: Vec<Arc<dyn Plugin>>,
    limits: RuntimeLimits,
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("plugins", &self.plugin_ids())
            .field("modes", &self.modes)
            .field("completion", &self.completion)
            .finish_non_exhaustive()
    }
}

impl Services {
    pub fn plugins(&self) -> &[Arc<dyn Plugin>] {
        &self.plugins
    }

    pub fn plugin_ids(&self) -> Vec<String> {
        self.plugins
            .iter()
            .map(|plugin| plugin.id().to_owned())
            .collect()
    }

    pub fn limits(&self) -> &RuntimeLimits {
        &self.limits
    }

    /// What this runtime offers: modes, the model behind each class, the provider, plugins.
    pub fn capabilities(&self) -> Capabilities {
        let provider = self.completion.provider();
        Capabilities {
            modes: self
                .modes
                .list()
                .iter()
                .map(|mode| ModeInfo {
                    id: mode.id().to_owned(),
                    name: mode.name().to_owned(),
                })
                .collect(),
            models: ModelNames {
                normal: provider.map(|provider| provider.model_name(ModelKind::Normal)),
                high: provider.map(|provider| provider.model_name(ModelKind::High)),
            },
            provider: provider.map(|provider| provider.id().to_owned()),
            plugins: self.plugin_ids(),
        }
    }

    /// The plugins a prompt with this state leaves out: the state's [`LEFT_OUT_PLUGINS`] when
    /// it has one (even empty), else the config's `leaveOut`. Ids are checked where they come
    /// in (the API, the CLI, the config at start-up); one a conversation kept from a build
    /// that had the plugin names nothing here.
    pub fn left_out_plugins(&self, state: &State) -> anyhow::Result<Vec<String>> {
        match state.get(LEFT_OUT_PLUGINS) {
            Some(value) => serde_json::from_value::<Vec<String>>(value)
                .map_err(|_| anyhow::anyhow!("{LEFT_OUT_PLUGINS} must be a list of plugin ids")),
            None => Ok(self.config.left_out_plugins()),
        }
    }

    /// The prompt state that leaves out the plugins `ids` (see [`LEFT_OUT_PLUGINS`]), once they
    /// are checked to be plugins of this runtime.
    pub fn leave_out_state(
        &self,
        ids: &[String],
    ) -> anyhow::Result<serde_json::Map<String, serde_json::Value>> {
        self.check_plugin_ids(ids)?;
        let mut state = serde_json::Map::new();
        state.insert(LEFT_OUT_PLUGINS.to_owned(), serde_json::json!(ids));
        Ok(state)
    }

    /// An error naming the ids that are no plugin of this runtime, and the plugins there are.
    pub fn check_plugin_ids(&self, ids: &[String]) -> anyhow::Result<()> {
        let known = self.plugin_ids();
        let unknown: Vec<&str> = ids
            .iter()
            .filter(|id| !known.contains(id))
            .map(String::as_str)
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        bail!(
            "no plugin named {}; the plugins are {}",
            unknown.join(", "),
            known.join(", ")
        )
    }

    /// Runs every plugin's `prepare()` for one prompt, but those it leaves out (see
    /// [`Services::left_out_plugins`]): the task's plugins first, then the everyday ones, each
    /// group by id. When two plugins offer the same tool id, the first keeps it.
    pub async fn prepare(
        self: &Arc<Self>,
        user_id: &str,
        prompt_id: &str,
        mode: &str,
        state: &State,
    ) -> anyhow::Result<Prepared> {
        let mut context = PrepareContext {
            user_id: user_id.to_owned(),
            prompt_id: prompt_id.to_owned(),
            mode: mode.to_owned(),
            state: state.clone(),
            services: self.clone(),
            tools: Vec::new(),
            context: Vec::new(),
            current_plugin: String::new(),
            tool_owners: Vec::new(),
        };
        let left_out = self.left_out_plugins(state)?;
        // The task's tools first, then the everyday ones (see `Plugin::everyday`).
        let mut plugins: Vec<&Arc<dyn Plugin>> = self
            .plugins
            .iter()
            .filter(|plugin| !left_out.iter().any(|id| id == plugin.id()))
            .collect();
        plugins.sort_by_key(|plugin| plugin.everyday());
        let plugin_order: Vec<String> = plugins
            .iter()
            .map(|plugin| plugin.id().to_owned())
            .collect();
        for plugin in plugins {
            context.current_plugin = plugin.id().to_owned();
            plugin
                .prepare(&mut context)
                .await
                .with_context(|| format!("plugin \"{}\" failed to prepare", plugin.id()))?;
        }
        let mut seen = HashSet::new();
        let mut tools = Vec::new();
        for tool in context.tools {
            if seen.insert(tool.id().to_owned()) {
                tools.push(tool);
            } else {
                tracing::warn!(
                    tool = tool.id(),
                    "two plugins offer this tool; keeping the first"
                );
            }
        }
        let mut tool_plugins = HashMap::new();
        for (tool, plugin) in context.tool_owners {
            tool_plugins.entry(tool).or_insert(plugin);
        }
        Ok(Prepared {
            tools: ToolSet::new(tools).with_required_approval(self.config.require_approval()),
            context: context.context,
            tool_plugins,
            plugin_order,
        })
    }
}

/// The answer to "what can this runtime do".
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    pub modes: Vec<ModeInfo>,
    pub models: ModelNames,
    /// The model provider in use; absent when none is configured.
    pub provider: Option<String>,
    pub plugins: Vec<String>,
}

#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct ModeInfo {
    pub id: String,
    pub name: String,
}

/// The concrete model each class maps to.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct ModelNames {
    pub normal: Option<String>,
    pub high: Option<String>,
}

/// Builds a [`Runtime`]: which plugins, which config, which model provider.
#[derive(Default)]
pub struct RuntimeBuilder {
    config: Config,
    plugins: Vec<Arc<dyn Plugin>>,
    registered: bool,
    provider: Option<Arc<dyn ModelProvider>>,
    provider_spec: Option<String>,
    unconfigured: Option<Arc<dyn ModelProvider>>,
    event_capacity: Option<usize>,
}

impl std::fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeBuilder")
            .field("registered", &self.registered)
            .field("provider_spec", &self.provider_spec)
            .finish_non_exhaustive()
    }
}

impl RuntimeBuilder {
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Includes every plugin linked into the binary through `inventory`.
    pub fn registered_plugins(mut self) -> Self {
        self.registered = true;
        self
    }

    /// Adds one plugin by value, e.g. a test's own.
    pub fn plugin(mut self, plugin: Arc<dyn Plugin>) -> Self {
        self.plugins.push(plugin);
        self
    }

    /// Uses this provider instance, whatever the config says.
    pub fn provider(mut self, provider: Arc<dyn ModelProvider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Uses this provider when the config and the environment name none and no registered
    /// provider's settings are present (e.g. one that fetches a model at its first request).
    pub fn provider_when_unconfigured(mut self, provider: Arc<dyn ModelProvider>) -> Self {
        self.unconfigured = Some(provider);
        self
    }

    /// Selects a registered provider, e.g. `openai` or `script:turns.yaml`.
    pub fn provider_spec(mut self, spec: &str) -> Self {
        self.provider_spec = Some(spec.to_owned());
        self
    }

    pub fn event_capacity(mut self, capacity: usize) -> Self {
        self.event_capacity = Some(capacity);
        self
    }

    /// Sets up every plugin (sorted by id), selects the provider and calls `ready()`.
    pub async fn build(self) -> anyhow::Result<Runtime> {
        let mut plugins = self.plugins;
        if self.registered {
            plugins.extend(registered_plugins().into_iter().map(|registration| {
                let plugin = (registration.create)();
                debug_assert_eq!(plugin.id(), registration.id);
                plugin
            }));
        }
        plugins.sort_by(|a, b| a.id().cmp(b.id()));
        for pair in plugins.windows(2) {
            if pair[0].id() == pair[1].id() {
                bail!("plugin id \"{}\" is registered twice", pair[0].id());
            }
        }

        for plugin in &plugins {
            self.config
                .check_section(plugin.id(), &plugin.config_schema())?;
        }

        let mut modes = ExecutionModeService::default();
        modes.register(classic_mode())?;
        let mut providers = Vec::new();
        let mut extensions = Extensions::default();
        for plugin in &plugins {
            let mut context = SetupContext {
                config: &self.config,
                modes: &mut modes,
                providers: &mut providers,
                extensions: &mut extensions,
            };
            plugin
                .setup(&mut context)
                .await
                .with_context(|| format!("plugin \"{}\" failed to set up", plugin.id()))?;
        }
        providers.sort_by_key(|factory: &ProviderFactory| factory.id);

        let prices = self.config.prices()?;
        let completion = match self.provider {
            Some(provider) => CompletionService::new(provider),
            None => {
                let selected =
                    select_provider(self.provider_spec.as_deref(), &self.config, &providers)?;
                match self.unconfigured {
                    Some(provider) if selected.provider().is_none() => {
                        CompletionService::new(provider)
                    }
                    _ => selected,
                }
            }
        }
        .with_prices(prices);
        let limits = self.config.limits();
        let services = Arc::new(Services {
            config: self.config,
            events: EventService::new(
                self.event_capacity
                    .unwrap_or(crate::event::DEFAULT_SUBSCRIBER_CAPACITY),
            ),
            modes,
            completion,
            providers,
            extensions,
            plugins,
            limits,
        });
        services
            .check_plugin_ids(&services.config.left_out_plugins())
            .context("the config's leaveOut")?;
        for plugin in services.plugins() {
            plugin
                .ready(&services)
                .await
                .with_context(|| format!("plugin \"{}\" failed to get ready", plugin.id()))?;
        }
        Ok(Runtime {
            prompts: PromptService::new(services.clone()),
            services,
        })
    }
}

/// Picks the provider: an explicit spec, else `AGENTIC_PROVIDER`, else the config's `provider`
/// key, else the first registered provider whose settings are present (fallback providers,
/// such as the embedded local model, last).
fn select_provider(
    spec: Option<&str>,
    config: &Config,
    providers: &[ProviderFactory],
) -> anyhow::Result<CompletionService> {
    let from_env = std::env::var("AGENTIC_PROVIDER")
        .ok()
        .filter(|s| !s.is_empty());
    let spec = spec.map(str::to_owned).or(from_env).or_else(|| {
        config
            .get("provider")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    });
    let available = || {
        providers
            .iter()
            .map(|factory| factory.id)
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(spec) = spec {
        let (id, argument) = match spec.split_once(':') {
            Some((id, argument)) => (id, Some(argument)),
            None => (spec.as_str(), None),
        };
        let factory = providers
            .iter()
            .find(|factory| factory.id == id)
            .with_context(|| {
                format!(
                    "unknown model provider \"{id}\"; registered providers: {}",
                    available()
                )
            })?;
        let provider = (factory.create)(argument, config)
            .with_context(|| format!("could not create model provider \"{spec}\""))?;
        return Ok(CompletionService::new(provider));
    }
    // Providers whose settings are present win over fallbacks, whatever the link order.
    let mut ordered: Vec<&ProviderFactory> = providers.iter().collect();
    ordered.sort_by_key(|factory| factory.fallback);
    for factory in ordered {
        if (factory.configured)(config) {
            let provider = (factory.create)(None, config)
                .with_context(|| format!("could not create model provider \"{}\"", factory.id))?;
            return Ok(CompletionService::new(provider));
        }
    }
    Ok(CompletionService::unavailable(&format!(
        "no model provider is configured (registered: {}); set OPENAI_API_KEY or \
         OPENAI_BASE_URL, or AGENTIC_PROVIDER=script:<turns.yaml>",
        available()
    )))
}

/// A running agentic: its services and its prompts.
pub struct Runtime {
    services: Arc<Services>,
    prompts: PromptService,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("services", &self.services)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    pub fn services(&self) -> &Arc<Services> {
        &self.services
    }

    pub fn prompts(&self) -> &PromptService {
        &self.prompts
    }
}

/// What a caller gives to start a prompt.
#[derive(Clone, Default)]
pub struct PromptOptions {
    pub user_id: String,
    pub input: Option<String>,
    pub model: ModelKind,
    /// `classic` when absent.
    pub mode: Option<String>,
    pub history: Vec<Prompt>,
    pub state: State,
    pub max_rounds: Option<u32>,
    pub resume_prompt: Option<Prompt>,
    pub checkpoint: Option<Arc<dyn PromptCheckpoint>>,
    pub conversation_id: Option<String>,
}

impl std::fmt::Debug for PromptOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptOptions")
            .field("user_id", &self.user_id)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// What [`PromptService`] asks of an executor.
enum Step<'a> {
    Run,
    Decide(&'a str, &'a Verdict),
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

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromptServiceError {
    #[error(transparent)]
    Mode(#[from] ModeError),
    #[error("prompt \"{0}\" is not active")]
    NotActive(String),
    #[error(transparent)]
    Executor(#[from] ExecutorError),
}

impl PromptService {
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
                Step::Decide(id, verdict) => executor.decide(id, verdict),
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
        self.advance(&handle, Step::Decide(tool_call_id, verdict))
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
