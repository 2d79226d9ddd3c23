//! Replaying a recorded run: tool calls answered from what they returned then, without running
//! a tool, and the model's replies kept in the prompt's journal so that a finished prompt can
//! be exported as a test case (`agentic export`, `GET /api/prompts/{id}/export?as=test`).
//!
//! A prompt given a [`Replay`] (`PromptOptions::replay`) answers each call of a tool that is
//! not live from the recording: the first unused recorded call with the same tool and input.
//! A call the recording does not have fails, with an error the model reads, and is kept as a
//! [`Divergence`] for the caller to report; the test runner fails the case on one.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::prompt::{PromptUsage, Reasoning};
use super::provider::{ModelResponse, ProviderError, ToolCallRequest};
use super::tool::ToolError;

/// How much of a call's input a divergence shows.
const DESCRIBED_CHARS: usize = 160;

/// The `type` of the journal entry that holds one model reply.
pub const MODEL_REPLY_ENTRY: &str = "modelReply";

/// The purpose of a reply that a mode runs as a program (code mode's next program): exported
/// as a `code:` turn, the others as text.
pub const PROGRAM_REPLY: &str = "program";

/// The purpose of a reply a mode sampled again in place of one it would not use (code mode's
/// program that would fail): exported as the mode's turn, and the case plays a model that
/// samples.
pub const CANDIDATE_REPLY: &str = "candidate";

/// One tool call of a recorded run and what it returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedCall {
    /// The dotted tool id.
    pub tool: String,
    /// The input the call was made with.
    #[serde(default)]
    pub input: Value,
    /// What the call returned, or how it failed.
    #[serde(flatten)]
    pub result: RecordedResult,
}

/// What a recorded call came to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RecordedResult {
    /// The tool returned this value.
    Output(Value),
    /// The tool failed with these words, which the model read.
    Error(String),
    /// A person rejected the call, for this reason (if they gave one); it never ran.
    Rejected(Option<String>),
}

/// A call a replayed run made that its recording does not have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Divergence {
    /// The call's number in the replayed run, counted from 1 over the calls answered from the
    /// recording.
    pub call: usize,
    /// The call the run made, as `tool(input)`.
    pub made: String,
    /// The recorded call that came next, if any was left.
    pub recorded: Option<String>,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "call {}: the run made {}", self.call, self.made)?;
        match &self.recorded {
            Some(recorded) => write!(f, "; the recording has {recorded} next"),
            None => write!(f, "; the recording has no call left"),
        }
    }
}

/// A recorded run to answer tool calls from. Shared by every prompt it replays (a case's
/// earlier prompts, then its own), so calls are used up across them in order.
#[derive(Debug)]
pub struct Replay {
    calls: Vec<RecordedCall>,
    live: Vec<String>,
    journal: Vec<Value>,
    state: Mutex<ReplayState>,
}

#[derive(Debug, Default)]
struct ReplayState {
    used: Vec<bool>,
    /// Every recorded call before this one is used: the search for a call starts here, so a
    /// run that makes its calls in the recorded order costs one comparison per call.
    first_unused: usize,
    made: usize,
    divergences: Vec<Divergence>,
    /// How many records of each kind a mode has taken ([`Replay::take_turn`]).
    taken: std::collections::HashMap<String, usize>,
}

impl ReplayState {
    fn mark_used(&mut self, index: usize) {
        self.used[index] = true;
        while self.used.get(self.first_unused) == Some(&true) {
            self.first_unused += 1;
        }
    }
}

impl Replay {
    /// A replay of `calls`; tools matching a `live` pattern (`fs.*`, `time.now`, `*`) run for
    /// real instead. `journal` is what the run's mode journaled besides its model replies
    /// (code mode: its scripts' seeds and clock readings).
    pub fn new(calls: Vec<RecordedCall>, live: Vec<String>, journal: Vec<Value>) -> Self {
        let used = vec![false; calls.len()];
        Self {
            calls,
            live,
            journal,
            state: Mutex::new(ReplayState {
                used,
                ..ReplayState::default()
            }),
        }
    }

    /// Whether calls of `tool` run for real.
    pub fn is_live(&self, tool: &str) -> bool {
        self.live.iter().any(|pattern| tool_matches(pattern, tool))
    }

    /// The mode's journal entries of the recorded run, oldest first.
    pub fn journal(&self) -> &[Value] {
        &self.journal
    }

    /// The number of records of `kind` a mode took before this one, counting from 0: code
    /// mode takes its n-th recorded execution's seed and clock for its n-th execution.
    pub fn take_turn(&self, kind: &str) -> usize {
        let mut state = self.lock();
        let taken = state.taken.entry(kind.to_owned()).or_default();
        *taken += 1;
        *taken - 1
    }

