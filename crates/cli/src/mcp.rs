//! `agentic mcp …`: the MCP servers this config names.

use std::process::ExitCode;
use std::sync::Arc;

use agentic_conversation::ConversationService;
use agentic_core::{Approval, Runtime, State};
use agentic_plugin_mcp::{McpConfig, McpServers, Server, Status};
use serde_json::json;

use crate::McpAction;
use crate::local::USER;
use crate::models;
use crate::settings::Settings;

pub(crate) async fn run(settings: &Settings, action: &McpAction) -> anyhow::Result<ExitCode> {
    match action {
        McpAction::List { json } => list(settings, *json).await,
        McpAction::Login { server, no_browser } => login(settings, server, *no_browser).await,
        McpAction::Logout { server } => logout(settings, server).await,
        McpAction::Serve { user, http } => {
            // Tools need no model: the embedded one is fetched when a prompt first needs it.
            let runtime = Arc::new(
                Runtime::builder()
                    .config(settings.config.clone())
                    .registered_plugins()
                    .provider_when_unconfigured(models::FetchedOnUse::new(settings.config.clone()))
                    .build()
                    .await?,
            );
            let service =
                ConversationService::open(runtime.clone(), &settings.database_url()?).await?;
            match http {
                None => agentic_plugin_mcp::serve_stdio(service.clone(), user).await?,
                Some(addr) => {
                    let listener = tokio::net::TcpListener::bind(addr)
                        .await
                        .map_err(|error| anyhow::anyhow!("could not listen on {addr}: {error}"))?;
                    crate::telemetry::say(
                        tracing_core::Level::INFO,
                        &format!(
                            "MCP at http://{}/mcp as user {user}",
                            listener.local_addr()?
                        ),
                    );
                    let stopping = tokio_util::sync::CancellationToken::new();
                    let stop = stopping.clone();
                    tokio::spawn(async move {
                        agentic_api::shutdown_signal().await;
                        stop.cancel();
                    });
                    agentic_plugin_mcp::serve_http(service.clone(), user, listener, stopping)
                        .await?;
                }
            }
            service.shutdown().await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The config with every MCP server but the one `tool_id` names (`<server>.<tool>`) turned
/// off: a command that runs one tool starts only the server it needs.
pub(crate) fn only_the_server_of(
    config: &agentic_core::Config,
    tool_id: &str,
) -> agentic_core::Config {
    let mut section = config.section("mcp");
    let wanted = tool_id.split('.').next().unwrap_or_default();
    if let Some(servers) = section
        .get_mut("servers")
        .and_then(serde_json::Value::as_object_mut)
    {
        for (name, server) in servers.iter_mut() {
            if name != wanted
                && let Some(server) = server.as_object_mut()
            {
                server.insert("enabled".to_owned(), json!(false));
            }
        }
        return config.clone().with_section("mcp", section);
    }
    config.clone()
}

/// The configured servers, without starting any.
fn configured(settings: &Settings) -> anyhow::Result<McpServers> {
    let config: McpConfig = if settings.config.section("mcp").is_null() {
        McpConfig::default()
    } else {
        settings.config.plugin("mcp")?
    };
    Ok(McpServers::new(config))
}

fn named<'a>(servers: &'a McpServers, name: &str) -> anyhow::Result<&'a std::sync::Arc<Server>> {
    servers
        .servers()
        .iter()
        .find(|server| server.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = servers.servers().iter().map(|s| s.name.as_str()).collect();
            anyhow::anyhow!(
                "no MCP server is named \"{name}\"; [mcp.servers] has: {}",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            )
        })
}

