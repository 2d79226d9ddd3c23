//! The runtime: plugins set up in order, the services they registered, and the prompt service
//! that dispatches each prompt to its execution mode.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{Context as _, bail};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::classic::classic_mode;
use crate::config::Config;
use crate::event::{EventPayload, EventService};
use crate::mode::{
    ExecutionModeService, ExecutorCreateOptions, ExecutorError, ModeError, PromptChange,
    PromptCheckpoint, PromptExecutor, PromptOptions, Verdict,
};
use crate::plugin::{
    Extensions, Plugin, PrepareContext, Prepared, SetupContext, registered_plugins,
};
use crate::prompt::{DEFAULT_MODE, Prompt, PromptState};
use crate::provider::{CompletionService, ModelProvider, ProviderFactory};
use crate::services::Services;
use crate::state::State;
use crate::telemetry;
use crate::tool::ToolSet;

pub mod classic;
pub mod executor;
pub mod history;
mod prompts;
pub mod recorder;
pub mod takeover;
pub mod text_calls;

pub use prompts::{
    CANCELLED_TOOL_ERROR, ExecutorHandle, INTERRUPTED_TOOL_ERROR, PromptService,
    PromptServiceError, TAKEN_OVER_TOOL_ERROR, close_cancelled,
};

impl Services {
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
    /// Uses this config; without it the config is empty.
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Includes every plugin linked into the binary through `inventory`, but those whose id
    /// a plugin given by value ([`Self::plugin`]) already has.
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

    /// Sets how many events a subscriber may fall behind and the replay window keeps (default
    /// [`crate::event::DEFAULT_SUBSCRIBER_CAPACITY`]).
    pub fn event_capacity(mut self, capacity: usize) -> Self {
        self.event_capacity = Some(capacity);
        self
    }

    /// Sets up every plugin (sorted by id), selects the provider and calls `ready()`.
    pub async fn build(self) -> anyhow::Result<Runtime> {
        let mut plugins = self.plugins;
        if self.registered {
            let given: HashSet<String> = plugins
                .iter()
                .map(|plugin| plugin.id().to_owned())
                .collect();
            plugins.extend(
                registered_plugins()
                    .into_iter()
                    .filter(|registration| !given.contains(registration.id))
                    .map(|registration| {
                        let plugin = (registration.create)();
                        debug_assert_eq!(plugin.id(), registration.id);
                        plugin
                    }),
            );
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
        extensions.insert(Arc::new(crate::scope::ScopeSlot::default()));

        let prices = self.config.prices()?;
        let completion = match self.provider {
            Some(provider) => CompletionService::new(provider),
            None => {
                let selected =
                    select_provider(self.provider_spec.as_deref(), &self.config, &providers)?;
                match self.unconfigured {
                    Some(provider) if selected.provider().is_none() => {
                        let reason = format!(
                            "no provider is named and none has a key or address set, so the \
                             default answers ({})",
                            provider.id()
                        );
                        CompletionService::new(provider).with_reason(reason)
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
    let named = match (spec, from_env) {
        (Some(spec), _) => Some((spec.to_owned(), format!("named: {spec}"))),
        (None, Some(spec)) => Some((spec.clone(), format!("named by AGENTIC_PROVIDER={spec}"))),
        (None, None) => config
            .get("provider")
            .and_then(serde_json::Value::as_str)
            .map(|spec| {
                (
                    spec.to_owned(),
                    format!("named by the config's provider = {spec:?}"),
                )
            }),
    };
    let available = || {
        providers
            .iter()
            .map(|factory| factory.id)
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some((spec, reason)) = named {
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
        return Ok(CompletionService::new(provider).with_reason(reason));
    }
    // Providers whose settings are present win over fallbacks, whatever the link order; among
    // them, the order is the ids'.
    let mut ordered: Vec<&ProviderFactory> = providers.iter().collect();
    ordered.sort_by_key(|factory| factory.fallback);
    let configured: Vec<&ProviderFactory> = ordered
        .into_iter()
        .filter(|factory| (factory.configured)(config))
        .collect();
    if let Some(factory) = configured.first() {
        let provider = (factory.create)(None, config)
            .with_context(|| format!("could not create model provider \"{}\"", factory.id))?;
        let others: Vec<&str> = configured[1..]
            .iter()
            .filter(|other| !other.fallback)
            .map(|other| other.id)
            .collect();
        let mut reason = if factory.fallback {
            format!(
                "no provider's key or address is set, so the fallback answers ({})",
                factory.id
            )
        } else {
            format!(
                "the first provider, by id, whose key or address is set ({})",
                factory.id
            )
        };
        if !others.is_empty() {
            reason.push_str(&format!(
                "; also set: {}; name one with AGENTIC_PROVIDER=<id>:<model>",
                others.join(", ")
            ));
        }
        return Ok(CompletionService::new(provider).with_reason(reason));
    }
    Ok(CompletionService::unavailable(&format!(
        "no model provider is configured (registered: {}); set an API key (OPENAI_API_KEY, \
         ANTHROPIC_API_KEY, GEMINI_API_KEY) or OPENAI_BASE_URL, or AGENTIC_PROVIDER=<id>:<model>",
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
    /// A builder with no plugins, an empty config and no provider chosen.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// What plugins and executors share.
    pub fn services(&self) -> &Arc<Services> {
        &self.services
    }

    /// The service that creates and runs prompts.
    pub fn prompts(&self) -> &PromptService {
        &self.prompts
    }
}
