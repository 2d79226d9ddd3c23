//! Plugins: link-time registered bundles of tools, context, modes, providers and services.
//!
//! A plugin crate submits a [`PluginRegistration`] with `inventory::submit!`; the runtime
//! collects every registration linked into the binary, sorts them by id and refuses to start
//! when two share an id.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::config::Config;
use crate::mode::ExecutionModeService;
use crate::provider::ProviderFactory;
use crate::services::Services;
use crate::state::State;
use crate::tool::Tool;

/// A bundle of tools, context, modes, providers and services. A plugin implements the
/// hooks it needs; the defaults add nothing.
#[async_trait]
pub trait Plugin: Send + Sync {
    /// Unique among a runtime's plugins; it also names the plugin's config section.
    fn id(&self) -> &str;
    /// JSON Schema of this plugin's config section.
    fn config_schema(&self) -> Value {
        serde_json::json!({ "type": "object" })
    }
    /// Registers modes, providers and services. Runs once, before anything is ready.
    async fn setup(&self, _context: &mut SetupContext<'_>) -> anyhow::Result<()> {
        Ok(())
    }
    /// Runs once after every plugin's `setup()`, with the finished services.
    async fn ready(&self, _services: &Arc<Services>) -> anyhow::Result<()> {
        Ok(())
    }
    /// Runs for every prompt: push the tools and context items this prompt gets.
    async fn prepare(&self, _context: &mut PrepareContext) -> anyhow::Result<()> {
        Ok(())
    }
    /// Whether this plugin's tools are everyday ones any agent may use (files, time, memory,
    /// a shell) rather than tools someone set up for their task (an MCP server, their own
    /// plugin crate). A prompt offers the task's tools first, then the everyday ones.
    fn everyday(&self) -> bool {
        false
    }
}

/// What a plugin crate submits to `inventory`. Only `const` data: a static id and a
/// constructor.
#[derive(Debug)]
pub struct PluginRegistration {
    /// The plugin's id, the same as the created plugin's `id()`.
    pub id: &'static str,
    /// Builds the plugin, once for each runtime that includes the registered plugins.
    pub create: fn() -> Arc<dyn Plugin>,
}

inventory::collect!(PluginRegistration);

/// A plugin that only offers a model provider: its id is the provider's, and its config
/// section is described by `config_schema`. A provider crate registers one with
/// `inventory::submit! { PluginRegistration { id, create } }`, `create` building it.
#[derive(Debug, Clone)]
pub struct ProviderPlugin {
    factory: ProviderFactory,
    /// More providers of the same plugin, chosen by naming them (another API of the vendor).
    also: Vec<ProviderFactory>,
    config_schema: fn() -> Value,
}

impl ProviderPlugin {
    /// The plugin of `factory`, with an object of any shape as its config section.
    pub fn new(factory: ProviderFactory) -> Self {
        Self {
            factory,
            also: Vec::new(),
            config_schema: || serde_json::json!({ "type": "object" }),
        }
    }

    /// The plugin offers `factory` too, under its own id (`openai-responses` beside
    /// `openai`); the plugin's id stays the first factory's.
    #[must_use]
    pub fn also(mut self, factory: ProviderFactory) -> Self {
        self.also.push(factory);
        self
    }

    /// Its config section is described by `schema` (e.g. `agentic_core::schema_of::<C>`).
    #[must_use]
    pub fn with_config_schema(mut self, schema: fn() -> Value) -> Self {
        self.config_schema = schema;
        self
    }
}

#[async_trait]
impl Plugin for ProviderPlugin {
    fn id(&self) -> &str {
        self.factory.id
    }

    fn config_schema(&self) -> Value {
        (self.config_schema)()
    }

    async fn setup(&self, context: &mut SetupContext<'_>) -> anyhow::Result<()> {
        context.providers.push(self.factory.clone());
        context.providers.extend(self.also.iter().cloned());
        Ok(())
    }
}

/// Every plugin registration linked into this binary, sorted by id.
pub fn registered_plugins() -> Vec<&'static PluginRegistration> {
    let mut plugins: Vec<_> = inventory::iter::<PluginRegistration>.into_iter().collect();
    plugins.sort_by_key(|registration| registration.id);
    plugins
}

/// What `setup()` may register.
pub struct SetupContext<'a> {
    /// The runtime's config.
    pub config: &'a Config,
    /// The registry to add execution modes to.
    pub modes: &'a mut ExecutionModeService,
    /// The model providers registered so far; push one to offer it.
    pub providers: &'a mut Vec<ProviderFactory>,
    /// Services for other plugins, keyed by type.
    pub extensions: &'a mut Extensions,
}

impl std::fmt::Debug for SetupContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetupContext").finish_non_exhaustive()
    }
}

