//! Taking over the prompts of a server that stopped, and recovering this one's after a
//! restart.

use super::*;
use crate::entity::prompt_decision;

impl Store {
    /// Makes this instance the owner of every `running` prompt whose instance is gone and that
    /// `resumable` accepts, one prompt at a time and only if no other instance took it first;
    /// returns the prompts it took, as stored.
    pub async fn take_over(
        &self,
        resumable: &(dyn Fn(&Prompt) -> bool + Send + Sync),
    ) -> anyhow::Result<Vec<StoredPrompt>> {
        let Some(me) = self.instance_id().map(str::to_owned) else {
            return Ok(Vec::new());
        };
        let owners = self.owners_of(&[PromptState::Running]).await?;
        if owners.is_empty() {
            return Ok(Vec::new());
        }
        let live = self.live_instances().await?;
        let mut taken = Vec::new();
        for (id, owner) in owners {
            if owner
                .as_ref()
                .is_some_and(|instance| live.contains(instance))
            {
                continue;
            }
            // Read whole only now: the live servers' prompts, usually all of them, are not.
            let Some(row) = prompt::Entity::find_by_id(id)
                .filter(prompt::Column::State.eq(PromptState::Running.as_str()))
                .one(&self.db)
                .await?
            else {
                continue;
            };
            let previous = row.instance_id.clone();
            if previous != owner {
                continue;
            }
            let journal = prompts::journal(&self.db, &row).await?;
            let Ok(stored) = stored_prompt(row, journal) else {
                continue;
            };
            if !resumable(&stored.prompt) {
                continue;
            }
            if self
                .reassign(&stored.prompt.id, PromptState::Running, previous, &me)
                .await?
            {
                taken.push(stored);
            }
        }
        Ok(taken)
    }

    /// The ids and owners of the prompts in `states`, without their outputs: what the sweeps
    /// look at before they read a prompt whole.
    async fn owners_of(
        &self,
        states: &[PromptState],
    ) -> anyhow::Result<Vec<(String, Option<String>)>> {
        Ok(prompt::Entity::find()
            .select_only()
            .column(prompt::Column::Id)
            .column(prompt::Column::InstanceId)
            .filter(prompt::Column::State.is_in(states.iter().map(|state| state.as_str())))
            .into_tuple()
            .all(&self.db)
            .await?)
    }

    /// Makes this process the owner of a prompt waiting for approval whose owner is gone, so
    /// that of two servers taking decisions about it at once only one rebuilds it (and runs
    /// the approved call). False when another instance took it first; true when it is
    /// already this one's.
    pub async fn adopt_waiting(&self, prompt_id: &str) -> anyhow::Result<bool> {
        let Some(me) = self.instance_id().map(str::to_owned) else {
            return Ok(true);
        };
        let Some(row) = prompt::Entity::find_by_id(prompt_id.to_owned())
            .one(&self.db)
            .await?
        else {
            return Ok(false);
        };
        if row.instance_id.as_deref() == Some(me.as_str()) {
            return Ok(true);
        }
        self.reassign(
            prompt_id,
            PromptState::WaitingForApproval,
            row.instance_id,
            &me,
        )
        .await
    }

    /// Makes instance `to` the owner of a prompt in `state` that `previous` owned, in one
    /// conditional `UPDATE`: of several servers trying at once, one wins (true).
    async fn reassign(
        &self,
        prompt_id: &str,
        state: PromptState,
        previous: Option<String>,
        to: &str,
    ) -> anyhow::Result<bool> {
        let (id, to) = (prompt_id.to_owned(), to.to_owned());
        let changed = self
            .write_with(move |transaction| {
                let (id, to, previous) = (id.clone(), to.clone(), previous.clone());
                Box::pin(async move {
                    let update = prompt::Entity::update_many()
                        .col_expr(
                            prompt::Column::InstanceId,
                            sea_orm::sea_query::Expr::value(Some(to)),
                        )
                        .filter(prompt::Column::Id.eq(id))
                        .filter(prompt::Column::State.eq(state.as_str()));
                    let update = match previous {
                        Some(previous) => update.filter(prompt::Column::InstanceId.eq(previous)),
                        None => update.filter(prompt::Column::InstanceId.is_null()),
                    };
                    Ok(update.exec(transaction).await?.rows_affected)
                })
            })
            .await?;
        Ok(changed == 1)
    }

