//! The embedded local model: a GGUF chat model run in process on the CPU with candle, so
//! agentic answers on a fresh machine with no API key and no server. The default model is
//! Qwen2.5-Coder-1.5B-Instruct, fetched by [`pull::ensure_default`] (`agentic model pull`).
//!
//! The provider `local` is a fallback: it is used when no other provider is configured. The
//! network itself runs in `agentic-inference`, which knows nothing of agentic; this crate
//! adds the tokenizer and chat template, sampling, grammars, the prompt cache on disk and
//! fetching models.

#![forbid(unsafe_code)]

pub use agentic_inference::Decoder;

pub mod config;
pub mod constrain;
pub mod provider;
pub mod pull;
mod restate;
pub mod tokenizer;

use std::sync::Arc;

use agentic_core::{
    Config, ModelProvider, Plugin, PluginRegistration, ProviderFactory, ProviderPlugin,
};

pub use config::{LocalConfig, MODEL_ENV};
pub use provider::{Engine, Generated, LocalProvider, Sampling};
pub use pull::{DEFAULT_MODEL, ensure_default, models_dir};

agentic_core::inventory::submit! {
    PluginRegistration { id: "local", create: create_plugin }
}

/// Provider `local`.
pub fn create_plugin() -> Arc<dyn Plugin> {
    let factory = ProviderFactory {
        id: "local",
        create: create_provider,
        // Picked when no other provider is configured and the model file is there.
        configured: |config| {
            LocalConfig::resolve(config)
                .and_then(|settings| settings.model_path())
                .is_ok_and(|path| path.is_file())
        },
        fallback: true,
    };
    Arc::new(
        ProviderPlugin::new(factory).with_config_schema(agentic_core::schema_of::<LocalConfig>),
    )
}

/// `local` runs the configured model; `local:<path.gguf>` runs that file.
fn create_provider(
    argument: Option<&str>,
    config: &Config,
) -> anyhow::Result<Arc<dyn ModelProvider>> {
    let settings = LocalConfig::resolve(config)?;
    let path = match argument.filter(|path| !path.is_empty()) {
        Some(path) => std::path::PathBuf::from(path),
        None => settings.model_path()?,
    };
    anyhow::ensure!(
        path.is_file(),
        "the local model {} is not there; run `agentic model pull`",
        path.display()
    );
    Ok(Arc::new(LocalProvider::new(path, settings)))
}
