//! Execution modes: the contract every way of running a prompt keeps, and their registry.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[cfg(doc)]
use crate::prompt::ErrorKind;
use crate::prompt::ModelKind;
use crate::prompt::{Prompt, PromptUsage};
use crate::services::Services;
use crate::state::State;

/// Runs one prompt. Every mode writes the same timeline shapes and publishes the same events.
#[async_trait]
pub trait PromptExecutor: Send + Sync {
    /// The prompt as it stands.
    fn prompt(&self) -> &Prompt;
    /// The prompt's id.
    fn id(&self) -> &str {
        &self.prompt().id
    }
    /// The user the prompt belongs to.
    fn user_id(&self) -> &str {
        &self.prompt().user_id
    }
    /// The state the prompt's tools read and write.
    fn state(&self) -> &State;
    /// What the prompt has spent so far.
    fn usage(&self) -> &PromptUsage {
        &self.prompt().usage
    }
    /// Runs until the prompt completes, fails, or waits for approval; returns it then.
    async fn run(&mut self) -> Result<Prompt, ExecutorError>;
    /// Says who takes the next decision ([`Self::decide`]), for its record; without it the
    /// record names the prompt's user.
    fn decided_by(&self, _by: crate::prompt::DecidedBy) {}
    /// Applies a person's verdict on the waiting tool call, and runs on.
    async fn decide(
        &mut self,
        tool_call_id: &str,
        _verdict: &Verdict,
    ) -> Result<Prompt, ExecutorError> {
        Err(ExecutorError::NotWaiting(tool_call_id.to_owned()))
    }
}

/// A person's decision about a tool call that waits for approval, the same through every
/// layer: executor, services, HTTP API, CLI and timeline tests. Its JSON is
/// `{"type": "approve"}`, `{"type": "reject", "reason": …}`, or for a request that holds
/// several calls (a plan, a batch) `{"type": "approveOnly", "calls": [0, 2], "reason": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Verdict {
    /// The call runs.
    Approve,
    /// The call fails with `Rejected by user: <reason>`, kind `rejected`.
    Reject {
        /// Why, in the person's words, when they gave a reason.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Of a request that holds several calls, the calls at these places (from 0) run; the
    /// others are rejected, with the reason. Of a single call, it runs if `calls` has 0.
    #[serde(rename_all = "camelCase")]
    ApproveOnly {
        /// The places of the approved calls.
        calls: Vec<usize>,
        /// Why the others are rejected.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl Verdict {
    /// A rejection, with a reason when `reason` has words.
    pub fn reject(reason: Option<&str>) -> Self {
        Self::Reject {
            reason: reason.map(str::to_owned),
        }
    }

    /// The error a rejected call records (of kind [`ErrorKind::Rejected`]); `None` for an
    /// approval.
    pub fn rejection(&self) -> Option<String> {
        self.rejection_at(0)
    }

    /// The error of the call at place `index` of a request that holds several; `None` when
    /// that call is approved.
    pub fn rejection_at(&self, index: usize) -> Option<String> {
        match self {
            Self::Approve => None,
            Self::ApproveOnly { calls, .. } if calls.contains(&index) => None,
            Self::Reject { reason } | Self::ApproveOnly { reason, .. } => {
                Some(rejection_error(reason.as_deref()))
            }
        }
    }

    /// The reason the person gave, for a rejection or for the calls an approval in part
    /// leaves out.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Self::Approve => None,
            Self::Reject { reason } | Self::ApproveOnly { reason, .. } => reason.as_deref(),
        }
    }

    /// The past tense a caller is told: `approved` or `rejected`.
    pub fn word(&self) -> &'static str {
        match self {
            Self::Approve => "approved",
            Self::Reject { .. } => "rejected",
            Self::ApproveOnly { .. } => "approved in part",
        }
    }
}

/// The calls a person picked out of `count` (`1 3 5-7`, numbered from 1), as places from 0,
/// sorted and each once: what `Verdict::ApproveOnly` takes. Refused when a number is not
/// one of the calls.
pub fn chosen_places(text: &str, count: usize) -> Result<Vec<usize>, String> {
    let mut chosen = Vec::new();
    for part in text.split(|c: char| c == ',' || c.is_whitespace()) {
        if part.is_empty() {
            continue;
        }
        let (from, to) = part.split_once('-').unwrap_or((part, part));
        let parse = |number: &str| {
            number
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|number| (1..=count).contains(number))
                .ok_or_else(|| format!("\"{part}\" is not a call number from 1 to {count}"))
        };
        for number in parse(from)?..=parse(to)? {
            if !chosen.contains(&(number - 1)) {
                chosen.push(number - 1);
            }
        }
    }
    chosen.sort_unstable();
    Ok(chosen)
}

