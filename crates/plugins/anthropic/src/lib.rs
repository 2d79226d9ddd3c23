//! The Anthropic Messages API provider (`/v1/messages`, streamed): text and tool use, parallel
//! calls, tool results that say they failed, prompt caching with its usage and cost, and
//! retries on 429 and 529. `ANTHROPIC_API_KEY` or an `[anthropic]` section turn it on;
//! `AGENTIC_PROVIDER=anthropic:<model>` names it.
#![forbid(unsafe_code)]

mod config;
mod provider;
mod stream;
mod wire;

use std::sync::Arc;

use agentic_core::{
    Config, ModelProvider, Plugin, PluginRegistration, ProviderFactory, ProviderPlugin,
};

pub use config::{API_VERSION, AnthropicConfig, DEFAULT_BASE_URL, MIN_THINKING_BUDGET, ModelNames};
pub use provider::AnthropicProvider;

/// The provider's id, which its reasoning is marked with.
pub const PROVIDER_ID: &str = "anthropic";

agentic_core::inventory::submit! {
    PluginRegistration { id: PROVIDER_ID, create: create_plugin }
}

/// Provider `anthropic`.
pub fn create_plugin() -> Arc<dyn Plugin> {
    let factory = ProviderFactory {
        id: PROVIDER_ID,
        create: create_provider,
        configured: |config| AnthropicConfig::resolve(config).is_ok_and(|c| c.is_configured()),
        fallback: false,
    };
    Arc::new(
        ProviderPlugin::new(factory).with_config_schema(agentic_core::schema_of::<AnthropicConfig>),
    )
}

fn create_provider(
    argument: Option<&str>,
    config: &Config,
) -> anyhow::Result<Arc<dyn ModelProvider>> {
    let mut settings = AnthropicConfig::resolve(config)?;
    // `anthropic:<model>` picks the model for both classes.
    if let Some(model) = argument.filter(|model| !model.is_empty()) {
        settings.models.normal = model.to_owned();
        settings.models.high = model.to_owned();
    }
    Ok(Arc::new(AnthropicProvider::new(settings)?))
}
