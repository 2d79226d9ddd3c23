//! The prompt and its timeline: what was asked, what happened, and what it cost.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One user turn and everything an execution mode did to answer it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Prompt {
    /// Unique id (a UUID).
    pub id: String,
    /// The user the prompt belongs to; its events are published to them.
    pub user_id: String,
    /// The class of model that answers.
    #[serde(default)]
    pub model: ModelKind,
    /// The id of the execution mode that runs it, e.g. `classic`.
    #[serde(default = "default_mode")]
    pub mode: String,
    /// Whether clients show the prompt in its conversation; the playground hides it when false.
    #[serde(default = "default_visible")]
    pub visible: bool,
    /// Where the prompt is in its life.
    pub state: PromptState,
    /// What the user asked; absent for a prompt started without text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// The timeline: every output, in the order it was added.
    #[serde(default)]
    pub output: Vec<PromptOutput>,
    /// What the prompt's model calls spent.
    #[serde(default)]
    pub usage: PromptUsage,
    /// Why the prompt ended `failed` or `interrupted`; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The mode every prompt runs in unless it names another.
pub const DEFAULT_MODE: &str = "classic";

fn default_mode() -> String {
    DEFAULT_MODE.to_owned()
}

fn default_visible() -> bool {
    true
}

impl Prompt {
    /// A new `running` prompt with an empty timeline.
    pub fn new(user_id: &str, mode: &str, model: ModelKind, input: Option<String>) -> Self {
        Self {
            id: uuid::Uuid::new_v4().to_string(),
            user_id: user_id.to_owned(),
            model,
            mode: mode.to_owned(),
            visible: true,
            state: PromptState::Running,
            input,
            output: Vec::new(),
            usage: PromptUsage::default(),
            error: None,
        }
    }

    /// The prompt's text outputs joined by blank lines: what a reader sees as the answer.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .output
            .iter()
            .filter_map(|output| match output {
                PromptOutput::Text(text) => Some(text.content.as_str()),
                _ => None,
            })
            .collect();
        texts.join("\n\n")
    }

    /// The tool output with this id, if the timeline has one.
    pub fn tool_output(&self, tool_call_id: &str) -> Option<&ToolOutput> {
        self.output.iter().find_map(|output| match output {
            PromptOutput::Tool(tool) if tool.id == tool_call_id => Some(tool),
            _ => None,
        })
    }

    /// The tool calls that wait for a person's decision: while the prompt is
    /// `waiting_for_approval`, those marked so; for a prompt stored by a release that did not
    /// mark them, every pending call (as that release accepted).
    pub fn calls_awaiting_approval(&self) -> Vec<&ToolOutput> {
        if self.state != PromptState::WaitingForApproval {
            return Vec::new();
        }
        let pending: Vec<&ToolOutput> = self
            .output
            .iter()
            .filter_map(|output| match output {
                PromptOutput::Tool(tool) if tool.result.is_pending() => Some(tool),
                _ => None,
            })
            .collect();
        if pending
            .iter()
            .any(|tool| tool.result.is_awaiting_approval())
        {
            pending
                .into_iter()
                .filter(|tool| tool.result.is_awaiting_approval())
                .collect()
        } else {
            pending
        }
    }

    /// Ends every pending tool call with `error`, of `kind`; the indexes of those it closed.
    pub fn close_pending_tools(&mut self, kind: ErrorKind, error: &str) -> Vec<usize> {
        let now = Utc::now();
        let mut closed = Vec::new();
        for (index, output) in self.output.iter_mut().enumerate() {
            if let PromptOutput::Tool(tool) = output
                && tool.result.is_pending()
            {
                tool.result = ToolResult::error(kind, error);
                tool.end = Some(now);
                closed.push(index);
            }
        }
        closed
    }
}

/// Which class of model answers: the provider config maps each to a concrete model name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// The default class.
    #[default]
    Normal,
    /// The more capable class.
    High,
}

impl ModelKind {
    /// The class's name in requests and config: `normal` or `high`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "normal",
            Self::High => "high",
        }
    }
}

impl std::str::FromStr for ModelKind {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value {
            "normal" => Ok(Self::Normal),
            "high" => Ok(Self::High),
            other => Err(format!(
                "unknown model \"{other}\", expected normal or high"
            )),
        }
    }
}