/// The rule that rejects a call nobody decided in time, as decision records name it.
pub const TIMEOUT_POLICY: &str = "[approval] timeout";

/// The rejection a call gets when nobody decided within `limit` (as written: `10m`): the
/// model reads it, and the prompt goes on.
pub fn timed_out(limit: &str) -> Verdict {
    Verdict::Reject {
        reason: Some(format!(
            "no decision within {limit} (the {TIMEOUT_POLICY}); do not retry the call unless \
             the user asks"
        )),
    }
}

/// The error a rejected tool call records, the same in every mode.
pub fn rejection_error(reason: Option<&str>) -> String {
    let reason = reason
        .map(str::trim)
        .filter(|reason| !reason.is_empty())
        .unwrap_or("no reason given");
    format!("Rejected by user: {reason}")
}

/// Why an executor could not run a prompt or apply a decision.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExecutorError {
    /// The named tool call is not waiting for approval.
    #[error("no tool call \"{0}\" is waiting for approval")]
    NotWaiting(String),
    /// The prompt is in a state it cannot run from (named, e.g. `completed`).
    #[error("prompt is {0} and cannot run")]
    NotRunnable(&'static str),
    /// Anything else, such as a checkpoint that could not be saved.
    #[error("{0}")]
    Internal(String),
}

/// What changed in a prompt since its last checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PromptChange {
    /// The output at this index was added or updated (and perhaps the prompt's state).
    Output(usize),
    /// Only prompt-level fields changed: state, usage, error.
    Prompt,
}

/// Called after every change an executor makes to its prompt, before the next step runs.
/// Persistence implements it so that confirmed state survives a crash; `change` lets it write
/// only what changed, so a checkpoint costs the same however long the timeline is.
#[async_trait]
pub trait PromptCheckpoint: Send + Sync {
    /// Saves `prompt`; `change` says what changed since the last save. On an error the
    /// executor stops, and nothing of the change is published.
    async fn save(&self, prompt: &Prompt, change: PromptChange) -> anyhow::Result<()>;
    /// Appends an entry to the prompt's journal, durably: what a mode needs besides the
    /// timeline to resume the prompt in another process (code mode keeps its scripts' seeds,
    /// clock readings and `llm()` answers there). Kept while the prompt can still go on:
    /// running, waiting, or interrupted. Without persistence, nothing is kept.
    async fn append_journal(
        &self,
        _prompt_id: &str,
        _entry: serde_json::Value,
    ) -> anyhow::Result<()> {
        Ok(())
    }
    /// The prompt's journal, oldest entry first.
    async fn journal(&self, _prompt_id: &str) -> anyhow::Result<Vec<serde_json::Value>> {
        Ok(Vec::new())
    }
}

/// What a mode gets to create an executor.
#[derive(Clone)]
pub struct ExecutorCreateOptions {
    /// The runtime's services.
    pub services: Arc<Services>,
    /// The mode that runs the prompt: `prompt.mode`, else the resumed prompt's, else
    /// `classic`.
    pub mode: String,
    /// The prompt as it was asked for.
    pub prompt: PromptOptions,
}

impl std::fmt::Debug for ExecutorCreateOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutorCreateOptions")
            .field("user_id", &self.prompt.user_id)
            .field("mode", &self.mode)
            .field("model", &self.prompt.model)
            .finish_non_exhaustive()
    }
}

/// A way of running prompts, registered under a unique id.
pub trait ExecutionModeFactory: Send + Sync {
    /// The id prompts name the mode by, e.g. `classic`; unique within a runtime.
    fn id(&self) -> &str;
    /// A human-readable name, e.g. `Classic (text + tools)`.
    fn name(&self) -> &str;
    /// An executor for one prompt, new or resumed (`options.prompt.resume_prompt`); it does
    /// not run until it is asked to.
    fn create_executor(&self, options: ExecutorCreateOptions) -> Box<dyn PromptExecutor>;
    /// Whether a prompt of this mode that waits for approval can be resumed from its stored
    /// timeline after the process restarts. Modes whose running state lives only in memory
    /// (code mode's script) say no, and such prompts become `interrupted` at startup.
    fn resumes_after_restart(&self) -> bool {
        true
    }
    /// The tool output this mode records a plan of several calls as, if it plans: its input's
    /// `calls` lists them (`{tool, input, …}`), and one decision's `calls` picks among them.
    /// Only such an output is read so: any other call's input is the model's, and may say
    /// anything.
    fn plan_tool(&self) -> Option<&str> {
        None
    }
}

