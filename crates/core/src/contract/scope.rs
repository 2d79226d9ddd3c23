//! Scopes: an approval that reaches past the call it decided. A person approving a call may
//! say "and this tool for the rest of this prompt" or "for this conversation, for an hour";
//! later calls of that tool then run without asking, each recorded as decided by the scope.
//! Scopes are listed and revoked through the API, the CLI and the playground.
//!
//! Where scopes are kept is a [`ScopeStore`]: in memory by default, in the database when a
//! conversation service opens one (it attaches its own to the [`ScopeSlot`]).

use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::mode::Verdict;
use super::prompt::{DecidedBy, Prompt, ScopeDecider};

/// How long a conversation scope lasts when the decision does not say.
pub const DEFAULT_CONVERSATION_SCOPE_SECONDS: u64 = 3600;

/// The most a scope may last.
pub const MAX_SCOPE_SECONDS: u64 = 30 * 24 * 3600;

/// How far an approval reaches beyond the call it decided, as a decision carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scope {
    /// `prompt`: the rest of this prompt; `conversation`: this conversation, until it expires.
    pub reach: Reach,
    /// The tools it approves: an id (`todo.create`) or a pattern (`todo.*`, `*`). Absent: the
    /// tool of the decided call (each tool of the approved calls of a plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// How long it lasts: seconds, or `"90s"`, `"10m"`, `"2h"`, `"7d"`. A conversation scope
    /// lasts an hour without it; a prompt scope ends with its prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in: Option<Lasting>,
}

/// Where a scope applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Reach {
    /// The rest of the prompt whose call was decided.
    Prompt,
    /// Every prompt of the conversation, until the scope expires or is revoked.
    Conversation,
}

/// A length of time as people write it: seconds, or a number with `s`, `m`, `h` or `d`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Lasting {
    /// A number of seconds.
    Seconds(u64),
    /// `"90s"`, `"10m"`, `"2h"`, `"7d"`.
    Written(String),
}

impl std::fmt::Display for Lasting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Seconds(seconds) => write!(f, "{seconds}"),
            Self::Written(text) => f.write_str(text),
        }
    }
}

impl Lasting {
    /// In seconds; `None` when it does not read as a length of time.
    pub fn seconds(&self) -> Option<u64> {
        match self {
            Self::Seconds(seconds) => Some(*seconds),
            Self::Written(text) => parse_duration(text),
        }
    }
}

/// `"90s"`, `"10m"`, `"2h"`, `"7d"` or `"300"` in seconds.
pub fn parse_duration(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let factor = match unit.trim() {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return None,
    };
    number.checked_mul(factor)
}

/// A scope in force: made by a decision, until it expires or is revoked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScopeGrant {
    /// Its id, to revoke it by.
    pub id: String,
    /// The user whose prompts it covers, who decided it.
    pub user_id: String,
    /// Where it applies.
    pub reach: Reach,
    /// The tool id or pattern it approves.
    pub tool: String,
    /// The conversation it covers (conversation reach), when the prompt had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    /// The prompt it covers (prompt reach), and the prompt whose decision made it.
    pub prompt_id: String,
    /// The call whose decision made it.
    pub tool_call_id: String,
    /// When it was granted.
    pub created_at: DateTime<Utc>,
    /// When it ends, if it does before its prompt or conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was revoked, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<DateTime<Utc>>,
}

impl ScopeGrant {
    /// Whether it approves a call of `tool` in prompt `prompt_id` of `conversation_id`, by
    /// `user_id`, at `now`.
    pub fn covers(
        &self,
        user_id: &str,
        conversation_id: Option<&str>,
        prompt_id: &str,
        tool: &str,
        now: DateTime<Utc>,
    ) -> bool {
        let place = match self.reach {
            Reach::Prompt => self.prompt_id == prompt_id,
            Reach::Conversation => {
                conversation_id.is_some() && self.conversation_id.as_deref() == conversation_id
            }
        };
        self.user_id == user_id
            && place
            && self.is_active(now)
            && crate::replay::tool_matches(&self.tool, tool)
    }

    /// Not revoked, not expired.
    pub fn is_active(&self, now: DateTime<Utc>) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|at| at > now)
    }

    /// Whether it is among `user_id`'s scopes in force at `now` that a list shows: all of
    /// them, or those of `conversation_id` when it is given ([`ScopeStore::list`]).
    pub fn listed(&self, user_id: &str, conversation_id: Option<&str>, now: DateTime<Utc>) -> bool {
        self.user_id == user_id
            && self.is_active(now)
            && (conversation_id.is_none() || self.conversation_id.as_deref() == conversation_id)
    }

    /// The record of a call it approved.
    pub fn decided_by(&self) -> DecidedBy {
        DecidedBy::Scope(Box::new(ScopeDecider {
            id: self.id.clone(),
            tool: self.tool.clone(),
            granted_by: self.user_id.clone(),
        }))
    }
}

