//! The terminal side of a prompt: streaming text, tool activity, a spinner while the model
//! thinks, approvals, and the exit code. The same whether the prompt runs in process or on a
//! server.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use agentic_core::{Event, EventPayload, Prompt, PromptOutput, PromptState, ToolResult, Verdict};
use async_trait::async_trait;

/// How prompts run, from flags or REPL commands.
#[derive(Debug, Clone)]
pub(crate) struct PromptSettings {
    pub mode: String,
    pub model: agentic_core::ModelKind,
    pub json: bool,
    pub yes: bool,
    /// Plugins the prompt goes without (see `agentic_core::LEFT_OUT_PLUGINS`); `None` keeps
    /// the conversation's choice.
    pub leave_out: Option<Vec<String>>,
}

/// One running prompt, wherever it runs.
#[async_trait]
pub(crate) trait PromptDriver: Send {
    fn conversation_id(&self) -> &str;
    fn prompt_id(&self) -> &str;
    /// The next event of this prompt; `None` once nothing more will come.
    async fn next_event(&mut self) -> anyhow::Result<Option<Event>>;
    /// Sends a verdict on the waiting call; the prompt runs on.
    async fn decide(&mut self, tool_call_id: &str, verdict: Verdict) -> anyhow::Result<()>;
    /// The prompt as it ended.
    async fn finish(&mut self) -> anyhow::Result<Prompt>;
}

const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// Follows a prompt to its end: prints, asks, decides; returns the exit code.
pub(crate) async fn follow(
    driver: &mut dyn PromptDriver,
    settings: &PromptSettings,
) -> anyhow::Result<ExitCode> {
    let show_tools = std::io::stderr().is_terminal() && !settings.json;
    let spinner = show_tools;
    let mut at_line_start = true;
    loop {
        let event = {
            let next = driver.next_event();
            tokio::pin!(next);
            let mut frame = 0usize;
            let mut shown = false;
            let mut ticks = tokio::time::interval(Duration::from_millis(120));
            ticks.tick().await;
            let event = loop {
                tokio::select! {
                    event = &mut next => break event?,
                    _ = ticks.tick() => {
                        if spinner && at_line_start {
                            eprint!("\r{} waiting…", FRAMES[frame % FRAMES.len()]);
                            let _ = std::io::stderr().flush();
                            frame += 1;
                            shown = true;
                        }
                    }
                }
            };
            if shown {
                eprint!("\r\x1b[K");
                let _ = std::io::stderr().flush();
            }
            event
        };
        let Some(event) = event else { break };
        if settings.json {
            outln!("{}", serde_json::to_string(&event)?);
        } else {
            print_event(&event.payload, show_tools, &mut at_line_start);
        }
        match &event.payload {
            EventPayload::ApprovalRequested {
                tool_call_id,
                tool_name,
                reason,
                input,
                ..
            } => match decide(tool_name, reason, input, settings.yes) {
                Ok(()) => driver.decide(tool_call_id, Verdict::Approve).await?,
                Err(refusal) => {
                    eprintln!("agentic: {refusal}");
                    let verdict = Verdict::reject(Some(&refusal));
                    driver.decide(tool_call_id, verdict).await?;
                }
            },
            EventPayload::PromptCompleted { .. }
            | EventPayload::PromptError { .. }
            | EventPayload::PromptCancelled { .. } => break,
            _ => {}
        }
    }
    let prompt = driver.finish().await?;
    if !settings.json && !at_line_start {
        outln!();
    }
    eprintln!(
        "agentic: conversation {} (continue it with -c {})",
        driver.conversation_id(),
        driver.conversation_id()
    );
    Ok(match prompt.state {
        PromptState::Completed => ExitCode::SUCCESS,
        _ => {
            if let Some(error) = &prompt.error {
                eprintln!("agentic: the prompt failed: {error}");
            }
            ExitCode::FAILURE
        }
    })
}

/// Asks on the terminal, approves with `--yes`, and refuses when nobody can be asked.
pub(crate) fn decide(
    tool: &str,
    reason: &str,
    input: &serde_json::Value,
    yes: bool,
) -> Result<(), String> {
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

fn print_event(payload: &EventPayload, show_tools: bool, at_line_start: &mut bool) {
    match payload {
        // A running tool's live output (e.g. a shell command's) goes to stderr, so stdout
        // keeps only the model's reply.
        EventPayload::PromptStream {
            delta,
            tool_call_id: Some(_),
            ..
        } => {
            eprint!("{delta}");
            let _ = std::io::stderr().flush();
        }
        EventPayload::PromptStream { delta, .. } => {
            out!("{delta}");
            let _ = std::io::stdout().flush();
            if !delta.is_empty() {
                *at_line_start = delta.ends_with('\n');
            }
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
            if !*at_line_start {
                outln!();
                *at_line_start = true;
            }
            match &tool.result {
                ToolResult::Pending { reason, .. } => {
                    eprintln!("· {} {} ({reason})", tool.function, tool.input)
                }
                ToolResult::Success { .. } => eprintln!("✓ {}", tool.function),
                ToolResult::Error { error, .. } => eprintln!("✗ {}: {error}", tool.function),
            }
        }
        // The model's reasoning goes to stderr, each line marked, where tool calls are shown:
        // stdout keeps only the reply.
        EventPayload::PromptOutput {
            output: PromptOutput::Reasoning(reasoning),
            ..
        } => {
            let text = reasoning.reasoning.text.trim();
            if !show_tools || text.is_empty() {
                return;
            }
            if !*at_line_start {
                outln!();
                *at_line_start = true;
            }
            for line in text.lines() {
                eprintln!("[thinking] {line}");
            }
        }
        _ => {}
    }
}