/// Where a prompt is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PromptState {
    /// The mode is working on it.
    Running,
    /// The mode finished its work.
    Completed,
    /// A tool call waits for a person's decision.
    WaitingForApproval,
    /// A provider or internal error ended the prompt; its outputs are kept.
    Failed,
    /// The process stopped while the prompt was running.
    Interrupted,
    /// Someone stopped the prompt; its outputs up to then are kept.
    Cancelled,
}

impl PromptState {
    /// The state's stored name, e.g. `waiting_for_approval`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::WaitingForApproval => "waiting_for_approval",
            Self::Failed => "failed",
            Self::Interrupted => "interrupted",
            Self::Cancelled => "cancelled",
        }
    }

    /// True when nothing more will happen to the prompt without outside action.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Interrupted | Self::Cancelled
        )
    }
}

/// One entry of a prompt's timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
#[non_exhaustive]
pub enum PromptOutput {
    /// A text: the model's reply, or a message of the mode.
    Text(TextOutput),
    /// A tool call and its result.
    Tool(ToolOutput),
    /// A file a tool made for the user.
    File(FileOutput),
    /// The model's reasoning before what it said or did next: shown and stored, sent back to
    /// the provider that wrote it, never the answer.
    Reasoning(ReasoningOutput),
}

impl PromptOutput {
    /// The output's id, whatever its kind.
    pub fn id(&self) -> &str {
        match self {
            Self::Text(text) => &text.id,
            Self::Tool(tool) => &tool.id,
            Self::File(file) => &file.id,
            Self::Reasoning(reasoning) => &reasoning.id,
        }
    }
}

/// A text of the timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TextOutput {
    /// Unique id (a UUID).
    pub id: String,
    /// The text.
    pub content: String,
    /// When it began.
    pub start: DateTime<Utc>,
    /// When it was finished, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<DateTime<Utc>>,
}

/// A model's reasoning, as its provider gave it. Providers that reason in the open send the
/// text (or a summary of it); each also sends what it needs to accept the reasoning back in
/// the next request of a tool loop, which only it can read: a signature, or the reasoning
/// encrypted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Reasoning {
    /// The provider that wrote it (`anthropic`, `gemini`, `openai`); it is sent back to that
    /// provider only.
    pub provider: String,
    /// The readable reasoning or its summary; empty when the provider sent none.
    #[serde(default)]
    pub text: String,
    /// The provider's signature over it (Anthropic's thinking, Gemini's thought signature).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// The reasoning in a form only the provider reads (OpenAI's encrypted reasoning,
    /// Anthropic's redacted thinking).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<String>,
    /// The provider's own id for it (OpenAI's reasoning item id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
}

impl Reasoning {
    /// Reasoning `text` from `provider`, with nothing else yet.
    pub fn new(provider: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            provider: provider.into(),
            text: text.into(),
            ..Self::default()
        }
    }

    /// The same, with the provider's signature.
    #[must_use]
    pub fn with_signature(mut self, signature: impl Into<String>) -> Self {
        self.signature = Some(signature.into());
        self
    }

    /// The same, with its encrypted form.
    #[must_use]
    pub fn with_encrypted(mut self, encrypted: impl Into<String>) -> Self {
        self.encrypted = Some(encrypted.into());
        self
    }

    /// The same, with the provider's id for it.
    #[must_use]
    pub fn with_item_id(mut self, item_id: impl Into<String>) -> Self {
        self.item_id = Some(item_id.into());
        self
    }
}

/// Reasoning of the timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningOutput {
    /// Unique id (a UUID).
    pub id: String,
    /// The reasoning.
    #[serde(flatten)]
    pub reasoning: Reasoning,
    /// When it was recorded.
    pub start: DateTime<Utc>,
    /// When it was finished, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<DateTime<Utc>>,
}

/// A tool call of the timeline, with its result once it has one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolOutput {
    /// The tool call id: the model's own id in classic mode, generated in other modes.
    pub id: String,
    /// The dotted tool id, e.g. `time.now`.
    pub function: String,
    /// The call's input: the parsed arguments, or their raw text when they are not valid JSON.
    pub input: Value,
    /// The result; `pending` until the call ends.
    pub result: ToolResult,
    /// When the call started, or was queued if it has not started yet.
    pub start: DateTime<Utc>,
    /// When the call ended; absent while it is pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<DateTime<Utc>>,
    /// Who decided the call, when it waited for a decision: absent for calls that did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecisionRecord>,
}

