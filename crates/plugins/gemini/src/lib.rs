//! The Gemini API provider (`models/<model>:streamGenerateContent?alt=sse`): text and function
//! calls, thought parts as reasoning and thought signatures sent back where they came, usage
//! with cached and thinking tokens, safety blocks as errors. `GEMINI_API_KEY` or
//! `GOOGLE_API_KEY`, or a `[gemini]` section, turn it on; `AGENTIC_PROVIDER=gemini:<model>`
//! names it.
#![forbid(unsafe_code)]

mod config;
mod provider;
mod stream;
mod wire;

use std::sync::Arc;

use agentic_core::{
    Config, ModelProvider, Plugin, PluginRegistration, ProviderFactory, ProviderPlugin,
};

pub use config::{DEFAULT_BASE_URL, GeminiConfig, ModelNames};
pub use provider::GeminiProvider;

/// The provider's id, which its reasoning is marked with.
pub const PROVIDER_ID: &str = "gemini";

agentic_core::inventory::submit! {
    PluginRegistration { id: PROVIDER_ID, create: create_plugin }
}

/// Provider `gemini`.
pub fn create_plugin() -> Arc<dyn Plugin> {
    let factory = ProviderFactory {
        id: PROVIDER_ID,
        create: create_provider,
        configured: |config| GeminiConfig::resolve(config).is_ok_and(|c| c.is_configured()),
        fallback: false,
    };
    Arc::new(
        ProviderPlugin::new(factory).with_config_schema(agentic_core::schema_of::<GeminiConfig>),
    )
}

fn create_provider(
    argument: Option<&str>,
    config: &Config,
) -> anyhow::Result<Arc<dyn ModelProvider>> {
    let mut settings = GeminiConfig::resolve(config)?;
    // `gemini:<model>` picks the model for both classes.
    if let Some(model) = argument.filter(|model| !model.is_empty()) {
        settings.models.normal = model.to_owned();
        settings.models.high = model.to_owned();
    }
    Ok(Arc::new(GeminiProvider::new(settings)?))
}
