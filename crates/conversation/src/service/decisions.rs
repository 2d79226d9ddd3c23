//! Decisions that are not lost. An approval, a rejection or a cancel is checked when it is
//! asked for (one that cannot apply is refused then, naming the calls that wait), stored
//! before it is answered, and applied exactly once: by the process that holds its prompt, or
//! by the one that adopts the prompt or takes it over when that process died. A live owner
//! elsewhere is woken at once ([`DecisionForwarder`]); every server also sweeps the stored
//! decisions, so a wake-up sent to a server that was dying is made good within seconds.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use agentic_core::{
    DecidedBy, ExecutorError, Prompt, PromptChange, PromptServiceError, PromptState, Verdict,
};
use async_trait::async_trait;
use chrono::Utc;
use sea_orm::sea_query::OnConflict;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set};
use serde::Serialize;

use super::{ConversationError, ConversationService, settle};
use crate::entity::{prompt, prompt_decision};
use crate::store::{Store, StoredPrompt};

/// How long a cancel sent to another server waits to see the prompt end before it answers
/// that the cancel is on its way.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// What a stored decision asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A person's verdict on the decision's waiting call.
    Decide(Verdict),
    /// The whole prompt stops where it stands.
    Cancel,
}

impl Action {
    /// As stored: the verdict's own JSON with who decided under `by` (when not the prompt's
    /// user), or `{"type": "cancel"}`.
    fn to_json(&self, by: Option<&DecidedBy>) -> serde_json::Result<String> {
        match self {
            Action::Decide(verdict) => {
                let mut value = serde_json::to_value(verdict)?;
                if let (Some(by), Some(object)) = (by, value.as_object_mut()) {
                    object.insert("by".to_owned(), serde_json::to_value(by)?);
                }
                serde_json::to_string(&value)
            }
            Action::Cancel => Ok(r#"{"type":"cancel"}"#.to_owned()),
        }
    }

    fn from_json(json: &str) -> serde_json::Result<(Self, Option<DecidedBy>)> {
        let mut value: serde_json::Value = serde_json::from_str(json)?;
        if value.get("type").and_then(serde_json::Value::as_str) == Some("cancel") {
            return Ok((Action::Cancel, None));
        }
        let by = match value.as_object_mut().and_then(|object| object.remove("by")) {
            Some(by) => Some(serde_json::from_value(by)?),
            None => None,
        };
        Ok((serde_json::from_value(value).map(Action::Decide)?, by))
    }
}

/// One decision about one prompt, stored until it is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub id: String,
    pub user_id: String,
    pub prompt_id: String,
    /// The call decided; empty for a cancel.
    pub tool_call_id: String,
    pub action: Action,
    /// Who decided, when not the user (a rule such as `[approval] timeout`).
    pub by: Option<DecidedBy>,
}

/// A call that waits for a person, as named to a caller whose decision cannot apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitingCall {
    pub tool_call_id: String,
    pub function: String,
}

/// Wakes the live server that holds a prompt, so that it applies the prompt's stored decisions
/// now instead of at its next sweep.
#[async_trait]
pub trait DecisionForwarder: Send + Sync {
    async fn wake(&self, instance: &str, prompt_id: &str) -> anyhow::Result<()>;
}

/// What a cancel did.
#[derive(Debug)]
pub enum CancelOutcome {
    /// The prompt ended `cancelled`, as stored.
    Ended(Box<StoredPrompt>),
    /// The prompt runs in another process; the cancel is stored and that process ends it (or
    /// whichever takes the prompt over, if it dies first).
    Sent,
}

/// The prompts whose decisions this process is applying, so that a wake-up and a sweep
/// arriving together do not apply one decision twice.
#[derive(Debug, Default)]
pub(super) struct Applying(Mutex<HashSet<String>>);

/// Held while decisions of one prompt are applied.
struct ApplyingGuard<'a> {
    applying: &'a Applying,
    prompt_id: String,
}

