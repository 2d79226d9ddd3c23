//! The plugins this build of `agentic` has, by feature. Creating them here references each
//! plugin crate, so the linker keeps it (and its `inventory` registration) without a
//! `use … as _;` in the user's program.

use std::sync::Arc;

use agentic_core::Plugin;

/// One of each plugin the enabled features link, sorted by id by the runtime.
pub(crate) fn plugins() -> Vec<Arc<dyn Plugin>> {
    let creators: &[fn() -> Arc<dyn Plugin>] = &[
        #[cfg(feature = "code")]
        agentic_interpreter::create_plugin,
        #[cfg(feature = "fs")]
        agentic_plugin_fs::create_plugin,
        #[cfg(feature = "shell")]
        agentic_plugin_shell::create_plugin,
        #[cfg(feature = "web")]
        agentic_plugin_web::create_plugin,
        #[cfg(feature = "time")]
        agentic_plugin_time::create_plugin,
        #[cfg(feature = "todo")]
        agentic_plugin_todo::create_plugin,
        #[cfg(feature = "memory")]
        agentic_plugin_memory::create_plugin,
        #[cfg(feature = "artifact")]
        agentic_plugin_artifact::create_plugin,
        #[cfg(feature = "mcp")]
        agentic_plugin_mcp::create_plugin,
        #[cfg(feature = "trigger")]
        agentic_plugin_trigger::create_plugin,
        #[cfg(feature = "local")]
        agentic_plugin_local::create_plugin,
        #[cfg(feature = "openai")]
        agentic_plugin_openai::create_plugin,
        #[cfg(feature = "anthropic")]
        agentic_plugin_anthropic::create_plugin,
        #[cfg(feature = "gemini")]
        agentic_plugin_gemini::create_plugin,
        #[cfg(feature = "script")]
        agentic_plugin_script::create_plugin,
    ];
    creators.iter().map(|create| create()).collect()
}