/// The record of a decision on a call that waited for one: what was decided, by whom, when,
/// and what they were shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct DecisionRecord {
    /// Approved, or rejected with the reason given.
    pub verdict: super::mode::Verdict,
    /// Who decided.
    pub by: DecidedBy,
    /// When.
    pub decided_at: DateTime<Utc>,
    /// What the request said when it was decided: why the call needed approval.
    pub shown: String,
}

impl DecisionRecord {
    /// A record of `verdict`, by `by`, now.
    pub fn new(verdict: super::mode::Verdict, by: DecidedBy, shown: impl Into<String>) -> Self {
        Self {
            verdict,
            by,
            decided_at: Utc::now(),
            shown: shown.into(),
        }
    }

    /// The same record, decided at `at`: a call a plan approved carries the plan's time.
    #[must_use]
    pub fn decided_at(mut self, at: DateTime<Utc>) -> Self {
        self.decided_at = at;
        self
    }
}

/// Who took a decision: a person, or a rule of the configuration that took it for them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
#[non_exhaustive]
pub enum DecidedBy {
    /// A person: the user the prompt belongs to, as the API, the CLI or MCP identified them.
    #[serde(rename_all = "camelCase")]
    User {
        /// Their user id.
        user_id: String,
    },
    /// A rule that decides without a person, such as `[approval] timeout`.
    Policy {
        /// The rule, as the configuration names it.
        name: String,
    },
    /// A scope a person granted with an earlier decision ([`crate::scope`]).
    Scope(Box<ScopeDecider>),
}

/// The scope that took a decision: `{"type": "scope", "id", "tool", "grantedBy"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScopeDecider {
    /// The scope's id, to find (and revoke) it.
    pub id: String,
    /// The tool id or pattern it approves.
    pub tool: String,
    /// The user who granted it.
    pub granted_by: String,
}

/// How a tool call ended without a result. Stored beside the error's words, so that what
/// happens next (resuming a prompt, taking it over, telling the model) never reads them:
/// rewording an error cannot change how an earlier release's prompts resume.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The tool ran and failed, or its input was refused.
    #[default]
    Failed,
    /// A person rejected the call.
    Rejected,
    /// The prompt was cancelled before the call finished.
    Cancelled,
    /// The process running the prompt stopped before the call finished. A prompt continued
    /// later runs the call again if its tool is idempotent.
    Interrupted,
    /// The process stopped while the call waited for a person: it never ran.
    InterruptedWaiting,
    /// The server running the call stopped before its result was recorded, and the prompt
    /// went on elsewhere without running it again.
    TakenOver,
    /// The mode did not run the call (code mode: a reply it did not run as a program); the
    /// error's `notice` names the rule that said why.
    NotRun,
}

/// A tool call's result as the timeline holds it.
///
/// Every error is written with its [`ErrorKind`]; an error without one was written by a
/// release before kinds existed, and is classified once, as it is read (`legacy.rs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    from = "crate::contract::legacy::StoredToolResult"
)]
pub enum ToolResult {
    /// The call ran and returned.
    Success {
        /// What the tool returned.
        output: Value,
    },
    /// The call ended without a result.
    Error {
        /// What went wrong, in words for people and the model.
        error: String,
        /// Why the call ended so: what code decides by, where `error` is for reading.
        kind: ErrorKind,
        /// The mode's own name for the rule that wrote this error, when one did (code mode:
        /// `repeated`, `unsaid`, …): an identifier that stays the same across releases.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        notice: Option<String>,
    },
    /// No result yet: the call is queued, running, or waiting for a person.
    Pending {
        /// What the call waits for, in words (e.g. `running`, or why it needs approval).
        reason: String,
        /// Whether the call waits for a person's decision (approve or reject) right now; not
        /// while it is queued or running. Absent in rows of releases before it existed.
        #[serde(
            default,
            rename = "awaitingApproval",
            skip_serializing_if = "std::ops::Not::not"
        )]
        awaiting_approval: bool,
    },
}

impl ToolResult {
    /// A call that ran and failed, or whose input was refused.
    pub fn failed(error: impl Into<String>) -> Self {
        Self::error(ErrorKind::Failed, error)
    }

