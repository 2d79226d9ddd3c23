//! The scripted provider itself: a queue of turns, played one per request.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use agentic_core::tokens::estimate_tokens;
use agentic_core::{
    ModelEvent, ModelKind, ModelProvider, ModelRequest, ModelStream, PromptUsage, ProviderError,
    Reasoning, ToolCallRequest,
};
use anyhow::Context as _;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One scripted model answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Turn {
    /// Text the model answers with, streamed in word-sized deltas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Code for code mode; sent as the answer's text, like a model that writes code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ScriptToolCall>,
    /// Reasoning the model shows before it answers, marked as the script provider's, as a
    /// thinking model's provider sends it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning: Vec<ScriptReasoning>,
    /// Makes this request fail with a provider error carrying this message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Reported usage; estimated from the request and answer when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ScriptUsage>,
    /// Wait this long before answering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
}

/// A block of scripted reasoning.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptReasoning {
    /// The readable reasoning.
    #[serde(default)]
    pub text: String,
    /// The signature a provider would need to take it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptToolCall {
    /// The call id; `call_<n>` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The dotted tool id.
    pub name: String,
    /// Arguments as a value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// Arguments as raw text, to play a model that sends malformed JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptUsage {
    #[serde(default)]
    pub input: u64,
    #[serde(default)]
    pub output: u64,
    #[serde(default)]
    pub reasoning: u64,
}

/// Replays [`Turn`]s in order, one per request, and remembers every request.
#[derive(Debug, Default)]
pub struct ScriptedProvider {
    turns: Mutex<VecDeque<Turn>>,
    requests: Mutex<Vec<ModelRequest>>,
    calls_made: Mutex<u64>,
    samples: bool,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ScriptFile {
    Turns(Vec<Turn>),
    Wrapped { turns: Vec<Turn> },
}

impl ScriptedProvider {
    pub fn new(turns: Vec<Turn>) -> Self {
        Self {
            turns: Mutex::new(turns.into()),
            ..Self::default()
        }
    }

    /// The same turns, played as a model that samples (or not): asked again, it answers
    /// with the next turn.
    #[must_use]
    pub fn sampling(mut self, samples: bool) -> Self {
        self.samples = samples;
        self
    }

    /// Parses a YAML list of turns, or a mapping with a `turns` list.
    pub fn from_yaml(text: &str) -> anyhow::Result<Self> {
        let file: ScriptFile = serde_yaml_ng::from_str(text).context("invalid turn script")?;
        let turns = match file {
            ScriptFile::Turns(turns) | ScriptFile::Wrapped { turns } => turns,
        };
        Ok(Self::new(turns))
    }

    pub fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("could not read turn script {}", path.display()))?;
        Self::from_yaml(&text).with_context(|| format!("in {}", path.display()))
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Turns not played yet.
    pub fn remaining(&self) -> usize {
        self.turns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn next_call_id(&self) -> String {
        let mut calls = self
            .calls_made
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *calls += 1;
        format!("call_{calls}")
    }
}

#[async_trait]
impl ModelProvider for ScriptedProvider {
    fn id(&self) -> &str {
        "script"
    }

    fn model_name(&self, kind: ModelKind) -> String {
        format!("script-{}", kind.as_str())
    }

    fn samples(&self) -> bool {
        self.samples
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        let request_tokens: u64 = request
            .messages
            .iter()
            .map(|message| estimate_tokens(&message.content))
            .sum();
        let model = self.model_name(request.model);
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request);
        let turn = self
            .turns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
            .ok_or_else(|| {
                ProviderError::Other(
                    "the model script ran out of turns: no scripted answer is left for this request"
                        .to_owned(),
                )
            })?;
        if let Some(delay) = turn.delay_ms {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        if let Some(error) = turn.error {
            return Err(ProviderError::Other(error));
        }

        let text = match (turn.text, turn.code) {
            (Some(text), Some(code)) => format!("{text}\n{code}"),
            (Some(text), None) => text,
            (None, Some(code)) => code,
            (None, None) => String::new(),
        };
        let mut events: Vec<Result<ModelEvent, ProviderError>> = turn
            .reasoning
            .into_iter()
            .map(|block| {
                let mut reasoning = Reasoning::new("script", block.text);
                if let Some(signature) = block.signature {
                    reasoning = reasoning.with_signature(signature);
                }
                Ok(ModelEvent::Reasoning(reasoning))
            })
            .collect();
        events.extend(
            word_deltas(&text)
                .into_iter()
                .map(|delta| Ok(ModelEvent::TextDelta(delta))),
        );
        let mut answer_tokens = estimate_tokens(&text);
        for call in turn.tool_calls {
            let arguments = match (call.arguments, call.input) {
                (Some(raw), _) => raw,
                (None, Some(input)) => input.to_string(),
                (None, None) => "{}".to_owned(),
            };
            answer_tokens += estimate_tokens(&arguments);
            events.push(Ok(ModelEvent::ToolCall(ToolCallRequest {
                id: call.id.unwrap_or_else(|| self.next_call_id()),
                name: call.name,
                arguments,
            })));
        }
        let mut usage = match turn.usage {
            Some(usage) => {
                let mut given = PromptUsage::tokens(usage.input, usage.output);
                given.reasoning_tokens = usage.reasoning;
                given
            }
            // A scripted model has no tokenizer: these counts are its own by definition, so
            // that timelines stay deterministic.
            None => PromptUsage::tokens(request_tokens, answer_tokens),
        };
        usage.model = Some(model);
        events.push(Ok(ModelEvent::Usage(usage)));
        Ok(Box::pin(futures::stream::iter(events)))
    }
}

/// Splits text into deltas of one word each, whitespace kept with the word before it.
fn word_deltas(text: &str) -> Vec<String> {
    let mut deltas = Vec::new();
    let mut current = String::new();
    let mut in_space = false;
    for character in text.chars() {
        if !character.is_whitespace() && in_space {
            deltas.push(std::mem::take(&mut current));
            in_space = false;
        }
        if character.is_whitespace() {
            in_space = true;
        }
        current.push(character);
    }
    if !current.is_empty() {
        deltas.push(current);
    }
    deltas
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_put_back_together_give_the_text() {
        let text = "Hello,  world\nof  deltas ";
        let deltas = word_deltas(text);
        assert_eq!(deltas, vec!["Hello,  ", "world\n", "of  ", "deltas "]);
        assert_eq!(deltas.concat(), text);
    }
}