impl Applying {
    fn enter(&self, prompt_id: &str) -> Option<ApplyingGuard<'_>> {
        let mut applying = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        applying
            .insert(prompt_id.to_owned())
            .then(|| ApplyingGuard {
                applying: self,
                prompt_id: prompt_id.to_owned(),
            })
    }
}

impl Drop for ApplyingGuard<'_> {
    fn drop(&mut self) {
        self.applying
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.prompt_id);
    }
}

impl ConversationService {
    /// Decides a waiting tool call and applies the verdict: here, when this process holds or
    /// can adopt the prompt (the prompt runs on and is returned as it stands after), else by
    /// the live server that holds it (the prompt is returned as stored now).
    pub async fn decide(
        &self,
        user_id: &str,
        prompt_id: &str,
        tool_call_id: &str,
        verdict: Verdict,
    ) -> Result<Prompt, ConversationError> {
        self.submit_decision(user_id, prompt_id, tool_call_id, verdict)
            .await?;
        self.apply_decided(user_id, prompt_id).await
    }

    /// [`decide`](Self::decide), taken by a rule of the configuration instead of the user.
    pub(super) async fn decide_by_policy(
        &self,
        user_id: &str,
        prompt_id: &str,
        tool_call_id: &str,
        verdict: Verdict,
        policy: &str,
    ) -> Result<Prompt, ConversationError> {
        let by = DecidedBy::Policy {
            name: policy.to_owned(),
        };
        self.submit(user_id, prompt_id, tool_call_id, verdict, Some(by))
            .await?;
        self.apply_decided(user_id, prompt_id).await
    }

    async fn apply_decided(
        &self,
        user_id: &str,
        prompt_id: &str,
    ) -> Result<Prompt, ConversationError> {
        match self.apply_decisions(prompt_id).await? {
            Some(prompt) => Ok(prompt),
            None => Ok(self.prompt(user_id, prompt_id).await?.prompt),
        }
    }

    /// Checks and stores an approval or a rejection of `tool_call_id`, without applying it
    /// ([`apply_decisions`](Self::apply_decisions) does): once this returns, the decision is
    /// durable. Refused at once when the call does not wait for a person (the error names
    /// the calls that do), and when the call was already decided.
    pub async fn submit_decision(
        &self,
        user_id: &str,
        prompt_id: &str,
        tool_call_id: &str,
        verdict: Verdict,
    ) -> Result<Decision, ConversationError> {
        self.submit(user_id, prompt_id, tool_call_id, verdict, None)
            .await
    }

    async fn submit(
        &self,
        user_id: &str,
        prompt_id: &str,
        tool_call_id: &str,
        verdict: Verdict,
        by: Option<DecidedBy>,
    ) -> Result<Decision, ConversationError> {
        let stored = self.prompt(user_id, prompt_id).await?;
        let waiting = stored.prompt.calls_awaiting_approval();
        if !waiting.iter().any(|tool| tool.id == tool_call_id) {
            return Err(ConversationError::NotWaiting {
                prompt_id: prompt_id.to_owned(),
                tool_call_id: tool_call_id.to_owned(),
                waiting: waiting
                    .iter()
                    .map(|tool| WaitingCall {
                        tool_call_id: tool.id.clone(),
                        function: tool.function.clone(),
                    })
                    .collect(),
            });
        }
        if let Verdict::ApproveOnly { calls, .. } = &verdict {
            // The calls one decision covers: those a plan lists (its input's `calls`), or
            // those waiting together.
            let services = self.inner.runtime.services();
            let plan_tool = services.modes.plan_tool(&stored.prompt.mode);
            let covered = waiting
                .iter()
                .find(|tool| tool.id == tool_call_id)
                .filter(|tool| plan_tool == Some(tool.function.as_str()))
                .and_then(|tool| tool.input.get("calls"))
                .and_then(serde_json::Value::as_array)
                .map_or(waiting.len(), Vec::len);
            if let Some(past) = calls.iter().find(|place| **place >= covered) {
                return Err(ConversationError::BadDecision(format!(
                    "`calls` holds {past}, but the request covers {covered} call(s), at places \
                     0 to {}",
                    covered.saturating_sub(1)
                )));
            }
        }
        let decision = Decision {
            id: uuid::Uuid::new_v4().to_string(),
            user_id: user_id.to_owned(),
            prompt_id: prompt_id.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
            action: Action::Decide(verdict),
            by,
        };
        if !record(&self.inner.store, &decision).await? {
            return Err(ConversationError::AlreadyDecided {
                prompt_id: prompt_id.to_owned(),
                tool_call_id: tool_call_id.to_owned(),
            });
        }
        Ok(decision)
    }

