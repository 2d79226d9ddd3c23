//! Export: a prompt that ran, with its journal, becomes a [`TimelineCase`] that plays it
//! again. The model's replies become turns (from the `modelReply` journal entries), the
//! verdicts people gave become its decisions (`decision` entries), every tool call that ran
//! or was rejected becomes a recorded call, and the rest of the mode's journal (code mode's
//! seeds and clock readings) is kept for the replay.

use agentic_core::Verdict;
use agentic_core::prompt::{ErrorKind, Prompt, PromptOutput, ToolResult};
use agentic_core::replay::{RecordedCall, RecordedReply, RecordedResult, decision_of};
use anyhow::{Context as _, bail};
use serde_json::{Map, Value};

use crate::case::{HistoryPrompt, Recording, TimelineCase};
use crate::{ScriptReasoning, ScriptToolCall, ScriptUsage, Turn};

/// The output code mode records each program under: the mode's own record, not a tool call.
const CODE_EXECUTE: &str = "code.execute";
/// A code-mode plan: what a program would do, not a call it made.
const CODE_PLAN: &str = "code.plan";

/// What an export keeps and masks besides the run itself.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// The runtime config the case runs with (top-level keys and plugin sections); keys that
    /// name a secret (`key`, `token`, `secret`, `password`) are masked.
    pub config: Map<String, Value>,
    /// Texts replaced wherever they appear, such as the values of `*_API_KEY` variables and
    /// the API token: `(text, replacement)`.
    pub secrets: Vec<(String, String)>,
    /// Patterns replaced wherever they match (the `[export] mask` rules): `(regex,
    /// replacement)`. Checked by [`case_of`], which refuses a pattern that does not compile.
    pub masks: Vec<(String, String)>,
    /// Where the case came from, for its `recorded.from`.
    pub from: Option<String>,
}

impl ExportOptions {
    /// Secrets from the environment: the value of every variable whose name ends in
    /// `_API_KEY`, `_TOKEN` or `_SECRET`, replaced by `[NAME]`.
    #[must_use]
    pub fn with_environment_secrets(self) -> Self {
        self.with_secrets_from(std::env::vars())
    }

    /// [`Self::with_environment_secrets`] over these variables.
    #[must_use]
    pub fn with_secrets_from(
        mut self,
        variables: impl IntoIterator<Item = (String, String)>,
    ) -> Self {
        for (name, value) in variables {
            let secret = ["_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD"]
                .iter()
                .any(|suffix| name.ends_with(suffix));
            // Very short values (`1`, `on`) are settings, not secrets, and would mask
            // everything.
            if secret && value.len() >= MIN_SECRET {
                self.secrets.push((value, format!("[{name}]")));
            }
        }
        self
    }

    /// Secrets from a config: the string value of every key, at any depth, that names a key,
    /// token, secret or password (`[openai] apiKey`), replaced by `[secret]` wherever it
    /// appears, also in sections the case leaves out.
    #[must_use]
    pub fn with_config_secrets(mut self, config: &Map<String, Value>) -> Self {
        fn walk(map: &Map<String, Value>, found: &mut Vec<String>) {
            for (key, value) in map {
                match value {
                    Value::Object(inner) => walk(inner, found),
                    Value::String(text) if secret_key(key) && text.len() >= MIN_SECRET => {
                        found.push(text.clone());
                    }
                    _ => {}
                }
            }
        }
        let mut found = Vec::new();
        walk(config, &mut found);
        self.secrets
            .extend(found.into_iter().map(|text| (text, "[secret]".to_owned())));
        self
    }
}

/// One prompt to export, with its journal.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// The prompt as stored.
    pub prompt: &'a Prompt,
    /// Its journal, oldest entry first.
    pub journal: &'a [Value],
}

