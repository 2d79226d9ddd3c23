//! The OpenAI-compatible Chat Completions provider. It speaks to OpenAI and to the servers
//! people run locally (Ollama, vLLM, llama.cpp's server, LM Studio): streamed over SSE,
//! retried like the official SDKs, and parsed tolerantly because real servers bend the
//! schema.
#![forbid(unsafe_code)]

mod config;
mod provider;
mod responses;
mod stream;
mod wire;

use std::sync::Arc;

use agentic_core::{
    Config, ModelProvider, Plugin, PluginRegistration, ProviderFactory, ProviderPlugin,
};

pub use agentic_wire::ToolNameMap;
pub use config::{Api, ModelNames, OpenAiConfig};
pub use provider::OpenAiProvider;

agentic_core::inventory::submit! {
    PluginRegistration { id: "openai", create: create_plugin }
}

/// Provider `openai`, and `openai-responses`: the same settings with the Responses API, for
/// naming one model (`AGENTIC_PROVIDER=openai-responses:<model>`). It is never chosen
/// unnamed: `openai` is, with `api` saying which API.
pub fn create_plugin() -> Arc<dyn Plugin> {
    let factory = ProviderFactory {
        id: "openai",
        create: create_provider,
        configured: |config| OpenAiConfig::resolve(config).is_ok_and(|c| c.is_configured()),
        fallback: false,
    };
    let responses = ProviderFactory {
        id: "openai-responses",
        create: |argument, config| {
            let mut settings = settings(argument, config)?;
            settings.api = Api::Responses;
            Ok(Arc::new(OpenAiProvider::new(settings)?))
        },
        configured: |_| false,
        fallback: false,
    };
    Arc::new(
        ProviderPlugin::new(factory)
            .also(responses)
            .with_config_schema(agentic_core::schema_of::<OpenAiConfig>),
    )
}

fn create_provider(
    argument: Option<&str>,
    config: &Config,
) -> anyhow::Result<Arc<dyn ModelProvider>> {
    Ok(Arc::new(OpenAiProvider::new(settings(argument, config)?)?))
}

fn settings(argument: Option<&str>, config: &Config) -> anyhow::Result<OpenAiConfig> {
    let mut settings = OpenAiConfig::resolve(config)?;
    // `openai:<model>` picks the model for both classes.
    if let Some(model) = argument.filter(|model| !model.is_empty()) {
        settings.models.normal = model.to_owned();
        settings.models.high = model.to_owned();
    }
    Ok(settings)
}
