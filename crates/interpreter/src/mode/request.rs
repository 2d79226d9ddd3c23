//! What code mode asks the model: the request for the next program (system prompt, history,
//! this turn so far, grammar, sampling), and the `llm()` / `llmJson()` calls scripts make.

use agentic_core::tool::cap_text;
use agentic_core::{ChatMessage, FailedCall, ModelRequest, ModelResponse, Prepared, ProviderError};
use serde_json::Value;

use super::CodeExecutor;
use crate::history::history_messages;
use crate::prompt::{iteration_messages, system_prompt};
use crate::protocol::{HostReply, ToolBinding};
use crate::rules::{Notice, not_run};

impl CodeExecutor {
    pub(super) async fn llm(&mut self, prompt: &str, json: bool) -> HostReply {
        let mut messages = Vec::new();
        if json {
            messages.push(ChatMessage::system(
                "Answer with one JSON value only: no prose, no code fences.",
            ));
        }
        messages.push(ChatMessage::user(prompt));
        let mut request = ModelRequest::new(self.base.recorder.prompt().model, messages);
        if json {
            request.grammar = Some(crate::grammar::JSON_VALUE.to_owned());
        }
        match self.ask(request, Purpose::Llm).await {
            Ok(reply) => {
                if !json {
                    return HostReply::Value {
                        value: Value::String(reply.text),
                    };
                }
                match json_answer(&reply.text) {
                    Ok(value) => HostReply::Value { value },
                    Err(error) => HostReply::Error {
                        message: format!(
                            "llmJson: the model's answer is not JSON ({error}): {}",
                            cap_text(reply.text.trim(), 500)
                        ),
                    },
                }
            }
            Err(error) => HostReply::Error {
                message: format!("llm: {error}"),
            },
        }
    }

    pub(super) fn request(&self, prepared: &Prepared, bindings: &[ToolBinding]) -> ModelRequest {
        let limit = self.base.options.services.limits().tool_result_limit;
        let system = self.system.get_or_init(|| {
            let plugin_of = |id: &str| {
                let plugin = prepared
                    .tool_plugins
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| id.split('.').next().unwrap_or(id).to_owned());
                (prepared.plugin_rank(&plugin), plugin)
            };
            let config = &self.shared.config;
            let budget_tokens =
                (config.context_window as f64 * config.declarations_share.clamp(0.0, 1.0)) as u64;
            let message = self
                .base
                .recorder
                .prompt()
                .input
                .clone()
                .unwrap_or_default();
            system_prompt(
                bindings,
                &prepared.tools,
                &plugin_of,
                &prepared.context,
                budget_tokens,
                &message,
            )
        });
        let mut messages = self.conversation(system.clone());
        let prompt = self.base.recorder.prompt();
        // The rule that did not run the last reply, if one did not.
        let not_run_by = self
            .timeline()
            .executions()
            .next_back()
            .filter(|tool| not_run(&tool.result))
            .and_then(|tool| Notice::of(&tool.result));
        let asked_afresh = not_run_by == Some(Notice::Afresh);
        match self.timeline().last_failure().filter(|_| asked_afresh) {
            // The user's message and what went wrong, without the programs that did.
            Some(failure) => {
                messages.push(ChatMessage::user(crate::rules::afresh::request(failure)))
            }
            None => messages.extend(iteration_messages(&prompt.output, limit)),
        }
        let mut request = ModelRequest::new(prompt.model, messages);
        let grammar = self.grammar.get_or_init(|| {
            crate::grammar::program_grammar(bindings, |id| {
                prepared
                    .tools
                    .iter()
                    .find(|tool| tool.id() == id)
                    .map(|tool| tool.input_schema())
            })
        });
        request.callable = Some(crate::grammar::callable(bindings));
        request.failed_calls = self.failed_calls(prepared, bindings);
        request.result_fields = crate::grammar::result_fields(bindings);
        // Once a program of this turn has run, the answer may be words (`with_prose_answer`).
        let ran = self
            .timeline()
            .executions()
            .any(|tool| !not_run(&tool.result));
        request.grammar = Some(if ran {
            crate::grammar::with_prose_answer(grammar)
        } else {
            grammar.clone()
        });
        // The last reply was the code of an earlier program again. At temperature 0 the
        // model writes it once more however the request is put (eval rounds 7 and 8: asked
        // afresh, Qwen2.5-Coder-1.5B sent its first program back in every case), so the next
        // reply is sampled.
        if asked_afresh || not_run_by == Some(Notice::Repeated) {
            request.min_temperature = Some(crate::rules::afresh::RESAMPLE_TEMPERATURE);
        }
        request
    }

    /// This turn's failed tool calls (see `Timeline::failed_calls`), under every name a
    /// program may call their tools by.
    fn failed_calls(&self, prepared: &Prepared, bindings: &[ToolBinding]) -> Vec<FailedCall> {
        let read_only = |id: &str| prepared.tools.get(id).is_some_and(|tool| tool.read_only());
        let mut failed = Vec::new();
        for (function, input) in self.timeline().failed_calls(&read_only) {
            let Some(binding) = bindings.iter().find(|binding| binding.id == function) else {
                continue;
            };
            for callee in crate::dry_run::names_of(binding) {
                let call = FailedCall {
                    callee,
                    input: input.clone(),
                };
                if !failed.contains(&call) {
                    failed.push(call);
                }
            }
        }
        failed
    }

    /// `system`, then the conversation's history and this prompt's user message.
    pub(super) fn conversation(&self, system: String) -> Vec<ChatMessage> {
        let mut messages = vec![ChatMessage::system(system)];
        messages.extend(history_messages(&self.base.options.prompt.history));
        if let Some(input) = &self.base.recorder.prompt().input {
            messages.push(ChatMessage::user(input.clone()));
        }
        messages
    }

    /// One model call, its usage counted in the prompt's, journaled with what it was for.
    pub(super) async fn ask(
        &mut self,
        request: ModelRequest,
        purpose: Purpose,
    ) -> Result<ModelResponse, ProviderError> {
        let reply = self
            .base
            .options
            .services
            .completion
            .complete_text(request)
            .await;
        self.base
            .journal_reply(&reply, Some(purpose.as_str()))
            .await;
        let reply = reply?;
        self.base.recorder.add_usage(&reply.usage);
        Ok(reply)
    }
}

