//! `agentic`: the playground CLI. Runs prompts in any mode, in conversations stored in the
//! local database, in this process or (with `--server`) on a running `agentic serve`; lists and
//! runs tools; serves the HTTP API.

/// `print!` to stdout that ends the command quietly when stdout is a closed pipe
/// (`agentic … | head`), as Unix tools do, instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::write_stdout(format_args!($($arg)*), false)
    };
}

/// `println!` to stdout, with [`out!`]'s handling of a closed pipe.
macro_rules! outln {
    () => {
        $crate::write_stdout(format_args!(""), true)
    };
    ($($arg:tt)*) => {
        $crate::write_stdout(format_args!($($arg)*), true)
    };
}

mod backend;
mod local;
mod mcp;
mod models;
mod remote;
mod replay;
mod settings;
mod telemetry;
mod ui;

use std::io::{BufRead, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use agentic_conversation::ConversationService;
use agentic_core::{ModelKind, Runtime};
use anyhow::Context as _;
use clap::{Parser, Subcommand};
use serde_json::{Value, json};

// Plugins register themselves at link time; naming each crate keeps the linker from dropping it.
use agentic_interpreter as _;
use agentic_plugin_anthropic as _;
use agentic_plugin_artifact as _;
use agentic_plugin_fs as _;
use agentic_plugin_gemini as _;
use agentic_plugin_local as _;
use agentic_plugin_mcp as _;
use agentic_plugin_memory as _;
use agentic_plugin_openai as _;
use agentic_plugin_script as _;
use agentic_plugin_shell as _;
use agentic_plugin_time as _;
use agentic_plugin_todo as _;
use agentic_plugin_trigger as _;
use agentic_plugin_web as _;

use crate::backend::{Backend, LocalBackend, StartError};
use crate::remote::Remote;
use crate::settings::Settings;
use crate::ui::PromptSettings;

// Under load the server allocates and frees many small buffers across threads, where glibc's
// malloc cost a fifth of its CPU; why mimalloc, and why without huge pages, is in
// docs/architecture.md. Sandbox workers started from this binary reserve no arena in advance.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "agentic",
    version,
    about = "Run LLM agents with pluggable execution modes",
    after_help = "The model provider comes from the environment: OPENAI_API_KEY and/or \
                  OPENAI_BASE_URL (OpenAI, Ollama, vLLM, llama.cpp, LM Studio), or \
                  AGENTIC_PROVIDER=script:<turns.yaml> for a scripted model; with none of them \
                  the embedded local model answers (fetched on first use). Settings: flags, \
                  then the environment, then agentic.toml, then defaults.\n\n\
                  Examples:\n  agentic prompt \"What time is it in Oslo?\" -m code\n  \
                  agentic                       # interactive session\n  \
                  agentic serve --addr 127.0.0.1:4000\n  \
                  agentic --server http://127.0.0.1:4000 prompt \"Hello\""
)]
struct Cli {
    /// Run against this `agentic serve` (e.g. http://127.0.0.1:4000) instead of in process
    #[arg(long, global = true, value_name = "URL")]
    server: Option<String>,
    /// Read settings from this file instead of ./agentic.toml
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Log lines on stderr as text or as JSON objects; which ones come from AGENTIC_LOG (or
    /// RUST_LOG), `info` for `serve` and `warn` otherwise
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: LogFormat,
    /// Without a command, `agentic` opens an interactive session
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one prompt and stream the answer to stdout
    #[command(
        after_help = "Examples:\n  agentic prompt \"What time is it in Oslo?\"\n  \
                            agentic prompt \"Sum the numbers 1 to 100\" -m code\n  \
                            echo \"What time is it?\" | agentic prompt -\n  \
                            agentic prompt \"And in Tokyo?\" -c <conversation id>"
    )]
    Prompt {
        /// The message; `-` reads it from stdin
        message: String,
        /// Execution mode: classic, code, or one a plugin adds
        #[arg(short, long, default_value = "classic")]
        mode: String,
        /// Model class: normal or high
        #[arg(long, default_value = "normal")]
        model: ModelKind,
        /// Print every event as a JSON line instead of the text
        #[arg(long)]
        json: bool,
        /// Approve every tool call without asking
        #[arg(long)]
        yes: bool,
        /// Continue this conversation (its id is printed on stderr after each prompt)
        #[arg(short, long = "conversation", value_name = "ID")]
        conversation: Option<String>,
        /// Go without a plugin's tools, e.g. `--leave-out fs --leave-out shell` (the
        /// conversation keeps the choice; `--leave-out none` brings every plugin back)
        #[arg(long = "leave-out", value_name = "PLUGIN", value_delimiter = ',')]
        leave_out: Vec<String>,
        /// Once the prompt ends, write it to this file as a test case that replays it
        /// (as `agentic export <id> --test <file>` does)
        #[arg(long, value_name = "FILE")]
        record: Option<PathBuf>,
    },
    /// List the approval scopes in force (tools approved for the rest of a prompt, or for a
    /// conversation until they expire), or revoke one
    #[command(
        after_help = "Examples:\n  agentic scopes\n  agentic scopes -c <conversation id>\n  agentic scopes --revoke <scope id>\n\nA scope is granted when approving a call: answer p (this prompt) or c (this conversation, for an hour)."
    )]
    Scopes {
        /// Only this conversation's
        #[arg(short = 'c', long = "conversation", value_name = "ID")]
        conversation: Option<String>,
        /// Revoke this scope: the calls it approved are asked about again
        #[arg(long, value_name = "ID", conflicts_with = "conversation")]
        revoke: Option<String>,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Write a prompt that ended as a test case: the model's replies as turns, what every
    /// tool call returned, the approvals given; `agentic replay` and the test kit play it
    /// again without running a tool
    #[command(
        after_help = "Examples:\n  agentic export <prompt id> --test tests/timelines/report.yaml\n  agentic export <prompt id>        (to stdout)\n\nPrompt ids are in `agentic prompt --json` events and GET /api/conversations/{id}."
    )]
    Export {
        /// The prompt's id
        prompt: String,
        /// The file to write (stdout when absent)
        #[arg(long = "test", value_name = "FILE")]
        test: Option<PathBuf>,
    },
    /// Play a test case again in this process: its recorded model turns, every tool call
    /// answered from its recording (nothing runs but tools the case marks `live`); prints the
    /// timeline it made and fails on a call the recording does not have
    #[command(
        after_help = "Examples:\n  agentic replay tests/timelines/report.yaml\n  agentic replay report.yaml --code fixed.js           (the first program, edited)\n  agentic replay report.yaml --code fixed.js --turn 2"
    )]
    Replay {
        /// The case (YAML), e.g. from `agentic export`
        case: PathBuf,
        /// Run this program instead of the case's first (or `--turn`-th) one
        #[arg(long, value_name = "FILE")]
        code: Option<PathBuf>,
        /// Which program `--code` replaces, counted from 1
        #[arg(long, value_name = "N", requires = "code")]
        turn: Option<usize>,
        /// Print the replayed prompt as JSON
        #[arg(long)]
        json: bool,
    },
    /// List your conversations, most recent first, with their tokens and cost (by the
    /// `[prices]` table of agentic.toml)
    #[command(after_help = "Example:\n  agentic conversations")]
    Conversations,
    /// List the tools
    #[command(after_help = "Example:\n  agentic tools")]
    Tools,
    /// Show one tool's input and output schemas
    #[command(after_help = "Example:\n  agentic tool-schema time.now")]
    ToolSchema { id: String },
    /// Run one tool directly
    #[command(after_help = "Example:\n  agentic invoke time.now '{\"timezone\": \"Europe/Oslo\"}'")]
    Invoke {
        id: String,
        /// The input as JSON
        #[arg(default_value = "{}")]
        input: String,
        /// Approve the call without asking, if the tool needs approval
        #[arg(long)]
        yes: bool,
    },
    /// List modes, models and plugins
    #[command(after_help = "Example:\n  agentic capabilities")]
    Capabilities,
    /// Fetch or list local models (the embedded model answers when no provider is set)
    #[command(
        after_help = "Examples:\n  agentic model pull\n  agentic model pull qwen2.5-coder-1.5b\n  agentic model list"
    )]
    Model {
        #[command(subcommand)]
        action: ModelAction,
    },
    /// The MCP servers of `[mcp.servers]`: their state and their tools
    #[command(after_help = "Example:\n  agentic mcp list")]
    Mcp {
        #[command(subcommand)]
        action: McpAction,
    },
    /// Serve the HTTP API (see /api/docs) and the web playground (/) until Ctrl-C or SIGTERM
    #[command(after_help = "Examples:\n  agentic serve\n  agentic serve --addr 0.0.0.0:4000")]
    Serve {
        /// Address to listen on [default: 127.0.0.1:4000]
        #[arg(long)]
        addr: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum ModelAction {
    /// Fetch a known model (the default, Qwen2.5-Coder-1.5B-Instruct, when no name is given) unless
    /// it is already there; `agentic model list` names them
    Pull {
        /// A known model's name, e.g. qwen2.5-coder-1.5b
        name: Option<String>,
    },
    /// List the known models and the model files in the models directory
    List,
}

#[derive(Debug, Subcommand)]
enum McpAction {
    /// Start every configured MCP server and show its state, protocol and tools
    List {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Be an MCP server on stdin and stdout: agentic's tools, agentic.prompt,
    /// agentic.execute and agentic.search_tools, for an editor or another agent
    #[command(
        after_help = "An MCP client's config, e.g.:\n  { \"command\": \"agentic\", \"args\": [\"mcp\", \"serve\"] }\nOver HTTP on loopback:\n  agentic mcp serve --http 127.0.0.1:4100   (then http://127.0.0.1:4100/mcp)"
    )]
    Serve {
        /// The user whose tools, files and conversations the calls use
        #[arg(long, default_value = "cli")]
        user: String,
        /// Serve streamable HTTP at /mcp on this loopback address instead of stdio
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
    },
    /// Authorize agentic with a `url` server that asks for OAuth: opens the authorization
    /// page and keeps the tokens for later connections
    #[command(after_help = "Example:\n  agentic mcp login tracker")]
    Login {
        /// The server's name in [mcp.servers]
        server: String,
        /// Print the authorization URL without opening a browser
        #[arg(long)]
        no_browser: bool,
    },
    /// Forget the OAuth tokens `agentic mcp login` kept for a server
    Logout {
        /// The server's name in [mcp.servers]
        server: String,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

fn main() -> ExitCode {
    agentic_interpreter::run_worker_if_requested();
    let cli = Cli::parse();
    telemetry::set_format(cli.log_format);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("agentic: could not start: {error}");
            return ExitCode::FAILURE;
        }
    };
    let settings = match Settings::load(cli.config.as_deref()) {
        Ok(settings) => settings,
        Err(error) => {
            telemetry::say(tracing_core::Level::ERROR, &format!("{error:#}"));
            return ExitCode::FAILURE;
        }
    };
    let telemetry = {
        let _runtime = runtime.enter();
        telemetry::init(
            cli.log_format,
            matches!(cli.command, Some(Command::Serve { .. })),
            settings.record_payloads(),
        )
    };
    let code = match runtime.block_on(run(cli, settings)) {
        Ok(code) => code,
        Err(error) => {
            telemetry::say(tracing_core::Level::ERROR, &format!("{error:#}"));
            ExitCode::FAILURE
        }
    };
    telemetry.shutdown();
    code
}

