//! `agentic mcp …`: the MCP servers this config names.

use std::process::ExitCode;

use agentic_conversation::ConversationService;
use agentic_core::{Approval, Runtime, State};
use agentic_plugin_mcp::{McpServers, Status};
use serde_json::json;

use crate::McpAction;
use crate::local::USER;
use crate::models;
use crate::settings::Settings;

pub(crate) async fn run(settings: &Settings, action: &McpAction) -> anyhow::Result<ExitCode> {
    match action {
        McpAction::List { json } => list(settings, *json).await,
        McpAction::Serve { user, http } => {
            let runtime = models::with_model_fallback(|| {
                Runtime::builder()
                    .config(settings.config.clone())
                    .registered_plugins()
                    .build()
            })
            .await?;
            let service =
                ConversationService::open(runtime.clone(), &settings.database_url()?).await?;
            match http {
                None => agentic_plugin_mcp::serve_stdio(service.clone(), user).await?,
                Some(addr) => {
                    let listener = tokio::net::TcpListener::bind(addr)
                        .await
                        .map_err(|error| anyhow::anyhow!("could not listen on {addr}: {error}"))?;
                    eprintln!(
                        "agentic: MCP at http://{}/mcp as user {user}",
                        listener.local_addr()?
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
            (None, Some(url)) => json!({ "url": url }),
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
            let via = entry["transport"]
                .as_object()
                .and_then(|transport| transport.values().next())
                .and_then(|value| value.as_str())
                .unwrap_or("");
            outln!("{}  {state}  ({via})", server.name);
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