    /// What [`Replay::answer`] would give, without using the call up or keeping a divergence:
    /// a dry run's read, which the real run makes again.
    pub fn peek(&self, tool: &str, input: &Value) -> Result<Value, ToolError> {
        let state = self.lock();
        let found = self
            .calls
            .iter()
            .enumerate()
            .filter(|(index, call)| {
                !state.used[*index] && call.tool == tool && call.input == *input
            })
            .find_map(|(_, call)| match &call.result {
                RecordedResult::Output(value) => Some(Ok(value.clone())),
                RecordedResult::Error(error) => Some(Err(ToolError::Failed(error.clone()))),
                RecordedResult::Rejected(_) => None,
            });
        found.unwrap_or_else(|| {
            Err(ToolError::NotRecorded(format!(
                "not in the recording this run replays ({}); nothing was run",
                describe(tool, input, DESCRIBED_CHARS)
            )))
        })
    }

    /// The recorded answer to a call of `tool` with `input`: the first unused recorded call
    /// with both the same. Without one, the call fails and is kept as a divergence.
    pub fn answer(&self, tool: &str, input: &Value) -> Result<Value, ToolError> {
        let mut state = self.lock();
        state.made += 1;
        let start = state.first_unused;
        let found = self.calls[start..]
            .iter()
            .enumerate()
            .filter(|(offset, call)| {
                !state.used[start + offset] && call.tool == tool && call.input == *input
            })
            .find_map(|(offset, call)| match &call.result {
                RecordedResult::Output(value) => Some((start + offset, Ok(value.clone()))),
                RecordedResult::Error(error) => {
                    Some((start + offset, Err(ToolError::Failed(error.clone()))))
                }
                // A rejected call never ran: it has no result to give.
                RecordedResult::Rejected(_) => None,
            });
        if let Some((index, answer)) = found {
            state.mark_used(index);
            return answer;
        }
        let next = self
            .calls
            .get(state.first_unused)
            .map(|call| describe(&call.tool, &call.input, DESCRIBED_CHARS));
        let divergence = Divergence {
            call: state.made,
            made: describe(tool, input, DESCRIBED_CHARS),
            recorded: next,
        };
        let message =
            format!("not in the recording this run replays ({divergence}); nothing was run");
        state.divergences.push(divergence);
        Err(ToolError::NotRecorded(message))
    }

    /// The verdict the recording holds for a call that asks for approval: approved when the
    /// recorded call ran, rejected (with its reason) when a person rejected it, `None` when the
    /// recording has no such call (which is kept as a divergence).
    pub fn verdict(&self, tool: &str, input: &Value) -> Option<super::mode::Verdict> {
        let mut state = self.lock();
        let found =
            self.calls.iter().enumerate().find(|(index, call)| {
                !state.used[*index] && call.tool == tool && call.input == *input
            });
        match found {
            Some((index, call)) => match &call.result {
                RecordedResult::Rejected(reason) => {
                    // A rejected call never runs, so nothing else uses it up.
                    state.mark_used(index);
                    Some(super::mode::Verdict::Reject {
                        reason: reason.clone(),
                    })
                }
                _ => Some(super::mode::Verdict::Approve),
            },
            None => {
                let made = state.made + 1;
                state.divergences.push(Divergence {
                    call: made,
                    made: describe(tool, input, DESCRIBED_CHARS),
                    recorded: None,
                });
                None
            }
        }
    }

    /// Uses up the recorded rejection of this call, if there is one: a case whose own
    /// `decisions` rejected it, as the person did then.
    pub fn rejected(&self, tool: &str, input: &Value) {
        let mut state = self.lock();
        let found = self.calls.iter().enumerate().position(|(index, call)| {
            !state.used[index]
                && call.tool == tool
                && call.input == *input
                && matches!(call.result, RecordedResult::Rejected(_))
        });
        if let Some(index) = found {
            state.mark_used(index);
        }
    }

    /// The calls the run made that the recording does not have, in order.
    pub fn divergences(&self) -> Vec<Divergence> {
        self.lock().divergences.clone()
    }

    /// Recorded calls the run did not make.
    pub fn unused(&self) -> Vec<&RecordedCall> {
        let state = self.lock();
        self.calls
            .iter()
            .zip(&state.used)
            .filter(|(_, used)| !**used)
            .map(|(call, _)| call)
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ReplayState> {
        // A panic while holding the lock cannot leave the counters half-written.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether `pattern` (an id, `prefix.*` or `*`) names `tool`.
pub fn tool_matches(pattern: &str, tool: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => tool.starts_with(prefix),
        None => pattern == tool,
    }
}

/// A call as `tool(input)`, its input cut at `max_chars` characters: how divergences name
/// calls, here and in code mode's resume.
pub fn describe(tool: &str, input: &Value, max_chars: usize) -> String {
    let input = input.to_string();
    let input = match input.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &input[..cut]),
        None => input,
    };
    format!("{tool}({input})")
}

