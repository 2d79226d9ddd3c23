//! Prompts: claimed, saved, journaled, read back with their timelines, archived.

use super::*;

impl Store {
    /// Stores a new prompt at the end of its conversation; returns its position.
    pub async fn insert_prompt(
        &self,
        conversation_id: &str,
        prompt: &Prompt,
    ) -> anyhow::Result<i64> {
        self.insert_claimed_prompt(conversation_id, prompt, None, None)
            .await
    }

    /// Stores a new prompt and, in the same transaction, hands the conversation's hold from
    /// `claim` (a token from [`Store::claim`]) to the prompt and sets `title`.
    pub async fn insert_claimed_prompt(
        &self,
        conversation_id: &str,
        prompt: &Prompt,
        claim: Option<&str>,
        title: Option<&str>,
    ) -> anyhow::Result<i64> {
        let now = Utc::now();
        let model = prompt::Model {
            id: prompt.id.clone(),
            conversation_id: conversation_id.to_owned(),
            user_id: prompt.user_id.clone(),
            position: 0,
            mode: prompt.mode.clone(),
            model: prompt.model.as_str().to_owned(),
            state: prompt.state.as_str().to_owned(),
            visible: prompt.visible,
            input: prompt.input.clone(),
            output: serde_json::to_value(&prompt.output)?,
            usage: serde_json::to_value(&prompt.usage)?,
            error: prompt.error.clone(),
            archived: false,
            instance_id: self.instance_id().map(str::to_owned),
            created_at: now,
            updated_at: now,
        };
        match self
            .write(Write::InsertPrompt {
                model,
                claim: claim.map(str::to_owned),
                title: title.map(str::to_owned),
            })
            .await?
        {
            Written::Position(position) => Ok(position),
            other => bail!("unexpected answer to a prompt insert: {other:?}"),
        }
    }

    /// Commits one change of a prompt. While it runs, the changed output goes to the journal;
    /// once it rests, the whole timeline is folded into the prompt row and the journal cleared.
    pub async fn save_prompt(&self, prompt: &Prompt, change: PromptChange) -> anyhow::Result<()> {
        let resting = prompt.state != PromptState::Running;
        let journal = match change {
            PromptChange::Output(index) if !resting => match prompt.output.get(index) {
                Some(output) => Some((i64::try_from(index)?, serde_json::to_value(output)?)),
                None => None,
            },
            _ => None,
        };
        self.write(Write::SavePrompt(PromptSave {
            id: prompt.id.clone(),
            state: prompt.state,
            visible: prompt.visible,
            usage: serde_json::to_value(&prompt.usage)?,
            error: prompt.error.clone(),
            instance_id: self.instance_id().map(str::to_owned),
            journal,
            output: if resting {
                Some(serde_json::to_value(&prompt.output)?)
            } else {
                None
            },
        }))
        .await?;
        Ok(())
    }

    /// Appends an entry to a prompt's mode journal ([`PromptCheckpoint::append_journal`]).
    ///
    /// [`PromptCheckpoint::append_journal`]: agentic_core::PromptCheckpoint::append_journal
    pub async fn append_journal(&self, prompt_id: &str, entry: &Value) -> anyhow::Result<()> {
        self.write(Write::AppendJournal {
            prompt_id: prompt_id.to_owned(),
            entry: serde_json::to_string(entry)?,
        })
        .await?;
        Ok(())
    }

    /// A prompt's mode journal, oldest entry first.
    pub async fn journal_entries(&self, prompt_id: &str) -> anyhow::Result<Vec<Value>> {
        let rows = crate::entity::prompt_journal::Entity::find()
            .filter(crate::entity::prompt_journal::Column::PromptId.eq(prompt_id))
            .order_by_asc(crate::entity::prompt_journal::Column::Id)
            .all(&self.db)
            .await?;
        rows.iter()
            .map(|row| Ok(serde_json::from_str(&row.entry)?))
            .collect()
    }