    /// A call that ended without a result, for the reason `kind` says.
    pub fn error(kind: ErrorKind, error: impl Into<String>) -> Self {
        Self::Error {
            error: error.into(),
            kind,
            notice: None,
        }
    }

    /// This error, written by the rule named `notice` (a result that is not an error is
    /// returned as it is).
    #[must_use]
    pub fn with_notice(mut self, name: &str) -> Self {
        if let Self::Error { notice, .. } = &mut self {
            *notice = Some(name.to_owned());
        }
        self
    }

    /// How the call ended without a result; `None` for a result or a call still to come.
    pub fn error_kind(&self) -> Option<ErrorKind> {
        match self {
            Self::Error { kind, .. } => Some(*kind),
            _ => None,
        }
    }

    /// The name of the rule that wrote this error, if one did.
    pub fn notice(&self) -> Option<&str> {
        match self {
            Self::Error { notice, .. } => notice.as_deref(),
            _ => None,
        }
    }

    /// A result still to come, for a call queued or running.
    pub fn pending(reason: &str) -> Self {
        Self::Pending {
            reason: reason.to_owned(),
            awaiting_approval: false,
        }
    }

    /// True while the call has no result yet.
    pub fn is_pending(&self) -> bool {
        matches!(self, Self::Pending { .. })
    }

    /// True while the call waits for a person's decision.
    pub fn is_awaiting_approval(&self) -> bool {
        matches!(
            self,
            Self::Pending {
                awaiting_approval: true,
                ..
            }
        )
    }
}

/// A file a tool made for the user, shown in the timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileOutput {
    /// Unique id (a UUID).
    pub id: String,
    /// Where the file is, as the user's tools name it.
    pub path: String,
    /// Its MIME type, e.g. `image/png`.
    pub mime_type: String,
    /// What the file is, when the tool said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// When it was added.
    pub start: DateTime<Utc>,
    /// When it was finished, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<DateTime<Utc>>,
}

/// Tokens spent on a prompt, summed over every model call it made. It will gain fields (cache
/// reads and writes, for one): a provider starts from [`PromptUsage::tokens`] and sets what
/// else it knows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PromptUsage {
    /// Tokens the model read.
    pub input_tokens: u64,
    /// Tokens the model wrote.
    pub output_tokens: u64,
    /// All tokens, as the provider counted them.
    pub total_tokens: u64,
    /// Of the output tokens, those spent reasoning; 0 when the provider does not say.
    #[serde(default)]
    pub reasoning_tokens: u64,
    /// Of the input tokens, those read from the provider's prompt cache (billed for less); 0
    /// when the provider does not say.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// Of the input tokens, those written to the provider's prompt cache (billed for more by
    /// some); 0 when the provider does not say.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// The concrete model name the provider resolved `normal`/`high` to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// True when some of these counts are estimates ([`crate::tokens::estimate_tokens`])
    /// because a provider reported no usage for a model call.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
    /// Model calls made (each request to the provider, sub-calls included).
    #[serde(default)]
    pub model_calls: u64,
    /// What the model calls cost by the config's price table (`prices`), in its currency;
    /// absent when no call's model has a price there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}

/// Zero counts are left out of stored usage, so that usage from before cache counts existed,
/// and from providers without a cache, reads as it did.
#[allow(clippy::trivially_copy_pass_by_ref)] // serde hands a reference
fn is_zero(count: &u64) -> bool {
    *count == 0
}

impl PromptUsage {
    /// `input` tokens read and `output` tokens written, their sum the total, nothing else
    /// known yet.
    pub fn tokens(input: u64, output: u64) -> Self {
        Self {
            input_tokens: input,
            output_tokens: output,
            total_tokens: input + output,
            ..Self::default()
        }
    }

    /// Adds `other` to this usage: counts and cost sum, `estimated` spreads, and `other`'s
    /// model name, when it has one, replaces this one's.
    pub fn add(&mut self, other: &PromptUsage) {
        self.estimated |= other.estimated;
        self.model_calls += other.model_calls;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.total_tokens += other.total_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        if let Some(cost) = other.cost {
            self.cost = Some(self.cost.unwrap_or(0.0) + cost);
        }
        if other.model.is_some() {
            self.model.clone_from(&other.model);
        }
    }
}
