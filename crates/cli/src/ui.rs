//! The terminal side of a prompt: streaming text, tool activity, a spinner while the model
//! thinks, approvals, and the exit code. The same whether the prompt runs in process or on a
//! server.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use agentic_core::scope::{Lasting, Reach, Scope};
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
    /// Sends a verdict on the waiting call, with the scope it grants if any; the prompt runs
    /// on.
    async fn decide(
        &mut self,
        tool_call_id: &str,
        verdict: Verdict,
        scope: Option<Scope>,
    ) -> anyhow::Result<()>;
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
            } if tool_name == PLAN_TOOL => {
                let calls = input["calls"].as_array().map_or(0, Vec::len);
                let (verdict, scope) =
                    decide_together(&plan_text(reason, input), calls, reason, settings.yes);
                driver.decide(tool_call_id, verdict, scope).await?;
            }
            EventPayload::ApprovalRequested {
                tool_call_id,
                batch,
                ..
            } if batch.len() > 1 => {
                let summary = format!("{} calls wait for one decision", batch.len());
                let (verdict, scope) =
                    decide_together(&batch_text(batch), batch.len(), &summary, settings.yes);
                driver.decide(tool_call_id, verdict, scope).await?;
            }
            EventPayload::ApprovalRequested {
                tool_call_id,
                tool_name,
                reason,
                input,
                ..
            } => match ask(tool_name, reason, input, settings.yes, true) {
                Ok(scope) => {
                    driver.decide(tool_call_id, Verdict::Approve, scope).await?;
                }
                Err(refusal) => {
                    eprintln!("agentic: {refusal}");
                    let verdict = Verdict::reject(Some(&refusal));
                    driver.decide(tool_call_id, verdict, None).await?;
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
    ask(tool, reason, input, yes, false).map(drop)
}

/// [`decide`], offering (with `scopes`) to approve the tool's later calls too: `p` for the
/// rest of the prompt, `c` for the conversation, for an hour. The scope chosen, if any.
fn ask(
    tool: &str,
    reason: &str,
    input: &serde_json::Value,
    yes: bool,
    scopes: bool,
) -> Result<Option<Scope>, String> {
    if yes {
        return Ok(None);
    }
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Err(format!(
            "{tool} needs approval ({reason}) and there is no terminal to ask; \
             run with --yes to approve tool calls"
        ));
    }
    let choices = if scopes {
        format!(
            "[y]es, [N]o, or yes and {tool} from now on: [p] in this prompt, [c] in this \
             conversation for an hour"
        )
    } else {
        "[y/N]".to_owned()
    };
    let answer = read_answer(&format!(
        "\nApprove {tool} ({reason}) with input {input}? {choices} "
    ))
    .to_ascii_lowercase();
    match answer.as_str() {
        "y" | "yes" => Ok(None),
        "p" if scopes => Ok(Some(scope_of(Reach::Prompt))),
        "c" if scopes => Ok(Some(scope_of(Reach::Conversation))),
        _ => Err("declined at the terminal".to_owned()),
    }
}

/// The scope `p` or `c` grants: the decided call's tools, for the prompt or for an hour.
fn scope_of(reach: Reach) -> Scope {
    Scope {
        reach,
        tool: None,
        expires_in: (reach == Reach::Conversation).then(|| Lasting::Written("1h".to_owned())),
    }
}

/// The tool a code-mode plan waits as: its input lists the calls the program would make.
const PLAN_TOOL: &str = "code.plan";

/// Calls decided together (a plan, or the calls of one step), shown once as `text`, then one
/// question for all `calls` of them: `a` approves all, `r` rejects all, `e` chooses which to
/// approve. `summary` says what waits when nobody can be asked.
fn decide_together(text: &str, calls: usize, summary: &str, yes: bool) -> (Verdict, Option<Scope>) {
    if yes {
        return (Verdict::Approve, None);
    }
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        let refusal = format!(
            "{summary}, and there is no terminal to ask; run with --yes to approve tool calls"
        );
        eprintln!("agentic: {refusal}");
        return (Verdict::reject(Some(&refusal)), None);
    }
    eprintln!("\n{text}");
    loop {
        let answer = read_answer(
            "[a]pprove all, [r]eject all, [e]dit: choose which to approve, or approve all and \
             their tools from now on: [p] in this prompt, [c] in this conversation for an hour? ",
        )
        .to_ascii_lowercase();
        match answer.as_str() {
            "a" | "approve" | "y" | "yes" => return (Verdict::Approve, None),
            "p" => return (Verdict::Approve, Some(scope_of(Reach::Prompt))),
            "c" => return (Verdict::Approve, Some(scope_of(Reach::Conversation))),
            "r" | "reject" | "n" | "no" | "" => {
                let reason = read_answer("Why (told to the model; Enter for none)? ");
                let reason = Some(reason.as_str()).filter(|reason| !reason.is_empty());
                return (Verdict::reject(reason), None);
            }
            "e" | "edit" => {
                let chosen = read_answer(&format!(
                    "Approve which calls (numbers from 1 to {calls}, e.g. 1 3 5-7)? "
                ));
                match agentic_core::chosen_places(&chosen, calls) {
                    Ok(chosen) => {
                        let reason = read_answer("Why not the others (Enter for none)? ");
                        let verdict = Verdict::ApproveOnly {
                            calls: chosen,
                            reason: Some(reason).filter(|reason| !reason.is_empty()),
                        };
                        return (verdict, None);
                    }
                    Err(error) => eprintln!("agentic: {error}"),
                }
            }
            other => eprintln!("agentic: \"{other}\" is not a, r, e, p or c"),
        }
    }
}

/// One line read from the terminal, trimmed and lower-cased where it is a choice.
fn read_answer(question: &str) -> String {
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    answer.trim().to_owned()
}

/// A plan as the terminal shows it.
pub(crate) fn plan_text(reason: &str, input: &serde_json::Value) -> String {
    let mut text = format!("The program ran as a dry run: {reason}.");
    for (index, call) in input["calls"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let tool = call["tool"].as_str().unwrap_or("?");
        text.push_str(&format!("\n  {}. {tool} {}", index + 1, call["input"]));
        if let Some(line) = call["line"].as_u64() {
            text.push_str(&format!("  (line {line})"));
        }
        if let Some(why) = call["reason"].as_str() {
            text.push_str(&format!("\n     {why}"));
        }
        if let Some(preview) = call["preview"].as_str() {
            for line in preview.lines().take(40) {
                text.push_str(&format!("\n     {line}"));
            }
        }
    }
    for caveat in input["caveats"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        if let Some(caveat) = caveat.as_str() {
            text.push_str(&format!("\n  Note: {caveat}"));
        }
    }
    text.push_str(
        "\nThe program then runs for real: the calls you approve run, and any other call that \
         needs approval is asked about on its own.",
    );
    text
}

/// The calls of one step that wait for one decision, as the terminal shows them.
fn batch_text(batch: &[agentic_core::BatchedCall]) -> String {
    let mut text = format!("{} calls of this step need approval:", batch.len());
    for (index, call) in batch.iter().enumerate() {
        text.push_str(&format!(
            "\n  {}. {} {}\n     {}",
            index + 1,
            call.tool_name,
            call.input,
            call.reason
        ));
    }
    text.push_str("\nThe calls you approve run; the others fail as rejected.");
    text
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