    /// Every prompt of a conversation, in order, archived ones included.
    pub async fn conversation_prompts(
        &self,
        conversation_id: &str,
    ) -> anyhow::Result<Vec<StoredPrompt>> {
        let snapshot = self.snapshot().await?;
        let rows = prompt::Entity::find()
            .filter(prompt::Column::ConversationId.eq(conversation_id))
            .order_by_asc(prompt::Column::Position)
            .all(&snapshot)
            .await?;
        let running: Vec<String> = rows
            .iter()
            .filter(|row| row.state == PromptState::Running.as_str())
            .map(|row| row.id.clone())
            .collect();
        let mut journal = if running.is_empty() {
            Vec::new()
        } else {
            prompt_output::Entity::find()
                .filter(prompt_output::Column::PromptId.is_in(running))
                .order_by_asc(prompt_output::Column::PromptId)
                .order_by_asc(prompt_output::Column::Position)
                .all(&snapshot)
                .await?
        };
        snapshot.commit().await?;
        let mut prompts = Vec::with_capacity(rows.len());
        for row in rows {
            let own: Vec<prompt_output::Model> = if row.state == PromptState::Running.as_str() {
                let (own, rest) = journal
                    .into_iter()
                    .partition(|entry| entry.prompt_id == row.id);
                journal = rest;
                own
            } else {
                Vec::new()
            };
            prompts.push(stored_prompt(row, own)?);
        }
        Ok(prompts)
    }

    /// One prompt of the user's; another user's is `None`.
    pub async fn prompt(
        &self,
        user_id: &str,
        prompt_id: &str,
    ) -> anyhow::Result<Option<StoredPrompt>> {
        let snapshot = self.snapshot().await?;
        let Some(row) = prompt::Entity::find_by_id(prompt_id.to_owned())
            .filter(prompt::Column::UserId.eq(user_id))
            .one(&snapshot)
            .await?
        else {
            return Ok(None);
        };
        let journal = journal(&snapshot, &row).await?;
        snapshot.commit().await?;
        Ok(Some(stored_prompt(row, journal)?))
    }

    /// The server whose process last ran the user's prompt, when that server is still alive
    /// and is not this one: where a decision about the prompt has to go.
    pub async fn live_owner(
        &self,
        user_id: &str,
        prompt_id: &str,
    ) -> anyhow::Result<Option<String>> {
        let Some(row) = prompt::Entity::find_by_id(prompt_id.to_owned())
            .filter(prompt::Column::UserId.eq(user_id))
            .one(&self.db)
            .await?
        else {
            return Ok(None);
        };
        let Some(owner) = row.instance_id else {
            return Ok(None);
        };
        if Some(owner.as_str()) == self.instance_id() {
            return Ok(None);
        }
        Ok(self
            .live_instances()
            .await?
            .contains(&owner)
            .then_some(owner))
    }

    /// Marks prompts archived and sets the summary that replaces them in history.
    pub async fn archive(
        &self,
        conversation_id: &str,
        prompt_ids: &[String],
        summary: &str,
    ) -> anyhow::Result<()> {
        self.write(Write::Archive {
            conversation_id: conversation_id.to_owned(),
            prompt_ids: prompt_ids.to_vec(),
            summary: summary.to_owned(),
        })
        .await?;
        Ok(())
    }
}

/// The outputs journaled since `row` was last saved whole: only a running prompt has any.
/// Read through the same snapshot as `row`: a prompt that comes to rest between two reads
/// moves its journal into its row, and the two reads apart would see neither.
pub(super) async fn journal(
    db: &impl ConnectionTrait,
    row: &prompt::Model,
) -> anyhow::Result<Vec<prompt_output::Model>> {
    if row.state != PromptState::Running.as_str() {
        return Ok(Vec::new());
    }
    Ok(prompt_output::Entity::find()
        .filter(prompt_output::Column::PromptId.eq(row.id.as_str()))
        .order_by_asc(prompt_output::Column::Position)
        .all(db)
        .await?)
}

pub(super) fn stored_prompt(
    row: prompt::Model,
    journal: Vec<prompt_output::Model>,
) -> anyhow::Result<StoredPrompt> {
    let state: PromptState = serde_json::from_value(Value::String(row.state.clone()))
        .with_context(|| format!("prompt {} has an unknown state {:?}", row.id, row.state))?;
    let model: ModelKind = row
        .model
        .parse()
        .map_err(|error: String| anyhow::anyhow!(error))?;
    let mut output: Vec<PromptOutput> = serde_json::from_value(row.output)
        .with_context(|| format!("prompt {} has an unreadable timeline", row.id))?;
    for entry in journal {
        let position = usize::try_from(entry.position)?;
        let item: PromptOutput = serde_json::from_value(entry.output)
            .with_context(|| format!("prompt {} has an unreadable output", row.id))?;
        if position < output.len() {
            output[position] = item;
        } else {
            output.push(item);
        }
    }
    let usage: PromptUsage = serde_json::from_value(row.usage).unwrap_or_default();
    Ok(StoredPrompt {
        prompt: Prompt {
            id: row.id,
            user_id: row.user_id,
            model,
            mode: row.mode,
            visible: row.visible,
            state,
            input: row.input,
            output,
            usage,
            error: row.error,
        },
        conversation_id: row.conversation_id,
        position: row.position,
        archived: row.archived,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}