/// Why a scope could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// A scope was sent with a rejection.
    #[error("a scope comes with an approval, not a rejection")]
    Rejected,
    /// `expiresIn` does not read as a length of time.
    #[error(
        "expiresIn \"{0}\" is not a length of time: write seconds (600) or \"90s\", \"10m\", \"2h\", \"7d\""
    )]
    BadLasting(String),
    /// Longer than [`MAX_SCOPE_SECONDS`].
    #[error("a scope may last 30 days at most")]
    TooLong,
    /// The tool is neither an id nor a pattern.
    #[error("a scope's tool is an id or a pattern such as todo.* (got \"{0}\")")]
    BadTool(String),
    /// A conversation scope on a prompt outside any conversation.
    #[error("a conversation scope needs a prompt in a conversation")]
    NoConversation,
}

/// The grants a decision with `scope` makes, on the call `tool_call_id` of `prompt` (in
/// `conversation_id`): one per tool it approves (of a plan's calls, or of the calls waiting
/// together, those it approves), at `now`. `plan_tool` is the output the prompt's mode records
/// plans as ([`crate::mode::ExecutionModeFactory::plan_tool`]): only its input lists calls.
pub fn grants_of(
    prompt: &Prompt,
    conversation_id: Option<&str>,
    tool_call_id: &str,
    verdict: &Verdict,
    scope: &Scope,
    now: DateTime<Utc>,
    plan_tool: Option<&str>,
) -> Result<Vec<ScopeGrant>, ScopeError> {
    if matches!(verdict, Verdict::Reject { .. }) {
        return Err(ScopeError::Rejected);
    }
    let seconds = match (&scope.expires_in, scope.reach) {
        (Some(lasting), _) => Some(
            lasting
                .seconds()
                .ok_or_else(|| ScopeError::BadLasting(lasting.to_string()))?,
        ),
        (None, Reach::Conversation) => Some(DEFAULT_CONVERSATION_SCOPE_SECONDS),
        (None, Reach::Prompt) => None,
    };
    if seconds.is_some_and(|seconds| seconds > MAX_SCOPE_SECONDS) {
        return Err(ScopeError::TooLong);
    }
    if scope.reach == Reach::Conversation && conversation_id.is_none() {
        return Err(ScopeError::NoConversation);
    }
    let tools = match &scope.tool {
        Some(tool) => {
            if !valid_pattern(tool) {
                return Err(ScopeError::BadTool(tool.clone()));
            }
            vec![tool.clone()]
        }
        // A tool id, never a pattern: only a person's own `tool` widens a scope.
        None => decided_tools(prompt, tool_call_id, verdict, plan_tool)
            .into_iter()
            .filter(|tool| valid_pattern(tool) && !tool.contains('*'))
            .collect(),
    };
    let expires_at = seconds
        .map(|seconds| now + chrono::Duration::seconds(i64::try_from(seconds).unwrap_or(i64::MAX)));
    Ok(tools
        .into_iter()
        .map(|tool| ScopeGrant {
            id: uuid::Uuid::new_v4().to_string(),
            user_id: prompt.user_id.clone(),
            reach: scope.reach,
            tool,
            conversation_id: conversation_id.map(str::to_owned),
            prompt_id: prompt.id.clone(),
            tool_call_id: tool_call_id.to_owned(),
            created_at: now,
            expires_at,
            revoked_at: None,
        })
        .collect())
}

/// The tools a decision on `tool_call_id` approves: the call's own, or, for a request that
/// holds several calls (its input lists them as `calls: [{tool, input}]`), each tool of the
/// approved ones.
/// A tool id, or a pattern with `*`, as a scope may name.
fn valid_pattern(tool: &str) -> bool {
    !tool.is_empty()
        && tool.len() <= 255
        && tool
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '*'))
}

