//! A stored prompt as a test case (`GET /api/prompts/{id}/export?as=test`, `agentic export`):
//! the model's replies as scripted turns, what each tool call returned, code mode's seeds and
//! clock readings, and the config it ran with, secrets masked.

use agentic_conversation::ConversationService;
use agentic_plugin_script::{ExportOptions, Run, TimelineCase, case_of};
use serde::Deserialize;
use serde_json::Map;

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
    let mut kept = Map::new();
    for key in config.keys() {
        if !NOT_EXPORTED.contains(&key.as_str())
            && let Some(value) = config.get(key)
        {
            kept.insert(key.clone(), value.clone());
        }
    }
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
    .with_environment_secrets();
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

/// Why a prompt could not be exported.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The prompt could not be read.
    #[error(transparent)]
    Conversation(#[from] agentic_conversation::ConversationError),
    /// The prompt cannot be made a case, and why.
    #[error("{0}")]
    Refused(String),
}