/// The case that plays `run` again, after `history` (the earlier prompts of its conversation
/// that the model saw, oldest first). Fails when a prompt was run before its model replies
/// were journaled, or is still running.
pub fn case_of(
    run: Run<'_>,
    history: &[Run<'_>],
    options: &ExportOptions,
) -> anyhow::Result<TimelineCase> {
    if !run.prompt.state.is_finished() {
        bail!(
            "prompt {} is {}: export it once it has ended",
            run.prompt.id,
            run.prompt.state.as_str()
        );
    }
    let mut turns = Vec::new();
    let mut calls = Vec::new();
    let mut journal = Vec::new();
    let mut decisions = Vec::new();
    let mut samples = false;
    for earlier in history.iter().chain(std::iter::once(&run)) {
        let replies: Vec<RecordedReply> = earlier
            .journal
            .iter()
            .filter_map(RecordedReply::of_entry)
            .collect();
        let asked_model = earlier
            .prompt
            .output
            .iter()
            .any(|output| !matches!(output, PromptOutput::File(_)));
        if replies.is_empty() && asked_model {
            bail!(
                "prompt {} has no model replies in its journal: it ran before agentic kept them \
                 (or without a store), so it cannot be played again",
                earlier.prompt.id
            );
        }
        let code = earlier.prompt.mode == "code";
        // A run that sampled candidates asks for them again when played.
        samples |= replies
            .iter()
            .any(|reply| reply.purpose.as_deref() == Some(agentic_core::replay::CANDIDATE_REPLY));
        turns.extend(replies.into_iter().map(|reply| turn_of(reply, code)));
        let verdicts: Vec<(String, Verdict)> =
            earlier.journal.iter().filter_map(decision_of).collect();
        calls.extend(recorded_calls(earlier.prompt, &verdicts));
        decisions.extend(
            verdicts
                .into_iter()
                .map(|(_, verdict)| crate::CaseDecision::from(verdict)),
        );
        journal.extend(
            earlier
                .journal
                .iter()
                .filter(|entry| agentic_core::replay::is_mode_entry(entry))
                .cloned(),
        );
    }
    let prompt = run.prompt;
    let mut case = TimelineCase {
        description: Some(format!(
            "Recorded from prompt {} ({} mode), which ended {}.",
            prompt.id,
            prompt.mode,
            prompt.state.as_str()
        )),
        history: history
            .iter()
            .map(|earlier| HistoryPrompt {
                input: earlier.prompt.input.clone().unwrap_or_default(),
                mode: Some(earlier.prompt.mode.clone()),
            })
            .collect(),
        input: prompt.input.clone().unwrap_or_default(),
        mode: Some(prompt.mode.clone()),
        model: prompt.model,
        config: options.config.clone(),
        decisions,
        turns,
        samples,
        recorded: Some(Recording {
            from: options.from.clone(),
            calls,
            journal,
        }),
        ..TimelineCase::default()
    };
    mask_secret_keys(&mut case.config);
    let masks = options
        .masks
        .iter()
        .map(|(pattern, replacement)| {
            regex::Regex::new(pattern)
                .with_context(|| format!("the export mask {pattern:?} is not a valid pattern"))
                .map(|regex| (regex, replacement.clone()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut value = serde_json::to_value(&case)?;
    mask_strings(&mut value, &options.secrets, &masks);
    serde_json::from_value(value).context("the masked case no longer reads as a case")
}

/// A model reply as the turn that gives it again: a reply the mode ran as a program is a
/// `code:` turn (a code-mode prompt's replies without a purpose, and its candidates, too).
fn turn_of(reply: RecordedReply, code_mode: bool) -> Turn {
    let code = match reply.purpose.as_deref() {
        // A sample taken again is what the mode asks for: a program in code mode.
        Some(purpose) if purpose == agentic_core::replay::CANDIDATE_REPLY => code_mode,
        Some(purpose) => purpose == agentic_core::replay::PROGRAM_REPLY,
        None => code_mode,
    };
    let text = Some(reply.text).filter(|text| !text.is_empty());
    let (text, code) = match code {
        true => (None, text),
        false => (text, None),
    };
    Turn {
        text,
        code,
        tool_calls: reply
            .tool_calls
            .into_iter()
            .map(|call| {
                let parsed = serde_json::from_str::<Value>(&call.arguments).ok();
                ScriptToolCall {
                    id: Some(call.id),
                    name: call.name,
                    arguments: parsed.is_none().then_some(call.arguments),
                    input: parsed,
                }
            })
            .collect(),
        reasoning: reply
            .reasoning
            .into_iter()
            .map(|reasoning| ScriptReasoning {
                text: reasoning.text,
                signature: reasoning.signature,
            })
            .collect(),
        error: reply.error,
        usage: Some(ScriptUsage {
            input: reply.usage.input_tokens,
            output: reply.usage.output_tokens,
            reasoning: reply.usage.reasoning_tokens,
        }),
        delay_ms: None,
    }
}

/// The calls of `prompt` that ran a tool or were rejected, with what they came to. Calls that
/// never ran (cancelled, interrupted, taken over, not run) are left out: a replay does not
/// reach them either.
fn recorded_calls(prompt: &Prompt, verdicts: &[(String, Verdict)]) -> Vec<RecordedCall> {
    prompt
        .output
        .iter()
        .filter_map(|output| match output {
            PromptOutput::Tool(tool)
                if tool.function != CODE_EXECUTE && tool.function != CODE_PLAN =>
            {
                Some(tool)
            }
            _ => None,
        })
        .filter_map(|tool| {
            let result = match &tool.result {
                ToolResult::Success { output } => RecordedResult::Output(output.clone()),
                ToolResult::Error {
                    error,
                    kind: ErrorKind::Failed,
                    ..
                } => RecordedResult::Error(error.clone()),
                // The reason comes from the journaled verdict; the timeline's words are
                // never read back (invariant 36).
                ToolResult::Error {
                    kind: ErrorKind::Rejected,
                    ..
                } => RecordedResult::Rejected(
                    verdicts
                        .iter()
                        .find(|(call, _)| *call == tool.id)
                        .and_then(|(_, verdict)| match verdict {
                            Verdict::Reject { reason } => reason.clone(),
                            _ => None,
                        }),
                ),
                _ => return None,
            };
            Some(RecordedCall {
                tool: tool.function.clone(),
                input: tool.input.clone(),
                result,
            })
        })
        .collect()
}

/// The shortest value taken for a secret.
const MIN_SECRET: usize = 4;

/// Whether a config key names a secret: a key, token, secret or password.
fn secret_key(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    ["key", "token", "secret", "password"]
        .iter()
        .any(|word| lower.contains(word))
}

/// Replaces the value of every key that names a secret with `[secret]`.
fn mask_secret_keys(map: &mut Map<String, Value>) {
    for (key, value) in map.iter_mut() {
        match value {
            Value::Object(inner) => mask_secret_keys(inner),
            _ if secret_key(key) => *value = Value::String("[secret]".to_owned()),
            _ => {}
        }
    }
}

fn mask_strings(value: &mut Value, secrets: &[(String, String)], masks: &[(regex::Regex, String)]) {
    match value {
        Value::String(text) => {
            for (secret, replacement) in secrets {
                if text.contains(secret.as_str()) {
                    *text = text.replace(secret.as_str(), replacement);
                }
            }
            for (regex, replacement) in masks {
                if regex.is_match(text) {
                    *text = regex.replace_all(text, replacement.as_str()).into_owned();
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| mask_strings(item, secrets, masks)),
        Value::Object(map) => map
            .values_mut()
            .for_each(|item| mask_strings(item, secrets, masks)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn prompt() -> Prompt {
        serde_json::from_value(json!({
            "id": "p1", "userId": "alice", "model": "normal", "mode": "classic",
            "visible": true, "state": "completed", "input": "Call 555-1234 with key sk-abcdef-123",
            "output": [
                { "type": "tool", "id": "c1", "function": "kit.echo",
                  "input": { "text": "sk-abcdef-123" },
                  "result": { "type": "success", "output": "555-1234" },
                  "start": "2026-11-27T10:00:00Z", "end": "2026-11-27T10:00:01Z" },
                { "type": "tool", "id": "c2", "function": "fs.write", "input": { "path": "a" },
                  "result": { "type": "error", "error": "Rejected by user: no", "kind": "rejected" },
                  "start": "2026-11-27T10:00:00Z", "end": "2026-11-27T10:00:01Z" },
                { "type": "text", "id": "t1", "content": "Done.", "start": "2026-11-27T10:00:02Z" }
            ],
            "usage": serde_json::to_value(agentic_core::PromptUsage::default()).unwrap()
        }))
        .unwrap()
    }

    #[test]
    fn an_export_masks_secrets_keys_and_the_mask_rules() {
        let journal = vec![
            json!({ "type": "modelReply", "reply": {
                "toolCalls": [{ "id": "c1", "name": "kit.echo", "arguments": "{\"text\": \"sk-abcdef-123\"}" }],
            } }),
            agentic_core::replay::decision_entry(
                "c2",
                &Verdict::Reject {
                    reason: Some("no".to_owned()),
                },
            ),
            json!({ "type": "modelReply", "reply": { "text": "Done." } }),
        ];
        let prompt = prompt();
        let mut config = Map::new();
        config.insert("maxRounds".to_owned(), json!(3));
        config.insert(
            "web".to_owned(),
            json!({ "apiKey": "k-123456", "timeout": 5 }),
        );
        let options = ExportOptions {
            config,
            masks: vec![(r"\d{3}-\d{4}".to_owned(), "[phone]".to_owned())],
            ..ExportOptions::default()
        }
        .with_secrets_from([
            ("SEARCH_API_KEY".to_owned(), "sk-abcdef-123".to_owned()),
            ("DEBUG_TOKEN".to_owned(), "1".to_owned()),
            ("HOME".to_owned(), "/root".to_owned()),
        ])
        // A key set in a section the case leaves out, which a tool echoed.
        .with_config_secrets(
            json!({ "openai": { "apiKey": "Done." } })
                .as_object()
                .unwrap(),
        );
        let case = case_of(
            Run {
                prompt: &prompt,
                journal: &journal,
            },
            &[],
            &options,
        )
        .unwrap();
        let yaml = case.to_yaml().unwrap();
        for secret in ["sk-abcdef-123", "k-123456", "555-1234"] {
            assert!(!yaml.contains(secret), "{secret} in:\n{yaml}");
        }
        assert!(yaml.contains("[SEARCH_API_KEY]"), "{yaml}");
        assert!(yaml.contains("[phone]"), "{yaml}");
        assert_eq!(
            case.config["web"],
            json!({ "apiKey": "[secret]", "timeout": 5 })
        );
        assert_eq!(case.config["maxRounds"], json!(3));
        assert_eq!(
            case.decisions,
            vec![Verdict::Reject {
                reason: Some("no".to_owned())
            }]
        );
        let recorded = case.recorded.unwrap();
        assert_eq!(recorded.calls.len(), 2);
        assert_eq!(
            recorded.calls[1].result,
            RecordedResult::Rejected(Some("no".to_owned()))
        );
        assert_eq!(case.turns.len(), 2);
        assert_eq!(case.turns[1].text.as_deref(), Some("[secret]"));

        let bad = ExportOptions {
            masks: vec![("(".to_owned(), String::new())],
            ..ExportOptions::default()
        };
        let error = case_of(
            Run {
                prompt: &prompt,
                journal: &journal,
            },
            &[],
            &bad,
        )
        .unwrap_err();
        assert!(error.to_string().contains("not a valid pattern"), "{error}");
    }

    #[test]
    fn a_prompt_without_journaled_replies_or_still_running_is_refused() {
        let prompt = prompt();
        let error = case_of(
            Run {
                prompt: &prompt,
                journal: &[],
            },
            &[],
            &ExportOptions::default(),
        )
        .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("no model replies in its journal"),
            "{error}"
        );
        let mut running = prompt.clone();
        running.state = agentic_core::PromptState::Running;
        let error = case_of(
            Run {
                prompt: &running,
                journal: &[],
            },
            &[],
            &ExportOptions::default(),
        )
        .unwrap_err();
        assert!(
            error.to_string().contains("export it once it has ended"),
            "{error}"
        );
    }
}