async fn login(settings: &Settings, name: &str, no_browser: bool) -> anyhow::Result<ExitCode> {
    let servers = configured(settings)?;
    let server = named(&servers, name)?;
    let file = server
        .login(|url| {
            outln!("Open this address to authorize agentic with \"{name}\":");
            outln!("{url}");
            if !no_browser {
                open_browser(url);
            }
        })
        .await?;
    outln!(
        "Authorized. agentic keeps the tokens in {} and refreshes them; `agentic mcp logout {name}` forgets them.",
        file.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Tries the desktop's browser; the address is printed either way.
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let _ = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

async fn logout(settings: &Settings, name: &str) -> anyhow::Result<ExitCode> {
    let servers = configured(settings)?;
    let server = named(&servers, name)?;
    match &server.credentials {
        Some(file) if file.exists() => {
            std::fs::remove_file(file)?;
            outln!("Forgot the OAuth tokens of \"{name}\".");
        }
        _ => outln!("agentic keeps no OAuth tokens for \"{name}\"."),
    }
    Ok(ExitCode::SUCCESS)
}

async fn list(settings: &Settings, as_json: bool) -> anyhow::Result<ExitCode> {
    let runtime = Runtime::builder()
        .config(settings.config.clone())
        .registered_plugins()
        .build()
        .await?;
    let Some(servers) = runtime.services().extensions.get::<McpServers>() else {
        anyhow::bail!("the mcp plugin is not linked into this binary");
    };
    // The tools as a prompt gets them (this waits for every server's first start), so
    // `requireApproval` patterns count as they do there.
    let prepared = runtime
        .services()
        .prepare(USER, "cli", "classic", &State::default())
        .await?;
    let mut listed = Vec::new();
    for server in servers.servers() {
        let (protocol, server_info) = server.identity();
        let tools: Vec<_> = server
            .tools()
            .iter()
            .filter_map(|tool| prepared.tools.get(&server.tool_id(&tool.name)))
            .map(|tool| {
                let approval = matches!(
                    prepared.tools.approval(tool.id(), &serde_json::Value::Null),
                    Approval::Required { .. }
                );
                json!({
                    "id": tool.id(),
                    "description": tool.description(),
                    "needsApproval": approval,
                })
            })
            .collect();
        let transport = match (&server.config.command, &server.config.url) {
            (Some(command), _) => {
                let mut line = vec![command.clone()];
                line.extend(server.config.args.iter().cloned());
                json!({ "command": line.join(" ") })
            }
            (None, Some(url)) => {
                let authorized = server.credentials.as_deref().is_some_and(|file| {
                    agentic_plugin_mcp::oauth::has_credentials(
                        &agentic_plugin_mcp::config::expand(url).unwrap_or_default(),
                        file,
                    )
                });
                json!({ "url": url, "oauthAuthorized": authorized })
            }
            (None, None) => json!({}),
        };
        listed.push(json!({
            "name": server.name,
            "transport": transport,
            "status": server.status(),
            "protocol": protocol,
            "server": server_info,
            "tools": tools,
        }));
    }
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&listed)?);
    } else if listed.is_empty() {
        outln!("No MCP servers are configured. Add one to agentic.toml, e.g.:");
        outln!();
        outln!("[mcp.servers.files]");
        outln!("command = \"npx\"");
        outln!("args = [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"/srv/data\"]");
    } else {
        for (server, entry) in servers.servers().iter().zip(&listed) {
            let state = match server.status() {
                Status::Ready => "ready".to_owned(),
                Status::Starting => "starting".to_owned(),
                Status::Restarting { error, .. } => format!("down: {error}"),
                Status::Disabled { reason } => format!("disabled: {reason}"),
            };
            let transport = &entry["transport"];
            let via = transport["command"]
                .as_str()
                .or_else(|| transport["url"].as_str())
                .unwrap_or("");
            let oauth = if entry["transport"]["oauthAuthorized"] == true {
                ", OAuth: authorized"
            } else {
                ""
            };
            outln!("{}  {state}  ({via}{oauth})", server.name);
            if let Some(protocol) = entry["protocol"].as_str() {
                let name = entry["server"].as_str().unwrap_or("?");
                outln!("  {name}, protocol {protocol}");
            }
            for tool in entry["tools"].as_array().into_iter().flatten() {
                let mark = if tool["needsApproval"] == true {
                    "  (asks for approval)"
                } else {
                    ""
                };
                let description = tool["description"].as_str().unwrap_or("");
                let first_line = description.lines().next().unwrap_or("");
                outln!(
                    "  {:<36} {first_line}{mark}",
                    tool["id"].as_str().unwrap_or("")
                );
            }
        }
    }
    let all_up = servers
        .servers()
        .iter()
        .all(|server| matches!(server.status(), Status::Ready | Status::Disabled { .. }));
    Ok(if all_up {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