/// A text the model should know for this prompt, e.g. a memory block or the current date.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ContextItem {
    /// Its heading (classic mode writes `## <title>` above it in the system prompt).
    pub title: String,
    /// The text.
    pub content: String,
}

/// Per-prompt input of `prepare()`, and where it pushes tools and context.
#[non_exhaustive]
pub struct PrepareContext {
    /// The user the prompt belongs to.
    pub user_id: String,
    /// The prompt's id.
    pub prompt_id: String,
    /// The mode that runs the prompt.
    pub mode: String,
    /// The prompt's state, which its tools read and write.
    pub state: State,
    /// The runtime's services.
    pub services: Arc<Services>,
    /// Tools offered so far, through [`PrepareContext::add_tool`] only, which records the
    /// plugin that offered each; [`PrepareContext::tools`] reads them.
    pub(crate) tools: Vec<Arc<dyn Tool>>,
    /// Context items added so far (see [`PrepareContext::add_context`]).
    pub(crate) context: Vec<ContextItem>,
    /// The plugin whose `prepare()` is running; tools it pushes are grouped under it.
    pub(crate) current_plugin: String,
    pub(crate) tool_owners: Vec<(String, String)>,
}

impl std::fmt::Debug for PrepareContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrepareContext")
            .field("user_id", &self.user_id)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl PrepareContext {
    /// The tools offered so far, by the plugins that prepared before this one.
    pub fn tools(&self) -> &[Arc<dyn Tool>] {
        &self.tools
    }

    /// The context items added so far.
    pub fn context_items(&self) -> &[ContextItem] {
        &self.context
    }

    /// Offers `tool` to this prompt, as a tool of the plugin that is preparing.
    pub fn add_tool(&mut self, tool: Arc<dyn Tool>) {
        self.tool_owners
            .push((tool.id().to_owned(), self.current_plugin.clone()));
        self.tools.push(tool);
    }

    /// Adds a text the model should know, under the heading `title`.
    pub fn add_context(&mut self, title: &str, content: &str) {
        self.context.push(ContextItem {
            title: title.to_owned(),
            content: content.to_owned(),
        });
    }
}

/// Everything the plugins contributed to one prompt.
#[derive(Clone, Default)]
pub struct Prepared {
    /// Every tool offered, one per id (the plugin that prepared first keeps an id).
    pub tools: crate::tool::ToolSet,
    /// Every context item, in the order the plugins added them.
    pub context: Vec<ContextItem>,
    /// Tool id → id of the plugin that contributed it, for grouping in system prompts.
    pub tool_plugins: HashMap<String, String>,
    /// The plugins that prepared, in the order their tools are offered: the task's first,
    /// then the everyday ones (see [`Plugin::everyday`]).
    pub plugin_order: Vec<String>,
}

impl Prepared {
    /// Where a plugin's tools come in the offer: its place in [`Prepared::plugin_order`].
    pub fn plugin_rank(&self, plugin: &str) -> usize {
        self.plugin_order
            .iter()
            .position(|id| id == plugin)
            .unwrap_or(self.plugin_order.len())
    }

    /// The tools in the order they are offered to a model: by their plugin's rank, then by id.
    pub fn tools_in_order(&self) -> Vec<&Arc<dyn crate::tool::Tool>> {
        let mut tools: Vec<&Arc<dyn crate::tool::Tool>> = self.tools.iter().collect();
        tools.sort_by_key(|tool| {
            self.tool_plugins
                .get(tool.id())
                .map_or(self.plugin_order.len(), |plugin| self.plugin_rank(plugin))
        });
        tools
    }
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("tools", &self.tools)
            .field("context", &self.context)
            .finish()
    }
}

/// Services plugins add for each other, keyed by type.
#[derive(Default)]
pub struct Extensions {
    values: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions")
            .field("len", &self.values.len())
            .finish()
    }
}

impl Extensions {
    /// Adds `value`, replacing any earlier value of type `T`.
    pub fn insert<T: Any + Send + Sync>(&mut self, value: Arc<T>) {
        self.values.insert(TypeId::of::<T>(), value);
    }

    /// The value of type `T`, inserting `T::default()` first if there is none: how a plugin
    /// finds (or starts) a registry that several plugins add to.
    pub fn get_or_insert_default<T: Any + Send + Sync + Default>(&mut self) -> Arc<T> {
        if let Some(value) = self.get::<T>() {
            return value;
        }
        let value = Arc::new(T::default());
        self.insert(value.clone());
        value
    }

    /// The value of type `T`, if there is one.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.values
            .get(&TypeId::of::<T>())
            .and_then(|value| value.clone().downcast::<T>().ok())
    }
}