fn decided_tools(
    prompt: &Prompt,
    tool_call_id: &str,
    verdict: &Verdict,
    plan_tool: Option<&str>,
) -> Vec<String> {
    let Some(output) = prompt.tool_output(tool_call_id) else {
        return Vec::new();
    };
    let plan = plan_tool == Some(output.function.as_str());
    let Some(calls) = output
        .input
        .get("calls")
        .and_then(Value::as_array)
        .filter(|_| plan)
    else {
        // Calls waiting together: the tools of those the decision approves.
        let together: Vec<&str> = prompt
            .calls_awaiting_approval()
            .into_iter()
            .filter(|tool| tool.result.is_awaiting_approval())
            .map(|tool| tool.function.as_str())
            .collect();
        if together.len() < 2 {
            return vec![output.function.clone()];
        }
        let mut tools: Vec<String> = Vec::new();
        for (index, tool) in together.into_iter().enumerate() {
            if verdict.rejection_at(index).is_none() && !tools.iter().any(|known| known == tool) {
                tools.push(tool.to_owned());
            }
        }
        return tools;
    };
    let mut tools: Vec<String> = Vec::new();
    for (index, call) in calls.iter().enumerate() {
        if verdict.rejection_at(index).is_some() {
            continue;
        }
        if let Some(tool) = call.get("tool").and_then(Value::as_str)
            && !tools.iter().any(|known| known == tool)
        {
            tools.push(tool.to_owned());
        }
    }
    tools
}

/// Where scopes are kept.
#[async_trait]
pub trait ScopeStore: Send + Sync {
    /// Keeps new grants.
    async fn grant(&self, grants: Vec<ScopeGrant>) -> anyhow::Result<()>;
    /// The grant in force that approves a call of `tool` in `prompt_id`, if any.
    async fn covering(
        &self,
        user_id: &str,
        conversation_id: Option<&str>,
        prompt_id: &str,
        tool: &str,
    ) -> anyhow::Result<Option<ScopeGrant>>;
    /// The user's grants in force, of one conversation (with its prompts' own) or all.
    async fn list(
        &self,
        user_id: &str,
        conversation_id: Option<&str>,
    ) -> anyhow::Result<Vec<ScopeGrant>>;
    /// Revokes the user's grant `id`: the revoked grant, `None` when they have no such grant.
    async fn revoke(&self, user_id: &str, id: &str) -> anyhow::Result<Option<ScopeGrant>>;
}

/// Scopes kept in memory, for a runtime without a database.
#[derive(Debug, Default)]
pub struct MemoryScopes {
    grants: Mutex<Vec<ScopeGrant>>,
}

impl MemoryScopes {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<ScopeGrant>> {
        self.grants
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[async_trait]
impl ScopeStore for MemoryScopes {
    async fn grant(&self, grants: Vec<ScopeGrant>) -> anyhow::Result<()> {
        self.lock().extend(grants);
        Ok(())
    }

    async fn covering(
        &self,
        user_id: &str,
        conversation_id: Option<&str>,
        prompt_id: &str,
        tool: &str,
    ) -> anyhow::Result<Option<ScopeGrant>> {
        let now = Utc::now();
        Ok(self
            .lock()
            .iter()
            .find(|grant| grant.covers(user_id, conversation_id, prompt_id, tool, now))
            .cloned())
    }

    async fn list(
        &self,
        user_id: &str,
        conversation_id: Option<&str>,
    ) -> anyhow::Result<Vec<ScopeGrant>> {
        let now = Utc::now();
        Ok(self
            .lock()
            .iter()
            .filter(|grant| grant.listed(user_id, conversation_id, now))
            .cloned()
            .collect())
    }

    async fn revoke(&self, user_id: &str, id: &str) -> anyhow::Result<Option<ScopeGrant>> {
        let mut grants = self.lock();
        let Some(grant) = grants
            .iter_mut()
            .find(|grant| grant.id == id && grant.user_id == user_id)
        else {
            return Ok(None);
        };
        if grant.revoked_at.is_none() {
            grant.revoked_at = Some(Utc::now());
        }
        Ok(Some(grant.clone()))
    }
}

/// The runtime's scope store, in its extensions: in memory until a store is attached.
#[derive(Default)]
pub struct ScopeSlot {
    attached: OnceLock<Arc<dyn ScopeStore>>,
    memory: Arc<MemoryScopes>,
}

impl std::fmt::Debug for ScopeSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopeSlot")
            .field("attached", &self.attached.get().is_some())
            .finish_non_exhaustive()
    }
}

impl ScopeSlot {
    /// Keeps scopes in `store` from now on (once; later calls change nothing).
    pub fn attach(&self, store: Arc<dyn ScopeStore>) {
        let _ = self.attached.set(store);
    }

