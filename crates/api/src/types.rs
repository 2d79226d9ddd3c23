//! The bodies of the API's requests and answers: the handlers build them, the OpenAPI
//! document describes them, and clients in Rust (the `agentic` CLI with `--server`) read and
//! write them, so both sides agree on one definition.

use agentic_conversation::{Conversation, StoredPrompt};
use agentic_core::{ModelKind, Prepared};
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PromptBody {
    /// The user's message.
    pub input: String,
    /// `normal` (default) or `high`.
    #[serde(default)]
    pub model: ModelKind,
    /// `classic` when absent; `code`, or a mode a plugin adds.
    #[serde(default)]
    pub mode: Option<String>,
    /// Continue this conversation; a new one when absent.
    #[serde(default)]
    pub conversation_id: Option<String>,
    /// Plugins (ids, e.g. `["fs", "shell"]`) whose tools and context this prompt goes
    /// without. The conversation keeps the choice for its later prompts until one sends
    /// another (`[]` brings every plugin back); absent, the conversation's choice holds, else
    /// the server's `leaveOut` setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leave_out: Option<Vec<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromptAccepted {
    pub prompt_id: String,
    pub conversation_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApproveBody {
    pub tool_call_id: String,
    /// Of a request holding several calls (a code-mode plan), the places (from 0) of the
    /// calls approved; the others are rejected. Absent: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<Vec<usize>>,
    /// With `calls`: told to the model for the calls left out, `Rejected by user: <reason>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How far the approval reaches: this tool (or a pattern) for the rest of the prompt, or
    /// for the conversation until it expires. Absent: this call only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<agentic_core::scope::Scope>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RejectBody {
    pub tool_call_id: String,
    /// Told to the model: `Rejected by user: <reason>`.
    #[serde(default)]
    pub reason: Option<String>,
}

/// The body of a decision route: the call it decides, and the verdict.
pub trait DecisionBody: serde::de::DeserializeOwned + Send + 'static {
    fn decision(self) -> (String, agentic_core::Verdict);
    /// The scope the decision grants, if any.
    fn scope(&self) -> Option<agentic_core::scope::Scope> {
        None
    }
}

impl DecisionBody for ApproveBody {
    fn scope(&self) -> Option<agentic_core::scope::Scope> {
        self.scope.clone()
    }

    fn decision(self) -> (String, agentic_core::Verdict) {
        let verdict = match self.calls {
            None => agentic_core::Verdict::Approve,
            Some(calls) => agentic_core::Verdict::ApproveOnly {
                calls,
                reason: self.reason,
            },
        };
        (self.tool_call_id, verdict)
    }
}

impl DecisionBody for RejectBody {
    fn decision(self) -> (String, agentic_core::Verdict) {
        (
            self.tool_call_id,
            agentic_core::Verdict::Reject {
                reason: self.reason,
            },
        )
    }
}

/// `PATCH /api/conversations/{id}`: a new title.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RenameBody {
    /// The conversation's title, 1 to 200 characters once trimmed.
    pub title: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecisionAccepted {
    pub prompt_id: String,
    pub tool_call_id: String,
    /// `approved` or `rejected`; the prompt runs on in the background.
    pub decision: String,
}

/// A cancel of a prompt that runs on another server: stored, and applied there (or by the
/// server that takes the prompt over); `prompt.cancelled` follows on the event stream.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CancelSent {
    pub prompt_id: String,
    /// `cancel`.
    pub decision: String,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationDetail {
    #[serde(flatten)]
    pub conversation: Conversation,
    pub prompts: Vec<StoredPrompt>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolSummary {
    pub id: String,
    pub description: String,
    /// The plugin that offers it.
    pub plugin: Option<String>,
    /// Some calls may wait for a person's approval (always, or depending on the input); such
    /// calls are refused by `POST /api/tools/{id}/invoke` and run only inside a prompt.
    #[serde(default)]
    pub may_need_approval: bool,
    /// Running a call twice does no more than running it once (a read): a call whose server
    /// died before its result was stored runs again when another server takes the prompt
    /// over, where any other call gets an error instead.
    #[serde(default)]
    pub idempotent: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolDetail {
    pub id: String,
    pub description: String,
    pub plugin: Option<String>,
    /// As in the summary.
    #[serde(default)]
    pub may_need_approval: bool,
    /// As in the summary.
    #[serde(default)]
    pub idempotent: bool,
    /// JSON Schema of the input.
    pub input_schema: Value,
    /// JSON Schema of the output, when the tool declares one.
    pub output_schema: Option<Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InvokeResult {
    pub output: Value,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Health {
    pub status: String,
    pub version: String,
}

impl ToolSummary {
    /// Every tool a prompt with these tools has, in order.
    pub fn all(prepared: &Prepared) -> Vec<Self> {
        prepared
            .tools
            .iter()
            .map(|tool| Self {
                id: tool.id().to_owned(),
                description: tool.description().to_owned(),
                plugin: prepared.tool_plugins.get(tool.id()).cloned(),
                may_need_approval: prepared.tools.may_need_approval(tool.id()),
                idempotent: tool.idempotent(),
            })
            .collect()
    }
}

impl ToolDetail {
    /// Tool `id` with its schemas, if the prompt has it.
    pub fn of(prepared: &Prepared, id: &str) -> Option<Self> {
        let tool = prepared.tools.get(id)?;
        Some(Self {
            id: tool.id().to_owned(),
            description: tool.description().to_owned(),
            plugin: prepared.tool_plugins.get(tool.id()).cloned(),
            may_need_approval: prepared.tools.may_need_approval(tool.id()),
            idempotent: tool.idempotent(),
            input_schema: tool.input_schema().clone(),
            output_schema: tool.output_schema().cloned(),
        })
    }
}

/// `POST /api/prompts/{id}/replay`: what a replay is asked.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplayBody {
    /// A program to run instead of one of the prompt's (code mode).
    #[serde(default)]
    pub code: Option<String>,
    /// Which program `code` replaces: the id of one of the prompt's `code.execute` outputs.
    #[serde(default)]
    pub execution: Option<String>,
    /// Which program `code` replaces, counted from 1 over the case's programs (the earlier
    /// prompts' first); the default, without `execution` either, is the prompt's first.
    #[serde(default)]
    pub program: Option<usize>,
}