async fn run(cli: Cli, settings: Settings) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Some(Command::Serve { addr }) => return serve(&settings, addr.as_deref()).await,
        Some(Command::Model { action }) => {
            let action = match action {
                ModelAction::Pull { name } => {
                    let name = name.clone();
                    tokio::task::spawn_blocking(move || models::pull(name.as_deref())).await?
                }
                ModelAction::List => tokio::task::spawn_blocking(models::list).await?,
            };
            return match action {
                Ok(()) => Ok(ExitCode::SUCCESS),
                Err(error) if error.downcast_ref::<models::UnknownModel>().is_some() => {
                    eprintln!("agentic: {error}");
                    Ok(ExitCode::from(2))
                }
                Err(error) => Err(error),
            };
        }
        Some(Command::Mcp { action }) => return mcp::run(&settings, action).await,
        Some(Command::Replay {
            case,
            code,
            turn,
            json,
        }) => {
            return replay::run(replay::ReplayRequest {
                case,
                code: code.as_deref(),
                turn: *turn,
                json: *json,
            })
            .await;
        }
        _ => {}
    }
    let backend: Box<dyn Backend> = match settings.server(cli.server.as_deref()) {
        Some(server) => Box::new(Remote::new(&server)?),
        None => {
            let config = match &cli.command {
                Some(Command::Invoke { id, .. }) => mcp::only_the_server_of(&settings.config, id),
                _ => settings.config.clone(),
            };
            let build = || {
                Runtime::builder()
                    .config(config.clone())
                    .registered_plugins()
                    .build()
            };
            // Only commands that talk to a model fetch the local one.
            let runtime = if matches!(cli.command, None | Some(Command::Prompt { .. })) {
                models::with_model_fallback(build).await?
            } else {
                Arc::new(build().await?)
            };
            // Every local command opens the database: prompts live in it, and so do the
            // tables of plugins such as todo, whose tools `invoke` may run.
            let service =
                ConversationService::open(runtime.clone(), &settings.database_url()?).await?;
            Box::new(LocalBackend { runtime, service })
        }
    };
    let code = dispatch(backend.as_ref(), cli.command).await;
    if let Err(error) = backend.close().await {
        eprintln!("agentic: could not close the database cleanly: {error:#}");
    }
    code
}