    /// Where scopes are kept.
    pub fn store(&self) -> Arc<dyn ScopeStore> {
        match self.attached.get() {
            Some(store) => store.clone(),
            None => self.memory.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::{PromptOutput, ToolOutput, ToolResult};

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(parse_duration("90s"), Some(90));
        assert_eq!(parse_duration("10m"), Some(600));
        assert_eq!(parse_duration("2h"), Some(7200));
        assert_eq!(parse_duration("7d"), Some(604_800));
        assert_eq!(parse_duration("300"), Some(300));
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(parse_duration("5w"), None);
    }

    #[test]
    fn a_grant_covers_its_tools_in_its_place_until_it_ends() {
        let now = Utc::now();
        let grant = ScopeGrant {
            id: "s".into(),
            user_id: "alice".into(),
            reach: Reach::Conversation,
            tool: "todo.*".into(),
            conversation_id: Some("c".into()),
            prompt_id: "p".into(),
            tool_call_id: "t".into(),
            created_at: now,
            expires_at: Some(now + chrono::Duration::seconds(60)),
            revoked_at: None,
        };
        assert!(grant.covers("alice", Some("c"), "other", "todo.create", now));
        assert!(!grant.covers("bob", Some("c"), "other", "todo.create", now));
        assert!(!grant.covers("alice", Some("d"), "other", "todo.create", now));
        assert!(!grant.covers("alice", Some("c"), "other", "fs.write", now));
        let later = now + chrono::Duration::seconds(61);
        assert!(!grant.covers("alice", Some("c"), "other", "todo.create", later));
        let prompt = ScopeGrant {
            reach: Reach::Prompt,
            expires_at: None,
            ..grant
        };
        assert!(prompt.covers("alice", Some("c"), "p", "todo.create", later));
        assert!(!prompt.covers("alice", Some("c"), "other", "todo.create", now));
    }

    #[test]
    fn a_scope_on_calls_decided_together_covers_the_tools_it_approves() {
        let mut prompt = Prompt::new("alice", "classic", crate::ModelKind::Normal, None);
        prompt.state = crate::PromptState::WaitingForApproval;
        for (id, tool) in [("a", "fs.write"), ("b", "shell.exec"), ("c", "todo.create")] {
            prompt.output.push(PromptOutput::Tool(ToolOutput {
                id: id.into(),
                function: tool.into(),
                input: Value::Null,
                result: ToolResult::Pending {
                    reason: "needs approval".into(),
                    awaiting_approval: true,
                },
                start: Utc::now(),
                end: None,
                decision: None,
            }));
        }
        let scope = Scope {
            reach: Reach::Prompt,
            tool: None,
            expires_in: None,
        };
        let verdict = Verdict::ApproveOnly {
            calls: vec![0, 2],
            reason: None,
        };
        let grants =
            grants_of(&prompt, Some("c"), "b", &verdict, &scope, Utc::now(), None).unwrap();
        let tools: Vec<&str> = grants.iter().map(|grant| grant.tool.as_str()).collect();
        assert_eq!(tools, ["fs.write", "todo.create"]);
    }

    #[test]
    fn a_call_whose_input_lists_calls_is_not_a_plan_unless_its_mode_says_so() {
        // A model's own input may say anything: `calls` in it widens no scope.
        let mut prompt = Prompt::new("alice", "classic", crate::ModelKind::Normal, None);
        prompt.state = crate::PromptState::WaitingForApproval;
        prompt.output.push(PromptOutput::Tool(ToolOutput {
            id: "a".into(),
            function: "fs.write".into(),
            input: serde_json::json!({ "path": "x", "calls": [{ "tool": "*" }, { "tool": "shell.exec" }] }),
            result: ToolResult::Pending {
                reason: "writes x".into(),
                awaiting_approval: true,
            },
            start: Utc::now(),
            end: None,
            decision: None,
        }));
        let scope = Scope {
            reach: Reach::Conversation,
            tool: None,
            expires_in: None,
        };
        let grants = grants_of(
            &prompt,
            Some("c"),
            "a",
            &Verdict::Approve,
            &scope,
            Utc::now(),
            None,
        )
        .unwrap();
        let tools: Vec<&str> = grants.iter().map(|grant| grant.tool.as_str()).collect();
        assert_eq!(tools, ["fs.write"]);
        // A plan's listed tools are tool ids: a pattern among them is dropped.
        let grants = grants_of(
            &prompt,
            Some("c"),
            "a",
            &Verdict::Approve,
            &scope,
            Utc::now(),
            Some("fs.write"),
        )
        .unwrap();
        let tools: Vec<&str> = grants.iter().map(|grant| grant.tool.as_str()).collect();
        assert_eq!(tools, ["shell.exec"]);
    }
}
