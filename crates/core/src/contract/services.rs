//! The handle every plugin, tool and executor is given: the config, the event bus, the
//! modes, the model and what plugins registered for each other; and what a runtime can do.

use std::sync::Arc;

use anyhow::bail;

use crate::config::{Config, RuntimeLimits};
use crate::event::EventService;
use crate::mode::ExecutionModeService;
use crate::plugin::{Extensions, Plugin};
use crate::prompt::ModelKind;
use crate::provider::{CompletionService, ProviderFactory};
use crate::state::State;

/// The prompt state key that lists the plugins a prompt leaves out (their tools and context),
/// e.g. `["fs", "shell"]`; it overrides the config's `leaveOut`, and lives on with the
/// conversation's state.
pub const LEFT_OUT_PLUGINS: &str = "leaveOut";

/// Everything plugins and executors share. Built once, as the runtime starts, then read-only.
pub struct Services {
    /// The runtime's configuration.
    pub config: Config,
    /// Where prompts' events are published.
    pub events: EventService,
    /// The registered execution modes, classic among them.
    pub modes: ExecutionModeService,
    /// Sends model requests to the selected provider.
    pub completion: CompletionService,
    /// Every provider the plugins registered, sorted by id, selected or not.
    pub providers: Vec<ProviderFactory>,
    /// What plugins added in `setup()` for each other.
    pub extensions: Extensions,
    pub(crate) plugins: Vec<Arc<dyn Plugin>>,
    pub(crate) limits: RuntimeLimits,
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
    /// The runtime's plugins, sorted by id.
    pub fn plugins(&self) -> &[Arc<dyn Plugin>] {
        &self.plugins
    }

    /// The runtime's plugin ids, sorted.
    pub fn plugin_ids(&self) -> Vec<String> {
        self.plugins
            .iter()
            .map(|plugin| plugin.id().to_owned())
            .collect()
    }

    /// The runtime's limits, from the config.
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
            provider_reason: self.completion.reason().to_owned(),
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
}

/// The answer to "what can this runtime do".
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// The registered modes, sorted by id.
    pub modes: Vec<ModeInfo>,
    /// The concrete model behind each class.
    pub models: ModelNames,
    /// The model provider in use; absent when none is configured.
    pub provider: Option<String>,
    /// Why that provider answers (named, or the first whose settings are present), or why
    /// none does.
    #[serde(default)]
    pub provider_reason: String,
    /// The ids of the runtime's plugins, sorted.
    pub plugins: Vec<String>,
}

/// An execution mode as [`Capabilities`] lists it.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct ModeInfo {
    /// The id a prompt names it by.
    pub id: String,
    /// Its human-readable name.
    pub name: String,
}

/// The concrete model each class maps to.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct ModelNames {
    /// The model `normal` resolves to; absent when no provider is configured.
    pub normal: Option<String>,
    /// The model `high` resolves to; absent when no provider is configured.
    pub high: Option<String>,
}
