//! `agentic replay <case> [--code <file>]`: plays a recorded (or hand-written) timeline case in
//! this process, with the case's turns as the model and its recording answering every tool
//! call, and prints the timeline it made. `--code` swaps one program of a code-mode case for
//! an edited one first: the way to try a fix against what the tools returned then.

use std::path::Path;
use std::process::ExitCode;

use agentic_core::{Config, PromptOutput, Runtime, ToolResult};
use agentic_plugin_script::TimelineCase;
use anyhow::Context as _;
use serde_json::Value;

/// What `agentic replay` was asked.
#[derive(Debug)]
pub(crate) struct ReplayRequest<'a> {
    pub case: &'a Path,
    pub code: Option<&'a Path>,
    pub turn: Option<usize>,
    pub json: bool,
}

pub(crate) async fn run(request: ReplayRequest<'_>) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(request.case)
        .with_context(|| format!("could not read {}", request.case.display()))?;
    let mut case = TimelineCase::from_yaml(&text)
        .with_context(|| format!("{} is not a timeline case", request.case.display()))?;
    if let Some(path) = request.code {
        let code = std::fs::read_to_string(path)
            .with_context(|| format!("could not read {}", path.display()))?;
        case.swap_program(request.turn.unwrap_or(1), code)?;
    }
    if case.recorded.is_none() {
        eprintln!(
            "agentic: {} has no recording: its tools run for real",
            request.case.display()
        );
    }
    let provider = agentic_plugin_script::provider_of(&case);
    let runtime = Runtime::builder()
        .config(Config::from_value(Value::Object(case.config.clone())))
        .provider(provider.clone())
        .registered_plugins()
        .build()
        .await?;
    // Plugins that keep tables get a scratch database: nothing of the replay is kept.
    agentic_conversation::attach_scratch_database(runtime.services()).await?;
    let played = agentic_plugin_script::play(&case, &runtime, &provider, "cli").await?;
    if request.json {
        outln!("{}", serde_json::to_string_pretty(&played.prompt)?);
    } else {
        for output in &played.prompt.output {
            print_output(output);
        }
        eprintln!("agentic: the replay ended {}", played.prompt.state.as_str());
    }
    let left = provider.remaining();
    if left > 0 {
        eprintln!("agentic: {left} recorded model turn(s) were not asked for");
    }
    let failed = played.prompt.state == agentic_core::PromptState::Failed;
    if failed && let Some(error) = &played.prompt.error {
        eprintln!("agentic: the replayed prompt failed: {error}");
    }
    if played.divergences.is_empty() {
        return Ok(if failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        });
    }
    eprintln!(
        "agentic: the run made calls its recording does not have (each failed, nothing ran):"
    );
    for divergence in &played.divergences {
        eprintln!("  {divergence}");
    }
    Ok(ExitCode::FAILURE)
}

fn print_output(output: &PromptOutput) {
    match output {
        PromptOutput::Text(text) => outln!("{}", text.content),
        PromptOutput::Tool(tool) => {
            let input = match tool.input.get("code").and_then(Value::as_str) {
                Some(code) => format!("\n{}\n", code.trim_end()),
                None => tool.input.to_string(),
            };
            let result = match &tool.result {
                ToolResult::Success { output } => format!("→ {}", short(&output.to_string())),
                ToolResult::Error { error, .. } => format!("✗ {}", short(error)),
                ToolResult::Pending { reason, .. } => format!("… {reason}"),
            };
            outln!("[{}] {input} {result}", tool.function);
        }
        PromptOutput::File(file) => outln!("[file] {}", file.path),
        PromptOutput::Reasoning(reasoning) => {
            eprintln!("[thinking] {}", reasoning.reasoning.text);
        }
        _ => {}
    }
}

fn short(text: &str) -> String {
    match text.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