    /// Applies the stored decisions of a prompt, if this process holds it or can adopt it
    /// (a prompt waiting for approval whose process is gone); else wakes the live server that
    /// holds it. Returns the prompt as the last decision applied here left it.
    pub async fn apply_decisions(
        &self,
        prompt_id: &str,
    ) -> Result<Option<Prompt>, ConversationError> {
        let prompts = self.inner.runtime.prompts();
        // A cancel does not wait behind an approval whose run is still going on.
        if prompts.get(prompt_id).is_some()
            && let Some(cancel) = pending(&self.inner.store, prompt_id)
                .await?
                .into_iter()
                .find(|decision| decision.action == Action::Cancel)
        {
            let stored = self.prompt(&cancel.user_id, prompt_id).await?;
            return self.apply_cancel(stored, &cancel).await;
        }
        let Some(_applying) = self.inner.applying.enter(prompt_id) else {
            // Another task applies them; it reads the decisions again before it stops.
            return Ok(None);
        };
        let mut last = None;
        loop {
            let decisions = pending(&self.inner.store, prompt_id).await?;
            let Some(decision) = decisions
                .iter()
                .find(|decision| decision.action == Action::Cancel)
                .or_else(|| decisions.first())
                .cloned()
            else {
                break;
            };
            let stored = self.prompt(&decision.user_id, prompt_id).await?;
            if stored.prompt.state.is_finished() {
                forget(&self.inner.store, &decision.id).await?;
                continue;
            }
            if decision.action == Action::Cancel {
                if !self.holds_or_adopts(&stored).await? {
                    break;
                }
                if let Some(ended) = self.apply_cancel(stored, &decision).await? {
                    last = Some(ended);
                }
                continue;
            }
            let still_waiting = stored
                .prompt
                .calls_awaiting_approval()
                .iter()
                .any(|tool| tool.id == decision.tool_call_id);
            if !still_waiting {
                // Applied before its row was removed (the process died in between).
                forget(&self.inner.store, &decision.id).await?;
                continue;
            }
            if !self.holds_or_adopts(&stored).await? {
                break;
            }
            let handle = prompts
                .get(prompt_id)
                .ok_or_else(|| PromptServiceError::NotActive(prompt_id.to_owned()))?;
            let Action::Decide(verdict) = &decision.action else {
                break;
            };
            let by = decision.by.clone().unwrap_or_else(|| DecidedBy::User {
                user_id: decision.user_id.clone(),
            });
            let result = prompts
                .decide_as(prompt_id, &decision.tool_call_id, verdict, by)
                .await;
            forget(&self.inner.store, &decision.id).await?;
            match settle(&self.inner, &stored.conversation_id, &handle, result).await {
                Ok(prompt) => last = Some(prompt),
                Err(ConversationError::Prompt(PromptServiceError::Executor(
                    ExecutorError::NotWaiting(_),
                ))) => {
                    tracing::warn!(prompt = %prompt_id, call = %decision.tool_call_id, "a stored decision no longer applied");
                }
                Err(error) => return Err(error),
            }
        }
        Ok(last)
    }

