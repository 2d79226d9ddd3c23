//! The scripted model provider: replays model turns from YAML and records every request it
//! receives. Tests, demos and bug reports use it; select it with
//! `AGENTIC_PROVIDER=script:path/to/turns.yaml`. The timeline snapshot helper built on it is
//! in the dev-only `agentic-testing` crate.
#![forbid(unsafe_code)]

mod case;
mod play;
mod provider;
mod record;

use std::sync::Arc;

use agentic_core::{Config, Plugin, PluginRegistration, ProviderFactory, ProviderPlugin};

pub use case::{CaseDecision, Expect, HistoryPrompt, Recording, TimelineCase};
pub use play::{Played, play, provider_of};
pub use provider::{ScriptReasoning, ScriptToolCall, ScriptUsage, ScriptedProvider, Turn};
pub use record::{ExportOptions, Run, case_of};

agentic_core::inventory::submit! {
    PluginRegistration { id: "script", create: create_plugin }
}

/// Provider `script`.
pub fn create_plugin() -> Arc<dyn Plugin> {
    Arc::new(ProviderPlugin::new(ProviderFactory {
        id: "script",
        create: create_provider,
        // Only used when named: a script is never picked by accident.
        configured: |_| false,
        fallback: false,
    }))
}

fn create_provider(
    argument: Option<&str>,
    _config: &Config,
) -> anyhow::Result<Arc<dyn agentic_core::ModelProvider>> {
    let path = argument
        .filter(|path| !path.is_empty())
        .ok_or_else(|| anyhow::anyhow!("the script provider needs a file: script:<turns.yaml>"))?;
    Ok(Arc::new(ScriptedProvider::from_file(
        std::path::Path::new(path),
    )?))
}