/// What code mode asked the model for, kept with the reply in the journal: an export plays a
/// program as a program (`code:`) and the rest as text.
#[derive(Debug, Clone, Copy)]
pub(super) enum Purpose {
    /// The next program of the turn (each becomes one `code.execute` output).
    Program,
    /// Another program for the same request, sampled when the model's would fail
    /// (`candidates.rs`).
    Candidate,
    /// A script's `llm()` or `llmJson()`.
    Llm,
    /// A plain-text answer after code mode gave up.
    Answer,
}

impl Purpose {
    fn as_str(self) -> &'static str {
        match self {
            Self::Program => agentic_core::replay::PROGRAM_REPLY,
            Self::Candidate => agentic_core::replay::CANDIDATE_REPLY,
            Self::Llm => "llm",
            Self::Answer => "answer",
        }
    }
}

/// The JSON value in a model's answer to `llmJson()`: the whole answer, else the first fenced
/// block that parses (small models fence JSON as ```json however they are asked), else the
/// span from the first `{` or `[` to the last `}` or `]` (a sentence around the value).
fn json_answer(text: &str) -> Result<Value, serde_json::Error> {
    let text = text.trim();
    let whole = serde_json::from_str::<Value>(text);
    if whole.is_ok() {
        return whole;
    }
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let body_start = after.find('\n').map_or(after.len(), |index| index + 1);
        let body = &after[body_start..];
        let Some(close) = body.find("```") else { break };
        if let Ok(value) = serde_json::from_str::<Value>(body[..close].trim()) {
            return Ok(value);
        }
        rest = &body[close + 3..];
    }
    let start = text.find(['{', '[']);
    let end = text.rfind(['}', ']']);
    if let (Some(start), Some(end)) = (start, end)
        && start < end
        && let Ok(value) = serde_json::from_str::<Value>(&text[start..=end])
    {
        return Ok(value);
    }
    whole
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    pub(super) fn json_answers_are_read_through_fences_and_sentences() {
        assert_eq!(super::json_answer(" [1, 2] ").unwrap(), json!([1, 2]));
        assert_eq!(
            super::json_answer("```json\n{\"days\": 3}\n```").unwrap(),
            json!({ "days": 3 })
        );
        assert_eq!(
            super::json_answer("Here it is:\n```\nnot json\n```\n```json\n[true]\n```").unwrap(),
            json!([true])
        );
        assert_eq!(
            super::json_answer("The answer is {\"a\": 1}.").unwrap(),
            json!({ "a": 1 })
        );
        assert!(super::json_answer("no JSON here").is_err());
        assert!(super::json_answer("```json\n{broken\n```").is_err());
    }
}
