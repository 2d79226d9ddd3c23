//! The MCP plugin: the tools of any MCP server, in every mode.
//!
//! Servers come from `[mcp.servers.<name>]`: a `command` started as a child process speaking
//! MCP on stdio, or the `url` of a streamable HTTP endpoint (with `headers`). Each server is
//! started once per process when the runtime is ready, shared by every prompt, restarted with
//! backoff when it exits, and asked for its tools again when it says they changed. Its tools
//! are offered as `<server>.<tool>`, with the server's input schema (validated before the
//! call) and output schema. A prompt waits for a server's first start at most its
//! `startupTimeoutMs`; a server that is down keeps its last tools, whose calls fail with the
//! reason. Connections go through the official SDK, `rmcp`.
#![forbid(unsafe_code)]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agentic_core::{Plugin, PluginRegistration, PrepareContext, SetupContext};
use async_trait::async_trait;

pub mod config;
pub mod oauth;
mod serve;
mod server;
mod tool;

pub use config::{ApprovalPolicy, McpConfig, OAuthConfig, ServerConfig};
pub use serve::{AgenticServer, http_router, serve_http, serve_stdio};
pub use server::{Server, Status};
use tool::McpTool;

agentic_core::inventory::submit! {
    PluginRegistration { id: "mcp", create: create_plugin }
}

/// The plugin, as the runtime creates it; the `agentic` crate links it by feature.
pub fn create_plugin() -> Arc<dyn Plugin> {
    Arc::new(McpPlugin::default())
}

/// Every configured server of this process. `agentic mcp list` reads it from the runtime's
/// extensions.
#[derive(Debug)]
pub struct McpServers {
    servers: Vec<Arc<Server>>,
    /// Where OAuth tokens are kept (`[mcp] credentialsDir`), or why there is no such place.
    credentials: Result<std::path::PathBuf, String>,
}

impl McpServers {
    pub fn new(config: McpConfig) -> Self {
        let credentials = oauth::credentials_dir(config.credentials_dir.as_deref())
            .map_err(|error| format!("{error:#}"));
        Self {
            servers: config
                .servers
                .into_iter()
                .map(|(name, server)| {
                    let file = credentials
                        .as_ref()
                        .ok()
                        .map(|dir| oauth::credentials_file(dir, &name));
                    Server::new(name, server, file)
                })
                .collect(),
            credentials,
        }
    }

    /// The directory of the OAuth credential files.
    pub fn credentials_dir(&self) -> anyhow::Result<&std::path::Path> {
        self.credentials
            .as_deref()
            .map_err(|error| anyhow::anyhow!("{error}"))
    }

    pub fn servers(&self) -> &[Arc<Server>] {
        &self.servers
    }

    /// Waits until every server's first start has succeeded or failed, each at most its
    /// startup timeout. They all start together in `ready()`, so the waits overlap.
    pub async fn settled(&self) {
        for server in &self.servers {
            let limit = Duration::from_millis(server.config.startup_timeout_ms);
            server.settled(limit).await;
        }
    }
}

#[derive(Debug, Default)]
pub struct McpPlugin {
    servers: OnceLock<Arc<McpServers>>,
}

#[async_trait]
impl Plugin for McpPlugin {
    fn id(&self) -> &str {
        "mcp"
    }

    fn config_schema(&self) -> serde_json::Value {
        agentic_core::schema_of::<McpConfig>()
    }

    async fn setup(&self, context: &mut SetupContext<'_>) -> anyhow::Result<()> {
        let config: McpConfig = if context.config.section("mcp").is_null() {
            McpConfig::default()
        } else {
            context.config.plugin("mcp")?
        };
        for name in config.servers.keys() {
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                anyhow::bail!(
                    "MCP server name \"{name}\": use letters, digits, `_` and `-` (it becomes the first part of its tools' ids)"
                );
            }
        }
        let servers = Arc::new(McpServers::new(config));
        context.extensions.insert(servers.clone());
        let _ = self.servers.set(servers);
        Ok(())
    }

    async fn ready(&self, _services: &Arc<agentic_core::Services>) -> anyhow::Result<()> {
        if let Some(servers) = self.servers.get() {
            for server in servers.servers() {
                server.start();
            }
        }
        Ok(())
    }

    async fn prepare(&self, context: &mut PrepareContext) -> anyhow::Result<()> {
        let Some(servers) = self.servers.get() else {
            return Ok(());
        };
        servers.settled().await;
        for server in servers.servers() {
            for tool in server.tools() {
                context.add_tool(Arc::new(McpTool::new(server.clone(), &tool)));
            }
        }
        Ok(())
    }
}