/// Whether a journal entry is the mode's own (code mode's seeds, clock readings, `llm()`
/// answers), not one the runtime keeps for every mode (model replies, decisions).
pub fn is_mode_entry(entry: &Value) -> bool {
    !matches!(
        entry.get("type").and_then(Value::as_str),
        Some(MODEL_REPLY_ENTRY | DECISION_ENTRY)
    )
}

/// The `type` of the journal entry that holds a person's verdict on a call.
pub const DECISION_ENTRY: &str = "decision";

/// The journal entry of a verdict on the call `tool_call_id`.
pub fn decision_entry(tool_call_id: &str, verdict: &super::mode::Verdict) -> Value {
    serde_json::json!({ "type": DECISION_ENTRY, "call": tool_call_id, "verdict": verdict })
}

/// The call and verdict a journal entry holds, if it is a decision.
pub fn decision_of(entry: &Value) -> Option<(String, super::mode::Verdict)> {
    if entry.get("type").and_then(Value::as_str) != Some(DECISION_ENTRY) {
        return None;
    }
    let call = entry.get("call")?.as_str()?.to_owned();
    let verdict = serde_json::from_value(entry.get("verdict")?.clone()).ok()?;
    Some((call, verdict))
}

/// One model reply as the journal keeps it: what a scripted turn needs to give it again.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct RecordedReply {
    /// The reply's text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// Its native tool calls, as the model made them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallRequest>,
    /// The reasoning it showed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning: Vec<Reasoning>,
    /// What it spent.
    #[serde(default)]
    pub usage: PromptUsage,
    /// The provider's error, when the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the mode asked for, when it asks for more than one thing ([`PROGRAM_REPLY`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
}

impl RecordedReply {
    /// The journal entry of one model call's outcome.
    pub fn entry(outcome: &Result<ModelResponse, ProviderError>, purpose: Option<&str>) -> Value {
        let mut reply = match outcome {
            Ok(response) => Self {
                text: response.text.clone(),
                tool_calls: response.tool_calls.clone(),
                reasoning: response.reasoning.clone(),
                usage: response.usage.clone(),
                ..Self::default()
            },
            Err(error) => Self {
                error: Some(error.to_string()),
                ..Self::default()
            },
        };
        reply.purpose = purpose.map(str::to_owned);
        serde_json::json!({ "type": MODEL_REPLY_ENTRY, "reply": reply })
    }

    /// The reply a journal entry holds, if it is a model reply.
    pub fn of_entry(entry: &Value) -> Option<Self> {
        if entry.get("type").and_then(Value::as_str) != Some(MODEL_REPLY_ENTRY) {
            return None;
        }
        serde_json::from_value(entry.get("reply")?.clone()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn recorded(tool: &str, input: Value, output: Value) -> RecordedCall {
        RecordedCall {
            tool: tool.to_owned(),
            input,
            result: RecordedResult::Output(output),
        }
    }

    #[test]
    fn calls_are_answered_in_order_and_a_new_one_diverges() {
        let replay = Replay::new(
            vec![
                recorded("time.now", json!({}), json!("first")),
                recorded("time.now", json!({}), json!("second")),
                recorded("fs.read", json!({"path": "a"}), json!("A")),
            ],
            vec!["fs.*".to_owned()],
            Vec::new(),
        );
        assert!(replay.is_live("fs.read") && !replay.is_live("time.now"));
        assert_eq!(
            replay.answer("time.now", &json!({})).unwrap(),
            json!("first")
        );
        assert_eq!(
            replay.answer("time.now", &json!({})).unwrap(),
            json!("second")
        );
        let error = replay
            .answer("todo.create", &json!({"title": "x"}))
            .unwrap_err();
        assert!(
            error.to_string().contains("not in the recording"),
            "{error}"
        );
        assert_eq!(
            replay.divergences(),
            vec![Divergence {
                call: 3,
                made: "todo.create({\"title\":\"x\"})".to_owned(),
                recorded: Some("fs.read({\"path\":\"a\"})".to_owned()),
            }]
        );
        assert_eq!(replay.unused().len(), 1);
    }

    #[test]
    fn recorded_calls_read_as_yaml_writes_them() {
        let call: RecordedCall =
            serde_json::from_value(json!({"tool": "fs.write", "input": {}, "rejected": "no"}))
                .unwrap();
        assert_eq!(call.result, RecordedResult::Rejected(Some("no".to_owned())));
        let value = serde_json::to_value(recorded("a.b", json!(1), json!(null))).unwrap();
        assert_eq!(value, json!({"tool": "a.b", "input": 1, "output": null}));
    }
}
