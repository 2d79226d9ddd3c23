//! The OpenAI-compatible Chat Completions provider. It speaks to OpenAI and to the servers
//! people run locally (Ollama, vLLM, llama.cpp's server, LM Studio): streamed over SSE,
//! retried like the official SDKs, and parsed tolerantly because real servers bend the
//! schema.
#![forbid(unsafe_code)]

mod config;
mod names;
mod provider;
mod stream;
mod wire;

use std::sync::Arc;

use agentic_core::{
    Config, ModelProvider, Plugin, PluginRegistration, ProviderFactory, SetupContext,
};
use async_trait::async_trait;

pub use config::{ModelNames, OpenAiConfig};
pub use names::ToolNameMap;
pub use provider::OpenAiProvider;

agentic_core::inventory::submit! {
    PluginRegistration { id: "openai", create: create_plugin }
}

fn create_plugin() -> Arc<dyn Plugin> {
    Arc::new(OpenAiPlugin)
}

/// Registers provider `openai`.
#[derive(Debug, Default)]
pub struct OpenAiPlugin;

#[async_trait]
impl Plugin for OpenAiPlugin {
    fn id(&self) -> &str {
        "openai"
    }

    fn config_schema(&self) -> serde_json::Value {
        agentic_core::schema_of::<OpenAiConfig>()
    }

    async fn setup(&self, context: &mut SetupContext<'_>) -> anyhow::Result<()> {
        context.providers.push(ProviderFactory {
            id: "openai",
            create: create_provider,
            configured: |config| OpenAiConfig::resolve(config).is_ok_and(|c| c.is_configured()),
            fallback: false,
        });
        Ok(())
    }
}

fn create_provider(
    argument: Option<&str>,
    config: &Config,
) -> anyhow::Result<Arc<dyn ModelProvider>> {
    let mut settings = OpenAiConfig::resolve(config)?;
    // `openai:<model>` picks the model for both classes.
    if let Some(model) = argument.filter(|model| !model.is_empty()) {
        settings.models.normal = model.to_owned();
        settings.models.high = model.to_owned();
    }
    Ok(Arc::new(OpenAiProvider::new(settings)?))
}
