//! `agentic`: the playground CLI. Runs prompts in process, in any mode, against the provider
//! the environment selects, in conversations stored in the default database (or
//! `AGENTIC_DATABASE_URL`), and lists and runs tools.

use std::io::{BufRead, IsTerminal, Read, Write};
use std::process::ExitCode;
use std::sync::Arc;

use agentic_conversation::{
    ConversationError, ConversationInstance, ConversationService, PromptRequest,
    database_url_from_env,
};
use agentic_core::{
    EventPayload, ModelKind, PromptOutput, PromptState, Received, Runtime, State, ToolContext,
    ToolResult,
};
use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};
use tokio::sync::mpsc;

// Plugins register themselves at link time; naming each crate keeps the linker from dropping it.
use agentic_interpreter as _;
use agentic_plugin_openai as _;
use agentic_plugin_script as _;
use agentic_plugin_time as _;

const USER: &str = "cli";

#[derive(Debug, Parser)]
#[command(
    name = "agentic",
    version,
    about = "Run LLM agents with pluggable execution modes",
    after_help = "The model provider comes from the environment: OPENAI_API_KEY and/or \
                  OPENAI_BASE_URL (OpenAI, Ollama, vLLM, llama.cpp, LM Studio), or \
                  AGENTIC_PROVIDER=script:<turns.yaml> for a scripted model."
)]
struct Cli {
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
    },
    /// List your conversations, most recent first
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
    },
    /// List modes, models and plugins
    #[command(after_help = "Example:\n  agentic capabilities")]
    Capabilities,
}

