//! A stored prompt as a test case (`GET /api/prompts/{id}/export?as=test`, `agentic export`):
//! the model's replies as scripted turns, what each tool call returned, code mode's seeds and
//! clock readings, and the config it ran with, secrets masked.

use agentic_conversation::ConversationService;
use agentic_core::replay::Divergence;
use agentic_core::{Config, Prompt, Runtime};
use agentic_plugin_script::{ExportOptions, Run, TimelineCase, case_of};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Config sections a case leaves out: how the model was reached and how this server runs,
/// which a replay does not use and which may hold secrets.
const NOT_EXPORTED: &[&str] = &[
    "openai",
    "anthropic",
    "gemini",
    "local",
    "script",
    "api",
    "telemetry",
    "prices",
    "export",
    "mcp",
];

/// The `[export]` config section.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ExportSection {
    /// Patterns masked wherever they appear in an exported case.
    mask: Vec<MaskRule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MaskRule {
    /// A regular expression.
    pattern: String,
    /// What replaces each match.
    #[serde(default = "masked")]
    replacement: String,
}

fn masked() -> String {
    "[masked]".to_owned()
}

/// The user's prompt `prompt_id` as a test case.
pub async fn export_case(
    service: &ConversationService,
    user_id: &str,
    prompt_id: &str,
) -> Result<TimelineCase, ExportError> {
    let run = service.recorded_run(user_id, prompt_id).await?;
    let config = &service.runtime().services().config;
    let section: ExportSection = config.plugin("export").map_err(|error| {
        ExportError::Refused(format!("the [export] section is invalid: {error}"))
    })?;
    let whole = config.as_map();
    let kept: Map<String, Value> = whole
        .iter()
        .filter(|(key, _)| !NOT_EXPORTED.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let options = ExportOptions {
        config: kept,
        masks: section
            .mask
            .into_iter()
            .map(|rule| (rule.pattern, rule.replacement))
            .collect(),
        from: Some(format!("prompt {prompt_id}")),
        ..ExportOptions::default()
    }
    .with_environment_secrets()
    .with_config_secrets(whole);
    let history: Vec<Run<'_>> = run
        .history
        .iter()
        .map(|(prompt, journal)| Run { prompt, journal })
        .collect();
    let current = Run {
        prompt: &run.prompt,
        journal: &run.journal,
    };
    case_of(current, &history, &options).map_err(|error| ExportError::Refused(format!("{error:#}")))
}

/// The case as the YAML file a test reads.
pub fn case_yaml(case: &TimelineCase) -> anyhow::Result<String> {
    case.to_yaml()
}

/// A stored prompt played again from its recording (`POST /api/prompts/{id}/replay`).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Replayed {
    /// The prompt the replay made (not stored).
    pub prompt: Prompt,
    /// Calls it made that the recording does not have; each failed without running.
    #[schemars(with = "Vec<Value>")]
    pub divergences: Vec<Divergence>,
    /// Recorded calls it did not make.
    pub unused_calls: usize,
    /// Recorded model replies it did not ask for.
    pub unused_turns: usize,
}

/// Plays the user's prompt `prompt_id` again from its recording, with the `program`-th
/// program replaced by `code` when given, on a runtime of its own: the server's plugins, the
/// recorded turns as the model, every tool call answered from the recording, a scratch
/// database. Nothing is stored and no tool runs.
pub async fn replay_prompt(
    service: &ConversationService,
    user_id: &str,
    prompt_id: &str,
    edit: Option<Edit>,
) -> Result<Replayed, ExportError> {
    let mut case = export_case(service, user_id, prompt_id).await?;
    if let Some(edit) = edit {
        let program = match (edit.program, &edit.execution) {
            (Some(program), _) => program,
            (None, execution) => {
                let prompt = service.prompt(user_id, prompt_id).await?.prompt;
                program_of(&case, &prompt, execution.as_deref())?
            }
        };
        case.swap_program(program, edit.code)
            .map_err(|error| ExportError::Refused(format!("{error:#}")))?;
    }
    let provider = agentic_plugin_script::provider_of(&case);
    let mut builder = Runtime::builder()
        .config(Config::from_value(Value::Object(case.config.clone())))
        .provider(provider.clone());
    for plugin in service.runtime().services().plugins() {
        builder = builder.plugin(plugin.clone());
    }
    let failed = |error: anyhow::Error| ExportError::Failed(format!("{error:#}"));
    let runtime = builder.build().await.map_err(failed)?;
    agentic_conversation::attach_scratch_database(runtime.services())
        .await
        .map_err(failed)?;
    let played = agentic_plugin_script::play(&case, &runtime, &provider, user_id)
        .await
        .map_err(failed)?;
    Ok(Replayed {
        prompt: played.prompt,
        divergences: played.divergences,
        unused_calls: played.unused_calls,
        unused_turns: provider.remaining(),
    })
}

/// A program to run in place of one of the case's.
#[derive(Debug, Clone)]
pub struct Edit {
    /// The program.
    pub code: String,
    /// Which one it replaces, counted from 1 over the case's programs.
    pub program: Option<usize>,
    /// Or: the id of the prompt's `code.execute` output it replaces; neither is the prompt's
    /// first program.
    pub execution: Option<String>,
}

/// The number in `case` of the program that made `prompt`'s `code.execute` output
/// `execution` (its first when `None`): each program reply of the prompt made one such
/// output, and the case's programs of earlier prompts come first.
fn program_of(
    case: &TimelineCase,
    prompt: &Prompt,
    execution: Option<&str>,
) -> Result<usize, ExportError> {
    let executions: Vec<&str> = prompt
        .output
        .iter()
        .filter_map(|output| match output {
            agentic_core::PromptOutput::Tool(tool) if tool.function == "code.execute" => {
                Some(tool.id.as_str())
            }
            _ => None,
        })
        .collect();
    let index = match execution {
        None => 0,
        Some(id) => executions
            .iter()
            .position(|candidate| *candidate == id)
            .ok_or_else(|| {
                ExportError::Refused(format!("prompt {} has no program {id}", prompt.id))
            })?,
    };
    let programs = case.turns.iter().filter(|turn| turn.code.is_some()).count();
    let before = programs.checked_sub(executions.len()).ok_or_else(|| {
        ExportError::Refused(
            "the prompt's programs and its recorded replies do not match".to_owned(),
        )
    })?;
    Ok(before + index + 1)
}

/// Why a prompt could not be exported.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The prompt could not be read.
    #[error(transparent)]
    Conversation(#[from] agentic_conversation::ConversationError),
    /// The prompt cannot be made a case, and why.
    #[error("{0}")]
    Refused(String),
    /// The replay could not run, and why.
    #[error("{0}")]
    Failed(String),
}