async fn dispatch(backend: &dyn Backend, command: Option<Command>) -> anyhow::Result<ExitCode> {
    let Some(command) = command else {
        return repl(backend).await;
    };
    match command {
        Command::Prompt {
            message,
            mode,
            model,
            json,
            yes,
            conversation,
            leave_out,
            record,
        } => {
            let message = if message == "-" {
                let mut text = String::new();
                std::io::stdin().read_to_string(&mut text)?;
                text.trim().to_owned()
            } else {
                message
            };
            if message.is_empty() {
                eprintln!("agentic: the message is empty");
                return Ok(ExitCode::from(2));
            }
            let leave_out = match leave_out.as_slice() {
                [] => None,
                [none] if none == "none" => Some(Vec::new()),
                ids => Some(ids.to_vec()),
            };
            let settings = PromptSettings {
                mode,
                model,
                json,
                yes,
                leave_out,
            };
            let (code, ids) =
                prompt_once(backend, conversation.as_deref(), message, &settings).await?;
            if let (Some(path), Some((_, prompt_id))) = (record, ids) {
                let yaml = backend.export(&prompt_id).await?;
                std::fs::write(&path, yaml)
                    .with_context(|| format!("could not write {}", path.display()))?;
                eprintln!("agentic: recorded as {}", path.display());
            }
            Ok(code)
        }
        Command::Scopes {
            conversation,
            revoke,
            json,
        } => {
            if let Some(id) = revoke {
                let revoked = backend.revoke_scope(&id).await?;
                if json {
                    outln!("{}", serde_json::to_string(&revoked)?);
                } else {
                    outln!("revoked {} ({})", revoked.id, revoked.tool);
                }
                return Ok(ExitCode::SUCCESS);
            }
            let scopes = backend.scopes(conversation.as_deref()).await?;
            if json {
                outln!("{}", serde_json::to_string(&scopes)?);
            } else if scopes.is_empty() {
                eprintln!("agentic: no scope is in force");
            } else {
                for scope in &scopes {
                    let reach = match scope.reach {
                        agentic_core::scope::Reach::Prompt => {
                            format!("prompt {}", scope.prompt_id)
                        }
                        agentic_core::scope::Reach::Conversation => format!(
                            "conversation {}",
                            scope.conversation_id.as_deref().unwrap_or("?")
                        ),
                    };
                    let until = scope
                        .expires_at
                        .map(|at| format!(" until {}", at.to_rfc3339()))
                        .unwrap_or_default();
                    outln!("{}  {}  {reach}{until}", scope.id, scope.tool);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Export { prompt, test } => {
            let yaml = backend.export(&prompt).await?;
            match test {
                Some(path) => {
                    if let Some(parent) = path
                        .parent()
                        .filter(|parent| !parent.as_os_str().is_empty())
                    {
                        std::fs::create_dir_all(parent)
                            .with_context(|| format!("could not create {}", parent.display()))?;
                    }
                    std::fs::write(&path, yaml)
                        .with_context(|| format!("could not write {}", path.display()))?;
                    eprintln!("agentic: wrote {}", path.display());
                }
                None => out!("{yaml}"),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Replay { .. } => unreachable!("replay runs before a backend is opened"),
        Command::Conversations => {
            // Id, last update, tokens, cost (`-` without a price for its models), title.
            for conversation in backend.conversations().await? {
                let updated = conversation.updated_at.format("%Y-%m-%d %H:%M");
                let usage = &conversation.usage;
                let cost = usage
                    .cost
                    .map_or_else(|| "-".to_owned(), |cost| format!("{cost:.4}"));
                outln!(
                    "{}  {updated}  {:>9} tokens  cost {cost:>9}  {}",
                    conversation.id,
                    usage.total_tokens,
                    conversation.title
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Tools => {
            for tool in backend.tools().await? {
                outln!("{:<28} {}", tool.id, tool.description);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::ToolSchema { id } => {
            let tool = backend.tool(&id).await?;
            let schema = json!({
                "id": tool.id,
                "description": tool.description,
                "input": tool.input_schema,
                "output": tool.output_schema,
            });
            outln!("{}", serde_json::to_string_pretty(&schema)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Invoke { id, input, yes } => {
            let input: Value =
                serde_json::from_str(&input).context("the input is not valid JSON")?;
            match backend.invoke(&id, input, yes).await? {
                Ok(output) => {
                    outln!("{}", serde_json::to_string_pretty(&output)?);
                    Ok(ExitCode::SUCCESS)
                }
                Err(error) => {
                    eprintln!("agentic: {error}");
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        Command::Capabilities => {
            let capabilities = backend.capabilities().await?;
            outln!("{}", serde_json::to_string_pretty(&capabilities)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve { .. } | Command::Model { .. } | Command::Mcp { .. } => unreachable_serve(),
    }
}

fn unreachable_serve() -> anyhow::Result<ExitCode> {
    anyhow::bail!("`serve` is handled before any backend is chosen")
}

/// Runs one prompt; returns the exit code and the conversation it ran in.
async fn prompt_once(
    backend: &dyn Backend,
    conversation: Option<&str>,
    message: String,
    settings: &PromptSettings,
) -> anyhow::Result<(ExitCode, Option<(String, String)>)> {
    let mut driver = match backend.start(conversation, message, settings).await {
        Ok(driver) => driver,
        Err(StartError::Usage(message)) => {
            eprintln!("agentic: {message}");
            return Ok((ExitCode::from(2), None));
        }
        Err(StartError::Failed(error)) => {
            eprintln!("agentic: {error:#}");
            return Ok((ExitCode::FAILURE, None));
        }
    };
    let code = ui::follow(driver.as_mut(), settings).await?;
    let ids = (
        driver.conversation_id().to_owned(),
        driver.prompt_id().to_owned(),
    );
    Ok((code, Some(ids)))
}

/// `agentic` with no command: a prompt per line, in one stored conversation until `/new`.
async fn repl(backend: &dyn Backend) -> anyhow::Result<ExitCode> {
    let modes: Vec<String> = backend
        .capabilities()
        .await?
        .modes
        .into_iter()
        .map(|mode| mode.id)
        .collect();
    let mut settings = PromptSettings {
        mode: "classic".to_owned(),
        model: ModelKind::Normal,
        json: false,
        yes: false,
        leave_out: None,
    };
    let mut conversation: Option<String> = None;
    let interactive = std::io::stdin().is_terminal();
    if interactive {
        eprintln!("agentic: /mode <mode>, /new for a new conversation, /quit to leave");
    }
    let mut lines = std::io::stdin().lock().lines();
    loop {
        if interactive {
            eprint!("{}> ", settings.mode);
            let _ = std::io::stderr().flush();
        }
        let Some(line) = lines.next() else { break };
        let line = line?;
        let line = line.trim();
        match line.split_once(' ').unwrap_or((line, "")) {
            ("", _) => {}
            ("/quit" | "/exit", _) => break,
            ("/new", _) => {
                conversation = None;
                eprintln!("agentic: new conversation");
            }
            ("/mode", mode) if !mode.trim().is_empty() => {
                let mode = mode.trim();
                if modes.iter().any(|known| known == mode) {
                    settings.mode = mode.to_owned();
                    eprintln!("agentic: mode {mode}");
                } else {
                    eprintln!(
                        "agentic: unknown mode \"{mode}\"; modes: {}",
                        modes.join(", ")
                    );
                }
            }
            (command, _) if command.starts_with('/') => {
                eprintln!("agentic: unknown command {command}; try /mode <mode>, /new or /quit");
            }
            _ => {
                let (_, used) =
                    prompt_once(backend, conversation.as_deref(), line.to_owned(), &settings)
                        .await?;
                if let Some((conversation_id, _)) = used {
                    conversation = Some(conversation_id);
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `agentic serve`: the HTTP API until Ctrl-C or SIGTERM.
async fn serve(settings: &Settings, addr: Option<&str>) -> anyhow::Result<ExitCode> {
    let api = agentic_api::ApiConfig::from_env(&settings.config)?;
    // Before the runtime starts its sandbox workers, so that the gauges count them.
    if api.metrics_token.is_some() {
        agentic_api::metrics::install()?;
    }
    // On a server, each user's files live in their own directory (unless `[fs]` says otherwise).
    let files = agentic_conversation::default_database_path()?.with_file_name("files");
    let config = settings
        .config
        .clone()
        .with_default_section("fs", json!({ "root": files, "perUser": true }));
    let runtime = models::with_model_fallback(|| {
        Runtime::builder()
            .config(config.clone())
            .registered_plugins()
            .build()
    })
    .await?;
    let service = ConversationService::open(runtime, &settings.database_url()?).await?;
    // On PostgreSQL, every server on the database shows every user's events, in one order, and
    // a decision taken on one reaches the server where its prompt waits.
    let relay = if service.store().backend() == agentic_conversation::sea_orm::DbBackend::Postgres {
        Some(agentic_conversation::relay::start_for(&service).await?)
    } else {
        None
    };
    // A server that dies leaves its running prompts to the others (`[conversation] takeover`).
    if agentic_conversation::CompressionSettings::from_config(&service.runtime().services().config)?
        .takeover
    {
        service.take_over_prompts();
    }
    let addr = settings.addr(addr);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .with_context(|| format!("could not listen on {addr}"))?;
    telemetry::say(
        tracing_core::Level::INFO,
        &format!(
            "listening on http://{} (the playground at /, docs at /api/docs)",
            listener.local_addr()?
        ),
    );
    // Plugins' background services (e.g. the trigger scheduler) run beside the API and stop
    // first, so that nothing starts a prompt while the service shuts down.
    let background = agentic_conversation::start_background_services(&service);
    // `/mcp`: agentic as a streamable HTTP MCP server, behind the API's authentication. Its
    // open streams end when the server stops.
    let mcp_stopping = tokio_util::sync::CancellationToken::new();
    let mcp = agentic_plugin_mcp::http_router(
        agentic_plugin_mcp::AgenticServer::behind_api(service.clone()),
        listener.local_addr()?.ip().is_loopback(),
        mcp_stopping.clone(),
    );
    let shutdown = async move {
        agentic_api::shutdown_signal().await;
        mcp_stopping.cancel();
        background.stop(std::time::Duration::from_secs(10)).await;
        // Its listening connection must go back before the database closes; what is published
        // from here on is delivered on this server only.
        drop(relay);
    };
    agentic_api::serve_with(listener, service, api, mcp, shutdown).await?;
    telemetry::say(tracing_core::Level::INFO, "stopped");
    Ok(ExitCode::SUCCESS)
}

/// Writes to stdout; a closed pipe ends the process at once with the status a shell reports
/// for SIGPIPE (141), and says nothing.
pub(crate) fn write_stdout(text: std::fmt::Arguments<'_>, newline: bool) {
    let mut stdout = std::io::stdout().lock();
    let mut result = stdout.write_fmt(text);
    if newline && result.is_ok() {
        result = stdout.write_all(b"\n");
    }
    if let Err(error) = result {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
        eprintln!("agentic: could not write to stdout: {error}");
        std::process::exit(1);
    }
}