    /// Stops one of the user's prompts, running or waiting for approval: what it produced so
    /// far is kept, tool calls that had not finished get an error result, and it ends as
    /// `cancelled`, which frees its conversation for the next prompt. A prompt held by
    /// another live process is stopped there: the cancel is stored and sent, and this waits a
    /// few seconds to return the prompt as it ended.
    pub async fn cancel(
        &self,
        user_id: &str,
        prompt_id: &str,
    ) -> Result<CancelOutcome, ConversationError> {
        let stored = self.prompt(user_id, prompt_id).await?;
        if stored.prompt.state.is_finished() {
            return Err(ConversationError::NotCancellable {
                prompt_id: prompt_id.to_owned(),
                state: stored.prompt.state.as_str(),
            });
        }
        if self.inner.runtime.prompts().get(prompt_id).is_some()
            || (stored.prompt.state == PromptState::WaitingForApproval
                && self.holds_or_adopts(&stored).await?)
        {
            return Ok(CancelOutcome::Ended(Box::new(
                self.cancel_here(stored).await?,
            )));
        }
        let decision = Decision {
            id: uuid::Uuid::new_v4().to_string(),
            user_id: user_id.to_owned(),
            prompt_id: prompt_id.to_owned(),
            tool_call_id: String::new(),
            action: Action::Cancel,
            by: None,
        };
        // A cancel already on its way is the same cancel.
        record(&self.inner.store, &decision).await?;
        self.wake_owner(user_id, prompt_id).await?;
        let deadline = tokio::time::Instant::now() + CANCEL_WAIT;
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let now = self.prompt(user_id, prompt_id).await?;
            match now.prompt.state {
                PromptState::Cancelled => return Ok(CancelOutcome::Ended(Box::new(now))),
                state if state.is_finished() => {
                    return Err(ConversationError::NotCancellable {
                        prompt_id: prompt_id.to_owned(),
                        state: state.as_str(),
                    });
                }
                _ => {}
            }
        }
        Ok(CancelOutcome::Sent)
    }

    /// Ends a prompt this process holds (or one waiting in the store that it adopted) as
    /// `cancelled`, stores it and releases its conversation.
    async fn cancel_here(
        &self,
        mut stored: StoredPrompt,
    ) -> Result<StoredPrompt, ConversationError> {
        let prompt_id = stored.prompt.id.clone();
        let prompts = self.inner.runtime.prompts();
        let (state, event) = match prompts.get(&prompt_id) {
            Some(handle) => {
                let Some(ended) = prompts.cancel(&prompt_id).await else {
                    return Err(ConversationError::PromptNotFound(prompt_id));
                };
                if ended.state != PromptState::Cancelled {
                    // It finished on its own before the cancel reached it.
                    return Err(ConversationError::NotCancellable {
                        prompt_id,
                        state: ended.state.as_str(),
                    });
                }
                stored.prompt = ended;
                (Some(handle.lock().await.state().snapshot()), None)
            }
            // Waiting across a restart, with no executor in memory: ended in the store.
            None => (
                None,
                Some(agentic_core::close_cancelled(&mut stored.prompt)),
            ),
        };
        self.inner
            .store
            .save_prompt(&stored.prompt, PromptChange::Prompt)
            .await?;
        if let Some(event) = event {
            self.inner
                .runtime
                .services()
                .events
                .publish(&stored.prompt.user_id, event);
        }
        self.inner
            .store
            .release(&stored.conversation_id, &prompt_id, state)
            .await?;
        Ok(stored)
    }

    /// Whether this process holds the prompt now: it runs here, or it waited for approval in
    /// a process that is gone and this one adopted it (and rebuilt its executor). When a live
    /// process elsewhere holds it, that one is woken instead.
    async fn holds_or_adopts(&self, stored: &StoredPrompt) -> Result<bool, ConversationError> {
        let prompts = self.inner.runtime.prompts();
        let prompt_id = stored.prompt.id.as_str();
        // Getting or rebuilding the executor is one step, so two decisions arriving together
        // cannot both rebuild it (and run the tool twice).
        let resuming = self.inner.resuming.lock().await;
        if prompts.get(prompt_id).is_some() {
            return Ok(true);
        }
        if self.wake_owner(&stored.prompt.user_id, prompt_id).await? {
            return Ok(false);
        }
        if stored.prompt.state != PromptState::WaitingForApproval {
            // Running in a process that is gone: a server takes it over, and applies its
            // decisions then.
            return Ok(false);
        }
        if !self.inner.store.adopt_waiting(prompt_id).await? {
            // Another server adopted it a moment ago: the decision is that server's to apply.
            drop(resuming);
            self.wake_owner(&stored.prompt.user_id, prompt_id).await?;
            return Ok(false);
        }
        self.executor_for(stored).await?;
        Ok(true)
    }

    /// Wakes the live server other than this one that holds the prompt; false when there is
    /// none.
    async fn wake_owner(&self, user_id: &str, prompt_id: &str) -> Result<bool, ConversationError> {
        let Some(owner) = self.inner.store.live_owner(user_id, prompt_id).await? else {
            return Ok(false);
        };
        if let Some(forwarder) = self.inner.forwarder.get()
            && let Err(error) = forwarder.wake(&owner, prompt_id).await
        {
            // Stored all the same: the owner's sweep finds it.
            tracing::warn!(prompt = %prompt_id, %owner, error = %format!("{error:#}"), "could not wake the server holding a prompt");
        }
        Ok(true)
    }

    /// Applies the stored decisions of the prompts this process holds, and, when `adopt`,
    /// of prompts waiting for approval whose process is gone. Run now and again, so a
    /// decision whose wake-up was lost (its server was dying) is applied all the same.
    pub(super) async fn sweep_decisions(&self, adopt: bool) -> anyhow::Result<()> {
        let store = &self.inner.store;
        // Each decision's id with its prompt, read before the prompts' states: a decision
        // removed below because its prompt ended was stored before that was read.
        let stored: Vec<(String, String)> = prompt_decision::Entity::find()
            .select_only()
            .column(prompt_decision::Column::Id)
            .column(prompt_decision::Column::PromptId)
            .into_tuple()
            .all(store.connection())
            .await?;
        if stored.is_empty() {
            return Ok(());
        }
        let mut decided: Vec<String> = stored.iter().map(|(_, prompt)| prompt.clone()).collect();
        decided.sort();
        decided.dedup();
        let rows: Vec<(String, Option<String>, String)> = prompt::Entity::find()
            .select_only()
            .column(prompt::Column::Id)
            .column(prompt::Column::InstanceId)
            .column(prompt::Column::State)
            .filter(prompt::Column::Id.is_in(decided.clone()))
            .into_tuple()
            .all(store.connection())
            .await?;
        // Decisions about prompts that ended (interrupted ones included: continuing one is a
        // new start) no longer apply: whoever sweeps first removes them.
        let ended: Vec<String> = rows
            .iter()
            .filter(|(_, _, state)| {
                serde_json::from_value::<PromptState>(serde_json::Value::String(state.clone()))
                    .is_ok_and(PromptState::is_finished)
            })
            .map(|(id, _, _)| id.clone())
            .collect();
        let stale: Vec<String> = stored
            .iter()
            .filter(|(_, prompt)| ended.contains(prompt))
            .map(|(id, _)| id.clone())
            .collect();
        if !stale.is_empty() {
            store.forget_decisions(stale).await?;
        }
        let owners: HashMap<String, Option<String>> = rows
            .into_iter()
            .filter(|(id, _, _)| !ended.contains(id))
            .map(|(id, owner, _)| (id, owner))
            .collect();
        let me = store.instance_id().map(str::to_owned);
        let live = store.live_instances().await?;
        for prompt_id in decided {
            let Some(owner) = owners.get(&prompt_id).cloned() else {
                continue;
            };
            let mine = owner.is_some() && owner == me;
            let orphaned = owner.as_ref().is_none_or(|owner| !live.contains(owner));
            if !(mine || (adopt && orphaned)) {
                continue;
            }
            let service = self.clone();
            tokio::spawn(async move {
                if let Err(error) = service.apply_decisions(&prompt_id).await {
                    tracing::warn!(prompt = %prompt_id, error = %format!("{error:#}"), "could not apply a stored decision");
                }
            });
        }
        Ok(())
    }

    /// A stored cancel of a prompt this process takes over: ends it instead of running it on.
    pub(super) async fn cancel_taken_over(
        &self,
        stored: &StoredPrompt,
    ) -> Result<bool, ConversationError> {
        let Some(cancel) = pending(&self.inner.store, &stored.prompt.id)
            .await?
            .into_iter()
            .find(|decision| decision.action == Action::Cancel)
        else {
            return Ok(false);
        };
        self.apply_cancel(stored.clone(), &cancel).await?;
        Ok(true)
    }

    /// Applies a stored cancel here and removes it: the prompt as it ended, or `None` when it
    /// had finished on its own first.
    async fn apply_cancel(
        &self,
        stored: StoredPrompt,
        cancel: &Decision,
    ) -> Result<Option<Prompt>, ConversationError> {
        let ended = self.cancel_here(stored).await;
        forget(&self.inner.store, &cancel.id).await?;
        match ended {
            Ok(stored) => Ok(Some(stored.prompt)),
            Err(ConversationError::NotCancellable { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }
}

/// Stores a decision; false when one for the same call (or a cancel of the same prompt) is
/// already stored.
async fn record(store: &Store, decision: &Decision) -> anyhow::Result<bool> {
    let row = prompt_decision::ActiveModel {
        id: Set(decision.id.clone()),
        prompt_id: Set(decision.prompt_id.clone()),
        user_id: Set(decision.user_id.clone()),
        tool_call_id: Set(decision.tool_call_id.clone()),
        verdict: Set(decision.action.to_json(decision.by.as_ref())?),
        created_at: Set(Utc::now()),
    };
    let inserted = store
        .write_with(move |transaction| {
            let row = row.clone();
            Box::pin(async move {
                let inserted = prompt_decision::Entity::insert(row)
                    .on_conflict(
                        OnConflict::columns([
                            prompt_decision::Column::PromptId,
                            prompt_decision::Column::ToolCallId,
                        ])
                        .do_nothing()
                        .to_owned(),
                    )
                    .exec_without_returning(transaction)
                    .await?;
                Ok(inserted)
            })
        })
        .await?;
    Ok(inserted == 1)
}

/// The decisions stored for a prompt, oldest first.
async fn pending(store: &Store, prompt_id: &str) -> anyhow::Result<Vec<Decision>> {
    let rows = prompt_decision::Entity::find()
        .filter(prompt_decision::Column::PromptId.eq(prompt_id))
        .order_by_asc(prompt_decision::Column::CreatedAt)
        .all(store.connection())
        .await?;
    let mut decisions = Vec::with_capacity(rows.len());
    for row in rows {
        match Action::from_json(&row.verdict) {
            Ok((action, by)) => decisions.push(Decision {
                id: row.id,
                user_id: row.user_id,
                prompt_id: row.prompt_id,
                tool_call_id: row.tool_call_id,
                action,
                by,
            }),
            // From a newer release: left for a server that can read it.
            Err(error) => {
                tracing::warn!(decision = %row.id, %error, "skipped a decision this server cannot read");
            }
        }
    }
    Ok(decisions)
}

/// Removes the decisions `ids`, whose prompts ended.
/// Removes a decision that was applied, or that no longer applies.
async fn forget(store: &Store, id: &str) -> anyhow::Result<()> {
    let id = id.to_owned();
    store
        .write_with(move |transaction| {
            let id = id.clone();
            Box::pin(async move {
                prompt_decision::Entity::delete_by_id(id)
                    .exec(transaction)
                    .await?;
                Ok(())
            })
        })
        .await
}