fn main() -> ExitCode {
    agentic_interpreter::run_worker_if_requested();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("agentic: could not start: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("agentic: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let runtime = Arc::new(Runtime::builder().registered_plugins().build().await?);
    let uses_conversations = matches!(
        cli.command,
        None | Some(Command::Prompt { .. } | Command::Conversations)
    );
    if !uses_conversations {
        return run_stateless(&runtime, cli.command).await;
    }
    let url = database_url_from_env()?;
    let service = ConversationService::open(runtime.clone(), &url).await?;
    let code = run_with_conversations(&service, cli.command).await;
    if let Err(error) = service.shutdown().await {
        eprintln!("agentic: could not close the database cleanly: {error:#}");
    }
    code
}

async fn run_with_conversations(
    service: &ConversationService,
    command: Option<Command>,
) -> anyhow::Result<ExitCode> {
    match command {
        None => repl(service).await,
        Some(Command::Conversations) => {
            for conversation in service.list(USER).await? {
                println!(
                    "{}  {}  {}",
                    conversation.id,
                    conversation.updated_at.format("%Y-%m-%d %H:%M"),
                    conversation.title
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Prompt {
            message,
            mode,
            model,
            json,
            yes,
            conversation,
        }) => {
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
            let settings = PromptSettings {
                mode,
                model,
                json,
                yes,
            };
            let mut conversation = match service.get_or_create(USER, conversation.as_deref()).await
            {
                Ok(conversation) => conversation,
                Err(ConversationError::NotFound(id)) => {
                    eprintln!(
                        "agentic: no conversation \"{id}\"; `agentic conversations` lists yours"
                    );
                    return Ok(ExitCode::from(2));
                }
                Err(error) => return Err(error.into()),
            };
            let (code, _) = prompt(service, &mut conversation, message, &settings).await?;
            Ok(code)
        }
        Some(_) => unreachable_command(),
    }
}

fn unreachable_command() -> anyhow::Result<ExitCode> {
    bail!("this command does not use conversations")
}

/// Commands that need no database.
async fn run_stateless(runtime: &Runtime, command: Option<Command>) -> anyhow::Result<ExitCode> {
    let Some(command) = command else {
        return unreachable_command();
    };
    match command {
        Command::Prompt { .. } | Command::Conversations => unreachable_command(),
        Command::Tools => {
            let prepared = prepare(runtime).await?;
            for tool in prepared.tools.iter() {
                println!("{:<28} {}", tool.id(), tool.description());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::ToolSchema { id } => {
            let prepared = prepare(runtime).await?;
            let tool = prepared
                .tools
                .get(&id)
                .with_context(|| format!("unknown tool \"{id}\""))?;
            let schema = serde_json::json!({
                "id": tool.id(),
                "description": tool.description(),
                "input": tool.input_schema(),
                "output": tool.output_schema(),
            });
            println!("{}", serde_json::to_string_pretty(&schema)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Invoke { id, input } => {
            let input: serde_json::Value =
                serde_json::from_str(&input).context("the input is not valid JSON")?;
            let prepared = prepare(runtime).await?;
            let context =
                ToolContext::new(USER, "cli", State::default(), runtime.services().clone());
            match prepared.tools.invoke(context, &id, input).await {
                Ok(output) => {
                    println!("{}", serde_json::to_string_pretty(&output)?);
                    Ok(ExitCode::SUCCESS)
                }
                Err(error) => {
                    eprintln!("agentic: {error}");
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        Command::Capabilities => {
            let capabilities = runtime.services().capabilities();
            println!("{}", serde_json::to_string_pretty(&capabilities)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn prepare(runtime: &Runtime) -> anyhow::Result<agentic_core::Prepared> {
    runtime
        .services()
        .prepare(USER, "cli", "classic", &State::default())
        .await
}

/// How prompts run, from flags or REPL commands.
struct PromptSettings {
    mode: String,
    model: ModelKind,
    json: bool,
    yes: bool,
}

/// `agentic` with no command: a prompt per line, in one stored conversation until `/new`.
async fn repl(service: &ConversationService) -> anyhow::Result<ExitCode> {
    let runtime = service.runtime();
    let mut settings = PromptSettings {
        mode: "classic".to_owned(),
        model: ModelKind::Normal,
        json: false,
        yes: false,
    };
    let mut conversation: Option<ConversationInstance> = None;
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
                if runtime.services().modes.get(mode).is_ok() {
                    settings.mode = mode.to_owned();
                    eprintln!("agentic: mode {mode}");
                } else {
                    eprintln!(
                        "agentic: unknown mode \"{mode}\"; modes: {}",
                        runtime.services().modes.ids().join(", ")
                    );
                }
            }
            (command, _) if command.starts_with('/') => {
                eprintln!("agentic: unknown command {command}; try /mode <mode>, /new or /quit");
            }
            _ => {
                // Each line is one prompt, even with the same lines read before it.
                let message = line.to_owned();
                let current = match &mut conversation {
                    Some(current) => current,
                    None => conversation.insert(service.create(USER).await?),
                };
                prompt(service, current, message, &settings).await?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs one prompt in a conversation; returns the exit code and the finished prompt.
async fn prompt(
    service: &ConversationService,
    conversation: &mut ConversationInstance,
    message: String,
    settings: &PromptSettings,
) -> anyhow::Result<(ExitCode, agentic_core::Prompt)> {
    let runtime = service.runtime();
    let PromptSettings {
        mode,
        model,
        json,
        yes,
    } = settings;
    let (model, json, yes) = (*model, *json, *yes);
    let mut subscription = runtime.services().events.subscribe(Some(USER));
    let started = conversation
        .start(PromptRequest {
            input: Some(message),
            mode: Some(mode.clone()),
            model,
            ..PromptRequest::default()
        })
        .await?;
    let prompt_id = started.prompt_id().to_owned();

    // Events are printed as they come; approval requests are handed to the loop below.
    let (approvals, mut approval_requests) = mpsc::unbounded_channel();
    let printer_prompt = prompt_id.clone();
    let printer = tokio::spawn(async move {
        let show_tools = std::io::stderr().is_terminal();
        while let Some(received) = subscription.next().await {
            let event = match received {
                Received::Event(event) => event,
                Received::Lagged(missed) => {
                    eprintln!("agentic: {missed} events were dropped");
                    continue;
                }
            };
            if event.payload.prompt_id() != Some(printer_prompt.as_str()) {
                continue;
            }
            if json {
                if let Ok(line) = serde_json::to_string(&*event) {
                    println!("{line}");
                }
            } else {
                print_event(&event.payload, show_tools);
            }
            match &event.payload {
                EventPayload::ApprovalRequested {
                    tool_call_id,
                    tool_name,
                    reason,
                    input,
                    ..
                } => {
                    let _ = approvals.send((
                        tool_call_id.clone(),
                        tool_name.clone(),
                        reason.clone(),
                        input.clone(),
                    ));
                }
                EventPayload::PromptCompleted { .. } | EventPayload::PromptError { .. } => break,
                _ => {}
            }
        }
    });

    let mut prompt = started.run().await?;
    while prompt.state == PromptState::WaitingForApproval {
        let Some((tool_call_id, tool_name, reason, input)) = approval_requests.recv().await else {
            bail!("the prompt waits for approval but none was requested");
        };
        prompt = match decide(&tool_name, &reason, &input, yes) {
            Ok(()) => service.approve(USER, &prompt.id, &tool_call_id).await?,
            Err(refusal) => {
                eprintln!("agentic: {refusal}");
                service
                    .reject(USER, &prompt.id, &tool_call_id, Some(&refusal))
                    .await?
            }
        };
    }
    let _ = printer.await;
    if !json {
        println!();
    }
    eprintln!(
        "agentic: conversation {} (continue it with -c {})",
        conversation.id(),
        conversation.id()
    );
    let code = match prompt.state {
        PromptState::Completed => ExitCode::SUCCESS,
        _ => {
            if let Some(error) = &prompt.error {
                eprintln!("agentic: the prompt failed: {error}");
            }
            ExitCode::FAILURE
        }
    };
    Ok((code, prompt))
}

/// Asks on the terminal, approves with `--yes`, and refuses when nobody can be asked.
fn decide(tool: &str, reason: &str, input: &serde_json::Value, yes: bool) -> Result<(), String> {
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Err(format!(
            "{tool} needs approval ({reason}) and there is no terminal to ask; \
             run with --yes to approve tool calls"
        ));
    }
    eprint!("\nApprove {tool} ({reason}) with input {input}? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    if matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
        Ok(())
    } else {
        Err("declined at the terminal".to_owned())
    }
}

fn print_event(payload: &EventPayload, show_tools: bool) {
    match payload {
        EventPayload::PromptStream { delta, .. } => {
            print!("{delta}");
            let _ = std::io::stdout().flush();
        }
        EventPayload::PromptOutput {
            output: PromptOutput::Tool(tool),
            ..
        } => {
            // Logs of code mode go to stderr with a prefix, whether or not it is a terminal.
            if let ToolResult::Success { output } = &tool.result
                && let Some(logs) = output.get("logs").and_then(|logs| logs.as_array())
            {
                for line in logs {
                    eprintln!("[log] {}", line.as_str().unwrap_or_default());
                }
            }
            if !show_tools || tool.function == "code.execute" {
                return;
            }
            match &tool.result {
                ToolResult::Pending { reason } => {
                    eprintln!("· {} {} ({reason})", tool.function, tool.input)
                }
                ToolResult::Success { .. } => eprintln!("✓ {}", tool.function),
                ToolResult::Error { error } => eprintln!("✗ {}: {error}", tool.function),
            }
        }
        _ => {}
    }
}