    /// Run at startup and then now and again: every `running` prompt of an instance that is
    /// gone becomes `interrupted` with its pending tool results closed as errors, and so does
    /// every such prompt waiting for approval in a mode that cannot resume (`resumable` says
    /// which can). Their conversations are released. Prompts of live instances are theirs.
    pub async fn recover(
        &self,
        resumable: &(dyn Fn(&Prompt) -> bool + Send + Sync),
    ) -> anyhow::Result<Recovery> {
        let owners = self
            .owners_of(&[PromptState::Running, PromptState::WaitingForApproval])
            .await?;
        let claimed = conversation::Entity::find()
            .filter(conversation::Column::ActivePromptId.like("claim:%"))
            .all(&self.db)
            .await?;
        // Read after the prompts and the claims: an instance registers before it stores a
        // prompt or takes a conversation, so every instance named above is in this list if it
        // is alive.
        let live = self.live_instances().await?;
        let mut recovery = Recovery::default();
        // Conversations held by a claim token of a process that is gone (it died between
        // taking the conversation and storing its prompt) are released.
        for conversation in claimed {
            let Some(token) = conversation.active_prompt_id else {
                continue;
            };
            let owner = token.split(':').nth(1).unwrap_or_default();
            if !live.contains(owner) {
                self.release(&conversation.id, &token, None).await?;
            }
        }
        for (id, owner) in owners {
            if owner
                .as_ref()
                .is_some_and(|instance| live.contains(instance))
            {
                continue;
            }
            let Some(row) = prompt::Entity::find_by_id(id)
                .filter(prompt::Column::State.is_in([
                    PromptState::Running.as_str(),
                    PromptState::WaitingForApproval.as_str(),
                ]))
                .one(&self.db)
                .await?
            else {
                continue;
            };
            if row.instance_id != owner {
                continue;
            }
            let conversation_id = row.conversation_id.clone();
            let id = row.id.clone();
            let journal = prompts::journal(&self.db, &row).await?;
            let mut prompt = match stored_prompt(row, journal) {
                Ok(stored) => stored.prompt,
                Err(error) => {
                    tracing::error!(prompt = %id, error = %format!("{error:#}"), "cannot read a prompt left unfinished; leaving it as it is");
                    continue;
                }
            };
            if prompt.state == PromptState::WaitingForApproval && resumable(&prompt) {
                recovery.waiting.push(prompt.id.clone());
                continue;
            }
            // Someone asked to cancel it before its process died: it ends cancelled, as asked,
            // not interrupted to be continued.
            let cancels = self.stored_cancels(&prompt.id).await?;
            if !cancels.is_empty() {
                let event = agentic_core::close_cancelled(&mut prompt);
                self.save_prompt(&prompt, PromptChange::Prompt).await?;
                self.release(&conversation_id, &prompt.id, None).await?;
                self.forget_decisions(cancels).await?;
                recovery
                    .cancelled
                    .push((prompt.user_id.clone(), prompt.id.clone(), event));
                continue;
            }
            let was_waiting = prompt.state == PromptState::WaitingForApproval;
            interrupt(&mut prompt, was_waiting);
            self.save_prompt(&prompt, PromptChange::Prompt).await?;
            self.release(&conversation_id, &prompt.id, None).await?;
            recovery.interrupted.push(prompt.id);
        }
        if !recovery.interrupted.is_empty() {
            tracing::warn!(
                prompts = recovery.interrupted.len(),
                "marked prompts interrupted by the last shutdown"
            );
        }
        Ok(recovery)
    }
}

impl Store {
    /// The ids of the cancels stored for a prompt and not yet applied.
    async fn stored_cancels(&self, prompt_id: &str) -> anyhow::Result<Vec<String>> {
        let rows = prompt_decision::Entity::find()
            .filter(prompt_decision::Column::PromptId.eq(prompt_id))
            .all(&self.db)
            .await?;
        Ok(rows
            .into_iter()
            .filter(|row| {
                serde_json::from_str::<serde_json::Value>(&row.verdict)
                    .is_ok_and(|verdict| verdict["type"] == "cancel")
            })
            .map(|row| row.id)
            .collect())
    }

    /// Removes applied decisions.
    pub(crate) async fn forget_decisions(&self, ids: Vec<String>) -> anyhow::Result<()> {
        self.write_with(move |transaction| {
            let ids = ids.clone();
            Box::pin(async move {
                prompt_decision::Entity::delete_many()
                    .filter(prompt_decision::Column::Id.is_in(ids))
                    .exec(transaction)
                    .await?;
                Ok(())
            })
        })
        .await
    }
}

/// Ends a prompt as `interrupted`, closing its pending tool results as errors so the
/// conversation stays valid for the model.
pub fn interrupt(prompt: &mut Prompt, was_waiting: bool) {
    if was_waiting {
        prompt.close_pending_tools(
            agentic_core::ErrorKind::InterruptedWaiting,
            "Interrupted: the process stopped while this tool call waited for approval; it did \
             not run",
        );
    } else {
        prompt.close_pending_tools(agentic_core::ErrorKind::Interrupted, INTERRUPTED_TOOL_ERROR);
    }
    prompt.state = PromptState::Interrupted;
    prompt.error = Some(if was_waiting {
        "interrupted: the process stopped while the prompt waited for approval".to_owned()
    } else {
        "interrupted: the process stopped while the prompt was running".to_owned()
    });
}