/// The registry of execution modes.
#[derive(Default, Clone)]
pub struct ExecutionModeService {
    modes: BTreeMap<String, Arc<dyn ExecutionModeFactory>>,
}

impl std::fmt::Debug for ExecutionModeService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.modes.keys()).finish()
    }
}

/// Why the mode registry refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModeError {
    /// Two modes were registered under this id.
    #[error("execution mode \"{0}\" is registered twice")]
    Duplicate(String),
    /// No mode is registered under this id.
    #[error("unknown execution mode \"{mode}\"; registered modes: {}", registered.join(", "))]
    Unknown {
        /// The id asked for.
        mode: String,
        /// The ids of the registered modes, sorted.
        registered: Vec<String>,
    },
}

impl ExecutionModeService {
    /// Registers a mode; an id that is already taken is an error.
    pub fn register(&mut self, mode: Arc<dyn ExecutionModeFactory>) -> Result<(), ModeError> {
        let id = mode.id().to_owned();
        if self.modes.contains_key(&id) {
            return Err(ModeError::Duplicate(id));
        }
        self.modes.insert(id, mode);
        Ok(())
    }

    /// The mode registered under `id`; for an unknown id, an error naming the registered ones.
    pub fn get(&self, id: &str) -> Result<&Arc<dyn ExecutionModeFactory>, ModeError> {
        self.modes.get(id).ok_or_else(|| ModeError::Unknown {
            mode: id.to_owned(),
            registered: self.ids(),
        })
    }

    /// The tool output mode `id` records its plans as ([`ExecutionModeFactory::plan_tool`]).
    pub fn plan_tool(&self, id: &str) -> Option<&str> {
        self.modes.get(id)?.plan_tool()
    }

    /// Registered modes, sorted by id.
    pub fn list(&self) -> Vec<Arc<dyn ExecutionModeFactory>> {
        self.modes.values().cloned().collect()
    }

    /// The ids of the registered modes, sorted.
    pub fn ids(&self) -> Vec<String> {
        self.modes.keys().cloned().collect()
    }
}

/// What a caller gives to start a prompt.
#[derive(Clone, Default)]
pub struct PromptOptions {
    /// The user the prompt belongs to.
    pub user_id: String,
    /// What the user asked, if anything.
    pub input: Option<String>,
    /// The class of model to answer.
    pub model: ModelKind,
    /// `classic` when absent.
    pub mode: Option<String>,
    /// Earlier prompts the model sees before this one, oldest first.
    pub history: Vec<Prompt>,
    /// The state the prompt's tools read and write, e.g. its conversation's.
    pub state: State,
    /// The most model rounds the prompt may take; `None` leaves it to the mode (classic:
    /// the config's `maxRounds`).
    pub max_rounds: Option<u32>,
    /// A stored prompt to go on with instead of a new one; its timeline is kept.
    pub resume_prompt: Option<Prompt>,
    /// Where each change to the prompt is saved; `None` keeps it in memory only.
    pub checkpoint: Option<Arc<dyn PromptCheckpoint>>,
    /// The conversation the prompt belongs to, if any; named in `prompt.created` and in the
    /// prompt's spans.
    pub conversation_id: Option<String>,
    /// A recorded run to answer tool calls from instead of running the tools (see
    /// [`crate::replay`]); `None` runs them.
    pub replay: Option<Arc<crate::replay::Replay>>,
}

impl std::fmt::Debug for PromptOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptOptions")
            .field("user_id", &self.user_id)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chosen_places_read_numbers_and_ranges() {
        assert_eq!(chosen_places("1 3 5-7", 8), Ok(vec![0, 2, 4, 5, 6]));
        assert_eq!(chosen_places("2,2, 1", 3), Ok(vec![0, 1]));
        assert_eq!(chosen_places("", 3), Ok(vec![]));
        assert!(chosen_places("4", 3).is_err());
        assert!(chosen_places("0", 3).is_err());
        assert!(chosen_places("x", 3).is_err());
    }
}
